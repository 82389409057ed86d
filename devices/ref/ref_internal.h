/*
 * ref_internal.h — what the reference device's kernels share: reading and writing one element
 * of a tensor of any layout, walking an output in row-major order, and the kernel entry points
 * that ref_device.c's run() calls.
 *
 * Every kernel is a plain scalar loop over output elements in row-major order, computing each
 * element from its definition. Nothing is blocked, vectorized or threaded: the point of this
 * device is to be obviously right, not fast (devices/ref/README.md).
 */
#ifndef TIDE_REF_INTERNAL_H
#define TIDE_REF_INTERNAL_H

#include <stdbool.h>
#include <stdint.h>

#include "../../core/tensor.h"

/* ---- elements (ref_element.c) ------------------------------------------------------------- */

static inline bool ref_is_float(int dtype)
{
    return dtype == TIDE_FLOAT32 || dtype == TIDE_FLOAT64 || td_dtype_is_half(dtype);
}

/* Address of the element at storage offset off (in elements) of t's storage. */
void *ref_at(const tide_tensor *t, int64_t off);
/* The element at storage offset off: as a double (float dtypes, exactly) or as an int64
 * (integer and bool dtypes, exactly; bool reads as its truth value). */
double ref_get_f(const tide_tensor *t, int64_t off);
int64_t ref_get_i(const tide_tensor *t, int64_t off);
/* Writes a double into a float element (rounded once to float32) or an int64 into an integer
 * element (truncated to the dtype's width, as a wrapping conversion; bool: v != 0). */
void ref_set_f(tide_tensor *t, int64_t off, double v);
void ref_set_i(tide_tensor *t, int64_t off, int64_t v);
/* dst's element = src's element converted to dst's dtype by tide's cast rules (core/README.md:
 * float to integer truncates toward zero, NaN/inf/out of range give the integer minimum;
 * anything to bool is != 0). Same dtypes copy the bytes. */
void ref_convert(tide_tensor *dst, int64_t doff, const tide_tensor *src, int64_t soff);
/* v (a double) stored into t's element by the same rules as a cast from float64. */
void ref_store_double(tide_tensor *t, int64_t off, double v);

/* ---- walking ------------------------------------------------------------------------------ */

int64_t ref_numel(const tide_tensor *t);
/* The multi-index of row-major position flat in shape (ndim dims) into idx. */
void ref_unflatten(int ndim, const int64_t *shape, int64_t flat, int64_t *idx);
/* Storage offset of t's element at idx; t is read as if broadcast to a shape of ndim dims
 * (ndim >= t's ndim; size-1 dims of t repeat), so idx has ndim entries. */
int64_t ref_offset_bcast(const tide_tensor *t, int ndim, const int64_t *idx);
/* Storage offset of t's element at idx (t's own ndim entries). */
int64_t ref_offset(const tide_tensor *t, const int64_t *idx);

/* "ref: <op> has no kernel for dtype <dtype>"; returns -1. */
int ref_no_kernel(tide_op op, int dtype);

/* ---- one element of each fusible op ------------------------------------------------------
 * The eager kernels below loop over these, and the group interpreter (ref_jit.c) calls them for
 * each member at each element: the same numerics by construction. Operands are read at their
 * storage offsets, the result written at oo. */

/* Whether ref computes op on operands of dtype (else the eager kernel fails: ref_no_kernel). */
bool ref_unary_has_kernel(tide_op op, int dtype);
bool ref_binary_has_kernel(tide_op op, int dtype);
void ref_unary_at(tide_op op, tide_tensor *out, int64_t oo, const tide_tensor *x, int64_t xo);
void ref_binary_at(tide_op op, tide_tensor *out, int64_t oo, const tide_tensor *a, int64_t ao,
                   const tide_tensor *b, int64_t bo);
void ref_where_at(tide_tensor *out, int64_t oo, const tide_tensor *cond, int64_t co,
                  const tide_tensor *a, int64_t ao, const tide_tensor *b, int64_t bo);

/* A reduction's accumulator (sum/prod/max/min): double for float operands, wrapping int64 for
 * the others; started, fed the reduced elements in row-major order, stored once. */
