/*
 * engine.c — reverse-mode autograd: the record hook that builds backward nodes as ops run, the
 * walk that runs them in reverse topological order and accumulates leaves' gradients, grad
 * mode, and the autograd functions of tide.h. The formulas themselves are in formulas.c.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../ops/dispatch.h"
#include "autograd.h"

/* Grad mode, per thread; on by default (the variable says "off" so zero-initialised is on). */
static _Thread_local bool grad_off;

static void shape_str(char *buf, size_t size, const tide_tensor *t)
{
    char s[160];
    snprintf(buf, size, "%s %s", td_shape_str(s, sizeof s, t->ndim, t->shape),
             tide_dtype_name((tide_dtype)t->dtype));
}

/* ---- nodes --------------------------------------------------------------------------------- */

static void free_saved(ag_node *n)
{
    for (int i = 0; i < n->nin; i++) {
        tide_release(n->in[i].saved);
        n->in[i].saved = NULL;
    }
}

typedef struct release_stack {
    ag_node **v;
    int top, cap;
    ag_node *buf[64];
} release_stack;

static void push_node(release_stack *st, ag_node *n)
{
    if (st->top == st->cap) {
        int ncap = st->cap * 2;
        ag_node **grown = td_malloc(sizeof *grown * (size_t)ncap);
        if (!grown) { /* out of memory: release it the recursive way rather than leak */
            td_grad_fn_release(n);
            return;
        }
        memcpy(grown, st->v, sizeof *grown * (size_t)st->top);
        if (st->v != st->buf)
            free(st->v);
        st->v = grown;
        st->cap = ncap;
    }
    st->v[st->top++] = n;
}

/* Releases t; when that frees it, its grad_fn reference moves onto the stack instead of being
 * released from inside tide_release (which would recurse once per saved tensor in a chain). */
static void release_tensor(release_stack *st, tide_tensor *t)
{
    if (t && t->grad_fn && __atomic_load_n(&t->refcount, __ATOMIC_ACQUIRE) == 1) {
        push_node(st, t->grad_fn);
        t->grad_fn = NULL;
    }
    tide_release(t);
}

/* Releases a node; the nodes (and saved tensors' nodes) it keeps alive are released
 * iteratively, so a graph of any depth is freed without deep recursion. */
void td_grad_fn_release(void *grad_fn)
{
    if (!grad_fn)
        return;
    release_stack st = {.cap = 64};
    st.v = st.buf;
    st.v[st.top++] = grad_fn;
    while (st.top > 0) {
        ag_node *n = st.v[--st.top];
        if (td_ref_dec(&n->refcount) != 0)
            continue;
        tide_release(n->grad);
        ag_view_grad_drop(n);
        for (int i = 0; i < n->nin; i++) {
            release_tensor(&st, n->in[i].saved);
            release_tensor(&st, n->in[i].leaf);
            if (n->in[i].node)
                push_node(&st, n->in[i].node);
        }
        free(n);
    }
    if (st.v != st.buf)
        free(st.v);
}

/* ---- recording ------------------------------------------------------------------------------ */

static bool requires_grad(const tide_tensor *t) { return t && (t->flags & TD_REQUIRES_GRAD); }

/* The op the user called that made n: "sum" for the view sum drops its dims with. */
static const char *node_name(const ag_node *n) { return n->name ? n->name : tide_op_name(n->op); }

static int record_node(tide_op op, tide_tensor *out, tide_tensor *const *in, int nin,
                       const tide_attrs *attrs)
{
    ag_node *n = td_calloc(1, sizeof *n + sizeof(ag_input) * (size_t)nin);
    if (!n)
        return td_error("%s: out of memory recording the backward node", tide_op_name(op));
    n->refcount = 1;
    n->op = op;
    n->name = td_thread_hooks()->op_name;
    if (attrs)
        n->attrs = *attrs;
    n->out_dtype = out->dtype;
    n->out_ndim = out->ndim;
    memcpy(n->out_shape, out->shape, sizeof(int64_t) * out->ndim);
    n->nin = nin;
    unsigned needed = 0;
    bool any = false;
    for (int i = 0; i < nin; i++) {
        ag_input *a = &n->in[i];
        tide_tensor *x = in[i];
        a->transposed = ag_stored_transposed(x);
        a->dtype = x->dtype;
        a->device = x->device;
        a->ndim = x->ndim;
        memcpy(a->shape, x->shape, sizeof(int64_t) * x->ndim);
        if (requires_grad(x)) {
            any = true;
            if (i < 32)
                needed |= 1u << i;
            if (x->grad_fn) {
                a->node = x->grad_fn;
                td_ref_inc(&a->node->refcount);
            } else {
                a->leaf = tide_retain(x);
            }
        }
    }
    if (!any) { /* the dispatcher only calls with an input that requires grad; be safe */
        free(n);
        return 0;
    }
    unsigned save = ag_saved_inputs(op, needed);
    for (int i = 0; i < nin && i < 32; i++) {
        if (!(save & (1u << i)))
            continue;
        n->in[i].saved = tide_retain(in[i]);
        n->in[i].version = in[i]->storage ? in[i]->storage->version : 0;
    }
    if (out->grad_fn) /* a tracer handed back a tensor that already had one; an in-place write */
        td_grad_fn_release(out->grad_fn);
    out->grad_fn = n;
    out->flags |= TD_REQUIRES_GRAD;
    return 0;
}

