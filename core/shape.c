/* shape.c — shapes, strides, broadcasting and the checks on sizes a user gives. */
#include <stdio.h>

#include "tensor.h"

int64_t td_numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    return n;
}

void td_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides)
{
    int64_t s = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        strides[i] = s;
        s *= shape[i] > 1 ? shape[i] : 1;
    }
}

int64_t td_layout_span(int ndim, const int64_t *shape, const int64_t *strides)
{
    int64_t reach = 0;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] == 0)
            return 0;
        reach += (shape[i] - 1) * strides[i];
    }
    return reach + 1;
}

/* Row-major order with no gaps; size-1 dims may have any stride, and an empty layout is
 * contiguous whatever its strides (PyTorch agrees on both). */
bool td_dense_layout(int ndim, const int64_t *shape, const int64_t *strides)
{
    int64_t expected = 1;
    for (int i = ndim - 1; i >= 0; i--) {
        if (shape[i] == 0)
            return true;
        if (shape[i] == 1)
            continue;
        if (strides[i] != expected)
            return false;
        expected *= shape[i];
    }
    return true;
}

bool td_is_contiguous(const tide_tensor *t) { return td_dense_layout(t->ndim, t->shape, t->strides); }

int td_broadcast_shape(int na, const int64_t *a, int nb, const int64_t *b, int *nout,
                       int64_t *out)
{
    int n = na > nb ? na : nb;
    for (int i = 0; i < n; i++) {
        int ia = na - n + i, ib = nb - n + i;
        int64_t sa = ia >= 0 ? a[ia] : 1, sb = ib >= 0 ? b[ib] : 1;
        if (sa != sb && sa != 1 && sb != 1)
            return -1;
        out[i] = sa == 1 ? sb : sa;
    }
    *nout = n;
    return 0;
}

void td_broadcast_strides(const tide_tensor *t, int ndim, const int64_t *shape, int64_t *strides)
{
    int lead = ndim - t->ndim;
    for (int i = 0; i < ndim; i++) {
        int j = i - lead;
        strides[i] = (j < 0 || (t->shape[j] == 1 && shape[i] != 1)) ? 0 : t->strides[j];
    }
}

int td_normalize_dim(const char *op, int dim, int ndim)
{
    int lo = ndim > 0 ? -ndim : -1, hi = ndim > 0 ? ndim - 1 : 0;
    if (dim < lo || dim > hi) {
        if (dim == TIDE_ALL_DIMS)
            return td_error("%s: dim is TIDE_ALL_DIMS where one dim is needed", op);
        return td_error("%s: dim %d out of range for a tensor of %d dims (expected %d..%d)", op,
                        dim, ndim, lo, hi);
    }
    return dim < 0 ? dim + (ndim > 0 ? ndim : 1) : dim;
}

char *td_shape_str(char *buf, size_t size, int ndim, const int64_t *shape)
{
    size_t len = 0;
    len += (size_t)snprintf(buf, size, "[");
    for (int i = 0; i < ndim && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (len < size)
        snprintf(buf + len, size - len, "]");
    return buf;
}

/* Sizes must be non-negative and unit_size times every non-zero size at most 2^limit_log2 units. */
static int check_sizes(const char *op, int ndim, const int64_t *shape, tide_dtype dtype,
                       uint64_t unit_size, int limit_log2, const char *unit)
{
    if (!td_dtype_valid(dtype))
        return td_error("%s: invalid dtype %d", op, (int)dtype);
    if (ndim < 0 || ndim > TIDE_MAX_DIMS)
        return td_error("%s: %d dims requested; tide tensors have 0 to %d dims", op, ndim,
                        TIDE_MAX_DIMS);
    if (ndim > 0 && !shape)
        return td_error("%s: shape is NULL for %d dims", op, ndim);
    uint64_t total = unit_size;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0) {
            char s[160];
            return td_error("%s: negative size %lld in dim %d of shape %s", op,
                            (long long)shape[i], i, td_shape_str(s, sizeof s, ndim, shape));
        }
    }
    /* Zero-size dims count as 1: an empty tensor still gets strides from the other sizes, and
     * those must not overflow either. */
    for (int i = 0; i < ndim; i++) {
        uint64_t size = shape[i] > 1 ? (uint64_t)shape[i] : 1;
        if (total > ((uint64_t)1 << limit_log2) / size) {
            char s[160];
            return td_error("%s: shape %s of %s is too large (more than 2^%d %s)", op,
                            td_shape_str(s, sizeof s, ndim, shape), tide_dtype_name(dtype),
                            limit_log2, unit);
        }
        total *= size;
    }
    return 0;
}

/* 2^47 bytes (128 TiB) is beyond any machine's memory and keeps every later size computation
 * far from overflow; smaller requests that still exceed the memory there is fail in the
 * device's allocator. */
int td_check_shape(const char *op, int ndim, const int64_t *shape, tide_dtype dtype)
{
    if (!td_dtype_valid(dtype)) /* before td_dtype_sizes is indexed with it */
        return td_error("%s: invalid dtype %d", op, (int)dtype);
    return check_sizes(op, ndim, shape, dtype, td_dtype_sizes[dtype], 47, "bytes");
}

/* A view owns no memory, so only its element count is bounded (strides stay in int64). */
int td_check_view_shape(const char *op, int ndim, const int64_t *shape, tide_dtype dtype)
{
    return check_sizes(op, ndim, shape, dtype, 1, 62, "elements");
}
