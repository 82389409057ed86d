/*
 * test_linalg_ops.c — issue 24's C composites against plain reference loops in double:
 * addmm/baddbmm/addbmm, cross, kron, tensordot, cdist, the diagonal and unfold views (strides
 * and values, on a transposed input), einsum (batched product, diagonal, trace, three operands,
 * ellipsis), masked_select, scatter (replace: the last source wins; "multiply"), index_add,
 * roll, repeat_interleave, meshgrid and cartesian_prod; then the errors, which name the op and
 * the shapes.
 *
 * Tolerance: 1e-12 relative for float64 sums of at most a few dozen O(1) products (rounding
 * error near 1e-15 per term); 0 where an op only moves or selects elements.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tide.h"
#include "test_util.h"

static double rnd(void) { return (double)rand() / RAND_MAX * 2 - 1; }

static tide_tensor *randt(int nd, const int64_t *shape, double *out)
{
    int64_t n = 1;
    for (int i = 0; i < nd; i++)
        n *= shape[i];
    for (int64_t i = 0; i < n; i++)
        out[i] = rnd();
    return tide_from_data(out, nd, shape, TIDE_FLOAT64);
}

/* Compares t (float64) against want (n values) within tol relative; releases t. */
static void expect(tide_tensor *t, const double *want, int64_t n, double tol, const char *what)
{
    CHECK(t != NULL, "%s: %s", what, tide_last_error());
    if (!t)
        return;
    CHECK(tide_numel(t) == n, "%s: %lld elements, expected %lld", what, (long long)tide_numel(t),
          (long long)n);
    tide_tensor *c = tide_contiguous(t);
    double *got = calloc((size_t)(n ? n : 1), sizeof *got);
    if (c && tide_numel(t) == n && tide_to_buffer(c, got, (size_t)n * sizeof *got) == 0) {
        double worst = 0;
        for (int64_t i = 0; i < n; i++) {
            double e = fabs(got[i] - want[i]) / (1 + fabs(want[i]));
            worst = e > worst ? e : worst;
        }
        CHECK(worst <= tol, "%s: worst relative error %g > %g", what, worst, tol);
    }
    free(got);
    tide_release(c);
    tide_release(t);
}

static void test_addmm_family(void)
{
    double in[3], a[2 * 4 * 3], b[2 * 3 * 5], want[2 * 4 * 5];
    tide_tensor *ti = randt(1, (int64_t[]){1}, in);
    tide_tensor *ta = randt(3, (int64_t[]){2, 4, 3}, a), *tb = randt(3, (int64_t[]){2, 3, 5}, b);
    for (int q = 0; q < 2; q++)
        for (int i = 0; i < 4; i++)
            for (int j = 0; j < 5; j++) {
                double s = 0;
                for (int k = 0; k < 3; k++)
                    s += a[q * 12 + i * 3 + k] * b[q * 15 + k * 5 + j];
                want[q * 20 + i * 5 + j] = 0.5 * in[0] + 2 * s;
            }
    expect(tide_baddbmm(ti, ta, tb, 0.5, 2), want, 40, 1e-12, "baddbmm");
    double sum[20];
    for (int i = 0; i < 20; i++)
        sum[i] = want[i] + want[20 + i] - 0.5 * in[0];
    expect(tide_addbmm(ti, ta, tb, 0.5, 2), sum, 20, 1e-12, "addbmm (one product over the batch)");
    tide_tensor *a0 = tide_select(ta, 0, 0), *b0 = tide_select(tb, 0, 0);
    expect(tide_addmm(ti, a0, b0, 0.5, 2), want, 20, 1e-12, "addmm");
    tide_release(a0);
    tide_release(b0);
    tide_release(ti);
    tide_release(ta);
    tide_release(tb);
}

static void test_cross_kron_tensordot(void)
{
    double a[2 * 3], b[2 * 3], want[64];
    tide_tensor *ta = randt(2, (int64_t[]){2, 3}, a), *tb = randt(2, (int64_t[]){2, 3}, b);
    for (int r = 0; r < 2; r++)
        for (int i = 0; i < 3; i++)
            want[r * 3 + i] = a[r * 3 + (i + 1) % 3] * b[r * 3 + (i + 2) % 3] -
                              a[r * 3 + (i + 2) % 3] * b[r * 3 + (i + 1) % 3];
    expect(tide_cross(ta, tb, 1), want, 6, 1e-12, "cross");
    for (int i = 0; i < 2; i++) /* kron of [2, 3] and [2, 3]: [4, 9] */
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 2; k++)
                for (int l = 0; l < 3; l++)
                    want[(i * 2 + k) * 9 + j * 3 + l] = a[i * 3 + j] * b[k * 3 + l];
    expect(tide_kron(ta, tb), want, 36, 1e-12, "kron");
    for (int i = 0; i < 3; i++) /* tensordot over dim 0 of both: a^T b, [3, 3] */
        for (int j = 0; j < 3; j++)
            want[i * 3 + j] = a[i] * b[j] + a[3 + i] * b[3 + j];
    expect(tide_tensordot(ta, tb, 1, (int[]){0}, (int[]){0}), want, 9, 1e-12, "tensordot");
    for (int i = 0; i < 2; i++) /* cdist of the rows, p = 2 and p = 1 */
        for (int j = 0; j < 2; j++) {
            double s2 = 0, s1 = 0;
            for (int k = 0; k < 3; k++) {
                s2 += (a[i * 3 + k] - b[j * 3 + k]) * (a[i * 3 + k] - b[j * 3 + k]);
                s1 += fabs(a[i * 3 + k] - b[j * 3 + k]);
            }
            want[i * 2 + j] = sqrt(s2);
            want[4 + i * 2 + j] = s1;
        }
    expect(tide_cdist(ta, tb, 2), want, 4, 1e-12, "cdist p=2");
    expect(tide_cdist(ta, tb, 1), want + 4, 4, 1e-12, "cdist p=1");
    tide_release(ta);
    tide_release(tb);
}

