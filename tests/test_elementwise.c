/*
 * test_elementwise.c — every elementwise op (unary, binary, the _scalar forms, wrapped numbers,
 * where, cast) checked element by element against a double-precision reference loop, over every
 * dtype the op is defined for, broadcasting shape pairs, the layouts of test_ref.h, empty and
 * one-element tensors; result dtypes follow PyTorch's promotion.
 */
#include <float.h>
#include <stdlib.h>

#include "tide.h"
#include "test_util.h"
#include "test_ref.h"

#define NDT 6
static const tide_dtype DTYPES[NDT] = {TIDE_FLOAT32, TIDE_FLOAT64, TIDE_INT32,
                                       TIDE_INT64,   TIDE_UINT8,   TIDE_BOOL};

enum { SUP_OK, SUP_ERR, SUP_MAYBE }; /* defined / must fail / either is acceptable */

typedef struct {
    int ndim;
    int64_t shape[TIDE_MAX_DIMS];
} shape_t;

/* ---- PyTorch's promotion, written out independently of the library ------------------------ */

#define F32 TIDE_FLOAT32
#define F64 TIDE_FLOAT64
#define I32 TIDE_INT32
#define I64 TIDE_INT64
#define U8 TIDE_UINT8
#define BOOL TIDE_BOOL
static const tide_dtype PROMOTE[NDT][NDT] = {
    /*          f32  f64  i32   i64   u8    bool */
    /* f32  */ {F32, F64, F32, F32, F32, F32},
    /* f64  */ {F64, F64, F64, F64, F64, F64},
    /* i32  */ {F32, F64, I32, I64, I32, I32},
    /* i64  */ {F32, F64, I64, I64, I64, I64},
    /* u8   */ {F32, F64, I32, I64, U8, U8},
    /* bool */ {F32, F64, I32, I64, U8, BOOL},
};

typedef struct {
    tide_dtype dtype; /* for a wrapped number: F64 (tide_number) or I64 (tide_integer) */
    int ndim;
    bool wrapped;
} operand_t;

/* PyTorch's combine_categories: the higher-priority state wins unless the lower one brings a
 * higher category. -1 is "no operand of that kind". */
static int combine_categories(int higher, int lower)
{
    if (higher < 0)
        return lower;
    if (lower < 0)
        return higher;
    if (ref_is_float((tide_dtype)higher))
        return higher;
    if (higher == BOOL || ref_is_float((tide_dtype)lower))
        return (int)PROMOTE[higher][lower];
    return higher;
}

static tide_dtype result_type(const operand_t *ops, int n)
{
    int dimr = -1, zeror = -1, wrapr = -1;
    for (int i = 0; i < n; i++) {
        int d = ops[i].dtype;
        int *slot = ops[i].wrapped ? &wrapr : ops[i].ndim == 0 ? &zeror : &dimr;
        if (ops[i].wrapped && ref_is_float((tide_dtype)d))
            d = F32; /* a Python float takes the default dtype */
        *slot = *slot < 0 ? d : (int)PROMOTE[*slot][d];
    }
    return (tide_dtype)combine_categories(dimr, combine_categories(zeror, wrapr));
}

/* ---- checking one result -------------------------------------------------------------------- */

/* Checks r's dtype, shape and values (want: n values already in want_dt's precision). */
static void check_values(const char *desc, tide_tensor *r, tide_dtype want_dt, int ndim,
                         const int64_t *shape, const double *want, bool transcendental)
{
    if (!r) {
        CHECK(r != NULL, "%s: failed: %s", desc, tide_last_error());
        return;
    }
    CHECK(tide_get_dtype(r) == want_dt, "%s: result dtype %s, want %s", desc,
          ref_dtype_name(tide_get_dtype(r)), ref_dtype_name(want_dt));
    bool shape_ok = ref_same_shape(r, ndim, shape);
    CHECK(shape_ok, "%s: result shape %s, want %s", desc, ref_tensor_shape_str(r),
          ref_shape_str(ndim, shape));
    if (!shape_ok)
        return;
    double *got = ref_read(r);
    CHECK(got != NULL, "%s: reading the result failed: %s", desc, tide_last_error());
    if (!got)
        return;
    double rtol, atol;
    ref_tolerance(want_dt, transcendental, &rtol, &atol);
    int64_t n = ref_numel(ndim, shape);
    int64_t bad = ref_mismatch(got, want, n, rtol, atol);
    CHECK(bad < 0, "%s: first mismatch at %s: got %.10g, want %.10g", desc,
          ref_index_str(ndim, shape, bad), got[bad], want[bad]);
    free(got);
}

/* A case the op must refuse: NULL and an error naming the op. */
static void check_refused(const char *desc, tide_tensor *r, const char *opname)
{
    CHECK(r == NULL && strstr(tide_last_error(), opname) != NULL,
          "%s: should fail naming \"%s\"; got %s, error \"%s\"", desc, opname,
          r ? "a tensor" : "NULL", tide_last_error());
    tide_release(r);
}

/* ---- unary ops ------------------------------------------------------------------------------ */

enum { U_SAME, U_FLOAT, U_BOOL }; /* result dtype: the input's, float32 for non-floats, bool */

static double r_neg(double x) { return -x; }
static double r_abs(double x) { return fabs(x); }
static double r_rsqrt(double x) { return 1.0 / sqrt(x); }
static double r_sigmoid(double x) { return 1.0 / (1.0 + exp(-x)); }
static double r_relu(double x) { return isnan(x) ? x : x > 0 ? x : 0.0; }
static double r_sign(double x) { return isnan(x) ? x : (double)((x > 0) - (x < 0)); }
static double r_reciprocal(double x) { return 1.0 / x; }
static double r_logical_not(double x) { return x == 0 ? 1.0 : 0.0; }

typedef struct {
    const char *name;
    tide_tensor *(*fn)(const tide_tensor *);
    double (*ref)(double);
    int kind;
    int gen;
    bool transcendental;
    unsigned char support[NDT]; /* float32 float64 int32 int64 uint8 bool */
} unop_t;

#define ALL_OK {SUP_OK, SUP_OK, SUP_OK, SUP_OK, SUP_OK, SUP_OK}
#define BOOL_MAYBE {SUP_OK, SUP_OK, SUP_OK, SUP_OK, SUP_OK, SUP_MAYBE}
static const unop_t UNOPS[] = {
    {"neg", tide_neg, r_neg, U_SAME, REF_GEN_GENERAL, false,
     {SUP_OK, SUP_OK, SUP_OK, SUP_OK, SUP_OK, SUP_ERR}},
    {"abs", tide_abs, r_abs, U_SAME, REF_GEN_GENERAL, false, BOOL_MAYBE},
    {"exp", tide_exp, exp, U_FLOAT, REF_GEN_GENERAL, true, ALL_OK},
    {"log", tide_log, log, U_FLOAT, REF_GEN_POSITIVE, true, ALL_OK},
    {"sqrt", tide_sqrt, sqrt, U_FLOAT, REF_GEN_POSITIVE, false, ALL_OK},
    {"rsqrt", tide_rsqrt, r_rsqrt, U_FLOAT, REF_GEN_POSITIVE, true, ALL_OK},
    {"sin", tide_sin, sin, U_FLOAT, REF_GEN_GENERAL, true, ALL_OK},
    {"cos", tide_cos, cos, U_FLOAT, REF_GEN_GENERAL, true, ALL_OK},
    {"tanh", tide_tanh, tanh, U_FLOAT, REF_GEN_GENERAL, true, ALL_OK},
    {"erf", tide_erf, erf, U_FLOAT, REF_GEN_GENERAL, true, ALL_OK},
    {"sigmoid", tide_sigmoid, r_sigmoid, U_FLOAT, REF_GEN_GENERAL, true, ALL_OK},
    {"relu", tide_relu, r_relu, U_SAME, REF_GEN_GENERAL, false, BOOL_MAYBE},
    {"floor", tide_floor, floor, U_SAME, REF_GEN_QUARTERS, false, BOOL_MAYBE},
    {"ceil", tide_ceil, ceil, U_SAME, REF_GEN_QUARTERS, false, BOOL_MAYBE},
    {"round", tide_round, rint, U_SAME, REF_GEN_QUARTERS, false, BOOL_MAYBE},
    {"sign", tide_sign, r_sign, U_SAME, REF_GEN_SMALL, false, BOOL_MAYBE},
    {"reciprocal", tide_reciprocal, r_reciprocal, U_FLOAT, REF_GEN_NONZERO, false, ALL_OK},
    {"logical_not", tide_logical_not, r_logical_not, U_BOOL, REF_GEN_SMALL, false, ALL_OK},
};
#define NUNOPS ((int)(sizeof UNOPS / sizeof UNOPS[0]))

