/*
 * cpu_conv_wgrad_isa.c — the register tile of a float32 weight gradient summed without columns
 * (cpu_conv_wgrad.c).
 *
 * The gradient is dW^T[k, o] = sum over positions q of x_k[q] * g[q, o], where row k = (c, i, j)
 * of the would-be im2col matrix is a zero-padded plane of channel c (the plane itself at stride
 * 1, the tap's stride phase otherwise) read from the tap's offset: over positions
 * q = oh*Wp + ow of the plane's width, x_k[q] = xp[offset_k + q]. The
 * columns ow >= OW that this adds read real input, and the transposed output gradient g is zero
 * there, so they add nothing.
 *
 * A tile is KR rows k by up to OV vectors of output channels o. Its sums stay in registers over
 * a chunk of positions: each step broadcasts KR input values and loads OV vectors of g, for
 * KR*OV fused multiply-adds. No column matrix is written and nothing is packed: the tile reads
 * the padded input, which stays in L2, and a chunk of g sized for L1.
 *
 * Compiled three times (cpu_isa.h); cpu_conv_wgrad.c takes the AVX2 and AVX-512 builds only.
 */
#include <stdint.h>

#include <immintrin.h>

#include "cpu_conv.h"
#include "cpu_isa.h"
#include "cpu_transpose_isa.h"

#ifndef TD_ISA
#error "cpu_conv_wgrad_isa.c is compiled with TD_ISA set (see CMakeLists.txt)"
#endif

#if defined(__AVX512F__)
enum { V = 16, KR = 6, OV = 4 }; /* 24 sums, 4 g vectors and a broadcast: 29 of 32 registers */
typedef __m512 vf;
#define VLOAD(p) _mm512_load_ps(p)
#define VSTORE(p, v) _mm512_store_ps(p, v)
#define VSET1(x) _mm512_set1_ps(x)
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#elif defined(__AVX2__)
enum { V = 8, KR = 4, OV = 3 }; /* 12 sums, 3 g vectors and a broadcast: all 16 registers */
typedef __m256 vf;
#define VLOAD(p) _mm256_load_ps(p)
#define VSTORE(p, v) _mm256_store_ps(p, v)
#define VSET1(x) _mm256_set1_ps(x)
#define VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#else
enum { V = 4, KR = 4, OV = 2 };
typedef __m128 vf;
#define VLOAD(p) _mm_load_ps(p)
#define VSTORE(p, v) _mm_store_ps(p, v)
#define VSET1(x) _mm_set1_ps(x)
#define VFMA(a, b, c) _mm_add_ps(_mm_mul_ps(a, b), c)
#endif

/* Positions per chunk: a chunk of g's block of OV vectors (24 KB with AVX-512) stays in L1
 * while the tiles of every row k read it. */
#define CHUNK 96

/* Rows k0 .. k0 + KR - 1 by nv vectors of channels from o0, over positions [q0, q1): the sums
 * are read from dwt, added to and written back (nv a constant where inlined). */
static inline __attribute__((always_inline)) void tile(const td_wgrad_tile *c, int64_t k0,
                                                       int64_t o0, const int nv, int64_t q0,
                                                       int64_t q1)
{
    const float *xr[KR];
    for (int r = 0; r < KR; r++)
        xr[r] = c->x + c->k_offset[k0 + r];
    float *d = c->dwt + k0 * c->ldg + o0;
    vf acc[KR][OV];
    for (int r = 0; r < KR; r++)
        for (int v = 0; v < nv; v++)
            acc[r][v] = VLOAD(d + r * c->ldg + v * V);
    const float *g = c->gt + q0 * c->ldg + o0;
    for (int64_t q = q0; q < q1; q++, g += c->ldg) {
        vf gv[OV];
        for (int v = 0; v < nv; v++)
            gv[v] = VLOAD(g + v * V);
        for (int r = 0; r < KR; r++) {
            vf xv = VSET1(xr[r][q]);
            for (int v = 0; v < nv; v++)
                acc[r][v] = VFMA(xv, gv[v], acc[r][v]);
        }
    }
    for (int r = 0; r < KR; r++)
        for (int v = 0; v < nv; v++)
            VSTORE(d + r * c->ldg + v * V, acc[r][v]);
}

#if defined(__AVX__)
enum { TB = 8 };
#define transpose_block td_transpose8
#else
enum { TB = 4 };
#define transpose_block td_transpose4
#endif

void TD_ISA_FN(td_conv_wgrad_transpose)(const float *g, int64_t so, int64_t sh, int64_t Og,
                                        int64_t OH, int64_t OW, int64_t Wp, int64_t ldg,
                                        float *gt)
{
    for (int64_t oh = 0; oh < OH; oh++) {
        const float *row = g + oh * sh;
        float *dst = gt + oh * Wp * ldg;
        int64_t o = 0;
        for (; o + TB <= Og; o += TB) {
            const float *r[TB];
            for (int m = 0; m < TB; m++)
                r[m] = row + (o + m) * so;
            int64_t ow = 0;
            for (; ow + TB <= OW; ow += TB)
                transpose_block(r, ow, dst + ow * ldg + o, ldg);
            for (; ow < OW; ow++)
                for (int m = 0; m < TB; m++)
                    dst[ow * ldg + o + m] = r[m][ow];
        }
        for (; o < Og; o++)
            for (int64_t ow = 0; ow < OW; ow++)
                dst[ow * ldg + o] = row[o * so + ow];
    }
}

int TD_ISA_FN(td_conv_wgrad_kr)(void) { return KR; }

int TD_ISA_FN(td_conv_wgrad_lanes)(void) { return V; }

/* Every tile of c over its positions, chunk by chunk. */
void TD_ISA_FN(td_conv_wgrad_run)(const td_wgrad_tile *c)
{
    int64_t nvec = c->ldg / V;
    for (int64_t q0 = 0; q0 < c->Q; q0 += CHUNK) {
        int64_t q1 = c->Q - q0 < CHUNK ? c->Q : q0 + CHUNK;
        for (int64_t v0 = 0; v0 < nvec; v0 += OV) {
            int64_t nv = nvec - v0 < OV ? nvec - v0 : OV;
            for (int64_t k0 = 0; k0 < c->Kp; k0 += KR) {
                if (nv == OV)
                    tile(c, k0, v0 * V, OV, q0, q1);
                else if (nv == 3 && OV > 3)
                    tile(c, k0, v0 * V, 3, q0, q1);
                else if (nv == 2 && OV > 2)
                    tile(c, k0, v0 * V, 2, q0, q1);
                else
                    tile(c, k0, v0 * V, 1, q0, q1);
            }
        }
    }
}
