/*
 * graph_file_fields.c — the fields of a graph file (graph_file.h): the header, and the meta
 * section's little-endian integers, doubles and strings, written to a buffer and read through
 * a bounded cursor.
 */
#include <string.h>
#include <pthread.h>

#include "graph_file.h"

/* CRC-32C (Castagnoli, reflected polynomial 0x82F63B78): x86's crc32 instruction computes it
 * 8 bytes at a time, about 10 times zlib's CRC-32 here (a 14 GB model's weights checked in
 * seconds, not a quarter of a minute); a table serves CPUs without SSE4.2. */
static uint32_t crc_table[256];
static pthread_once_t crc_once = PTHREAD_ONCE_INIT;

static void make_crc_table(void)
{
    for (uint32_t i = 0; i < 256; i++) {
        uint32_t c = i;
        for (int k = 0; k < 8; k++)
            c = c & 1 ? (c >> 1) ^ 0x82F63B78u : c >> 1;
        crc_table[i] = c;
    }
}

uint32_t td_gf_crc_table(const void *data, size_t n)
{
    pthread_once(&crc_once, make_crc_table);
    const uint8_t *p = data;
    uint32_t c = ~0u;
    while (n--)
        c = crc_table[(c ^ *p++) & 0xff] ^ (c >> 8);
    return ~c;
}

#if defined(__x86_64__)
__attribute__((target("sse4.2"))) static uint32_t crc_sse42(const void *data, size_t n)
{
    const uint8_t *p = data;
    uint64_t c = ~0u;
    for (; n >= 8; n -= 8, p += 8) {
        uint64_t v;
        memcpy(&v, p, 8);
        c = __builtin_ia32_crc32di(c, v);
    }
    uint32_t c32 = (uint32_t)c;
    while (n--)
        c32 = __builtin_ia32_crc32qi(c32, *p++);
    return ~c32;
}
#endif

uint32_t td_gf_crc(const void *p, size_t n)
{
#if defined(__x86_64__)
    if (__builtin_cpu_supports("sse4.2"))
        return crc_sse42(p, n);
#endif
    return td_gf_crc_table(p, n);
}

void td_gf_put_le(uint8_t *p, uint64_t v, int bytes)
{
    for (int i = 0; i < bytes; i++)
        p[i] = (uint8_t)(v >> (8 * i));
}

uint64_t td_gf_le(const uint8_t *p, int bytes)
{
    uint64_t v = 0;
    for (int i = 0; i < bytes; i++)
        v |= (uint64_t)p[i] << (8 * i);
    return v;
}

void td_graph_header_write(const td_graph_header *h, uint8_t out[TD_GRAPH_HEADER])
{
    memset(out, 0, TD_GRAPH_HEADER);
    memcpy(out, TD_GRAPH_MAGIC, 8);
    td_gf_put_le(out + 8, h->version, 4);
    td_gf_put_le(out + 12, TD_GRAPH_HEADER, 4);
    td_gf_put_le(out + 16, h->meta_offset, 8);
    td_gf_put_le(out + 24, h->meta_bytes, 8);
    td_gf_put_le(out + 32, h->data_offset, 8);
    td_gf_put_le(out + 40, h->data_bytes, 8);
    td_gf_put_le(out + 48, h->meta_crc, 4);
    td_gf_put_le(out + 56, td_gf_crc(out, 56), 4);
}

static void put(td_io_buf *b, uint64_t v, int bytes)
{
    uint8_t p[8];
    td_gf_put_le(p, v, bytes);
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
    uint64_t v = td_gf_le(c->p + c->pos, bytes);
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
