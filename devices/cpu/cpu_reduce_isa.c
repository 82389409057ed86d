/*
 * cpu_reduce_isa.c — the inner loops of the reductions, compiled once per vector ISA
 * (TD_ISA = baseline | avx2 | avx512, see cpu_isa.h); cpu_reduce.c picks a table at run time
 * and does all layout analysis and threading. Every kernel here sees one 1-D run (contiguous
 * or strided), a batch of equal runs (one per output), or a block of rows reduced into an
 * accumulator row; argmax/argmin have the run and rows forms.
 *
 * Float reductions are written with GCC vector extensions rather than left to the
 * auto-vectorizer, because without -ffast-math GCC will not reassociate a float sum or a
 * NaN-aware max; the explicit accumulators fix the summation order, so results are
 * deterministic for a given ISA. Integer loops are plain C: integer reductions reassociate
 * freely and GCC vectorizes them.
 */
#include <immintrin.h>
#include <math.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>

#include "cpu_reduce.h"

#if defined(__AVX512F__)
#define VB 64
#elif defined(__AVX2__)
#define VB 32
#else
#define VB 16
#endif

typedef float vf32 __attribute__((vector_size(VB)));
typedef double vf64 __attribute__((vector_size(VB)));
typedef int32_t vi32 __attribute__((vector_size(VB)));
typedef int64_t vi64 __attribute__((vector_size(VB)));
typedef float vf32h __attribute__((vector_size(VB / 2))); /* converts into one vf64 */

/* Runs are reduced in blocks this long (float32 sums in float within a block), the blocks then
 * combined in double: full speed, and the error stays near that of a double sum. 2048 doubles
 * are the gather buffer of a strided run, on the stack. */
#define RUN_BLOCK 2048
/* Rows folded in the native type before the accumulator row takes them (same reason). */
#define ROWS_BLOCK 128
/* Argmax scans this many elements for their extreme before looking for its position. */
#define ARG_BLOCK 2048
/* Shorter contiguous runs are scanned once, plainly: two passes cost more than they save. */
#define ARG_SHORT 64
#define NACC 8 /* independent vector accumulators: hides add latency at two loads a cycle */

