/*
 * reduce.c — sum, prod, max, min over any set of dims; argmax/argmin along one dim; mean as a
 * composite (sum, then a division), so it needs no kernel of its own.
 */
#include "dispatch.h"

/* The kernels produce the keepdim shape; dropping the reduced dims is a view. */
static tide_tensor *drop_reduced_dims(tide_tensor *full, int mask)
{
    int64_t shape[TIDE_MAX_DIMS], strides[TIDE_MAX_DIMS];
    int nd = 0;
    for (int d = 0; d < full->ndim; d++) {
        if (mask & (1 << d))
            continue;
        shape[nd] = full->shape[d];
        strides[nd] = full->strides[d];
        nd++;
    }
    tide_attrs attrs = {.nints = nd};
    for (int d = 0; d < nd; d++)
        attrs.ints[d] = shape[d];
    tide_tensor *out = td_dispatch_view(TIDE_OP_RESHAPE, full, nd, shape, strides, full->offset,
                                        &attrs);
    tide_release(full);
    return out;
}

static tide_tensor *reduce_body(tide_op op, const tide_tensor *x, const int *dims, int ndims,
                                bool keepdim)
{
    const char *name = tide_op_name(op);
    if (td_check_tensor(name, "input", x) < 0)
        return NULL;
    int mask = td_dims_mask(name, x, dims, ndims);
    if (mask < 0)
        return NULL;
    tide_dtype dt = (tide_dtype)x->dtype;
    bool integral = !tide_dtype_is_floating(dt);
    td_meta meta = {x->ndim, {0}, dt, x->device};
    if ((op == TIDE_OP_SUM || op == TIDE_OP_PROD) && integral)
        meta.dtype = TIDE_INT64;
    tide_attrs attrs = {.keepdim = keepdim};
    for (int d = 0; d < x->ndim; d++) {
        bool reduced = mask & (1 << d);
        if (reduced && x->shape[d] == 0 && (op == TIDE_OP_MAX || op == TIDE_OP_MIN)) {
            char s[160];
            td_error("%s: cannot reduce over dim %d of size 0 in shape %s (the result has no "
                     "identity)",
                     name, d, td_shape_str(s, sizeof s, x->ndim, x->shape));
            return NULL;
        }
        meta.shape[d] = reduced ? 1 : x->shape[d];
        if (reduced)
            attrs.ints[attrs.nints++] = d;
    }
    tide_tensor *in = (tide_tensor *)x;
    tide_tensor *full = td_dispatch(op, &meta, &in, 1, &attrs);
    if (!full || keepdim || mask == 0)
        return full;
    return drop_reduced_dims(full, mask);
}

/* The view dropping the reduced dims is named after the reduction (grad_fn=<sum>). */
static tide_tensor *reduce(tide_op op, const tide_tensor *x, const int *dims, int ndims,
                           bool keepdim)
{
    TD_IN_OP(tide_op_name(op), reduce_body(op, x, dims, ndims, keepdim));
}

tide_tensor *tide_sum(const tide_tensor *x, const int *dims, int ndims, bool keepdim)
{
    return reduce(TIDE_OP_SUM, x, dims, ndims, keepdim);
}
tide_tensor *tide_prod(const tide_tensor *x, const int *dims, int ndims, bool keepdim)
{
    return reduce(TIDE_OP_PROD, x, dims, ndims, keepdim);
}
tide_tensor *tide_max(const tide_tensor *x, const int *dims, int ndims, bool keepdim)
{
    return reduce(TIDE_OP_MAX, x, dims, ndims, keepdim);
}
tide_tensor *tide_min(const tide_tensor *x, const int *dims, int ndims, bool keepdim)
{
    return reduce(TIDE_OP_MIN, x, dims, ndims, keepdim);
}

