/*
 * bench_jit.c — the jit against eager tide, each figure beside references measured in the same
 * run, at the CPU tier td_cpu_isa() picks (TIDE_CPU_ISA caps it; bench/run_all.sh runs this once
 * per tier):
 *   the CPU model, the tier, the float32 STREAM triad (threaded like tide's kernels);
 *   the worst ulp of tide's float32 tanh and sigmoid over a sweep of floats (every
 *   BENCH_ULP_STRIDE-th bit pattern, default 32; 1 is every float) against double references;
 *   tanh(x*a+b)*sigmoid(x)+c on 16M float32: eager, jit, and the same chain as one gcc -O3 loop
 *   over SLEEF's vector functions at this tier (chain_ref_isa.c), with a STREAM triad, the four
 *   alternating in slices (targets: jit >= 3x eager, >= 1.3x the SLEEF loop);
 *   (x*a+b)*x-c: GB/s against the triad of its slices (target >= 0.6);
 *   softmax over the last dim of 4096x4096: eager, jit and a triad alternating (targets: jit >=
 *   2x eager, and >= 0.6 of its memory floor: the 128 MiB it must read and write at the triad's
 *   speed);
 *   the cost per recorded op of a cache hit (64-op chain on 16 elements), compile times;
 *   products with epilogues: conv2d + bias + relu (batch 64), the grad-input conv times a mask,
 *   softmax(q k^T / 8) over 64 heads of 256 x 256, a batched linear + bias + relu: eager, the
 *   jit with the epilogue run apart (TIDE_JIT_EPILOGUES=0), and the jit with it fused.
 * The VM this runs on drifts by 30% within a minute, so every comparison alternates its
 * contenders in slices and reports medians: a drift lands on all of them. Every jit call is a
 * full trace session (what tide.jit does per call): trace, key, cache lookup, run. Prints
 * `name: value unit` lines; a target line ends in "met" or "NOT met".
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "bench_util.h"
#include "tensor.h"
#include "tide.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

typedef tide_tensor *(*fn1)(tide_tensor *x);

static const float CHAIN_A = 1.5f, CHAIN_B = 0.25f, CHAIN_C = 0.5f;

static tide_tensor *chain_tanh(tide_tensor *x)
{
    tide_tensor *t1 = tide_mul_scalar(x, CHAIN_A), *t2 = tide_add_scalar(t1, CHAIN_B);
    tide_tensor *t3 = tide_tanh(t2), *t4 = tide_sigmoid(x), *t5 = tide_mul(t3, t4);
    tide_tensor *t6 = tide_add_scalar(t5, CHAIN_C);
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
    int64_t n;
} triad_ctx;

static void triad_range(void *p, int64_t lo, int64_t hi)
{
    triad_ctx *t = p;
    triad(t->a + lo, t->b + lo, t->c + lo, hi - lo, 3.0f);
}

static void triad_init(triad_ctx *t, int64_t n)
{
    t->n = n;
    t->a = td_cache_alloc((size_t)n * 4), t->b = td_cache_alloc((size_t)n * 4);
    t->c = td_cache_alloc((size_t)n * 4);
    if (!t->a || !t->b || !t->c) {
        fprintf(stderr, "out of memory\n");
        exit(1);
    }
    for (int64_t i = 0; i < n; i++)
        t->a[i] = 0, t->b[i] = 1, t->c[i] = 2;
}

static void triad_free(triad_ctx *t)
{
    size_t bytes = (size_t)t->n * 4;
    td_cache_free(t->a, bytes), td_cache_free(t->b, bytes), td_cache_free(t->c, bytes);
}

/* GB/s of a triad that took seconds: 12 bytes per element, as STREAM counts */
static double triad_gbs(const triad_ctx *t, double seconds) { return 12.0 * t->n / seconds / 1e9; }

/* ---- the SLEEF loop of chain_ref_isa.c, one symbol per tier ---- */
void chain_ref_baseline(float *out, const float *x, int64_t n, float a, float b, float c);
void chain_ref_avx2(float *out, const float *x, int64_t n, float a, float b, float c);
void chain_ref_avx512(float *out, const float *x, int64_t n, float a, float b, float c);

typedef struct ref_ctx {
    float *out;
    const float *x;
    int64_t n;
    void (*fn)(float *, const float *, int64_t, float, float, float);
} ref_ctx;

