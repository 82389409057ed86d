/*
 * ltide_resize.c — group_norm, instance_norm, interpolate, pixel_shuffle/unshuffle, pad's
 * modes and grid_sample (ops/nn_group_norm.c, nn_resize.c, nn_pad.c, nn_grid_sample.c) from Lua, with PyTorch's argument order
 * and options in a trailing table:
 *   tide.group_norm(x, num_groups [, weight [, bias [, eps]]])
 *   tide.instance_norm(x [, weight [, bias [, eps]]])
 *   tide.interpolate(x, {size= | scale_factor=, mode="nearest"|"nearest-exact"|"linear"|
 *                        "bilinear"|"trilinear",
 *                        align_corners=false})
 *   tide.pixel_shuffle(x, r)   tide.pixel_unshuffle(x, r)
 *   tide.pad_mode(x, pads, mode [, value])   (tide.pad's constant mode is ltide_shape.c's)
 *   tide.grid_sample(x, grid [, {mode="bilinear"|"nearest"|"bicubic",
 *                                padding_mode="zeros"|"border"|"reflection", align_corners=false}])
 */
#include <string.h>

#include "ltide.h"

static double opt_eps(lua_State *L, int arg, const char *op)
{
    if (lua_isnoneornil(L, arg))
        return 1e-5;
    if (lua_type(L, arg) != LUA_TNUMBER)
        luaL_error(L, "%s: eps must be a number, got %s", op, luaL_typename(L, arg));
    return lua_tonumber(L, arg);
}

static int f_group_norm(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "group_norm");
    int64_t groups = lt_checkint(L, 2, "group_norm", "num_groups");
    tide_tensor *w = lt_optcheck(L, 3, "group_norm");
    tide_tensor *bias = lt_optcheck(L, 4, "group_norm");
    double eps = opt_eps(L, 5, "group_norm");
    lua_settop(L, 5);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_group_norm(x, groups, w, bias, eps), false);
}

static int f_instance_norm(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "instance_norm");
    tide_tensor *w = lt_optcheck(L, 2, "instance_norm");
    tide_tensor *bias = lt_optcheck(L, 3, "instance_norm");
    double eps = opt_eps(L, 4, "instance_norm");
    lua_settop(L, 4);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_instance_norm(x, w, bias, eps), false);
}

/* A number or a list of nsp numbers (option key of the table at opts) into out; false if nil. */
static bool per_dim(lua_State *L, int opts, const char *key, int nsp, double out[3])
{
    lua_getfield(L, opts, key);
    int t = lua_type(L, -1);
    if (t == LUA_TNIL) {
        lua_pop(L, 1);
        return false;
    }
    if (t == LUA_TNUMBER) {
        for (int i = 0; i < nsp; i++)
            out[i] = lua_tonumber(L, -1);
    } else if (t == LUA_TTABLE && lua_rawlen(L, -1) == (lua_Unsigned)nsp) {
        for (int i = 0; i < nsp; i++) {
            if (lua_rawgeti(L, -1, i + 1) != LUA_TNUMBER)
                luaL_error(L, "interpolate: %s must hold numbers", key);
            out[i] = lua_tonumber(L, -1);
            lua_pop(L, 1);
        }
    } else {
        luaL_error(L, "interpolate: %s must be a number or a list of %d numbers (one per spatial "
                   "dim), got %s", key, nsp, luaL_typename(L, -1));
    }
    lua_pop(L, 1);
    return true;
}

static tide_interp_mode interp_mode(lua_State *L, int opts, int nsp, bool *align_corners)
{
    static const char *linear_names[4] = {NULL, "linear", "bilinear", "trilinear"};
    lua_getfield(L, opts, "mode");
    const char *m = lua_isnil(L, -1) ? "nearest" : lua_tostring(L, -1);
    if (!m || lua_type(L, -1) == LUA_TNUMBER)
        luaL_error(L, "interpolate: mode must be a string");
    tide_interp_mode mode = TIDE_INTERP_NEAREST;
    if (strcmp(m, linear_names[nsp]) == 0)
        mode = TIDE_INTERP_LINEAR;
    else if (strcmp(m, "nearest-exact") == 0)
        mode = TIDE_INTERP_NEAREST_EXACT;
    else if (strcmp(m, "nearest") != 0)
        luaL_error(L, "interpolate: mode \"%s\" does not fit an input with %d spatial dims "
                   "(\"nearest\", \"nearest-exact\" or \"%s\")", m, nsp, linear_names[nsp]);
    lua_getfield(L, opts, "align_corners");
    if (!lua_isnil(L, -1) && lua_type(L, -1) != LUA_TBOOLEAN)
        luaL_error(L, "interpolate: align_corners must be a boolean");
    *align_corners = lua_toboolean(L, -1);
    if (*align_corners && mode != TIDE_INTERP_LINEAR)
        luaL_error(L, "interpolate: align_corners only goes with the linear modes");
    lua_pop(L, 2);
    return mode;
}

