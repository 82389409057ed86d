/*
 * test_jit.c — the jit: capture and replay (C API), trace sessions with graph breaks, the
 * passes (folding, simplification, CSE, DCE seen through results and stats), the cache (a hit
 * compiles nothing; thread safety), guards, in-place updates written back, and a differential
 * test: many functions run eagerly and through the jit must give the same values (bitwise for
 * everything built from the library's own kernels; reductions fused into rows within 1e-6
 * relative, since the summation order may differ), with a float64 reference for a few.
 */
#define _GNU_SOURCE /* mkdtemp, setenv, popen */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "test_ref.h"
#include "test_util.h"
#include "tide.h"

typedef tide_tensor *(*fn_t)(tide_tensor *const *in);

static tide_tensor *randt(int ndim, const int64_t *shape, tide_dtype dt, double lo, double hi)
{
    int64_t n = ref_numel(ndim, shape);
    double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = lo + (hi - lo) * ref_uniform();
    if (dt != TIDE_FLOAT32 && dt != TIDE_FLOAT64)
        for (int64_t i = 0; i < n; i++)
            v[i] = floor(v[i]);
    tide_tensor *t = ref_from_doubles(v, ndim, shape, dt);
    free(v);
    return t;
}


/* ---- the functions -------------------------------------------------------------------------- */

static tide_tensor *f_chain(tide_tensor *const *in) /* tanh(x*a+b)*sigmoid(x)+c */
{
    tide_tensor *t1 = tide_mul(in[0], in[1]), *t2 = tide_add(t1, in[2]), *t3 = tide_tanh(t2);
    tide_tensor *t4 = tide_sigmoid(in[0]), *t5 = tide_mul(t3, t4), *t6 = tide_add_scalar(t5, 0.25);
    tide_release(t1), tide_release(t2), tide_release(t3), tide_release(t4), tide_release(t5);
    return t6;
}
static tide_tensor *f_softmax(tide_tensor *const *in) { return tide_softmax(in[0], -1); }
static tide_tensor *f_log_softmax(tide_tensor *const *in) { return tide_log_softmax(in[0], 1); }
static tide_tensor *f_bcast(tide_tensor *const *in) /* x [R,C] + bias [C], relu, * scalar */
{
    tide_tensor *a = tide_add(in[0], in[1]), *b = tide_relu(a), *c = tide_mul(b, in[2]);
    tide_release(a), tide_release(b);
    return c;
}
static tide_tensor *f_strided(tide_tensor *const *in) /* transposed and sliced inputs */
{
    tide_tensor *t = tide_transpose(in[0], 0, 1), *s = tide_slice(t, 1, 1, 7, 2);
    tide_tensor *e = tide_exp(s), *m = tide_sub(e, s), *r = tide_sum(m, NULL, 0, false);
    tide_release(t), tide_release(s), tide_release(e), tide_release(m);
    return r;
}
static tide_tensor *f_reduce_dims(tide_tensor *const *in)
{
    int d0 = 0, d2[2] = {1, 2};
    tide_tensor *a = tide_mul(in[0], in[0]), *s0 = tide_sum(a, &d0, 1, true);
    tide_tensor *s1 = tide_max(a, d2, 2, true), *r = tide_add(s0, s1);
    tide_release(a), tide_release(s0), tide_release(s1);
    return r;
}
static tide_tensor *f_int_ops(tide_tensor *const *in) /* int32: arithmetic, compare, where */
{
    tide_tensor *a = tide_add(in[0], in[1]), *b = tide_mul(a, in[1]), *c = tide_gt(b, in[0]);
    tide_tensor *w = tide_where(c, b, in[0]), *f = tide_cast(w, TIDE_FLOAT32);
    tide_tensor *h = tide_div_scalar(f, 3.0);
    tide_release(a), tide_release(b), tide_release(c), tide_release(w), tide_release(f);
    return h;
}
static tide_tensor *f_f64(tide_tensor *const *in)
{
    tide_tensor *a = tide_sqrt(in[0]), *b = tide_log(in[0]), *c = tide_pow(a, in[1]);
    tide_tensor *d = tide_minimum(b, c), *e = tide_neg(d);
    tide_release(a), tide_release(b), tide_release(c), tide_release(d);
    return e;
}
static tide_tensor *f_matmul_epi(tide_tensor *const *in) /* linear + gelu + layer_norm */
{
    tide_tensor *l = tide_linear(in[0], in[1], in[2]), *g = tide_gelu(l, true);
    tide_tensor *n = tide_layer_norm(g, 1, NULL, NULL, 1e-5);
    tide_release(l), tide_release(g);
    return n;
}
static tide_tensor *f_simplify(tide_tensor *const *in) /* x*1 + 0, transpose twice, CSE */
{
    int64_t shp[2] = {tide_size(in[0], 0), tide_size(in[0], 1)};
    tide_tensor *one = tide_ones(2, shp, TIDE_FLOAT32), *zero = tide_zeros(2, shp, TIDE_FLOAT32);
    tide_tensor *a = tide_mul(in[0], one), *b = tide_add(a, zero);
    tide_tensor *t = tide_transpose(b, 0, 1), *tt = tide_transpose(t, 0, 1);
    tide_tensor *e1 = tide_exp(tt), *e2 = tide_exp(tt), *r = tide_add(e1, e2);
    tide_tensor *dead = tide_cos(in[0]);
    tide_release(one), tide_release(zero), tide_release(a), tide_release(b), tide_release(t);
    tide_release(tt), tide_release(e1), tide_release(e2), tide_release(dead);
    return r;
}
/* Outputs of 32 MB and more leave the generated tile loop through streaming stores: a group
 * on 8.4M float32 elements (33.6 MB, a partial last tile) whose output is also read by a later
 * member of the group and by a reduction outside it. (chain_big runs the chain on 2.1M
 * elements: operands prefetched, outputs stored in place.) */
static tide_tensor *f_big_outputs(tide_tensor *const *in)
{
    tide_tensor *a = tide_mul_scalar(in[0], 0.5), *t = tide_tanh(a), *w = tide_mul(t, in[0]);
    tide_tensor *s = tide_sum(t, NULL, 0, false), *r = tide_add(w, s);
    tide_release(a), tide_release(t), tide_release(w), tide_release(s);
    return r;
}
/* Rows of 3001: the row group calls its elementwise kernels a chunk at a time (cpu_codegen.c,
 * row_chunks; chunks of 752, the last 745), with a pair (exp(x - max)), single values read in
 * place (the max, the sum, the mean) and an operand broadcast along the rows (w). */
static tide_tensor *f_long_rows(tide_tensor *const *in)
{
    int dim = -1;
    tide_tensor *sm = tide_softmax(in[0], -1), *y = tide_mul(sm, in[1]);
    tide_tensor *mean = tide_mean(in[0], &dim, 1, true), *d = tide_sub(in[0], mean);
    tide_tensor *r = tide_add(y, d);
    tide_release(sm), tide_release(y), tide_release(mean), tide_release(d);
    return r;
}
static tide_tensor *f_mse(tide_tensor *const *in)
{
    return tide_mse_loss(in[0], in[1], TIDE_REDUCTION_MEAN);
}
static tide_tensor *f_cross_entropy(tide_tensor *const *in)
{
    return tide_cross_entropy(in[0], in[1], TIDE_REDUCTION_MEAN, 0.0, -100);
}

typedef struct fcase {
    const char *name;
    fn_t fn;
    int nin;
    double tol; /* 0: bitwise */
} fcase;

/* makes the inputs of case k (seeded so two calls give different values for reruns) */
static void make_inputs(int k, tide_tensor **in)
{
    int64_t v16[1] = {70001}, s3[1] = {1}, rc[2] = {67, 129}, c[1] = {129}, sq[2] = {9, 8},
            d3[3] = {5, 6, 7}, lin_x[2] = {16, 24}, lin_w[2] = {12, 24}, lin_b[1] = {12},
            tgt[1] = {67}, big[1] = {2100003}, huge[1] = {8400001}, long_rows[2] = {6, 3001},
            long_row[1] = {3001};
    switch (k) {
    case 0:
        in[0] = randt(1, v16, TIDE_FLOAT32, -3, 3);
        in[1] = randt(1, s3, TIDE_FLOAT32, 0.5, 2);
        in[2] = randt(1, v16, TIDE_FLOAT32, -1, 1);
        break;
    case 1:
    case 2: in[0] = randt(2, rc, TIDE_FLOAT32, -5, 5); break;
    case 3:
        in[0] = randt(2, rc, TIDE_FLOAT32, -1, 1);
        in[1] = randt(1, c, TIDE_FLOAT32, -1, 1);
        in[2] = tide_number(0.5 + ref_uniform());
        break;
    case 4: in[0] = randt(2, sq, TIDE_FLOAT32, -1, 1); break;
    case 5: in[0] = randt(3, d3, TIDE_FLOAT64, -2, 2); break;
    case 6:
        in[0] = randt(2, rc, TIDE_INT32, -50, 50);
        in[1] = randt(2, rc, TIDE_INT32, -5, 5);
        break;
    case 7:
        in[0] = randt(2, rc, TIDE_FLOAT64, 0.1, 4);
        in[1] = randt(1, c, TIDE_FLOAT64, -2, 2);
        break;
    case 8:
        in[0] = randt(2, lin_x, TIDE_FLOAT32, -1, 1);
        in[1] = randt(2, lin_w, TIDE_FLOAT32, -0.3, 0.3);
        in[2] = randt(1, lin_b, TIDE_FLOAT32, -0.1, 0.1);
        break;
    case 9: in[0] = randt(2, sq, TIDE_FLOAT32, -1, 1); break;
    case 10:
        in[0] = randt(2, rc, TIDE_FLOAT32, -1, 1);
        in[1] = randt(2, rc, TIDE_FLOAT32, -1, 1);
        break;
    case 11:
        in[0] = randt(2, rc, TIDE_FLOAT32, -3, 3);
        in[1] = randt(1, tgt, TIDE_INT64, 0, 129);
        break;
    case 12:
        in[0] = randt(1, big, TIDE_FLOAT32, -3, 3);
        in[1] = randt(1, s3, TIDE_FLOAT32, 0.5, 2);
        in[2] = randt(1, big, TIDE_FLOAT32, -1, 1);
        break;
    case 13: in[0] = randt(1, huge, TIDE_FLOAT32, -2, 2); break;
    case 14:
        in[0] = randt(2, long_rows, TIDE_FLOAT32, -4, 4);
        in[1] = randt(1, long_row, TIDE_FLOAT32, -1, 1);
        break;
    }
}