/* An in-place write (COPY, FILL) into dst while grad mode is on, before it happens. A leaf that
 * requires grad is refused, as PyTorch does. A tensor inside a graph, or one receiving a source
 * that requires grad, is rewired when nothing else can see its memory (its storage has no other
 * tensor): its old value is overwritten whole, so its grad_fn becomes the copy's (or nothing,
 * for fill_ and a source outside the graph). With other views of the memory alive, their graphs
 * would silently go stale: refused. */
static int inplace_record(tide_op op, tide_tensor *dst, tide_tensor *const *in, int nin)
{
    const char *name = op == TIDE_OP_FILL ? "fill_" : "copy_";
    bool src_grad = false;
    for (int i = 0; i < nin; i++)
        src_grad |= requires_grad(in[i]);
    char s[200];
    shape_str(s, sizeof s, dst);
    if (requires_grad(dst) && !dst->grad_fn)
        return td_error("%s: a leaf tensor that requires grad (%s) is being used in an in-place "
                        "operation; do it under no_grad (tide_set_grad_enabled(false)) or on "
                        "x.data / detach()",
                        name, s);
    if (!requires_grad(dst) && !src_grad)
        return 0;
    if (!tide_dtype_is_floating((tide_dtype)dst->dtype))
        return 0; /* an integer destination carries no gradient */
    if (!dst->storage || dst->storage->refcount != 1) {
        if (dst->grad_fn)
            return td_error("%s: in-place write into a tensor that is part of the autograd graph "
                            "(%s, made by %s) while other tensors view its memory is not "
                            "supported; use the out-of-place op, or clone() it first",
                            name, s, node_name(dst->grad_fn));
        return td_error("%s: the source requires grad, but the destination (%s) shares its memory "
                        "with other tensors, whose gradients would go wrong; use an out-of-place "
                        "op (clone, cat, where) or detach() the source",
                        name, s);
    }
    if (op == TIDE_OP_COPY && src_grad)
        return record_node(TIDE_OP_COPY, dst, in, nin, NULL);
    td_grad_fn_release(dst->grad_fn); /* a constant now */
    dst->grad_fn = NULL;
    dst->flags &= (uint8_t)~TD_REQUIRES_GRAD;
    return 0;
}

int td_autograd_record(void *ctx, tide_op op, tide_tensor *out, tide_tensor *const *in, int nin,
                       const tide_attrs *attrs)
{
    (void)ctx;
    if (grad_off)
        return 0;
    if (op == TIDE_OP_COPY || op == TIDE_OP_FILL)
        return inplace_record(op, out, in, nin);
    /* Integer and bool results (comparisons, argmax, indices) carry no gradient. */
    if (!tide_dtype_is_floating((tide_dtype)out->dtype))
        return 0;
    return record_node(op, out, in, nin, attrs);
}

/* ---- the backward walk ----------------------------------------------------------------------- */

typedef struct node_list {
    ag_node **v;
    int n, cap;
} node_list;

static int list_push(node_list *l, ag_node *n)
{
    if (l->n == l->cap) {
        int ncap = l->cap ? l->cap * 2 : 64;
        ag_node **grown = td_realloc(l->v, sizeof *grown * (size_t)ncap);
        if (!grown)
            return td_error("backward: out of memory walking the graph");
        l->v = grown;
        l->cap = ncap;
    }
    l->v[l->n++] = n;
    return 0;
}

static unsigned next_mark(void)
{
    static unsigned counter;
    unsigned m = __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
    return m ? m : __atomic_add_fetch(&counter, 1, __ATOMIC_RELAXED);
}

