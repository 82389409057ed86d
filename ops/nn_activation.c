/*
 * nn_activation.c — gelu (erf-exact and tanh-approximate) and silu.
 *
 * There is no erf primitive, so exact gelu builds the normal CDF Phi(x) = erfc(-x/sqrt2)/2 from
 * exp and arithmetic. For z = |x|/sqrt2 >= 0 it uses the form of Numerical Recipes' erfc,
 *     erfc(z) = t * exp(-z^2 + g(t)),   t = 2 / (2 + z),
 * where g is smooth on t in (0, 1] and is a polynomial, evaluated by Horner. The coefficients
 * were fitted for this file (Chebyshev interpolation of g computed with 50-digit mpmath,
 * truncated, then rewritten in powers of the Chebyshev variable), one set per dtype, over z in
 * [0, 10] for float32 and [0, 27.3] for float64 (past that erfc is below the dtype's smallest
 * number; t is clamped into the fitted range so the polynomial stays bounded and exp(-z^2) takes
 * the value to 0). Truncation error of g, which is the relative error of erfc: 2.6e-9 (float32,
 * 12 terms) and below 1e-17 (float64, 26 terms). What remains is the rounding of the ops, chiefly
 * of z^2 inside exp: the sensitivity any erfc has to the rounding of its argument (2 z^2 ulps).
 * Measured against a long-double erfc, gelu is within 3-4 ulps for |x| < 1 and 14-18 ulps at
 * |x| = 4, in both dtypes. Because erfc's error is relative, Phi(x) stays accurate for negative x,
 * where 1 + erf(x/sqrt2) from an absolute-error erf (Abramowitz-Stegun 7.1.26, 1.5e-7) would
 * lose every digit. Then Phi(x) = erfc(z)/2 for x < 0 and 1 - erfc(z)/2 otherwise; both branches
 * are finite everywhere, so the gradient through where stays clean.
 */
#include <math.h>

#include "nn_common.h"

typedef struct erfc_fit {
    double a; /* the series covers t in [a, 1] */
    int n;
    const double *c; /* g as a polynomial in s = (2t - 1 - a)/(1 - a), constant term first */
} erfc_fit;

static const double erfc_f32_coef[12] = {
    -0.55859535372792468,    0.57030715365546358,     0.015745074072071874,
    -0.029471350434957733,   -0.0010455518350085862,  0.0037131527712421391,
    -0.00027596115799807943, -0.00054729439540930852, 0.0001298682143473287,
    6.7834031783185731e-05,  -2.2855769681526915e-05, -4.7177399865712735e-06,
};

static const double erfc_f64_coef[26] = {
    -0.62567439803246905,    0.63212952271303879,     0.032548912685878645,
    -0.039773238424077234,   -0.0050978439761848625,  0.0065411996070234048,
    0.00041642016402463743,  -0.0014127597730095845,  0.00013611673231731918,
    0.00030189507930185555,  -9.8828351268642167e-05, -4.9492082803291133e-05,
    3.7287673467393951e-05,  1.7228591598076707e-06,  -9.6494299645575732e-06,
    2.5643614961416943e-06,  1.4852256492376869e-06,  -1.0921754936858041e-06,
    2.9819603947925696e-08,  2.3317457511192983e-07,  -8.6626494105410487e-08,
    -1.9060586512769571e-08, 2.2416451444991911e-08,  -3.0119389035527936e-09,
    -2.2766787754855741e-09, 7.0898140644869313e-10,
};

static const erfc_fit erfc_f32 = {0.16666666666666666, 12, erfc_f32_coef};   /* z <= 10 */
static const erfc_fit erfc_f64 = {0.068259385665529013, 26, erfc_f64_coef}; /* z <= 27.3 */

/* Phi(x), the standard normal CDF. */
static tide_tensor *normal_cdf(nn_scope *s, const tide_tensor *x)
{
    const erfc_fit *fit = tide_get_dtype(x) == TIDE_FLOAT64 ? &erfc_f64 : &erfc_f32;
    const double *c = fit->c;
    int n = fit->n;
    tide_tensor *ax = nn_keep(s, tide_abs(x));
    tide_tensor *z = nn_keep(s, tide_mul_scalar(ax, M_SQRT1_2));
    nn_drop(s, ax);
    /* r = t/2 = 1/(z + 2); the series variable, clamped at -1 where z is past the fit. */
    tide_tensor *zp2 = nn_keep(s, tide_add_scalar(z, 2));
    tide_tensor *r = nn_keep(s, tide_reciprocal(zp2));
    nn_drop(s, zp2);
    tide_tensor *lin = nn_keep(s, tide_mul_scalar(r, 4 / (1 - fit->a)));
    tide_tensor *uraw = nn_keep(s, tide_sub_scalar(lin, (1 + fit->a) / (1 - fit->a)));
    nn_drop(s, lin);
    tide_tensor *lo = nn_keep(s, tide_number(-1));
    tide_tensor *u = nn_keep(s, tide_maximum(uraw, lo));
    nn_drop(s, uraw);
    /* Horner; the coefficients add up to 1.2-1.3 in absolute value against |g| ~ 0.6, so the
     * sum loses no digits. */
    tide_tensor *acc = nn_keep(s, tide_mul_scalar(u, c[n - 1]));
    for (int k = n - 2; k >= 0; k--) {
        tide_tensor *sum = nn_keep(s, tide_add_scalar(acc, c[k]));
        nn_drop(s, acc);
        if (k == 0) {
            acc = sum;
            break;
        }
        acc = nn_keep(s, tide_mul(sum, u));
        nn_drop(s, sum);
    }
    nn_drop(s, u);
    tide_tensor *g = acc; /* erfc(z)/2 = r * exp(g - z^2) */
    tide_tensor *zz = nn_keep(s, tide_mul(z, z));
    nn_drop(s, z);
    tide_tensor *arg = nn_keep(s, tide_sub(g, zz));
    nn_drop(s, g);
    nn_drop(s, zz);
    tide_tensor *ex = nn_keep(s, tide_exp(arg));
    nn_drop(s, arg);
    tide_tensor *half_erfc = nn_keep(s, tide_mul(r, ex));
    nn_drop(s, r);
    nn_drop(s, ex);
    tide_tensor *one = nn_keep(s, tide_number(1));
    tide_tensor *upper = nn_keep(s, tide_sub(one, half_erfc));
    tide_tensor *zero = nn_keep(s, tide_number(0));
    tide_tensor *negative = nn_keep(s, tide_lt(x, zero));
    return nn_keep(s, tide_where(negative, half_erfc, upper));
}

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
    nn_scope s = {0};
    const tide_tensor *xf = nn_widen_half(&s, x);
    tide_tensor *out = NULL;
    if (xf && approximate_tanh) {
        out = gelu_tanh(&s, xf);
    } else if (xf) {
        tide_tensor *phi = normal_cdf(&s, xf);
        out = nn_keep(&s, tide_mul(xf, phi));
    }
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
