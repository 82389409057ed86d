/*
 * math.c — elementwise math written once over the primitives (so autograd, the jit and every
 * device get them): square, frac, hypot, lerp, logaddexp, xlogy, nan_to_num, isnan, isinf,
 * isfinite, addcmul, addcdiv, clamp_min, clamp_max, exp2, log10, logical_xor, with PyTorch's
 * semantics. Each note says
 * how the form keeps the value (and its gradient) finite where the naive formula would not.
 */
#include <float.h>
#include <math.h>

#include "nn_common.h"

static tide_tensor *num(nn_scope *s, double v) { return nn_keep(s, tide_number(v)); }

static int check2(const char *op, const tide_tensor *a, const tide_tensor *b)
{
    if (td_check_tensor(op, "first input", a) < 0 || td_check_tensor(op, "second input", b) < 0)
        return -1;
    return 0;
}

tide_tensor *tide_square(const tide_tensor *x)
{
    if (td_check_tensor("square", "input", x) < 0)
        return NULL;
    TD_IN_OP("square", tide_mul(x, x));
}

/* x - trunc(x): the sign of x, as torch.frac; floating inputs only, as PyTorch. */
static tide_tensor *frac_body(const tide_tensor *x)
{
    if (nn_check_floating("frac", "input", x) < 0)
        return NULL;
    nn_scope s = {0};
    tide_tensor *t = nn_keep(&s, tide_trunc(x));
    return nn_finish(&s, "frac", nn_keep(&s, tide_sub(x, t)));
}

tide_tensor *tide_frac(const tide_tensor *x) { TD_IN_OP("frac", frac_body(x)); }

/* m sqrt(1 + (n/m)^2) with m = max(|a|, |b|), n = min: no overflow or underflow of the squares
 * (float32's a*a overflows past 1.8e19); 0 where both are 0, inf where either is inf (C's
 * hypot, even beside a NaN). */
static tide_tensor *hypot_body(const tide_tensor *a, const tide_tensor *b)
{
    if (check2("hypot", a, b) < 0)
        return NULL;
    nn_scope s = {0};
    tide_tensor *aa = nn_keep(&s, tide_abs(a)), *ab = nn_keep(&s, tide_abs(b));
    tide_tensor *m = nn_keep(&s, tide_maximum(aa, ab)), *n = nn_keep(&s, tide_minimum(aa, ab));
    tide_tensor *zero = nn_keep(&s, tide_eq(m, num(&s, 0)));
    tide_tensor *safe_m = nn_keep(&s, tide_where(zero, num(&s, 1), m));
    tide_tensor *q = nn_keep(&s, tide_div(n, safe_m));
    tide_tensor *r = nn_keep(&s, tide_sqrt(nn_keep(&s, tide_add_scalar(nn_keep(&s, tide_mul(q, q)), 1))));
    tide_tensor *h = nn_keep(&s, tide_where(zero, num(&s, 0), nn_keep(&s, tide_mul(m, r))));
    tide_tensor *inf = nn_keep(&s, tide_logical_or(nn_keep(&s, tide_isinf(a)),
                                                   nn_keep(&s, tide_isinf(b))));
    return nn_finish(&s, "hypot", nn_keep(&s, tide_where(inf, num(&s, INFINITY), h)));
}

tide_tensor *tide_hypot(const tide_tensor *a, const tide_tensor *b)
{
    TD_IN_OP("hypot", hypot_body(a, b));
}

/* PyTorch's two-sided form: start + w (end - start) for |w| < 0.5, else end - (end - start)(1 - w),
 * so w = 0 gives start and w = 1 gives end exactly. */
static tide_tensor *lerp_body(const tide_tensor *start, const tide_tensor *end,
                              const tide_tensor *weight)
{
    if (check2("lerp", start, end) < 0 || td_check_tensor("lerp", "weight", weight) < 0)
        return NULL;
    nn_scope s = {0};
    tide_tensor *d = nn_keep(&s, tide_sub(end, start));
    tide_tensor *lo = nn_keep(&s, tide_add(start, nn_keep(&s, tide_mul(weight, d))));
    tide_tensor *one_minus = nn_keep(&s, tide_sub(num(&s, 1), weight));
    tide_tensor *hi = nn_keep(&s, tide_sub(end, nn_keep(&s, tide_mul(d, one_minus))));
    tide_tensor *small = nn_keep(&s, tide_lt(nn_keep(&s, tide_abs(weight)), num(&s, 0.5)));
    return nn_finish(&s, "lerp", nn_keep(&s, tide_where(small, lo, hi)));
}

