/*
 * onnx_ops_elementwise.c — ONNX's elementwise ops on tide's: unary math, binary arithmetic and
 * comparisons with numpy broadcasting (opset 7 on: earlier ones have the `broadcast` attribute),
 * casts, Identity, Constant.
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

/* Integer Div truncates toward zero (C's division), in float64: exact below 2^53. */
static int run_div(onnx_ctx *c)
{
    if (!is_integer(c->in[0]))
        return onnx_set(c, tide_div(c->in[0], c->in[1]));
    tide_tensor *a = tide_cast(c->in[0], TIDE_FLOAT64), *b = tide_cast(c->in[1], TIDE_FLOAT64);
    tide_tensor *q = a && b ? tide_div(a, b) : NULL;
    tide_tensor *t = q ? tide_trunc(q) : NULL;
    tide_tensor *out = t ? tide_cast(t, tide_get_dtype(c->in[0])) : NULL;
    tide_release(a);
    tide_release(b);
    tide_release(q);
    tide_release(t);
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
    {"Abs", 6, 0, 1, 1, NULL, run_abs, false},
    {"Neg", 6, 0, 1, 1, NULL, run_neg, false},
    {"Exp", 6, 0, 1, 1, NULL, run_exp, false},
    {"Log", 6, 0, 1, 1, NULL, run_log, false},
    {"Sqrt", 6, 0, 1, 1, NULL, run_sqrt, false},
    {"Reciprocal", 6, 0, 1, 1, NULL, run_reciprocal, false},
    {"Sin", 7, 0, 1, 1, NULL, run_sin, false},
    {"Cos", 7, 0, 1, 1, NULL, run_cos, false},
    {"Tan", 7, 0, 1, 1, NULL, run_tan, false},
    {"Asin", 7, 0, 1, 1, NULL, run_asin, false},
    {"Acos", 7, 0, 1, 1, NULL, run_acos, false},
    {"Atan", 7, 0, 1, 1, NULL, run_atan, false},
    {"Sinh", 9, 0, 1, 1, NULL, run_sinh, false},
    {"Cosh", 9, 0, 1, 1, NULL, run_cosh, false},
    {"Tanh", 6, 0, 1, 1, NULL, run_tanh, false},
    {"Sigmoid", 6, 0, 1, 1, NULL, run_sigmoid, false},
    {"Erf", 9, 0, 1, 1, NULL, run_erf, false},
    {"Floor", 6, 0, 1, 1, NULL, run_floor, false},
    {"Ceil", 6, 0, 1, 1, NULL, run_ceil, false},
    {"Round", 11, 0, 1, 1, NULL, run_round, false},
    {"Sign", 9, 0, 1, 1, NULL, run_sign, false},
    {"Relu", 6, 0, 1, 1, NULL, run_relu, false},
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
    {"Identity", 1, 0, 1, 1, NULL, run_identity, false},
    {"Cast", 6, 0, 1, 1, check_cast, run_cast, false},
    {"CastLike", 15, 0, 2, 2, NULL, run_cast_like, false},
    {"Constant", 1, 0, 0, 0, check_constant, run_constant, false},
    {0},
};
