/*
 * test_math_ops.c — issue 24's elementwise ops through the dispatcher: every composite
 * (ops/math.c, ops/nn_activation_more.c) against a plain double loop, every new op (primitives
 * too) under gradcheck, in a jit trace bitwise equal to eager, and errors naming the op.
 *
 * Tolerances: the composites are a handful of float64 operations on O(1) values, each rounded
 * once (SLEEF's exp/log1p/expm1 within 1 ulp): 1e-13 relative plus 1e-15 absolute covers a few
 * ulps with room. gradcheck: central differences with eps 1e-6 in float64 (truncation ~1e-12
 * times the third derivative, rounding ~1e-10), against 1e-6. Inputs stay away from the kinks
 * (0, the clamps' ends) by drawing them from a grid offset by 0.0371.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "test_ref.h"
#include "test_util.h"

typedef tide_tensor *(*op_fn)(tide_tensor *const *x);
typedef double (*ref_fn)(const double *v);

typedef struct math_case {
    const char *name;
    int nin;
    op_fn fn;
    ref_fn ref; /* NULL: a primitive, checked in ulps by test_math_ulps; gradcheck only */
    double lo[3], hi[3];
} math_case;

#define N 37

#define OP1(name, expr)                                                                            \
    static tide_tensor *op_##name(tide_tensor *const *x) { return expr; }
#define REF(name, expr)                                                                            \
    static double ref_##name(const double *v) { return expr; }

static double sig(double v) { return 1 / (1 + exp(-v)); }
static double lerp_ref(double s, double e, double w) { return w < 0.5 ? s + w * (e - s) : e - (e - s) * (1 - w); }
static double elu_ref(double v, double a, double d) { return v > 0 ? v : a * expm1(v / d); }
static double clip(double v, double lo, double hi) { return v <= lo ? lo : v >= hi ? hi : v; }

OP1(square, tide_square(x[0])) REF(square, v[0] * v[0])
OP1(frac, tide_frac(x[0])) REF(frac, v[0] - trunc(v[0]))
OP1(hypot, tide_hypot(x[0], x[1])) REF(hypot, hypot(v[0], v[1]))
OP1(lerp, tide_lerp(x[0], x[1], x[2])) REF(lerp, lerp_ref(v[0], v[1], v[2]))
OP1(logaddexp, tide_logaddexp(x[0], x[1])) REF(logaddexp, log(exp(v[0]) + exp(v[1])))
OP1(xlogy, tide_xlogy(x[0], x[1])) REF(xlogy, v[0] == 0 ? 0 : v[0] * log(v[1]))
OP1(addcmul, tide_addcmul(x[0], x[1], x[2], 0.5)) REF(addcmul, v[0] + 0.5 * (v[1] * v[2]))
OP1(addcdiv, tide_addcdiv(x[0], x[1], x[2], -2)) REF(addcdiv, v[0] - 2 * (v[1] / v[2]))
OP1(clamp_min, tide_clamp_min(x[0], x[1])) REF(clamp_min, fmax(v[0], v[1]))
OP1(clamp_max, tide_clamp_max(x[0], x[1])) REF(clamp_max, fmin(v[0], v[1]))
OP1(elu, tide_elu(x[0], 0.7)) REF(elu, elu_ref(v[0], 0.7, 1))
OP1(selu, tide_selu(x[0]))
REF(selu, 1.0507009873554804934 * elu_ref(v[0], 1.6732632423543772848, 1))
OP1(celu, tide_celu(x[0], 1.3)) REF(celu, elu_ref(v[0], 1.3, 1.3))
OP1(softplus, tide_softplus(x[0], 2, 3)) REF(softplus, 2 * v[0] > 3 ? v[0] : log1p(exp(2 * v[0])) / 2)
OP1(mish, tide_mish(x[0])) REF(mish, v[0] * tanh(log1p(exp(v[0]))))
OP1(softsign, tide_softsign(x[0])) REF(softsign, v[0] / (1 + fabs(v[0])))
OP1(hardtanh, tide_hardtanh(x[0], -0.5, 0.8)) REF(hardtanh, clip(v[0], -0.5, 0.8))
OP1(relu6, tide_relu6(x[0])) REF(relu6, clip(v[0], 0, 6))
OP1(leaky_relu, tide_leaky_relu(x[0], 0.1)) REF(leaky_relu, v[0] > 0 ? v[0] : 0.1 * v[0])
OP1(hardswish, tide_hardswish(x[0])) REF(hardswish, v[0] * clip(v[0] + 3, 0, 6) / 6)
OP1(hardsigmoid, tide_hardsigmoid(x[0])) REF(hardsigmoid, clip(v[0] + 3, 0, 6) / 6)
OP1(logsigmoid, tide_logsigmoid(x[0])) REF(logsigmoid, log(sig(v[0])))
OP1(exp2, tide_exp2(x[0])) REF(exp2, exp2(v[0]))
OP1(log10, tide_log10(x[0])) REF(log10, log10(v[0]))
OP1(log1p, tide_log1p(x[0]))
OP1(expm1, tide_expm1(x[0]))
OP1(log2, tide_log2(x[0]))
OP1(tan, tide_tan(x[0]))
OP1(asin, tide_asin(x[0]))
OP1(acos, tide_acos(x[0]))
OP1(atan, tide_atan(x[0]))
OP1(sinh, tide_sinh(x[0]))
OP1(cosh, tide_cosh(x[0]))
OP1(trunc, tide_trunc(x[0]))
OP1(atan2, tide_atan2(x[0], x[1]))
OP1(fmod, tide_fmod(x[0], x[1]))

