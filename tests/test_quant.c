/*
 * test_quant.c — q8_0 / q4_0 quantized weights (ops/quant.c, devices/cpu/cpu_quant*.c) against a
 * plain scalar reference written here from the format's words (docs/quantization.md):
 *  - quantize: bytes equal the reference's (llama.cpp's rules), and a hand-checked q4_0 block
 *    (nibble order); dequantize: d * q exactly;
 *  - each tier's kernels this CPU runs (baseline, avx2): activation bytes equal the
 *    reference's, dots within the summation bound below; tide_qlinear at the process's tier
 *    (scripts/test.sh varies TIDE_CPU_ISA), M = 1, 5, a 3-D input, many threads' rows;
 *  - qlinear against matmul(x, dequantize(q)^T) within the activation quantization's bound;
 *  - the gradient in x (g @ dequantize(q)), a jit capture (static, and dynamic in x's rows)
 *    equal to eager bitwise, and errors.
 * Tolerance of a dot against the reference (which adds the blocks' terms in double): the
 * integer block sums are exact, each term dw*dx*s has two float32 roundings (dw*dx, and the
 * multiply-add), and nb terms are added in float32: |err| <= (nb + 2) * 2^-23 * sum|terms|.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "devices/cpu/cpu_isa.h"
#include "devices/cpu/cpu_quant.h"
#include "test_util.h"
#include "tide.h"

static uint64_t rng = 88172645463325252ull;
static float uniform(float lo, float hi)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return lo + (hi - lo) * (float)((rng >> 11) * 0x1p-53);
}

/* ---- the reference, from the format's words ------------------------------------------------ */

static void ref_quantize_row(int fmt, const float *x, int64_t k, uint8_t *out)
{
    for (int64_t b = 0; b < k / 32; b++, x += 32) {
        float m = 0, amax = 0;
        for (int i = 0; i < 32; i++)
            if (fabsf(x[i]) > amax)
                amax = fabsf(x[i]), m = x[i];
        float d = fmt == TIDE_Q8_0 ? amax / 127 : m / -8;
        float id = d != 0 ? 1 / d : 0;
        uint16_t h = td_f32_to_f16(d);
        *out++ = (uint8_t)h, *out++ = (uint8_t)(h >> 8);
        if (fmt == TIDE_Q8_0) {
            for (int i = 0; i < 32; i++)
                *out++ = (uint8_t)(int8_t)roundf(x[i] * id);
        } else {
            for (int j = 0; j < 16; j++) {
                int lo = (int)(x[j] * id + 8.5f), hi = (int)(x[j + 16] * id + 8.5f);
                *out++ = (uint8_t)((lo < 15 ? lo : 15) | (hi < 15 ? hi : 15) << 4);
            }
        }
    }
}

static float ref_value(int fmt, const uint8_t *row, int64_t i)
{
    const uint8_t *blk = row + i / 32 * (fmt == TIDE_Q8_0 ? 34 : 18);
    float d = td_f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
    int j = (int)(i % 32);
    if (fmt == TIDE_Q8_0)
        return d * (float)(int8_t)blk[2 + j];
    int nib = j < 16 ? blk[2 + j] & 15 : blk[2 + j - 16] >> 4;
    return d * (float)(nib - 8);
}

/* The activation block as the docs define it: d = max|x|/127, q = rint(x / d) via 1/d. */
static float ref_act(const float *x, int8_t *q)
{
    float amax = 0;
    for (int i = 0; i < 32; i++)
        amax = fabsf(x[i]) > amax ? fabsf(x[i]) : amax;
    float d = amax / 127, id = d != 0 ? 1 / d : 0;
    for (int i = 0; i < 32; i++)
        q[i] = (int8_t)rintf(x[i] * id);
    return d;
}

/* The reference dot in double, and sum|terms| for the tolerance. */
static double ref_dot(int fmt, const uint8_t *w, const float *x, int64_t k, double *mag)
{
    double acc = 0;
    *mag = 0;
    for (int64_t b = 0; b < k / 32; b++) {
        int8_t q[32];
        double dx = ref_act(x + b * 32, q), s = 0, dw = 0;
        for (int i = 0; i < 32; i++) {
            float v = ref_value(fmt, w, b * 32 + i);
            s += (double)v * q[i];
        }
        (void)dw;
        acc += s * dx;
        *mag += fabs(s * dx);
    }
    return acc;
}

/* ---- tests ---------------------------------------------------------------------------------- */

