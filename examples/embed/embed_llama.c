/*
 * embed_llama.c — greedy generation from a Llama checkpoint (llama2.c's format) in a C program,
 * with tide's public C API only. llama_load.c reads the checkpoint; llama_step.c builds one
 * token's decoding step. This program captures that step once as a compiled graph whose inputs
 * are the token and its position (int64 [1] tensors; the KV cache is captured by reference and
 * written in place on every run), so one graph serves every position with no recompile. It
 * streams the greedy tokens of the compiled step, then generates again with the step run
 * eagerly, and reports the latency per token of both (stderr). The exit status is 1 when the
 * two disagree.
 *
 *   embed_llama CHECKPOINT [--steps N] [--prompt-ids 1,2,3] [--ids] [--threads N]
 *
 * Token ids are the checkpoint's own, 0-based (BOS is 1), as llama2.c and examples/llama.lua
 * print them. Built beside embed (examples/embed/CMakeLists.txt).
 */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <tide.h>

#include "llama_model.h"

#define MAX_PROMPT 4096
#define BOS 1

typedef struct options {
    const char *checkpoint, *prompt_ids;
    int64_t steps; /* -1: to seq_len */
    int ids_only;
} options;

/* One generation: the tokens it chose and each step's seconds. */
typedef struct run {
    int64_t *tokens; /* steps entries */
    double *seconds; /* one per step call: prompt length + steps - 1 */
    int64_t ncalls;
} run;

static double now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: embed_llama CHECKPOINT [--steps N] [--prompt-ids 1,2,3] [--ids] "
               "[--threads N]\n"
               "  CHECKPOINT        a Llama in llama2.c's format (stories15M.bin, ...)\n"
               "  --steps N         new tokens, N >= 1 (default: up to the checkpoint's seq_len)\n"
               "  --prompt-ids IDS  comma-separated 0-based token ids (default 1, BOS)\n"
               "  --ids             print only the generated ids, on one line\n"
               "  --threads N       threads for the kernels (default TIDE_NUM_THREADS or the "
               "cores)\n");
}

static int64_t positive_arg(const char *option, const char *text, int64_t max)
{
    char *end;
    long long v = strtoll(text, &end, 10);
    if (end == text || *end || v < 1 || v > max) {
        fprintf(stderr, "embed_llama: %s must be an integer in 1..%lld, got '%s'\n", option,
                (long long)max, text);
        return -1;
    }
    return (int64_t)v;
}

/* 0, 2 for a usage error (after a message), or 1 for --help (printed). */
static int parse_args(int argc, char **argv, options *o)
{
    memset(o, 0, sizeof *o);
    o->steps = -1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        int has_value = i + 1 < argc;
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
            usage(stdout);
            return 1;
        } else if (!strcmp(a, "--steps") && has_value) {
            if ((o->steps = positive_arg("--steps", argv[++i], INT32_MAX)) < 0)
                return 2;
        } else if (!strcmp(a, "--threads") && has_value) {
            int64_t t = positive_arg("--threads", argv[++i], 4096);
            if (t < 0)
                return 2;
            tide_set_num_threads((int)t);
        } else if (!strcmp(a, "--prompt-ids") && has_value) {
            o->prompt_ids = argv[++i];
        } else if (!strcmp(a, "--ids")) {
            o->ids_only = 1;
        } else if (a[0] != '-' && !o->checkpoint) {
            o->checkpoint = a;
        } else {
            fprintf(stderr, "embed_llama: unexpected argument '%s'\n", a);
            usage(stderr);
            return 2;
        }
    }
    if (!o->checkpoint) {
        fprintf(stderr, "embed_llama: no CHECKPOINT given\n");
        return 2;
    }
    return 0;
}

/* "1,2,3" -> ids, each in 0..vocab-1; the count, or -1 after a message. */
static int64_t parse_prompt(const char *text, int64_t vocab, int64_t *ids)
{
    int64_t n = 0;
    const char *p = text;
    for (;;) {
        char *end;
        long long v = strtoll(p, &end, 10);
        if (end == p || v < 0 || v >= vocab || n == MAX_PROMPT || (*end && *end != ',')) {
            fprintf(stderr, "embed_llama: --prompt-ids must be at most %d comma-separated "
                            "integers in 0..%lld, got '%s'\n", MAX_PROMPT,
                    (long long)vocab - 1, text);
            return -1;
        }
        ids[n++] = v;
        if (!*end)
            return n;
        p = end + 1;
    }
}

/* The token and position inputs, written in place before each step. */
typedef struct step_io {
    tide_tensor *token, *pos;
    int64_t *token_data, *pos_data;
} step_io;

