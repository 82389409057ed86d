/*
 * cpu_blas.h — the CPU device's door to BLAS. Everything that needs a GEMM (matmul, conv2d's
 * im2col path, their gradients) calls these, so the choice of BLAS library and of its kernels
 * lives in one place (cpu_blas.c). Row-major; lda/ldb/ldc in elements.
 */
#ifndef TIDE_CPU_BLAS_H
#define TIDE_CPU_BLAS_H

#include <stdbool.h>
#include <stdint.h>

/* C = alpha * op(A) * op(B) + beta * C, op(A) m x k, op(B) k x n. */
void td_blas_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                   const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                   int64_t ldc);
void td_blas_dgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                   const double *a, int64_t lda, const double *b, int64_t ldb, double beta,
                   double *c, int64_t ldc);

#endif
