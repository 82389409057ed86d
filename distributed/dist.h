/*
 * dist.h — the MPI transport behind the collective ops (ops/collective.c). It moves host
 * buffers only: ops/ stages every tensor into a contiguous host buffer of a dtype MPI reduces
 * (float32 for the half types) before, and writes the result back after.
 *
 * Every collective first exchanges a small descriptor with the other ranks (what it is, the
 * dtype, the shape), with a timeout: a rank that stalls makes the others fail with an error
 * instead of hanging, and ranks that disagree fail on every rank before any data moves. Then
 * the data goes by the blocking MPI call, which for two ranks on one machine is about twice as
 * fast as its non-blocking form (bench/RESULTS.md). Non-blocking collectives run that same
 * sequence on a communication thread, in the order they were started; a blocking one waits for
 * them first, so every rank issues its MPI calls in one order.
 */
#ifndef TIDE_DIST_H
#define TIDE_DIST_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "../core/tide.h"

typedef enum td_coll_kind {
    TD_COLL_BARRIER,
    TD_COLL_ALL_REDUCE,
    TD_COLL_BROADCAST,
    TD_COLL_ALL_GATHER,
    TD_COLL_REDUCE_SCATTER
} td_coll_kind;

/* How the elements combine on the wire (bool: LOR for sum/max, LAND for min/prod). */
typedef enum td_coll_red {
    TD_RED_SUM, TD_RED_PROD, TD_RED_MAX, TD_RED_MIN, TD_RED_LOR, TD_RED_LAND
} td_coll_red;

/* One collective on host buffers. count: elements each rank contributes (ALL_GATHER,
 * REDUCE_SCATTER: per block); send == recv means in place. The descriptor the ranks compare is
 * (kind, red/root, dtype, the user's shape). */
typedef struct td_coll {
    td_coll_kind kind;
    int red_or_root;
    tide_dtype dtype; /* on the wire: any but the half types when reducing */
    tide_dtype user_dtype;
    int ndim;
    int64_t shape[TIDE_MAX_DIMS];
    const void *send;
    void *recv;
    size_t count;
    const char *op; /* the user's op name, for errors */
} td_coll;

int td_dist_init(double timeout_s);
bool td_dist_initialized(void);
bool td_dist_built_with_mpi(void);
int td_dist_rank(void);
int td_dist_world(void);
int td_dist_set_timeout(double seconds);
/* 0 when the group is initialized, else -1 with an error naming op (and saying how). */
int td_dist_require(const char *op);

/* Runs c on the calling thread after every started request finished. 0 or -1. */
int td_dist_run(const td_coll *c);

/* A request running on the communication thread. c (and its buffers) must stay valid until
 * td_dist_wait returned. */
typedef struct td_dist_req td_dist_req;
td_dist_req *td_dist_start(const td_coll *c);
bool td_dist_test(td_dist_req *r);
/* 0 or -1 with the request's error (this thread's error is set). */
int td_dist_wait(td_dist_req *r);
void td_dist_req_free(td_dist_req *r); /* waits first */

#endif
