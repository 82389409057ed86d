/*
 * bench_onnx.c — ONNX models imported by tide_onnx_load (a compiled tide_graph) and run with
 * tide_graph_run from C: batch-1 latency and batch-64 throughput. bench_onnx.sh runs this next
 * to bench_onnx_ort.py (ONNX Runtime on the same models, inputs and thread count) and prints
 * the ratios; alone it times tide only.
 *
 *   bench_onnx [--threads N] [--slices S] [--seconds T] [--batches 1,64] [--reference 0|1]
 *              model.onnx...
 *
 * Each model gets one graph per batch size (the free dim "batch" captured at that size, so no
 * run recompiles). Slices of calls (>= T seconds each, default 0.2) go round every
 * (model, batch) in turn, S rounds (default 5): these VMs drift, so each figure is the median of
 * slices spread over the whole run. The input is the same function of the element index as in
 * bench_onnx_ort.py, and a '#' line gives an output checksum so the two runtimes can be checked
 * against each other. Each figure comes twice: by wall time, and by the process's CPU time per
 * call (`_cpu_` lines: what a machine shared with other jobs disturbs less; with N threads it
 * counts every thread's time, spinning included). Reference: a raw td_blas_sgemm of 512^3 at
 * the same thread count.
 * Lines are "name: value unit"; '#' lines say how.
 */
#define _GNU_SOURCE
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tide.h"
#include "../devices/cpu/cpu_blas.h"
#include "bench_util.h"

#define MAX_CASES 32
#define MAX_SLICES 64

typedef struct bench_case {
    char name[64];
    int64_t batch;
    tide_graph *g;
    tide_tensor *x;
    double slices[MAX_SLICES], cpu_slices[MAX_SLICES]; /* wall and process CPU s per call */
} bench_case;

/* Element i of every input: a multiplicative hash of i mapped to [-0.5, 0.5); bench_onnx_ort.py
 * computes the same values with numpy. */
static float input_value(uint64_t i)
{
    uint32_t h = (uint32_t)(i * 2654435761u);
    return (float)(h >> 8) / (float)(1u << 24) - 0.5f;
}

/* The model's basename without ".onnx". */
static void model_name(const char *path, char *out, size_t n)
{
    const char *base = strrchr(path, '/');
    snprintf(out, n, "%s", base ? base + 1 : path);
    char *dot = strstr(out, ".onnx");
    if (dot)
        *dot = 0;
}

/* Loads path with the free dim "batch" at `batch` and makes its (single) float32 input. */
static bool open_case(bench_case *c, const char *path, int64_t batch)
{
    const char *names[] = {"batch"};
    tide_onnx_options opts = {.ndims = 1, .dim_names = names, .dim_sizes = &batch};
    c->batch = batch;
    c->g = tide_onnx_load(path, &opts);
    if (!c->g)
        return false;
    int64_t shape[8];
    int ndim;
    tide_dtype dt;
    if (tide_graph_num_inputs(c->g) != 1 ||
        tide_graph_input_info(c->g, 0, &dt, &ndim, shape, 8) != 0 || dt != TIDE_FLOAT32) {
        fprintf(stderr, "bench_onnx: %s: expected one float32 input\n", path);
        return false;
    }
    for (int d = 0; d < ndim; d++)
        if (shape[d] < 0)
            shape[d] = batch;
    c->x = tide_empty(ndim, shape, TIDE_FLOAT32);
    if (!c->x)
        return false;
    float *p = tide_mutable_data_ptr(c->x);
    for (int64_t i = 0; i < tide_numel(c->x); i++)
        p[i] = input_value((uint64_t)i);
    return true;
}

/* One call; in *sum (when not NULL) its output's checksum: sum of y[i] * input_value(i), a
 * weighted sum since a plain one is ~0 after a LayerNormalization. NAN on error. */
static double run_once(bench_case *c, double *sum)
{
    tide_tensor *y = NULL;
    double t0 = now_seconds();
    if (tide_graph_run(c->g, &c->x, 1, &y) != 0) {
        fprintf(stderr, "bench_onnx: %s: %s\n", c->name, tide_last_error());
        return NAN;
    }
    double t = now_seconds() - t0;
    if (sum) {
        tide_tensor *y32 = tide_contiguous(y);
        const float *p = tide_data_ptr(y32);
        *sum = 0;
        for (int64_t i = 0; i < tide_numel(y32); i++)
            *sum += (double)p[i] * input_value((uint64_t)i);
        tide_release(y32);
    }
    tide_release(y);
    return t;
}

/* Slice s of case c: mean wall seconds per call over >= seconds of calls (at least 2), and the
 * process CPU seconds per call (every thread's), which a loaded machine disturbs less. */
static bool slice(bench_case *c, int s, double seconds)
{
    double total = 0, cpu0 = clock_seconds(CLOCK_PROCESS_CPUTIME_ID);
    int runs = 0;
    while (total < seconds || runs < 2) {
        double t = run_once(c, NULL);
        if (isnan(t))
            return false;
        total += t, runs++;
    }
    c->slices[s] = total / runs;
    c->cpu_slices[s] = (clock_seconds(CLOCK_PROCESS_CPUTIME_ID) - cpu0) / runs;
    return true;
}

