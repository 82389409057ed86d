/*
 * views.c — ops whose result shares the input's storage: view/reshape, permute, transpose,
 * expand, slice, select, squeeze, unsqueeze. They compute a new shape/strides/offset and go
 * through td_dispatch_view, so the tracer and autograd see them like every other op.
 */
#include <string.h>

#include "dispatch.h"

static tide_attrs shape_attrs(int ndim, const int64_t *shape)
{
    tide_attrs a = {.nints = ndim};
    for (int i = 0; i < ndim; i++)
        a.ints[i] = shape[i];
    return a;
}

/* Resolves one -1 in shape against numel; checks the sizes. */
static int infer_shape(const char *op, const tide_tensor *x, int ndim, const int64_t *shape,
                       int64_t *out)
{
    if (ndim < 0 || ndim > TIDE_MAX_DIMS)
        return td_error("%s: %d dims requested; tide tensors have 0 to %d dims", op, ndim,
                        TIDE_MAX_DIMS);
    if (ndim > 0 && !shape)
        return td_error("%s: shape is NULL for %d dims", op, ndim);
    int infer = -1;
    int64_t known = 1, numel = td_numel(x->ndim, x->shape);
    for (int i = 0; i < ndim; i++) {
        out[i] = shape[i];
        if (shape[i] == -1) {
            if (infer >= 0)
                return td_error("%s: only one dim can be -1", op);
            infer = i;
        } else if (shape[i] < 0) {
            return td_error("%s: invalid size %lld in dim %d", op, (long long)shape[i], i);
        } else if (__builtin_mul_overflow(known, shape[i], &known)) {
            char s1[160];
            return td_error("%s: shape %s has more elements than an int64 can count", op,
                            td_shape_str(s1, sizeof s1, ndim, shape));
        }
    }
    char s1[160], s2[160];
    if (infer >= 0) {
        if (known == 0 || numel % known != 0)
            return td_error("%s: shape %s is invalid for an input of %lld elements (shape %s)", op,
                            td_shape_str(s1, sizeof s1, ndim, shape), (long long)numel,
                            td_shape_str(s2, sizeof s2, x->ndim, x->shape));
        out[infer] = numel / known;
    } else if (known != numel) {
        return td_error("%s: shape %s is invalid for an input of %lld elements (shape %s)", op,
                        td_shape_str(s1, sizeof s1, ndim, shape), (long long)numel,
                        td_shape_str(s2, sizeof s2, x->ndim, x->shape));
    }
    /* An empty input reshapes to any shape with a 0 in it; the other sizes still need bounds
     * so that strides computed from them stay in range. */
    return td_check_view_shape(op, ndim, out, (tide_dtype)x->dtype);
}

/* Strides that show x's elements in the new shape without copying, if any exist: dims of x
 * that are contiguous with each other form chunks, and each chunk must map onto whole new dims. */
bool td_view_strides(int xnd, const int64_t *xshape, const int64_t *xstrides, int ndim,
                     const int64_t *shape, int64_t *strides)
{
    if (xnd == 0 || td_numel(xnd, xshape) == 0) {
        td_contiguous_strides(ndim, shape, strides);
        return true;
    }
    int view_d = ndim - 1;
    int64_t chunk_base = xstrides[xnd - 1], tensor_numel = 1, view_numel = 1;
    for (int d = xnd - 1; d >= 0; d--) {
        tensor_numel *= xshape[d];
        if (d == 0 || (xshape[d - 1] != 1 && xstrides[d - 1] != tensor_numel * chunk_base)) {
            while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
                strides[view_d] = view_numel * chunk_base;
                view_numel *= shape[view_d];
                view_d--;
            }
            if (view_numel != tensor_numel)
                return false;
            if (d > 0) {
                chunk_base = xstrides[d - 1];
                tensor_numel = 1;
                view_numel = 1;
            }
        }
    }
    return view_d == -1;
}

