/*
 * onnx_ops_conv.c — ONNX's Conv and ConvTranspose (1-D to 3-D) on tide_conv_nd and
 * tide_conv_transpose_nd. Pads that differ before and after (explicit or from auto_pad) are
 * applied to the input (Conv) or cut from the full output (ConvTranspose).
 */
#include <stdio.h>
#include <string.h>

#include "onnx_ops_move.h"
#include "onnx_window.h"

static bool is_float(const tide_tensor *t)
{
    tide_dtype d = tide_get_dtype(t);
    return d == TIDE_FLOAT32 || d == TIDE_FLOAT64 || d == TIDE_FLOAT16;
}

/* x [N, C, s...] and weight [*, *, k...] of the same rank; group in [1, ...]. */
static int check_shapes(const onnx_ctx *c, int64_t group)
{
    const tide_tensor *x = c->in[0], *w = c->in[1];
    if (!is_float(x) || tide_get_dtype(w) != tide_get_dtype(x))
        return onnx_unsupported(c, "inputs of %s and %s (floating point only, one dtype)",
                                tide_dtype_name(tide_get_dtype(x)),
                                tide_dtype_name(tide_get_dtype(w)));
    if (tide_ndim(w) != tide_ndim(x))
        return onnx_error(c, "X has %d dims but W has %d", tide_ndim(x), tide_ndim(w));
    if (group < 1 || group > tide_shape(x)[1] || tide_shape(x)[1] % group)
        return onnx_error(c, "group %lld does not divide the %lld input channels",
                          (long long)group, (long long)tide_shape(x)[1]);
    return 0;
}

static int run_conv(onnx_ctx *c)
{
    int64_t group = onnx_attr_int(c->node, "group", 1);
    if (check_shapes(c, group))
        return -1;
    const tide_tensor *x = c->in[0], *w = c->in[1];
    const tide_tensor *b = c->nin > 2 ? c->in[2] : NULL;
    if (tide_shape(w)[1] * group != tide_shape(x)[1])
        return onnx_error(c, "W has %lld input channels per group; X has %lld in %lld groups",
                          (long long)tide_shape(w)[1], (long long)tide_shape(x)[1],
                          (long long)group);
    onnx_window win;
    if (onnx_window_read(c, x, tide_shape(w) + 2, false, &win))
        return -1;
    int pads[ONNX_MAX_SPATIAL] = {0};
    tide_tensor *in = NULL;
    if (onnx_window_symmetric(&win))
        onnx_window_pads(&win, pads);
    else if (!(in = onnx_window_pad(&win, x, 0.0)))
        return onnx_fail(c);
    tide_tensor *y = tide_conv_nd(win.nd, in ? in : x, w, b, win.stride, pads, win.dilation,
                                  (int)group);
    tide_release(in);
    return onnx_set(c, y);
}

/* ConvTranspose's output region [begin, begin + out) of the full (unpadded) result per dim. */
static int transpose_region(const onnx_ctx *c, const onnx_window *w, const int64_t *full,
                            int64_t *begin, int64_t *out)
{
    char buf[32];
    const char *ap = onnx_attr_string(c->node, "auto_pad", "NOTSET", buf, sizeof buf);
    int nshape, nop;
    const int64_t *shape = onnx_attr_ints(c->node, "output_shape", &nshape);
    const int64_t *op = onnx_attr_ints(c->node, "output_padding", &nop);
    if ((shape && nshape != w->nd && nshape != w->nd + 2) || (op && nop != w->nd))
        return onnx_error(c, "output_shape or output_padding has the wrong number of entries");
    bool upper = !strcmp(ap, "SAME_UPPER"), same = upper || !strcmp(ap, "SAME_LOWER");
    for (int i = 0; i < w->nd; i++) {
        int64_t pad_out = op ? op[i] : 0;
        if (pad_out < 0 || pad_out > (1 << 20))
            return onnx_error(c, "output_padding[%d] = %lld is invalid", i, (long long)pad_out);
        if (shape || same) {
            out[i] = shape ? shape[nshape - w->nd + i] : w->in[i] * w->stride[i];
            int64_t total = full[i] + (shape ? 0 : pad_out) - out[i];
            begin[i] = total <= 0 ? 0 : upper ? total / 2 : total - total / 2;
        } else if (!strcmp(ap, "VALID")) {
            begin[i] = 0;
            out[i] = full[i] + pad_out;
        } else {
            begin[i] = w->begin[i];
            out[i] = full[i] + pad_out - w->begin[i] - w->end[i];
        }
        if (out[i] < 1 || out[i] > (1 << 24))
            return onnx_error(c, "output size %lld in spatial dim %d is invalid",
                              (long long)out[i], i);
    }
    return 0;
}

