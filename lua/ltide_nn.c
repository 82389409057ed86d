/*
 * ltide_nn.c — the neural-network ops of the C API from Lua, with PyTorch's argument order and
 * defaults: conv2d and its gradients, pooling, softmax/log_softmax, layer_norm, batch_norm,
 * linear, dropout, gelu, and the losses. Class targets are 1-based in Lua; pooling indices come
 * back 1-based.
 */
#include <string.h>

#include "ltide.h"

/* An int or a {h, w} pair; dflt fills both when the argument is nil. */
static void pair(lua_State *L, int arg, const char *op, const char *what, int dflt, int out[2])
{
    if (lua_isnoneornil(L, arg)) {
        out[0] = out[1] = dflt;
        return;
    }
    if (lua_type(L, arg) == LUA_TTABLE) {
        if (lua_rawlen(L, arg) != 2)
            luaL_error(L, "%s: %s must be a number or a pair {h, w}", op, what);
        for (int i = 0; i < 2; i++) {
            lua_rawgeti(L, arg, i + 1);
            int64_t v = lt_checkint(L, -1, op, what);
            lua_pop(L, 1);
            if (v < -(1 << 30) || v > (1 << 30))
                luaL_error(L, "%s: %s %I is out of range", op, what, (lua_Integer)v);
            out[i] = (int)v;
        }
        return;
    }
    int64_t v = lt_checkint(L, arg, op, what);
    if (v < -(1 << 30) || v > (1 << 30))
        luaL_error(L, "%s: %s %I is out of range", op, what, (lua_Integer)v);
    out[0] = out[1] = (int)v;
}

static void pair64(lua_State *L, int arg, const char *op, const char *what, int64_t out[2])
{
    int p[2];
    pair(L, arg, op, what, -1, p);
    if (lua_isnoneornil(L, arg))
        luaL_error(L, "%s: %s is required", op, what);
    out[0] = p[0];
    out[1] = p[1];
}

/* True when the table at arg is an options table (named fields) rather than a pair. */
static bool is_options(lua_State *L, int arg)
{
    return lua_type(L, arg) == LUA_TTABLE && lua_rawlen(L, arg) == 0;
}

/* Pushes the value of an option (from the options table at opt, or the positional argument
 * pos when there is no options table) onto the stack and returns its slot. */
static int option_slot(lua_State *L, int opt, int pos, const char *key)
{
    if (opt)
        lua_getfield(L, opt, key);
    else
        lua_pushvalue(L, pos);
    return lua_gettop(L);
}

static bool opt_bool(lua_State *L, int slot, const char *op, const char *what, bool dflt)
{
    if (lua_isnoneornil(L, slot))
        return dflt;
    if (lua_type(L, slot) != LUA_TBOOLEAN)
        luaL_error(L, "%s: %s must be a boolean, got %s", op, what, luaL_typename(L, slot));
    return lua_toboolean(L, slot);
}

static double opt_num(lua_State *L, int slot, const char *op, const char *what, double dflt)
{
    if (lua_isnoneornil(L, slot))
        return dflt;
    if (lua_type(L, slot) != LUA_TNUMBER)
        luaL_error(L, "%s: %s must be a number, got %s", op, what, luaL_typename(L, slot));
    return lua_tonumber(L, slot);
}

/* ---- convolution -------------------------------------------------------------------------- */

/* conv2d(x, weight [, bias [, stride [, padding [, dilation [, groups]]]]]) or
 * conv2d(x, weight, bias, {stride=, padding=, dilation=, groups=}); padding may be "valid" or
 * "same" (stride 1). */
