/*
 * bench_matmul.c — tide_matmul next to OpenBLAS called directly, with the best kernels for this
 * machine and with OpenBLAS's default environment, all measured in the same run.
 *
 * OpenBLAS fixes its kernels (its "core type") once per process, when it is loaded. So each
 * reference configuration runs in its own child process (this program again, with --ref): one
 * per core type the CPU can run among the fast candidates, with OPENBLAS_CORETYPE set and
 * tide's thread count, and one with the inherited environment untouched ("default": whatever
 * OpenBLAS picks, or whatever OPENBLAS_CORETYPE the environment exports). The children time
 * direct cblas calls on request over a pipe, so tide and the references take turns, round
 * after round, and each keeps its best figure: on a shared 2-core machine that is what makes
 * the ratios stable. Between timings everyone sleeps briefly, so that no pool's spinning
 * threads (OpenBLAS's spin for a while after each call) steal cores from the next timing.
 *
 * Every line is "name: value unit"; a *_target line ends in "met" or "NOT met".
 * Lines starting with '#' say how the figures were taken.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "../devices/cpu/cpu_blas.h"
#include "../devices/cpu/cpu_isa.h"
#include "tide.h"

#define ROUNDS 3
#define MIN_SECONDS 0.15 /* per timing */
#define MIN_CALLS 3
#define SETTLE_US 150000 /* pause between timings: lets spinning threads go to sleep */

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static void fill(float *p, int64_t n, unsigned seed)
{
    for (int64_t i = 0; i < n; i++) {
        seed = seed * 1664525u + 1013904223u;
        p[i] = (float)(seed >> 8) / 16777216.0f - 0.5f;
    }
}

/* ---- the reference child: direct CBLAS calls in a loop --------------------------------------- */

typedef void (*sgemm_fn)(int, int, int, int, int, int, float, const float *, int, const float *,
                         int, float, float *, int);
typedef void (*dgemm_fn)(int, int, int, int, int, int, double, const double *, int,
                         const double *, int, double, double *, int);
typedef void (*sgemv_fn)(int, int, int, int, float, const float *, int, const float *, int,
                         float, float *, int);

/* Protocol, one line each way:
 *   "info"                      -> "<corename> <threads>"
 *   "gemm s|d M N K calls"      -> seconds for calls products (after one warm-up)
 *   "gemv M K calls"            -> the same for y = A x
 *   "batched B M N K calls"     -> the same for calls rounds of B products (one call each)
 *   "quit" */