#define U(name, lo, hi) {#name, 1, op_##name, ref_##name, {lo}, {hi}}
#define P1(name, lo, hi) {#name, 1, op_##name, NULL, {lo}, {hi}}

static const math_case CASES[] = {
    U(square, -3, 3), U(frac, -5, 5), {"hypot", 2, op_hypot, ref_hypot, {-3, -3}, {3, 3}},
    {"lerp", 3, op_lerp, ref_lerp, {-2, -2, -0.5}, {2, 2, 1.5}},
    {"logaddexp", 2, op_logaddexp, ref_logaddexp, {-5, -5}, {5, 5}},
    {"xlogy", 2, op_xlogy, ref_xlogy, {-2, 0.2}, {2, 3}},
    {"addcmul", 3, op_addcmul, ref_addcmul, {-2, -2, -2}, {2, 2, 2}},
    {"addcdiv", 3, op_addcdiv, ref_addcdiv, {-2, -2, 0.5}, {2, 2, 2}},
    {"clamp_min", 2, op_clamp_min, ref_clamp_min, {-2, -2}, {2, 2}},
    {"clamp_max", 2, op_clamp_max, ref_clamp_max, {-2, -2}, {2, 2}},
    U(elu, -4, 3), U(selu, -4, 3), U(celu, -4, 3), U(softplus, -6, 4), U(mish, -6, 6),
    U(softsign, -4, 4), U(hardtanh, -2, 2), U(relu6, -2, 8), U(leaky_relu, -3, 3),
    U(hardswish, -5, 5), U(hardsigmoid, -5, 5), U(logsigmoid, -30, 30), U(exp2, -10, 10),
    U(log10, 0.01, 1000),
    P1(log1p, -0.5, 2), P1(expm1, -3, 3), P1(log2, 0.3, 4), P1(tan, -1.2, 1.2),
    P1(asin, -0.9, 0.9), P1(acos, -0.9, 0.9), P1(atan, -4, 4), P1(sinh, -4, 4),
    P1(cosh, -4, 4), P1(trunc, -4, 4),
    {"atan2", 2, op_atan2, NULL, {-2, 0.3}, {2, 2}},
    {"fmod", 2, op_fmod, NULL, {-5, 0.7}, {5, 1.9}},
};
#define NCASES (int)(sizeof CASES / sizeof CASES[0])

/* Input k of case c: N values on a grid of [lo, hi] shifted off its round points, each input
 * in another order so that pairs vary. */
