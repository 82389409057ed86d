/*
 * onnx_ops_elementwise.c — ONNX's elementwise ops on tide's: unary math, binary arithmetic and
 * comparisons with numpy broadcasting (opset 7 on) or the `broadcast`/`axis` attributes (opsets
 * 1-6), Mod, Clip, IsInf, the inverse hyperbolics, BitShift (uint8), casts, Identity, Constant.
 * Integer edge cases follow numpy, which made the test data: a division by zero gives 0.
 */
#include <math.h>
#include <string.h>

#include "onnx_internal.h"

#define UNARY(name, call)                                                                        \
    static int run_##name(onnx_ctx *c) { return onnx_set(c, call(c->in[0])); }
#define BINARY(name, call)                                                                       \
    static int run_##name(onnx_ctx *c) { return onnx_set(c, call(c->in[0], c->in[1])); }

UNARY(abs, tide_abs)
UNARY(neg, tide_neg)
UNARY(exp, tide_exp)
UNARY(log, tide_log)
UNARY(sqrt, tide_sqrt)
UNARY(reciprocal, tide_reciprocal)
UNARY(sin, tide_sin)
UNARY(cos, tide_cos)
UNARY(tan, tide_tan)
UNARY(asin, tide_asin)
UNARY(acos, tide_acos)
UNARY(atan, tide_atan)
UNARY(sinh, tide_sinh)
UNARY(cosh, tide_cosh)
UNARY(tanh, tide_tanh)
UNARY(sigmoid, tide_sigmoid)
UNARY(erf, tide_erf)
UNARY(floor, tide_floor)
UNARY(ceil, tide_ceil)
UNARY(round, tide_round)
UNARY(sign, tide_sign)
UNARY(relu, tide_relu)
UNARY(isnan, tide_isnan)
UNARY(not, tide_logical_not)
UNARY(softsign, tide_softsign)

BINARY(add, tide_add)
BINARY(sub, tide_sub)
BINARY(mul, tide_mul)
BINARY(equal, tide_eq)
BINARY(less, tide_lt)
BINARY(less_equal, tide_le)
BINARY(greater, tide_gt)
BINARY(greater_equal, tide_ge)
BINARY(and, tide_logical_and)
BINARY(or, tide_logical_or)
BINARY(xor, tide_logical_xor)

static bool is_integer(const tide_tensor *t)
{
    tide_dtype d = tide_get_dtype(t);
    return d == TIDE_INT32 || d == TIDE_INT64 || d == TIDE_UINT8;
}

/* Integer Div truncates toward zero (C's division), in float64: exact below 2^53. A division by
 * zero gives 0, as numpy's integer division does (C's is undefined). */
static int run_div(onnx_ctx *c)
{
    if (!is_integer(c->in[0]))
        return onnx_set(c, tide_div(c->in[0], c->in[1]));
    tide_tensor *a = tide_cast(c->in[0], TIDE_FLOAT64), *b = tide_cast(c->in[1], TIDE_FLOAT64);
    tide_tensor *q = a && b ? tide_div(a, b) : NULL;
    tide_tensor *t = q ? tide_trunc(q) : NULL;
    tide_tensor *zero = t ? tide_full_on(tide_device_name(t), 0, NULL, 0.0, TIDE_FLOAT64) : NULL;
    tide_tensor *by_zero = zero ? tide_eq(b, zero) : NULL;
    tide_tensor *safe = by_zero ? tide_where(by_zero, zero, t) : NULL;
    tide_tensor *out = safe ? tide_cast(safe, tide_get_dtype(c->in[0])) : NULL;
    tide_tensor *tmp[] = {a, b, q, t, zero, by_zero, safe};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++)
        tide_release(tmp[i]);
    return onnx_set(c, out);
}

/* Pow's result has the base's dtype (an int base with a float exponent stays int). */
static int run_pow(onnx_ctx *c)
{
    tide_tensor *p = tide_pow(c->in[0], c->in[1]);
    tide_dtype d = tide_get_dtype(c->in[0]);
    if (!p || tide_get_dtype(p) == d)
        return onnx_set(c, p);
    tide_tensor *out = tide_cast(p, d);
    tide_release(p);
    return onnx_set(c, out);
}

/* ---- opsets 1-6: `broadcast` and `axis` instead of numpy broadcasting -------------------- */

/* B shaped to broadcast against A the legacy way: with broadcast=1, B's dims match A's from
 * `axis` on (default: A's last dims), so B gets trailing 1s; with broadcast=0 the shapes must
 * be equal. NULL with the error set. */
