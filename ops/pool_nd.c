/*
 * pool_nd.c — max_pool1d/3d, avg_pool1d/3d (ceil_mode as PyTorch, for 2-D too),
 * adaptive_avg_pool1d/3d, and unfold/fold (im2col/col2im) as composites of the 2-D pool
 * primitives, slices, pads and cats:
 *   1-D pools     a 2-D pool of height 1;
 *   3-D pools     a 2-D pool over (H, W) of [N, C*D, H, W], then one over depth of
 *                 [N, C, D, OH*OW] with a (kd, 1) window. A box's max is the max over depths
 *                 of the per-depth maxima (the first maximum in (d, h, w) order wins, as in
 *                 PyTorch), and its sum and its count of in-plane elements are products over
 *                 dims, so both averages (count_include_pad or not) are separable;
 *   ceil_mode     the extra windows on the right come from padding the input explicitly (-inf
 *                 for max, 0 for avg); averages are then rescaled per dim to PyTorch's
 *                 divisors (windows that overhang the padded input count only up to it);
 *   unfold        the kh*kw kernel taps as strided slices of the padded input, stacked;
 *   fold          its adjoint: each tap placed back (td_window_place) and summed.
 */
#include <math.h>
#include <stdlib.h>

#include "conv_nd.h"

static const char *const max_names[4] = {"", "max_pool1d", "max_pool2d", "max_pool3d"};
static const char *const avg_names[4] = {"", "avg_pool1d", "avg_pool2d", "avg_pool3d"};

typedef struct pool_plan {
    const char *op;
    int nd;
    int64_t k[3], s[3], p[3], out[3], extra[3];
    bool ceil_mode, extended; /* extended: some dim needs windows past the padded input */
} pool_plan;

/* Output length per dim with PyTorch's rule; extra gets the right-side overhang. */
static int pool_plan_init(pool_plan *pl, const tide_tensor *x, const int *kernel,
                          const int *stride, const int *padding)
{
    const char *op = pl->op;
    char s[200];
    int nd = pl->nd;
    if (td_check_tensor(op, "input", x) < 0)
        return -1;
    if (x->ndim != nd + 2)
        return td_error("%s: expects a %d-D input [N, C, ...], got %s", op, nd + 2,
                        td_describe(s, sizeof s, x));
    if (!tide_dtype_is_floating((tide_dtype)x->dtype))
        return td_error("%s: input %s has an unsupported dtype; %s needs a floating dtype", op,
                        td_describe(s, sizeof s, x), op);
    if (!kernel)
        return td_error("%s: kernel_size is NULL", op);
    if (td_read_ints(op, "kernel_size", kernel, nd, 1, 1, pl->k) < 0 ||
        td_read_ints(op, "stride", stride ? stride : kernel, nd, 1, 1, pl->s) < 0 ||
        td_read_ints(op, "padding", padding, nd, 0, 0, pl->p) < 0)
        return -1;
    for (int i = 0; i < nd; i++) {
        int64_t in = x->shape[2 + i], k = pl->k[i], st = pl->s[i], p = pl->p[i];
        if (p > k / 2)
            return td_error("%s: padding %lld must be at most half the kernel %lld (input %s)",
                            op, (long long)p, (long long)k, td_describe(s, sizeof s, x));
        int64_t n = td_window_out_len(in, k, st, p, 1);
        if (in < 1 || n < 1)
            return td_error("%s: the kernel %lld does not fit input %s padded by %lld in "
                            "spatial dim %d",
                            op, (long long)k, td_describe(s, sizeof s, x), (long long)p, i);
        if (pl->ceil_mode) {
            n = (in + 2 * p - k + st - 1) / st + 1;
            if ((n - 1) * st >= in + p) /* the last window must start inside input or left pad */
                n--;
        }
        pl->out[i] = n;
        pl->extra[i] = (n - 1) * st + k - (in + 2 * p);
        if (pl->extra[i] > 0)
            pl->extended = true;
    }
    return 0;
}

/* One 2-D pool primitive (max or avg) with ints (kh, kw, sh, sw, ph, pw). */
static tide_tensor *pool2d(bool is_max, const tide_tensor *x, const int64_t v[6], bool cip)
{
    int k[2] = {(int)v[0], (int)v[1]}, s[2] = {(int)v[2], (int)v[3]}, p[2] = {(int)v[4], (int)v[5]};
    return is_max ? tide_max_pool2d(x, k, s, p, NULL) : tide_avg_pool2d(x, k, s, p, cip);
}

