/* tensor.c — tensors and their storage: creation, views, refcounts, the read-only queries. */
#include <stdlib.h>
#include <string.h>

#include "tensor.h"

tide_storage *td_storage_new(tide_device *dev, size_t nbytes)
{
    tide_storage *s = td_malloc(sizeof *s);
    if (!s)
        return NULL;
    s->buffer = dev->alloc(dev, nbytes);
    if (!s->buffer) {
        free(s);
        return NULL;
    }
    s->refcount = 1;
    s->device = dev;
    s->nbytes = nbytes;
    s->borrowed = false;
    s->release = NULL;
    s->release_ctx = NULL;
    s->version = 0;
    return s;
}

void td_storage_release(tide_storage *s)
{
    if (!s || td_ref_dec(&s->refcount) != 0)
        return;
    if (!s->borrowed)
        s->device->free(s->device, s->buffer, s->nbytes);
    else if (s->release)
        s->release(s->buffer, s->release_ctx);
    free(s);
}

static tide_tensor *tensor_alloc(void)
{
    tide_tensor *t = td_malloc(sizeof *t);
    if (!t)
        return NULL;
    t->refcount = 1;
    t->flags = 0;
    t->offset = 0;
    t->grad_fn = NULL;
    t->grad = NULL;
    t->trace_node = NULL;
    return t;
}

tide_tensor *td_tensor_new(const char *op, tide_device *dev, int ndim, const int64_t *shape,
                           tide_dtype dtype)
{
    if (td_check_shape(op, ndim, shape, dtype) < 0)
        return NULL;
    tide_tensor *t = tensor_alloc();
    if (!t) {
        td_error("%s: out of memory for a tensor header", op);
        return NULL;
    }
    t->dtype = (uint8_t)dtype;
    t->ndim = (uint8_t)ndim;
    for (int i = 0; i < ndim; i++)
        t->shape[i] = shape[i];
    td_contiguous_strides(ndim, shape, t->strides);
    t->device = dev;
    size_t nbytes = (size_t)td_numel(ndim, shape) * td_dtype_sizes[dtype];
    t->storage = td_storage_new(dev, nbytes);
    if (!t->storage) {
        char s[160];
        td_error("%s: out of memory allocating %zu bytes for a %s tensor of shape %s on %s "
                 "(host memory cap %zu MiB: TIDE_MAX_MEMORY or tide_set_memory_limit)", op,
                 nbytes, tide_dtype_name(dtype), td_shape_str(s, sizeof s, ndim, shape),
                 dev->name, td_memory_cap() >> 20);
        free(t);
        return NULL;
    }
    return t;
}

tide_tensor *td_tensor_view(const tide_tensor *base, int ndim, const int64_t *shape,
                            const int64_t *strides, int64_t offset)
{
    tide_tensor *t = tensor_alloc();
    if (!t) {
        td_error("view: out of memory for a tensor header");
        return NULL;
    }
    t->dtype = base->dtype;
    t->ndim = (uint8_t)ndim;
    memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    memcpy(t->strides, strides, sizeof(int64_t) * (size_t)ndim);
    t->offset = offset;
    t->device = base->device;
    t->storage = base->storage;
    if (t->storage)
        td_ref_inc(&t->storage->refcount);
    return t;
}

