/*
 * test_vulkan.c — the op suite on the Vulkan device against the CPU's results (which the other
 * test programs check against double-precision references), plus a few direct references:
 * transfers of every dtype, every elementwise primitive on contiguous, transposed, sliced and
 * broadcast operands, casts, copies into views, fills, reductions (short, long and split ones),
 * argmax/argmin, matmul shapes, the ops that fall back to the CPU, device-mixing errors.
 *
 * Every dispatch is split over two grid dimensions here: TIDE_VULKAN_MAX_GROUPS=64 is set before
 * the device opens, as if the limit of 65535 workgroups per dimension were 64.
 * With no Vulkan (no loader, no driver, no device) it prints why, checks that asking for
 * "vulkan" is a clear error and that the CPU still works, and passes. TIDE_TEST_EXPECT_VULKAN=0
 * (set by ctest for the run with a bogus VK_DRIVER_FILES) makes that the expected outcome.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tide.h"
#include "test_ref.h"
#include "test_util.h"

/* Under valgrind (scripts/test.sh), lavapipe compiles and runs shaders ~50x slower: a subset
 * runs there (a few ops of each shader, contiguous and transposed operands, shorter long
 * reductions); the numerics are covered by the release and sanitizer runs. */
static bool quick;

static bool in_quick_set(const char *name)
{
    static const char *const keep[] = {"neg", "exp", "tanh", "logical_not", "add", "mul", "eq",
                                       "maximum", "sum", "max", NULL};
    if (!quick)
        return true;
    for (int i = 0; keep[i]; i++)
        if (strcmp(name, keep[i]) == 0)
            return true;
    return false;
}

enum { CONTIG, TRANSPOSED, SLICED, EXPANDED, NLAYOUTS };
static const char *const layout_names[] = {"contiguous", "transposed", "sliced", "expanded"};

/* ---- making operands on both devices ------------------------------------------------------- */

typedef struct pair {
    tide_tensor *c, *v; /* the same values on the CPU and on Vulkan, in the same layout */
} pair;

static void pair_release(pair *p)
{
    tide_release(p->c);
    tide_release(p->v);
    p->c = p->v = NULL;
}

static tide_tensor *apply_layout(tide_tensor *base, int layout, int nd, const int64_t *shape)
{
    if (!base)
        return NULL;
    if (layout == TRANSPOSED) {
        int perm[TIDE_MAX_DIMS];
        for (int d = 0; d < nd; d++)
            perm[d] = nd - 1 - d;
        return tide_permute(base, perm);
    }
    if (layout == SLICED)
        return tide_slice(base, nd - 1, 1, 2 * shape[nd - 1] + 1, 2);
    if (layout == EXPANDED)
        return tide_expand(base, nd, shape);
    return tide_retain(base);
}

/* vals: row-major values of the logical shape. */
static pair make_pair(const double *vals, int nd, const int64_t *shape, tide_dtype dt, int layout)
{
    if ((layout == TRANSPOSED && nd < 2) || (layout != CONTIG && nd < 1))
        layout = CONTIG;
    int64_t n = ref_numel(nd, shape), bshape[TIDE_MAX_DIMS];
    memcpy(bshape, shape, sizeof(int64_t) * (size_t)nd);
    int64_t bn = n;
    double *bv;
    if (layout == TRANSPOSED) {
        for (int d = 0; d < nd; d++)
            bshape[d] = shape[nd - 1 - d];
        bv = malloc((size_t)(n ? n : 1) * sizeof *bv);
        int64_t idx[TIDE_MAX_DIMS] = {0}, pidx[TIDE_MAX_DIMS];
        if (n > 0)
            do {
                for (int d = 0; d < nd; d++)
                    pidx[d] = idx[nd - 1 - d];
                bv[ref_flat(nd, bshape, pidx)] = vals[ref_flat(nd, shape, idx)];
            } while (ref_next_index(nd, shape, idx));
    } else if (layout == SLICED) {
        bshape[nd - 1] = 2 * shape[nd - 1] + 1;
        bn = ref_numel(nd, bshape);
        bv = malloc((size_t)(bn ? bn : 1) * sizeof *bv);
        for (int64_t i = 0; i < bn; i++)
            bv[i] = 7;
        int64_t idx[TIDE_MAX_DIMS] = {0}, bidx[TIDE_MAX_DIMS];
        if (n > 0)
            do {
                memcpy(bidx, idx, sizeof(int64_t) * (size_t)nd);
                bidx[nd - 1] = 2 * idx[nd - 1] + 1;
                bv[ref_flat(nd, bshape, bidx)] = vals[ref_flat(nd, shape, idx)];
            } while (ref_next_index(nd, shape, idx));
    } else if (layout == EXPANDED) {
        bshape[0] = 1;
        bn = ref_numel(nd, bshape);
        bv = malloc((size_t)(bn ? bn : 1) * sizeof *bv);
        for (int64_t i = 0; i < bn; i++)
            bv[i] = n ? vals[i] : 0;
    } else {
        bv = malloc((size_t)(n ? n : 1) * sizeof *bv);
        memcpy(bv, vals, (size_t)n * sizeof *bv);
    }
    tide_tensor *base = ref_from_doubles(bv, nd, bshape, dt);
    free(bv);
    tide_tensor *vbase = base ? tide_to(base, "vulkan") : NULL;
    pair p = {apply_layout(base, layout, nd, shape), apply_layout(vbase, layout, nd, shape)};
    tide_release(base);
    tide_release(vbase);
    return p;
}

static double gen(tide_dtype dt, int kind)
{
    double u = ref_uniform();
    switch (dt) {
    case TIDE_BOOL: return u < 0.5;
    case TIDE_UINT8: return (double)(int)(u * 256);
    case TIDE_INT32: case TIDE_INT64: return (double)((int)(u * 201) - 100);
    default:
        if (kind == 1) /* positive domain */
            return 0.05 + 4 * u;
        if (kind == 2) /* near 1, for products */
            return 0.9 + 0.2 * u;
        return -3 + 6 * u;
    }
}

static pair random_pair(int nd, const int64_t *shape, tide_dtype dt, int layout, int kind)
{
    int64_t n = ref_numel(nd, shape);
    double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = gen(dt, kind);
    /* a few values with exact halves, zeros and negative zeros, for round/sign/floor */
    if (dt == TIDE_FLOAT32 && kind == 0)
        for (int64_t i = 0; i + 4 < n; i += 37) {
            v[i] = 2.5;
            v[i + 1] = -0.0;
            v[i + 2] = -1.5;
        }
    pair p = make_pair(v, nd, shape, dt, layout);
    free(v);
    return p;
}

/* ---- comparing ------------------------------------------------------------------------------ */

