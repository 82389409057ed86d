/*
 * test_conv_nd.c — conv1d/conv3d, conv_transpose1d/2d/3d (values and both gradients through
 * autograd), max/avg pools in 1-D and 3-D (ceil_mode, count_include_pad; gradients),
 * adaptive_avg_pool1d/3d and unfold/fold against direct loops in double precision over a grid
 * of stride, padding, dilation, groups and output_padding, in float64 and float32, plus the
 * errors (op, shapes and dtypes named).
 *
 * Tolerances: each output is a sum of products; |got - want| <= tol * (sum of |terms|), with
 * tol 1e-12 for float64 and 1e-5 for float32 (BLAS reorders sums, and inputs round to float32
 * once: a few ulps of 2^-24 times a factor for the partial sums). Pools compare max exactly
 * and averages at the same relative tolerance.
 */
#include <stdlib.h>

#include "tide.h"
#include "test_util.h"
#include "test_ref.h"

/* The geometries below list (nd, in, k, s, p, d[, op]) positionally; fields left out are 0. */
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

/* Spatial geometry padded to 3 dims (1-D: D = H = 1 with unit kernel/stride). */
typedef struct geom {
    int nd;
    int64_t in[3], k[3], s[3], p[3], d[3], op[3], out[3];
} geom;

static void pad3(geom *g)
{
    int off = 3 - g->nd;
    for (int i = 2; i >= 0; i--) {
        int src = i - off;
        g->in[i] = src >= 0 ? g->in[src] : 1;
        g->k[i] = src >= 0 ? g->k[src] : 1;
        g->s[i] = src >= 0 ? g->s[src] : 1;
        g->p[i] = src >= 0 ? g->p[src] : 0;
        g->d[i] = src >= 0 ? g->d[src] : 1;
        g->op[i] = src >= 0 ? g->op[src] : 0;
    }
}

static double *rnd(int64_t n, tide_dtype dt)
{
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    ref_fill(v, n, dt, REF_GEN_GENERAL);
    return v;
}

static double *zeros(int64_t n) { return calloc((size_t)(n > 0 ? n : 1), sizeof(double)); }

/* shape [a, b, spatial nd] from a geometry's 3-D sizes. */
static int shape_of(int nd, int64_t a, int64_t b, const int64_t *sp3, int64_t *shape)
{
    shape[0] = a;
    shape[1] = b;
    for (int i = 0; i < nd; i++)
        shape[2 + i] = sp3[3 - nd + i];
    return nd + 2;
}

static void compare(const char *what, const tide_tensor *t, const double *want,
                    const double *scale, int64_t n, double tol)
{
    double *got = ref_read(t);
    CHECK(got && tide_numel(t) == n, "%s: no result or %lld elements (want %lld): %s", what,
          t ? (long long)tide_numel(t) : -1LL, (long long)n, tide_last_error());
    if (!got || tide_numel(t) != n) {
        free(got);
        return;
    }
    int64_t bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++)
        if (!(fabs(got[i] - want[i]) <= tol * (scale ? scale[i] : fabs(want[i])) + 1e-300))
            bad = i;
    CHECK(bad < 0, "%s: element %lld is %.17g, want %.17g", what, (long long)bad,
          bad >= 0 ? got[bad] : 0, bad >= 0 ? want[bad] : 0);
    free(got);
}

static tide_tensor *leaf(const double *v, int ndim, const int64_t *shape, tide_dtype dt)
{
    tide_tensor *t = ref_from_doubles(v, ndim, shape, dt);
    tide_requires_grad_(t, true);
    return t;
}

/* ---- convolutions ------------------------------------------------------------------------- */

/* One conv (transposed or not) with N = 2, channel counts c (input), o (output) and groups,
 * against the loops: forward, and dx, dw for a random upstream gradient. */