static void test_views(void)
{
    double v[12], want[24];
    tide_tensor *x = randt(2, (int64_t[]){3, 4}, v);
    tide_tensor *xt = tide_transpose(x, 0, 1); /* [4, 3], strides (1, 4) */
    tide_tensor *d = tide_diagonal(xt, -1, 0, 1);
    CHECK(d && tide_shares_storage(d, x) && tide_strides(d)[0] == 5 && tide_size(d, 0) == 3,
          "diagonal of a transposed [4, 3]: a view of stride 5");
    for (int i = 0; i < 3; i++)
        want[i] = v[i * 4 + i + 1]; /* xt[i + 1][i] = x[i][i + 1] */
    expect(d, want, 3, 0, "diagonal values");
    tide_tensor *u = tide_unfold(x, 1, 2, 2); /* [3, 2, 2] windows of the rows */
    CHECK(u && tide_shares_storage(u, x) && tide_ndim(u) == 3, "unfold is a view");
    for (int r = 0; r < 3; r++)
        for (int w = 0; w < 2; w++)
            for (int j = 0; j < 2; j++)
                want[r * 4 + w * 2 + j] = v[r * 4 + w * 2 + j];
    expect(u, want, 12, 0, "unfold values");
    expect(tide_trace(x), (double[]){v[0] + v[5] + v[10]}, 1, 1e-12, "trace");
    int64_t shifts[1] = {1};
    for (int i = 0; i < 12; i++)
        want[i] = v[(i + 11) % 12];
    expect(tide_roll(x, 1, shifts, NULL, 0), want, 12, 0, "roll flattened");
    int dim = 1;
    for (int i = 0; i < 24; i++)
        want[i] = v[(i / 8) * 4 + (i % 8) / 2];
    expect(tide_repeat_interleave(x, 2, &dim), want, 24, 0, "repeat_interleave");
    tide_release(xt);
    tide_release(x);
}

static void test_einsum(void)
{
    double a[2 * 3 * 4], b[2 * 4 * 2], want[64];
    tide_tensor *ta = randt(3, (int64_t[]){2, 3, 4}, a), *tb = randt(3, (int64_t[]){2, 4, 2}, b);
    for (int q = 0; q < 2; q++)
        for (int i = 0; i < 3; i++)
            for (int k = 0; k < 2; k++) {
                double s = 0;
                for (int j = 0; j < 4; j++)
                    s += a[q * 12 + i * 4 + j] * b[q * 8 + j * 2 + k];
                want[q * 6 + k * 3 + i] = s; /* "bij,bjk->bki" */
            }
    tide_tensor *ops[3] = {ta, tb, NULL};
    expect(tide_einsum("bij,bjk->bki", ops, 2), want, 12, 1e-12, "einsum batched product");
    expect(tide_einsum("...ij , ...jk -> ...ki", ops, 2), want, 12, 1e-12, "einsum ellipsis");
    double total = 0;
    for (int i = 0; i < 24; i++)
        total += a[i];
    expect(tide_einsum("bij->", ops, 1), &total, 1, 1e-12, "einsum sum");
    double sq[9];
    tide_tensor *ts = randt(2, (int64_t[]){3, 3}, sq);
    tide_tensor *one[1] = {ts};
    expect(tide_einsum("ii->i", one, 1), (double[]){sq[0], sq[4], sq[8]}, 3, 0, "einsum diagonal");
    double tr = 0; /* trace(S S S) */
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 3; k++)
                tr += sq[i * 3 + j] * sq[j * 3 + k] * sq[k * 3 + i];
    tide_tensor *three[3] = {ts, ts, ts};
    expect(tide_einsum("ij,jk,ki", three, 3), &tr, 1, 1e-12, "einsum three operands");
    tide_release(ts);
    tide_release(ta);
    tide_release(tb);
}