/* full[..., begin : begin + out] per spatial dim, zeros where it reaches past full. */
static tide_tensor *cut_region(const onnx_window *w, tide_tensor *full, const int64_t *begin,
                               const int64_t *out)
{
    int64_t pads[2 * ONNX_MAX_SPATIAL] = {0};
    for (int i = 0; i < w->nd; i++) {
        int j = w->nd - 1 - i;
        int64_t size = tide_shape(full)[i + 2], after = begin[i] + out[i] - size;
        pads[2 * j] = 0;
        pads[2 * j + 1] = after > 0 ? after : 0;
    }
    tide_tensor *t = tide_pad(full, pads, 2 * w->nd, 0.0);
    for (int i = 0; t && i < w->nd; i++) {
        tide_tensor *s = tide_slice(t, i + 2, begin[i], begin[i] + out[i], 1);
        tide_release(t);
        t = s;
    }
    return t;
}

static tide_tensor *add_channel_bias(tide_tensor *y, const tide_tensor *b)
{
    int64_t shape[2 + ONNX_MAX_SPATIAL];
    int rank = tide_ndim(y);
    for (int i = 0; i < rank; i++)
        shape[i] = i == 1 ? -1 : 1;
    tide_tensor *bv = tide_reshape(b, rank, shape);
    tide_tensor *out = bv ? tide_add(y, bv) : NULL;
    tide_release(bv);
    return out;
}

static int run_conv_transpose(onnx_ctx *c)
{
    int64_t group = onnx_attr_int(c->node, "group", 1);
    if (check_shapes(c, group))
        return -1;
    const tide_tensor *x = c->in[0], *w = c->in[1];
    const tide_tensor *b = c->nin > 2 ? c->in[2] : NULL;
    if (tide_shape(w)[0] != tide_shape(x)[1])
        return onnx_error(c, "W has %lld input channels; X has %lld",
                          (long long)tide_shape(w)[0], (long long)tide_shape(x)[1]);
    onnx_window win;
    if (onnx_window_read(c, x, tide_shape(w) + 2, false, &win))
        return -1;
    int64_t full[ONNX_MAX_SPATIAL], begin[ONNX_MAX_SPATIAL], out[ONNX_MAX_SPATIAL];
    for (int i = 0; i < win.nd; i++)
        full[i] = win.stride[i] * (win.in[i] - 1) + (int64_t)(win.kernel[i] - 1) * win.dilation[i] + 1;
    if (transpose_region(c, &win, full, begin, out))
        return -1;
    int zero[ONNX_MAX_SPATIAL] = {0};
    tide_tensor *y = tide_conv_transpose_nd(win.nd, x, w, NULL, win.stride, zero, zero,
                                            (int)group, win.dilation);
    tide_tensor *cut = y ? cut_region(&win, y, begin, out) : NULL;
    tide_tensor *res = cut && b ? add_channel_bias(cut, b) : tide_retain(cut);
    tide_release(y);
    tide_release(cut);
    return onnx_set(c, res);
}

const onnx_op onnx_ops_conv[] = {
    {"Conv", 1, 0, 2, 3, onnx_check_auto_pad, run_conv, 0},
    {"ConvTranspose", 1, 0, 2, 3, onnx_check_auto_pad, run_conv_transpose, 0},
    {0},
};
