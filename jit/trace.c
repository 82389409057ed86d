/*
 * trace.c — the recorder: the dispatcher's trace hook while a thread traces, the nodes and
 * stubs it makes, and graph breaks (trace.h names the other files). See jit/README.md.
 *
 * While a thread traces, every op becomes a node and its result a "stub": a tensor without
 * storage (views of outside tensors keep theirs) whose trace_node names the node. A segment
 * ends at a graph break (data read back to the host) or at the end of the trace: its structure
 * (ops, attributes, layouts of every tensor read from outside, which stubs are still referenced)
 * is the cache key; the compiled plan runs on the segment's outside tensors, and every stub
 * still referenced receives its storage. Outside tensors' values are never part of the key, so
 * numbers (learning rates) are runtime arguments.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/log.h"
#include "../core/rng.h"
#include "../ops/profile.h"
#include "trace.h"
#include <time.h>

_Thread_local jit_trace *jit_current;

double jit_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

const char *jit_where(void)
{
    jit_trace *t = jit_current;
    if (t && t->where && td_log_enabled("jit")) {
        const char *w = t->where(t->where_ctx);
        return w ? w : "";
    }
    return "";
}

/* While profiling: the traced code's source line (the session's callback), else the thread's
 * (tide_profile_set_where), interned. */
static int profile_where(jit_trace *tr)
{
    const char *w = tr->where ? tr->where(tr->where_ctx) : NULL;
    return w && *w ? td_profile_intern(w) : td_profile_where();
}

void jit_map_clear(jit_trace *tr)
{
    if (tr->b.map_key)
        memset(tr->b.map_key, 0, sizeof(*tr->b.map_key) * (size_t)tr->b.map_cap);
    tr->map_used = 0;
}

int jit_map_find(const jit_trace *tr, const tide_tensor *t)
{
    if (!tr->b.map_cap)
        return -1;
    size_t mask = (size_t)tr->b.map_cap - 1;
    for (size_t h = ((uintptr_t)t >> 4) * 0x9E3779B97F4A7C15ull & mask;; h = (h + 1) & mask) {
        if (!tr->b.map_key[h])
            return -1;
        if (tr->b.map_key[h] == t)
            return tr->b.map_val[h];
    }
}

static int map_put(jit_trace *tr, const tide_tensor *t, int v)
{
    if (2 * (tr->map_used + 1) > tr->b.map_cap) {
        int ncap = tr->b.map_cap ? 2 * tr->b.map_cap : 64;
        const tide_tensor **ok = tr->b.map_key;
        int *ov = tr->b.map_val, ocap = tr->b.map_cap;
        tr->b.map_key = td_calloc((size_t)ncap, sizeof *tr->b.map_key);
        tr->b.map_val = td_calloc((size_t)ncap, sizeof *tr->b.map_val);
        if (!tr->b.map_key || !tr->b.map_val) {
            free(tr->b.map_key);
            free(tr->b.map_val);
            tr->b.map_key = ok;
            tr->b.map_val = ov;
            return td_error("jit: out of memory");
        }
        tr->b.map_cap = ncap;
        tr->map_used = 0;
        for (int i = 0; i < ocap; i++)
            if (ok[i])
                map_put(tr, ok[i], ov[i]);
        free(ok);
        free(ov);
    }
    size_t mask = (size_t)tr->b.map_cap - 1;
    size_t h = ((uintptr_t)t >> 4) * 0x9E3779B97F4A7C15ull & mask;
    while (tr->b.map_key[h])
        h = (h + 1) & mask;
    tr->b.map_key[h] = t;
    tr->b.map_val[h] = v;
    tr->map_used++;
    return 0;
}

static jit_node *new_node(jit_trace *tr)
{
    if (tr->n == tr->b.cap) {
        int ncap = tr->b.cap ? 2 * tr->b.cap : 64;
        jit_node *nn = td_realloc(tr->b.nodes, sizeof *nn * (size_t)ncap);
        if (!nn) {
            td_error("jit: out of memory for the trace");
            return NULL;
        }
        tr->b.nodes = nn;
        tr->b.cap = ncap;
    }
    jit_node *nd = &tr->b.nodes[tr->n];
    memset(nd, 0, sizeof *nd);
    nd->root = tr->n;
    nd->ext = -1;
    nd->epoch = tr->nwrites;
    if (__builtin_expect(td_profiling(), 0)) /* the line the profiler's rows name */
        nd->where = profile_where(tr);
    tr->n++;
    return nd;
}

