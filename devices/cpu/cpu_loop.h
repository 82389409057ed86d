/*
 * cpu_loop.h — walking strided tensors on the CPU: merge dims that are contiguous with respect
 * to each other, then visit the elements as runs along the innermost dim, optionally split
 * across the thread pool.
 */
#ifndef TIDE_CPU_LOOP_H
#define TIDE_CPU_LOOP_H

#include <string.h>

#include "../../core/tensor.h"

#define TD_LOOP_MAX_OPERANDS 4

/* ndim/shape shared by every operand; strides[k][d] is operand k's stride in BYTES. */
typedef struct td_loop {
    int ndim, noperands;
    int64_t shape[TIDE_MAX_DIMS];
    int64_t strides[TD_LOOP_MAX_OPERANDS][TIDE_MAX_DIMS];
    char *base[TD_LOOP_MAX_OPERANDS];
} td_loop;

/* Offset (elements) from x's first element to element 0 along dim of line l, the lines being
 * x's positions in every dim but dim, in row-major order (scans, sort, topk). */
static inline int64_t td_line_offset(const tide_tensor *x, int dim, int64_t l)
{
    int64_t off = 0;
    for (int d = x->ndim - 1; d >= 0; d--) {
        if (d == dim)
            continue;
        off += (l % x->shape[d]) * x->strides[d];
        l /= x->shape[d];
    }
    return off;
}

/* One element of a line being ranked (sort, topk): its value, as a double for float dtypes
 * and an int64 for the others, and its position along the line. */
typedef struct td_rank_item {
    double f;
    int64_t i;
    int64_t pos;
} td_rank_item;

/* Reads x's element at off (elements from its first) into it->f or it->i by x's dtype. */
static inline void td_rank_read(const tide_tensor *x, int64_t off, td_rank_item *it)
{
    const char *p = (const char *)td_tensor_data(x);
    switch (x->dtype) {
    case TIDE_FLOAT32: it->f = ((const float *)p)[off]; break;
    case TIDE_FLOAT64: it->f = ((const double *)p)[off]; break;
    case TIDE_INT32: it->i = ((const int32_t *)p)[off]; break;
    case TIDE_INT64: it->i = ((const int64_t *)p)[off]; break;
    default: it->i = ((const uint8_t *)p)[off]; break; /* uint8, bool */
    }
}

/* Drops size-1 dims and merges dim d into d+1 when every operand allows it. An empty shape
 * becomes one dim of size 0 or 1. */
static inline void td_loop_collapse(td_loop *l)
{
    int n = 0;
    for (int d = 0; d < l->ndim; d++) {
        if (l->shape[d] == 1)
            continue;
        l->shape[n] = l->shape[d];
        for (int k = 0; k < l->noperands; k++)
            l->strides[k][n] = l->strides[k][d];
        n++;
    }
    int m = 0;
    for (int d = 0; d < n; d++) {
        if (m > 0) {
            bool merge = true;
            for (int k = 0; k < l->noperands && merge; k++)
                merge = l->strides[k][m - 1] == l->strides[k][d] * l->shape[d];
            if (merge) {
                l->shape[m - 1] *= l->shape[d];
                for (int k = 0; k < l->noperands; k++)
                    l->strides[k][m - 1] = l->strides[k][d];
                continue;
            }
        }
        l->shape[m] = l->shape[d];
        for (int k = 0; k < l->noperands; k++)
            l->strides[k][m] = l->strides[k][d];
        m++;
    }
    if (m == 0) {
        l->shape[0] = 1;
        for (int k = 0; k < l->noperands; k++)
            l->strides[k][0] = 0;
        m = 1;
    }
    l->ndim = m;
}

/* Sets operand k from a tensor viewed with the loop's (uncollapsed) shape: strides come from
 * broadcasting t to that shape. */
static inline void td_loop_operand(td_loop *l, int k, const tide_tensor *t)
{
    int64_t st[TIDE_MAX_DIMS];
    td_broadcast_strides(t, l->ndim, l->shape, st);
    int64_t es = (int64_t)td_dtype_sizes[t->dtype];
    for (int d = 0; d < l->ndim; d++)
        l->strides[k][d] = st[d] * es;
    l->base[k] = td_tensor_data(t);
}

typedef void (*td_run_fn)(void *ctx, int64_t n, char **ptrs, const int64_t *inner_strides);

/* Visits flattened elements [begin, end) of the collapsed loop as runs along the last dim. */
static inline void td_loop_range(const td_loop *l, int64_t begin, int64_t end, td_run_fn fn,
                                 void *ctx)
{
    int nd = l->ndim, last = nd - 1;
    int64_t inner = l->shape[last];
    int64_t idx[TIDE_MAX_DIMS];
    int64_t rest = begin / inner, pos = begin % inner;
    for (int d = last - 1; d >= 0; d--) {
        idx[d] = rest % l->shape[d];
        rest /= l->shape[d];
    }
    int64_t inner_strides[TD_LOOP_MAX_OPERANDS];
    for (int k = 0; k < l->noperands; k++)
        inner_strides[k] = l->strides[k][last];
    int64_t i = begin;
    while (i < end) {
        char *ptrs[TD_LOOP_MAX_OPERANDS];
        for (int k = 0; k < l->noperands; k++) {
            int64_t off = pos * l->strides[k][last];
            for (int d = 0; d < last; d++)
                off += idx[d] * l->strides[k][d];
            ptrs[k] = l->base[k] + off;
        }
        int64_t n = inner - pos < end - i ? inner - pos : end - i;
        fn(ctx, n, ptrs, inner_strides);
        i += n;
        pos = 0;
        for (int d = last - 1; d >= 0; d--) {
            if (++idx[d] < l->shape[d])
                break;
            idx[d] = 0;
        }
    }
}

typedef struct td_loop_job {
    const td_loop *loop;
    td_run_fn fn;
    void *ctx;
} td_loop_job;

static inline void td_loop_job_range(void *p, int64_t begin, int64_t end)
{
    td_loop_job *j = p;
    td_loop_range(j->loop, begin, end, j->fn, j->ctx);
}

/* Runs the whole loop, on several threads when it has at least 2*grain elements. */
static inline void td_loop_run(const td_loop *l, int64_t grain, td_run_fn fn, void *ctx)
{
    int64_t total = td_numel(l->ndim, l->shape);
    if (total == 0)
        return;
    td_loop_job j = {l, fn, ctx};
    td_parallel_for(total, grain, td_loop_job_range, &j);
}

#endif
