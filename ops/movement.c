/*
 * movement.c — ops that copy elements into a new layout: contiguous, clone, cat, stack, pad,
 * flip; and the in-place writes copy_ and fill_.
 */
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"

static td_meta meta_like(const tide_tensor *x, tide_dtype dtype)
{
    td_meta m = {x->ndim, {0}, dtype, x->device};
    memcpy(m.shape, x->shape, sizeof(int64_t) * x->ndim);
    return m;
}

static tide_tensor *clone_body(const tide_tensor *x)
{
    if (td_check_tensor("clone", "input", x) < 0)
        return NULL;
    /* A cast to the same dtype is a fresh contiguous copy: one op for the jit to know. */
    td_meta meta = meta_like(x, (tide_dtype)x->dtype);
    tide_tensor *in = (tide_tensor *)x;
    return td_dispatch(TIDE_OP_CAST, &meta, &in, 1, NULL);
}

tide_tensor *tide_clone(const tide_tensor *x)
{
    TD_IN_OP("clone", clone_body(x));
}

static tide_tensor *contiguous_body(const tide_tensor *x)
{
    if (td_check_tensor("contiguous", "input", x) < 0)
        return NULL;
    if (td_is_contiguous(x))
        return tide_retain((tide_tensor *)x);
    /* An expanded view may describe more memory than can exist; say so under this op's name. */
    if (td_check_shape("contiguous", x->ndim, x->shape, (tide_dtype)x->dtype) < 0)
        return NULL;
    return tide_clone(x);
}

tide_tensor *tide_contiguous(const tide_tensor *x)
{
    TD_IN_OP("contiguous", contiguous_body(x));
}

tide_tensor *tide_cat(tide_tensor *const *xs, int n, int dim)
{
    if (!xs || n <= 0) {
        td_error("cat: needs at least one tensor");
        return NULL;
    }
    const tide_tensor *ref = NULL;
    int ref_i = 0;
    for (int i = 0; i < n; i++) {
        if (!xs[i]) {
            td_error("cat: tensor %d of %d is NULL", i, n);
            return NULL;
        }
        /* As PyTorch, 1-D empty tensors are skipped whatever the other shapes are. */
        if (!ref && !(xs[i]->ndim == 1 && xs[i]->shape[0] == 0)) {
            ref = xs[i];
            ref_i = i;
        }
    }
    if (!ref)
        ref = xs[0];
    if (ref->ndim == 0) {
        td_error("cat: cannot concatenate 0-dim tensors; unsqueeze them or use stack");
        return NULL;
    }
    int d = td_normalize_dim("cat", dim, ref->ndim);
    if (d < 0)
        return NULL;
    td_meta meta = meta_like(ref, td_result_type(xs, n));
    meta.shape[d] = 0;
    for (int i = 0; i < n; i++) {
        const tide_tensor *x = xs[i];
        if (x->ndim == 1 && x->shape[0] == 0 && x != ref)
            continue;
        if (x->device != ref->device) {
            td_error("cat: tensor %d is on %s but tensor %d is on %s; move one with to()", i,
                     x->device->name, ref_i, ref->device->name);
            return NULL;
        }
        bool ok = x->ndim == ref->ndim;
        for (int k = 0; ok && k < ref->ndim; k++)
            ok = k == d || x->shape[k] == ref->shape[k];
        if (!ok) {
            char s1[160], s2[160];
            td_error("cat: tensor %d has shape %s, which does not match %s except in dim %d", i,
                     td_shape_str(s1, sizeof s1, x->ndim, x->shape),
                     td_shape_str(s2, sizeof s2, ref->ndim, ref->shape), d);
            return NULL;
        }
        meta.shape[d] += x->shape[d];
    }
    if (td_check_shape("cat", meta.ndim, meta.shape, meta.dtype) < 0)
        return NULL;
    tide_attrs attrs = {.nints = 1, .ints = {d}};
    return td_dispatch(TIDE_OP_CAT, &meta, xs, n, &attrs);
}

static tide_tensor *stack_body(tide_tensor *const *xs, int n, int dim)
{
    if (!xs || n <= 0) {
        td_error("stack: needs at least one tensor");
        return NULL;
    }
    for (int i = 0; i < n; i++) {
        if (!xs[i]) {
            td_error("stack: tensor %d of %d is NULL", i, n);
            return NULL;
        }
        bool same = xs[i]->ndim == xs[0]->ndim &&
                    memcmp(xs[i]->shape, xs[0]->shape, sizeof(int64_t) * xs[0]->ndim) == 0;
        if (!same) {
            char s1[160], s2[160];
            td_error("stack: every tensor must have the same shape; tensor %d has %s, tensor 0 %s",
                     i, td_shape_str(s1, sizeof s1, xs[i]->ndim, xs[i]->shape),
                     td_shape_str(s2, sizeof s2, xs[0]->ndim, xs[0]->shape));
            return NULL;
        }
    }
    /* The new dim is checked here so the error names stack, not the unsqueeze it is made of. */
    if (xs[0]->ndim >= TIDE_MAX_DIMS) {
        td_error("stack: the inputs already have %d dims, the most a tensor can have",
                 TIDE_MAX_DIMS);
        return NULL;
    }
    if (td_normalize_dim("stack", dim, xs[0]->ndim + 1) < 0)
        return NULL;
    tide_tensor *stack_parts[64], **parts = stack_parts;
    if (n > 64 && !(parts = td_malloc(sizeof(tide_tensor *) * (size_t)n))) {
        td_error("stack: out of memory");
        return NULL;
    }
    int made = 0;
    for (; made < n; made++)
        if (!(parts[made] = tide_unsqueeze(xs[made], dim)))
            break;
    tide_tensor *out = NULL;
    if (made == n) {
        int d = dim < 0 ? dim + xs[0]->ndim + 1 : dim;
        out = tide_cat(parts, n, d);
    } else {
        /* the unsqueeze error names stack's dim problem well enough; keep it */
    }
    for (int i = 0; i < made; i++)
        tide_release(parts[i]);
    if (parts != stack_parts)
        free(parts);
    return out;
}