tide_tensor *tide_lerp(const tide_tensor *start, const tide_tensor *end, const tide_tensor *weight)
{
    TD_IN_OP("lerp", lerp_body(start, end, weight));
}

/* max(a, b) + log1p(exp(-|a - b|)): exp never overflows; equal infinities (where a - b is NaN)
 * give that infinity, as PyTorch. */
static tide_tensor *logaddexp_body(const tide_tensor *a, const tide_tensor *b)
{
    if (check2("logaddexp", a, b) < 0)
        return NULL;
    nn_scope s = {0};
    tide_tensor *m = nn_keep(&s, tide_maximum(a, b));
    tide_tensor *same_inf = nn_keep(&s, tide_logical_and(nn_keep(&s, tide_isinf(m)),
                                                         nn_keep(&s, tide_eq(a, b))));
    tide_tensor *d = nn_keep(&s, tide_where(same_inf, num(&s, 0), nn_keep(&s, tide_sub(a, b))));
    tide_tensor *e = nn_keep(&s, tide_exp(nn_keep(&s, tide_neg(nn_keep(&s, tide_abs(d))))));
    tide_tensor *r = nn_keep(&s, tide_add(m, nn_keep(&s, tide_log1p(e))));
    return nn_finish(&s, "logaddexp", nn_keep(&s, tide_where(same_inf, m, r)));
}

tide_tensor *tide_logaddexp(const tide_tensor *a, const tide_tensor *b)
{
    TD_IN_OP("logaddexp", logaddexp_body(a, b));
}

/* x log y, 0 where x == 0 (even for y = 0 or inf), NaN where y is NaN. log reads 1 where x == 0,
 * so neither the value nor the gradient meets 0 * -inf. */
static tide_tensor *xlogy_body(const tide_tensor *x, const tide_tensor *y)
{
    if (check2("xlogy", x, y) < 0)
        return NULL;
    nn_scope s = {0};
    tide_tensor *x0 = nn_keep(&s, tide_eq(x, num(&s, 0)));
    tide_tensor *ys = nn_keep(&s, tide_where(x0, num(&s, 1), y));
    tide_tensor *r = nn_keep(&s, tide_mul(x, nn_keep(&s, tide_log(ys))));
    tide_tensor *nan = nn_keep(&s, tide_isnan(y));
    return nn_finish(&s, "xlogy", nn_keep(&s, tide_where(nan, num(&s, NAN), r)));
}

tide_tensor *tide_xlogy(const tide_tensor *x, const tide_tensor *y)
{
    TD_IN_OP("xlogy", xlogy_body(x, y));
}

static double dtype_max(tide_dtype dt)
{
    switch (dt) {
    case TIDE_FLOAT64: return DBL_MAX;
    case TIDE_FLOAT16: return 65504.0;
    case TIDE_BFLOAT16: return 3.3895313892515355e38;
    default: return FLT_MAX;
    }
}

static tide_tensor *nan_to_num_body(const tide_tensor *x, double nan, const double *posinf,
                                    const double *neginf)
{
    if (td_check_tensor("nan_to_num", "input", x) < 0)
        return NULL;
    tide_dtype dt = tide_get_dtype(x);
    if (!tide_dtype_is_floating(dt)) /* integers have no NaN or infinity */
        return tide_clone(x);
    double hi = posinf ? *posinf : dtype_max(dt), lo = neginf ? *neginf : -dtype_max(dt);
    nn_scope s = {0};
    tide_tensor *r = nn_keep(&s, tide_where(nn_keep(&s, tide_isnan(x)), num(&s, nan), x));
    r = nn_keep(&s, tide_where(nn_keep(&s, tide_eq(x, num(&s, INFINITY))), num(&s, hi), r));
    r = nn_keep(&s, tide_where(nn_keep(&s, tide_eq(x, num(&s, -INFINITY))), num(&s, lo), r));
    return nn_finish(&s, "nan_to_num", r);
}

tide_tensor *tide_nan_to_num(const tide_tensor *x, double nan, const double *posinf,
                             const double *neginf)
{
    TD_IN_OP("nan_to_num", nan_to_num_body(x, nan, posinf, neginf));
}

/* NaN is the one value unequal to itself; integer and bool inputs are never NaN or infinite. */
tide_tensor *tide_isnan(const tide_tensor *x)
{
    if (td_check_tensor("isnan", "input", x) < 0)
        return NULL;
    TD_IN_OP("isnan", tide_ne(x, x));
}

