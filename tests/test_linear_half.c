/*
 * test_linear_half.c — float32 x times a float16/bfloat16 weight (LINEAR_HALF,
 * devices/cpu/cpu_linear_half*.c, ops/linear_half.c): the kernels of both tiers called
 * directly, then matmul and linear (M = 1 and more rows, up to the widened-panel path; odd N and
 * K; 1-D, 3-D, column-strided and transposed x), gradients, and the errors.
 *
 * Reference: the same products in double from the exact values (a half weight widens to float32
 * exactly). Tolerance: a float32 sum of K products, each rounded or fused, in any order, is
 * within gamma_K = K u / (1 - K u) (u = 2^-24) of sum |x_k w_k| (Higham, "Accuracy and
 * Stability", 3.1); 2 (K + 3) u * sum |x_k w_k| (as test_ref_device's TOL_SUMMED) covers that
 * with room for the lane folding and one rounding of the result. A weight gradient rounded to
 * the weight's dtype adds half an ulp of it (2^-11 relative for float16, 2^-8 for bfloat16).
 */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "half.h"
#include "tensor.h"
#include "test_util.h"
#include "tide.h"
#include "devices/cpu/cpu_isa.h"
#include "devices/cpu/cpu_linear_half.h"

static uint64_t rng = 0x9e3779b97f4a7c15ULL;
static double uniform(void) /* [-1, 1) */
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return 2.0 * (double)(rng >> 11) / 9007199254740992.0 - 1.0;
}

static uint16_t to_half(tide_dtype dt, float v)
{
    return dt == TIDE_FLOAT16 ? td_f32_to_f16(v) : td_f32_to_bf16(v);
}

static double from_half(tide_dtype dt, uint16_t h)
{
    return dt == TIDE_FLOAT16 ? td_f16_to_f32(h) : td_bf16_to_f32(h);
}

/* |got - sum_k x_k w_k| within the tolerance above; sums in double. */
static bool close_to_sum(float got, int64_t k, const float *x, int64_t xs, const uint16_t *w,
                         tide_dtype dt, double *err)
{
    double s = 0, mag = 0;
    for (int64_t t = 0; t < k; t++) {
        double p = (double)x[t * xs] * from_half(dt, w[t]);
        s += p;
        mag += fabs(p);
    }
    *err = fabs((double)got - s);
    return *err <= 2.0 * (double)(k + 3) * 0x1p-24 * mag;
}

/* One tier's kernel on [m, k] x [n, k]^T with leading dimensions past the rows (ldx = k + 3,
 * ldw = k + 5, ldy = n + 2), so a kernel reading past a row would be caught. */
static void check_kernel(const char *tier, const td_lh_kernels *kern, tide_dtype dt, int64_t m,
                         int64_t n, int64_t k)
{
    int64_t ldx = k + 3, ldw = k + 5, ldy = n + 2;
    float *x = malloc(sizeof(float) * (size_t)(m * ldx + 1));
    uint16_t *w = malloc(sizeof(uint16_t) * (size_t)(n * ldw + 1));
    float *y = malloc(sizeof(float) * (size_t)(m * ldy + 1));
    for (int64_t i = 0; i < m * ldx; i++)
        x[i] = (float)uniform();
    for (int64_t i = 0; i < n * ldw; i++)
        w[i] = to_half(dt, (float)uniform());
    for (int64_t i = 0; i < m * ldy; i++)
        y[i] = -7.0f; /* the gaps between rows of y must stay untouched */
    (dt == TIDE_FLOAT16 ? kern->f16 : kern->bf16)(m, n, k, x, ldx, w, ldw, y, ldy);
    int bad = 0;
    double worst = 0;
    for (int64_t i = 0; i < m; i++) {
        for (int64_t j = 0; j < n; j++) {
            double err;
            bad += !close_to_sum(y[i * ldy + j], k, x + i * ldx, 1, w + j * ldw, dt, &err);
            worst = err > worst ? err : worst;
        }
        for (int64_t j = n; j < ldy; j++)
            bad += y[i * ldy + j] != -7.0f;
    }
    CHECK(bad == 0, "%s %s kernel m=%lld n=%lld k=%lld: %d elements wrong (worst error %.3g)",
          tier, tide_dtype_name(dt), (long long)m, (long long)n, (long long)k, bad, worst);
    free(x), free(w), free(y);
}