/* dst's shape and dtype, or an internal error naming the op. */
static int check_grad_shape(const ag_node *n, int i, const tide_tensor *g)
{
    const ag_input *a = &n->in[i];
    if (g->ndim == a->ndim && memcmp(g->shape, a->shape, sizeof(int64_t) * a->ndim) == 0 &&
        g->dtype == a->dtype)
        return 0;
    char s1[200], s2[160];
    shape_str(s1, sizeof s1, g);
    return td_error("backward: internal error: the gradient of '%s' for input %d is %s, expected "
                    "%s %s",
                    tide_op_name(n->op), i, s1, td_shape_str(s2, sizeof s2, a->ndim, a->shape),
                    tide_dtype_name((tide_dtype)a->dtype));
}

/* *acc += g (out of place; g is consumed). */
static int accumulate(tide_tensor **acc, tide_tensor *g)
{
    if (!*acc) {
        *acc = g;
        return 0;
    }
    tide_tensor *sum = tide_add(*acc, g);
    tide_release(g);
    if (!sum)
        return -1;
    tide_release(*acc);
    *acc = sum;
    return 0;
}

/* node->grad += g (consumed). A first gradient is stored as it came, and whoever made it may
 * hold it too, so the engine does not own it (view_grad.c copies it before writing into it). */
static int accumulate_node(ag_node *node, tide_tensor *g)
{
    if (ag_view_grad_join(node) < 0) {
        tide_release(g);
        return -1;
    }
    if (!node->grad)
        node->grad_owned = false;
    return accumulate(&node->grad, g);
}

static bool writable(const tide_tensor *t)
{
    for (int d = 0; d < t->ndim; d++)
        if (t->strides[d] == 0 && t->shape[d] > 1)
            return false;
    return true;
}

/* leaf.grad += g (g consumed). A first gradient is stored as a fresh contiguous tensor of the
 * leaf's dtype that nothing else references, so in-place updates of one leaf's grad never touch
 * another's. Later ones are added in place, as PyTorch does: a tracer capturing a training step
 * then sees the accumulation as a write into the grad tensor, which replays. With create_graph
 * (or a grad that is itself in a graph) the sum is out of place, so the new grad's graph holds. */
static int accumulate_leaf(tide_tensor *leaf, tide_tensor *g, bool create_graph)
{
    if (g->dtype != leaf->dtype) {
        tide_tensor *c = tide_cast(g, (tide_dtype)leaf->dtype);
        tide_release(g);
        if (!(g = c))
            return -1;
    }
    tide_tensor *next;
    if (leaf->grad && !create_graph && !requires_grad(leaf->grad) && writable(leaf->grad) &&
        leaf->grad->device == g->device) {
        tide_tensor *sum = tide_add(leaf->grad, g);
        tide_release(g);
        int rc = sum ? tide_copy_(leaf->grad, sum) : -1;
        tide_release(sum);
        return rc;
    } else if (leaf->grad) {
        next = tide_add(leaf->grad, g);
    } else if (!g->grad_fn && td_is_contiguous(g) &&
               ((g->refcount == 1 && g->storage && g->storage->refcount == 1) ||
                (g->refcount == 2 && !g->storage && g->trace_node &&
                 (g->flags & TD_TRACE_RESULT)))) {
        /* nothing else holds it (a traced result: only the tracer besides us), so it becomes
         * the grad as it is; under the jit a copy here cost every step a pass over the grads */
        next = tide_retain(g);
    } else {
        next = tide_clone(g);
    }
    tide_release(g);
    if (!next)
        return -1;
    tide_release(leaf->grad);
    leaf->grad = next;
    return 0;
}

/* Why a node's saved tensors cannot be used any more, or 0. */
static int check_saved(const ag_node *n)
{
    if (n->released)
        return td_error("backward: trying to backward through the graph a second time: the "
                        "saved tensors of '%s' were freed by an earlier backward; pass "
                        "retain_graph=true to the first backward to keep them",
                        node_name(n));
    for (int i = 0; i < n->nin; i++) {
        const ag_input *a = &n->in[i];
        if (a->saved && a->saved->storage && a->saved->storage->version != a->version) {
            char s[200];
            shape_str(s, sizeof s, a->saved);
            return td_error("backward: a tensor saved for the gradient of '%s' (input %d, %s) "
                            "was modified by an in-place operation after it was used (version "
                            "%u, now %u); clone it before the in-place op",
                            node_name(n), i, s, a->version, a->saved->storage->version);
        }
    }
    return 0;
}

/* Every node reachable from the roots, each once, with deps = the edges into it from the
 * others; fails when a node's saved tensors were freed or modified in place since. */
