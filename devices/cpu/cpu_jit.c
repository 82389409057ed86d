/*
 * cpu_jit.c — the CPU device's jit hooks (jit/group.h, core/device.h): which members it renders
 * (those with a tile kernel), which products take an epilogue (float matmuls cut into BLAS calls
 * by rows), the layout of a group's per-thread scratch, and compiling through cpu_codegen.c.
 * Running is cpu_jit_run.c.
 */
#include <string.h>

#include "cpu_jit.h"

bool td_cpu_jit_member(tide_device *dev, int op, int dtype)
{
    (void)dev;
    return td_jit_tile_kernel(op, dtype) != NULL;
}

/* Rows per block of a fused matmul: rows per BLAS call as eager cuts it
 * (td_cpu_matmul_call_rows; the runner asks again at each run, since it follows the thread
 * count, and runs a tile straddling two blocks once both are done), 0 when eager would cut it
 * by columns or the product is not a float matmul. A float32 conv2d takes an epilogue too,
 * run whole. */
int64_t td_cpu_jit_epilogue_rows(tide_device *dev, const void *plan, int pi)
{
    (void)dev;
    const jit_plan *c = plan;
    const jit_node *p = &c->nodes[pi];
    if (p->op == TIDE_OP_CONV2D) /* run whole (cpu_jit_run.c): rows of its planes, unused */
        return p->dtype == TIDE_FLOAT32 && p->ndim == 4 ? p->shape[2] : 0;
    if (p->op != TIDE_OP_MATMUL || p->nin != 2 ||
        (p->dtype != TIDE_FLOAT32 && p->dtype != TIDE_FLOAT64))
        return 0;
    int64_t nbatch, units, ue;
    jit_product_layout(p, &nbatch, &units, &ue);
    const jit_node *a = &c->nodes[p->in[0]];
    int64_t k = a->shape[a->ndim - 1];
    /* the batch may fold into one tall product at run time: both cuts must be by rows */
    if (nbatch > 1 && td_cpu_matmul_call_rows(1, nbatch * units, ue, k) <= 0)
        return 0;
    return td_cpu_matmul_call_rows(nbatch, units, ue, k);
}

/* Ops whose kernels are bound by arithmetic, not memory: a group with one runs in tiles of
 * half the size. Measured on the chain tanh(x*a+b)*sigmoid(x)+c over 16M floats: tiles of 512
 * 8% faster than 1024 (256: 3%, 2048: 20% slower), while (x*a+b)*x-c, bound by memory, ran 12%
 * slower in tiles of 512 (the per-tile prefetch and streaming calls). */
static bool heavy_op(int op)
{
    switch (op) {
    case TIDE_OP_EXP: case TIDE_OP_LOG: case TIDE_OP_SIN: case TIDE_OP_COS: case TIDE_OP_TANH:
    case TIDE_OP_SIGMOID: case TIDE_OP_POW: case TIDE_OP_ERF: case TIDE_OP_GELU: case TIDE_OP_LOG1P:
    case TIDE_OP_EXPM1: case TIDE_OP_LOG2: case TIDE_OP_TAN: case TIDE_OP_ASIN: case TIDE_OP_ACOS:
    case TIDE_OP_ATAN: case TIDE_OP_SINH: case TIDE_OP_COSH: case TIDE_OP_ATAN2:
        return true;
    default:
        return false;
    }
}

/* An elementwise group with an arithmetic-bound member runs in tiles of at most 512. */
static void choose_tile(const jit_plan *c, jit_group *g)
{
    if (g->row_mode || g->rowlen <= 512)
        return;
    for (int k = 0; k < g->nmembers; k++)
        if (heavy_op(c->nodes[g->slots[g->members[k]].node].op)) {
            g->rowlen = 512;
            g->nrows = (g->numel + g->rowlen - 1) / g->rowlen;
            return;
        }
}

/* Slot sl, an input read through a broadcast, as a vector repeated along the domain
 * (JIT_PERIODIC or JIT_TILE_CONST, jit/group.h): its dims that are not broadcast are the domain's last ones, dense, and
 * their element count (the period) a multiple of the row or tile, so every row reads one
 * stretch of it in place instead of gathering it (a bias over tiles of its length, a norm's
 * weight over rows), or a divisor of the tile, so every tile is the same, gathered once. */
