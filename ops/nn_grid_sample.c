/*
 * nn_grid_sample.c — grid_sample (F.grid_sample, ONNX GridSample) on 4-D inputs, as PyTorch's
 * CPU kernel computes it: input [N, C, H, W], grid [N, Ho, Wo, 2] holding (x, y) in [-1, 1].
 *
 *   unnormalize  align_corners: (g + 1) (size - 1) / 2 (-1 and 1 are the corner pixels'
 *                centres); else ((g + 1) size - 1) / 2 (the image's outer edges);
 *   padding      zeros: neighbours outside the image count 0; border: the coordinate clipped
 *                to [0, size - 1]; reflection: reflected at the edges (the corner centres with
 *                align_corners, else the outer edges), then clipped;
 *   modes        nearest: the pixel at round-half-to-even of the coordinate; bilinear: the four
 *                neighbours; bicubic: sixteen, with the cubic convolution weights (A = -0.75),
 *                each neighbour's coordinate padded on its own (as PyTorch).
 *
 * A composite of public ops: each neighbour is a gather from the input viewed [N, C, H*W] at
 * host-free int64 positions, times its weight. So the gradient reaches the input through gather
 * and the grid through the weights (and the reflection's abs/fmod), the jit traces it and every
 * device runs it.
 */
#include "nn_common.h"

typedef struct sampler {
    const tide_tensor *flat; /* the input [N, C, H*W] */
    int64_t n, c, h, w, points; /* points = Ho * Wo */
    tide_grid_padding padding;
    bool align_corners;
} sampler;

static tide_tensor *scalar_like(const tide_tensor *like, double v, tide_dtype dtype)
{
    return td_full_on(like->device, "grid_sample", 0, NULL, v, dtype);
}

/* x clamped to [lo, hi] (lo <= hi), in x's dtype. */
static tide_tensor *clamp_to(const tide_tensor *x, double lo, double hi)
{
    nn_scope s = {0};
    tide_tensor *l = nn_keep(&s, scalar_like(x, lo, (tide_dtype)x->dtype));
    tide_tensor *h = nn_keep(&s, scalar_like(x, hi, (tide_dtype)x->dtype));
    tide_tensor *r = nn_keep(&s, tide_clamp_max(nn_keep(&s, tide_clamp_min(x, l)), h));
    return nn_finish(&s, "grid_sample", r);
}

/* PyTorch's reflect_coordinates: x reflected into [twice_low / 2, twice_high / 2]. */
static tide_tensor *reflect(const tide_tensor *x, int64_t twice_low, int64_t twice_high)
{
    nn_scope s = {0};
    tide_dtype dt = (tide_dtype)x->dtype;
    if (twice_low == twice_high)
        return nn_finish(&s, "grid_sample", nn_keep(&s, tide_mul_scalar(x, 0)));
    double min = (double)twice_low / 2, span = (double)(twice_high - twice_low) / 2;
    tide_tensor *in = nn_keep(&s, tide_abs(nn_keep(&s, tide_sub_scalar(x, min))));
    tide_tensor *extra = nn_keep(&s, tide_fmod(in, nn_keep(&s, scalar_like(x, span, dt))));
    tide_tensor *flips = nn_keep(&s, tide_floor(nn_keep(&s, tide_div_scalar(in, span))));
    tide_tensor *two = nn_keep(&s, scalar_like(x, 2, dt)), *zero = nn_keep(&s, scalar_like(x, 0, dt));
    tide_tensor *even = nn_keep(&s, tide_eq(nn_keep(&s, tide_fmod(flips, two)), zero));
    tide_tensor *up = nn_keep(&s, tide_add_scalar(extra, min));
    tide_tensor *down = nn_keep(&s, tide_add_scalar(nn_keep(&s, tide_neg(extra)), span + min));
    return nn_finish(&s, "grid_sample", nn_keep(&s, tide_where(even, up, down)));
}

/* PyTorch's compute_coordinates: a pixel coordinate after the padding mode (zeros: as is). */
static tide_tensor *pad_coordinate(const sampler *sp, const tide_tensor *x, int64_t size)
{
    if (sp->padding == TIDE_GRID_BORDER)
        return clamp_to(x, 0, (double)(size - 1));
    if (sp->padding != TIDE_GRID_REFLECTION)
        return tide_retain((tide_tensor *)x);
    tide_tensor *r = sp->align_corners ? reflect(x, 0, 2 * (size - 1)) : reflect(x, -1, 2 * size - 1);
    tide_tensor *c = r ? clamp_to(r, 0, (double)(size - 1)) : NULL;
    tide_release(r);
    return c;
}