static int f_conv2d(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "conv2d");
    tide_tensor *w = lt_check(L, 2, "conv2d");
    tide_tensor *bias = lt_optcheck(L, 3, "conv2d");
    lua_settop(L, 7); /* positional slots stay put while option values are pushed above */
    int opt = is_options(L, 4) ? 4 : 0;
    if (opt) {
        static const char *const keys[] = {"stride", "padding", "dilation", "groups", NULL};
        lt_checkkeys(L, opt, "conv2d", keys);
    }
    int stride[2], padding[2], dilation[2];
    pair(L, option_slot(L, opt, 4, "stride"), "conv2d", "stride", 1, stride);
    pair(L, option_slot(L, opt, 6, "dilation"), "conv2d", "dilation", 1, dilation);
    int ps = option_slot(L, opt, 5, "padding");
    if (lua_type(L, ps) == LUA_TSTRING) {
        const char *mode = lua_tostring(L, ps);
        if (strcmp(mode, "valid") == 0) {
            padding[0] = padding[1] = 0;
        } else if (strcmp(mode, "same") == 0) {
            if (stride[0] != 1 || stride[1] != 1)
                return luaL_error(L, "conv2d: padding \"same\" needs stride 1");
            for (int i = 0; i < 2; i++) {
                int64_t k = tide_ndim(w) == 4 ? tide_shape(w)[2 + i] : 1;
                int64_t total = (int64_t)dilation[i] * (k - 1);
                if (total % 2)
                    return luaL_error(L, "conv2d: padding \"same\" needs an odd kernel size "
                                      "(after dilation) in this implementation");
                padding[i] = (int)(total / 2);
            }
        } else {
            return luaL_error(L, "conv2d: padding must be a number, a pair, \"valid\" or "
                              "\"same\", got \"%s\"", mode);
        }
    } else {
        pair(L, ps, "conv2d", "padding", 0, padding);
    }
    int gs = option_slot(L, opt, 7, "groups");
    int64_t groups = lua_isnil(L, gs) ? 1 : lt_checkint(L, gs, "conv2d", "groups");
    if (groups < 1 || groups > (1 << 30))
        return luaL_error(L, "conv2d: groups must be positive, got %I", (lua_Integer)groups);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_conv2d(x, w, bias, stride, padding, dilation, (int)groups), false);
}

/* conv2d_grad_input(grad_out, weight, input_hw [, stride, padding, dilation, groups]) and
 * conv2d_grad_weight(x, grad_out, kernel_hw [, stride, padding, dilation, groups]) */
static int conv_grad(lua_State *L, bool input)
{
    const char *op = input ? "conv2d_grad_input" : "conv2d_grad_weight";
    tide_tensor *a = lt_check(L, 1, op);
    tide_tensor *c = lt_check(L, 2, op);
    int64_t hw[2];
    pair64(L, 3, op, input ? "input_hw" : "kernel_hw", hw);
    int stride[2], padding[2], dilation[2];
    pair(L, 4, op, "stride", 1, stride);
    pair(L, 5, op, "padding", 0, padding);
    pair(L, 6, op, "dilation", 1, dilation);
    int64_t groups = lua_isnoneornil(L, 7) ? 1 : lt_checkint(L, 7, op, "groups");
    if (groups < 1 || groups > (1 << 30))
        return luaL_error(L, "%s: groups must be positive, got %I", op, (lua_Integer)groups);
    lua_settop(L, 7);
    lt_box *b = lt_newbox(L);
    int g = (int)groups;
    tide_tensor *r = input ? tide_conv2d_grad_input(a, c, hw, stride, padding, dilation, g)
                           : tide_conv2d_grad_weight(a, c, hw, stride, padding, dilation, g);
    return lt_fill(L, b, r, false);
}
static int f_conv2d_grad_input(lua_State *L) { return conv_grad(L, true); }
static int f_conv2d_grad_weight(lua_State *L) { return conv_grad(L, false); }

/* ---- pooling ------------------------------------------------------------------------------ */

/* max_pool2d(x, kernel [, stride [, padding [, return_indices]]]) or
 * max_pool2d(x, kernel, {stride=, padding=, return_indices=}); indices are 1-based positions
 * in each H*W plane. */
