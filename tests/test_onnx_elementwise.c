/*
 * test_onnx_elementwise.c — the ONNX importer's elementwise ops and activations on one-node
 * models written here: what the conformance data do not reach (legacy `broadcast`/`axis` of
 * opsets before 7 and its errors, integer division by zero, Mod's two modes, Clip's attribute
 * and input forms on ints, IsInf's detect flags, BitShift's wrap-around, the attribute forms of
 * the activations, opset 6 PRelu's per-channel slope); on the CPU and on Vulkan.
 */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "onnx_build.h"
#include "test_util.h"
#include "tide.h"

static char dir[64];

enum {
    F32 = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT,
    I32 = ONNX__TENSOR_PROTO__DATA_TYPE__INT32,
    I64 = ONNX__TENSOR_PROTO__DATA_TYPE__INT64,
    U8 = ONNX__TENSOR_PROTO__DATA_TYPE__UINT8,
    BOOL = ONNX__TENSOR_PROTO__DATA_TYPE__BOOL
};

/* Writes b with inputs named by `names` in xs' dtypes and shapes and one output "y", runs it.
 * 0, or -1 with tide's error. */
static int run_model(ob_model *b, const char *names, tide_tensor *const *xs, int nx,
                     tide_tensor **y)
{
    int rc = ob_run(b, dir, names, xs, nx, "y", y);
    CHECK(rc != -2, "writing the model");
    return rc < 0 ? -1 : 0;
}

/* t has dtype `dt` and `count` values, each within tol of want. */
static void check_values(tide_tensor *t, tide_dtype dt, const double *want, int count,
                         double tol, const char *what)
{
    double got[32];
    tide_tensor *wide = t ? tide_cast(t, TIDE_FLOAT64) : NULL;
    bool ok = wide && tide_get_dtype(t) == dt && tide_numel(wide) == count &&
              tide_to_buffer(wide, got, sizeof(double) * (size_t)count) == 0;
    for (int i = 0; ok && i < count; i++)
        ok = fabs(got[i] - want[i]) <= tol;
    CHECK(ok, "%s: values or dtype differ (%s)", what, t ? "" : tide_last_error());
    tide_release(wide);
    tide_release(t);
}

/* A one-node model op(x[, b]) at opset with the int attributes (name, value pairs in ints,
 * nints of them) and float attributes; its result, or NULL with the error. */
typedef struct node_spec {
    int opset;
    const char *op, *ins;
    const char *int_names[3];
    int64_t ints[3];
    const char *float_names[3];
    float floats[3];
    const char *str_name, *str;
} node_spec;

static tide_tensor *run_node(const node_spec *s, tide_tensor *const *xs, int nx)
{
    ob_model b;
    ob_init(&b, s->opset);
    Onnx__NodeProto *n = ob_node(&b, s->op, s->ins, "y");
    for (int i = 0; i < 3 && s->int_names[i]; i++)
        ob_attr_int(&b, n, s->int_names[i], s->ints[i]);
    for (int i = 0; i < 3 && s->float_names[i]; i++)
        ob_attr_float(&b, n, s->float_names[i], s->floats[i]);
    if (s->str_name)
        ob_attr_string(&b, n, s->str_name, s->str);
    tide_tensor *y = NULL;
    return run_model(&b, s->ins, xs, nx, &y) == 0 ? y : NULL;
}

static tide_tensor *f32(int ndim, const int64_t *shape, const float *v)
{
    return tide_from_data(v, ndim, shape, TIDE_FLOAT32);
}

