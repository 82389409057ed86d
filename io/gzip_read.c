/*
 * gzip_read.c — a file read as a byte stream, plain or gzipped (RFC 1952), for loaders whose
 * format is usually shipped gzipped (IDX). Built on zlib's inflate rather than gzread, so that
 * every fault is reported with the file's path (io_fail), the member and the byte offset where
 * it was found, and so that what follows a stream is checked rather than skipped:
 *
 *   - concatenated members (`cat a.gz b.gz`, what `gzip -d` reads as one file) are read as one
 *     stream, their data joined;
 *   - anything else after the last member, zero padding included, is an error ("trailing
 *     garbage"); zlib's gzread and `gzip -d` ignore it (gzip with a warning), but a file with
 *     unexplained bytes at the end is more likely damaged than padded;
 *   - a member's CRC-32 or length trailer that does not match, a bad header, damaged deflate
 *     data and a file that ends inside a member are each told apart.
 *
 * Whether a file is gzipped is decided by its first two bytes (0x1f 0x8b), as zlib does.
 * zlib's allocations go through td_malloc, so the fault hook reaches them too.
 */
#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "io_internal.h"

#define GZ_IN_SIZE (1 << 16)

struct td_io_gz {
    const td_io_ctx *ctx;
    FILE *f;
    uint64_t file_size;
    bool gzip;           /* false: the bytes are read as they are */
    bool finished;       /* the end of the data was reached and checked */
    int member;          /* 1-based number of the member being read */
    z_stream z;
    gz_header head;      /* head.done tells whether inflate is still in the member's header */
    uint64_t buf_offset; /* the file offset of in[0] */
    unsigned char in[GZ_IN_SIZE];
};

static voidpf gz_alloc(voidpf opaque, uInt items, uInt size)
{
    (void)opaque;
    return td_calloc(items, size);
}

static void gz_free(voidpf opaque, voidpf p)
{
    (void)opaque;
    free(p);
}

/* The file offset of the next byte inflate (or a plain read) will take. */
static uint64_t gz_offset(const td_io_gz *g)
{
    return g->buf_offset + (uint64_t)(g->z.next_in - g->in);
}

/* Makes at least `want` bytes (at most GZ_IN_SIZE) available at z.next_in if the file still
 * has them, moving what is left to the front of the buffer first. Returns the bytes now
 * available (fewer than want only at the end of the file), or -1 with the error set. */
static int64_t gz_fill(td_io_gz *g, size_t want)
{
    if (g->z.avail_in >= want)
        return g->z.avail_in;
    g->buf_offset = gz_offset(g);
    memmove(g->in, g->z.next_in, g->z.avail_in);
    g->z.next_in = g->in;
    while (g->z.avail_in < want) {
        size_t r = fread(g->in + g->z.avail_in, 1, GZ_IN_SIZE - g->z.avail_in, g->f);
        if (r == 0) {
            if (ferror(g->f))
                return td_io_error(g->ctx, "read failed at byte %llu: %s",
                                   (unsigned long long)gz_offset(g), strerror(errno));
            break;
        }
        g->z.avail_in += (uInt)r;
    }
    return g->z.avail_in;
}

td_io_gz *td_io_gz_open(const td_io_ctx *c)
{
    td_io_gz *g = td_calloc(1, sizeof *g);
    if (!g) {
        td_io_error(c, "out of memory");
        return NULL;
    }
    g->ctx = c;
    g->member = 1;
    g->z.zalloc = gz_alloc;
    g->z.zfree = gz_free;
    g->z.next_in = g->in;
    g->f = td_io_open_read(c, &g->file_size);
    if (!g->f || gz_fill(g, 2) < 0) {
        td_io_gz_close(g);
        return NULL;
    }
    g->gzip = g->z.avail_in >= 2 && g->in[0] == 0x1f && g->in[1] == 0x8b;
    if (!g->gzip)
        return g;
    int rc = inflateInit2(&g->z, 16 + MAX_WBITS); /* 16: gzip wrapper only */
    if (rc == Z_OK)
        rc = inflateGetHeader(&g->z, &g->head);
    if (rc != Z_OK) {
        td_io_error(c, "%s", rc == Z_MEM_ERROR ? "out of memory" : "cannot start zlib");
        g->gzip = false; /* nothing for inflateEnd to free */
        td_io_gz_close(g);
        return NULL;
    }
    return g;
}

void td_io_gz_close(td_io_gz *g)
{
    if (!g)
        return;
    if (g->gzip)
        inflateEnd(&g->z);
    if (g->f)
        fclose(g->f);
    free(g);
}

