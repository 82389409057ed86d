/*
 * cpu_linear_half_isa.c — the kernels of cpu_linear_half.h, compiled once per tier (cpu_isa.h).
 * avx2 (and avx512, which runs the same 256-bit code: the product is bound by memory, not by
 * arithmetic): F16C's vcvtph2ps widens 8 float16 at once, bfloat16 is zero-extended to 32 bits
 * and shifted left 16 (exactly its float32 value), then FMA into two accumulators per row of a
 * 4-row tile (8 independent chains). baseline: the same tiles in plain C with 8 lanes that gcc
 * vectorizes with SSE2 (separate multiply and add: x86-64's baseline has no FMA).
 * Widening is exact in both, so only the summation order differs from sgemm on a widened copy.
 */
#include <immintrin.h>
#include <stdint.h>
#include <string.h>

#include "../../core/half.h"
#include "cpu_isa.h"
#include "cpu_linear_half.h"

#ifndef TD_ISA
#error "cpu_linear_half_isa.c is compiled with TD_ISA set (see CMakeLists.txt)"
#endif

enum { W_F16, W_BF16, W_F32 };

/* One weight as float32, exactly (a bfloat16 is the top half of its float32). */
static inline float widen1(const void *w, int64_t i, int kind)
{
    if (kind == W_F32)
        return ((const float *)w)[i];
    uint16_t h = ((const uint16_t *)w)[i];
    if (kind == W_F16)
        return td_f16_to_f32(h);
    uint32_t bits = (uint32_t)h << 16;
    float f;
    memcpy(&f, &bits, sizeof f);
    return f;
}

static inline const char *row_at(const void *w, int64_t j, int64_t ldw, int kind)
{
    return (const char *)w + j * ldw * (kind == W_F32 ? 4 : 2);
}

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

static inline __attribute__((always_inline)) __m256 widen8(const char *w, int64_t i, int kind)
{
    if (kind == W_F32)
        return _mm256_loadu_ps((const float *)w + i);
    __m128i h = _mm_loadu_si128((const __m128i *)((const uint16_t *)w + i));
    if (kind == W_F16)
        return _mm256_cvtph_ps(h);
    return _mm256_castsi256_ps(_mm256_slli_epi32(_mm256_cvtepu16_epi32(h), 16));
}

/* The four row sums of a tile: lane sums of a0..a3 in one vector. */
static inline __m128 hsum4(__m256 a0, __m256 a1, __m256 a2, __m256 a3)
{
    __m256 t = _mm256_hadd_ps(_mm256_hadd_ps(a0, a1), _mm256_hadd_ps(a2, a3));
    return _mm_add_ps(_mm256_castps256_ps128(t), _mm256_extractf128_ps(t, 1));
}

/* y[0..R) = x . w rows r (R = 4 or 1; unused rows alias row 0 and are not stored). ahead:
 * bytes from a row to the same place 16 rows on (4 tiles), prefetched as this tile is read: a
 * tile's rows are short streams (1.5 KB for a bfloat16 row of 768) that the hardware prefetcher
 * hardly learns before they end. Without it one thread read bfloat16 weights from DRAM no
 * faster per weight than sgemv read float32 ones; 4 tiles ahead beat 1 (and 8 into L2 did no
 * better) in bench_linear_half gemv. */
static inline __attribute__((always_inline)) void
tile(int R, int64_t k, const float *x, const char *const *w, float *y, int kind, int64_t ahead)
{
    __m256 a[4], b[4];
    for (int r = 0; r < 4; r++)
        a[r] = b[r] = _mm256_setzero_ps();
    int64_t i = 0, es = kind == W_F32 ? 4 : 2;
    for (; i + 16 <= k; i += 16) {
        __m256 x0 = _mm256_loadu_ps(x + i), x1 = _mm256_loadu_ps(x + i + 8);
        for (int r = 0; r < R; r++) /* one line per row per iteration at least (16 * es >= 32) */
            _mm_prefetch(w[r] + ahead + i * es, _MM_HINT_T0);
        for (int r = 0; r < R; r++) {
            a[r] = _mm256_fmadd_ps(x0, widen8(w[r], i, kind), a[r]);
            b[r] = _mm256_fmadd_ps(x1, widen8(w[r], i + 8, kind), b[r]);
        }
    }
    if (i + 8 <= k) {
        __m256 x0 = _mm256_loadu_ps(x + i);
        for (int r = 0; r < R; r++)
            a[r] = _mm256_fmadd_ps(x0, widen8(w[r], i, kind), a[r]);
        i += 8;
    }
    for (int r = 0; r < R; r++)
        a[r] = _mm256_add_ps(a[r], b[r]);
    float s[4];
    _mm_storeu_ps(s, hsum4(a[0], a[1], a[2], a[3]));
    for (int r = 0; r < R; r++) {
        for (int64_t t = i; t < k; t++)
            s[r] += x[t] * widen1(w[r], t, kind);
        y[r] = s[r];
    }
}

#else

/* The same tile in plain C: 8 lanes a row, folded pairwise, then the tail. */
static inline __attribute__((always_inline)) void
tile(int R, int64_t k, const float *x, const char *const *w, float *y, int kind, int64_t ahead)
{
    (void)ahead;
    for (int r = 0; r < R; r++) {
        float lane[8] = {0};
        int64_t i = 0;
        for (; i + 8 <= k; i += 8)
            for (int l = 0; l < 8; l++)
                lane[l] += x[i + l] * widen1(w[r], i + l, kind);
        float s = ((lane[0] + lane[1]) + (lane[2] + lane[3])) +
                  ((lane[4] + lane[5]) + (lane[6] + lane[7]));
        for (; i < k; i++)
            s += x[i] * widen1(w[r], i, kind);
        y[r] = s;
    }
}

#endif

/* Tiles of 4 weight rows; each tile meets every row of x while it is in L1. */
static inline __attribute__((always_inline)) void
rows(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx, const void *w, int64_t ldw,
     float *y, int64_t ldy, int kind)
{
    int64_t j = 0, ahead = 16 * ldw * (kind == W_F32 ? 4 : 2);
    for (; j + 4 <= n; j += 4) {
        const char *wr[4] = {row_at(w, j, ldw, kind), row_at(w, j + 1, ldw, kind),
                             row_at(w, j + 2, ldw, kind), row_at(w, j + 3, ldw, kind)};
        for (int64_t i = 0; i < m; i++)
            tile(4, k, x + i * ldx, wr, y + i * ldy + j, kind, i == 0 ? ahead : 0);
    }
    for (; j < n; j++) {
        const char *wr[4] = {row_at(w, j, ldw, kind), NULL, NULL, NULL};
        wr[1] = wr[2] = wr[3] = wr[0];
        for (int64_t i = 0; i < m; i++)
            tile(1, k, x + i * ldx, wr, y + i * ldy + j, kind, ldw * (kind == W_F32 ? 4 : 2));
    }
}

static void rows_f16(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx, const void *w,
                     int64_t ldw, float *y, int64_t ldy)
{
    rows(m, n, k, x, ldx, w, ldw, y, ldy, W_F16);
}

static void rows_bf16(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx,
                      const void *w, int64_t ldw, float *y, int64_t ldy)
{
    rows(m, n, k, x, ldx, w, ldw, y, ldy, W_BF16);
}

static void rows_f32(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx, const void *w,
                     int64_t ldw, float *y, int64_t ldy)
{
    rows(m, n, k, x, ldx, w, ldw, y, ldy, W_F32);
}

const td_lh_kernels TD_ISA_FN(td_lh_kernels) = {rows_f16, rows_bf16, rows_f32};