static tide_tensor *legacy_rhs(onnx_ctx *c)
{
    const tide_tensor *a = c->in[0], *b = c->in[1];
    int ra = tide_ndim(a), rb = tide_ndim(b);
    const int64_t *sa = tide_shape(a), *sb = tide_shape(b);
    bool same = ra == rb;
    for (int i = 0; same && i < ra; i++)
        same = sa[i] == sb[i];
    if (same)
        return tide_retain((tide_tensor *)b);
    if (!onnx_attr_int(c->node, "broadcast", 0)) {
        onnx_error(c, "A and B have different shapes (%d and %d dims) and broadcast is 0", ra, rb);
        return NULL;
    }
    int64_t axis = onnx_attr(c->node, "axis") ? onnx_attr_int(c->node, "axis", 0) : ra - rb;
    if (axis < 0)
        axis += ra;
    if (axis < 0 || axis + rb > ra) {
        onnx_error(c, "axis %lld does not place B's %d dims inside A's %d", (long long)axis, rb, ra);
        return NULL;
    }
    int64_t shape[8];
    for (int i = 0; i < ra - (int)axis; i++)
        shape[i] = i < rb ? sb[i] : 1;
    for (int i = 0; i < rb; i++)
        if (sb[i] != sa[axis + i] && sb[i] != 1) {
            onnx_error(c, "B's dim %d (%lld) does not match A's dim %lld (%lld)", i,
                       (long long)sb[i], (long long)(axis + i), (long long)sa[axis + i]);
            return NULL;
        }
    tide_tensor *out = tide_reshape(b, ra - (int)axis, shape);
    if (!out)
        onnx_fail(c);
    return out;
}

/* Runs the numpy-broadcasting handler with B reshaped the legacy way. */
static int run_legacy(onnx_ctx *c, int (*run)(onnx_ctx *))
{
    tide_tensor *b = legacy_rhs(c);
    if (!b)
        return -1;
    tide_tensor *orig = c->in[1];
    c->in[1] = b;
    int rc = run(c);
    c->in[1] = orig;
    tide_release(b);
    return rc;
}

#define LEGACY(name)                                                                             \
    static int run_legacy_##name(onnx_ctx *c) { return run_legacy(c, run_##name); }
LEGACY(add)
LEGACY(sub)
LEGACY(mul)
LEGACY(div)
LEGACY(pow)
LEGACY(equal)
LEGACY(less)
LEGACY(greater)
LEGACY(and)
LEGACY(or)
LEGACY(xor)

/* ---- more math ----------------------------------------------------------------------------- */

/* fmod=1: C's fmod (the dividend's sign); fmod=0: Python's % (the divisor's sign), which ONNX
 * allows for integers only. */
static int run_mod(onnx_ctx *c)
{
    if (onnx_attr_int(c->node, "fmod", 0))
        return onnx_set(c, tide_fmod(c->in[0], c->in[1]));
    if (!is_integer(c->in[0]))
        return onnx_error(c, "fmod=0 needs integer inputs; they are %s (set fmod=1 for floats)",
                          tide_dtype_name(tide_get_dtype(c->in[0])));
    return onnx_set(c, tide_remainder(c->in[0], c->in[1]));
}

/* A 0-dim tensor of x's dtype and device. */
static tide_tensor *scalar_like(const tide_tensor *x, double v)
{
    return tide_full_on(tide_device_name(x), 0, NULL, v, tide_get_dtype(x));
}

/* x clamped to [lo, hi]; either bound may be NULL (none). Bounds take x's dtype. */
static int clip_between(onnx_ctx *c, const tide_tensor *lo, const tide_tensor *hi)
{
    tide_dtype d = tide_get_dtype(c->in[0]);
    tide_tensor *x = tide_retain(c->in[0]);
    const tide_tensor *bounds[2] = {lo, hi};
    for (int k = 0; k < 2 && x; k++) {
        if (!bounds[k])
            continue;
        tide_tensor *b = tide_cast(bounds[k], d);
        tide_tensor *next = b ? (k ? tide_clamp_max(x, b) : tide_clamp_min(x, b)) : NULL;
        tide_release(b);
        tide_release(x);
        x = next;
    }
    return onnx_set(c, x);
}

/* Opsets 6-10: `min` and `max` attributes (defaults: no bound). */
static int run_clip_attr(onnx_ctx *c)
{
    const tide_tensor *x = c->in[0];
    tide_tensor *lo = onnx_attr(c->node, "min") ? scalar_like(x, onnx_attr_float(c->node, "min", 0))
                                                : NULL;
    tide_tensor *hi = onnx_attr(c->node, "max") ? scalar_like(x, onnx_attr_float(c->node, "max", 0))
                                                : NULL;
    int rc = (onnx_attr(c->node, "min") && !lo) || (onnx_attr(c->node, "max") && !hi)
                 ? onnx_fail(c)
                 : clip_between(c, lo, hi);
    tide_release(lo);
    tide_release(hi);
    return rc;
}