static void compare(const char *what, tide_tensor *c, tide_tensor *v, double rtol, double atol)
{
    if (!c) {
        CHECK(!v, "%s: the CPU failed (%s) but Vulkan gave a tensor", what, tide_last_error());
        tide_release(v);
        return;
    }
    CHECK(v, "%s: Vulkan failed: %s", what, tide_last_error());
    if (!v) {
        tide_release(c);
        return;
    }
    CHECK(strcmp(tide_device_name(v), "vulkan") == 0, "%s: result on %s", what,
          tide_device_name(v));
    CHECK(tide_get_dtype(c) == tide_get_dtype(v), "%s: dtype %s on Vulkan, %s on the CPU", what,
          tide_dtype_name(tide_get_dtype(v)), tide_dtype_name(tide_get_dtype(c)));
    CHECK(ref_same_shape(v, tide_ndim(c), tide_shape(c)), "%s: shape %s on Vulkan", what,
          ref_tensor_shape_str(v));
    tide_tensor *h = tide_to(v, "cpu");
    double *want = ref_read(c), *got = ref_read(h);
    CHECK(want && got, "%s: reading back failed: %s", what, tide_last_error());
    if (want && got && ref_same_shape(v, tide_ndim(c), tide_shape(c))) {
        int64_t bad = ref_mismatch(got, want, tide_numel(c), rtol, atol);
        CHECK(bad < 0, "%s: element %lld is %.9g on Vulkan, %.9g on the CPU", what,
              (long long)bad, bad >= 0 ? got[bad] : 0, bad >= 0 ? want[bad] : 0);
    }
    free(want);
    free(got);
    tide_release(h);
    tide_release(c);
    tide_release(v);
}

/* ---- transfers --------------------------------------------------------------------------- */

static const tide_dtype all_dtypes[] = {TIDE_FLOAT32, TIDE_FLOAT64, TIDE_INT32,
                                        TIDE_INT64,   TIDE_UINT8,   TIDE_BOOL};

static void test_transfers(void)
{
    const int64_t sizes[] = {0, 1, 3, 1000, 300000};
    for (int d = 0; d < 6; d++)
        for (int s = 0; s < 5; s++) {
            tide_dtype dt = all_dtypes[d];
            int64_t n = sizes[s];
            double *v = malloc((size_t)(n ? n : 1) * sizeof *v);
            for (int64_t i = 0; i < n; i++)
                v[i] = gen(dt, 0);
            tide_tensor *c = ref_from_doubles(v, 1, &n, dt);
            tide_tensor *g = tide_to(c, "vulkan");
            CHECK(g && strcmp(tide_device_name(g), "vulkan") == 0, "to vulkan %s [%lld]: %s",
                  tide_dtype_name(dt), (long long)n, tide_last_error());
            tide_tensor *back = g ? tide_to(g, "cpu") : NULL;
            double *got = ref_read(back), *exact = ref_read(c);
            CHECK(got && exact && ref_mismatch(got, exact, n, 0, 0) < 0, "round trip %s [%lld]",
                  tide_dtype_name(dt), (long long)n);
            free(exact);
            /* the same through tide_to_buffer straight from the device */
            size_t es = tide_dtype_size(dt);
            char *raw = malloc((size_t)(n ? n : 1) * es), *want = malloc((size_t)(n ? n : 1) * es);
            CHECK(g && tide_to_buffer(g, raw, (size_t)n * es) == 0 &&
                      tide_to_buffer(c, want, (size_t)n * es) == 0 &&
                      memcmp(raw, want, (size_t)n * es) == 0,
                  "to_buffer from vulkan %s [%lld]: %s", tide_dtype_name(dt), (long long)n,
                  tide_last_error());
            free(raw);
            free(want);
            free(got);
            free(v);
            tide_release(back);
            tide_release(g);
            tide_release(c);
        }
    /* a strided Vulkan view read back, item, and to() of a view */
    int64_t shape[2] = {37, 53};
    for (int layout = 0; layout < NLAYOUTS; layout++) {
        pair p = random_pair(2, shape, TIDE_FLOAT32, layout, 0);
        tide_tensor *c = tide_contiguous(p.c), *v = tide_contiguous(p.v);
        char what[80];
        snprintf(what, sizeof what, "contiguous of a %s view", layout_names[layout]);
        compare(what, c, v, 0, 0);
        tide_tensor *sel = tide_select(p.v, 0, 5), *one = sel ? tide_select(sel, 0, 7) : NULL;
        tide_tensor *csel = tide_select(p.c, 0, 5), *cone = csel ? tide_select(csel, 0, 7) : NULL;
        double a = 0, b = 1;
        CHECK(one && tide_item(one, &a) == 0 && tide_item(cone, &b) == 0 && a == b,
              "item of a %s Vulkan view: %g vs %g (%s)", layout_names[layout], a, b,
              tide_last_error());
        tide_release(one);
        tide_release(sel);
        tide_release(cone);
        tide_release(csel);
        pair_release(&p);
    }
}

/* ---- elementwise ------------------------------------------------------------------------------- */

typedef tide_tensor *(*unary_fn)(const tide_tensor *);
typedef tide_tensor *(*binary_fn)(const tide_tensor *, const tide_tensor *);

static const struct {
    const char *name;
    unary_fn fn;
    int kind; /* 1: positive inputs */
    bool transcendental;
} unaries[] = {
    {"neg", tide_neg, 0, false},          {"abs", tide_abs, 0, false},
    {"exp", tide_exp, 0, true},           {"log", tide_log, 1, true},
    {"sqrt", tide_sqrt, 1, true},         {"rsqrt", tide_rsqrt, 1, true},
    {"sin", tide_sin, 0, true},           {"cos", tide_cos, 0, true},
    {"tanh", tide_tanh, 0, true},         {"sigmoid", tide_sigmoid, 0, true},
    {"relu", tide_relu, 0, false},        {"floor", tide_floor, 0, false},
    {"ceil", tide_ceil, 0, false},        {"round", tide_round, 0, false},
    {"sign", tide_sign, 0, false},        {"reciprocal", tide_reciprocal, 1, true},
    {"logical_not", tide_logical_not, 0, false},
    {"erf", tide_erf, 0, true}, /* the shader: within 4 ulps (common.glsl) */
    /* issue 24's: within 15 ulps on lavapipe (tests/test_math_ulps.c), inside the 2e-5 */
    {"log1p", tide_log1p, 1, true},       {"expm1", tide_expm1, 0, true},
    {"log2", tide_log2, 1, true},         {"tan", tide_tan, 0, true},
    {"atan", tide_atan, 0, true},         {"sinh", tide_sinh, 0, true},
    {"cosh", tide_cosh, 0, true},         {"trunc", tide_trunc, 0, false},
};

