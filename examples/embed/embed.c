/*
 * embed.c — tide inside a C application: classify Fashion-MNIST with a model trained in Lua,
 * with no Lua in the process.
 *
 * examples/fashion_mnist.lua --export PATH writes the trained model's forward pass (eval mode,
 * logits) as one graph file: its ops, its weights, a dynamic batch dim, and the accuracy the
 * script measured. This program loads it (tide_graph_load: compiled, the weights mapped from
 * the file) and classifies the real test set three ways — batches of 1000 (what the script
 * measures), of 64 and of 1 — printing the accuracy and the latency per image of each, and the
 * peak memory (RSS). The accuracy at batch 1000 must equal the one the script recorded on the
 * same test images (its --test-limit N is recorded as test_samples; pass --limit N here); the
 * exit status says whether it does. Whatever model the script exported (MLP or CNN) runs: the
 * graph's declared input says which layout the images take.
 *
 *   embed [--data DIR] [--limit N] [--threads N] [--device NAME] GRAPH
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

/* The graph takes images as [B, 784] or [B, 1, 28, 28] float32 and gives [B, 10] logits: which
 * layout (its rank), or -1 after a message naming what does not fit. */
static int image_rank(const tide_graph *g)
{
    tide_dtype dt;
    int ndim = 0, ondim = 0;
    int64_t s[8], o[8];
    if (tide_graph_num_inputs(g) != 1 || tide_graph_num_outputs(g) != 1 ||
        tide_graph_input_info(g, 0, &dt, &ndim, s, 8) < 0 ||
        tide_graph_output_info(g, 0, NULL, &ondim, o, 8) < 0) {
        fprintf(stderr, "embed: the graph has %d inputs and %d outputs; one input (images) and "
                        "one output (logits) expected\n", tide_graph_num_inputs(g),
                tide_graph_num_outputs(g));
        return -1;
    }
    bool flat = ndim == 2 && s[1] == 784;
    bool image = ndim == 4 && s[1] == 1 && s[2] == 28 && s[3] == 28;
    if (dt != TIDE_FLOAT32 || (!flat && !image) || ondim != 2 || o[1] != 10) {
        fprintf(stderr, "embed: the graph's input '%s' is %s with %d dims (dim 1 of size %lld) "
                        "and its output has %d dims; fashion_mnist.lua's models take float32 "
                        "[B, 784] or [B, 1, 28, 28] and give [B, 10]\n",
                tide_graph_input_name(g, 0), tide_dtype_name(dt), ndim,
                (long long)(ndim > 1 ? s[1] : -1), ondim);
        return -1;
    }
    return ndim;
}

typedef struct run_result {
    int64_t correct;
    double seconds; /* the graph's runs and argmax only */
} run_result;

/* Classifies images [0, n) of x in batches of `batch` through the graph. preds (n entries)
 * receives the predicted classes. 0 or -1. */
