/*
 * bench_linear_half.c — the float32 x half-weight product (LINEAR_HALF, devices/cpu/
 * cpu_linear_half.c) against float32, on stories110M's weight shapes.
 *
 *   bench_linear_half gemv   one row (decoding): GB/s of weight read, for float32 through
 *                            tide_linear (OpenBLAS sgemv split over tide's threads), float32
 *                            through the register kernel (td_lh_kernels_current()->f32), and
 *                            bfloat16 and float16 through tide_linear (LINEAR_HALF). Enough
 *                            copies of each weight to pass 256 MB are used in turn, so the
 *                            weights come from memory, not L3 (32 MB here).
 *   bench_linear_half rows   M rows (a prompt) for a [2048, 768] bfloat16 weight: milliseconds
 *                            of the register kernel alone, of tide_linear (the path cpu_linear_
 *                            half.c picks for M), and of the old path (the weight cast to
 *                            float32, then sgemm).
 *   bench_linear_half quant  one row through tide_qlinear with q8_0 and q4_0 weights on the
 *                            four stories110M shapes (attention [768,768] too): GB/s of weight
 *                            blocks read (copies past 256 MB, as gemv), and the microseconds
 *                            of quantizing the activation row alone (the tier's quantize_act).
 *
 * Medians of 15 timed runs after 3 warmups. Compare with `bench_gpt_gemms triad` (STREAM).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tide.h"
#include "tensor.h"
#include "../devices/cpu/cpu_linear_half.h"
#include "../devices/cpu/cpu_quant.h"

enum { RUNS = 15, WARMUPS = 3, MAX_COPIES = 1024 };

/* BENCH_CPU_TIME=1: the process's CPU time rather than the wall clock (with one thread, a
 * figure that time spent waiting for a core on a shared machine does not enter). */
