/*
 * conv.c — conv2d and its two gradients, max/avg pooling and the avg-pool gradient (NCHW):
 * argument checks with errors that name the op, the shapes and the dtypes, the output-size
 * rule, then the dispatcher. Composite parts stay composite so autograd and the jit see only
 * primitives: conv2d's bias is a broadcast add, max_pool2d's indices are a second primitive,
 * adaptive_avg_pool2d is a mean, an avg_pool2d, or per-bin slices and means.
 *
 * NULL stride/padding/dilation arrays mean PyTorch's defaults: stride 1 (the kernel size for
 * the pools), padding 0, dilation 1.
 */
#include <stdio.h>
#include <stdlib.h>

#include "autocast.h"

/* Bins up to this many per dim for adaptive_avg_pool2d sizes that do not divide the input:
 * each bin is a few ops, so the general path is meant for heads, not for resampling. */
#define ADAPTIVE_MAX_BINS 1024

typedef struct window {
    int64_t stride[2], pad[2], dil[2];
} window;

/* "[2, 3, 8, 8] float32" into buf. */
static const char *describe(char *buf, size_t size, const tide_tensor *t)
{
    char s[160];
    snprintf(buf, size, "%s %s", td_shape_str(s, sizeof s, t->ndim, t->shape),
             tide_dtype_name((tide_dtype)t->dtype));
    return buf;
}

/* One (height, width) pair of a user's arguments: dflt when v is NULL, each at least min. */
static int read_pair(const char *op, const char *what, const int v[2], int dflt, int min,
                     int64_t out[2])
{
    out[0] = v ? v[0] : dflt;
    out[1] = v ? v[1] : dflt;
    if (out[0] < min || out[1] < min)
        return td_error("%s: %s must be %s, got (%lld, %lld)", op, what,
                        min > 0 ? "positive" : "non-negative", (long long)out[0],
                        (long long)out[1]);
    return 0;
}

static int read_window(const char *op, const int stride[2], const int padding[2],
                       const int dilation[2], window *w)
{
    if (read_pair(op, "stride", stride, 1, 1, w->stride) < 0 ||
        read_pair(op, "padding", padding, 0, 0, w->pad) < 0 ||
        read_pair(op, "dilation", dilation, 1, 1, w->dil) < 0)
        return -1;
    return 0;
}

/* The output length of a sliding window over in (+ pad on both sides), or -1 when the dilated
 * kernel does not fit. Written so that no product can overflow. */
static int64_t out_len(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil)
{
    int64_t padded = in + 2 * pad;
    if (padded < 1 || k - 1 > (padded - 1) / dil)
        return -1;
    return (padded - dil * (k - 1) - 1) / stride + 1;
}

/* The output height and width, or an error naming op when the kernel is larger than the
 * padded input. */
static int out_size(const char *op, const tide_tensor *x, const int64_t k[2], const window *w,
                    int64_t out[2])
{
    for (int i = 0; i < 2; i++) {
        out[i] = out_len(x->shape[2 + i], k[i], w->stride[i], w->pad[i], w->dil[i]);
        if (out[i] < 0) {
            char s[200];
            return td_error("%s: the kernel (%lld, %lld) with dilation (%lld, %lld) is larger "
                            "than the input %s padded by (%lld, %lld)",
                            op, (long long)k[0], (long long)k[1], (long long)w->dil[0],
                            (long long)w->dil[1], describe(s, sizeof s, x), (long long)w->pad[0],
                            (long long)w->pad[1]);
        }
    }
    return 0;
}

static int check_4d(const char *op, const char *arg, const tide_tensor *t, const char *layout)
{
    if (td_check_tensor(op, arg, t) < 0)
        return -1;
    char s[200];
    if (t->ndim != 4)
        return td_error("%s: expects a 4-D %s %s, got %s", op, arg, layout,
                        describe(s, sizeof s, t));
    if (!tide_dtype_is_floating((tide_dtype)t->dtype))
        return td_error("%s: %s %s has an unsupported dtype; %s needs a floating dtype (float32, "
                        "float64, float16, bfloat16)", op, arg, describe(s, sizeof s, t), op);
    return 0;
}

