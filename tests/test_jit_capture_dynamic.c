/*
 * test_jit_capture_dynamic.c — dynamic captures (tide_jit_begin_dynamic, jit/README.md): a graph
 * captured once at one batch size runs every other batch size with no recompile. On the CPU
 * its values equal eager's bitwise (the jit's promise there: the same kernels, one summation
 * order); on Vulkan (lavapipe) within 1e-5 relative (a fused reduction of up to 16 terms may
 * sum in another order: 16·2^-24 < 1e-6, and exp's few ulps). Also: a reduction over the
 * dynamic dim, reshapes of it, a CNN (conv, pooling, argmax), and a clear error for each guard a run breaks and for each
 * graph a dynamic capture cannot follow (never a wrong value).
 */
#include <stdio.h>
#include <stdlib.h>

#include "test_ref.h"
#include "test_util.h"
#include "tide.h"

static const char *dev; /* the device of this pass */

static tide_tensor *randn(int ndim, const int64_t *shape)
{
    int64_t n = ref_numel(ndim, shape);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = 4 * ref_uniform() - 2;
    tide_tensor *h = ref_from_doubles(v, ndim, shape, TIDE_FLOAT32);
    free(v);
    tide_tensor *t = strcmp(dev, "cpu") == 0 ? tide_retain(h) : tide_to(h, dev);
    tide_release(h);
    return t;
}

static int64_t compiles(void)
{
    tide_jit_stats s;
    tide_jit_global_stats(&s);
    return s.compiles;
}

/* equal to eager's bitwise on the CPU, within 1e-5 on Vulkan (header comment) */
static void check_same(const char *what, int64_t b, tide_tensor *got, tide_tensor *want)
{
    bool bitwise;
    double err = ref_compare(got, want, &bitwise);
    bool cpu = strcmp(dev, "cpu") == 0;
    CHECK(err >= 0 && (cpu ? bitwise : err <= 1e-5), "%s on %s, batch %lld: error %g%s", what,
          dev, (long long)b, err, cpu && !bitwise ? " (not bitwise)" : "");
}

/* ---- an MLP with a dynamic batch ------------------------------------------------------------ */

typedef struct mlp_weights {
    tide_tensor *w1, *b1, *w2, *b2;
} mlp_weights;

/* softmax(relu(x @ w1 + b1) @ w2 + b2) over the last dim */
static tide_tensor *mlp(tide_tensor *x, const mlp_weights *w)
{
    tide_tensor *p = tide_matmul(x, w->w1), *a = tide_add(p, w->b1), *r = tide_relu(a);
    tide_tensor *q = tide_matmul(r, w->w2), *l = tide_add(q, w->b2), *s = tide_softmax(l, -1);
    tide_release(p), tide_release(a), tide_release(r), tide_release(q), tide_release(l);
    return s;
}

static void test_mlp(void)
{
    mlp_weights w = {randn(2, (int64_t[]){12, 16}), randn(1, (int64_t[]){16}),
                     randn(2, (int64_t[]){16, 10}), randn(1, (int64_t[]){10})};
    tide_tensor *x = randn(2, (int64_t[]){5, 12});
    uint32_t mask = 1; /* dim 0, the batch */
    CHECK(tide_jit_begin_dynamic(&x, 1, &mask) == 0, "begin: %s", tide_last_error());
    tide_tensor *y = mlp(x, &w);
    tide_graph *g = tide_jit_end(&y, y ? 1 : 0);
    CHECK(g != NULL, "mlp capture on %s: %s", dev, tide_last_error());
    tide_release(y);
    int64_t before = compiles();
    const int64_t sizes[] = {2, 3, 37, 128, 1000, 5};
    for (int k = 0; g && k < 6; k++) {
        tide_tensor *xb = randn(2, (int64_t[]){sizes[k], 12}), *got = NULL;
        CHECK(tide_graph_run(g, &xb, 1, &got) == 0, "run at batch %lld: %s",
              (long long)sizes[k], tide_last_error());
        tide_tensor *want = mlp(xb, &w);
        check_same("mlp", sizes[k], got, want);
        tide_release(xb), tide_release(got), tide_release(want);
    }
    CHECK(compiles() == before, "runs compiled %lld times", (long long)(compiles() - before));
    /* guards a run breaks: each an error naming the input, the dim, and the sizes */
    tide_tensor *bad[] = {randn(2, (int64_t[]){6, 13}), randn(2, (int64_t[]){1, 12}),
                          randn(3, (int64_t[]){2, 6, 12}), NULL};
    const char *want_err[] = {"input 0 dim 1 is 13; the graph was captured with 12",
                              "input 0 dim 0 is 1; it is dynamic", "input 0 has 3 dims", NULL};
    for (int k = 0; g && bad[k]; k++) {
        tide_tensor *out = NULL;
        CHECK(tide_graph_run(g, &bad[k], 1, &out) < 0 && strstr(tide_last_error(), want_err[k]),
              "guard %d: %s", k, tide_last_error());
        tide_release(bad[k]);
    }
    tide_tensor *t = randn(2, (int64_t[]){12, 7}), *tt = tide_transpose(t, 0, 1), *out = NULL;
    CHECK(g && tide_graph_run(g, &tt, 1, &out) < 0 && strstr(tide_last_error(), "contiguous"),
          "transposed input: %s", tide_last_error());
    tide_release(t), tide_release(tt);
    tide_graph_free(g);
    tide_release(x);
    tide_release(w.w1), tide_release(w.b1), tide_release(w.w2), tide_release(w.b2);
}

