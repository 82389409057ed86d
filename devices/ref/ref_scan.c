/*
 * ref_scan.c — cumsum: each output element from its definition, the sum of the input's
 * elements 0..i along dim, added in that order in double (float dtypes) or wrapping int64.
 * Quadratic in the dim's size, which is fine for a reference.
 */
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