static void check_conv(bool transposed, geom g, int64_t c, int64_t o, int groups, tide_dtype dt)
{
    int nd = g.nd;
    pad3(&g);
    int64_t n = 2, cg = c / groups, og = o / groups;
    for (int i = 0; i < 3; i++)
        g.out[i] = transposed ? (g.in[i] - 1) * g.s[i] - 2 * g.p[i] + g.d[i] * (g.k[i] - 1) +
                                    g.op[i] + 1
                              : (g.in[i] + 2 * g.p[i] - g.d[i] * (g.k[i] - 1) - 1) / g.s[i] + 1;
    int64_t xs[5], ws[5], ys[5], kk = g.k[0] * g.k[1] * g.k[2];
    int xn = shape_of(nd, n, c, g.in, xs);
    shape_of(nd, transposed ? c : o, transposed ? og : cg, g.k, ws);
    shape_of(nd, n, o, g.out, ys);
    int64_t nx = ref_numel(xn, xs), nw = ref_numel(xn, ws), ny = ref_numel(xn, ys);
    double *x = rnd(nx, dt), *w = rnd(nw, dt), *gy = rnd(ny, dt), *b = rnd(o, dt);
    double *y = zeros(ny), *ysc = zeros(ny), *dx = zeros(nx), *dxs = zeros(nx), *dw = zeros(nw),
           *dws = zeros(nw);
    int64_t ip = g.in[0] * g.in[1] * g.in[2], opn = g.out[0] * g.out[1] * g.out[2];
    /* Every (input position, output position, tap) triple the op links. */
    for (int64_t bn = 0; bn < n; bn++)
        for (int64_t q = 0; q < opn; q++)
            for (int64_t t = 0; t < kk; t++) {
                int64_t oz = q / (g.out[1] * g.out[2]), oy = q / g.out[2] % g.out[1],
                        ox = q % g.out[2];
                int64_t tz = t / (g.k[1] * g.k[2]), ty = t / g.k[2] % g.k[1], tx = t % g.k[2];
                int64_t pos[3], opos[3] = {oz, oy, ox}, tap[3] = {tz, ty, tx};
                bool ok = true;
                for (int i = 0; i < 3 && ok; i++) {
                    if (!transposed) {
                        pos[i] = opos[i] * g.s[i] - g.p[i] + tap[i] * g.d[i];
                    } else { /* opos = pos*s - p + tap*d */
                        int64_t num = opos[i] + g.p[i] - tap[i] * g.d[i];
                        ok = num >= 0 && num % g.s[i] == 0;
                        pos[i] = num / g.s[i];
                    }
                    ok = ok && pos[i] >= 0 && pos[i] < g.in[i];
                }
                if (!ok)
                    continue;
                int64_t pi = (pos[0] * g.in[1] + pos[1]) * g.in[2] + pos[2];
                for (int64_t grp = 0; grp < groups; grp++)
                    for (int64_t ci = 0; ci < cg; ci++)
                        for (int64_t co = 0; co < og; co++) {
                            int64_t xc = grp * cg + ci, yc = grp * og + co;
                            int64_t xi = (bn * c + xc) * ip + pi, yi = (bn * o + yc) * opn + q;
                            int64_t wi = transposed ? (xc * og + co) * kk + t
                                                    : (yc * cg + ci) * kk + t;
                            y[yi] += x[xi] * w[wi];
                            ysc[yi] += fabs(x[xi] * w[wi]);
                            dx[xi] += gy[yi] * w[wi];
                            dxs[xi] += fabs(gy[yi] * w[wi]);
                            dw[wi] += gy[yi] * x[xi];
                            dws[wi] += fabs(gy[yi] * x[xi]);
                        }
            }
    for (int64_t i = 0; i < ny; i++) {
        double bi = b[i / opn % o];
        y[i] += bi;
        ysc[i] += fabs(bi);
    }
    tide_tensor *tx = leaf(x, xn, xs, dt), *tw = leaf(w, xn, ws, dt), *tb = leaf(b, 1, &o, dt);
    int st[3], pd[3], dl[3], opd[3];
    for (int i = 0; i < nd; i++)
        st[i] = (int)g.s[3 - nd + i], pd[i] = (int)g.p[3 - nd + i], dl[i] = (int)g.d[3 - nd + i],
        opd[i] = (int)g.op[3 - nd + i];
    tide_tensor *ty = transposed ? tide_conv_transpose_nd(nd, tx, tw, tb, st, pd, opd, groups, dl)
                                 : tide_conv_nd(nd, tx, tw, tb, st, pd, dl, groups);
    double tol = dt == TIDE_FLOAT64 ? 1e-12 : 1e-5;
    char what[160];
    snprintf(what, sizeof what, "%s%dd %s k(%lld,%lld,%lld) s(%lld,%lld,%lld) p%lld d%lld g%d",
             transposed ? "conv_transpose" : "conv", nd, ref_dtype_name(dt), (long long)g.k[0],
             (long long)g.k[1], (long long)g.k[2], (long long)g.s[0], (long long)g.s[1],
             (long long)g.s[2], (long long)g.p[2], (long long)g.d[2], groups);
    compare(what, ty, y, ysc, ny, tol);
    tide_tensor *tg = ref_from_doubles(gy, xn, ys, dt);
    if (ty && tide_backward(ty, tg, false) == 0) {
        tide_tensor *gx = tide_grad(tx), *gw = tide_grad(tw);
        char w2[200];
        snprintf(w2, sizeof w2, "%s dx", what);
        compare(w2, gx, dx, dxs, nx, tol);
        snprintf(w2, sizeof w2, "%s dw", what);
        compare(w2, gw, dw, dws, nw, tol);
        tide_release(gx);
        tide_release(gw);
    } else {
        CHECK(0, "%s: backward failed: %s", what, tide_last_error());
    }
    tide_release(tg);
    tide_release(ty);
    tide_release(tx);
    tide_release(tw);
    tide_release(tb);
    free(x), free(w), free(gy), free(b), free(y), free(ysc), free(dx), free(dxs), free(dw),
        free(dws);
}

