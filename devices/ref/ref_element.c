/*
 * ref_element.c — one element at a time: reading, writing and converting elements of any dtype
 * at any storage offset, and the index arithmetic that turns a row-major position into a
 * storage offset. Every kernel of the reference device is built on these.
 */
#include <string.h>

#include "../../core/half.h"
#include "ref_internal.h"

void *ref_at(const tide_tensor *t, int64_t off)
{
    /* td_tensor_data: the host address of the element at t's own offset (any host device) */
    char *at_offset = td_tensor_data(t);
    return at_offset + (off - t->offset) * (int64_t)td_dtype_sizes[t->dtype];
}

double ref_get_f(const tide_tensor *t, int64_t off)
{
    const void *p = ref_at(t, off);
    switch (t->dtype) {
    case TIDE_FLOAT32: return *(const float *)p;
    case TIDE_FLOAT64: return *(const double *)p;
    case TIDE_FLOAT16: return td_f16_to_f32(*(const uint16_t *)p);
    case TIDE_BFLOAT16: return td_bf16_to_f32(*(const uint16_t *)p);
    default: return (double)ref_get_i(t, off);
    }
}

int64_t ref_get_i(const tide_tensor *t, int64_t off)
{
    const void *p = ref_at(t, off);
    switch (t->dtype) {
    case TIDE_INT32: return *(const int32_t *)p;
    case TIDE_INT64: return *(const int64_t *)p;
    case TIDE_UINT8: return *(const uint8_t *)p;
    case TIDE_BOOL: return *(const uint8_t *)p != 0;
    default: return (int64_t)ref_get_f(t, off); /* not reached: integer dtypes only */
    }
}

void ref_set_f(tide_tensor *t, int64_t off, double v)
{
    void *p = ref_at(t, off);
    switch (t->dtype) {
    case TIDE_FLOAT32: *(float *)p = (float)v; break;
    /* through float32, as every cast to the 16-bit floats goes (core/half.h) */
    case TIDE_FLOAT16: *(uint16_t *)p = td_f32_to_f16((float)v); break;
    case TIDE_BFLOAT16: *(uint16_t *)p = td_f32_to_bf16((float)v); break;
    default: *(double *)p = v; break;
    }
}

void ref_set_i(tide_tensor *t, int64_t off, int64_t v)
{
    void *p = ref_at(t, off);
    switch (t->dtype) {
    case TIDE_INT32: *(int32_t *)p = (int32_t)(uint32_t)(uint64_t)v; break;
    case TIDE_INT64: *(int64_t *)p = v; break;
    case TIDE_UINT8: *(uint8_t *)p = (uint8_t)(uint64_t)v; break;
    default: *(uint8_t *)p = v != 0; break; /* bool */
    }
}

/* Float to integer: C leaves a value that does not fit undefined; tide defines it as the
 * integer minimum (what x86's conversion instructions answer), NaN and inf included. */
static int64_t float_to_int(double v, int dtype)
{
    if (dtype == TIDE_INT32)
        return (v > -2147483649.0 && v < 2147483648.0) ? (int32_t)v : INT32_MIN;
    /* int64, and uint8, which takes the low byte of the int64 value */
    return (v >= -9223372036854775808.0 && v < 9223372036854775808.0) ? (int64_t)v : INT64_MIN;
}

void ref_store_double(tide_tensor *t, int64_t off, double v)
{
    if (ref_is_float(t->dtype))
        ref_set_f(t, off, v);
    else if (t->dtype == TIDE_BOOL)
        ref_set_i(t, off, v != 0); /* NaN != 0: true */
    else
        ref_set_i(t, off, float_to_int(v, t->dtype));
}

void ref_convert(tide_tensor *dst, int64_t doff, const tide_tensor *src, int64_t soff)
{
    if (dst->dtype == src->dtype) { /* bytes, as they are (a NaN keeps its payload) */
        memcpy(ref_at(dst, doff), ref_at(src, soff), td_dtype_sizes[dst->dtype]);
        return;
    }
    if (ref_is_float(src->dtype)) {
        ref_store_double(dst, doff, ref_get_f(src, soff));
        return;
    }
    int64_t v = ref_get_i(src, soff);
    if (dst->dtype == TIDE_FLOAT32 || td_dtype_is_half(dst->dtype))
        ref_set_f(dst, doff, (double)(float)v); /* through float32 exactly as the CPU does */
    else if (dst->dtype == TIDE_FLOAT64)
        *(double *)ref_at(dst, doff) = (double)v;
    else
        ref_set_i(dst, doff, v);
}

int64_t ref_numel(const tide_tensor *t) { return td_numel(t->ndim, t->shape); }

void ref_unflatten(int ndim, const int64_t *shape, int64_t flat, int64_t *idx)
{
    for (int d = ndim - 1; d >= 0; d--) {
        idx[d] = shape[d] ? flat % shape[d] : 0;
        flat = shape[d] ? flat / shape[d] : 0;
    }
}

int64_t ref_offset_bcast(const tide_tensor *t, int ndim, const int64_t *idx)
{
    int64_t off = t->offset;
    int lead = ndim - t->ndim;
    for (int d = 0; d < t->ndim; d++)
        if (t->shape[d] != 1)
            off += idx[lead + d] * t->strides[d];
    return off;
}

int64_t ref_offset(const tide_tensor *t, const int64_t *idx)
{
    return ref_offset_bcast(t, t->ndim, idx);
}

int ref_no_kernel(tide_op op, int dtype)
{
    return td_error("ref: %s has no kernel for dtype %s", tide_op_name(op),
                    tide_dtype_name((tide_dtype)dtype));
}
