/*
 * ref_scan.c — cumsum: each output element from its definition, the sum of the input's
 * elements 0..i along dim, added in that order in double (float dtypes) or wrapping int64.
 * Quadratic in the dim's size, which is fine for a reference.
 */
#include <math.h>

#include "ref_internal.h"

int ref_cumsum(tide_tensor *out, const tide_tensor *x, int dim)
{
    if (out->dtype != TIDE_FLOAT32 && out->dtype != TIDE_FLOAT64 && out->dtype != TIDE_INT64)
        return ref_no_kernel(TIDE_OP_CUMSUM, out->dtype);
    bool fl = ref_is_float(out->dtype);
    int64_t idx[TIDE_MAX_DIMS], n = ref_numel(out);
    for (int64_t e = 0; e < n; e++) {
        ref_unflatten(out->ndim, out->shape, e, idx);
        int64_t last = out->ndim > 0 ? idx[dim] : 0, oo = ref_offset(out, idx);
        double f = 0;
        uint64_t i = 0;
        for (int64_t k = 0; k <= last; k++) {
            if (out->ndim > 0)
                idx[dim] = k;
            int64_t xo = ref_offset(x, idx);
            if (fl)
                f += ref_get_f(x, xo);
            else
                i += (uint64_t)ref_get_i(x, xo);
        }
        if (fl)
            ref_set_f(out, oo, f);
        else
            ref_set_i(out, oo, (int64_t)i);
    }
    return 0;
}

/* log(exp(a) + exp(b)), equal infinities kept (the CPU's formula, so the two agree). */
static double log_add_exp(double a, double b)
{
    if (isinf(a) && a == b)
        return a;
    if (isnan(a) || isnan(b))
        return NAN;
    double hi = a > b ? a : b, lo = a > b ? b : a;
    return hi + log1p(exp(lo - hi));
}

/* The position of the running max (min) of elements 0..last: the later one on ties; once a NaN
 * is met, the last NaN. */
static int64_t running_best(const tide_tensor *x, int64_t *idx, int dim, int64_t last, bool is_max)
{
    int64_t best = 0, last_nan = -1;
    for (int64_t k = 0; k <= last; k++) {
        if (x->ndim > 0)
            idx[dim] = k;
        int64_t o = ref_offset(x, idx), b = best;
        if (x->ndim > 0)
            idx[dim] = b;
        int64_t bo = ref_offset(x, idx);
        if (ref_is_float(x->dtype) && isnan(ref_get_f(x, o))) {
            last_nan = k;
            continue;
        }
        bool take = ref_is_float(x->dtype)
                        ? (is_max ? ref_get_f(x, o) >= ref_get_f(x, bo) : ref_get_f(x, o) <= ref_get_f(x, bo))
                        : (is_max ? ref_get_i(x, o) >= ref_get_i(x, bo) : ref_get_i(x, o) <= ref_get_i(x, bo));
        if (take || k == 0)
            best = k;
    }
    return last_nan >= 0 ? last_nan : best;
}

int ref_scan(tide_tensor *out, const tide_tensor *x, int dim, int kind)
{
    bool pick = kind == TIDE_SCAN_ARGMAX || kind == TIDE_SCAN_ARGMIN;
    if (pick ? x->dtype == TIDE_BOOL : (out->dtype != TIDE_FLOAT32 && out->dtype != TIDE_FLOAT64 &&
                                        !(kind == TIDE_SCAN_PROD && out->dtype == TIDE_INT64)))
        return ref_no_kernel(TIDE_OP_CUMSUM, x->dtype);
    int64_t idx[TIDE_MAX_DIMS], n = ref_numel(out);
    for (int64_t e = 0; e < n; e++) {
        ref_unflatten(out->ndim, out->shape, e, idx);
        int64_t last = out->ndim > 0 ? idx[dim] : 0, oo = ref_offset(out, idx);
        if (pick) {
            ref_set_i(out, oo, running_best(x, idx, dim, last, kind == TIDE_SCAN_ARGMAX));
            continue;
        }
        double f = kind == TIDE_SCAN_PROD ? 1 : -INFINITY;
        uint64_t i = 1;
        for (int64_t k = 0; k <= last; k++) {
            if (out->ndim > 0)
                idx[dim] = k;
            int64_t xo = ref_offset(x, idx);
            if (!ref_is_float(out->dtype))
                i *= (uint64_t)ref_get_i(x, xo);
            else
                f = kind == TIDE_SCAN_PROD ? f * ref_get_f(x, xo) : log_add_exp(f, ref_get_f(x, xo));
        }
        if (ref_is_float(out->dtype))
            ref_set_f(out, oo, f);
        else
            ref_set_i(out, oo, (int64_t)i);
    }
    return 0;
}
