/*
 * test_vulkan_half.c — float16 and bfloat16 on the Vulkan device against the CPU, bit for bit:
 * casts between every dtype and both half dtypes, both ways, over edge values (±0, subnormals of
 * both formats, the largest finite values, the 65504/65520 overflow boundary, halfway ties,
 * infinities, NaN with payloads; every float16 and bfloat16 bit pattern) in contiguous, strided
 * and transposed layouts; copy_ between dtypes into transposed views; fill. Then ops on half
 * tensors (add, matmul, sum: float32 between casts, ops/dispatch.c) within a tolerance, a jitted
 * chain with half casts against eager, and the count of CPU fallbacks: none on lavapipe, which
 * has storageBuffer16BitAccess (ctest also runs this with TIDE_LOG=vulkan and fails on a
 * fallback line). With TIDE_VULKAN_NO_16BIT=1 (the ctest run test_vulkan_half_no16) the same
 * results come from the CPU fallback, and the fallbacks are counted.
 *
 * With no Vulkan it prints why and passes. Under valgrind a sample of the bit patterns is used.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "devices/vulkan/vulkan_device.h"
#include "tide.h"
#include "test_util.h"

static bool quick;
static const char *const dt_names[] = {"float32", "float64", "int32", "int64",
                                       "uint8",   "bool",    "float16", "bfloat16"};
#define NDT 8 /* tide_dtype order: f32 f64 i32 i64 u8 bool f16 bf16 */

static bool is_half(int dt) { return dt == TIDE_FLOAT16 || dt == TIDE_BFLOAT16; }

/* ---- source values ------------------------------------------------------------------------ */

static uint32_t lcg(uint32_t *state)
{
    *state = *state * 1664525u + 1013904223u;
    return *state;
}

/* float32 bit patterns around every edge of both half formats, then pseudo-random ones */
static const uint32_t f32_edges[] = {
    0x00000000, 0x80000000, 0x00000001, 0x807fffff, 0x00400000,  /* ±0, float32 subnormals */
    0x33800000, 0xb3800000, 0x33000000, 0x33000001, 0x33400000,  /* 2^-24, 2^-25 (tie), ... */
    0x337fffff, 0x38800000, 0x387fc000, 0x387fe000, 0x387ff000,  /* f16 subnormal to normal */
    0x3f800000, 0x3f801000, 0x3f803000, 0x3f801001, 0x3f808000,  /* f16 and bf16 ties */
    0x3f818000, 0x3f808001, 0x3f7fffff, 0x477fe000, 0x477fefff,  /* 65504, just below 65520 */
    0x477ff000, 0xc77ff000, 0x47800000, 0x7f7fffff, 0x7f7f7fff,  /* 65520: inf, max float */
    0x7f7f8000, 0xff7f8000, 0x7f800000, 0xff800000, 0x7fc00000,  /* bf16 overflow tie, infs */
    0xffc00000, 0x7fc00001, 0x7f800001, 0xff812345, 0x7fbfffff,  /* NaN payloads, signaling */
    0x7fe02000, 0xffffffff, 0x00800000, 0x80010000, 0x00008000,  /* bf16 subnormals */
    0x4b800001, 0xcf000000, 0x4f000000, 0x43800000, 0x437f8000,  /* large integers */
};

static const double f64_edges[] = {
    0.0, -0.0, 1.0 + 0x1p-11 + 0x1p-40, 1.0 + 0x1p-8 + 0x1p-40, /* ties only after float32 */
    65504.0, 65519.999, 65520.0, -65520.0, 1e-40, -1e-45, 1e-50, 0x1p-24, 0x1p-25, 3e38, 3.5e38,
    1e300, -1e300, 4.9e-324, INFINITY, -INFINITY, NAN, -NAN, 0.1, -2.5, 123456.789, 1e10,
};

