/*
 * ref_pool.c — max and average pooling over NCHW planes, and the average-pool gradient. Window
 * (oh, ow) covers input rows oh*sh - ph .. + kh and columns ow*sw - pw .. + kw, clipped to the
 * plane: padding is never read. Max: a value replaces the best so far when it is greater or NaN
 * (so NaN propagates and the last NaN gives the index), ties keep the first; the index is the
 * position in the H*W plane. Average: the sum in double over the clipped window divided by its
 * size, or by the window's size clipped only to the padded plane with count_include_pad.
 */
#include <math.h>

#include "ref_internal.h"

typedef struct window {
    int64_t h0, h1, w0, w1; /* the clipped window: rows [h0, h1), columns [w0, w1) */
    int64_t divisor;
} window;

static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }

/* p = (k_h, k_w, stride_h, stride_w, pad_h, pad_w, count_include_pad); H, W: the plane. */
static window window_at(const int64_t *p, int64_t H, int64_t W, int64_t oh, int64_t ow)
{
    int64_t h0 = oh * p[2] - p[4], w0 = ow * p[3] - p[5];
    int64_t h1 = min64(h0 + p[0], H + p[4]), w1 = min64(w0 + p[1], W + p[5]);
    window win = {max64(h0, 0), min64(h1, H), max64(w0, 0), min64(w1, W), 0};
    win.divisor = p[6] ? (h1 - h0) * (w1 - w0) : (win.h1 - win.h0) * (win.w1 - win.w0);
    return win;
}

static int64_t off4(const tide_tensor *t, int64_t i0, int64_t i1, int64_t i2, int64_t i3)
{
    return ref_offset(t, (int64_t[4]){i0, i1, i2, i3});
}

/* One pooled value of plane (n, c) at (oh, ow). */
static void pool_one(tide_op op, tide_tensor *out, const tide_tensor *x, const int64_t *p,
                     const int64_t *pos)
{
    int64_t n = pos[0], c = pos[1], H = x->shape[2], W = x->shape[3];
    window win = window_at(p, H, W, pos[2], pos[3]);
    int64_t oo = ref_offset(out, pos);
    double best = -INFINITY, sum = 0;
    int64_t at = win.h0 * W + win.w0;
    for (int64_t ih = win.h0; ih < win.h1; ih++)
        for (int64_t iw = win.w0; iw < win.w1; iw++) {
            double v = ref_get_f(x, off4(x, n, c, ih, iw));
            sum += v;
            if (v > best || isnan(v)) {
                best = v;
                at = ih * W + iw;
            }
        }
    if (op == TIDE_OP_MAX_POOL2D_INDICES)
        ref_set_i(out, oo, at);
    else
        ref_set_f(out, oo, op == TIDE_OP_MAX_POOL2D ? best : sum / (double)win.divisor);
}

int ref_pool2d(tide_op op, tide_tensor *out, const tide_tensor *x, const int64_t *p)
{
    if (!ref_is_float(x->dtype))
        return ref_no_kernel(op, x->dtype);
    int64_t pos[4], n = ref_numel(out);
    for (int64_t i = 0; i < n; i++) {
        ref_unflatten(4, out->shape, i, pos);
        pool_one(op, out, x, p, pos);
    }
    return 0;
}

/* dx[n, c, ih, iw] = the sum, over the windows that hold (ih, iw), of grad_out / divisor. */
int ref_avg_pool2d_grad(tide_tensor *out, const tide_tensor *g, const int64_t *p)
{
    if (!ref_is_float(g->dtype))
        return ref_no_kernel(TIDE_OP_AVG_POOL2D_GRAD, g->dtype);
    int64_t H = out->shape[2], W = out->shape[3], OH = g->shape[2], OW = g->shape[3];
    int64_t pos[4], n = ref_numel(out);
    for (int64_t i = 0; i < n; i++) {
        ref_unflatten(4, out->shape, i, pos);
        double s = 0;
        for (int64_t oh = 0; oh < OH; oh++)
            for (int64_t ow = 0; ow < OW; ow++) {
                window win = window_at(p, H, W, oh, ow);
                if (pos[2] >= win.h0 && pos[2] < win.h1 && pos[3] >= win.w0 && pos[3] < win.w1)
                    s += ref_get_f(g, off4(g, pos[0], pos[1], oh, ow)) / (double)win.divisor;
            }
        ref_set_f(out, ref_offset(out, pos), s);
    }
    return 0;
}