static const struct {
    const char *name;
    binary_fn fn;
    bool transcendental;
} binaries[] = {
    {"add", tide_add, false},         {"sub", tide_sub, false},
    {"mul", tide_mul, false},         {"div", tide_div, true},
    {"pow", tide_pow, true},          {"maximum", tide_maximum, false},
    {"minimum", tide_minimum, false}, {"eq", tide_eq, false},
    {"ne", tide_ne, false},           {"lt", tide_lt, false},
    {"le", tide_le, false},           {"gt", tide_gt, false},
    {"ge", tide_ge, false},           {"logical_and", tide_logical_and, false},
    {"logical_or", tide_logical_or, false},
    /* the shaders' fmod is exact below quotients of 2^24, beyond the random operands' */
    {"floor_divide", tide_floor_divide, false}, {"remainder", tide_remainder, false},
    {"atan2", tide_atan2, true}, {"fmod", tide_fmod, false},
};

static void tol(tide_dtype dt, bool transcendental, double *rtol, double *atol)
{
    if (dt == TIDE_FLOAT32) {
        *rtol = transcendental ? 2e-5 : 1e-6;
        *atol = transcendental ? 2e-6 : 0;
    } else {
        ref_tolerance(dt, transcendental, rtol, atol);
    }
}

static void test_unary(void)
{
    const tide_dtype dts[] = {TIDE_FLOAT32, TIDE_INT32, TIDE_UINT8, TIDE_BOOL, TIDE_FLOAT64};
    int64_t shape[3] = {5, 33, 47};
    for (size_t u = 0; u < sizeof unaries / sizeof *unaries; u++)
        for (int d = 0; d < 5; d++)
            for (int layout = 0; layout < NLAYOUTS; layout++) {
                tide_dtype dt = dts[d];
                if (!in_quick_set(unaries[u].name) || (quick && d > 1))
                    continue;
                if ((dt != TIDE_FLOAT32 || quick) && layout != CONTIG && layout != TRANSPOSED)
                    continue;
                pair p = random_pair(3, shape, dt, layout, unaries[u].kind);
                char what[96];
                snprintf(what, sizeof what, "%s %s %s", unaries[u].name, tide_dtype_name(dt),
                         layout_names[layout]);
                double rtol, atol;
                tol(TIDE_FLOAT32, unaries[u].transcendental, &rtol, &atol);
                compare(what, unaries[u].fn(p.c), unaries[u].fn(p.v), rtol, atol);
                pair_release(&p);
            }
    /* special values: NaN and infinities through every float function */
    double sv[8] = {NAN, INFINITY, -INFINITY, 0.0, -0.0, 1e-30, 88.0, -100.0};
    int64_t n8 = 8;
    pair p = make_pair(sv, 1, &n8, TIDE_FLOAT32, CONTIG);
    const char *skip_special[] = {"exp", "log", "sqrt", "rsqrt", "sin", "cos", "reciprocal"};
    for (size_t u = 0; u < sizeof unaries / sizeof *unaries; u++) {
        bool skip = !in_quick_set(unaries[u].name); /* the driver's IEEE behaviour is its own: */
        for (size_t k = 0; k < sizeof skip_special / sizeof *skip_special; k++)
            skip = skip || strcmp(unaries[u].name, skip_special[k]) == 0;
        if (skip)
            continue;
        char what[96];
        snprintf(what, sizeof what, "%s of NaN, inf, -0", unaries[u].name);
        compare(what, unaries[u].fn(p.c), unaries[u].fn(p.v), 2e-5, 1e-30);
    }
    pair_release(&p);
}

static void test_binary(void)
{
    const tide_dtype dts[] = {TIDE_FLOAT32, TIDE_INT32, TIDE_UINT8, TIDE_BOOL, TIDE_INT64};
    int64_t sa[3] = {4, 31, 29}, sb_bcast[3] = {4, 1, 29};
    for (size_t bi = 0; bi < sizeof binaries / sizeof *binaries; bi++)
        for (int d = 0; d < 5; d++) {
            tide_dtype dt = dts[d];
            if (!in_quick_set(binaries[bi].name) || (quick && d == 2))
                continue;
            for (int layout = 0; layout < NLAYOUTS + 2; layout++) {
                if ((dt != TIDE_FLOAT32 || quick) && layout > 1 && layout < NLAYOUTS)
                    continue;
                /* layouts: both in one layout; NLAYOUTS: b broadcast [4,1,29];
                 * NLAYOUTS+1: b a Lua-style number */
                pair a = random_pair(3, sa, dt, layout < NLAYOUTS ? layout : CONTIG, 0);
                pair b = {NULL, NULL};
                if (layout < NLAYOUTS)
                    b = random_pair(3, sa, dt, layout == EXPANDED ? CONTIG : layout, 0);
                else if (layout == NLAYOUTS)
                    b = random_pair(3, sb_bcast, dt, CONTIG, 0);
                if (dt == TIDE_FLOAT32 && strcmp(binaries[bi].name, "pow") == 0) {
                    pair_release(&a); /* pow: positive bases, moderate exponents */
                    a = random_pair(3, sa, dt, layout < NLAYOUTS ? layout : CONTIG, 1);
                }
                char what[120];
                snprintf(what, sizeof what, "%s %s %s", binaries[bi].name, tide_dtype_name(dt),
                         layout < NLAYOUTS ? layout_names[layout]
                                           : layout == NLAYOUTS ? "broadcast" : "with a number");
                double rtol, atol;
                tol(TIDE_FLOAT32, binaries[bi].transcendental, &rtol, &atol);
                if (layout == NLAYOUTS + 1) {
                    tide_tensor *num = tide_number(1.5), *inum = tide_integer(3);
                    compare(what, binaries[bi].fn(a.c, num), binaries[bi].fn(a.v, num), rtol, atol);
                    compare(what, binaries[bi].fn(inum, a.c), binaries[bi].fn(inum, a.v), rtol,
                            atol);
                    tide_release(num);
                    tide_release(inum);
                } else {
                    compare(what, binaries[bi].fn(a.c, b.c), binaries[bi].fn(a.v, b.v), rtol, atol);
                }
                pair_release(&a);
                pair_release(&b);
            }
        }
    /* contiguous operands starting at offsets 0, 4 and 1 (mod 8): the 8-wide, 4-wide and
     * general shaders, with tails of every length */
    for (int64_t len = 1; len <= 21; len += quick ? 20 : 5)
        for (int64_t off = 0; off < 6; off++) {
            int64_t full = len + 8;
            pair a = random_pair(1, &full, TIDE_FLOAT32, CONTIG, 0);
            pair b = random_pair(1, &full, TIDE_FLOAT32, CONTIG, 0);
            tide_tensor *ac = tide_slice(a.c, 0, off, off + len, 1), *av = tide_slice(a.v, 0, off, off + len, 1);
            tide_tensor *bc = tide_slice(b.c, 0, 4, 4 + len, 1), *bv = tide_slice(b.v, 0, 4, 4 + len, 1);
            char what[80];
            snprintf(what, sizeof what, "add of [%lld] slices at offsets %lld and 4", (long long)len,
                     (long long)off);
            compare(what, tide_add(ac, bc), tide_add(av, bv), 1e-6, 0);
            snprintf(what, sizeof what, "exp of a [%lld] slice at offset %lld", (long long)len,
                     (long long)off);
            compare(what, tide_exp(ac), tide_exp(av), 2e-5, 2e-6);
            tide_release(ac);
            tide_release(av);
            tide_release(bc);
            tide_release(bv);
            pair_release(&a);
            pair_release(&b);
        }
    /* NaN through maximum/minimum and comparisons */
    double x[6] = {NAN, 1, NAN, -INFINITY, 2, -0.0}, y[6] = {1, NAN, NAN, 0, 2, 0.0};
    int64_t n6 = 6;
    pair a = make_pair(x, 1, &n6, TIDE_FLOAT32, CONTIG), b = make_pair(y, 1, &n6, TIDE_FLOAT32, CONTIG);
    for (size_t bi = 0; bi < sizeof binaries / sizeof *binaries; bi++) {
        if (strcmp(binaries[bi].name, "pow") == 0 || strcmp(binaries[bi].name, "div") == 0 ||
            !in_quick_set(binaries[bi].name))
            continue;
        char what[96];
        snprintf(what, sizeof what, "%s with NaN", binaries[bi].name);
        /* atan2: SLEEF's 1 ulp on the CPU (its pi/4 at (2, 2) is one below) */
        compare(what, binaries[bi].fn(a.c, b.c), binaries[bi].fn(a.v, b.v),
                binaries[bi].transcendental ? 2e-7 : 0, 0);
    }
    pair_release(&a);
    pair_release(&b);
}

