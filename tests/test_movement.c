/*
 * test_movement.c — views (view, reshape, permute, transpose, expand, slice, select, squeeze,
 * unsqueeze: shapes, strides, shared storage and values) and the copying movement ops
 * (contiguous, clone, cat, stack, pad, flip, copy_, fill_), against index arithmetic done here.
 */
#include <stdlib.h>

#include "tide.h"
#include "test_util.h"
#include "test_ref.h"

#define F32 TIDE_FLOAT32
#define F64 TIDE_FLOAT64
#define I32 TIDE_INT32
#define I64 TIDE_INT64
#define U8 TIDE_UINT8
#define BOOL TIDE_BOOL

static void check_strides(const char *desc, const tide_tensor *t, const int64_t *want, int64_t offset)
{
    if (!t)
        return;
    int nd = tide_ndim(t);
    const int64_t *s = tide_strides(t);
    bool ok = tide_offset(t) == offset;
    for (int d = 0; d < nd; d++)
        ok = ok && s[d] == want[d];
    CHECK(ok, "%s: strides %s offset %lld, want %s offset %lld", desc, ref_shape_str(nd, s),
          (long long)tide_offset(t), ref_shape_str(nd, want), (long long)offset);
}

/* 0, 1, 2, ... as a contiguous tensor. */
static tide_tensor *iota(int ndim, const int64_t *shape, tide_dtype dt, double *v)
{
    int64_t n = ref_numel(ndim, shape);
    for (int64_t i = 0; i < n; i++)
        v[i] = (double)i;
    return ref_from_doubles(v, ndim, shape, dt);
}

/* ---- views ---------------------------------------------------------------------------------- */

static void test_view_reshape(void)
{
    double v[24];
    int64_t s234[3] = {2, 3, 4};
    tide_tensor *x = iota(3, s234, F32, v);

    int64_t s46[2] = {4, 6}, st46[2] = {6, 1};
    tide_tensor *y = tide_view(x, 2, s46);
    ref_check_tensor("view [2,3,4] -> [4,6]", y, F32, 2, s46, v, 0);
    check_strides("view [2,3,4] -> [4,6]", y, st46, 0);
    CHECK(tide_shares_storage(x, y), "view shares storage");
    tide_release(y);

    int64_t sm1[2] = {-1, 4}, s64[2] = {6, 4};
    y = tide_view(x, 2, sm1);
    ref_check_tensor("view [2,3,4] -> [-1,4]", y, F32, 2, s64, v, 0);
    tide_release(y);

    int64_t sm2[3] = {2, -1, 2}, s262[3] = {2, 6, 2};
    y = tide_view(x, 3, sm2);
    ref_check_tensor("view [2,3,4] -> [2,-1,2]", y, F32, 3, s262, v, 0);
    tide_release(y);

    int64_t s24[1] = {24}, sflat[1] = {-1};
    y = tide_view(x, 1, sflat);
    ref_check_tensor("view [2,3,4] -> [-1]", y, F32, 1, s24, v, 0);
    tide_release(y);

    /* A one-element tensor views as 0-dim and back. */
    int64_t one[1] = {1};
    tide_tensor *o = tide_full(1, one, 4.5, F64);
    tide_tensor *o0 = tide_view(o, 0, NULL);
    double item = 0;
    CHECK(o0 && tide_ndim(o0) == 0 && tide_item(o0, &item) == 0 && item == 4.5,
          "view [1] -> []: %s", tide_last_error());
    int64_t s111[3] = {1, 1, 1};
    tide_tensor *o3 = tide_view(o0, 3, s111);
    CHECK(o3 && tide_ndim(o3) == 3 && tide_numel(o3) == 1, "view [] -> [1,1,1]: %s", tide_last_error());
    tide_release(o);
    tide_release(o0);
    tide_release(o3);

    /* A 0-size tensor views with -1 when the other sizes are nonzero. */
    int64_t s03[2] = {0, 3}, sm13[2] = {-1, 3}, s0[1] = {0};
    tide_tensor *z = tide_zeros(2, s03, I32);
    tide_tensor *zv = tide_view(z, 1, s0);
    CHECK(zv && tide_ndim(zv) == 1 && tide_numel(zv) == 0, "view [0,3] -> [0]: %s", tide_last_error());
    tide_tensor *zb = tide_view(zv, 2, sm13);
    CHECK(zb && ref_same_shape(zb, 2, s03), "view [0] -> [-1,3]: %s", tide_last_error());
    tide_release(z);
    tide_release(zv);
    tide_release(zb);

    /* reshape of a contiguous tensor is a view; of a transposed one a copy in logical order. */
    y = tide_reshape(x, 2, s46);
    ref_check_tensor("reshape contiguous", y, F32, 2, s46, v, 0);
    CHECK(tide_shares_storage(x, y), "reshape of a contiguous tensor shares storage");
    tide_release(y);

    tide_tensor *t = tide_transpose(x, 0, 2); /* [4,3,2] */
    double tv[24];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            for (int k = 0; k < 2; k++)
                tv[(i * 3 + j) * 2 + k] = v[(k * 3 + j) * 4 + i];
    tide_tensor *r = tide_reshape(t, 1, s24);
    ref_check_tensor("reshape of transposed [4,3,2] -> [24]", r, F32, 1, s24, tv, 0);
    CHECK(r && !tide_shares_storage(t, r), "reshape of a non-viewable tensor copies");
    CHECK(r && tide_is_contiguous(r), "reshape's copy is contiguous");
    tide_release(r);
    CHECK_ERROR(tide_view(t, 1, s24), "view");

    /* A non-contiguous tensor whose merged dims are still evenly strided views (as PyTorch). */
    tide_tensor *sl = tide_slice(x, 2, 0, 2, 1); /* [2,3,2], strides [12,4,1] */
    int64_t s62[2] = {6, 2}, st62[2] = {4, 1};
    double slv[12];
    for (int i = 0; i < 6; i++)
        for (int k = 0; k < 2; k++)
            slv[i * 2 + k] = v[i * 4 + k];
    tide_tensor *slview = tide_view(sl, 2, s62);
    ref_check_tensor("view of x[:, :, 0:2] as [6,2]", slview, F32, 2, s62, slv, 0);
    check_strides("view of x[:, :, 0:2] as [6,2]", slview, st62, 0);
    CHECK(slview && tide_shares_storage(x, slview), "that view shares storage");
    tide_release(slview);
    tide_release(sl);
    /* Reshape of a transposed 2-D tensor into its own shape plus a unit dim stays a view. */
    int64_t s4321[4] = {4, 3, 1, 2};
    tide_tensor *tu = tide_reshape(t, 4, s4321);
    double tu_want[24];
    memcpy(tu_want, tv, sizeof tv);
    ref_check_tensor("reshape [4,3,2] transposed -> [4,3,1,2]", tu, F32, 4, s4321, tu_want, 0);
    CHECK(tu && tide_shares_storage(t, tu), "adding a unit dim needs no copy");
    tide_release(tu);
    tide_release(t);
    tide_release(x);
}

