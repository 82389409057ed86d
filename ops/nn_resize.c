/*
 * nn_resize.c — interpolate (F.interpolate / nn.Upsample / ONNX Resize) in nearest,
 * nearest-exact and linear modes (linear, bilinear, trilinear: one rule per spatial dim), with
 * PyTorch's source coordinates:
 *   nearest: src = min(floor(dst * scale), in - 1), scale = 1/scale_factor when one is given,
 *            else in/out (computed in float, as PyTorch's CPU kernel, so the same pixels win);
 *            nearest-exact: floor((dst + 0.5) * scale) instead (pixel centres);
 *   linear:  align_corners: src = dst * (in - 1)/(out - 1); else
 *            src = max((dst + 0.5) * scale - 0.5, 0); neighbours floor(src) and the next one
 *            (clamped at the edge), weights 1 - frac and frac.
 * Each spatial dim is resized separately (linear interpolation is separable) with index_select
 * of host-computed int64 positions, and for linear modes a weighted sum of the two neighbours:
 * the gradient is index_select's scatter-add, the jit traces primitives and every device runs
 * them. Weights are made in the input's dtype on its device.
 */
#include <math.h>
#include <stdlib.h>

#include "nn_common.h"

/* PyTorch's compute_scales_value: the given scale's inverse, else in/out. */
static double inverse_scale(const double *scales, int i, int64_t in, int64_t out)
{
    if (scales && scales[i] > 0)
        return (float)(1.0 / scales[i]);
    return (float)in / (float)out;
}

/* Positions (and for linear the upper neighbour and its weight) of each output element. */
static void source_positions(tide_interp_mode mode, bool align_corners, double inv, int64_t in,
                             int64_t out, int64_t *lo, int64_t *hi, double *frac)
{
    for (int64_t o = 0; o < out; o++) {
        if (mode != TIDE_INTERP_LINEAR) {
            float centre = mode == TIDE_INTERP_NEAREST_EXACT ? 0.5f : 0.0f;
            int64_t src = (int64_t)floorf(((float)o + centre) * (float)inv);
            lo[o] = src < in - 1 ? src : in - 1;
            continue;
        }
        double src;
        if (align_corners)
            src = out > 1 ? (double)o * (double)(in - 1) / (double)(out - 1) : 0;
        else
            src = fmax(((double)o + 0.5) * inv - 0.5, 0);
        int64_t i0 = (int64_t)src;
        if (i0 > in - 1)
            i0 = in - 1;
        lo[o] = i0;
        hi[o] = i0 < in - 1 ? i0 + 1 : i0;
        double f = src - (double)i0;
        frac[o] = f < 0 ? 0 : f > 1 ? 1 : f;
    }
}

/* The weights frac (or 1 - frac) shaped [out, 1, ...] to broadcast over dims after dim. */
static tide_tensor *weights(const tide_tensor *x, int dim, const double *frac, int64_t out,
                            bool complement)
{
    int64_t shape[TIDE_MAX_DIMS];
    int nd = tide_ndim(x) - dim;
    shape[0] = out;
    for (int i = 1; i < nd; i++)
        shape[i] = 1;
    double *w = td_malloc((size_t)(out ? out : 1) * sizeof *w);
    if (!w)
        return NULL;
    for (int64_t o = 0; o < out; o++)
        w[o] = complement ? 1 - frac[o] : frac[o];
    tide_tensor *t64 = td_from_data_on(x->device, w, nd, shape, TIDE_FLOAT64);
    free(w);
    tide_tensor *t = t64 ? tide_cast(t64, tide_get_dtype(x)) : NULL;
    tide_release(t64);
    return t;
}

static tide_tensor *select_positions(nn_scope *s, const tide_tensor *x, int dim,
                                     const int64_t *pos, int64_t out)
{
    tide_tensor *index = nn_keep(s, td_from_data_on(x->device, pos, 1, &out, TIDE_INT64));
    return nn_keep(s, tide_index_select(x, dim, index));
}

