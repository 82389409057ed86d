/*
 * view_grad.c — a select's or slice's gradient added into its view of the input's gradient.
 *
 * The formula (formulas.c) pads a select's gradient to its input's shape, and the engine sums
 * the pads: T selects of one [T, ...] tensor (a recurrent layer's steps) cost T full-size pads
 * and sums. Here each adds into its view of one input-shaped gradient instead: T step-sized
 * adds. That gradient is made as zeros, or copied once from a gradient the engine does not own
 * (ag_node.grad_owned: a first gradient is stored as it came, and an add hands the same tensor
 * to both its inputs). Every element receives the same contributions in the same order as the
 * padded sums. Not with create_graph (the sum must stay differentiable), nor for a gradient
 * that is itself in a graph.
 *
 * Pieces: slices along one dim that do not overlap (q, k and v cut from one projection, a
 * recurrent layer's steps) are kept as they come, up to AG_PIECES of them, and joined by one
 * cat, zeros filling the gaps, when the input's gradient is read (ag_view_grad_join: before its
 * node runs, or before another gradient is added to it). Each element then has one contribution,
 * the value the sum with zeros gives (but for the sign of a zero), without writing zeros first
 * and adding each slice into them. A slice that overlaps, strides or lies along another dim joins
 * the pieces first and takes the path above.
 */
#include <stdlib.h>
#include <string.h>

#include "../ops/dispatch.h"
#include "autograd.h"

bool ag_view_grad_takes(const ag_node *n, const tide_tensor *g, bool create_graph)
{
    return (n->op == TIDE_OP_SELECT || n->op == TIDE_OP_SLICE) && !create_graph &&
           n->in[0].node && n->in[0].node->useful && !(g->flags & TD_REQUIRES_GRAD) &&
           g->dtype == n->in[0].dtype;
}

struct ag_pieces {
    int dim, n;
    int64_t lo[AG_PIECES], hi[AG_PIECES]; /* sorted by lo, disjoint */
    tide_tensor *g[AG_PIECES];            /* each with the input's shape but hi - lo along dim */
};

/* The range along one dim that n (a select, or a slice of step 1) takes of its input. */
static bool piece_range(const ag_node *n, int *dim, int64_t *lo, int64_t *hi)
{
    const int64_t *v = n->attrs.ints;
    const ag_input *a = &n->in[0];
    if (v[0] < 0 || v[0] >= a->ndim)
        return false;
    *dim = (int)v[0];
    *lo = v[1];
    *hi = n->op == TIDE_OP_SELECT ? v[1] + 1 : v[2];
    bool unit_step = n->op == TIDE_OP_SELECT || v[3] == 1;
    return unit_step && *lo >= 0 && *lo < *hi && *hi <= a->shape[*dim];
}

/* Keeps g as a piece of p's gradient, when it fits beside those kept (else false, nothing
 * kept). */
static int keep_piece(ag_node *p, const ag_node *n, tide_tensor *g, bool *kept)
{
    int dim;
    int64_t lo, hi;
    *kept = false;
    if (p->grad || !piece_range(n, &dim, &lo, &hi))
        return 0;
    ag_pieces *ps = p->pieces;
    if (ps && (ps->dim != dim || ps->n == AG_PIECES))
        return 0;
    int at = 0;
    for (; ps && at < ps->n && ps->lo[at] < lo; at++)
        ;
    if (ps && ((at > 0 && ps->hi[at - 1] > lo) || (at < ps->n && ps->lo[at] < hi)))
        return 0; /* overlaps a piece */
    tide_tensor *piece = n->op == TIDE_OP_SELECT ? tide_unsqueeze(g, dim) : tide_retain(g);
    if (!piece)
        return -1;
    if (!ps && !(ps = p->pieces = td_calloc(1, sizeof *ps))) {
        tide_release(piece);
        return td_error("backward: out of memory");
    }
    ps->dim = dim;
    for (int i = ps->n; i > at; i--) {
        ps->lo[i] = ps->lo[i - 1];
        ps->hi[i] = ps->hi[i - 1];
        ps->g[i] = ps->g[i - 1];
    }
    ps->lo[at] = lo;
    ps->hi[at] = hi;
    ps->g[at] = piece;
    ps->n++;
    *kept = true;
    return 0;
}

void ag_view_grad_drop(ag_node *p)
{
    ag_pieces *ps = p->pieces;
    if (!ps)
        return;
    for (int i = 0; i < ps->n; i++)
        tide_release(ps->g[i]);
    free(ps);
    p->pieces = NULL;
}

/* Zeros of p's gradient's shape but [lo, hi) along the pieces' dim. */
static tide_tensor *gap_zeros(const ag_pieces *ps, int64_t lo, int64_t hi)
{
    const tide_tensor *like = ps->g[0];
    int64_t shape[TIDE_MAX_DIMS];
    memcpy(shape, like->shape, sizeof(int64_t) * (size_t)like->ndim);
    shape[ps->dim] = hi - lo;
    return td_full_on(like->device, "backward", like->ndim, shape, 0, (tide_dtype)like->dtype);
}

