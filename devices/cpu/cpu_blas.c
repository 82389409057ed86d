/*
 * cpu_blas.c — OpenBLAS, loaded at first use with the kernels chosen for this CPU.
 *
 * Why dlopen and not a link: a DYNAMIC_ARCH OpenBLAS (Debian's is one) picks its kernels once,
 * in a constructor that runs when the library is loaded, from cpuid or OPENBLAS_CORETYPE.
 * 0.3.21 takes AVX-512 AMD CPUs (Zen 4/5) for Haswell, and an inherited OPENBLAS_CORETYPE can
 * pin slow kernels; either halves sgemm. Linked normally, that constructor runs before tide
 * gets a say. So tide loads the library itself: it sets OPENBLAS_CORETYPE to the best core type
 * for this CPU (TIDE_BLAS_CORETYPE overrides), and OPENBLAS_NUM_THREADS to tide's thread count,
 * calls dlopen, and puts both variables back as they were. TIDE_LOG=blas says what happened.
 */
#define _GNU_SOURCE
#include "cpu_blas.h"

#include <cpuid.h>
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "../../core/log.h"
#include "../../core/tensor.h"

enum { ROW_MAJOR = 101, NO_TRANS = 111, TRANS = 112 }; /* CBLAS's enum values */

/* CBLAS entry points for both integer widths: blasint is int in the usual (LP64) build and
 * int64_t in an ILP64 one (USE64BITINT in its config string). */
typedef void (*sgemm32_fn)(int, int, int, int, int, int, float, const float *, int, const float *,
                           int, float, float *, int);
typedef void (*dgemm32_fn)(int, int, int, int, int, int, double, const double *, int,
                           const double *, int, double, double *, int);
typedef void (*sgemv32_fn)(int, int, int, int, float, const float *, int, const float *, int,
                           float, float *, int);
typedef void (*dgemv32_fn)(int, int, int, int, double, const double *, int, const double *, int,
                           double, double *, int);
typedef void (*sgemm64_fn)(int, int, int, int64_t, int64_t, int64_t, float, const float *, int64_t,
                           const float *, int64_t, float, float *, int64_t);
typedef void (*dgemm64_fn)(int, int, int, int64_t, int64_t, int64_t, double, const double *,
                           int64_t, const double *, int64_t, double, double *, int64_t);
typedef void (*sgemv64_fn)(int, int, int64_t, int64_t, float, const float *, int64_t,
                           const float *, int64_t, float, float *, int64_t);
typedef void (*dgemv64_fn)(int, int, int64_t, int64_t, double, const double *, int64_t,
                           const double *, int64_t, double, double *, int64_t);

static struct {
    void *handle; /* NULL when loading failed */
    void *sgemm, *dgemm, *sgemv, *dgemv;
    void (*set_num_threads)(int);
    bool ilp64;
    char corename[32], requested[32], config[160];
    char error[1024]; /* why loading failed; the op name is put in front when reported */
} blas;

static pthread_once_t blas_once = PTHREAD_ONCE_INIT;

/* ---- choosing the core type ------------------------------------------------------------------ */

/* What a core type's kernels need, in the order CPUs gained them: a CPU at one level has every
 * lower one. */
typedef enum cpu_level {
    LEVEL_NONE,
    LEVEL_SSE3,
    LEVEL_SSSE3,
    LEVEL_SSE41,
    LEVEL_SSE42,
    LEVEL_AVX,
    LEVEL_AVX2,      /* and FMA */
    LEVEL_AVX512,    /* F, CD, BW, DQ, VL (Skylake-SP and later, Zen 4 and later) */
    LEVEL_AVX512BF16 /* plus AVX512-BF16 (Cooper Lake, Sapphire Rapids, Zen 4) */
} cpu_level;

static const char *const level_names[] = {
    "no SSE3", "SSE3", "SSSE3", "SSE4.1", "SSE4.2", "AVX", "AVX2+FMA",
    "AVX-512 (F/CD/BW/DQ/VL)", "AVX-512 with BF16",
};

/* The core types tide accepts in TIDE_BLAS_CORETYPE: OpenBLAS's x86-64 names whose needs we can
 * check with cpuid, so a typo or a core the CPU cannot run is refused instead of crashing with
 * an illegal instruction inside OpenBLAS. */