/* Two operands of one op agree in dtype and device. */
static int check_same(const char *op, const char *an, const tide_tensor *a, const char *bn,
                      const tide_tensor *b)
{
    char s1[200], s2[200];
    if (a->dtype != b->dtype)
        return td_error("%s: %s %s and %s %s must have the same dtype", op, an,
                        describe(s1, sizeof s1, a), bn, describe(s2, sizeof s2, b));
    if (a->device != b->device)
        return td_error("%s: %s is on %s but %s is on %s", op, an, a->device->name, bn,
                        b->device->name);
    return 0;
}

/* The channel counts agree with groups: in_channels is C, out_channels O, weight_in the weight's
 * C/groups. ctx names the operands ("input [..] float32 and weight [..] float32"). */
static int check_groups(const char *op, int groups, int64_t in_channels, int64_t out_channels,
                        int64_t weight_in, const char *ctx)
{
    if (groups < 1)
        return td_error("%s: groups must be positive, got %d (%s)", op, groups, ctx);
    if (in_channels % groups != 0)
        return td_error("%s: groups (%d) must divide the input channels (%lld) (%s)", op, groups,
                        (long long)in_channels, ctx);
    if (out_channels % groups != 0)
        return td_error("%s: groups (%d) must divide the output channels (%lld) (%s)", op,
                        groups, (long long)out_channels, ctx);
    if (weight_in != in_channels / groups)
        return td_error("%s: channel mismatch: the input has %lld channels but the weight "
                        "expects %lld per group with %d groups (%s)",
                        op, (long long)in_channels, (long long)weight_in, groups, ctx);
    return 0;
}

/* "a [..] float32 and b [..] float32" into buf. */
static const char *describe2(char *buf, size_t size, const char *an, const tide_tensor *a,
                             const char *bn, const tide_tensor *b)
{
    char s1[200], s2[200];
    snprintf(buf, size, "%s %s and %s %s", an, describe(s1, sizeof s1, a), bn,
             describe(s2, sizeof s2, b));
    return buf;
}

static int check_kernel(const char *op, const int64_t k[2])
{
    if (k[0] < 1 || k[1] < 1)
        return td_error("%s: the kernel size must be positive, got (%lld, %lld)", op,
                        (long long)k[0], (long long)k[1]);
    return 0;
}

static tide_attrs conv_attrs(const window *w, int groups)
{
    tide_attrs a = {.nints = 7,
                    .ints = {w->stride[0], w->stride[1], w->pad[0], w->pad[1], w->dil[0],
                             w->dil[1], groups}};
    return a;
}

static tide_tensor *dispatch2(tide_op op, const tide_tensor *a, const tide_tensor *b,
                              const int64_t shape[4], const tide_attrs *attrs)
{
    td_meta meta = {4, {shape[0], shape[1], shape[2], shape[3]}, (tide_dtype)a->dtype, a->device};
    tide_tensor *in[2] = {(tide_tensor *)a, (tide_tensor *)b};
    return td_dispatch(op, &meta, in, b ? 2 : 1, attrs);
}

/* ---- convolution ------------------------------------------------------------------------- */