/* ---- a reshape of the batch and reductions over it ------------------------------------------ */

/* tanh(reshape(x, {-1, 32}) @ w) summed over the batch, and x's total sum */
static void flat_sums(tide_tensor *x, tide_tensor *w, tide_tensor **out)
{
    tide_tensor *r = tide_reshape(x, 2, (int64_t[]){-1, 32}), *p = tide_matmul(r, w);
    tide_tensor *h = tide_tanh(p);
    out[0] = tide_sum(h, (int[]){0}, 1, false);
    out[1] = tide_sum(x, NULL, 0, false);
    out[2] = tide_exp(r); /* an output whose shape follows the batch */
    tide_release(r), tide_release(p), tide_release(h);
}

static void test_reductions(void)
{
    tide_tensor *w = randn(2, (int64_t[]){32, 16}), *x = randn(3, (int64_t[]){5, 4, 8});
    uint32_t mask = 1;
    tide_tensor *y[3] = {NULL, NULL, NULL};
    CHECK(tide_jit_begin_dynamic(&x, 1, &mask) == 0, "begin: %s", tide_last_error());
    flat_sums(x, w, y);
    tide_graph *g = tide_jit_end(y, 3);
    CHECK(g != NULL, "reductions capture on %s: %s", dev, tide_last_error());
    for (int i = 0; i < 3; i++)
        tide_release(y[i]);
    int64_t before = compiles();
    const int64_t sizes[] = {2, 3, 37, 128, 1000};
    for (int k = 0; g && k < 5; k++) {
        tide_tensor *xb = randn(3, (int64_t[]){sizes[k], 4, 8}), *got[3] = {0}, *want[3];
        CHECK(tide_graph_run(g, &xb, 1, got) == 0, "run at batch %lld: %s",
              (long long)sizes[k], tide_last_error());
        flat_sums(xb, w, want);
        check_same("sum over the batch", sizes[k], got[0], want[0]);
        check_same("total sum", sizes[k], got[1], want[1]);
        check_same("reshaped batch", sizes[k], got[2], want[2]);
        for (int i = 0; i < 3; i++)
            tide_release(got[i]), tide_release(want[i]);
        tide_release(xb);
    }
    CHECK(compiles() == before, "runs compiled %lld times", (long long)(compiles() - before));
    tide_graph_free(g);
    tide_release(w), tide_release(x);
}

/* ---- numbers of static sizes, unsqueeze (CPU: a number is a CPU tensor) -------------------- */

/* layer_norm over the features (its count, 32, a multiple of the captured batch 4, is static)
 * of x unsqueezed to [1, B, 32] */
static tide_tensor *norm_rows(tide_tensor *x)
{
    tide_tensor *u = tide_unsqueeze(x, 0), *n = u ? tide_layer_norm(u, 1, NULL, NULL, 1e-5) : NULL;
    tide_release(u);
    return n;
}

static void test_static_counts(void)
{
    tide_tensor *x = randn(2, (int64_t[]){4, 32});
    uint32_t mask = 1;
    CHECK(tide_jit_begin_dynamic(&x, 1, &mask) == 0, "begin: %s", tide_last_error());
    tide_tensor *y = norm_rows(x);
    tide_graph *g = tide_jit_end(&y, y ? 1 : 0);
    CHECK(g != NULL, "layer_norm capture: %s", tide_last_error());
    tide_release(y);
    for (int64_t b = 2; g && b < 80; b += 35) {
        tide_tensor *xb = randn(2, (int64_t[]){b, 32}), *got = NULL;
        CHECK(tide_graph_run(g, &xb, 1, &got) == 0, "run at batch %lld: %s", (long long)b,
              tide_last_error());
        tide_tensor *want = norm_rows(xb);
        check_same("layer_norm", b, got, want);
        tide_release(xb), tide_release(got), tide_release(want);
    }
    tide_graph_free(g);
    tide_release(x);
}

/* ---- a small CNN: convolution, pooling, a flatten that writes the batch, argmax ------------ */

