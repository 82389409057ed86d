/*
 * test_ref_device.c — every primitive of core/primitive.h run on the CPU and on the reference
 * device ("ref", devices/ref) with the same operands, and the results compared; the same for
 * Vulkan against ref where a Vulkan device (lavapipe in CI) is present.
 *
 * The test walks the op table: an op without a case here, or one the ref device cannot run, is
 * a failure naming the op, so a new primitive cannot go in without a reference kernel and a
 * check. Each op runs in several variants: dtypes, operand layouts (contiguous, transposed,
 * strided with an offset, broadcast with stride 0, reversed with a negative stride), 0-dim
 * operands and empty reduced dims. Kernels are called through the device's run(), the way the
 * dispatcher calls them, with the attributes core/primitive.h defines. View ops never reach a
 * device; they are checked through the public API on ref tensors.
 *
 * Comparison rules (devices/ref/README.md):
 *  - exact (bitwise, any NaN equal to any NaN) for every op whose result is exact: integer
 *    and bool results, comparisons, copies and casts, indexing, max/min, argmax/argmin, pooling
 *    max and indices, fills, iota, uniform and integer random numbers;
 *  - a sum of n terms (sum, prod, matmul, conv and its gradients, average pooling and its
 *    gradient, scatter_add) computed in another order or precision: with u the unit roundoff of
 *    the dtype (2^-24 float32, 2^-53 float64), any order of recursive or blocked summation of
 *    n rounded products is within gamma_n * sum|terms| of the exact sum (Higham, Accuracy and
 *    Stability, 3.1), gamma_n = n u / (1 - n u); ref sums in double and rounds once (error
 *    below u |s| <= u sum|terms|, plus its own gamma_n in double). So
 *        |device - ref| <= 2 (n + 3) u * sum|terms|,
 *    the 2 covering gamma_n's denominator and ref's share in float64, the 3 a division (the
 *    average's divisor; Vulkan's division is within 2.5 ulp). sum|terms| is the same op run on
 *    ref with every float operand replaced by its absolute value (|x| @ |w| for matmul, ...);
 *  - elementwise float ops: within k ulp of ref's value (plus an absolute bound where the
 *    device's documentation gives one), k = the device's stated bound plus ref's (ref: libm in
 *    double rounded once, <= 0.5 ulp + 2^-29 ulp for float32; glibc's stated maxima for
 *    float64: exp, log, sin, cos 1 ulp, pow 1, tanh 2); see tolerance_ulps().
 * Test data avoids denormals (Vulkan may flush them) and zeros where a sign of zero would
 * differ by summation order.
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "half.h"
#include "tensor.h"
#include "tide.h"
#include "test_util.h"

enum { CONTIG, TRANSPOSED, STRIDED, BCAST, NEGATIVE, NLAYOUTS };
static const char *const layout_names[] = {"contiguous", "transposed", "strided", "broadcast",
                                           "negative-stride"};

/* One operand: its logical shape, dtype, layout and the range of its values. */
typedef struct operand {
    tide_dtype dt;
    int nd;
    int64_t shape[TIDE_MAX_DIMS];
    int layout;
    double lo, hi; /* floats: uniform in [lo, hi]; integers: uniform integers in [lo, hi] */
    bool special;  /* floats: also NaN, +-inf, huge, ties (casts) */
    bool index;    /* an index operand: never made absolute */
    bool integral; /* floats: whole numbers only (comparisons and max/min then see ties) */
} operand;

enum { TOL_EXACT, TOL_ULPS, TOL_SUMMED };

typedef struct tcase {
    tide_op op;
    char what[160];
    int nin;
    operand in[6];
    tide_attrs attrs;
    int out_nd;
    int64_t out_shape[TIDE_MAX_DIMS];
    tide_dtype out_dt;
    bool dst_view; /* COPY/FILL: out is a strided view (dst) over a prefilled buffer */
    operand dst;
    int tol;
    int64_t terms; /* TOL_SUMMED: terms per output element */
} tcase;

/* ---- operands on a device ------------------------------------------------------------------ */

static uint64_t lcg_state;
static double next_uniform(void)
{
    lcg_state = lcg_state * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(lcg_state >> 11) * 0x1p-53;
}

static int64_t numel_of(int nd, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = 0; d < nd; d++)
        n *= shape[d];
    return n;
}

/* The layout's strides and offset, and the elements of storage it needs. */
static int64_t layout_of(const operand *o, int64_t *st, int64_t *off)
{
    int64_t c = 1, s = 1, lo = 0, hi = 0;
    for (int d = o->nd - 1; d >= 0; d--) {
        st[d] = o->layout == STRIDED ? 2 * c : c;
        c *= o->shape[d];
    }
    for (int d = 0; d < o->nd && o->layout == TRANSPOSED; d++, s *= o->shape[d - 1])
        st[d] = s;
    if (o->nd > 0 && o->layout == BCAST)
        st[0] = 0;
    if (o->nd > 0 && o->layout == NEGATIVE)
        st[o->nd - 1] = -st[o->nd - 1];
    for (int d = 0; d < o->nd; d++) {
        int64_t span = (o->shape[d] > 0 ? o->shape[d] - 1 : 0) * st[d];
        if (span < 0)
            lo += span;
        else
            hi += span;
    }
    *off = -lo + (o->layout == STRIDED);
    return *off + hi + 1;
}

static double special_value(void)
{
    static const double v[] = {NAN, INFINITY, -INFINITY, 1e10, -1e10, 2.5, -2.5, 0.5, 255.9,
                               256.0, -129.0, 3e9, -0.0, 1e300};
    return v[(int)(next_uniform() * (sizeof v / sizeof v[0]))];
}

static double gen_value(const operand *o)
{
    if (o->dt == TIDE_BOOL)
        return next_uniform() < 0.5;
    if (o->dt == TIDE_FLOAT32 || o->dt == TIDE_FLOAT64 || o->dt == TIDE_FLOAT16 ||
        o->dt == TIDE_BFLOAT16) {
        if (o->special && next_uniform() < 0.3)
            return special_value();
        double v = o->lo + (o->hi - o->lo) * next_uniform();
        return o->integral ? floor(v) : v;
    }
    return floor(o->lo + (o->hi - o->lo + 1) * next_uniform());
}

static void store_value(void *buf, tide_dtype dt, int64_t i, double v)
{
    switch (dt) {
    case TIDE_FLOAT32: ((float *)buf)[i] = (float)v; break;
    case TIDE_FLOAT64: ((double *)buf)[i] = v; break;
    case TIDE_INT32: ((int32_t *)buf)[i] = (int32_t)v; break;
    case TIDE_INT64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case TIDE_FLOAT16: ((uint16_t *)buf)[i] = td_f32_to_f16((float)v); break;
    case TIDE_BFLOAT16: ((uint16_t *)buf)[i] = td_f32_to_bf16((float)v); break;
    default: ((uint8_t *)buf)[i] = (uint8_t)v; break;
    }
}

/* o's tensor on dev, its storage filled from seed (the same values on every device); absval
 * takes the absolute value of float elements. base (if not NULL) gets the whole storage as a
 * 1-D tensor. */
static tide_tensor *make_operand(const char *dev, const operand *o, uint64_t seed, bool absval,
                                 tide_tensor **base)
{
    int64_t st[TIDE_MAX_DIMS], off, phys = layout_of(o, st, &off);
    void *buf = calloc((size_t)phys, 8);
    if (!buf)
        return NULL;
    lcg_state = seed;
    for (int64_t i = 0; i < phys; i++) {
        double v = gen_value(o);
        store_value(buf, o->dt, i, absval && !o->index ? fabs(v) : v);
    }
    tide_tensor *host = tide_from_data(buf, 1, &phys, o->dt);
    free(buf);
    tide_tensor *moved = host ? tide_to(host, dev) : NULL;
    tide_release(host);
    if (!moved)
        return NULL;
    tide_tensor *v = td_tensor_view(moved, o->nd, o->shape, st, off);
    if (base)
        *base = tide_retain(moved);
    tide_release(moved);
    return v;
}

/* Runs c on dev (absval: every float operand made absolute). The result (for COPY/FILL, the
 * destination's whole storage) as a contiguous CPU tensor, or NULL with the error set. */
static tide_tensor *run_case(const char *dev_name, const tcase *c, bool absval)
{
    tide_device *dev = td_device_find("test_ref_device", dev_name);
    if (!dev)
        return NULL;
    tide_tensor *in[6] = {NULL}, *out = NULL, *base = NULL, *result = NULL;
    bool ok = true;
    for (int i = 0; i < c->nin; i++)
        ok &= (in[i] = make_operand(dev_name, &c->in[i], 1000u + 77u * (uint64_t)i, absval,
                                    NULL)) != NULL;
    if (c->dst_view)
        out = make_operand(dev_name, &c->dst, 555u, false, &base);
    else
        out = td_tensor_new("test_ref_device", dev, c->out_nd, c->out_shape, c->out_dt);
    if (ok && out && dev->run(dev, c->op, out, in, c->nin, &c->attrs) == 0 &&
        dev->synchronize(dev) == 0) {
        tide_tensor *moved = tide_to(c->dst_view ? base : out, "cpu");
        result = moved ? tide_contiguous(moved) : NULL;
        tide_release(moved);
    }
    for (int i = 0; i < c->nin; i++)
        tide_release(in[i]);
    tide_release(out);
    tide_release(base);
    return result;
}