static int collect(ag_node *const *roots, int nroots, node_list *all)
{
    unsigned mark = next_mark();
    node_list stack = {0};
    int rc = 0;
    for (int r = 0; r < nroots && rc == 0; r++) {
        if (roots[r]->mark == mark)
            continue;
        roots[r]->mark = mark;
        roots[r]->deps = 0;
        if (list_push(&stack, roots[r]) < 0 || list_push(all, roots[r]) < 0)
            rc = -1;
    }
    while (rc == 0 && stack.n > 0) {
        ag_node *n = stack.v[--stack.n];
        if ((rc = check_saved(n)) < 0)
            break;
        for (int i = 0; i < n->nin && rc == 0; i++) {
            ag_node *next = n->in[i].node;
            if (!next)
                continue;
            if (next->mark != mark) {
                next->mark = mark;
                next->deps = 0;
                if (list_push(&stack, next) < 0 || list_push(all, next) < 0)
                    rc = -1;
            }
            next->deps++;
        }
    }
    free(stack.v);
    return rc;
}

/* What one walk does besides running the formulas. backward: every leaf's gradient goes into
 * its .grad. grad (tide_autograd_grad): only the gradients of `inputs` are wanted; they are
 * accumulated into `captured`, no .grad changes, and nodes leading to no input are skipped. */
typedef struct leaf_counts leaf_counts;
typedef struct walk {
    bool retain_graph, create_graph;
    tide_tensor *const *inputs; /* NULL: backward */
    int ninputs;
    tide_tensor **captured; /* ninputs slots, for grad */
    leaf_counts *leaves;    /* backward with a grad_ready hook: contributions still to come */
    ag_deferred *deferred;  /* backward: weights whose products' gradients are joined */
} walk;

static bool wanted_leaf(const walk *w, const tide_tensor *leaf)
{
    for (int j = 0; j < w->ninputs; j++)
        if (w->inputs[j] == leaf)
            return true;
    return false;
}

static bool wanted_node(const walk *w, const ag_node *n)
{
    for (int j = 0; j < w->ninputs; j++)
        if (w->inputs[j]->grad_fn == n)
            return true;
    return false;
}

/* Decides per node whether it runs: for backward all do; for grad a node runs when some wanted
 * input is it or below it (`useful`), and its formula only when one is below it (`feeds`).
 * Consumers precede producers in Kahn's order, so one pass over it in reverse decides. */
static int mark_useful(node_list *all, const walk *w)
{
    for (int i = 0; i < all->n; i++) {
        all->v[i]->useful = all->v[i]->feeds = !w->inputs;
        all->v[i]->pending = all->v[i]->deps;
    }
    if (!w->inputs)
        return 0;
    node_list order = {0}, queue = {0};
    int rc = 0;
    for (int i = 0; i < all->n && rc == 0; i++)
        if (all->v[i]->pending == 0)
            rc = list_push(&queue, all->v[i]);
    while (rc == 0 && queue.n > 0) {
        ag_node *n = queue.v[--queue.n];
        rc = list_push(&order, n);
        for (int i = 0; i < n->nin && rc == 0; i++)
            if (n->in[i].node && --n->in[i].node->pending == 0)
                rc = list_push(&queue, n->in[i].node);
    }
    for (int k = order.n - 1; k >= 0 && rc == 0; k--) {
        ag_node *n = order.v[k];
        for (int i = 0; i < n->nin; i++) {
            const ag_input *a = &n->in[i];
            n->feeds |= (a->node && a->node->useful) || (a->leaf && wanted_leaf(w, a->leaf));
        }
        n->useful = n->feeds || wanted_node(w, n);
    }
    free(order.v);
    free(queue.v);
    return rc;
}

/* grad: g (consumed) added to the slot of every wanted input t. */
static int capture(const walk *w, const tide_tensor *t, const ag_node *n, tide_tensor *g)
{
    int rc = 0;
    for (int j = 0; j < w->ninputs && rc == 0; j++)
        if ((t && w->inputs[j] == t) || (n && w->inputs[j]->grad_fn == n))
            rc = accumulate(&w->captured[j], tide_retain(g));
    tide_release(g);
    return rc;
}

/* ---- backward hooks: a leaf's gradient is final ---------------------------------------------- */

/* The thread's hooks (tide_set_backward_hooks). Read at each call, so a hook that removes them
 * stops the later calls of the same walk. */
static _Thread_local struct {
    tide_grad_ready_fn grad_ready;
    tide_backward_done_fn done;
    void *ctx;
} hooks;

void tide_set_backward_hooks(tide_grad_ready_fn grad_ready, tide_backward_done_fn done,
                             void *ctx)
{
    hooks.grad_ready = grad_ready;
    hooks.done = done;
    hooks.ctx = ctx;
}

