/*
 * test_autograd_higher.c — higher-order gradients: tide_autograd_grad (values, non-leaf inputs,
 * several outputs with grad_outputs, allow_unused, the errors, .grad untouched), create_graph
 * through tide_backward_ex (grads in a graph, out-of-place accumulation), graphs freed (memory
 * back to where it was), the float32-only primitives (qlinear, linear_half) and TO
 * differentiated twice, and attention's refused double backward. Every gradcheck case of
 * test_autograd.c is also gradgradchecked there.
 */
#include <math.h>
#include <stdlib.h>

#include "autograd/autograd.h"
#include "test_util.h"

/* Intermediates are kept here and released by drop() at the end of each test. */
static tide_tensor *pool[256];
static int npool;

static tide_tensor *K(tide_tensor *t)
{
    if (t && npool < 256)
        pool[npool++] = t;
    return t;
}

static void drop(void)
{
    while (npool > 0)
        tide_release(pool[--npool]);
}

static tide_tensor *vec(const double *v, int64_t n, tide_dtype dt, bool grad)
{
    tide_tensor *d = tide_from_data(v, 1, &n, TIDE_FLOAT64);
    tide_tensor *t = dt == TIDE_FLOAT64 ? d : tide_cast(d, dt);
    if (t != d)
        tide_release(d);
    if (grad)
        tide_requires_grad_(t, true);
    return t;
}

/* t's values (float64 view) equal want within tol (relative to max(1, |want|)). */
static bool values_are(const tide_tensor *t, const double *want, int64_t n, double tol)
{
    if (!t || tide_numel(t) != n)
        return false;
    tide_tensor *d = tide_cast(t, TIDE_FLOAT64);
    double got[64];
    bool ok = d && tide_to_buffer(d, got, sizeof(double) * (size_t)n) == 0;
    for (int64_t i = 0; ok && i < n; i++)
        ok = fabs(got[i] - want[i]) <= tol * fmax(1, fabs(want[i]));
    tide_release(d);
    return ok;
}

static tide_tensor *sum_all(const tide_tensor *t) { return tide_sum(t, NULL, 0, false); }

static bool error_has(const char *part) { return strstr(tide_last_error(), part) != NULL; }

/* y = sum(x^3): dy/dx = 3x^2 with create_graph, whose sum differentiates to 6x; .grad untouched. */
static void test_grad_values(void)
{
    const double xv[3] = {1, -2, 0.5};
    tide_tensor *x = vec(xv, 3, TIDE_FLOAT64, true);
    tide_tensor *y = sum_all(K(tide_pow_scalar(x, 3))), *g = NULL, *h = NULL;
    CHECK(tide_autograd_grad(&y, NULL, 1, &x, 1, true, true, false, &g) == 0, "grad: %s",
          tide_last_error());
    CHECK(values_are(g, (double[]){3, 12, 0.75}, 3, 1e-12), "dy/dx = 3x^2");
    CHECK(tide_requires_grad(g) && tide_grad_fn_name(g), "create_graph: the gradient is in a graph");
    tide_tensor *gs = sum_all(g);
    CHECK(tide_autograd_grad(&gs, NULL, 1, &x, 1, false, false, false, &h) == 0, "grad 2: %s",
          tide_last_error());
    CHECK(values_are(h, (double[]){6, -12, 3}, 3, 1e-12), "d(sum 3x^2)/dx = 6x");
    CHECK(!tide_requires_grad(h), "without create_graph the result is outside the graph");
    tide_tensor *xg = tide_grad(x);
    CHECK(xg == NULL, "grad leaves x.grad alone");
    /* without retain_graph the graph's saved tensors go: a second walk is refused */
    tide_tensor *again = NULL;
    CHECK(tide_autograd_grad(&y, NULL, 1, &x, 1, false, false, false, &again) == 0 &&
              values_are(again, (double[]){3, 12, 0.75}, 3, 1e-12),
          "the retained graph again: %s", tide_last_error());
    tide_release(again);
    again = NULL;
    CHECK(tide_autograd_grad(&y, NULL, 1, &x, 1, false, false, false, &again) < 0 &&
              error_has("second time") && !again,
          "a freed graph: %s", tide_last_error());
    tide_tensor *tmp[] = {y, g, gs, h};
    for (size_t i = 0; i < 4; i++)
        tide_release(tmp[i]);
    tide_release(x);
}

/* A result inside the graph as an input; two outputs, one with a gradient given; an unused input
 * (an error, or NULL under allow_unused); an input that does not require grad. */