static void test_convs(tide_dtype dt)
{
    /* conv1d: plain, stride + padding + dilation, groups (depthwise too) */
    check_conv(false, (geom){1, {9}, {3}, {1}, {0}, {1}}, 3, 4, 1, dt);
    check_conv(false, (geom){1, {11}, {3}, {2}, {2}, {2}}, 4, 6, 2, dt);
    check_conv(false, (geom){1, {8}, {2}, {3}, {1}, {1}}, 4, 4, 4, dt);
    /* conv3d */
    check_conv(false, (geom){3, {4, 5, 6}, {2, 3, 3}, {1, 1, 1}, {0, 1, 1}, {1, 1, 1}}, 2, 3, 1, dt);
    check_conv(false, (geom){3, {5, 6, 7}, {3, 2, 3}, {2, 1, 2}, {1, 0, 1}, {2, 1, 1}}, 4, 6, 2, dt);
    check_conv(false, (geom){3, {3, 4, 4}, {1, 1, 1}, {1, 1, 1}, {0, 0, 0}, {1, 1, 1}}, 3, 5, 1, dt);
    /* transposed: 1-D, 2-D, 3-D with stride, padding, output_padding, dilation, groups */
    check_conv(true, (geom){1, {7}, {3}, {2}, {1}, {1}, {1}}, 4, 6, 2, dt);
    check_conv(true, (geom){1, {6}, {4}, {1}, {0}, {2}, {0}}, 3, 2, 1, dt);
    check_conv(true, (geom){2, {4, 5}, {3, 2}, {2, 3}, {1, 0}, {1, 2}, {1, 2}}, 4, 6, 2, dt);
    check_conv(true, (geom){3, {3, 4, 3}, {3, 2, 3}, {2, 1, 2}, {1, 0, 1}, {1, 1, 1}, {1, 0, 1}},
               2, 3, 1, dt);
    check_conv(true, (geom){3, {3, 3, 4}, {2, 3, 2}, {1, 2, 1}, {0, 1, 0}, {2, 1, 1}, {1, 1, 0}},
               4, 2, 2, dt);
}

