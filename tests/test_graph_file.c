/*
 * test_graph_file.c — graph files (docs/export.md) from C: a captured graph saved with
 * tide_graph_save and loaded with tide_graph_load gives, on new inputs, the bits of the graph
 * that was saved and of eager ops (the loaded graph replays the same nodes into the same plan:
 * jit/graph_desc.c), at other sizes of its dynamic dims too; its weights are views of the
 * mapped file; on Vulkan (lavapipe) it runs there within the op's tolerance; an imported ONNX
 * model's graph saves and loads; damaged, truncated and newer files and wrong calls are errors
 * naming the function, the file and the fault.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../jit/trace.h"
#include "test_util.h"

static char dir[] = "/tmp/tide_graph_file_XXXXXX";
static char path[300];

/* A deterministic [r, c] tensor. */
static tide_tensor *pattern(int64_t r, int64_t c, float scale, int seed)
{
    int64_t shape[2] = {r, c};
    tide_tensor *t = tide_empty(2, shape, TIDE_FLOAT32);
    float *p = tide_mutable_data_ptr(t);
    for (int64_t i = 0; i < r * c; i++)
        p[i] = scale * (float)(((i * 7919 + seed * 104729) % 2001) - 1000) / 1000.0f;
    return t;
}

/* The model: log_softmax(relu(x @ w1 + b1) @ w2 * 0.5); w1, b1, w2 are captured (weights). */
static tide_tensor *w1, *b1, *w2;

static tide_tensor *forward(tide_tensor *x)
{
    tide_tensor *h = tide_matmul(x, w1), *hb = tide_add(h, b1), *r = tide_relu(hb);
    tide_tensor *o = tide_matmul(r, w2), *s = tide_mul_scalar(o, 0.5);
    tide_tensor *y = tide_log_softmax(s, -1);
    tide_release(h);
    tide_release(hb);
    tide_release(r);
    tide_release(o);
    tide_release(s);
    return y;
}

static bool same_bits(const tide_tensor *a, const tide_tensor *b)
{
    if (!a || !b || tide_ndim(a) != tide_ndim(b) || tide_numel(a) != tide_numel(b))
        return false;
    tide_tensor *ca = tide_contiguous(a), *cb = tide_contiguous(b);
    bool same = memcmp(tide_data_ptr(ca), tide_data_ptr(cb), (size_t)tide_numel(a) * 4) == 0;
    tide_release(ca);
    tide_release(cb);
    return same;
}

static tide_graph *capture(int64_t batch, uint32_t mask)
{
    tide_tensor *x = pattern(batch, 12, 1.0f, 1);
    tide_graph *g = NULL;
    if (tide_jit_begin_dynamic(&x, 1, &mask) == 0) {
        tide_tensor *y = forward(x);
        g = tide_jit_end(&y, 1);
        tide_release(y);
    }
    tide_release(x);
    return g;
}

static void test_round_trip(void)
{
    tide_graph *g = capture(6, 0);
    CHECK(g, "capture: %s", tide_last_error());
    const char *names[1] = {"pixels"}, *outs[1] = {"logp"};
    const char *meta[4] = {"model", "mlp", "accuracy", "0.8512"};
    tide_graph_save_options o = {names, outs, 2, meta};
    CHECK(tide_graph_save(g, path, &o) == 0, "save: %s", tide_last_error());
    tide_graph *l = tide_graph_load(path, NULL);
    CHECK(l, "load: %s", tide_last_error());
    if (!g || !l)
        return;
    CHECK(!strcmp(tide_graph_input_name(l, 0), "pixels") &&
              !strcmp(tide_graph_output_name(l, 0), "logp"), "names");
    CHECK(tide_graph_num_metadata(l) == 2 && !strcmp(tide_graph_metadata_key(l, 1), "accuracy") &&
              !strcmp(tide_graph_metadata(l, "accuracy"), "0.8512") &&
              tide_graph_metadata(l, "epochs") == NULL, "metadata");
    int64_t shape[8];
    int ndim;
    tide_dtype dt;
    CHECK(tide_graph_output_info(l, 0, &dt, &ndim, shape, 8) == 0 && ndim == 2 &&
              shape[0] == 6 && shape[1] == 5 && dt == TIDE_FLOAT32, "output info");
    /* the captured weights are views of the mapped file: borrowed storage */
    int mapped = 0;
    for (int e = l->ninputs; e < l->nexterns; e++)
        mapped += l->captured[e]->storage->borrowed;
    CHECK(mapped == l->nexterns - l->ninputs && mapped >= 3, "%d of %d weights mapped", mapped,
          l->nexterns - l->ninputs);
    for (int k = 0; k < 3; k++) {
        tide_tensor *x = pattern(6, 12, 2.0f, 10 + k), *a = NULL, *b = NULL;
        tide_tensor *want = forward(x);
        CHECK(tide_graph_run(g, &x, 1, &a) == 0 && tide_graph_run(l, &x, 1, &b) == 0, "runs: %s",
              tide_last_error());
        CHECK(same_bits(a, b), "loaded graph vs saved graph, run %d", k);
        CHECK(same_bits(want, b), "loaded graph vs eager, run %d", k);
        tide_release(x);
        /* a static graph's declared sizes hold: another batch is an error naming the dim */
        tide_tensor *x2 = pattern(k + 1, 12, 2.0f, 50 + k), *b2 = NULL;
        CHECK(tide_graph_run(l, &x2, 1, &b2) < 0 && strstr(tide_last_error(), "input 0") &&
                  strstr(tide_last_error(), "dim 0 is not dynamic"), "static graph at batch "
              "%d: %s", k + 1, tide_last_error());
        tide_release(x2);
        tide_release(a);
        tide_release(b);
        tide_release(want);
    }
    tide_graph_free(g);
    tide_graph_free(l);
}

