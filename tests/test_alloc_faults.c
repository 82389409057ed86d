/*
 * test_alloc_faults.c — allocation-failure sweeps, the way SQLite tests its error paths.
 *
 * Each piece of work (eager ops, autograd, a jit compile, a compiled graph run on the CPU and on
 * Vulkan, the loaders, training steps) runs with allocation N failing (core/fault.c:
 * td_fault_alloc_set) for N = 1, 2, 3, ... until a run succeeds without the hook failing
 * anything. Every run must either succeed with exactly (bitwise) the values of a run without
 * faults, or fail with a message and the code TIDE_ERR_OUT_OF_MEMORY; after a failure the same
 * work must succeed again; the bytes the allocator counts in use, and the open files, must
 * come back to where they were (a leak of tensors or descriptors; ASan and valgrind see the
 * rest). Each sweep runs twice: allocation N alone failing, then N and every later one. Under
 * valgrind (40-100x slower) N is sampled: every N up to a point, then steps spread over the
 * rest (budget below).
 *
 * Then a memory cap as the second way to fail: the graph of issue 18 (a tanh chain, softmax,
 * a matmul with a ReLU epilogue) under caps just above what is in use must fail with a message
 * or give the exact values.
 */
#include <dirent.h>
#include <limits.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#include "core/tensor.h"
#include "core/tide_internal.h"
#include "test_util.h"

/* How N goes: every N below dense, then about `samples` steps over the rest of the work's
 * allocations. Everything runs without valgrind (ASan included: about 25 s). */
typedef struct budget {
    long dense;
    int samples;
} budget;
static budget one_shot = {LONG_MAX, 0}, persistent_budget = {LONG_MAX, 0};

static char tmpdir[256];
static int total_runs;

/* ---- what a piece of work produced: bytes, compared exactly -------------------------------- */

typedef struct values {
    unsigned char *b;
    size_t n, cap;
} values;

static void values_free(values *v)
{
    free(v->b);
    v->b = NULL;
    v->n = v->cap = 0;
}

/* Appends t's elements (row-major bytes). -1 when reading them fails (an allocation). */
static int keep(values *v, const tide_tensor *t)
{
    size_t nb = (size_t)tide_numel(t) * tide_dtype_size(tide_get_dtype(t));
    if (v->n + nb > v->cap) {
        size_t cap = (v->n + nb) * 2 + 64;
        unsigned char *p = realloc(v->b, cap);
        if (!p) {
            fprintf(stderr, "test_alloc_faults: the test itself is out of memory\n");
            exit(2);
        }
        v->b = p;
        v->cap = cap;
    }
    if (tide_to_buffer(t, v->b + v->n, nb) < 0)
        return -1;
    v->n += nb;
    return 0;
}

static int keep_number(values *v, double x)
{
    tide_tensor *t = tide_scalar(x, TIDE_FLOAT64);
    int rc = t ? keep(v, t) : -1;
    tide_release(t);
    return rc;
}

/* ---- tensors a piece of work makes, released together --------------------------------------- */

typedef struct bag {
    tide_tensor *t[96];
    int n;
} bag;

static tide_tensor *put(bag *b, tide_tensor *t)
{
    if (t) {
        if (b->n == (int)(sizeof b->t / sizeof b->t[0])) {
            fprintf(stderr, "test_alloc_faults: bag full\n");
            exit(2);
        }
        b->t[b->n++] = t;
    }
    return t;
}

static void bag_release(bag *b)
{
    for (int i = 0; i < b->n; i++)
        tide_release(b->t[i]);
    b->n = 0;
}

/* var = expr, kept in the bag; on NULL the work fails with the op's error */
#define NEW(var, expr)                                                                             \
    do {                                                                                           \
        if (!((var) = put(&B, (expr))))                                                            \
            goto fail;                                                                             \
    } while (0)
#define OK(expr)                                                                                   \
    do {                                                                                           \
        if ((expr) < 0)                                                                            \
            goto fail;                                                                             \
    } while (0)

/* Deterministic values in [-scale, scale) (a 32-bit LCG; no tide RNG state involved). */
static tide_tensor *pattern(int ndim, const int64_t *shape, float scale, uint32_t seed)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    float *p = malloc(sizeof(float) * (size_t)(n ? n : 1));
    if (!p)
        exit(2);
    uint32_t s = seed * 2654435761u + 1;
    for (int64_t i = 0; i < n; i++) {
        s = s * 1664525u + 1013904223u;
        p[i] = scale * ((float)(s >> 8) / 8388608.0f - 1.0f);
    }
    tide_tensor *t = tide_from_data(p, ndim, shape, TIDE_FLOAT32);
    free(p);
    return t;
}

