/* error.c — the per-thread last error behind tide_last_error() and tide_last_error_code(). */
#include <stdio.h>
#include <string.h>

#include "tensor.h"

static _Thread_local char last_error[512];
static _Thread_local int last_code; /* TIDE_OK */

/* How much of the previous message a new one must contain to count as wrapping it: a prefix
 * added on the way up can push the tail of a long message past the buffer. */
#define WRAP_MATCH 96

/* The code of a new message msg. Every failed allocation in tide says "out of memory" (or "out
 * of device memory"), so that wording is the out-of-memory code whatever the caller asked:
 * the dozens of places that report one need no code of their own, and an I/O function that
 * runs out of memory still reports out of memory. Otherwise an explicit code wins; then the
 * wording "internal error" (tide's own bugs) is internal; then a message that contains the
 * previous one (an op adding its name to a callee's error) keeps the previous code; the rest
 * are the caller's mistakes. */
static int classify(int code, const char *msg)
{
    if (strstr(msg, "out of memory") || strstr(msg, "out of device memory"))
        return TIDE_ERR_OUT_OF_MEMORY;
    if (code != TIDE_OK)
        return code;
    if (strstr(msg, "internal error"))
        return TIDE_ERR_INTERNAL;
    if (last_error[0] && last_code != TIDE_OK) {
        char prev[WRAP_MATCH + 1];
        size_t n = strnlen(last_error, WRAP_MATCH);
        memcpy(prev, last_error, n);
        prev[n] = '\0';
        if (strstr(msg, prev))
            return last_code;
    }
    return TIDE_ERR_INVALID_ARGUMENT;
}

/* Formats into a local buffer first: callers may pass tide_last_error() itself as an argument. */
static void set_error(int code, const char *fmt, va_list ap)
{
    char msg[sizeof last_error];
    vsnprintf(msg, sizeof msg, fmt, ap);
    last_code = classify(code, msg);
    memcpy(last_error, msg, sizeof msg);
}

int td_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_error(TIDE_OK, fmt, ap);
    va_end(ap);
    return -1;
}

int td_error_code(int code, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    set_error(code, fmt, ap);
    va_end(ap);
    return -1;
}

int tide_set_error(const char *message) { return td_error("%s", message ? message : ""); }

const char *tide_last_error(void) { return last_error; }

int tide_last_error_code(void) { return last_code; }

void tide_clear_error(void)
{
    last_error[0] = '\0';
    last_code = TIDE_OK;
}