/* // and % on Vulkan against the CPU, exactly: negative operands, zero divisors (integers: 0;
 * floats: inf and NaN), infinities, signed zeros, quotients past 2^24, and the int limits, in
 * float32, float64, int32 and int64 (the 64-bit shader). */
static void test_floor_divide_remainder(void)
{
    static const double a[] = {7, -7, 7, -7, 7.5, -7.5, 1, -1, 0, -0.0, 1e30, 3, INFINITY, 5,
                               -5, 2147483647.0, -2147483648.0, -2147483648.0, 0.1, 1};
    static const double b[] = {2, 2, -2, -2, -2, 0.5, 0, 0, 0, 3, 7e-3, 0.1, 3, INFINITY,
                               INFINITY, -1, -1, 3, 0.03, -INFINITY};
    int64_t n = sizeof a / sizeof a[0];
    const tide_dtype dts[] = {TIDE_FLOAT32, TIDE_FLOAT64, TIDE_INT32, TIDE_INT64, TIDE_UINT8};
    for (int d = 0; d < (quick ? 1 : 5); d++) { /* under valgrind: float32 alone */
        double av[32], bv[32];
        for (int64_t i = 0; i < n; i++) { /* integers: the finite values, clamped to the dtype */
            bool is_int = dts[d] != TIDE_FLOAT32 && dts[d] != TIDE_FLOAT64;
            av[i] = is_int ? (isfinite(a[i]) && fabs(a[i]) < 3e9 ? trunc(a[i]) : 9) : a[i];
            bv[i] = is_int ? (isfinite(b[i]) && fabs(b[i]) >= 1 ? trunc(b[i]) : 0) : b[i];
            if (dts[d] == TIDE_UINT8)
                av[i] = fabs(fmod(av[i], 256)), bv[i] = fabs(fmod(bv[i], 256));
        }
        pair x = make_pair(av, 1, &n, dts[d], CONTIG), y = make_pair(bv, 1, &n, dts[d], CONTIG);
        char what[80];
        snprintf(what, sizeof what, "floor_divide %s specials", tide_dtype_name(dts[d]));
        compare(what, tide_floor_divide(x.c, y.c), tide_floor_divide(x.v, y.v), 0, 0);
        snprintf(what, sizeof what, "remainder %s specials", tide_dtype_name(dts[d]));
        compare(what, tide_remainder(x.c, y.c), tide_remainder(x.v, y.v), 0, 0);
        pair_release(&x);
        pair_release(&y);
    }
}

static void test_where_cast_copy_fill(void)
{
    int64_t shape[2] = {23, 41}, row[2] = {1, 41};
    for (int d = 0; d < 6; d++) {
        tide_dtype dt = all_dtypes[d];
        pair cond = random_pair(2, shape, TIDE_BOOL, CONTIG, 0);
        pair a = random_pair(2, shape, dt, TRANSPOSED, 0), b = random_pair(2, row, dt, CONTIG, 0);
        char what[80];
        snprintf(what, sizeof what, "where %s", tide_dtype_name(dt));
        compare(what, tide_where(cond.c, a.c, b.c), tide_where(cond.v, a.v, b.v), 0, 0);
        for (int e = 0; e < 6; e++) {
            tide_dtype to = all_dtypes[e];
            if (quick && e != 0 && e != 3 && e != 5)
                continue;
            snprintf(what, sizeof what, "cast %s to %s", tide_dtype_name(dt), tide_dtype_name(to));
            compare(what, tide_cast(a.c, to), tide_cast(a.v, to), 0, 0);
        }
        /* copy_ into a strided view (every other column) with broadcasting and conversion */
        int64_t wide[2] = {23, 83};
        pair dst = random_pair(2, wide, TIDE_FLOAT32, CONTIG, 0);
        tide_tensor *dc = tide_slice(dst.c, 1, 0, 82, 2), *dv = tide_slice(dst.v, 1, 0, 82, 2);
        CHECK(tide_copy_(dc, b.c) == 0 && tide_copy_(dv, b.v) == 0, "copy_ %s: %s",
              tide_dtype_name(dt), tide_last_error());
        snprintf(what, sizeof what, "copy_ %s into a strided view", tide_dtype_name(dt));
        compare(what, tide_retain(dst.c), tide_retain(dst.v), 0, 0);
        /* fill_ a transposed view */
        tide_tensor *tc = tide_transpose(dst.c, 0, 1), *tv = tide_transpose(dst.v, 0, 1);
        tide_tensor *sc = tide_slice(tc, 0, 3, 60, 1), *sv = tide_slice(tv, 0, 3, 60, 1);
        CHECK(tide_fill_(sc, -2.75) == 0 && tide_fill_(sv, -2.75) == 0, "fill_: %s",
              tide_last_error());
        compare("fill_ of a transposed slice", tide_retain(dst.c), tide_retain(dst.v), 0, 0);
        tide_release(sc);
        tide_release(sv);
        tide_release(tc);
        tide_release(tv);
        tide_release(dc);
        tide_release(dv);
        pair_release(&dst);
        pair_release(&cond);
        pair_release(&a);
        pair_release(&b);
    }
    /* fill of byte dtypes with a length that is not a multiple of 4, into a contiguous slice */
    for (int d = 4; d < 6; d++) {
        int64_t n = 23;
        pair p = random_pair(1, &n, all_dtypes[d], CONTIG, 0);
        tide_tensor *sc = tide_slice(p.c, 0, 4, 11, 1), *sv = tide_slice(p.v, 0, 4, 11, 1);
        CHECK(tide_fill_(sc, 1) == 0 && tide_fill_(sv, 1) == 0, "fill_ bytes: %s",
              tide_last_error());
        compare("fill_ of a byte slice", tide_retain(p.c), tide_retain(p.v), 0, 0);
        tide_release(sc);
        tide_release(sv);
        pair_release(&p);
    }
    /* copy_ between devices, both ways */
    int64_t n = 100;
    pair p = random_pair(1, &n, TIDE_FLOAT32, CONTIG, 0);
    tide_tensor *z = tide_zeros(1, &n, TIDE_FLOAT32), *zv = tide_to(z, "vulkan");
    CHECK(tide_copy_(zv, p.c) == 0, "copy_ cpu to vulkan: %s", tide_last_error());
    compare("copy_ from the CPU into Vulkan", tide_retain(p.c), tide_retain(zv), 0, 0);
    CHECK(tide_copy_(z, p.v) == 0, "copy_ vulkan to cpu: %s", tide_last_error());
    double *a = ref_read(z), *b = ref_read(p.c);
    CHECK(a && b && ref_mismatch(a, b, n, 0, 0) < 0, "copy_ from Vulkan into the CPU");
    free(a);
    free(b);
    tide_release(z);
    tide_release(zv);
    pair_release(&p);
}

