/*
 * cpu_pool_isa.c — the row loop of 2x2, stride-2 max pooling (cpu_pool.c), the pool of conv
 * nets and most of their pooling time, at this tier's vector width.
 *
 * out[i] = max of r0[2i], r0[2i+1], r1[2i], r1[2i+1] by cpu_pool.c's rule: x > y ? x : y
 * pairwise (the max instructions are exactly that), and NaN (the sum of the four) when any of
 * them is NaN. Compiled three times (cpu_isa.h): SSE2 takes 4 outputs a step, AVX2 8 and then
 * 4, AVX-512 16, 8 and 4 (a conv net's small planes have rows of 8); the last 0-3 go through
 * cpu_pool.c's scalar loop, which gives the same values.
 */
#include <stdint.h>

#include <immintrin.h>

#include "cpu_isa.h"
#include "cpu_kernels.h"

#ifndef TD_ISA
#error "cpu_pool_isa.c is compiled with TD_ISA set (see CMakeLists.txt)"
#endif

/* Each step writes `width` outputs from 2 * width elements of each row. */
static inline void step4(const float *r0, const float *r1, float *out)
{
    __m128 x0 = _mm_loadu_ps(r0), x1 = _mm_loadu_ps(r0 + 4);
    __m128 y0 = _mm_loadu_ps(r1), y1 = _mm_loadu_ps(r1 + 4);
    __m128 a = _mm_shuffle_ps(x0, x1, _MM_SHUFFLE(2, 0, 2, 0));
    __m128 b = _mm_shuffle_ps(x0, x1, _MM_SHUFFLE(3, 1, 3, 1));
    __m128 e = _mm_shuffle_ps(y0, y1, _MM_SHUFFLE(2, 0, 2, 0));
    __m128 f = _mm_shuffle_ps(y0, y1, _MM_SHUFFLE(3, 1, 3, 1));
    __m128 m = _mm_max_ps(_mm_max_ps(e, f), _mm_max_ps(a, b));
    __m128 nan = _mm_or_ps(_mm_cmpunord_ps(a, b), _mm_cmpunord_ps(e, f));
    __m128 sum = _mm_add_ps(_mm_add_ps(_mm_add_ps(a, b), e), f);
    _mm_storeu_ps(out, _mm_or_ps(_mm_and_ps(nan, sum), _mm_andnot_ps(nan, m)));
}

#if defined(__AVX2__)
static inline void step8(const float *r0, const float *r1, float *out)
{
    /* shuffle_ps works within 128-bit lanes: the even/odd picks come out in the order
     * 0 1 4 5 | 2 3 6 7 for all four alike, and one permute of the result puts it right */
    __m256 x0 = _mm256_loadu_ps(r0), x1 = _mm256_loadu_ps(r0 + 8);
    __m256 y0 = _mm256_loadu_ps(r1), y1 = _mm256_loadu_ps(r1 + 8);
    __m256 a = _mm256_shuffle_ps(x0, x1, _MM_SHUFFLE(2, 0, 2, 0));
    __m256 b = _mm256_shuffle_ps(x0, x1, _MM_SHUFFLE(3, 1, 3, 1));
    __m256 e = _mm256_shuffle_ps(y0, y1, _MM_SHUFFLE(2, 0, 2, 0));
    __m256 f = _mm256_shuffle_ps(y0, y1, _MM_SHUFFLE(3, 1, 3, 1));
    __m256 m = _mm256_max_ps(_mm256_max_ps(e, f), _mm256_max_ps(a, b));
    __m256 nan = _mm256_or_ps(_mm256_cmp_ps(a, b, _CMP_UNORD_Q), _mm256_cmp_ps(e, f, _CMP_UNORD_Q));
    __m256 sum = _mm256_add_ps(_mm256_add_ps(_mm256_add_ps(a, b), e), f);
    __m256 r = _mm256_blendv_ps(m, sum, nan);
    _mm256_storeu_ps(out, _mm256_castpd_ps(_mm256_permute4x64_pd(_mm256_castps_pd(r), 0xD8)));
}
#endif

#if defined(__AVX512F__)
/* Even and odd elements of the 32 at p. */
static inline void deinterleave(const float *p, __m512 *even, __m512 *odd)
{
    const __m512i ei = _mm512_setr_epi32(0, 2, 4, 6, 8, 10, 12, 14, 16, 18, 20, 22, 24, 26, 28, 30);
    const __m512i oi = _mm512_setr_epi32(1, 3, 5, 7, 9, 11, 13, 15, 17, 19, 21, 23, 25, 27, 29, 31);
    __m512 x0 = _mm512_loadu_ps(p), x1 = _mm512_loadu_ps(p + 16);
    *even = _mm512_permutex2var_ps(x0, ei, x1);
    *odd = _mm512_permutex2var_ps(x0, oi, x1);
}

static inline void step16(const float *r0, const float *r1, float *out)
{
    __m512 a, b, e, f;
    deinterleave(r0, &a, &b);
    deinterleave(r1, &e, &f);
    __m512 m = _mm512_max_ps(_mm512_max_ps(e, f), _mm512_max_ps(a, b));
    __mmask16 nan = _mm512_cmp_ps_mask(a, b, _CMP_UNORD_Q) | _mm512_cmp_ps_mask(e, f, _CMP_UNORD_Q);
    __m512 sum = _mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a, b), e), f);
    _mm512_storeu_ps(out, _mm512_mask_blend_ps(nan, m, sum));
}
#endif

/* Outputs 0 .. n - 1 of rows 0 .. nrows - 1 (input rows 2r and 2r + 1 at x + 2r*s2 and s2
 * after; output row r at out + r*ow) in the widest steps that fit, down to 4; returns how many
 * of each row were written. */
int64_t TD_ISA_FN(td_max2x2_rows_f32)(const float *x, int64_t s2, float *out, int64_t ow,
                                      int64_t n, int64_t nrows)
{
    int64_t done = 0;
    for (int64_t r = 0; r < nrows; r++) {
        const float *r0 = x + 2 * r * s2, *r1 = r0 + s2;
        float *o = out + r * ow;
        int64_t i = 0;
#if defined(__AVX512F__)
        for (; i + 16 <= n; i += 16)
            step16(r0 + 2 * i, r1 + 2 * i, o + i);
#endif
#if defined(__AVX2__)
        for (; i + 8 <= n; i += 8)
            step8(r0 + 2 * i, r1 + 2 * i, o + i);
#endif
        for (; i + 4 <= n; i += 4)
            step4(r0 + 2 * i, r1 + 2 * i, o + i);
        done = i;
    }
    return done;
}