static const struct {
    const char *name;
    cpu_level needs;
} core_types[] = {
    {"Prescott", LEVEL_SSE3},  {"Core2", LEVEL_SSSE3},       {"Penryn", LEVEL_SSE41},
    {"Dunnington", LEVEL_SSE41}, {"Nehalem", LEVEL_SSE42},   {"Sandybridge", LEVEL_AVX},
    {"Haswell", LEVEL_AVX2},   {"Zen", LEVEL_AVX2},          {"SkylakeX", LEVEL_AVX512},
    {"Cooperlake", LEVEL_AVX512BF16},
};
#define NUM_CORE_TYPES (int)(sizeof core_types / sizeof core_types[0])

static bool has_avx512_bf16(void)
{
    unsigned eax, ebx, ecx, edx;
    if (__get_cpuid_max(0, NULL) < 7 || !__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx))
        return false;
    return (eax >> 5) & 1;
}

/* gcc's __builtin_cpu_supports also checks that the OS saves the AVX and AVX-512 registers. */
static cpu_level detect_level(void)
{
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512cd") &&
        __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq") &&
        __builtin_cpu_supports("avx512vl"))
        return has_avx512_bf16() ? LEVEL_AVX512BF16 : LEVEL_AVX512;
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        return LEVEL_AVX2;
    if (__builtin_cpu_supports("avx"))
        return LEVEL_AVX;
    if (__builtin_cpu_supports("sse4.2"))
        return LEVEL_SSE42;
    if (__builtin_cpu_supports("sse4.1"))
        return LEVEL_SSE41;
    if (__builtin_cpu_supports("ssse3"))
        return LEVEL_SSSE3;
    if (__builtin_cpu_supports("sse3"))
        return LEVEL_SSE3;
    return LEVEL_NONE;
}

/* The fastest core type for a level. Measured on an AVX-512 Xeon (2 cores, 2048^3 sgemm):
 * SkylakeX and Cooperlake ~380 GFLOP/s (the same s/dgemm kernels; Cooperlake adds bf16 ones),
 * Haswell and Zen ~235. Zen is Haswell's kernels with AMD's blocking sizes. */
static const char *best_core(cpu_level level, bool amd)
{
    switch (level) {
    case LEVEL_AVX512BF16: return "Cooperlake";
    case LEVEL_AVX512: return "SkylakeX";
    case LEVEL_AVX2: return amd ? "Zen" : "Haswell";
    case LEVEL_AVX: return "Sandybridge";
    case LEVEL_SSE42: return "Nehalem";
    case LEVEL_SSE41: return "Penryn";
    case LEVEL_SSSE3: return "Core2";
    case LEVEL_SSE3: return "Prescott";
    default: return NULL; /* let OpenBLAS decide */
    }
}

/* TIDE_CPU_ISA caps tide's own kernels; it caps BLAS's the same way, so that one variable
 * keeps a whole run on, say, SSE (valgrind cannot run AVX-512). */
static cpu_level isa_cap(cpu_level level)
{
    const char *want = getenv("TIDE_CPU_ISA");
    if (want && strcmp(want, "baseline") == 0 && level > LEVEL_SSE42)
        return LEVEL_SSE42;
    if (want && strcmp(want, "avx2") == 0 && level > LEVEL_AVX2)
        return LEVEL_AVX2;
    return level;
}