/* ---- the sweep ---------------------------------------------------------------------------------- */

typedef int (*work_fn)(values *out);

static int open_files(void)
{
    DIR *d = opendir("/proc/self/fd");
    int n = 0;
    if (!d)
        return -1;
    while (readdir(d))
        n++;
    closedir(d);
    return n;
}

static size_t bytes_in_use(void)
{
    size_t in_use;
    tide_memory_stats(&in_use, NULL);
    return in_use;
}

static bool same_values(const values *a, const values *b)
{
    return a->n == b->n && (a->n == 0 || memcmp(a->b, b->b, a->n) == 0);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* Runs fn with allocation n failing (and every later one when persistent); 0 or -1 as fn,
 * *nfailed the allocations the hook failed and *count those it counted. */
static int run_faulted(work_fn fn, values *out, long n, bool persistent, long *nfailed,
                       long *count)
{
    tide_clear_error();
    td_fault_alloc_set(n, persistent);
    int rc = fn(out);
    *nfailed = td_fault_alloc_failed();
    *count = td_fault_alloc_count();
    td_fault_alloc_set(0, false);
    return rc;
}

/* The next N under budget b (heavy: a quarter of the samples), for a work of total
 * allocations. */
static long next_n(long n, long total, budget b, bool heavy)
{
    long dense = heavy ? b.dense / 4 : b.dense;
    int samples = heavy ? b.samples / 4 : b.samples;
    if (n < dense || samples < 1)
        return n + 1;
    long step = (total - dense) / samples;
    return n + (step > 1 ? step : 1);
}

/* What one run with faults must satisfy: the values of a run without (want) when it succeeds;
 * a message with the code TIDE_ERR_OUT_OF_MEMORY, and the same work succeeding again
 * afterwards, when it fails; nothing left in use. The number of problems found. */
static int check_run(const char *name, work_fn fn, const values *want, int rc, const values *got,
                     long n, long nfailed, size_t *in_use, int *files, bool heavy)
{
    int bad = 0;
    if (rc == 0 && !same_values(got, want)) {
        CHECK(0, "%s: allocation %ld failed, the work succeeded with wrong values", name, n);
        bad++;
    } else if (rc < 0) {
        if (nfailed == 0 || !tide_last_error()[0]) {
            CHECK(0, "%s: failed at N=%ld with %ld allocations failed and error \"%s\"", name, n,
                  nfailed, tide_last_error());
            bad++;
        } else if (tide_last_error_code() != TIDE_ERR_OUT_OF_MEMORY) {
            CHECK(0, "%s: failed at N=%ld with code %d, not out of memory: \"%s\"", name, n,
                  tide_last_error_code(), tide_last_error());
            bad++;
        }
        values again = {0};
        if (fn(&again) < 0 || !same_values(&again, want)) {
            CHECK(0, "%s: after failing at N=%ld the work does not succeed again: %s", name, n,
                  tide_last_error());
            bad++;
        }
        values_free(&again);
    }
    size_t now = bytes_in_use();
    /* not on Vulkan: lavapipe opens and closes descriptors of its own now and then */
    int fnow = heavy ? *files : open_files();
    if (now != *in_use || fnow != *files) {
        CHECK(0, "%s: N=%ld left %lld bytes in use and %d files open more than before", name, n,
              (long long)now - (long long)*in_use, fnow - *files);
        bad++;
        *in_use = now;
        *files = fnow;
    }
    return bad;
}

/* One pass: N = 1, 2, ... (sampled under valgrind) until a run fails nothing. */
static void sweep_pass(const char *name, work_fn fn, const values *want, long total,
                       bool persistent, bool heavy)
{
    budget b = persistent ? persistent_budget : one_shot;
    size_t in_use = bytes_in_use();
    int files = open_files();
    double t0 = now_s();
    int runs = 0, failures = 0, bad = 0;
    long n = 1, nfailed, count;
    for (;; n = next_n(n, total, b, heavy)) {
        values got = {0};
        int rc = run_faulted(fn, &got, n, persistent, &nfailed, &count);
        runs++;
        failures += rc < 0;
        bad += check_run(name, fn, want, rc, &got, n, nfailed, &in_use, &files, heavy);
        values_free(&got);
        if ((rc == 0 && nfailed == 0) || bad > 10)
            break;
    }
    total_runs += runs;
    printf("%-24s %-10s %5d runs (N = 1..%ld of %ld allocations%s), %d failed with a message, "
           "%.1f s\n", name, persistent ? "N and on" : "N only", runs, n, total,
           runs < n ? ", sampled" : "", failures, now_s() - t0);
    fflush(stdout);
    CHECK(bad == 0, "%s: %d bad runs", name, bad);
}

/* Sweeps fn twice: allocation N alone failing, then N and every later one. heavy: a work
 * slow under valgrind (Vulkan on lavapipe), sampled more thinly there. */
static void sweep(const char *name, work_fn fn, bool heavy)
{
    const char *only = getenv("TIDE_TEST_SWEEPS"); /* a part of the names to run, for debugging */
    if (only && !strstr(name, only))
        return;
    values want = {0}, got = {0};
    /* twice: the first run starts caches (the thread pool, the BLAS library, code) */
    for (int i = 0; i < 2; i++) {
        values_free(&want);
        if (fn(&want) < 0) {
            CHECK(0, "%s without faults: %s", name, tide_last_error());
            values_free(&want);
            return;
        }
    }
    long total = 0, nfailed;
    CHECK(run_faulted(fn, &got, LONG_MAX, false, &nfailed, &total) == 0 && same_values(&got, &want),
          "%s counting: %s", name, tide_last_error());
    values_free(&got);
    sweep_pass(name, fn, &want, total, false, heavy);
    sweep_pass(name, fn, &want, total, true, heavy);
    values_free(&want);
}

/* ---- the work ----------------------------------------------------------------------------------- */

/* pattern() on device (the CPU: the same tensor). */
static tide_tensor *pattern_on(const char *device, int ndim, const int64_t *shape, float scale,
                               uint32_t seed)
{
    tide_tensor *t = pattern(ndim, shape, scale, seed), *d = t ? tide_to(t, device) : NULL;
    tide_release(t);
    return d;
}

/* Elementwise, broadcast, matmul, softmax, views and copies, cat, indexing, conv and pooling,
 * reductions, casts; on the CPU also an op large enough for the thread pool, whose workers
 * start again inside the work (their start allocates). */
static int eager_on(values *out, const char *dev)
{
    bag B = {0};
    tide_tensor *x, *w, *b, *y, *s, *t, *c, *parts[2], *idx, *img, *k, *cv, *pool, *r;
    int64_t sx[2] = {64, 48}, sw[2] = {48, 32}, sb[1] = {32};
    bool cpu = strcmp(dev, "cpu") == 0;
    if (cpu) {
        int threads = tide_get_num_threads();
        tide_set_num_threads(1); /* stops the workers */
        tide_set_num_threads(threads);
    }
    NEW(x, pattern_on(dev, 2, sx, 1.0f, 1));
    NEW(w, pattern_on(dev, 2, sw, 0.5f, 2));
    NEW(b, pattern_on(dev, 1, sb, 0.1f, 3));
    NEW(y, tide_matmul(x, w));
    NEW(y, tide_add(y, b));
    NEW(y, tide_relu(y));
    NEW(s, tide_softmax(y, -1));
    NEW(t, tide_transpose(s, 0, 1));
    NEW(t, tide_contiguous(t));
    parts[0] = s, parts[1] = y;
    NEW(c, tide_cat(parts, 2, 0));
    int64_t iv[4] = {3, 0, 63, 17}, si[1] = {4};
    NEW(idx, tide_from_data(iv, 1, si, TIDE_INT64));
    NEW(idx, tide_to(idx, dev));
    NEW(r, tide_index_select(c, 0, idx));
    int64_t simg[4] = {2, 3, 12, 12}, sk[4] = {4, 3, 3, 3};
    NEW(img, pattern_on(dev, 4, simg, 1.0f, 4));
    NEW(k, pattern_on(dev, 4, sk, 0.3f, 5));
    int one[2] = {1, 1}, two[2] = {2, 2};
    NEW(cv, tide_conv2d(img, k, NULL, one, one, one, 1));
    NEW(pool, tide_max_pool2d(cv, two, two, (int[2]){0, 0}, NULL));
    tide_tensor *sum, *am, *d, *big, *sq, *bs;
    int dim1 = 1;
    NEW(sum, tide_sum(c, &dim1, 1, false));
    NEW(am, tide_argmax(y, 1, false));
    NEW(d, tide_cast(t, TIDE_FLOAT64));
    int64_t sbig[2] = {cpu ? 512 : 64, 512};
    NEW(big, pattern_on(dev, 2, sbig, 1.0f, 6));
    NEW(sq, tide_mul(big, big));
    NEW(bs, tide_sum(sq, &dim1, 1, false));
    tide_tensor *keepers[] = {y, s, t, r, pool, sum, am, d, bs};
    for (int i = 0; i < (int)(sizeof keepers / sizeof keepers[0]); i++)
        OK(keep(out, keepers[i]));
    bag_release(&B);
    return 0;
fail:
    bag_release(&B);
    return -1;
}

static int work_eager(values *out) { return eager_on(out, "cpu"); }
static int work_eager_vulkan(values *out) { return eager_on(out, "vulkan"); }

static int work_autograd(values *out)
{
    bag B = {0};
    tide_tensor *x, *w, *k, *img, *h, *cv, *loss, *tgt, *flat, *g;
    int64_t sx[2] = {16, 24}, sw[2] = {24, 10}, simg[4] = {2, 2, 8, 8}, sk[4] = {3, 2, 3, 3};
    NEW(x, pattern(2, sx, 1.0f, 11));
    NEW(w, pattern(2, sw, 0.4f, 12));
    NEW(img, pattern(4, simg, 1.0f, 13));
    NEW(k, pattern(4, sk, 0.3f, 14));
    OK(tide_requires_grad_(x, true));
    OK(tide_requires_grad_(w, true));
    OK(tide_requires_grad_(k, true));
    NEW(h, tide_matmul(x, w)); /* one op a line: a NULL passed on would hide the out of memory */
    NEW(h, tide_tanh(h));
    int64_t tv[16];
    for (int i = 0; i < 16; i++)
        tv[i] = (i * 7) % 10;
    int64_t st[1] = {16};
    NEW(tgt, tide_from_data(tv, 1, st, TIDE_INT64));
    NEW(loss, tide_cross_entropy(h, tgt, TIDE_REDUCTION_MEAN, 0.0, -100));
    int one[2] = {1, 1};
    NEW(cv, tide_conv2d(img, k, NULL, one, one, one, 1));
    NEW(cv, tide_relu(cv));
    NEW(flat, tide_mean(cv, NULL, 0, false));
    NEW(loss, tide_add(loss, flat));
    /* twice: the second pass accumulates into the grads the first made */
    OK(tide_backward(loss, NULL, true));
    OK(tide_backward(loss, NULL, false));
    OK(keep(out, loss));
    tide_tensor *leaves[] = {x, w, k};
    for (int i = 0; i < 3; i++) {
        NEW(g, tide_grad(leaves[i]));
        OK(keep(out, g));
    }
    bag_release(&B);
    return 0;
fail:
    bag_release(&B);
    return -1;
}

/* The graph of issue 18: a tanh chain, softmax over rows, then a matmul whose ReLU is its
 * epilogue. Inputs x [rows, cols], w [cols, cols]. */
static tide_tensor *graph_body(bag *bp, tide_tensor *x, tide_tensor *w)
{
    bag B = *bp;
    tide_tensor *a, *t, *sg, *u, *s, *m, *y = NULL;
    NEW(a, tide_mul_scalar(x, 1.5));
    NEW(a, tide_add_scalar(a, 0.25));
    NEW(t, tide_tanh(a));
    NEW(sg, tide_sigmoid(x));
    NEW(u, tide_mul(t, sg));
    NEW(u, tide_add_scalar(u, -0.5));
    NEW(s, tide_softmax(u, -1));
    NEW(m, tide_matmul(s, w));
    NEW(y, tide_relu(m));
fail:
    *bp = B;
    return y;
}

/* Captures graph_body on x and w (inputs of the graph; masks: their dynamic dims, or NULL);
 * runs it once (tide_jit_end does). */
static tide_graph *capture(bag *bp, tide_tensor *x, tide_tensor *w, const uint32_t *masks,
                           tide_tensor **y)
{
    tide_tensor *in[2] = {x, w};
    if (tide_jit_begin_dynamic(in, 2, masks) < 0)
        return NULL;
    *y = graph_body(bp, x, w);
    if (!*y) { /* end the capture; the error is the op's */
        char msg[512];
        snprintf(msg, sizeof msg, "%s", tide_last_error());
        bag_release(bp); /* nothing of the capture stays alive to be an output */
        tide_graph_free(tide_jit_end(NULL, 0));
        td_error("%s", msg);
        return NULL;
    }
    return tide_jit_end(y, 1);
}

static int work_jit_compile(values *out)
{
    bag B = {0};
    tide_tensor *x, *w, *y;
    tide_graph *g = NULL;
    tide_jit_cache_clear(); /* so every run compiles (libtcc too: the code goes with the plan) */
    int64_t sx[2] = {64, 96}, sw[2] = {96, 64};
    NEW(x, pattern(2, sx, 2.0f, 21));
    NEW(w, pattern(2, sw, 0.5f, 22));
    g = capture(&B, x, w, NULL, &y);
    if (!g)
        goto fail;
    OK(keep(out, y));
    tide_graph_free(g);
    bag_release(&B);
    return 0;
fail:
    tide_graph_free(g);
    bag_release(&B);
    return -1;
}

/* A dynamic capture (x's rows) compiled, then run at another row count. */
static int work_dynamic_graph(values *out)
{
    bag B = {0};
    tide_tensor *x, *w, *x2, *y, *y2 = NULL;
    tide_graph *g = NULL;
    tide_jit_cache_clear();
    int64_t sx[2] = {64, 96}, sw[2] = {96, 64}, sx2[2] = {37, 96};
    uint32_t masks[2] = {1, 0};
    NEW(x, pattern(2, sx, 2.0f, 21));
    NEW(w, pattern(2, sw, 0.5f, 22));
    NEW(x2, pattern(2, sx2, 2.0f, 23));
    g = capture(&B, x, w, masks, &y);
    if (!g)
        goto fail;
    OK(keep(out, y));
    tide_tensor *in2[2] = {x2, w};
    OK(tide_graph_run(g, in2, 2, &y2));
    NEW(y2, y2);
    OK(keep(out, y2));
    tide_graph_free(g);
    bag_release(&B);
    return 0;
fail:
    tide_graph_free(g);
    bag_release(&B);
    return -1;
}

static char graph_path[300];

/* A dynamic graph saved to a file, loaded back (mapped, checked, replayed, compiled) and run at
 * another batch size. */
static int work_graph_file(values *out)
{
    bag B = {0};
    tide_tensor *x, *w, *x2, *y, *y2 = NULL;
    tide_graph *g = NULL, *g2 = NULL;
    tide_jit_cache_clear();
    int64_t sx[2] = {16, 24}, sw[2] = {24, 8}, sx2[2] = {5, 24};
    uint32_t mask = 1;
    NEW(x, pattern(2, sx, 2.0f, 31));
    NEW(w, pattern(2, sw, 0.5f, 32)); /* captured: a weight of the file */
    NEW(x2, pattern(2, sx2, 2.0f, 33));
    OK(tide_jit_begin_dynamic(&x, 1, &mask));
    if (!(y = graph_body(&B, x, w))) {
        tide_jit_cancel();
        goto fail;
    }
    if (!(g = tide_jit_end(&y, 1)))
        goto fail;
    OK(tide_graph_save(g, graph_path, NULL));
    g2 = tide_graph_load(graph_path, NULL);
    if (!g2)
        goto fail;
    OK(tide_graph_run(g2, &x2, 1, &y2));
    NEW(y2, y2);
    OK(keep(out, y2));
    tide_graph_free(g);
    tide_graph_free(g2);
    bag_release(&B);
    return 0;
fail:
    tide_graph_free(g);
    tide_graph_free(g2);
    bag_release(&B);
    return -1;
}

/* A graph compiled once (outside the sweep), run in it: on the CPU and on Vulkan. */
static tide_graph *run_graph;
static tide_tensor *run_in[2];

static int work_graph_run(values *out)
{
    tide_tensor *y = NULL;
    int rc = tide_graph_run(run_graph, run_in, 2, &y);
    if (rc == 0)
        rc = keep(out, y);
    tide_release(y);
    return rc;
}

/* On Vulkan through a trace session (what tide.jit does; a C capture records CPU ops only):
 * compiled on the first call, a cache hit in the sweep. */
static int work_trace_run(values *out)
{
    bag B = {0};
    if (tide_jit_trace_begin(NULL, NULL, NULL) < 0)
        return -1;
    tide_tensor *y = graph_body(&B, run_in[0], run_in[1]);
    int rc = tide_jit_trace_end();
    if (!y && rc == 0)
        rc = -1; /* graph_body's error stays */
    if (rc == 0)
        rc = keep(out, y);
    bag_release(&B);
    return rc;
}

/* The same with the plan compiled in the run (the device keeps its shaders by their text, so
 * glslang runs only the first time). */
static int work_trace_compile(values *out)
{
    tide_jit_cache_clear();
    return work_trace_run(out);
}

static int make_inputs(const char *device, int64_t rows, int64_t cols)
{
    int64_t sx[2] = {rows, cols}, sw[2] = {cols, cols};
    tide_tensor *x = pattern(2, sx, 2.0f, 31), *w = pattern(2, sw, 0.5f, 32);
    run_in[0] = x && w ? tide_to(x, device) : NULL;
    run_in[1] = x && w ? tide_to(w, device) : NULL;
    tide_release(x);
    tide_release(w);
    return run_in[0] && run_in[1] ? 0 : -1;
}

static int make_run_graph(const char *device, int64_t rows, int64_t cols)
{
    bag B = {0};
    tide_tensor *y = NULL;
    if (make_inputs(device, rows, cols) < 0)
        return -1;
    run_graph = capture(&B, run_in[0], run_in[1], NULL, &y);
    bag_release(&B);
    return run_graph ? 0 : -1;
}

static void free_run_graph(void)
{
    tide_graph_free(run_graph);
    tide_release(run_in[0]);
    tide_release(run_in[1]);
    run_graph = NULL;
    run_in[0] = run_in[1] = NULL;
}

static char st_path[300], npy_path[300], idx_path[300], gz_path[300];

static int work_loaders(values *out)
{
    bag B = {0};
    tide_tensor_dict *d = NULL;
    tide_tensor *a, *b, *c, *l, *ld;
    int64_t sa[2] = {5, 7}, sb[1] = {9};
    NEW(a, pattern(2, sa, 1.0f, 41));
    NEW(b, pattern(1, sb, 100.0f, 42));
    NEW(b, tide_cast(b, TIDE_INT64));
    NEW(c, tide_transpose(a, 0, 1)); /* written row-major from a strided view */
    const char *names[3] = {"a", "b.weight", "c"};
    tide_tensor *ts[3] = {a, b, c};
    const char *meta[4] = {"format", "pt", "step", "12"};
    OK(tide_save_safetensors(st_path, names, ts, 3, meta, 2));
    d = tide_load_safetensors(st_path);
    if (!d)
        goto fail;
    for (int i = 0; i < tide_tensor_dict_count(d); i++)
        OK(keep(out, tide_tensor_dict_tensor(d, i)));
    const char *step = tide_tensor_dict_metadata_find(d, "step");
    OK(keep_number(out, step ? atof(step) : -1));
    tide_tensor_dict_free(d);
    d = NULL;
    OK(tide_save_npy(npy_path, c));
    NEW(l, tide_load_npy(npy_path));
    OK(keep(out, l));
    NEW(ld, tide_load_idx(idx_path));
    OK(keep(out, ld));
    NEW(ld, tide_load_idx(gz_path)); /* zlib's allocations, through td_calloc */
    OK(keep(out, ld));
    bag_release(&B);
    return 0;
fail:
    tide_tensor_dict_free(d);
    bag_release(&B);
    return -1;
}

/* A tiny linear model trained by SGD through the C API: three steps of forward, MSE loss,
 * backward and the update p <- p - lr * grad, without gradients recorded. read_loss reads the
 * loss in the middle of the step. */
static int sgd_step(bag *bp, tide_tensor *x, tide_tensor *target, tide_tensor *W, tide_tensor *b,
                    values *out, bool read_loss)
{
    bag B = *bp;
    tide_tensor *y, *loss, *g, *u;
    NEW(y, tide_linear(x, W, b));
    NEW(loss, tide_mse_loss(y, target, TIDE_REDUCTION_MEAN));
    double v;
    if (read_loss) /* in a trace: a graph break, the forward runs now */
        OK(tide_item(loss, &v));
    OK(tide_backward(loss, NULL, false));
    bool was = tide_set_grad_enabled(false);
    tide_tensor *params[2] = {W, b};
    int rc = 0;
    for (int i = 0; i < 2 && rc == 0; i++) {
        g = put(&B, tide_grad(params[i]));
        tide_tensor *step = g ? put(&B, tide_mul_scalar(g, 0.1)) : NULL;
        u = step ? put(&B, tide_sub(params[i], step)) : NULL;
        rc = u ? tide_copy_(params[i], u) : -1;
        if (rc == 0)
            rc = tide_set_grad(params[i], NULL);
    }
    tide_set_grad_enabled(was);
    OK(rc);
    if (out)
        OK(keep(out, loss));
    *bp = B;
    return 0;
fail:
    *bp = B;
    return -1;
}

static int train(values *out, bool traced)
{
    bag B = {0};
    tide_tensor *x, *target, *W, *b;
    int64_t sx[2] = {32, 16}, st[2] = {32, 8}, sw[2] = {8, 16}, sb[1] = {8};
    bool tracing = false;
    if (traced)
        tide_jit_cache_clear();
    NEW(x, pattern(2, sx, 1.0f, 51));
    NEW(target, pattern(2, st, 1.0f, 52));
    NEW(W, pattern(2, sw, 0.3f, 53));
    NEW(b, pattern(1, sb, 0.1f, 54));
    OK(tide_requires_grad_(W, true));
    OK(tide_requires_grad_(b, true));
    for (int step = 0; step < 3; step++) {
        if (traced) {
            OK(tide_jit_trace_begin(NULL, NULL, NULL));
            tracing = true;
        }
        /* losses are read after the trace (a read inside is a graph break: also fine) */
        OK(sgd_step(&B, x, target, W, b, traced ? NULL : out, traced && step == 1));
        if (traced) {
            tracing = false;
            OK(tide_jit_trace_end());
        }
    }
    OK(keep(out, W));
    OK(keep(out, b));
    bag_release(&B);
    return 0;
fail:
    if (tracing) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", tide_last_error());
        tide_jit_trace_end();
        td_error("%s", msg);
    }
    bag_release(&B);
    return -1;
}

