/*
 * cpu_elementwise.h — what cpu_elementwise.c (strides, broadcasting, threads) and
 * cpu_elementwise_isa.c (the arithmetic, compiled once per vector ISA) share: a table of
 * contiguous 1-D kernels per op and dtype.
 *
 * Every kernel reads n contiguous elements of each input and writes n contiguous elements to
 * out. Strided and broadcast operands never reach a kernel: the driver gathers them into small
 * buffers first, so each (op, dtype) pair needs one loop, which the compiler vectorizes for the
 * ISA at hand. out never overlaps an input.
 */
#ifndef TIDE_CPU_ELEMENTWISE_H
#define TIDE_CPU_ELEMENTWISE_H

#include <stdint.h>

#include "../../core/primitive.h"
#include "../../core/tide.h"

typedef void (*td_ew_unary_fn)(int64_t n, void *out, const void *x);
typedef void (*td_ew_binary_fn)(int64_t n, void *out, const void *a, const void *b);
typedef void (*td_ew_where_fn)(int64_t n, void *out, const void *cond, const void *a,
                               const void *b);
/* out = op2(op1(a, b), c), or op2(c, op1(a, b)): see td_ew_kernels.arith2 */
typedef void (*td_ew_arith2_fn)(int64_t n, void *out, const void *a, const void *b,
                                const void *c);

enum {
    TD_EW_NUM_UNARY = TIDE_OP_LAST_UNARY - TIDE_OP_FIRST_UNARY + 1,
    TD_EW_NUM_BINARY = TIDE_OP_LAST_BINARY - TIDE_OP_FIRST_BINARY + 1,
    TD_EW_WHERE_SIZES = 4, /* where[log2(element size)]: 1, (2), 4, 8 bytes */
    TD_EW_ARITH2_OPS = 4,  /* add, sub, mul, div: TIDE_OP_ADD and the three after it */
};

/* A NULL entry is a combination the dispatcher never sends (e.g. exp on int32). */
typedef struct td_ew_kernels {
    td_ew_unary_fn unary[TD_EW_NUM_UNARY][TIDE_NUM_DTYPES];
    td_ew_binary_fn binary[TD_EW_NUM_BINARY][TIDE_NUM_DTYPES];
    td_ew_where_fn where[TD_EW_WHERE_SIZES];
    /* Two float ops in one pass, for the jit's tiles (the value of op1 needed nowhere else):
     * arith2[float64?][op1 - ADD][op2 - ADD][c is op2's first operand?], each op rounded on its
     * own, so the result is bitwise what the two binary kernels give in turn. */
    td_ew_arith2_fn arith2[2][TD_EW_ARITH2_OPS][TD_EW_ARITH2_OPS][2];
    /* A float add/sub/mul/div with one operand a single value (a row's max or sum, a scalar),
     * for the jit's tiles and rows: scalar[float64?][op - ADD][a is the single value?]; the
     * value is read once instead of from a buffer it was copied across, and each lane's result
     * is the binary kernel's. */
    td_ew_binary_fn scalar[2][TD_EW_ARITH2_OPS][2];
    /* exp(a[i] - *b) in float32, bitwise the sub then exp kernels: the jit's rows (softmax) */
    td_ew_binary_fn sub_s_exp_f32;
} td_ew_kernels;

/* One table per compile of cpu_elementwise_isa.c (see cpu_isa.h). */
extern const td_ew_kernels td_ew_kernels_baseline;
extern const td_ew_kernels td_ew_kernels_avx2;
extern const td_ew_kernels td_ew_kernels_avx512;

#endif /* TIDE_CPU_ELEMENTWISE_H */
