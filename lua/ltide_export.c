/*
 * ltide_export.c — compiled graphs as files from Lua (docs/export.md):
 *   tide.export(fn, args, path [, {dynamic = {[i] = {dims}}, input_names = {...},
 *               output_names = {...}}])
 *       captures fn(args...) with grad off (a graph break is an error), and writes the graph,
 *       the tensors it read (weights) and its dynamic dims (1-based, per argument) to path.
 *   tide.load_graph(path [, {device = "cpu"}]) -> a callable model (ltide_model.h) that runs
 *       the compiled graph: no Lua function behind it.
 *   tide.capture(fn, args [, {dynamic = ...}]) -> the same callable, captured in memory (no
 *       file), and fn's results from the capture's run.
 */
#include <stdio.h>
#include <string.h>

#include "../core/tide_internal.h"
#include "ltide_model.h"

#define EXPORT_MAX_IO 64
#define EXPORT_MAX_META 64

static int graph_num_io(const void *g, bool output)
{
    return output ? tide_graph_num_outputs(g) : tide_graph_num_inputs(g);
}

static const char *graph_name(const void *g, int i, bool output)
{
    return output ? tide_graph_output_name(g, i) : tide_graph_input_name(g, i);
}

static int graph_info(const void *g, int i, bool output, tide_dtype *dtype, int *ndim,
                      int64_t *shape, const char **dims)
{
    int rc = output ? tide_graph_output_info(g, i, dtype, ndim, shape, TIDE_MAX_DIMS)
                    : tide_graph_input_info(g, i, dtype, ndim, shape, TIDE_MAX_DIMS);
    for (int d = 0; rc == 0 && d < *ndim && d < TIDE_MAX_DIMS; d++)
        dims[d] = output ? NULL : tide_graph_dim_name(g, i, d);
    return rc;
}

static int graph_run(void *g, tide_tensor *const *ins, int nin, tide_tensor **outs)
{
    return tide_graph_run(g, ins, nin, outs);
}

static void graph_close(void *g) { tide_graph_free(g); }

static int graph_num_meta(const void *g) { return tide_graph_num_metadata(g); }
static const char *graph_meta_key(const void *g, int i) { return tide_graph_metadata_key(g, i); }
static const char *graph_meta(const void *g, const char *key)
{
    return tide_graph_metadata(g, key);
}

static const lt_model_ops graph_ops = {"graph",        graph_num_io,   graph_name,
                                       graph_info,     graph_run,      graph_close,
                                       graph_num_meta, graph_meta_key, graph_meta};

