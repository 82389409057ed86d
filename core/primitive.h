/*
 * primitive.h — the vocabulary that ops/ and the devices share: the primitive op ids and the
 * attribute record that travels with each op. ops/ owns what each op means (op_table.c); a
 * device only needs these ids to run a kernel, so they live in core/, which devices may include.
 */
#ifndef TIDE_PRIMITIVE_H
#define TIDE_PRIMITIVE_H

#include <stdbool.h>
#include <stdint.h>

#include "tide.h"

/* X-macro lists keep the enum, the names and the kernel tables in one order. */
#define TIDE_UNARY_OPS(X) TIDE_UNARY_PLAIN_OPS(X) X(GELU, gelu)
/* The unary ops whose public function is tide_<name>(x) (ops/elementwise.c). GELU's takes the
 * tanh approximation's flag too (ops/nn_activation.c): the primitive is the exact
 * x * Phi(x), one op so that autograd saves x alone (the composite of exp and arithmetic it
 * replaced saved ~19 tensors of x's size: 121 of a GPT block's 150 MB). */
#define TIDE_UNARY_PLAIN_OPS(X)                                                                    \
    X(NEG, neg) X(ABS, abs) X(EXP, exp) X(LOG, log) X(SQRT, sqrt) X(RSQRT, rsqrt) X(SIN, sin)     \
    X(COS, cos) X(TANH, tanh) X(SIGMOID, sigmoid) X(RELU, relu) X(FLOOR, floor) X(CEIL, ceil)     \
    X(ROUND, round) X(SIGN, sign) X(RECIPROCAL, reciprocal) X(LOGICAL_NOT, logical_not)           \
    X(ERF, erf) X(LOG1P, log1p) X(EXPM1, expm1) X(LOG2, log2) X(TAN, tan) X(ASIN, asin)          \
    X(ACOS, acos) X(ATAN, atan) X(SINH, sinh) X(COSH, cosh) X(TRUNC, trunc)

#define TIDE_BINARY_OPS(X)                                                                         \
    X(ADD, add) X(SUB, sub) X(MUL, mul) X(DIV, div) X(POW, pow) X(MAXIMUM, maximum)               \
    X(MINIMUM, minimum) X(FLOOR_DIVIDE, floor_divide) X(REMAINDER, remainder) X(EQ, eq)           \
    X(NE, ne) X(LT, lt) X(LE, le) X(GT, gt) X(GE, ge)                                              \
    X(LOGICAL_AND, logical_and) X(LOGICAL_OR, logical_or) X(ATAN2, atan2) X(FMOD, fmod)

#define TIDE_REDUCE_OPS(X) X(SUM, sum) X(PROD, prod) X(MAX, max) X(MIN, min)

#define TIDE_ARGREDUCE_OPS(X) X(ARGMAX, argmax) X(ARGMIN, argmin)

/* Ops that only make a new view of their input's storage. */
#define TIDE_VIEW_OPS(X)                                                                           \
    X(RESHAPE, reshape) X(PERMUTE, permute) X(EXPAND, expand) X(SLICE, slice) X(SELECT, select)   \
    X(DIAGONAL, diagonal) X(UNFOLD, unfold)

/* Ops that write a fresh output (or, for COPY and FILL, into a destination view). */
#define TIDE_OTHER_OPS(X)                                                                          \
    X(WHERE, where) X(CAST, cast) X(COPY, copy) X(FILL, fill) X(IOTA, iota) X(CAT, cat)           \
    X(PAD, pad) X(FLIP, flip)

/* Index-valued ops; the index input is int64 or int32. */
#define TIDE_INDEX_OPS(X) X(GATHER, gather) X(SCATTER_ADD, scatter_add) X(INDEX_SELECT, index_select)

/* Library ops, opaque to fusion (BLAS, convolution, pooling), the random-number source, and
 * the ops the dispatcher runs itself (no device kernel): TO, the copy between devices, and the
 * collectives between processes (ops/collective.c over distributed/). */
