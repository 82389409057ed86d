/*
 * onnx_ops_pool.c — ONNX's pools: MaxPool (with Indices), AveragePool, LpPool, GlobalAveragePool,
 * GlobalMaxPool, GlobalLpPool, MaxUnpool. Windows tide's pools take (pads equal on both sides and at most
 * half the kernel, no dilation) go to tide_max_pool_nd / tide_avg_pool_nd; the others are
 * composed from strided slices of the padded input, one per kernel offset.
 */
#include <math.h>
#include <stdlib.h>
#include <stdio.h>
#include <string.h>

#include "onnx_ops_move.h"
#include "onnx_window.h"

typedef enum { POOL_MAX, POOL_AVG, POOL_LP } pool_kind;

static bool is_float(const tide_tensor *t)
{
    tide_dtype d = tide_get_dtype(t);
    return d == TIDE_FLOAT32 || d == TIDE_FLOAT64 || d == TIDE_FLOAT16;
}

/* The smallest value of an integer dtype MaxPool pads with: true and *value set, else false. */
static bool pad_floor(tide_dtype d, double *value)
{
    double v = d == TIDE_UINT8 ? 0 : d == TIDE_INT32 ? -2147483648.0 : 1;
    if (v > 0)
        return false;
    if (value)
        *value = v;
    return true;
}

/* Whether tide's own pools compute this window (PyTorch's constraints). */
static bool native_window(const onnx_window *w)
{
    if (!onnx_window_symmetric(w))
        return false;
    for (int i = 0; i < w->nd; i++)
        if (w->dilation[i] != 1 || w->begin[i] > w->kernel[i] / 2 || w->out[i] < 1)
            return false;
    return true;
}

/* The window at kernel offset k (flat, row-major over the kernel) of padded: [N, C, out...]. */
static tide_tensor *window_at(const onnx_window *w, const tide_tensor *padded, int k)
{
    int off[ONNX_MAX_SPATIAL];
    for (int i = w->nd - 1; i >= 0; i--) {
        off[i] = k % w->kernel[i];
        k /= w->kernel[i];
    }
    tide_tensor *t = tide_retain((tide_tensor *)padded);
    for (int i = 0; t && i < w->nd; i++) {
        int64_t start = (int64_t)off[i] * w->dilation[i];
        tide_tensor *s = tide_slice(t, i + 2, start, start + (w->out[i] - 1) * w->stride[i] + 1,
                                    w->stride[i]);
        tide_release(t);
        t = s;
    }
    return t;
}

/* Max or sum (of |x|^p for LpPool) over every window, from strided slices. */
static tide_tensor *composed_pool(const onnx_window *w, const tide_tensor *x, pool_kind kind,
                                  double p)
{
    tide_tensor *src = kind == POOL_LP ? tide_abs(x) : tide_retain((tide_tensor *)x);
    if (src && kind == POOL_LP && p != 1.0) {
        tide_tensor *pw = tide_pow_scalar(src, p);
        tide_release(src);
        src = pw;
    }
    double floor_value = -INFINITY;
    if (src && kind == POOL_MAX && !is_float(src))
        pad_floor(tide_get_dtype(src), &floor_value);
    tide_tensor *padded = src ? onnx_window_pad(w, src, kind == POOL_MAX ? floor_value : 0.0)
                              : NULL;
    tide_release(src);
    int count = 1;
    for (int i = 0; i < w->nd; i++)
        count *= w->kernel[i];
    tide_tensor *acc = NULL;
    for (int k = 0; padded && k < count; k++) {
        tide_tensor *v = window_at(w, padded, k);
        tide_tensor *next = !v ? NULL : !acc ? tide_contiguous(v)
                            : kind == POOL_MAX ? tide_maximum(acc, v) : tide_add(acc, v);
        tide_release(v);
        tide_release(acc);
        acc = next;
        if (!acc)
            break;
    }
    tide_release(padded);
    return acc;
}

/* How many kernel positions of output o in dim i fall inside [lo, hi). */
static double positions_inside(const onnx_window *w, int i, int64_t o, int64_t lo, int64_t hi)
{
    double n = 0;
    for (int j = 0; j < w->kernel[i]; j++) {
        int64_t at = o * w->stride[i] - w->begin[i] + (int64_t)j * w->dilation[i];
        n += at >= lo && at < hi;
    }
    return n;
}

