/*
 * test_triu_cumsum.c — triu/tril, cumsum and topk against plain reference loops: every dtype, the
 * contiguous / transposed / sliced / expanded layouts, every dim and diagonal sign, batches,
 * 0-dim and empty tensors; cumsum's result independent of the thread count; gradcheck of all
 * three; and the errors (1-d input, bad dim), which name the op and the shape.
 *
 * Tolerances: none. triu/tril only select. cumsum's reference adds in order along the dim in
 * double and rounds each prefix once, which is what the CPU kernel does (devices/cpu/cpu_scan.c),
 * so float32 and float64 results are compared exactly, integers too (small values, no wrap).
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "tide.h"
#include "test_util.h"
#include "test_ref.h"

static const tide_dtype all_dtypes[] = {TIDE_FLOAT32, TIDE_FLOAT64, TIDE_INT32,
                                        TIDE_INT64,   TIDE_UINT8,   TIDE_BOOL};

static tide_tensor *make(int ndim, const int64_t *shape, tide_dtype dt, int layout, double **values)
{
    int64_t n = ref_numel(ndim, shape);
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    ref_fill(v, n, dt, 0);
    ref_prepare(layout, ndim, shape, v);
    *values = v;
    return ref_make(v, ndim, shape, dt, layout);
}

/* ---- triu / tril ---------------------------------------------------------------------------- */

static void test_triangle(void)
{
    ref_seed(1);
    static const int64_t shapes[3][3] = {{3, 4}, {2, 3, 5}, {5, 2}};
    static const int ndims[3] = {2, 3, 2};
    for (int s = 0; s < 3; s++)
        for (int di = 0; di < 6; di++)
            for (int layout = 0; layout < REF_NUM_LAYOUTS; layout++) {
                int nd = ndims[s];
                const int64_t *shape = shapes[s];
                double *v;
                tide_dtype dt = all_dtypes[di];
                tide_tensor *x = make(nd, shape, dt, layout, &v);
                int64_t n = ref_numel(nd, shape), rows = shape[nd - 2], cols = shape[nd - 1];
                double *want = malloc((size_t)n * sizeof *want);
                for (int64_t k = -3; k <= 4; k++)
                    for (int upper = 0; upper < 2; upper++) {
                        for (int64_t f = 0; f < n; f++) {
                            int64_t j = f % cols, i = (f / cols) % rows;
                            bool keep = upper ? j - i >= k : j - i <= k;
                            want[f] = keep ? v[f] : 0;
                        }
                        char desc[160];
                        snprintf(desc, sizeof desc, "%s %s %s %s k=%lld", upper ? "triu" : "tril",
                                 ref_shape_str(nd, shape), ref_dtype_name(dt),
                                 ref_layout_name(layout), (long long)k);
                        tide_tensor *y = upper ? tide_triu(x, k) : tide_tril(x, k);
                        ref_check_tensor(desc, y, dt, nd, shape, want, 0);
                        tide_release(y);
                    }
                free(want);
                free(v);
                tide_release(x);
            }
    tide_tensor *e = tide_zeros(3, (int64_t[]){2, 0, 3}, TIDE_FLOAT32);
    tide_tensor *te = tide_triu(e, 0);
    CHECK(te && tide_numel(te) == 0 && tide_ndim(te) == 3, "triu of an empty batch: %s",
          tide_last_error());
    tide_release(te), tide_release(e);
}

/* ---- cumsum --------------------------------------------------------------------------------- */

/* Inclusive sums along dim in double, in order, rounded once per element to out_dt. */
static void ref_cumsum(int nd, const int64_t *shape, const double *v, int dim, tide_dtype out_dt,
                       double *out)
{
    int64_t n = ref_numel(nd, shape), inner = 1;
    for (int d = dim + 1; d < nd; d++)
        inner *= shape[d];
    int64_t len = nd > 0 ? shape[dim] : 1;
    for (int64_t f = 0; f < n; f++) {
        int64_t i = (f / inner) % len, first = f - i * inner;
        double acc = 0;
        for (int64_t k = 0; k <= i; k++)
            acc += v[first + k * inner];
        out[f] = ref_quantize(out_dt, acc);
    }
}

