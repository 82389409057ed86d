/*
 * graph_ops.c — per op, what its kernels take for granted, checked on a graph file's nodes
 * (graph_check.c): the operand count, the dtypes (the public functions cast operands before
 * they dispatch, so a kernel reads every operand in the dtype it expects), the attributes
 * (dims inside the rank, windows and strides positive) and the result's shape. replay.c's shape
 * rules check the shapes of the elementwise ops, reductions, matmul and cat on top of this.
 * Graph files hold the ops below: what inference of the nn layers traces to. Others (gradients,
 * random numbers, quantized and half products, sorting, top-k, cumsum) are refused by name
 * until they get rules here; tide_graph_save refuses them too, so an export fails, not a later load.
 */
#include <stdio.h>
#include <string.h>

#include "graph_desc.h"

typedef struct node_ctx {
    const td_graph_node *nodes;
    int k;
    const td_graph_node *n; /* node k */
} node_ctx;

static int fault(const node_ctx *c, const char *why)
{
    return td_error("load_graph: node %d (%s) is damaged: %s", c->k,
                    tide_op_name((tide_op)c->n->op), why);
}

static const td_graph_node *in(const node_ctx *c, int j) { return &c->nodes[c->n->in[j]]; }

static bool is_comparison(int op) { return op >= TIDE_OP_EQ && op <= TIDE_OP_LOGICAL_OR; }

/* Operands 0..n-1 all of dtype dt. */
static bool all_dtype(const node_ctx *c, int from, int to, int dt)
{
    for (int j = from; j < to; j++)
        if (in(c, j)->dtype != dt)
            return false;
    return true;
}

static bool dim_ok(const node_ctx *c, int64_t d, int ndim)
{
    (void)c;
    return d >= 0 && d < ndim;
}

static bool is_index_dtype(int dt) { return dt == TIDE_INT64 || dt == TIDE_INT32; }

static int check_elementwise(const node_ctx *c)
{
    const td_graph_node *n = c->n;
    int op = n->op;
    if (tide_op_is_unary((tide_op)op))
        return n->nin == 1 && (op == TIDE_OP_LOGICAL_NOT ? n->dtype == TIDE_BOOL
                                                         : in(c, 0)->dtype == n->dtype)
                   ? 0
                   : fault(c, "its operand's dtype is not its result's");
    if (tide_op_is_binary((tide_op)op))
        return n->nin == 2 && in(c, 0)->dtype == in(c, 1)->dtype &&
                       n->dtype == (is_comparison(op) ? TIDE_BOOL : in(c, 0)->dtype)
                   ? 0
                   : fault(c, "its operands' dtypes differ, or differ from its result's");
    if (op == TIDE_OP_WHERE)
        return n->nin == 3 && in(c, 0)->dtype == TIDE_BOOL && all_dtype(c, 1, 3, n->dtype)
                   ? 0
                   : fault(c, "its condition is not bool or its branches not its dtype");
    return n->nin == 1 ? 0 : fault(c, "it takes one operand"); /* CAST, TO: any dtypes */
}

static int check_reduction(const node_ctx *c)
{
    const td_graph_node *n = c->n, *a = n->nin == 1 ? in(c, 0) : NULL;
    if (!a || a->ndim != n->ndim)
        return fault(c, "it takes one operand of its rank");
    for (int i = 0; i < n->attrs.nints; i++)
        if (!dim_ok(c, n->attrs.ints[i], a->ndim) || (i && n->attrs.ints[i] <= n->attrs.ints[i - 1]))
            return fault(c, "its dims are not increasing dims of its operand");
    if (n->op == TIDE_OP_ARGMAX || n->op == TIDE_OP_ARGMIN)
        return n->dtype == TIDE_INT64 && n->attrs.nints == 1 ? 0
                                                             : fault(c, "an argmax is one int64 dim");
    bool widened = (n->op == TIDE_OP_SUM || n->op == TIDE_OP_PROD) &&
                   !tide_dtype_is_floating((tide_dtype)a->dtype) && n->dtype == TIDE_INT64;
    return a->dtype == n->dtype || widened ? 0 : fault(c, "its result's dtype is not its operand's");
}

