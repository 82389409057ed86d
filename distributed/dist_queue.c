/*
 * dist_queue.c — the group's state queries, and the communication thread that runs non-blocking
 * collectives one after another in the order they were started, while the caller computes.
 * A blocking collective waits for every started one first, so each rank's MPI calls keep the
 * program's order whatever mix of blocking and non-blocking it uses. Call the collectives of a
 * group from one thread.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "../core/tensor.h"
#include "dist_internal.h"

struct td_dist_req {
    td_coll c;
    bool done;
    int rc, code;
    char err[512];
    struct td_dist_req *next;
};

static pthread_mutex_t qlock = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t work_cond = PTHREAD_COND_INITIALIZER, done_cond = PTHREAD_COND_INITIALIZER;
static td_dist_req *head, *tail;
static long started, finished;
static bool thread_running, stopping;
static pthread_t thread;

bool td_dist_initialized(void) { return td_dist.initialized; }
int td_dist_rank(void) { return td_dist.initialized ? td_dist.rank : -1; }
int td_dist_world(void) { return td_dist.initialized ? td_dist.world : -1; }

int td_dist_set_timeout(double seconds)
{
    if (!(seconds > 0))
        return td_error("distributed.set_timeout: the timeout must be a positive number of "
                        "seconds, got %g", seconds);
    td_dist.timeout_s = seconds;
    return 0;
}

int td_dist_broken_error(const char *op)
{
    return td_error_code(TIDE_ERR_DISTRIBUTED,
                         "%s: rank %d of %d: an earlier collective failed, so the ranks are out "
                         "of step and tide.distributed cannot be used any more",
                         op, td_dist.rank, td_dist.world);
}

static int not_initialized(const char *op)
{
    if (!td_dist_built_with_mpi())
        return td_error_code(TIDE_ERR_UNSUPPORTED,
                             "%s: this tide was built without MPI (install libopenmpi-dev, "
                             "then configure and build again)", op);
    return td_error_code(TIDE_ERR_DISTRIBUTED,
                         "%s: call tide.distributed.init() (tide_dist_init) first", op);
}

int td_dist_require(const char *op) { return td_dist.initialized ? 0 : not_initialized(op); }

static void run_request(td_dist_req *r)
{
    r->rc = td_dist_exec(&r->c);
    if (r->rc < 0) {
        r->code = tide_last_error_code();
        strncpy(r->err, tide_last_error(), sizeof r->err - 1);
    }
}

static void *comm_thread(void *arg)
{
    (void)arg;
    pthread_mutex_lock(&qlock);
    for (;;) {
        while (!head && !stopping)
            pthread_cond_wait(&work_cond, &qlock);
        if (!head)
            break;
        td_dist_req *r = head;
        head = r->next;
        if (!head)
            tail = NULL;
        pthread_mutex_unlock(&qlock);
        run_request(r);
        pthread_mutex_lock(&qlock);
        r->done = true;
        finished++;
        pthread_cond_broadcast(&done_cond);
    }
    pthread_mutex_unlock(&qlock);
    return NULL;
}

void td_dist_queue_stop(void)
{
    pthread_mutex_lock(&qlock);
    stopping = true;
    pthread_cond_signal(&work_cond);
    bool joined = thread_running;
    thread_running = false;
    pthread_mutex_unlock(&qlock);
    if (joined)
        pthread_join(thread, NULL);
}

/* Waits until every started request has finished (the queue is empty and the thread idle). */
static void drain(void)
{
    pthread_mutex_lock(&qlock);
    while (finished != started)
        pthread_cond_wait(&done_cond, &qlock);
    pthread_mutex_unlock(&qlock);
}

int td_dist_run(const td_coll *c)
{
    if (!td_dist.initialized)
        return not_initialized(c->op);
    drain();
    return td_dist_exec(c);
}

/* Queues r for the thread (started first when needed). 0 or -1. */
static int enqueue(td_dist_req *r)
{
    pthread_mutex_lock(&qlock);
    if (!thread_running) {
        stopping = false;
        if (pthread_create(&thread, NULL, comm_thread, NULL) != 0) {
            pthread_mutex_unlock(&qlock);
            return td_error("%s: could not start tide's communication thread", r->c.op);
        }
        thread_running = true;
    }
    if (tail)
        tail->next = r;
    else
        head = r;
    tail = r;
    started++;
    pthread_cond_signal(&work_cond);
    pthread_mutex_unlock(&qlock);
    return 0;
}

td_dist_req *td_dist_start(const td_coll *c)
{
    if (!td_dist.initialized) {
        not_initialized(c->op);
        return NULL;
    }
    td_dist_req *r = calloc(1, sizeof *r);
    if (!r) {
        td_error("%s: out of memory", c->op);
        return NULL;
    }
    r->c = *c;
    if (!td_dist.threaded) { /* MPI allows calls from one thread only: run it now */
        drain();
        run_request(r);
        r->done = true;
        return r;
    }
    if (enqueue(r) < 0) {
        free(r);
        return NULL;
    }
    return r;
}

bool td_dist_test(td_dist_req *r)
{
    pthread_mutex_lock(&qlock);
    bool done = r->done;
    pthread_mutex_unlock(&qlock);
    return done;
}

static void wait_done(td_dist_req *r)
{
    pthread_mutex_lock(&qlock);
    while (!r->done)
        pthread_cond_wait(&done_cond, &qlock);
    pthread_mutex_unlock(&qlock);
}

int td_dist_wait(td_dist_req *r)
{
    wait_done(r);
    return r->rc < 0 ? td_error_code(r->code, "%s", r->err) : 0;
}

void td_dist_req_free(td_dist_req *r)
{
    if (!r)
        return;
    wait_done(r);
    free(r);
}