static int reference_child(const char *core, int threads)
{
    if (strcmp(core, "default") != 0)
        setenv("OPENBLAS_CORETYPE", core, 1);
    const char *lib = getenv("TIDE_BLAS_LIBRARY");
    void *h = dlopen(lib && *lib ? lib : "libopenblas.so.0", RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        printf("error %s\n", dlerror());
        return 1;
    }
    sgemm_fn sgemm = (sgemm_fn)dlsym(h, "cblas_sgemm");
    dgemm_fn dgemm = (dgemm_fn)dlsym(h, "cblas_dgemm");
    sgemv_fn sgemv = (sgemv_fn)dlsym(h, "cblas_sgemv");
    const char *(*corename)(void) = (const char *(*)(void))dlsym(h, "openblas_get_corename");
    void (*set_threads)(int) = (void (*)(int))dlsym(h, "openblas_set_num_threads");
    int (*get_threads)(void) = (int (*)(void))dlsym(h, "openblas_get_num_threads");
    if (threads > 0 && set_threads)
        set_threads(threads);
    char line[256];
    while (fgets(line, sizeof line, stdin)) {
        char t;
        long b, m, n, k, calls;
        double seconds = -1;
        if (strncmp(line, "info", 4) == 0) {
            printf("%s %d\n", corename ? corename() : "unknown", get_threads ? get_threads() : 0);
        } else if (sscanf(line, "gemm %c %ld %ld %ld %ld", &t, &m, &n, &k, &calls) == 5) {
            size_t es = t == 'd' ? 8 : 4;
            void *a = malloc((size_t)(m * k) * es), *bb = malloc((size_t)(k * n) * es);
            void *c = calloc((size_t)(m * n), es);
            if (t == 'd') {
                for (long i = 0; i < m * k; i++)
                    ((double *)a)[i] = (double)((i * 7) % 13) / 13 - 0.5;
                for (long i = 0; i < k * n; i++)
                    ((double *)bb)[i] = (double)((i * 5) % 11) / 11 - 0.5;
            } else {
                fill(a, m * k, 1);
                fill(bb, k * n, 2);
            }
            for (long r = 0; r <= calls; r++) {
                if (r == 1)
                    seconds = now_seconds();
                if (t == 'd')
                    dgemm(101, 111, 111, (int)m, (int)n, (int)k, 1.0, a, (int)k, bb, (int)n, 0.0,
                          c, (int)n);
                else
                    sgemm(101, 111, 111, (int)m, (int)n, (int)k, 1.0f, a, (int)k, bb, (int)n,
                          0.0f, c, (int)n);
            }
            seconds = now_seconds() - seconds;
            free(a);
            free(bb);
            free(c);
            printf("%.9f\n", seconds);
        } else if (sscanf(line, "gemv %ld %ld %ld", &m, &k, &calls) == 3) {
            float *a = malloc((size_t)(m * k) * 4), *x = malloc((size_t)k * 4);
            float *y = calloc((size_t)m, 4);
            fill(a, m * k, 1);
            fill(x, k, 2);
            for (long r = 0; r <= calls; r++) {
                if (r == 1)
                    seconds = now_seconds();
                sgemv(101, 111, (int)m, (int)k, 1.0f, a, (int)k, x, 1, 0.0f, y, 1);
            }
            seconds = now_seconds() - seconds;
            free(a);
            free(x);
            free(y);
            printf("%.9f\n", seconds);
        } else if (sscanf(line, "batched %ld %ld %ld %ld %ld", &b, &m, &n, &k, &calls) == 5) {
            float *a = malloc((size_t)(b * m * k) * 4), *bb = malloc((size_t)(b * k * n) * 4);
            float *c = calloc((size_t)(b * m * n), 4);
            fill(a, b * m * k, 1);
            fill(bb, b * k * n, 2);
            for (long r = 0; r <= calls; r++) {
                if (r == 1)
                    seconds = now_seconds();
                for (long i = 0; i < b; i++)
                    sgemm(101, 111, 111, (int)m, (int)n, (int)k, 1.0f, a + i * m * k, (int)k,
                          bb + i * k * n, (int)n, 0.0f, c + i * m * n, (int)n);
            }
            seconds = now_seconds() - seconds;
            free(a);
            free(bb);
            free(c);
            printf("%.9f\n", seconds);
        } else if (strncmp(line, "quit", 4) == 0) {
            break;
        } else {
            printf("error unknown command\n");
        }
        fflush(stdout);
    }
    return 0;
}

/* ---- the parent's side of a reference -------------------------------------------------------- */

typedef struct reference {
    const char *core; /* "default" for the inherited environment */
    pid_t pid;
    FILE *to, *from;
    char corename[64];
    int threads;
} reference;

static bool start_reference(reference *r, const char *core, int threads)
{
    int in[2], out[2];
    if (pipe(in) != 0 || pipe(out) != 0)
        return false;
    fflush(stdout);
    r->core = core;
    r->pid = fork();
    if (r->pid == 0) {
        dup2(in[0], 0);
        dup2(out[1], 1);
        close(in[0]);
        close(in[1]);
        close(out[0]);
        close(out[1]);
        char nthreads[16];
        snprintf(nthreads, sizeof nthreads, "%d", threads);
        execl("/proc/self/exe", "bench_matmul", "--ref", core, nthreads, (char *)NULL);
        _exit(127);
    }
    close(in[0]);
    close(out[1]);
    r->to = fdopen(in[1], "w");
    r->from = fdopen(out[0], "r");
    if (r->pid < 0 || !r->to || !r->from)
        return false;
    char line[256];
    fprintf(r->to, "info\n");
    fflush(r->to);
    if (!fgets(line, sizeof line, r->from) || strncmp(line, "error", 5) == 0) {
        fprintf(stderr, "reference %s failed: %s", core, line);
        return false;
    }
    sscanf(line, "%63s %d", r->corename, &r->threads);
    return true;
}

