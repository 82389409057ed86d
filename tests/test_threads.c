/* test_threads.c — an application calling tide from 8 threads at once, for a bounded time
 * (TIDE_TEST_SECONDS, default 2): each thread does, over and over, on its own tensors
 *  - an MLP forward pass eagerly (weights shared, read-only), a softmax and reductions, and
 *    ops big enough to use the thread pool (which the threads then compete for);
 *  - the same forward pass through one compiled graph shared by every thread (tide_graph_run
 *    on its own input), and through a graph it captures itself (the shared compile cache: a
 *    hit), and a traced session (tide_jit_trace_begin/end);
 *  - a backward pass on its own graph (autograd state is per thread);
 *  - a user mistake, whose message must be its own (errors are per thread);
 *  - random numbers, whose values must lie in [0, 1);
 *  - and thread 0 changes the thread pool's size (tide_set_num_threads) between iterations;
 * and every result must equal the single-threaded one computed before the threads start:
 * bitwise, except the sum of a large tensor (within 1e-5 relative: its partial sums depend on
 * whether the thread pool was free to split it).
 * scripts/test.sh also runs this program built with ThreadSanitizer (TIDE_TSAN=ON), which must
 * report nothing. What is safe is written down in docs/threads.md. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <time.h>

#include "core/tide.h"
#include "test_util.h"

#define NTHREADS 8
#define BATCH 16
#define IN 96
#define HID 64
#define OUT 10

static tide_tensor *w1, *b1, *w2, *b2;
static tide_graph *shared_graph;
static tide_tensor *inputs[NTHREADS], *ref_logits[NTHREADS], *ref_softmax[NTHREADS];
static double ref_sum[NTHREADS];
/* big enough for the kernels to use the thread pool, which threads then compete for */
#define BIG (1 << 17)
static tide_tensor *big[NTHREADS];
static double ref_big[NTHREADS];
static double deadline;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static tide_tensor *forward(const tide_tensor *x)
{
    tide_tensor *h = tide_linear(x, w1, b1);
    tide_tensor *r = h ? tide_relu(h) : NULL;
    tide_tensor *o = r ? tide_linear(r, w2, b2) : NULL;
    tide_release(h);
    tide_release(r);
    return o;
}

/* Largest |a - b| over the elements (float64), or INFINITY when they cannot be compared. */
static double max_diff(const tide_tensor *a, const tide_tensor *b)
{
    if (!a || !b || tide_numel(a) != tide_numel(b))
        return INFINITY;
    int64_t n = tide_numel(a);
    double *va = malloc((size_t)n * sizeof *va), *vb = malloc((size_t)n * sizeof *vb);
    tide_tensor *ca = tide_cast(a, TIDE_FLOAT64), *cb = tide_cast(b, TIDE_FLOAT64);
    double m = INFINITY;
    if (va && vb && ca && cb && tide_to_buffer(ca, va, (size_t)n * sizeof *va) == 0 &&
        tide_to_buffer(cb, vb, (size_t)n * sizeof *vb) == 0) {
        m = 0;
        for (int64_t i = 0; i < n; i++)
            m = fmax(m, fabs(va[i] - vb[i]));
    }
    tide_release(ca);
    tide_release(cb);
    free(va);
    free(vb);
    return m;
}

static double sum_value(const tide_tensor *t)
{
    tide_tensor *s = tide_sum(t, NULL, 0, false);
    double v = NAN;
    if (!s || tide_item(s, &v) < 0)
        v = NAN;
    tide_release(s);
    return v;
}

typedef struct worker {
    int id;
    int iterations;
    int bad;
    char why[256];
} worker;

#define TOL 0.0 /* bitwise: the same kernels whatever the thread */
#define WORKER_CHECK(w, cond, ...)                                                                \
    do {                                                                                           \
        if (!(cond)) {                                                                             \
            if (!(w)->bad++)                                                                       \
                snprintf((w)->why, sizeof (w)->why, __VA_ARGS__);                                  \
        }                                                                                          \
    } while (0)

