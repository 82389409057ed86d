/*
 * bench_half.c — float16 and bfloat16 on the CPU, each figure beside a reference measured in
 * the same run, at the tier td_cpu_isa() picks (TIDE_CPU_ISA caps it):
 *   the CPU model and tier; STREAM copy and triad over float32 arrays of 16M elements, on
 *   tide's thread pool;
 *   casts f32->bf16, bf16->f32, f32->f16, f16->f32 on 16M elements through tide_copy_ into a
 *   tensor made beforehand (the kernel; tide_cast also allocates, printed apart), as bytes
 *   moved per second over the faster of copy and triad (target >= 0.8);
 *   bf16 and f16 matmul 1024x1024 through tide (bf16 on AMX tiles where the CPU has them at
 *   this tier, else cast up, sgemm, cast down: ops/dispatch.c) against the same done directly:
 *   the same conversion kernels (devices/cpu/cpu_half.h) and OpenBLAS's sgemm split by rows
 *   over tide's pool (target >= 0.9), and against that sgemm alone on float32 operands (bf16
 *   on tiles: target >= 1.5x);
 *   tanh(x*a+b)*sigmoid(x)+0.25 on 4M float16: eager against the jit (a trace session per call,
 *   as tide.jit does).
 * Every comparison alternates its contenders in slices and reports medians (the VM drifts).
 * Prints `name: value unit` lines; a target line ends in "met" or "NOT met".
 */
#pragma GCC optimize("O3")
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../devices/cpu/cpu_blas.h"
#include "../devices/cpu/cpu_half.h"
#include "../devices/cpu/cpu_isa.h"
#include "../devices/cpu/cpu_matmul_bf16.h"
#include "tensor.h"
#include "tide.h"

#define CAST_N ((int64_t)16 * 1024 * 1024)
#define CHAIN_N ((int64_t)4 * 1024 * 1024)
#define MM 1024
#define SLICES 11

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, cmp_double);
    return v[n / 2];
}

/* ---- threads: job(tid, nthreads, arg) once per thread of tide's own pool, the one tide's kernels
 * run on (so OpenBLAS sees the same threads from tide and from here) ---- */

typedef void (*job_fn)(int tid, int nthreads, void *arg);
typedef struct job_call {
    job_fn fn;
    int nthreads;
    void *arg;
} job_call;

static void job_range(void *p, int64_t begin, int64_t end)
{
    job_call *c = p;
    for (int64_t t = begin; t < end; t++)
        c->fn((int)t, c->nthreads, c->arg);
}

static void parallel(job_fn fn, void *arg)
{
    int nt = tide_get_num_threads();
    job_call c = {fn, nt < 1 ? 1 : nt, arg};
    td_parallel_for(c.nthreads, 1, job_range, &c);
}

static void share(int tid, int nt, int64_t n, int64_t *lo, int64_t *hi)
{
    int64_t blocks = (n + 15) / 16;
    *lo = blocks * tid / nt * 16, *hi = blocks * (tid + 1) / nt * 16;
    *lo = *lo < n ? *lo : n, *hi = *hi < n ? *hi : n;
}

/* ---- STREAM copy and triad ------------------------------------------------------------ */

typedef struct stream_arg {
    float *a;
    const float *b, *c;
    int64_t n;
    int kind; /* 0 copy a = b, 1 triad a = b + 3 c */
} stream_arg;

/* plain loops, kept from becoming memcpy calls (glibc's large-copy path is not STREAM's) */
__attribute__((optimize("no-tree-loop-distribute-patterns"))) static void stream_job(int tid,
                                                                                     int nt,
                                                                                     void *p)
{
    stream_arg *s = p;
    int64_t lo, hi;
    share(tid, nt, s->n, &lo, &hi);
    float *restrict a = s->a;
    const float *restrict b = s->b, *restrict c = s->c;
    if (s->kind == 0)
        for (int64_t i = lo; i < hi; i++)
            a[i] = b[i];
    else
        for (int64_t i = lo; i < hi; i++)
            a[i] = b[i] + 3.0f * c[i];
}

