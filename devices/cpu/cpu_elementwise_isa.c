/*
 * cpu_elementwise_isa.c — the arithmetic of the elementwise ops, as contiguous 1-D loops.
 *
 * Compiled three times (TD_ISA = baseline, avx2, avx512; see cpu_isa.h), so the plain loops
 * below become SSE2, AVX2 or AVX-512 code by gcc's auto-vectorizer, and the transcendental ops
 * call SLEEF's vector functions of the matching width (float32 tanh has its own vector code,
 * below). cpu_elementwise.c picks one table at run time and deals with strides, broadcasting
 * and threads; everything here sees contiguous data.
 *
 * Integer arithmetic goes through unsigned types so overflow wraps instead of being undefined.
 */
#include <math.h>
#include <stdint.h>
#include <string.h>

#include <immintrin.h>
#include <sleef.h>

#include "cpu_elementwise.h"
#include "cpu_isa.h"

#ifndef TD_ISA
#error "cpu_elementwise_isa.c is compiled with TD_ISA set (see CMakeLists.txt)"
#endif

/* SLEEF's u10 functions (1.0 ulp) at this ISA's vector width, and the min and max instructions
 * (which return their second operand when either is NaN). */
#if defined(__AVX512F__)
typedef __m512 vec_f32;
typedef __m512d vec_f64;
#define SLEEF_F32(fn) Sleef_##fn##f16_u10avx512f
#define SLEEF_F64(fn) Sleef_##fn##d8_u10avx512f
#define ERFC_F64 Sleef_erfcd8_u15avx512f
#define MIN_F32(a, b) ((__typeof__(a))_mm512_min_ps((__m512)(a), (__m512)(b)))
#define MAX_F32(a, b) ((__typeof__(a))_mm512_max_ps((__m512)(a), (__m512)(b)))
#elif defined(__AVX2__)
typedef __m256 vec_f32;
typedef __m256d vec_f64;
#define SLEEF_F32(fn) Sleef_##fn##f8_u10avx2
#define SLEEF_F64(fn) Sleef_##fn##d4_u10avx2
#define ERFC_F64 Sleef_erfcd4_u15avx2
#define MIN_F32(a, b) ((__typeof__(a))_mm256_min_ps((__m256)(a), (__m256)(b)))
#define MAX_F32(a, b) ((__typeof__(a))_mm256_max_ps((__m256)(a), (__m256)(b)))
#else
typedef __m128 vec_f32;
typedef __m128d vec_f64;
#define SLEEF_F32(fn) Sleef_##fn##f4_u10sse2
#define SLEEF_F64(fn) Sleef_##fn##d2_u10sse2
#define ERFC_F64 Sleef_erfcd2_u15sse2
#define MIN_F32(a, b) ((__typeof__(a))_mm_min_ps((__m128)(a), (__m128)(b)))
#define MAX_F32(a, b) ((__typeof__(a))_mm_max_ps((__m128)(a), (__m128)(b)))
#endif

/* Composite ops (sigmoid) work through a stack buffer this many elements long: small enough to
 * stay in L1, long enough that the loops around the SLEEF call run at full vector speed. */
#define BLOCK 512

static inline int64_t min_i64(int64_t a, int64_t b) { return a < b ? a : b; }

/* ---- vector maps: out[i] = fn(x[i]) over whole vectors, the tail through a padded vector so
 * every element gets exactly the value the vector path would give it. out may equal x. ---- */

#define DEFINE_VEC_MAP1(name, T, V, fn)                                                            \
    static void name(int64_t n, T *out, const T *x)                                                \
    {                                                                                              \
        enum { W = sizeof(V) / sizeof(T) };                                                        \
        int64_t i = 0;                                                                             \
        for (; i + W <= n; i += W) {                                                               \
            V v;                                                                                   \
            memcpy(&v, x + i, sizeof v);                                                           \
            v = fn(v);                                                                             \
            memcpy(out + i, &v, sizeof v);                                                         \
        }                                                                                          \
        if (i < n) {                                                                               \
            T pad[W] = {0};                                                                        \
            size_t rest = (size_t)(n - i) * sizeof(T);                                             \
            memcpy(pad, x + i, rest);                                                              \
            V v;                                                                                   \
            memcpy(&v, pad, sizeof v);                                                             \
            v = fn(v);                                                                             \
            memcpy(pad, &v, sizeof v);                                                             \
            memcpy(out + i, pad, rest);                                                            \
        }                                                                                          \
    }

#define DEFINE_VEC_MAP2(name, T, V, fn)                                                            \
    static void name(int64_t n, T *out, const T *a, const T *b)                                    \
    {                                                                                              \
        enum { W = sizeof(V) / sizeof(T) };                                                        \
        int64_t i = 0;                                                                             \
        for (; i + W <= n; i += W) {                                                               \
            V va, vb;                                                                              \
            memcpy(&va, a + i, sizeof va);                                                         \
            memcpy(&vb, b + i, sizeof vb);                                                         \
            va = fn(va, vb);                                                                       \
            memcpy(out + i, &va, sizeof va);                                                       \
        }                                                                                          \
        if (i < n) {                                                                               \
            T pa[W] = {0}, pb[W] = {0};                                                            \
            size_t rest = (size_t)(n - i) * sizeof(T);                                             \
            memcpy(pa, a + i, rest);                                                               \
            memcpy(pb, b + i, rest);                                                               \
            V va, vb;                                                                              \
            memcpy(&va, pa, sizeof va);                                                            \
            memcpy(&vb, pb, sizeof vb);                                                            \
            va = fn(va, vb);                                                                       \
            memcpy(pa, &va, sizeof va);                                                            \
            memcpy(out + i, pa, rest);                                                             \
        }                                                                                          \
    }

DEFINE_VEC_MAP1(map_log_f32, float, vec_f32, SLEEF_F32(log))
DEFINE_VEC_MAP1(map_sin_f32, float, vec_f32, SLEEF_F32(sin))
DEFINE_VEC_MAP1(map_cos_f32, float, vec_f32, SLEEF_F32(cos))
DEFINE_VEC_MAP2(map_pow_f32, float, vec_f32, SLEEF_F32(pow))
DEFINE_VEC_MAP1(map_exp_f64, double, vec_f64, SLEEF_F64(exp))
DEFINE_VEC_MAP1(map_log_f64, double, vec_f64, SLEEF_F64(log))
DEFINE_VEC_MAP1(map_sin_f64, double, vec_f64, SLEEF_F64(sin))
DEFINE_VEC_MAP1(map_cos_f64, double, vec_f64, SLEEF_F64(cos))
DEFINE_VEC_MAP1(map_tanh_f64, double, vec_f64, SLEEF_F64(tanh))
DEFINE_VEC_MAP1(map_erf_f32, float, vec_f32, SLEEF_F32(erf))
DEFINE_VEC_MAP1(map_erf_f64, double, vec_f64, SLEEF_F64(erf))
DEFINE_VEC_MAP2(map_pow_f64, double, vec_f64, SLEEF_F64(pow))

/* gelu in float64: x Phi(x) = (x / 2) erfc(-x / sqrt2) with SLEEF's erfc (1.5 ulp, relative
 * everywhere, so negative x keep their digits). -inf gives NaN (-inf * 0), as x Phi(x) does.
 * (float32's, in registers, is below: SLEEF's erfcf ran at a tenth of memory speed.) */
