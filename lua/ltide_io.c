/*
 * ltide_io.c — files from Lua: tide.save / tide.load (safetensors, nested tables flattened with
 * dotted names), tide.save_npy / tide.load_npy, tide.load_idx (gzipped or plain IDX),
 * tide.frombytes (a string's bytes as a uint8 tensor) and tide.isatty (for progress bars). Also
 * registers the Lua sources embedded at build time (tide.nn, tide.optim, tide.data ...) in
 * package.preload, and lets `tide.nn` etc. be read as fields of the module (loaded on first use).
 */
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "ltide.h"
#include "lualib.h"

/* ---- tide.save(path, table) ------------------------------------------------------------------ */

#define SAVE_MAX_DEPTH 32

/* Walks the table at idx, appending dotted names and tensors to the tables at names/tensors
 * (tensors) or at mkeys/mvals (numbers, strings, booleans: stored as metadata strings). */
static void flatten(lua_State *L, int idx, const char *prefix, int depth, int names, int tensors,
                    int mkeys, int mvals)
{
    if (depth > SAVE_MAX_DEPTH)
        luaL_error(L, "save: tables nested deeper than %d levels (a cycle?) at '%s'",
                   SAVE_MAX_DEPTH, prefix);
    luaL_checkstack(L, 8, "save");
    lua_pushnil(L);
    while (lua_next(L, idx)) {
        /* key at -2, value at -1 */
        char keybuf[64];
        const char *key;
        if (lua_type(L, -2) == LUA_TSTRING) {
            key = lua_tostring(L, -2);
        } else if (lua_isinteger(L, -2)) {
            snprintf(keybuf, sizeof keybuf, "%lld", (long long)lua_tointeger(L, -2));
            key = keybuf;
        } else {
            return (void)luaL_error(L, "save: table keys must be strings or integers, got a %s "
                                    "key under '%s'", luaL_typename(L, -2), prefix);
        }
        if (*prefix)
            lua_pushfstring(L, "%s.%s", prefix, key);
        else
            lua_pushstring(L, key);
        const char *name = lua_tostring(L, -1);
        int vt = lua_type(L, -2);
        if (lt_totensor(L, -2)) {
            lua_rawseti(L, names, (lua_Integer)luaL_len(L, names) + 1);
            lua_pushvalue(L, -1);
            lua_rawseti(L, tensors, (lua_Integer)luaL_len(L, tensors) + 1);
        } else if (vt == LUA_TTABLE) {
            flatten(L, lua_absindex(L, -2), name, depth + 1, names, tensors, mkeys, mvals);
            lua_pop(L, 1);
        } else if (vt == LUA_TNUMBER || vt == LUA_TSTRING || vt == LUA_TBOOLEAN) {
            lua_rawseti(L, mkeys, (lua_Integer)luaL_len(L, mkeys) + 1);
            if (vt == LUA_TBOOLEAN) {
                lua_pushstring(L, lua_toboolean(L, -1) ? "true" : "false");
            } else if (vt == LUA_TNUMBER && lua_isinteger(L, -1)) {
                lua_pushfstring(L, "%I", (LUAI_UACINT)lua_tointeger(L, -1));
            } else if (vt == LUA_TNUMBER) {
                char nb[40]; /* full precision: reads back as the same double */
                snprintf(nb, sizeof nb, "%.17g", (double)lua_tonumber(L, -1));
                lua_pushstring(L, nb);
            } else {
                lua_pushvalue(L, -1);
            }
            lua_rawseti(L, mvals, (lua_Integer)luaL_len(L, mvals) + 1);
        } else {
            return (void)luaL_error(L, "save: '%s' is a %s; only tensors, tables of them, "
                                    "numbers, strings and booleans can be saved", name,
                                    luaL_typename(L, -2));
        }
        lua_pop(L, 1); /* value; key stays for lua_next */
    }
}

/* tide.save(path, table [, metadata_table]): tensors (nested tables flattened with dotted names,
 * integer keys as their decimal digits) go into a safetensors file; numbers, strings and
 * booleans among them, and the entries of metadata_table, go into its "__metadata__" as strings. */
