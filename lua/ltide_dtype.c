/*
 * ltide_dtype.c — what a dtype can hold, as PyTorch's torch.finfo and torch.iinfo: tide.finfo
 * and tide.iinfo take a dtype name or a tensor and return a plain table.
 */
#include <float.h>
#include <stdint.h>

#include "ltide.h"

/* bits, eps (2^-fraction bits), max, smallest normal and resolution (10^-decimal digits). */
static const struct {
    tide_dtype dtype;
    int bits;
    double eps, max, tiny, resolution;
} float_limits[] = {
    {TIDE_FLOAT32, 32, 0x1p-23, FLT_MAX, 0x1p-126, 1e-6},
    {TIDE_FLOAT64, 64, 0x1p-52, DBL_MAX, 0x1p-1022, 1e-15},
    {TIDE_FLOAT16, 16, 0x1p-10, 65504.0, 0x1p-14, 1e-3},
    {TIDE_BFLOAT16, 16, 0x1p-7, 0x1.fep127, 0x1p-126, 1e-2},
};

static const struct {
    tide_dtype dtype;
    int bits;
    lua_Integer min, max;
} int_limits[] = {
    {TIDE_INT32, 32, INT32_MIN, INT32_MAX},
    {TIDE_INT64, 64, INT64_MIN, INT64_MAX},
    {TIDE_UINT8, 8, 0, UINT8_MAX},
};

/* The dtype named at arg 1, or a tensor's dtype; the float32 default when absent. */
static tide_dtype dtype_arg(lua_State *L, const char *op)
{
    tide_tensor *t = lt_totensor(L, 1);
    return t ? tide_get_dtype(t) : lt_checkdtype(L, 1, op, TIDE_FLOAT32);
}

static void set_number(lua_State *L, const char *field, double v)
{
    lua_pushnumber(L, v);
    lua_setfield(L, -2, field);
}

static int l_finfo(lua_State *L)
{
    tide_dtype d = dtype_arg(L, "finfo");
    for (size_t i = 0; i < sizeof float_limits / sizeof float_limits[0]; i++) {
        if (float_limits[i].dtype != d)
            continue;
        lua_createtable(L, 0, 8);
        lua_pushinteger(L, float_limits[i].bits);
        lua_setfield(L, -2, "bits");
        set_number(L, "eps", float_limits[i].eps);
        set_number(L, "max", float_limits[i].max);
        set_number(L, "min", -float_limits[i].max);
        set_number(L, "tiny", float_limits[i].tiny);
        set_number(L, "smallest_normal", float_limits[i].tiny);
        set_number(L, "resolution", float_limits[i].resolution);
        lua_pushstring(L, tide_dtype_name(d));
        lua_setfield(L, -2, "dtype");
        return 1;
    }
    return luaL_error(L, "finfo: %s is not a floating dtype (float32, float64, float16, "
                      "bfloat16); use iinfo for integers", tide_dtype_name(d));
}

static int l_iinfo(lua_State *L)
{
    tide_dtype d = dtype_arg(L, "iinfo");
    for (size_t i = 0; i < sizeof int_limits / sizeof int_limits[0]; i++) {
        if (int_limits[i].dtype != d)
            continue;
        lua_createtable(L, 0, 4);
        lua_pushinteger(L, int_limits[i].bits);
        lua_setfield(L, -2, "bits");
        lua_pushinteger(L, int_limits[i].min);
        lua_setfield(L, -2, "min");
        lua_pushinteger(L, int_limits[i].max);
        lua_setfield(L, -2, "max");
        lua_pushstring(L, tide_dtype_name(d));
        lua_setfield(L, -2, "dtype");
        return 1;
    }
    return luaL_error(L, "iinfo: %s is not an integer dtype (int32, int64, uint8); use finfo "
                      "for floating dtypes", tide_dtype_name(d));
}

static const lt_reg dtype_funcs[] = {
    {"finfo", l_finfo, LT_FUNCTION},
    {"iinfo", l_iinfo, LT_FUNCTION},
    {NULL, NULL, 0},
};

void lt_open_dtype(lua_State *L, int mt, int methods, int module)
{
    lt_setfuncs(L, dtype_funcs, mt, methods, module);
}
