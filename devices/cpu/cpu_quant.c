/*
 * cpu_quant.c — QUANTIZE, DEQUANTIZE and QLINEAR on the CPU (core/primitive.h; formats in
 * core/quant.h). Quantizing and dequantizing are core/quant.h's scalar block functions, rows
 * split over the pool. qlinear quantizes the activations once (per-tier kernel, the same bytes
 * on every tier), then shares the weight's rows among the pool's threads in units of about
 * 16 KiB of blocks (whole groups of four rows), each thread claiming the next unit from a
 * counter until none is left; a unit's rows are dotted with every activation row, four weight
 * rows at a time, dequantized in registers (never written out as floats). Claiming rather than
 * one fixed half per thread: on a shared machine a worker often starts late (another process
 * has its core), and the caller then takes its units instead of waiting (a [768, 768] q4_0
 * product at 2 threads on the loaded 2-core VM: 169 us with halves, 39 us on one thread). A
 * row's sum does not depend on which thread computes it (dot4 equals dot bitwise).
 */
#include <stdlib.h>
#include <string.h>

#include "../../core/quant.h"
#include "cpu_isa.h"
#include "cpu_kernels.h"
#include "cpu_quant.h"

const td_quant_kernels *td_quant_kernels_current(void)
{
    static const td_quant_kernels *const tables[] = {
        &td_quant_kernels_baseline, &td_quant_kernels_avx2, &td_quant_kernels_avx512};
    if (td_cpu_isa() == TD_ISA_AVX512 && td_quant_vnni())
        return &td_quant_kernels_avx512_vnni;
    return tables[td_cpu_isa()];
}

bool td_quant_vnni(void)
{
    static int has = -1; /* benign race: every thread computes the same value */
    int h = __atomic_load_n(&has, __ATOMIC_RELAXED);
    if (h < 0) {
        const char *off = getenv("TIDE_CPU_VNNI");
        __builtin_cpu_init();
        h = __builtin_cpu_supports("avx512vnni") && !(off && strcmp(off, "0") == 0);
        __atomic_store_n(&has, h, __ATOMIC_RELAXED);
    }
    return h;
}

/* Rows per task: about 64 KiB of weight bytes, at least one row. */
static int64_t grain_rows(int64_t row_bytes)
{
    int64_t g = (64 << 10) / (row_bytes > 0 ? row_bytes : 1);
    return g > 0 ? g : 1;
}

typedef struct quant_job {
    int fmt;
    int64_t nb; /* blocks per row */
    const float *x;
    uint8_t *q;
    float *y;
} quant_job;

static void quantize_rows(void *ctx, int64_t begin, int64_t end)
{
    const quant_job *j = ctx;
    int bytes = td_qblock_bytes(j->fmt);
    for (int64_t r = begin; r < end; r++)
        for (int64_t b = 0; b < j->nb; b++)
            td_quantize_block(j->fmt, j->x + (r * j->nb + b) * TD_QBLOCK,
                              j->q + (r * j->nb + b) * bytes);
}

static void dequantize_rows(void *ctx, int64_t begin, int64_t end)
{
    const quant_job *j = ctx;
    int bytes = td_qblock_bytes(j->fmt);
    for (int64_t r = begin; r < end; r++)
        for (int64_t b = 0; b < j->nb; b++)
            td_dequantize_block(j->fmt, j->q + (r * j->nb + b) * bytes,
                                j->y + (r * j->nb + b) * TD_QBLOCK);
}

int td_cpu_quantize(tide_tensor *out, const tide_tensor *w, int fmt)
{
    quant_job j = {fmt, w->shape[1] / TD_QBLOCK, td_tensor_data(w), td_tensor_data(out), NULL};
    td_parallel_for(w->shape[0], grain_rows(w->shape[1] * 4), quantize_rows, &j);
    return 0;
}

int td_cpu_dequantize(tide_tensor *out, const tide_tensor *q, int fmt)
{
    quant_job j = {fmt, out->shape[1] / TD_QBLOCK, NULL, td_tensor_data(q), td_tensor_data(out)};
    td_parallel_for(q->shape[0], grain_rows(q->shape[1]), dequantize_rows, &j);
    return 0;
}

typedef struct qlinear_job {
    const td_quant_kernels *k;
    int fmt;
    int64_t m, n, nb, row_bytes;
    const uint8_t *w;
    const int8_t *xq;
    const float *xd;
    float *out;
    int64_t unit_rows, units;
    int64_t next_unit; /* atomic: the next unit to claim */
} qlinear_job;

static void qlinear_rows(const qlinear_job *j, int64_t begin, int64_t end)
{
    float (*dot)(int64_t, const uint8_t *, const int8_t *, const float *) = j->k->dot[j->fmt];
    for (int64_t i = 0; i < j->m; i++) {
        const int8_t *xq = j->xq + i * j->nb * TD_QBLOCK;
        const float *xd = j->xd + i * j->nb;
        float *out = j->out + i * j->n;
        int64_t r = begin;
        for (; r + 4 <= end; r += 4)
            j->k->dot4[j->fmt](j->nb, j->w + r * j->row_bytes, j->row_bytes, xq, xd, out + r);
        for (; r < end; r++)
            out[r] = dot(j->nb, j->w + r * j->row_bytes, xq, xd);
    }
}

/* A pool task: units claimed one at a time until none is left (its range is ignored). */
static void qlinear_claim(void *ctx, int64_t begin, int64_t end)
{
    (void)begin, (void)end;
    qlinear_job *j = ctx;
    int64_t u;
    while ((u = __atomic_fetch_add(&j->next_unit, 1, __ATOMIC_RELAXED)) < j->units) {
        int64_t r0 = u * j->unit_rows, r1 = r0 + j->unit_rows;
        qlinear_rows(j, r0, r1 < j->n ? r1 : j->n);
    }
}

/* Rows per unit: about 16 KiB of blocks, a multiple of four rows. */
static int64_t unit_rows(int64_t row_bytes)
{
    int64_t r = (16 << 10) / (row_bytes > 0 ? row_bytes : 1) / 4 * 4;
    return r > 4 ? r : 4;
}

int td_cpu_qlinear(tide_tensor *out, const tide_tensor *x, const tide_tensor *q, int fmt)
{
    int64_t m = x->shape[0], k = x->shape[1], nb = k / TD_QBLOCK;
    const td_quant_kernels *kern = td_quant_kernels_current();
    int8_t *xq = td_malloc((size_t)(m * k) + 1);
    float *xd = td_malloc(sizeof(float) * (size_t)(m * nb) + 1);
    if (!xq || !xd) {
        free(xq);
        free(xd);
        return td_error("qlinear: out of memory for the quantized activations [%lld, %lld]",
                        (long long)m, (long long)k);
    }
    kern->quantize_act(m * nb, td_tensor_data(x), xq, xd);
    int64_t n = q->shape[0], rows = unit_rows(q->shape[1]);
    qlinear_job j = {kern, fmt, m, n, nb, q->shape[1], td_tensor_data(q), xq, xd,
                     td_tensor_data(out), rows, (n + rows - 1) / rows, 0};
    /* one task per thread (at most one per unit), each claiming units */
    td_parallel_for(j.units, 1, qlinear_claim, &j);
    free(xq);
    free(xd);
    return 0;
}