static void test_permute_transpose(void)
{
    double v[24], want[24];
    int64_t s234[3] = {2, 3, 4};
    tide_tensor *x = iota(3, s234, I64, v);

    int perm[3] = {2, 0, 1};
    int64_t s423[3] = {4, 2, 3}, st[3] = {1, 12, 4};
    for (int k = 0; k < 4; k++)
        for (int i = 0; i < 2; i++)
            for (int j = 0; j < 3; j++)
                want[(k * 2 + i) * 3 + j] = v[(i * 3 + j) * 4 + k];
    tide_tensor *p = tide_permute(x, perm);
    ref_check_tensor("permute {2,0,1}", p, I64, 3, s423, want, 0);
    check_strides("permute {2,0,1}", p, st, 0);
    CHECK(tide_shares_storage(x, p), "permute shares storage");
    CHECK(p && !tide_is_contiguous(p), "a permuted tensor is not contiguous");
    int permneg[3] = {-1, 0, 1};
    tide_tensor *pn = tide_permute(x, permneg);
    ref_check_tensor("permute {-1,0,1}", pn, I64, 3, s423, want, 0);
    tide_release(pn);
    /* Permuting back gives the original layout. */
    int inv[3] = {1, 2, 0};
    tide_tensor *back = tide_permute(p, inv);
    int64_t stx[3] = {12, 4, 1};
    ref_check_tensor("permute back", back, I64, 3, s234, v, 0);
    check_strides("permute back", back, stx, 0);
    CHECK(back && tide_is_contiguous(back), "permuted back is contiguous");
    tide_release(back);
    tide_release(p);

    int64_t s432[3] = {4, 3, 2}, st432[3] = {1, 4, 12};
    for (int k = 0; k < 4; k++)
        for (int j = 0; j < 3; j++)
            for (int i = 0; i < 2; i++)
                want[(k * 3 + j) * 2 + i] = v[(i * 3 + j) * 4 + k];
    tide_tensor *t = tide_transpose(x, 0, -1);
    ref_check_tensor("transpose(0, -1)", t, I64, 3, s432, want, 0);
    check_strides("transpose(0, -1)", t, st432, 0);
    CHECK(tide_shares_storage(x, t), "transpose shares storage");
    tide_release(t);
    t = tide_transpose(x, 1, 1);
    ref_check_tensor("transpose(1, 1)", t, I64, 3, s234, v, 0);
    tide_release(t);
    tide_release(x);
}

