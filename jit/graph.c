/*
 * graph.c — the C capture API: tide_jit_begin/tide_jit_end record a graph with declared inputs,
 * tide_graph_run replays it on new inputs (guarded: same shapes, dtypes, strides and devices as
 * captured). A capture runs on one device: an op on another is refused.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/log.h"
#include "../core/rng.h"
#include "trace.h"

void tide_graph_free(tide_graph *g)
{
    if (!g)
        return;
    jit_plan_release(g->plan);
    /* also a graph jit_flush() gave up on half made: captured may be missing */
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
    if (jit_session_begin(true, NULL, NULL, NULL) < 0)
        return -1;
    jit_trace *tr = jit_current;
    for (int i = 0; i < ninputs; i++) {
        if (jit_map_find(tr, inputs[i]) >= 0) {
            jit_session_free(tr);
            return td_error("tide_jit_begin: input %d is given twice", i);
        }
        if (jit_node_of(tr, inputs[i]) < 0) {
            jit_session_free(tr);
            return -1;
        }
    }
    tr->ninputs = ninputs;
    return 0;
}

tide_graph *tide_jit_end(tide_tensor *const *outputs, int noutputs)
{
    jit_trace *tr = jit_current;
    if (!tr || !tr->capture) {
        td_error("tide_jit_end: no capture was begun on this thread");
        return NULL;
    }
    if (noutputs < 0 || (noutputs > 0 && !outputs)) {
        td_error("tide_jit_end: %d outputs given with %s", noutputs, outputs ? "a list" : "no list");
        jit_session_free(tr);
        return NULL;
    }
    for (int i = 0; i < noutputs; i++)
        if (!outputs[i]) {
            td_error("tide_jit_end: output %d is NULL", i);
            jit_session_free(tr);
            return NULL;
        }
    tide_graph *g = NULL;
    jit_flush(tr, outputs, noutputs, &g);
    jit_session_free(tr);
    return g;
}

/* The guard on input i of a run: t has the layout, dtype and device the graph was captured
 * with (an input the capture never read passes). 0, or -1 with the error set. */
static int check_input(const tide_graph *g, int i, const tide_tensor *t)
{
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
        return 0;
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
    if (t->device != nd->device)
        return td_error("tide_graph_run: input %d is on %s; the graph was captured with it on %s",
                        i, t->device->name, nd->device->name);
    return 0;
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
    if (jit_current)
        return td_error("tide_graph_run: called while this thread traces");
    /* guards: every input has the layout the graph was captured with */
    for (int i = 0; i < ninputs; i++)
        if (check_input(g, i, inputs ? inputs[i] : NULL) < 0)
            return -1;
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
    jit_stats_add(NULL, 0, 1, 0, 0, 0, 0);
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