static tide_tensor *conv2d_body(const tide_tensor *x, const tide_tensor *weight,
                                const tide_tensor *bias, const int stride[2], const int padding[2],
                                const int dilation[2], int groups)
{
    const char *op = "conv2d";
    window w;
    if (check_4d(op, "input", x, "[N, C, H, W]") < 0 ||
        check_4d(op, "weight", weight, "[O, C/groups, kH, kW]") < 0 ||
        check_same(op, "input", x, "weight", weight) < 0 ||
        read_window(op, stride, padding, dilation, &w) < 0)
        return NULL;
    int64_t o = weight->shape[0], k[2] = {weight->shape[2], weight->shape[3]}, hw[2];
    char ctx[450];
    describe2(ctx, sizeof ctx, "input", x, "weight", weight);
    if (check_groups(op, groups, x->shape[1], o, weight->shape[1], ctx) < 0 ||
        check_kernel(op, k) < 0 || out_size(op, x, k, &w, hw) < 0)
        return NULL;
    if (bias) {
        char s[200];
        if (bias->ndim != 1 || bias->shape[0] != o) {
            td_error("%s: bias %s must be 1-D with one value per output channel (%lld)", op,
                     describe(s, sizeof s, bias), (long long)o);
            return NULL;
        }
        if (check_same(op, "input", x, "bias", bias) < 0)
            return NULL;
    }
    int64_t shape[4] = {x->shape[0], o, hw[0], hw[1]};
    tide_attrs attrs = conv_attrs(&w, groups);
    tide_tensor *out = dispatch2(TIDE_OP_CONV2D, x, weight, shape, &attrs);
    if (!out || !bias)
        return out;
    int64_t bshape[4] = {1, o, 1, 1};
    tide_tensor *b4 = tide_reshape(bias, 4, bshape);
    tide_tensor *sum = b4 ? tide_add(out, b4) : NULL;
    tide_release(b4);
    tide_release(out);
    return sum;
}

tide_tensor *tide_conv2d(const tide_tensor *x, const tide_tensor *weight, const tide_tensor *bias,
                         const int stride[2], const int padding[2], const int dilation[2],
                         int groups)
{
    TD_IN_AUTOCAST_OP("conv2d", TD_AUTOCAST_LOWER,
                      conv2d_body(x, weight, bias, stride, padding, dilation, groups), 3, &x,
                      &weight, &bias);
}

tide_tensor *tide_conv2d_grad_input(const tide_tensor *grad_out, const tide_tensor *weight,
                                    const int64_t input_hw[2], const int stride[2],
                                    const int padding[2], const int dilation[2], int groups)
{
    const char *op = "conv2d_grad_input";
    window w;
    if (check_4d(op, "grad_out", grad_out, "[N, O, outH, outW]") < 0 ||
        check_4d(op, "weight", weight, "[O, C/groups, kH, kW]") < 0 ||
        check_same(op, "grad_out", grad_out, "weight", weight) < 0 ||
        read_window(op, stride, padding, dilation, &w) < 0)
        return NULL;
    if (!input_hw) {
        td_error("%s: input_hw is NULL", op);
        return NULL;
    }
    if (input_hw[0] < 0 || input_hw[1] < 0) {
        td_error("%s: input height and width must be non-negative, got (%lld, %lld)", op,
                 (long long)input_hw[0], (long long)input_hw[1]);
        return NULL;
    }
    int64_t o = weight->shape[0], cg = weight->shape[1];
    int64_t k[2] = {weight->shape[2], weight->shape[3]};
    char s1[450], s2[200];
    if (grad_out->shape[1] != o) {
        td_error("%s: grad_out %s has %lld channels but weight %s has %lld output channels", op,
                 describe(s1, sizeof s1, grad_out), (long long)grad_out->shape[1],
                 describe(s2, sizeof s2, weight), (long long)o);
        return NULL;
    }
    describe2(s1, sizeof s1, "grad_out", grad_out, "weight", weight);
    if (groups > 0 && cg > INT64_MAX / groups) {
        td_error("%s: %lld channels per group x %d groups is too many (%s)", op, (long long)cg,
                 groups, s1);
        return NULL;
    }
    if (check_groups(op, groups, groups > 0 ? cg * groups : 0, o, cg, s1) < 0 ||
        check_kernel(op, k) < 0)
        return NULL;
    /* The input's shape, then the forward output it implies, which grad_out must match. */
    int64_t shape[4] = {grad_out->shape[0], cg * groups, input_hw[0], input_hw[1]};
    if (td_check_shape(op, 4, shape, (tide_dtype)grad_out->dtype) < 0)
        return NULL;
    tide_tensor probe = {.ndim = 4, .dtype = grad_out->dtype};
    for (int i = 0; i < 4; i++)
        probe.shape[i] = shape[i];
    int64_t hw[2];
    if (out_size(op, &probe, k, &w, hw) < 0)
        return NULL;
    if (hw[0] != grad_out->shape[2] || hw[1] != grad_out->shape[3]) {
        td_error("%s: grad_out %s does not fit an input of height and width (%lld, %lld): "
                 "conv2d would give (%lld, %lld)",
                 op, describe(s1, sizeof s1, grad_out), (long long)input_hw[0],
                 (long long)input_hw[1], (long long)hw[0], (long long)hw[1]);
        return NULL;
    }
    tide_attrs attrs = conv_attrs(&w, groups);
    return dispatch2(TIDE_OP_CONV2D_GRAD_INPUT, grad_out, weight, shape, &attrs);
}

