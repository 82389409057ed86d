/*
 * test_reduce.c — sum, prod, mean, max, min, argmax and argmin checked against a double
 * reference loop: one dim, several dims, every dim, negative dims, keepdim, every layout and
 * dtype, empty reductions, NaN propagation, ties (the first index wins), and a 1M-element
 * float32 sum that must stay accurate.
 */
#include <stdlib.h>

#include "tide.h"
#include "test_util.h"
#include "test_ref.h"

#define NDT 6
static const tide_dtype DTYPES[NDT] = {TIDE_FLOAT32, TIDE_FLOAT64, TIDE_INT32,
                                       TIDE_INT64,   TIDE_UINT8,   TIDE_BOOL};

enum { R_SUM, R_PROD, R_MEAN, R_MAX, R_MIN, R_ARGMAX, R_ARGMIN };

typedef struct {
    const char *name;
    int op;
    tide_tensor *(*fn)(const tide_tensor *, const int *, int, bool);
    tide_tensor *(*argfn)(const tide_tensor *, int, bool);
    int gen;
} redop_t;

static const redop_t REDOPS[] = {
    {"sum", R_SUM, tide_sum, NULL, REF_GEN_GENERAL},
    {"prod", R_PROD, tide_prod, NULL, REF_GEN_UNIT},
    {"mean", R_MEAN, tide_mean, NULL, REF_GEN_GENERAL},
    {"max", R_MAX, tide_max, NULL, REF_GEN_SMALL},
    {"min", R_MIN, tide_min, NULL, REF_GEN_SMALL},
    {"argmax", R_ARGMAX, NULL, tide_argmax, REF_GEN_SMALL},
    {"argmin", R_ARGMIN, NULL, tide_argmin, REF_GEN_SMALL},
};
#define NREDOPS ((int)(sizeof REDOPS / sizeof REDOPS[0]))

static tide_dtype result_dtype(int op, tide_dtype dt)
{
    switch (op) {
    case R_SUM:
    case R_PROD: return ref_is_float(dt) ? dt : TIDE_INT64;
    case R_ARGMAX:
    case R_ARGMIN: return TIDE_INT64;
    default: return dt;
    }
}

/* A reduction the reference refuses, as PyTorch does: mean of a non-float input, and
 * max/min/argmax/argmin over an empty set. */
static bool must_fail(int op, tide_dtype dt, bool reduces_empty)
{
    if (op == R_MEAN && !ref_is_float(dt))
        return true;
    return reduces_empty && op >= R_MAX;
}

/*
 * The reference: reduces v (row-major, shape) over the dims where mask is set. For argmax/argmin
 * with flat set, positions are flat indices in the whole tensor; else positions along argdim.
 * want gets one value per output element, scale the sum of |x| (the float sum's error scale).
 */
static void ref_reduce(int op, const double *v, int ndim, const int64_t *shape, const bool *mask,
                       int argdim, bool flat, double *want, double *scale, int64_t nout)
{
    double *best = calloc((size_t)(nout > 0 ? nout : 1), sizeof *best);
    int64_t *count = calloc((size_t)(nout > 0 ? nout : 1), sizeof *count);
    for (int64_t o = 0; o < nout; o++) {
        want[o] = op == R_PROD ? 1 : 0;
        scale[o] = 0;
    }
    int64_t n = ref_numel(ndim, shape), idx[TIDE_MAX_DIMS] = {0};
    for (int64_t f = 0; f < n; f++) {
        int64_t o = 0;
        for (int d = 0; d < ndim; d++)
            if (!mask[d])
                o = o * shape[d] + idx[d];
        double x = v[f];
        int64_t pos = flat ? f : ndim ? idx[argdim] : 0;
        switch (op) {
        case R_SUM:
        case R_MEAN:
            want[o] += x;
            scale[o] += fabs(x);
            break;
        case R_PROD:
            want[o] *= x;
            scale[o] = fabs(want[o]);
            break;
        case R_MAX:
        case R_ARGMAX:
        case R_MIN:
        case R_ARGMIN: {
            bool is_max = op == R_MAX || op == R_ARGMAX;
            if (count[o] == 0 ||
                (!isnan(best[o]) && (isnan(x) || (is_max ? x > best[o] : x < best[o])))) {
                best[o] = x;
                want[o] = op == R_MAX || op == R_MIN ? x : (double)pos;
            }
            break;
        }
        }
        count[o]++;
        ref_next_index(ndim, shape, idx);
    }
    if (op == R_MEAN)
        for (int64_t o = 0; o < nout; o++) {
            want[o] = want[o] / (double)count[o]; /* 0/0: NaN, as torch.mean of nothing */
            scale[o] /= count[o] ? (double)count[o] : 1;
        }
    free(best);
    free(count);
}

