/*
 * linalg.c — linear-algebra composites: addmm, addmv, baddbmm, addbmm, outer, cross, kron,
 * tensordot, cdist and block_diag, each written with public ops (matmul, views, elementwise,
 * reductions, pad, cat), so autograd, the jit and every device need nothing new. The checks
 * name the op, the shapes and the dtypes; the inner ops' errors come prefixed with the op
 * (nn_scope). addbmm is one product: the batch folded into the contracted dim.
 */
#include <math.h>
#include <stdio.h>

#include "nn_common.h"

static int check_ndim(const char *op, const char *arg, const tide_tensor *t, int ndim)
{
    if (td_check_tensor(op, arg, t) < 0)
        return -1;
    if (t->ndim != ndim) {
        char s[160];
        return td_error("%s: %s must be %d-D, got %s", op, arg, ndim, nn_describe(s, sizeof s, t));
    }
    return 0;
}

/* beta * input + alpha * prod with input broadcast to prod's shape (never the other way, as
 * PyTorch); beta 0 leaves input out, so its NaNs do not spread. */
static tide_tensor *add_scaled(nn_scope *s, const char *op, const tide_tensor *input,
                               tide_tensor *prod, double beta, double alpha)
{
    if (!prod || td_check_tensor(op, "input", input) < 0)
        return nn_keep(s, NULL);
    tide_tensor *in = nn_keep(s, tide_expand(input, prod->ndim, prod->shape));
    if (alpha != 1)
        prod = nn_keep(s, tide_mul_scalar(prod, alpha));
    if (beta == 0)
        return in ? prod : NULL;
    if (beta != 1)
        in = nn_keep(s, tide_mul_scalar(in, beta));
    return nn_keep(s, tide_add(in, prod));
}

static tide_tensor *addmm_like(const char *op, const tide_tensor *input, const tide_tensor *a,
                               const tide_tensor *b, int nda, int ndb, double beta, double alpha)
{
    if (check_ndim(op, nda == 3 ? "batch1" : nda == 2 ? "mat1" : "mat", a, nda) < 0 ||
        check_ndim(op, ndb == 3 ? "batch2" : ndb == 2 ? "mat2" : "vec", b, ndb) < 0)
        return NULL;
    nn_scope s = {0};
    tide_tensor *prod = nn_keep(&s, tide_matmul(a, b));
    return nn_finish(&s, op, add_scaled(&s, op, input, prod, beta, alpha));
}

tide_tensor *tide_addmm(const tide_tensor *input, const tide_tensor *m1, const tide_tensor *m2,
                        double beta, double alpha)
{
    TD_IN_OP("addmm", addmm_like("addmm", input, m1, m2, 2, 2, beta, alpha));
}

tide_tensor *tide_addmv(const tide_tensor *input, const tide_tensor *mat, const tide_tensor *vec,
                        double beta, double alpha)
{
    TD_IN_OP("addmv", addmm_like("addmv", input, mat, vec, 2, 1, beta, alpha));
}

tide_tensor *tide_baddbmm(const tide_tensor *input, const tide_tensor *b1, const tide_tensor *b2,
                          double beta, double alpha)
{
    TD_IN_OP("baddbmm", addmm_like("baddbmm", input, b1, b2, 3, 3, beta, alpha));
}

static tide_tensor *addbmm_body(const tide_tensor *input, const tide_tensor *b1,
                                const tide_tensor *b2, double beta, double alpha)
{
    const char *op = "addbmm";
    if (check_ndim(op, "batch1", b1, 3) < 0 || check_ndim(op, "batch2", b2, 3) < 0)
        return NULL;
    if (b1->shape[0] != b2->shape[0] || b1->shape[2] != b2->shape[1]) {
        char s1[160], s2[160];
        td_error("%s: batch1 %s and batch2 %s need equal batches and batch1's columns equal to "
                 "batch2's rows", op, nn_describe(s1, sizeof s1, b1),
                 nn_describe(s2, sizeof s2, b2));
        return NULL;
    }
    nn_scope s = {0};
    int64_t B = b1->shape[0], n = b1->shape[1], m = b1->shape[2], p = b2->shape[2];
    tide_tensor *a = nn_keep(&s, tide_permute(b1, (const int[]){1, 0, 2}));
    a = nn_keep(&s, tide_reshape(a, 2, (const int64_t[]){n, B * m}));
    tide_tensor *b = nn_keep(&s, tide_reshape(b2, 2, (const int64_t[]){B * m, p}));
    tide_tensor *prod = nn_keep(&s, tide_matmul(a, b));
    return nn_finish(&s, op, add_scaled(&s, op, input, prod, beta, alpha));
}

