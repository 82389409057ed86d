/*
 * stats.c — reductions written with other ops: var, std (and the pairs with the mean), amax,
 * amin, nansum, nanmean, count_nonzero and norm. Composites only, so autograd, the jit and
 * every device see ordinary primitives.
 *
 * Numerics, as PyTorch: variance in two passes (the mean first, then the sum of squared
 * deviations), divided by max(0, N - correction) (so one element with correction 1 gives NaN,
 * 0/0); norm's p = 2 is sqrt(sum(x * x)), p = inf/-inf the max/min of |x|, p = 0 the count of
 * nonzeros, other p sum(|x|^p)^(1/p). Known difference: the gradient of a 2-norm (or std) at an
 * all-zero input is NaN here, where PyTorch's hand-written backward gives 0.
 */
#include <math.h>

#include "nn_common.h"

/* The number of elements each output of a reduction over dims (NULL/0: all) sums. */
static int64_t reduced_count(const tide_tensor *x, const int *dims, int ndims)
{
    int mask = td_dims_mask("var", x, dims, ndims);
    int64_t n = 1;
    for (int d = 0; d < x->ndim; d++)
        if (mask & (1 << d))
            n *= x->shape[d];
    return n;
}

/* var (and its mean, keepdim's shape, when mean_out is given). */
static tide_tensor *var_body(const char *op, const tide_tensor *x, const int *dims, int ndims,
                             double correction, bool keepdim, tide_tensor **mean_out)
{
    if (nn_check_floating(op, "input", x) < 0 || td_dims_mask(op, x, dims, ndims) < 0)
        return NULL;
    int64_t n = reduced_count(x, dims, ndims);
    double denom = (double)n - correction > 0 ? (double)n - correction : 0;
    nn_scope s = {0};
    tide_tensor *mean = nn_keep(&s, tide_mean(x, dims, ndims, true));
    tide_tensor *dev = nn_keep(&s, tide_sub(x, mean));
    tide_tensor *sq = nn_keep(&s, tide_mul(dev, dev));
    tide_tensor *ss = nn_keep(&s, tide_sum(sq, dims, ndims, keepdim));
    tide_tensor *var = nn_keep(&s, tide_div_scalar(ss, denom));
    if (mean_out && mean && !keepdim)
        mean = nn_keep(&s, tide_mean(x, dims, ndims, false));
    tide_tensor *m = mean_out && !s.failed ? tide_retain(mean) : NULL;
    tide_tensor *out = nn_finish(&s, op, var);
    if (mean_out) {
        if (out)
            *mean_out = m;
        else
            tide_release(m);
    }
    return out;
}

tide_tensor *tide_var(const tide_tensor *x, const int *dims, int ndims, double correction,
                      bool keepdim)
{
    TD_IN_OP("var", var_body("var", x, dims, ndims, correction, keepdim, NULL));
}

static tide_tensor *std_body(const char *op, const tide_tensor *x, const int *dims, int ndims,
                             double correction, bool keepdim, tide_tensor **mean_out)
{
    tide_tensor *var = var_body(op, x, dims, ndims, correction, keepdim, mean_out);
    tide_tensor *sd = var ? tide_sqrt(var) : NULL;
    tide_release(var);
    if (!sd && mean_out && *mean_out) {
        tide_release(*mean_out);
        *mean_out = NULL;
    }
    return sd;
}

tide_tensor *tide_std(const tide_tensor *x, const int *dims, int ndims, double correction,
                      bool keepdim)
{
    TD_IN_OP("std", std_body("std", x, dims, ndims, correction, keepdim, NULL));
}

int tide_var_mean(const tide_tensor *x, const int *dims, int ndims, double correction,
                  bool keepdim, tide_tensor **var, tide_tensor **mean)
{
    *mean = NULL;
    const char *previous = td_op_enter("var_mean");
    *var = var_body("var_mean", x, dims, ndims, correction, keepdim, mean);
    td_op_leave(previous);
    return *var ? 0 : -1;
}

int tide_std_mean(const tide_tensor *x, const int *dims, int ndims, double correction,
                  bool keepdim, tide_tensor **std, tide_tensor **mean)
{
    *mean = NULL;
    const char *previous = td_op_enter("std_mean");
    *std = std_body("std_mean", x, dims, ndims, correction, keepdim, mean);
    td_op_leave(previous);
    return *std ? 0 : -1;
}

/* amax/amin: max/min over any dims (the MAX/MIN reductions themselves). */
tide_tensor *tide_amax(const tide_tensor *x, const int *dims, int ndims, bool keepdim)
{
    TD_IN_OP("amax", tide_max(x, dims, ndims, keepdim));
}

tide_tensor *tide_amin(const tide_tensor *x, const int *dims, int ndims, bool keepdim)
{
    TD_IN_OP("amin", tide_min(x, dims, ndims, keepdim));
}

/* x with its NaNs replaced by 0 (in s), and (when count is given) the non-NaN count per output
 * in x's dtype. */
