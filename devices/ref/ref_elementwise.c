/*
 * ref_elementwise.c — unary, binary and where: one output element at a time, each operand
 * read through its own strides as if broadcast to out's shape.
 *
 * Float ops compute in double from the exact operand values and round once to the output
 * dtype, transcendentals through libm's double functions. For +, -, *, /, sqrt of float32
 * operands that is the correctly rounded float32 result (double has more than 2*24+2 bits), so
 * those agree bitwise with any IEEE device. Integer arithmetic wraps (through uint64_t), as
 * everywhere in tide. Which dtypes each op takes is the CPU's (devices/cpu/cpu_kernels.h).
 */
#include <math.h>

#include "ref_internal.h"

static double unary_float(tide_op op, double v)
{
    switch (op) {
    case TIDE_OP_NEG: return -v;
    case TIDE_OP_ABS: return fabs(v);
    case TIDE_OP_EXP: return exp(v);
    case TIDE_OP_LOG: return log(v);
    case TIDE_OP_SQRT: return sqrt(v);
    case TIDE_OP_RSQRT: return 1.0 / sqrt(v);
    case TIDE_OP_SIN: return sin(v);
    case TIDE_OP_COS: return cos(v);
    case TIDE_OP_TANH: return tanh(v);
    case TIDE_OP_ERF: return erf(v);
    case TIDE_OP_LOG1P: return log1p(v);
    case TIDE_OP_EXPM1: return expm1(v);
    case TIDE_OP_LOG2: return log2(v);
    case TIDE_OP_TAN: return tan(v);
    case TIDE_OP_ASIN: return asin(v);
    case TIDE_OP_ACOS: return acos(v);
    case TIDE_OP_ATAN: return atan(v);
    case TIDE_OP_SINH: return sinh(v);
    case TIDE_OP_COSH: return cosh(v);
    case TIDE_OP_TRUNC: return trunc(v);
    case TIDE_OP_GELU: return 0.5 * v * erfc(-v * M_SQRT1_2); /* x Phi(x); -inf: NaN */
    /* exp(-|v|) never overflows; v < 0 takes e/(1+e); a NaN stays NaN */
    case TIDE_OP_SIGMOID: return (v >= 0 ? 1.0 : exp(-fabs(v))) / (1.0 + exp(-fabs(v)));
    case TIDE_OP_RELU: return v < 0 ? 0.0 : v; /* NaN and -0 pass through */
    case TIDE_OP_FLOOR: return floor(v);
    case TIDE_OP_CEIL: return ceil(v);
    case TIDE_OP_ROUND: return nearbyint(v); /* ties to even */
    case TIDE_OP_SIGN: return v > 0 ? 1.0 : v < 0 ? -1.0 : v; /* NaN, +-0 map to themselves */
    case TIDE_OP_RECIPROCAL: return 1.0 / v;
    default: return v == 0; /* LOGICAL_NOT */
    }
}

/* Integer unary ops (int32, int64, uint8); false when op has no integer meaning. */
static bool unary_int(tide_op op, int dtype, int64_t v, int64_t *r)
{
    bool u8 = dtype == TIDE_UINT8;
    switch (op) {
    case TIDE_OP_NEG: *r = (int64_t)(0 - (uint64_t)v); return true;
    case TIDE_OP_ABS: *r = v < 0 ? (int64_t)(0 - (uint64_t)v) : v; return true;
    case TIDE_OP_RELU: *r = v > 0 ? v : 0; return true;
    case TIDE_OP_SIGN: *r = u8 ? v != 0 : (v > 0) - (v < 0); return true;
    case TIDE_OP_LOGICAL_NOT: *r = v == 0; return true;
    default: return false;
    }
}

bool ref_unary_has_kernel(tide_op op, int dtype)
{
    int64_t r;
    if (dtype == TIDE_BOOL)
        return op == TIDE_OP_LOGICAL_NOT;
    return ref_is_float(dtype) || unary_int(op, dtype, 0, &r);
}

void ref_unary_at(tide_op op, tide_tensor *out, int64_t oo, const tide_tensor *x, int64_t xo)
{
    int64_t r;
    if (ref_is_float(x->dtype) && op == TIDE_OP_LOGICAL_NOT)
        ref_set_i(out, oo, ref_get_f(x, xo) == 0);
    else if (ref_is_float(x->dtype))
        ref_set_f(out, oo, unary_float(op, ref_get_f(x, xo)));
    else if (unary_int(op, x->dtype, ref_get_i(x, xo), &r))
        ref_set_i(out, oo, r);
}

