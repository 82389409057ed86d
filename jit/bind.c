/*
 * bind.c — a symbolic plan meets a run's sizes (jit/README.md, "Symbolic dims"): its nodes take
 * the shapes of the run's trace, its groups their domain, and a check that the groups still
 * fit (a fused row must fit in scratch). Static plans never come here.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "jit.h"

/* Each thread keeps the bound nodes of its last few symbolic plans: a run then copies only
 * the nodes whose sizes are symbolic (copying every node was a third of a small plan's run). */
#define BIND_CACHE 8
typedef struct bound_nodes {
    uint64_t serial; /* the plan's, 0 when empty */
    jit_node *nodes;
    int cap;
} bound_nodes;
typedef struct bind_cache {
    bound_nodes e[BIND_CACHE];
    int next; /* the entry replaced next */
} bind_cache;

static pthread_key_t bind_key;
static pthread_once_t bind_once = PTHREAD_ONCE_INIT;

static void bind_cache_free(void *p)
{
    bind_cache *bc = p;
    for (int i = 0; i < BIND_CACHE; i++)
        free(bc->e[i].nodes);
    free(bc);
}

static void bind_init(void) { (void)pthread_key_create(&bind_key, bind_cache_free); }

/* The calling thread's entry for plan c, holding a copy of its nodes; NULL when out of memory. */
static bound_nodes *entry_of(const jit_compiled *c)
{
    pthread_once(&bind_once, bind_init);
    bind_cache *bc = pthread_getspecific(bind_key);
    if (!bc) {
        if (!(bc = td_calloc(1, sizeof *bc)) || pthread_setspecific(bind_key, bc) != 0) {
            free(bc);
            return NULL;
        }
    }
    for (int i = 0; i < BIND_CACHE; i++)
        if (bc->e[i].serial == c->serial)
            return &bc->e[i];
    bound_nodes *e = &bc->e[bc->next];
    bc->next = (bc->next + 1) % BIND_CACHE;
    e->serial = 0;
    if (e->cap < c->nnodes) {
        jit_node *n = td_realloc(e->nodes, sizeof *n * (size_t)(c->nnodes ? c->nnodes : 1));
        if (!n)
            return NULL;
        e->nodes = n;
        e->cap = c->nnodes;
    }
    memcpy(e->nodes, c->nodes, sizeof *e->nodes * (size_t)c->nnodes);
    e->serial = c->serial;
    return e;
}

jit_node *jit_bind_nodes(const jit_compiled *c, const jit_node *rt)
{
    bound_nodes *e = entry_of(c);
    if (!e) {
        td_error("jit: out of memory binding a plan to its sizes");
        return NULL;
    }
    for (int i = 0; i < c->nnodes; i++) { /* the rank is the key's, so equal */
        if (!c->node_sym[i])
            continue;
        memcpy(e->nodes[i].shape, rt[i].shape, sizeof(int64_t) * rt[i].ndim);
        memcpy(e->nodes[i].strides, rt[i].strides, sizeof(int64_t) * rt[i].ndim);
        e->nodes[i].offset = rt[i].offset;
    }
    return e->nodes;
}

/* Elements per row of a row group whose domain is shape (its trailing nred dims). */
static int64_t row_length(const jit_group *g, const int64_t *shape)
{
    int64_t n = 1;
    for (int d = g->ndim - g->nred; d < g->ndim; d++)
        n *= shape[d];
    return n;
}

void jit_bind_group(const jit_group *g, const jit_node *nodes, jit_group *out)
{
    *out = *g;
    if (!g->symbolic)
        return;
    const int64_t *shape = nodes[g->domain_node].shape;
    memcpy(out->domain, shape, sizeof(int64_t) * (size_t)g->ndim);
    out->numel = td_numel(g->ndim, shape);
    if (g->row_mode) {
        out->rowlen = row_length(g, shape);
        out->nrows = out->rowlen ? out->numel / out->rowlen : 0;
    } else { /* tiles keep the compiled length: the device's layout holds them */
        out->nrows = (out->numel + g->rowlen - 1) / g->rowlen;
    }
}

bool jit_plan_fits(const jit_compiled *c, const jit_node *nodes)
{
    for (int k = 0; k < c->ngroups; k++) {
        const jit_group *g = &c->groups[k];
        if (!g->symbolic || !g->row_mode)
            continue;
        int64_t rl = row_length(g, nodes[g->domain_node].shape);
        if (rl < 1 || rl > JIT_ROW_MAX)
            return false;
    }
    return true;
}
