/*
 * cpu_conv_direct_isa.c — the register tile of direct float32 convolution (cpu_conv_direct.c).
 *
 * A tile is MR output channels by up to NR vectors of output columns (segments: V columns of
 * one output row, the last of a row shorter). Its MR*NR sums stay in registers over every
 * input channel and kernel tap, and are stored once, with a bias per output channel and a
 * ReLU when the jit fused them (cpu_jit_conv.c). A GEMM over im2col columns, or the kh*kw
 * GEMMs of the shifted path, write the output or its columns several times over; at batch 1
 * that traffic, and BLAS's packing, cost as much as the arithmetic.
 *
 * Each step of the sum loads NR input vectors (a segment's row, shifted by the tap) and
 * broadcasts MR weights: MR*NR fused multiply-adds for MR + NR loads. A segment shorter than V
 * still loads V columns, and the padded input keeps V columns of slack past its end so that
 * such a load stays inside it; the lanes past the segment are computed and never stored.
 *
 * Compiled three times (cpu_isa.h); the baseline build (SSE2, no FMA) is there for the tables
 * but cpu_conv_direct.c does not choose it: OpenBLAS's kernels are faster than it.
 */
#include <stdint.h>
#include <string.h>

#include <immintrin.h>

#include "cpu_conv.h"
#include "cpu_isa.h"
#include "cpu_transpose_isa.h"

#ifndef TD_ISA
#error "cpu_conv_direct_isa.c is compiled with TD_ISA set (see CMakeLists.txt)"
#endif

#if defined(__AVX512F__)
enum { V = 16, MR = 8, NR = 3 };
typedef __m512 vf;
#define VLOAD(p) _mm512_loadu_ps(p)
#define VSET1(x) _mm512_set1_ps(x)
#define VFMA(a, b, c) _mm512_fmadd_ps(a, b, c)
#define VADD(a, b) _mm512_add_ps(a, b)
#define VMAX(a, b) _mm512_max_ps(a, b)
#define VZERO() _mm512_setzero_ps()
#elif defined(__AVX2__)
enum { V = 8, MR = 4, NR = 3 };
typedef __m256 vf;
#define VLOAD(p) _mm256_loadu_ps(p)
#define VSET1(x) _mm256_set1_ps(x)
#define VFMA(a, b, c) _mm256_fmadd_ps(a, b, c)
#define VADD(a, b) _mm256_add_ps(a, b)
#define VMAX(a, b) _mm256_max_ps(a, b)
#define VZERO() _mm256_setzero_ps()
#else
enum { V = 4, MR = 4, NR = 3 };
typedef __m128 vf;
#define VLOAD(p) _mm_loadu_ps(p)
#define VSET1(x) _mm_set1_ps(x)
#define VFMA(a, b, c) _mm_add_ps(_mm_mul_ps(a, b), c)
#define VADD(a, b) _mm_add_ps(a, b)
#define VMAX(a, b) _mm_max_ps(a, b)
#define VZERO() _mm_setzero_ps()
#endif

/* Input channels ahead whose rows a tile asks for before it reads them: a product's B rows
 * (one channel each) lie pages apart, beyond the hardware prefetchers' reach. */
#define PREFETCH_CHANNELS 24

/* The first n lanes of v to p (n <= V). */
static inline void store_lanes(float *p, vf v, int64_t n)
{
    if (n == V) {
        memcpy(p, &v, sizeof v);
        return;
    }
#if defined(__AVX512F__)
    _mm512_mask_storeu_ps(p, (__mmask16)((1u << n) - 1), v);
#else
    float lanes[V];
    memcpy(lanes, &v, sizeof v);
    memcpy(p, lanes, (size_t)n * sizeof(float));
#endif
}

/* Segments s0 .. s0 + nr - 1 of the output plane: each one's row, first column and length
 * (one division for the first; a small conv's tile is short enough for divisions to show). */
static inline void segments_at(const td_direct_conv *c, int64_t s0, int nr, int64_t *oh,
                               int64_t *ow0, int64_t *len)
{
    int64_t per_row = (c->OW + V - 1) / V, row = s0 / per_row, col = s0 % per_row;
    for (int r = 0; r < nr; r++, col++) {
        if (col == per_row)
            col = 0, row++;
        oh[r] = row;
        ow0[r] = col * V;
        len[r] = c->OW - ow0[r] < V ? c->OW - ow0[r] : V;
    }
}

/* One tile of nr segments from s0 (nr a constant where inlined, so the sums stay in
 * registers): output channels o0 .. o0 + mr - 1 of the plane block, whose weights are w. */