/* ---- reductions ------------------------------------------------------------------------------ */

static void test_reductions(void)
{
    typedef tide_tensor *(*red_fn)(const tide_tensor *, const int *, int, bool);
    const struct {
        const char *name;
        red_fn fn;
        int kind;
    } reds[] = {{"sum", tide_sum, 0}, {"prod", tide_prod, 2}, {"max", tide_max, 0},
                {"min", tide_min, 0}, {"mean", tide_mean, 0}};
    int64_t shape[3] = {6, 45, 37};
    const int dimsets[][3] = {{0, 0, 0}, {2, 0, 0}, {0, 0, 0}, {1, 0, 0}, {0, 2, 0}, {0, 1, 2}};
    const int ndims[] = {0, 1, 1, 1, 2, 3};
    for (size_t r = 0; r < sizeof reds / sizeof *reds; r++)
        for (int layout = 0; layout < (quick ? 2 : NLAYOUTS); layout++)
            for (int s = 0; s < 6; s++)
                if (in_quick_set(reds[r].name) && (!quick || s % 2 == 1))
                for (int keep = 0; keep < 2; keep++) {
                    pair p = random_pair(3, shape, TIDE_FLOAT32, layout, reds[r].kind);
                    char what[120];
                    snprintf(what, sizeof what, "%s over %d dims (set %d) %s keepdim=%d",
                             reds[r].name, ndims[s], s, layout_names[layout], keep);
                    compare(what, reds[r].fn(p.c, dimsets[s], ndims[s], keep),
                            reds[r].fn(p.v, dimsets[s], ndims[s], keep), 2e-5, 1e-4);
                    pair_release(&p);
                }
    /* argmax/argmin along each dim and overall, with ties and a NaN */
    for (int layout = 0; layout < (quick ? 1 : NLAYOUTS); layout++)
        for (int dim = -1; dim < 3; dim++) {
            int64_t n = ref_numel(3, shape);
            double *v = malloc((size_t)n * sizeof *v);
            for (int64_t i = 0; i < n; i++)
                v[i] = (double)(int)(ref_uniform() * 20); /* many ties */
            if (layout == CONTIG)
                v[n / 2] = NAN;
            pair p = make_pair(v, 3, shape, TIDE_FLOAT32, layout);
            free(v);
            int d = dim < 0 ? TIDE_ALL_DIMS : dim;
            char what[96];
            snprintf(what, sizeof what, "argmax dim %d %s", dim, layout_names[layout]);
            compare(what, tide_argmax(p.c, d, false), tide_argmax(p.v, d, false), 0, 0);
            snprintf(what, sizeof what, "argmin dim %d %s", dim, layout_names[layout]);
            compare(what, tide_argmin(p.c, d, true), tide_argmin(p.v, d, true), 0, 0);
            pair_release(&p);
        }
    /* long reductions: split into chunks and a second pass; many short ones: a thread each */
    int64_t longn = quick ? 1 << 17 : 1 << 20;
    pair p = random_pair(1, &longn, TIDE_FLOAT32, CONTIG, 1);
    compare("sum of a long vector", tide_sum(p.c, NULL, 0, false), tide_sum(p.v, NULL, 0, false), 1e-5, 0);
    compare("max of a long vector", tide_max(p.c, NULL, 0, false), tide_max(p.v, NULL, 0, false), 0, 0);
    compare("argmax of a long vector", tide_argmax(p.c, TIDE_ALL_DIMS, false),
            tide_argmax(p.v, TIDE_ALL_DIMS, false), 0, 0);
    /* and a direct double reference for the long sum */
    double *x = ref_read(p.c), want = 0, got = 0;
    for (int64_t i = 0; x && i < longn; i++)
        want += x[i];
    tide_tensor *s = tide_sum(p.v, NULL, 0, false);
    CHECK(s && tide_item(s, &got) == 0 && fabs(got - want) <= 1e-5 * want,
          "sum of a long vector on Vulkan: %.9g, double reference %.9g", got, want);
    free(x);
    tide_release(s);
    pair_release(&p);
    int64_t many[2] = {5000, 10};
    p = random_pair(2, many, TIDE_FLOAT32, TRANSPOSED, 0);
    int last = 1;
    compare("sum over the last dim of [5000, 10]", tide_sum(p.c, &last, 1, false),
            tide_sum(p.v, &last, 1, false), 2e-6, 1e-5);
    compare("argmin over the last dim of [5000, 10]", tide_argmin(p.c, 1, false),
            tide_argmin(p.v, 1, false), 0, 0);
    pair_release(&p);
    /* other dtypes: int64/double accumulators (uint8/bool max/min fall back) */
    const tide_dtype odts[] = {TIDE_INT32, TIDE_INT64, TIDE_UINT8, TIDE_BOOL, TIDE_FLOAT64};
    for (int d = 0; d < 5; d++)
        for (int layout = 0; layout < 2; layout++)
            for (int sidx = 0; sidx < 6; sidx++) {
                tide_dtype dt = odts[d];
                if (quick && (d == 2 || d == 3 || layout == 1 || sidx % 3 != 0))
                    continue;
                pair q = random_pair(3, shape, dt, layout, dt == TIDE_FLOAT64 ? 2 : 0);
                for (size_t r = 0; r < 4; r++) {
                    if (!in_quick_set(reds[r].name))
                        continue;
                    char what[120];
                    snprintf(what, sizeof what, "%s %s over dim set %d %s", reds[r].name,
                             tide_dtype_name(dt), sidx, layout_names[layout]);
                    compare(what, reds[r].fn(q.c, dimsets[sidx], ndims[sidx], false),
                            reds[r].fn(q.v, dimsets[sidx], ndims[sidx], false),
                            dt == TIDE_FLOAT64 ? 1e-12 : 0, 0);
                }
                char what[96];
                snprintf(what, sizeof what, "argmax %s %s", tide_dtype_name(dt),
                         layout_names[layout]);
                compare(what, tide_argmax(q.c, 1, false), tide_argmax(q.v, 1, false), 0, 0);
                pair_release(&q);
            }
    p = random_pair(1, &longn, TIDE_INT32, CONTIG, 0);
    compare("sum of a long int32 vector (two passes)", tide_sum(p.c, NULL, 0, false),
            tide_sum(p.v, NULL, 0, false), 0, 0);
    compare("min of a long int32 vector (two passes)", tide_min(p.c, NULL, 0, false),
            tide_min(p.v, NULL, 0, false), 0, 0);
    pair_release(&p);
    p = random_pair(1, &longn, TIDE_FLOAT64, CONTIG, 0);
    compare("sum of a long float64 vector (two passes)", tide_sum(p.c, NULL, 0, false),
            tide_sum(p.v, NULL, 0, false), 1e-10, 1e-9);
    pair_release(&p);
}

