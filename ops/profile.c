/*
 * profile.c — the profiler's recorder (profile.h): begin and end, the events, the strings they
 * name (ops, groups, source lines), each thread's source-line callback, and TIDE_PROFILE.
 *
 * Off, the dispatcher and jit/exec.c read td_profile_on once per op and go on. On, each kernel
 * appends one event under a mutex; the report is built at tide_profile_end (profile_report.c).
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "dispatch.h"
#include "profile.h"
#include "profile_internal.h"

bool td_profile_on;

static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
static bool running;           /* between begin and end (under lock) */
static double begin_us, end_us;
static td_prof_event *events;  /* this profile's, in order */
static int nevents, cap_events;
static int next_tid;

/* Interned strings, kept for the process: a compiled graph keeps its nodes' line ids from one
 * profile to the next. Open addressing on the string's hash. */
static char **strings;
static int nstrings, cap_strings;
static int *table; /* id + 1, or 0 */
static int table_cap;

static _Thread_local const char *(*where_fn)(void *);
static _Thread_local void *where_ctx;
static _Thread_local int thread_id; /* 1.. on the first event of the thread */

double td_profile_now_us(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static uint64_t hash_str(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++)
        h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

static int grow_table(void)
{
    int ncap = table_cap ? 2 * table_cap : 256;
    int *nt = calloc((size_t)ncap, sizeof *nt);
    char **ns = realloc(strings, sizeof *ns * (size_t)ncap);
    if (!nt || !ns) {
        free(nt);
        if (ns)
            strings = ns;
        return -1;
    }
    strings = ns;
    cap_strings = ncap;
    for (int i = 0; i < nstrings; i++) {
        size_t h = hash_str(strings[i]) & (size_t)(ncap - 1);
        while (nt[h])
            h = (h + 1) & (size_t)(ncap - 1);
        nt[h] = i + 1;
    }
    free(table);
    table = nt;
    table_cap = ncap;
    return 0;
}

static int intern_locked(const char *s)
{
    if (!s || !*s)
        return 0;
    if (2 * (nstrings + 1) > table_cap && grow_table() < 0)
        return 0;
    if (nstrings == 0) { /* id 0 is "" */
        strings[nstrings++] = strdup("");
        if (!strings[0])
            return nstrings = 0;
    }
    size_t h = hash_str(s) & (size_t)(table_cap - 1);
    for (; table[h]; h = (h + 1) & (size_t)(table_cap - 1))
        if (strcmp(strings[table[h] - 1], s) == 0)
            return table[h] - 1;
    char *copy = strdup(s);
    if (!copy)
        return 0;
    strings[nstrings] = copy;
    table[h] = nstrings + 1;
    return nstrings++;
}

int td_profile_intern(const char *s)
{
    pthread_mutex_lock(&lock);
    int id = intern_locked(s);
    pthread_mutex_unlock(&lock);
    return id;
}

const char *td_profile_string(int id)
{
    pthread_mutex_lock(&lock);
    const char *s = id > 0 && id < nstrings ? strings[id] : "";
    pthread_mutex_unlock(&lock);
    return s;
}

void tide_profile_set_where(const char *(*where)(void *ctx), void *ctx)
{
    where_fn = where;
    where_ctx = ctx;
}

int td_profile_where(void)
{
    return where_fn ? td_profile_intern(where_fn(where_ctx)) : 0;
}

double td_profile_kernel_start(tide_device *dev)
{
    td_profile_sync(dev);
    return td_profile_now_us();
}

void td_profile_kernel_end(int op, tide_device *dev, int where, const tide_tensor *out,
                           tide_tensor *const *in, int nin, double t0_us)
{
    td_profile_sync(dev);
    double dur = td_profile_now_us() - t0_us;
    int64_t bytes, flops;
    td_profile_kernel_cost(op, out, in, nin, &bytes, &flops);
    td_profile_record(tide_op_name((tide_op)op), dev, where, t0_us, dur, bytes, flops);
}

void td_profile_sync(tide_device *dev)
{
    if (dev && !dev->host_buffers && dev->synchronize)
        dev->synchronize(dev);
}

void td_profile_record(const char *name, const tide_device *dev, int where, double t0_us,
                       double dur_us, int64_t bytes, int64_t flops)
{
    pthread_mutex_lock(&lock);
    if (running && (nevents < cap_events || td_prof_grow((void **)&events, &cap_events,
                                                         sizeof *events) == 0)) {
        if (!thread_id)
            thread_id = ++next_tid;
        events[nevents++] = (td_prof_event){intern_locked(name), where, dev ? dev->name : "",
                                            thread_id, t0_us - begin_us, dur_us, bytes, flops};
    }
    pthread_mutex_unlock(&lock);
}

int td_prof_grow(void **p, int *cap, size_t elem)
{
    int ncap = *cap ? 2 * *cap : 1024;
    void *np = realloc(*p, elem * (size_t)ncap);
    if (!np)
        return -1;
    *p = np;
    *cap = ncap;
    return 0;
}

bool tide_profile_active(void)
{
    pthread_mutex_lock(&lock);
    bool r = running;
    pthread_mutex_unlock(&lock);
    return r;
}

/* Starts recording; the references are measured first (once per process), outside the time. */
static int start(bool measure)
{
    if (measure)
        td_profile_roofline(NULL, NULL, NULL, 0);
    pthread_mutex_lock(&lock);
    if (running) {
        pthread_mutex_unlock(&lock);
        return td_error("tide_profile_begin: a profile is already running (profiles do not nest)");
    }
    running = true;
    nevents = 0;
    td_prof_report_clear();
    begin_us = td_profile_now_us();
    __atomic_store_n(&td_profile_on, true, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&lock);
    return 0;
}

int tide_profile_begin(void) { return start(true); }

int tide_profile_end(void)
{
    pthread_mutex_lock(&lock);
    if (!running) {
        pthread_mutex_unlock(&lock);
        return td_error("tide_profile_end: no profile is running");
    }
    end_us = td_profile_now_us();
    __atomic_store_n(&td_profile_on, false, __ATOMIC_RELAXED);
    running = false;
    pthread_mutex_unlock(&lock);
    /* No event is added now: the report reads them without the lock. */
    return td_prof_report_build(events, nevents, (end_us - begin_us) / 1e3);
}

/* TIDE_PROFILE=path: recording from start-up, the report at exit (the references are measured
 * then, when every part of tide has started). */
static void profile_at_exit(void)
{
    const char *path = getenv("TIDE_PROFILE");
    if (!tide_profile_active() || tide_profile_end() < 0)
        return;
    if (tide_profile_write_trace(path) < 0)
        fprintf(stderr, "TIDE_PROFILE: %s\n", tide_last_error());
    char *text = tide_profile_table();
    if (text)
        fprintf(stderr, "%s", text);
    free(text);
}

__attribute__((constructor)) static void profile_from_env(void)
{
    const char *path = getenv("TIDE_PROFILE");
    if (path && *path && start(false) == 0)
        atexit(profile_at_exit);
}