/* The divisor of each window of AveragePool [1, 1, out...]: its positions inside the input (or
 * inside the input and the explicit pads, with count_include_pad). */
static tide_tensor *avg_divisor(const onnx_ctx *c, const onnx_window *w, bool include_pad,
                                tide_dtype dtype)
{
    int64_t total = 1, shape[2 + ONNX_MAX_SPATIAL] = {1, 1};
    for (int i = 0; i < w->nd; i++) {
        total *= w->out[i];
        shape[i + 2] = w->out[i];
    }
    double *d = td_malloc((size_t)total * sizeof *d);
    if (!d)
        return NULL;
    for (int64_t e = 0; e < total; e++) {
        int64_t rest = e;
        double n = 1;
        for (int i = w->nd - 1; i >= 0; i--) {
            int64_t o = rest % w->out[i];
            rest /= w->out[i];
            n *= include_pad ? positions_inside(w, i, o, -w->begin[i], w->in[i] + w->end[i])
                             : positions_inside(w, i, o, 0, w->in[i]);
        }
        d[e] = n;
    }
    tide_tensor *t = tide_from_data_on(onnx_device_of(c), d, 2 + w->nd, shape, TIDE_FLOAT64);
    free(d);
    tide_tensor *cast = t ? tide_cast(t, dtype) : NULL;
    tide_release(t);
    return cast;
}

static int read_window(const onnx_ctx *c, onnx_window *w, bool any_dtype)
{
    if (!any_dtype && !is_float(c->in[0]))
        return onnx_unsupported(c, "a %s input (floating point only)",
                                tide_dtype_name(tide_get_dtype(c->in[0])));
    return onnx_window_read(c, c->in[0], NULL, onnx_attr_int(c->node, "ceil_mode", 0) != 0, w);
}

static int run_average_pool(onnx_ctx *c)
{
    onnx_window w;
    if (read_window(c, &w, false))
        return -1;
    bool include = onnx_attr_int(c->node, "count_include_pad", 0) != 0;
    bool ceil_mode = onnx_attr_int(c->node, "ceil_mode", 0) != 0;
    if (native_window(&w)) {
        int pads[ONNX_MAX_SPATIAL];
        onnx_window_pads(&w, pads);
        return onnx_set(c, tide_avg_pool_nd(w.nd, c->in[0], w.kernel, w.stride, pads, ceil_mode,
                                            include));
    }
    tide_tensor *sum = composed_pool(&w, c->in[0], POOL_AVG, 1.0);
    tide_tensor *div = sum ? avg_divisor(c, &w, include, tide_get_dtype(sum)) : NULL;
    tide_tensor *y = div ? tide_div(sum, div) : NULL;
    tide_release(sum);
    tide_release(div);
    return onnx_set(c, y);
}

static int run_lp_pool(onnx_ctx *c)
{
    onnx_window w;
    if (read_window(c, &w, false))
        return -1;
    double p = (double)onnx_attr_int(c->node, "p", 2);
    if (p < 1 || p > 64)
        return onnx_error(c, "p = %g must be in [1, 64]", p);
    tide_tensor *sum = composed_pool(&w, c->in[0], POOL_LP, p);
    return onnx_set(c, sum && p != 1.0 ? tide_pow_scalar(sum, 1.0 / p) : tide_retain(sum));
}

/* MaxPool's Indices from tide's per-plane positions: offset by each plane's start in [N, C,
 * spatial...] (storage_order 0, row-major). */
static tide_tensor *flat_indices(const onnx_ctx *c, tide_tensor *plane_idx)
{
    const int64_t *xs = tide_shape(c->in[0]);
    int64_t plane = 1, shape[2 + ONNX_MAX_SPATIAL];
    for (int i = 2; i < tide_ndim(c->in[0]); i++) {
        plane *= xs[i];
        shape[i] = 1;
    }
    shape[0] = xs[0];
    shape[1] = xs[1];
    tide_tensor *start = tide_arange_on(onnx_device_of(c), 0, (double)(xs[0] * xs[1] * plane),
                                        (double)plane, TIDE_INT64);
    tide_tensor *offs = start ? tide_reshape(start, tide_ndim(c->in[0]), shape) : NULL;
    tide_tensor *out = offs ? tide_add(plane_idx, offs) : NULL;
    tide_release(start);
    tide_release(offs);
    return out;
}