tide_tensor *tide_stack(tide_tensor *const *xs, int n, int dim)
{
    TD_IN_OP("stack", stack_body(xs, n, dim));
}

tide_tensor *tide_pad(const tide_tensor *x, const int64_t *pads, int npads, double value)
{
    if (td_check_tensor("pad", "input", x) < 0)
        return NULL;
    if (npads < 0 || npads % 2 || npads / 2 > x->ndim || (npads && !pads)) {
        td_error("pad: %d pad values for a tensor of %d dims; expected an even count of at "
                 "most %d",
                 npads, x->ndim, 2 * x->ndim);
        return NULL;
    }
    td_meta meta = meta_like(x, (tide_dtype)x->dtype);
    tide_attrs attrs = {.nints = 2 * x->ndim, .values = {value}};
    for (int i = 0; i < npads / 2; i++) {
        int d = x->ndim - 1 - i; /* pairs start from the last dim, as torch's F.pad */
        attrs.ints[2 * d] = pads[2 * i];
        attrs.ints[2 * d + 1] = pads[2 * i + 1];
        meta.shape[d] = x->shape[d] + pads[2 * i] + pads[2 * i + 1];
        if (meta.shape[d] < 0) {
            char s[160];
            td_error("pad: padding (%lld, %lld) of dim %d makes its size %lld negative (input "
                     "shape %s)",
                     (long long)pads[2 * i], (long long)pads[2 * i + 1], d,
                     (long long)meta.shape[d], td_shape_str(s, sizeof s, x->ndim, x->shape));
            return NULL;
        }
    }
    if (td_check_shape("pad", meta.ndim, meta.shape, meta.dtype) < 0)
        return NULL;
    tide_tensor *in = (tide_tensor *)x;
    return td_dispatch(TIDE_OP_PAD, &meta, &in, 1, &attrs);
}

tide_tensor *tide_flip(const tide_tensor *x, const int *dims, int ndims)
{
    if (td_check_tensor("flip", "input", x) < 0)
        return NULL;
    if (ndims > 0 && !dims) {
        td_error("flip: dims is NULL");
        return NULL;
    }
    int mask = ndims == 0 ? 0 : td_dims_mask("flip", x, dims, ndims);
    if (mask < 0)
        return NULL;
    tide_attrs attrs = {0};
    for (int d = 0; d < x->ndim; d++)
        if (mask & (1 << d))
            attrs.ints[attrs.nints++] = d;
    td_meta meta = meta_like(x, (tide_dtype)x->dtype);
    tide_tensor *in = (tide_tensor *)x;
    return td_dispatch(TIDE_OP_FLIP, &meta, &in, 1, &attrs);
}

/* An expanded dim (stride 0, size > 1) would write one element many times. */
static bool overlapping(const tide_tensor *t)
{
    for (int d = 0; d < t->ndim; d++)
        if (t->strides[d] == 0 && t->shape[d] > 1)
            return true;
    return false;
}

int tide_copy_(tide_tensor *dst, const tide_tensor *src)
{
    if (td_check_tensor("copy_", "destination", dst) < 0 ||
        td_check_tensor("copy_", "source", src) < 0)
        return -1;
    char s1[160], s2[160];
    int64_t shape[TIDE_MAX_DIMS];
    int nd;
    if (td_broadcast_shape(dst->ndim, dst->shape, src->ndim, src->shape, &nd, shape) < 0 ||
        nd != dst->ndim || memcmp(shape, dst->shape, sizeof(int64_t) * nd) != 0)
        return td_error("copy_: the source of shape %s cannot be broadcast to the destination's "
                        "shape %s",
                        td_shape_str(s1, sizeof s1, src->ndim, src->shape),
                        td_shape_str(s2, sizeof s2, dst->ndim, dst->shape));
    if (overlapping(dst))
        return td_error("copy_: the destination of shape %s is an expanded view whose elements "
                        "share memory; clone it first",
                        td_shape_str(s1, sizeof s1, dst->ndim, dst->shape));
    /* A source that shares memory with the destination is read in full before any write. */
    tide_tensor *from = tide_shares_storage(dst, src) ? tide_clone(src)
                        : src->device != dst->device  ? td_to_device(src, dst->device)
                                                      : tide_retain((tide_tensor *)src);
    if (!from)
        return -1;
    int rc = td_dispatch_inplace(TIDE_OP_COPY, dst, &from, 1, NULL);
    tide_release(from);
    return rc;
}

int tide_fill_(tide_tensor *dst, double value)
{
    if (td_check_tensor("fill_", "destination", dst) < 0)
        return -1;
    if (overlapping(dst)) {
        char s[160];
        return td_error("fill_: the destination of shape %s is an expanded view whose elements "
                        "share memory; clone it first",
                        td_shape_str(s, sizeof s, dst->ndim, dst->shape));
    }
    tide_attrs attrs = {.values = {value}};
    return td_dispatch_inplace(TIDE_OP_FILL, dst, NULL, 0, &attrs);
}