static void check_cumsum(const char *what, int nd, const int64_t *shape, tide_dtype dt, int layout,
                         int dim)
{
    double *v;
    tide_tensor *x = make(nd, shape, dt, layout, &v);
    int64_t n = ref_numel(nd, shape);
    double *want = malloc((size_t)(n > 0 ? n : 1) * sizeof *want);
    tide_dtype out_dt = ref_is_float(dt) ? dt : TIDE_INT64;
    ref_cumsum(nd, shape, v, dim < 0 ? dim + (nd > 0 ? nd : 1) : dim, out_dt, want);
    char desc[200];
    snprintf(desc, sizeof desc, "cumsum %s %s %s %s dim %d", what, ref_shape_str(nd, shape),
             ref_dtype_name(dt), ref_layout_name(layout), dim);
    tide_tensor *y = tide_cumsum(x, dim);
    ref_check_tensor(desc, y, out_dt, nd, shape, want, 0);
    tide_release(y);
    free(want);
    free(v);
    tide_release(x);
}

static void test_cumsum(void)
{
    ref_seed(2);
    for (int di = 0; di < 6; di++)
        for (int layout = 0; layout < REF_NUM_LAYOUTS; layout++) {
            for (int dim = -1; dim < 3; dim++)
                check_cumsum("", 3, (int64_t[]){3, 4, 5}, all_dtypes[di], layout, dim);
            check_cumsum("", 1, (int64_t[]){7}, all_dtypes[di], layout, 0);
        }
    check_cumsum("0-dim", 0, NULL, TIDE_FLOAT32, REF_CONTIG, 0);
    check_cumsum("0-dim", 0, NULL, TIDE_INT32, REF_CONTIG, -1);
    check_cumsum("empty", 2, (int64_t[]){0, 3}, TIDE_FLOAT32, REF_CONTIG, 0);
    check_cumsum("empty", 2, (int64_t[]){3, 0}, TIDE_FLOAT64, REF_CONTIG, 0);
    /* large: many lines, split across threads, and long lines (blocks of 64 lines) */
    check_cumsum("large", 2, (int64_t[]){64, 1100}, TIDE_FLOAT32, REF_CONTIG, 0);
    check_cumsum("large", 2, (int64_t[]){64, 1100}, TIDE_FLOAT32, REF_TRANSPOSED, 1);
    check_cumsum("large", 2, (int64_t[]){1100, 70}, TIDE_FLOAT64, REF_SLICED, 0);
}

static void test_cumsum_threads(void)
{
    tide_manual_seed(5);
    tide_tensor *x = tide_randn(2, (int64_t[]){300, 700}, TIDE_FLOAT32);
    int threads = tide_get_num_threads();
    tide_set_num_threads(1);
    tide_tensor *a0 = tide_cumsum(x, 0), *a1 = tide_cumsum(x, 1);
    tide_set_num_threads(4);
    tide_tensor *b0 = tide_cumsum(x, 0), *b1 = tide_cumsum(x, 1);
    bool s0, s1;
    ref_compare(a0, b0, &s0);
    ref_compare(a1, b1, &s1);
    CHECK(s0 && s1, "cumsum differs between 1 and 4 threads (dim 0: %d, dim 1: %d)", s0, s1);
    tide_set_num_threads(threads);
    tide_release(a0), tide_release(a1), tide_release(b0), tide_release(b1), tide_release(x);
}

/* ---- topk ---------------------------------------------------------------------------------- */

/* Whether u (at position pu) ranks before v (at pv): larger (smaller) first, NaN the largest,
 * ties to the lower position. */
static bool ranks_before(double u, int64_t pu, double v, int64_t pv, bool largest)
{
    int c = isnan(u) != isnan(v) ? (isnan(u) ? 1 : -1) : (isnan(u) || u == v) ? 0 : (u > v ? 1 : -1);
    if (!largest)
        c = -c;
    return c > 0 || (c == 0 && pu < pv);
}