/* conv2d: x [N, C, H, W], w [O, C/g, kH, kW], ints stride(2) pad(2) dilation(2) groups. */
static int check_conv(const node_ctx *c)
{
    const td_graph_node *n = c->n;
    if (n->nin != 2 || in(c, 0)->ndim != 4 || in(c, 1)->ndim != 4 || n->ndim != 4 ||
        n->attrs.nints != 7 || !all_dtype(c, 0, 2, n->dtype))
        return fault(c, "a conv2d takes 4-D input and weight of its dtype and 7 attributes");
    const int64_t *x = in(c, 0)->shape, *w = in(c, 1)->shape, *a = n->attrs.ints;
    int64_t g = a[6];
    if (a[0] < 1 || a[1] < 1 || a[2] < 0 || a[3] < 0 || a[4] < 1 || a[5] < 1 || g < 1 ||
        a[0] > (1 << 20) || a[1] > (1 << 20) || a[2] > (1 << 20) || a[3] > (1 << 20) ||
        a[4] > (1 << 20) || a[5] > (1 << 20) || x[1] % g || w[0] % g || w[1] * g != x[1])
        return fault(c, "its stride, padding, dilation or groups do not fit its operands");
    for (int i = 0; i < 2; i++) {
        int64_t span = a[4 + i] * (w[2 + i] - 1) + 1, size = x[2 + i] + 2 * a[2 + i];
        int64_t out = size < span ? -1 : (size - span) / a[i] + 1;
        if (out != n->shape[2 + i])
            return fault(c, "its result's height or width is not what its window gives");
    }
    return n->shape[0] == x[0] && n->shape[1] == w[0] ? 0
                                                       : fault(c, "its result's batch or channels");
}

/* Pooling: x [N, C, H, W], ints kernel(2) stride(2) pad(2) and one more (count_include_pad). */
static int check_pool(const node_ctx *c)
{
    const td_graph_node *n = c->n;
    if (n->nin != 1 || in(c, 0)->ndim != 4 || n->ndim != 4 || n->attrs.nints != 7)
        return fault(c, "pooling takes one 4-D operand and 7 attributes");
    const int64_t *x = in(c, 0)->shape, *a = n->attrs.ints;
    int dt = n->op == TIDE_OP_MAX_POOL2D_INDICES ? TIDE_INT64 : in(c, 0)->dtype;
    if (n->dtype != dt)
        return fault(c, "its result's dtype");
    for (int i = 0; i < 2; i++) {
        int64_t k = a[i], s = a[2 + i], p = a[4 + i];
        if (k < 1 || s < 1 || p < 0 || p > k / 2 || k > (1 << 20) || s > (1 << 20) ||
            x[2 + i] < 1 || (x[2 + i] + 2 * p - k) / s + 1 != n->shape[2 + i] ||
            x[2 + i] + 2 * p < k)
            return fault(c, "its window does not fit its operand or give its result");
    }
    return n->shape[0] == x[0] && n->shape[1] == x[1] ? 0 : fault(c, "its result's batch or "
                                                                     "channels");
}

/* pad: ints (before, after) per dim; the result is the operand grown (or cut) by them. */
static int check_pad(const node_ctx *c)
{
    const td_graph_node *n = c->n, *a = n->nin == 1 ? in(c, 0) : NULL;
    if (!a || a->ndim != n->ndim || n->attrs.nints != 2 * n->ndim || a->dtype != n->dtype)
        return fault(c, "a pad takes one operand of its rank and dtype, two sizes a dim");
    for (int d = 0; d < n->ndim; d++) {
        int64_t lo = n->attrs.ints[2 * d], hi = n->attrs.ints[2 * d + 1];
        if (lo < -(1LL << 40) || lo > (1LL << 40) || hi < -(1LL << 40) || hi > (1LL << 40) ||
            a->shape[d] + lo + hi != n->shape[d])
            return fault(c, "its padding does not give its result's shape");
    }
    return 0;
}