/* Fills blas.requested (empty: leave OPENBLAS_CORETYPE alone) and says why in why. */
static void choose_core(char *why, size_t why_size)
{
    cpu_level level = detect_level();
    bool amd = __builtin_cpu_is("amd");
    const char *user = getenv("TIDE_BLAS_CORETYPE");
    if (user && *user) {
        if (strcasecmp(user, "openblas") == 0) {
            const char *inherited = getenv("OPENBLAS_CORETYPE");
            snprintf(why, why_size, "TIDE_BLAS_CORETYPE=openblas; OPENBLAS_CORETYPE%s%s",
                     inherited ? "=" : " not set", inherited ? inherited : "");
            return;
        }
        for (int i = 0; i < NUM_CORE_TYPES; i++) {
            if (strcasecmp(user, core_types[i].name) != 0)
                continue;
            if (core_types[i].needs <= level) {
                snprintf(blas.requested, sizeof blas.requested, "%s", core_types[i].name);
                snprintf(why, why_size, "set by TIDE_BLAS_CORETYPE=%s", user);
                return;
            }
            /* Said whatever TIDE_LOG is: the user asked for something and does not get it. */
            fprintf(stderr,
                    "tide: TIDE_BLAS_CORETYPE=%s ignored: its kernels need %s and this CPU has "
                    "%s\n",
                    user, level_names[core_types[i].needs], level_names[level]);
            goto detect;
        }
        char known[300];
        size_t len = 0;
        for (int i = 0; i < NUM_CORE_TYPES && len < sizeof known; i++)
            len += (size_t)snprintf(known + len, sizeof known - len, "%s, ", core_types[i].name);
        fprintf(stderr,
                "tide: TIDE_BLAS_CORETYPE=%s ignored: unknown core type (known: %sopenblas)\n",
                user, known);
    }
detect:;
    cpu_level capped = isa_cap(level);
    const char *core = best_core(capped, amd);
    if (core)
        snprintf(blas.requested, sizeof blas.requested, "%s", core);
    snprintf(why, why_size, "for an %s CPU with %s%s%s (TIDE_BLAS_CORETYPE overrides)",
             amd ? "AMD" : __builtin_cpu_is("intel") ? "Intel" : "x86-64",
             level_names[level], capped != level ? ", capped by TIDE_CPU_ISA to " : "",
             capped != level ? level_names[capped] : "");
}

/* ---- loading --------------------------------------------------------------------------------- */

/* Sets name to value (unset when value is NULL), keeping a copy of the old value in *saved.
 * Without memory for the copy the variable is left as it is (OpenBLAS then picks its kernels
 * from the user's environment), so restore_env never loses the user's value. */
static void swap_env(const char *name, const char *value, char **saved, bool *had)
{
    const char *old = getenv(name);
    *had = old != NULL;
    *saved = old ? td_strdup(old) : NULL;
    if (old && !*saved)
        return; /* had and no copy: restore_env leaves it alone too */
    if (value)
        setenv(name, value, 1);
    else
        unsetenv(name);
}

static void restore_env(const char *name, char *saved, bool had)
{
    if (had && saved)
        setenv(name, saved, 1);
    else if (!had)
        unsetenv(name);
    free(saved);
}

/* The library to load: TIDE_BLAS_LIBRARY, else the soname the linker would have recorded, else
 * the directory pkg-config named at build time (an OpenBLAS outside the loader's path). On
 * failure, error holds the loader's message for the first path tried. */
static void *open_library(char *path, size_t path_size, int flags, char *error, size_t error_size)
{
    const char *user = getenv("TIDE_BLAS_LIBRARY");
    snprintf(path, path_size, "%s", user && *user ? user : "libopenblas.so.0");
    void *h = dlopen(path, flags);
    if (h)
        return h;
    const char *e = dlerror();
    snprintf(error, error_size, "%s", e ? e : "unknown error");
#ifdef TIDE_OPENBLAS_LIBDIR
    if (!(user && *user) && !(flags & RTLD_NOLOAD)) {
        char alt[512];
        snprintf(alt, sizeof alt, "%s/libopenblas.so.0", TIDE_OPENBLAS_LIBDIR);
        h = dlopen(alt, flags);
        if (h)
            snprintf(path, path_size, "%s", alt);
    }
#endif
    return h;
}