/* ---- comparing --------------------------------------------------------------------------- */

static bool is_vulkan(const char *dev) { return strcmp(dev, "vulkan") == 0; }

/* Elementwise float ops: (ulps, absolute) allowed between dev and ref for output dtype dt.
 * CPU (devices/cpu/README.md, SLEEF's documentation): +, -, *, /, sqrt, reciprocal, and every
 * op that only selects or rounds to an integer are correctly rounded, as is ref: exact. rsqrt is
 * 1/sqrt with two roundings (1 ulp) against ref's one: 2. SLEEF u10 functions (log, sin, cos,
 * pow in float32; all of float64's) 1 ulp, tide's float32 exp 0.98, sigmoid 2.4 (float64: exp
 * 1 ulp, then a sum and a division: 3), tanh 6.2 on SSE2; add ref's 0.5 (float32) or glibc's
 * stated maximum (float64: 1, tanh 2; ref's sigmoid: exp, a sum, a division: 2) and round up.
 * Vulkan (the Vulkan spec, "Precision and Operation of SPIR-V Instructions"): +, -, * correctly
 * rounded; division and 1/x 2.5 ulp; inversesqrt 2 ulp; sqrt as 1/inversesqrt 4.5; exp
 * 3 + 2|x| ulp (|x| <= 3 here: 9); log 3 ulp, absolute 2^-21 inside [0.5, 2]; sin, cos absolute
 * 2^-11 inside [-pi, pi]; pow as exp2(y log2 x): log2's 2^-21 times |y| <= 2 moves the exponent
 * by 2^-20, 0.7 * 2^-20 relative (6 ulp), plus exp2's 3 + 2*4 ulp (|y log2 x| <= 4): 17; tanh
 * and sigmoid as their exp formulas: exp's 9 ulp, a sum and a division, with cancellation near
 * 0 (tanh) bounded by 2^-20 absolute. Plus ref's share (1 ulp). */
static void tolerance_ulps(const char *dev, tide_op op, tide_dtype dt, double *ulps, double *abs_)
{
    bool f64 = dt == TIDE_FLOAT64, vk = is_vulkan(dev);
    *abs_ = 0;
    switch (op) {
    case TIDE_OP_RSQRT: *ulps = vk ? 3 : 2; break;
    case TIDE_OP_EXP: *ulps = vk ? 10 : 2; break;
    case TIDE_OP_LOG: *ulps = vk ? 4 : 2, *abs_ = vk ? 0x1p-21 : 0; break;
    case TIDE_OP_SIN:
    case TIDE_OP_COS: *ulps = 2, *abs_ = vk ? 0x1p-11 : 0; break;
    case TIDE_OP_POW: *ulps = vk ? 18 : 2; break;
    case TIDE_OP_TANH: *ulps = vk ? 14 : f64 ? 3 : 7, *abs_ = vk ? 0x1p-20 : 0; break;
    case TIDE_OP_SIGMOID: *ulps = vk ? 14 : f64 ? 5 : 3, *abs_ = vk ? 0x1p-20 : 0; break;
    /* SLEEF's erf and libm's (ref) are each within 1 ulp; the shader's within 4 (common.glsl),
     * plus ref's rounding to float32 */
    case TIDE_OP_ERF: *ulps = vk && !f64 ? 5 : 2; break;
    /* issue 24's: SLEEF's 1 ulp (glibc's own up to 1-2 for float64), the shaders as measured
     * by tests/test_math_ulps.c (common.glsl), plus ref's rounding; float64 runs on the CPU */
    case TIDE_OP_LOG1P: case TIDE_OP_LOG2: case TIDE_OP_ATAN: case TIDE_OP_ATAN2:
        *ulps = 3; break;
    case TIDE_OP_TAN: case TIDE_OP_ASIN: case TIDE_OP_ACOS: *ulps = vk && !f64 ? 4 : 3; break;
    case TIDE_OP_EXPM1: case TIDE_OP_SINH: case TIDE_OP_COSH: *ulps = vk && !f64 ? 16 : 3; break;
    /* gelu, as tests/test_gelu.c bounds it at |x| <= 3 (z^2 <= 4.5): the argument's two
     * roundings times erfc's sensitivity to them (2 x 9.7) plus, in float32, z^2's rounding
     * inside exp (9) and the form's other roundings (6): 35 (float64, SLEEF's erfc and glibc's:
     * 4 + 19.4, 24). The shader adds exp's 3 + 2|g - z^2| (<= 13) and the division's 2.5: 38 */
    case TIDE_OP_GELU: *ulps = vk && !f64 ? 38 : f64 ? 24 : 35; break;
    case TIDE_OP_DIV:
    case TIDE_OP_RECIPROCAL: *ulps = vk ? 3 : 0; break;
    case TIDE_OP_SQRT: *ulps = vk ? 6 : 0; break;
    case TIDE_OP_RANDOM: *ulps = 2; break; /* normal: the same libm calls on the CPU */
    /* attention: scores |s| <= 2 and O(1) values through exp and sums of <= 7 terms in other
     * orders (ref: whole rows in double; CPU: blocks, float32 in float32): a few ulps of the
     * largest term, which the absolute part covers where terms cancel */
    case TIDE_OP_SDPA:
    case TIDE_OP_SDPA_GRAD: *ulps = 64, *abs_ = f64 ? 1e-12 : 1e-4; break;
    case TIDE_OP_QLINEAR: *ulps = 0, *abs_ = 2e-3; break; /* q4_0: see build_quant */
    default: *ulps = 0; break;
    }
}

static double ulp_of(double v, tide_dtype dt)
{
    if (!isfinite(v))
        return 0;
    if (dt == TIDE_FLOAT32) {
        float f = fabsf((float)v);
        return (double)nextafterf(f, INFINITY) - (double)f;
    }
    return nextafter(fabs(v), INFINITY) - fabs(v);
}

static double get_f(const tide_tensor *t, int64_t i)
{
    const void *p = td_tensor_data(t);
    return t->dtype == TIDE_FLOAT32 ? ((const float *)p)[i] : ((const double *)p)[i];
}

/* Whether element i of got and want agree under c's rule (mag: sum|terms| for TOL_SUMMED). */
static bool agree(const char *dev, const tcase *c, const tide_tensor *got, const tide_tensor *want,
                  const tide_tensor *mag, int64_t i, double *allowed)
{
    size_t es = td_dtype_sizes[got->dtype];
    const char *g = (const char *)td_tensor_data(got) + (size_t)i * es;
    const char *w = (const char *)td_tensor_data(want) + (size_t)i * es;
    *allowed = 0;
    if (memcmp(g, w, es) == 0)
        return true;
    if (got->dtype != TIDE_FLOAT32 && got->dtype != TIDE_FLOAT64)
        return false;
    double gv = get_f(got, i), wv = get_f(want, i);
    if (isnan(gv) && isnan(wv))
        return true; /* a NaN's payload is not part of any op's meaning */
    if (c->tol == TOL_EXACT || !isfinite(gv) || !isfinite(wv))
        return false;
    double u = got->dtype == TIDE_FLOAT32 ? 0x1p-24 : 0x1p-53, ulps, abs_;
    if (c->tol == TOL_SUMMED) {
        *allowed = 2.0 * (double)(c->terms + 3) * u * get_f(mag, i);
    } else {
        tolerance_ulps(dev, c->op, (tide_dtype)got->dtype, &ulps, &abs_);
        *allowed = ulps * ulp_of(wv, (tide_dtype)got->dtype) + abs_;
    }
    return fabs(gv - wv) <= *allowed;
}

static void compare(const char *dev, const tcase *c, const tide_tensor *got,
                    const tide_tensor *want, const tide_tensor *mag)
{
    bool same = got->ndim == want->ndim && got->dtype == want->dtype &&
                memcmp(got->shape, want->shape, sizeof(int64_t) * got->ndim) == 0;
    CHECK(same, "%s: %s on %s: result shape or dtype differs from ref's", tide_op_name(c->op),
          c->what, dev);
    if (!same)
        return;
    int64_t n = numel_of(got->ndim, got->shape), bad = 0, first = -1;
    double first_allowed = 0;
    for (int64_t i = 0; i < n; i++) {
        double allowed;
        if (!agree(dev, c, got, want, mag, i, &allowed) && bad++ == 0) {
            first = i;
            first_allowed = allowed;
        }
    }
    bool is_float = got->dtype == TIDE_FLOAT32 || got->dtype == TIDE_FLOAT64;
    CHECK(bad == 0, "%s: %s on %s vs ref: %lld of %lld elements differ; first at %lld: %.17g vs "
          "%.17g (allowed %.3g)", tide_op_name(c->op), c->what, dev, (long long)bad,
          (long long)n, (long long)first, is_float && first >= 0 ? get_f(got, first) : 0.0,
          is_float && first >= 0 ? get_f(want, first) : 0.0, first_allowed);
}

