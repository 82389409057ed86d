/*
 * test_indexing.c — gather, scatter_add, index_select, embedding, one_hot and masked_fill against
 * plain reference loops: every dtype, both index dtypes, contiguous / transposed / sliced /
 * expanded inputs and indices, every dim, 0-dim and empty tensors, results that do not depend on
 * the thread count, and every error (an out-of-range index names the index and the bound).
 */
#include <stdlib.h>

#include "tide.h"
#include "test_util.h"
#include "test_ref.h"

static const tide_dtype all_dtypes[] = {TIDE_FLOAT32, TIDE_FLOAT64, TIDE_INT32,
                                        TIDE_INT64,   TIDE_UINT8,   TIDE_BOOL};
#define NDTYPES 6

/* Values for a tensor of the given layout (ref_prepare'd) and the tensor itself. */
static tide_tensor *make(int ndim, const int64_t *shape, tide_dtype dt, int layout, int gen,
                         double **values)
{
    int64_t n = ref_numel(ndim, shape);
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    ref_fill(v, n, dt, gen);
    ref_prepare(layout, ndim, shape, v);
    *values = v;
    return ref_make(v, ndim, shape, dt, layout);
}

/* An index tensor with values in [0, bound). */
static tide_tensor *make_index(int ndim, const int64_t *shape, tide_dtype dt, int layout,
                               int64_t bound, double **values)
{
    int64_t n = ref_numel(ndim, shape);
    double *v = malloc((size_t)(n > 0 ? n : 1) * sizeof *v);
    for (int64_t i = 0; i < n; i++)
        v[i] = (double)ref_randint(0, bound - 1);
    ref_prepare(layout, ndim, shape, v);
    *values = v;
    return ref_make(v, ndim, shape, dt, layout);
}

/* ---- gather ------------------------------------------------------------------------------- */

static void ref_gather(int nd, const int64_t *xshape, const double *xv, int dim,
                       const int64_t *ishape, const double *iv, double *out)
{
    int64_t n = ref_numel(nd, ishape), idx[TIDE_MAX_DIMS] = {0};
    for (int64_t f = 0; f < n; f++) {
        int64_t xi[TIDE_MAX_DIMS];
        memcpy(xi, idx, sizeof xi);
        xi[dim] = (int64_t)iv[f];
        out[f] = xv[ref_flat(nd, xshape, xi)];
        ref_next_index(nd, ishape, idx);
    }
}

static void test_gather(void)
{
    ref_seed(1);
    struct {
        int nd;
        int64_t x[3], idx[3];
    } shapes[] = {
        {1, {9}, {4}},       {1, {5}, {12}},       {2, {4, 7}, {3, 5}},  {2, {4, 7}, {4, 9}},
        {2, {6, 1}, {6, 3}}, {3, {3, 5, 4}, {2, 5, 3}}, {3, {2, 3, 5}, {2, 1, 7}},
    };
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int nd = shapes[si].nd;
        for (int dim = 0; dim < nd; dim++) {
            int64_t xs[3], is[3];
            memcpy(xs, shapes[si].x, sizeof xs);
            memcpy(is, shapes[si].idx, sizeof is);
            /* The index may be larger than x only at dim: clip the others. */
            for (int d = 0; d < nd; d++)
                if (d != dim && is[d] > xs[d])
                    is[d] = xs[d];
            for (int di = 0; di < NDTYPES; di++) {
                tide_dtype dt = all_dtypes[di];
                int xl = (int)((si + (size_t)di + (size_t)dim) % REF_NUM_LAYOUTS);
                int il = (int)((si * 3 + (size_t)di) % REF_NUM_LAYOUTS);
                tide_dtype idt = di % 2 ? TIDE_INT32 : TIDE_INT64;
                double *xv, *iv;
                tide_tensor *x = make(nd, xs, dt, xl, REF_GEN_GENERAL, &xv);
                tide_tensor *index = make_index(nd, is, idt, il, xs[dim], &iv);
                double *want = malloc((size_t)ref_numel(nd, is) * sizeof *want + 8);
                ref_gather(nd, xs, xv, dim, is, iv, want);
                tide_tensor *g = tide_gather(x, dim - nd, index); /* negative dim too */
                char desc[200];
                snprintf(desc, sizeof desc, "gather %s %s dim %d, %s x, %s %s index",
                         ref_shape_str(nd, xs), ref_dtype_name(dt), dim, ref_layout_name(xl),
                         ref_layout_name(il), ref_dtype_name(idt));
                ref_check_tensor(desc, g, dt, nd, is, want, 0);
                tide_release(g);
                tide_release(index);
                tide_release(x);
                free(want);
                free(iv);
                free(xv);
            }
        }
    }
    /* 0-dim input and index; an empty index. */
    tide_tensor *x0 = tide_scalar(3.5, TIDE_FLOAT64);
    tide_tensor *i0 = tide_integer(0);
    tide_tensor *g = tide_gather(x0, 0, i0);
    double v = 0;
    CHECK(g && tide_ndim(g) == 0 && tide_item(g, &v) == 0 && v == 3.5, "0-dim gather: %s",
          tide_last_error());
    tide_release(g);
    tide_release(i0);
    tide_release(x0);
    int64_t xs[2] = {3, 4}, es[2] = {3, 0};
    tide_tensor *x = tide_ones(2, xs, TIDE_FLOAT32);
    tide_tensor *ei = tide_zeros(2, es, TIDE_INT64);
    g = tide_gather(x, 1, ei);
    CHECK(g && tide_numel(g) == 0 && ref_same_shape(g, 2, es), "empty gather: %s",
          tide_last_error());
    tide_release(g);
    tide_release(ei);
    tide_release(x);
}