static int f_save(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    if (lt_totensor(L, 2))
        return luaL_error(L, "save: expected a table of tensors, got a single tensor (use "
                          "tide.save(path, {name = x}) or tide.save_npy)");
    luaL_checktype(L, 2, LUA_TTABLE);
    if (!lua_isnoneornil(L, 3))
        luaL_checktype(L, 3, LUA_TTABLE);
    lua_settop(L, 3);
    lua_newtable(L); /* 4 names */
    lua_newtable(L); /* 5 tensors */
    lua_newtable(L); /* 6 metadata keys */
    lua_newtable(L); /* 7 metadata values */
    flatten(L, 2, "", 0, 4, 5, 6, 7);
    if (!lua_isnil(L, 3)) {
        lua_pushnil(L);
        while (lua_next(L, 3)) {
            if (lua_type(L, -2) != LUA_TSTRING)
                return luaL_error(L, "save: metadata keys must be strings");
            if (lua_type(L, -1) != LUA_TSTRING && lua_type(L, -1) != LUA_TNUMBER &&
                lua_type(L, -1) != LUA_TBOOLEAN)
                return luaL_error(L, "save: metadata value '%s' must be a string, number or "
                                  "boolean, got %s", lua_tostring(L, -2), luaL_typename(L, -1));
            lua_pushvalue(L, -2);
            lua_rawseti(L, 6, (lua_Integer)luaL_len(L, 6) + 1);
            if (lua_type(L, -1) == LUA_TBOOLEAN) {
                lua_pushstring(L, lua_toboolean(L, -1) ? "true" : "false");
            } else if (lua_type(L, -1) == LUA_TNUMBER && !lua_isinteger(L, -1)) {
                char nb[40];
                snprintf(nb, sizeof nb, "%.17g", (double)lua_tonumber(L, -1));
                lua_pushstring(L, nb);
            } else {
                luaL_tolstring(L, -1, NULL);
            }
            lua_rawseti(L, 7, (lua_Integer)luaL_len(L, 7) + 1);
            lua_pop(L, 1);
        }
    }
    int n = (int)luaL_len(L, 4), nm = (int)luaL_len(L, 6);
    /* the arrays live in GC-managed userdata: nothing leaks if a later step raises */
    const char **names = lua_newuserdatauv(L, sizeof(char *) * (size_t)(n + 1), 0);
    tide_tensor **ts = lua_newuserdatauv(L, sizeof(tide_tensor *) * (size_t)(n + 1), 0);
    const char **meta = lua_newuserdatauv(L, sizeof(char *) * (size_t)(2 * nm + 1), 0);
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, 4, i + 1);
        names[i] = lua_tostring(L, -1); /* anchored in the names table */
        lua_pop(L, 1);
        lua_rawgeti(L, 5, i + 1);
        ts[i] = lt_totensor(L, -1);
        lua_pop(L, 1);
    }
    for (int i = 0; i < nm; i++) {
        lua_rawgeti(L, 6, i + 1);
        meta[2 * i] = lua_tostring(L, -1);
        lua_pop(L, 1);
        lua_rawgeti(L, 7, i + 1);
        meta[2 * i + 1] = lua_tostring(L, -1);
        lua_pop(L, 1);
    }
    if (tide_save_safetensors(path, names, ts, n, nm ? meta : NULL, nm) < 0)
        return lt_raise(L, "save: failed");
    return 0;
}

/* A userdata whose __gc frees the dict: keeps a load from leaking when building the Lua tables
 * raises (out of memory). */
typedef struct dict_guard {
    tide_tensor_dict *d;
} dict_guard;

static int dict_guard_gc(lua_State *L)
{
    dict_guard *g = lua_touserdata(L, 1);
    if (g && g->d) {
        tide_tensor_dict_free(g->d);
        g->d = NULL;
    }
    return 0;
}

/* Pushes a PyTorch state-dict name in tide's naming: every dotted component but the last that
 * is a whole number (a Sequential or ModuleList index, counted from 0) gains one; the last is
 * the tensor's own name. The same rule as nn's load_state_dict(sd, {from = "pytorch"}). */
