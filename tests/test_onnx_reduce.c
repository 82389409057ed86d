/*
 * test_onnx_reduce.c — the ONNX importer's reductions, scans, softmax family and losses on
 * one-node models written here: what the conformance data do not reach (dtypes kept through
 * tide's int64 sums, empty reductions, the flattening softmax of opsets before 13, weights with
 * ignore_index, the log_prob output) and the errors of malformed nodes, each naming the op;
 * on the CPU and on Vulkan.
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
    I64 = ONNX__TENSOR_PROTO__DATA_TYPE__INT64
};

/* Writes b with inputs named by `names` ("|"-separated, in xs' dtypes and shapes) and nout
 * outputs "y0".."y3", runs it on xs. 0, or -1 with tide's error (from opening or running). */
static int run_model(ob_model *b, const char *names, tide_tensor *const *xs, int nx,
                     tide_tensor **outs, int nout)
{
    static const char *const out_names[] = {"", "y0", "y0|y1", "y0|y1|y2", "y0|y1|y2|y3"};
    int rc = ob_run(b, dir, names, xs, nx, out_names[nout], outs);
    CHECK(rc != -2, "writing the model");
    for (int k = 0; rc == 0 && k < nout; k++) /* results stay where the inputs are */
        CHECK(!strncmp(tide_device_name(outs[k]), tide_get_default_device(), 3),
              "output %d is on %s", k, tide_device_name(outs[k]));
    return rc;
}

static tide_tensor *f32(int ndim, const int64_t *shape, const float *v)
{
    return tide_from_data(v, ndim, shape, TIDE_FLOAT32);
}

/* t has `count` values, each within tol of want (infinities equal). */
static void check_values(tide_tensor *t, const double *want, int count, double tol,
                         const char *what)
{
    double got[16];
    tide_tensor *wide = t ? tide_cast(t, TIDE_FLOAT64) : NULL;
    bool ok = wide && tide_numel(wide) == count &&
              tide_to_buffer(wide, got, sizeof(double) * (size_t)count) == 0;
    for (int i = 0; ok && i < count; i++)
        ok = isinf(want[i]) ? got[i] == want[i] : fabs(got[i] - want[i]) <= tol;
    CHECK(ok, "%s: values differ (%s)", what, t ? "" : tide_last_error());
    tide_release(wide);
}

/* ---- reductions ---------------------------------------------------------------------------- */
static void test_reduce_dtypes_and_axes(void)
{
    int32_t xi[6] = {1, 2, 3, 4, 5, 6};
    int64_t s23[2] = {2, 3}, one[1] = {1}, zero[1] = {0}, axis0[1] = {0}, minus1[1] = {-1};
    tide_tensor *x = tide_from_data(xi, 2, s23, TIDE_INT32), *y = NULL;
    ob_model b;

    /* opset 11: axes an attribute; an int32 sum (int64 inside tide) stays int32 */
    ob_init(&b, 11);
    Onnx__NodeProto *n = ob_node(&b, "ReduceSum", "x", "y0");
    ob_attr_ints(&b, n, "axes", minus1, 1);
    ob_attr_int(&b, n, "keepdims", 0);
    CHECK(run_model(&b, "x", &x, 1, &y, 1) == 0, "ReduceSum-11: %s", tide_last_error());
    CHECK(y && tide_get_dtype(y) == TIDE_INT32 && tide_ndim(y) == 1, "ReduceSum-11 dtype, rank");
    check_values(y, (const double[]){6, 15}, 2, 0, "ReduceSum-11");
    tide_release(y);

    /* opset 13: axes an input, keepdims by default */
    ob_init(&b, 13);
    ob_init_tensor(&b, "axes", I64, 1, one, axis0);
    ob_node(&b, "ReduceSum", "x|axes", "y0");
    CHECK(run_model(&b, "x", &x, 1, &y, 1) == 0, "ReduceSum-13: %s", tide_last_error());
    CHECK(y && tide_ndim(y) == 2 && tide_shape(y)[0] == 1 && tide_shape(y)[1] == 3,
          "ReduceSum-13 keeps dims");
    check_values(y, (const double[]){5, 7, 9}, 3, 0, "ReduceSum-13");
    tide_release(y);

    /* opset 18: empty axes with noop_with_empty_axes give the input back */
    ob_init(&b, 18);
    ob_init_tensor(&b, "axes", I64, 1, zero, axis0);
    n = ob_node(&b, "ReduceMax", "x|axes", "y0");
    ob_attr_int(&b, n, "noop_with_empty_axes", 1);
    CHECK(run_model(&b, "x", &x, 1, &y, 1) == 0, "ReduceMax noop: %s", tide_last_error());
    check_values(y, (const double[]){1, 2, 3, 4, 5, 6}, 6, 0, "ReduceMax noop");
    tide_release(y);
    tide_release(x);

    /* no axes: every dim; the L2 norm of 1..6 is sqrt(91), within float32 rounding */
    float xf[6] = {1, 2, 3, 4, 5, 6};
    x = f32(2, s23, xf);
    ob_init(&b, 18);
    n = ob_node(&b, "ReduceL2", "x", "y0");
    ob_attr_int(&b, n, "keepdims", 0);
    CHECK(run_model(&b, "x", &x, 1, &y, 1) == 0, "ReduceL2: %s", tide_last_error());
    CHECK(y && tide_ndim(y) == 0, "ReduceL2 of all is 0-dim");
    check_values(y, (const double[]){sqrt(91.0)}, 1, 1e-5, "ReduceL2");
    tide_release(y);
    tide_release(x);
}

