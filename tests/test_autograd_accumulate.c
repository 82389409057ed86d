/*
 * test_autograd_accumulate.c — how backward sums gradients that reach one tensor many times
 * (autograd/engine.c, autograd/deferred.c), against sums written out here in float64:
 *  - a weight used by several products x_t @ W^T gets one joined product at its last use: its
 *    grad, the inputs' grads, a use that receives no gradient, a recurrence (checked against
 *    tide_autograd_grad, which takes the formulas' path), the grad_ready hook seeing the whole
 *    gradient, and create_graph;
 *  - selects and slices of one tensor add into their views of its gradient in place: mixed
 *    with a whole-tensor gradient arriving before or after, and a gradient tensor that another
 *    input shares (an add hands both inputs the same tensor), which must not be written.
 * Values are float64 and each expected gradient is a short sum, so agreement is to a few ulps
 * of the largest term: rtol 1e-12.
 */
#include <stdlib.h>

#include "test_ref.h"
#include "test_util.h"

#define RTOL 1e-12

static tide_tensor *rand_tensor(int64_t rows, int64_t cols, bool grad)
{
    int64_t shape[2] = {rows, cols};
    double *v = malloc(sizeof(double) * (size_t)(rows * cols));
    for (int64_t i = 0; i < rows * cols; i++)
        v[i] = 2 * ref_uniform() - 1;
    tide_tensor *t = ref_from_doubles(v, 2, shape, TIDE_FLOAT64);
    free(v);
    if (grad)
        tide_requires_grad_(t, true);
    return t;
}

/* sum(a * b) as a new reference (consumes a). */
static tide_tensor *dot_sum(tide_tensor *a, const tide_tensor *b)
{
    tide_tensor *p = tide_mul(a, b);
    tide_tensor *s = tide_sum(p, NULL, 0, false);
    tide_release(p);
    tide_release(a);
    return s;
}

static tide_tensor *add_into(tide_tensor *acc, tide_tensor *term)
{
    if (!acc)
        return term;
    tide_tensor *s = tide_add(acc, term);
    tide_release(acc);
    tide_release(term);
    return s;
}

/* Compares t's grad (or t itself when grad is false) with want[n]. */
static void check_values(const char *what, const tide_tensor *t, const double *want, int64_t n)
{
    tide_tensor *g = t ? tide_grad(t) : NULL;
    CHECK(g && tide_numel(g) == n, "%s: no gradient of %lld elements", what, (long long)n);
    if (!g)
        return;
    double *got = ref_read(g);
    int64_t bad = ref_mismatch(got, want, n, RTOL, 1e-15);
    CHECK(bad < 0, "%s: element %lld is %.17g, expected %.17g", what, (long long)bad,
          bad >= 0 ? got[bad] : 0.0, bad >= 0 ? want[bad] : 0.0);
    free(got);
    tide_release(g);
}

/* ---- a weight shared by several products ------------------------------------------------- */

enum { USES = 5, ROWS = 3, IN = 4, OUT = 6 };

typedef struct hook_seen {
    const tide_tensor *weight;
    double *grad; /* the weight's grad when grad_ready named it */
    int calls;
} hook_seen;

static int remember_grad(void *ctx, tide_tensor *leaf)
{
    hook_seen *s = ctx;
    if (leaf != s->weight)
        return 0;
    tide_tensor *g = tide_grad(leaf);
    free(s->grad);
    s->grad = g ? ref_read(g) : NULL;
    tide_release(g);
    s->calls++;
    return 0;
}

/* loss = sum_t <x_t @ W^T, c_t> over the first USES - 1 uses; the last use's product is made
 * but not used, so its node receives no gradient. dW = sum_t c_t^T x_t, dx_t = c_t W. */
static void test_shared_weight(bool hooked, bool create_graph)
{
    const char *mode = create_graph ? "create_graph" : hooked ? "hooked" : "plain";
    tide_tensor *w = rand_tensor(OUT, IN, true), *x[USES], *c[USES], *loss = NULL, *unused;
    for (int t = 0; t < USES; t++) {
        x[t] = rand_tensor(ROWS, IN, true);
        c[t] = rand_tensor(ROWS, OUT, false);
        if (t < USES - 1)
            loss = add_into(loss, dot_sum(tide_linear(x[t], w, NULL), c[t]));
    }
    unused = tide_linear(x[USES - 1], w, NULL);
    hook_seen seen = {.weight = w};
    if (hooked)
        tide_set_backward_hooks(remember_grad, NULL, &seen);
    CHECK(tide_backward_ex(loss, NULL, create_graph, create_graph) == 0, "%s: backward: %s", mode,
          tide_last_error());
    tide_set_backward_hooks(NULL, NULL, NULL);
    double *wv = ref_read(w), dw[OUT * IN] = {0};
    for (int t = 0; t < USES - 1; t++) {
        double *xv = ref_read(x[t]), *cv = ref_read(c[t]), dx[ROWS * IN] = {0};
        for (int r = 0; r < ROWS; r++)
            for (int o = 0; o < OUT; o++)
                for (int i = 0; i < IN; i++) {
                    dw[o * IN + i] += cv[r * OUT + o] * xv[r * IN + i];
                    dx[r * IN + i] += cv[r * OUT + o] * wv[o * IN + i];
                }
        check_values(mode, x[t], dx, ROWS * IN);
        free(xv);
        free(cv);
    }
    check_values(mode, w, dw, OUT * IN);
    tide_tensor *none = tide_grad(x[USES - 1]);
    CHECK(!none, "%s: the unused product's input got a gradient", mode);
    tide_release(none);
    if (hooked) {
        CHECK(seen.calls == 1, "grad_ready named the weight %d times", seen.calls);
        int64_t bad = seen.grad ? ref_mismatch(seen.grad, dw, OUT * IN, RTOL, 1e-15) : 0;
        CHECK(seen.grad && bad < 0, "grad_ready saw the weight's grad before it was whole");
    }
    free(seen.grad);
    free(wv);
    for (int t = 0; t < USES; t++) {
        tide_set_grad(x[t], NULL);
        tide_release(x[t]);
        tide_release(c[t]);
    }
    tide_set_grad(w, NULL); /* a create_graph grad refers to w through its graph */
    tide_release(unused);
    tide_release(loss);
    tide_release(w);
}

