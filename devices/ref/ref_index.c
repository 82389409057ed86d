/*
 * ref_index.c — gather, scatter_add and index_select. Every index value is checked against its
 * bound before anything is written; the error names the first bad index in the index tensor's
 * row-major order, with the same words as the CPU's. Index tensors are int32 or int64.
 */
#include <stdlib.h>

#include "ref_internal.h"

/* The index element at multi-index idx (the index tensor's own dims; a 0-dim index reads its
 * one element). */
static int64_t index_at(const tide_tensor *index, const int64_t *idx)
{
    return ref_get_i(index, ref_offset(index, idx));
}

/* Checks every value of index against [0, bound); -1 with the error naming the first bad one. */
static int check_indices(const char *op, const tide_tensor *index, int dim, int64_t bound)
{
    int64_t idx[TIDE_MAX_DIMS], n = ref_numel(index);
    for (int64_t i = 0; i < n; i++) {
        ref_unflatten(index->ndim, index->shape, i, idx);
        int64_t v = index_at(index, idx);
        if (v < 0 || v >= bound) {
            char pos[200];
            td_shape_str(pos, sizeof pos, index->ndim, idx);
            return td_error("%s: index %lld is out of bounds for dim %d of size %lld (at "
                            "position %s of the index)",
                            op, (long long)v, dim, (long long)bound, pos);
        }
    }
    return 0;
}

/* A 0-dim tensor's size at dim 0 is 1. */
static int64_t size_at(const tide_tensor *t, int dim) { return t->ndim ? t->shape[dim] : 1; }

/* out[idx] = x[idx with idx[dim] replaced by index[idx]]; out has index's shape. */
int ref_gather(tide_tensor *out, const tide_tensor *x, const tide_tensor *index, int dim)
{
    if (check_indices("gather", index, dim, size_at(x, dim)) < 0)
        return -1;
    int64_t idx[TIDE_MAX_DIMS], n = ref_numel(out);
    for (int64_t i = 0; i < n; i++) {
        ref_unflatten(out->ndim, out->shape, i, idx);
        int64_t oo = ref_offset(out, idx);
        if (x->ndim)
            idx[dim] = index_at(index, idx);
        ref_convert(out, oo, x, ref_offset(x, idx));
    }
    return 0;
}

/* out = x, then out[idx with idx[dim] = index[idx]] += src[idx] for every position of index.
 * Float sums accumulate in a double copy of out and round once at the end; integers wrap;
 * bool adds as or. */
int ref_scatter_add(tide_tensor *out, const tide_tensor *x, const tide_tensor *index,
                    const tide_tensor *src, int dim)
{
    if (check_indices("scatter_add", index, dim, size_at(out, dim)) < 0)
        return -1;
    bool fl = ref_is_float(x->dtype);
    int64_t nout = ref_numel(out), idx[TIDE_MAX_DIMS];
    double *acc = NULL;
    if (fl && !(acc = td_malloc(sizeof(double) * (size_t)(nout ? nout : 1))))
        return td_error("scatter_add: out of memory for %lld sums", (long long)nout);
    for (int64_t i = 0; i < nout; i++) {
        ref_unflatten(out->ndim, out->shape, i, idx);
        if (fl)
            acc[i] = ref_get_f(x, ref_offset(x, idx));
        else
            ref_convert(out, ref_offset(out, idx), x, ref_offset(x, idx));
    }
    int64_t n = ref_numel(index);
    for (int64_t i = 0; i < n; i++) {
        ref_unflatten(index->ndim, index->shape, i, idx);
        int64_t so = ref_offset(src, idx);
        if (out->ndim)
            idx[dim] = index_at(index, idx);
        int64_t flat = 0; /* out is contiguous: its row-major position */
        for (int d = 0; d < out->ndim; d++)
            flat = flat * out->shape[d] + idx[d];
        if (fl) {
            acc[flat] += ref_get_f(src, so);
            continue;
        }
        int64_t oo = ref_offset(out, idx), s = ref_get_i(src, so), o = ref_get_i(out, oo);
        ref_set_i(out, oo, x->dtype == TIDE_BOOL ? (o | s) : (int64_t)((uint64_t)o + (uint64_t)s));
    }
    for (int64_t i = 0; fl && i < nout; i++) {
        ref_unflatten(out->ndim, out->shape, i, idx);
        ref_set_f(out, ref_offset(out, idx), acc[i]);
    }
    free(acc);
    return 0;
}

/* out[idx] = x[idx with idx[dim] = index[idx[dim]]]; index is 1-D or 0-dim. */
int ref_index_select(tide_tensor *out, const tide_tensor *x, const tide_tensor *index, int dim)
{
    int64_t bound = size_at(x, dim), k = ref_numel(index);
    int64_t is = index->ndim ? index->strides[0] : 0;
    for (int64_t i = 0; i < k; i++) { /* the CPU's words: a position, not a multi-index */
        int64_t v = ref_get_i(index, index->offset + i * is);
        if (v < 0 || v >= bound)
            return td_error("index_select: index %lld is out of bounds for dim %d of size %lld "
                            "(at position %lld of the index)",
                            (long long)v, dim, (long long)bound, (long long)i);
    }
    int64_t idx[TIDE_MAX_DIMS], n = ref_numel(out);
    for (int64_t i = 0; i < n; i++) {
        ref_unflatten(out->ndim, out->shape, i, idx);
        int64_t oo = ref_offset(out, idx);
        if (x->ndim)
            idx[dim] = ref_get_i(index, index->offset + idx[dim] * is);
        ref_convert(out, oo, x, ref_offset(x, idx));
    }
    return 0;
}