static int step_io_new(step_io *io)
{
    const int64_t one = 1, zero = 0;
    io->token = tide_from_data(&zero, 1, &one, TIDE_INT64);
    io->pos = tide_from_data(&zero, 1, &one, TIDE_INT64);
    io->token_data = io->token ? tide_mutable_data_ptr(io->token) : NULL;
    io->pos_data = io->pos ? tide_mutable_data_ptr(io->pos) : NULL;
    return io->token_data && io->pos_data ? 0 : -1;
}

/* Captures one step as a graph (inputs: token, pos). The capture's own run writes position 0
 * of the cache; generation writes it again. NULL after a message. */
static tide_graph *capture_step(const llama_model *m, llama_cache *cache, step_io *io)
{
    char why[600];
    tide_tensor *inputs[2] = {io->token, io->pos};
    if (tide_jit_begin(inputs, 2) < 0) {
        fprintf(stderr, "embed_llama: tide_jit_begin: %s\n", tide_last_error());
        return NULL;
    }
    tide_tensor *next = llama_step(m, cache, io->token, io->pos, why, sizeof why);
    tide_graph *g = tide_jit_end(&next, next ? 1 : 0);
    if (!next)
        fprintf(stderr, "embed_llama: capturing the decoding step: %s\n", why);
    else if (!g)
        fprintf(stderr, "embed_llama: compiling the decoding step: %s\n", tide_last_error());
    if (!next) { /* the capture is over either way; a graph with no output is of no use */
        tide_graph_free(g);
        g = NULL;
    }
    tide_release(next);
    return g;
}

/* One step at the io's token and position: the greedy next token, or -1 after a message. */
static int64_t step_once(const llama_model *m, llama_cache *cache, step_io *io, tide_graph *g)
{
    char why[600] = "";
    tide_tensor *next = NULL, *inputs[2] = {io->token, io->pos};
    if (g) {
        if (tide_graph_run(g, inputs, 2, &next) < 0)
            snprintf(why, sizeof why, "%s", tide_last_error());
    } else {
        next = llama_step(m, cache, io->token, io->pos, why, sizeof why);
    }
    int64_t id = -1;
    if (next && tide_item_int64(next, &id) < 0)
        snprintf(why, sizeof why, "%s", tide_last_error()), id = -1;
    tide_release(next);
    if (id < 0)
        fprintf(stderr, "embed_llama: the %s step at position %lld: %s\n",
                g ? "compiled" : "eager", (long long)*io->pos_data, why);
    return id;
}

/* Feeds the prompt one token per step, then each chosen token, until r->tokens holds steps of
 * them; prints each as it comes when print. 0 or -1. */
