/*
 * nn_activation_more.c — the elementwise activations of torch.nn.functional beyond gelu and
 * silu: elu, selu, celu, softplus, mish, softsign, hardtanh, relu6, leaky_relu, hardswish,
 * hardsigmoid, logsigmoid, glu. Composites of primitives, as nn_activation.c's: float16 and
 * bfloat16 inputs compute in float32 and round once (nn_widen_half).
 *
 * Where a branch is not taken (where), its input is kept finite (exp of min(x, 0), of
 * min(beta x, threshold)), so no inf or NaN reaches the gradient through the other branch.
 * expm1 and log1p keep the small values exact: elu(-1e-8) = -1e-8, logsigmoid(30) = -9.4e-14.
 */
#include <math.h>

#include "nn_common.h"

typedef tide_tensor *(*act_fn)(nn_scope *s, const tide_tensor *x, const double *p);

static tide_tensor *num(nn_scope *s, double v) { return nn_keep(s, tide_number(v)); }

/* The shared frame: checks x, widens half, runs body, rounds back, names errors after op. */
static tide_tensor *activation(const char *op, const tide_tensor *x, act_fn body, const double *p)
{
    if (nn_check_floating(op, "input", x) < 0)
        return NULL;
    nn_scope s = {0};
    const tide_tensor *xf = nn_widen_half(&s, x);
    tide_tensor *out = xf ? body(&s, xf, p) : NULL;
    return nn_finish(&s, op, nn_round_to(&s, out, tide_get_dtype(x)));
}

/* x > 0 ? scale x : scale alpha expm1(min(x, 0) / div): elu (div 1), selu, celu (div alpha). */
static tide_tensor *elu_like(nn_scope *s, const tide_tensor *x, const double *p)
{
    double alpha = p[0], scale = p[1], div = p[2];
    tide_tensor *neg = nn_keep(s, tide_minimum(x, num(s, 0)));
    if (div != 1)
        neg = nn_keep(s, tide_div_scalar(neg, div));
    tide_tensor *e = nn_keep(s, tide_mul_scalar(nn_keep(s, tide_expm1(neg)), alpha * scale));
    tide_tensor *pos = scale == 1 ? (tide_tensor *)x : nn_keep(s, tide_mul_scalar(x, scale));
    return nn_keep(s, tide_where(nn_keep(s, tide_gt(x, num(s, 0))), pos, e));
}

tide_tensor *tide_elu(const tide_tensor *x, double alpha)
{
    const double p[3] = {alpha, 1, 1};
    TD_IN_OP("elu", activation("elu", x, elu_like, p));
}

tide_tensor *tide_selu(const tide_tensor *x)
{
    /* PyTorch's constants (Klambauer et al.) */
    const double p[3] = {1.6732632423543772848170429916717, 1.0507009873554804934193349852946, 1};
    TD_IN_OP("selu", activation("selu", x, elu_like, p));
}

tide_tensor *tide_celu(const tide_tensor *x, double alpha)
{
    if (alpha == 0) {
        td_error("celu: alpha must not be 0 (it divides x)");
        return NULL;
    }
    const double p[3] = {alpha, 1, alpha};
    TD_IN_OP("celu", activation("celu", x, elu_like, p));
}

/* log1p(exp(beta x)) / beta, x itself where beta x > threshold, as PyTorch. */
static tide_tensor *softplus_body(nn_scope *s, const tide_tensor *x, const double *p)
{
    double beta = p[0], threshold = p[1];
    tide_tensor *bx = beta == 1 ? (tide_tensor *)x : nn_keep(s, tide_mul_scalar(x, beta));
    tide_tensor *capped = nn_keep(s, tide_minimum(bx, num(s, threshold)));
    tide_tensor *sp = nn_keep(s, tide_log1p(nn_keep(s, tide_exp(capped))));
    if (beta != 1)
        sp = nn_keep(s, tide_div_scalar(sp, beta));
    return nn_keep(s, tide_where(nn_keep(s, tide_gt(bx, num(s, threshold))), x, sp));
}

tide_tensor *tide_softplus(const tide_tensor *x, double beta, double threshold)
{
    const double p[2] = {beta, threshold};
    TD_IN_OP("softplus", activation("softplus", x, softplus_body, p));
}

static tide_tensor *mish_body(nn_scope *s, const tide_tensor *x, const double *p)
{
    (void)p;
    const double sp[2] = {1, 20};
    return nn_keep(s, tide_mul(x, nn_keep(s, tide_tanh(softplus_body(s, x, sp)))));
}

tide_tensor *tide_mish(const tide_tensor *x) { TD_IN_OP("mish", activation("mish", x, mish_body, NULL)); }

