/*
 * strided_views.c — the two views whose strides no other view makes: diagonal (stride
 * s1 + s2 over two dims) and unfold (overlapping windows: the window dim's stride times step,
 * plus a new last dim of the old stride). Both are view primitives (DIAGONAL, UNFOLD), so they
 * share the input's storage as in PyTorch; the jit records them like any view (a layout over
 * its root) and their backward formulas are the two helpers at the end, written with public
 * ops. diag, diag_embed and trace are composites around them.
 */
#include <stdio.h>

#include "nn_common.h"
#include "strided_views.h"

/* Written so that no offset, however large, overflows. */
static int64_t diagonal_length(int64_t n, int64_t m, int64_t offset)
{
    if (offset >= 0)
        return offset >= m ? 0 : (m - offset < n ? m - offset : n);
    return offset <= -n ? 0 : (n + offset < m ? n + offset : m);
}

tide_tensor *tide_diagonal(const tide_tensor *x, int64_t offset, int dim1, int dim2)
{
    const char *op = "diagonal";
    if (td_check_tensor(op, "input", x) < 0)
        return NULL;
    if (x->ndim < 2) {
        char s[160];
        td_error("%s: input must have at least 2 dims, got %s", op, nn_describe(s, sizeof s, x));
        return NULL;
    }
    int d1 = td_normalize_dim(op, dim1, x->ndim);
    int d2 = d1 < 0 ? -1 : td_normalize_dim(op, dim2, x->ndim);
    if (d2 < 0)
        return NULL;
    if (d1 == d2) {
        td_error("%s: dim1 and dim2 are both dim %d; they must differ", op, d1);
        return NULL;
    }
    int64_t n = x->shape[d1], m = x->shape[d2], len = diagonal_length(n, m, offset);
    int64_t start = x->offset;
    if (len > 0)
        start += offset >= 0 ? offset * x->strides[d2] : -offset * x->strides[d1];
    int64_t sh[TIDE_MAX_DIMS], st[TIDE_MAX_DIMS];
    int k = 0;
    for (int d = 0; d < x->ndim; d++)
        if (d != d1 && d != d2) {
            sh[k] = x->shape[d];
            st[k++] = x->strides[d];
        }
    sh[k] = len;
    st[k++] = x->strides[d1] + x->strides[d2];
    tide_attrs a = {.nints = 3, .ints = {offset, d1, d2}};
    return td_dispatch_view(TIDE_OP_DIAGONAL, x, k, sh, st, start, &a);
}

tide_tensor *tide_unfold(const tide_tensor *x, int dim, int64_t size, int64_t step)
{
    const char *op = "unfold";
    if (td_check_tensor(op, "input", x) < 0)
        return NULL;
    char s[160];
    if (x->ndim == 0 || x->ndim >= TIDE_MAX_DIMS) {
        td_error("%s: input must have 1 to %d dims, got %s", op, TIDE_MAX_DIMS - 1,
                 nn_describe(s, sizeof s, x));
        return NULL;
    }
    int d = td_normalize_dim(op, dim, x->ndim);
    if (d < 0)
        return NULL;
    if (size < 0 || size > x->shape[d] || step <= 0) {
        td_error("%s: size %lld and step %lld do not fit dim %d of size %lld (need 0 <= size <= "
                 "the dim's size and step > 0; input %s)",
                 op, (long long)size, (long long)step, d, (long long)x->shape[d],
                 nn_describe(s, sizeof s, x));
        return NULL;
    }
    int64_t sh[TIDE_MAX_DIMS], st[TIDE_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++) {
        sh[i] = x->shape[i];
        st[i] = x->strides[i];
    }
    sh[d] = (x->shape[d] - size) / step + 1;
    st[d] = x->strides[d] * step;
    sh[x->ndim] = size;
    st[x->ndim] = x->strides[d];
    tide_attrs a = {.nints = 3, .ints = {d, size, step}};
    return td_dispatch_view(TIDE_OP_UNFOLD, x, x->ndim + 1, sh, st, x->offset, &a);
}

/* g [rest..., len] onto the offset-th diagonal of an [rest..., n, m] zero tensor: g padded to m
 * columns (column j holds element j - max(offset, 0)), selected where col - row == offset. */
static tide_tensor *embed_last_two(nn_scope *s, const tide_tensor *g, int64_t n, int64_t m,
                                   int64_t offset)
{
    int64_t len = g->shape[g->ndim - 1], before = offset > 0 ? offset : 0;
    int64_t pads[2] = {before, m - before - len};
    if (len == 0)
        pads[0] = 0, pads[1] = m;
    tide_tensor *row = nn_keep(s, tide_pad(g, pads, 2, 0));
    tide_tensor *v = nn_keep(s, tide_unsqueeze(row, -2));
    tide_tensor *r = nn_keep(s, td_arange_on(g->device, 0, (double)n, 1, TIDE_INT64));
    tide_tensor *rc = nn_keep(s, tide_unsqueeze(r, -1));
    tide_tensor *c = nn_keep(s, td_arange_on(g->device, 0, (double)m, 1, TIDE_INT64));
    tide_tensor *diff = nn_keep(s, tide_sub(c, rc));
    tide_tensor *k = nn_keep(s, tide_scalar((double)offset, TIDE_INT64));
    tide_tensor *mask = nn_keep(s, tide_eq(diff, k));
    tide_tensor *zero = nn_keep(s, tide_scalar(0, (tide_dtype)g->dtype));
    return nn_keep(s, tide_where(mask, v, zero));
}