/* x resized along dim to out elements. */
static tide_tensor *resize_dim(nn_scope *s, const tide_tensor *x, int dim, int64_t out,
                               double inv, tide_interp_mode mode, bool align_corners)
{
    int64_t in = tide_shape(x)[dim], n = out ? out : 1;
    int64_t *lo = td_malloc((size_t)n * sizeof *lo), *hi = td_malloc((size_t)n * sizeof *hi);
    double *frac = td_malloc((size_t)n * sizeof *frac);
    tide_tensor *r = NULL;
    if (lo && hi && frac) {
        source_positions(mode, align_corners, inv, in, out, lo, hi, frac);
        tide_tensor *a = select_positions(s, x, dim, lo, out);
        if (mode != TIDE_INTERP_LINEAR) {
            r = a;
        } else {
            tide_tensor *b = select_positions(s, x, dim, hi, out);
            tide_tensor *w0 = nn_keep(s, weights(x, dim, frac, out, true));
            tide_tensor *w1 = nn_keep(s, weights(x, dim, frac, out, false));
            tide_tensor *aw = nn_keep(s, tide_mul(a, w0)), *bw = nn_keep(s, tide_mul(b, w1));
            r = nn_keep(s, tide_add(aw, bw));
        }
    } else {
        nn_keep(s, NULL); /* the failed allocation's error */
    }
    free(lo);
    free(hi);
    free(frac);
    return r;
}

static int check_interp(const tide_tensor *x, int nsp, const int64_t *size, const double *scales,
                        tide_interp_mode mode)
{
    const char *op = "interpolate";
    char d[200];
    if (nn_check_floating(op, "input", x) < 0)
        return -1;
    if ((int)mode < 0 || mode > TIDE_INTERP_NEAREST_EXACT)
        return td_error("%s: unknown mode %d", op, (int)mode);
    if (nsp < 1 || nsp > 3 || tide_ndim(x) != nsp + 2)
        return td_error("%s: the input must be [N, C, %d spatial dims] (1 to 3), got %s", op, nsp,
                        nn_describe(d, sizeof d, x));
    if (!size && !scales)
        return td_error("%s: give either the output size or the scale factors", op);
    for (int i = 0; i < nsp; i++) {
        if (size && size[i] < 0)
            return td_error("%s: output size %lld of spatial dim %d is negative", op,
                            (long long)size[i], i);
        if (!size && !(scales[i] > 0 && isfinite(scales[i])))
            return td_error("%s: scale factor %g of spatial dim %d must be positive", op,
                            scales[i], i);
        if (tide_shape(x)[2 + i] == 0)
            return td_error("%s: cannot resize an empty dim (input %s)", op,
                            nn_describe(d, sizeof d, x));
    }
    return 0;
}

static tide_tensor *interpolate_body(const tide_tensor *x, int nsp, const int64_t *size,
                                     const double *scales, tide_interp_mode mode,
                                     bool align_corners)
{
    if (check_interp(x, nsp, size, scales, mode) < 0)
        return NULL;
    nn_scope s = {0};
    tide_tensor *out = nn_keep(&s, tide_contiguous(x));
    for (int i = 0; i < nsp; i++) {
        int64_t in = tide_shape(x)[2 + i];
        int64_t o = size ? size[i] : (int64_t)floor((double)in * scales[i]);
        double inv = o ? inverse_scale(size ? NULL : scales, i, in, o) : 1;
        if (mode == TIDE_INTERP_LINEAR && !align_corners && !size)
            inv = 1.0 / scales[i]; /* linear keeps the scale in the accumulation type */
        if (mode == TIDE_INTERP_LINEAR && !align_corners && size)
            inv = (double)in / (double)o;
        if (o == in && (mode != TIDE_INTERP_LINEAR || inv == 1 || align_corners))
            continue; /* the identity resize */
        out = resize_dim(&s, out, 2 + i, o, inv, mode, align_corners);
    }
    return nn_finish(&s, "interpolate", out);
}

tide_tensor *tide_interpolate(const tide_tensor *x, int nsp, const int64_t *size,
                              const double *scales, tide_interp_mode mode, bool align_corners)
{
    TD_IN_OP("interpolate", interpolate_body(x, nsp, size, scales, mode, align_corners));
}