/* Reductions over no elements give the op's identity (ONNX's empty-set rule). */
static void test_empty_reductions(void)
{
    int64_t s20[2] = {2, 0}, one[1] = {1};
    tide_tensor *x = tide_zeros(2, s20, TIDE_FLOAT32), *y = NULL;
    static const char *const ops[] = {"ReduceMin", "ReduceMax", "ReduceProd", "ReduceSum",
                                      "ReduceLogSumExp"};
    static const double want[] = {INFINITY, -INFINITY, 1, 0, -INFINITY};
    for (int i = 0; i < 5; i++) {
        ob_model b;
        ob_init(&b, 13);
        Onnx__NodeProto *n = ob_node(&b, ops[i], "x", "y0");
        ob_attr_ints(&b, n, "axes", one, 1);
        ob_attr_int(&b, n, "keepdims", 0);
        CHECK(run_model(&b, "x", &x, 1, &y, 1) == 0, "%s: %s", ops[i], tide_last_error());
        check_values(y, (const double[]){want[i], want[i]}, 2, 0, ops[i]);
        tide_release(y);
    }
    ob_model b;
    ob_init(&b, 13);
    ob_node(&b, "ReduceMean", "x", "y0");
    CHECK(run_model(&b, "x", &x, 1, &y, 1) < 0 && tide_last_error_code() == TIDE_ERR_UNSUPPORTED &&
              strstr(tide_last_error(), "ReduceMean"),
          "ReduceMean of nothing: %s", tide_last_error());
    tide_release(x);
    /* ... but a mean of [0, 3] over dim 1 has no element to fill: [0] */
    x = tide_zeros(2, (int64_t[]){0, 3}, TIDE_FLOAT32);
    ob_init(&b, 13);
    Onnx__NodeProto *n = ob_node(&b, "ReduceMean", "x", "y0");
    ob_attr_ints(&b, n, "axes", one, 1);
    ob_attr_int(&b, n, "keepdims", 0);
    CHECK(run_model(&b, "x", &x, 1, &y, 1) == 0, "ReduceMean to [0]: %s", tide_last_error());
    CHECK(y && tide_ndim(y) == 1 && tide_shape(y)[0] == 0, "ReduceMean to [0]: the shape");
    tide_release(y);
    tide_release(x);
}

