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
#include "trace.h"

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

/* The elements past a tensor's offset that its layout reaches (0 when empty). */
static int64_t tensor_span(const tide_tensor *t)
{
    int64_t reach = 0;
    for (int i = 0; i < t->ndim; i++)
        reach += t->shape[i] ? (t->shape[i] - 1) * t->strides[i] : 0;
    return td_numel(t->ndim, t->shape) ? reach + 1 : 0;
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
        if (b == d->nblobs) {
            first[d->nblobs++] = e;
            lo[b] = t->offset;
            hi[b] = t->offset + tensor_span(t);
        } else if (g->captured[first[b]]->dtype != t->dtype) {
            rc = td_error("save_graph: captured tensors %d and %d share storage as %s and %s; "
                          "a graph file keeps one dtype per storage", first[b], e,
                          tide_dtype_name((tide_dtype)g->captured[first[b]]->dtype),
                          tide_dtype_name((tide_dtype)t->dtype));
        }
        lo[b] = t->offset < lo[b] ? t->offset : lo[b];
        hi[b] = t->offset + tensor_span(t) > hi[b] ? t->offset + tensor_span(t) : hi[b];
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
    return 0;
}

/* ---- checks ---------------------------------------------------------------------------- */

static int bad_node(int k, const char *why, long long value)
{
    return td_error("load_graph: node %d is damaged: %s (%lld)", k, why, value);
}

/* The highest element a layout reaches past its offset, or -1 with the error set (a negative
 * stride, or sizes that overflow). Empty layouts reach nothing (0). */
static int64_t layout_reach(int k, int ndim, const int64_t *shape, const int64_t *strides)
{
    int64_t reach = 0;
    for (int d = 0; d < ndim; d++) {
        if (shape[d] == 0)
            return 0;
        if (strides[d] < 0 || strides[d] > ((int64_t)1 << 40) || shape[d] > ((int64_t)1 << 40))
            return bad_node(k, "a stride out of range", (long long)strides[d]);
        reach += (shape[d] - 1) * strides[d];
        if (reach > ((int64_t)1 << 60))
            return bad_node(k, "a layout past 2^60 elements", (long long)reach);
    }
    return reach;
}

/* Fields every node has: kind, op, dtype, rank, sizes, inputs before it. */
static int check_fields(const td_graph_desc *d, int k)
{
    const td_graph_node *n = &d->nodes[k];
    if (n->kind < TD_GN_EXTERN || n->kind > TD_GN_INPLACE)
        return bad_node(k, "an unknown kind", n->kind);
    if (n->kind != TD_GN_EXTERN && (n->op < 0 || n->op >= TIDE_NUM_OPS))
        return bad_node(k, "an unknown op", n->op);
    if (n->dtype < 0 || n->dtype >= TIDE_NUM_DTYPES)
        return bad_node(k, "an unknown dtype", n->dtype);
    if (n->ndim < 0 || n->ndim > TIDE_MAX_DIMS)
        return bad_node(k, "a rank past tide's", n->ndim);
    if (n->nin < 0 || n->nin > JIT_MAX_IN || (n->kind == TD_GN_EXTERN && n->nin != 0))
        return bad_node(k, "a count of inputs out of range", n->nin);
    if (n->attrs.nints < 0 || n->attrs.nints > 2 * TIDE_MAX_DIMS)
        return bad_node(k, "a count of attributes out of range", n->attrs.nints);
    int64_t numel = 1;
    for (int i = 0; i < n->ndim; i++) {
        if (n->shape[i] < 0 || n->shape[i] > ((int64_t)1 << 40))
            return bad_node(k, "a size out of range", (long long)n->shape[i]);
        numel = n->shape[i] ? numel * n->shape[i] : 0;
        if (numel > ((int64_t)1 << 40))
            return bad_node(k, "more elements than a tensor holds", (long long)numel);
    }
    for (int j = 0; j < n->nin; j++)
        if (n->in[j] < 0 || n->in[j] >= k)
            return bad_node(k, "an input that is not an earlier node", n->in[j]);
    return 0;
}

/* An EXTERN: inputs are nodes 0..ninputs-1 in order (a capture makes them first); a captured
 * tensor has the node's dtype and layout. */
