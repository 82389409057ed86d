/*
 * creation.c — tensors made from nothing or from the caller's memory: empty, zeros, ones, full,
 * arange, linspace, eye, scalars and wrapped numbers, from_data; the thread's default device;
 * and reading a tensor back. A tensor is made on its device and filled there by the device's
 * kernel (FILL, IOTA) through the dispatcher; from_data writes through the device's write.
 */
#include <math.h>
#include <string.h>

#include "dispatch.h"

/* NULL: the CPU. Per thread, as grad mode and tracing are. */
static _Thread_local tide_device *default_device;

tide_device *td_default_device(void)
{
    return default_device ? default_device : tide_cpu_device();
}

tide_device *td_creation_device(const char *op, const char *name)
{
    return name ? td_device_find(op, name) : td_default_device();
}

int tide_set_default_device(const char *device)
{
    tide_device *dev = td_device_find("set_default_device", device);
    if (!dev)
        return -1;
    default_device = dev;
    return 0;
}

const char *tide_get_default_device(void) { return td_default_device()->name; }

tide_tensor *td_full_on(tide_device *dev, const char *op, int ndim, const int64_t *shape,
                        double value, tide_dtype dtype)
{
    if (!dev || td_check_shape(op, ndim, shape, dtype) < 0)
        return NULL;
    td_meta meta = {ndim, {0}, dtype, dev};
    if (ndim > 0)
        memcpy(meta.shape, shape, sizeof(int64_t) * (size_t)ndim);
    tide_attrs attrs = {.values = {value}};
    /* an allocation failure names op (zeros, ones, full), not the FILL primitive */
    TD_IN_OP(op, td_dispatch(TIDE_OP_FILL, &meta, NULL, 0, &attrs));
}

static tide_tensor *filled(const char *op, const char *device, int ndim, const int64_t *shape,
                           double value, tide_dtype dtype)
{
    return td_full_on(td_creation_device(op, device), op, ndim, shape, value, dtype);
}

tide_tensor *tide_empty_on(const char *device, int ndim, const int64_t *shape, tide_dtype dtype)
{
    /* Not a traced op: tracing treats it as the allocation of a later op's output. */
    tide_device *dev = td_creation_device("empty", device);
    return dev ? td_tensor_new("empty", dev, ndim, shape, dtype) : NULL;
}

tide_tensor *tide_zeros_on(const char *device, int ndim, const int64_t *shape, tide_dtype dtype)
{
    return filled("zeros", device, ndim, shape, 0, dtype);
}

tide_tensor *tide_ones_on(const char *device, int ndim, const int64_t *shape, tide_dtype dtype)
{
    return filled("ones", device, ndim, shape, 1, dtype);
}

tide_tensor *tide_full_on(const char *device, int ndim, const int64_t *shape, double value,
                          tide_dtype dtype)
{
    return filled("full", device, ndim, shape, value, dtype);
}

tide_tensor *tide_empty(int ndim, const int64_t *shape, tide_dtype dtype)
{
    return tide_empty_on(NULL, ndim, shape, dtype);
}

tide_tensor *tide_zeros(int ndim, const int64_t *shape, tide_dtype dtype)
{
    return tide_zeros_on(NULL, ndim, shape, dtype);
}

tide_tensor *tide_ones(int ndim, const int64_t *shape, tide_dtype dtype)
{
    return tide_ones_on(NULL, ndim, shape, dtype);
}

tide_tensor *tide_full(int ndim, const int64_t *shape, double value, tide_dtype dtype)
{
    return tide_full_on(NULL, ndim, shape, value, dtype);
}

/* A 0-dim CPU tensor, whatever the default device: it goes with any device. */
tide_tensor *tide_scalar(double value, tide_dtype dtype)
{
    return td_full_on(tide_cpu_device(), "scalar", 0, NULL, value, dtype);
}

static tide_tensor *iota(tide_device *dev, const char *op, int64_t n, tide_dtype dtype,
                         const tide_attrs *attrs)
{
    if (!dev || td_check_shape(op, 1, &n, dtype) < 0)
        return NULL;
    td_meta meta = {1, {n}, dtype, dev};
    TD_IN_OP(op, td_dispatch(TIDE_OP_IOTA, &meta, NULL, 0, attrs));
}

tide_tensor *td_arange_on(tide_device *dev, double start, double end, double step,
                          tide_dtype dtype)
{
    if (!isfinite(start) || !isfinite(end) || !isfinite(step)) {
        td_error("arange: start %g, end %g and step %g must be finite", start, end, step);
        return NULL;
    }
    if (step == 0) {
        td_error("arange: step must be non-zero");
        return NULL;
    }
    if ((end - start) / step < 0) {
        td_error("arange: step %g goes away from end (start %g, end %g)", step, start, end);
        return NULL;
    }
    double count = ceil((end - start) / step);
    if (count > 9.0e18) {
        td_error("arange: %g elements are too many", count);
        return NULL;
    }
    tide_attrs attrs = {.values = {start, step, end}};
    return iota(dev, "arange", (int64_t)count, dtype, &attrs);
}

