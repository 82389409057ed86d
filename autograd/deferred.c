/*
 * deferred.c — a weight's gradient from many products, as one product.
 *
 * A weight that a backward walk reaches through several linear layers (x @ W^T, the same W)
 * gets one gradient per use, g_t^T @ x_t, and the engine sums them. A recurrent layer uses its
 * hidden weight once per step: T products with K = batch rows (short, so slow), each writing a
 * weight-sized result that is then added into the sum. Here the engine keeps each use's g_t and
 * x_t instead, and when the weight's last use has run it computes
 *     [g_1; ...; g_T]^T @ [x_1; ...; x_T]
 * once (K = T * batch), which is the same sum in another order. PyTorch's CPU LSTM gets the same
 * effect by hand for its input weights only.
 *
 * What qualifies (ag_defer_takes): a 2-D MATMUL whose right operand is the transpose (PERMUTE
 * [1, 0]) of a leaf, in a plain backward (not autograd.grad, not create_graph), where that leaf
 * is reached this way at least twice in the walk. A weight used once keeps the usual path, so a
 * feed-forward model runs as before, and a hook waiting for a leaf's gradient (DDP's buckets)
 * sees it complete: the product runs at the leaf's last use, before the engine counts it sent.
 */
#include <stdlib.h>
#include <string.h>

#include "../ops/dispatch.h"
#include "autograd.h"

typedef struct deferred_leaf {
    tide_tensor *leaf;
    int expected, arrived; /* uses in the walk; those run so far (with a gradient or without) */
    int nuses;
    tide_tensor **g, **x; /* per use kept: g [rows, N] and x [rows, K] (expected slots each) */
} deferred_leaf;

struct ag_deferred {
    deferred_leaf *v;
    int n;
};

/* The leaf whose transpose is n's right operand, when n is a 2-D product of that shape whose
 * left operand was kept, all of the leaf's dtype. */
static tide_tensor *transposed_leaf(const ag_node *n)
{
    if (n->op != TIDE_OP_MATMUL || n->nin != 2 || n->in[0].ndim != 2 || n->in[1].ndim != 2)
        return NULL;
    const ag_node *p = n->in[1].node;
    if (!p || p->op != TIDE_OP_PERMUTE || p->nin != 1 || !p->in[0].leaf ||
        p->attrs.ints[0] != 1 || p->attrs.ints[1] != 0)
        return NULL;
    tide_tensor *leaf = p->in[0].leaf;
    bool same = n->out_dtype == leaf->dtype && n->in[0].dtype == leaf->dtype;
    return same && n->in[0].saved ? leaf : NULL;
}

static deferred_leaf *find(ag_deferred *d, const tide_tensor *leaf)
{
    if (!d || !leaf)
        return NULL;
    for (int i = 0; i < d->n; i++)
        if (d->v[i].leaf == leaf)
            return &d->v[i];
    return NULL;
}

/* Counts the uses per leaf; keeps the leaves used at least twice. NULL when there are none (or
 * the table could not be made: then every product takes the usual path). */
ag_deferred *ag_defer_plan(ag_node *const *nodes, int n)
{
    ag_deferred *d = td_calloc(1, sizeof *d);
    if (!d)
        return NULL;
    int cap = 0;
    for (int k = 0; k < n; k++) {
        tide_tensor *leaf = transposed_leaf(nodes[k]);
        if (!leaf || !nodes[k]->useful)
            continue;
        deferred_leaf *e = find(d, leaf);
        if (!e) {
            if (d->n == cap) {
                cap = cap ? 2 * cap : 8;
                deferred_leaf *grown = td_realloc(d->v, sizeof *grown * (size_t)cap);
                if (!grown)
                    return ag_defer_free(d), NULL;
                d->v = grown;
            }
            e = &d->v[d->n++];
            *e = (deferred_leaf){.leaf = leaf};
        }
        e->expected++;
    }
    int kept = 0;
    for (int i = 0; i < d->n; i++)
        if (d->v[i].expected >= 2)
            d->v[kept++] = d->v[i];
    d->n = kept;
    for (int i = 0; i < d->n; i++) {
        deferred_leaf *e = &d->v[i];
        if (!(e->g = td_calloc(2 * (size_t)e->expected, sizeof(tide_tensor *))))
            return ag_defer_free(d), NULL;
        e->x = e->g + e->expected;
    }
    if (d->n == 0)
        return ag_defer_free(d), NULL;
    return d;
}

bool ag_defer_takes(ag_deferred *d, const ag_node *n)
{
    return find(d, transposed_leaf(n)) != NULL;
}

/* tide_cat of list[0..n) along dim 0 (a new reference or NULL): one cat, or while tracing (a
 * traced op takes at most 6 inputs) cats of at most 6 joined by one more. The same matrix. */