static const int64_t int_edges[] = {
    0, 1, -1, 2, 255, 256, 2049, 2051, 4097, 65504, 65505, 65519, 65520, 65536, -65536, 16777217,
    2147483647, -2147483647 - 1, 1234567, -99, 0x7fffffffffffffffLL, -0x7fffffffffffffffLL - 1,
    (1LL << 53) + 1, (1LL << 40) + 12345, -(1LL << 31) - 1,
};

/* The raw values of a source of dtype dt: *n elements, a multiple of 8 (the transposed layout is
 * [8, n/8]); malloc'd. */
static void *make_values(int dt, int64_t *n)
{
    int64_t count, cap = 70000;
    char *buf = calloc((size_t)cap, 8);
    uint32_t seed = 12345;
    if (dt == TIDE_FLOAT32) {
        uint32_t *v = (uint32_t *)buf;
        count = 0;
        for (size_t i = 0; i < sizeof f32_edges / sizeof *f32_edges; i++)
            v[count++] = f32_edges[i];
        for (int i = 0; i < (quick ? 64 : 1024); i++)
            v[count++] = lcg(&seed);
    } else if (dt == TIDE_FLOAT64) {
        count = (int64_t)(sizeof f64_edges / sizeof *f64_edges);
        memcpy(buf, f64_edges, sizeof f64_edges);
    } else if (dt == TIDE_INT32 || dt == TIDE_INT64) {
        count = (int64_t)(sizeof int_edges / sizeof *int_edges);
        for (int64_t i = 0; i < count; i++) {
            if (dt == TIDE_INT32)
                ((int32_t *)buf)[i] = (int32_t)int_edges[i];
            else
                ((int64_t *)buf)[i] = int_edges[i];
        }
    } else if (dt == TIDE_UINT8 || dt == TIDE_BOOL) {
        count = dt == TIDE_UINT8 ? 256 : 2;
        for (int64_t i = 0; i < count; i++)
            buf[i] = (char)i;
    } else { /* every 16-bit pattern (a sample under valgrind) */
        count = 0;
        for (uint32_t p = 0; p < 65536; p += quick ? 37 : 1)
            ((uint16_t *)buf)[count++] = (uint16_t)p;
    }
    size_t es = dt == TIDE_FLOAT64 || dt == TIDE_INT64 ? 8 : dt == TIDE_FLOAT32 || dt == TIDE_INT32
                                                                ? 4
                                                            : is_half(dt) ? 2 : 1;
    int64_t padded = (count + 7) / 8 * 8; /* repeat the first values */
    for (int64_t i = count; i < padded; i++)
        memcpy(buf + i * (int64_t)es, buf + (i - count) * (int64_t)es, es);
    *n = padded;
    return buf;
}

/* ---- layouts and comparison ---------------------------------------------------------------- */

enum { CONTIG, STRIDED, TRANSPOSED, NLAYOUTS };
static const char *const layout_names[] = {"contiguous", "strided", "transposed"};

static tide_tensor *apply_layout(tide_tensor *x, int layout)
{
    int64_t n = tide_numel(x);
    if (layout == STRIDED)
        return tide_slice(x, 0, 1, n, 2);
    if (layout == TRANSPOSED) {
        int64_t shape[2] = {8, n / 8};
        tide_tensor *r = tide_reshape(x, 2, shape), *t = tide_transpose(r, 0, 1);
        tide_release(r);
        return t;
    }
    return tide_retain(x);
}

/* got (any device) and want (CPU) hold the same bits, element by element */
static void check_bits(const char *what, const tide_tensor *got, const tide_tensor *want)
{
    if (!got || !want) {
        CHECK(0, "%s: no result: %s", what, tide_last_error());
        return;
    }
    int64_t n = tide_numel(want);
    size_t es = (size_t)tide_dtype_size(tide_get_dtype(want)), bytes = (size_t)n * es + 1;
    char *a = malloc(bytes), *b = malloc(bytes);
    int ra = tide_to_buffer(got, a, bytes), rb = tide_to_buffer(want, b, bytes);
    CHECK(ra == 0 && rb == 0 && tide_numel(got) == n, "%s: read back: %s", what, tide_last_error());
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0 && ra == 0; i++)
        if (memcmp(a + i * (int64_t)es, b + i * (int64_t)es, es) != 0)
            bad = i;
    uint64_t g = 0, w = 0;
    if (bad >= 0) {
        memcpy(&g, a + bad * (int64_t)es, es);
        memcpy(&w, b + bad * (int64_t)es, es);
    }
    CHECK(bad < 0, "%s: element %lld is 0x%llx, the CPU's 0x%llx", what, (long long)bad,
          (unsigned long long)g, (unsigned long long)w);
    free(a), free(b);
}

