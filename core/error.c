/* error.c — the per-thread last error behind tide_last_error(). */
#include <stdio.h>

#include "tensor.h"

static _Thread_local char last_error[512];

int td_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_error, sizeof last_error, fmt, ap);
    va_end(ap);
    return -1;
}

const char *tide_last_error(void) { return last_error; }

void tide_clear_error(void) { last_error[0] = '\0'; }
