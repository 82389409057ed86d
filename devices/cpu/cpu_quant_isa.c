/*
 * cpu_quant_isa.c — quantized dot products (cpu_quant.h), compiled once per tier (cpu_isa.h).
 * baseline: core/quant.h's scalar code, blocks' terms added in order. avx2: 32 int8 products
 * of a block in one maddubs (the sign trick: |w| as the unsigned operand, x with w's sign as
 * the signed one; |w| <= 128 and |x| <= 127 keep every pair sum below 2^15, so nothing
 * saturates; q4_0 takes its unsigned nibbles as they are and subtracts 8 * x's sum), pairs
 * summed by madd into eight int32 lanes, converted and fused-multiply-added with the block's
 * scale into eight float lanes (one chain per row, four rows at a time sharing the activation
 * loads), summed at the end. avx512: the same steps on two blocks per 512-bit vector; where
 * the CPU has AVX512_VNNI, a second build of this file (TD_ISA avx512_vnni, CMakeLists.txt) sums
 * four byte products a lane with dpbusd in place of maddubs + madd, q4_0's 8 * x subtracted
 * as dpbusd's start: the same integers, so the same bits, and q4_0 +11% streaming at 2
 * threads (bench/RESULTS.md, 2026-11-27).
 * The kernels are bound by their vector operations, not by memory, on a 2-core VM: with the
 * weights in L2, one core spends ~1.1 ns a block in q8_0 and q4_0 alike, avx2 or avx512 (512-bit
 * operations issue on two ports, 256-bit ones on three), so two cores only just outrun
 * STREAM's triad in q4_0. Streaming [2048, 768] weights at 2 threads, the avx512 steps give
 * q8_0 +9% and q4_0 +2-8% over avx2's (bench/RESULTS.md, 2026-11-27).
 * Activation quantization gives the same bytes on every tier: max|x| is exact, 1/d and
 * x * (1/d) are single IEEE operations, and cvtps rounds to nearest even as nearbyintf does.
 */
#include <immintrin.h>
#include <stdint.h>

#include "../../core/quant.h"
#include "cpu_isa.h"
#include "cpu_quant.h"

#ifndef TD_ISA
#error "cpu_quant_isa.c is compiled with TD_ISA set (see CMakeLists.txt)"
#endif

#if defined(__AVX2__) && defined(__FMA__) && defined(__F16C__)

static inline float scale_of(const uint8_t *block)
{
    return _cvtsh_ss((unsigned short)(block[0] | (block[1] << 8)));
}

static inline float hsum(__m256 v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    s = _mm_add_ss(s, _mm_movehdup_ps(s));
    return _mm_cvtss_f32(s);
}

