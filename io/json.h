/*
 * json.h — a small strict JSON reader and string writer for the safetensors header.
 *
 * The reader pulls values in the order the caller expects them (there is no tree), so memory
 * stays proportional to what the caller keeps, and nesting is only as deep as the caller's
 * schema. It follows RFC 8259 strictly: no comments, no trailing commas, no leading zeros, no
 * unescaped control characters, escapes including \uXXXX surrogate pairs (a lone surrogate is an
 * error). The text must already be valid UTF-8 (td_io_utf8_valid). On failure a function returns
 * -1 and leaves a message with the byte position in j->err.
 */
#ifndef TIDE_IO_JSON_H
#define TIDE_IO_JSON_H

#include <stddef.h>
#include <stdint.h>

#include "io_internal.h"

typedef struct td_json {
    const char *s;
    size_t n, pos;
    char err[200];
} td_json;

int td_json_fail(td_json *j, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
void td_json_skip_ws(td_json *j);
/* Skips whitespace, then consumes c or fails naming what was expected. */
int td_json_expect(td_json *j, char c);
/* Steps through the members of an object or array whose opening bracket was consumed: returns
 * 1 when another member follows (the ',' before it consumed), 0 at the closing bracket
 * (consumed), -1 on a syntax error. *count counts the members seen; start it at 0. */
int td_json_next(td_json *j, char close, int *count);
/* A string value, decoded into a malloc'ed NUL-terminated buffer (*len bytes). A string that
 * decodes to a NUL character is rejected: names and metadata are C strings here. */
int td_json_string(td_json *j, char **out, size_t *len);
/* A number that must be a non-negative integer below 2^64 (a fraction, an exponent or a minus
 * sign is an error naming it). */
int td_json_uint(td_json *j, uint64_t *value);
/* What starts at the current position, for messages: "a string", "an object", ... */
const char *td_json_what(td_json *j);

/* Appends s as a JSON string the way serde_json writes it (the safetensors reference writer):
 * \" \\ \b \f \n \r \t, other control characters as \u00xx, everything else as is. */
void td_json_write_string(td_io_buf *b, const char *s, size_t n);

#endif /* TIDE_IO_JSON_H */