/* ---- matmul ------------------------------------------------------------------------------------ */

static void test_matmul(void)
{
    const int64_t mnk[][3] = {{1, 1, 1},   {3, 7, 5},    {64, 64, 64}, {65, 33, 130},
                              {1, 200, 17}, {129, 1, 70}, {100, 100, 3}};
    for (size_t i = 0; i < sizeof mnk / sizeof *mnk; i++)
        for (int layout = 0; layout < 2; layout++) {
            int64_t sa[2] = {mnk[i][0], mnk[i][2]}, sb[2] = {mnk[i][2], mnk[i][1]};
            pair a = random_pair(2, sa, TIDE_FLOAT32, layout, 0);
            pair b = random_pair(2, sb, TIDE_FLOAT32, layout, 0);
            char what[96];
            snprintf(what, sizeof what, "matmul %lldx%lldx%lld %s", (long long)mnk[i][0],
                     (long long)mnk[i][1], (long long)mnk[i][2], layout_names[layout]);
            /* float32 dot products of K terms of size ~9 may cancel: absolute room ~K */
            compare(what, tide_matmul(a.c, b.c), tide_matmul(a.v, b.v), 1e-5,
                    2e-6 * (double)mnk[i][2]);
            if (i == 3) { /* a double reference for one shape */
                tide_tensor *r = tide_matmul(a.v, b.v), *h = r ? tide_to(r, "cpu") : NULL;
                double *x = ref_read(a.c), *y = ref_read(b.c), *z = ref_read(h);
                int64_t M = mnk[i][0], N = mnk[i][1], K = mnk[i][2], bad = -1;
                for (int64_t m = 0; z && m < M; m++)
                    for (int64_t nn = 0; nn < N; nn++) {
                        double acc = 0, mag = 0;
                        for (int64_t k = 0; k < K; k++) {
                            acc += x[m * K + k] * y[k * N + nn];
                            mag += fabs(x[m * K + k] * y[k * N + nn]);
                        }
                        if (fabs(z[m * N + nn] - acc) > 1e-6 * mag + 1e-6 && bad < 0)
                            bad = m * N + nn;
                    }
                CHECK(z && bad < 0, "matmul against a double reference: element %lld",
                      (long long)bad);
                free(x);
                free(y);
                free(z);
                tide_release(h);
                tide_release(r);
            }
            pair_release(&a);
            pair_release(&b);
        }
    /* batched with broadcasting batch dims, and 1-D operands */
    int64_t sa[4] = {2, 3, 9, 11}, sb[3] = {1, 11, 6}, v1[1] = {11};
    pair a = random_pair(4, sa, TIDE_FLOAT32, CONTIG, 0), b = random_pair(3, sb, TIDE_FLOAT32, CONTIG, 0);
    pair v = random_pair(1, v1, TIDE_FLOAT32, CONTIG, 0);
    compare("batched matmul [2,3,9,11] @ [1,11,6]", tide_matmul(a.c, b.c), tide_matmul(a.v, b.v),
            1e-5, 1e-5);
    compare("matmul [2,3,9,11] @ [11]", tide_matmul(a.c, v.c), tide_matmul(a.v, v.v), 1e-5, 1e-5);
    compare("dot [11] @ [11]", tide_matmul(v.c, v.c), tide_matmul(v.v, v.v), 1e-5, 1e-5);
    pair_release(&a);
    pair_release(&b);
    pair_release(&v);
    /* int32 matmul falls back */
    int64_t si[2] = {5, 4};
    a = random_pair(2, si, TIDE_INT32, CONTIG, 0);
    tide_tensor *at = tide_transpose(a.c, 0, 1), *avt = tide_transpose(a.v, 0, 1);
    compare("int32 matmul", tide_matmul(a.c, at), tide_matmul(a.v, avt), 0, 0);
    tide_release(at);
    tide_release(avt);
    pair_release(&a);
}

/* ---- everything else: shaders or the CPU fallback, the same answers ------------------------ */

