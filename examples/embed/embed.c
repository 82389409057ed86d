/*
 * embed.c — tide inside a C application: classify Fashion-MNIST with a model trained in Lua.
 *
 * examples/fashion_mnist.lua trains a model and saves its state_dict as safetensors. This program
 * loads that checkpoint, rebuilds the model's forward pass with the C API (tide_linear, tide_relu,
 * tide_conv2d, ...), captures it once as a compiled graph (tide_jit_begin/tide_jit_end) and
 * classifies the real test set four ways — eager and compiled, one image at a time and 64 at a
 * time — printing the accuracy and the latency per image of each, and the peak memory (RSS).
 * The accuracy at batch 1000 (what the Lua script measures) must equal the one the script stored
 * in the checkpoint's metadata; the exit status says whether it does.
 *
 *   embed [--data DIR] [--limit N] [--threads N] CHECKPOINT
 *
 * Build: in tide's tree (build/examples/embed/embed), or against an installed tide:
 *   cc embed.c $(pkg-config --cflags --libs tide) -lm          (see docs/c-api.md)
 *   cmake -S examples/embed -B b -DCMAKE_PREFIX_PATH=<prefix>    (find_package(tide))
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include <tide.h>

#define MEAN 0.2860 /* the training set's, as fashion_mnist.lua normalizes */
#define STD 0.3530

typedef struct model {
    int cnn; /* 0: MLP 784-512-256-10; 1: conv 32 - pool - conv 64 - pool - linear 128 - 10 */
    tide_tensor *w[4], *b[4];
} model;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static int fail(const char *what)
{
    fprintf(stderr, "embed: %s: %s\n", what, tide_last_error());
    return -1;
}

/* Borrowed from the dict (valid until tide_tensor_dict_free). */
static tide_tensor *param(const tide_tensor_dict *d, const char *name)
{
    tide_tensor *t = tide_tensor_dict_find(d, name);
    if (!t)
        fprintf(stderr, "embed: the checkpoint has no tensor '%s': %s\n", name, tide_last_error());
    return t;
}

/* state_dict names are those of tide.nn.Sequential: "<1-based layer index>.weight". */
static int model_load(model *m, const tide_tensor_dict *d)
{
    const char *kind = tide_tensor_dict_metadata_find(d, "model");
    m->cnn = kind && strcmp(kind, "cnn") == 0;
    static const char *const mlp[] = {"1", "3", "5"}, *const cnn[] = {"1", "4", "8", "10"};
    int n = m->cnn ? 4 : 3;
    for (int i = 0; i < n; i++) {
        char name[32];
        snprintf(name, sizeof name, "%s.weight", m->cnn ? cnn[i] : mlp[i]);
        m->w[i] = param(d, name);
        snprintf(name, sizeof name, "%s.bias", m->cnn ? cnn[i] : mlp[i]);
        m->b[i] = param(d, name);
        if (!m->w[i] || !m->b[i])
            return -1;
    }
    return 0;
}

/* relu(f(x)), releasing x's intermediate; NULL on error. */
static tide_tensor *relu_of(tide_tensor *t)
{
    tide_tensor *r = tide_relu(t);
    tide_release(t);
    return r;
}

/* logits for x ([B, 784] or [B, 1, 28, 28]); a new reference, or NULL. */
static tide_tensor *forward(const model *m, const tide_tensor *x)
{
    if (!m->cnn) {
        tide_tensor *h1 = relu_of(tide_linear(x, m->w[0], m->b[0]));
        tide_tensor *h2 = h1 ? relu_of(tide_linear(h1, m->w[1], m->b[1])) : NULL;
        tide_tensor *out = h2 ? tide_linear(h2, m->w[2], m->b[2]) : NULL;
        tide_release(h1);
        tide_release(h2);
        return out;
    }
    const int one[2] = {1, 1}, pad[2] = {1, 1}, two[2] = {2, 2}, nopad[2] = {0, 0};
    tide_tensor *c1 = relu_of(tide_conv2d(x, m->w[0], m->b[0], one, pad, one, 1));
    tide_tensor *p1 = c1 ? tide_max_pool2d(c1, two, two, nopad, NULL) : NULL;
    tide_tensor *c2 = p1 ? relu_of(tide_conv2d(p1, m->w[1], m->b[1], one, pad, one, 1)) : NULL;
    tide_tensor *p2 = c2 ? tide_max_pool2d(c2, two, two, nopad, NULL) : NULL;
    int64_t flat[2] = {tide_size(x, 0), 64 * 7 * 7};
    tide_tensor *f = p2 ? tide_reshape(p2, 2, flat) : NULL;
    tide_tensor *h = f ? relu_of(tide_linear(f, m->w[2], m->b[2])) : NULL;
    tide_tensor *out = h ? tide_linear(h, m->w[3], m->b[3]) : NULL;
    tide_tensor *all[] = {c1, p1, c2, p2, f, h};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tide_release(all[i]);
    return out;
}

/* A compiled forward pass for one batch size (inputs must have that shape). */
typedef struct graph_slot {
    int64_t batch;
    tide_graph *g;
} graph_slot;

