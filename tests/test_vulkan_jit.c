/*
 * test_vulkan_jit.c — the jit on the Vulkan device: traced chains of Vulkan tensors (fusion
 * groups rendered to GLSL and compiled at run time, groups the renderer leaves to the eager
 * shaders, library ops inside a graph, in-place write-backs) against the same ops run eagerly on
 * Vulkan, and against a float64 reference computed on the CPU. Also: the fused run makes fewer
 * dispatches than eager, a second trace compiles nothing, the SPIR-V lands in the disk cache.
 *
 * With no Vulkan it prints why and passes. Under valgrind (scripts/test.sh) a subset runs.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <unistd.h>

#include "device.h"
#include "devices/vulkan/vulkan_device.h"
#include "tide.h"
#include "test_util.h"

static bool quick;
static char cache_dir[256];

static tide_tensor *randt(int ndim, const int64_t *shape, tide_dtype dt, double lo, double hi)
{
    tide_tensor *u = tide_rand(ndim, shape, TIDE_FLOAT64);
    tide_tensor *s = tide_mul_scalar(u, hi - lo), *v = tide_add_scalar(s, lo);
    tide_tensor *r = dt == TIDE_INT32 ? tide_floor(v) : tide_retain(v);
    tide_tensor *c = tide_cast(r, dt);
    tide_release(u), tide_release(s), tide_release(v), tide_release(r);
    return c;
}

static tide_tensor *on(const tide_tensor *t, const char *dev)
{
    return t ? tide_to(t, dev) : NULL;
}

/* max |got - want| / (atol + rtol |want|) <= 1, over all elements (got on any device) */
static void check_close(const char *what, const tide_tensor *got, const tide_tensor *want,
                        double atol, double rtol)
{
    if (!got || !want) {
        CHECK(0, "%s: no result: %s", what, tide_last_error());
        return;
    }
    tide_tensor *gc = on(got, "cpu"), *wc = on(want, "cpu");
    tide_tensor *g64 = tide_cast(gc, TIDE_FLOAT64), *w64 = tide_cast(wc, TIDE_FLOAT64);
    int64_t n = tide_numel(g64);
    CHECK(n == tide_numel(w64), "%s: %lld elements, want %lld", what, (long long)n,
          (long long)tide_numel(w64));
    double *a = malloc(sizeof(double) * (size_t)n), *b = malloc(sizeof(double) * (size_t)n);
    tide_to_buffer(g64, a, sizeof(double) * (size_t)n);
    tide_to_buffer(w64, b, sizeof(double) * (size_t)n);
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++)
        if (!(fabs(a[i] - b[i]) <= atol + rtol * fabs(b[i])) && !(isnan(a[i]) && isnan(b[i])))
            bad = i;
    CHECK(bad < 0, "%s: element %lld is %.9g, want %.9g", what, (long long)bad,
          bad >= 0 ? a[bad] : 0.0, bad >= 0 ? b[bad] : 0.0);
    free(a), free(b);
    tide_release(gc), tide_release(wc), tide_release(g64), tide_release(w64);
}

/* ---- the chains (each takes up to 3 tensors; numbers are wrapped numbers) -------------------- */

typedef tide_tensor *(*chain_fn)(tide_tensor *const *x);

/* tanh(x*a + b) * sigmoid(x) + c, with Lua-like numbers a, b, c */
static tide_tensor *c_gelu_like(tide_tensor *const *x)
{
    tide_tensor *a = tide_number(1.5), *b = tide_number(-0.25), *c = tide_number(0.5);
    tide_tensor *t1 = tide_mul(x[0], a), *t2 = tide_add(t1, b), *t3 = tide_tanh(t2),
                *t4 = tide_sigmoid(x[0]), *t5 = tide_mul(t3, t4), *r = tide_add(t5, c);
    tide_release(a), tide_release(b), tide_release(c);
    tide_release(t1), tide_release(t2), tide_release(t3), tide_release(t4), tide_release(t5);
    return r;
}

