/*
 * gradcheck.c — the analytic gradient against central finite differences, in float64
 * (autograd.h has the contract). The perturbation writes straight into the input's memory, as
 * a test utility may: no graph is alive while it does.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ops/dispatch.h"
#include "autograd.h"

/* Fixed weights in [0.5, 1.5) with both signs, different per element. */
static double weight(int64_t i)
{
    double w = 0.5 + fmod((double)(i * 7919 % 1009) * 0.618033988749895, 1.0);
    return (i % 3 == 1) ? -w : w;
}

/* L = sum(out * W), a 0-dim float64 tensor (new reference), or NULL. */
static tide_tensor *weighted_sum(tide_tensor *out)
{
    if (!tide_dtype_is_floating((tide_dtype)out->dtype)) {
        td_error("gradcheck: f returned a %s tensor; it must be floating-point",
                 tide_dtype_name((tide_dtype)out->dtype));
        return NULL;
    }
    int64_t numel = td_numel(out->ndim, out->shape);
    double *w = td_malloc(sizeof(double) * (size_t)(numel ? numel : 1));
    if (!w) {
        td_error("gradcheck: out of memory");
        return NULL;
    }
    for (int64_t i = 0; i < numel; i++)
        w[i] = weight(i);
    tide_tensor *wt = td_from_data_on(out->device, w, out->ndim, out->shape, TIDE_FLOAT64);
    free(w);
    tide_tensor *o64 = wt ? tide_cast(out, TIDE_FLOAT64) : NULL;
    tide_tensor *prod = o64 ? tide_mul(o64, wt) : NULL;
    tide_tensor *sum = prod ? tide_sum(prod, NULL, 0, false) : NULL;
    tide_release(prod);
    tide_release(o64);
    tide_release(wt);
    return sum;
}

static int eval_loss(td_gradcheck_fn f, void *ctx, tide_tensor *const *inputs, int n, double *v)
{
    tide_tensor *out = f(ctx, inputs, n);
    if (!out)
        return -1;
    tide_tensor *l = weighted_sum(out);
    tide_release(out);
    int rc = l ? tide_item(l, v) : -1;
    tide_release(l);
    return rc;
}

/* The storage offset of the i-th element (row-major) of t. */
static int64_t element_offset(const tide_tensor *t, int64_t i)
{
    int64_t off = t->offset;
    for (int d = t->ndim - 1; d >= 0; d--) {
        int64_t size = t->shape[d];
        off += (i % size) * t->strides[d];
        i /= size;
    }
    return off;
}

static void index_str(char *buf, size_t size, const tide_tensor *t, int64_t i)
{
    int64_t idx[TIDE_MAX_DIMS];
    for (int d = t->ndim - 1; d >= 0; d--) {
        idx[d] = i % t->shape[d];
        i /= t->shape[d];
    }
    int len = snprintf(buf, size, "[");
    for (int d = 0; d < t->ndim && len < (int)size; d++)
        len += snprintf(buf + len, size - (size_t)len, "%s%lld", d ? ", " : "", (long long)idx[d]);
    if (len < (int)size)
        snprintf(buf + len, size - (size_t)len, "]");
}

int td_gradcheck(td_gradcheck_fn f, void *ctx, tide_tensor *const *inputs, int n, double eps,
                 double atol, double rtol)
{
    if (!f || (!inputs && n > 0) || n < 0)
        return td_error("gradcheck: f or inputs missing");
    for (int k = 0; k < n; k++) {
        tide_tensor *x = inputs[k];
        if (!x)
            return td_error("gradcheck: input %d is NULL", k);
        if (!tide_requires_grad(x))
            continue;
        if (x->dtype != TIDE_FLOAT64 || !tide_data_ptr(x))
            return td_error("gradcheck: input %d must be a float64 CPU tensor, got %s", k,
                            tide_dtype_name((tide_dtype)x->dtype));
        for (int d = 0; d < x->ndim; d++)
            if (x->strides[d] == 0 && x->shape[d] > 1)
                return td_error("gradcheck: input %d is an expanded view; perturbing one element "
                                "would move several",
                                k);
        tide_set_grad(x, NULL);
    }
    /* The analytic gradient. */
    tide_tensor *out = f(ctx, inputs, n);
    if (!out)
        return -1;
    tide_tensor *loss = weighted_sum(out);
    tide_release(out);
    if (!loss)
        return -1;
    int rc = tide_requires_grad(loss) ? tide_backward(loss, NULL, false) : 0;
    tide_release(loss);
    if (rc < 0)
        return -1;
    bool prev = tide_set_grad_enabled(false);
    for (int k = 0; k < n && rc == 0; k++) {
        tide_tensor *x = inputs[k];
        if (!tide_requires_grad(x))
            continue;
        int64_t numel = td_numel(x->ndim, x->shape);
        double *analytic = td_calloc((size_t)(numel ? numel : 1), sizeof(double));
        if (!analytic) {
            rc = td_error("gradcheck: out of memory");
            break;
        }
        tide_tensor *g = tide_grad(x);
        if (g && tide_to_buffer(g, analytic, sizeof(double) * (size_t)numel) < 0)
            rc = -1;
        tide_release(g);
        double *base = (double *)x->storage->buffer;
        for (int64_t i = 0; i < numel && rc == 0; i++) {
            double *p = base + element_offset(x, i), orig = *p, lp, lm;
            *p = orig + eps;
            rc = eval_loss(f, ctx, inputs, n, &lp);
            *p = orig - eps;
            if (rc == 0)
                rc = eval_loss(f, ctx, inputs, n, &lm);
            *p = orig;
            if (rc < 0)
                break;
            double numeric = (lp - lm) / (2 * eps), a = analytic[i];
            if (!(fabs(a - numeric) <= atol + rtol * fabs(numeric))) {
                char idx[160];
                index_str(idx, sizeof idx, x, i);
                rc = td_error("gradcheck: input %d element %s: analytic gradient %.10g, numeric "
                              "%.10g (difference %.3g)",
                              k, idx, a, numeric, fabs(a - numeric));
            }
        }
        free(analytic);
    }
    tide_set_grad_enabled(prev);
    return rc;
}

