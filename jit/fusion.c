/*
 * fusion.c — fusion grouping: the nodes, in program order, gathered into groups of elementwise
 * ops and row reductions over one domain (with fused write-backs), each closed group handed to
 * the device's jit_compile; and the epilogues: a group that may follow a matmul block by block.
 * A group never spans a write it does not make itself.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/log.h"
#include "../core/strbuf.h"
#include "jit.h"

#define TILE 1024     /* elements per tile of an elementwise group (a device may lower it) */

/* ---- fusion grouping ---------------------------------------------------------------------- */

typedef struct grouper {
    jit_compiled *c;
    const char *live;
    int *group_of; /* node -> open/closed group index, -1 */
    int **users;   /* node -> live users (resolved ids) */
    int *nusers;
    const char *is_output;
    const char *written;
    /* the open group */
    int open;
    bool has_domain;
    int ndim;
    int64_t domain[TIDE_MAX_DIMS];
    int domain_node; /* whose shape the domain is */
    int row_mode, nred;
    int64_t rowlen;
    int nmem;
    int mem[JIT_GROUP_MAX_MEMBERS];
    int vk[JIT_GROUP_MAX_MEMBERS];
    /* fused writes: a COPY of member wb_member[k] into wb_dst[k], done by the group */
    int nwb;
    int wb_member[JIT_GROUP_MAX_MEMBERS], wb_dst[JIT_GROUP_MAX_MEMBERS];
} grouper;

static int push_step(jit_compiled *c, int kind, int node, int group)
{
    jit_step *s = td_realloc(c->steps, sizeof *s * (size_t)(c->nsteps + 1));
    if (!s)
        return td_error("jit: out of memory");
    c->steps = s;
    s[c->nsteps++] = (jit_step){kind, node, group};
    return 0;
}

static int member_index(const grouper *gp, int node)
{
    for (int k = 0; k < gp->nmem; k++)
        if (gp->mem[k] == node)
            return k;
    return -1;
}

/* The shape of a row value: the domain with the reduced dims set to 1. */
static void row_shape(const grouper *gp, int64_t *out)
{
    for (int d = 0; d < gp->ndim; d++)
        out[d] = d >= gp->ndim - gp->nred ? 1 : gp->domain[d];
}

/* The kind node i would have as a member, or -1 when it cannot join the open group. */
static int join_kind(grouper *gp, int i)
{
    const jit_compiled *c = gp->c;
    const jit_node *nd = &c->nodes[i];
    if (gp->nmem >= JIT_GROUP_MAX_MEMBERS)
        return -1;
    if (nd->kind != JN_OP)
        return -1;
    bool red = jit_is_reduce(nd->op);
    if (!red && !jit_op_fusible(nd->op))
        return -1;
    /* A cast from or to float16 or bfloat16 joins only where the device says it renders it
     * (asked with the 16-bit dtype; without jit_member, never): it must round exactly as the
     * eager cast does. Other casts are members on every device. */
    if (nd->op == TIDE_OP_CAST) {
        int from = c->nodes[nd->in[0]].dtype;
        bool half_from = td_dtype_is_half(from), half_to = td_dtype_is_half(nd->dtype);
        if ((half_from || half_to) && !c->device->jit_member)
            return -1;
        if (half_from && !c->device->jit_member(c->device, TIDE_OP_CAST, from))
            return -1;
        if (half_to && !c->device->jit_member(c->device, TIDE_OP_CAST, nd->dtype))
            return -1;
    }
    if (nd->op != TIDE_OP_CAST && c->device->jit_member) {
        int kdt = nd->op == TIDE_OP_WHERE ? c->nodes[nd->in[1]].dtype : c->nodes[nd->in[0]].dtype;
        if (!c->device->jit_member(c->device, nd->op, kdt))
            return -1;
    }
    if (red) {
        const jit_node *x = &c->nodes[nd->in[0]];
        int k = nd->attrs.nints;
        if (k < 1 || k > x->ndim)
            return -1;
        for (int j = 0; j < k; j++)
            if (nd->attrs.ints[j] != x->ndim - k + j)
                return -1;
        int64_t rl = 1;
        for (int j = x->ndim - k; j < x->ndim; j++)
            rl *= x->shape[j];
        if (rl > JIT_ROW_MAX || rl == 0)
            return -1;
        int xm = member_index(gp, nd->in[0]);
        if (xm >= 0 && gp->vk[xm] != JV_FULL)
            return -1;
        if (gp->has_domain) {
            if (!jit_same_shape(x->ndim, x->shape, gp->ndim, gp->domain))
                return -1;
            if (gp->row_mode && gp->nred != k)
                return -1;
        }
        return JV_ROW;
    }
    /* elementwise: SCALAR when it and every operand hold one element */
    bool scalar = jit_numel(nd) == 1;
    for (int k = 0; k < nd->nin && scalar; k++) {
        int m = member_index(gp, nd->in[k]);
        scalar = m >= 0 ? gp->vk[m] == JV_SCALAR : jit_numel(&c->nodes[nd->in[k]]) == 1;
    }
    if (scalar && (!gp->has_domain || jit_numel(nd) == 1))
        return JV_SCALAR;
    if (!gp->has_domain)
        return JV_FULL;
    if (jit_same_shape(nd->ndim, nd->shape, gp->ndim, gp->domain))
        return JV_FULL;
    if (gp->row_mode) {
        int64_t rs[TIDE_MAX_DIMS];
        row_shape(gp, rs);
        if (jit_same_shape(nd->ndim, nd->shape, gp->ndim, rs)) {
            for (int k = 0; k < nd->nin; k++) { /* row values read only rows and scalars */
                int m = member_index(gp, nd->in[k]);
                if (m >= 0 && gp->vk[m] == JV_FULL)
                    return -1;
            }
            return JV_ROW;
        }
    }
    return -1;
}