/* How many gradients each leaf still waits for in one walk: an open-addressed table keyed by
 * the leaf's address (the leaf struct has no spare field, and a walk with no hook builds none,
 * so the engine's usual path pays nothing). */
typedef struct leaf_slot {
    const tide_tensor *leaf;
    int pending;
} leaf_slot;

struct leaf_counts {
    leaf_slot *slots;
    size_t mask;
};

static leaf_slot *leaf_find(leaf_counts *m, const tide_tensor *leaf)
{
    uint64_t h = (uint64_t)(uintptr_t)leaf * 0x9E3779B97F4A7C15ull;
    for (size_t i = (size_t)(h >> 32) & m->mask;; i = (i + 1) & m->mask)
        if (m->slots[i].leaf == leaf || !m->slots[i].leaf)
            return &m->slots[i];
}

static void leaf_expect(leaf_counts *m, const tide_tensor *leaf)
{
    leaf_slot *s = leaf_find(m, leaf);
    s->leaf = leaf;
    s->pending++;
}

/* One count per edge into a leaf from a node that will run (every node of a backward walk),
 * and one per root that is itself a leaf. */
static int count_leaves(leaf_counts *m, const node_list *all, tide_tensor *const *roots,
                        int nroots)
{
    size_t edges = (size_t)nroots, cap = 16;
    for (int k = 0; k < all->n; k++)
        for (int i = 0; i < all->v[k]->nin; i++)
            edges += all->v[k]->in[i].leaf != NULL;
    while (cap < 2 * edges)
        cap *= 2;
    if (!(m->slots = td_calloc(cap, sizeof *m->slots)))
        return td_error("backward: out of memory counting the leaves for the grad_ready hook");
    m->mask = cap - 1;
    for (int k = 0; k < all->n; k++)
        for (int i = 0; i < all->v[k]->nin; i++)
            if (all->v[k]->in[i].leaf)
                leaf_expect(m, all->v[k]->in[i].leaf);
    for (int r = 0; r < nroots; r++)
        if (!roots[r]->grad_fn)
            leaf_expect(m, roots[r]);
    return 0;
}

/* A hook's -1 becomes backward's error; one that set none gets a message naming it. */
static int hook_failed(const char *which)
{
    if (tide_last_error()[0])
        return -1;
    return td_error("backward: the %s hook failed without an error message", which);
}

/* One contribution to leaf was sent (or was empty): at the last, its grad is final. */
static int leaf_sent(const walk *w, tide_tensor *leaf)
{
    leaf_slot *s = leaf_find(w->leaves, leaf);
    if (--s->pending > 0 || !hooks.grad_ready)
        return 0;
    tide_clear_error();
    return hooks.grad_ready(hooks.ctx, leaf) < 0 ? hook_failed("grad_ready") : 0;
}

/* Hands node n's input gradients gi (consumed) on: to leaves (their .grad, or grad's slots) and
 * to the producers' nodes, which become ready once all their consumers have sent theirs. */
static int send_grads(const walk *w, ag_node *n, tide_tensor **gi, int rc, node_list *ready)
{
    for (int i = 0; i < n->nin; i++) {
        ag_input *a = &n->in[i];
        tide_tensor *gr = gi[i];
        gi[i] = NULL;
        if (rc == 0 && gr && check_grad_shape(n, i, gr) < 0)
            rc = -1;
        if (rc < 0 || !gr || (a->node && !a->node->useful)) {
            tide_release(gr);
            if (rc == 0 && a->leaf && w->leaves) /* an empty contribution counts too */
                rc = leaf_sent(w, a->leaf);
            continue;
        }
        if (a->leaf && w->inputs)
            rc = capture(w, a->leaf, NULL, gr);
        else if (a->leaf) {
            rc = accumulate_leaf(a->leaf, gr, w->create_graph);
            if (rc == 0 && w->leaves)
                rc = leaf_sent(w, a->leaf);
        } else if (a->node)
            rc = accumulate_node(a->node, gr);
        else
            tide_release(gr);
    }
    /* a producer is ready once every consumer has run (or sent nothing) */
    for (int i = 0; i < n->nin && rc == 0; i++)
        if (n->in[i].node && --n->in[i].node->deps == 0 && n->in[i].node->useful)
            rc = list_push(ready, n->in[i].node);
    return rc;
}

static int add_to_leaf(void *ctx, tide_tensor *leaf, tide_tensor *grad)
{
    (void)ctx;
    return accumulate_leaf(leaf, grad, false);
}