/* Compares a reduction result with the reference within the op's error scale. */
static void check_reduction(const char *desc, tide_tensor *r, tide_dtype rdt, int nout_dims,
                            const int64_t *oshape, const double *want, const double *scale, int op)
{
    if (!r) {
        CHECK(r != NULL, "%s: failed: %s", desc, tide_last_error());
        return;
    }
    CHECK(tide_get_dtype(r) == rdt, "%s: result dtype %s, want %s", desc,
          ref_dtype_name(tide_get_dtype(r)), ref_dtype_name(rdt));
    bool shape_ok = ref_same_shape(r, nout_dims, oshape);
    CHECK(shape_ok, "%s: result shape %s, want %s", desc, ref_tensor_shape_str(r),
          ref_shape_str(nout_dims, oshape));
    if (!shape_ok)
        return;
    double *got = ref_read(r);
    CHECK(got != NULL, "%s: reading failed: %s", desc, tide_last_error());
    if (!got)
        return;
    int64_t n = ref_numel(nout_dims, oshape), bad = -1;
    double rtol = rdt == TIDE_FLOAT32 ? 1e-5 : rdt == TIDE_FLOAT64 ? 1e-12 : 0;
    for (int64_t i = 0; i < n && bad < 0; i++) {
        double w = ref_quantize(rdt, want[i]);
        bool ok;
        if (isnan(w) || isinf(w) || op >= R_MAX || !ref_is_float(rdt))
            ok = isnan(w) ? isnan(got[i]) : got[i] == w;
        else
            ok = fabs(got[i] - w) <= rtol * (scale[i] + fabs(w)) + 1e-300;
        if (!ok)
            bad = i;
    }
    CHECK(bad < 0, "%s: first mismatch at %s: got %.10g, want %.10g", desc,
          ref_index_str(nout_dims, oshape, bad), got[bad], ref_quantize(rdt, want[bad]));
    free(got);
}

typedef struct {
    int ndim;
    int64_t shape[TIDE_MAX_DIMS];
    int ndimsets;
    struct {
        int n;
        int dims[TIDE_MAX_DIMS];
    } dimsets[12];
    int nargdims;
    int argdims[6];
} redcase_t;

static const redcase_t CASES[] = {
    {3, {3, 4, 5}, 11,
     {{1, {0}}, {1, {1}}, {1, {2}}, {1, {-1}}, {1, {-3}}, {2, {0, 2}}, {2, {-1, 0}}, {2, {1, 2}},
      {3, {0, 1, 2}}, {3, {-1, -2, -3}}, {0, {0}}},
     6, {0, 1, 2, -1, -2, TIDE_ALL_DIMS}},
    {1, {6}, 3, {{1, {0}}, {1, {-1}}, {0, {0}}}, 3, {0, -1, TIDE_ALL_DIMS}},
    {0, {0}, 1, {{0, {0}}}, 1, {TIDE_ALL_DIMS}},
    {3, {2, 0, 3}, 5, {{1, {1}}, {1, {0}}, {2, {0, 2}}, {1, {-1}}, {0, {0}}}, 4,
     {0, 1, 2, TIDE_ALL_DIMS}},
    {1, {1}, 2, {{1, {0}}, {0, {0}}}, 2, {0, TIDE_ALL_DIMS}},
    {3, {4, 1, 3}, 4, {{1, {1}}, {2, {0, 1}}, {1, {2}}, {0, {0}}}, 4, {1, 2, -3, TIDE_ALL_DIMS}},
    {2, {2, 33}, 3, {{1, {1}}, {1, {0}}, {0, {0}}}, 3, {1, 0, TIDE_ALL_DIMS}},
};
#define NCASES ((int)(sizeof CASES / sizeof CASES[0]))