static void test_dynamic(void)
{
    tide_graph *g = capture(4, 1);
    CHECK(g && tide_graph_save(g, path, NULL) == 0, "dynamic capture and save: %s",
          tide_last_error());
    tide_graph_free(g);
    tide_graph *l = tide_graph_load(path, NULL);
    CHECK(l, "load: %s", tide_last_error());
    if (!l)
        return;
    int64_t shape[8];
    int ndim;
    CHECK(tide_graph_input_info(l, 0, NULL, &ndim, shape, 8) == 0 && shape[0] == -1 &&
              shape[1] == 12, "the dynamic dim is declared free");
    /* 1 is no size of the dynamic plan (broadcasting): a plan of its own, from the file */
    int64_t sizes[] = {2, 3, 31, 128, 1};
    for (int k = 0; k < 5; k++) {
        tide_tensor *x = pattern(sizes[k], 12, 1.5f, 20 + k), *b = NULL;
        tide_tensor *want = forward(x);
        CHECK(tide_graph_run(l, &x, 1, &b) == 0, "batch %lld: %s", (long long)sizes[k],
              tide_last_error());
        CHECK(same_bits(want, b), "batch %lld: loaded dynamic graph vs eager",
              (long long)sizes[k]);
        tide_release(x);
        tide_release(b);
        tide_release(want);
    }
    tide_graph_free(l);
}

static void test_vulkan(void)
{
    tide_tensor *probe = tide_zeros_on("vulkan", 0, NULL, TIDE_FLOAT32);
    if (!probe) {
        printf("test_graph_file: Vulkan skipped: %s\n", tide_last_error());
        tide_clear_error();
        return;
    }
    tide_release(probe);
    tide_graph *g = capture(6, 0);
    CHECK(g && tide_graph_save(g, path, NULL) == 0, "save: %s", tide_last_error());
    tide_graph_free(g);
    tide_graph *l = tide_graph_load(path, "vulkan");
    CHECK(l, "load on vulkan: %s", tide_last_error());
    tide_tensor *x = pattern(6, 12, 1.0f, 40), *xv = tide_to(x, "vulkan"), *y = NULL;
    tide_tensor *want = forward(x);
    CHECK(l && tide_graph_run(l, &xv, 1, &y) == 0, "run on vulkan: %s", tide_last_error());
    if (y) {
        CHECK(!strcmp(tide_device_name(y), "vulkan"), "the result is on vulkan");
        tide_tensor *yc = tide_to(y, "cpu");
        const float *a = tide_data_ptr(yc), *b = tide_data_ptr(want);
        /* sums of 12 and 16 products in another order, then log_softmax: 2(n+3)u per sum
         * (jit/README.md) carried through exp and log, well under 1e-5 here */
        float worst = 0;
        for (int64_t i = 0; i < tide_numel(want); i++)
            worst = fabsf(a[i] - b[i]) > worst ? fabsf(a[i] - b[i]) : worst;
        CHECK(worst <= 1e-5f, "vulkan vs cpu: %g", (double)worst);
        tide_release(yc);
    }
    tide_release(x);
    tide_release(xv);
    tide_release(y);
    tide_release(want);
    tide_graph_free(l);
}