/* Node n's input gradients into gi: the formula, or one of the shortcuts for a tensor reached
 * many times (view_grad.c, deferred.c). */
static int input_grads(const walk *w, ag_node *n, tide_tensor *g, tide_tensor **gi)
{
    if (ag_view_grad_takes(n, g, w->create_graph))
        return ag_view_grad_add(n, g);
    if (ag_defer_takes(w->deferred, n))
        return ag_defer_push(w->deferred, n, g, gi, add_to_leaf, NULL);
    return ag_backward_formula(n, g, gi);
}

/* Runs the nodes from the roots (their grads already set) in reverse topological order. */
static int run_nodes(const walk *w, node_list *ready)
{
    tide_tensor *gi_buf[16], **gi = gi_buf;
    int gi_cap = 16, rc = 0;
    while (rc == 0 && ready->n > 0) {
        ag_node *n = ready->v[--ready->n];
        if (ag_view_grad_join(n) < 0) {
            rc = -1;
            break;
        }
        tide_tensor *g = n->grad;
        n->grad = NULL;
        n->grad_owned = false;
        if (n->nin > gi_cap) {
            tide_tensor **grown = td_malloc(sizeof *grown * (size_t)n->nin);
            if (!grown) {
                tide_release(g);
                rc = td_error("backward: out of memory");
                break;
            }
            if (gi != gi_buf)
                free(gi);
            gi = grown;
            gi_cap = n->nin;
        }
        for (int i = 0; i < n->nin; i++)
            gi[i] = NULL;
        if (g && w->inputs && wanted_node(w, n))
            rc = capture(w, NULL, n, tide_retain(g));
        if (g && n->feeds && rc == 0)
            rc = input_grads(w, n, g, gi);
        else if (rc == 0 && w->deferred)
            rc = ag_defer_skip(w->deferred, n, add_to_leaf, NULL);
        tide_release(g);
        rc = send_grads(w, n, gi, rc, ready);
    }
    if (gi != gi_buf)
        free(gi);
    return rc;
}

/* One walk from n roots, each with its gradient (roots that are leaves take theirs directly). */
static int walk_graph(tide_tensor *const *roots, tide_tensor *const *grads, int n,
                      const walk *given)
{
    node_list all = {0}, ready = {0}, starts = {0};
    leaf_counts leaves = {0};
    walk hooked = *given, *w = &hooked; /* plus the leaf table, when a hook wants it */
    int rc = 0;
    for (int r = 0; r < n && rc == 0; r++)
        if (roots[r]->grad_fn)
            rc = list_push(&starts, roots[r]->grad_fn);
    if (rc == 0)
        rc = collect(starts.v, starts.n, &all);
    if (rc == 0)
        rc = mark_useful(&all, w);
    if (rc == 0 && !w->inputs && !w->create_graph)
        w->deferred = ag_defer_plan(all.v, all.n);
    if (rc == 0 && hooks.grad_ready && !w->inputs) { /* only a hooked backward pays for it */
        rc = count_leaves(&leaves, &all, roots, n);
        w->leaves = rc == 0 ? &leaves : NULL;
    }
    for (int r = 0; r < n && rc == 0; r++) {
        if (roots[r]->grad_fn)
            rc = accumulate_node(roots[r]->grad_fn, tide_retain(grads[r]));
        else if (w->inputs)
            rc = capture(w, roots[r], NULL, tide_retain(grads[r]));
        else {
            rc = accumulate_leaf(roots[r], tide_retain(grads[r]), w->create_graph);
            if (rc == 0 && w->leaves)
                rc = leaf_sent(w, roots[r]);
        }
    }
    for (int i = 0; i < starts.n && rc == 0; i++) /* each root once, when nothing feeds it */
        if (starts.v[i]->deps == 0 && starts.v[i]->useful) {
            rc = list_push(&ready, starts.v[i]);
            starts.v[i]->deps = -1;
        }
    if (rc == 0)
        rc = run_nodes(w, &ready);
    for (int i = 0; i < all.n; i++) {
        tide_release(all.v[i]->grad);
        all.v[i]->grad = NULL;
        ag_view_grad_drop(all.v[i]);
        if (rc == 0 && !w->retain_graph) {
            free_saved(all.v[i]);
            all.v[i]->released = true;
        }
    }
    free(all.v);
    free(ready.v);
    free(starts.v);
    free(leaves.slots);
    ag_defer_free(w->deferred);
    return rc;
}

/* ---- the API --------------------------------------------------------------------------------- */

