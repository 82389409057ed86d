/*
 * graph.c — the C capture API: tide_jit_begin/tide_jit_end record a graph with declared inputs,
 * tide_graph_run replays it on new inputs (guarded: same shapes, dtypes, strides and devices as
 * captured). A capture runs on one device: an op on another is refused. A dynamic capture
 * (tide_jit_begin_dynamic) has a symbolic plan: each run replays the graph's shapes at the
 * inputs' sizes (replay.c) and checks the plan's guards; tide_jit_end tries other sizes first.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/log.h"
#include "../core/rng.h"
#include "../core/tide_internal.h"
#include "trace.h"

void tide_graph_free(tide_graph *g)
{
    if (!g)
        return;
    jit_plan_release(g->plan);
    td_graph_info_free(g->info);
    /* also a graph jit_flush() gave up on half made: captured may be missing */
    for (int i = g->ninputs; g->captured && i < g->nexterns; i++)
        tide_release(g->captured[i]);
    free(g->captured);
    free(g->nodes);
    free(g->out_root);
    free(g->out_ext);
    free(g->out_view);
    free(g->plan_index);
    free(g->out_node);
    free(g->dyn);
    free(g->scratch);
    free(g->dirty);
    jit_key_scratch_free(g->key);
    free(g->input_index);
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

/* Whether a layout is row-major contiguous (size-1 dims may have any stride). */
static bool contiguous_layout(int ndim, const int64_t *shape, const int64_t *strides)
{
    int64_t expect = 1;
    for (int d = ndim - 1; d >= 0; d--) {
        if (shape[d] != 1 && strides[d] != expect)
            return false;
        expect *= shape[d];
    }
    return true;
}

/* Each mask names dims the input has, each of size at least 2. 0 or -1. */
static int check_masks(tide_tensor *const *inputs, int ninputs, const uint32_t *masks)
{
    for (int i = 0; i < ninputs && inputs; i++) {
        const tide_tensor *t = inputs[i];
        if (!t || !masks[i])
            continue;
        if (t->ndim < 32 && masks[i] >> t->ndim)
            return td_error("tide_jit_begin_dynamic: input %d's mask 0x%x names dims beyond its "
                            "%d", i, (unsigned)masks[i], t->ndim);
        for (int d = 0; d < t->ndim; d++)
            if ((masks[i] >> d & 1) && t->shape[d] < 2)
                return td_error("tide_jit_begin_dynamic: input %d dim %d is %lld: a dynamic dim "
                                "is captured at a size of at least 2 (sizes 0 and 1 change what "
                                "broadcasting means)", i, d, (long long)t->shape[d]);
    }
    return 0;
}

int tide_jit_begin_dynamic(tide_tensor *const *inputs, int ninputs, const uint32_t *dim_masks)
{
    bool any = false;
    for (int i = 0; dim_masks && i < ninputs; i++)
        any |= dim_masks[i] != 0;
    if (any && check_masks(inputs, ninputs, dim_masks) < 0)
        return -1;
    if (tide_jit_begin(inputs, ninputs) < 0)
        return -1;
    if (!any)
        return 0;
    jit_trace *tr = jit_current;
    tr->cap_dyn = td_malloc(sizeof *tr->cap_dyn * (size_t)ninputs);
    if (!tr->cap_dyn) {
        jit_session_free(tr);
        return td_error("tide_jit_begin_dynamic: out of memory");
    }
    memcpy(tr->cap_dyn, dim_masks, sizeof *tr->cap_dyn * (size_t)ninputs);
    return 0;
}

/* The value of a captured number (a wrapped 0-dim tensor in host memory), or NAN. */
static double number_value(const tide_tensor *t)
{
    if (!(t->flags & TD_WRAPPED_NUMBER) || !t->device->host_buffers || t->ndim != 0)
        return NAN;
    const void *p = td_tensor_data(t);
    return t->dtype == TIDE_FLOAT64 ? *(const double *)p
           : t->dtype == TIDE_INT64 ? (double)*(const int64_t *)p : NAN;
}

/* Whether number v is the count c of a reduction, its reciprocal, or c/(c-1) (a mean, a
 * variance's correction): what ops make of a count. */
static bool is_count(double v, double c)
{
    return v == c || fabs(v * c - 1) < 1e-12 || (c > 1 && fabs(v - c / (c - 1)) < 1e-12);
}

/* A reduction over a dynamic dim whose count the graph also reads as a captured number (a mean
 * divides by it) would keep the captured count at every size: refused. 0, or -1. */
