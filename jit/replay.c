/*
 * replay.c — a dynamic capture's shapes at a run's sizes (tide_jit_begin_dynamic). A captured
 * graph is never traced again, so each node's shape (and a view's strides and offset) is found
 * by replaying its op's shape rule on its inputs' new layouts, in program order. A node whose
 * inputs kept their captured layouts keeps its own. An op's attributes are replayed as captured
 * (a FILL or RANDOM shape, a slice's bounds stay literal); a rule that cannot say how a changed
 * size flows through its op refuses, naming the op: never a guessed shape.
 */
#include <stdio.h>
#include <string.h>

#include "trace.h"

/* An input's own offset is the tensor's (views hold theirs relative to it): not compared. */
static bool same_layout(const jit_node *a, const jit_node *b)
{
    return a->ndim == b->ndim && memcmp(a->shape, b->shape, sizeof(int64_t) * a->ndim) == 0 &&
           memcmp(a->strides, b->strides, sizeof(int64_t) * a->ndim) == 0 &&
           (a->kind != JN_VIEW || a->offset == b->offset);
}

/* The error for node i, naming its op and its first input's shape at the sizes tried
 * (tide_jit_end tries the dynamic dims doubled). */
static int refuse(const char *who, const jit_node *nodes, int i, const char *why)
{
    const jit_node *nd = &nodes[i];
    char s[160];
    const jit_node *src = nd->nin > 0 ? &nodes[nd->in[0]] : nd;
    return td_error("%s: %s (node %d) cannot follow the graph's dynamic sizes: %s (its input "
                    "has shape %s%s)", who, tide_op_name((tide_op)nd->op), i, why,
                    td_shape_str(s, sizeof s, src->ndim, src->shape),
                    strcmp(who, "tide_jit_end") == 0 ? " with the dynamic dims doubled" : "");
}

/* Broadcasts the inputs of node i into its shape (rank as captured). */
static int broadcast_shape(const char *who, jit_node *nodes, int i)
{
    jit_node *nd = &nodes[i];
    for (int d = 0; d < nd->ndim; d++) {
        int64_t size = 1;
        for (int j = 0; j < nd->nin; j++) {
            const jit_node *a = &nodes[nd->in[j]];
            int k = d - (nd->ndim - a->ndim);
            if (k < 0 || a->shape[k] == 1)
                continue;
            if (size != 1 && size != a->shape[k])
                return refuse(who, nodes, i, "its operands' shapes no longer broadcast");
            size = a->shape[k];
        }
        nd->shape[d] = size;
    }
    return 0;
}

/* A matmul: [batch..., M, K] @ [batch..., K, N] (equal ranks, batch dims broadcast). */
static int matmul_shape(const char *who, jit_node *nodes, int i)
{
    jit_node *nd = &nodes[i];
    const jit_node *a = &nodes[nd->in[0]], *b = &nodes[nd->in[1]];
    int r = nd->ndim;
    if (a->ndim != r || b->ndim != r || a->shape[r - 1] != b->shape[r - 2])
        return refuse(who, nodes, i, "its operands' inner sizes no longer match");
    for (int d = 0; d < r - 2; d++) {
        int64_t x = a->shape[d], y = b->shape[d];
        if (x != y && x != 1 && y != 1)
            return refuse(who, nodes, i, "its operands' batch sizes no longer broadcast");
        nd->shape[d] = x == 1 ? y : x;
    }
    nd->shape[r - 2] = a->shape[r - 2];
    nd->shape[r - 1] = b->shape[r - 1];
    return 0;
}

/* Attention: q [batch.., L, E], k [batch.., S, E], v [batch.., S, Ev] (and a mask [batch.., L,
 * S]) give one packed row of batch * L * (Ev + 1) values (ops/attention.c): S may change. */