static double now_seconds(void)
{
    static int cpu = -1;
    if (cpu < 0)
        cpu = getenv("BENCH_CPU_TIME") && atoi(getenv("BENCH_CPU_TIME")) == 1;
    struct timespec ts;
    clock_gettime(cpu ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static void die(const char *what)
{
    fprintf(stderr, "bench_linear_half: %s: %s\n", what, tide_last_error());
    exit(1);
}

/* The register kernel over tide's threads in tiles of 4 weight rows, as cpu_linear_half.c. */
typedef struct kjob {
    td_lh_rows_fn rows;
    int64_t m, n, k;
    const float *x;
    const char *w;
    size_t wsize;
    float *y;
} kjob;

static void kjob_range(void *ctx, int64_t b, int64_t e)
{
    const kjob *j = ctx;
    int64_t r0 = 4 * b, r1 = 4 * e < j->n ? 4 * e : j->n;
    j->rows(j->m, r1 - r0, j->k, j->x, j->k, j->w + (size_t)(r0 * j->k) * j->wsize, j->k,
            j->y + r0, j->n);
}

static void run_kernel(td_lh_rows_fn rows, const tide_tensor *x, const tide_tensor *w,
                       tide_tensor *y)
{
    kjob j = {rows, tide_shape(x)[0], tide_shape(w)[0], tide_shape(w)[1], tide_data_ptr(x),
              tide_data_ptr(w), tide_dtype_size(tide_get_dtype(w)), (float *)tide_data_ptr(y)};
    td_parallel_for((j.n + 3) / 4, 1, kjob_range, &j);
}

typedef enum how { VIA_LINEAR, VIA_KERNEL, VIA_CAST, VIA_Q8_0, VIA_Q4_0 } how;

/* Median seconds of y = x @ w[i]^T, i cycling over the copies. */
static double time_product(how h, const tide_tensor *x, tide_tensor **w, int copies)
{
    double t[RUNS];
    const td_lh_kernels *k = td_lh_kernels_current();
    tide_dtype dt = tide_get_dtype(w[0]);
    td_lh_rows_fn rows = dt == TIDE_FLOAT32 ? k->f32 : dt == TIDE_FLOAT16 ? k->f16 : k->bf16;
    int64_t shape[2] = {tide_shape(x)[0], tide_shape(w[0])[0]};
    tide_tensor *y = tide_empty(2, shape, TIDE_FLOAT32);
    for (int r = -WARMUPS, i = 0; r < RUNS; r++) {
        double t0 = now_seconds();
        for (int c = 0; c < copies; c++, i = (i + 1) % copies) {
            if (h == VIA_KERNEL) {
                run_kernel(rows, x, w[i], y);
                continue;
            }
            tide_tensor *wide = h == VIA_CAST ? tide_cast(w[i], TIDE_FLOAT32) : NULL;
            tide_tensor *out = h >= VIA_Q8_0
                                   ? tide_qlinear(x, w[i], (tide_qformat)(h - VIA_Q8_0))
                                   : tide_linear(x, wide ? wide : w[i], NULL);
            if (!out)
                die("linear");
            tide_release(out);
            tide_release(wide);
        }
        if (r >= 0)
            t[r] = (now_seconds() - t0) / copies;
    }
    tide_release(y);
    qsort(t, RUNS, sizeof t[0], cmp_double);
    return t[RUNS / 2];
}

static int make_weights(tide_tensor **w, int64_t n, int64_t k, tide_dtype dt, double min_bytes)
{
    int64_t shape[2] = {n, k};
    double bytes = (double)(n * k) * (double)tide_dtype_size(dt);
    int copies = (int)(min_bytes / bytes) + 1;
    copies = copies > MAX_COPIES ? MAX_COPIES : copies;
    for (int c = 0; c < copies; c++) {
        tide_tensor *f = tide_randn(2, shape, TIDE_FLOAT32);
        w[c] = f ? tide_cast(f, dt) : NULL;
        tide_release(f);
        if (!w[c])
            die("weights");
    }
    return copies;
}

static void gemv(void)
{
    static const int64_t shapes[3][2] = {{2048, 768}, {768, 2048}, {32000, 768}};
    printf("%-14s %-10s %-8s %9s %8s\n", "weight", "dtype", "path", "us", "GB/s");
    for (int s = 0; s < 3; s++) {
        int64_t n = shapes[s][0], k = shapes[s][1], xs[2] = {1, k};
        tide_tensor *x = tide_randn(2, xs, TIDE_FLOAT32);
        static const tide_dtype dts[4] = {TIDE_FLOAT32, TIDE_FLOAT32, TIDE_BFLOAT16,
                                          TIDE_FLOAT16};
        for (int d = 0; d < 4; d++) {
            tide_tensor *w[MAX_COPIES];
            int copies = make_weights(w, n, k, dts[d], 256e6);
            how h = d == 1 ? VIA_KERNEL : VIA_LINEAR;
            double sec = time_product(h, x, w, copies);
            double gbs = (double)(n * k) * (double)tide_dtype_size(dts[d]) / sec / 1e9;
            char name[32];
            snprintf(name, sizeof name, "[%lld,%lld]", (long long)n, (long long)k);
            printf("%-14s %-10s %-8s %9.1f %8.2f\n", name, tide_dtype_name(dts[d]),
                   d == 1 ? "kernel" : d == 0 ? "sgemv" : "linear", sec * 1e6, gbs);
            for (int c = 0; c < copies; c++)
                tide_release(w[c]);
        }
        tide_release(x);
    }
}

static void rows(void)
{
    static const int64_t ms[] = {1, 2, 4, 6, 8, 12, 16, 32, 64, 128, 256};
    tide_tensor *w[MAX_COPIES];
    int copies = make_weights(w, 2048, 768, TIDE_BFLOAT16, 0);
    printf("%-5s %10s %10s %10s  (ms, [M,768] x bfloat16 [2048,768]^T)\n", "M", "kernel",
           "linear", "cast+sgemm");
    for (size_t i = 0; i < sizeof ms / sizeof ms[0]; i++) {
        int64_t xs[2] = {ms[i], 768};
        tide_tensor *x = tide_randn(2, xs, TIDE_FLOAT32);
        double a = time_product(VIA_KERNEL, x, w, copies);
        double b = time_product(VIA_LINEAR, x, w, copies);
        double c = time_product(VIA_CAST, x, w, copies);
        printf("%-5lld %10.3f %10.3f %10.3f\n", (long long)ms[i], a * 1e3, b * 1e3, c * 1e3);
        tide_release(x);
    }
    for (int c = 0; c < copies; c++)
        tide_release(w[c]);
}

/* Copies of one quantized [n, k] weight (clones: quantizing each would take longer than the
 * products) past min_bytes. */
static int make_quantized(tide_tensor **w, int64_t n, int64_t k, tide_qformat fmt,
                          double min_bytes)
{
    int64_t shape[2] = {n, k};
    tide_tensor *f = tide_randn(2, shape, TIDE_FLOAT32);
    tide_tensor *q = f ? tide_quantize(f, fmt) : NULL;
    tide_release(f);
    if (!q)
        die("quantize");
    double bytes = (double)(n * tide_shape(q)[1]);
    int copies = (int)(min_bytes / bytes) + 1;
    copies = copies > MAX_COPIES ? MAX_COPIES : copies;
    for (int c = 0; c < copies; c++)
        if (!(w[c] = tide_clone(q)))
            die("clone");
    tide_release(q);
    return copies;
}

/* Median microseconds of quantizing one activation row of k values (no threads). */
static double quantize_act_us(int64_t k)
{
    enum { REPS = 2000 };
    float *x = calloc((size_t)k, sizeof(float)), *d = calloc((size_t)k / 32, sizeof(float));
    int8_t *q = calloc((size_t)k, 1);
    for (int64_t i = 0; i < k; i++)
        x[i] = (float)((i * 7919) % 201 - 100) / 37.0f;
    double t[RUNS];
    for (int r = -WARMUPS; r < RUNS; r++) {
        double t0 = now_seconds();
        for (int i = 0; i < REPS; i++)
            td_quant_kernels_current()->quantize_act(k / 32, x, q, d);
        if (r >= 0)
            t[r] = (now_seconds() - t0) / REPS;
    }
    free(x);
    free(d);
    free(q);
    qsort(t, RUNS, sizeof t[0], cmp_double);
    return t[RUNS / 2] * 1e6;
}

static void quant(void)
{
    static const int64_t shapes[4][2] = {{768, 768}, {2048, 768}, {768, 2048}, {32000, 768}};
    static tide_tensor *w[MAX_COPIES];
    printf("%-14s %-6s %9s %8s %8s\n", "weight", "format", "us", "GB/s", "act_us");
    for (int s = 0; s < 4; s++) {
        int64_t n = shapes[s][0], k = shapes[s][1], xs[2] = {1, k};
        tide_tensor *x = tide_randn(2, xs, TIDE_FLOAT32);
        double act = quantize_act_us(k);
        for (int fmt = 0; fmt < 2; fmt++) {
            int copies = make_quantized(w, n, k, (tide_qformat)fmt, 256e6);
            double sec = time_product(fmt ? VIA_Q4_0 : VIA_Q8_0, x, w, copies);
            double gbs = (double)(n * tide_shape(w[0])[1]) / sec / 1e9;
            char name[32];
            snprintf(name, sizeof name, "[%lld,%lld]", (long long)n, (long long)k);
            printf("%-14s %-6s %9.1f %8.2f %8.2f\n", name, tide_qformat_name((tide_qformat)fmt),
                   sec * 1e6, gbs, act);
            for (int c = 0; c < copies; c++)
                tide_release(w[c]);
        }
        tide_release(x);
    }
}

int main(int argc, char **argv)
{
    tide_manual_seed(1);
    printf("threads %d, isa tier by TIDE_CPU_ISA (default: best)\n", tide_get_num_threads());
    if (argc > 1 && strcmp(argv[1], "rows") == 0)
        rows();
    else if (argc > 1 && strcmp(argv[1], "quant") == 0)
        quant();
    else
        gemv();
    return 0;
}
