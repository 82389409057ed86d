/*
 * test_profile.c — the profiler (docs/profile.md): FLOP and byte counts against hand-computed
 * ones for matmul, conv2d and a fused group, eager and through a compiled graph; nothing is
 * recorded while it is off; the Chrome trace parses (python3) with one event per kernel; the
 * recorded time agrees with the step's wall time within 10%; errors for misuse.
 */
#define _GNU_SOURCE /* popen, mkstemp */
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "test_util.h"
#include "tide.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

static const char *where_cb(void *ctx) { return ctx; }

/* The first event called name (or starting with it, prefix), else NULL. */
static const tide_profile_event *find_event(const char *name, bool prefix)
{
    const tide_profile_event *ev;
    int n = tide_profile_events(&ev);
    for (int i = 0; i < n; i++)
        if (prefix ? strncmp(ev[i].name, name, strlen(name)) == 0 : strcmp(ev[i].name, name) == 0)
            return &ev[i];
    return NULL;
}

typedef struct operands {
    tide_tensor *a, *b, *x, *w;
} operands;

/* a [3, 64, 32] @ b [3, 32, 48]; x [2, 6, 10, 12] conv w [8, 3, 3, 3], groups 2, padding 1. */
static operands make_operands(void)
{
    int64_t sa[3] = {3, 64, 32}, sb[3] = {3, 32, 48}, sx[4] = {2, 6, 10, 12}, sw[4] = {8, 3, 3, 3};
    return (operands){tide_randn(3, sa, TIDE_FLOAT32), tide_randn(3, sb, TIDE_FLOAT32),
                      tide_randn(4, sx, TIDE_FLOAT32), tide_randn(4, sw, TIDE_FLOAT32)};
}

static const int64_t MATMUL_FLOPS = 2LL * 3 * 64 * 48 * 32;          /* 2·batch·M·N·K */
static const int64_t MATMUL_BYTES = 4LL * (3 * 64 * 32 + 3 * 32 * 48 + 3 * 64 * 48);
static const int64_t CONV_FLOPS = 2LL * 2 * 8 * 10 * 12 * (6 / 2) * 3 * 3; /* 2·N·O·H·W·C/g·k² */
static const int64_t CONV_BYTES = 4LL * (2 * 6 * 10 * 12 + 8 * 3 * 3 * 3 + 2 * 8 * 10 * 12);

static void products(const operands *o, tide_tensor **out)
{
    int one[2] = {1, 1}, pad[2] = {1, 1};
    out[0] = tide_matmul(o->a, o->b);
    out[1] = tide_conv2d(o->x, o->w, NULL, one, pad, one, 2);
}

static void check_products(const char *how, const char *where)
{
    const tide_profile_event *m = find_event("matmul", false), *c = find_event("conv2d", false);
    CHECK(m && m->flops == MATMUL_FLOPS, "%s matmul FLOPs %lld, want %lld", how,
          m ? (long long)m->flops : -1LL, (long long)MATMUL_FLOPS);
    CHECK(m && m->bytes == MATMUL_BYTES, "%s matmul bytes %lld, want %lld", how,
          m ? (long long)m->bytes : -1LL, (long long)MATMUL_BYTES);
    CHECK(c && c->flops == CONV_FLOPS, "%s conv2d FLOPs %lld, want %lld", how,
          c ? (long long)c->flops : -1LL, (long long)CONV_FLOPS);
    CHECK(c && c->bytes == CONV_BYTES, "%s conv2d bytes %lld, want %lld", how,
          c ? (long long)c->bytes : -1LL, (long long)CONV_BYTES);
    CHECK(m && strcmp(m->device, "cpu") == 0 && strcmp(m->where, where) == 0,
          "%s matmul on %s at '%s', want cpu at '%s'", how, m ? m->device : "?",
          m ? m->where : "?", where);
}

