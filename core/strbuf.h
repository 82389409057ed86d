/*
 * strbuf.h — a growing string built with printf-style appends, and a hash of a string: what the
 * code generators (the CPU device's C for libtcc, the Vulkan device's GLSL) build their source
 * with, and what they key their compiled-code tables by.
 */
#ifndef TIDE_STRBUF_H
#define TIDE_STRBUF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct td_sbuf {
    char *s; /* NUL-terminated once anything was appended; the caller frees it */
    size_t n, cap;
    bool failed; /* out of memory (or a bad format): later appends do nothing */
} td_sbuf;

/* Appends the formatted text to b. On failure b->failed is set and b->s keeps what it had. */
void td_emit(td_sbuf *b, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* 64-bit FNV-1a of a NUL-terminated string. */
uint64_t td_text_hash(const char *s);

#endif
