/*
 * test_onnx_symbolic.c — free dims (dim_param) of a model loaded with tide_onnx_load get one
 * symbolic plan for every size where that is sound (io/onnx/onnx_symbolic.c), and plans per
 * shape where it is not. Counted with the jit's compile count (tide_jit_global_stats); every
 * run's outputs must equal the interpreter's (tide_onnx_run) bit for bit, the compiled graph
 * and eager running the same kernels in the same order on the CPU.
 *  - an MLP (MatMul, Add, Relu): batches 2, 3, 5, 8 with no compile after the load; batch 1 (a
 *    symbolic dim stays at least 2) one compile of its own;
 *  - a Reshape whose target comes from Shape(x): symbolic too (the reshape keeps the batch);
 *  - x / Shape(x)[0], a size used as a number: the check at load refuses the symbolic plan
 *    (which would divide by the batch it was captured at), and every batch gets the right
 *    values from a plan of its own.
 */
#include <stdlib.h>
#include <unistd.h>

#include "onnx_build.h"
#include "test_util.h"
#include "tide.h"

enum { F32 = ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT, I64 = ONNX__TENSOR_PROTO__DATA_TYPE__INT64 };
static char dir[64];
static const char *const batch_dims[] = {"batch", NULL, NULL};

static const char *path_in_dir(const char *name)
{
    static char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    return path;
}

static int64_t compiles(void)
{
    tide_jit_stats s;
    tide_jit_global_stats(&s);
    return s.compiles;
}

static void write_mlp(void)
{
    static const float w[12] = {0.5f, -1, 2, 1, 0.25f, -0.5f, -2, 1, 0.75f, 1.5f, -0.25f, 0.125f};
    static const float bias[3] = {0.1f, -0.2f, 0.3f};
    ob_model b;
    ob_init(&b, 13);
    int64_t xs[2] = {-1, 4}, ws[2] = {4, 3}, bs[1] = {3}, ys[2] = {-1, 3};
    ob_input(&b, "x", F32, 2, xs, batch_dims);
    ob_init_tensor(&b, "W", F32, 2, ws, w);
    ob_init_tensor(&b, "b", F32, 1, bs, bias);
    ob_node(&b, "MatMul", "x|W", "xw");
    ob_node(&b, "Add", "xw|b", "pre");
    ob_node(&b, "Relu", "pre", "y");
    ob_output(&b, "y", F32, 2, ys, batch_dims);
    CHECK(ob_write(&b, path_in_dir("mlp.onnx")) == 0, "writing mlp.onnx");
    ob_free(&b);
}

/* y = x / float(Shape(x)[0]): x [batch, 3]; the batch size is a value here. */
static void write_divide_by_batch(void)
{
    ob_model b;
    ob_init(&b, 13);
    int64_t xs[2] = {-1, 3}, zero = 0;
    ob_input(&b, "x", F32, 2, xs, batch_dims);
    ob_init_tensor(&b, "zero", I64, 0, NULL, &zero);
    ob_node(&b, "Shape", "x", "s");
    ob_node(&b, "Gather", "s|zero", "n");
    ob_attr_int(&b, ob_node(&b, "Cast", "n", "nf"), "to", F32);
    ob_node(&b, "Div", "x|nf", "y");
    ob_output(&b, "y", F32, 2, xs, batch_dims);
    CHECK(ob_write(&b, path_in_dir("div_batch.onnx")) == 0, "writing div_batch.onnx");
    ob_free(&b);
}

/* Runs g and the interpreter on x [n, cols] (values from n); their outputs must be equal. */
static void check_run(tide_graph *g, tide_onnx_model *m, int64_t n, int64_t cols, const char *what)
{
    float x[16 * 8], a[16 * 8], e[16 * 8];
    for (int64_t i = 0; i < n * cols; i++)
        x[i] = (float)((i * 5 + n) % 13) / 3.0f - 2.0f;
    tide_tensor *in = tide_from_data(x, 2, (int64_t[]){n, cols}, TIDE_FLOAT32);
    tide_tensor *got = NULL, *want = NULL;
    CHECK(tide_graph_run(g, &in, 1, &got) == 0, "%s at %lld: %s", what, (long long)n, tide_last_error());
    CHECK(tide_onnx_run(m, &in, 1, &want) == 0, "%s eager: %s", what, tide_last_error());
    size_t bytes = got && want ? (size_t)tide_numel(want) * 4 : 0;
    CHECK(got && want && tide_numel(got) == tide_numel(want) && tide_ndim(got) == tide_ndim(want) &&
              tide_shape(got)[0] == n && tide_to_buffer(got, a, sizeof a) == 0 &&
              tide_to_buffer(want, e, sizeof e) == 0 && !memcmp(a, e, bytes),
          "%s at batch %lld: the compiled graph differs from the interpreter", what, (long long)n);
    tide_release(got);
    tide_release(want);
    tide_release(in);
}

static void test_one_plan(const char *file, int64_t cols)
{
    tide_graph *g = tide_onnx_load(path_in_dir(file), NULL);
    tide_onnx_model *m = tide_onnx_open(path_in_dir(file), NULL);
    CHECK(g && m, "%s: load: %s", file, tide_last_error());
    if (!g || !m)
        goto out;
    int64_t before = compiles();
    for (int64_t n = 2; n <= 8; n += n < 3 ? 1 : n < 5 ? 2 : 3) /* 2, 3, 5, 8 */
        check_run(g, m, n, cols, file);
    CHECK(compiles() == before, "%s: batches 2-8 compiled %lld plans; one symbolic plan serves them",
          file, (long long)(compiles() - before));
    check_run(g, m, 1, cols, file);
    CHECK(compiles() == before + 1, "%s: batch 1 compiled %lld plans, expected its own one", file,
          (long long)(compiles() - before));
out:
    tide_onnx_close(m);
    tide_graph_free(g);
}

static void test_size_as_value(void)
{
    tide_graph *g = tide_onnx_load(path_in_dir("div_batch.onnx"), NULL);
    tide_onnx_model *m = tide_onnx_open(path_in_dir("div_batch.onnx"), NULL);
    CHECK(g && m, "div_batch: load: %s", tide_last_error());
    if (!g || !m)
        goto out;
    /* a symbolic plan would divide by the batch it was captured at */
    const int64_t sizes[] = {2, 3, 5, 3, 1};
    for (int i = 0; i < 5; i++)
        check_run(g, m, sizes[i], 3, "div_batch");
out:
    tide_onnx_close(m);
    tide_graph_free(g);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/tide_onnx_sym_XXXXXX");
    if (!mkdtemp(dir)) {
        perror("mkdtemp");
        return 1;
    }
    write_mlp();
    CHECK(ob_write_batch_reshape(path_in_dir("reshape.onnx")) == 0, "writing reshape.onnx");
    write_divide_by_batch();
    test_one_plan("mlp.onnx", 4);
    test_one_plan("reshape.onnx", 6);
    test_size_as_value();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0)
        fprintf(stderr, "could not remove %s\n", dir);
    tide_shutdown();
    return test_summary("test_onnx_symbolic");
}
