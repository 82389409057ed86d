/*
 * dist_mpi.c — the transport of dist.h on MPI (compiled when CMake finds MPI; dist_none.c
 * otherwise). Collectives go over a duplicate of MPI_COMM_WORLD, so an application's own MPI
 * traffic on the world communicator never mixes with tide's. Requests started without blocking
 * run on one communication thread (dist_queue.c) under the same lock as the caller's blocking
 * ones: MPI sees one call at a time (MPI_THREAD_SERIALIZED).
 */
#include <mpi.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../core/tensor.h"
#include "dist_internal.h"

td_dist_state td_dist = {.rank = -1, .world = -1};
static MPI_Comm comm = MPI_COMM_NULL;
static pthread_mutex_t mpi_lock = PTHREAD_MUTEX_INITIALIZER;

#define DESC_LEN 16 /* int64 per rank in the descriptor exchange */
static int64_t *all_descs; /* world * DESC_LEN, made at init, used under mpi_lock */

bool td_dist_built_with_mpi(void) { return true; }

static int mpi_fail(const td_coll *c, int code)
{
    char msg[MPI_MAX_ERROR_STRING];
    int len = 0;
    MPI_Error_string(code, msg, &len);
    td_dist.broken = true;
    return td_error_code(TIDE_ERR_DISTRIBUTED, "%s: MPI failed on rank %d of %d: %s", c->op,
                         td_dist.rank, td_dist.world, msg);
}

static double now_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Waits for q until the timeout: spins while the other ranks are close behind (most waits), then
 * sleeps between tests with a growing pause, so a rank waiting long leaves the cores to the
 * ranks it waits for. -1 with the timeout error (the group cannot be used after it). */
static int wait_with_timeout(MPI_Request *q, const td_coll *c, int64_t seq)
{
    double start = now_s(), pause_ns = 20e3;
    for (long spins = 0;; spins++) {
        int done = 0, rc = MPI_Test(q, &done, MPI_STATUS_IGNORE);
        if (rc != MPI_SUCCESS)
            return mpi_fail(c, rc);
        if (done)
            return 0;
        if (spins < 20000)
            continue;
        if (now_s() - start > td_dist.timeout_s) {
            td_dist.broken = true;
            return td_error_code(TIDE_ERR_DISTRIBUTED,
                                 "%s: rank %d of %d waited %.1f s for the other ranks to reach "
                                 "collective #%lld: a rank stalled or died (the timeout is set "
                                 "by tide.distributed.init{timeout = s} or TIDE_DIST_TIMEOUT)",
                                 c->op, td_dist.rank, td_dist.world, td_dist.timeout_s,
                                 (long long)seq);
        }
        struct timespec ts = {0, (long)pause_ns};
        nanosleep(&ts, NULL);
        if (pause_ns < 1e6)
            pause_ns *= 1.5;
    }
}

static void describe(int64_t *d, const td_coll *c, int64_t seq)
{
    memset(d, 0, sizeof(int64_t) * DESC_LEN);
    d[0] = seq;
    d[1] = c->kind;
    d[2] = c->red_or_root;
    d[3] = c->user_dtype;
    d[4] = c->ndim;
    for (int i = 0; i < c->ndim && i < DESC_LEN - 5; i++)
        d[5 + i] = c->shape[i];
}

static const char *kind_name(int64_t k)
{
    static const char *names[] = {"barrier", "all_reduce", "broadcast", "all_gather",
                                  "reduce_scatter"};
    return k >= 0 && k < 5 ? names[k] : "?";
}

/* "all_reduce of float32 [3, 4]" for descriptor d. */
static void desc_str(char *buf, size_t n, const int64_t *d)
{
    int off = snprintf(buf, n, "%s", kind_name(d[1]));
    if (d[1] != TD_COLL_BARRIER) {
        off += snprintf(buf + off, n - (size_t)off, " of %s [", tide_dtype_name((tide_dtype)d[3]));
        for (int i = 0; i < d[4] && i < DESC_LEN - 5 && off < (int)n; i++)
            off += snprintf(buf + off, n - (size_t)off, "%s%lld", i ? ", " : "", (long long)d[5 + i]);
        if (off < (int)n)
            snprintf(buf + off, n - (size_t)off, "]");
    }
}

/* Every rank's descriptor of this collective, compared with ours: the timeout and the check that
 * all ranks call the same thing happen here, before any data moves. */
static int handshake(const td_coll *c)
{
    int64_t seq = ++td_dist.seq, mine[DESC_LEN], *all = all_descs;
    describe(mine, c, seq);
    MPI_Request q;
    int rc = MPI_Iallgather(mine, DESC_LEN, MPI_INT64_T, all, DESC_LEN, MPI_INT64_T, comm, &q);
    rc = rc != MPI_SUCCESS ? mpi_fail(c, rc) : wait_with_timeout(&q, c, seq);
    for (int r = 0; r < td_dist.world && rc == 0; r++) {
        if (memcmp(all + (size_t)r * DESC_LEN, mine, sizeof mine) == 0)
            continue;
        char a[160], b[160];
        desc_str(a, sizeof a, mine);
        desc_str(b, sizeof b, all + (size_t)r * DESC_LEN);
        rc = td_error_code(TIDE_ERR_DISTRIBUTED,
                           "%s: the ranks disagree at collective #%lld: rank %d calls %s, rank %d "
                           "calls %s (every rank must call the same collectives in the same "
                           "order, with the same dtypes and shapes)",
                           c->op, (long long)seq, td_dist.rank, a, r, b);
    }
    return rc;
}

