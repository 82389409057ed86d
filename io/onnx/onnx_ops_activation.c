/*
 * onnx_ops_activation.c — ONNX's elementwise activations with attributes (Elu, LeakyRelu, Selu,
 * Celu, HardSigmoid, HardSwish, Softplus, ThresholdedRelu, Shrink, Mish, PRelu) on tide's ops.
 * Each is built from tide ops that keep the input's dtype; an attribute's default is ONNX's.
 */
#include "onnx_internal.h"

/* where(cond, a, b), releasing the three operands (any of them may be NULL after a failure). */
static tide_tensor *where_release(tide_tensor *cond, tide_tensor *a, tide_tensor *b)
{
    tide_tensor *out = cond && a && b ? tide_where(cond, a, b) : NULL;
    tide_release(cond);
    tide_release(a);
    tide_release(b);
    return out;
}

/* A 0-dim tensor of x's dtype and device, to compare with or select. */
static tide_tensor *scalar_like(const tide_tensor *x, double v)
{
    return tide_full_on(tide_device_name(x), 0, NULL, v, tide_get_dtype(x));
}

static int run_elu(onnx_ctx *c)
{
    return onnx_set(c, tide_elu(c->in[0], onnx_attr_float(c->node, "alpha", 1.0f)));
}

static int run_leaky_relu(onnx_ctx *c)
{
    return onnx_set(c, tide_leaky_relu(c->in[0], onnx_attr_float(c->node, "alpha", 0.01f)));
}

/* gamma * elu(x, alpha): ONNX lets both constants be set (torch's selu fixes them). */
static int run_selu(onnx_ctx *c)
{
    double alpha = onnx_attr_float(c->node, "alpha", 1.67326319217681884765625f);
    double gamma = onnx_attr_float(c->node, "gamma", 1.05070102214813232421875f);
    tide_tensor *e = tide_elu(c->in[0], alpha);
    tide_tensor *out = e ? tide_mul_scalar(e, gamma) : NULL;
    tide_release(e);
    return onnx_set(c, out);
}

static int run_celu(onnx_ctx *c)
{
    return onnx_set(c, tide_celu(c->in[0], onnx_attr_float(c->node, "alpha", 1.0f)));
}

/* max(0, min(1, alpha * x + beta)) */
static int run_hard_sigmoid(onnx_ctx *c)
{
    double alpha = onnx_attr_float(c->node, "alpha", 0.2f);
    double beta = onnx_attr_float(c->node, "beta", 0.5f);
    tide_tensor *ax = tide_mul_scalar(c->in[0], alpha);
    tide_tensor *axb = ax ? tide_add_scalar(ax, beta) : NULL;
    tide_tensor *out = axb ? tide_hardtanh(axb, 0.0, 1.0) : NULL;
    tide_release(ax);
    tide_release(axb);
    return onnx_set(c, out);
}

static int run_hard_swish(onnx_ctx *c) { return onnx_set(c, tide_hardswish(c->in[0])); }
static int run_mish(onnx_ctx *c) { return onnx_set(c, tide_mish(c->in[0])); }

/* log(1 + exp(x)); above 20, where exp(-x) is below float32's epsilon, it is x itself. */
static int run_softplus(onnx_ctx *c) { return onnx_set(c, tide_softplus(c->in[0], 1.0, 20.0)); }

/* x where x > alpha, else 0 */
static int run_thresholded_relu(onnx_ctx *c)
{
    const tide_tensor *x = c->in[0];
    tide_tensor *alpha = scalar_like(x, onnx_attr_float(c->node, "alpha", 1.0f));
    tide_tensor *cond = alpha ? tide_gt(x, alpha) : NULL;
    tide_release(alpha);
    return onnx_set(c, where_release(cond, tide_retain((tide_tensor *)x), scalar_like(x, 0)));
}

/* x + bias below -lambd, x - bias above lambd, 0 between. */
static int run_shrink(onnx_ctx *c)
{
    const tide_tensor *x = c->in[0];
    double lambd = onnx_attr_float(c->node, "lambd", 0.5f);
    double bias = onnx_attr_float(c->node, "bias", 0.0f);
    tide_tensor *lo = scalar_like(x, -lambd), *hi = scalar_like(x, lambd);
    tide_tensor *below = lo ? tide_lt(x, lo) : NULL, *above = hi ? tide_gt(x, hi) : NULL;
    tide_tensor *b = scalar_like(x, bias);
    tide_tensor *plus = b ? tide_add(x, b) : NULL, *minus = b ? tide_sub(x, b) : NULL;
    tide_tensor *outer = where_release(above, minus, scalar_like(x, 0));
    tide_release(lo);
    tide_release(hi);
    tide_release(b);
    return onnx_set(c, where_release(below, plus, outer));
}

/* Before opset 7 a 1-D slope holds one value per channel (x's dim 1): shaped [C, 1, ...] here so
 * that numpy broadcasting applies it there. NULL with the error set. */
static tide_tensor *prelu_slope(const onnx_ctx *c)
{
    const tide_tensor *x = c->in[0], *s = c->in[1];
    int r = tide_ndim(x);
    if (c->m->opset >= 7 || tide_ndim(s) != 1 || r < 3 || tide_shape(s)[0] != tide_shape(x)[1])
        return tide_retain((tide_tensor *)s);
    int64_t shape[8] = {tide_shape(s)[0], 1, 1, 1, 1, 1, 1, 1};
    return tide_reshape(s, r - 1, shape);
}

/* x where x >= 0, slope * x where not; slope broadcasts against x. */
static int run_prelu(onnx_ctx *c)
{
    const tide_tensor *x = c->in[0];
    tide_tensor *slope = prelu_slope(c);
    tide_tensor *zero = scalar_like(x, 0);
    tide_tensor *neg = zero ? tide_lt(x, zero) : NULL;
    tide_tensor *scaled = slope ? tide_mul(x, slope) : NULL;
    tide_release(zero);
    tide_release(slope);
    return onnx_set(c, where_release(neg, scaled, tide_retain((tide_tensor *)x)));
}

const onnx_op onnx_ops_activation[] = {
    {"Elu", 1, 0, 1, 1, NULL, run_elu, 0},
    {"LeakyRelu", 1, 0, 1, 1, NULL, run_leaky_relu, 0},
    {"Selu", 1, 0, 1, 1, NULL, run_selu, 0},
    {"Celu", 12, 0, 1, 1, NULL, run_celu, 0},
    {"HardSigmoid", 1, 0, 1, 1, NULL, run_hard_sigmoid, 0},
    {"HardSwish", 14, 0, 1, 1, NULL, run_hard_swish, 0},
    {"Mish", 18, 0, 1, 1, NULL, run_mish, 0},
    {"Softplus", 1, 0, 1, 1, NULL, run_softplus, 0},
    {"ThresholdedRelu", 10, 0, 1, 1, NULL, run_thresholded_relu, 0},
    {"Shrink", 9, 0, 1, 1, NULL, run_shrink, 0},
    {"PRelu", 1, 0, 2, 2, NULL, run_prelu, 0},
    {0},
};