/* The gradient a walk starts from at root: grad_root cast to root's dtype, or ones for a
 * one-element root when grad_root is NULL. A new reference, or NULL with the error set. */
static tide_tensor *root_gradient(const char *op, const tide_tensor *root,
                                  const tide_tensor *grad_root)
{
    char s1[200], s2[200];
    shape_str(s1, sizeof s1, root);
    if (!grad_root) {
        if (td_numel(root->ndim, root->shape) != 1) {
            td_error("%s: a gradient can be created implicitly only for a tensor of one "
                     "element, but the tensor is %s; pass grad_root of that shape",
                     op, s1);
            return NULL;
        }
        return td_full_on(root->device, op, root->ndim, root->shape, 1, (tide_dtype)root->dtype);
    }
    if (td_check_tensor(op, "gradient", grad_root) < 0)
        return NULL;
    shape_str(s2, sizeof s2, grad_root);
    if (grad_root->ndim != root->ndim ||
        memcmp(grad_root->shape, root->shape, sizeof(int64_t) * root->ndim) != 0) {
        td_error("%s: the gradient %s does not match the shape of the tensor %s", op, s2, s1);
        return NULL;
    }
    if (!tide_dtype_is_floating((tide_dtype)grad_root->dtype)) {
        td_error("%s: the gradient must be floating-point, got %s", op, s2);
        return NULL;
    }
    return tide_cast(grad_root, (tide_dtype)root->dtype);
}

/* Makes the roots' gradients and walks, with grad mode on only for create_graph (then the
 * walk's own ops are recorded) and autocast off: backward keeps the forward's dtypes
 * (PyTorch's rule). */
static int run_walk(const char *op, tide_tensor *const *roots,
                    const tide_tensor *const *grad_roots, int n, const walk *w)
{
    bool was_off = grad_off;
    grad_off = !w->create_graph;
    int autocast = tide_get_autocast();
    tide_set_autocast(TIDE_AUTOCAST_OFF);
    tide_tensor *buf[8], **grads = n <= 8 ? buf : td_calloc((size_t)n, sizeof *grads);
    int rc = grads ? 0 : -1, made = 0;
    for (; made < n && rc == 0; made++)
        if (!(grads[made] = root_gradient(op, roots[made], grad_roots ? grad_roots[made] : NULL)))
            rc = -1;
    if (rc == 0)
        rc = walk_graph(roots, grads, n, w);
    for (int i = 0; i < made; i++)
        tide_release(grads[i]);
    if (grads != buf)
        free(grads);
    grad_off = was_off;
    tide_set_autocast(autocast);
    return rc;
}

static int check_root(const char *op, const char *what, int i, const tide_tensor *t)
{
    if (td_check_tensor(op, what, t) < 0)
        return -1;
    if (requires_grad(t))
        return 0;
    char s[200];
    shape_str(s, sizeof s, t);
    return td_error("%s: the %s%.0d (%s) does not require grad and has no grad_fn; call "
                    "requires_grad_ on the leaves it is computed from before computing it (and "
                    "not under no_grad)",
                    op, what, i, s);
}

int tide_backward_ex(tide_tensor *root, const tide_tensor *grad_root, bool retain_graph,
                     bool create_graph)
{
    if (check_root("backward", "tensor", 0, root) < 0)
        return -1;
    walk w = {.retain_graph = retain_graph, .create_graph = create_graph};
    if (run_walk("backward", &root, &grad_root, 1, &w) < 0)
        return -1;
    if (!hooks.done)
        return 0;
    tide_clear_error();
    return hooks.done(hooks.ctx) < 0 ? hook_failed("done") : 0;
}

int tide_backward(tide_tensor *root, const tide_tensor *grad_root, bool retain_graph)
{
    return tide_backward_ex(root, grad_root, retain_graph, false);
}

/* grad's inputs: tensors that require grad; grads[] still empty. */
static int check_grad_args(tide_tensor *const *outputs, int noutputs, tide_tensor *const *inputs,
                           int ninputs, tide_tensor **grads)
{
    if (!outputs || !inputs || !grads || noutputs < 1 || ninputs < 1)
        return td_error("grad: expected at least one output and one input (got %d and %d)",
                        noutputs, ninputs);
    for (int i = 0; i < noutputs; i++)
        if (check_root("grad", "output ", i + 1, outputs[i]) < 0)
            return -1;
    for (int j = 0; j < ninputs; j++) {
        if (td_check_tensor("grad", "input", inputs[j]) < 0)
            return -1;
        if (!requires_grad(inputs[j])) {
            char s[200];
            shape_str(s, sizeof s, inputs[j]);
            return td_error("grad: input %d (%s) does not require grad", j + 1, s);
        }
    }
    return 0;
}

