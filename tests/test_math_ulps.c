/*
 * test_math_ulps.c — the math primitives of issue 24 (log1p, expm1, log2, tan, asin, acos, atan,
 * sinh, cosh, trunc, atan2, fmod) in ulps against libm's double functions, on the CPU (whichever
 * TIDE_CPU_ISA tier runs), on the ref device and on Vulkan when a device is there; their special
 * values (+-0, +-inf, NaN, the ends of each domain) exactly as C's; integer inputs; errors.
 *
 * Bounds, from the kernels' stated errors (an ulp is that of the reference value in the output
 * dtype, the spacing just above |want|):
 * - CPU float32: SLEEF's u10 functions are within 1.0 ulp of the exact value, and the double
 *   reference is within 2^-29 of a float ulp of it: 1.0 (+2^-20). trunc and fmod are exact.
 * - CPU float64: SLEEF's 1.0 ulp plus glibc's own error on x86_64 (at most 1-2 ulps for these
 *   functions in its manual's table): 3.
 * - ref: libm's double function rounded once: 0.5 ulp for float32, bitwise for float64.
 * - Vulkan float32: the shaders of devices/vulkan/shaders/common.glsl, whose own parts (series,
 *   reductions) are within about 2 ulps, on top of what they take from the driver, which
 *   Vulkan bounds: division 2.5 ulps, exp 3 + 2|x|, log 3 (outside [0.5, 2]), sqrt 3. So
 *   log1p (log above 1) 4, asin and acos (a sqrt, then atan's series) 4, atan2 (a division
 *   first) 4, tan (its own sin and cos series, one division) 4, log2 3; expm1 on [-20, 20] and
 *   sinh and cosh on [-12, 12] carry exp's error, up to 43 and 27 ulps by the bound: 15 and
 *   12 here are the worst measured on lavapipe (14.5, 9.8) and NVIDIA 580 (-, 10.8) rounded up,
 *   tighter than the bound, so a driver with a worse exp fails here first.
 */
#include <math.h>
#include <stdlib.h>

#include "tide.h"
#include "test_util.h"

typedef tide_tensor *(*un_fn)(const tide_tensor *);
typedef tide_tensor *(*bin_fn)(const tide_tensor *, const tide_tensor *);

typedef struct math_op {
    const char *name;
    un_fn un;
    bin_fn bin;
    double (*ref1)(double);
    double (*ref2)(double, double);
    double lo, hi;     /* the sampled range of x (of a for binary ops) */
    double blo, bhi;   /* binary: the range of b */
    double vulkan_ulps; /* the bound above */
} math_op;

static const math_op OPS[] = {
    {"log1p", tide_log1p, NULL, log1p, NULL, -0.999, 20, 0, 0, 4},
    {"expm1", tide_expm1, NULL, expm1, NULL, -20, 20, 0, 0, 15},
    {"log2", tide_log2, NULL, log2, NULL, 1e-3, 8, 0, 0, 3},
    {"tan", tide_tan, NULL, tan, NULL, -1.5, 1.5, 0, 0, 4},
    {"asin", tide_asin, NULL, asin, NULL, -1, 1, 0, 0, 4},
    {"acos", tide_acos, NULL, acos, NULL, -1, 1, 0, 0, 4},
    {"atan", tide_atan, NULL, atan, NULL, -40, 40, 0, 0, 2},
    {"sinh", tide_sinh, NULL, sinh, NULL, -12, 12, 0, 0, 12},
    {"cosh", tide_cosh, NULL, cosh, NULL, -12, 12, 0, 0, 12},
    {"trunc", tide_trunc, NULL, trunc, NULL, -100, 100, 0, 0, 0},
    {"atan2", NULL, tide_atan2, NULL, atan2, -5, 5, -5, 5, 4},
    {"fmod", NULL, tide_fmod, NULL, fmod, -50, 50, -7, 7, 0},
};
#define NOPS (int)(sizeof OPS / sizeof OPS[0])

#define N 4001  /* sampled points of a unary op (binary: N of a against NB of b) */
#define NB 37
#define NSPECIAL 14

static const double SPECIAL[NSPECIAL] = {0.0, -0.0, INFINITY, -INFINITY, NAN, 1.0, -1.0,
                                         1e-30, -1e-30, 3e-6, -3e-6, 0.5, -0.5, 1e-8};

