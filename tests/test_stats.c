/*
 * test_stats.c — the reductions, scans, sorts and searches of ops/stats.c, scan.c, sort.c and
 * search.c through the C API against plain reference loops in double, on rows with ties (values
 * rounded to a tenth) and a NaN in one row, and their errors (op, shapes, dtypes named).
 * Tolerances: float64 throughout; 1e-12 relative for the sums and products of 7 terms (a few
 * roundings each), exact for every pick (sort, median, cummax, nonzero, unique, searchsorted,
 * bincount, histc).
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "autograd/autograd.h"
#include "tide.h"
#include "test_util.h"

#define R 5
#define N 7

static double data[R][N];

static void make_data(void)
{
    uint32_t s = 2024;
    for (int r = 0; r < R; r++)
        for (int j = 0; j < N; j++) {
            s = s * 1664525u + 1013904223u;
            data[r][j] = round(((double)(s >> 8) / (1 << 24) * 6 - 3) * 10) / 10;
        }
    data[3][4] = NAN;
}

static tide_tensor *rows(void) { return tide_from_data(data, 2, (int64_t[]){R, N}, TIDE_FLOAT64); }

static bool close_to(double got, double want, double rel)
{
    if (isnan(want))
        return isnan(got);
    if (isinf(want))
        return got == want;
    return fabs(got - want) <= rel * fmax(1, fabs(want));
}

/* Checks a float64 or int64 tensor of n elements against want. */
static void check_values(tide_tensor *t, const double *want, int n, double rel, const char *what)
{
    double got[R * N * 2];
    tide_tensor *d = t ? tide_cast(t, TIDE_FLOAT64) : NULL;
    bool ok = d && tide_numel(d) == n && tide_to_buffer(d, got, sizeof(double) * (size_t)n) == 0;
    CHECK(ok, "%s: no result (%s)", what, tide_last_error());
    for (int i = 0; ok && i < n; i++)
        if (!close_to(got[i], want[i], rel)) {
            CHECK(false, "%s: element %d is %.17g, want %.17g", what, i, got[i], want[i]);
            break;
        }
    if (ok)
        CHECK(true, "%s", what);
    tide_release(d);
    tide_release(t);
}

/* Stable ascending (or descending) order of row r, NaN the largest. */
static void ref_order(int r, bool desc, int *pos)
{
    for (int j = 0; j < N; j++)
        pos[j] = j;
    for (int a = 1; a < N; a++) /* insertion sort: stable */
        for (int b = a; b > 0; b--) {
            double u = data[r][pos[b - 1]], v = data[r][pos[b]];
            bool after = desc ? ((isnan(v) && !isnan(u)) || v > u)
                              : ((isnan(u) && !isnan(v)) || u > v);
            if (!after)
                break;
            int t = pos[b];
            pos[b] = pos[b - 1];
            pos[b - 1] = t;
        }
}

static void test_moments_and_norms(void)
{
    tide_tensor *x = rows();
    double var[R], sd[R], mean[R], nrm[6][R];
    static const double ps[6] = {2, 1, 3, INFINITY, -INFINITY, 0};
    for (int r = 0; r < R; r++) {
        double m = 0, ss = 0;
        for (int j = 0; j < N; j++)
            m += data[r][j] / N;
        for (int j = 0; j < N; j++)
            ss += (data[r][j] - m) * (data[r][j] - m);
        mean[r] = m, var[r] = ss / (N - 1), sd[r] = sqrt(ss / N);
        for (int k = 0; k < 6; k++) {
            double acc = ps[k] == -INFINITY ? INFINITY : 0;
            for (int j = 0; j < N; j++) {
                double a = fabs(data[r][j]);
                if (isinf(ps[k]))
                    acc = isnan(a) || isnan(acc) ? NAN : ps[k] > 0 ? fmax(acc, a) : fmin(acc, a);
                else
                    acc += ps[k] == 0 ? (a != 0) : pow(a, ps[k]);
            }
            nrm[k][r] = ps[k] == 0 || isinf(ps[k]) ? acc : pow(acc, 1 / ps[k]);
        }
    }
    int d1 = 1;
    check_values(tide_var(x, &d1, 1, 1, false), var, R, 1e-12, "var, unbiased");
    check_values(tide_std(x, &d1, 1, 0, false), sd, R, 1e-12, "std, correction 0");
    tide_tensor *v = NULL, *m = NULL;
    CHECK(tide_var_mean(x, &d1, 1, 1, true, &v, &m) == 0 && tide_ndim(v) == 2, "var_mean keepdim");
    check_values(v, var, R, 1e-12, "var_mean's var");
    check_values(m, mean, R, 1e-12, "var_mean's mean");
    for (int k = 0; k < 6; k++) {
        char what[32];
        snprintf(what, sizeof what, "norm p = %g", ps[k]);
        check_values(tide_norm(x, ps[k], &d1, 1, false), nrm[k], R, 1e-12, what);
    }
    tide_release(x);
}