static void test_other_ops(void)
{
    int64_t shape[4] = {2, 3, 9, 8};
    pair x = random_pair(4, shape, TIDE_FLOAT32, CONTIG, 0);
    int64_t wshape[4] = {4, 3, 3, 3};
    pair w = random_pair(4, wshape, TIDE_FLOAT32, CONTIG, 0);
    int stride[2] = {1, 2}, pad[2] = {1, 0}, dil[2] = {1, 1}, k2[2] = {2, 2}, s2[2] = {2, 2},
        p0[2] = {0, 0};
    compare("conv2d", tide_conv2d(x.c, w.c, NULL, stride, pad, dil, 1),
            tide_conv2d(x.v, w.v, NULL, stride, pad, dil, 1), 1e-5, 1e-5);
    compare("max_pool2d", tide_max_pool2d(x.c, k2, s2, p0, NULL),
            tide_max_pool2d(x.v, k2, s2, p0, NULL), 0, 0);
    compare("avg_pool2d", tide_avg_pool2d(x.c, k2, s2, p0, true),
            tide_avg_pool2d(x.v, k2, s2, p0, true), 1e-6, 1e-6);
    /* convolutions: stride, padding, dilation, groups; both gradients; a transposed input */
    int64_t xs6[4] = {2, 4, 11, 10}, ws6[4] = {6, 2, 3, 2};
    pair x6 = random_pair(4, xs6, TIDE_FLOAT32, TRANSPOSED, 0);
    pair w6 = random_pair(4, ws6, TIDE_FLOAT32, CONTIG, 0);
    int st2[2] = {2, 1}, pd2[2] = {1, 1}, dl2[2] = {2, 1};
    compare("conv2d groups 2, dilation, stride", tide_conv2d(x6.c, w6.c, NULL, st2, pd2, dl2, 2),
            tide_conv2d(x6.v, w6.v, NULL, st2, pd2, dl2, 2), 1e-5, 1e-5);
    tide_tensor *y6 = tide_conv2d(x6.c, w6.c, NULL, st2, pd2, dl2, 2);
    if (y6) {
        int64_t ysh[4];
        memcpy(ysh, tide_shape(y6), sizeof ysh);
        pair g6 = random_pair(4, ysh, TIDE_FLOAT32, CONTIG, 0);
        int64_t hw[2] = {11, 10}, khw[2] = {3, 2};
        compare("conv2d_grad_input", tide_conv2d_grad_input(g6.c, w6.c, hw, st2, pd2, dl2, 2),
                tide_conv2d_grad_input(g6.v, w6.v, hw, st2, pd2, dl2, 2), 1e-5, 1e-5);
        compare("conv2d_grad_weight", tide_conv2d_grad_weight(x6.c, g6.c, khw, st2, pd2, dl2, 2),
                tide_conv2d_grad_weight(x6.v, g6.v, khw, st2, pd2, dl2, 2), 1e-5, 1e-4);
        pair_release(&g6);
    }
    tide_release(y6);
    int k3[2] = {3, 3}, s1[2] = {1, 2}, p1[2] = {1, 1};
    tide_tensor *ic = NULL, *ivk = NULL;
    compare("max_pool2d padded", tide_max_pool2d(x6.c, k3, s1, p1, &ic),
            tide_max_pool2d(x6.v, k3, s1, p1, &ivk), 0, 0);
    compare("max_pool2d indices", ic, ivk, 0, 0);
    compare("avg_pool2d padded, count_include_pad=false", tide_avg_pool2d(x6.c, k3, s1, p1, false),
            tide_avg_pool2d(x6.v, k3, s1, p1, false), 1e-6, 1e-6);
    tide_tensor *ap = tide_avg_pool2d(x6.c, k3, s1, p1, true);
    if (ap) {
        int64_t psh[4], hw[2] = {11, 10};
        memcpy(psh, tide_shape(ap), sizeof psh);
        pair gp = random_pair(4, psh, TIDE_FLOAT32, TRANSPOSED, 0);
        compare("avg_pool2d_grad", tide_avg_pool2d_grad(gp.c, hw, k3, s1, p1, true),
                tide_avg_pool2d_grad(gp.v, hw, k3, s1, p1, true), 1e-5, 1e-6);
        pair_release(&gp);
    }
    tide_release(ap);
    pair_release(&x6);
    pair_release(&w6);
    tide_tensor *xs[2] = {x.c, x.c}, *vs[2] = {x.v, x.v};
    compare("cat", tide_cat(xs, 2, 1), tide_cat(vs, 2, 1), 0, 0);
    int64_t pads[4] = {1, 2, 0, 1};
    compare("pad", tide_pad(x.c, pads, 4, 0.5), tide_pad(x.v, pads, 4, 0.5), 0, 0);
    int64_t crop[4] = {-1, 2, 1, -2};
    compare("pad with a crop", tide_pad(x.c, crop, 4, -1), tide_pad(x.v, crop, 4, -1), 0, 0);
    int fd[2] = {1, 3};
    compare("flip", tide_flip(x.c, fd, 2), tide_flip(x.v, fd, 2), 0, 0);
    {
        int64_t sh2[2] = {7, 9}, sh3[2] = {7, 4};
        pair t1 = random_pair(2, sh2, TIDE_FLOAT32, TRANSPOSED, 0);
        pair t2 = random_pair(2, sh3, TIDE_INT32, CONTIG, 0);
        pair t3 = random_pair(2, sh2, TIDE_UINT8, CONTIG, 0);
        tide_tensor *cs[2] = {t1.c, t2.c}, *gs[2] = {t1.v, t2.v};
        compare("cat float32 with int32, transposed", tide_cat(cs, 2, 1), tide_cat(gs, 2, 1), 0, 0);
        tide_tensor *cb[2] = {t3.c, t3.c}, *gb[2] = {t3.v, t3.v};
        compare("cat uint8 along dim 0", tide_cat(cb, 2, 0), tide_cat(gb, 2, 0), 0, 0);
        int f0[1] = {0};
        compare("flip of a transposed view", tide_flip(t1.c, f0, 1), tide_flip(t1.v, f0, 1), 0, 0);
        pair_release(&t1);
        pair_release(&t2);
        pair_release(&t3);
    }
    compare("softmax", tide_softmax(x.c, -1), tide_softmax(x.v, -1), 1e-5, 1e-6);
    compare("log_softmax", tide_log_softmax(x.c, 1), tide_log_softmax(x.v, 1), 1e-5, 1e-5);
    int64_t ishape[1] = {5};
    double iv[5] = {2, 0, 1, 1, 2};
    pair idx = make_pair(iv, 1, ishape, TIDE_INT64, CONTIG);
    compare("index_select", tide_index_select(x.c, 1, idx.c), tide_index_select(x.v, 1, idx.v), 0,
            0);
    /* gather and scatter_add along dim 2 with an int64 index, int32 index_select, a bad index */
    int64_t gsh[4] = {2, 3, 5, 8};
    int64_t ng = ref_numel(4, gsh);
    double *gv = malloc((size_t)ng * sizeof *gv);
    for (int64_t i = 0; i < ng; i++)
        gv[i] = (double)(int)(ref_uniform() * 9);
    pair gi = make_pair(gv, 4, gsh, TIDE_INT64, TRANSPOSED);
    free(gv);
    pair src = random_pair(4, gsh, TIDE_FLOAT32, CONTIG, 0);
    compare("gather", tide_gather(x.c, 2, gi.c), tide_gather(x.v, 2, gi.v), 0, 0);
    compare("scatter_add", tide_scatter_add(x.c, 2, gi.c, src.c),
            tide_scatter_add(x.v, 2, gi.v, src.v), 1e-6, 1e-6);
    pair xi = random_pair(4, shape, TIDE_INT32, CONTIG, 0), si = random_pair(4, gsh, TIDE_INT32, CONTIG, 0);
    compare("scatter_add int32", tide_scatter_add(xi.c, 2, gi.c, si.c),
            tide_scatter_add(xi.v, 2, gi.v, si.v), 0, 0);
    pair_release(&xi);
    pair_release(&si);
    pair_release(&gi);
    pair_release(&src);
    double iv32[4] = {7, 0, 3, 3};
    int64_t n4 = 4;
    pair i32 = make_pair(iv32, 1, &n4, TIDE_INT32, CONTIG);
    compare("index_select int32 index on dim 3", tide_index_select(x.c, 3, i32.c),
            tide_index_select(x.v, 3, i32.v), 0, 0);
    compare("embedding", tide_embedding(w.c, idx.c), tide_embedding(w.v, idx.v), 0, 0);
    pair_release(&i32);
    double badv[3] = {0, 9, 1};
    int64_t n3 = 3;
    pair bad = make_pair(badv, 1, &n3, TIDE_INT64, CONTIG);
    tide_tensor *bc = tide_index_select(x.c, 3, bad.c);
    char cpu_msg[256];
    snprintf(cpu_msg, sizeof cpu_msg, "%s", tide_last_error());
    CHECK(!bc, "a bad index on the CPU is an error");
    tide_release(bc);
    CHECK_ERROR(tide_index_select(x.v, 3, bad.v), cpu_msg);
    pair_release(&bad);
    pair_release(&idx);
    pair_release(&x);
    pair_release(&w);
    /* a mixed CPU/Vulkan op is an error naming both devices */
    int64_t n = 4;
    pair a = random_pair(1, &n, TIDE_FLOAT32, CONTIG, 0);
    CHECK_ERROR(tide_add(a.c, a.v), "add", "cpu", "vulkan");
    CHECK_ERROR(tide_matmul(a.v, a.c), "matmul", "different devices");
    /* ... while a 0-dim CPU tensor goes with any device */
    tide_tensor *z = tide_scalar(2, TIDE_FLOAT32);
    compare("vulkan * 0-dim cpu", tide_mul(a.c, z), tide_mul(a.v, z), 0, 0);
    tide_release(z);
    CHECK_ERROR(tide_to(a.c, "tpu"), "unknown device", "tpu");
    tide_tensor *two[2] = {a.v, a.c};
    CHECK_ERROR(tide_cat(two, 2, 0), "cat", "tensor 1 is on cpu", "tensor 0 is on vulkan");
    double cls[3] = {0, 3, 2};
    int64_t ncls = 3;
    pair ci = make_pair(cls, 1, &ncls, TIDE_INT64, CONTIG);
    compare("one_hot of Vulkan indices", tide_one_hot(ci.c, 5), tide_one_hot(ci.v, 5), 0, 0);
    pair_release(&ci);
    pair_release(&a);
}

