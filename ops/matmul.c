/*
 * matmul.c — torch.matmul on top of the MATMUL primitive. The primitive only knows
 * [batch..., M, K] @ [batch..., K, N] with equal batch shapes; everything else is views, so
 * autograd and the tracer see ordinary view ops: a 1-D operand gains a dim (unsqueeze) that
 * the result loses again (squeeze), and batch dims broadcast through expand (stride 0, no
 * copy). A batch against a matrix whose rows merge is one product of [batch * M, K] (views
 * again), so the matrix's gradient is one product too. Operands of different dtypes meet at
 * PyTorch's promoted dtype through cast, except a float32 matrix times a float16/bfloat16
 * matrix: the LINEAR_HALF primitive widens the half operand inside the product (linear_half.c).
 */
#include <stdio.h>
#include <string.h>

#include "autocast.h"
#include "linear_half.h"

/* "[2, 3] float32" into buf. */
static const char *describe(char *buf, size_t size, const tide_tensor *t)
{
    char s[160];
    snprintf(buf, size, "%s %s", td_shape_str(s, sizeof s, t->ndim, t->shape),
             tide_dtype_name((tide_dtype)t->dtype));
    return buf;
}

/* Replaces *t with f(*t) (a new reference), releasing the old one. -1 when f failed. */
static int replace(tide_tensor **t, tide_tensor *next)
{
    tide_release(*t);
    *t = next;
    return next ? 0 : -1;
}

static bool same_shape(const tide_tensor *t, int ndim, const int64_t *shape)
{
    if (t->ndim != ndim)
        return false;
    for (int d = 0; d < ndim; d++)
        if (t->shape[d] != shape[d])
            return false;
    return true;
}

/* The user's mistakes that no broadcasting can fix: a scalar, bool, two devices, or inner
 * dims that differ. 0 when a @ b can be formed, else -1 with the error set. */
static int check_operands(const tide_tensor *a, const tide_tensor *b)
{
    if (td_check_tensor("matmul", "first input", a) < 0 ||
        td_check_tensor("matmul", "second input", b) < 0)
        return -1;
    char da[200], db[200], s1[160], s2[160];
    if (a->ndim == 0 || b->ndim == 0) {
        td_error("matmul: both inputs need at least 1 dim, got %s and %s (use mul for a "
                 "scalar)",
                 describe(da, sizeof da, a), describe(db, sizeof db, b));
        return -1;
    }
    if (a->dtype == TIDE_BOOL || b->dtype == TIDE_BOOL) {
        td_error("matmul: bool tensors are not supported (%s and %s); cast to an integer or "
                 "floating dtype first",
                 describe(da, sizeof da, a), describe(db, sizeof db, b));
        return -1;
    }
    if (a->device != b->device) {
        td_error("matmul: inputs on different devices (%s on %s, %s on %s)",
                 describe(da, sizeof da, a), a->device->name, describe(db, sizeof db, b),
                 b->device->name);
        return -1;
    }
    int na = a->ndim, nb = b->ndim;
    int64_t ka = a->shape[na - 1], kb = nb == 1 ? b->shape[0] : b->shape[nb - 2];
    if (ka != kb) {
        td_error("matmul: shapes %s and %s cannot be multiplied (%lld != %lld)",
                 td_shape_str(s1, sizeof s1, na, a->shape),
                 td_shape_str(s2, sizeof s2, nb, b->shape), (long long)ka, (long long)kb);
        return -1;
    }
    return 0;
}

/* Whether a's dims before its last (batch dims and rows) merge into one without a copy. */
static bool rows_merge(const tide_tensor *a)
{
    int64_t flat[2] = {td_numel(a->ndim - 1, a->shape), a->shape[a->ndim - 1]}, strides[2];
    return td_view_strides(a->ndim, a->shape, a->strides, 2, flat, strides);
}

static tide_tensor *matmul_body(const tide_tensor *a, const tide_tensor *b);

/* [batch..., M, K] @ [K, N] as one [batch * M, K] @ [K, N] product, as PyTorch does. Without it
 * b would be expanded over the batch, and its gradient would be one product per batch entry
 * (k = M instead of batch * M) written out whole and then summed over the batch: in the GPT
 * training step that was every weight gradient, ~0.7 GB of extra traffic a step. */
