/*
 * cpu_linear_half.c — LINEAR_HALF on the CPU: out [M, N] = x [M, K] @ widen(w [N, K])^T, x
 * float32, w float16 or bfloat16, without a float32 copy of w in memory.
 *
 * Few rows (decoding: M = 1) read each weight once, straight from memory, widened in registers
 * (cpu_linear_half_isa.c): the product is bound by memory bandwidth, and the half weight is
 * half the bytes of float32. The work is split over tide's threads by tiles of 4 weight rows.
 * Many rows (a prompt) would redo that widening M times; from PANEL_MIN_M rows each thread
 * widens a panel of weight rows into a float32 buffer that stays in L2 and hands it to sgemm.
 * A row of the result does not depend on the thread count or on which thread computed it.
 */
#include <string.h>

#include "cpu_blas.h"
#include "cpu_isa.h"
#include "cpu_half.h"
#include "cpu_kernels.h"
#include "cpu_linear_half.h"

/* From this many rows of x the panel path (widen + sgemm) is used: bench_linear_half rows put
 * the register kernel ahead up to M = 8-12, level at 16, behind from 32 (a [2048, 768] weight).
 * Panels of 512 KiB of float32 weight rows (a multiple of 16 rows, sgemm's blocking); 128 KiB
 * ones lost 20-40% to the cast-then-sgemm path at M = 256 (x packed again per panel). */
#define PANEL_MIN_M 16
#define PANEL_BYTES (512 * 1024)
/* Multiply-adds per task in the register kernel, so a small product runs on one thread. */
#define GEMV_TASK_MACS 65536

const td_lh_kernels *td_lh_kernels_current(void)
{
    static const td_lh_kernels *const tables[] = {&td_lh_kernels_baseline, &td_lh_kernels_avx2,
                                                 &td_lh_kernels_avx512};
    return tables[td_cpu_isa()];
}

typedef struct lh_job {
    int64_t m, n, k, ldx, ldw, ldy;
    const float *x;
    const char *w;
    size_t wsize; /* bytes per weight */
    tide_dtype wdtype;
    float *y;
    td_lh_rows_fn rows;
    /* panel path */
    int64_t panel_rows, npanels, nslots;
    float *panels; /* nslots buffers of panel_rows * k */
} lh_job;

static void gemv_tiles(void *ctx, int64_t begin, int64_t end)
{
    const lh_job *j = ctx;
    int64_t r0 = begin * 4, r1 = end * 4 < j->n ? end * 4 : j->n;
    j->rows(j->m, r1 - r0, j->k, j->x, j->ldx, j->w + (size_t)(r0 * j->ldw) * j->wsize, j->ldw,
            j->y + r0, j->ldy);
}

/* Weight rows r0 .. r0 + rows widened into buf ([rows, k], contiguous). */
static void widen_panel(const lh_job *j, int64_t r0, int64_t rows, float *buf)
{
    const td_half_kernels *h = td_half_kernels_current();
    for (int64_t r = 0; r < rows; r++) {
        const uint16_t *src = (const uint16_t *)(j->w + (size_t)((r0 + r) * j->ldw) * j->wsize);
        if (j->wdtype == TIDE_FLOAT16)
            h->f16_to_f32(j->k, buf + r * j->k, src);
        else
            h->bf16_to_f32(j->k, buf + r * j->k, src);
    }
}

/* Slot s takes panels s, s + nslots, ... with its own buffer. */
static void panel_slots(void *ctx, int64_t begin, int64_t end)
{
    const lh_job *j = ctx;
    for (int64_t s = begin; s < end; s++) {
        float *buf = j->panels + s * j->panel_rows * j->k;
        for (int64_t p = s; p < j->npanels; p += j->nslots) {
            int64_t r0 = p * j->panel_rows;
            int64_t rows = j->n - r0 < j->panel_rows ? j->n - r0 : j->panel_rows;
            widen_panel(j, r0, rows, buf);
            td_blas_sgemm(false, true, j->m, rows, j->k, 1.0f, j->x, j->ldx, buf, j->k, 0.0f,
                          j->y + r0, j->ldy);
        }
    }
}