static tide_dtype unary_result_dtype(const unop_t *op, tide_dtype dt)
{
    if (op->kind == U_BOOL)
        return BOOL;
    if (op->kind == U_FLOAT)
        return ref_is_float(dt) ? dt : F32;
    return dt;
}

static int dtype_index(tide_dtype dt)
{
    for (int i = 0; i < NDT; i++)
        if (DTYPES[i] == dt)
            return i;
    return 0;
}

/* The op on the values v (numel of shape, already prepared for layout) stored as dt. */
static void run_unary(const unop_t *op, tide_dtype dt, int ndim, const int64_t *shape,
                      const double *v, int layout)
{
    int sup = op->support[dtype_index(dt)];
    int64_t n = ref_numel(ndim, shape);
    char descbuf[512];
    snprintf(descbuf, sizeof descbuf, "%s(%s %s %s)", op->name, ref_dtype_name(dt),
             ref_layout_name(layout), ref_shape_str(ndim, shape));
    tide_tensor *x = ref_make(v, ndim, shape, dt, layout);
    CHECK(x != NULL, "%s: making the input failed: %s", descbuf, tide_last_error());
    if (!x)
        return;
    tide_tensor *r = op->fn(x);
    if (sup == SUP_ERR) {
        check_refused(descbuf, r, op->name);
    } else if (sup == SUP_MAYBE && !r) {
        CHECK(tide_last_error()[0] != '\0', "%s: NULL without an error", descbuf);
    } else {
        tide_dtype rdt = unary_result_dtype(op, dt);
        double *want = malloc((size_t)(n > 0 ? n : 1) * sizeof *want);
        for (int64_t i = 0; i < n; i++)
            want[i] = ref_quantize(rdt, op->ref(v[i]));
        check_values(descbuf, r, rdt, ndim, shape, want, op->transcendental);
        free(want);
        tide_release(r);
    }
    tide_release(x);
}

static const shape_t UNARY_SHAPES[] = {
    {2, {3, 4}}, {3, {2, 3, 4}}, {1, {5}}, {0, {0}}, {2, {0, 3}}, {1, {1}}, {3, {2, 1, 3}},
};

static void test_unary_all(void)
{
    uint64_t seed = 1;
    for (int o = 0; o < NUNOPS; o++)
        for (int d = 0; d < NDT; d++)
            for (size_t s = 0; s < sizeof UNARY_SHAPES / sizeof UNARY_SHAPES[0]; s++)
                for (int l = 0; l < REF_NUM_LAYOUTS; l++) {
                    const shape_t *sh = &UNARY_SHAPES[s];
                    int64_t n = ref_numel(sh->ndim, sh->shape);
                    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
                    ref_seed(seed++);
                    ref_fill(v, n, DTYPES[d], UNOPS[o].gen);
                    ref_prepare(l, sh->ndim, sh->shape, v);
                    run_unary(&UNOPS[o], DTYPES[d], sh->ndim, sh->shape, v, l);
                    free(v);
                }
}

/* Lengths around vector widths and thread chunking, contiguous and strided. */
static const int64_t SWEEP_SIZES[] = {1,  2,  3,  4,   5,   6,   7,   8,    9,    15,   16,  17,
                                      31, 32, 33, 63,  64,  65,  127, 128,  129,  255,  256, 257,
                                      1023, 1024, 1025, 4097, 33333};
#define NSWEEP ((int)(sizeof SWEEP_SIZES / sizeof SWEEP_SIZES[0]))

static void test_unary_sizes(void)
{
    uint64_t seed = 1000;
    for (int o = 0; o < NUNOPS; o++)
        for (int d = 0; d < NDT; d++)
            for (size_t s = 0; s < sizeof SWEEP_SIZES / sizeof SWEEP_SIZES[0]; s++)
                for (int l = REF_CONTIG; l <= REF_SLICED; l += REF_SLICED - REF_CONTIG) {
                    int64_t n = SWEEP_SIZES[s];
                    if (n > 5000 && d != 0)
                        continue; /* the biggest only for float32 */
                    double *v = malloc((size_t)n * sizeof *v);
                    ref_seed(seed++);
                    ref_fill(v, n, DTYPES[d], UNOPS[o].gen);
                    run_unary(&UNOPS[o], DTYPES[d], 1, &n, v, l);
                    free(v);
                }
}

/* NaN, infinities and signed zeros through every float unary op; around -104, where e^x
 * leaves float32's denormals (exp and sigmoid skip the scaling there). */
static void test_unary_specials(void)
{
    static const double S[] = {NAN,  INFINITY, -INFINITY, -0.0, 0.0,  1.0,   -1.0,  0.5,   -0.5,
                               1.5,  2.5,      -2.5,      1e-30, 1e30, 100.0, -100.0, 0.49999997, 3.75,
                               -103.9, -104.0, -110.0, -90.0, 103.9, 104.0};
    const int64_t n = sizeof S / sizeof S[0];
    for (int o = 0; o < NUNOPS; o++)
        for (int d = 0; d < 2; d++) {
            tide_dtype dt = DTYPES[d];
            double v[sizeof S / sizeof S[0]];
            for (int64_t i = 0; i < n; i++)
                v[i] = ref_quantize(dt, S[i]);
            run_unary(&UNOPS[o], dt, 1, &n, v, REF_CONTIG);
            run_unary(&UNOPS[o], dt, 1, &n, v, REF_SLICED);
        }
    /* Signs of zero that IEEE arithmetic fixes: -(0) is -0, |-0| is +0, and floor, ceil and
     * round keep a zero's sign. */
    for (int d = 0; d < 2; d++) {
        tide_dtype dt = DTYPES[d];
        double zin[2] = {0.0, -0.0};
        int64_t two = 2;
        tide_tensor *z = ref_from_doubles(zin, 1, &two, dt);
        struct { const char *name; tide_tensor *(*fn)(const tide_tensor *); int s0, s1; } sz[] = {
            {"neg", tide_neg, 1, 0},     {"abs", tide_abs, 0, 0},   {"floor", tide_floor, 0, 1},
            {"ceil", tide_ceil, 0, 1},   {"round", tide_round, 0, 1},
        };
        for (size_t k = 0; k < sizeof sz / sizeof sz[0]; k++) {
            tide_tensor *r = sz[k].fn(z);
            double *got = ref_read(r);
            CHECK(got && got[0] == 0 && got[1] == 0 && !!signbit(got[0]) == sz[k].s0 &&
                      !!signbit(got[1]) == sz[k].s1,
                  "%s(%s [+0, -0]): got [%g, %g], want [%s0, %s0]", sz[k].name,
                  ref_dtype_name(dt), got ? got[0] : NAN, got ? got[1] : NAN,
                  sz[k].s0 ? "-" : "+", sz[k].s1 ? "-" : "+");
            free(got);
            tide_release(r);
        }
        tide_release(z);
    }
}

/* round is half to even, also where x + 0.5 is not representable. */
static void test_round_half_even(void)
{
    static const double in32[] = {0.5, 1.5, 2.5, -0.5, -1.5, -2.5, 3.5, 0.49999997, 8388609.0,
                                  -8388609.0, 1e20, 2.4999998};
    static const double out32[] = {0, 2, 2, -0.0, -2, -2, 4, 0, 8388609.0, -8388609.0, 1e20, 2};
    static const double in64[] = {0.5, 2.5, -2.5, 0.49999999999999994, 4503599627370497.0, -3.5};
    static const double out64[] = {0, 2, -2, 0, 4503599627370497.0, -4};
    int64_t n32 = sizeof in32 / sizeof in32[0], n64 = sizeof in64 / sizeof in64[0];
    tide_tensor *x = ref_from_doubles(in32, 1, &n32, F32);
    tide_tensor *r = tide_round(x);
    double want[16];
    for (int64_t i = 0; i < n32; i++)
        want[i] = ref_quantize(F32, out32[i]);
    check_values("round(float32 halves)", r, F32, 1, &n32, want, false);
    tide_release(r);
    tide_release(x);
    x = ref_from_doubles(in64, 1, &n64, F64);
    r = tide_round(x);
    check_values("round(float64 halves)", r, F64, 1, &n64, out64, false);
    tide_release(r);
    tide_release(x);
}

/* ---- binary ops ----------------------------------------------------------------------------- */

