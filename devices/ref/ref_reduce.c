/*
 * ref_reduce.c — sum, prod, max, min over a set of dims, and argmax/argmin along one dim. For
 * each output element the reduced elements are visited in row-major order. Float sums and
 * products accumulate in double and round once; integer (and bool) sums and products wrap in
 * 64 bits and are stored as int64. Max and min return NaN when any reduced element is NaN.
 */
#include <math.h>

#include "ref_internal.h"

ref_acc ref_acc_start(tide_op op)
{
    ref_acc a = {.nan = false};
    switch (op) {
    case TIDE_OP_SUM: a.f = 0, a.i = 0; break;
    case TIDE_OP_PROD: a.f = 1, a.i = 1; break;
    case TIDE_OP_MAX: a.f = -INFINITY, a.i = INT64_MIN; break;
    default: a.f = INFINITY, a.i = INT64_MAX; break;
    }
    return a;
}

void ref_acc_add(tide_op op, ref_acc *a, const tide_tensor *x, int64_t off)
{
    if (ref_is_float(x->dtype)) {
        double v = ref_get_f(x, off);
        a->nan |= isnan(v);
        switch (op) {
        case TIDE_OP_SUM: a->f += v; break;
        case TIDE_OP_PROD: a->f *= v; break;
        case TIDE_OP_MAX: a->f = v > a->f ? v : a->f; break;
        default: a->f = v < a->f ? v : a->f; break;
        }
        return;
    }
    int64_t v = ref_get_i(x, off);
    if (x->dtype == TIDE_BOOL && (op == TIDE_OP_MAX || op == TIDE_OP_MIN))
        v = *(const uint8_t *)ref_at(x, off); /* the stored byte, as the CPU compares it */
    switch (op) {
    case TIDE_OP_SUM: a->i = (int64_t)((uint64_t)a->i + (uint64_t)v); break;
    case TIDE_OP_PROD: a->i = (int64_t)((uint64_t)a->i * (uint64_t)v); break;
    case TIDE_OP_MAX: a->i = v > a->i ? v : a->i; break;
    default: a->i = v < a->i ? v : a->i; break;
    }
}

void ref_acc_store(tide_op op, const ref_acc *a, bool fl, tide_tensor *out, int64_t oo)
{
    if (fl)
        ref_set_f(out, oo, a->nan && op != TIDE_OP_SUM && op != TIDE_OP_PROD ? NAN : a->f);
    else
        ref_set_i(out, oo, a->i);
}

int ref_reduce(tide_op op, tide_tensor *out, const tide_tensor *x, const int64_t *dims, int ndims)
{
    bool fl = ref_is_float(x->dtype);
    int64_t rshape[TIDE_MAX_DIMS], ridx[TIDE_MAX_DIMS], idx[TIDE_MAX_DIMS];
    int64_t m = 1, nout = ref_numel(out);
    for (int k = 0; k < ndims; k++) {
        rshape[k] = x->shape[dims[k]];
        m *= rshape[k];
    }
    for (int64_t o = 0; o < nout; o++) {
        ref_unflatten(out->ndim, out->shape, o, idx);
        int64_t oo = ref_offset(out, idx);
        ref_acc a = ref_acc_start(op);
        for (int64_t r = 0; r < m; r++) {
            ref_unflatten(ndims, rshape, r, ridx);
            for (int k = 0; k < ndims; k++)
                idx[dims[k]] = ridx[k];
            ref_acc_add(op, &a, x, ref_offset(x, idx));
        }
        ref_acc_store(op, &a, fl, out, oo);
    }
    return 0;
}

/* The first extreme along dim wins; a NaN counts as the extreme (the first NaN wins). */
int ref_argreduce(tide_op op, tide_tensor *out, const tide_tensor *x, int dim)
{
    bool fl = ref_is_float(x->dtype), is_max = op == TIDE_OP_ARGMAX;
    int64_t idx[TIDE_MAX_DIMS], nout = ref_numel(out), n = x->ndim ? x->shape[dim] : 1;
    for (int64_t o = 0; o < nout; o++) {
        ref_unflatten(out->ndim, out->shape, o, idx);
        int64_t oo = ref_offset(out, idx), at = 0;
        double bf = 0;
        int64_t bi = 0;
        for (int64_t k = 0; k < n; k++) {
            if (x->ndim)
                idx[dim] = k;
            int64_t off = ref_offset(x, idx);
            bool take;
            if (fl) {
                double v = ref_get_f(x, off);
                take = k == 0 || (isnan(v) && !isnan(bf)) || (is_max ? v > bf : v < bf);
                bf = take ? v : bf;
            } else {
                int64_t v = x->dtype == TIDE_BOOL ? *(const uint8_t *)ref_at(x, off)
                                                  : ref_get_i(x, off);
                take = k == 0 || (is_max ? v > bi : v < bi);
                bi = take ? v : bi;
            }
            at = take ? k : at;
        }
        ref_set_i(out, oo, at);
    }
    return 0;
}