static int sdpa_shape(const char *who, jit_node *nodes, int i)
{
    jit_node *nd = &nodes[i];
    const jit_node *q = &nodes[nd->in[0]], *k = &nodes[nd->in[1]], *v = &nodes[nd->in[2]];
    int r = q->ndim;
    int64_t batch = 1, L = q->shape[r - 2], S = k->shape[r - 2];
    for (int d = 0; d < r - 2; d++) {
        if (k->shape[d] != q->shape[d] || v->shape[d] != q->shape[d])
            return refuse(who, nodes, i, "its operands' batch sizes no longer match");
        batch *= q->shape[d];
    }
    if (k->shape[r - 1] != q->shape[r - 1] || v->shape[r - 2] != S)
        return refuse(who, nodes, i, "its operands' sizes no longer match");
    if (nd->nin > 3) {
        const jit_node *m = &nodes[nd->in[3]];
        if (m->shape[r - 2] != L || m->shape[r - 1] != S ||
            memcmp(m->shape, q->shape, sizeof(int64_t) * (size_t)(r - 2)) != 0)
            return refuse(who, nodes, i, "its mask no longer fits its scores");
    }
    nd->shape[0] = batch * L * (v->shape[r - 1] + 1);
    return 0;
}

/* Ops that treat each sample of their operands' dim 0 apart (convolutions, pooling and their
 * gradients): when only dim 0 of their operands changed, by the same size, so does the
 * result's (a weight's gradient sums over it: its shape stays). */
static bool per_sample(int op)
{
    return op == TIDE_OP_CONV2D || op == TIDE_OP_CONV2D_GRAD_INPUT ||
           op == TIDE_OP_CONV2D_GRAD_WEIGHT || op == TIDE_OP_MAX_POOL2D ||
           op == TIDE_OP_MAX_POOL2D_INDICES || op == TIDE_OP_AVG_POOL2D ||
           op == TIDE_OP_AVG_POOL2D_GRAD;
}

static int per_sample_shape(const char *who, jit_node *nodes, const jit_node *cap, int i)
{
    jit_node *nd = &nodes[i];
    int64_t n = -1;
    for (int j = 0; j < nd->nin; j++) {
        const jit_node *a = &nodes[nd->in[j]], *c = &cap[nd->in[j]];
        if (a->shape[0] == c->shape[0])
            continue;
        if (memcmp(a->shape + 1, c->shape + 1, sizeof(int64_t) * (a->ndim - 1)) != 0 ||
            (n >= 0 && n != a->shape[0]))
            return refuse(who, nodes, i, "only a batch (dim 0) of its operands may change");
        n = a->shape[0];
    }
    if (nd->op != TIDE_OP_CONV2D_GRAD_WEIGHT && n >= 0)
        nd->shape[0] = n;
    return 0;
}

/* Whether op node i's attributes and inputs are what its shape rule reads: dims inside the
 * ranks, enough inputs (a graph file's nodes are checked with the rules before they run). */
static bool rule_can_read(const jit_node *nodes, int i)
{
    const jit_node *nd = &nodes[i];
    tide_op op = (tide_op)nd->op;
    const jit_node *a = nd->nin > 0 ? &nodes[nd->in[0]] : NULL;
    int need = op == TIDE_OP_MATMUL || op == TIDE_OP_LINEAR_HALF || tide_op_is_binary(op) ||
                       op == TIDE_OP_GATHER || op == TIDE_OP_INDEX_SELECT
                   ? 2
               : op == TIDE_OP_WHERE || op == TIDE_OP_SDPA                             ? 3
               : op == TIDE_OP_IOTA || op == TIDE_OP_RANDOM                            ? 0
                                                                                       : 1;
    if (nd->nin < need)
        return false;
    if (op == TIDE_OP_MATMUL && nd->ndim < 2)
        return false;
    if (op == TIDE_OP_SDPA) {
        for (int j = 1; j < nd->nin; j++)
            if (nodes[nd->in[j]].ndim != a->ndim)
                return false;
        return nd->ndim == 1 && a->ndim >= 2;
    }
    if (op == TIDE_OP_QLINEAR || op == TIDE_OP_DEQUANTIZE || op == TIDE_OP_QUANTIZE ||
        op == TIDE_OP_LINEAR_HALF)
        return nd->ndim == 2 && a->ndim == 2 && (nd->nin < 2 || nodes[nd->in[1]].ndim >= 1);
    bool same_rank = tide_op_is_unary(op) || op == TIDE_OP_CAST || op == TIDE_OP_TO ||
                     op == TIDE_OP_CUMSUM || op == TIDE_OP_FLIP || op == TIDE_OP_SORT ||
                     op == TIDE_OP_CAT;
    bool broadcast = tide_op_is_binary(op) || op == TIDE_OP_WHERE;
    for (int j = 0; j < nd->nin; j++)
        if ((same_rank && nodes[nd->in[j]].ndim != nd->ndim) ||
            (broadcast && nodes[nd->in[j]].ndim > nd->ndim))
            return false;
    if (op == TIDE_OP_GATHER)
        return nodes[nd->in[1]].ndim == nd->ndim;
    if (op == TIDE_OP_INDEX_SELECT && a->ndim != nd->ndim)
        return false;
    bool dims = jit_is_reduce(op) || op == TIDE_OP_ARGMAX || op == TIDE_OP_ARGMIN ||
                op == TIDE_OP_CAT || (op == TIDE_OP_INDEX_SELECT && a->ndim > 0);
    for (int k = 0; dims && k < (jit_is_reduce(op) ? nd->attrs.nints : 1); k++)
        if (nd->attrs.ints[k] < 0 || nd->attrs.ints[k] >= a->ndim)
            return false;
    return true;
}