enum { B_ARITH, B_DIV, B_CMP, B_LOGIC };
enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_POW, OP_MAX, OP_MIN, OP_FLOORDIV, OP_REM, OP_EQ, OP_NE,
       OP_LT, OP_LE, OP_GT, OP_GE, OP_AND, OP_OR };

typedef struct {
    const char *name;
    tide_tensor *(*fn)(const tide_tensor *, const tide_tensor *);
    int op, kind, gen_a, gen_b;
    bool transcendental;
} binop_t;

static const binop_t BINOPS[] = {
    {"add", tide_add, OP_ADD, B_ARITH, REF_GEN_GENERAL, REF_GEN_GENERAL, false},
    {"sub", tide_sub, OP_SUB, B_ARITH, REF_GEN_GENERAL, REF_GEN_GENERAL, false},
    {"mul", tide_mul, OP_MUL, B_ARITH, REF_GEN_GENERAL, REF_GEN_GENERAL, false},
    {"div", tide_div, OP_DIV, B_DIV, REF_GEN_GENERAL, REF_GEN_NONZERO, false},
    {"pow", tide_pow, OP_POW, B_ARITH, REF_GEN_POW_BASE, REF_GEN_POW_EXP, true},
    {"maximum", tide_maximum, OP_MAX, B_ARITH, REF_GEN_SMALL, REF_GEN_SMALL, false},
    {"minimum", tide_minimum, OP_MIN, B_ARITH, REF_GEN_SMALL, REF_GEN_SMALL, false},
    /* SMALL on both sides: negative operands, exact ties and zero divisors */
    {"floor_divide", tide_floor_divide, OP_FLOORDIV, B_ARITH, REF_GEN_SMALL, REF_GEN_SMALL, false},
    {"remainder", tide_remainder, OP_REM, B_ARITH, REF_GEN_SMALL, REF_GEN_SMALL, false},
    {"eq", tide_eq, OP_EQ, B_CMP, REF_GEN_SMALL, REF_GEN_SMALL, false},
    {"ne", tide_ne, OP_NE, B_CMP, REF_GEN_SMALL, REF_GEN_SMALL, false},
    {"lt", tide_lt, OP_LT, B_CMP, REF_GEN_SMALL, REF_GEN_SMALL, false},
    {"le", tide_le, OP_LE, B_CMP, REF_GEN_SMALL, REF_GEN_SMALL, false},
    {"gt", tide_gt, OP_GT, B_CMP, REF_GEN_SMALL, REF_GEN_SMALL, false},
    {"ge", tide_ge, OP_GE, B_CMP, REF_GEN_SMALL, REF_GEN_SMALL, false},
    {"logical_and", tide_logical_and, OP_AND, B_LOGIC, REF_GEN_SMALL, REF_GEN_SMALL, false},
    {"logical_or", tide_logical_or, OP_OR, B_LOGIC, REF_GEN_SMALL, REF_GEN_SMALL, false},
};
#define NBINOPS ((int)(sizeof BINOPS / sizeof BINOPS[0]))

/* Integer power by repeated multiplication, wrapping like the integer dtypes. */
static double int_pow(double base, double e)
{
    if (e < 0)
        return base == 1 ? 1 : base == -1 ? ((int64_t)e % 2 ? -1 : 1) : 0;
    uint64_t r = 1, b = (uint64_t)(int64_t)base;
    for (int64_t i = 0; i < (int64_t)e; i++)
        r *= b;
    return (double)(int64_t)r;
}

/* Python's a // b, written from its definition floor(a / b) (exact for the small operands the
 * tests use). A zero divisor: IEEE's a / b for floats, 0 for integers (tide.h). Infinite or NaN
 * operands as Python: inf // x is NaN, and x // inf is 0, or -1 when the signs differ. */
static double ref_floor_divide(double a, double b, bool is_float)
{
    if (b == 0)
        return is_float ? a / b : 0;
    if (isnan(a) || isnan(b) || isinf(a))
        return NAN;
    if (isinf(b))
        return a == 0 || (a < 0) == (b < 0) ? 0.0 : -1.0;
    return floor(a / b);
}

/* Python's a % b = a - (a // b) * b, with the divisor's sign: 0 for an integer zero divisor,
 * NaN for a float one; x % inf is x, or inf with inf's sign when the signs differ. */
static double ref_remainder(double a, double b, bool is_float)
{
    if (b == 0)
        return is_float ? NAN : 0;
    if (isnan(a) || isnan(b) || isinf(a))
        return NAN;
    if (isinf(b))
        return a == 0 || (a < 0) == (b < 0) ? a : b;
    return a - floor(a / b) * b;
}

/* a op b with both already in the computation dtype comp. */
static double ref_binary(int op, double a, double b, tide_dtype comp)
{
    switch (op) {
    case OP_ADD: return a + b;
    case OP_SUB: return a - b;
    case OP_MUL: return a * b;
    case OP_DIV: return a / b;
    case OP_POW: return ref_is_float(comp) ? pow(a, b) : int_pow(a, b);
    case OP_MAX: return isnan(a) || isnan(b) ? NAN : a > b ? a : b;
    case OP_MIN: return isnan(a) || isnan(b) ? NAN : a < b ? a : b;
    case OP_FLOORDIV: return ref_floor_divide(a, b, ref_is_float(comp));
    case OP_REM: return ref_remainder(a, b, ref_is_float(comp));
    case OP_EQ: return a == b;
    case OP_NE: return a != b;
    case OP_LT: return a < b;
    case OP_LE: return a <= b;
    case OP_GT: return a > b;
    case OP_GE: return a >= b;
    case OP_AND: return a != 0 && b != 0;
    case OP_OR: return a != 0 || b != 0;
    }
    return NAN;
}

static int binop_support(const binop_t *op, tide_dtype da, tide_dtype db)
{
    bool ab = da == BOOL, bb = db == BOOL;
    if ((op->op == OP_SUB || op->op == OP_FLOORDIV || op->op == OP_REM) && ab && bb)
        return SUP_ERR; /* PyTorch: use logical_xor; no bool // or % */
    if ((op->op == OP_SUB || op->op == OP_POW) && (ab || bb))
        return SUP_MAYBE;
    return SUP_OK;
}

static bool broadcast_shapes(int na, const int64_t *a, int nb, const int64_t *b, int *nout,
                             int64_t *out)
{
    int n = na > nb ? na : nb;
    for (int i = 0; i < n; i++) {
        int64_t sa = i < n - na ? 1 : a[i - (n - na)], sb = i < n - nb ? 1 : b[i - (n - nb)];
        if (sa != sb && sa != 1 && sb != 1)
            return false;
        out[i] = sa == 1 ? sb : sa;
    }
    *nout = n;
    return true;
}

/* The row-major index into an operand of shape (ndim, shape) for the output multi-index. */
static int64_t bcast_index(int ndim, const int64_t *shape, int nout, const int64_t *oidx)
{
    int64_t f = 0;
    for (int d = 0; d < ndim; d++) {
        int64_t i = shape[d] == 1 ? 0 : oidx[d + nout - ndim];
        f = f * shape[d] + i;
    }
    return f;
}

typedef struct {
    tide_tensor *t;
    const double *v; /* logical row-major values, already in the operand's dtype */
    int ndim;
    const int64_t *shape;
    operand_t info;
    const char *what; /* "float32 sliced [3, 4]" */
} arg_t;

static void run_binary_args(const binop_t *op, const arg_t *a, const arg_t *b)
{
    char desc[512];
    snprintf(desc, sizeof desc, "%s(%s, %s)", op->name, a->what, b->what);
    int sup = binop_support(op, a->info.dtype, b->info.dtype);
    tide_clear_error();
    tide_tensor *r = op->fn(a->t, b->t);
    if (sup == SUP_ERR) {
        check_refused(desc, r, op->name);
        return;
    }
    if (sup == SUP_MAYBE && !r) {
        CHECK(tide_last_error()[0] != '\0', "%s: NULL without an error", desc);
        return;
    }
    int nout;
    int64_t oshape[TIDE_MAX_DIMS], oidx[TIDE_MAX_DIMS] = {0};
    if (!broadcast_shapes(a->ndim, a->shape, b->ndim, b->shape, &nout, oshape)) {
        CHECK(0, "%s: test bug: shapes do not broadcast", desc);
        tide_release(r);
        return;
    }
    operand_t ops[2] = {a->info, b->info};
    tide_dtype common = result_type(ops, 2);
    tide_dtype comp = op->kind == B_DIV && !ref_is_float(common) ? F32 : common;
    tide_dtype rdt = op->kind == B_CMP || op->kind == B_LOGIC ? BOOL : comp;
    int64_t n = ref_numel(nout, oshape);
    double *want = malloc((size_t)(n > 0 ? n : 1) * sizeof *want);
    if (n > 0) {
        int64_t i = 0;
        do {
            double x = ref_quantize(comp, a->v[bcast_index(a->ndim, a->shape, nout, oidx)]);
            double y = ref_quantize(comp, b->v[bcast_index(b->ndim, b->shape, nout, oidx)]);
            want[i++] = ref_quantize(rdt, ref_binary(op->op, x, y, comp));
        } while (ref_next_index(nout, oshape, oidx));
    }
    check_values(desc, r, rdt, nout, oshape, want, op->transcendental);
    free(want);
    tide_release(r);
}

