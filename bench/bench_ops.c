/*
 * bench_ops.c — how fast tide's basic CPU ops are, next to what this machine can do at all.
 *
 * A figure like "add: 20 GB/s" means nothing alone, and on a small shared VM it also moves from
 * run to run. So one run measures the machine's own limits — STREAM triad (the bandwidth a
 * perfect elementwise binary op could reach) and a plain multi-threaded read (the bandwidth a
 * perfect full reduction could reach) — and reports each tide op as a ratio against a
 * reference with the op's own footprint, timed in alternation with the op so that both see the
 * same neighbours and the same cache state. The last block prints the per-call cost of a tiny
 * op, which is all overhead: dispatch, allocation, release.
 *
 * Every line is "name: value unit"; a *_target line ends in "(met)" or "(NOT met)".
 * Lines starting with '#' say how the figures were taken.
 */

/* The bench CMake builds with -O2. The reference loops must measure the machine, not a timid
 * compiler: their explicit vector types below do most of that, and O3 lets gcc unroll them
 * and vectorize the rest (array initialisation) without a cost-model veto. */
#pragma GCC optimize("O3")

#define _GNU_SOURCE /* sysconf(_SC_LEVEL3_CACHE_SIZE) */
#include <math.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "tide.h"

/* STREAM's rule is arrays well past the last-level cache. sysconf's L3 figure on this VM is
 * 508 MiB (likely the whole host socket's), and reads measured here keep slowing down as the
 * array grows from 64 MiB (58 GB/s, one thread) to 1 GiB (32 GB/s): some cache level still
 * helps far past 32 MiB. So the machine's figure uses 256 MiB double arrays (768 MiB per
 * pass), past even the reported L3, and the op ratios use a triad with the same footprint as
 * the op (three 64 MiB float arrays, as tide_add's), so that cache helps both sides equally. */
#define STREAM_N ((int64_t)32 * 1024 * 1024) /* doubles per array */
#define OP_N ((int64_t)16 * 1024 * 1024)     /* float32 elements per tide tensor: 64 MiB */
/* Every timing (references and ops alike) is the best of at least MIN_REPS runs spanning at
 * least MIN_SECONDS: ten runs of a 1.5 ms sum fit inside one hiccup of this shared machine,
 * ten runs of an 18 ms triad do not. */
#define MIN_REPS 10
#define MIN_SECONDS 0.1
#define MAX_REPS 1000
#define TINY_CALLS 1000000
#define TINY_ROUNDS 3

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

/* Whether a timing loop that has done reps runs since started (now_seconds()) may stop. */
static bool enough_reps(int reps, double started)
{
    return reps >= MAX_REPS || (reps >= MIN_REPS && now_seconds() - started >= MIN_SECONDS);
}

/* Thread tid's share [lo, hi) of n elements. Boundaries fall on 16-element (64-byte for
 * float32, 128-byte for double) multiples so no cache line is written by two threads. */
static void thread_range(int tid, int nthreads, int64_t n, int64_t *lo, int64_t *hi)
{
    int64_t blocks = (n + 15) / 16;
    int64_t b0 = blocks * tid / nthreads, b1 = blocks * (tid + 1) / nthreads;
    *lo = b0 * 16 < n ? b0 * 16 : n;
    *hi = b1 * 16 < n ? b1 * 16 : n;
}

/* ---- a minimal worker pool ---------------------------------------------------------------
 * Threads are created once and park on a barrier between jobs, so a timed job costs two
 * barrier crossings (microseconds) rather than thread creation. The calling thread is worker 0,
 * so "all threads" uses exactly nthreads cores, as tide's own pool does. */

typedef void (*pool_job)(int tid, int nthreads, void *arg);

typedef struct pool {
    int nthreads;
    pthread_t *threads;
    struct pool_worker *workers;
    pthread_barrier_t start, done;
    pool_job job;
    void *arg;
    bool quit;
} pool;

typedef struct pool_worker {
    pool *p;
    int tid;
} pool_worker;

static void *pool_main(void *raw)
{
    pool_worker *w = raw;
    pool *p = w->p;
    for (;;) {
        pthread_barrier_wait(&p->start);
        if (p->quit)
            return NULL;
        p->job(w->tid, p->nthreads, p->arg);
        pthread_barrier_wait(&p->done);
    }
}

