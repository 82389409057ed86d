/*
 * test_sdpa.c — scaled_dot_product_attention against a plain reference loop (each score from
 * its definition, a whole-row softmax in double): L != S, several key and query blocks of the
 * CPU kernel, causal (L < S and L > S), bool and float masks, broadcast batch dims,
 * non-contiguous inputs, a fully masked row (NaN, as the composite), float32 and float64; the
 * result independent of the thread count; the gradients against the composite's (matmul, mask,
 * softmax, matmul) and gradcheck; the reference device against the CPU; and the errors.
 *
 * Tolerances, from the numerics: float64 agrees with the double reference to 1e-12 (scores are
 * dots of E <= 16 products, rows of S <= 600 terms, all O(1): a few hundred ulps at most).
 * float32 is computed in float32 like the composite: each score a dot of E products rounded
 * (E * 2^-24 relative), the softmax sum and the output S terms; with |scores| <= ~4 the output's
 * error is below (E + S) * 2^-24 * max|v| ~ 4e-5 at S = 600: 1e-4 absolute + relative.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "ops/dispatch.h"
#include "tide.h"
#include "test_util.h"
#include "test_ref.h"

typedef struct shape_t {
    int nd;
    int64_t s[6];
} shape_t;

typedef struct sdpa_case {
    shape_t q, k, v, mask; /* mask.nd == 0: none */
    int mask_kind;         /* 0 none, 1 bool (true = take part), 2 float (added) */
    bool causal;
    double scale;          /* NaN: the default 1/sqrt(E) */
    bool q_transposed;     /* q stored [.., E, L] and transposed: last stride != 1 */
} sdpa_case;

/* A tensor of shape sh with values uniform in [lo, hi) (bool: about 80% true). */
static tide_tensor *random_tensor(const shape_t *sh, tide_dtype dt, double lo, double hi,
                                  bool transposed)
{
    int64_t n = ref_numel(sh->nd, sh->s), store[6];
    memcpy(store, sh->s, sizeof store);
    if (transposed) {
        store[sh->nd - 1] = sh->s[sh->nd - 2];
        store[sh->nd - 2] = sh->s[sh->nd - 1];
    }
    double *v = malloc(sizeof(double) * (size_t)(n > 0 ? n : 1));
    for (int64_t i = 0; i < n; i++)
        v[i] = dt == TIDE_BOOL ? (ref_uniform() < 0.8) : lo + (hi - lo) * ref_uniform();
    tide_tensor *t = ref_from_doubles(v, sh->nd, store, dt);
    free(v);
    if (!transposed)
        return t;
    tide_tensor *tt = tide_transpose(t, -1, -2);
    tide_release(t);
    return tt;
}

/* Flat row-major index of (batch index bi of nb dims, i, j) in a tensor of shape sh whose batch
 * dims broadcast to bi's. */
static int64_t bcast_index(const shape_t *sh, const int64_t *bi, int nb, int64_t i, int64_t j)
{
    int64_t f = 0;
    int lead = nb - (sh->nd - 2);
    for (int d = 0; d < sh->nd - 2; d++)
        f = f * sh->s[d] + (sh->s[d] == 1 ? 0 : bi[lead + d]);
    f = f * sh->s[sh->nd - 2] + (sh->s[sh->nd - 2] == 1 ? 0 : i);
    return f * sh->s[sh->nd - 1] + (sh->s[sh->nd - 1] == 1 ? 0 : j);
}