static int f_max_pool2d(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "max_pool2d");
    int kernel[2], stride[2], padding[2];
    pair(L, 2, "max_pool2d", "kernel_size", 0, kernel);
    if (lua_isnoneornil(L, 2))
        return luaL_error(L, "max_pool2d: kernel_size is required");
    lua_settop(L, 5);
    int opt = is_options(L, 3) ? 3 : 0;
    if (opt) {
        static const char *const keys[] = {"stride", "padding", "return_indices", NULL};
        lt_checkkeys(L, opt, "max_pool2d", keys);
    }
    int ss = option_slot(L, opt, 3, "stride");
    if (lua_isnil(L, ss))
        stride[0] = kernel[0], stride[1] = kernel[1];
    else
        pair(L, ss, "max_pool2d", "stride", 1, stride);
    pair(L, option_slot(L, opt, 4, "padding"), "max_pool2d", "padding", 0, padding);
    bool want = opt_bool(L, option_slot(L, opt, 5, "return_indices"), "max_pool2d",
                         "return_indices", false);
    lt_box *b = lt_newbox(L);
    lt_box *bi = want ? lt_newbox(L) : NULL;
    tide_tensor *indices = NULL;
    tide_tensor *r = tide_max_pool2d(x, kernel, stride, padding, want ? &indices : NULL);
    if (!want) {
        return lt_fill(L, b, r, false);
    }
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

/* avg_pool2d(x, kernel [, stride [, padding [, count_include_pad]]]) or with an options table */
static int f_avg_pool2d(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "avg_pool2d");
    int kernel[2], stride[2], padding[2];
    if (lua_isnoneornil(L, 2))
        return luaL_error(L, "avg_pool2d: kernel_size is required");
    pair(L, 2, "avg_pool2d", "kernel_size", 0, kernel);
    lua_settop(L, 5);
    int opt = is_options(L, 3) ? 3 : 0;
    if (opt) {
        static const char *const keys[] = {"stride", "padding", "count_include_pad", NULL};
        lt_checkkeys(L, opt, "avg_pool2d", keys);
    }
    int ss = option_slot(L, opt, 3, "stride");
    if (lua_isnil(L, ss))
        stride[0] = kernel[0], stride[1] = kernel[1];
    else
        pair(L, ss, "avg_pool2d", "stride", 1, stride);
    pair(L, option_slot(L, opt, 4, "padding"), "avg_pool2d", "padding", 0, padding);
    bool cip = opt_bool(L, option_slot(L, opt, 5, "count_include_pad"), "avg_pool2d",
                        "count_include_pad", true);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_avg_pool2d(x, kernel, stride, padding, cip), false);
}

/* avg_pool2d_grad(grad_out, input_hw, kernel [, stride [, padding [, count_include_pad]]]) */
static int f_avg_pool2d_grad(lua_State *L)
{
    tide_tensor *g = lt_check(L, 1, "avg_pool2d_grad");
    int64_t hw[2];
    pair64(L, 2, "avg_pool2d_grad", "input_hw", hw);
    int kernel[2], stride[2], padding[2];
    if (lua_isnoneornil(L, 3))
        return luaL_error(L, "avg_pool2d_grad: kernel_size is required");
    pair(L, 3, "avg_pool2d_grad", "kernel_size", 0, kernel);
    if (lua_isnoneornil(L, 4))
        stride[0] = kernel[0], stride[1] = kernel[1];
    else
        pair(L, 4, "avg_pool2d_grad", "stride", 1, stride);
    pair(L, 5, "avg_pool2d_grad", "padding", 0, padding);
    bool cip = opt_bool(L, 6, "avg_pool2d_grad", "count_include_pad", true);
    lua_settop(L, 6);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_avg_pool2d_grad(g, hw, kernel, stride, padding, cip), false);
}

static int f_adaptive_avg_pool2d(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "adaptive_avg_pool2d");
    int64_t hw[2];
    pair64(L, 2, "adaptive_avg_pool2d", "output_size", hw);
    lua_settop(L, 2);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_adaptive_avg_pool2d(x, hw[0], hw[1]), false);
}

/* ---- activations and normalization -------------------------------------------------------- */

