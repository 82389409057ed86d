/*
 * bench_jit.c — the jit against eager tide, with the machine's STREAM triad measured in the
 * same run (issue 6 targets):
 *   chain tanh(x*a+b)*sigmoid(x)+c on 16M float32 (a, b, c numbers): jit vs eager, GB/s
 *   chain (x*a+b)*x-c: GB/s vs the same run's float32 STREAM triad
 *   softmax over the last dim of 4096x4096 float32: jit vs eager
 *   cache-hit cost per recorded op (a 64-op chain on 16 elements), compile time
 *   products with epilogues: conv2d + bias + relu (batch 64), the grad-input conv times a mask,
 *   softmax(q k^T / 8) over 64 heads of 256 x 256, a batched linear + bias + relu: eager, the
 *   jit with the epilogue run apart (TIDE_JIT_EPILOGUES=0), and the jit with it fused
 * Every jit call here is a full trace session (what tide.jit does per call): trace, key, cache
 * lookup, run. Prints `name: value unit` lines.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tensor.h"
#include "tide.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef tide_tensor *(*fn1)(tide_tensor *x);

static tide_tensor *chain_tanh(tide_tensor *x)
{
    tide_tensor *t1 = tide_mul_scalar(x, 1.5), *t2 = tide_add_scalar(t1, 0.25), *t3 = tide_tanh(t2);
    tide_tensor *t4 = tide_sigmoid(x), *t5 = tide_mul(t3, t4), *t6 = tide_add_scalar(t5, 0.5);
    tide_release(t1), tide_release(t2), tide_release(t3), tide_release(t4), tide_release(t5);
    return t6;
}

static tide_tensor *chain_axpb(tide_tensor *x)
{
    tide_tensor *t1 = tide_mul_scalar(x, 1.5), *t2 = tide_add_scalar(t1, 0.25);
    tide_tensor *t3 = tide_mul(t2, x), *t4 = tide_sub_scalar(t3, 0.5);
    tide_release(t1), tide_release(t2), tide_release(t3);
    return t4;
}

static tide_tensor *softmax_last(tide_tensor *x) { return tide_softmax(x, -1); }

static tide_tensor *long_chain(tide_tensor *x)
{
    tide_tensor *cur = tide_retain(x);
    for (int i = 0; i < 64; i++) {
        tide_tensor *n = (i & 1) ? tide_mul_scalar(cur, 0.999) : tide_add_scalar(cur, 0.001);
        tide_release(cur);
        cur = n;
    }
    return cur;
}

/* the products: the operands ride in a static array so the fn1 signature stays one tensor */
static tide_tensor *prod_in[4];
static const int ONE[2] = {1, 1};

static tide_tensor *conv_bias_relu(tide_tensor *x)
{
    tide_tensor *c = tide_conv2d(x, prod_in[0], prod_in[1], ONE, ONE, ONE, 1), *r = tide_relu(c);
    tide_release(c);
    return r;
}

static tide_tensor *conv_grad_mask(tide_tensor *g) /* the backward of conv through a relu */
{
    int64_t hw[2] = {tide_size(prod_in[2], 2), tide_size(prod_in[2], 3)};
    tide_tensor *gi = tide_conv2d_grad_input(g, prod_in[0], hw, ONE, ONE, ONE, 1);
    tide_tensor *r = tide_mul(gi, prod_in[2]);
    tide_release(gi);
    return r;
}

static tide_tensor *attention_scores(tide_tensor *q)
{
    tide_tensor *kt = tide_transpose(prod_in[3], 2, 3), *s = tide_matmul(q, kt);
    tide_tensor *s8 = tide_mul_scalar(s, 0.125), *p = tide_softmax(s8, -1);
    tide_release(kt), tide_release(s), tide_release(s8);
    return p;
}

static tide_tensor *batched_linear_relu(tide_tensor *x)
{
    tide_tensor *m = tide_matmul(x, prod_in[0]), *mb = tide_add(m, prod_in[1]);
    tide_tensor *r = tide_relu(mb);
    tide_release(m), tide_release(mb);
    return r;
}

