/*
 * test_multinomial.c — tide_multinomial: the law of the draws with and without replacement
 * (chi-square bounds), distinct indices without replacement, zero weights never drawn,
 * determinism per seed, the same draws on the ref device, no gradient, no rows, and the errors.
 *
 * The bound. For N draws over m categories of positive probability p_j with counts c_j,
 * X2 = sum_j (c_j - N p_j)^2 / (N p_j) is close to chi-square with m - 1 degrees of freedom:
 * mean m - 1, standard deviation sqrt(2 (m - 1)). We allow mean + 6 sd. For m - 1 = 3 that is
 * 17.7, where the chi-square tail is about 5e-4; the seeds are fixed, so a pass is stable, and a
 * wrong law (a weight off by 5% at N = 20000 adds about 20 to X2 for these weights) fails.
 */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tide.h"
#include "test_util.h"

enum { K = 5, N = 20000 };
/* Weights need not sum to 1; the 0 must never be drawn. */
static const double weights[K] = {0.5, 0.0, 1.5, 3.0, 10.0};

static double chi2_bound(int dof) { return dof + 6 * sqrt(2.0 * dof); }

static double chi2(const int64_t *counts, const double *p, int64_t total)
{
    double x2 = 0;
    for (int j = 0; j < K; j++)
        if (p[j] > 0)
            x2 += (counts[j] - total * p[j]) * (counts[j] - total * p[j]) / (total * p[j]);
    return x2;
}

static tide_tensor *weights_tensor(tide_dtype dt)
{
    int64_t k = K;
    tide_tensor *w64 = tide_from_data(weights, 1, &k, TIDE_FLOAT64);
    tide_tensor *w = tide_cast(w64, dt);
    tide_release(w64);
    return w;
}

/* The result's int64 values, or NULL. */
static int64_t *values_of(const tide_tensor *t)
{
    int64_t n = tide_numel(t);
    int64_t *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    if (v && tide_to_buffer(t, v, (size_t)n * sizeof *v) < 0) {
        free(v);
        return NULL;
    }
    return v;
}

static void normalized(double *p)
{
    double total = 0;
    for (int j = 0; j < K; j++)
        total += weights[j];
    for (int j = 0; j < K; j++)
        p[j] = weights[j] / total;
}

static void test_with_replacement(tide_dtype dt)
{
    tide_manual_seed(11);
    tide_tensor *w = weights_tensor(dt);
    tide_tensor *idx = tide_multinomial(w, N, true);
    CHECK(idx && tide_ndim(idx) == 1 && tide_size(idx, 0) == N &&
              tide_get_dtype(idx) == TIDE_INT64,
          "with replacement: shape or dtype (%s)", tide_last_error());
    int64_t *v = idx ? values_of(idx) : NULL;
    int64_t counts[K] = {0};
    bool in_range = v != NULL;
    for (int64_t i = 0; v && i < N; i++) {
        in_range = in_range && v[i] >= 0 && v[i] < K;
        if (v[i] >= 0 && v[i] < K)
            counts[v[i]]++;
    }
    double p[K];
    normalized(p);
    double x2 = chi2(counts, p, N);
    CHECK(in_range && counts[1] == 0, "%s: zero weight drawn %lld times",
          tide_dtype_name(dt), (long long)counts[1]);
    printf("%s with replacement: chi-square %.2f (bound %.2f)\n", tide_dtype_name(dt), x2,
           chi2_bound(3));
    CHECK(x2 < chi2_bound(3), "%s with replacement: chi-square %.2f over %.2f", tide_dtype_name(dt),
          x2, chi2_bound(3));
    free(v);
    tide_release(idx);
    tide_release(w);
}

/* P(second draw = j) without replacement: sum over the first i != j of p_i p_j / (1 - p_i). */
static void second_draw_law(const double *p, double *q)
{
    for (int j = 0; j < K; j++) {
        q[j] = 0;
        for (int i = 0; i < K; i++)
            if (i != j && p[i] < 1)
                q[j] += p[i] * p[j] / (1 - p[i]);
    }
}