/* relu(x + bias) * y^T - exp(-|x|): a broadcast row, a transposed operand */
static tide_tensor *c_broadcast(tide_tensor *const *x)
{
    tide_tensor *yt = tide_transpose(x[2], 0, 1);
    tide_tensor *t1 = tide_add(x[0], x[1]), *t2 = tide_relu(t1), *t3 = tide_mul(t2, yt),
                *t4 = tide_abs(x[0]), *t5 = tide_neg(t4), *t6 = tide_exp(t5), *r = tide_sub(t3, t6);
    tide_release(yt), tide_release(t1), tide_release(t2), tide_release(t3), tide_release(t4);
    tide_release(t5), tide_release(t6);
    return r;
}

/* where(x > y, x, y * 0.1) / maximum(x, 1) (a bool mask inside the group) */
static tide_tensor *c_where(tide_tensor *const *x)
{
    tide_tensor *k = tide_number(0.1), *one = tide_number(1.0);
    tide_tensor *m = tide_gt(x[0], x[2]), *s = tide_mul(x[2], k), *w = tide_where(m, x[0], s),
                *mx = tide_maximum(x[0], one), *r = tide_div(w, mx);
    tide_release(k), tide_release(one), tide_release(m), tide_release(s), tide_release(w);
    tide_release(mx);
    return r;
}

/* int32: (i * 3 - j) max |j|, then float: cast * x (mixed dtypes in one group) */
static tide_tensor *c_int(tide_tensor *const *x)
{
    tide_tensor *three = tide_integer(3);
    tide_tensor *i = tide_cast(x[0], TIDE_INT32), *j = tide_cast(x[2], TIDE_INT32);
    tide_tensor *t1 = tide_mul(i, three), *t2 = tide_sub(t1, j), *t3 = tide_abs(j),
                *t4 = tide_maximum(t2, t3), *f = tide_cast(t4, TIDE_FLOAT32),
                *r = tide_mul(f, x[0]);
    tide_release(three), tide_release(i), tide_release(j), tide_release(t1), tide_release(t2);
    tide_release(t3), tide_release(t4), tide_release(f);
    return r;
}

/* int32 // and % in one group: (i // j + i % 3) * x with i = int(4x), j = int(y) (zero
 * divisors included: 0) */
static tide_tensor *c_intdiv(tide_tensor *const *x)
{
    tide_tensor *four = tide_number(4.0), *three = tide_integer(3);
    tide_tensor *t0 = tide_mul(x[0], four), *i = tide_cast(t0, TIDE_INT32),
                *j = tide_cast(x[2], TIDE_INT32), *q = tide_floor_divide(i, j),
                *m = tide_remainder(i, three), *t = tide_add(q, m),
                *f = tide_cast(t, TIDE_FLOAT32), *r = tide_mul(f, x[0]);
    tide_release(four), tide_release(three), tide_release(t0), tide_release(i), tide_release(j);
    tide_release(q), tide_release(m), tide_release(t), tide_release(f);
    return r;
}

/* float -> int32 result: cast(x * 4) + 1 */
static tide_tensor *c_to_int(tide_tensor *const *x)
{
    tide_tensor *four = tide_number(4.0), *one = tide_integer(1);
    tide_tensor *t1 = tide_mul(x[0], four), *i = tide_cast(t1, TIDE_INT32), *r = tide_add(i, one);
    tide_release(four), tide_release(one), tide_release(t1), tide_release(i);
    return r;
}

/* a bool result (not rendered: runs op by op) and a softmax (a row group: op by op) */
static tide_tensor *c_bool_out(tide_tensor *const *x)
{
    tide_tensor *e = tide_exp(x[0]), *r = tide_lt(e, x[2]);
    tide_release(e);
    return r;
}

static tide_tensor *c_softmax(tide_tensor *const *x)
{
    tide_tensor *t = tide_mul_scalar(x[0], 2.0), *r = tide_softmax(t, 1);
    tide_release(t);
    return r;
}

/* row groups: sum((x - y)^2) over the last dim (no keepdim), and prod(1 + x/8) + min(x)
 * (two reductions, then a row member) */
static tide_tensor *c_sumsq(tide_tensor *const *x)
{
    int d = 1;
    tide_tensor *t1 = tide_sub(x[0], x[2]), *t2 = tide_mul(t1, t1),
                *r = tide_sum(t2, &d, 1, false);
    tide_release(t1), tide_release(t2);
    return r;
}