static void one_iteration(worker *w)
{
    int k = w->id;
    tide_tensor *x = inputs[k];

    /* eager forward, softmax, reduction */
    tide_tensor *lg = forward(x);
    WORKER_CHECK(w, max_diff(lg, ref_logits[k]) <= TOL, "eager logits differ: %g (%s)",
                 max_diff(lg, ref_logits[k]), tide_last_error());
    tide_tensor *sm = lg ? tide_softmax(lg, -1) : NULL;
    WORKER_CHECK(w, max_diff(sm, ref_softmax[k]) <= TOL, "softmax differs");
    WORKER_CHECK(w, fabs(sum_value(x) - ref_sum[k]) <= 1e-3, "sum %.9g vs %.9g", sum_value(x),
                 ref_sum[k]);
    tide_release(sm);
    tide_release(lg);
    tide_tensor *e = tide_exp(big[k]);
    double se = e ? sum_value(e) : NAN;
    WORKER_CHECK(w, fabs(se - ref_big[k]) <= 1e-5 * fabs(ref_big[k]), "sum(exp(big)) %.9g vs %.9g",
                 se, ref_big[k]);
    tide_release(e);

    /* the shared compiled graph, on this thread's input */
    tide_tensor *out = NULL;
    int rc = tide_graph_run(shared_graph, &x, 1, &out);
    WORKER_CHECK(w, rc == 0 && max_diff(out, ref_logits[k]) <= TOL, "shared graph: %s",
                 rc ? tide_last_error() : "values differ");
    tide_release(out);

    /* a graph captured on this thread: same structure, so the compile cache hits */
    int64_t shape[2] = {BATCH, IN};
    tide_tensor *ph = tide_zeros(2, shape, TIDE_FLOAT32);
    tide_graph *g = NULL;
    if (ph && tide_jit_begin(&ph, 1) == 0) {
        tide_tensor *o = forward(ph);
        g = tide_jit_end(&o, o ? 1 : 0);
        tide_release(o);
    }
    out = NULL;
    rc = g ? tide_graph_run(g, &x, 1, &out) : -1;
    WORKER_CHECK(w, rc == 0 && max_diff(out, ref_logits[k]) <= TOL, "own graph: %s",
                 rc ? tide_last_error() : "values differ");
    tide_release(out);
    tide_graph_free(g);
    tide_release(ph);

    /* a trace session (what tide.jit does): ops are recorded and run at the end */
    if (tide_jit_trace_begin(NULL, NULL, NULL) == 0) {
        tide_tensor *o = forward(x);
        rc = tide_jit_trace_end();
        WORKER_CHECK(w, rc == 0 && max_diff(o, ref_logits[k]) <= TOL, "trace session: %s",
                     rc ? tide_last_error() : "values differ");
        tide_release(o);
    } else {
        WORKER_CHECK(w, 0, "trace begin: %s", tide_last_error());
    }

    /* autograd on this thread's own leaf: d/dx sum(x*x) = 2x */
    tide_tensor *leaf = tide_clone(x);
    tide_requires_grad_(leaf, true);
    tide_tensor *sq = tide_mul(leaf, leaf);
    tide_tensor *loss = sq ? tide_sum(sq, NULL, 0, false) : NULL;
    rc = loss ? tide_backward(loss, NULL, false) : -1;
    tide_tensor *grad = tide_grad(leaf), *twice = tide_mul_scalar(x, 2.0);
    WORKER_CHECK(w, rc == 0 && max_diff(grad, twice) == 0, "backward: %s",
                 rc ? tide_last_error() : "gradient differs");
    tide_release(grad);
    tide_release(twice);
    tide_release(loss);
    tide_release(sq);
    tide_release(leaf);

    /* a mistake: the message this thread reads is about its own shapes */
    int64_t sa[2] = {k + 2, 3}, sb[1] = {4};
    tide_tensor *a = tide_zeros(2, sa, TIDE_FLOAT32), *b = tide_zeros(1, sb, TIDE_FLOAT32);
    tide_tensor *bad = tide_add(a, b);
    char want[32];
    snprintf(want, sizeof want, "[%d, 3]", k + 2);
    WORKER_CHECK(w, !bad && strstr(tide_last_error(), want), "error \"%s\" lacks %s",
                 tide_last_error(), want);
    tide_release(bad);
    tide_release(a);
    tide_release(b);

    /* random numbers from several threads: each call gets its own block of the stream */
    int64_t rs[1] = {257};
    tide_tensor *r = tide_rand(1, rs, TIDE_FLOAT32);
    tide_tensor *mx = r ? tide_max(r, NULL, 0, false) : NULL, *mn = r ? tide_min(r, NULL, 0, false) : NULL;
    double vmax = 2, vmin = -1;
    if (mx)
        tide_item(mx, &vmax);
    if (mn)
        tide_item(mn, &vmin);
    WORKER_CHECK(w, vmin >= 0 && vmax < 1, "rand outside [0, 1): %g %g", vmin, vmax);
    tide_release(mx);
    tide_release(mn);
    tide_release(r);
}

