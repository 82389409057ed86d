/*
 * conv_nd.c — conv1d, conv3d and conv_transpose1d/2d/3d as composites of the conv2d
 * primitives, so their forward and both gradients are conv2d's im2col + GEMM (OpenBLAS on the
 * CPU) and autograd, the jit and every device need nothing new:
 *   conv1d            a conv2d of height 1;
 *   conv3d            the kd depth taps of every output depth stacked into channels
 *                     ([N*OD, C*kd, H, W], a depth im2col) and one conv2d with the weight read
 *                     as [O, C/g*kd, kH, kW];
 *   conv_transpose2d  conv2d_grad_input (the transposed convolution is the input gradient);
 *   conv_transpose1d  the same at height 1;
 *   conv_transpose3d  conv2d_grad_input per input depth with the weight read as
 *                     [Cin, Cout/g*kd, kH, kW], then each depth tap placed at its output depths
 *                     (the adjoint of conv3d's depth im2col) and summed.
 * Errors name the op the user called (conv1d, conv_transpose3d, ...), the shapes and dtypes.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "autocast.h"
#include "conv_nd.h"

const char *td_describe(char *buf, size_t size, const tide_tensor *t)
{
    char s[160];
    snprintf(buf, size, "%s %s", td_shape_str(s, sizeof s, t->ndim, t->shape),
             tide_dtype_name((tide_dtype)t->dtype));
    return buf;
}

tide_tensor *td_pad_dim(const tide_tensor *x, int dim, int64_t before, int64_t after,
                        double value)
{
    if (before == 0 && after == 0)
        return tide_retain((tide_tensor *)x);
    int64_t pads[2 * TIDE_MAX_DIMS] = {0};
    int pair = x->ndim - 1 - dim; /* pairs start from the last dim */
    pads[2 * pair] = before;
    pads[2 * pair + 1] = after;
    return tide_pad(x, pads, 2 * (pair + 1), value);
}

tide_tensor *td_window_slice(const tide_tensor *x, int dim, int64_t i, int64_t dil,
                             int64_t stride, int64_t n)
{
    return tide_slice(x, dim, i * dil, i * dil + stride * (n - 1) + 1, stride);
}

tide_tensor *td_window_place(const tide_tensor *y, int dim, int64_t offset, int64_t stride,
                             int64_t total)
{
    int64_t n = y->shape[dim];
    tide_tensor *spread = tide_retain((tide_tensor *)y);
    if (stride > 1 && n > 0) { /* [.., n, ..] -> [.., n, stride, ..] zero-filled -> n*stride */
        int64_t shape[TIDE_MAX_DIMS];
        memcpy(shape, y->shape, sizeof(int64_t) * (size_t)y->ndim);
        shape[dim] = n * stride;
        tide_tensor *u = tide_unsqueeze(y, dim + 1);
        tide_tensor *p = u ? td_pad_dim(u, dim + 1, 0, stride - 1, 0) : NULL;
        tide_release(spread);
        spread = p ? tide_reshape(p, y->ndim, shape) : NULL;
        tide_release(u);
        tide_release(p);
    }
    if (!spread)
        return NULL;
    int64_t len = spread->shape[dim];
    tide_tensor *out = td_pad_dim(spread, dim, offset, total - offset - len, 0);
    tide_release(spread);
    return out;
}

int64_t td_window_out_len(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil)
{
    int64_t padded = in + 2 * pad;
    if (padded < 1 || k < 1 || k - 1 > (padded - 1) / dil)
        return -1;
    return (padded - dil * (k - 1) - 1) / stride + 1;
}

int td_read_ints(const char *op, const char *what, const int *v, int nd, int dflt, int min,
                 int64_t *out)
{
    for (int i = 0; i < nd; i++) {
        out[i] = v ? v[i] : dflt;
        if (out[i] < min)
            return td_error("%s: %s must be %s, got %lld in dim %d", op, what,
                            min > 0 ? "positive" : "non-negative", (long long)out[i], i);
    }
    return 0;
}

/* ---- argument checks ---------------------------------------------------------------------- */

typedef struct conv_args {
    const char *op;
    int nd;
    int64_t stride[3], pad[3], dil[3], opad[3], k[3];
} conv_args;

