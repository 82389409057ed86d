/*
 * test_onnx.c — the ONNX importer's own tests (the conformance runner checks the op handlers
 * against the ONNX test data): models written here with protobuf-c are loaded, run eagerly,
 * compiled (tide_onnx_load) at their free dims' sizes and at others, differentiated, run on
 * Vulkan, and broken in the ways a user's file can be, each of which must be an error naming
 * what is wrong.
 */
#include <stdlib.h>
#include <unistd.h>

#include "onnx_build.h"
#include "test_util.h"
#include "tide.h"

static char dir[64];

static const char *path_in_dir(const char *name)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

enum { F32 = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, I64 = ONNX__TENSOR_PROTO__DATA_TYPE__INT64 };
static const float W[12] = {0.5f, -1, 2, 1, 0.25f, -0.5f, -2, 1, 0.75f, 1.5f, -0.25f, 0.125f};
static const float B[3] = {0.1f, -0.2f, 0.3f};
static const char *const batch_dims[] = {"batch", NULL};

/* y = Relu(MatMul(x, W) + b): x [batch, 4], W [4, 3], b [3]. */
static void write_mlp(const char *name, bool external_w)
{
    ob_model b;
    ob_init(&b, 13);
    int64_t xs[2] = {-1, 4}, ws[2] = {4, 3}, bs[1] = {3}, ys[2] = {-1, 3};
    ob_input(&b, "x", F32, 2, xs, batch_dims);
    Onnx__TensorProto *w = ob_init_tensor(&b, "W", F32, 2, ws, W);
    ob_init_tensor(&b, "b", F32, 1, bs, B);
    Onnx__StringStringEntryProto loc = ONNX__STRING_STRING_ENTRY_PROTO__INIT, *locs[1] = {&loc};
    if (external_w) { /* W's bytes in a file beside the model */
        FILE *f = fopen(path_in_dir("w.bin"), "wb");
        fwrite(W, sizeof W, 1, f);
        fclose(f);
        w->has_raw_data = 0;
        w->has_data_location = 1;
        w->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
        loc.key = "location";
        loc.value = "w.bin";
        w->n_external_data = 1;
        w->external_data = locs;
    }
    ob_node(&b, "MatMul", "x|W", "xw");
    ob_node(&b, "Add", "xw|b", "pre");
    ob_node(&b, "Relu", "pre", "y");
    ob_output(&b, "y", F32, 2, ys, batch_dims);
    CHECK(ob_write(&b, path_in_dir(name)) == 0, "writing %s", name);
    ob_free(&b);
}

static float mlp_ref(const float *x, int r, int j)
{
    float s = B[j];
    for (int k = 0; k < 4; k++)
        s += x[r * 4 + k] * W[k * 3 + j];
    return s > 0 ? s : 0;
}

static tide_tensor *batch_input(int n, float *x)
{
    for (int i = 0; i < n * 4; i++)
        x[i] = (float)((i * 7) % 11) / 4.0f - 1.2f;
    int64_t shape[2] = {n, 4};
    return tide_from_data(x, 2, shape, TIDE_FLOAT32);
}

/* out is [n, 3] and matches the reference within float32 rounding of a 4-term sum. */
static void check_mlp_out(const tide_tensor *y, const float *x, int n, const char *what)
{
    float got[64 * 3];
    bool shape_ok = y && tide_ndim(y) == 2 && tide_shape(y)[0] == n && tide_shape(y)[1] == 3;
    CHECK(shape_ok, "%s: shape", what);
    if (!shape_ok || tide_to_buffer(y, got, sizeof got) < 0)
        return;
    double worst = 0;
    for (int r = 0; r < n; r++)
        for (int j = 0; j < 3; j++)
            worst = fmax(worst, fabs(got[r * 3 + j] - mlp_ref(x, r, j)));
    CHECK(worst <= 1e-5, "%s: off by %g", what, worst);
}