static int pool_init(pool *p, int nthreads)
{
    memset(p, 0, sizeof *p);
    p->nthreads = nthreads;
    p->threads = calloc((size_t)nthreads, sizeof *p->threads);
    p->workers = calloc((size_t)nthreads, sizeof *p->workers);
    if (!p->threads || !p->workers)
        return -1;
    if (pthread_barrier_init(&p->start, NULL, (unsigned)nthreads) != 0 ||
        pthread_barrier_init(&p->done, NULL, (unsigned)nthreads) != 0)
        return -1;
    for (int t = 1; t < nthreads; t++) {
        p->workers[t].p = p;
        p->workers[t].tid = t;
        if (pthread_create(&p->threads[t], NULL, pool_main, &p->workers[t]) != 0)
            return -1; /* the barriers would then never open: callers treat this as fatal */
    }
    return 0;
}

static void pool_run(pool *p, pool_job job, void *arg)
{
    p->job = job;
    p->arg = arg;
    pthread_barrier_wait(&p->start);
    job(0, p->nthreads, arg);
    pthread_barrier_wait(&p->done);
}

static void pool_destroy(pool *p)
{
    p->quit = true;
    pthread_barrier_wait(&p->start);
    for (int t = 1; t < p->nthreads; t++)
        pthread_join(p->threads[t], NULL);
    pthread_barrier_destroy(&p->start);
    pthread_barrier_destroy(&p->done);
    free(p->threads);
    free(p->workers);
}

/* ---- STREAM triad --------------------------------------------------------------------------- */

typedef struct stream_arrays {
    void *a, *b, *c;
    int64_t n;
    bool f32; /* float elements (the footprint of a tide op) rather than STREAM's doubles */
} stream_arrays;

/* Vector width matters even for a memory-bound loop: on the 2-core Zen VM this was written on,
 * the triad built for plain x86-64 (SSE2, what -O2 emits) reached 26-33 GB/s, the same loop
 * with AVX2 35-37 and with AVX-512 37-39. tide's kernels pick their ISA at run time, so the
 * reference must too or it would flatter them: target_clones builds one copy per ISA and the
 * loader picks by cpuid. The 64-byte vector types make each copy use its widest registers (one
 * zmm, two ymm or four xmm) whatever gcc's preferred vector width is. */
typedef double f64x8 __attribute__((vector_size(64)));
typedef float f32x16 __attribute__((vector_size(64)));
#define REF_CLONES __attribute__((target_clones("avx512f", "avx2", "default")))

REF_CLONES
static void triad_f64(double *restrict a, const double *restrict b, const double *restrict c,
                      int64_t n, double s)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        f64x8 vb, vc;
        memcpy(&vb, b + i, sizeof vb); /* memcpy: an unaligned vector load, no promise needed */
        memcpy(&vc, c + i, sizeof vc);
        f64x8 va = vb + s * vc;
        memcpy(a + i, &va, sizeof va);
    }
    for (; i < n; i++)
        a[i] = b[i] + s * c[i];
}

REF_CLONES
static void triad_f32(float *restrict a, const float *restrict b, const float *restrict c,
                      int64_t n, float s)
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

static void stream_init_job(int tid, int nthreads, void *arg)
{
    stream_arrays *s = arg;
    int64_t lo, hi;
    thread_range(tid, nthreads, s->n, &lo, &hi);
    for (int64_t i = lo; i < hi; i++) {
        if (s->f32) {
            ((float *)s->a)[i] = 0.0f;
            ((float *)s->b)[i] = 1.0f;
            ((float *)s->c)[i] = 2.0f;
        } else {
            ((double *)s->a)[i] = 0.0;
            ((double *)s->b)[i] = 1.0;
            ((double *)s->c)[i] = 2.0;
        }
    }
}

static void stream_triad_job(int tid, int nthreads, void *arg)
{
    stream_arrays *s = arg;
    int64_t lo, hi;
    thread_range(tid, nthreads, s->n, &lo, &hi);
    if (s->f32)
        triad_f32((float *)s->a + lo, (float *)s->b + lo, (float *)s->c + lo, hi - lo, 3.0f);
    else
        triad_f64((double *)s->a + lo, (double *)s->b + lo, (double *)s->c + lo, hi - lo, 3.0);
}

static void *alloc_aligned(size_t bytes)
{
    size_t rounded = (bytes + 63) / 64 * 64; /* aligned_alloc wants a multiple of the alignment */
    return aligned_alloc(64, rounded);
}