static const fcase cases[] = {
    {"chain", f_chain, 3, 0},          {"softmax", f_softmax, 1, 0},
    {"log_softmax", f_log_softmax, 1, 0}, {"bcast", f_bcast, 3, 0},
    {"strided", f_strided, 1, 0},   {"reduce_dims", f_reduce_dims, 1, 0},
    {"int_ops", f_int_ops, 2, 0},      {"f64", f_f64, 2, 0},
    {"linear_gelu_ln", f_matmul_epi, 3, 0}, {"simplify", f_simplify, 1, 0},
    {"mse", f_mse, 2, 0},           {"cross_entropy", f_cross_entropy, 2, 0},
    {"chain_big", f_chain, 3, 0},      {"big_outputs", f_big_outputs, 1, 0},
    {"long_rows", f_long_rows, 2, 0},
};
#define NCASES ((int)(sizeof cases / sizeof cases[0]))

static void check_close(const char *what, const char *name, const tide_tensor *got,
                        const tide_tensor *want, double tol)
{
    bool bitwise;
    double e = ref_compare(got, want, &bitwise);
    if (tol == 0)
        CHECK(bitwise, "%s %s: not bitwise equal to eager (max rel diff %g)", what, name, e);
    else
        CHECK(e >= 0 && e <= tol, "%s %s: max rel diff %g > %g", what, name, e, tol);
}

static void test_differential(void)
{
    for (int k = 0; k < NCASES; k++) {
        const fcase *fc = &cases[k];
        tide_tensor *in[4] = {0};
        make_inputs(k, in);
        tide_tensor *want = fc->fn(in);
        CHECK(want != NULL, "%s eager: %s", fc->name, tide_last_error());
        /* a trace session: same values */
        tide_jit_stats st = {0};
        CHECK(tide_jit_trace_begin(&st, NULL, NULL) == 0, "%s", tide_last_error());
        tide_tensor *got = fc->fn(in);
        CHECK(tide_jit_trace_end() == 0, "%s trace: %s", fc->name, tide_last_error());
        check_close("trace", fc->name, got, want, fc->tol);
        tide_release(got);
        /* the same again: a cache hit, nothing compiled */
        tide_jit_stats st2 = {0};
        tide_jit_trace_begin(&st2, NULL, NULL);
        got = fc->fn(in);
        tide_jit_trace_end();
        CHECK(st2.compiles == 0 && st2.hits == 1, "%s: second trace compiled %lld, hit %lld",
              fc->name, (long long)st2.compiles, (long long)st2.hits);
        check_close("trace (hit)", fc->name, got, want, fc->tol);
        tide_release(got);
        /* capture, then replay on new inputs */
        CHECK(tide_jit_begin(in, fc->nin) == 0, "%s", tide_last_error());
        tide_tensor *cap = fc->fn(in);
        tide_graph *g = tide_jit_end(&cap, 1);
        CHECK(g != NULL, "%s capture: %s", fc->name, tide_last_error());
        check_close("capture", fc->name, cap, want, fc->tol);
        tide_release(cap);
        tide_tensor *in2[4] = {0};
        make_inputs(k, in2);
        tide_tensor *want2 = fc->fn(in2), *got2 = NULL;
        CHECK(g && tide_graph_run(g, in2, fc->nin, &got2) == 0, "%s run: %s", fc->name,
              tide_last_error());
        check_close("replay", fc->name, got2, want2, fc->tol);
        tide_release(got2);
        tide_release(want2);
        tide_graph_free(g);
        for (int i = 0; i < 4; i++) {
            tide_release(in[i]);
            tide_release(in2[i]);
        }
        tide_release(want);
    }
}

/* Every unary and binary op on every dtype it takes, with a broadcast operand and a chain
 * around it (so the op is a member of a fused group): jit bitwise equal to eager. */
typedef tide_tensor *(*un_fn)(const tide_tensor *);
typedef tide_tensor *(*bin_fn)(const tide_tensor *, const tide_tensor *);

static void test_all_ops(void)
{
    static const struct { const char *name; un_fn f; } un[] = {
        {"neg", tide_neg}, {"abs", tide_abs}, {"exp", tide_exp}, {"log", tide_log},
        {"sqrt", tide_sqrt}, {"rsqrt", tide_rsqrt}, {"sin", tide_sin}, {"cos", tide_cos},
        {"tanh", tide_tanh}, {"sigmoid", tide_sigmoid}, {"relu", tide_relu},
        {"floor", tide_floor}, {"ceil", tide_ceil}, {"round", tide_round}, {"sign", tide_sign},
        {"reciprocal", tide_reciprocal}, {"logical_not", tide_logical_not}, {"erf", tide_erf},
        {"log1p", tide_log1p}, {"expm1", tide_expm1}, {"log2", tide_log2}, {"tan", tide_tan},
        {"asin", tide_asin}, {"acos", tide_acos}, {"atan", tide_atan}, {"sinh", tide_sinh},
        {"cosh", tide_cosh}, {"trunc", tide_trunc},
    };
    static const struct { const char *name; bin_fn f; } bin[] = {
        {"add", tide_add}, {"sub", tide_sub}, {"mul", tide_mul}, {"div", tide_div},
        {"pow", tide_pow}, {"maximum", tide_maximum}, {"minimum", tide_minimum},
        {"eq", tide_eq}, {"ne", tide_ne}, {"lt", tide_lt}, {"le", tide_le}, {"gt", tide_gt},
        {"ge", tide_ge}, {"logical_and", tide_logical_and}, {"logical_or", tide_logical_or},
        {"floor_divide", tide_floor_divide}, {"remainder", tide_remainder},
        {"atan2", tide_atan2}, {"fmod", tide_fmod},
    };
    static const tide_dtype dts[] = {TIDE_FLOAT32, TIDE_FLOAT64, TIDE_INT32, TIDE_INT64,
                                     TIDE_UINT8, TIDE_BOOL};
    int64_t sa[2] = {37, 61}, sb[1] = {61};
    int ran = 0;
    for (int d = 0; d < 6; d++) {
        tide_dtype dt = dts[d];
        tide_tensor *a = randt(2, sa, dt, dt == TIDE_UINT8 || dt == TIDE_BOOL ? 0 : -4,
                               dt == TIDE_BOOL ? 2 : 5);
        tide_tensor *b = randt(1, sb, dt, dt == TIDE_UINT8 || dt == TIDE_BOOL ? 0 : -3,
                               dt == TIDE_BOOL ? 2 : 4);
        for (int k = 0; k < (int)(sizeof un / sizeof un[0]); k++) {
            tide_tensor *want = un[k].f(a);
            if (!want)
                continue; /* not defined for this dtype */
            tide_jit_trace_begin(NULL, NULL, NULL);
            tide_tensor *got = un[k].f(a);
            tide_jit_trace_end();
            char what[64];
            snprintf(what, sizeof what, "%s(%s)", un[k].name, tide_dtype_name(dt));
            check_close("op", what, got, want, 0);
            tide_release(got), tide_release(want);
            ran++;
        }
        for (int k = 0; k < (int)(sizeof bin / sizeof bin[0]); k++) {
            /* (a op b) op a: broadcast, then a fused member reading a group value */
            tide_tensor *w1 = bin[k].f(a, b);
            if (!w1)
                continue;
            tide_tensor *want = bin[k].f(w1, a);
            tide_release(w1);
            tide_jit_trace_begin(NULL, NULL, NULL);
            tide_tensor *g1 = bin[k].f(a, b), *got = g1 ? bin[k].f(g1, a) : NULL;
            tide_release(g1);
            tide_jit_trace_end();
            char what[64];
            snprintf(what, sizeof what, "%s(%s)", bin[k].name, tide_dtype_name(dt));
            if (want)
                check_close("op", what, got, want, 0);
            tide_release(got), tide_release(want);
            ran++;
        }
        tide_release(a), tide_release(b);
    }
    CHECK(ran > 100, "only %d op/dtype pairs ran", ran);
    tide_clear_error();
}