static tide_tensor *c_prodmin(tide_tensor *const *x)
{
    int d = 1;
    tide_tensor *k = tide_number(0.125), *one = tide_number(1.0);
    tide_tensor *t1 = tide_mul(x[0], k), *t2 = tide_add(t1, one), *p = tide_prod(t2, &d, 1, true),
                *m = tide_min(x[0], &d, 1, true), *r = tide_add(p, m);
    tide_release(k), tide_release(one), tide_release(t1), tide_release(t2), tide_release(p);
    tide_release(m);
    return r;
}

/* a matmul (a library op) then bias + sigmoid */
static tide_tensor *c_matmul(tide_tensor *const *x)
{
    tide_tensor *m = tide_matmul(x[0], x[2]), *t = tide_add(m, x[1]), *r = tide_sigmoid(t);
    tide_release(m), tide_release(t);
    return r;
}

typedef struct chain {
    const char *name;
    chain_fn f;
    int fused; /* the group renders to one shader (fewer dispatches than eager) */
    bool quick;
} chain;

static void test_chains(void)
{
    int64_t sx[2] = {37, 61}, sb[1] = {61}, sy[2] = {61, 37}, sm[2] = {61, 37};
    static const chain chains[] = {
        {"tanh(x*a+b)*sigmoid(x)+c", c_gelu_like, 1, true},
        {"relu(x+bias)*y^T-exp(-|x|)", c_broadcast, 1, true},
        {"where(x>y,x,0.1y)/maximum(x,1)", c_where, 1, false},
        {"int32 chain then float", c_int, 1, false},
        {"cast(x*4)+1", c_to_int, 1, false},
        {"int32 i // j + i % 3", c_intdiv, 1, false},
        {"exp(x) < y (bool result)", c_bool_out, 0, false},
        {"softmax(2x)", c_softmax, 1, true},
        {"sum((x-y)^2, 2) over rows of 3001", c_sumsq, 1, false},
        {"prod(1+x/8, 2) + min(x, 2)", c_prodmin, 1, false},
        {"sigmoid(x@y+bias)", c_matmul, 0, false},
    };
    for (size_t k = 0; k < sizeof chains / sizeof chains[0]; k++) {
        const chain *ch = &chains[k];
        if (quick && !ch->quick)
            continue;
        int64_t slong[2] = {6, 3001};
        tide_tensor *x = randt(2, ch->f == c_sumsq ? slong : sx, TIDE_FLOAT32, -3, 3),
                    *b = randt(1, sb, TIDE_FLOAT32, -1, 1);
        tide_tensor *y = ch->f == c_matmul ? randt(2, sm, TIDE_FLOAT32, -1, 1)
                                           : randt(2, sy, TIDE_FLOAT32, -3, 3);
        if (ch->f == c_broadcast || ch->f == c_matmul) {
            /* y as [61,37] for transpose / matmul; elsewhere as x's shape */
        } else {
            tide_release(y);
            y = randt(2, ch->f == c_sumsq ? slong : sx, TIDE_FLOAT32, -3, 3);
        }
        if (ch->f == c_matmul) {
            tide_tensor *b2 = randt(1, (int64_t[]){37}, TIDE_FLOAT32, -1, 1);
            tide_release(b);
            b = b2;
            tide_tensor *x2 = randt(2, (int64_t[]){37, 61}, TIDE_FLOAT32, -1, 1);
            tide_release(x);
            x = x2;
        }
        /* the float64 reference on the CPU */
        tide_tensor *in64[3] = {tide_cast(x, TIDE_FLOAT64), tide_cast(b, TIDE_FLOAT64),
                                tide_cast(y, TIDE_FLOAT64)};
        tide_tensor *inv[3] = {on(x, "vulkan"), on(b, "vulkan"), on(y, "vulkan")};
        tide_tensor *want = ch->f == c_int || ch->f == c_to_int || ch->f == c_bool_out ||
                                    ch->f == c_intdiv
                                ? ch->f((tide_tensor *const[]){x, b, y}) /* exact: integers */
                                : ch->f(in64);
        uint64_t d0, d1, d2, sub, fb;
        td_vulkan_stats(&sub, &d0, &fb);
        tide_tensor *eager = ch->f(inv);
        tide_sync();
        td_vulkan_stats(&sub, &d1, &fb);
        tide_jit_stats st = {0};
        CHECK(tide_jit_trace_begin(&st, NULL, NULL) == 0, "%s", tide_last_error());
        tide_tensor *got = ch->f(inv);
        CHECK(tide_jit_trace_end() == 0, "%s: %s", ch->name, tide_last_error());
        tide_sync();
        td_vulkan_stats(&sub, &d2, &fb);
        CHECK(got && tide_device_name(got) && strcmp(tide_device_name(got), "vulkan") == 0,
              "%s: the jit's result is not on vulkan", ch->name);
        char what[128];
        snprintf(what, sizeof what, "%s: jit vs float64", ch->name);
        check_close(what, got, want, 1e-5, 1e-5);
        snprintf(what, sizeof what, "%s: jit vs eager vulkan", ch->name);
        check_close(what, got, eager, 1e-6, 1e-6);
        if (ch->fused)
            CHECK(d2 - d1 < d1 - d0, "%s: the jit made %llu dispatches, eager %llu", ch->name,
                  (unsigned long long)(d2 - d1), (unsigned long long)(d1 - d0));
        CHECK(st.compiles == 1, "%s: %lld compiles", ch->name, (long long)st.compiles);
        /* again: a cache hit, same values */
        tide_jit_stats st2 = {0};
        tide_jit_trace_begin(&st2, NULL, NULL);
        tide_tensor *again = ch->f(inv);
        tide_jit_trace_end();
        CHECK(st2.compiles == 0 && st2.hits == 1, "%s: second trace compiled %lld, hit %lld",
              ch->name, (long long)st2.compiles, (long long)st2.hits);
        snprintf(what, sizeof what, "%s: jit (hit)", ch->name);
        check_close(what, again, got, 0, 0);
        tide_release(again), tide_release(got), tide_release(eager), tide_release(want);
        for (int i = 0; i < 3; i++)
            tide_release(in64[i]), tide_release(inv[i]);
        tide_release(x), tide_release(b), tide_release(y);
    }
}