static int check_operand(const char *op, const char *arg, const tide_tensor *t, int nd,
                         const char *layout)
{
    if (td_check_tensor(op, arg, t) < 0)
        return -1;
    char s[200];
    if (t->ndim != nd + 2)
        return td_error("%s: expects a %d-D %s %s, got %s", op, nd + 2, arg, layout,
                        td_describe(s, sizeof s, t));
    if (!tide_dtype_is_floating((tide_dtype)t->dtype))
        return td_error("%s: %s %s has an unsupported dtype; %s needs a floating dtype", op, arg,
                        td_describe(s, sizeof s, t), op);
    return 0;
}

static int check_pair(const char *op, const char *an, const tide_tensor *a, const char *bn,
                      const tide_tensor *b)
{
    char s1[200], s2[200];
    if (a->dtype != b->dtype)
        return td_error("%s: %s %s and %s %s must have the same dtype", op, an,
                        td_describe(s1, sizeof s1, a), bn, td_describe(s2, sizeof s2, b));
    if (a->device != b->device)
        return td_error("%s: %s is on %s but %s is on %s", op, an, a->device->name, bn,
                        b->device->name);
    return 0;
}

/* x, weight (and bias) against each other: a convolution's weight is [O, C/groups, k...], a
 * transposed one's [C, O/groups, k...]; bias has one value per output channel. */
static int check_conv(const conv_args *a, const tide_tensor *x, const tide_tensor *w,
                      const tide_tensor *bias, int groups, bool transposed)
{
    const char *op = a->op;
    if (check_operand(op, "input", x, a->nd, transposed ? "[N, Cin, ...]" : "[N, C, ...]") < 0 ||
        check_operand(op, "weight", w, a->nd,
                      transposed ? "[Cin, Cout/groups, k...]" : "[O, C/groups, k...]") < 0 ||
        check_pair(op, "input", x, "weight", w) < 0)
        return -1;
    char s1[200], s2[200];
    td_describe(s1, sizeof s1, x);
    td_describe(s2, sizeof s2, w);
    int64_t c = x->shape[1];
    int64_t out_ch = transposed ? w->shape[1] * groups : w->shape[0];
    if (groups < 1)
        return td_error("%s: groups must be positive, got %d (input %s, weight %s)", op, groups,
                        s1, s2);
    if (c % groups || out_ch % groups)
        return td_error("%s: groups (%d) must divide the input channels (%lld) and the output "
                        "channels (%lld) (input %s, weight %s)",
                        op, groups, (long long)c, (long long)out_ch, s1, s2);
    bool fits = transposed ? w->shape[0] == c : w->shape[1] * groups == c;
    if (!fits)
        return td_error("%s: channel mismatch with %d groups: input %s, weight %s (%s)", op,
                        groups, s1, s2,
                        transposed ? "weight dim 0 must equal the input channels"
                                   : "weight dim 1 times groups must equal the input channels");
    for (int i = 0; i < a->nd; i++)
        if (w->shape[2 + i] < 1)
            return td_error("%s: the kernel size must be positive (weight %s)", op, s2);
    if (bias) {
        char s3[200];
        if (bias->ndim != 1 || bias->shape[0] != out_ch)
            return td_error("%s: bias %s must be 1-D with one value per output channel (%lld)",
                            op, td_describe(s3, sizeof s3, bias), (long long)out_ch);
        if (check_pair(op, "input", x, "bias", bias) < 0)
            return -1;
    }
    return 0;
}

static tide_tensor *add_bias(tide_tensor *out, const tide_tensor *bias)
{
    if (!out || !bias)
        return out;
    int64_t shape[TIDE_MAX_DIMS] = {1, bias->shape[0], 1, 1, 1};
    tide_tensor *b = tide_reshape(bias, out->ndim, shape);
    tide_tensor *sum = b ? tide_add(out, b) : NULL;
    tide_release(b);
    tide_release(out);
    return sum;
}

/* ---- conv1d, conv3d ----------------------------------------------------------------------- */

/* conv3d's depth im2col: [N, C, D, H, W] -> [N*OD, C*kd, H, W], channel c*kd + i holding depth
 * tap i of output depth od (the order the weight [O, C/g, kd, ...] has when read as
 * [O, C/g*kd, ...], and group-major, so groups still split channels evenly). */