/*
 * One reduction of one tensor. dims/ndims for sum..min; argdim for argmax/argmin. values:
 * the logical values of x.
 */
static void run_reduction(const redop_t *op, tide_tensor *x, const double *v, tide_dtype dt,
                          int ndim, const int64_t *shape, const int *dims, int ndims, int argdim,
                          bool keepdim, const char *xdesc)
{
    char desc[400];
    bool mask[TIDE_MAX_DIMS] = {false};
    bool is_arg = op->op >= R_ARGMAX, flat = false;
    int adim = 0;
    int dpos = 0;
    if (is_arg) {
        if (argdim == TIDE_ALL_DIMS) {
            flat = true;
            for (int d = 0; d < ndim; d++)
                mask[d] = true;
            dpos = snprintf(desc, sizeof desc, "%s(%s, dim=all, keepdim=%d)", op->name, xdesc,
                            keepdim);
        } else {
            adim = argdim < 0 ? argdim + ndim : argdim;
            mask[adim] = true;
            dpos = snprintf(desc, sizeof desc, "%s(%s, dim=%d, keepdim=%d)", op->name, xdesc,
                            argdim, keepdim);
        }
    } else {
        dpos = snprintf(desc, sizeof desc, "%s(%s, dims={", op->name, xdesc);
        for (int i = 0; i < ndims; i++)
            dpos += snprintf(desc + dpos, sizeof desc - (size_t)dpos, "%s%d", i ? "," : "", dims[i]);
        snprintf(desc + dpos, sizeof desc - (size_t)dpos, "}, keepdim=%d)", keepdim);
        if (ndims == 0)
            for (int d = 0; d < ndim; d++)
                mask[d] = true;
        for (int i = 0; i < ndims; i++)
            mask[dims[i] < 0 ? dims[i] + ndim : dims[i]] = true;
    }
    (void)dpos;
    int64_t oshape[TIDE_MAX_DIMS];
    int nod = 0;
    bool empty = false;
    for (int d = 0; d < ndim; d++) {
        if (mask[d]) {
            empty = empty || shape[d] == 0;
            if (keepdim && !flat)
                oshape[nod++] = 1;
        } else {
            oshape[nod++] = shape[d];
        }
    }
    tide_clear_error();
    tide_tensor *r = is_arg ? op->argfn(x, argdim, keepdim) : op->fn(x, dims, ndims, keepdim);
    if (must_fail(op->op, dt, empty)) {
        CHECK(r == NULL && strstr(tide_last_error(), op->name) != NULL,
              "%s: should fail naming the op; got %s, error \"%s\"", desc,
              r ? "a tensor" : "NULL", tide_last_error());
        tide_release(r);
        return;
    }
    if (is_arg && dt == TIDE_BOOL && !r) { /* PyTorch has no argmax for bool */
        CHECK(tide_last_error()[0] != '\0', "%s: NULL without an error", desc);
        return;
    }
    int64_t nout = ref_numel(nod, oshape);
    double *want = malloc((size_t)(nout > 0 ? nout : 1) * sizeof *want);
    double *scale = malloc((size_t)(nout > 0 ? nout : 1) * sizeof *scale);
    ref_reduce(op->op, v, ndim, shape, mask, adim, flat, want, scale, nout);
    check_reduction(desc, r, result_dtype(op->op, dt), nod, oshape, want, scale, op->op);
    free(want);
    free(scale);
    tide_release(r);
}