/* GFLOP/s of a raw 512^3 td_blas_sgemm (median of 5 slices), the GEMM rate this machine gives
 * at tide's thread count. */
static double sgemm_reference(double seconds)
{
    const int64_t n = 512;
    float *a = calloc((size_t)(n * n), sizeof(float)), *b = calloc((size_t)(n * n), sizeof(float)),
          *c = calloc((size_t)(n * n), sizeof(float));
    double s[5] = {0};
    if (!a || !b || !c || td_blas_ready("bench_onnx") != 0)
        goto done;
    for (int i = 0; i < n * n; i++)
        a[i] = input_value((uint64_t)i), b[i] = input_value((uint64_t)i + 7);
    for (int k = 0; k < 5; k++) {
        double total = 0, t0;
        int runs = 0;
        while (total < seconds || runs < 2) {
            t0 = now_seconds();
            td_blas_sgemm(false, false, n, n, n, 1.0f, a, n, b, n, 0.0f, c, n);
            total += now_seconds() - t0, runs++;
        }
        s[k] = total / runs;
    }
done:
    free(a), free(b), free(c);
    double t = median_of(s, 5);
    return t > 0 ? 2.0 * (double)(n * n * n) / t * 1e-9 : 0;
}

static void report(bench_case *c, int slices, int threads)
{
    double t = median_of(c->slices, slices), cpu = median_of(c->cpu_slices, slices);
    if (c->batch == 1) {
        printf("%s_b1_t%d_latency: %.1f us\n", c->name, threads, t * 1e6);
        printf("%s_b1_t%d_cpu_latency: %.1f us\n", c->name, threads, cpu * 1e6);
    } else {
        printf("%s_b%lld_t%d_throughput: %.0f samples/s\n", c->name, (long long)c->batch,
               threads, (double)c->batch / t);
        printf("%s_b%lld_t%d_cpu_throughput: %.0f samples/s\n", c->name, (long long)c->batch,
               threads, (double)c->batch / cpu);
    }
}

int main(int argc, char **argv)
{
    int threads = 1, slices = 5, nbatch = 2, ncase = 0, reference = 1;
    int64_t batches[8] = {1, 64};
    double seconds = 0.2;
    static bench_case cases[MAX_CASES];
    int a = 1;
    for (; a + 1 < argc && strncmp(argv[a], "--", 2) == 0; a += 2) {
        if (strcmp(argv[a], "--reference") == 0) /* 0: no sgemm figure (for profiles) */
            reference = atoi(argv[a + 1]);
        else if (strcmp(argv[a], "--threads") == 0)
            threads = atoi(argv[a + 1]);
        else if (strcmp(argv[a], "--slices") == 0)
            slices = atoi(argv[a + 1]);
        else if (strcmp(argv[a], "--seconds") == 0)
            seconds = atof(argv[a + 1]);
        else if (strcmp(argv[a], "--batches") == 0) {
            char *s = argv[a + 1];
            for (nbatch = 0; nbatch < 8 && *s; nbatch++, s += *s == ',')
                batches[nbatch] = strtoll(s, &s, 10);
        } else
            break;
    }
    if (a >= argc || threads < 1 || slices < 1 || slices > MAX_SLICES || nbatch < 1) {
        fprintf(stderr, "usage: bench_onnx [--threads N] [--slices S (1..%d)] [--seconds T] "
                        "[--batches 1,64] [--reference 0|1] model.onnx...\n", MAX_SLICES);
        return 2;
    }
    tide_set_num_threads(threads);
    print_cpu_model();
    printf("cpu_isa: %s\n", td_cpu_isa_name(td_cpu_isa()));
    printf("# tide bench_onnx: tide_onnx_load graphs run by tide_graph_run, float32, %d threads; "
           "medians of %d slices (>= %.2f s each) taken round all cases in turn\n",
           tide_get_num_threads(), slices, seconds);
    for (; a < argc; a++)
        for (int b = 0; b < nbatch && ncase < MAX_CASES; b++, ncase++) {
            bench_case *c = &cases[ncase];
            model_name(argv[a], c->name, sizeof c->name);
            double sum = 0;
            if (!open_case(c, argv[a], batches[b]) || isnan(run_once(c, &sum))) {
                fprintf(stderr, "bench_onnx: %s (batch %lld): %s\n", argv[a],
                        (long long)batches[b], tide_last_error());
                return 1;
            }
            printf("# %s batch %lld: output checksum %.6g\n", c->name, (long long)c->batch, sum);
        }
    for (int s = 0; s < slices; s++)
        for (int i = 0; i < ncase; i++)
            if (!slice(&cases[i], s, seconds))
                return 1;
    for (int i = 0; i < ncase; i++) {
        report(&cases[i], slices, threads);
        tide_release(cases[i].x);
        tide_graph_free(cases[i].g);
    }
    if (reference)
        printf("sgemm_512_t%d_openblas: %.1f GFLOP/s\n", threads, sgemm_reference(seconds));
    return 0;
}