/* ---- scatter_add -------------------------------------------------------------------------- */

/* out = x; out[... index ...] += src in row-major order of the index, in the dtype's arithmetic
 * (float32 additions rounded to float32, integers wrapped, bool or). */
static void ref_scatter_add(int nd, const int64_t *xshape, const double *xv, int dim,
                            const int64_t *ishape, const double *iv, const int64_t *sshape,
                            const double *sv, tide_dtype dt, double *out)
{
    int64_t nx = ref_numel(nd, xshape), n = ref_numel(nd, ishape), idx[TIDE_MAX_DIMS] = {0};
    memcpy(out, xv, (size_t)nx * sizeof *out);
    for (int64_t f = 0; f < n; f++) {
        int64_t oi[TIDE_MAX_DIMS];
        memcpy(oi, idx, sizeof oi);
        oi[dim] = (int64_t)iv[f];
        double *o = &out[ref_flat(nd, xshape, oi)];
        double s = sv[ref_flat(nd, sshape, idx)];
        if (dt == TIDE_BOOL)
            *o = (*o != 0 || s != 0) ? 1 : 0;
        else if (dt == TIDE_FLOAT32)
            *o = (double)((float)*o + (float)s);
        else
            *o = ref_quantize(dt, *o + s);
        ref_next_index(nd, ishape, idx);
    }
}

