/* cpu_blas.c — placeholder: calls OpenBLAS's CBLAS directly (the kernel choice comes later). */
#include <cblas.h>

#include "cpu_blas.h"

void td_blas_sgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, float alpha,
                   const float *a, int64_t lda, const float *b, int64_t ldb, float beta, float *c,
                   int64_t ldc)
{
    cblas_sgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, alpha, a, (int)lda, b,
                (int)ldb, beta, c, (int)ldc);
}

void td_blas_dgemm(bool trans_a, bool trans_b, int64_t m, int64_t n, int64_t k, double alpha,
                   const double *a, int64_t lda, const double *b, int64_t ldb, double beta,
                   double *c, int64_t ldc)
{
    cblas_dgemm(CblasRowMajor, trans_a ? CblasTrans : CblasNoTrans,
                trans_b ? CblasTrans : CblasNoTrans, (int)m, (int)n, (int)k, alpha, a, (int)lda, b,
                (int)ldb, beta, c, (int)ldc);
}
