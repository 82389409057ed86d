/*
 * bench_conv.c — how fast tide's conv2d (and its two gradients) runs on the CPU, next to the
 * GEMM it amounts to.
 *
 * A convolution of x [N, C, H, W] with w [O, C, kH, kW] is 2 * O * (N*outH*outW) * (C*kH*kW)
 * flops: exactly a GEMM with M = O, N = N*outH*outW, K = C*kH*kW. So the machine's reference
 * figure is one raw td_blas_sgemm of that shape on contiguous matrices (no im2col, no
 * dispatch), timed in alternation with the tide op so both see the same load on this shared
 * machine. The ratio says how much of what BLAS can do the convolution keeps.
 *
 * Layers: LeNet-5's two convolutions at batch 64, a ResNet basic-block convolution
 * (64 -> 64 channels, 3x3, padding 1, 56x56, batch 8), the ONNX conv net's two layers at
 * batch 1 and a DCGAN discriminator layer (64 -> 128, 4x4, stride 2, 32x32, batch 64). Every
 * line is "name: value unit";
 * lines starting with '#' say how the figures were taken.
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

#define MIN_REPS 5
#define MIN_SECONDS 0.5
#define MAX_REPS 1000

typedef struct layer {
    const char *name;
    int64_t n, c, h, w, o, kh, kw;
    int stride, pad;
} layer;

static const layer LAYERS[] = {
    {"lenet_c1", 64, 1, 32, 32, 6, 5, 5, 1, 0},
    {"lenet_c2", 64, 6, 14, 14, 16, 5, 5, 1, 0},
    {"resnet_3x3", 8, 64, 56, 56, 64, 3, 3, 1, 1},
    /* the ONNX conv net's two layers at batch 1 (bench/onnx_models.py) */
    {"cnn_b1_c1", 1, 3, 32, 32, 32, 3, 3, 1, 1},
    {"cnn_b1_c2", 1, 32, 16, 16, 64, 3, 3, 1, 1},
    /* a DCGAN discriminator's second layer: 4x4, stride 2 (the CPU's stride phases) */
    {"dcgan_d2", 64, 64, 32, 32, 128, 4, 4, 2, 1},
};

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static int compare_doubles(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

static double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof v[0], compare_doubles);
    return 0.5 * (v[(n - 1) / 2] + v[n / 2]);
}

/* The GEMM a layer amounts to, on its own contiguous matrices. */
typedef struct gemm_ref {
    int64_t m, n, k;
    float *a, *b, *c;
} gemm_ref;

static double gemm_once(const gemm_ref *g)
{
    double t0 = now_seconds();
    td_blas_sgemm(false, false, g->m, g->n, g->k, 1.0f, g->a, g->k, g->b, g->n, 0.0f, g->c, g->n);
    return now_seconds() - t0;
}

enum { FWD, GRAD_INPUT, GRAD_WEIGHT, NOPS };
static const char *const OP_NAMES[NOPS] = {"conv2d_fwd", "conv2d_grad_input", "conv2d_grad_weight"};

typedef struct operands {
    const layer *l;
    tide_tensor *x, *w, *g;
} operands;

static tide_tensor *run_op(int op, const operands *o)
{
    int s[2] = {o->l->stride, o->l->stride}, p[2] = {o->l->pad, o->l->pad}, d[2] = {1, 1};
    if (op == FWD)
        return tide_conv2d(o->x, o->w, NULL, s, p, d, 1);
    if (op == GRAD_INPUT) {
        int64_t hw[2] = {o->l->h, o->l->w};
        return tide_conv2d_grad_input(o->g, o->w, hw, s, p, d, 1);
    }
    int64_t khw[2] = {o->l->kh, o->l->kw};
    return tide_conv2d_grad_weight(o->x, o->g, khw, s, p, d, 1);
}

/* A few outputs of the forward convolution against the definition. */
static bool spot_check(const operands *o, const tide_tensor *out)
{
    const layer *l = o->l;
    const float *x = tide_data_ptr(o->x), *w = tide_data_ptr(o->w), *y = tide_data_ptr(out);
    int64_t oh = tide_size(out, 2), ow = tide_size(out, 3);
    for (int t = 0; t < 64; t++) {
        int64_t n = t % l->n, co = (t * 7) % l->o, i = (t * 5) % oh, j = (t * 11) % ow;
        double want = 0, scale = 0;
        for (int64_t c = 0; c < l->c; c++)
            for (int64_t a = 0; a < l->kh; a++)
                for (int64_t b = 0; b < l->kw; b++) {
                    int64_t ih = i * l->stride - l->pad + a, iw = j * l->stride - l->pad + b;
                    if (ih < 0 || ih >= l->h || iw < 0 || iw >= l->w)
                        continue;
                    double v = (double)x[((n * l->c + c) * l->h + ih) * l->w + iw] *
                               w[((co * l->c + c) * l->kh + a) * l->kw + b];
                    want += v;
                    scale += fabs(v);
                }
        double got = y[((n * l->o + co) * oh + i) * ow + j];
        if (fabs(got - want) > 1e-5 * scale + 1e-30) {
            fprintf(stderr, "bench_conv: %s: wrong output at (%lld, %lld, %lld, %lld): %g vs %g\n",
                    l->name, (long long)n, (long long)co, (long long)i, (long long)j, got, want);
            return false;
        }
    }
    return true;
}

