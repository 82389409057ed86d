/*
 * index_ops.c — indexing composites: masked_select, take, scatter (replace, "add",
 * "multiply"; a tensor or a value), index_add, index_copy, index_fill, and normal with tensor
 * mean/std. All are built on gather/scatter_add/index_select, where and views.
 *
 * scatter without reduce and "multiply" compare index with every position of dim (a one-hot of
 * index's numel x size(dim) booleans): replace keeps, of the sources landing on one place, the
 * last along dim (PyTorch's CPU result), "multiply" takes the product of where(hit, src, 1).
 * "add" is scatter_add. No kernel is needed, and the gradients follow from where, prod and sum.
 * masked_select reads the number of true elements back to the host (its result's size), so
 * under the jit it is a graph break; the positions are topk of the 0/1 mask (ties go to the
 * lower position, so they come out in order).
 */
#include <string.h>

#include "nn_common.h"

static int broadcast_shape(const char *op, const tide_tensor *a, const tide_tensor *b,
                           int *ndim, int64_t *shape)
{
    int nd = a->ndim > b->ndim ? a->ndim : b->ndim;
    for (int d = 0; d < nd; d++) {
        int ka = d - (nd - a->ndim), kb = d - (nd - b->ndim);
        int64_t x = ka < 0 ? 1 : a->shape[ka], y = kb < 0 ? 1 : b->shape[kb];
        if (x != y && x != 1 && y != 1) {
            char s1[160], s2[160];
            return td_error("%s: shapes %s and %s do not broadcast (dim %d: %lld vs %lld)", op,
                            nn_describe(s1, sizeof s1, a), nn_describe(s2, sizeof s2, b), d,
                            (long long)x, (long long)y);
        }
        shape[d] = x == 1 ? y : x;
    }
    *ndim = nd;
    return 0;
}

static tide_tensor *masked_select_body(const tide_tensor *x, const tide_tensor *mask)
{
    const char *op = "masked_select";
    if (td_check_tensor(op, "input", x) < 0 || td_check_tensor(op, "mask", mask) < 0)
        return NULL;
    if (mask->dtype != TIDE_BOOL) {
        char s1[160];
        return td_error("%s: mask must be bool, got %s", op, nn_describe(s1, sizeof s1, mask)),
               NULL;
    }
    int nd;
    int64_t shape[TIDE_MAX_DIMS], count = 0;
    if (broadcast_shape(op, x, mask, &nd, shape) < 0)
        return NULL;
    nn_scope s = {0};
    tide_tensor *xb = nn_keep(&s, tide_expand(x, nd, shape));
    tide_tensor *mb = nn_keep(&s, tide_expand(mask, nd, shape));
    tide_tensor *fx = nn_keep(&s, tide_reshape(xb, 1, (const int64_t[]){-1}));
    tide_tensor *fm = nn_keep(&s, tide_reshape(mb, 1, (const int64_t[]){-1}));
    tide_tensor *m01 = nn_keep(&s, tide_cast(fm, TIDE_FLOAT32));
    tide_tensor *n = nn_keep(&s, tide_sum(fm, NULL, 0, false));
    if (n && tide_item_int64(n, &count) < 0)
        nn_keep(&s, NULL);
    tide_tensor *idx = NULL;
    if (!s.failed && tide_topk(m01, count, 0, true, true, NULL, &idx) == 0)
        nn_keep(&s, idx);
    else
        nn_keep(&s, NULL);
    return nn_finish(&s, op, nn_keep(&s, tide_index_select(fx, 0, idx)));
}

tide_tensor *tide_masked_select(const tide_tensor *x, const tide_tensor *mask)
{
    TD_IN_OP("masked_select", masked_select_body(x, mask));
}

static tide_tensor *take_body(const tide_tensor *x, const tide_tensor *index)
{
    if (td_check_tensor("take", "input", x) < 0 || td_check_tensor("take", "index", index) < 0)
        return NULL;
    nn_scope s = {0};
    tide_tensor *fx = nn_keep(&s, tide_reshape(x, 1, (const int64_t[]){-1}));
    tide_tensor *fi = nn_keep(&s, tide_reshape(index, 1, (const int64_t[]){-1}));
    tide_tensor *r = nn_keep(&s, tide_index_select(fx, 0, fi));
    return nn_finish(&s, "take", nn_keep(&s, tide_reshape(r, index->ndim, index->shape)));
}

tide_tensor *tide_take(const tide_tensor *x, const tide_tensor *index)
{
    TD_IN_OP("take", take_body(x, index));
}

