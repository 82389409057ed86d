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

/* C [m, n] (row-major, ldc = n) = A [m, k] (rows lda apart) B^T, B [n, k] (rows ldb apart), for
 * cpu_matmul_dot_isa.c's tiles. */
typedef struct td_dot_product {
    const float *a, *b;
    float *c;
    int64_t m, n, k, lda, ldb;
} td_dot_product;

/* Whether C = A B^T with B stored [n, k] by rows goes to td_matmul_dot (plan_m as above). */
bool td_matmul_dot_fits(int64_t plan_m, int64_t n, int64_t k);
/* 0 (nothing to fail: no scratch). */
int td_matmul_dot(const td_dot_product *p);

#define TD_DOT_DECLARE(isa)                                                                        \
    int64_t td_dot_tiles_##isa(const td_dot_product *p);                                           \
    int64_t td_dot_tile_outputs_##isa(void);                                                       \
    void td_dot_run_##isa(const td_dot_product *p, int64_t t0, int64_t t1);
TD_DOT_DECLARE(baseline)
TD_DOT_DECLARE(avx2)
TD_DOT_DECLARE(avx512)
#undef TD_DOT_DECLARE

#endif