/* The pieces copied into zeros of p's gradient's shape. */
static tide_tensor *join_by_copies(const ag_node *p, const ag_pieces *ps)
{
    const tide_tensor *like = ps->g[0];
    tide_tensor *full = td_full_on(like->device, "backward", p->out_ndim, p->out_shape, 0,
                                   (tide_dtype)like->dtype);
    for (int i = 0; full && i < ps->n; i++) {
        tide_tensor *view = tide_slice(full, ps->dim, ps->lo[i], ps->hi[i], 1);
        int rc = view ? tide_copy_(view, ps->g[i]) : -1;
        tide_release(view);
        if (rc < 0) {
            tide_release(full);
            full = NULL;
        }
    }
    return full;
}

/* A cat of more inputs than the jit traces in one op (jit/group.h's JIT_MAX_IN) would break a
 * traced step in two: more parts than this are copied into zeros instead. */
#define CAT_MAX_PARTS 6

/* The parts that tile p's gradient along the pieces' dim, in order: piece i as i, the gap
 * [lo, hi) before or after pieces as -1 with its bounds in gap_lo, gap_hi. Returns the count. */
static int tile_parts(const ag_node *p, const ag_pieces *ps, int *part, int64_t *gap_lo,
                      int64_t *gap_hi)
{
    int np = 0;
    int64_t at = 0;
    for (int i = 0; i <= ps->n; i++) {
        int64_t next = i < ps->n ? ps->lo[i] : p->out_shape[ps->dim];
        if (next > at) {
            gap_lo[np] = at;
            gap_hi[np] = next;
            part[np++] = -1;
        }
        if (i < ps->n) {
            part[np++] = i;
            at = ps->hi[i];
        }
    }
    return np;
}

/* The pieces joined by one cat, zeros made for the gaps. */
static tide_tensor *join_by_cat(const ag_pieces *ps, const int *part, const int64_t *gap_lo,
                                const int64_t *gap_hi, int np)
{
    tide_tensor *parts[2 * AG_PIECES + 1], *zeros[AG_PIECES + 1];
    int nz = 0;
    bool ok = true;
    for (int k = 0; k < np; k++) {
        if (part[k] >= 0)
            parts[k] = ps->g[part[k]];
        else if (!(parts[k] = zeros[nz++] = gap_zeros(ps, gap_lo[k], gap_hi[k])))
            ok = false;
    }
    tide_tensor *joined = !ok        ? NULL
                          : np == 1  ? tide_retain(parts[0])
                                     : tide_cat(parts, np, ps->dim);
    for (int k = 0; k < nz; k++)
        tide_release(zeros[k]);
    return joined;
}

int ag_view_grad_join(ag_node *p)
{
    ag_pieces *ps = p->pieces;
    if (!ps)
        return 0;
    int part[2 * AG_PIECES + 1];
    int64_t gap_lo[2 * AG_PIECES + 1], gap_hi[2 * AG_PIECES + 1];
    int np = tile_parts(p, ps, part, gap_lo, gap_hi);
    tide_tensor *joined = np > CAT_MAX_PARTS ? join_by_copies(p, ps)
                                             : join_by_cat(ps, part, gap_lo, gap_hi, np);
    /* a lone piece is the gradient as it came; a cat's or the copies' result is the engine's */
    p->grad_owned = np > 1;
    ag_view_grad_drop(p);
    p->grad = joined;
    return joined ? 0 : -1;
}

int ag_view_grad_add(ag_node *n, tide_tensor *g)
{
    ag_node *p = n->in[0].node;
    const ag_input *a = &n->in[0];
    const int64_t *v = n->attrs.ints;
    bool kept;
    if (keep_piece(p, n, g, &kept) < 0)
        return -1;
    if (kept)
        return 0;
    if (ag_view_grad_join(p) < 0)
        return -1;
    if (!p->grad || !p->grad_owned) {
        tide_tensor *acc = p->grad ? tide_clone(p->grad)
                                   : td_full_on(g->device, "backward", a->ndim, a->shape, 0,
                                                (tide_dtype)a->dtype);
        if (!acc)
            return -1;
        tide_release(p->grad);
        p->grad = acc;
        p->grad_owned = true;
    }
    tide_tensor *view = n->op == TIDE_OP_SELECT ? tide_select(p->grad, (int)v[0], v[1])
                                                : tide_slice(p->grad, (int)v[0], v[1], v[2], v[3]);
    tide_tensor *sum = view ? tide_add(view, g) : NULL;
    int rc = sum ? tide_copy_(view, sum) : -1;
    tide_release(sum);
    tide_release(view);
    return rc;
}