static inline vf32 ld_f32(const float *p)
{
    vf32 v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline vf64 ld_f64(const double *p)
{
    vf64 v;
    memcpy(&v, p, sizeof v);
    return v;
}
static inline vf64 ld_f32_as_f64(const float *p)
{
    vf32h v;
    memcpy(&v, p, sizeof v);
    return __builtin_convertvector(v, vf64);
}

static inline int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

/* NaN-propagating scalar max/min: a NaN in either operand wins. Bitwise | avoids a branch so
 * the loops that use them still vectorize. */
#define FMAX(a, b) (((a) > (b)) | ((a) != (a)) ? (a) : (b))
#define FMIN(a, b) (((a) < (b)) | ((a) != (a)) ? (a) : (b))
#define IMAX(a, b) ((a) > (b) ? (a) : (b))
#define IMIN(a, b) ((a) < (b) ? (a) : (b))
#define ADD(a, b) ((a) + (b))
#define MUL(a, b) ((a) * (b))

/* ---- contiguous float folds --------------------------------------------------------------- */

/* Folds n contiguous elements with OP using NACC vector accumulators; lanes are combined in a
 * fixed order so the result does not depend on anything but the data and the ISA. */
#define DEF_VEC_FOLD(name, T, VT, LOAD, OP, INIT)                                                  \
    static T name(const T *x, int64_t n)                                                           \
    {                                                                                              \
        enum { W = VB / sizeof(T) };                                                               \
        if (n < 2 * W) { /* short runs: one chain, as the multi kernels' (same order) */           \
            T r = (T)(INIT);                                                                       \
            for (int64_t i = 0; i < n; i++)                                                        \
                r = OP(r, x[i]);                                                                   \
            return r;                                                                              \
        }                                                                                          \
        VT acc[NACC];                                                                              \
        for (int k = 0; k < NACC; k++)                                                             \
            acc[k] = (VT){0} + (T)(INIT);                                                          \
        int64_t i = 0;                                                                             \
        for (; i + NACC * W <= n; i += NACC * W)                                                   \
            for (int k = 0; k < NACC; k++)                                                         \
                acc[k] = OP(acc[k], LOAD(x + i + k * W));                                          \
        for (; i + W <= n; i += W)                                                                 \
            acc[0] = OP(acc[0], LOAD(x + i));                                                      \
        for (int k = NACC / 2; k > 0; k /= 2)                                                      \
            for (int j = 0; j < k; j++)                                                            \
                acc[j] = OP(acc[j], acc[j + k]);                                                   \
        T lanes[W]; /* a tree, not a chain: short runs are bound by this latency */                \
        memcpy(lanes, &acc[0], sizeof lanes);                                                      \
        for (int w = W / 2; w > 0; w /= 2)                                                         \
            for (int j = 0; j < w; j++)                                                            \
                lanes[j] = OP(lanes[j], lanes[j + w]);                                             \
        T r = lanes[0];                                                                            \
        for (; i < n; i++)                                                                         \
            r = OP(r, x[i]);                                                                       \
        return r;                                                                                  \
    }

DEF_VEC_FOLD(fold_sum_f32, float, vf32, ld_f32, ADD, 0)
DEF_VEC_FOLD(fold_sum_f64, double, vf64, ld_f64, ADD, 0)
DEF_VEC_FOLD(fold_prod_f64, double, vf64, ld_f64, MUL, 1)

/* float32 product in double: a float running product overflows or underflows long before the
 * true product does. */
static double fold_prod_f32(const float *x, int64_t n)
{
    enum { W = VB / sizeof(double) };
    vf64 a0 = (vf64){0} + 1.0, a1 = a0, a2 = a0, a3 = a0;
    int64_t i = 0;
    for (; i + 4 * W <= n; i += 4 * W) {
        a0 *= ld_f32_as_f64(x + i);
        a1 *= ld_f32_as_f64(x + i + W);
        a2 *= ld_f32_as_f64(x + i + 2 * W);
        a3 *= ld_f32_as_f64(x + i + 3 * W);
    }
    a0 = (a0 * a1) * (a2 * a3);
    double lanes[W];
    memcpy(lanes, &a0, sizeof lanes);
    double r = 1.0;
    for (int j = 0; j < W; j++)
        r *= lanes[j];
    for (; i < n; i++)
        r *= x[i];
    return r;
}

/* The largest / smallest lane of a vector without NaNs (the callers track NaNs apart). With
 * AVX-512 in registers: lanes read back from a 64-byte store one by one waited on store
 * forwarding, ~4x the vector loop's time over a row of 64. Narrower vectors read their lanes. */
#if defined(__AVX512F__)
static inline float lanes_max_f32(vf32 v) { return _mm512_reduce_max_ps((__m512)v); }
static inline float lanes_min_f32(vf32 v) { return _mm512_reduce_min_ps((__m512)v); }
static inline double lanes_max_f64(vf64 v) { return _mm512_reduce_max_pd((__m512d)v); }
static inline double lanes_min_f64(vf64 v) { return _mm512_reduce_min_pd((__m512d)v); }
#else
#define DEF_LANES(name, T, VT, CMP)                                                                \
    static inline T name(VT v)                                                                     \
    {                                                                                              \
        T lanes[sizeof(VT) / sizeof(T)];                                                           \
        memcpy(lanes, &v, sizeof lanes);                                                           \
        T best = lanes[0];                                                                         \
        for (size_t j = 1; j < sizeof(VT) / sizeof(T); j++)                                        \
            best = lanes[j] CMP best ? lanes[j] : best;                                            \
        return best;                                                                               \
    }
DEF_LANES(lanes_max_f32, float, vf32, >)
DEF_LANES(lanes_min_f32, float, vf32, <)
DEF_LANES(lanes_max_f64, double, vf64, >)
DEF_LANES(lanes_min_f64, double, vf64, <)
#undef DEF_LANES
#endif

/* Max/min of n >= 1 contiguous floats; NaN when any is NaN. The NaN test rides along in an
 * integer mask so the compare-and-select stays branch-free. Rows of one to four vectors (a
 * softmax over 64 keys) take one accumulator, longer ones four; the accumulators fold into
 * one vector before its lanes are scanned (a scan of all four vectors' lanes, one select
 * after another, took longer than the vector loop over a row of 64). */
#define DEF_VEC_MINMAX(name, T, VT, VI, LOAD, CMP, LANES)                                          \
    static T name(const T *x, int64_t n)                                                           \
    {                                                                                              \
        enum { W = VB / sizeof(T) };                                                               \
        int64_t i = 0;                                                                             \
        T best = x[0];                                                                             \
        int nan = 0;                                                                               \
        if (n >= W) {                                                                              \
            int nacc = n >= 4 * W ? 4 : 1;                                                         \
            VT m[4];                                                                               \
            VI bad = {0};                                                                          \
            for (int k = 0; k < nacc; k++)                                                         \
                m[k] = LOAD(x + k * W);                                                            \
            for (; i + nacc * W <= n; i += nacc * W)                                               \
                for (int k = 0; k < nacc; k++) {                                                   \
                    VT a = LOAD(x + i + k * W);                                                    \
                    VI take = (VI)(a CMP m[k]);                                                    \
                    bad |= (VI)(a != a);                                                           \
                    m[k] = (VT)(((VI)a & take) | ((VI)m[k] & ~take));                              \
                }                                                                                  \
            for (int k = 1; k < nacc; k++) {                                                       \
                VI take = (VI)(m[k] CMP m[0]);                                                     \
                m[0] = (VT)(((VI)m[k] & take) | ((VI)m[0] & ~take));                               \
            }                                                                                      \
            T lanes = LANES(m[0]);                                                                 \
            best = lanes CMP best ? lanes : best;                                                  \
            VI none = {0};                                                                         \
            nan = memcmp(&bad, &none, sizeof bad) != 0;                                            \
        }                                                                                          \
        for (; i < n; i++) {                                                                       \
            nan |= x[i] != x[i];                                                                   \
            best = x[i] CMP best ? x[i] : best;                                                    \
        }                                                                                          \
        return nan ? (T)NAN : best;                                                                \
    }

DEF_VEC_MINMAX(vmax_f32, float, vf32, vi32, ld_f32, >, lanes_max_f32)
DEF_VEC_MINMAX(vmin_f32, float, vf32, vi32, ld_f32, <, lanes_min_f32)
DEF_VEC_MINMAX(vmax_f64, double, vf64, vi64, ld_f64, >, lanes_max_f64)
DEF_VEC_MINMAX(vmin_f64, double, vf64, vi64, ld_f64, <, lanes_min_f64)

/* ---- run kernels: one 1-D run, contiguous or strided -------------------------------------- */

/* A run is reduced in blocks of RUN_BLOCK elements, each folded as a contiguous array, the
 * blocks' results combined in order in double. A strided run is gathered one block at a time
 * into a buffer first, so the order of the terms, hence the result, depends only on the
 * values and the ISA: never on the input's layout or on which kernel (run, multi) took it. The
 * jit's fused row reductions (contiguous tiles) rely on that to equal eager bitwise. */
#define DEF_RUN_BLOCKED(name, T, FOLD, OP, INIT)                                                   \
    static td_red_acc name(const void *xv, int64_t n, int64_t s)                                   \
    {                                                                                              \
        const T *x = xv;                                                                           \
        T buf[RUN_BLOCK];                                                                          \
        double total = INIT;                                                                       \
        for (int64_t b = 0; b < n; b += RUN_BLOCK) {                                               \
            int64_t len = min64(RUN_BLOCK, n - b);                                                 \
            const T *p = x + b * s;                                                                \
            if (s != 1) {                                                                          \
                for (int64_t i = 0; i < len; i++)                                                  \
                    buf[i] = p[i * s];                                                             \
                p = buf;                                                                           \
            }                                                                                      \
            total = OP(total, (double)FOLD(p, len));                                               \
        }                                                                                          \
        return (td_red_acc){.f = total};                                                           \
    }

DEF_RUN_BLOCKED(run_sum_f32, float, fold_sum_f32, ADD, 0.0)
DEF_RUN_BLOCKED(run_sum_f64, double, fold_sum_f64, ADD, 0.0)
DEF_RUN_BLOCKED(run_prod_f64, double, fold_prod_f64, MUL, 1.0)
DEF_RUN_BLOCKED(run_prod_f32, float, fold_prod_f32, MUL, 1.0)

#define DEF_RUN_FMINMAX(name, T, VFN, SCALAR, IDENT)                                               \
    static td_red_acc name(const void *xv, int64_t n, int64_t s)                                   \
    {                                                                                              \
        const T *x = xv;                                                                           \
        if (n == 0)                                                                                \
            return (td_red_acc){.f = IDENT};                                                       \
        if (s == 1)                                                                                \
            return (td_red_acc){.f = VFN(x, n)};                                                   \
        T best = x[0];                                                                             \
        for (int64_t i = 1; i < n; i++)                                                            \
            best = SCALAR(x[i * s], best);                                                         \
        return (td_red_acc){.f = best};                                                            \
    }

DEF_RUN_FMINMAX(run_max_f32, float, vmax_f32, FMAX, -INFINITY)
DEF_RUN_FMINMAX(run_min_f32, float, vmin_f32, FMIN, INFINITY)
DEF_RUN_FMINMAX(run_max_f64, double, vmax_f64, FMAX, -INFINITY)
DEF_RUN_FMINMAX(run_min_f64, double, vmin_f64, FMIN, INFINITY)

/* Integer runs: wide accumulators (uint64 wraps for sum/prod, as the int64 result must). The
 * stride-1 branch is a separate loop so GCC vectorizes it. */
#define DEF_RUN_INT(name, T, A, FIELD, OP, INIT)                                                   \
    static td_red_acc name(const void *xv, int64_t n, int64_t s)                                   \
    {                                                                                              \
        const T *x = xv;                                                                           \
        A acc = (A)(INIT);                                                                         \
        if (s == 1)                                                                                \
            for (int64_t i = 0; i < n; i++)                                                        \
                acc = OP(acc, (A)x[i]);                                                            \
        else                                                                                       \
            for (int64_t i = 0; i < n; i++)                                                        \
                acc = OP(acc, (A)x[i * s]);                                                        \
        return (td_red_acc){.FIELD = acc};                                                         \
    }

DEF_RUN_INT(run_sum_i32, int32_t, uint64_t, u, ADD, 0)
DEF_RUN_INT(run_sum_i64, int64_t, uint64_t, u, ADD, 0)
DEF_RUN_INT(run_prod_i32, int32_t, uint64_t, u, MUL, 1)
DEF_RUN_INT(run_prod_i64, int64_t, uint64_t, u, MUL, 1)
DEF_RUN_INT(run_prod_u8, uint8_t, uint64_t, u, MUL, 1)
DEF_RUN_INT(run_max_i32, int32_t, int32_t, i, IMAX, INT32_MIN)
DEF_RUN_INT(run_min_i32, int32_t, int32_t, i, IMIN, INT32_MAX)
DEF_RUN_INT(run_max_i64, int64_t, int64_t, i, IMAX, INT64_MIN)
DEF_RUN_INT(run_min_i64, int64_t, int64_t, i, IMIN, INT64_MAX)
DEF_RUN_INT(run_max_u8, uint8_t, uint8_t, i, IMAX, 0)
DEF_RUN_INT(run_min_u8, uint8_t, uint8_t, i, IMIN, UINT8_MAX)

/* Bytes summed in uint32 over blocks that cannot overflow it: the widening to 64 bits per byte
 * would otherwise cost more than the load. */
static td_red_acc run_sum_u8(const void *xv, int64_t n, int64_t s)
{
    const uint8_t *x = xv;
    uint64_t total = 0;
    for (int64_t b = 0; b < n; b += 1 << 20) {
        int64_t len = min64(1 << 20, n - b);
        uint32_t acc = 0;
        if (s == 1)
            for (int64_t i = 0; i < len; i++)
                acc += x[b + i];
        else
            for (int64_t i = 0; i < len; i++)
                acc += x[(b + i) * s];
        total += acc;
    }
    return (td_red_acc){.u = total};
}

/* ---- multi kernels: many runs of the same length, run_stride apart ---------------------- */

/* out[k] (wide) = reduction of the run at x + k * run_stride. Short runs are reduced four at a
 * time in independent scalar chains: a vector set-up and horizontal step per run would cost
 * more than the run itself, and a lone chain is bound by the add latency. */
#define DEF_MULTI(name, T, N, W, OPN, INIT, RUN)                                                   \
    static void name(const void *xv, int64_t n, int64_t s, int64_t count, int64_t rs, void *outv)  \
    {                                                                                              \
        const T *x = xv;                                                                           \
        W *out = outv;                                                                             \
        int64_t k = 0;                                                                             \
        if (n < 2 * (int64_t)(VB / sizeof(T))) {                                                   \
            for (; k + 4 <= count; k += 4) {                                                       \
                const T *a = x + k * rs, *b = a + rs, *c = b + rs, *d = c + rs;                    \
                N s0 = (N)(INIT), s1 = s0, s2 = s0, s3 = s0;                                       \
                for (int64_t j = 0; j < n; j++) {                                                  \
                    s0 = OPN((N)a[j * s], s0);                                                     \
                    s1 = OPN((N)b[j * s], s1);                                                     \
                    s2 = OPN((N)c[j * s], s2);                                                     \
                    s3 = OPN((N)d[j * s], s3);                                                     \
                }                                                                                  \
                out[k] = (W)s0;                                                                    \
                out[k + 1] = (W)s1;                                                                \
                out[k + 2] = (W)s2;                                                                \
                out[k + 3] = (W)s3;                                                                \
            }                                                                                      \
        }                                                                                          \
        for (; k < count; k++) {                                                                   \
            td_red_acc r = RUN(x + k * rs, n, s);                                                  \
            memcpy(&out[k], &r, sizeof r);                                                         \
        }                                                                                          \
    }

DEF_MULTI(multi_sum_f32, float, float, double, ADD, 0, run_sum_f32)
DEF_MULTI(multi_prod_f32, float, double, double, MUL, 1, run_prod_f32)
DEF_MULTI(multi_max_f32, float, float, double, FMAX, -INFINITY, run_max_f32)
DEF_MULTI(multi_min_f32, float, float, double, FMIN, INFINITY, run_min_f32)
DEF_MULTI(multi_sum_f64, double, double, double, ADD, 0, run_sum_f64)
DEF_MULTI(multi_prod_f64, double, double, double, MUL, 1, run_prod_f64)
DEF_MULTI(multi_max_f64, double, double, double, FMAX, -INFINITY, run_max_f64)
DEF_MULTI(multi_min_f64, double, double, double, FMIN, INFINITY, run_min_f64)
DEF_MULTI(multi_sum_i32, int32_t, uint64_t, uint64_t, ADD, 0, run_sum_i32)
DEF_MULTI(multi_prod_i32, int32_t, uint64_t, uint64_t, MUL, 1, run_prod_i32)
DEF_MULTI(multi_max_i32, int32_t, int32_t, int64_t, IMAX, INT32_MIN, run_max_i32)
DEF_MULTI(multi_min_i32, int32_t, int32_t, int64_t, IMIN, INT32_MAX, run_min_i32)
DEF_MULTI(multi_sum_i64, int64_t, uint64_t, uint64_t, ADD, 0, run_sum_i64)
DEF_MULTI(multi_prod_i64, int64_t, uint64_t, uint64_t, MUL, 1, run_prod_i64)
DEF_MULTI(multi_max_i64, int64_t, int64_t, int64_t, IMAX, INT64_MIN, run_max_i64)
DEF_MULTI(multi_min_i64, int64_t, int64_t, int64_t, IMIN, INT64_MAX, run_min_i64)
DEF_MULTI(multi_sum_u8, uint8_t, uint64_t, uint64_t, ADD, 0, run_sum_u8)
DEF_MULTI(multi_prod_u8, uint8_t, uint64_t, uint64_t, MUL, 1, run_prod_u8)
DEF_MULTI(multi_max_u8, uint8_t, uint8_t, int64_t, IMAX, 0, run_max_u8)
DEF_MULTI(multi_min_u8, uint8_t, uint8_t, int64_t, IMIN, UINT8_MAX, run_min_u8)

/* ---- rows kernels: acc[j] op= x[r * rs + j] ----------------------------------------------- */

/* The rows of a block are folded into a native-type tile, four at a time, then the tile into
 * the wide accumulator row: the inner loops are elementwise across j, which GCC vectorizes
 * without reassociating anything. */
#define DEF_ROWS(name, T, N, W, OPN, OPW)                                                          \
    static void name(const void *xv, int64_t nrows, int64_t rs, int64_t nc, void *accv)            \
    {                                                                                              \
        const T *x = xv;                                                                           \
        W *restrict acc = accv;                                                                    \
        N tile[TD_RED_TILE];                                                                       \
        for (int64_t r0 = 0; r0 < nrows; r0 += ROWS_BLOCK) {                                       \
            int64_t r1 = min64(r0 + ROWS_BLOCK, nrows), r = r0 + 1;                                \
            const T *restrict p = x + r0 * rs;                                                     \
            for (int64_t j = 0; j < nc; j++)                                                       \
                tile[j] = (N)p[j];                                                                 \
            for (; r + 4 <= r1; r += 4) {                                                          \
                const T *restrict p0 = x + r * rs, *restrict p1 = p0 + rs;                         \
                const T *restrict p2 = p1 + rs, *restrict p3 = p2 + rs;                            \
                for (int64_t j = 0; j < nc; j++) {                                                 \
                    N a = OPN((N)p0[j], (N)p1[j]), b = OPN((N)p2[j], (N)p3[j]);                    \
                    tile[j] = OPN(tile[j], OPN(a, b));                                             \
                }                                                                                  \
            }                                                                                      \
            for (; r < r1; r++) {                                                                  \
                const T *restrict p0 = x + r * rs;                                                 \
                for (int64_t j = 0; j < nc; j++)                                                   \
                    tile[j] = OPN(tile[j], (N)p0[j]);                                              \
            }                                                                                      \
            for (int64_t j = 0; j < nc; j++)                                                       \
                acc[j] = OPW(acc[j], (W)tile[j]);                                                  \
        }                                                                                          \
    }

DEF_ROWS(rows_sum_f32_tiled, float, float, double, ADD, ADD)
DEF_ROWS(rows_prod_f32, float, double, double, MUL, MUL)

/* Float max/min rows spelled out in vectors: GCC does not if-convert the nested NaN-aware
 * selects of DEF_ROWS. The hardware max/min (which returns its second operand when either is
 * NaN) does the work; NaNs are found with self-compares, and a NaN already in the tile stays
 * because the tile is always the second operand. */
#if VB == 64
#define HW_MAX_F32(a, b) ((vf32)_mm512_max_ps((__m512)(a), (__m512)(b)))
#define HW_MIN_F32(a, b) ((vf32)_mm512_min_ps((__m512)(a), (__m512)(b)))
#define HW_MAX_F64(a, b) ((vf64)_mm512_max_pd((__m512d)(a), (__m512d)(b)))
#define HW_MIN_F64(a, b) ((vf64)_mm512_min_pd((__m512d)(a), (__m512d)(b)))
#elif VB == 32
#define HW_MAX_F32(a, b) ((vf32)_mm256_max_ps((__m256)(a), (__m256)(b)))
#define HW_MIN_F32(a, b) ((vf32)_mm256_min_ps((__m256)(a), (__m256)(b)))
#define HW_MAX_F64(a, b) ((vf64)_mm256_max_pd((__m256d)(a), (__m256d)(b)))
#define HW_MIN_F64(a, b) ((vf64)_mm256_min_pd((__m256d)(a), (__m256d)(b)))
#else
#define HW_MAX_F32(a, b) ((vf32)_mm_max_ps((__m128)(a), (__m128)(b)))
#define HW_MIN_F32(a, b) ((vf32)_mm_min_ps((__m128)(a), (__m128)(b)))
#define HW_MAX_F64(a, b) ((vf64)_mm_max_pd((__m128d)(a), (__m128d)(b)))
#define HW_MIN_F64(a, b) ((vf64)_mm_min_pd((__m128d)(a), (__m128d)(b)))
#endif

/* tile op= a0..a3 (four rows), and tile op= a (one row), NaN-propagating. */
#define DEF_VEC_ROWS_OP(name, VT, VI, HW)                                                          \
    static inline VT name##4(VT a0, VT a1, VT a2, VT a3, VT t)                                     \
    {                                                                                              \
        VI bad = (a0 != a0) | (a1 != a1) | (a2 != a2) | (a3 != a3);                                \
        t = HW(HW(HW(a0, a1), HW(a2, a3)), t);                                                     \
        VT nan = (VT){0} + NAN;                                                                    \
        return (VT)(((VI)t & ~bad) | ((VI)nan & bad));                                             \
    }                                                                                              \
    static inline VT name##1(VT a, VT t)                                                           \
    {                                                                                              \
        VI bad = a != a;                                                                           \
        t = HW(a, t);                                                                              \
        return (VT)(((VI)t & ~bad) | ((VI)a & bad));                                               \
    }

DEF_VEC_ROWS_OP(vrows_max_f32, vf32, vi32, HW_MAX_F32)
DEF_VEC_ROWS_OP(vrows_min_f32, vf32, vi32, HW_MIN_F32)
DEF_VEC_ROWS_OP(vrows_max_f64, vf64, vi64, HW_MAX_F64)
DEF_VEC_ROWS_OP(vrows_min_f64, vf64, vi64, HW_MIN_F64)

#define DEF_ROWS_FMINMAX(name, T, VT, LOAD, VOP, SOP)                                              \
    static void name(const void *xv, int64_t nrows, int64_t rs, int64_t nc, void *accv)            \
    {                                                                                              \
        enum { W = VB / sizeof(T) };                                                               \
        const T *x = xv;                                                                           \
        double *restrict acc = accv;                                                               \
        T tile[TD_RED_TILE];                                                                       \
        for (int64_t r0 = 0; r0 < nrows; r0 += ROWS_BLOCK) {                                       \
            int64_t r1 = min64(r0 + ROWS_BLOCK, nrows);                                            \
            memcpy(tile, x + r0 * rs, (size_t)nc * sizeof(T));                                     \
            int64_t r = r0 + 1;                                                                    \
            for (; r + 4 <= r1; r += 4) { /* four streams keep more loads in flight */             \
                const T *p0 = x + r * rs, *p1 = p0 + rs, *p2 = p1 + rs, *p3 = p2 + rs;             \
                int64_t j = 0;                                                                     \
                for (; j + W <= nc; j += W) {                                                      \
                    VT t = VOP##4(LOAD(p0 + j), LOAD(p1 + j), LOAD(p2 + j), LOAD(p3 + j),          \
                                  LOAD(tile + j));                                                 \
                    memcpy(tile + j, &t, sizeof t);                                                \
                }                                                                                  \
                for (; j < nc; j++)                                                                \
                    tile[j] = SOP(SOP(SOP(p0[j], p1[j]), SOP(p2[j], p3[j])), tile[j]);             \
            }                                                                                      \
            for (; r < r1; r++) {                                                                  \
                const T *p = x + r * rs;                                                           \
                int64_t j = 0;                                                                     \
                for (; j + W <= nc; j += W) {                                                      \
                    VT t = VOP##1(LOAD(p + j), LOAD(tile + j));                                    \
                    memcpy(tile + j, &t, sizeof t);                                                \
                }                                                                                  \
                for (; j < nc; j++)                                                                \
                    tile[j] = SOP(p[j], tile[j]);                                                  \
            }                                                                                      \
            for (int64_t j = 0; j < nc; j++)                                                       \
                acc[j] = SOP((double)tile[j], acc[j]);                                             \
        }                                                                                          \
    }