/* The inputs of op: n values of a (and of b), a grid for binary ops, then the special values. */
static int64_t fill_inputs(const math_op *op, double *a, double *b)
{
    int64_t n = 0;
    if (op->un) {
        for (int i = 0; i < N; i++)
            a[n++] = op->lo + (op->hi - op->lo) * i / (N - 1);
    } else {
        for (int i = 0; i < N / 8; i++)
            for (int j = 0; j < NB; j++, n++) {
                a[n] = op->lo + (op->hi - op->lo) * i / (N / 8 - 1);
                b[n] = op->blo + (op->bhi - op->blo) * (j + 0.37) / NB;
            }
    }
    for (int i = 0; i < NSPECIAL; i++)
        for (int j = 0; j < (op->un ? 1 : NSPECIAL); j++, n++) {
            a[n] = SPECIAL[i];
            if (b)
                b[n] = SPECIAL[j];
        }
    return n;
}

static tide_tensor *make(const char *device, const double *v, int64_t n, tide_dtype dt)
{
    float *f = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; f && i < n; i++)
        f[i] = (float)v[i];
    tide_tensor *t = tide_from_data_on(device, dt == TIDE_FLOAT32 ? (const void *)f : v, 1, &n, dt);
    free(f);
    return t;
}

/* Whether got is C's value at a special point: the same infinity or zero (sign included), both
 * NaN, or (a finite, nonzero result such as atan(inf)) within the ulp bound. */
static bool special_ok(double got, double want, bool f32, double bound)
{
    if (isnan(want))
        return isnan(got);
    if (isinf(want) || want == 0)
        return got == want && signbit(got) == signbit(want);
    return fabs(got - want) <= (bound + 0.5) * test_ulp_of(want, f32);
}

/* The largest error of op on device in ulps over the sampled points; specials checked apart. */
static double max_ulps(const math_op *op, const char *device, tide_dtype dt, double bound)
{
    static double a[N * NB + NSPECIAL * NSPECIAL], b[N * NB + NSPECIAL * NSPECIAL];
    int64_t n = fill_inputs(op, a, op->un ? NULL : b);
    bool f32 = dt == TIDE_FLOAT32;
    tide_tensor *ta = make(device, a, n, dt), *tb = op->un ? NULL : make(device, b, n, dt);
    tide_tensor *y = op->un ? op->un(ta) : op->bin(ta, tb);
    tide_tensor *yc = y ? tide_to(y, "cpu") : NULL;
    tide_tensor *y64 = yc ? tide_cast(yc, TIDE_FLOAT64) : NULL;
    CHECK(y64 != NULL, "%s on %s: %s", op->name, device, tide_last_error());
    double worst = 0;
    int64_t nspecial = op->un ? NSPECIAL : NSPECIAL * NSPECIAL;
    for (int64_t i = 0; y64 && i < n; i++) {
        double x = f32 ? (double)(float)a[i] : a[i], z = f32 ? (double)(float)b[i] : b[i];
        double want = op->un ? op->ref1(x) : op->ref2(x, z);
        double got = ((const double *)tide_data_ptr(y64))[i];
        if (i >= n - nspecial) { /* against C's value rounded to the dtype (inf past its range) */
            want = f32 ? (double)(float)want : want;
            CHECK(special_ok(got, want, f32, bound), "%s %s on %s at (%g, %g): %.9g, C gives %.9g",
                  op->name, tide_dtype_name(dt), device, x, op->un ? 0.0 : z, got, want);
            continue;
        }
        if (isnan(want) || isinf(want)) {
            CHECK(special_ok(got, want, f32, bound), "%s at %g: %g, want %g", op->name, x, got,
                  want);
            continue;
        }
        double e = fabs(got - want) / test_ulp_of(want, f32);
        worst = e > worst ? e : worst;
    }
    tide_release(y64), tide_release(yc), tide_release(y), tide_release(ta), tide_release(tb);
    return worst;
}

static void test_accuracy(void)
{
    char why[256];
    /* under valgrind (a memory check) lavapipe's compile of the shaders is minutes: skipped */
    bool vk = !RUNNING_ON_VALGRIND && tide_vulkan_available(why, sizeof why);
    if (!vk)
        printf("Vulkan checks skipped: %s\n", RUNNING_ON_VALGRIND ? "under valgrind" : why);
    for (int k = 0; k < NOPS; k++) {
        const math_op *op = &OPS[k];
        bool exact = op->vulkan_ulps == 0; /* trunc, fmod */
        double c32 = max_ulps(op, "cpu", TIDE_FLOAT32, 1), c64 = max_ulps(op, "cpu", TIDE_FLOAT64, 3);
        double r32 = max_ulps(op, "ref", TIDE_FLOAT32, 0.5), r64 = max_ulps(op, "ref", TIDE_FLOAT64, 0);
        printf("%-6s cpu %.3f / %.3f ulps (float32 / float64), ref %.3f / %.3f", op->name, c32,
               c64, r32, r64);
        CHECK(c32 <= (exact ? 0 : 1.0 + 0x1p-20), "%s cpu float32: %.3f ulps", op->name, c32);
        CHECK(c64 <= (exact ? 0 : 3.0), "%s cpu float64: %.3f ulps", op->name, c64);
        CHECK(r32 <= (exact ? 0 : 0.5 + 0x1p-20), "%s ref float32: %.3f ulps", op->name, r32);
        CHECK(r64 == 0, "%s ref float64 is libm's: %.3f ulps", op->name, r64);
        if (vk) {
            double v32 = max_ulps(op, "vulkan", TIDE_FLOAT32, op->vulkan_ulps);
            printf(", vulkan %.3f", v32);
            CHECK(v32 <= op->vulkan_ulps, "%s vulkan float32: %.3f ulps, bound %g", op->name,
                  v32, op->vulkan_ulps);
        }
        printf("\n");
    }
}

