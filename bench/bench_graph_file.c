/*
 * bench_graph_file.c — what a graph file costs and saves (docs/export.md), on fashion_mnist.lua's
 * MLP (784-512-256-10, 1.9 MiB of weights):
 *   load: tide_graph_load of the exported graph (map, check, replay, compile) against what an
 *         application did before graph files: tide_load_safetensors of the checkpoint, then its
 *         forward rebuilt with the C API and captured (tide_jit_begin_dynamic ... tide_jit_end);
 *   run:  a batch of 64 through each graph: the same plan, so the ratio should be 1.
 * Medians over alternating slices (these VMs drift within a minute); the jit cache is cleared
 * before each load so both compile. Usage: bench_graph_file [slices] (default 15).
 */
#include <stdint.h>
#include <unistd.h>

#include "bench_util.h"
#include "tide.h"

#define MAX_SLICES 64
static const int64_t widths[4] = {784, 512, 256, 10};
static char ckpt[] = "/tmp/tide_bench_graph_XXXXXX", ck_path[64], graph_path[64];

static tide_tensor *forward(tide_tensor *const *w, const tide_tensor *x)
{
    tide_tensor *h = tide_retain((tide_tensor *)x);
    for (int l = 0; l < 3; l++) {
        tide_tensor *y = tide_linear(h, w[2 * l], w[2 * l + 1]);
        tide_release(h);
        h = l < 2 ? tide_relu(y) : tide_retain(y);
        tide_release(y);
    }
    return h;
}

/* The checkpoint's way: load the tensors, capture the forward with a dynamic batch. */
static tide_graph *capture_from_checkpoint(void)
{
    tide_tensor_dict *d = tide_load_safetensors(ck_path);
    static const char *names[6] = {"1.weight", "1.bias", "3.weight", "3.bias", "5.weight",
                                   "5.bias"};
    tide_tensor *w[6];
    for (int i = 0; i < 6; i++)
        w[i] = tide_tensor_dict_find(d, names[i]);
    int64_t shape[2] = {2, 784};
    tide_tensor *x = tide_zeros(2, shape, TIDE_FLOAT32);
    uint32_t mask = 1;
    tide_jit_begin_dynamic(&x, 1, &mask);
    tide_tensor *y = forward(w, x);
    tide_graph *g = tide_jit_end(&y, 1);
    tide_release(y);
    tide_release(x);
    tide_tensor_dict_free(d); /* the graph holds the weights it captured */
    return g;
}

static int write_files(void)
{
    tide_manual_seed(3);
    tide_tensor *w[6];
    const char *names[6] = {"1.weight", "1.bias", "3.weight", "3.bias", "5.weight", "5.bias"};
    for (int l = 0; l < 3; l++) {
        int64_t ws[2] = {widths[l + 1], widths[l]}, bs[1] = {widths[l + 1]};
        w[2 * l] = tide_randn(2, ws, TIDE_FLOAT32);
        w[2 * l + 1] = tide_randn(1, bs, TIDE_FLOAT32);
    }
    int rc = tide_save_safetensors(ck_path, names, w, 6, NULL, 0);
    for (int i = 0; i < 6; i++)
        tide_release(w[i]);
    tide_graph *g = rc == 0 ? capture_from_checkpoint() : NULL;
    rc = g ? tide_graph_save(g, graph_path, NULL) : -1;
    tide_graph_free(g);
    return rc;
}

static double time_run(tide_graph *g, tide_tensor *x, int runs)
{
    double t0 = now_seconds();
    for (int r = 0; r < runs; r++) {
        tide_tensor *y = NULL;
        tide_graph_run(g, &x, 1, &y);
        tide_release(y);
    }
    return (now_seconds() - t0) / runs;
}

int main(int argc, char **argv)
{
    int slices = argc > 1 ? atoi(argv[1]) : 15;
    slices = slices < 3 ? 3 : slices > MAX_SLICES ? MAX_SLICES : slices;
    if (!mkdtemp(ckpt))
        return 1;
    snprintf(ck_path, sizeof ck_path, "%s/mlp.safetensors", ckpt);
    snprintf(graph_path, sizeof graph_path, "%s/mlp.tgraph", ckpt);
    if (write_files() < 0) {
        fprintf(stderr, "bench_graph_file: %s\n", tide_last_error());
        return 1;
    }
    print_machine();
    printf("threads: %d\n", tide_get_num_threads());
    double load_file[MAX_SLICES], load_ckpt[MAX_SLICES], run_file[MAX_SLICES],
        run_ckpt[MAX_SLICES];
    int64_t xs[2] = {64, 784};
    tide_tensor *x = tide_randn(2, xs, TIDE_FLOAT32);
    for (int s = 0; s < slices; s++) {
        tide_jit_cache_clear();
        double t0 = now_seconds();
        tide_graph *a = tide_graph_load(graph_path, NULL);
        load_file[s] = now_seconds() - t0;
        tide_jit_cache_clear();
        t0 = now_seconds();
        tide_graph *b = capture_from_checkpoint();
        load_ckpt[s] = now_seconds() - t0;
        if (!a || !b) {
            fprintf(stderr, "bench_graph_file: %s\n", tide_last_error());
            return 1;
        }
        run_file[s] = time_run(a, x, 20);
        run_ckpt[s] = time_run(b, x, 20);
        tide_graph_free(a);
        tide_graph_free(b);
    }
    double lf = median_of(load_file, slices), lc = median_of(load_ckpt, slices);
    double rf = median_of(run_file, slices), rc = median_of(run_ckpt, slices);
    printf("load_graph_file: %.2f ms\n", 1e3 * lf);
    printf("load_checkpoint_and_capture: %.2f ms\n", 1e3 * lc);
    printf("load_ratio_file_over_checkpoint: %.2f x\n", lf / lc);
    printf("run_batch64_graph_file: %.1f us\n", 1e6 * rf);
    printf("run_batch64_captured: %.1f us\n", 1e6 * rc);
    printf("run_ratio_file_over_captured: %.2f x\n", rf / rc);
    tide_release(x);
    unlink(ck_path);
    unlink(graph_path);
    rmdir(ckpt);
    return 0;
}