static void test_expand(void)
{
    double v[3] = {1, 2, 3}, want[24];
    int64_t s31[2] = {3, 1};
    tide_tensor *x = ref_from_doubles(v, 2, s31, F32);
    int64_t s234[3] = {2, 3, 4}, st[3] = {0, 1, 0};
    for (int i = 0; i < 24; i++)
        want[i] = v[(i / 4) % 3];
    tide_tensor *e = tide_expand(x, 3, s234);
    ref_check_tensor("expand [3,1] -> [2,3,4]", e, F32, 3, s234, want, 0);
    check_strides("expand [3,1] -> [2,3,4]", e, st, 0);
    CHECK(tide_shares_storage(x, e), "expand shares storage");
    tide_release(e);

    int64_t skeep[2] = {-1, 5}, s35[2] = {3, 5};
    for (int i = 0; i < 15; i++)
        want[i] = v[i / 5];
    e = tide_expand(x, 2, skeep);
    ref_check_tensor("expand [3,1] -> [-1,5]", e, F32, 2, s35, want, 0);
    /* An expanded tensor made contiguous is a real copy. */
    tide_tensor *c = tide_contiguous(e);
    ref_check_tensor("contiguous(expanded)", c, F32, 2, s35, want, 0);
    CHECK(c && !tide_shares_storage(c, e) && tide_is_contiguous(c), "contiguous of expanded copies");
    tide_release(c);
    tide_release(e);

    /* A 0-dim tensor expands to anything. */
    tide_tensor *z = tide_scalar(7, I32);
    int64_t s23[2] = {2, 3}, st00[2] = {0, 0};
    double sevens[6] = {7, 7, 7, 7, 7, 7};
    e = tide_expand(z, 2, s23);
    ref_check_tensor("expand 0-dim -> [2,3]", e, I32, 2, s23, sevens, 0);
    check_strides("expand 0-dim -> [2,3]", e, st00, 0);
    tide_release(e);
    tide_release(z);
    tide_release(x);
}

