/*
 * graph_replan.c — a loaded graph's plans for inputs its plan does not take but its declared
 * types do (a size 1 in a dynamic dim, other strides): each made from the file's nodes with
 * their shapes replayed at the inputs' layouts (replay.c), built as a static graph
 * (td_graph_build), and kept for later runs of the same layouts.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "graph_desc.h"

#define REPLAN_MAX 32

typedef struct replanner {
    td_graph_desc d;
    char device[64];
    pthread_mutex_t lock;
    int n;
    tide_graph *graphs[REPLAN_MAX];
} replanner;

void *td_graph_replanner_new(td_graph_desc *d, const char *device)
{
    replanner *r = td_calloc(1, sizeof *r);
    if (!r) {
        td_error("load_graph: out of memory");
        return NULL;
    }
    r->d = *d;
    memset(d, 0, sizeof *d);
    snprintf(r->device, sizeof r->device, "%s", device);
    pthread_mutex_init(&r->lock, NULL);
    return r;
}

void td_graph_replanner_free(void *owner)
{
    replanner *r = owner;
    if (!r)
        return;
    for (int i = 0; i < r->n; i++)
        tide_graph_free(r->graphs[i]);
    td_graph_desc_free(&r->d);
    pthread_mutex_destroy(&r->lock);
    free(r);
}

/* Input i against its node: rank and dtype, and each static dim, as saved. 0 or -1. */
static int check_replan_input(const td_graph_desc *d, int i, const tide_tensor *t)
{
    const td_graph_node *n = &d->nodes[i];
    char a[160], b[160];
    if (t->ndim != n->ndim || t->dtype != n->dtype)
        return td_error("tide_graph_run: input %d is %s with shape %s; the graph takes %s with "
                        "%d dims", i, tide_dtype_name((tide_dtype)t->dtype),
                        td_shape_str(a, sizeof a, t->ndim, t->shape),
                        tide_dtype_name((tide_dtype)n->dtype), n->ndim);
    for (int k = 0; k < n->ndim; k++)
        if (!(d->dyn && (d->dyn[i] >> k & 1)) && t->shape[k] != n->shape[k])
            return td_error("tide_graph_run: input %d has shape %s; the graph was saved with "
                            "%s, and dim %d is not dynamic", i,
                            td_shape_str(a, sizeof a, t->ndim, t->shape),
                            td_shape_str(b, sizeof b, n->ndim, n->shape), k);
    return 0;
}

/* A graph for the inputs' layouts: the nodes' shapes replayed at them (replay.c), built as a
 * static graph. */
static tide_graph *build_at(const td_graph_desc *d, const char *device,
                            tide_tensor *const *inputs)
{
    jit_node *cap = td_calloc((size_t)d->nnodes + 1, sizeof *cap);
    jit_node *now = td_calloc((size_t)d->nnodes + 1, sizeof *now);
    td_graph_node *out = td_calloc((size_t)d->nnodes + 1, sizeof *out);
    tide_graph *g = NULL;
    if (!cap || !now || !out) {
        td_error("tide_graph_run: out of memory");
        goto done;
    }
    for (int k = 0; k < d->nnodes; k++)
        jit_graph_node_to_jit(&d->nodes[k], &cap[k]);
    memcpy(now, cap, sizeof *now * (size_t)d->nnodes);
    for (int i = 0; i < d->ninputs; i++) {
        memcpy(now[i].shape, inputs[i]->shape, sizeof(int64_t) * inputs[i]->ndim);
        memcpy(now[i].strides, inputs[i]->strides, sizeof(int64_t) * inputs[i]->ndim);
    }
    if (jit_replay_shapes(cap, now, d->nnodes, "tide_graph_run", NULL, NULL) < 0)
        goto done;
    for (int k = 0; k < d->nnodes; k++) {
        out[k] = d->nodes[k];
        memcpy(out[k].shape, now[k].shape, sizeof out[k].shape);
        memcpy(out[k].strides, now[k].strides, sizeof out[k].strides);
        out[k].offset = k < d->ninputs ? 0 : now[k].offset;
        if (d->nodes[k].kind == TD_GN_EXTERN)
            out[k].offset = d->nodes[k].offset;
    }
    td_graph_desc at = *d;
    at.nodes = out;
    at.dyn = NULL;
    g = td_graph_build(&at, device);
done:
    free(cap);
    free(now);
    free(out);
    return g;
}

tide_graph *td_graph_replan(void *owner, tide_tensor *const *inputs, int ninputs)
{
    replanner *r = owner;
    if (ninputs != r->d.ninputs)
        return td_error("tide_graph_run: the graph takes %d inputs; %d given", r->d.ninputs,
                        ninputs), NULL;
    for (int i = 0; i < ninputs; i++)
        if (check_replan_input(&r->d, i, inputs[i]) < 0)
            return NULL;
    pthread_mutex_lock(&r->lock);
    tide_graph *g = NULL;
    for (int i = 0; i < r->n && !g; i++)
        if (jit_graph_inputs_fit(r->graphs[i], inputs))
            g = r->graphs[i];
    if (!g && r->n == REPLAN_MAX)
        td_error("tide_graph_run: %d input layouts already have plans of their own for this "
                 "graph; export it with its varying dims dynamic", REPLAN_MAX);
    else if (!g && (g = build_at(&r->d, r->device, inputs)))
        r->graphs[r->n++] = g;
    pthread_mutex_unlock(&r->lock);
    return g;
}