static tide_tensor *matmul_folded(const tide_tensor *a, const tide_tensor *b)
{
    int na = a->ndim;
    int64_t shape[TIDE_MAX_DIMS], flat[2] = {td_numel(na - 1, a->shape), a->shape[na - 1]};
    tide_tensor *a2 = tide_view(a, 2, flat);
    tide_tensor *out2 = a2 ? matmul_body(a2, b) : NULL;
    tide_release(a2);
    if (!out2)
        return NULL;
    memcpy(shape, a->shape, sizeof(int64_t) * (size_t)(na - 1));
    shape[na - 1] = b->shape[1];
    tide_tensor *out = tide_view(out2, na, shape);
    tide_release(out2);
    return out;
}

static tide_tensor *matmul_body(const tide_tensor *a, const tide_tensor *b)
{
    if (check_operands(a, b) < 0)
        return NULL;
    if (a->ndim > 2 && b->ndim == 2 && rows_merge(a))
        return matmul_folded(a, b);
    if (td_is_half_weight_product(a, b)) /* no float32 copy of the half weight */
        return td_matmul_half_weight(a, b);
    char s1[160], s2[160];
    int na = a->ndim, nb = b->ndim;
    int64_t ka = a->shape[na - 1];
    /* Batch dims: everything before the matrix dims (a 1-D operand has none). */
    int bna = na > 2 ? na - 2 : 0, bnb = nb > 2 ? nb - 2 : 0, nbatch;
    int64_t batch[TIDE_MAX_DIMS];
    if (td_broadcast_shape(bna, a->shape, bnb, b->shape, &nbatch, batch) < 0) {
        char b1[160], b2[160];
        td_error("matmul: batch dims %s and %s of shapes %s and %s cannot be broadcast together",
                 td_shape_str(b1, sizeof b1, bna, a->shape),
                 td_shape_str(b2, sizeof b2, bnb, b->shape),
                 td_shape_str(s1, sizeof s1, na, a->shape),
                 td_shape_str(s2, sizeof s2, nb, b->shape));
        return NULL;
    }
    tide_tensor *in[2] = {(tide_tensor *)a, (tide_tensor *)b};
    tide_dtype dt = td_result_type(in, 2);
    int64_t m = na == 1 ? 1 : a->shape[na - 2], n = nb == 1 ? 1 : b->shape[nb - 1];

    td_meta meta = {nbatch + 2, {0}, dt, a->device};
    for (int d = 0; d < nbatch; d++)
        meta.shape[d] = batch[d];
    meta.shape[nbatch] = m;
    meta.shape[nbatch + 1] = n;
    int64_t ashape[TIDE_MAX_DIMS], bshape[TIDE_MAX_DIMS];
    memcpy(ashape, meta.shape, sizeof ashape);
    memcpy(bshape, meta.shape, sizeof bshape);
    ashape[nbatch + 1] = ka;
    bshape[nbatch] = ka;

    tide_tensor *x = tide_retain(in[0]), *y = tide_retain(in[1]), *out = NULL;
    int ok = (na > 1 || replace(&x, tide_unsqueeze(x, 0)) == 0) &&
             (nb > 1 || replace(&y, tide_unsqueeze(y, 1)) == 0) &&
             (x->dtype == dt || replace(&x, tide_cast(x, dt)) == 0) &&
             (y->dtype == dt || replace(&y, tide_cast(y, dt)) == 0) &&
             (same_shape(x, nbatch + 2, ashape) ||
              replace(&x, tide_expand(x, nbatch + 2, ashape)) == 0) &&
             (same_shape(y, nbatch + 2, bshape) ||
              replace(&y, tide_expand(y, nbatch + 2, bshape)) == 0);
    if (ok) {
        tide_tensor *args[2] = {x, y};
        out = td_dispatch(TIDE_OP_MATMUL, &meta, args, 2, NULL);
    }
    tide_release(x);
    tide_release(y);
    /* The dims a 1-D operand gained go again: [.., 1, N] -> [.., N], [.., M, 1] -> [.., M]. */
    if (out && nb == 1)
        replace(&out, tide_squeeze(out, -1));
    if (out && na == 1)
        replace(&out, tide_squeeze(out, -1 - (nb > 1)));
    return out;
}

tide_tensor *tide_matmul(const tide_tensor *a, const tide_tensor *b)
{
    TD_IN_AUTOCAST_OP("matmul", TD_AUTOCAST_LOWER, matmul_body(a, b), 2, &a, &b);
}