static void add_member(grouper *gp, int i, int vk)
{
    const jit_node *nd = &gp->c->nodes[i];
    if (vk == JV_ROW && jit_is_reduce(nd->op)) {
        const jit_node *x = &gp->c->nodes[nd->in[0]];
        if (!gp->has_domain) {
            gp->has_domain = true;
            gp->ndim = x->ndim;
            gp->domain_node = nd->in[0];
            memcpy(gp->domain, x->shape, sizeof(int64_t) * x->ndim);
        }
        if (!gp->row_mode) {
            gp->row_mode = 1;
            gp->nred = nd->attrs.nints;
            gp->rowlen = 1;
            for (int j = x->ndim - gp->nred; j < x->ndim; j++)
                gp->rowlen *= x->shape[j];
        }
    } else if (vk == JV_FULL && !gp->has_domain) {
        gp->has_domain = true;
        gp->ndim = nd->ndim;
        gp->domain_node = i;
        memcpy(gp->domain, nd->shape, sizeof(int64_t) * nd->ndim);
    }
    gp->mem[gp->nmem] = i;
    gp->vk[gp->nmem] = vk;
    gp->nmem++;
    gp->group_of[i] = gp->open;
}

static int add_slot(jit_group *g, int node, int vkind, int member)
{
    for (int s = 0; s < g->nslots; s++)
        if (g->slots[s].node == node)
            return s;
    jit_slot *ns = td_realloc(g->slots, sizeof *ns * (size_t)(g->nslots + 1));
    if (!ns)
        return td_error("jit: out of memory");
    g->slots = ns;
    jit_slot *s = &ns[g->nslots];
    memset(s, 0, sizeof *s);
    s->node = node;
    s->vkind = vkind;
    s->member = member;
    s->arg = -1;
    s->scratch = -1;
    s->stream = -1;
    s->splat = -1;
    s->into = -1;
    return g->nslots++;
}

/* Ops whose result a group can take as the product it is the epilogue of (fuse_epilogues):
 * matmul, and conv2d whole. A conv is never cut into blocks: blocks of images would run its
 * GEMMs over other column extents than the device's eager call, which rounds differently (and
 * measured 0-5% faster, less than the jit's promise of eager's bits is worth). Whole, it lets
 * a device fuse a bias and an activation into the convolution's own stores. */
static bool product_op(int op) { return op == TIDE_OP_MATMUL || op == TIDE_OP_CONV2D; }

/* Whether the open group's only member reads, whole and in its own shape, a product whose
 * epilogue it could be (fuse_epilogues decides). */