static void test_slice_select(void)
{
    double v[60], want[60];
    int64_t s10[1] = {10};
    tide_tensor *x = iota(1, s10, I32, v);
    struct {
        int64_t start, end, step;
        int64_t n;
        double vals[10];
    } cases[] = {
        {2, 8, 3, 2, {2, 5}},
        {-3, 100, 1, 3, {7, 8, 9}},
        {-100, 3, 1, 3, {0, 1, 2}},
        {5, 2, 1, 0, {0}},
        {0, INT64_MAX, 2, 5, {0, 2, 4, 6, 8}},
        {1, -1, 4, 2, {1, 5}},
        {INT64_MIN, INT64_MAX, 1, 10, {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}},
        {12, 20, 1, 0, {0}},
        {-1, 10, 5, 1, {9}},
        {3, 4, 7, 1, {3}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char desc[128];
        snprintf(desc, sizeof desc, "slice([10], 0, %lld, %lld, %lld)", (long long)cases[c].start,
                 (long long)cases[c].end, (long long)cases[c].step);
        tide_tensor *s = tide_slice(x, 0, cases[c].start, cases[c].end, cases[c].step);
        ref_check_tensor(desc, s, I32, 1, &cases[c].n, cases[c].vals, 0);
        if (s && cases[c].n > 0) {
            int64_t st = cases[c].step;
            check_strides(desc, s, &st, (int64_t)cases[c].vals[0]);
            CHECK(tide_shares_storage(x, s), "%s shares storage", desc);
        }
        tide_release(s);
    }
    /* a step far past the size: one element, and no overflow in the stride (UBSan) */
    int64_t one = 1;
    tide_tensor *huge_step = tide_slice(x, 0, 2, 10, INT64_MAX - 1);
    ref_check_tensor("slice([10], 0, 2, 10, 2^63-2)", huge_step, I32, 1, &one, (double[]){2}, 0);
    tide_release(huge_step);
    tide_release(x);

    int64_t s345[3] = {3, 4, 5};
    x = iota(3, s345, F64, v);
    /* x[:, 1:4:2, ::2] via two slices, one with a negative dim */
    tide_tensor *a = tide_slice(x, 1, 1, 4, 2);
    tide_tensor *b = tide_slice(a, -1, 0, 5, 2);
    int64_t s323[3] = {3, 2, 3}, st[3] = {20, 10, 2};
    int k = 0;
    for (int i = 0; i < 3; i++)
        for (int j = 1; j < 4; j += 2)
            for (int l = 0; l < 5; l += 2)
                want[k++] = v[(i * 4 + j) * 5 + l];
    ref_check_tensor("x[:, 1:4:2, ::2]", b, F64, 3, s323, want, 0);
    check_strides("x[:, 1:4:2, ::2]", b, st, 5);
    CHECK(tide_shares_storage(x, b), "slices share storage");
    /* select on the sliced view: element [.., 1, ..] of dim 1, negative index */
    tide_tensor *sel = tide_select(b, 1, -1);
    int64_t s33[2] = {3, 3}, st33[2] = {20, 2};
    k = 0;
    for (int i = 0; i < 3; i++)
        for (int l = 0; l < 5; l += 2)
            want[k++] = v[(i * 4 + 3) * 5 + l];
    ref_check_tensor("select(x[:, 1:4:2, ::2], 1, -1)", sel, F64, 2, s33, want, 0);
    check_strides("select(x[:, 1:4:2, ::2], 1, -1)", sel, st33, 15);
    tide_release(sel);
    tide_release(a);
    tide_release(b);

    sel = tide_select(x, 0, 2);
    int64_t s45[2] = {4, 5};
    ref_check_tensor("select(x, 0, 2)", sel, F64, 2, s45, v + 40, 0);
    check_strides("select(x, 0, 2)", sel, (int64_t[]){5, 1}, 40);
    tide_tensor *sel2 = tide_select(sel, -1, -5);
    int64_t s4[1] = {4};
    double w4[4] = {40, 45, 50, 55};
    ref_check_tensor("select(select(x, 0, 2), -1, -5)", sel2, F64, 1, s4, w4, 0);
    tide_tensor *sel3 = tide_select(sel2, 0, 3);
    double item = 0;
    CHECK(sel3 && tide_ndim(sel3) == 0 && tide_item(sel3, &item) == 0 && item == 55,
          "select down to 0-dim: %g (%s)", item, tide_last_error());
    CHECK(tide_shares_storage(x, sel3), "a selected element shares storage");
    tide_release(sel3);
    tide_release(sel2);
    tide_release(sel);
    tide_release(x);
}

static void test_squeeze_unsqueeze(void)
{
    double v[6];
    int64_t s2131[4] = {2, 1, 3, 1};
    tide_tensor *x = iota(4, s2131, U8, v);
    struct {
        const char *desc;
        tide_tensor *r;
        int ndim;
        int64_t shape[5];
    } cases[] = {
        {"squeeze(1)", tide_squeeze(x, 1), 3, {2, 3, 1}},
        {"squeeze(-1)", tide_squeeze(x, -1), 3, {2, 1, 3}},
        {"squeeze(0) of size 2 is a no-op", tide_squeeze(x, 0), 4, {2, 1, 3, 1}},
        {"squeeze_all", tide_squeeze_all(x), 2, {2, 3}},
        {"unsqueeze(0)", tide_unsqueeze(x, 0), 5, {1, 2, 1, 3, 1}},
        {"unsqueeze(4)", tide_unsqueeze(x, 4), 5, {2, 1, 3, 1, 1}},
        {"unsqueeze(-1)", tide_unsqueeze(x, -1), 5, {2, 1, 3, 1, 1}},
        {"unsqueeze(-5)", tide_unsqueeze(x, -5), 5, {1, 2, 1, 3, 1}},
        {"unsqueeze(2)", tide_unsqueeze(x, 2), 5, {2, 1, 1, 3, 1}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        ref_check_tensor(cases[c].desc, cases[c].r, U8, cases[c].ndim, cases[c].shape, v, 0);
        CHECK(tide_shares_storage(x, cases[c].r), "%s shares storage", cases[c].desc);
        tide_release(cases[c].r);
    }
    tide_release(x);

    int64_t s11[2] = {1, 1};
    tide_tensor *o = tide_full(2, s11, 3, F32);
    tide_tensor *o0 = tide_squeeze_all(o);
    double item = 0;
    CHECK(o0 && tide_ndim(o0) == 0 && tide_item(o0, &item) == 0 && item == 3,
          "squeeze_all [1,1] -> 0-dim: %s", tide_last_error());
    tide_tensor *o1 = tide_unsqueeze(o0, 0);
    CHECK(o1 && tide_ndim(o1) == 1 && tide_size(o1, 0) == 1, "unsqueeze 0-dim -> [1]: %s",
          tide_last_error());
    tide_tensor *o2 = tide_unsqueeze(o0, -1);
    CHECK(o2 && tide_ndim(o2) == 1 && tide_size(o2, 0) == 1, "unsqueeze(0-dim, -1) -> [1]: %s",
          tide_last_error());
    tide_release(o);
    tide_release(o0);
    tide_release(o1);
    tide_release(o2);

    /* Squeezing a strided view keeps the remaining strides. */
    double w[24];
    int64_t s2_3_4[3] = {2, 3, 4};
    tide_tensor *y = iota(3, s2_3_4, F32, w);
    tide_tensor *sl = tide_slice(y, 1, 1, 2, 1); /* [2,1,4] strides [12,4,1], offset 4 */
    tide_tensor *sq = tide_squeeze(sl, 1);
    int64_t s24[2] = {2, 4};
    double want[8] = {4, 5, 6, 7, 16, 17, 18, 19};
    ref_check_tensor("squeeze(y[:, 1:2, :], 1)", sq, F32, 2, s24, want, 0);
    check_strides("squeeze(y[:, 1:2, :], 1)", sq, (int64_t[]){12, 1}, 4);
    tide_release(sq);
    tide_release(sl);
    tide_release(y);
}

/* ---- copies --------------------------------------------------------------------------------- */

static void test_contiguous_clone(void)
{
    double v[12];
    int64_t s34[2] = {3, 4};
    tide_tensor *x = iota(2, s34, F32, v);
    tide_tensor *c = tide_contiguous(x);
    CHECK(c == x, "contiguous of a contiguous tensor is the tensor itself");
    CHECK(tide_shares_storage(c, x), "contiguous of a contiguous tensor shares storage");
    tide_release(c);

    tide_tensor *t = tide_transpose(x, 0, 1);
    c = tide_contiguous(t);
    int64_t s43[2] = {4, 3}, st43[2] = {3, 1};
    double want[12];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            want[i * 3 + j] = v[j * 4 + i];
    ref_check_tensor("contiguous(transposed)", c, F32, 2, s43, want, 0);
    check_strides("contiguous(transposed)", c, st43, 0);
    CHECK(c && !tide_shares_storage(c, x) && tide_is_contiguous(c), "contiguous(transposed) copies");
    tide_release(c);

    /* A sliced view with offset: contiguous copies only the visible elements. */
    tide_tensor *sl = tide_slice(x, 0, 1, 3, 1); /* rows 1..2: contiguous, offset 4 */
    CHECK(sl && tide_is_contiguous(sl), "a slice of whole rows is contiguous");
    c = tide_contiguous(sl);
    CHECK(c == sl, "contiguous of a contiguous slice is the slice itself");
    tide_release(c);
    tide_release(sl);

    tide_tensor *cl = tide_clone(x);
    ref_check_tensor("clone", cl, F32, 2, s34, v, 0);
    CHECK(cl && !tide_shares_storage(cl, x), "clone does not share storage");
    CHECK(cl && tide_fill_(cl, 9) == 0, "fill_ of a clone");
    double *g = ref_read(x);
    CHECK(g && g[0] == 0 && g[11] == 11, "writing the clone leaves x alone");
    free(g);
    tide_release(cl);
    cl = tide_clone(t);
    ref_check_tensor("clone(transposed)", cl, F32, 2, s43, want, 0);
    CHECK(cl && tide_is_contiguous(cl) && !tide_shares_storage(cl, t), "clone(transposed) is fresh");
    tide_release(cl);
    tide_tensor *z = tide_scalar(2, BOOL);
    cl = tide_clone(z);
    double one = 1;
    ref_check_tensor("clone(0-dim bool)", cl, BOOL, 0, NULL, &one, 0);
    tide_release(cl);
    tide_release(z);
    tide_release(t);
    tide_release(x);
}

/* cat of n inputs (values vs, each of shapes[i]) along dim, reference by index arithmetic. */
static void ref_cat(int ndim, int64_t shapes[][TIDE_MAX_DIMS], double *const *vs, int n, int dim,
                    int64_t *oshape, double *out)
{
    memcpy(oshape, shapes[0], (size_t)ndim * sizeof *oshape);
    oshape[dim] = 0;
    for (int i = 0; i < n; i++)
        oshape[dim] += shapes[i][dim];
    int64_t idx[TIDE_MAX_DIMS] = {0}, total = ref_numel(ndim, oshape);
    for (int64_t f = 0; f < total; f++) {
        int64_t pos = idx[dim];
        int which = 0;
        while (pos >= shapes[which][dim]) {
            pos -= shapes[which][dim];
            which++;
        }
        int64_t iidx[TIDE_MAX_DIMS];
        memcpy(iidx, idx, sizeof iidx);
        iidx[dim] = pos;
        out[f] = vs[which][ref_flat(ndim, shapes[which], iidx)];
        ref_next_index(ndim, oshape, idx);
    }
}

static void test_cat_stack(void)
{
    static const tide_dtype dtsets[][3] = {
        {F32, F32, F32}, {I32, F32, I32}, {U8, I32, U8}, {BOOL, BOOL, BOOL},
        {BOOL, U8, I64}, {F64, F32, I32}, {I64, I64, I64},
    };
    static const tide_dtype dtwant[] = {F32, F32, I32, BOOL, I64, F64, I64};
    int64_t base[3] = {2, 3, 4};
    uint64_t seed = 11;
    for (int dim = -3; dim < 3; dim++)
        for (size_t ds = 0; ds < sizeof dtsets / sizeof dtsets[0]; ds++)
            for (int l = 0; l < REF_NUM_LAYOUTS; l++) {
                int d = dim < 0 ? dim + 3 : dim;
                int64_t shapes[3][TIDE_MAX_DIMS];
                double vals[3][48], *vp[3] = {vals[0], vals[1], vals[2]};
                tide_tensor *xs[3];
                static const int64_t catsizes[3] = {1, 3, 0};
                char desc[200];
                ref_seed(seed++);
                for (int i = 0; i < 3; i++) {
                    memcpy(shapes[i], base, sizeof base);
                    shapes[i][d] = catsizes[(i + l) % 3];
                    ref_fill(vals[i], ref_numel(3, shapes[i]), dtsets[ds][i], REF_GEN_GENERAL);
                    ref_prepare((l + i) % REF_NUM_LAYOUTS, 3, shapes[i], vals[i]);
                    xs[i] = ref_make(vals[i], 3, shapes[i], dtsets[ds][i], (l + i) % REF_NUM_LAYOUTS);
                }
                int64_t oshape[3];
                double want[144];
                ref_cat(3, shapes, vp, 3, d, oshape, want);
                snprintf(desc, sizeof desc, "cat(%s %s, %s %s, %s %s; dim %d)",
                         ref_dtype_name(dtsets[ds][0]), ref_shape_str(3, shapes[0]),
                         ref_dtype_name(dtsets[ds][1]), ref_shape_str(3, shapes[1]),
                         ref_dtype_name(dtsets[ds][2]), ref_shape_str(3, shapes[2]), dim);
                tide_tensor *r = tide_cat(xs, 3, dim);
                ref_check_tensor(desc, r, dtwant[ds], 3, oshape, want, 0);
                tide_release(r);
                for (int i = 0; i < 3; i++)
                    tide_release(xs[i]);
            }

    /* stack: every position of the new dim, inputs in different layouts and dtypes. */
    int64_t s23[2] = {2, 3};
    for (int dim = -3; dim < 3; dim++)
        for (int l = 0; l < REF_NUM_LAYOUTS; l++) {
            int d = dim < 0 ? dim + 3 : dim;
            double vals[3][6];
            tide_tensor *xs[3];
            tide_dtype dts[3] = {I32, l % 2 ? F64 : I64, U8};
            tide_dtype want_dt = l % 2 ? F64 : I64;
            ref_seed(seed++);
            for (int i = 0; i < 3; i++) {
                ref_fill(vals[i], 6, dts[i], REF_GEN_GENERAL);
                ref_prepare((l + i) % REF_NUM_LAYOUTS, 2, s23, vals[i]);
                xs[i] = ref_make(vals[i], 2, s23, dts[i], (l + i) % REF_NUM_LAYOUTS);
            }
            int64_t oshape[3];
            for (int k = 0, j = 0; k < 3; k++)
                oshape[k] = k == d ? 3 : s23[j++];
            double want[18];
            int64_t idx[3] = {0, 0, 0};
            for (int f = 0; f < 18; f++) {
                int64_t inner[2];
                for (int k = 0, j = 0; k < 3; k++)
                    if (k != d)
                        inner[j++] = idx[k];
                want[f] = vals[idx[d]][inner[0] * 3 + inner[1]];
                ref_next_index(3, oshape, idx);
            }
            char desc[128];
            snprintf(desc, sizeof desc, "stack(3 x [2,3] %s, dim %d)", ref_layout_name(l), dim);
            tide_tensor *r = tide_stack(xs, 3, dim);
            ref_check_tensor(desc, r, want_dt, 3, oshape, want, 0);
            tide_release(r);
            for (int i = 0; i < 3; i++)
                tide_release(xs[i]);
        }

    /* One input: cat copies it, stack adds a dim. */
    double v[6];
    tide_tensor *x = iota(2, s23, F32, v);
    tide_tensor *c = tide_cat(&x, 1, 1);
    ref_check_tensor("cat of one", c, F32, 2, s23, v, 0);
    CHECK(c && !tide_shares_storage(c, x), "cat of one tensor is a copy");
    tide_release(c);
    c = tide_stack(&x, 1, 0);
    int64_t s123[3] = {1, 2, 3};
    ref_check_tensor("stack of one", c, F32, 3, s123, v, 0);
    tide_release(c);
    tide_release(x);
}

static void test_pad(void)
{
    double v[24];
    int64_t s23[2] = {2, 3};
    tide_tensor *x = iota(2, s23, F32, v);

    int64_t p1[2] = {1, 2}, s26[2] = {2, 6};
    double w1[12] = {7.5, 0, 1, 2, 7.5, 7.5, 7.5, 3, 4, 5, 7.5, 7.5};
    tide_tensor *r = tide_pad(x, p1, 2, 7.5);
    ref_check_tensor("pad [2,3] (1,2) with 7.5", r, F32, 2, s26, w1, 0);
    CHECK(r && !tide_shares_storage(r, x), "pad copies");
    tide_release(r);

    int64_t p2[4] = {1, 0, 0, 2}, s44[2] = {4, 4};
    double w2[16] = {-1, 0, 1, 2, -1, 3, 4, 5, -1, -1, -1, -1, -1, -1, -1, -1};
    r = tide_pad(x, p2, 4, -1);
    ref_check_tensor("pad [2,3] (1,0, 0,2) with -1", r, F32, 2, s44, w2, 0);
    tide_release(r);

    int64_t p0[4] = {0, 0, 0, 0};
    r = tide_pad(x, p0, 4, 3);
    ref_check_tensor("pad with zeros everywhere", r, F32, 2, s23, v, 0);
    tide_release(r);

    /* Integer tensor, transposed input, 3-D with one pair. */
    int64_t s234[3] = {2, 3, 4};
    tide_tensor *y = iota(3, s234, I32, v);
    tide_tensor *t = tide_transpose(y, 1, 2); /* [2,4,3] */
    int64_t p3[2] = {2, 1}, s246[3] = {2, 4, 6};
    double w3[48];
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 6; k++)
                w3[(i * 4 + j) * 6 + k] = k >= 2 && k < 5 ? v[(i * 3 + (k - 2)) * 4 + j] : 3;
    r = tide_pad(t, p3, 2, 3);
    ref_check_tensor("pad int32 transposed [2,4,3] (2,1) with 3", r, I32, 3, s246, w3, 0);
    tide_release(r);
    /* All three dims. */
    int64_t p6[6] = {0, 1, 1, 0, 1, 1}, s454[3] = {4, 5, 4};
    double w6[80];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 5; j++)
            for (int k = 0; k < 4; k++) {
                bool in = i >= 1 && i < 3 && j >= 1 && k < 3;
                w6[(i * 5 + j) * 4 + k] = in ? v[((i - 1) * 3 + k) * 4 + (j - 1)] : 0;
            }
    r = tide_pad(t, p6, 6, 0);
    ref_check_tensor("pad int32 transposed [2,4,3] over 3 dims", r, I32, 3, s454, w6, 0);
    tide_release(r);
    tide_release(t);
    tide_release(y);
    tide_release(x);
}