static bool view_strides(const tide_tensor *x, int ndim, const int64_t *shape, int64_t *strides)
{
    return td_view_strides(x->ndim, x->shape, x->strides, ndim, shape, strides);
}

static tide_tensor *view_body(const tide_tensor *x, int ndim, const int64_t *shape)
{
    int64_t sh[TIDE_MAX_DIMS], st[TIDE_MAX_DIMS];
    if (td_check_tensor("view", "input", x) < 0 || infer_shape("view", x, ndim, shape, sh) < 0)
        return NULL;
    if (!view_strides(x, ndim, sh, st)) {
        char s1[160], s2[160];
        td_error("view: shape %s is not compatible with the input's shape %s and strides (the "
                 "input is not contiguous); use reshape, which copies",
                 td_shape_str(s1, sizeof s1, ndim, sh),
                 td_shape_str(s2, sizeof s2, x->ndim, x->shape));
        return NULL;
    }
    tide_attrs a = shape_attrs(ndim, sh);
    return td_dispatch_view(TIDE_OP_RESHAPE, x, ndim, sh, st, x->offset, &a);
}

tide_tensor *tide_view(const tide_tensor *x, int ndim, const int64_t *shape)
{
    TD_IN_OP("view", view_body(x, ndim, shape));
}

tide_tensor *tide_reshape(const tide_tensor *x, int ndim, const int64_t *shape)
{
    int64_t sh[TIDE_MAX_DIMS], st[TIDE_MAX_DIMS];
    if (td_check_tensor("reshape", "input", x) < 0 ||
        infer_shape("reshape", x, ndim, shape, sh) < 0)
        return NULL;
    if (view_strides(x, ndim, sh, st)) {
        tide_attrs a = shape_attrs(ndim, sh);
        return td_dispatch_view(TIDE_OP_RESHAPE, x, ndim, sh, st, x->offset, &a);
    }
    tide_tensor *c = tide_clone(x);
    tide_tensor *r = c ? tide_view(c, ndim, sh) : NULL;
    tide_release(c);
    return r;
}

tide_tensor *tide_permute(const tide_tensor *x, const int *perm)
{
    if (td_check_tensor("permute", "input", x) < 0)
        return NULL;
    if (!perm && x->ndim > 0) {
        td_error("permute: perm is NULL");
        return NULL;
    }
    int64_t sh[TIDE_MAX_DIMS], st[TIDE_MAX_DIMS];
    int seen = 0;
    tide_attrs a = {.nints = x->ndim};
    for (int i = 0; i < x->ndim; i++) {
        int d = td_normalize_dim("permute", perm[i], x->ndim);
        if (d < 0)
            return NULL;
        if (seen & (1 << d)) {
            td_error("permute: dim %d appears twice in the permutation", d);
            return NULL;
        }
        seen |= 1 << d;
        sh[i] = x->shape[d];
        st[i] = x->strides[d];
        a.ints[i] = d;
    }
    return td_dispatch_view(TIDE_OP_PERMUTE, x, x->ndim, sh, st, x->offset, &a);
}

static tide_tensor *transpose_body(const tide_tensor *x, int dim0, int dim1)
{
    if (td_check_tensor("transpose", "input", x) < 0)
        return NULL;
    int d0 = td_normalize_dim("transpose", dim0, x->ndim);
    int d1 = d0 < 0 ? -1 : td_normalize_dim("transpose", dim1, x->ndim);
    if (d1 < 0)
        return NULL;
    if (x->ndim == 0)
        return tide_retain((tide_tensor *)x);
    int perm[TIDE_MAX_DIMS];
    for (int i = 0; i < x->ndim; i++)
        perm[i] = i;
    perm[d0] = d1;
    perm[d1] = d0;
    return tide_permute(x, perm);
}

tide_tensor *tide_transpose(const tide_tensor *x, int dim0, int dim1)
{
    TD_IN_OP("transpose", transpose_body(x, dim0, dim1));
}