static int check_counts(const jit_trace *tr)
{
    const jit_node *nodes = tr->b.nodes, *probe = tr->cap_probe;
    for (int r = 0; r < tr->n; r++) {
        const jit_node *nd = &nodes[r];
        if (nd->kind != JN_OP || !jit_is_reduce(nd->op) || jit_numel(nd) == 0)
            continue;
        double c0 = (double)(jit_numel(&nodes[nd->in[0]]) / jit_numel(nd));
        double c1 = (double)(jit_numel(&probe[nd->in[0]]) / jit_numel(&probe[r]));
        if (c0 == c1)
            continue;
        for (int e = 0; e < tr->next; e++) {
            double v = number_value(tr->b.ext[e]);
            if (is_count(v, c0))
                return td_error("tide_jit_end: the graph reads the number %g, which is what %s "
                                "(node %d) counts over a dynamic dim at capture (%g elements): "
                                "a count read as a number stays fixed (a mean over a dynamic "
                                "dim: sum, and divide by a runtime input); if %g is a constant, "
                                "capture at another size", v, tide_op_name((tide_op)nd->op), r,
                                c0, v);
        }
    }
    return 0;
}

/* A dynamic capture's graph at other sizes of its dynamic dims (each doubled: a reshape that
 * divides a size still divides it): into tr->cap_probe. 0 or -1. */
static int make_probe(jit_trace *tr)
{
    jit_node *p = td_malloc(sizeof *p * (size_t)(tr->n ? tr->n : 1));
    if (!p)
        return td_error("tide_jit_end: out of memory");
    memcpy(p, tr->b.nodes, sizeof *p * (size_t)tr->n);
    for (int k = 0; k < tr->n; k++) {
        jit_node *nd = &p[k];
        if (nd->kind != JN_EXTERN || nd->ext >= tr->ninputs || !tr->cap_dyn[nd->ext])
            continue;
        bool contiguous = contiguous_layout(nd->ndim, nd->shape, nd->strides);
        for (int d = 0; d < nd->ndim; d++)
            if (tr->cap_dyn[nd->ext] >> d & 1)
                nd->shape[d] *= 2;
        if (contiguous) /* else its strides stay static */
            td_contiguous_strides(nd->ndim, nd->shape, nd->strides);
    }
    tr->cap_probe = p;
    return jit_replay_shapes(tr->b.nodes, p, tr->n, "tide_jit_end", NULL, NULL);
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
    if (tr->cap_dyn && (make_probe(tr) < 0 || check_counts(tr) < 0)) {
        jit_session_free(tr);
        return NULL;
    }
    tide_graph *g = NULL;
    jit_flush(tr, outputs, noutputs, &g);
    jit_session_free(tr);
    if (g)
        g->autocast = tide_get_autocast();
    return g;
}

void tide_jit_cancel(void)
{
    if (jit_current && jit_current->capture)
        jit_session_free(jit_current);
}

static const char *autocast_name(int dtype)
{
    return dtype == TIDE_AUTOCAST_OFF ? "off" : tide_dtype_name((tide_dtype)dtype);
}

/* The node of input i in g, or NULL when the graph never reads it. */
/* Per input the index of its node (-1: the capture never read it), made on first use: the
 * guards ask for inputs' nodes on every run, and a search of the nodes for each (thousands of
 * them per run for a 12-layer decoding step's 50 inputs) was a tenth of a replay's cost. NULL
 * when out of memory. */
