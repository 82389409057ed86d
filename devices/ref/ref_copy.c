/*
 * ref_copy.c — the kernels that move or convert elements: copy and cast (any layouts, dtype
 * conversion by tide's cast rules), fill, iota, cat, pad and flip. Each output element is
 * found from its definition: where it comes from in the input, or the fill value.
 */
#include "ref_internal.h"

int ref_copy(tide_tensor *out, const tide_tensor *x)
{
    int64_t idx[TIDE_MAX_DIMS], n = ref_numel(out);
    for (int64_t i = 0; i < n; i++) {
        ref_unflatten(out->ndim, out->shape, i, idx);
        ref_convert(out, ref_offset(out, idx), x, ref_offset_bcast(x, out->ndim, idx));
    }
    return 0;
}

int ref_fill(tide_tensor *out, double value)
{
    int64_t idx[TIDE_MAX_DIMS], n = ref_numel(out);
    for (int64_t i = 0; i < n; i++) {
        ref_unflatten(out->ndim, out->shape, i, idx);
        ref_store_double(out, ref_offset(out, idx), value);
    }
    return 0;
}

/* out[k] = start + k*step, in double; symmetric (linspace): the second half counts back from
 * end, so that both endpoints are exact. */
int ref_iota(tide_tensor *out, double start, double step, double end, bool symmetric)
{
    int64_t n = ref_numel(out);
    for (int64_t k = 0; k < n; k++) {
        double v = symmetric && k >= n / 2 ? end - (double)(n - 1 - k) * step
                                           : start + (double)k * step;
        ref_store_double(out, out->offset + k, v); /* out is contiguous */
    }
    return 0;
}

/* out's element at idx comes from the input whose range along dim holds idx[dim]. Inputs of
 * another ndim (1-D empty tensors) take no part, as in PyTorch. */
int ref_cat(tide_tensor *out, tide_tensor *const *xs, int n, int dim)
{
    int64_t idx[TIDE_MAX_DIMS], numel = ref_numel(out);
    for (int64_t i = 0; i < numel; i++) {
        ref_unflatten(out->ndim, out->shape, i, idx);
        int64_t oo = ref_offset(out, idx), start = 0, at = idx[dim];
        for (int k = 0; k < n; k++) {
            const tide_tensor *x = xs[k];
            if (x->ndim != out->ndim)
                continue;
            if (at < start + x->shape[dim]) {
                idx[dim] = at - start;
                ref_convert(out, oo, x, ref_offset(x, idx));
                break;
            }
            start += x->shape[dim];
        }
    }
    return 0;
}

/* pads = (before, after) per dim: out's index o along a dim reads x's index o - before, or the
 * fill value outside x. A negative pad crops. */
int ref_pad(tide_tensor *out, const tide_tensor *x, const int64_t *pads, double value)
{
    int64_t idx[TIDE_MAX_DIMS], numel = ref_numel(out);
    for (int64_t i = 0; i < numel; i++) {
        ref_unflatten(out->ndim, out->shape, i, idx);
        int64_t oo = ref_offset(out, idx);
        bool inside = true;
        for (int d = 0; d < x->ndim; d++) {
            idx[d] -= pads[2 * d];
            inside &= idx[d] >= 0 && idx[d] < x->shape[d];
        }
        if (inside)
            ref_convert(out, oo, x, ref_offset(x, idx));
        else
            ref_store_double(out, oo, value);
    }
    return 0;
}

/* out[..., i, ...] = x[..., size-1-i, ...] along each listed dim. */
int ref_flip(tide_tensor *out, const tide_tensor *x, const int64_t *dims, int ndims)
{
    int64_t idx[TIDE_MAX_DIMS], numel = ref_numel(out);
    for (int64_t i = 0; i < numel; i++) {
        ref_unflatten(out->ndim, out->shape, i, idx);
        int64_t oo = ref_offset(out, idx);
        for (int k = 0; k < ndims; k++)
            idx[dims[k]] = x->shape[dims[k]] - 1 - idx[dims[k]];
        ref_convert(out, oo, x, ref_offset(x, idx));
    }
    return 0;
}