/* The one-hot comparison of index with every position of dim d: [index..., size(d)] bool. */
static tide_tensor *one_hot_over_dim(nn_scope *s, const tide_tensor *x, int d,
                                     const tide_tensor *index)
{
    int nd = x->ndim;
    int64_t pshape[TIDE_MAX_DIMS];
    for (int k = 0; k <= nd; k++)
        pshape[k] = k == nd ? x->shape[d] : 1;
    tide_tensor *pos = nn_keep(s, td_arange_on(x->device, 0, (double)x->shape[d], 1, TIDE_INT64));
    pos = nn_keep(s, tide_reshape(pos, nd + 1, pshape));
    tide_tensor *ie = nn_keep(s, tide_cast(nn_keep(s, tide_unsqueeze(index, -1)), TIDE_INT64));
    return nn_keep(s, tide_eq(ie, pos));
}

/* src cut to index's extent (scatter reads no more of it) with a trailing dim of 1. */
static tide_tensor *src_over_index(nn_scope *s, const tide_tensor *src, const tide_tensor *index)
{
    tide_tensor *t = nn_keep(s, tide_retain((tide_tensor *)src));
    for (int k = 0; k < src->ndim && t; k++)
        if (t->shape[k] != index->shape[k])
            t = nn_keep(s, tide_slice(t, k, 0, index->shape[k], 1));
    return nn_keep(s, tide_unsqueeze(t, -1));
}

/* p [index without d..., size(d)] moved back to x's layout and padded to x's shape with fill
 * (index may be smaller than x outside d). */
static tide_tensor *back_to_input(nn_scope *s, tide_tensor *p, const tide_tensor *x, int d,
                                  const tide_tensor *index, double fill)
{
    int nd = x->ndim;
    p = nn_keep(s, tide_movedim(p, 1, (const int[]){nd - 1}, &d));
    int64_t pads[2 * TIDE_MAX_DIMS];
    for (int k = 0; k < nd; k++) {
        pads[2 * k] = 0;
        pads[2 * k + 1] = k == nd - 1 - d ? 0 : x->shape[nd - 1 - k] - index->shape[nd - 1 - k];
    }
    return nn_keep(s, tide_pad(p, pads, 2 * nd, fill));
}

/* src replaces; of the sources landing on one place the last along dim wins, as PyTorch's CPU
 * loop leaves it: key = position + 1 where the one-hot is set, the winner the key's maximum. */
static tide_tensor *scatter_replace(nn_scope *s, const tide_tensor *x, int d,
                                    const tide_tensor *index, const tide_tensor *src)
{
    int nd = x->ndim;
    if (nd + 1 > TIDE_MAX_DIMS)
        return nn_keep(s, (td_error("scatter: up to %d dims", TIDE_MAX_DIMS - 1), NULL));
    tide_tensor *hot = one_hot_over_dim(s, x, d, index);
    int64_t jshape[TIDE_MAX_DIMS];
    for (int k = 0; k <= nd; k++)
        jshape[k] = k == d ? index->shape[d] : 1;
    tide_tensor *j = nn_keep(s, td_arange_on(x->device, 1, (double)index->shape[d] + 1, 1,
                                             TIDE_INT64));
    j = nn_keep(s, tide_reshape(j, nd + 1, jshape));
    tide_tensor *zero = nn_keep(s, tide_scalar(0, TIDE_INT64));
    tide_tensor *key = nn_keep(s, tide_where(hot, j, zero));
    tide_tensor *best = nn_keep(s, tide_max(key, &d, 1, true));
    tide_tensor *win = nn_keep(s, tide_logical_and(hot, nn_keep(s, tide_eq(key, best))));
    tide_tensor *vzero = nn_keep(s, tide_scalar(0, (tide_dtype)x->dtype));
    tide_tensor *val = nn_keep(s, tide_where(win, src_over_index(s, src, index), vzero));
    val = nn_keep(s, tide_sum(val, &d, 1, false));
    val = nn_keep(s, tide_cast(val, (tide_dtype)x->dtype)); /* sum widens integers */
    tide_tensor *landed = nn_keep(s, tide_squeeze(best, d));
    val = back_to_input(s, val, x, d, index, 0);
    landed = back_to_input(s, landed, x, d, index, 0);
    return nn_keep(s, tide_where(nn_keep(s, tide_gt(landed, zero)), val, x));
}

