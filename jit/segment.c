/*
 * segment.c — ending a segment (at a graph break or the end of a trace): its outputs are the
 * stubs still referenced, its plan is found or compiled, it runs, and every live stub receives
 * its storage. A capture's end also builds its tide_graph here.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/log.h"
#include "../core/rng.h"
#include "trace.h"

/* Runs plan and gives every live stub its storage. */
static int run_segment(jit_trace *tr, jit_compiled *c, const int *outs, int nouts)
{
    tide_tensor **vals = td_calloc((size_t)(nouts ? nouts : 1), sizeof *vals);
    /* out_of[node] = 1 + its index in outs, 0 for a node that is no output (a segment of a
     * recurrent layer's backward has thousands of outputs: no search per stub) */
    int *out_of = td_calloc((size_t)tr->n + 1, sizeof *out_of);
    if (!vals || !out_of) {
        free(vals);
        free(out_of);
        return td_error("jit: out of memory");
    }
    for (int k = 0; k < nouts; k++)
        out_of[outs[k]] = k + 1;
    int rc = jit_execute(c, tr->b.ext, tr->b.nodes, vals);
    for (int i = 0; rc == 0 && i < tr->n; i++) {
        jit_node *nd = &tr->b.nodes[i];
        tide_tensor *s = nd->stub;
        int k = out_of[nd->root] - 1;
        /* a stub without storage: its root's value, if the root was an output */
        if (!s || s->storage || k < 0 || !vals[k])
            continue;
        s->storage = vals[k]->storage;
        td_ref_inc(&s->storage->refcount);
        s->offset += vals[k]->offset;
    }
    for (int k = 0; k < nouts; k++)
        tide_release(vals[k]);
    free(vals);
    free(out_of);
    return rc;
}

void jit_reset_segment(jit_trace *tr)
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
    jit_map_clear(tr);
}

/* Ends the segment: compiles (or finds) and runs it. forced: the capture's outputs. */
/* The segment's outputs: the roots (ops) of the forced tensors and of the stubs someone
 * besides the trace still holds, in node order into outs. Their count, or -1. */
static int find_outputs(const jit_trace *tr, tide_tensor *const *forced, int nforced, int *outs)
{
    int nouts = 0;
    char *is_out = td_calloc((size_t)tr->n + 1, 1);
    if (!is_out)
        return td_error("jit: out of memory");
    for (int i = 0; i < nforced; i++) {
        int id = forced[i] ? jit_stub_node(tr, forced[i]) : -1;
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
    return nouts;
}

/* The captured graph of the segment (C capture mode): its nodes, the tensors it captured and,
 * for each forced output, where tide_graph_run finds it (a planned output, or an extern
 * read). *out is set as soon as it exists; 0, or -1 with the error set. */
static int capture_graph(jit_trace *tr, jit_compiled *c, tide_tensor *const *forced,
                         int nforced, const int *outs, int nouts, tide_graph **out)
{
    tide_graph *g = td_calloc(1, sizeof *g);
    *out = g; /* the caller frees it, whole or not */
    if (!g)
        return td_error("jit: out of memory");
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
    g->out_node = td_calloc((size_t)nforced + 1, sizeof(int));
    if (!g->nodes || !g->captured || !g->out_root || !g->out_ext || !g->out_view ||
        !g->plan_index || !g->out_node)
        return td_error("jit: out of memory");
    g->dyn = tr->cap_dyn; /* a dynamic capture's masks move to its graph */
    tr->cap_dyn = NULL;
    memcpy(g->nodes, tr->b.nodes, sizeof *g->nodes * (size_t)tr->n);
    for (int i = 0; i < tr->n; i++)
        g->nodes[i].stub = NULL;
    for (int i = tr->ninputs; i < tr->next; i++)
        g->captured[i] = tide_retain(tr->b.ext[i]);
    for (int i = 0; i < nforced; i++) {
        int id = forced[i] ? jit_stub_node(tr, forced[i]) : -1;
        if (id < 0)
            id = forced[i] ? jit_map_find(tr, forced[i]) : -1;
        if (id < 0)
            return td_error("tide_jit_end: output %d was not computed or read by the capture",
                            i);
        const jit_node *nd = &tr->b.nodes[id];
        g->out_node[i] = id;
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
    return 0;
}

int jit_flush(jit_trace *tr, tide_tensor *const *forced, int nforced, tide_graph **graph)
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
    nouts = find_outputs(tr, forced, nforced, outs);
    if (nouts < 0)
        goto done;
    c = tr->cap_probe ? jit_compile_dynamic(tr, tr->b.nodes, tr->cap_probe, tr->n, tr->next,
                                            outs, nouts)
                      : jit_lookup_or_compile(tr, tr->b.nodes, tr->n, tr->next, outs, nouts);
    if (!c)
        goto done;
    if (graph && capture_graph(tr, c, forced, nforced, outs, nouts, &g) < 0)
        goto done;
    rc = graph && tr->no_run ? 0 : run_segment(tr, c, outs, nouts);
done:
    if (c && !g) /* a graph keeps the reference (tide_graph_free drops it) */
        jit_plan_release(c);
    free(outs);
    jit_reset_segment(tr);
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