/* storage_order 1: the 2-D plane position h * W + w becomes column-major w * H + h. */
static tide_tensor *column_major(const tide_tensor *x, tide_tensor *plane_idx)
{
    int64_t h = tide_shape(x)[2], w = tide_shape(x)[3];
    tide_tensor *wt = tide_integer(w), *ht = tide_integer(h);
    tide_tensor *row = wt ? tide_floor_divide(plane_idx, wt) : NULL;
    tide_tensor *col = row ? tide_remainder(plane_idx, wt) : NULL;
    tide_tensor *cm = col && ht ? tide_mul(col, ht) : NULL;
    tide_tensor *out = cm ? tide_add(cm, row) : NULL;
    tide_tensor *tmp[] = {wt, ht, row, col, cm};
    onnx_release_all(tmp, 5);
    return out;
}

static int run_max_pool(onnx_ctx *c)
{
    onnx_window w;
    if (read_window(c, &w, true))
        return -1;
    bool ceil_mode = onnx_attr_int(c->node, "ceil_mode", 0) != 0;
    bool want_idx = c->nout > 1 && c->node->out[1] >= 0;
    if (!is_float(c->in[0]) && (want_idx || !pad_floor(tide_get_dtype(c->in[0]), NULL)))
        return onnx_unsupported(c, "a %s input", tide_dtype_name(tide_get_dtype(c->in[0])));
    if (!native_window(&w) || !is_float(c->in[0]) || (want_idx && w.nd > 2)) {
        if (want_idx)
            return onnx_unsupported(c, "Indices with dilations, uneven or large pads or 3-D");
        return onnx_set(c, composed_pool(&w, c->in[0], POOL_MAX, 0));
    }
    int pads[ONNX_MAX_SPATIAL];
    onnx_window_pads(&w, pads);
    tide_tensor *idx = NULL, *y;
    if (want_idx && w.nd == 2 && !ceil_mode)
        y = tide_max_pool2d(c->in[0], w.kernel, w.stride, pads, &idx);
    else if (want_idx && w.nd == 2)
        return onnx_unsupported(c, "Indices with ceil_mode");
    else
        y = tide_max_pool_nd(w.nd, c->in[0], w.kernel, w.stride, pads, ceil_mode,
                             want_idx ? &idx : NULL);
    if (onnx_set(c, y))
        return -1;
    if (!want_idx)
        return 0;
    if (idx && onnx_attr_int(c->node, "storage_order", 0) != 0 && w.nd == 2) {
        tide_tensor *cm = column_major(c->in[0], idx);
        tide_release(idx);
        idx = cm;
    }
    c->out[1] = idx ? flat_indices(c, idx) : NULL;
    tide_release(idx);
    return c->out[1] ? 0 : onnx_fail(c);
}

static int check_max_pool(const onnx_node *n, char *why, size_t size)
{
    return onnx_check_auto_pad(n, why, size);
}

static int run_global(onnx_ctx *c, pool_kind kind)
{
    const tide_tensor *x = c->in[0];
    int rank = tide_ndim(x), dims[8];
    if (rank < 3)
        return onnx_error(c, "input has %d dims; at least 3 ([N, C, spatial...])", rank);
    if (!is_float(x))
        return onnx_unsupported(c, "a %s input (floating point only)",
                                tide_dtype_name(tide_get_dtype(x)));
    for (int i = 2; i < rank; i++)
        dims[i - 2] = i;
    if (kind == POOL_MAX)
        return onnx_set(c, tide_amax(x, dims, rank - 2, true));
    if (kind == POOL_AVG)
        return onnx_set(c, tide_mean(x, dims, rank - 2, true));
    double p = (double)onnx_attr_int(c->node, "p", 2);
    tide_tensor *a = tide_abs(x), *pw = a ? tide_pow_scalar(a, p) : NULL;
    tide_tensor *s = pw ? tide_sum(pw, dims, rank - 2, true) : NULL;
    tide_tensor *y = s ? tide_pow_scalar(s, 1.0 / p) : NULL;
    tide_release(a);
    tide_release(pw);
    tide_release(s);
    return onnx_set(c, y);
}

