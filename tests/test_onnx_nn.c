/*
 * test_onnx_nn.c — the ONNX importer's convolution, pool, normalization and resize handlers on
 * one-node models written here: the composed paths the conformance data reach little (pads that
 * differ before and after with count_include_pad 0, dilated max pools) and the errors of
 * malformed nodes, each naming the op; on the CPU and on Vulkan.
 */
#include <math.h>
#include <stdlib.h>
#include <unistd.h>

#include "onnx_build.h"
#include "test_util.h"
#include "tide.h"

static char dir[64];

enum { F32 = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT };

/* Writes b with input "x" (x's shape), output "y", runs it. 0, or -1 with tide's error. */
static int run_model(ob_model *b, tide_tensor *x, tide_tensor **y)
{
    int rc = ob_run(b, dir, "x", &x, 1, "y", y);
    CHECK(rc != -2, "writing the model");
    return rc < 0 ? -1 : 0;
}

/* t holds count values within tol of want. */
static void check_values(tide_tensor *t, const double *want, int count, double tol,
                         const char *what)
{
    double got[32];
    tide_tensor *wide = t ? tide_cast(t, TIDE_FLOAT64) : NULL;
    bool ok = wide && tide_numel(wide) == count &&
              tide_to_buffer(wide, got, sizeof(double) * (size_t)count) == 0;
    for (int i = 0; ok && i < count; i++)
        ok = fabs(got[i] - want[i]) <= tol;
    CHECK(ok, "%s: values differ (%s)", what, t ? "" : tide_last_error());
    tide_release(wide);
}

/* x = 1..5 as [1, 1, 5]. */
static tide_tensor *ramp5(void)
{
    float v[5] = {1, 2, 3, 4, 5};
    return tide_from_data(v, 3, (int64_t[]){1, 1, 5}, TIDE_FLOAT32);
}

/* AveragePool k=2 s=2 pads (1, 0), count_include_pad 0: windows {1}, {2,3}, {4,5}. Max pool
 * k=2 dilation 2 pads (0, 1): windows {1,3}, {2,4}, {3,5}, {4,-inf}. Sums of a few small
 * integers in float32 are exact; 1e-6 allows the division's rounding. */
static void test_composed_pools(void)
{
    tide_tensor *x = ramp5(), *y = NULL;
    ob_model b;
    ob_init(&b, 11);
    Onnx__NodeProto *n = ob_node(&b, "AveragePool", "x", "y");
    ob_attr_ints(&b, n, "kernel_shape", (int64_t[]){2}, 1);
    ob_attr_ints(&b, n, "strides", (int64_t[]){2}, 1);
    ob_attr_ints(&b, n, "pads", (int64_t[]){1, 0}, 2);
    CHECK(run_model(&b, x, &y) == 0, "AveragePool: %s", tide_last_error());
    check_values(y, (double[]){1, 2.5, 4.5}, 3, 1e-6, "AveragePool uneven pads");
    tide_release(y);

    ob_init(&b, 12);
    n = ob_node(&b, "MaxPool", "x", "y");
    ob_attr_ints(&b, n, "kernel_shape", (int64_t[]){2}, 1);
    ob_attr_ints(&b, n, "dilations", (int64_t[]){2}, 1);
    ob_attr_ints(&b, n, "pads", (int64_t[]){0, 1}, 2);
    y = NULL;
    CHECK(run_model(&b, x, &y) == 0, "MaxPool: %s", tide_last_error());
    check_values(y, (double[]){3, 4, 5, 4}, 4, 0, "MaxPool dilated");
    tide_release(y);
    tide_release(x);
}

/* A one-node model with an ints attribute fails with an error naming the op and frag. */
static void expect_error(const char *op, const char *attr, const int64_t *v, int count,
                         const char *frag)
{
    tide_tensor *x = ramp5(), *y = NULL;
    ob_model b;
    ob_init(&b, 13);
    Onnx__NodeProto *n = ob_node(&b, op, "x", "y");
    if (strcmp(attr, "kernel_shape"))
        ob_attr_ints(&b, n, "kernel_shape", (int64_t[]){2}, 1);
    ob_attr_ints(&b, n, attr, v, (size_t)count);
    CHECK(run_model(&b, x, &y) < 0 && strstr(tide_last_error(), op) &&
              strstr(tide_last_error(), frag),
          "%s %s: \"%s\"", op, attr, tide_last_error());
    tide_release(y);
    tide_release(x);
}

static void test_errors(void)
{
    expect_error("MaxPool", "strides", (int64_t[]){0}, 1, "strides[0] = 0");
    expect_error("AveragePool", "pads", (int64_t[]){-1, 0}, 2, "pads must be");
    expect_error("AveragePool", "pads", (int64_t[]){1}, 1, "pads has 1 entries");
    expect_error("LpPool", "kernel_shape", (int64_t[]){2, 2}, 2, "kernel_shape has 2 entries");
    expect_error("MaxPool", "dilations", (int64_t[]){1 << 30}, 1, "dilations[0]");

    tide_tensor *x = ramp5(), *y = NULL;
    ob_model b;
    ob_init(&b, 13);
    Onnx__NodeProto *n = ob_node(&b, "Resize", "x||s", "y");
    ob_attr_string(&b, n, "coordinate_transformation_mode", "tf_crop_and_resize");
    ob_input(&b, "s", F32, 1, (int64_t[]){3}, NULL);
    CHECK(run_model(&b, x, &y) < 0 && tide_last_error_code() == TIDE_ERR_UNSUPPORTED &&
              strstr(tide_last_error(), "tf_crop_and_resize"),
          "Resize tf_crop_and_resize: \"%s\"", tide_last_error());
    tide_release(x);
}

static void run_all(void)
{
    test_composed_pools();
    test_errors();
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/tide_onnx_nn_XXXXXX");
    if (ob_each_device("test_onnx_nn", dir, run_all))
        return 1;
    tide_shutdown();
    return test_summary("test_onnx_nn");
}
