/*
 * triangular.c — triu and tril, as torch.triu/torch.tril: keep the elements on and above
 * (triu) or on and below (tril) the diagonal-th diagonal of the last two dims, zero the rest;
 * leading dims are a batch. diagonal 0 is the main diagonal, > 0 above it, < 0 below it.
 *
 * A composite, not a primitive: keep = (col - row >= diagonal) for triu (<= for tril) is built
 * from two int64 aranges on the input's device, then where(keep, x, 0). So autograd (where's
 * gradient masks the same places), the jit (iota, sub, ge and where fuse into one kernel) and
 * every device (Vulkan's eltwise shader; iota takes its logged creation fallback) need nothing
 * new, and the result is exact on every device since where only selects.
 */
#include <stdio.h>

#include "nn_common.h"

static tide_tensor *triangle(const tide_tensor *x, int64_t diagonal, bool upper)
{
    const char *op = upper ? "triu" : "tril";
    if (td_check_tensor(op, "input", x) < 0)
        return NULL;
    if (x->ndim < 2) {
        char buf[160];
        td_error("%s: input must have at least 2 dims, got %s", op, nn_describe(buf, sizeof buf, x));
        return NULL;
    }
    int64_t rows = x->shape[x->ndim - 2], cols = x->shape[x->ndim - 1];
    nn_scope s = {0};
    tide_device *dev = x->device;
    tide_tensor *r = nn_keep(&s, td_arange_on(dev, 0, (double)rows, 1, TIDE_INT64));
    tide_tensor *rc = nn_keep(&s, r ? tide_unsqueeze(r, -1) : NULL);
    tide_tensor *c = nn_keep(&s, td_arange_on(dev, 0, (double)cols, 1, TIDE_INT64));
    tide_tensor *offset = nn_keep(&s, rc && c ? tide_sub(c, rc) : NULL); /* [rows, cols] */
    tide_tensor *k = nn_keep(&s, tide_scalar((double)diagonal, TIDE_INT64));
    tide_tensor *keep = nn_keep(&s, offset && k ? (upper ? tide_ge(offset, k) : tide_le(offset, k))
                                                 : NULL);
    tide_tensor *zero = nn_keep(&s, tide_scalar(0, (tide_dtype)x->dtype));
    tide_tensor *out = nn_keep(&s, keep && zero ? tide_where(keep, x, zero) : NULL);
    return nn_finish(&s, op, out);
}

tide_tensor *tide_triu(const tide_tensor *x, int64_t diagonal)
{
    TD_IN_OP("triu", triangle(x, diagonal, true));
}

tide_tensor *tide_tril(const tide_tensor *x, int64_t diagonal)
{
    TD_IN_OP("tril", triangle(x, diagonal, false));
}
