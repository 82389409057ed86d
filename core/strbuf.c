/* strbuf.c — see strbuf.h. */
#include "strbuf.h"
#include "tensor.h" /* td_realloc: every allocation of tide can be failed by a test */

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

void td_emit(td_sbuf *b, const char *fmt, ...)
{
    if (b->failed)
        return;
    for (;;) {
        va_list ap;
        va_start(ap, fmt);
        int len = vsnprintf(b->s ? b->s + b->n : NULL, b->s ? b->cap - b->n : 0, fmt, ap);
        va_end(ap);
        if (len < 0) {
            b->failed = true;
            return;
        }
        if (b->s && b->n + (size_t)len < b->cap) {
            b->n += (size_t)len;
            return;
        }
        size_t nc = (b->cap ? b->cap * 2 : 4096) + (size_t)len;
        char *ns = td_realloc(b->s, nc);
        if (!ns) {
            b->failed = true;
            return;
        }
        b->s = ns;
        b->cap = nc;
    }
}

uint64_t td_text_hash(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (uint8_t)*s) * 0x100000001b3ull;
    return h;
}
