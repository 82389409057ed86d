/*
 * symbolic.c — symbolic dims (jit/README.md): a segment's key is its structure plus its sizes
 * (shapes, strides, view offsets and view attributes). A static plan serves the sizes it was
 * compiled for; a symbolic plan serves every size of its symbolic ones, under guards. Here:
 * the guards, which sizes a new plan makes symbolic, and why a segment missed.
 *
 * Guards of a symbolic plan: the structure is equal (rank, dtype, device, ops, attributes,
 * whether each outside tensor and view is contiguous, aliasing); every static size is equal;
 * symbolic sizes that were equal at compile time are equal now and each is at least 2 (0 and
 * 1 specialize: broadcasting and empty tensors change what a plan means); every fused row still
 * fits in scratch (jit_plan_fits). Sizes that differed at compile time may be equal now: every
 * decision a plan makes on sizes holds when they differ, so it holds when they meet.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace.h"

bool jit_guards_hold(const jit_compiled *c, const int64_t *dims, const jit_node *nodes)
{
    for (size_t p = 0; p < c->dims_len; p++) {
        int cls = c->dim_class[p];
        if (cls < 0 ? dims[p] != c->dims[p] : dims[p] < 2 || dims[p] != dims[cls])
            return false;
    }
    return jit_plan_fits(c, nodes);
}

/* Whether v is a multiple of one of the dynamic dims' sizes of this call: a size derived from
 * them (a flattened batch, a stride over it). Over-generalizing costs nothing but constants. */
static bool derived_from_dynamic(const jit_trace *tr, int64_t v)
{
    for (int k = 0; k < tr->ndyn; k++)
        if (tr->dyn[k] >= 2 && v % tr->dyn[k] == 0)
            return true;
    return false;
}

bool jit_choose_symbolic(const jit_trace *tr, const jit_compiled *similar, const int64_t *dims,
                         size_t ndims, char *sym)
{
    tide_device *dev = tr->dev ? tr->dev : td_default_device();
    bool any = false;
    for (size_t p = 0; p < ndims; p++) {
        bool s = false;
        if (similar)
            s = (similar->dim_class && similar->dim_class[p] >= 0) || dims[p] != similar->dims[p];
        s = s || derived_from_dynamic(tr, dims[p]);
        sym[p] = s && dims[p] >= 2;
        any |= sym[p];
    }
    return any && !tr->static_only && dev->jit_runtime_sizes;
}

int jit_symbolic_classes(const int64_t *dims, const char *sym, size_t ndims, int **dim_class)
{
    int *cls = td_malloc(sizeof *cls * (ndims ? ndims : 1));
    if (!cls)
        return td_error("jit: out of memory");
    for (size_t p = 0; p < ndims; p++) {
        cls[p] = -1;
        if (!sym[p])
            continue;
        cls[p] = (int)p; /* the class is its first size of the same value */
        for (size_t q = 0; q < p; q++)
            if (sym[q] && dims[q] == dims[p]) {
                cls[p] = cls[q];
                break;
            }
    }
    *dim_class = cls;
    return 0;
}

char *jit_symbolic_nodes(const char *sym, const int *dim_node, size_t ndims, int nnodes)
{
    char *ns = td_calloc((size_t)nnodes + 1, 1);
    if (!ns) {
        td_error("jit: out of memory");
        return NULL;
    }
    for (size_t p = 0; p < ndims; p++)
        if (sym[p])
            ns[dim_node[p]] = 1;
    return ns;
}

/* "input 2 dim 1" / "%7 (view) stride 2": what size p is (positions of a node follow each
 * other: its shape, then for views and inputs its strides, then a view's offset and attributes) */
static void name_size(const int *dim_node, const jit_node *nodes, size_t p, char *buf, size_t size)
{
    int i = dim_node[p];
    size_t start = p;
    while (start > 0 && dim_node[start - 1] == i)
        start--;
    const jit_node *nd = &nodes[i];
    size_t j = p - start;
    char who[48];
    if (nd->kind == JN_EXTERN)
        snprintf(who, sizeof who, "input %d", nd->ext + 1);
    else
        snprintf(who, sizeof who, "%%%d (%s)", i,
                 nd->kind == JN_VIEW ? "view" : tide_op_name((tide_op)nd->op));
    if (j < nd->ndim)
        snprintf(buf, size, "%s dim %zu", who, j + 1);
    else if (j < 2u * nd->ndim)
        snprintf(buf, size, "%s stride %zu", who, j - nd->ndim + 1);
    else
        snprintf(buf, size, "%s %s", who, j == 2u * nd->ndim ? "offset" : "attribute");
}

void jit_explain_miss(const jit_compiled *similar, const int64_t *dims, const int *dim_node,
                      const jit_node *nodes, char *buf, size_t size)
{
    char what[96];
    for (size_t p = 0; p < similar->dims_len; p++) {
        int cls = similar->dim_class ? similar->dim_class[p] : -1;
        bool differs = cls < 0 && dims[p] != similar->dims[p];
        bool small = cls >= 0 && dims[p] < 2;
        bool split = cls >= 0 && !small && dims[p] != dims[cls];
        if (!differs && !small && !split)
            continue;
        name_size(dim_node, nodes, p, what, sizeof what);
        if (split)
            snprintf(buf, size, "%s was equal to another size (%lld), now %lld and %lld", what,
                     (long long)similar->dims[p], (long long)dims[p], (long long)dims[cls]);
        else
            snprintf(buf, size, "%s was %lld, now %lld%s", what, (long long)similar->dims[p],
                     (long long)dims[p], small ? " (sizes 0 and 1 specialize)" : "");
        return;
    }
    snprintf(buf, size, "a fused row would be longer than %d elements", JIT_ROW_MAX);
}
