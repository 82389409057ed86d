/*
 * raw.c — tide_load_raw: one array of little-endian elements read from a byte offset of a file
 * with no format of its own (llama2.c's checkpoints: a few int32 then float32 arrays back to
 * back). The caller knows the layout; this checks it against the file's real size first, so a
 * truncated file is an error naming the bytes wanted and the bytes there.
 */
#include <errno.h>
#include <string.h>

#include "io_internal.h"

/* Element count of shape, or -1 when a size is negative or the product passes 2^62. */
static int64_t raw_numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++) {
        if (shape[i] < 0)
            return -1;
        if (shape[i] > 0 && n > (INT64_C(1) << 62) / shape[i])
            return -1;
        n *= shape[i];
    }
    return n;
}

static int raw_check(const td_io_ctx *c, uint64_t offset, int ndim, const int64_t *shape,
                     tide_dtype dtype, uint64_t *nbytes)
{
    char sbuf[160];
    if (ndim < 0 || ndim > 8 || (ndim > 0 && !shape))
        return td_io_error_code(c, TIDE_ERR_INVALID_ARGUMENT, "ndim must be 0..8, got %d", ndim);
    int64_t numel = raw_numel(ndim, shape);
    if (numel < 0 || !td_io_strides_fit(ndim, shape))
        return td_io_error_code(c, TIDE_ERR_INVALID_ARGUMENT, "invalid shape %s",
                                td_io_shape_str(sbuf, sizeof sbuf, ndim, shape));
    size_t esize = tide_dtype_size(dtype);
    if (esize == 0)
        return td_io_error_code(c, TIDE_ERR_INVALID_ARGUMENT, "invalid dtype %d", (int)dtype);
    *nbytes = (uint64_t)numel * esize;
    if (offset > (UINT64_C(1) << 62))
        return td_io_error_code(c, TIDE_ERR_INVALID_ARGUMENT, "offset %llu is too large",
                                (unsigned long long)offset);
    return 0;
}

tide_tensor *tide_load_raw(const char *path, uint64_t offset, tide_dtype dtype, int ndim,
                           const int64_t *shape)
{
    if (td_io_check_path("load_raw", path) < 0)
        return NULL;
    td_io_ctx ctx = {"load_raw", path};
    uint64_t nbytes = 0, size = 0;
    if (raw_check(&ctx, offset, ndim, shape, dtype, &nbytes) < 0)
        return NULL;
    FILE *f = td_io_open_read(&ctx, &size);
    if (!f)
        return NULL;
    tide_tensor *t = NULL;
    char sbuf[160];
    if (offset + nbytes > size) {
        td_io_error(&ctx, "%s %s at byte %llu needs %llu bytes in all, but the file has %llu "
                    "(truncated?)", tide_dtype_name(dtype),
                    td_io_shape_str(sbuf, sizeof sbuf, ndim, shape), (unsigned long long)offset,
                    (unsigned long long)(offset + nbytes), (unsigned long long)size);
        goto done;
    }
    if (fseeko(f, (off_t)offset, SEEK_SET) != 0) {
        td_io_error(&ctx, "cannot seek to byte %llu: %s", (unsigned long long)offset,
                    strerror(errno));
        goto done;
    }
    t = tide_empty_on("cpu", ndim, shape, dtype);
    if (!t) {
        td_io_error(&ctx, "%s", tide_last_error());
        goto done;
    }
    if (nbytes > 0 && td_io_read_exact(&ctx, f, tide_mutable_data_ptr(t), (size_t)nbytes,
                                       "the array") < 0) {
        tide_release(t);
        t = NULL;
        goto done;
    }
    if (dtype == TIDE_BOOL)
        td_io_normalize_bools(tide_mutable_data_ptr(t), (size_t)nbytes);
done:
    fclose(f);
    return t;
}