static bool reads_product(const grouper *gp)
{
    const jit_compiled *c = gp->c;
    const jit_node *nd = &c->nodes[gp->mem[0]];
    if (!c->device->jit_epilogue_rows || gp->vk[0] != JV_FULL)
        return false;
    for (int k = 0; k < nd->nin; k++) {
        const jit_node *p = &c->nodes[nd->in[k]];
        if (p->kind == JN_OP && product_op(p->op) &&
            jit_same_shape(p->ndim, p->shape, nd->ndim, nd->shape))
            return true;
    }
    return false;
}

/* The new group's domain and how it is cut: rows of the reduced extent, or tiles. */
static void set_extent(jit_group *g, const grouper *gp)
{
    g->ndim = gp->ndim;
    memcpy(g->domain, gp->domain, sizeof(int64_t) * gp->ndim);
    g->numel = td_numel(gp->ndim, gp->domain);
    g->row_mode = gp->row_mode;
    g->nred = gp->nred;
    g->domain_node = gp->domain_node;
    g->symbolic = gp->c->node_sym && gp->c->node_sym[gp->domain_node];
    if (gp->row_mode) {
        g->rowlen = gp->rowlen;
        g->nrows = g->numel / g->rowlen;
    } else { /* tiles no longer than the domain: splats and scratch stay small */
        /* a power of two, so domains of nearby sizes (batch 128 and 96) share generated code;
         * a symbolic domain's tiles are whole (its size is a run's) */
        int64_t tile = TILE;
        g->rowlen = 1;
        while ((g->rowlen < g->numel || g->symbolic) && g->rowlen < tile)
            g->rowlen *= 2;
        g->nrows = (g->numel + g->rowlen - 1) / g->rowlen;
    }
}

/* The group's slots: its members first (in order), then their outside operands, each read as
 * a scalar, a row or the full domain. 0, or -1 with the error set. */
static int add_slots(jit_group *g, const grouper *gp)
{
    const jit_compiled *c = gp->c;
    g->members = td_malloc(sizeof(int) * (size_t)gp->nmem);
    if (!g->members)
        return td_error("jit: out of memory");
    for (int k = 0; k < gp->nmem; k++) {
        int s = add_slot(g, gp->mem[k], gp->vk[k], 1);
        if (s < 0)
            return -1;
        g->members[g->nmembers++] = s;
    }
    for (int k = 0; k < gp->nmem; k++) {
        const jit_node *nd = &c->nodes[gp->mem[k]];
        for (int j = 0; j < nd->nin; j++) {
            int in = nd->in[j];
            if (gp->group_of[in] == gp->open)
                continue;
            const jit_node *x = &c->nodes[in];
            int vk;
            if (td_numel(x->ndim, x->shape) == 1)
                vk = JV_SCALAR;
            else if (gp->vk[k] == JV_ROW && !jit_is_reduce(nd->op))
                vk = JV_ROW;
            else
                vk = JV_FULL;
            int existing = -1;
            for (int s = 0; s < g->nslots; s++)
                if (g->slots[s].node == in)
                    existing = s;
            if (existing >= 0) {
                /* read both as a row and as the full domain: keep the full reading */
                if (vk == JV_FULL)
                    g->slots[existing].vkind = JV_FULL;
                continue;
            }
            if (add_slot(g, in, vk, 0) < 0)
                return -1;
        }
    }
    return 0;
}

/* Which members the group stores (output): those read outside it, the segment's outputs and
 * the nodes written in place; a member written back into another node's buffer (into) is
 * stored there from scratch instead. Also each slot's element size. */
static void mark_outputs(jit_group *g, const grouper *gp)
{
    const jit_compiled *c = gp->c;
    for (int s = 0; s < g->nslots; s++) {
        jit_slot *sl = &g->slots[s];
        const jit_node *nd = &c->nodes[sl->node];
        sl->es = (int)td_dtype_sizes[nd->dtype];
        if (!sl->member)
            continue;
        int i = sl->node;
        int wb = -1;
        for (int k = 0; k < gp->nwb; k++)
            if (gp->wb_member[k] == i)
                wb = k;
        if (wb >= 0) { /* written into wb_dst from scratch, nothing else reads it */
            sl->into = gp->wb_dst[wb];
            sl->output = 0;
            continue;
        }
        bool out = gp->is_output[i] || gp->written[i];
        for (int u = 0; u < gp->nusers[i] && !out; u++)
            out = gp->group_of[gp->users[i][u]] != gp->open;
        sl->output = out;
    }
}

