/*
 * ltide_dist.c — the C side of tide.distributed (lua/tide/distributed.lua wraps these):
 *   tide._dist_init(timeout|nil), _dist_rank(), _dist_world_size(), _dist_is_initialized(),
 *   _dist_available(), _dist_barrier(), _dist_set_timeout(s), _dist_abort(code)
 *   tide._all_reduce(t, op, async), _broadcast(t, root, async), _all_gather(t, async),
 *   _reduce_scatter(t, op, async): op is a tide_reduce_op number, root a 0-based rank; async
 *   returns a work userdata with :wait() (the result tensor) and :is_completed().
 */
#include "ltide.h"

#define WORK_MT "tide.work"

typedef struct work_box {
    tide_work *w;
} work_box;

static int f_init(lua_State *L)
{
    double timeout = luaL_optnumber(L, 1, 0);
    if (tide_dist_init(timeout) < 0)
        return lt_raise(L, "distributed.init failed");
    return 0;
}

static int f_rank(lua_State *L)
{
    lua_pushinteger(L, tide_dist_rank());
    return 1;
}

static int f_world_size(lua_State *L)
{
    lua_pushinteger(L, tide_dist_world_size());
    return 1;
}

static int f_is_initialized(lua_State *L)
{
    lua_pushboolean(L, tide_dist_is_initialized());
    return 1;
}

static int f_available(lua_State *L)
{
    lua_pushboolean(L, tide_dist_available());
    return 1;
}

static int f_barrier(lua_State *L)
{
    if (tide_dist_barrier() < 0)
        return lt_raise(L, "barrier failed");
    return 0;
}

static int f_set_timeout(lua_State *L)
{
    if (tide_dist_set_timeout(luaL_checknumber(L, 1)) < 0)
        return lt_raise(L, "set_timeout failed");
    return 0;
}

static int f_abort(lua_State *L)
{
    tide_dist_abort((int)luaL_optinteger(L, 1, 1));
    return 0;
}

/* Pushes the box a work will own (before the C call, per the leak rule of ltide.h). */
static work_box *new_work_box(lua_State *L)
{
    work_box *b = lua_newuserdatauv(L, sizeof *b, 0);
    b->w = NULL;
    luaL_setmetatable(L, WORK_MT);
    return b;
}

static int push_work(lua_State *L, work_box *b, tide_work *w, const char *op)
{
    if (!w)
        return lt_raise(L, op);
    b->w = w;
    return 1;
}

/* f(t, arg, async) for the in-place ones: t itself back, or a work. */
static int in_place(lua_State *L, const char *op, bool broadcast)
{
    tide_tensor *t = lt_check(L, 1, op);
    int arg = (int)luaL_checkinteger(L, 2);
    if (lua_toboolean(L, 3)) {
        work_box *b = new_work_box(L);
        return push_work(L, b, broadcast ? tide_broadcast_async(t, arg)
                                         : tide_all_reduce_async(t, (tide_reduce_op)arg), op);
    }
    if ((broadcast ? tide_broadcast_(t, arg) : tide_all_reduce_(t, (tide_reduce_op)arg)) < 0)
        return lt_raise(L, op);
    lua_settop(L, 1);
    return 1;
}

static int f_all_reduce(lua_State *L) { return in_place(L, "all_reduce", false); }
static int f_broadcast(lua_State *L) { return in_place(L, "broadcast", true); }

/* f(t, op, async) for the ones with a new result. */
static int fresh(lua_State *L, const char *op, bool gather)
{
    tide_tensor *t = lt_check(L, 1, op);
    int red = gather ? TIDE_REDUCE_SUM : (int)luaL_checkinteger(L, 2);
    if (lua_toboolean(L, 3)) {
        work_box *b = new_work_box(L);
        return push_work(L, b, gather ? tide_all_gather_async(t)
                                      : tide_reduce_scatter_async(t, (tide_reduce_op)red), op);
    }
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, gather ? tide_all_gather(t) : tide_reduce_scatter(t, (tide_reduce_op)red),
                   false);
}

static int f_all_gather(lua_State *L) { return fresh(L, "all_gather", true); }
static int f_reduce_scatter(lua_State *L) { return fresh(L, "reduce_scatter", false); }

static work_box *check_work(lua_State *L)
{
    work_box *b = luaL_checkudata(L, 1, WORK_MT);
    if (!b->w)
        luaL_error(L, "work: already waited and freed");
    return b;
}

/* work:wait(): the result (t itself for all_reduce and broadcast); a second wait returns it
 * again. */
static int work_wait(lua_State *L)
{
    work_box *wb = check_work(L);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_work_wait(wb->w), false);
}

static int work_is_completed(lua_State *L)
{
    lua_pushboolean(L, tide_work_is_completed(check_work(L)->w));
    return 1;
}

static int work_gc(lua_State *L)
{
    work_box *b = luaL_checkudata(L, 1, WORK_MT);
    tide_work_free(b->w);
    b->w = NULL;
    return 0;
}

static const lt_reg dist_regs[] = {
    {"_dist_init", f_init, LT_FUNCTION},
    {"_dist_rank", f_rank, LT_FUNCTION},
    {"_dist_world_size", f_world_size, LT_FUNCTION},
    {"_dist_is_initialized", f_is_initialized, LT_FUNCTION},
    {"_dist_available", f_available, LT_FUNCTION},
    {"_dist_barrier", f_barrier, LT_FUNCTION},
    {"_dist_set_timeout", f_set_timeout, LT_FUNCTION},
    {"_dist_abort", f_abort, LT_FUNCTION},
    {"_all_reduce", f_all_reduce, LT_FUNCTION},
    {"_broadcast", f_broadcast, LT_FUNCTION},
    {"_all_gather", f_all_gather, LT_FUNCTION},
    {"_reduce_scatter", f_reduce_scatter, LT_FUNCTION},
    {NULL, NULL, 0},
};

void lt_open_dist(lua_State *L, int mt, int methods, int module)
{
    if (luaL_newmetatable(L, WORK_MT)) {
        static const luaL_Reg meta[] = {{"__gc", work_gc}, {"__close", work_gc}, {NULL, NULL}};
        luaL_setfuncs(L, meta, 0);
        lua_newtable(L);
        static const luaL_Reg methods_[] = {{"wait", work_wait},
                                            {"is_completed", work_is_completed},
                                            {NULL, NULL}};
        lua_pushvalue(L, mt); /* upvalue 1, as lt_newbox expects */
        luaL_setfuncs(L, methods_, 1);
        lua_setfield(L, -2, "__index");
        lua_pushstring(L, "work");
        lua_setfield(L, -2, "__name");
    }
    lua_pop(L, 1);
    lt_setfuncs(L, dist_regs, mt, methods, module);
}