/* Against float64: the chain and softmax through a graph. */
static void test_reference(void)
{
    int64_t n = 5000, sh[2] = {10, 500};
    tide_tensor *x = randt(1, &n, TIDE_FLOAT32, -3, 3), *a = tide_number(1.5),
                *b = randt(1, &n, TIDE_FLOAT32, -1, 1);
    tide_tensor *in[3] = {x, a, b};
    tide_jit_begin(in, 3);
    tide_tensor *y = f_chain(in);
    tide_graph *g = tide_jit_end(&y, 1);
    const float *xv = tide_data_ptr(x), *bv = tide_data_ptr(b);
    float *yv = malloc(sizeof(float) * 5000);
    tide_to_buffer(y, yv, sizeof(float) * 5000);
    double worst = 0;
    for (int i = 0; i < 5000; i++) {
        double r = tanh((double)(float)(xv[i] * 1.5f) + bv[i]) * (1 / (1 + exp(-(double)xv[i]))) + 0.25;
        worst = fmax(worst, fabs(yv[i] - r));
    }
    CHECK(worst < 1e-5, "chain vs float64: %g", worst);
    free(yv);
    tide_release(y);
    tide_graph_free(g);
    tide_tensor *s = randt(2, sh, TIDE_FLOAT32, -4, 4);
    tide_jit_trace_begin(NULL, NULL, NULL);
    tide_tensor *p = tide_softmax(s, 1);
    tide_jit_trace_end();
    const float *sv = tide_data_ptr(s);
    float pv[5000];
    tide_to_buffer(p, pv, sizeof pv);
    worst = 0;
    for (int r = 0; r < 10; r++) {
        double m = -INFINITY, z = 0;
        for (int c = 0; c < 500; c++)
            m = fmax(m, sv[r * 500 + c]);
        for (int c = 0; c < 500; c++)
            z += exp(sv[r * 500 + c] - m);
        for (int c = 0; c < 500; c++)
            worst = fmax(worst, fabs(pv[r * 500 + c] - exp(sv[r * 500 + c] - m) / z));
    }
    CHECK(worst < 1e-6, "softmax vs float64: %g", worst);
    tide_release(p);
    tide_release(s);
    tide_release(x), tide_release(a), tide_release(b);
}

/* Scalars are runtime arguments: a new learning rate does not recompile; in-place updates are
 * written back on every run. */
static void test_inplace_and_scalars(void)
{
    int64_t n = 1000;
    tide_tensor *w = randt(1, &n, TIDE_FLOAT32, -1, 1), *gr = randt(1, &n, TIDE_FLOAT32, -1, 1);
    float w0[1000], gv[1000], w1[1000];
    tide_to_buffer(w, w0, sizeof w0);
    tide_to_buffer(gr, gv, sizeof gv);
    for (int step = 0; step < 3; step++) {
        double lr = 0.1 * (step + 1);
        tide_jit_stats st = {0};
        tide_jit_trace_begin(&st, NULL, NULL);
        tide_tensor *u = tide_mul_scalar(gr, lr), *nw = tide_sub(w, u);
        CHECK(tide_copy_(w, nw) == 0, "%s", tide_last_error());
        tide_release(u), tide_release(nw);
        tide_jit_trace_end();
        if (step > 0)
            CHECK(st.compiles == 0 && st.hits == 1, "lr %g recompiled (%lld compiles)", lr,
                  (long long)st.compiles);
        tide_to_buffer(w, w1, sizeof w1);
        int bad = 0;
        for (int i = 0; i < 1000; i++) {
            float want = w0[i] - gv[i] * (float)lr;
            bad += w1[i] != want;
            w0[i] = w1[i];
        }
        CHECK(bad == 0, "sgd step %d: %d elements differ", step, bad);
    }
    /* the write of a lone elementwise op into an outside tensor (t.copy_(t + g): no fusion
     * group to carry it), also as the value read after it, and twice in one trace */
    for (int twice = 0; twice < 2; twice++) {
        tide_tensor *t = tide_ones(1, &n, TIDE_FLOAT32);
        tide_jit_trace_begin(NULL, NULL, NULL);
        tide_tensor *s = NULL;
        for (int k = 0; k <= twice; k++) {
            tide_tensor *sum = tide_add(t, gr);
            CHECK(tide_copy_(t, sum) == 0, "%s", tide_last_error());
            tide_release(sum);
        }
        s = tide_sum(t, NULL, 0, false);
        CHECK(tide_jit_trace_end() == 0, "%s", tide_last_error());
        float tv[1000];
        tide_to_buffer(t, tv, sizeof tv);
        int bad = 0;
        double want_sum = 0, got_sum = 0;
        for (int i = 0; i < 1000; i++) {
            float want = 1.0f + gv[i];
            if (twice)
                want = want + gv[i];
            bad += tv[i] != want;
            want_sum += want;
        }
        CHECK(bad == 0, "lone add written into an outside tensor (%d times): %d elements differ",
              twice + 1, bad);
        CHECK(s && tide_item(s, &got_sum) == 0 && fabs(got_sum - want_sum) < 1e-3,
              "the sum read after the write: %g, want %g", got_sum, want_sum);
        tide_release(s), tide_release(t);
    }
    /* a read of the written tensor inside a trace sees the write (a graph break) */
    tide_jit_stats st = {0};
    tide_jit_trace_begin(&st, NULL, NULL);
    CHECK(tide_fill_(w, 2.5) == 0, "%s", tide_last_error());
    double v = 0;
    tide_tensor *first = tide_select(w, 0, 3);
    CHECK(tide_item(first, &v) == 0 && v == 2.5, "read after fill_ in a trace: %g", v);
    CHECK(st.breaks == 1, "breaks %lld", (long long)st.breaks);
    tide_release(first);
    tide_jit_trace_end();
    tide_release(w), tide_release(gr);
}

/* A clone of a result nothing else reads becomes that result (a weight's grad is no longer
 * copied every step); a clone of a result that is read again, or written after, stays a copy. */
static void test_clone_forwarding(void)
{
    int64_t sa[2] = {7, 5}, sb[2] = {5, 3};
    tide_tensor *a = randt(2, sa, TIDE_FLOAT32, -1, 1), *b = randt(2, sb, TIDE_FLOAT32, -1, 1);
    tide_tensor *want = tide_matmul(a, b);
    float wv[21], mv[21], cv[21];
    tide_to_buffer(want, wv, sizeof wv);
    for (int round = 0; round < 2; round++) {
        tide_jit_trace_begin(NULL, NULL, NULL);
        /* nothing reads the product but the clone: forwarded (then written through c) */
        tide_tensor *m1 = tide_matmul(a, b), *t1 = tide_transpose(m1, 0, 1);
        tide_tensor *tt1 = tide_transpose(t1, 0, 1), *c1 = tide_clone(tt1);
        tide_release(m1), tide_release(t1), tide_release(tt1);
        tide_tensor *half = tide_mul_scalar(c1, 0.5);
        CHECK(tide_copy_(c1, half) == 0, "%s", tide_last_error());
        tide_release(half);
        /* the transpose of a transpose: the view autograd hands to a leaf */
        tide_tensor *m = tide_matmul(a, b), *t = tide_transpose(m, 0, 1);
        tide_tensor *tt = tide_transpose(t, 0, 1), *c = tide_clone(tt);
        tide_release(t), tide_release(tt);
        /* m is read again after the clone and c is written: c must stay a copy */
        tide_tensor *m2 = tide_clone(m), *r = tide_add_scalar(m, 1.0);
        CHECK(tide_copy_(m2, r) == 0, "%s", tide_last_error());
        CHECK(tide_jit_trace_end() == 0, "%s", tide_last_error());
        tide_to_buffer(c, cv, sizeof cv);
        tide_to_buffer(m, mv, sizeof mv);
        int bad = 0;
        for (int i = 0; i < 21; i++)
            bad += cv[i] != wv[i] || mv[i] != wv[i];
        tide_to_buffer(m2, cv, sizeof cv);
        for (int i = 0; i < 21; i++)
            bad += cv[i] != wv[i] + 1.0f;
        tide_to_buffer(c1, cv, sizeof cv);
        for (int i = 0; i < 21; i++)
            bad += cv[i] != wv[i] * 0.5f;
        CHECK(bad == 0, "clone forwarding (round %d): %d elements differ", round, bad);
        tide_release(m), tide_release(c), tide_release(m2), tide_release(r), tide_release(c1);
    }
    tide_release(want), tide_release(a), tide_release(b);
}

/* How many lines matching the regular expression pattern the files dumped into dir (TIDE_DUMP)
 * hold: the plans (*_plan.txt) or the generated C (*_g*.c). */
static int count_dump_lines(const char *dir, const char *files, const char *pattern)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cat %s/%s 2>/dev/null | grep -c '%s'", dir, files, pattern);
    FILE *f = popen(cmd, "r");
    int n = -1;
    if (f) {
        if (fscanf(f, "%d", &n) != 1)
            n = -1;
        pclose(f);
    }
    return n;
}

static int count_plan_lines(const char *dir, const char *pattern)
{
    return count_dump_lines(dir, "*_plan.txt", pattern);
}

static int count_source_lines(const char *dir, const char *pattern)
{
    return count_dump_lines(dir, "*_g*.c", pattern);
}

/* Two float ops in a row, the first's value read by the second alone, run as one kernel in the
 * generated C ("mul then add"): every pair of add, sub, mul and div, with op1's value as op2's
 * first or second operand, in float32 and float64, over 2257 elements (not a whole number of
 * vectors), op2's other operand broadcast. Bitwise equal to eager (each op rounds on its own:
 * no fused multiply-add), and within rounding of a double reference. A value read twice, or
 * needed outside the group, is not fused and stays right. */
typedef tide_tensor *(*arith_fn)(const tide_tensor *, const tide_tensor *);

static double arith_ref(int op, double a, double b)
{
    return op == 0 ? a + b : op == 1 ? a - b : op == 2 ? a * b : a / b;
}