static tide_tensor *random_tensor(int64_t a, int64_t b, int64_t c, int64_t d, uint32_t seed)
{
    int64_t shape[4] = {a, b, c, d};
    tide_tensor *t = tide_empty(4, shape, TIDE_FLOAT32);
    if (!t)
        return NULL;
    float *p = tide_mutable_data_ptr(t);
    for (int64_t i = 0; i < a * b * c * d; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (float)(seed >> 8) / (float)(1u << 24) - 0.5f;
    }
    return t;
}

static bool bench_layer(const layer *l)
{
    int64_t oh = (l->h + 2 * l->pad - l->kh) / l->stride + 1;
    int64_t ow = (l->w + 2 * l->pad - l->kw) / l->stride + 1;
    gemm_ref g = {l->o, l->n * oh * ow, l->c * l->kh * l->kw, NULL, NULL, NULL};
    double flops = 2.0 * (double)g.m * (double)g.n * (double)g.k;
    operands o = {l, random_tensor(l->n, l->c, l->h, l->w, 1),
                  random_tensor(l->o, l->c, l->kh, l->kw, 2), random_tensor(l->n, l->o, oh, ow, 3)};
    g.a = aligned_alloc(64, (size_t)((g.m * g.k * 4 + 63) / 64 * 64));
    g.b = aligned_alloc(64, (size_t)((g.k * g.n * 4 + 63) / 64 * 64));
    g.c = aligned_alloc(64, (size_t)((g.m * g.n * 4 + 63) / 64 * 64));
    bool ok = o.x && o.w && o.g && g.a && g.b && g.c;
    if (ok) {
        for (int64_t i = 0; i < g.m * g.k; i++)
            g.a[i] = (float)(i % 17) * 0.01f;
        for (int64_t i = 0; i < g.k * g.n; i++)
            g.b[i] = (float)(i % 13) * 0.01f;
        tide_tensor *first = run_op(FWD, &o);
        ok = first && spot_check(&o, first);
        if (!first)
            fprintf(stderr, "bench_conv: %s failed: %s\n", l->name, tide_last_error());
        tide_release(first);
    }
    printf("# %s: x [%lld, %lld, %lld, %lld], w [%lld, %lld, %lld, %lld], stride %d, padding %d; "
           "sgemm M=%lld N=%lld K=%lld; %.1f MFLOP per call\n",
           l->name, (long long)l->n, (long long)l->c, (long long)l->h, (long long)l->w,
           (long long)l->o, (long long)l->c, (long long)l->kh, (long long)l->kw, l->stride, l->pad,
           (long long)g.m, (long long)g.n, (long long)g.k, flops * 1e-6);
    for (int op = 0; ok && op < NOPS; op++) {
        static double op_gf[MAX_REPS], ref_gf[MAX_REPS], ratios[MAX_REPS];
        tide_release(run_op(op, &o)); /* warm-up: caches, allocator, thread pools */
        gemm_once(&g);
        int reps = 0;
        for (double started = now_seconds();
             reps < MAX_REPS && (reps < MIN_REPS || now_seconds() - started < MIN_SECONDS);
             reps++) {
            double rt = gemm_once(&g);
            double t0 = now_seconds();
            tide_tensor *r = run_op(op, &o);
            double ot = now_seconds() - t0;
            tide_release(r);
            if (!r) {
                fprintf(stderr, "bench_conv: %s %s failed: %s\n", l->name, OP_NAMES[op],
                        tide_last_error());
                ok = false;
                break;
            }
            op_gf[reps] = flops / ot * 1e-9;
            ref_gf[reps] = flops / rt * 1e-9;
            ratios[reps] = op_gf[reps] / ref_gf[reps];
        }
        if (!ok)
            break;
        double op_med = median_of(op_gf, reps), ref_med = median_of(ref_gf, reps);
        double ratio_med = median_of(ratios, reps);
        printf("%s_%s: %.1f GFLOP/s\n", l->name, OP_NAMES[op], op_gf[reps - 1]);
        printf("%s_%s_sgemm: %.1f GFLOP/s\n", l->name, OP_NAMES[op], ref_gf[reps - 1]);
        printf("%s_%s_ratio: %.2f\n", l->name, OP_NAMES[op], op_gf[reps - 1] / ref_gf[reps - 1]);
        printf("%s_%s_median: %.1f GFLOP/s (sgemm %.1f, ratio %.2f, %d runs)\n", l->name,
               OP_NAMES[op], op_med, ref_med, ratio_med, reps);
    }
    tide_release(o.x), tide_release(o.w), tide_release(o.g);
    free(g.a), free(g.b), free(g.c);
    return ok;
}

/* Arguments, if any, pick the layers whose names contain one of them. */
static bool wanted(const layer *l, int argc, char **argv)
{
    for (int i = 1; i < argc; i++)
        if (strstr(l->name, argv[i]))
            return true;
    return argc < 2;
}

int main(int argc, char **argv)
{
    printf("# tide bench_conv: float32, %d threads; each figure is the best of >= %d runs "
           "spanning >= %.1f s, runs alternating a raw td_blas_sgemm of the same M, N, K with the "
           "tide op (whole API call: dispatch, temporaries, result allocation); _median lines "
           "give the medians\n",
           tide_get_num_threads(), MIN_REPS, MIN_SECONDS);
    bool ok = true;
    for (size_t i = 0; i < sizeof LAYERS / sizeof LAYERS[0]; i++)
        if (wanted(&LAYERS[i], argc, argv))
            ok = bench_layer(&LAYERS[i]) && ok;
    return ok ? 0 : 1;
}