static inline vec_f64 gelu_vf64(vec_f64 x)
{
    return (x * 0.5) * ERFC_F64(x * -0.70710678118654752);
}
DEFINE_VEC_MAP1(map_gelu_f64, double, vec_f64, gelu_vf64)

/* Kernels with the table's void-pointer signature around the typed maps. */
#define DEFINE_MAP_UNARY(name, T, map)                                                             \
    static void name(int64_t n, void *out, const void *x) { map(n, (T *)out, (const T *)x); }
#define DEFINE_MAP_BINARY(name, T, map)                                                            \
    static void name(int64_t n, void *out, const void *a, const void *b)                           \
    {                                                                                              \
        map(n, (T *)out, (const T *)a, (const T *)b);                                              \
    }

DEFINE_MAP_UNARY(log_f32, float, map_log_f32)
DEFINE_MAP_UNARY(sin_f32, float, map_sin_f32)
DEFINE_MAP_UNARY(cos_f32, float, map_cos_f32)
/*
 * pow where the exponent is 2 is x * x, exactly what eager's pow by one 2 runs (td_cpu_binary
 * calls mul there): SLEEF's pow is within 1 ulp, not exact, so a fused x^2 (the jit runs this
 * kernel on a splatted exponent) differed from eager by an ulp. In chunks, with the operands
 * copied first, because out may be a or b (pow_).
 */
#define DEFINE_POW(name, T, map)                                                                   \
    static void name(int64_t n, void *out, const void *a, const void *b)                           \
    {                                                                                              \
        enum { CHUNK = 128 };                                                                      \
        T *o = out;                                                                                \
        const T *x = a, *e = b;                                                                    \
        for (int64_t i = 0; i < n; i += CHUNK) {                                                   \
            int64_t m = n - i < CHUNK ? n - i : CHUNK;                                             \
            T xs[CHUNK], es[CHUNK];                                                                \
            memcpy(xs, x + i, (size_t)m * sizeof(T));                                              \
            memcpy(es, e + i, (size_t)m * sizeof(T));                                              \
            map(m, o + i, xs, es);                                                                 \
            for (int64_t j = 0; j < m; j++)                                                        \
                if (es[j] == 2)                                                                    \
                    o[i + j] = xs[j] * xs[j];                                                      \
        }                                                                                          \
    }

DEFINE_POW(pow_f32, float, map_pow_f32)
DEFINE_MAP_UNARY(exp_f64, double, map_exp_f64)
DEFINE_MAP_UNARY(log_f64, double, map_log_f64)
DEFINE_MAP_UNARY(sin_f64, double, map_sin_f64)
DEFINE_MAP_UNARY(cos_f64, double, map_cos_f64)
DEFINE_MAP_UNARY(tanh_f64, double, map_tanh_f64)
DEFINE_MAP_UNARY(erf_f32, float, map_erf_f32)
DEFINE_MAP_UNARY(erf_f64, double, map_erf_f64)
DEFINE_MAP_UNARY(gelu_f64, double, map_gelu_f64)
DEFINE_POW(pow_f64, double, map_pow_f64)

/* The math of issue 24's primitives: SLEEF's u10 versions, each within 1.0 ulp (SLEEF's stated
 * bound), fmod and trunc from libm (both exact). */
