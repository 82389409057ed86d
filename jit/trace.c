/*
 * trace.c — the recorder (the dispatcher's trace hook), segments and graph breaks, the compile
 * cache with its guards, and the public jit API of tide.h (capture/replay for C, trace sessions
 * for Lua). See jit/README.md.
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
#include <time.h>

#include "../core/log.h"
#include "../core/rng.h"
#include "jit.h"

double jit_now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec * 1e3 + (double)ts.tv_nsec / 1e6;
}

/* ---- the trace of one thread -------------------------------------------------------------- */

/* A trace's buffers, grown as needed: a thread keeps them from session to session (its spare
 * trace), so a new session clears everything else and keeps these. */
typedef struct trace_buffers {
    jit_node *nodes;
    int cap;
    tide_tensor **ext; /* references */
    int extcap;
    int *ext_node; /* extern index -> its node */
    /* open-addressing map: outside tensor pointer -> extern node (cleared after each segment) */
    const tide_tensor **map_key;
    int *map_val;
    int map_cap;
    const tide_storage **wstor; /* storages of outside tensors written in this segment */
    int wstorcap;
    int64_t *key; /* the cache key being built */
    size_t key_cap;
} trace_buffers;

typedef struct jit_trace {
    trace_buffers b;
    int n;         /* nodes */
    int next;      /* externs */
    int map_used;
    int nwrites;
    int nwstor;
    int ninputs;       /* capture mode: the declared inputs are externs 0..ninputs-1 */
    bool capture;      /* C capture (tide_jit_begin): a graph break is an error */
    tide_jit_stats *stats;
    const char *(*where)(void *);
    void *where_ctx;
    void (*on_break)(void *);
    void *on_break_ctx;
    td_hooks saved;
    int flushing;
    tide_device *dev; /* the device of the pending segment's ops (a segment is on one) */
} jit_trace;

static _Thread_local jit_trace *current;
#define SEGMENT_MAX_NODES 4096

/* global statistics and the cache */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
#define CACHE_BUCKETS 1024
static jit_compiled *cache[CACHE_BUCKETS];
static tide_jit_stats global_stats;
static int cache_count;
#define CACHE_MAX 4096 /* plans kept; beyond, new plans run once and are dropped */

static void plan_release(jit_compiled *c)
{
    if (c && __atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) == 0)
        jit_compiled_free(c);
}

const char *jit_where(void)
{
    jit_trace *t = current;
    if (t && t->where && td_log_enabled("jit")) {
        const char *w = t->where(t->where_ctx);
        return w ? w : "";
    }
    return "";
}

static void stats_add(jit_trace *tr, int compiles, int hits, int misses, int breaks,
                      int fallbacks, double ms)
{
    pthread_mutex_lock(&cache_lock);
    tide_jit_stats *all[2] = {&global_stats, tr ? tr->stats : NULL};
    for (int i = 0; i < 2; i++) {
        if (!all[i])
            continue;
        all[i]->compiles += compiles;
        all[i]->hits += hits;
        all[i]->misses += misses;
        all[i]->breaks += breaks;
        all[i]->fallbacks += fallbacks;
        all[i]->compile_ms += ms;
    }
    pthread_mutex_unlock(&cache_lock);
}

static void map_clear(jit_trace *tr)
{
    if (tr->b.map_key)
        memset(tr->b.map_key, 0, sizeof(*tr->b.map_key) * (size_t)tr->b.map_cap);
    tr->map_used = 0;
}

static int map_find(const jit_trace *tr, const tide_tensor *t)
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
    tr->n++;
    return nd;
}

/* The node id of this trace's stub t, -1 when t is not a stub of this trace. */
static int stub_node(const jit_trace *tr, const tide_tensor *t)
{
    if (!t->trace_node)
        return -1;
    intptr_t i = (intptr_t)t->trace_node - 1;
    if (i >= 0 && i < tr->n && tr->b.nodes[i].stub == t)
        return (int)i;
    return -2; /* a stub of another trace */
}