DEF_ROWS_FMINMAX(rows_max_f32, float, vf32, ld_f32, vrows_max_f32, FMAX)
DEF_ROWS_FMINMAX(rows_min_f32, float, vf32, ld_f32, vrows_min_f32, FMIN)
DEF_ROWS(rows_sum_f64_tiled, double, double, double, ADD, ADD)
DEF_ROWS(rows_prod_f64, double, double, double, MUL, MUL)
DEF_ROWS_FMINMAX(rows_max_f64, double, vf64, ld_f64, vrows_max_f64, FMAX)
DEF_ROWS_FMINMAX(rows_min_f64, double, vf64, ld_f64, vrows_min_f64, FMIN)
DEF_ROWS(rows_sum_i32, int32_t, uint64_t, uint64_t, ADD, ADD)
DEF_ROWS(rows_prod_i32, int32_t, uint64_t, uint64_t, MUL, MUL)
DEF_ROWS(rows_max_i32, int32_t, int32_t, int64_t, IMAX, IMAX)
DEF_ROWS(rows_min_i32, int32_t, int32_t, int64_t, IMIN, IMIN)
DEF_ROWS(rows_sum_i64, int64_t, uint64_t, uint64_t, ADD, ADD)
DEF_ROWS(rows_prod_i64, int64_t, uint64_t, uint64_t, MUL, MUL)
DEF_ROWS(rows_max_i64, int64_t, int64_t, int64_t, IMAX, IMAX)
DEF_ROWS(rows_min_i64, int64_t, int64_t, int64_t, IMIN, IMIN)
DEF_ROWS(rows_sum_u8, uint8_t, uint64_t, uint64_t, ADD, ADD)
DEF_ROWS(rows_prod_u8, uint8_t, uint64_t, uint64_t, MUL, MUL)
DEF_ROWS(rows_max_u8, uint8_t, uint8_t, int64_t, IMAX, IMAX)
DEF_ROWS(rows_min_u8, uint8_t, uint8_t, int64_t, IMIN, IMIN)