int tide_autograd_grad(tide_tensor *const *outputs, const tide_tensor *const *grad_outputs,
                       int noutputs, tide_tensor *const *inputs, int ninputs, bool retain_graph,
                       bool create_graph, bool allow_unused, tide_tensor **grads)
{
    if (check_grad_args(outputs, noutputs, inputs, ninputs, grads) < 0)
        return -1;
    for (int j = 0; j < ninputs; j++)
        grads[j] = NULL;
    walk w = {.retain_graph = retain_graph, .create_graph = create_graph, .inputs = inputs,
              .ninputs = ninputs, .captured = grads};
    int rc = run_walk("grad", outputs, grad_outputs, noutputs, &w);
    for (int j = 0; j < ninputs && rc == 0; j++)
        if (!grads[j] && !allow_unused) {
            char s[200];
            shape_str(s, sizeof s, inputs[j]);
            rc = td_error("grad: input %d (%s) was not used to compute the outputs (no gradient "
                          "reaches it); pass allow_unused=true to get nil for it",
                          j + 1, s);
        }
    if (rc < 0)
        for (int j = 0; j < ninputs; j++) {
            tide_release(grads[j]);
            grads[j] = NULL;
        }
    return rc;
}

int tide_requires_grad_(tide_tensor *t, bool on)
{
    if (td_check_tensor("requires_grad_", "tensor", t) < 0)
        return -1;
    char s[200];
    shape_str(s, sizeof s, t);
    if (t->grad_fn) {
        if (on)
            return 0;
        return td_error("requires_grad_: only a leaf's requires_grad can be turned off; this %s "
                        "tensor was made by %s (use detach() for a copy outside the graph)",
                        s, node_name(t->grad_fn));
    }
    if (on && !tide_dtype_is_floating((tide_dtype)t->dtype))
        return td_error("requires_grad_: only floating-point tensors can require gradients, "
                        "got %s",
                        s);
    if (on)
        t->flags |= TD_REQUIRES_GRAD;
    else
        t->flags &= (uint8_t)~TD_REQUIRES_GRAD;
    return 0;
}

bool tide_requires_grad(const tide_tensor *t) { return requires_grad(t); }

tide_tensor *tide_grad(const tide_tensor *t) { return t ? tide_retain(t->grad) : NULL; }

int tide_set_grad(tide_tensor *t, const tide_tensor *grad)
{
    if (td_check_tensor("set_grad", "tensor", t) < 0)
        return -1;
    if (grad) {
        char s1[200], s2[200];
        shape_str(s1, sizeof s1, t);
        shape_str(s2, sizeof s2, grad);
        if (grad->ndim != t->ndim ||
            memcmp(grad->shape, t->shape, sizeof(int64_t) * t->ndim) != 0 ||
            grad->dtype != t->dtype)
            return td_error("set_grad: the gradient %s must have the tensor's shape and dtype "
                            "(%s)",
                            s2, s1);
        if (grad->device != t->device)
            return td_error("set_grad: the gradient is on %s, the tensor on %s",
                            grad->device->name, t->device->name);
        if (grad == t)
            return td_error("set_grad: a tensor cannot be its own gradient");
    }
    tide_tensor *old = t->grad;
    t->grad = tide_retain((tide_tensor *)grad);
    tide_release(old);
    return 0;
}

tide_tensor *tide_detach(const tide_tensor *t)
{
    if (td_check_tensor("detach", "tensor", t) < 0)
        return NULL;
    /* A same-layout view through the dispatcher (so a tracer sees it), not recorded. */
    tide_attrs a = {.nints = t->ndim};
    for (int i = 0; i < t->ndim; i++)
        a.ints[i] = t->shape[i];
    bool was_off = grad_off;
    grad_off = true;
    tide_tensor *d = td_dispatch_view(TIDE_OP_RESHAPE, t, t->ndim, t->shape, t->strides,
                                      t->offset, &a);
    grad_off = was_off;
    if (d)
        d->flags = (uint8_t)((d->flags | (t->flags & TD_WRAPPED_NUMBER)) & ~TD_REQUIRES_GRAD);
    return d;
}

bool tide_set_grad_enabled(bool enabled)
{
    bool previous = !grad_off;
    grad_off = !enabled;
    return previous;
}

bool tide_is_grad_enabled(void) { return !grad_off; }

const char *tide_grad_fn_name(const tide_tensor *t)
{
    return t && t->grad_fn ? node_name(t->grad_fn) : NULL;
}