static int work_train(values *out) { return train(out, false); }
static int work_train_traced(values *out) { return train(out, true); }

/* ---- a memory cap as the second way to fail -------------------------------------------------- */

/* The graph of issue 18 under caps just above the bytes in use: each run must fail with "out
 * of memory" or give exactly the values of an uncapped run (it once returned success with half
 * the values stale: a fusion group's scratch allocation failed quietly). */
static void test_memory_cap(int64_t rows, int64_t cols)
{
    if (make_run_graph("cpu", rows, cols) < 0) {
        CHECK(0, "memory cap graph: %s", tide_last_error());
        free_run_graph();
        return;
    }
    double t0 = now_s();
    values want = {0}, got = {0};
    CHECK(work_graph_run(&want) == 0, "uncapped: %s", tide_last_error());
    tide_empty_cache();
    size_t base = bytes_in_use();
    /* the least cap that lets a run through (threads make it vary a little) */
    size_t lo = 0, hi = (size_t)64 << 20;
    while (hi - lo > 4096) {
        size_t mid = (lo + hi) / 2;
        tide_set_memory_limit(base + mid);
        int rc = work_graph_run(&got);
        tide_set_memory_limit(0);
        values_free(&got);
        if (rc == 0)
            hi = mid;
        else
            lo = mid;
    }
    /* caps from well below that to above it, finely near it */
    int runs = 0, failed = 0, wrong = 0, silent = 0;
    for (int64_t extra = (int64_t)hi - (128 << 10); extra <= (int64_t)hi + (16 << 10);
         extra += extra < (int64_t)hi - (16 << 10) ? 8192 : 512) {
        if (extra < 0)
            continue;
        tide_set_memory_limit(base + (size_t)extra);
        tide_clear_error();
        int rc = work_graph_run(&got);
        tide_set_memory_limit(0);
        runs++;
        if (rc < 0) {
            failed++;
            silent += strstr(tide_last_error(), "out of memory") == NULL ||
                      tide_last_error_code() != TIDE_ERR_OUT_OF_MEMORY;
        } else {
            wrong += !same_values(&got, &want);
        }
        values_free(&got);
    }
    printf("memory cap %lldx%lld %16d runs (caps around %zu KiB above the %zu KiB in use), %d "
           "failed with a message, %.1f s\n", (long long)rows, (long long)cols, runs, hi >> 10,
           base >> 10, failed, now_s() - t0);
    total_runs += runs;
    CHECK(wrong == 0, "under a memory cap %d runs succeeded with wrong values", wrong);
    CHECK(silent == 0, "%d capped runs failed without an out-of-memory message and code", silent);
    CHECK(failed > 0 && failed < runs, "caps around the need: %d of %d failed", failed, runs);
    values_free(&want);
    free_run_graph();
}