/* The reference output [batch.., L, Ev] as doubles, from the inputs' values. */
static double *reference(const sdpa_case *c, const double *q, const double *k, const double *v,
                         const double *m, int nb, const int64_t *batch)
{
    int64_t L = c->q.s[c->q.nd - 2], E = c->q.s[c->q.nd - 1], S = c->k.s[c->k.nd - 2],
            Ev = c->v.s[c->v.nd - 1], N = ref_numel(nb, batch);
    double scale = isnan(c->scale) ? 1 / sqrt((double)E) : c->scale;
    double *out = calloc((size_t)(N * L * Ev + 1), sizeof(double)), *p = malloc(sizeof(double) * (size_t)(S + 1));
    int64_t bi[6] = {0};
    for (int64_t b = 0; b < N; b++) {
        for (int d = nb - 1, r = (int)b; d >= 0; d--) {
            bi[d] = r % batch[d];
            r /= (int)batch[d];
        }
        for (int64_t i = 0; i < L; i++) {
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < S; j++) {
                double s = 0;
                for (int64_t e = 0; e < E; e++)
                    s += q[bcast_index(&c->q, bi, nb, i, e)] * k[bcast_index(&c->k, bi, nb, j, e)];
                s *= scale;
                if (c->causal && j > i)
                    s = -INFINITY;
                if (c->mask_kind == 1 && !m[bcast_index(&c->mask, bi, nb, i, j)])
                    s = -INFINITY;
                if (c->mask_kind == 2)
                    s += m[bcast_index(&c->mask, bi, nb, i, j)];
                p[j] = s;
                mx = s > mx ? s : mx;
            }
            for (int64_t j = 0; j < S; j++)
                sum += p[j] = exp(p[j] - mx);
            for (int64_t e = 0; e < Ev; e++) {
                double o = 0;
                for (int64_t j = 0; j < S; j++)
                    o += p[j] * v[bcast_index(&c->v, bi, nb, j, e)];
                out[(b * L + i) * Ev + e] = o / sum; /* all masked: 0/0 = NaN, as softmax */
            }
        }
    }
    free(p);
    return out;
}

static tide_tensor *run(const sdpa_case *c, tide_tensor *q, tide_tensor *k, tide_tensor *v,
                        tide_tensor *m)
{
    return tide_scaled_dot_product_attention(q, k, v, m, c->causal, 0,
                                             isnan(c->scale) ? NULL : &c->scale);
}

/* The batch shape: q's, k's and v's batch dims broadcast. */
static int batch_of(const sdpa_case *c, int64_t *batch)
{
    const shape_t *t[3] = {&c->q, &c->k, &c->v};
    int nb = 0;
    for (int i = 0; i < 3; i++)
        nb = t[i]->nd - 2 > nb ? t[i]->nd - 2 : nb;
    for (int d = 0; d < nb; d++) {
        batch[d] = 1;
        for (int i = 0; i < 3; i++) {
            int td = d - (nb - (t[i]->nd - 2));
            if (td >= 0 && t[i]->s[td] != 1)
                batch[d] = t[i]->s[td];
        }
    }
    return nb;
}

static void check_case(const char *name, const sdpa_case *c, tide_dtype dt)
{
    tide_tensor *q = random_tensor(&c->q, dt, -1, 1, c->q_transposed);
    tide_tensor *k = random_tensor(&c->k, dt, -1, 1, false);
    tide_tensor *v = random_tensor(&c->v, dt, -1, 1, false);
    tide_tensor *m = c->mask_kind ? random_tensor(&c->mask, c->mask_kind == 1 ? TIDE_BOOL : dt,
                                                  -1, 1, false)
                                  : NULL;
    double *qv = ref_read(q), *kv = ref_read(k), *vv = ref_read(v), *mv = m ? ref_read(m) : NULL;
    int64_t batch[6];
    int nb = batch_of(c, batch);
    double *want = reference(c, qv, kv, vv, mv, nb, batch);
    tide_tensor *out = run(c, q, k, v, m);
    CHECK(out != NULL, "%s: %s", name, tide_last_error());
    if (out) {
        int64_t n = tide_numel(out);
        double *got = ref_read(out);
        double tol = dt == TIDE_FLOAT64 ? 1e-12 : 1e-4;
        int64_t bad = ref_mismatch(got, want, n, tol, tol);
        CHECK(bad < 0, "%s %s: element %lld: got %.9g, want %.9g", name, ref_dtype_name(dt),
              (long long)bad, bad >= 0 ? got[bad] : 0, bad >= 0 ? want[bad] : 0);
        free(got);
        /* one thread and two give the same bits (the kernel's tasks do not depend on it) */
        int threads = tide_get_num_threads();
        tide_set_num_threads(threads == 1 ? 2 : 1);
        tide_tensor *again = run(c, q, k, v, m);
        tide_set_num_threads(threads);
        double *a = again ? ref_read(again) : NULL, *o = ref_read(out);
        int64_t differ = again ? 0 : 1;
        for (int64_t i = 0; a && i < n; i++)
            differ += !(a[i] == o[i] || (isnan(a[i]) && isnan(o[i])));
        CHECK(differ == 0, "%s: the thread count changed %lld elements", name, (long long)differ);
        free(a), free(o);
        tide_release(again);
    }
    tide_release(out);
    free(qv), free(kv), free(vv), free(mv), free(want);
    tide_release(q), tide_release(k), tide_release(v), tide_release(m);
}