static void check_topk(int nd, const int64_t *shape, tide_dtype dt, int layout, int dim, int64_t k,
                       bool largest)
{
    double *v;
    tide_tensor *x = make(nd, shape, dt, layout, &v);
    int64_t oshape[TIDE_MAX_DIMS], inner = 1, len = shape[dim];
    memcpy(oshape, shape, sizeof(int64_t) * nd);
    oshape[dim] = k;
    for (int d = dim + 1; d < nd; d++)
        inner *= shape[d];
    int64_t lines = ref_numel(nd, shape) / len, no = ref_numel(nd, oshape);
    double *wi = malloc((size_t)(no > 0 ? no : 1) * sizeof *wi);
    double *wv = malloc((size_t)(no > 0 ? no : 1) * sizeof *wv);
    int64_t *order = malloc((size_t)len * sizeof *order);
    for (int64_t l = 0; l < lines; l++) {
        int64_t first = (l / inner) * len * inner + l % inner;
        for (int64_t p = 0; p < len; p++) { /* insertion sort: plain and stable */
            int64_t q = p;
            while (q > 0 && ranks_before(v[first + p * inner], p, v[first + order[q - 1] * inner],
                                         order[q - 1], largest)) {
                order[q] = order[q - 1];
                q--;
            }
            order[q] = p;
        }
        int64_t ofirst = (l / inner) * k * inner + l % inner;
        for (int64_t r = 0; r < k; r++) {
            wi[ofirst + r * inner] = (double)order[r];
            wv[ofirst + r * inner] = v[first + order[r] * inner];
        }
    }
    tide_tensor *vals = NULL, *idx = NULL;
    int rc = tide_topk(x, k, dim, largest, true, &vals, &idx);
    CHECK(rc == 0, "topk failed: %s", tide_last_error());
    char desc[200];
    snprintf(desc, sizeof desc, "topk %s %s %s dim %d k %lld %s", ref_shape_str(nd, shape),
             ref_dtype_name(dt), ref_layout_name(layout), dim, (long long)k,
             largest ? "largest" : "smallest");
    ref_check_tensor(desc, idx, TIDE_INT64, nd, oshape, wi, 0);
    ref_check_tensor(desc, vals, dt, nd, oshape, wv, 0);
    tide_release(vals), tide_release(idx);
    free(wi), free(wv), free(order), free(v);
    tide_release(x);
}

static void test_topk(void)
{
    ref_seed(4);
    for (int di = 0; di < 5; di++) /* not bool */
        for (int layout = 0; layout < REF_NUM_LAYOUTS; layout++)
            for (int dim = 0; dim < 3; dim++)
                for (int largest = 0; largest < 2; largest++) {
                    int64_t shape[3] = {3, 4, 5};
                    for (int64_t k = 0; k <= shape[dim]; k += 2)
                        check_topk(3, shape, all_dtypes[di], layout, dim, k, largest);
                }
    /* ties and NaN: NaN first for largest, last for smallest; equal values by position */
    double tv[6] = {1, NAN, 2, 1, 2, -INFINITY};
    tide_tensor *t = tide_from_data(tv, 1, (int64_t[]){6}, TIDE_FLOAT64), *iv = NULL;
    int64_t got[6];
    CHECK(tide_topk(t, 6, 0, true, true, NULL, &iv) == 0 && tide_to_buffer(iv, got, sizeof got) == 0 &&
              got[0] == 1 && got[1] == 2 && got[2] == 4 && got[3] == 0 && got[4] == 3 && got[5] == 5,
          "topk order with NaN and ties: %s", tide_last_error());
    tide_release(iv);
    iv = NULL;
    CHECK(tide_topk(t, 6, 0, false, true, NULL, &iv) == 0 && tide_to_buffer(iv, got, sizeof got) == 0 &&
              got[0] == 5 && got[1] == 0 && got[2] == 3 && got[3] == 2 && got[4] == 4 && got[5] == 1,
          "topk smallest order with NaN and ties: %s", tide_last_error());
    tide_release(iv), tide_release(t);
}

/* ---- gradcheck ------------------------------------------------------------------------------ */

typedef struct gc_case {
    int which; /* 0 triu, 1 tril, 2 cumsum, 3 topk values along dim 2 (k = arg) */
    int64_t arg;
} gc_case;

static tide_tensor *gc_fn(void *ctx, tide_tensor *const *in, int n)
{
    (void)n;
    const gc_case *c = ctx;
    tide_tensor *y = NULL;
    if (c->which == 3)
        tide_topk(in[0], c->arg, 2, true, true, &y, NULL);
    else
        y = c->which == 0   ? tide_triu(in[0], c->arg)
            : c->which == 1 ? tide_tril(in[0], c->arg)
                            : tide_cumsum(in[0], (int)c->arg);
    tide_tensor *z = y ? tide_tanh(y) : NULL; /* something nonlinear after it */
    tide_release(y);
    return z;
}

