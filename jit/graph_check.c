/*
 * graph_check.c — the checks a graph file's nodes pass before anything runs them
 * (td_graph_build, jit/graph_desc.c): fields in range, inputs earlier than their node, inputs
 * first, captured tensors inside their blobs, views inside their roots, and per op the dtypes,
 * attributes and result shape its kernels take for granted (graph_ops.c). A damaged or crafted
 * description is an error naming the node, never a kernel handed sizes it would overrun.
 */
#include <stdlib.h>
#include <string.h>

#include "graph_desc.h"

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
        if (strides[d] && shape[d] - 1 > (((int64_t)1 << 60) - reach) / strides[d])
            return bad_node(k, "a layout past 2^60 elements", (long long)shape[d]);
        reach += (shape[d] - 1) * strides[d];
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
    int64_t product = 1; /* of the sizes other than 0: an empty shape's strides still count */
    for (int i = 0; i < n->ndim; i++) {
        if (n->shape[i] < 0 || n->shape[i] > ((int64_t)1 << 40))
            return bad_node(k, "a size out of range", (long long)n->shape[i]);
        if (n->shape[i] && product > ((int64_t)1 << 40) / n->shape[i])
            return bad_node(k, "more elements than a tensor holds", (long long)n->shape[i]);
        product *= n->shape[i] ? n->shape[i] : 1;
    }
    for (int j = 0; j < n->nin; j++)
        if (n->in[j] < 0 || n->in[j] >= k || d->nodes[n->in[j]].kind == TD_GN_INPLACE)
            return bad_node(k, "an input that is not an earlier value", n->in[j]);
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
int64_t jit_graph_layout_span(const td_graph_node *n)
{
    return td_layout_span(n->ndim, n->shape, n->strides);
}

/* The elements a node's value spans from its root's start: what views of it may reach (a
 * captured tensor's blob past its offset). */
static int64_t node_extent(const td_graph_desc *d, const td_graph_node *n)
{
    if (n->kind != TD_GN_EXTERN || n->ext < d->ninputs)
        return jit_graph_layout_span(n);
    return d->blobs[d->ext_blob[n->ext]]->shape[0] - n->offset;
}

/* A view's attributes as replay.c's rules read them (a dynamic graph's shapes at other sizes):
 * a permutation of its input's dims, a slice or select of one of them, an expand to at least
 * its input's rank. */
static int check_view_attrs(const td_graph_node *n, const td_graph_node *src, int k)
{
    const int64_t *a = n->attrs.ints;
    if (n->op == TIDE_OP_PERMUTE) {
        unsigned seen = 0;
        if (n->attrs.nints != n->ndim || src->ndim != n->ndim)
            return bad_node(k, "a permute that is no permutation of its input's dims", n->ndim);
        for (int i = 0; i < n->ndim; i++) {
            if (a[i] < 0 || a[i] >= n->ndim || (seen >> a[i] & 1))
                return bad_node(k, "a permute that is no permutation of its input's dims", a[i]);
            seen |= 1u << a[i];
        }
    } else if (n->op == TIDE_OP_SLICE || n->op == TIDE_OP_SELECT) {
        bool slice = n->op == TIDE_OP_SLICE; /* ints: dim, start, end, step; dim, index */
        if (n->attrs.nints < (slice ? 4 : 2) || a[0] < 0 || a[0] >= src->ndim ||
            n->ndim != (slice ? src->ndim : src->ndim - 1) || a[1] < 0 ||
            a[1] > src->shape[a[0]] || (slice && a[3] < 1))
            return bad_node(k, "a slice or select outside its input", a[0]);
    } else if (n->op == TIDE_OP_EXPAND && src->ndim > n->ndim) {
        return bad_node(k, "an expand to fewer dims than its input's", n->ndim);
    }
    return 0;
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
    return check_view_attrs(n, src, k);
}

/* An op: contiguous, and the shape its op's rule gives on its inputs (where the jit has a rule:
 * jit_shape_rule). */
static int check_op(const td_graph_desc *d, jit_node *nodes, int k)
{
    if (jit_graph_check_op(d->nodes, k) < 0)
        return -1;
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
void jit_graph_node_to_jit(const td_graph_node *n, jit_node *nd)
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

int jit_graph_check(const td_graph_desc *d)
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
        jit_graph_node_to_jit(n, &nodes[k]);
        rc = check_fields(d, k);
        if (rc == 0 && n->kind == TD_GN_EXTERN)
            rc = check_extern(d, k, seen);
        else if (rc == 0 && n->kind == TD_GN_VIEW)
            rc = check_view(d, k);
        else if (rc == 0 && n->kind == TD_GN_OP)
            rc = check_op(d, nodes, k);
        else if (rc == 0 && n->nin < 1)
            rc = bad_node(k, "an in-place write without a destination", n->nin);
        else if (rc == 0)
            rc = jit_graph_check_op(d->nodes, k);
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

