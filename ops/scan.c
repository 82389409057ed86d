/*
 * scan.c — cumsum and topk, ops that look along one dim.
 *
 * cumsum is the CUMSUM primitive: inclusive prefix sums, as torch.cumsum. Integer and bool
 * inputs are cast to int64 first (PyTorch's result dtype), so a kernel sees float32, float64 or
 * int64 with out's dtype. Kernels add in order along the dim (the CPU's and ref's in double for
 * floats, devices/cpu/cpu_scan.c). A library op: the jit keeps it opaque.
 *
 * cumprod and logcumsumexp are CUMSUM of another kind (core/primitive.h, tide_scan_kind), in
 * double in order along the dim as the sum; cummax/cummin a kind that gives the running
 * max's positions, and a gather of the values. Their gradients are in autograd/formulas.c.
 *
 * topk is the TOPK primitive, which only picks int64 positions (best first), and a gather of
 * the values at them: the values' gradient is gather's, scattered back to the chosen places.
 */
#include <stdio.h>
#include <string.h>

#include "nn_common.h"

/* The CUMSUM primitive of one kind along dim. Sums and products of integers and bool are
 * int64 (PyTorch's result dtype); logsumexp needs a float; the running max/min positions read
 * any dtype but bool (cast to uint8 first: same order) and give int64. */
static tide_tensor *scan_body(const char *op, const tide_tensor *x, int dim, tide_scan_kind kind)
{
    if (td_check_tensor(op, "input", x) < 0)
        return NULL;
    char buf[160];
    int lo = x->ndim > 0 ? -x->ndim : -1, hi = x->ndim > 0 ? x->ndim - 1 : 0;
    if (dim < lo || dim > hi) {
        td_error("%s: dim %d is out of range for input %s (expected %d..%d)", op, dim,
                 nn_describe(buf, sizeof buf, x), lo, hi);
        return NULL;
    }
    bool fl = tide_dtype_is_floating((tide_dtype)x->dtype);
    if (kind == TIDE_SCAN_LOGSUMEXP && !fl) {
        td_error("%s: input %s must be floating-point", op, nn_describe(buf, sizeof buf, x));
        return NULL;
    }
    bool pick = kind == TIDE_SCAN_ARGMAX || kind == TIDE_SCAN_ARGMIN;
    int d = dim < 0 ? dim + (x->ndim > 0 ? x->ndim : 1) : dim;
    tide_dtype in_dt = fl ? (tide_dtype)x->dtype
                          : pick ? (x->dtype == TIDE_BOOL ? TIDE_UINT8 : (tide_dtype)x->dtype)
                                 : TIDE_INT64;
    tide_tensor *in = tide_cast(x, in_dt);
    if (!in)
        return NULL;
    td_meta meta = {in->ndim, {0}, pick ? TIDE_INT64 : in_dt, in->device};
    memcpy(meta.shape, in->shape, sizeof(int64_t) * in->ndim);
    tide_attrs attrs = {.nints = 2, .ints = {d, kind}};
    tide_tensor *out = td_dispatch(TIDE_OP_CUMSUM, &meta, &in, 1, &attrs);
    tide_release(in);
    return out;
}

tide_tensor *tide_cumsum(const tide_tensor *x, int dim)
{
    TD_IN_OP("cumsum", scan_body("cumsum", x, dim, TIDE_SCAN_SUM));
}

tide_tensor *tide_cumprod(const tide_tensor *x, int dim)
{
    TD_IN_OP("cumprod", scan_body("cumprod", x, dim, TIDE_SCAN_PROD));
}

tide_tensor *tide_logcumsumexp(const tide_tensor *x, int dim)
{
    TD_IN_OP("logcumsumexp", scan_body("logcumsumexp", x, dim, TIDE_SCAN_LOGSUMEXP));
}

/* cummax/cummin: the positions from the primitive, the values a gather at them (so the values'
 * gradient is gather's, scattered back to the running max's place). */