/* The group's arguments (its operands and stored members, in slot order) and which inputs it
 * reads in place. */
static void assign_args(jit_group *g, const jit_compiled *c)
{
    g->nargs = 0;
    for (int s = 0; s < g->nslots; s++) {
        jit_slot *sl = &g->slots[s];
        if (!sl->member || sl->output || sl->into >= 0)
            sl->arg = g->nargs++;
    }
    /* inputs read in place: contiguous with the domain's shape (every layout is in the key;
     * a size-1 dim's stride moves nothing, as in a [64, 1, 256] tensor read as [1, 64, 256]) */
    for (int s = 0; s < g->nslots; s++) {
        jit_slot *sl = &g->slots[s];
        const jit_node *nd = &c->nodes[sl->node];
        if (!sl->member && sl->vkind == JV_FULL)
            sl->direct = jit_same_shape(nd->ndim, nd->shape, g->ndim, g->domain) &&
                                 td_dense_layout(nd->ndim, nd->shape, nd->strides)
                             ? JIT_IN_PLACE
                             : JIT_GATHERED;
    }
}

/* Closes the open group: a fusion group of two or more members (or one that may become a
 * product's epilogue), or plain kernels. */
static int close_group(grouper *gp)
{
    jit_compiled *c = gp->c;
    if (gp->nmem == 0)
        goto reset;
    /* one op alone is a group only when it may become a product's epilogue (a mask or a bias
     * after a conv): otherwise the eager kernel does the same work */
    bool worth = gp->has_domain &&
                 (gp->nmem >= 2 || (gp->nmem == 1 && (reads_product(gp) || gp->nwb > 0)));
    if (!worth) {
        for (int k = 0; k < gp->nmem; k++) {
            gp->group_of[gp->mem[k]] = -1;
            if (push_step(c, JS_KERNEL, gp->mem[k], -1) < 0)
                return -1;
        }
        goto reset;
    }
    jit_group *ng = td_realloc(c->groups, sizeof *ng * (size_t)(c->ngroups + 1));
    if (!ng)
        return td_error("jit: out of memory");
    c->groups = ng;
    /* counted at once, so that jit_compiled_free frees its slots and members if a later step
     * fails (the plan is then freed whole; a group is never half-run) */
    int gi = c->ngroups++;
    jit_group *g = &ng[gi];
    memset(g, 0, sizeof *g);
    g->producer = -1;
    g->product_private = 0;
    set_extent(g, gp);
    if (add_slots(g, gp) < 0)
        return -1;
    mark_outputs(g, gp);
    assign_args(g, c);
    if (c->device->jit_compile(c->device, &c->view, g, gi) < 0)
        return -1;
    if (push_step(c, JS_GROUP, -1, gi) < 0)
        return -1;
reset:
    gp->nmem = 0;
    gp->nwb = 0;
    gp->has_domain = false;
    gp->row_mode = 0;
    gp->nred = 0;
    gp->rowlen = 0;
    gp->open++;
    return 0;
}

/* Whether node i reads a member of the open group (directly or through a view's root). */
static bool reads_open(const grouper *gp, int i)
{
    const jit_node *nd = &gp->c->nodes[i];
    for (int k = 0; k < nd->nin; k++) {
        int in = nd->in[k];
        if (gp->group_of[in] == gp->open || gp->group_of[gp->c->nodes[in].root] == gp->open)
            return true;
    }
    return nd->kind == JN_VIEW && gp->group_of[nd->root] == gp->open;
}

/* Whether roots a and b (nodes) are one storage: the same node, or externs sharing theirs. */
static bool same_storage(const jit_compiled *c, int a, int b)
{
    const jit_node *ra = &c->nodes[a], *rb = &c->nodes[b];
    return a == b || (ra->kind == JN_EXTERN && rb->kind == JN_EXTERN &&
                      ra->storage_class == rb->storage_class);
}