/* Narrow rows (ncols <= 8) packed back to back are one flat array: a period of ncols vectors
 * holds whole rows, so vector k's lane l always belongs to column (k * W + l) % ncols. Summing
 * whole periods in vector accumulators and sorting the lanes into columns once per block runs
 * at full width, where the tiled kernel would do ncols scalar adds per row. K is a constant in
 * each expansion, so the accumulators live in registers. */
#define FLAT_PERIODS 64 /* periods per float block: each lane adds 64 values */
#define DEF_FLAT_SUM(name, T, VT, LOAD)                                                            \
    static inline __attribute__((always_inline)) void name##_k(const T *x, int64_t nflat, int K,  \
                                                                double *acc)                       \
    {                                                                                              \
        enum { W = VB / sizeof(T) };                                                               \
        const int64_t period = (int64_t)K * W;                                                     \
        int64_t i = 0;                                                                             \
        while (i + period <= nflat) {                                                              \
            VT a[8];                                                                               \
            for (int k = 0; k < K; k++)                                                            \
                a[k] = (VT){0};                                                                    \
            for (int p = 0; p < FLAT_PERIODS && i + period <= nflat; p++, i += period)             \
                for (int k = 0; k < K; k++)                                                        \
                    a[k] += LOAD(x + i + k * W);                                                   \
            for (int k = 0; k < K; k++)                                                            \
                for (int l = 0; l < W; l++)                                                        \
                    acc[(k * W + l) % K] += a[k][l];                                               \
        }                                                                                          \
        for (; i < nflat; i++) /* the rows after the last whole period */                          \
            acc[i % K] += x[i];                                                                    \
    }                                                                                              \
    static bool name(const T *x, int64_t nrows, int64_t rs, int64_t nc, double *acc)               \
    {                                                                                              \
        if (rs != nc || nrows < 4 * (int64_t)(VB / sizeof(T)))                                     \
            return false;                                                                          \
        switch (nc) {                                                                              \
        case 1: name##_k(x, nrows * nc, 1, acc); return true;                                      \
        case 2: name##_k(x, nrows * nc, 2, acc); return true;                                      \
        case 3: name##_k(x, nrows * nc, 3, acc); return true;                                      \
        case 4: name##_k(x, nrows * nc, 4, acc); return true;                                      \
        case 5: name##_k(x, nrows * nc, 5, acc); return true;                                      \
        case 6: name##_k(x, nrows * nc, 6, acc); return true;                                      \
        case 7: name##_k(x, nrows * nc, 7, acc); return true;                                      \
        case 8: name##_k(x, nrows * nc, 8, acc); return true;                                      \
        default: return false;                                                                     \
        }                                                                                          \
    }

