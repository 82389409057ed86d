/*
 * nn_pad.c — F.pad's reflect, replicate and circular modes, and pixel_shuffle/pixel_unshuffle.
 *
 * A padded dim is one index_select whose int64 positions are worked out on the host from the
 * sizes alone (reflect mirrors about the edge elements, replicate repeats them, circular wraps),
 * so the gradient is index_select's (a scatter-add into the input), the jit traces one primitive
 * per dim and every device runs it. pixel_shuffle and pixel_unshuffle are reshape, permute,
 * reshape, as PyTorch's.
 */
#include <stdlib.h>

#include "nn_common.h"

static const char *mode_name(tide_padding_mode mode)
{
    switch (mode) {
    case TIDE_PAD_CONSTANT: return "constant";
    case TIDE_PAD_REFLECT: return "reflect";
    case TIDE_PAD_REPLICATE: return "replicate";
    case TIDE_PAD_CIRCULAR: return "circular";
    }
    return "unknown";
}

/* The source position of output position o of a dim of size n padded by `before`. */
static int64_t source_of(tide_padding_mode mode, int64_t o, int64_t before, int64_t n)
{
    int64_t i = o - before;
    if (mode == TIDE_PAD_REPLICATE)
        return i < 0 ? 0 : i >= n ? n - 1 : i;
    if (mode == TIDE_PAD_CIRCULAR)
        return ((i % n) + n) % n;
    if (i < 0) /* reflect: pads < n, so one mirror suffices */
        i = -i;
    if (i >= n)
        i = 2 * (n - 1) - i;
    return i;
}

/* The pads one dim of size n allows in mode: reflect < n, circular <= n, replicate any (n > 0). */
static int check_dim_pads(tide_padding_mode mode, const tide_tensor *x, int dim, int64_t before,
                          int64_t after)
{
    int64_t n = tide_shape(x)[dim];
    int64_t limit = mode == TIDE_PAD_REFLECT ? n - 1 : mode == TIDE_PAD_CIRCULAR ? n : INT64_MAX;
    bool ok = n > 0 && before <= limit && after <= limit && n + before + after >= 0;
    if (ok)
        return 0;
    char d[200];
    /* dim counted from the end (-1 the last), which reads the same from C and from Lua */
    return td_error("pad: %s padding (%lld, %lld) does not fit dim %d of size %lld of the input "
                    "%s (reflect needs pads < the size, circular <= the size, all a non-empty "
                    "dim)",
                    mode_name(mode), (long long)before, (long long)after, dim - x->ndim,
                    (long long)n, nn_describe(d, sizeof d, x));
}

/* x with dim `dim` padded by (before, after), one index_select. */
static tide_tensor *pad_dim(const tide_tensor *x, int dim, int64_t before, int64_t after,
                            tide_padding_mode mode)
{
    int64_t n = tide_shape(x)[dim], m = n + before + after;
    int64_t *pos = td_malloc((size_t)(m ? m : 1) * sizeof *pos);
    if (!pos)
        return NULL;
    for (int64_t o = 0; o < m; o++)
        pos[o] = source_of(mode, o, before, n);
    tide_tensor *index = td_from_data_on(x->device, pos, 1, &m, TIDE_INT64);
    free(pos);
    if (!index)
        return NULL;
    tide_tensor *out = tide_index_select(x, dim, index);
    tide_release(index);
    return out;
}

