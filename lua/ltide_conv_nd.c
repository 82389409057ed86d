/*
 * ltide_conv_nd.c — the raw bindings of the 1-D/3-D convolution family (ops/conv_nd.c,
 * pool_nd.c, fold.c): tide._conv_nd and friends take every size as a table of nd integers,
 * already resolved; lua/tide/nn/conv.lua gives them PyTorch's names and argument forms
 * (F.conv1d, F.max_pool3d, F.unfold, nn.Conv3d, ...).
 */
#include "ltide.h"

#define NDMAX 3

/* A table of n integers at arg (nil: use is false). */
static bool ints(lua_State *L, int arg, const char *op, const char *what, int n, int out[NDMAX])
{
    if (lua_isnoneornil(L, arg))
        return false;
    luaL_checktype(L, arg, LUA_TTABLE);
    if ((int)lua_rawlen(L, arg) != n)
        luaL_error(L, "%s: %s must have %d values", op, what, n);
    for (int i = 0; i < n; i++) {
        lua_rawgeti(L, arg, i + 1);
        int64_t v = lt_checkint(L, -1, op, what);
        lua_pop(L, 1);
        if (v < -(1 << 30) || v > (1 << 30))
            luaL_error(L, "%s: %s %I is out of range", op, what, (lua_Integer)v);
        out[i] = (int)v;
    }
    return true;
}

static int nd_arg(lua_State *L, int arg)
{
    int64_t nd = lt_checkint(L, arg, "conv_nd", "nd");
    if (nd < 1 || nd > 3)
        luaL_error(L, "expected 1, 2 or 3 spatial dims, got %I", (lua_Integer)nd);
    return (int)nd;
}

static int group_arg(lua_State *L, int arg, const char *op)
{
    int64_t g = lua_isnoneornil(L, arg) ? 1 : lt_checkint(L, arg, op, "groups");
    if (g < 1 || g > (1 << 30))
        luaL_error(L, "%s: groups must be positive, got %I", op, (lua_Integer)g);
    return (int)g;
}

/* _conv_nd(nd, x, w, bias|nil, stride, padding, dilation, groups) */
static int f_conv_nd(lua_State *L)
{
    int nd = nd_arg(L, 1), s[NDMAX], p[NDMAX], d[NDMAX];
    tide_tensor *x = lt_check(L, 2, "conv"), *w = lt_check(L, 3, "conv");
    tide_tensor *b = lt_optcheck(L, 4, "conv");
    bool hs = ints(L, 5, "conv", "stride", nd, s), hp = ints(L, 6, "conv", "padding", nd, p),
         hd = ints(L, 7, "conv", "dilation", nd, d);
    int g = group_arg(L, 8, "conv");
    lt_box *box = lt_newbox(L);
    return lt_fill(L, box,
                   tide_conv_nd(nd, x, w, b, hs ? s : NULL, hp ? p : NULL, hd ? d : NULL, g),
                   false);
}

/* _conv_transpose_nd(nd, x, w, bias|nil, stride, padding, output_padding, groups, dilation) */
static int f_conv_transpose_nd(lua_State *L)
{
    int nd = nd_arg(L, 1), s[NDMAX], p[NDMAX], o[NDMAX], d[NDMAX];
    const char *op = "conv_transpose";
    tide_tensor *x = lt_check(L, 2, op), *w = lt_check(L, 3, op), *b = lt_optcheck(L, 4, op);
    bool hs = ints(L, 5, op, "stride", nd, s), hp = ints(L, 6, op, "padding", nd, p),
         ho = ints(L, 7, op, "output_padding", nd, o);
    int g = group_arg(L, 8, op);
    bool hd = ints(L, 9, op, "dilation", nd, d);
    lt_box *box = lt_newbox(L);
    return lt_fill(L, box,
                   tide_conv_transpose_nd(nd, x, w, b, hs ? s : NULL, hp ? p : NULL,
                                          ho ? o : NULL, g, hd ? d : NULL),
                   false);
}

/* _pool_nd(nd, is_max, x, kernel, stride, padding, ceil_mode, count_include_pad | want_indices)
 * max pools with want_indices also return 1-based positions. */
