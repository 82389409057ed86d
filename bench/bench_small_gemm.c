/*
 * bench_small_gemm.c — float32 products of a few rows (a layer at batch 1..64) with the weight
 * cold in cache, as it is when a model runs layer after layer: tide_matmul (which takes
 * devices/cpu/cpu_matmul_direct.c's register tiles for these shapes on the AVX2 and AVX-512
 * tiers) against one raw sgemm of the same operands, same layout, in the same run.
 *
 * Before every call a 64 MB sweep pushes the operands out of the caches. The two alternate in
 * slices (ROUNDS of them, each SLICE_CALLS calls); a figure is the median over all calls. The
 * weight is B [k, n] row-major ("nn", x @ W with W stored [in, out], as ONNX MatMul holds it)
 * or B stored [n, k] ("nt", x @ W^T, a linear layer's weight). One thread (TIDE_NUM_THREADS
 * is left as the environment sets it; run with TIDE_NUM_THREADS=1 to compare cores).
 *
 * Lines: "<case>_tide: X GFLOP/s", "<case>_sgemm: Y GFLOP/s", "<case>_ratio: X/Y".
 */
#define _GNU_SOURCE
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "../devices/cpu/cpu_blas.h"
#include "bench_util.h"
#include "tide.h"

#define ROUNDS 5
#define SLICE_CALLS 20
#define SWEEP_BYTES (64 << 20)

typedef struct gemm_case {
    int64_t m, n, k;
    bool nt; /* B stored [n, k] */
} gemm_case;

static const gemm_case CASES[] = {
    {64, 768, 256, false},  {64, 1024, 256, false}, {64, 256, 1024, false},
    {16, 512, 512, false},  {8, 512, 512, false},   {64, 512, 784, true},
    {16, 512, 784, true},   {8, 512, 512, true},    {64, 256, 1024, true},
};

static char *sweep;

static void evict(void)
{
    for (size_t i = 0; i < SWEEP_BYTES; i += 64)
        sweep[i]++;
}

/* One call of tide's matmul (tide true) or of sgemm, after the sweep; its seconds. */
static double timed_call(const gemm_case *g, bool tide, const tide_tensor *a,
                         const tide_tensor *b, const tide_tensor *w, float *c)
{
    evict();
    double t0 = now_seconds();
    if (tide) {
        tide_tensor *r = tide_matmul(a, b);
        if (!r) {
            fprintf(stderr, "bench_small_gemm: %s\n", tide_last_error());
            exit(1);
        }
        t0 = now_seconds() - t0;
        tide_release(r);
        return t0;
    }
    td_blas_sgemm(false, g->nt, g->m, g->n, g->k, 1.0f, tide_data_ptr(a), g->k,
                  tide_data_ptr(w), g->nt ? g->k : g->n, 0.0f, c, g->n);
    return now_seconds() - t0;
}

static void run_case(const gemm_case *g)
{
    int64_t as[2] = {g->m, g->k}, ws[2] = {g->nt ? g->n : g->k, g->nt ? g->k : g->n};
    tide_tensor *a = tide_randn(2, as, TIDE_FLOAT32), *w = tide_randn(2, ws, TIDE_FLOAT32);
    tide_tensor *wt = g->nt ? tide_transpose(w, 0, 1) : NULL; /* the [k, n] view of W */
    const tide_tensor *b = g->nt ? wt : w;
    float *c = malloc((size_t)(g->m * g->n) * sizeof(float));
    double tt[ROUNDS * SLICE_CALLS], ts[ROUNDS * SLICE_CALLS];
    for (int r = 0; r < ROUNDS; r++)
        for (int side = 0; side < 2; side++)
            for (int i = 0; i < SLICE_CALLS; i++) {
                bool tide = (side == 0) == (r % 2 == 0);
                double s = timed_call(g, tide, a, b, w, c);
                (tide ? tt : ts)[r * SLICE_CALLS + i] = s;
            }
    double flop = 2.0 * (double)g->m * (double)g->n * (double)g->k;
    double gt = flop / median_of(tt, ROUNDS * SLICE_CALLS) * 1e-9;
    double gs = flop / median_of(ts, ROUNDS * SLICE_CALLS) * 1e-9;
    char name[64];
    snprintf(name, sizeof name, "%s_m%lld_n%lld_k%lld", g->nt ? "nt" : "nn", (long long)g->m,
             (long long)g->n, (long long)g->k);
    printf("%s_tide: %.1f GFLOP/s\n%s_sgemm: %.1f GFLOP/s\n%s_ratio: %.2f\n", name, gt, name, gs,
           name, gt / gs);
    free(c);
    tide_release(a), tide_release(wt), tide_release(w);
}

int main(void)
{
    if (td_blas_ready("bench_small_gemm") < 0) {
        fprintf(stderr, "bench_small_gemm: %s\n", tide_last_error());
        return 1;
    }
    sweep = calloc(SWEEP_BYTES, 1);
    if (!sweep)
        return 1;
    print_machine();
    printf("# %d threads; operands swept out of the caches before every call; medians of %d "
           "calls in %d alternating slices\n",
           tide_get_num_threads(), ROUNDS * SLICE_CALLS, ROUNDS);
    for (size_t i = 0; i < sizeof CASES / sizeof CASES[0]; i++)
        run_case(&CASES[i]);
    free(sweep);
    return 0;
}
