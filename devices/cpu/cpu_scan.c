/*
 * cpu_scan.c — CUMSUM on the CPU: inclusive prefix sums along one dim, any input strides, and
 * its other kinds (tide_scan_kind, below): running products and logsumexps (in double, in order,
 * as the sums; ref computes each the same way) and the positions of the running max/min.
 *
 * Summation order: along the dim, strictly sequential: out[i] = round(acc_i) with
 * acc_i = acc_{i-1} + x[i] in double for float32 and float64 (PyTorch's CPU accumulator type
 * too), in wrapping int64 for int64 (ops/ casts other integers and bool to int64 first). The
 * ref device adds in the same order in double, so the two agree bitwise.
 *
 * A line is one position of every dim but the scanned one. Lines are independent, so they are
 * split across the thread pool (each line's order stays the same: the result does not depend on
 * the thread count); a block of up to LINE_BLOCK neighbouring lines is walked together so
 * that a step along the dim reads and writes neighbouring memory.
 */
#include <math.h>

#include "cpu_kernels.h"
#include "cpu_loop.h"

#define LINE_BLOCK 64
#define GRAIN_ELEMS (32 * 1024)

typedef struct scan_job {
    const tide_tensor *x;
    tide_tensor *out;
    int dim;
    int64_t n, inner; /* size of dim; product of the sizes after it */
} scan_job;


#define SCAN_BLOCK(T, ACC)                                                                       \
    do {                                                                                         \
        const T *xp = (const T *)td_tensor_data(j->x);                                           \
        T *op = (T *)td_tensor_data(j->out) + first_out;                                         \
        ACC acc[LINE_BLOCK] = {0};                                                               \
        for (int64_t i = 0; i < j->n; i++, op += j->inner)                                       \
            for (int k = 0; k < count; k++) {                                                    \
                acc[k] = (ACC)(acc[k] + (ACC)xp[offs[k] + i * xs]);                               \
                op[k] = (T)acc[k];                                                               \
            }                                                                                    \
    } while (0)

/* Lines [l, l + count) share their outer position (one run of the inner index). */
static void scan_block(const scan_job *j, int64_t l, int count)
{
    int64_t offs[LINE_BLOCK];
    for (int k = 0; k < count; k++)
        offs[k] = td_line_offset(j->x, j->dim, l + k);
    int64_t xs = j->dim >= 0 ? j->x->strides[j->dim] : 0;
    int64_t first_out = (l / j->inner) * j->n * j->inner + l % j->inner;
    switch (j->out->dtype) {
    case TIDE_FLOAT32: SCAN_BLOCK(float, double); break;
    case TIDE_FLOAT64: SCAN_BLOCK(double, double); break;
    default: SCAN_BLOCK(int64_t, uint64_t); break; /* unsigned: wraps without overflow UB */
    }
}

static void scan_lines(void *ctx, int64_t begin, int64_t end)
{
    const scan_job *j = ctx;
    int64_t l = begin;
    while (l < end) {
        int64_t run = j->inner - l % j->inner; /* lines left in this outer position */
        int64_t count = end - l < run ? end - l : run;
        if (count > LINE_BLOCK)
            count = LINE_BLOCK;
        scan_block(j, l, (int)count);
        l += count;
    }
}

int td_cpu_cumsum(tide_tensor *out, const tide_tensor *x, int dim)
{
    if (x->ndim == 0) { /* a 0-dim tensor is its own cumsum */
        scan_job j = {x, out, -1, 1, 1};
        scan_block(&j, 0, 1);
        return 0;
    }
    scan_job j = {x, out, dim, x->shape[dim], 1};
    for (int d = dim + 1; d < x->ndim; d++)
        j.inner *= x->shape[d];
    int64_t lines = td_numel(x->ndim, x->shape) / (j.n > 0 ? j.n : 1);
    if (j.n == 0 || lines == 0)
        return 0;
    int64_t grain = GRAIN_ELEMS / j.n > 0 ? GRAIN_ELEMS / j.n : 1;
    td_parallel_for(lines, grain, scan_lines, &j);
    return 0;
}

/* ---- the other kinds: products, logsumexps, positions of the running max/min ------------- */

/* log(exp(a) + exp(b)) without overflow; equal infinities stay (inf - inf would be NaN). */
static double log_add_exp(double a, double b)
{
    if (isinf(a) && a == b)
        return a;
    double hi = a > b ? a : b, lo = a > b ? b : a;
    if (isnan(a) || isnan(b))
        return NAN;
    return hi + log1p(exp(lo - hi));
}