static tide_tensor *run_jit(fn1 f, tide_tensor *x)
{
    tide_jit_trace_begin(NULL, NULL, NULL);
    tide_tensor *y = f(x);
    if (tide_jit_trace_end() < 0)
        fprintf(stderr, "jit: %s\n", tide_last_error());
    return y;
}

/* seconds per call, best of several batches */
static double time_it(fn1 f, tide_tensor *x, bool jit, int reps)
{
    tide_release(jit ? run_jit(f, x) : f(x)); /* warm: compile, caches */
    double best = 1e30;
    for (int b = 0; b < 3; b++) {
        double t0 = now();
        for (int r = 0; r < reps; r++)
            tide_release(jit ? run_jit(f, x) : f(x));
        double t = (now() - t0) / reps;
        if (t < best)
            best = t;
    }
    return best;
}

/* ---- STREAM triad (float32, the footprint of a tide op), threaded like tide's kernels ---- */
typedef float f32x16 __attribute__((vector_size(64)));
__attribute__((target_clones("avx512f", "avx2", "default"))) static void
triad(float *restrict a, const float *restrict b, const float *restrict c, int64_t n, float s)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        f32x16 vb, vc;
        memcpy(&vb, b + i, sizeof vb);
        memcpy(&vc, c + i, sizeof vc);
        f32x16 va = vb + s * vc;
        memcpy(a + i, &va, sizeof va);
    }
    for (; i < n; i++)
        a[i] = b[i] + s * c[i];
}

typedef struct triad_ctx {
    float *a, *b, *c;
} triad_ctx;

static void triad_range(void *p, int64_t lo, int64_t hi)
{
    triad_ctx *t = p;
    triad(t->a + lo, t->b + lo, t->c + lo, hi - lo, 3.0f);
}

static double stream_gbs(int64_t n)
{
    triad_ctx t = {td_cache_alloc(n * 4), td_cache_alloc(n * 4), td_cache_alloc(n * 4)};
    for (int64_t i = 0; i < n; i++)
        t.a[i] = 0, t.b[i] = 1, t.c[i] = 2;
    double best = 1e30;
    for (int r = 0; r < 10; r++) {
        double t0 = now();
        td_parallel_for(n, 1 << 16, triad_range, &t);
        double e = now() - t0;
        if (e < best)
            best = e;
    }
    td_cache_free(t.a, n * 4), td_cache_free(t.b, n * 4), td_cache_free(t.c, n * 4);
    return 3.0 * n * 4 / best / 1e9;
}