/* Runs c on ref, then on each other device, and compares. */
static void check_case(const tcase *c, const char *const *devices, int ndevices)
{
    tide_tensor *want = run_case("ref", c, false);
    CHECK(want != NULL, "%s: %s: ref failed: %s", tide_op_name(c->op), c->what,
          tide_last_error());
    if (!want)
        return;
    tide_tensor *mag = c->tol == TOL_SUMMED ? run_case("ref", c, true) : NULL;
    for (int d = 0; d < ndevices; d++) {
        tide_tensor *got = run_case(devices[d], c, false);
        CHECK(got != NULL, "%s: %s on %s failed: %s", tide_op_name(c->op), c->what, devices[d],
              tide_last_error());
        if (got)
            compare(devices[d], c, got, want, mag);
        tide_release(got);
    }
    tide_release(want);
    tide_release(mag);
}

/* ---- the cases: one builder per kind of op ------------------------------------------------
 * build_*(op, v, c) fills c with variant v of op: 1, or 0 to skip v (a duplicate), or -1 when
 * v is past the last variant. Variants are numbered in mixed radix (digit()). */

#define SHAPE(...) ((const int64_t[]){__VA_ARGS__})
static const tide_dtype all_dtypes[] = {TIDE_FLOAT32, TIDE_FLOAT64, TIDE_INT32,
                                        TIDE_INT64,   TIDE_UINT8,   TIDE_BOOL};

/* The next digit of v in base n. */
static int digit(int *v, int n)
{
    int d = *v % n;
    *v /= n;
    return d;
}

static bool is_float(tide_dtype dt) { return dt == TIDE_FLOAT32 || dt == TIDE_FLOAT64; }

/* Under valgrind (scripts/test.sh) the large variants are left out: ref's loops run ~50x
 * slower there, and the small ones already reach every line of ref's kernels. */
static bool skip_large(void) { return RUNNING_ON_VALGRIND; }

static operand mk(tide_dtype dt, int layout, int nd, const int64_t *shape)
{
    operand o = {.dt = dt, .nd = nd, .layout = layout % NLAYOUTS};
    for (int d = 0; d < nd; d++)
        o.shape[d] = shape[d];
    o.lo = is_float(dt) ? -3 : dt == TIDE_UINT8 ? 0 : -20;
    o.hi = is_float(dt) ? 3 : dt == TIDE_UINT8 ? 255 : 20;
    return o;
}

static operand mk_index(tide_dtype dt, int layout, int nd, const int64_t *shape, int64_t bound)
{
    operand o = mk(dt, layout, nd, shape);
    o.lo = 0;
    o.hi = (double)(bound - 1);
    o.index = true;
    return o;
}

static void set_out(tcase *c, tide_dtype dt, int nd, const int64_t *shape)
{
    c->out_dt = dt;
    c->out_nd = nd;
    for (int d = 0; d < nd; d++)
        c->out_shape[d] = shape[d];
}

static void set_ints(tcase *c, int n, const int64_t *ints)
{
    c->attrs.nints = n;
    for (int i = 0; i < n; i++)
        c->attrs.ints[i] = ints[i];
}

static void describe(tcase *c, tide_dtype dt, int layout, const char *more)
{
    snprintf(c->what, sizeof c->what, "%s %s%s%s", tide_dtype_name(dt),
             layout < NLAYOUTS ? layout_names[layout] : "0-dim", *more ? ", " : "", more);
}

static bool float_only_unary(tide_op op)
{
    return op != TIDE_OP_NEG && op != TIDE_OP_ABS && op != TIDE_OP_RELU && op != TIDE_OP_SIGN &&
           op != TIDE_OP_LOGICAL_NOT;
}

/* exp, log, sin, cos, tanh, sigmoid, sqrt, rsqrt: no special values (their meaning at inf and
 * NaN is checked by the devices' own tests); the others take NaN, inf, ties, -0. */
static bool smooth_unary(tide_op op)
{
    return op >= TIDE_OP_EXP && op <= TIDE_OP_SIGMOID;
}

static int build_unary(tide_op op, int v, tcase *c)
{
    int ndt = float_only_unary(op) ? 2 : op == TIDE_OP_LOGICAL_NOT ? 6 : 5;
    tide_dtype dt = all_dtypes[digit(&v, ndt)];
    int layout = digit(&v, NLAYOUTS + 1), large = digit(&v, 2); /* NLAYOUTS: 0-dim */
    if (v)
        return -1;
    if (large && (layout == NLAYOUTS || layout == BCAST || skip_large()))
        return 0;
    /* large: 70000 elements, past the CPU's threading threshold and into its tiled path for
     * transposed operands */
    operand x = layout == NLAYOUTS ? mk(dt, CONTIG, 0, NULL)
                : large            ? mk(dt, layout, 2, SHAPE(200, 350))
                                   : mk(dt, layout, 2, SHAPE(3, 5));
    if (op == TIDE_OP_LOG || op == TIDE_OP_SQRT || op == TIDE_OP_RSQRT || op == TIDE_OP_LOG2)
        x.lo = 0.1, x.hi = 4;
    if (op == TIDE_OP_LOG1P)
        x.lo = -0.9, x.hi = 4;
    if (op == TIDE_OP_ASIN || op == TIDE_OP_ACOS)
        x.lo = -1, x.hi = 1;
    if (op == TIDE_OP_TAN) /* away from the poles; the shader's reduction (as sin's) is for
                            * moderate |x|, so no huge special values either */
        x.lo = -1.4, x.hi = 1.4;
    x.special = !smooth_unary(op) && op != TIDE_OP_TAN;
    c->nin = 1;
    c->in[0] = x;
    set_out(c, op == TIDE_OP_LOGICAL_NOT ? TIDE_BOOL : dt, x.nd, x.shape);
    c->tol = TOL_ULPS;
    describe(c, dt, layout, large ? "[200,350]" : "");
    return 1;
}

static bool is_logic(tide_op op) { return op >= TIDE_OP_EQ && op <= TIDE_OP_LOGICAL_OR; }

static int binary_dtype_count(tide_op op)
{
    if (op == TIDE_OP_DIV || op == TIDE_OP_ATAN2)
        return 2;
    return op == TIDE_OP_SUB || op == TIDE_OP_POW || op == TIDE_OP_FLOOR_DIVIDE ||
                   op == TIDE_OP_REMAINDER || op == TIDE_OP_FMOD
               ? 5
               : 6;
}

/* Value ranges: pow's base and exponent kept where float32 stays exact enough to compare;
 * division away from 0; comparisons and max/min on whole numbers, so ties happen. */
static void binary_domains(tide_op op, operand *a, operand *b)
{
    bool fl = is_float(a->dt);
    if (op == TIDE_OP_POW) {
        a->lo = fl ? 0.1 : a->dt == TIDE_UINT8 ? 0 : -4;
        a->hi = fl ? 4 : a->dt == TIDE_UINT8 ? 255 : 4;
        b->lo = fl ? -2 : a->dt == TIDE_UINT8 ? 0 : -2;
        b->hi = fl ? 2 : a->dt == TIDE_UINT8 ? 7 : 6;
    } else if (op == TIDE_OP_DIV) {
        b->lo = 0.5;
    } else if (is_logic(op) || op == TIDE_OP_MAXIMUM || op == TIDE_OP_MINIMUM) {
        a->lo = b->lo = fl ? -3 : a->lo;
        a->hi = b->hi = fl ? 3 : a->dt == TIDE_UINT8 ? 4 : 3;
        a->special = b->special = fl; /* NaN, inf */
        a->integral = b->integral = true;
    } else if (op == TIDE_OP_ATAN2) {
        a->special = b->special = true; /* float only: zeros, infinities, NaN */
    } else if (op == TIDE_OP_FLOOR_DIVIDE || op == TIDE_OP_REMAINDER || op == TIDE_OP_FMOD) {
        /* negative operands on both sides, zero divisors (integers: 0), NaN and inf */
        a->lo = fl ? -8 : a->dt == TIDE_UINT8 ? 0 : -8;
        a->hi = fl ? 8 : a->dt == TIDE_UINT8 ? 255 : 8;
        b->lo = fl ? -3 : a->dt == TIDE_UINT8 ? 0 : -3;
        b->hi = fl ? 3 : a->dt == TIDE_UINT8 ? 9 : 3;
        a->special = b->special = fl;
    } else if (op == TIDE_OP_ADD || op == TIDE_OP_SUB || op == TIDE_OP_MUL) {
        a->special = b->special = fl;
    }
}

static int build_binary(tide_op op, int v, tcase *c)
{
    tide_dtype dt = all_dtypes[digit(&v, binary_dtype_count(op))];
    int layout = digit(&v, NLAYOUTS), form = digit(&v, 5);
    if (v)
        return -1;
    if ((form == 3 && layout != CONTIG) ||
        (form == 4 && ((layout != CONTIG && layout != TRANSPOSED) || skip_large())))
        return 0;
    static const char *const forms[] = {"same shape", "[2,3,4] with [3,1]", "with a 0-dim",
                                        "both 0-dim", "[200,350], the other transposed"};
    operand a = mk(dt, layout, 2, SHAPE(3, 5)), b = mk(dt, layout + 2, 2, SHAPE(3, 5));
    if (form == 4) { /* past the CPU's threading threshold; a transposed operand is tiled */
        a = mk(dt, layout, 2, SHAPE(200, 350));
        b = mk(dt, layout + 1, 2, SHAPE(200, 350));
    } else if (form == 1) {
        a = mk(dt, CONTIG, 3, SHAPE(2, 3, 4));
        b = mk(dt, layout, 2, SHAPE(3, 1));
    } else if (form >= 2) {
        b = mk(dt, CONTIG, 0, NULL);
        if (form == 3)
            a = b;
    }
    binary_domains(op, &a, &b);
    c->nin = 2;
    c->in[0] = a;
    c->in[1] = b;
    set_out(c, is_logic(op) ? TIDE_BOOL : dt, a.nd, a.shape);
    c->tol = TOL_ULPS;
    describe(c, dt, form == 3 ? NLAYOUTS : layout, forms[form]);
    return 1;
}

