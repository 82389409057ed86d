/*
 * idx.c — the IDX format of MNIST and Fashion-MNIST: two zero bytes, a type code, the number of
 * dims, one big-endian uint32 size per dim, then the big-endian data. The files usually ship
 * gzipped; gzip_read.c reads both gzipped and plain files.
 *
 * A gzip stream does not say how much it decompresses to, so the declared size is never used to
 * size an allocation up front: the data is read into a buffer that grows (doubling, capped by
 * the declared size) only as the stream delivers bytes. A 100-byte file that declares 4 GB
 * therefore costs at most a few MB before it fails as truncated.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"

#define IDX_FIRST_CHUNK ((size_t)1 << 20)
#define IDX_MAX_BYTES ((uint64_t)1 << 47) /* the same bound core puts on any tensor */

static const struct {
    int code;
    const char *name;
    size_t size;       /* bytes per element in the file */
    tide_dtype dtype;  /* what tide holds it as */
} idx_types[] = {
    {0x08, "uint8", 1, TIDE_UINT8},   {0x09, "int8", 1, TIDE_INT32},
    {0x0B, "int16", 2, TIDE_INT32},   {0x0C, "int32", 4, TIDE_INT32},
    {0x0D, "float32", 4, TIDE_FLOAT32}, {0x0E, "float64", 8, TIDE_FLOAT64},
};

/* The declared data, all of it, in a malloc'ed buffer that grows as bytes arrive. */
static uint8_t *read_data(const td_io_ctx *c, td_io_gz *gz, size_t nbytes, const char *shape)
{
    size_t cap = nbytes < IDX_FIRST_CHUNK ? nbytes : IDX_FIRST_CHUNK, have = 0;
    uint8_t *buf = td_malloc(cap ? cap : 1);
    if (!buf) {
        td_io_error(c, "out of memory");
        return NULL;
    }
    while (have < nbytes) {
        if (have == cap) {
            size_t next = cap > nbytes / 2 ? nbytes : 2 * cap;
            uint8_t *p = td_realloc(buf, next);
            if (!p) {
                td_io_error(c, "out of memory after %zu bytes of data", have);
                free(buf);
                return NULL;
            }
            buf = p;
            cap = next;
        }
        int64_t r = td_io_gz_read(gz, buf + have, cap - have);
        if (r < 0) {
            free(buf);
            return NULL;
        }
        have += (size_t)r;
        if (have < cap && have < nbytes) {
            td_io_error(c, "data ends after %zu of the %zu bytes its dims %s declare "
                        "(truncated file?)", have, nbytes, shape);
            free(buf);
            return NULL;
        }
    }
    uint8_t extra;
    int64_t r = td_io_gz_read(gz, &extra, 1); /* also checks a gzip stream's trailers */
    if (r != 0) {
        if (r > 0)
            td_io_error(c, "more data follows the %zu bytes its dims %s declare", nbytes, shape);
        free(buf);
        return NULL;
    }
    return buf;
}

/* File bytes (big-endian, file type) into the tensor's elements (little-endian, tide type). */
static void convert(void *dst, const uint8_t *src, size_t n, int code)
{
    switch (code) {
    case 0x08:
        memcpy(dst, src, n);
        break;
    case 0x09:
        for (size_t i = 0; i < n; i++)
            ((int32_t *)dst)[i] = (int8_t)src[i];
        break;
    case 0x0B:
        for (size_t i = 0; i < n; i++)
            ((int32_t *)dst)[i] = (int16_t)(uint16_t)(src[2 * i] << 8 | src[2 * i + 1]);
        break;
    case 0x0C:
    case 0x0D:
        memcpy(dst, src, 4 * n);
        td_io_swap_bytes(dst, n, 4);
        break;
    case 0x0E:
        memcpy(dst, src, 8 * n);
        td_io_swap_bytes(dst, n, 8);
        break;
    }
}