static void test_fused_pairs(void)
{
    static const arith_fn ops[4] = {tide_add, tide_sub, tide_mul, tide_div};
    static const char *names[4] = {"add", "sub", "mul", "div"};
    char dir[] = "/tmp/tide_pairs_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    setenv("TIDE_DUMP", dir, 1);
    int64_t sa[2] = {37, 61}, sc[1] = {61}, n = 37 * 61;
    int checked = 0;
    for (int d = 0; d < 2; d++) {
        tide_dtype dt = d ? TIDE_FLOAT64 : TIDE_FLOAT32;
        tide_tensor *a = randt(2, sa, dt, -4, 4), *b = randt(2, sa, dt, 0.5, 3);
        tide_tensor *c = randt(1, sc, dt, 0.5, 2);
        double *va = ref_read(a), *vb = ref_read(b), *vc = ref_read(c);
        for (int o1 = 0; o1 < 4; o1++)
            for (int o2 = 0; o2 < 4; o2++)
                for (int cfirst = 0; cfirst < 2; cfirst++) {
                    tide_tensor *r[2] = {0};
                    for (int pass = 0; pass < 2; pass++) {
                        if (pass)
                            tide_jit_trace_begin(NULL, NULL, NULL);
                        tide_tensor *t = ops[o1](a, b);
                        r[pass] = cfirst ? ops[o2](c, t) : ops[o2](t, c);
                        tide_release(t);
                        if (pass)
                            CHECK(tide_jit_trace_end() == 0, "%s", tide_last_error());
                    }
                    char what[64];
                    snprintf(what, sizeof what, "%s then %s%s (%s)", names[o1], names[o2],
                             cfirst ? " (second operand)" : "", tide_dtype_name(dt));
                    check_close("pair", what, r[1], r[0], 0);
                    double *got = ref_read(r[1]), worst = 0;
                    for (int64_t i = 0; i < n; i++) {
                        double t = arith_ref(o1, va[i], vb[i]);
                        double want = cfirst ? arith_ref(o2, vc[i % 61], t)
                                             : arith_ref(o2, t, vc[i % 61]);
                        double e = fabs(got[i] - want) / (1 + fabs(want));
                        worst = e > worst ? e : worst;
                    }
                    CHECK(worst < (d ? 1e-13 : 1e-5), "%s: %g from the double reference", what,
                          worst);
                    free(got);
                    tide_release(r[0]), tide_release(r[1]);
                    checked++;
                }
        /* t read twice (by the add and the mul): the mul is not fused, the add and mul are */
        tide_tensor *r[2] = {0};
        for (int pass = 0; pass < 2; pass++) {
            if (pass)
                tide_jit_trace_begin(NULL, NULL, NULL);
            tide_tensor *t = tide_mul(a, b), *u = tide_add(t, c);
            r[pass] = tide_mul(u, t);
            tide_release(t), tide_release(u);
            if (pass)
                tide_jit_trace_end();
        }
        check_close("pair", "value read twice", r[1], r[0], 0);
        tide_release(r[0]), tide_release(r[1]);
        free(va), free(vb), free(vc);
        tide_release(a), tide_release(b), tide_release(c);
    }
    unsetenv("TIDE_DUMP");
    CHECK(checked == 64, "pairs checked: %d", checked);
    int fused = count_source_lines(dir, " then ");
    /* each pair's group declares its kernel and calls it; the value-read-twice group fuses one */
    CHECK(fused == 2 * 64 + 2 * 2, "fused pairs in the generated C: %d lines, want %d (in %s)",
          fused, 2 * 64 + 2 * 2, dir);
    CHECK(count_source_lines(dir, "mul then add") == 2 * 2 * 2, "mul then add: %d lines",
          count_source_lines(dir, "mul then add"));
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "%s", cmd);
}

/* out[i, j] = scale * sum_k A[i, k] B[k, j] + add, with A given as rows x depth (ta: stored
 * transposed) and B depth x cols; relu when asked. Double precision. */
static void ref_matmul(const float *a, const float *b, double *out, int64_t m, int64_t n,
                       int64_t k, bool ta)
{
    for (int64_t i = 0; i < m; i++)
        for (int64_t j = 0; j < n; j++) {
            double acc = 0;
            for (int64_t l = 0; l < k; l++)
                acc += (double)(ta ? a[l * m + i] : a[i * k + l]) * b[l * n + j];
            out[i * n + j] = acc;
        }
}

static double max_rel(const tide_tensor *t, const double *want, int64_t n)
{
    float *v = malloc(sizeof(float) * (size_t)n);
    tide_to_buffer(t, v, sizeof(float) * (size_t)n);
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double e = fabs(v[i] - want[i]) / (1 + fabs(want[i]));
        worst = e > worst || isnan(e) ? e : worst;
    }
    free(v);
    return worst;
}

/* A momentum update, buf = buf * m + g then w = w - lr * buf, is one fusion group on the CPU:
 * both writes done by the group, the second reading buf in place after the first. Values over
 * three traced steps against a double reference; the plan holds one group. Reading buf
 * transposed after its write must end the group (a tile would read other tiles' elements, some
 * not yet written): still right. */
static void test_fused_updates(void)
{
    char dir[] = "/tmp/tide_updates_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    int64_t sh[2] = {300, 300}, n = 300 * 300;
    tide_tensor *w = randt(2, sh, TIDE_FLOAT32, -1, 1), *buf = randt(2, sh, TIDE_FLOAT32, -1, 1);
    tide_tensor *g = randt(2, sh, TIDE_FLOAT32, -1, 1);
    double *rw = malloc(sizeof(double) * (size_t)n), *rb = malloc(sizeof(double) * (size_t)n);
    double *rt = malloc(sizeof(double) * (size_t)n);
    float *fv = malloc(sizeof(float) * (size_t)n), *fg = malloc(sizeof(float) * (size_t)n);
    tide_to_buffer(g, fg, sizeof(float) * (size_t)n);
    tide_to_buffer(w, fv, sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        rw[i] = fv[i];
    tide_to_buffer(buf, fv, sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        rb[i] = fv[i];
    for (int transposed = 0; transposed < 2; transposed++) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -f %s/*", dir);
        CHECK(system(cmd) == 0, "rm %s/*", dir);
        setenv("TIDE_DUMP", dir, 1);
        for (int step = 0; step < 3; step++) {
            double m = 0.9, lr = 0.01 * (step + 1);
            tide_jit_trace_begin(NULL, NULL, NULL);
            tide_tensor *bm = tide_mul_scalar(buf, m), *nb = tide_add(bm, g);
            CHECK(tide_copy_(buf, nb) == 0, "%s", tide_last_error());
            tide_tensor *bt = transposed ? tide_transpose(buf, 0, 1) : tide_retain(buf);
            tide_tensor *u = tide_mul_scalar(bt, lr), *nw = tide_sub(w, u);
            CHECK(tide_copy_(w, nw) == 0, "%s", tide_last_error());
            /* temporaries released before the end: otherwise they are results */
            tide_release(bm), tide_release(nb), tide_release(bt), tide_release(u);
            tide_release(nw);
            CHECK(tide_jit_trace_end() == 0, "%s", tide_last_error());
            for (int64_t i = 0; i < n; i++)
                rb[i] = rb[i] * m + fg[i];
            for (int64_t i = 0; i < n; i++)
                rt[i] = rw[i] - lr * (transposed ? rb[(i % 300) * 300 + i / 300] : rb[i]);
            memcpy(rw, rt, sizeof(double) * (size_t)n);
            double eb = max_rel(buf, rb, n), ew = max_rel(w, rw, n);
            CHECK(eb <= 1e-5 && ew <= 1e-5, "momentum update%s, step %d: buf %g, w %g",
                  transposed ? " reading buf transposed" : "", step, eb, ew);
        }
        unsetenv("TIDE_DUMP");
        int groups = count_plan_lines(dir, "^step [0-9]* group");
        CHECK(groups == (transposed ? 2 : 1), "momentum update%s: %d groups",
              transposed ? " reading buf transposed" : "", groups);
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "rm %s", dir);
    tide_release(w), tide_release(buf), tide_release(g);
    free(rw), free(rb), free(rt), free(fv), free(fg);
}

/* A write into an op result of the same graph (a gradient scaled in place: g.copy_(g * c)) is
 * done by the group computing the new value, also a group of that one op: no copy step. Not
 * when the group reads the result through another layout (its transpose). Values as eager. */