static int build_reduce(tide_op op, int v, tcase *c)
{
    tide_dtype dt = all_dtypes[digit(&v, 6)];
    int layout = digit(&v, NLAYOUTS), form = digit(&v, 7);
    if (v)
        return -1;
    bool sum_like = op == TIDE_OP_SUM || op == TIDE_OP_PROD;
    if ((form >= 3 && form <= 4 && layout != CONTIG) || (form == 3 && !sum_like))
        return 0; /* max/min of nothing is an error in ops/, never a kernel's input */
    if (form >= 5 && (op == TIDE_OP_PROD || layout == BCAST || layout == NEGATIVE || skip_large()))
        return 0; /* large: a product of 70000 values says nothing more */
    static const int64_t dims[7][3] = {{1}, {0, 2}, {0, 1, 2}, {0}, {0}, {1}, {0}};
    static const int ndims[7] = {1, 2, 3, 1, 0, 1, 1};
    static const char *const forms[] = {"dim 1", "dims 0, 2", "all dims", "empty dim 0",
                                        "0-dim", "large, dim 1", "large, dim 0"};
    /* large: 70400 elements, past the CPU's blocks of 2048 and its threading threshold */
    operand x = form == 3   ? mk(dt, layout, 2, SHAPE(0, 3))
                : form == 4 ? mk(dt, layout, 0, NULL)
                : form >= 5 ? mk(dt, layout, 2, SHAPE(64, 1100))
                            : mk(dt, layout, 3, SHAPE(3, 4, 5));
    if (op == TIDE_OP_PROD)
        x.lo = is_float(dt) ? -2 : x.lo, x.hi = is_float(dt) ? 2 : x.hi;
    x.special = !sum_like;
    int64_t shape[TIDE_MAX_DIMS], terms = 1;
    memcpy(shape, x.shape, sizeof shape);
    for (int k = 0; k < ndims[form]; k++) {
        c->attrs.ints[k] = dims[form][k];
        terms *= shape[c->attrs.ints[k]];
        shape[c->attrs.ints[k]] = 1;
    }
    c->attrs.nints = ndims[form];
    c->nin = 1;
    c->in[0] = x;
    set_out(c, sum_like && !is_float(dt) ? TIDE_INT64 : dt, x.nd, shape);
    c->tol = sum_like ? TOL_SUMMED : TOL_EXACT;
    c->terms = terms;
    describe(c, dt, form == 4 ? NLAYOUTS : layout, forms[form]);
    return 1;
}

static int build_argreduce(tide_op op, int v, tcase *c)
{
    (void)op;
    tide_dtype dt = all_dtypes[digit(&v, 6)];
    int layout = digit(&v, NLAYOUTS), dim = digit(&v, 3);
    if (v)
        return -1;
    operand x = mk(dt, layout, 3, SHAPE(3, 4, 5));
    x.special = true; /* NaN: the first one wins */
    x.integral = true;
    if (!is_float(dt))
        x.lo = dt == TIDE_UINT8 ? 0 : -3, x.hi = 3; /* ties: the first one wins */
    int64_t shape[3] = {3, 4, 5};
    shape[dim] = 1;
    set_ints(c, 1, SHAPE(dim));
    c->nin = 1;
    c->in[0] = x;
    set_out(c, TIDE_INT64, 3, shape);
    c->tol = TOL_EXACT;
    char more[32];
    snprintf(more, sizeof more, "dim %d", dim);
    describe(c, dt, layout, more);
    return 1;
}

static int build_where(int v, tcase *c)
{
    tide_dtype dt = all_dtypes[digit(&v, 6)];
    int layout = digit(&v, NLAYOUTS), form = digit(&v, 2);
    if (v)
        return -1;
    c->nin = 3;
    if (form == 0) {
        c->in[0] = mk(TIDE_BOOL, layout, 2, SHAPE(3, 5));
        c->in[1] = mk(dt, layout + 1, 2, SHAPE(3, 5));
        c->in[2] = mk(dt, layout + 3, 2, SHAPE(3, 5));
    } else {
        c->in[0] = mk(TIDE_BOOL, layout, 2, SHAPE(3, 1));
        c->in[1] = mk(dt, layout, 1, SHAPE(5));
        c->in[2] = mk(dt, CONTIG, 0, NULL);
    }
    c->in[1].special = c->in[2].special = true;
    set_out(c, dt, 2, SHAPE(3, 5));
    c->tol = TOL_EXACT;
    describe(c, dt, layout, form ? "broadcast [3,1], [5], 0-dim" : "");
    return 1;
}

/* Casts from every dtype to every dtype: values past the integer ranges, NaN, inf, ties. */
static int build_cast(int v, tcase *c)
{
    tide_dtype src = all_dtypes[digit(&v, 6)], dst = all_dtypes[digit(&v, 6)];
    int layout = digit(&v, NLAYOUTS);
    if (v)
        return -1;
    operand x = mk(src, layout, 2, SHAPE(3, 5));
    x.special = true;
    x.lo = is_float(src) ? -300 : src == TIDE_INT64 ? -1e12 : src == TIDE_INT32 ? -1000 : x.lo;
    x.hi = is_float(src) ? 300 : src == TIDE_INT64 ? 1e12 : src == TIDE_INT32 ? 1000 : x.hi;
    c->nin = 1;
    c->in[0] = x;
    set_out(c, dst, 2, SHAPE(3, 5));
    c->tol = TOL_EXACT;
    char more[32];
    snprintf(more, sizeof more, "to %s", tide_dtype_name(dst));
    describe(c, src, layout, more);
    return 1;
}

/* Copies into a strided view of a prefilled buffer: every element outside the view must keep
 * its value. */
static int build_copy(int v, tcase *c)
{
    tide_dtype src = all_dtypes[digit(&v, 6)], dst = all_dtypes[digit(&v, 6)];
    int layout = digit(&v, NLAYOUTS), form = digit(&v, 2);
    if (v)
        return -1;
    operand x = form ? mk(src, layout, 1, SHAPE(5)) : mk(src, layout, 2, SHAPE(3, 5));
    x.special = true;
    c->nin = 1;
    c->in[0] = x;
    c->dst_view = true;
    c->dst = mk(dst, STRIDED, 2, SHAPE(3, 5));
    c->tol = TOL_EXACT;
    char more[64];
    snprintf(more, sizeof more, "into a strided %s view%s", tide_dtype_name(dst),
             form ? ", broadcast from [5]" : "");
    describe(c, src, layout, more);
    return 1;
}

static int build_fill(int v, tcase *c)
{
    static const double values[] = {2.75, -1.5, 300.7, NAN};
    tide_dtype dt = all_dtypes[digit(&v, 6)];
    int which = digit(&v, 4);
    if (v)
        return -1;
    c->dst_view = true;
    c->dst = mk(dt, STRIDED, 2, SHAPE(3, 5));
    c->attrs.values[0] = values[which];
    c->tol = TOL_EXACT;
    char more[64];
    snprintf(more, sizeof more, "value %g into a strided view", values[which]);
    describe(c, dt, CONTIG, more);
    return 1;
}

static int build_iota(int v, tcase *c)
{
    tide_dtype dt = all_dtypes[digit(&v, 6)];
    int symmetric = digit(&v, 2);
    if (v)
        return -1;
    c->attrs.values[0] = symmetric ? 0 : -3;
    c->attrs.values[1] = symmetric ? 0.25 : 0.7;
    c->attrs.values[2] = 2.5; /* linspace(0, 2.5, 11) */
    set_ints(c, 1, SHAPE(symmetric));
    set_out(c, dt, 1, SHAPE(11));
    c->tol = TOL_EXACT;
    describe(c, dt, CONTIG, symmetric ? "linspace" : "arange");
    return 1;
}

static int build_cat(int v, tcase *c)
{
    tide_dtype dt = all_dtypes[digit(&v, 6)];
    int layout = digit(&v, NLAYOUTS), dim = digit(&v, 2);
    if (v)
        return -1;
    c->nin = dim ? 4 : 3;
    if (dim == 0) {
        c->in[0] = mk(dt, layout, 2, SHAPE(2, 3));
        c->in[1] = mk(dt, layout + 1, 2, SHAPE(1, 3));
        c->in[2] = mk(dt, layout + 2, 2, SHAPE(4, 3));
        set_out(c, dt, 2, SHAPE(7, 3));
    } else { /* with an empty piece, and a 1-D empty tensor that takes no part */
        c->in[0] = mk(dt, layout, 2, SHAPE(3, 2));
        c->in[1] = mk(dt, layout, 2, SHAPE(3, 0));
        c->in[2] = mk(dt, CONTIG, 1, SHAPE(0));
        c->in[3] = mk(dt, layout + 1, 2, SHAPE(3, 1));
        set_out(c, dt, 2, SHAPE(3, 3));
    }
    set_ints(c, 1, SHAPE(dim));
    c->tol = TOL_EXACT;
    describe(c, dt, layout, dim ? "dim 1, with empty pieces" : "dim 0");
    return 1;
}

