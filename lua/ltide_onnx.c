/*
 * ltide_onnx.c — ONNX models in Lua (docs/onnx.md):
 *   tide.onnx.load(path [, {device = "cpu"}]) -> a callable model (ltide_model.h): model(x, ...),
 *       model{name = x}, model.input_names/output_names, model.inputs/outputs, model:close()
 *   tide.onnx.load_tensor(path) -> a tensor (a TensorProto .pb file)
 * The model runs op by op through tide's ops, so tide.jit traces it like any Lua function and
 * autograd records it. ONNX's 0-based axes stay inside the model.
 */
#include <string.h>

#include "ltide_model.h"

static int onnx_num_io(const void *m, bool output)
{
    return output ? tide_onnx_num_outputs(m) : tide_onnx_num_inputs(m);
}

static const char *onnx_name(const void *m, int i, bool output)
{
    return output ? tide_onnx_output_name(m, i) : tide_onnx_input_name(m, i);
}

static int onnx_info(const void *m, int i, bool output, tide_dtype *dtype, int *ndim,
                     int64_t *shape, const char **dims)
{
    return output ? tide_onnx_output_info(m, i, dtype, ndim, shape, dims, TIDE_MAX_DIMS)
                  : tide_onnx_input_info(m, i, dtype, ndim, shape, dims, TIDE_MAX_DIMS);
}

static int onnx_run(void *m, tide_tensor *const *ins, int nin, tide_tensor **outs)
{
    return tide_onnx_run(m, ins, nin, outs);
}

static void onnx_close(void *m) { tide_onnx_close(m); }

static const lt_model_ops onnx_ops = {"onnx model", onnx_num_io, onnx_name, onnx_info,
                                      onnx_run,     onnx_close, NULL, NULL, NULL};

/* The device option of a load's options table at arg (NULL: the default). */
const char *lt_device_option(lua_State *L, int arg, const char *who)
{
    if (lua_isnoneornil(L, arg))
        return NULL;
    static const char *const keys[] = {"device", NULL};
    luaL_checktype(L, arg, LUA_TTABLE);
    lt_checkkeys(L, arg, who, keys);
    if (lua_getfield(L, arg, "device") == LUA_TNIL) {
        lua_pop(L, 1);
        return NULL;
    }
    if (lua_type(L, -1) != LUA_TSTRING)
        luaL_error(L, "%s: device must be a string such as \"cpu\"", who);
    const char *device = lua_tostring(L, -1);
    lua_pop(L, 1); /* the options table keeps the string alive */
    return device;
}

/* tide.onnx.load(path [, {device = ...}]) */
static int f_onnx_load(lua_State *L)
{
    const char *path = luaL_checkstring(L, 1);
    const char *device = lt_device_option(L, 2, "onnx.load");
    return lt_push_model(L, tide_onnx_open(path, device), &onnx_ops, "onnx.load: failed");
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
    lt_open_model(L, mt);
    lua_newtable(L);
    int onnx = lua_gettop(L);
    static const lt_reg regs[] = {{"load", f_onnx_load, LT_FUNCTION},
                                  {"load_tensor", f_onnx_load_tensor, LT_FUNCTION},
                                  {NULL, NULL, 0}};
    lt_setfuncs(L, regs, mt, 0, onnx);
    lua_setfield(L, module, "onnx");
}