static void test_scatter_add(void)
{
    ref_seed(2);
    struct {
        int nd;
        int64_t x[3], idx[3], src[3];
    } shapes[] = {
        {1, {6}, {10}, {11}},
        {2, {4, 5}, {4, 5}, {4, 5}},
        {2, {5, 6}, {3, 8}, {4, 9}},
        {3, {3, 4, 5}, {2, 4, 3}, {3, 4, 6}},
        {3, {2, 3, 4}, {2, 3, 9}, {2, 3, 9}},
    };
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int nd = shapes[si].nd;
        for (int dim = 0; dim < nd; dim++) {
            int64_t xs[3], is[3], ss[3];
            memcpy(xs, shapes[si].x, sizeof xs);
            memcpy(is, shapes[si].idx, sizeof is);
            memcpy(ss, shapes[si].src, sizeof ss);
            for (int d = 0; d < nd; d++) {
                if (d != dim && is[d] > xs[d])
                    is[d] = xs[d];
                if (ss[d] < is[d])
                    ss[d] = is[d];
            }
            for (int di = 0; di < NDTYPES; di++) {
                tide_dtype dt = all_dtypes[di];
                int xl = (int)((si + (size_t)di) % REF_NUM_LAYOUTS);
                int il = (int)((si + (size_t)dim + (size_t)di * 3) % REF_NUM_LAYOUTS);
                int sl = (int)((si * 2 + (size_t)di) % REF_NUM_LAYOUTS);
                tide_dtype idt = (di + dim) % 2 ? TIDE_INT32 : TIDE_INT64;
                double *xv, *iv, *sv;
                tide_tensor *x = make(nd, xs, dt, xl, REF_GEN_SMALL, &xv);
                tide_tensor *index = make_index(nd, is, idt, il, xs[dim], &iv);
                tide_tensor *src = make(nd, ss, dt, sl, REF_GEN_SMALL, &sv);
                double *want = malloc((size_t)ref_numel(nd, xs) * sizeof *want);
                ref_scatter_add(nd, xs, xv, dim, is, iv, ss, sv, dt, want);
                tide_tensor *r = tide_scatter_add(x, dim, index, src);
                char desc[200];
                snprintf(desc, sizeof desc,
                         "scatter_add %s %s dim %d index %s (%s) src %s (%s), x %s",
                         ref_shape_str(nd, xs), ref_dtype_name(dt), dim, ref_shape_str(nd, is),
                         ref_layout_name(il), ref_shape_str(nd, ss), ref_layout_name(sl),
                         ref_layout_name(xl));
                ref_check_tensor(desc, r, dt, nd, xs, want, 0);
                /* Functional: x keeps its values. */
                double *after = ref_read(x);
                CHECK(after && ref_mismatch(after, xv, ref_numel(nd, xs), 0, 0) < 0,
                      "%s: the input changed", desc);
                free(after);
                tide_release(r);
                tide_release(src);
                tide_release(index);
                tide_release(x);
                free(want);
                free(sv);
                free(iv);
                free(xv);
            }
        }
    }
    /* An empty index gives a copy of x. */
    int64_t xs[2] = {2, 3}, es[2] = {2, 0};
    double xv[6] = {1, 2, 3, 4, 5, 6};
    tide_tensor *x = ref_from_doubles(xv, 2, xs, TIDE_FLOAT32);
    tide_tensor *ei = tide_zeros(2, es, TIDE_INT64);
    tide_tensor *esrc = tide_zeros(2, es, TIDE_FLOAT32);
    tide_tensor *r = tide_scatter_add(x, 1, ei, esrc);
    ref_check_tensor("scatter_add with an empty index", r, TIDE_FLOAT32, 2, xs, xv, 0);
    CHECK(r && !tide_shares_storage(r, x), "scatter_add returned x's storage");
    tide_release(r), tide_release(esrc), tide_release(ei), tide_release(x);
}

/* ---- index_select ------------------------------------------------------------------------- */

static void test_index_select(void)
{
    ref_seed(3);
    struct {
        int nd;
        int64_t x[3];
        int64_t k;
    } shapes[] = {{1, {7}, 5}, {2, {5, 6}, 8}, {2, {3, 1}, 4}, {3, {4, 3, 5}, 6}, {3, {2, 5, 3}, 1}};
    for (size_t si = 0; si < sizeof shapes / sizeof shapes[0]; si++) {
        int nd = shapes[si].nd;
        const int64_t *xs = shapes[si].x;
        for (int dim = 0; dim < nd; dim++) {
            for (int di = 0; di < NDTYPES; di++) {
                tide_dtype dt = all_dtypes[di];
                int xl = (int)((si + (size_t)di + (size_t)dim) % REF_NUM_LAYOUTS);
                int il = (int)((size_t)di % 3 == 0 ? REF_CONTIG : REF_SLICED);
                tide_dtype idt = di % 2 ? TIDE_INT64 : TIDE_INT32;
                int64_t k = shapes[si].k;
                double *xv, *iv;
                tide_tensor *x = make(nd, xs, dt, xl, REF_GEN_GENERAL, &xv);
                tide_tensor *index = make_index(1, &k, idt, il, xs[dim], &iv);
                int64_t os[3];
                memcpy(os, xs, sizeof os);
                os[dim] = k;
                int64_t n = ref_numel(nd, os), idx[3] = {0};
                double *want = malloc((size_t)n * sizeof *want);
                for (int64_t f = 0; f < n; f++) {
                    int64_t xi[3];
                    memcpy(xi, idx, sizeof xi);
                    xi[dim] = (int64_t)iv[idx[dim]];
                    want[f] = xv[ref_flat(nd, xs, xi)];
                    ref_next_index(nd, os, idx);
                }
                tide_tensor *r = tide_index_select(x, dim, index);
                char desc[200];
                snprintf(desc, sizeof desc, "index_select %s %s (%s) dim %d, %lld %s indices",
                         ref_shape_str(nd, xs), ref_dtype_name(dt), ref_layout_name(xl), dim,
                         (long long)k, ref_dtype_name(idt));
                ref_check_tensor(desc, r, dt, nd, os, want, 0);
                tide_release(r);
                tide_release(index);
                tide_release(x);
                free(want);
                free(iv);
                free(xv);
            }
        }
    }
    /* A 0-dim index keeps the dim (size 1); an empty index gives size 0; 0-dim input. */
    int64_t xs[2] = {3, 4};
    double xv[12];
    for (int i = 0; i < 12; i++)
        xv[i] = i;
    tide_tensor *x = ref_from_doubles(xv, 2, xs, TIDE_FLOAT64);
    tide_tensor *i0 = tide_integer(2);
    tide_tensor *r = tide_index_select(x, 1, i0);
    int64_t s31[2] = {3, 1};
    double w31[3] = {2, 6, 10};
    ref_check_tensor("index_select with a 0-dim index", r, TIDE_FLOAT64, 2, s31, w31, 0);
    tide_release(r);
    int64_t zero = 0, s30[2] = {3, 0};
    tide_tensor *ie = tide_zeros(1, &zero, TIDE_INT64);
    r = tide_index_select(x, 1, ie);
    CHECK(r && ref_same_shape(r, 2, s30), "index_select with an empty index: %s",
          tide_last_error());
    tide_release(r);
    tide_release(ie);
    tide_tensor *x0 = tide_scalar(7, TIDE_INT32);
    tide_tensor *z = tide_integer(0);
    r = tide_index_select(x0, 0, z);
    double v = 0;
    CHECK(r && tide_ndim(r) == 0 && tide_item(r, &v) == 0 && v == 7, "0-dim index_select: %s",
          tide_last_error());
    tide_release(r), tide_release(z), tide_release(x0), tide_release(i0), tide_release(x);
}