static void test_sort_median_quantile(void)
{
    tide_tensor *x = rows();
    double vals[R * N], idx[R * N], med[R], medi[R], qs[R];
    for (int desc = 0; desc < 2; desc++) {
        for (int r = 0; r < R; r++) {
            int pos[N];
            ref_order(r, desc, pos);
            for (int j = 0; j < N; j++)
                vals[r * N + j] = data[r][pos[j]], idx[r * N + j] = pos[j];
            if (!desc) { /* lower median, or the first NaN; quantile 0.3 linear, or NaN */
                int nn = 0;
                for (int j = 0; j < N; j++)
                    nn += isnan(data[r][j]);
                int k = nn ? N - nn : (N - 1) / 2;
                med[r] = data[r][pos[k]], medi[r] = pos[k];
                double rank = 0.3 * (N - 1), lo = floor(rank);
                double a = data[r][pos[(int)lo]], b = data[r][pos[(int)ceil(rank)]];
                qs[r] = nn ? NAN : a + (rank - lo) * (b - a);
            }
        }
        tide_tensor *sv = NULL, *si = NULL;
        CHECK(tide_sort(x, 1, desc, true, &sv, &si) == 0, "sort: %s", tide_last_error());
        check_values(sv, vals, R * N, 0, desc ? "sort descending values" : "sort values");
        check_values(si, idx, R * N, 0, desc ? "sort descending indices" : "sort indices");
    }
    tide_tensor *mv = NULL, *mi = NULL;
    CHECK(tide_median(x, -1, false, &mv, &mi) == 0, "median: %s", tide_last_error());
    check_values(mv, med, R, 0, "median values");
    check_values(mi, medi, R, 0, "median indices");
    tide_tensor *q = tide_scalar(0.3, TIDE_FLOAT64);
    check_values(tide_quantile(x, q, 1, false, NULL), qs, R, 1e-12, "quantile 0.3");
    tide_release(q);
    tide_release(x);
}

static void test_scans(void)
{
    tide_tensor *x = rows();
    double prod[R * N], lse[R * N], cmax[R * N], cmaxi[R * N];
    for (int r = 0; r < R; r++) {
        double p = 1, l = -INFINITY, best = 0;
        int bi = 0;
        for (int j = 0; j < N; j++) {
            double v = data[r][j];
            p *= v;
            l = isnan(v) || isnan(l) ? NAN : fmax(l, v) + log1p(exp(fmin(l, v) - fmax(l, v)));
            if (j == 0 || isnan(v) || (!isnan(best) && v >= best))
                best = v, bi = j;
            prod[r * N + j] = p, lse[r * N + j] = l, cmax[r * N + j] = best, cmaxi[r * N + j] = bi;
        }
    }
    check_values(tide_cumprod(x, 1), prod, R * N, 1e-12, "cumprod");
    check_values(tide_logcumsumexp(x, -1), lse, R * N, 1e-12, "logcumsumexp");
    tide_tensor *v = NULL, *i = NULL;
    CHECK(tide_cummax(x, 1, &v, &i) == 0, "cummax: %s", tide_last_error());
    check_values(v, cmax, R * N, 0, "cummax values");
    check_values(i, cmaxi, R * N, 0, "cummax indices");
    tide_release(x);
}

