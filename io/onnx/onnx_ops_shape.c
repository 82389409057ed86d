/*
 * onnx_ops_shape.c — ONNX's shape and movement ops: Shape, Size, Reshape, Flatten, Squeeze,
 * Unsqueeze, Transpose, Concat, Gather. Shapes, axes and starts given as inputs are read on the
 * host (constants while tracing: onnx_run.c folds the nodes that make them).
 */
#include <string.h>

#include "onnx_internal.h"

static const char *device_of(const onnx_ctx *c)
{
    return c->m->device ? c->m->device : tide_get_default_device();
}

/* An int64 vector on the model's device. */
static tide_tensor *int64_vector(const onnx_ctx *c, const int64_t *v, int64_t n)
{
    return tide_from_data_on(device_of(c), v, 1, &n, TIDE_INT64);
}

/* Shape (opset 15 on: start and end, clamped like Python slices). */
static int run_shape(onnx_ctx *c)
{
    int rank = tide_ndim(c->in[0]);
    int64_t start = onnx_attr_int(c->node, "start", 0), end = onnx_attr_int(c->node, "end", rank);
    if (start < 0)
        start += rank;
    if (end < 0)
        end += rank;
    start = start < 0 ? 0 : start > rank ? rank : start;
    end = end < start ? start : end > rank ? rank : end;
    return onnx_set(c, int64_vector(c, tide_shape(c->in[0]) + start, end - start));
}

static int run_size(onnx_ctx *c)
{
    int64_t n = tide_numel(c->in[0]);
    return onnx_set(c, tide_from_data_on(device_of(c), &n, 0, NULL, TIDE_INT64));
}

/* Reshape: 0 copies the input's dim (unless allowzero), one -1 is inferred. */
static int run_reshape(onnx_ctx *c)
{
    int64_t shape[TIDE_MAX_DIMS];
    int n;
    if (onnx_input_ints(c, 1, shape, TIDE_MAX_DIMS, &n) < 0)
        return -1;
    bool allowzero = onnx_attr_int(c->node, "allowzero", 0) != 0;
    int rank = tide_ndim(c->in[0]);
    for (int d = 0; d < n && !allowzero; d++)
        if (shape[d] == 0) {
            if (d >= rank)
                return onnx_error(c, "shape entry %d is 0 (copy the input's dim) but the input "
                                  "has %d dims", d, rank);
            shape[d] = tide_shape(c->in[0])[d];
        }
    return onnx_set(c, tide_reshape(c->in[0], n, shape));
}

static int run_flatten(onnx_ctx *c)
{
    int rank = tide_ndim(c->in[0]);
    int64_t axis = onnx_attr_int(c->node, "axis", 1);
    if (axis < 0)
        axis += rank; /* in [-rank, rank] */
    if (axis < 0 || axis > rank)
        return onnx_error(c, "axis %lld is out of range for a tensor of %d dims",
                          (long long)onnx_attr_int(c->node, "axis", 1), rank);
    int64_t outer = 1, inner = 1;
    for (int d = 0; d < rank; d++)
        *(d < axis ? &outer : &inner) *= tide_shape(c->in[0])[d];
    int64_t shape[2] = {outer, inner};
    return onnx_set(c, tide_reshape(c->in[0], 2, shape));
}

/* The axes of Squeeze/Unsqueeze: an attribute before opset 13, an input from 13. */
static int read_axes(onnx_ctx *c, int64_t *axes, int *n)
{
    if (c->nin > 1 && c->in[1])
        return onnx_input_ints(c, 1, axes, TIDE_MAX_DIMS, n);
    int count;
    const int64_t *a = onnx_attr_ints(c->node, "axes", &count);
    if (count > TIDE_MAX_DIMS)
        return onnx_error(c, "%d axes; at most %d", count, TIDE_MAX_DIMS);
    for (int i = 0; i < count; i++)
        axes[i] = a[i];
    *n = count;
    return 0;
}

static int run_squeeze(onnx_ctx *c)
{
    int64_t axes[TIDE_MAX_DIMS];
    int n, rank = tide_ndim(c->in[0]);
    if (read_axes(c, axes, &n) < 0)
        return -1;
    if (n == 0)
        return onnx_set(c, tide_squeeze_all(c->in[0]));
    bool drop[TIDE_MAX_DIMS] = {false};
    for (int i = 0; i < n; i++) {
        int a;
        if (onnx_axis(c, axes[i], rank, &a) < 0)
            return -1;
        if (tide_shape(c->in[0])[a] != 1)
            return onnx_error(c, "axis %d has size %lld; only a size-1 dim squeezes", a,
                              (long long)tide_shape(c->in[0])[a]);
        drop[a] = true;
    }
    int64_t shape[TIDE_MAX_DIMS];
    int k = 0;
    for (int d = 0; d < rank; d++)
        if (!drop[d])
            shape[k++] = tide_shape(c->in[0])[d];
    return onnx_set(c, tide_reshape(c->in[0], k, shape));
}

