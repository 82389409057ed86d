/* log.c — TIDE_LOG topics (log.h). */
#include "log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

static char topics[256]; /* TIDE_LOG as read at first use */
static pthread_once_t topics_once = PTHREAD_ONCE_INIT;

static void read_topics(void)
{
    const char *s = getenv("TIDE_LOG");
    if (s)
        snprintf(topics, sizeof topics, "%s", s);
}

bool td_log_enabled(const char *topic)
{
    pthread_once(&topics_once, read_topics);
    size_t len = strlen(topic);
    for (const char *p = topics; *p;) {
        const char *end = strchr(p, ',');
        size_t n = end ? (size_t)(end - p) : strlen(p);
        while (n && *p == ' ') { /* "blas, jit" reads as two topics */
            p++;
            n--;
        }
        while (n && p[n - 1] == ' ')
            n--;
        if ((n == len && strncasecmp(p, topic, n) == 0) ||
            (n == 3 && strncasecmp(p, "all", 3) == 0))
            return true;
        if (!end)
            break;
        p = end + 1;
    }
    return false;
}

void td_log(const char *topic, const char *fmt, ...)
{
    if (!td_log_enabled(topic))
        return;
    char msg[1024];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    fprintf(stderr, "tide[%s]: %s\n", topic, msg); /* one call, so lines from threads stay whole */
}
