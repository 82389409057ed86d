/*
 * exec.c — runs a compiled plan: views, library kernels (matmul, conv, reductions the fusion
 * left alone) through the device, in-place writes into their real destinations, and fusion
 * groups through the device's jit_run (jit/group.h). Intermediates live in one arena (the
 * memory plan); tensors that leave the graph get their own storage.
 */
#include <stdlib.h>
#include <string.h>

#include "jit.h"
#include "../ops/profile.h"

typedef struct exec_ctx {
    const jit_compiled *c;
    tide_tensor *const *ext;
    tide_tensor **vals;
    /* the plan's nodes and arena, or in a symbolic plan those bound to the run's sizes */
    const jit_node *nodes;
    const int64_t *arena_off;
    jit_plan view;
    const jit_node *rt; /* the run's trace: runtime attributes, source lines */
    bool prof;          /* profiling (ops/profile.h): each step timed */
} exec_ctx;

static tide_tensor *value(const exec_ctx *x, int node)
{
    const jit_node *nd = &x->nodes[node];
    switch (nd->kind) {
    case JN_EXTERN: return x->ext[nd->ext];
    case JN_CONST: return x->c->consts[node];
    default: return x->vals[node];
    }
}

/* The tensor a node's result is written to: a slice of the arena or its own storage. */
static tide_tensor *alloc_node(const exec_ctx *x, tide_tensor *arena, int node)
{
    const jit_node *nd = &x->nodes[node];
    int64_t off = x->arena_off[node];
    if (off < 0 || !arena) /* own storage, on the node's device (a TO's is its destination) */
        return td_tensor_new("jit", nd->device, nd->ndim, nd->shape, (tide_dtype)nd->dtype);
    int64_t strides[TIDE_MAX_DIMS];
    td_contiguous_strides(nd->ndim, nd->shape, strides);
    tide_tensor *t = td_tensor_view(arena, nd->ndim, nd->shape, strides, 0);
    if (!t)
        return NULL;
    t->dtype = nd->dtype;
    t->offset = off / (int64_t)td_dtype_sizes[nd->dtype];
    return t;
}

/* A group through its device (jit/group.h): the tensor of each slot, then the product's result
 * and operands when the group is its epilogue. */
static int run_group(exec_ctx *x, tide_tensor *arena, const jit_group *g)
{
    tide_tensor *tbuf[128]; /* a group has up to 48 members and their operands */
    size_t nt = (size_t)g->nslots + 3;
    tide_tensor **t = nt <= 128 ? tbuf : td_calloc(nt, sizeof *t);
    if (!t)
        return td_error("jit: out of memory");
    int rc = 0;
    t[g->nslots] = t[g->nslots + 1] = t[g->nslots + 2] = NULL;
    if (g->producer >= 0) { /* its result first: the group reads it in place */
        const jit_node *p = &x->nodes[g->producer];
        t[g->nslots] = x->vals[g->producer] = alloc_node(x, arena, g->producer);
        t[g->nslots + 1] = value(x, p->in[0]);
        t[g->nslots + 2] = value(x, p->in[1]);
        rc = t[g->nslots] ? 0 : -1;
    }
    for (int s = 0; s < g->nslots && rc == 0; s++) {
        const jit_slot *sl = &g->slots[s];
        t[s] = NULL;
        if (sl->member && sl->into >= 0) {
            t[s] = value(x, sl->into);
            if (t[s]->storage)
                __atomic_add_fetch(&t[s]->storage->version, 1, __ATOMIC_RELAXED);
        } else if (sl->member) {
            if (sl->output) {
                t[s] = x->vals[sl->node] = alloc_node(x, arena, sl->node);
                rc = t[s] ? 0 : -1;
            }
        } else {
            t[s] = value(x, sl->node);
        }
    }
    jit_group bound; /* a symbolic group gets the run's sizes (group.h) */
    jit_bind_group(g, x->nodes, &bound);
    double t0 = x->prof && rc == 0 ? td_profile_kernel_start(x->c->device) : 0;
    if (rc == 0)
        rc = x->c->device->jit_run(x->c->device, &x->view, &bound, t);
    if (x->prof && rc == 0)
        jit_profile_group(x->c, x->nodes, x->rt, g, t, t0);
    if (t != tbuf)
        free(t);
    return rc;
}

