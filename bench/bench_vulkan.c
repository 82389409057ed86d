/*
 * bench_vulkan.c — the Vulkan device (lavapipe in CI, a GPU where there is one): dispatch
 * overhead, a 16M-element float32 add and exp beside the copy shader's bandwidth measured in the
 * same run (the reference), matmul GFLOP/s beside the CPU's (OpenBLAS) in the same run, and an
 * eager chain of elementwise ops on Vulkan and on the CPU.
 *
 * Every line is "name: value unit". Each figure is the best of a few timings, each ended by
 * tide_sync() so queued work is counted. Prints a reason and exits 0 when there is no Vulkan.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tide.h"

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static tide_tensor *rand_on(int nd, const int64_t *shape, const char *dev)
{
    tide_tensor *c = tide_rand(nd, shape, TIDE_FLOAT32);
    tide_tensor *t = c ? tide_to(c, dev) : NULL;
    tide_release(c);
    if (!t) {
        fprintf(stderr, "bench_vulkan: %s\n", tide_last_error());
        exit(1);
    }
    return t;
}

typedef tide_tensor *(*op2)(const tide_tensor *, const tide_tensor *);

/* Best seconds per call of f(a, b) over reps timings of n calls each (results released). */
static double time_op(op2 f, tide_tensor *a, tide_tensor *b, int n, int reps)
{
    double best = 1e30;
    for (int r = 0; r < reps; r++) {
        tide_sync();
        double t0 = now();
        for (int i = 0; i < n; i++)
            tide_release(f(a, b));
        tide_sync();
        double t = (now() - t0) / n;
        if (t < best)
            best = t;
    }
    return best;
}

static tide_tensor *op_add(const tide_tensor *a, const tide_tensor *b) { return tide_add(a, b); }
static tide_tensor *op_exp(const tide_tensor *a, const tide_tensor *b)
{
    (void)b;
    return tide_exp(a);
}
static tide_tensor *op_clone(const tide_tensor *a, const tide_tensor *b)
{
    (void)b;
    return tide_clone(a);
}
static tide_tensor *op_matmul(const tide_tensor *a, const tide_tensor *b) { return tide_matmul(a, b); }

/* y = relu((x * 2 + 1) * x - 3): five eager ops */
static tide_tensor *op_chain(const tide_tensor *x, const tide_tensor *unused)
{
    (void)unused;
    tide_tensor *a = tide_mul_scalar(x, 2), *b = tide_add_scalar(a, 1), *c = tide_mul(b, x),
                *d = tide_sub_scalar(c, 3), *e = tide_relu(d);
    tide_release(a);
    tide_release(b);
    tide_release(c);
    tide_release(d);
    return e;
}

static tide_tensor *op_softmax(const tide_tensor *x, const tide_tensor *unused)
{
    (void)unused;
    return tide_softmax(x, 1);
}

static tide_tensor *op_softmax_jit(const tide_tensor *x, const tide_tensor *unused)
{
    tide_jit_trace_begin(NULL, NULL, NULL);
    tide_tensor *y = op_softmax(x, unused);
    tide_jit_trace_end();
    return y;
}

static tide_tensor *op_chain_jit(const tide_tensor *x, const tide_tensor *unused)
{
    tide_jit_trace_begin(NULL, NULL, NULL);
    tide_tensor *y = op_chain(x, unused);
    tide_jit_trace_end();
    return y;
}

