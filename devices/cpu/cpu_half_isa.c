/*
 * cpu_half_isa.c — contiguous float32 <-> float16 / bfloat16 conversions (cpu_half.h), compiled
 * once per tier (cpu_isa.h). avx2: F16C for float16, 256-bit integer ops for bfloat16; avx512:
 * the 512-bit forms of both; baseline: SSE2 for float16, core/half.h's scalar code (which
 * defines the bits, and gcc vectorizes) for bfloat16.
 * The vector paths compute exactly what core/half.h does (F16C's rounding and NaN rule are the
 * ones half.h copies; bfloat16's rounding is the same integer arithmetic, lane by lane), and
 * tails shorter than a vector go through core/half.h.
 */
#include <immintrin.h>
#include <stdint.h>

#include "../../core/half.h"
#include "cpu_half.h"
#include "cpu_isa.h"

#ifndef TD_ISA
#error "cpu_half_isa.c is compiled with TD_ISA set (see CMakeLists.txt)"
#endif

/* ---- scalar: the tails, and the whole baseline tier ---------------------------------------- */

static void f16_to_f32_from(int64_t i, int64_t n, float *restrict d, const uint16_t *restrict s)
{
    for (; i < n; i++)
        d[i] = td_f16_to_f32(s[i]);
}

static void f32_to_f16_from(int64_t i, int64_t n, uint16_t *restrict d, const float *restrict s)
{
    for (; i < n; i++)
        d[i] = td_f32_to_f16(s[i]);
}

static void bf16_to_f32_from(int64_t i, int64_t n, float *restrict d, const uint16_t *restrict s)
{
    for (; i < n; i++)
        d[i] = td_bf16_to_f32(s[i]);
}

static void f32_to_bf16_from(int64_t i, int64_t n, uint16_t *restrict d, const float *restrict s)
{
    for (; i < n; i++)
        d[i] = td_f32_to_bf16(s[i]);
}

#if defined(__AVX512F__)

static void f16_to_f32(int64_t n, float *restrict d, const uint16_t *restrict s)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm512_storeu_ps(d + i, _mm512_cvtph_ps(_mm256_loadu_si256((const __m256i *)(s + i))));
    f16_to_f32_from(i, n, d, s);
}

static void f32_to_f16(int64_t n, uint16_t *restrict d, const float *restrict s)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16)
        _mm256_storeu_si256((__m256i *)(d + i),
                            _mm512_cvtps_ph(_mm512_loadu_ps(s + i),
                                            _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    f32_to_f16_from(i, n, d, s);
}

static void bf16_to_f32(int64_t n, float *restrict d, const uint16_t *restrict s)
{
    const __m512i abs = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    const __m512i quiet = _mm512_set1_epi32(0x400000);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i x = _mm512_cvtepu16_epi32(_mm256_loadu_si256((const __m256i *)(s + i)));
        x = _mm512_slli_epi32(x, 16);
        __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(x, abs), inf);
        x = _mm512_mask_or_epi32(x, nan, x, quiet);
        _mm512_storeu_si512(d + i, x);
    }
    bf16_to_f32_from(i, n, d, s);
}

static void f32_to_bf16(int64_t n, uint16_t *restrict d, const float *restrict s)
{
    const __m512i abs = _mm512_set1_epi32(0x7fffffff), inf = _mm512_set1_epi32(0x7f800000);
    const __m512i bias = _mm512_set1_epi32(0x7fff), one = _mm512_set1_epi32(1);
    const __m512i quiet = _mm512_set1_epi32(0x40);
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m512i x = _mm512_loadu_si512(s + i), hi = _mm512_srli_epi32(x, 16);
        __mmask16 nan = _mm512_cmpgt_epi32_mask(_mm512_and_si512(x, abs), inf);
        __m512i up = _mm512_add_epi32(_mm512_add_epi32(x, bias), _mm512_and_si512(hi, one));
        __m512i r = _mm512_srli_epi32(up, 16);
        r = _mm512_mask_or_epi32(r, nan, hi, quiet);
        _mm256_storeu_si256((__m256i *)(d + i), _mm512_cvtepi32_epi16(r));
    }
    f32_to_bf16_from(i, n, d, s);
}

#elif defined(__AVX2__)

static void f16_to_f32(int64_t n, float *restrict d, const uint16_t *restrict s)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm256_storeu_ps(d + i, _mm256_cvtph_ps(_mm_loadu_si128((const __m128i *)(s + i))));
    f16_to_f32_from(i, n, d, s);
}