static void test_eager_and_info(void)
{
    write_mlp("mlp.onnx", false);
    tide_onnx_model *m = tide_onnx_open(path_in_dir("mlp.onnx"), NULL);
    CHECK(m != NULL, "open: %s", tide_last_error());
    if (!m)
        return;
    CHECK(tide_onnx_num_inputs(m) == 1 && tide_onnx_num_outputs(m) == 1, "counts");
    CHECK(!strcmp(tide_onnx_input_name(m, 0), "x") && !strcmp(tide_onnx_output_name(m, 0), "y"),
          "names");
    tide_dtype dt;
    int nd;
    int64_t shape[8];
    const char *names[8];
    CHECK(tide_onnx_input_info(m, 0, &dt, &nd, shape, names, 8) == 0 && dt == TIDE_FLOAT32 &&
              nd == 2 && shape[0] == -1 && shape[1] == 4 && names[0] &&
              !strcmp(names[0], "batch") && !names[1],
          "input info");
    CHECK(tide_onnx_input_name(m, 1) == NULL && strstr(tide_last_error(), "no input 1"),
          "a bad index: %s", tide_last_error());
    float x[5 * 4];
    tide_tensor *in = batch_input(5, x), *out = NULL;
    CHECK(tide_onnx_run(m, &in, 1, &out) == 0, "run: %s", tide_last_error());
    check_mlp_out(out, x, 5, "eager");
    tide_release(out);
    /* the gradient flows through the model's ops: d sum(y) / dx = W rows where y > 0 */
    tide_requires_grad_(in, true);
    out = NULL;
    CHECK(tide_onnx_run(m, &in, 1, &out) == 0, "run with grad: %s", tide_last_error());
    tide_tensor *s = out ? tide_sum(out, NULL, 0, false) : NULL;
    CHECK(s && tide_backward(s, NULL, false) == 0, "backward: %s", tide_last_error());
    float g[5 * 4];
    tide_tensor *grad = tide_grad(in); /* a new reference */
    CHECK(grad && tide_to_buffer(grad, g, sizeof g) == 0, "grad");
    double worst = 0;
    for (int r = 0; grad && r < 5; r++)
        for (int k = 0; k < 4; k++) {
            double want = 0;
            for (int j = 0; j < 3; j++)
                want += mlp_ref(x, r, j) > 0 ? W[k * 3 + j] : 0;
            worst = fmax(worst, fabs(g[r * 4 + k] - want));
        }
    CHECK(worst <= 1e-6, "grad off by %g", worst);
    tide_release(grad);
    tide_release(s);
    tide_release(out);
    tide_release(in);
    tide_onnx_close(m);
}

static void test_compiled(void)
{
    const char *names[1] = {"batch"};
    int64_t sizes[1] = {3};
    tide_onnx_options o = {NULL, 1, names, sizes};
    tide_graph *g = tide_onnx_load(path_in_dir("mlp.onnx"), &o);
    CHECK(g != NULL, "load: %s", tide_last_error());
    if (!g)
        return;
    CHECK(!strcmp(tide_graph_input_name(g, 0), "x") && !strcmp(tide_graph_output_name(g, 0), "y"),
          "graph names");
    CHECK(tide_graph_dim_name(g, 0, 0) && !strcmp(tide_graph_dim_name(g, 0, 0), "batch") &&
              !tide_graph_dim_name(g, 0, 1), "dim names");
    int64_t shape[2];
    int nd;
    CHECK(tide_graph_output_info(g, 0, NULL, &nd, shape, 2) == 0 && nd == 2 && shape[0] == -1 &&
              shape[1] == 3, "output info");
    int sizes_run[] = {3, 7, 3, 1, 7};
    for (size_t i = 0; i < sizeof sizes_run / sizeof *sizes_run; i++) {
        float x[7 * 4];
        tide_tensor *in = batch_input(sizes_run[i], x), *out = NULL;
        char what[64];
        snprintf(what, sizeof what, "compiled at batch %d", sizes_run[i]);
        CHECK(tide_graph_run(g, &in, 1, &out) == 0, "%s: %s", what, tide_last_error());
        check_mlp_out(out, x, sizes_run[i], what);
        tide_release(out);
        tide_release(in);
    }
    tide_tensor *bad = tide_zeros(1, (int64_t[]){4}, TIDE_FLOAT32), *out = NULL;
    CHECK(tide_graph_run(g, &bad, 1, &out) < 0 && strstr(tide_last_error(), "'x'"),
          "a 1-D input: %s", tide_last_error());
    tide_release(bad);
    tide_graph_free(g);
}