static int build_pad(int v, tcase *c)
{
    tide_dtype dt = all_dtypes[digit(&v, 6)];
    int layout = digit(&v, NLAYOUTS);
    if (v)
        return -1;
    c->nin = 1;
    c->in[0] = mk(dt, layout, 2, SHAPE(3, 4));
    set_ints(c, 4, SHAPE(1, 2, -1, 3)); /* dim 1 cropped by 1 in front */
    c->attrs.values[0] = 9.5;
    set_out(c, dt, 2, SHAPE(6, 6));
    c->tol = TOL_EXACT;
    describe(c, dt, layout, "pads (1, 2, -1, 3)");
    return 1;
}

static int build_flip(int v, tcase *c)
{
    tide_dtype dt = all_dtypes[digit(&v, 6)];
    int layout = digit(&v, NLAYOUTS);
    if (v)
        return -1;
    c->nin = 1;
    c->in[0] = mk(dt, layout, 3, SHAPE(3, 4, 5));
    set_ints(c, 2, SHAPE(0, 2));
    set_out(c, dt, 3, SHAPE(3, 4, 5));
    c->tol = TOL_EXACT;
    describe(c, dt, layout, "dims 0, 2");
    return 1;
}

/* cumsum sees float32, float64 and int64 (ops/ casts the rest); CPU and ref both add in order
 * along the dim in double (wrapping int64), so they agree bitwise. */
static int build_cumsum(int v, tcase *c)
{
    static const tide_dtype dts[] = {TIDE_FLOAT32, TIDE_FLOAT64, TIDE_INT64};
    tide_dtype dt = dts[digit(&v, 3)];
    int layout = digit(&v, NLAYOUTS), form = digit(&v, 4);
    if (v)
        return -1;
    if (form == 3 && layout != CONTIG)
        return 0;
    static const char *const forms[] = {"dim 0", "dim 1", "dim 2", "0-dim"};
    c->nin = 1;
    c->in[0] = form == 3 ? mk(dt, CONTIG, 0, NULL) : mk(dt, layout, 3, SHAPE(3, 4, 5));
    set_ints(c, 1, SHAPE(form == 3 ? 0 : form));
    if (form == 3)
        set_out(c, dt, 0, NULL);
    else
        set_out(c, dt, 3, SHAPE(3, 4, 5));
    c->tol = TOL_EXACT;
    describe(c, dt, layout, forms[form]);
    return 1;
}

/* CUMSUM's other kinds (tide_scan_kind): products (float, int64: wrapping), logsumexps (floats),
 * the running max/min positions (every dtype but bool); special values (NaN, +-inf, ties) in
 * float inputs. The CPU computes each as ref does (in double, in order): exact, the
 * logsumexps within ulps (one libm log1p/exp per step on both). */
static int build_scan_kind(int v, tcase *c)
{
    static const int kinds[] = {TIDE_SCAN_PROD, TIDE_SCAN_LOGSUMEXP, TIDE_SCAN_ARGMAX,
                                TIDE_SCAN_ARGMIN};
    int kind = kinds[digit(&v, 4)];
    tide_dtype dt = all_dtypes[digit(&v, 5)];
    int layout = digit(&v, NLAYOUTS), dim = digit(&v, 3);
    if (v)
        return -1;
    bool fl = dt == TIDE_FLOAT32 || dt == TIDE_FLOAT64;
    if ((kind == TIDE_SCAN_PROD && !fl && dt != TIDE_INT64) || (kind == TIDE_SCAN_LOGSUMEXP && !fl))
        return 0;
    bool pick = kind == TIDE_SCAN_ARGMAX || kind == TIDE_SCAN_ARGMIN;
    c->nin = 1;
    c->in[0] = mk(dt, layout, 3, SHAPE(3, 4, 5));
    c->in[0].special = true;
    set_ints(c, 2, SHAPE(dim, kind));
    set_out(c, pick ? TIDE_INT64 : dt, 3, SHAPE(3, 4, 5));
    c->tol = kind == TIDE_SCAN_LOGSUMEXP ? TOL_ULPS : TOL_EXACT;
    static const char *const names[] = {"sum", "prod", "logsumexp", "argmax", "argmin"};
    describe(c, dt, layout, names[kind]);
    return 1;
}

/* SORT's positions: every dtype but bool (ops/ casts it to uint8), both directions, each dim;
 * special values (NaN, ties, -0.0 against 0.0) in float inputs: stable, NaN the largest. */
static int build_sort(int v, tcase *c)
{
    tide_dtype dt = all_dtypes[digit(&v, 5)];
    int layout = digit(&v, NLAYOUTS), dim = digit(&v, 3), descending = digit(&v, 2);
    if (v)
        return -1;
    c->nin = 1;
    c->in[0] = mk(dt, layout, 3, SHAPE(3, 4, 5));
    c->in[0].special = true;
    set_ints(c, 2, SHAPE(dim, descending));
    set_out(c, TIDE_INT64, 3, SHAPE(3, 4, 5));
    c->tol = TOL_EXACT;
    describe(c, dt, layout, descending ? "descending" : "ascending");
    return 1;
}

/* topk's positions: every dtype but bool, both orders, k of 0, some and all; special values
 * (NaN, ties) in float inputs come in through the operand's generator. */
static int build_topk(int v, tcase *c)
{
    tide_dtype dt = all_dtypes[digit(&v, 5)]; /* bool has no order */
    int layout = digit(&v, NLAYOUTS), form = digit(&v, 4), largest = digit(&v, 2);
    if (v)
        return -1;
    static const int64_t ks[4] = {2, 5, 0, 1};
    static const int dims[4] = {2, 2, 1, 0};
    int dim = dims[form];
    c->nin = 1;
    c->in[0] = mk(dt, layout, 3, SHAPE(3, 4, 5));
    c->in[0].special = true;
    int64_t shape[3] = {3, 4, 5};
    shape[dim] = ks[form];
    set_ints(c, 3, SHAPE(dim, ks[form], largest));
    set_out(c, TIDE_INT64, 3, shape);
    c->tol = TOL_EXACT;
    describe(c, dt, layout, largest ? "largest" : "smallest");
    return 1;
}

/* Quantized weights (core/quant.h), both formats: quantize and dequantize are core/quant.h's
 * block functions on every device (exact); qlinear differs from ref only in adding its blocks'
 * terms in float32. Weight bytes are kept in 0..59 so every float16 scale is finite and below
 * 0.9 (bytes 0x3b3b at most). q8_0's int8 values are then non-negative, so the |x| run gives
 * sum|terms| (TOL_SUMMED); q4_0's nibble - 8 has either sign, so its bound is absolute: three
 * terms of at most 0.9 * 3/127 * 32*8*127 (~700), each off by ~2 float32 roundings, in sums
 * of three: 2e-3. */
static int build_quant(tide_op op, int v, tcase *c)
{
    int fmt = digit(&v, 2);
    if (v)
        return -1;
    int64_t bb = fmt == 0 ? 34 : 18;
    if (op == TIDE_OP_QUANTIZE) {
        c->nin = 1;
        c->in[0] = mk(TIDE_FLOAT32, CONTIG, 2, SHAPE(5, 64));
        set_out(c, TIDE_UINT8, 2, SHAPE(5, 2 * bb));
    } else if (op == TIDE_OP_DEQUANTIZE) {
        c->nin = 1;
        c->in[0] = mk(TIDE_UINT8, CONTIG, 2, SHAPE(5, 2 * bb));
        set_out(c, TIDE_FLOAT32, 2, SHAPE(5, 64));
    } else {
        c->nin = 2;
        c->in[0] = mk(TIDE_FLOAT32, CONTIG, 2, SHAPE(3, 96));
        c->in[1] = mk(TIDE_UINT8, CONTIG, 2, SHAPE(7, 3 * bb));
        set_out(c, TIDE_FLOAT32, 2, SHAPE(3, 7));
    }
    for (int i = 0; i < c->nin; i++)
        if (c->in[i].dt == TIDE_UINT8)
            c->in[i].hi = 59;
    set_ints(c, 2, SHAPE(fmt, 64));
    c->tol = op != TIDE_OP_QLINEAR ? TOL_EXACT : fmt == 0 ? TOL_SUMMED : TOL_ULPS;
    c->terms = 3;
    describe(c, TIDE_FLOAT32, CONTIG, fmt == 0 ? "q8_0" : "q4_0");
    return 1;
}

/* Attention, float32/float64: plain (L != S, Ev != E), causal, and an additive mask in every
 * layout. q, k in [-1, 1] keep the scores small. SDPA_GRAD takes any packed (outputs and
 * logsumexps): both kernels read D = dO . O and the logsumexps from it. */
