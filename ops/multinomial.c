/*
 * multinomial.c — tide_multinomial: category indices drawn from rows of non-negative weights,
 * composed of public ops (rand, log, div, where, argmin, topk). The uniforms come from rand, the
 * RANDOM primitive on the weights' device, so a seed gives the same draws on every device and
 * thread count, and a jit trace replays them with fresh numbers like rand and dropout.
 *
 * The draw is an exponential race. Give category j the key E_j / w_j with E_j ~ Exp(1)
 * (E = -log(1 - u), u uniform in [0, 1)). E_j / w_j is exponential with rate w_j, so the
 * smallest key belongs to category j with probability w_j / sum(w): the argmin of a row of keys
 * is one draw with replacement. Given the smallest, the other keys are still independent
 * exponentials (memorylessness), so the k smallest keys in order are k draws without
 * replacement, each proportional to the weights left: the successive sampling torch.multinomial
 * does. Zero weights get the key +inf and are never drawn.
 *
 * The weights are checked on the host first (a read: under tide.jit the segment ends there):
 * finite and non-negative, no row summing to zero, and without replacement at least num_samples
 * positive weights in every row (torch's rule).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "../core/tensor.h"
#include "dispatch.h"

/* "probs [2, 5] float32" for messages. */
static const char *describe(const tide_tensor *w, char *buf, size_t size)
{
    char shape[96];
    td_shape_str(shape, sizeof shape, w->ndim, w->shape);
    snprintf(buf, size, "probs %s %s", shape, tide_dtype_name((tide_dtype)w->dtype));
    return buf;
}

static int check_arguments(const tide_tensor *w, int64_t num_samples, bool replacement)
{
    if (td_check_tensor("multinomial", "probs", w) < 0)
        return -1;
    char d[160];
    describe(w, d, sizeof d);
    if (!tide_dtype_is_floating((tide_dtype)w->dtype))
        return td_error("multinomial: %s: the weights must be floating (float32, float64, "
                               "float16, bfloat16)", d);
    if (w->ndim != 1 && w->ndim != 2)
        return td_error("multinomial: %s: expected a 1-D or 2-D tensor of weights", d);
    if (w->shape[w->ndim - 1] == 0)
        return td_error("multinomial: %s: there are no categories to draw from", d);
    if (num_samples <= 0)
        return td_error("multinomial: %s: num_samples must be positive, got %lld", d,
                        (long long)num_samples);
    if (!replacement && num_samples > w->shape[w->ndim - 1])
        return td_error("multinomial: %s: cannot draw %lld samples from %lld categories "
                        "without replacement",
                        d, (long long)num_samples, (long long)w->shape[w->ndim - 1]);
    return 0;
}

/* "1st", "2nd", "3rd", "11th": positions in messages counted from 1, which reads the same to a
 * C caller (0-based) and a Lua one (1-based). */
static const char *ordinal(int64_t i, char *buf, size_t size)
{
    int64_t n = i + 1;
    const char *suffix = "th";
    if (n % 100 < 11 || n % 100 > 13)
        suffix = n % 10 == 1 ? "st" : n % 10 == 2 ? "nd" : n % 10 == 3 ? "rd" : "th";
    snprintf(buf, size, "%lld%s", (long long)n, suffix);
    return buf;
}

/* Row r of the weights (cols doubles on the host) against the rules above. */
static int check_row(const double *v, int64_t r, int64_t cols, int64_t num_samples,
                     bool replacement, const char *d)
{
    char row[32], col[32];
    int64_t positive = 0;
    for (int64_t j = 0; j < cols; j++) {
        double x = v[j];
        if (!(x >= 0) || isinf(x))
            return td_error("multinomial: %s: the %s weight of the %s row is %g; weights must "
                            "be finite and non-negative",
                            d, ordinal(j, col, sizeof col), ordinal(r, row, sizeof row),
                            isnan(x) ? NAN : x); /* not "-nan" */
        positive += x > 0;
    }
    if (positive == 0)
        return td_error("multinomial: %s: the %s row sums to 0", d, ordinal(r, row, sizeof row));
    if (!replacement && positive < num_samples)
        return td_error("multinomial: %s: the %s row has %lld positive weights, fewer than the "
                        "%lld samples drawn without replacement",
                        d, ordinal(r, row, sizeof row), (long long)positive,
                        (long long)num_samples);
    return 0;
}