/* Makes an operand of dtype dt, shape and layout with values from gen; v gets the values. */
static arg_t make_arg(tide_dtype dt, int ndim, const int64_t *shape, int layout, int gen,
                      double *v, char *what, size_t whatsize)
{
    int64_t n = ref_numel(ndim, shape);
    ref_fill(v, n, dt, gen);
    ref_prepare(layout, ndim, shape, v);
    snprintf(what, whatsize, "%s %s %s", ref_dtype_name(dt), ref_layout_name(layout),
             ref_shape_str(ndim, shape));
    arg_t a = {ref_make(v, ndim, shape, dt, layout), v, ndim, shape, {dt, ndim, false}, what};
    CHECK(a.t != NULL, "making %s failed: %s", what, tide_last_error());
    return a;
}

static void run_binary(const binop_t *op, tide_dtype da, int na, const int64_t *sa, int la,
                       tide_dtype db, int nb, const int64_t *sb, int lb)
{
    double va[8192], vb[8192];
    char wa[160], wb[160];
    if (ref_numel(na, sa) > 8192 || ref_numel(nb, sb) > 8192)
        return;
    arg_t a = make_arg(da, na, sa, la, op->gen_a, va, wa, sizeof wa);
    arg_t b = make_arg(db, nb, sb, lb, op->gen_b, vb, wb, sizeof wb);
    if (a.t && b.t)
        run_binary_args(op, &a, &b);
    tide_release(a.t);
    tide_release(b.t);
}

typedef struct {
    shape_t a, b;
} shape_pair_t;

static const shape_pair_t BINARY_SHAPES[] = {
    {{2, {3, 4}}, {1, {4}}},  {{3, {2, 1, 4}}, {2, {3, 1}}}, {{1, {1}}, {1, {5}}},
    {{0, {0}}, {2, {2, 3}}},  {{2, {0, 3}}, {1, {3}}},        {{1, {1}}, {1, {1}}},
    {{2, {3, 4}}, {2, {3, 4}}},
};
#define NBSHAPES ((int)(sizeof BINARY_SHAPES / sizeof BINARY_SHAPES[0]))

static const tide_dtype MIXED[][2] = {
    {I32, F32}, {U8, I32}, {I32, I64}, {F32, F64}, {BOOL, I32}, {U8, F64},
    {BOOL, F32}, {I64, F32}, {U8, BOOL}, {I64, F64}, {U8, I64},
};
#define NMIXED ((int)(sizeof MIXED / sizeof MIXED[0]))

static void binary_over_shapes(const binop_t *op, tide_dtype da, tide_dtype db, uint64_t *seed)
{
    for (int s = 0; s < NBSHAPES; s++)
        for (int swap = 0; swap < 2; swap++)
            for (int l = 0; l < REF_NUM_LAYOUTS; l++) {
                const shape_t *sa = swap ? &BINARY_SHAPES[s].b : &BINARY_SHAPES[s].a;
                const shape_t *sb = swap ? &BINARY_SHAPES[s].a : &BINARY_SHAPES[s].b;
                ref_seed((*seed)++);
                run_binary(op, da, sa->ndim, sa->shape, l, db, sb->ndim, sb->shape,
                           (l + s + swap) % REF_NUM_LAYOUTS);
            }
}

static void test_binary_all(void)
{
    uint64_t seed = 5000;
    for (int o = 0; o < NBINOPS; o++) {
        for (int d = 0; d < NDT; d++)
            binary_over_shapes(&BINOPS[o], DTYPES[d], DTYPES[d], &seed);
        for (int m = 0; m < NMIXED; m++) {
            binary_over_shapes(&BINOPS[o], MIXED[m][0], MIXED[m][1], &seed);
            binary_over_shapes(&BINOPS[o], MIXED[m][1], MIXED[m][0], &seed);
        }
    }
}

static void test_binary_sizes(void)
{
    uint64_t seed = 90000;
    for (int o = 0; o < NBINOPS; o++)
        for (int d = 0; d < NDT; d++)
            for (size_t s = 0; s < sizeof SWEEP_SIZES / sizeof SWEEP_SIZES[0]; s++) {
                int64_t n = SWEEP_SIZES[s], one = 1;
                if (n > 2000)
                    continue;
                ref_seed(seed++);
                run_binary(&BINOPS[o], DTYPES[d], 1, &n, REF_CONTIG, DTYPES[d], 1, &n, REF_CONTIG);
                run_binary(&BINOPS[o], DTYPES[d], 1, &n, REF_SLICED, DTYPES[d], 1, &n, REF_CONTIG);
                run_binary(&BINOPS[o], DTYPES[d], 1, &n, REF_CONTIG, DTYPES[d], 1, &one,
                           REF_CONTIG);
                run_binary(&BINOPS[o], DTYPES[d], 1, &one, REF_CONTIG, DTYPES[d], 1, &n,
                           REF_SLICED);
            }
}

/* Operands larger than the threading threshold, transposed and broadcast. */
static void test_binary_large(void)
{
    int64_t shape[2] = {317, 331}, row[1] = {331};
    int64_t n = shape[0] * shape[1];
    double *va = malloc((size_t)n * sizeof *va), *vb = malloc((size_t)n * sizeof *vb);
    ref_seed(77);
    for (int l = 0; l < REF_NUM_LAYOUTS; l++) {
        for (int o = 0; o < 5; o++) { /* add sub mul div pow */
            const binop_t *op = &BINOPS[o];
            char wa[160], wb[160];
            ref_fill(va, n, F32, op->gen_a);
            ref_prepare(l, 2, shape, va);
            ref_fill(vb, n, F32, op->gen_b);
            snprintf(wa, sizeof wa, "float32 %s [317, 331]", ref_layout_name(l));
            arg_t a = {ref_make(va, 2, shape, F32, l), va, 2, shape, {F32, 2, false}, wa};
            bool full = o % 2 == 0;
            snprintf(wb, sizeof wb, "float32 contiguous %s", full ? "[317, 331]" : "[331]");
            arg_t b = {full ? ref_make(vb, 2, shape, F32, REF_CONTIG)
                            : ref_make(vb, 1, row, F32, REF_CONTIG),
                       vb, full ? 2 : 1, full ? shape : row, {F32, full ? 2 : 1, false}, wb};
            run_binary_args(op, &a, &b);
            tide_release(a.t);
            tide_release(b.t);
        }
        ref_fill(va, n, F32, REF_GEN_GENERAL);
        ref_prepare(l, 2, shape, va);
        run_unary(&UNOPS[2], F32, 2, shape, va, l);  /* exp */
        run_unary(&UNOPS[9], F32, 2, shape, va, l);  /* sigmoid */
        run_unary(&UNOPS[10], F32, 2, shape, va, l); /* relu */
    }
    free(va);
    free(vb);
}

/* NaN, infinities and signed zeros on both sides of every float binary op. */
static void test_binary_specials(void)
{
    static const double S[] = {NAN, INFINITY, -INFINITY, -0.0, 0.0, 1.0, -1.0, 0.5, -2.5, 3.0};
    int64_t col[2] = {10, 1}, row[1] = {10};
    for (int o = 0; o < NBINOPS; o++)
        for (int d = 0; d < 2; d++) {
            tide_dtype dt = DTYPES[d];
            double v[10];
            for (int i = 0; i < 10; i++)
                v[i] = ref_quantize(dt, S[i]);
            char wa[64], wb[64];
            snprintf(wa, sizeof wa, "%s specials [10, 1]", ref_dtype_name(dt));
            snprintf(wb, sizeof wb, "%s specials [10]", ref_dtype_name(dt));
            arg_t a = {ref_from_doubles(v, 2, col, dt), v, 2, col, {dt, 2, false}, wa};
            arg_t b = {ref_from_doubles(v, 1, row, dt), v, 1, row, {dt, 1, false}, wb};
            run_binary_args(&BINOPS[o], &a, &b);
            tide_release(a.t);
            tide_release(b.t);
        }
}