static tide_tensor *cat_rows(tide_tensor *const *list, int n)
{
    if (n == 1)
        return tide_retain(list[0]);
    if (n <= 6 || !td_thread_hooks()->trace)
        return tide_cat(list, n, 0);
    tide_tensor *parts[6] = {0};
    int np = 0;
    bool ok = true;
    for (int i = 0; i < n; i += 6, np++)
        ok = ok && (parts[np] = tide_cat(list + i, i + 6 <= n ? 6 : n - i, 0));
    tide_tensor *r = ok ? tide_cat(parts, np, 0) : NULL;
    for (int i = 0; i < np; i++)
        tide_release(parts[i]);
    return r;
}

/* g[0..n)^T @ x[0..n) with the rows of each side joined. A new reference or NULL. */
static tide_tensor *joined_product(tide_tensor *const *g, tide_tensor *const *x, int n)
{
    tide_tensor *gj = cat_rows(g, n), *xj = gj ? cat_rows(x, n) : NULL;
    tide_tensor *gt = xj ? tide_transpose(gj, 0, 1) : NULL;
    tide_tensor *r = gt ? tide_matmul(gt, xj) : NULL;
    tide_release(gt);
    tide_release(xj);
    tide_release(gj);
    return r;
}

/* Uses per joined product: 36 (two levels of 6-input cats while tracing), so a recurrent
 * layer's 100 steps take 3 long products and 2 weight-sized adds. */
#define USES_PER_PRODUCT 36

/* sum_t g_t^T @ x_t over e's uses: one product per USES_PER_PRODUCT uses, summed in order,
 * the same way eagerly and while tracing, so the jit stays bitwise equal to eager. */
static tide_tensor *weight_grad(const deferred_leaf *e)
{
    tide_tensor *sum = NULL;
    for (int i = 0; i < e->nuses; i += USES_PER_PRODUCT) {
        int n = e->nuses - i < USES_PER_PRODUCT ? e->nuses - i : USES_PER_PRODUCT;
        tide_tensor *p = joined_product(e->g + i, e->x + i, n);
        tide_tensor *next = !p ? NULL : sum ? tide_add(sum, p) : tide_retain(p);
        tide_release(p);
        tide_release(sum);
        if (!(sum = next))
            break;
    }
    return sum;
}

static void drop_uses(deferred_leaf *e)
{
    for (int i = 0; i < e->nuses; i++) {
        tide_release(e->g[i]);
        tide_release(e->x[i]);
    }
    e->nuses = 0;
}

/* At e's last use: its uses' product handed to sink (the engine adds it to the leaf's grad). */
static int arrive(deferred_leaf *e, ag_leaf_sink sink, void *ctx)
{
    if (++e->arrived < e->expected || e->nuses == 0)
        return 0;
    tide_tensor *r = weight_grad(e);
    drop_uses(e);
    return r ? sink(ctx, e->leaf, r) : -1;
}

/* x @ W^T's gradient for x, as the formula computes it (transposed when x is stored so). */
static tide_tensor *input_grad(const ag_node *n, tide_tensor *g)
{
    tide_tensor *wt = n->in[1].saved;
    if (!wt) {
        td_error("backward: internal error: a product's weight was not kept");
        return NULL;
    }
    tide_tensor *r = NULL;
    if (n->in[0].transposed) {
        tide_tensor *gt = tide_transpose(g, -1, -2);
        tide_tensor *p = gt ? tide_matmul(wt, gt) : NULL;
        r = p ? tide_transpose(p, -1, -2) : NULL;
        tide_release(p);
        tide_release(gt);
    } else {
        tide_tensor *w = tide_transpose(wt, -1, -2);
        r = w ? tide_matmul(g, w) : NULL;
        tide_release(w);
    }
    return r;
}

int ag_defer_push(ag_deferred *d, const ag_node *n, tide_tensor *g, tide_tensor **gi,
                  ag_leaf_sink sink, void *ctx)
{
    deferred_leaf *e = find(d, transposed_leaf(n));
    if (ag_input_needed(&n->in[0]) && !(gi[0] = input_grad(n, g)))
        return -1;
    e->g[e->nuses] = tide_retain(g);
    e->x[e->nuses++] = tide_retain(n->in[0].saved);
    return arrive(e, sink, ctx);
}

int ag_defer_skip(ag_deferred *d, const ag_node *n, ag_leaf_sink sink, void *ctx)
{
    deferred_leaf *e = find(d, transposed_leaf(n));
    return e && n->useful ? arrive(e, sink, ctx) : 0;
}

void ag_defer_free(ag_deferred *d)
{
    if (!d)
        return;
    for (int i = 0; i < d->n; i++) {
        drop_uses(&d->v[i]);
        free(d->v[i].g);
    }
    free(d->v);
    free(d);
}