/* ---- pools -------------------------------------------------------------------------------- */

/* PyTorch's output length and per-output window [start, end) (start may be < 0) for one dim. */
static int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t p, bool ceil_mode)
{
    int64_t num = in + 2 * p - k;
    int64_t n = (ceil_mode ? (num + s - 1) / s : num / s) + 1;
    if (ceil_mode && (n - 1) * s >= in + p)
        n--;
    return n;
}

static void check_pool(bool is_max, geom g, bool ceil_mode, bool cip, tide_dtype dt)
{
    int nd = g.nd;
    pad3(&g);
    int64_t n = 2, c = 3;
    for (int i = 0; i < 3; i++)
        g.out[i] = pool_out(g.in[i], g.k[i], g.s[i], g.p[i], ceil_mode);
    int64_t xs[5], ys[5];
    int xn = shape_of(nd, n, c, g.in, xs);
    shape_of(nd, n, c, g.out, ys);
    int64_t nx = ref_numel(xn, xs), ny = ref_numel(xn, ys);
    int64_t ip = g.in[0] * g.in[1] * g.in[2], opn = g.out[0] * g.out[1] * g.out[2];
    double *x = rnd(nx, dt), *gy = rnd(ny, dt), *y = zeros(ny), *dx = zeros(nx);
    double *ysc = zeros(ny), *dxs = zeros(nx); /* sums of |terms| (the error scale) */
    for (int64_t pl = 0; pl < n * c; pl++)
        for (int64_t q = 0; q < opn; q++) {
            int64_t oq[3] = {q / (g.out[1] * g.out[2]), q / g.out[2] % g.out[1], q % g.out[2]};
            int64_t lo[3], hi[3], div = 1, valid = 1;
            for (int i = 0; i < 3; i++) {
                int64_t st = oq[i] * g.s[i] - g.p[i];
                int64_t en = st + g.k[i] < g.in[i] + g.p[i] ? st + g.k[i] : g.in[i] + g.p[i];
                div *= en - st;
                lo[i] = st > 0 ? st : 0;
                hi[i] = en < g.in[i] ? en : g.in[i];
                valid *= hi[i] - lo[i];
            }
            double acc = is_max ? -INFINITY : 0;
            int64_t arg = -1;
            for (int64_t z = lo[0]; z < hi[0]; z++)
                for (int64_t yy = lo[1]; yy < hi[1]; yy++)
                    for (int64_t xx = lo[2]; xx < hi[2]; xx++) {
                        int64_t i = pl * ip + (z * g.in[1] + yy) * g.in[2] + xx;
                        if (is_max && x[i] > acc)
                            acc = x[i], arg = i;
                        else if (!is_max)
                            acc += x[i], ysc[pl * opn + q] += fabs(x[i]);
                    }
            double dv = (double)(cip ? div : valid);
            y[pl * opn + q] = is_max ? acc : acc / dv;
            ysc[pl * opn + q] /= dv;
            if (is_max) {
                dx[arg] += gy[pl * opn + q];
                dxs[arg] += fabs(gy[pl * opn + q]);
                continue;
            }
            for (int64_t z = lo[0]; z < hi[0]; z++)
                for (int64_t yy = lo[1]; yy < hi[1]; yy++)
                    for (int64_t xx = lo[2]; xx < hi[2]; xx++)
                        dx[pl * ip + (z * g.in[1] + yy) * g.in[2] + xx] += gy[pl * opn + q] / dv,
                        dxs[pl * ip + (z * g.in[1] + yy) * g.in[2] + xx] +=
                            fabs(gy[pl * opn + q]) / dv;
        }
    tide_tensor *tx = leaf(x, xn, xs, dt);
    int k[3], s[3], p[3];
    for (int i = 0; i < nd; i++)
        k[i] = (int)g.k[3 - nd + i], s[i] = (int)g.s[3 - nd + i], p[i] = (int)g.p[3 - nd + i];
    tide_tensor *ty = is_max ? tide_max_pool_nd(nd, tx, k, s, p, ceil_mode, NULL)
                             : tide_avg_pool_nd(nd, tx, k, s, p, ceil_mode, cip);
    char what[160];
    snprintf(what, sizeof what, "%s_pool%dd %s k%lld s%lld p%lld ceil %d cip %d",
             is_max ? "max" : "avg", nd, ref_dtype_name(dt), (long long)g.k[2],
             (long long)g.s[2], (long long)g.p[2], ceil_mode, cip);
    double tol = dt == TIDE_FLOAT64 ? 1e-12 : 1e-6;
    CHECK(ty && ref_same_shape(ty, xn, ys), "%s: shape %s: %s", what,
          ty ? ref_tensor_shape_str(ty) : "none", tide_last_error());
    compare(what, ty, y, is_max ? NULL : ysc, ny, is_max ? 0 : tol);
    tide_tensor *tg = ref_from_doubles(gy, xn, ys, dt);
    if (ty && tide_backward(ty, tg, false) == 0) {
        tide_tensor *gx = tide_grad(tx);
        char w2[200];
        snprintf(w2, sizeof w2, "%s dx", what);
        compare(w2, gx, dx, dxs, nx, tol);
        tide_release(gx);
    } else {
        CHECK(0, "%s: backward failed: %s", what, tide_last_error());
    }
    tide_release(tg);
    tide_release(ty);
    tide_release(tx);
    free(x), free(gy), free(y), free(dx), free(ysc), free(dxs);
}