#define SH(...) {sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t), {__VA_ARGS__}}

static const sdpa_case cases[] = {
    /* plain, L != S, Ev != E, a given scale */
    {SH(2, 3, 5, 4), SH(2, 3, 7, 4), SH(2, 3, 7, 3), SH(0), 0, false, 0.7, false},
    /* several forward key blocks (128) and query blocks (128), causal, L < S */
    {SH(2, 150, 8), SH(2, 270, 8), SH(2, 270, 5), SH(0), 0, true, NAN, false},
    /* causal with L > S: the rows past S see every key */
    {SH(1, 2, 9, 4), SH(1, 2, 5, 4), SH(1, 2, 5, 4), SH(0), 0, true, NAN, false},
    /* bool mask [L, S] over every batch; k and v broadcast over the first batch dim */
    {SH(2, 3, 6, 4), SH(3, 11, 4), SH(1, 3, 11, 2), SH(6, 11), 1, false, NAN, false},
    /* float mask [B, 1, L, S] broadcast over the heads; q stored transposed */
    {SH(2, 3, 7, 5), SH(2, 3, 9, 5), SH(2, 3, 9, 4), SH(2, 1, 7, 9), 2, false, NAN, true},
    /* no batch dims at all; a mask of one row broadcast over L */
    {SH(4, 3), SH(6, 3), SH(6, 2), SH(1, 6), 2, false, NAN, false},
};

static void test_values(void)
{
    ref_seed(7);
    char name[32];
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int d = 0; d < 2; d++) {
            snprintf(name, sizeof name, "case %zu", i);
            check_case(name, &cases[i], d ? TIDE_FLOAT64 : TIDE_FLOAT32);
        }
    if (!RUNNING_ON_VALGRIND) { /* the backward's 512-row query chunks, twice */
        sdpa_case big = {SH(1, 600, 4), SH(1, 600, 4), SH(1, 600, 3), SH(0), 0, true, NAN, false};
        check_case("L = S = 600 causal", &big, TIDE_FLOAT32);
    }
}

/* A fully masked row gives NaN there and finite values elsewhere, as the composite. */
static void test_masked_row(void)
{
    int64_t qs[2] = {2, 3}, ms[2] = {2, 4};
    tide_tensor *q = tide_ones(2, qs, TIDE_FLOAT32);
    tide_tensor *k = tide_ones(2, (int64_t[]){4, 3}, TIDE_FLOAT32);
    tide_tensor *v = tide_ones(2, (int64_t[]){4, 2}, TIDE_FLOAT32);
    double mvals[8] = {1, 0, 1, 0, 0, 0, 0, 0};
    tide_tensor *m = ref_from_doubles(mvals, 2, ms, TIDE_BOOL);
    tide_tensor *out = tide_scaled_dot_product_attention(q, k, v, m, false, 0, NULL);
    double *o = out ? ref_read(out) : NULL;
    CHECK(o && o[0] == 1 && o[1] == 1 && isnan(o[2]) && isnan(o[3]),
          "masked row: %g %g %g %g", o ? o[0] : 0, o ? o[1] : 0, o ? o[2] : 0, o ? o[3] : 0);
    free(o);
    tide_release(out), tide_release(q), tide_release(k), tide_release(v), tide_release(m);
}

