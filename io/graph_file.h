/*
 * graph_file.h — what the writer and the reader of graph files share (docs/export.md has the
 * layout): the header, and the little-endian fields of the meta section. A graph file is a
 * 64-byte header, a meta section (names, nodes, externs, blobs) and a data section of blobs,
 * each 64-byte aligned so a mapped file gives aligned tensors. Checksums (CRC-32C) cover the
 * header, the meta section and each blob.
 */
#ifndef TIDE_IO_GRAPH_FILE_H
#define TIDE_IO_GRAPH_FILE_H

#include "io_internal.h"

#define TD_GRAPH_MAGIC "TIDEGRPH"
#define TD_GRAPH_VERSION 1u
#define TD_GRAPH_HEADER 64u
#define TD_GRAPH_ALIGN 64u

typedef struct td_graph_header {
    uint32_t version;
    uint64_t meta_offset, meta_bytes, data_offset, data_bytes;
    uint32_t meta_crc;
} td_graph_header;

/* The header's 64 bytes: magic, version, header size, the two sections, the meta section's
 * CRC, and the CRC of the 56 bytes before it. */
void td_graph_header_write(const td_graph_header *h, uint8_t out[TD_GRAPH_HEADER]);

/* CRC-32C of n bytes (the crc32 instruction where the CPU has SSE4.2, else a table: the same
 * value either way). */
uint32_t td_gf_crc(const void *p, size_t n);
uint32_t td_gf_crc_table(const void *p, size_t n);

/* A little-endian integer of `bytes` bytes (at most 8) read from p, or written to p. */
uint64_t td_gf_le(const uint8_t *p, int bytes);
void td_gf_put_le(uint8_t *p, uint64_t v, int bytes);

/* Meta fields, appended to a buffer: unsigned and signed little-endian integers, doubles as
 * their bits, strings as a u32 length and bytes. */
void td_gf_u8(td_io_buf *b, unsigned v);
void td_gf_u32(td_io_buf *b, uint32_t v);
void td_gf_u64(td_io_buf *b, uint64_t v);
void td_gf_f64(td_io_buf *b, double v);
void td_gf_str(td_io_buf *b, const char *s);

/* A cursor over the meta section: every read is bounded; the first fault sets failed and
 * leaves what later reads return at 0. */
typedef struct td_gf_cursor {
    const uint8_t *p;
    size_t n, pos;
    bool failed;
} td_gf_cursor;
unsigned td_gf_get_u8(td_gf_cursor *c);
uint32_t td_gf_get_u32(td_gf_cursor *c);
uint64_t td_gf_get_u64(td_gf_cursor *c);
double td_gf_get_f64(td_gf_cursor *c);
/* A string into buf (size bytes, NUL-terminated); longer than size - 1 is a fault. */
void td_gf_get_str(td_gf_cursor *c, char *buf, size_t size);

#define TD_GRAPH_NAME_MAX 256 /* an input, output, dim or op name, with its NUL */

#endif /* TIDE_IO_GRAPH_FILE_H */