/* int64 // and % at the limits, exactly (Python's values; INT64_MIN // -1 wraps). */
static void test_int64_floor_divide_limits(void)
{
    int64_t six = 6;
    int64_t a[6] = {INT64_MIN, INT64_MIN, INT64_MAX, INT64_MIN, INT64_MIN, 9};
    int64_t b[6] = {-1, 7, -2, -7, 0, -4};
    int64_t want_q[6] = {INT64_MIN, -1317624576693539402LL, -4611686018427387904LL,
                         1317624576693539401LL, 0, -3};
    int64_t want_r[6] = {0, 6, -1, -1, 0, -3};
    tide_tensor *ta = tide_from_data(a, 1, &six, I64), *tb = tide_from_data(b, 1, &six, I64);
    tide_tensor *q = tide_floor_divide(ta, tb), *r = tide_remainder(ta, tb);
    int64_t gq[6] = {0}, gr[6] = {0};
    CHECK(q && tide_to_buffer(q, gq, sizeof gq) == 0 && memcmp(gq, want_q, sizeof gq) == 0,
          "floor_divide int64 limits: got [%lld, %lld, %lld, %lld, %lld, %lld]",
          (long long)gq[0], (long long)gq[1], (long long)gq[2], (long long)gq[3],
          (long long)gq[4], (long long)gq[5]);
    CHECK(r && tide_to_buffer(r, gr, sizeof gr) == 0 && memcmp(gr, want_r, sizeof gr) == 0,
          "remainder int64 limits: got [%lld, %lld, %lld, %lld, %lld, %lld]", (long long)gr[0],
          (long long)gr[1], (long long)gr[2], (long long)gr[3], (long long)gr[4],
          (long long)gr[5]);
    tide_release(ta);
    tide_release(tb);
    tide_release(q);
    tide_release(r);
}

/* Integer arithmetic wraps in two's complement; read back without a cast. */
static void test_integer_wrap(void)
{
    int64_t one = 1, three = 3;
    struct {
        const char *desc;
        tide_dtype dt;
        tide_tensor *(*fn)(const tide_tensor *, const tide_tensor *);
        double a, b, want;
    } cases[] = {
        {"add int32 max+1", I32, tide_add, 2147483647.0, 1, -2147483648.0},
        {"sub int32 min-1", I32, tide_sub, -2147483648.0, 1, 2147483647.0},
        {"mul int32 65536*65536", I32, tide_mul, 65536, 65536, 0},
        {"mul int32 46341*46341", I32, tide_mul, 46341, 46341, -2147479015.0},
        {"add uint8 250+10", U8, tide_add, 250, 10, 4},
        {"sub uint8 3-5", U8, tide_sub, 3, 5, 254},
        {"mul uint8 16*16", U8, tide_mul, 16, 16, 0},
        {"pow uint8 2^9", U8, tide_pow, 2, 9, 0},
        {"pow int32 3^20", I32, tide_pow, 3, 20, (double)(int32_t)(uint32_t)3486784401ull},
        /* Python's // and %: toward -inf, the divisor's sign; INT_MIN // -1 wraps (no trap) */
        {"floor_divide int32 min//-1", I32, tide_floor_divide, -2147483648.0, -1, -2147483648.0},
        {"remainder int32 min%-1", I32, tide_remainder, -2147483648.0, -1, 0},
        {"floor_divide int32 -7//2", I32, tide_floor_divide, -7, 2, -4},
        {"remainder int32 -7%2", I32, tide_remainder, -7, 2, 1},
        {"remainder int32 7%-2", I32, tide_remainder, 7, -2, -1},
        {"floor_divide int32 min//3", I32, tide_floor_divide, -2147483648.0, 3, -715827883.0},
        /* an integer zero divisor gives 0 for both (tide.h), never a trap */
        {"floor_divide int32 -7//0", I32, tide_floor_divide, -7, 0, 0},
        {"remainder int32 7%0", I32, tide_remainder, 7, 0, 0},
        {"floor_divide uint8 200//0", U8, tide_floor_divide, 200, 0, 0},
        {"remainder uint8 200%0", U8, tide_remainder, 200, 0, 0},
        {"floor_divide uint8 255//7", U8, tide_floor_divide, 255, 7, 36},
        {"remainder uint8 255%7", U8, tide_remainder, 255, 7, 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tide_tensor *a = ref_from_doubles(&cases[i].a, 1, &one, cases[i].dt);
        tide_tensor *b = ref_from_doubles(&cases[i].b, 1, &one, cases[i].dt);
        tide_tensor *r = cases[i].fn(a, b);
        double *got = ref_read_native(r);
        CHECK(got && got[0] == cases[i].want && tide_get_dtype(r) == cases[i].dt,
              "%s: got %.17g (%s), want %.17g", cases[i].desc, got ? got[0] : NAN,
              r ? ref_dtype_name(tide_get_dtype(r)) : tide_last_error(), cases[i].want);
        free(got);
        tide_release(a);
        tide_release(b);
        tide_release(r);
    }
    /* int64 at its limits, exactly. */
    int64_t big[3] = {INT64_MAX, INT64_MIN, INT64_MAX - 5}, ones[3] = {1, 1, 10};
    tide_tensor *a = tide_from_data(big, 1, &three, I64), *b = tide_from_data(ones, 1, &three, I64);
    tide_tensor *sum = tide_add(a, b), *diff = tide_sub(a, b), *neg = tide_neg(a), *ab = tide_abs(a);
    int64_t got[3] = {0, 0, 0};
    CHECK(sum && tide_to_buffer(sum, got, sizeof got) == 0 && got[0] == INT64_MIN &&
              got[1] == INT64_MIN + 1 && got[2] == (int64_t)((uint64_t)(INT64_MAX - 5) + 10),
          "add int64 limits: got [%lld, %lld, %lld]", (long long)got[0], (long long)got[1],
          (long long)got[2]);
    CHECK(diff && tide_to_buffer(diff, got, sizeof got) == 0 && got[0] == INT64_MAX - 1 &&
              got[1] == INT64_MAX && got[2] == INT64_MAX - 15,
          "sub int64 limits: got [%lld, %lld, %lld]", (long long)got[0], (long long)got[1],
          (long long)got[2]);
    CHECK(neg && tide_to_buffer(neg, got, sizeof got) == 0 && got[0] == -INT64_MAX &&
              got[1] == INT64_MIN && got[2] == -(INT64_MAX - 5),
          "neg int64 limits: got [%lld, %lld, %lld]", (long long)got[0], (long long)got[1],
          (long long)got[2]);
    CHECK(ab && tide_to_buffer(ab, got, sizeof got) == 0 && got[0] == INT64_MAX &&
              got[1] == INT64_MIN && got[2] == INT64_MAX - 5,
          "abs int64 limits: got [%lld, %lld, %lld]", (long long)got[0], (long long)got[1],
          (long long)got[2]);
    tide_release(a);
    tide_release(b);
    tide_release(sum);
    tide_release(diff);
    tide_release(neg);
    tide_release(ab);
    test_int64_floor_divide_limits();
    /* neg and abs of INT32_MIN stay INT32_MIN; neg of a uint8 wraps. */
    int32_t i32[2] = {INT32_MIN, -7};
    int64_t two = 2;
    a = tide_from_data(i32, 1, &two, I32);
    neg = tide_neg(a);
    ab = tide_abs(a);
    int32_t g32[2] = {0, 0};
    CHECK(neg && tide_to_buffer(neg, g32, sizeof g32) == 0 && g32[0] == INT32_MIN && g32[1] == 7,
          "neg int32 [min, -7]: got [%d, %d]", g32[0], g32[1]);
    CHECK(ab && tide_to_buffer(ab, g32, sizeof g32) == 0 && g32[0] == INT32_MIN && g32[1] == 7,
          "abs int32 [min, -7]: got [%d, %d]", g32[0], g32[1]);
    tide_release(a);
    tide_release(neg);
    tide_release(ab);
    uint8_t u8[2] = {3, 0}, gu[2] = {0, 0};
    a = tide_from_data(u8, 1, &two, U8);
    neg = tide_neg(a);
    CHECK(neg && tide_to_buffer(neg, gu, sizeof gu) == 0 && gu[0] == 253 && gu[1] == 0,
          "neg uint8 [3, 0]: got [%d, %d], want [253, 0]", gu[0], gu[1]);
    tide_release(a);
    tide_release(neg);
}

/* ---- scalars and wrapped numbers ----------------------------------------------------------- */

static void test_scalar_variants(void)
{
    struct {
        const char *name;
        tide_tensor *(*fn)(const tide_tensor *, double);
        int op, gen;
        double scalars[4];
    } sops[] = {
        {"add_scalar", tide_add_scalar, OP_ADD, REF_GEN_GENERAL, {2.5, -1.25, 0.0, 3.0}},
        {"sub_scalar", tide_sub_scalar, OP_SUB, REF_GEN_GENERAL, {2.5, -1.25, 0.0, 3.0}},
        {"mul_scalar", tide_mul_scalar, OP_MUL, REF_GEN_GENERAL, {2.5, -1.25, 0.0, 3.0}},
        {"div_scalar", tide_div_scalar, OP_DIV, REF_GEN_GENERAL, {2.5, -1.25, 0.0, 4.0}},
        {"pow_scalar", tide_pow_scalar, OP_POW, REF_GEN_POW_BASE, {2.0, 0.5, -1.0, 3.0}},
    };
    static const shape_t shapes[] = {{2, {3, 4}}, {0, {0}}, {2, {0, 3}}, {1, {1}}, {3, {2, 3, 2}}};
    uint64_t seed = 300000;
    for (size_t o = 0; o < sizeof sops / sizeof sops[0]; o++)
        for (int d = 0; d < NDT; d++)
            for (int k = 0; k < 4; k++)
                for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                    for (int l = 0; l < REF_NUM_LAYOUTS; l++) {
                        tide_dtype dt = DTYPES[d];
                        const shape_t *sh = &shapes[s];
                        double sc = sops[o].scalars[k], v[64], want[64];
                        int64_t n = ref_numel(sh->ndim, sh->shape);
                        ref_seed(seed++);
                        ref_fill(v, n, dt, sops[o].gen);
                        ref_prepare(l, sh->ndim, sh->shape, v);
                        char desc[256];
                        snprintf(desc, sizeof desc, "%s(%s %s %s, %g)", sops[o].name,
                                 ref_dtype_name(dt), ref_layout_name(l),
                                 ref_shape_str(sh->ndim, sh->shape), sc);
                        tide_tensor *x = ref_make(v, sh->ndim, sh->shape, dt, l);
                        tide_tensor *r = sops[o].fn(x, sc);
                        bool maybe = dt == BOOL && (sops[o].op == OP_SUB || sops[o].op == OP_POW);
                        if (maybe && !r) {
                            CHECK(tide_last_error()[0] != '\0', "%s: NULL without an error", desc);
                        } else {
                            tide_dtype rdt = ref_is_float(dt) ? dt : F32;
                            for (int64_t i = 0; i < n; i++)
                                want[i] = ref_quantize(
                                    rdt, ref_binary(sops[o].op, ref_quantize(rdt, v[i]),
                                                    ref_quantize(rdt, sc), rdt));
                            check_values(desc, r, rdt, sh->ndim, sh->shape, want,
                                         sops[o].op == OP_POW);
                        }
                        tide_release(r);
                        tide_release(x);
                    }
}

/* tide_number and tide_integer operands on either side: Python-scalar promotion. */
static void test_wrapped_numbers(void)
{
    struct {
        int op_index; /* into BINOPS */
        bool is_float;
        double value;
        bool number_first;
    } cases[] = {
        {0, true, 2.5, false},  {0, true, 2.5, true},   {0, false, 2, false},
        {0, false, -3, false},  {2, false, 3, true},    {2, true, -1.5, false},
        {1, false, 2, false},   {1, true, 0.5, true},   {3, false, 2, false},
        {3, true, 4.0, true},   {4, false, 2, false},   {4, true, 2.0, true},
        {5, true, 0.5, false},  {6, false, 1, true},    {9, false, 1, false},
        {7, true, 1.0, true},   {13, false, 0, false},  {14, true, 0.0, true},
    };
    static const shape_t shapes[] = {{2, {3, 4}}, {0, {0}}, {2, {0, 2}}, {3, {2, 1, 3}}};
    uint64_t seed = 400000;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int d = 0; d < NDT; d++)
            for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
                for (int l = 0; l < REF_NUM_LAYOUTS; l++) {
                    const binop_t *op = &BINOPS[cases[c].op_index];
                    const shape_t *sh = &shapes[s];
                    double v[64], nv = cases[c].value;
                    char wt[160], wn[64];
                    ref_seed(seed++);
                    arg_t t = make_arg(DTYPES[d], sh->ndim, sh->shape, l,
                                       op->op == OP_POW && cases[c].number_first ? REF_GEN_POW_EXP
                                                                                  : op->gen_a,
                                       v, wt, sizeof wt);
                    snprintf(wn, sizeof wn, "tide_%s(%g)", cases[c].is_float ? "number" : "integer",
                             nv);
                    arg_t num = {cases[c].is_float ? tide_number(nv) : tide_integer((int64_t)nv),
                                 &nv, 0, sh->shape,
                                 {cases[c].is_float ? F64 : I64, 0, true}, wn};
                    CHECK(num.t != NULL, "%s failed: %s", wn, tide_last_error());
                    if (t.t && num.t) {
                        if (cases[c].number_first)
                            run_binary_args(op, &num, &t);
                        else
                            run_binary_args(op, &t, &num);
                    }
                    tide_release(t.t);
                    tide_release(num.t);
                }
    /* The numbers themselves hold their values. */
    double x = 0;
    tide_tensor *n = tide_number(2.5), *i = tide_integer(-7);
    CHECK(n && tide_ndim(n) == 0 && tide_item(n, &x) == 0 && x == 2.5, "tide_number(2.5) item %g", x);
    CHECK(i && tide_ndim(i) == 0 && tide_item(i, &x) == 0 && x == -7, "tide_integer(-7) item %g", x);
    tide_release(n);
    tide_release(i);
}