static tide_tensor *depth_columns(const tide_tensor *x, const conv_args *a, int64_t kd,
                                  int64_t od)
{
    tide_tensor *xp = td_pad_dim(x, 2, a->pad[0], a->pad[0], 0);
    tide_tensor **taps = td_calloc((size_t)kd, sizeof *taps);
    tide_tensor *cols = NULL;
    int64_t i = 0;
    if (xp && taps) {
        static const int perm[5] = {0, 2, 1, 3, 4}; /* -> [N, OD, C, H, W] */
        for (; i < kd; i++) {
            tide_tensor *s = td_window_slice(xp, 2, i, a->dil[0], a->stride[0], od);
            taps[i] = s ? tide_permute(s, perm) : NULL;
            tide_release(s);
            if (!taps[i])
                break;
        }
        tide_tensor *st = i == kd ? tide_stack(taps, (int)kd, 3) : NULL; /* [N,OD,C,kd,H,W] */
        int64_t shape[4] = {x->shape[0] * od, x->shape[1] * kd, x->shape[3], x->shape[4]};
        cols = st ? tide_reshape(st, 4, shape) : NULL;
        tide_release(st);
    } else if (xp) {
        td_error("%s: out of memory for %lld depth taps", a->op, (long long)kd);
    }
    for (int64_t j = 0; j < i; j++)
        tide_release(taps[j]);
    free(taps);
    tide_release(xp);
    return cols;
}

static tide_tensor *conv3d_run(const tide_tensor *x, const tide_tensor *w, const conv_args *a,
                               const int64_t out[3], int groups)
{
    int64_t kd = w->shape[2];
    tide_tensor *cols = depth_columns(x, a, kd, out[0]);
    int64_t wshape[4] = {w->shape[0], w->shape[1] * kd, w->shape[3], w->shape[4]};
    tide_tensor *w2 = cols ? tide_reshape(w, 4, wshape) : NULL;
    int st[2] = {(int)a->stride[1], (int)a->stride[2]}, pd[2] = {(int)a->pad[1], (int)a->pad[2]},
        dl[2] = {(int)a->dil[1], (int)a->dil[2]};
    tide_tensor *y = w2 ? tide_conv2d(cols, w2, NULL, st, pd, dl, groups) : NULL;
    int64_t shape[5] = {x->shape[0], out[0], w->shape[0], out[1], out[2]};
    static const int perm[5] = {0, 2, 1, 3, 4};
    tide_tensor *y5 = y ? tide_reshape(y, 5, shape) : NULL;
    /* A view in [N, O, OD, OH, OW] order: copying it contiguous costs a pass over the output
     * (about 10% of a conv3d forward at 2 threads) and every op takes strided operands. */
    tide_tensor *r = y5 ? tide_permute(y5, perm) : NULL;
    tide_release(cols);
    tide_release(w2);
    tide_release(y);
    tide_release(y5);
    return r;
}

static tide_tensor *conv_nd_body(int nd, const tide_tensor *x, const tide_tensor *w,
                                 const tide_tensor *bias, const int *stride, const int *padding,
                                 const int *dilation, int groups)
{
    conv_args a = {.op = nd == 1 ? "conv1d" : "conv3d", .nd = nd};
    if (check_conv(&a, x, w, bias, groups, false) < 0 ||
        td_read_ints(a.op, "stride", stride, nd, 1, 1, a.stride) < 0 ||
        td_read_ints(a.op, "padding", padding, nd, 0, 0, a.pad) < 0 ||
        td_read_ints(a.op, "dilation", dilation, nd, 1, 1, a.dil) < 0)
        return NULL;
    int64_t out[3];
    for (int i = 0; i < nd; i++) {
        out[i] = td_window_out_len(x->shape[2 + i], w->shape[2 + i], a.stride[i], a.pad[i],
                                   a.dil[i]);
        if (out[i] < 0) {
            char s1[200], s2[200];
            td_error("%s: the kernel of weight %s (dilation %lld) is larger than input %s "
                     "padded by %lld in spatial dim %d",
                     a.op, td_describe(s1, sizeof s1, w), (long long)a.dil[i],
                     td_describe(s2, sizeof s2, x), (long long)a.pad[i], i);
            return NULL;
        }
    }
    if (nd == 3)
        return add_bias(conv3d_run(x, w, &a, out, groups), bias);
    /* conv1d: height 1 */
    int st[2] = {1, (int)a.stride[0]}, pd[2] = {0, (int)a.pad[0]}, dl[2] = {1, (int)a.dil[0]};
    tide_tensor *x4 = tide_unsqueeze(x, 2), *w4 = x4 ? tide_unsqueeze(w, 2) : NULL;
    tide_tensor *y = w4 ? tide_conv2d(x4, w4, bias, st, pd, dl, groups) : NULL;
    tide_tensor *r = y ? tide_squeeze(y, 2) : NULL;
    tide_release(x4);
    tide_release(w4);
    tide_release(y);
    return r;
}

