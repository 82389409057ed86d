/*
 * cpu_attention.h — what cpu_attention.c shares with the two instances (float32, float64) of
 * its blocked kernels in cpu_attention_body.h: the geometry of one SDPA / SDPA_GRAD call.
 */
#ifndef TIDE_CPU_ATTENTION_H
#define TIDE_CPU_ATTENTION_H

#include "cpu_blas.h"
#include "cpu_elementwise.h"
#include "cpu_kernels.h"

/* Rows per block. The forward's BQ x BK_FWD scores (64 KB in float32) stay in L2 beside the
 * q, k, v rows they come from, and make GEMMs big enough for OpenBLAS's kernels. The backward
 * takes up to BQ_BWD query rows per key block of BK (its five GEMMs then have one long side;
 * 512 x 64 scores and their gradients, 256 KB in float32, still fit a Zen 3 core's L2), and
 * starts them at the block's first key when causal, so only the diagonal's triangle is computed
 * in vain. Chosen by timing T = 1024, E = 64, 6 heads, causal, on one Zen 3 core of a busy
 * VM (so only roughly: +-30% between runs): forward + backward went from about 94 ms with
 * 64 x 64 blocks everywhere to about 65-90 ms; BK = 128 in the backward, BK_FWD = 256 and
 * BQ_BWD = 1024 showed no difference above that noise. */
#define ATTN_BQ 128
#define ATTN_BK 64
#define ATTN_BK_FWD 128
#define ATTN_BQ_BWD 512
/* Causal forward blocks are half as tall: a block's last key block, on the diagonal, computes
 * BQ / 2 scores a row in vain on average, half the work at T = 128 (a GPT's training window). */
#define ATTN_BQ_CAUSAL 64
_Static_assert(ATTN_BQ_CAUSAL <= ATTN_BQ, "the forward's scratch is sized for ATTN_BQ rows");

typedef struct attn_geom {
    const tide_tensor *q, *k, *v, *mask; /* mask: NULL or additive, any strides */
    const void *packed;                  /* SDPA_GRAD: the forward's outputs and logsumexps */
    const tide_tensor *dout;             /* SDPA_GRAD: [B.., L, Ev], rows of stride 1 */
    void *out;                           /* SDPA: packed; SDPA_GRAD: dq, dk, dv */
    int nb;                              /* batch dims */
    int64_t n, L, S, E, Ev;
    int64_t heads; /* heads-last outputs: the last batch dim (primitive.h); else 1 */
    int64_t q_rs, k_rs, v_rs, m_rs, m_cs; /* row strides; the mask's column stride */
    bool causal;
    double scale;
    td_ew_unary_fn exp_fn; /* the vector exp for the dtype (the elementwise kernel's) */
    int failed;            /* a scratch allocation failed (atomic) */
} attn_geom;

/* Element offset of batch b's matrix in t (its batch dims, stride 0 where broadcast). */
static inline int64_t attn_batch_offset(const attn_geom *g, const tide_tensor *t, int64_t b)
{
    int64_t off = 0;
    for (int d = g->nb - 1; d >= 0; d--) {
        off += (b % t->shape[d]) * t->strides[d];
        b /= t->shape[d];
    }
    return off;
}

/* Where row i of batch b's [rows, width] matrix of an output (SDPA's, or a gradient of
 * SDPA_GRAD) starts, and the distance between its rows: heads-last, batch b = (outer, head) is
 * stored as [outer, rows, heads, width]. */
static inline int64_t attn_row_pos(const attn_geom *g, int64_t b, int64_t i, int64_t rows,
                                   int64_t width)
{
    return ((b / g->heads * rows + i) * g->heads + b % g->heads) * width;
}

static inline int64_t attn_row_stride(const attn_geom *g, int64_t width)
{
    return g->heads * width;
}

static inline int64_t attn_min(int64_t a, int64_t b) { return a < b ? a : b; }
static inline int64_t attn_max(int64_t a, int64_t b) { return a > b ? a : b; }

/* Query rows per forward block (each block's task computes them against every key it sees). */
static inline int64_t attn_fwd_rows(const attn_geom *g)
{
    return g->causal ? ATTN_BQ_CAUSAL : ATTN_BQ;
}

#endif