/* The promotion cases named in tide.h / PyTorch, spelled out one by one. */
static void test_promotion_examples(void)
{
    int64_t s3[1] = {3};
    tide_tensor *i32 = tide_ones(1, s3, I32), *f32 = tide_ones(1, s3, F32),
                *u8 = tide_ones(1, s3, U8), *b = tide_ones(1, s3, BOOL),
                *i64 = tide_ones(1, s3, I64), *f64 = tide_ones(1, s3, F64);
    tide_tensor *z64 = tide_scalar(2.0, F64), *z32 = tide_scalar(2.0, F32),
                *zi64 = tide_scalar(2.0, I64), *zi32 = tide_scalar(2.0, I32);
    tide_tensor *num = tide_number(2.5), *integer = tide_integer(2);
    struct {
        const char *desc;
        tide_tensor *r;
        tide_dtype want;
    } cases[] = {
        {"int32 + float32", tide_add(i32, f32), F32},
        {"uint8 + int32", tide_add(u8, i32), I32},
        {"bool + bool", tide_add(b, b), BOOL},
        {"bool * bool", tide_mul(b, b), BOOL},
        {"int32 + number(2.5)", tide_add(i32, num), F32},
        {"int32 + integer(2)", tide_add(i32, integer), I32},
        {"uint8 + integer(2)", tide_add(u8, integer), U8},
        {"bool + integer(2)", tide_add(b, integer), I64},
        {"bool + number(2.5)", tide_add(b, num), F32},
        {"float64 + number(2.5)", tide_add(f64, num), F64},
        {"int64 * number(2.5)", tide_mul(i64, num), F32},
        {"float32 + 0-dim float64", tide_add(f32, z64), F32},
        {"0-dim float64 + float32", tide_add(z64, f32), F32},
        {"int32 + 0-dim float32", tide_add(i32, z32), F32},
        {"int32 + 0-dim float64", tide_add(i32, z64), F64},
        {"int32 + 0-dim int64", tide_add(i32, zi64), I32},
        {"uint8 + 0-dim int32", tide_add(u8, zi32), U8},
        {"bool + 0-dim int32", tide_add(b, zi32), I32},
        {"0-dim int32 + 0-dim int64", tide_add(zi32, zi64), I64},
        {"0-dim float32 + 0-dim float64", tide_add(z32, z64), F64},
        {"0-dim int32 + number(2.5)", tide_add(zi32, num), F32},
        {"0-dim float64 + number(2.5)", tide_add(z64, num), F64},
        {"int32 + int64", tide_add(i32, i64), I64},
        {"float32 + float64", tide_add(f32, f64), F64},
        {"int64 + float32", tide_add(i64, f32), F32},
        {"exp(int32)", tide_exp(i32), F32},
        {"exp(float64)", tide_exp(f64), F64},
        {"sqrt(bool)", tide_sqrt(b), F32},
        {"sigmoid(uint8)", tide_sigmoid(u8), F32},
        {"div(int32, int32)", tide_div(i32, i32), F32},
        {"div(int64, integer(2))", tide_div(i64, integer), F32},
        {"div(float64, int32)", tide_div(f64, i32), F64},
        {"lt(float32, float64)", tide_lt(f32, f64), BOOL},
        {"eq(int32, int32)", tide_eq(i32, i32), BOOL},
        {"ge(uint8, number(2.5))", tide_ge(u8, num), BOOL},
        {"logical_and(float32, int32)", tide_logical_and(f32, i32), BOOL},
        {"logical_not(float32)", tide_logical_not(f32), BOOL},
        {"neg(uint8)", tide_neg(u8), U8},
        {"abs(int64)", tide_abs(i64), I64},
        {"floor(int32)", tide_floor(i32), I32},
        {"pow(int32, int32)", tide_pow(i32, i32), I32},
        {"pow(int32, number(2.5))", tide_pow(i32, num), F32},
        {"maximum(uint8, int64)", tide_maximum(u8, i64), I64},
        {"add_scalar(int32, 1.0)", tide_add_scalar(i32, 1.0), F32},
        {"mul_scalar(float64, 2.0)", tide_mul_scalar(f64, 2.0), F64},
        {"mul_scalar(bool, 2.0)", tide_mul_scalar(b, 2.0), F32},
        {"where(bool, int32, float64)", tide_where(b, i32, f64), F64},
        {"where(bool, int32, 0-dim float64)", tide_where(b, i32, z64), F64},
        {"where(bool, float32, 0-dim float64)", tide_where(b, f32, z64), F32},
        {"where(bool, uint8, integer(2))", tide_where(b, u8, integer), U8},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        CHECK(cases[c].r && tide_get_dtype(cases[c].r) == cases[c].want, "%s: got %s, want %s",
              cases[c].desc,
              cases[c].r ? ref_dtype_name(tide_get_dtype(cases[c].r)) : tide_last_error(),
              ref_dtype_name(cases[c].want));
        tide_release(cases[c].r);
    }
    /* The pairwise table. */
    for (int a = 0; a < NDT; a++)
        for (int c = 0; c < NDT; c++)
            CHECK(tide_promote_types(DTYPES[a], DTYPES[c]) == PROMOTE[a][c],
                  "tide_promote_types(%s, %s) = %s, want %s", ref_dtype_name(DTYPES[a]),
                  ref_dtype_name(DTYPES[c]),
                  ref_dtype_name(tide_promote_types(DTYPES[a], DTYPES[c])),
                  ref_dtype_name(PROMOTE[a][c]));
    tide_tensor *all[] = {i32, f32, u8, b, i64, f64, z64, z32, zi64, zi32, num, integer};
    for (size_t k = 0; k < sizeof all / sizeof all[0]; k++)
        tide_release(all[k]);
}

