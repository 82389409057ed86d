/*
 * embed.c — tide inside a C application: classify Fashion-MNIST with a model trained in Lua.
 *
 * examples/fashion_mnist.lua trains a model and saves its state_dict as safetensors. This program
 * loads that checkpoint, rebuilds the model's forward pass with the C API (tide_linear,
 * tide_relu, tide_conv2d, tide_batch_norm, ...), captures it as a compiled graph whose batch
 * dim is dynamic (tide_jit_begin_dynamic/tide_jit_end: one graph for every batch of 2 or more)
 * and classifies the real test set four ways — eager and compiled, one image at a time and 64
 * at a time — printing the accuracy and the latency per image of each, and the peak memory
 * (RSS).
 * The accuracy at batch 1000 (what the Lua script measures) must equal the one the script stored
 * in the checkpoint's metadata, on the same test images (the script's --test-limit N is recorded
 * as test_samples; pass --limit N here); the exit status says whether it does. Models: the MLP
 * and the CNN (conv, BatchNorm2d with its running statistics, ReLU, max pool) fashion_mnist.lua
 * builds; anything else is refused with a message naming what does not fit.
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

/* The CNN's conv layers: conv 3x3 pad 1 (with bias), BatchNorm2d, ReLU, max pool 2. */
typedef struct conv_block {
    tide_tensor *w, *b;                /* conv [out, in, 3, 3], [out] */
    tide_tensor *scale, *shift;        /* BatchNorm2d weight and bias [out] */
    tide_tensor *mean, *var;           /* its running statistics (eval mode uses them) */
} conv_block;

typedef struct model {
    int cnn; /* 0: MLP 784-512-256-10; 1: (conv-BN-ReLU-pool) x 2, linear-ReLU, linear */
    conv_block conv[2];
    int nlinear;
    tide_tensor *w[3], *b[3]; /* the linear layers, in order */
} model;

/* nn.BatchNorm2d's default eps, which fashion_mnist.lua keeps (the checkpoint does not store it) */
#define BN_EPS 1e-5

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

/* "<layer>.<field>", borrowed from the dict (valid until tide_tensor_dict_free); it must have
 * ndim dims, and dim 0 of size dim0 unless that is -1. NULL (and a message) otherwise. */
static tide_tensor *param(const tide_tensor_dict *d, int layer, const char *field, int ndim,
                          int64_t dim0)
{
    char name[32];
    snprintf(name, sizeof name, "%d.%s", layer, field);
    tide_tensor *t = tide_tensor_dict_find(d, name);
    if (!t) {
        fprintf(stderr, "embed: the checkpoint has no tensor '%s' (is it one that "
                        "fashion_mnist.lua wrote?): %s\n", name, tide_last_error());
        return NULL;
    }
    if (tide_ndim(t) != ndim || (dim0 >= 0 && tide_size(t, 0) != dim0)) {
        fprintf(stderr, "embed: tensor '%s' has %d dims (size %lld in dim 0); expected %d dims",
                name, tide_ndim(t), (long long)tide_size(t, 0), ndim);
        if (dim0 >= 0)
            fprintf(stderr, " (size %lld in dim 0)", (long long)dim0);
        fprintf(stderr, "\n");
        return NULL;
    }
    return t;
}

/* A linear layer "<layer>.weight" [out, in] with in == in_features (-1: any), "<layer>.bias". */
static int linear_load(model *m, const tide_tensor_dict *d, int layer, int64_t in_features)
{
    int k = m->nlinear++;
    m->w[k] = param(d, layer, "weight", 2, -1);
    m->b[k] = m->w[k] ? param(d, layer, "bias", 1, tide_size(m->w[k], 0)) : NULL;
    if (!m->b[k])
        return -1;
    if (in_features >= 0 && tide_size(m->w[k], 1) != in_features) {
        fprintf(stderr, "embed: layer %d (linear) takes %lld inputs; the layer before gives "
                        "%lld\n", layer, (long long)tide_size(m->w[k], 1), (long long)in_features);
        return -1;
    }
    return 0;
}

