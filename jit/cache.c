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

typedef struct key_buf {
    int64_t *v;
    size_t n, cap;
} key_buf;

/* More than the entries key_node writes for one node. */
#define KEY_NODE_MAX (8 + JIT_MAX_IN + 3 * TIDE_MAX_DIMS + 2 * TIDE_MAX_DIMS)

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
                (int64_t)nd->ndim << 32 | (int64_t)nd->flags << 40 | (int64_t)nd->nin << 48 |
                (int64_t)nd->device->key_id << 56);
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

/* Finds or compiles the plan of nodes with outputs. NULL with the error set. */
jit_compiled *jit_lookup_or_compile(jit_trace *tr, const jit_node *nodes, int n, int nexterns,
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
        jit_stats_add(tr, 0, 1, 0, 0, 0, 0);
        td_log("jit", "hit: %d nodes%s%s", n, *jit_where() ? " at " : "", jit_where());
        return c;
    }
    double t0 = jit_now_ms();
    /* the segment's device; one of only outside tensors runs nothing */
    c = jit_compile(nodes, n, nexterns, outs, nouts, tr->dev ? tr->dev : td_default_device(), h);
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
    td_log("jit", "miss: compiled %d nodes into %d steps (%d fused groups) in %.2f ms%s%s", n,
           c->nsteps, c->ngroups, c->compile_ms, *jit_where() ? " at " : "", jit_where());
    return c;
}

void tide_jit_note_fallback(tide_jit_stats *stats)
{
    pthread_mutex_lock(&cache_lock);
    global_stats.fallbacks++;
    if (stats)
        stats->fallbacks++;
    pthread_mutex_unlock(&cache_lock);
}

