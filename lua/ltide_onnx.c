/*
 * ltide_onnx.c — ONNX models in Lua (docs/onnx.md):
 *   tide.onnx.load(path [, {device = "cpu"}]) -> a callable model:
 *       model(x, y, ...)           -> its outputs, in the model's order
 *       model{name = tensor, ...}  -> {output name = tensor, ...}
 *       model.input_names, model.output_names   (lists of names)
 *       model.inputs, model.outputs             ({name=, dtype=, shape={...}} each; a free dim
 *                                                is its dim_param name, or -1 when unnamed)
 *       model:close()
 *   tide.onnx.load_tensor(path) -> a tensor (a TensorProto .pb file)
 * The model runs op by op through tide's ops, so tide.jit traces it like any Lua function and
 * autograd records it. ONNX's 0-based axes stay inside the model.
 */
#include <string.h>

#include "ltide.h"

#define LT_ONNX_MODEL "tide.onnx_model"

typedef struct onnx_box {
    tide_onnx_model *m;
} onnx_box;

static tide_onnx_model *check_model(lua_State *L, int arg)
{
    onnx_box *b = luaL_checkudata(L, arg, LT_ONNX_MODEL);
    if (!b->m)
        luaL_error(L, "onnx model: it was closed");
    return b->m;
}

static int model_gc(lua_State *L)
{
    onnx_box *b = luaL_checkudata(L, 1, LT_ONNX_MODEL);
    tide_onnx_close(b->m);
    b->m = NULL;
    return 0;
}