static int cumpick_body(const char *op, const tide_tensor *x, int dim, tide_scan_kind kind,
                        tide_tensor **values, tide_tensor **indices)
{
    tide_tensor *idx = scan_body(op, x, dim, kind);
    if (!idx)
        return -1;
    int d = dim < 0 ? dim + (x->ndim > 0 ? x->ndim : 1) : dim;
    tide_tensor *val = values ? tide_gather(x, x->ndim > 0 ? d : 0, idx) : NULL;
    if (values && !val) {
        tide_release(idx);
        return -1;
    }
    if (values)
        *values = val;
    if (indices)
        *indices = idx;
    else
        tide_release(idx);
    return 0;
}

int tide_cummax(const tide_tensor *x, int dim, tide_tensor **values, tide_tensor **indices)
{
    const char *previous = td_op_enter("cummax");
    int rc = cumpick_body("cummax", x, dim, TIDE_SCAN_ARGMAX, values, indices);
    td_op_leave(previous);
    return rc;
}

int tide_cummin(const tide_tensor *x, int dim, tide_tensor **values, tide_tensor **indices)
{
    const char *previous = td_op_enter("cummin");
    int rc = cumpick_body("cummin", x, dim, TIDE_SCAN_ARGMIN, values, indices);
    td_op_leave(previous);
    return rc;
}

/* ---- topk: the TOPK primitive picks positions, values are a gather (so autograd is gather's) */

static int topk_body(const tide_tensor *x, int64_t k, int dim, bool largest,
                     tide_tensor **values, tide_tensor **indices)
{
    const char *op = "topk";
    char buf[160];
    if (td_check_tensor(op, "input", x) < 0)
        return -1;
    int lo = x->ndim > 0 ? -x->ndim : -1, hi = x->ndim > 0 ? x->ndim - 1 : 0;
    if (dim < lo || dim > hi)
        return td_error("%s: dim %d is out of range for input %s (expected %d..%d)", op, dim,
                        nn_describe(buf, sizeof buf, x), lo, hi);
    if (x->dtype == TIDE_BOOL)
        return td_error("%s: input %s: bool has no order; cast it first", op,
                        nn_describe(buf, sizeof buf, x));
    int d = dim < 0 ? dim + (x->ndim > 0 ? x->ndim : 1) : dim;
    int64_t size = x->ndim > 0 ? x->shape[d] : 1;
    if (k < (x->ndim == 0 ? 1 : 0) || k > size) /* a 0-dim result holds one element */
        return td_error("%s: k = %lld is out of range %d..%lld for input %s", op, (long long)k,
                        x->ndim == 0 ? 1 : 0, (long long)size, nn_describe(buf, sizeof buf, x));
    td_meta meta = {x->ndim, {0}, TIDE_INT64, x->device};
    memcpy(meta.shape, x->shape, sizeof(int64_t) * x->ndim);
    if (x->ndim > 0)
        meta.shape[d] = k;
    tide_attrs attrs = {.nints = 3, .ints = {d, k, largest}};
    tide_tensor *in = (tide_tensor *)x;
    tide_tensor *idx = td_dispatch(TIDE_OP_TOPK, &meta, &in, 1, &attrs);
    tide_tensor *val = idx && values ? tide_gather(x, d, idx) : NULL;
    if (!idx || (values && !val)) {
        tide_release(idx);
        return -1;
    }
    if (values)
        *values = val;
    if (indices)
        *indices = idx;
    else
        tide_release(idx);
    return 0;
}

int tide_topk(const tide_tensor *x, int64_t k, int dim, bool largest, bool sorted,
              tide_tensor **values, tide_tensor **indices)
{
    (void)sorted; /* results always come best first, which satisfies either request */
    if (values)
        *values = NULL;
    if (indices)
        *indices = NULL;
    const char *previous = td_op_enter("topk");
    int rc = topk_body(x, k, dim, largest, values, indices);
    td_op_leave(previous);
    return rc;
}