static void test_flip(void)
{
    double v[24], want[24];
    int64_t s234[3] = {2, 3, 4};
    tide_tensor *x = iota(3, s234, F64, v);
    struct {
        int dims[3];
        int n;
        bool flip[3];
    } cases[] = {
        {{0}, 1, {true, false, false}},    {{-1}, 1, {false, false, true}},
        {{0, 2}, 2, {true, false, true}},  {{2, 1, 0}, 3, {true, true, true}},
        {{1, -1}, 2, {false, true, true}},
    };
    tide_tensor *t = tide_permute(x, (int[]){1, 0, 2}); /* [3,2,4] non-contiguous */
    int64_t s324[3] = {3, 2, 4};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
        for (int src = 0; src < 2; src++) {
            const int64_t *sh = src ? s324 : s234;
            int64_t idx[3] = {0, 0, 0};
            for (int f = 0; f < 24; f++) {
                int64_t j[3];
                for (int d = 0; d < 3; d++)
                    j[d] = cases[c].flip[d] ? sh[d] - 1 - idx[d] : idx[d];
                /* logical value of the source at j */
                want[f] = src ? v[(j[1] * 3 + j[0]) * 4 + j[2]] : v[(j[0] * 3 + j[1]) * 4 + j[2]];
                ref_next_index(3, sh, idx);
            }
            char desc[96];
            snprintf(desc, sizeof desc, "flip(%s, case %zu)", src ? "permuted [3,2,4]" : "[2,3,4]", c);
            tide_tensor *r = tide_flip(src ? t : x, cases[c].dims, cases[c].n);
            ref_check_tensor(desc, r, F64, 3, sh, want, 0);
            CHECK(r && !tide_shares_storage(r, x), "%s copies", desc);
            tide_release(r);
        }
    tide_tensor *r = tide_flip(x, NULL, 0);
    ref_check_tensor("flip over no dims", r, F64, 3, s234, v, 0);
    tide_release(r);
    tide_release(t);
    tide_release(x);
}