static void ref_range(void *p, int64_t lo, int64_t hi)
{
    ref_ctx *r = p;
    r->fn(r->out + lo, r->x + lo, hi - lo, CHAIN_A, CHAIN_B, CHAIN_C);
}

/* ---- contenders alternating in slices ---- */
enum { MAX_SLICES = 15, MAX_CONTENDERS = 4 };

typedef enum { RUN_EAGER, RUN_JIT, RUN_TRIAD, RUN_REF } run_kind;

typedef struct contender {
    run_kind kind;
    fn1 f;            /* RUN_EAGER, RUN_JIT */
    tide_tensor *x;   /* RUN_EAGER, RUN_JIT */
    triad_ctx *triad; /* RUN_TRIAD */
    ref_ctx *ref;     /* RUN_REF */
    double t[MAX_SLICES];
} contender;

static void run_once(contender *c)
{
    switch (c->kind) {
    case RUN_EAGER:
        tide_release(c->f(c->x));
        break;
    case RUN_JIT:
        tide_release(run_jit(c->f, c->x));
        break;
    case RUN_TRIAD:
        td_parallel_for(c->triad->n, 1 << 16, triad_range, c->triad);
        break;
    case RUN_REF:
        td_parallel_for(c->ref->n, 1 << 16, ref_range, c->ref);
        break;
    }
}

/* Each slice runs every contender reps times in turn; c->t[s] is the mean seconds of a call in
 * slice s. One call of each before the first slice warms caches and compiles. */
