/*
 * cpu_matmul.c — matmul on the CPU. float32/float64 go to BLAS (cpu_blas.h): a matrix whose
 * strides BLAS can describe (unit column stride: row-major with a leading dimension; unit row
 * stride: the transpose of one) is passed as it lies, with the trans flag and leading dimension;
 * any other layout is copied once, before the batch loop. A matrix-vector or vector-matrix
 * product goes to gemv, because gemm with n == 1 is 3-5x slower in OpenBLAS 0.3.21. Batches
 * are spread over tide's threads or left to OpenBLAS's by size (run_blas). bfloat16 products
 * come here only where the CPU has a kernel for them (AMX tiles or AVX512_BF16:
 * cpu_matmul_bf16.c); elsewhere the dispatcher widens them to float32 first. Integers (exact,
 * wrapping like the rest of tide's integer arithmetic) use a blocked loop. Measurements:
 * bench/RESULTS.md.
 */
#include <string.h>

#include "cpu_blas.h"
#include "cpu_kernels.h"
#include "cpu_matmul_bf16.h"
#include "cpu_matmul_direct.h"

/* One input as the batch loop sees it. */
typedef struct operand {
    const char *data;               /* element [0, ..., 0] */
    int64_t bstride[TIDE_MAX_DIMS]; /* per batch dim, in elements; 0 where broadcast */
    int64_t rs, cs;                 /* row and column strides of each matrix */
    bool trans;                     /* BLAS: stored transposed */
    int64_t ld;                     /* BLAS: leading dimension */
    tide_tensor *copy;              /* the contiguous copy, when one was needed */
} operand;

/* Whether a rows x cols matrix with these strides can go to BLAS as it lies, and how. A size-1
 * dim's stride does not matter; BLAS wants a leading dimension >= max(1, stored columns). */
static bool blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, bool *trans,
                        int64_t *ld)
{
    if ((cols == 1 || cs == 1) && (rows == 1 || rs >= (cols > 1 ? cols : 1))) {
        *trans = false;
        *ld = rows == 1 ? (cols > 1 ? cols : 1) : rs;
        return true;
    }
    if ((rows == 1 || rs == 1) && (cols == 1 || cs >= (rows > 1 ? rows : 1))) {
        *trans = true;
        *ld = cols == 1 ? (rows > 1 ? rows : 1) : cs;
        return true;
    }
    return false;
}

static void describe(operand *op, const tide_tensor *x, int nb)
{
    op->data = td_tensor_data(x);
    for (int d = 0; d < nb; d++)
        op->bstride[d] = x->shape[d] == 1 ? 0 : x->strides[d];
    op->rs = x->strides[nb];
    op->cs = x->strides[nb + 1];
}

/* Fills op for x; for BLAS (need_blas) makes a contiguous copy when the layout does not suit.
 * The copy keeps broadcast batch dims at size 1, so an expanded input is copied once. */
static int prepare(operand *op, const tide_tensor *x, int nb, bool need_blas)
{
    memset(op, 0, sizeof *op);
    describe(op, x, nb);
    int64_t rows = x->shape[nb], cols = x->shape[nb + 1];
    if (!need_blas || blas_layout(rows, cols, op->rs, op->cs, &op->trans, &op->ld))
        return 0;
    int64_t shape[TIDE_MAX_DIMS];
    for (int d = 0; d < nb + 2; d++)
        shape[d] = d < nb && op->bstride[d] == 0 ? 1 : x->shape[d];
    tide_tensor *view = td_tensor_view(x, nb + 2, shape, x->strides, x->offset);
    if (!view)
        return -1;
    op->copy = td_tensor_new("matmul", x->device, nb + 2, shape, (tide_dtype)x->dtype);
    int rc = op->copy ? td_cpu_copy(op->copy, view) : -1;
    tide_release(view);
    if (rc < 0)
        return -1;
    describe(op, op->copy, nb);
    blas_layout(rows, cols, op->rs, op->cs, &op->trans, &op->ld); /* row-major now */
    return 0;
}