/* ---- results independent of the thread count ----------------------------------------------- */

static bool same_bits(tide_tensor *a, tide_tensor *b)
{
    if (!a || !b || tide_numel(a) != tide_numel(b) || tide_get_dtype(a) != tide_get_dtype(b))
        return false;
    size_t n = (size_t)tide_numel(a) * tide_dtype_size(tide_get_dtype(a));
    char *x = malloc(n + 1), *y = malloc(n + 1);
    bool same = tide_to_buffer(a, x, n) == 0 && tide_to_buffer(b, y, n) == 0 && !memcmp(x, y, n);
    free(x);
    free(y);
    return same;
}

static void test_threads(void)
{
    ref_seed(4);
    int saved = tide_get_num_threads();
    /* float32 sums with many collisions: the order of additions shows in the bits. */
    int64_t xs[2] = {300, 64}, is[2] = {2000, 64};
    double *xv, *iv, *sv;
    tide_tensor *x = make(2, xs, TIDE_FLOAT32, REF_CONTIG, REF_GEN_GENERAL, &xv);
    tide_tensor *index = make_index(2, is, TIDE_INT64, REF_CONTIG, 300, &iv);
    tide_tensor *src = make(2, is, TIDE_FLOAT32, REF_TRANSPOSED, REF_GEN_GENERAL, &sv);
    double *want = malloc(300 * 64 * sizeof *want);
    ref_scatter_add(2, xs, xv, 0, is, iv, is, sv, TIDE_FLOAT32, want);
    tide_tensor *r[2], *g[2], *s[2];
    int64_t sel_k = 3000;
    double *selv;
    tide_tensor *sel = make_index(1, &sel_k, TIDE_INT32, REF_CONTIG, 300, &selv);
    for (int t = 0; t < 2; t++) {
        tide_set_num_threads(t + 1);
        r[t] = tide_scatter_add(x, 0, index, src);
        g[t] = tide_gather(x, 0, index);
        s[t] = tide_index_select(x, 0, sel);
    }
    ref_check_tensor("scatter_add [300, 64] by [2000, 64] on dim 0", r[0], TIDE_FLOAT32, 2, xs,
                     want, 0);
    CHECK(same_bits(r[0], r[1]), "scatter_add: 1 and 2 threads differ");
    CHECK(g[0] && same_bits(g[0], g[1]), "gather: 1 and 2 threads differ");
    CHECK(s[0] && same_bits(s[0], s[1]), "index_select: 1 and 2 threads differ");
    for (int t = 0; t < 2; t++)
        tide_release(r[t]), tide_release(g[t]), tide_release(s[t]);
    /* With several bad indices the error names the first, whatever the thread count. */
    iv[5 * 64 + 3] = 300;
    iv[1500 * 64 + 1] = -4;
    tide_tensor *bad = ref_from_doubles(iv, 2, is, TIDE_INT64);
    for (int t = 0; t < 2; t++) {
        tide_set_num_threads(t + 1);
        CHECK_ERROR(tide_scatter_add(x, 0, bad, src), "scatter_add: index 300 is out of bounds",
                    "dim 0 of size 300", "[5, 3]");
        CHECK_ERROR(tide_gather(x, 0, bad), "gather: index 300 is out of bounds", "[5, 3]");
    }
    tide_set_num_threads(saved);
    tide_release(bad), tide_release(sel), tide_release(src), tide_release(index), tide_release(x);
    free(selv), free(want), free(sv), free(iv), free(xv);
}