static void load(void)
{
    char why[300], path[512];
    choose_core(why, sizeof why);
    int threads = td_num_threads();

    /* Somebody else (the program, another library) may have loaded OpenBLAS already: then its
     * kernels are fixed and tide can only say so. */
    char load_error[300];
    void *h = open_library(path, sizeof path, RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD, load_error,
                           sizeof load_error);
    bool preloaded = h != NULL;
    if (!h) {
        char nthreads[16];
        snprintf(nthreads, sizeof nthreads, "%d", 1);
        char *old_core = NULL, *old_threads;
        bool had_core = false, had_threads;
        const char *inherited = getenv("OPENBLAS_CORETYPE");
        if (blas.requested[0]) {
            if (inherited && strcasecmp(inherited, blas.requested) != 0)
                td_log("blas", "overriding the inherited OPENBLAS_CORETYPE=%s while loading",
                       inherited);
            swap_env("OPENBLAS_CORETYPE", blas.requested, &old_core, &had_core);
        }
        swap_env("OPENBLAS_NUM_THREADS", nthreads, &old_threads, &had_threads);
        h = open_library(path, sizeof path, RTLD_NOW | RTLD_LOCAL, load_error, sizeof load_error);
        restore_env("OPENBLAS_NUM_THREADS", old_threads, had_threads);
        if (blas.requested[0])
            restore_env("OPENBLAS_CORETYPE", old_core, had_core);
    }
    if (!h) {
        snprintf(blas.error, sizeof blas.error,
                 "cannot load OpenBLAS (%.300s): %.300s; install OpenBLAS (Debian: "
                 "libopenblas0) or point TIDE_BLAS_LIBRARY at it",
                 path, load_error);
        td_log("blas", "%s", blas.error);
        return;
    }
    const char *(*corename)(void) = (const char *(*)(void))dlsym(h, "openblas_get_corename");
    const char *(*config)(void) = (const char *(*)(void))dlsym(h, "openblas_get_config");
    blas.sgemm = dlsym(h, "cblas_sgemm");
    blas.dgemm = dlsym(h, "cblas_dgemm");
    blas.sgemv = dlsym(h, "cblas_sgemv");
    blas.dgemv = dlsym(h, "cblas_dgemv");
    blas.set_num_threads = (void (*)(int))dlsym(h, "openblas_set_num_threads");
    if (!blas.sgemm || !blas.dgemm || !blas.sgemv || !blas.dgemv) {
        snprintf(blas.error, sizeof blas.error,
                 "%.300s has no cblas_sgemm/cblas_dgemm/cblas_sgemv/cblas_dgemv; it is not a CBLAS "
                 "library (TIDE_BLAS_LIBRARY?)",
                 path);
        td_log("blas", "%s", blas.error);
        dlclose(h);
        return;
    }
    snprintf(blas.corename, sizeof blas.corename, "%s", corename ? corename() : "unknown");
    snprintf(blas.config, sizeof blas.config, "%s", config ? config() : "unknown");
    blas.ilp64 = strstr(blas.config, "USE64BITINT") != NULL;
    td_log("blas", "loaded %s%s: %s", path, preloaded ? " (already loaded by the process)" : "",
           blas.config);
    if (preloaded)
        td_log("blas", "core type %s: chosen when the process loaded OpenBLAS; tide cannot change "
                       "it (wanted %s: %s)",
               blas.corename, blas.requested[0] ? blas.requested : "OpenBLAS's choice", why);
    else if (!blas.requested[0])
        td_log("blas", "core type %s, chosen by OpenBLAS (%s)", blas.corename, why);
    else if (strcasecmp(blas.corename, blas.requested) == 0)
        td_log("blas", "core type %s %s", blas.corename, why);
    else
        td_log("blas", "core type %s, although tide asked for %s (%s): the library ignores "
                       "OPENBLAS_CORETYPE (not a DYNAMIC_ARCH build?)",
               blas.corename, blas.requested, why);
    if (blas.set_num_threads)
        blas.set_num_threads(1);
    td_log("blas", "OpenBLAS runs single-threaded; tide splits each large product over its %d "
                   "threads (tide_set_num_threads, TIDE_NUM_THREADS)",
           threads);
    __atomic_store_n(&blas.handle, h, __ATOMIC_RELEASE);
}

static bool loaded(void)
{
    pthread_once(&blas_once, load);
    return blas.handle != NULL;
}

int td_blas_ready(const char *op)
{
    if (!loaded())
        return td_error("%s: %s", op, blas.error);
    return 0;
}

const char *td_blas_corename(void) { return loaded() ? blas.corename : ""; }
const char *td_blas_requested_core(void) { return loaded() ? blas.requested : ""; }
const char *td_blas_config(void) { return loaded() ? blas.config : ""; }

/* ---- the calls ------------------------------------------------------------------------------- */

static bool fits_int(int64_t a, int64_t b, int64_t c, int64_t d, int64_t e, int64_t f)
{
    return a <= INT_MAX && b <= INT_MAX && c <= INT_MAX && d <= INT_MAX && e <= INT_MAX &&
           f <= INT_MAX;
}

/* Without OpenBLAS, or for sizes beyond its 32-bit integers: correct, slow, never used when
 * OpenBLAS is there for ordinary sizes. */
