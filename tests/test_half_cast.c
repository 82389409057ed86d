/*
 * test_half_cast.c — the CPU's vector conversions between float32 and float16 / bfloat16
 * (devices/cpu/cpu_half.h) against core/half.h's scalar ones, which define the bits: every
 * 16-bit pattern up, and float32 edge values plus a large sample of bit patterns down, for
 * each tier's table this CPU can run (an AVX-512 table is compiled everywhere but only run on a
 * CPU that has AVX-512; the test says when it skips one). Then the same through tide_cast
 * (contiguous, threaded, and strided) at the tier this process runs, which scripts/test.sh
 * varies with TIDE_CPU_ISA. Every comparison is bitwise, NaN payloads included: no tolerance.
 * First, TIDE_LOG=blas's line for a product on 16-bit operands.
 */
#define _GNU_SOURCE /* setenv */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/half.h"
#include "devices/cpu/cpu_half.h"
#include "devices/cpu/cpu_isa.h"
#include "devices/cpu/cpu_matmul_bf16.h"
#include "test_util.h"
#include "tide.h"

/* Float32 values where rounding to 16 bits is delicate, as bit patterns (each also negated). */
static const uint32_t edge_bits[] = {
    0x00000000, 0x00000001, 0x007fffff, 0x00800000,  /* zero, float32 subnormals, min normal */
    0x33000000, 0x33000001, 0x337fffff, 0x33800000,  /* 2^-25 (tie to 0), just above, 2^-24 */
    0x33c00000, 0x387fc000, 0x387fe000, 0x38800000,  /* 1.5*2^-24, f16 subnormal/normal edge */
    0x3f800000, 0x3f801000, 0x3f803000, 0x3f800800,  /* 1 and f16 ties to even either way */
    0x3f808000, 0x3f818000, 0x3f807fff, 0x3f808001,  /* bf16 ties and near-ties */
    0x477fe000, 0x477fefff, 0x477ff000, 0x47800000,  /* 65504, below/at the f16 overflow tie */
    0x7f7fffff, 0x7f7f8000, 0x7f7f7fff, 0x7f800000,  /* float32 max, bf16 overflow tie, inf */
    0x7f800001, 0x7fbfffff, 0x7fc00000, 0x7fffffff,  /* signaling and quiet NaNs, payloads */
    0x7f802000, 0x7fa00000, 0x7f810000, 0x7f8000ff,
};

enum { N16 = 65536 };

static int count_mismatch_up(const uint16_t *h, const float *got, int64_t n, int bf)
{
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        float want = bf ? td_bf16_to_f32(h[i]) : td_f16_to_f32(h[i]);
        bad += td_f32_bits(want) != td_f32_bits(got[i]);
    }
    return bad;
}

static int count_mismatch_down(const float *x, const uint16_t *got, int64_t n, int bf)
{
    int bad = 0;
    for (int64_t i = 0; i < n; i++) {
        uint16_t want = bf ? td_f32_to_bf16(x[i]) : td_f32_to_f16(x[i]);
        if (want != got[i] && bad++ < 3)
            fprintf(stderr, "  %s(0x%08x) = 0x%04x, want 0x%04x\n", bf ? "bf16" : "f16",
                    td_f32_bits(x[i]), got[i], want);
    }
    return bad;
}

/* The float32 sample: edge values and their negations, every 4093rd bit pattern (a prime
 * stride, so every exponent and many low-bit patterns; fewer under valgrind), and random
 * patterns. */