/* The unfused composite: matmul, scale, mask, softmax, matmul. */
static tide_tensor *composite(const sdpa_case *c, tide_tensor *q, tide_tensor *k, tide_tensor *v,
                              tide_tensor *m)
{
    int64_t E = c->q.s[c->q.nd - 1], L = c->q.s[c->q.nd - 2], S = c->k.s[c->k.nd - 2];
    tide_tensor *kt = tide_transpose(k, -1, -2), *s0 = tide_matmul(q, kt);
    tide_tensor *s = tide_mul_scalar(s0, isnan(c->scale) ? 1 / sqrt((double)E) : c->scale);
    tide_release(kt), tide_release(s0);
    tide_tensor *masked = NULL;
    if (c->causal) {
        tide_tensor *ones = tide_ones(2, (int64_t[]){L, S}, TIDE_BOOL);
        tide_tensor *future = tide_triu(ones, 1);
        masked = tide_masked_fill(s, future, -INFINITY);
        tide_release(ones), tide_release(future);
    } else if (c->mask_kind == 1) {
        tide_tensor *no = tide_logical_not(m);
        masked = tide_masked_fill(s, no, -INFINITY);
        tide_release(no);
    } else if (c->mask_kind == 2) {
        masked = tide_add(s, m);
    }
    if (masked) {
        tide_release(s);
        s = masked;
    }
    tide_tensor *p = tide_softmax(s, -1), *out = tide_matmul(p, v);
    tide_release(s), tide_release(p);
    return out;
}

/* Gradients of sum(out * w) for q, k, v by the fused op and by the composite, float64. The two
 * compute the same sums in other orders: 1e-10. */
static void test_grads_vs_composite(void)
{
    ref_seed(11);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++) {
        const sdpa_case *c = &cases[i];
        tide_tensor *in[3] = {random_tensor(&c->q, TIDE_FLOAT64, -1, 1, c->q_transposed),
                              random_tensor(&c->k, TIDE_FLOAT64, -1, 1, false),
                              random_tensor(&c->v, TIDE_FLOAT64, -1, 1, false)};
        tide_tensor *m = c->mask_kind ? random_tensor(&c->mask, c->mask_kind == 1 ? TIDE_BOOL
                                                                                  : TIDE_FLOAT64,
                                                      -1, 1, false)
                                      : NULL;
        double *g[2][3] = {{0}};
        tide_tensor *w = NULL;
        for (int f = 0; f < 2; f++) {
            for (int j = 0; j < 3; j++) {
                tide_requires_grad_(in[j], true);
                tide_set_grad(in[j], NULL);
            }
            tide_tensor *out = f ? composite(c, in[0], in[1], in[2], m) : run(c, in[0], in[1], in[2], m);
            if (!w && out) {
                shape_t os = {tide_ndim(out), {0}};
                memcpy(os.s, tide_shape(out), sizeof(int64_t) * (size_t)os.nd);
                w = random_tensor(&os, TIDE_FLOAT64, -1, 1, false);
            }
            tide_tensor *prod = out ? tide_mul(out, w) : NULL, *l = prod ? tide_sum(prod, NULL, 0, false) : NULL;
            CHECK(l && tide_backward(l, NULL, false) == 0, "case %zu backward: %s", i, tide_last_error());
            for (int j = 0; j < 3; j++) {
                tide_tensor *gr = tide_grad(in[j]);
                g[f][j] = gr ? ref_read(gr) : NULL;
                tide_release(gr);
            }
            tide_release(out), tide_release(prod), tide_release(l);
        }
        for (int j = 0; j < 3; j++) {
            int64_t n = tide_numel(in[j]), bad = g[0][j] && g[1][j] ? ref_mismatch(g[0][j], g[1][j], n, 1e-10, 1e-10) : 0;
            CHECK(bad < 0, "case %zu grad of input %d: element %lld: fused %.12g composite %.12g", i, j,
                  (long long)bad, bad >= 0 && g[0][j] ? g[0][j][bad] : 0, bad >= 0 && g[1][j] ? g[1][j][bad] : 0);
            free(g[0][j]), free(g[1][j]);
            tide_release(in[j]);
        }
        tide_release(w), tide_release(m);
    }
}