/* Opset 11 on: optional min and max inputs (one element each). */
static int run_clip(onnx_ctx *c)
{
    for (int k = 1; k < c->nin; k++)
        if (c->in[k] && tide_numel(c->in[k]) != 1)
            return onnx_error(c, "input %d (%s) must have one element; it has %lld", k,
                              k == 1 ? "min" : "max", (long long)tide_numel(c->in[k]));
    return clip_between(c, c->nin > 1 ? c->in[1] : NULL, c->nin > 2 ? c->in[2] : NULL);
}

/* isinf, limited to +inf and/or -inf by detect_positive/detect_negative. */
static int run_isinf(onnx_ctx *c)
{
    const tide_tensor *x = c->in[0];
    bool pos = onnx_attr_int(c->node, "detect_positive", 1) != 0;
    bool neg = onnx_attr_int(c->node, "detect_negative", 1) != 0;
    tide_tensor *inf = tide_isinf(x);
    if (!inf || (pos && neg))
        return onnx_set(c, inf);
    tide_tensor *zero = scalar_like(x, 0);
    tide_tensor *side = !zero ? NULL : pos ? tide_gt(x, zero) : neg ? tide_lt(x, zero)
                                                                   : tide_ne(zero, zero);
    tide_tensor *out = side ? tide_logical_and(inf, side) : NULL;
    tide_release(zero);
    tide_release(side);
    tide_release(inf);
    return onnx_set(c, out);
}

/* asinh(x) = sign(x) log(|x| + sqrt(x^2 + 1)): on |x| so that large negative x keeps its
 * digits. acosh(x) = log(x + sqrt(x^2 - 1)). atanh(x) = (log1p(x) - log1p(-x)) / 2. */
static int run_asinh(onnx_ctx *c)
{
    const tide_tensor *x = c->in[0];
    tide_tensor *ax = tide_abs(x), *sq = ax ? tide_square(ax) : NULL;
    tide_tensor *sq1 = sq ? tide_add_scalar(sq, 1.0) : NULL, *r = sq1 ? tide_sqrt(sq1) : NULL;
    tide_tensor *sum = r ? tide_add(ax, r) : NULL, *l = sum ? tide_log(sum) : NULL;
    tide_tensor *s = l ? tide_sign(x) : NULL, *out = s ? tide_mul(s, l) : NULL;
    tide_tensor *tmp[] = {ax, sq, sq1, r, sum, l, s};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++)
        tide_release(tmp[i]);
    return onnx_set(c, out);
}

static int run_acosh(onnx_ctx *c)
{
    const tide_tensor *x = c->in[0];
    tide_tensor *sq = tide_square(x), *sq1 = sq ? tide_sub_scalar(sq, 1.0) : NULL;
    tide_tensor *r = sq1 ? tide_sqrt(sq1) : NULL, *sum = r ? tide_add(x, r) : NULL;
    tide_tensor *out = sum ? tide_log(sum) : NULL;
    tide_release(sq);
    tide_release(sq1);
    tide_release(r);
    tide_release(sum);
    return onnx_set(c, out);
}

static int run_atanh(onnx_ctx *c)
{
    const tide_tensor *x = c->in[0];
    tide_tensor *p = tide_log1p(x), *nx = tide_neg(x), *m = nx ? tide_log1p(nx) : NULL;
    tide_tensor *d = p && m ? tide_sub(p, m) : NULL, *out = d ? tide_mul_scalar(d, 0.5) : NULL;
    tide_release(p);
    tide_release(nx);
    tide_release(m);
    tide_release(d);
    return onnx_set(c, out);
}

/* BitShift on uint8 (tide's only unsigned dtype): x * 2^y or floor(x / 2^y), in float64 (exact
 * for these magnitudes), the left shift wrapped modulo 256 as uint8 arithmetic does. */
static int check_bitshift(const onnx_node *n, char *why, size_t size)
{
    char dir[16];
    onnx_attr_string(n, "direction", "", dir, sizeof dir);
    (void)why;
    (void)size;
    if (strcmp(dir, "LEFT") && strcmp(dir, "RIGHT"))
        return td_error("BitShift direction '%s' is neither LEFT nor RIGHT", dir);
    return 0;
}