/* Pushes {name=, dtype=, shape={...}} for input or output i. */
static void push_io(lua_State *L, const tide_onnx_model *m, int i, bool output)
{
    tide_dtype dtype;
    int ndim;
    int64_t shape[TIDE_MAX_DIMS];
    const char *dims[TIDE_MAX_DIMS];
    if (output)
        tide_onnx_output_info(m, i, &dtype, &ndim, shape, dims, TIDE_MAX_DIMS);
    else
        tide_onnx_input_info(m, i, &dtype, &ndim, shape, dims, TIDE_MAX_DIMS);
    lua_createtable(L, 0, 3);
    lua_pushstring(L, output ? tide_onnx_output_name(m, i) : tide_onnx_input_name(m, i));
    lua_setfield(L, -2, "name");
    lua_pushstring(L, tide_dtype_name(dtype));
    lua_setfield(L, -2, "dtype");
    if (ndim >= 0) {
        lua_createtable(L, ndim, 0);
        for (int d = 0; d < ndim; d++) {
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
    tide_onnx_model *m = check_model(L, 1);
    const char *key = luaL_checkstring(L, 2);
    bool names = !strcmp(key, "input_names") || !strcmp(key, "output_names");
    bool infos = !strcmp(key, "inputs") || !strcmp(key, "outputs");
    if (!strcmp(key, "close")) {
        lua_pushcfunction(L, model_gc);
        return 1;
    }
    if (!names && !infos)
        return 0;
    bool output = key[0] == 'o';
    int n = output ? tide_onnx_num_outputs(m) : tide_onnx_num_inputs(m);
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        if (names)
            lua_pushstring(L, output ? tide_onnx_output_name(m, i) : tide_onnx_input_name(m, i));
        else
            push_io(L, m, i, output);
        lua_rawseti(L, -2, i + 1);
    }
    return 1;
}

/* The inputs in the model's order: from the arguments 2.., or from the table at 2 by name. */
static void gather_inputs(lua_State *L, tide_onnx_model *m, tide_tensor **ins, bool named,
                          int nargs)
{
    int n = tide_onnx_num_inputs(m);
    if (!named && nargs != n)
        luaL_error(L, "onnx model: takes %d inputs, got %d", n, nargs);
    for (int i = 0; i < n; i++) {
        const char *name = tide_onnx_input_name(m, i);
        if (named) {
            lua_getfield(L, 2, name);
            ins[i] = lt_totensor(L, -1);
            lua_pop(L, 1); /* the table keeps it alive */
        } else {
            ins[i] = lt_totensor(L, 2 + i);
        }
        if (!ins[i])
            luaL_error(L, "onnx model: input %d ('%s') must be a tensor, got %s", i + 1, name,
                       named ? "nothing under that name" : luaL_typename(L, 2 + i));
    }
    if (!named)
        return;
    lua_pushnil(L); /* a name the model does not have is a mistake worth naming */
    while (lua_next(L, 2)) {
        lua_pop(L, 1);
        bool known = false;
        for (int i = 0; i < n && !known; i++)
            known = lua_type(L, -1) == LUA_TSTRING &&
                    !strcmp(lua_tostring(L, -1), tide_onnx_input_name(m, i));
        if (!known) {
            lua_pushvalue(L, -1);
            luaL_error(L, "onnx model: no input named '%s'", luaL_tolstring(L, -1, NULL));
        }
    }
}

/* model(x, ...) -> outputs; model{name = x} -> {name = output}. Every box is pushed before the
 * run, so nothing raises between the run and storing its results. */
static int model_call(lua_State *L)
{
    tide_onnx_model *m = check_model(L, 1);
    int nargs = lua_gettop(L) - 1;
    bool named = nargs == 1 && lua_type(L, 2) == LUA_TTABLE && !lt_totensor(L, 2);
    int nin = tide_onnx_num_inputs(m), nout = tide_onnx_num_outputs(m);
    luaL_checkstack(L, nout + 8, "onnx model: too many outputs");
    tide_tensor **ins = lua_newuserdatauv(L, sizeof *ins * (size_t)(nin + 1), 0);
    tide_tensor **outs = lua_newuserdatauv(L, sizeof *outs * (size_t)(nout + 1), 0);
    gather_inputs(L, m, ins, named, nargs);
    if (named)
        lua_createtable(L, 0, nout);
    int table = lua_gettop(L), first = table + 1;
    for (int k = 0; k < nout; k++)
        lt_newbox(L);
    if (tide_onnx_run(m, ins, nin, outs) < 0)
        return lt_raise(L, "onnx model: run failed");
    for (int k = 0; k < nout; k++)
        ((lt_box *)lua_touserdata(L, first + k))->t = outs[k];
    if (!named)
        return nout;
    for (int k = 0; k < nout; k++) {
        lua_pushvalue(L, first + k);
        lua_setfield(L, table, tide_onnx_output_name(m, k));
    }
    lua_settop(L, table);
    return 1;
}

static int model_tostring(lua_State *L)
{
    onnx_box *b = luaL_checkudata(L, 1, LT_ONNX_MODEL);
    if (!b->m)
        lua_pushstring(L, "onnx model (closed)");
    else
        lua_pushfstring(L, "onnx model (%d inputs, %d outputs)", tide_onnx_num_inputs(b->m),
                        tide_onnx_num_outputs(b->m));
    return 1;
}

/* tide.onnx.load(path [, {device = ...}]) */
static int f_onnx_load(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    const char *device = NULL;
    if (!lua_isnoneornil(L, 2)) {
        static const char *const keys[] = {"device", NULL};
        luaL_checktype(L, 2, LUA_TTABLE);
        lt_checkkeys(L, 2, "onnx.load", keys);
        if (lua_getfield(L, 2, "device") != LUA_TNIL) {
            if (lua_type(L, -1) != LUA_TSTRING)
                return luaL_error(L, "onnx.load: device must be a string such as \"cpu\"");
            device = lua_tostring(L, -1);
        }
    }
    onnx_box *b = lua_newuserdatauv(L, sizeof *b, 0);
    b->m = NULL;
    luaL_setmetatable(L, LT_ONNX_MODEL);
    if (!(b->m = tide_onnx_open(path, device)))
        return lt_raise(L, "onnx.load: failed");
    return 1;
}

static int f_onnx_load_tensor(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_onnx_load_tensor(path), false);
}

void lt_open_onnx(lua_State *L, int mt, int methods, int module)
{
    (void)methods;
    static const luaL_Reg model_meta[] = {{"__gc", model_gc},       {"__close", model_gc},
                                          {"__call", model_call},   {"__index", model_index},
                                          {"__tostring", model_tostring}, {NULL, NULL}};
    luaL_newmetatable(L, LT_ONNX_MODEL);
    lua_pushvalue(L, mt); /* upvalue 1 of every binding: the tensor metatable (ltide.h) */
    luaL_setfuncs(L, model_meta, 1);
    lua_pop(L, 1);
    lua_newtable(L);
    int onnx = lua_gettop(L);
    static const lt_reg regs[] = {{"load", f_onnx_load, LT_FUNCTION},
                                  {"load_tensor", f_onnx_load_tensor, LT_FUNCTION},
                                  {NULL, NULL, 0}};
    lt_setfuncs(L, regs, mt, 0, onnx);
    lua_setfield(L, module, "onnx");
}