/* CumSum reverse + exclusive on int32: sums of what follows each place, int32 kept. */
static void test_cumsum(void)
{
    int32_t xi[4] = {1, 2, 3, 4};
    int64_t s4[1] = {4}, axis = 0;
    tide_tensor *x = tide_from_data(xi, 1, s4, TIDE_INT32), *y = NULL;
    ob_model b;
    ob_init(&b, 14);
    ob_init_tensor(&b, "axis", I64, 0, NULL, &axis);
    Onnx__NodeProto *n = ob_node(&b, "CumSum", "x|axis", "y0");
    ob_attr_int(&b, n, "reverse", 1);
    ob_attr_int(&b, n, "exclusive", 1);
    CHECK(run_model(&b, "x", &x, 1, &y, 1) == 0, "CumSum: %s", tide_last_error());
    CHECK(y && tide_get_dtype(y) == TIDE_INT32, "CumSum keeps int32");
    check_values(y, (const double[]){9, 7, 4, 0}, 4, 0, "CumSum reverse exclusive");
    tide_release(y);
    tide_release(x);
}

/* Before opset 13, Softmax and Hardmax see x flattened at axis into [outer, inner]. */
static void test_softmax_family_flattens(void)
{
    float xv[8] = {1, 5, 5, 2, 0, -1, 3, 3};
    int64_t s222[3] = {2, 2, 2};
    tide_tensor *x = f32(3, s222, xv), *y = NULL;
    ob_model b;
    ob_init(&b, 11);
    ob_node(&b, "Hardmax", "x", "y0"); /* axis 1: rows of 4, the first largest wins */
    CHECK(run_model(&b, "x", &x, 1, &y, 1) == 0, "Hardmax-11: %s", tide_last_error());
    CHECK(y && tide_ndim(y) == 3 && tide_get_dtype(y) == TIDE_FLOAT32, "Hardmax-11 shape");
    check_values(y, (const double[]){0, 1, 0, 0, 0, 0, 1, 0}, 8, 0, "Hardmax-11");
    tide_release(y);

    ob_init(&b, 11);
    ob_node(&b, "Softmax", "x", "y0");
    CHECK(run_model(&b, "x", &x, 1, &y, 1) == 0, "Softmax-11: %s", tide_last_error());
    double want[8];
    for (int r = 0; r < 2; r++) {
        double s = 0;
        for (int j = 0; j < 4; j++)
            s += exp(xv[r * 4 + j]);
        for (int j = 0; j < 4; j++)
            want[r * 4 + j] = exp(xv[r * 4 + j]) / s;
    }
    check_values(y, want, 8, 1e-6, "Softmax-11 (float32 exp and sum of 4)");
    tide_release(y);

    ob_init(&b, 13);
    Onnx__NodeProto *n = ob_node(&b, "Hardmax", "x", "y0");
    ob_attr_int(&b, n, "axis", 1); /* opset 13: along dim 1 only */
    CHECK(run_model(&b, "x", &x, 1, &y, 1) == 0, "Hardmax-13: %s", tide_last_error());
    check_values(y, (const double[]){0, 1, 1, 0, 0, 0, 1, 1}, 8, 0, "Hardmax-13");
    tide_release(y);
    tide_release(x);
}

/* 0-dim inputs: one element is its own largest, first and last. */
static void test_zero_dim(void)
{
    float one = 2.5f;
    tide_tensor *x = f32(0, NULL, &one), *y = NULL;
    static const char *const ops[] = {"ArgMax", "Hardmax", "ReduceSum"};
    static const double want[] = {0, 1, 2.5};
    for (int i = 0; i < 3; i++) {
        ob_model b;
        ob_init(&b, 13);
        Onnx__NodeProto *n = ob_node(&b, ops[i], "x", "y0");
        if (i == 0)
            ob_attr_int(&b, n, "select_last_index", 1);
        if (i == 1)
            ob_attr_int(&b, n, "axis", 0); /* -1 (the default) is out of [-0, 0] */
        CHECK(run_model(&b, "x", &x, 1, &y, 1) == 0, "%s of 0-dim: %s", ops[i],
              tide_last_error());
        CHECK(y && tide_ndim(y) == 0, "%s of 0-dim is 0-dim", ops[i]);
        check_values(y, &want[i], 1, 0, ops[i]);
        tide_release(y);
    }
    tide_release(x);
}