/* The shape of op node i from its inputs' (node i's rank and attributes as captured). */
static int op_shape(const char *who, jit_node *nodes, const jit_node *cap, int i)
{
    jit_node *nd = &nodes[i];
    const jit_node *a = nd->nin > 0 ? &nodes[nd->in[0]] : NULL;
    tide_op op = (tide_op)nd->op;
    if (tide_op_is_unary(op) || op == TIDE_OP_CAST || op == TIDE_OP_TO ||
        op == TIDE_OP_CUMSUM || op == TIDE_OP_FLIP || op == TIDE_OP_SORT) {
        memcpy(nd->shape, a->shape, sizeof(int64_t) * a->ndim);
    } else if (tide_op_is_binary(op) || op == TIDE_OP_WHERE) {
        if (broadcast_shape(who, nodes, i) < 0)
            return -1;
    } else if (jit_is_reduce(op) && a->ndim == nd->ndim) { /* kernels keep the reduced dims */
        memcpy(nd->shape, a->shape, sizeof(int64_t) * a->ndim);
        for (int k = 0; k < nd->attrs.nints; k++)
            nd->shape[nd->attrs.ints[k]] = 1;
    } else if (op == TIDE_OP_ARGMAX || op == TIDE_OP_ARGMIN) {
        int dim = (int)nd->attrs.ints[0];
        for (int d = 0, o = 0; d < a->ndim; d++)
            if (d != dim || nd->ndim == a->ndim)
                nd->shape[o++] = d == dim ? 1 : a->shape[d];
    } else if (per_sample(op)) {
        if (per_sample_shape(who, nodes, cap, i) < 0)
            return -1;
    } else if (op == TIDE_OP_MATMUL) {
        if (matmul_shape(who, nodes, i) < 0)
            return -1;
    } else if (op == TIDE_OP_SDPA) {
        if (sdpa_shape(who, nodes, i) < 0)
            return -1;
    } else if (op == TIDE_OP_QLINEAR || op == TIDE_OP_DEQUANTIZE || op == TIDE_OP_QUANTIZE) {
        /* rows follow the first input's; the other dim is the weight's, kept as captured */
        if (a->shape[1] != cap[nd->in[0]].shape[1] ||
            (nd->nin > 1 && nodes[nd->in[1]].shape[0] != cap[nd->in[1]].shape[0]))
            return refuse(who, nodes, i, "only its rows (dim 0) may change");
        nd->shape[0] = a->shape[0];
    } else if (op == TIDE_OP_LINEAR_HALF) { /* x [M, K] @ w [N, K]^T */
        const jit_node *w = &nodes[nd->in[1]];
        if (a->shape[1] != w->shape[1])
            return refuse(who, nodes, i, "its operands' inner sizes no longer match");
        nd->shape[0] = a->shape[0];
        nd->shape[1] = w->shape[0];
    } else if (op == TIDE_OP_CAT) {
        int dim = (int)nd->attrs.ints[0];
        memcpy(nd->shape, a->shape, sizeof(int64_t) * a->ndim);
        nd->shape[dim] = 0;
        for (int j = 0; j < nd->nin; j++) {
            const jit_node *b = &nodes[nd->in[j]];
            for (int d = 0; d < nd->ndim; d++)
                if (d != dim && b->shape[d] != a->shape[d])
                    return refuse(who, nodes, i, "its operands' sizes no longer match");
            nd->shape[dim] += b->shape[dim];
        }
    } else if (op == TIDE_OP_GATHER) { /* the index's shape */
        const jit_node *idx = &nodes[nd->in[1]];
        memcpy(nd->shape, idx->shape, sizeof(int64_t) * idx->ndim);
    } else if (op == TIDE_OP_INDEX_SELECT) { /* the input's, dim d as long as the index */
        const jit_node *idx = &nodes[nd->in[1]];
        memcpy(nd->shape, a->shape, sizeof(int64_t) * a->ndim);
        if (a->ndim > 0)
            nd->shape[nd->attrs.ints[0]] = td_numel(idx->ndim, idx->shape);
    } else {
        return 1;
    }
    td_contiguous_strides(nd->ndim, nd->shape, nd->strides);
    return 0;
}

