/*
 * cpu_linear_half.h — y = x W^T for float32 x and a weight W of float16, bfloat16 (or float32)
 * rows, each weight widened to float32 in registers (the LINEAR_HALF primitive,
 * cpu_linear_half.c). One table per vector tier (cpu_linear_half_isa.c, compiled per tier as
 * cpu_isa.h says).
 *
 * rows(m, n, k, x, ldx, w, ldw, y, ldy): y[i, j] = sum over t < k of x[i, t] * widen(w[j, t])
 * for i < m, j < n; rows of x, w and y with unit element stride and leading dimensions ldx,
 * ldw, ldy in elements. W is read in tiles of 4 rows; for m > 1 a tile serves every row of x
 * while it is in L1. A sum's order depends on k alone (lanes of 8, two accumulators a row, then
 * the k % 8 tail), so a row of y does not depend on m, n or the thread that computed it.
 */
#ifndef TIDE_CPU_LINEAR_HALF_H
#define TIDE_CPU_LINEAR_HALF_H

#include <stdint.h>

typedef void (*td_lh_rows_fn)(int64_t m, int64_t n, int64_t k, const float *x, int64_t ldx,
                              const void *w, int64_t ldw, float *y, int64_t ldy);

typedef struct td_lh_kernels {
    td_lh_rows_fn f16, bf16, f32;
} td_lh_kernels;

extern const td_lh_kernels td_lh_kernels_baseline;
extern const td_lh_kernels td_lh_kernels_avx2;
extern const td_lh_kernels td_lh_kernels_avx512;

/* The table of the tier this process runs (td_cpu_isa()). */
const td_lh_kernels *td_lh_kernels_current(void);

#endif