/* ---- losses -------------------------------------------------------------------------------- */
static void test_nll_weights_ignore_index(void)
{
    float lp[9] = {-1, -2, -3, -0.5f, -1.5f, -2.5f, -0.25f, -0.75f, -1.25f}, wv[3] = {1, 2, 4};
    int64_t s33[2] = {3, 3}, s3[1] = {3}, tv[3] = {2, 0, 1};
    tide_tensor *in[3] = {f32(2, s33, lp), tide_from_data(tv, 1, s3, TIDE_INT64), f32(1, s3, wv)};
    /* row 0: 3 * w[2]=4 -> 12; row 1 ignored (target 0); row 2: 0.75 * w[1]=2 -> 1.5 */
    static const char *const reductions[] = {"none", "sum", "mean"};
    static const double want[3][3] = {{12, 0, 1.5}, {13.5}, {13.5 / 6}};
    for (int r = 0; r < 3; r++) {
        ob_model b;
        ob_init(&b, 13);
        Onnx__NodeProto *n = ob_node(&b, "NegativeLogLikelihoodLoss", "x|t|w", "y0");
        ob_attr_string(&b, n, "reduction", reductions[r]);
        ob_attr_int(&b, n, "ignore_index", 0);
        tide_tensor *y = NULL;
        CHECK(run_model(&b, "x|t|w", in, 3, &y, 1) == 0, "NLL %s: %s", reductions[r],
              tide_last_error());
        check_values(y, want[r], r ? 1 : 3, 1e-6, reductions[r]);
        tide_release(y);
    }
    for (int i = 0; i < 3; i++)
        tide_release(in[i]);
}

/* SoftmaxCrossEntropyLoss: -log_softmax at the target, and the log_softmax as output 1. */
static void test_sce_log_prob(void)
{
    float sv[2] = {0, (float)log(3.0)};
    int64_t s12[2] = {1, 2}, s1[1] = {1}, tv[1] = {1};
    tide_tensor *in[2] = {f32(2, s12, sv), tide_from_data(tv, 1, s1, TIDE_INT64)}, *y[2] = {0};
    ob_model b;
    ob_init(&b, 13);
    ob_node(&b, "SoftmaxCrossEntropyLoss", "x|t", "y0|y1");
    CHECK(run_model(&b, "x|t", in, 2, y, 2) == 0, "SCE: %s", tide_last_error());
    /* softmax is {1/4, 3/4}; float32 log and exp give ~1e-7 */
    check_values(y[0], (const double[]){-log(0.75)}, 1, 1e-6, "SCE loss");
    check_values(y[1], (const double[]){log(0.25), log(0.75)}, 2, 1e-6, "SCE log_prob");
    for (int i = 0; i < 2; i++) {
        tide_release(in[i]);
        tide_release(y[i]);
    }
}

/* ---- errors -------------------------------------------------------------------------------- */
/* A one-node model with an int attribute (an ints one for "axes") fails on xs with an error
 * naming the op and frag. */
static void expect_error(int opset, const char *op, const char *ins, tide_tensor *const *xs,
                         int nx, const char *attr, const int64_t *v, int count, const char *frag)
{
    ob_model b;
    ob_init(&b, opset);
    int nout = strcmp(op, "TopK") ? 1 : 2;
    Onnx__NodeProto *n = ob_node(&b, op, ins, nout == 2 ? "y0|y1" : "y0");
    if (attr && !strcmp(attr, "axes"))
        ob_attr_ints(&b, n, attr, v, (size_t)count);
    else if (attr)
        ob_attr_int(&b, n, attr, v[0]);
    tide_tensor *y[2] = {NULL, NULL};
    int rc = run_model(&b, ins, xs, nx, y, nout);
    CHECK(rc < 0 && strstr(tide_last_error(), op) && strstr(tide_last_error(), frag),
          "%s: \"%s\"", op, tide_last_error());
    tide_release(y[0]);
    tide_release(y[1]);
}

