/*
 * test_onnx_conv.c — the ONNX importer's conv and nn handlers on one-node models written here:
 * uneven Conv pads (tide pads evenly, so the handler pads first), opset 6's per-channel PRelu
 * slope, and the errors of malformed attributes, each naming the op; CPU and Vulkan.
 */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "onnx_build.h"
#include "test_util.h"
#include "tide.h"

static char dir[64];
enum { F32 = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT };

/* Writes b with inputs `names` (xs' dtypes and shapes) and output "y", runs it: 0 or -1. */
static int run_model(ob_model *b, const char *names, tide_tensor *const *xs, int nx,
                     tide_tensor **out)
{
    int rc = ob_run(b, dir, names, xs, nx, "y", out);
    CHECK(rc != -2, "writing the model");
    return rc < 0 ? -1 : 0;
}

/* Exact small sums and products of floats: tolerance 1e-6. */
static void check_values(tide_tensor *t, const double *want, int count, const char *what)
{
    double got[32];
    tide_tensor *wide = t ? tide_cast(t, TIDE_FLOAT64) : NULL;
    bool ok = wide && tide_numel(wide) == count &&
              tide_to_buffer(wide, got, sizeof(double) * (size_t)count) == 0;
    for (int i = 0; ok && i < count; i++)
        ok = fabs(got[i] - want[i]) <= 1e-6;
    CHECK(ok, "%s: values differ (%s)", what, t ? "" : tide_last_error());
    tide_release(wide);
}

/* 1-D Conv of [1, 2, 3] with kernel [1, 1], pads (1, 0): [0+1, 1+2, 2+3] = [1, 3, 5]. */
static void test_conv_uneven_pads(void)
{
    float xv[3] = {1, 2, 3}, wv[2] = {1, 1};
    int64_t s13[3] = {1, 1, 3}, s12[3] = {1, 1, 2}, pads[2] = {1, 0};
    tide_tensor *in[2] = {tide_from_data(xv, 3, s13, TIDE_FLOAT32),
                          tide_from_data(wv, 3, s12, TIDE_FLOAT32)};
    ob_model b;
    ob_init(&b, 13);
    ob_attr_ints(&b, ob_node(&b, "Conv", "x|w", "y"), "pads", pads, 2);
    tide_tensor *y = NULL;
    CHECK(run_model(&b, "x|w", in, 2, &y) == 0, "Conv: %s", tide_last_error());
    check_values(y, (const double[]){1, 3, 5}, 3, "Conv with pads (1, 0)");
    tide_release(y);
    tide_release(in[0]);
    tide_release(in[1]);
}

/* Opset 6 PRelu: slope [2] scales channel 1 of x [1, 2, 2] by its own value. */
static void test_prelu_per_channel(void)
{
    float xv[4] = {-1, 2, -3, -4}, sv[2] = {0.5f, 2};
    int64_t s122[3] = {1, 2, 2}, s2[1] = {2};
    tide_tensor *in[2] = {tide_from_data(xv, 3, s122, TIDE_FLOAT32),
                          tide_from_data(sv, 1, s2, TIDE_FLOAT32)};
    ob_model b;
    ob_init(&b, 6);
    ob_node(&b, "PRelu", "x|s", "y");
    tide_tensor *y = NULL;
    CHECK(run_model(&b, "x|s", in, 2, &y) == 0, "PRelu: %s", tide_last_error());
    check_values(y, (const double[]){-0.5, 2, -6, -8}, 4, "PRelu per channel");
    tide_release(y);
    tide_release(in[0]);
    tide_release(in[1]);
}

static void expect_error(const char *op, const char *attr, const int64_t *v, size_t count,
                         const char *frag)
{
    int64_t s[4] = {1, 1, 4, 4};
    tide_tensor *in[2] = {tide_zeros(4, s, TIDE_FLOAT32), tide_zeros(4, s, TIDE_FLOAT32)};
    ob_model b;
    ob_init(&b, 13);
    bool conv = !strcmp(op, "Conv");
    Onnx__NodeProto *n = ob_node(&b, op, conv ? "x|w" : "x", "y");
    if (attr)
        ob_attr_ints(&b, n, attr, v, count);
    tide_tensor *y = NULL;
    int rc = run_model(&b, conv ? "x|w" : "x", in, conv ? 2 : 1, &y);
    CHECK(rc < 0 && strstr(tide_last_error(), op) && strstr(tide_last_error(), frag),
          "%s: \"%s\"", op, tide_last_error());
    tide_release(y);
    tide_release(in[0]);
    tide_release(in[1]);
}

static void test_errors(void)
{
    int64_t one[1] = {1}, neg[2] = {-1, 2}, k2[2] = {2, 2};
    expect_error("Conv", "strides", one, 1, "strides has 1 entries for 2 spatial dims");
    expect_error("Conv", "dilations", neg, 2, "must be in [1, 2^20]");
    expect_error("MaxPool", NULL, NULL, 0, "kernel_shape is missing");
    expect_error("AveragePool", "kernel_shape", neg, 2, "kernel size -1 in dim 0 is invalid");
    expect_error("Conv", "kernel_shape", k2, 2, "(weight has 4)");
}

static void run_all(void)
{
    test_conv_uneven_pads();
    test_prelu_per_channel();
    test_errors();
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/tide_onnx_conv_XXXXXX");
    if (ob_each_device("test_onnx_conv", dir, run_all))
        return 1;
    tide_shutdown();
    return test_summary("test_onnx_conv");
}