static void test_kernels(void)
{
    static const int64_t ms[] = {1, 2, 5}, ns[] = {1, 3, 4, 5, 9}, ks[] = {1, 7, 8, 15, 16, 17, 37, 100};
    const td_lh_kernels *tiers[2] = {&td_lh_kernels_baseline, &td_lh_kernels_avx2};
    const char *names[2] = {"baseline", "avx2"};
    int ntiers = td_cpu_isa() >= TD_ISA_AVX2 ? 2 : 1;
    for (int t = 0; t < ntiers; t++)
        for (int d = 0; d < 2; d++)
            for (size_t a = 0; a < 3; a++)
                for (size_t b = 0; b < 5; b++)
                    for (size_t c = 0; c < 8; c++)
                        check_kernel(names[t], tiers[t], d ? TIDE_BFLOAT16 : TIDE_FLOAT16, ms[a],
                                     ns[b], ks[c]);
}

/* A float32 [rows, cols] tensor and a copy of its values. */
static tide_tensor *random_f32(int64_t rows, int64_t cols, float **values)
{
    int64_t shape[2] = {rows, cols};
    float *v = malloc(sizeof(float) * (size_t)(rows * cols + 1));
    for (int64_t i = 0; i < rows * cols; i++)
        v[i] = (float)uniform();
    *values = v;
    return tide_from_data(v, 2, shape, TIDE_FLOAT32);
}

/* A half [n, k] weight and its bits. */
static tide_tensor *random_half(tide_dtype dt, int64_t n, int64_t k, uint16_t **bits)
{
    int64_t shape[2] = {n, k};
    uint16_t *h = malloc(sizeof(uint16_t) * (size_t)(n * k + 1));
    for (int64_t i = 0; i < n * k; i++)
        h[i] = to_half(dt, (float)uniform());
    *bits = h;
    return tide_from_data(h, 2, shape, dt);
}

/* y [m, n] (any strides; float32) against x (rows of stride xr, elements xs) times w^T. */
static int count_wrong(const tide_tensor *y, int64_t m, int64_t n, int64_t k, const float *x,
                       int64_t xr, int64_t xs, const uint16_t *w, tide_dtype dt)
{
    tide_tensor *c = tide_contiguous(y);
    const float *p = c ? tide_data_ptr(c) : NULL;
    int bad = p ? 0 : 1;
    for (int64_t i = 0; p && i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double err;
            bad += !close_to_sum(p[i * n + j], k, x + i * xr, xs, w + j * k, dt, &err);
        }
    tide_release(c);
    return bad;
}

/* matmul(x, w^T) and linear(x, w) for [m, k] x, rows 1 .. 40 (the panel path from 16). */
static void test_products(tide_dtype dt)
{
    static const int64_t ms[] = {1, 3, 16, 40}, ns[] = {5, 33}, ks[] = {0, 19, 64};
    for (size_t a = 0; a < 4; a++)
        for (size_t b = 0; b < 2; b++)
            for (size_t c = 0; c < 3; c++) {
                int64_t m = ms[a], n = ns[b], k = ks[c];
                float *xv;
                uint16_t *wv;
                tide_tensor *x = random_f32(m, k, &xv), *w = random_half(dt, n, k, &wv);
                tide_tensor *wt = tide_transpose(w, 0, 1);
                tide_tensor *y1 = tide_matmul(x, wt), *y2 = tide_linear(x, w, NULL);
                bool ok = y1 && y2 && tide_get_dtype(y1) == TIDE_FLOAT32 &&
                          tide_shape(y1)[0] == m && tide_shape(y1)[1] == n;
                CHECK(ok, "%s [%lld,%lld] x [%lld,%lld]^T: %s", tide_dtype_name(dt),
                      (long long)m, (long long)k, (long long)n, (long long)k, tide_last_error());
                if (ok) {
                    int bad = count_wrong(y1, m, n, k, xv, k, 1, wv, dt) +
                              count_wrong(y2, m, n, k, xv, k, 1, wv, dt);
                    CHECK(bad == 0, "%s m=%lld n=%lld k=%lld: %d elements wrong",
                          tide_dtype_name(dt), (long long)m, (long long)n, (long long)k, bad);
                }
                tide_release(x), tide_release(w), tide_release(wt), tide_release(y1),
                    tide_release(y2);
                free(xv), free(wv);
            }
}