#define SLEEF_UNARY_24(X) X(log1p) X(expm1) X(log2) X(tan) X(asin) X(acos) X(atan)
#define DEFINE_SLEEF_UNARY_24(fn)                                                                  \
    DEFINE_VEC_MAP1(map_##fn##_f32, float, vec_f32, SLEEF_F32(fn))                                 \
    DEFINE_VEC_MAP1(map_##fn##_f64, double, vec_f64, SLEEF_F64(fn))                                \
    DEFINE_MAP_UNARY(fn##_f32, float, map_##fn##_f32)                                              \
    DEFINE_MAP_UNARY(fn##_f64, double, map_##fn##_f64)
SLEEF_UNARY_24(DEFINE_SLEEF_UNARY_24)

/* sinh and cosh: SLEEF's float32 versions give inf past |x| = 88.5, below float's limit 89.4,
 * so those lanes are redone in double (libm, correctly rounded to float but for 2^-29). */
#define DEFINE_SINH_COSH(fn)                                                                       \
    DEFINE_VEC_MAP1(map_##fn##_f32, float, vec_f32, SLEEF_F32(fn))                                 \
    DEFINE_VEC_MAP1(map_##fn##_f64, double, vec_f64, SLEEF_F64(fn))                                \
    DEFINE_MAP_UNARY(fn##_f64, double, map_##fn##_f64)                                             \
    static void fn##_f32(int64_t n, void *outv, const void *xv)                                    \
    {                                                                                              \
        float *out = outv;                                                                         \
        const float *x = xv; /* may be out */                                                      \
        _Alignas(64) float in[BLOCK];                                                              \
        for (int64_t i0 = 0; i0 < n; i0 += BLOCK) {                                                \
            int64_t m = min_i64(BLOCK, n - i0);                                                    \
            memcpy(in, x + i0, (size_t)m * sizeof(float));                                         \
            map_##fn##_f32(m, out + i0, in);                                                       \
            for (int64_t j = 0; j < m; j++)                                                        \
                if (fabsf(in[j]) > 88.0f && fabsf(in[j]) < INFINITY)                               \
                    out[i0 + j] = (float)fn((double)in[j]);                                        \
        }                                                                                          \
    }
DEFINE_SINH_COSH(sinh)
DEFINE_SINH_COSH(cosh)
DEFINE_VEC_MAP2(map_atan2_f32, float, vec_f32, SLEEF_F32(atan2))
DEFINE_VEC_MAP2(map_atan2_f64, double, vec_f64, SLEEF_F64(atan2))
DEFINE_MAP_BINARY(atan2_f32, float, map_atan2_f32)
DEFINE_MAP_BINARY(atan2_f64, double, map_atan2_f64)

/*
 * sigmoid(x) = 1/(1+e^-x) written with e = exp(-|x|), which never overflows: x >= 0 gives
 * 1/(1+e), x < 0 gives e/(1+e). So large negative inputs keep their tiny (denormal) values
 * instead of rounding to 0 through an infinite exp, and a NaN stays NaN (it takes the e branch).
 * Used for float64; float32 has its own vector version below (sigmoid_vec_f32), which divides
 * in float: 2.2 ulp at worst over a 1/1024 sample of all floats, against 1 ulp with a double
 * division that made the kernel twice as slow.
 */
#define DEFINE_SIGMOID(name, T, TW, map_exp, fabs_fn)                                              \
    static void name(int64_t n, void *outv, const void *xv)                                        \
    {                                                                                              \
        T *restrict out = outv;                                                                    \
        const T *restrict x = xv;                                                                  \
        _Alignas(64) T e[BLOCK];                                                                   \
        for (int64_t i0 = 0; i0 < n; i0 += BLOCK) {                                                \
            int64_t m = min_i64(BLOCK, n - i0);                                                    \
            for (int64_t j = 0; j < m; j++)                                                        \
                e[j] = -fabs_fn(x[i0 + j]);                                                        \
            map_exp(m, e, e);                                                                      \
            for (int64_t j = 0; j < m; j++)                                                        \
                out[i0 + j] = (T)((x[i0 + j] >= 0 ? (TW)1 : (TW)e[j]) / ((TW)1 + (TW)e[j]));       \
        }                                                                                          \
    }

DEFINE_SIGMOID(sigmoid_f64, double, double, map_exp_f64, fabs)

typedef float vf32 __attribute__((vector_size(sizeof(vec_f32))));
typedef int32_t vi32 __attribute__((vector_size(sizeof(vec_f32))));
typedef uint32_t vu32 __attribute__((vector_size(sizeof(vec_f32))));

/* x < lim ? a : b per lane, as one blend instruction where the ISA has one (gcc's lowering of
 * the generic bit-select costs AVX-512 a third more time). */
static inline vf32 select_lt_f32(vf32 x, float lim, vf32 a, vf32 b)
{
#if defined(__AVX512F__)
    __mmask16 m = _mm512_cmp_ps_mask((__m512)x, _mm512_set1_ps(lim), _CMP_LT_OQ);
    return (vf32)_mm512_mask_blend_ps(m, (__m512)b, (__m512)a);
#elif defined(__AVX2__)
    __m256 m = _mm256_cmp_ps((__m256)x, _mm256_set1_ps(lim), _CMP_LT_OQ);
    return (vf32)_mm256_blendv_ps((__m256)b, (__m256)a, m);
#else
    vi32 m = x < lim;
    return (vf32)((m & (vi32)a) | (~m & (vi32)b));
#endif
}

/*
 * tanh in float32, written out in vector arithmetic (gcc vector extensions at this compile's
 * width) because SLEEF's tanhf runs at a sixth of memory speed. A rational function,
 *     tanh x = x P(x^2) / Q(x^2),  P and Q of degree 4,
 * fitted (scripts/fit_transcendentals.py: least squares reweighted towards minimax) to relative
 * error 2.3e-8 on [0, 9.1]; x is clamped to +-9.1, past which tanh rounds to +-1. Both
 * polynomials have only positive terms there, so Horner's rule loses nothing to cancellation.
 * It is odd by construction (-0 stays -0), a NaN passes through the clamp and every step, and
 * +-inf clamp to +-1. 15 vector operations and one divide: 1.7x faster than the exp form it
 * replaced (e^2x - 1 over e^2x + 1, 25 operations), which made the fused jit chain
 * tanh(x*a+b)*sigmoid(x)+c compute-bound. Worst error over every float, checked exhaustively:
 * 5.4 ulp near |x| = 6.9, where the rounding of the two polynomials adds up (relative error
 * 3.2e-7; the exp form had 1.6 ulp); 6.2 ulp on SSE2, which has no fused multiply-add. The
 * result never exceeds 1 in magnitude.
 */
static inline vf32 tanh_vec_f32(vf32 x)
{
    /* the second operand of min/max wins for NaN: NaN stays */
    vf32 c = MIN_F32((vf32){0} + 9.1f, MAX_F32((vf32){0} - 9.1f, x));
    vf32 s = c * c;
    vf32 p = 1.317717379e-08f * s + 2.048092136e-05f;
    p = p * s + 3.487794514e-03f;
    p = p * s + 1.337446121e-01f;
    p = p * s + 9.999999772e-01f;
    vf32 q = 7.703899104e-07f * s + 3.272893391e-04f;
    q = q * s + 2.584732544e-02f;
    q = q * s + 4.670777499e-01f;
    q = q * s + 1.0f;
    /* near the clamp the rounding could give 1 + 2^-23; tanh must stay within [-1, 1] */
    vf32 one = (vf32){0} + 1.0f;
    return MIN_F32(one, MAX_F32(-one, (c * p) / q));
}

DEFINE_VEC_MAP1(map_tanh_f32, float, vf32, tanh_vec_f32)
DEFINE_MAP_UNARY(tanh_f32, float, map_tanh_f32)

/*
 * e^x in float32 over whole vectors, shared by exp and sigmoid: k = round(x/ln2),
 * r = x - k ln2 in [-ln2/2, ln2/2], e^r = 1 + r + r^2 P(r) with P a degree-4 fit of
 * (e^r - 1 - r)/r^2 weighted to e^r's relative error, 3e-9 (scripts/fit_transcendentals.py).
 * exp_reduced_f32 returns e^r and leaves kb = 1.5 * 2^23 + k, whose bits minus magic's are k.
 */
static inline vf32 exp_reduced_f32(vf32 x, vf32 *kb_out, int nested)
{
    const float magic = 12582912.0f; /* 1.5 * 2^23: adding it rounds to an integer */
    vf32 kb = x * 1.44269504f + magic;
    vf32 kf = kb - magic;
#ifdef __FMA__
    vf32 r = x - kf * 0.693147182f;
    r = r - kf * -1.90465421e-09f; /* ln2's remainder: r to full precision */
#else
    vf32 r = x - kf * 0.693359375f; /* Cody-Waite: ln2_hi has 9 bits, so k ln2_hi is exact */
    r = r - kf * -2.12194440e-4f;
#endif
    vf32 p = 1.3814598528e-03f * r + 8.3687169007e-03f;
    p = p * r + 4.1668388049e-02f;
    p = p * r + 1.6666520632e-01f;
    p = p * r + 4.9999993448e-01f;
    *kb_out = kb;
#ifdef __FMA__
    if (nested) {
        vf32 q = r * p + 1.0f;
        return r * q + 1.0f;
    }
#else
    (void)nested;
#endif
    return (r + r * r * p) + 1.0f;
}

/* Lanes for which exp_scale_fast is exact: |x| <= 86 gives |k| <= 124, so er * 2^k is a normal
 * float. Beyond (or NaN), exp_scale_slow. */
#define EXP_FAST_LIMIT 86.0f

/* Whether some lane of |x| (a, NaN included) is past EXP_FAST_LIMIT. */
static inline int exp_any_slow(vf32 a)
{
#if defined(__AVX512F__)
    return _mm512_cmp_ps_mask((__m512)a, _mm512_set1_ps(EXP_FAST_LIMIT), _CMP_NLE_UQ) != 0;
#elif defined(__AVX2__)
    return _mm256_movemask_ps(
               _mm256_cmp_ps((__m256)a, _mm256_set1_ps(EXP_FAST_LIMIT), _CMP_NLE_UQ)) != 0;
#else
    return _mm_movemask_ps(_mm_cmpnle_ps((__m128)a, _mm_set1_ps(EXP_FAST_LIMIT))) != 0;
#endif
}

/* er * 2^k where the product is a normal float: k added to er's exponent field. Exact, so it
 * equals exp_scale_slow's value wherever both apply. */
static inline vf32 exp_scale_fast(vf32 er, vf32 kb) { return (vf32)((vi32)er + ((vi32)kb << 23)); }

/* er * 2^k for k in [-151, 129]: 2^k applied as two halves, so that denormal results keep their
 * value instead of flushing to 0 and k = 128, 129 reach infinity only when e^x does. Lanes of
 * x <= -104 (-inf: a mask's) are 0 whatever er is; er is zeroed there first, because a product
 * that underflows costs a microcode assist, ~10x a whole vector's exp, and 0 * 2^k does not. */
static inline vf32 exp_scale_slow(vf32 er, vf32 kb, vf32 x)
{
    er = (vf32)((vi32)er & ((x > -104.0f) | (x != x)));
    vi32 k = (vi32)kb - 0x4B400000;
    vi32 k1 = k >> 1, k2 = k - k1;
    vf32 s1 = (vf32)((k1 + 127) << 23), s2 = (vf32)((k2 + 127) << 23);
    return er * s1 * s2;
}

/*
 * exp in float32: exp_reduced_f32, then 2^k into the exponent where every lane of the vector is
 * within +-86 (one integer add), else in two halves over x clamped to [-104, 89] (past which e^x
 * is 0 or infinity; AVX-512's scalef does that in one instruction). NaN stays NaN, exp(-inf) =
 * 0, exp(inf) = inf. Worst error over every float, checked exhaustively: see devices/cpu/README.md
 * (bench_jit prints it). 2.3x faster than SLEEF's expf u10 it replaced on AVX2, which was 60% of
 * the jit's softmax row.
 */
static inline vf32 exp_vec_f32(vf32 x)
{
    /* the second operand of min/max wins for NaN: NaN stays */
    vf32 c = MIN_F32((vf32){0} + 89.0f, MAX_F32((vf32){0} - 104.0f, x));
    vf32 kb, er;
#if defined(__AVX512F__)
    er = exp_reduced_f32(c, &kb, 1);
    /* lanes of x <= -104 are 0 without the scaling, which would underflow there and take a
     * microcode assist (exp_scale_slow); NaN lanes are scaled (NaN stays) */
    __mmask16 live = _mm512_cmp_ps_mask((__m512)x, _mm512_set1_ps(-104.0f), _CMP_NLE_UQ);
    return (vf32)_mm512_maskz_scalef_ps(live, (__m512)er, (__m512)(kb - 12582912.0f));
#else
    vf32 a = (vf32)((vi32)x & (int32_t)0x7fffffff);
    if (__builtin_expect(exp_any_slow(a), 0)) {
        er = exp_reduced_f32(c, &kb, 1);
        return exp_scale_slow(er, kb, x);
    }
    er = exp_reduced_f32(x, &kb, 1);
    return exp_scale_fast(er, kb);
#endif
}

DEFINE_VEC_MAP1(map_exp_f32, float, vf32, exp_vec_f32)
DEFINE_MAP_UNARY(exp_f32, float, map_exp_f32)

/*
 * gelu in float32 over whole vectors: x Phi(x), with erfc(z)/2 = h exp(g(s) - z^2) for
 * z = |x|/sqrt2, h = 1/(z + 2), s = 4.8 h - 1.4 clamped at -1, and g the 12-term polynomial
 * fitted to erfc's relative error 2.6e-9 on z in [0, 10] (the form and coefficients of
 * common.glsl's half_erfc1; past the fit exp takes the value to 0). Phi is that half erfc below
 * 0 and one minus it above: relative everywhere, so negative x keep their digits. Its error is
 * the argument's (z's two roundings times erfc's sensitivity, ~2 z^2 + 1, and z^2's rounding
 * inside exp), plus exp_vec_f32's 0.89 ulp and the fit's: tests/test_gelu.c bounds it. -0 stays
 * -0, inf is inf, -inf and NaN give NaN (-inf * 0). About 30 vector operations and a divide:
 * SLEEF's erfcf u15 took ~10x as long.
 */
static inline vf32 gelu_vec_f32(vf32 x)
{
    vf32 z = (vf32)((vi32)x & (int32_t)0x7fffffff) * 0.70710678118654752f;
    vf32 h = 1.0f / (z + 2.0f);
    vf32 s = MAX_F32((vf32){0} - 1.0f, h * 4.8f - 1.4f); /* NaN stays: the 2nd operand wins */
    vf32 g = -4.7177399865712735e-06f * s - 2.2855769681526915e-05f;
    g = g * s + 6.7834031783185731e-05f;
    g = g * s + 0.0001298682143473287f;
    g = g * s - 0.00054729439540930852f;
    g = g * s - 0.00027596115799807943f;
    g = g * s + 0.0037131527712421391f;
    g = g * s - 0.0010455518350085862f;
    g = g * s - 0.029471350434957733f;
    g = g * s + 0.015745074072071874f;
    g = g * s + 0.57030715365546358f;
    g = g * s - 0.55859535372792468f;
    vf32 q = h * exp_vec_f32(g - z * z);
    vi32 negative = x < 0.0f;
    vf32 phi = (vf32)(((vi32)q & negative) | ((vi32)(1.0f - q) & ~negative));
    return x * phi;
}

DEFINE_VEC_MAP1(map_gelu_f32, float, vf32, gelu_vec_f32)
DEFINE_MAP_UNARY(gelu_f32, float, map_gelu_f32)

/*
 * sigmoid in float32 over whole vectors: the formula of DEFINE_SIGMOID (e = exp(-|x|), then
 * x < 0 ? e : 1 over 1 + e, which never overflows) with everything in registers, e from
 * exp_reduced_f32: a is clamped to 104, past which e^-a is below the smallest denormal, and 2^k
 * is applied as in exp_vec_f32 (one integer add where every lane has |x| <= 86, else two halves:
 * the denormals of e^-a). Worst error over every float, checked exhaustively: 2.4 ulp; a NaN
 * stays NaN (1/(1+NaN)); sigmoid(-inf) = 0, (inf) = 1.
 * (A reciprocal estimate plus a Newton step instead of the divide made sigmoid and tanh slower
 * here: they are bound by the count of vector operations, and the divide is one.)
 */
static inline vf32 sigmoid_vec_f32(vf32 x)
{
    vf32 a = (vf32)((vi32)x & (int32_t)0x7fffffff);
    vf32 one = (vf32){0} + 1.0f, kb, e;
#if defined(__AVX512F__)
    a = MIN_F32((vf32){0} + 104.0f, a); /* the second operand wins for NaN: NaN stays */
    vf32 er = exp_reduced_f32(-a, &kb, 0);
    /* scalef multiplies by 2^kf in one instruction, denormal results included; lanes of
     * a >= 104 are 0 without it (exp_vec_f32 says why) */
    __mmask16 live = _mm512_cmp_ps_mask((__m512)a, _mm512_set1_ps(104.0f), _CMP_NGE_UQ);
    e = (vf32)_mm512_maskz_scalef_ps(live, (__m512)er, (__m512)(kb - 12582912.0f));
    __mmask16 neg = _mm512_movepi32_mask((__m512i)x); /* sign bits: x < 0, or -0 (e = 1) */
    return (vf32)_mm512_mask_blend_ps(neg, (__m512)one, (__m512)e) / (one + e);
#else
    if (__builtin_expect(exp_any_slow(a), 0)) {
        a = MIN_F32((vf32){0} + 104.0f, a);
        e = exp_reduced_f32(-a, &kb, 0);
        e = exp_scale_slow(e, kb, -a);
    } else {
        e = exp_reduced_f32(-a, &kb, 0);
        e = exp_scale_fast(e, kb);
    }
#if defined(__AVX2__)
    /* blendv takes each lane's sign bit: x < 0, or -0 (where e = 1 anyway) */
    return (vf32)_mm256_blendv_ps((__m256)one, (__m256)e, (__m256)x) / (one + e);
#else
    return select_lt_f32(x, 0.0f, e, one) / (one + e);
#endif
#endif
}

DEFINE_VEC_MAP1(map_sigmoid_f32, float, vf32, sigmoid_vec_f32)
DEFINE_MAP_UNARY(sigmoid_f32, float, map_sigmoid_f32)

/* ---- plain loops: gcc -O3 vectorizes these for the ISA of this compile ---------------------- */

/* `v` is the element read from x; expr is out's value. */
#define DEFINE_UNARY(name, T, TOut, expr)                                                          \
    static void name(int64_t n, void *outv, const void *xv)                                        \
    {                                                                                              \
        TOut *restrict out = outv;                                                                 \
        const T *restrict x = xv;                                                                  \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T v = x[i];                                                                            \
            out[i] = (expr);                                                                       \
        }                                                                                          \
    }

/* `a` and `b` are the elements read; expr is out's value. */
#define DEFINE_BINARY(name, T, TOut, expr)                                                         \
    static void name(int64_t n, void *outv, const void *av, const void *bv)                        \
    {                                                                                              \
        TOut *restrict out = outv;                                                                 \
        const T *restrict pa = av;                                                                 \
        const T *restrict pb = bv;                                                                 \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T a = pa[i], b = pb[i];                                                                \
            out[i] = (expr);                                                                       \
        }                                                                                          \
    }

/* Floating types: suffix, type, and the libm names of that precision. */
#define FLOAT_TYPES(X)                                                                             \
    X(f32, float, fabsf, sqrtf, floorf, ceilf, rintf)                                              \
    X(f64, double, fabs, sqrt, floor, ceil, rint)

/* Integer types: suffix, type, and the unsigned type its arithmetic wraps in. */
#define INT_TYPES(X) X(i32, int32_t, uint32_t) X(i64, int64_t, uint64_t) X(u8, uint8_t, uint32_t)

#define FLOAT_UNARY(sfx, T, FABS, SQRT, FLOOR, CEIL, RINT)                                         \
    DEFINE_UNARY(neg_##sfx, T, T, -v)                                                              \
    DEFINE_UNARY(abs_##sfx, T, T, FABS(v))                                                         \
    DEFINE_UNARY(sqrt_##sfx, T, T, SQRT(v))                                                        \
    /* a true division, not the ~12-bit rsqrt instruction */                                       \
    DEFINE_UNARY(rsqrt_##sfx, T, T, (T)1 / SQRT(v))                                                \
    /* v < 0 is false for NaN, so NaN passes through */                                            \
    DEFINE_UNARY(relu_##sfx, T, T, v < 0 ? (T)0 : v)                                               \
    DEFINE_UNARY(floor_##sfx, T, T, FLOOR(v))                                                      \
    DEFINE_UNARY(ceil_##sfx, T, T, CEIL(v))                                                        \
    /* ties to even in the default rounding mode; rint, unlike nearbyint, inlines on SSE2 */       \
    DEFINE_UNARY(round_##sfx, T, T, RINT(v))                                                       \
    /* NaN and +-0 map to themselves */                                                            \
    DEFINE_UNARY(sign_##sfx, T, T, v > 0 ? (T)1 : v < 0 ? (T)-1 : v)                               \
    DEFINE_UNARY(reciprocal_##sfx, T, T, (T)1 / v)                                                 \
    DEFINE_UNARY(not_##sfx, T, uint8_t, v == 0)                                                    \
    DEFINE_UNARY(trunc_##sfx, T, T, (T)trunc((double)v)) /* exact in double, so exact in T */
FLOAT_TYPES(FLOAT_UNARY)

#define INT_UNARY(sfx, T, U)                                                                       \
    DEFINE_UNARY(neg_##sfx, T, T, (T)(0u - (U)v))                                                  \
    DEFINE_UNARY(abs_##sfx, T, T, v < 0 ? (T)(0u - (U)v) : v)                                      \
    DEFINE_UNARY(relu_##sfx, T, T, v > 0 ? v : 0)                                                  \
    DEFINE_UNARY(sign_##sfx, T, T, (T)((v > 0) - (v < 0)))                                         \
    DEFINE_UNARY(not_##sfx, T, uint8_t, v == 0)
INT_UNARY(i32, int32_t, uint32_t)
INT_UNARY(i64, int64_t, uint64_t)

/* uint8 has no negative values, so abs and relu are the identity. */
DEFINE_UNARY(neg_u8, uint8_t, uint8_t, (uint8_t)(0u - v))
DEFINE_UNARY(abs_u8, uint8_t, uint8_t, v)
DEFINE_UNARY(relu_u8, uint8_t, uint8_t, v)
DEFINE_UNARY(sign_u8, uint8_t, uint8_t, v != 0)
DEFINE_UNARY(not_u8, uint8_t, uint8_t, v == 0)

DEFINE_UNARY(not_bool, uint8_t, uint8_t, v == 0)

/* ---- binary --------------------------------------------------------------------------------- */

/* Python's // and % on floats, as PyTorch computes them: from the exact fmod, the quotient
 * (a - mod) / b is an integer up to its rounding, so it is rounded to the nearest; a zero
 * divisor gives IEEE's a / b (inf, nan) and a NaN remainder. */
#define DEFINE_FLOAT_FLOORDIV(sfx, T, FMOD, FLOOR, COPYSIGN)                                       \
    static inline T py_floordiv_##sfx(T a, T b)                                                    \
    {                                                                                              \
        if (b == 0)                                                                                \
            return a / b;                                                                          \
        T m = FMOD(a, b), d = (a - m) / b;                                                         \
        if (m != 0 && (b < 0) != (m < 0))                                                          \
            d -= 1;                                                                                \
        if (d == 0)                                                                                \
            return COPYSIGN((T)0, a / b);                                                          \
        T f = FLOOR(d);                                                                            \
        return d - f > (T)0.5 ? f + 1 : f;                                                         \
    }                                                                                              \
    static inline T py_mod_##sfx(T a, T b)                                                         \
    {                                                                                              \
        T m = FMOD(a, b);                                                                          \
        return (m != 0 && (b < 0) != (m < 0)) ? m + b : m;                                         \
    }
DEFINE_FLOAT_FLOORDIV(f32, float, fmodf, floorf, copysignf)
DEFINE_FLOAT_FLOORDIV(f64, double, fmod, floor, copysign)

/* Python's // and % on signed integers, through magnitudes in unsigned arithmetic so that
 * INT_MIN // -1 wraps to INT_MIN (and INT_MIN % -1 is 0) instead of trapping. A zero divisor
 * gives 0 for both (NumPy's choice): kernels cannot raise, and the hardware would trap. */
#define DEFINE_INT_FLOORDIV(sfx, T, U)                                                             \
    static inline T py_floordiv_##sfx(T a, T b)                                                    \
    {                                                                                              \
        if (b == 0)                                                                                \
            return 0;                                                                              \
        U ua = a < 0 ? (U)0 - (U)a : (U)a, ub = b < 0 ? (U)0 - (U)b : (U)b, q = ua / ub;           \
        if ((a < 0) == (b < 0))                                                                    \
            return (T)q;                                                                           \
        return (T)((U)0 - q - (q * ub != ua)); /* -q, one less when inexact */                     \
    }                                                                                              \
    static inline T py_mod_##sfx(T a, T b)                                                         \
    {                                                                                              \
        return b == 0 ? 0 : (T)((U)a - (U)py_floordiv_##sfx(a, b) * (U)b);                         \
    }                                                                                              \
    /* C's %: the dividend's sign; INT_MIN % -1 is 0 and a zero divisor gives 0, as above */      \
    static inline T c_fmod_##sfx(T a, T b)                                                         \
    {                                                                                              \
        if (b == 0)                                                                                \
            return 0;                                                                              \
        U ua = a < 0 ? (U)0 - (U)a : (U)a, ub = b < 0 ? (U)0 - (U)b : (U)b, r = ua % ub;           \
        return a < 0 ? (T)((U)0 - r) : (T)r;                                                       \
    }
DEFINE_INT_FLOORDIV(i32, int32_t, uint32_t)
DEFINE_INT_FLOORDIV(i64, int64_t, uint64_t)
static inline uint8_t py_floordiv_u8(uint8_t a, uint8_t b) { return b ? (uint8_t)(a / b) : 0; }
static inline uint8_t py_mod_u8(uint8_t a, uint8_t b) { return b ? (uint8_t)(a % b) : 0; }
static inline uint8_t c_fmod_u8(uint8_t a, uint8_t b) { return b ? (uint8_t)(a % b) : 0; }

/* max/min that return NaN when either side is NaN: a NaN a is kept by the a != a test, a NaN b
 * wins because every comparison with it is false. */
#define FLOAT_BINARY(sfx, T, FABS, SQRT, FLOOR, CEIL, RINT)                                        \
    DEFINE_BINARY(add_##sfx, T, T, a + b)                                                          \
    DEFINE_BINARY(sub_##sfx, T, T, a - b)                                                          \
    DEFINE_BINARY(mul_##sfx, T, T, a * b)                                                          \
    DEFINE_BINARY(div_##sfx, T, T, a / b)                                                          \
    DEFINE_BINARY(maximum_##sfx, T, T, (a > b || a != a) ? a : b)                                  \
    DEFINE_BINARY(minimum_##sfx, T, T, (a < b || a != a) ? a : b)                                  \
    DEFINE_BINARY(floor_divide_##sfx, T, T, py_floordiv_##sfx(a, b))                               \
    DEFINE_BINARY(remainder_##sfx, T, T, py_mod_##sfx(a, b))                                       \
    DEFINE_BINARY(and_##sfx, T, uint8_t, (a != 0) & (b != 0))                                      \
    DEFINE_BINARY(or_##sfx, T, uint8_t, (a != 0) | (b != 0))                                       \
    /* C's fmod (the dividend's sign) is exact; float operands are exact in double */              \
    DEFINE_BINARY(fmod_##sfx, T, T, (T)fmod((double)a, (double)b))
FLOAT_TYPES(FLOAT_BINARY)

#define INT_BINARY(sfx, T, U)                                                                      \
    DEFINE_BINARY(add_##sfx, T, T, (T)((U)a + (U)b))                                               \
    DEFINE_BINARY(sub_##sfx, T, T, (T)((U)a - (U)b))                                               \
    DEFINE_BINARY(mul_##sfx, T, T, (T)((U)a * (U)b))                                               \
    DEFINE_BINARY(maximum_##sfx, T, T, a > b ? a : b)                                              \
    DEFINE_BINARY(minimum_##sfx, T, T, a < b ? a : b)                                              \
    DEFINE_BINARY(floor_divide_##sfx, T, T, py_floordiv_##sfx(a, b))                               \
    DEFINE_BINARY(remainder_##sfx, T, T, py_mod_##sfx(a, b))                                       \
    DEFINE_BINARY(and_##sfx, T, uint8_t, (a != 0) & (b != 0))                                      \
    DEFINE_BINARY(or_##sfx, T, uint8_t, (a != 0) | (b != 0))                                       \
    DEFINE_BINARY(fmod_##sfx, T, T, c_fmod_##sfx(a, b))
INT_TYPES(INT_BINARY)

/* Comparisons for every dtype; bool compares as its truth value, so stray bytes other than
 * 0/1 still give a 0/1 answer. */
#define CMP_TYPES(X)                                                                               \
    X(f32, float, a, b) X(f64, double, a, b) X(i32, int32_t, a, b) X(i64, int64_t, a, b)           \
    X(u8, uint8_t, a, b) X(bool, uint8_t, (a != 0), (b != 0))
#define CMP_BINARY(sfx, T, A, B)                                                                   \
    DEFINE_BINARY(eq_##sfx, T, uint8_t, A == B)                                                    \
    DEFINE_BINARY(ne_##sfx, T, uint8_t, A != B)                                                    \
    DEFINE_BINARY(lt_##sfx, T, uint8_t, A < B)                                                     \
    DEFINE_BINARY(le_##sfx, T, uint8_t, A <= B)                                                    \
    DEFINE_BINARY(gt_##sfx, T, uint8_t, A > B)                                                     \
    DEFINE_BINARY(ge_##sfx, T, uint8_t, A >= B)
CMP_TYPES(CMP_BINARY)

/* Bool arithmetic is logic: add and maximum are or, mul and minimum are and. */
DEFINE_BINARY(or_bool, uint8_t, uint8_t, (a != 0) | (b != 0))
DEFINE_BINARY(and_bool, uint8_t, uint8_t, (a != 0) & (b != 0))

/* ---- integer pow: repeated squaring in wrapping unsigned arithmetic ------------------------ */

static inline uint64_t pow_wrap(uint64_t base, uint64_t e)
{
    uint64_t r = 1;
    while (e) {
        if (e & 1)
            r *= base;
        base *= base;
        e >>= 1;
    }
    return r;
}

/* A negative exponent truncates 1/a^|e| toward zero: 0, except for bases 1 and -1. */
static inline uint64_t pow_signed(int64_t a, int64_t e)
{
    if (e >= 0)
        return pow_wrap((uint64_t)a, (uint64_t)e);
    if (a == 1)
        return 1;
    if (a == -1)
        return (e & 1) ? (uint64_t)-1 : 1;
    return 0;
}

DEFINE_BINARY(pow_i32, int32_t, int32_t, (int32_t)(uint32_t)pow_signed(a, b))
DEFINE_BINARY(pow_i64, int64_t, int64_t, (int64_t)pow_signed(a, b))
DEFINE_BINARY(pow_u8, uint8_t, uint8_t, (uint8_t)pow_wrap(a, b))

/* ---- where: only the element size matters, so bits are copied as unsigned integers --------- */

#define DEFINE_WHERE(name, T)                                                                      \
    static void name(int64_t n, void *outv, const void *cv, const void *av, const void *bv)        \
    {                                                                                              \
        T *restrict out = outv;                                                                    \
        const uint8_t *restrict c = cv;                                                            \
        const T *restrict a = av;                                                                  \
        const T *restrict b = bv;                                                                  \
        for (int64_t i = 0; i < n; i++) {                                                          \
            T x = a[i], y = b[i]; /* both read: a blend, not two masked loads */                   \
            out[i] = c[i] ? x : y;                                                                 \
        }                                                                                          \
    }
DEFINE_WHERE(where_1, uint8_t)
DEFINE_WHERE(where_4, uint32_t)
DEFINE_WHERE(where_8, uint64_t)

/* ---- two float arithmetic ops in one pass (the jit's tiles) ------------------------------- */

/* out = op2(op1(a, b), c), or op2(c, op1(a, b)) when CFIRST: each op rounded on its own, so the
 * result is bitwise the two kernels' in a row (the empty asm keeps the compiler from contracting
 * a multiply and an add into one fused multiply-add), in one pass over the tile instead of two.
 * Lane by lane, every operand is read before out is written, so out may be any of them. */
#define ARITH2_STEP(OP1, OP2, CFIRST, va, vb, vc, r)                                               \
    do {                                                                                           \
        __typeof__(va) t_ = va OP1 vb;                                                             \
        __asm__("" : "+v"(t_));                                                                    \
        r = CFIRST ? vc OP2 t_ : t_ OP2 vc;                                                        \
    } while (0)
#define DEFINE_ARITH2(name, T, V, OP1, OP2, CFIRST)                                                \
    static void name(int64_t n, void *outv, const void *av, const void *bv, const void *cv)        \
    {                                                                                              \
        enum { W = sizeof(V) / sizeof(T) };                                                        \
        T *out = outv;                                                                             \
        const T *a = av, *b = bv, *c = cv;                                                         \
        int64_t i = 0;                                                                             \
        V va, vb, vc, r;                                                                           \
        for (; i + W <= n; i += W) {                                                               \
            memcpy(&va, a + i, sizeof va);                                                         \
            memcpy(&vb, b + i, sizeof vb);                                                         \
            memcpy(&vc, c + i, sizeof vc);                                                         \
            ARITH2_STEP(OP1, OP2, CFIRST, va, vb, vc, r);                                          \
            memcpy(out + i, &r, sizeof r);                                                         \
        }                                                                                          \
        if (i < n) { /* through padded vectors: the same lanes give the same values */            \
            T pa[W] = {0}, pb[W] = {0}, pc[W] = {0};                                               \
            size_t rest = (size_t)(n - i) * sizeof(T);                                             \
            memcpy(pa, a + i, rest);                                                               \
            memcpy(pb, b + i, rest);                                                               \
            memcpy(pc, c + i, rest);                                                               \
            memcpy(&va, pa, sizeof va);                                                            \
            memcpy(&vb, pb, sizeof vb);                                                            \
            memcpy(&vc, pc, sizeof vc);                                                            \
            ARITH2_STEP(OP1, OP2, CFIRST, va, vb, vc, r);                                          \
            memcpy(pa, &r, sizeof r);                                                              \
            memcpy(out + i, pa, rest);                                                             \
        }                                                                                          \
    }

typedef double vf64 __attribute__((vector_size(sizeof(vec_f64))));

#define ARITH2_OP2(sfx, T, V, n1, OP1)                                                             \
    DEFINE_ARITH2(n1##_add_##sfx, T, V, OP1, +, 0) DEFINE_ARITH2(n1##_sub_##sfx, T, V, OP1, -, 0)  \
    DEFINE_ARITH2(n1##_mul_##sfx, T, V, OP1, *, 0) DEFINE_ARITH2(n1##_div_##sfx, T, V, OP1, /, 0)  \
    DEFINE_ARITH2(n1##_radd_##sfx, T, V, OP1, +, 1)                                                \
    DEFINE_ARITH2(n1##_rsub_##sfx, T, V, OP1, -, 1)                                                \
    DEFINE_ARITH2(n1##_rmul_##sfx, T, V, OP1, *, 1)                                                \
    DEFINE_ARITH2(n1##_rdiv_##sfx, T, V, OP1, /, 1)
#define ARITH2_TYPE(sfx, T, V)                                                                     \
    ARITH2_OP2(sfx, T, V, add, +) ARITH2_OP2(sfx, T, V, sub, -) ARITH2_OP2(sfx, T, V, mul, *)      \
    ARITH2_OP2(sfx, T, V, div, /)
ARITH2_TYPE(f32, float, vf32)
ARITH2_TYPE(f64, double, vf64)

/* ---- a float op with one single-value operand (the jit's tiles and rows) ------------------- */

/* out[i] = a[i] OP *b, or *a OP b[i] when AFIRST: the same IEEE operation per lane as the binary
 * kernel over a buffer holding that value n times, so the same bits. */
#define DEFINE_SCALAR_OP(name, T, OP, AFIRST)                                                      \
    static void name(int64_t n, void *outv, const void *av, const void *bv)                        \
    {                                                                                              \
        T *restrict out = outv;                                                                    \
        const T *restrict v = AFIRST ? bv : av;                                                    \
        const T s = *(const T *)(AFIRST ? av : bv);                                                \
        for (int64_t i = 0; i < n; i++)                                                            \
            out[i] = AFIRST ? s OP v[i] : v[i] OP s;                                               \
    }
#define SCALAR_OPS(sfx, T)                                                                         \
    DEFINE_SCALAR_OP(add_s_##sfx, T, +, 0) DEFINE_SCALAR_OP(s_add_##sfx, T, +, 1)                  \
    DEFINE_SCALAR_OP(sub_s_##sfx, T, -, 0) DEFINE_SCALAR_OP(s_sub_##sfx, T, -, 1)                  \
    DEFINE_SCALAR_OP(mul_s_##sfx, T, *, 0) DEFINE_SCALAR_OP(s_mul_##sfx, T, *, 1)                  \
    DEFINE_SCALAR_OP(s_div_##sfx, T, /, 1)
SCALAR_OPS(f32, float)
SCALAR_OPS(f64, double)
DEFINE_SCALAR_OP(div_s_f64, double, /, 0)

#ifdef __FMA__
#if defined(__AVX512F__)
#define FMA_F32(a, b, c) ((vf32)_mm512_fmadd_ps((__m512)(a), (__m512)(b), (__m512)(c)))
#define FNMA_F32(a, b, c) ((vf32)_mm512_fnmadd_ps((__m512)(a), (__m512)(b), (__m512)(c)))
#else
#define FMA_F32(a, b, c) ((vf32)_mm256_fmadd_ps((__m256)(a), (__m256)(b), (__m256)(c)))
#define FNMA_F32(a, b, c) ((vf32)_mm256_fnmadd_ps((__m256)(a), (__m256)(b), (__m256)(c)))
#endif
/* Magnitudes between 2^-60 and 2^60 as float bits: where the division below is exact. */
#define DIV_LO 0x21800000u
#define DIV_HI 0x5d800000u

static inline bool div_safe_lanes(vf32 v)
{
    vu32 off = ((vu32)v & 0x7fffffffu) - DIV_LO; /* wraps to a large value below 2^-60 */
#if defined(__AVX512F__)
    return _mm512_cmpgt_epu32_mask((__m512i)off, _mm512_set1_epi32((int)(DIV_HI - DIV_LO))) == 0;
#else
    __m256i bad = (__m256i)(off > (DIV_HI - DIV_LO));
    return _mm256_testz_si256(bad, bad);
#endif
}

/* x[i] / s for one divisor s as a product with 1/s and one correction (Markstein): q = x r,
 * e = x - q s (exact in an FMA), q + e r. With r the correctly rounded 1/s and q within an
 * ulp of x/s, that sum rounds to the correctly rounded quotient: the divide's bits. It holds
 * while nothing under- or overflows, so it runs where |s| and every |x| of a vector lie in
 * [2^-60, 2^60] (the quotient stays above 2^-120, the remainder above float's smallest
 * subnormal step), and the divide runs elsewhere. Checked against the divide over every
 * mantissa of x for thousands of divisors (offline; tests/test_div_single.c keeps a sweep). Four vector
 * operations and a test against one divide, whose throughput (8 floats per 5 cycles) was a
 * sixth of softmax's fused rows. */
static void div_s_f32(int64_t n, void *outv, const void *av, const void *bv)
{
    float *out = outv;
    const float *x = av;
    const float s = *(const float *)bv;
    enum { W = sizeof(vf32) / sizeof(float) };
    int64_t i = 0;
    float as = fabsf(s);
    if (as >= 0x1p-60f && as <= 0x1p60f) {
        const float r = 1.0f / s;
        const vf32 rv = (vf32){0} + r, sv = (vf32){0} + s;
        for (; i + W <= n; i += W) {
            vf32 v, q;
            memcpy(&v, x + i, sizeof v);
            if (div_safe_lanes(v)) {
                q = v * rv;
                q = FMA_F32(FNMA_F32(q, sv, v), rv, q);
            } else {
                q = v / sv;
            }
            memcpy(out + i, &q, sizeof q);
        }
    }
    for (; i < n; i++)
        out[i] = x[i] / s;
}
#else
DEFINE_SCALAR_OP(div_s_f32, float, /, 0)
#endif

/* exp(a[i] - *b), the jit's fused pair for softmax's exp(x - max): the difference is rounded
 * as the sub kernel rounds it, then goes through the exp kernel's vector code (the tail padded
 * with zeros, as map_exp_f32 pads the stored difference), so the bits are the two kernels'.
 * One pass instead of two over a row: the store and reload of the difference were a tenth of
 * softmax's fused rows at AVX2. */
static void sub_s_exp_f32(int64_t n, void *outv, const void *av, const void *bv)
{
    float *out = outv;
    const float *x = av;
    const float s = *(const float *)bv;
    enum { W = sizeof(vf32) / sizeof(float) };
    const vf32 sv = (vf32){0} + s;
    int64_t i = 0;
    for (; i + W <= n; i += W) {
        vf32 v;
        memcpy(&v, x + i, sizeof v);
        v = exp_vec_f32(v - sv);
        memcpy(out + i, &v, sizeof v);
    }
    if (i < n) {
        float pad[W] = {0};
        for (int64_t j = i; j < n; j++)
            pad[j - i] = x[j] - s;
        map_exp_f32(W, pad, pad);
        memcpy(out + i, pad, (size_t)(n - i) * sizeof(float));
    }
}

/* ---- the table ------------------------------------------------------------------------------ */

#define U(op, dt, fn) [TIDE_OP_##op - TIDE_OP_FIRST_UNARY][TIDE_##dt] = fn
#define B(op, dt, fn) [TIDE_OP_##op - TIDE_OP_FIRST_BINARY][TIDE_##dt] = fn
#define U_FLOAT(op, name) U(op, FLOAT32, name##_f32), U(op, FLOAT64, name##_f64)
#define U_NUMERIC(op, name)                                                                        \
    U_FLOAT(op, name), U(op, INT32, name##_i32), U(op, INT64, name##_i64), U(op, UINT8, name##_u8)
#define B_FLOAT(op, name) B(op, FLOAT32, name##_f32), B(op, FLOAT64, name##_f64)
#define B_NUMERIC(op, name)                                                                        \
    B_FLOAT(op, name), B(op, INT32, name##_i32), B(op, INT64, name##_i64), B(op, UINT8, name##_u8)
#define B_ALL(op, name) B_NUMERIC(op, name), B(op, BOOL, name##_bool)

const td_ew_kernels TD_ISA_FN(td_ew_kernels) = {
    .unary = {
        U_NUMERIC(NEG, neg), U_NUMERIC(ABS, abs), U_FLOAT(EXP, exp), U_FLOAT(LOG, log),
        U_FLOAT(SQRT, sqrt), U_FLOAT(RSQRT, rsqrt), U_FLOAT(SIN, sin), U_FLOAT(COS, cos),
        U_FLOAT(TANH, tanh), U_FLOAT(SIGMOID, sigmoid), U_NUMERIC(RELU, relu),
        U_FLOAT(FLOOR, floor), U_FLOAT(CEIL, ceil), U_FLOAT(ROUND, round),
        U_NUMERIC(SIGN, sign), U_FLOAT(RECIPROCAL, reciprocal), U_NUMERIC(LOGICAL_NOT, not),
        U(LOGICAL_NOT, BOOL, not_bool), U_FLOAT(ERF, erf),
        U_FLOAT(LOG1P, log1p), U_FLOAT(EXPM1, expm1), U_FLOAT(LOG2, log2), U_FLOAT(TAN, tan),
        U_FLOAT(ASIN, asin), U_FLOAT(ACOS, acos), U_FLOAT(ATAN, atan), U_FLOAT(SINH, sinh),
        U_FLOAT(COSH, cosh), U_FLOAT(TRUNC, trunc), U_FLOAT(GELU, gelu),
    },
    .binary = {
        B_NUMERIC(ADD, add), B(ADD, BOOL, or_bool),
        B_NUMERIC(SUB, sub),
        B_NUMERIC(MUL, mul), B(MUL, BOOL, and_bool),
        B_FLOAT(DIV, div),
        B_NUMERIC(POW, pow),
        B_NUMERIC(MAXIMUM, maximum), B(MAXIMUM, BOOL, or_bool),
        B_NUMERIC(MINIMUM, minimum), B(MINIMUM, BOOL, and_bool),
        B_NUMERIC(FLOOR_DIVIDE, floor_divide), B_NUMERIC(REMAINDER, remainder),
        B_ALL(EQ, eq), B_ALL(NE, ne), B_ALL(LT, lt), B_ALL(LE, le), B_ALL(GT, gt), B_ALL(GE, ge),
        B_NUMERIC(LOGICAL_AND, and), B(LOGICAL_AND, BOOL, and_bool),
        B_NUMERIC(LOGICAL_OR, or), B(LOGICAL_OR, BOOL, or_bool),
        B_FLOAT(ATAN2, atan2), B_NUMERIC(FMOD, fmod),
    },
    .where = {[0] = where_1, [2] = where_4, [3] = where_8},
    .arith2 = {
#define A2_ROW(n1, sfx)                                                                            \
    {{n1##_add_##sfx, n1##_radd_##sfx}, {n1##_sub_##sfx, n1##_rsub_##sfx},                        \
     {n1##_mul_##sfx, n1##_rmul_##sfx}, {n1##_div_##sfx, n1##_rdiv_##sfx}}
#define A2_TYPE(sfx) {A2_ROW(add, sfx), A2_ROW(sub, sfx), A2_ROW(mul, sfx), A2_ROW(div, sfx)}
        A2_TYPE(f32), A2_TYPE(f64),
#undef A2_TYPE
#undef A2_ROW
    },
    .scalar = {
#define S_TYPE(sfx)                                                                                \
    {{add_s_##sfx, s_add_##sfx}, {sub_s_##sfx, s_sub_##sfx}, {mul_s_##sfx, s_mul_##sfx},          \
     {div_s_##sfx, s_div_##sfx}}
        S_TYPE(f32), S_TYPE(f64),
#undef S_TYPE
    },
    .sub_s_exp_f32 = sub_s_exp_f32,
};