typedef struct gc_ctx {
    const sdpa_case *c;
    tide_tensor *mask;
} gc_ctx;

static tide_tensor *gc_fn(void *ctx, tide_tensor *const *in, int n)
{
    (void)n;
    const gc_ctx *g = ctx;
    return run(g->c, in[0], in[1], in[2], g->mask);
}

static void test_gradcheck(void)
{
    ref_seed(5);
    static const sdpa_case small[] = {
        {SH(2, 3, 4), SH(2, 5, 4), SH(2, 5, 3), SH(0), 0, true, NAN, false},
        {SH(3, 4), SH(5, 4), SH(5, 2), SH(3, 5), 2, false, 0.5, false},
    };
    for (size_t i = 0; i < 2; i++) {
        const sdpa_case *c = &small[i];
        tide_tensor *in[3] = {random_tensor(&c->q, TIDE_FLOAT64, -1, 1, false),
                              random_tensor(&c->k, TIDE_FLOAT64, -1, 1, false),
                              random_tensor(&c->v, TIDE_FLOAT64, -1, 1, false)};
        gc_ctx g = {c, c->mask_kind ? random_tensor(&c->mask, TIDE_FLOAT64, -1, 1, false) : NULL};
        for (int j = 0; j < 3; j++)
            tide_requires_grad_(in[j], true);
        /* central differences of a smooth function: error ~ eps^2, rounding ~ 1e-16/eps */
        int rc = td_gradcheck(gc_fn, &g, in, 3, 1e-6, 1e-7, 1e-6);
        CHECK(rc == 0, "gradcheck %zu: %s", i, tide_last_error());
        for (int j = 0; j < 3; j++)
            tide_release(in[j]);
        tide_release(g.mask);
    }
}

/* The reference device (devices/ref, double loops) against the CPU kernel, forward and the
 * gradients, float64: 1e-12. */