static tide_graph *graph_for(graph_slot *slots, int nslots, const model *m, tide_tensor *x)
{
    int64_t b = tide_size(x, 0);
    for (int i = 0; i < nslots; i++)
        if (slots[i].g && slots[i].batch == b)
            return slots[i].g;
    for (int i = 0; i < nslots; i++) {
        if (slots[i].g)
            continue;
        /* Capture: the ops below are recorded, not run; the weights are captured by reference,
         * x is the graph's input, replaced on every tide_graph_run. */
        if (tide_jit_begin(&x, 1) < 0)
            return fail("tide_jit_begin"), NULL;
        tide_tensor *logits = forward(m, x);
        tide_graph *g = tide_jit_end(&logits, logits ? 1 : 0);
        tide_release(logits);
        if (!g)
            return fail("capturing the forward pass"), NULL;
        slots[i].batch = b;
        slots[i].g = g;
        return g;
    }
    fprintf(stderr, "embed: no free graph slot\n");
    return NULL;
}

typedef struct run_result {
    int64_t correct;
    double seconds; /* forward + argmax only */
} run_result;

/* Classifies images [0, n) of x in batches of `batch`, eagerly or through compiled graphs.
 * preds (n entries) receives the predicted classes. 0 or -1. */
static int classify(const model *m, tide_tensor *x, const uint8_t *labels, int64_t n,
                    int64_t batch, int compiled, graph_slot *slots, int nslots, int64_t *preds,
                    run_result *r)
{
    r->correct = 0;
    r->seconds = 0;
    for (int64_t i = 0; i < n; i += batch) {
        int64_t end = i + batch < n ? i + batch : n;
        tide_tensor *xb = tide_slice(x, 0, i, end, 1); /* a view: no copy */
        if (!xb)
            return fail("slice");
        tide_graph *g = compiled ? graph_for(slots, nslots, m, xb) : NULL;
        if (compiled && !g) {
            tide_release(xb);
            return -1;
        }
        double t0 = now();
        tide_tensor *logits = NULL;
        if (compiled) {
            if (tide_graph_run(g, &xb, 1, &logits) < 0)
                logits = NULL;
        } else {
            logits = forward(m, xb);
        }
        tide_tensor *pred = logits ? tide_argmax(logits, 1, false) : NULL;
        r->seconds += now() - t0;
        tide_release(logits);
        tide_release(xb);
        if (!pred || tide_to_buffer(pred, preds + i, (size_t)(end - i) * sizeof *preds) < 0) {
            tide_release(pred);
            return fail(compiled ? "compiled forward" : "eager forward");
        }
        tide_release(pred);
        for (int64_t k = i; k < end; k++)
            r->correct += preds[k] == labels[k];
    }
    return 0;
}

static long peak_rss_kib(void)
{
    struct rusage ru;
    return getrusage(RUSAGE_SELF, &ru) == 0 ? ru.ru_maxrss : -1;
}

/* uint8 [N, 28, 28] -> float32 normalized as the Lua script does, [N, 784] or [N, 1, 28, 28]. */
static tide_tensor *prepare(const tide_tensor *images, int cnn)
{
    /* Each step releases its input at once: at most two float copies of the set are alive. */
    tide_tensor *t = tide_cast(images, TIDE_FLOAT32), *next;
    next = t ? tide_div_scalar(t, 255) : NULL;
    tide_release(t);
    t = next ? tide_sub_scalar(next, MEAN) : NULL;
    tide_release(next);
    next = t ? tide_div_scalar(t, STD) : NULL;
    tide_release(t);
    int64_t mlp_shape[2] = {tide_size(images, 0), 784}, cnn_shape[4] = {mlp_shape[0], 1, 28, 28};
    t = next ? (cnn ? tide_reshape(next, 4, cnn_shape) : tide_reshape(next, 2, mlp_shape)) : NULL;
    tide_release(next);
    return t;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: embed [--data DIR] [--limit N] [--threads N] CHECKPOINT\n"
               "  CHECKPOINT  a safetensors file written by examples/fashion_mnist.lua\n"
               "  --data DIR  the Fashion-MNIST folder (default "
               "/usr/share/datasets/fashion-mnist)\n"
               "  --limit N   classify the first N test images only (default all 10000)\n"
               "  --threads N threads for the kernels (default TIDE_NUM_THREADS or the cores)\n");
}

