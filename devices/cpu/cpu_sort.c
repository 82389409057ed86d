/*
 * cpu_sort.c — SORT on the CPU: for each line along dim, the positions that sort it, ascending
 * or descending. A stable merge sort of (key, position) pairs (O(n log n), equal keys keep their
 * order in both directions, as torch.sort(stable=True)); NaN ranks above every number, so it
 * comes last ascending and first descending, NaNs in their order. Lines run in parallel, each
 * with its own scratch.
 */
#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "cpu_loop.h"

typedef td_rank_item sort_item;

typedef struct sort_job {
    const tide_tensor *x;
    tide_tensor *out;
    int dim;
    int64_t n, inner;
    bool descending, fl;
    atomic_int failed;
} sort_job;

/* Whether a ranks strictly before b (NaN the largest); ties are never "before", which keeps the
 * merge stable. */
static bool before(const sort_item *a, const sort_item *b, bool fl, bool descending)
{
    if (fl) {
        bool an = isnan(a->f), bn = isnan(b->f);
        if (an || bn)
            return descending ? an && !bn : bn && !an;
        return descending ? a->f > b->f : a->f < b->f;
    }
    return descending ? a->i > b->i : a->i < b->i;
}

/* Sorts items[0, n) with tmp as scratch: bottom-up merges of runs of doubling width. */
static void merge_sort(sort_item *items, sort_item *tmp, int64_t n, bool fl, bool descending)
{
    sort_item *src = items, *dst = tmp;
    for (int64_t w = 1; w < n; w *= 2) {
        for (int64_t lo = 0; lo < n; lo += 2 * w) {
            int64_t mid = lo + w < n ? lo + w : n, hi = lo + 2 * w < n ? lo + 2 * w : n;
            int64_t a = lo, b = mid, o = lo;
            while (a < mid && b < hi) /* the right one only when strictly before: stable */
                dst[o++] = before(&src[b], &src[a], fl, descending) ? src[b++] : src[a++];
            while (a < mid)
                dst[o++] = src[a++];
            while (b < hi)
                dst[o++] = src[b++];
        }
        sort_item *t = src;
        src = dst;
        dst = t;
    }
    if (src != items)
        memcpy(items, src, (size_t)n * sizeof *items);
}

static void sort_lines(void *ctx, int64_t begin, int64_t end)
{
    sort_job *j = ctx;
    sort_item *items = td_malloc(2 * (size_t)j->n * sizeof *items);
    if (!items) {
        atomic_store(&j->failed, 1);
        return;
    }
    const tide_tensor *x = j->x;
    int64_t xs = x->ndim > 0 ? x->strides[j->dim] : 0;
    int64_t *out = (int64_t *)td_tensor_data(j->out);
    for (int64_t l = begin; l < end; l++) {
        int64_t off = td_line_offset(x, j->dim, l);
        for (int64_t p = 0; p < j->n; p++) {
            items[p].pos = p;
            td_rank_read(x, off + p * xs, &items[p]);
        }
        merge_sort(items, items + j->n, j->n, j->fl, j->descending);
        int64_t first = (l / j->inner) * j->n * j->inner + l % j->inner;
        for (int64_t r = 0; r < j->n; r++)
            out[first + r * j->inner] = items[r].pos;
    }
    free(items);
}

int td_cpu_sort(tide_tensor *out, const tide_tensor *x, int dim, bool descending)
{
    sort_job j = {x, out, dim, x->ndim > 0 ? x->shape[dim] : 1, 1, descending,
                  x->dtype == TIDE_FLOAT32 || x->dtype == TIDE_FLOAT64, 0};
    for (int d = dim + 1; d < x->ndim; d++)
        j.inner *= x->shape[d];
    int64_t lines = j.n > 0 ? td_numel(x->ndim, x->shape) / j.n : 0;
    if (lines == 0)
        return 0;
    int64_t grain = 8192 / j.n > 0 ? 8192 / j.n : 1;
    td_parallel_for(lines, grain, sort_lines, &j);
    return atomic_load(&j.failed)
               ? td_error("sort: out of memory for a line of %lld elements", (long long)j.n)
               : 0;
}