/* argmax(flatten(maxpool(relu(conv(x, k) + kb))) @ w), the flatten written with the batch size
 * itself, as nn.Flatten does: the reshape keeps the batch in its dim at every size */
static tide_tensor *cnn(tide_tensor *x, tide_tensor *k, tide_tensor *kb, tide_tensor *w)
{
    const int one[2] = {1, 1}, zero[2] = {0, 0}, two[2] = {2, 2};
    tide_tensor *c = tide_conv2d(x, k, kb, one, one, one, 1), *r = tide_relu(c);
    tide_tensor *p = tide_max_pool2d(r, two, two, zero, NULL);
    tide_tensor *f = tide_reshape(p, 2, (int64_t[]){tide_size(x, 0), 4 * 4 * 4});
    tide_tensor *l = tide_matmul(f, w), *a = tide_argmax(l, 1, false);
    tide_release(c), tide_release(r), tide_release(p), tide_release(f), tide_release(l);
    return a;
}

static void test_cnn(void)
{
    tide_tensor *k = randn(4, (int64_t[]){4, 1, 3, 3}), *kb = randn(1, (int64_t[]){4});
    tide_tensor *w = randn(2, (int64_t[]){64, 10}), *x = randn(4, (int64_t[]){6, 1, 8, 8});
    uint32_t mask = 1;
    CHECK(tide_jit_begin_dynamic(&x, 1, &mask) == 0, "begin: %s", tide_last_error());
    tide_tensor *y = cnn(x, k, kb, w);
    tide_graph *g = tide_jit_end(&y, y ? 1 : 0);
    CHECK(g != NULL, "cnn capture: %s", tide_last_error());
    tide_release(y);
    for (int64_t b = 2; g && b < 60; b += 19) {
        tide_tensor *xb = randn(4, (int64_t[]){b, 1, 8, 8}), *got = NULL;
        CHECK(tide_graph_run(g, &xb, 1, &got) == 0, "run at batch %lld: %s", (long long)b,
              tide_last_error());
        tide_tensor *want = cnn(xb, k, kb, w);
        check_same("cnn", b, got, want);
        tide_release(xb), tide_release(got), tide_release(want);
    }
    tide_graph_free(g);
    tide_release(k), tide_release(kb), tide_release(w), tide_release(x);
}

/* ---- relations between dynamic dims --------------------------------------------------------- */

static void test_relations(void)
{
    tide_tensor *in[2] = {randn(2, (int64_t[]){5, 8}), randn(2, (int64_t[]){5, 8})};
    uint32_t masks[2] = {1, 1};
    CHECK(tide_jit_begin_dynamic(in, 2, masks) == 0, "begin: %s", tide_last_error());
    tide_tensor *y = tide_add(in[0], in[1]);
    tide_graph *g = tide_jit_end(&y, y ? 1 : 0);
    tide_release(y);
    CHECK(g != NULL, "add capture: %s", tide_last_error());
    tide_tensor *run[2] = {randn(2, (int64_t[]){6, 8}), randn(2, (int64_t[]){7, 8})}, *out = NULL;
    CHECK(g && tide_graph_run(g, run, 2, &out) < 0 &&
              strstr(tide_last_error(), "input 0 dim 0 is 6 and input 1 dim 0 is 7"),
          "batches 6 and 7: %s", tide_last_error());
    tide_release(run[1]);
    run[1] = randn(2, (int64_t[]){6, 8});
    CHECK(g && tide_graph_run(g, run, 2, &out) == 0, "batches 6 and 6: %s", tide_last_error());
    tide_tensor *want = tide_add(run[0], run[1]);
    check_same("add", 6, out, want);
    tide_release(out), tide_release(want), tide_release(run[0]), tide_release(run[1]);
    tide_graph_free(g);
    /* two dynamic dims of one input, equal at capture: the plan relies on it (a guard) */
    uint32_t both = 3;
    tide_tensor *sq = randn(2, (int64_t[]){6, 6});
    CHECK(tide_jit_begin_dynamic(&sq, 1, &both) == 0, "begin: %s", tide_last_error());
    y = tide_exp(sq);
    g = tide_jit_end(&y, y ? 1 : 0);
    tide_release(y);
    tide_tensor *rect = randn(2, (int64_t[]){6, 9});
    out = NULL;
    CHECK(g && tide_graph_run(g, &rect, 1, &out) < 0 &&
              strstr(tide_last_error(), "input 0 dim 0 is 6 and input 0 dim 1 is 9; both "
                                        "were 6 at capture"),
          "6x9 after 6x6: %s", tide_last_error());
    tide_release(rect), tide_release(sq);
    tide_graph_free(g);
    /* a dynamic row length past what a fused row keeps in scratch (a guard of the plan) */
    uint32_t cols = 2;
    tide_tensor *r8 = randn(2, (int64_t[]){2, 8});
    CHECK(tide_jit_begin_dynamic(&r8, 1, &cols) == 0, "begin: %s", tide_last_error());
    y = tide_softmax(r8, -1);
    g = tide_jit_end(&y, y ? 1 : 0);
    tide_release(y);
    tide_tensor *wide = randn(2, (int64_t[]){2, 40000});
    out = NULL;
    CHECK(g && tide_graph_run(g, &wide, 1, &out) < 0 && strstr(tide_last_error(), "32768"),
          "rows of 40000: %s", tide_last_error());
    tide_release(wide), tide_release(r8);
    tide_graph_free(g);
    for (int i = 0; i < 2; i++)
        tide_release(in[i]);
}

