/*
 * bench_conv_family.c — conv1d, conv3d and conv_transpose2d (forward and both gradients) on the
 * CPU next to the GEMM each amounts to. These ops are composites of the conv2d primitives
 * (ops/conv_nd.c): conv1d is a conv2d of height 1, conv3d a depth im2col plus one conv2d,
 * conv_transpose2d is conv2d_grad_input; their gradients come from autograd.
 *
 * Reference: one raw td_blas_sgemm of the op's M, N, K (M = output channels, N = output
 * positions, K = C/groups * kernel volume for a convolution; for the transposed convolution,
 * whose work is conv2d_grad_input's, M = Cout * kernel area, N = input positions, K = Cin),
 * on contiguous matrices, alternating with the tide op in slices, medians over the slices;
 * every direction does the same 2*M*N*K flops. Gradients are timed as one tide_backward from
 * the op's output with only x (grad input) or only w (grad weight) requiring grad; the forward
 * that builds the graph is not timed. Target: each ratio >= 0.7.
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

#define SLICES 9
#define MIN_SLICE_SECONDS 0.05
#define TARGET 0.7

typedef struct layer {
    const char *name;
    int nd;
    bool transposed;
    int64_t n, c, o, in[3], k[3];
    int stride, pad;
} layer;

static const layer LAYERS[] = {
    /* a 1-D audio/sequence layer: 128 -> 128 channels, k 3, length 1024, batch 8 */
    {"conv1d", 1, false, 8, 128, 128, {1024}, {3}, 1, 1},
    /* a 3-D video/volume layer: 32 -> 64 channels, 3x3x3, 16x28x28, batch 2 */
    {"conv3d", 3, false, 2, 32, 64, {16, 28, 28}, {3, 3, 3}, 1, 1},
    /* a decoder upsampling layer: 128 -> 64 channels, 4x4, stride 2, 28x28 -> 56x56, batch 8 */
    {"conv_transpose2d", 2, true, 8, 128, 64, {28, 28}, {4, 4}, 2, 1},
};

static tide_tensor *random_tensor(int ndim, const int64_t *shape, uint32_t seed)
{
    tide_tensor *t = tide_empty(ndim, shape, TIDE_FLOAT32);
    if (!t)
        return NULL;
    float *p = tide_mutable_data_ptr(t);
    for (int64_t i = 0; i < tide_numel(t); i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (float)(seed >> 8) / (float)(1u << 24) - 0.5f;
    }
    return t;
}

enum { FWD, GRAD_INPUT, GRAD_WEIGHT, NDIRS };
static const char *const DIR_NAMES[NDIRS] = {"fwd", "grad_input", "grad_weight"};

typedef struct bench {
    const layer *l;
    tide_tensor *x, *w, *g;
    int64_t m, n, k;
    float *a, *b, *c;
} bench;

static tide_tensor *forward(const bench *b, const tide_tensor *x, const tide_tensor *w)
{
    int s[3] = {b->l->stride, b->l->stride, b->l->stride}, p[3] = {b->l->pad, b->l->pad, b->l->pad};
    return b->l->transposed ? tide_conv_transpose_nd(b->l->nd, x, w, NULL, s, p, NULL, 1, NULL)
                            : tide_conv_nd(b->l->nd, x, w, NULL, s, p, NULL, 1);
}

/* Seconds for one run of direction dir (NAN on failure). */
static double time_dir(const bench *b, int dir)
{
    if (dir == FWD) {
        double t0 = now_seconds();
        tide_tensor *y = forward(b, b->x, b->w);
        double t = now_seconds() - t0;
        tide_release(y);
        return y ? t : NAN;
    }
    tide_tensor *x = tide_detach(b->x), *w = tide_detach(b->w);
    tide_requires_grad_(dir == GRAD_INPUT ? x : w, true);
    tide_tensor *y = forward(b, x, w);
    double t0 = now_seconds();
    int rc = y ? tide_backward(y, b->g, false) : -1;
    double t = now_seconds() - t0;
    tide_release(y);
    tide_release(x);
    tide_release(w);
    return rc == 0 ? t : NAN;
}

static double time_gemm(const bench *b)
{
    double t0 = now_seconds();
    td_blas_sgemm(false, false, b->m, b->n, b->k, 1.0f, b->a, b->k, b->b, b->n, 0.0f, b->c, b->n);
    return now_seconds() - t0;
}

/* Alternating slices of op runs and sgemm runs, each slice >= MIN_SLICE_SECONDS; the median
 * per-call time of each. */