static int run_global_average_pool(onnx_ctx *c) { return run_global(c, POOL_AVG); }
static int run_global_max_pool(onnx_ctx *c) { return run_global(c, POOL_MAX); }
static int run_global_lp_pool(onnx_ctx *c) { return run_global(c, POOL_LP); }

/* MaxUnpool: zeros of the default shape ((in - 1) * stride - pads + kernel) with X written at
 * the flat positions I, then padded with zeros at the end of each dim up to output_shape
 * (input 2) when given, as the reference does. */
static int run_max_unpool(onnx_ctx *c)
{
    const tide_tensor *x = c->in[0], *idx = c->in[1];
    onnx_window w;
    int rank = tide_ndim(x), count = 0;
    int64_t shape[2 + ONNX_MAX_SPATIAL], want[2 + ONNX_MAX_SPATIAL], total = 1;
    if (onnx_window_read(c, x, NULL, false, &w))
        return -1;
    shape[0] = tide_shape(x)[0];
    shape[1] = tide_shape(x)[1];
    for (int i = 0; i < w.nd; i++)
        shape[i + 2] = (w.in[i] - 1) * w.stride[i] - w.begin[i] - w.end[i] + w.kernel[i];
    memcpy(want, shape, sizeof shape);
    if (c->nin > 2 && c->in[2]) {
        if (onnx_input_ints(c, 2, want, 2 + ONNX_MAX_SPATIAL, &count))
            return -1;
        if (count != rank)
            return onnx_error(c, "output_shape has %d entries for %d dims", count, rank);
    }
    for (int i = 0; i < rank; i++) {
        if (shape[i] < 1 || shape[i] > (1 << 24) || want[i] < shape[i] || want[i] > (1 << 24))
            return onnx_error(c, "output dim %d = %lld is invalid (at least %lld)", i,
                              (long long)want[i], (long long)shape[i]);
        total *= shape[i];
    }
    if (tide_numel(idx) != tide_numel(x))
        return onnx_error(c, "I has %lld elements; X has %lld", (long long)tide_numel(idx),
                          (long long)tide_numel(x));
    int64_t flat = -1, pads[2 * ONNX_MAX_SPATIAL] = {0};
    for (int i = 0; i < w.nd; i++)
        pads[2 * (w.nd - 1 - i) + 1] = want[i + 2] - shape[i + 2];
    tide_tensor *zero = tide_zeros_on(tide_device_name(x), 1, &total, tide_get_dtype(x));
    tide_tensor *xf = zero ? tide_reshape(x, 1, &flat) : NULL;
    tide_tensor *i64 = xf ? tide_cast(idx, TIDE_INT64) : NULL;
    tide_tensor *iflat = i64 ? tide_reshape(i64, 1, &flat) : NULL;
    tide_tensor *put = iflat ? tide_scatter(zero, 0, iflat, xf, NULL) : NULL;
    tide_tensor *y = put ? tide_reshape(put, rank, shape) : NULL;
    tide_tensor *padded = y ? tide_pad(y, pads, 2 * w.nd, 0.0) : NULL;
    tide_tensor *tmp[] = {zero, xf, i64, iflat, put, y};
    onnx_release_all(tmp, 6);
    return onnx_set(c, padded);
}

const onnx_op onnx_ops_pool[] = {
    {"MaxUnpool", 9, 0, 2, 3, onnx_check_auto_pad, run_max_unpool, 0},
    {"MaxPool", 1, 0, 1, 1, check_max_pool, run_max_pool, 0},
    {"AveragePool", 1, 0, 1, 1, onnx_check_auto_pad, run_average_pool, 0},
    {"LpPool", 2, 0, 1, 1, onnx_check_auto_pad, run_lp_pool, 0},
    {"GlobalAveragePool", 1, 0, 1, 1, NULL, run_global_average_pool, 0},
    {"GlobalMaxPool", 1, 0, 1, 1, NULL, run_global_max_pool, 0},
    {"GlobalLpPool", 2, 0, 1, 1, NULL, run_global_lp_pool, 0},
    {0},
};
