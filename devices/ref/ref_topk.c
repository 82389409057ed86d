/*
 * ref_topk.c — topk's positions from the definition: the element of rank r along its line is
 * the one that exactly r others precede, where a precedes b when it is better (larger, or
 * smaller with largest false; NaN above every number) or equal and at a lower position.
 * Quadratic in the dim's size, which is fine for a reference.
 */
#include <math.h>

#include "ref_internal.h"

/* Whether the element at (off a, position pa) precedes the one at (b, pb). */
static bool precedes(const tide_tensor *x, int64_t a, int64_t pa, int64_t b, int64_t pb,
                     bool largest)
{
    int c = 0; /* >0: a is larger */
    if (ref_is_float(x->dtype)) {
        double u = ref_get_f(x, a), v = ref_get_f(x, b);
        if (isnan(u) != isnan(v))
            c = isnan(u) ? 1 : -1;
        else if (!isnan(u) && u != v)
            c = u > v ? 1 : -1;
    } else {
        int64_t u = ref_get_i(x, a), v = ref_get_i(x, b);
        c = u == v ? 0 : (u > v ? 1 : -1);
    }
    if (!largest) /* smaller first; NaN, the largest, last */
        c = -c;
    return c > 0 || (c == 0 && pa < pb);
}

int ref_topk(tide_tensor *out, const tide_tensor *x, int dim, int64_t k, bool largest)
{
    if (x->dtype == TIDE_BOOL)
        return ref_no_kernel(TIDE_OP_TOPK, x->dtype);
    int64_t idx[TIDE_MAX_DIMS], n = ref_numel(out), len = x->ndim > 0 ? x->shape[dim] : 1;
    (void)k;
    for (int64_t e = 0; e < n; e++) {
        ref_unflatten(out->ndim, out->shape, e, idx);
        int64_t oo = ref_offset(out, idx), rank = out->ndim > 0 ? idx[dim] : 0;
        for (int64_t p = 0; p < len; p++) {
            int64_t before = 0;
            if (x->ndim > 0)
                idx[dim] = p;
            int64_t po = ref_offset(x, idx);
            for (int64_t q = 0; q < len; q++) {
                if (x->ndim > 0)
                    idx[dim] = q;
                before += q != p && precedes(x, ref_offset(x, idx), q, po, p, largest);
            }
            if (before == rank) {
                ref_set_i(out, oo, p);
                break;
            }
        }
    }
    return 0;
}