/* Whether the write W = COPY(dst, src) can be done by the open group itself: src is its last
 * member (full domain, dst's dtype), nothing else reads src, dst is contiguous with the
 * domain's shape (a tensor from outside, a view of one, or an op result of this graph: a
 * gradient scaled in place), and the group reads dst's storage, if at all, only through dst
 * itself (same elements, in program order within each tile). Then the group writes src into
 * dst and no COPY step runs (in-place updates: one pass less). A lone member with such a write
 * stays a group (close_group). */
static bool fuse_writeback(grouper *gp, int w)
{
    const jit_compiled *c = gp->c;
    const jit_node *wn = &c->nodes[w];
    if (wn->op != TIDE_OP_COPY || wn->nin != 2 || gp->nmem < 1 || !gp->has_domain)
        return false;
    int dst = wn->in[0], src = wn->in[1];
    if (gp->mem[gp->nmem - 1] != src || gp->vk[gp->nmem - 1] != JV_FULL)
        return false;
    const jit_node *d = &c->nodes[dst], *sn = &c->nodes[src];
    if (gp->is_output[src] || gp->written[src] || gp->nusers[src] != 1 ||
        gp->users[src][0] != w)
        return false;
    if (d->dtype != sn->dtype || !jit_same_shape(d->ndim, d->shape, gp->ndim, gp->domain) ||
        td_numel(d->ndim, d->shape) < 2)
        return false;
    const jit_node *droot = &c->nodes[d->root];
    bool op_result = d->kind == JN_OP && d->root == dst && gp->group_of[dst] != gp->open;
    if (d->kind != JN_EXTERN && !(d->kind == JN_VIEW && droot->kind == JN_EXTERN) && !op_result)
        return false;
    if (d->kind != JN_OP && !td_dense_layout(d->ndim, d->shape, d->strides))
        return false;
    for (int k = 0; k < gp->nmem; k++) {
        const jit_node *m = &c->nodes[gp->mem[k]];
        for (int j = 0; j < m->nin; j++) {
            int in = m->in[j];
            if (gp->group_of[in] == gp->open || in == dst)
                continue;
            if (same_storage(c, c->nodes[in].root, d->root))
                return false; /* dst's storage read through another layout */
        }
    }
    gp->wb_member[gp->nwb] = src;
    gp->wb_dst[gp->nwb] = dst;
    gp->nwb++;
    return true;
}

/* Whether node i reads the storage of a write the open group has fused through anything but
 * the written node itself. The node itself is read in place in each tile after the write (the
 * generated code writes back at the member's place in program order), so it sees the new
 * values; another layout would read other elements of the tile, or another tile's. */
static bool reads_written_storage(const grouper *gp, int i)
{
    const jit_compiled *c = gp->c;
    const jit_node *nd = &c->nodes[i];
    for (int w = 0; w < gp->nwb; w++) {
        int dst = gp->wb_dst[w];
        for (int k = 0; k < nd->nin; k++)
            if (nd->in[k] != dst && same_storage(c, c->nodes[nd->in[k]].root, c->nodes[dst].root))
                return true;
    }
    return false;
}

/* No node in a group yet, and each live node's readers (users[in]: the nodes reading in, a
 * view reading its root too), from which close_group tells whether a member is read outside
 * its group. 0, or -1 with the error set. */
static int find_users(grouper *gp)
{
    const jit_compiled *c = gp->c;
    for (int i = 0; i < c->nnodes; i++)
        gp->group_of[i] = -1;
    for (int i = 0; i < c->nnodes; i++) {
        if (!gp->live[i] || c->alias[i] != i)
            continue;
        const jit_node *nd = &c->nodes[i];
        int nr = nd->nin + (nd->kind == JN_VIEW);
        for (int k = 0; k < nr; k++) {
            int in = k < nd->nin ? nd->in[k] : nd->root;
            int *nu = td_realloc(gp->users[in], sizeof(int) * (size_t)(gp->nusers[in] + 1));
            if (!nu)
                return td_error("jit: out of memory");
            gp->users[in] = nu;
            nu[gp->nusers[in]++] = i;
        }
    }
    return 0;
}

