/*
 * ltide_autograd.c — autograd from Lua (x:requires_grad_(), loss:backward(), x:detach(),
 * tide.no_grad(fn), tide.set_grad_enabled(b), tide.autocast(dtype, fn); x.grad / x.requires_grad / x.grad_fn are
 * attributes in ltide_tensor.c) and the runtime: threads and memory (tide.collect()).
 */
#include "ltide.h"

static int t_requires_grad_(lua_State *L)
{
    lt_check(L, 1, "requires_grad_");
    bool on = true;
    if (!lua_isnoneornil(L, 2)) {
        if (lua_type(L, 2) != LUA_TBOOLEAN)
            return luaL_error(L, "requires_grad_: expected a boolean, got %s",
                              luaL_typename(L, 2));
        on = lua_toboolean(L, 2);
    }
    if (tide_requires_grad_(lt_check(L, 1, "requires_grad_"), on) < 0)
        return lt_raise(L, NULL);
    lua_settop(L, 1);
    return 1;
}

/* loss:backward([grad] [, {retain_graph = true}]) */
static int t_backward(lua_State *L)
{
    tide_tensor *root = lt_check(L, 1, "backward");
    tide_tensor *grad = NULL;
    int opt = 2;
    if (lua_type(L, 2) == LUA_TUSERDATA) {
        grad = lt_check(L, 2, "backward");
        opt = 3;
    } else if (lua_isnil(L, 2) && lua_gettop(L) >= 3) {
        opt = 3;
    }
    bool retain = false;
    if (!lua_isnoneornil(L, opt)) {
        if (lua_type(L, opt) != LUA_TTABLE)
            return luaL_error(L, "backward: expected a gradient tensor and/or an options table "
                              "{retain_graph = true}, got %s", luaL_typename(L, opt));
        static const char *const keys[] = {"retain_graph", NULL};
        lt_checkkeys(L, opt, "backward", keys);
        int type = lua_getfield(L, opt, "retain_graph");
        if (type != LUA_TNIL && type != LUA_TBOOLEAN)
            return luaL_error(L, "backward: retain_graph must be a boolean");
        retain = lua_toboolean(L, -1);
    }
    if (tide_backward(root, grad, retain) < 0)
        return lt_raise(L, NULL);
    return 0;
}

static int t_detach(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "detach");
    lua_settop(L, 1);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_detach(x), true);
}

/* Runs fn(...) with grad mode set to enabled, restoring the previous mode even when fn raises;
 * returns fn's results. */
static int with_grad_mode(lua_State *L, bool enabled, const char *op)
{
    if (lua_type(L, 1) != LUA_TFUNCTION)
        return luaL_error(L, "%s: expected a function, got %s", op, luaL_typename(L, 1));
    tide_clear_error();
    bool prev = tide_set_grad_enabled(enabled);
    lt_check_c_error(L);
    int status = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
    tide_set_grad_enabled(prev);
    if (status != LUA_OK)
        return lua_error(L);
    return lua_gettop(L);
}
static int f_no_grad(lua_State *L) { return with_grad_mode(L, false, "no_grad"); }
static int f_enable_grad(lua_State *L) { return with_grad_mode(L, true, "enable_grad"); }

/* set_grad_enabled(b) returns the previous setting. */
static int f_set_grad_enabled(lua_State *L)
{
    if (lua_type(L, 1) != LUA_TBOOLEAN)
        return luaL_error(L, "set_grad_enabled: expected a boolean, got %s", luaL_typename(L, 1));
    tide_clear_error();
    bool prev = tide_set_grad_enabled(lua_toboolean(L, 1));
    lt_check_c_error(L);
    lua_pushboolean(L, prev);
    return 1;
}

static int f_is_grad_enabled(lua_State *L)
{
    tide_clear_error();
    bool on = tide_is_grad_enabled();
    lt_check_c_error(L);
    lua_pushboolean(L, on);
    return 1;
}

/* autocast(dtype, fn, ...): fn(...) with the thread's autocast dtype set ("float16",
 * "bfloat16"; "float32" or nil: off), the previous one restored even when fn raises; returns
 * fn's results. */