static const int *input_index(const tide_graph *g)
{
    int *idx = __atomic_load_n(&g->input_index, __ATOMIC_ACQUIRE);
    if (idx || !(idx = td_malloc(sizeof *idx * (size_t)(g->ninputs ? g->ninputs : 1))))
        return idx;
    for (int i = 0; i < g->ninputs; i++)
        idx[i] = -1;
    for (int k = g->nnodes - 1; k >= 0; k--) /* the first node of an input wins */
        if (g->nodes[k].kind == JN_EXTERN && g->nodes[k].ext < g->ninputs)
            idx[g->nodes[k].ext] = k;
    int *none = NULL; /* another run may have made it meanwhile: keep one */
    if (!__atomic_compare_exchange_n(&((tide_graph *)g)->input_index, &none, idx, false,
                                     __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        free(idx);
        return none;
    }
    return idx;
}

static const jit_node *input_node(const tide_graph *g, int i)
{
    const int *idx = input_index(g);
    if (idx)
        return idx[i] >= 0 ? &g->nodes[idx[i]] : NULL;
    for (int k = 0; k < g->nnodes; k++)
        if (g->nodes[k].kind == JN_EXTERN && g->nodes[k].ext == i)
            return &g->nodes[k];
    return NULL;
}

/* The guard on input i of a dynamic graph (nd: its node at capture): rank, dtype and device as
 * captured, each static dim equal, each dynamic dim at least 2, and contiguous where it was
 * (else the captured strides). 0, or -1 with the error set. */
static int check_dynamic_input(const tide_graph *g, int i, const tide_tensor *t,
                               const jit_node *nd)
{
    char a[160], b[160];
    uint32_t mask = g->dyn[i];
    if (t->ndim != nd->ndim)
        return td_error("tide_graph_run: input %d has %d dims (shape %s); the graph was captured "
                        "with %d", i, t->ndim, td_shape_str(a, sizeof a, t->ndim, t->shape),
                        nd->ndim);
    if (t->dtype != nd->dtype || t->device != nd->device)
        return td_error("tide_graph_run: input %d is %s on %s; the graph was captured with %s "
                        "on %s", i, tide_dtype_name((tide_dtype)t->dtype), t->device->name,
                        tide_dtype_name((tide_dtype)nd->dtype), nd->device->name);
    for (int d = 0; d < t->ndim; d++) {
        if ((mask >> d & 1) && t->shape[d] < 2)
            return td_error("tide_graph_run: input %d dim %d is %lld; it is dynamic, which "
                            "needs a size of at least 2 (sizes 0 and 1 change what "
                            "broadcasting means: capture again for them)", i, d,
                            (long long)t->shape[d]);
        if (!(mask >> d & 1) && t->shape[d] != nd->shape[d])
            return td_error("tide_graph_run: input %d dim %d is %lld; the graph was captured "
                            "with %lld there, and the dim is static (shape %s, captured %s)",
                            i, d, (long long)t->shape[d], (long long)nd->shape[d],
                            td_shape_str(a, sizeof a, t->ndim, t->shape),
                            td_shape_str(b, sizeof b, nd->ndim, nd->shape));
    }
    bool was = contiguous_layout(nd->ndim, nd->shape, nd->strides);
    if (was ? !td_is_contiguous(t) : memcmp(t->strides, nd->strides, sizeof(int64_t) * t->ndim))
        return td_error("tide_graph_run: input %d has strides %s; the graph was captured with "
                        "%s strides%s (make it contiguous or capture again)", i,
                        td_shape_str(a, sizeof a, t->ndim, t->strides),
                        was ? "contiguous" : "the", was ? "" : td_shape_str(b, sizeof b,
                        nd->ndim, nd->strides));
    return 0;
}

/* The guard on input i of a run: t has the layout, dtype and device the graph was captured
 * with (an input the capture never read passes). 0, or -1 with the error set. */
static int check_input(const tide_graph *g, int i, const tide_tensor *t)
{
    if (!t)
        return td_error("tide_graph_run: input %d is NULL", i);
    if (t->trace_node && !t->storage)
        return td_error("tide_graph_run: input %d has no value", i);
    const jit_node *nd = input_node(g, i);
    if (!nd)
        return 0;
    if (g->dyn)
        return check_dynamic_input(g, i, t, nd);
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

/* Dynamic dims that were equal at capture are equal now (the plan may rely on it: a symbolic
 * plan's classes, symbolic.c). 0, or -1 naming both dims. */
static int check_relations(const tide_graph *g, tide_tensor *const *inputs)
{
    for (int i = 0; i < g->ninputs; i++)
        for (int d = 0; d < TIDE_MAX_DIMS && g->dyn[i] >> d; d++) {
            const jit_node *a = input_node(g, i);
            if (!a || !(g->dyn[i] >> d & 1))
                continue;
            for (int j = 0; j <= i; j++) {
                const jit_node *b = input_node(g, j);
                for (int e = 0; b && e < (j < i ? TIDE_MAX_DIMS : d); e++) {
                    if (!(g->dyn[j] >> e & 1) || a->shape[d] != b->shape[e] ||
                        inputs[i]->shape[d] == inputs[j]->shape[e])
                        continue;
                    return td_error("tide_graph_run: input %d dim %d is %lld and input %d dim "
                                    "%d is %lld; both were %lld at capture, and the graph relies "
                                    "on their being equal (where they need not be, capture "
                                    "with distinct sizes)", j, e,
                                    (long long)inputs[j]->shape[e], i, d,
                                    (long long)inputs[i]->shape[d], (long long)a->shape[d]);
                }
            }
        }
    return 0;
}

/* A dynamic graph's nodes at the run's sizes (nodes: a copy of the captured ones): the inputs'
 * layouts, every other node's replayed (replay.c); then the plan's guards. The nodes it
 * changes are appended to dirty (NULL: not wanted). 0 or -1. */
static int bind_dynamic(tide_graph *g, tide_tensor *const *inputs, jit_node *nodes, int *dirty,
                        int *ndirty)
{
    for (int k = 0; k < g->nnodes; k++) {
        jit_node *nd = &nodes[k];
        if (nd->kind != JN_EXTERN || nd->ext >= g->ninputs)
            continue;
        const tide_tensor *t = inputs[nd->ext];
        memcpy(nd->shape, t->shape, sizeof(int64_t) * t->ndim);
        memcpy(nd->strides, t->strides, sizeof(int64_t) * t->ndim);
        nd->offset = t->offset;
        if (dirty)
            dirty[(*ndirty)++] = k;
    }
    if (check_relations(g, inputs) < 0 ||
        jit_replay_shapes(g->nodes, nodes, g->nnodes, "tide_graph_run", dirty, ndirty) < 0)
        return -1;
    char why[256];
    int serves = jit_plan_serves(g->plan, nodes, g->nnodes, why, sizeof why,
                                 dirty ? &g->key : NULL); /* the key kept with the scratch */
    if (serves < 0)
        return -1;
    if (!serves)
        return td_error("tide_graph_run: the graph's plan does not serve these sizes: %s%s",
                        why, strstr(why, "input ") ? " (inputs and dims counted from 1)" : "");
    return 0;
}

bool jit_graph_inputs_fit(const tide_graph *g, tide_tensor *const *inputs)
{
    for (int i = 0; i < g->ninputs; i++)
        if (!inputs[i] || check_input(g, i, inputs[i]) < 0) {
            tide_clear_error();
            return false;
        }
    return true;
}

/* The nodes a run works on. The graph's scratch copy when no other run holds it (*own): the
 * nodes the run before changed are restored from the captured ones, where copying them all
 * (~400 KB for a 12-layer model's decoding step) was most of a replay's own cost. Else a fresh
 * copy. NULL when out of memory. */
static jit_node *run_nodes(tide_graph *g, bool *own)
{
    size_t n = (size_t)(g->nnodes ? g->nnodes : 1);
    *own = !__atomic_exchange_n(&g->scratch_busy, 1, __ATOMIC_ACQUIRE);
    if (*own && g->scratch) {
        for (int k = 0; k < g->ndirty; k++)
            g->scratch[g->dirty[k]] = g->nodes[g->dirty[k]];
        g->ndirty = 0;
        return g->scratch;
    }
    jit_node *nodes = td_malloc(sizeof *nodes * n);
    int *dirty = *own ? td_malloc(sizeof *dirty * n) : NULL;
    if (!nodes || (*own && !dirty)) {
        free(nodes);
        free(dirty);
        if (*own)
            __atomic_store_n(&g->scratch_busy, 0, __ATOMIC_RELEASE);
        *own = false;
        return NULL;
    }
    memcpy(nodes, g->nodes, sizeof *nodes * (size_t)g->nnodes);
    if (*own) {
        g->scratch = nodes;
        g->dirty = dirty;
        g->ndirty = 0;
    }
    return nodes;
}

static void release_nodes(tide_graph *g, jit_node *nodes, bool own)
{
    if (own)
        __atomic_store_n(&g->scratch_busy, 0, __ATOMIC_RELEASE);
    else
        free(nodes);
}

/* A run's outputs from its values (vals, the plan's) and externs: new references, views of
 * the roots at the run's layouts. 0, or -1 with none given out. */
static int hand_out(const tide_graph *g, const jit_node *nodes, tide_tensor *const *ext,
                    tide_tensor *const *vals, tide_tensor **outputs)
{
    for (int i = 0; i < g->noutputs; i++) {
        const jit_node *v = g->dyn ? &nodes[g->out_node[i]] : &g->out_view[i];
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
            return -1;
        }
    }
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
    if (g->autocast != JIT_AUTOCAST_ANY && g->autocast != tide_get_autocast())
        return td_error("tide_graph_run: the graph was captured with autocast %s and runs with "
                        "autocast %s; capture it again under this autocast setting",
                        autocast_name(g->autocast), autocast_name(tide_get_autocast()));
    bool handled = false;
    int other = jit_graph_run_other(g, inputs, ninputs, outputs, &handled);
    if (handled)
        return other;
    /* guards: every input has the layout the graph was captured with */
    for (int i = 0; i < ninputs; i++)
        if (check_input(g, i, inputs ? inputs[i] : NULL) < 0)
            return -1;
    tide_tensor **ext = td_malloc(sizeof *ext * (size_t)(g->nexterns ? g->nexterns : 1));
    bool own;
    jit_node *nodes = run_nodes(g, &own);
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
    int unused = 0; /* a run without the scratch records nothing */
    if (g->dyn && bind_dynamic(g, inputs, nodes, own ? g->dirty : NULL,
                               own ? &g->ndirty : &unused) < 0) {
        /* sizes the plan does not serve */
        rc = jit_graph_run_replanned(g, inputs, ninputs, outputs);
        goto done;
    }
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
    rc = hand_out(g, nodes, ext, vals, outputs);
done:
    if (vals)
        for (int k = 0; k < g->plan->noutputs; k++)
            tide_release(vals[k]);
    free(vals);
    free(ext);
    if (nodes)
        release_nodes(g, nodes, own);
    return rc;
}

