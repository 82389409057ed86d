/*
 * bind.c — a symbolic plan meets a run's sizes (jit/README.md, "Symbolic dims"): its nodes take
 * the shapes of the run's trace, its groups their domain, and a check that the groups still
 * fit (a fused row must fit in scratch). Static plans never come here.
 */
#include <stdlib.h>
#include <string.h>

#include "jit.h"

jit_node *jit_bind_nodes(const jit_compiled *c, const jit_node *rt)
{
    jit_node *nodes = td_malloc(sizeof *nodes * (size_t)(c->nnodes ? c->nnodes : 1));
    if (!nodes) {
        td_error("jit: out of memory binding a plan to its sizes");
        return NULL;
    }
    memcpy(nodes, c->nodes, sizeof *nodes * (size_t)c->nnodes);
    for (int i = 0; i < c->nnodes; i++) { /* the rank is the key's, so equal */
        memcpy(nodes[i].shape, rt[i].shape, sizeof(int64_t) * rt[i].ndim);
        memcpy(nodes[i].strides, rt[i].strides, sizeof(int64_t) * rt[i].ndim);
        nodes[i].offset = rt[i].offset;
    }
    return nodes;
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