/* x as a column-strided view ([m, k] of every other column of [m, 2k]), transposed
 * ([k, m] stored, viewed [m, k]), 1-D, and 3-D [2, 3, k] through linear. */
static void test_layouts(tide_dtype dt)
{
    int64_t m = 6, n = 7, k = 21;
    float *xv;
    uint16_t *wv;
    tide_tensor *w = random_half(dt, n, k, &wv), *base = random_f32(m, 2 * k, &xv);
    tide_tensor *strided = tide_slice(base, 1, 0, 2 * k, 2);
    tide_tensor *y = tide_linear(strided, w, NULL);
    CHECK(y && count_wrong(y, m, n, k, xv, 2 * k, 2, wv, dt) == 0, "%s column-strided x: %s",
          tide_dtype_name(dt), tide_last_error());
    tide_release(y), tide_release(strided), tide_release(base), free(xv);

    base = random_f32(k, m, &xv); /* x[i, t] = base[t, i] */
    tide_tensor *xt = tide_transpose(base, 0, 1);
    y = tide_linear(xt, w, NULL);
    CHECK(y && count_wrong(y, m, n, k, xv, 1, m, wv, dt) == 0, "%s transposed x: %s",
          tide_dtype_name(dt), tide_last_error());
    tide_release(y), tide_release(xt), tide_release(base), free(xv);

    base = random_f32(1, k, &xv);
    tide_tensor *x1 = tide_view(base, 1, (int64_t[]){k});
    y = tide_linear(x1, w, NULL);
    CHECK(y && tide_ndim(y) == 1 && count_wrong(y, 1, n, k, xv, k, 1, wv, dt) == 0,
          "%s 1-D x: %s", tide_dtype_name(dt), tide_last_error());
    tide_release(y), tide_release(x1), tide_release(base), free(xv);

    base = random_f32(6, k, &xv);
    tide_tensor *x3 = tide_view(base, 3, (int64_t[]){2, 3, k});
    y = tide_linear(x3, w, NULL);
    CHECK(y && tide_ndim(y) == 3 && tide_shape(y)[2] == n &&
              count_wrong(y, 6, n, k, xv, k, 1, wv, dt) == 0,
          "%s 3-D x: %s", tide_dtype_name(dt), tide_last_error());
    tide_release(y), tide_release(x3), tide_release(base), free(xv);
    tide_release(w), free(wv);
}

/* loss = sum(linear(x, w) * g): x.grad = g @ widen(w) (float32), w.grad = g^T x rounded to w's
 * dtype (half an ulp of it beyond the sum's tolerance). */