/* ---- casts, copies, fills --------------------------------------------------------------------- */

static void test_casts(void)
{
    for (int from = 0; from < NDT; from++) {
        int64_t n;
        void *vals = make_values(from, &n);
        tide_tensor *c = tide_from_data(vals, 1, &n, (tide_dtype)from), *v = tide_to(c, "vulkan");
        free(vals);
        for (int layout = 0; layout < NLAYOUTS; layout++) {
            tide_tensor *lc = apply_layout(c, layout), *lv = apply_layout(v, layout);
            for (int to = 0; to < NDT; to++) {
                if (to == from || !(is_half(from) || is_half(to)))
                    continue;
                char what[96];
                snprintf(what, sizeof what, "cast %s -> %s, %s", dt_names[from], dt_names[to],
                         layout_names[layout]);
                tide_tensor *rc = tide_cast(lc, (tide_dtype)to), *rv = tide_cast(lv, (tide_dtype)to);
                check_bits(what, rv, rc);
                tide_release(rc), tide_release(rv);
            }
            tide_release(lc), tide_release(lv);
        }
        tide_release(c), tide_release(v);
    }
}

/* dst[8, n/8] of dtype to, written through its transpose (or as is for uint8/bool, whose
 * shader output must be contiguous) from a source of dtype from */
static void copy_case(int from, int to)
{
    int64_t n;
    void *vals = make_values(from, &n);
    int64_t shape[2] = {8, n / 8}, tshape[2] = {n / 8, 8};
    bool bytes_out = to == TIDE_UINT8 || to == TIDE_BOOL;
    tide_tensor *sc = tide_from_data(vals, 2, bytes_out ? shape : tshape, (tide_dtype)from),
                *sv = tide_to(sc, "vulkan");
    free(vals);
    tide_tensor *dc = tide_zeros(2, shape, (tide_dtype)to),
                *dv = tide_zeros_on("vulkan", 2, shape, (tide_dtype)to);
    tide_tensor *vc = bytes_out ? tide_retain(dc) : tide_transpose(dc, 0, 1),
                *vv = bytes_out ? tide_retain(dv) : tide_transpose(dv, 0, 1);
    char what[96];
    snprintf(what, sizeof what, "copy_ %s into %s%s", dt_names[from], dt_names[to],
             bytes_out ? "" : " (transposed view)");
    CHECK(tide_copy_(vc, sc) == 0 && tide_copy_(vv, sv) == 0, "%s: %s", what, tide_last_error());
    check_bits(what, dv, dc);
    tide_release(sc), tide_release(sv), tide_release(dc), tide_release(dv);
    tide_release(vc), tide_release(vv);
}

static void test_copies(void)
{
    for (int h = TIDE_FLOAT16; h <= TIDE_BFLOAT16; h++)
        for (int other = 0; other < NDT; other++) {
            copy_case(other, h); /* same dtype too: a bit copy, signaling NaNs kept */
            if (other != h)
                copy_case(h, other);
        }
}

