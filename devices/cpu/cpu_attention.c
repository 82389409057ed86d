/*
 * cpu_attention.c — SDPA and SDPA_GRAD on the CPU (core/primitive.h): fused attention whose
 * scores live only in BQ x BK blocks (cpu_attention_body.h has the kernels, once per dtype).
 *
 * Work split: the forward's tasks are (batch, query block) pairs; the backward's are batches
 * (each key block's dK, dV and the running dQ belong to one batch). Each task's arithmetic is
 * the same whatever thread runs it, and the GEMMs inside td_parallel_for are single calls, so
 * the result does not depend on the thread count, and the jit (which runs the same kernel)
 * equals eager bitwise.
 *
 * Numerics: float32 is accumulated in float32 (the GEMMs, the online softmax's sums), as the
 * composite matmul/softmax/matmul is; the two differ by the order of additions only: a score is
 * a dot of E products, a row sum S terms, an output S terms, so agreement within a few
 * (E + S) * 2^-24 relative, plus the rescaling by exp(m_old - m_new) once per key block.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_attention.h"
#include "cpu_isa.h"

#define REAL float
#define SUF f32
#define GEMM td_blas_sgemm
#define EXP_S expf
#include "cpu_attention_body.h"
#undef REAL
#undef SUF
#undef GEMM
#undef EXP_S

#define REAL double
#define SUF f64
#define GEMM td_blas_dgemm
#define EXP_S exp
#include "cpu_attention_body.h"
#undef REAL
#undef SUF
#undef GEMM
#undef EXP_S

static td_ew_unary_fn exp_kernel(tide_dtype dtype)
{
    const td_ew_kernels *t = td_cpu_isa() == TD_ISA_AVX512 ? &td_ew_kernels_avx512
                             : td_cpu_isa() == TD_ISA_AVX2 ? &td_ew_kernels_avx2
                                                           : &td_ew_kernels_baseline;
    return t->unary[TIDE_OP_EXP - TIDE_OP_FIRST_UNARY][dtype];
}

/* The geometry from q, k, v [, mask] (primitive.h: batch dims equal, rows of stride 1). */
static int geometry(attn_geom *g, tide_tensor *const *in, const tide_attrs *a, void *out)
{
    memset(g, 0, sizeof *g);
    const tide_tensor *q = in[0];
    g->q = q;
    g->k = in[1];
    g->v = in[2];
    g->mask = a->ints[1] ? in[3] : NULL;
    g->out = out;
    g->nb = q->ndim - 2;
    g->n = td_numel(g->nb, q->shape);
    g->L = q->shape[g->nb];
    g->E = q->shape[g->nb + 1];
    g->S = g->k->shape[g->nb];
    g->Ev = g->v->shape[g->nb + 1];
    g->q_rs = q->strides[g->nb];
    g->k_rs = g->k->strides[g->nb];
    g->v_rs = g->v->strides[g->nb];
    if (g->mask) {
        g->m_rs = g->mask->strides[g->nb];
        g->m_cs = g->mask->strides[g->nb + 1];
    }
    g->heads = a->nints > 2 && a->ints[2] && g->nb > 0 ? q->shape[g->nb - 1] : 1;
    g->causal = a->ints[0] != 0;
    g->scale = a->values[0];
    g->exp_fn = exp_kernel((tide_dtype)q->dtype);
    if (q->dtype != TIDE_FLOAT32 && q->dtype != TIDE_FLOAT64)
        return td_error("cpu: scaled_dot_product_attention has no kernel for %s",
                        tide_dtype_name((tide_dtype)q->dtype));
    return td_blas_ready("scaled_dot_product_attention");
}

static int finish(const attn_geom *g)
{
    if (__atomic_load_n(&g->failed, __ATOMIC_RELAXED))
        return td_error_code(TIDE_ERR_OUT_OF_MEMORY,
                             "scaled_dot_product_attention: out of memory for the CPU kernel's "
                             "block scratch");
    return 0;
}

int td_cpu_sdpa(tide_tensor *out, tide_tensor *const *in, const tide_attrs *a)
{
    attn_geom g;
    if (geometry(&g, in, a, td_tensor_data(out)) < 0)
        return -1;
    int64_t bq = attn_fwd_rows(&g), tasks = g.n * ((g.L + bq - 1) / bq);
    td_parallel_for(tasks, 1, g.q->dtype == TIDE_FLOAT32 ? fwd_range_f32 : fwd_range_f64, &g);
    return finish(&g);
}

int td_cpu_sdpa_grad(tide_tensor *out, tide_tensor *const *in, int nin, const tide_attrs *a)
{
    attn_geom g;
    if (geometry(&g, in, a, td_tensor_data(out)) < 0)
        return -1;
    g.packed = td_tensor_data(in[nin - 2]);
    g.dout = in[nin - 1];
    td_parallel_for(g.n, 1, g.q->dtype == TIDE_FLOAT32 ? bwd_range_f32 : bwd_range_f64, &g);
    return finish(&g);
}