static int softmax_like(lua_State *L, bool log)
{
    const char *op = log ? "log_softmax" : "softmax";
    tide_tensor *x = lt_check(L, 1, op);
    if (lua_isnoneornil(L, 2))
        return luaL_error(L, "%s: dim is required (for example x:%s(-1))", op, op);
    int d = lt_checkdim(L, 2, tide_ndim(x), 0, op);
    lua_settop(L, 2);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, log ? tide_log_softmax(x, d) : tide_softmax(x, d), false);
}
static int f_softmax(lua_State *L) { return softmax_like(L, false); }
static int f_log_softmax(lua_State *L) { return softmax_like(L, true); }

/* gelu(x [, approximate]): approximate is "none" (default) or "tanh", given as a string or as
 * the table {approximate = ...} (PyTorch's keyword) */
static int f_gelu(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "gelu");
    bool approx = false;
    if (lua_type(L, 2) == LUA_TTABLE) {
        lua_getfield(L, 2, "approximate");
        lua_replace(L, 2);
    }
    if (!lua_isnoneornil(L, 2)) {
        const char *a = lua_tostring(L, 2);
        if (lua_type(L, 2) != LUA_TSTRING || (strcmp(a, "none") != 0 && strcmp(a, "tanh") != 0))
            return luaL_error(L, "gelu: approximate must be \"none\" or \"tanh\"");
        approx = strcmp(a, "tanh") == 0;
    }
    lua_settop(L, 2);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_gelu(x, approx), false);
}

/* layer_norm(x, normalized_shape [, weight [, bias [, eps]]]) */
static int f_layer_norm(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "layer_norm");
    int64_t shape[TIDE_MAX_DIMS];
    int n = lt_checksizes(L, 2, 2, "layer_norm", false, shape);
    int nd = tide_ndim(x);
    bool ok = n >= 1 && n <= nd;
    for (int i = 0; ok && i < n; i++)
        ok = shape[i] == tide_shape(x)[nd - n + i];
    if (!ok) {
        char s[200];
        return luaL_error(L, "layer_norm: normalized_shape must match the last dims of the input "
                          "of shape %s", lt_shape_str(s, sizeof s, x));
    }
    tide_tensor *w = lt_optcheck(L, 3, "layer_norm");
    tide_tensor *bias = lt_optcheck(L, 4, "layer_norm");
    double eps = opt_num(L, 5, "layer_norm", "eps", 1e-5);
    lua_settop(L, 5);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_layer_norm(x, n, w, bias, eps), false);
}

/* batch_norm(x, running_mean, running_var [, weight [, bias [, training [, momentum [, eps]]]]]) */
static int f_batch_norm(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "batch_norm");
    tide_tensor *rm = lt_optcheck(L, 2, "batch_norm");
    tide_tensor *rv = lt_optcheck(L, 3, "batch_norm");
    tide_tensor *w = lt_optcheck(L, 4, "batch_norm");
    tide_tensor *bias = lt_optcheck(L, 5, "batch_norm");
    bool training = opt_bool(L, 6, "batch_norm", "training", false);
    double momentum = opt_num(L, 7, "batch_norm", "momentum", 0.1);
    double eps = opt_num(L, 8, "batch_norm", "eps", 1e-5);
    lua_settop(L, 8);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_batch_norm(x, rm, rv, w, bias, training, momentum, eps), false);
}

static int f_linear(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "linear");
    tide_tensor *w = lt_check(L, 2, "linear");
    tide_tensor *bias = lt_optcheck(L, 3, "linear");
    lua_settop(L, 3);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_linear(x, w, bias), false);
}

/* scaled_dot_product_attention(q, k, v [, {attn_mask=, is_causal=false, dropout_p=0,
 * scale=}]), as torch's F.scaled_dot_product_attention (keywords in a table). */
