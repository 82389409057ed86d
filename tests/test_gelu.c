/*
 * test_gelu.c — the GELU primitive, x Phi(x) = (x/2) erfc(-x/sqrt2): its accuracy in ulps
 * against a double-precision reference over x in [-10, 10] on the CPU (whichever TIDE_CPU_ISA
 * tier runs), the ref device and Vulkan when a device is there; its special values; its
 * gradient Phi(x) + x phi(x); and its errors.
 *
 * Tolerances, from the kernels' numerics, per point: erfc's argument -x/sqrt2 carries two
 * roundings (the constant's and the product's), up to one ulp of its own scale, which is up to
 * twice the result's relative ulp; erfc moves by its sensitivity to its argument,
 * s(z) = z erfc'(z) / erfc(z) (2 z^2 + 1 for large z; ~100 at x = -10, where gelu is ~1e-22),
 * times that: 2 s ulps. So every bound is a constant plus 2 s:
 * - CPU float32 (cpu_elementwise_isa.c's gelu_vec_f32, the erfc form below): exp's 0.89 ulp,
 *   the rounding of z^2 inside exp (up to 2 z^2 ulps of the result), the fit (0.05) and the
 *   polynomial's, division's, products' and reference's roundings (~4): 6 + 2 z^2 + 2 s.
 * - CPU float64: SLEEF's erfc (u15: 1.5 ulp), the two products (1 ulp), glibc's erfc in the
 *   reference (1 ulp) and its rounding: 4 + 2 s.
 * - ref: double erfc rounded once: 0.5 ulp + s/2^28 for float32; float64 is the reference.
 * - Vulkan float32: half_erfc1 (common.glsl): exp of g - z^2 with the shader's exp error of
 *   3 + 2|arg| ulps (|arg| <= z^2 + 0.6), the division 1/(z + 2) (2.5), the fit and the
 *   polynomial's roundings (~2): 8 + 2 (z^2 + 0.6) + 2 s.
 * For x >= 0 the result is x (1 - erfc(z)/2), where erfc's error shrinks by erfc/2 (< 1/2):
 * the same bounds cover it.
 */
#include <math.h>
#include <stdlib.h>

#include "tide.h"
#include "test_util.h"

#define N 20001 /* x = -10 .. 10 in steps of 1/1000 */

static double gelu_ref(double x) { return 0.5 * x * erfc(-x * M_SQRT1_2); }

/* s(z) at z = |x|/sqrt2: erfc's relative change per relative change of its argument (x < 0;
 * for x >= 0 the same number bounds the smaller effect on 1 - erfc/2). */
static double sensitivity(double x)
{
    double z = fabs(x) * M_SQRT1_2;
    return z * 1.1283791670955126 * exp(-z * z) / erfc(z);
}

static double bound(const char *device, bool f32, double x)
{
    double s = sensitivity(x), z2 = x * x / 2;
    if (strcmp(device, "vulkan") == 0)
        return 8 + 2 * (z2 + 0.6) + 2 * s;
    if (strcmp(device, "ref") == 0)
        return f32 ? 0.5 + s * 0x1p-28 + 0x1p-20 : 0;
    return f32 ? 6 + 2 * z2 + 2 * s : 4 + 2 * s;
}

/* The largest error of gelu on device over [-10, 10], as a fraction of each point's bound
 * (<= 1 passes), and the worst point's error in ulps. */
static double worst_over_bound(const char *device, tide_dtype dt, double *worst_ulps)
{
    static double xd[N];
    static float xf[N];
    bool f32 = dt == TIDE_FLOAT32;
    for (int i = 0; i < N; i++) {
        xd[i] = -10.0 + (double)i / 1000.0;
        xf[i] = (float)xd[i];
    }
    int64_t n = N;
    tide_tensor *x = tide_from_data_on(device, f32 ? (void *)xf : (void *)xd, 1, &n, dt);
    tide_tensor *y = x ? tide_gelu(x, false) : NULL;
    tide_tensor *yc = y ? tide_to(y, "cpu") : NULL;
    CHECK(yc != NULL, "gelu on %s: %s", device, tide_last_error());
    double worst = 0;
    *worst_ulps = 0;
    for (int i = 0; yc && i < N; i++) {
        double in = f32 ? (double)xf[i] : xd[i], want = gelu_ref(in);
        if (f32)
            want = (double)(float)want == 0 ? 0 : want; /* below float's range: 0 is exact */
        double got = f32 ? (double)((const float *)tide_data_ptr(yc))[i]
                         : ((const double *)tide_data_ptr(yc))[i];
        double ulps = fabs(got - want) / test_ulp_of(want, f32), b = bound(device, f32, in);
        double r = b > 0 ? ulps / b : (ulps > 0 ? INFINITY : 0);
        if (r > worst) {
            worst = r;
            *worst_ulps = ulps;
        }
    }
    tide_release(yc);
    tide_release(y);
    tide_release(x);
    return worst;
}