static size_t stream_elem_size(const stream_arrays *s)
{
    return s->f32 ? sizeof(float) : sizeof(double);
}

/* Allocates n-element arrays and has p's threads first-touch them, each the part it will
 * stream through later, so the pages sit where that thread reads them fastest (it matters on
 * NUMA, costs nothing here). Returns 0 or -1. */
static int stream_setup(stream_arrays *s, pool *p, int64_t n, bool f32)
{
    s->n = n;
    s->f32 = f32;
    s->a = alloc_aligned((size_t)n * stream_elem_size(s));
    s->b = alloc_aligned((size_t)n * stream_elem_size(s));
    s->c = alloc_aligned((size_t)n * stream_elem_size(s));
    if (!s->a || !s->b || !s->c)
        return -1;
    pool_run(p, stream_init_job, s);
    pool_run(p, stream_triad_job, s); /* warm-up: TLBs, clock frequency */
    return 0;
}

static void stream_free(stream_arrays *s)
{
    free(s->a);
    free(s->b);
    free(s->c);
}

/* Seconds for one triad pass on p's threads. */
static double stream_once(stream_arrays *s, pool *p)
{
    double t0 = now_seconds();
    pool_run(p, stream_triad_job, s);
    return now_seconds() - t0;
}

/* STREAM counts 3 arrays' bytes (read b, read c, write a), not the write-allocate read. */
static double stream_bytes(const stream_arrays *s)
{
    return 3.0 * (double)stream_elem_size(s) * (double)s->n;
}

/* 1 + 3*2 at both ends and the middle: the loop really ran over the whole array. */
static bool stream_check(const stream_arrays *s)
{
    for (int k = 0; k < 3; k++) {
        int64_t i = k == 0 ? 0 : k == 1 ? s->n / 2 : s->n - 1;
        double got = s->f32 ? ((float *)s->a)[i] : ((double *)s->a)[i];
        if (got != 7.0) {
            fprintf(stderr, "bench_ops: STREAM triad gave a wrong result\n");
            return false;
        }
    }
    return true;
}

/* Best triad bandwidth in GB/s on p's threads, or -1 for a wrong result. */
static double stream_best(stream_arrays *s, pool *p)
{
    double best = 1e30, started = now_seconds();
    for (int r = 0; !enough_reps(r, started); r++) {
        double t = stream_once(s, p);
        if (t < best)
            best = t;
    }
    return stream_check(s) ? stream_bytes(s) / best / 1e9 : -1.0;
}

/* ---- read reference ------------------------------------------------------------------------- */

typedef struct read_arrays {
    float *x;
    int64_t n;
    double *partial; /* thread t's sum at [8*t]: one 64-byte line each, no false sharing */
} read_arrays;

/* Float addition is not associative, so gcc will not vectorize a plain "s += x[i]" without
 * -ffast-math. Explicit vector accumulators (four, to hide the add latency) say what we mean;
 * the per-ISA copies are for the same reason as the triad's. */
REF_CLONES
static double sum_kernel(const float *restrict x, int64_t n)
{
    f32x16 acc0 = {0}, acc1 = {0}, acc2 = {0}, acc3 = {0};
    int64_t i = 0;
    for (; i + 64 <= n; i += 64) {
        f32x16 v0, v1, v2, v3;
        memcpy(&v0, x + i, sizeof v0);
        memcpy(&v1, x + i + 16, sizeof v1);
        memcpy(&v2, x + i + 32, sizeof v2);
        memcpy(&v3, x + i + 48, sizeof v3);
        acc0 += v0;
        acc1 += v1;
        acc2 += v2;
        acc3 += v3;
    }
    f32x16 acc = (acc0 + acc1) + (acc2 + acc3);
    double s = 0.0;
    for (int k = 0; k < 16; k++)
        s += acc[k];
    for (; i < n; i++)
        s += x[i];
    return s;
}

static void read_init_job(int tid, int nthreads, void *arg)
{
    read_arrays *r = arg;
    int64_t lo, hi;
    thread_range(tid, nthreads, r->n, &lo, &hi);
    for (int64_t i = lo; i < hi; i++)
        r->x[i] = 1.0f;
}

static void read_sum_job(int tid, int nthreads, void *arg)
{
    read_arrays *r = arg;
    int64_t lo, hi;
    thread_range(tid, nthreads, r->n, &lo, &hi);
    r->partial[8 * tid] = sum_kernel(r->x + lo, hi - lo);
}