/* ---- where ---------------------------------------------------------------------------------- */

static void test_where(void)
{
    struct {
        shape_t c, a, b;
    } shapes[] = {
        {{2, {3, 1}}, {1, {4}}, {2, {3, 4}}},
        {{2, {2, 3}}, {0, {0}}, {1, {3}}},
        {{0, {0}}, {2, {2, 2}}, {2, {2, 2}}},
        {{2, {0, 3}}, {1, {3}}, {1, {1}}},
        {{1, {1}}, {1, {1}}, {1, {1}}},
        {{3, {2, 3, 4}}, {3, {2, 3, 4}}, {3, {2, 3, 4}}},
    };
    static const tide_dtype cond_dts[] = {BOOL, F32, I32, U8};
    static const tide_dtype pairs[][2] = {{F32, F32}, {F64, F64}, {I32, I32}, {I64, I64},
                                          {U8, U8},   {BOOL, BOOL}, {I32, F32}, {F32, F64},
                                          {U8, I64},  {BOOL, I32}};
    static const double float_conds[] = {0.0, -0.0, 1.5, NAN, -2.0};
    uint64_t seed = 500000;
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
        for (size_t cd = 0; cd < sizeof cond_dts / sizeof cond_dts[0]; cd++)
            for (size_t p = 0; p < sizeof pairs / sizeof pairs[0]; p++)
                for (int l = 0; l < REF_NUM_LAYOUTS; l++) {
                    const shape_t *sc = &shapes[s].c, *sa = &shapes[s].a, *sb = &shapes[s].b;
                    tide_dtype ct = cond_dts[cd], at = pairs[p][0], bt = pairs[p][1];
                    double vc[64], va[64], vb[64];
                    ref_seed(seed++);
                    int64_t nc = ref_numel(sc->ndim, sc->shape);
                    for (int64_t i = 0; i < nc; i++)
                        vc[i] = ct == F32 ? float_conds[ref_randint(0, 4)]
                                          : ref_gen_value(ct, REF_GEN_SMALL);
                    ref_prepare(l, sc->ndim, sc->shape, vc);
                    ref_fill(va, ref_numel(sa->ndim, sa->shape), at, REF_GEN_GENERAL);
                    ref_prepare((l + 1) % REF_NUM_LAYOUTS, sa->ndim, sa->shape, va);
                    ref_fill(vb, ref_numel(sb->ndim, sb->shape), bt, REF_GEN_GENERAL);
                    ref_prepare((l + 2) % REF_NUM_LAYOUTS, sb->ndim, sb->shape, vb);
                    tide_tensor *c = ref_make(vc, sc->ndim, sc->shape, ct, l);
                    tide_tensor *a = ref_make(va, sa->ndim, sa->shape, at, (l + 1) % 4);
                    tide_tensor *b = ref_make(vb, sb->ndim, sb->shape, bt, (l + 2) % 4);
                    char desc[320];
                    snprintf(desc, sizeof desc, "where(%s %s %s, %s %s %s, %s %s %s)",
                             ref_dtype_name(ct), ref_layout_name(l),
                             ref_shape_str(sc->ndim, sc->shape), ref_dtype_name(at),
                             ref_layout_name((l + 1) % 4), ref_shape_str(sa->ndim, sa->shape),
                             ref_dtype_name(bt), ref_layout_name((l + 2) % 4),
                             ref_shape_str(sb->ndim, sb->shape));
                    tide_tensor *r = tide_where(c, a, b);
                    int n1, n2;
                    int64_t s1[TIDE_MAX_DIMS], s2[TIDE_MAX_DIMS], idx[TIDE_MAX_DIMS] = {0};
                    broadcast_shapes(sc->ndim, sc->shape, sa->ndim, sa->shape, &n1, s1);
                    broadcast_shapes(n1, s1, sb->ndim, sb->shape, &n2, s2);
                    operand_t ops[2] = {{at, sa->ndim, false}, {bt, sb->ndim, false}};
                    tide_dtype rdt = result_type(ops, 2);
                    int64_t n = ref_numel(n2, s2);
                    double want[64];
                    if (n > 0) {
                        int64_t i = 0;
                        do {
                            double cv = vc[bcast_index(sc->ndim, sc->shape, n2, idx)];
                            double av = va[bcast_index(sa->ndim, sa->shape, n2, idx)];
                            double bv = vb[bcast_index(sb->ndim, sb->shape, n2, idx)];
                            want[i++] = ref_quantize(rdt, cv != 0 ? av : bv);
                        } while (ref_next_index(n2, s2, idx));
                    }
                    check_values(desc, r, rdt, n2, s2, want, false);
                    tide_release(r);
                    tide_release(a);
                    tide_release(b);
                    tide_release(c);
                }
}

/* ---- cast ----------------------------------------------------------------------------------- */

static double cast_source_value(tide_dtype src, tide_dtype dst)
{
    if (ref_is_float(src)) {
        int pick = (int)ref_randint(0, 9);
        if (dst == BOOL && pick == 0)
            return src == F32 || src == F64 ? NAN : 0;
        if (dst == BOOL && pick == 1)
            return -0.0;
        if (pick == 2)
            return 0.0;
        double v = dst == U8 ? 200 * ref_uniform() : -100 + 200 * ref_uniform();
        return ref_quantize(src, v);
    }
    switch (src) {
    case I32: return (double)ref_randint(-1000, 1000);
    case I64: {
        int pick = (int)ref_randint(0, 5);
        return pick == 0 ? 4294967301.0 : pick == 1 ? -4294967297.0 : (double)ref_randint(-1000, 1000);
    }
    case U8: return (double)ref_randint(0, 255);
    default: return (double)ref_randint(0, 1);
    }
}