int ref_unary(tide_op op, tide_tensor *out, const tide_tensor *x)
{
    if (!ref_unary_has_kernel(op, x->dtype))
        return ref_no_kernel(op, x->dtype);
    int64_t idx[TIDE_MAX_DIMS];
    int64_t n = ref_numel(out);
    for (int64_t i = 0; i < n; i++) {
        ref_unflatten(out->ndim, out->shape, i, idx);
        ref_unary_at(op, out, ref_offset(out, idx), x, ref_offset_bcast(x, out->ndim, idx));
    }
    return 0;
}

/* ---- binary ------------------------------------------------------------------------------ */

static bool is_comparison(tide_op op) { return op >= TIDE_OP_EQ && op <= TIDE_OP_GE; }

/* A comparison or logical op of two values of one type (bool compares as truth values). */
#define COMPARE(op, a, b)                                                                          \
    ((op) == TIDE_OP_EQ   ? (a) == (b)                                                             \
     : (op) == TIDE_OP_NE ? (a) != (b)                                                             \
     : (op) == TIDE_OP_LT ? (a) < (b)                                                              \
     : (op) == TIDE_OP_LE ? (a) <= (b)                                                             \
     : (op) == TIDE_OP_GT ? (a) > (b)                                                              \
     : (op) == TIDE_OP_GE ? (a) >= (b)                                                             \
     : (op) == TIDE_OP_LOGICAL_AND ? ((a) != 0) & ((b) != 0)                                      \
                                   : ((a) != 0) | ((b) != 0))

/* Python's // and % on floats, written out as PyTorch defines them: the exact fmod, then the
 * quotient (a - mod) / b rounded to the nearest integer; a zero divisor gives a / b (inf, nan).
 * A float32 operand goes through the float functions so the roundings are float32's. */
static double floordiv_double(double a, double b)
{
    if (b == 0)
        return a / b;
    double m = fmod(a, b), d = (a - m) / b;
    if (m != 0 && (b < 0) != (m < 0))
        d -= 1;
    if (d == 0)
        return copysign(0.0, a / b);
    double f = floor(d);
    return d - f > 0.5 ? f + 1 : f;
}

static float floordiv_float(float a, float b)
{
    if (b == 0)
        return a / b;
    float m = fmodf(a, b), d = (a - m) / b;
    if (m != 0 && (b < 0) != (m < 0))
        d -= 1;
    if (d == 0)
        return copysignf(0.0f, a / b);
    float f = floorf(d);
    return d - f > 0.5f ? f + 1 : f;
}

/* a % b with the divisor's sign; fmod is exact, so float32 needs no separate version beyond
 * the one rounding of m + b. */
static double mod_double(double a, double b, bool f32)
{
    double m = fmod(a, b);
    if (m != 0 && (b < 0) != (m < 0))
        return f32 ? (double)((float)m + (float)b) : m + b;
    return m;
}

static double binary_float(tide_op op, double a, double b, bool f32)
{
    switch (op) {
    case TIDE_OP_ADD: return a + b;
    case TIDE_OP_SUB: return a - b;
    case TIDE_OP_MUL: return a * b;
    case TIDE_OP_DIV: return a / b;
    case TIDE_OP_POW: return pow(a, b);
    case TIDE_OP_FLOOR_DIVIDE:
        return f32 ? floordiv_float((float)a, (float)b) : floordiv_double(a, b);
    case TIDE_OP_REMAINDER: return mod_double(a, b, f32);
    case TIDE_OP_ATAN2: return atan2(a, b);
    case TIDE_OP_FMOD: return fmod(a, b); /* exact */
    /* NaN on either side wins */
    case TIDE_OP_MAXIMUM: return (a > b || a != a) ? a : b;
    default: return (a < b || a != a) ? a : b; /* MINIMUM */
    }
}

/* a^e in wrapping arithmetic, by repeated squaring; a negative exponent truncates 1/a^|e|
 * toward zero (0 unless a is 1 or -1). */
static int64_t int_pow(int64_t a, int64_t e)
{
    if (e < 0)
        return a == 1 ? 1 : a == -1 ? ((e & 1) ? -1 : 1) : 0;
    uint64_t r = 1, base = (uint64_t)a;
    for (uint64_t k = (uint64_t)e; k; k >>= 1) {
        if (k & 1)
            r *= base;
        base *= base;
    }
    return (int64_t)r;
}

/* Python's // on integers: the quotient rounded toward -inf; 0 for a zero divisor (NumPy's
 * choice: kernels cannot raise), and INT64_MIN // -1 wraps. int32 and uint8 values fit in
 * int64 and ref_set_i wraps the result to the output's width, as the CPU's kernels do. */
static int64_t int_floordiv(int64_t a, int64_t b)
{
    if (b == 0)
        return 0;
    if (b == -1)
        return (int64_t)(0u - (uint64_t)a);
    int64_t q = a / b;
    return (q * b != a && (a < 0) != (b < 0)) ? q - 1 : q;
}