DEF_FLAT_SUM(flat_sum_f32, float, vf32, ld_f32)
DEF_FLAT_SUM(flat_sum_f64, double, vf64, ld_f64)

static void rows_sum_f32(const void *x, int64_t nrows, int64_t rs, int64_t nc, void *acc)
{
    if (!flat_sum_f32(x, nrows, rs, nc, acc))
        rows_sum_f32_tiled(x, nrows, rs, nc, acc);
}

static void rows_sum_f64(const void *x, int64_t nrows, int64_t rs, int64_t nc, void *acc)
{
    if (!flat_sum_f64(x, nrows, rs, nc, acc))
        rows_sum_f64_tiled(x, nrows, rs, nc, acc);
}

/* ---- argmax / argmin ---------------------------------------------------------------------- */

/* Integer block extremes for the contiguous arg kernels (plain loops: GCC vectorizes them). */
#define DEF_INT_EXTREME(name, T, OP)                                                               \
    static T name(const T *x, int64_t n)                                                           \
    {                                                                                              \
        T best = x[0];                                                                             \
        for (int64_t i = 1; i < n; i++)                                                            \
            best = OP(x[i], best);                                                                 \
        return best;                                                                               \
    }

DEF_INT_EXTREME(imax_i32, int32_t, IMAX)
DEF_INT_EXTREME(imin_i32, int32_t, IMIN)
DEF_INT_EXTREME(imax_i64, int64_t, IMAX)
DEF_INT_EXTREME(imin_i64, int64_t, IMIN)
DEF_INT_EXTREME(imax_u8, uint8_t, IMAX)
DEF_INT_EXTREME(imin_u8, uint8_t, IMIN)