static tide_tensor *random_matrix(int64_t rows, int64_t cols, float scale)
{
    float *v = malloc(sizeof(float) * (size_t)(rows * cols));
    for (int64_t i = 0; i < rows * cols; i++)
        v[i] = uniform(-scale, scale);
    int64_t shape[2] = {rows, cols};
    tide_tensor *t = tide_from_data(v, 2, shape, TIDE_FLOAT32);
    free(v);
    return t;
}

static void test_quantize_bytes(int fmt)
{
    const char *name = tide_qformat_name(fmt);
    tide_tensor *w = random_matrix(7, 96, 2.0f);
    tide_tensor *q = tide_quantize(w, fmt);
    CHECK(q && tide_get_dtype(q) == TIDE_UINT8 && tide_shape(q)[0] == 7 &&
              tide_shape(q)[1] == 3 * tide_qformat_block_bytes(fmt), "%s: quantize shape", name);
    if (q) {
        uint8_t want[7 * 3 * 34];
        const float *x = tide_data_ptr(w);
        for (int r = 0; r < 7; r++)
            ref_quantize_row(fmt, x + r * 96, 96, want + r * tide_shape(q)[1]);
        CHECK(memcmp(tide_data_ptr(q), want, (size_t)tide_numel(q)) == 0,
              "%s: quantized bytes differ from the reference", name);
        tide_tensor *y = tide_dequantize(q, fmt, 96);
        int bad = 0;
        for (int r = 0; y && r < 7; r++)
            for (int i = 0; i < 96; i++)
                bad += ((const float *)tide_data_ptr(y))[r * 96 + i] !=
                       ref_value(fmt, want + r * tide_shape(q)[1], i);
        CHECK(y && bad == 0, "%s: dequantize differs from d * q in %d values", name, bad);
        /* float16 weights quantize as their float32 values */
        tide_tensor *h = tide_cast(w, TIDE_FLOAT16), *hf = tide_cast(h, TIDE_FLOAT32);
        tide_tensor *qh = tide_quantize(h, fmt), *qf = tide_quantize(hf, fmt);
        CHECK(qh && qf && memcmp(tide_data_ptr(qh), tide_data_ptr(qf), (size_t)tide_numel(qf)) == 0,
              "%s: a float16 weight quantizes as its float32 value", name);
        tide_release(h), tide_release(hf), tide_release(qh), tide_release(qf), tide_release(y);
    }
    tide_release(w);
    tide_release(q);
}

/* q4_0 by hand: x = 0..31 - 8 (m = 23, d = -23/8), element j low nibble, j + 16 high. */
static void test_q4_0_layout(void)
{
    float x[32];
    for (int i = 0; i < 32; i++)
        x[i] = (float)(i - 8);
    int64_t shape[2] = {1, 32};
    tide_tensor *w = tide_from_data(x, 2, shape, TIDE_FLOAT32), *q = tide_quantize(w, TIDE_Q4_0);
    const uint8_t *b = q ? tide_data_ptr(q) : NULL;
    float d = td_f16_to_f32((uint16_t)(b ? b[0] | b[1] << 8 : 0));
    CHECK(b && d == td_f16_to_f32(td_f32_to_f16(-23.0f / 8)), "q4_0: scale %g", d);
    /* element 0: -8 * (-8/23) + 8.5 = 11.28 -> 11; element 16: 8 * (-8/23) + 8.5 = 5.7 -> 5 */
    CHECK(b && (b[2] & 15) == 11 && (b[2] >> 4) == 5, "q4_0: byte 0 is %#x", b ? b[2] : 0);
    /* element 31 (23, the max): 23 * (-8/23) + 8.5 = 0.5 -> 0 in the high nibble of byte 15 */
    CHECK(b && (b[17] >> 4) == 0, "q4_0: byte 15 is %#x", b ? b[17] : 0);
    tide_release(w);
    tide_release(q);
}

static int dots_bad(const td_quant_kernels *k, int fmt, const uint8_t *w, int64_t rb,
                    const float *x, int64_t kk, int64_t rows)
{
    int64_t nb = kk / 32;
    int8_t *q = malloc((size_t)kk), wq[32];
    float *d = malloc(sizeof(float) * (size_t)nb);
    int bad = 0;
    k->quantize_act(nb, x, q, d);
    for (int64_t b = 0; b < nb; b++) {
        float rd = ref_act(x + b * 32, wq);
        bad += rd != d[b] || memcmp(wq, q + b * 32, 32) != 0;
    }
    for (int64_t r = 0; r < rows; r++) {
        double mag, want = ref_dot(fmt, w + r * rb, x, kk, &mag);
        float got = k->dot[fmt](nb, w + r * rb, q, d), four[4];
        bad += fabs(got - want) > (double)(nb + 2) * 0x1p-23 * mag;
        /* four rows at once give each row's dot bitwise (a row's sum whatever its group) */
        if (r + 4 <= rows) {
            k->dot4[fmt](nb, w + r * rb, rb, q, d, four);
            bad += memcmp(&four[0], &got, sizeof got) != 0;
        }
    }
    free(q);
    free(d);
    return bad;
}

