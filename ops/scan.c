/*
 * scan.c — cumsum and topk, ops that look along one dim.
 *
 * cumsum is the CUMSUM primitive: inclusive prefix sums, as torch.cumsum. Integer and bool
 * inputs are cast to int64 first (PyTorch's result dtype), so a kernel sees float32, float64 or
 * int64 with out's dtype. Kernels add in order along the dim (the CPU's and ref's in double for
 * floats, devices/cpu/cpu_scan.c). A library op: the jit keeps it opaque.
 *
 * topk is the TOPK primitive, which only picks int64 positions (best first), and a gather of
 * the values at them: the values' gradient is gather's, scattered back to the chosen places.
 */
#include <stdio.h>
#include <string.h>

#include "nn_common.h"

static tide_tensor *cumsum_body(const tide_tensor *x, int dim)
{
    const char *op = "cumsum";
    if (td_check_tensor(op, "input", x) < 0)
        return NULL;
    int lo = x->ndim > 0 ? -x->ndim : -1, hi = x->ndim > 0 ? x->ndim - 1 : 0;
    if (dim < lo || dim > hi) {
        char buf[160];
        td_error("%s: dim %d is out of range for input %s (expected %d..%d)", op, dim,
                 nn_describe(buf, sizeof buf, x), lo, hi);
        return NULL;
    }
    int d = dim < 0 ? dim + (x->ndim > 0 ? x->ndim : 1) : dim;
    bool fl = tide_dtype_is_floating((tide_dtype)x->dtype);
    tide_tensor *in = fl ? tide_retain((tide_tensor *)x) : tide_cast(x, TIDE_INT64);
    if (!in)
        return NULL;
    td_meta meta = {in->ndim, {0}, (tide_dtype)in->dtype, in->device};
    memcpy(meta.shape, in->shape, sizeof(int64_t) * in->ndim);
    tide_attrs attrs = {0};
    attrs.ints[0] = d;
    attrs.nints = 1;
    tide_tensor *out = td_dispatch(TIDE_OP_CUMSUM, &meta, &in, 1, &attrs);
    tide_release(in);
    return out;
}

tide_tensor *tide_cumsum(const tide_tensor *x, int dim)
{
    TD_IN_OP("cumsum", cumsum_body(x, dim));
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
