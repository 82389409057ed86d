/*
 * test_autograd.c — autograd: gradcheck (central differences in float64) on every
 * differentiable primitive and every composite of tide.h, with broadcasting and non-contiguous
 * (transposed, sliced with a step, expanded) inputs; then the engine: accumulation,
 * retain_graph, no_grad, detach, in-place rules, version counters and the errors. Every
 * gradcheck case is also gradgradchecked (second derivatives through create_graph), and every
 * primitive must appear in one of those graphs or be listed with a reason.
 */
#include <pthread.h>
#include <stdlib.h>

#include "autograd/autograd.h"
#include "test_ref.h"
#include "test_util.h"

/* ---- inputs ------------------------------------------------------------------------------- */

#define SH(...) (int64_t[]){__VA_ARGS__}, (int)(sizeof((int64_t[]){__VA_ARGS__}) / sizeof(int64_t))

/* A float64 tensor of shape with values in [lo, hi) (|values| in [lo, hi) with random signs
 * when sign is set); requires grad when grad is set. layout 0: contiguous; 1: the last two dims
 * transposed in memory; 2: every other row of a tensor twice as long in dim 0. */
static tide_tensor *make(double lo, double hi, bool sign, bool grad, int layout,
                         const int64_t *shape, int nd)
{
    int64_t mshape[TIDE_MAX_DIMS];
    memcpy(mshape, shape, sizeof(int64_t) * nd);
    if (layout == 1) {
        mshape[nd - 1] = shape[nd - 2];
        mshape[nd - 2] = shape[nd - 1];
    } else if (layout == 2) {
        mshape[0] = 2 * shape[0];
    }
    int64_t numel = ref_numel(nd, mshape);
    double *v = malloc(sizeof(double) * (size_t)(numel ? numel : 1));
    for (int64_t i = 0; i < numel; i++) {
        v[i] = lo + (hi - lo) * ref_uniform();
        if (sign && ref_uniform() < 0.5)
            v[i] = -v[i];
    }
    tide_tensor *base = tide_from_data(v, nd, mshape, TIDE_FLOAT64);
    free(v);
    tide_tensor *view = layout == 1   ? tide_transpose(base, -1, -2)
                        : layout == 2 ? tide_slice(base, 0, 1, 2 * shape[0], 2)
                                      : tide_retain(base);
    tide_tensor *leaf = tide_detach(view); /* a view made into a leaf keeps its strides */
    tide_release(view);
    tide_release(base);
    if (grad)
        tide_requires_grad_(leaf, true);
    return leaf;
}

#define R(...) make(-2, 2, false, true, 0, SH(__VA_ARGS__))   /* general */
#define RT(...) make(-2, 2, false, true, 1, SH(__VA_ARGS__))  /* transposed */
#define RS(...) make(-2, 2, false, true, 2, SH(__VA_ARGS__))  /* sliced, step 2 */
#define P(...) make(0.5, 2, false, true, 0, SH(__VA_ARGS__))  /* positive */
#define NZ(...) make(0.5, 2, true, true, 0, SH(__VA_ARGS__))  /* away from 0 */
#define C(...) make(-2, 2, false, false, 0, SH(__VA_ARGS__))  /* constant: no grad */

static tide_tensor *ints(const int64_t *v, const int64_t *shape, int ndim)
{
    return tide_from_data(v, ndim, shape, TIDE_INT64);
}

/* ---- running a case ------------------------------------------------------------------------ */

/* Every intermediate of a case goes through T() and is released after each evaluation. */
static tide_tensor *tmp[256];
static int ntmp;
static char first_err[512];

static tide_tensor *T(tide_tensor *t)
{
    if (!t && !first_err[0])
        snprintf(first_err, sizeof first_err, "%s", tide_last_error());
    if (t && ntmp < 256)
        tmp[ntmp++] = t;
    return t;
}

typedef tide_tensor *(*case_fn)(tide_tensor *const *x);
typedef struct case_ctx {
    case_fn fn;
} case_ctx;

static tide_tensor *run_case(void *ctx, tide_tensor *const *x, int n)
{
    (void)n;
    tide_tensor *r = tide_retain(((case_ctx *)ctx)->fn(x));
    for (int i = 0; i < ntmp; i++)
        tide_release(tmp[i]);
    ntmp = 0;
    return r;
}

static int gc_cases;

/* ---- gradgradcheck: every case again, second derivatives through create_graph ----------------- */

/* The primitives met in the graphs that gradgradcheck differentiated (coverage, see main). */
static bool gg_covered[TIDE_NUM_OPS];

static void mark_ops(const ag_node *n, int depth)
{
    if (!n || depth > 64)
        return;
    gg_covered[n->op] = true;
    for (int i = 0; i < n->nin; i++)
        mark_ops(n->in[i].node, depth + 1);
}

static tide_tensor *run_case_marking(void *ctx, tide_tensor *const *x, int n)
{
    tide_tensor *r = run_case(ctx, x, n);
    if (r)
        mark_ops(r->grad_fn, 0);
    return r;
}

/* The second derivatives (gradients of the create_graph gradient) against finite differences
 * of the first: the same step and tolerance as the case's gradcheck (each formula is smooth
 * where the cases' inputs lie, and the first gradient is exact to rounding). A case whose
 * second derivative is refused ("double backward of X is not supported") passes. */
static void gg_run(const char *name, case_fn fn, tide_tensor **in, int n, int line, double eps,
                   double tol)
{
    case_ctx c = {fn};
    first_err[0] = 0;
    int rc = td_gradgradcheck(run_case_marking, &c, in, n, eps, tol, tol);
    /* a primitive may refuse a second derivative by name (attention's fused gradient does):
     * never a wrong value, so it passes, and is reported */
    if (rc < 0 && strstr(tide_last_error(), "double backward of") &&
        strstr(tide_last_error(), "is not supported")) {
        printf("test_autograd: line %d: %s: %s\n", line, name, tide_last_error());
        return;
    }
    CHECK(rc == 0, "line %d: gradgradcheck %s: %s (first error: %s)", line, name,
          tide_last_error(), first_err);
}

static void gc_run(const char *name, case_fn fn, tide_tensor **in, int n, int line, double eps,
                   double tol)
{
    case_ctx c = {fn};
    first_err[0] = 0;
    int rc = td_gradcheck(run_case, &c, in, n, eps, tol, tol);
    CHECK(rc == 0, "line %d: gradcheck %s: %s (first error: %s)", line, name, tide_last_error(),
          first_err);
    gc_cases++;
    gg_run(name, fn, in, n, line, eps, tol);
    for (int i = 0; i < n; i++)
        tide_release(in[i]);
}