/* ---- composites --------------------------------------------------------------------------- */

static void test_embedding(void)
{
    ref_seed(5);
    int64_t ws[2] = {10, 3};
    for (int di = 0; di < 2; di++) {
        tide_dtype dt = di ? TIDE_FLOAT64 : TIDE_FLOAT32;
        double *wv;
        tide_tensor *w = make(2, ws, dt, di ? REF_TRANSPOSED : REF_CONTIG, REF_GEN_GENERAL, &wv);
        struct {
            int nd;
            int64_t shape[3];
        } is[] = {{0, {0}}, {1, {5}}, {2, {2, 3}}, {3, {2, 1, 4}}, {2, {0, 4}}};
        for (size_t k = 0; k < sizeof is / sizeof is[0]; k++) {
            int nd = is[k].nd;
            double *iv;
            tide_tensor *idx = make_index(nd, is[k].shape, k % 2 ? TIDE_INT32 : TIDE_INT64,
                                          k == 2 ? REF_TRANSPOSED : REF_CONTIG, 10, &iv);
            int64_t n = ref_numel(nd, is[k].shape), os[4];
            memcpy(os, is[k].shape, sizeof(int64_t) * (size_t)nd);
            os[nd] = 3;
            double *want = malloc((size_t)(n * 3 + 1) * sizeof *want);
            for (int64_t i = 0; i < n; i++)
                for (int c = 0; c < 3; c++)
                    want[i * 3 + c] = wv[(int64_t)iv[i] * 3 + c];
            tide_tensor *e = tide_embedding(w, idx);
            char desc[120];
            snprintf(desc, sizeof desc, "embedding %s indices %s", ref_dtype_name(dt),
                     ref_shape_str(nd, is[k].shape));
            ref_check_tensor(desc, e, dt, nd + 1, os, want, 0);
            tide_release(e);
            tide_release(idx);
            free(want);
            free(iv);
        }
        tide_release(w);
        free(wv);
    }
}

static void test_one_hot(void)
{
    double iv[6] = {2, 0, 4, 4, 1, 0};
    int64_t s23[2] = {2, 3};
    for (int k = 0; k < 2; k++) {
        tide_tensor *idx = ref_make(iv, 2, s23, k ? TIDE_INT32 : TIDE_INT64,
                                    k ? REF_TRANSPOSED : REF_CONTIG);
        for (int c = 0; c < 2; c++) {
            int64_t classes = c ? 7 : -1, nc = c ? 7 : 5;
            int64_t os[3] = {2, 3, nc};
            double want[42] = {0};
            for (int i = 0; i < 6; i++)
                want[i * nc + (int64_t)iv[i]] = 1;
            tide_tensor *h = tide_one_hot(idx, classes);
            char desc[80];
            snprintf(desc, sizeof desc, "one_hot %s, num_classes %lld", k ? "int32" : "int64",
                     (long long)classes);
            ref_check_tensor(desc, h, TIDE_INT64, 3, os, want, 0);
            tide_release(h);
        }
        tide_release(idx);
    }
    /* 0-dim indices; empty indices with num_classes; num_classes 0 with no indices. */
    tide_tensor *i0 = tide_integer(3);
    tide_tensor *h = tide_one_hot(i0, 5);
    int64_t s5 = 5;
    double w5[5] = {0, 0, 0, 1, 0};
    ref_check_tensor("one_hot of a 0-dim index", h, TIDE_INT64, 1, &s5, w5, 0);
    tide_release(h);
    tide_release(i0);
    int64_t zero = 0, s03[2] = {0, 3}, s00[2] = {0, 0};
    tide_tensor *ie = tide_zeros(1, &zero, TIDE_INT64);
    h = tide_one_hot(ie, 3);
    CHECK(h && ref_same_shape(h, 2, s03) && tide_get_dtype(h) == TIDE_INT64,
          "one_hot of empty indices: %s", tide_last_error());
    tide_release(h);
    h = tide_one_hot(ie, 0);
    CHECK(h && ref_same_shape(h, 2, s00), "one_hot with 0 classes: %s", tide_last_error());
    tide_release(h);
    tide_release(ie);
}