int jit_shape_rule(jit_node *nodes, int i)
{
    if (!rule_can_read(nodes, i))
        return td_error("%s (node %d): its inputs or attributes are not what it takes",
                        tide_op_name((tide_op)nodes[i].op), i);
    return op_shape("load_graph", nodes, nodes, i);
}

/* A reshape at new sizes: its dims are cut into chunks whose element counts matched at capture;
 * a chunk whose count changed gives the change to its one output dim of size above 1 (a
 * dynamic size stays in the dim that carried it, whether the code wrote -1 or the captured
 * size). Refused where that is unknown: a chunk split over several such dims, or merged dims
 * beside a size-1 dim (at capture a -1 may have been 1). */
static int reshape_shape(const char *who, const jit_node *nodes, int i, const jit_node *cap,
                         int64_t *out)
{
    const jit_node *nd = &nodes[i], *src = &nodes[nd->in[0]], *csrc = &cap[nd->in[0]];
    const jit_node *cout = &cap[i];
    memcpy(out, cout->shape, sizeof(int64_t) * cout->ndim);
    if (td_numel(csrc->ndim, csrc->shape) == 0)
        return refuse(who, nodes, i, "it was captured empty");
    int k = 0, l = 0;
    int64_t pin = 1, pout = 1; /* element counts of the dims before k and l at capture */
    while (k < csrc->ndim || l < cout->ndim) {
        int k0 = k, l0 = l;
        int64_t now = 1, before = 1;
        do {
            if (k < csrc->ndim && (pin <= pout || l == cout->ndim)) {
                pin *= csrc->shape[k];
                before *= csrc->shape[k];
                now *= src->shape[k++];
            } else {
                pout *= cout->shape[l++];
            }
        } while (pin != pout || (k == k0 && k < csrc->ndim) || (l == l0 && l < cout->ndim));
        if (now == before)
            continue;
        int carrier = -1, ncarriers = 0, nmerged = 0;
        for (int d = l0; d < l; d++)
            if (cout->shape[d] != 1)
                carrier = d, ncarriers++;
        for (int d = k0; d < k; d++)
            nmerged += csrc->shape[d] != 1;
        if (ncarriers != 1)
            return refuse(who, nodes, i, "it splits a dynamic size over several dims (keep "
                                         "the dynamic dim whole, e.g. reshape to {-1, n})");
        if (nmerged > 1 && l - l0 > 1) /* [5, 8] -> [1, 40]: was the 1 a -1? */
            return refuse(who, nodes, i, "it merges a dynamic size into a dim beside a dim of "
                                         "size 1, which may stand for -1");
        out[carrier] = now;
    }
    return 0;
}

/* The layout of view node i (its strides, and its offset relative to its root) from its
 * source's new layout. */