int jit_schedule(jit_compiled *c, const char *live, const char *is_output, const char *written)
{
    int n = c->nnodes;
    grouper gp = {0};
    gp.c = c;
    gp.live = live;
    gp.is_output = is_output;
    gp.written = written;
    gp.open = 0;
    gp.group_of = td_malloc(sizeof(int) * (size_t)n);
    gp.nusers = td_calloc((size_t)n, sizeof(int));
    gp.users = td_calloc((size_t)n, sizeof(int *));
    int rc = -1;
    if (!gp.group_of || !gp.nusers || !gp.users) {
        td_error("jit: out of memory");
        goto done;
    }
    if (find_users(&gp) < 0)
        goto done;
    for (int i = 0; i < n; i++) {
        const jit_node *nd = &c->nodes[i];
        if (!live[i] || c->alias[i] != i || nd->kind == JN_EXTERN || nd->kind == JN_CONST)
            continue;
        if (nd->kind == JN_INPLACE) {
            if (fuse_writeback(&gp, i)) {
                /* the group may go on after the write (an optimizer's update of a parameter
                 * and its momentum: one pass) where the device's code reads each operand where
                 * it uses it; code that loads its operands up front ends the group here */
                if (!c->device->jit_group_after_write && close_group(&gp) < 0)
                    goto done;
                continue;
            }
            if (close_group(&gp) < 0 || push_step(c, JS_INPLACE, i, -1) < 0)
                goto done;
            continue;
        }
        if (nd->kind == JN_VIEW) {
            if (reads_open(&gp, i) && close_group(&gp) < 0)
                goto done;
            if (push_step(c, JS_VIEW, i, -1) < 0)
                goto done;
            continue;
        }
        int vk = written[i] || reads_written_storage(&gp, i) ? -1 : join_kind(&gp, i);
        if (vk < 0 && gp.nmem > 0) {
            if (close_group(&gp) < 0)
                goto done;
            vk = written[i] ? -1 : join_kind(&gp, i);
        }
        if (vk >= 0) {
            add_member(&gp, i, vk);
            continue;
        }
        if (push_step(c, JS_KERNEL, i, -1) < 0)
            goto done;
    }
    if (close_group(&gp) < 0)
        goto done;
    rc = 0;
done:
    if (gp.users)
        for (int i = 0; i < n; i++)
            free(gp.users[i]);
    free(gp.users);
    free(gp.nusers);
    free(gp.group_of);
    return rc;
}

/* ---- epilogues of products (matmul, conv) ------------------------------------------------ */

void jit_product_layout(const jit_node *p, int64_t *nbatch, int64_t *units, int64_t *unit_elems)
{
    *nbatch = td_numel(p->ndim - 2, p->shape);
    *units = p->shape[p->ndim - 2];
    *unit_elems = p->shape[p->ndim - 1];
}

/* Rows per block of a fused matmul, as the device says (0: it takes no epilogue there). */
static int64_t epilogue_block_units(const jit_compiled *c, int pi)
{
    tide_device *dev = c->device;
    return dev->jit_epilogue_rows ? dev->jit_epilogue_rows(dev, &c->view, pi) : 0;
}

/* Whether group g can run as the epilogue of product node pi: a float matmul (any batch) on
 * the CPU whose result is the group's domain, read by the group in place (so a tile reads only
 * its own block), and which the device cuts into blocks of rows (it says which dtypes). */
static bool epilogue_fits(const jit_compiled *c, const jit_group *g, int pi)
{
    const jit_node *p = &c->nodes[pi];
    if (p->kind != JN_OP)
        return false;
    if (!product_op(p->op) || p->nin != 2 || !jit_same_shape(p->ndim, p->shape, g->ndim, g->domain) ||
        g->numel < 1)
        return false;
    int s = jit_slot_of(g, pi);
    if (s < 0 || g->slots[s].member || g->slots[s].vkind != JV_FULL ||
        g->slots[s].direct != JIT_IN_PLACE)
        return false;
    /* the group's write-backs land while other blocks of the product are still being computed:
     * none may go into the storage of an operand */
    for (int k = 0; k < g->nslots; k++) {
        if (g->slots[k].into < 0)
            continue;
        const jit_node *d = &c->nodes[c->nodes[g->slots[k].into].root];
        for (int j = 0; j < p->nin; j++) {
            const jit_node *r = &c->nodes[c->nodes[p->in[j]].root];
            if (r == d || (r->kind == JN_EXTERN && d->kind == JN_EXTERN &&
                           r->storage_class == d->storage_class))
                return false;
        }
    }
    return epilogue_block_units(c, pi) > 0;
}

