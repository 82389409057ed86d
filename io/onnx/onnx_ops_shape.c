/*
 * onnx_ops_shape.c — ONNX's shape and movement ops: Shape, Size, Reshape, Flatten, Squeeze,
 * Unsqueeze, Transpose, Concat, Gather, Expand, Tile, DepthToSpace, SpaceToDepth, and the table
 * entries of Slice, Split and Pad (onnx_ops_slice.c). Shapes, axes and starts given as inputs
 * are read on the host (constants while tracing: onnx_run.c folds the nodes that make them).
 */
#include <stdio.h>
#include <string.h>

#include "onnx_ops_move.h"

#define device_of onnx_device_of

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

/* Reshape: 0 copies the input's dim (unless allowzero), one -1 is inferred. The shape is an
 * input from opset 5, the attribute `shape` before. */
static int run_reshape(onnx_ctx *c)
{
    int64_t shape[TIDE_MAX_DIMS];
    int n;
    if (c->m->opset < 5) {
        const int64_t *a = onnx_attr_ints(c->node, "shape", &n);
        if (n > TIDE_MAX_DIMS)
            return onnx_unsupported(c, "shape has %d dims; tide holds at most %d", n,
                                    TIDE_MAX_DIMS);
        memcpy(shape, a, sizeof *shape * (size_t)n);
    } else if (onnx_input_ints(c, 1, shape, TIDE_MAX_DIMS, &n) < 0)
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
        if (onnx_dim_axis(c, axes[i], rank, &a) < 0)
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

/* Concat: axis defaults to 1 before opset 4, and is required after. */
static int run_concat(onnx_ctx *c)
{
    int axis;
    const int64_t dflt = c->m->opset < 4 ? 1 : 0;
    for (int k = 0; k < c->nin; k++)
        if (!c->in[k])
            return onnx_error(c, "input %d is missing", k);
    if (onnx_dim_axis(c, onnx_attr_int(c->node, "axis", dflt), tide_ndim(c->in[0]), &axis) < 0)
        return -1;
    return onnx_set(c, tide_cat(c->in, c->nin, axis));
}

/* Gather: indices along axis (negative ones count from the end), result shape
 * data[:axis] + indices + data[axis+1:]. */
static int run_gather(onnx_ctx *c)
{
    const tide_tensor *x = c->in[0], *idx = c->in[1];
    int rank = tide_ndim(x), axis;
    if (onnx_check_index(c, 1) < 0 ||
        onnx_dim_axis(c, onnx_attr_int(c->node, "axis", 0), rank, &axis) < 0)
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

/* Expand: x broadcast both ways against the shape input (a 1 on either side takes the other). */
static int run_expand(onnx_ctx *c)
{
    int64_t want[TIDE_MAX_DIMS], shape[TIDE_MAX_DIMS], xs[TIDE_MAX_DIMS];
    int n, rank = tide_ndim(c->in[0]);
    if (onnx_input_ints(c, 1, want, TIDE_MAX_DIMS, &n) < 0)
        return -1;
    int out_rank = n > rank ? n : rank;
    for (int d = 0; d < out_rank; d++) {
        int64_t a = d < out_rank - rank ? 1 : tide_shape(c->in[0])[d - (out_rank - rank)];
        int64_t b = d < out_rank - n ? 1 : want[d - (out_rank - n)];
        if (b < 0 || (a != b && a != 1 && b != 1))
            return onnx_error(c, "shape entry %lld does not broadcast with the input's dim %lld",
                              (long long)b, (long long)a);
        xs[d] = a;
        shape[d] = a == 1 ? b : a;
    }
    tide_tensor *x = tide_reshape(c->in[0], out_rank, xs);
    tide_tensor *out = x ? tide_expand(x, out_rank, shape) : NULL;
    tide_release(x);
    return onnx_set(c, out);
}

/* Tile: repeats per dim (an input of rank entries); before opset 6 one count (`tiles`) for one
 * `axis`, both inputs. */
static int run_tile(onnx_ctx *c)
{
    int64_t reps[TIDE_MAX_DIMS];
    int n, rank = tide_ndim(c->in[0]);
    if (c->m->opset < 6) {
        int64_t tiles, axis;
        int a;
        if (onnx_input_ints(c, 1, &tiles, 1, &n) < 0 || onnx_input_ints(c, 2, &axis, 1, &n) < 0 ||
            onnx_dim_axis(c, axis, rank, &a) < 0)
            return -1;
        for (int d = 0; d < rank; d++)
            reps[d] = d == a ? tiles : 1;
        n = rank;
    } else if (onnx_input_ints(c, 1, reps, TIDE_MAX_DIMS, &n) < 0)
        return -1;
    if (n != rank)
        return onnx_error(c, "repeats has %d values for a tensor of %d dims", n, rank);
    for (int d = 0; d < n; d++)
        if (reps[d] < 0)
            return onnx_error(c, "repeats[%d] is %lld", d, (long long)reps[d]);
    return onnx_set(c, tide_tile(c->in[0], n, reps));
}

/* x through a 6-D view: reshape to mid, permute, reshape to out. */
static int regroup(onnx_ctx *c, const int64_t mid[6], const int perm[6], const int64_t out[4])
{
    tide_tensor *v = tide_reshape(c->in[0], 6, mid);
    tide_tensor *p = v ? tide_permute(v, perm) : NULL;
    tide_tensor *r = p ? tide_reshape(p, 4, out) : NULL;
    tide_release(v);
    tide_release(p);
    return onnx_set(c, r);
}

/* The [N, C, H, W] input and blocksize of DepthToSpace/SpaceToDepth, checked. */
static int block_input(onnx_ctx *c, int64_t s[4], int64_t *b)
{
    *b = onnx_attr_int(c->node, "blocksize", 0);
    if (tide_ndim(c->in[0]) != 4 || *b < 1 || *b > (1 << 20))
        return onnx_error(c, "needs a 4-D input and a blocksize in [1, 2^20]; got %d dims, "
                          "blocksize %lld", tide_ndim(c->in[0]), (long long)*b);
    memcpy(s, tide_shape(c->in[0]), sizeof *s * 4);
    return 0;
}

static int check_depth_to_space(const onnx_node *n, char *why, size_t size)
{
    char buf[8];
    const char *mode = onnx_attr_string(n, "mode", "DCR", buf, sizeof buf);
    if (!strcmp(mode, "DCR") || !strcmp(mode, "CRD"))
        return 0;
    snprintf(why, size, "DepthToSpace mode '%s' is not supported (DCR and CRD are)", mode);
    return 1;
}

/* DCR: depth splits as (b, b, C'); CRD: as (C', b, b). */
static int run_depth_to_space(onnx_ctx *c)
{
    int64_t s[4], b;
    char buf[8];
    if (block_input(c, s, &b) < 0)
        return -1;
    if (s[1] % (b * b))
        return onnx_error(c, "%lld channels do not split into blocks of %lld x %lld",
                          (long long)s[1], (long long)b, (long long)b);
    int64_t cc = s[1] / (b * b), out[4] = {s[0], cc, s[2] * b, s[3] * b};
    if (!strcmp(onnx_attr_string(c->node, "mode", "DCR", buf, sizeof buf), "CRD")) {
        const int64_t mid[6] = {s[0], cc, b, b, s[2], s[3]};
        return regroup(c, mid, (const int[6]){0, 1, 4, 2, 5, 3}, out);
    }
    const int64_t mid[6] = {s[0], b, b, cc, s[2], s[3]};
    return regroup(c, mid, (const int[6]){0, 3, 4, 1, 5, 2}, out);
}

static int run_space_to_depth(onnx_ctx *c)
{
    int64_t s[4], b;
    if (block_input(c, s, &b) < 0)
        return -1;
    if (s[2] % b || s[3] % b)
        return onnx_error(c, "height %lld and width %lld are not multiples of blocksize %lld",
                          (long long)s[2], (long long)s[3], (long long)b);
    const int64_t mid[6] = {s[0], s[1], s[2] / b, b, s[3] / b, b};
    const int64_t out[4] = {s[0], s[1] * b * b, s[2] / b, s[3] / b};
    return regroup(c, mid, (const int[6]){0, 3, 5, 1, 2, 4}, out);
}

const onnx_op onnx_ops_shape[] = {
    {"Shape", 1, 0, 1, 1, NULL, run_shape, ONNX_SHAPE_ONLY},
    {"Size", 1, 0, 1, 1, NULL, run_size, ONNX_SHAPE_ONLY},
    {"Reshape", 1, 4, 1, 1, NULL, run_reshape, 0},
    {"Reshape", 5, 0, 2, 2, NULL, run_reshape, 0},
    {"Flatten", 1, 0, 1, 1, NULL, run_flatten, 0},
    {"Squeeze", 1, 0, 1, 2, NULL, run_squeeze, 0},
    {"Unsqueeze", 1, 0, 1, 2, NULL, run_unsqueeze, 0},
    {"Transpose", 1, 0, 1, 1, NULL, run_transpose, 0},
    {"Concat", 1, 0, 1, -1, NULL, run_concat, 0},
    {"Gather", 1, 0, 2, 2, NULL, run_gather, 0},
    {"Expand", 8, 0, 2, 2, NULL, run_expand, 0},
    {"Tile", 1, 5, 3, 3, NULL, run_tile, 0},
    {"Tile", 6, 0, 2, 2, NULL, run_tile, 0},
    {"DepthToSpace", 1, 0, 1, 1, check_depth_to_space, run_depth_to_space, 0},
    {"SpaceToDepth", 1, 0, 1, 1, NULL, run_space_to_depth, 0},
    {"Slice", 1, 9, 1, 1, NULL, onnx_run_slice, 0},
    {"Slice", 10, 0, 3, 5, NULL, onnx_run_slice, 0},
    {"Split", 1, 1, 1, 2, NULL, onnx_run_split, 0},
    {"Split", 2, 12, 1, 1, NULL, onnx_run_split, 0},
    {"Split", 13, 0, 1, 2, NULL, onnx_run_split, 0},
    {"Pad", 1, 10, 1, 1, onnx_check_pad, onnx_run_pad, 0},
    {"Pad", 11, 0, 2, 4, onnx_check_pad, onnx_run_pad, 0},
    {0},
};