/* x [batch, 6] -> Reshape(x, Concat(Unsqueeze(Gather(Shape(x), 0)), [2, 3])): the target
 * shape is computed from x's shape, which a capture folds to constants. */
static void test_shape_arithmetic_compiles(void)
{
    CHECK(ob_write_batch_reshape(path_in_dir("reshape.onnx")) == 0, "write");
    tide_graph *g = tide_onnx_load(path_in_dir("reshape.onnx"), NULL);
    CHECK(g != NULL, "load: %s", tide_last_error());
    for (int n = 1; g && n <= 4; n += 3) {
        float x[4 * 6], y[4 * 6];
        for (int i = 0; i < n * 6; i++)
            x[i] = (float)i;
        tide_tensor *in = tide_from_data(x, 2, (int64_t[]){n, 6}, TIDE_FLOAT32), *out = NULL;
        CHECK(tide_graph_run(g, &in, 1, &out) == 0, "run at %d: %s", n, tide_last_error());
        CHECK(out && tide_ndim(out) == 3 && tide_shape(out)[0] == n && tide_shape(out)[2] == 3 &&
                  tide_to_buffer(out, y, sizeof y) == 0 && !memcmp(x, y, sizeof(float) * 6 * n),
              "reshape at batch %d", n);
        tide_release(out);
        tide_release(in);
    }
    tide_graph_free(g);
}

static void test_external_data(void)
{
    write_mlp("mlp_ext.onnx", true);
    tide_onnx_model *m = tide_onnx_open(path_in_dir("mlp_ext.onnx"), NULL);
    CHECK(m != NULL, "external data: %s", tide_last_error());
    float x[2 * 4];
    tide_tensor *in = batch_input(2, x), *out = NULL;
    CHECK(m && tide_onnx_run(m, &in, 1, &out) == 0, "run: %s", tide_last_error());
    check_mlp_out(out, x, 2, "external W");
    tide_release(out);
    tide_release(in);
    tide_onnx_close(m);
}

static void test_vulkan(void)
{
    char why[256];
    if (!tide_vulkan_available(why, sizeof why)) {
        printf("test_onnx: Vulkan skipped: %s\n", why);
        return;
    }
    tide_onnx_model *m = tide_onnx_open(path_in_dir("mlp.onnx"), "vulkan");
    CHECK(m != NULL, "open on vulkan: %s", tide_last_error());
    float x[3 * 4];
    tide_tensor *cpu = batch_input(3, x), *in = tide_to(cpu, "vulkan"), *out = NULL;
    CHECK(m && in && tide_onnx_run(m, &in, 1, &out) == 0, "run on vulkan: %s",
          tide_last_error());
    CHECK(out && !strncmp(tide_device_name(out), "vulkan", 6), "the result stays on vulkan");
    check_mlp_out(out, x, 3, "vulkan");
    tide_release(out);
    out = NULL;
    CHECK(m && tide_onnx_run(m, &cpu, 1, &out) < 0, "a cpu input to a vulkan model");
    tide_release(in);
    tide_release(cpu);
    tide_onnx_close(m);
}

/* ---- errors -------------------------------------------------------------------------------- */
static void expect_open_error(const char *file, int code, const char *frag1, const char *frag2)
{
    tide_onnx_model *m = tide_onnx_open(path_in_dir(file), NULL);
    CHECK(!m && tide_last_error_code() == code && strstr(tide_last_error(), frag1) &&
              (!frag2 || strstr(tide_last_error(), frag2)),
          "%s: code %d, \"%s\"", file, tide_last_error_code(), tide_last_error());
    tide_onnx_close(m);
}

static void write_bytes(const char *file, const void *data, size_t n)
{
    FILE *f = fopen(path_in_dir(file), "wb");
    fwrite(data, 1, n, f);
    fclose(f);
}