/* Conv2d at index `layer` and its BatchNorm2d at layer + 1; in_channels as the layer before. */
static int conv_load(conv_block *c, const tide_tensor_dict *d, int layer, int64_t in_channels)
{
    c->w = param(d, layer, "weight", 4, -1);
    int64_t out = c->w ? tide_size(c->w, 0) : -1;
    if (c->w && (tide_size(c->w, 1) != in_channels || tide_size(c->w, 2) != 3 ||
                 tide_size(c->w, 3) != 3)) {
        fprintf(stderr, "embed: layer %d (conv) should be [C, %lld, 3, 3]\n", layer,
                (long long)in_channels);
        return -1;
    }
    c->b = c->w ? param(d, layer, "bias", 1, out) : NULL;
    c->scale = c->b ? param(d, layer + 1, "weight", 1, out) : NULL;
    c->shift = c->scale ? param(d, layer + 1, "bias", 1, out) : NULL;
    c->mean = c->shift ? param(d, layer + 1, "running_mean", 1, out) : NULL;
    c->var = c->mean ? param(d, layer + 1, "running_var", 1, out) : NULL;
    return c->var ? 0 : -1;
}

/* state_dict names are those of tide.nn.Sequential, "<1-based layer index>.<field>", for the
 * models fashion_mnist.lua builds (see its make_model):
 *   mlp: 1 Linear, 2 ReLU, 3 Linear, 4 ReLU, 5 Linear
 *   cnn: 1 Conv2d, 2 BatchNorm2d, 3 ReLU, 4 MaxPool2d, 5 Conv2d, 6 BatchNorm2d, 7 ReLU,
 *        8 MaxPool2d, 9 Flatten, 10 Linear, 11 ReLU, 12 Linear
 * The widths come from the tensors' shapes; each layer must fit the one before. */