tide_tensor *tide_conv2d_grad_weight(const tide_tensor *x, const tide_tensor *grad_out,
                                     const int64_t kernel_hw[2], const int stride[2],
                                     const int padding[2], const int dilation[2], int groups)
{
    const char *op = "conv2d_grad_weight";
    window w;
    if (check_4d(op, "input", x, "[N, C, H, W]") < 0 ||
        check_4d(op, "grad_out", grad_out, "[N, O, outH, outW]") < 0 ||
        check_same(op, "input", x, "grad_out", grad_out) < 0 ||
        read_window(op, stride, padding, dilation, &w) < 0)
        return NULL;
    if (!kernel_hw) {
        td_error("%s: kernel_hw is NULL", op);
        return NULL;
    }
    char s1[200], s2[200];
    if (x->shape[0] != grad_out->shape[0]) {
        td_error("%s: input %s and grad_out %s have different batch sizes", op,
                 describe(s1, sizeof s1, x), describe(s2, sizeof s2, grad_out));
        return NULL;
    }
    int64_t c = x->shape[1], o = grad_out->shape[1], k[2] = {kernel_hw[0], kernel_hw[1]}, hw[2];
    char ctx[450];
    describe2(ctx, sizeof ctx, "input", x, "grad_out", grad_out);
    if (check_groups(op, groups, c, o, groups > 0 ? c / groups : 0, ctx) < 0 ||
        check_kernel(op, k) < 0 || out_size(op, x, k, &w, hw) < 0)
        return NULL;
    if (hw[0] != grad_out->shape[2] || hw[1] != grad_out->shape[3]) {
        td_error("%s: grad_out %s does not fit input %s: conv2d would give height and width "
                 "(%lld, %lld)",
                 op, describe(s1, sizeof s1, grad_out), describe(s2, sizeof s2, x),
                 (long long)hw[0], (long long)hw[1]);
        return NULL;
    }
    int64_t shape[4] = {o, c / groups, k[0], k[1]};
    tide_attrs attrs = conv_attrs(&w, groups);
    return dispatch2(TIDE_OP_CONV2D_GRAD_WEIGHT, x, grad_out, shape, &attrs);
}

/* ---- pooling ----------------------------------------------------------------------------- */

/* Checks a pool's arguments and gives its attributes; hw gets the output height and width
 * for an input of height and width in_hw. */
static int pool_args(const char *op, const tide_tensor *t, const char *arg, const int64_t in_hw[2],
                     const int kernel[2], const int stride[2], const int padding[2],
                     bool count_include_pad, tide_attrs *attrs, int64_t hw[2])
{
    if (check_4d(op, arg, t, "[N, C, H, W]") < 0)
        return -1;
    if (!kernel)
        return td_error("%s: kernel is NULL", op);
    int64_t k[2] = {kernel[0], kernel[1]};
    if (check_kernel(op, k) < 0)
        return -1;
    window w = {.dil = {1, 1}};
    if (read_pair(op, "stride", stride ? stride : kernel, 1, 1, w.stride) < 0 ||
        read_pair(op, "padding", padding, 0, 0, w.pad) < 0)
        return -1;
    if (w.pad[0] > k[0] / 2 || w.pad[1] > k[1] / 2)
        return td_error("%s: padding (%lld, %lld) must be at most half the kernel (%lld, %lld)",
                        op, (long long)w.pad[0], (long long)w.pad[1], (long long)k[0],
                        (long long)k[1]);
    /* Every window then holds at least one element of a non-empty plane. */
    if (in_hw[0] < 1 || in_hw[1] < 1) {
        char s[200];
        return td_error("%s: needs a non-empty H x W plane, got height and width (%lld, %lld) "
                        "for %s %s",
                        op, (long long)in_hw[0], (long long)in_hw[1], arg,
                        describe(s, sizeof s, t));
    }
    tide_tensor probe = {.ndim = 4, .dtype = t->dtype};
    probe.shape[0] = t->shape[0];
    probe.shape[1] = t->shape[1];
    probe.shape[2] = in_hw[0];
    probe.shape[3] = in_hw[1];
    if (out_size(op, &probe, k, &w, hw) < 0)
        return -1;
    *attrs = (tide_attrs){.nints = 7,
                          .ints = {k[0], k[1], w.stride[0], w.stride[1], w.pad[0], w.pad[1],
                                   count_include_pad}};
    return 0;
}

