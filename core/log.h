/*
 * log.h — opt-in diagnostics on stderr. TIDE_LOG is a comma-separated list of topics ("blas",
 * "jit", ...; "all" turns every topic on), read once. A topic that is off costs one load.
 */
#ifndef TIDE_LOG_H
#define TIDE_LOG_H

#include <stdbool.h>

/* Whether TIDE_LOG lists topic (case-insensitive). */
bool td_log_enabled(const char *topic);
/* Prints "tide[topic]: message" and a newline on stderr when the topic is enabled. */
void td_log(const char *topic, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

#endif
