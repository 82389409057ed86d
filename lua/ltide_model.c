/*
 * ltide_model.c — the callable model object of Lua (ltide_model.h) over a table of functions:
 * tide.onnx.load's models and tide.load_graph's graphs are both this object.
 */
#include <string.h>

#include "ltide_model.h"

#define LT_MODEL "tide.model"

typedef struct model_box {
    void *m;
    const lt_model_ops *ops;
} model_box;

static model_box *check_model(lua_State *L, int arg)
{
    model_box *b = luaL_checkudata(L, arg, LT_MODEL);
    if (!b->m)
        luaL_error(L, "%s: it was closed", b->ops->what);
    return b;
}

static int model_gc(lua_State *L)
{
    model_box *b = luaL_checkudata(L, 1, LT_MODEL);
    if (b->m)
        b->ops->close(b->m);
    b->m = NULL;
    return 0;
}

/* Pushes {name=, dtype=, shape={...}} for input or output i. */
static void push_io(lua_State *L, const model_box *b, int i, bool output)
{
    tide_dtype dtype = TIDE_FLOAT32;
    int ndim = -1;
    int64_t shape[TIDE_MAX_DIMS];
    const char *dims[TIDE_MAX_DIMS] = {0};
    if (b->ops->info(b->m, i, output, &dtype, &ndim, shape, dims) < 0) {
        tide_clear_error();
        ndim = -1;
    }
    lua_createtable(L, 0, 3);
    lua_pushstring(L, b->ops->name(b->m, i, output));
    lua_setfield(L, -2, "name");
    lua_pushstring(L, tide_dtype_name(dtype));
    lua_setfield(L, -2, "dtype");
    if (ndim >= 0) {
        lua_createtable(L, ndim, 0);
        for (int d = 0; d < ndim && d < TIDE_MAX_DIMS; d++) {
            if (shape[d] >= 0)
                lua_pushinteger(L, shape[d]);
            else if (dims[d])
                lua_pushstring(L, dims[d]);
            else
                lua_pushinteger(L, -1);
            lua_rawseti(L, -2, d + 1);
        }
        lua_setfield(L, -2, "shape");
    }
}

static int model_index(lua_State *L)
{
    model_box *b = check_model(L, 1);
    const char *key = luaL_checkstring(L, 2);
    bool names = !strcmp(key, "input_names") || !strcmp(key, "output_names");
    bool infos = !strcmp(key, "inputs") || !strcmp(key, "outputs");
    if (!strcmp(key, "close")) {
        lua_pushcfunction(L, model_gc);
        return 1;
    }
    if (!strcmp(key, "metadata")) {
        int n = b->ops->num_meta ? b->ops->num_meta(b->m) : 0;
        lua_createtable(L, 0, n);
        for (int i = 0; i < n; i++) {
            const char *k = b->ops->meta_key(b->m, i);
            lua_pushstring(L, b->ops->meta(b->m, k));
            lua_setfield(L, -2, k);
        }
        return 1;
    }
    if (!names && !infos)
        return 0;
    bool output = key[0] == 'o';
    int n = b->ops->num_io(b->m, output);
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        if (names)
            lua_pushstring(L, b->ops->name(b->m, i, output));
        else
            push_io(L, b, i, output);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

/* The inputs in the model's order: from the arguments 2.., or from the table at 2 by name. */
static void gather_inputs(lua_State *L, const model_box *b, tide_tensor **ins, bool named,
                          int nargs)
{
    int n = b->ops->num_io(b->m, false);
    if (!named && nargs != n)
        luaL_error(L, "%s: takes %d inputs, got %d", b->ops->what, n, nargs);
    for (int i = 0; i < n; i++) {
        const char *name = b->ops->name(b->m, i, false);
        if (named) {
            lua_getfield(L, 2, name);
            ins[i] = lt_totensor(L, -1);
            lua_pop(L, 1); /* the table keeps it alive */
        } else {
            ins[i] = lt_totensor(L, 2 + i);
        }
        if (!ins[i])
            luaL_error(L, "%s: input %d ('%s') must be a tensor, got %s", b->ops->what, i + 1,
                       name, named ? "nothing under that name" : luaL_typename(L, 2 + i));
    }
    if (!named)
        return;
    lua_pushnil(L); /* a name the model does not have is a mistake worth naming */
    while (lua_next(L, 2)) {
        lua_pop(L, 1);
        bool known = false;
        for (int i = 0; i < n && !known; i++)
            known = lua_type(L, -1) == LUA_TSTRING &&
                    !strcmp(lua_tostring(L, -1), b->ops->name(b->m, i, false));
        if (!known) {
            lua_pushvalue(L, -1);
            luaL_error(L, "%s: no input named '%s'", b->ops->what, luaL_tolstring(L, -1, NULL));
        }
    }
}

/* model(x, ...) -> outputs; model{name = x} -> {name = output}. Every box is pushed before the
 * run, so nothing raises between the run and storing its results. */
static int model_call(lua_State *L)
{
    model_box *b = check_model(L, 1);
    int nargs = lua_gettop(L) - 1;
    bool named = nargs == 1 && lua_type(L, 2) == LUA_TTABLE && !lt_totensor(L, 2);
    int nin = b->ops->num_io(b->m, false), nout = b->ops->num_io(b->m, true);
    luaL_checkstack(L, nout + 8, "model: too many outputs");
    tide_tensor **ins = lua_newuserdatauv(L, sizeof *ins * (size_t)(nin + 1), 0);
    tide_tensor **outs = lua_newuserdatauv(L, sizeof *outs * (size_t)(nout + 1), 0);
    gather_inputs(L, b, ins, named, nargs);
    if (named)
        lua_createtable(L, 0, nout);
    int table = lua_gettop(L), first = table + 1;
    for (int k = 0; k < nout; k++)
        lt_newbox(L);
    if (b->ops->run(b->m, ins, nin, outs) < 0)
        return lt_raise(L, "model: run failed");
    for (int k = 0; k < nout; k++)
        ((lt_box *)lua_touserdata(L, first + k))->t = outs[k];
    if (!named)
        return nout;
    for (int k = 0; k < nout; k++) {
        lua_pushvalue(L, first + k);
        lua_setfield(L, table, b->ops->name(b->m, k, true));
    }
    lua_settop(L, table);
    return 1;
}

static int model_tostring(lua_State *L)
{
    model_box *b = luaL_checkudata(L, 1, LT_MODEL);
    if (!b->m)
        lua_pushfstring(L, "%s (closed)", b->ops->what);
    else
        lua_pushfstring(L, "%s (%d inputs, %d outputs)", b->ops->what,
                        b->ops->num_io(b->m, false), b->ops->num_io(b->m, true));
    return 1;
}

int lt_push_model(lua_State *L, void *m, const lt_model_ops *ops, const char *who)
{
    if (!m)
        return lt_raise(L, who);
    model_box *b = lua_newuserdatauv(L, sizeof *b, 0);
    b->m = m;
    b->ops = ops;
    luaL_setmetatable(L, LT_MODEL);
    return 1;
}

void lt_open_model(lua_State *L, int mt)
{
    static const luaL_Reg model_meta[] = {{"__gc", model_gc},       {"__close", model_gc},
                                          {"__call", model_call},   {"__index", model_index},
                                          {"__tostring", model_tostring}, {NULL, NULL}};
    luaL_newmetatable(L, LT_MODEL);
    lua_pushvalue(L, mt); /* upvalue 1 of every binding: the tensor metatable (ltide.h) */
    luaL_setfuncs(L, model_meta, 1);
    lua_pop(L, 1);
}