static void reduce_sweep(bool with_nans)
{
    uint64_t seed = with_nans ? 7000 : 1;
    for (int o = 0; o < NREDOPS; o++)
        for (int d = 0; d < NDT; d++)
            for (int c = 0; c < NCASES; c++)
                for (int l = 0; l < REF_NUM_LAYOUTS; l++) {
                    const redop_t *op = &REDOPS[o];
                    const redcase_t *rc = &CASES[c];
                    tide_dtype dt = DTYPES[d];
                    if (with_nans && !ref_is_float(dt))
                        continue;
                    int64_t n = ref_numel(rc->ndim, rc->shape);
                    double v[128];
                    ref_seed(seed++);
                    ref_fill(v, n, dt, op->gen);
                    if (with_nans)
                        for (int64_t i = 0; i < n; i++)
                            if (ref_randint(0, 7) == 0)
                                v[i] = NAN;
                    ref_prepare(l, rc->ndim, rc->shape, v);
                    tide_tensor *x = ref_make(v, rc->ndim, rc->shape, dt, l);
                    char xdesc[160];
                    snprintf(xdesc, sizeof xdesc, "%s %s %s%s", ref_dtype_name(dt),
                             ref_layout_name(l), ref_shape_str(rc->ndim, rc->shape),
                             with_nans ? " with NaNs" : "");
                    CHECK(x != NULL, "making %s failed: %s", xdesc, tide_last_error());
                    if (!x)
                        continue;
                    for (int keep = 0; keep < 2; keep++) {
                        if (op->op >= R_ARGMAX) {
                            for (int a = 0; a < rc->nargdims; a++) {
                                if (rc->argdims[a] == TIDE_ALL_DIMS && keep)
                                    continue; /* the shape of keepdim over everything varies */
                                run_reduction(op, x, v, dt, rc->ndim, rc->shape, NULL, 0,
                                              rc->argdims[a], keep, xdesc);
                            }
                        } else {
                            for (int s = 0; s < rc->ndimsets; s++)
                                run_reduction(op, x, v, dt, rc->ndim, rc->shape,
                                              rc->dimsets[s].n ? rc->dimsets[s].dims : NULL,
                                              rc->dimsets[s].n, 0, keep, xdesc);
                        }
                    }
                    tide_release(x);
                }
}

/* max and min along rows of every length from 1 to 80 (one to five AVX-512 vectors, ten AVX2
 * ones, and the tails between), float32 and float64: plain rows, a NaN at each position in
 * turn (it wins), and a -inf / +inf (it loses / wins as a value). Exact: the answer is one of
 * the elements. */
static void test_row_extremes(void)
{
    enum { MAXLEN = 80 };
    const tide_dtype dts[2] = {TIDE_FLOAT32, TIDE_FLOAT64};
    for (int d = 0; d < 2; d++)
        for (int64_t len = 1; len <= MAXLEN; len++) {
            /* row r < len: a NaN at r; row len: no NaN, -inf at the end, +inf at the front */
            int64_t rows = len + 1, shape[2] = {rows, len};
            static double v[(MAXLEN + 1) * MAXLEN];
            for (int64_t r = 0; r < rows; r++)
                for (int64_t j = 0; j < len; j++)
                    v[r * len + j] = (double)((r * 37 + j * 11) % 23) - 11.0 + 0.25 * (double)j;
            for (int64_t r = 0; r < len; r++)
                v[r * len + r] = NAN;
            v[len * len + len - 1] = -INFINITY;
            tide_tensor *x = ref_make(v, 2, shape, dts[d], 0);
            int dim = 1;
            tide_tensor *mx = tide_max(x, &dim, 1, false), *mn = tide_min(x, &dim, 1, false);
            double got_max[MAXLEN + 1], got_min[MAXLEN + 1];
            tide_tensor *mx64 = tide_cast(mx, TIDE_FLOAT64), *mn64 = tide_cast(mn, TIDE_FLOAT64);
            CHECK(tide_to_buffer(mx64, got_max, sizeof got_max) == 0 &&
                      tide_to_buffer(mn64, got_min, sizeof got_min) == 0,
                  "max/min rows of length %lld: %s", (long long)len, tide_last_error());
            for (int64_t r = 0; r < rows; r++) {
                double want_max = -INFINITY, want_min = INFINITY;
                for (int64_t j = 0; j < len; j++) {
                    double e = v[r * len + j];
                    want_max = isnan(want_max) || isnan(e) ? NAN : e > want_max ? e : want_max;
                    want_min = isnan(want_min) || isnan(e) ? NAN : e < want_min ? e : want_min;
                }
                bool ok_max = isnan(want_max) ? isnan(got_max[r]) : got_max[r] == want_max;
                bool ok_min = isnan(want_min) ? isnan(got_min[r]) : got_min[r] == want_min;
                CHECK(ok_max && ok_min, "%s row %lld of length %lld: max %g (want %g), min %g "
                      "(want %g)", ref_dtype_name(dts[d]), (long long)r, (long long)len,
                      got_max[r], want_max, got_min[r], want_min);
            }
            tide_release(x), tide_release(mx), tide_release(mn);
            tide_release(mx64), tide_release(mn64);
        }
}