tide_tensor *tide_arange_on(const char *device, double start, double end, double step,
                            tide_dtype dtype)
{
    tide_device *dev = td_creation_device("arange", device);
    return dev ? td_arange_on(dev, start, end, step, dtype) : NULL;
}

tide_tensor *tide_arange(double start, double end, double step, tide_dtype dtype)
{
    return tide_arange_on(NULL, start, end, step, dtype);
}

static tide_tensor *linspace_on_body(const char *device, double start, double end, int64_t steps,
                                     tide_dtype dtype)
{
    tide_device *dev = td_creation_device("linspace", device);
    if (!dev)
        return NULL;
    if (steps < 0) {
        td_error("linspace: steps must be non-negative, got %lld", (long long)steps);
        return NULL;
    }
    if (!isfinite(start) || !isfinite(end)) {
        td_error("linspace: start %g and end %g must be finite", start, end);
        return NULL;
    }
    double step = steps > 1 ? (end - start) / (double)(steps - 1) : 0;
    /* Symmetric: the second half counts back from end so the last value is exactly end; one
     * step is just start, as PyTorch. */
    tide_attrs attrs = {.nints = 1, .ints = {steps > 1}, .values = {start, step, end}};
    return iota(dev, "linspace", steps, dtype, &attrs);
}

tide_tensor *tide_linspace_on(const char *device, double start, double end, int64_t steps,
                              tide_dtype dtype)
{
    TD_IN_OP("linspace", linspace_on_body(device, start, end, steps, dtype));
}

tide_tensor *tide_linspace(double start, double end, int64_t steps, tide_dtype dtype)
{
    return tide_linspace_on(NULL, start, end, steps, dtype);
}

/* base ** linspace(start, end, steps), computed in float64 and rounded once to dtype. */
static tide_tensor *logspace_on_body(const char *device, double start, double end, int64_t steps,
                                     double base, tide_dtype dtype)
{
    if (!isfinite(base) || steps < 0 || !isfinite(start) || !isfinite(end)) {
        td_error("logspace: start %g, end %g and base %g must be finite and steps (%lld) "
                 "non-negative", start, end, base, (long long)steps);
        return NULL;
    }
    tide_tensor *exponent = tide_linspace_on(device, start, end, steps, TIDE_FLOAT64);
    tide_tensor *b = exponent ? tide_number(base) : NULL;
    tide_tensor *p = b ? tide_pow(b, exponent) : NULL;
    tide_tensor *r = p ? tide_cast(p, dtype) : NULL;
    tide_release(exponent);
    tide_release(b);
    tide_release(p);
    return r;
}

tide_tensor *tide_logspace_on(const char *device, double start, double end, int64_t steps,
                              double base, tide_dtype dtype)
{
    TD_IN_OP("logspace", logspace_on_body(device, start, end, steps, base, dtype));
}

static tide_tensor *eye_on_body(const char *device, int64_t n, int64_t m, tide_dtype dtype)
{
    int64_t shape[2] = {n, m};
    tide_tensor *t = filled("eye", device, 2, shape, 0, dtype);
    if (!t || n == 0 || m == 0)
        return t;
    /* The diagonal is a 1-D view with stride m + 1. */
    int64_t len = n < m ? n : m, stride = m + 1;
    tide_tensor *diag = td_tensor_view(t, 1, &len, &stride, 0);
    if (!diag || tide_fill_(diag, 1) < 0) {
        tide_release(diag);
        tide_release(t);
        return NULL;
    }
    tide_release(diag);
    return t;
}

tide_tensor *tide_eye_on(const char *device, int64_t n, int64_t m, tide_dtype dtype)
{
    TD_IN_OP("eye", eye_on_body(device, n, m, dtype));
}

tide_tensor *tide_eye(int64_t n, int64_t m, tide_dtype dtype) { return tide_eye_on(NULL, n, m, dtype); }

static tide_tensor *wrapped(const void *value, tide_dtype dtype)
{
    tide_tensor *t = td_from_data_on(tide_cpu_device(), value, 0, NULL, dtype);
    if (t)
        t->flags |= TD_WRAPPED_NUMBER;
    return t;
}

tide_tensor *tide_number(double value) { return wrapped(&value, TIDE_FLOAT64); }
tide_tensor *tide_integer(int64_t value) { return wrapped(&value, TIDE_INT64); }

tide_tensor *tide_from_data(const void *data, int ndim, const int64_t *shape, tide_dtype dtype)
{
    return tide_from_data_on(NULL, data, ndim, shape, dtype);
}