static int generate(const llama_model *m, llama_cache *cache, step_io *io, tide_graph *g,
                    const int64_t *prompt, int64_t nprompt, int64_t steps, int print, run *r)
{
    for (int64_t l = 0; l < cache->n_layers; l++) /* not needed (masked), but a clean start */
        if (tide_fill_(cache->k[l], 0) < 0 || tide_fill_(cache->v[l], 0) < 0)
            return -1;
    r->ncalls = nprompt + steps - 1;
    for (int64_t i = 0; i < r->ncalls; i++) {
        *io->token_data = i < nprompt ? prompt[i] : r->tokens[i - nprompt];
        *io->pos_data = i;
        double t0 = now();
        int64_t id = step_once(m, cache, io, g);
        r->seconds[i] = now() - t0;
        if (id < 0)
            return -1;
        if (i + 1 < nprompt)
            continue;
        r->tokens[i + 1 - nprompt] = id;
        if (print) {
            printf(i + 1 == nprompt ? "%lld" : " %lld", (long long)id);
            fflush(stdout);
        }
    }
    if (print) {
        printf("\n");
        fflush(stdout);
    }
    return 0;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* Latency per token (each step call: the prompt's included), median, p90 and min (the least
 * disturbed by other processes), and tokens/s. */
static double report(const char *name, const run *r)
{
    double *s = malloc((size_t)r->ncalls * sizeof *s), total = 0;
    if (!s)
        return 0;
    memcpy(s, r->seconds, (size_t)r->ncalls * sizeof *s);
    qsort(s, (size_t)r->ncalls, sizeof *s, cmp_double);
    for (int64_t i = 0; i < r->ncalls; i++)
        total += s[i];
    double median = s[r->ncalls / 2], p90 = s[(r->ncalls * 9) / 10];
    fprintf(stderr, "%s: %lld steps, latency per token median %.3f ms, p90 %.3f ms (min %.3f "
                    "ms); %.1f tokens/s\n", name, (long long)r->ncalls, 1e3 * median, 1e3 * p90,
            1e3 * s[0], (double)r->ncalls / total);
    free(s);
    return median;
}

static int run_alloc(run *r, int64_t steps, int64_t ncalls)
{
    r->tokens = calloc((size_t)steps, sizeof *r->tokens);
    r->seconds = calloc((size_t)ncalls, sizeof *r->seconds);
    return r->tokens && r->seconds ? 0 : -1;
}

/* Both generations and their comparison; 0 when they agree, else 1. */
static int generate_both(const llama_model *m, const int64_t *prompt,
                         int64_t nprompt, int64_t steps)
{
    llama_cache cache = {0, NULL, NULL};
    step_io io = {NULL, NULL, NULL, NULL};
    run compiled = {NULL, NULL, 0}, eager = {NULL, NULL, 0};
    tide_graph *g = NULL;
    int status = 1;
    if (llama_cache_new(&cache, m) < 0 || step_io_new(&io) < 0 ||
        run_alloc(&compiled, steps, nprompt + steps - 1) < 0 ||
        run_alloc(&eager, steps, nprompt + steps - 1) < 0) {
        fprintf(stderr, "embed_llama: setting up: %s\n", tide_last_error());
        goto done;
    }
    *io.token_data = prompt[0];
    double t0 = now();
    if (!(g = capture_step(m, &cache, &io)))
        goto done;
    double capture_s = now() - t0;
    if (generate(m, &cache, &io, g, prompt, nprompt, steps, 1, &compiled) < 0 ||
        generate(m, &cache, &io, NULL, prompt, nprompt, steps, 0, &eager) < 0)
        goto done;
    fprintf(stderr, "capture and compile of the step: %.1f ms\n", 1e3 * capture_s);
    double mc = report("compiled", &compiled), me = report("eager", &eager);
    fprintf(stderr, "eager / compiled median latency: %.2fx\n", mc > 0 ? me / mc : 0);
    tide_jit_stats st; /* the capture compiled once; each run of the graph is a hit */
    tide_jit_global_stats(&st);
    fprintf(stderr, "jit: %lld compile(s) in %.1f ms, %lld runs of compiled plans\n",
            (long long)st.compiles, st.compile_ms, (long long)st.hits);
    status = 0;
    for (int64_t i = 0; i < steps; i++)
        if (compiled.tokens[i] != eager.tokens[i]) {
            fprintf(stderr, "embed_llama: token %lld differs: compiled %lld, eager %lld\n",
                    (long long)i, (long long)compiled.tokens[i], (long long)eager.tokens[i]);
            status = 1;
            break;
        }
done:
    tide_graph_free(g);
    tide_release(io.token);
    tide_release(io.pos);
    llama_cache_free(&cache);
    free(compiled.tokens), free(compiled.seconds), free(eager.tokens), free(eager.seconds);
    return status;
}

int main(int argc, char **argv)
{
    options o;
    int parsed = parse_args(argc, argv, &o);
    if (parsed)
        return parsed == 1 ? 0 : 2;
    llama_model m;
    int status = 1;
    static int64_t prompt[MAX_PROMPT];
    int64_t nprompt = 1;
    prompt[0] = BOS;
    if (llama_load(&m, o.checkpoint) < 0)
        goto done;
    if (o.prompt_ids && (nprompt = parse_prompt(o.prompt_ids, m.c.vocab_size, prompt)) < 0) {
        status = 2;
        goto done;
    }
    if (nprompt >= m.c.seq_len) {
        fprintf(stderr, "embed_llama: the prompt has %lld tokens; the checkpoint's seq_len is "
                        "%lld\n", (long long)nprompt, (long long)m.c.seq_len);
        status = 2;
        goto done;
    }
    int64_t room = m.c.seq_len - nprompt;
    int64_t steps = o.steps < 0 || o.steps > room ? room : o.steps;
    if (!o.ids_only)
        printf("%s: Llama dim %lld, hidden %lld, %lld layers, %lld heads (%lld kv), vocab %lld, "
               "seq_len %lld; %d threads\n", o.checkpoint, (long long)m.c.dim,
               (long long)m.c.hidden_dim, (long long)m.c.n_layers, (long long)m.c.n_heads,
               (long long)m.c.n_kv_heads, (long long)m.c.vocab_size, (long long)m.c.seq_len,
               tide_get_num_threads());
    status = generate_both(&m, prompt, nprompt, steps);
done:
    llama_free(&m);
    tide_jit_cache_clear();
    tide_shutdown();
    return status;
}