static int build_sdpa(tide_op op, int v, tcase *c)
{
    tide_dtype dt = digit(&v, 2) ? TIDE_FLOAT64 : TIDE_FLOAT32;
    int form = digit(&v, 3), layout = digit(&v, NLAYOUTS);
    if (v)
        return -1;
    if (form != 2 && layout != CONTIG)
        return 0;
    c->nin = 0;
    c->in[c->nin++] = mk(dt, CONTIG, 3, SHAPE(2, 5, 4));
    c->in[c->nin++] = mk(dt, CONTIG, 3, SHAPE(2, 7, 4));
    c->in[0].lo = c->in[1].lo = -1;
    c->in[0].hi = c->in[1].hi = 1;
    c->in[c->nin++] = mk(dt, CONTIG, 3, SHAPE(2, 7, 3));
    if (form == 2)
        c->in[c->nin++] = mk(dt, layout, 3, SHAPE(2, 5, 7));
    set_ints(c, 2, SHAPE(form == 1, form == 2));
    c->attrs.values[0] = 0.5;
    if (op == TIDE_OP_SDPA) {
        set_out(c, dt, 1, SHAPE(2 * 5 * 3 + 2 * 5));
    } else {
        c->in[c->nin++] = mk(dt, CONTIG, 1, SHAPE(2 * 5 * 3 + 2 * 5));
        c->in[c->nin++] = mk(dt, CONTIG, 3, SHAPE(2, 5, 3));
        set_out(c, dt, 1, SHAPE(2 * 5 * 4 + 2 * 7 * 4 + 2 * 7 * 3));
    }
    c->tol = TOL_ULPS;
    static const char *const forms[] = {"plain", "causal", "mask"};
    describe(c, dt, layout, forms[form]);
    return 1;
}

static int build_gather(int v, tcase *c)
{
    tide_dtype dt = all_dtypes[digit(&v, 6)];
    int layout = digit(&v, NLAYOUTS), form = digit(&v, 3);
    if (v)
        return -1;
    if (form == 2 && layout != CONTIG)
        return 0;
    c->nin = 2;
    c->in[0] = form == 2 ? mk(dt, CONTIG, 0, NULL) : mk(dt, layout, 2, SHAPE(4, 5));
    c->in[1] = form == 0   ? mk_index(TIDE_INT64, layout + 1, 2, SHAPE(3, 5), 4)
               : form == 1 ? mk_index(TIDE_INT32, layout + 2, 2, SHAPE(4, 2), 5)
                           : mk_index(TIDE_INT64, CONTIG, 0, NULL, 1);
    set_ints(c, 1, SHAPE(form == 1));
    set_out(c, dt, c->in[1].nd, c->in[1].shape);
    c->tol = TOL_EXACT;
    describe(c, dt, form == 2 ? NLAYOUTS : layout, form == 1 ? "dim 1, int32 index" : "dim 0");
    return 1;
}

static int build_scatter_add(int v, tcase *c)
{
    tide_dtype dt = all_dtypes[digit(&v, 6)];
    int layout = digit(&v, NLAYOUTS), dim = digit(&v, 2);
    if (v)
        return -1;
    c->nin = 3;
    c->in[0] = mk(dt, layout, 2, SHAPE(4, 5));
    if (dim == 0) {
        c->in[1] = mk_index(TIDE_INT64, layout + 1, 2, SHAPE(3, 5), 4);
        c->in[2] = mk(dt, layout + 2, 2, SHAPE(3, 5));
    } else {
        c->in[1] = mk_index(TIDE_INT32, layout + 2, 2, SHAPE(4, 3), 5);
        c->in[2] = mk(dt, layout + 3, 2, SHAPE(4, 3));
    }
    set_ints(c, 1, SHAPE(dim));
    set_out(c, dt, 2, SHAPE(4, 5));
    c->tol = TOL_SUMMED;
    c->terms = 4; /* x and at most 3 additions (the index's size along dim) */
    describe(c, dt, layout, dim ? "dim 1, int32 index" : "dim 0");
    return 1;
}

static int build_index_select(int v, tcase *c)
{
    tide_dtype dt = all_dtypes[digit(&v, 6)];
    int layout = digit(&v, NLAYOUTS), form = digit(&v, 3);
    if (v)
        return -1;
    c->nin = 2;
    c->in[0] = mk(dt, layout, 2, SHAPE(4, 5));
    c->in[1] = form == 0   ? mk_index(TIDE_INT64, layout + 1, 1, SHAPE(6), 4)
               : form == 1 ? mk_index(TIDE_INT32, layout + 4, 1, SHAPE(3), 5)
                           : mk_index(TIDE_INT64, CONTIG, 0, NULL, 4);
    set_ints(c, 1, SHAPE(form == 1));
    set_out(c, dt, 2, form == 0 ? SHAPE(6, 5) : form == 1 ? SHAPE(4, 3) : SHAPE(1, 5));
    c->tol = TOL_EXACT;
    describe(c, dt, layout, form == 1 ? "dim 1, int32 index" : form ? "0-dim index" : "dim 0");
    return 1;
}

static int build_matmul(int v, tcase *c)
{
    tide_dtype dt = all_dtypes[digit(&v, 5)];
    int layout = digit(&v, NLAYOUTS), form = digit(&v, 4);
    if (v)
        return -1;
    if (form == 3 && skip_large())
        return 0;
    c->nin = 2;
    if (form == 3) { /* large enough for BLAS's blocking and the CPU's threads */
        c->in[0] = mk(dt, layout, 2, SHAPE(67, 130));
        c->in[1] = mk(dt, layout + 1, 2, SHAPE(130, 45));
        set_out(c, dt, 2, SHAPE(67, 45));
    } else if (form == 0) {
        c->in[0] = mk(dt, layout, 2, SHAPE(3, 4));
        c->in[1] = mk(dt, layout + 1, 2, SHAPE(4, 5));
        set_out(c, dt, 2, SHAPE(3, 5));
    } else if (form == 1) { /* batch dims broadcast: b's size-1 batch repeats */
        c->in[0] = mk(dt, layout, 3, SHAPE(2, 3, 4));
        c->in[1] = mk(dt, layout + 1, 3, SHAPE(1, 4, 5));
        set_out(c, dt, 3, SHAPE(2, 3, 5));
    } else {
        c->in[0] = mk(dt, layout, 2, SHAPE(3, 0));
        c->in[1] = mk(dt, layout + 1, 2, SHAPE(0, 5));
        set_out(c, dt, 2, SHAPE(3, 5));
    }
    for (int i = 0; i < 2 && !is_float(dt); i++)
        c->in[i].lo = dt == TIDE_UINT8 ? 0 : -5, c->in[i].hi = dt == TIDE_UINT8 ? 20 : 5;
    c->tol = TOL_SUMMED;
    c->terms = form == 2 ? 0 : form == 3 ? 130 : 4;
    static const char *const forms[] = {"", "batched, broadcast", "K = 0", "[67,130] @ [130,45]"};
    describe(c, dt, layout, forms[form]);
    return 1;
}

/* x float32 [M, K] @ w [N, K]^T, w float16 or bfloat16: one row (the register kernel, K and N
 * with tails past 16 and 4), a few rows, K = 0, and enough rows for the widened panels + sgemm. */
static int build_linear_half(int v, tcase *c)
{
    tide_dtype wdt = digit(&v, 2) ? TIDE_BFLOAT16 : TIDE_FLOAT16;
    int layout = digit(&v, NLAYOUTS), form = digit(&v, 4);
    if (v)
        return -1;
    if (form == 3 && skip_large())
        return 0;
    static const int64_t mnk[4][3] = {{1, 9, 37}, {3, 7, 20}, {3, 5, 0}, {67, 45, 130}};
    const int64_t *d = mnk[form];
    c->nin = 2;
    c->in[0] = mk(TIDE_FLOAT32, layout, 2, SHAPE(d[0], d[2]));
    c->in[1] = mk(wdt, layout + 1, 2, SHAPE(d[1], d[2]));
    set_out(c, TIDE_FLOAT32, 2, SHAPE(d[0], d[1]));
    c->tol = TOL_SUMMED;
    c->terms = d[2];
    static const char *const forms[] = {"[1,37] x [9,37]^T", "[3,20] x [7,20]^T", "K = 0",
                                        "[67,130] x [45,130]^T"};
    describe(c, wdt, layout, forms[form]);
    return 1;
}

/* Two geometries: grouped, strided, padded and dilated; and plain. */
typedef struct conv_geo {
    int64_t N, C, H, W, O, KH, KW, OH, OW, ints[7];
} conv_geo;
static const conv_geo conv_geos[2] = {
    {2, 4, 6, 5, 6, 3, 2, 3, 5, {2, 1, 1, 1, 1, 2, 2}},
    {1, 3, 5, 5, 2, 3, 3, 3, 3, {1, 1, 0, 0, 1, 1, 1}},
};

static int build_conv(tide_op op, int v, tcase *c)
{
    tide_dtype dt = all_dtypes[digit(&v, 2)];
    int layout = digit(&v, NLAYOUTS);
    const conv_geo *g = &conv_geos[digit(&v, 2)];
    if (v)
        return -1;
    int64_t groups = g->ints[6], Cg = g->C / groups;
    operand x = mk(dt, layout, 4, SHAPE(g->N, g->C, g->H, g->W));
    operand w = mk(dt, layout + 1, 4, SHAPE(g->O, Cg, g->KH, g->KW));
    operand go = mk(dt, layout + 2, 4, SHAPE(g->N, g->O, g->OH, g->OW));
    c->nin = 2;
    if (op == TIDE_OP_CONV2D) {
        c->in[0] = x, c->in[1] = w;
        set_out(c, dt, 4, go.shape);
        c->terms = Cg * g->KH * g->KW;
    } else if (op == TIDE_OP_CONV2D_GRAD_INPUT) {
        c->in[0] = go, c->in[1] = w;
        set_out(c, dt, 4, x.shape);
        c->terms = g->O / groups * g->KH * g->KW;
    } else {
        c->in[0] = x, c->in[1] = go;
        set_out(c, dt, 4, w.shape);
        c->terms = g->N * g->OH * g->OW;
    }
    set_ints(c, 7, g->ints);
    c->tol = TOL_SUMMED;
    describe(c, dt, layout, g == conv_geos ? "groups 2, stride, pad, dilation" : "plain");
    return 1;
}