static int classify(tide_graph *g, tide_tensor *x, const uint8_t *labels, int64_t n,
                    int64_t batch, int64_t *preds, run_result *r)
{
    r->correct = 0;
    r->seconds = 0;
    for (int64_t i = 0; i < n; i += batch) {
        int64_t end = i + batch < n ? i + batch : n;
        tide_tensor *xb = tide_slice(x, 0, i, end, 1); /* a view: no copy */
        if (!xb)
            return fail("slice");
        double t0 = now();
        tide_tensor *logits = NULL;
        if (tide_graph_run(g, &xb, 1, &logits) < 0)
            logits = NULL;
        tide_tensor *pred = logits ? tide_argmax(logits, 1, false) : NULL;
        r->seconds += now() - t0;
        tide_release(logits);
        tide_release(xb);
        tide_tensor *host = pred ? tide_to(pred, "cpu") : NULL;
        tide_release(pred);
        if (!host || tide_to_buffer(host, preds + i, (size_t)(end - i) * sizeof *preds) < 0) {
            tide_release(host);
            return fail("running the graph");
        }
        tide_release(host);
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

/* uint8 [N, 28, 28] -> float32 normalized as the Lua script does, [N, 784] or [N, 1, 28, 28],
 * on device. */
static tide_tensor *prepare(const tide_tensor *images, int rank, const char *device)
{
    /* Each step releases its input at once: at most two float copies of the set are alive. */
    tide_tensor *t = tide_cast(images, TIDE_FLOAT32), *next;
    next = t ? tide_div_scalar(t, 255) : NULL;
    tide_release(t);
    t = next ? tide_sub_scalar(next, MEAN) : NULL;
    tide_release(next);
    next = t ? tide_div_scalar(t, STD) : NULL;
    tide_release(t);
    int64_t shape[4] = {tide_size(images, 0), 1, 28, 28}, flat[2] = {shape[0], 784};
    t = next ? (rank == 4 ? tide_reshape(next, 4, shape) : tide_reshape(next, 2, flat)) : NULL;
    tide_release(next);
    next = t ? tide_to(t, device) : NULL;
    tide_release(t);
    return next;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: embed [--data DIR] [--limit N] [--threads N] [--device NAME] GRAPH\n"
               "  GRAPH        a graph file written by examples/fashion_mnist.lua --export\n"
               "  --data DIR   the Fashion-MNIST folder (default "
               "/usr/share/datasets/fashion-mnist)\n"
               "  --limit N    classify the first N test images only (default all 10000); the\n"
               "               accuracy is checked when N is the script's --test-limit\n"
               "  --threads N  threads for the kernels (default TIDE_NUM_THREADS or the cores)\n"
               "  --device D   where the graph runs (default cpu; vulkan)\n");
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

typedef struct options {
    const char *data, *graph, *device;
    int64_t limit;
} options;

/* 0, 1 (--help: done), or 2 (a usage error, said). */
static int parse(int argc, char **argv, options *o)
{
    *o = (options){"/usr/share/datasets/fashion-mnist", NULL, "cpu", -1};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 1;
        } else if (!strcmp(a, "--data") && i + 1 < argc) {
            o->data = argv[++i];
        } else if (!strcmp(a, "--device") && i + 1 < argc) {
            o->device = argv[++i];
        } else if (!strcmp(a, "--limit") && i + 1 < argc) {
            if ((o->limit = positive_arg("--limit", argv[++i])) < 0)
                return 2;
        } else if (!strcmp(a, "--threads") && i + 1 < argc) {
            int64_t threads = positive_arg("--threads", argv[++i]);
            if (threads < 0 || threads > 4096) {
                fprintf(stderr, "embed: --threads must be 1 to 4096, got '%s'\n", argv[i]);
                return 2;
            }
            tide_set_num_threads((int)threads);
        } else if (a[0] != '-' && !o->graph) {
            o->graph = a;
        } else {
            fprintf(stderr, "embed: unexpected argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!o->graph) {
        usage(stderr);
        return 2;
    }
    return 0;
}

/* The accuracy at batch 1000 against the script's record: 0 when they agree or cannot be
 * compared (other images), 1 when they differ. */
static int compare_record(const tide_graph *g, int64_t correct, int64_t n, int64_t all)
{
    const char *stored = tide_graph_metadata(g, "accuracy");
    const char *stored_n = tide_graph_metadata(g, "test_samples");
    int64_t script_n = stored_n ? atoll(stored_n) : all;
    char mine[32], why[96] = " (same)";
    snprintf(mine, sizeof mine, "%.4f", (double)correct / (double)n);
    int compared = stored && n == script_n;
    if (!stored)
        snprintf(why, sizeof why, " (not compared)");
    else if (!compared)
        snprintf(why, sizeof why, " on %lld images (not compared: --limit %lld compares)",
                 (long long)script_n, (long long)script_n);
    else if (strcmp(stored, mine))
        snprintf(why, sizeof why, " (DIFFERS)");
    printf("accuracy (batch 1000): %.2f %%; the Lua script recorded %s%s\n",
           100.0 * (double)correct / (double)n, stored ? stored : "nothing", why);
    return compared && strcmp(stored, mine) ? 1 : 0;
}

int main(int argc, char **argv)
{
    options o;
    int parsed = parse(argc, argv, &o);
    if (parsed)
        return parsed == 1 ? 0 : 2;
    int status = 1;
    tide_tensor *images = NULL, *labels_t = NULL, *x = NULL;
    uint8_t *labels = NULL;
    int64_t *preds = NULL;
    double t0 = now();
    tide_graph *g = tide_graph_load(o.graph, o.device);
    double load_ms = 1e3 * (now() - t0);
    int rank = g ? image_rank(g) : -1;
    if (rank < 0) {
        if (!g)
            fail("loading the graph");
        goto done;
    }
    char path[4096];
    snprintf(path, sizeof path, "%s/t10k-images-idx3-ubyte.gz", o.data);
    images = tide_load_idx(path);
    snprintf(path, sizeof path, "%s/t10k-labels-idx1-ubyte.gz", o.data);
    labels_t = images ? tide_load_idx(path) : NULL;
    if (!labels_t) {
        fail("reading the test set");
        goto done;
    }
    int64_t all = tide_size(images, 0), n = all;
    if (tide_size(labels_t, 0) != n || tide_get_dtype(labels_t) != TIDE_UINT8) {
        fprintf(stderr, "embed: %lld images but %lld labels (uint8 expected)\n", (long long)n,
                (long long)tide_size(labels_t, 0));
        goto done;
    }
    if (o.limit > 0 && o.limit < n)
        n = o.limit;
    labels = malloc((size_t)all);
    preds = malloc((size_t)n * sizeof *preds);
    x = prepare(images, rank, o.device);
    if (!labels || !preds || !x || tide_to_buffer(labels_t, labels, (size_t)all) < 0) {
        fail("preparing the test set");
        goto done;
    }
    long rss_loaded = peak_rss_kib(); /* graph, test set and its float copy */
    const char *model = tide_graph_metadata(g, "model");
    printf("model: %s, graph %s (loaded in %.1f ms); %lld test images; %d threads; %s\n",
           model ? model : "unnamed", o.graph, load_ms, (long long)n, tide_get_num_threads(),
           o.device);
    static const int64_t batches[3] = {1000, 64, 1};
    run_result res[3];
    for (int k = 0; k < 3; k++)
        if (classify(g, x, labels, n, batches[k], preds, &res[k]) < 0)
            goto done;
    status = compare_record(g, res[0].correct, n, all);
    for (int k = 0; k < 3; k++)
        printf("batch%lld: accuracy %.2f %%, %.2f us per image\n", (long long)batches[k],
               100.0 * (double)res[k].correct / (double)n, 1e6 * res[k].seconds / (double)n);
    printf("latency_batch1: %.1f us\n", 1e6 * res[2].seconds / (double)n);
    printf("latency_batch64: %.2f us per image\n", 1e6 * res[1].seconds / (double)n);
    printf("peak_rss_after_loading: %.1f MiB\n", (double)rss_loaded / 1024.0);
    printf("peak_rss: %.1f MiB\n", (double)peak_rss_kib() / 1024.0);

done:
    tide_graph_free(g);
    tide_release(x);
    tide_release(labels_t);
    tide_release(images);
    free(labels);
    free(preds);
    /* Everything tide holds itself: valgrind --leak-check=full sees nothing left. */
    tide_jit_cache_clear();
    tide_shutdown();
    return status;
}