static void test_cast(void)
{
    static const shape_t shapes[] = {{2, {3, 4}}, {3, {2, 3, 4}}, {0, {0}}, {2, {0, 2}}, {1, {1}}};
    uint64_t seed = 600000;
    for (int s = 0; s < NDT; s++)
        for (int d = 0; d < NDT; d++)
            for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++)
                for (int l = 0; l < REF_NUM_LAYOUTS; l++) {
                    tide_dtype src = DTYPES[s], dst = DTYPES[d];
                    const shape_t *sh = &shapes[k];
                    int64_t n = ref_numel(sh->ndim, sh->shape);
                    double v[64], want[64];
                    ref_seed(seed++);
                    for (int64_t i = 0; i < n; i++)
                        v[i] = cast_source_value(src, dst);
                    ref_prepare(l, sh->ndim, sh->shape, v);
                    tide_tensor *x = ref_make(v, sh->ndim, sh->shape, src, l);
                    tide_tensor *r = tide_cast(x, dst);
                    char desc[200];
                    snprintf(desc, sizeof desc, "cast(%s %s %s -> %s)", ref_dtype_name(src),
                             ref_layout_name(l), ref_shape_str(sh->ndim, sh->shape),
                             ref_dtype_name(dst));
                    for (int64_t i = 0; i < n; i++)
                        want[i] = ref_quantize(dst, v[i]);
                    if (src == dst)
                        CHECK(r == x, "%s: should return x itself", desc);
                    CHECK(r && tide_get_dtype(r) == dst && ref_same_shape(r, sh->ndim, sh->shape),
                          "%s: got %s %s (%s)", desc, r ? ref_dtype_name(tide_get_dtype(r)) : "NULL",
                          ref_tensor_shape_str(r), tide_last_error());
                    double *got = ref_read_native(r);
                    CHECK(got != NULL, "%s: reading failed: %s", desc, tide_last_error());
                    if (got) {
                        int64_t bad = ref_mismatch(got, want, n, 0, 0);
                        CHECK(bad < 0, "%s: first mismatch at %s: got %.17g, want %.17g (from %.17g)",
                              desc, ref_index_str(sh->ndim, sh->shape, bad), got[bad], want[bad],
                              v[bad]);
                    }
                    free(got);
                    tide_release(r);
                    tide_release(x);
                }
    /* Values that show the conversion rule. */
    struct {
        tide_dtype src, dst;
        double in, out;
    } cases[] = {
        {F32, I32, 2.7, 2},        {F32, I32, -2.7, -2},     {F64, I64, -1e15 - 0.5, -1e15},
        {F32, U8, 255.9, 255},     {F64, BOOL, NAN, 1},      {F32, BOOL, -0.0, 0},
        {F64, BOOL, 1e-300, 1},    {I32, U8, -1, 255},       {I32, U8, 300, 44},
        {I64, I32, 4294967301.0, 5}, {I64, I32, 2147483648.0, -2147483648.0},
        {U8, I32, 200, 200},       {U8, BOOL, 2, 1},         {BOOL, F32, 1, 1},
        {F64, F32, 0.1, (double)0.1f}, {I64, F64, 9007199254740993.0, 9007199254740992.0},
        {F64, F32, 1e300, INFINITY}, {I32, F32, 16777217, 16777216},
        /* core/README.md: NaN, infinities and out-of-range give the "integer indefinite". */
        {F32, I32, NAN, -2147483648.0}, {F64, I32, 1e10, -2147483648.0},
        {F64, I64, INFINITY, -9223372036854775808.0}, {F32, U8, NAN, 0},
    };
    int64_t one = 1;
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        tide_tensor *x;
        if (cases[c].src == I64 && cases[c].in > 9e15) {
            int64_t iv = 9007199254740993ll;
            x = tide_from_data(&iv, 1, &one, I64);
        } else {
            x = ref_from_doubles(&cases[c].in, 1, &one, cases[c].src);
        }
        tide_tensor *r = tide_cast(x, cases[c].dst);
        double *got = ref_read_native(r);
        CHECK(got && (got[0] == cases[c].out || (isnan(got[0]) && isnan(cases[c].out))),
              "cast %s %.17g -> %s: got %.17g, want %.17g", ref_dtype_name(cases[c].src),
              cases[c].in, ref_dtype_name(cases[c].dst), got ? got[0] : NAN, cases[c].out);
        free(got);
        tide_release(r);
        tide_release(x);
    }
}

/* Float to integer outside the integer's range, the rule docs/tensors.md states (PyTorch's
 * results on x86, without C's undefined behaviour): truncation toward zero when the result fits;
 * NaN, +-inf and out-of-range values give INT32_MIN / INT64_MIN; uint8 is the low byte of the
 * int64 result (as PyTorch, which casts to uint8 through int64); bool is x != 0 (NaN is true).
 * Each value fills a 37-element tensor (vector body and tail) and a strided view of one. */
static void test_cast_out_of_range(void)
{
    const double I32MIN = -2147483648.0, I64MIN = -9223372036854775808.0;
    struct {
        double in, i32, i64, u8, b;
        bool f64_only; /* not a float32 value */
    } cases[] = {
        {NAN, I32MIN, I64MIN, 0, 1, false},
        {INFINITY, I32MIN, I64MIN, 0, 1, false},
        {-INFINITY, I32MIN, I64MIN, 0, 1, false},
        {3e9, I32MIN, 3e9, 0, 1, false},                 /* 3e9 = 0xB2D05E00 */
        {-3e9, I32MIN, -3e9, 0, 1, false},               /* low byte of -0xB2D05E00 is 0 */
        {2147483648.0, I32MIN, 2147483648.0, 0, 1, false},
        {-2147483648.0, I32MIN, -2147483648.0, 0, 1, false},
        {0x1p63, I32MIN, I64MIN, 0, 1, false},
        {-0x1p63, I32MIN, I64MIN, 0, 1, false},
        {0x1p64, I32MIN, I64MIN, 0, 1, false},
        {-1e38, I32MIN, I64MIN, 0, 1, false},
        {300.75, 300, 300, 44, 1, false},
        {-1.5, -1, -1, 255, 1, false},
        {-0.0, 0, 0, 0, 0, false},
        {2147483647.5, 2147483647.0, 2147483647.0, 255, 1, true},
        {-2147483648.75, I32MIN, -2147483648.0, 0, 1, true}, /* truncates into range */
        {-2147483649.0, I32MIN, -2147483649.0, 255, 1, true},
        {4294967596.0, I32MIN, 4294967596.0, 44, 1, true},    /* 2^32 + 300 */
    };
    const tide_dtype dsts[4] = {I32, I64, U8, BOOL};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int s = 0; s < 2; s++) {
            tide_dtype src = s ? F64 : F32;
            if (cases[c].f64_only && src == F32)
                continue;
            double v[74];
            for (int i = 0; i < 74; i++)
                v[i] = cases[c].in;
            int64_t n = 74;
            tide_tensor *full = ref_from_doubles(v, 1, &n, src);
            tide_tensor *views[2] = {tide_slice(full, 0, 0, 37, 1), tide_slice(full, 0, 0, 74, 2)};
            for (int d = 0; d < 4; d++) {
                double want[4] = {cases[c].i32, cases[c].i64, cases[c].u8, cases[c].b};
                for (int w = 0; w < 2; w++) {
                    tide_tensor *r = tide_cast(views[w], dsts[d]);
                    double *got = ref_read_native(r);
                    int64_t bad = got ? -1 : 0;
                    for (int64_t i = 0; got && i < 37 && bad < 0; i++)
                        if (got[i] != want[d])
                            bad = i;
                    CHECK(got && bad < 0, "cast %s %.17g -> %s (%s): element %lld is %.17g, want "
                          "%.17g (%s)", ref_dtype_name(src), cases[c].in, ref_dtype_name(dsts[d]),
                          w ? "strided" : "contiguous", (long long)bad, got ? got[bad] : NAN,
                          want[d], tide_last_error());
                    free(got);
                    tide_release(r);
                }
            }
            tide_release(views[0]), tide_release(views[1]), tide_release(full);
        }
}

int main(void)
{
    test_promotion_examples();
    test_unary_all();
    test_unary_sizes();
    test_unary_specials();
    test_round_half_even();
    test_binary_all();
    test_binary_sizes();
    test_binary_large();
    test_binary_specials();
    test_integer_wrap();
    test_scalar_variants();
    test_wrapped_numbers();
    test_where();
    test_cast();
    test_cast_out_of_range();
    return test_summary("test_elementwise");
}