#define DEFINE_GEMM_LOOP(name, T)                                                                  \
    static void name(bool ta, bool tb, int64_t m, int64_t n, int64_t k, T alpha, const T *a,      \
                     int64_t lda, const T *b, int64_t ldb, T beta, T *c, int64_t ldc)             \
    {                                                                                              \
        for (int64_t i = 0; i < m; i++)                                                            \
            for (int64_t j = 0; j < n; j++) {                                                      \
                T sum = 0;                                                                         \
                for (int64_t l = 0; l < k; l++)                                                    \
                    sum += (ta ? a[l * lda + i] : a[i * lda + l]) *                                \
                           (tb ? b[j * ldb + l] : b[l * ldb + j]);                                 \
                T *out = &c[i * ldc + j];                                                          \
                *out = beta == 0 ? alpha * sum : alpha * sum + beta * *out;                        \
            }                                                                                      \
    }
DEFINE_GEMM_LOOP(sgemm_loop, float)
DEFINE_GEMM_LOOP(dgemm_loop, double)

#define DEFINE_GEMV_LOOP(name, T)                                                                  \
    static void name(bool trans, int64_t m, int64_t n, T alpha, const T *a, int64_t lda,          \
                     const T *x, int64_t incx, T beta, T *y, int64_t incy)                        \
    {                                                                                              \
        for (int64_t i = 0; i < m; i++) {                                                          \
            T sum = 0;                                                                             \
            for (int64_t l = 0; l < n; l++)                                                        \
                sum += (trans ? a[l * lda + i] : a[i * lda + l]) * x[l * incx];                    \
            T *out = &y[i * incy];                                                                 \
            *out = beta == 0 ? alpha * sum : alpha * sum + beta * *out;                            \
        }                                                                                          \
    }
DEFINE_GEMV_LOOP(sgemv_loop, float)
DEFINE_GEMV_LOOP(dgemv_loop, double)

/* One pool of threads for everything: OpenBLAS runs single-threaded and a large product is cut
 * into blocks of C's rows (or columns, when C is wider than tall) run on tide's pool. Two pools
 * spinning on the same cores (OpenBLAS's and tide's, alternating between a GEMM and the
 * elementwise ops around it) cost a training step several times its work on a loaded 2-core
 * machine; one pool does not. */
#define GEMM_SPLIT_BLOCK 16

typedef struct gemm_split {
    bool trans_a, trans_b, by_rows;
    int64_t m, n, k, lda, ldb, ldc, block;
    const void *a, *b;
    void *c;
    double alpha, beta;
    size_t es;
} gemm_split;

static void gemm_blocks(void *ctx, int64_t begin, int64_t end);

/* Rows unless C is wider than tall and the product is deep. Cutting C's rows has each thread
 * pack all of op(B), cutting its columns all of op(A); yet for k <= 256 OpenBLAS ran the row
 * halves 1.1-1.5x faster than the column halves over nearly every shape of 128-1024 rows and
 * columns, plain or transposed operands (a weight grad [512, 128] x [128, 784]: 1.42x), and
 * only deeper products of wide C favoured columns (by up to 1.15x). Measured on 2 threads,
 * devices/cpu/README.md "BLAS". A row block of C is also what the jit's matmul epilogue needs. */
static bool split_rows(int64_t m, int64_t n, int64_t k)
{
    return m >= n || k <= 256;
}

td_blas_cut td_blas_gemm_cut(int64_t m, int64_t n, int64_t k)
{
    td_blas_cut c = {split_rows(m, n, k), 0, 1};
    int64_t len = c.by_rows ? m : n;
    c.block = len;
    if ((double)m * (double)n * (double)k <= TD_BLAS_GEMM_SINGLE_THREAD_MNK || len < 1)
        return c;
    int64_t units = (len + GEMM_SPLIT_BLOCK - 1) / GEMM_SPLIT_BLOCK;
    int64_t parts = td_num_threads() < units ? td_num_threads() : units;
    if (parts < 2)
        return c;
    c.block = GEMM_SPLIT_BLOCK * ((units + parts - 1) / parts);
    c.count = (len + c.block - 1) / c.block;
    return c;
}

/* Runs the product on the pool as the calls td_blas_gemm_cut names; false when it is one call,
 * to make here. Inside a chunk of td_parallel_for a product is one call: it is a block of an
 * outer split (a batch, the jit's epilogue blocks), which made its cut already. */