static tide_tensor *max_pool2d_body(const tide_tensor *x, const int kernel[2], const int stride[2],
                                    const int padding[2], tide_tensor **indices)
{
    if (indices)
        *indices = NULL;
    tide_attrs attrs;
    int64_t hw[2];
    if (pool_args("max_pool2d", x, "input", x ? x->shape + 2 : NULL, kernel, stride, padding,
                  false, &attrs, hw) < 0)
        return NULL;
    int64_t shape[4] = {x->shape[0], x->shape[1], hw[0], hw[1]};
    tide_tensor *out = dispatch2(TIDE_OP_MAX_POOL2D, x, NULL, shape, &attrs);
    if (!out || !indices)
        return out;
    td_meta meta = {4, {shape[0], shape[1], shape[2], shape[3]}, TIDE_INT64, x->device};
    tide_tensor *in = (tide_tensor *)x;
    *indices = td_dispatch(TIDE_OP_MAX_POOL2D_INDICES, &meta, &in, 1, &attrs);
    if (!*indices) {
        tide_release(out);
        return NULL;
    }
    return out;
}

tide_tensor *tide_max_pool2d(const tide_tensor *x, const int kernel[2], const int stride[2],
                             const int padding[2], tide_tensor **indices)
{
    TD_IN_OP("max_pool2d", max_pool2d_body(x, kernel, stride, padding, indices));
}

static tide_tensor *avg_pool2d_body(const tide_tensor *x, const int kernel[2], const int stride[2],
                                    const int padding[2], bool count_include_pad)
{
    tide_attrs attrs;
    int64_t hw[2];
    if (pool_args("avg_pool2d", x, "input", x ? x->shape + 2 : NULL, kernel, stride, padding,
                  count_include_pad, &attrs, hw) < 0)
        return NULL;
    int64_t shape[4] = {x->shape[0], x->shape[1], hw[0], hw[1]};
    return dispatch2(TIDE_OP_AVG_POOL2D, x, NULL, shape, &attrs);
}

tide_tensor *tide_avg_pool2d(const tide_tensor *x, const int kernel[2], const int stride[2],
                             const int padding[2], bool count_include_pad)
{
    TD_IN_OP("avg_pool2d", avg_pool2d_body(x, kernel, stride, padding, count_include_pad));
}

tide_tensor *tide_avg_pool2d_grad(const tide_tensor *grad_out, const int64_t input_hw[2],
                                  const int kernel[2], const int stride[2], const int padding[2],
                                  bool count_include_pad)
{
    const char *op = "avg_pool2d_grad";
    if (td_check_tensor(op, "grad_out", grad_out) < 0)
        return NULL;
    if (!input_hw) {
        td_error("%s: input_hw is NULL", op);
        return NULL;
    }
    tide_attrs attrs;
    int64_t hw[2];
    if (pool_args(op, grad_out, "grad_out", input_hw, kernel, stride, padding, count_include_pad,
                  &attrs, hw) < 0)
        return NULL;
    if (hw[0] != grad_out->shape[2] || hw[1] != grad_out->shape[3]) {
        char s[200];
        td_error("%s: grad_out %s does not fit an input of height and width (%lld, %lld): "
                 "avg_pool2d would give (%lld, %lld)",
                 op, describe(s, sizeof s, grad_out), (long long)input_hw[0],
                 (long long)input_hw[1], (long long)hw[0], (long long)hw[1]);
        return NULL;
    }
    int64_t shape[4] = {grad_out->shape[0], grad_out->shape[1], input_hw[0], input_hw[1]};
    if (td_check_shape(op, 4, shape, (tide_dtype)grad_out->dtype) < 0)
        return NULL;
    return dispatch2(TIDE_OP_AVG_POOL2D_GRAD, grad_out, NULL, shape, &attrs);
}