/* An optimizer-like update p <- p - lr * (g + wd * p) on Vulkan tensors, traced: the group
 * writes p back itself; against the same on the CPU in float64. */
static void test_inplace(void)
{
    int64_t n = quick ? 1000 : 100000;
    tide_tensor *p = randt(1, &n, TIDE_FLOAT32, -1, 1), *g = randt(1, &n, TIDE_FLOAT32, -1, 1);
    tide_tensor *p64 = tide_cast(p, TIDE_FLOAT64), *g64 = tide_cast(g, TIDE_FLOAT64);
    tide_tensor *pv = on(p, "vulkan"), *gv = on(g, "vulkan");
    for (int step = 0; step < 3; step++) {
        tide_tensor *ps[2] = {p64, pv}, *gs[2] = {g64, gv};
        for (int k = 0; k < 2; k++) {
            if (k == 1)
                tide_jit_trace_begin(NULL, NULL, NULL);
            tide_tensor *lr = tide_number(0.1), *wd = tide_number(0.01);
            tide_tensor *t1 = tide_mul(ps[k], wd), *t2 = tide_add(gs[k], t1),
                        *t3 = tide_mul(t2, lr), *t4 = tide_sub(ps[k], t3);
            CHECK(tide_copy_(ps[k], t4) == 0, "copy_: %s", tide_last_error());
            tide_release(lr), tide_release(wd), tide_release(t1), tide_release(t2);
            tide_release(t3), tide_release(t4);
            if (k == 1)
                CHECK(tide_jit_trace_end() == 0, "update: %s", tide_last_error());
        }
    }
    check_close("p - lr*(g + wd*p), 3 steps, jit on vulkan vs float64", pv, p64, 1e-6, 1e-5);
    tide_release(p), tide_release(g), tide_release(p64), tide_release(g64);
    tide_release(pv), tide_release(gv);
}

/* the shader's SPIR-V went into TIDE_VULKAN_CACHE_DIR */
/* A C capture of Vulkan ops (tanh(x) * y, rows summed): it replays on new Vulkan inputs with
 * the eager shaders' values (the fused shader runs the same op bodies: 1e-6 relative covers a
 * driver's contraction of a*b+c), and refuses inputs on the cpu. */