static int view_layout(const char *who, jit_node *nodes, int i, const jit_node *cap)
{
    jit_node *nd = &nodes[i];
    const jit_node *src = &nodes[nd->in[0]], *csrc = &cap[nd->in[0]], *c = &cap[i];
    int64_t off = src->kind == JN_VIEW ? src->offset : 0;
    const int64_t *a = nd->attrs.ints;
    switch (nd->op) {
    case TIDE_OP_RESHAPE:
        if (reshape_shape(who, nodes, i, cap, nd->shape) < 0)
            return -1;
        if (!td_view_strides(src->ndim, src->shape, src->strides, nd->ndim, nd->shape,
                             nd->strides))
            return refuse(who, nodes, i, "it is no view of its input at these sizes");
        break;
    case TIDE_OP_PERMUTE:
        for (int d = 0; d < nd->ndim; d++) {
            nd->shape[d] = src->shape[a[d]];
            nd->strides[d] = src->strides[a[d]];
        }
        break;
    case TIDE_OP_EXPAND:
        for (int d = 0, lead = nd->ndim - src->ndim; d < nd->ndim; d++) {
            int j = d - lead; /* a kept dim follows its source; an expanded one stays literal */
            bool kept = j >= 0 && csrc->shape[j] == c->shape[d] &&
                        csrc->strides[j] == c->strides[d];
            nd->shape[d] = kept ? src->shape[j] : c->shape[d];
            nd->strides[d] = kept ? src->strides[j] : 0;
        }
        break;
    case TIDE_OP_SLICE:
    case TIDE_OP_SELECT: {
        int d = (int)a[0];
        if (src->shape[d] != csrc->shape[d])
            return refuse(who, nodes, i, "its bounds along a dynamic dim are literal");
        off += a[1] * src->strides[d]; /* the slice's start, or the selected index */
        for (int s = 0, o = 0; s < src->ndim; s++) {
            if (s == d && nd->op == TIDE_OP_SELECT)
                continue;
            nd->shape[o] = s == d ? c->shape[o] : src->shape[s];
            nd->strides[o] = s == d ? src->strides[s] * a[3] : src->strides[s];
            o++;
        }
        break;
    }
    default:
        return refuse(who, nodes, i, "the capture has no rule for this view");
    }
    nd->offset = off;
    return 0;
}

/* An in-place write: its destination's shape; each source must still broadcast into it. */
static int inplace_shape(const char *who, jit_node *nodes, int i)
{
    jit_node *nd = &nodes[i];
    const jit_node *dst = &nodes[nd->in[0]];
    memcpy(nd->shape, dst->shape, sizeof(int64_t) * dst->ndim);
    for (int j = 1; j < nd->nin; j++) {
        const jit_node *s = &nodes[nd->in[j]];
        for (int d = 0; d < s->ndim; d++) {
            int k = d + dst->ndim - s->ndim;
            if (k < 0 ? s->shape[d] != 1 : s->shape[d] != 1 && s->shape[d] != dst->shape[k])
                return refuse(who, nodes, i, "its source no longer fits its destination");
        }
    }
    return 0;
}

int jit_replay_shapes(const jit_node *cap, jit_node *nodes, int n, const char *who,
                      int *changed_nodes, int *nchanged)
{
    for (int i = 0; i < n; i++) {
        jit_node *nd = &nodes[i];
        if (nd->kind == JN_EXTERN)
            continue;
        bool changed = false;
        for (int j = 0; j < nd->nin; j++)
            changed |= !same_layout(&nodes[nd->in[j]], &cap[nd->in[j]]);
        if (!changed)
            continue;
        if (changed_nodes) /* before the rule writes it, so that a refusal is restored too */
            changed_nodes[(*nchanged)++] = i;
        int rc = nd->kind == JN_OP       ? op_shape(who, nodes, cap, i)
                 : nd->kind == JN_VIEW   ? view_layout(who, nodes, i, cap)
                 : nd->kind == JN_INPLACE ? inplace_shape(who, nodes, i)
                                          : refuse(who, nodes, i, "an unexpected node");
        if (rc > 0)
            rc = refuse(who, nodes, i, "the capture has no shape rule for this op yet");
        if (rc < 0)
            return -1;
    }
    return 0;
}