static void test_searches(void)
{
    int64_t ints[10] = {4, 0, 2, 4, 4, 1, 0, 7, 2, 4};
    tide_tensor *xi = tide_from_data(ints, 2, (int64_t[]){2, 5}, TIDE_INT64);
    tide_tensor *u = NULL, *inv = NULL, *cnt = NULL;
    CHECK(tide_unique(xi, true, &u, &inv, &cnt) == 0, "unique: %s", tide_last_error());
    check_values(u, (double[]){0, 1, 2, 4, 7}, 5, 0, "unique values");
    check_values(inv, (double[]){3, 0, 2, 3, 3, 1, 0, 4, 2, 3}, 10, 0, "unique inverse");
    check_values(cnt, (double[]){2, 1, 2, 4, 1}, 5, 0, "unique counts");
    check_values(tide_nonzero(xi), (double[]){0, 0, 0, 2, 0, 3, 0, 4, 1, 0, 1, 2, 1, 3, 1, 4},
                 16, 0, "nonzero coordinates");
    int64_t n = 10;
    tide_tensor *flat = tide_reshape(xi, 1, &n);
    check_values(tide_bincount(flat, NULL, 9), (double[]){2, 1, 2, 0, 4, 0, 0, 1, 0}, 9, 0,
                 "bincount, minlength 9");
    double seq[5] = {-1, 0, 0, 2.5, NAN}, want_l[4] = {0, 1, 4, 5}, want_r[4] = {0, 3, 4, 5};
    double qv[4] = {-2, 0, 3, NAN};
    tide_tensor *s = tide_from_data(seq, 1, (int64_t[]){5}, TIDE_FLOAT64);
    tide_tensor *vv = tide_from_data(qv, 1, (int64_t[]){4}, TIDE_FLOAT64);
    check_values(tide_searchsorted(s, vv, false, false, NULL), want_l, 4, 0, "searchsorted left");
    check_values(tide_searchsorted(s, vv, false, true, NULL), want_r, 4, 0, "searchsorted right");
    tide_tensor *x = rows();
    double hist[4] = {0};
    for (int r = 0; r < R; r++)
        for (int j = 0; j < N; j++) { /* bins of width 1 over [-2, 2], the top edge in the last */
            double v = data[r][j];
            if (v >= -2 && v <= 2)
                hist[v == 2 ? 3 : (int)floor((v + 2) / 4 * 4)]++;
        }
    check_values(tide_histc(x, 4, -2, 2), hist, 4, 0, "histc");
    tide_release(x), tide_release(s), tide_release(vv), tide_release(flat), tide_release(xi);
}

static void test_errors(void)
{
    tide_tensor *i = tide_from_data((int64_t[]){1, 2}, 1, (int64_t[]){2}, TIDE_INT64);
    tide_tensor *f = tide_full(2, (int64_t[]){2, 3}, 1, TIDE_FLOAT32);
    CHECK_ERROR(tide_var(i, NULL, 0, 1, false), "var", "[2] int64");
    CHECK_ERROR(tide_norm(f, 2, (int[]){2}, 1, false), "norm", "dim");
    CHECK_ERROR(tide_logcumsumexp(i, 0), "logcumsumexp", "[2] int64", "floating");
    CHECK_ERROR(tide_cumprod(f, 2), "cumprod", "dim 2", "[2, 3] float32");
    CHECK_ERROR(tide_argsort(f, 5, false, true), "argsort", "dim");
    CHECK_ERROR(tide_bincount(f, NULL, 0), "bincount", "[2, 3] float32");
    CHECK_ERROR(tide_histc(i, 3, 0, 1), "histc", "[2] int64");
    CHECK_ERROR(tide_searchsorted(f, i, false, false, NULL), "searchsorted", "[2, 3] float32",
                "[2] int64");
    tide_tensor *q = tide_scalar(2, TIDE_FLOAT32);
    CHECK_ERROR(tide_quantile(f, q, 1, false, NULL), "quantile", "[0, 1]");
    tide_tensor *mv = NULL, *empty = tide_zeros(1, (int64_t[]){0}, TIDE_FLOAT32);
    CHECK(tide_median(empty, 0, false, &mv, NULL) < 0 &&
              strstr(tide_last_error(), "median") && !mv,
          "median of nothing: %s", tide_last_error());
    tide_release(q), tide_release(i), tide_release(f), tide_release(empty);
}

/* ---- gradients: td_gradcheck (central differences in float64, L = sum(f * W)) ------------ */

static tide_tensor *grad_case(void *ctx, tide_tensor *const *in, int n)
{
    (void)n;
    int which = *(int *)ctx, d1 = 1;
    tide_tensor *v = NULL, *r = NULL;
    tide_tensor *q = tide_scalar(0.35, TIDE_FLOAT64);
    switch (which) {
    case 0: tide_sort(in[0], 1, true, true, &v, NULL); r = v; break;
    case 1: tide_median(in[0], 0, false, &v, NULL); r = v; break;
    case 2: r = tide_quantile(in[0], q, 1, true, NULL); break;
    case 3: r = tide_cumprod(in[0], 1); break;
    case 4: r = tide_logcumsumexp(in[0], 0); break;
    case 5: tide_cummin(in[0], 1, &v, NULL); r = v; break;
    case 6: r = tide_norm(in[0], 2.5, &d1, 1, false); break;
    case 7: r = tide_std(in[0], &d1, 1, 1, true); break;
    default: r = tide_var(in[0], NULL, 0, 0, false); break;
    }
    tide_release(q);
    return r;
}