tide_tensor *tide_expand(const tide_tensor *x, int ndim, const int64_t *shape)
{
    if (td_check_tensor("expand", "input", x) < 0)
        return NULL;
    char s1[160], s2[160];
    if (ndim < x->ndim || ndim > TIDE_MAX_DIMS || (ndim > 0 && !shape)) {
        td_error("expand: cannot expand a tensor of %d dims to %d dims", x->ndim, ndim);
        return NULL;
    }
    int64_t sh[TIDE_MAX_DIMS], st[TIDE_MAX_DIMS];
    int lead = ndim - x->ndim;
    for (int i = 0; i < ndim; i++) {
        int j = i - lead;
        int64_t want = shape[i];
        if (j < 0) {
            if (want < 0) {
                td_error("expand: size %lld is not allowed for the new leading dim %d",
                         (long long)want, i);
                return NULL;
            }
            sh[i] = want;
            st[i] = 0;
        } else if (want == -1 || want == x->shape[j]) {
            sh[i] = x->shape[j];
            st[i] = x->strides[j];
        } else if (x->shape[j] == 1 && want >= 0) {
            sh[i] = want;
            st[i] = 0;
        } else {
            td_error("expand: the input of shape %s cannot be expanded to %s (dim %d: %lld vs "
                     "%lld; only size-1 dims expand)",
                     td_shape_str(s1, sizeof s1, x->ndim, x->shape),
                     td_shape_str(s2, sizeof s2, ndim, shape), i, (long long)x->shape[j],
                     (long long)want);
            return NULL;
        }
    }
    if (td_check_view_shape("expand", ndim, sh, (tide_dtype)x->dtype) < 0)
        return NULL;
    tide_attrs a = shape_attrs(ndim, sh);
    return td_dispatch_view(TIDE_OP_EXPAND, x, ndim, sh, st, x->offset, &a);
}

static int64_t clamp_index(int64_t i, int64_t size)
{
    if (i < 0)
        i += size;
    return i < 0 ? 0 : i > size ? size : i;
}

tide_tensor *tide_slice(const tide_tensor *x, int dim, int64_t start, int64_t end, int64_t step)
{
    if (td_check_tensor("slice", "input", x) < 0)
        return NULL;
    if (x->ndim == 0) {
        td_error("slice: cannot slice a 0-dim tensor");
        return NULL;
    }
    int d = td_normalize_dim("slice", dim, x->ndim);
    if (d < 0)
        return NULL;
    if (step <= 0) {
        td_error("slice: step must be positive, got %lld (use flip to reverse)", (long long)step);
        return NULL;
    }
    int64_t size = x->shape[d];
    /* a step past the dim's size takes at most one element, as step == size does; clamping it
     * keeps the length and stride arithmetic from overflowing (an ONNX Slice step of 2^62) */
    if (step > size)
        step = size > 0 ? size : 1;
    int64_t s = clamp_index(start, size), e = clamp_index(end, size);
    int64_t len = e > s ? (e - s + step - 1) / step : 0;
    int64_t sh[TIDE_MAX_DIMS], st[TIDE_MAX_DIMS];
    memcpy(sh, x->shape, sizeof sh);
    memcpy(st, x->strides, sizeof st);
    sh[d] = len;
    st[d] = x->strides[d] * step;
    tide_attrs a = {.nints = 4, .ints = {d, s, e, step}};
    return td_dispatch_view(TIDE_OP_SLICE, x, x->ndim, sh, st, x->offset + s * x->strides[d], &a);
}