/* ---- opsets 1-6: broadcast and axis -------------------------------------------------------- */
static void test_legacy_broadcast(void)
{
    float av[12] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11}, bv[3] = {100, 200, 300};
    int64_t s234[3] = {2, 3, 2}, s3[1] = {3}, s2[1] = {2};
    tide_tensor *ab[2] = {f32(3, s234, av), f32(1, s3, bv)};
    /* B [3] at axis 1 of A [2, 3, 2]: B[j] added to A[i, j, k] (exact in float32) */
    node_spec add = {6, "Add", "a|b", {"broadcast", "axis"}, {1, 1}, {0}, {0}, 0, 0};
    double want[12];
    for (int i = 0; i < 12; i++)
        want[i] = av[i] + bv[(i / 2) % 3];
    check_values(run_node(&add, ab, 2), TIDE_FLOAT32, want, 12, 0, "Add-6 axis 1");

    /* without axis B aligns with A's last dims: B [2] against k */
    tide_tensor *ab2[2] = {ab[0], f32(1, s2, bv)};
    node_spec mul = {6, "Mul", "a|b", {"broadcast"}, {1}, {0}, {0}, 0, 0};
    for (int i = 0; i < 12; i++)
        want[i] = av[i] * bv[i % 2];
    check_values(run_node(&mul, ab2, 2), TIDE_FLOAT32, want, 12, 0, "Mul-6 trailing");

    node_spec no_bc = {6, "Sub", "a|b", {0}, {0}, {0}, {0}, 0, 0};
    CHECK(!run_node(&no_bc, ab, 2) && strstr(tide_last_error(), "Sub") &&
              strstr(tide_last_error(), "broadcast is 0"),
          "broadcast=0 with different shapes: \"%s\"", tide_last_error());
    node_spec bad_axis = {6, "Div", "a|b", {"broadcast", "axis"}, {1, 2}, {0}, {0}, 0, 0};
    CHECK(!run_node(&bad_axis, ab, 2) && strstr(tide_last_error(), "Div") &&
              strstr(tide_last_error(), "does not match"),
          "B [3] at axis 2 of [2, 3, 2]: \"%s\"", tide_last_error());
    tide_release(ab[0]);
    tide_release(ab[1]);
    tide_release(ab2[1]);
}

/* ---- integer arithmetic -------------------------------------------------------------------- */
static void test_integer_div_mod(void)
{
    int32_t a[4] = {-7, 7, 5, 9}, b[4] = {2, -2, 0, 4};
    int64_t s4[1] = {4};
    tide_tensor *ab[2] = {tide_from_data(a, 1, s4, TIDE_INT32), tide_from_data(b, 1, s4, TIDE_INT32)};
    node_spec div = {13, "Div", "a|b", {0}, {0}, {0}, {0}, 0, 0};
    /* truncation toward zero; by zero: 0 (numpy) */
    check_values(run_node(&div, ab, 2), TIDE_INT32, (double[]){-3, -3, 0, 2}, 4, 0, "int Div");
    node_spec mod = {13, "Mod", "a|b", {0}, {0}, {0}, {0}, 0, 0};
    /* Python's %: the divisor's sign; by zero: 0 */
    check_values(run_node(&mod, ab, 2), TIDE_INT32, (double[]){1, -1, 0, 1}, 4, 0, "Mod");
    node_spec fmod = {13, "Mod", "a|b", {"fmod"}, {1}, {0}, {0}, 0, 0};
    check_values(run_node(&fmod, ab, 2), TIDE_INT32, (double[]){-1, 1, 0, 1}, 4, 0, "fmod");

    float xf[2] = {1.5f, -2.5f};
    int64_t s2[1] = {2};
    tide_tensor *ff[2] = {f32(1, s2, xf), f32(1, s2, xf)};
    CHECK(!run_node(&mod, ff, 2) && strstr(tide_last_error(), "Mod") &&
              strstr(tide_last_error(), "fmod=0"),
          "Mod fmod=0 on floats: \"%s\"", tide_last_error());
    tide_release(ff[0]);
    tide_release(ff[1]);

    /* Clip on int32: opset 6 attributes and opset 13 inputs (min only) */
    node_spec clip6 = {6, "Clip", "a", {0}, {0}, {"min", "max"}, {-1, 6}, 0, 0};
    check_values(run_node(&clip6, ab, 1), TIDE_INT32, (double[]){-1, 6, 5, 6}, 4, 0, "Clip-6");
    int32_t lo = 0;
    tide_tensor *clip_in[2] = {ab[0], tide_from_data(&lo, 0, NULL, TIDE_INT32)};
    node_spec clip13 = {13, "Clip", "a|lo", {0}, {0}, {0}, {0}, 0, 0};
    check_values(run_node(&clip13, clip_in, 2), TIDE_INT32, (double[]){0, 7, 5, 9}, 4, 0,
                 "Clip-13 min");
    tide_release(clip_in[1]);
    tide_release(ab[0]);
    tide_release(ab[1]);

    uint8_t x8[3] = {200, 3, 255}, y8[3] = {1, 2, 7};
    int64_t s3[1] = {3};
    tide_tensor *sh[2] = {tide_from_data(x8, 1, s3, TIDE_UINT8), tide_from_data(y8, 1, s3, TIDE_UINT8)};
    node_spec left = {11, "BitShift", "a|b", {0}, {0}, {0}, {0}, "direction", "LEFT"};
    check_values(run_node(&left, sh, 2), TIDE_UINT8, (double[]){144, 12, 128}, 3, 0, "<<");
    node_spec right = {11, "BitShift", "a|b", {0}, {0}, {0}, {0}, "direction", "RIGHT"};
    check_values(run_node(&right, sh, 2), TIDE_UINT8, (double[]){100, 0, 1}, 3, 0, ">>");
    node_spec up = {11, "BitShift", "a|b", {0}, {0}, {0}, {0}, "direction", "UP"};
    CHECK(!run_node(&up, sh, 2) && strstr(tide_last_error(), "BitShift") &&
              strstr(tide_last_error(), "'UP'"),
          "an unknown direction: \"%s\"", tide_last_error());
    tide_release(sh[0]);
    tide_release(sh[1]);
}