static void test_copy_fill(void)
{
    int64_t s34[2] = {3, 4};
    tide_tensor *dst = tide_zeros(2, s34, F32);
    /* columns 0 and 2 of dst, written from an int32 [2] broadcast over rows */
    tide_tensor *cols = tide_slice(dst, 1, 0, 4, 2);
    int32_t src_data[2] = {5, -6};
    int64_t two = 2;
    tide_tensor *src = tide_from_data(src_data, 1, &two, I32);
    CHECK(tide_copy_(cols, src) == 0, "copy_ into a strided view: %s", tide_last_error());
    double w1[12] = {5, 0, -6, 0, 5, 0, -6, 0, 5, 0, -6, 0};
    ref_check_tensor("dst after copy_ of [5,-6] into dst[:, ::2]", dst, F32, 2, s34, w1, 0);
    tide_release(src);
    tide_release(cols);

    /* into a transposed view, from a float64 with conversion to float32 */
    tide_tensor *dt = tide_transpose(dst, 0, 1); /* [4,3] */
    double sv[12];
    for (int i = 0; i < 12; i++)
        sv[i] = 0.1 * i;
    int64_t s43[2] = {4, 3};
    tide_tensor *src64 = ref_from_doubles(sv, 2, s43, F64);
    CHECK(tide_copy_(dt, src64) == 0, "copy_ into a transposed view: %s", tide_last_error());
    double w2[12];
    for (int i = 0; i < 3; i++)
        for (int j = 0; j < 4; j++)
            w2[i * 4 + j] = (double)(float)sv[j * 3 + i];
    ref_check_tensor("dst after copy_ into its transpose", dst, F32, 2, s34, w2, 0);
    tide_release(src64);
    tide_release(dt);

    /* into an int32 view from float values: truncation toward zero */
    tide_tensor *idst = tide_full(2, s34, -1, I32);
    tide_tensor *row = tide_select(idst, 0, 1);
    double fv[4] = {2.7, -2.7, 0.5, 100.99};
    int64_t four = 4;
    tide_tensor *fsrc = ref_from_doubles(fv, 1, &four, F32);
    CHECK(tide_copy_(row, fsrc) == 0, "copy_ float32 -> int32 row: %s", tide_last_error());
    double w3[12] = {-1, -1, -1, -1, 2, -2, 0, 100, -1, -1, -1, -1};
    ref_check_tensor("int32 dst after copy_ of floats into row 1", idst, I32, 2, s34, w3, 0);
    /* a 0-dim source fills the view */
    tide_tensor *z = tide_scalar(9, F64);
    tide_tensor *col = tide_select(idst, 1, -1);
    CHECK(tide_copy_(col, z) == 0, "copy_ 0-dim into a column: %s", tide_last_error());
    w3[3] = w3[7] = w3[11] = 9;
    ref_check_tensor("int32 dst after copy_ of 9 into column -1", idst, I32, 2, s34, w3, 0);
    tide_release(z);
    tide_release(col);
    tide_release(fsrc);
    tide_release(row);

    /* fill_ of views */
    tide_tensor *r0 = tide_select(idst, 0, 0);
    CHECK(tide_fill_(r0, 3.9) == 0, "fill_ a row view: %s", tide_last_error());
    w3[0] = w3[1] = w3[2] = w3[3] = 3;
    ref_check_tensor("int32 dst after fill_(row 0, 3.9)", idst, I32, 2, s34, w3, 0);
    tide_release(r0);
    tide_tensor *rows = tide_slice(dst, 0, 1, 3, 1);
    tide_tensor *block = tide_slice(rows, 1, 1, 4, 2); /* dst[1:3, 1::2] */
    CHECK(tide_fill_(block, -0.5) == 0, "fill_ a 2-D strided block: %s", tide_last_error());
    for (int i = 1; i < 3; i++)
        for (int j = 1; j < 4; j += 2)
            w2[i * 4 + j] = -0.5;
    ref_check_tensor("dst after fill_(dst[1:3, 1::2], -0.5)", dst, F32, 2, s34, w2, 0);
    tide_release(block);
    tide_release(rows);

    tide_tensor *u = tide_zeros(1, &four, U8);
    tide_tensor *ue = tide_slice(u, 0, 1, 4, 2);
    CHECK(tide_fill_(ue, 255) == 0, "fill_ uint8 view: %s", tide_last_error());
    double w4[4] = {0, 255, 0, 255};
    ref_check_tensor("uint8 after fill_ of [1::2]", u, U8, 1, &four, w4, 0);
    tide_release(ue);
    tide_release(u);

    tide_tensor *b = tide_zeros(1, &four, BOOL);
    CHECK(tide_fill_(b, 0.25) == 0, "fill_ bool: %s", tide_last_error());
    double w5[4] = {1, 1, 1, 1};
    ref_check_tensor("bool after fill_(0.25)", b, BOOL, 1, &four, w5, 0);
    tide_release(b);

    /* copy_ between two disjoint views of one storage. */
    double v8[8] = {0, 1, 2, 3, 4, 5, 6, 7};
    int64_t eight = 8;
    tide_tensor *a = ref_from_doubles(v8, 1, &eight, F64);
    tide_tensor *lo = tide_slice(a, 0, 0, 4, 1), *hi = tide_slice(a, 0, 4, 8, 1);
    CHECK(tide_copy_(lo, hi) == 0, "copy_ hi -> lo: %s", tide_last_error());
    double w6[8] = {4, 5, 6, 7, 4, 5, 6, 7};
    ref_check_tensor("after copy_(a[0:4], a[4:8])", a, F64, 1, &eight, w6, 0);
    tide_release(lo);
    tide_release(hi);
    tide_release(a);

    tide_release(idst);
    tide_release(dst);
}

int main(void)
{
    test_view_reshape();
    test_permute_transpose();
    test_expand();
    test_slice_select();
    test_squeeze_unsqueeze();
    test_contiguous_clone();
    test_cat_stack();
    test_pad();
    test_flip();
    test_copy_fill();
    return test_summary("test_movement");
}