static float *float_sample(int64_t *n)
{
    int64_t nedge = (int64_t)(sizeof edge_bits / sizeof edge_bits[0]);
    uint64_t stride = RUNNING_ON_VALGRIND ? 262139 : 4093; /* valgrind: ~16K patterns */
    int64_t nstride = (int64_t)(0x100000000ULL / stride) + 1;
    int64_t nrand = RUNNING_ON_VALGRIND ? 20000 : 200000;
    float *x = malloc(sizeof(float) * (size_t)(2 * nedge + nstride + nrand));
    int64_t k = 0;
    for (int64_t i = 0; i < nedge; i++) {
        x[k++] = td_bits_f32(edge_bits[i]);
        x[k++] = td_bits_f32(edge_bits[i] | 0x80000000u);
    }
    for (uint64_t b = 0; b < 0x100000000ULL; b += stride)
        x[k++] = td_bits_f32((uint32_t)b);
    uint64_t s = 0x9e3779b97f4a7c15ULL;
    for (int64_t i = 0; i < nrand; i++) {
        s ^= s << 13, s ^= s >> 7, s ^= s << 17;
        x[k++] = td_bits_f32((uint32_t)(s >> 16));
    }
    *n = k;
    return x;
}

/* One table: every conversion, from element 0 and from element 1 (other alignment, other
 * tail length). */
static void test_table(const char *tier, const td_half_kernels *k, const float *x, int64_t nx)
{
    uint16_t *h = malloc(sizeof(uint16_t) * N16), *h2 = malloc(sizeof(uint16_t) * (size_t)nx);
    float *f = malloc(sizeof(float) * N16);
    for (int i = 0; i < N16; i++)
        h[i] = (uint16_t)i;
    for (int off = 0; off < 2; off++) {
        k->f16_to_f32(N16 - off, f + off, h + off);
        int bad = count_mismatch_up(h + off, f + off, N16 - off, 0);
        CHECK(bad == 0, "%s f16->f32 (offset %d): %d of 65536 patterns differ", tier, off, bad);
        k->bf16_to_f32(N16 - off, f + off, h + off);
        bad = count_mismatch_up(h + off, f + off, N16 - off, 1);
        CHECK(bad == 0, "%s bf16->f32 (offset %d): %d of 65536 patterns differ", tier, off, bad);
        k->f32_to_f16(nx - off, h2 + off, x + off);
        bad = count_mismatch_down(x + off, h2 + off, nx - off, 0);
        CHECK(bad == 0, "%s f32->f16 (offset %d): %d of %lld values differ", tier, off, bad,
              (long long)nx);
        k->f32_to_bf16(nx - off, h2 + off, x + off);
        bad = count_mismatch_down(x + off, h2 + off, nx - off, 1);
        CHECK(bad == 0, "%s f32->bf16 (offset %d): %d of %lld values differ", tier, off, bad,
              (long long)nx);
    }
    free(h), free(h2), free(f);
}

/* Every table up to the tier this process runs (the CPU's best, capped by TIDE_CPU_ISA: under
 * valgrind, baseline only). */
static void test_tables(const float *x, int64_t nx)
{
    static const td_half_kernels *const tables[3] = {
        &td_half_kernels_baseline, &td_half_kernels_avx2, &td_half_kernels_avx512};
    td_isa_level top = td_cpu_isa();
    for (int t = 0; t < 3; t++) {
        if (t <= (int)top)
            test_table(td_cpu_isa_name((td_isa_level)t), tables[t], x, nx);
        else
            printf("test_half_cast: %s table compiled, not run (this process's tier: %s)\n",
                   td_cpu_isa_name((td_isa_level)t), td_cpu_isa_name(top));
    }
}

/* tide_cast at this process's tier: contiguous (threaded: beyond one copy grain) and through a
 * transposed view (the strided scalar path), both directions, both dtypes. */
