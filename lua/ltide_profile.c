/*
 * ltide_profile.c — tide.profile(fn [, {trace = path, print = true}]) from Lua (docs/profile.md).
 * Runs fn under tide_profile_begin/end and returns the report (rows sorted by total time, and
 * the summary as fields), then fn's results. The thread's source-line callback
 * (tide_profile_set_where) names the Lua line of each eager op; tide.jit's own callback names
 * the line that traced each node. With TIDE_PROFILE set, the module's state is the callback's
 * from the start, and it is cleared when the state closes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ltide.h"

#define PROFILE_STATE "tide.profile_state" /* registry: a sentinel whose __gc clears the hook */

static _Thread_local char where_buf[256];

/* "file:line" of the innermost Lua function calling into tide (C levels skipped). */
static const char *where_cb(void *ctx)
{
    lua_State *L = ctx;
    where_buf[0] = 0;
    for (int level = 1; level < 4; level++) {
        luaL_where(L, level);
        const char *w = lua_tostring(L, -1);
        if (w && *w) {
            snprintf(where_buf, sizeof where_buf, "%s", w);
            lua_pop(L, 1);
            size_t n = strlen(where_buf);
            while (n && (where_buf[n - 1] == ' ' || where_buf[n - 1] == ':'))
                where_buf[--n] = 0;
            break;
        }
        lua_pop(L, 1);
    }
    return where_buf;
}

typedef struct profile_opts {
    const char *trace;
    bool print;
} profile_opts;

static void check_opts(lua_State *L, int arg, profile_opts *o)
{
    memset(o, 0, sizeof *o);
    if (lua_isnoneornil(L, arg))
        return;
    if (!lua_istable(L, arg))
        luaL_error(L, "profile: options must be a table, got %s", luaL_typename(L, arg));
    for (lua_pushnil(L); lua_next(L, arg); lua_pop(L, 1)) {
        const char *k = lua_type(L, -2) == LUA_TSTRING ? lua_tostring(L, -2) : "";
        if (strcmp(k, "trace") == 0 && lua_type(L, -1) == LUA_TSTRING)
            o->trace = lua_tostring(L, -1);
        else if (strcmp(k, "print") == 0 && lua_type(L, -1) == LUA_TBOOLEAN)
            o->print = lua_toboolean(L, -1);
        else if (strcmp(k, "trace") == 0 || strcmp(k, "print") == 0)
            luaL_error(L, "profile: option '%s' must be a %s, got %s", k,
                       k[0] == 't' ? "path (string)" : "boolean", luaL_typename(L, -1));
        else
            luaL_error(L, "profile: unknown option '%s' (options: trace, print)",
                       *k ? k : luaL_typename(L, -2));
    }
}

static void set_num(lua_State *L, const char *k, double v)
{
    lua_pushnumber(L, v);
    lua_setfield(L, -2, k);
}

static void push_row(lua_State *L, const tide_profile_row *r)
{
    lua_createtable(L, 0, 12);
    lua_pushstring(L, r->name);
    lua_setfield(L, -2, "name");
    lua_pushstring(L, r->device);
    lua_setfield(L, -2, "device");
    lua_pushstring(L, r->where);
    lua_setfield(L, -2, "where");
    lua_pushinteger(L, r->calls);
    lua_setfield(L, -2, "calls");
    set_num(L, "ms", r->total_ms);
    set_num(L, "percent", r->percent);
    lua_pushinteger(L, r->bytes);
    lua_setfield(L, -2, "bytes");
    lua_pushinteger(L, r->flops);
    lua_setfield(L, -2, "flops");
    set_num(L, "gbps", r->gbps);
    set_num(L, "gflops", r->gflops);
    lua_pushstring(L, r->compute_bound ? "compute" : "memory");
    lua_setfield(L, -2, "bound");
    if (r->roofline >= 0)
        set_num(L, "roofline", r->roofline);
}

/* The report: rows 1..n, and wall_ms, kernel_ms, stream_gbps, sgemm_gflops, cpu, events. */
static void push_report(lua_State *L)
{
    const tide_profile_row *rows;
    tide_profile_summary s;
    int n = tide_profile_rows(&rows);
    if (n < 0 || tide_profile_summarize(&s) < 0)
        lt_raise(L, "profile: no report");
    lua_createtable(L, n, 6);
    for (int i = 0; i < n; i++) {
        push_row(L, &rows[i]);
        lua_rawseti(L, -2, i + 1);
    }
    set_num(L, "wall_ms", s.wall_ms);
    set_num(L, "kernel_ms", s.kernel_ms);
    set_num(L, "stream_gbps", s.stream_gbps);
    set_num(L, "sgemm_gflops", s.sgemm_gflops);
    lua_pushstring(L, s.cpu);
    lua_setfield(L, -2, "cpu");
    lua_pushinteger(L, s.nevents);
    lua_setfield(L, -2, "events");
}

/* The main thread's state: the callback between profiles (TIDE_PROFILE records all along). */
static void restore_hook(lua_State *L)
{
    lua_rawgeti(L, LUA_REGISTRYINDEX, LUA_RIDX_MAINTHREAD);
    tide_profile_set_where(where_cb, lua_tothread(L, -1));
    lua_pop(L, 1);
}

static int f_profile(lua_State *L)
{
    luaL_argexpected(L, lua_isfunction(L, 1), 1, "function");
    profile_opts o;
    check_opts(L, 2, &o);
    if (tide_profile_active())
        return luaL_error(L, "profile: a profile is already running (tide.profile does not nest%s)",
                          getenv("TIDE_PROFILE") ? "; TIDE_PROFILE profiles the whole process" : "");
    lua_settop(L, 2);
    lua_pushvalue(L, 1);
    tide_profile_set_where(where_cb, L);
    if (tide_profile_begin() < 0)
        return lt_raise(L, NULL);
    int status = lua_pcall(L, 0, LUA_MULTRET, 0);
    int rc = tide_profile_end();
    restore_hook(L);
    if (status != LUA_OK)
        return lua_error(L);
    if (rc < 0)
        return lt_raise(L, NULL);
    int nres = lua_gettop(L) - 2;
    push_report(L);
    lua_insert(L, 3);
    if (o.trace && tide_profile_write_trace(o.trace) < 0)
        return lt_raise(L, NULL);
    if (o.print) {
        char *text = tide_profile_table();
        if (!text)
            return lt_raise(L, NULL);
        fputs(text, stdout);
        fflush(stdout);
        free(text);
    }
    return nres + 1;
}

static int state_gc(lua_State *L)
{
    (void)L;
    tide_profile_set_where(NULL, NULL);
    return 0;
}

static const lt_reg profile_funcs[] = {
    {"profile", f_profile, LT_FUNCTION},
    {NULL, NULL, 0},
};

void lt_open_profile(lua_State *L, int mt, int methods, int module)
{
    lt_setfuncs(L, profile_funcs, mt, methods, module);
    lua_newuserdatauv(L, 1, 0);
    lua_createtable(L, 0, 1);
    lua_pushcfunction(L, state_gc);
    lua_setfield(L, -2, "__gc");
    lua_setmetatable(L, -2);
    lua_setfield(L, LUA_REGISTRYINDEX, PROFILE_STATE);
    restore_hook(L);
}
