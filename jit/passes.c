/*
 * passes.c — the passes over a traced segment before grouping: constant folding, exact
 * algebraic simplification, common-subexpression elimination, clone forwarding and dead-code
 * elimination. The graph is a program: a written node is never folded, merged or simplified
 * away, and CSE never merges across a write (epochs).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/half.h"
#include "../core/log.h"
#include "../core/strbuf.h"
#include "jit.h"

#define FOLD_MAX_NUMEL 4096 /* constants are folded when this small */

/* ---- folding and the helpers of the passes ---------------------------------------------------------------------- */

/* Evaluates node i from its constant inputs with the device's kernel. */
static tide_tensor *fold(jit_compiled *c, int i)
{
    const jit_node *nd = &c->nodes[i];
    td_meta meta = {nd->ndim, {0}, (tide_dtype)nd->dtype, c->device};
    memcpy(meta.shape, nd->shape, sizeof(int64_t) * nd->ndim);
    tide_tensor *in[JIT_MAX_IN];
    for (int k = 0; k < nd->nin; k++)
        in[k] = c->consts[nd->in[k]];
    return td_run_eager((tide_op)nd->op, &meta, in, nd->nin, &nd->attrs);
}

/* Whether every element of constant t equals v. */
static bool const_all(const tide_tensor *t, double v)
{
    int64_t n = td_numel(t->ndim, t->shape);
    const char *p = td_tensor_data(t);
    for (int64_t k = 0; k < n; k++) {
        double x;
        switch (t->dtype) {
        case TIDE_FLOAT32: x = ((const float *)p)[k]; break;
        case TIDE_FLOAT64: x = ((const double *)p)[k]; break;
        case TIDE_INT32: x = ((const int32_t *)p)[k]; break;
        case TIDE_INT64: x = (double)((const int64_t *)p)[k]; break;
        case TIDE_FLOAT16: x = td_f16_to_f32(((const uint16_t *)p)[k]); break;
        case TIDE_BFLOAT16: x = td_bf16_to_f32(((const uint16_t *)p)[k]); break;
        default: x = ((const uint8_t *)p)[k]; break;
        }
        if (x != v)
            return false;
    }
    return true;
}

/* ---- the passes ---------------------------------------------------------------------------- */

typedef struct cse_entry {
    uint64_t h;
    int node;
} cse_entry;

static uint64_t node_hash(const jit_node *nd)
{
    uint64_t h = 1469598103934665603ull;
#define MIX(x) (h = (h ^ (uint64_t)(x)) * 1099511628211ull)
    MIX(nd->kind);
    MIX(nd->op);
    MIX(nd->dtype);
    MIX(nd->epoch);
    for (int i = 0; i < nd->nin; i++)
        MIX(nd->in[i]);
    for (int i = 0; i < nd->ndim; i++)
        MIX(nd->shape[i]);
    for (int i = 0; i < nd->attrs.nints; i++)
        MIX(nd->attrs.ints[i]);
    MIX(nd->offset);
#undef MIX
    return h;
}

static bool node_equal(const jit_node *a, const jit_node *b)
{
    if (a->kind != b->kind || a->op != b->op || a->dtype != b->dtype || a->nin != b->nin ||
        a->device != b->device || a->epoch != b->epoch || !jit_same_shape(a->ndim, a->shape, b->ndim, b->shape) ||
        memcmp(a->in, b->in, sizeof(int) * (size_t)a->nin) != 0)
        return false;
    /* an op's root is itself; a view's is the storage it reads */
    if (a->kind == JN_VIEW &&
        (a->root != b->root || memcmp(a->strides, b->strides, sizeof(int64_t) * a->ndim) != 0 ||
         a->offset != b->offset))
        return false;
    return a->attrs.nints == b->attrs.nints && a->attrs.keepdim == b->attrs.keepdim &&
           memcmp(a->attrs.ints, b->attrs.ints, sizeof(int64_t) * (size_t)a->attrs.nints) == 0 &&
           memcmp(a->attrs.values, b->attrs.values, sizeof a->attrs.values) == 0;
}

