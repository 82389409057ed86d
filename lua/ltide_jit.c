/*
 * ltide_jit.c — tide.jit(fn [, opts]) from Lua: a callable that runs fn under a trace session
 * (jit/README.md). Each call traces fn again; the trace's structure is the key of the compile
 * cache, so a call whose structure was seen before compiles nothing and runs the cached code.
 * Reading a tensor's data in fn (:item(), tostring, :totable()) is a graph break: the pending
 * segment runs and tracing goes on, so Lua control flow on tensor values is always right.
 *
 * opts: {max_signatures = 8}: after that many distinct argument signatures (shapes, dtypes,
 * requires_grad of the tensor arguments) the function falls back to eager for good, and says
 * once (TIDE_LOG=jit) which argument and dim kept changing. A shape that differs from one met
 * before only in sizes of 2 or more is the same signature: those dims become dynamic and the
 * plans take them at run time (jit/README.md, "Symbolic dims"). {dynamic = false} keeps a plan
 * per shape; {dynamic = {[1] = {1}}} declares argument 1's dim 1 dynamic from the first call.
 *   f:stats() -> {compiles, hits, misses, breaks, fallbacks, compile_ms, dynamic_dims,
 *                 recompile_reasons}
 */
#include <string.h>

#include "ltide.h"

#define JIT_MT "tide.jit_function"
#define MAX_ARGS 64 /* tensor arguments the signature looks at (jit/signatures.c) */

typedef struct lt_jit {
    tide_jit_function *fn; /* signatures and the fallback (jit/signatures.c) */
    lua_State *L;
    char where[256];
    int gc_mode; /* the collector's mode when first called (LUA_GCGEN, LUA_GCINC), 0 before */
} lt_jit;

static const char *where_cb(void *ctx)
{
    lt_jit *j = ctx;
    lua_State *L = j->L;
    j->where[0] = 0;
    if (!L)
        return j->where;
    for (int level = 1; level < 4; level++) {
        luaL_where(L, level);
        const char *w = lua_tostring(L, -1);
        if (w && *w) {
            snprintf(j->where, sizeof j->where, "%s", w);
            lua_pop(L, 1);
            size_t n = strlen(j->where);
            while (n && (j->where[n - 1] == ' ' || j->where[n - 1] == ':'))
                j->where[--n] = 0;
            break;
        }
        lua_pop(L, 1);
    }
    return j->where;
}

/* At a graph break: dead Lua temporaries must not become results of the segment. */
static void break_cb(void *ctx)
{
    lt_jit *j = ctx;
    if (j->L)
        lua_gc(j->L, LUA_GCCOLLECT);
}

/* Whether the call with arguments at first..top is traced: the tensor arguments, and the Lua
 * types of the others, go to the function's signatures (it may fall back to eager for good). */
static bool admit(lua_State *L, lt_jit *j, int first, int top)
{
    tide_tensor *args[MAX_ARGS];
    int n = 0;
    uint64_t other = 0;
    for (int i = first; i <= top; i++) {
        tide_tensor *t = lt_totensor(L, i);
        if (n < MAX_ARGS)
            args[n++] = t;
        if (!t || n == MAX_ARGS)
            other = (other ^ (uint64_t)lua_type(L, i)) * 0x100000001b3ull +
                    (uint64_t)(i - first + 2); /* the argument's place, as 2.. */
    }
    j->L = L;
    return tide_jit_function_admit(j->fn, args, n, other, where_cb(j)) == 1;
}

/* The collector's mode, asked once per jit function: Lua can only tell it by switching, so an
 * incremental collector is switched back at once (one full collection, once). A program that
 * changes modes later only costs compiles: a dead temporary still referenced when a segment
 * ends is computed as one of its results, never a wrong value. */
static int collector_mode(lua_State *L, lt_jit *j)
{
    if (!j->gc_mode) {
        j->gc_mode = lua_gc(L, LUA_GCGEN, 0, 0);
        if (j->gc_mode == LUA_GCINC)
            lua_gc(L, LUA_GCINC, 0, 0, 0);
    }
    return j->gc_mode;
}

