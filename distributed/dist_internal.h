/*
 * dist_internal.h — what the files of distributed/ share: the process's group state, the one
 * function that runs a collective on MPI (dist_mpi.c, or dist_none.c's refusal), and the
 * communication thread's stop (dist_queue.c).
 */
#ifndef TIDE_DIST_INTERNAL_H
#define TIDE_DIST_INTERNAL_H

#include "dist.h"

typedef struct td_dist_state {
    bool initialized;
    bool threaded; /* MPI gave MPI_THREAD_SERIALIZED: requests may run on the thread */
    bool broken;   /* a collective failed midway: the ranks are out of step */
    int rank, world;
    double timeout_s;
    int64_t seq; /* collectives run so far, numbering them in errors */
} td_dist_state;

extern td_dist_state td_dist;

/* Handshake then data for c, serialized with every other MPI call. 0 or -1. */
int td_dist_exec(const td_coll *c);
/* The error of a group after a failed collective. -1. */
int td_dist_broken_error(const char *op);
/* Joins the communication thread (at exit, before MPI_Finalize). */
void td_dist_queue_stop(void);

#endif