static void test_ref_device(void)
{
    ref_seed(9);
    const sdpa_case *c = &cases[3]; /* bool mask, broadcast batch */
    tide_tensor *in[3] = {random_tensor(&c->q, TIDE_FLOAT64, -1, 1, false),
                          random_tensor(&c->k, TIDE_FLOAT64, -1, 1, false),
                          random_tensor(&c->v, TIDE_FLOAT64, -1, 1, false)};
    tide_tensor *m = random_tensor(&c->mask, TIDE_BOOL, 0, 1, false);
    double *vals[2][4] = {{0}};
    for (int d = 0; d < 2; d++) {
        tide_tensor *x[3], *md = tide_to(m, d ? "ref" : "cpu");
        for (int j = 0; j < 3; j++) {
            x[j] = tide_to(in[j], d ? "ref" : "cpu");
            tide_tensor *leaf = tide_detach(x[j]);
            tide_release(x[j]);
            x[j] = leaf;
            tide_requires_grad_(x[j], true);
        }
        tide_tensor *out = run(c, x[0], x[1], x[2], md);
        tide_tensor *l = out ? tide_sum(out, NULL, 0, false) : NULL;
        CHECK(l && tide_backward(l, NULL, false) == 0, "ref device %d: %s", d, tide_last_error());
        tide_tensor *oc = out ? tide_to(out, "cpu") : NULL;
        vals[d][3] = oc ? ref_read(oc) : NULL;
        for (int j = 0; j < 3; j++) {
            tide_tensor *gr = tide_grad(x[j]), *gc = gr ? tide_to(gr, "cpu") : NULL;
            vals[d][j] = gc ? ref_read(gc) : NULL;
            tide_release(gr), tide_release(gc), tide_release(x[j]);
        }
        tide_release(oc), tide_release(out), tide_release(l), tide_release(md);
    }
    int64_t n[4] = {tide_numel(in[0]), tide_numel(in[1]), tide_numel(in[2]), 2 * 3 * 6 * 2};
    for (int j = 0; j < 4; j++) {
        int64_t bad = vals[0][j] && vals[1][j] ? ref_mismatch(vals[1][j], vals[0][j], n[j], 1e-12, 1e-12) : 0;
        CHECK(bad < 0, "ref vs cpu, %s: element %lld", j == 3 ? "output" : "a gradient", (long long)bad);
        free(vals[0][j]), free(vals[1][j]);
    }
    for (int j = 0; j < 3; j++)
        tide_release(in[j]);
    tide_release(m);
}

static void test_errors(void)
{
    tide_tensor *q = tide_ones(3, (int64_t[]){2, 5, 4}, TIDE_FLOAT32);
    tide_tensor *k = tide_ones(3, (int64_t[]){2, 6, 4}, TIDE_FLOAT32);
    tide_tensor *v = tide_ones(3, (int64_t[]){2, 6, 3}, TIDE_FLOAT32);
    tide_tensor *k3 = tide_ones(3, (int64_t[]){2, 6, 3}, TIDE_FLOAT32);
    tide_tensor *v7 = tide_ones(3, (int64_t[]){2, 7, 3}, TIDE_FLOAT32);
    tide_tensor *kb = tide_ones(3, (int64_t[]){3, 6, 4}, TIDE_FLOAT32);
    tide_tensor *kd = tide_ones(3, (int64_t[]){2, 6, 4}, TIDE_FLOAT64);
    tide_tensor *qi = tide_ones(3, (int64_t[]){2, 5, 4}, TIDE_INT64);
    tide_tensor *q1 = tide_ones(1, (int64_t[]){4}, TIDE_FLOAT32);
    tide_tensor *mb = tide_ones(2, (int64_t[]){5, 5}, TIDE_BOOL);
    tide_tensor *mi = tide_ones(2, (int64_t[]){5, 6}, TIDE_INT32);
    tide_tensor *mok = tide_ones(2, (int64_t[]){5, 6}, TIDE_BOOL);
    const char *op = "scaled_dot_product_attention";
    CHECK_ERROR(tide_scaled_dot_product_attention(q, k3, v, NULL, false, 0, NULL), op,
                "key's last dim must equal query's (E = 4)", "key [2, 6, 3] float32");
    CHECK_ERROR(tide_scaled_dot_product_attention(q, k, v7, NULL, false, 0, NULL), op,
                "value's second-to-last dim", "value [2, 7, 3] float32");
    CHECK_ERROR(tide_scaled_dot_product_attention(q, kb, v, NULL, false, 0, NULL), op,
                "batch dims", "key [3, 6, 4] float32");
    CHECK_ERROR(tide_scaled_dot_product_attention(q, kd, v, NULL, false, 0, NULL), op,
                "one dtype", "key [2, 6, 4] float64");
    CHECK_ERROR(tide_scaled_dot_product_attention(qi, k, v, NULL, false, 0, NULL), op, "query",
                "int64");
    CHECK_ERROR(tide_scaled_dot_product_attention(q1, k, v, NULL, false, 0, NULL), op,
                "at least 2 dims", "query [4] float32");
    CHECK_ERROR(tide_scaled_dot_product_attention(q, k, v, mb, false, 0, NULL), op,
                "attn_mask [5, 5] bool does not broadcast to [..., L, S] = [..., 5, 6]");
    CHECK_ERROR(tide_scaled_dot_product_attention(q, k, v, mi, false, 0, NULL), op,
                "attn_mask must be bool or the query's dtype", "[5, 6] int32");
    CHECK_ERROR(tide_scaled_dot_product_attention(q, k, v, mok, true, 0, NULL), op,
                "attn_mask and is_causal cannot both be set");
    CHECK_ERROR(tide_scaled_dot_product_attention(q, k, v, NULL, false, 1.5, NULL), op,
                "dropout_p must be in [0, 1), got 1.5");
    CHECK_ERROR(tide_scaled_dot_product_attention(q, k, v, NULL, false, 0.1, NULL), op,
                "dropout_p > 0 is not supported yet");
    double inf = INFINITY;
    CHECK_ERROR(tide_scaled_dot_product_attention(q, k, v, NULL, false, 0, &inf), op,
                "scale must be finite");
    CHECK_ERROR(tide_scaled_dot_product_attention(NULL, k, v, NULL, false, 0, NULL), op);
    tide_tensor *all[] = {q, k, v, k3, v7, kb, kd, qi, q1, mb, mi, mok};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tide_release(all[i]);
}

