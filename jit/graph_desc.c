/*
 * graph_desc.c — a captured graph as data and back (core/tide_internal.h, td_graph_desc): what
 * a graph file holds (io/graph_file.c). Describing copies the capture's nodes; building checks
 * them, then replays them through the dispatcher inside a capture, so the loaded graph is
 * traced, keyed, compiled and run by the very code that made the original: the same plan, and
 * the same bits on the CPU.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/device.h"
#include "../core/tide_internal.h"
#include "graph_desc.h"

_Static_assert((int)TD_GN_EXTERN == (int)JN_EXTERN && (int)TD_GN_OP == (int)JN_OP &&
                   (int)TD_GN_VIEW == (int)JN_VIEW && (int)TD_GN_INPLACE == (int)JN_INPLACE,
               "a graph file's node kinds are the jit's");

/* The device a graph runs on: its plan's, else its first input's, else the CPU. */
static tide_device *graph_device(const tide_graph *g)
{
    if (g->plan && g->plan->device)
        return g->plan->device;
    for (int k = 0; k < g->nnodes; k++)
        if (g->nodes[k].device)
            return g->nodes[k].device;
    return tide_cpu_device();
}

void td_graph_desc_free(td_graph_desc *d)
{
    if (!d)
        return;
    for (int b = 0; d->blobs && b < d->nblobs; b++)
        tide_release(d->blobs[b]);
    free(d->blobs);
    free(d->ext_blob);
    free(d->nodes);
    free(d->dyn);
    free(d->out_node);
    memset(d, 0, sizeof *d);
}

static void describe_node(const jit_node *nd, const tide_device *dev, td_graph_node *out)
{
    out->kind = nd->kind;
    out->op = nd->op;
    out->dtype = nd->dtype;
    out->ndim = nd->ndim;
    out->flags = nd->flags;
    out->on_host = nd->device != dev;
    out->nin = nd->nin;
    memcpy(out->in, nd->in, sizeof out->in);
    out->root = nd->root;
    out->ext = nd->ext;
    memcpy(out->shape, nd->shape, sizeof out->shape);
    memcpy(out->strides, nd->strides, sizeof out->strides);
    out->offset = nd->kind == JN_EXTERN ? 0 : nd->offset;
    out->attrs = nd->attrs;
}

/* The blobs: per storage the captured tensors read, the span [lo, hi) of its elements they
 * reach, as a 1-D view; each extern's node offset from its blob's start. */
static int describe_blobs(const tide_graph *g, td_graph_desc *d)
{
    int64_t *lo = td_calloc((size_t)g->nexterns + 1, sizeof *lo);
    int64_t *hi = td_calloc((size_t)g->nexterns + 1, sizeof *hi);
    int *first = td_calloc((size_t)g->nexterns + 1, sizeof *first); /* blob -> an extern */
    int rc = lo && hi && first ? 0 : td_error("save_graph: out of memory");
    for (int e = 0; e < g->nexterns && rc == 0; e++) {
        d->ext_blob[e] = -1;
        const tide_tensor *t = g->captured[e];
        if (e < g->ninputs || !t)
            continue;
        int b = 0;
        while (b < d->nblobs && g->captured[first[b]]->storage != t->storage)
            b++;
        int64_t end = t->offset + td_layout_span(t->ndim, t->shape, t->strides);
        if (b == d->nblobs) {
            first[d->nblobs++] = e;
            lo[b] = t->offset;
            hi[b] = end;
        } else if (g->captured[first[b]]->dtype != t->dtype) {
            rc = td_error("save_graph: captured tensors %d and %d share storage as %s and %s; "
                          "a graph file keeps one dtype per storage", first[b], e,
                          tide_dtype_name((tide_dtype)g->captured[first[b]]->dtype),
                          tide_dtype_name((tide_dtype)t->dtype));
        }
        lo[b] = t->offset < lo[b] ? t->offset : lo[b];
        hi[b] = end > hi[b] ? end : hi[b];
        d->ext_blob[e] = b;
    }
    for (int b = 0; b < d->nblobs && rc == 0; b++) {
        int64_t n = hi[b] - lo[b], one = 1;
        if (!(d->blobs[b] = td_tensor_view(g->captured[first[b]], 1, &n, &one, lo[b])))
            rc = -1;
    }
    for (int k = 0; k < g->nnodes && rc == 0; k++) {
        const jit_node *nd = &g->nodes[k];
        if (nd->kind == JN_EXTERN && nd->ext >= g->ninputs)
            d->nodes[k].offset = g->captured[nd->ext]->offset - lo[d->ext_blob[nd->ext]];
    }
    free(lo);
    free(hi);
    free(first);
    return rc;
}