static int f_pool_nd(lua_State *L)
{
    int nd = nd_arg(L, 1), k[NDMAX], s[NDMAX], p[NDMAX];
    bool is_max = lua_toboolean(L, 2);
    const char *op = is_max ? "max_pool" : "avg_pool";
    tide_tensor *x = lt_check(L, 3, op);
    if (!ints(L, 4, op, "kernel_size", nd, k))
        return luaL_error(L, "%s: kernel_size is required", op);
    bool hs = ints(L, 5, op, "stride", nd, s), hp = ints(L, 6, op, "padding", nd, p);
    bool ceil_mode = lua_toboolean(L, 7), flag = lua_toboolean(L, 8);
    lt_box *b = lt_newbox(L);
    if (!is_max)
        return lt_fill(L, b,
                       tide_avg_pool_nd(nd, x, k, hs ? s : NULL, hp ? p : NULL, ceil_mode, flag),
                       false);
    lt_box *bi = flag ? lt_newbox(L) : NULL;
    tide_tensor *indices = NULL;
    tide_tensor *r = tide_max_pool_nd(nd, x, k, hs ? s : NULL, hp ? p : NULL, ceil_mode,
                                      flag ? &indices : NULL);
    if (!flag)
        return lt_fill(L, b, r, false);
    tide_tensor *one = r && indices ? tide_integer(1) : NULL;
    tide_tensor *i1 = one ? tide_add(indices, one) : NULL;
    tide_release(one);
    tide_release(indices);
    if (!i1) {
        tide_release(r);
        return lt_raise(L, NULL);
    }
    lt_fill(L, b, r, false);
    lt_fill(L, bi, i1, false);
    return 2;
}

/* _adaptive_avg_pool_nd(nd, x, sizes) */
static int f_adaptive_nd(lua_State *L)
{
    int nd = nd_arg(L, 1), o[NDMAX];
    tide_tensor *x = lt_check(L, 2, "adaptive_avg_pool");
    if (!ints(L, 3, "adaptive_avg_pool", "output_size", nd, o))
        return luaL_error(L, "adaptive_avg_pool: output_size is required");
    int64_t o64[NDMAX] = {o[0], nd > 1 ? o[1] : 0, nd > 2 ? o[2] : 0};
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_adaptive_avg_pool_nd(nd, x, o64), false);
}

/* _unfold(x, kernel, dilation, padding, stride), _fold(x, output_size, kernel, dilation,
 * padding, stride): every size a pair. */
static int f_unfold(lua_State *L)
{
    int k[NDMAX], d[NDMAX], p[NDMAX], s[NDMAX];
    tide_tensor *x = lt_check(L, 1, "unfold");
    ints(L, 2, "unfold", "kernel_size", 2, k);
    ints(L, 3, "unfold", "dilation", 2, d);
    ints(L, 4, "unfold", "padding", 2, p);
    ints(L, 5, "unfold", "stride", 2, s);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_unfold_patches(x, k, d, p, s), false);
}

static int f_fold(lua_State *L)
{
    int o[NDMAX], k[NDMAX], d[NDMAX], p[NDMAX], s[NDMAX];
    tide_tensor *x = lt_check(L, 1, "fold");
    ints(L, 2, "fold", "output_size", 2, o);
    ints(L, 3, "fold", "kernel_size", 2, k);
    ints(L, 4, "fold", "dilation", 2, d);
    ints(L, 5, "fold", "padding", 2, p);
    ints(L, 6, "fold", "stride", 2, s);
    int64_t o64[2] = {o[0], o[1]};
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_fold_patches(x, o64, k, d, p, s), false);
}

static const lt_reg conv_nd_regs[] = {
    {"_conv_nd", f_conv_nd, LT_FUNCTION},
    {"_conv_transpose_nd", f_conv_transpose_nd, LT_FUNCTION},
    {"_pool_nd", f_pool_nd, LT_FUNCTION},
    {"_adaptive_avg_pool_nd", f_adaptive_nd, LT_FUNCTION},
    {"_unfold", f_unfold, LT_FUNCTION},
    {"_fold", f_fold, LT_FUNCTION},
    {NULL, NULL, 0},
};

/* tide.conv1d (and the others torch also has at top level) before tide.nn is loaded: calls
 * require("tide.nn.conv").functions[name] with the same arguments. Loading tide.nn replaces
 * these with the Lua functions themselves. */
static int f_forward(lua_State *L)
{
    int n = lua_gettop(L);
    lua_getglobal(L, "require");
    lua_pushliteral(L, "tide.nn.conv");
    lua_call(L, 1, 1);
    lua_getfield(L, -1, "functions");
    lua_getfield(L, -1, lua_tostring(L, lua_upvalueindex(1)));
    lua_replace(L, n + 1);
    lua_settop(L, n + 1);
    lua_insert(L, 1);
    lua_call(L, n, LUA_MULTRET);
    return lua_gettop(L);
}

void lt_open_conv_nd(lua_State *L, int mt, int methods, int module)
{
    lt_setfuncs(L, conv_nd_regs, mt, methods, module);
    static const char *const top_level[] = {
        "conv1d", "conv3d", "conv_transpose1d", "conv_transpose2d", "conv_transpose3d",
        "max_pool1d", "max_pool3d", "avg_pool1d", "avg_pool3d", "adaptive_avg_pool1d",
        "adaptive_avg_pool3d", NULL};
    for (int i = 0; top_level[i]; i++) {
        lua_pushstring(L, top_level[i]);
        lua_pushcclosure(L, f_forward, 1);
        lua_setfield(L, module, top_level[i]);
    }
}