static void quantize_act(int64_t nb, const float *x, int8_t *q, float *d)
{
    const __m256 sign = _mm256_set1_ps(-0.0f);
    for (int64_t b = 0; b < nb; b++, x += TD_QBLOCK, q += TD_QBLOCK) {
        __m256 v[4], amax = _mm256_setzero_ps(), nan = _mm256_setzero_ps();
        for (int i = 0; i < 4; i++) {
            v[i] = _mm256_loadu_ps(x + 8 * i);
            amax = _mm256_max_ps(amax, _mm256_andnot_ps(sign, v[i]));
            nan = _mm256_or_ps(nan, _mm256_cmp_ps(v[i], v[i], _CMP_UNORD_Q));
        }
        __m128 m = _mm_max_ps(_mm256_castps256_ps128(amax), _mm256_extractf128_ps(amax, 1));
        m = _mm_max_ps(m, _mm_movehl_ps(m, m));
        m = _mm_max_ss(m, _mm_movehdup_ps(m));
        float dd = _mm256_movemask_ps(nan) ? NAN : _mm_cvtss_f32(m) / 127.0f;
        d[b] = dd;
        if (!isfinite(dd)) {
            _mm256_storeu_si256((__m256i *)q, _mm256_setzero_si256());
            continue;
        }
        __m256 id = _mm256_set1_ps(dd != 0 ? 1.0f / dd : 0.0f);
        __m256i i0 = _mm256_cvtps_epi32(_mm256_mul_ps(v[0], id));
        __m256i i1 = _mm256_cvtps_epi32(_mm256_mul_ps(v[1], id));
        __m256i i2 = _mm256_cvtps_epi32(_mm256_mul_ps(v[2], id));
        __m256i i3 = _mm256_cvtps_epi32(_mm256_mul_ps(v[3], id));
        /* packs interleave 128-bit lanes: the permute puts the 32 bytes back in order */
        __m256i p = _mm256_packs_epi16(_mm256_packs_epi32(i0, i1), _mm256_packs_epi32(i2, i3));
        p = _mm256_permutevar8x32_epi32(p, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
        _mm256_storeu_si256((__m256i *)q, p);
    }
}

/* Eight int32 lanes summing to the 32 products w[i] * x[i] (int8 each). */
static inline __m256 block_products(__m256i w, __m256i x)
{
    __m256i p16 = _mm256_maddubs_epi16(_mm256_sign_epi8(w, w), _mm256_sign_epi8(x, w));
    return _mm256_cvtepi32_ps(_mm256_madd_epi16(p16, _mm256_set1_epi16(1)));
}

/* A q4_0 block's 32 nibbles (0..15, unsigned) in element order: the 16 bytes loaded into both
 * halves at once, the high half shifted right by 4 (a per-lane shift), then masked. Three
 * vector operations where a load, a shift, an insert and a mask were four: the q4_0 kernel is
 * bound by its vector operations (cache-resident weights on one Zen 3 core: 1.61 -> 1.37 ns a
 * block, q8_0 1.37 whatever its prefetch), so one less a block is ~15%. */
static inline __m256i q4_nibbles(const uint8_t *block)
{
    __m256i raw = _mm256_broadcastsi128_si256(_mm_loadu_si128((const __m128i *)(block + 2)));
    return _mm256_and_si256(_mm256_srlv_epi64(raw, _mm256_setr_epi64x(0, 0, 4, 4)),
                            _mm256_set1_epi8(0x0f));
}

/* q4_0: sum (nibble - 8) * x as sum nibble * x - sum 8 * x, the nibbles as maddubs' unsigned
 * operand (15 * 127 * 2 < 2^15: no saturation) and 8 * x's lanes (corr) computed once per
 * activation block for all rows: exact integers, so the same sums as the sign trick. */
static inline __m256 q4_products(const uint8_t *block, __m256i x, __m256i corr)
{
    __m256i p = _mm256_madd_epi16(_mm256_maddubs_epi16(q4_nibbles(block), x),
                                  _mm256_set1_epi16(1));
    return _mm256_cvtepi32_ps(_mm256_sub_epi32(p, corr));
}

/* A batch-1 product streams its weight from memory once; four interleaved rows defeat the
 * hardware prefetcher, so each block prefetches the same block of the next four rows (about
 * 3 KiB ahead for dim 768: one group's time, more than a memory latency). The products of a
 * stories110M-shaped token on one core, q8_0: 22.7 ms with no prefetch, 23 ms with 512 bytes
 * ahead in the same rows, 13.7 ms with this (eight rows ahead: the same). */
static inline void dot_rows(int fmt, int rows, int64_t nb, const uint8_t *w, int64_t row_bytes,
                            const int8_t *q, const float *d, float *out)
{
    int bytes = fmt == 0 ? 34 : 18;
    __m256 acc[4] = {_mm256_setzero_ps(), _mm256_setzero_ps(), _mm256_setzero_ps(),
                     _mm256_setzero_ps()};
    for (int64_t b = 0; b < nb; b++) {
        __m256i xv = _mm256_loadu_si256((const __m256i *)(q + b * TD_QBLOCK));
        __m256i corr = _mm256_setzero_si256();
        if (fmt == 1)
            corr = _mm256_madd_epi16(_mm256_maddubs_epi16(_mm256_set1_epi8(8), xv),
                                     _mm256_set1_epi16(1));
        for (int r = 0; r < rows; r++) {
            const uint8_t *blk = w + r * row_bytes + b * bytes;
            _mm_prefetch((const char *)(blk + 4 * row_bytes), _MM_HINT_T0);
            __m256 p = fmt == 0 ? block_products(_mm256_loadu_si256((const __m256i *)(blk + 2)), xv)
                                : q4_products(blk, xv, corr);
            acc[r] = _mm256_fmadd_ps(_mm256_set1_ps(scale_of(blk) * d[b]), p, acc[r]);
        }
    }
    for (int r = 0; r < rows; r++)
        out[r] = hsum(acc[r]);
}

#ifdef __AVX512BW__
/* The avx512 tier: two blocks of a row per 512-bit vector (lanes 0-7 the first block's pair
 * sums, 8-15 the second's), half the vector operations of dot_rows a block; an odd last block
 * goes through dot_rows' 256-bit steps. The two blocks' scales come as one float16 pair:
 * converted together, times the activation scales, spread over their eight lanes each. */
static inline __m512 pair_scales(const uint8_t *blk0, int bytes, const float *d)
{
    unsigned both = (unsigned)(blk0[0] | blk0[1] << 8) |
                    (unsigned)(blk0[bytes] | blk0[bytes + 1] << 8) << 16;
    __m128 s = _mm_mul_ps(_mm_cvtph_ps(_mm_cvtsi32_si128((int)both)),
                          _mm_castsi128_ps(_mm_loadl_epi64((const __m128i *)d)));
    const __m512i spread = _mm512_setr_epi32(0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 1, 1);
    return _mm512_permutexvar_ps(spread, _mm512_castps128_ps512(s));
}

/* q8_0: the sign trick of block_products on two blocks (34 bytes apart). */
static inline __m512i pair_q8(const uint8_t *blk0, __m512i x)
{
    __m512i w = _mm512_inserti64x4(
        _mm512_castsi256_si512(_mm256_loadu_si256((const __m256i *)(blk0 + 2))),
        _mm256_loadu_si256((const __m256i *)(blk0 + 36)), 1);
    __m512i sx = _mm512_mask_sub_epi8(x, _mm512_movepi8_mask(w), _mm512_setzero_si512(), x);
#ifdef __AVX512VNNI__
    return _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_abs_epi8(w), sx);
#else
    return _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_abs_epi8(w), sx), _mm512_set1_epi16(1));
