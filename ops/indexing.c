/*
 * indexing.c — ops driven by index tensors: the primitives gather, scatter_add and index_select
 * (argument and shape checks here; the kernels check every index value, since reading them here
 * would pull device data back to the host), and the composites embedding (index_select of rows),
 * one_hot (eq against arange) and masked_fill (where with a scalar).
 *
 * Shapes follow PyTorch. Indices are 0-based int64 or int32; a negative index is an error, as in
 * torch.gather (nothing counts from the end).
 */
#include <stdio.h>
#include <string.h>

#include "nn_common.h"

static int check_index_tensor(const char *op, const char *arg, const tide_tensor *index)
{
    if (td_check_tensor(op, arg, index) < 0)
        return -1;
    if (index->dtype != TIDE_INT64 && index->dtype != TIDE_INT32)
        return td_error("%s: %s must be int64 or int32, got %s", op, arg,
                        tide_dtype_name((tide_dtype)index->dtype));
    return 0;
}

static int check_same_device(const char *op, const tide_tensor *x, const tide_tensor *other,
                             const char *arg)
{
    if (x->device != other->device)
        return td_error("%s: the input is on %s but %s is on %s", op, x->device->name, arg,
                        other->device->name);
    return 0;
}

/* "[2, 3]" of t, in one of three rotating buffers so one message can show several shapes. */
static const char *shape_of(const tide_tensor *t)
{
    static _Thread_local char bufs[3][160];
    static _Thread_local int next;
    char *b = bufs[next++ % 3];
    return td_shape_str(b, sizeof bufs[0], t->ndim, t->shape);
}

/* gather and scatter_add: index has the input's ndim and is no larger outside dim. */
static int check_index_fits(const char *op, const tide_tensor *x, const tide_tensor *index,
                            int dim)
{
    if (index->ndim != x->ndim)
        return td_error("%s: index has %d dims (shape %s) but the input has %d (shape %s); "
                        "they must have the same number",
                        op, index->ndim, shape_of(index), x->ndim, shape_of(x));
    for (int d = 0; d < x->ndim; d++)
        if (d != dim && index->shape[d] > x->shape[d])
            return td_error("%s: index shape %s is larger than input shape %s at dim %d "
                            "(only dim %d may be larger)",
                            op, shape_of(index), shape_of(x), d, dim);
    return 0;
}

tide_tensor *tide_gather(const tide_tensor *x, int dim, const tide_tensor *index)
{
    const char *op = "gather";
    if (td_check_tensor(op, "input", x) < 0 || check_index_tensor(op, "index", index) < 0 ||
        check_same_device(op, x, index, "index") < 0)
        return NULL;
    int d = td_normalize_dim(op, dim, x->ndim);
    if (d < 0 || check_index_fits(op, x, index, d) < 0)
        return NULL;
    td_meta meta = {index->ndim, {0}, (tide_dtype)x->dtype, x->device};
    memcpy(meta.shape, index->shape, sizeof meta.shape);
    tide_attrs attrs = {.nints = 1, .ints = {d}};
    tide_tensor *in[2] = {(tide_tensor *)x, (tide_tensor *)index};
    return td_dispatch(TIDE_OP_GATHER, &meta, in, 2, &attrs);
}

tide_tensor *tide_scatter_add(const tide_tensor *x, int dim, const tide_tensor *index,
                              const tide_tensor *src)
{
    const char *op = "scatter_add";
    if (td_check_tensor(op, "input", x) < 0 || check_index_tensor(op, "index", index) < 0 ||
        td_check_tensor(op, "src", src) < 0 || check_same_device(op, x, index, "index") < 0 ||
        check_same_device(op, x, src, "src") < 0)
        return NULL;
    int d = td_normalize_dim(op, dim, x->ndim);
    if (d < 0 || check_index_fits(op, x, index, d) < 0)
        return NULL;
    if (src->dtype != x->dtype) {
        td_error("%s: src is %s but the input is %s; they must have the same dtype", op,
                 tide_dtype_name((tide_dtype)src->dtype), tide_dtype_name((tide_dtype)x->dtype));
        return NULL;
    }
    if (src->ndim != x->ndim) {
        td_error("%s: src has %d dims (shape %s) but the input has %d (shape %s)", op, src->ndim,
                 shape_of(src), x->ndim, shape_of(x));
        return NULL;
    }
    for (int k = 0; k < x->ndim; k++) {
        if (index->shape[k] > src->shape[k]) {
            td_error("%s: index shape %s is larger than src shape %s at dim %d", op,
                     shape_of(index), shape_of(src), k);
            return NULL;
        }
    }
    /* The kernel never runs for an empty result, so an index that cannot fit is caught here:
     * a non-empty index on an empty input means dim has size 0. */
    if (td_numel(x->ndim, x->shape) == 0 && td_numel(index->ndim, index->shape) > 0) {
        td_error("%s: dim %d of the input has size 0, so no index is in bounds (index shape %s)",
                 op, d, shape_of(index));
        return NULL;
    }
    td_meta meta = {x->ndim, {0}, (tide_dtype)x->dtype, x->device};
    memcpy(meta.shape, x->shape, sizeof meta.shape);
    tide_attrs attrs = {.nints = 1, .ints = {d}};
    tide_tensor *in[3] = {(tide_tensor *)x, (tide_tensor *)index, (tide_tensor *)src};
    return td_dispatch(TIDE_OP_SCATTER_ADD, &meta, in, 3, &attrs);
}