/* opts.dynamic: per argument (1-based) a list of its dynamic dims (1-based) -> masks. */
static void dynamic_masks(lua_State *L, const char *op, int opts, tide_tensor *const *ins,
                          int n, uint32_t *masks)
{
    memset(masks, 0, sizeof *masks * (size_t)n);
    if (opts == 0 || lua_getfield(L, opts, "dynamic") == LUA_TNIL) {
        if (opts)
            lua_pop(L, 1);
        return;
    }
    if (!lua_istable(L, -1))
        luaL_error(L, "%s: dynamic must be {[argument] = {dims}}, got %s", op,
                   luaL_typename(L, -1));
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        lua_Integer a = lua_isinteger(L, -2) ? lua_tointeger(L, -2) : 0;
        if (a < 1 || a > n || !lua_istable(L, -1))
            luaL_error(L, "%s: dynamic's keys are argument numbers 1..%d with a list of "
                          "dims each", op, n);
        for (lua_Integer k = 1, len = (lua_Integer)lua_rawlen(L, -1); k <= len; k++) {
            lua_rawgeti(L, -1, k);
            lua_Integer d = lua_isinteger(L, -1) ? lua_tointeger(L, -1) : 0;
            lua_pop(L, 1);
            int ndim = tide_ndim(ins[a - 1]);
            if (d < 1 || d > ndim)
                luaL_error(L, "%s: dynamic dim %d of argument %d: it has %d dims (dims "
                              "count from 1)", op, (int)d, (int)a, ndim);
            masks[a - 1] |= 1u << (d - 1);
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
}

/* opts[key]: a list of n strings into names (pointers into the table, which opts keeps), or
 * none (*list NULL). A wrong list leaves the message in why and returns -1: the caller may hold
 * a graph to free before raising it. */
static int name_list(lua_State *L, int opts, const char *key, int n, const char **names,
                     const char *const **list, char *why, size_t size)
{
    *list = NULL;
    if (opts == 0)
        return 0;
    int type = lua_getfield(L, opts, key);
    bool ok = type == LUA_TNIL || (type == LUA_TTABLE && (int)lua_rawlen(L, -1) == n);
    for (int i = 0; ok && type == LUA_TTABLE && i < n; i++) {
        ok = lua_rawgeti(L, -1, i + 1) == LUA_TSTRING;
        names[i] = lua_tostring(L, -1);
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    if (!ok) {
        snprintf(why, size, "export: %s must be a list of %d names (strings)", key, n);
        return -1;
    }
    *list = type == LUA_TNIL ? NULL : names;
    return 0;
}

/* opts.metadata, {key = value} with string or number keys and values, as key, value pairs of
 * strings kept alive by a table this leaves on the stack. Their count. Called before the
 * capture: raising on another type, or past EXPORT_MAX_META entries, frees nothing. */
static int metadata(lua_State *L, int opts, const char **pairs)
{
    lua_newtable(L);
    int keep = lua_gettop(L), n = 0;
    if (opts == 0 || lua_getfield(L, opts, "metadata") == LUA_TNIL) {
        if (opts)
            lua_pop(L, 1);
        return 0;
    }
    if (!lua_istable(L, -1))
        luaL_error(L, "export: metadata must be a table of strings, {key = value}");
    lua_pushnil(L);
    while (lua_next(L, -2)) {
        int kt = lua_type(L, -2), vt = lua_type(L, -1);
        if ((kt != LUA_TSTRING && kt != LUA_TNUMBER) || (vt != LUA_TSTRING && vt != LUA_TNUMBER))
            luaL_error(L, "export: metadata keys and values must be strings or numbers, got %s "
                          "= %s", lua_typename(L, kt), lua_typename(L, vt));
        if (n == EXPORT_MAX_META)
            luaL_error(L, "export: at most %d metadata entries", EXPORT_MAX_META);
        lua_pushvalue(L, -2); /* the key converted on a copy: lua_next needs it as it is */
        pairs[2 * n] = lua_tostring(L, -1);
        lua_rawseti(L, keep, 2 * n + 1);
        pairs[2 * n + 1] = lua_tostring(L, -1);
        lua_rawseti(L, keep, 2 * n + 2);
        n++;
    }
    lua_pop(L, 1);
    return n;
}

/* Calls fn on the arguments inside a capture: the graph, or a Lua error (the capture ended).
 * fn's results, which the capture's run gave values, stay on the stack (*nout of them). op
 * names the caller in messages. */
static tide_graph *capture(lua_State *L, const char *op, tide_tensor **ins, int n,
                           const uint32_t *masks, int *nout)
{
    char why[80];
    bool grad = tide_set_grad_enabled(false);
    if (tide_jit_begin_dynamic(ins, n, masks) < 0) {
        tide_set_grad_enabled(grad);
        snprintf(why, sizeof why, "%s: the capture could not begin", op);
        lt_raise(L, why);
    }
    int base = lua_gettop(L);
    lua_pushvalue(L, 1);
    for (int i = 0; i < n; i++)
        lua_rawgeti(L, 2, i + 1);
    if (lua_pcall(L, n, LUA_MULTRET, 0) != LUA_OK) {
        tide_jit_cancel();
        tide_set_grad_enabled(grad);
        lua_error(L);
    }
    *nout = lua_gettop(L) - base;
    tide_tensor *outs[EXPORT_MAX_IO];
    for (int k = 0; k < *nout; k++)
        if (k >= EXPORT_MAX_IO || !(outs[k] = lt_totensor(L, base + 1 + k))) {
            tide_jit_cancel();
            tide_set_grad_enabled(grad);
            luaL_error(L, "%s: the function returned %s as result %d; it must return at "
                          "most %d tensors", op, luaL_typename(L, base + 1 + k), k + 1,
                       EXPORT_MAX_IO);
        }
    tide_graph *g = tide_jit_end(outs, *nout);
    tide_set_grad_enabled(grad);
    if (!g) {
        snprintf(why, sizeof why, "%s: the capture failed", op);
        lt_raise(L, why);
    }
    return g;
}

/* The tensors of the argument list at index 2 into ins; their count. */
static int capture_args(lua_State *L, const char *op, tide_tensor **ins)
{
    luaL_checktype(L, 1, LUA_TFUNCTION);
    luaL_checktype(L, 2, LUA_TTABLE);
    int n = (int)lua_rawlen(L, 2);
    if (n > EXPORT_MAX_IO)
        return luaL_error(L, "%s: %d arguments; at most %d", op, n, EXPORT_MAX_IO);
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, 2, i + 1);
        if (!(ins[i] = lt_totensor(L, -1)))
            return luaL_error(L, "%s: argument %d must be a tensor, got %s", op, i + 1,
                              luaL_typename(L, -1));
        lua_pop(L, 1); /* args keeps it */
    }
    return n;
}

