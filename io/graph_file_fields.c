/*
 * graph_file_fields.c — the fields of a graph file (graph_file.h): the header, and the meta
 * section's little-endian integers, doubles and strings, written to a buffer and read through
 * a bounded cursor.
 */
#include <string.h>
#include <zlib.h>

#include "graph_file.h"

uint32_t td_gf_crc(const void *p, size_t n)
{
    uLong crc = crc32(0, Z_NULL, 0);
    const Bytef *b = p;
    while (n > 0) { /* zlib takes at most 4 GiB at a time */
        uInt chunk = n > (1u << 30) ? (1u << 30) : (uInt)n;
        crc = crc32(crc, b, chunk);
        b += chunk;
        n -= chunk;
    }
    return (uint32_t)crc;
}

static void put_le(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

void td_graph_header_write(const td_graph_header *h, uint8_t out[TD_GRAPH_HEADER])
{
    memset(out, 0, TD_GRAPH_HEADER);
    memcpy(out, TD_GRAPH_MAGIC, 8);
    put_le(out + 8, h->version, 4);
    put_le(out + 12, TD_GRAPH_HEADER, 4);
    put_le(out + 16, h->meta_offset, 8);
    put_le(out + 24, h->meta_bytes, 8);
    put_le(out + 32, h->data_offset, 8);
    put_le(out + 40, h->data_bytes, 8);
    put_le(out + 48, h->meta_crc, 4);
    put_le(out + 56, td_gf_crc(out, 56), 4);
}

static void put(td_io_buf *b, uint64_t v, int bytes)
{
    uint8_t p[8];
    put_le(p, v, bytes);
    td_io_buf_add(b, p, (size_t)bytes);
}

void td_gf_u8(td_io_buf *b, unsigned v) { put(b, v, 1); }
void td_gf_u32(td_io_buf *b, uint32_t v) { put(b, v, 4); }
void td_gf_u64(td_io_buf *b, uint64_t v) { put(b, v, 8); }

void td_gf_f64(td_io_buf *b, double v)
{
    uint64_t bits;
    memcpy(&bits, &v, 8);
    put(b, bits, 8);
}

void td_gf_str(td_io_buf *b, const char *s)
{
    size_t n = s ? strlen(s) : 0;
    put(b, n, 4);
    td_io_buf_add(b, s ? s : "", n);
}

static uint64_t get(td_gf_cursor *c, int bytes)
{
    if (c->failed || c->n - c->pos < (size_t)bytes) {
        c->failed = true;
        return 0;
    }
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)c->p[c->pos + (size_t)i] << (8 * i);
    c->pos += (size_t)bytes;
    return v;
}

unsigned td_gf_get_u8(td_gf_cursor *c) { return (unsigned)get(c, 1); }
uint32_t td_gf_get_u32(td_gf_cursor *c) { return (uint32_t)get(c, 4); }
uint64_t td_gf_get_u64(td_gf_cursor *c) { return get(c, 8); }

double td_gf_get_f64(td_gf_cursor *c)
{
    uint64_t bits = get(c, 8);
    double v;
    memcpy(&v, &bits, 8);
    return v;
}

void td_gf_get_str(td_gf_cursor *c, char *buf, size_t size)
{
    uint64_t n = get(c, 4);
    buf[0] = 0;
    if (c->failed || n >= size || c->n - c->pos < n) {
        c->failed = true;
        return;
    }
    memcpy(buf, c->p + c->pos, (size_t)n);
    buf[n] = 0;
    c->failed = strlen(buf) != n; /* a NUL inside */
    c->pos += (size_t)n;
}