/* g in [-1, 1] to a pixel coordinate along a dim of size pixels. */
static tide_tensor *unnormalize(const tide_tensor *g, int64_t size, bool align_corners)
{
    nn_scope s = {0};
    tide_tensor *p = nn_keep(&s, tide_add_scalar(g, 1));
    tide_tensor *r = align_corners
                         ? nn_keep(&s, tide_mul_scalar(p, (double)(size - 1) / 2))
                         : nn_keep(&s, tide_div_scalar(nn_keep(&s, tide_sub_scalar(
                                                           nn_keep(&s, tide_mul_scalar(p, (double)size)), 1)),
                                                       2));
    return nn_finish(&s, "grid_sample", r);
}

/* The input at integer pixels (ix, iy) [N, Ho, Wo] (int64) times weight [N, Ho, Wo], 0 where
 * the pixel is outside the image: [N, C, Ho * Wo]. */
static tide_tensor *pick(const sampler *sp, const tide_tensor *ix, const tide_tensor *iy,
                         const tide_tensor *weight)
{
    nn_scope s = {0};
    tide_tensor *z = nn_keep(&s, scalar_like(ix, 0, TIDE_INT64));
    tide_tensor *wmax = nn_keep(&s, scalar_like(ix, (double)(sp->w - 1), TIDE_INT64));
    tide_tensor *hmax = nn_keep(&s, scalar_like(ix, (double)(sp->h - 1), TIDE_INT64));
    tide_tensor *in_x = nn_keep(&s, tide_logical_and(nn_keep(&s, tide_ge(ix, z)),
                                                     nn_keep(&s, tide_le(ix, wmax))));
    tide_tensor *in_y = nn_keep(&s, tide_logical_and(nn_keep(&s, tide_ge(iy, z)),
                                                     nn_keep(&s, tide_le(iy, hmax))));
    tide_tensor *inside = nn_keep(&s, tide_logical_and(in_x, in_y));
    tide_tensor *cx = nn_keep(&s, tide_clamp_max(nn_keep(&s, tide_clamp_min(ix, z)), wmax));
    tide_tensor *cy = nn_keep(&s, tide_clamp_max(nn_keep(&s, tide_clamp_min(iy, z)), hmax));
    tide_tensor *width = nn_keep(&s, scalar_like(ix, (double)sp->w, TIDE_INT64));
    tide_tensor *pos = nn_keep(&s, tide_add(nn_keep(&s, tide_mul(cy, width)), cx));
    int64_t row[3] = {sp->n, 1, sp->points}, all[3] = {sp->n, sp->c, sp->points};
    tide_tensor *index = nn_keep(&s, tide_expand(nn_keep(&s, tide_reshape(pos, 3, row)), 3, all));
    tide_tensor *v = nn_keep(&s, tide_gather(sp->flat, 2, index));
    tide_tensor *zero = nn_keep(&s, scalar_like(weight, 0, (tide_dtype)weight->dtype));
    tide_tensor *wt = nn_keep(&s, tide_reshape(nn_keep(&s, tide_where(inside, weight, zero)), 3, row));
    return nn_finish(&s, "grid_sample", nn_keep(&s, tide_mul(v, wt)));
}

/* The sum over the taps (ix[i], iy[j]) with weights wx[i] * wy[j], i, j < taps. */
static tide_tensor *sum_taps(const sampler *sp, int taps, tide_tensor *const *ix,
                             tide_tensor *const *iy, tide_tensor *const *wx,
                             tide_tensor *const *wy)
{
    tide_tensor *out = NULL;
    for (int j = 0; j < taps; j++)
        for (int i = 0; i < taps; i++) {
            tide_tensor *wgt = tide_mul(wx[i], wy[j]);
            tide_tensor *term = wgt ? pick(sp, ix[i], iy[j], wgt) : NULL;
            tide_tensor *next = !term ? NULL : out ? tide_add(out, term) : tide_retain(term);
            tide_release(term);
            tide_release(wgt);
            tide_release(out);
            if (!(out = next))
                return NULL;
        }
    return out;
}

static tide_tensor *sample_nearest(const sampler *sp, const tide_tensor *x, const tide_tensor *y)
{
    nn_scope s = {0};
    tide_tensor *ix = nn_keep(&s, tide_cast(nn_keep(&s, tide_round(nn_keep(&s, tide_detach(x)))), TIDE_INT64));
    tide_tensor *iy = nn_keep(&s, tide_cast(nn_keep(&s, tide_round(nn_keep(&s, tide_detach(y)))), TIDE_INT64));
    tide_tensor *one = nn_keep(&s, td_full_on(x->device, "grid_sample", x->ndim, x->shape, 1,
                                              (tide_dtype)x->dtype));
    return nn_finish(&s, "grid_sample", nn_keep(&s, pick(sp, ix, iy, one)));
}

