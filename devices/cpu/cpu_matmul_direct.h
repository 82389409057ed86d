/*
 * cpu_matmul_direct.h — float32 products summed in registers (cpu_matmul_direct.c), for
 * cpu_matmul.c.
 */
#ifndef TIDE_CPU_MATMUL_DIRECT_H
#define TIDE_CPU_MATMUL_DIRECT_H

#include <stdbool.h>
#include <stdint.h>

/* Whether C [m, n] = A [m, k] B [k, n] goes to td_matmul_direct on this CPU: B row-major
 * (b_trans false), and plan_m (the rows of the whole product, whatever block of them this
 * call is: see the .c file), n and k in the measured range. */
bool td_matmul_direct_fits(int64_t plan_m, int64_t n, int64_t k, bool b_trans);
/* C (row-major, ldc = n) = A (row-major, lda) B (row-major, ldb). 0, or -1 when out of memory
 * (no error set). */
int td_matmul_direct(int64_t m, int64_t n, int64_t k, const float *a, int64_t lda,
                     const float *b, int64_t ldb, float *c);

#endif