static void test_gradients(void)
{
    static const char *const names[] = {"sort", "median", "quantile", "cumprod", "logcumsumexp",
                                        "cummin", "norm 2.5", "std", "var"};
    double v[4 * 6];
    for (int i = 0; i < 24; i++) /* distinct values (no ties: picks are differentiable there) */
        v[i] = sin(1.7 * i + 0.3) * 2;
    v[5] = 0, v[9] = 0; /* zeros in one row of cumprod and one column */
    for (int which = 0; which < 9; which++) {
        tide_tensor *x = tide_from_data(v, 2, (int64_t[]){4, 6}, TIDE_FLOAT64);
        tide_requires_grad_(x, true);
        /* smooth float64 functions: central differences with eps 1e-6 agree to ~1e-9 */
        int rc = td_gradcheck(grad_case, &which, &x, 1, 1e-6, 1e-7, 1e-6);
        CHECK(rc == 0, "gradcheck %s: %s", names[which], tide_last_error());
        tide_release(x);
    }
}

/* Whether a and b (float64, at most R * N elements) hold the same bits. */
static bool same_bits(tide_tensor *a, tide_tensor *b)
{
    double x[R * N], y[R * N];
    int64_t n = tide_numel(a);
    return a && b && n == tide_numel(b) && n <= R * N &&
           tide_to_buffer(a, x, sizeof(double) * (size_t)n) == 0 &&
           tide_to_buffer(b, y, sizeof(double) * (size_t)n) == 0 &&
           memcmp(x, y, sizeof(double) * (size_t)n) == 0;
}

/* Inside a graph capture, the ops sized by the data refuse (their count read is a graph break)
 * rather than bake one size in; sort, median and the scans are captured and replay right on new
 * data. */
static void test_capture(void)
{
    tide_tensor *x = rows();
    CHECK(tide_jit_begin(&x, 1) == 0, "%s", tide_last_error());
    tide_tensor *u = NULL;
    CHECK(tide_unique(x, true, &u, NULL, NULL) < 0 && !u &&
              strstr(tide_last_error(), "graph break") && strstr(tide_last_error(), "unique"),
          "unique in a capture: %s", tide_last_error());
    CHECK_ERROR(tide_nonzero(x), "nonzero", "graph break");
    tide_tensor *sv = NULL, *mv = NULL;
    tide_sort(x, 1, true, true, &sv, NULL);
    tide_median(x, 1, false, &mv, NULL);
    tide_tensor *cp = tide_cumprod(x, 1), *outs[3] = {sv, mv, cp};
    tide_graph *g = tide_jit_end(outs, 3);
    CHECK(g != NULL, "capture: %s", tide_last_error());
    for (int r = 0; r < R; r++) /* new data, same shape: reversed rows */
        for (int j = 0; j < N / 2; j++) {
            double t = data[r][j];
            data[r][j] = data[r][N - 1 - j];
            data[r][N - 1 - j] = t;
        }
    data[0][0] = data[0][1];
    tide_tensor *y = rows(), *got[3] = {NULL, NULL, NULL}, *want[3] = {NULL, NULL, NULL};
    CHECK(g && tide_graph_run(g, &y, 1, got) == 0, "replay: %s", tide_last_error());
    tide_sort(y, 1, true, true, &want[0], NULL);
    tide_median(y, 1, false, &want[1], NULL);
    want[2] = tide_cumprod(y, 1);
    for (int k = 0; k < 3; k++) {
        CHECK(same_bits(got[k], want[k]), "replay output %d equals eager bitwise", k);
        tide_release(got[k]), tide_release(want[k]);
    }
    tide_graph_free(g);
    tide_release(sv), tide_release(mv), tide_release(cp), tide_release(x), tide_release(y);
}

int main(void)
{
    make_data();
    test_moments_and_norms();
    test_sort_median_quantile();
    test_scans();
    test_searches();
    test_errors();
    test_capture();
    test_gradients();
    return test_summary("test_stats");
}