static void f32_to_f16(int64_t n, uint16_t *restrict d, const float *restrict s)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        _mm_storeu_si128((__m128i *)(d + i),
                         _mm256_cvtps_ph(_mm256_loadu_ps(s + i),
                                         _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC));
    f32_to_f16_from(i, n, d, s);
}

static void bf16_to_f32(int64_t n, float *restrict d, const uint16_t *restrict s)
{
    const __m256i abs = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    const __m256i quiet = _mm256_set1_epi32(0x400000);
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m256i x = _mm256_cvtepu16_epi32(_mm_loadu_si128((const __m128i *)(s + i)));
        x = _mm256_slli_epi32(x, 16);
        __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs), inf);
        x = _mm256_or_si256(x, _mm256_and_si256(nan, quiet));
        _mm256_storeu_si256((__m256i *)(d + i), x);
    }
    bf16_to_f32_from(i, n, d, s);
}

/* Eight float32 lanes to their bfloat16 bits, one per 32-bit lane (core/half.h's arithmetic). */
static inline __m256i bf16_lanes(__m256i x)
{
    const __m256i abs = _mm256_set1_epi32(0x7fffffff), inf = _mm256_set1_epi32(0x7f800000);
    __m256i hi = _mm256_srli_epi32(x, 16);
    __m256i nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, abs), inf);
    __m256i up = _mm256_add_epi32(_mm256_add_epi32(x, _mm256_set1_epi32(0x7fff)),
                                  _mm256_and_si256(hi, _mm256_set1_epi32(1)));
    __m256i nan_bits = _mm256_or_si256(hi, _mm256_set1_epi32(0x40));
    return _mm256_blendv_epi8(_mm256_srli_epi32(up, 16), nan_bits, nan);
}

static void f32_to_bf16(int64_t n, uint16_t *restrict d, const float *restrict s)
{
    int64_t i = 0;
    for (; i + 16 <= n; i += 16) {
        __m256i a = bf16_lanes(_mm256_loadu_si256((const __m256i *)(s + i)));
        __m256i b = bf16_lanes(_mm256_loadu_si256((const __m256i *)(s + i + 8)));
        /* every lane is 0..0xffff, so the unsigned saturating pack is exact; it packs within
         * 128-bit halves, and the permute puts a's and b's halves back in order */
        __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(a, b), 0xd8);
        _mm256_storeu_si256((__m256i *)(d + i), packed);
    }
    f32_to_bf16_from(i, n, d, s);
}

#else /* baseline: SSE2 for float16 (integer ops and one exact float step), and the scalar
       * definition for bfloat16, which gcc vectorizes with SSE2 */

/* Four float16 patterns (one per 32-bit lane) to float32: the exponent rebiased by integer
 * adds; a zero or subnormal as 2^-14 * (1 + f/1024) - 2^-14, exact in float32; NaN made quiet. */
static inline __m128i f16_lanes_to_f32(__m128i h)
{
    const __m128i exp_mask = _mm_set1_epi32(0x0f800000);
    __m128i sign = _mm_slli_epi32(_mm_and_si128(h, _mm_set1_epi32(0x8000)), 16);
    __m128i mag = _mm_and_si128(h, _mm_set1_epi32(0x7fff));
    __m128i em = _mm_add_epi32(_mm_slli_epi32(mag, 13), _mm_set1_epi32(112 << 23));
    __m128i exponent = _mm_and_si128(_mm_slli_epi32(mag, 13), exp_mask);
    __m128i special = _mm_cmpeq_epi32(exponent, exp_mask), tiny = _mm_cmpeq_epi32(exponent, _mm_setzero_si128());
    em = _mm_add_epi32(em, _mm_and_si128(special, _mm_set1_epi32(112 << 23)));
    __m128 sub = _mm_sub_ps(_mm_castsi128_ps(_mm_add_epi32(em, _mm_set1_epi32(1 << 23))),
                            _mm_castsi128_ps(_mm_set1_epi32(113 << 23)));
    em = _mm_or_si128(_mm_andnot_si128(tiny, em), _mm_and_si128(tiny, _mm_castps_si128(sub)));
    __m128i nan = _mm_cmpgt_epi32(mag, _mm_set1_epi32(0x7c00));
    em = _mm_or_si128(em, _mm_and_si128(nan, _mm_set1_epi32(0x400000)));
    return _mm_or_si128(em, sign);
}