static int run_unsqueeze(onnx_ctx *c)
{
    int64_t axes[TIDE_MAX_DIMS];
    int n, rank = tide_ndim(c->in[0]);
    if (read_axes(c, axes, &n) < 0)
        return -1;
    int out_rank = rank + n;
    if (out_rank > TIDE_MAX_DIMS)
        return onnx_unsupported(c, "the result would have %d dims; tide holds at most %d",
                                out_rank, TIDE_MAX_DIMS);
    bool added[TIDE_MAX_DIMS] = {false};
    for (int i = 0; i < n; i++) {
        int a;
        if (onnx_axis(c, axes[i], out_rank, &a) < 0)
            return -1;
        if (added[a])
            return onnx_error(c, "axis %d is given twice", a);
        added[a] = true;
    }
    int64_t shape[TIDE_MAX_DIMS];
    for (int d = 0, k = 0; d < out_rank; d++)
        shape[d] = added[d] ? 1 : tide_shape(c->in[0])[k++];
    return onnx_set(c, tide_reshape(c->in[0], out_rank, shape));
}

static int run_transpose(onnx_ctx *c)
{
    int rank = tide_ndim(c->in[0]), count, perm[TIDE_MAX_DIMS];
    const int64_t *p = onnx_attr_ints(c->node, "perm", &count);
    if (p && count != rank)
        return onnx_error(c, "perm has %d entries for a tensor of %d dims", count, rank);
    for (int d = 0; d < rank; d++) {
        perm[d] = p ? (int)p[d] : rank - 1 - d;
        if (p && (p[d] < 0 || p[d] >= rank))
            return onnx_error(c, "perm entry %d is %lld; rank %d", d, (long long)p[d], rank);
    }
    tide_tensor *v = tide_permute(c->in[0], perm);
    return onnx_set(c, v);
}

static int run_concat(onnx_ctx *c)
{
    int axis;
    if (onnx_axis(c, onnx_attr_int(c->node, "axis", 0), tide_ndim(c->in[0]), &axis) < 0)
        return -1;
    for (int k = 0; k < c->nin; k++)
        if (!c->in[k])
            return onnx_error(c, "input %d is missing", k);
    return onnx_set(c, tide_cat(c->in, c->nin, axis));
}

/* Gather: indices along axis (negative ones count from the end), result shape
 * data[:axis] + indices + data[axis+1:]. */
static int run_gather(onnx_ctx *c)
{
    const tide_tensor *x = c->in[0], *idx = c->in[1];
    int rank = tide_ndim(x), axis;
    if (onnx_axis(c, onnx_attr_int(c->node, "axis", 0), rank, &axis) < 0)
        return -1;
    int64_t dim = tide_shape(x)[axis];
    if (rank - 1 + tide_ndim(idx) > TIDE_MAX_DIMS)
        return onnx_unsupported(c, "the result would have %d dims; tide holds at most %d",
                                rank - 1 + tide_ndim(idx), TIDE_MAX_DIMS);
    /* negative indices: idx + dim where idx < 0 */
    tide_tensor *wide = tide_cast(idx, TIDE_INT64);
    tide_tensor *zero = wide ? tide_full_on(device_of(c), 0, NULL, 0, TIDE_INT64) : NULL;
    tide_tensor *is_neg = zero ? tide_lt(wide, zero) : NULL;
    tide_tensor *size = is_neg ? tide_from_data_on(device_of(c), &dim, 0, NULL, TIDE_INT64) : NULL;
    tide_tensor *shifted = size ? tide_add(wide, size) : NULL; /* stays int64 */
    tide_tensor *fixed = shifted ? tide_where(is_neg, shifted, wide) : NULL;
    int64_t flat_n = tide_numel(idx);
    tide_tensor *flat = fixed ? tide_reshape(fixed, 1, &flat_n) : NULL;
    tide_tensor *sel = flat ? tide_index_select(x, axis, flat) : NULL;
    tide_tensor *out = NULL;
    if (sel) {
        int64_t shape[TIDE_MAX_DIMS * 2];
        int k = 0, irank = tide_ndim(idx);
        for (int d = 0; d < axis; d++)
            shape[k++] = tide_shape(x)[d];
        for (int d = 0; d < irank; d++)
            shape[k++] = tide_shape(idx)[d];
        for (int d = axis + 1; d < rank; d++)
            shape[k++] = tide_shape(x)[d];
        out = tide_reshape(sel, k, shape);
    }
    tide_release(wide);
    tide_release(zero);
    tide_release(size);
    tide_release(is_neg);
    tide_release(shifted);
    tide_release(fixed);
    tide_release(flat);
    tide_release(sel);
    return onnx_set(c, out);
}

const onnx_op onnx_ops_shape[] = {
    {"Shape", 1, 0, 1, 1, NULL, run_shape, ONNX_SHAPE_ONLY},
    {"Size", 1, 0, 1, 1, NULL, run_size, ONNX_SHAPE_ONLY},
    {"Reshape", 5, 0, 2, 2, NULL, run_reshape, false},
    {"Flatten", 1, 0, 1, 1, NULL, run_flatten, false},
    {"Squeeze", 1, 0, 1, 2, NULL, run_squeeze, false},
    {"Unsqueeze", 1, 0, 1, 2, NULL, run_unsqueeze, false},
    {"Transpose", 1, 0, 1, 1, NULL, run_transpose, false},
    {"Concat", 4, 0, 1, -1, NULL, run_concat, false},
    {"Gather", 1, 0, 2, 2, NULL, run_gather, false},
    {0},
};