tide_tensor *td_tensor_narrow0(const tide_tensor *t, int64_t i0, int64_t i1)
{
    int64_t shape[TIDE_MAX_DIMS];
    memcpy(shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    shape[0] = i1 - i0;
    return td_tensor_view(t, t->ndim, shape, t->strides, t->offset + i0 * t->strides[0]);
}

void *td_tensor_data(const tide_tensor *t)
{
    if (!t->storage)
        return NULL;
    tide_device *dev = t->storage->device;
    char *base = dev->host_buffers ? t->storage->buffer
                                               : dev->host_ptr(dev, t->storage->buffer);
    return base ? base + t->offset * (int64_t)td_dtype_sizes[t->dtype] : NULL;
}

tide_tensor *tide_retain(tide_tensor *t)
{
    if (t)
        td_ref_inc(&t->refcount);
    return t;
}

void tide_release(tide_tensor *t)
{
    if (!t || td_ref_dec(&t->refcount) != 0)
        return;
    td_storage_release(t->storage);
    tide_release(t->grad);
    td_grad_fn_release(t->grad_fn);
    free(t);
}

/* ---- wrapping a caller's buffer ---------------------------------------------------------- */

tide_tensor *tide_wrap(void *data, size_t nbytes, int ndim, const int64_t *shape,
                       const int64_t *strides, tide_dtype dtype, tide_release_fn release,
                       void *ctx)
{
    if (!data) {
        td_error("wrap: data is NULL");
        return NULL;
    }
    if (td_check_shape("wrap", ndim, shape, dtype) < 0)
        return NULL;
    int64_t st[TIDE_MAX_DIMS];
    if (strides)
        memcpy(st, strides, sizeof(int64_t) * (size_t)ndim);
    else
        td_contiguous_strides(ndim, shape, st);
    /* Every element must lie inside the buffer. td_check_shape bounded numel, but strides are
     * the caller's: do the span arithmetic in a way that cannot overflow. */
    uint64_t last = 0, esize = td_dtype_sizes[dtype], limit = nbytes / esize;
    bool empty = td_numel(ndim, shape) == 0, fits = true;
    for (int i = 0; i < ndim && !empty; i++) {
        if (st[i] < 0) {
            td_error("wrap: negative stride %lld in dim %d", (long long)st[i], i);
            return NULL;
        }
        uint64_t extent = (uint64_t)(shape[i] - 1);
        if (st[i] > 0 && extent > (limit - last) / (uint64_t)st[i])
            fits = false;
        else
            last += extent * (uint64_t)st[i];
    }
    if (!empty && (!fits || last + 1 > limit)) {
        char s[160];
        td_error("wrap: a %s tensor of shape %s with these strides does not fit in the %zu-byte "
                 "buffer",
                 tide_dtype_name(dtype), td_shape_str(s, sizeof s, ndim, shape), nbytes);
        return NULL;
    }
    tide_storage *s = td_malloc(sizeof *s);
    tide_tensor *t = tensor_alloc();
    if (!s || !t) {
        free(s);
        free(t);
        td_error("wrap: out of memory for a tensor header");
        return NULL;
    }
    s->refcount = 1;
    s->device = tide_cpu_device();
    s->buffer = data;
    s->nbytes = nbytes;
    s->borrowed = true;
    s->release = release;
    s->release_ctx = ctx;
    s->version = 0;
    t->dtype = (uint8_t)dtype;
    t->ndim = (uint8_t)ndim;
    memcpy(t->shape, shape, sizeof(int64_t) * (size_t)ndim);
    memcpy(t->strides, st, sizeof(int64_t) * (size_t)ndim);
    t->device = s->device;
    t->storage = s;
    return t;
}

/* ---- queries ----------------------------------------------------------------------------- */

int tide_ndim(const tide_tensor *t) { return t ? t->ndim : 0; }

int64_t tide_size(const tide_tensor *t, int dim)
{
    if (!t) {
        td_error("size: tensor is NULL");
        return -1;
    }
    if (t->ndim == 0) {
        td_error("size: a 0-dim tensor has no dim %d", dim);
        return -1;
    }
    int d = td_normalize_dim("size", dim, t->ndim);
    return d < 0 ? -1 : t->shape[d];
}

const int64_t *tide_shape(const tide_tensor *t) { return t ? t->shape : NULL; }
const int64_t *tide_strides(const tide_tensor *t) { return t ? t->strides : NULL; }
int64_t tide_offset(const tide_tensor *t) { return t ? t->offset : 0; }
int64_t tide_numel(const tide_tensor *t) { return t ? td_numel(t->ndim, t->shape) : 0; }
tide_dtype tide_get_dtype(const tide_tensor *t) { return t ? (tide_dtype)t->dtype : TIDE_FLOAT32; }
bool tide_is_contiguous(const tide_tensor *t) { return t && td_is_contiguous(t); }
const char *tide_device_name(const tide_tensor *t) { return t ? t->device->name : NULL; }
const void *tide_data_ptr(const tide_tensor *t) { return t ? td_tensor_data(t) : NULL; }
void *tide_mutable_data_ptr(tide_tensor *t) { return t ? td_tensor_data(t) : NULL; }

bool tide_shares_storage(const tide_tensor *a, const tide_tensor *b)
{
    return a && b && a->storage && a->storage == b->storage;
}