static void push_tide_name(lua_State *L, const char *name)
{
    luaL_Buffer b;
    luaL_buffinit(L, &b);
    for (const char *p = name;;) {
        const char *dot = strchr(p, '.');
        size_t len = dot ? (size_t)(dot - p) : strlen(p);
        bool index = dot && len > 0 && len <= 18 && (len == 1 || p[0] != '0');
        for (size_t i = 0; index && i < len; i++)
            index = p[i] >= '0' && p[i] <= '9';
        char num[24];
        if (index) {
            snprintf(num, sizeof num, "%lld", strtoll(p, NULL, 10) + 1);
            luaL_addstring(&b, num);
        } else
            luaL_addlstring(&b, p, len);
        if (!dot)
            break;
        luaL_addchar(&b, '.');
        p = dot + 1;
    }
    luaL_pushresult(&b);
}

/* tide.load's options: {from = "pytorch"} (true) or {from = "tide"} / none (false). */
static bool load_from_pytorch(lua_State *L, int arg)
{
    if (lua_isnoneornil(L, arg))
        return false;
    luaL_checktype(L, arg, LUA_TTABLE);
    lua_pushnil(L);
    while (lua_next(L, arg)) {
        lua_pop(L, 1);
        if (lua_type(L, -1) != LUA_TSTRING || strcmp(lua_tostring(L, -1), "from") != 0)
            return luaL_error(L, "load: unknown option '%s' (known: from)",
                              luaL_tolstring(L, -1, NULL));
    }
    lua_getfield(L, arg, "from");
    const char *from = lua_tostring(L, -1);
    bool pytorch = from && !strcmp(from, "pytorch");
    if (!pytorch && !lua_isnil(L, -1) && !(from && !strcmp(from, "tide")))
        return luaL_error(L, "load: from must be \"pytorch\" or \"tide\", got %s",
                          luaL_tolstring(L, -1, NULL));
    lua_pop(L, 1);
    return pytorch;
}

/* tide.load(path [, {from = "pytorch"}]) -> {name = tensor, ...} (flat, dotted names as
 * stored, or renamed from PyTorch's), {metadata strings} */
static int f_load(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    bool pytorch = load_from_pytorch(L, 2);
    dict_guard *g = lua_newuserdatauv(L, sizeof *g, 0);
    g->d = NULL;
    if (luaL_newmetatable(L, "tide.dict_guard")) {
        lua_pushcfunction(L, dict_guard_gc);
        lua_setfield(L, -2, "__gc");
        lua_pushcfunction(L, dict_guard_gc);
        lua_setfield(L, -2, "__close");
    }
    lua_setmetatable(L, -2);
    int gidx = lua_gettop(L);
    g->d = tide_load_safetensors(path);
    if (!g->d)
        return lt_raise(L, "load: failed");
    int n = tide_tensor_dict_count(g->d);
    lua_createtable(L, 0, n);
    int out = lua_gettop(L);
    for (int i = 0; i < n; i++) {
        lt_box *b = lt_newbox(L);
        tide_tensor *t = tide_tensor_dict_tensor(g->d, i);
        lt_fill(L, b, tide_retain(t), false);
        if (pytorch) {
            push_tide_name(L, tide_tensor_dict_name(g->d, i));
            lua_insert(L, -2);
            lua_rawset(L, out);
        } else {
            lua_setfield(L, out, tide_tensor_dict_name(g->d, i));
        }
    }
    int nm = tide_tensor_dict_metadata_count(g->d);
    lua_createtable(L, 0, nm);
    /* Marked, so that model:load_state_dict(tide.load(path)), which passes the metadata on as
     * the options argument, can tell it from options. */
    luaL_newmetatable(L, "tide.metadata");
    lua_setmetatable(L, -2);
    for (int i = 0; i < nm; i++) {
        lua_pushstring(L, tide_tensor_dict_metadata_value(g->d, i));
        lua_setfield(L, -2, tide_tensor_dict_metadata_key(g->d, i));
    }
    tide_tensor_dict_free(g->d);
    g->d = NULL;
    (void)gidx;
    return 2;
}

static int f_save_npy(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    tide_tensor *t = lt_check(L, 2, "save_npy");
    if (tide_save_npy(path, t) < 0)
        return lt_raise(L, "save_npy: failed");
    return 0;
}

static int f_load_npy(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_load_npy(path), false);
}

static int f_load_idx(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_load_idx(path), false);
}