static void test_pools(tide_dtype dt)
{
    for (int m = 0; m < 2; m++) {
        bool mx = m == 0;
        check_pool(mx, (geom){1, {9}, {3}, {2}, {1}}, false, true, dt);
        check_pool(mx, (geom){1, {10}, {3}, {2}, {1}}, true, true, dt);
        check_pool(mx, (geom){1, {10}, {3}, {2}, {1}}, true, false, dt);
        check_pool(mx, (geom){1, {8}, {4}, {3}, {2}}, true, true, dt);
        check_pool(mx, (geom){3, {4, 5, 6}, {2, 2, 3}, {2, 1, 2}, {1, 0, 1}}, false, true, dt);
        check_pool(mx, (geom){3, {4, 5, 6}, {2, 2, 3}, {2, 1, 2}, {1, 0, 1}}, false, false, dt);
        check_pool(mx, (geom){3, {5, 5, 7}, {2, 3, 2}, {2, 2, 2}, {0, 1, 1}}, true, true, dt);
        check_pool(mx, (geom){3, {5, 5, 7}, {2, 3, 2}, {2, 2, 2}, {0, 1, 1}}, true, false, dt);
        check_pool(mx, (geom){2, {5, 7}, {2, 3}, {2, 2}, {1, 1}}, true, false, dt);
    }
}