static void alternate(contender *c, int nc, int slices, int reps)
{
    for (int k = 0; k < nc; k++)
        run_once(&c[k]);
    for (int s = 0; s < slices; s++)
        for (int k = 0; k < nc; k++) {
            double t0 = now();
            for (int r = 0; r < reps; r++)
                run_once(&c[k]);
            c[k].t[s] = (now() - t0) / reps;
        }
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

static double median(const double *v, int n)
{
    double s[MAX_SLICES];
    memcpy(s, v, (size_t)n * sizeof *s);
    qsort(s, (size_t)n, sizeof *s, cmp_double);
    return n % 2 ? s[n / 2] : (s[n / 2 - 1] + s[n / 2]) / 2;
}

/* The median and range over the slices of a's time / b's time (how many times faster b is). */
static void slice_ratio(const contender *a, const contender *b, int slices, double *med,
                        double *lo, double *hi)
{
    double r[MAX_SLICES];
    *lo = 1e30, *hi = 0;
    for (int s = 0; s < slices; s++) {
        r[s] = a->t[s] / b->t[s];
        *lo = r[s] < *lo ? r[s] : *lo;
        *hi = r[s] > *hi ? r[s] : *hi;
    }
    *med = median(r, slices);
}

static const char *met(double value, double target) { return value >= target ? "met" : "NOT met"; }

static void print_ratio(const char *name, const contender *slow, const contender *fast,
                        int slices, double target)
{
    double med, lo, hi;
    slice_ratio(slow, fast, slices, &med, &lo, &hi);
    printf("%s: %.2f x (median of %d slices, %.2f-%.2f; target >= %.1f: %s)\n", name, med, slices,
           lo, hi, target, met(med, target));
}

/* ---- accuracy: worst ulp over a sweep of float bit patterns against double references ---- */

/* The spacing of float32 values at the magnitude of y (a double): the ulp of a correctly
 * rounded result, 2^-149 among the denormals. */
static double float_ulp(double y)
{
    int e;
    frexp(fabs(y), &e); /* |y| in [2^(e-1), 2^e) */
    return ldexp(1.0, (e - 24) < -149 ? -149 : e - 24);
}

typedef struct ulp_ctx {
    const float *x, *got;
    int64_t n;
    int sigmoid;
    double worst[64];
    float worst_x[64];
} ulp_ctx;

static void ulp_range(void *p, int64_t lo, int64_t hi)
{
    ulp_ctx *u = p;
    for (int64_t slot = lo; slot < hi; slot++) {
        int64_t b = u->n * slot / 64, e = u->n * (slot + 1) / 64;
        double worst = 0;
        float wx = 0;
        for (int64_t i = b; i < e; i++) {
            double x = u->x[i], g = u->got[i];
            double ref = u->sigmoid ? 1.0 / (1.0 + exp(-x)) : tanh(x);
            double err = isnan(ref) ? (isnan(g) ? 0 : INFINITY)
                         : isnan(g) ? INFINITY
                                    : fabs(g - ref) / float_ulp(ref);
            if (err > worst)
                worst = err, wx = (float)x;
        }
        u->worst[slot] = worst, u->worst_x[slot] = wx;
    }
}

/* Worst error in ulp of tide's float32 op (tide_tanh or tide_sigmoid, eager: the kernel the jit
 * calls too) over every stride-th float bit pattern, NaNs included. */
static double worst_ulp(tide_tensor *(*op)(const tide_tensor *), int sigmoid, uint32_t stride,
                        float *at)
{
    int64_t chunk = 1 << 22;
    tide_tensor *xt = tide_empty(1, &chunk, TIDE_FLOAT32);
    float *x = tide_mutable_data_ptr(xt);
    double worst = 0;
    uint64_t bits = 0, total = (uint64_t)1 << 32;
    while (bits < total) {
        int64_t n = 0;
        for (; n < chunk && bits < total; n++, bits += stride) {
            uint32_t u = (uint32_t)bits;
            memcpy(&x[n], &u, 4);
        }
        for (int64_t i = n; i < chunk; i++)
            x[i] = 0;
        tide_tensor *y = op(xt);
        ulp_ctx u = {.x = x, .got = tide_data_ptr(y), .n = n, .sigmoid = sigmoid};
        td_parallel_for(64, 1, ulp_range, &u);
        for (int s = 0; s < 64; s++)
            if (u.worst[s] > worst)
                worst = u.worst[s], *at = u.worst_x[s];
        tide_release(y);
    }
    tide_release(xt);
    return worst;
}

static bool same_values(tide_tensor *a, tide_tensor *b)
{
    return tide_numel(a) == tide_numel(b) &&
           memcmp(tide_data_ptr(a), tide_data_ptr(b), (size_t)tide_numel(a) * 4) == 0;
}

static int env_int(const char *name, int def, int lo, int hi)
{
    const char *v = getenv(name);
    int n = v ? atoi(v) : def;
    return n < lo ? lo : n > hi ? hi : n;
}

/* products with epilogues: eager, the jit with the product apart, the jit with it fused, in turn
 * over several rounds (each switch clears the cache and warms once), medians of each */
static void bench_products(int rounds)
{
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
        contender v[3] = {{.kind = RUN_EAGER, .f = prods[i].f, .x = in},
                          {.kind = RUN_JIT, .f = prods[i].f, .x = in},
                          {.kind = RUN_JIT, .f = prods[i].f, .x = in}};
        for (int r = 0; r < rounds; r++)
            for (int k = 0; k < 3; k++) {
                if (k == 1)
                    setenv("TIDE_JIT_EPILOGUES", "0", 1);
                if (k > 0)
                    tide_jit_cache_clear();
                run_once(&v[k]); /* warm: compile, caches */
                double t0 = now();
                for (int rep = 0; rep < 3; rep++)
                    run_once(&v[k]);
                v[k].t[r] = (now() - t0) / 3;
                unsetenv("TIDE_JIT_EPILOGUES");
            }
        tide_jit_cache_clear();
        double me, mu, lo, hi;
        printf("%s_eager: %.2f ms\n", prods[i].name, median(v[0].t, rounds) * 1e3);
        printf("%s_jit_unfused: %.2f ms\n", prods[i].name, median(v[1].t, rounds) * 1e3);
        printf("%s_jit_epilogue: %.2f ms\n", prods[i].name, median(v[2].t, rounds) * 1e3);
        slice_ratio(&v[0], &v[2], rounds, &me, &lo, &hi);
        slice_ratio(&v[1], &v[2], rounds, &mu, &lo, &hi);
        printf("%s_speedup: %.2f x vs eager, %.2f x vs the unfused jit (medians of the %d rounds' "
               "ratios)\n",
               prods[i].name, me, mu, rounds);
        tide_release(in);
        for (int k = 0; k < 4; k++) {
            tide_release(prod_in[k]);
            prod_in[k] = NULL;
        }
    }
}