/* Whether two kernel tables give the same bits on rows of w (rb bytes apart) times x. */
static bool same_dots(const td_quant_kernels *a, const td_quant_kernels *b, int fmt,
                      const uint8_t *w, int64_t rb, const float *x, int64_t kk, int64_t rows)
{
    int64_t nb = kk / 32;
    int8_t *q = malloc((size_t)kk);
    float *d = malloc(sizeof(float) * (size_t)nb), fa[4], fb[4];
    bool same = q && d;
    if (same)
        a->quantize_act(nb, x, q, d);
    for (int64_t r = 0; same && r < rows; r++) {
        float ya = a->dot[fmt](nb, w + r * rb, q, d), yb = b->dot[fmt](nb, w + r * rb, q, d);
        same = memcmp(&ya, &yb, sizeof ya) == 0;
        if (same && r + 4 <= rows) {
            a->dot4[fmt](nb, w + r * rb, rb, q, d, fa);
            b->dot4[fmt](nb, w + r * rb, rb, q, d, fb);
            same = memcmp(fa, fb, sizeof fa) == 0;
        }
    }
    free(q);
    free(d);
    return same;
}

/* Every tier's kernels this CPU runs, against the reference. */
static void test_tiers(int fmt)
{
    const td_quant_kernels *tiers[4] = {&td_quant_kernels_baseline, &td_quant_kernels_avx2,
                                        &td_quant_kernels_avx512, &td_quant_kernels_avx512_vnni};
    const char *names[4] = {"baseline", "avx2", "avx512", "avx512 with VNNI"};
    /* 11 blocks a row: the avx512 tier's pairs and its odd last block */
    tide_tensor *w = random_matrix(13, 352, 1.0f), *x = random_matrix(1, 352, 3.0f);
    tide_tensor *q = tide_quantize(w, fmt);
    for (int t = 0; q && t < 4; t++) {
        if ((t > 0 && (int)td_cpu_isa() < (t < 3 ? t : 2)) || (t == 3 && !td_quant_vnni())) {
            printf("test_quant: the %s kernels do not run here (or TIDE_CPU_ISA caps them), "
                   "skipped\n", names[t]);
            continue;
        }
        int bad = dots_bad(tiers[t], fmt, tide_data_ptr(q), tide_shape(q)[1], tide_data_ptr(x),
                           352, 13);
        CHECK(bad == 0, "%s on tier %s: %d activation blocks or dots off the reference",
              tide_qformat_name(fmt), names[t], bad);
        if (t == 3) /* dpbusd sums the same integers as maddubs + madd */
            CHECK(same_dots(tiers[2], tiers[3], fmt, tide_data_ptr(q), tide_shape(q)[1],
                            tide_data_ptr(x), 352, 13),
                  "%s: the VNNI kernels give the avx512 kernels' bits", tide_qformat_name(fmt));
    }
    tide_release(w), tide_release(x), tide_release(q);
}