static tide_tensor *zero_nans(nn_scope *s, const tide_tensor *x)
{
    tide_tensor *nan = nn_keep(s, tide_ne(x, x));
    tide_tensor *zero = nn_keep(s, tide_scalar(0, (tide_dtype)x->dtype));
    return nn_keep(s, tide_where(nan, zero, x));
}

static tide_tensor *nansum_body(const tide_tensor *x, const int *dims, int ndims, bool keepdim)
{
    if (td_check_tensor("nansum", "input", x) < 0 || td_dims_mask("nansum", x, dims, ndims) < 0)
        return NULL;
    if (!tide_dtype_is_floating((tide_dtype)x->dtype)) /* integers have no NaN */
        return tide_sum(x, dims, ndims, keepdim);
    nn_scope s = {0};
    tide_tensor *out = nn_keep(&s, tide_sum(zero_nans(&s, x), dims, ndims, keepdim));
    return nn_finish(&s, "nansum", out);
}

tide_tensor *tide_nansum(const tide_tensor *x, const int *dims, int ndims, bool keepdim)
{
    TD_IN_OP("nansum", nansum_body(x, dims, ndims, keepdim));
}

static tide_tensor *nanmean_body(const tide_tensor *x, const int *dims, int ndims, bool keepdim)
{
    if (nn_check_floating("nanmean", "input", x) < 0 ||
        td_dims_mask("nanmean", x, dims, ndims) < 0)
        return NULL;
    nn_scope s = {0};
    tide_tensor *sum = nn_keep(&s, tide_sum(zero_nans(&s, x), dims, ndims, keepdim));
    tide_tensor *kept = nn_keep(&s, tide_eq(x, x));
    tide_tensor *count = nn_keep(&s, tide_sum(kept, dims, ndims, keepdim));
    tide_tensor *out = nn_keep(&s, tide_div(sum, nn_keep(&s, tide_cast(count, (tide_dtype)x->dtype))));
    return nn_finish(&s, "nanmean", out);
}

tide_tensor *tide_nanmean(const tide_tensor *x, const int *dims, int ndims, bool keepdim)
{
    TD_IN_OP("nanmean", nanmean_body(x, dims, ndims, keepdim));
}

static tide_tensor *count_nonzero_body(const tide_tensor *x, const int *dims, int ndims)
{
    if (td_check_tensor("count_nonzero", "input", x) < 0 ||
        td_dims_mask("count_nonzero", x, dims, ndims) < 0)
        return NULL;
    nn_scope s = {0};
    tide_tensor *nz = nn_keep(&s, tide_ne(x, nn_keep(&s, tide_integer(0))));
    tide_tensor *out = nn_keep(&s, tide_sum(nz, dims, ndims, false));
    return nn_finish(&s, "count_nonzero", out);
}

tide_tensor *tide_count_nonzero(const tide_tensor *x, const int *dims, int ndims)
{
    TD_IN_OP("count_nonzero", count_nonzero_body(x, dims, ndims));
}

/* ---- norm ---------------------------------------------------------------------------------- */

static tide_tensor *norm_body(const tide_tensor *x, double p, const int *dims, int ndims,
                              bool keepdim)
{
    const char *op = "norm";
    if (nn_check_floating(op, "input", x) < 0 || td_dims_mask(op, x, dims, ndims) < 0)
        return NULL;
    if (isnan(p))
        return td_error("%s: p must be a number, got nan", op), NULL;
    nn_scope s = {0};
    tide_tensor *out;
    if (p == 2) {
        tide_tensor *sq = nn_keep(&s, tide_mul(x, x));
        out = nn_keep(&s, tide_sqrt(nn_keep(&s, tide_sum(sq, dims, ndims, keepdim))));
    } else if (p == 0) { /* the count of nonzeros, in x's dtype */
        tide_tensor *nz = nn_keep(&s, tide_ne(x, nn_keep(&s, tide_integer(0))));
        tide_tensor *c = nn_keep(&s, tide_cast(nz, (tide_dtype)x->dtype));
        out = nn_keep(&s, tide_sum(c, dims, ndims, keepdim));
    } else {
        tide_tensor *a = nn_keep(&s, tide_abs(x));
        if (isinf(p))
            out = nn_keep(&s, (p > 0 ? tide_max : tide_min)(a, dims, ndims, keepdim));
        else if (p == 1)
            out = nn_keep(&s, tide_sum(a, dims, ndims, keepdim));
        else {
            tide_tensor *ap = nn_keep(&s, tide_pow_scalar(a, p));
            tide_tensor *sum = nn_keep(&s, tide_sum(ap, dims, ndims, keepdim));
            out = nn_keep(&s, tide_pow_scalar(sum, 1 / p));
        }
    }
    return nn_finish(&s, op, out);
}

tide_tensor *tide_norm(const tide_tensor *x, double p, const int *dims, int ndims, bool keepdim)
{
    TD_IN_OP("norm", norm_body(x, p, dims, ndims, keepdim));
}