static double ask(reference *r, const char *cmd)
{
    char line[256];
    fprintf(r->to, "%s\n", cmd);
    fflush(r->to);
    if (!fgets(line, sizeof line, r->from))
        return -1;
    return atof(line);
}

static void stop_reference(reference *r)
{
    if (!r->to)
        return;
    fprintf(r->to, "quit\n");
    fclose(r->to);
    fclose(r->from);
    waitpid(r->pid, NULL, 0);
}

/* ---- tide's side ----------------------------------------------------------------------------- */

typedef struct workload {
    const char *name;
    int kind; /* 0 gemm, 1 gemv, 2 batched */
    char type; /* 's' or 'd' */
    int64_t b, m, n, k;
    bool transposed_a; /* tide only: A as a transposed view (BLAS's trans flag, no copy) */
} workload;

static double flops(const workload *w) { return 2.0 * (double)w->b * w->m * w->n * w->k; }

/* A tensor of the given shape with values in [-0.5, 0.5). */
static tide_tensor *random_tensor(int ndim, const int64_t *shape, tide_dtype dt, unsigned seed)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    float *v = malloc((size_t)n * sizeof *v);
    fill(v, n, seed);
    tide_tensor *f = tide_from_data(v, ndim, shape, TIDE_FLOAT32);
    free(v);
    tide_tensor *t = f ? tide_cast(f, dt) : NULL;
    tide_release(f);
    return t;
}

/* Seconds for calls matmuls through tide (after one warm-up). */
static double time_tide(const workload *w, int64_t calls)
{
    tide_dtype dt = w->type == 'd' ? TIDE_FLOAT64 : TIDE_FLOAT32;
    tide_tensor *a, *b;
    if (w->kind == 1) {
        a = random_tensor(2, (int64_t[]){w->m, w->k}, dt, 1);
        b = random_tensor(1, (int64_t[]){w->k}, dt, 2);
    } else if (w->kind == 2) {
        a = random_tensor(3, (int64_t[]){w->b, w->m, w->k}, dt, 1);
        b = random_tensor(3, (int64_t[]){w->b, w->k, w->n}, dt, 2);
    } else if (w->b > 1) { /* a linear layer: [b, m, k] @ [k, n] */
        a = random_tensor(3, (int64_t[]){w->b, w->m, w->k}, dt, 1);
        b = random_tensor(2, (int64_t[]){w->k, w->n}, dt, 2);
    } else if (w->transposed_a) {
        tide_tensor *stored = random_tensor(2, (int64_t[]){w->k, w->m}, dt, 1);
        a = tide_transpose(stored, 0, 1);
        tide_release(stored);
        b = random_tensor(2, (int64_t[]){w->k, w->n}, dt, 2);
    } else {
        a = random_tensor(2, (int64_t[]){w->m, w->k}, dt, 1);
        b = random_tensor(2, (int64_t[]){w->k, w->n}, dt, 2);
    }
    double t0 = 0;
    for (int64_t r = 0; r <= calls; r++) {
        if (r == 1)
            t0 = now_seconds();
        tide_tensor *c = tide_matmul(a, b);
        if (!c) {
            fprintf(stderr, "tide_matmul failed: %s\n", tide_last_error());
            exit(1);
        }
        tide_release(c);
    }
    double s = now_seconds() - t0;
    tide_release(a);
    tide_release(b);
    return s;
}

static double time_reference(reference *r, const workload *w, int64_t calls)
{
    char cmd[200];
    if (w->kind == 1)
        snprintf(cmd, sizeof cmd, "gemv %lld %lld %lld", (long long)w->m, (long long)w->k,
                 (long long)calls);
    else if (w->kind == 2)
        snprintf(cmd, sizeof cmd, "batched %lld %lld %lld %lld %lld", (long long)w->b,
                 (long long)w->m, (long long)w->n, (long long)w->k, (long long)calls);
    else /* a linear layer's batch folds into rows: one tall product */
        snprintf(cmd, sizeof cmd, "gemm %c %lld %lld %lld %lld", w->type,
                 (long long)(w->b * w->m), (long long)w->n, (long long)w->k, (long long)calls);
    return ask(r, cmd);
}