/* adaptive_avg_pool1d/3d: bins [floor(i*in/n), ceil((i+1)*in/n)) per dim. */
static void test_adaptive(tide_dtype dt)
{
    int64_t xs[5] = {2, 3, 5, 7, 6}, os[3] = {3, 4, 6}, ys[5] = {2, 3, 3, 4, 6};
    int64_t nx = ref_numel(5, xs), ny = ref_numel(5, ys);
    double *x = rnd(nx, dt), *y = zeros(ny), *ysc = zeros(ny);
    for (int64_t i = 0; i < ny; i++) {
        int64_t q[5], r = i;
        for (int d = 4; d >= 0; d--)
            q[d] = r % ys[d], r /= ys[d];
        int64_t lo[3], hi[3];
        for (int d = 0; d < 3; d++)
            lo[d] = q[2 + d] * xs[2 + d] / os[d],
            hi[d] = ((q[2 + d] + 1) * xs[2 + d] + os[d] - 1) / os[d];
        double acc = 0, abs_acc = 0, cnt = (double)((hi[0] - lo[0]) * (hi[1] - lo[1]) *
                                                    (hi[2] - lo[2]));
        for (int64_t a = lo[0]; a < hi[0]; a++)
            for (int64_t b = lo[1]; b < hi[1]; b++)
                for (int64_t c = lo[2]; c < hi[2]; c++) {
                    double v = x[(((q[0] * 3 + q[1]) * 5 + a) * 7 + b) * 6 + c];
                    acc += v, abs_acc += fabs(v);
                }
        y[i] = acc / cnt;
        ysc[i] = abs_acc / cnt;
    }
    tide_tensor *tx = ref_from_doubles(x, 5, xs, dt);
    tide_tensor *ty = tide_adaptive_avg_pool_nd(3, tx, os);
    compare("adaptive_avg_pool3d", ty, y, ysc, ny, dt == TIDE_FLOAT64 ? 1e-12 : 1e-6);
    tide_release(ty);
    /* 1-D: [2, 3*5*7, 6] -> 4 bins: the same loops along the last dim only */
    int64_t x1[3] = {2, 105, 6}, o1 = 4, y1s[3] = {2, 105, 4};
    double *y1 = zeros(2 * 105 * 4);
    for (int64_t r = 0; r < 210; r++)
        for (int64_t j = 0; j < 4; j++) {
            int64_t lo = j * 6 / 4, hi = ((j + 1) * 6 + 3) / 4;
            for (int64_t t = lo; t < hi; t++)
                y1[r * 4 + j] += x[r * 6 + t] / (double)(hi - lo);
        }
    tide_tensor *t1 = tide_reshape(tx, 3, x1);
    ty = tide_adaptive_avg_pool_nd(1, t1, &o1);
    CHECK(ty && ref_same_shape(ty, 3, y1s), "adaptive_avg_pool1d shape");
    compare("adaptive_avg_pool1d", ty, y1, NULL, 2 * 105 * 4, dt == TIDE_FLOAT64 ? 1e-12 : 1e-6);
    tide_release(ty);
    tide_release(t1);
    tide_release(tx);
    free(x), free(y), free(y1), free(ysc);
}

/* unfold against the im2col loop; fold against the col2im loop (exact: sums of <= 4 terms
 * checked at the dtype's rounding). */
static void test_fold(tide_dtype dt)
{
    int64_t xs[4] = {2, 3, 5, 6};
    int k[2] = {2, 3}, d[2] = {2, 1}, p[2] = {1, 1}, s[2] = {1, 2};
    int64_t oh = (5 + 2 - 2 - 1) / 1 + 1, ow = (6 + 2 - 2 - 1) / 2 + 1, L = oh * ow;
    int64_t nx = ref_numel(4, xs), rows = 3 * 6, ny = 2 * rows * L;
    double *x = rnd(nx, dt), *y = zeros(ny), *back = zeros(nx);
    for (int64_t n = 0; n < 2; n++)
        for (int64_t r = 0; r < rows; r++)
            for (int64_t l = 0; l < L; l++) {
                int64_t c = r / 6, i = r % 6 / 3, j = r % 3;
                int64_t h = l / ow * s[0] - p[0] + i * d[0], w = l % ow * s[1] - p[1] + j * d[1];
                if (h < 0 || h >= 5 || w < 0 || w >= 6)
                    continue;
                int64_t xi = ((n * 3 + c) * 5 + h) * 6 + w;
                y[(n * rows + r) * L + l] = x[xi];
                back[xi] += x[xi];
            }
    tide_tensor *tx = ref_from_doubles(x, 4, xs, dt);
    tide_tensor *ty = tide_unfold_patches(tx, k, d, p, s);
    compare("unfold", ty, y, NULL, ny, 0);
    int64_t hw[2] = {5, 6};
    tide_tensor *tf = ty ? tide_fold_patches(ty, hw, k, d, p, s) : NULL;
    compare("fold(unfold(x))", tf, back, NULL, nx, dt == TIDE_FLOAT64 ? 1e-15 : 1e-7);
    tide_release(tf);
    tide_release(ty);
    tide_release(tx);
    free(x), free(y), free(back);
}

