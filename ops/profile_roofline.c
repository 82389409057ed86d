/*
 * profile_roofline.c — the profiler's two references, measured once per process on this
 * machine (docs/profile.md):
 *   STREAM triad  a[i] = b[i] + s·c[i] over three 16 MiB float arrays (larger than the caches
 *                 of the machines tide is tested on), on tide's own threads; 12 bytes per
 *                 element, STREAM's count (no write-allocate); the best of 4 passes.
 *   sgemm         a 512² float32 matmul through the CPU device's kernel (OpenBLAS), the best of
 *                 3 after a warm-up; 2·512³ FLOPs.
 * About 30 ms in all, before a profile's clock starts.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "dispatch.h"
#include "profile.h"

#define TRIAD_N (4 << 20)
#define SGEMM_N 512

typedef struct triad {
    float *a;
    const float *b, *c;
} triad;

static void triad_range(void *ctx, int64_t begin, int64_t end)
{
    triad *t = ctx;
    for (int64_t i = begin; i < end; i++)
        t->a[i] = t->b[i] + 3.0f * t->c[i];
}

static void fill_range(void *ctx, int64_t begin, int64_t end)
{
    triad *t = ctx; /* first touch on the threads that run the triad */
    for (int64_t i = begin; i < end; i++)
        t->a[i] = 0, ((float *)t->b)[i] = 1, ((float *)t->c)[i] = 2;
}

static double measure_stream(void)
{
    float *mem = malloc(sizeof(float) * 3 * (size_t)TRIAD_N);
    if (!mem)
        return 0;
    triad t = {mem, mem + TRIAD_N, mem + 2 * (size_t)TRIAD_N};
    td_parallel_for(TRIAD_N, 1 << 16, fill_range, &t);
    double best = 1e30;
    for (int rep = 0; rep < 4; rep++) {
        double t0 = td_profile_now_us();
        td_parallel_for(TRIAD_N, 1 << 16, triad_range, &t);
        double dt = td_profile_now_us() - t0;
        best = dt < best ? dt : best;
    }
    free(mem);
    return 12.0 * TRIAD_N / (best * 1e-6) / 1e9;
}

/* Through the CPU device's run, as an eager matmul runs: not recorded, not traced. */
static double measure_sgemm(void)
{
    tide_device *cpu = tide_cpu_device();
    int64_t shape[2] = {SGEMM_N, SGEMM_N};
    tide_tensor *m[3];
    for (int i = 0; i < 3; i++)
        m[i] = td_tensor_new("profile", cpu, 2, shape, TIDE_FLOAT32);
    double best = 1e30;
    if (m[0] && m[1] && m[2]) {
        for (int i = 1; i < 3; i++) {
            float *p = td_tensor_data(m[i]);
            for (int64_t k = 0; k < SGEMM_N * SGEMM_N; k++)
                p[k] = (float)(k % 7) * 0.25f - 0.75f;
        }
        tide_attrs attrs;
        memset(&attrs, 0, sizeof attrs);
        for (int rep = 0; rep < 4; rep++) {
            double t0 = td_profile_now_us();
            if (cpu->run(cpu, TIDE_OP_MATMUL, m[0], m + 1, 2, &attrs) < 0)
                break;
            double dt = td_profile_now_us() - t0;
            if (rep > 0 && dt < best)
                best = dt;
        }
    }
    for (int i = 0; i < 3; i++)
        tide_release(m[i]);
    return best < 1e30 ? 2.0 * SGEMM_N * SGEMM_N * SGEMM_N / (best * 1e-6) / 1e9 : 0;
}

/* "model name (tier)" of the CPU device (its describe hook). */
static void cpu_name(char *out, size_t n)
{
    snprintf(out, n, "unknown CPU");
    for (int i = 0; i < tide_device_count(); i++) {
        char name[64], about[256];
        if (tide_device_info(i, name, sizeof name, about, sizeof about) == 0 &&
            strcmp(name, "cpu") == 0 && about[0]) {
            snprintf(out, n, "%.150s", about);
            return;
        }
    }
}

static pthread_once_t once = PTHREAD_ONCE_INIT;
static double stream_gbps, sgemm_gflops;
static char cpu[160];

static void measure(void)
{
    stream_gbps = measure_stream();
    sgemm_gflops = measure_sgemm();
    cpu_name(cpu, sizeof cpu);
    /* a zero would make every rate infinite against it */
    if (stream_gbps <= 0)
        stream_gbps = 1;
    if (sgemm_gflops <= 0)
        sgemm_gflops = 1;
}

void td_profile_roofline(double *stream, double *sgemm, char *name, size_t n)
{
    pthread_once(&once, measure);
    if (stream)
        *stream = stream_gbps;
    if (sgemm)
        *sgemm = sgemm_gflops;
    if (name && n)
        snprintf(name, n, "%s", cpu);
}