static void test_eager_counts(const operands *o)
{
    tide_tensor *out[2];
    tide_profile_set_where(where_cb, "model.lua:7");
    CHECK(tide_profile_begin() == 0, "begin: %s", tide_last_error());
    products(o, out);
    CHECK(tide_profile_end() == 0, "end: %s", tide_last_error());
    tide_profile_set_where(NULL, NULL);
    check_products("eager", "model.lua:7");
    const tide_profile_row *rows;
    int n = tide_profile_rows(&rows);
    CHECK(n == 2 && rows[0].total_ms >= rows[1].total_ms && rows[0].calls == 1,
          "2 rows sorted by time, got %d", n);
    tide_release(out[0]), tide_release(out[1]);
}

/* The same products captured into a graph (C: no source line), and a fused chain. */
static void test_jit_counts(const operands *o)
{
    int64_t n = 1 << 16;
    tide_tensor *v = tide_randn(1, &n, TIDE_FLOAT32);
    tide_tensor *in[5] = {o->a, o->b, o->x, o->w, v}, *out[3], *got[3];
    CHECK(tide_jit_begin(in, 5) == 0, "jit_begin: %s", tide_last_error());
    products(o, out);
    tide_tensor *t1 = tide_mul_scalar(v, 2), *t2 = tide_add_scalar(t1, 1);
    out[2] = tide_exp(t2);
    tide_release(t1), tide_release(t2);
    tide_graph *g = tide_jit_end(out, 3);
    CHECK(g != NULL, "jit_end: %s", tide_last_error());
    CHECK(tide_profile_begin() == 0, "begin: %s", tide_last_error());
    CHECK(g && tide_graph_run(g, in, 5, got) == 0, "graph_run: %s", tide_last_error());
    CHECK(tide_profile_end() == 0, "end: %s", tide_last_error());
    check_products("jit", "");
    const tide_profile_event *f = find_event("fused(", true);
    CHECK(f && f->flops == 3 * n, "fused group FLOPs %lld, want %lld (mul, add, exp)",
          f ? (long long)f->flops : -1LL, (long long)(3 * n));
    CHECK(f && f->bytes >= 8 * n && f->bytes <= 8 * n + 64,
          "fused group bytes %lld, want x read and the result written (%lld)",
          f ? (long long)f->bytes : -1LL, (long long)(8 * n));
    for (int i = 0; i < 3; i++)
        tide_release(out[i]), tide_release(g ? got[i] : NULL);
    tide_graph_free(g);
    tide_release(v);
}

static void test_off_records_nothing(const operands *o)
{
    tide_tensor *out[2];
    CHECK(!tide_profile_active(), "no profile runs");
    products(o, out); /* off: not recorded anywhere */
    tide_release(out[0]), tide_release(out[1]);
    CHECK(tide_profile_begin() == 0 && tide_profile_end() == 0, "%s", tide_last_error());
    CHECK(tide_profile_events(NULL) == 0 && tide_profile_rows(NULL) == 0,
          "an empty profile has %d events", tide_profile_events(NULL));
}

/* Writes the trace and counts its events with python3's json module. */
static void test_chrome_trace(const operands *o)
{
    tide_tensor *out[4];
    CHECK(tide_profile_begin() == 0, "%s", tide_last_error());
    products(o, out);
    products(o, out + 2); /* two of each */
    CHECK(tide_profile_end() == 0, "%s", tide_last_error());
    char path[] = "/tmp/tide_profile_XXXXXX";
    int fd = mkstemp(path);
    if (fd >= 0)
        close(fd);
    CHECK(tide_profile_write_trace(path) == 0, "write_trace: %s", tide_last_error());
    char cmd[256];
    snprintf(cmd, sizeof cmd,
             "python3 -c \"import json; d = json.load(open('%s'))['traceEvents']; "
             "assert all(e['ph'] == 'X' and e['dur'] >= 0 and 'flops' in e['args'] for e in d); "
             "print(len(d))\"", path);
    FILE *p = popen(cmd, "r");
    int n = -1;
    if (p) {
        if (fscanf(p, "%d", &n) != 1)
            n = -1;
        pclose(p);
    }
    CHECK(n == 4 && tide_profile_events(NULL) == 4, "the trace holds %d events, want 4", n);
    unlink(path);
    for (int i = 0; i < 4; i++)
        tide_release(out[i]);
}

