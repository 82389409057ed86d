/*
 * scan.c — cumsum, the CUMSUM primitive: inclusive prefix sums along one dim, as torch.cumsum.
 * Integer and bool inputs are cast to int64 first (PyTorch's result dtype), so a kernel sees
 * float32, float64 or int64 with out's dtype. Kernels add in order along the dim (the CPU's and
 * ref's in double for floats, devices/cpu/cpu_scan.c). A library op: the jit keeps it opaque.
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
    bool fl = x->dtype == TIDE_FLOAT32 || x->dtype == TIDE_FLOAT64;
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