#define TIDE_LIBRARY_OPS(X)                                                                        \
    X(MATMUL, matmul) X(CONV2D, conv2d) X(CONV2D_GRAD_INPUT, conv2d_grad_input)                   \
    X(CONV2D_GRAD_WEIGHT, conv2d_grad_weight) X(MAX_POOL2D, max_pool2d)                           \
    X(MAX_POOL2D_INDICES, max_pool2d_indices) X(AVG_POOL2D, avg_pool2d)                           \
    X(AVG_POOL2D_GRAD, avg_pool2d_grad) X(RANDOM, random) X(TO, to)                               \
    X(CUMSUM, cumsum) X(TOPK, topk) X(SDPA, sdpa) X(SDPA_GRAD, sdpa_grad)                         \
    X(QUANTIZE, quantize) X(DEQUANTIZE, dequantize) X(QLINEAR, qlinear)                           \
    X(LINEAR_HALF, linear_half) X(SORT, sort)                                                    \
    X(ALL_REDUCE, all_reduce) X(BROADCAST, broadcast) X(ALL_GATHER, all_gather)                   \
    X(REDUCE_SCATTER, reduce_scatter)

#define TIDE_ALL_OPS(X)                                                                            \
    TIDE_UNARY_OPS(X) TIDE_BINARY_OPS(X) TIDE_REDUCE_OPS(X) TIDE_ARGREDUCE_OPS(X)                 \
    TIDE_VIEW_OPS(X) TIDE_OTHER_OPS(X) TIDE_INDEX_OPS(X) TIDE_LIBRARY_OPS(X)

typedef enum tide_op {
#define TIDE_OP_ENUM(id, name) TIDE_OP_##id,
    TIDE_ALL_OPS(TIDE_OP_ENUM)
#undef TIDE_OP_ENUM
    TIDE_NUM_OPS
} tide_op;

#define TIDE_OP_FIRST_UNARY TIDE_OP_NEG
#define TIDE_OP_LAST_UNARY TIDE_OP_GELU
#define TIDE_OP_FIRST_BINARY TIDE_OP_ADD
#define TIDE_OP_LAST_BINARY TIDE_OP_FMOD

static inline bool tide_op_is_unary(tide_op op)
{
    return op >= TIDE_OP_FIRST_UNARY && op <= TIDE_OP_LAST_UNARY;
}
static inline bool tide_op_is_binary(tide_op op)
{
    return op >= TIDE_OP_FIRST_BINARY && op <= TIDE_OP_LAST_BINARY;
}
/* The ops between processes, which the dispatcher runs over distributed/ (no device does). */
static inline bool tide_op_is_collective(tide_op op)
{
    return op >= TIDE_OP_ALL_REDUCE && op <= TIDE_OP_REDUCE_SCATTER;
}