/* Contiguous runs go block by block: a vectorized extreme of the block, and only when it beats
 * the best so far (or is NaN, which ends the search: the first NaN wins) a scan of that block,
 * still in L1, for its first position. Strided and short runs are a plain scan. */
#define DEF_ARG_RUN(name, T, EXTREME, CMP)                                                         \
    static int64_t name(const void *xv, int64_t n, int64_t s)                                      \
    {                                                                                              \
        const T *x = xv;                                                                           \
        if (s != 1 || n < ARG_SHORT) {                                                             \
            T best = x[0];                                                                         \
            int64_t at = 0;                                                                        \
            if (best != best)                                                                      \
                return 0;                                                                          \
            for (int64_t i = 1; i < n; i++) {                                                      \
                T v = x[i * s];                                                                    \
                if (v != v)                                                                        \
                    return i;                                                                      \
                if (v CMP best) {                                                                  \
                    best = v;                                                                      \
                    at = i;                                                                        \
                }                                                                                  \
            }                                                                                      \
            return at;                                                                             \
        }                                                                                          \
        T best = x[0];                                                                             \
        int64_t at = 0;                                                                            \
        for (int64_t b = 0; b < n; b += ARG_BLOCK) {                                               \
            int64_t len = min64(ARG_BLOCK, n - b);                                                 \
            T m = EXTREME(x + b, len);                                                             \
            if (m != m) {                                                                          \
                for (int64_t i = 0; i < len; i++)                                                  \
                    if (x[b + i] != x[b + i])                                                      \
                        return b + i;                                                              \
            }                                                                                      \
            if (b == 0 || m CMP best) {                                                            \
                int64_t i = 0;                                                                     \
                while (x[b + i] != m)                                                              \
                    i++;                                                                           \
                best = m;                                                                          \
                at = b + i;                                                                        \
            }                                                                                      \
        }                                                                                          \
        return at;                                                                                 \
    }

