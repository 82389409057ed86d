/*
 * exec_profile.c — a plan's steps as the profiler sees them (ops/profile.h, docs/profile.md):
 * exec.c times each kernel and in-place write while profiling (td_profile_kernel_start/end, as
 * the dispatcher does) and each fused group, which this records with the source line the trace
 * kept for its first member and its cost. A group's bytes are its operands read and its results
 * written (what is kept inside it moves nothing); its FLOPs the sum of its members', and its
 * product's when it is one's epilogue.
 */
#include <stdio.h>
#include <string.h>

#include "jit.h"
#include "../ops/profile.h"

static td_prof_shape shape_of(const jit_node *nd) { return (td_prof_shape){nd->ndim, nd->shape}; }

/* FLOPs of node n from the shapes of the run (nodes). */
static int64_t node_flops(const jit_node *nodes, int n)
{
    const jit_node *nd = &nodes[n];
    td_prof_shape in[JIT_MAX_IN];
    for (int k = 0; k < nd->nin; k++)
        in[k] = shape_of(&nodes[nd->in[k]]);
    return td_profile_flops(nd->op, shape_of(nd), in, nd->nin);
}

/* "fused(mul+add+sum)": the members' ops in program order, the product first. */
static void group_name(const jit_node *nodes, const jit_group *g, char *buf, size_t n)
{
    size_t len = (size_t)snprintf(buf, n, "fused(");
    if (g->producer >= 0)
        len += (size_t)snprintf(buf + len, n - len, "%s|", tide_op_name(nodes[g->producer].op));
    for (int i = 0; i < g->nmembers && len + 24 < n; i++) {
        const jit_node *nd = &nodes[g->slots[g->members[i]].node];
        len += (size_t)snprintf(buf + len, n - len, "%s%s", i ? "+" : "", tide_op_name(nd->op));
    }
    snprintf(buf + len, n - len, "%s)", len + 24 < n ? "" : "+...");
}

void jit_profile_group(const jit_compiled *c, const jit_node *nodes, const jit_node *rt,
                       const jit_group *g, tide_tensor *const *t, double t0)
{
    td_profile_sync(c->device);
    double dur = td_profile_now_us() - t0;
    int64_t bytes = 0, flops = 0;
    for (int s = 0; s < g->nslots; s++) {
        const jit_slot *sl = &g->slots[s];
        if (!sl->member && sl->node != g->producer) /* an operand; the product's is counted below */
            bytes += td_profile_bytes(t[s]);
        else if (sl->member && (sl->output || sl->into >= 0))
            bytes += jit_numel(&nodes[sl->node]) * (int64_t)td_dtype_sizes[nodes[sl->node].dtype];
    }
    for (int i = 0; i < g->nmembers; i++)
        flops += node_flops(nodes, g->slots[g->members[i]].node);
    int first = g->nmembers ? g->slots[g->members[0]].node : 0;
    if (g->producer >= 0) { /* the product: its operands read, its result written once */
        first = g->producer;
        flops += node_flops(nodes, g->producer);
        for (int k = 0; k < 3; k++)
            bytes += td_profile_bytes(t[g->nslots + k]);
    }
    char name[160];
    group_name(nodes, g, name, sizeof name);
    td_profile_record(name, c->device, rt ? rt[first].where : 0, t0, dur, bytes, flops);
}