/* Hand-written cases whose answers are easy to see. */
static void test_reduce_examples(void)
{
    /* [[1, 5, 5], [7, 7, -1]]: ties go to the first index. */
    double v[6] = {1, 5, 5, 7, 7, -1};
    int64_t shape[2] = {2, 3};
    tide_tensor *x = ref_from_doubles(v, 2, shape, TIDE_FLOAT32);
    tide_tensor *am = tide_argmax(x, 1, false), *an = tide_argmin(x, 0, true),
                *aall = tide_argmax(x, TIDE_ALL_DIMS, false);
    double *g = ref_read(am);
    CHECK(g && tide_ndim(am) == 1 && tide_size(am, 0) == 2 && g[0] == 1 && g[1] == 0,
          "argmax([[1,5,5],[7,7,-1]], 1): got [%g, %g], want [1, 0]", g ? g[0] : NAN,
          g ? g[1] : NAN);
    free(g);
    g = ref_read(an);
    CHECK(g && tide_ndim(an) == 2 && tide_size(an, 0) == 1 && tide_size(an, 1) == 3 && g[0] == 0 &&
              g[1] == 0 && g[2] == 1,
          "argmin(.., 0, keepdim): got [%g, %g, %g], want [[0, 0, 1]]", g ? g[0] : NAN,
          g ? g[1] : NAN, g ? g[2] : NAN);
    free(g);
    double item = -1;
    CHECK(aall && tide_ndim(aall) == 0 && tide_get_dtype(aall) == TIDE_INT64 &&
              tide_item(aall, &item) == 0 && item == 3,
          "argmax(.., all): got %g, want 3 (0-dim int64)", item);
    tide_release(am);
    tide_release(an);
    tide_release(aall);
    tide_release(x);

    /* NaN: max is NaN and argmax points at the first NaN. */
    double w[5] = {1, NAN, 9, NAN, -3};
    int64_t five = 5;
    for (int d = 0; d < 2; d++) {
        x = ref_from_doubles(w, 1, &five, DTYPES[d]);
        tide_tensor *mx = tide_max(x, NULL, 0, false), *mn = tide_min(x, NULL, 0, false),
                    *ax = tide_argmax(x, 0, false), *ai = tide_argmin(x, -1, false),
                    *sm = tide_sum(x, NULL, 0, false);
        double a = 0, b = 0, c = 0, e = 0, s = 0;
        CHECK(mx && tide_item(mx, &a) == 0 && isnan(a), "max(%s [1,nan,9,nan,-3]) = %g, want nan",
              ref_dtype_name(DTYPES[d]), a);
        CHECK(mn && tide_item(mn, &b) == 0 && isnan(b), "min(%s [1,nan,9,nan,-3]) = %g, want nan",
              ref_dtype_name(DTYPES[d]), b);
        CHECK(ax && tide_item(ax, &c) == 0 && c == 1, "argmax(%s [1,nan,9,nan,-3]) = %g, want 1",
              ref_dtype_name(DTYPES[d]), c);
        CHECK(ai && tide_item(ai, &e) == 0 && e == 1, "argmin(%s [1,nan,9,nan,-3]) = %g, want 1",
              ref_dtype_name(DTYPES[d]), e);
        CHECK(sm && tide_item(sm, &s) == 0 && isnan(s), "sum(%s [1,nan,9,nan,-3]) = %g, want nan",
              ref_dtype_name(DTYPES[d]), s);
        tide_release(mx);
        tide_release(mn);
        tide_release(ax);
        tide_release(ai);
        tide_release(sm);
        tide_release(x);
    }

    /* Empty reductions: sum 0, prod 1, mean NaN; max/argmax refuse. */
    int64_t es[2] = {0, 3};
    tide_tensor *e = tide_zeros(2, es, TIDE_FLOAT32);
    int d0 = 0;
    tide_tensor *s0 = tide_sum(e, &d0, 1, false), *p0 = tide_prod(e, &d0, 1, false),
                *m0 = tide_mean(e, &d0, 1, false), *sall = tide_sum(e, NULL, 0, false),
                *pall = tide_prod(e, NULL, 0, true);
    double *gs = ref_read(s0), *gp = ref_read(p0), *gm = ref_read(m0), sv = -1, pv = -1;
    CHECK(gs && tide_size(s0, 0) == 3 && gs[0] == 0 && gs[2] == 0, "sum over empty dim 0 of [0, 3]");
    CHECK(gp && tide_size(p0, 0) == 3 && gp[0] == 1 && gp[2] == 1, "prod over empty dim 0 of [0, 3]");
    CHECK(gm && tide_size(m0, 0) == 3 && isnan(gm[0]), "mean over empty dim 0 of [0, 3]: %g",
          gm ? gm[0] : 0);
    CHECK(sall && tide_ndim(sall) == 0 && tide_item(sall, &sv) == 0 && sv == 0,
          "sum of all of [0, 3] = %g", sv);
    CHECK(pall && tide_ndim(pall) == 2 && tide_item(pall, &pv) == 0 && pv == 1,
          "prod of all of [0, 3] keepdim = %g, shape %s", pv, ref_tensor_shape_str(pall));
    free(gs);
    free(gp);
    free(gm);
    tide_release(s0);
    tide_release(p0);
    tide_release(m0);
    tide_release(sall);
    tide_release(pall);
    CHECK_ERROR(tide_max(e, &d0, 1, false), "max");
    CHECK_ERROR(tide_min(e, NULL, 0, false), "min");
    CHECK_ERROR(tide_argmax(e, 0, false), "argmax");
    CHECK_ERROR(tide_argmin(e, TIDE_ALL_DIMS, false), "argmin");
    int d1 = 1;
    tide_tensor *mx1 = tide_max(e, &d1, 1, false);
    CHECK(mx1 && tide_ndim(mx1) == 1 && tide_size(mx1, 0) == 0,
          "max over the non-empty dim of [0, 3] gives [0]: %s (%s)", ref_tensor_shape_str(mx1),
          tide_last_error());
    tide_release(mx1);
    tide_release(e);

    /* Integer sums do not wrap in the input dtype: uint8 and bool sum to int64. */
    int64_t n300 = 300;
    tide_tensor *u = tide_full(1, &n300, 200, TIDE_UINT8), *bt = tide_ones(1, &n300, TIDE_BOOL);
    tide_tensor *su = tide_sum(u, NULL, 0, false), *sb = tide_sum(bt, NULL, 0, false),
                *pb = tide_prod(bt, NULL, 0, false);
    double a = 0, b = 0, c = 0;
    CHECK(su && tide_get_dtype(su) == TIDE_INT64 && tide_item(su, &a) == 0 && a == 60000,
          "sum of 300 uint8 200s = %g (%s), want 60000 int64", a,
          su ? ref_dtype_name(tide_get_dtype(su)) : tide_last_error());
    CHECK(sb && tide_get_dtype(sb) == TIDE_INT64 && tide_item(sb, &b) == 0 && b == 300,
          "sum of 300 trues = %g, want 300 int64", b);
    CHECK(pb && tide_get_dtype(pb) == TIDE_INT64 && tide_item(pb, &c) == 0 && c == 1,
          "prod of 300 trues = %g, want 1 int64", c);
    tide_release(su);
    tide_release(sb);
    tide_release(pb);
    tide_release(u);
    tide_release(bt);

    /* int64 sums are exact beyond 2^53. */
    int64_t big[3] = {(int64_t)1 << 60, 1, 1}, three = 3, got = 0;
    tide_tensor *bi = tide_from_data(big, 1, &three, TIDE_INT64);
    tide_tensor *bs = tide_sum(bi, NULL, 0, false);
    CHECK(bs && tide_to_buffer(bs, &got, sizeof got) == 0 && got == ((int64_t)1 << 60) + 2,
          "sum int64 [2^60, 1, 1] = %lld", (long long)got);
    tide_release(bs);
    tide_release(bi);

    /* ndims == 0 with a non-NULL dims array also means every dim. */
    int64_t s22[2] = {2, 2};
    double four[4] = {1, 2, 3, 4};
    tide_tensor *q = ref_from_doubles(four, 2, s22, TIDE_FLOAT64);
    int unused = 1;
    tide_tensor *qs = tide_sum(q, &unused, 0, false);
    double qv = 0;
    CHECK(qs && tide_ndim(qs) == 0 && tide_item(qs, &qv) == 0 && qv == 10,
          "sum with ndims 0 and a dims array: %g (%s)", qv, tide_last_error());
    tide_release(qs);
    tide_release(q);

    /* A 0-dim tensor reduces to itself. */
    tide_tensor *z = tide_scalar(-2.5, TIDE_FLOAT64);
    tide_tensor *zs = tide_sum(z, NULL, 0, false), *zm = tide_max(z, NULL, 0, true),
                *za = tide_argmax(z, TIDE_ALL_DIMS, false);
    double zv = 0, mv = 0, av = -1;
    CHECK(zs && tide_ndim(zs) == 0 && tide_item(zs, &zv) == 0 && zv == -2.5, "sum(0-dim) = %g", zv);
    CHECK(zm && tide_ndim(zm) == 0 && tide_item(zm, &mv) == 0 && mv == -2.5, "max(0-dim) = %g", mv);
    CHECK(za && tide_ndim(za) == 0 && tide_item(za, &av) == 0 && av == 0, "argmax(0-dim) = %g", av);
    tide_release(zs);
    tide_release(zm);
    tide_release(za);
    tide_release(z);
}