static int check_extern(const td_graph_desc *d, int k, char *seen)
{
    const td_graph_node *n = &d->nodes[k];
    if (n->ext < 0 || n->ext >= d->nexterns || seen[n->ext])
        return bad_node(k, "an extern index out of range or given twice", n->ext);
    seen[n->ext] = 1;
    if ((k < d->ninputs) != (n->ext < d->ninputs) || (k < d->ninputs && n->ext != k))
        return bad_node(k, "inputs are not the first nodes in order", n->ext);
    int64_t reach = layout_reach(k, n->ndim, n->shape, n->strides);
    if (reach < 0 || n->ext < d->ninputs)
        return reach < 0 ? -1 : 0;
    int b = d->ext_blob[n->ext];
    if (b < 0 || b >= d->nblobs)
        return bad_node(k, "a captured tensor without a blob", b);
    const tide_tensor *blob = d->blobs[b];
    if (blob->dtype != n->dtype)
        return bad_node(k, "a captured tensor of another dtype than its blob", n->dtype);
    if (td_numel(n->ndim, n->shape) && (n->offset < 0 || n->offset + reach >= blob->shape[0]))
        return bad_node(k, "a captured tensor past its blob's elements", (long long)n->offset);
    return 0;
}

/* The elements a layout spans from its offset (0 when empty). */
static int64_t layout_span(const td_graph_node *n)
{
    int64_t reach = 0;
    for (int i = 0; i < n->ndim; i++)
        reach += n->shape[i] ? (n->shape[i] - 1) * n->strides[i] : 0;
    return td_numel(n->ndim, n->shape) ? reach + 1 : 0;
}

/* The elements a node's value spans from its root's start: what views of it may reach (a
 * captured tensor's blob past its offset). */
static int64_t node_extent(const td_graph_desc *d, const td_graph_node *n)
{
    if (n->kind != TD_GN_EXTERN || n->ext < d->ninputs)
        return layout_span(n);
    return d->blobs[d->ext_blob[n->ext]]->shape[0] - n->offset;
}

/* A view: its root is an earlier EXTERN or OP of its dtype, its input has that root, and its
 * layout stays inside the root's elements. */
static int check_view(const td_graph_desc *d, int k)
{
    const td_graph_node *n = &d->nodes[k];
    if (n->nin != 1 || n->root < 0 || n->root >= k)
        return bad_node(k, "a view without one input and an earlier root", n->root);
    const td_graph_node *r = &d->nodes[n->root], *src = &d->nodes[n->in[0]];
    int src_root = src->kind == TD_GN_VIEW ? src->root : n->in[0];
    if ((r->kind != TD_GN_EXTERN && r->kind != TD_GN_OP) || src_root != n->root ||
        r->dtype != n->dtype)
        return bad_node(k, "a view of another node than its input's root", n->root);
    int64_t reach = layout_reach(k, n->ndim, n->shape, n->strides);
    if (reach < 0)
        return -1;
    if (td_numel(n->ndim, n->shape) &&
        (n->offset < 0 || n->offset + reach >= node_extent(d, r)))
        return bad_node(k, "a view past its root's elements", (long long)n->offset);
    return 0;
}

/* An op: contiguous, and the shape its op's rule gives on its inputs (where the jit has a rule:
 * jit_shape_rule). */
static int check_op(jit_node *nodes, int k)
{
    jit_node *nd = &nodes[k];
    int64_t strides[TIDE_MAX_DIMS];
    td_contiguous_strides(nd->ndim, nd->shape, strides);
    if (memcmp(strides, nd->strides, sizeof(int64_t) * nd->ndim) != 0)
        return bad_node(k, "an op's result that is not contiguous", 0);
    jit_node saved = *nd;
    int rc = jit_shape_rule(nodes, k);
    bool same = jit_same_shape(saved.ndim, saved.shape, nd->ndim, nd->shape);
    *nd = saved;
    if (rc < 0 || (rc == 0 && !same)) {
        tide_clear_error();
        return td_error("load_graph: node %d is damaged: %s does not give shape or take the "
                        "operands it has there", k, tide_op_name((tide_op)saved.op));
    }
    return 0;
}