#define GC(fn, ...)                                                                                \
    do {                                                                                           \
        tide_tensor *in_[] = {__VA_ARGS__};                                                        \
        gc_run(#fn, fn, in_, (int)(sizeof in_ / sizeof *in_), __LINE__, 1e-6, 1e-6);               \
    } while (0)

#define FN(name, expr)                                                                             \
    static tide_tensor *name(tide_tensor *const *x)                                                \
    {                                                                                              \
        (void)x;                                                                                   \
        return expr;                                                                               \
    }

/* For functions computed in float32: a larger step (they are polynomial, so it costs nothing) */
#define GC_F32(fn, ...)                                                                            \
    do {                                                                                           \
        tide_tensor *in_[] = {__VA_ARGS__};                                                        \
        gc_run(#fn, fn, in_, (int)(sizeof in_ / sizeof *in_), __LINE__, 1e-2, 1e-4);               \
    } while (0)

/* ---- elementwise ------------------------------------------------------------------------------ */

FN(f_neg, T(tide_neg(x[0])))
FN(f_abs, T(tide_abs(x[0])))
FN(f_exp, T(tide_exp(x[0])))
FN(f_log, T(tide_log(x[0])))
FN(f_sqrt, T(tide_sqrt(x[0])))
FN(f_rsqrt, T(tide_rsqrt(x[0])))
FN(f_sin, T(tide_sin(x[0])))
FN(f_cos, T(tide_cos(x[0])))
FN(f_tanh, T(tide_tanh(x[0])))
FN(f_erf, T(tide_erf(x[0])))
FN(f_sigmoid, T(tide_sigmoid(x[0])))
FN(f_relu, T(tide_relu(x[0])))
FN(f_floor, T(tide_add(T(tide_floor(x[0])), x[0])))
FN(f_ceil, T(tide_add(T(tide_ceil(x[0])), x[0])))
FN(f_round, T(tide_add(T(tide_round(x[0])), x[0])))
FN(f_sign, T(tide_add(T(tide_sign(x[0])), x[0])))
FN(f_reciprocal, T(tide_reciprocal(x[0])))

FN(f_add, T(tide_add(x[0], x[1])))
FN(f_sub, T(tide_sub(x[0], x[1])))
FN(f_mul, T(tide_mul(x[0], x[1])))
FN(f_div, T(tide_div(x[0], x[1])))
FN(f_pow, T(tide_pow(x[0], x[1])))
FN(f_maximum, T(tide_maximum(x[0], x[1])))
FN(f_minimum, T(tide_minimum(x[0], x[1])))
FN(f_remainder, T(tide_remainder(x[0], x[1])))
/* floor_divide is piecewise constant (zero gradient, as PyTorch): a product keeps it checked */
FN(f_floor_divide, T(tide_add(T(tide_floor_divide(x[0], x[1])), T(tide_mul(x[0], x[1])))))
FN(f_scalars, T(tide_pow_scalar(T(tide_div_scalar(T(tide_mul_scalar(T(tide_sub_scalar(
                  T(tide_add_scalar(x[0], 1.5)), 0.25)), -2)), 3)), 3)))
FN(f_pow_scalar_frac, T(tide_pow_scalar(x[0], 1.7)))
FN(f_where, T(tide_where(T(tide_gt(x[2], T(tide_number(0)))), x[0], x[1])))
FN(f_cast, T(tide_cast(T(tide_mul(T(tide_cast(x[0], TIDE_FLOAT32)), x[1])), TIDE_FLOAT64)))
FN(f_mixed, T(tide_mul(T(tide_cast(x[0], TIDE_FLOAT32)), x[1]))) /* float32 * float64 */

/* issue 24's primitives (ops/README.md); tan, asin, acos on scaled inputs, inside their domains
 * and away from tan's poles; trunc beside x, as floor; fmod's jumps as remainder's. */
FN(f_log1p, T(tide_log1p(x[0])))
FN(f_expm1, T(tide_expm1(x[0])))
FN(f_log2, T(tide_log2(x[0])))
FN(f_tan, T(tide_tan(T(tide_mul_scalar(x[0], 0.6)))))
FN(f_asin, T(tide_asin(T(tide_mul_scalar(x[0], 0.45)))))
FN(f_acos, T(tide_acos(T(tide_mul_scalar(x[0], 0.45)))))
FN(f_atan, T(tide_atan(x[0])))
FN(f_sinh, T(tide_sinh(x[0])))
FN(f_cosh, T(tide_cosh(x[0])))
FN(f_trunc, T(tide_add(T(tide_trunc(x[0])), x[0])))
FN(f_atan2, T(tide_atan2(x[0], x[1])))
FN(f_fmod, T(tide_fmod(x[0], x[1])))

static void test_math_24(void)
{
    case_fn general[] = {f_expm1, f_tan, f_asin, f_acos, f_atan, f_sinh, f_cosh, f_trunc};
    for (size_t i = 0; i < sizeof general / sizeof *general; i++) {
        GC(general[i], R(3, 4));
        GC(general[i], RT(3, 4));
    }
    GC(f_log1p, P(3, 4));
    GC(f_log2, P(3, 4));
    GC(f_atan2, R(3, 4), NZ(3, 4));
    GC(f_atan2, R(3, 1), NZ(1, 4));
    GC(f_fmod, R(3, 4), NZ(3, 4));
    GC(f_fmod, RT(3, 4), NZ(4));
}

static void test_elementwise(void)
{
    case_fn general[] = {f_neg, f_exp, f_sin, f_cos, f_tanh, f_sigmoid, f_floor, f_ceil,
                         f_round, f_sign, f_erf};
    for (size_t i = 0; i < sizeof general / sizeof *general; i++) {
        GC(general[i], R(3, 4));
        GC(general[i], RT(3, 4));
        GC(general[i], RS(3, 4));
    }
    case_fn positive[] = {f_log, f_sqrt, f_rsqrt};
    for (size_t i = 0; i < sizeof positive / sizeof *positive; i++) {
        GC(positive[i], P(3, 4));
        GC(positive[i], make(0.5, 2, false, true, 1, SH(2, 3, 4)));
    }
    case_fn nonzero[] = {f_abs, f_relu, f_reciprocal};
    for (size_t i = 0; i < sizeof nonzero / sizeof *nonzero; i++) {
        GC(nonzero[i], NZ(3, 4));
        GC(nonzero[i], make(0.5, 2, true, true, 2, SH(3, 4)));
    }
    GC(f_neg, R()); /* 0-dim */

    case_fn binary[] = {f_add, f_sub, f_mul, f_maximum, f_minimum};
    for (size_t i = 0; i < sizeof binary / sizeof *binary; i++) {
        GC(binary[i], R(3, 4), R(3, 4));
        GC(binary[i], R(3, 1), R(1, 4));     /* both broadcast */
        GC(binary[i], R(4), R(2, 3, 4));     /* leading dims */
        GC(binary[i], R(), RT(3, 4));        /* 0-dim with a transposed one */
        GC(binary[i], RS(3, 4), C(3, 4));    /* only one requires grad */
        GC(binary[i], C(2, 1, 4), RT(3, 1)); /* the other one */
    }
    GC(f_div, R(3, 4), NZ(3, 4));
    GC(f_div, R(3, 1), NZ(1, 4));
    GC(f_div, RT(3, 4), NZ(4));
    GC(f_div, NZ(2, 4), make(0.5, 2, true, true, 2, SH(3, 1, 4)));
    /* remainder: d/da = 1, d/db = -(a // b); random operands are far from its jumps at this
     * step (a jump within 1e-6 of a point has probability ~1e-6 per element) */
    case_fn floordivs[] = {f_remainder, f_floor_divide};
    for (size_t i = 0; i < sizeof floordivs / sizeof *floordivs; i++) {
        GC(floordivs[i], R(3, 4), NZ(3, 4));
        GC(floordivs[i], R(3, 1), NZ(1, 4));
        GC(floordivs[i], RT(3, 4), NZ(4));
        GC(floordivs[i], C(3, 4), NZ(3, 4));
        GC(floordivs[i], R(3, 4), make(0.5, 2, false, false, 1, SH(3, 4)));
    }
    GC(f_pow, P(3, 4), R(3, 4));
    GC(f_pow, P(3, 1), R(1, 4));
    GC(f_pow, make(0.5, 2, false, true, 1, SH(3, 4)), R(4));
    GC(f_scalars, R(3, 4));
    GC(f_pow_scalar_frac, P(2, 3));
    GC(f_where, R(3, 4), R(4), C(3, 4));
    GC(f_where, RT(3, 4), R(), C(3, 1));
    GC_F32(f_cast, R(3, 4), R(4));
    GC_F32(f_mixed, R(3, 4), R(3, 4));

    /* the special cases of pow's gradient: 0^b with b >= 0, and b == 0 */
    double av[4] = {0, 0, 2, 3}, bv[4] = {2, 0, 0, 1.5};
    tide_tensor *a = tide_from_data(av, 1, (int64_t[]){4}, TIDE_FLOAT64);
    tide_tensor *b = tide_from_data(bv, 1, (int64_t[]){4}, TIDE_FLOAT64);
    tide_requires_grad_(a, true);
    tide_requires_grad_(b, true);
    tide_tensor *p = tide_pow(a, b), *s = tide_sum(p, NULL, 0, false);
    CHECK(tide_backward(s, NULL, false) == 0, "pow backward: %s", tide_last_error());
    double ga[4], gb[4];
    tide_tensor *gat = tide_grad(a), *gbt = tide_grad(b);
    tide_to_buffer(gat, ga, sizeof ga);
    tide_to_buffer(gbt, gb, sizeof gb);
    CHECK(ga[0] == 0 && ga[1] == 0 && ga[2] == 0 && fabs(ga[3] - 1.5 * sqrt(3)) < 1e-12,
          "d pow/da: %g %g %g %g", ga[0], ga[1], ga[2], ga[3]);
    CHECK(gb[0] == 0 && gb[1] == 0 && fabs(gb[2] - log(2)) < 1e-12 &&
              fabs(gb[3] - pow(3, 1.5) * log(3)) < 1e-12,
          "d pow/db: %g %g %g %g", gb[0], gb[1], gb[2], gb[3]);
    tide_release(gat), tide_release(gbt), tide_release(p), tide_release(s);
    tide_release(a), tide_release(b);

    /* maximum's tie splits the gradient */
    double tv[3] = {1, 2, 3}, uv[3] = {1, 1, 4};
    tide_tensor *t = tide_from_data(tv, 1, (int64_t[]){3}, TIDE_FLOAT64);
    tide_tensor *u = tide_from_data(uv, 1, (int64_t[]){3}, TIDE_FLOAT64);
    tide_requires_grad_(t, true);
    tide_requires_grad_(u, true);
    tide_tensor *m = tide_maximum(t, u), *ms = tide_sum(m, NULL, 0, false);
    tide_backward(ms, NULL, false);
    double gt[3], gu[3];
    tide_tensor *gtt = tide_grad(t), *gut = tide_grad(u);
    tide_to_buffer(gtt, gt, sizeof gt);
    tide_to_buffer(gut, gu, sizeof gu);
    CHECK(gt[0] == 0.5 && gu[0] == 0.5 && gt[1] == 1 && gu[1] == 0 && gt[2] == 0 && gu[2] == 1,
          "maximum ties: %g %g %g / %g %g %g", gt[0], gt[1], gt[2], gu[0], gu[1], gu[2]);
    tide_release(gtt), tide_release(gut), tide_release(m), tide_release(ms);
    tide_release(t), tide_release(u);
}

/* ---- reductions ------------------------------------------------------------------------------ */

FN(f_sum_all, T(tide_sum(x[0], NULL, 0, false)))
/* times x, so the second derivative runs cumsum's formula on a gradient inside the graph */
FN(f_cumsum, T(tide_mul(T(tide_cumsum(x[0], 1)), x[0])))
/* CUMSUM's other kinds: cumprod's and logcumsumexp's formulas differentiated again */
FN(f_cumprod, T(tide_cumprod(x[0], 1)))
FN(f_logcumsumexp, T(tide_logcumsumexp(x[0], 0)))
FN(f_sum_1, T(tide_sum(x[0], (int[]){1}, 1, false)))
FN(f_sum_02k, T(tide_sum(x[0], (int[]){0, 2}, 2, true)))
FN(f_mean_neg, T(tide_mean(x[0], (int[]){-1}, 1, false)))
FN(f_mean_all, T(tide_mean(x[0], NULL, 0, true)))
FN(f_prod_1, T(tide_prod(x[0], (int[]){1}, 1, false)))
FN(f_prod_all, T(tide_prod(x[0], NULL, 0, false)))
FN(f_max_1, T(tide_max(x[0], (int[]){1}, 1, false)))
FN(f_max_all, T(tide_max(x[0], NULL, 0, false)))
FN(f_min_02k, T(tide_min(x[0], (int[]){0, 2}, 2, true)))
FN(f_min_0, T(tide_min(x[0], (int[]){0}, 1, false)))

static void test_reductions(void)
{
    GC(f_cumsum, R(3, 4));
    GC(f_cumsum, RT(2, 3));
    GC(f_cumprod, R(3, 4));
    GC(f_logcumsumexp, RT(3, 4));
    case_fn fs[] = {f_sum_all, f_sum_1, f_mean_neg, f_prod_1, f_prod_all, f_max_1, f_max_all,
                    f_min_0};
    for (size_t i = 0; i < sizeof fs / sizeof *fs; i++) {
        GC(fs[i], NZ(3, 4));
        GC(fs[i], make(0.5, 2, true, true, 1, SH(3, 4)));
        GC(fs[i], make(0.5, 2, true, true, 2, SH(3, 4)));
    }
    GC(f_sum_02k, R(2, 3, 4));
    GC(f_sum_02k, RT(2, 3, 4));
    GC(f_min_02k, R(2, 3, 4));
    GC(f_mean_all, RS(2, 3));
    GC(f_sum_all, R());
    GC(f_max_all, R());

    /* prod with zeros: one zero in a row gets the product of the others; two zeros give 0 */
    double v[8] = {2, 0, 3, 4, 0, 5, 0, 6};
    tide_tensor *x = tide_from_data(v, 2, (int64_t[]){2, 4}, TIDE_FLOAT64);
    tide_requires_grad_(x, true);
    tide_tensor *in[1] = {x};
    case_ctx c = {f_prod_1};
    CHECK(td_gradcheck(run_case, &c, in, 1, 1e-6, 1e-6, 1e-6) == 0, "prod with zeros: %s",
          tide_last_error());
    tide_set_grad(x, NULL);
    tide_tensor *pr = tide_prod(x, (int[]){1}, 1, false), *prs = tide_sum(pr, NULL, 0, false);
    tide_backward(prs, NULL, false);
    tide_release(pr), tide_release(prs);
    double g[8];
    tide_tensor *gt = tide_grad(x);
    tide_to_buffer(gt, g, sizeof g);
    CHECK(g[0] == 0 && g[1] == 24 && g[2] == 0 && g[3] == 0 && g[4] == 0 && g[6] == 0,
          "prod with zeros: %g %g %g %g | %g %g %g %g", g[0], g[1], g[2], g[3], g[4], g[5], g[6],
          g[7]);
    tide_release(gt), tide_release(x);

    /* max with ties splits the gradient evenly among them */
    double tv[4] = {1, 3, 3, 2};
    x = tide_from_data(tv, 1, (int64_t[]){4}, TIDE_FLOAT64);
    tide_requires_grad_(x, true);
    tide_tensor *m = tide_max(x, NULL, 0, false);
    tide_backward(m, NULL, false);
    gt = tide_grad(x);
    tide_to_buffer(gt, g, 4 * sizeof(double));
    CHECK(g[0] == 0 && g[1] == 0.5 && g[2] == 0.5 && g[3] == 0, "max ties: %g %g %g %g", g[0],
          g[1], g[2], g[3]);
    tide_release(gt), tide_release(m), tide_release(x);
}

/* ---- views and movement -------------------------------------------------------------------- */

FN(f_view, T(tide_view(x[0], 2, (int64_t[]){4, 3})))
FN(f_reshape, T(tide_reshape(x[0], 3, (int64_t[]){2, -1, 2})))
FN(f_permute, T(tide_permute(x[0], (int[]){2, 0, 1})))
FN(f_transpose, T(tide_mul(T(tide_transpose(x[0], 0, 1)), x[1])))
FN(f_expand, T(tide_mul(T(tide_expand(x[0], 3, (int64_t[]){2, 3, 4})), x[1])))
FN(f_expand_keep, T(tide_expand(x[0], 3, (int64_t[]){2, -1, 4})))
FN(f_slice1, T(tide_slice(x[0], 1, 1, 3, 1)))
FN(f_slice2, T(tide_slice(x[0], 1, 0, 5, 2)))
FN(f_slice3, T(tide_slice(x[0], -1, 1, 100, 3)))
FN(f_slice_empty, T(tide_add(T(tide_sum(T(tide_slice(x[0], 0, 2, 2, 1)), NULL, 0, false)),
                             T(tide_sum(x[0], NULL, 0, false)))))
FN(f_select, T(tide_select(x[0], 1, -2)))
FN(f_select0, T(tide_select(x[0], 0, 1)))
FN(f_squeeze, T(tide_unsqueeze(T(tide_squeeze(x[0], 1)), 0)))
FN(f_squeeze_all, T(tide_squeeze_all(x[0])))
FN(f_contiguous, T(tide_contiguous(T(tide_transpose(x[0], 0, 1)))))
FN(f_clone, T(tide_mul(T(tide_clone(x[0])), x[0])))
FN(f_cat0, T(tide_cat(x, 3, 0)))
FN(f_cat1, T(tide_cat(x, 2, -1)))
FN(f_stack, T(tide_stack(x, 2, 1)))
/* copy_ into a fresh tensor joins the graph: broadcast [3, 1] -> [2, 3, 4], dtype conversion */
static tide_tensor *copy_into(tide_tensor *const *x, tide_dtype dtype)
{
    tide_tensor *buf = T(tide_zeros(3, (int64_t[]){2, 3, 4}, dtype));
    if (tide_copy_(buf, x[0]) < 0)
        return NULL;
    return T(tide_mul(buf, x[1]));
}
FN(f_copy_, copy_into(x, TIDE_FLOAT64))
FN(f_copy_f32, copy_into(x, TIDE_FLOAT32))
static tide_tensor *f_cat_mixed(tide_tensor *const *x)
{
    tide_tensor *parts[2] = {T(tide_cast(x[0], TIDE_FLOAT32)), x[1]}; /* float32 with float64 */
    return T(tide_cat(parts, 2, 0));
}
FN(f_pad, T(tide_pad(x[0], (int64_t[]){1, 2, 0, 1}, 4, 0.5)))
FN(f_pad_crop, T(tide_pad(x[0], (int64_t[]){-1, 2, 1, -1}, 4, 0)))
FN(f_flip, T(tide_flip(x[0], (int[]){0, 2}, 2)))
static tide_tensor *f_diagonal(tide_tensor *const *x) /* squared, so the second order is not 0 */
{
    tide_tensor *d = T(tide_diagonal(x[0], -1, 2, 0));
    return T(tide_mul(d, d));
}
FN(f_unfold, T(tide_mul(T(tide_unfold(x[0], 1, 3, 2)), T(tide_unfold(x[0], 1, 3, 2)))))
/* the same element reached through two views: gradients add up */
FN(f_two_views, T(tide_mul(T(tide_select(x[0], 0, 0)), T(tide_slice(T(tide_transpose(x[0], 0, 1)),
                                                                      1, 1, 2, 1)))))

static void test_views(void)
{
    GC(f_view, R(3, 4));
    GC(f_reshape, R(2, 6));
    GC(f_reshape, RT(3, 4)); /* a reshape that copies */
    GC(f_permute, R(2, 3, 4));
    GC(f_permute, RT(2, 3, 4));
    GC(f_transpose, R(3, 4), R(4, 3));
    GC(f_expand, R(3, 1), RT(3, 4));
    GC(f_expand, R(4), R(2, 3, 4));
    GC(f_expand_keep, R(1, 3, 1));
    GC(f_slice1, R(2, 4, 3));
    GC(f_slice2, R(2, 5));
    GC(f_slice2, RT(2, 5));
    GC(f_slice2, R(2, 6));
    GC(f_slice3, RS(3, 7));
    GC(f_slice3, R(3, 2));
    GC(f_slice_empty, R(3, 2));
    GC(f_select, R(2, 3, 4));
    GC(f_select, RT(2, 3, 4));
    GC(f_select0, RS(3, 4));
    GC(f_squeeze, R(3, 1, 2));
    GC(f_squeeze_all, R(1, 3, 1));
    GC(f_contiguous, R(3, 4));
    GC(f_clone, RT(3, 4));
    GC(f_cat0, R(1, 3), RT(2, 3), C(2, 3));
    GC(f_cat0, R(2, 3), R(0), RS(1, 3)); /* a skipped 1-D empty input */
    GC(f_cat1, RS(2, 3), R(2, 1));
    GC(f_stack, R(2, 3), RT(2, 3));
    GC_F32(f_cat_mixed, R(2, 3), R(1, 3));
    GC(f_copy_, RT(3, 1), R(4));
    GC_F32(f_copy_f32, R(3, 1), R(4));
    GC(f_pad, R(2, 3));
    GC(f_pad, RT(2, 3));
    GC(f_pad_crop, R(3, 4));
    GC(f_flip, R(2, 3, 4));
    GC(f_flip, RS(2, 3, 4));
    GC(f_two_views, R(3, 3));
    GC(f_diagonal, R(4, 2, 4));
    GC(f_diagonal, RT(4, 2, 4));
    GC(f_unfold, R(2, 7));
    GC(f_unfold, RT(2, 7));
}

/* ---- indexing ------------------------------------------------------------------------------ */

static tide_tensor *index_2x3(void)
{
    return ints((int64_t[]){2, 0, 2, 1, 1, 3}, SH(2, 3));
}

FN(f_gather, T(tide_gather(x[0], 1, T(index_2x3()))))
FN(f_gather0, T(tide_gather(x[0], 0, T(ints((int64_t[]){1, 0, 1, 1}, SH(2, 2))))))
FN(f_scatter_add, T(tide_scatter_add(x[0], 1, T(index_2x3()), x[1])))
FN(f_index_select, T(tide_index_select(x[0], 1, T(ints((int64_t[]){3, 0, 3, 1}, SH(4))))))
FN(f_index_select0, T(tide_index_select(x[0], 0, T(ints((int64_t[]){2}, NULL, 0)))))
FN(f_embedding, T(tide_embedding(x[0], T(ints((int64_t[]){4, 1, 1, 0, 4, 2}, SH(3, 2))))))
FN(f_masked_fill, T(tide_masked_fill(x[0], T(tide_gt(x[1], T(tide_number(0)))), 7)))

static void test_indexing(void)
{
    GC(f_gather, R(2, 4));
    GC(f_gather, RT(3, 4));
    GC(f_gather0, RS(3, 3));
    GC(f_scatter_add, R(3, 4), R(2, 3));
    GC(f_scatter_add, RT(2, 4), RS(3, 5)); /* src larger than the index */
    GC(f_index_select, R(2, 4));
    GC(f_index_select, RT(3, 4));
    GC(f_index_select0, RS(3, 2));
    GC(f_embedding, R(5, 3));
    GC(f_embedding, RT(5, 3));
    GC(f_masked_fill, R(3, 4), C(4));
}

/* ---- matmul ------------------------------------------------------------------------------------ */

FN(f_matmul, T(tide_matmul(x[0], x[1])))

static void test_matmul(void)
{
    GC(f_matmul, R(4), R(4));             /* dot */
    GC(f_matmul, R(3, 4), R(4, 2));       /* matrix */
    GC(f_matmul, RT(3, 4), RT(4, 2));     /* transposed operands */
    GC(f_matmul, RS(3, 4), R(4));         /* matrix-vector */
    GC(f_matmul, R(4), RT(4, 3));         /* vector-matrix */
    GC(f_matmul, R(2, 3, 4), R(4, 2));    /* batch against a matrix */
    GC(f_matmul, R(2, 1, 3, 4), RT(3, 4, 2)); /* batch dims broadcast */
    /* a batch against a matrix is one product of the merged rows (ops/matmul.c): a linear's
     * transposed weight; rows that do not merge (transposed, sliced) take the expand */
    GC(f_matmul, R(2, 3, 3, 4), RT(4, 2));
    GC(f_matmul, RT(2, 3, 4), R(4, 2));
    GC(f_matmul, RS(2, 3, 4), RT(4, 2));
    GC(f_matmul, R(3), R(2, 3, 2));       /* vector against a batch */
    GC(f_matmul, R(2, 2, 3), R(3));
    GC(f_matmul, C(3, 4), R(4, 2));
}

/* ---- convolution and pooling --------------------------------------------------------------------- */

FN(f_conv, T(tide_conv2d(x[0], x[1], x[2], NULL, NULL, NULL, 1)))
FN(f_conv_strided, T(tide_conv2d(x[0], x[1], NULL, (int[]){2, 1}, (int[]){1, 2}, (int[]){1, 2}, 2)))
FN(f_conv_gi, T(tide_conv2d_grad_input(x[0], x[1], (int64_t[]){5, 4}, (int[]){2, 1},
                                       (int[]){1, 0}, NULL, 1)))
FN(f_conv_gw, T(tide_conv2d_grad_weight(x[0], x[1], (int64_t[]){2, 3}, (int[]){1, 2},
                                        (int[]){1, 1}, NULL, 1)))
FN(f_maxpool, T(tide_max_pool2d(x[0], (int[]){2, 2}, NULL, NULL, NULL)))
FN(f_maxpool_pad, T(tide_max_pool2d(x[0], (int[]){3, 2}, (int[]){2, 1}, (int[]){1, 1}, NULL)))
FN(f_avgpool, T(tide_avg_pool2d(x[0], (int[]){2, 3}, (int[]){1, 2}, (int[]){1, 1}, true)))
FN(f_avgpool_nopad, T(tide_avg_pool2d(x[0], (int[]){3, 3}, (int[]){2, 2}, (int[]){1, 1}, false)))
FN(f_avgpool_grad, T(tide_avg_pool2d_grad(x[0], (int64_t[]){5, 4}, (int[]){3, 2}, (int[]){2, 1},
                                          (int[]){1, 1}, false)))
FN(f_adaptive, T(tide_adaptive_avg_pool2d(x[0], 2, 3)))
FN(f_adaptive1, T(tide_adaptive_avg_pool2d(x[0], 1, 1)))

static void test_conv_pool(void)
{
    GC(f_conv, R(2, 3, 5, 4), R(2, 3, 3, 2), R(2));
    GC(f_conv, RS(1, 2, 4, 4), RT(3, 2, 2, 2), C(3));
    GC(f_conv_strided, R(1, 4, 5, 6), R(2, 2, 2, 3));
    /* conv2d's gradients are themselves differentiable: x [1, 2, 5, 4], w [3, 2, 3, 2] */
    GC(f_conv_gi, R(1, 3, 3, 3), R(3, 2, 3, 2));
    GC(f_conv_gw, R(2, 2, 4, 5), R(2, 3, 5, 3));
    GC(f_maxpool, R(1, 2, 4, 6));
    GC(f_maxpool, RT(2, 1, 4, 4));
    GC(f_maxpool_pad, R(1, 2, 5, 4));
    GC(f_avgpool, R(1, 2, 4, 5));
    GC(f_avgpool_nopad, RS(2, 2, 5, 5));
    GC(f_avgpool_grad, R(1, 2, 3, 5));
    GC(f_adaptive, R(1, 2, 5, 7));
    GC(f_adaptive1, RT(2, 2, 3, 3));
}

/* ---- composites ------------------------------------------------------------------------------- */

static tide_tensor *targets(void) { return ints((int64_t[]){2, 0, 3}, SH(3)); }

FN(f_softmax, T(tide_softmax(x[0], -1)))
FN(f_softmax0, T(tide_softmax(x[0], 0)))
FN(f_log_softmax, T(tide_log_softmax(x[0], 1)))
FN(f_logsumexp, T(tide_logsumexp(x[0], (int[]){0, 2}, 2, false)))
FN(f_layer_norm, T(tide_layer_norm(x[0], 1, x[1], x[2], 1e-5)))
FN(f_layer_norm2, T(tide_layer_norm(x[0], 2, NULL, NULL, 1e-5)))
FN(f_batch_norm, T(tide_batch_norm(x[0], NULL, NULL, x[1], x[2], true, 0.1, 1e-5)))
FN(f_batch_norm_stats, T(tide_batch_norm(x[0], x[3], x[4], x[1], x[2], true, 0.1, 1e-5)))
FN(f_batch_norm_eval, T(tide_batch_norm(x[0], x[3], x[4], x[1], x[2], false, 0.1, 1e-5)))
FN(f_linear, T(tide_linear(x[0], x[1], x[2])))
FN(f_linear_nobias, T(tide_linear(x[0], x[1], NULL)))
static tide_tensor *f_dropout(tide_tensor *const *x)
{
    tide_manual_seed(7); /* the same mask at every evaluation */
    return T(tide_dropout(x[0], 0.4, true));
}
FN(f_ce_mean, T(tide_cross_entropy(x[0], T(targets()), TIDE_REDUCTION_MEAN, 0, -100)))
FN(f_ce_sum_ls, T(tide_cross_entropy(x[0], T(targets()), TIDE_REDUCTION_SUM, 0.2, -100)))
FN(f_ce_ignore, T(tide_cross_entropy(x[0], T(ints((int64_t[]){1, -100, 0}, SH(3))),
                                     TIDE_REDUCTION_MEAN, 0, -100)))
FN(f_ce_spatial, T(tide_cross_entropy(x[0], T(ints((int64_t[]){0, 2, 1, 1}, SH(2, 2))),
                                      TIDE_REDUCTION_NONE, 0.1, -100)))
FN(f_nll, T(tide_nll_loss(T(tide_log_softmax(x[0], 1)), T(targets()), TIDE_REDUCTION_MEAN, -100)))
FN(f_mse, T(tide_mse_loss(x[0], x[1], TIDE_REDUCTION_MEAN)))
FN(f_mse_none, T(tide_mse_loss(x[0], x[1], TIDE_REDUCTION_NONE)))
FN(f_bce, T(tide_binary_cross_entropy_with_logits(x[0], x[1], TIDE_REDUCTION_SUM)))
FN(f_gelu, T(tide_gelu(x[0], false)))
FN(f_gelu_tanh, T(tide_gelu(x[0], true)))
FN(f_silu, T(tide_silu(x[0])))

static void test_composites(void)
{
    GC(f_softmax, R(3, 4));
    GC(f_softmax0, RT(3, 4));
    GC(f_log_softmax, RS(3, 4));
    GC(f_logsumexp, R(2, 3, 4));
    GC(f_layer_norm, R(3, 4), R(4), R(4));
    GC(f_layer_norm, RT(3, 4), C(4), R(4));
    GC(f_layer_norm2, R(2, 3, 4));
    GC(f_batch_norm, R(4, 3), R(3), R(3));
    GC(f_batch_norm, R(3, 2, 2, 2), R(2), R(2));
    /* training with running statistics: updated in place (outside the graph) at every call */
    GC(f_batch_norm_stats, R(4, 3), R(3), R(3), C(3), make(0.5, 2, false, false, 0, SH(3)));
    GC(f_batch_norm_eval, RT(2, 3, 4), R(3), R(3), C(3), make(0.5, 2, false, false, 0, SH(3)));
    GC(f_linear, R(3, 4), R(2, 4), R(2));
    GC(f_linear, R(2, 3, 4), RT(2, 4), R(2));
    GC(f_linear_nobias, RS(3, 4), R(5, 4));
    GC(f_dropout, R(4, 5));
    GC(f_ce_mean, R(3, 4));
    GC(f_ce_sum_ls, RT(3, 4));
    GC(f_ce_ignore, R(3, 4));
    GC(f_ce_spatial, R(2, 3, 2));
    GC(f_nll, R(3, 4));
    GC(f_mse, R(3, 4), R(3, 4));
    GC(f_mse_none, RT(3, 4), C(3, 4));
    GC(f_bce, R(3, 4), make(0, 1, false, false, 0, SH(3, 4)));
    GC(f_bce, make(5, 30, true, true, 0, SH(2, 3)), make(0, 1, false, true, 0, SH(2, 3)));
    GC(f_gelu, R(3, 4));
    GC(f_gelu, make(3, 6, true, true, 0, SH(8))); /* the tails */
    GC(f_gelu_tanh, RT(3, 4));
    GC(f_silu, RS(3, 4));
}

/* ---- the engine ---------------------------------------------------------------------------- */

static tide_tensor *vec(const double *v, int64_t n, bool grad)
{
    tide_tensor *t = tide_from_data(v, 1, &n, TIDE_FLOAT64);
    if (grad)
        tide_requires_grad_(t, true);
    return t;
}

static bool grad_is(tide_tensor *t, const double *want, int64_t n)
{
    tide_tensor *g = tide_grad(t);
    double got[16];
    bool ok = g && tide_numel(g) == n && tide_to_buffer(g, got, sizeof(double) * (size_t)n) == 0;
    for (int64_t i = 0; ok && i < n; i++)
        ok = fabs(got[i] - want[i]) < 1e-12;
    tide_release(g);
    return ok;
}

#define CHECK_RC_ERROR(call, ...)                                                                  \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        const char *frags_[] = {__VA_ARGS__, NULL};                                                \
        bool ok_ = rc_ == -1;                                                                      \
        for (int k_ = 0; ok_ && frags_[k_]; k_++)                                                  \
            ok_ = strstr(tide_last_error(), frags_[k_]) != NULL;                                   \
        CHECK(ok_, "%s gave %d with error \"%s\"", #call, rc_, tide_last_error());                \
    } while (0)

static void test_accumulation_and_retain(void)
{
    double xv[3] = {1, 2, 3};
    tide_tensor *x = vec(xv, 3, true);
    CHECK(tide_requires_grad(x) && tide_grad_fn_name(x) == NULL, "a leaf");
    CHECK(tide_grad(x) == NULL, "no grad before backward");
    tide_tensor *y = tide_mul(x, x), *s = tide_sum(y, NULL, 0, false);
    CHECK(tide_grad_fn_name(y) && strcmp(tide_grad_fn_name(y), "mul") == 0, "grad_fn %s",
          tide_grad_fn_name(y));
    CHECK(tide_backward(s, NULL, true) == 0, "backward: %s", tide_last_error());
    CHECK(grad_is(x, (double[]){2, 4, 6}, 3), "x*x");
    tide_tensor *g1 = tide_grad(x);
    CHECK(tide_backward(s, NULL, false) == 0, "retained: %s", tide_last_error());
    CHECK(grad_is(x, (double[]){4, 8, 12}, 3), "accumulated");
    tide_tensor *g2 = tide_grad(x);
    CHECK(g1 == g2, "accumulated in place into the same grad tensor, as PyTorch");
    tide_release(g1), tide_release(g2);
    CHECK_RC_ERROR(tide_backward(s, NULL, false), "second time", "retain_graph");
    CHECK(grad_is(x, (double[]){4, 8, 12}, 3), "unchanged by the failed backward");
    tide_release(s), tide_release(y);

    /* a non-scalar root needs a gradient of its shape */
    y = tide_mul_scalar(x, 3);
    CHECK_RC_ERROR(tide_backward(y, NULL, false), "one element", "[3]");
    tide_tensor *bad = vec((double[]){1, 1}, 2, false);
    CHECK_RC_ERROR(tide_backward(y, bad, false), "[2]", "[3]");
    tide_tensor *gy = vec((double[]){1, 0.5, 0}, 3, false);
    tide_set_grad(x, NULL);
    CHECK(tide_backward(y, gy, false) == 0, "with a gradient: %s", tide_last_error());
    CHECK(grad_is(x, (double[]){3, 1.5, 0}, 3), "3x with a gradient");
    tide_release(bad), tide_release(gy), tide_release(y);

    /* a leaf as the root */
    tide_set_grad(x, NULL);
    tide_tensor *one = tide_ones(1, (int64_t[]){3}, TIDE_FLOAT64);
    CHECK(tide_backward(x, one, false) == 0, "leaf root: %s", tide_last_error());
    CHECK(grad_is(x, (double[]){1, 1, 1}, 3), "leaf root");
    tide_release(one);

    /* a root that needs no grad */
    tide_tensor *c = vec(xv, 3, false), *cs = tide_sum(c, NULL, 0, false);
    CHECK_RC_ERROR(tide_backward(cs, NULL, false), "does not require grad");
    tide_release(cs), tide_release(c);

    /* two leaves fed the same gradient get their own tensors */
    tide_tensor *a = vec(xv, 3, true), *b = vec(xv, 3, true);
    tide_tensor *ab = tide_add(a, b), *abs_ = tide_sum(ab, NULL, 0, false);
    tide_backward(abs_, NULL, false);
    tide_tensor *ga = tide_grad(a), *gb = tide_grad(b);
    CHECK(ga && gb && !tide_shares_storage(ga, gb), "grads of a and b share memory");
    tide_fill_(ga, 5); /* an in-place update of one grad leaves the other */
    CHECK(grad_is(b, (double[]){1, 1, 1}, 3), "b's grad changed with a's");
    tide_release(ga), tide_release(gb), tide_release(ab), tide_release(abs_);
    tide_release(a), tide_release(b);

    /* a diamond: x feeds two paths that meet again */
    tide_set_grad(x, NULL);
    tide_tensor *e = tide_exp(x), *p = tide_mul(e, x), *q = tide_add(p, e);
    tide_tensor *qs = tide_sum(q, NULL, 0, false);
    tide_backward(qs, NULL, false);
    double want[3];
    for (int i = 0; i < 3; i++)
        want[i] = exp(xv[i]) * (xv[i] + 2);
    tide_tensor *gx = tide_grad(x);
    double got[3];
    tide_to_buffer(gx, got, sizeof got);
    CHECK(fabs(got[0] - want[0]) < 1e-12 && fabs(got[2] - want[2]) < 1e-10, "diamond %g vs %g",
          got[2], want[2]);
    tide_release(gx), tide_release(e), tide_release(p), tide_release(q), tide_release(qs);

    /* float32 leaves get float32 grads */
    tide_tensor *f = tide_ones(1, (int64_t[]){2}, TIDE_FLOAT32);
    tide_requires_grad_(f, true);
    tide_tensor *fd = tide_cast(f, TIDE_FLOAT64), *fs = tide_sum(fd, NULL, 0, false);
    tide_backward(fs, NULL, false);
    tide_tensor *gf = tide_grad(f);
    CHECK(gf && tide_get_dtype(gf) == TIDE_FLOAT32, "float32 grad");
    tide_release(gf), tide_release(fd), tide_release(fs), tide_release(f);
    tide_release(x);
}

/* ---- backward hooks ------------------------------------------------------------------------ */

/* What the hooks saw: the leaves in the order grad_ready named them, each one's grad then. */
typedef struct hook_log {
    tide_tensor *leaves[8];
    double grad_at[8][3];
    int nready, ndone, ready_before_done;
    int fail_ready;     /* the grad_ready call (1-based) that returns -1; 0: none */
    bool fail_silently; /* that -1 comes without an error message */
    bool fail_done;
} hook_log;

static int log_ready(void *ctx, tide_tensor *leaf)
{
    hook_log *h = ctx;
    if (++h->nready == h->fail_ready)
        return h->fail_silently ? -1 : td_error("grad_ready hook: no thanks");
    if (h->nready <= 8) {
        tide_tensor *g = tide_grad(leaf);
        h->leaves[h->nready - 1] = leaf;
        if (g && tide_numel(g) <= 3)
            tide_to_buffer(g, h->grad_at[h->nready - 1], sizeof(double) * (size_t)tide_numel(g));
        tide_release(g);
    }
    return 0;
}

static int log_done(void *ctx)
{
    hook_log *h = ctx;
    h->ndone++;
    h->ready_before_done = h->nready;
    return h->fail_done ? td_error("done hook: no thanks") : 0;
}

/* The grad each leaf held when its hook ran is its final grad. */
static bool fired_final(const hook_log *h, int k, tide_tensor *leaf)
{
    tide_tensor *g = tide_grad(leaf);
    double got[3];
    int64_t n = g ? tide_numel(g) : 0;
    bool ok = g && h->leaves[k] == leaf && n <= 3 &&
              tide_to_buffer(g, got, sizeof(double) * (size_t)n) == 0;
    for (int64_t i = 0; ok && i < n; i++)
        ok = got[i] == h->grad_at[k][i];
    tide_release(g);
    return ok;
}

/* x feeds the add next to the loss and, through tanh, the mul far from it: its hook must wait
 * for both, and fire once. */
static void test_hooks_shared_leaf(void)
{
    hook_log h = {0};
    tide_set_backward_hooks(log_ready, log_done, &h);
    tide_tensor *x = vec((double[]){0.5, -1, 2}, 3, true);
    tide_tensor *w = vec((double[]){1, 2, -0.5}, 3, true);
    tide_tensor *a = tide_mul(x, w), *b = tide_tanh(a), *c = tide_add(b, x);
    tide_tensor *s = tide_sum(c, NULL, 0, false);
    CHECK(tide_backward(s, NULL, false) == 0, "backward: %s", tide_last_error());
    CHECK(h.nready == 2 && h.ndone == 1 && h.ready_before_done == 2, "%d ready, %d done",
          h.nready, h.ndone);
    bool x_first = h.leaves[0] == x;
    CHECK(fired_final(&h, x_first ? 0 : 1, x) && fired_final(&h, x_first ? 1 : 0, w),
          "x's grad at its hook was not its final grad (%g, want the full sum)", h.grad_at[0][0]);
    double want[3];
    for (int i = 0; i < 3; i++) {
        double xv = (double[]){0.5, -1, 2}[i], wv = (double[]){1, 2, -0.5}[i], t = tanh(xv * wv);
        want[i] = 1 + (1 - t * t) * wv;
    }
    CHECK(grad_is(x, want, 3), "x's grad is not 1 + (1 - tanh(xw)^2) w");
    tide_release(s), tide_release(c), tide_release(b), tide_release(a);

    /* the same leaf twice in one node, and a leaf as the root: once each */
    h = (hook_log){0};
    tide_set_grad(x, NULL);
    tide_tensor *xx = tide_mul(x, x), *xs = tide_sum(xx, NULL, 0, false);
    CHECK(tide_backward(xs, NULL, false) == 0 && h.nready == 1 && h.leaves[0] == x &&
              fired_final(&h, 0, x), "x*x: %d ready", h.nready);
    tide_release(xs), tide_release(xx);
    h = (hook_log){0};
    tide_tensor *one = tide_ones(1, (int64_t[]){3}, TIDE_FLOAT64);
    CHECK(tide_backward(w, one, false) == 0 && h.nready == 1 && h.leaves[0] == w &&
              h.ndone == 1, "a leaf root: %d ready, %d done", h.nready, h.ndone);
    tide_release(one);

    /* tide_autograd_grad touches no .grad: no hooks */
    h = (hook_log){0};
    tide_tensor *y = tide_mul(x, w), *ys = tide_sum(y, NULL, 0, false), *gx = NULL;
    CHECK(tide_autograd_grad(&ys, NULL, 1, &x, 1, false, false, false, &gx) == 0 &&
              h.nready == 0 && h.ndone == 0, "grad fired %d ready, %d done", h.nready, h.ndone);
    tide_release(gx), tide_release(ys), tide_release(y);
    tide_set_backward_hooks(NULL, NULL, NULL);
    tide_release(x), tide_release(w);
}

/* A chain x*w1*w2*w3: the leaf nearest the loss is final first. Errors from either hook stop
 * backward with their message; removed hooks are not called. */
static void test_hooks_order_and_errors(void)
{
    hook_log h = {0};
    tide_tensor *x = vec((double[]){1, 2, 3}, 3, false), *wv[3];
    for (int i = 0; i < 3; i++)
        wv[i] = vec((double[]){1.5, -1, 0.5}, 3, true);
    tide_tensor *y[3];
    for (int pass = 0; pass < 5; pass++) {
        h = (hook_log){.fail_ready = pass == 1 ? 2 : pass == 2 ? 1 : 0,
                       .fail_silently = pass == 2, .fail_done = pass == 3};
        tide_set_backward_hooks(pass == 4 ? NULL : log_ready, pass == 4 ? NULL : log_done, &h);
        y[0] = tide_mul(x, wv[0]), y[1] = tide_mul(y[0], wv[1]), y[2] = tide_mul(y[1], wv[2]);
        tide_tensor *loss = tide_sum(y[2], NULL, 0, false);
        int rc = tide_backward(loss, NULL, false);
        if (pass == 0)
            CHECK(rc == 0 && h.nready == 3 && h.leaves[0] == wv[2] && h.leaves[1] == wv[1] &&
                      h.leaves[2] == wv[0] && h.ndone == 1 && h.ready_before_done == 3,
                  "chain order: %d ready, %d done (%s)", h.nready, h.ndone, tide_last_error());
        else if (pass == 1)
            CHECK(rc == -1 && strstr(tide_last_error(), "grad_ready hook: no thanks") &&
                      h.nready == 2 && h.ndone == 0, "a failing grad_ready: %d, %s", rc,
                  tide_last_error());
        else if (pass == 2)
            CHECK(rc == -1 && strstr(tide_last_error(), "grad_ready hook failed"),
                  "a silent -1: %s", tide_last_error());
        else if (pass == 3)
            CHECK(rc == -1 && strstr(tide_last_error(), "done hook: no thanks") && h.ndone == 1,
                  "a failing done: %d, %s", rc, tide_last_error());
        else
            CHECK(rc == 0 && h.nready == 0 && h.ndone == 0, "removed hooks ran");
        tide_release(loss);
        for (int i = 0; i < 3; i++)
            tide_release(y[i]);
    }
    tide_set_backward_hooks(NULL, NULL, NULL);
    for (int i = 0; i < 3; i++)
        tide_release(wv[i]);
    tide_release(x);
}

static void *grad_mode_elsewhere(void *arg)
{
    (void)arg;
    return (void *)(intptr_t)tide_is_grad_enabled();
}

/* grad_fn names the op the user called, not the primitive that made the result: sum drops its
 * reduced dims with a RESHAPE view, mean is sum / count, softmax ends in a div. */
static bool named(tide_tensor *t, const char *want)
{
    const char *got = t ? tide_grad_fn_name(t) : "(NULL)";
    bool ok = got && strcmp(got, want) == 0;
    CHECK(ok, "grad_fn %s, expected %s (%s)", got ? got : "none", want, tide_last_error());
    tide_release(t);
    return ok;
}

static void test_grad_fn_names(void)
{
    double xv[6] = {1, -2, 3, 0.5, 4, -1};
    int64_t shape[2] = {2, 3}, wshape[2] = {4, 3}, n2 = 2;
    tide_tensor *x = tide_from_data(xv, 2, shape, TIDE_FLOAT64);
    tide_requires_grad_(x, true);
    tide_tensor *w = tide_ones(2, wshape, TIDE_FLOAT64);
    int64_t tv[2] = {0, 2};
    tide_tensor *target = tide_from_data(tv, 1, &n2, TIDE_INT64);
    int dim1 = 1;
    named(tide_sum(x, NULL, 0, false), "sum");
    named(tide_sum(x, &dim1, 1, false), "sum");
    named(tide_max(x, NULL, 0, false), "max");
    named(tide_mean(x, NULL, 0, false), "mean");
    named(tide_softmax(x, 1), "softmax");
    named(tide_log_softmax(x, 1), "log_softmax");
    named(tide_logsumexp(x, &dim1, 1, false), "logsumexp");
    named(tide_linear(x, w, NULL), "linear");
    named(tide_cross_entropy(x, target, TIDE_REDUCTION_MEAN, 0, -100), "cross_entropy");
    named(tide_layer_norm(x, 1, NULL, NULL, 1e-5), "layer_norm");
    named(tide_gelu(x, false), "gelu");
    named(tide_view(x, 1, (int64_t[]){6}), "view");
    named(tide_unsqueeze(x, 0), "unsqueeze");
    named(tide_transpose(x, 0, 1), "transpose");
    named(tide_clone(x), "clone");
    tide_tensor *row = tide_select(x, 0, 0);
    named(tide_matmul(row, row), "matmul"); /* 1-D @ 1-D: a view of a [1, 1] product */
    tide_release(row);
    /* A primitive after a composite, or after one that failed, has its own name again. */
    tide_tensor *s = tide_sum(x, NULL, 0, false);
    named(tide_exp(s), "exp");
    CHECK(tide_softmax(x, 5) == NULL, "softmax over dim 5 of a 2-D tensor fails");
    named(tide_mul(x, x), "mul");
    /* A binding names its own composite; an enclosing name wins, and leaving restores it. */
    const char *outer = tide_begin_op("my_op");
    named(tide_mul(x, x), "my_op");
    const char *inner = tide_begin_op("inner");
    named(tide_sum(x, NULL, 0, false), "my_op");
    tide_end_op(inner);
    tide_end_op(outer);
    named(tide_mul(x, x), "mul");
    /* The backward-twice error names sum, which the user called. */
    CHECK(tide_backward(s, NULL, false) == 0, "backward: %s", tide_last_error());
    CHECK_RC_ERROR(tide_backward(s, NULL, false), "second time", "'sum'");
    CHECK(!strstr(tide_last_error(), "reshape"), "no reshape in \"%s\"", tide_last_error());
    tide_release(s);
    tide_release(target), tide_release(w), tide_release(x);
}

static void test_modes_and_detach(void)
{
    tide_tensor *x = vec((double[]){1, 2}, 2, true);
    CHECK(tide_is_grad_enabled(), "on by default");
    CHECK(tide_set_grad_enabled(false) == true, "previous mode");
    tide_tensor *y = tide_mul(x, x);
    CHECK(!tide_requires_grad(y) && !tide_grad_fn_name(y), "no_grad records nothing");
    pthread_t th;
    void *other;
    pthread_create(&th, NULL, grad_mode_elsewhere, NULL);
    pthread_join(th, &other);
    CHECK(other == (void *)1, "grad mode is per thread");
    /* in place on a leaf works under no_grad (an optimizer step) */
    CHECK(tide_fill_(x, 3) == 0, "fill_ under no_grad: %s", tide_last_error());
    tide_tensor *upd = tide_mul_scalar(x, 2);
    CHECK(tide_copy_(x, upd) == 0, "copy_ under no_grad: %s", tide_last_error());
    CHECK(tide_set_grad_enabled(true) == false, "restored");
    tide_release(upd), tide_release(y);

    tide_tensor *d = tide_detach(x);
    CHECK(d && !tide_requires_grad(d) && tide_shares_storage(d, x), "detach shares storage");
    y = tide_mul(x, x);
    tide_tensor *dy = tide_detach(y);
    CHECK(dy && !tide_grad_fn_name(dy) && !tide_requires_grad(dy), "detached non-leaf");
    tide_tensor *z = tide_mul(dy, x), *zs = tide_sum(z, NULL, 0, false);
    tide_backward(zs, NULL, false);
    CHECK(grad_is(x, (double[]){36, 36}, 2), "gradient stops at detach");
    tide_release(z), tide_release(zs), tide_release(dy), tide_release(y), tide_release(d);

    /* requires_grad_ rules */
    tide_tensor *i = tide_zeros(1, (int64_t[]){2}, TIDE_INT64);
    CHECK_RC_ERROR(tide_requires_grad_(i, true), "floating", "int64");
    tide_tensor *nl = tide_mul(x, x);
    CHECK_RC_ERROR(tide_requires_grad_(nl, false), "leaf");
    CHECK(tide_requires_grad_(nl, true) == 0, "no-op on a non-leaf");
    CHECK(tide_grad(nl) == NULL, "a non-leaf has no grad");
    tide_tensor *g3 = tide_zeros(1, (int64_t[]){3}, TIDE_FLOAT64);
    CHECK_RC_ERROR(tide_set_grad(x, g3), "set_grad", "[3]");
    CHECK(tide_requires_grad_(x, false) == 0 && !tide_requires_grad(x), "turned off");
    tide_release(g3), tide_release(nl), tide_release(i), tide_release(x);
}

static void test_inplace(void)
{
    tide_tensor *x = vec((double[]){1, 2}, 2, true);
    CHECK_RC_ERROR(tide_fill_(x, 0), "leaf", "requires grad", "in-place");
    double v[2];
    tide_to_buffer(x, v, sizeof v);
    CHECK(v[0] == 1 && v[1] == 2, "the refused write left the data: %g %g", v[0], v[1]);
    tide_tensor *c = vec((double[]){5, 6}, 2, false);
    CHECK_RC_ERROR(tide_copy_(x, c), "leaf", "in-place");
    tide_tensor *xv = tide_select(x, 0, 0); /* a view of the leaf is in the graph */
    CHECK_RC_ERROR(tide_fill_(xv, 0), "graph", "select", "view its memory");
    /* a graph tensor nothing else views is rewired: overwritten by a constant, it leaves the
     * graph; overwritten by a graph tensor, its gradient goes there */
    tide_tensor *y = tide_mul(x, x);
    tide_tensor *yv = tide_reshape(y, 2, (int64_t[]){1, 2});
    CHECK_RC_ERROR(tide_copy_(y, c), "graph", "mul", "view its memory");
    tide_release(yv);
    CHECK(tide_copy_(y, c) == 0 && !tide_requires_grad(y) && !tide_grad_fn_name(y),
          "copy_ of a constant into a graph tensor: %s", tide_last_error());
    tide_release(y);
    y = tide_mul(x, x);
    tide_tensor *buf = tide_zeros(2, (int64_t[]){3, 2}, TIDE_FLOAT64);
    CHECK(tide_copy_(buf, y) == 0 && tide_grad_fn_name(buf) &&
              strcmp(tide_grad_fn_name(buf), "copy") == 0,
          "copy_ of a graph tensor into a fresh one: %s", tide_last_error());
    tide_tensor *bs = tide_sum(buf, NULL, 0, false);
    CHECK(tide_backward(bs, NULL, false) == 0, "through copy_: %s", tide_last_error());
    CHECK(grad_is(x, (double[]){6, 12}, 2), "copy_ broadcast [2] to [3, 2]: 3 * 2x");
    tide_set_grad(x, NULL);
    tide_release(bs);
    /* y = x*x, then y += y (in place, as Lua's y:add_(y)): d/dx = 4x */
    tide_tensor *y2 = tide_mul(x, x), *sum2 = tide_add(y2, y2);
    CHECK(tide_copy_(y2, sum2) == 0, "y += y: %s", tide_last_error());
    tide_tensor *y2s = tide_sum(y2, NULL, 0, false);
    CHECK(tide_backward(y2s, NULL, false) == 0, "y += y backward: %s", tide_last_error());
    CHECK(grad_is(x, (double[]){4, 8}, 2), "y += y gradient");
    tide_set_grad(x, NULL);
    tide_release(y2), tide_release(sum2), tide_release(y2s);
    /* a saved tensor overwritten in place: x*y saves y, then y changes */
    tide_tensor *y3 = tide_mul_scalar(x, 2), *p3 = tide_mul(x, y3);
    tide_tensor *p3s = tide_sum(p3, NULL, 0, false);
    tide_tensor *y3c = tide_clone(y3);
    CHECK(tide_copy_(y3, y3c) == 0, "rewire: %s", tide_last_error());
    CHECK_RC_ERROR(tide_backward(p3s, NULL, false), "modified by an in-place operation");
    tide_release(y3), tide_release(p3), tide_release(p3s), tide_release(y3c);
    /* the source requires grad but the destination's memory is seen by another tensor */
    tide_tensor *plain = tide_zeros(2, (int64_t[]){3, 2}, TIDE_FLOAT64);
    tide_tensor *row = tide_select(plain, 0, 1);
    CHECK_RC_ERROR(tide_copy_(row, y), "source requires grad", "shares its memory");
    tide_release(row), tide_release(plain);
    /* in place on a detached alias is allowed; the saved tensor's version catches it */
    tide_tensor *w = vec((double[]){3, 4}, 2, false);
    tide_tensor *p = tide_mul(x, w), *ps = tide_sum(p, NULL, 0, false);
    CHECK(tide_fill_(w, 0) == 0, "plain tensor in place: %s", tide_last_error());
    CHECK_RC_ERROR(tide_backward(ps, NULL, false), "modified by an in-place operation", "mul");
    tide_tensor *xd = tide_detach(x);
    tide_tensor *e = tide_exp(x), *es = tide_sum(e, NULL, 0, false);
    CHECK(tide_fill_(xd, 1) == 0, "detached in place: %s", tide_last_error());
    CHECK_RC_ERROR(tide_backward(es, NULL, false), "modified by an in-place operation", "exp");
    /* a view's in-place write bumps the shared version too */
    tide_tensor *w2 = vec((double[]){3, 4}, 2, false);
    tide_tensor *p2 = tide_mul(x, w2), *p2s = tide_sum(p2, NULL, 0, false);
    tide_tensor *w2v = tide_slice(w2, 0, 1, 2, 1);
    tide_fill_(w2v, 9);
    CHECK_RC_ERROR(tide_backward(p2s, NULL, false), "in-place");
    tide_release(w2v), tide_release(p2), tide_release(p2s), tide_release(w2);
    tide_release(e), tide_release(es), tide_release(xd);
    tide_release(p), tide_release(ps), tide_release(w), tide_release(buf);
    tide_release(y), tide_release(xv), tide_release(c), tide_release(x);
}

/* A long chain is built, differentiated and freed without deep recursion. */
static void test_long_chain(void)
{
    tide_tensor *x = vec((double[]){1}, 1, true);
    tide_tensor *y = tide_retain(x);
    for (int i = 0; i < 20000; i++) {
        tide_tensor *next = tide_mul_scalar(y, 1.0);
        tide_release(y);
        y = next;
    }
    tide_tensor *s = tide_sum(y, NULL, 0, false);
    CHECK(tide_backward(s, NULL, false) == 0, "long chain: %s", tide_last_error());
    CHECK(grad_is(x, (double[]){1}, 1), "long chain grad");
    tide_release(s), tide_release(y);
    /* each node saving the previous result: only the saved tensors hold the chain */
    y = tide_retain(x);
    for (int i = 0; i < 20000; i++) {
        tide_tensor *next = tide_mul(y, y);
        tide_release(y);
        y = next;
    }
    tide_release(y); /* frees the whole chain through saved tensors, iteratively */
    tide_release(x);
}

/* Every primitive with a backward formula met a gradgradcheck above, except those listed here
 * with the reason; a new primitive fails this until a case (or a reason) is added. */
static void test_gradgrad_coverage(void)
{
    static const struct {
        tide_op op;
        const char *why;
    } elsewhere[] = {
        /* no gradient: integer/bool results, or no tensor input that can require grad */
        {TIDE_OP_LOGICAL_NOT, "bool"}, {TIDE_OP_EQ, "bool"}, {TIDE_OP_NE, "bool"},
        {TIDE_OP_LT, "bool"}, {TIDE_OP_LE, "bool"}, {TIDE_OP_GT, "bool"}, {TIDE_OP_GE, "bool"},
        {TIDE_OP_LOGICAL_AND, "bool"}, {TIDE_OP_LOGICAL_OR, "bool"},
        {TIDE_OP_ARGMAX, "int64"}, {TIDE_OP_ARGMIN, "int64"}, {TIDE_OP_FILL, "a constant"},
        {TIDE_OP_IOTA, "no input"}, {TIDE_OP_RANDOM, "no input"}, {TIDE_OP_TOPK, "int64"},
        {TIDE_OP_SORT, "int64 (sort's values are a gather)"},
        {TIDE_OP_MAX_POOL2D_INDICES, "int64"}, {TIDE_OP_QUANTIZE, "integer codes"},
        {TIDE_OP_DEQUANTIZE, "its input is integer codes"},
        /* float32/half only (a float64 check does not apply); their backward is a matmul */
        {TIDE_OP_QLINEAR, "float32 only: test_autograd_higher.c differentiates it twice"},
        {TIDE_OP_LINEAR_HALF, "half weights: test_autograd_higher.c differentiates it twice"},
        {TIDE_OP_TO, "needs a second device: test_autograd_higher.c (ref device)"},
        /* refused with "double backward of ... is not supported" (test_autograd_higher.c) */
        {TIDE_OP_SDPA, "double backward refused"}, {TIDE_OP_SDPA_GRAD, "double backward refused"},
        /* refuse a tensor that requires grad (test_distributed.c) */
        {TIDE_OP_ALL_REDUCE, "no gradient"}, {TIDE_OP_BROADCAST, "no gradient"},
        {TIDE_OP_ALL_GATHER, "no gradient"}, {TIDE_OP_REDUCE_SCATTER, "no gradient"},
    };
    for (int op = 0; op < TIDE_NUM_OPS; op++) {
        bool listed = false;
        for (size_t i = 0; i < sizeof elsewhere / sizeof *elsewhere; i++)
            listed |= elsewhere[i].op == (tide_op)op;
        CHECK(gg_covered[op] != listed, "primitive %s: %s", tide_op_name((tide_op)op),
              listed ? "listed as not gradgradchecked here, but a case covers it"
                     : "no gradgradcheck case covers it (add one, or a reason to the list)");
    }
}

int main(void)
{
    ref_seed(5);
    test_elementwise();
    test_math_24();
    test_reductions();
    test_views();
    test_indexing();
    test_matmul();
    test_conv_pool();
    test_composites();
    test_accumulation_and_retain();
    test_hooks_shared_leaf();
    test_hooks_order_and_errors();
    test_grad_fn_names();
    test_modes_and_detach();
    test_inplace();
    test_long_chain();
    test_gradgrad_coverage();
    printf("test_autograd: %d gradcheck and gradgradcheck cases\n", gc_cases);
    return test_summary("test_autograd");
}