static void *worker_main(void *p)
{
    worker *w = p;
    do {
        one_iteration(w);
        /* one thread keeps changing the pool's size under the others */
        if (w->id == 0)
            tide_set_num_threads(1 + w->iterations % 3);
        w->iterations++;
    } while (now() < deadline && !w->bad);
    return NULL;
}

int main(void)
{
    const char *secs = getenv("TIDE_TEST_SECONDS");
    double seconds = secs && atof(secs) > 0 ? atof(secs) : 2.0;

    tide_manual_seed(42);
    int64_t s1[2] = {HID, IN}, s2[1] = {HID}, s3[2] = {OUT, HID}, s4[1] = {OUT};
    w1 = tide_randn(2, s1, TIDE_FLOAT32);
    b1 = tide_randn(1, s2, TIDE_FLOAT32);
    w2 = tide_randn(2, s3, TIDE_FLOAT32);
    b2 = tide_randn(1, s4, TIDE_FLOAT32);
    int64_t xs[2] = {BATCH, IN};
    /* single-threaded references */
    for (int k = 0; k < NTHREADS; k++) {
        inputs[k] = tide_randn(2, xs, TIDE_FLOAT32);
        ref_logits[k] = forward(inputs[k]);
        ref_softmax[k] = ref_logits[k] ? tide_softmax(ref_logits[k], -1) : NULL;
        ref_sum[k] = sum_value(inputs[k]);
        int64_t bs[1] = {BIG};
        big[k] = tide_rand(1, bs, TIDE_FLOAT32);
        tide_tensor *e = tide_exp(big[k]);
        ref_big[k] = sum_value(e);
        tide_release(e);
        CHECK(ref_softmax[k] != NULL, "reference %d: %s", k, tide_last_error());
    }
    tide_tensor *ph = tide_zeros(2, xs, TIDE_FLOAT32);
    CHECK(tide_jit_begin(&ph, 1) == 0, "capture: %s", tide_last_error());
    tide_tensor *o = forward(ph);
    shared_graph = tide_jit_end(&o, o ? 1 : 0);
    tide_release(o);
    tide_release(ph);
    CHECK(shared_graph != NULL, "capture: %s", tide_last_error());

    tide_jit_stats before, after;
    tide_jit_global_stats(&before);
    deadline = now() + seconds;
    pthread_t th[NTHREADS];
    worker ws[NTHREADS];
    for (int k = 0; k < NTHREADS; k++) {
        ws[k] = (worker){.id = k};
        CHECK(pthread_create(&th[k], NULL, worker_main, &ws[k]) == 0, "pthread_create");
    }
    int total = 0;
    for (int k = 0; k < NTHREADS; k++) {
        pthread_join(th[k], NULL);
        CHECK(ws[k].bad == 0, "thread %d, iteration %d: %s", k, ws[k].iterations, ws[k].why);
        CHECK(ws[k].iterations >= 1, "thread %d ran no iteration", k);
        total += ws[k].iterations;
    }
    tide_jit_global_stats(&after);
    /* Every thread's own capture and trace session has the structure of the shared graph (or
     * of its trace): at most a couple of compiles, however many iterations ran. */
    CHECK(after.compiles - before.compiles <= 2, "%lld compiles during the run",
          (long long)(after.compiles - before.compiles));
    CHECK(after.hits - before.hits >= total, "%lld cache hits for %d iterations",
          (long long)(after.hits - before.hits), total);
    printf("test_threads: %d threads, %d iterations in %.1f s\n", NTHREADS, total, seconds);

    tide_graph_free(shared_graph);
    for (int k = 0; k < NTHREADS; k++) {
        tide_release(inputs[k]);
        tide_release(ref_logits[k]);
        tide_release(ref_softmax[k]);
        tide_release(big[k]);
    }
    tide_release(w1);
    tide_release(b1);
    tide_release(w2);
    tide_release(b2);
    tide_jit_cache_clear();
    tide_shutdown();
    return test_summary("test_threads");
}
