/*
 * nn_norm.c — layer_norm and batch_norm. Both normalize with the biased variance, eps inside the
 * square root, computed in two passes (mean, then the mean of squared deviations) so a large
 * mean does not cancel the variance's digits. batch_norm's training mode also moves the running
 * statistics toward the batch's, in place and outside autograd's graph, with PyTorch's momentum
 * (new = (1 - momentum) * old + momentum * batch) and the unbiased variance, as PyTorch does.
 */
#include <stdio.h>

#include "autocast.h"
#include "nn_common.h"

/* (x - mean) * rsqrt(var + eps), with mean and var of x over dims (keepdim); the batch mean and
 * biased variance are handed back (held by s) when asked for. */
static tide_tensor *normalize(nn_scope *s, const tide_tensor *x, const int *dims, int ndims,
                              double eps, tide_tensor **mean_out, tide_tensor **var_out)
{
    tide_tensor *mean = nn_keep(s, tide_mean(x, dims, ndims, true));
    tide_tensor *xc = nn_keep(s, tide_sub(x, mean));
    tide_tensor *sq = nn_keep(s, tide_mul(xc, xc));
    tide_tensor *var = nn_keep(s, tide_mean(sq, dims, ndims, true));
    nn_drop(s, sq);
    tide_tensor *ve = nn_keep(s, tide_add_scalar(var, eps));
    tide_tensor *inv = nn_keep(s, tide_rsqrt(ve));
    nn_drop(s, ve);
    tide_tensor *y = nn_keep(s, tide_mul(xc, inv));
    nn_drop(s, xc);
    nn_drop(s, inv);
    if (mean_out)
        *mean_out = mean;
    else
        nn_drop(s, mean);
    if (var_out)
        *var_out = var;
    else
        nn_drop(s, var);
    return y;
}

/* y * weight + bias, each optional; weight and bias viewed as shape (ndim, shape) first. */
static tide_tensor *affine(nn_scope *s, tide_tensor *y, const tide_tensor *weight,
                           const tide_tensor *bias, int ndim, const int64_t *shape)
{
    if (weight) {
        tide_tensor *w = nn_keep(s, tide_reshape(weight, ndim, shape));
        y = nn_keep(s, tide_mul(y, w));
    }
    if (bias) {
        tide_tensor *b = nn_keep(s, tide_reshape(bias, ndim, shape));
        y = nn_keep(s, tide_add(y, b));
    }
    return y;
}

static tide_tensor *layer_norm_body(const tide_tensor *x, int n_normalized,
                                    const tide_tensor *weight, const tide_tensor *bias, double eps)
{
    const char *op = "layer_norm";
    if (nn_check_floating(op, "input", x) < 0 || nn_check_eps(op, eps) < 0)
        return NULL;
    int ndim = tide_ndim(x);
    if (n_normalized < 1 || n_normalized > ndim) {
        char d[200];
        td_error("%s: cannot normalize over the last %d dims of the input %s (1 to %d)", op,
                 n_normalized, nn_describe(d, sizeof d, x), ndim);
        return NULL;
    }
    const int64_t *norm_shape = tide_shape(x) + (ndim - n_normalized);
    if ((weight && (nn_check_same_dtype(op, "weight", weight, x) < 0 ||
                    nn_check_shape(op, "weight", weight, n_normalized, norm_shape) < 0)) ||
        (bias && (nn_check_same_dtype(op, "bias", bias, x) < 0 ||
                  nn_check_shape(op, "bias", bias, n_normalized, norm_shape) < 0)))
        return NULL;
    int dims[TIDE_MAX_DIMS];
    for (int i = 0; i < n_normalized; i++)
        dims[i] = ndim - n_normalized + i;
    nn_scope s = {0};
    tide_tensor *y = normalize(&s, x, dims, n_normalized, eps, NULL, NULL);
    tide_tensor *out = affine(&s, y, weight, bias, n_normalized, norm_shape);
    return nn_finish(&s, op, out);
}