static void test_gradients(tide_dtype dt)
{
    int64_t m = 5, n = 6, k = 19;
    float *xv, *gv;
    uint16_t *wv;
    tide_tensor *x = random_f32(m, k, &xv), *g = random_f32(m, n, &gv);
    tide_tensor *w = random_half(dt, n, k, &wv);
    tide_requires_grad_(x, true);
    tide_requires_grad_(w, true);
    tide_tensor *y = tide_linear(x, w, NULL), *yg = y ? tide_mul(y, g) : NULL;
    tide_tensor *loss = yg ? tide_sum(yg, NULL, 0, false) : NULL;
    CHECK(loss && tide_backward(loss, NULL, false) == 0, "%s backward: %s", tide_dtype_name(dt),
          tide_last_error());
    tide_tensor *gx = tide_grad(x), *gw = tide_grad(w);
    CHECK(gx && gw && tide_get_dtype(gx) == TIDE_FLOAT32 && tide_get_dtype(gw) == dt,
          "%s gradient dtypes", tide_dtype_name(dt));
    if (gx && gw) {
        tide_tensor *cx = tide_contiguous(gx), *cw = tide_contiguous(gw);
        const float *px = tide_data_ptr(cx);
        const uint16_t *pw = tide_data_ptr(cw);
        int bad = 0;
        double half_ulp = dt == TIDE_FLOAT16 ? 0x1p-11 : 0x1p-8;
        for (int64_t i = 0; i < m; i++)
            for (int64_t t = 0; t < k; t++) {
                double s = 0, mag = 0;
                for (int64_t j = 0; j < n; j++) {
                    double p = (double)gv[i * n + j] * from_half(dt, wv[j * k + t]);
                    s += p, mag += fabs(p);
                }
                bad += fabs(px[i * k + t] - s) > 2.0 * (n + 3) * 0x1p-24 * mag;
            }
        for (int64_t j = 0; j < n; j++)
            for (int64_t t = 0; t < k; t++) {
                double s = 0, mag = 0;
                for (int64_t i = 0; i < m; i++) {
                    double p = (double)gv[i * n + j] * xv[i * k + t];
                    s += p, mag += fabs(p);
                }
                double tol = 2.0 * (m + 3) * 0x1p-24 * mag + half_ulp * fabs(s) * 1.01;
                bad += fabs(from_half(dt, pw[j * k + t]) - s) > tol;
            }
        CHECK(bad == 0, "%s gradients: %d elements wrong", tide_dtype_name(dt), bad);
        tide_release(cx), tide_release(cw);
    }
    tide_release(gx), tide_release(gw), tide_release(loss), tide_release(yg), tide_release(y);
    tide_release(x), tide_release(g), tide_release(w);
    free(xv), free(gv), free(wv);
}

static void test_errors(void)
{
    float *xv;
    uint16_t *wv, *w5v;
    tide_tensor *x = random_f32(2, 5, &xv), *w = random_half(TIDE_BFLOAT16, 3, 4, &wv);
    tide_tensor *wt = tide_transpose(w, 0, 1);
    CHECK_ERROR(tide_linear(x, w, NULL), "linear", "[2, 5]", "[3, 4]");
    CHECK_ERROR(tide_matmul(x, wt), "matmul", "[2, 5]", "[4, 3]", "cannot be multiplied");
    tide_tensor *x64 = tide_cast(x, TIDE_FLOAT64), *xb = tide_cast(x, TIDE_BFLOAT16);
    tide_tensor *w5 = random_half(TIDE_FLOAT16, 3, 5, &w5v), *w32 = tide_cast(w5, TIDE_FLOAT32);
    CHECK_ERROR(tide_linear(x64, w5, NULL), "linear", "float64", "float16",
                "float32 input with a float16 or bfloat16 weight");
    CHECK_ERROR(tide_linear(xb, w32, NULL), "linear", "bfloat16", "float32", "same dtype");
    /* the device kernel itself: only float32 x with a half weight */
    tide_device *cpu = tide_cpu_device();
    tide_tensor *out = td_tensor_new("test", cpu, 2, (int64_t[]){2, 3}, TIDE_FLOAT32);
    tide_tensor *in[2] = {x64, w5};
    CHECK(cpu->run(cpu, TIDE_OP_LINEAR_HALF, out, in, 2, NULL) < 0 &&
              strstr(tide_last_error(), "linear_half") && strstr(tide_last_error(), "float64"),
          "cpu linear_half on float64 x: %s", tide_last_error());
    tide_release(out), tide_release(x64), tide_release(xb), tide_release(w5), tide_release(w32);
    tide_release(x), tide_release(w), tide_release(wt);
    free(xv), free(wv), free(w5v);
}

int main(void)
{
    test_kernels();
    for (int d = 0; d < 2; d++) {
        tide_dtype dt = d ? TIDE_BFLOAT16 : TIDE_FLOAT16;
        test_products(dt);
        test_layouts(dt);
        test_gradients(dt);
    }
    test_errors();
    return test_summary("test_linear_half");
}