/* ---- casts -------------------------------------------------------------------------------- */

typedef struct cast_case {
    const char *name;
    tide_dtype from, to;
} cast_case;

static double time_copy(tide_tensor *dst, const tide_tensor *src)
{
    double t = now();
    if (tide_copy_(dst, src) != 0)
        fprintf(stderr, "tide_copy_: %s\n", tide_last_error());
    return now() - t;
}

static void bench_casts(void)
{
    int64_t n = CAST_N, shape[1] = {CAST_N};
    float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n), *c = malloc(sizeof(float) * n);
    for (int64_t i = 0; i < n; i++)
        a[i] = 0, b[i] = (float)(i % 1000) * 0.001f - 0.5f, c[i] = (float)(i % 777) * 0.25f;
    stream_arg copy = {a, b, NULL, n, 0}, triad = {a, b, c, n, 1};
    tide_tensor *t32 = tide_from_data(b, 1, shape, TIDE_FLOAT32);
    tide_tensor *o32 = tide_empty(1, shape, TIDE_FLOAT32);
    tide_tensor *t16[2] = {tide_cast(t32, TIDE_BFLOAT16), tide_cast(t32, TIDE_FLOAT16)};
    static const cast_case cases[4] = {{"cast_f32_to_bf16", TIDE_FLOAT32, TIDE_BFLOAT16},
                                       {"cast_bf16_to_f32", TIDE_BFLOAT16, TIDE_FLOAT32},
                                       {"cast_f32_to_f16", TIDE_FLOAT32, TIDE_FLOAT16},
                                       {"cast_f16_to_f32", TIDE_FLOAT16, TIDE_FLOAT32}};
    double tc[4][SLICES], ta[4][SLICES], tcopy[SLICES], ttriad[SLICES];
    for (int s = 0; s < SLICES; s++) {
        double t = now();
        parallel(stream_job, &copy);
        tcopy[s] = now() - t;
        t = now();
        parallel(stream_job, &triad);
        ttriad[s] = now() - t;
        for (int k = 0; k < 4; k++) {
            tide_tensor *half = t16[cases[k].from == TIDE_FLOAT16 || cases[k].to == TIDE_FLOAT16];
            bool down = cases[k].from == TIDE_FLOAT32;
            tc[k][s] = time_copy(down ? half : o32, down ? t32 : half);
            t = now();
            tide_tensor *r = tide_cast(down ? t32 : half, cases[k].to);
            ta[k][s] = now() - t;
            tide_release(r);
        }
    }
    double copy_bw = 8.0 * n / median(tcopy, SLICES), triad_bw = 12.0 * n / median(ttriad, SLICES);
    double ref = copy_bw > triad_bw ? copy_bw : triad_bw;
    printf("stream_copy_f32: %.2f GB/s (16M floats, %d threads)\n", copy_bw / 1e9,
           tide_get_num_threads());
    printf("stream_triad_f32: %.2f GB/s\n", triad_bw / 1e9);
    for (int k = 0; k < 4; k++) {
        double bw = 6.0 * n / median(tc[k], SLICES), ratio = bw / ref;
        printf("%s: %.2f GB/s, %.2f of STREAM copy, %.2f of triad; tide_cast with its allocation "
               "%.2f ms\n", cases[k].name, bw / 1e9, bw / copy_bw, bw / triad_bw,
               median(ta[k], SLICES) * 1e3);
        printf("%s_target: %.2f of the faster of copy and triad (target >= 0.8: %s)\n",
               cases[k].name, ratio, ratio >= 0.8 ? "met" : "NOT met");
    }
    tide_release(t32), tide_release(o32), tide_release(t16[0]), tide_release(t16[1]);
    free(a), free(b), free(c);
}

/* ---- matmul: tide against convert + sgemm done here ---------------------------------------- */