static void f16_to_f32(int64_t n, float *restrict d, const uint16_t *restrict s)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i h = _mm_loadu_si128((const __m128i *)(s + i));
        __m128i lo = _mm_unpacklo_epi16(h, _mm_setzero_si128());
        __m128i hi = _mm_unpackhi_epi16(h, _mm_setzero_si128());
        _mm_storeu_si128((__m128i *)(d + i), f16_lanes_to_f32(lo));
        _mm_storeu_si128((__m128i *)(d + i + 4), f16_lanes_to_f32(hi));
    }
    f16_to_f32_from(i, n, d, s);
}

/* Four float32 lanes to float16 patterns (one per 32-bit lane), as core/half.h rounds: normal
 * results by integer round-to-nearest-even on the low 13 bits; below 2^-14 by adding 0.5 in
 * float32, whose rounding (nearest even, the default mode tide never changes) leaves the
 * result in units of 2^-24 in the low bits; NaN keeps its top payload bits, made quiet. */
static inline __m128i f32_lanes_to_f16(__m128i x)
{
    __m128i sign = _mm_srli_epi32(_mm_and_si128(x, _mm_set1_epi32((int)0x80000000u)), 16);
    __m128i ax = _mm_and_si128(x, _mm_set1_epi32(0x7fffffff));
    __m128i odd = _mm_and_si128(_mm_srli_epi32(ax, 13), _mm_set1_epi32(1));
    __m128i normal = _mm_add_epi32(ax, _mm_set1_epi32((int)(0xc8000000u + 0xfff)));
    normal = _mm_srli_epi32(_mm_add_epi32(normal, odd), 13); /* (ax - 112 << 23 + ...) >> 13 */
    __m128 half = _mm_castsi128_ps(_mm_set1_epi32(126 << 23));
    __m128i sub = _mm_sub_epi32(_mm_castps_si128(_mm_add_ps(_mm_castsi128_ps(ax), half)),
                                _mm_set1_epi32(126 << 23));
    __m128i is_sub = _mm_cmplt_epi32(ax, _mm_set1_epi32(113 << 23));
    __m128i r = _mm_or_si128(_mm_and_si128(is_sub, sub), _mm_andnot_si128(is_sub, normal));
    __m128i big = _mm_cmpgt_epi32(ax, _mm_set1_epi32(0x477fefff)); /* 65520 and above */
    __m128i nan = _mm_cmpgt_epi32(ax, _mm_set1_epi32(0x7f800000));
    __m128i nan_bits = _mm_or_si128(_mm_set1_epi32(0x7e00),
                                    _mm_and_si128(_mm_srli_epi32(ax, 13), _mm_set1_epi32(0x3ff)));
    __m128i special = _mm_or_si128(_mm_and_si128(nan, nan_bits),
                                   _mm_andnot_si128(nan, _mm_set1_epi32(0x7c00)));
    r = _mm_or_si128(_mm_and_si128(big, special), _mm_andnot_si128(big, r));
    r = _mm_or_si128(r, sign);
    return _mm_srai_epi32(_mm_slli_epi32(r, 16), 16); /* sign-extended: packs is then exact */
}

static void f32_to_f16(int64_t n, uint16_t *restrict d, const float *restrict s)
{
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        __m128i a = f32_lanes_to_f16(_mm_loadu_si128((const __m128i *)(s + i)));
        __m128i b = f32_lanes_to_f16(_mm_loadu_si128((const __m128i *)(s + i + 4)));
        _mm_storeu_si128((__m128i *)(d + i), _mm_packs_epi32(a, b));
    }
    f32_to_f16_from(i, n, d, s);
}

static void bf16_to_f32(int64_t n, float *restrict d, const uint16_t *restrict s)
{
    bf16_to_f32_from(0, n, d, s);
}

static void f32_to_bf16(int64_t n, uint16_t *restrict d, const float *restrict s)
{
    f32_to_bf16_from(0, n, d, s);
}

#endif

const td_half_kernels TD_ISA_FN(td_half_kernels) = {
    .f16_to_f32 = f16_to_f32,
    .f32_to_f16 = f32_to_f16,
    .bf16_to_f32 = bf16_to_f32,
    .f32_to_bf16 = f32_to_bf16,
};