/* Integer unary ops keep the dtype; int32 overflow wraps as numpy's does; Round is half to
 * even; Pow with a negative base: exact for an integer exponent, NaN for a fractional one. */
static void test_int_unary_round_pow(void)
{
    int32_t a[4] = {-5, 0, 7, INT32_MAX};
    int64_t s4[1] = {4};
    tide_tensor *x = tide_from_data(a, 1, s4, TIDE_INT32);
    node_spec neg = {6, "Neg", "x", {0}, {0}, {0}, {0}, 0, 0};
    check_values(run_node(&neg, &x, 1), TIDE_INT32, (double[]){5, 0, -7, -INT32_MAX}, 4, 0, "Neg");
    node_spec abs_node = {6, "Abs", "x", {0}, {0}, {0}, {0}, 0, 0};
    check_values(run_node(&abs_node, &x, 1), TIDE_INT32, (double[]){5, 0, 7, INT32_MAX}, 4, 0,
                 "Abs");
    node_spec sign = {13, "Sign", "x", {0}, {0}, {0}, {0}, 0, 0};
    check_values(run_node(&sign, &x, 1), TIDE_INT32, (double[]){-1, 0, 1, 1}, 4, 0, "Sign");
    int32_t one[1] = {1};
    tide_tensor *xy[2] = {x, tide_from_data(one, 1, (int64_t[]){1}, TIDE_INT32)};
    node_spec add = {14, "Add", "x|b", {0}, {0}, {0}, {0}, 0, 0};
    check_values(run_node(&add, xy, 2), TIDE_INT32, (double[]){-4, 1, 8, INT32_MIN}, 4, 0,
                 "int32 Add wraps");
    tide_release(xy[1]);
    /* Cast int32 -> bool (nonzero is true), then Equal on bools */
    node_spec cast = {13, "Cast", "x", {"to"}, {BOOL}, {0}, {0}, 0, 0};
    tide_tensor *bools = run_node(&cast, &x, 1);
    tide_tensor *bb[2] = {bools, bools ? tide_logical_not(bools) : NULL};
    check_values(tide_retain(bools), TIDE_BOOL, (double[]){1, 0, 1, 1}, 4, 0, "Cast to bool");
    node_spec eq = {13, "Equal", "x|b", {0}, {0}, {0}, {0}, 0, 0};
    if (bb[1]) /* else check_values above failed already */
        check_values(run_node(&eq, bb, 2), TIDE_BOOL, (double[]){0, 0, 0, 0}, 4, 0,
                     "Equal on bools");
    tide_release(bb[0]);
    tide_release(bb[1]);
    tide_release(x);

    float r[4] = {2.5f, -0.5f, 1.5f, -2.5f};
    x = f32(1, s4, r);
    node_spec round = {11, "Round", "x", {0}, {0}, {0}, {0}, 0, 0};
    check_values(run_node(&round, &x, 1), TIDE_FLOAT32, (double[]){2, 0, 2, -2}, 4, 0, "Round");
    float e[4] = {3.0f, 3.0f, 2.0f, 0.5f}; /* bases 2.5, -0.5, 1.5, -2.5 */
    tide_tensor *pe[2] = {x, f32(1, s4, e)};
    node_spec pow = {13, "Pow", "x|e", {0}, {0}, {0}, {0}, 0, 0};
    /* powf is within 1 ulp: 1e-5 at 15.6, 1e-7 at 0.125 */
    tide_tensor *p = run_node(&pow, pe, 2);
    float got[4] = {0};
    CHECK(p && tide_to_buffer(p, got, sizeof got) == 0 && fabsf(got[0] - 15.625f) < 1e-5f &&
              fabsf(got[1] + 0.125f) < 1e-7f && fabsf(got[2] - 2.25f) < 1e-6f && isnan(got[3]),
          "Pow with negative bases: %g %g %g %g", got[0], got[1], got[2], got[3]);
    tide_release(p);
    tide_release(pe[1]);
    tide_release(x);
}