/* tide.load_raw(path, offset, dtype, shape) -> shape's elements of dtype read as raw
 * little-endian bytes from byte offset (0-based) of path: arrays in headerless formats such as
 * llama2.c's checkpoints, without reading the file into a Lua string. */
static int f_load_raw(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    lua_Integer offset = luaL_checkinteger(L, 2);
    if (offset < 0)
        return luaL_error(L, "load_raw: offset must be >= 0, got %I", offset);
    tide_dtype dt = lt_checkdtype(L, 3, "load_raw", TIDE_FLOAT32);
    luaL_checktype(L, 4, LUA_TTABLE);
    int64_t shape[8];
    lua_Integer n = luaL_len(L, 4);
    if (n > 8)
        return luaL_error(L, "load_raw: at most 8 dims, got %I", n);
    for (int i = 0; i < (int)n; i++) {
        lua_geti(L, 4, i + 1);
        if (!lua_isinteger(L, -1) || lua_tointeger(L, -1) < 0)
            return luaL_error(L, "load_raw: shape[%d] must be an integer >= 0", i + 1);
        shape[i] = (int64_t)lua_tointeger(L, -1);
        lua_pop(L, 1);
    }
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_load_raw(path, (uint64_t)offset, dt, (int)n, shape), false);
}

/* tide.frombytes(s) -> a 1-D uint8 tensor holding the bytes of the Lua string s (a copy: one
 * memcpy, so a file read with io.read becomes a tensor without a Lua loop per byte). */
static int f_frombytes(lua_State *L)
{
    size_t len;
    if (lua_type(L, 1) != LUA_TSTRING) /* a number would silently become its digits */
        return luaL_error(L, "frombytes: expected a string, got %s", luaL_typename(L, 1));
    const char *s = lua_tolstring(L, 1, &len);
    int64_t shape[1] = {(int64_t)len};
    lt_box *b = lt_newbox(L);
    tide_tensor *t = tide_empty(1, shape, TIDE_UINT8);
    if (t && len > 0)
        memcpy(tide_mutable_data_ptr(t), s, len);
    return lt_fill(L, b, t, false);
}

/* tide.isatty([fd or file]) -> boolean (default: io.stdout's descriptor, 1) */
static int f_isatty(lua_State *L)
{
    int fd = 1;
    if (lua_type(L, 1) == LUA_TNUMBER) {
        fd = (int)luaL_checkinteger(L, 1);
    } else if (!lua_isnoneornil(L, 1)) {
        luaL_Stream *s = luaL_checkudata(L, 1, LUA_FILEHANDLE);
        if (!s->f || !s->closef)
            return luaL_error(L, "isatty: attempt to use a closed file");
        fd = fileno(s->f);
    }
    lua_pushboolean(L, fd >= 0 && isatty(fd));
    return 1;
}

/* tide.clock() -> seconds of a monotonic clock (for samples/s and ETA; os.clock is CPU time) */
static int f_clock(lua_State *L)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    lua_pushnumber(L, (lua_Number)ts.tv_sec + (lua_Number)ts.tv_nsec * 1e-9);
    return 1;
}

static const lt_reg io_funcs[] = {
    {"save", f_save, LT_FUNCTION},
    {"load", f_load, LT_FUNCTION},
    {"save_npy", f_save_npy, LT_FUNCTION},
    {"load_npy", f_load_npy, LT_FUNCTION},
    {"load_idx", f_load_idx, LT_FUNCTION},
    {"load_raw", f_load_raw, LT_FUNCTION},
    {"frombytes", f_frombytes, LT_FUNCTION},
    {"isatty", f_isatty, LT_FUNCTION},
    {"clock", f_clock, LT_FUNCTION},
    {NULL, NULL, 0},
};

/* ---- the embedded Lua sources ---------------------------------------------------------------- */

/* Generated at build time from lua/tide/ (lua/embed_lua.cmake): module name, source, length. */
typedef struct lt_lua_source {
    const char *name;
    const char *chunkname;
    const unsigned char *code;
    size_t len;
} lt_lua_source;
extern const lt_lua_source lt_lua_sources[];
extern const int lt_lua_source_count;