static tide_tensor *rand_vulkan(int ndim, const int64_t *shape)
{
    tide_tensor *c = randt(ndim, shape, TIDE_FLOAT32, -2, 2), *v = on(c, "vulkan");
    tide_release(c);
    return v;
}

static void test_capture(void)
{
    int64_t shape[2] = {64, 33};
    tide_tensor *x = rand_vulkan(2, shape), *y = rand_vulkan(2, shape);
    tide_tensor *in[2] = {x, y};
    CHECK(x && y && tide_jit_begin(in, 2) == 0, "capture begin: %s", tide_last_error());
    tide_tensor *t = tide_tanh(x), *m = t ? tide_mul(t, y) : NULL;
    tide_tensor *s = m ? tide_sum(m, (const int[]){1}, 1, false) : NULL;
    tide_graph *g = tide_jit_end(&s, s ? 1 : 0);
    CHECK(g != NULL, "capture of Vulkan ops: %s", tide_last_error());
    tide_tensor *x2 = rand_vulkan(2, shape), *got = NULL;
    tide_tensor *in2[2] = {x2, y}, *t2 = tide_tanh(x2), *m2 = tide_mul(t2, y);
    tide_tensor *want = tide_sum(m2, (const int[]){1}, 1, false);
    CHECK(g && tide_graph_run(g, in2, 2, &got) == 0, "replay: %s", tide_last_error());
    check_close("captured Vulkan graph", got, want, 1e-6, 1e-6);
    CHECK(got && strcmp(tide_device_name(got), "vulkan") == 0, "the replay's result is on %s",
          got ? tide_device_name(got) : "nothing");
    tide_tensor *xc = on(x2, "cpu"), *in3[2] = {xc, y}, *bad = NULL;
    CHECK(g && tide_graph_run(g, in3, 2, &bad) < 0 && strstr(tide_last_error(), "on cpu"),
          "a replay on a cpu input: %s", tide_last_error());
    tide_graph_free(g);
    tide_release(t), tide_release(m), tide_release(s), tide_release(x2), tide_release(t2);
    tide_release(m2), tide_release(want), tide_release(got), tide_release(xc);
    tide_release(x), tide_release(y);
}

static void test_disk_cache(void)
{
    DIR *d = opendir(cache_dir);
    int spv = 0;
    if (d) {
        for (struct dirent *e; (e = readdir(d));)
            spv += strncmp(e->d_name, "jit_", 4) == 0 && strstr(e->d_name, ".spv") != NULL;
        closedir(d);
    }
    CHECK(spv >= 1, "no jit_*.spv in %s", cache_dir);
}

static void remove_cache(void)
{
    DIR *d = opendir(cache_dir);
    if (!d)
        return;
    char path[600];
    for (struct dirent *e; (e = readdir(d));)
        if (e->d_name[0] != '.') {
            snprintf(path, sizeof path, "%s/%s", cache_dir, e->d_name);
            unlink(path);
        }
    closedir(d);
    rmdir(cache_dir);
}

int main(void)
{
    quick = RUNNING_ON_VALGRIND;
    /* a cache of this run's own (so the compile path is exercised), removed at the end */
    snprintf(cache_dir, sizeof cache_dir, "/tmp/tide_test_vulkan_jit_%ld", (long)getpid());
    setenv("TIDE_VULKAN_CACHE_DIR", cache_dir, 1);
    /* registered before the device opens, so it runs after the device saved its pipeline
     * cache there at exit */
    atexit(remove_cache);
    int64_t one = 1;
    tide_tensor *probe = tide_zeros(1, &one, TIDE_FLOAT32), *pv = tide_to(probe, "vulkan");
    tide_release(probe);
    if (!pv) {
        printf("test_vulkan_jit: skipped: no Vulkan device (%s)\n", tide_last_error());
        tide_clear_error();
        return test_summary("test_vulkan_jit");
    }
    tide_release(pv);
    test_chains();
    test_inplace();
    test_capture();
    test_disk_cache();
    tide_shutdown();
    return test_summary("test_vulkan_jit");
}