/* Matrices per thread from which a batch's tasks are whole matrices (enough to balance). */
#define BATCH_TASKS_PER_THREAD 4

typedef struct mm_job {
    int nb;                        /* batch dims */
    int64_t bshape[TIDE_MAX_DIMS]; /* the output's batch sizes */
    int64_t m, n, k;
    size_t esize;
    tide_dtype dtype;
    operand a, b;
    char *out;
    int64_t rows, blocks; /* BLAS tasks: blocks of rows rows per product */
    bool gemm_rows; /* rows of a product with more: one row is a gemm call too (as the whole
                     * product's gemm, cut by rows, makes it), never a gemv */
    int64_t plan_m; /* rows of the product as eager runs it whole: picks the kernel */
    int failed;     /* a direct product (cpu_matmul_direct.c) ran out of memory */
} mm_job;

/* Element offsets of batch t's matrices in a and b. */
static void batch_offsets(const mm_job *j, int64_t t, int64_t *oa, int64_t *ob)
{
    *oa = *ob = 0;
    for (int d = j->nb - 1; d >= 0; d--) {
        int64_t i = t % j->bshape[d];
        t /= j->bshape[d];
        *oa += i * j->a.bstride[d];
        *ob += i * j->b.bstride[d];
    }
}

/* ---- floating point: BLAS -------------------------------------------------------------------- */

/* One product of op(A) [m x k] and op(B) [k x n] into out (row-major, ldc = n). */
static void blas_product(const mm_job *j, const char *pa, const char *pb, char *pc, int64_t m)
{
    const operand *a = &j->a, *b = &j->b;
    int64_t n = j->n, k = j->k;
    /* The vector's increment is the stride along k, which the layout already knows. */
    if (j->dtype == TIDE_FLOAT32) {
        if (n == 1)
            td_blas_sgemv(a->trans, m, k, 1.0f, (const float *)pa, a->ld, (const float *)pb,
                          b->trans ? 1 : b->ld, 0.0f, (float *)pc, 1);
        else if (m == 1 && !j->gemm_rows)
            td_blas_sgemv(!b->trans, n, k, 1.0f, (const float *)pb, b->ld, (const float *)pa,
                          a->trans ? a->ld : 1, 0.0f, (float *)pc, 1);
        else if (!a->trans && td_matmul_direct_fits(j->plan_m, n, k, b->trans)) {
            if (td_matmul_direct(m, n, k, (const float *)pa, a->ld, (const float *)pb, b->ld,
                                 (float *)pc) < 0)
                __atomic_store_n(&((mm_job *)j)->failed, 1, __ATOMIC_RELAXED);
        } else if (!a->trans && b->trans && td_matmul_dot_fits(j->plan_m, n, k)) {
            td_dot_product dp = {(const float *)pa, (const float *)pb, (float *)pc, m, n, k,
                                 a->ld, b->ld};
            td_matmul_dot(&dp);
        } else
            td_blas_sgemm(a->trans, b->trans, m, n, k, 1.0f, (const float *)pa, a->ld,
                          (const float *)pb, b->ld, 0.0f, (float *)pc, n);
    } else {
        if (n == 1)
            td_blas_dgemv(a->trans, m, k, 1.0, (const double *)pa, a->ld, (const double *)pb,
                          b->trans ? 1 : b->ld, 0.0, (double *)pc, 1);
        else if (m == 1 && !j->gemm_rows)
            td_blas_dgemv(!b->trans, n, k, 1.0, (const double *)pb, b->ld, (const double *)pa,
                          a->trans ? a->ld : 1, 0.0, (double *)pc, 1);
        else
            td_blas_dgemm(a->trans, b->trans, m, n, k, 1.0, (const double *)pa, a->ld,
                          (const double *)pb, b->ld, 0.0, (double *)pc, n);
    }
}