static void test_grad_inputs_and_outputs(void)
{
    const double xv[2] = {1.5, -0.5};
    tide_tensor *x = vec(xv, 2, TIDE_FLOAT64, true), *z = vec(xv, 2, TIDE_FLOAT64, true);
    tide_tensor *u = tide_mul_scalar(x, 2);                 /* u = 2x */
    tide_tensor *a = sum_all(K(tide_mul(u, u)));            /* a = sum(u^2): da/du = 2u */
    tide_tensor *b = tide_exp(x);                           /* b = e^x, fed v */
    tide_tensor *v = vec((double[]){1, 2}, 2, TIDE_FLOAT64, false);
    tide_tensor *gu = NULL, *gx[2] = {NULL, NULL};
    CHECK(tide_autograd_grad(&a, NULL, 1, &u, 1, true, false, false, &gu) == 0 &&
              values_are(gu, (double[]){6, -2}, 2, 1e-12),
          "grad with respect to a non-leaf: %s", tide_last_error());
    tide_tensor *outs[2] = {a, b}, *ins[2] = {x, z};
    const tide_tensor *gouts[2] = {NULL, v};
    CHECK(tide_autograd_grad(outs, gouts, 2, ins, 2, true, false, false, gx) < 0 &&
              error_has("input 2") && error_has("allow_unused") && !gx[0] && !gx[1],
          "an unused input is an error: %s", tide_last_error());
    CHECK(tide_autograd_grad(outs, gouts, 2, ins, 2, true, false, true, gx) == 0, "%s",
          tide_last_error());
    /* 8x + v e^x */
    CHECK(values_are(gx[0], (double[]){12 + exp(1.5), -4 + 2 * exp(-0.5)}, 2, 1e-12),
          "two outputs, one with grad_outputs");
    CHECK(gx[1] == NULL, "allow_unused: NULL for the unused input");
    tide_tensor *c = tide_ones(1, (int64_t[]){2}, TIDE_FLOAT64), *gc = NULL;
    CHECK(tide_autograd_grad(&a, NULL, 1, &c, 1, true, false, false, &gc) < 0 &&
              error_has("does not require grad"),
          "an input outside the graph: %s", tide_last_error());
    CHECK(tide_autograd_grad(&b, NULL, 1, &x, 1, true, false, false, &gc) < 0 &&
              error_has("implicitly"),
          "a non-scalar output needs grad_outputs: %s", tide_last_error());
    tide_tensor *tmp[] = {x, z, u, a, b, v, gu, gx[0], c};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++)
        tide_release(tmp[i]);
}

/* backward with create_graph: x.grad = 3x^2 in a graph; a backward of its sum adds 6x (out of
 * place, as PyTorch). Clearing x.grad breaks the cycle x -> grad -> graph -> x, and every byte
 * comes back. */
static void test_backward_create_graph(void)
{
    size_t before = 0, after = 0, cached = 0;
    tide_memory_stats(&before, &cached);
    const double xv[3] = {1, -2, 0.5};
    tide_tensor *x = vec(xv, 3, TIDE_FLOAT64, true);
    tide_tensor *c = tide_pow_scalar(x, 3), *y = sum_all(c);
    CHECK(tide_backward_ex(y, NULL, true, true) == 0, "backward create_graph: %s",
          tide_last_error());
    tide_tensor *g = tide_grad(x);
    CHECK(values_are(g, (double[]){3, 12, 0.75}, 3, 1e-12) && tide_requires_grad(g),
          "x.grad = 3x^2, inside a graph");
    tide_tensor *gs = sum_all(g);
    tide_release(g);
    CHECK(tide_backward_ex(gs, NULL, false, false) == 0, "backward of the gradient: %s",
          tide_last_error());
    g = tide_grad(x);
    CHECK(values_are(g, (double[]){3 + 6, 12 - 12, 0.75 + 3}, 3, 1e-12),
          "x.grad = 3x^2 + 6x after the second backward");
    tide_release(g);
    tide_set_grad(x, NULL);
    tide_release(gs);
    tide_release(y);
    tide_release(c);
    tide_release(x);
    tide_memory_stats(&after, &cached);
    CHECK(after == before, "the graphs are freed: %zu bytes in use before, %zu after", before,
          after);
}

/* <grad_x f, u> differentiated again for f = sum(op(x)^2), op(x) = x @ W^T computed by a
 * float32-only primitive: H u = 2 (u W^T) W, W the weight as the primitive reads it. */
static void check_hvp_of_linear(const char *name, tide_tensor *x, tide_tensor *y,
                                tide_tensor *w32)
{
    tide_tensor *f = K(sum_all(K(tide_mul(y, y)))), *gx = NULL, *hu = NULL;
    CHECK(tide_autograd_grad(&f, NULL, 1, &x, 1, true, true, false, &gx) == 0, "%s: %s", name,
          tide_last_error());
    K(gx);
    tide_tensor *u = K(tide_full(2, (int64_t[]){2, 32}, 0.25, TIDE_FLOAT32));
    tide_tensor *gu = K(sum_all(K(tide_mul(gx, u))));
    CHECK(tide_autograd_grad(&gu, NULL, 1, &x, 1, false, false, false, &hu) == 0, "%s hvp: %s",
          name, tide_last_error());
    K(hu);
    tide_tensor *want = K(tide_mul_scalar(
        K(tide_matmul(K(tide_matmul(u, K(tide_transpose(w32, 0, 1)))), w32)), 2));
    double got[64] = {0}, ref[64] = {0};
    tide_to_buffer(K(tide_cast(hu, TIDE_FLOAT64)), got, sizeof got);
    tide_to_buffer(K(tide_cast(want, TIDE_FLOAT64)), ref, sizeof ref);
    double worst = 0, scale = 0;
    for (int i = 0; i < 64; i++) {
        worst = fmax(worst, fabs(got[i] - ref[i]));
        scale = fmax(scale, fabs(ref[i]));
    }
    /* float32 sums of 3 and 32 terms: well inside 1e-5 of the largest value */
    CHECK(scale > 0 && worst <= 1e-5 * scale, "%s: H u against 2 (u W^T) W: worst error %.3g of %.3g",
          name, worst, scale);
}