static int f_autocast(lua_State *L)
{
    tide_dtype dt = lt_checkdtype(L, 1, "autocast", TIDE_FLOAT32);
    if (dt != TIDE_FLOAT32 && dt != TIDE_FLOAT16 && dt != TIDE_BFLOAT16)
        return luaL_error(L, "autocast: the dtype must be \"float16\", \"bfloat16\" or "
                          "\"float32\"/nil (off), got %s", tide_dtype_name(dt));
    bool callable = lua_type(L, 2) == LUA_TFUNCTION;
    if (!callable && luaL_getmetafield(L, 2, "__call") != LUA_TNIL) { /* a tide.jit function */
        lua_pop(L, 1);
        callable = true;
    }
    if (!callable)
        return luaL_error(L, "autocast: expected a function after the dtype, got %s",
                          luaL_typename(L, 2));
    lua_remove(L, 1);
    int prev = tide_get_autocast();
    tide_set_autocast(dt == TIDE_FLOAT32 ? TIDE_AUTOCAST_OFF : (int)dt);
    int status = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
    tide_set_autocast(prev);
    if (status != LUA_OK)
        return lua_error(L);
    return lua_gettop(L);
}

/* get_autocast(): the thread's autocast dtype name, or nil when off. */
static int f_get_autocast(lua_State *L)
{
    int dt = tide_get_autocast();
    if (dt == TIDE_AUTOCAST_OFF)
        lua_pushnil(L);
    else
        lua_pushstring(L, tide_dtype_name((tide_dtype)dt));
    return 1;
}

/* ---- runtime ----------------------------------------------------------------------------- */

static int f_set_num_threads(lua_State *L)
{
    int64_t n = lt_checkint(L, 1, "set_num_threads", "the thread count");
    if (n < 1 || n > 4096)
        return luaL_error(L, "set_num_threads: expected 1..4096 threads, got %I", (lua_Integer)n);
    tide_set_num_threads((int)n);
    return 0;
}

static int f_get_num_threads(lua_State *L)
{
    lua_pushinteger(L, tide_get_num_threads());
    return 1;
}

static void push_memory(lua_State *L)
{
    size_t in_use = 0, cached = 0;
    tide_memory_stats(&in_use, &cached);
    lua_createtable(L, 0, 3);
    lua_pushinteger(L, (lua_Integer)in_use);
    lua_setfield(L, -2, "in_use");
    lua_pushinteger(L, (lua_Integer)tide_memory_peak(false));
    lua_setfield(L, -2, "peak");
    lua_pushinteger(L, (lua_Integer)cached);
    lua_setfield(L, -2, "cached");
}

static int f_memory_stats(lua_State *L)
{
    push_memory(L);
    return 1;
}

/* tide.reset_peak_memory_stats(): memory_stats().peak starts again from the bytes in use. */
static int f_reset_peak(lua_State *L)
{
    (void)L;
    tide_memory_peak(true);
    return 0;
}

/* tide.collect(): a full Lua collection (so unreachable tensors are freed), then the cached
 * blocks go back to the system. Returns the memory statistics afterwards. */
static int f_collect(lua_State *L)
{
    lua_gc(L, LUA_GCCOLLECT);
    tide_empty_cache();
    push_memory(L);
    return 1;
}

static int f_empty_cache(lua_State *L)
{
    (void)L;
    tide_empty_cache();
    return 0;
}

static const lt_reg autograd_regs[] = {
    {"requires_grad_", t_requires_grad_, LT_METHOD},
    {"backward", t_backward, LT_BOTH},
    {"detach", t_detach, LT_BOTH},
    {"no_grad", f_no_grad, LT_FUNCTION},
    {"enable_grad", f_enable_grad, LT_FUNCTION},
    {"set_grad_enabled", f_set_grad_enabled, LT_FUNCTION},
    {"is_grad_enabled", f_is_grad_enabled, LT_FUNCTION},
    {"autocast", f_autocast, LT_FUNCTION},
    {"get_autocast", f_get_autocast, LT_FUNCTION},
    {"set_num_threads", f_set_num_threads, LT_FUNCTION},
    {"get_num_threads", f_get_num_threads, LT_FUNCTION},
    {"memory_stats", f_memory_stats, LT_FUNCTION},
    {"reset_peak_memory_stats", f_reset_peak, LT_FUNCTION},
    {"collect", f_collect, LT_FUNCTION},
    {"empty_cache", f_empty_cache, LT_FUNCTION},
    {NULL, NULL, 0},
};

void lt_open_autograd(lua_State *L, int mt, int methods, int module)
{
    lt_setfuncs(L, autograd_regs, mt, methods, module);
}