static tide_tensor *input(const math_case *c, int k, tide_dtype dt, bool grad)
{
    double v[N];
    for (int i = 0; i < N; i++) {
        int j = (i * (2 * k + 1) + 5 * k) % N;
        v[i] = c->lo[k] + (c->hi[k] - c->lo[k]) * (j + 0.0371) / N;
    }
    int64_t n = N;
    tide_tensor *t64 = tide_from_data(v, 1, &n, TIDE_FLOAT64);
    tide_tensor *t = tide_cast(t64, dt);
    tide_release(t64);
    if (grad)
        tide_requires_grad_(t, true);
    return t;
}

static void test_values(void)
{
    for (int k = 0; k < NCASES; k++) {
        const math_case *c = &CASES[k];
        if (!c->ref)
            continue;
        tide_tensor *in[3] = {0};
        for (int j = 0; j < c->nin; j++)
            in[j] = input(c, j, TIDE_FLOAT64, false);
        tide_tensor *y = c->fn(in);
        CHECK(y && tide_get_dtype(y) == TIDE_FLOAT64, "%s: %s", c->name, tide_last_error());
        double worst = 0;
        for (int i = 0; y && i < N; i++) {
            double v[3];
            for (int j = 0; j < c->nin; j++)
                v[j] = ((const double *)tide_data_ptr(in[j]))[i];
            double want = c->ref(v), got = ((const double *)tide_data_ptr(y))[i];
            double e = fabs(got - want) / (1e-13 * fabs(want) + 1e-15);
            worst = e > worst ? e : worst;
        }
        CHECK(worst <= 1, "%s: %.3g times the tolerance from the double loop", c->name, worst);
        tide_release(y);
        for (int j = 0; j < c->nin; j++)
            tide_release(in[j]);
    }
}

static tide_tensor *run_fn(void *ctx, tide_tensor *const *x, int n)
{
    (void)n;
    return ((const math_case *)ctx)->fn(x);
}

static void test_gradients(void)
{
    for (int k = 0; k < NCASES; k++) {
        const math_case *c = &CASES[k];
        tide_tensor *in[3] = {0};
        for (int j = 0; j < c->nin; j++)
            in[j] = input(c, j, TIDE_FLOAT64, true);
        int rc = td_gradcheck(run_fn, (void *)c, in, c->nin, 1e-6, 1e-6, 1e-6);
        CHECK(rc == 0, "gradcheck %s: %s", c->name, tide_last_error());
        for (int j = 0; j < c->nin; j++)
            tide_release(in[j]);
    }
}

/* In a jit trace (fused on the CPU) every op gives eager's float32 bits. */
static void test_jit(void)
{
    for (int k = 0; k < NCASES; k++) {
        const math_case *c = &CASES[k];
        tide_tensor *in[3] = {0};
        for (int j = 0; j < c->nin; j++)
            in[j] = input(c, j, TIDE_FLOAT32, false);
        tide_tensor *want = c->fn(in);
        CHECK(tide_jit_trace_begin(NULL, NULL, NULL) == 0, "%s", tide_last_error());
        tide_tensor *got = c->fn(in);
        CHECK(tide_jit_trace_end() == 0, "%s trace: %s", c->name, tide_last_error());
        bool bitwise = false;
        CHECK(got && want && ref_compare(got, want, &bitwise) >= 0 && bitwise,
              "%s: the jit differs from eager", c->name);
        tide_release(got), tide_release(want);
        for (int j = 0; j < c->nin; j++)
            tide_release(in[j]);
    }
}

/* Special values PyTorch defines: nan_to_num's defaults, isnan/isinf/isfinite, xlogy at 0 and
 * NaN, hypot and logaddexp at infinities, glu's halves. */
