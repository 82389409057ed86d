/*
 * test_jit_symbolic.c — symbolic dims (jit/README.md): a traced function met with many sizes
 * compiles a static plan, then one symbolic plan that serves every later size; its values equal
 * eager's bitwise on the CPU and on the reference device (the jit's promise there), and on
 * Vulkan (its shaders read the sizes from their parameters) within 1e-5 relative (a fused
 * reduction of up to 64 terms may sum in another order: 64·2^-24 < 4e-6). Guards: a size 1 and a
 * size 0 specialize, two sizes that were equal and no longer are, a transposed input and a new
 * dtype each recompile (never reuse a plan wrongly). Also the function API: dims made dynamic,
 * declared dynamic dims, dynamic = false, the recompile reasons.
 */
#include <stdio.h>
#include <stdlib.h>

#include "test_ref.h"
#include "test_util.h"
#include "tide.h"

typedef tide_tensor *(*prog_fn)(tide_tensor *const *in);

/* softmax(tanh(x) * x) over the last dim, plus 1: tiles, then a row group */
static tide_tensor *prog_softmax(tide_tensor *const *in)
{
    tide_tensor *t = tide_tanh(in[0]), *m = tide_mul(t, in[0]), *s = tide_softmax(m, -1);
    tide_tensor *one = tide_scalar(1.0, tide_get_dtype(in[0]));
    tide_tensor *r = tide_add(s, one);
    tide_release(t), tide_release(m), tide_release(s), tide_release(one);
    return r;
}

/* relu(x @ w + b), then its rows' sums: a matmul's epilogue, then a reduction */
static tide_tensor *prog_linear(tide_tensor *const *in)
{
    tide_tensor *p = tide_matmul(in[0], in[1]), *a = tide_add(p, in[2]), *r = tide_relu(a);
    int last = -1;
    tide_tensor *s = tide_sum(r, &last, 1, true), *o = tide_sub(r, s);
    tide_release(p), tide_release(a), tide_release(r), tide_release(s);
    return o;
}

static tide_tensor *randn_on(const char *dev, tide_dtype dt, int ndim, const int64_t *shape)
{
    int64_t n = ref_numel(ndim, shape);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = 4 * ref_uniform() - 2;
    tide_tensor *h = ref_from_doubles(v, ndim, shape, dt);
    free(v);
    tide_tensor *t = strcmp(dev, "cpu") == 0 ? tide_retain(h) : tide_to(h, dev);
    tide_release(h);
    return t;
}

/* prog on in under f (traced when admitted), its result on the CPU */
static tide_tensor *run_jit(tide_jit_function *f, prog_fn prog, tide_tensor **in, int n)
{
    tide_tensor *r;
    if (tide_jit_function_admit(f, in, n, 0, NULL) == 1) {
        if (tide_jit_trace_begin_function(f, NULL, NULL) < 0)
            return NULL;
        r = prog(in);
        if (tide_jit_trace_end() < 0) {
            tide_release(r);
            return NULL;
        }
    } else {
        r = prog(in);
    }
    tide_tensor *h = r ? tide_to(r, "cpu") : NULL;
    tide_release(r);
    return h;
}


/* jit against eager on the same device: bitwise, or within 1e-5 on Vulkan (header comment) */
static void check_against_eager(const char *what, const char *dev, tide_jit_function *f,
                                prog_fn prog, tide_tensor **in, int n)
{
    tide_tensor *got = run_jit(f, prog, in, n);
    tide_tensor *e = prog(in);
    tide_tensor *want = e ? tide_to(e, "cpu") : NULL;
    bool bitwise;
    double d = ref_compare(got, want, &bitwise);
    d = d < 0 ? INFINITY : d;
    bool vulkan = strncmp(dev, "vulkan", 6) == 0;
    CHECK(got && want && (bitwise || (vulkan && d <= 1e-5)), "%s on %s: jit differs from eager "
          "(max rel %g)%s%s", what, dev, d, got ? "" : ": ", got ? "" : tide_last_error());
    tide_release(got), tide_release(want), tide_release(e);
}

static int64_t compiles(tide_jit_function *f) { return tide_jit_function_stats(f)->compiles; }

/* Many batch sizes and row lengths through prog_softmax: two compiles (static, then symbolic)
 * where the device has runtime sizes, one per shape elsewhere; bitwise equal to eager. */
static void test_sizes(const char *dev)
{
    tide_jit_cache_clear();
    tide_jit_function *f = tide_jit_function_new(8);
    static const int64_t sizes[][2] = {{5, 7}, {9, 13}, {33, 3}, {2, 40}, {17, 17}, {64, 100}};
    int nsizes = (int)(sizeof sizes / sizeof sizes[0]);
    for (int k = 0; k < nsizes; k++) {
        tide_tensor *x = randn_on(dev, TIDE_FLOAT32, 2, sizes[k]);
        char what[64];
        snprintf(what, sizeof what, "softmax chain [%lld, %lld]", (long long)sizes[k][0],
                 (long long)sizes[k][1]);
        check_against_eager(what, dev, f, prog_softmax, &x, 1);
        tide_release(x);
    }
    CHECK(compiles(f) == 2, "%s: %lld compiles for %d shapes", dev, (long long)compiles(f),
          nsizes);
    CHECK(!tide_jit_function_is_eager(f), "%s: no fallback", dev);
    tide_jit_function_free(f);
}