/* A symbolic plan's nodes and arena for the run's sizes (rt_nodes): into x; the arena's size,
 * or -1. */
static int64_t bind_sizes(exec_ctx *x, const jit_node *rt_nodes, int64_t **off)
{
    const jit_compiled *c = x->c;
    const jit_node *nodes = jit_bind_nodes(c, rt_nodes);
    if (!nodes)
        return -1;
    *off = td_malloc(sizeof(int64_t) * (size_t)(c->nnodes ? c->nnodes : 1));
    if (!*off)
        return td_error("jit: out of memory");
    memcpy(*off, c->arena_off, sizeof(int64_t) * (size_t)c->nnodes);
    x->nodes = nodes;
    x->arena_off = *off;
    x->view.nodes = nodes;
    return jit_place_arena(c, nodes, *off);
}

int jit_execute(const jit_compiled *c, tide_tensor *const *ext, const jit_node *rt_nodes,
                tide_tensor **out_values)
{
    exec_ctx x = {c, ext, td_calloc((size_t)(c->nnodes ? c->nnodes : 1), sizeof(tide_tensor *)),
                  c->nodes, c->arena_off, c->view, rt_nodes, td_profiling()};
    if (!x.vals)
        return td_error("jit: out of memory");
    tide_device *dev = c->device;
    tide_tensor *arena = NULL;
    int64_t *bound_off = NULL;
    int rc = -1;
    int64_t arena_bytes = c->dim_class ? bind_sizes(&x, rt_nodes, &bound_off) : c->arena_bytes;
    if (arena_bytes < 0)
        goto done;
    if (arena_bytes > 0) {
        arena = td_tensor_new("jit arena", dev, 1, &arena_bytes, TIDE_UINT8);
        if (!arena)
            goto done;
    }
    for (int s = 0; s < c->nsteps; s++) {
        const jit_step *st = &c->steps[s];
        if (st->kind == JS_GROUP) {
            if (run_group(&x, arena, &c->groups[st->group]) < 0)
                goto done;
            continue;
        }
        const jit_node *nd = &x.nodes[st->node];
        tide_tensor *in[JIT_MAX_IN];
        for (int k = 0; k < nd->nin; k++)
            in[k] = value(&x, nd->in[k]);
        if (st->kind == JS_VIEW) {
            tide_tensor *base = value(&x, nd->root);
            x.vals[st->node] = td_tensor_view(base, nd->ndim, nd->shape, nd->strides,
                                              base->offset + nd->offset);
            if (!x.vals[st->node])
                goto done;
        } else if (st->kind == JS_KERNEL) {
            tide_tensor *out = alloc_node(&x, arena, st->node);
            if (!out)
                goto done;
            x.vals[st->node] = out;
            const tide_attrs *attrs = nd->op == TIDE_OP_RANDOM ? &rt_nodes[st->node].attrs
                                                               : &nd->attrs;
            double t0 = x.prof ? td_profile_kernel_start(dev) : 0;
            if (td_numel(nd->ndim, nd->shape) > 0 &&
                td_run_primitive(dev, (tide_op)nd->op, out, in, nd->nin, attrs) < 0)
                goto done;
            if (x.prof)
                td_profile_kernel_end(nd->op, dev, rt_nodes[st->node].where, out, in, nd->nin,
                                      t0);
        } else { /* JS_INPLACE */
            tide_tensor *dst = in[0];
            double t0 = x.prof ? td_profile_kernel_start(dev) : 0;
            if (td_numel(dst->ndim, dst->shape) > 0 &&
                td_run_primitive(dev, (tide_op)nd->op, dst, in + 1, nd->nin - 1, &nd->attrs) < 0)
                goto done;
            if (x.prof)
                td_profile_kernel_end(nd->op, dev, rt_nodes[st->node].where, dst, in + 1,
                                      nd->nin - 1, t0);
            if (dst->storage)
                dst->storage->version++;
        }
    }
    for (int k = 0; k < c->noutputs; k++) {
        tide_tensor *v = value(&x, c->outputs[k]);
        if (v && x.nodes[c->outputs[k]].kind == JN_CONST) /* a fresh copy per run */
            v = NULL;
        out_values[k] = tide_retain(v);
    }
    rc = 0;
done:
    for (int i = 0; i < c->nnodes; i++)
        tide_release(x.vals[i]);
    free(x.vals);
    free(bound_off);
    tide_release(arena);
    return rc;
}