/* gather (index of the operand's rank, result of its shape) and index_select (1-D index, the
 * operand's shape with dim d as long as it). Index values are checked by the kernels at run
 * time, as eagerly. */
static int check_index(const node_ctx *c)
{
    const td_graph_node *n = c->n;
    if (n->nin != 2 || !is_index_dtype(in(c, 1)->dtype) || in(c, 0)->dtype != n->dtype ||
        n->attrs.nints != 1)
        return fault(c, "it takes an operand of its dtype and an integer index");
    const td_graph_node *x = in(c, 0), *idx = in(c, 1);
    int64_t d = n->attrs.ints[0];
    if (n->op == TIDE_OP_GATHER)
        return x->ndim == idx->ndim && dim_ok(c, d, x->ndim) && n->ndim == idx->ndim &&
                       !memcmp(n->shape, idx->shape, sizeof(int64_t) * (size_t)n->ndim)
                   ? 0
                   : fault(c, "its index's rank or shape does not give its result");
    if (idx->ndim > 1 || n->ndim != x->ndim || (x->ndim && !dim_ok(c, d, x->ndim)))
        return fault(c, "its index is not 1-D or its dim is out of range");
    for (int i = 0; i < n->ndim; i++)
        if (n->shape[i] != (i == d ? td_numel(idx->ndim, idx->shape) : x->shape[i]))
            return fault(c, "its result's shape is not its operand's with the index's length");
    return x->ndim || td_numel(idx->ndim, idx->shape) == 1 ? 0 : fault(c, "a 0-dim operand");
}

/* Attention (ops/attention.c): q [b.., L, E], k [b.., S, E], v [b.., S, Ev] with equal batch
 * dims, an additive mask [b.., L, S] when ints[1] says so; the result packs the output and a
 * row statistic: n * L * (Ev + 1) elements for n batch entries. */
static int check_sdpa(const node_ctx *c)
{
    const td_graph_node *n = c->n;
    /* two flags (is_causal, has_mask), and a third (heads-last outputs) in files since it
     * came; files from before read as without it */
    int nf = n->attrs.nints;
    bool masked = (nf == 2 || nf == 3) && n->attrs.ints[1] == 1;
    if (n->nin != (masked ? 4 : 3) || (nf != 2 && nf != 3) || (n->attrs.ints[0] & ~1) ||
        (n->attrs.ints[1] & ~1) || (nf == 3 && (n->attrs.ints[2] & ~1)) ||
        !all_dtype(c, 0, n->nin, n->dtype) || n->ndim != 1)
        return fault(c, "attention takes q, k, v (and a mask) of its dtype, two or three flags, "
                        "and gives one packed row");
    const td_graph_node *q = in(c, 0), *k = in(c, 1), *v = in(c, 2);
    int r = q->ndim;
    if (r < 2 || k->ndim != r || v->ndim != r)
        return fault(c, "q, k and v are not of one rank of at least 2");
    int64_t batch = 1;
    for (int d = 0; d < r - 2; d++) {
        if (k->shape[d] != q->shape[d] || v->shape[d] != q->shape[d])
            return fault(c, "q, k and v have other batch dims");
        batch *= q->shape[d];
    }
    int64_t L = q->shape[r - 2], E = q->shape[r - 1], S = k->shape[r - 2], Ev = v->shape[r - 1];
    if (k->shape[r - 1] != E || v->shape[r - 2] != S)
        return fault(c, "k's width is not q's, or v's length is not k's");
    if (masked) {
        const td_graph_node *m = in(c, 3);
        if (m->ndim != r || m->shape[r - 2] != L || m->shape[r - 1] != S ||
            memcmp(m->shape, q->shape, sizeof(int64_t) * (size_t)(r - 2)) != 0)
            return fault(c, "its mask is not [batch.., L, S]");
    }
    return n->shape[0] == batch * L * (Ev + 1) ? 0 : fault(c, "its packed result's length");
}