typedef struct conv_arg {
    const void *src;
    void *dst;
    int64_t n;
    int kind; /* 0: 16-bit -> f32, 1: f32 -> 16-bit */
    bool bf;
} conv_arg;

static void conv_job(int tid, int nt, void *p)
{
    conv_arg *c = p;
    const td_half_kernels *k = td_half_kernels_current();
    int64_t lo, hi;
    share(tid, nt, c->n, &lo, &hi);
    if (c->kind == 0)
        (c->bf ? k->bf16_to_f32 : k->f16_to_f32)(hi - lo, (float *)c->dst + lo,
                                                 (const uint16_t *)c->src + lo);
    else
        (c->bf ? k->f32_to_bf16 : k->f32_to_f16)(hi - lo, (uint16_t *)c->dst + lo,
                                                 (const float *)c->src + lo);
}

typedef struct gemm_arg {
    const float *a, *b;
    float *c;
} gemm_arg;

static void gemm_job(int tid, int nt, void *p)
{
    gemm_arg *g = p;
    int64_t r0 = (int64_t)MM * tid / nt, r1 = (int64_t)MM * (tid + 1) / nt;
    if (r1 > r0)
        td_blas_sgemm(false, false, r1 - r0, MM, MM, 1.0f, g->a + r0 * MM, MM, g->b, MM, 0.0f,
                      g->c + r0 * MM, MM);
}

static void direct_matmul(const uint16_t *a16, const uint16_t *b16, uint16_t *c16, float *a,
                          float *b, float *c, bool bf)
{
    int64_t n = (int64_t)MM * MM;
    conv_arg ca = {a16, a, n, 0, bf}, cb = {b16, b, n, 0, bf}, cc = {c, c16, n, 1, bf};
    gemm_arg g = {a, b, c};
    parallel(conv_job, &ca);
    parallel(conv_job, &cb);
    parallel(gemm_job, &g);
    parallel(conv_job, &cc);
}

static void bench_matmul(void)
{
    if (td_blas_ready("bench_half") < 0) {
        printf("# matmul skipped: %s\n", tide_last_error());
        return;
    }
    int64_t shape[2] = {MM, MM}, n = (int64_t)MM * MM;
    float *v = malloc(sizeof(float) * n);
    float *a = malloc(sizeof(float) * n), *b = malloc(sizeof(float) * n), *c = malloc(sizeof(float) * n);
    uint16_t *c16 = malloc(sizeof(uint16_t) * n);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)((i * 7919) % 2001) / 1000.0f - 1.0f;
    tide_tensor *x = tide_from_data(v, 2, shape, TIDE_FLOAT32);
    for (int bf = 1; bf >= 0; bf--) {
        tide_tensor *h = tide_cast(x, bf ? TIDE_BFLOAT16 : TIDE_FLOAT16);
        const uint16_t *h16 = tide_data_ptr(h);
        double tt[SLICES], td[SLICES], ts[SLICES];
        for (int s = 0; s < SLICES; s++) {
            double t = now();
            tide_tensor *r = tide_matmul(h, h);
            tt[s] = now() - t;
            tide_release(r);
            t = now();
            direct_matmul(h16, h16, c16, a, b, c, bf);
            td[s] = now() - t;
            gemm_arg g = {a, b, c}; /* float32 operands: what the product costs without casts */
            t = now();
            parallel(gemm_job, &g);
            ts[s] = now() - t;
        }
        double flop = 2.0 * MM * MM * MM, gt = flop / median(tt, SLICES) / 1e9;
        double gd = flop / median(td, SLICES) / 1e9, gs = flop / median(ts, SLICES) / 1e9;
        const char *name = bf ? "matmul_bf16_1024" : "matmul_f16_1024";
        bool tiles = bf && td_cpu_bf16_native();
        printf("%s_tide: %.1f GFLOP/s (%s)\n", name, gt,
               bf ? td_cpu_bf16_path_name(td_cpu_bf16_path()) : "float32 between casts");
        printf("%s_convert_sgemm: %.1f GFLOP/s (this tier's conversion kernels + OpenBLAS sgemm "
               "by rows on %d threads)\n", name, gd, tide_get_num_threads());
        printf("%s_sgemm_f32: %.1f GFLOP/s (OpenBLAS sgemm alone on float32 operands)\n", name,
               gs);
        printf("%s_target: %.2f of convert-and-sgemm (target >= 0.9: %s)\n", name, gt / gd,
               gt / gd >= 0.9 ? "met" : "NOT met");
        if (tiles)
            printf("%s_vs_sgemm_target: %.2f x sgemm (target >= 1.5 where the CPU multiplies "
                   "bfloat16 natively: %s)\n", name, gt / gs, gt / gs >= 1.5 ? "met" : "NOT met");
        tide_release(h);
    }
    tide_release(x);
    free(v), free(a), free(b), free(c), free(c16);
}