/* Batch sizes through a matmul with its epilogue and a row reduction. */
static void test_linear(const char *dev)
{
    tide_jit_cache_clear();
    tide_jit_function *f = tide_jit_function_new(8);
    int64_t ws[2] = {24, 40}, bs = 40;
    tide_tensor *w = randn_on(dev, TIDE_FLOAT32, 2, ws), *b = randn_on(dev, TIDE_FLOAT32, 1, &bs);
    static const int64_t batches[] = {8, 3, 100, 31, 64, 2, 257};
    int n = (int)(sizeof batches / sizeof batches[0]);
    for (int k = 0; k < n; k++) {
        int64_t xs[2] = {batches[k], 24};
        tide_tensor *in[3] = {randn_on(dev, TIDE_FLOAT32, 2, xs), w, b};
        char what[64];
        snprintf(what, sizeof what, "linear batch %lld", (long long)batches[k]);
        check_against_eager(what, dev, f, prog_linear, in, 3);
        tide_release(in[0]);
    }
    CHECK(compiles(f) == 2, "%s: linear: %lld compiles", dev, (long long)compiles(f));
    tide_release(w), tide_release(b);
    tide_jit_function_free(f);
}

/* relu(g @ w) * 0.5: a product eager cuts into blocks of rows on two threads or more (blocks of
 * 16k rows), fused with its epilogue block by block */
static tide_tensor *prog_blocks(tide_tensor *const *in)
{
    tide_tensor *p = tide_matmul(in[0], in[1]), *r = tide_relu(p), *o = tide_mul_scalar(r, 0.5);
    tide_release(p), tide_release(r);
    return o;
}

/* A product of 17 or 33 rows is cut by eager into blocks of 16 or 32 and one row: that row is
 * a gemm call in eager (the whole product's cut), so the epilogue's block must be one too (a
 * product of one row alone is a gemv, which sums in another order). Static and symbolic plans. */
static void test_one_row_blocks(bool dynamic)
{
    tide_jit_cache_clear();
    tide_jit_function *f = tide_jit_function_new(8);
    tide_jit_function_set_static(f, !dynamic);
    int64_t ws[2] = {256, 512};
    tide_tensor *w = randn_on("cpu", TIDE_FLOAT32, 2, ws);
    static const int64_t rows[] = {17, 33, 49, 16, 65};
    for (int k = 0; k < 5; k++) {
        int64_t gs[2] = {rows[k], 256};
        tide_tensor *in[2] = {randn_on("cpu", TIDE_FLOAT32, 2, gs), w};
        char what[64];
        snprintf(what, sizeof what, "%s epilogue over %lld rows", dynamic ? "symbolic" : "static",
                 (long long)rows[k]);
        check_against_eager(what, "cpu", f, prog_blocks, in, 2);
        tide_release(in[0]);
    }
    tide_release(w);
    tide_jit_function_free(f);
}

/* One call of prog_softmax on x of the given shape (and dtype), checked against eager; the
 * compiles it made. */
static int64_t call_shape(const char *dev, tide_jit_function *f, int64_t b, int64_t t,
                          tide_dtype dt, bool transposed)
{
    int64_t before = compiles(f);
    int64_t shape[2] = {transposed ? t : b, transposed ? b : t};
    tide_tensor *base = randn_on(dev, dt, 2, shape);
    tide_tensor *x = transposed ? tide_transpose(base, 0, 1) : tide_retain(base);
    char what[96];
    snprintf(what, sizeof what, "guards: [%lld, %lld] %s%s", (long long)b, (long long)t,
             tide_dtype_name(dt), transposed ? " transposed" : "");
    check_against_eager(what, dev, f, prog_softmax, &x, 1);
    tide_release(x), tide_release(base);
    return compiles(f) - before;
}