tide_tensor *tide_addbmm(const tide_tensor *input, const tide_tensor *b1, const tide_tensor *b2,
                         double beta, double alpha)
{
    TD_IN_OP("addbmm", addbmm_body(input, b1, b2, beta, alpha));
}

static tide_tensor *outer_body(const tide_tensor *a, const tide_tensor *b)
{
    if (check_ndim("outer", "input", a, 1) < 0 || check_ndim("outer", "vec2", b, 1) < 0)
        return NULL;
    nn_scope s = {0};
    tide_tensor *col = nn_keep(&s, tide_unsqueeze(a, 1));
    return nn_finish(&s, "outer", nn_keep(&s, tide_mul(col, b)));
}

tide_tensor *tide_outer(const tide_tensor *a, const tide_tensor *b)
{
    TD_IN_OP("outer", outer_body(a, b));
}

/* c_i = a_{i+1} b_{i+2} - a_{i+2} b_{i+1} (indices mod 3), the rotations as index_select. */
static tide_tensor *cross_body(const tide_tensor *a, const tide_tensor *b, int dim)
{
    const char *op = "cross";
    if (td_check_tensor(op, "input", a) < 0 || td_check_tensor(op, "other", b) < 0)
        return NULL;
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    int d = td_normalize_dim(op, dim, nd);
    if (d < 0)
        return NULL;
    int da = a->ndim - nd + d, db = b->ndim - nd + d;
    if (da < 0 || db < 0 || a->shape[da] != 3 || b->shape[db] != 3) {
        char s1[160], s2[160];
        td_error("%s: dim %d must have size 3 in both inputs, got %s and %s", op, d,
                 nn_describe(s1, sizeof s1, a), nn_describe(s2, sizeof s2, b));
        return NULL;
    }
    nn_scope s = {0};
    int64_t r1[3] = {1, 2, 0}, r2[3] = {2, 0, 1};
    tide_tensor *i1 = nn_keep(&s, td_from_data_on(a->device, r1, 1, (const int64_t[]){3},
                                                  TIDE_INT64));
    tide_tensor *i2 = nn_keep(&s, td_from_data_on(a->device, r2, 1, (const int64_t[]){3},
                                                  TIDE_INT64));
    tide_tensor *a1 = nn_keep(&s, tide_index_select(a, da, i1));
    tide_tensor *a2 = nn_keep(&s, tide_index_select(a, da, i2));
    tide_tensor *b1 = nn_keep(&s, tide_index_select(b, db, i1));
    tide_tensor *b2 = nn_keep(&s, tide_index_select(b, db, i2));
    tide_tensor *p = nn_keep(&s, tide_mul(a1, b2)), *q = nn_keep(&s, tide_mul(a2, b1));
    return nn_finish(&s, op, nn_keep(&s, tide_sub(p, q)));
}

tide_tensor *tide_cross(const tide_tensor *a, const tide_tensor *b, int dim)
{
    TD_IN_OP("cross", cross_body(a, b, dim));
}

/* a as [a0, 1, a1, 1, ...] times b as [1, b0, 1, b1, ...], merged pairwise. */
static tide_tensor *kron_body(const tide_tensor *a, const tide_tensor *b)
{
    if (td_check_tensor("kron", "input", a) < 0 || td_check_tensor("kron", "other", b) < 0)
        return NULL;
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    if (2 * nd > TIDE_MAX_DIMS) {
        char s1[160], s2[160];
        td_error("kron: inputs of up to %d dims are supported, got %s and %s", TIDE_MAX_DIMS / 2,
                 nn_describe(s1, sizeof s1, a), nn_describe(s2, sizeof s2, b));
        return NULL;
    }
    int64_t sa[TIDE_MAX_DIMS], sb[TIDE_MAX_DIMS], so[TIDE_MAX_DIMS];
    for (int d = 0; d < nd; d++) {
        int ka = d - (nd - a->ndim), kb = d - (nd - b->ndim);
        int64_t x = ka < 0 ? 1 : a->shape[ka], y = kb < 0 ? 1 : b->shape[kb];
        sa[2 * d] = x, sa[2 * d + 1] = 1;
        sb[2 * d] = 1, sb[2 * d + 1] = y;
        if (__builtin_mul_overflow(x, y, &so[d]))
            return td_error("kron: the result's dim %d (%lld x %lld) is too large", d,
                            (long long)x, (long long)y), NULL;
    }
    nn_scope s = {0};
    tide_tensor *va = nn_keep(&s, tide_reshape(a, 2 * nd, sa));
    tide_tensor *vb = nn_keep(&s, tide_reshape(b, 2 * nd, sb));
    tide_tensor *p = nn_keep(&s, tide_mul(va, vb));
    return nn_finish(&s, "kron", nn_keep(&s, tide_reshape(p, nd, so)));
}