static void blas_batches(void *ctx, int64_t begin, int64_t end)
{
    const mm_job *j = ctx;
    for (int64_t t = begin; t < end; t++) {
        int64_t oa, ob;
        batch_offsets(j, t, &oa, &ob);
        blas_product(j, j->a.data + oa * (int64_t)j->esize, j->b.data + ob * (int64_t)j->esize,
                     j->out + t * j->m * j->n * (int64_t)j->esize, j->m);
    }
}

/* Task t: rows [r0, r0 + j->rows) of product t / j->blocks. */
static void blas_tasks(void *ctx, int64_t begin, int64_t end)
{
    const mm_job *j = ctx;
    int64_t es = (int64_t)j->esize;
    for (int64_t t = begin; t < end; t++) {
        int64_t batch = t / j->blocks, r0 = t % j->blocks * j->rows, oa, ob;
        int64_t rows = j->m - r0 < j->rows ? j->m - r0 : j->rows;
        batch_offsets(j, batch, &oa, &ob);
        oa += r0 * (j->a.trans ? 1 : j->a.ld); /* where row r0 starts */
        blas_product(j, j->a.data + oa * es, j->b.data + ob * es,
                     j->out + (batch * j->m + r0) * j->n * es, rows);
    }
}

/* When every batch shares one B and A's batches follow each other like rows of one row-major
 * matrix ([B, T, D] @ [D, H], the shape of a linear layer), the batch is one tall product. */
static bool batch_folds_into_rows(const mm_job *j)
{
    if (j->a.trans)
        return false;
    int64_t expected = j->m * j->a.ld;
    for (int d = j->nb - 1; d >= 0; d--) {
        if (j->bshape[d] == 1)
            continue;
        if (j->b.bstride[d] != 0 || j->a.bstride[d] != expected)
            return false;
        expected *= j->bshape[d];
    }
    return true;
}

/* A batch of products. OpenBLAS threads a product by itself only above a size
 * (TD_BLAS_*_SINGLE_THREAD_*); below it, it runs on the calling thread. So products (or blocks
 * of their rows) under that size are spread over tide's threads, and only bigger ones are left
 * to OpenBLAS's threads, one after another: the two pools never compete for the cores. Measured
 * on 2 cores, 64 products of 128^3 in 16-row blocks: ~200 GFLOP/s; one threaded call after
 * another: ~140. */
/* Rows per task when a batch of products is spread over tide's threads, or 0 when the batch
 * runs one product after another. With a few matrices for each thread, a task is a whole
 * matrix (one BLAS call packs B once for all its rows); with fewer, a matrix is cut into tasks
 * of the rows OpenBLAS would run single-threaded, at least 16 (thinner blocks waste more in
 * packing B than threads win). */
static int64_t batch_task_rows(int64_t nbatch, int64_t m, int64_t n, int64_t k)
{
    if (nbatch < 2 || td_num_threads() < 2)
        return 0;
    if (nbatch >= BATCH_TASKS_PER_THREAD * td_num_threads())
        return m;
    bool vector = m == 1 || n == 1;
    int64_t limit = vector ? TD_BLAS_GEMV_SINGLE_THREAD_MN : TD_BLAS_GEMM_SINGLE_THREAD_MNK;
    int64_t per_row = n * k;
    int64_t rows = m * per_row <= limit ? m : limit / per_row;
    return rows < m && rows < 16 ? 0 : rows;
}

int64_t td_cpu_matmul_call_rows(int64_t nbatch, int64_t m, int64_t n, int64_t k)
{
    int64_t rows = batch_task_rows(nbatch, m, n, k);
    if (rows > 0)
        return rows;
    if (n == 1)
        return td_blas_gemv_cut(m, k).block;
    if (m == 1)
        return 1;
    td_blas_cut c = td_blas_gemm_cut(m, n, k);
    return c.count < 2 ? m : c.by_rows ? c.block : 0;
}