static void test_writeback_into_result(void)
{
    char dir[] = "/tmp/tide_wb_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    int64_t sh[2] = {64, 64};
    tide_tensor *x = randt(2, sh, TIDE_FLOAT32, -2, 2), *c = tide_scalar(0.75, TIDE_FLOAT32);
    for (int transposed = 0; transposed < 2; transposed++) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -f %s/*", dir);
        CHECK(system(cmd) == 0, "rm %s/*", dir);
        tide_tensor *r[2] = {0};
        for (int pass = 0; pass < 2; pass++) {
            if (pass == 1) {
                setenv("TIDE_DUMP", dir, 1);
                CHECK(tide_jit_trace_begin(NULL, NULL, NULL) == 0, "%s", tide_last_error());
            }
            tide_tensor *g = tide_exp(x);
            tide_tensor *src = transposed ? tide_transpose(g, 0, 1) : tide_retain(g);
            tide_tensor *scaled = tide_mul(src, c);
            CHECK(tide_copy_(g, scaled) == 0, "%s", tide_last_error());
            tide_release(src), tide_release(scaled);
            r[pass] = g;
            if (pass == 1) {
                CHECK(tide_jit_trace_end() == 0, "%s", tide_last_error());
                unsetenv("TIDE_DUMP");
            }
        }
        bool bitwise;
        CHECK(ref_compare(r[1], r[0], &bitwise) == 0 && bitwise, "g.copy_(g%s * c): jit vs eager",
              transposed ? "^T" : "");
        int copies = count_plan_lines(dir, "inplace copy");
        CHECK(copies == transposed, "g.copy_(g%s * c): %d copy steps, want %d (plans in %s)",
              transposed ? "^T" : "", copies, transposed, dir);
        tide_release(r[0]), tide_release(r[1]);
    }
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "rm %s", dir);
    tide_release(x), tide_release(c);
}

/* CSE: an op computed twice from the same input runs once, also when the first is a trace
 * output (backward recomputing gelu(x) of the forward in one traced step); not across an
 * in-place write of its input, and never for random draws. Values equal eager's. */
static void test_cse_ops(void)
{
    char dir[] = "/tmp/tide_cse_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    setenv("TIDE_DUMP", dir, 1);
    int64_t s[2] = {37, 61};
    tide_tensor *x = randt(2, s, TIDE_FLOAT32, -4, 4), *want[3] = {0}, *got[3] = {0};
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1)
            CHECK(tide_jit_trace_begin(NULL, NULL, NULL) == 0, "%s", tide_last_error());
        tide_tensor **r = pass ? got : want;
        tide_tensor *xc = tide_clone(x);
        r[0] = tide_gelu(xc, false);                           /* an output, read again below */
        tide_tensor *g2 = tide_gelu(xc, false), *e1 = tide_exp(xc), *e2 = tide_exp(xc);
        tide_tensor *ge = tide_mul(g2, e1);
        r[1] = tide_add(ge, e2);
        tide_release(ge);
        tide_fill_(xc, 0.5); /* a write: exp(xc) after it is a new value */
        r[2] = tide_exp(xc);
        tide_release(g2), tide_release(e1), tide_release(e2), tide_release(xc);
        if (pass == 1)
            CHECK(tide_jit_trace_end() == 0, "%s", tide_last_error());
    }
    unsetenv("TIDE_DUMP");
    CHECK(count_plan_lines(dir, "op gelu") == 1, "gelu twice runs once: %d in the plan (%s)",
          count_plan_lines(dir, "op gelu"), dir);
    CHECK(count_plan_lines(dir, "op exp") == 2, "exp: once before the write, once after: %d",
          count_plan_lines(dir, "op exp"));
    for (int i = 0; i < 3; i++) {
        bool bitwise;
        CHECK(ref_compare(got[i], want[i], &bitwise) == 0 && bitwise, "CSE result %d: jit vs eager",
              i);
        tide_release(got[i]), tide_release(want[i]);
    }
    tide_release(x);
}

/* A group right after a matmul that reads it in place runs as the matmul's epilogue, block by
 * block of rows: bias + relu (tiles across rows, a partial last block), softmax (row mode), a
 * momentum-style update of a transposed-A product (a weight grad). Values against a double
 * reference and eager; the plans say the groups were fused. A matmul whose operand is written
 * between it and the group, or that the group reads transposed, is not fused and stays right. */
static void test_matmul_epilogues(void)
{
    char dir[] = "/tmp/tide_epilogue_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    setenv("TIDE_DUMP", dir, 1);
    int64_t sx[2] = {300, 40}, sw[2] = {200, 40}, sb[1] = {200}, sp[2] = {100, 64},
            sq[2] = {64, 300}, sg[2] = {48, 200}, sh[2] = {48, 256}, sz[2] = {200, 256};
    tide_tensor *x = randt(2, sx, TIDE_FLOAT32, -1, 1), *w = randt(2, sw, TIDE_FLOAT32, -1, 1);
    tide_tensor *bias = randt(1, sb, TIDE_FLOAT32, -1, 1), *p = randt(2, sp, TIDE_FLOAT32, -1, 1);
    tide_tensor *q = randt(2, sq, TIDE_FLOAT32, -1, 1), *gx = randt(2, sg, TIDE_FLOAT32, -1, 1);
    tide_tensor *hy = randt(2, sh, TIDE_FLOAT32, -1, 1), *z = randt(2, sz, TIDE_FLOAT32, -1, 1);
    tide_tensor *want[3] = {0}, *got[3] = {0};
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1)
            CHECK(tide_jit_trace_begin(NULL, NULL, NULL) == 0, "%s", tide_last_error());
        tide_tensor **r = pass ? got : want;
        tide_tensor *l = tide_linear(x, w, bias);
        r[0] = tide_relu(l);
        tide_tensor *pq = tide_matmul(p, q);
        r[1] = tide_softmax(pq, 1);
        tide_tensor *gt = tide_transpose(gx, 0, 1), *gh = tide_matmul(gt, hy);
        tide_tensor *zs = tide_mul_scalar(z, 0.9);
        r[2] = tide_add(zs, gh);
        tide_release(l), tide_release(pq), tide_release(gt), tide_release(gh), tide_release(zs);
        if (pass == 1)
            CHECK(tide_jit_trace_end() == 0, "%s", tide_last_error());
    }
    int fused = count_plan_lines(dir, "the epilogue of");
    CHECK(fused == 3, "matmul epilogues fused: %d, want 3 (plans in %s)", fused, dir);
    const char *names[3] = {"linear+relu", "matmul+softmax", "x^T y + 0.9 z"};
    for (int i = 0; i < 3; i++) {
        bool bitwise;
        double e = ref_compare(got[i], want[i], &bitwise);
        CHECK(e == 0, "epilogue %s: jit vs eager max rel diff %g", names[i], e);
    }
    /* the double reference */
    float *fx = malloc(sizeof(float) * 300 * 40), *fw = malloc(sizeof(float) * 200 * 40);
    float *fb = malloc(sizeof(float) * 200), *fp = malloc(sizeof(float) * 100 * 64);
    float *fq = malloc(sizeof(float) * 64 * 300), *fg = malloc(sizeof(float) * 48 * 200);
    float *fh = malloc(sizeof(float) * 48 * 256), *fz = malloc(sizeof(float) * 200 * 256);
    double *ref = malloc(sizeof(double) * 300 * 300);
    tide_to_buffer(x, fx, sizeof(float) * 300 * 40), tide_to_buffer(w, fw, sizeof(float) * 8000);
    tide_to_buffer(bias, fb, sizeof(float) * 200), tide_to_buffer(p, fp, sizeof(float) * 6400);
    tide_to_buffer(q, fq, sizeof(float) * 64 * 300), tide_to_buffer(gx, fg, sizeof(float) * 9600);
    tide_to_buffer(hy, fh, sizeof(float) * 48 * 256), tide_to_buffer(z, fz, sizeof(float) * 51200);
    for (int64_t i = 0; i < 300; i++) /* x w^T + b, relu */
        for (int64_t j = 0; j < 200; j++) {
            double acc = fb[j];
            for (int64_t l = 0; l < 40; l++)
                acc += (double)fx[i * 40 + l] * fw[j * 40 + l];
            ref[i * 200 + j] = acc > 0 ? acc : 0;
        }
    CHECK(max_rel(got[0], ref, 60000) < 1e-5, "linear+relu vs double: %g",
          max_rel(got[0], ref, 60000));
    ref_matmul(fp, fq, ref, 100, 300, 64, false);
    for (int64_t i = 0; i < 100; i++) {
        double mx = -INFINITY, sum = 0;
        for (int64_t j = 0; j < 300; j++)
            mx = ref[i * 300 + j] > mx ? ref[i * 300 + j] : mx;
        for (int64_t j = 0; j < 300; j++)
            sum += exp(ref[i * 300 + j] - mx);
        for (int64_t j = 0; j < 300; j++)
            ref[i * 300 + j] = exp(ref[i * 300 + j] - mx) / sum;
    }
    CHECK(max_rel(got[1], ref, 30000) < 1e-5, "matmul+softmax vs double: %g",
          max_rel(got[1], ref, 30000));
    ref_matmul(fg, fh, ref, 200, 256, 48, true);
    for (int64_t i = 0; i < 51200; i++)
        ref[i] += 0.9 * (double)fz[i];
    CHECK(max_rel(got[2], ref, 51200) < 1e-5, "x^T y + 0.9 z vs double: %g",
          max_rel(got[2], ref, 51200));
    /* not fusable: the operand is written after the matmul, the group reads it transposed, or
     * the group writes back into an operand (y = (s @ y) * 0.5 + 1: other blocks still read y) */
    tide_tensor *pc = tide_clone(p), *pqe = tide_matmul(p, q), *e1 = tide_mul_scalar(pqe, 3.0);
    tide_tensor *want_w = tide_add_scalar(e1, 1.0);
    int64_t s64[2] = {64, 64};
    tide_tensor *sm = randt(2, s64, TIDE_FLOAT32, -1, 1), *y0 = randt(2, s64, TIDE_FLOAT32, -1, 1);
    tide_tensor *y = tide_clone(y0), *sy = tide_matmul(sm, y0), *sy2 = tide_mul_scalar(sy, 0.5);
    tide_tensor *want_y = tide_add_scalar(sy2, 1.0);
    tide_jit_trace_begin(NULL, NULL, NULL);
    tide_tensor *ty = tide_matmul(sm, y), *ty2 = tide_mul_scalar(ty, 0.5);
    tide_tensor *ty3 = tide_add_scalar(ty2, 1.0);
    CHECK(tide_copy_(y, ty3) == 0, "%s", tide_last_error());
    tide_release(ty), tide_release(ty2), tide_release(ty3);
    tide_tensor *m1 = tide_matmul(pc, q), *d2 = tide_mul_scalar(pc, 2.0);
    CHECK(tide_copy_(pc, d2) == 0, "%s", tide_last_error());
    tide_tensor *f1 = tide_mul_scalar(m1, 3.0), *g1 = tide_add_scalar(f1, 1.0);
    tide_tensor *m2 = tide_matmul(p, q), *m2t = tide_transpose(m2, 0, 1);
    tide_tensor *f2 = tide_mul_scalar(m2t, 3.0), *g2 = tide_add_scalar(f2, 1.0);
    CHECK(tide_jit_trace_end() == 0, "%s", tide_last_error());
    tide_tensor *want_t = tide_transpose(want_w, 0, 1);
    bool bitwise;
    CHECK(ref_compare(g1, want_w, &bitwise) == 0 && bitwise, "operand written after the matmul");
    double et = ref_compare(g2, want_t, &bitwise), ey = ref_compare(y, want_y, &bitwise);
    CHECK(et == 0, "group reading the product transposed: %g", et);
    CHECK(ey == 0, "write-back into the matmul's operand: %g", ey);
    CHECK(count_plan_lines(dir, "the epilogue of") == 3, "no epilogue fused where it must not be: %d",
          count_plan_lines(dir, "the epilogue of"));
    unsetenv("TIDE_DUMP");
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "rm %s", dir);
    tide_release(pc), tide_release(pqe), tide_release(e1), tide_release(want_w);
    tide_release(m1), tide_release(d2), tide_release(f1), tide_release(g1), tide_release(m2);
    tide_release(m2t), tide_release(f2), tide_release(g2), tide_release(want_t);
    tide_release(sm), tide_release(y0), tide_release(y), tide_release(sy), tide_release(sy2);
    tide_release(want_y);
    for (int i = 0; i < 3; i++)
        tide_release(want[i]), tide_release(got[i]);
    tide_release(x), tide_release(w), tide_release(bias), tide_release(p), tide_release(q);
    tide_release(gx), tide_release(hy), tide_release(z);
    free(fx), free(fw), free(fb), free(fp), free(fq), free(fg), free(fh), free(fz), free(ref);
}