tide_tensor *tide_select(const tide_tensor *x, int dim, int64_t index)
{
    if (td_check_tensor("select", "input", x) < 0)
        return NULL;
    if (x->ndim == 0) {
        td_error("select: cannot select from a 0-dim tensor");
        return NULL;
    }
    int d = td_normalize_dim("select", dim, x->ndim);
    if (d < 0)
        return NULL;
    int64_t size = x->shape[d];
    if (index < -size || index >= size) {
        td_error("select: index %lld is out of range for dim %d of size %lld", (long long)index,
                 d, (long long)size);
        return NULL;
    }
    if (index < 0)
        index += size;
    int64_t sh[TIDE_MAX_DIMS], st[TIDE_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < x->ndim; i++) {
        if (i == d)
            continue;
        sh[nd] = x->shape[i];
        st[nd] = x->strides[i];
        nd++;
    }
    tide_attrs a = {.nints = 2, .ints = {d, index}};
    return td_dispatch_view(TIDE_OP_SELECT, x, nd, sh, st, x->offset + index * x->strides[d], &a);
}

/* squeeze and unsqueeze only add or drop size-1 dims: a reshape that is always a view. */
static tide_tensor *reshape_view(const tide_tensor *x, int ndim, const int64_t *shape)
{
    int64_t st[TIDE_MAX_DIMS];
    if (!view_strides(x, ndim, shape, st)) { /* cannot happen for size-1 changes */
        td_error("reshape: internal error: no view strides");
        return NULL;
    }
    tide_attrs a = shape_attrs(ndim, shape);
    return td_dispatch_view(TIDE_OP_RESHAPE, x, ndim, shape, st, x->offset, &a);
}

static tide_tensor *squeeze_body(const tide_tensor *x, int dim)
{
    if (td_check_tensor("squeeze", "input", x) < 0)
        return NULL;
    int d = td_normalize_dim("squeeze", dim, x->ndim);
    if (d < 0)
        return NULL;
    if (x->ndim == 0 || x->shape[d] != 1) /* as PyTorch: squeezing a larger dim is a no-op */
        return tide_retain((tide_tensor *)x);
    int64_t sh[TIDE_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < x->ndim; i++)
        if (i != d)
            sh[nd++] = x->shape[i];
    return reshape_view(x, nd, sh);
}

tide_tensor *tide_squeeze(const tide_tensor *x, int dim)
{
    TD_IN_OP("squeeze", squeeze_body(x, dim));
}

static tide_tensor *squeeze_all_body(const tide_tensor *x)
{
    if (td_check_tensor("squeeze", "input", x) < 0)
        return NULL;
    int64_t sh[TIDE_MAX_DIMS];
    int nd = 0;
    for (int i = 0; i < x->ndim; i++)
        if (x->shape[i] != 1)
            sh[nd++] = x->shape[i];
    return reshape_view(x, nd, sh);
}

tide_tensor *tide_squeeze_all(const tide_tensor *x)
{
    TD_IN_OP("squeeze_all", squeeze_all_body(x));
}

static tide_tensor *unsqueeze_body(const tide_tensor *x, int dim)
{
    if (td_check_tensor("unsqueeze", "input", x) < 0)
        return NULL;
    if (x->ndim >= TIDE_MAX_DIMS) {
        td_error("unsqueeze: the input already has %d dims, the most a tensor can have",
                 x->ndim);
        return NULL;
    }
    if (dim < -x->ndim - 1 || dim > x->ndim) {
        td_error("unsqueeze: dim %d out of range for a tensor of %d dims (expected %d..%d)", dim,
                 x->ndim, -x->ndim - 1, x->ndim);
        return NULL;
    }
    int d = dim < 0 ? dim + x->ndim + 1 : dim;
    int64_t sh[TIDE_MAX_DIMS];
    for (int i = 0, j = 0; i <= x->ndim; i++)
        sh[i] = i == d ? 1 : x->shape[j++];
    return reshape_view(x, x->ndim + 1, sh);
}

tide_tensor *tide_unsqueeze(const tide_tensor *x, int dim)
{
    TD_IN_OP("unsqueeze", unsqueeze_body(x, dim));
}