static int build_pool(tide_op op, int v, tcase *c)
{
    tide_dtype dt = all_dtypes[digit(&v, 2)];
    int layout = digit(&v, NLAYOUTS), include_pad = digit(&v, 2);
    if (v)
        return -1;
    bool avg = op == TIDE_OP_AVG_POOL2D || op == TIDE_OP_AVG_POOL2D_GRAD;
    if (!avg && include_pad)
        return 0;
    operand x = mk(dt, layout, 4, SHAPE(2, 3, 7, 6)), go = mk(dt, layout, 4, SHAPE(2, 3, 4, 4));
    x.special = !avg; /* max: NaN propagates, the last NaN gives the index */
    set_ints(c, 7, SHAPE(3, 2, 2, 2, 1, 1, include_pad));
    c->nin = 1;
    c->in[0] = op == TIDE_OP_AVG_POOL2D_GRAD ? go : x;
    if (op == TIDE_OP_AVG_POOL2D_GRAD)
        set_out(c, dt, 4, x.shape);
    else
        set_out(c, op == TIDE_OP_MAX_POOL2D_INDICES ? TIDE_INT64 : dt, 4, go.shape);
    c->tol = avg ? TOL_SUMMED : TOL_EXACT;
    c->terms = 3 * 2;
    describe(c, dt, layout, include_pad ? "k 3x2, stride 2, pad 1, count_include_pad"
                                        : "k 3x2, stride 2, pad 1");
    return 1;
}

static int build_random(int v, tcase *c)
{
    static const double ab[5][2] = {{0, 1}, {-2, 3}, {1, 2}, {-5, 7}, {-0x1p40, 0x1p41}};
    static const char *const names[] = {"uniform [0, 1)", "uniform [-2, 3)", "normal (1, 2)",
                                        "integers [-5, 7)", "integers [-2^40, 2^41)"};
    tide_dtype dt = all_dtypes[digit(&v, 6)];
    int form = digit(&v, 5);
    if (v)
        return -1;
    if ((form < 3 && !is_float(dt)) || (form == 4 && dt != TIDE_INT64 && dt != TIDE_FLOAT64))
        return 0;
    double a = ab[form][0], b = ab[form][1];
    if (form == 3 && (dt == TIDE_UINT8 || dt == TIDE_BOOL))
        a = 0, b = dt == TIDE_BOOL ? 2 : 256;
    set_ints(c, 3, SHAPE(form == 2 ? 1 : form >= 3 ? 2 : 0, 1234, 6));
    c->attrs.values[0] = a;
    c->attrs.values[1] = b;
    set_out(c, dt, 1, SHAPE(37));
    c->tol = form == 2 ? TOL_ULPS : TOL_EXACT;
    describe(c, dt, CONTIG, names[form]);
    return 1;
}

static bool is_view_op(tide_op op) { return op >= TIDE_OP_RESHAPE && op <= TIDE_OP_UNFOLD; }

/* Variant v of op; -1 past the last one (at once for an op this test does not know). */
static int build(tide_op op, int v, tcase *c)
{
    memset(c, 0, sizeof *c);
    c->op = op;
    if (tide_op_is_unary(op))
        return build_unary(op, v, c);
    if (tide_op_is_binary(op))
        return build_binary(op, v, c);
    switch (op) {
    case TIDE_OP_SUM: case TIDE_OP_PROD: case TIDE_OP_MAX: case TIDE_OP_MIN:
        return build_reduce(op, v, c);
    case TIDE_OP_ARGMAX: case TIDE_OP_ARGMIN: return build_argreduce(op, v, c);
    case TIDE_OP_WHERE: return build_where(v, c);
    case TIDE_OP_CAST: return build_cast(v, c);
    case TIDE_OP_COPY: return build_copy(v, c);
    case TIDE_OP_FILL: return build_fill(v, c);
    case TIDE_OP_IOTA: return build_iota(v, c);
    case TIDE_OP_CAT: return build_cat(v, c);
    case TIDE_OP_PAD: return build_pad(v, c);
    case TIDE_OP_FLIP: return build_flip(v, c);
    case TIDE_OP_GATHER: return build_gather(v, c);
    case TIDE_OP_SCATTER_ADD: return build_scatter_add(v, c);
    case TIDE_OP_INDEX_SELECT: return build_index_select(v, c);
    case TIDE_OP_MATMUL: return build_matmul(v, c);
    case TIDE_OP_LINEAR_HALF: return build_linear_half(v, c);
    case TIDE_OP_CONV2D: case TIDE_OP_CONV2D_GRAD_INPUT: case TIDE_OP_CONV2D_GRAD_WEIGHT:
        return build_conv(op, v, c);
    case TIDE_OP_MAX_POOL2D: case TIDE_OP_MAX_POOL2D_INDICES: case TIDE_OP_AVG_POOL2D:
    case TIDE_OP_AVG_POOL2D_GRAD:
        return build_pool(op, v, c);
    case TIDE_OP_RANDOM: return build_random(v, c);
    case TIDE_OP_CUMSUM: { /* the sums, then the other kinds */
        int sums = 3 * NLAYOUTS * 4;
        return v < sums ? build_cumsum(v, c) : build_scan_kind(v - sums, c);
    }
    case TIDE_OP_SORT: return build_sort(v, c);
    case TIDE_OP_TOPK: return build_topk(v, c);
    case TIDE_OP_SDPA:
    case TIDE_OP_SDPA_GRAD: return build_sdpa(op, v, c);
    case TIDE_OP_QUANTIZE: case TIDE_OP_DEQUANTIZE: case TIDE_OP_QLINEAR:
        return build_quant(op, v, c);
    default: return -1;
    }
}

/* Every primitive but the view ops and TO (the dispatcher copies between two devices for it: no
 * device's run sees it; test_device_create.c tests it), in every variant, on each device
 * against ref. */
static void test_all_primitives(const char *const *devices, int ndevices)
{
    for (int op = 0; op < TIDE_NUM_OPS; op++) {
        /* the collectives run in the dispatcher over distributed/, never on a device:
         * test_distributed.c checks them (alone and on two ranks) */
        if (is_view_op((tide_op)op) || op == TIDE_OP_TO || tide_op_is_collective((tide_op)op))
            continue;
        int ncases = 0;
        tcase c;
        for (int v = 0;; v++) {
            int r = build((tide_op)op, v, &c);
            if (r < 0)
                break;
            if (r == 0)
                continue;
            check_case(&c, devices, ndevices);
            ncases++;
        }
        CHECK(ncases > 0, "primitive %s has no case in test_ref_device.c: add one (and its "
              "kernel in devices/ref)", tide_op_name((tide_op)op));
    }
}

/* ---- view ops, the public API, errors, the jit ------------------------------------------- */

/* Whether a (any device) and b hold the same elements bitwise. */
static bool same_values(tide_tensor *a, tide_tensor *b)
{
    tide_tensor *ha = a ? tide_to(a, "cpu") : NULL, *hb = b ? tide_to(b, "cpu") : NULL;
    tide_tensor *ca = ha ? tide_contiguous(ha) : NULL, *cb = hb ? tide_contiguous(hb) : NULL;
    bool same = ca && cb && ca->ndim == cb->ndim && ca->dtype == cb->dtype &&
                memcmp(ca->shape, cb->shape, sizeof(int64_t) * ca->ndim) == 0 &&
                memcmp(td_tensor_data(ca), td_tensor_data(cb),
                       (size_t)numel_of(ca->ndim, ca->shape) * td_dtype_sizes[ca->dtype]) == 0;
    tide_release(ha), tide_release(hb), tide_release(ca), tide_release(cb);
    return same;
}

/* A view op of x through the public API (the dispatcher makes it without a kernel). */
static tide_tensor *apply_view(tide_op op, tide_tensor *x)
{
    switch (op) {
    case TIDE_OP_RESHAPE: return tide_reshape(x, 2, SHAPE(5, 12));
    case TIDE_OP_PERMUTE: return tide_permute(x, (const int[]){2, 0, 1});
    case TIDE_OP_EXPAND: {
        tide_tensor *s = tide_slice(x, 0, 0, 1, 1);
        tide_tensor *e = s ? tide_expand(s, 3, SHAPE(4, 4, 5)) : NULL;
        tide_release(s);
        return e;
    }
    case TIDE_OP_SLICE: return tide_slice(x, 2, 1, 5, 2);
    case TIDE_OP_SELECT: return tide_select(x, 1, 2);
    case TIDE_OP_DIAGONAL: return tide_diagonal(x, 1, 1, 2);
    case TIDE_OP_UNFOLD: return tide_unfold(x, 2, 2, 2);
    default: return NULL;
    }
}