static tide_tensor *mean_body(const tide_tensor *x, const int *dims, int ndims, bool keepdim)
{
    if (td_check_tensor("mean", "input", x) < 0)
        return NULL;
    if (!tide_dtype_is_floating((tide_dtype)x->dtype)) {
        td_error("mean: needs a floating-point input, got %s; cast it first",
                 tide_dtype_name((tide_dtype)x->dtype));
        return NULL;
    }
    int mask = td_dims_mask("mean", x, dims, ndims);
    if (mask < 0)
        return NULL;
    int64_t count = 1;
    for (int d = 0; d < x->ndim; d++)
        if (mask & (1 << d))
            count *= x->shape[d];
    tide_tensor *sum = tide_sum(x, dims, ndims, keepdim);
    tide_tensor *n = sum ? tide_number((double)count) : NULL;
    tide_tensor *out = n ? tide_div(sum, n) : NULL;
    tide_release(n);
    tide_release(sum);
    return out;
}

tide_tensor *tide_mean(const tide_tensor *x, const int *dims, int ndims, bool keepdim)
{
    TD_IN_OP("mean", mean_body(x, dims, ndims, keepdim));
}

static tide_tensor *argreduce_body(tide_op op, const tide_tensor *x, int dim, bool keepdim)
{
    const char *name = tide_op_name(op);
    if (td_check_tensor(name, "input", x) < 0)
        return NULL;
    if (x->dtype == TIDE_BOOL) {
        td_error("%s: not supported for bool tensors; cast to uint8 first", name);
        return NULL;
    }
    int d = 0;
    if (dim != TIDE_ALL_DIMS && (d = td_normalize_dim(name, dim, x->ndim)) < 0)
        return NULL;
    /* There is no position of the maximum of nothing: only reducing an empty dim (or all of an
     * empty tensor) is an error; other empty shapes give an empty result, as PyTorch. */
    if (td_numel(x->ndim, x->shape) == 0 && (dim == TIDE_ALL_DIMS || x->shape[d] == 0)) {
        char s[160];
        td_error("%s: cannot reduce an empty dim of the input of shape %s", name,
                 td_shape_str(s, sizeof s, x->ndim, x->shape));
        return NULL;
    }
    if (dim == TIDE_ALL_DIMS) {
        /* Over the flattened tensor; with keepdim every dim stays as size 1, as PyTorch. */
        int64_t n = td_numel(x->ndim, x->shape);
        tide_tensor *flat = tide_reshape(x, 1, &n);
        tide_tensor *r = flat ? argreduce_body(op, flat, 0, false) : NULL;
        tide_release(flat);
        if (!r || !keepdim)
            return r;
        int64_t ones[TIDE_MAX_DIMS];
        for (int i = 0; i < x->ndim; i++)
            ones[i] = 1;
        tide_tensor *shaped = tide_reshape(r, x->ndim, ones);
        tide_release(r);
        return shaped;
    }
    if (x->ndim == 0) /* the position of the only element */
        return td_full_on(x->device, name, 0, NULL, 0, TIDE_INT64);
    td_meta meta = {x->ndim, {0}, TIDE_INT64, x->device};
    for (int i = 0; i < x->ndim; i++)
        meta.shape[i] = i == d ? 1 : x->shape[i];
    tide_attrs attrs = {.nints = 1, .ints = {d}, .keepdim = keepdim};
    tide_tensor *in = (tide_tensor *)x;
    tide_tensor *full = td_dispatch(op, &meta, &in, 1, &attrs);
    if (!full || keepdim)
        return full;
    return drop_reduced_dims(full, 1 << d);
}

static tide_tensor *argreduce(tide_op op, const tide_tensor *x, int dim, bool keepdim)
{
    TD_IN_OP(tide_op_name(op), argreduce_body(op, x, dim, keepdim));
}

tide_tensor *tide_argmax(const tide_tensor *x, int dim, bool keepdim)
{
    return argreduce(TIDE_OP_ARGMAX, x, dim, keepdim);
}
tide_tensor *tide_argmin(const tide_tensor *x, int dim, bool keepdim)
{
    return argreduce(TIDE_OP_ARGMIN, x, dim, keepdim);
}
