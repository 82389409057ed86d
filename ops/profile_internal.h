/* profile_internal.h — what profile.c and profile_report.c share (profile.h has the rest). */
#ifndef TIDE_OPS_PROFILE_INTERNAL_H
#define TIDE_OPS_PROFILE_INTERNAL_H

#include "profile.h"

typedef struct td_prof_event {
    int name, where;    /* interned (td_profile_string) */
    const char *device; /* the device's name (devices live as long as the process) */
    int tid;
    double ts_us, dur_us; /* from the profile's start */
    int64_t bytes, flops;
} td_prof_event;

/* The interned string of id ("" for 0 or a bad id). */
const char *td_profile_string(int id);
/* Doubles *p's capacity (elements of elem bytes; 1024 at first). 0 or -1. */
int td_prof_grow(void **p, int *cap, size_t elem);
/* Forgets the last report (a new profile starts). */
void td_prof_report_clear(void);
/* The report of a finished profile: rows, public events, the summary. 0 or -1. */
int td_prof_report_build(const td_prof_event *ev, int n, double wall_ms);

#endif