/* ---- float math and activations ------------------------------------------------------------ */
static void test_math_and_activations(void)
{
    float xv[5] = {-INFINITY, -2.0f, 0.25f, 3.0f, INFINITY};
    int64_t s5[1] = {5};
    tide_tensor *x = f32(1, s5, xv);
    node_spec isinf = {10, "IsInf", "x", {"detect_positive"}, {0}, {0}, {0}, 0, 0};
    check_values(run_node(&isinf, &x, 1), TIDE_BOOL, (double[]){1, 0, 0, 0, 0}, 5, 0,
                 "IsInf negative only");
    tide_release(x);

    float v[5] = {-3.0f, -0.5f, 0.0f, 0.25f, 2.0f};
    x = f32(1, s5, v);
    /* exact: only products and sums of short binary fractions */
    node_spec shrink = {9, "Shrink", "x", {0}, {0}, {"lambd", "bias"}, {0.5f, 0.25f}, 0, 0};
    check_values(run_node(&shrink, &x, 1), TIDE_FLOAT32, (double[]){-2.75, 0, 0, 0, 1.75}, 5,
                 0, "Shrink");
    node_spec thr = {10, "ThresholdedRelu", "x", {0}, {0}, {"alpha"}, {0.0f}, 0, 0};
    check_values(run_node(&thr, &x, 1), TIDE_FLOAT32, (double[]){0, 0, 0, 0.25, 2}, 5, 0,
                 "ThresholdedRelu alpha 0");
    node_spec hs = {6, "HardSigmoid", "x", {0}, {0}, {"alpha", "beta"}, {0.25f, 0.5f}, 0, 0};
    check_values(run_node(&hs, &x, 1), TIDE_FLOAT32, (double[]){0, 0.375, 0.5, 0.5625, 1}, 5, 0,
                 "HardSigmoid");
    node_spec lr = {6, "LeakyRelu", "x", {0}, {0}, {"alpha"}, {0.5f}, 0, 0};
    check_values(run_node(&lr, &x, 1), TIDE_FLOAT32, (double[]){-1.5, -0.25, 0, 0.25, 2}, 5, 0,
                 "LeakyRelu");
    /* gamma * alpha * (exp(x) - 1) below 0: float32 exp within a few ulps (1e-6 relative) */
    node_spec selu = {6, "Selu", "x", {0}, {0}, {"alpha", "gamma"}, {2.0f, 3.0f}, 0, 0};
    double want[5];
    for (int i = 0; i < 5; i++)
        want[i] = v[i] > 0 ? 3.0 * v[i] : 6.0 * expm1(v[i]);
    check_values(run_node(&selu, &x, 1), TIDE_FLOAT32, want, 5, 1e-5, "Selu");
    tide_release(x);

    /* asinh of a large negative: computed on |x| (no cancellation), 1e-6 relative */
    float big[2] = {-1000.0f, 0.5f};
    int64_t s2[1] = {2};
    x = f32(1, s2, big);
    node_spec asinh_node = {9, "Asinh", "x", {0}, {0}, {0}, {0}, 0, 0};
    check_values(run_node(&asinh_node, &x, 1), TIDE_FLOAT32, (double[]){asinh(-1000.0), asinh(0.5)},
                 2, 1e-5, "Asinh");
    tide_release(x);

    /* opset 6 PRelu: a [C] slope applies along dim 1 of [N, C, L] */
    float pv[4] = {-1, 2, -3, -4}, slope[2] = {0.5f, 0.25f};
    int64_t s122[3] = {1, 2, 2};
    tide_tensor *ps[2] = {f32(3, s122, pv), f32(1, s2, slope)};
    node_spec prelu = {6, "PRelu", "x|s", {0}, {0}, {0}, {0}, 0, 0};
    check_values(run_node(&prelu, ps, 2), TIDE_FLOAT32, (double[]){-0.5, 2, -0.75, -1}, 4, 0,
                 "PRelu-6");
    tide_release(ps[0]);
    tide_release(ps[1]);
}

static void run_all(void)
{
    test_legacy_broadcast();
    test_integer_div_mod();
    test_int_unary_round_pow();
    test_math_and_activations();
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/tide_onnx_elementwise_XXXXXX");
    if (ob_each_device("test_onnx_elementwise", dir, run_all))
        return 1;
    tide_shutdown();
    return test_summary("test_onnx_elementwise");
}