/* A clone (same-dtype CAST) of a fresh op result that nothing else reads is that result: the
 * clone becomes an alias of it. Autograd clones a grad that reaches a leaf as a view (a linear
 * layer's weight grad is a matmul result transposed twice); eagerly it sees that nothing else
 * holds the view's storage and takes it as it is, but under the trace the base is a stub it
 * cannot see through, so every step copied each weight's grad. */
static int forward_clones(jit_compiled *c, char *is_output, char *written)
{
    int n = c->nnodes, forwarded = 0;
    jit_node *nodes = c->nodes;
    int *uses = td_calloc((size_t)(n ? n : 1), sizeof(int));
    if (!uses)
        return td_error("jit: out of memory");
    for (int i = 0; i < n; i++) {
        if (c->alias[i] != i)
            continue;
        for (int k = 0; k < nodes[i].nin; k++)
            uses[nodes[i].in[k]]++;
        if (nodes[i].kind == JN_VIEW)
            uses[nodes[i].root]++;
    }
    for (int i = 0; i < c->noutputs; i++)
        uses[c->alias[c->outputs[i]]]++;
    /* views nothing reads do not count (the inner transpose of a double one, simplified away) */
    for (int changed = 1; changed;) {
        changed = 0;
        for (int i = n - 1; i >= 0; i--)
            if (c->alias[i] == i && nodes[i].kind == JN_VIEW && uses[i] == 0) {
                for (int k = 0; k < nodes[i].nin; k++)
                    uses[nodes[i].in[k]]--;
                uses[nodes[i].root]--;
                uses[i] = -1; /* counted out */
                changed = 1;
            }
    }
    for (int i = 0; i < n; i++) {
        const jit_node *nd = &nodes[i];
        if (c->alias[i] != i || nd->kind != JN_OP || nd->op != TIDE_OP_CAST || nd->nin != 1)
            continue;
        int x = nd->in[0];
        const jit_node *xn = &nodes[x];
        if (xn->kind != JN_OP || c->alias[x] != x || uses[x] != 1 || written[x] ||
            is_output[x] || xn->dtype != nd->dtype ||
            !jit_same_shape(xn->ndim, xn->shape, nd->ndim, nd->shape))
            continue;
        c->alias[i] = x;
        is_output[x] = is_output[i];
        written[x] = written[i];
        forwarded++;
    }
    free(uses);
    if (forwarded)
        for (int i = 0; i < n; i++) {
            while (c->alias[c->alias[i]] != c->alias[i]) /* nodes merged into a clone */
                c->alias[i] = c->alias[c->alias[i]];
            for (int k = 0; k < nodes[i].nin; k++)
                nodes[i].in[k] = c->alias[nodes[i].in[k]];
            if (nodes[i].kind == JN_VIEW)
                nodes[i].root = c->alias[nodes[i].root];
        }
    return forwarded;
}

/* Rewrites the graph in place: folding, simplification, CSE (through alias), clone forwarding,
 * then liveness. */
/* Constant folding: a creation op, or a pure op of constants, when small; node i becomes a
 * constant. 1 when folded, 0 when not, -1 on error. */
static int fold_pass(jit_compiled *c, int i, bool protected_node)
{
    jit_node *nd = &c->nodes[i];
    /* a symbolic shape is a run's: its value cannot be computed once */
    if (nd->kind != JN_OP || protected_node || jit_numel(nd) > FOLD_MAX_NUMEL ||
        (c->node_sym && c->node_sym[i]) ||
        nd->op == TIDE_OP_RANDOM || !c->device->host_buffers) /* constants are read on the host */
        return 0;
    bool all_const = nd->op == TIDE_OP_FILL || nd->op == TIDE_OP_IOTA;
    if (!all_const && (jit_op_fusible(nd->op) || jit_is_reduce(nd->op)) && nd->nin > 0) {
        all_const = true;
        for (int k = 0; k < nd->nin; k++)
            all_const = all_const && c->nodes[nd->in[k]].kind == JN_CONST;
    }
    if (!all_const)
        return 0;
    tide_tensor *v = fold(c, i);
    if (!v)
        return -1;
    c->consts[i] = v;
    nd->kind = JN_CONST;
    return 1;
}