/* qlinear and linear_half (float32 activations only) differentiated twice. */
static void test_float32_primitives(void)
{
    double wv[3 * 32], xv[2 * 32];
    for (int i = 0; i < 3 * 32; i++)
        wv[i] = sin(0.37 * i) * 0.5;
    for (int i = 0; i < 2 * 32; i++)
        xv[i] = cos(0.21 * i);
    tide_tensor *w = K(tide_cast(K(tide_from_data(wv, 2, (int64_t[]){3, 32}, TIDE_FLOAT64)),
                                 TIDE_FLOAT32));
    tide_tensor *x = K(tide_cast(K(tide_from_data(xv, 2, (int64_t[]){2, 32}, TIDE_FLOAT64)),
                                 TIDE_FLOAT32));
    tide_requires_grad_(x, true);
    tide_tensor *q = K(tide_quantize(w, TIDE_Q8_0));
    tide_tensor *wq = K(tide_dequantize(q, TIDE_Q8_0, 32));
    CHECK(q && wq, "quantize: %s", tide_last_error());
    check_hvp_of_linear("qlinear", x, K(tide_qlinear(x, q, TIDE_Q8_0)), wq);
    tide_tensor *wh = K(tide_cast(w, TIDE_BFLOAT16));
    tide_tensor *y = K(tide_linear(x, wh, NULL));
    CHECK(y && strcmp(tide_grad_fn_name(y) ? tide_grad_fn_name(y) : "", "") != 0,
          "linear_half: %s", tide_last_error());
    check_hvp_of_linear("linear_half", x, y, K(tide_cast(wh, TIDE_FLOAT32)));
    drop();
}

/* TO differentiated twice (when a second device is there): f = sum(to(x, dev)^3) on dev. */
static void test_to_twice(void)
{
    const double xv[3] = {1, -2, 0.5};
    tide_tensor *x = K(vec(xv, 3, TIDE_FLOAT32, true));
    tide_tensor *xd = K(tide_to(x, "vulkan"));
    if (!xd) {
        printf("test_autograd_higher: no Vulkan device, TO twice skipped (%s)\n",
               tide_last_error());
        tide_clear_error();
        drop();
        return;
    }
    tide_tensor *f = K(sum_all(K(tide_pow_scalar(xd, 3)))), *g = NULL, *h = NULL;
    CHECK(tide_autograd_grad(&f, NULL, 1, &x, 1, true, true, false, &g) == 0, "%s",
          tide_last_error());
    tide_tensor *gs = K(sum_all(K(g)));
    CHECK(tide_autograd_grad(&gs, NULL, 1, &x, 1, false, false, false, &h) == 0, "%s",
          tide_last_error());
    CHECK(values_are(K(h), (double[]){6, -12, 3}, 3, 1e-6), "through TO and back: 6x");
    drop();
}

/* Attention's gradient (SDPA_GRAD) has no formula: a second derivative is refused by name. */
static void test_sdpa_refused(void)
{
    int64_t shape[3] = {1, 2, 4};
    tide_tensor *q = K(tide_full(3, shape, 0.5, TIDE_FLOAT64));
    tide_requires_grad_(q, true);
    tide_tensor *kv = K(tide_full(3, shape, 0.25, TIDE_FLOAT64));
    tide_tensor *o = K(tide_scaled_dot_product_attention(q, kv, kv, NULL, false, 0, NULL));
    tide_tensor *f = K(sum_all(K(tide_mul(o, o)))), *g = NULL, *h = NULL;
    CHECK(tide_autograd_grad(&f, NULL, 1, &q, 1, true, true, false, &g) == 0,
          "first gradient of attention with create_graph: %s", tide_last_error());
    tide_tensor *gs = K(sum_all(K(g)));
    CHECK(tide_autograd_grad(&gs, NULL, 1, &q, 1, false, false, false, &h) < 0 &&
              error_has("double backward of scaled_dot_product_attention is not supported"),
          "refused by name: %s", tide_last_error());
    drop();
}

int main(void)
{
    test_grad_values();
    test_grad_inputs_and_outputs();
    test_backward_create_graph();
    test_float32_primitives();
    test_to_twice();
    test_sdpa_refused();
    drop();
    return test_summary("test_autograd_higher");
}