/* The node id of this trace's stub t, -1 when t is not a stub of this trace. */
int jit_stub_node(const jit_trace *tr, const tide_tensor *t)
{
    if (!t->trace_node)
        return -1;
    intptr_t i = (intptr_t)t->trace_node - 1;
    if (i >= 0 && i < tr->n && tr->b.nodes[i].stub == t)
        return (int)i;
    return -2; /* a stub of another trace */
}

/* The node standing for t: its stub's node or an extern (added on first use). */
int jit_node_of(jit_trace *tr, const tide_tensor *t)
{
    int i = jit_stub_node(tr, t);
    if (i >= 0)
        return i;
    if (i == -2 && !t->storage)
        return td_error("jit: a tensor from another trace (or one left without a value by a "
                        "failed trace) was used");
    if (!t->storage)
        return td_error("jit: a tensor without data that is not a result of this trace was "
                        "used (a view made outside the dispatcher of a traced tensor?)");
    int e = jit_map_find(tr, t);
    if (e >= 0)
        return e;
    if (tr->next == tr->b.extcap) {
        int ncap = tr->b.extcap ? 2 * tr->b.extcap : 32;
        tide_tensor **ne = td_realloc(tr->b.ext, sizeof *ne * (size_t)ncap);
        int *nn = ne ? td_realloc(tr->b.ext_node, sizeof *nn * (size_t)ncap) : NULL;
        if (ne)
            tr->b.ext = ne;
        if (!nn)
            return td_error("jit: out of memory for the trace");
        tr->b.ext_node = nn;
        tr->b.extcap = ncap;
    }
    jit_node *nd = new_node(tr);
    if (!nd)
        return -1;
    int id = tr->n - 1;
    nd->kind = JN_EXTERN;
    nd->dtype = t->dtype;
    nd->ndim = t->ndim;
    nd->flags = t->flags & (TD_WRAPPED_NUMBER | TD_REQUIRES_GRAD);
    nd->device = t->device;
    nd->ext = tr->next;
    nd->storage_class = tr->next;
    for (int k = 0; k < tr->next; k++)
        if (tr->b.ext[k]->storage == t->storage) {
            nd->storage_class = k;
            break;
        }
    memcpy(nd->shape, t->shape, sizeof(int64_t) * t->ndim);
    memcpy(nd->strides, t->strides, sizeof(int64_t) * t->ndim);
    nd->offset = t->offset;
    tr->b.ext[tr->next] = tide_retain((tide_tensor *)t);
    tr->b.ext_node[tr->next] = id;
    tr->next++;
    if (map_put(tr, t, id) < 0)
        return -1;
    return id;
}

/* A fresh stub: a tensor header without storage. */
static tide_tensor *new_stub(const td_meta *meta)
{
    static tide_tensor tmpl; /* storage NULL: the template of every stub */
    int64_t strides[TIDE_MAX_DIMS];
    td_contiguous_strides(meta->ndim, meta->shape, strides);
    tide_tensor *t = td_tensor_view(&tmpl, meta->ndim, meta->shape, strides, 0);
    if (!t)
        return NULL;
    t->dtype = (uint8_t)meta->dtype;
    t->device = meta->device;
    return t;
}


/* Ops the recorder hands to the eager kernels at a break instead of tracing them: ops whose
 * device (run_device) runs no fusion groups (no jit_run), and ops with too many inputs. */
static bool traceable(const tide_device *dev, int nin)
{
    return nin <= JIT_MAX_IN && dev->jit_run;
}

/* The device whose segment an op belongs to: a copy between devices (TO) runs in its source's
 * segment, its result living on the destination. */
static tide_device *run_device(tide_op op, const td_meta *meta, tide_tensor *const *in)
{
    return op == TIDE_OP_TO ? in[0]->device : meta->device;
}

/* Runs an op eagerly with the recorder off. */
static tide_tensor *run_eager(tide_op op, const td_meta *meta, tide_tensor *dst,
                              tide_tensor *const *in, int nin, const tide_attrs *attrs,
                              const tide_tensor *out_view)
{
    if (dst)
        return td_run_eager_into(op, dst, in, nin, attrs) == 0 ? tide_retain(dst) : NULL;
    if (out_view)
        return tide_retain((tide_tensor *)out_view);
    return td_run_eager(op, meta, in, nin, attrs);
}

/* An op on another device than the pending segment's that reads nothing of the segment: a
 * 0-dim result of outside 0-dim CPU tensors (a wrapped number cast to a Vulkan operand's
 * dtype). It runs at once, without ending the segment. */