/* The node standing for t: its stub's node or an extern (added on first use). */
static int node_of(jit_trace *tr, const tide_tensor *t)
{
    int i = stub_node(tr, t);
    if (i >= 0)
        return i;
    if (i == -2 && !t->storage)
        return td_error("jit: a tensor from another trace (or one left without a value by a "
                        "failed trace) was used");
    if (!t->storage)
        return td_error("jit: a tensor without data that is not a result of this trace was "
                        "used (a view made outside the dispatcher of a traced tensor?)");
    int e = map_find(tr, t);
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

static int flush(jit_trace *tr, tide_tensor *const *forced, int nforced, struct tide_graph **graph);

/* Ops the recorder hands to the eager kernels at a break instead of tracing them: ops on a
 * device that runs no fusion groups (no jit_run), and in C capture mode ops off the CPU
 * (tide_graph_run replays on the CPU). */
static bool traceable(const jit_trace *tr, tide_op op, const td_meta *meta, int nin)
{
    (void)op;
    return nin <= JIT_MAX_IN && meta->device->jit_run &&
           (!tr->capture || meta->device == tide_cpu_device());
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
    if (dst || out_view || meta->ndim != 0 || meta->device != tide_cpu_device())
        return false;
    for (int i = 0; i < nin; i++) {
        if (in[i]->trace_node || in[i]->ndim != 0 || in[i]->device != tide_cpu_device())
            return false;
        for (int k = 0; k < tr->nwstor; k++)
            if (tr->b.wstor[k] == in[i]->storage)
                return false;
    }
    return true;
}

static tide_tensor *trace_hook(void *ctx, tide_op op, const td_meta *meta, tide_tensor *dst,
                               tide_tensor *const *in, int nin, const tide_attrs *attrs,
                               const tide_tensor *out_view)
{
    jit_trace *tr = ctx;
    /* with no segment pending and a device other than the CPU in use (the registry lists each
     * opened device once), a scalar op runs at once too: it is most likely a wrapped number
     * cast for that device's op (a CPU segment of it would only break) */
    tide_device *first = td_device_opened(0);
    bool other = first && (first != tide_cpu_device() || td_device_opened(1));
    if (!tr->capture && (tr->n > 0 ? tr->dev && meta->device != tr->dev : other) &&
        side_op(tr, meta, dst, in, nin, out_view))
        return run_eager(op, meta, dst, in, nin, attrs, out_view);
    if (tr->n > 0 && tr->dev && meta->device != tr->dev && !tr->capture) {
        /* the segment is on one device: run what is pending, and start one on this device */
        if (flush(tr, NULL, 0, NULL) < 0)
            return NULL;
        td_log("jit", "break: %s runs on %s after ops on %s%s%s", tide_op_name(op),
               meta->device->name, tr->dev->name, *jit_where() ? " at " : "", jit_where());
        stats_add(tr, 0, 0, 0, 1, 0, 0);
    }
    if (!traceable(tr, op, meta, nin)) {
        if (tr->capture) {
            td_error("jit: %s with %d inputs cannot be captured", tide_op_name(op), nin);
            return NULL;
        }
        /* a graph break: run what is pending, then this op eagerly */
        if (flush(tr, NULL, 0, NULL) < 0)
            return NULL;
        td_log("jit", "break: %s is not traced (run eagerly)%s%s", tide_op_name(op),
               *jit_where() ? " at " : "", jit_where());
        stats_add(tr, 0, 0, 0, 1, 0, 0);
        return run_eager(op, meta, dst, in, nin, attrs, out_view);
    }
    tr->dev = meta->device;
    /* a very long segment (a whole loop inside one jit call) runs in pieces, so compiles stay
     * fast and memory bounded */
    if (!tr->capture && tr->n >= SEGMENT_MAX_NODES) {
        td_log("jit", "break: %d ops pending; running them", tr->n);
        stats_add(tr, 0, 0, 0, 1, 0, 0);
        if (flush(tr, NULL, 0, NULL) < 0)
            return NULL;
    }
    int ids[JIT_MAX_IN];
    for (int i = 0; i < nin; i++) {
        ids[i] = node_of(tr, in[i]);
        if (ids[i] < 0)
            return NULL;
    }
    if (dst) {
        int d = node_of(tr, dst);
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
        if (dst->storage) {
            if (tr->nwstor == tr->b.wstorcap) {
                int nc = tr->b.wstorcap ? 2 * tr->b.wstorcap : 16;
                const tide_storage **ns = td_realloc(tr->b.wstor, sizeof *ns * (size_t)nc);
                if (!ns) {
                    td_error("jit: out of memory");
                    return NULL;
                }
                tr->b.wstor = ns;
                tr->b.wstorcap = nc;
            }
            tr->b.wstor[tr->nwstor++] = dst->storage;
        }
        return tide_retain(dst);
    }
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

/* A thread's last trace, its buffers (nodes, map, key) kept for the next session: growing
 * them again on every call of a jit function showed in the profile of a cache hit. Freed when
 * the thread exits. */
static pthread_key_t spare_key;
static pthread_once_t spare_once = PTHREAD_ONCE_INIT;

static void trace_destroy(void *p)
{
    jit_trace *tr = p;
    free(tr->b.nodes);
    free(tr->b.ext);
    free(tr->b.ext_node);
    free(tr->b.wstor);
    free(tr->b.map_key);
    free(tr->b.map_val);
    free(tr->b.key);
    free(tr);
}

static void spare_init(void) { (void)pthread_key_create(&spare_key, trace_destroy); }

/* ---- keys and the cache -------------------------------------------------------------------- */

typedef struct key_buf {
    int64_t *v;
    size_t n, cap;
} key_buf;

/* More than the entries key_node writes for one node. */
#define KEY_NODE_MAX (9 + JIT_MAX_IN + 3 * TIDE_MAX_DIMS + 2 * TIDE_MAX_DIMS)

/* Room for KEY_NODE_MAX more entries; false (the buffer dropped) when memory ran out. */
static bool key_reserve(key_buf *k)
{
    if (k->n + KEY_NODE_MAX <= k->cap)
        return true;
    size_t nc = k->cap ? 2 * k->cap : 4096;
    int64_t *nv = td_realloc(k->v, sizeof *nv * nc);
    if (!nv)
        return false;
    k->v = nv;
    k->cap = nc;
    return true;
}

/* Called after key_reserve: no bounds check (a call per entry showed in the trace's profile). */
static inline void kput(key_buf *k, int64_t x) { k->v[k->n++] = x; }

static void key_node(key_buf *k, const jit_node *nd)
{
    kput(k, nd->kind | (int64_t)nd->op << 8 | (int64_t)nd->dtype << 24 |
                (int64_t)nd->ndim << 32 | (int64_t)nd->flags << 40 | (int64_t)nd->nin << 48);
    kput(k, (int64_t)(intptr_t)nd->device);
    for (int i = 0; i < nd->nin; i++)
        kput(k, nd->in[i]);
    kput(k, nd->root);
    for (int i = 0; i < nd->ndim; i++)
        kput(k, nd->shape[i]);
    if (nd->kind == JN_VIEW || nd->kind == JN_EXTERN) {
        for (int i = 0; i < nd->ndim; i++)
            kput(k, nd->strides[i]);
        if (nd->kind == JN_VIEW)
            kput(k, nd->offset);
        else
            kput(k, nd->storage_class);
    }
    if (nd->kind == JN_OP || nd->kind == JN_INPLACE || nd->kind == JN_VIEW) {
        const tide_attrs *a = &nd->attrs;
        kput(k, a->nints | (int64_t)a->keepdim << 32);
        bool random = nd->op == TIDE_OP_RANDOM;
        for (int i = 0; i < a->nints && i < 2 * TIDE_MAX_DIMS; i++)
            kput(k, random && i > 0 ? 0 : a->ints[i]); /* seed and offset are runtime */
        for (int i = 0; i < 3; i++) {
            int64_t bits;
            memcpy(&bits, &a->values[i], sizeof bits);
            kput(k, bits);
        }
    }
}

/* Four independent lanes, combined at the end: one lane's chain of multiplies made hashing
 * half of a cache hit's own time. */
static uint64_t key_hash(const int64_t *v, size_t n)
{
    uint64_t h[4] = {0xcbf29ce484222325ull, 0x84222325cbf29ce4ull, 0x9e3779b97f4a7c15ull,
                     0xc2b2ae3d27d4eb4full};
    size_t i = 0;
    for (; i + 4 <= n; i += 4)
        for (int l = 0; l < 4; l++) {
            h[l] ^= (uint64_t)v[i + l];
            h[l] *= 0x100000001b3ull;
            h[l] ^= h[l] >> 29;
        }
    for (; i < n; i++) {
        h[0] ^= (uint64_t)v[i];
        h[0] *= 0x100000001b3ull;
        h[0] ^= h[0] >> 29;
    }
    uint64_t r = n;
    for (int l = 0; l < 4; l++) {
        r ^= h[l];
        r *= 0x100000001b3ull;
        r ^= r >> 29;
    }
    return r;
}

/* The compiled plan for key, or NULL. Counts a hit. */
static jit_compiled *cache_find(uint64_t hash, const int64_t *key, size_t len)
{
    jit_compiled *c = cache[hash % CACHE_BUCKETS];
    for (; c; c = c->next)
        if (c->hash == hash && c->key_len == len && memcmp(c->key, key, len * sizeof *key) == 0)
            return c;
    return NULL;
}

void tide_jit_cache_clear(void)
{
    pthread_mutex_lock(&cache_lock);
    for (int b = 0; b < CACHE_BUCKETS; b++) {
        jit_compiled *c = cache[b];
        while (c) {
            jit_compiled *nx = c->next;
            plan_release(c); /* graphs keep theirs */
            c = nx;
        }
        cache[b] = NULL;
    }
    cache_count = 0;
    pthread_mutex_unlock(&cache_lock);
}

void tide_jit_global_stats(tide_jit_stats *s)
{
    if (!s)
        return;
    pthread_mutex_lock(&cache_lock);
    *s = global_stats;
    pthread_mutex_unlock(&cache_lock);
}

/* tide_empty_cache and tide_shutdown (core/runtime.c) release the cached plans, and with them the
 * compiled code no live graph uses, through this hook. */
static void release_hook(bool shutting_down)
{
    (void)shutting_down;
    tide_jit_cache_clear();
    pthread_once(&spare_once, spare_init);
    jit_trace *spare = pthread_getspecific(spare_key); /* this thread's, when not tracing */
    if (spare && spare != current) {
        (void)pthread_setspecific(spare_key, NULL);
        trace_destroy(spare);
    }
}

static void register_release_hook(void) { td_on_release(release_hook); }

/* Finds or compiles the plan of nodes with outputs. NULL with the error set. */
static jit_compiled *lookup_or_compile(jit_trace *tr, const jit_node *nodes, int n, int nexterns,
                                       const int *outs, int nouts)
{
    key_buf k = {tr->b.key, 0, tr->b.key_cap};
    bool ok = true;
    for (int i = 0; i < n && ok; i++)
        if ((ok = key_reserve(&k)))
            key_node(&k, &nodes[i]);
    ok = ok && key_reserve(&k);
    if (ok)
        kput(&k, -1);
    for (int i = 0; i < nouts && ok; i++)
        if ((ok = key_reserve(&k)))
            kput(&k, outs[i]);
    tr->b.key = k.v; /* kept for the next segment (the cache stores a copy) */
    tr->b.key_cap = k.cap;
    if (!ok) {
        td_error("jit: out of memory for a cache key");
        return NULL;
    }
    uint64_t h = key_hash(k.v, k.n);
    static pthread_once_t hook_once = PTHREAD_ONCE_INIT;
    pthread_once(&hook_once, register_release_hook);
    pthread_mutex_lock(&cache_lock);
    jit_compiled *c = cache_find(h, k.v, k.n);
    if (c)
        __atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED); /* the caller's */
    pthread_mutex_unlock(&cache_lock);
    if (c) {
        stats_add(tr, 0, 1, 0, 0, 0, 0);
        td_log("jit", "hit: %d nodes%s%s", n, *jit_where() ? " at " : "", jit_where());
        return c;
    }
    double t0 = jit_now_ms();
    c = jit_compile(nodes, n, nexterns, outs, nouts, h);
    if (!c)
        return NULL;
    c->compile_ms = jit_now_ms() - t0;
    c->refs = 1; /* the caller's */
    c->hash = h;
    c->key = td_malloc(sizeof *k.v * k.n);
    if (!c->key) {
        jit_compiled_free(c);
        td_error("jit: out of memory for a cache key");
        return NULL;
    }
    memcpy(c->key, k.v, sizeof *k.v * k.n);
    c->key_len = k.n;
    pthread_mutex_lock(&cache_lock);
    jit_compiled *other = cache_find(h, k.v, k.n);
    if (other) { /* another thread compiled the same graph meanwhile */
        __atomic_add_fetch(&other->refs, 1, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&cache_lock);
        jit_compiled_free(c);
        stats_add(tr, 0, 1, 0, 0, 0, 0);
        return other;
    }
    bool full = cache_count >= CACHE_MAX;
    if (!full) {
        c->refs++;
        c->next = cache[h % CACHE_BUCKETS];
        cache[h % CACHE_BUCKETS] = c;
        cache_count++;
    }
    pthread_mutex_unlock(&cache_lock);
    if (full)
        td_log("jit", "the cache holds %d plans: this one runs without being kept", CACHE_MAX);
    stats_add(tr, 1, 0, 1, 0, 0, c->compile_ms);
    td_log("jit", "miss: compiled %d nodes into %d steps (%d fused groups) in %.2f ms%s%s", n,
           c->nsteps, c->ngroups, c->compile_ms, *jit_where() ? " at " : "", jit_where());
    return c;
}

/* ---- graphs (capture and replay) ---------------------------------------------------------- */

typedef struct tide_graph {
    jit_compiled *plan;
    int nnodes;
    jit_node *nodes;      /* runtime attributes */
    int ninputs;
    int nexterns;
    tide_tensor **captured; /* externs ninputs.. (references) */
    int noutputs;
    /* per output: the node whose value it is (a root), and the view of it handed out */
    int *out_root;        /* -1: the output is extern out_ext */
    int *out_ext;
    jit_node *out_view;   /* layout (shape/strides/offset relative to the root) */
    int *plan_index;      /* out i -> index in plan->outputs */
} tide_graph;

void tide_graph_free(tide_graph *g)
{
    if (!g)
        return;
    plan_release(g->plan);
    /* also a graph flush() gave up on half made: captured may be missing */
    for (int i = g->ninputs; g->captured && i < g->nexterns; i++)
        tide_release(g->captured[i]);
    free(g->captured);
    free(g->nodes);
    free(g->out_root);
    free(g->out_ext);
    free(g->out_view);
    free(g->plan_index);
    free(g);
}

int tide_graph_num_outputs(const tide_graph *g) { return g ? g->noutputs : 0; }

/* Runs plan and gives every live stub its storage. */
static int run_segment(jit_trace *tr, jit_compiled *c, const int *outs, int nouts)
{
    tide_tensor **vals = td_calloc((size_t)(nouts ? nouts : 1), sizeof *vals);
    if (!vals)
        return td_error("jit: out of memory");
    int rc = jit_execute(c, tr->b.ext, tr->b.nodes, vals);
    if (rc == 0) {
        for (int i = 0; i < tr->n; i++) {
            jit_node *nd = &tr->b.nodes[i];
            tide_tensor *s = nd->stub;
            if (!s || s->storage)
                continue;
            /* a stub without storage: its root's value, if the root was an output */
            int root = nd->root;
            for (int k = 0; k < nouts; k++) {
                if (outs[k] != root || !vals[k])
                    continue;
                s->storage = vals[k]->storage;
                td_ref_inc(&s->storage->refcount);
                s->offset += vals[k]->offset;
                break;
            }
        }
    }
    for (int k = 0; k < nouts; k++)
        tide_release(vals[k]);
    free(vals);
    return rc;
}

static void reset_segment(jit_trace *tr)
{
    for (int i = 0; i < tr->n; i++) {
        tide_tensor *s = tr->b.nodes[i].stub;
        if (s) {
            s->trace_node = NULL;
            tide_release(s);
        }
    }
    for (int i = 0; i < tr->next; i++)
        tide_release(tr->b.ext[i]);
    tr->n = 0;
    tr->next = 0;
    tr->nwrites = 0;
    tr->nwstor = 0;
    map_clear(tr);
}

/* Ends the segment: compiles (or finds) and runs it. forced: the capture's outputs. */
static int flush(jit_trace *tr, tide_tensor *const *forced, int nforced, tide_graph **graph)
{
    if (tr->flushing)
        return 0;
    if (tr->n == 0 && !graph)
        return 0;
    tr->flushing = 1;
    int rc = -1;
    int *outs = td_malloc(sizeof(int) * (size_t)(tr->n + nforced + 1));
    int nouts = 0;
    tide_graph *g = NULL;
    jit_compiled *c = NULL;
    if (!outs) {
        td_error("jit: out of memory");
        goto done;
    }
    /* outputs: roots (ops) of the stubs someone besides the trace still holds */
    char *is_out = td_calloc((size_t)tr->n + 1, 1);
    if (!is_out) {
        td_error("jit: out of memory");
        goto done;
    }
    for (int i = 0; i < nforced; i++) {
        int id = forced[i] ? stub_node(tr, forced[i]) : -1;
        if (id >= 0 && tr->b.nodes[tr->b.nodes[id].root].kind == JN_OP)
            is_out[tr->b.nodes[id].root] = 1;
    }
    for (int i = 0; i < tr->n; i++) {
        tide_tensor *s = tr->b.nodes[i].stub;
        if (s && !s->storage && s->refcount > 1)
            is_out[tr->b.nodes[i].root] = 1;
    }
    for (int i = 0; i < tr->n; i++)
        if (is_out[i])
            outs[nouts++] = i;
    free(is_out);
    c = lookup_or_compile(tr, tr->b.nodes, tr->n, tr->next, outs, nouts);
    if (!c)
        goto done;
    if (graph) {
        g = td_calloc(1, sizeof *g);
        if (!g) {
            td_error("jit: out of memory");
            goto done;
        }
        g->plan = c;
        g->nnodes = tr->n;
        g->nodes = td_malloc(sizeof *g->nodes * (size_t)(tr->n ? tr->n : 1));
        g->ninputs = tr->ninputs;
        g->nexterns = tr->next;
        g->captured = td_calloc((size_t)(tr->next ? tr->next : 1), sizeof *g->captured);
        g->noutputs = nforced;
        g->out_root = td_calloc((size_t)nforced + 1, sizeof(int));
        g->out_ext = td_calloc((size_t)nforced + 1, sizeof(int));
        g->out_view = td_calloc((size_t)nforced + 1, sizeof(jit_node));
        g->plan_index = td_calloc((size_t)nforced + 1, sizeof(int));
        if (!g->nodes || !g->captured || !g->out_root || !g->out_ext || !g->out_view ||
            !g->plan_index) {
            td_error("jit: out of memory");
            goto done;
        }
        memcpy(g->nodes, tr->b.nodes, sizeof *g->nodes * (size_t)tr->n);
        for (int i = 0; i < tr->n; i++)
            g->nodes[i].stub = NULL;
        for (int i = tr->ninputs; i < tr->next; i++)
            g->captured[i] = tide_retain(tr->b.ext[i]);
        for (int i = 0; i < nforced; i++) {
            int id = forced[i] ? stub_node(tr, forced[i]) : -1;
            if (id < 0)
                id = forced[i] ? map_find(tr, forced[i]) : -1;
            if (id < 0) {
                td_error("tide_jit_end: output %d was not computed or read by the capture", i);
                goto done;
            }
            const jit_node *nd = &tr->b.nodes[id];
            g->out_view[i] = *nd;
            g->out_view[i].stub = NULL;
            if (nd->kind == JN_EXTERN) {
                g->out_root[i] = -1;
                g->out_ext[i] = nd->ext;
            } else if (tr->b.nodes[nd->root].kind == JN_EXTERN) {
                g->out_root[i] = -1;
                g->out_ext[i] = tr->b.nodes[nd->root].ext;
            } else {
                g->out_root[i] = nd->root;
                for (int k = 0; k < nouts; k++)
                    if (outs[k] == nd->root)
                        g->plan_index[i] = k;
            }
        }
    }
    rc = run_segment(tr, c, outs, nouts);
done:
    if (c && !g) /* a graph keeps the reference (tide_graph_free drops it) */
        plan_release(c);
    free(outs);
    reset_segment(tr);
    tr->flushing = 0;
    if (graph) {
        if (rc < 0) {
            tide_graph_free(g);
            g = NULL;
        }
        *graph = g;
    }
    return rc;
}

static int materialize_hook(void *ctx, const tide_tensor *t)
{
    jit_trace *tr = ctx;
    if (tr->flushing)
        return 0;
    bool mine = stub_node(tr, t) >= 0;
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
    stats_add(tr, 0, 0, 0, 1, 0, 0);
    if (tr->on_break) {
        tr->flushing = 1; /* the hook may release stubs; nothing may flush meanwhile */
        tr->on_break(tr->on_break_ctx);
        tr->flushing = 0;
    }
    return flush(tr, NULL, 0, NULL);
}

/* ---- sessions ---------------------------------------------------------------------------- */

static int session_begin(bool capture, tide_jit_stats *stats, const char *(*where)(void *),
                         void *where_ctx)
{
    if (current)
        return td_error("jit: this thread is already tracing (jit functions do not nest)");
    pthread_once(&spare_once, spare_init);
    jit_trace *tr = pthread_getspecific(spare_key);
    if (tr) { /* empty since its last session_free: only the buffers carry over */
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
    h->trace = trace_hook;
    h->trace_ctx = tr;
    h->materialize = materialize_hook;
    current = tr;
    return 0;
}

static void session_free(jit_trace *tr)
{
    reset_segment(tr);
    td_hooks *h = td_thread_hooks();
    h->trace = tr->saved.trace;
    h->trace_ctx = tr->saved.trace_ctx;
    h->materialize = tr->saved.materialize;
    current = NULL;
    if (pthread_getspecific(spare_key) || pthread_setspecific(spare_key, tr) != 0)
        trace_destroy(tr);
}

int tide_jit_trace_begin(tide_jit_stats *stats, const char *(*where)(void *), void *where_ctx)
{
    return session_begin(false, stats, where, where_ctx);
}

void tide_jit_trace_on_break(void (*fn)(void *ctx), void *ctx)
{
    if (current) {
        current->on_break = fn;
        current->on_break_ctx = ctx;
    }
}

int tide_jit_trace_end(void)
{
    jit_trace *tr = current;
    if (!tr)
        return td_error("tide_jit_trace_end: this thread is not tracing");
    int rc = flush(tr, NULL, 0, NULL);
    session_free(tr);
    return rc;
}

int tide_jit_trace_flush(void)
{
    jit_trace *tr = current;
    if (!tr)
        return 0;
    return flush(tr, NULL, 0, NULL);
}

bool tide_jit_is_tracing(void) { return current != NULL; }

void tide_jit_note_fallback(tide_jit_stats *stats)
{
    pthread_mutex_lock(&cache_lock);
    global_stats.fallbacks++;
    if (stats)
        stats->fallbacks++;
    pthread_mutex_unlock(&cache_lock);
}

int tide_jit_begin(tide_tensor *const *inputs, int ninputs)
{
    if (ninputs < 0 || (ninputs > 0 && !inputs))
        return td_error("tide_jit_begin: %d inputs given with %s", ninputs,
                        inputs ? "a list" : "no list");
    for (int i = 0; i < ninputs; i++) {
        if (!inputs[i])
            return td_error("tide_jit_begin: input %d is NULL", i);
        if (inputs[i]->trace_node && !inputs[i]->storage)
            return td_error("tide_jit_begin: input %d has no value (it came from a trace)", i);
    }
    if (session_begin(true, NULL, NULL, NULL) < 0)
        return -1;
    jit_trace *tr = current;
    for (int i = 0; i < ninputs; i++) {
        if (map_find(tr, inputs[i]) >= 0) {
            session_free(tr);
            return td_error("tide_jit_begin: input %d is given twice", i);
        }
        if (node_of(tr, inputs[i]) < 0) {
            session_free(tr);
            return -1;
        }
    }
    tr->ninputs = ninputs;
    return 0;
}

tide_graph *tide_jit_end(tide_tensor *const *outputs, int noutputs)
{
    jit_trace *tr = current;
    if (!tr || !tr->capture) {
        td_error("tide_jit_end: no capture was begun on this thread");
        return NULL;
    }
    if (noutputs < 0 || (noutputs > 0 && !outputs)) {
        td_error("tide_jit_end: %d outputs given with %s", noutputs, outputs ? "a list" : "no list");
        session_free(tr);
        return NULL;
    }
    for (int i = 0; i < noutputs; i++)
        if (!outputs[i]) {
            td_error("tide_jit_end: output %d is NULL", i);
            session_free(tr);
            return NULL;
        }
    tide_graph *g = NULL;
    flush(tr, outputs, noutputs, &g);
    session_free(tr);
    return g;
}

int tide_graph_run(tide_graph *g, tide_tensor *const *inputs, int ninputs, tide_tensor **outputs)
{
    if (!g)
        return td_error("tide_graph_run: graph is NULL");
    if (ninputs != g->ninputs)
        return td_error("tide_graph_run: the graph takes %d inputs; %d given", g->ninputs,
                        ninputs);
    if (g->noutputs && !outputs)
        return td_error("tide_graph_run: outputs is NULL; the graph has %d", g->noutputs);
    if (current)
        return td_error("tide_graph_run: called while this thread traces");
    /* guards: every input has the layout the graph was captured with */
    for (int i = 0; i < ninputs; i++) {
        const tide_tensor *t = inputs ? inputs[i] : NULL;
        if (!t)
            return td_error("tide_graph_run: input %d is NULL", i);
        if (t->trace_node && !t->storage)
            return td_error("tide_graph_run: input %d has no value", i);
        const jit_node *nd = NULL;
        for (int k = 0; k < g->nnodes; k++)
            if (g->nodes[k].kind == JN_EXTERN && g->nodes[k].ext == i) {
                nd = &g->nodes[k];
                break;
            }
        if (!nd)
            continue;
        char a[160], b[160];
        if (t->ndim != nd->ndim || memcmp(t->shape, nd->shape, sizeof(int64_t) * t->ndim) != 0)
            return td_error("tide_graph_run: input %d has shape %s; the graph was captured with "
                            "%s", i, td_shape_str(a, sizeof a, t->ndim, t->shape),
                            td_shape_str(b, sizeof b, nd->ndim, nd->shape));
        if (t->dtype != nd->dtype)
            return td_error("tide_graph_run: input %d is %s; the graph was captured with %s", i,
                            tide_dtype_name((tide_dtype)t->dtype),
                            tide_dtype_name((tide_dtype)nd->dtype));
        if (memcmp(t->strides, nd->strides, sizeof(int64_t) * t->ndim) != 0)
            return td_error("tide_graph_run: input %d has strides %s; the graph was captured "
                            "with %s (make it contiguous or capture again)", i,
                            td_shape_str(a, sizeof a, t->ndim, t->strides),
                            td_shape_str(b, sizeof b, nd->ndim, nd->strides));
        if (t->device != tide_cpu_device())
            return td_error("tide_graph_run: input %d is on %s; the graph runs on cpu", i,
                            t->device->name);
    }
    tide_tensor **ext = td_malloc(sizeof *ext * (size_t)(g->nexterns ? g->nexterns : 1));
    jit_node *nodes = td_malloc(sizeof *nodes * (size_t)(g->nnodes ? g->nnodes : 1));
    tide_tensor **vals = td_calloc((size_t)g->plan->noutputs + 1, sizeof *vals);
    int rc = -1;
    if (!ext || !nodes || !vals) {
        td_error("tide_graph_run: out of memory");
        goto done;
    }
    for (int i = 0; i < g->ninputs; i++)
        ext[i] = inputs[i];
    for (int i = g->ninputs; i < g->nexterns; i++)
        ext[i] = g->captured[i];
    memcpy(nodes, g->nodes, sizeof *nodes * (size_t)g->nnodes);
    for (int i = 0; i < g->nnodes; i++) /* random numbers: fresh ones on every run, as eager */
        if (nodes[i].kind == JN_OP && nodes[i].op == TIDE_OP_RANDOM) {
            uint64_t seed, off;
            td_rng_reserve((uint64_t)td_numel(nodes[i].ndim, nodes[i].shape), &seed, &off);
            nodes[i].attrs.ints[1] = (int64_t)seed;
            nodes[i].attrs.ints[2] = (int64_t)off;
        }
    if (jit_execute(g->plan, ext, nodes, vals) < 0)
        goto done;
    stats_add(NULL, 0, 1, 0, 0, 0, 0);
    for (int i = 0; i < g->noutputs; i++) {
        const jit_node *v = &g->out_view[i];
        tide_tensor *base = g->out_root[i] < 0 ? ext[g->out_ext[i]] : vals[g->plan_index[i]];
        int64_t off;
        if (g->out_root[i] < 0)
            off = v->kind == JN_EXTERN ? base->offset : base->offset + v->offset;
        else
            off = base->offset + (v->kind == JN_VIEW ? v->offset : 0);
        if (g->out_root[i] < 0 && v->kind == JN_EXTERN)
            outputs[i] = tide_retain(base);
        else
            outputs[i] = td_tensor_view(base, v->ndim, v->shape, v->strides, off);
        if (!outputs[i]) {
            for (int k = 0; k < i; k++) {
                tide_release(outputs[k]);
                outputs[k] = NULL;
            }
            goto done;
        }
    }
    rc = 0;
done:
    if (vals)
        for (int k = 0; k < g->plan->noutputs; k++)
            tide_release(vals[k]);
    free(vals);
    free(ext);
    free(nodes);
    return rc;
}