static bool gemm_parallel(gemm_split *g)
{
    if (td_in_parallel_for())
        return false;
    td_blas_cut c = td_blas_gemm_cut(g->m, g->n, g->k);
    if (c.count < 2)
        return false;
    g->by_rows = c.by_rows;
    g->block = c.block;
    td_parallel_for(c.count, 1, gemm_blocks, g);
    return true;
}

#define DEFINE_GEMM(name, T, loop, fn32, fn64, field)                                              \
    static void name##_here(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, \
                            const T *a, int64_t lda, const T *b, int64_t ldb, T beta, T *c,       \
                            int64_t ldc);                                                          \
    void name(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, const T *a,   \
              int64_t lda, const T *b, int64_t ldb, T beta, T *c, int64_t ldc)                    \
    {                                                                                              \
        if (m <= 0 || n <= 0)                                                                      \
            return;                                                                                \
        gemm_split g = {trans_a, trans_b, false, m, n, k, lda, ldb, ldc, 0, a, b, c, alpha, beta,  \
                        sizeof(T)};                                                                \
        if (!gemm_parallel(&g))                                                                    \
            name##_here(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);           \
    }                                                                                              \
    static void name##_here(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, T alpha, \
                            const T *a, int64_t lda, const T *b, int64_t ldb, T beta, T *c,       \
                            int64_t ldc)                                                           \
    {                                                                                              \
        if (!loaded() || (!blas.ilp64 && !fits_int(m, n, k, lda, ldb, ldc))) {                     \
            loop(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);                  \
            return;                                                                                \
        }                                                                                          \
        int ta = trans_a ? TRANS : NO_TRANS, tb = trans_b ? TRANS : NO_TRANS;                      \
        if (blas.ilp64)                                                                            \
            ((fn64)blas.field)(ROW_MAJOR, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);   \
        else                                                                                       \
            ((fn32)blas.field)(ROW_MAJOR, ta, tb, (int)m, (int)n, (int)k, alpha, a, (int)lda, b,   \
                               (int)ldb, beta, c, (int)ldc);                                       \
    }
DEFINE_GEMM(td_blas_sgemm, float, sgemm_loop, sgemm32_fn, sgemm64_fn, sgemm)
DEFINE_GEMM(td_blas_dgemm, double, dgemm_loop, dgemm32_fn, dgemm64_fn, dgemm)

/* Calls [begin, end) of the cut: one BLAS call each, block rows of C (or columns) and the
 * rows of op(A) or columns of op(B) that make them. */
static void gemm_blocks(void *ctx, int64_t begin, int64_t end)
{
    const gemm_split *g = ctx;
    int64_t len = g->by_rows ? g->m : g->n;
    for (int64_t call = begin; call < end; call++) {
        int64_t lo = call * g->block, hi = lo + g->block < len ? lo + g->block : len;
        int64_t m = g->m, n = g->n, a_off = 0, b_off = 0, c_off;
        if (g->by_rows) {
            m = hi - lo;
            a_off = g->trans_a ? lo : lo * g->lda;
            c_off = lo * g->ldc;
        } else {
            n = hi - lo;
            b_off = g->trans_b ? lo * g->ldb : lo;
            c_off = lo;
        }
        if (g->es == sizeof(float))
            td_blas_sgemm_here(g->trans_a, g->trans_b, m, n, g->k, (float)g->alpha,
                               (const float *)g->a + a_off, g->lda, (const float *)g->b + b_off,
                               g->ldb, (float)g->beta, (float *)g->c + c_off, g->ldc);
        else
            td_blas_dgemm_here(g->trans_a, g->trans_b, m, n, g->k, g->alpha,
                               (const double *)g->a + a_off, g->lda, (const double *)g->b + b_off,
                               g->ldb, g->beta, (double *)g->c + c_off, g->ldc);
    }
}

/* CBLAS's gemv takes the stored matrix's rows and columns; ours takes op(A)'s. beta == 0 zeroes
 * y first, because some OpenBLAS versions compute 0 * y and would keep a NaN found there. */
typedef struct gemv_split {
    bool trans;
    int64_t m, n, lda, incx, incy, block;
    const void *a, *x;
    void *y;
    double alpha, beta;
    size_t es;
} gemv_split;

static void gemv_blocks(void *ctx, int64_t begin, int64_t end);