/* N rows (an expanded, non-contiguous view) of 4 draws without replacement: distinct, zero
 * weight never drawn, first and second positions following their laws. */
static void test_without_replacement(tide_dtype dt)
{
    tide_manual_seed(12);
    tide_tensor *w = weights_tensor(dt);
    tide_tensor *row = tide_unsqueeze(w, 0);
    int64_t shape[2] = {N, K};
    tide_tensor *rows = tide_expand(row, 2, shape);
    tide_tensor *idx = tide_multinomial(rows, 4, false);
    CHECK(idx && tide_ndim(idx) == 2 && tide_size(idx, 0) == N && tide_size(idx, 1) == 4,
          "without replacement: shape (%s)", tide_last_error());
    int64_t *v = idx ? values_of(idx) : NULL;
    int64_t first[K] = {0}, second[K] = {0};
    bool distinct = v != NULL, zero_drawn = false;
    for (int64_t r = 0; v && r < N; r++) {
        const int64_t *s = v + r * 4;
        for (int a = 0; a < 4; a++) {
            zero_drawn = zero_drawn || s[a] == 1 || s[a] < 0 || s[a] >= K;
            for (int b = 0; b < a; b++)
                distinct = distinct && s[a] != s[b];
        }
        if (!zero_drawn) {
            first[s[0]]++;
            second[s[1]]++;
        }
    }
    double p[K], q[K];
    normalized(p);
    second_draw_law(p, q);
    CHECK(distinct && !zero_drawn, "%s: repeated or zero-weight draws", tide_dtype_name(dt));
    double x1 = chi2(first, p, N), x2 = chi2(second, q, N);
    printf("%s without replacement: chi-square %.2f (first), %.2f (second)\n",
           tide_dtype_name(dt), x1, x2);
    CHECK(x1 < chi2_bound(3) && x2 < chi2_bound(3),
          "%s without replacement: chi-square %.2f (first), %.2f (second) over %.2f",
          tide_dtype_name(dt), x1, x2, chi2_bound(3));
    free(v);
    tide_release(idx);
    tide_release(rows);
    tide_release(row);
    tide_release(w);
}

/* Both ways, the draws of a seed, compared as int64 arrays; n values in *out. */
static int64_t *draws(uint64_t seed, const tide_tensor *w, int64_t n, bool replacement)
{
    tide_manual_seed(seed);
    tide_tensor *idx = tide_multinomial(w, n, replacement);
    int64_t *v = idx ? values_of(idx) : NULL;
    tide_release(idx);
    return v;
}

static bool same(const int64_t *a, const int64_t *b, int64_t n)
{
    return a && b && memcmp(a, b, (size_t)n * sizeof *a) == 0;
}

static void test_determinism(void)
{
    tide_tensor *w = weights_tensor(TIDE_FLOAT32);
    for (int rep = 0; rep < 2; rep++) {
        bool replacement = rep == 1;
        int64_t n = replacement ? 64 : 4;
        int64_t *a = draws(5, w, n, replacement), *b = draws(5, w, n, replacement);
        CHECK(same(a, b, n), "replacement=%d: the same seed gave different draws", rep);
        free(a);
        free(b);
    }
    /* Another seed, or the next call after one seed: 64 draws agreeing by chance has
     * probability below 1e-10 for these weights. */
    int64_t *a = draws(5, w, 64, true), *c = draws(6, w, 64, true);
    CHECK(!same(a, c, 64), "seeds 5 and 6 gave the same draws");
    tide_manual_seed(5);
    tide_tensor *i1 = tide_multinomial(w, 64, true), *i2 = tide_multinomial(w, 64, true);
    int64_t *v1 = values_of(i1), *v2 = values_of(i2);
    CHECK(same(a, v1, 64) && !same(v1, v2, 64), "two calls after one seed drew the same");
    free(v1);
    free(v2);
    free(a);
    free(c);
    tide_release(i1);
    tide_release(i2);
    tide_release(w);
}

/* The ref device computes the keys in double from the same uniforms: the same indices (a flip
 * would need two keys within a few ulps, probability below 1e-9 per pair here). */