/* ---- main ------------------------------------------------------------------------------------ */

/* A plain IDX file: uint8 [3, 4] (magic 00 00 08 02, big-endian dims 3 and 4, 12 bytes). */
static void write_idx(void)
{
    unsigned char f[12 + 12] = {0, 0, 0x08, 2, 0, 0, 0, 3, 0, 0, 0, 4};
    for (int i = 0; i < 12; i++)
        f[12 + i] = (unsigned char)(i * 19);
    FILE *fp = fopen(idx_path, "wb");
    if (!fp || fwrite(f, 1, sizeof f, fp) != sizeof f || fclose(fp) != 0) {
        fprintf(stderr, "test_alloc_faults: cannot write %s\n", idx_path);
        exit(2);
    }
    /* The same gzipped in two members (the second appended), so a run restarts inflate. */
    gzFile g1 = gzopen(gz_path, "wb"), g2 = NULL;
    bool ok = g1 && gzwrite(g1, f, 15) == 15 && gzclose(g1) == Z_OK;
    ok = ok && (g2 = gzopen(gz_path, "ab")) && gzwrite(g2, f + 15, 9) == 9 && gzclose(g2) == Z_OK;
    if (!ok) {
        fprintf(stderr, "test_alloc_faults: cannot write %s\n", gz_path);
        exit(2);
    }
}