td_blas_cut td_blas_gemv_cut(int64_t m, int64_t n)
{
    td_blas_cut c = {true, m, 1};
    int64_t step = 4 * GEMM_SPLIT_BLOCK, units = (m + step - 1) / step;
    int64_t parts = td_num_threads() < units ? td_num_threads() : units;
    if ((double)m * (double)n <= TD_BLAS_GEMV_SINGLE_THREAD_MN || parts < 2)
        return c;
    c.block = step * ((units + parts - 1) / parts);
    c.count = (m + c.block - 1) / c.block;
    return c;
}

/* A large gemv is cut into blocks of y's elements on tide's pool, like a GEMM (above). */
static bool gemv_parallel(gemv_split *g)
{
    if (td_in_parallel_for())
        return false;
    td_blas_cut c = td_blas_gemv_cut(g->m, g->n);
    if (c.count < 2)
        return false;
    g->block = c.block;
    td_parallel_for(c.count, 1, gemv_blocks, g);
    return true;
}

#define DEFINE_GEMV(name, T, loop, fn32, fn64, field)                                              \
    static void name##_here(bool trans, int64_t m, int64_t n, T alpha, const T *a, int64_t lda,   \
                            const T *x, int64_t incx, T beta, T *y, int64_t incy);               \
    void name(bool trans, int64_t m, int64_t n, T alpha, const T *a, int64_t lda, const T *x,     \
              int64_t incx, T beta, T *y, int64_t incy)                                            \
    {                                                                                              \
        if (m <= 0)                                                                                \
            return;                                                                                \
        gemv_split g = {trans, m, n, lda, incx, incy, 0, a, x, y, alpha, beta, sizeof(T)};         \
        if (!gemv_parallel(&g))                                                                    \
            name##_here(trans, m, n, alpha, a, lda, x, incx, beta, y, incy);                       \
    }                                                                                              \
    static void name##_here(bool trans, int64_t m, int64_t n, T alpha, const T *a, int64_t lda,   \
                            const T *x, int64_t incx, T beta, T *y, int64_t incy)                \
    {                                                                                              \
        if (m <= 0)                                                                                \
            return;                                                                                \
        if (beta == 0)                                                                             \
            for (int64_t i = 0; i < m; i++)                                                        \
                y[i * incy] = 0;                                                                   \
        if (n <= 0)                                                                                \
            return;                                                                                \
        int64_t rows = trans ? n : m, cols = trans ? m : n;                                        \
        if (!loaded() || (!blas.ilp64 && !fits_int(rows, cols, lda, incx, incy, 0))) {             \
            loop(trans, m, n, alpha, a, lda, x, incx, beta, y, incy);                              \
            return;                                                                                \
        }                                                                                          \
        int t = trans ? TRANS : NO_TRANS;                                                          \
        if (blas.ilp64)                                                                            \
            ((fn64)blas.field)(ROW_MAJOR, t, rows, cols, alpha, a, lda, x, incx, beta, y, incy);   \
        else                                                                                       \
            ((fn32)blas.field)(ROW_MAJOR, t, (int)rows, (int)cols, alpha, a, (int)lda, x,          \
                               (int)incx, beta, y, (int)incy);                                     \
    }
DEFINE_GEMV(td_blas_sgemv, float, sgemv_loop, sgemv32_fn, sgemv64_fn, sgemv)
DEFINE_GEMV(td_blas_dgemv, double, dgemv_loop, dgemv32_fn, dgemv64_fn, dgemv)

/* Calls [begin, end) of the cut: one BLAS call each, block elements of y and the rows of op(A)
 * that make them (columns of the stored A when trans). */
static void gemv_blocks(void *ctx, int64_t begin, int64_t end)
{
    const gemv_split *g = ctx;
    for (int64_t call = begin; call < end; call++) {
        int64_t lo = call * g->block, hi = lo + g->block < g->m ? lo + g->block : g->m;
        int64_t a_off = g->trans ? lo : lo * g->lda;
        if (g->es == sizeof(float))
            td_blas_sgemv_here(g->trans, hi - lo, g->n, (float)g->alpha,
                               (const float *)g->a + a_off, g->lda, g->x, g->incx, (float)g->beta,
                               (float *)g->y + lo * g->incy, g->incy);
        else
            td_blas_dgemv_here(g->trans, hi - lo, g->n, g->alpha, (const double *)g->a + a_off,
                               g->lda, g->x, g->incx, g->beta, (double *)g->y + lo * g->incy,
                               g->incy);
    }
}