/* Stride-1 conv2d over [N, C, H, W] with a k x k window and padding pad on every side, in double
 * precision: out [N, O, H + 2 pad - k + 1, same]. With grad set, the gradient with respect to the
 * input instead: x is grad_out [N, O, OH, OW] and out is [N, C, H, W]. */
static void ref_conv(const double *x, const double *w, double *out, int64_t N, int64_t C,
                     int64_t H, int64_t W, int64_t O, int64_t k, int64_t pad, bool grad)
{
    int64_t OH = H + 2 * pad - k + 1, OW = W + 2 * pad - k + 1;
    if (grad)
        memset(out, 0, sizeof(double) * (size_t)(N * C * H * W));
    for (int64_t n = 0; n < N; n++)
        for (int64_t o = 0; o < O; o++)
            for (int64_t i = 0; i < OH; i++)
                for (int64_t j = 0; j < OW; j++) {
                    double acc = 0, g = grad ? x[((n * O + o) * OH + i) * OW + j] : 0;
                    for (int64_t c = 0; c < C; c++)
                        for (int64_t u = 0; u < k; u++)
                            for (int64_t v = 0; v < k; v++) {
                                int64_t ih = i + u - pad, iw = j + v - pad;
                                if (ih < 0 || ih >= H || iw < 0 || iw >= W)
                                    continue;
                                double wt = w[((o * C + c) * k + u) * k + v];
                                if (grad)
                                    out[((n * C + c) * H + ih) * W + iw] += g * wt;
                                else
                                    acc += x[((n * C + c) * H + ih) * W + iw] * wt;
                            }
                    if (!grad)
                        out[((n * O + o) * OH + i) * OW + j] = acc;
                }
}

/* The forms of a conv2d's epilogue, each traced alone (same-shape groups of one trace merge)
 * and bitwise against eager: a bias per channel given as [O, 1, 1], a scalar added, a relu
 * alone, a bias alone, the bias added after the relu (not the form: conv, then the group), a
 * bias that varies along W (not per channel), the sum also returned (an intermediate needed
 * outside), the conv's own result also returned (the product is read elsewhere), and a batch
 * of 5 (split over threads by images in eager). Every tier: where the direct path is absent
 * (baseline) all run as the conv and then the group. */
enum { EPI_BIAS_RELU, EPI_SCALAR_RELU, EPI_RELU, EPI_BIAS, EPI_RELU_BIAS, EPI_BIAS_ALONG_W,
       EPI_SUM_RETURNED, EPI_CONV_RETURNED, EPI_BATCH5, NEPI };

/* Case k's outputs (up to 2) from x, w, b (per channel) and bw (along W). */
static void conv_epilogue_case(int k, const tide_tensor *x, const tide_tensor *w,
                               const tide_tensor *b, const tide_tensor *bw, tide_tensor **r)
{
    const int one[2] = {1, 1}, pad1[2] = {1, 1};
    tide_tensor *c = tide_conv2d(x, w, NULL, one, pad1, one, 1), *t = NULL;
    switch (k) {
    case EPI_BIAS_RELU:
    case EPI_BATCH5:
        t = tide_add(c, b), r[0] = tide_relu(t);
        break;
    case EPI_SCALAR_RELU:
        t = tide_add_scalar(c, 0.25), r[0] = tide_relu(t);
        break;
    case EPI_RELU:
        r[0] = tide_relu(c);
        break;
    case EPI_BIAS:
        r[0] = tide_add(b, c);
        break;
    case EPI_RELU_BIAS:
        t = tide_relu(c), r[0] = tide_add(t, b);
        break;
    case EPI_BIAS_ALONG_W:
        t = tide_add(c, bw), r[0] = tide_relu(t);
        break;
    case EPI_SUM_RETURNED:
        r[0] = tide_add(c, b), r[1] = tide_relu(r[0]);
        break;
    default: /* EPI_CONV_RETURNED */
        t = tide_add(c, b), r[0] = tide_relu(t), r[1] = c, c = NULL;
        break;
    }
    tide_release(t), tide_release(c);
}

static void test_conv_epilogue_forms(void)
{
    int64_t sx[4] = {2, 3, 16, 16}, sx5[4] = {5, 3, 16, 16}, sw[4] = {8, 3, 3, 3},
            sb[3] = {8, 1, 1}, sbw[4] = {1, 1, 1, 16};
    tide_tensor *x = randt(4, sx, TIDE_FLOAT32, -1, 1), *x5 = randt(4, sx5, TIDE_FLOAT32, -1, 1);
    tide_tensor *w = randt(4, sw, TIDE_FLOAT32, -1, 1), *b = randt(3, sb, TIDE_FLOAT32, -1, 1);
    tide_tensor *bw = randt(4, sbw, TIDE_FLOAT32, -1, 1);
    static const char *const names[NEPI] = {
        "bias [O,1,1] + relu", "scalar + relu", "relu alone", "bias alone", "relu then bias",
        "bias along W + relu", "sum returned", "conv returned", "batch of 5"};
    for (int k = 0; k < NEPI; k++) {
        tide_tensor *want[2] = {0}, *got[2] = {0};
        const tide_tensor *in = k == EPI_BATCH5 ? x5 : x;
        conv_epilogue_case(k, in, w, b, bw, want);
        CHECK(tide_jit_trace_begin(NULL, NULL, NULL) == 0, "%s", tide_last_error());
        conv_epilogue_case(k, in, w, b, bw, got);
        CHECK(tide_jit_trace_end() == 0, "%s", tide_last_error());
        for (int i = 0; i < 2 && want[i]; i++) {
            bool bitwise;
            double e = ref_compare(got[i], want[i], &bitwise);
            CHECK(e == 0 && bitwise, "conv epilogue %s (output %d): jit vs eager max rel diff %g",
                  names[k], i, e);
            tide_release(got[i]), tide_release(want[i]);
        }
    }
    tide_release(x), tide_release(x5), tide_release(w), tide_release(b), tide_release(bw);
}

/* Epilogues of batched matmuls, in the device's own BLAS calls: a 4-D attention score
 * softmax(q k^T * 0.25) (row mode, k read transposed, 6 matrices) and a 3-D product with a
 * broadcast B + bias + relu (one tall product). The groups after conv2d are its epilogues,
 * run whole: conv + bias + relu and a one-image conv + relu inside the direct convolution's
 * stores where the tier has it (cpu_jit_conv.c), conv + relu + spatial mean as the conv and
 * then the group. grad_input * 2 + z is not one (a conv2d only). Values bitwise against eager
 * and against a double reference in every tier; the plans say which were fused. */