/* flip: dims inside the rank, the operand's shape and dtype (replay.c's rule checks the shape). */
static int check_flip(const node_ctx *c)
{
    const td_graph_node *n = c->n;
    if (n->nin != 1 || in(c, 0)->dtype != n->dtype || in(c, 0)->ndim != n->ndim)
        return fault(c, "a flip takes one operand of its dtype and rank");
    for (int i = 0; i < n->attrs.nints; i++)
        if (!dim_ok(c, n->attrs.ints[i], n->ndim))
            return fault(c, "a dim out of range");
    return 0;
}

/* In-place writes: COPY of sources that broadcast into the destination, of its dtype; FILL of
 * a value. */
static int check_inplace(const node_ctx *c)
{
    const td_graph_node *n = c->n, *dst = in(c, 0);
    if (n->op == TIDE_OP_FILL)
        return n->nin == 1 ? 0 : fault(c, "a fill writes one destination");
    if (n->op != TIDE_OP_COPY || n->nin != 2 || in(c, 1)->dtype != dst->dtype)
        return fault(c, "an in-place write other than a copy of the destination's dtype");
    const td_graph_node *s = in(c, 1);
    if (s->ndim > dst->ndim)
        return fault(c, "its source has more dims than its destination");
    for (int d = 0; d < s->ndim; d++) {
        int64_t want = dst->shape[d + dst->ndim - s->ndim];
        if (s->shape[d] != 1 && s->shape[d] != want)
            return fault(c, "its source does not broadcast into its destination");
    }
    return 0;
}

int jit_graph_check_op(const td_graph_node *nodes, int k)
{
    node_ctx c = {nodes, k, &nodes[k]};
    int op = c.n->op;
    if (c.n->kind == TD_GN_INPLACE)
        return check_inplace(&c);
    if (tide_op_is_unary((tide_op)op) || tide_op_is_binary((tide_op)op) ||
        op == TIDE_OP_WHERE || op == TIDE_OP_CAST || op == TIDE_OP_TO)
        return check_elementwise(&c);
    if (jit_is_reduce(op) || op == TIDE_OP_ARGMAX || op == TIDE_OP_ARGMIN)
        return check_reduction(&c);
    switch (op) {
    case TIDE_OP_MATMUL:
        return c.n->nin == 2 && all_dtype(&c, 0, 2, c.n->dtype) ? 0
                                                                : fault(&c, "operands' dtypes");
    case TIDE_OP_CAT:
        return c.n->nin >= 1 && all_dtype(&c, 0, c.n->nin, c.n->dtype) &&
                       c.n->attrs.nints == 1 && dim_ok(&c, c.n->attrs.ints[0], c.n->ndim)
                   ? 0
                   : fault(&c, "operands' dtypes or its dim");
    case TIDE_OP_CONV2D:
        return check_conv(&c);
    case TIDE_OP_MAX_POOL2D:
    case TIDE_OP_MAX_POOL2D_INDICES:
    case TIDE_OP_AVG_POOL2D:
        return check_pool(&c);
    case TIDE_OP_PAD:
        return check_pad(&c);
    case TIDE_OP_GATHER:
    case TIDE_OP_INDEX_SELECT:
        return check_index(&c);
    case TIDE_OP_FLIP:
        return check_flip(&c);
    case TIDE_OP_SDPA:
        return check_sdpa(&c);
    case TIDE_OP_IOTA:
        return c.n->nin == 0 ? 0 : fault(&c, "iota takes no operand");
    default:
        return td_error("load_graph: node %d runs %s, which graph files do not hold yet (they "
                        "hold elementwise ops, reductions, matmul, cat, conv2d, pooling, pad, "
                        "gather, index_select, flip, attention, iota, views and copies)", k,
                        tide_op_name((tide_op)op));
    }
}
