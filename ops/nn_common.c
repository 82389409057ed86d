/* nn_common.c — the scope, checks and no-grad section shared by the composite nn ops. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "nn_common.h"

static void remember_failure(nn_scope *s)
{
    if (s->failed)
        return;
    s->failed = true;
    snprintf(s->first_error, sizeof s->first_error, "%s", tide_last_error());
}

tide_tensor *nn_keep(nn_scope *s, tide_tensor *t)
{
    if (!t) {
        remember_failure(s);
        return NULL;
    }
    if (s->n == NN_SCOPE_MAX) { /* a composite holding too much at once: a bug in ops/nn_*.c */
        tide_release(t);
        td_error("internal error: a composite op holds more than %d intermediates",
                 NN_SCOPE_MAX);
        remember_failure(s);
        return NULL;
    }
    s->held[s->n++] = t;
    return t;
}

void nn_check_status(nn_scope *s, int rc)
{
    if (rc < 0)
        remember_failure(s);
}

void nn_drop(nn_scope *s, tide_tensor *t)
{
    if (!t)
        return;
    for (int i = s->n - 1; i >= 0; i--) {
        if (s->held[i] == t) {
            memmove(&s->held[i], &s->held[i + 1], (size_t)(s->n - 1 - i) * sizeof s->held[0]);
            s->n--;
            tide_release(t);
            return;
        }
    }
}

void nn_prefix_error(const char *op, const char *msg)
{
    char copy[512];
    snprintf(copy, sizeof copy, "%s", msg); /* msg may be the error buffer itself */
    size_t n = strlen(op);
    if (strncmp(copy, op, n) == 0 && copy[n] == ':')
        td_error("%s", copy);
    else
        td_error("%s: %s", op, copy);
}

tide_tensor *nn_finish(nn_scope *s, const char *op, tide_tensor *out)
{
    if (!out)
        remember_failure(s);
    if (!s->failed)
        tide_retain(out);
    for (int i = s->n - 1; i >= 0; i--)
        tide_release(s->held[i]);
    s->n = 0;
    if (s->failed) {
        nn_prefix_error(op, s->first_error);
        return NULL;
    }
    return out;
}

const char *nn_describe(char *buf, size_t size, const tide_tensor *t)
{
    char s[160];
    snprintf(buf, size, "%s %s", td_shape_str(s, sizeof s, tide_ndim(t), tide_shape(t)),
             tide_dtype_name(tide_get_dtype(t)));
    return buf;
}

int nn_check_floating(const char *op, const char *arg, const tide_tensor *t)
{
    if (td_check_tensor(op, arg, t) < 0)
        return -1;
    if (!tide_dtype_is_floating(tide_get_dtype(t))) {
        char d[200];
        return td_error("%s: %s must be floating (float32, float64, float16, bfloat16), got %s; "
                        "cast it first", op, arg,
                        nn_describe(d, sizeof d, t));
    }
    return 0;
}

int nn_check_same_dtype(const char *op, const char *arg, const tide_tensor *t, const tide_tensor *x)
{
    if (!t || tide_get_dtype(t) == tide_get_dtype(x))
        return 0;
    char d1[200], d2[200];
    return td_error("%s: %s is %s but the input is %s; they must have the same dtype", op, arg,
                    nn_describe(d1, sizeof d1, t), nn_describe(d2, sizeof d2, x));
}

int nn_check_shape(const char *op, const char *arg, const tide_tensor *t, int ndim,
                   const int64_t *shape)
{
    bool same = tide_ndim(t) == ndim;
    for (int d = 0; same && d < ndim; d++)
        same = tide_shape(t)[d] == shape[d];
    if (same)
        return 0;
    char s1[160], s2[160];
    return td_error("%s: %s has shape %s, expected %s", op, arg,
                    td_shape_str(s1, sizeof s1, tide_ndim(t), tide_shape(t)),
                    td_shape_str(s2, sizeof s2, ndim, shape));
}

int nn_check_reduction(const char *op, tide_reduction reduction)
{
    if (reduction == TIDE_REDUCTION_NONE || reduction == TIDE_REDUCTION_MEAN ||
        reduction == TIDE_REDUCTION_SUM)
        return 0;
    return td_error("%s: invalid reduction %d (expected TIDE_REDUCTION_NONE, _MEAN or _SUM)", op,
                    (int)reduction);
}

int nn_check_eps(const char *op, double eps)
{
    if (eps >= 0)
        return 0;
    return td_error("%s: eps must be >= 0, got %g", op, eps);
}

int nn_normalize_dim(const char *op, int dim, int ndim)
{
    if (ndim == 0 && (dim == 0 || dim == -1))
        return 0;
    return td_normalize_dim(op, dim, ndim);
}

/* Toggling grad mode must not disturb the caller's view of the last error (the autograd
 * placeholder, for one, reports "not implemented yet" from these calls). */
static bool set_grad_quietly(bool enabled)
{
    char saved[512];
    snprintf(saved, sizeof saved, "%s", tide_last_error());
    bool previous = tide_set_grad_enabled(enabled);
    if (strcmp(saved, tide_last_error()) != 0) {
        if (saved[0])
            td_error("%s", saved);
        else
            tide_clear_error();
    }
    return previous;
}

bool nn_no_grad_begin(void) { return set_grad_quietly(false); }

void nn_no_grad_end(bool previous) { set_grad_quietly(previous); }

const tide_tensor *nn_widen_half(nn_scope *s, const tide_tensor *x)
{
    return td_dtype_is_half(x->dtype) ? nn_keep(s, tide_cast(x, TIDE_FLOAT32)) : x;
}

tide_tensor *nn_round_to(nn_scope *s, tide_tensor *out, tide_dtype dtype)
{
    if (!out || out->dtype == dtype)
        return out;
    return nn_keep(s, tide_cast(out, dtype));
}

tide_tensor *nn_reduce(nn_scope *s, tide_tensor *x, tide_reduction reduction)
{
    switch (reduction) {
    case TIDE_REDUCTION_SUM: return nn_keep(s, tide_sum(x, NULL, 0, false));
    case TIDE_REDUCTION_MEAN: return nn_keep(s, tide_mean(x, NULL, 0, false));
    default: return x;
    }
}