static tide_tensor *from_data_on_body(const char *device, const void *data, int ndim,
                                      const int64_t *shape, tide_dtype dtype)
{
    tide_device *dev = td_creation_device("from_data", device);
    return dev ? td_from_data_on(dev, data, ndim, shape, dtype) : NULL;
}

tide_tensor *tide_from_data_on(const char *device, const void *data, int ndim,
                               const int64_t *shape, tide_dtype dtype)
{
    TD_IN_OP("from_data", from_data_on_body(device, data, ndim, shape, dtype));
}

tide_tensor *td_from_data_on(tide_device *dev, const void *data, int ndim, const int64_t *shape,
                             tide_dtype dtype)
{
    if (td_check_shape("from_data", ndim, shape, dtype) < 0)
        return NULL;
    size_t nbytes = (size_t)td_numel(ndim, shape) * td_dtype_sizes[dtype];
    if (!data && nbytes) {
        td_error("from_data: data is NULL");
        return NULL;
    }
    tide_tensor *t = td_tensor_new("from_data", dev, ndim, shape, dtype);
    if (t && nbytes && dev->write(dev, t->storage->buffer, 0, data, nbytes) < 0) {
        tide_release(t);
        return NULL;
    }
    return t;
}

int tide_to_buffer(const tide_tensor *t, void *dst, size_t dst_bytes)
{
    if (td_check_tensor("to_buffer", "tensor", t) < 0 || td_materialize(t) < 0)
        return -1;
    size_t nbytes;
    if (__builtin_mul_overflow((size_t)td_numel(t->ndim, t->shape), td_dtype_sizes[t->dtype],
                               &nbytes)) {
        char s[160];
        return td_error("to_buffer: the %s tensor of shape %s has more bytes than memory can hold",
                        tide_dtype_name((tide_dtype)t->dtype),
                        td_shape_str(s, sizeof s, t->ndim, t->shape));
    }
    if (!nbytes)
        return 0;
    if (!dst)
        return td_error("to_buffer: destination is NULL");
    if (dst_bytes < nbytes) {
        char s[160];
        return td_error("to_buffer: the %s tensor of shape %s needs %zu bytes; the buffer has %zu",
                        tide_dtype_name((tide_dtype)t->dtype),
                        td_shape_str(s, sizeof s, t->ndim, t->shape), nbytes, dst_bytes);
    }
    tide_tensor *c = tide_contiguous(t);
    if (!c)
        return -1;
    tide_device *dev = c->device;
    int rc = dev->synchronize(dev);
    if (rc == 0)
        rc = dev->read(dev, c->storage->buffer, (size_t)c->offset * td_dtype_sizes[c->dtype], dst,
                       nbytes);
    tide_release(c);
    return rc;
}

int tide_item(const tide_tensor *t, double *value)
{
    if (td_check_tensor("item", "tensor", t) < 0)
        return -1;
    if (!value)
        return td_error("item: value is NULL");
    if (td_numel(t->ndim, t->shape) != 1) {
        char s[160];
        return td_error("item: only a one-element tensor has an item; this one has shape %s",
                        td_shape_str(s, sizeof s, t->ndim, t->shape));
    }
    tide_tensor *d = tide_cast(t, TIDE_FLOAT64);
    int rc = d ? tide_to_buffer(d, value, sizeof *value) : -1;
    tide_release(d);
    return rc;
}

/* Integer and bool tensors are cast to int64 (exact); a floating item is read as a double and
 * must be a whole number in [-2^63, 2^63), which a double represents exactly. */
int tide_item_int64(const tide_tensor *t, int64_t *value)
{
    if (td_check_tensor("item_int64", "tensor", t) < 0)
        return -1;
    if (!value)
        return td_error("item_int64: value is NULL");
    if (td_numel(t->ndim, t->shape) != 1) {
        char s[160];
        return td_error("item_int64: only a one-element tensor has an item; this one has shape %s",
                        td_shape_str(s, sizeof s, t->ndim, t->shape));
    }
    if (tide_dtype_is_floating((tide_dtype)t->dtype)) {
        double v;
        if (tide_item(t, &v) < 0)
            return -1;
        if (!(v >= -0x1p63 && v < 0x1p63) || v != (double)(int64_t)v)
            return td_error("item_int64: the %s item %.17g is not an int64 (a whole number in "
                            "[-2^63, 2^63))", tide_dtype_name((tide_dtype)t->dtype), v);
        *value = (int64_t)v;
        return 0;
    }
    tide_tensor *d = tide_cast(t, TIDE_INT64);
    int rc = d ? tide_to_buffer(d, value, sizeof *value) : -1;
    tide_release(d);
    return rc;
}