/* Integer inputs: float functions give float32; trunc is a copy; fmod stays integer with C's
 * sign rule (the dividend's), a zero divisor giving 0 as remainder's does. */
static void test_integers(void)
{
    int32_t av[6] = {7, -7, 7, -7, 5, -2147483647 - 1}, bv[6] = {3, 3, -3, -3, 0, -1};
    int64_t n = 6;
    tide_tensor *a = tide_from_data(av, 1, &n, TIDE_INT32), *b = tide_from_data(bv, 1, &n, TIDE_INT32);
    tide_tensor *m = tide_fmod(a, b), *t = tide_trunc(a), *s = tide_asin(b), *q = tide_atan2(a, b);
    CHECK(m && tide_get_dtype(m) == TIDE_INT32, "fmod of int32 is int32");
    int32_t want[6] = {1, -1, 1, -1, 0, 0};
    for (int i = 0; m && i < 6; i++)
        CHECK(((const int32_t *)tide_data_ptr(m))[i] == want[i], "fmod(%d, %d) = %d, want %d",
              av[i], bv[i], ((const int32_t *)tide_data_ptr(m))[i], want[i]);
    CHECK(t && tide_get_dtype(t) == TIDE_INT32 && ((const int32_t *)tide_data_ptr(t))[1] == -7,
          "trunc of int32 is a copy");
    CHECK(s && tide_get_dtype(s) == TIDE_FLOAT32, "asin of int32 gives float32");
    CHECK(q && tide_get_dtype(q) == TIDE_FLOAT32 &&
              fabs(((const float *)tide_data_ptr(q))[0] - atan2(7, 3)) < 1e-7,
          "atan2 of int32 gives float32");
    tide_release(m), tide_release(t), tide_release(s), tide_release(q);
    tide_tensor *bo = tide_ones(1, &n, TIDE_BOOL);
    CHECK_ERROR(tide_fmod(bo, bo), "fmod");
    tide_release(bo), tide_release(a), tide_release(b);
    for (int k = 0; k < NOPS; k++) {
        if (OPS[k].un)
            CHECK_ERROR(OPS[k].un(NULL), OPS[k].name);
        else
            CHECK_ERROR(OPS[k].bin(NULL, NULL), OPS[k].name);
    }
}

/* Float32 sinh and cosh up to float's limit (89.4): SLEEF's give inf past 88.5, so the CPU
 * redoes those lanes in double; 1 ulp as elsewhere. */
static void test_sinh_cosh_limit(void)
{
    float xv[4] = {88.7f, -89.0f, 89.4f, 89.5f};
    int64_t n = 4;
    tide_tensor *x = tide_from_data(xv, 1, &n, TIDE_FLOAT32);
    tide_tensor *s = tide_sinh(x), *c = tide_cosh(x);
    for (int i = 0; s && c && i < 4; i++) {
        double ws = (float)sinh(xv[i]), wc = (float)cosh(xv[i]);
        double gs = ((const float *)tide_data_ptr(s))[i], gc = ((const float *)tide_data_ptr(c))[i];
        CHECK(isinf(ws) ? gs == ws : fabs(gs - ws) <= test_ulp_of(ws, true),
              "sinh(%g) = %g, want %g", xv[i], gs, ws);
        CHECK(isinf(wc) ? gc == wc : fabs(gc - wc) <= test_ulp_of(wc, true),
              "cosh(%g) = %g, want %g", xv[i], gc, wc);
    }
    tide_release(s), tide_release(c), tide_release(x);
}

int main(void)
{
    test_sinh_cosh_limit();
    test_accuracy();
    test_integers();
    return test_summary("test_math_ulps");
}