/* Whether step st reads node pi (directly or through a view of it). */
static bool step_reads(const jit_compiled *c, const jit_step *st, int pi)
{
    if (st->kind == JS_GROUP) {
        const jit_group *g = &c->groups[st->group];
        for (int k = 0; k < g->nslots; k++)
            if (!g->slots[k].member && c->nodes[g->slots[k].node].root == pi)
                return true;
        return false;
    }
    const jit_node *nd = &c->nodes[st->node];
    for (int k = 0; k < nd->nin; k++)
        if (c->nodes[nd->in[k]].root == pi)
            return true;
    return nd->root == pi;
}

/* Whether step st writes into a tensor from outside or a written node (in-place). */
static bool step_writes(const jit_compiled *c, const jit_step *st)
{
    if (st->kind == JS_INPLACE)
        return true;
    if (st->kind != JS_GROUP)
        return false;
    const jit_group *g = &c->groups[st->group];
    for (int k = 0; k < g->nslots; k++)
        if (g->slots[k].into >= 0)
            return true;
    return false;
}

/* Sets product_private on each fused group whose product no other step reads and the graph
 * does not return. */
static void mark_private_products(jit_compiled *c, const char *is_output)
{
    for (int s = 0; s < c->nsteps; s++) {
        if (c->steps[s].kind != JS_GROUP || c->groups[c->steps[s].group].producer < 0)
            continue;
        jit_group *g = &c->groups[c->steps[s].group];
        g->product_private = !is_output[g->producer];
        for (int q = 0; q < c->nsteps && g->product_private; q++)
            g->product_private = q == s || !step_reads(c, &c->steps[q], g->producer);
    }
}

/* Fuses each group with the product it reads that ran a few steps before it: the product's step
 * goes, and the group's step runs it block by block. Moving the product later is safe when no
 * step between reads its result and none writes what it reads (in-place writes: only into
 * outside tensors and written nodes, so an operand that is an op result nobody writes is safe
 * from them). */
void jit_fuse_epilogues(jit_compiled *c, const char *written, const char *is_output)
{
    /* TIDE_JIT_EPILOGUES=0 leaves products unfused (read per compile: bench_jit compares both) */
    const char *e = getenv("TIDE_JIT_EPILOGUES");
    if (e && strcmp(e, "0") == 0)
        return;
    int out = 0;
    for (int s = 0; s < c->nsteps; s++) {
        jit_step st = c->steps[s];
        c->steps[out++] = st;
        if (st.kind != JS_GROUP)
            continue;
        jit_group *g = &c->groups[st.group];
        int p = -1;
        for (int q = out - 2; q >= 0 && q >= out - 33 && p < 0; q--)
            if (c->steps[q].kind == JS_KERNEL && epilogue_fits(c, g, c->steps[q].node))
                p = q;
        if (p < 0)
            continue;
        int pi = c->steps[p].node;
        bool safe_inputs = true;
        for (int k = 0; k < c->nodes[pi].nin; k++) {
            int in = c->nodes[pi].in[k];
            const jit_node *r = &c->nodes[c->nodes[in].root];
            safe_inputs &= (r->kind == JN_OP || r->kind == JN_CONST) && !written[in];
        }
        bool ok = true;
        for (int q = p + 1; q < out - 1 && ok; q++)
            ok = !step_reads(c, &c->steps[q], pi) && (safe_inputs || !step_writes(c, &c->steps[q]));
        if (!ok)
            continue;
        g->producer = pi;
        g->block_units = epilogue_block_units(c, pi);
        memmove(&c->steps[p], &c->steps[p + 1], sizeof *c->steps * (size_t)(out - 1 - p));
        out--;
    }
    c->nsteps = out;
    mark_private_products(c, is_output);
}