static void test_errors(void)
{
    int64_t s23[2] = {2, 3}, s3[1] = {3}, s1[1] = {1};
    int64_t two = 2, dup[2] = {1, -1}, four = 4, bad_t[3] = {0, 5, 1};
    tide_tensor *x = tide_zeros(2, s23, TIDE_FLOAT32);
    expect_error(11, "ReduceSum", "x", &x, 1, "axes", &two, 1, "axis 2 is out of range");
    expect_error(11, "ReduceSum", "x", &x, 1, "axes", dup, 2, "listed twice");
    expect_error(11, "ArgMax", "x", &x, 1, "axis", &two, 1, "axis 2 is out of range");
    expect_error(1, "TopK", "x", &x, 1, "k", &four, 1, "k 4 is out of range");
    expect_error(11, "Det", "x", &x, 1, NULL, NULL, 0, "[..., M, M]");
    tide_tensor *pair[2] = {x, tide_zeros(2, (int64_t[]){2, 2}, TIDE_FLOAT32)};
    expect_error(13, "Sum", "a|b", pair, 2, NULL, NULL, 0, "[2, 2]"); /* do not broadcast */
    tide_release(pair[1]);

    tide_tensor *nll[2] = {x, tide_from_data(bad_t, 1, s3, TIDE_INT64)};
    expect_error(13, "NegativeLogLikelihoodLoss", "x|t", nll, 2, NULL, NULL, 0, "do not match");
    tide_release(nll[1]);
    nll[1] = tide_from_data(bad_t, 1, (int64_t[]){2}, TIDE_INT64); /* target 5 of 3 classes */
    expect_error(13, "NegativeLogLikelihoodLoss", "x|t", nll, 2, NULL, NULL, 0, "5");
    tide_release(nll[1]);

    tide_tensor *weighted[3] = {x, tide_from_data(bad_t, 1, (int64_t[]){2}, TIDE_INT64),
                                tide_zeros(1, (int64_t[]){2}, TIDE_FLOAT32)};
    expect_error(13, "NegativeLogLikelihoodLoss", "x|t|w", weighted, 3, NULL, NULL, 0,
                 "the weight must be [C] = [3]; it is [2]");
    tide_release(weighted[1]);
    tide_release(weighted[2]);
    expect_error(13, "Sum", "x|", &x, 1, NULL, NULL, 0, "input 1 is missing");

    ob_model b;
    ob_init(&b, 13);
    Onnx__NodeProto *n = ob_node(&b, "SoftmaxCrossEntropyLoss", "x|t", "y0");
    ob_attr_string(&b, n, "reduction", "bogus");
    nll[1] = tide_from_data(bad_t, 1, s1, TIDE_INT64);
    tide_tensor *y = NULL;
    CHECK(run_model(&b, "x|t", nll, 2, &y, 1) < 0 &&
              tide_last_error_code() == TIDE_ERR_UNSUPPORTED && strstr(tide_last_error(), "bogus"),
          "an unknown reduction: \"%s\"", tide_last_error());
    tide_release(nll[1]);

    ob_init(&b, 12);
    n = ob_node(&b, "Einsum", "x", "y0");
    ob_attr_string(&b, n, "equation", "ij,jk->ik");
    CHECK(run_model(&b, "x", &x, 1, &y, 1) < 0 && strstr(tide_last_error(), "Einsum"),
          "an equation of two operands with one input: \"%s\"", tide_last_error());
    tide_release(x);
}

static void run_all(void)
{
    test_reduce_dtypes_and_axes();
    test_empty_reductions();
    test_cumsum();
    test_softmax_family_flattens();
    test_zero_dim();
    test_nll_weights_ignore_index();
    test_sce_log_prob();
    test_errors();
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/tide_onnx_reduce_XXXXXX");
    if (ob_each_device("test_onnx_reduce", dir, run_all))
        return 1;
    tide_shutdown();
    return test_summary("test_onnx_reduce");
}
