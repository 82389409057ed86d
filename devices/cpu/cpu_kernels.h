/*
 * cpu_kernels.h — the CPU device's kernels, called by cpu_device.c's run(). Every function
 * gets arguments the dispatcher already validated (shapes, dtypes, attributes; see
 * core/device.h) and returns 0, or -1 with td_error set (out of memory for a temporary).
 * Inputs may have any strides (0 for broadcast dims, negative after a flip); out is
 * contiguous and already allocated unless said otherwise. Large work is split with
 * td_parallel_for.
 */
#ifndef TIDE_CPU_KERNELS_H
#define TIDE_CPU_KERNELS_H

#include "../../core/tensor.h"

/* ---- cpu_elementwise.c ---- */
/* out has x's shape. Float-only ops (exp, log, sqrt, rsqrt, sin, cos, tanh, sigmoid,
 * reciprocal, floor, ceil, round) see float32/float64; neg/abs/relu/sign see any numeric dtype
 * but bool; logical_not sees any dtype and writes bool. Otherwise out's dtype is x's. */
int td_cpu_unary(tide_op op, tide_tensor *out, const tide_tensor *x);
/* a and b have one dtype and broadcast to out's shape (they may have fewer dims). out's dtype
 * is theirs, or bool for eq/ne/lt/le/gt/ge/logical_and/logical_or. On bool, add/maximum mean
 * or, mul/minimum mean and; sub/div/pow/floor_divide/remainder never see bool. */
int td_cpu_binary(tide_op op, tide_tensor *out, const tide_tensor *a, const tide_tensor *b);
/* cond is bool; a, b and out share a dtype; all three broadcast to out's shape. */
int td_cpu_where(tide_tensor *out, const tide_tensor *cond, const tide_tensor *a,
                 const tide_tensor *b);

/* ---- cpu_reduce.c ---- */
/* op is SUM/PROD/MAX/MIN; dims (ascending, distinct, non-negative) are reduced; out has x's
 * ndim with size 1 on the reduced dims. out's dtype: int64 for SUM/PROD of integer and bool
 * inputs, else x's. An empty reduction gives 0 (SUM) or 1 (PROD); MAX/MIN never see one.
 * NaN propagates through MAX/MIN. */
int td_cpu_reduce(tide_op op, tide_tensor *out, const tide_tensor *x, const int64_t *dims,
                  int ndims);
/* op is ARGMAX/ARGMIN along dim; out (int64) has x's ndim with size 1 at dim. The first
 * extreme wins; a NaN counts as the extreme (the first NaN wins). dim's size is > 0. */
int td_cpu_argreduce(tide_op op, tide_tensor *out, const tide_tensor *x, int dim);

/* ---- cpu_copy.c ---- */
/* dst (any strides, may be a view) = src converted to dst's dtype; same shape. */
int td_cpu_copy(tide_tensor *dst, const tide_tensor *src);
int td_cpu_fill(tide_tensor *dst, double value);
/* out[i] = start + i*step; symmetric: the second half is end - (n-1-i)*step (linspace). */
int td_cpu_iota(tide_tensor *out, double start, double step, double end, bool symmetric);
int td_cpu_cat(tide_tensor *out, tide_tensor *const *xs, int n, int dim);
int td_cpu_pad(tide_tensor *out, const tide_tensor *x, const int64_t *pads, double value);
int td_cpu_flip(tide_tensor *out, const tide_tensor *x, const int64_t *dims, int ndims);

/* ---- cpu_scan.c ---- */
/* Inclusive prefix sums of x along dim (a 0-dim x: dim is ignored); out has x's shape and dtype,
 * float32, float64 or int64. Sequential along dim, accumulated in double (float) or wrapping
 * int64. */
int td_cpu_cumsum(tide_tensor *out, const tide_tensor *x, int dim);
/* CUMSUM of any kind (tide_scan_kind): the sums above, running products, logsumexps, and the
 * int64 positions of the running max/min (core/primitive.h). */
int td_cpu_scan(tide_tensor *out, const tide_tensor *x, int dim, int kind);
/* ---- cpu_sort.c ---- */
/* SORT: int64 positions sorting each line along dim, stable, NaN the largest. */
int td_cpu_sort(tide_tensor *out, const tide_tensor *x, int dim, bool descending);
/* ---- cpu_attention.c ---- */
/* SDPA and SDPA_GRAD (core/primitive.h): blocked, online-softmax attention and its
 * recomputing backward, float32/float64 through BLAS, threaded over (batch, query block) and
 * batches. */
int td_cpu_sdpa(tide_tensor *out, tide_tensor *const *in, const tide_attrs *a);
int td_cpu_sdpa_grad(tide_tensor *out, tide_tensor *const *in, int nin, const tide_attrs *a);

/* ---- cpu_topk.c ---- */
/* out (int64, x's shape with k at dim) = positions of the k best elements of each line, best
 * first; NaN above every number, ties to the lower position. x is not bool. */
int td_cpu_topk(tide_tensor *out, const tide_tensor *x, int dim, int64_t k, bool largest);