#endif
}

/* q4_0: two blocks' nibbles (18 bytes apart) as [lo0, hi0, lo1, hi1] times x, less 8 * x. */
static inline __m512i pair_q4(const uint8_t *blk0, __m512i x, __m512i corr)
{
    __m256i both = _mm256_inserti128_si256(
        _mm256_castsi128_si256(_mm_loadu_si128((const __m128i *)(blk0 + 2))),
        _mm_loadu_si128((const __m128i *)(blk0 + 20)), 1);
    __m512i z = _mm512_castsi256_si512(both);
    z = _mm512_shuffle_i64x2(z, z, _MM_SHUFFLE(1, 1, 0, 0));
    const __m512i shifts = _mm512_setr_epi64(0, 0, 4, 4, 0, 0, 4, 4);
    __m512i nib = _mm512_and_si512(_mm512_srlv_epi64(z, shifts), _mm512_set1_epi8(0x0f));
#ifdef __AVX512VNNI__
    return _mm512_dpbusd_epi32(corr, nib, x); /* corr holds -8 * x's sums here */
#else
    return _mm512_sub_epi32(_mm512_madd_epi16(_mm512_maddubs_epi16(nib, x), _mm512_set1_epi16(1)),
                            corr);
#endif
}

/* 8 * x's sums over each four bytes (pair_q4 subtracts them); negated where VNNI's dpbusd
 * starts from them. The same integers either way: the two paths give the same bits. */
static inline __m512i pair_corr(__m512i x)
{
#ifdef __AVX512VNNI__
    return _mm512_sub_epi32(_mm512_setzero_si512(),
                            _mm512_dpbusd_epi32(_mm512_setzero_si512(), _mm512_set1_epi8(8), x));
#else
    return _mm512_madd_epi16(_mm512_maddubs_epi16(_mm512_set1_epi8(8), x), _mm512_set1_epi16(1));
#endif
}

