/*
 * nn_group_norm.c — group_norm and instance_norm, as PyTorch's: x [N, C, ...] is viewed as
 * [N, G, C/G * spatial], each row normalized with its mean and biased variance (two passes, eps
 * inside the square root, as layer_norm), then scaled and shifted per channel. instance_norm is
 * group_norm with one channel per group (PyTorch's use_input_stats = true; running statistics are
 * not tracked). Written with public ops, so autograd, the jit and every device see primitives.
 */
#include "autocast.h"
#include "nn_common.h"

/* (x - mean) / sqrt(var + eps) over the last dim of the 3-D view v. */
static tide_tensor *normalize_rows(nn_scope *s, const tide_tensor *v, double eps)
{
    int last = 2;
    tide_tensor *mean = nn_keep(s, tide_mean(v, &last, 1, true));
    tide_tensor *xc = nn_keep(s, tide_sub(v, mean));
    tide_tensor *sq = nn_keep(s, tide_mul(xc, xc));
    tide_tensor *var = nn_keep(s, tide_mean(sq, &last, 1, true));
    tide_tensor *ve = nn_keep(s, tide_add_scalar(var, eps));
    tide_tensor *inv = nn_keep(s, tide_rsqrt(ve));
    return nn_keep(s, tide_mul(xc, inv));
}

/* A per-channel weight or bias: 1-D [C], x's dtype. */
static int check_channel(const char *op, const char *arg, const tide_tensor *t,
                         const tide_tensor *x)
{
    if (!t)
        return 0;
    int64_t c = tide_shape(x)[1];
    if (nn_check_same_dtype(op, arg, t, x) < 0 || nn_check_shape(op, arg, t, 1, &c) < 0)
        return -1;
    return 0;
}

static tide_tensor *group_norm_body(const char *op, const tide_tensor *x, int64_t groups,
                                    const tide_tensor *weight, const tide_tensor *bias,
                                    double eps)
{
    if (nn_check_floating(op, "input", x) < 0 || nn_check_eps(op, eps) < 0)
        return NULL;
    char d[200];
    int ndim = tide_ndim(x);
    if (ndim < 2) {
        td_error("%s: the input must be [N, C, ...], got %s", op, nn_describe(d, sizeof d, x));
        return NULL;
    }
    int64_t channels = tide_shape(x)[1];
    if (groups < 1 || channels % groups != 0) {
        td_error("%s: %lld channels cannot be split into %lld groups (input %s)", op,
                 (long long)channels, (long long)groups, nn_describe(d, sizeof d, x));
        return NULL;
    }
    if (check_channel(op, "weight", weight, x) < 0 || check_channel(op, "bias", bias, x) < 0)
        return NULL;
    int64_t rows[3] = {tide_shape(x)[0], groups, -1};
    int64_t stat[TIDE_MAX_DIMS];
    for (int i = 0; i < ndim; i++)
        stat[i] = i == 1 ? channels : 1;
    nn_scope s = {0};
    tide_tensor *v = nn_keep(&s, tide_numel(x) ? tide_reshape(x, 3, rows) : tide_clone(x));
    tide_tensor *y = tide_numel(x) ? normalize_rows(&s, v, eps) : v;
    tide_tensor *out = nn_keep(&s, tide_reshape(y, ndim, tide_shape(x)));
    if (weight) {
        tide_tensor *w = nn_keep(&s, tide_reshape(weight, ndim, stat));
        out = nn_keep(&s, tide_mul(out, w));
    }
    if (bias) {
        tide_tensor *b = nn_keep(&s, tide_reshape(bias, ndim, stat));
        out = nn_keep(&s, tide_add(out, b));
    }
    return nn_finish(&s, op, out);
}

tide_tensor *tide_group_norm(const tide_tensor *x, int64_t num_groups, const tide_tensor *weight,
                             const tide_tensor *bias, double eps)
{
    TD_IN_AUTOCAST_OP("group_norm", TD_AUTOCAST_FLOAT32,
                      group_norm_body("group_norm", x, num_groups, weight, bias, eps), 3, &x,
                      &weight, &bias);
}

static tide_tensor *instance_norm_body(const tide_tensor *x, const tide_tensor *weight,
                                       const tide_tensor *bias, double eps)
{
    int64_t channels = x && tide_ndim(x) >= 2 ? tide_shape(x)[1] : 1;
    if (x && tide_ndim(x) == 2) { /* PyTorch reads an unbatched [C, L] as one sample */
        char d[200];
        td_error("instance_norm: the input must be [N, C, ...] with at least one spatial dim, got "
                 "%s; unsqueeze a batch dim first", nn_describe(d, sizeof d, x));
        return NULL;
    }
    return group_norm_body("instance_norm", x, channels ? channels : 1, weight, bias, eps);
}

tide_tensor *tide_instance_norm(const tide_tensor *x, const tide_tensor *weight,
                                const tide_tensor *bias, double eps)
{
    TD_IN_AUTOCAST_OP("instance_norm", TD_AUTOCAST_FLOAT32, instance_norm_body(x, weight, bias, eps),
                      3, &x, &weight, &bias);
}