typedef struct ref_acc {
    double f;
    int64_t i;
    bool nan;
} ref_acc;
ref_acc ref_acc_start(tide_op op);
void ref_acc_add(tide_op op, ref_acc *a, const tide_tensor *x, int64_t off);
/* fl: the operand is a float dtype */
void ref_acc_store(tide_op op, const ref_acc *a, bool fl, tide_tensor *out, int64_t oo);

/* ---- kernels: out as core/device.h describes it; 0 or -1 with the error set --------------- */

int ref_unary(tide_op op, tide_tensor *out, const tide_tensor *x);
int ref_binary(tide_op op, tide_tensor *out, const tide_tensor *a, const tide_tensor *b);
int ref_where(tide_tensor *out, const tide_tensor *cond, const tide_tensor *a,
              const tide_tensor *b);

int ref_reduce(tide_op op, tide_tensor *out, const tide_tensor *x, const int64_t *dims, int ndims);
int ref_argreduce(tide_op op, tide_tensor *out, const tide_tensor *x, int dim);

int ref_copy(tide_tensor *out, const tide_tensor *x);
int ref_fill(tide_tensor *out, double value);
int ref_iota(tide_tensor *out, double start, double step, double end, bool symmetric);
int ref_cat(tide_tensor *out, tide_tensor *const *xs, int n, int dim);
int ref_pad(tide_tensor *out, const tide_tensor *x, const int64_t *pads, double value);
int ref_flip(tide_tensor *out, const tide_tensor *x, const int64_t *dims, int ndims);
/* out (float32, float64 or int64, x's dtype) = inclusive sums along dim, in order. */
int ref_cumsum(tide_tensor *out, const tide_tensor *x, int dim);
/* CUMSUM's other kinds (tide_scan_kind), each output element from its definition (ref_scan.c). */
int ref_scan(tide_tensor *out, const tide_tensor *x, int dim, int kind);
/* ref_quant.c: QUANTIZE, DEQUANTIZE, QLINEAR (contiguous operands, core/quant.h's formats). */
int ref_quantize(tide_tensor *out, const tide_tensor *w, int fmt);
int ref_dequantize(tide_tensor *out, const tide_tensor *q, int fmt);
int ref_qlinear(tide_tensor *out, const tide_tensor *x, const tide_tensor *q, int fmt);
/* SDPA / SDPA_GRAD (core/primitive.h) from their definitions in double (ref_attention.c). */
int ref_sdpa(tide_tensor *out, tide_tensor *const *in, const tide_attrs *a);
int ref_sdpa_grad(tide_tensor *out, tide_tensor *const *in, int nin, const tide_attrs *a);
/* out (int64) = positions of the k best elements along dim, best first (ref_topk.c). */
int ref_topk(tide_tensor *out, const tide_tensor *x, int dim, int64_t k, bool largest);

int ref_gather(tide_tensor *out, const tide_tensor *x, const tide_tensor *index, int dim);
int ref_scatter_add(tide_tensor *out, const tide_tensor *x, const tide_tensor *index,
                    const tide_tensor *src, int dim);
int ref_index_select(tide_tensor *out, const tide_tensor *x, const tide_tensor *index, int dim);

int ref_matmul(tide_tensor *out, const tide_tensor *a, const tide_tensor *b);
int ref_linear_half(tide_tensor *out, const tide_tensor *x, const tide_tensor *w);
/* p = (stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups) */
int ref_conv2d(tide_tensor *out, const tide_tensor *x, const tide_tensor *w, const int64_t *p);
int ref_conv2d_grad_input(tide_tensor *out, const tide_tensor *g, const tide_tensor *w,
                          const int64_t *p);
int ref_conv2d_grad_weight(tide_tensor *out, const tide_tensor *x, const tide_tensor *g,
                           const int64_t *p);
/* p = (k_h, k_w, stride_h, stride_w, pad_h, pad_w, count_include_pad) */
int ref_pool2d(tide_op op, tide_tensor *out, const tide_tensor *x, const int64_t *p);
int ref_avg_pool2d_grad(tide_tensor *out, const tide_tensor *g, const int64_t *p);

int ref_random(tide_tensor *out, int distribution, uint64_t seed, uint64_t offset, double a,
               double b);

#endif /* TIDE_REF_INTERNAL_H */
