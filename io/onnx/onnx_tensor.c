/*
 * onnx_tensor.c — ONNX TensorProtos as tide tensors: the dtype map, the element data from
 * raw_data, the typed fields or an external file (confined to the model's folder), and
 * tide_onnx_load_tensor for the .pb files of the ONNX test data.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_internal.h"

int onnx_dtype(int32_t t)
{
    switch (t) {
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT: return TIDE_FLOAT32;
    case ONNX__TENSOR_PROTO__DATA_TYPE__DOUBLE: return TIDE_FLOAT64;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT32: return TIDE_INT32;
    case ONNX__TENSOR_PROTO__DATA_TYPE__INT64: return TIDE_INT64;
    case ONNX__TENSOR_PROTO__DATA_TYPE__UINT8: return TIDE_UINT8;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BOOL: return TIDE_BOOL;
    case ONNX__TENSOR_PROTO__DATA_TYPE__FLOAT16: return TIDE_FLOAT16;
    case ONNX__TENSOR_PROTO__DATA_TYPE__BFLOAT16: return TIDE_BFLOAT16;
    default: return -1;
    }
}

const char *onnx_dtype_name(int32_t t)
{
    static const char *const names[] = {"UNDEFINED", "FLOAT",  "UINT8",     "INT8",      "UINT16",
                                        "INT16",     "INT32",  "INT64",     "STRING",    "BOOL",
                                        "FLOAT16",   "DOUBLE", "UINT32",    "UINT64",    "COMPLEX64",
                                        "COMPLEX128", "BFLOAT16"};
    return t >= 0 && t <= 16 ? names[t] : "an unknown type";
}

static size_t elem_size(tide_dtype d)
{
    switch (d) {
    case TIDE_FLOAT64: case TIDE_INT64: return 8;
    case TIDE_FLOAT32: case TIDE_INT32: return 4;
    case TIDE_FLOAT16: case TIDE_BFLOAT16: return 2;
    default: return 1;
    }
}

/* The count of typed-field elements and a writer of element i into dst; -1 when the field that
 * dtype uses is not the one filled. */
static int64_t typed_count(const Onnx__TensorProto *t, tide_dtype d)
{
    switch (d) {
    case TIDE_FLOAT32: return (int64_t)t->n_float_data;
    case TIDE_FLOAT64: return (int64_t)t->n_double_data;
    case TIDE_INT64: return (int64_t)t->n_int64_data;
    default: return (int64_t)t->n_int32_data; /* int32, uint8, bool, float16, bfloat16 */
    }
}

static void typed_copy(const Onnx__TensorProto *t, tide_dtype d, void *dst, int64_t n)
{
    for (int64_t i = 0; i < n; i++) {
        switch (d) {
        case TIDE_FLOAT32: ((float *)dst)[i] = t->float_data[i]; break;
        case TIDE_FLOAT64: ((double *)dst)[i] = t->double_data[i]; break;
        case TIDE_INT64: ((int64_t *)dst)[i] = t->int64_data[i]; break;
        case TIDE_INT32: ((int32_t *)dst)[i] = t->int32_data[i]; break;
        case TIDE_FLOAT16: case TIDE_BFLOAT16: /* the 16 bits in the low half */
            ((uint16_t *)dst)[i] = (uint16_t)t->int32_data[i];
            break;
        case TIDE_BOOL: ((uint8_t *)dst)[i] = t->int32_data[i] != 0; break;
        default: ((uint8_t *)dst)[i] = (uint8_t)t->int32_data[i]; break;
        }
    }
}

/* The value of key in a TensorProto's external_data, or NULL. */
static const char *external_key(const Onnx__TensorProto *t, const char *key)
{
    for (size_t i = 0; i < t->n_external_data; i++)
        if (t->external_data[i]->key && !strcmp(t->external_data[i]->key, key))
            return t->external_data[i]->value;
    return NULL;
}

static int parse_u64(const char *s, uint64_t *v)
{
    if (!s || !*s || *s == '-')
        return -1;
    char *end;
    errno = 0;
    unsigned long long x = strtoull(s, &end, 10);
    if (errno || *end)
        return -1;
    *v = x;
    return 0;
}