int main(int argc, char **argv)
{
    if (argc > 1 && strcmp(argv[1], "--isa") == 0) { /* for run_all.sh: the tier tide picks */
        printf("%s\n", td_cpu_isa_name(td_cpu_isa()));
        return 0;
    }
    int64_t n = 16 * 1024 * 1024;
    int slices = env_int("BENCH_SLICES", 9, 3, MAX_SLICES);
    td_isa_level isa = td_cpu_isa();
    const char *cap = getenv("TIDE_CPU_ISA");
    print_cpu_model();
    printf("cpu_isa: %s (TIDE_CPU_ISA=%s)\n", td_cpu_isa_name(isa), cap ? cap : "unset");
    printf("threads: %d\n", tide_get_num_threads());
    printf("# medians over %d slices in which the contenders alternate (BENCH_SLICES)\n", slices);
    tide_manual_seed(1);
    triad_ctx tr;
    triad_init(&tr, n);

    /* accuracy of the kernels the chain and softmax run */
    uint32_t stride = (uint32_t)env_int("BENCH_ULP_STRIDE", 32, 1, 1 << 20);
    float at;
    double t0 = now(), ulp = worst_ulp(tide_tanh, 0, stride, &at);
    printf("tanh_f32_worst_ulp: %.2f ulp at x = %.9g (every %u-th float against double tanh; "
           "documented 5.4, 6.2 on baseline)\n",
           ulp, (double)at, stride);
    ulp = worst_ulp(tide_sigmoid, 1, stride, &at);
    printf("sigmoid_f32_worst_ulp: %.2f ulp at x = %.9g (every %u-th float against double "
           "1/(1+exp(-x)); documented 2.4)\n",
           ulp, (double)at, stride);
    printf("# the ulp sweeps took %.1f s\n", now() - t0);

    /* the tanh chain: eager, jit, the SLEEF loop at this tier, a STREAM triad */
    tide_tensor *x = tide_randn(1, &n, TIDE_FLOAT32), *ref_out = tide_empty(1, &n, TIDE_FLOAT32);
    ref_ctx rc = {tide_mutable_data_ptr(ref_out), tide_data_ptr(x), n,
                  isa == TD_ISA_AVX512 ? chain_ref_avx512
                  : isa == TD_ISA_AVX2 ? chain_ref_avx2
                                       : chain_ref_baseline};
    contender c[4] = {{.kind = RUN_EAGER, .f = chain_tanh, .x = x},
                      {.kind = RUN_JIT, .f = chain_tanh, .x = x},
                      {.kind = RUN_REF, .ref = &rc},
                      {.kind = RUN_TRIAD, .triad = &tr}};
    alternate(c, 4, slices, 2);
    double te = median(c[0].t, slices), tj = median(c[1].t, slices);
    double tref = median(c[2].t, slices), stream = triad_gbs(&tr, median(c[3].t, slices));
    printf("stream_triad_f32: %.1f GB/s (16M floats, 12 bytes per element)\n", stream);
    printf("chain_tanh_eager: %.2f ms (%.1f GB/s)\n", te * 1e3, 8.0 * n / te / 1e9);
    printf("chain_tanh_jit: %.2f ms (%.1f GB/s, %.2f of STREAM)\n", tj * 1e3, 8.0 * n / tj / 1e9,
           8.0 * n / tj / 1e9 / stream);
    printf("chain_tanh_sleef_loop_%s: %.2f ms (%.1f GB/s; gcc -O3, SLEEF tanhf u35 and expf u10)\n",
           td_cpu_isa_name(isa), tref * 1e3, 8.0 * n / tref / 1e9);
    print_ratio("chain_tanh_jit_vs_eager", &c[0], &c[1], slices, 3.0);
    print_ratio("chain_tanh_jit_vs_sleef_loop", &c[2], &c[1], slices, 1.3);
    {
        tide_tensor *ye = chain_tanh(x), *yj = run_jit(chain_tanh, x);
        const float *pe = tide_data_ptr(ye), *pr = tide_data_ptr(ref_out);
        double dmax = 0;
        for (int64_t i = 0; i < n; i++)
            dmax = fmax(dmax, fabs((double)pe[i] - pr[i]));
        printf("chain_tanh_jit_equals_eager: %s (bitwise)\n", same_values(ye, yj) ? "yes" : "NO");
        printf("chain_tanh_vs_sleef_loop_max_abs_diff: %.3g\n", dmax);
        tide_release(ye), tide_release(yj);
    }
    tide_release(ref_out);

    /* (x*a+b)*x-c: memory-bound, against the triad of the same slices */
    contender m[3] = {{.kind = RUN_EAGER, .f = chain_axpb, .x = x},
                      {.kind = RUN_JIT, .f = chain_axpb, .x = x},
                      {.kind = RUN_TRIAD, .triad = &tr}};
    alternate(m, 3, slices, 2);
    te = median(m[0].t, slices), tj = median(m[1].t, slices);
    stream = triad_gbs(&tr, median(m[2].t, slices));
    printf("chain_axpb_eager: %.2f ms (%.1f GB/s)\n", te * 1e3, 8.0 * n / te / 1e9);
    printf("chain_axpb_jit: %.2f ms (%.1f GB/s)\n", tj * 1e3, 8.0 * n / tj / 1e9);
    printf("chain_axpb_jit_vs_stream: %.2f (triad %.1f GB/s in the same slices; target >= 0.6: "
           "%s)\n",
           8.0 * n / tj / 1e9 / stream, stream, met(8.0 * n / tj / 1e9 / stream, 0.6));
    tide_release(x);

    /* softmax 4096x4096: eager, jit, a triad; the floor is 128 MiB read and written at STREAM */
    int64_t sq[2] = {4096, 4096};
    tide_tensor *s = tide_randn(2, sq, TIDE_FLOAT32);
    contender sm[3] = {{.kind = RUN_EAGER, .f = softmax_last, .x = s},
                       {.kind = RUN_JIT, .f = softmax_last, .x = s},
                       {.kind = RUN_TRIAD, .triad = &tr}};
    alternate(sm, 3, slices, 2);
    te = median(sm[0].t, slices), tj = median(sm[1].t, slices);
    stream = triad_gbs(&tr, median(sm[2].t, slices));
    double bytes = 2.0 * 4 * sq[0] * sq[1], of_floor[MAX_SLICES];
    for (int k = 0; k < slices; k++)
        of_floor[k] = bytes / (triad_gbs(&tr, sm[2].t[k]) * 1e9) / sm[1].t[k];
    double floor_frac = median(of_floor, slices);
    printf("softmax_4096x4096_eager: %.2f ms\n", te * 1e3);
    printf("softmax_4096x4096_jit: %.2f ms\n", tj * 1e3);
    printf("softmax_4096x4096_memory_floor: %.2f ms (128 MiB read and written at the same "
           "slices' triad, %.1f GB/s)\n",
           bytes / (stream * 1e9) * 1e3, stream);
    print_ratio("softmax_jit_vs_eager", &sm[0], &sm[1], slices, 2.0);
    printf("softmax_jit_of_memory_floor: %.2f (floor / jit time, median of the slices; target >= "
           "0.6: %s)\n",
           floor_frac, met(floor_frac, 0.6));
    {
        tide_tensor *ye = softmax_last(s), *yj = run_jit(softmax_last, s);
        printf("softmax_jit_equals_eager: %s (bitwise)\n", same_values(ye, yj) ? "yes" : "NO");
        tide_release(ye), tide_release(yj);
    }
    tide_release(s);
    triad_free(&tr);

    /* the cost of a cache hit per recorded op */
    int64_t small = 16;
    tide_tensor *v = tide_randn(1, &small, TIDE_FLOAT32);
    contender h[2] = {{.kind = RUN_EAGER, .f = long_chain, .x = v},
                      {.kind = RUN_JIT, .f = long_chain, .x = v}};
    alternate(h, 2, slices, 200);
    te = median(h[0].t, slices), tj = median(h[1].t, slices);
    printf("hit_64op_eager: %.1f us/call (%.2f us/op)\n", te * 1e6, te * 1e6 / 64);
    printf("hit_64op_jit: %.1f us/call (%.2f us/op; target <= 2 us/op beyond kernels: %s)\n",
           tj * 1e6, tj * 1e6 / 64, (tj - te) * 1e6 / 64 <= 2 ? "met" : "NOT met");

    bench_products(5);

    /* compile time: a fresh cache, one call */
    tide_jit_cache_clear();
    t0 = now();
    tide_release(run_jit(chain_tanh, v));
    printf("compile_chain_tanh: %.2f ms (trace + passes + codegen + libtcc + run)\n",
           (now() - t0) * 1e3);
    t0 = now();
    tide_release(run_jit(long_chain, v));
    printf("compile_64op_chain: %.2f ms\n", (now() - t0) * 1e3);
    tide_release(v);
    return 0;
}