tide_tensor *tide_conv_nd(int nd, const tide_tensor *x, const tide_tensor *weight,
                          const tide_tensor *bias, const int *stride, const int *padding,
                          const int *dilation, int groups)
{
    if (nd == 2)
        return tide_conv2d(x, weight, bias, stride, padding, dilation, groups);
    if (nd != 1 && nd != 3) {
        td_error("conv: %d spatial dims; tide has conv1d, conv2d and conv3d", nd);
        return NULL;
    }
    TD_IN_AUTOCAST_OP(nd == 1 ? "conv1d" : "conv3d", TD_AUTOCAST_LOWER,
                      conv_nd_body(nd, x, weight, bias, stride, padding, dilation, groups), 3,
                      &x, &weight, &bias);
}

/* ---- transposed convolutions -------------------------------------------------------------- */

/* conv_transpose3d: conv2d_grad_input per input depth gives, for each depth tap i, the
 * contribution [N, D, Cout, OH, OW] that lands on output depths id*sd - pd + i*dd. */
static tide_tensor *conv_transpose3d_run(const tide_tensor *x, const tide_tensor *w,
                                         const conv_args *a, const int64_t out[3], int groups)
{
    int64_t n = x->shape[0], d = x->shape[2], cout = w->shape[1] * groups, kd = w->shape[2];
    static const int to_ndchw[5] = {0, 2, 1, 3, 4};
    int64_t xshape[4] = {n * d, x->shape[1], x->shape[3], x->shape[4]};
    int64_t wshape[4] = {w->shape[0], w->shape[1] * kd, w->shape[3], w->shape[4]};
    tide_tensor *xt = tide_permute(x, to_ndchw);
    tide_tensor *x2 = xt ? tide_reshape(xt, 4, xshape) : NULL;
    tide_tensor *w2 = x2 ? tide_reshape(w, 4, wshape) : NULL;
    int st[2] = {(int)a->stride[1], (int)a->stride[2]}, pd[2] = {(int)a->pad[1], (int)a->pad[2]},
        dl[2] = {(int)a->dil[1], (int)a->dil[2]};
    int64_t hw[2] = {out[1], out[2]};
    tide_tensor *y = w2 ? tide_conv2d_grad_input(x2, w2, hw, st, pd, dl, groups) : NULL;
    int64_t yshape[6] = {n, d, cout, kd, out[1], out[2]};
    tide_tensor *y6 = y ? tide_reshape(y, 6, yshape) : NULL;
    tide_tensor *sum = NULL;
    for (int64_t i = 0; y6 && i < kd; i++) {
        tide_tensor *yi = tide_select(y6, 3, i);              /* [N, D, Cout, OH, OW] */
        tide_tensor *yp = yi ? tide_permute(yi, to_ndchw) : NULL; /* [N, Cout, D, OH, OW] */
        tide_tensor *placed =
            yp ? td_window_place(yp, 2, i * a->dil[0] - a->pad[0], a->stride[0], out[0]) : NULL;
        tide_tensor *next = placed ? (sum ? tide_add(sum, placed) : tide_retain(placed)) : NULL;
        tide_release(yi);
        tide_release(yp);
        tide_release(placed);
        tide_release(sum);
        sum = next;
        if (!sum)
            break;
    }
    tide_release(xt);
    tide_release(x2);
    tide_release(w2);
    tide_release(y);
    tide_release(y6);
    return sum;
}