static void test_onnx(void)
{
    const char *model = "/usr/include/onnx/backend/test/data/node/test_add/model.onnx";
    if (access(model, R_OK) != 0)
        return;
    tide_graph *g = tide_onnx_load(model, NULL);
    CHECK(g && tide_graph_save(g, path, NULL) == 0, "onnx graph saved: %s", tide_last_error());
    tide_graph_free(g);
    tide_graph *l = tide_graph_load(path, NULL);
    CHECK(l && !strcmp(tide_graph_input_name(l, 1), "y") &&
              !strcmp(tide_graph_output_name(l, 0), "sum"), "onnx names kept: %s",
          tide_last_error());
    int64_t s[3] = {3, 4, 5};
    tide_tensor *x = tide_full(3, s, 1.25, TIDE_FLOAT32), *y = tide_full(3, s, 2.0, TIDE_FLOAT32);
    tide_tensor *in[2] = {x, y}, *out = NULL;
    bool ok = l && tide_graph_run(l, in, 2, &out) == 0 && tide_numel(out) == 60;
    for (int64_t i = 0; ok && i < 60; i++)
        ok = ((const float *)tide_data_ptr(out))[i] == 3.25f;
    CHECK(ok, "onnx add loaded from a graph file: %s", tide_last_error());
    tide_release(x);
    tide_release(y);
    tide_release(out);
    tide_graph_free(l);
}

/* Writes n bytes of data to path. */
static void put(const char *p, const void *data, size_t n)
{
    FILE *f = fopen(p, "wb");
    fwrite(data, 1, n, f);
    fclose(f);
}

static void expect_error(const char *p, const char *what)
{
    tide_graph *l = tide_graph_load(p, NULL);
    CHECK(!l && strstr(tide_last_error(), "load_graph") && strstr(tide_last_error(), p) &&
              strstr(tide_last_error(), what), "expected \"%s\", got \"%s\"", what,
          tide_last_error());
    tide_graph_free(l);
}

static void test_errors(void)
{
    tide_graph *g = capture(6, 0);
    CHECK(g && tide_graph_save(g, path, NULL) == 0, "save: %s", tide_last_error());
    FILE *f = fopen(path, "rb");
    static unsigned char buf[1 << 16];
    size_t n = fread(buf, 1, sizeof buf, f);
    fclose(f);
    char bad[320];
    snprintf(bad, sizeof bad, "%s.bad", path);
    put(bad, buf, n - 3);
    expect_error(bad, "truncated");
    buf[n - 1] ^= 1;
    put(bad, buf, n);
    expect_error(bad, "checksum");
    buf[n - 1] ^= 1;
    buf[8] = 7;
    put(bad, buf, n);
    expect_error(bad, "format version 7 is newer");
    CHECK(tide_last_error_code() == TIDE_ERR_UNSUPPORTED, "a newer format is unsupported");
    put(bad, "TIDEGRPX", 8);
    expect_error(bad, "too short");
    expect_error("/nonexistent/g.tgraph", "cannot open");
    CHECK(tide_graph_load(NULL, NULL) == NULL && strstr(tide_last_error(), "path is NULL"),
          "NULL path: %s", tide_last_error());
    CHECK(tide_graph_load(path, "nowhere") == NULL && strstr(tide_last_error(), "nowhere"),
          "unknown device: %s", tide_last_error());
    CHECK(tide_graph_save(NULL, path, NULL) < 0 && strstr(tide_last_error(), "graph is NULL"),
          "NULL graph: %s", tide_last_error());
    CHECK(tide_graph_save(g, "/nonexistent/dir/g", NULL) < 0 &&
              strstr(tide_last_error(), "save_graph"), "unwritable: %s", tide_last_error());
    unlink(bad);
    tide_graph_free(g);
}

uint32_t td_gf_crc(const void *p, size_t n); /* io/graph_file.h */
uint32_t td_gf_crc_table(const void *p, size_t n);

/* The file's checksum is CRC-32C: its check value, and the instruction and the table agree on
 * every length and alignment. */
static void test_crc(void)
{
    CHECK(td_gf_crc("123456789", 9) == 0xE3069283u && td_gf_crc_table("123456789", 9) ==
              0xE3069283u, "CRC-32C check value: %08x", td_gf_crc("123456789", 9));
    static unsigned char buf[4099];
    for (size_t i = 0; i < sizeof buf; i++)
        buf[i] = (unsigned char)(i * 131 + 7);
    int bad = 0;
    for (size_t off = 0; off < 9; off++)
        for (size_t n = 0; n + off <= sizeof buf; n += 97)
            bad += td_gf_crc(buf + off, n) != td_gf_crc_table(buf + off, n);
    CHECK(bad == 0, "%d lengths where the two CRC-32C paths differ", bad);
}

int main(void)
{
    test_crc();
    if (!mkdtemp(dir))
        return 1;
    snprintf(path, sizeof path, "%s/g.tgraph", dir);
    w1 = pattern(12, 16, 0.5f, 2);
    b1 = pattern(1, 16, 0.1f, 3);
    w2 = pattern(16, 5, 0.5f, 4);
    test_round_trip();
    test_dynamic();
    test_vulkan();
    test_onnx();
    test_errors();
    tide_release(w1);
    tide_release(b1);
    tide_release(w2);
    unlink(path);
    rmdir(dir);
    return test_summary("test_graph_file");
}