static int f_sdpa(lua_State *L)
{
    const char *op = "scaled_dot_product_attention";
    tide_tensor *q = lt_check(L, 1, op), *k = lt_check(L, 2, op), *v = lt_check(L, 3, op);
    if (!lua_isnoneornil(L, 4) && lua_type(L, 4) != LUA_TTABLE)
        return luaL_error(L, "%s: options must be a table {attn_mask=, is_causal=, dropout_p=, "
                             "scale=}, got %s",
                          op, luaL_typename(L, 4));
    int opt = lua_type(L, 4) == LUA_TTABLE ? 4 : 0;
    lua_settop(L, 4);
    tide_tensor *mask = NULL;
    bool causal = false;
    double dropout_p = 0, scale = 0;
    if (opt) {
        lua_getfield(L, opt, "attn_mask"); /* slot 5 */
        mask = lt_optcheck(L, 5, op);
        causal = opt_bool(L, option_slot(L, opt, 0, "is_causal"), op, "is_causal", false);
        dropout_p = opt_num(L, option_slot(L, opt, 0, "dropout_p"), op, "dropout_p", 0);
        lua_getfield(L, opt, "scale"); /* slot 8 */
        scale = opt_num(L, 8, op, "scale", 0);
    }
    bool has_scale = opt && !lua_isnil(L, 8);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b,
                   tide_scaled_dot_product_attention(q, k, v, mask, causal, dropout_p,
                                                     has_scale ? &scale : NULL),
                   false);
}

/* dropout(x [, p [, training]]), as torch's F.dropout (p = 0.5, training = true) */
static int f_dropout(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "dropout");
    double p = opt_num(L, 2, "dropout", "p", 0.5);
    bool training = opt_bool(L, 3, "dropout", "training", true);
    lua_settop(L, 3);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_dropout(x, p, training), false);
}

/* ---- losses -------------------------------------------------------------------------------- */

typedef struct loss_opts {
    tide_reduction reduction;
    double label_smoothing;
    bool has_ignore;
    int64_t ignore_index; /* Lua's, 1-based */
} loss_opts;

static tide_reduction reduction_of(lua_State *L, int slot, const char *op)
{
    if (lua_isnoneornil(L, slot))
        return TIDE_REDUCTION_MEAN;
    const char *r = lua_type(L, slot) == LUA_TSTRING ? lua_tostring(L, slot) : "";
    if (strcmp(r, "mean") == 0)
        return TIDE_REDUCTION_MEAN;
    if (strcmp(r, "sum") == 0)
        return TIDE_REDUCTION_SUM;
    if (strcmp(r, "none") == 0)
        return TIDE_REDUCTION_NONE;
    luaL_error(L, "%s: reduction must be \"mean\", \"sum\" or \"none\"", op);
    return TIDE_REDUCTION_MEAN;
}

/* The options at arg: a reduction string, or {reduction=, label_smoothing=, ignore_index=}. */
static void loss_options(lua_State *L, int arg, const char *op, bool classes, loss_opts *o)
{
    o->reduction = TIDE_REDUCTION_MEAN;
    o->label_smoothing = 0;
    o->has_ignore = false;
    o->ignore_index = 0;
    if (lua_isnoneornil(L, arg))
        return;
    if (lua_type(L, arg) == LUA_TSTRING) {
        o->reduction = reduction_of(L, arg, op);
        return;
    }
    if (lua_type(L, arg) != LUA_TTABLE)
        luaL_error(L, "%s: options must be a table or a reduction name, got %s", op,
                   luaL_typename(L, arg));
    static const char *const class_keys[] = {"reduction", "label_smoothing", "ignore_index", NULL};
    static const char *const plain_keys[] = {"reduction", NULL};
    lt_checkkeys(L, arg, op, classes ? class_keys : plain_keys);
    lua_getfield(L, arg, "reduction");
    o->reduction = reduction_of(L, -1, op);
    lua_getfield(L, arg, "label_smoothing");
    o->label_smoothing = opt_num(L, -1, op, "label_smoothing", 0);
    if (lua_getfield(L, arg, "ignore_index") != LUA_TNIL) {
        o->has_ignore = true;
        o->ignore_index = lt_checkint(L, -1, op, "ignore_index");
    }
    lua_pop(L, 3);
}

/* cross_entropy(logits, target [, options]) and nll_loss(log_probs, target [, options]):
 * target holds 1-based class indices. */