static inline __attribute__((always_inline)) void tile(const td_direct_conv *c, int64_t s0,
                                                       const int nr, int64_t o0, int64_t mr)
{
    const float *w = c->w + (o0 - c->w_first) * c->K; /* block o0 / MR: w[k*MR + m] */
    const float *xb[NR];
    int64_t oh[NR], ow0[NR], len[NR];
    segments_at(c, s0, nr, oh, ow0, len);
    for (int r = 0; r < nr; r++) {
        xb[r] = c->x + oh[r] * c->sh * c->Wp + ow0[r];
    }
    vf acc[MR][NR];
    for (int m = 0; m < MR; m++)
        for (int r = 0; r < nr; r++)
            acc[m][r] = VZERO();
    int64_t taps = c->kh * c->kw;
    for (int64_t ch = 0; ch < c->Cg; ch++) {
        int64_t cofs = ch * c->plane;
        if (ch + PREFETCH_CHANNELS < c->Cg)
            for (int r = 0; r < nr; r++)
                _mm_prefetch((const char *)(xb[r] + cofs + PREFETCH_CHANNELS * c->plane),
                             _MM_HINT_T0);
        for (int64_t t = 0; t < taps; t++, w += MR) {
            int64_t ofs = cofs + c->tap_offset[t];
            vf xv[NR];
            for (int r = 0; r < nr; r++)
                xv[r] = VLOAD(xb[r] + ofs);
            for (int m = 0; m < MR; m++) {
                vf wv = VSET1(w[m]);
                for (int r = 0; r < nr; r++)
                    acc[m][r] = VFMA(wv, xv[r], acc[m][r]);
            }
        }
    }
    int64_t out_plane = c->OH * c->OW;
    for (int m = 0; m < mr; m++) {
        vf b = VSET1(c->bias ? c->bias[o0 + m] : 0.0f);
        for (int r = 0; r < nr; r++) {
            vf v = c->bias ? VADD(acc[m][r], b) : acc[m][r];
            if (c->relu) /* relu's v < 0 ? 0 : v, NaN and -0 kept: max gives its 2nd if not > */
                v = VMAX(VZERO(), v);
            store_lanes(c->out + (o0 + m) * out_plane + oh[r] * c->OW + ow0[r], v, len[r]);
        }
    }
}

#if defined(__AVX512F__)
#define transpose_block(r, k, dst) td_transpose8(r, k, dst, 8)
#else
#define transpose_block(r, k, dst) td_transpose4(r, k, dst, 4)
#endif

/* One block of weights as the tile reads it: dst[k*MR + m] = rows[m][k] for m < n, 0 past. */
void TD_ISA_FN(td_conv_direct_pack)(const float *const *rows, int64_t n, int64_t K, float *dst)
{
    int64_t k = 0;
    if (n == MR)
        for (; k + MR <= K; k += MR)
            transpose_block(rows, k, dst + k * MR);
    for (; k < K; k++)
        for (int64_t m = 0; m < MR; m++)
            dst[k * MR + m] = m < n ? rows[m][k] : 0.0f;
}

int TD_ISA_FN(td_conv_direct_mr)(void) { return MR; }

int64_t TD_ISA_FN(td_conv_direct_slack)(void) { return V; }

static int64_t segments(const td_direct_conv *c) { return c->OH * ((c->OW + V - 1) / V); }

int64_t TD_ISA_FN(td_conv_direct_tiles)(const td_direct_conv *c)
{
    return (segments(c) + NR - 1) / NR * ((c->Og + MR - 1) / MR);
}

/* Tiles t0 .. t1 - 1 of the conv's (segment tile, output block) pairs: output block major (a
 * block's weights stay in L1 while its tiles sweep the input), or segment-tile major. */
void TD_ISA_FN(td_conv_direct_run)(const td_direct_conv *c, int64_t t0, int64_t t1)
{
    int64_t nseg = segments(c), nst = (nseg + NR - 1) / NR, nblk = (c->Og + MR - 1) / MR;
    for (int64_t t = t0; t < t1; t++) {
        int64_t s0 = c->seg_major ? t / nblk * NR : t % nst * NR;
        int64_t b = c->seg_major ? t % nblk : t / nst;
        int64_t nr = nseg - s0 < NR ? nseg - s0 : NR;
        int64_t o0 = b * MR, mr = c->Og - o0 < MR ? c->Og - o0 : MR;
        if (nr == NR)
            tile(c, s0, NR, o0, mr);
        else if (nr == 2)
            tile(c, s0, 2, o0, mr);
        else
            tile(c, s0, 1, o0, mr);
    }
}