/* Reads nbytes of external data into dst: location must be a relative path inside dir (no
 * "..", no absolute path, and its real path under dir's), offset/length as given. */
static int read_external(const td_io_ctx *io, const Onnx__TensorProto *t, const char *dir,
                         void **dst, size_t nbytes)
{
    const char *loc = external_key(t, "location");
    if (!loc || !*loc)
        return td_io_error(io, "tensor '%s': external data without a location",
                           t->name ? t->name : "");
    if (!dir || loc[0] == '/' || strstr(loc, ".."))
        return td_io_error(io, "tensor '%s': external data location '%s' is outside the "
                           "model's folder", t->name ? t->name : "", loc);
    uint64_t offset = 0, length = nbytes;
    const char *o = external_key(t, "offset"), *l = external_key(t, "length");
    if ((o && parse_u64(o, &offset) < 0) || (l && parse_u64(l, &length) < 0))
        return td_io_error(io, "tensor '%s': external data offset '%s' or length '%s' is not a "
                           "number", t->name ? t->name : "", o ? o : "", l ? l : "");
    if (length != nbytes)
        return td_io_error(io, "tensor '%s': external data length %llu; its shape and dtype "
                           "need %zu bytes", t->name ? t->name : "", (unsigned long long)length,
                           nbytes);
    char path[PATH_MAX], real[PATH_MAX], realdir[PATH_MAX];
    if ((size_t)snprintf(path, sizeof path, "%s/%s", dir, loc) >= sizeof path ||
        !realpath(dir, realdir) || !realpath(path, real) ||
        strncmp(real, realdir, strlen(realdir)) || real[strlen(realdir)] != '/')
        return td_io_error(io, "tensor '%s': external data '%s' is not a file inside the "
                           "model's folder", t->name ? t->name : "", loc);
    td_io_ctx ext = {io->op, path};
    uint64_t size;
    FILE *f = td_io_open_read(&ext, &size);
    if (!f)
        return -1;
    int rc = 0;
    if (offset > size || size - offset < nbytes)
        rc = td_io_error(&ext, "tensor '%s': needs %zu bytes at offset %llu; the file has %llu",
                         t->name ? t->name : "", nbytes, (unsigned long long)offset,
                         (unsigned long long)size);
    else if (fseeko(f, (off_t)offset, SEEK_SET) != 0)
        rc = td_io_error(&ext, "cannot seek to %llu", (unsigned long long)offset);
    else if (!(*dst = td_malloc(nbytes ? nbytes : 1)))
        rc = td_io_error(&ext, "out of memory for %zu bytes", nbytes);
    else
        rc = td_io_read_exact(&ext, f, *dst, nbytes, "external data");
    fclose(f);
    return rc;
}

/* The tensor's bytes (nbytes, numel elements of d) in a new buffer (*dst), from whichever field
 * t holds them in. The size is checked against what the file holds before allocating, so a
 * small file declaring a huge shape is an error, not a huge allocation. */
static int fill_data(const td_io_ctx *io, const Onnx__TensorProto *t, tide_dtype d,
                     const char *dir, void **dst, int64_t numel, size_t nbytes)
{
    const char *name = t->name ? t->name : "";
    if (t->has_data_location && t->data_location == ONNX__TENSOR_PROTO__DATA_LOCATION__EXTERNAL)
        return read_external(io, t, dir, dst, nbytes);
    if (t->has_raw_data) {
        if (t->raw_data.len != nbytes)
            return td_io_error(io, "tensor '%s': raw_data has %zu bytes; %lld elements of %s "
                               "need %zu", name, t->raw_data.len, (long long)numel,
                               tide_dtype_name(d), nbytes);
    } else if (typed_count(t, d) != numel) {
        return td_io_error(io, "tensor '%s': holds %lld values; its shape has %lld elements",
                           name, (long long)typed_count(t, d), (long long)numel);
    }
    if (!(*dst = td_malloc(nbytes ? nbytes : 1)))
        return td_io_error(io, "tensor '%s': out of memory for %zu bytes", name, nbytes);
    if (!t->has_raw_data) {
        typed_copy(t, d, *dst, numel);
    } else if (nbytes) {
        memcpy(*dst, t->raw_data.data, nbytes);
        if (d == TIDE_BOOL)
            td_io_normalize_bools(*dst, nbytes);
    }
    return 0;
}