/* ---- gradgradcheck ---------------------------------------------------------------------------- */

#define GG_MAX_INPUTS 16

typedef struct gg_ctx {
    td_gradcheck_fn f;
    void *ctx;
} gg_ctx;

/* Fixed weights of t's shape in float64 (new reference): the gradient fed to f's output. */
static tide_tensor *output_weights(const tide_tensor *t)
{
    int64_t numel = td_numel(t->ndim, t->shape);
    double *w = td_malloc(sizeof(double) * (size_t)(numel ? numel : 1));
    if (!w) {
        td_error("gradgradcheck: out of memory");
        return NULL;
    }
    for (int64_t i = 0; i < numel; i++)
        w[i] = weight(i + 17);
    tide_tensor *wt = tide_from_data(w, t->ndim, t->shape, TIDE_FLOAT64);
    free(w);
    return wt;
}

/* (inputs..., v) -> the gradients of <f(inputs), v> with respect to the inputs that require
 * grad, each flattened (zeros where none reaches), concatenated: its gradient is f's second
 * derivative (and, in v, the gradient's linearity in the incoming gradient). Grad mode is on
 * inside, as taking a gradient needs it. */
static tide_tensor *grad_of_f(void *vctx, tide_tensor *const *inputs, int n)
{
    gg_ctx *c = vctx;
    bool prev = tide_set_grad_enabled(true);
    tide_tensor *wrt[GG_MAX_INPUTS], *grads[GG_MAX_INPUTS] = {0}, *parts[GG_MAX_INPUTS] = {0};
    int nw = 0, rc = 0;
    for (int k = 0; k < n - 1; k++)
        if (tide_requires_grad(inputs[k]))
            wrt[nw++] = inputs[k];
    tide_tensor *out = c->f(c->ctx, inputs, n - 1), *v = NULL, *flat = NULL;
    if (!out)
        rc = -1;
    else if (tide_requires_grad(out) && !(v = tide_cast(inputs[n - 1], (tide_dtype)out->dtype)))
        rc = -1;
    if (rc == 0 && v)
        rc = tide_autograd_grad(&out, (const tide_tensor *const *)&v, 1, wrt, nw, true, true,
                                true, grads);
    for (int k = 0; k < nw && rc == 0; k++) {
        int64_t numel = td_numel(wrt[k]->ndim, wrt[k]->shape);
        parts[k] = grads[k] ? tide_reshape(grads[k], 1, &numel)
                            : td_full_on(wrt[k]->device, "gradgradcheck", 1, &numel, 0,
                                         TIDE_FLOAT64);
        if (!parts[k])
            rc = -1;
    }
    if (rc == 0)
        flat = tide_cat(parts, nw, 0);
    for (int k = 0; k < nw; k++) {
        tide_release(parts[k]);
        tide_release(grads[k]);
    }
    tide_release(v);
    tide_release(out);
    tide_set_grad_enabled(prev);
    return flat;
}

int td_gradgradcheck(td_gradcheck_fn f, void *ctx, tide_tensor *const *inputs, int n, double eps,
                     double atol, double rtol)
{
    if (n < 0 || n >= GG_MAX_INPUTS)
        return td_error("gradgradcheck: at most %d inputs, got %d", GG_MAX_INPUTS - 1, n);
    tide_tensor *all[GG_MAX_INPUTS];
    memcpy(all, inputs, sizeof *all * (size_t)n);
    /* v, the gradient fed to f's output, is checked too: a leaf of the output's shape */
    tide_tensor *out = f(ctx, inputs, n);
    if (!out)
        return -1;
    tide_tensor *v = output_weights(out);
    tide_release(out);
    if (!v || tide_requires_grad_(v, true) < 0) {
        tide_release(v);
        return -1;
    }
    all[n] = v;
    gg_ctx c = {f, ctx};
    int rc = td_gradcheck(grad_of_f, &c, all, n + 1, eps, atol, rtol);
    tide_release(v);
    return rc;
}