static void test_view_ops(void)
{
    operand o = mk(TIDE_FLOAT32, CONTIG, 3, SHAPE(3, 4, 5));
    tide_tensor *xc = make_operand("cpu", &o, 42, false, NULL);
    tide_tensor *xr = make_operand("ref", &o, 42, false, NULL);
    for (int op = 0; op < TIDE_NUM_OPS; op++) {
        if (!is_view_op((tide_op)op))
            continue;
        tide_tensor *vc = apply_view((tide_op)op, xc), *vr = apply_view((tide_op)op, xr);
        CHECK(vc && vr, "view op %s has no case in test_ref_device.c, or failed: %s",
              tide_op_name((tide_op)op), tide_last_error());
        CHECK(!vr || strcmp(tide_device_name(vr), "ref") == 0, "%s of a ref tensor is on %s",
              tide_op_name((tide_op)op), vr ? tide_device_name(vr) : "-");
        /* contiguous() on ref runs ref's COPY over the view's strides */
        CHECK(vc && vr && same_values(vc, vr), "%s: ref's view differs from the CPU's",
              tide_op_name((tide_op)op));
        tide_release(vc);
        tide_release(vr);
    }
    tide_release(xc);
    tide_release(xr);
}

/* The public API on ref tensors: ops, empty tensors (the dispatcher runs no kernel), moving
 * between devices, and mixing devices as an error. */
static void test_public_api(void)
{
    operand o = mk(TIDE_FLOAT32, CONTIG, 2, SHAPE(3, 4));
    tide_tensor *xc = make_operand("cpu", &o, 7, false, NULL);
    tide_tensor *xr = tide_to(xc, "ref");
    CHECK(xr && strcmp(tide_device_name(xr), "ref") == 0, "tide_to(x, \"ref\"): %s",
          tide_last_error());
    tide_tensor *sc = tide_softmax(xc, 1), *sr = tide_softmax(xr, 1);
    tide_tensor *back = sr ? tide_to(sr, "cpu") : NULL;
    double err = -1;
    if (sc && back) {
        tide_tensor *d = tide_sub(sc, back), *a = d ? tide_abs(d) : NULL;
        tide_tensor *m = a ? tide_max(a, NULL, 0, false) : NULL;
        if (!m || tide_item(m, &err) < 0)
            err = -1;
        tide_release(d), tide_release(a), tide_release(m);
    }
    /* softmax of 4 values: exp (2 ulp), a sum of 4, a division: well within 16 float32 ulp */
    CHECK(err >= 0 && err <= 16 * 0x1p-24, "softmax on ref vs cpu: max error %g (%s)", err,
          tide_last_error());
    tide_release(sc), tide_release(sr), tide_release(back);

    tide_tensor *e = tide_zeros(2, SHAPE(0, 4), TIDE_FLOAT32);
    tide_tensor *er = e ? tide_to(e, "ref") : NULL, *s = er ? tide_add(er, er) : NULL;
    CHECK(s && tide_numel(s) == 0 && strcmp(tide_device_name(s), "ref") == 0,
          "an empty add on ref: %s", tide_last_error());
    tide_release(e), tide_release(er), tide_release(s);

    tide_tensor *mixed = tide_add(xc, xr);
    CHECK(mixed == NULL && strstr(tide_last_error(), "ref"),
          "adding a cpu and a ref tensor should be an error naming the devices: %s",
          tide_last_error());
    tide_release(mixed);
    tide_release(xc);
    tide_release(xr);
}

/* A dtype the ref device has no kernel for is an error naming the op, and so is an op it has
 * no kernel for (view ops never reach a device). */
static void test_errors(void)
{
    tide_device *ref = td_device_find("test_ref_device", "ref");
    tcase c;
    build(TIDE_OP_ADD, 0, &c);
    c.op = TIDE_OP_DIV;
    c.in[0].dt = c.in[1].dt = c.out_dt = TIDE_INT32;
    CHECK(run_case("ref", &c, false) == NULL && strstr(tide_last_error(), "div") &&
              strstr(tide_last_error(), "int32"),
          "div on int32 directly on ref: \"%s\"", tide_last_error());
    tide_tensor *x = tide_zeros(1, SHAPE(3), TIDE_FLOAT32), *xr = x ? tide_to(x, "ref") : NULL;
    tide_attrs a = {.nints = 0};
    tide_tensor *in[1] = {xr};
    CHECK(xr && ref->run(ref, TIDE_OP_RESHAPE, xr, in, 1, &a) < 0 &&
              strstr(tide_last_error(), "reshape"),
          "a view op run on ref: \"%s\"", tide_last_error());
    tide_release(x);
    tide_release(xr);
}

/* The jit with tensors on ref: the tracer records its ops and the device interprets the fusion
 * groups (devices/ref/ref_jit.c; tests/test_ref_jit.c runs many programs). Values must equal
 * eager ones bitwise (the same per-element functions run). A C capture on ref replays on new ref
 * inputs with eager's values; a capture mixing devices, and a replay on another device's
 * input, are errors naming both devices. */
static void test_jit(void)
{
    operand o = mk(TIDE_FLOAT32, CONTIG, 2, SHAPE(4, 6));
    tide_tensor *xr = make_operand("ref", &o, 9, false, NULL);
    tide_tensor *eager = NULL, *traced = NULL;
    for (int pass = 0; pass < 2; pass++) {
        tide_jit_stats stats;
        memset(&stats, 0, sizeof stats);
        if (pass == 1)
            CHECK(tide_jit_trace_begin(&stats, NULL, NULL) == 0, "trace begin: %s",
                  tide_last_error());
        tide_tensor *t = tide_tanh(xr), *u = t ? tide_mul(t, xr) : NULL;
        tide_tensor *r = u ? tide_sum(u, (const int[]){1}, 1, false) : NULL;
        if (pass == 1) {
            CHECK(tide_jit_trace_end() == 0, "trace end: %s", tide_last_error());
            CHECK(stats.compiles == 1 && stats.breaks == 0,
                  "the jit compiled %lld plans of ref ops with %lld breaks",
                  (long long)stats.compiles, (long long)stats.breaks);
            printf("trace of 3 ops on ref: %lld compiles, %lld graph breaks\n",
                   (long long)stats.compiles, (long long)stats.breaks);
        }
        CHECK(r != NULL, "jit pass %d on ref: %s", pass, tide_last_error());
        tide_release(t), tide_release(u);
        if (pass == 0)
            eager = r;
        else
            traced = r;
    }
    CHECK(eager && traced && strcmp(tide_device_name(traced), "ref") == 0 &&
              same_values(eager, traced),
          "a traced chain on ref differs from eager");
    tide_release(eager), tide_release(traced);

    tide_tensor *in[1] = {xr};
    CHECK(tide_jit_begin(in, 1) == 0, "capture begin: %s", tide_last_error());
    tide_tensor *y = tide_exp(xr);
    tide_graph *g = tide_jit_end(&y, y ? 1 : 0);
    CHECK(y && g, "capture of exp on ref: %s", tide_last_error());
    tide_tensor *x2 = make_operand("ref", &o, 10, false, NULL), *want = x2 ? tide_exp(x2) : NULL;
    tide_tensor *in2[1] = {x2}, *got = NULL;
    CHECK(g && tide_graph_run(g, in2, 1, &got) == 0 && got && want && same_values(got, want) &&
              strcmp(tide_device_name(got), "ref") == 0,
          "a replay on ref differs from eager: %s", tide_last_error());
    tide_tensor *xc = make_operand("cpu", &o, 10, false, NULL), *in3[1] = {xc}, *bad = NULL;
    CHECK(g && tide_graph_run(g, in3, 1, &bad) < 0 && strstr(tide_last_error(), "on cpu") &&
              strstr(tide_last_error(), "on ref"),
          "a replay on a cpu input: %s", tide_last_error());
    tide_graph_free(g);
    tide_release(y), tide_release(got), tide_release(want), tide_release(x2);
    /* one capture, two devices: refused at the op that changes device */
    tide_tensor *in4[2] = {xr, xc};
    CHECK(tide_jit_begin(in4, 2) == 0, "capture begin: %s", tide_last_error());
    tide_tensor *a = tide_exp(xr), *b = tide_exp(xc);
    CHECK(a && !b && strstr(tide_last_error(), "one device") &&
              strstr(tide_last_error(), "cpu") && strstr(tide_last_error(), "ref"),
          "a capture over ref and cpu: %s", tide_last_error());
    tide_graph *g2 = tide_jit_end(&a, a ? 1 : 0);
    tide_graph_free(g2);
    tide_release(a), tide_release(b), tide_release(xc);
    tide_release(xr);
}

int main(void)
{
    const char *devices[2] = {"cpu"};
    int ndevices = 1;
    char why[512];
    /* under valgrind lavapipe compiles and runs shaders ~50x slower: test_vulkan covers it */
    if (RUNNING_ON_VALGRIND)
        printf("under valgrind: cpu against ref only\n");
    else if (tide_vulkan_available(why, sizeof why))
        devices[ndevices++] = "vulkan";
    else
        printf("no Vulkan device (%s): cpu against ref only\n", why);
    printf("comparing %s%s against ref\n", devices[0], ndevices > 1 ? " and vulkan" : "");
    test_all_primitives(devices, ndevices);
    test_view_ops();
    test_public_api();
    test_errors();
    test_jit();
    return test_summary("test_ref_device");
}