/* The checks shared by export and capture: the options at index opts (0: none) may hold keys;
 * the arguments (index 2) into ins and their dynamic dims into masks. Their count. */
static int capture_setup(lua_State *L, const char *op, int opts, const char *const *keys,
                         tide_tensor **ins, uint32_t *masks)
{
    if (opts) {
        luaL_checktype(L, opts, LUA_TTABLE);
        lt_checkkeys(L, opts, op, keys);
    }
    int n = capture_args(L, op, ins);
    dynamic_masks(L, op, opts, ins, n, masks);
    return n;
}

/* tide.export(fn, args, path [, opts]) */
static int f_export(lua_State *L)
{
    const char *path = luaL_checkstring(L, 3);
    static const char *const keys[] = {"dynamic", "input_names", "output_names", "metadata",
                                       NULL};
    tide_tensor *ins[EXPORT_MAX_IO];
    uint32_t masks[EXPORT_MAX_IO];
    int opts = lua_isnoneornil(L, 4) ? 0 : 4;
    int n = capture_setup(L, "export", opts, keys, ins, masks);
    const char *in_names[EXPORT_MAX_IO], *out_names[EXPORT_MAX_IO];
    const char *const *inn, *const *outn;
    char why[120];
    if (name_list(L, opts, "input_names", n, in_names, &inn, why, sizeof why) < 0)
        return luaL_error(L, "%s", why);
    const char *meta[2 * EXPORT_MAX_META];
    int nmeta = metadata(L, opts, meta);
    int nout;
    tide_graph *g = capture(L, "export", ins, n, masks, &nout);
    lua_pop(L, nout);
    if (name_list(L, opts, "output_names", tide_graph_num_outputs(g), out_names, &outn, why,
                  sizeof why) < 0) {
        tide_graph_free(g);
        return luaL_error(L, "%s", why);
    }
    tide_graph_save_options so = {inn, outn, nmeta, meta};
    int rc = tide_graph_save(g, path, &so);
    tide_graph_free(g);
    if (rc < 0)
        return lt_raise(L, "export: failed");
    return 0;
}

/* tide.capture(fn, args [, {dynamic = {[i] = {dims}}}]) -> the graph in memory as a callable
 * model (the tensors fn reads besides its arguments by reference, its in-place writes into
 * them and into its arguments made again on each call), then fn's results from the capture's
 * own run. */
static int f_capture(lua_State *L)
{
    static const char *const keys[] = {"dynamic", NULL};
    tide_tensor *ins[EXPORT_MAX_IO];
    uint32_t masks[EXPORT_MAX_IO];
    int n = capture_setup(L, "capture", lua_isnoneornil(L, 3) ? 0 : 3, keys, ins, masks);
    int nout;
    tide_graph *g = capture(L, "capture", ins, n, masks, &nout);
    lt_push_model(L, g, &graph_ops, "capture: failed");
    lua_insert(L, -1 - nout);
    return 1 + nout;
}

/* tide.load_graph(path [, {device = ...}]) */
static int f_load_graph(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    const char *device = lt_device_option(L, 2, "load_graph");
    return lt_push_model(L, tide_graph_load(path, device), &graph_ops, "load_graph: failed");
}

void lt_open_export(lua_State *L, int mt, int methods, int module)
{
    (void)methods;
    static const lt_reg regs[] = {{"export", f_export, LT_FUNCTION},
                                  {"load_graph", f_load_graph, LT_FUNCTION},
                                  {"capture", f_capture, LT_FUNCTION},
                                  {NULL, NULL, 0}};
    lt_setfuncs(L, regs, mt, 0, module);
}