static void test_errors(void)
{
    int64_t s3[3] = {2, 4, 8}, s4[4] = {2, 4, 8, 8}, w3[3] = {6, 3, 3}, w5[5] = {6, 4, 3, 3, 3};
    tide_tensor *x = tide_zeros(3, s3, TIDE_FLOAT32), *x4 = tide_zeros(4, s4, TIDE_FLOAT32);
    tide_tensor *w = tide_zeros(3, w3, TIDE_FLOAT32), *wd = tide_zeros(3, w3, TIDE_FLOAT64);
    tide_tensor *xi = tide_zeros(3, s3, TIDE_INT32), *w5t = tide_zeros(5, w5, TIDE_FLOAT32);
    CHECK_ERROR(tide_conv_nd(1, x, w, NULL, NULL, NULL, NULL, 1), "conv1d", "channel mismatch",
                "[2, 4, 8] float32", "[6, 3, 3] float32");
    CHECK_ERROR(tide_conv_nd(1, x, wd, NULL, NULL, NULL, NULL, 1), "conv1d", "same dtype",
                "float64");
    CHECK_ERROR(tide_conv_nd(1, xi, w, NULL, NULL, NULL, NULL, 1), "conv1d", "int32");
    CHECK_ERROR(tide_conv_nd(3, x4, w5t, NULL, NULL, NULL, NULL, 1), "conv3d", "5-D",
                "[2, 4, 8, 8] float32");
    int big[1] = {9};
    int64_t w4s[3] = {6, 4, 3};
    tide_tensor *w4 = tide_zeros(3, w4s, TIDE_FLOAT32);
    CHECK_ERROR(tide_conv_nd(1, x, w4, NULL, NULL, NULL, big, 1), "conv1d", "larger than",
                "[2, 4, 8] float32");
    int st[1] = {2}, op[1] = {2};
    CHECK_ERROR(tide_conv_transpose_nd(1, x, w, NULL, st, NULL, op, 1, NULL), "conv_transpose1d",
                "channel mismatch");
    int64_t wt3[3] = {4, 3, 3};
    tide_tensor *wt = tide_zeros(3, wt3, TIDE_FLOAT32);
    CHECK_ERROR(tide_conv_transpose_nd(1, x, wt, NULL, st, NULL, op, 1, NULL), "conv_transpose1d",
                "output_padding 2", "stride 2", "[2, 4, 8] float32");
    int k1[1] = {3}, p2[1] = {2};
    CHECK_ERROR(tide_max_pool_nd(1, x, k1, NULL, p2, false, NULL), "max_pool1d",
                "at most half", "[2, 4, 8] float32");
    CHECK_ERROR(tide_avg_pool_nd(3, x, k1, NULL, NULL, false, true), "avg_pool3d", "5-D",
                "[2, 4, 8] float32");
    int64_t o0 = 0;
    CHECK_ERROR(tide_adaptive_avg_pool_nd(1, x, &o0), "adaptive_avg_pool1d", "positive");
    int kf[2] = {3, 3};
    int64_t hw[2] = {8, 8};
    CHECK_ERROR(tide_fold_patches(x, hw, kf, NULL, NULL, NULL), "fold", "[2, 4, 8] float32",
                "C*9");
    CHECK_ERROR(tide_unfold_patches(x, kf, NULL, NULL, NULL), "unfold", "4-D");
    tide_release(x), tide_release(x4), tide_release(w), tide_release(wd), tide_release(xi),
        tide_release(w5t), tide_release(wt), tide_release(w4);
}

int main(void)
{
    ref_seed(24);
    tide_dtype dts[2] = {TIDE_FLOAT64, TIDE_FLOAT32};
    for (int i = 0; i < 2; i++) {
        test_convs(dts[i]);
        test_pools(dts[i]);
        test_adaptive(dts[i]);
        test_fold(dts[i]);
    }
    test_errors();
    tide_shutdown();
    return test_summary("test_conv_nd");
}