static bool measure(const bench *b, int dir, double *op_s, double *ref_s)
{
    double ops[SLICES], refs[SLICES];
    if (isnan(time_dir(b, dir))) /* warm-up */
        return false;
    time_gemm(b);
    for (int s = 0; s < SLICES; s++) {
        double total = 0;
        int runs = 0;
        while (total < MIN_SLICE_SECONDS || runs < 2) {
            double t = time_dir(b, dir);
            if (isnan(t))
                return false;
            total += t, runs++;
        }
        ops[s] = total / runs;
        total = 0, runs = 0;
        while (total < MIN_SLICE_SECONDS || runs < 2)
            total += time_gemm(b), runs++;
        refs[s] = total / runs;
    }
    *op_s = median_of(ops, SLICES);
    *ref_s = median_of(refs, SLICES);
    return true;
}

static bool run_layer(const layer *l)
{
    int nd = l->nd;
    int64_t xs[5] = {l->n, l->c}, ws[5], ys[5] = {l->n, l->o}, in_pos = l->n, out_pos = l->n,
            kvol = 1;
    ws[0] = l->transposed ? l->c : l->o;
    ws[1] = l->transposed ? l->o : l->c;
    for (int i = 0; i < nd; i++) {
        int64_t out = l->transposed ? (l->in[i] - 1) * l->stride - 2 * l->pad + l->k[i]
                                    : (l->in[i] + 2 * l->pad - l->k[i]) / l->stride + 1;
        xs[2 + i] = l->in[i], ws[2 + i] = l->k[i], ys[2 + i] = out;
        in_pos *= l->in[i], out_pos *= out, kvol *= l->k[i];
    }
    bench b = {.l = l, .x = random_tensor(nd + 2, xs, 1), .w = random_tensor(nd + 2, ws, 2),
               .g = random_tensor(nd + 2, ys, 3)};
    b.m = l->transposed ? l->o * kvol : l->o;
    b.n = l->transposed ? in_pos : out_pos;
    b.k = l->transposed ? l->c : l->c * kvol;
    b.a = calloc((size_t)(b.m * b.k), sizeof(float));
    b.b = calloc((size_t)(b.k * b.n), sizeof(float));
    b.c = calloc((size_t)(b.m * b.n), sizeof(float));
    bool ok = b.x && b.w && b.g && b.a && b.b && b.c;
    double flops = 2.0 * (double)b.m * (double)b.n * (double)b.k;
    printf("# %s: x [%lld, %lld, ...], weight dims %lld x %lld, kernel volume %lld, stride %d, "
           "padding %d; sgemm M=%lld N=%lld K=%lld; %.0f MFLOP per call\n",
           l->name, (long long)l->n, (long long)l->c, (long long)ws[0], (long long)ws[1],
           (long long)kvol, l->stride, l->pad, (long long)b.m, (long long)b.n, (long long)b.k,
           flops * 1e-6);
    for (int dir = 0; ok && dir < NDIRS; dir++) {
        double op_s, ref_s;
        if (!measure(&b, dir, &op_s, &ref_s)) {
            fprintf(stderr, "bench_conv_family: %s %s failed: %s\n", l->name, DIR_NAMES[dir],
                    tide_last_error());
            ok = false;
            break;
        }
        double ratio = ref_s / op_s;
        printf("%s_%s: %.1f GFLOP/s\n", l->name, DIR_NAMES[dir], flops / op_s * 1e-9);
        printf("%s_%s_sgemm: %.1f GFLOP/s\n", l->name, DIR_NAMES[dir], flops / ref_s * 1e-9);
        printf("%s_%s_ratio: %.2f (target >= %.1f: %s)\n", l->name, DIR_NAMES[dir], ratio,
               TARGET, ratio >= TARGET ? "met" : "NOT met");
    }
    tide_release(b.x), tide_release(b.w), tide_release(b.g);
    free(b.a), free(b.b), free(b.c);
    return ok;
}

/* Arguments, if any, pick the layers whose names contain one of them. */
int main(int argc, char **argv)
{
    print_cpu_model();
    printf("cpu_isa: %s\n", td_cpu_isa_name(td_cpu_isa()));
    printf("# tide bench_conv_family: float32, %d threads; medians of %d alternating slices "
           "(>= %.2f s each) of the tide op and a raw td_blas_sgemm of the same M, N, K\n",
           tide_get_num_threads(), SLICES, MIN_SLICE_SECONDS);
    bool ok = true;
    for (size_t i = 0; i < sizeof LAYERS / sizeof LAYERS[0]; i++) {
        bool want = argc < 2;
        for (int a = 1; a < argc; a++)
            want = want || strstr(LAYERS[i].name, argv[a]) != NULL;
        if (want)
            ok = run_layer(&LAYERS[i]) && ok;
    }
    tide_shutdown();
    return ok ? 0 : 1;
}