int td_graph_describe(const tide_graph *g, td_graph_desc *d)
{
    memset(d, 0, sizeof *d);
    if (!g)
        return td_error("save_graph: graph is NULL");
    tide_device *dev = graph_device(g);
    d->nnodes = g->nnodes;
    d->ninputs = g->ninputs;
    d->nexterns = g->nexterns;
    d->noutputs = g->noutputs;
    d->device = dev->name;
    d->nodes = td_calloc((size_t)g->nnodes + 1, sizeof *d->nodes);
    d->blobs = td_calloc((size_t)g->nexterns + 1, sizeof *d->blobs);
    d->ext_blob = td_calloc((size_t)g->nexterns + 1, sizeof *d->ext_blob);
    d->out_node = td_calloc((size_t)g->noutputs + 1, sizeof *d->out_node);
    d->dyn = g->dyn ? td_calloc((size_t)g->ninputs + 1, sizeof *d->dyn) : NULL;
    if (!d->nodes || !d->blobs || !d->ext_blob || !d->out_node || (g->dyn && !d->dyn)) {
        td_graph_desc_free(d);
        return td_error("save_graph: out of memory");
    }
    for (int k = 0; k < g->nnodes; k++)
        describe_node(&g->nodes[k], dev, &d->nodes[k]);
    memcpy(d->out_node, g->out_node, sizeof *d->out_node * (size_t)g->noutputs);
    if (g->dyn)
        memcpy(d->dyn, g->dyn, sizeof *d->dyn * (size_t)g->ninputs);
    if (describe_blobs(g, d) < 0) {
        td_graph_desc_free(d);
        return -1;
    }
    if (jit_graph_check(d) < 0) { /* what a load would refuse is refused now */
        char why[512];
        snprintf(why, sizeof why, "%s", tide_last_error());
        td_graph_desc_free(d);
        return td_error("save_graph: %s", strncmp(why, "load_graph: ", 12) ? why : why + 12);
    }
    return 0;
}

/* ---- building ------------------------------------------------------------------------------ */

/* A stand-in for input node n on dev: its layout over a one-element storage. A graph file's
 * capture records ops and never runs them (jit_trace.no_run; a graph break is an error in a
 * capture), so no element of it is read, and a file declaring huge inputs costs nothing to
 * load: their memory is the caller's, at run time. */
static tide_tensor *placeholder(const td_graph_node *n, tide_device *dev)
{
    int64_t one = 1;
    tide_tensor *flat = tide_empty_on(dev->name, 1, &one, (tide_dtype)n->dtype);
    if (!flat)
        return NULL;
    tide_tensor *t = td_tensor_view(flat, n->ndim, n->shape, n->strides, 0);
    tide_release(flat);
    return t;
}

/* Captured tensor e on the device its node runs on: a view of its blob there (moved[b], the
 * blob's copy on dev, made once: tensors sharing a storage stay views of one copy). */
static tide_tensor *place_extern(const td_graph_desc *d, const td_graph_node *n,
                                 tide_device *dev, tide_tensor **moved)
{
    int b = d->ext_blob[n->ext];
    tide_tensor *blob = d->blobs[b];
    tide_device *to = n->on_host ? tide_cpu_device() : dev;
    if (to != blob->device && !moved[b] && !(moved[b] = tide_to(blob, to->name)))
        return NULL;
    tide_tensor *base = to == blob->device ? blob : moved[b];
    tide_tensor *out = td_tensor_view(base, n->ndim, n->shape, n->strides,
                                      base->offset + n->offset);
    if (out)
        out->flags = (uint8_t)(n->flags & TD_WRAPPED_NUMBER);
    return out;
}

/* Node k's value inside the capture: an extern's tensor, or the op replayed through the
 * dispatcher (recorded exactly as it was at export). */