/* A view of a view (after aliasing) or one that changes nothing: an alias of its root. */
static bool simplify_view(jit_compiled *c, int i)
{
    const jit_node *nd = &c->nodes[i], *r = &c->nodes[nd->root];
    if (r->kind == JN_OP && jit_same_shape(nd->ndim, nd->shape, r->ndim, r->shape) &&
        memcmp(nd->strides, r->strides, sizeof(int64_t) * nd->ndim) == 0 && nd->offset == 0) {
        c->alias[i] = nd->root;
        return true;
    }
    return false;
}

/* x*1, 1*x, x/1, x+0, 0+x, x-0: exact, when the result has x's shape and dtype. */
static bool simplify_identity(jit_compiled *c, int i, const char *written)
{
    const jit_node *nd = &c->nodes[i];
    if (nd->kind != JN_OP || !tide_op_is_binary((tide_op)nd->op) || nd->nin != 2)
        return false;
    int a = nd->in[0], b = nd->in[1], keep = -1;
    const tide_tensor *ca = c->nodes[a].kind == JN_CONST ? c->consts[a] : NULL;
    const tide_tensor *cb = c->nodes[b].kind == JN_CONST ? c->consts[b] : NULL;
    switch (nd->op) {
    case TIDE_OP_MUL:
        if (cb && const_all(cb, 1)) keep = a;
        else if (ca && const_all(ca, 1)) keep = b;
        break;
    case TIDE_OP_DIV:
        if (cb && const_all(cb, 1)) keep = a;
        break;
    case TIDE_OP_ADD:
        if (cb && const_all(cb, 0)) keep = a;
        else if (ca && const_all(ca, 0)) keep = b;
        break;
    case TIDE_OP_SUB:
        if (cb && const_all(cb, 0)) keep = a;
        break;
    default:
        break;
    }
    if (keep < 0 || written[keep] || c->nodes[keep].dtype != nd->dtype ||
        !jit_same_shape(c->nodes[keep].ndim, c->nodes[keep].shape, nd->ndim, nd->shape))
        return false;
    c->alias[i] = keep;
    return true;
}

/* Common subexpressions: node i becomes an alias of an equal earlier node (never across a
 * write: epochs are part of the equality), or is entered in the table. */
typedef struct cse_table {
    cse_entry *e;
    size_t mask;
} cse_table;

/* The slot of t where node i's hash h is entered, after any equal unwritten node that would
 * be found first: *found is that node, or -1. */
static size_t cse_probe(const jit_compiled *c, const cse_table *t, int i, uint64_t h,
                        const char *written, int *found)
{
    size_t s = h & t->mask;
    *found = -1;
    for (; t->e[s].node >= 0; s = (s + 1) & t->mask)
        if (t->e[s].h == h && node_equal(&c->nodes[t->e[s].node], &c->nodes[i]) &&
            !written[t->e[s].node]) {
            *found = t->e[s].node;
            return s;
        }
    return s;
}

/* Enters node i, which must stay itself (an output): later equal nodes may become its alias. */
static void cse_enter(jit_compiled *c, cse_table *t, int i, const char *written)
{
    if (c->nodes[i].op == TIDE_OP_RANDOM)
        return;
    uint64_t h = node_hash(&c->nodes[i]);
    int found;
    size_t s = cse_probe(c, t, i, h, written, &found);
    if (found < 0) {
        t->e[s].h = h;
        t->e[s].node = i;
    }
}