/* ---- graphs a dynamic capture refuses, naming the op ---------------------------------------- */

static tide_tensor *split_batch(tide_tensor *x)
{
    tide_tensor *f = tide_reshape(x, 1, (int64_t[]){-1});
    tide_tensor *r = f ? tide_reshape(f, 2, (int64_t[]){4, -1}) : NULL;
    tide_release(f);
    return r;
}
static tide_tensor *merge_batch(tide_tensor *x)
{
    return tide_reshape(x, 2, (int64_t[]){-1, 40}); /* [5, 8] -> [1, 40]: the -1 became 1 */
}
static tide_tensor *mean_batch(tide_tensor *x) { return tide_mean(x, (int[]){0}, 1, false); }
static tide_tensor *mse_batch(tide_tensor *x)
{
    return tide_mse_loss(x, x, TIDE_REDUCTION_MEAN);
}
static tide_tensor *literal_zeros(tide_tensor *x) /* zeros of the captured batch, 5 */
{
    tide_tensor *z = tide_zeros(2, (int64_t[]){5, 8}, TIDE_FLOAT32), *y = tide_add(x, z);
    tide_release(z);
    return y;
}
static tide_tensor *slice_batch(tide_tensor *x) { return tide_slice(x, 0, 0, 3, 1); }
static tide_tensor *pad_batch(tide_tensor *x)
{
    return tide_pad(x, (int64_t[]){1, 1}, 2, 0.0);
}

static void test_refusals(void)
{
    struct {
        const char *name;
        tide_tensor *(*fn)(tide_tensor *);
        const char *err;
    } cases[] = {
        {"reshape splitting the batch", split_batch, "splits a dynamic size"},
        {"reshape merging the batch beside a 1", merge_batch, "beside a dim of size 1"},
        {"mean over the batch", mean_batch, "reads the number 5, which is what sum"},
        {"mse_loss (a mean) over the batch", mse_batch, "which is what sum"},
        {"zeros of a literal batch", literal_zeros, "add (node 2) cannot follow"},
        {"slice of the batch", slice_batch, "bounds along a dynamic dim"},
        {"pad", pad_batch, "no shape rule"},
    };
    uint32_t mask = 1;
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        tide_tensor *x = randn(2, (int64_t[]){5, 8});
        CHECK(tide_jit_begin_dynamic(&x, 1, &mask) == 0, "begin: %s", tide_last_error());
        tide_tensor *y = cases[k].fn(x);
        tide_graph *g = tide_jit_end(&y, y ? 1 : 0);
        CHECK(!g && strstr(tide_last_error(), cases[k].err), "%s: %s", cases[k].name,
              tide_last_error());
        tide_graph_free(g);
        tide_release(y), tide_release(x);
    }
    tide_tensor *one = randn(2, (int64_t[]){1, 8});
    CHECK(tide_jit_begin_dynamic(&one, 1, &mask) < 0 && strstr(tide_last_error(), "at least 2"),
          "dynamic dim of size 1: %s", tide_last_error());
    uint32_t beyond = 4;
    CHECK(tide_jit_begin_dynamic(&one, 1, &beyond) < 0 && strstr(tide_last_error(), "beyond"),
          "mask beyond the rank: %s", tide_last_error());
    tide_release(one);
}

int main(void)
{
    ref_seed(20);
    tide_tensor *probe = tide_from_data_on("vulkan", &(float){1}, 0, NULL, TIDE_FLOAT32);
    /* under valgrind lavapipe compiles shaders ~50x slower: the CPU covers it there */
    bool vulkan = probe != NULL && !RUNNING_ON_VALGRIND;
    tide_release(probe);
    if (!vulkan)
        printf("no vulkan device (or valgrind): dynamic captures checked on the cpu only\n");
    const char *devs[] = {"cpu", "vulkan"};
    for (int k = 0; k < (vulkan ? 2 : 1); k++) {
        dev = devs[k];
        test_mlp();
        test_reductions();
    }
    dev = "cpu";
    test_static_counts();
    test_cnn();
    test_relations();
    test_refusals();
    tide_jit_cache_clear();
    return test_summary("test_jit_capture_dynamic");
}