static bool vulkan_ok(char *why, size_t n)
{
    if (!tide_vulkan_available(why, n))
        return false;
    int64_t one = 1;
    tide_tensor *p = tide_zeros(1, &one, TIDE_FLOAT32), *v = p ? tide_to(p, "vulkan") : NULL;
    if (!v)
        snprintf(why, n, "%s", tide_last_error());
    tide_release(p);
    tide_release(v);
    return v != NULL;
}

int main(void)
{
    if (RUNNING_ON_VALGRIND) {
        one_shot = (budget){100, 40};
        persistent_budget = (budget){0, 24};
    }
    setenv("TIDE_VULKAN_CACHE_DIR", "0", 1); /* every shader compiled here, nothing on disk */
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tide_test_alloc_faults_%ld", (long)getpid());
    if (mkdir(tmpdir, 0700) != 0) {
        fprintf(stderr, "test_alloc_faults: cannot make %s\n", tmpdir);
        return 2;
    }
    snprintf(st_path, sizeof st_path, "%s/m.safetensors", tmpdir);
    snprintf(npy_path, sizeof npy_path, "%s/c.npy", tmpdir);
    snprintf(idx_path, sizeof idx_path, "%s/l.idx", tmpdir);
    snprintf(gz_path, sizeof gz_path, "%s/l.idx.gz", tmpdir);
    snprintf(graph_path, sizeof graph_path, "%s/g.tgraph", tmpdir);
    write_idx();
    double t0 = now_s();

    sweep("eager ops", work_eager, false);
    sweep("autograd backward", work_autograd, false);
    sweep("jit compile", work_jit_compile, false);
    sweep("dynamic graph", work_dynamic_graph, false);
    sweep("graph file", work_graph_file, false);
    if (make_run_graph("cpu", 64, 96) == 0)
        sweep("graph run (cpu)", work_graph_run, false);
    else
        CHECK(0, "graph on the cpu: %s", tide_last_error());
    free_run_graph();
    char why[256];
    if (vulkan_ok(why, sizeof why)) {
        /* eager Vulkan ops take minutes under valgrind: ASan and release cover them */
        if (!RUNNING_ON_VALGRIND)
            sweep("eager ops (vulkan)", work_eager_vulkan, true);
        if (make_inputs("vulkan", 64, 96) == 0) {
            if (!RUNNING_ON_VALGRIND)
                sweep("jit compile (vulkan)", work_trace_compile, true);
            sweep("graph run (vulkan)", work_trace_run, true);
        }
        else
            CHECK(0, "inputs on vulkan: %s", tide_last_error());
        free_run_graph();
    } else {
        printf("graph run (vulkan)       skipped: %s\n", why);
        tide_clear_error();
    }
    sweep("loaders", work_loaders, false);
    sweep("training step", work_train, false);
    sweep("training step (traced)", work_train_traced, false);
    if (getenv("TIDE_TEST_SWEEPS"))
        ;
    else if (RUNNING_ON_VALGRIND)
        test_memory_cap(128, 256);
    else
        test_memory_cap(512, 1024);

    printf("test_alloc_faults: %d runs in all%s, %.1f s\n", total_runs,
           RUNNING_ON_VALGRIND ? " (N sampled under valgrind)" : "", now_s() - t0);
    remove(st_path);
    remove(npy_path);
    remove(idx_path);
    remove(gz_path);
    remove(graph_path);
    rmdir(tmpdir);
    tide_jit_cache_clear();
    tide_shutdown();
    return test_summary("test_alloc_faults");
}