/* x times the product of the sources landing on each place. */
static tide_tensor *scatter_multiply(nn_scope *s, const tide_tensor *x, int d,
                                     const tide_tensor *index, const tide_tensor *src)
{
    if (x->ndim + 1 > TIDE_MAX_DIMS)
        return nn_keep(s, (td_error("scatter: reduce \"multiply\" takes up to %d dims",
                                    TIDE_MAX_DIMS - 1), NULL));
    tide_tensor *hot = one_hot_over_dim(s, x, d, index);
    tide_tensor *one = nn_keep(s, tide_scalar(1, (tide_dtype)x->dtype));
    tide_tensor *f = nn_keep(s, tide_where(hot, src_over_index(s, src, index), one));
    tide_tensor *p = nn_keep(s, tide_prod(f, &d, 1, false)); /* [index w/o d..., size(dim)] */
    p = nn_keep(s, tide_cast(p, (tide_dtype)x->dtype));
    return nn_keep(s, tide_mul(x, back_to_input(s, p, x, d, index, 1)));
}

static tide_tensor *scatter_body(const tide_tensor *x, int dim, const tide_tensor *index,
                                 const tide_tensor *src, const char *reduce)
{
    const char *op = "scatter";
    if (td_check_tensor(op, "input", x) < 0 || td_check_tensor(op, "src", src) < 0 ||
        td_check_tensor(op, "index", index) < 0)
        return NULL;
    if (reduce && strcmp(reduce, "add") != 0 && strcmp(reduce, "multiply") != 0)
        return td_error("%s: reduce must be \"add\" or \"multiply\", got \"%s\"", op, reduce),
               NULL;
    int d = td_normalize_dim(op, dim, x->ndim);
    if (d < 0)
        return NULL;
    nn_scope s = {0};
    tide_tensor *sc = nn_keep(&s, tide_cast(src, (tide_dtype)x->dtype));
    /* scatter_add checks index and src against x, naming the shapes */
    tide_tensor *checked = nn_keep(&s, tide_scatter_add(x, d, index, sc));
    tide_tensor *out = !checked ? NULL
                       : !reduce ? scatter_replace(&s, x, d, index, sc)
                       : reduce[0] == 'a' ? checked
                                          : scatter_multiply(&s, x, d, index, sc);
    return nn_finish(&s, op, out ? nn_keep(&s, tide_retain(out)) : NULL);
}

tide_tensor *tide_scatter(const tide_tensor *x, int dim, const tide_tensor *index,
                          const tide_tensor *src, const char *reduce)
{
    TD_IN_OP("scatter", scatter_body(x, dim, index, src, reduce));
}

tide_tensor *tide_scatter_value(const tide_tensor *x, int dim, const tide_tensor *index,
                                double value, const char *reduce)
{
    if (td_check_tensor("scatter", "input", x) < 0 || td_check_tensor("scatter", "index", index) < 0)
        return NULL;
    tide_tensor *src = td_full_on(x->device, "scatter", index->ndim, index->shape, value,
                                  (tide_dtype)x->dtype);
    tide_tensor *r = src ? tide_scatter(x, dim, index, src, reduce) : NULL;
    tide_release(src);
    return r;
}

/* The 1-D index of index_add/index_copy expanded over src's shape along d. */
static tide_tensor *index_over(nn_scope *s, const char *op, const tide_tensor *x, int d,
                               const tide_tensor *index, const tide_tensor *src)
{
    char s1[160], s2[160], s3[160];
    int64_t k = td_numel(index->ndim, index->shape);
    bool ok = index->ndim <= 1 && src->ndim == x->ndim;
    for (int i = 0; ok && i < x->ndim; i++)
        ok = src->shape[i] == (i == d ? k : x->shape[i]);
    if (!ok)
        return nn_keep(s, (td_error("%s: index %s and source %s do not fit input %s along dim %d "
                                    "(source must be the input's shape with dim %d = the "
                                    "index's length)", op, nn_describe(s1, sizeof s1, index),
                                    nn_describe(s2, sizeof s2, src), nn_describe(s3, sizeof s3, x),
                                    d, d), NULL));
    int64_t shape[TIDE_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++)
        shape[i] = i == d ? k : 1;
    tide_tensor *r = nn_keep(s, tide_reshape(index, x->ndim, shape));
    return nn_keep(s, tide_expand(r, src->ndim, src->shape));
}