static void test_special(void)
{
    float v[5] = {NAN, INFINITY, -INFINITY, -0.0f, 2.5f};
    int64_t n = 5;
    tide_tensor *x = tide_from_data(v, 1, &n, TIDE_FLOAT32);
    double nine = 9;
    tide_tensor *a = tide_nan_to_num(x, 0, NULL, NULL), *b = tide_nan_to_num(x, 1, &nine, NULL);
    const float *pa = a ? tide_data_ptr(a) : NULL, *pb = b ? tide_data_ptr(b) : NULL;
    CHECK(pa && pa[0] == 0 && pa[1] == 3.4028234663852886e38f && pa[2] == -3.4028234663852886e38f &&
              pa[4] == 2.5f, "nan_to_num defaults: the dtype's largest finite values");
    CHECK(pb && pb[0] == 1 && pb[1] == 9 && pa[2] == -3.4028234663852886e38f, "nan_to_num(1, 9)");
    tide_tensor *in_ = tide_isnan(x), *ii = tide_isinf(x), *iff = tide_isfinite(x);
    const uint8_t want_n[5] = {1, 0, 0, 0, 0}, want_i[5] = {0, 1, 1, 0, 0}, want_f[5] = {0, 0, 0, 1, 1};
    CHECK(in_ && memcmp(tide_data_ptr(in_), want_n, 5) == 0, "isnan");
    CHECK(ii && memcmp(tide_data_ptr(ii), want_i, 5) == 0, "isinf");
    CHECK(iff && memcmp(tide_data_ptr(iff), want_f, 5) == 0, "isfinite");
    float zv[3] = {0, 0, 2}, yv[3] = {0, NAN, INFINITY};
    int64_t n3 = 3;
    tide_tensor *z = tide_from_data(zv, 1, &n3, TIDE_FLOAT32), *y = tide_from_data(yv, 1, &n3, TIDE_FLOAT32);
    tide_tensor *xl = tide_xlogy(z, y), *hy = tide_hypot(y, z), *le = tide_logaddexp(y, y);
    const float *px = xl ? tide_data_ptr(xl) : NULL, *ph = hy ? tide_data_ptr(hy) : NULL;
    const float *pl = le ? tide_data_ptr(le) : NULL;
    CHECK(px && px[0] == 0 && isnan(px[1]) && isinf(px[2]), "xlogy: 0 at x = 0, NaN for y NaN");
    CHECK(ph && ph[0] == 0 && isnan(ph[1]) && isinf(ph[2]), "hypot: 0 at (0, 0), inf at inf");
    CHECK(pl && fabsf(pl[0] - logf(2)) < 1e-7f && isinf(pl[2]), "logaddexp(inf, inf) = inf");
    int64_t ni = 5;
    int32_t iv[5] = {1, 2, 3, 4, 5};
    tide_tensor *xi = tide_from_data(iv, 1, &ni, TIDE_INT32), *fi = tide_isfinite(xi);
    CHECK(fi && tide_get_dtype(fi) == TIDE_BOOL && ((const uint8_t *)tide_data_ptr(fi))[0] == 1,
          "integers are finite");
    tide_release(fi);
    tide_release(xl), tide_release(hy), tide_release(le), tide_release(z), tide_release(y);
    tide_release(in_), tide_release(ii), tide_release(iff);
    tide_release(a), tide_release(b), tide_release(x);
    /* errors: odd glu halves, non-floating activations, hardtanh's order, celu's alpha */
    CHECK_ERROR(tide_glu(xi, 0), "glu");
    int64_t s23[2] = {2, 3};
    tide_tensor *f23 = tide_zeros(2, s23, TIDE_FLOAT32);
    CHECK_ERROR(tide_glu(f23, 1), "glu", "[2, 3]", "even");
    CHECK_ERROR(tide_glu(f23, 2), "glu");
    CHECK_ERROR(tide_hardtanh(f23, 1, 0), "hardtanh", "min_val");
    CHECK_ERROR(tide_celu(f23, 0), "celu", "alpha");
    CHECK_ERROR(tide_elu(xi, 1), "elu", "int32");
    CHECK_ERROR(tide_frac(xi), "frac", "int32");
    CHECK_ERROR(tide_lerp(f23, xi, NULL), "lerp");
    int64_t s4[1] = {4};
    tide_tensor *f4 = tide_zeros(1, s4, TIDE_FLOAT32);
    CHECK_ERROR(tide_hypot(f23, f4), "hypot", "[2, 3]", "[4]");
    CHECK_ERROR(tide_addcmul(f23, f4, f4, 1), "[2, 3]", "[4]");
    tide_release(f4), tide_release(f23), tide_release(xi);
}

int main(void)
{
    test_values();
    test_gradients();
    test_jit();
    test_special();
    return test_summary("test_math_ops");
}