static void test_fills(void)
{
    const double values[] = {0.1,    -0.0,    65504.0, 65519.0, 65520.0, 1e-7,     6e-8,
                             3.0e38, 3.4e38, -1e-40,  INFINITY, -INFINITY, NAN,   -NAN};
    int64_t shape[2] = {6, 10};
    for (int h = TIDE_FLOAT16; h <= TIDE_BFLOAT16; h++)
        for (size_t i = 0; i < sizeof values / sizeof *values; i++) {
            tide_tensor *c = tide_zeros(2, shape, (tide_dtype)h),
                        *v = tide_zeros_on("vulkan", 2, shape, (tide_dtype)h);
            tide_tensor *sc = tide_slice(c, 1, 1, 10, 3), *sv = tide_slice(v, 1, 1, 10, 3);
            char what[64];
            snprintf(what, sizeof what, "fill_ %s %g (strided view)", dt_names[h], values[i]);
            CHECK(tide_fill_(sc, values[i]) == 0 && tide_fill_(sv, values[i]) == 0, "%s: %s",
                  what, tide_last_error());
            check_bits(what, v, c);
            CHECK(tide_fill_(c, values[i]) == 0 && tide_fill_(v, values[i]) == 0, "%s", what);
            check_bits(what, v, c);
            tide_release(c), tide_release(v), tide_release(sc), tide_release(sv);
        }
}

/* ---- ops on half tensors ------------------------------------------------------------------- */

/* max |got - want| <= atol + rtol |want| over all elements (NaN where both are NaN) */
static void check_close(const char *what, const tide_tensor *got, const tide_tensor *want,
                        double atol, double rtol)
{
    if (!got || !want) {
        CHECK(0, "%s: no result: %s", what, tide_last_error());
        return;
    }
    tide_tensor *g = tide_cast(got, TIDE_FLOAT64), *w = tide_cast(want, TIDE_FLOAT64);
    int64_t n = tide_numel(w);
    double *a = malloc(sizeof(double) * (size_t)n), *b = malloc(sizeof(double) * (size_t)n);
    CHECK(g && tide_numel(g) == n && tide_to_buffer(g, a, sizeof(double) * (size_t)n) == 0 &&
              tide_to_buffer(w, b, sizeof(double) * (size_t)n) == 0,
          "%s: read back: %s", what, tide_last_error());
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++)
        if (!(fabs(a[i] - b[i]) <= atol + rtol * fabs(b[i])) && !(isnan(a[i]) && isnan(b[i])))
            bad = i;
    CHECK(bad < 0, "%s: element %lld is %.9g, the CPU's %.9g", what, (long long)bad,
          bad >= 0 ? a[bad] : 0.0, bad >= 0 ? b[bad] : 0.0);
    free(a), free(b);
    tide_release(g), tide_release(w);
}

static tide_tensor *rand_half(int nd, const int64_t *shape, int dt)
{
    tide_tensor *u = tide_rand(nd, shape, TIDE_FLOAT32), *s = tide_add_scalar(u, -0.5);
    tide_tensor *h = tide_cast(s, (tide_dtype)dt);
    tide_release(u), tide_release(s);
    return h;
}

/* Each op computes in float32 and rounds to the half dtype once. The float32 results of the two
 * devices agree within 1e-6 relative (test_vulkan's tolerance; the matmul's and the sum's
 * orders of accumulation differ, hence atol), so the rounded ones may differ by one half ulp:
 * at most 2^-10 relative for float16, 2^-7 for bfloat16. */
static void test_ops(void)
{
    int64_t as[2] = {33, 47}, bs[2] = {47, 21};
    for (int h = TIDE_FLOAT16; h <= TIDE_BFLOAT16; h++) {
        double rtol = h == TIDE_FLOAT16 ? 0x1p-10 : 0x1p-7, atol = 1e-5;
        tide_tensor *a = rand_half(2, as, h), *b = rand_half(2, bs, h), *a2 = rand_half(2, as, h);
        tide_tensor *av = tide_to(a, "vulkan"), *bv = tide_to(b, "vulkan"), *a2v = tide_to(a2, "vulkan");
        char what[64];
        snprintf(what, sizeof what, "add %s", dt_names[h]);
        tide_tensor *rc = tide_add(a, a2), *rv = tide_add(av, a2v);
        CHECK(rv && tide_get_dtype(rv) == (tide_dtype)h, "%s: dtype", what);
        check_close(what, rv, rc, atol, rtol);
        tide_release(rc), tide_release(rv);
        snprintf(what, sizeof what, "matmul %s", dt_names[h]);
        rc = tide_matmul(a, b), rv = tide_matmul(av, bv);
        check_close(what, rv, rc, atol, rtol);
        tide_release(rc), tide_release(rv);
        snprintf(what, sizeof what, "sum over dim 1 %s", dt_names[h]);
        int dim = 1;
        rc = tide_sum(a, &dim, 1, false), rv = tide_sum(av, &dim, 1, false);
        check_close(what, rv, rc, atol, rtol);
        tide_release(rc), tide_release(rv);
        tide_release(a), tide_release(b), tide_release(a2);
        tide_release(av), tide_release(bv), tide_release(a2v);
    }
}

