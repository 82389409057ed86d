/*
 * cpu_matmul_dot_isa.c — the register tile of float32 C = A B^T with both A and B stored by
 * rows along k (a linear layer's x @ W^T, W [n, k]), for cpu_matmul_direct.c.
 *
 * A tile is MR rows of A by NR rows of B: MR*NR vector sums along k, each lane holding the
 * terms k = l (mod V), reduced across lanes once at the end in a fixed order. Both operands
 * are read in place, in order along k: no transposed copy of B, which is the pass OpenBLAS
 * spends a quarter of a batch-1 transformer layer's time on. The sum of an output does not
 * depend on which tile computes it, so cuts into blocks of rows give the same bits.
 *
 * Compiled three times (cpu_isa.h); cpu_matmul_direct.c takes the AVX2 and AVX-512 builds.
 */
#include <stdint.h>
#include <string.h>

#include <immintrin.h>

#include "cpu_isa.h"
#include "cpu_matmul_direct.h"

#ifndef TD_ISA
#error "cpu_matmul_dot_isa.c is compiled with TD_ISA set (see CMakeLists.txt)"
#endif

#if defined(__AVX512F__)
enum { V = 16, MR = 4, NR = 6 };
typedef __m512 vf;
#define VLOAD(p) _mm512_loadu_ps(p)
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VZERO() _mm512_setzero_ps()
static inline vf load_first(const float *p, int64_t n)
{
    return _mm512_maskz_loadu_ps((__mmask16)((1u << n) - 1), p);
}
static inline float hsum(vf v) { return _mm512_reduce_add_ps(v); }
#elif defined(__AVX2__)
enum { V = 8, MR = 4, NR = 2 };
typedef __m256 vf;
#define VLOAD(p) _mm256_loadu_ps(p)
#define VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define VZERO() _mm256_setzero_ps()
static inline vf load_first(const float *p, int64_t n)
{
    __m256i lane = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
    return _mm256_maskload_ps(p, _mm256_cmpgt_epi32(_mm256_set1_epi32((int)n), lane));
}
static inline float hsum(vf v)
{
    __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
    s = _mm_add_ps(s, _mm_movehl_ps(s, s));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
}
#else
enum { V = 4, MR = 4, NR = 2 };
typedef __m128 vf;
#define VLOAD(p) _mm_loadu_ps(p)
#define VFMA(a, b, c) _mm_add_ps(_mm_mul_ps(a, b), c)
#define VZERO() _mm_setzero_ps()
static inline vf load_first(const float *p, int64_t n)
{
    float v[4] = {0};
    memcpy(v, p, (size_t)n * sizeof(float));
    return _mm_loadu_ps(v);
}
static inline float hsum(vf v)
{
    __m128 s = _mm_add_ps(v, _mm_movehl_ps(v, v));
    return _mm_cvtss_f32(_mm_add_ss(s, _mm_shuffle_ps(s, s, 1)));
}
#endif

/* C[i0 .. i0+mr) x [j0 .. j0+nr): rows past the ends read the last row again, unstored. */
static void dot_tile(const td_dot_product *p, int64_t i0, int64_t mr, int64_t j0, int64_t nr)
{
    const float *ar[MR], *br[NR];
    for (int m = 0; m < MR; m++)
        ar[m] = p->a + (i0 + (m < mr ? m : mr - 1)) * p->lda;
    for (int n = 0; n < NR; n++)
        br[n] = p->b + (j0 + (n < nr ? n : nr - 1)) * p->ldb;
    vf acc[MR][NR];
    for (int m = 0; m < MR; m++)
        for (int n = 0; n < NR; n++)
            acc[m][n] = VZERO();
    int64_t k = 0, K = p->k;
    for (; k + V <= K; k += V) {
        vf av[MR];
        for (int m = 0; m < MR; m++)
            av[m] = VLOAD(ar[m] + k);
        for (int n = 0; n < NR; n++) {
            vf bv = VLOAD(br[n] + k);
            for (int m = 0; m < MR; m++)
                acc[m][n] = VFMA(av[m], bv, acc[m][n]);
        }
    }
    if (k < K) { /* the last K - k terms, the lanes past them zero */
        vf av[MR];
        for (int m = 0; m < MR; m++)
            av[m] = load_first(ar[m] + k, K - k);
        for (int n = 0; n < NR; n++) {
            vf bv = load_first(br[n] + k, K - k);
            for (int m = 0; m < MR; m++)
                acc[m][n] = VFMA(av[m], bv, acc[m][n]);
        }
    }
    for (int m = 0; m < mr; m++)
        for (int n = 0; n < nr; n++)
            p->c[(i0 + m) * p->n + j0 + n] = hsum(acc[m][n]);
}

int64_t TD_ISA_FN(td_dot_tiles)(const td_dot_product *p)
{
    return (p->m + MR - 1) / MR * ((p->n + NR - 1) / NR);
}

int64_t TD_ISA_FN(td_dot_tile_outputs)(void) { return MR * NR; }

/* Tiles [t0, t1), column-block major: a block of B's rows stays in L1 while A's rows pass. */
void TD_ISA_FN(td_dot_run)(const td_dot_product *p, int64_t t0, int64_t t1)
{
    int64_t mblocks = (p->m + MR - 1) / MR;
    for (int64_t t = t0; t < t1; t++) {
        int64_t i0 = t % mblocks * MR, j0 = t / mblocks * NR;
        dot_tile(p, i0, p->m - i0 < MR ? p->m - i0 : MR, j0, p->n - j0 < NR ? p->n - j0 : NR);
    }
}