static tide_tensor *softsign_body(nn_scope *s, const tide_tensor *x, const double *p)
{
    (void)p;
    tide_tensor *d = nn_keep(s, tide_add_scalar(nn_keep(s, tide_abs(x)), 1));
    return nn_keep(s, tide_div(x, d));
}

tide_tensor *tide_softsign(const tide_tensor *x)
{
    TD_IN_OP("softsign", activation("softsign", x, softsign_body, NULL));
}

/* lo where x <= lo, hi where x >= hi (gradient 0 there, as PyTorch's), else x; NaN stays. */
static tide_tensor *hardtanh_body(nn_scope *s, const tide_tensor *x, const double *p)
{
    tide_tensor *r = nn_keep(s, tide_where(nn_keep(s, tide_le(x, num(s, p[0]))), num(s, p[0]), x));
    return nn_keep(s, tide_where(nn_keep(s, tide_ge(x, num(s, p[1]))), num(s, p[1]), r));
}

tide_tensor *tide_hardtanh(const tide_tensor *x, double min_val, double max_val)
{
    if (min_val > max_val) {
        td_error("hardtanh: min_val (%g) must not exceed max_val (%g)", min_val, max_val);
        return NULL;
    }
    const double p[2] = {min_val, max_val};
    TD_IN_OP("hardtanh", activation("hardtanh", x, hardtanh_body, p));
}

tide_tensor *tide_relu6(const tide_tensor *x)
{
    const double p[2] = {0, 6};
    TD_IN_OP("relu6", activation("relu6", x, hardtanh_body, p));
}

static tide_tensor *leaky_body(nn_scope *s, const tide_tensor *x, const double *p)
{
    tide_tensor *neg = nn_keep(s, tide_mul_scalar(x, p[0]));
    return nn_keep(s, tide_where(nn_keep(s, tide_gt(x, num(s, 0))), x, neg));
}

tide_tensor *tide_leaky_relu(const tide_tensor *x, double negative_slope)
{
    TD_IN_OP("leaky_relu", activation("leaky_relu", x, leaky_body, &negative_slope));
}

/* relu6(x + 3) / 6, times x for hardswish. */
static tide_tensor *hard_body(nn_scope *s, const tide_tensor *x, const double *p)
{
    const double clip[2] = {0, 6};
    tide_tensor *r = hardtanh_body(s, nn_keep(s, tide_add_scalar(x, 3)), clip);
    r = nn_keep(s, tide_div_scalar(r, 6));
    return p[0] ? nn_keep(s, tide_mul(x, r)) : r;
}

tide_tensor *tide_hardswish(const tide_tensor *x)
{
    const double p[1] = {1};
    TD_IN_OP("hardswish", activation("hardswish", x, hard_body, p));
}

tide_tensor *tide_hardsigmoid(const tide_tensor *x)
{
    const double p[1] = {0};
    TD_IN_OP("hardsigmoid", activation("hardsigmoid", x, hard_body, p));
}

/* log sigmoid(x) = min(x, 0) - log1p(exp(-|x|)): no overflow, and tiny values for large x. */
static tide_tensor *logsigmoid_body(nn_scope *s, const tide_tensor *x, const double *p)
{
    (void)p;
    tide_tensor *e = nn_keep(s, tide_exp(nn_keep(s, tide_neg(nn_keep(s, tide_abs(x))))));
    tide_tensor *m = nn_keep(s, tide_minimum(x, num(s, 0)));
    return nn_keep(s, tide_sub(m, nn_keep(s, tide_log1p(e))));
}

tide_tensor *tide_logsigmoid(const tide_tensor *x)
{
    TD_IN_OP("logsigmoid", activation("logsigmoid", x, logsigmoid_body, NULL));
}

/* first half * sigmoid(second half) along p[0]; the caller checked the dim and its size. */
static tide_tensor *glu_body(nn_scope *s, const tide_tensor *x, const double *p)
{
    int dim = (int)p[0];
    int64_t h = tide_size(x, dim) / 2;
    tide_tensor *a = nn_keep(s, tide_slice(x, dim, 0, h, 1));
    tide_tensor *b = nn_keep(s, tide_slice(x, dim, h, 2 * h, 1));
    return nn_keep(s, tide_mul(a, nn_keep(s, tide_sigmoid(b))));
}

tide_tensor *tide_glu(const tide_tensor *x, int dim)
{
    if (td_check_tensor("glu", "input", x) < 0)
        return NULL;
    int d = nn_normalize_dim("glu", dim, tide_ndim(x));
    if (d < 0)
        return NULL;
    if (tide_ndim(x) == 0 || tide_size(x, d) % 2 != 0) {
        char buf[200];
        td_error("glu: the size of dim %d of the input %s must be even, to halve it", dim,
                 nn_describe(buf, sizeof buf, x));
        return NULL;
    }
    const double p[1] = {d};
    TD_IN_OP("glu", activation("glu", x, glu_body, p));
}
