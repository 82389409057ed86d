/*
 * collective.h — what the collective ops share between their blocking forms (collective.c,
 * run by the dispatcher) and their non-blocking ones (collective_async.c).
 */
#ifndef TIDE_COLLECTIVE_H
#define TIDE_COLLECTIVE_H

#include "../distributed/dist.h"
#include "dispatch.h"

/* One collective in flight: the host buffers MPI reads and writes, and where the result goes. */
typedef struct td_coll_job {
    td_coll c;
    tide_op op;
    bool mean;
    tide_tensor *out;      /* the result's tensor */
    tide_tensor *wire_in;  /* the operand, contiguous on the host in the wire dtype */
    tide_tensor *wire_out; /* the result there: wire_in (in place), out itself, or a buffer */
} td_coll_job;

/* Stages x for op into j (out: the result's tensor; x itself for in place). 0, or -1 with j
 * still to release. */
int td_coll_prepare(td_coll_job *j, tide_op op, tide_tensor *out, tide_tensor *x,
                    const tide_attrs *a);
/* After the transport returned rc: the mean's division and the write into out; releases j. */
int td_coll_finish(td_coll_job *j, int rc);
void td_coll_job_release(td_coll_job *j);

/* The checks of every collective (initialized group, reduction, dtype, no grad), and of a root. */
int td_coll_check(const char *op, const tide_tensor *t, int red);
int td_coll_check_root(const char *op, const tide_tensor *t, int root);
/* The result of ALL_GATHER or REDUCE_SCATTER of t. 0 or -1. */
int td_coll_meta(tide_op op, const tide_tensor *t, td_meta *m);

#endif