static tide_tensor *pad_mode_body(const tide_tensor *x, const int64_t *pads, int npads,
                                  tide_padding_mode mode, double value)
{
    if (mode == TIDE_PAD_CONSTANT)
        return tide_pad(x, pads, npads, value);
    if (td_check_tensor("pad", "input", x) < 0)
        return NULL;
    if ((int)mode < 0 || mode > TIDE_PAD_CIRCULAR) {
        td_error("pad: unknown mode %d", (int)mode);
        return NULL;
    }
    if (npads < 0 || npads % 2 || npads / 2 > x->ndim || (npads && !pads)) {
        td_error("pad: %d pad values for a tensor of %d dims; expected an even count of at most %d",
                 npads, x->ndim, 2 * x->ndim);
        return NULL;
    }
    for (int i = 0; i < npads / 2; i++)
        if (check_dim_pads(mode, x, x->ndim - 1 - i, pads[2 * i], pads[2 * i + 1]) < 0)
            return NULL;
    nn_scope s = {0};
    tide_tensor *out = nn_keep(&s, tide_contiguous(x)); /* a new reference when no pads */
    for (int i = 0; i < npads / 2; i++)
        if (pads[2 * i] || pads[2 * i + 1])
            out = nn_keep(&s, pad_dim(out, x->ndim - 1 - i, pads[2 * i], pads[2 * i + 1], mode));
    return nn_finish(&s, "pad", out);
}

tide_tensor *tide_pad_mode(const tide_tensor *x, const int64_t *pads, int npads,
                           tide_padding_mode mode, double value)
{
    TD_IN_OP("pad", pad_mode_body(x, pads, npads, mode, value));
}

/* [B..., C*r*r, H, W] <-> [B..., C, H*r, W*r] through a 6-D view. */
static tide_tensor *shuffle_body(const tide_tensor *x, int64_t r, bool up)
{
    const char *op = up ? "pixel_shuffle" : "pixel_unshuffle";
    if (td_check_tensor(op, "input", x) < 0)
        return NULL;
    char d[200];
    int nd = x->ndim;
    if (nd < 3 || r < 1) {
        td_error("%s: needs an input of at least 3 dims [..., C, H, W] and a factor >= 1, got %s "
                 "and %lld", op, nn_describe(d, sizeof d, x), (long long)r);
        return NULL;
    }
    int64_t c = x->shape[nd - 3], h = x->shape[nd - 2], w = x->shape[nd - 1];
    if ((up && c % (r * r)) || (!up && (h % r || w % r))) {
        td_error("%s: %s is not divisible by the factor %lld%s (input %s)", op,
                 up ? "the channel count" : "the height or width", (long long)r,
                 up ? " squared" : "", nn_describe(d, sizeof d, x));
        return NULL;
    }
    int64_t batch = 1;
    for (int i = 0; i < nd - 3; i++)
        batch *= x->shape[i];
    int64_t oc = up ? c / (r * r) : c;
    int64_t v6[6] = {batch, oc, r, r, h, w};               /* shuffle's view of the input */
    int64_t u6[6] = {batch, c, h / r, r, w / r, r};        /* unshuffle's view of the input */
    static const int to_up[6] = {0, 1, 4, 2, 5, 3}, to_down[6] = {0, 1, 3, 5, 2, 4};
    int64_t shape[TIDE_MAX_DIMS];
    for (int i = 0; i < nd - 3; i++)
        shape[i] = x->shape[i];
    shape[nd - 3] = up ? oc : c * r * r;
    shape[nd - 2] = up ? h * r : h / r;
    shape[nd - 1] = up ? w * r : w / r;
    nn_scope s = {0};
    tide_tensor *v = nn_keep(&s, tide_reshape(x, 6, up ? v6 : u6));
    tide_tensor *p = nn_keep(&s, tide_permute(v, up ? to_up : to_down));
    tide_tensor *out = nn_keep(&s, tide_reshape(p, nd, shape));
    return nn_finish(&s, op, out);
}

tide_tensor *tide_pixel_shuffle(const tide_tensor *x, int64_t upscale_factor)
{
    TD_IN_OP("pixel_shuffle", shuffle_body(x, upscale_factor, true));
}

tide_tensor *tide_pixel_unshuffle(const tide_tensor *x, int64_t downscale_factor)
{
    TD_IN_OP("pixel_unshuffle", shuffle_body(x, downscale_factor, false));
}