static int jit_call(lua_State *L)
{
    lt_jit *j = luaL_checkudata(L, 1, JIT_MT);
    int nargs = lua_gettop(L) - 1;
    /* self, fn, args...: self stays on the stack, so a temporary (tide.jit(f)(x)) is not
     * collected by the collections below while its call runs */
    lua_getiuservalue(L, 1, 1);
    lua_insert(L, 2);
    if (!admit(L, j, 3, nargs + 2)) { /* eager, or inlined into an outer trace */
        j->L = NULL;
        lua_call(L, nargs, LUA_MULTRET);
        return lua_gettop(L) - 1;
    }
    if (tide_jit_trace_begin_function(j->fn, where_cb, j) < 0)
        return lt_raise(L, NULL);
    tide_jit_trace_on_break(break_cb, j);
    /* Temporaries Lua no longer references must not count as results of the segment: they are
     * collected before it ends. The generational collector (the tide executable's) finds them
     * all with a young collection when none ran during the call, so it pauses for the call: a
     * full collection instead cost ~20 us a call, more with a big Lua heap. */
    bool young = collector_mode(L, j) == LUA_GCGEN && lua_gc(L, LUA_GCISRUNNING);
    if (young)
        lua_gc(L, LUA_GCSTOP);
    int status = lua_pcall(L, nargs, LUA_MULTRET, 0);
    if (young) {
        lua_gc(L, LUA_GCRESTART);
        lua_gc(L, LUA_GCSTEP, 0);
    } else {
        lua_gc(L, LUA_GCCOLLECT);
    }
    int rc = tide_jit_trace_end();
    j->L = NULL;
    if (status != LUA_OK)
        return lua_error(L);
    if (rc < 0)
        return lt_raise(L, NULL);
    return lua_gettop(L) - 1;
}

static void push_stats(lua_State *L, const tide_jit_stats *s)
{
    lua_createtable(L, 0, 6);
    lua_pushinteger(L, s->compiles);
    lua_setfield(L, -2, "compiles");
    lua_pushinteger(L, s->hits);
    lua_setfield(L, -2, "hits");
    lua_pushinteger(L, s->misses);
    lua_setfield(L, -2, "misses");
    lua_pushinteger(L, s->breaks);
    lua_setfield(L, -2, "breaks");
    lua_pushinteger(L, s->fallbacks);
    lua_setfield(L, -2, "fallbacks");
    lua_pushnumber(L, s->compile_ms);
    lua_setfield(L, -2, "compile_ms");
}

/* f:stats() adds the function's dynamic dims ({{arg, dim}, ...}, 1-based) and its latest
 * recompile reasons (strings, oldest first). */
static void push_dynamic(lua_State *L, const tide_jit_function *f)
{
    int args[64], dims[64];
    int n = tide_jit_function_dynamic_dims(f, args, dims, 64);
    lua_createtable(L, n < 64 ? n : 64, 0);
    for (int i = 0; i < n && i < 64; i++) {
        lua_createtable(L, 2, 0);
        lua_pushinteger(L, args[i] + 1);
        lua_rawseti(L, -2, 1);
        lua_pushinteger(L, dims[i] + 1);
        lua_rawseti(L, -2, 2);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "dynamic_dims");
    lua_newtable(L);
    const char *r;
    for (int i = 0; (r = tide_jit_function_recompile_reason(f, i)); i++) {
        lua_pushstring(L, r);
        lua_rawseti(L, -2, i + 1);
    }
    lua_setfield(L, -2, "recompile_reasons");
}

static int jit_stats(lua_State *L)
{
    lt_jit *j = luaL_checkudata(L, 1, JIT_MT);
    push_stats(L, tide_jit_function_stats(j->fn));
    push_dynamic(L, j->fn);
    return 1;
}

static int jit_gc(lua_State *L)
{
    lt_jit *j = luaL_checkudata(L, 1, JIT_MT);
    tide_jit_function_free(j->fn);
    j->fn = NULL;
    return 0;
}

static int jit_tostring(lua_State *L)
{
    lt_jit *j = luaL_checkudata(L, 1, JIT_MT);
    const tide_jit_stats *st = tide_jit_function_stats(j->fn);
    lua_pushfstring(L, "tide.jit function (%d compiles, %d hits%s)", (int)st->compiles,
                    (int)st->hits, tide_jit_function_is_eager(j->fn) ? ", eager" : "");
    return 1;
}