int main(void)
{
    char why[512];
    if (!tide_vulkan_available(why, sizeof why)) {
        printf("# no Vulkan device: %s\n", why);
        return 0;
    }
    for (int i = 0; i < tide_vulkan_device_count(); i++) {
        char name[256];
        const char *kind;
        bool sel;
        if (tide_vulkan_device_info(i, name, sizeof name, &kind, &sel) == 0 && sel)
            printf("# device: %s (%s)\n", name, kind);
    }

    /* dispatch overhead: many tiny ops queued, then one submission; and one op + wait */
    int64_t four = 4;
    tide_tensor *s = rand_on(1, &four, "vulkan"), *one = rand_on(1, &four, "vulkan");
    double queued = time_op(op_add, s, one, 2000, 5);
    printf("dispatch_queued: %.2f us per 4-element add (recorded, submitted in batches)\n",
           queued * 1e6);
    double best = 1e30;
    for (int r = 0; r < 200; r++) {
        double t0 = now();
        tide_tensor *y = tide_add(s, one);
        tide_sync();
        double t = now() - t0;
        tide_release(y);
        if (t < best)
            best = t;
    }
    printf("dispatch_roundtrip: %.2f us per add + submit + wait\n", best * 1e6);
    tide_release(s);
    tide_release(one);

    /* bandwidth: 16M float32 */
    int64_t n = 16 << 20;
    double mb = (double)n * 4 / 1e9;
    tide_tensor *a = rand_on(1, &n, "vulkan"), *b = rand_on(1, &n, "vulkan");
    double tcopy = time_op(op_clone, a, NULL, 5, 3);
    double copy_gbs = 2 * mb / tcopy;
    printf("copy_16M_vulkan: %.2f GB/s (reference)\n", copy_gbs);
    double tadd = time_op(op_add, a, b, 5, 3), add_gbs = 3 * mb / tadd;
    printf("add_16M_vulkan: %.2f GB/s\n", add_gbs);
    printf("add_16M_vs_copy: %.2f ratio\n", add_gbs / copy_gbs);
    double texp = time_op(op_exp, a, NULL, 5, 3), exp_gbs = 2 * mb / texp;
    printf("exp_16M_vulkan: %.2f GB/s\n", exp_gbs);
    printf("exp_16M_vs_copy: %.2f ratio\n", exp_gbs / copy_gbs);
    tide_tensor *ac = tide_to(a, "cpu"), *bc = tide_to(b, "cpu");
    double tadd_cpu = time_op(op_add, ac, bc, 5, 3);
    printf("add_16M_cpu: %.2f GB/s (the CPU device, same run)\n", 3 * mb / tadd_cpu);

    /* eager chain of 5 ops over 1M elements */
    int64_t m = 1 << 20;
    tide_tensor *x = rand_on(1, &m, "vulkan"), *xc = tide_to(x, "cpu");
    double tchain = time_op(op_chain, x, NULL, 10, 3), tchain_cpu = time_op(op_chain, xc, NULL, 10, 3);
    printf("chain5_1M_vulkan: %.3f ms\n", tchain * 1e3);
    printf("chain5_1M_cpu: %.3f ms (same run)\n", tchain_cpu * 1e3);
    printf("chain5_1M_vulkan_vs_cpu: %.2f ratio (time)\n", tchain / tchain_cpu);
    /* the same chain traced by the jit: one fusion group, a GLSL shader compiled at run time */
    tide_release(op_chain_jit(x, NULL)); /* compiles (or loads from the disk cache) */
    double tjit = time_op(op_chain_jit, x, NULL, 10, 3);
    printf("chain5_1M_vulkan_jit: %.3f ms (fused)\n", tjit * 1e3);
    printf("chain5_1M_vulkan_jit_vs_eager: %.2f speedup (eager time / fused time)\n",
           tchain / tjit);
    /* softmax over rows of 1024: max, sub, exp, sum, div eagerly; one row-group shader fused */
    int64_t sm[2] = {1024, 1024};
    tide_tensor *xs = rand_on(2, sm, "vulkan");
    tide_release(op_softmax_jit(xs, NULL));
    double tsm = time_op(op_softmax, xs, NULL, 5, 3), tsmj = time_op(op_softmax_jit, xs, NULL, 5, 3);
    printf("softmax_1Kx1K_vulkan: %.3f ms (eager)\n", tsm * 1e3);
    printf("softmax_1Kx1K_vulkan_jit: %.3f ms (fused)\n", tsmj * 1e3);
    printf("softmax_1Kx1K_vulkan_jit_vs_eager: %.2f speedup\n", tsm / tsmj);
    tide_release(xs);
    tide_release(x);
    tide_release(xc);
    tide_release(a);
    tide_release(b);
    tide_release(ac);
    tide_release(bc);

    /* matmul */
    const int64_t sizes[] = {256, 512, 1024};
    for (int i = 0; i < 3; i++) {
        int64_t sh[2] = {sizes[i], sizes[i]};
        tide_tensor *p = rand_on(2, sh, "vulkan"), *q = rand_on(2, sh, "vulkan");
        tide_tensor *pc = tide_to(p, "cpu"), *qc = tide_to(q, "cpu");
        double flop = 2.0 * (double)sizes[i] * sizes[i] * sizes[i];
        double tv = time_op(op_matmul, p, q, 2, 3), tc = time_op(op_matmul, pc, qc, 2, 3);
        printf("matmul_%lld_vulkan: %.2f GFLOP/s\n", (long long)sizes[i], flop / tv * 1e-9);
        printf("matmul_%lld_cpu: %.2f GFLOP/s (OpenBLAS, same run)\n", (long long)sizes[i],
               flop / tc * 1e-9);
        printf("matmul_%lld_vulkan_vs_cpu: %.2f ratio\n", (long long)sizes[i], tc / tv);
        tide_release(p);
        tide_release(q);
        tide_release(pc);
        tide_release(qc);
    }
    return 0;
}