static void run_blas(mm_job *j, int64_t nbatch)
{
    if (nbatch > 1 && batch_folds_into_rows(j)) {
        blas_product(j, j->a.data, j->b.data, j->out, j->m * nbatch);
        return;
    }
    j->rows = batch_task_rows(nbatch, j->m, j->n, j->k);
    if (j->rows == 0) {
        blas_batches(j, 0, nbatch);
        return;
    }
    int64_t per_row = j->n * j->k;
    j->blocks = (j->m + j->rows - 1) / j->rows;
    int64_t grain = 65536 / (j->rows * per_row > 0 ? j->rows * per_row : 1);
    td_parallel_for(nbatch * j->blocks, grain > 0 ? grain : 1, blas_tasks, j);
}

/* ---- bfloat16: AMX tiles or AVX512_BF16 (cpu_matmul_bf16.c) ------------------------------------ */

/* One product of op(A) [m x k] and op(B) [k x n] into out, through the bfloat16 kernel. */
static int bf16_product(const mm_job *j, const char *pa, const char *pb, char *pc, int64_t m)
{
    const operand *a = &j->a, *b = &j->b;
    return td_cpu_bf16_product(m, j->n, j->k, (const uint16_t *)pa, a->trans ? 1 : a->ld,
                               a->trans ? a->ld : 1, (const uint16_t *)pb, b->trans ? 1 : b->ld,
                               b->trans ? b->ld : 1, (uint16_t *)pc);
}

/* The batch one product after another (each spread over the threads), or as one tall one. */
static int run_bf16(const mm_job *j, int64_t nbatch)
{
    if (nbatch > 1 && batch_folds_into_rows(j))
        return bf16_product(j, j->a.data, j->b.data, j->out, j->m * nbatch);
    for (int64_t t = 0; t < nbatch; t++) {
        int64_t oa, ob;
        batch_offsets(j, t, &oa, &ob);
        if (bf16_product(j, j->a.data + oa * 2, j->b.data + ob * 2, j->out + t * j->m * j->n * 2,
                         j->m) < 0)
            return -1;
    }
    return 0;
}

/* ---- integers: a blocked loop ---------------------------------------------------------------- */

/* Columns of C per block (a C row block stays in L1) and the depth of a B block (with those
 * columns, a B block stays in L2 and is reused by every row of the chunk). */
#define INT_BLOCK_N 512
#define INT_BLOCK_K 128

/* Rows [begin, end) of the flattened [batch * m, n] output. Sums wrap in the unsigned type U,
 * as two's-complement arithmetic does, without C's signed-overflow undefined behaviour. */
#define DEFINE_INT_ROWS(name, T, U)                                                                \
    static void name(void *ctx, int64_t begin, int64_t end)                                        \
    {                                                                                              \
        const mm_job *j = ctx;                                                                     \
        int64_t m = j->m, n = j->n, k = j->k;                                                      \
        T *out = (T *)j->out;                                                                      \
        memset(out + begin * n, 0, (size_t)((end - begin) * n) * sizeof(T));                       \
        int64_t ars = j->a.rs, acs = j->a.cs, brs = j->b.rs, bcs = j->b.cs;                       \
        for (int64_t seg = begin; seg < end;) { /* rows of one batch */                           \
            int64_t t = seg / m, seg_end = (t + 1) * m < end ? (t + 1) * m : end;                  \
            int64_t oa, ob;                                                                        \
            batch_offsets(j, t, &oa, &ob);                                                         \
            const T *pa = (const T *)j->a.data + oa, *pb = (const T *)j->b.data + ob;             \
            for (int64_t j0 = 0; j0 < n; j0 += INT_BLOCK_N) {                                      \
                int64_t j1 = j0 + INT_BLOCK_N < n ? j0 + INT_BLOCK_N : n;                          \
                for (int64_t k0 = 0; k0 < k; k0 += INT_BLOCK_K) {                                  \
                    int64_t k1 = k0 + INT_BLOCK_K < k ? k0 + INT_BLOCK_K : k;                      \
                    for (int64_t r = seg; r < seg_end; r++) {                                      \
                        int64_t i = r - t * m;                                                     \
                        T *c = out + r * n;                                                        \
                        for (int64_t l = k0; l < k1; l++) {                                        \
                            U ail = (U)pa[i * ars + l * acs];                                      \
                            if (ail == 0)                                                          \
                                continue;                                                          \
                            const T *brow = pb + l * brs;                                          \
                            if (bcs == 1)                                                          \
                                for (int64_t col = j0; col < j1; col++)                            \
                                    c[col] = (T)((U)c[col] + ail * (U)brow[col]);                  \
                            else                                                                   \
                                for (int64_t col = j0; col < j1; col++)                            \
                                    c[col] = (T)((U)c[col] + ail * (U)brow[col * bcs]);            \
                        }                                                                          \
                    }                                                                              \
                }                                                                                  \
            }                                                                                      \
            seg = seg_end;                                                                         \
        }                                                                                          \
    }
