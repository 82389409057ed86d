/*
 * nn_activation.c — gelu (erf-exact and tanh-approximate) and silu.
 *
 * Exact gelu, x * Phi(x) with Phi the standard normal CDF, is the primitive TIDE_OP_GELU (each
 * device computes Phi(x) = erfc(-x/sqrt2)/2, whose error is relative, so negative x keep their
 * digits where 1 + erf(x/sqrt2) would cancel): one op, so autograd keeps x alone for backward.
 * The tanh form stays a composite of public ops (it saves four tensors of x's size).
 */
#include <math.h>

#include "nn_common.h"

/* 0.5 x (1 + tanh(u)), u = sqrt(2/pi) (x + 0.044715 x^3), computed as x * sigmoid(2u): the same
 * value, since 1 + tanh(u) = 2 sigmoid(2u), without the cancellation of 1 + tanh(u) for negative
 * x that would leave float32 no correct digit there. */
static tide_tensor *gelu_tanh(nn_scope *s, const tide_tensor *x)
{
    tide_tensor *x2 = nn_keep(s, tide_mul(x, x));
    tide_tensor *x3 = nn_keep(s, tide_mul(x2, x));
    nn_drop(s, x2);
    tide_tensor *cx3 = nn_keep(s, tide_mul_scalar(x3, 0.044715));
    nn_drop(s, x3);
    tide_tensor *inner = nn_keep(s, tide_add(x, cx3));
    nn_drop(s, cx3);
    tide_tensor *u2 = nn_keep(s, tide_mul_scalar(inner, 2 * sqrt(2 / M_PI)));
    nn_drop(s, inner);
    tide_tensor *sg = nn_keep(s, tide_sigmoid(u2));
    nn_drop(s, u2);
    return nn_keep(s, tide_mul(x, sg));
}

static tide_tensor *gelu_body(const tide_tensor *x, bool approximate_tanh)
{
    if (nn_check_floating("gelu", "input", x) < 0)
        return NULL;
    if (!approximate_tanh)
        return td_gelu_exact(x); /* halves widen in the dispatcher, as every float primitive */
    nn_scope s = {0};
    const tide_tensor *xf = nn_widen_half(&s, x);
    tide_tensor *out = xf ? gelu_tanh(&s, xf) : NULL;
    return nn_finish(&s, "gelu", nn_round_to(&s, out, (tide_dtype)x->dtype));
}

tide_tensor *tide_gelu(const tide_tensor *x, bool approximate_tanh)
{
    TD_IN_OP("gelu", gelu_body(x, approximate_tanh));
}

static tide_tensor *silu_body(const tide_tensor *x)
{
    if (nn_check_floating("silu", "input", x) < 0)
        return NULL;
    nn_scope s = {0};
    const tide_tensor *xf = nn_widen_half(&s, x);
    tide_tensor *sg = xf ? nn_keep(&s, tide_sigmoid(xf)) : NULL;
    tide_tensor *out = sg ? nn_keep(&s, tide_mul(xf, sg)) : NULL;
    return nn_finish(&s, "silu", nn_round_to(&s, out, (tide_dtype)x->dtype));
}

tide_tensor *tide_silu(const tide_tensor *x)
{
    TD_IN_OP("silu", silu_body(x));
}
