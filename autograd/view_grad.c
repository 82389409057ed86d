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
 */
#include "../ops/dispatch.h"
#include "autograd.h"

bool ag_view_grad_takes(const ag_node *n, const tide_tensor *g, bool create_graph)
{
    return (n->op == TIDE_OP_SELECT || n->op == TIDE_OP_SLICE) && !create_graph &&
           n->in[0].node && n->in[0].node->useful && !(g->flags & TD_REQUIRES_GRAD) &&
           g->dtype == n->in[0].dtype;
}

int ag_view_grad_add(ag_node *n, tide_tensor *g)
{
    ag_node *p = n->in[0].node;
    const ag_input *a = &n->in[0];
    const int64_t *v = n->attrs.ints;
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