static int f_interpolate(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "interpolate");
    luaL_checktype(L, 2, LUA_TTABLE);
    int nsp = tide_ndim(x) - 2;
    if (nsp < 1 || nsp > 3) {
        char s[160];
        return luaL_error(L, "interpolate: the input must have 3 to 5 dims [N, C, spatial...], "
                          "got shape %s", lt_shape_str(s, sizeof s, x));
    }
    double size_d[3], scales[3];
    bool has_size = per_dim(L, 2, "size", nsp, size_d);
    bool has_scale = per_dim(L, 2, "scale_factor", nsp, scales);
    if (has_size == has_scale)
        return luaL_error(L, "interpolate: give exactly one of size and scale_factor");
    int64_t size[3];
    for (int i = 0; has_size && i < nsp; i++) {
        if (size_d[i] != (double)(int64_t)size_d[i])
            return luaL_error(L, "interpolate: size must hold integers, got %f", size_d[i]);
        size[i] = (int64_t)size_d[i];
    }
    bool align;
    tide_interp_mode mode = interp_mode(L, 2, nsp, &align);
    lua_settop(L, 2);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_interpolate(x, nsp, has_size ? size : NULL,
                                          has_scale ? scales : NULL, mode, align), false);
}

static int shuffle(lua_State *L, bool up)
{
    const char *op = up ? "pixel_shuffle" : "pixel_unshuffle";
    tide_tensor *x = lt_check(L, 1, op);
    int64_t r = lt_checkint(L, 2, op, up ? "upscale_factor" : "downscale_factor");
    lua_settop(L, 2);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, up ? tide_pixel_shuffle(x, r) : tide_pixel_unshuffle(x, r), false);
}
static int f_pixel_shuffle(lua_State *L) { return shuffle(L, true); }
static int f_pixel_unshuffle(lua_State *L) { return shuffle(L, false); }

static int f_pad_mode(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "pad");
    luaL_checktype(L, 2, LUA_TTABLE);
    lua_Unsigned n = lua_rawlen(L, 2);
    if (n % 2 || n > 2 * TIDE_MAX_DIMS)
        return luaL_error(L, "pad: expected an even number of pads, got %d", (int)n);
    int64_t pads[2 * TIDE_MAX_DIMS];
    for (int i = 0; i < (int)n; i++) {
        lua_rawgeti(L, 2, i + 1);
        pads[i] = lt_checkint(L, -1, "pad", "a pad");
        lua_pop(L, 1);
    }
    static const char *const modes[] = {"constant", "reflect", "replicate", "circular"};
    const char *name = lua_type(L, 3) == LUA_TSTRING ? lua_tostring(L, 3) : "";
    int mode = 0;
    while (mode < 4 && strcmp(name, modes[mode]) != 0)
        mode++;
    if (mode == 4)
        return luaL_error(L, "pad: mode must be \"constant\", \"reflect\", \"replicate\" or "
                          "\"circular\", got %s", lua_type(L, 3) == LUA_TSTRING ? name
                                                   : luaL_typename(L, 3));
    double value = luaL_optnumber(L, 4, 0);
    lua_settop(L, 4);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_pad_mode(x, pads, (int)n, (tide_padding_mode)mode, value), false);
}

/* The index of the string option key (default def) in names[n], or a Lua error listing them. */
static int opt_choice(lua_State *L, int opts, const char *key, const char *const *names, int n,
                      int def)
{
    if (lua_isnoneornil(L, opts))
        return def;
    lua_getfield(L, opts, key);
    if (lua_isnil(L, -1)) {
        lua_pop(L, 1);
        return def;
    }
    const char *v = lua_type(L, -1) == LUA_TSTRING ? lua_tostring(L, -1) : NULL;
    for (int i = 0; v && i < n; i++)
        if (strcmp(v, names[i]) == 0) {
            lua_pop(L, 1);
            return i;
        }
    return luaL_error(L, "grid_sample: %s must be \"%s\", \"%s\" or \"%s\", got %s", key,
                      names[0], names[1], names[2], v ? v : luaL_typename(L, -1));
}

static int f_grid_sample(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "grid_sample");
    tide_tensor *grid = lt_check(L, 2, "grid_sample");
    static const char *const keys[] = {"mode", "padding_mode", "align_corners", NULL};
    if (!lua_isnoneornil(L, 3)) {
        luaL_checktype(L, 3, LUA_TTABLE);
        lt_checkkeys(L, 3, "grid_sample", keys);
    }
    static const char *const modes[] = {"bilinear", "nearest", "bicubic"};
    static const char *const paddings[] = {"zeros", "border", "reflection"};
    int mode = opt_choice(L, 3, "mode", modes, 3, 0);
    int padding = opt_choice(L, 3, "padding_mode", paddings, 3, 0);
    bool align = false;
    if (!lua_isnoneornil(L, 3)) {
        lua_getfield(L, 3, "align_corners");
        if (!lua_isnil(L, -1) && !lua_isboolean(L, -1))
            return luaL_error(L, "grid_sample: align_corners must be a boolean");
        align = lua_toboolean(L, -1);
        lua_pop(L, 1);
    }
    lua_settop(L, 3);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_grid_sample(x, grid, (tide_grid_mode)mode, (tide_grid_padding)padding,
                                          align), false);
}

static const lt_reg resize_regs[] = {
    {"grid_sample", f_grid_sample, LT_FUNCTION},
    {"group_norm", f_group_norm, LT_FUNCTION},
    {"instance_norm", f_instance_norm, LT_FUNCTION},
    {"interpolate", f_interpolate, LT_FUNCTION},
    {"pixel_shuffle", f_pixel_shuffle, LT_FUNCTION},
    {"pixel_unshuffle", f_pixel_unshuffle, LT_FUNCTION},
    {"pad_mode", f_pad_mode, LT_FUNCTION},
    {NULL, NULL, 0},
};

void lt_open_resize(lua_State *L, int mt, int methods, int module)
{
    lt_setfuncs(L, resize_regs, mt, methods, module);
}