/* 1M float32 values: the sum must be accurate (pairwise or wider accumulation). */
static void test_large_sum(void)
{
    int64_t shape[2] = {1024, 1024}, n = shape[0] * shape[1];
    float *data = malloc((size_t)n * sizeof *data);
    double total = 0, abs_total = 0;
    double *rows = calloc(1024, sizeof *rows), *cols = calloc(1024, sizeof *cols);
    ref_seed(42);
    for (int64_t i = 0; i < n; i++) {
        data[i] = (float)(-1 + 4 * ref_uniform());
        total += data[i];
        abs_total += fabs(data[i]);
        rows[i / 1024] += data[i];
        cols[i % 1024] += data[i];
    }
    tide_tensor *x = tide_from_data(data, 2, shape, TIDE_FLOAT32);
    tide_tensor *s = tide_sum(x, NULL, 0, false);
    double got = 0;
    CHECK(s && tide_item(s, &got) == 0 && fabs(got - total) <= 1e-5 * fabs(total),
          "sum of 1M float32: got %.10g, want %.10g (rel err %.3g)", got, total,
          fabs(got - total) / fabs(total));
    tide_release(s);
    tide_tensor *m = tide_mean(x, NULL, 0, false);
    CHECK(m && tide_item(m, &got) == 0 && fabs(got - total / (double)n) <= 1e-5 * fabs(total / (double)n),
          "mean of 1M float32: got %.10g, want %.10g", got, total / (double)n);
    tide_release(m);
    for (int d = 0; d < 2; d++) {
        tide_tensor *sd = tide_sum(x, &d, 1, false);
        double *g = ref_read(sd), *want = d == 0 ? cols : rows;
        int64_t bad = -1;
        for (int64_t i = 0; g && i < 1024 && bad < 0; i++)
            if (fabs(g[i] - want[i]) > 1e-5 * 2048)
                bad = i;
        CHECK(g && bad < 0, "sum of [1024, 1024] float32 over dim %d: at %lld got %.8g, want %.8g",
              d, (long long)bad, g && bad >= 0 ? g[bad] : 0, bad >= 0 ? want[bad] : 0);
        free(g);
        tide_release(sd);
    }
    /* The same through a transposed view. */
    tide_tensor *t = tide_transpose(x, 0, 1);
    s = tide_sum(t, NULL, 0, false);
    CHECK(s && tide_item(s, &got) == 0 && fabs(got - total) <= 1e-5 * fabs(total),
          "sum of 1M float32 transposed: got %.10g, want %.10g", got, total);
    tide_release(s);
    tide_release(t);
    tide_release(x);
    (void)abs_total;
    free(data);
    free(rows);
    free(cols);
}

