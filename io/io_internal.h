/*
 * io_internal.h — what the file-format readers and writers of io/ share: errors that name the
 * function and the file, exact reads that tell truncation from I/O failure, a growable string,
 * UTF-8 checks, byte swapping, and writing a tensor's bytes row-major. Internal names start
 * with td_io_.
 */
#ifndef TIDE_IO_INTERNAL_H
#define TIDE_IO_INTERNAL_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tide.h"
/* core's internal header, for two things: td_error (tide_last_error) and the allocation
 * wrappers (td_malloc & co.), through which every allocation here goes so a test can fail it */
#include "tensor.h"

/* The formats store little-endian data and io/ copies it straight into tensors. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ != __ORDER_LITTLE_ENDIAN__
#error "io/ assumes a little-endian host (safetensors and .npy data are copied as is)"
#endif

/* Which public function is running and on which file: every error message starts with both. */
typedef struct td_io_ctx {
    const char *op;   /* "load_safetensors" */
    const char *path; /* as the caller gave it */
} td_io_ctx;

/* Sets tide_last_error() to "op: path: <message>", code TIDE_ERR_IO (TIDE_ERR_OUT_OF_MEMORY
 * when the message says "out of memory"). Always returns -1. */
int td_io_error(const td_io_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
/* The same with another code: TIDE_ERR_INVALID_ARGUMENT for what a saver's caller passed,
 * TIDE_ERR_UNSUPPORTED for a valid file tide does not read (a dtype, a version). */
int td_io_error_code(const td_io_ctx *c, int code, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Checks the path argument itself (NULL or empty), before anything names it in a message. */
int td_io_check_path(const char *op, const char *path);

/* Opens a regular file for reading and gives its size. NULL with the error set. */
FILE *td_io_open_read(const td_io_ctx *c, uint64_t *size);
FILE *td_io_open_write(const td_io_ctx *c);
/* Reads exactly n bytes; "what" names them in the error ("the header", "tensor 'w'"). */
int td_io_read_exact(const td_io_ctx *c, FILE *f, void *dst, size_t n, const char *what);
int td_io_write(const td_io_ctx *c, FILE *f, const void *src, size_t n);
/* Flushes and closes, reporting a failed write (a full disk shows up here). */
int td_io_close_write(const td_io_ctx *c, FILE *f);
/* Writes t's elements row-major in its dtype's bytes, whatever its layout or device. */
int td_io_write_tensor(const td_io_ctx *c, FILE *f, const tide_tensor *t);

/* Bytes 0/1 only: a stored bool other than 0 reads as true, as in every other library. */
void td_io_normalize_bools(uint8_t *p, size_t n);
/* Reverses the byte order of each of n elements of elem_size bytes, in place. */
void td_io_swap_bytes(void *p, size_t n, size_t elem_size);
bool td_io_utf8_valid(const char *s, size_t n);
/* Writes s into buf as a short printable quotation for messages (escapes, cut with "..."). */
const char *td_io_quote(char *buf, size_t size, const char *s, size_t n);
/* Whether the sizes other than 0 multiply to at most 2^62. An empty shape like [2^40, 2^40, 0]
 * passes core's size check (it holds no bytes) but its row-major strides would overflow, so the
 * loaders refuse it. */
bool td_io_strides_fit(int ndim, const int64_t *shape);
/* "[2, 3]" */
const char *td_io_shape_str(char *buf, size_t size, int ndim, const int64_t *shape);

/* A file read as a stream of bytes, gunzipped when it starts with gzip's magic (gzip_read.c):
 * concatenated members are joined, anything else after the last member is an error, and every
 * fault (bad header, damaged data, CRC-32 or length mismatch, truncation) names the member and
 * the byte offset. open: NULL with the error set. read: the bytes delivered, fewer than n only
 * at the end of the data (a gzipped file's trailers and end then checked), or -1 with the
 * error set. */
typedef struct td_io_gz td_io_gz;
td_io_gz *td_io_gz_open(const td_io_ctx *c);
int64_t td_io_gz_read(td_io_gz *g, void *dst, size_t n);
void td_io_gz_close(td_io_gz *g);

/* What tide_load_safetensors returns: names and tensors in file order, and the metadata. */
struct tide_tensor_dict {
    int count;
    char **names;
    tide_tensor **tensors;
    int nmeta;
    char **meta_keys;
    char **meta_values;
};

/* A growable byte string; after a failed allocation every append is a no-op and failed is set. */
typedef struct td_io_buf {
    char *data;
    size_t len, cap;
    bool failed;
} td_io_buf;
void td_io_buf_add(td_io_buf *b, const void *src, size_t n);
void td_io_buf_str(td_io_buf *b, const char *s);
void td_io_buf_printf(td_io_buf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void td_io_buf_free(td_io_buf *b);

#endif /* TIDE_IO_INTERNAL_H */