/* One entry of opts.dynamic: [arg] = {dim, ...} (1-based) into f. */
static void declare_dynamic(lua_State *L, tide_jit_function *f, int arg_index, int dims_index)
{
    if (!lua_isinteger(L, arg_index) || lua_tointeger(L, arg_index) < 1 ||
        lua_tointeger(L, arg_index) > 16 || !lua_istable(L, dims_index))
        luaL_error(L, "jit: dynamic = {[argument] = {dim, ...}}: arguments are 1..16, each with "
                      "a table of dims (got [%s] = %s)", luaL_tolstring(L, arg_index, NULL),
                   luaL_typename(L, dims_index));
    uint32_t mask = 0;
    lua_Integer n = luaL_len(L, dims_index);
    for (lua_Integer k = 1; k <= n; k++) {
        lua_geti(L, dims_index, k);
        lua_Integer d = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : 0;
        if (d < 1 || d > TIDE_MAX_DIMS)
            luaL_error(L, "jit: dynamic: argument %d: dims are 1..%d, got %s",
                       (int)lua_tointeger(L, arg_index), TIDE_MAX_DIMS, luaL_tolstring(L, -1, NULL));
        mask |= 1u << (d - 1);
        lua_pop(L, 1);
    }
    if (tide_jit_function_set_dynamic(f, (int)lua_tointeger(L, arg_index) - 1, mask) < 0)
        lt_raise(L, NULL);
}

/* opts.dynamic (at the top of the stack): false (a plan per shape), true (the default:
 * dims that change become symbolic), or {[arg] = {dims}} declared symbolic from the start. */
static void set_dynamic(lua_State *L, tide_jit_function *f)
{
    int t = lua_gettop(L);
    if (lua_isboolean(L, t)) {
        tide_jit_function_set_static(f, !lua_toboolean(L, t));
        return;
    }
    if (!lua_istable(L, t))
        luaL_error(L, "jit: dynamic must be true, false or {[argument] = {dim, ...}}, got %s",
                   luaL_typename(L, t));
    lua_pushnil(L);
    while (lua_next(L, t)) {
        declare_dynamic(L, f, lua_gettop(L) - 1, lua_gettop(L));
        lua_pop(L, 1);
    }
}

/* tide.jit(fn [, {max_signatures = 8, dynamic = true}]) */
static int f_jit(lua_State *L)
{
    luaL_checktype(L, 1, LUA_TFUNCTION);
    int max_sigs = 8;
    if (!lua_isnoneornil(L, 2)) {
        luaL_checktype(L, 2, LUA_TTABLE);
        static const char *const allowed[] = {"max_signatures", "dynamic", NULL};
        lt_checkkeys(L, 2, "jit", allowed);
        if (lt_getoption(L, 2, "max_signatures") != LUA_TNIL) {
            int64_t v = lt_checkint(L, -1, "jit", "max_signatures");
            max_sigs = (int)(v > 1000000 ? 1000000 : v < -1000000 ? -1000000 : v);
        }
        lua_pop(L, 1);
    }
    lt_jit *j = lua_newuserdatauv(L, sizeof *j, 1);
    memset(j, 0, sizeof *j);
    luaL_setmetatable(L, JIT_MT); /* __gc frees fn, set or not */
    if (!(j->fn = tide_jit_function_new(max_sigs)))
        return lt_raise(L, NULL);
    if (!lua_isnoneornil(L, 2)) {
        if (lt_getoption(L, 2, "dynamic") != LUA_TNIL)
            set_dynamic(L, j->fn);
        lua_pop(L, 1);
    }
    lua_pushvalue(L, 1);
    lua_setiuservalue(L, -2, 1);
    return 1;
}

static int f_jit_stats(lua_State *L)
{
    tide_jit_stats s;
    tide_jit_global_stats(&s);
    push_stats(L, &s);
    return 1;
}

void lt_open_jit(lua_State *L, int mt, int methods, int module)
{
    (void)methods;
    if (luaL_newmetatable(L, JIT_MT)) {
        lua_pushvalue(L, mt); /* lt_totensor recognizes tensors by this upvalue */
        lua_pushcclosure(L, jit_call, 1);
        lua_setfield(L, -2, "__call");
        lua_pushcfunction(L, jit_tostring);
        lua_setfield(L, -2, "__tostring");
        lua_pushcfunction(L, jit_gc);
        lua_setfield(L, -2, "__gc");
        lua_createtable(L, 0, 1);
        lua_pushcfunction(L, jit_stats);
        lua_setfield(L, -2, "stats");
        lua_setfield(L, -2, "__index");
    }
    lua_pop(L, 1);
    lua_pushcfunction(L, f_jit);
    lua_setfield(L, module, "jit");
    lua_pushcfunction(L, f_jit_stats);
    lua_setfield(L, module, "jit_stats");
}
