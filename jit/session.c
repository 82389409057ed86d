/*
 * session.c — trace sessions (tide_jit_trace_*, what tide.jit runs each call in): the
 * dispatcher's hooks installed for the thread, and the thread's spare trace whose buffers the
 * next session reuses.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/log.h"
#include "../core/rng.h"
#include "trace.h"

static pthread_key_t spare_key;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;

void jit_trace_destroy(void *p)
{
    jit_trace *tr = p;
    free(tr->b.nodes);
    free(tr->b.ext);
    free(tr->b.ext_node);
    free(tr->b.wstor);
    free(tr->b.map_key);
    free(tr->b.map_val);
    free(tr->b.key);
    free(tr->b.dims);
    free(tr->b.dim_node);
    free(tr);
}

static void spare_init(void) { (void)pthread_key_create(&spare_key, jit_trace_destroy); }

/* ---- sessions ---------------------------------------------------------------------------- */

int jit_session_begin(bool capture, tide_jit_stats *stats, const char *(*where)(void *),
                         void *where_ctx)
{
    if (jit_current)
        return td_error("jit: this thread is already tracing (jit functions do not nest)");
    pthread_once(&spare_once, spare_init);
    jit_trace *tr = pthread_getspecific(spare_key);
    if (tr) { /* empty since its last jit_session_free: only the buffers carry over */
        (void)pthread_setspecific(spare_key, NULL);
        trace_buffers keep = tr->b;
        memset(tr, 0, sizeof *tr);
        tr->b = keep;
    } else {
        tr = td_calloc(1, sizeof *tr);
    }
    if (!tr)
        return td_error("jit: out of memory");
    tr->capture = capture;
    tr->stats = stats;
    tr->where = where;
    tr->where_ctx = where_ctx;
    td_hooks *h = td_thread_hooks();
    tr->saved = *h;
    h->trace = jit_trace_hook;
    h->trace_ctx = tr;
    h->materialize = jit_materialize_hook;
    jit_current = tr;
    return 0;
}

void jit_session_free(jit_trace *tr)
{
    jit_reset_segment(tr);
    free(tr->cap_dyn);
    free(tr->cap_probe);
    tr->cap_dyn = NULL;
    tr->cap_probe = NULL;
    td_hooks *h = td_thread_hooks();
    h->trace = tr->saved.trace;
    h->trace_ctx = tr->saved.trace_ctx;
    h->materialize = tr->saved.materialize;
    jit_current = NULL;
    if (pthread_getspecific(spare_key) || pthread_setspecific(spare_key, tr) != 0)
        jit_trace_destroy(tr);
}

int tide_jit_trace_begin(tide_jit_stats *stats, const char *(*where)(void *), void *where_ctx)
{
    return jit_session_begin(false, stats, where, where_ctx);
}

void tide_jit_trace_on_break(void (*fn)(void *ctx), void *ctx)
{
    if (jit_current) {
        jit_current->on_break = fn;
        jit_current->on_break_ctx = ctx;
    }
}

int tide_jit_trace_end(void)
{
    jit_trace *tr = jit_current;
    if (!tr)
        return td_error("tide_jit_trace_end: this thread is not tracing");
    int rc = jit_flush(tr, NULL, 0, NULL);
    jit_session_free(tr);
    return rc;
}

int tide_jit_trace_flush(void)
{
    jit_trace *tr = jit_current;
    if (!tr)
        return 0;
    return jit_flush(tr, NULL, 0, NULL);
}

bool tide_jit_is_tracing(void) { return jit_current != NULL; }


void jit_drop_spare(void)
{
    pthread_once(&spare_once, spare_init);
    jit_trace *spare = pthread_getspecific(spare_key); /* this thread's, when not tracing */
    if (spare && spare != jit_current) {
        (void)pthread_setspecific(spare_key, NULL);
        jit_trace_destroy(spare);
    }
}

/* ---- pauses (tide_jit_pause): ops run eagerly, their results are the trace's constants --- */

void *tide_jit_pause(void)
{
    jit_trace *tr = jit_current;
    if (!tr)
        return NULL;
    td_hooks *h = td_thread_hooks();
    h->trace = tr->saved.trace;
    h->trace_ctx = tr->saved.trace_ctx;
    h->materialize = tr->saved.materialize;
    jit_current = NULL;
    return tr;
}

void tide_jit_resume(void *token)
{
    jit_trace *tr = token;
    if (!tr || jit_current)
        return;
    td_hooks *h = td_thread_hooks();
    h->trace = jit_trace_hook;
    h->trace_ctx = tr;
    h->materialize = jit_materialize_hook;
    jit_current = tr;
}