/* A chain of many queued ops: the batch fills and is submitted midway. */
static void test_long_chain(void)
{
    int64_t n = 1000;
    pair a = random_pair(1, &n, TIDE_FLOAT32, CONTIG, 0);
    tide_tensor *c = tide_retain(a.c), *v = tide_retain(a.v);
    for (int i = 0; i < 1500; i++) {
        tide_tensor *c2 = tide_mul_scalar(c, 1.0001), *v2 = tide_mul_scalar(v, 1.0001);
        tide_release(c);
        tide_release(v);
        c = c2;
        v = v2;
        if (!c || !v)
            break;
    }
    compare("1500 chained ops", c, v, 1e-4, 0);
    CHECK(tide_sync() == 0, "tide_sync: %s", tide_last_error());
    pair_release(&a);
}

/* Tensors larger than one storage-buffer binding (128 MiB on lavapipe): elementwise ops run in
 * pieces, the rest falls back. Only with TIDE_TEST_BIG=1 (a ctest entry of its own, not under
 * valgrind): it moves about a gigabyte. */
static void test_big(void)
{
    int64_t n = 36 << 20; /* 144 MiB of float32 */
    tide_tensor *c = tide_full(1, &n, 1.5, TIDE_FLOAT32), *x = c ? tide_to(c, "vulkan") : NULL;
    tide_release(c);
    tide_tensor *y = x ? tide_mul_scalar(x, 2) : NULL, *z = y ? tide_add(y, x) : NULL;
    tide_tensor *last = z ? tide_select(z, 0, n - 1) : NULL, *first = z ? tide_select(z, 0, 0) : NULL;
    double a = 0, b = 0, total = 0;
    CHECK(last && first && tide_item(last, &a) == 0 && tide_item(first, &b) == 0 && a == 4.5 &&
              b == 4.5,
          "x * 2 + x over 144 MiB: first %g, last %g (%s)", b, a, tide_last_error());
    tide_tensor *s = z ? tide_sum(z, NULL, 0, false) : NULL;
    CHECK(s && tide_item(s, &total) == 0 && fabs(total - 4.5 * (double)n) < 1e-5 * 4.5 * (double)n,
          "sum over 144 MiB: %.9g, want %.9g", total, 4.5 * (double)n);
    tide_release(s);
    tide_release(last);
    tide_release(first);
    tide_release(z);
    tide_release(y);
    tide_release(x);
}

static void test_no_vulkan(const char *why)
{
    int64_t n = 3;
    tide_tensor *x = tide_ones(1, &n, TIDE_FLOAT32);
    tide_tensor *y = tide_to(x, "vulkan");
    CHECK(!y && strstr(tide_last_error(), "device \"vulkan\" is not available") &&
              strstr(tide_last_error(), why),
          "to(vulkan) without Vulkan: %s", tide_last_error());
    tide_release(y);
    tide_tensor *s = tide_sum(x, NULL, 0, false);
    double v = 0;
    CHECK(s && tide_item(s, &v) == 0 && v == 3, "the CPU still works");
    tide_release(s);
    tide_release(x);
    CHECK(tide_sync() == 0, "tide_sync without Vulkan");
}

int main(void)
{
    setenv("TIDE_VULKAN_MAX_GROUPS", "64", 0);
    const char *q = getenv("TIDE_TEST_QUICK"); /* the valgrind subset, on purpose */
    quick = RUNNING_ON_VALGRIND || (q && strcmp(q, "1") == 0);
    char why[512];
    bool have = tide_vulkan_available(why, sizeof why);
    const char *expect = getenv("TIDE_TEST_EXPECT_VULKAN");
    if (expect && strcmp(expect, "0") == 0) {
        CHECK(!have, "Vulkan was expected to be missing");
        CHECK(strlen(why) > 10, "a reason is given: \"%s\"", why);
    }
    if (!have) {
        printf("test_vulkan: no Vulkan device, the Vulkan tests are skipped: %s\n", why);
        test_no_vulkan(why);
        return test_summary("test_vulkan");
    }
    for (int i = 0; i < tide_vulkan_device_count(); i++) {
        char name[256];
        const char *kind;
        bool sel;
        if (tide_vulkan_device_info(i, name, sizeof name, &kind, &sel) == 0)
            printf("vulkan device %d: %s (%s)%s\n", i, name, kind, sel ? " [used]" : "");
    }
    ref_seed(7);
    test_transfers();
    test_unary();
    test_binary();
    test_floor_divide_remainder();
    test_where_cast_copy_fill();
    test_reductions();
    test_matmul();
    test_other_ops();
    test_long_chain();
    const char *big = getenv("TIDE_TEST_BIG");
    if (big && strcmp(big, "1") == 0)
        test_big();
    return test_summary("test_vulkan");
}