/* The nodes as the jit holds them (for the shape rules). */
static void to_jit_node(const td_graph_node *n, jit_node *nd)
{
    memset(nd, 0, sizeof *nd);
    nd->kind = (uint8_t)n->kind;
    nd->dtype = (uint8_t)n->dtype;
    nd->ndim = (uint8_t)n->ndim;
    nd->flags = (uint8_t)n->flags;
    nd->op = n->op;
    nd->nin = n->nin;
    memcpy(nd->in, n->in, sizeof nd->in);
    nd->root = n->root;
    nd->ext = n->ext;
    memcpy(nd->shape, n->shape, sizeof nd->shape);
    memcpy(nd->strides, n->strides, sizeof nd->strides);
    nd->offset = n->offset;
    nd->attrs = n->attrs;
}

static int check_desc(const td_graph_desc *d)
{
    if (d->nnodes < d->ninputs || d->ninputs < 0 || d->nexterns < d->ninputs ||
        d->noutputs < 0 || d->nnodes > (1 << 24))
        return td_error("load_graph: the graph's counts are damaged (%d nodes, %d inputs, %d "
                        "externs, %d outputs)", d->nnodes, d->ninputs, d->nexterns, d->noutputs);
    char *seen = td_calloc((size_t)d->nexterns + 1, 1);
    jit_node *nodes = td_calloc((size_t)d->nnodes + 1, sizeof *nodes);
    int rc = seen && nodes ? 0 : td_error("load_graph: out of memory");
    for (int k = 0; k < d->nnodes && rc == 0; k++) {
        const td_graph_node *n = &d->nodes[k];
        to_jit_node(n, &nodes[k]);
        rc = check_fields(d, k);
        if (rc == 0 && n->kind == TD_GN_EXTERN)
            rc = check_extern(d, k, seen);
        else if (rc == 0 && n->kind == TD_GN_VIEW)
            rc = check_view(d, k);
        else if (rc == 0 && n->kind == TD_GN_OP)
            rc = check_op(nodes, k);
        else if (rc == 0 && (n->nin < 1 || d->nodes[n->in[0]].kind == TD_GN_INPLACE))
            rc = bad_node(k, "an in-place write without a destination", n->nin);
    }
    for (int e = 0; e < d->nexterns && rc == 0; e++)
        if (!seen[e])
            rc = td_error("load_graph: extern %d has no node", e);
    for (int i = 0; i < d->noutputs && rc == 0; i++)
        if (d->out_node[i] < 0 || d->out_node[i] >= d->nnodes)
            rc = td_error("load_graph: output %d names node %d of %d", i, d->out_node[i],
                          d->nnodes);
    free(seen);
    free(nodes);
    return rc;
}

/* ---- building ------------------------------------------------------------------------------ */

/* A zero tensor on dev with the layout of EXTERN node n (a placeholder input). */
static tide_tensor *placeholder(const td_graph_node *n, tide_device *dev)
{
    int64_t span = layout_span(n) + 1;
    tide_tensor *flat = tide_zeros_on(dev->name, 1, &span, (tide_dtype)n->dtype);
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
        int k = 0;
        while (k < d->nnodes && (vals[k] = replay_node(d, k, vals, ext, dev)))
            k++;
        for (int i = 0; i < d->noutputs && k == d->nnodes; i++)
            outs[i] = vals[d->out_node[i]];
        if (k == d->nnodes) {
            g = tide_jit_end(outs, d->noutputs);
        } else if (jit_current) { /* the replay's error stays */
            jit_session_free(jit_current);
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
    if (!dev || check_desc(d) < 0)
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

/* ---- re-planning for other input layouts ------------------------------------------------- */

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
        to_jit_node(&d->nodes[k], &cap[k]);
    memcpy(now, cap, sizeof *now * (size_t)d->nnodes);
    for (int i = 0; i < d->ninputs; i++) {
        memcpy(now[i].shape, inputs[i]->shape, sizeof(int64_t) * inputs[i]->ndim);
        memcpy(now[i].strides, inputs[i]->strides, sizeof(int64_t) * inputs[i]->ndim);
    }
    if (jit_replay_shapes(cap, now, d->nnodes, "tide_graph_run") < 0)
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
