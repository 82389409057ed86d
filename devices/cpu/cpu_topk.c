/*
 * cpu_topk.c — topk's positions on the CPU: for each line along dim, the k best elements,
 * best first. Order: larger first (largest) or smaller first; NaN above every number; ties
 * to the lower position, so the result is one function of the input on every device. Each
 * line is sorted whole (qsort of (value, position) pairs) and its first k positions kept;
 * lines run in parallel.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

#include "cpu_kernels.h"
#include "cpu_loop.h"

typedef td_rank_item topk_item;

typedef struct topk_job {
    const tide_tensor *x;
    tide_tensor *out;
    int dim;
    int64_t n, k, inner;
    bool largest, fl;
    atomic_int failed; /* a worker could not get its scratch line */
} topk_job;

/* <0 when a ranks before b, for largest order; ties by position. */
static int order_largest(const topk_item *a, const topk_item *b, bool fl)
{
    if (fl) {
        bool an = isnan(a->f), bn = isnan(b->f);
        if (an != bn)
            return an ? -1 : 1;
        if (!an && a->f != b->f)
            return a->f > b->f ? -1 : 1;
    } else if (a->i != b->i) {
        return a->i > b->i ? -1 : 1;
    }
    return a->pos < b->pos ? -1 : a->pos > b->pos;
}

static int cmp_largest_f(const void *a, const void *b) { return order_largest(a, b, true); }
static int cmp_largest_i(const void *a, const void *b) { return order_largest(a, b, false); }
/* <0 when a ranks before b, for smallest order: NaN, the largest, comes last. */
static int order_smallest(const topk_item *a, const topk_item *b, bool fl)
{
    if (fl) {
        bool an = isnan(a->f), bn = isnan(b->f);
        if (an != bn)
            return an ? 1 : -1; /* NaN is the largest, so the last of the smallest */
        if (!an && a->f != b->f)
            return a->f < b->f ? -1 : 1;
    } else if (a->i != b->i) {
        return a->i < b->i ? -1 : 1;
    }
    return a->pos < b->pos ? -1 : a->pos > b->pos;
}
static int cmp_smallest_f(const void *a, const void *b) { return order_smallest(a, b, true); }
static int cmp_smallest_i(const void *a, const void *b) { return order_smallest(a, b, false); }

static void topk_lines(void *ctx, int64_t begin, int64_t end)
{
    topk_job *j = ctx;
    topk_item *items = td_malloc((size_t)j->n * sizeof *items);
    if (!items) {
        atomic_store(&j->failed, 1);
        return;
    }
    int (*cmp)(const void *, const void *) = j->largest ? (j->fl ? cmp_largest_f : cmp_largest_i)
                                                        : (j->fl ? cmp_smallest_f : cmp_smallest_i);
    const tide_tensor *x = j->x;
    int64_t xs = x->ndim > 0 ? x->strides[j->dim] : 0;
    int64_t *out = (int64_t *)td_tensor_data(j->out);
    for (int64_t l = begin; l < end; l++) {
        int64_t off = td_line_offset(x, j->dim, l);
        for (int64_t p = 0; p < j->n; p++) {
            items[p].pos = p;
            td_rank_read(x, off + p * xs, &items[p]);
        }
        qsort(items, (size_t)j->n, sizeof *items, cmp);
        int64_t first = (l / j->inner) * j->k * j->inner + l % j->inner;
        for (int64_t r = 0; r < j->k; r++)
            out[first + r * j->inner] = items[r].pos;
    }
    free(items);
}

int td_cpu_topk(tide_tensor *out, const tide_tensor *x, int dim, int64_t k, bool largest)
{
    topk_job j = {x, out, dim, x->ndim > 0 ? x->shape[dim] : 1, k, 1, largest,
                  x->dtype == TIDE_FLOAT32 || x->dtype == TIDE_FLOAT64, 0};
    for (int d = dim + 1; d < x->ndim; d++)
        j.inner *= x->shape[d];
    int64_t lines = j.n > 0 ? td_numel(x->ndim, x->shape) / j.n : 0;
    if (k == 0 || lines == 0)
        return 0;
    td_parallel_for(lines, 64, topk_lines, &j);
    return atomic_load(&j.failed) ? td_error("topk: out of memory for a line of %lld elements", (long long)j.n)
                    : 0;
}
