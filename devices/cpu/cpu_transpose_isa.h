/*
 * cpu_transpose_isa.h — square blocks of floats transposed in registers, for the *_isa.c files
 * that pack operands (cpu_conv_direct_isa.c's weights, cpu_conv_wgrad_isa.c's gradient).
 * Included after <immintrin.h>; the 8x8 block needs AVX.
 */
#ifndef TIDE_CPU_TRANSPOSE_ISA_H
#define TIDE_CPU_TRANSPOSE_ISA_H

#include <stdint.h>

#if defined(__AVX__)
/* dst[i*ld + m] = r[m][k + i] for i, m < 8 */
static inline void td_transpose8(const float *const *r, int64_t k, float *dst, int64_t ld)
{
    __m256 a[8], t[8], u[8];
    for (int m = 0; m < 8; m++)
        a[m] = _mm256_loadu_ps(r[m] + k);
    for (int m = 0; m < 8; m += 2) {
        t[m] = _mm256_unpacklo_ps(a[m], a[m + 1]);
        t[m + 1] = _mm256_unpackhi_ps(a[m], a[m + 1]);
    }
    for (int h = 0; h < 8; h += 4) {
        u[h] = _mm256_shuffle_ps(t[h], t[h + 2], 0x44);
        u[h + 1] = _mm256_shuffle_ps(t[h], t[h + 2], 0xEE);
        u[h + 2] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0x44);
        u[h + 3] = _mm256_shuffle_ps(t[h + 1], t[h + 3], 0xEE);
    }
    for (int i = 0; i < 4; i++) {
        _mm256_storeu_ps(dst + i * ld, _mm256_permute2f128_ps(u[i], u[i + 4], 0x20));
        _mm256_storeu_ps(dst + (i + 4) * ld, _mm256_permute2f128_ps(u[i], u[i + 4], 0x31));
    }
}
#endif

/* dst[i*ld + m] = r[m][k + i] for i, m < 4 */
static inline void td_transpose4(const float *const *r, int64_t k, float *dst, int64_t ld)
{
    __m128 a0 = _mm_loadu_ps(r[0] + k), a1 = _mm_loadu_ps(r[1] + k);
    __m128 a2 = _mm_loadu_ps(r[2] + k), a3 = _mm_loadu_ps(r[3] + k);
    _MM_TRANSPOSE4_PS(a0, a1, a2, a3);
    _mm_storeu_ps(dst, a0);
    _mm_storeu_ps(dst + ld, a1);
    _mm_storeu_ps(dst + 2 * ld, a2);
    _mm_storeu_ps(dst + 3 * ld, a3);
}

#endif