static tide_tensor *isinf_body(const tide_tensor *x, bool finite)
{
    const char *op = finite ? "isfinite" : "isinf";
    if (td_check_tensor(op, "input", x) < 0)
        return NULL;
    if (!tide_dtype_is_floating(tide_get_dtype(x)))
        return finite ? tide_eq(x, x) : tide_ne(x, x);
    nn_scope s = {0};
    tide_tensor *a = nn_keep(&s, tide_abs(x));
    tide_tensor *r = finite ? nn_keep(&s, tide_lt(a, num(&s, INFINITY))) /* false for NaN */
                            : nn_keep(&s, tide_eq(a, num(&s, INFINITY)));
    return nn_finish(&s, op, r);
}

tide_tensor *tide_isinf(const tide_tensor *x) { TD_IN_OP("isinf", isinf_body(x, false)); }
tide_tensor *tide_isfinite(const tide_tensor *x) { TD_IN_OP("isfinite", isinf_body(x, true)); }

/* input + value * (t1 op t2), PyTorch's order of operations. */
static tide_tensor *addc_body(const char *op, const tide_tensor *input, const tide_tensor *t1,
                              const tide_tensor *t2, double value, bool divide)
{
    if (td_check_tensor(op, "input", input) < 0 || td_check_tensor(op, "tensor1", t1) < 0 ||
        td_check_tensor(op, "tensor2", t2) < 0)
        return NULL;
    nn_scope s = {0};
    tide_tensor *p = nn_keep(&s, divide ? tide_div(t1, t2) : tide_mul(t1, t2));
    if (value != 1)
        p = nn_keep(&s, tide_mul_scalar(p, value));
    return nn_finish(&s, op, nn_keep(&s, tide_add(input, p)));
}

tide_tensor *tide_addcmul(const tide_tensor *input, const tide_tensor *t1, const tide_tensor *t2,
                          double value)
{
    TD_IN_OP("addcmul", addc_body("addcmul", input, t1, t2, value, false));
}

tide_tensor *tide_addcdiv(const tide_tensor *input, const tide_tensor *t1, const tide_tensor *t2,
                          double value)
{
    TD_IN_OP("addcdiv", addc_body("addcdiv", input, t1, t2, value, true));
}

/* maximum / minimum: NaN in x stays NaN, as torch.clamp_min. */
tide_tensor *tide_clamp_min(const tide_tensor *x, const tide_tensor *min)
{
    if (check2("clamp_min", x, min) < 0)
        return NULL;
    TD_IN_OP("clamp_min", tide_maximum(x, min));
}

tide_tensor *tide_clamp_max(const tide_tensor *x, const tide_tensor *max)
{
    if (check2("clamp_max", x, max) < 0)
        return NULL;
    TD_IN_OP("clamp_max", tide_minimum(x, max));
}

/* exp(x ln 2): the product's rounding moves the result by |x| ln2 2^-53 relative in float64
 * (2^-24 in float32), under an ulp for |x| < 2; exp2 has no kernel of its own. */
static tide_tensor *exp2_body(const tide_tensor *x)
{
    if (td_check_tensor("exp2", "input", x) < 0)
        return NULL;
    nn_scope s = {0};
    tide_tensor *t = nn_keep(&s, tide_mul_scalar(x, 0.69314718055994531));
    return nn_finish(&s, "exp2", nn_keep(&s, tide_exp(t)));
}

tide_tensor *tide_exp2(const tide_tensor *x) { TD_IN_OP("exp2", exp2_body(x)); }

/* log(x) / ln 10: log's ulp and one division. */
static tide_tensor *log10_body(const tide_tensor *x)
{
    if (td_check_tensor("log10", "input", x) < 0)
        return NULL;
    nn_scope s = {0};
    tide_tensor *l = nn_keep(&s, tide_log(x));
    return nn_finish(&s, "log10", nn_keep(&s, tide_div_scalar(l, 2.302585092994045684)));
}

tide_tensor *tide_log10(const tide_tensor *x) { TD_IN_OP("log10", log10_body(x)); }

/* (a != 0) != (b != 0): bool, as torch.logical_xor. */
static tide_tensor *logical_xor_body(const tide_tensor *a, const tide_tensor *b)
{
    if (check2("logical_xor", a, b) < 0)
        return NULL;
    nn_scope s = {0};
    tide_tensor *ta = nn_keep(&s, tide_ne(a, num(&s, 0))), *tb = nn_keep(&s, tide_ne(b, num(&s, 0)));
    return nn_finish(&s, "logical_xor", nn_keep(&s, tide_ne(ta, tb)));
}

tide_tensor *tide_logical_xor(const tide_tensor *a, const tide_tensor *b)
{
    TD_IN_OP("logical_xor", logical_xor_body(a, b));
}