/* A step: four 256² matmuls and elementwise ops on 1M elements, eager and a fused graph. */
static double step(tide_tensor *m, tide_tensor *x, tide_graph *g)
{
    double t0 = now_ms();
    tide_tensor *p = tide_matmul(m, m);
    for (int i = 0; i < 3; i++) {
        tide_tensor *q = tide_matmul(p, m);
        tide_release(p);
        p = q;
    }
    tide_tensor *e = tide_exp(x), *s = tide_add(e, x), *r = tide_sum(s, NULL, 0, false), *got;
    tide_graph_run(g, &x, 1, &got);
    tide_release(p), tide_release(e), tide_release(s), tide_release(r), tide_release(got);
    return now_ms() - t0;
}

static void test_wall_time(void)
{
    int64_t sm[2] = {256, 256}, n = 1 << 20;
    tide_tensor *m = tide_randn(2, sm, TIDE_FLOAT32), *x = tide_randn(1, &n, TIDE_FLOAT32);
    tide_jit_begin(&x, 1);
    tide_tensor *t = tide_mul(x, x), *y = tide_sigmoid(t);
    tide_graph *g = tide_jit_end(&y, 1);
    tide_release(t), tide_release(y);
    step(m, x, g); /* warm: the allocator's cache holds the results' memory */
    double best = 1e9, wall = 0, rec = 0;
    for (int attempt = 0; attempt < 3 && best > 0.10; attempt++) {
        tide_profile_begin();
        double w = step(m, x, g);
        tide_profile_end();
        tide_profile_summary s;
        tide_profile_summarize(&s);
        double err = fabs(s.kernel_ms - w) / w;
        if (err < best)
            best = err, wall = w, rec = s.kernel_ms;
        CHECK(s.nevents == 8, "the step is 8 kernels and groups, got %d", s.nevents);
    }
    CHECK(best <= 0.10, "recorded %.3f ms of a %.3f ms step (%.1f%% off)", rec, wall, 100 * best);
    printf("wall time: step %.3f ms, recorded %.3f ms (%.1f%%)\n", wall, rec, 100 * best);
    tide_graph_free(g);
    tide_release(m), tide_release(x);
}

static void test_errors(void)
{
    CHECK(tide_profile_end() < 0 && strstr(tide_last_error(), "no profile is running"),
          "end without begin: %s", tide_last_error());
    CHECK(tide_profile_begin() == 0, "%s", tide_last_error());
    CHECK(tide_profile_begin() < 0 && strstr(tide_last_error(), "already running"),
          "nested begin: %s", tide_last_error());
    CHECK(tide_profile_rows(NULL) < 0 && strstr(tide_last_error(), "tide_profile_end first"),
          "rows while running: %s", tide_last_error());
    CHECK(tide_profile_end() == 0, "%s", tide_last_error());
    CHECK(tide_profile_write_trace(NULL) < 0 && strstr(tide_last_error(), "NULL"),
          "a NULL path: %s", tide_last_error());
    CHECK(tide_profile_write_trace("/nonexistent/dir/t.json") < 0 &&
              strstr(tide_last_error(), "/nonexistent/dir/t.json"),
          "an unwritable path: %s", tide_last_error());
    char *table = tide_profile_table();
    CHECK(table && strstr(table, "roofline: STREAM triad") && strstr(table, "sgemm"),
          "the table's header: %s", table ? table : tide_last_error());
    free(table);
}

int main(void)
{
    operands o = make_operands();
    test_errors();
    test_eager_counts(&o);
    test_jit_counts(&o);
    test_off_records_nothing(&o);
    test_chrome_trace(&o);
    test_wall_time();
    tide_release(o.a), tide_release(o.b), tide_release(o.x), tide_release(o.w);
    return test_summary("test_profile");
}