static void find_period(const jit_plan *c, const jit_group *g, jit_slot *sl)
{
    const jit_node *nd = &c->nodes[sl->node];
    int lead = g->ndim - nd->ndim, first = g->ndim;
    if (lead < 0)
        return;
    for (int k = g->ndim - 1; k >= 0; k--) { /* the trailing dims it spans */
        int d = k - lead;
        if (d < 0 || (nd->shape[d] == 1 && g->domain[k] != 1))
            break;
        if (nd->shape[d] != g->domain[k])
            return;
        first = k;
    }
    for (int k = lead; k < first; k++) /* and it is broadcast along the others */
        if (nd->shape[k - lead] != 1)
            return;
    int64_t period = 1;
    for (int k = first; k < g->ndim; k++)
        period *= g->domain[k];
    if (first == g->ndim || period < 2 || (period % g->rowlen != 0 && g->rowlen % period != 0) ||
        !td_dense_layout(g->ndim - first, nd->shape + first - lead, nd->strides + first - lead))
        return;
    sl->direct = period % g->rowlen == 0 ? JIT_PERIODIC : JIT_TILE_CONST;
    sl->period = period;
}

void td_cpu_jit_layout(const jit_plan *c, jit_group *g)
{
    choose_tile(c, g);
    for (int s = 0; s < g->nslots && !g->symbolic; s++) {
        jit_slot *sl = &g->slots[s];
        if (!sl->member && sl->vkind == JV_FULL && sl->direct == JIT_GATHERED)
            find_period(c, g, sl);
    }
    int64_t off = 0;
#define TAKE(bytes) (off += ((bytes) + 63) / 64 * 64, off - ((bytes) + 63) / 64 * 64)
    for (int s = 0; s < g->nslots; s++) {
        jit_slot *sl = &g->slots[s];
        int64_t elems = sl->vkind == JV_FULL ? g->rowlen : 1;
        if (sl->member && sl->vkind == JV_FULL && !sl->output)
            continue; /* full-size member buffers are shared by liveness, below */
        if (sl->member && (!sl->output || sl->vkind == JV_SCALAR)) /* scalars: stored after */
            sl->scratch = TAKE(elems * sl->es);
        else if (!sl->member && !td_cpu_slot_in_place(sl))
            sl->scratch = TAKE(elems * sl->es);
        if (sl->member && sl->output && sl->vkind == JV_FULL)
            sl->stream = TAKE(elems * sl->es); /* used when the output is large (codegen) */
    }
    /* full-size member buffers: a buffer is free again once the last member reading it has run,
     * so a chain keeps two or three tiles in L1 however long it is (a member never writes the
     * buffer of one of its own operands: kernels take restrict pointers) */
    {
        int nb = 0;
        int64_t buf_off[JIT_GROUP_MAX_MEMBERS];
        int buf_es[JIT_GROUP_MAX_MEMBERS], buf_free_after[JIT_GROUP_MAX_MEMBERS];
        for (int k = 0; k < g->nmembers; k++) {
            jit_slot *ms = &g->slots[g->members[k]];
            if (ms->vkind != JV_FULL || ms->output)
                continue;
            /* the last member reading it, directly or through clones that alias it */
            int last = k;
            int readers[JIT_GROUP_MAX_MEMBERS + 1], nr = 0;
            readers[nr++] = ms->node;
            for (int j = k + 1; j < g->nmembers; j++) {
                const jit_slot *us = &g->slots[g->members[j]];
                const jit_node *u = &c->nodes[us->node];
                for (int q = 0; q < u->nin; q++)
                    for (int r = 0; r < nr; r++)
                        if (u->in[q] == readers[r]) {
                            last = j;
                            if (u->op == TIDE_OP_CAST && u->dtype == c->nodes[u->in[0]].dtype &&
                                !us->output && nr <= JIT_GROUP_MAX_MEMBERS)
                                readers[nr++] = us->node; /* a clone is its operand */
                            r = nr;
                        }
            }
            int pick = -1;
            for (int b = 0; b < nb && pick < 0; b++)
                if (buf_free_after[b] < k && buf_es[b] == ms->es)
                    pick = b;
            if (pick < 0) {
                pick = nb++;
                buf_off[pick] = TAKE(g->rowlen * ms->es);
                buf_es[pick] = ms->es;
            }
            ms->scratch = buf_off[pick];
            buf_free_after[pick] = last;
        }
    }
    /* splat buffers for scalar and row values read by full members */
    for (int k = 0; k < g->nmembers; k++) {
        const jit_slot *ms = &g->slots[g->members[k]];
        if (ms->vkind != JV_FULL)
            continue;
        const jit_node *nd = &c->nodes[ms->node];
        for (int j = 0; j < nd->nin; j++)
            for (int s = 0; s < g->nslots; s++) {
                jit_slot *sl = &g->slots[s];
                if (sl->node == nd->in[j] && sl->vkind != JV_FULL && sl->splat < 0)
                    sl->splat = TAKE(g->rowlen * sl->es);
            }
    }
#undef TAKE
    g->scratch_bytes = off;
}

int td_cpu_jit_compile(tide_device *dev, const void *plan, void *group, int index)
{
    (void)dev;
    td_cpu_jit_layout(plan, group);
    return td_cpu_codegen_group(plan, group, index);
}

void td_cpu_jit_free(tide_device *dev, void *group)
{
    (void)dev;
    td_cpu_codegen_free(group);
}