/* ---- a jitted float16 chain against eager --------------------------------------------------- */

static tide_tensor *chain(tide_tensor *x, tide_tensor *a, tide_tensor *b)
{
    tide_tensor *t1 = tide_mul(x, a), *t2 = tide_add(t1, b), *t3 = tide_tanh(t2);
    tide_tensor *t4 = tide_sigmoid(x), *t5 = tide_mul(t3, t4), *t6 = tide_add_scalar(t5, 0.25);
    tide_release(t1), tide_release(t2), tide_release(t3), tide_release(t4), tide_release(t5);
    return t6;
}

static void bench_chain(void)
{
    int64_t shape[1] = {CHAIN_N};
    tide_tensor *in[3];
    float *v = malloc(sizeof(float) * CHAIN_N);
    for (int k = 0; k < 3; k++) {
        for (int64_t i = 0; i < CHAIN_N; i++)
            v[i] = (float)(((i + k) * 104729) % 4001) / 1000.0f - 2.0f;
        tide_tensor *f = tide_from_data(v, 1, shape, TIDE_FLOAT32);
        in[k] = tide_cast(f, TIDE_FLOAT16);
        tide_release(f);
    }
    double te[SLICES], tj[SLICES];
    for (int s = 0; s < SLICES; s++) {
        double t = now();
        tide_tensor *r = chain(in[0], in[1], in[2]);
        te[s] = now() - t;
        tide_release(r);
        t = now();
        tide_jit_trace_begin(NULL, NULL, NULL);
        r = chain(in[0], in[1], in[2]);
        tide_jit_trace_end();
        tj[s] = now() - t;
        tide_release(r);
    }
    double me = median(te, SLICES), mj = median(tj, SLICES);
    printf("chain_f16_eager: %.2f ms (tanh(x*a+b)*sigmoid(x)+0.25, 4M float16)\n", me * 1e3);
    printf("chain_f16_jit: %.2f ms, %.2f x eager\n", mj * 1e3, me / mj);
    for (int k = 0; k < 3; k++)
        tide_release(in[k]);
    free(v);
}

int main(void)
{
    char model[512] = "unknown";
    FILE *f = fopen("/proc/cpuinfo", "r");
    char line[512];
    while (f && fgets(line, sizeof line, f))
        if (strncmp(line, "model name", 10) == 0) {
            char *p = strchr(line, ':');
            snprintf(model, sizeof model, "%s", p ? p + 2 : line);
            model[strcspn(model, "\n")] = 0;
            break;
        }
    if (f)
        fclose(f);
    const char *cap = getenv("TIDE_CPU_ISA");
    printf("cpu: %s\n", model);
    printf("cpu_isa: %s (TIDE_CPU_ISA=%s), threads %d\n", td_cpu_isa_name(td_cpu_isa()),
           cap ? cap : "unset", tide_get_num_threads());
    bench_casts();
    bench_matmul();
    bench_chain();
    return 0;
}