static tide_tensor *conv_transpose_body(int nd, const tide_tensor *x, const tide_tensor *w,
                                        const tide_tensor *bias, const int *stride,
                                        const int *padding, const int *output_padding,
                                        int groups, const int *dilation)
{
    static const char *const names[4] = {"", "conv_transpose1d", "conv_transpose2d",
                                         "conv_transpose3d"};
    conv_args a = {.op = names[nd], .nd = nd};
    if (check_conv(&a, x, w, bias, groups, true) < 0 ||
        td_read_ints(a.op, "stride", stride, nd, 1, 1, a.stride) < 0 ||
        td_read_ints(a.op, "padding", padding, nd, 0, 0, a.pad) < 0 ||
        td_read_ints(a.op, "output_padding", output_padding, nd, 0, 0, a.opad) < 0 ||
        td_read_ints(a.op, "dilation", dilation, nd, 1, 1, a.dil) < 0)
        return NULL;
    int64_t out[3];
    char s1[200], s2[200];
    for (int i = 0; i < nd; i++) {
        /* conv2d_grad_input needs the output to map back onto the input exactly, which holds
         * for output_padding < stride (PyTorch also allows < dilation). */
        bool depth = nd == 3 && i == 0;
        if (a.opad[i] >= (depth ? (a.stride[i] > a.dil[i] ? a.stride[i] : a.dil[i]) : a.stride[i])) {
            td_error("%s: output_padding %lld must be smaller than the stride %lld in spatial "
                     "dim %d (input %s)",
                     a.op, (long long)a.opad[i], (long long)a.stride[i], i,
                     td_describe(s1, sizeof s1, x));
            return NULL;
        }
        int64_t in = x->shape[2 + i];
        out[i] = (in - 1) * a.stride[i] - 2 * a.pad[i] + a.dil[i] * (w->shape[2 + i] - 1) +
                 a.opad[i] + 1;
        if (in < 1 || out[i] < 1) {
            td_error("%s: input %s with weight %s, stride %lld, padding %lld, dilation %lld "
                     "gives an empty output (size %lld) in spatial dim %d",
                     a.op, td_describe(s1, sizeof s1, x), td_describe(s2, sizeof s2, w),
                     (long long)a.stride[i], (long long)a.pad[i], (long long)a.dil[i],
                     (long long)out[i], i);
            return NULL;
        }
    }
    if (nd == 3)
        return add_bias(conv_transpose3d_run(x, w, &a, out, groups), bias);
    int st[2], pd[2], dl[2];
    int64_t hw[2];
    tide_tensor *x4, *w4;
    if (nd == 1) {
        st[0] = dl[0] = 1, pd[0] = 0; /* height 1 */
        st[1] = (int)a.stride[0], pd[1] = (int)a.pad[0], dl[1] = (int)a.dil[0];
        hw[0] = 1, hw[1] = out[0];
        x4 = tide_unsqueeze(x, 2);
        w4 = x4 ? tide_unsqueeze(w, 2) : NULL;
    } else {
        for (int i = 0; i < 2; i++)
            st[i] = (int)a.stride[i], pd[i] = (int)a.pad[i], dl[i] = (int)a.dil[i], hw[i] = out[i];
        x4 = tide_retain((tide_tensor *)x);
        w4 = tide_retain((tide_tensor *)w);
    }
    tide_tensor *y = w4 ? tide_conv2d_grad_input(x4, w4, hw, st, pd, dl, groups) : NULL;
    tide_tensor *r = y && nd == 1 ? tide_squeeze(y, 2) : tide_retain(y);
    tide_release(x4);
    tide_release(w4);
    tide_release(y);
    return add_bias(r, bias);
}

tide_tensor *tide_conv_transpose_nd(int nd, const tide_tensor *x, const tide_tensor *weight,
                                    const tide_tensor *bias, const int *stride,
                                    const int *padding, const int *output_padding, int groups,
                                    const int *dilation)
{
    if (nd < 1 || nd > 3) {
        td_error("conv_transpose: %d spatial dims; tide has conv_transpose1d/2d/3d", nd);
        return NULL;
    }
    static const char *const names[4] = {"", "conv_transpose1d", "conv_transpose2d",
                                         "conv_transpose3d"};
    TD_IN_AUTOCAST_OP(names[nd], TD_AUTOCAST_LOWER,
                      conv_transpose_body(nd, x, weight, bias, stride, padding, output_padding,
                                          groups, dilation),
                      3, &x, &weight, &bias);
}