static void test_ref_device(void)
{
    tide_tensor *w = weights_tensor(TIDE_FLOAT64);
    tide_tensor *wr = tide_to(w, "ref");
    CHECK(wr != NULL, "to ref: %s", tide_last_error());
    for (int rep = 0; wr && rep < 2; rep++) {
        bool replacement = rep == 1;
        int64_t n = replacement ? 256 : 4;
        int64_t *a = draws(9, w, n, replacement), *b = draws(9, wr, n, replacement);
        CHECK(same(a, b, n), "ref against cpu, replacement=%d: different draws (%s)", rep,
              tide_last_error());
        free(a);
        free(b);
    }
    tide_release(wr);
    tide_release(w);
}

static void test_no_gradient(void)
{
    tide_tensor *w = weights_tensor(TIDE_FLOAT64);
    tide_requires_grad_(w, true);
    tide_tensor *idx = tide_multinomial(w, 3, true);
    CHECK(idx && !tide_requires_grad(idx), "the indices must not require grad");
    tide_release(idx);
    tide_release(w);
}

/* No rows: an empty [0, n] result both ways, as torch. */
static void test_no_rows(void)
{
    int64_t shape[2] = {0, 3};
    tide_tensor *w = tide_ones(2, shape, TIDE_FLOAT32);
    for (int rep = 0; rep < 2; rep++) {
        tide_tensor *idx = tide_multinomial(w, 2, rep == 1);
        CHECK(idx && tide_ndim(idx) == 2 && tide_size(idx, 0) == 0 && tide_size(idx, 1) == 2,
              "no rows, replacement=%d: %s", rep, tide_last_error());
        tide_release(idx);
    }
    tide_release(w);
}

static void test_errors(void)
{
    double bad[4][2] = {{1, -1}, {1, NAN}, {INFINITY, 1}, {0, 0}};
    const char *what[4] = {"is -1", "is nan", "is inf", "sums to 0"};
    int64_t two = 2;
    for (int i = 0; i < 4; i++) {
        tide_tensor *w = tide_from_data(bad[i], 1, &two, TIDE_FLOAT64);
        CHECK_ERROR(tide_multinomial(w, 1, true), "multinomial", "probs [2] float64", what[i]);
        tide_release(w);
    }
    double one_positive[2] = {3, 0};
    tide_tensor *w = tide_from_data(one_positive, 1, &two, TIDE_FLOAT32);
    CHECK_ERROR(tide_multinomial(w, 2, false), "multinomial", "1 positive weights", "2 samples");
    CHECK_ERROR(tide_multinomial(w, 3, false), "cannot draw 3 samples from 2 categories");
    CHECK_ERROR(tide_multinomial(w, 0, true), "num_samples must be positive");
    tide_release(w);
    int64_t shape3[3] = {2, 2, 2};
    tide_tensor *cube = tide_ones(3, shape3, TIDE_FLOAT32);
    CHECK_ERROR(tide_multinomial(cube, 1, true), "probs [2, 2, 2] float32", "1-D or 2-D");
    tide_release(cube);
    tide_tensor *ints = tide_ones(1, &two, TIDE_INT64);
    CHECK_ERROR(tide_multinomial(ints, 1, true), "probs [2] int64", "floating");
    tide_release(ints);
    CHECK_ERROR(tide_multinomial(NULL, 1, true), "multinomial");
    int64_t rows[2] = {2, 2};
    double second_zero[4] = {1, 1, 0, 0};
    tide_tensor *m = tide_from_data(second_zero, 2, rows, TIDE_FLOAT64);
    CHECK_ERROR(tide_multinomial(m, 1, true), "probs [2, 2] float64", "2nd row sums to 0");
    tide_release(m);
}

int main(void)
{
    test_with_replacement(TIDE_FLOAT32);
    test_with_replacement(TIDE_FLOAT64);
    test_without_replacement(TIDE_FLOAT32);
    test_without_replacement(TIDE_FLOAT64);
    test_determinism();
    test_ref_device();
    test_no_gradient();
    test_no_rows();
    test_errors();
    return test_summary("test_multinomial");
}