/* The pool of pl on x (its padding pad per dim), through 2-D pools. */
static tide_tensor *pool_run(bool is_max, const pool_plan *pl, const tide_tensor *x,
                             const int64_t pad[3], bool cip)
{
    const int64_t *k = pl->k, *s = pl->s;
    if (pl->nd == 2) {
        int64_t v[6] = {k[0], k[1], s[0], s[1], pad[0], pad[1]};
        return pool2d(is_max, x, v, cip);
    }
    if (pl->nd == 1) {
        int64_t v[6] = {1, k[0], 1, s[0], 0, pad[0]};
        tide_tensor *x4 = tide_unsqueeze(x, 2);
        tide_tensor *y = x4 ? pool2d(is_max, x4, v, cip) : NULL;
        tide_tensor *r = y ? tide_squeeze(y, 2) : NULL;
        tide_release(x4);
        tide_release(y);
        return r;
    }
    int64_t n = x->shape[0], c = x->shape[1], d = x->shape[2];
    int64_t planes[4] = {n, c * d, x->shape[3], x->shape[4]};
    int64_t vhw[6] = {k[1], k[2], s[1], s[2], pad[1], pad[2]};
    int64_t vd[6] = {k[0], 1, s[0], 1, pad[0], 0};
    tide_tensor *x4 = tide_reshape(x, 4, planes);
    tide_tensor *hw = x4 ? pool2d(is_max, x4, vhw, cip) : NULL;
    int64_t oh = hw ? hw->shape[2] : 0, ow = hw ? hw->shape[3] : 0;
    int64_t depth[4] = {n, c, d, oh * ow};
    tide_tensor *hw4 = hw ? tide_reshape(hw, 4, depth) : NULL;
    tide_tensor *y = hw4 ? pool2d(is_max, hw4, vd, cip) : NULL;
    int64_t shape[5] = {n, c, y ? y->shape[2] : 0, oh, ow};
    tide_tensor *r = y ? tide_reshape(y, 5, shape) : NULL;
    tide_release(x4);
    tide_release(hw);
    tide_release(hw4);
    tide_release(y);
    return r;
}

/* avg with ceil_mode: y (the mean over whole kernels of the explicitly padded input) times
 * k / PyTorch's divisor, one factor per dim. */
static tide_tensor *rescale_avg(tide_tensor *y, const pool_plan *pl, const tide_tensor *x,
                                bool cip)
{
    for (int i = 0; y && i < pl->nd; i++) {
        int64_t n = pl->out[i], in = x->shape[2 + i], k = pl->k[i], p = pl->p[i];
        double *f = td_malloc((size_t)n * sizeof *f);
        if (!f) {
            tide_release(y);
            return NULL;
        }
        for (int64_t o = 0; o < n; o++) {
            int64_t start = o * pl->s[i] - p, end = start + k < in + p ? start + k : in + p;
            int64_t div = cip ? end - start : (end < in ? end : in) - (start > 0 ? start : 0);
            f[o] = (double)k / (double)div;
        }
        int64_t shape[TIDE_MAX_DIMS] = {1, 1, 1, 1, 1};
        shape[2 + i] = n;
        tide_tensor *t = tide_from_data_on(x->device->name, f, pl->nd + 2, shape, TIDE_FLOAT64);
        free(f);
        tide_tensor *tc = t ? tide_cast(t, (tide_dtype)y->dtype) : NULL;
        tide_tensor *next = tc ? tide_mul(y, tc) : NULL;
        tide_release(t);
        tide_release(tc);
        tide_release(y);
        y = next;
    }
    return y;
}

static tide_tensor *pool_body(bool is_max, int nd, const tide_tensor *x, const int *kernel,
                              const int *stride, const int *padding, bool ceil_mode, bool cip,
                              tide_tensor **indices)
{
    pool_plan pl = {.op = is_max ? max_names[nd] : avg_names[nd], .nd = nd,
                    .ceil_mode = ceil_mode};
    if (indices)
        *indices = NULL;
    if (pool_plan_init(&pl, x, kernel, stride, padding) < 0)
        return NULL;
    if (indices) { /* a height-1 plane's positions are positions along the length */
        if (nd != 1 || pl.extended) {
            td_error("%s: return_indices is supported for max_pool1d/2d without ceil-mode "
                     "overhang",
                     pl.op);
            return NULL;
        }
        int k[2] = {1, (int)pl.k[0]}, s[2] = {1, (int)pl.s[0]}, p[2] = {0, (int)pl.p[0]};
        tide_tensor *x4 = tide_unsqueeze(x, 2), *i4 = NULL;
        tide_tensor *y = x4 ? tide_max_pool2d(x4, k, s, p, &i4) : NULL;
        tide_tensor *r = y ? tide_squeeze(y, 2) : NULL;
        *indices = r && i4 ? tide_squeeze(i4, 2) : NULL;
        tide_release(x4);
        tide_release(y);
        tide_release(i4);
        if (!*indices) {
            tide_release(r);
            return NULL;
        }
        return r;
    }
    if (!pl.extended)
        return pool_run(is_max, &pl, x, pl.p, cip);
    tide_tensor *xp = tide_retain((tide_tensor *)x);
    for (int i = 0; xp && i < nd; i++) {
        double fill = is_max ? -INFINITY : 0;
        int64_t after = pl.p[i] + (pl.extra[i] > 0 ? pl.extra[i] : 0);
        tide_tensor *next = td_pad_dim(xp, 2 + i, pl.p[i], after, fill);
        tide_release(xp);
        xp = next;
    }
    int64_t none[3] = {0, 0, 0};
    tide_tensor *y = xp ? pool_run(is_max, &pl, xp, none, true) : NULL;
    tide_release(xp);
    return is_max ? y : rescale_avg(y, &pl, x, cip);
}

