/*
 * test_matmul_bf16.c — bfloat16 matmul against a float64 reference, on whichever path this
 * tier takes (devices/cpu/cpu_matmul_bf16.c): AMX tiles or AVX512_BF16 dot products at the
 * avx512 tier, else float32 between casts (ops/dispatch.c); TIDE_CPU_BF16=dot-forced|off
 * picks less, and the test script runs each path the machine has. Both sum float32 products of bfloat16 operands
 * (exact) and round once, so each element is within
 *     e32 + 2^-8 (|ref| + e32),   e32 = (k + 2) 2^-24 sum_k |a_ik b_kj|,
 * the float32 sum's worst error (any order) plus bfloat16's rounding (8 significant bits).
 * Operands are normal bfloat16 numbers: the tile instruction treats subnormals as zero.
 * Also: shapes off the 16/32 tile grid, transposed and batched operands, k = 0, NaN rows, the
 * same bits for any thread count and for any cut of the rows, and the jit equal to eager.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "devices/cpu/cpu_matmul_bf16.h"
#include "test_util.h"
#include "tide.h"

static uint32_t rng = 12345u;
static float uniform(void) /* in [-2, 2), never subnormal */
{
    rng = rng * 1664525u + 1013904223u;
    return (float)(rng >> 8) / (float)(1u << 22) - 2.0f;
}

/* A [rows, cols] bfloat16 tensor and its values as floats (already rounded). */
static tide_tensor *random_bf16(int64_t rows, int64_t cols, float **values)
{
    int64_t n = rows * cols;
    uint16_t *h = malloc(sizeof *h * (size_t)(n ? n : 1));
    *values = malloc(sizeof **values * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++) {
        h[i] = td_f32_to_bf16(uniform());
        (*values)[i] = td_bf16_to_f32(h[i]);
    }
    int64_t shape[2] = {rows, cols};
    tide_tensor *t = tide_from_data(h, 2, shape, TIDE_BFLOAT16);
    free(h);
    return t;
}

/* Elements of c [m, n] (bfloat16) outside the bound against a [m, k] @ b [k, n] (row-major
 * floats, each matrix read at (i, j) as x[i * rs + j * cs]). */
static long out_of_bound(const tide_tensor *c, int64_t m, int64_t n, int64_t k, const float *a,
                         int64_t ars, int64_t acs, const float *b, int64_t brs, int64_t bcs)
{
    const uint16_t *got = tide_data_ptr(c);
    long bad = 0;
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double ref = 0, mag = 0;
            for (int64_t l = 0; l < k; l++) {
                double p = (double)a[i * ars + l * acs] * b[l * brs + j * bcs];
                ref += p;
                mag += fabs(p);
            }
            double e32 = (double)(k + 2) * 0x1p-24 * mag;
            double tol = e32 + 0x1p-8 * (fabs(ref) + e32);
            if (!(fabs(td_bf16_to_f32(got[i * n + j]) - ref) <= tol))
                bad++;
        }
    return bad;
}

static void test_shapes(void)
{
    const int64_t shapes[][3] = {{1, 1, 1},    {1, 37, 64},   {17, 15, 33},  {32, 32, 32},
                                 {33, 65, 31}, {100, 70, 300}, {128, 256, 512}, {5, 3, 1000}};
    for (size_t s = 0; s < sizeof shapes / sizeof *shapes; s++) {
        int64_t m = shapes[s][0], n = shapes[s][1], k = shapes[s][2];
        for (int layout = 0; layout < 4; layout++) {
            bool ta = layout & 1, tb = layout & 2; /* stored transposed, then viewed back */
            float *av, *bv;
            tide_tensor *as = random_bf16(ta ? k : m, ta ? m : k, &av);
            tide_tensor *bs = random_bf16(tb ? n : k, tb ? k : n, &bv);
            tide_tensor *a = ta ? tide_transpose(as, 0, 1) : tide_retain(as);
            tide_tensor *b = tb ? tide_transpose(bs, 0, 1) : tide_retain(bs);
            tide_tensor *c = tide_matmul(a, b);
            CHECK(c && tide_get_dtype(c) == TIDE_BFLOAT16, "[%lld, %lld] x [%lld, %lld]: %s",
                  (long long)m, (long long)k, (long long)k, (long long)n,
                  c ? "not bfloat16" : tide_last_error());
            if (c) {
                long bad = out_of_bound(c, m, n, k, av, ta ? 1 : k, ta ? m : 1, bv, tb ? 1 : n,
                                        tb ? k : 1);
                CHECK(bad == 0, "[%lld, %lld] x [%lld, %lld] layout %d: %ld elements out of bound",
                      (long long)m, (long long)k, (long long)k, (long long)n, layout, bad);
            }
            tide_release(c), tide_release(a), tide_release(b), tide_release(as), tide_release(bs);
            free(av), free(bv);
        }
    }
}