tide_tensor *tide_index_select(const tide_tensor *x, int dim, const tide_tensor *index)
{
    const char *op = "index_select";
    if (td_check_tensor(op, "input", x) < 0 || check_index_tensor(op, "index", index) < 0 ||
        check_same_device(op, x, index, "index") < 0)
        return NULL;
    int d = td_normalize_dim(op, dim, x->ndim);
    if (d < 0)
        return NULL;
    if (index->ndim > 1) {
        td_error("%s: index must be 1-D (or 0-dim), got shape %s", op, shape_of(index));
        return NULL;
    }
    int64_t k = td_numel(index->ndim, index->shape);
    td_meta meta = {x->ndim, {0}, (tide_dtype)x->dtype, x->device};
    memcpy(meta.shape, x->shape, sizeof meta.shape);
    if (x->ndim == 0) {
        if (k != 1) {
            td_error("%s: a 0-dim input takes exactly one index, got %lld", op, (long long)k);
            return NULL;
        }
    } else {
        meta.shape[d] = k;
    }
    tide_attrs attrs = {.nints = 1, .ints = {d}};
    tide_tensor *in[2] = {(tide_tensor *)x, (tide_tensor *)index};
    return td_dispatch(TIDE_OP_INDEX_SELECT, &meta, in, 2, &attrs);
}

static tide_tensor *embedding_body(const tide_tensor *weight, const tide_tensor *indices)
{
    const char *op = "embedding";
    if (td_check_tensor(op, "weight", weight) < 0 ||
        check_index_tensor(op, "indices", indices) < 0)
        return NULL;
    if (weight->ndim != 2) {
        td_error("%s: weight must be 2-D [num_embeddings, dim], got shape %s", op,
                 shape_of(weight));
        return NULL;
    }
    if (!tide_dtype_is_floating((tide_dtype)weight->dtype)) {
        td_error("%s: weight must be floating (float32, float64, float16, bfloat16), got %s", op,
                 tide_dtype_name((tide_dtype)weight->dtype));
        return NULL;
    }
    if (indices->ndim >= TIDE_MAX_DIMS) {
        td_error("%s: indices have %d dims; the result would have %d, more than %d", op,
                 indices->ndim, indices->ndim + 1, TIDE_MAX_DIMS);
        return NULL;
    }
    int64_t shape[TIDE_MAX_DIMS];
    memcpy(shape, indices->shape, sizeof(int64_t) * indices->ndim);
    shape[indices->ndim] = weight->shape[1];
    int64_t n = td_numel(indices->ndim, indices->shape);
    nn_scope s = {0};
    tide_tensor *flat = nn_keep(&s, tide_reshape(indices, 1, &n));
    tide_tensor *rows = nn_keep(&s, tide_index_select(weight, 0, flat));
    tide_tensor *out = nn_keep(&s, tide_reshape(rows, indices->ndim + 1, shape));
    return nn_finish(&s, op, out);
}

tide_tensor *tide_embedding(const tide_tensor *weight, const tide_tensor *indices)
{
    TD_IN_OP("embedding", embedding_body(weight, indices));
}