static void test_through_tide(const float *sample, int64_t nsample)
{
    enum { n = 300000 };
    int64_t shape[1] = {n}, sq[2] = {500, 600};
    float *x = malloc(sizeof(float) * n);
    for (int64_t i = 0; i < n; i++)
        x[i] = sample[i % nsample];
    tide_tensor *xf = tide_from_data(x, 1, shape, TIDE_FLOAT32);
    tide_tensor *xs = tide_from_data(x, 2, sq, TIDE_FLOAT32), *xt = tide_transpose(xs, 0, 1);
    static const tide_dtype half[2] = {TIDE_FLOAT16, TIDE_BFLOAT16};
    for (int bf = 0; bf < 2; bf++) {
        tide_tensor *d = tide_cast(xf, half[bf]), *u = tide_cast(d, TIDE_FLOAT32);
        const uint16_t *dh = tide_data_ptr(d);
        CHECK(count_mismatch_down(x, dh, n, bf) == 0, "tide_cast f32->%s contiguous",
              bf ? "bf16" : "f16");
        CHECK(count_mismatch_up(dh, tide_data_ptr(u), n, bf) == 0, "tide_cast %s->f32 contiguous",
              bf ? "bf16" : "f16");
        tide_tensor *dt = tide_cast(xt, half[bf]), *dc = tide_contiguous(dt);
        tide_tensor *ct = tide_contiguous(xt);
        CHECK(count_mismatch_down(tide_data_ptr(ct), tide_data_ptr(dc), n, bf) == 0,
              "tide_cast f32->%s transposed", bf ? "bf16" : "f16");
        tide_release(d), tide_release(u), tide_release(dt), tide_release(dc), tide_release(ct);
    }
    tide_release(xf), tide_release(xs), tide_release(xt);
    free(x);
}

/* TIDE_LOG=blas names the path of a product on 16-bit operands (ops/dispatch.c), once per op
 * and dtype: two float16 and two bfloat16 products log two lines (bfloat16 on AMX tiles where
 * this tier has them). The values: ones times ones
 * is k (8, exact in both dtypes). */
static void test_blas_log(void)
{
    setenv("TIDE_LOG", "blas", 1); /* read once, at the first tide call: this one's */
    FILE *tmp = tmpfile();
    fflush(stderr);
    int saved = dup(2);
    if (tmp)
        dup2(fileno(tmp), 2);
    int64_t shape[2] = {4, 8}, shape_t[2] = {8, 3};
    static const tide_dtype dts[2] = {TIDE_FLOAT16, TIDE_BFLOAT16};
    for (int k = 0; k < 4; k++) {
        tide_tensor *a = tide_ones(2, shape, dts[k / 2]), *b = tide_ones(2, shape_t, dts[k / 2]);
        tide_tensor *c = tide_matmul(a, b);
        const uint16_t *cv = c ? tide_data_ptr(c) : NULL;
        float v = !cv ? 0 : k < 2 ? td_f16_to_f32(cv[11]) : td_bf16_to_f32(cv[11]);
        CHECK(c && tide_get_dtype(c) == dts[k / 2] && v == 8, "matmul of %s: %g %s",
              tide_dtype_name(dts[k / 2]), v, tide_last_error());
        tide_release(a), tide_release(b), tide_release(c);
    }
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    char log[8192] = "";
    if (tmp) {
        rewind(tmp);
        log[fread(log, 1, sizeof log - 1, tmp)] = 0;
        fclose(tmp);
    }
    /* each line once: no second one after the first */
    const char *f16 = strstr(log, "matmul [4, 8] x [8, 3] (float16, float16) on cpu: operands "
                                  "cast to float32, the float32 matmul (OpenBLAS sgemm), result "
                                  "cast to float16");
    const char *bf16 = strstr(log, td_cpu_bf16_native()
                                        ? "(bfloat16, bfloat16) on cpu: the device's own "
                                          "bfloat16 kernel"
                                        : "(bfloat16, bfloat16) on cpu: operands cast to float32");
    CHECK(f16 && !strstr(f16 + 40, "(float16, float16)"), "one float16 line: %s", log);
    CHECK(bf16 && !strstr(bf16 + 20, "(bfloat16, bfloat16)"), "one bfloat16 line: %s", log);
    unsetenv("TIDE_LOG");
}

int main(void)
{
    test_blas_log();
    int64_t nx;
    float *x = float_sample(&nx);
    test_tables(x, nx);
    test_through_tide(x, nx);
    free(x);
    return test_summary("test_half_cast");
}