/* tide_qlinear at this process's tier: [m, k] inputs and a 3-D one, against the reference. */
static void test_qlinear(int fmt, int64_t m, int64_t n, int64_t k)
{
    tide_tensor *w = random_matrix(n, k, 0.5f), *x = random_matrix(m, k, 2.0f);
    tide_tensor *q = tide_quantize(w, fmt), *y = q ? tide_qlinear(x, q, fmt) : NULL;
    int bad = 0;
    for (int64_t i = 0; y && i < m; i++)
        for (int64_t r = 0; r < n; r++) {
            double mag, want = ref_dot(fmt, (const uint8_t *)tide_data_ptr(q) + r * tide_shape(q)[1],
                                       (const float *)tide_data_ptr(x) + i * k, k, &mag);
            float got = ((const float *)tide_data_ptr(y))[i * n + r];
            bad += fabs(got - want) > (double)(k / 32 + 2) * 0x1p-23 * mag;
        }
    CHECK(y && bad == 0, "%s qlinear [%lld, %lld] x [%lld, %lld]^T: %d outputs off",
          tide_qformat_name(fmt), (long long)m, (long long)k, (long long)n, (long long)k, bad);
    /* against the float product with the dequantized weight: each activation moves by at most
     * half its block's step d/2, so |err| <= sum_b d_b/2 * sum_i |w_i| (+ float rounding) */
    tide_tensor *wd = tide_dequantize(q, fmt, k), *wt = tide_transpose(wd, 0, 1);
    tide_tensor *exact = tide_matmul(x, wt);
    int far = 0;
    for (int64_t i = 0; exact && y && i < m; i++)
        for (int64_t r = 0; r < n; r++) {
            const float *xr = (const float *)tide_data_ptr(x) + i * k;
            const float *wr = (const float *)tide_data_ptr(wd) + r * k;
            double bound = 0, mag = 0;
            for (int64_t b = 0; b < k / 32; b++) {
                float amax = 0;
                double sw = 0;
                for (int j = 0; j < 32; j++) {
                    amax = fmaxf(amax, fabsf(xr[b * 32 + j]));
                    sw += fabs(wr[b * 32 + j]);
                    mag += fabs(wr[b * 32 + j] * xr[b * 32 + j]);
                }
                bound += amax / 127 / 2 * sw;
            }
            double diff = fabs(((const float *)tide_data_ptr(y))[i * n + r] -
                               ((const float *)tide_data_ptr(exact))[i * n + r]);
            far += diff > bound * 1.001 + 1e-5 * mag;
        }
    CHECK(exact && far == 0, "%s: %d outputs beyond the activation quantization bound",
          tide_qformat_name(fmt), far);
    /* a 3-D input gives [2, m, n] equal to the 2-D rows */
    int64_t s3[3] = {1, m, k};
    tide_tensor *x3 = tide_reshape(x, 3, s3), *y3 = x3 ? tide_qlinear(x3, q, fmt) : NULL;
    CHECK(y3 && tide_ndim(y3) == 3 && tide_shape(y3)[2] == n &&
              memcmp(tide_data_ptr(y3), tide_data_ptr(y), sizeof(float) * (size_t)(m * n)) == 0,
          "qlinear of a 3-D input");
    tide_release(x3), tide_release(y3), tide_release(wd), tide_release(wt), tide_release(exact);
    tide_release(w), tide_release(x), tide_release(q), tide_release(y);
}

/* dx = g @ dequantize(q); the weight gets none. */
static void test_grad(int fmt)
{
    tide_tensor *w = random_matrix(40, 64, 1.0f), *x = random_matrix(3, 64, 1.0f);
    tide_tensor *g = random_matrix(3, 40, 1.0f), *q = tide_quantize(w, fmt);
    tide_requires_grad_(x, true);
    tide_tensor *y = tide_qlinear(x, q, fmt), *yg = tide_mul(y, g), *loss = tide_sum(yg, NULL, 0, false);
    CHECK(loss && tide_backward(loss, NULL, false) == 0, "qlinear backward: %s", tide_last_error());
    tide_tensor *dx = tide_grad(x), *wd = tide_dequantize(q, fmt, 64), *want = tide_matmul(g, wd);
    bool same = dx && want && tide_numel(dx) == tide_numel(want);
    for (int64_t i = 0; same && i < tide_numel(dx); i++)
        same = ((const float *)tide_data_ptr(dx))[i] == ((const float *)tide_data_ptr(want))[i];
    CHECK(same, "%s: the gradient in x is g @ dequantize(q), bitwise", tide_qformat_name(fmt));
    tide_release(w), tide_release(x), tide_release(g), tide_release(q), tide_release(y);
    tide_release(yg), tide_release(loss), tide_release(dx), tide_release(wd), tide_release(want);
}