tide_tensor *td_diagonal_grad(const tide_tensor *g, int ndim, const int64_t *shape,
                              int64_t offset, int d1, int d2)
{
    nn_scope s = {0};
    tide_tensor *t = embed_last_two(&s, g, shape[d1], shape[d2], offset);
    int perm[TIDE_MAX_DIMS];
    for (int d = 0, k = 0; d < ndim; d++)
        perm[d] = d == d1 ? ndim - 2 : d == d2 ? ndim - 1 : k++;
    tide_tensor *out = nn_keep(&s, tide_permute(t, perm));
    return nn_finish(&s, "diagonal", out);
}

tide_tensor *td_unfold_grad(const tide_tensor *g, int ndim, const int64_t *shape, int dim,
                            int64_t size, int64_t step)
{
    nn_scope s = {0};
    int64_t windows = g->shape[dim], merged[TIDE_MAX_DIMS + 1];
    tide_tensor *zeros = nn_keep(&s, td_full_on(g->device, "unfold", ndim, shape, 0,
                                                (tide_dtype)g->dtype));
    if (windows * size == 0)
        return nn_finish(&s, "unfold", zeros);
    int perm[TIDE_MAX_DIMS + 1];
    for (int d = 0, k = 0; d <= ndim; d++)
        perm[d] = d == dim + 1 ? ndim : k++; /* the window's elements right after its index */
    tide_tensor *gm = nn_keep(&s, tide_permute(g, perm));
    for (int d = 0; d < ndim; d++)
        merged[d] = d == dim ? windows * size : shape[d];
    gm = nn_keep(&s, tide_reshape(gm, ndim, merged));
    tide_tensor *w = nn_keep(&s, td_arange_on(g->device, 0, (double)windows * step, (double)step,
                                              TIDE_INT64));
    tide_tensor *wc = nn_keep(&s, tide_unsqueeze(w, -1));
    tide_tensor *j = nn_keep(&s, td_arange_on(g->device, 0, (double)size, 1, TIDE_INT64));
    tide_tensor *pos = nn_keep(&s, tide_add(wc, j)); /* [windows, size]: w * step + j */
    int64_t ishape[TIDE_MAX_DIMS];
    for (int d = 0; d < ndim; d++)
        ishape[d] = d == dim ? windows * size : 1;
    tide_tensor *idx = nn_keep(&s, tide_reshape(pos, ndim, ishape));
    idx = nn_keep(&s, tide_expand(idx, ndim, merged));
    tide_tensor *out = nn_keep(&s, tide_scatter_add(zeros, dim, idx, gm));
    return nn_finish(&s, "unfold", out);
}

/* diag_embed's body: x [rest..., len] on the offset-th diagonal of the new dims (d1, d2) of
 * size len + |offset| each. */
static tide_tensor *diag_embed_body(const tide_tensor *x, int64_t offset, int dim1, int dim2)
{
    const char *op = "diag_embed";
    if (td_check_tensor(op, "input", x) < 0)
        return NULL;
    char s1[160];
    if (x->ndim == 0 || x->ndim + 1 > TIDE_MAX_DIMS) {
        td_error("%s: input must have 1 to %d dims, got %s", op, TIDE_MAX_DIMS - 1,
                 nn_describe(s1, sizeof s1, x));
        return NULL;
    }
    int nd = x->ndim + 1;
    int d1 = td_normalize_dim(op, dim1, nd), d2 = d1 < 0 ? -1 : td_normalize_dim(op, dim2, nd);
    if (d2 < 0)
        return NULL;
    if (d1 == d2) {
        td_error("%s: dim1 and dim2 are both dim %d; they must differ", op, d1);
        return NULL;
    }
    if (offset > ((int64_t)1 << 40) || offset < -((int64_t)1 << 40))
        return td_error("%s: offset %lld is too large", op, (long long)offset), NULL;
    int64_t n = x->shape[x->ndim - 1] + (offset < 0 ? -offset : offset);
    int64_t shape[TIDE_MAX_DIMS];
    for (int d = 0, k = 0; d < nd; d++)
        shape[d] = d == d1 || d == d2 ? n : x->shape[k++];
    return td_diagonal_grad(x, nd, shape, offset, d1, d2);
}

tide_tensor *tide_diag_embed(const tide_tensor *x, int64_t offset, int dim1, int dim2)
{
    TD_IN_OP("diag_embed", diag_embed_body(x, offset, dim1, dim2));
}

/* torch.diag: a vector onto a square matrix's diagonal, or a matrix's diagonal as a copy. */
static tide_tensor *diag_body(const tide_tensor *x, int64_t diagonal)
{
    if (td_check_tensor("diag", "input", x) < 0)
        return NULL;
    if (x->ndim == 1)
        return diag_embed_body(x, diagonal, 0, 1);
    if (x->ndim != 2) {
        char s[160];
        td_error("diag: input must be 1-D or 2-D, got %s", nn_describe(s, sizeof s, x));
        return NULL;
    }
    tide_tensor *v = tide_diagonal(x, diagonal, 0, 1);
    tide_tensor *r = v ? tide_clone(v) : NULL;
    tide_release(v);
    return r;
}

tide_tensor *tide_diag(const tide_tensor *x, int64_t diagonal)
{
    TD_IN_OP("diag", diag_body(x, diagonal));
}

static tide_tensor *trace_body(const tide_tensor *x)
{
    if (td_check_tensor("trace", "input", x) < 0)
        return NULL;
    if (x->ndim != 2) {
        char s[160];
        td_error("trace: input must be 2-D, got %s", nn_describe(s, sizeof s, x));
        return NULL;
    }
    tide_tensor *v = tide_diagonal(x, 0, 0, 1);
    tide_tensor *r = v ? tide_sum(v, NULL, 0, false) : NULL;
    tide_release(v);
    return r;
}

tide_tensor *tide_trace(const tide_tensor *x)
{
    TD_IN_OP("trace", trace_body(x));
}