static bool side_op(const jit_trace *tr, const td_meta *meta, const tide_tensor *dst,
                    tide_tensor *const *in, int nin, const tide_tensor *out_view)
{
    if (dst || out_view || meta->ndim != 0 || !meta->device->host_buffers)
        return false;
    for (int i = 0; i < nin; i++) {
        if (in[i]->trace_node || in[i]->ndim != 0 || !in[i]->device->host_buffers)
            return false;
        for (int k = 0; k < tr->nwstor; k++)
            if (tr->b.wstor[k] == in[i]->storage)
                return false;
    }
    return true;
}

/* Why an op cannot be captured (C capture mode): the error, naming the op and its device. */
static tide_tensor *refuse_capture(tide_op op, const td_meta *meta, int nin)
{
    const char *why =
        nin > JIT_MAX_IN ? "it has more inputs than a node holds" : "its device runs no fusion groups";
    td_error("jit: %s with %d inputs on %s cannot be captured: %s", tide_op_name(op), nin,
             meta->device->name, why);
    return NULL;
}

/* Notes the storage an in-place op writes: an op after it that reads the storage without
 * going through the trace is no side op (see side_op). */
static int note_written_storage(jit_trace *tr, const tide_storage *storage)
{
    if (tr->nwstor == tr->b.wstorcap) {
        int nc = tr->b.wstorcap ? 2 * tr->b.wstorcap : 16;
        const tide_storage **ns = td_realloc(tr->b.wstor, sizeof *ns * (size_t)nc);
        if (!ns)
            return td_error("jit: out of memory");
        tr->b.wstor = ns;
        tr->b.wstorcap = nc;
    }
    tr->b.wstor[tr->nwstor++] = storage;
    return 0;
}

/* Records an in-place op into dst (its node reads dst's node then the inputs'); dst stands
 * for its own result. */
static tide_tensor *record_inplace(jit_trace *tr, tide_op op, const td_meta *meta,
                                   tide_tensor *dst, const int *ids, int nin,
                                   const tide_attrs *attrs)
{
    int d = jit_node_of(tr, dst);
    if (d < 0)
        return NULL;
    jit_node *nd = new_node(tr);
    if (!nd)
        return NULL;
    nd->kind = JN_INPLACE;
    nd->device = meta->device;
    nd->op = op;
    nd->dtype = dst->dtype;
    nd->ndim = dst->ndim;
    memcpy(nd->shape, dst->shape, sizeof(int64_t) * dst->ndim);
    nd->nin = nin + 1;
    nd->in[0] = d;
    for (int i = 0; i < nin; i++)
        nd->in[i + 1] = ids[i];
    if (attrs)
        nd->attrs = *attrs;
    tr->nwrites++;
    if (dst->storage && note_written_storage(tr, dst->storage) < 0)
        return NULL;
    return tide_retain(dst);
}

/* Records an op with a fresh result: a view of its input's root where the op made one
 * (out_view), else a stub tensor without storage standing for the node's value. */
static tide_tensor *record_op(jit_trace *tr, tide_op op, const td_meta *meta, const int *ids,
                              int nin, const tide_attrs *attrs, const tide_tensor *out_view)
{
    jit_node *nd = new_node(tr);
    if (!nd)
        return NULL;
    int id = tr->n - 1;
    nd->op = op;
    nd->device = meta->device;
    nd->dtype = (uint8_t)meta->dtype;
    nd->ndim = (uint8_t)meta->ndim;
    memcpy(nd->shape, meta->shape, sizeof(int64_t) * meta->ndim);
    nd->nin = nin;
    for (int i = 0; i < nin; i++)
        nd->in[i] = ids[i];
    if (attrs)
        nd->attrs = *attrs;
    tide_tensor *stub;
    if (out_view) {
        const jit_node *src = &tr->b.nodes[ids[0]];
        int root = src->root;
        const jit_node *rn = &tr->b.nodes[root];
        nd->kind = JN_VIEW;
        nd->root = root;
        memcpy(nd->strides, out_view->strides, sizeof(int64_t) * meta->ndim);
        nd->offset = out_view->offset - (rn->kind == JN_EXTERN ? rn->offset : 0);
        stub = tide_retain((tide_tensor *)out_view);
    } else {
        nd->kind = JN_OP;
        td_contiguous_strides(nd->ndim, nd->shape, nd->strides);
        stub = new_stub(meta);
        if (!stub) {
            tr->n--;
            return NULL;
        }
        stub->flags |= TD_TRACE_RESULT;
    }
    stub->trace_node = (void *)(intptr_t)(id + 1);
    tr->b.nodes[id].stub = tide_retain(stub);
    return stub;
}