/* h_t = tanh(h_{t-1} @ W^T + x_t @ U^T), loss = sum(h_T * c): backward (joined products)
 * against tide_autograd_grad (the formulas, one product per use) on the same graph. */
static void test_recurrence(void)
{
    enum { STEPS = 6, B = 2, H = 5 };
    tide_tensor *w = rand_tensor(H, H, true), *u = rand_tensor(H, H, true);
    tide_tensor *h = rand_tensor(B, H, false), *c = rand_tensor(B, H, false);
    for (int t = 0; t < STEPS; t++) {
        tide_tensor *x = rand_tensor(B, H, false);
        tide_tensor *a = tide_linear(h, w, NULL), *b = tide_linear(x, u, NULL);
        tide_tensor *s = tide_add(a, b);
        tide_release(h);
        h = tide_tanh(s);
        tide_release(s);
        tide_release(a);
        tide_release(b);
        tide_release(x);
    }
    tide_tensor *loss = dot_sum(h, c), *want[2] = {0};
    tide_tensor *inputs[2] = {w, u};
    CHECK(tide_autograd_grad(&loss, NULL, 1, inputs, 2, true, false, false, want) == 0,
          "autograd_grad: %s", tide_last_error());
    CHECK(tide_backward(loss, NULL, false) == 0, "backward: %s", tide_last_error());
    for (int k = 0; k < 2 && want[0]; k++) {
        double *wv = ref_read(want[k]);
        check_values(k ? "recurrence: U" : "recurrence: W", inputs[k], wv, H * H);
        free(wv);
        tide_release(want[k]);
    }
    tide_release(loss);
    tide_release(c);
    tide_release(w);
    tide_release(u);
}

/* ---- selects and slices of one tensor ---------------------------------------------------- */

/* P = 2 A and B3 = 3 B (nodes), Q = P + B3; loss = <Q, e> (a whole-tensor gradient, first or
 * last) + the rows of P against c_t + a strided column slice of P against d. The add gives P
 * and B3 the same gradient tensor, which B3 (also used against f) must find unchanged.
 * dA = 2 (e + rows + slice), dB = 3 (e + f). */
static void test_views(bool whole_first)
{
    enum { R = 4, C = 6 };
    const char *mode = whole_first ? "views, whole gradient first" : "views, whole gradient last";
    tide_tensor *a = rand_tensor(R, C, true), *b = rand_tensor(R, C, true);
    tide_tensor *e = rand_tensor(R, C, false), *d = rand_tensor(R, 2, false), *c[R];
    tide_tensor *p = tide_mul_scalar(a, 2), *b3 = tide_mul_scalar(b, 3), *q = tide_add(p, b3);
    tide_tensor *f = rand_tensor(R, C, false);
    /* B3's other use: B3 waits for it while the views of P are added */
    tide_tensor *loss = dot_sum(tide_retain(b3), f);
    if (whole_first)
        loss = add_into(loss, dot_sum(tide_retain(q), e));
    for (int t = 0; t < R; t++) {
        int64_t shape[1] = {C};
        double v[C];
        for (int k = 0; k < C; k++)
            v[k] = 2 * ref_uniform() - 1;
        c[t] = ref_from_doubles(v, 1, shape, TIDE_FLOAT64);
        loss = add_into(loss, dot_sum(tide_select(p, 0, t), c[t]));
    }
    loss = add_into(loss, dot_sum(tide_slice(p, 1, 1, 5, 2), d)); /* columns 1 and 3 */
    if (!whole_first)
        loss = add_into(loss, dot_sum(tide_retain(q), e));
    CHECK(tide_backward(loss, NULL, false) == 0, "%s: backward: %s", mode, tide_last_error());
    double *ev = ref_read(e), *dv = ref_read(d), *fv = ref_read(f), da[R * C];
    for (int r = 0; r < R; r++) {
        double *cv = ref_read(c[r]);
        for (int k = 0; k < C; k++)
            da[r * C + k] = ev[r * C + k] + cv[k] + (k == 1 ? dv[r * 2] : k == 3 ? dv[r * 2 + 1] : 0);
        free(cv);
    }
    for (int i = 0; i < R * C; i++) {
        da[i] *= 2;
        ev[i] = 3 * (ev[i] + fv[i]);
    }
    check_values(mode, a, da, R * C);
    check_values(mode, b, ev, R * C);
    free(ev);
    free(dv);
    free(fv);
    tide_release(f);
    for (int t = 0; t < R; t++)
        tide_release(c[t]);
    tide_release(loss);
    tide_release(q);
    tide_release(b3);
    tide_release(p);
    tide_release(d);
    tide_release(e);
    tide_release(b);
    tide_release(a);
}

int main(void)
{
    ref_seed(7);
    test_shared_weight(false, false);
    test_shared_weight(true, false);
    test_shared_weight(false, true);
    test_recurrence();
    test_views(true);
    test_views(false);
    return test_summary("test_autograd_accumulate");
}