static void test_indexing(void)
{
    double v[6], want[6];
    tide_tensor *x = randt(2, (int64_t[]){2, 3}, v);
    tide_tensor *zero = tide_scalar(0, TIDE_FLOAT64);
    tide_tensor *mask = tide_gt(x, zero);
    int n = 0;
    for (int i = 0; i < 6; i++)
        if (v[i] > 0)
            want[n++] = v[i];
    expect(tide_masked_select(x, mask), want, n, 0, "masked_select");
    int64_t idx[4] = {2, 2, 0, 1}; /* [2, 2] along dim 1: row 0 -> cols 2, 2; row 1 -> 0, 1 */
    tide_tensor *ti = tide_from_data(idx, 2, (int64_t[]){2, 2}, TIDE_INT64);
    double s[4] = {2, 3, 4, 5};
    tide_tensor *src = tide_from_data(s, 2, (int64_t[]){2, 2}, TIDE_FLOAT64);
    memcpy(want, v, sizeof want);
    want[2] *= 6;
    want[3] *= 4;
    want[4] *= 5;
    expect(tide_scatter(x, 1, ti, src, "multiply"), want, 6, 1e-15, "scatter multiply");
    memcpy(want, v, sizeof want); /* replace: of the two sources on (0, 2) the last wins */
    want[2] = 3;
    want[3] = 4;
    want[4] = 5;
    expect(tide_scatter(x, 1, ti, src, NULL), want, 6, 0, "scatter replace");
    int64_t rows[2] = {1, 1};
    tide_tensor *tr = tide_from_data(rows, 1, (int64_t[]){2}, TIDE_INT64);
    tide_tensor *src2 = tide_full(2, (int64_t[]){2, 3}, 1, TIDE_FLOAT64);
    memcpy(want, v, sizeof want);
    for (int j = 0; j < 3; j++)
        want[3 + j] += 2 * 3;
    expect(tide_index_add(x, 0, tr, src2, 3), want, 6, 1e-15, "index_add");
    tide_release(src2);
    tide_release(tr);
    tide_release(src);
    tide_release(ti);
    tide_release(mask);
    tide_release(zero);
    tide_release(x);
}

static void test_grids(void)
{
    double a[2] = {1, 2}, b[3] = {3, 4, 5};
    tide_tensor *ta = tide_from_data(a, 1, (int64_t[]){2}, TIDE_FLOAT64);
    tide_tensor *tb = tide_from_data(b, 1, (int64_t[]){3}, TIDE_FLOAT64);
    tide_tensor *xs[2] = {ta, tb}, *grid[2] = {NULL, NULL};
    CHECK(tide_meshgrid(xs, 2, true, grid) == 0, "meshgrid xy: %s", tide_last_error());
    expect(grid[0], (double[]){1, 2, 1, 2, 1, 2}, 6, 0, "meshgrid xy, first"); /* [3, 2] */
    expect(grid[1], (double[]){3, 3, 4, 4, 5, 5}, 6, 0, "meshgrid xy, second");
    expect(tide_cartesian_prod(xs, 2), (double[]){1, 3, 1, 4, 1, 5, 2, 3, 2, 4, 2, 5}, 12, 0,
           "cartesian_prod");
    tide_release(ta);
    tide_release(tb);
}

static void test_errors(void)
{
    tide_tensor *m = tide_ones(2, (int64_t[]){2, 3}, TIDE_FLOAT32);
    tide_tensor *v = tide_ones(1, (int64_t[]){3}, TIDE_FLOAT32);
    tide_tensor *ops[2] = {m, m};
    CHECK_ERROR(tide_einsum("ij,jk->ik", ops, 2), "einsum", "'j'", "size");
    CHECK_ERROR(tide_einsum("ij->i->j", ops, 1), "einsum");
    CHECK_ERROR(tide_einsum("i.j", ops, 1), "einsum", "\"...\"");
    CHECK_ERROR(tide_einsum(NULL, ops, 1), "einsum", "NULL");
    CHECK_ERROR(tide_addmm(v, v, m, 1, 1), "addmm", "mat1 must be 2-D", "[3]");
    CHECK_ERROR(tide_diagonal(v, 0, 0, 1), "diagonal", "at least 2 dims", "[3]");
    CHECK_ERROR(tide_unfold(m, 1, 4, 1), "unfold", "size 4", "[2, 3]");
    CHECK_ERROR(tide_cross(m, m, 0), "cross", "size 3", "[2, 3]");
    CHECK_ERROR(tide_kron(NULL, m), "kron");
    CHECK_ERROR(tide_block_diag(NULL, 0), "block_diag");
    CHECK_ERROR(tide_masked_select(m, m), "masked_select", "bool");
    CHECK_ERROR(tide_scatter(m, 1, v, m, "max"), "scatter", "reduce");
    tide_tensor *two = tide_ones(1, (int64_t[]){2}, TIDE_FLOAT32);
    CHECK_ERROR(tide_normal(v, two), "normal", "[3]", "[2]");
    tide_release(two);
    CHECK_ERROR(tide_tile(m, 1, (int64_t[]){-2}), "tile", "-2");
    tide_release(v);
    tide_release(m);
}

int main(void)
{
    srand(24);
    test_addmm_family();
    test_cross_kron_tensordot();
    test_views();
    test_einsum();
    test_indexing();
    test_grids();
    test_errors();
    tide_shutdown();
    return test_summary("test_linalg_ops");
}
