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
 * or, mul/minimum mean and; sub/div/pow never see bool. */
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

#endif
