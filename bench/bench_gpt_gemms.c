/*
 * bench_gpt_gemms.c — the raw OpenBLAS reference of bench_gpt.lua: times a list of float32
 * GEMMs read from stdin, one per line "ta tb m n k count" (row-major C = op(A) op(B), op(A)
 * m x k, op(B) k x n; ta/tb 1 = transposed; count: how many times the step makes it), all of
 * them in order as one "step", through td_blas_sgemm (tide's door to OpenBLAS, the call tide's
 * matmul makes, split over tide's threads the same way) on contiguous matrices allocated once.
 *
 *   bench_gpt_gemms ROUNDS < list    prints "round_seconds: S" per timed round, after one warmup
 *   bench_gpt_gemms triad            prints "triad_gbs: G", the best of 5 STREAM triads
 *                                    a = b + s c over 3 x 16M float32 split over tide's threads
 *                                    (STREAM: the bandwidth floor of generation, which reads
 *                                    every weight on all threads), and "triad_gbs_one_thread"
 *
 * Not a test; bench_gpt.lua runs it between its own slices so both share the machine's state.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tide.h"
#include "../devices/cpu/cpu_blas.h"
#include "tensor.h"

enum { MAX_GEMMS = 64 };

typedef struct gemm {
    int ta, tb;
    int64_t m, n, k, count;
} gemm;

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static float *filled(int64_t numel)
{
    float *p = malloc((size_t)numel * sizeof *p);
    if (!p) {
        fprintf(stderr, "bench_gpt_gemms: out of memory (%lld floats)\n", (long long)numel);
        exit(1);
    }
    for (int64_t i = 0; i < numel; i++)
        p[i] = (float)((i * 7919) % 1000) * 1e-3f - 0.5f;
    return p;
}

static void run_step(const gemm *g, int n, const float *a, const float *b, float *c)
{
    for (int i = 0; i < n; i++)
        for (int64_t r = 0; r < g[i].count; r++) {
            int64_t lda = g[i].ta ? g[i].m : g[i].k, ldb = g[i].tb ? g[i].k : g[i].n;
            td_blas_sgemm(g[i].ta, g[i].tb, g[i].m, g[i].n, g[i].k, 1.0f, a, lda, b, ldb, 0.0f,
                          c, g[i].n);
        }
}

typedef struct triad_arrays {
    float *a, *b, *c;
} triad_arrays;

static void triad_range(void *p, int64_t lo, int64_t hi)
{
    triad_arrays *t = p;
    for (int64_t i = lo; i < hi; i++)
        t->a[i] = t->b[i] + 3.0f * t->c[i];
}

/* The best of 5 triads over n floats in GB/s (12 bytes an element, as STREAM counts), on one
 * thread or split over tide's threads as its elementwise kernels are (td_parallel_for). */
static double best_triad(triad_arrays *t, int64_t n, bool threaded)
{
    double best = 0;
    for (int r = 0; r < 5; r++) {
        double t0 = now_seconds();
        if (threaded)
            td_parallel_for(n, 1 << 16, triad_range, t);
        else
            triad_range(t, 0, n);
        double gbs = 3.0 * (double)n * sizeof(float) / (now_seconds() - t0) / 1e9;
        best = gbs > best ? gbs : best;
    }
    return best;
}

static int triad(void)
{
    enum { N = 16 << 20 };
    triad_arrays t = {filled(N), filled(N), filled(N)};
    double all = best_triad(&t, N, true), one = best_triad(&t, N, false);
    printf("triad_gbs: %.2f (%d threads)\n", all, tide_get_num_threads());
    printf("triad_gbs_one_thread: %.2f (a[0] %g)\n", one, (double)t.a[0]);
    free(t.a);
    free(t.b);
    free(t.c);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "triad") == 0)
        return triad();
    int rounds = argc > 1 ? atoi(argv[1]) : 1;
    gemm g[MAX_GEMMS];
    int n = 0;
    int64_t amax = 1, bmax = 1, cmax = 1;
    while (n < MAX_GEMMS && scanf("%d %d %lld %lld %lld %lld", &g[n].ta, &g[n].tb,
                                  (long long *)&g[n].m, (long long *)&g[n].n,
                                  (long long *)&g[n].k, (long long *)&g[n].count) == 6) {
        amax = g[n].m * g[n].k > amax ? g[n].m * g[n].k : amax;
        bmax = g[n].k * g[n].n > bmax ? g[n].k * g[n].n : bmax;
        cmax = g[n].m * g[n].n > cmax ? g[n].m * g[n].n : cmax;
        n++;
    }
    if (n == 0 || rounds < 1) {
        fprintf(stderr, "usage: bench_gpt_gemms ROUNDS < lines \"ta tb m n k count\"\n");
        return 2;
    }
    if (td_blas_ready("bench_gpt_gemms") < 0) {
        fprintf(stderr, "%s\n", tide_last_error());
        return 1;
    }
    float *a = filled(amax), *b = filled(bmax), *c = filled(cmax);
    run_step(g, n, a, b, c); /* warmup: pages touched, OpenBLAS's buffers made */
    for (int r = 0; r < rounds; r++) {
        double t0 = now_seconds();
        run_step(g, n, a, b, c);
        printf("round_seconds: %.6f\n", now_seconds() - t0);
    }
    free(a);
    free(b);
    free(c);
    return 0;
}
