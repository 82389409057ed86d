/*
 * nn_softmax.c — softmax, log_softmax and logsumexp, each with the max trick: the row maximum m
 * is subtracted before exp, so logits of any size give finite, correct results. m is computed
 * outside autograd's graph: the results do not depend on it mathematically, so its gradient
 * would be zero anyway, and leaving it out spares the max's backward (PyTorch does the same).
 */
#include <math.h>

#include "autocast.h"
#include "nn_common.h"

/* The maximum over dims (keepdim), outside the graph. */
static tide_tensor *stable_max(nn_scope *s, const tide_tensor *x, const int *dims, int ndims)
{
    bool grad = nn_no_grad_begin();
    tide_tensor *m = nn_keep(s, tide_max(x, dims, ndims, true));
    nn_no_grad_end(grad);
    return m;
}

/* The checks both softmaxes share; the normalized dim, or -1. */
static int softmax_dim(const char *op, const tide_tensor *x, int dim)
{
    if (nn_check_floating(op, "input", x) < 0)
        return -1;
    return nn_normalize_dim(op, dim, tide_ndim(x));
}

static tide_tensor *softmax_body(const tide_tensor *x, int dim)
{
    int d = softmax_dim("softmax", x, dim);
    if (d < 0)
        return NULL;
    if (tide_numel(x) == 0) /* no row to normalize; the max of an empty dim has no value */
        return tide_clone(x);
    nn_scope s = {0};
    tide_tensor *m = stable_max(&s, x, &d, 1);
    tide_tensor *e = nn_keep(&s, tide_sub(x, m));
    nn_drop(&s, m);
    tide_tensor *ex = nn_keep(&s, tide_exp(e));
    nn_drop(&s, e);
    tide_tensor *sum = nn_keep(&s, tide_sum(ex, &d, 1, true));
    tide_tensor *out = nn_keep(&s, tide_div(ex, sum));
    return nn_finish(&s, "softmax", out);
}

tide_tensor *tide_softmax(const tide_tensor *x, int dim)
{
    TD_IN_AUTOCAST_OP("softmax", TD_AUTOCAST_FLOAT32, softmax_body(x, dim), 1, &x);
}

static tide_tensor *log_softmax_body(const tide_tensor *x, int dim)
{
    int d = softmax_dim("log_softmax", x, dim);
    if (d < 0)
        return NULL;
    if (tide_numel(x) == 0)
        return tide_clone(x);
    nn_scope s = {0};
    tide_tensor *m = stable_max(&s, x, &d, 1);
    tide_tensor *shifted = nn_keep(&s, tide_sub(x, m));
    nn_drop(&s, m);
    tide_tensor *ex = nn_keep(&s, tide_exp(shifted));
    tide_tensor *sum = nn_keep(&s, tide_sum(ex, &d, 1, true));
    nn_drop(&s, ex);
    tide_tensor *log_norm = nn_keep(&s, tide_log(sum));
    tide_tensor *out = nn_keep(&s, tide_sub(shifted, log_norm));
    return nn_finish(&s, "log_softmax", out);
}

tide_tensor *tide_log_softmax(const tide_tensor *x, int dim)
{
    TD_IN_AUTOCAST_OP("log_softmax", TD_AUTOCAST_FLOAT32, log_softmax_body(x, dim), 1, &x);
}

static tide_tensor *logsumexp_body(const tide_tensor *x, const int *dims, int ndims, bool keepdim)
{
    if (nn_check_floating("logsumexp", "input", x) < 0 ||
        td_dims_mask("logsumexp", x, dims, ndims) < 0)
        return NULL;
    nn_scope s = {0};
    tide_tensor *out;
    if (tide_numel(x) == 0) {
        /* Reducing nothing: the sum of no exponentials is 0 and its log -inf, as PyTorch. */
        tide_tensor *e = nn_keep(&s, tide_exp(x));
        tide_tensor *sum = nn_keep(&s, tide_sum(e, dims, ndims, keepdim));
        out = nn_keep(&s, tide_log(sum));
        return nn_finish(&s, "logsumexp", out);
    }
    /* A row whose maximum is infinite is shifted by 0 instead: all -inf gives log(0) = -inf and
     * a +inf gives +inf, where subtracting the max would give inf - inf = NaN (as PyTorch). */
    tide_tensor *m = stable_max(&s, x, dims, ndims);
    tide_tensor *am = nn_keep(&s, tide_abs(m));
    tide_tensor *inf = nn_keep(&s, tide_number(INFINITY));
    tide_tensor *is_inf = nn_keep(&s, tide_eq(am, inf));
    tide_tensor *zero = nn_keep(&s, tide_number(0));
    tide_tensor *shift = nn_keep(&s, tide_where(is_inf, zero, m));
    tide_tensor *e = nn_keep(&s, tide_sub(x, shift));
    tide_tensor *ex = nn_keep(&s, tide_exp(e));
    nn_drop(&s, e);
    tide_tensor *sum = nn_keep(&s, tide_sum(ex, dims, ndims, keepdim));
    nn_drop(&s, ex);
    tide_tensor *log_sum = nn_keep(&s, tide_log(sum));
    if (!keepdim && log_sum) /* shift has the keepdim shape; give it the result's */
        shift = nn_keep(&s, tide_reshape(shift, tide_ndim(log_sum), tide_shape(log_sum)));
    out = nn_keep(&s, tide_add(log_sum, shift));
    return nn_finish(&s, "logsumexp", out);
}

tide_tensor *tide_logsumexp(const tide_tensor *x, const int *dims, int ndims, bool keepdim)
{
    TD_IN_AUTOCAST_OP("logsumexp", TD_AUTOCAST_FLOAT32, logsumexp_body(x, dims, ndims, keepdim), 1,
                      &x);
}
