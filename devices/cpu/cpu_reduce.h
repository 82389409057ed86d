/*
 * cpu_reduce.h — what cpu_reduce.c (layout analysis, threading) and cpu_reduce_isa.c (the
 * inner loops, compiled once per vector ISA) share: the wide accumulator, the kernel table and
 * the tuning constants both sides must agree on.
 *
 * A reduction is split into "runs": 1-D pieces of the input a kernel reduces in one call. Each
 * (op, dtype) pair has one wide accumulator kind, in which partial results are combined:
 *   float32 SUM/PROD, float64 anything, float32 MAX/MIN -> double (.f)
 *   integer and bool SUM/PROD                           -> uint64, wrapping (.u)
 *   integer and bool MAX/MIN                            -> int64 (.i)
 */
#ifndef TIDE_CPU_REDUCE_H
#define TIDE_CPU_REDUCE_H

#include <stdint.h>

#include "cpu_isa.h"

typedef union td_red_acc {
    double f;
    uint64_t u;
    int64_t i;
} td_red_acc;

/* Reduction ops in the order of tide_op's SUM, PROD, MAX, MIN; arg ops ARGMAX, ARGMIN. */
enum { TD_RED_SUM, TD_RED_PROD, TD_RED_MAX, TD_RED_MIN, TD_RED_NOPS };
enum { TD_ARG_MAX, TD_ARG_MIN, TD_ARG_NOPS };
#define TD_RED_NDTYPES 6 /* tide_dtype FLOAT32 .. BOOL */

/* Columns one rows-kernel call handles: the caller tiles wider rows, so the kernels keep their
 * scratch on the stack. */
#define TD_RED_TILE 2048

/* Reduces n elements at x, stride elements apart (any stride, 0 and negative included; 1 is
 * the fast path). n == 0 gives the identity. */
typedef td_red_acc (*td_red_run_fn)(const void *x, int64_t n, int64_t stride);
/* out[k] (wide) = the run of n elements at x + k * run_stride, for k < count: many short runs
 * without a call each. */
typedef void (*td_red_multi_fn)(const void *x, int64_t n, int64_t stride, int64_t count,
                                int64_t run_stride, void *out);
/* acc[j] (wide, ncols <= TD_RED_TILE) is combined with x[r * row_stride + j] for every r < nrows
 * and j < ncols: reduces rows into an accumulator row. */
typedef void (*td_red_rows_fn)(const void *x, int64_t nrows, int64_t row_stride, int64_t ncols,
                               void *acc);
/* Position of the first extreme among n elements (n >= 1), NaN counting as the extreme. */
typedef int64_t (*td_arg_run_fn)(const void *x, int64_t n, int64_t stride);
/* out[j * out_stride] = position r of the first extreme of x[r * row_stride + j] over r < nrows
 * (nrows >= 1), for j < ncols <= TD_RED_TILE. */
typedef void (*td_arg_rows_fn)(const void *x, int64_t nrows, int64_t row_stride, int64_t ncols,
                               int64_t *out, int64_t out_stride);

typedef struct td_red_kernels {
    td_red_run_fn run[TD_RED_NOPS][TD_RED_NDTYPES];
    td_red_multi_fn multi[TD_RED_NOPS][TD_RED_NDTYPES];
    td_red_rows_fn rows[TD_RED_NOPS][TD_RED_NDTYPES];
    td_arg_run_fn arg_run[TD_ARG_NOPS][TD_RED_NDTYPES];
    td_arg_rows_fn arg_rows[TD_ARG_NOPS][TD_RED_NDTYPES];
} td_red_kernels;

extern const td_red_kernels td_red_kernels_baseline;
extern const td_red_kernels td_red_kernels_avx2;
/* The table of the tier this process runs (td_cpu_isa()): eager's and the jit's. */
const td_red_kernels *td_red_kernels_current(void);
extern const td_red_kernels td_red_kernels_avx512;

#endif