DEF_ARG_RUN(argmax_f32, float, vmax_f32, >)
DEF_ARG_RUN(argmin_f32, float, vmin_f32, <)
DEF_ARG_RUN(argmax_f64, double, vmax_f64, >)
DEF_ARG_RUN(argmin_f64, double, vmin_f64, <)
DEF_ARG_RUN(argmax_i32, int32_t, imax_i32, >)
DEF_ARG_RUN(argmin_i32, int32_t, imin_i32, <)
DEF_ARG_RUN(argmax_i64, int64_t, imax_i64, >)
DEF_ARG_RUN(argmin_i64, int64_t, imin_i64, <)
DEF_ARG_RUN(argmax_u8, uint8_t, imax_u8, >)
DEF_ARG_RUN(argmin_u8, uint8_t, imin_u8, <)

/* Per column: the best value and its row so far. A later row takes over only when strictly
 * better, or when it is the column's first NaN; written as selects so GCC vectorizes across
 * the columns. (For integers v != v is false and folds away.) */
#define DEF_ARG_ROWS(name, T, CMP)                                                                 \
    static void name(const void *xv, int64_t nrows, int64_t rs, int64_t nc, int64_t *out,          \
                     int64_t os)                                                                   \
    {                                                                                              \
        const T *x = xv;                                                                           \
        T best[TD_RED_TILE];                                                                       \
        int64_t at[TD_RED_TILE];                                                                   \
        for (int64_t j = 0; j < nc; j++) {                                                         \
            best[j] = x[j];                                                                        \
            at[j] = 0;                                                                             \
        }                                                                                          \
        for (int64_t r = 1; r < nrows; r++) {                                                      \
            const T *restrict p = x + r * rs;                                                      \
            for (int64_t j = 0; j < nc; j++) {                                                     \
                T v = p[j], b = best[j];                                                           \
                int take = (v CMP b) | ((v != v) & (b == b));                                      \
                best[j] = take ? v : b;                                                            \
                at[j] = take ? r : at[j];                                                          \
            }                                                                                      \
        }                                                                                          \
        for (int64_t j = 0; j < nc; j++)                                                           \
            out[j * os] = at[j];                                                                   \
    }