static int class_loss(lua_State *L, bool ce)
{
    const char *op = ce ? "cross_entropy" : "nll_loss";
    tide_tensor *x = lt_check(L, 1, op);
    tide_tensor *target = lt_check(L, 2, op);
    tide_dtype td = tide_get_dtype(target);
    if (td != TIDE_INT64 && td != TIDE_INT32)
        return luaL_error(L, "%s: the target must hold class indices in an int64 tensor, got %s",
                          op, tide_dtype_name(td));
    loss_opts o;
    loss_options(L, 3, op, true, &o);
    if (!ce && o.label_smoothing != 0)
        return luaL_error(L, "nll_loss: label_smoothing is not an option of nll_loss");
    int64_t classes = tide_ndim(x) >= 2   ? tide_shape(x)[1]
                      : tide_ndim(x) == 1 ? tide_shape(x)[0]
                                          : 0;
    lua_settop(L, 3);
    lt_box *b = lt_newbox(L);
    char err[300];
    tide_tensor *t0;
    int64_t ignore = -100; /* PyTorch's default; unreachable once targets are checked */
    if (o.has_ignore) {
        /* ignored entries may hold any value: shift without the range check */
        tide_tensor *one = tide_integer(1);
        t0 = one ? tide_sub(target, one) : NULL;
        tide_release(one);
        err[0] = 0;
        ignore = o.ignore_index - 1;
    } else {
        t0 = lt_zero_based(target, classes, op, "the classes", err, sizeof err);
    }
    if (!t0) {
        if (err[0])
            return luaL_error(L, "%s", err);
        return lt_raise(L, NULL);
    }
    tide_tensor *r = ce ? tide_cross_entropy(x, t0, o.reduction, o.label_smoothing, ignore)
                        : tide_nll_loss(x, t0, o.reduction, ignore);
    tide_release(t0);
    return lt_fill(L, b, r, false);
}
static int f_cross_entropy(lua_State *L) { return class_loss(L, true); }
static int f_nll_loss(lua_State *L) { return class_loss(L, false); }

static int pair_loss(lua_State *L, bool bce)
{
    const char *op = bce ? "binary_cross_entropy_with_logits" : "mse_loss";
    tide_tensor *x = lt_check(L, 1, op);
    tide_tensor *t = lt_check(L, 2, op);
    loss_opts o;
    loss_options(L, 3, op, false, &o);
    lua_settop(L, 3);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, bce ? tide_binary_cross_entropy_with_logits(x, t, o.reduction)
                             : tide_mse_loss(x, t, o.reduction), false);
}
static int f_mse_loss(lua_State *L) { return pair_loss(L, false); }
static int f_bce_logits(lua_State *L) { return pair_loss(L, true); }

static const lt_reg nn_regs[] = {
    {"conv2d", f_conv2d, LT_FUNCTION},
    {"conv2d_grad_input", f_conv2d_grad_input, LT_FUNCTION},
    {"conv2d_grad_weight", f_conv2d_grad_weight, LT_FUNCTION},
    {"max_pool2d", f_max_pool2d, LT_FUNCTION},
    {"avg_pool2d", f_avg_pool2d, LT_FUNCTION},
    {"avg_pool2d_grad", f_avg_pool2d_grad, LT_FUNCTION},
    {"adaptive_avg_pool2d", f_adaptive_avg_pool2d, LT_FUNCTION},
    {"softmax", f_softmax, LT_BOTH},
    {"log_softmax", f_log_softmax, LT_BOTH},
    {"gelu", f_gelu, LT_BOTH},
    {"layer_norm", f_layer_norm, LT_FUNCTION},
    {"batch_norm", f_batch_norm, LT_FUNCTION},
    {"linear", f_linear, LT_FUNCTION},
    {"dropout", f_dropout, LT_FUNCTION},
    {"scaled_dot_product_attention", f_sdpa, LT_FUNCTION},
    {"cross_entropy", f_cross_entropy, LT_FUNCTION},
    {"nll_loss", f_nll_loss, LT_FUNCTION},
    {"mse_loss", f_mse_loss, LT_FUNCTION},
    {"binary_cross_entropy_with_logits", f_bce_logits, LT_FUNCTION},
    {NULL, NULL, 0},
};

void lt_open_nn(lua_State *L, int mt, int methods, int module)
{
    lt_setfuncs(L, nn_regs, mt, methods, module);
}