/*
 * Attributes of one op application. Which fields mean what, per op:
 *  reductions SUM/PROD/MAX/MIN: ints = the reduced dims (normalized, ascending), keepdim.
 *  ARGMAX/ARGMIN: ints[0] = the dim (input made 1-D when reducing everything), keepdim.
 *  CAST/COPY: the destination dtype is the output's; nothing here.
 *  FILL: values[0] = the value.  IOTA: out[i] = values[0] + i * values[1]; with ints[0] = 1
 *  (linspace) the second half counts back from values[2] so both endpoints are exact.
 *  CAT: ints[0] = the dim.  PAD: ints = (before, after) per dim, dim 0 first; values[0] = fill.
 *  FLIP: ints = the flipped dims.
 *  GATHER, INDEX_SELECT: in = (x, index), ints[0] = dim.  SCATTER_ADD: in = (x, index, src),
 *  ints[0] = dim; out = x with src added at the indexed places. Kernels check every index.
 *  MATMUL: in = (a [..., M, K], b [..., K, N]) with equal ndim >= 2 whose batch dims broadcast
 *  (expanded views with stride 0 are fine); out [batch..., M, N].
 *  LINEAR_HALF: in = (x [M, K] float32, w [N, K] float16 or bfloat16), any strides; out [M, N]
 *  float32 = x @ float32(w)^T: each weight widened exactly, only the summation order differs
 *  from matmul on a widened copy (ops/linear_half.c; the CPU never makes that copy).
 *  CONV2D: in = (x [N,C,H,W], w [O,C/g,kH,kW]); CONV2D_GRAD_INPUT: in = (grad_out, w), out has
 *  the input's shape; CONV2D_GRAD_WEIGHT: in = (x, grad_out), out has w's shape. For all three
 *  ints = (stride_h, stride_w, pad_h, pad_w, dil_h, dil_w, groups).
 *  MAX_POOL2D, MAX_POOL2D_INDICES (int64 out: position in the H*W plane), AVG_POOL2D:
 *  in = (x), ints = (k_h, k_w, stride_h, stride_w, pad_h, pad_w, count_include_pad).
 *  AVG_POOL2D_GRAD: in = (grad_out), out has the input's shape, the same ints.
 *  RANDOM: no inputs; ints = (distribution: 0 uniform [a, b), 1 normal (mean a, std b),
 *  2 integers uniform in [a, b); seed; offset), values = (a, b). Element i of the output is a
 *  function of (seed, offset + i) alone, so every thread count and device agrees.
 *  CUMSUM: in = (x), out has x's shape; ints[0] = the dim (0 for a 0-dim x), ints[1] = the
 *  kind (tide_scan_kind; 0, the sum, when nints is 1), each inclusive and in order along the dim:
 *  SUM and PROD (float32, float64, int64, out x's dtype), LOGSUMEXP (float32/float64), and
 *  ARGMAX/ARGMIN (any dtype but bool, out int64: the position of the running max (min), the
 *  later one on ties, a NaN's once one is met, as torch.cummax).
 *  SORT: in = (x), out int64 of x's shape: the positions along ints[0] that sort each line,
 *  ascending (ints[1] = 0) or descending (1); stable; NaN above every number (last ascending,
 *  first descending), as torch.sort. The values are a gather at them.
 *  TOPK: in = (x), out int64: the positions along dim of the k largest (smallest) elements,
 *  best first, ties to the lower position, NaN above everything; ints = (dim, k, largest).
 *  SDPA (fused attention, ops/attention.c): in = (q [B.., L, E], k [B.., S, E], v [B.., S, Ev]
 *  [, mask [B.., L, S]]), all with the same batch dims (stride 0 where broadcast), q/k/v rows
 *  with element stride 1, the mask (q's dtype, added to the scores) any strides. ints =
 *  (is_causal, has_mask [, heads_last]), values[0] = the scale. out: 1-D, N*L*Ev outputs
 *  (contiguous [B.., L, Ev]; heads_last: [B.. but the last, L, H, Ev] with H the last batch
 *  dim) then N*L row logsumexps of the scaled, masked scores (N = batch numel).
 *  SDPA_GRAD: in = (q, k, v [, mask], packed (SDPA's out), dout [B.., L, Ev] rows of stride 1,
 *  any batch strides), the same attrs; out 1-D: dq (N*L*E) then dk (N*S*E) then dv (N*S*Ev),
 *  each laid out as SDPA's outputs.
 *  QUANTIZE, DEQUANTIZE, QLINEAR (ops/quant.c, block formats in core/quant.h): ints[0] = the
 *  format (tide_qformat). QUANTIZE: in = (w float32 [rows, K], contiguous), out uint8
 *  [rows, K/32 * block bytes]. DEQUANTIZE: in = (q uint8 [rows, K/32 * block bytes],
 *  contiguous), ints[1] = K, out float32 [rows, K]. QLINEAR: in = (x float32 [M, K]
 *  contiguous, q as DEQUANTIZE's), out float32 [M, rows] = x @ dequant(q)^T with x quantized
 *  per block of 32 to int8 (core/quant.h) and integer block dot products.
 *  TO: in = (x), out on the destination device (its tensor's device); nothing here. The
 *  dispatcher copies through the two devices' read/write; it never reaches a device's run.
 *  ALL_REDUCE, BROADCAST (in place into dst, or into a fresh out of x's shape), ALL_GATHER,
 *  REDUCE_SCATTER: in = (x); ints[0] = the reduction (tide_reduce_op) or BROADCAST's root.
 *  ALL_GATHER's out is [world * n, ...] ([world] for a 0-dim x), REDUCE_SCATTER's [n / world,
 *  ...]. The dispatcher runs them over distributed/ (ops/collective.c), never a device.
 *  View ops: shape/strides/offset of the result are on the output tensor itself; ints hold the
 *  user's arguments (RESHAPE: shape; PERMUTE: perm; EXPAND: shape; SLICE: dim, start, end,
 *  step; SELECT: dim, index; DIAGONAL: offset, dim1, dim2; UNFOLD: dim, size, step) so a tracer
 *  can replay them.
 */
typedef struct tide_attrs {
    int64_t ints[2 * TIDE_MAX_DIMS];
    int nints;
    double values[3];
    bool keepdim;
} tide_attrs;

/* CUMSUM's ints[1]. */
typedef enum tide_scan_kind {
    TIDE_SCAN_SUM,
    TIDE_SCAN_PROD,
    TIDE_SCAN_LOGSUMEXP,
    TIDE_SCAN_ARGMAX,
    TIDE_SCAN_ARGMIN
} tide_scan_kind;

const char *tide_op_name(tide_op op);

#endif /* TIDE_PRIMITIVE_H */