int main(void)
{
    int64_t n = 16 * 1024 * 1024;
    printf("threads: %d\n", tide_get_num_threads());
    tide_manual_seed(1);
    tide_tensor *x = tide_randn(1, &n, TIDE_FLOAT32);
    double stream = stream_gbs(n);
    printf("stream_triad_f32: %.1f GB/s\n", stream);

    double te = time_it(chain_tanh, x, false, 3), tj = time_it(chain_tanh, x, true, 3);
    printf("chain_tanh_eager: %.2f ms (%.1f GB/s)\n", te * 1e3, 8.0 * n / te / 1e9);
    printf("chain_tanh_jit: %.2f ms (%.1f GB/s)\n", tj * 1e3, 8.0 * n / tj / 1e9);
    printf("chain_tanh_speedup: %.2f x (target >= 3, >= 20 GB/s)\n", te / tj);

    te = time_it(chain_axpb, x, false, 3);
    tj = time_it(chain_axpb, x, true, 3);
    printf("chain_axpb_eager: %.2f ms (%.1f GB/s)\n", te * 1e3, 8.0 * n / te / 1e9);
    printf("chain_axpb_jit: %.2f ms (%.1f GB/s)\n", tj * 1e3, 8.0 * n / tj / 1e9);
    printf("chain_axpb_jit_vs_stream: %.2f (target >= 0.6)\n", 8.0 * n / tj / 1e9 / stream);
    tide_release(x);

    int64_t sq[2] = {4096, 4096};
    tide_tensor *s = tide_randn(2, sq, TIDE_FLOAT32);
    te = time_it(softmax_last, s, false, 3);
    tj = time_it(softmax_last, s, true, 3);
    printf("softmax_4096x4096_eager: %.2f ms\n", te * 1e3);
    printf("softmax_4096x4096_jit: %.2f ms\n", tj * 1e3);
    printf("softmax_speedup: %.2f x (target >= 2)\n", te / tj);
    tide_release(s);

    int64_t small = 16;
    tide_tensor *v = tide_randn(1, &small, TIDE_FLOAT32);
    te = time_it(long_chain, v, false, 200);
    tj = time_it(long_chain, v, true, 200);
    printf("hit_64op_eager: %.1f us/call (%.2f us/op)\n", te * 1e6, te * 1e6 / 64);
    printf("hit_64op_jit: %.1f us/call (%.2f us/op; target <= 2 us/op beyond kernels)\n",
           tj * 1e6, tj * 1e6 / 64);

    /* products with epilogues: eager, the jit with the product apart, the jit with it fused */
    struct {
        const char *name;
        fn1 f;
        int nd;
        int64_t shape[4], w[4], b[4], extra[4];
    } prods[] = {
        {"conv3x3_bias_relu_64x32x28x28", conv_bias_relu, 4, {64, 32, 28, 28}, {64, 32, 3, 3},
         {64}, {0}},
        {"conv3x3_grad_input_mask_64x64x28x28", conv_grad_mask, 4, {64, 64, 28, 28},
         {64, 32, 3, 3}, {0}, {64, 32, 28, 28}},
        {"attention_softmax_8x8x256x256", attention_scores, 4, {8, 8, 256, 64}, {0}, {0},
         {8, 8, 256, 64}},
        {"bmm_bias_relu_32x128x256x512", batched_linear_relu, 3, {32, 128, 256}, {1, 256, 512},
         {512}, {0}},
    };
    for (size_t i = 0; i < sizeof prods / sizeof prods[0]; i++) {
        tide_tensor *in = tide_randn(prods[i].nd, prods[i].shape, TIDE_FLOAT32);
        int wn = prods[i].w[0] ? (prods[i].nd == 3 ? 3 : 4) : 0;
        prod_in[0] = wn ? tide_randn(wn, prods[i].w, TIDE_FLOAT32) : NULL;
        prod_in[1] = prods[i].b[0] ? tide_randn(1, prods[i].b, TIDE_FLOAT32) : NULL;
        prod_in[2] = prods[i].extra[0] && wn ? tide_randn(4, prods[i].extra, TIDE_FLOAT32) : NULL;
        prod_in[3] = prods[i].extra[0] && !wn ? tide_randn(4, prods[i].extra, TIDE_FLOAT32) : NULL;
        /* the three in turn, five rounds, the best of each: a drift of the shared machine's
         * speed does not land on one of them */
        double ta = 1e30;
        te = tj = 1e30;
        for (int round = 0; round < 5; round++) {
            double t = time_it(prods[i].f, in, false, 3);
            te = t < te ? t : te;
            setenv("TIDE_JIT_EPILOGUES", "0", 1);
            tide_jit_cache_clear();
            t = time_it(prods[i].f, in, true, 3);
            ta = t < ta ? t : ta;
            unsetenv("TIDE_JIT_EPILOGUES");
            tide_jit_cache_clear();
            t = time_it(prods[i].f, in, true, 3);
            tj = t < tj ? t : tj;
        }
        printf("%s_eager: %.2f ms\n", prods[i].name, te * 1e3);
        printf("%s_jit_unfused: %.2f ms\n", prods[i].name, ta * 1e3);
        printf("%s_jit_epilogue: %.2f ms\n", prods[i].name, tj * 1e3);
        printf("%s_speedup: %.2f x vs eager, %.2f x vs the unfused jit\n", prods[i].name, te / tj,
               ta / tj);
        tide_release(in);
        for (int k = 0; k < 4; k++) {
            tide_release(prod_in[k]);
            prod_in[k] = NULL;
        }
    }

    /* compile time: a fresh cache, one call */
    tide_jit_cache_clear();
    double t0 = now();
    tide_release(run_jit(chain_tanh, v));
    printf("compile_chain_tanh: %.2f ms (trace + passes + codegen + libtcc + run)\n",
           (now() - t0) * 1e3);
    t0 = now();
    tide_release(run_jit(long_chain, v));
    printf("compile_64op_chain: %.2f ms\n", (now() - t0) * 1e3);
    tide_release(v);
    return 0;
}
