/*
 * test_div_single.c — the jit's kernels that read one value in place against the plain ops,
 * bitwise, at the tier TIDE_CPU_ISA picks (the suite runs every tier):
 *   - x / s for one divisor (softmax's e / sum): at AVX2 and AVX-512 a reciprocal and one FMA
 *     correction, which must give the divide's correctly rounded bits wherever it runs, and
 *     fall back to the divide where it would under- or overflow;
 *   - exp(x - s) in one pass (softmax's exp(x - max)): the sub kernel's rounding, then the exp
 *     kernel's bits.
 * No tolerance: a quotient or an exp off by one ulp here is a jit that differs from eager.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>

#include "devices/cpu/cpu_elementwise.h"
#include "devices/cpu/cpu_isa.h"
#include "test_util.h"
#include "tide.h"

static const td_ew_kernels *tier_table(void)
{
    switch (td_cpu_isa()) {
    case TD_ISA_AVX512: return &td_ew_kernels_avx512;
    case TD_ISA_AVX2: return &td_ew_kernels_avx2;
    default: return &td_ew_kernels_baseline;
    }
}

static uint32_t bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    return u;
}

static float from_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, sizeof f);
    return f;
}

static uint32_t rng_state = 0x9e3779b9u;
static uint32_t next_u32(void)
{
    rng_state ^= rng_state << 13;
    rng_state ^= rng_state >> 17;
    rng_state ^= rng_state << 5;
    return rng_state;
}

/* Quotients of x[0..n) by s through the kernel (in place when in_place) against C's divide;
 * the count of lanes whose bits differ (NaNs compare as NaNs). */
static long div_mismatches(td_ew_binary_fn div_s, const float *x, int64_t n, float s, float *out,
                           int in_place)
{
    if (in_place) {
        memcpy(out, x, (size_t)n * sizeof *out);
        div_s(n, out, out, &s);
    } else {
        div_s(n, out, x, &s);
    }
    long bad = 0;
    for (int64_t i = 0; i < n; i++) {
        float want = x[i] / s;
        bad += isnan(want) ? !isnan(out[i]) : bits(want) != bits(out[i]);
    }
    return bad;
}

/* Every 5th mantissa of [1, 2) and of [2^-61, 2^-60) (across the fast path's lower edge), a
 * spread of exponents, and the special values: the divisors below cover the mantissas of the
 * quotient, and the edges send whole vectors to the divide. */
static float *dividends(int64_t *n)
{
    int64_t m = (1 << 23) / 5;
    float *x = malloc(sizeof *x * (size_t)(2 * m + 4096));
    if (!x)
        return NULL;
    int64_t k = 0;
    for (int64_t i = 0; i < m; i++)
        x[k++] = from_bits(0x3f800000u + (uint32_t)(5 * i));
    for (int64_t i = 0; i < m; i++)
        x[k++] = from_bits(((uint32_t)(127 - 61) << 23) + (uint32_t)(5 * i));
    for (int i = 0; i < 4000; i++) { /* any sign and exponent, subnormals and specials included */
        uint32_t u = next_u32();
        x[k++] = from_bits(i % 8 == 0 ? u : (u & 0x807fffffu) | ((40 + u % 175) << 23));
    }
    const float specials[] = {0.0f, -0.0f, INFINITY, -INFINITY, NAN, 0x1p-149f, -0x1p-126f,
                              0x1p-60f, 0x1p60f, 0x1.fffffep59f, 0x1.fffffep-61f, 0x1p61f,
                              FLT_MAX, -FLT_MIN, 1.0f, -3.0f};
    for (size_t i = 0; i < sizeof specials / sizeof *specials; i++)
        x[k++] = specials[i];
    *n = k;
    return x;
}

static void test_div_single(void)
{
    td_ew_binary_fn div_s = tier_table()->scalar[0][TIDE_OP_DIV - TIDE_OP_ADD][0];
    int64_t n = 0;
    float *x = dividends(&n);
    float *out = malloc(sizeof *out * (size_t)(n > 0 ? n : 1));
    CHECK(x && out, "out of memory");
    if (!x || !out) {
        free(x);
        free(out);
        return;
    }
    /* mantissa extremes, everyday divisors, a spread inside [2^-60, 2^60], its edges, and
     * divisors outside it (the divide runs there) */
    float divisors[48] = {1.0f,         3.0f,         7.0f,       10.0f,      0.1f,
                          0x1.000002p0f, 0x1.fffffep0f, -1.5f,     4096.0f,    0x1p-60f,
                          0x1p60f,      0x1p-61f,     0x1p61f,    0x1p-100f,  0x1p100f,
                          0x1p-140f,    0.0f,         -0.0f,      INFINITY,   NAN};
    int nd = 20;
    while (nd < 48) {
        uint32_t u = next_u32();
        divisors[nd++] = from_bits((u & 0x807fffffu) | ((127 - 60 + u % 121) << 23));
    }
    int slow = RUNNING_ON_VALGRIND; /* a few divisors there: each is a full sweep */
    for (int d = 0; d < (slow ? 4 : nd); d++) {
        long bad = div_mismatches(div_s, x, n, divisors[d], out, d % 2);
        CHECK(bad == 0, "x / %a: %ld of %lld quotients differ from the divide", divisors[d], bad,
              (long long)n);
    }
    /* every length up to two vectors past the widest, for the tails */
    for (int64_t len = 0; len < 40; len++) {
        long bad = div_mismatches(div_s, x + 3, len, 3.0f, out, 0);
        CHECK(bad == 0, "x / 3 over %lld elements: %ld differ", (long long)len, bad);
    }
    free(x);
    free(out);
}

static void test_sub_exp(void)
{
    const td_ew_kernels *t = tier_table();
    td_ew_binary_fn sub_s = t->scalar[0][TIDE_OP_SUB - TIDE_OP_ADD][0];
    td_ew_unary_fn exp_k = t->unary[TIDE_OP_EXP - TIDE_OP_FIRST_UNARY][TIDE_FLOAT32];
    enum { N = 4099 };
    static float x[N], fused[N], diff[N], want[N];
    for (int i = 0; i < N; i++) /* around the max, far below it (the slow path), specials */
        x[i] = i % 97 == 0 ? from_bits(next_u32())
                           : (float)((int)(next_u32() % 20000) - 10000) / 100.0f;
    x[5] = INFINITY, x[6] = -INFINITY, x[7] = NAN, x[8] = -0.0f;
    const float maxes[] = {0.0f, 100.0f, -3.5f, 87.0f, INFINITY};
    for (size_t m = 0; m < sizeof maxes / sizeof *maxes; m++)
        for (int64_t len = N - 40; len <= N; len++) {
            t->sub_s_exp_f32(len, fused, x, &maxes[m]);
            sub_s(len, diff, x, &maxes[m]);
            exp_k(len, want, diff);
            long bad = 0;
            for (int64_t i = 0; i < len; i++)
                bad += isnan(want[i]) ? !isnan(fused[i]) : bits(want[i]) != bits(fused[i]);
            CHECK(bad == 0, "exp(x - %g) over %lld elements: %ld differ from sub then exp",
                  maxes[m], (long long)len, bad);
        }
}

int main(void)
{
    printf("tier %s\n", td_cpu_isa_name(td_cpu_isa()));
    test_div_single();
    test_sub_exp();
    return test_summary("test_div_single");
}