static int run_bitshift(onnx_ctx *c)
{
    if (tide_get_dtype(c->in[0]) != TIDE_UINT8 || tide_get_dtype(c->in[1]) != TIDE_UINT8)
        return onnx_unsupported(c, "BitShift supports uint8 inputs only");
    char dir[16];
    bool left = !strcmp(onnx_attr_string(c->node, "direction", "", dir, sizeof dir), "LEFT");
    tide_tensor *x = tide_cast(c->in[0], TIDE_FLOAT64), *y = tide_cast(c->in[1], TIDE_FLOAT64);
    tide_tensor *two = x ? scalar_like(x, 2.0) : NULL, *p = two && y ? tide_pow(two, y) : NULL;
    tide_tensor *v = p ? (left ? tide_mul(x, p) : tide_div(x, p)) : NULL;
    tide_tensor *f = v ? tide_floor(v) : NULL, *w = f ? scalar_like(f, 256.0) : NULL;
    tide_tensor *r = w ? tide_fmod(f, w) : NULL;
    tide_tensor *out = r ? tide_cast(r, TIDE_UINT8) : NULL;
    tide_tensor *tmp[] = {x, y, two, p, v, f, w, r};
    for (size_t i = 0; i < sizeof tmp / sizeof *tmp; i++)
        tide_release(tmp[i]);
    return onnx_set(c, out);
}

static int run_identity(onnx_ctx *c)
{
    c->out[0] = tide_retain(c->in[0]);
    return 0;
}

/* Cast's `to` must be a dtype tide has. */
static int check_cast(const onnx_node *n, char *why, size_t size)
{
    int64_t to = onnx_attr_int(n, "to", -1);
    if (onnx_dtype((int32_t)to) < 0) {
        snprintf(why, size, "a cast to %s is not supported", onnx_dtype_name((int32_t)to));
        return 1;
    }
    return 0;
}

static int run_cast(onnx_ctx *c)
{
    int dt = onnx_dtype((int32_t)onnx_attr_int(c->node, "to", -1));
    return onnx_set(c, tide_cast(c->in[0], (tide_dtype)dt));
}

static int run_cast_like(onnx_ctx *c)
{
    return onnx_set(c, tide_cast(c->in[0], tide_get_dtype(c->in[1])));
}

/* Constant: `value` (a tensor); the scalar and list forms of opset 12 on. */
static int check_constant(const onnx_node *n, char *why, size_t size)
{
    static const char *const forms[] = {"value", "value_float", "value_floats", "value_int",
                                        "value_ints"};
    for (size_t i = 0; i < sizeof forms / sizeof *forms; i++)
        if (onnx_attr(n, forms[i]))
            return 0;
    snprintf(why, size, "Constant without a value, value_float(s) or value_int(s) (sparse and "
             "string values are not supported)");
    return 1;
}

static int run_constant(onnx_ctx *c)
{
    const onnx_node *n = c->node;
    const Onnx__AttributeProto *a;
    const char *dev = c->m->device ? c->m->device : tide_get_default_device();
    if ((a = onnx_attr(n, "value")) && a->t) {
        td_io_ctx io = {"onnx_run", c->m->path};
        tide_tensor *t = onnx_tensor_from_proto(&io, a->t, c->m->dir, c->m->device);
        return t ? onnx_set(c, t) : onnx_fail(c);
    }
    if ((a = onnx_attr(n, "value_float")) && a->has_f)
        return onnx_set(c, tide_from_data_on(dev, &a->f, 0, NULL, TIDE_FLOAT32));
    if ((a = onnx_attr(n, "value_int")) && a->has_i)
        return onnx_set(c, tide_from_data_on(dev, &a->i, 0, NULL, TIDE_INT64));
    if ((a = onnx_attr(n, "value_floats"))) {
        int64_t len = (int64_t)a->n_floats;
        return onnx_set(c, tide_from_data_on(dev, a->floats, 1, &len, TIDE_FLOAT32));
    }
    if ((a = onnx_attr(n, "value_ints"))) {
        int64_t len = (int64_t)a->n_ints;
        return onnx_set(c, tide_from_data_on(dev, a->ints, 1, &len, TIDE_INT64));
    }
    return onnx_error(c, "Constant has no value it supports");
}