static int model_load(model *m, const tide_tensor_dict *d)
{
    const char *kind = tide_tensor_dict_metadata_find(d, "model");
    memset(m, 0, sizeof *m);
    if (kind && strcmp(kind, "mlp") != 0 && strcmp(kind, "cnn") != 0) {
        fprintf(stderr, "embed: the checkpoint's model is '%s'; this program runs "
                        "fashion_mnist.lua's mlp and cnn\n", kind);
        return -1;
    }
    m->cnn = kind && strcmp(kind, "cnn") == 0;
    if (!m->cnn) {
        if (linear_load(m, d, 1, 784) < 0 || linear_load(m, d, 3, tide_size(m->w[0], 0)) < 0 ||
            linear_load(m, d, 5, tide_size(m->w[1], 0)) < 0)
            return -1;
    } else {
        if (conv_load(&m->conv[0], d, 1, 1) < 0 ||
            conv_load(&m->conv[1], d, 5, tide_size(m->conv[0].w, 0)) < 0)
            return -1;
        int64_t flat = tide_size(m->conv[1].w, 0) * 7 * 7; /* 28x28 pooled twice: 7x7 */
        if (linear_load(m, d, 10, flat) < 0 || linear_load(m, d, 12, tide_size(m->w[0], 0)) < 0)
            return -1;
    }
    if (tide_size(m->w[m->nlinear - 1], 0) != 10) {
        fprintf(stderr, "embed: the last layer has %lld outputs; 10 classes expected\n",
                (long long)tide_size(m->w[m->nlinear - 1], 0));
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

/* One conv block of the CNN on x [B, C, H, W]: conv 3x3 pad 1, BatchNorm2d in eval mode (the
 * running statistics), ReLU, max pool 2x2; [B, C', H/2, W/2], a new reference, or NULL. */
static tide_tensor *conv_block_forward(const conv_block *c, const tide_tensor *x)
{
    const int one[2] = {1, 1}, pad[2] = {1, 1}, two[2] = {2, 2}, nopad[2] = {0, 0};
    tide_tensor *conv = tide_conv2d(x, c->w, c->b, one, pad, one, 1);
    tide_tensor *bn = conv ? tide_batch_norm(conv, c->mean, c->var, c->scale, c->shift, false,
                                             0.1, BN_EPS)
                           : NULL;
    tide_tensor *act = bn ? relu_of(bn) : NULL;
    tide_tensor *pooled = act ? tide_max_pool2d(act, two, two, nopad, NULL) : NULL;
    tide_release(conv);
    tide_release(act);
    return pooled;
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
    tide_tensor *p1 = conv_block_forward(&m->conv[0], x);
    tide_tensor *p2 = p1 ? conv_block_forward(&m->conv[1], p1) : NULL;
    int64_t flat[2] = {tide_size(x, 0), tide_size(m->w[0], 1)}; /* nn.Flatten */
    tide_tensor *f = p2 ? tide_reshape(p2, 2, flat) : NULL;
    tide_tensor *h = f ? relu_of(tide_linear(f, m->w[0], m->b[0])) : NULL;
    tide_tensor *out = h ? tide_linear(h, m->w[1], m->b[1]) : NULL;
    tide_tensor *all[] = {p1, p2, f, h};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tide_release(all[i]);
    return out;
}

/* A compiled forward pass: one graph serves every batch of 2 or more images (its batch dim is
 * dynamic: the 64s and the last partial batch), another batches of 1 (a size of 1 changes what
 * broadcasting means, so it has a graph of its own). batch is -1 for the dynamic graph. */
typedef struct graph_slot {
    int64_t batch;
    tide_graph *g;
} graph_slot;

static tide_graph *graph_for(graph_slot *slots, int nslots, const model *m, tide_tensor *x)
{
    int64_t b = tide_size(x, 0) >= 2 ? -1 : tide_size(x, 0);
    for (int i = 0; i < nslots; i++)
        if (slots[i].g && slots[i].batch == b)
            return slots[i].g;
    for (int i = 0; i < nslots; i++) {
        if (slots[i].g)
            continue;
        /* Capture: the ops below are recorded, not run; the weights are captured by reference,
         * x is the graph's input, replaced on every tide_graph_run; dim 0 of x (bit 0 of the
         * mask) is dynamic. */
        uint32_t batch_dim = b < 0 ? 1u : 0u;
        if (tide_jit_begin_dynamic(&x, 1, &batch_dim) < 0)
            return fail("tide_jit_begin_dynamic"), NULL;
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
               "  --limit N   classify the first N test images only (default all 10000); the\n"
               "              accuracy is checked when N is the script's --test-limit\n"
               "  --threads N threads for the kernels (default TIDE_NUM_THREADS or the cores)\n");
}

/* A positive integer option value, or -1 after a message naming the option. */
static int64_t positive_arg(const char *option, const char *text)
{
    char *end;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end || v < 1) {
        fprintf(stderr, "embed: %s must be a positive integer, got '%s'\n", option, text);
        return -1;
    }
    return (int64_t)v;
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
            if ((limit = positive_arg("--limit", argv[++i])) < 0)
                return 2;
        } else if (!strcmp(a, "--threads") && i + 1 < argc) {
            int64_t threads = positive_arg("--threads", argv[++i]);
            if (threads < 0 || threads > 4096) {
                fprintf(stderr, "embed: --threads must be 1 to 4096, got '%s'\n", argv[i]);
                return 2;
            }
            tide_set_num_threads((int)threads);
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
    graph_slot slots[2] = {{0, NULL}, {0, NULL}};
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
    /* The script measured its accuracy on its first test_samples test images (all of them when
     * the checkpoint does not say): compared only on the same images. */
    const char *stored = tide_tensor_dict_metadata_find(d, "accuracy");
    const char *stored_n = tide_tensor_dict_metadata_find(d, "test_samples");
    int64_t script_n = stored_n ? atoll(stored_n) : tide_size(images, 0);
    char mine[32], why[96] = " (same)";
    snprintf(mine, sizeof mine, "%.4f", (double)ref.correct / (double)n);
    int compared = stored && n == script_n;
    if (!stored)
        snprintf(why, sizeof why, " (not compared)");
    else if (!compared)
        snprintf(why, sizeof why, " on %lld images (not compared: --limit %lld compares)",
                 (long long)script_n, (long long)script_n);
    else if (strcmp(stored, mine))
        snprintf(why, sizeof why, " (DIFFERS)");
    printf("accuracy (eager, batch 1000): %.2f %%; the Lua script recorded %s%s\n",
           100.0 * (double)ref.correct / (double)n, stored ? stored : "nothing", why);
    status = compared && strcmp(stored, mine) ? 1 : 0;

    static const char *const mode_names[4] = {"eager_batch1", "compiled_batch1", "eager_batch64",
                                              "compiled_batch64"};
    run_result res[4];
    for (int k = 0; k < 4; k++) {
        int64_t batch = k < 2 ? 1 : 64;
        int compiled = k & 1;
        if (classify(&m, x, labels, n, batch, compiled, slots, 2, preds[k], &res[k]) < 0) {
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
    for (int i = 0; i < 2; i++)
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