/* [3, m, k] @ [k, n] (one tall product) and [2, m, k] @ [2, k, n] (one per matrix). */
static void test_batches(void)
{
    int64_t m = 19, k = 45, n = 34;
    float *av, *bv, *b2v;
    tide_tensor *a2 = random_bf16(3 * m, k, &av), *b = random_bf16(k, n, &bv);
    tide_tensor *b2 = random_bf16(2 * k, n, &b2v);
    int64_t sa[3] = {3, m, k}, sb[3] = {2, k, n};
    tide_tensor *a = tide_reshape(a2, 3, sa), *bb = tide_reshape(b2, 3, sb);
    tide_tensor *c = tide_matmul(a, b);
    CHECK(c != NULL, "batched x 2-D: %s", tide_last_error());
    if (c)
        CHECK(out_of_bound(c, 3 * m, n, k, av, k, 1, bv, n, 1) == 0, "[3, m, k] @ [k, n]");
    tide_tensor *a01 = tide_slice(a, 0, 0, 2, 1);
    tide_tensor *c2 = tide_matmul(a01, bb);
    CHECK(c2 != NULL, "batched x batched: %s", tide_last_error());
    if (c2) {
        tide_tensor *c2b = tide_slice(c2, 0, 1, 2, 1), *cb = tide_contiguous(c2b);
        CHECK(out_of_bound(c2, m, n, k, av, k, 1, b2v, n, 1) == 0, "batch 0");
        CHECK(out_of_bound(cb, m, n, k, av + m * k, k, 1, b2v + k * n, n, 1) == 0, "batch 1");
        tide_release(c2b), tide_release(cb);
    }
    tide_release(c), tide_release(c2), tide_release(a01), tide_release(a), tide_release(bb);
    tide_release(a2), tide_release(b), tide_release(b2);
    free(av), free(bv), free(b2v);
}

static bool same_bits(const tide_tensor *x, const tide_tensor *y)
{
    return x && y && tide_numel(x) == tide_numel(y) &&
           memcmp(tide_data_ptr(x), tide_data_ptr(y), (size_t)tide_numel(x) * 2) == 0;
}

static tide_tensor *product_relu(tide_tensor *a, tide_tensor *b)
{
    tide_tensor *c = tide_matmul(a, b), *r = tide_relu(c);
    tide_release(c);
    return r;
}

/* The same bits whatever the thread count, row cut or jit. */
static void test_invariance(void)
{
    int64_t m = 70, k = 130, n = 90;
    float *av, *bv;
    tide_tensor *a = random_bf16(m, k, &av), *b = random_bf16(k, n, &bv);
    int threads = tide_get_num_threads();
    tide_tensor *full = tide_matmul(a, b);
    tide_set_num_threads(1);
    tide_tensor *one = tide_matmul(a, b);
    tide_set_num_threads(threads);
    CHECK(same_bits(full, one), "1 thread against %d: different bits", threads);
    tide_tensor *rows = tide_slice(a, 0, 21, 51, 1), *part = tide_matmul(rows, b);
    tide_tensor *fr = tide_slice(full, 0, 21, 51, 1), *frc = tide_contiguous(fr);
    CHECK(same_bits(part, frc), "rows 21..50 alone: different bits from the whole product");
    tide_tensor *eager = product_relu(a, b);
    tide_jit_trace_begin(NULL, NULL, NULL);
    tide_tensor *traced = product_relu(a, b);
    CHECK(tide_jit_trace_end() == 0, "trace: %s", tide_last_error());
    CHECK(same_bits(eager, traced), "jit against eager: different bits");
    tide_release(full), tide_release(one), tide_release(rows), tide_release(part);
    tide_release(fr), tide_release(frc), tide_release(eager), tide_release(traced);
    tide_release(a), tide_release(b);
    free(av), free(bv);
}

static void test_special(void)
{
    float *av, *bv;
    tide_tensor *a = random_bf16(4, 40, &av), *b = random_bf16(40, 20, &bv);
    int64_t sz[2] = {4, 0}, sb[2] = {0, 20};
    tide_tensor *e0 = tide_zeros(2, sz, TIDE_BFLOAT16), *e1 = tide_zeros(2, sb, TIDE_BFLOAT16);
    tide_tensor *z = tide_matmul(e0, e1); /* k = 0: zeros */
    const uint16_t *zp = z ? tide_data_ptr(z) : NULL;
    bool zeros = zp != NULL;
    for (int i = 0; zeros && i < 4 * 20; i++)
        zeros = zp[i] == 0;
    CHECK(zeros, "k = 0 gives zeros");
    /* a NaN in row 2 of a: that row of the product is NaN, the others are not */
    int64_t rs[2] = {1, 40};
    tide_tensor *row = tide_slice(a, 0, 2, 3, 1), *nan = tide_full(2, rs, NAN, TIDE_BFLOAT16);
    tide_copy_(row, nan);
    tide_tensor *c = tide_matmul(a, b);
    const uint16_t *cp = c ? tide_data_ptr(c) : NULL;
    int nan_row = 0, nan_other = 0;
    for (int i = 0; cp && i < 4 * 20; i++) {
        bool is_nan = isnan(td_bf16_to_f32(cp[i]));
        nan_row += is_nan && i / 20 == 2;
        nan_other += is_nan && i / 20 != 2;
    }
    CHECK(nan_row == 20 && nan_other == 0, "NaN row: %d of 20 NaN, %d elsewhere", nan_row,
          nan_other);
    tide_release(z), tide_release(e0), tide_release(e1), tide_release(row), tide_release(nan);
    tide_release(c), tide_release(a), tide_release(b);
    free(av), free(bv);
}

int main(void)
{
    printf("bfloat16 products: %s\n", td_cpu_bf16_path_name(td_cpu_bf16_path()));
    test_shapes();
    test_batches();
    test_invariance();
    test_special();
    return test_summary("test_matmul_bf16");
}