static bool nd_ok(int nd, const char *op)
{
    if (nd >= 1 && nd <= 3)
        return true;
    td_error("%s: %d spatial dims; tide has 1, 2 and 3", op, nd);
    return false;
}

tide_tensor *tide_max_pool_nd(int nd, const tide_tensor *x, const int *kernel, const int *stride,
                              const int *padding, bool ceil_mode, tide_tensor **indices)
{
    if (!nd_ok(nd, "max_pool"))
        return NULL;
    TD_IN_OP(max_names[nd],
             pool_body(true, nd, x, kernel, stride, padding, ceil_mode, false, indices));
}

tide_tensor *tide_avg_pool_nd(int nd, const tide_tensor *x, const int *kernel, const int *stride,
                              const int *padding, bool ceil_mode, bool count_include_pad)
{
    if (!nd_ok(nd, "avg_pool"))
        return NULL;
    TD_IN_OP(avg_names[nd], pool_body(false, nd, x, kernel, stride, padding, ceil_mode,
                                      count_include_pad, NULL));
}

/* ---- adaptive average pooling ------------------------------------------------------------- */

static tide_tensor *adaptive_body(int nd, const tide_tensor *x, const int64_t *size)
{
    static const char *const names[4] = {"", "adaptive_avg_pool1d", "adaptive_avg_pool2d",
                                         "adaptive_avg_pool3d"};
    const char *op = names[nd];
    char s[200];
    if (td_check_tensor(op, "input", x) < 0)
        return NULL;
    if (x->ndim != nd + 2 || !size) {
        td_error("%s: expects a %d-D input [N, C, ...] and %d output sizes, got %s", op, nd + 2,
                 nd, td_describe(s, sizeof s, x));
        return NULL;
    }
    for (int i = 0; i < nd; i++)
        if (size[i] < 1 || x->shape[2 + i] < 1) {
            td_error("%s: output sizes must be positive and the input non-empty, got size "
                     "%lld in dim %d for input %s",
                     op, (long long)size[i], i, td_describe(s, sizeof s, x));
            return NULL;
        }
    if (nd == 2)
        return tide_adaptive_avg_pool2d(x, size[0], size[1]);
    if (nd == 1) {
        tide_tensor *x4 = tide_unsqueeze(x, 2);
        tide_tensor *y = x4 ? tide_adaptive_avg_pool2d(x4, 1, size[0]) : NULL;
        tide_tensor *r = y ? tide_squeeze(y, 2) : NULL;
        tide_release(x4);
        tide_release(y);
        return r;
    }
    int64_t n = x->shape[0], c = x->shape[1], d = x->shape[2];
    int64_t planes[4] = {n, c * d, x->shape[3], x->shape[4]};
    int64_t depth[4] = {n, c, d, size[1] * size[2]};
    int64_t shape[5] = {n, c, size[0], size[1], size[2]};
    tide_tensor *x4 = tide_reshape(x, 4, planes);
    tide_tensor *hw = x4 ? tide_adaptive_avg_pool2d(x4, size[1], size[2]) : NULL;
    tide_tensor *hw4 = hw ? tide_reshape(hw, 4, depth) : NULL;
    tide_tensor *y = hw4 ? tide_adaptive_avg_pool2d(hw4, size[0], depth[3]) : NULL;
    tide_tensor *r = y ? tide_reshape(y, 5, shape) : NULL;
    tide_release(x4);
    tide_release(hw);
    tide_release(hw4);
    tide_release(y);
    return r;
}

tide_tensor *tide_adaptive_avg_pool_nd(int nd, const tide_tensor *x, const int64_t *output_size)
{
    if (!nd_ok(nd, "adaptive_avg_pool"))
        return NULL;
    TD_IN_OP(nd == 1 ? "adaptive_avg_pool1d" : nd == 2 ? "adaptive_avg_pool2d"
                                                       : "adaptive_avg_pool3d",
             adaptive_body(nd, x, output_size));
}