static tide_tensor *replay_node(const td_graph_desc *d, int k, tide_tensor **vals,
                                tide_tensor **ext, tide_device *dev)
{
    const td_graph_node *n = &d->nodes[k];
    tide_tensor *in[JIT_MAX_IN];
    for (int j = 0; j < n->nin; j++)
        in[j] = vals[n->in[j]];
    if (n->kind == TD_GN_EXTERN)
        return tide_retain(ext[n->ext]);
    if (n->kind == TD_GN_VIEW) {
        const td_graph_node *r = &d->nodes[n->root];
        int64_t base = r->kind == TD_GN_EXTERN ? vals[n->root]->offset : 0;
        return td_dispatch_view((tide_op)n->op, in[0], n->ndim, n->shape, n->strides,
                                base + n->offset, &n->attrs);
    }
    if (n->kind == TD_GN_INPLACE)
        return td_dispatch_inplace((tide_op)n->op, in[0], in + 1, n->nin - 1, &n->attrs) < 0
                   ? NULL
                   : tide_retain(in[0]);
    td_meta meta = {n->ndim, {0}, (tide_dtype)n->dtype, n->on_host ? tide_cpu_device() : dev};
    memcpy(meta.shape, n->shape, sizeof(int64_t) * (size_t)n->ndim);
    return td_dispatch((tide_op)n->op, &meta, in, n->nin, &n->attrs);
}

/* The capture: begun on the inputs, every node replayed, ended on the outputs. */
static tide_graph *replay(const td_graph_desc *d, tide_tensor **ext, tide_device *dev)
{
    tide_tensor **vals = td_calloc((size_t)d->nnodes + 1, sizeof *vals);
    tide_tensor **outs = td_calloc((size_t)d->noutputs + 1, sizeof *outs);
    if (!vals || !outs) {
        free(vals);
        free(outs);
        td_error("load_graph: out of memory");
        return NULL;
    }
    tide_graph *g = NULL;
    if (tide_jit_begin_dynamic(ext, d->ninputs, d->dyn) == 0) {
        jit_current->no_run = true;
        int k = 0;
        while (k < d->nnodes && (vals[k] = replay_node(d, k, vals, ext, dev)))
            k++;
        for (int i = 0; i < d->noutputs && k == d->nnodes; i++)
            outs[i] = vals[d->out_node[i]];
        if (k == d->nnodes) {
            g = tide_jit_end(outs, d->noutputs);
        } else { /* the replay's error stays */
            tide_jit_cancel();
        }
    }
    for (int k = 0; k < d->nnodes; k++)
        tide_release(vals[k]);
    free(vals);
    free(outs);
    return g;
}

tide_graph *td_graph_build(const td_graph_desc *d, const char *device)
{
    tide_device *dev = td_device_find("load_graph", device ? device : d->device);
    if (!dev || jit_graph_check(d) < 0)
        return NULL;
    tide_tensor **ext = td_calloc((size_t)d->nexterns + 1, sizeof *ext);
    tide_tensor **moved = td_calloc((size_t)d->nblobs + 1, sizeof *moved);
    tide_graph *g = NULL;
    bool ok = ext && moved;
    if (!ok)
        td_error("load_graph: out of memory");
    for (int k = 0; k < d->nnodes && ok; k++) {
        const td_graph_node *n = &d->nodes[k];
        if (n->kind == TD_GN_EXTERN)
            ok = (ext[n->ext] = n->ext < d->ninputs ? placeholder(n, dev)
                                                    : place_extern(d, n, dev, moved));
    }
    if (ok) {
        bool grad = tide_set_grad_enabled(false);
        int autocast = tide_get_autocast();
        tide_set_autocast(TIDE_AUTOCAST_OFF);
        g = replay(d, ext, dev);
        tide_set_autocast(autocast);
        tide_set_grad_enabled(grad);
    }
    if (g) /* its casts are nodes: it runs the same under any autocast setting */
        g->autocast = JIT_AUTOCAST_ANY;
    for (int e = 0; ext && e < d->nexterns; e++)
        tide_release(ext[e]);
    for (int b = 0; moved && b < d->nblobs; b++)
        tide_release(moved[b]);
    free(ext);
    free(moved);
    return g;
}
