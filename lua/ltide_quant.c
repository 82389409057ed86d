/*
 * ltide_quant.c — quantized weights in Lua (docs/quantization.md):
 *   tide.quantize(w, "q8_0"|"q4_0") -> uint8 blocks [rows, K/32 * block bytes]
 *   tide.quantize(module, fmt)      -> the module, its Linear layers (and a Llama's
 *                                      projections) quantized in place (tide/quant.lua)
 *   tide.dequantize(q, fmt, K)      -> float32 [rows, K]
 *   tide.qlinear(x, q, fmt)         -> float32 [..., rows]
 */
#include "ltide.h"

static tide_qformat check_format(lua_State *L, int arg, const char *op)
{
    const char *name = lua_tostring(L, arg);
    int fmt = tide_qformat_from_name(name);
    if (fmt < 0)
        luaL_error(L, "%s: format must be \"q8_0\" or \"q4_0\", got %s", op,
                   name ? name : luaL_typename(L, arg));
    return (tide_qformat)fmt;
}

/* tide.quantize on a table: tide.quant.quantize_module(module, fmt). */
static int quantize_module(lua_State *L)
{
    lua_getglobal(L, "require");
    lua_pushstring(L, "tide.quant");
    lua_call(L, 1, 1);
    lua_getfield(L, -1, "quantize_module");
    lua_pushvalue(L, 1);
    lua_pushvalue(L, 2);
    lua_call(L, 2, 1);
    return 1;
}

static int f_quantize(lua_State *L)
{
    if (lua_istable(L, 1))
        return quantize_module(L);
    tide_tensor *w = lt_check(L, 1, "quantize");
    tide_qformat fmt = check_format(L, 2, "quantize");
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_quantize(w, fmt), false);
}

static int f_dequantize(lua_State *L)
{
    tide_tensor *q = lt_check(L, 1, "dequantize");
    tide_qformat fmt = check_format(L, 2, "dequantize");
    lua_Integer k = luaL_checkinteger(L, 3);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_dequantize(q, fmt, (int64_t)k), false);
}

static int f_qlinear(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "qlinear");
    tide_tensor *q = lt_check(L, 2, "qlinear");
    tide_qformat fmt = check_format(L, 3, "qlinear");
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_qlinear(x, q, fmt), false);
}

static const lt_reg quant_regs[] = {
    {"quantize", f_quantize, LT_FUNCTION},
    {"dequantize", f_dequantize, LT_FUNCTION},
    {"qlinear", f_qlinear, LT_FUNCTION},
    {NULL, NULL, 0},
};

void lt_open_quant(lua_State *L, int mt, int methods, int module)
{
    lt_setfuncs(L, quant_regs, mt, methods, module);
}
