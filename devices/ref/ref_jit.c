/*
 * ref_jit.c — the reference device's side of the jit (jit/group.h): a scalar interpreter of
 * fusion groups. Every group kind runs here through the group interface (elementwise groups,
 * row reductions with their follow-ups, fused write-backs, matmul epilogues); nothing is
 * declined and nothing falls back to run().
 *
 * A group runs row by row (in elementwise mode each element of the domain is a row of one).
 * SCALAR members are computed once, first (they read only one-element values, and no
 * write-back lands in those). Within a row the members run in program order, each over its
 * extent: a FULL member over the row's elements, a ROW member once (a reduction feeding its
 * accumulator with the row's elements in row-major order, as the eager reduce visits them).
 * Each member's element is computed by the same function the eager kernel uses
 * (ref_unary_at, ref_binary_at, ref_where_at, ref_convert, ref_acc_*: ref_internal.h), reading
 * its operands where they are (broadcast to the domain, any strides) and writing its dtype, so
 * a group's values are eager ref's bit for bit.
 *
 * Where a member's value lives: its output tensor (t[s]) when it is needed outside, the
 * destination of its write-back (into >= 0), else a cell of the member's dtype viewed with the
 * member's shape: one element (strides 0), or one row's elements for a FULL member in row mode.
 */
#include <stdlib.h>
#include <string.h>

#include "../../jit/group.h"
#include "ref_internal.h"

/* What jit_compile keeps: per member (program order), its slot and its operands' slots. */
typedef struct ref_member {
    int slot;
    int nin;
    int in[3];
} ref_member;

typedef struct ref_program {
    int nmembers;
    ref_member m[];
} ref_program;

bool ref_jit_member(tide_device *dev, int op, int dtype);
int64_t ref_jit_epilogue_rows(tide_device *dev, const void *plan, int p);
int ref_jit_compile(tide_device *dev, const void *plan, void *group, int index);
int ref_jit_run(tide_device *dev, const void *plan, const void *group, tide_tensor *const *t);
void ref_jit_free(tide_device *dev, void *group);

static bool is_reduce(int op)
{
    return op == TIDE_OP_SUM || op == TIDE_OP_PROD || op == TIDE_OP_MAX || op == TIDE_OP_MIN;
}

/* A member of every fusible op whose eager kernel takes the dtype (the others run through run()
 * and fail there with ref's error). */
bool ref_jit_member(tide_device *dev, int op, int dtype)
{
    (void)dev;
    if (tide_op_is_unary((tide_op)op))
        return ref_unary_has_kernel((tide_op)op, dtype);
    if (tide_op_is_binary((tide_op)op))
        return ref_binary_has_kernel((tide_op)op, dtype);
    return true; /* where, cast, sum/prod/max/min: every dtype */
}

/* One block: the whole product (its matrices' rows). ref computes the product whole, then the
 * group over it; bool has no matmul kernel, so no epilogue either. */
int64_t ref_jit_epilogue_rows(tide_device *dev, const void *plan, int p)
{
    (void)dev;
    const jit_node *nd = &((const jit_plan *)plan)->nodes[p];
    if (nd->dtype == TIDE_BOOL)
        return 0;
    int64_t nbatch, units, unit_elems;
    jit_product_layout(nd, &nbatch, &units, &unit_elems);
    return units > 0 ? units : 0;
}

int ref_jit_compile(tide_device *dev, const void *plan, void *group, int index)
{
    (void)dev, (void)index;
    const jit_plan *p = plan;
    jit_group *g = group;
    ref_program *pr = td_malloc(sizeof *pr + sizeof(ref_member) * (size_t)g->nmembers);
    if (!pr)
        return td_error("ref: out of memory compiling a jit group of %d members", g->nmembers);
    pr->nmembers = g->nmembers;
    for (int k = 0; k < g->nmembers; k++) {
        ref_member *m = &pr->m[k];
        const jit_node *nd = &p->nodes[g->slots[g->members[k]].node];
        m->slot = g->members[k];
        m->nin = nd->nin;
        bool known = jit_op_fusible(nd->op) || is_reduce(nd->op);
        for (int j = 0; j < nd->nin && j < 3; j++)
            m->in[j] = jit_slot_of(g, nd->in[j]);
        for (int j = 0; j < nd->nin && known; j++)
            known = j < 3 && m->in[j] >= 0;
        if (!known) {
            free(pr);
            return td_error("ref: jit group member %s has no operand slot or no interpretation",
                            tide_op_name((tide_op)nd->op));
        }
    }
    g->code = pr;
    return 0;
}

void ref_jit_free(tide_device *dev, void *group)
{
    (void)dev;
    jit_group *g = group;
    free(g->code);
    g->code = NULL;
}

/* ---- running ------------------------------------------------------------------------------ */

/* Storage offset of value v at domain index idx (ndim dims): v broadcast to the domain. */
static int64_t at(const tide_tensor *v, int ndim, const int64_t *idx)
{
    return ref_numel(v) == 1 ? v->offset : ref_offset_bcast(v, ndim, idx);
}

