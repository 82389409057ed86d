/*
 * cache.c — the compile cache: a segment's structure as a key (ops, attributes, layouts, which
 * results leave it; never the values of outside tensors), its hash, the plans kept by key,
 * and the statistics of compiles, hits, breaks and fallbacks.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/log.h"
#include "../core/rng.h"
#include "trace.h"


/* global statistics and the cache */
static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
#define CACHE_BUCKETS 1024
static jit_compiled *cache[CACHE_BUCKETS];
static tide_jit_stats global_stats;
static int cache_count;
#define CACHE_MAX 4096 /* plans kept; beyond, new plans run once and are dropped */

void jit_plan_release(jit_compiled *c)
{
    if (c && __atomic_sub_fetch(&c->refs, 1, __ATOMIC_ACQ_REL) == 0)
        jit_compiled_free(c);
}

void jit_stats_add(jit_trace *tr, int compiles, int hits, int misses, int breaks,
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

/* ---- keys and the cache -------------------------------------------------------------------- */

/* A key being built: the structure (v) and the sizes (dims, each with its node: symbolic.c). */
typedef struct key_buf {
    int64_t *v;
    size_t n, cap;
    int64_t *dims;
    int *dim_node;
    size_t nd, dcap;
} key_buf;

/* More than the entries key_node writes for one node, in each part. */
#define KEY_NODE_MAX (8 + JIT_MAX_IN + 3 * TIDE_MAX_DIMS + 2 * TIDE_MAX_DIMS)

/* Room for KEY_NODE_MAX more entries in both parts; false when memory ran out. */
static bool key_reserve(key_buf *k)
{
    if (k->n + KEY_NODE_MAX > k->cap) {
        size_t nc = k->cap ? 2 * k->cap : 4096;
        int64_t *nv = td_realloc(k->v, sizeof *nv * nc);
        if (!nv)
            return false;
        k->v = nv;
        k->cap = nc;
    }
    if (k->nd + KEY_NODE_MAX > k->dcap) {
        size_t nc = k->dcap ? 2 * k->dcap : 4096;
        int64_t *nd = td_realloc(k->dims, sizeof *nd * nc);
        if (nd)
            k->dims = nd;
        int *nn = nd ? td_realloc(k->dim_node, sizeof *nn * nc) : NULL;
        if (!nn)
            return false;
        k->dim_node = nn;
        k->dcap = nc;
    }
    return true;
}

/* Called after key_reserve: no bounds check (a call per entry showed in the trace's profile). */
static inline void kput(key_buf *k, int64_t x) { k->v[k->n++] = x; }
static inline void dput(key_buf *k, int64_t x, int node)
{
    k->dim_node[k->nd] = node;
    k->dims[k->nd++] = x;
}

/* Whether a layout is contiguous: part of the structure, since a plan reads such an operand in
 * place (its sizes may be symbolic, its contiguity may not change). */
static bool node_contiguous(const jit_node *nd)
{
    int64_t expect = 1;
    for (int d = nd->ndim - 1; d >= 0; d--) {
        if (nd->shape[d] != 1 && nd->strides[d] != expect)
            return false;
        expect *= nd->shape[d];
    }
    return true;
}

static void key_node(key_buf *k, const jit_node *nd, int i)
{
    bool layout = nd->kind == JN_VIEW || nd->kind == JN_EXTERN;
    kput(k, nd->kind | (int64_t)nd->op << 8 | (int64_t)nd->dtype << 24 |
                (int64_t)nd->ndim << 32 | (int64_t)nd->flags << 40 | (int64_t)nd->nin << 48 |
                (int64_t)nd->device->key_id << 56);
    for (int j = 0; j < nd->nin; j++)
        kput(k, nd->in[j]);
    kput(k, nd->root | (int64_t)(layout && node_contiguous(nd)) << 32);
    for (int d = 0; d < nd->ndim; d++)
        dput(k, nd->shape[d], i);
    if (layout) {
        for (int d = 0; d < nd->ndim; d++)
            dput(k, nd->strides[d], i);
        if (nd->kind == JN_VIEW)
            dput(k, nd->offset, i);
        else
            kput(k, nd->storage_class);
    }
    if (nd->kind == JN_OP || nd->kind == JN_INPLACE || nd->kind == JN_VIEW) {
        const tide_attrs *a = &nd->attrs;
        kput(k, a->nints | (int64_t)a->keepdim << 32);
        bool random = nd->op == TIDE_OP_RANDOM;
        /* a view's attributes are sizes (its layout is what runs); an op's are its meaning */
        for (int j = 0; j < a->nints && j < 2 * TIDE_MAX_DIMS; j++) {
            if (nd->kind == JN_VIEW)
                dput(k, a->ints[j], i);
            else
                kput(k, random && j > 0 ? 0 : a->ints[j]); /* seed and offset are runtime */
        }
        for (int j = 0; j < 3; j++) {
            int64_t bits;
            memcpy(&bits, &a->values[j], sizeof bits);
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

/* The plan for a segment, or NULL: a static plan of the same structure and sizes first, else
 * (where allowed: not for a function with dynamic = false) a symbolic one whose guards hold.
 * *similar receives the latest plan of the same structure (what a miss generalizes from), or
 * NULL. Under cache_lock. */
static jit_compiled *cache_find(uint64_t hash, const key_buf *k, const jit_node *nodes,
                                bool symbolic_ok, jit_compiled **similar)
{
    jit_compiled *symbolic = NULL;
    *similar = NULL;
    for (jit_compiled *c = cache[hash % CACHE_BUCKETS]; c; c = c->next) {
        if (c->hash != hash || c->key_len != k->n ||
            memcmp(c->key, k->v, k->n * sizeof *k->v) != 0 || c->dims_len != k->nd)
            continue;
        if (!*similar)
            *similar = c; /* buckets are newest first */
        if (!c->dim_class) {
            if (memcmp(c->dims, k->dims, k->nd * sizeof *k->dims) == 0)
                return c;
        } else if (symbolic_ok && !symbolic && jit_guards_hold(c, k->dims, nodes)) {
            symbolic = c;
        }
    }
    return symbolic;
}

void tide_jit_cache_clear(void)
{
    pthread_mutex_lock(&cache_lock);
    for (int b = 0; b < CACHE_BUCKETS; b++) {
        jit_compiled *c = cache[b];
        while (c) {
            jit_compiled *nx = c->next;
            jit_plan_release(c); /* graphs keep theirs */
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
    jit_drop_spare();
}

static void register_release_hook(void) { td_on_release(release_hook); }

/* Appends the key of nodes with outputs to k (nouts < 0: the nodes' part alone, without the
 * output list); false when memory ran out. */
static bool key_append(key_buf *k, const jit_node *nodes, int n, const int *outs, int nouts)
{
    bool ok = true;
    for (int i = 0; i < n && ok; i++)
        if ((ok = key_reserve(k)))
            key_node(k, &nodes[i], i);
    ok = ok && key_reserve(k);
    if (ok)
        kput(k, -1);
    for (int i = 0; i < nouts && ok; i++)
        if ((ok = key_reserve(k)))
            kput(k, outs[i]);
    return ok;
}

/* The key of nodes with outputs into k (the trace's buffers, kept for the next segment). */
static bool build_key(jit_trace *tr, key_buf *k, const jit_node *nodes, int n, const int *outs,
                      int nouts)
{
    *k = (key_buf){tr->b.key, 0, tr->b.key_cap, tr->b.dims, tr->b.dim_node, 0, tr->b.dims_cap};
    bool ok = key_append(k, nodes, n, outs, nouts);
    /* The thread's autocast dtype: a segment recorded under autocast is never replayed outside
     * it, nor the other way (its casts are nodes too; this keeps the rule explicit). */
    ok = ok && key_reserve(k);
    if (ok)
        kput(k, tide_get_autocast());
    tr->b.key = k->v;
    tr->b.key_cap = k->cap;
    tr->b.dims = k->dims;
    tr->b.dim_node = k->dim_node;
    tr->b.dims_cap = k->dcap;
    if (!ok)
        td_error("jit: out of memory for a cache key");
    return ok;
}

static void key_free(key_buf *k)
{
    free(k->v);
    free(k->dims);
    free(k->dim_node);
}

/* Keeps the key and sizes in plan c: static, or symbolic where sym says (NULL: static). */
static int keep_key(jit_compiled *c, const key_buf *k, uint64_t h, const char *sym)
{
    c->hash = h;
    c->key = td_malloc(sizeof *k->v * k->n);
    c->dims = td_malloc(sizeof *k->dims * (k->nd ? k->nd : 1));
    if (!c->key || !c->dims)
        return td_error("jit: out of memory for a cache key");
    memcpy(c->key, k->v, sizeof *k->v * k->n);
    memcpy(c->dims, k->dims, sizeof *k->dims * k->nd);
    c->key_len = k->n;
    c->dims_len = k->nd;
    return sym ? jit_symbolic_classes(k->dims, sym, k->nd, &c->dim_class) : 0;
}

/* Says why a segment of a structure met before missed, and what the new plan does about it. */
static void note_recompile(jit_trace *tr, const jit_compiled *similar, const key_buf *k,
                           const jit_node *nodes, bool symbolic)
{
    char why[200], line[400];
    jit_explain_miss(similar, k->dims, k->dim_node, nodes, why, sizeof why);
    tide_device *dev = tr->dev ? tr->dev : td_default_device();
    snprintf(line, sizeof line, "%s: %s%s", why,
             symbolic ? "sizes made symbolic"
             : tr->static_only ? "compiled for this shape (dynamic = false)"
             : !dev->jit_runtime_sizes ? "compiled for this shape (its device has no runtime sizes)"
                                       : "compiled for this shape",
             symbolic && !similar->dim_class ? " (the static plan of the sizes before is kept: "
                                               "a hit prefers it)" : "");
    td_log("jit", "recompile%s%s: %s", *jit_where() ? " at " : "", jit_where(), line);
    if (tr->fn)
        jit_function_note_recompile(tr->fn, line);
}

/* Compiles the plan of a segment that missed (similar: the latest plan of its structure, or
 * NULL), symbolic where jit_choose_symbolic says. NULL with the error set. */
static jit_compiled *compile_segment(jit_trace *tr, const key_buf *k, uint64_t h,
                                     const jit_node *nodes, int n, int nexterns,
                                     const int *outs, int nouts, const jit_compiled *similar)
{
    char *sym = td_malloc(k->nd ? k->nd : 1);
    if (!sym) {
        td_error("jit: out of memory");
        return NULL;
    }
    bool symbolic = jit_choose_symbolic(tr, similar, k->dims, k->nd, sym);
    char *node_sym = symbolic ? jit_symbolic_nodes(sym, k->dim_node, k->nd, n) : NULL;
    if (similar)
        note_recompile(tr, similar, k, nodes, symbolic);
    jit_compiled *c = NULL;
    if (!symbolic || node_sym) {
        double t0 = jit_now_ms();
        /* the segment's device; one of only outside tensors runs nothing */
        c = jit_compile(nodes, n, nexterns, outs, nouts, tr->dev ? tr->dev : td_default_device(),
                        h, node_sym);
        if (c)
            c->compile_ms = jit_now_ms() - t0;
        if (c && keep_key(c, k, h, symbolic ? sym : NULL) < 0) {
            jit_compiled_free(c);
            c = NULL;
        }
    }
    free(sym);
    free(node_sym);
    return c;
}

/* Finds or compiles the plan of nodes with outputs. NULL with the error set. */
jit_compiled *jit_lookup_or_compile(jit_trace *tr, const jit_node *nodes, int n, int nexterns,
                                       const int *outs, int nouts)
{
    key_buf k;
    if (!build_key(tr, &k, nodes, n, outs, nouts))
        return NULL;
    uint64_t h = key_hash(k.v, k.n);
    static pthread_once_t hook_once = PTHREAD_ONCE_INIT;
    pthread_once(&hook_once, register_release_hook);
    jit_compiled *similar;
    pthread_mutex_lock(&cache_lock);
    jit_compiled *c = cache_find(h, &k, nodes, !tr->static_only, &similar);
    if (c)
        __atomic_add_fetch(&c->refs, 1, __ATOMIC_RELAXED); /* the caller's */
    if (similar) /* kept alive while it is read below */
        __atomic_add_fetch(&similar->refs, 1, __ATOMIC_RELAXED);
    pthread_mutex_unlock(&cache_lock);
    if (c) {
        jit_plan_release(similar);
        jit_stats_add(tr, 0, 1, 0, 0, 0, 0);
        td_log("jit", "hit: %d nodes%s%s%s", n, c->dim_class ? " (symbolic plan)" : "",
               *jit_where() ? " at " : "", jit_where());
        return c;
    }
    c = compile_segment(tr, &k, h, nodes, n, nexterns, outs, nouts, similar);
    bool new_structure = similar == NULL;
    jit_plan_release(similar);
    if (!c)
        return NULL;
    c->refs = 1; /* the caller's */
    pthread_mutex_lock(&cache_lock);
    jit_compiled *other = cache_find(h, &k, nodes, !tr->static_only, &similar);
    if (other) { /* another thread compiled the same graph meanwhile */
        __atomic_add_fetch(&other->refs, 1, __ATOMIC_RELAXED);
        pthread_mutex_unlock(&cache_lock);
        jit_compiled_free(c);
        jit_stats_add(tr, 0, 1, 0, 0, 0, 0);
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
    jit_stats_add(tr, 1, 0, 1, 0, 0, c->compile_ms);
    td_log("jit", "miss (%s): compiled %d nodes into %d steps (%d fused groups%s) in %.2f ms%s%s",
           new_structure ? "a structure not met before" : "the guards above", n, c->nsteps,
           c->ngroups, c->dim_class ? ", symbolic" : "", c->compile_ms,
           *jit_where() ? " at " : "", jit_where());
    return c;
}

/* ---- dynamic captures (graph.c) ------------------------------------------------------------ */

/* sym[p]: size p of nodes' key differs in probe's (a size of the dynamic dims). Whether any
 * does; -1 with the error set when the two keys' structures differ. */
static int probe_symbolic(const key_buf *a, const key_buf *b, char *sym)
{
    if (a->n != b->n || memcmp(a->v, b->v, sizeof *a->v * a->n) != 0 || a->nd != b->nd)
        return td_error("tide_jit_end: the captured graph's structure changes with its dynamic "
                        "sizes (a view or input that is contiguous at one size and not at "
                        "another): capture it without dynamic dims");
    int any = 0;
    for (size_t p = 0; p < a->nd; p++) {
        sym[p] = a->dims[p] != b->dims[p];
        if (sym[p] && a->dims[p] < 2) /* a plan takes a symbolic size to be at least 2 */
            return td_error("tide_jit_end: a size of the graph follows the dynamic dims but is "
                            "%lld at capture (sizes 0 and 1 specialize): capture at other sizes",
                            (long long)a->dims[p]);
        any |= sym[p];
    }
    return any;
}

jit_compiled *jit_compile_dynamic(jit_trace *tr, const jit_node *nodes, const jit_node *probe,
                                  int n, int nexterns, const int *outs, int nouts)
{
    key_buf a = {0}, b = {0};
    jit_compiled *c = NULL;
    char *sym = NULL, *node_sym = NULL;
    tide_device *dev = tr->dev ? tr->dev : td_default_device();
    if (!key_append(&a, nodes, n, outs, nouts) || !key_append(&b, probe, n, outs, nouts) ||
        !(sym = td_malloc(a.nd ? a.nd : 1))) {
        td_error("jit: out of memory for a cache key");
        goto done;
    }
    int any = probe_symbolic(&a, &b, sym);
    if (any < 0)
        goto done;
    if (any && !dev->jit_runtime_sizes) {
        td_error("tide_jit_end: %s runs no plans with runtime sizes: capture without dynamic "
                 "dims", dev->name);
        goto done;
    }
    if (any && !(node_sym = jit_symbolic_nodes(sym, a.dim_node, a.nd, n)))
        goto done;
    double t0 = jit_now_ms();
    uint64_t h = key_hash(a.v, a.n);
    c = jit_compile(nodes, n, nexterns, outs, nouts, dev, h, node_sym);
    if (c && keep_key(c, &a, h, any ? sym : NULL) < 0) {
        jit_compiled_free(c);
        c = NULL;
    }
    if (c) {
        c->compile_ms = jit_now_ms() - t0;
        c->refs = 1; /* the caller's: the plan is kept by its graph alone */
        jit_stats_add(tr, 1, 0, 1, 0, 0, c->compile_ms);
        td_log("jit", "dynamic capture: compiled %d nodes into %d steps (%d fused groups%s) in "
               "%.2f ms", n, c->nsteps, c->ngroups, any ? ", symbolic" : "", c->compile_ms);
    }
done:
    key_free(&a);
    key_free(&b);
    free(sym);
    free(node_sym);
    return c;
}

struct jit_key_scratch {
    key_buf k;
};

void jit_key_scratch_free(jit_key_scratch *s)
{
    if (s)
        key_free(&s->k);
    free(s);
}

/* jit_plan_serves with the key built in *k (its buffers grown there). */
static int serves_key(const jit_compiled *c, const jit_node *nodes, int n, char *buf,
                      size_t size, key_buf *k)
{
    if (!key_append(k, nodes, n, NULL, 0))
        return td_error("jit: out of memory for a cache key");
    if (k->n > c->key_len || memcmp(k->v, c->key, sizeof *k->v * k->n) != 0 ||
        k->nd != c->dims_len) {
        snprintf(buf, size, "a view's or input's layout changed its kind (contiguous or not)");
        return 0;
    }
    if (c->dim_class ? !jit_guards_hold(c, k->dims, nodes)
                     : memcmp(k->dims, c->dims, sizeof *k->dims * k->nd) != 0) {
        jit_explain_miss(c, k->dims, k->dim_node, nodes, buf, size);
        return 0;
    }
    return 1;
}

/* scratch (may be NULL) keeps the key's buffers for the next call: a 12-layer decoding step's
 * key grew through four reallocations on every run. */
int jit_plan_serves(const jit_compiled *c, const jit_node *nodes, int n, char *buf, size_t size,
                    jit_key_scratch **scratch)
{
    if (scratch && !*scratch)
        *scratch = td_calloc(1, sizeof **scratch);
    key_buf k = scratch && *scratch ? (*scratch)->k : (key_buf){0};
    k.n = k.nd = 0;
    int serves = serves_key(c, nodes, n, buf, size, &k);
    if (scratch && *scratch)
        (*scratch)->k = k;
    else
        key_free(&k);
    return serves;
}

void tide_jit_note_fallback(tide_jit_stats *stats)
{
    pthread_mutex_lock(&cache_lock);
    global_stats.fallbacks++;
    if (stats)
        stats->fallbacks++;
    pthread_mutex_unlock(&cache_lock);
}