/* Big enough to be split over threads: the first index must still win across chunks. */
static void test_large_arg(void)
{
    int64_t n = 1 << 20;
    float *data = calloc((size_t)n, sizeof *data);
    data[n - 1] = 5;
    data[600000] = 5;
    data[700000] = -5;
    data[123] = -5;
    tide_tensor *x = tide_from_data(data, 1, &n, TIDE_FLOAT32);
    tide_tensor *am = tide_argmax(x, 0, false), *an = tide_argmin(x, TIDE_ALL_DIMS, false),
                *mx = tide_max(x, NULL, 0, false);
    double a = -1, b = -1, m = 0;
    CHECK(am && tide_item(am, &a) == 0 && a == 600000, "argmax of 2^20 with ties: %g, want 600000", a);
    CHECK(an && tide_item(an, &b) == 0 && b == 123, "argmin of 2^20 with ties: %g, want 123", b);
    CHECK(mx && tide_item(mx, &m) == 0 && m == 5, "max of 2^20: %g", m);
    tide_release(am);
    tide_release(an);
    tide_release(mx);
    tide_release(x);
    /* every element equal: position 0 */
    for (int64_t i = 0; i < n; i++)
        data[i] = 1.5f;
    data[800000] = NAN;
    data[400000] = NAN;
    x = tide_from_data(data, 1, &n, TIDE_FLOAT32);
    am = tide_argmax(x, -1, false);
    mx = tide_max(x, NULL, 0, false);
    tide_tensor *mn = tide_min(x, NULL, 0, false);
    CHECK(am && tide_item(am, &a) == 0 && a == 400000, "argmax of 2^20 with NaNs: %g, want 400000", a);
    CHECK(mx && tide_item(mx, &m) == 0 && isnan(m), "max of 2^20 with NaNs: %g", m);
    CHECK(mn && tide_item(mn, &m) == 0 && isnan(m), "min of 2^20 with NaNs: %g", m);
    tide_release(am);
    tide_release(mx);
    tide_release(mn);
    tide_release(x);
    for (int64_t i = 0; i < n; i++)
        data[i] = 1.5f;
    x = tide_from_data(data, 1, &n, TIDE_FLOAT32);
    am = tide_argmax(x, 0, false);
    an = tide_argmin(x, 0, false);
    CHECK(am && tide_item(am, &a) == 0 && a == 0, "argmax of 2^20 equal values: %g, want 0", a);
    CHECK(an && tide_item(an, &b) == 0 && b == 0, "argmin of 2^20 equal values: %g, want 0", b);
    tide_release(am);
    tide_release(an);
    /* column-wise argmax of a [1024, 1024] view: ties in every column go to row 0 */
    int64_t s2[2] = {1024, 1024};
    tide_tensor *x2 = tide_view(x, 2, s2);
    tide_tensor *cols = tide_argmax(x2, 0, true);
    double *g = ref_read(cols);
    bool all0 = g != NULL && tide_ndim(cols) == 2 && tide_size(cols, 0) == 1;
    for (int i = 0; all0 && i < 1024; i++)
        all0 = g[i] == 0;
    CHECK(all0, "argmax over dim 0 of equal [1024, 1024]: all 0 (%s)", tide_last_error());
    free(g);
    tide_release(cols);
    tide_release(x2);
    tide_release(x);
    free(data);

    /* int32 sum of 2^20 values is exact in int64 */
    int32_t *iv = malloc((size_t)n * sizeof *iv);
    int64_t want = 0;
    ref_seed(9);
    for (int64_t i = 0; i < n; i++) {
        iv[i] = (int32_t)ref_randint(-100000, 2000000);
        want += iv[i];
    }
    tide_tensor *xi = tide_from_data(iv, 1, &n, TIDE_INT32);
    tide_tensor *si = tide_sum(xi, NULL, 0, false);
    int64_t got = 0;
    CHECK(si && tide_get_dtype(si) == TIDE_INT64 && tide_to_buffer(si, &got, sizeof got) == 0 &&
              got == want,
          "sum of 2^20 int32: %lld, want %lld", (long long)got, (long long)want);
    tide_release(si);
    tide_release(xi);
    free(iv);
}

int main(void)
{
    test_reduce_examples();
    test_row_extremes();
    reduce_sweep(false);
    reduce_sweep(true);
    test_large_sum();
    test_large_arg();
    return test_summary("test_reduce");
}