tide_tensor *tide_layer_norm(const tide_tensor *x, int n_normalized, const tide_tensor *weight,
                             const tide_tensor *bias, double eps)
{
    TD_IN_AUTOCAST_OP("layer_norm", TD_AUTOCAST_FLOAT32, layer_norm_body(x, n_normalized, weight, bias, eps),
                      3, &x, &weight, &bias);
}

/* Checks an optional per-channel tensor: 1-D with C elements, floating (and x's dtype when
 * it must be). */
static int check_channel_tensor(const char *arg, const tide_tensor *t, const tide_tensor *x,
                                int64_t channels, bool same_dtype)
{
    if (!t)
        return 0;
    if (nn_check_floating("batch_norm", arg, t) < 0 ||
        (same_dtype && nn_check_same_dtype("batch_norm", arg, t, x) < 0))
        return -1;
    if (tide_ndim(t) == 1 && tide_shape(t)[0] == channels)
        return 0;
    char s[160], d[200];
    return td_error("batch_norm: %s has shape %s, expected [%lld] (one value per channel of the "
                    "input %s)",
                    arg, td_shape_str(s, sizeof s, tide_ndim(t), tide_shape(t)),
                    (long long)channels, nn_describe(d, sizeof d, x));
}

/* A running statistic is updated in place: an expanded view (stride 0), whose elements share
 * memory, cannot take per-channel values. */
static int check_writable(const char *arg, const tide_tensor *t)
{
    for (int d = 0; d < tide_ndim(t); d++)
        if (tide_strides(t)[d] == 0 && tide_shape(t)[d] > 1)
            return td_error("batch_norm: %s is an expanded view whose elements share memory, so "
                            "it cannot be updated in place in training; clone it first",
                            arg);
    return 0;
}

/* running = (1 - momentum) * running + momentum * batch, in place and outside the graph. Both new
 * values are computed before either tensor is written and the destinations were checked
 * writable beforehand, so only a failed allocation can leave one updated and not the other. */
static void update_running(nn_scope *s, tide_tensor *running_mean, tide_tensor *running_var,
                           tide_tensor *batch_mean, tide_tensor *batch_var, int64_t channels,
                           int64_t count, double momentum)
{
    bool grad = nn_no_grad_begin();
    /* Blended in the wider of the two dtypes (float32 statistics of a float64 model lose
     * nothing), then rounded once by copy_. */
    tide_dtype dt = tide_promote_types(tide_get_dtype(running_mean), tide_get_dtype(batch_mean));
    tide_dtype dtv = tide_promote_types(tide_get_dtype(running_var), tide_get_dtype(batch_var));
    tide_tensor *rm = nn_keep(s, tide_cast(running_mean, dt));
    tide_tensor *rv = nn_keep(s, tide_cast(running_var, dtv));
    tide_tensor *bm = nn_keep(s, tide_reshape(batch_mean, 1, &channels));
    tide_tensor *bv = nn_keep(s, tide_reshape(batch_var, 1, &channels));
    tide_tensor *unbiased = nn_keep(s, tide_mul_scalar(bv, (double)count / (double)(count - 1)));
    tide_tensor *old_m = nn_keep(s, tide_mul_scalar(rm, 1 - momentum));
    tide_tensor *new_m_part = nn_keep(s, tide_mul_scalar(bm, momentum));
    tide_tensor *new_m = nn_keep(s, tide_add(old_m, new_m_part));
    tide_tensor *old_v = nn_keep(s, tide_mul_scalar(rv, 1 - momentum));
    tide_tensor *new_v_part = nn_keep(s, tide_mul_scalar(unbiased, momentum));
    tide_tensor *new_v = nn_keep(s, tide_add(old_v, new_v_part));
    if (new_m && new_v) {
        nn_check_status(s, tide_copy_(running_mean, new_m));
        if (!s->failed)
            nn_check_status(s, tide_copy_(running_var, new_v));
    }
    nn_no_grad_end(grad);
}