/* ---- the jit ------------------------------------------------------------------------------- */

/* float32 -> half, h + h and h * 3 (float32 between casts), back to float32, * 0.5 + 1 */
static tide_tensor *half_chain(const tide_tensor *x, int dt)
{
    tide_tensor *h = tide_cast(x, (tide_dtype)dt), *s = tide_add(h, h), *m = tide_mul_scalar(s, 3.0);
    tide_tensor *f = tide_cast(m, TIDE_FLOAT32), *g = tide_mul_scalar(f, 0.5),
                *r = tide_add_scalar(g, 1.0);
    tide_release(h), tide_release(s), tide_release(m), tide_release(f), tide_release(g);
    return r;
}

static void test_jit(void)
{
    int64_t shape[2] = {19, 53};
    tide_tensor *u = tide_rand(2, shape, TIDE_FLOAT32), *x = tide_mul_scalar(u, 70000.0);
    tide_tensor *xv = tide_to(x, "vulkan");
    for (int h = TIDE_FLOAT16; h <= TIDE_BFLOAT16; h++) {
        tide_tensor *eager = half_chain(xv, h), *cpu = half_chain(x, h);
        tide_jit_stats st = {0};
        CHECK(tide_jit_trace_begin(&st, NULL, NULL) == 0, "%s", tide_last_error());
        tide_tensor *jitted = half_chain(xv, h);
        CHECK(tide_jit_trace_end() == 0, "jit: %s", tide_last_error());
        char what[64];
        snprintf(what, sizeof what, "jitted chain with %s casts vs eager", dt_names[h]);
        check_bits(what, jitted, eager);
        CHECK(st.compiles > 0, "%s: nothing was compiled", what);
        snprintf(what, sizeof what, "chain with %s casts, Vulkan vs CPU", dt_names[h]);
        check_bits(what, eager, cpu);
        tide_release(eager), tide_release(cpu), tide_release(jitted);
    }
    tide_release(u), tide_release(x), tide_release(xv);
}

int main(void)
{
    quick = RUNNING_ON_VALGRIND;
    int64_t one = 1;
    tide_tensor *probe = tide_zeros(1, &one, TIDE_FLOAT32), *pv = tide_to(probe, "vulkan");
    tide_release(probe);
    if (!pv) {
        printf("test_vulkan_half: skipped: no Vulkan device (%s)\n", tide_last_error());
        tide_clear_error();
        return test_summary("test_vulkan_half");
    }
    tide_release(pv);
    uint64_t sub, disp, fb0, fb1;
    td_vulkan_stats(&sub, &disp, &fb0);
    test_casts();
    test_copies();
    test_fills();
    test_ops();
    test_jit();
    td_vulkan_stats(&sub, &disp, &fb1);
    const char *no16 = getenv("TIDE_VULKAN_NO_16BIT"), *icd = getenv("VK_DRIVER_FILES");
    if (no16 && *no16 && strcmp(no16, "0") != 0)
        CHECK(fb1 > fb0, "no fallbacks with 16-bit storage turned off");
    else if (icd && strstr(icd, "lvp_icd")) /* lavapipe has storageBuffer16BitAccess */
        CHECK(fb1 == fb0, "%llu ops fell back to the CPU", (unsigned long long)(fb1 - fb0));
    tide_shutdown();
    return test_summary("test_vulkan_half");
}