/* Element p of a line as a double (floats) or int64 (integers; uint8 and bool read as bytes). */
static double get_f(const tide_tensor *x, int64_t off)
{
    const char *p = (const char *)td_tensor_data(x);
    return x->dtype == TIDE_FLOAT32 ? ((const float *)p)[off] : ((const double *)p)[off];
}
static int64_t get_i(const tide_tensor *x, int64_t off)
{
    const char *p = (const char *)td_tensor_data(x);
    switch (x->dtype) {
    case TIDE_INT64: return ((const int64_t *)p)[off];
    case TIDE_INT32: return ((const int32_t *)p)[off];
    default: return ((const uint8_t *)p)[off];
    }
}

/* Whether element v (position taken) replaces the running best: the later one on ties, and a
 * NaN once one is met (then only a later NaN), as torch.cummax/cummin. */
static bool takes_over_f(double v, double best, bool is_max)
{
    if (isnan(v))
        return true;
    if (isnan(best))
        return false;
    return is_max ? v >= best : v <= best;
}

/* One line: x from offset xo with stride xs, out from oo with stride os. */
static void scan_line(const scan_job *j, int kind, int64_t xo, int64_t xs, int64_t oo, int64_t os)
{
    const tide_tensor *x = j->x;
    bool fl = x->dtype == TIDE_FLOAT32 || x->dtype == TIDE_FLOAT64;
    char *out = (char *)td_tensor_data(j->out);
    double acc = kind == TIDE_SCAN_PROD ? 1 : -INFINITY;
    uint64_t iacc = 1;
    int64_t best = 0;
    double bestf = 0;
    int64_t besti = 0;
    for (int64_t i = 0; i < j->n; i++, xo += xs, oo += os) {
        if (kind == TIDE_SCAN_ARGMAX || kind == TIDE_SCAN_ARGMIN) {
            bool is_max = kind == TIDE_SCAN_ARGMAX, take;
            if (fl) {
                double v = get_f(x, xo);
                take = i == 0 || takes_over_f(v, bestf, is_max);
                bestf = take ? v : bestf;
            } else {
                int64_t v = get_i(x, xo);
                take = i == 0 || (is_max ? v >= besti : v <= besti);
                besti = take ? v : besti;
            }
            best = take ? i : best;
            ((int64_t *)out)[oo] = best;
            continue;
        }
        if (!fl) { /* PROD of int64: wrapping, as the sum */
            iacc *= (uint64_t)get_i(x, xo);
            ((int64_t *)out)[oo] = (int64_t)iacc;
            continue;
        }
        double v = get_f(x, xo);
        acc = kind == TIDE_SCAN_PROD ? acc * v : log_add_exp(acc, v);
        if (j->out->dtype == TIDE_FLOAT32)
            ((float *)out)[oo] = (float)acc;
        else
            ((double *)out)[oo] = acc;
    }
}

typedef struct kind_job {
    scan_job j;
    int kind;
} kind_job;

static void kind_lines(void *ctx, int64_t begin, int64_t end)
{
    const kind_job *k = ctx;
    const scan_job *j = &k->j;
    int64_t xs = j->dim >= 0 ? j->x->strides[j->dim] : 0;
    for (int64_t l = begin; l < end; l++) {
        int64_t first_out = (l / j->inner) * j->n * j->inner + l % j->inner;
        scan_line(j, k->kind, td_line_offset(j->x, j->dim, l), xs, first_out, j->inner);
    }
}

int td_cpu_scan(tide_tensor *out, const tide_tensor *x, int dim, int kind)
{
    if (kind == TIDE_SCAN_SUM)
        return td_cpu_cumsum(out, x, dim);
    if (kind < TIDE_SCAN_PROD || kind > TIDE_SCAN_ARGMIN)
        return td_error("cumsum: unknown scan kind %d", kind);
    kind_job k = {{x, out, x->ndim == 0 ? -1 : dim, x->ndim == 0 ? 1 : x->shape[dim], 1}, kind};
    for (int d = dim + 1; d < x->ndim; d++)
        k.j.inner *= x->shape[d];
    int64_t lines = k.j.n > 0 ? td_numel(x->ndim, x->shape) / k.j.n : 0;
    if (lines == 0)
        return 0;
    int64_t grain = GRAIN_ELEMS / k.j.n > 0 ? GRAIN_ELEMS / k.j.n : 1;
    td_parallel_for(lines, grain, kind_lines, &k);
    return 0;
}