/* ---- cpu_matmul.c ---- */
/* a [..., M, K] and b [..., K, N] have out's dtype and ndim; batch dims broadcast to out's
 * (stride 0 where expanded). float32/float64 through BLAS, integers by a blocked loop. */
int td_cpu_matmul(tide_tensor *out, const tide_tensor *a, const tide_tensor *b);
/* The same for rows of a larger float product (a matmul's epilogue block, cpu_jit_run.c) of
 * whole_rows rows (the tall product's when the batch folds): with gemm_rows, one row is a gemm
 * call, as in the larger product's own gemm cut by rows, where a product of one row alone is a
 * gemv (another summation, other bits); whole_rows picks the kernel the larger product's
 * eager call picks (cpu_matmul_direct.c or BLAS). */
int td_cpu_matmul_rows_of(tide_tensor *out, const tide_tensor *a, const tide_tensor *b,
                          bool gemm_rows, int64_t whole_rows);
/* Rows of C per BLAS call when td_cpu_matmul runs nbatch [m, k] x [k, n] products (a batch
 * that folds into one tall product given as one matrix of nbatch * m rows), or 0 when its calls
 * cut C by columns. A function of the shape and td_num_threads() alone; the jit's matmul
 * epilogues make the same calls, so they get the same bits. */
int64_t td_cpu_matmul_call_rows(int64_t nbatch, int64_t m, int64_t n, int64_t k);

/* ---- cpu_linear_half.c ---- */
/* out [M, N] float32 = x [M, K] float32 @ w [N, K]^T, w float16 or bfloat16 widened in
 * registers (LINEAR_HALF). Any strides. */
int td_cpu_linear_half(tide_tensor *out, const tide_tensor *x, const tide_tensor *w);

/* ---- cpu_conv.c ---- */
/* p = (stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups); float32/float64. */
int td_cpu_conv2d(tide_tensor *out, const tide_tensor *x, const tide_tensor *w, const int64_t *p);
/* conv2d with out = conv + bias[o] (O values, or NULL), then relu when asked, in one pass, when
 * the direct path takes the shape: 1; 0 when it does not (nothing written); -1 on error. */
int td_cpu_conv2d_fused(tide_tensor *out, const tide_tensor *x, const tide_tensor *w,
                        const int64_t *p, const float *bias, bool relu);
int td_cpu_conv2d_grad_input(tide_tensor *out, const tide_tensor *grad_out, const tide_tensor *w,
                             const int64_t *p);
int td_cpu_conv2d_grad_weight(tide_tensor *out, const tide_tensor *x, const tide_tensor *grad_out,
                              const int64_t *p);
/* op is MAX_POOL2D, MAX_POOL2D_INDICES or AVG_POOL2D; p = (k_h, k_w, stride_h, stride_w, pad_h,
 * pad_w, count_include_pad). */
int td_cpu_pool2d(tide_op op, tide_tensor *out, const tide_tensor *x, const int64_t *p);
int td_cpu_avg_pool2d_grad(tide_tensor *out, const tide_tensor *grad_out, const int64_t *p);
/* cpu_pool_isa.c, per tier: 2x2, stride-2 max over nrows output rows (input rows 2r and 2r + 1
 * at x + 2r*s2, s2 apart, contiguous; output row r at out + r*ow), the first whole vector
 * steps of the n outputs of each; returns how many of each row were written. */
int64_t td_max2x2_rows_f32_baseline(const float *x, int64_t s2, float *out, int64_t ow,
                                    int64_t n, int64_t nrows);
int64_t td_max2x2_rows_f32_avx2(const float *x, int64_t s2, float *out, int64_t ow, int64_t n,
                                int64_t nrows);
int64_t td_max2x2_rows_f32_avx512(const float *x, int64_t s2, float *out, int64_t ow,
                                  int64_t n, int64_t nrows);

/* ---- cpu_index.c ---- */
/* Every index value is checked against its bound; an error names the index and the bound. */
int td_cpu_gather(tide_tensor *out, const tide_tensor *x, const tide_tensor *index, int dim);
int td_cpu_scatter_add(tide_tensor *out, const tide_tensor *x, const tide_tensor *index,
                       const tide_tensor *src, int dim);
int td_cpu_index_select(tide_tensor *out, const tide_tensor *x, const tide_tensor *index, int dim);

/* ---- cpu_quant.c ---- */
/* QUANTIZE, DEQUANTIZE, QLINEAR (core/primitive.h): contiguous operands, fmt a tide_qformat. */
int td_cpu_quantize(tide_tensor *out, const tide_tensor *w, int fmt);
int td_cpu_dequantize(tide_tensor *out, const tide_tensor *q, int fmt);
int td_cpu_qlinear(tide_tensor *out, const tide_tensor *x, const tide_tensor *q, int fmt);

/* ---- cpu_random.c ---- */
/* distribution 0: uniform [a, b); 1: normal(mean a, std b); 2: integers in [a, b). Element i
 * depends only on (seed, offset + i). */
int td_cpu_random(tide_tensor *out, int distribution, uint64_t seed, uint64_t offset, double a,
                  double b);

#endif