static void test_product_epilogues(void)
{
    char dir[] = "/tmp/tide_prod_epi_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    setenv("TIDE_DUMP", dir, 1);
    int64_t sx[4] = {8, 3, 12, 12}, sw[4] = {16, 3, 3, 3}, sb[1] = {16}, sx2[4] = {8, 4, 16, 16},
            sw3[4] = {6, 4, 3, 3}, sgo[4] = {8, 6, 16, 16}, sq[4] = {2, 3, 40, 16},
            sa[3] = {3, 64, 32}, sbm[3] = {1, 32, 48}, sb48[1] = {48}, sx1[4] = {1, 3, 64, 64},
            sw4[4] = {32, 3, 3, 3};
    tide_tensor *x = randt(4, sx, TIDE_FLOAT32, -1, 1), *w = randt(4, sw, TIDE_FLOAT32, -1, 1);
    tide_tensor *w2 = randt(4, sw, TIDE_FLOAT32, -1, 1), *b = randt(1, sb, TIDE_FLOAT32, -1, 1);
    tide_tensor *w3 = randt(4, sw3, TIDE_FLOAT32, -1, 1), *go = randt(4, sgo, TIDE_FLOAT32, -1, 1);
    tide_tensor *z = randt(4, sx2, TIDE_FLOAT32, -1, 1), *q = randt(4, sq, TIDE_FLOAT32, -1, 1);
    tide_tensor *k = randt(4, sq, TIDE_FLOAT32, -1, 1), *a3 = randt(3, sa, TIDE_FLOAT32, -1, 1);
    tide_tensor *b3 = randt(3, sbm, TIDE_FLOAT32, -1, 1), *b48 = randt(1, sb48, TIDE_FLOAT32, -1, 1);
    tide_tensor *x1 = randt(4, sx1, TIDE_FLOAT32, -1, 1), *w4 = randt(4, sw4, TIDE_FLOAT32, -1, 1);
    enum { NR = 6 };
    tide_tensor *want[NR] = {0}, *got[NR] = {0};
    const int one[2] = {1, 1}, pad1[2] = {1, 1}, dims_hw[2] = {2, 3};
    const int64_t hw16[2] = {16, 16};
    for (int pass = 0; pass < 2; pass++) {
        if (pass == 1)
            CHECK(tide_jit_trace_begin(NULL, NULL, NULL) == 0, "%s", tide_last_error());
        tide_tensor **r = pass ? got : want;
        tide_tensor *c0 = tide_conv2d(x, w, b, one, pad1, one, 1);
        r[0] = tide_relu(c0);
        tide_tensor *c1 = tide_conv2d(x, w2, NULL, one, pad1, one, 1), *c1r = tide_relu(c1);
        r[1] = tide_mean(c1r, dims_hw, 2, false);
        tide_tensor *gi = tide_conv2d_grad_input(go, w3, hw16, one, pad1, one, 1);
        tide_tensor *gi2 = tide_mul_scalar(gi, 2.0);
        r[2] = tide_add(gi2, z);
        tide_tensor *kt = tide_transpose(k, 2, 3), *s = tide_matmul(q, kt);
        tide_tensor *s4 = tide_mul_scalar(s, 0.25);
        r[3] = tide_softmax(s4, -1);
        tide_tensor *ab = tide_matmul(a3, b3), *abb = tide_add(ab, b48);
        r[4] = tide_relu(abb);
        tide_tensor *c5 = tide_conv2d(x1, w4, NULL, one, pad1, one, 1);
        r[5] = tide_relu(c5);
        tide_release(c0), tide_release(c1), tide_release(c1r), tide_release(gi);
        tide_release(gi2), tide_release(kt), tide_release(s), tide_release(s4);
        tide_release(ab), tide_release(abb), tide_release(c5);
        if (pass == 1)
            CHECK(tide_jit_trace_end() == 0, "%s", tide_last_error());
    }
    unsetenv("TIDE_DUMP");
    int fused = count_plan_lines(dir, "the epilogue of"),
        convs = count_plan_lines(dir, "epilogue of .* conv");
    CHECK(fused == 5 && convs == 3, "product epilogues fused: %d (%d of convs), want 5 (3); "
          "plans in %s", fused, convs, dir);
    const char *names[NR] = {"conv+bias+relu", "conv+relu+mean", "grad_input*2+z",
                             "softmax(q k^T / 4)", "bmm+bias+relu", "one-image conv+relu"};
    for (int i = 0; i < NR; i++) {
        bool bitwise;
        double e = ref_compare(got[i], want[i], &bitwise);
        CHECK(e == 0, "epilogue %s: jit vs eager max rel diff %g", names[i], e);
    }
    /* the double reference */
    double *dx = ref_read(x), *dw = ref_read(w), *dw2 = ref_read(w2), *db = ref_read(b);
    double *dw3 = ref_read(w3), *dgo = ref_read(go), *dz = ref_read(z), *dq = ref_read(q);
    double *dk = ref_read(k), *da = ref_read(a3), *dbm = ref_read(b3), *db48 = ref_read(b48);
    double *dx1 = ref_read(x1), *dw4 = ref_read(w4);
    double *ref = malloc(sizeof(double) * 131072);
    ref_conv(dx, dw, ref, 8, 3, 12, 12, 16, 3, 1, false);
    for (int64_t i = 0; i < 18432; i++) {
        double v = ref[i] + db[i / 144 % 16];
        ref[i] = v > 0 ? v : 0;
    }
    CHECK(max_rel(got[0], ref, 18432) < 1e-5, "conv+bias+relu vs double: %g",
          max_rel(got[0], ref, 18432));
    ref_conv(dx, dw2, ref, 8, 3, 12, 12, 16, 3, 1, false);
    for (int64_t p = 0; p < 128; p++) {
        double acc = 0;
        for (int64_t i = 0; i < 144; i++)
            acc += ref[p * 144 + i] > 0 ? ref[p * 144 + i] : 0;
        ref[p] = acc / 144;
    }
    CHECK(max_rel(got[1], ref, 128) < 1e-5, "conv+relu+mean vs double: %g",
          max_rel(got[1], ref, 128));
    ref_conv(dgo, dw3, ref, 8, 4, 16, 16, 6, 3, 1, true);
    for (int64_t i = 0; i < 8192; i++)
        ref[i] = 2 * ref[i] + dz[i];
    CHECK(max_rel(got[2], ref, 8192) < 1e-5, "grad_input*2+z vs double: %g",
          max_rel(got[2], ref, 8192));
    for (int64_t m = 0; m < 6; m++) /* 6 matrices of 40 x 40 */
        for (int64_t i = 0; i < 40; i++) {
            double *row = ref + (m * 40 + i) * 40, mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < 40; j++) {
                double acc = 0;
                for (int64_t l = 0; l < 16; l++)
                    acc += dq[(m * 40 + i) * 16 + l] * dk[(m * 40 + j) * 16 + l];
                row[j] = acc * 0.25;
                mx = row[j] > mx ? row[j] : mx;
            }
            for (int64_t j = 0; j < 40; j++)
                sum += exp(row[j] - mx);
            for (int64_t j = 0; j < 40; j++)
                row[j] = exp(row[j] - mx) / sum;
        }
    CHECK(max_rel(got[3], ref, 9600) < 1e-5, "softmax(q k^T / 4) vs double: %g",
          max_rel(got[3], ref, 9600));
    for (int64_t m = 0; m < 3; m++)
        for (int64_t i = 0; i < 64; i++)
            for (int64_t j = 0; j < 48; j++) {
                double acc = db48[j];
                for (int64_t l = 0; l < 32; l++)
                    acc += da[(m * 64 + i) * 32 + l] * dbm[l * 48 + j];
                ref[(m * 64 + i) * 48 + j] = acc > 0 ? acc : 0;
            }
    CHECK(max_rel(got[4], ref, 9216) < 1e-5, "bmm+bias+relu vs double: %g",
          max_rel(got[4], ref, 9216));
    ref_conv(dx1, dw4, ref, 1, 3, 64, 64, 32, 3, 1, false);
    for (int64_t i = 0; i < 131072; i++)
        ref[i] = ref[i] > 0 ? ref[i] : 0;
    CHECK(max_rel(got[5], ref, 131072) < 1e-5, "one-image conv+relu vs double: %g",
          max_rel(got[5], ref, 131072));
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "rm %s", dir);
    free(dx), free(dw), free(dw2), free(db), free(dw3), free(dgo), free(dz), free(dq), free(dk);
    free(da), free(dbm), free(db48), free(dx1), free(dw4), free(ref);
    for (int i = 0; i < NR; i++)
        tide_release(want[i]), tide_release(got[i]);
    tide_release(x), tide_release(w), tide_release(w2), tide_release(b), tide_release(w3);
    tide_release(go), tide_release(z), tide_release(q), tide_release(k), tide_release(a3);
    tide_release(b3), tide_release(b48), tide_release(x1), tide_release(w4);
}

/* Iterations of the long loop below: 2 nodes each, past SEGMENT_MAX_NODES (jit/trace.h). */
#define LONG_LOOP 9000

/* Lua-style control flow on tensor values: a break per item(), correct every time. */
static void test_breaks(void)
{
    int64_t n = 100;
    tide_tensor *x = randt(1, &n, TIDE_FLOAT32, -1, 1);
    tide_jit_stats st = {0};
    tide_jit_trace_begin(&st, NULL, NULL);
    tide_tensor *cur = tide_retain(x);
    int iters = 0;
    for (;;) {
        tide_tensor *s = tide_sum(cur, NULL, 0, false), *a = tide_abs(s);
        double v;
        CHECK(tide_item(a, &v) == 0, "%s", tide_last_error());
        tide_release(s), tide_release(a);
        if (v < 1e-3 || ++iters > 30)
            break;
        tide_tensor *h = tide_mul_scalar(cur, 0.5);
        tide_release(cur);
        cur = h;
    }
    CHECK(tide_jit_trace_end() == 0, "%s", tide_last_error());
    CHECK(st.breaks == iters + 1, "breaks %lld for %d iterations", (long long)st.breaks, iters);
    /* the eager answer */
    tide_tensor *e = tide_retain(x);
    int eiters = 0;
    for (;;) {
        tide_tensor *s = tide_sum(e, NULL, 0, false);
        double v;
        tide_item(s, &v);
        tide_release(s);
        if (fabs(v) < 1e-3 || ++eiters > 30)
            break;
        tide_tensor *h = tide_mul_scalar(e, 0.5);
        tide_release(e);
        e = h;
    }
    CHECK(eiters == iters, "jit took %d iterations, eager %d", iters, eiters);
    /* a long loop in one trace runs in pieces and stays right */
    tide_jit_stats ls = {0};
    tide_jit_trace_begin(&ls, NULL, NULL);
    tide_tensor *acc = tide_retain(x);
    for (int i = 0; i < LONG_LOOP; i++) {
        tide_tensor *nx = tide_add_scalar(acc, 1.0);
        tide_release(acc);
        acc = nx;
    }
    CHECK(tide_jit_trace_end() == 0, "%s", tide_last_error());
    CHECK(ls.breaks >= 1, "a %d-node segment was not split (%lld breaks)", 2 * LONG_LOOP,
          (long long)ls.breaks);
    float xv[100], av[100];
    tide_to_buffer(x, xv, sizeof xv);
    tide_to_buffer(acc, av, sizeof av);
    int off = 0;
    for (int i = 0; i < 100; i++) {
        float r = xv[i];
        for (int k = 0; k < LONG_LOOP; k++)
            r = r + 1.0f;
        off += av[i] != r;
    }
    CHECK(off == 0, "long loop: %d elements differ", off);
    tide_release(acc);
    bool bw;
    ref_compare(cur, e, &bw);
    CHECK(bw, "halving loop differs from eager");
    tide_release(cur), tide_release(e), tide_release(x);
}