static tide_tensor *batch_norm_body(const tide_tensor *x, tide_tensor *running_mean,
                                    tide_tensor *running_var, const tide_tensor *weight,
                                    const tide_tensor *bias, bool training, double momentum,
                                    double eps)
{
    const char *op = "batch_norm";
    if (nn_check_floating(op, "input", x) < 0 || nn_check_eps(op, eps) < 0)
        return NULL;
    int ndim = tide_ndim(x);
    char d[200];
    if (ndim < 2) {
        td_error("%s: the input must be [N, C, ...], got %s", op, nn_describe(d, sizeof d, x));
        return NULL;
    }
    int64_t channels = tide_shape(x)[1];
    if ((running_mean == NULL) != (running_var == NULL)) {
        td_error("%s: give both running_mean and running_var, or neither", op);
        return NULL;
    }
    if (!training && !running_mean) {
        td_error("%s: evaluation mode needs running_mean and running_var", op);
        return NULL;
    }
    if (check_channel_tensor("running_mean", running_mean, x, channels, false) < 0 ||
        check_channel_tensor("running_var", running_var, x, channels, false) < 0 ||
        check_channel_tensor("weight", weight, x, channels, true) < 0 ||
        check_channel_tensor("bias", bias, x, channels, true) < 0)
        return NULL;
    if (training && running_mean &&
        (check_writable("running_mean", running_mean) < 0 ||
         check_writable("running_var", running_var) < 0))
        return NULL;
    int64_t count = channels ? tide_numel(x) / channels : 0;
    if (training && count <= 1 && channels > 0) {
        td_error("%s: training needs more than 1 value per channel, got the input %s", op,
                 nn_describe(d, sizeof d, x));
        return NULL;
    }
    if (training && momentum != momentum) {
        td_error("%s: momentum is NaN", op);
        return NULL;
    }
    /* Per-channel tensors broadcast against x as [1, C, 1, ...]. */
    int64_t stat_shape[TIDE_MAX_DIMS];
    int dims[TIDE_MAX_DIMS], ndims = 0;
    for (int i = 0; i < ndim; i++) {
        stat_shape[i] = i == 1 ? channels : 1;
        if (i != 1)
            dims[ndims++] = i;
    }
    nn_scope s = {0};
    tide_tensor *y;
    if (training) {
        tide_tensor *mean = NULL, *var = NULL;
        y = normalize(&s, x, dims, ndims, eps, &mean, &var);
        if (running_mean && y && count > 1)
            update_running(&s, running_mean, running_var, mean, var, channels, count, momentum);
    } else {
        tide_dtype dt = tide_get_dtype(x);
        tide_tensor *rm = nn_keep(&s, tide_cast(running_mean, dt));
        tide_tensor *rv = nn_keep(&s, tide_cast(running_var, dt));
        tide_tensor *mean = nn_keep(&s, tide_reshape(rm, ndim, stat_shape));
        tide_tensor *var = nn_keep(&s, tide_reshape(rv, ndim, stat_shape));
        tide_tensor *xc = nn_keep(&s, tide_sub(x, mean));
        tide_tensor *ve = nn_keep(&s, tide_add_scalar(var, eps));
        tide_tensor *inv = nn_keep(&s, tide_rsqrt(ve));
        y = nn_keep(&s, tide_mul(xc, inv));
    }
    tide_tensor *out = affine(&s, y, weight, bias, ndim, stat_shape);
    return nn_finish(&s, op, out);
}

tide_tensor *tide_batch_norm(const tide_tensor *x, tide_tensor *running_mean,
                             tide_tensor *running_var, const tide_tensor *weight,
                             const tide_tensor *bias, bool training, double momentum, double eps)
{
    /* The running statistics are float32 buffers written in place: x, weight and bias go up to
     * float32 under autocast (PyTorch's CPU batch_norm takes half input with float32 weights;
     * here the dtypes must match, so the norm runs in float32 like layer_norm). */
    TD_IN_AUTOCAST_OP("batch_norm", TD_AUTOCAST_FLOAT32,
                      batch_norm_body(x, running_mean, running_var, weight, bias, training,
                                      momentum, eps),
                      3, &x, &weight, &bias);
}