static int run_panels(lh_job *j)
{
    if (td_blas_ready("linear_half") < 0)
        return -1;
    int64_t pr = PANEL_BYTES / 4 / j->k / 16 * 16;
    j->panel_rows = pr < 16 ? 16 : pr;
    j->npanels = (j->n + j->panel_rows - 1) / j->panel_rows;
    int64_t threads = td_in_parallel_for() ? 1 : td_num_threads();
    j->nslots = threads < j->npanels ? threads : j->npanels;
    /* The caching allocator: a fresh mmap per call would fault its pages in again. */
    size_t bytes = sizeof(float) * (size_t)(j->nslots * j->panel_rows * j->k);
    j->panels = td_cache_alloc(bytes);
    if (!j->panels)
        return td_error_code(TIDE_ERR_OUT_OF_MEMORY, "linear_half: out of memory for %lld "
                             "weight panels of [%lld, %lld]", (long long)j->nslots,
                             (long long)j->panel_rows, (long long)j->k);
    td_parallel_for(j->nslots, 1, panel_slots, j);
    td_cache_free(j->panels, bytes);
    return 0;
}

/* t itself when its rows have unit stride (or one element) and, for sgemm (blas), do not
 * overlap (a broadcast row has leading stride 0), else a contiguous copy. */
static tide_tensor *unit_rows(const tide_tensor *t, bool blas)
{
    bool unit = t->shape[1] <= 1 || t->strides[1] == 1;
    if (unit && (!blas || t->shape[0] <= 1 || t->strides[0] >= t->shape[1]))
        return tide_retain((tide_tensor *)t);
    tide_tensor *c = td_tensor_new("linear_half", t->device, 2, t->shape, (tide_dtype)t->dtype);
    if (c && td_cpu_copy(c, t) < 0) {
        tide_release(c);
        return NULL;
    }
    return c;
}

static int64_t lead(const tide_tensor *t) { return t->shape[0] > 1 ? t->strides[0] : t->shape[1]; }

static int run(tide_tensor *out, const tide_tensor *x, const tide_tensor *w)
{
    lh_job j = {.m = x->shape[0], .n = w->shape[0], .k = x->shape[1], .ldx = lead(x),
                .ldw = lead(w), .ldy = lead(out), .x = td_tensor_data(x),
                .w = td_tensor_data(w), .wsize = td_dtype_sizes[w->dtype],
                .wdtype = (tide_dtype)w->dtype, .y = td_tensor_data(out)};
    if (j.k == 0)
        return td_cpu_fill(out, 0);
    if (j.m >= PANEL_MIN_M)
        return run_panels(&j);
    const td_lh_kernels *kern = td_lh_kernels_current();
    j.rows = w->dtype == TIDE_FLOAT16 ? kern->f16 : kern->bf16;
    int64_t tiles = (j.n + 3) / 4, grain = GEMV_TASK_MACS / (4 * j.k * j.m);
    td_parallel_for(tiles, grain < 1 ? 1 : grain, gemv_tiles, &j);
    return 0;
}

int td_cpu_linear_half(tide_tensor *out, const tide_tensor *x, const tide_tensor *w)
{
    if (x->dtype != TIDE_FLOAT32 || out->dtype != TIDE_FLOAT32 || !td_dtype_is_half(w->dtype))
        return td_error_code(TIDE_ERR_UNSUPPORTED, "cpu: linear_half takes float32 x and a "
                             "float16 or bfloat16 weight, got %s and %s",
                             tide_dtype_name((tide_dtype)x->dtype),
                             tide_dtype_name((tide_dtype)w->dtype));
    tide_tensor *xu = unit_rows(x, x->shape[0] >= PANEL_MIN_M);
    tide_tensor *wu = xu ? unit_rows(w, false) : NULL;
    bool direct = out->shape[1] <= 1 || out->strides[1] == 1;
    tide_tensor *o = direct ? tide_retain(out)
                            : td_tensor_new("linear_half", out->device, 2, out->shape, TIDE_FLOAT32);
    int rc = xu && wu && o ? run(o, xu, wu) : -1;
    if (rc == 0 && !direct)
        rc = td_cpu_copy(out, o);
    tide_release(xu);
    tide_release(wu);
    tide_release(o);
    return rc;
}
