/*
 * cpu_blas.h — the CPU device's door to BLAS. Everything that needs a GEMM (matmul, conv2d's
 * im2col path, their gradients) calls these, so the choice of BLAS library and of its kernels
 * lives in one place (cpu_blas.c). Row-major; lda/ldb/ldc and increments in elements.
 *
 * OpenBLAS is loaded at first use with the kernels chosen for this CPU (devices/cpu/README.md,
 * "BLAS"). The gemm/gemv functions never fail: when OpenBLAS could not be loaded, or a size does
 * not fit BLAS's 32-bit integers, they run a plain loop instead. Callers that want a clear
 * error rather than that slow path call td_blas_ready() first.
 */
#ifndef TIDE_CPU_BLAS_H
#define TIDE_CPU_BLAS_H

#include <stdbool.h>
#include <stdint.h>

/* Loads OpenBLAS if that has not happened yet and gives it tide's thread count. 0, or -1 with an
 * error (naming op) that says why OpenBLAS cannot be used. Call it outside td_parallel_for. */
int td_blas_ready(const char *op);

/* C = alpha * op(A) * op(B) + beta * C, op(A) m x k, op(B) k x n. beta == 0: C is not read. */
void td_blas_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                   const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                   int64_t ldc);
void td_blas_dgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                   const double *a, int64_t lda, const double *b, int64_t ldb, double beta,
                   double *c, int64_t ldc);

/* y = alpha * op(A) * x + beta * y, op(A) m x n (A is stored n x m when trans). incx, incy > 0.
 * beta == 0: y is not read. */
void td_blas_sgemv(bool trans, int64_t m, int64_t n, float alpha, const float *a, int64_t lda,
                   const float *x, int64_t incx, float beta, float *y, int64_t incy);
void td_blas_dgemv(bool trans, int64_t m, int64_t n, double alpha, const double *a, int64_t lda,
                   const double *x, int64_t incx, double beta, double *y, int64_t incy);

/* OpenBLAS runs single-threaded (one pool of threads: tide's). td_blas_sgemm/dgemm split a
 * product with more multiply-adds (m*n*k) than this over tide's threads; smaller ones run on the
 * calling thread, so callers may run several side by side inside td_parallel_for. */
#define TD_BLAS_GEMM_SINGLE_THREAD_MNK 262144
/* The same for gemv (m*n), split into blocks of y. */
#define TD_BLAS_GEMV_SINGLE_THREAD_MN 9216

/* How td_blas_sgemm/dgemm (gemm_cut) and td_blas_sgemv/dgemv (gemv_cut: blocks of y) cut a
 * product into BLAS calls: count calls of block rows of C (by_rows) or columns, the last one
 * shorter. OpenBLAS's result for an element depends on the call it was computed in (its kernels
 * treat a call's edge rows apart), so the cut is a function of the shape and td_num_threads()
 * alone: not of which thread runs a call, nor of whether the pool was free. Whoever computes
 * the same product in the same calls (the jit's product epilogues) gets the same bits. Called
 * inside td_parallel_for, the gemm and gemv functions make one call: they are a block of an
 * outer cut. */
typedef struct td_blas_cut {
    bool by_rows;
    int64_t block, count;
} td_blas_cut;
td_blas_cut td_blas_gemm_cut(int64_t m, int64_t n, int64_t k);
td_blas_cut td_blas_gemv_cut(int64_t m, int64_t n);

/* What was loaded, for logs, tests and benchmarks: OpenBLAS's own name for the kernels it runs
 * ("SkylakeX"), the core type tide asked for ("" when it left the choice to OpenBLAS), and the
 * library's configuration string. "" before loading or when it failed. */
const char *td_blas_corename(void);
const char *td_blas_requested_core(void);
const char *td_blas_config(void);

#endif