static void test_masked_fill(void)
{
    ref_seed(6);
    int64_t xs[3] = {3, 4, 5};
    struct {
        int nd;
        int64_t shape[3];
    } masks[] = {{3, {3, 4, 5}}, {1, {5}}, {2, {4, 1}}, {3, {3, 1, 5}}, {0, {0}}};
    double values[] = {-1.5, 2.7, -1, 300};
    for (int di = 0; di < NDTYPES; di++) {
        tide_dtype dt = all_dtypes[di];
        for (size_t mi = 0; mi < sizeof masks / sizeof masks[0]; mi++) {
            int xl = (int)(((size_t)di + mi) % REF_NUM_LAYOUTS);
            int ml = (int)(mi % REF_NUM_LAYOUTS);
            double *xv, *mv;
            tide_tensor *x = make(3, xs, dt, xl, REF_GEN_GENERAL, &xv);
            tide_tensor *m = make(masks[mi].nd, masks[mi].shape, TIDE_BOOL, ml, REF_GEN_GENERAL,
                                  &mv);
            double value = values[(size_t)di % 4];
            double want[60];
            int64_t idx[3] = {0};
            for (int f = 0; f < 60; f++) {
                /* The mask broadcasts from the right. */
                int mnd = masks[mi].nd;
                int64_t mi_idx[3];
                for (int d = 0; d < mnd; d++) {
                    int xd = 3 - mnd + d;
                    mi_idx[d] = masks[mi].shape[d] == 1 ? 0 : idx[xd];
                }
                bool on = mv[ref_flat(mnd, masks[mi].shape, mi_idx)] != 0;
                want[f] = on ? ref_quantize(dt, value) : xv[f];
                ref_next_index(3, xs, idx);
            }
            tide_tensor *r = tide_masked_fill(x, m, value);
            char desc[160];
            snprintf(desc, sizeof desc, "masked_fill %s (%s) mask %s (%s) value %g",
                     ref_dtype_name(dt), ref_layout_name(xl),
                     ref_shape_str(masks[mi].nd, masks[mi].shape), ref_layout_name(ml), value);
            ref_check_tensor(desc, r, dt, 3, xs, want, 0);
            tide_release(r);
            tide_release(m);
            tide_release(x);
            free(mv);
            free(xv);
        }
    }
}

/* ---- errors ------------------------------------------------------------------------------- */