static tide_tensor *sample_bilinear(const sampler *sp, const tide_tensor *x, const tide_tensor *y)
{
    nn_scope s = {0};
    tide_tensor *x0f = nn_keep(&s, tide_floor(nn_keep(&s, tide_detach(x))));
    tide_tensor *y0f = nn_keep(&s, tide_floor(nn_keep(&s, tide_detach(y))));
    tide_tensor *wx[2], *wy[2], *ix[2], *iy[2];
    wx[1] = nn_keep(&s, tide_sub(x, x0f));
    wy[1] = nn_keep(&s, tide_sub(y, y0f));
    wx[0] = nn_keep(&s, tide_add_scalar(nn_keep(&s, tide_neg(wx[1])), 1));
    wy[0] = nn_keep(&s, tide_add_scalar(nn_keep(&s, tide_neg(wy[1])), 1));
    ix[0] = nn_keep(&s, tide_cast(x0f, TIDE_INT64));
    iy[0] = nn_keep(&s, tide_cast(y0f, TIDE_INT64));
    ix[1] = nn_keep(&s, tide_cast(nn_keep(&s, tide_add_scalar(x0f, 1)), TIDE_INT64));
    iy[1] = nn_keep(&s, tide_cast(nn_keep(&s, tide_add_scalar(y0f, 1)), TIDE_INT64));
    tide_tensor *out = s.failed ? NULL : sum_taps(sp, 2, ix, iy, wx, wy);
    return nn_finish(&s, "grid_sample", nn_keep(&s, out));
}

/* The cubic convolution weight (A = -0.75) of a tap at distance d from the point:
 * ((A+2)d - (A+3))d^2 + 1 for the two near taps (d <= 1), ((A d - 5A)d + 8A)d - 4A for the far
 * ones (1 < d < 2). */
static tide_tensor *cubic_weight(const tide_tensor *d, bool near)
{
    const double A = -0.75;
    nn_scope s = {0};
    tide_tensor *p = nn_keep(&s, tide_add_scalar(nn_keep(&s, tide_mul_scalar(d, near ? A + 2 : A)),
                                                 near ? -(A + 3) : -5 * A));
    tide_tensor *pd = nn_keep(&s, tide_mul(p, d));
    if (!near)
        pd = nn_keep(&s, tide_add_scalar(pd, 8 * A));
    tide_tensor *r = nn_keep(&s, tide_add_scalar(nn_keep(&s, tide_mul(pd, d)), near ? 1 : -4 * A));
    return nn_finish(&s, "grid_sample", r);
}

/* The weights of the taps at floor(x) - 1 .. floor(x) + 2 for the fraction t = x - floor(x):
 * distances t + 1, t, 1 - t, 2 - t. New references in w[4]; 0 or -1. */
static int cubic_weights(const tide_tensor *t, tide_tensor **w)
{
    tide_tensor *neg = tide_neg(t);
    tide_tensor *d[4] = {tide_add_scalar(t, 1), tide_retain((tide_tensor *)t),
                         neg ? tide_add_scalar(neg, 1) : NULL, neg ? tide_add_scalar(neg, 2) : NULL};
    int rc = 0;
    for (int k = 0; k < 4; k++) {
        w[k] = d[k] && rc == 0 ? cubic_weight(d[k], k == 1 || k == 2) : NULL;
        rc = w[k] ? rc : -1;
    }
    for (int k = 0; k < 4; k++) {
        tide_release(d[k]);
        if (rc < 0)
            tide_release(w[k]), w[k] = NULL;
    }
    tide_release(neg);
    return rc;
}

/* The integer pixel of tap k along a dim after the padding mode: [N, Ho, Wo] int64. */
static tide_tensor *cubic_tap(const sampler *sp, const tide_tensor *floor, int k, int64_t size)
{
    nn_scope s = {0};
    tide_tensor *c = nn_keep(&s, tide_add_scalar(floor, k - 1));
    tide_tensor *p = nn_keep(&s, pad_coordinate(sp, c, size));
    return nn_finish(&s, "grid_sample", nn_keep(&s, tide_cast(p, TIDE_INT64)));
}