const onnx_op onnx_ops_elementwise[] = {
    {"Abs", 1, 0, 1, 1, NULL, run_abs, false},
    {"Neg", 1, 0, 1, 1, NULL, run_neg, false},
    {"Exp", 1, 0, 1, 1, NULL, run_exp, false},
    {"Log", 1, 0, 1, 1, NULL, run_log, false},
    {"Sqrt", 1, 0, 1, 1, NULL, run_sqrt, false},
    {"Reciprocal", 1, 0, 1, 1, NULL, run_reciprocal, false},
    {"Sin", 7, 0, 1, 1, NULL, run_sin, false},
    {"Cos", 7, 0, 1, 1, NULL, run_cos, false},
    {"Tan", 7, 0, 1, 1, NULL, run_tan, false},
    {"Asin", 7, 0, 1, 1, NULL, run_asin, false},
    {"Acos", 7, 0, 1, 1, NULL, run_acos, false},
    {"Atan", 7, 0, 1, 1, NULL, run_atan, false},
    {"Sinh", 9, 0, 1, 1, NULL, run_sinh, false},
    {"Cosh", 9, 0, 1, 1, NULL, run_cosh, false},
    {"Tanh", 1, 0, 1, 1, NULL, run_tanh, false},
    {"Sigmoid", 1, 0, 1, 1, NULL, run_sigmoid, false},
    {"Erf", 9, 0, 1, 1, NULL, run_erf, false},
    {"Floor", 1, 0, 1, 1, NULL, run_floor, false},
    {"Ceil", 1, 0, 1, 1, NULL, run_ceil, false},
    {"Round", 11, 0, 1, 1, NULL, run_round, false},
    {"Sign", 9, 0, 1, 1, NULL, run_sign, false},
    {"Relu", 1, 0, 1, 1, NULL, run_relu, false},
    {"IsNaN", 9, 0, 1, 1, NULL, run_isnan, false},
    {"Not", 1, 0, 1, 1, NULL, run_not, false},
    {"Softsign", 1, 0, 1, 1, NULL, run_softsign, false},
    {"Add", 7, 0, 2, 2, NULL, run_add, false},
    {"Sub", 7, 0, 2, 2, NULL, run_sub, false},
    {"Mul", 7, 0, 2, 2, NULL, run_mul, false},
    {"Div", 7, 0, 2, 2, NULL, run_div, false},
    {"Pow", 7, 0, 2, 2, NULL, run_pow, false},
    {"Equal", 7, 0, 2, 2, NULL, run_equal, false},
    {"Less", 7, 0, 2, 2, NULL, run_less, false},
    {"LessOrEqual", 12, 0, 2, 2, NULL, run_less_equal, false},
    {"Greater", 7, 0, 2, 2, NULL, run_greater, false},
    {"GreaterOrEqual", 12, 0, 2, 2, NULL, run_greater_equal, false},
    {"And", 7, 0, 2, 2, NULL, run_and, false},
    {"Or", 7, 0, 2, 2, NULL, run_or, false},
    {"Xor", 7, 0, 2, 2, NULL, run_xor, false},
    {"Add", 1, 6, 2, 2, NULL, run_legacy_add, false},
    {"Sub", 1, 6, 2, 2, NULL, run_legacy_sub, false},
    {"Mul", 1, 6, 2, 2, NULL, run_legacy_mul, false},
    {"Div", 1, 6, 2, 2, NULL, run_legacy_div, false},
    {"Pow", 1, 6, 2, 2, NULL, run_legacy_pow, false},
    {"Equal", 1, 6, 2, 2, NULL, run_legacy_equal, false},
    {"Less", 1, 6, 2, 2, NULL, run_legacy_less, false},
    {"Greater", 1, 6, 2, 2, NULL, run_legacy_greater, false},
    {"And", 1, 6, 2, 2, NULL, run_legacy_and, false},
    {"Or", 1, 6, 2, 2, NULL, run_legacy_or, false},
    {"Xor", 1, 6, 2, 2, NULL, run_legacy_xor, false},
    {"Mod", 10, 0, 2, 2, NULL, run_mod, false},
    {"Clip", 6, 10, 1, 1, NULL, run_clip_attr, false},
    {"Clip", 11, 0, 1, 3, NULL, run_clip, false},
    {"IsInf", 10, 0, 1, 1, NULL, run_isinf, false},
    {"Asinh", 9, 0, 1, 1, NULL, run_asinh, false},
    {"Acosh", 9, 0, 1, 1, NULL, run_acosh, false},
    {"Atanh", 9, 0, 1, 1, NULL, run_atanh, false},
    {"BitShift", 11, 0, 2, 2, check_bitshift, run_bitshift, false},
    {"Identity", 1, 0, 1, 1, NULL, run_identity, false},
    {"Cast", 6, 0, 1, 1, check_cast, run_cast, false},
    {"CastLike", 15, 0, 2, 2, NULL, run_cast_like, false},
    {"Constant", 1, 0, 0, 0, check_constant, run_constant, false},
    {0},
};