static void test_errors(void)
{
    expect_open_error("missing.onnx", TIDE_ERR_IO, "missing.onnx", "cannot open");
    write_bytes("garbage.onnx", "\xff\xff\xff\xff not a protobuf", 20);
    expect_open_error("garbage.onnx", TIDE_ERR_IO, "garbage.onnx", "does not parse");
    ob_model b;
    int64_t xs[1] = {3};
    /* an op tide does not have: named with the node and the opset */
    ob_init(&b, 13);
    ob_input(&b, "x", F32, 1, xs, NULL);
    ob_node(&b, "FancyOp", "x", "y");
    ob_output(&b, "y", F32, 1, xs, NULL);
    ob_write(&b, path_in_dir("unknown_op.onnx"));
    ob_free(&b);
    expect_open_error("unknown_op.onnx", TIDE_ERR_UNSUPPORTED, "FancyOp", "opset 13");
    /* a value nobody defines, and a node reading its own output (a cycle) */
    ob_init(&b, 13);
    ob_input(&b, "x", F32, 1, xs, NULL);
    ob_node(&b, "Add", "x|nowhere", "y");
    ob_output(&b, "y", F32, 1, xs, NULL);
    ob_write(&b, path_in_dir("undefined.onnx"));
    ob_free(&b);
    expect_open_error("undefined.onnx", TIDE_ERR_IO, "'nowhere'", "Add");
    ob_init(&b, 13);
    ob_input(&b, "x", F32, 1, xs, NULL);
    ob_node(&b, "Add", "x|y", "y");
    ob_output(&b, "y", F32, 1, xs, NULL);
    ob_write(&b, path_in_dir("cycle.onnx"));
    ob_free(&b);
    expect_open_error("cycle.onnx", TIDE_ERR_IO, "'y'", "cycle");
    /* external data may not leave the model's folder */
    ob_init(&b, 13);
    ob_input(&b, "x", F32, 1, xs, NULL);
    Onnx__TensorProto *w = ob_init_tensor(&b, "w", F32, 1, xs, W);
    Onnx__StringStringEntryProto loc = ONNX__STRING_STRING_ENTRY_PROTO__INIT, *locs[1] = {&loc};
    loc.key = "location";
    loc.value = "../../etc/passwd";
    w->has_raw_data = 0;
    w->has_data_location = 1;
    w->data_location = ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL;
    w->n_external_data = 1;
    w->external_data = locs;
    ob_node(&b, "Add", "x|w", "y");
    ob_output(&b, "y", F32, 1, xs, NULL);
    ob_write(&b, path_in_dir("escape.onnx"));
    ob_free(&b);
    expect_open_error("escape.onnx", TIDE_ERR_IO, "outside the model's folder", "'w'");
    /* run-time mistakes: the input's dtype and shape, the count */
    tide_onnx_model *m = tide_onnx_open(path_in_dir("mlp.onnx"), NULL);
    tide_tensor *i64 = tide_zeros(2, (int64_t[]){2, 4}, TIDE_INT64);
    tide_tensor *wide = tide_zeros(2, (int64_t[]){2, 5}, TIDE_FLOAT32), *out = NULL;
    CHECK(tide_onnx_run(m, &i64, 1, &out) < 0 && strstr(tide_last_error(), "'x' is int64"),
          "dtype: %s", tide_last_error());
    CHECK(tide_onnx_run(m, &wide, 1, &out) < 0 && strstr(tide_last_error(), "[2, 5]") &&
              strstr(tide_last_error(), "[-1, 4]"), "shape: %s", tide_last_error());
    CHECK(tide_onnx_run(m, &wide, 2, &out) < 0 && strstr(tide_last_error(), "takes 1 inputs"),
          "count: %s", tide_last_error());
    tide_release(i64);
    tide_release(wide);
    tide_onnx_close(m);
    CHECK_ERROR(tide_onnx_load_tensor(path_in_dir("garbage.onnx")), "not a TensorProto");
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/tide_onnx_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    test_eager_and_info();
    test_compiled();
    test_shape_arithmetic_compiles();
    test_external_data();
    test_vulkan();
    test_errors();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    tide_shutdown();
    return test_summary("test_onnx");
}