static tide_tensor *sample_bicubic(const sampler *sp, const tide_tensor *x, const tide_tensor *y)
{
    nn_scope s = {0};
    tide_tensor *x0f = nn_keep(&s, tide_floor(nn_keep(&s, tide_detach(x))));
    tide_tensor *y0f = nn_keep(&s, tide_floor(nn_keep(&s, tide_detach(y))));
    tide_tensor *wx[4] = {0}, *wy[4] = {0}, *ix[4], *iy[4], *out = NULL;
    if (cubic_weights(nn_keep(&s, tide_sub(x, x0f)), wx) == 0)
        cubic_weights(nn_keep(&s, tide_sub(y, y0f)), wy);
    for (int k = 0; k < 4; k++) {
        nn_keep(&s, wx[k]);
        nn_keep(&s, wy[k]);
        ix[k] = nn_keep(&s, cubic_tap(sp, x0f, k, sp->w));
        iy[k] = nn_keep(&s, cubic_tap(sp, y0f, k, sp->h));
    }
    out = s.failed ? NULL : sum_taps(sp, 4, ix, iy, wx, wy);
    return nn_finish(&s, "grid_sample", nn_keep(&s, out));
}

static int check_args(const tide_tensor *input, const tide_tensor *grid, tide_grid_mode mode,
                      tide_grid_padding padding)
{
    const char *op = "grid_sample";
    char d1[96], d2[96];
    if (nn_check_floating(op, "input", input) < 0 || nn_check_floating(op, "grid", grid) < 0)
        return -1;
    if (input->ndim != 4 || grid->ndim != 4 || grid->shape[3] != 2 ||
        grid->shape[0] != input->shape[0])
        return td_error("%s: expected input [N, C, H, W] and grid [N, Ho, Wo, 2], got %s and %s",
                        op, nn_describe(d1, sizeof d1, input), nn_describe(d2, sizeof d2, grid));
    if (grid->dtype != input->dtype)
        return td_error("%s: input is %s but grid is %s: they must have one dtype", op,
                        nn_describe(d1, sizeof d1, input), nn_describe(d2, sizeof d2, grid));
    if ((unsigned)mode > TIDE_GRID_BICUBIC)
        return td_error("%s: unknown mode %d (bilinear, nearest or bicubic)", op, (int)mode);
    if ((unsigned)padding > TIDE_GRID_REFLECTION)
        return td_error("%s: unknown padding mode %d (zeros, border or reflection)", op,
                        (int)padding);
    if (input->shape[2] == 0 || input->shape[3] == 0)
        return td_error("%s: the input %s has no pixels to sample", op,
                        nn_describe(d1, sizeof d1, input));
    return 0;
}

static tide_tensor *grid_sample_body(const tide_tensor *input, const tide_tensor *grid,
                                     tide_grid_mode mode, tide_grid_padding padding,
                                     bool align_corners)
{
    if (check_args(input, grid, mode, padding) < 0)
        return NULL;
    nn_scope s = {0};
    int64_t n = input->shape[0], c = input->shape[1], h = input->shape[2], w = input->shape[3];
    int64_t flat_shape[3] = {n, c, h * w};
    sampler sp = {nn_keep(&s, tide_reshape(input, 3, flat_shape)), n, c, h, w,
                  grid->shape[1] * grid->shape[2], padding, align_corners};
    tide_tensor *x = nn_keep(&s, unnormalize(nn_keep(&s, tide_select(grid, 3, 0)), w, align_corners));
    tide_tensor *y = nn_keep(&s, unnormalize(nn_keep(&s, tide_select(grid, 3, 1)), h, align_corners));
    if (mode != TIDE_GRID_BICUBIC && !s.failed) { /* bicubic pads each tap instead */
        x = nn_keep(&s, pad_coordinate(&sp, x, w));
        y = nn_keep(&s, pad_coordinate(&sp, y, h));
    }
    tide_tensor *out = NULL;
    if (!s.failed)
        out = nn_keep(&s, mode == TIDE_GRID_NEAREST  ? sample_nearest(&sp, x, y)
                          : mode == TIDE_GRID_BILINEAR ? sample_bilinear(&sp, x, y)
                                                       : sample_bicubic(&sp, x, y));
    int64_t out_shape[4] = {n, c, grid->shape[1], grid->shape[2]};
    out = nn_keep(&s, tide_reshape(out, 4, out_shape));
    return nn_finish(&s, "grid_sample", out);
}

tide_tensor *tide_grid_sample(const tide_tensor *input, const tide_tensor *grid,
                              tide_grid_mode mode, tide_grid_padding padding, bool align_corners)
{
    TD_IN_OP("grid_sample", grid_sample_body(input, grid, mode, padding, align_corners));
}