int main(int argc, char **argv)
{
    const char *data = "/usr/share/datasets/fashion-mnist", *ckpt = NULL;
    int64_t limit = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 0;
        } else if (!strcmp(a, "--data") && i + 1 < argc) {
            data = argv[++i];
        } else if (!strcmp(a, "--limit") && i + 1 < argc) {
            limit = atoll(argv[++i]);
        } else if (!strcmp(a, "--threads") && i + 1 < argc) {
            tide_set_num_threads(atoi(argv[++i]));
        } else if (a[0] != '-' && !ckpt) {
            ckpt = a;
        } else {
            fprintf(stderr, "embed: unexpected argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!ckpt) {
        usage(stderr);
        return 2;
    }

    int status = 1;
    tide_tensor_dict *d = NULL;
    tide_tensor *images = NULL, *labels_t = NULL, *x = NULL;
    uint8_t *labels = NULL;
    int64_t *preds[4] = {NULL};
    graph_slot slots[3] = {{0, NULL}, {0, NULL}, {0, NULL}};
    model m;

    d = tide_load_safetensors(ckpt);
    if (!d || model_load(&m, d) < 0) {
        if (!d)
            fail("loading the checkpoint");
        goto done;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/t10k-images-idx3-ubyte.gz", data);
    images = tide_load_idx(path);
    snprintf(path, sizeof path, "%s/t10k-labels-idx1-ubyte.gz", data);
    labels_t = images ? tide_load_idx(path) : NULL;
    if (!labels_t) {
        fail("reading the test set");
        goto done;
    }
    int64_t n = tide_size(images, 0);
    if (tide_size(labels_t, 0) != n || tide_get_dtype(labels_t) != TIDE_UINT8) {
        fprintf(stderr, "embed: %lld images but %lld labels (uint8 expected, got %s)\n",
                (long long)n, (long long)tide_size(labels_t, 0),
                tide_dtype_name(tide_get_dtype(labels_t)));
        goto done;
    }
    if (limit > 0 && limit < n)
        n = limit;
    labels = malloc((size_t)tide_size(labels_t, 0));
    for (int k = 0; k < 4; k++)
        preds[k] = malloc((size_t)n * sizeof(int64_t));
    x = prepare(images, m.cnn);
    if (!labels || !preds[0] || !preds[1] || !preds[2] || !preds[3] || !x ||
        tide_to_buffer(labels_t, labels, (size_t)tide_size(labels_t, 0)) < 0) {
        fail("preparing the test set");
        goto done;
    }
    long rss_loaded = peak_rss_kib(); /* checkpoint, test set and its float copy */
    printf("model: %s, checkpoint %s; %lld test images; %d threads\n", m.cnn ? "cnn" : "mlp", ckpt,
           (long long)n, tide_get_num_threads());

    /* The accuracy fashion_mnist.lua measures (eager, batches of 1000) against its record. */
    run_result ref;
    if (classify(&m, x, labels, n, 1000, 0, NULL, 0, preds[0], &ref) < 0)
        goto done;
    const char *stored = tide_tensor_dict_metadata_find(d, "accuracy");
    char mine[32];
    snprintf(mine, sizeof mine, "%.4f", (double)ref.correct / (double)n);
    int full = n == tide_size(images, 0);
    printf("accuracy (eager, batch 1000): %.2f %%; the Lua script recorded %s%s\n",
           100.0 * (double)ref.correct / (double)n, stored ? stored : "nothing",
           !stored || !full ? " (not compared)" : strcmp(stored, mine) ? " (DIFFERS)" : " (same)");
    status = stored && full && strcmp(stored, mine) ? 1 : 0;

    static const char *const mode_names[4] = {"eager_batch1", "compiled_batch1", "eager_batch64",
                                              "compiled_batch64"};
    run_result res[4];
    for (int k = 0; k < 4; k++) {
        int64_t batch = k < 2 ? 1 : 64;
        int compiled = k & 1;
        if (classify(&m, x, labels, n, batch, compiled, slots, 3, preds[k], &res[k]) < 0) {
            status = 1;
            goto done;
        }
    }
    for (int k = 0; k < 4; k++) {
        int64_t differ = 0;
        for (int64_t i = 0; i < n; i++)
            differ += preds[k][i] != preds[0][i];
        printf("%s: accuracy %.2f %%, %.1f us per image (%lld of %lld predictions differ from "
               "batch 1000)\n",
               mode_names[k], 100.0 * (double)res[k].correct / (double)n,
               1e6 * res[k].seconds / (double)n, (long long)differ, (long long)n);
    }
    printf("latency_batch1_eager: %.1f us\n", 1e6 * res[0].seconds / (double)n);
    printf("latency_batch1_compiled: %.1f us\n", 1e6 * res[1].seconds / (double)n);
    printf("latency_batch1_ratio_eager_over_compiled: %.2f x\n", res[0].seconds / res[1].seconds);
    printf("latency_batch64_eager: %.2f us per image\n", 1e6 * res[2].seconds / (double)n);
    printf("latency_batch64_compiled: %.2f us per image\n", 1e6 * res[3].seconds / (double)n);
    printf("latency_batch64_ratio_eager_over_compiled: %.2f x\n", res[2].seconds / res[3].seconds);
    printf("peak_rss_after_loading: %.1f MiB\n", (double)rss_loaded / 1024.0);
    printf("peak_rss: %.1f MiB\n", (double)peak_rss_kib() / 1024.0);

done:
    for (int i = 0; i < 3; i++)
        tide_graph_free(slots[i].g);
    tide_release(x);
    tide_release(labels_t);
    tide_release(images);
    tide_tensor_dict_free(d);
    free(labels);
    for (int k = 0; k < 4; k++)
        free(preds[k]);
    /* Everything tide holds itself: valgrind --leak-check=full sees nothing left. */
    tide_jit_cache_clear();
    tide_shutdown();
    return status;
}