/* A captured graph (quantize-free: the weight is captured by reference) equals eager bitwise. */
static void test_jit(int fmt)
{
    tide_tensor *w = random_matrix(48, 96, 1.0f), *x = random_matrix(2, 96, 1.0f);
    tide_tensor *q = tide_quantize(w, fmt), *eager = tide_qlinear(x, q, fmt);
    tide_tensor *in[1] = {x}, *out = NULL;
    tide_graph *gr = NULL;
    if (tide_jit_begin(in, 1) == 0) {
        tide_tensor *y = tide_qlinear(x, q, fmt), *r = y ? tide_relu(y) : NULL;
        gr = tide_jit_end(&r, 1);
        tide_release(y), tide_release(r);
    }
    tide_tensor *x2 = random_matrix(2, 96, 1.0f), *in2[1] = {x2};
    tide_tensor *e2 = tide_qlinear(x2, q, fmt), *re2 = e2 ? tide_relu(e2) : NULL;
    CHECK(gr && tide_graph_run(gr, in2, 1, &out) == 0 && re2 &&
              memcmp(tide_data_ptr(out), tide_data_ptr(re2), sizeof(float) * 96) == 0,
          "%s: jit replay equals eager: %s", tide_qformat_name(fmt), tide_last_error());
    tide_graph_free(gr);
    tide_release(w), tide_release(x), tide_release(q), tide_release(eager), tide_release(out);
    tide_release(x2), tide_release(e2), tide_release(re2);
}

/* A dynamic capture: x's rows change between runs (replay.c's rule for qlinear). */
static void test_jit_dynamic(int fmt)
{
    tide_tensor *w = random_matrix(40, 64, 1.0f), *x = random_matrix(2, 64, 1.0f);
    tide_tensor *q = tide_quantize(w, fmt), *in[1] = {x}, *out = NULL;
    uint32_t mask = 1; /* dim 0 of x */
    tide_graph *gr = NULL;
    if (tide_jit_begin_dynamic(in, 1, &mask) == 0) {
        tide_tensor *y = tide_qlinear(x, q, fmt);
        gr = tide_jit_end(&y, 1);
        tide_release(y);
    }
    tide_tensor *x5 = random_matrix(5, 64, 1.0f), *in5[1] = {x5};
    tide_tensor *want = tide_qlinear(x5, q, fmt);
    CHECK(gr && tide_graph_run(gr, in5, 1, &out) == 0 && tide_shape(out)[0] == 5 &&
              memcmp(tide_data_ptr(out), tide_data_ptr(want), sizeof(float) * 5 * 40) == 0,
          "%s: a dynamic capture follows x's rows: %s", tide_qformat_name(fmt), tide_last_error());
    tide_graph_free(gr);
    tide_release(w), tide_release(x), tide_release(q), tide_release(out), tide_release(x5);
    tide_release(want);
}

static void test_errors(void)
{
    tide_tensor *w = random_matrix(4, 40, 1.0f), *w64 = random_matrix(4, 64, 1.0f);
    CHECK_ERROR(tide_quantize(w, TIDE_Q8_0), "quantize", "multiple of 32", "[4, 40]");
    CHECK_ERROR(tide_quantize(w64, (tide_qformat)7), "quantize", "unknown quantization format 7");
    tide_tensor *q = tide_quantize(w64, TIDE_Q8_0), *x = random_matrix(3, 64, 1.0f);
    CHECK_ERROR(tide_dequantize(q, TIDE_Q4_0, 64), "dequantize", "36 bytes", "rows of 68");
    CHECK_ERROR(tide_dequantize(q, TIDE_Q8_0, 48), "dequantize", "K = 48", "multiple of 32");
    CHECK_ERROR(tide_dequantize(w64, TIDE_Q8_0, 64), "dequantize", "must be uint8", "float32");
    CHECK_ERROR(tide_qlinear(w, q, TIDE_Q8_0), "qlinear", "K = 40");
    tide_tensor *xd = tide_cast(x, TIDE_FLOAT64);
    CHECK_ERROR(tide_qlinear(xd, q, TIDE_Q8_0), "qlinear", "float64");
    CHECK_ERROR(tide_qlinear(x, q, TIDE_Q4_0), "qlinear", "q4_0", "rows of 68");
    CHECK(tide_qformat_from_name("q4_0") == TIDE_Q4_0 && tide_qformat_from_name("q5") == -1,
          "format names");
    tide_release(w), tide_release(w64), tide_release(q), tide_release(x), tide_release(xd);
}

int main(void)
{
    for (int fmt = 0; fmt < 2; fmt++) {
        test_quantize_bytes(fmt);
        test_tiers(fmt);
        test_qlinear(fmt, 1, 77, 256);
        test_qlinear(fmt, 5, 130, 96);
        test_qlinear(fmt, 1, 1500, 768); /* rows over several threads' tasks */
        test_grad(fmt);
        test_jit(fmt);
        test_jit_dynamic(fmt);
    }
    test_q4_0_layout();
    test_errors();
    printf("test_quant: tier %s\n", td_cpu_isa_name(td_cpu_isa()));
    return test_summary("test_quant");
}