DEF_ARG_ROWS(argrows_max_f32, float, >)
DEF_ARG_ROWS(argrows_min_f32, float, <)
DEF_ARG_ROWS(argrows_max_f64, double, >)
DEF_ARG_ROWS(argrows_min_f64, double, <)
DEF_ARG_ROWS(argrows_max_i32, int32_t, >)
DEF_ARG_ROWS(argrows_min_i32, int32_t, <)
DEF_ARG_ROWS(argrows_max_i64, int64_t, >)
DEF_ARG_ROWS(argrows_min_i64, int64_t, <)
DEF_ARG_ROWS(argrows_max_u8, uint8_t, >)
DEF_ARG_ROWS(argrows_min_u8, uint8_t, <)

/* ---- the table (dtype order: float32, float64, int32, int64, uint8, bool) ------------------ */

/* Bool is stored as uint8 0/1: its sum counts, prod is all, max is any, min is all. */
const td_red_kernels TD_ISA_FN(td_red_kernels) = {
    .run = {
        [TD_RED_SUM] = {run_sum_f32, run_sum_f64, run_sum_i32, run_sum_i64, run_sum_u8,
                        run_sum_u8},
        [TD_RED_PROD] = {run_prod_f32, run_prod_f64, run_prod_i32, run_prod_i64, run_prod_u8,
                         run_prod_u8},
        [TD_RED_MAX] = {run_max_f32, run_max_f64, run_max_i32, run_max_i64, run_max_u8,
                        run_max_u8},
        [TD_RED_MIN] = {run_min_f32, run_min_f64, run_min_i32, run_min_i64, run_min_u8,
                        run_min_u8},
    },
    .multi = {
        [TD_RED_SUM] = {multi_sum_f32, multi_sum_f64, multi_sum_i32, multi_sum_i64, multi_sum_u8,
                        multi_sum_u8},
        [TD_RED_PROD] = {multi_prod_f32, multi_prod_f64, multi_prod_i32, multi_prod_i64,
                         multi_prod_u8, multi_prod_u8},
        [TD_RED_MAX] = {multi_max_f32, multi_max_f64, multi_max_i32, multi_max_i64, multi_max_u8,
                        multi_max_u8},
        [TD_RED_MIN] = {multi_min_f32, multi_min_f64, multi_min_i32, multi_min_i64, multi_min_u8,
                        multi_min_u8},
    },
    .rows = {
        [TD_RED_SUM] = {rows_sum_f32, rows_sum_f64, rows_sum_i32, rows_sum_i64, rows_sum_u8,
                        rows_sum_u8},
        [TD_RED_PROD] = {rows_prod_f32, rows_prod_f64, rows_prod_i32, rows_prod_i64,
                         rows_prod_u8, rows_prod_u8},
        [TD_RED_MAX] = {rows_max_f32, rows_max_f64, rows_max_i32, rows_max_i64, rows_max_u8,
                        rows_max_u8},
        [TD_RED_MIN] = {rows_min_f32, rows_min_f64, rows_min_i32, rows_min_i64, rows_min_u8,
                        rows_min_u8},
    },
    .arg_run = {
        [TD_ARG_MAX] = {argmax_f32, argmax_f64, argmax_i32, argmax_i64, argmax_u8, argmax_u8},
        [TD_ARG_MIN] = {argmin_f32, argmin_f64, argmin_i32, argmin_i64, argmin_u8, argmin_u8},
    },
    .arg_rows = {
        [TD_ARG_MAX] = {argrows_max_f32, argrows_max_f64, argrows_max_i32, argrows_max_i64,
                        argrows_max_u8, argrows_max_u8},
        [TD_ARG_MIN] = {argrows_min_f32, argrows_min_f64, argrows_min_i32, argrows_min_i64,
                        argrows_min_u8, argrows_min_u8},
    },
};