/* Integer arithmetic (bool: add and maximum are or, mul and minimum are and); false when op
 * has no kernel for the dtype (integer division goes through a float cast in ops/). */
static bool binary_int(tide_op op, int dtype, int64_t a, int64_t b, int64_t *r)
{
    bool is_bool = dtype == TIDE_BOOL;
    switch (op) {
    case TIDE_OP_ADD: *r = is_bool ? (a | b) : (int64_t)((uint64_t)a + (uint64_t)b); return true;
    case TIDE_OP_SUB: *r = (int64_t)((uint64_t)a - (uint64_t)b); return !is_bool;
    case TIDE_OP_MUL: *r = is_bool ? (a & b) : (int64_t)((uint64_t)a * (uint64_t)b); return true;
    case TIDE_OP_POW: *r = int_pow(a, b); return !is_bool;
    case TIDE_OP_MAXIMUM: *r = a > b ? a : b; return true;
    case TIDE_OP_MINIMUM: *r = a < b ? a : b; return true;
    case TIDE_OP_FLOOR_DIVIDE: *r = int_floordiv(a, b); return !is_bool;
    case TIDE_OP_REMAINDER: /* a - (a // b) * b, wrapping; 0 for a zero divisor */
        *r = b == 0 ? 0 : (int64_t)((uint64_t)a - (uint64_t)int_floordiv(a, b) * (uint64_t)b);
        return !is_bool;
    case TIDE_OP_FMOD: /* C's %, the dividend's sign; 0 for a zero divisor (and for % -1) */
        *r = (b == 0 || b == -1) ? 0 : a % b;
        return !is_bool;
    default: return false; /* DIV, ATAN2 */
    }
}

static bool is_logic(tide_op op)
{
    return is_comparison(op) || op == TIDE_OP_LOGICAL_AND || op == TIDE_OP_LOGICAL_OR;
}

bool ref_binary_has_kernel(tide_op op, int dtype)
{
    int64_t r;
    return is_logic(op) || ref_is_float(dtype) || binary_int(op, dtype, 1, 1, &r);
}

void ref_binary_at(tide_op op, tide_tensor *out, int64_t oo, const tide_tensor *a, int64_t ao,
                   const tide_tensor *b, int64_t bo)
{
    int64_t r;
    if (is_logic(op) && ref_is_float(a->dtype))
        ref_set_i(out, oo, COMPARE(op, ref_get_f(a, ao), ref_get_f(b, bo)));
    else if (is_logic(op))
        ref_set_i(out, oo, COMPARE(op, ref_get_i(a, ao), ref_get_i(b, bo)));
    else if (ref_is_float(a->dtype))
        ref_set_f(out, oo, binary_float(op, ref_get_f(a, ao), ref_get_f(b, bo),
                                        a->dtype == TIDE_FLOAT32));
    else if (binary_int(op, a->dtype, ref_get_i(a, ao), ref_get_i(b, bo), &r))
        ref_set_i(out, oo, r);
}

int ref_binary(tide_op op, tide_tensor *out, const tide_tensor *a, const tide_tensor *b)
{
    int64_t idx[TIDE_MAX_DIMS];
    if (!ref_binary_has_kernel(op, a->dtype))
        return ref_no_kernel(op, a->dtype); /* checked before anything is written */
    int64_t n = ref_numel(out);
    for (int64_t i = 0; i < n; i++) {
        ref_unflatten(out->ndim, out->shape, i, idx);
        ref_binary_at(op, out, ref_offset(out, idx), a, ref_offset_bcast(a, out->ndim, idx), b,
                      ref_offset_bcast(b, out->ndim, idx));
    }
    return 0;
}

void ref_where_at(tide_tensor *out, int64_t oo, const tide_tensor *cond, int64_t co,
                  const tide_tensor *a, int64_t ao, const tide_tensor *b, int64_t bo)
{
    bool c = ref_get_i(cond, co) != 0;
    ref_convert(out, oo, c ? a : b, c ? ao : bo);
}

int ref_where(tide_tensor *out, const tide_tensor *cond, const tide_tensor *a,
              const tide_tensor *b)
{
    int64_t idx[TIDE_MAX_DIMS];
    int64_t n = ref_numel(out);
    for (int64_t i = 0; i < n; i++) {
        ref_unflatten(out->ndim, out->shape, i, idx);
        ref_where_at(out, ref_offset(out, idx), cond, ref_offset_bcast(cond, out->ndim, idx), a,
                     ref_offset_bcast(a, out->ndim, idx), b, ref_offset_bcast(b, out->ndim, idx));
    }
    return 0;
}