/* Reads w2 ([rows, cols]) to the host as doubles and checks every row. */
static int check_values(const tide_tensor *w2, int64_t num_samples, bool replacement,
                        const char *d)
{
    int64_t rows = w2->shape[0], cols = w2->shape[1];
    if (rows == 0)
        return 0; /* no rows: an empty [0, num_samples] result, as torch */
    tide_tensor *f64 = tide_cast(w2, TIDE_FLOAT64);
    double *v = f64 ? td_malloc((size_t)(rows * cols) * sizeof *v) : NULL;
    int rc = v ? tide_to_buffer(f64, v, (size_t)(rows * cols) * sizeof *v) : -1;
    if (f64 && !v)
        rc = td_error("multinomial: out of memory reading %s", d);
    for (int64_t r = 0; rc == 0 && r < rows; r++)
        rc = check_row(v + r * cols, r, cols, num_samples, replacement, d);
    free(v);
    tide_release(f64);
    return rc;
}

/* The race's keys E / w for uniforms of the given shape (ending in cols), +inf where w is 0. */
static tide_tensor *race_keys(const tide_tensor *w, int ndim, const int64_t *shape)
{
    tide_dtype dt = (tide_dtype)w->dtype;
    tide_tensor *u = tide_rand_on(tide_device_name(w), ndim, shape, dt);
    tide_tensor *one = tide_scalar(1, dt);
    tide_tensor *one_minus = u && one ? tide_sub(one, u) : NULL;
    tide_tensor *log = one_minus ? tide_log(one_minus) : NULL;
    tide_tensor *e = log ? tide_neg(log) : NULL;
    tide_tensor *keys = e ? tide_div(e, w) : NULL;
    tide_tensor *zero = tide_scalar(0, dt), *inf = tide_scalar(INFINITY, dt);
    tide_tensor *positive = zero ? tide_gt(w, zero) : NULL;
    tide_tensor *out = keys && positive && inf ? tide_where(positive, keys, inf) : NULL;
    tide_release(u);
    tide_release(one);
    tide_release(one_minus);
    tide_release(log);
    tide_release(e);
    tide_release(keys);
    tide_release(zero);
    tide_release(inf);
    tide_release(positive);
    return out;
}

/* [rows, num_samples] int64 0-based categories for weights w2 [rows, cols]. */
static tide_tensor *draw(const tide_tensor *w2, int64_t num_samples, bool replacement)
{
    int64_t rows = w2->shape[0], cols = w2->shape[1];
    if (!replacement) {
        tide_tensor *keys = race_keys(w2, 2, w2->shape), *idx = NULL;
        int rc = keys ? tide_topk(keys, num_samples, 1, false, true, NULL, &idx) : -1;
        tide_release(keys);
        return rc == 0 ? idx : NULL;
    }
    /* One race per sample: uniforms [rows, num_samples, cols] against w [rows, 1, cols]. */
    int64_t shape[3] = {rows, num_samples, cols};
    tide_tensor *w3 = tide_unsqueeze(w2, 1);
    tide_tensor *keys = w3 ? race_keys(w3, 3, shape) : NULL;
    tide_tensor *idx = keys ? tide_argmin(keys, 2, false) : NULL;
    tide_release(w3);
    tide_release(keys);
    return idx;
}

static tide_tensor *multinomial_body(const tide_tensor *probs, int64_t num_samples,
                                     bool replacement)
{
    if (check_arguments(probs, num_samples, replacement) < 0)
        return NULL;
    char d[160];
    describe(probs, d, sizeof d);
    /* No gradient: the result is integer, and the keys need no graph. */
    bool grad = tide_set_grad_enabled(false);
    tide_tensor *w2 = probs->ndim == 1 ? tide_unsqueeze(probs, 0) : tide_retain((tide_tensor *)probs);
    tide_tensor *idx = w2 && check_values(w2, num_samples, replacement, d) == 0
                           ? draw(w2, num_samples, replacement)
                           : NULL;
    tide_tensor *out = idx && probs->ndim == 1 ? tide_squeeze(idx, 0) : tide_retain(idx);
    tide_release(idx);
    tide_release(w2);
    tide_set_grad_enabled(grad);
    return out;
}

tide_tensor *tide_multinomial(const tide_tensor *probs, int64_t num_samples, bool replacement)
{
    TD_IN_OP("multinomial", multinomial_body(probs, num_samples, replacement));
}