static MPI_Datatype mpi_type(tide_dtype t)
{
    switch (t) {
    case TIDE_FLOAT64: return MPI_DOUBLE;
    case TIDE_FLOAT16:
    case TIDE_BFLOAT16: return MPI_UINT16_T; /* moved, never reduced (reduced in float32) */
    case TIDE_UINT8: return MPI_UINT8_T;
    case TIDE_INT32: return MPI_INT32_T;
    case TIDE_INT64: return MPI_INT64_T;
    case TIDE_BOOL: return MPI_C_BOOL;
    default: return MPI_FLOAT;
    }
}

static MPI_Op mpi_op(int red)
{
    switch (red) {
    case TD_RED_PROD: return MPI_PROD;
    case TD_RED_MAX: return MPI_MAX;
    case TD_RED_MIN: return MPI_MIN;
    case TD_RED_LOR: return MPI_LOR;
    case TD_RED_LAND: return MPI_LAND;
    default: return MPI_SUM;
    }
}

/* The data phase: the blocking MPI call, now that every rank has arrived. */
static int move_data(const td_coll *c)
{
    MPI_Datatype t = mpi_type(c->dtype);
    int n = (int)c->count, rc = MPI_SUCCESS;
    const void *send = c->send == c->recv ? MPI_IN_PLACE : c->send;
    switch (c->kind) {
    case TD_COLL_ALL_REDUCE:
        rc = MPI_Allreduce(send, c->recv, n, t, mpi_op(c->red_or_root), comm);
        break;
    case TD_COLL_BROADCAST:
        rc = MPI_Bcast(c->recv, n, t, c->red_or_root, comm);
        break;
    case TD_COLL_ALL_GATHER:
        rc = MPI_Allgather(c->send, n, t, c->recv, n, t, comm);
        break;
    case TD_COLL_REDUCE_SCATTER:
        rc = MPI_Reduce_scatter_block(c->send, c->recv, n, t, mpi_op(c->red_or_root), comm);
        break;
    case TD_COLL_BARRIER:
        break;
    }
    return rc == MPI_SUCCESS ? 0 : mpi_fail(c, rc);
}

int td_dist_exec(const td_coll *c)
{
    if (c->count > (size_t)INT32_MAX)
        return td_error_code(TIDE_ERR_DISTRIBUTED,
                             "%s: %zu elements per rank is more than MPI's count (2^31 - 1)",
                             c->op, c->count);
    pthread_mutex_lock(&mpi_lock);
    int rc = td_dist.broken ? td_dist_broken_error(c->op) : handshake(c);
    if (rc == 0 && c->count > 0)
        rc = move_data(c);
    pthread_mutex_unlock(&mpi_lock);
    return rc;
}

static void finish(void)
{
    td_dist_queue_stop();
    if (td_dist.broken) /* the others may wait for us inside a collective: end them too */
        MPI_Abort(MPI_COMM_WORLD, 1);
    int finalized = 0;
    MPI_Finalized(&finalized);
    if (!finalized) {
        MPI_Comm_free(&comm);
        MPI_Finalize();
    }
    free(all_descs);
    all_descs = NULL;
}

int td_dist_init(double timeout_s)
{
    if (timeout_s > 0)
        td_dist.timeout_s = timeout_s;
    if (td_dist.initialized)
        return 0;
    if (td_dist.timeout_s <= 0) {
        const char *env = getenv("TIDE_DIST_TIMEOUT");
        td_dist.timeout_s = env && atof(env) > 0 ? atof(env) : 300;
    }
    int already = 0, provided = 0;
    MPI_Initialized(&already);
    if (!already && MPI_Init_thread(NULL, NULL, MPI_THREAD_SERIALIZED, &provided) != MPI_SUCCESS)
        return td_error_code(TIDE_ERR_DISTRIBUTED, "distributed.init: MPI_Init_thread failed");
    if (already)
        MPI_Query_thread(&provided);
    if (MPI_Comm_dup(MPI_COMM_WORLD, &comm) != MPI_SUCCESS)
        return td_error_code(TIDE_ERR_DISTRIBUTED, "distributed.init: MPI_Comm_dup failed");
    MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
    MPI_Comm_rank(comm, &td_dist.rank);
    MPI_Comm_size(comm, &td_dist.world);
    if (!(all_descs = malloc(sizeof(int64_t) * DESC_LEN * (size_t)td_dist.world)))
        return td_error("distributed.init: out of memory");
    td_dist.threaded = provided >= MPI_THREAD_SERIALIZED;
    td_dist.initialized = true;
    if (!already)
        atexit(finish);
    return 0;
}

void tide_dist_abort(int code)
{
    if (td_dist.initialized)
        MPI_Abort(MPI_COMM_WORLD, code);
}