tide_tensor *tide_kron(const tide_tensor *a, const tide_tensor *b)
{
    TD_IN_OP("kron", kron_body(a, b));
}

/* x permuted to its kept dims then its contracted ones (or the reverse), as a matrix. */
static tide_tensor *as_matrix(nn_scope *s, const tide_tensor *x, unsigned contracted, int n,
                              const int *cdims, bool contracted_first, int64_t *free_shape,
                              int *nfree)
{
    int perm[TIDE_MAX_DIMS] = {0}, k = 0;
    int64_t f = 1, c = 1;
    if (contracted_first)
        for (int i = 0; i < n; i++)
            perm[k++] = cdims[i];
    *nfree = 0;
    for (int d = 0; d < x->ndim; d++)
        if (!(contracted & (1u << d))) {
            perm[k++] = d;
            free_shape[(*nfree)++] = x->shape[d];
            f *= x->shape[d];
        }
    if (!contracted_first)
        for (int i = 0; i < n; i++)
            perm[k++] = cdims[i];
    for (int i = 0; i < n; i++)
        c *= x->shape[cdims[i]];
    tide_tensor *p = nn_keep(s, tide_permute(x, perm));
    int64_t shape[2] = {contracted_first ? c : f, contracted_first ? f : c};
    return nn_keep(s, tide_reshape(p, 2, shape));
}

static tide_tensor *tensordot_body(const tide_tensor *a, const tide_tensor *b, int n,
                                   const int *dims_a, const int *dims_b)
{
    const char *op = "tensordot";
    if (td_check_tensor(op, "a", a) < 0 || td_check_tensor(op, "b", b) < 0)
        return NULL;
    if (n < 0 || n > a->ndim || n > b->ndim || (n > 0 && (!dims_a || !dims_b)))
        return td_error("%s: %d contracted dims for inputs of %d and %d dims", op, n, a->ndim,
                        b->ndim), NULL;
    int ca[TIDE_MAX_DIMS], cb[TIDE_MAX_DIMS];
    unsigned ma = 0, mb = 0;
    char s1[160], s2[160];
    for (int i = 0; i < n; i++) {
        ca[i] = td_normalize_dim(op, dims_a[i], a->ndim);
        cb[i] = ca[i] < 0 ? -1 : td_normalize_dim(op, dims_b[i], b->ndim);
        if (cb[i] < 0)
            return NULL;
        if ((ma & (1u << ca[i])) || (mb & (1u << cb[i])))
            return td_error("%s: a dim is contracted twice", op), NULL;
        ma |= 1u << ca[i], mb |= 1u << cb[i];
        if (a->shape[ca[i]] != b->shape[cb[i]])
            return td_error("%s: dim %d of a %s and dim %d of b %s differ in size", op, ca[i],
                            nn_describe(s1, sizeof s1, a), cb[i],
                            nn_describe(s2, sizeof s2, b)), NULL;
    }
    if (a->ndim + b->ndim - 2 * n > TIDE_MAX_DIMS)
        return td_error("%s: the result would have more than %d dims", op, TIDE_MAX_DIMS), NULL;
    nn_scope s = {0};
    int64_t shape[2 * TIDE_MAX_DIMS];
    int nfa, nfb;
    tide_tensor *ma2 = as_matrix(&s, a, ma, n, ca, false, shape, &nfa);
    tide_tensor *mb2 = as_matrix(&s, b, mb, n, cb, true, shape + nfa, &nfb);
    tide_tensor *p = nn_keep(&s, tide_matmul(ma2, mb2));
    return nn_finish(&s, op, nn_keep(&s, tide_reshape(p, nfa + nfb, shape)));
}

tide_tensor *tide_tensordot(const tide_tensor *a, const tide_tensor *b, int n, const int *dims_a,
                            const int *dims_b)
{
    TD_IN_OP("tensordot", tensordot_body(a, b, n, dims_a, dims_b));
}

/* Distances from the differences [.., P, R, M]. A zero distance has gradient 0 (PyTorch's
 * rule): the root is taken of where(d > 0, d, 1), so no 0 * inf appears. */