static tide_tensor *index_add_body(const char *op, const tide_tensor *x, int dim,
                                   const tide_tensor *index, const tide_tensor *src, double alpha,
                                   bool copy)
{
    if (td_check_tensor(op, "input", x) < 0 || td_check_tensor(op, "index", index) < 0 ||
        td_check_tensor(op, "source", src) < 0)
        return NULL;
    int d = td_normalize_dim(op, dim, x->ndim);
    if (d < 0)
        return NULL;
    if (x->ndim == 0)
        return td_error("%s: a 0-dim input is not supported", op), NULL;
    nn_scope s = {0};
    tide_tensor *idx = index_over(&s, op, x, d, index, src);
    tide_tensor *sc = nn_keep(&s, tide_cast(src, (tide_dtype)x->dtype));
    if (alpha != 1 && !copy)
        sc = nn_keep(&s, tide_cast(nn_keep(&s, tide_mul_scalar(sc, alpha)), (tide_dtype)x->dtype));
    tide_tensor *out = copy ? (idx ? scatter_replace(&s, x, d, idx, sc) : NULL)
                            : nn_keep(&s, tide_scatter_add(x, d, idx, sc));
    return nn_finish(&s, op, out ? nn_keep(&s, tide_retain(out)) : NULL);
}

tide_tensor *tide_index_add(const tide_tensor *x, int dim, const tide_tensor *index,
                            const tide_tensor *src, double alpha)
{
    TD_IN_OP("index_add", index_add_body("index_add", x, dim, index, src, alpha, false));
}

tide_tensor *tide_index_copy(const tide_tensor *x, int dim, const tide_tensor *index,
                             const tide_tensor *src)
{
    TD_IN_OP("index_copy", index_add_body("index_copy", x, dim, index, src, 1, true));
}

static tide_tensor *index_fill_body(const tide_tensor *x, int dim, const tide_tensor *index,
                                    double value)
{
    const char *op = "index_fill";
    if (td_check_tensor(op, "input", x) < 0 || td_check_tensor(op, "index", index) < 0)
        return NULL;
    int d = td_normalize_dim(op, dim, x->ndim);
    if (d < 0)
        return NULL;
    if (index->ndim > 1) {
        char s1[160];
        return td_error("%s: index must be 0-D or 1-D, got %s", op,
                        nn_describe(s1, sizeof s1, index)), NULL;
    }
    nn_scope s = {0};
    int64_t n = x->ndim ? x->shape[d] : 1, k = td_numel(index->ndim, index->shape);
    tide_tensor *zeros = nn_keep(&s, td_full_on(x->device, op, 1, &n, 0, TIDE_FLOAT32));
    tide_tensor *ones = nn_keep(&s, td_full_on(x->device, op, 1, &k, 1, TIDE_FLOAT32));
    tide_tensor *i1 = nn_keep(&s, tide_reshape(index, 1, &k));
    tide_tensor *hits = nn_keep(&s, tide_scatter_add(zeros, 0, i1, ones));
    tide_tensor *zero = nn_keep(&s, tide_scalar(0, TIDE_FLOAT32));
    tide_tensor *mask = nn_keep(&s, tide_gt(hits, zero));
    int64_t shape[TIDE_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++)
        shape[i] = i == d ? n : 1;
    mask = nn_keep(&s, tide_reshape(mask, x->ndim, shape));
    tide_tensor *v = nn_keep(&s, tide_scalar(value, (tide_dtype)x->dtype));
    return nn_finish(&s, op, nn_keep(&s, tide_where(mask, v, x)));
}

tide_tensor *tide_index_fill(const tide_tensor *x, int dim, const tide_tensor *index, double value)
{
    TD_IN_OP("index_fill", index_fill_body(x, dim, index, value));
}

static tide_tensor *normal_body(const tide_tensor *mean, const tide_tensor *std)
{
    const char *op = "normal";
    if (td_check_tensor(op, "mean", mean) < 0 || td_check_tensor(op, "std", std) < 0)
        return NULL;
    tide_tensor *pair[2] = {(tide_tensor *)mean, (tide_tensor *)std};
    tide_dtype dt = td_result_type(pair, 2);
    if (!tide_dtype_is_floating(dt)) {
        char s1[160], s2[160];
        return td_error("%s: mean %s and std %s: at least one must be floating", op,
                        nn_describe(s1, sizeof s1, mean), nn_describe(s2, sizeof s2, std)), NULL;
    }
    int nd;
    int64_t shape[TIDE_MAX_DIMS];
    if (broadcast_shape(op, mean, std, &nd, shape) < 0)
        return NULL;
    nn_scope s = {0};
    const tide_tensor *on = mean->ndim || !std->ndim ? mean : std;
    tide_tensor *z = nn_keep(&s, tide_randn_on(on->device->name, nd, shape, dt));
    tide_tensor *sz = nn_keep(&s, tide_mul(std, z));
    return nn_finish(&s, op, nn_keep(&s, tide_add(mean, sz)));
}

tide_tensor *tide_normal(const tide_tensor *mean, const tide_tensor *std)
{
    TD_IN_OP("normal", normal_body(mean, std));
}
