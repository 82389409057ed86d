/*
 * collective_async.c — the non-blocking collectives (tide_*_async) and their works. Eagerly, a
 * work stages its operand now, runs on distributed/'s communication thread, and writes its
 * result at tide_work_wait, on the caller's thread (a device's copy back happens there). Under
 * a trace there is nothing to overlap with: the blocking op is recorded and the work is done.
 */
#include <stdlib.h>

#include "collective.h"

struct tide_work {
    td_coll_job job;
    td_dist_req *req;   /* NULL once finished, or for a work done at once */
    tide_tensor *result;
    bool finished;
    int rc;
};

static bool tracing(void) { return td_thread_hooks()->trace != NULL; }

/* A work that is already done: result (a new reference, or NULL after a failure). */
static tide_work *done_work(tide_tensor *result)
{
    if (!result)
        return NULL;
    tide_work *w = calloc(1, sizeof *w);
    if (!w) {
        tide_release(result);
        td_error("collective: out of memory");
        return NULL;
    }
    w->result = result;
    w->finished = true;
    return w;
}

static tide_work *start(tide_op op, tide_tensor *out, tide_tensor *x, const tide_attrs *a)
{
    tide_work *w = calloc(1, sizeof *w);
    if (!w) {
        td_error("%s: out of memory", tide_op_name(op));
        return NULL;
    }
    if (td_coll_prepare(&w->job, op, out, x, a) < 0 || !(w->req = td_dist_start(&w->job.c))) {
        td_coll_job_release(&w->job);
        free(w);
        return NULL;
    }
    w->result = tide_retain(out);
    return w;
}

tide_work *tide_all_reduce_async(tide_tensor *t, tide_reduce_op op)
{
    if (td_coll_check("all_reduce", t, op) < 0)
        return NULL;
    if (tracing())
        return done_work(tide_all_reduce_(t, op) == 0 ? tide_retain(t) : NULL);
    tide_attrs a = {.ints = {op}, .nints = 1};
    return start(TIDE_OP_ALL_REDUCE, t, t, &a);
}

tide_work *tide_broadcast_async(tide_tensor *t, int root)
{
    if (td_coll_check_root("broadcast", t, root) < 0)
        return NULL;
    if (tracing())
        return done_work(tide_broadcast_(t, root) == 0 ? tide_retain(t) : NULL);
    tide_attrs a = {.ints = {root}, .nints = 1};
    return start(TIDE_OP_BROADCAST, t, t, &a);
}

/* all_gather and reduce_scatter: into a fresh tensor on t's device. */
static tide_work *start_fresh(tide_op op, const tide_tensor *t, int red)
{
    td_meta m;
    const char *name = tide_op_name(op);
    if (td_coll_check(name, t, red) < 0 || td_coll_meta(op, t, &m) < 0)
        return NULL;
    if (tracing())
        return done_work(op == TIDE_OP_ALL_GATHER ? tide_all_gather(t)
                                                  : tide_reduce_scatter(t, (tide_reduce_op)red));
    tide_tensor *out = td_tensor_new(name, m.device, m.ndim, m.shape, m.dtype);
    if (!out)
        return NULL;
    tide_attrs a = {.ints = {red}, .nints = 1};
    tide_work *w = start(op, out, (tide_tensor *)t, &a);
    tide_release(out);
    return w;
}

tide_work *tide_all_gather_async(const tide_tensor *t)
{
    return start_fresh(TIDE_OP_ALL_GATHER, t, TIDE_REDUCE_SUM);
}

tide_work *tide_reduce_scatter_async(const tide_tensor *t, tide_reduce_op op)
{
    return start_fresh(TIDE_OP_REDUCE_SCATTER, t, op);
}

bool tide_work_is_completed(tide_work *w)
{
    return !w || w->finished || td_dist_test(w->req);
}

/* Waits for the transport, then writes the result (once). */
static int finish(tide_work *w)
{
    if (w->finished)
        return w->rc;
    bool in_place = w->job.wire_out == w->job.wire_in || w->job.wire_out == w->job.out;
    tide_storage *written = w->job.out->storage;
    w->rc = td_coll_finish(&w->job, td_dist_wait(w->req));
    /* tensors autograd saved from the storage are stale now, as after any in-place op */
    if (w->rc == 0 && in_place && written)
        __atomic_add_fetch(&written->version, 1, __ATOMIC_RELAXED);
    td_dist_req_free(w->req);
    w->req = NULL;
    w->finished = true;
    return w->rc;
}

tide_tensor *tide_work_wait(tide_work *w)
{
    if (!w) {
        td_error("work.wait: no work (NULL)");
        return NULL;
    }
    if (finish(w) < 0) {
        if (!*tide_last_error())
            td_error("work.wait: the collective failed");
        return NULL;
    }
    return tide_retain(w->result);
}

void tide_work_free(tide_work *w)
{
    if (!w)
        return;
    finish(w);
    tide_release(w->result);
    free(w);
}