/* The packed outputs' two layouts (core/primitive.h): with a batch dim they are stored
 * heads-last, so that joining the heads ([B, H, L, Ev] -> [B, L, H * Ev]) is a view; the
 * primitive with the two flags of graph files written before (no third) stores them
 * [B, H, L, Ev] contiguous. Both hold the same values, bit for bit. */
static void test_packed_layouts(void)
{
    shape_t sq = SH(2, 3, 5, 4), sv = SH(2, 3, 5, 6);
    tide_tensor *q = random_tensor(&sq, TIDE_FLOAT32, -1, 1, false);
    tide_tensor *k = random_tensor(&sq, TIDE_FLOAT32, -1, 1, false);
    tide_tensor *v = random_tensor(&sv, TIDE_FLOAT32, -1, 1, false);
    tide_tensor *out = tide_scaled_dot_product_attention(q, k, v, NULL, true, 0, NULL);
    tide_tensor *joined = out ? tide_transpose(out, 1, 2) : NULL;
    CHECK(joined && tide_is_contiguous(joined), "out.transpose(1, 2) of [2, 3, 5, 6] is a "
          "contiguous view (heads-last storage)");
    tide_attrs old = {.nints = 2, .ints = {1, 0}, .values = {0.5}};
    td_meta meta = {1, {2 * 3 * 5 * 7}, TIDE_FLOAT32, q->device};
    tide_tensor *in[3] = {q, k, v};
    tide_tensor *packed = td_dispatch(TIDE_OP_SDPA, &meta, in, 3, &old);
    float got[180], want[180];
    int64_t n = 180;
    tide_tensor *contig = out ? tide_contiguous(out) : NULL;
    CHECK(packed && contig, "%s", tide_last_error());
    if (packed && contig) {
        tide_to_buffer(contig, want, sizeof want);
        float all[210];
        tide_to_buffer(packed, all, sizeof all);
        memcpy(got, all, sizeof got);
        CHECK(memcmp(got, want, sizeof(float) * (size_t)n) == 0,
              "two flags: [B, H, L, Ev] contiguous, the same bits as heads-last");
    }
    tide_release(packed), tide_release(contig), tide_release(joined), tide_release(out);
    tide_release(q), tide_release(k), tide_release(v);
}

int main(void)
{
    test_values();
    test_masked_row();
    test_grads_vs_composite();
    test_gradcheck();
    test_ref_device();
    test_errors();
    test_packed_layouts();
    int rc = test_summary("test_sdpa");
    tide_shutdown();
    return rc;
}