/* The magic number (two zero bytes, a type code, the dim count) and the big-endian dims:
 * *type indexes idx_types; *numel saturates just past IDX_MAX_BYTES. 0, or -1 with the error
 * set. */
static int read_header(const td_io_ctx *ctx, td_io_gz *gz, int *type, int *ndim, int64_t *shape,
                       uint64_t *numel)
{
    uint8_t head[4 + 4 * TIDE_MAX_DIMS];
    int64_t r = td_io_gz_read(gz, head, 4);
    if (r < 0)
        return -1;
    if (r < 4)
        return td_io_error(ctx, "file has %lld bytes, too few for an IDX magic number",
                           (long long)r);
    if (head[0] != 0 || head[1] != 0)
        return td_io_error(ctx, "not an IDX file: the magic number %02x%02x%02x%02x does not "
                           "start with two zero bytes", head[0], head[1], head[2], head[3]);
    *type = -1;
    for (int i = 0; i < (int)(sizeof idx_types / sizeof idx_types[0]); i++)
        if (idx_types[i].code == head[2])
            *type = i;
    if (*type < 0)
        return td_io_error(ctx, "unknown IDX type code 0x%02x (known: 0x08 0x09 0x0B 0x0C 0x0D "
                           "0x0E)", head[2]);
    *ndim = head[3];
    if (*ndim > TIDE_MAX_DIMS)
        return td_io_error(ctx, "IDX header declares %d dims; tide tensors have at most %d",
                           *ndim, TIDE_MAX_DIMS);
    r = td_io_gz_read(gz, head + 4, 4 * (size_t)*ndim);
    if (r < 0)
        return -1;
    if (r < 4 * *ndim)
        return td_io_error(ctx, "file ends inside the %d dims of the header", *ndim);
    *numel = 1;
    for (int i = 0; i < *ndim; i++) {
        const uint8_t *p = head + 4 + 4 * i;
        shape[i] = (int64_t)((uint32_t)p[0] << 24 | (uint32_t)p[1] << 16 | (uint32_t)p[2] << 8 |
                             p[3]);
        /* Saturates just past the limit; a later 0 still makes it 0. */
        if (shape[i] && *numel > (IDX_MAX_BYTES + 1) / (uint64_t)shape[i])
            *numel = IDX_MAX_BYTES + 1;
        else
            *numel *= (uint64_t)shape[i];
    }
    return 0;
}

tide_tensor *tide_load_idx(const char *path)
{
    if (td_io_check_path("load_idx", path) < 0)
        return NULL;
    td_io_ctx ctx = {"load_idx", path};
    td_io_gz *gz = td_io_gz_open(&ctx);
    if (!gz)
        return NULL;
    tide_tensor *t = NULL;
    uint8_t *data = NULL;
    int type = 0, ndim = 0;
    int64_t shape[TIDE_MAX_DIMS];
    uint64_t numel = 0;
    if (read_header(&ctx, gz, &type, &ndim, shape, &numel) < 0)
        goto done;
    char s[160];
    td_io_shape_str(s, sizeof s, ndim, shape);
    size_t esize = idx_types[type].size;
    if (numel > IDX_MAX_BYTES / esize) {
        td_io_error(&ctx, "dims %s of %s declare more than 2^47 bytes", s, idx_types[type].name);
        goto done;
    }
    if (!td_io_strides_fit(ndim, shape)) {
        td_io_error(&ctx, "dims %s have sizes other than 0 that multiply past 2^62", s);
        goto done;
    }
    size_t nbytes = (size_t)numel * esize;
    data = read_data(&ctx, gz, nbytes, s);
    if (!data)
        goto done;
    t = tide_empty_on("cpu", ndim, shape, idx_types[type].dtype);
    if (!t) {
        td_io_error(&ctx, "%s", tide_last_error());
        goto done;
    }
    if (numel)
        convert(tide_mutable_data_ptr(t), data, (size_t)numel, idx_types[type].code);
done:
    free(data);
    td_io_gz_close(gz);
    return t;
}