DEFINE_INT_ROWS(int32_rows, int32_t, uint32_t)
DEFINE_INT_ROWS(int64_rows, int64_t, uint64_t)
DEFINE_INT_ROWS(uint8_rows, uint8_t, uint32_t)

/* ---- entry ----------------------------------------------------------------------------------- */

int td_cpu_matmul(tide_tensor *out, const tide_tensor *a, const tide_tensor *b)
{
    return td_cpu_matmul_rows_of(out, a, b, false, 0);
}

int td_cpu_matmul_rows_of(tide_tensor *out, const tide_tensor *a, const tide_tensor *b,
                          bool gemm_rows, int64_t whole_rows)
{
    int nd = out->ndim, nb = nd - 2;
    mm_job j = {.nb = nb,
                .gemm_rows = gemm_rows,
                .m = out->shape[nb],
                .n = out->shape[nb + 1],
                .k = a->shape[nb + 1],
                .dtype = (tide_dtype)out->dtype,
                .esize = td_dtype_sizes[out->dtype],
                .out = td_tensor_data(out)};
    int64_t nbatch = 1;
    for (int d = 0; d < nb; d++) {
        j.bshape[d] = out->shape[d];
        nbatch *= out->shape[d];
    }
    int64_t total = td_numel(nd, out->shape);
    if (total == 0)
        return 0;
    if (j.k == 0) { /* an empty sum */
        memset(j.out, 0, (size_t)total * j.esize);
        return 0;
    }
    bool floating = j.dtype == TIDE_FLOAT32 || j.dtype == TIDE_FLOAT64;
    bool bf16 = j.dtype == TIDE_BFLOAT16; /* only where td_cpu_bf16_native(): cpu_device.c */
    if (floating && td_blas_ready("matmul") < 0)
        return -1;
    if (prepare(&j.a, a, nb, floating || bf16) < 0)
        return -1;
    if (prepare(&j.b, b, nb, floating || bf16) < 0) {
        tide_release(j.a.copy);
        return -1;
    }
    int rc = 0;
    if (floating) {
        j.plan_m = whole_rows > 0 ? whole_rows
                   : nbatch > 1 && batch_folds_into_rows(&j) ? j.m * nbatch
                                                             : j.m;
        run_blas(&j, nbatch);
        if (j.failed)
            rc = td_error("matmul: out of memory");
    } else if (bf16) {
        rc = run_bf16(&j, nbatch);
    } else {
        /* Rows of the flattened output, about 64K multiply-adds per chunk. */
        int64_t per_row = j.n * j.k;
        int64_t grain = 65536 / (per_row > 0 ? per_row : 1);
        td_range_fn fn = j.dtype == TIDE_INT32   ? int32_rows
                         : j.dtype == TIDE_INT64 ? int64_rows
                         : j.dtype == TIDE_UINT8 ? uint8_rows
                                                 : NULL;
        if (fn)
            td_parallel_for(nbatch * j.m, grain > 0 ? grain : 1, fn, &j);
        else
            rc = td_error("matmul: dtype %s is not supported on the CPU",
                          tide_dtype_name(j.dtype));
    }
    tide_release(j.a.copy);
    tide_release(j.b.copy);
    return rc;
}