static inline void dot_rows512(int fmt, int rows, int64_t nb, const uint8_t *w,
                               int64_t row_bytes, const int8_t *q, const float *d, float *out)
{
    int bytes = fmt == 0 ? 34 : 18;
    __m512 acc[4] = {_mm512_setzero_ps(), _mm512_setzero_ps(), _mm512_setzero_ps(),
                     _mm512_setzero_ps()};
    int64_t b = 0;
    for (; b + 2 <= nb; b += 2) {
        __m512i xv = _mm512_loadu_si512((const void *)(q + b * TD_QBLOCK));
        __m512i corr = _mm512_setzero_si512();
        if (fmt == 1)
            corr = pair_corr(xv);
        for (int r = 0; r < rows; r++) {
            const uint8_t *blk = w + r * row_bytes + b * bytes;
            _mm_prefetch((const char *)(blk + 4 * row_bytes), _MM_HINT_T0);
            __m512i p = fmt == 0 ? pair_q8(blk, xv) : pair_q4(blk, xv, corr);
            __m512 scales = pair_scales(blk, bytes, d + b);
            acc[r] = _mm512_fmadd_ps(scales, _mm512_cvtepi32_ps(p), acc[r]);
        }
    }
    float tail[4] = {0, 0, 0, 0};
    if (b < nb)
        dot_rows(fmt, rows, 1, w + b * bytes, row_bytes, q + b * TD_QBLOCK, d + b, tail);
    for (int r = 0; r < rows; r++)
        out[r] = _mm512_reduce_add_ps(acc[r]) + tail[r];
}
#define dot_rows dot_rows512
#endif

static float dot_q8_0(int64_t nb, const uint8_t *w, const int8_t *q, const float *d)
{
    float out;
    dot_rows(0, 1, nb, w, 0, q, d, &out);
    return out;
}

static float dot_q4_0(int64_t nb, const uint8_t *w, const int8_t *q, const float *d)
{
    float out;
    dot_rows(1, 1, nb, w, 0, q, d, &out);
    return out;
}

static void dot4_q8_0(int64_t nb, const uint8_t *w, int64_t row_bytes, const int8_t *q,
                      const float *d, float *out)
{
    dot_rows(0, 4, nb, w, row_bytes, q, d, out);
}

static void dot4_q4_0(int64_t nb, const uint8_t *w, int64_t row_bytes, const int8_t *q,
                      const float *d, float *out)
{
    dot_rows(1, 4, nb, w, row_bytes, q, d, out);
}

#else /* baseline: the scalar definitions */

static void quantize_act(int64_t nb, const float *x, int8_t *q, float *d)
{
    for (int64_t b = 0; b < nb; b++)
        d[b] = td_qact_block(x + b * TD_QBLOCK, q + b * TD_QBLOCK);
}

static float dot_blocks(int fmt, int64_t nb, const uint8_t *w, const int8_t *q, const float *d)
{
    int bytes = td_qblock_bytes(fmt);
    float acc = 0;
    for (int64_t b = 0; b < nb; b++, w += bytes, q += TD_QBLOCK) {
        int8_t wi[TD_QBLOCK];
        td_qblock_ints(fmt, w, wi);
        int32_t s = 0;
        for (int i = 0; i < TD_QBLOCK; i++)
            s += (int32_t)wi[i] * q[i];
        acc += td_qblock_scale(w) * d[b] * (float)s;
    }
    return acc;
}

static float dot_q8_0(int64_t nb, const uint8_t *w, const int8_t *q, const float *d)
{
    return dot_blocks(0, nb, w, q, d);
}

static float dot_q4_0(int64_t nb, const uint8_t *w, const int8_t *q, const float *d)
{
    return dot_blocks(1, nb, w, q, d);
}

static void dot4_q8_0(int64_t nb, const uint8_t *w, int64_t row_bytes, const int8_t *q,
                      const float *d, float *out)
{
    for (int r = 0; r < 4; r++)
        out[r] = dot_blocks(0, nb, w + r * row_bytes, q, d);
}

static void dot4_q4_0(int64_t nb, const uint8_t *w, int64_t row_bytes, const int8_t *q,
                      const float *d, float *out)
{
    for (int r = 0; r < 4; r++)
        out[r] = dot_blocks(1, nb, w + r * row_bytes, q, d);
}

#endif

const td_quant_kernels TD_ISA_FN(td_quant_kernels) = {
    .quantize_act = quantize_act,
    .dot = {dot_q8_0, dot_q4_0},
    .dot4 = {dot4_q8_0, dot4_q4_0},
};