tide_tensor *jit_trace_hook(void *ctx, tide_op op, const td_meta *meta, tide_tensor *dst,
                            tide_tensor *const *in, int nin, const tide_attrs *attrs,
                               const tide_tensor *out_view)
{
    jit_trace *tr = ctx;
    tide_device *rd = run_device(op, meta, in);
    /* with no segment pending and a device other than the CPU in use, a scalar op runs at once
     * too: it is most likely a wrapped number cast for that device's op (a CPU segment of it
     * would only break) */
    if (!tr->capture && !tide_op_is_collective(op) && /* the other ranks wait for every call */
        (tr->n > 0 ? tr->dev && rd != tr->dev : td_device_others_opened()) &&
        side_op(tr, meta, dst, in, nin, out_view))
        return run_eager(op, meta, dst, in, nin, attrs, out_view);
    if (tr->capture && tr->dev && rd != tr->dev && traceable(rd, nin)) {
        td_error("jit: %s on %s cannot be captured after ops on %s: a captured graph runs on "
                 "one device", tide_op_name(op), rd->name, tr->dev->name);
        return NULL;
    }
    if (tr->n > 0 && tr->dev && rd != tr->dev && !tr->capture) {
        /* the segment is on one device: run what is pending, and start one on this device */
        if (jit_flush(tr, NULL, 0, NULL) < 0)
            return NULL;
        td_log("jit", "break: %s runs on %s after ops on %s%s%s", tide_op_name(op), rd->name,
               tr->dev->name, *jit_where() ? " at " : "", jit_where());
        jit_stats_add(tr, 0, 0, 0, 1, 0, 0);
    }
    if (!traceable(rd, nin)) {
        if (tr->capture)
            return refuse_capture(op, meta, nin);
        /* a graph break: run what is pending, then this op eagerly */
        if (jit_flush(tr, NULL, 0, NULL) < 0)
            return NULL;
        td_log("jit", "break: %s is not traced (run eagerly)%s%s", tide_op_name(op),
               *jit_where() ? " at " : "", jit_where());
        jit_stats_add(tr, 0, 0, 0, 1, 0, 0);
        return run_eager(op, meta, dst, in, nin, attrs, out_view);
    }
    tr->dev = rd;
    /* a very long segment (a whole loop inside one jit call) runs in pieces, so compiles stay
     * fast and memory bounded */
    if (!tr->capture && tr->n >= SEGMENT_MAX_NODES) {
        td_log("jit", "break: %d ops pending; running them", tr->n);
        jit_stats_add(tr, 0, 0, 0, 1, 0, 0);
        if (jit_flush(tr, NULL, 0, NULL) < 0)
            return NULL;
    }
    int ids[JIT_MAX_IN];
    for (int i = 0; i < nin; i++) {
        ids[i] = jit_node_of(tr, in[i]);
        if (ids[i] < 0)
            return NULL;
    }
    if (dst)
        return record_inplace(tr, op, meta, dst, ids, nin, attrs);
    return record_op(tr, op, meta, ids, nin, attrs, out_view);
}

/* A thread's last trace, its buffers (nodes, map, key) kept for the next session: growing
 * them again on every call of a jit function showed in the profile of a cache hit. Freed when
 * the thread exits. */
int jit_materialize_hook(void *ctx, const tide_tensor *t)
{
    jit_trace *tr = ctx;
    if (tr->flushing)
        return 0;
    bool mine = jit_stub_node(tr, t) >= 0;
    bool written = false; /* an outside tensor with a pending write into its storage */
    for (int i = 0; i < tr->nwstor && !written && t->storage; i++)
        written = tr->b.wstor[i] == t->storage;
    if (!mine && !written) {
        if (!t->storage)
            return td_error("jit: a tensor without data was read (from another trace, or a view "
                            "of a traced tensor made outside the dispatcher)");
        return 0;
    }
    if (tr->capture)
        return td_error("jit: a tensor's data was read while capturing a graph (a graph break); "
                        "read it after tide_jit_end");
    const char *w = jit_where();
    td_log("jit", "break: tensor data read%s%s", *w ? " at " : "", w);
    jit_stats_add(tr, 0, 0, 0, 1, 0, 0);
    if (tr->on_break) {
        tr->flushing = 1; /* the hook may release stubs; nothing may jit_flush meanwhile */
        tr->on_break(tr->on_break_ctx);
        tr->flushing = 0;
    }
    return jit_flush(tr, NULL, 0, NULL);
}