/* An OP_N float array (the size of tide's sum input) first-touched by p's threads. 0 or -1. */
static int read_setup(read_arrays *r, pool *p)
{
    r->n = OP_N;
    r->x = alloc_aligned((size_t)OP_N * sizeof(float));
    r->partial = alloc_aligned((size_t)p->nthreads * 8 * sizeof(double));
    if (!r->x || !r->partial)
        return -1;
    pool_run(p, read_init_job, r);
    pool_run(p, read_sum_job, r); /* warm-up */
    return 0;
}

static void read_free(read_arrays *r)
{
    free(r->x);
    free(r->partial);
}

/* Seconds for one pass summing the array on p's threads, or -1 for a wrong sum. */
static double read_once(read_arrays *r, pool *p)
{
    double t0 = now_seconds();
    pool_run(p, read_sum_job, r);
    double t = now_seconds() - t0;
    double total = 0.0;
    for (int tid = 0; tid < p->nthreads; tid++)
        total += r->partial[8 * tid];
    if (total != (double)r->n) { /* exact: each lane's count of ones stays below 2^24 */
        fprintf(stderr, "bench_ops: read reference gave a wrong sum\n");
        return -1.0;
    }
    return t;
}

/* Best bandwidth in GB/s of summing the array on p's threads, or -1. */
static double read_best(read_arrays *r, pool *p)
{
    double best = 1e30, started = now_seconds();
    for (int rep = 0; !enough_reps(rep, started); rep++) {
        double t = read_once(r, p);
        if (t < 0)
            return -1.0;
        if (t < best)
            best = t;
    }
    return sizeof(float) * (double)r->n / best / 1e9;
}

/* The reference an op is compared with: a triad or a read, on the all-threads pool. */
typedef struct reference {
    pool *p;
    stream_arrays *triad; /* exactly one of triad and read is set */
    read_arrays *read;
} reference;

/* Seconds for one pass of the reference, or -1. */
static double reference_once(const reference *ref)
{
    return ref->triad ? stream_once(ref->triad, ref->p) : read_once(ref->read, ref->p);
}

static double reference_bytes(const reference *ref)
{
    return ref->triad ? stream_bytes(ref->triad) : sizeof(float) * (double)ref->read->n;
}

/* tide's workers spin a little after each op before they sleep; a reference measured during
 * that spin would share its cores with them and come out low, flattering the ratio. Their spin
 * is a fraction of a millisecond. */
static void let_tide_pool_sleep(void)
{
    struct timespec pause = {0, 2 * 1000 * 1000};
    nanosleep(&pause, NULL);
}

/* ---- tide ops ------------------------------------------------------------------------------- */

typedef struct op_inputs {
    tide_tensor *a, *b;
    const float *a_data, *b_data;
} op_inputs;

typedef tide_tensor *(*op_call)(const op_inputs *in);

static tide_tensor *call_add(const op_inputs *in) { return tide_add(in->a, in->b); }
static tide_tensor *call_mul(const op_inputs *in) { return tide_mul(in->a, in->b); }
static tide_tensor *call_exp(const op_inputs *in) { return tide_exp(in->a); }
static tide_tensor *call_tanh(const op_inputs *in) { return tide_tanh(in->a); }
static tide_tensor *call_sum(const op_inputs *in) { return tide_sum(in->a, NULL, 0, false); }

/* Expected element i of each op's result, in double. */
static double expect_add(const op_inputs *in, int64_t i)
{
    return (double)in->a_data[i] + in->b_data[i];
}
static double expect_mul(const op_inputs *in, int64_t i)
{
    return (double)in->a_data[i] * in->b_data[i];
}
static double expect_exp(const op_inputs *in, int64_t i) { return exp(in->a_data[i]); }
static double expect_tanh(const op_inputs *in, int64_t i) { return tanh(in->a_data[i]); }

typedef struct op_case {
    const char *name;
    op_call call;
    double (*expect)(const op_inputs *in, int64_t i); /* NULL: a full sum */
    double bytes_per_element;
    const char *reference; /* "stream" or "read" */
    double target;
} op_case;