/* Each guard recompiles (or hits) as designed, with right values. */
static void test_guards(const char *dev)
{
    tide_jit_cache_clear();
    tide_jit_function *f = tide_jit_function_new(8);
    CHECK(call_shape(dev, f, 6, 6, TIDE_FLOAT32, false) == 1, "%s: first call compiles", dev);
    CHECK(call_shape(dev, f, 8, 8, TIDE_FLOAT32, false) == 1, "%s: new sizes: symbolic", dev);
    CHECK(call_shape(dev, f, 10, 10, TIDE_FLOAT32, false) == 0, "%s: equal sizes hit", dev);
    /* the sizes were equal in the plan: now they differ, so a plan where they are two */
    CHECK(call_shape(dev, f, 8, 9, TIDE_FLOAT32, false) == 1, "%s: equal sizes split", dev);
    CHECK(call_shape(dev, f, 12, 5, TIDE_FLOAT32, false) == 0, "%s: split sizes hit", dev);
    CHECK(call_shape(dev, f, 1, 5, TIDE_FLOAT32, false) == 1, "%s: size 1 specializes", dev);
    CHECK(call_shape(dev, f, 1, 5, TIDE_FLOAT32, false) == 0, "%s: size 1 again hits", dev);
    CHECK(call_shape(dev, f, 0, 5, TIDE_FLOAT32, false) <= 1, "%s: size 0", dev);
    CHECK(call_shape(dev, f, 7, 11, TIDE_FLOAT32, true) == 1, "%s: a transposed input", dev);
    CHECK(call_shape(dev, f, 9, 4, TIDE_FLOAT32, true) == 0, "%s: transposed again hits", dev);
    CHECK(call_shape(dev, f, 7, 11, TIDE_FLOAT32, false) == 0, "%s: contiguous hits", dev);
    if (strcmp(dev, "vulkan") != 0) /* lavapipe's shaders here are float32 */
        CHECK(call_shape(dev, f, 7, 11, TIDE_FLOAT64, false) == 1, "%s: a new dtype", dev);
    CHECK(!tide_jit_function_is_eager(f), "%s: no fallback", dev);
    tide_jit_function_free(f);
}

/* The function API: dims made dynamic and the reasons said; declared dims; dynamic = false. */
static void test_function_api(void)
{
    tide_jit_cache_clear();
    tide_jit_function *f = tide_jit_function_new(8);
    CHECK(call_shape("cpu", f, 4, 6, TIDE_FLOAT32, false) == 1, "auto: first");
    CHECK(call_shape("cpu", f, 5, 6, TIDE_FLOAT32, false) == 1, "auto: symbolic");
    int args[4], dims[4];
    CHECK(tide_jit_function_dynamic_dims(f, args, dims, 4) == 1 && args[0] == 0 && dims[0] == 0,
          "argument 0 dim 0 is dynamic");
    const char *r = tide_jit_function_recompile_reason(f, 0);
    CHECK(r && strstr(r, "argument 1 dim 1 was 4, now 5: dim made symbolic"), "reason: %s",
          r ? r : "none");
    CHECK(tide_jit_function_recompile_reason(f, 5) == NULL, "no sixth reason");
    CHECK(tide_jit_function_set_dynamic(f, 0, 1) < 0 && strstr(tide_last_error(), "before the "
          "first call"), "declared after the first call: %s", tide_last_error());
    tide_jit_function_free(f);

    tide_jit_cache_clear();
    tide_jit_function *d = tide_jit_function_new(8);
    CHECK(tide_jit_function_set_dynamic(d, 16, 1) < 0 && strstr(tide_last_error(), "argument 16"),
          "argument 16: %s", tide_last_error());
    CHECK(tide_jit_function_set_dynamic(d, 0, 1u << 9) < 0 && strstr(tide_last_error(), "mask"),
          "dim 9: %s", tide_last_error());
    CHECK(tide_jit_function_set_dynamic(d, 0, 1) == 0, "%s", tide_last_error());
    CHECK(call_shape("cpu", d, 4, 6, TIDE_FLOAT32, false) == 1, "declared: one compile");
    CHECK(call_shape("cpu", d, 9, 6, TIDE_FLOAT32, false) == 0, "declared: symbolic at once");
    tide_jit_function_free(d);

    tide_jit_cache_clear();
    tide_jit_function *s = tide_jit_function_new(8);
    tide_jit_function_set_static(s, true);
    CHECK(call_shape("cpu", s, 4, 6, TIDE_FLOAT32, false) == 1, "static: first");
    CHECK(call_shape("cpu", s, 5, 6, TIDE_FLOAT32, false) == 1, "static: second");
    CHECK(call_shape("cpu", s, 6, 6, TIDE_FLOAT32, false) == 1, "static: a plan per shape");
    CHECK(tide_jit_function_dynamic_dims(s, args, dims, 4) == 0, "static: no dynamic dims");
    tide_jit_function_free(s);
}

int main(void)
{
    ref_seed(11);
    test_function_api();
    test_one_row_blocks(false);
    test_one_row_blocks(true);
    const char *devs[] = {"cpu", "ref", "vulkan"};
    tide_tensor *probe = tide_from_data_on("vulkan", &(float){1}, 0, NULL, TIDE_FLOAT32);
    /* under valgrind lavapipe compiles shaders ~50x slower: the CPU and ref cover it there */
    bool vulkan = probe != NULL && !RUNNING_ON_VALGRIND;
    tide_release(probe);
    if (!vulkan)
        printf("no vulkan device (or valgrind): symbolic dims checked on cpu and ref only\n");
    for (int k = 0; k < (vulkan ? 3 : 2); k++) {
        test_sizes(devs[k]);
        test_linear(devs[k]);
        test_guards(devs[k]);
    }
    tide_jit_cache_clear();
    return test_summary("test_jit_symbolic");
}