tide_tensor *onnx_tensor_from_proto(const td_io_ctx *io, const Onnx__TensorProto *t,
                                    const char *dir, const char *device)
{
    const char *name = t->name ? t->name : "";
    int dt = onnx_dtype(t->data_type);
    if (dt < 0) {
        td_io_error_code(io, TIDE_ERR_UNSUPPORTED, "tensor '%s' is %s, which tide has no dtype "
                         "for", name, onnx_dtype_name(t->data_type));
        return NULL;
    }
    if (t->n_dims > TIDE_MAX_DIMS) {
        td_io_error_code(io, TIDE_ERR_UNSUPPORTED, "tensor '%s' has %zu dims; tide holds at "
                         "most %d", name, t->n_dims, TIDE_MAX_DIMS);
        return NULL;
    }
    /* span: the product of the dims counting a 0 as 1, bounded too, so an empty tensor with
     * huge other dims (whose strides would overflow) is refused like a huge one */
    int64_t shape[TIDE_MAX_DIMS], numel = 1, span = 1;
    for (size_t i = 0; i < t->n_dims; i++) {
        shape[i] = t->dims[i];
        if (shape[i] < 0 || (shape[i] && span > (INT64_C(1) << 40) / shape[i])) {
            td_io_error(io, "tensor '%s' has dim %zu of size %lld", name, i,
                        (long long)shape[i]);
            return NULL;
        }
        numel *= shape[i];
        span *= shape[i] ? shape[i] : 1;
    }
    size_t nbytes = (size_t)numel * elem_size((tide_dtype)dt);
    void *buf = NULL;
    tide_tensor *out = NULL;
    if (fill_data(io, t, (tide_dtype)dt, dir, &buf, numel, nbytes) == 0)
        out = tide_from_data_on(device ? device : tide_get_default_device(), buf, (int)t->n_dims,
                                shape, (tide_dtype)dt);
    free(buf);
    return out;
}

static void *pb_alloc(void *ctx, size_t n)
{
    (void)ctx;
    return td_malloc(n ? n : 1);
}
static void pb_free(void *ctx, void *p)
{
    (void)ctx;
    free(p);
}
ProtobufCAllocator onnx_allocator = {pb_alloc, pb_free, NULL};

/* A whole file into memory (the protobuf parser wants it in one piece). */
void *onnx_read_file(const td_io_ctx *io, size_t *len)
{
    uint64_t size;
    FILE *f = td_io_open_read(io, &size);
    if (!f)
        return NULL;
    void *data = size > SIZE_MAX - 1 ? NULL : td_malloc((size_t)size + 1);
    if (!data)
        td_io_error(io, "out of memory for the file's %llu bytes", (unsigned long long)size);
    else if (td_io_read_exact(io, f, data, (size_t)size, "the file") < 0) {
        free(data);
        data = NULL;
    }
    fclose(f);
    *len = (size_t)size;
    return data;
}

tide_tensor *tide_onnx_load_tensor(const char *path)
{
    if (td_io_check_path("onnx_load_tensor", path) < 0)
        return NULL;
    td_io_ctx io = {"onnx_load_tensor", path};
    size_t len;
    uint8_t *data = onnx_read_file(&io, &len);
    if (!data)
        return NULL;
    Onnx__TensorProto *t = onnx__tensor_proto__unpack(&onnx_allocator, len, data);
    free(data);
    if (!t) {
        td_io_error(&io, "not a TensorProto (the protobuf does not parse)");
        return NULL;
    }
    tide_tensor *out = onnx_tensor_from_proto(&io, t, NULL, NULL);
    onnx__tensor_proto__free_unpacked(t, &onnx_allocator);
    return out;
}