/* Plain file: the buffered bytes first, then straight from the file. */
static int64_t plain_read(td_io_gz *g, unsigned char *dst, size_t n)
{
    size_t got = g->z.avail_in < n ? g->z.avail_in : n;
    memcpy(dst, g->z.next_in, got);
    g->z.next_in += got;
    g->z.avail_in -= (uInt)got;
    if (got < n) {
        size_t r = fread(dst + got, 1, n - got, g->f);
        if (r < n - got && ferror(g->f))
            return td_io_error(g->ctx, "read failed: %s", strerror(errno));
        got += r;
    }
    return (int64_t)got;
}

/* After a member's trailer checked out: another member, or the end of the file. 0, or -1
 * with the error set (trailing garbage). */
static int next_member(td_io_gz *g)
{
    int64_t have = gz_fill(g, 2);
    if (have < 0)
        return -1;
    if (have == 0) {
        g->finished = true;
        return 0;
    }
    uint64_t at = gz_offset(g);
    if (have < 2 || g->z.next_in[0] != 0x1f || g->z.next_in[1] != 0x8b)
        return td_io_error(g->ctx, "trailing garbage: %llu bytes after the end of gzip member %d "
                           "(at byte %llu) are not another gzip member",
                           (unsigned long long)(g->file_size - at), g->member,
                           (unsigned long long)at);
    if (inflateReset(&g->z) != Z_OK || inflateGetHeader(&g->z, &g->head) != Z_OK)
        return td_io_error(g->ctx, "cannot restart zlib for gzip member %d", g->member + 1);
    g->member++;
    return 0;
}

/* inflate's Z_DATA_ERROR, told apart by where inflate was: header, deflate data, trailer. */
static int data_error(td_io_gz *g)
{
    const char *msg = g->z.msg ? g->z.msg : "unknown error";
    unsigned long long at = gz_offset(g);
    if (!g->head.done)
        return td_io_error(g->ctx, "bad gzip header in member %d (near byte %llu): %s",
                           g->member, at, msg);
    /* Both trailer checks fail right after inflate took the field's 4 bytes. */
    if (!strcmp(msg, "incorrect data check"))
        return td_io_error(g->ctx, "CRC-32 mismatch at the end of gzip member %d (the checksum "
                           "at byte %llu): the decompressed data is damaged", g->member, at - 4);
    if (!strcmp(msg, "incorrect length check"))
        return td_io_error(g->ctx, "length mismatch at the end of gzip member %d (the size at "
                           "byte %llu differs from the decompressed data): damaged file",
                           g->member, at - 4);
    return td_io_error(g->ctx, "damaged compressed data in gzip member %d near byte %llu: %s",
                       g->member, at, msg);
}

/* One inflate step into dst; adds what it produced to *got. 0, or -1 with the error set. */
static int inflate_step(td_io_gz *g, unsigned char *dst, size_t n, size_t *got)
{
    int64_t have = gz_fill(g, 1);
    if (have < 0)
        return -1;
    if (have == 0)
        return td_io_error(g->ctx, "gzip stream ends early: the file ends inside %s of member %d "
                           "after %llu bytes (truncated file?)",
                           g->head.done ? "the compressed data or the CRC-32 trailer"
                                        : "the header", g->member,
                           (unsigned long long)gz_offset(g));
    size_t want = n - *got < UINT_MAX ? n - *got : UINT_MAX;
    g->z.next_out = dst + *got;
    g->z.avail_out = (uInt)want;
    int rc = inflate(&g->z, Z_NO_FLUSH);
    *got += want - g->z.avail_out;
    switch (rc) {
    case Z_OK:
    case Z_BUF_ERROR: /* no progress possible: more input is needed, the next step reads it */
        return 0;
    case Z_STREAM_END: /* the trailer's CRC-32 and length matched */
        return next_member(g);
    case Z_MEM_ERROR:
        return td_io_error(g->ctx, "out of memory");
    default: /* Z_DATA_ERROR, or Z_NEED_DICT, which a gzip member cannot validly ask for */
        return data_error(g);
    }
}

int64_t td_io_gz_read(td_io_gz *g, void *dst, size_t n)
{
    if (!g->gzip)
        return plain_read(g, dst, n);
    size_t got = 0;
    while (got < n && !g->finished)
        if (inflate_step(g, dst, n, &got) < 0)
            return -1;
    return (int64_t)got;
}