/* Calls for about MIN_SECONDS at rate GFLOP/s. */
static int64_t calls_for(const workload *w, double gflops)
{
    double c = MIN_SECONDS * gflops * 1e9 / flops(w);
    return c < MIN_CALLS ? MIN_CALLS : (int64_t)c;
}

/* One timing, as GFLOP/s; the first guess of the rate sizes the number of calls. */
static double measure(const workload *w, reference *r, double guess)
{
    usleep(SETTLE_US);
    int64_t calls = calls_for(w, guess > 0 ? guess : 200);
    double s = r ? time_reference(r, w, calls) : time_tide(w, calls);
    return s > 0 ? flops(w) * (double)calls / s / 1e9 : 0;
}

/* ---- main ------------------------------------------------------------------------------------ */

#define MAX_REFS 6

int main(int argc, char **argv)
{
    if (argc >= 3 && strcmp(argv[1], "--ref") == 0)
        return reference_child(argv[2], argc >= 4 ? atoi(argv[3]) : 0);

    int threads = tide_get_num_threads();
    /* Load OpenBLAS through tide first, so its choice is known. */
    if (td_blas_ready("bench") < 0) {
        fprintf(stderr, "%s\n", tide_last_error());
        return 1;
    }
    const char *tide_core = td_blas_corename();
    const char *inherited = getenv("OPENBLAS_CORETYPE");
    printf("# OpenBLAS: %s\n", td_blas_config());
    printf("# tide's core type: %s (TIDE_LOG=blas says why); threads: %d\n", tide_core, threads);
    printf("# default environment: OPENBLAS_CORETYPE%s%s, OPENBLAS_NUM_THREADS %s\n",
           inherited ? "=" : " unset", inherited ? inherited : "",
           getenv("OPENBLAS_NUM_THREADS") ? getenv("OPENBLAS_NUM_THREADS") : "unset");

    /* The candidates for "best": every fast core type this CPU can run at the tier tide runs
     * (TIDE_CPU_ISA caps both, so a capped run compares like with like). */
    __builtin_cpu_init();
    td_isa_level isa = td_cpu_isa();
    bool avx512 = isa >= TD_ISA_AVX512 && __builtin_cpu_supports("avx512f") &&
                  __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
                  __builtin_cpu_supports("avx512vl") && __builtin_cpu_supports("avx512cd");
    bool avx2 = isa >= TD_ISA_AVX2 && __builtin_cpu_supports("avx2") &&
                __builtin_cpu_supports("fma");
    printf("# tier: %s (TIDE_CPU_ISA=%s)\n", td_cpu_isa_name(isa),
           getenv("TIDE_CPU_ISA") ? getenv("TIDE_CPU_ISA") : "unset");
    const char *candidates[MAX_REFS];
    int ncand = 0;
    if (avx512) {
        candidates[ncand++] = "SkylakeX";
        if (strcmp(tide_core, "Cooperlake") == 0)
            candidates[ncand++] = "Cooperlake";
    }
    if (avx2) {
        candidates[ncand++] = "Haswell";
        candidates[ncand++] = "Zen";
    }
    if (ncand == 0) /* an older CPU: tide's own choice is the only candidate */
        candidates[ncand++] = tide_core;
    reference refs[MAX_REFS + 1];
    memset(refs, 0, sizeof refs);
    int nrefs = 0;
    for (int i = 0; i < ncand; i++)
        if (start_reference(&refs[nrefs], candidates[i], threads))
            nrefs++;
    reference *def = &refs[nrefs];
    if (!start_reference(def, "default", 0)) {
        fprintf(stderr, "cannot start the default-environment reference\n");
        return 1;
    }
    for (int i = 0; i < nrefs; i++)
        printf("# reference %d: OPENBLAS_CORETYPE=%s -> OpenBLAS runs %s, %d threads\n", i,
               refs[i].core, refs[i].corename, refs[i].threads);
    printf("# reference default: OpenBLAS runs %s, %d threads\n", def->corename, def->threads);
    printf("# each figure: the best of %d rounds, each timing >= %.2f s of calls\n", ROUNDS,
           MIN_SECONDS);

    static const workload sq[] = {
        {"sgemm_256", 0, 's', 1, 256, 256, 256, false},
        {"sgemm_512", 0, 's', 1, 512, 512, 512, false},
        {"sgemm_1024", 0, 's', 1, 1024, 1024, 1024, false},
        {"sgemm_2048", 0, 's', 1, 2048, 2048, 2048, false},
    };
    enum { NSQ = sizeof sq / sizeof sq[0] };
    double tide_best[NSQ] = {0}, ref_best[NSQ][MAX_REFS + 1];
    memset(ref_best, 0, sizeof ref_best);
    for (int round = 0; round < ROUNDS; round++)
        for (int s = 0; s < NSQ; s++) {
            double g = measure(&sq[s], NULL, tide_best[s]);
            if (g > tide_best[s])
                tide_best[s] = g;
            for (int i = 0; i <= nrefs; i++) {
                g = measure(&sq[s], &refs[i], ref_best[s][i]);
                if (g > ref_best[s][i])
                    ref_best[s][i] = g;
            }
        }
    int best_ref = 0; /* the candidate that wins the most sizes: the other workloads' reference */
    int wins[MAX_REFS] = {0};
    for (int s = 0; s < NSQ; s++) {
        int bi = 0;
        for (int i = 1; i < nrefs; i++)
            if (ref_best[s][i] > ref_best[s][bi])
                bi = i;
        wins[bi]++;
        if (wins[bi] > wins[best_ref])
            best_ref = bi;
        const char *n = sq[s].name;
        printf("%s_tide: %.1f GFLOP/s\n", n, tide_best[s]);
        for (int i = 0; i < nrefs; i++)
            printf("%s_openblas_%s: %.1f GFLOP/s\n", n, refs[i].core, ref_best[s][i]);
        printf("%s_openblas_best: %.1f GFLOP/s\n", n, ref_best[s][bi]);
        printf("%s_openblas_default_env: %.1f GFLOP/s\n", n, ref_best[s][nrefs]);
        printf("%s_tide_vs_best: %.3f ratio\n", n, tide_best[s] / ref_best[s][bi]);
        printf("%s_tide_vs_default_env: %.3f ratio\n", n, tide_best[s] / ref_best[s][nrefs]);
        double r = tide_best[s] / ref_best[s][bi];
        printf("%s_target: %.3f ratio (>= 0.90 of the best: %s)\n", n, r,
               r >= 0.9 ? "met" : "NOT met");
    }

    /* Other shapes against the best core type's direct calls. */
    static const workload more[] = {
        {"dgemm_1024", 0, 'd', 1, 1024, 1024, 1024, false},
        {"sgemm_1024_transposed_a", 0, 's', 1, 1024, 1024, 1024, true},
        {"sgemv_4096", 1, 's', 1, 4096, 1, 4096, false},
        {"sgemm_batched_256x32", 2, 's', 256, 32, 32, 32, false},
        {"sgemm_batched_64x128", 2, 's', 64, 128, 128, 128, false},
        {"sgemm_linear_64x128x256_256", 0, 's', 64, 128, 256, 256, false},
    };
    reference *br = &refs[best_ref];
    printf("# below: tide against direct calls with OPENBLAS_CORETYPE=%s; a batch is one direct "
           "call per product; a transposed A is a view (BLAS's trans flag) on tide's side only\n",
           br->core);
    for (size_t s = 0; s < sizeof more / sizeof more[0]; s++) {
        double t = 0, r = 0;
        for (int round = 0; round < ROUNDS; round++) {
            double g = measure(&more[s], NULL, t);
            t = g > t ? g : t;
            g = measure(&more[s], br, r);
            r = g > r ? g : r;
        }
        printf("%s_tide: %.1f GFLOP/s\n", more[s].name, t);
        printf("%s_openblas_best: %.1f GFLOP/s\n", more[s].name, r);
        printf("%s_tide_vs_best: %.3f ratio\n", more[s].name, t / r);
    }
    for (int i = 0; i <= nrefs; i++)
        stop_reference(&refs[i]);
    return 0;
}