/* One element of elementwise member m at domain index idx. */
static void eval_at(int op, const ref_member *m, tide_tensor *const *v, int nd, const int64_t *idx)
{
    tide_tensor *out = v[m->slot];
    const tide_tensor *a = v[m->in[0]], *b = m->nin > 1 ? v[m->in[1]] : NULL;
    int64_t oo = at(out, nd, idx), ao = at(a, nd, idx), bo = b ? at(b, nd, idx) : 0;
    if (tide_op_is_unary((tide_op)op))
        ref_unary_at((tide_op)op, out, oo, a, ao);
    else if (tide_op_is_binary((tide_op)op))
        ref_binary_at((tide_op)op, out, oo, a, ao, b, bo);
    else if (op == TIDE_OP_WHERE)
        ref_where_at(out, oo, a, ao, b, bo, v[m->in[2]], at(v[m->in[2]], nd, idx));
    else /* CAST */
        ref_convert(out, oo, a, ao);
}

/* A reduction member over the row whose leading index is in idx (trailing dims rewritten). */
static void reduce_row(const jit_group *g, int op, const ref_member *m, tide_tensor *const *v,
                       int64_t *idx, int64_t rowlen)
{
    const tide_tensor *x = v[m->in[0]];
    int lead = g->ndim - g->nred;
    ref_acc acc = ref_acc_start((tide_op)op);
    for (int64_t e = 0; e < rowlen; e++) {
        ref_unflatten(g->nred, g->domain + lead, e, idx + lead);
        ref_acc_add((tide_op)op, &acc, x, at(x, g->ndim, idx));
    }
    memset(idx + lead, 0, sizeof(int64_t) * (size_t)g->nred);
    ref_acc_store((tide_op)op, &acc, ref_is_float(x->dtype), v[m->slot],
                  at(v[m->slot], g->ndim, idx));
}

/* Row r (one element in elementwise mode): every non-SCALAR member in program order. */
static void run_row(const jit_plan *p, const jit_group *g, const ref_program *pr,
                    tide_tensor *const *v, int64_t r, int64_t rowlen)
{
    int lead = g->ndim - g->nred;
    int64_t idx[TIDE_MAX_DIMS] = {0};
    for (int k = 0; k < pr->nmembers; k++) {
        const ref_member *m = &pr->m[k];
        const jit_slot *sl = &g->slots[m->slot];
        int op = p->nodes[sl->node].op;
        ref_unflatten(lead, g->domain, r, idx);
        memset(idx + lead, 0, sizeof(int64_t) * (size_t)g->nred);
        if (sl->vkind == JV_SCALAR)
            continue;
        if (sl->vkind == JV_ROW && is_reduce(op))
            reduce_row(g, op, m, v, idx, rowlen);
        else if (sl->vkind == JV_ROW)
            eval_at(op, m, v, g->ndim, idx);
        else
            for (int64_t e = 0; e < rowlen; e++) {
                ref_unflatten(g->nred, g->domain + lead, e, idx + lead);
                eval_at(op, m, v, g->ndim, idx);
            }
    }
}

/* A cell for member slot s kept inside the group: its dtype, viewed with its node's shape; a
 * FULL member in row mode holds one row (the trailing dims contiguous), any other one element. */
static tide_tensor *member_cell(tide_device *dev, const jit_group *g, const jit_node *nd,
                                int vkind, int64_t rowlen, tide_tensor **base)
{
    bool row = vkind == JV_FULL && g->row_mode;
    int64_t n = row ? rowlen : 1, strides[TIDE_MAX_DIMS];
    *base = td_tensor_new("ref jit", dev, 1, &n, (tide_dtype)nd->dtype);
    if (!*base)
        return NULL;
    int64_t step = 1;
    for (int d = nd->ndim - 1; d >= 0; d--) {
        bool inner = row && d >= nd->ndim - g->nred;
        strides[d] = inner ? step : 0;
        step *= inner ? nd->shape[d] : 1;
    }
    return td_tensor_view(*base, nd->ndim, nd->shape, strides, (*base)->offset);
}

int ref_jit_run(tide_device *dev, const void *plan, const void *group, tide_tensor *const *t)
{
    const jit_plan *p = plan;
    const jit_group *g = group;
    const ref_program *pr = g->code;
    /* the product first, whole, by the eager kernel: the group then reads it in place */
    if (g->producer >= 0 && ref_matmul(t[g->nslots], t[g->nslots + 1], t[g->nslots + 2]) < 0)
        return -1;
    int64_t rowlen = 1;
    for (int d = g->ndim - g->nred; d < g->ndim; d++)
        rowlen *= g->domain[d];
    tide_tensor **v = td_calloc((size_t)g->nslots * 2, sizeof *v), **cells = v + g->nslots;
    if (!v)
        return td_error("ref: out of memory running a jit group of %d slots", g->nslots);
    int rc = 0;
    for (int s = 0; s < g->nslots && rc == 0; s++) {
        v[s] = t[s];
        if (!t[s])
            v[s] = member_cell(dev, g, &p->nodes[g->slots[s].node], g->slots[s].vkind, rowlen,
                               &cells[s]);
        rc = v[s] ? 0 : -1;
    }
    if (rc == 0) {
        int64_t zero[TIDE_MAX_DIMS] = {0};
        for (int k = 0; k < pr->nmembers; k++) /* SCALAR values: once per group */
            if (g->slots[pr->m[k].slot].vkind == JV_SCALAR)
                eval_at(p->nodes[g->slots[pr->m[k].slot].node].op, &pr->m[k], v, g->ndim, zero);
        int64_t nrows = rowlen ? g->numel / rowlen : 0;
        for (int64_t r = 0; r < nrows; r++)
            run_row(p, g, pr, v, r, rowlen);
    }
    for (int s = 0; s < g->nslots; s++) {
        if (!t[s])
            tide_release(v[s]);
        tide_release(cells[s]);
    }
    free(v);
    return rc;
}