static void test_errors_and_guards(void)
{
    int64_t n = 8, m = 9;
    tide_tensor *x = randt(1, &n, TIDE_FLOAT32, -1, 1), *y = randt(1, &m, TIDE_FLOAT32, -1, 1);
    CHECK(tide_jit_begin(&x, 1) == 0, "%s", tide_last_error());
    tide_tensor *e = tide_exp(x);
    float buf[8];
    CHECK(tide_to_buffer(e, buf, sizeof buf) < 0 && strstr(tide_last_error(), "graph break"),
          "item during capture: %s", tide_last_error());
    CHECK(tide_jit_begin(&x, 1) < 0 && strstr(tide_last_error(), "already tracing"), "nest: %s",
          tide_last_error());
    tide_graph *g = tide_jit_end(&e, 1);
    CHECK(g != NULL, "%s", tide_last_error());
    tide_tensor *out = NULL;
    CHECK(tide_graph_run(g, &y, 1, &out) < 0 && strstr(tide_last_error(), "shape [9]"),
          "guard: %s", tide_last_error());
    CHECK(tide_graph_run(g, NULL, 0, &out) < 0 && strstr(tide_last_error(), "takes 1"),
          "count: %s", tide_last_error());
    tide_tensor *xi = tide_cast(x, TIDE_FLOAT64);
    CHECK(tide_graph_run(g, &xi, 1, &out) < 0 && strstr(tide_last_error(), "float64"),
          "dtype guard: %s", tide_last_error());
    /* the graph outlives a cleared cache */
    tide_jit_cache_clear();
    tide_tensor *x2 = randt(1, &n, TIDE_FLOAT32, -1, 1), *want = tide_exp(x2);
    CHECK(tide_graph_run(g, &x2, 1, &out) == 0, "run after cache clear: %s", tide_last_error());
    bool bw = false;
    ref_compare(out, want, &bw);
    CHECK(bw, "replay after cache clear differs");
    tide_release(out), tide_release(want), tide_release(x2);
    /* tide_empty_cache releases the plans through the jit's hook: a call seen before compiles
     * again, and a live graph still runs */
    tide_jit_stats s0, s1;
    tide_jit_trace_begin(NULL, NULL, NULL);
    tide_tensor *warm = tide_exp(x);
    tide_jit_trace_end();
    tide_release(warm);
    tide_jit_global_stats(&s0);
    tide_empty_cache();
    tide_jit_trace_begin(NULL, NULL, NULL);
    warm = tide_exp(x);
    tide_jit_trace_end();
    tide_jit_global_stats(&s1);
    CHECK(s1.compiles == s0.compiles + 1,
          "after tide_empty_cache the plan is compiled again (%lld -> %lld)",
          (long long)s0.compiles, (long long)s1.compiles);
    tide_release(warm);
    x2 = randt(1, &n, TIDE_FLOAT32, -1, 1), want = tide_exp(x2);
    CHECK(tide_graph_run(g, &x2, 1, &out) == 0, "run after empty_cache: %s", tide_last_error());
    ref_compare(out, want, &bw);
    CHECK(bw, "replay after empty_cache differs");
    tide_release(out), tide_release(want), tide_release(x2);
    CHECK(tide_jit_end(&e, 1) == NULL, "end without begin");
    CHECK(tide_jit_trace_end() < 0, "trace_end without begin");
    tide_release(e), tide_release(xi);
    tide_graph_free(g);
    tide_release(x), tide_release(y);
}

/* Many threads hitting the cache and running one graph at once. */
typedef struct thr_arg {
    tide_graph *g;
    tide_tensor **in;
    int bad;
} thr_arg;

static void *thread_body(void *p)
{
    thr_arg *a = p;
    for (int i = 0; i < 20; i++) {
        tide_tensor **in = a->in;
        tide_jit_trace_begin(NULL, NULL, NULL);
        tide_tensor *r = f_chain(in);
        tide_jit_trace_end();
        tide_tensor *o = NULL;
        if (tide_graph_run(a->g, in, 3, &o) < 0)
            a->bad++;
        bool bw;
        ref_compare(r, o, &bw);
        a->bad += !bw;
        tide_release(r), tide_release(o);
    }
    return NULL;
}

static void test_threads(void)
{
    int64_t n = 3000;
    tide_tensor *x = randt(1, &n, TIDE_FLOAT32, -1, 1), *a = tide_number(0.7),
                *b = randt(1, &n, TIDE_FLOAT32, -1, 1);
    tide_tensor *in[3] = {x, a, b};
    CHECK(tide_jit_begin(in, 3) == 0, "%s", tide_last_error());
    CHECK(tide_jit_begin(in, 3) < 0, "nested begin");
    tide_tensor *y = f_chain(in);
    tide_graph *g = tide_jit_end(&y, 1);
    tide_release(y);
    tide_jit_stats before, after;
    tide_jit_global_stats(&before);
    pthread_t th[4];
    thr_arg args[4];
    for (int i = 0; i < 4; i++) {
        args[i] = (thr_arg){g, in, 0};
        pthread_create(&th[i], NULL, thread_body, &args[i]);
    }
    int bad = 0;
    for (int i = 0; i < 4; i++) {
        pthread_join(th[i], NULL);
        bad += args[i].bad;
    }
    tide_jit_global_stats(&after);
    CHECK(bad == 0, "%d thread runs differ", bad);
    CHECK(after.compiles - before.compiles <= 1, "threads compiled %lld times",
          (long long)(after.compiles - before.compiles));
    tide_graph_free(g);
    tide_release(x), tide_release(a), tide_release(b);
}

/* The per-function fallback (jit/signatures.c): traced until max_signatures distinct
 * signatures, then eager for good, counted once; a call inside a trace runs inlined (eager). */
static void test_function_fallback(void)
{
    CHECK(tide_jit_function_new(0) == NULL && strstr(tide_last_error(), "max_signatures"),
          "max_signatures 0: %s", tide_last_error());
    tide_jit_function *f = tide_jit_function_new(2);
    int64_t s2 = 2, s3 = 3, s4 = 4;
    tide_tensor *a = tide_zeros(1, &s2, TIDE_FLOAT32), *b = tide_zeros(1, &s3, TIDE_FLOAT32),
                *c = tide_zeros(1, &s4, TIDE_FLOAT32);
    CHECK(f && a && b && c, "%s", tide_last_error());
    tide_jit_function_set_static(f, true); /* sizes 2 and 3: two signatures */
    CHECK(tide_jit_function_admit(f, &a, 1, 0, NULL) == 1, "first signature traced");
    CHECK(tide_jit_function_admit(f, &b, 1, 0, NULL) == 1, "second signature traced");
    CHECK(tide_jit_function_admit(f, &a, 1, 0, NULL) == 1, "a seen signature traced");
    CHECK(tide_jit_function_admit(f, &a, 1, 7, NULL) == 0, "a third signature (other) is eager");
    CHECK(tide_jit_function_is_eager(f), "fallen back");
    CHECK(tide_jit_function_admit(f, &a, 1, 0, NULL) == 0, "eager for good");
    CHECK(tide_jit_function_stats(f)->fallbacks == 1, "fallbacks %lld",
          (long long)tide_jit_function_stats(f)->fallbacks);
    tide_jit_function *g = tide_jit_function_new(8);
    CHECK(tide_jit_trace_begin(NULL, NULL, NULL) == 0, "%s", tide_last_error());
    CHECK(tide_jit_function_admit(g, &c, 1, 0, NULL) == 0, "inside a trace: inlined");
    CHECK(tide_jit_trace_end() == 0, "%s", tide_last_error());
    CHECK(tide_jit_function_admit(g, &c, 1, 0, NULL) == 1, "outside: traced");
    tide_jit_function_free(f);
    tide_jit_function_free(g);
    tide_release(a), tide_release(b), tide_release(c);
}

int main(void)
{
    ref_seed(7);
    test_function_fallback();
    test_differential();
    test_all_ops();
    test_reference();
    test_inplace_and_scalars();
    test_clone_forwarding();
    test_cse_ops();
    test_matmul_epilogues();
    test_product_epilogues();
    test_conv_epilogue_forms();
    test_fused_updates();
    test_writeback_into_result();
    test_fused_pairs();
    test_breaks();
    test_errors_and_guards();
    test_threads();
    return test_summary("test_jit");
}