/* Node i becomes an alias of an equal earlier node (true), or is entered. */
static bool cse_pass(jit_compiled *c, cse_table *t, int i, const char *written)
{
    if (c->nodes[i].op == TIDE_OP_RANDOM)
        return false;
    uint64_t h = node_hash(&c->nodes[i]);
    int found;
    size_t s = cse_probe(c, t, i, h, written, &found);
    if (found >= 0) {
        c->alias[i] = found;
        return true;
    }
    t->e[s].h = h;
    t->e[s].node = i;
    return false;
}

/* Dead code: outputs and writes into outside tensors are live; a write into a node is live
 * when the node is; a live node's inputs are live. Returns how many nodes are dead. */
static int dce_pass(jit_compiled *c, char *live)
{
    int n = c->nnodes;
    const jit_node *nodes = c->nodes;
    const int *alias = c->alias;
    memset(live, 0, (size_t)n);
    for (int i = 0; i < c->noutputs; i++)
        live[alias[c->outputs[i]]] = 1;
    for (int pass = 0, changed = 1; changed && pass < 8; pass++) {
        changed = 0;
        for (int i = n - 1; i >= 0; i--) {
            const jit_node *nd = &nodes[i];
            if (alias[i] != i)
                continue;
            if (nd->kind == JN_INPLACE && !live[i]) {
                int dst_root = nodes[nd->in[0]].root;
                if (nodes[dst_root].kind == JN_EXTERN || live[dst_root] || live[nd->in[0]]) {
                    live[i] = 1;
                    changed = 1;
                }
            }
            if (!live[i])
                continue;
            for (int k = 0; k < nd->nin; k++)
                if (!live[nd->in[k]]) {
                    live[nd->in[k]] = 1;
                    changed = 1;
                }
            if (nd->kind == JN_VIEW && !live[nd->root]) {
                live[nd->root] = 1;
                changed = 1;
            }
        }
    }
    int dead = 0;
    for (int i = 0; i < n; i++)
        dead += alias[i] == i && !live[i] && nodes[i].kind != JN_EXTERN;
    return dead;
}

/* The passes, in one sweep over the nodes in program order (each node's inputs are already
 * resolved): folding, simplification, CSE; then clone forwarding and dead code. */
int jit_run_passes(jit_compiled *c, char *live, char *is_output, char *written)
{
    int n = c->nnodes;
    size_t cap = 1;
    while (cap < 2 * (size_t)n)
        cap *= 2;
    cse_table cse = {td_calloc(cap, sizeof *cse.e), cap - 1};
    if (!cse.e)
        return td_error("jit: out of memory");
    for (size_t i = 0; i < cap; i++)
        cse.e[i].node = -1;
    int folded = 0, simplified = 0, merged = 0;
    for (int i = 0; i < n; i++) {
        jit_node *nd = &c->nodes[i];
        for (int k = 0; k < nd->nin; k++)
            nd->in[k] = c->alias[nd->in[k]];
        if (nd->kind == JN_VIEW) {
            nd->root = c->alias[nd->root];
            if (simplify_view(c, i)) {
                simplified++;
                continue;
            }
        }
        if (nd->kind != JN_OP && nd->kind != JN_VIEW)
            continue;
        bool protected_node = is_output[i] || written[i];
        int f = fold_pass(c, i, protected_node);
        if (f < 0) {
            free(cse.e);
            return -1;
        }
        folded += f;
        /* an output stays its own node, but a later equal node may read it: backward's
         * recomputation of a forward value (gelu(x) for gelu's gradient) in the same trace */
        if (protected_node && !f && !written[i] && nd->kind == JN_OP)
            cse_enter(c, &cse, i, written);
        if (f || protected_node)
            continue;
        if (simplify_identity(c, i, written))
            simplified++;
        else if (cse_pass(c, &cse, i, written))
            merged++;
    }
    free(cse.e);
    int forwarded = forward_clones(c, is_output, written);
    if (forwarded < 0)
        return -1;
    simplified += forwarded;
    int dead = dce_pass(c, live);
    td_log("jit", "passes: %d nodes, %d folded, %d simplified, %d merged (CSE), %d dead", n,
           folded, simplified, merged, dead);
    return 0;
}