/* The smallest or largest index, read back to the host. 0 or -1 with the error set. */
static int index_extreme(const tide_tensor *indices, bool largest, int64_t *v)
{
    tide_tensor *e = largest ? tide_max(indices, NULL, 0, false) : tide_min(indices, NULL, 0, false);
    tide_tensor *e64 = e ? tide_cast(e, TIDE_INT64) : NULL;
    /* Through the buffer, not tide_item: an int64 beyond 2^53 must not round. */
    int rc = e64 ? tide_to_buffer(e64, v, sizeof *v) : -1;
    tide_release(e64);
    tide_release(e);
    if (rc < 0)
        nn_prefix_error("one_hot", tide_last_error());
    return rc;
}

static tide_tensor *one_hot_body(const tide_tensor *indices, int64_t num_classes)
{
    const char *op = "one_hot";
    if (check_index_tensor(op, "indices", indices) < 0)
        return NULL;
    if (indices->ndim >= TIDE_MAX_DIMS) {
        td_error("%s: indices have %d dims; the result would have %d, more than %d", op,
                 indices->ndim, indices->ndim + 1, TIDE_MAX_DIMS);
        return NULL;
    }
    bool empty = td_numel(indices->ndim, indices->shape) == 0;
    if (num_classes < 0 && empty) {
        td_error("%s: cannot infer the number of classes from an empty index tensor; pass "
                 "num_classes",
                 op);
        return NULL;
    }
    /* Reading the extremes back is a sync point; PyTorch's one_hot checks the same way. */
    int64_t lo = 0, hi = -1;
    if (!empty && (index_extreme(indices, false, &lo) < 0 || index_extreme(indices, true, &hi) < 0))
        return NULL;
    if (lo < 0) {
        td_error("%s: index %lld is negative; class indices must be non-negative", op,
                 (long long)lo);
        return NULL;
    }
    if (num_classes < 0) {
        if (hi == INT64_MAX) {
            td_error("%s: index %lld gives too large a number of classes", op, (long long)hi);
            return NULL;
        }
        num_classes = hi + 1;
    } else if (hi >= num_classes) {
        td_error("%s: index %lld is out of bounds for %lld classes", op, (long long)hi,
                 (long long)num_classes);
        return NULL;
    }
    int64_t shape[TIDE_MAX_DIMS];
    memcpy(shape, indices->shape, sizeof(int64_t) * indices->ndim);
    shape[indices->ndim] = num_classes;
    if (td_check_shape(op, indices->ndim + 1, shape, TIDE_INT64) < 0)
        return NULL;
    nn_scope s = {0};
    tide_tensor *classes =
        nn_keep(&s, td_arange_on(indices->device, 0, (double)num_classes, 1, TIDE_INT64));
    tide_tensor *col = nn_keep(&s, tide_unsqueeze(indices, -1));
    tide_tensor *hit = nn_keep(&s, classes && col ? tide_eq(col, classes) : NULL);
    tide_tensor *out = nn_keep(&s, hit ? tide_cast(hit, TIDE_INT64) : NULL);
    return nn_finish(&s, op, out);
}

tide_tensor *tide_one_hot(const tide_tensor *indices, int64_t num_classes)
{
    TD_IN_OP("one_hot", one_hot_body(indices, num_classes));
}

static tide_tensor *masked_fill_body(const tide_tensor *x, const tide_tensor *mask, double value)
{
    const char *op = "masked_fill";
    if (td_check_tensor(op, "input", x) < 0 || td_check_tensor(op, "mask", mask) < 0)
        return NULL;
    if (mask->dtype != TIDE_BOOL) {
        td_error("%s: mask must be bool, got %s", op, tide_dtype_name((tide_dtype)mask->dtype));
        return NULL;
    }
    int nd;
    int64_t shape[TIDE_MAX_DIMS];
    bool fits = td_broadcast_shape(x->ndim, x->shape, mask->ndim, mask->shape, &nd, shape) == 0 &&
                nd == x->ndim && memcmp(shape, x->shape, sizeof(int64_t) * (size_t)nd) == 0;
    if (!fits) {
        td_error("%s: mask shape %s does not broadcast to input shape %s", op, shape_of(mask),
                 shape_of(x));
        return NULL;
    }
    nn_scope s = {0};
    tide_tensor *v = nn_keep(&s, tide_scalar(value, (tide_dtype)x->dtype));
    tide_tensor *out = nn_keep(&s, v ? tide_where(mask, v, x) : NULL);
    return nn_finish(&s, op, out);
}

tide_tensor *tide_masked_fill(const tide_tensor *x, const tide_tensor *mask, double value)
{
    TD_IN_OP("masked_fill", masked_fill_body(x, mask, value));
}