/* A fast op that computes the wrong thing is no result: check the warm-up output once. */
static bool op_result_ok(const op_case *c, const op_inputs *in, const tide_tensor *out)
{
    if (tide_get_dtype(out) != TIDE_FLOAT32) {
        fprintf(stderr, "bench_ops: %s gave %s, not float32\n", c->name,
                tide_dtype_name(tide_get_dtype(out)));
        return false;
    }
    if (!c->expect) {
        double got, want = 0.0, scale = 0.0;
        if (tide_item(out, &got) != 0) {
            fprintf(stderr, "bench_ops: %s: %s\n", c->name, tide_last_error());
            return false;
        }
        for (int64_t i = 0; i < OP_N; i++) {
            want += in->a_data[i];
            scale += fabs(in->a_data[i]);
        }
        /* float32 accumulation of 16M terms: allow a blocked/pairwise sum's rounding */
        if (fabs(got - want) > 1e-5 * scale) {
            fprintf(stderr, "bench_ops: %s gave %.9g, expected %.9g\n", c->name, got, want);
            return false;
        }
        return true;
    }
    const float *o = tide_data_ptr(out);
    if (tide_numel(out) != OP_N || !o || !tide_is_contiguous(out)) {
        fprintf(stderr, "bench_ops: %s gave an unexpected result tensor\n", c->name);
        return false;
    }
    for (int64_t i = 0; i < OP_N; i += 4099) { /* a stride that lands on every SIMD lane */
        double want = c->expect(in, i);
        if (fabs(o[i] - want) > 1e-5 * (1.0 + fabs(want))) {
            fprintf(stderr, "bench_ops: %s[%lld] = %.9g, expected %.9g\n", c->name, (long long)i,
                    o[i], want);
            return false;
        }
    }
    return true;
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

typedef struct op_timing {
    double op_best, op_median; /* GB/s */
    double ref_best;           /* GB/s */
    double ratio_best;         /* op_best / ref_best */
    double ratio_median;       /* median over runs of op / the reference run just before it */
} op_timing;

/* Times c against ref in alternating runs, reference then op, so both see the same load on
 * this shared machine. Each op run is the whole API call plus tide_release of the result; it
 * follows a reference run, so it includes waking tide's sleeping workers, as any op after a
 * pause does. Returns false on a failed call. */
static bool time_op(const op_case *c, const op_inputs *in, const reference *ref, op_timing *out)
{
    tide_tensor *warm = c->call(in); /* warm-up: fills the caching allocator, starts tide's pool */
    if (!warm) {
        fprintf(stderr, "bench_ops: %s failed: %s\n", c->name, tide_last_error());
        return false;
    }
    bool ok = op_result_ok(c, in, warm);
    tide_release(warm);
    if (!ok)
        return false;
    static double op_gbs[MAX_REPS], ref_gbs[MAX_REPS], ratios[MAX_REPS];
    double op_bytes = c->bytes_per_element * (double)OP_N, ref_bytes = reference_bytes(ref);
    int reps = 0;
    for (double started = now_seconds(); !enough_reps(reps, started); reps++) {
        let_tide_pool_sleep();
        double ref_t = reference_once(ref);
        if (ref_t < 0)
            return false;
        double t0 = now_seconds();
        tide_tensor *result = c->call(in);
        tide_release(result);
        double op_t = now_seconds() - t0;
        if (!result) {
            fprintf(stderr, "bench_ops: %s failed: %s\n", c->name, tide_last_error());
            return false;
        }
        op_gbs[reps] = op_bytes / op_t / 1e9;
        ref_gbs[reps] = ref_bytes / ref_t / 1e9;
        ratios[reps] = op_gbs[reps] / ref_gbs[reps];
    }
    if (ref->triad && !stream_check(ref->triad))
        return false;
    out->op_median = median_of(op_gbs, reps); /* sorts: op_gbs[reps - 1] is now the best */
    out->op_best = op_gbs[reps - 1];
    median_of(ref_gbs, reps);
    out->ref_best = ref_gbs[reps - 1];
    out->ratio_best = out->op_best / out->ref_best;
    out->ratio_median = median_of(ratios, reps);
    return true;
}

/* A float32 contiguous tensor of OP_N elements filled by fill(i). */
static tide_tensor *make_input(float (*fill)(int64_t i))
{
    int64_t shape[1] = {OP_N};
    tide_tensor *t = tide_empty(1, shape, TIDE_FLOAT32);
    if (!t) {
        fprintf(stderr, "bench_ops: tide_empty failed: %s\n", tide_last_error());
        return NULL;
    }
    float *p = tide_mutable_data_ptr(t);
    if (!p) {
        fprintf(stderr, "bench_ops: tide_empty gave a tensor without host data\n");
        tide_release(t);
        return NULL;
    }
    for (int64_t i = 0; i < OP_N; i++)
        p[i] = fill(i);
    return t;
}

/* exp and tanh get values in [-4, 4): the range real activations live in, away from both
 * overflow and the saturated region where a kernel could take a shortcut. */
static float fill_a(int64_t i) { return -4.0f + 8.0f * (float)(i % 1021) / 1021.0f; }
static float fill_b(int64_t i) { return 0.5f + 0.25f * (float)(i % 7); }

static void print_target(const char *name, double value, double target, bool higher_is_better,
                         const char *unit)
{
    bool pass = higher_is_better ? value >= target : value <= target;
    printf("%s_target: %s %.2f %s, measured %.2f (%s)\n", name, higher_is_better ? ">=" : "<=",
           target, unit, value, pass ? "met" : "NOT met");
}

/* ns per call of a 4-element float32 add with its release: the fixed cost every op pays. */
/* ---- max along short rows (a softmax's first pass over attention scores) ---------------- */

#define ROWS_N 4096
#define ROWS_LEN 64
#define ROWS_PAIRS 201

/* The reference: each row's largest element by a plain loop gcc vectorizes (no NaN rule). */
static void rows_max_ref(const float *restrict x, float *restrict out)
{
    for (int64_t r = 0; r < ROWS_N; r++) {
        float m = x[r * ROWS_LEN];
        for (int64_t j = 1; j < ROWS_LEN; j++)
            m = x[r * ROWS_LEN + j] > m ? x[r * ROWS_LEN + j] : m;
        out[r] = m;
    }
}

/* Median nanoseconds per row of tide_max over dim 1 of a [4096, 64] float32 tensor (1 MiB, in
 * L2) and of the reference, timed alternately; -1 when tide's answer is wrong. */
static int rows_max_ns(double *tide_ns, double *ref_ns)
{
    int64_t shape[2] = {ROWS_N, ROWS_LEN};
    tide_tensor *x = tide_randn(2, shape, TIDE_FLOAT32);
    float *ref = malloc(sizeof(float) * ROWS_N), *got = malloc(sizeof(float) * ROWS_N);
    double *tt = malloc(sizeof(double) * ROWS_PAIRS), *tr = malloc(sizeof(double) * ROWS_PAIRS);
    int dim = 1, rc = -1;
    if (!x || !ref || !got || !tt || !tr)
        goto done;
    const float *xd = tide_data_ptr(x);
    for (int i = 0; i < ROWS_PAIRS; i++) {
        double t0 = now_seconds();
        tide_tensor *m = tide_max(x, &dim, 1, false);
        double t1 = now_seconds();
        rows_max_ref(xd, ref);
        double t2 = now_seconds();
        tt[i] = (t1 - t0) * 1e9 / ROWS_N;
        tr[i] = (t2 - t1) * 1e9 / ROWS_N;
        bool ok = m && tide_to_buffer(m, got, sizeof(float) * ROWS_N) == 0 &&
                  memcmp(got, ref, sizeof(float) * ROWS_N) == 0;
        tide_release(m);
        if (!ok) {
            fprintf(stderr, "bench_ops: tide_max over rows gave a wrong answer\n");
            goto done;
        }
    }
    qsort(tt, ROWS_PAIRS, sizeof *tt, compare_doubles);
    qsort(tr, ROWS_PAIRS, sizeof *tr, compare_doubles);
    *tide_ns = tt[ROWS_PAIRS / 2];
    *ref_ns = tr[ROWS_PAIRS / 2];
    rc = 0;
done:
    tide_release(x);
    free(ref), free(got), free(tt), free(tr);
    return rc;
}

static double tiny_add_ns(void)
{
    const float av[4] = {1, 2, 3, 4}, bv[4] = {10, 20, 30, 40};
    int64_t shape[1] = {4};
    tide_tensor *a = tide_from_data(av, 1, shape, TIDE_FLOAT32);
    tide_tensor *b = tide_from_data(bv, 1, shape, TIDE_FLOAT32);
    double best = -1.0;
    if (!a || !b) {
        fprintf(stderr, "bench_ops: tide_from_data failed: %s\n", tide_last_error());
        goto done;
    }
    tide_tensor *check = tide_add(a, b);
    float got[4] = {0};
    if (!check || tide_to_buffer(check, got, sizeof got) != 0 || got[0] != 11 || got[3] != 44) {
        fprintf(stderr, "bench_ops: 4-element add failed or is wrong: %s\n", tide_last_error());
        tide_release(check);
        goto done;
    }
    tide_release(check);
    for (int i = 0; i < 10000; i++) /* warm-up: caches, branch predictors, allocator bins */
        tide_release(tide_add(a, b));
    /* Best of a few rounds of averages: one round is long enough to average out per-call
     * jitter, several rounds dodge a neighbour's burst on this shared machine. */
    for (int round = 0; round < TINY_ROUNDS; round++) {
        double t0 = now_seconds();
        for (int i = 0; i < TINY_CALLS; i++)
            tide_release(tide_add(a, b));
        double ns = (now_seconds() - t0) * 1e9 / TINY_CALLS;
        if (best < 0 || ns < best)
            best = ns;
    }
done:
    tide_release(a);
    tide_release(b);
    return best;
}

int main(void)
{
    int nthreads = tide_get_num_threads();
    if (nthreads < 1)
        nthreads = 1;
    bool failed = false;

    long llc = sysconf(_SC_LEVEL3_CACHE_SIZE);
    printf("# tide bench_ops: best of >= %d repetitions spanning >= %.1f s unless said otherwise; "
           "GB = 1e9 bytes\n",
           MIN_REPS, MIN_SECONDS);
    printf("# stream_triad_1t/_all: 3 arrays x %lld doubles (%lld MiB each), the machine's "
           "DRAM figure\n",
           (long long)STREAM_N, (long long)(STREAM_N * 8 >> 20));
    printf("# stream_triad_16M_f32_all, read_sum_16M_f32_all and tide ops: %lld float32 per "
           "array (%lld MiB each); STREAM byte counting (no write-allocate)\n",
           (long long)OP_N, (long long)(OP_N * 4 >> 20));
    printf("# the two 16M references below are back-to-back passes, which find part of their "
           "arrays still in cache; the ops' *_ref figures alternate with the op and do not\n");
    if (llc > 0)
        printf("# L3 reported by sysconf: %ld MiB (on a VM this may be the whole socket's)\n",
               llc >> 20);
    printf("threads: %d count\n", nthreads);

    /* The reference pools: "solo" is the calling thread alone, "all" has nthreads workers.
     * Their threads sleep on a barrier while tide runs, so they never compete with it. */
    pool solo, all;
    if (pool_init(&solo, 1) != 0 || pool_init(&all, nthreads) != 0) {
        fprintf(stderr, "bench_ops: cannot start %d threads\n", nthreads);
        return 1;
    }
    /* References first, while tide's own pool has not started. The 1-thread arrays are
     * separate, so each set is first-touched by the threads that use it. */
    stream_arrays stream_solo, stream_all_arrays, stream_ops;
    read_arrays read_all_arrays;
    double stream_1t = -1.0, stream_all = -1.0, stream_f32 = -1.0, read_all = -1.0;
    if (stream_setup(&stream_solo, &solo, STREAM_N, false) == 0)
        stream_1t = stream_best(&stream_solo, &solo);
    stream_free(&stream_solo);
    if (stream_setup(&stream_all_arrays, &all, STREAM_N, false) == 0)
        stream_all = stream_best(&stream_all_arrays, &all);
    stream_free(&stream_all_arrays);
    if (stream_setup(&stream_ops, &all, OP_N, true) == 0)
        stream_f32 = stream_best(&stream_ops, &all);
    if (read_setup(&read_all_arrays, &all) == 0)
        read_all = read_best(&read_all_arrays, &all);
    if (stream_1t < 0 || stream_all < 0 || stream_f32 < 0 || read_all < 0) {
        fprintf(stderr, "bench_ops: a reference measurement failed (out of memory?)\n");
        return 1;
    }
    printf("stream_triad_1t: %.1f GB/s\n", stream_1t);
    printf("stream_triad_all: %.1f GB/s\n", stream_all);
    printf("stream_triad_16M_f32_all: %.1f GB/s\n", stream_f32);
    printf("read_sum_16M_f32_all: %.1f GB/s\n", read_all);

    op_inputs in = {make_input(fill_a), make_input(fill_b), NULL, NULL};
    if (!in.a || !in.b) {
        tide_release(in.a);
        tide_release(in.b);
        return 1;
    }
    in.a_data = tide_data_ptr(in.a);
    in.b_data = tide_data_ptr(in.b);

    /* Bytes per element follow STREAM's counting: what the op must read plus what it writes.
     * exp and tanh move two arrays to the triad's three (a little more of theirs stays in
     * cache); what their ratio shows is whether the math keeps up with memory. */
    const op_case cases[] = {
        {"add_16M_f32", call_add, expect_add, 3 * sizeof(float), "stream", 0.80},
        {"mul_16M_f32", call_mul, expect_mul, 3 * sizeof(float), "stream", 0.80},
        {"exp_16M_f32", call_exp, expect_exp, 2 * sizeof(float), "stream", 0.60},
        {"tanh_16M_f32", call_tanh, expect_tanh, 2 * sizeof(float), "stream", 0.60},
        {"sum_16M_f32", call_sum, NULL, 1 * sizeof(float), "read", 0.80},
    };
    printf("# tide ops: whole API call incl. output allocation and tide_release, after 1 "
           "warm-up, each run right after a run of its reference (*_ref: "
           "stream_triad_16M_f32_all or read_sum_16M_f32_all)\n");
    printf("# headline figures and *_vs_* ratios use best runs; *_median lines are medians (for "
           "a ratio, of the per-pair ratios: steadier when the machine is loaded)\n");
    printf("# *_vs_stream_dram: against stream_triad_all, the DRAM-sized triad measured at the "
           "start; 64 MiB arrays still gain from cache here, so it can exceed 1\n");
    reference triad_ref = {&all, &stream_ops, NULL}, read_ref = {&all, NULL, &read_all_arrays};
    for (size_t k = 0; k < sizeof cases / sizeof cases[0]; k++) {
        const op_case *c = &cases[k];
        bool is_read = strcmp(c->reference, "read") == 0;
        char ratio_name[64];
        snprintf(ratio_name, sizeof ratio_name, "%s_vs_%s", c->name, c->reference);
        op_timing tm;
        if (!time_op(c, &in, is_read ? &read_ref : &triad_ref, &tm)) {
            failed = true;
            printf("%s: nan GB/s\n", c->name);
            printf("%s: nan ratio\n", ratio_name);
            print_target(ratio_name, NAN, c->target, true, "ratio");
            continue;
        }
        printf("%s: %.1f GB/s\n", c->name, tm.op_best);
        printf("%s_median: %.1f GB/s\n", c->name, tm.op_median);
        printf("%s_ref: %.1f GB/s\n", c->name, tm.ref_best);
        printf("%s: %.2f ratio\n", ratio_name, tm.ratio_best);
        printf("%s_median: %.2f ratio\n", ratio_name, tm.ratio_median);
        if (!is_read)
            printf("%s_dram: %.2f ratio\n", ratio_name, tm.op_best / stream_all);
        print_target(ratio_name, tm.ratio_best, c->target, true, "ratio");
    }
    tide_release(in.a);
    tide_release(in.b);
    stream_free(&stream_ops);
    read_free(&read_all_arrays);
    pool_destroy(&solo);
    pool_destroy(&all);

    double row_tide, row_ref;
    printf("# rows_max_4096x64_f32: tide_max over dim 1 (whole API call), per row, median of %d "
           "calls alternating with a gcc -O3 loop over the same rows (_ref, no NaN rule)\n",
           ROWS_PAIRS);
    if (rows_max_ns(&row_tide, &row_ref) < 0) {
        failed = true;
        row_tide = row_ref = NAN;
    }
    printf("rows_max_4096x64_f32: %.2f ns\n", row_tide);
    printf("rows_max_4096x64_f32_ref: %.2f ns\n", row_ref);
    printf("rows_max_4096x64_f32_vs_ref: %.2f ratio\n", row_ref / row_tide);

    printf("# add4: tide_add + tide_release of 4-element float32 tensors, mean over %d calls, "
           "best of %d rounds\n",
           TINY_CALLS, TINY_ROUNDS);
    double add4 = tiny_add_ns();
    if (add4 < 0)
        failed = true;
    printf("add4_f32: %.1f ns\n", add4 < 0 ? NAN : add4);
    print_target("add4_f32", add4 < 0 ? NAN : add4, 150.0, false, "ns");
    return failed ? 1 : 0;
}