static void test_errors(void)
{
    int64_t s25[2] = {2, 5}, s23[2] = {2, 3}, s35[2] = {3, 5}, s5 = 5, s3 = 3;
    tide_tensor *x = tide_zeros(2, s25, TIDE_FLOAT32);
    tide_tensor *xd = tide_zeros(2, s25, TIDE_FLOAT64);
    tide_tensor *fi = tide_zeros(2, s23, TIDE_FLOAT32);
    tide_tensor *i1 = tide_zeros(1, &s3, TIDE_INT64);
    tide_tensor *i35 = tide_zeros(2, s35, TIDE_INT64);
    int64_t i23v[6] = {0, 1, 7, 2, 3, 4};
    tide_tensor *i23 = tide_from_data(i23v, 2, s23, TIDE_INT64);
    int32_t n23v[6] = {0, 1, 2, -1, 3, 4};
    tide_tensor *n23 = tide_from_data(n23v, 2, s23, TIDE_INT32);
    tide_tensor *ok23 = tide_zeros(2, s23, TIDE_INT64);
    tide_tensor *src = tide_ones(2, s23, TIDE_FLOAT32);

    /* gather */
    CHECK_ERROR(tide_gather(NULL, 0, ok23), "gather", "input is NULL");
    CHECK_ERROR(tide_gather(x, 0, NULL), "gather", "index is NULL");
    CHECK_ERROR(tide_gather(x, 1, fi), "gather", "int64 or int32", "float32");
    CHECK_ERROR(tide_gather(x, 2, ok23), "gather", "dim 2", "out of range");
    CHECK_ERROR(tide_gather(x, -3, ok23), "gather", "dim -3");
    CHECK_ERROR(tide_gather(x, 0, i1), "gather", "1 dims", "[3]", "[2, 5]");
    CHECK_ERROR(tide_gather(x, 1, i35), "gather", "[3, 5]", "larger", "dim 0");
    CHECK_ERROR(tide_gather(x, 1, i23), "gather: index 7 is out of bounds for dim 1 of size 5",
                "[0, 2]");
    CHECK_ERROR(tide_gather(x, 1, n23), "gather: index -1 is out of bounds for dim 1 of size 5",
                "[1, 0]");
    CHECK_ERROR(tide_gather(x, 0, i23), "gather: index 7 is out of bounds for dim 0 of size 2");
    int64_t s20[2] = {2, 0};
    tide_tensor *empty = tide_zeros(2, s20, TIDE_FLOAT32);
    CHECK_ERROR(tide_gather(empty, 1, ok23), "gather", "index 0 is out of bounds", "size 0");

    /* scatter_add */
    CHECK_ERROR(tide_scatter_add(NULL, 1, ok23, src), "scatter_add", "input is NULL");
    CHECK_ERROR(tide_scatter_add(x, 1, NULL, src), "scatter_add", "index is NULL");
    CHECK_ERROR(tide_scatter_add(x, 1, ok23, NULL), "scatter_add", "src is NULL");
    CHECK_ERROR(tide_scatter_add(x, 1, fi, src), "scatter_add", "int64 or int32", "float32");
    CHECK_ERROR(tide_scatter_add(x, 5, ok23, src), "scatter_add", "dim 5");
    CHECK_ERROR(tide_scatter_add(xd, 1, ok23, src), "scatter_add", "float32", "float64",
                "same dtype");
    CHECK_ERROR(tide_scatter_add(x, 1, i1, src), "scatter_add", "1 dims", "[2, 5]");
    tide_tensor *src1 = tide_ones(1, &s5, TIDE_FLOAT32);
    CHECK_ERROR(tide_scatter_add(x, 1, ok23, src1), "scatter_add", "src has 1 dims");
    tide_tensor *src22 = tide_ones(2, (int64_t[]){2, 2}, TIDE_FLOAT32);
    CHECK_ERROR(tide_scatter_add(x, 1, ok23, src22), "scatter_add", "larger than src",
                "[2, 3]", "[2, 2]");
    CHECK_ERROR(tide_scatter_add(x, 1, i35, src), "scatter_add", "larger than input");
    CHECK_ERROR(tide_scatter_add(x, 1, i23, src),
                "scatter_add: index 7 is out of bounds for dim 1 of size 5", "[0, 2]");
    CHECK_ERROR(tide_scatter_add(x, 1, n23, src), "scatter_add: index -1 is out of bounds");
    CHECK_ERROR(tide_scatter_add(empty, 1, ok23, src), "scatter_add", "size 0");

    /* index_select */
    CHECK_ERROR(tide_index_select(NULL, 0, i1), "index_select", "input is NULL");
    CHECK_ERROR(tide_index_select(x, 0, NULL), "index_select", "index is NULL");
    CHECK_ERROR(tide_index_select(x, 0, ok23), "index_select", "1-D", "[2, 3]");
    CHECK_ERROR(tide_index_select(x, 0, fi), "index_select", "float32");
    CHECK_ERROR(tide_index_select(x, 2, i1), "index_select", "dim 2");
    int64_t selv[4] = {1, 4, 5, 9};
    tide_tensor *sel = tide_from_data(selv, 1, (int64_t[]){4}, TIDE_INT64);
    CHECK_ERROR(tide_index_select(x, 1, sel),
                "index_select: index 5 is out of bounds for dim 1 of size 5", "position 2");
    int32_t negv[2] = {0, -2};
    tide_tensor *neg = tide_from_data(negv, 1, (int64_t[]){2}, TIDE_INT32);
    CHECK_ERROR(tide_index_select(x, 0, neg), "index_select: index -2 is out of bounds",
                "dim 0 of size 2");
    tide_tensor *x0 = tide_scalar(1, TIDE_FLOAT32);
    CHECK_ERROR(tide_index_select(x0, 0, sel), "index_select", "0-dim", "one index");
    tide_tensor *one = tide_integer(1);
    CHECK_ERROR(tide_index_select(x0, 0, one), "index_select: index 1 is out of bounds",
                "size 1");
    tide_tensor *e0 = tide_zeros(2, (int64_t[]){0, 5}, TIDE_FLOAT32);
    CHECK_ERROR(tide_index_select(e0, 0, i1), "index_select: index 0 is out of bounds", "size 0");

    /* embedding */
    CHECK_ERROR(tide_embedding(NULL, i1), "embedding", "weight is NULL");
    CHECK_ERROR(tide_embedding(x, NULL), "embedding", "indices is NULL");
    CHECK_ERROR(tide_embedding(src1, i1), "embedding", "2-D", "[5]");
    tide_tensor *wi = tide_zeros(2, s25, TIDE_INT64);
    CHECK_ERROR(tide_embedding(wi, i1), "embedding", "floating", "int64");
    CHECK_ERROR(tide_embedding(x, fi), "embedding", "int64 or int32", "float32");
    CHECK_ERROR(tide_embedding(x, i23), "embedding: index_select: index 7 is out of bounds",
                "dim 0 of size 2");
    int64_t s8[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    tide_tensor *i8 = tide_zeros(8, s8, TIDE_INT64);
    CHECK_ERROR(tide_embedding(x, i8), "embedding", "8 dims", "9");

    /* one_hot */
    CHECK_ERROR(tide_one_hot(NULL, 3), "one_hot", "NULL");
    CHECK_ERROR(tide_one_hot(fi, 3), "one_hot", "int64 or int32", "float32");
    CHECK_ERROR(tide_one_hot(n23, 5), "one_hot", "index -1", "negative");
    CHECK_ERROR(tide_one_hot(n23, -1), "one_hot", "index -1", "negative");
    CHECK_ERROR(tide_one_hot(i23, 7), "one_hot", "index 7 is out of bounds for 7 classes");
    CHECK_ERROR(tide_one_hot(i23, 0), "one_hot", "index 7", "0 classes");
    tide_tensor *ie = tide_zeros(1, (int64_t[]){0}, TIDE_INT64);
    CHECK_ERROR(tide_one_hot(ie, -1), "one_hot", "empty", "num_classes");
    CHECK_ERROR(tide_one_hot(i8, 2), "one_hot", "8 dims", "9");
    int64_t hugev = INT64_MAX - 1;
    tide_tensor *huge = tide_from_data(&hugev, 1, (int64_t[]){1}, TIDE_INT64);
    CHECK_ERROR(tide_one_hot(huge, -1), "one_hot", "too large");
    tide_release(huge);
    hugev = INT64_MAX;
    huge = tide_from_data(&hugev, 1, (int64_t[]){1}, TIDE_INT64);
    CHECK_ERROR(tide_one_hot(huge, -1), "one_hot", "too large");

    /* masked_fill */
    tide_tensor *mb = tide_zeros(2, s25, TIDE_BOOL);
    tide_tensor *mi = tide_zeros(2, s25, TIDE_INT64);
    tide_tensor *mbig = tide_zeros(3, (int64_t[]){3, 2, 5}, TIDE_BOOL);
    tide_tensor *mbad = tide_zeros(1, (int64_t[]){4}, TIDE_BOOL);
    CHECK_ERROR(tide_masked_fill(NULL, mb, 1), "masked_fill", "input is NULL");
    CHECK_ERROR(tide_masked_fill(x, NULL, 1), "masked_fill", "mask is NULL");
    CHECK_ERROR(tide_masked_fill(x, mi, 1), "masked_fill", "bool", "int64");
    CHECK_ERROR(tide_masked_fill(x, mbig, 1), "masked_fill", "[3, 2, 5]", "[2, 5]");
    CHECK_ERROR(tide_masked_fill(x, mbad, 1), "masked_fill", "[4]", "does not broadcast");

    tide_release(mbad), tide_release(mbig), tide_release(mi), tide_release(mb);
    tide_release(huge), tide_release(ie), tide_release(i8), tide_release(wi);
    tide_release(e0), tide_release(one), tide_release(x0), tide_release(neg), tide_release(sel);
    tide_release(src22), tide_release(src1), tide_release(empty);
    tide_release(src), tide_release(ok23), tide_release(n23), tide_release(i23);
    tide_release(i35), tide_release(i1), tide_release(fi), tide_release(xd), tide_release(x);
}

int main(void)
{
    test_gather();
    test_scatter_add();
    test_index_select();
    test_threads();
    test_embedding();
    test_one_hot();
    test_masked_fill();
    test_errors();
    return test_summary("test_indexing");
}