static tide_tensor *pnorm_last(nn_scope *s, tide_tensor *diff, double p)
{
    int last = -1;
    tide_tensor *ad = nn_keep(s, tide_abs(diff));
    if (isinf(p))
        return nn_keep(s, tide_max(ad, &last, 1, false));
    if (p == 1)
        return nn_keep(s, tide_sum(ad, &last, 1, false));
    if (p == 0) {
        tide_tensor *zero = nn_keep(s, tide_scalar(0, (tide_dtype)diff->dtype));
        tide_tensor *nz = nn_keep(s, tide_cast(nn_keep(s, tide_ne(ad, zero)),
                                               (tide_dtype)diff->dtype));
        return nn_keep(s, tide_sum(nz, &last, 1, false));
    }
    tide_tensor *pw = p == 2 ? nn_keep(s, tide_mul(diff, diff)) : nn_keep(s, tide_pow_scalar(ad, p));
    tide_tensor *sum = nn_keep(s, tide_sum(pw, &last, 1, false));
    tide_tensor *zero = nn_keep(s, tide_scalar(0, sum ? (tide_dtype)sum->dtype : TIDE_FLOAT32));
    tide_tensor *one = nn_keep(s, tide_scalar(1, sum ? (tide_dtype)sum->dtype : TIDE_FLOAT32));
    tide_tensor *pos = nn_keep(s, tide_gt(sum, zero));
    tide_tensor *safe = nn_keep(s, tide_where(pos, sum, one));
    tide_tensor *root = p == 2 ? nn_keep(s, tide_sqrt(safe)) : nn_keep(s, tide_pow_scalar(safe, 1 / p));
    return nn_keep(s, tide_where(pos, root, zero));
}

static tide_tensor *cdist_body(const tide_tensor *x1, const tide_tensor *x2, double p)
{
    const char *op = "cdist";
    if (nn_check_floating(op, "x1", x1) < 0 || nn_check_floating(op, "x2", x2) < 0)
        return NULL;
    char s1[160], s2[160];
    if (x1->ndim < 2 || x2->ndim < 2 || x1->shape[x1->ndim - 1] != x2->shape[x2->ndim - 1] ||
        x1->ndim + 1 > TIDE_MAX_DIMS)
        return td_error("%s: x1 %s and x2 %s must be [.., P, M] and [.., R, M] with the same M",
                        op, nn_describe(s1, sizeof s1, x1), nn_describe(s2, sizeof s2, x2)), NULL;
    if (!(p >= 0))
        return td_error("%s: p must be >= 0, got %g", op, p), NULL;
    nn_scope s = {0};
    tide_tensor *a = nn_keep(&s, tide_unsqueeze(x1, -2)); /* [.., P, 1, M] */
    tide_tensor *b = nn_keep(&s, tide_unsqueeze(x2, -3)); /* [.., 1, R, M] */
    tide_tensor *diff = nn_keep(&s, tide_sub(a, b));
    return nn_finish(&s, op, diff ? pnorm_last(&s, diff, p) : NULL);
}

tide_tensor *tide_cdist(const tide_tensor *x1, const tide_tensor *x2, double p)
{
    TD_IN_OP("cdist", cdist_body(x1, x2, p));
}

/* Each block (0-D: 1x1, 1-D: one row, 2-D) padded left and right to the total width, then the
 * rows concatenated; every block cast to the promoted dtype first. */
static tide_tensor *block_diag_body(tide_tensor *const *xs, int n)
{
    const char *op = "block_diag";
    if (n <= 0 || n > (NN_SCOPE_MAX - 1) / 3 || !xs)
        return td_error("%s: expected 1 to %d tensors, got %d", op, (NN_SCOPE_MAX - 1) / 3, n), NULL;
    int64_t width = 0;
    tide_dtype dt = TIDE_BOOL;
    for (int i = 0; i < n; i++) {
        if (td_check_tensor(op, "tensor", xs[i]) < 0)
            return NULL;
        if (xs[i]->ndim > 2) {
            char s1[160];
            return td_error("%s: tensor %d is %s; blocks must have at most 2 dims", op, i,
                            nn_describe(s1, sizeof s1, xs[i])), NULL;
        }
        width += xs[i]->ndim == 0 ? 1 : xs[i]->shape[xs[i]->ndim - 1];
        dt = i == 0 ? (tide_dtype)xs[i]->dtype : tide_promote_types(dt, (tide_dtype)xs[i]->dtype);
    }
    nn_scope s = {0};
    tide_tensor *rows[NN_SCOPE_MAX];
    int64_t col = 0;
    for (int i = 0; i < n; i++) {
        const tide_tensor *x = xs[i];
        int64_t r = x->ndim == 2 ? x->shape[0] : 1, c = x->ndim == 0 ? 1 : x->shape[x->ndim - 1];
        tide_tensor *m = nn_keep(&s, tide_reshape(x, 2, (const int64_t[]){r, c}));
        m = nn_keep(&s, tide_cast(m, dt));
        rows[i] = nn_keep(&s, tide_pad(m, (const int64_t[]){col, width - col - c}, 2, 0));
        col += c;
    }
    return nn_finish(&s, op, s.failed ? NULL : nn_keep(&s, tide_cat(rows, n, 0)));
}

tide_tensor *tide_block_diag(tide_tensor *const *xs, int n)
{
    TD_IN_OP("block_diag", block_diag_body(xs, n));
}