static void test_accuracy(void)
{
    const char *devices[3] = {"cpu", "ref", "vulkan"};
    char why[256];
    bool vulkan = tide_vulkan_available(why, sizeof why);
    for (int d = 0; d < 3; d++)
        for (int f = 0; f < 2; f++) {
            tide_dtype dt = f ? TIDE_FLOAT64 : TIDE_FLOAT32;
            if (d == 2 && (!vulkan || f)) /* float64 gelu runs on the CPU there */
                continue;
            double ulps, r = worst_over_bound(devices[d], dt, &ulps);
            printf("gelu %s %s: worst %.2f of its bound (%.2f ulps there)\n", devices[d],
                   f ? "float64" : "float32", r, ulps);
            CHECK(r <= 1.0, "gelu on %s, %s: %.2f ulps, past its bound (ratio %.2f)",
                  devices[d], f ? "float64" : "float32", ulps, r);
        }
    if (!vulkan)
        printf("gelu: no Vulkan device, its check is skipped: %s\n", why);
}

/* -0 stays -0, +inf is +inf, -inf and NaN give NaN (x Phi(x) at -inf is -inf * 0), float32. */
static void test_special_values(void)
{
    float xs[4] = {-0.0f, INFINITY, -INFINITY, NAN};
    int64_t n = 4;
    tide_tensor *x = tide_from_data(xs, 1, &n, TIDE_FLOAT32), *y = tide_gelu(x, false);
    const float *v = y ? tide_data_ptr(y) : NULL;
    CHECK(v && v[0] == 0 && signbit(v[0]), "gelu(-0) = -0");
    CHECK(v && isinf(v[1]) && v[1] > 0, "gelu(inf) = inf");
    CHECK(v && isnan(v[2]) && isnan(v[3]), "gelu(-inf) and gelu(NaN) are NaN");
    tide_release(y);
    tide_release(x);
}

/* The gradient Phi(x) + x phi(x) times the incoming gradient (ones), float64: erf's and exp's
 * 1 ulp through a sum and two products against the same formula in double here, 1e-14 of the
 * gradient's scale (it is at most 1.13). */
static void test_gradient(void)
{
    double xs[8] = {-6.0, -3.0, -1.0, -0.3, 0.0, 0.2, 1.5, 4.0};
    int64_t n = 8;
    tide_tensor *x = tide_from_data(xs, 1, &n, TIDE_FLOAT64);
    tide_requires_grad_(x, true);
    tide_tensor *y = tide_gelu(x, false), *s = tide_sum(y, NULL, 0, false);
    CHECK(s && tide_backward(s, NULL, false) == 0, "backward: %s", tide_last_error());
    tide_tensor *g = tide_grad(x);
    CHECK(g != NULL, "x has a gradient");
    for (int i = 0; g && i < 8; i++) {
        double cdf = 0.5 * erfc(-xs[i] * M_SQRT1_2);
        double want = cdf + xs[i] * exp(-0.5 * xs[i] * xs[i]) * 0.3989422804014327;
        double got = ((const double *)tide_data_ptr(g))[i];
        CHECK(fabs(got - want) <= 1e-14, "d gelu at %g: %.17g, want %.17g", xs[i], got, want);
    }
    tide_release(g);
    tide_release(s);
    tide_release(y);
    tide_release(x);
}

/* An integer input is refused (gelu takes floating tensors, as PyTorch's); NULL names gelu. */
static void test_errors(void)
{
    int32_t iv[2] = {-1, 2};
    int64_t n = 2;
    tide_tensor *xi = tide_from_data(iv, 1, &n, TIDE_INT32);
    CHECK_ERROR(tide_gelu(xi, false), "gelu");
    CHECK_ERROR(tide_gelu(NULL, false), "gelu");
    tide_release(xi);
}

int main(void)
{
    test_accuracy();
    test_special_values();
    test_gradient();
    test_errors();
    return test_summary("test_gelu");
}