static void test_gradcheck(void)
{
    static const gc_case cases[] = {{0, 0}, {0, 2}, {0, -1}, {1, 0}, {1, 1}, {1, -2},
                                    {2, 0}, {2, 1}, {2, 2},  {2, -1}, {3, 2}, {3, 4}};
    ref_seed(3);
    for (size_t i = 0; i < sizeof cases / sizeof *cases; i++)
        for (int layout = 0; layout < 3; layout++) { /* not expanded: gradcheck needs no stride 0 */
            double *v;
            tide_tensor *x = make(3, (int64_t[]){2, 3, 4}, TIDE_FLOAT64, layout, &v);
            tide_requires_grad_(x, true);
            gc_case c = cases[i];
            /* central differences of a smooth function: error ~ eps^2, rounding ~ 1e-16/eps */
            int rc = td_gradcheck(gc_fn, &c, &x, 1, 1e-6, 1e-7, 1e-6);
            CHECK(rc == 0, "gradcheck %s(%lld) %s: %s",
                  c.which == 0 ? "triu" : c.which == 1 ? "tril" : c.which == 2 ? "cumsum" : "topk",
                  (long long)c.arg,
                  ref_layout_name(layout), tide_last_error());
            free(v);
            tide_release(x);
        }
}

/* ---- errors --------------------------------------------------------------------------------- */

static void test_errors(void)
{
    tide_tensor *v = tide_ones(1, (int64_t[]){3}, TIDE_FLOAT32);
    tide_tensor *s = tide_ones(0, NULL, TIDE_FLOAT32);
    tide_tensor *m = tide_ones(2, (int64_t[]){2, 3}, TIDE_INT32);
    CHECK_ERROR(tide_triu(v, 0), "triu", "at least 2 dims", "[3] float32");
    CHECK_ERROR(tide_tril(s, 0), "tril", "at least 2 dims", "[] float32");
    CHECK_ERROR(tide_triu(NULL, 0), "triu");
    CHECK_ERROR(tide_cumsum(m, 2), "cumsum", "dim 2", "[2, 3] int32", "-2..1");
    CHECK_ERROR(tide_cumsum(m, -3), "cumsum", "dim -3", "[2, 3] int32");
    CHECK_ERROR(tide_cumsum(s, 1), "cumsum", "dim 1", "-1..0");
    CHECK_ERROR(tide_cumsum(NULL, 0), "cumsum");
    tide_tensor *tv = NULL, *ti = NULL;
    CHECK(tide_topk(m, 4, 1, true, true, &tv, &ti) < 0 && !tv && !ti &&
              strstr(tide_last_error(), "topk: k = 4 is out of range 0..3 for input [2, 3] int32"),
          "topk k too large: %s", tide_last_error());
    CHECK(tide_topk(m, -1, 1, true, true, &tv, &ti) < 0 && strstr(tide_last_error(), "k = -1"),
          "topk negative k: %s", tide_last_error());
    CHECK(tide_topk(m, 1, 2, true, true, &tv, &ti) < 0 &&
              strstr(tide_last_error(), "topk: dim 2 is out of range for input [2, 3] int32"),
          "topk bad dim: %s", tide_last_error());
    tide_tensor *bl = tide_ones(1, (int64_t[]){3}, TIDE_BOOL);
    CHECK(tide_topk(bl, 1, 0, true, true, &tv, &ti) < 0 && strstr(tide_last_error(), "topk") &&
              strstr(tide_last_error(), "bool"),
          "topk bool: %s", tide_last_error());
    tide_release(bl);
    tide_tensor *s0 = tide_scalar(2.5, TIDE_FLOAT32);
    CHECK(tide_topk(s0, 0, 0, true, true, &tv, &ti) < 0 && strstr(tide_last_error(), "1..1"),
          "topk k = 0 of a 0-dim input: %s", tide_last_error());
    double sv = 0, si = -1;
    CHECK(tide_topk(s0, 1, -1, true, true, &tv, &ti) == 0 && tide_item(tv, &sv) == 0 &&
              tide_item(ti, &si) == 0 && sv == 2.5 && si == 0,
          "topk of a 0-dim input: %s", tide_last_error());
    tide_release(tv), tide_release(ti), tide_release(s0);
    tide_release(v), tide_release(s), tide_release(m);
}

int main(void)
{
    test_triangle();
    test_cumsum();
    test_cumsum_threads();
    test_topk();
    test_gradcheck();
    test_errors();
    int rc = test_summary("test_triu_cumsum");
    tide_shutdown();
    return rc;
}
