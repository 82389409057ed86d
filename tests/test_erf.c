/*
 * test_erf.c — erf's accuracy in ulps against a double-precision loop, on the CPU (whichever
 * TIDE_CPU_ISA tier runs), on the ref device and on Vulkan when a device is there; its gradient
 * against 2/sqrt(pi) exp(-x^2); erf inside a jit function bitwise equal to eager.
 *
 * Tolerances, from the kernels' stated errors:
 * - CPU float32: SLEEF's u10 erf is within 1.0 ulp of the exact value. The reference erf((double)x)
 *   is within 1 double ulp of it, 2^-29 of a float ulp, so the bound is 1.0 ulp (+2^-20 slack).
 * - CPU float64: SLEEF's 1.0 ulp plus glibc's erf, whose stated error on x86_64 is at most 1 ulp:
 *   2 ulps.
 * - ref device: double erf from libm, rounded once to the dtype: 0.5 ulp (float32), and for
 *   float64 the same libm erf, so bitwise.
 * - Vulkan float32: the shader's erf1 (common.glsl), stated there as within 4 ulps.
 * An ulp is that of the reference value in the output dtype (the spacing just above |want|).
 */
#include <math.h>
#include <stdlib.h>

#include "tide.h"
#include "test_util.h"

#define N 24001 /* x = -6 .. 6 in steps of 1/2000, then special values */

static void fill_inputs(double *x)
{
    for (int i = 0; i < N - 6; i++)
        x[i] = -6.0 + (double)i / 2000.0;
    double special[6] = {1e-30, -1e-30, 3e-6, 0.4999, 0.5001, 3.9999};
    for (int i = 0; i < 6; i++)
        x[N - 6 + i] = special[i];
}

/* The largest error of erf(x) on device, in ulps of the output dtype, over fill_inputs' points. */
static double max_ulps(const char *device, tide_dtype dt)
{
    static double xd[N];
    static float xf[N];
    fill_inputs(xd);
    bool f32 = dt == TIDE_FLOAT32;
    for (int i = 0; i < N; i++)
        xf[i] = (float)xd[i];
    int64_t n = N;
    tide_tensor *x = tide_from_data_on(device, f32 ? (void *)xf : (void *)xd, 1, &n, dt);
    tide_tensor *y = x ? tide_erf(x) : NULL;
    tide_tensor *yc = y ? tide_to(y, "cpu") : NULL;
    CHECK(yc != NULL, "erf on %s: %s", device, tide_last_error());
    double worst = 0;
    for (int i = 0; yc && i < N; i++) {
        double in = f32 ? (double)xf[i] : xd[i];
        double want = erf(in);
        double got = f32 ? (double)((const float *)tide_data_ptr(yc))[i]
                         : ((const double *)tide_data_ptr(yc))[i];
        double e = fabs(got - want) / test_ulp_of(want, f32);
        worst = e > worst ? e : worst;
    }
    tide_release(yc);
    tide_release(y);
    tide_release(x);
    return worst;
}

static void test_accuracy(void)
{
    double e32 = max_ulps("cpu", TIDE_FLOAT32), e64 = max_ulps("cpu", TIDE_FLOAT64);
    printf("erf cpu: %.3f ulps (float32), %.3f ulps (float64)\n", e32, e64);
    CHECK(e32 <= 1.0 + 0x1p-20, "cpu float32 erf within 1 ulp: %.3f", e32);
    CHECK(e64 <= 2.0, "cpu float64 erf within 2 ulps: %.3f", e64);
    double r32 = max_ulps("ref", TIDE_FLOAT32), r64 = max_ulps("ref", TIDE_FLOAT64);
    CHECK(r32 <= 0.5 + 0x1p-20, "ref float32 erf within 0.5 ulp: %.3f", r32);
    CHECK(r64 == 0, "ref float64 erf is libm's: %.3f", r64);
    char why[256];
    if (tide_vulkan_available(why, sizeof why)) {
        double v32 = max_ulps("vulkan", TIDE_FLOAT32);
        printf("erf vulkan: %.3f ulps (float32)\n", v32);
        CHECK(v32 <= 4.0, "vulkan float32 erf within 4 ulps: %.3f", v32);
    } else {
        printf("erf: no Vulkan device, its check is skipped: %s\n", why);
    }
}

/* The gradient: 2/sqrt(pi) exp(-x^2) times the incoming gradient (all ones here), float64. */
static void test_gradient(void)
{
    double xs[7] = {-3.0, -1.0, -0.3, 0.0, 0.2, 1.5, 4.0};
    int64_t n = 7;
    tide_tensor *x = tide_from_data(xs, 1, &n, TIDE_FLOAT64);
    tide_requires_grad_(x, true);
    tide_tensor *y = tide_erf(x), *s = tide_sum(y, NULL, 0, false);
    CHECK(s && tide_backward(s, NULL, false) == 0, "backward: %s", tide_last_error());
    tide_tensor *g = tide_grad(x);
    CHECK(g != NULL, "x has a gradient");
    for (int i = 0; g && i < 7; i++) {
        double want = 1.1283791670955126 * exp(-xs[i] * xs[i]);
        double got = ((const double *)tide_data_ptr(g))[i];
        /* exp's 1 ulp, the product's rounding and x*x's (2 x^2 ulps in exp): 1e-14 relative */
        CHECK(fabs(got - want) <= 1e-14 * want, "d erf at %g: %.17g, want %.17g", xs[i], got,
              want);
    }
    tide_release(g);
    tide_release(s);
    tide_release(y);
    tide_release(x);
}

/* Integer input gives float32 (as exp and tanh do); a NULL input is an error naming erf. */
static void test_dtypes_and_errors(void)
{
    int32_t iv[3] = {-1, 0, 2};
    int64_t n = 3;
    tide_tensor *xi = tide_from_data(iv, 1, &n, TIDE_INT32);
    tide_tensor *y = tide_erf(xi);
    CHECK(y && tide_get_dtype(y) == TIDE_FLOAT32, "erf of int32 gives float32");
    for (int i = 0; y && i < 3; i++) {
        double got = ((const float *)tide_data_ptr(y))[i], want = erf(iv[i]);
        CHECK(fabs(got - want) <= test_ulp_of(want, true), "erf(%d) = %g", iv[i], got);
    }
    tide_release(y);
    tide_release(xi);
    CHECK_ERROR(tide_erf(NULL), "erf");
}

int main(void)
{
    test_accuracy();
    test_gradient();
    test_dtypes_and_errors();
    return test_summary("test_erf");
}