/* package.preload loader: upvalue 1 is the index into lt_lua_sources. */
static int preload_loader(lua_State *L)
{
    int i = (int)lua_tointeger(L, lua_upvalueindex(1));
    const lt_lua_source *s = &lt_lua_sources[i];
    if (luaL_loadbufferx(L, (const char *)s->code, s->len, s->chunkname, "t") != LUA_OK)
        return lua_error(L);
    lua_pushstring(L, s->name);
    lua_call(L, 1, 1);
    return 1;
}

/* luaopen_tide_nn etc. (generated beside the sources): require "tide" first (the module and its
 * preload entries), then run the embedded chunk as require would. */
int lt_open_embedded(lua_State *L, const char *name);
int lt_open_embedded(lua_State *L, const char *name)
{
    lua_getglobal(L, "require");
    lua_pushstring(L, "tide");
    lua_call(L, 1, 0);
    for (int i = 0; i < lt_lua_source_count; i++) {
        if (strcmp(lt_lua_sources[i].name, name) == 0) {
            lua_pushinteger(L, i);
            lua_pushcclosure(L, preload_loader, 1);
            lua_call(L, 0, 1);
            return 1;
        }
    }
    return luaL_error(L, "tide: no embedded module %s", name);
}

/* __index of the module table: tide.nn, tide.optim, tide.data ... load on first use. */
static int module_index(lua_State *L)
{
    if (lua_type(L, 2) != LUA_TSTRING)
        return 0;
    const char *key = lua_tostring(L, 2);
    char full[128];
    snprintf(full, sizeof full, "tide.%s", key);
    for (int i = 0; i < lt_lua_source_count; i++) {
        if (strcmp(lt_lua_sources[i].name, full) != 0)
            continue;
        lua_getglobal(L, "require");
        if (!lua_isfunction(L, -1))
            return 0;
        lua_pushstring(L, full);
        lua_call(L, 1, 1);
        lua_pushvalue(L, 2);
        lua_pushvalue(L, -2);
        lua_rawset(L, 1); /* cached: tide[key] from now on without __index */
        return 1;
    }
    return 0;
}

/* __tostring of the module table, so that `tide` at the prompt says what it is. */
static int module_tostring(lua_State *L)
{
    int functions = 0;
    lua_pushnil(L);
    while (lua_next(L, 1)) {
        functions += lua_type(L, -1) == LUA_TFUNCTION;
        lua_pop(L, 1);
    }
    lua_pushfstring(L, "tide module (%d functions; tide.nn, tide.optim, tide.data load on first "
                    "use): help() lists the modules, help(tide) every function", functions);
    return 1;
}

/* __lazy of the module's metatable: the names of the fields module_index loads (nn, optim, data,
 * help), so that the prompt can complete them without loading them. */
static void push_lazy_names(lua_State *L)
{
    lua_newtable(L);
    int n = 0;
    for (int i = 0; i < lt_lua_source_count; i++) {
        const char *name = lt_lua_sources[i].name;
        if (strncmp(name, "tide.", 5) == 0 && !strchr(name + 5, '.')) {
            lua_pushstring(L, name + 5);
            lua_rawseti(L, -2, ++n);
        }
    }
}

static void open_lua_sources(lua_State *L, int module)
{
    lua_getglobal(L, "package");
    if (lua_istable(L, -1)) {
        lua_getfield(L, -1, "preload");
        if (lua_istable(L, -1)) {
            for (int i = 0; i < lt_lua_source_count; i++) {
                lua_pushinteger(L, i);
                lua_pushcclosure(L, preload_loader, 1);
                lua_setfield(L, -2, lt_lua_sources[i].name);
            }
        }
        lua_pop(L, 1);
    }
    lua_pop(L, 1);
    lua_newtable(L);
    lua_pushcfunction(L, module_index);
    lua_setfield(L, -2, "__index");
    lua_pushcfunction(L, module_tostring);
    lua_setfield(L, -2, "__tostring");
    push_lazy_names(L);
    lua_setfield(L, -2, "__lazy");
    lua_setmetatable(L, module);
}

void lt_open_io(lua_State *L, int mt, int methods, int module)
{
    lt_setfuncs(L, io_funcs, mt, methods, module);
    open_lua_sources(L, module);
}