/* ---- adaptive average pooling ------------------------------------------------------------- */

/* x pooled along dim (2 or 3) to n bins with PyTorch's bins [floor(i*in/n), ceil((i+1)*in/n)):
 * nothing to do when n equals the size, an avg_pool2d when n divides it, else a mean per bin
 * and a cat. The two dims are pooled one after the other: every bin is a rectangle, so the
 * mean over it is the mean over its rows of the means over its columns. */
static tide_tensor *adaptive_dim(const tide_tensor *x, int dim, int64_t n)
{
    int64_t in = x->shape[dim];
    if (n == in)
        return tide_retain((tide_tensor *)x);
    if (in % n == 0) {
        int k[2] = {1, 1};
        k[dim - 2] = (int)(in / n);
        return tide_avg_pool2d(x, k, k, NULL, true);
    }
    tide_tensor **bins = td_calloc((size_t)n, sizeof *bins);
    if (!bins) {
        td_error("adaptive_avg_pool2d: out of memory for %lld bins", (long long)n);
        return NULL;
    }
    tide_tensor *out = NULL;
    int64_t i = 0;
    for (; i < n; i++) {
        int64_t start = i * in / n, end = ((i + 1) * in + n - 1) / n;
        int d = dim;
        tide_tensor *s = tide_slice(x, dim, start, end, 1);
        bins[i] = s ? tide_mean(s, &d, 1, true) : NULL;
        tide_release(s);
        if (!bins[i])
            break;
    }
    if (i == n)
        out = tide_cat(bins, (int)n, dim);
    for (int64_t j = 0; j < i; j++)
        tide_release(bins[j]);
    free(bins);
    return out;
}

static tide_tensor *adaptive_avg_pool2d_body(const tide_tensor *x, int64_t out_h, int64_t out_w)
{
    const char *op = "adaptive_avg_pool2d";
    if (check_4d(op, "input", x, "[N, C, H, W]") < 0)
        return NULL;
    char s[200];
    if (out_h < 1 || out_w < 1) {
        td_error("%s: the output size must be positive, got (%lld, %lld)", op, (long long)out_h,
                 (long long)out_w);
        return NULL;
    }
    if (x->shape[2] < 1 || x->shape[3] < 1) {
        td_error("%s: needs a non-empty H x W plane, got input %s", op,
                 describe(s, sizeof s, x));
        return NULL;
    }
    if (out_h == 1 && out_w == 1) {
        int dims[2] = {2, 3};
        return tide_mean(x, dims, 2, true);
    }
    int64_t in[2] = {x->shape[2], x->shape[3]}, n[2] = {out_h, out_w};
    for (int i = 0; i < 2; i++) {
        bool even = in[i] % n[i] == 0;
        if ((!even && n[i] > ADAPTIVE_MAX_BINS) || (even && in[i] / n[i] > INT32_MAX)) {
            td_error("%s: output size (%lld, %lld) for input %s is not supported: sizes that "
                     "divide the input's work for any input, other sizes up to %d per dim",
                     op, (long long)out_h, (long long)out_w, describe(s, sizeof s, x),
                     ADAPTIVE_MAX_BINS);
            return NULL;
        }
    }
    tide_tensor *rows = adaptive_dim(x, 2, out_h);
    tide_tensor *out = rows ? adaptive_dim(rows, 3, out_w) : NULL;
    tide_release(rows);
    return out;
}

tide_tensor *tide_adaptive_avg_pool2d(const tide_tensor *x, int64_t out_h, int64_t out_w)
{
    TD_IN_OP("adaptive_avg_pool2d", adaptive_avg_pool2d_body(x, out_h, out_w));
}
