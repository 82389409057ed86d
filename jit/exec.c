/*
 * exec.c — runs a compiled plan: views, library kernels (matmul, conv, reductions the fusion
 * left alone) through the device, in-place writes into their real destinations, and fusion
 * groups through their generated code on the thread pool. Intermediates live in one arena
 * (the memory plan); tensors that leave the graph get their own storage.
 */
#include <stdlib.h>
#include <string.h>

#include "jit.h"

typedef struct exec_ctx {
    const jit_compiled *c;
    tide_tensor *const *ext;
    tide_tensor **vals;
} exec_ctx;

static tide_tensor *value(const exec_ctx *x, int node)
{
    const jit_node *nd = &x->c->nodes[node];
    switch (nd->kind) {
    case JN_EXTERN: return x->ext[nd->ext];
    case JN_CONST: return x->c->consts[node];
    default: return x->vals[node];
    }
}

/* The tensor a node's result is written to: a slice of the arena or its own storage. */
static tide_tensor *alloc_node(const exec_ctx *x, tide_tensor *arena, int node)
{
    const jit_node *nd = &x->c->nodes[node];
    int64_t off = x->c->arena_off[node];
    if (off < 0 || !arena)
        return td_tensor_new("jit", x->c->device, nd->ndim, nd->shape,
                             (tide_dtype)nd->dtype);
    int64_t strides[TIDE_MAX_DIMS];
    td_contiguous_strides(nd->ndim, nd->shape, strides);
    tide_tensor *t = td_tensor_view(arena, nd->ndim, nd->shape, strides, 0);
    if (!t)
        return NULL;
    t->dtype = nd->dtype;
    t->offset = off / (int64_t)td_dtype_sizes[nd->dtype];
    return t;
}

typedef struct group_run {
    const jit_compiled *c;
    const jit_group *g;
    void **args;
    int failed; /* atomic: a range found no memory (its scratch), so its rows were not computed */
} group_run;

static void group_range(void *ctx, int64_t r0, int64_t r1)
{
    group_run *gr = ctx;
    const jit_group *g = gr->g;
    char *scratch = g->scratch_bytes ? td_cache_alloc((size_t)g->scratch_bytes) : NULL;
    if (g->scratch_bytes && !scratch) {
        __atomic_store_n(&gr->failed, 1, __ATOMIC_RELAXED); /* the caller reports it */
        return;
    }
    if (g->fn)
        g->fn(gr->args, r0, r1, scratch);
    else if (td_cpu_group_interpret(gr->c, g, gr->args, r0, r1, scratch) < 0)
        __atomic_store_n(&gr->failed, 1, __ATOMIC_RELAXED);
    if (scratch)
        td_cache_free(scratch, (size_t)g->scratch_bytes);
}

/* Some range of g found no memory (for its scratch): rows were left uncomputed, so the run
 * fails (never a success with stale values). */
static int scratch_error(const jit_group *g)
{
    char shape[96];
    return td_error("jit: out of memory running a fusion group over %s (scratch of %lld bytes "
                    "per thread)", td_shape_str(shape, sizeof shape, g->ndim, g->domain),
                    (long long)g->scratch_bytes);
}

/* All of a group's rows or tiles, split over the threads. */
static void group_all(group_run *gr)
{
    const jit_group *g = gr->g;
    int64_t grain = g->rowlen >= JIT_GROUP_GRAIN_ELEMS ? 1 : JIT_GROUP_GRAIN_ELEMS / g->rowlen;
    td_parallel_for(g->nrows, grain, group_range, gr);
}

/* A group that is a matmul's epilogue: blocks of the product's result (rows of one of its
 * matrices), each computed on this thread and at once run through the group's tiles or rows
 * over it, still in cache. The blocks are the very BLAS calls the device makes when it runs
 * the product eagerly (td_cpu_matmul_call_rows), so the product has eager's bits. */
typedef struct epilogue_run {
    group_run gr;
    tide_device *dev;
    const jit_node *p;
    tide_tensor *in0, *in1, *out;
    int64_t nbatch, units, unit_elems, block_units, blocks_per_matrix;
    int failed; /* atomic */
} epilogue_run;

/* Rows [r0, r1) of matrix `batch` of a [..., rows, cols] tensor whose batch dims broadcast to
 * bshape's first nb, as a 2-D view. */
static tide_tensor *matrix_rows(const tide_tensor *t, const int64_t *bshape, int nb, int64_t batch,
                                int64_t r0, int64_t r1)
{
    int64_t off = t->offset;
    for (int d = nb - 1; d >= 0; d--) {
        int64_t i = batch % bshape[d];
        batch /= bshape[d];
        if (t->shape[d] != 1)
            off += i * t->strides[d];
    }
    int64_t shape[2] = {r1 - r0, t->shape[nb + 1]};
    return td_tensor_view(t, 2, shape, t->strides + nb, off + r0 * t->strides[nb]);
}

/* Whether a matmul's batch is one tall product: every matrix shares B, and A's matrices (and
 * out's) follow each other like the rows of one ([B, T, D] @ [D, H], a linear layer). Blocks
 * of rows then span matrices, and BLAS packs B once per block instead of once per matrix: the
 * run treats it as one matrix (matrix 0, with all the rows). */
static bool batch_folds(const jit_node *p, const tide_tensor *a, const tide_tensor *b,
                        const tide_tensor *out)
{
    int nb = p->ndim - 2;
    int64_t ea = p->shape[nb] * a->strides[nb], eo = p->shape[nb] * out->strides[nb];
    for (int d = nb - 1; d >= 0; d--) {
        if (p->shape[d] == 1)
            continue;
        if (a->shape[d] != p->shape[d] || a->strides[d] != ea || out->strides[d] != eo ||
            a->strides[nb + 1] != 1 || /* as cpu_matmul folds it: row-major A only */
            (b->shape[d] != 1 && b->strides[d] != 0))
            return false;
        ea *= p->shape[d];
        eo *= p->shape[d];
    }
    return true;
}

/* Rows [u0, u1) of matrix `batch` of the product. */
static int run_product_block(const epilogue_run *er, int64_t batch, int64_t u0, int64_t u1)
{
    const jit_node *p = er->p;
    int nb = p->ndim - 2;
    tide_tensor *in[2] = {matrix_rows(er->in0, p->shape, nb, batch, u0, u1),
                          matrix_rows(er->in1, p->shape, nb, batch, 0, er->in1->shape[nb])};
    tide_tensor *out = matrix_rows(er->out, p->shape, nb, batch, u0, u1);
    int rc = in[0] && in[1] && out ? er->dev->run(er->dev, p->op, out, in, 2, &p->attrs) : -1;
    tide_release(in[0]);
    tide_release(in[1]);
    tide_release(out);
    return rc;
}

/* Elements [e0, e1) of the group's domain: the tiles (rows in row mode) wholly inside. A tile
 * that straddles two blocks runs after every block is done (straddling_tiles). */
static void group_inside(epilogue_run *er, int64_t e0, int64_t e1)
{
    const jit_group *g = er->gr.g;
    int64_t t0 = (e0 + g->rowlen - 1) / g->rowlen, t1 = e1 == g->numel ? g->nrows : e1 / g->rowlen;
    if (t0 < t1)
        group_range(&er->gr, t0, t1);
}

/* Block b: its matrix and its rows [*u0, *u1) there. */
static void block_rows(const epilogue_run *er, int64_t b, int64_t *batch, int64_t *u0, int64_t *u1)
{
    *batch = b / er->blocks_per_matrix;
    *u0 = (b % er->blocks_per_matrix) * er->block_units;
    *u1 = *u0 + er->block_units < er->units ? *u0 + er->block_units : er->units;
}

/* Blocks [begin, end): one product call each, then the group over it. */
static void epilogue_range(void *ctx, int64_t begin, int64_t end)
{
    epilogue_run *er = ctx;
    for (int64_t b = begin; b < end; b++) {
        int64_t batch, u0, u1;
        block_rows(er, b, &batch, &u0, &u1);
        if (run_product_block(er, batch, u0, u1) < 0) {
            __atomic_store_n(&er->failed, 1, __ATOMIC_RELAXED);
            return;
        }
        group_inside(er, (batch * er->units + u0) * er->unit_elems,
                     (batch * er->units + u1) * er->unit_elems);
    }
}

/* The tiles holding a block boundary, each once, in order. */
static void straddling_tiles(epilogue_run *er)
{
    const jit_group *g = er->gr.g;
    int64_t last = -1, nblocks = er->nbatch * er->blocks_per_matrix;
    for (int64_t b = 1; b < nblocks; b++) {
        int64_t batch, u0, u1;
        block_rows(er, b, &batch, &u0, &u1);
        int64_t e = (batch * er->units + u0) * er->unit_elems;
        if (e % g->rowlen != 0 && e / g->rowlen != last) {
            last = e / g->rowlen;
            group_range(&er->gr, last, last + 1);
        }
    }
}

/* Rows per block: the rows of each BLAS call of the device's eager matmul (the whole matrix
 * when it would cut by columns: the thread count changed since the plan was made). */
static void choose_blocks(epilogue_run *er)
{
    int64_t k = er->in0->shape[er->in0->ndim - 1];
    er->block_units = td_cpu_matmul_call_rows(er->nbatch, er->units, er->unit_elems, k);
    if (er->block_units <= 0)
        er->block_units = er->units;
    er->blocks_per_matrix = (er->units + er->block_units - 1) / er->block_units;
}

static int run_epilogue(const exec_ctx *x, const jit_group *g, void **args)
{
    const jit_node *p = &x->c->nodes[g->producer];
    epilogue_run er = {{x->c, g, args, 0}, x->c->device, p, value(x, p->in[0]), value(x, p->in[1]),
                       x->vals[g->producer], 0, 0, 0, 0, 0, 0};
    jit_product_layout(p, &er.nbatch, &er.units, &er.unit_elems);
    if (er.nbatch > 1 && batch_folds(p, er.in0, er.in1, er.out)) {
        er.units *= er.nbatch;
        er.nbatch = 1;
    }
    choose_blocks(&er);
    int64_t nblocks = er.nbatch * er.blocks_per_matrix;
    if (nblocks == 1) { /* one call: the product (cut by the device as it likes), then the group */
        if (run_product_block(&er, 0, 0, er.units) < 0)
            er.failed = 1;
        else
            group_all(&er.gr);
    } else {
        td_parallel_for(nblocks, 1, epilogue_range, &er);
        if (!__atomic_load_n(&er.failed, __ATOMIC_RELAXED) &&
            !__atomic_load_n(&er.gr.failed, __ATOMIC_RELAXED))
            straddling_tiles(&er);
    }
    if (__atomic_load_n(&er.gr.failed, __ATOMIC_RELAXED))
        return scratch_error(g);
    if (__atomic_load_n(&er.failed, __ATOMIC_RELAXED)) {
        char shape[96];
        return td_error("jit: the %s %s fused with its epilogue failed", tide_op_name(p->op),
                        td_shape_str(shape, sizeof shape, p->ndim, p->shape));
    }
    return 0;
}

/* A group on a device that runs groups itself (Vulkan): the tensor of each slot. */
static int run_group_device(exec_ctx *x, tide_tensor *arena, const jit_group *g)
{
    tide_tensor *tbuf[32];
    tide_tensor **t = g->nslots <= 32 ? tbuf : td_calloc((size_t)g->nslots, sizeof *t);
    if (!t)
        return td_error("jit: out of memory");
    int rc = 0;
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
    if (rc == 0)
        rc = x->c->device->jit_run(x->c->device, x->c, g, t);
    if (t != tbuf)
        free(t);
    return rc;
}

static int run_group(exec_ctx *x, tide_tensor *arena, const jit_group *g)
{
    const jit_compiled *c = x->c;
    if (c->device->jit_run)
        return run_group_device(x, arena, g);
    void *argbuf[65];
    jit_gather gbuf[32];
    /* args[nargs]: the domain's element count, a runtime value of the generated code */
    void **args = g->nargs < 64 ? argbuf : td_malloc(sizeof(void *) * (size_t)(g->nargs + 1));
    int ngathers = 0;
    for (int s = 0; s < g->nslots; s++)
        ngathers += !g->slots[s].member && !g->slots[s].direct && g->slots[s].vkind != JV_SCALAR;
    jit_gather *gathers = ngathers <= 32 ? gbuf : td_malloc(sizeof *gathers * (size_t)ngathers);
    if (!args || !gathers) {
        if (args != argbuf)
            free(args);
        if (gathers != gbuf)
            free(gathers);
        return td_error("jit: out of memory");
    }
    int gi = 0, rc = 0;
    if (g->producer >= 0) { /* its result first: the group reads it in place */
        x->vals[g->producer] = alloc_node(x, arena, g->producer);
        rc = x->vals[g->producer] ? 0 : -1;
    }
    for (int s = 0; s < g->nslots && rc == 0; s++) {
        const jit_slot *sl = &g->slots[s];
        if (sl->member && sl->into >= 0) { /* a fused write-back into its destination */
            tide_tensor *dst = value(x, sl->into);
            args[sl->arg] = td_tensor_data(dst);
            if (dst->storage)
                __atomic_add_fetch(&dst->storage->version, 1, __ATOMIC_RELAXED);
            continue;
        }
        if (sl->member) {
            if (!sl->output)
                continue;
            tide_tensor *t = alloc_node(x, arena, sl->node);
            if (!t) {
                rc = -1;
                break;
            }
            x->vals[sl->node] = t;
            args[sl->arg] = td_tensor_data(t);
            continue;
        }
        tide_tensor *t = value(x, sl->node);
        if (sl->vkind == JV_SCALAR || sl->direct) {
            args[sl->arg] = td_tensor_data(t);
            continue;
        }
        jit_gather *d = &gathers[gi++];
        d->es = sl->es;
        d->base = td_tensor_data(t);
        if (sl->vkind == JV_FULL) {
            d->ndim = g->ndim;
            memcpy(d->shape, g->domain, sizeof(int64_t) * g->ndim);
        } else { /* the rows: the domain's leading dims */
            d->ndim = g->ndim - g->nred;
            memcpy(d->shape, g->domain, sizeof(int64_t) * d->ndim);
        }
        /* t broadcast to the domain (its dims align at the right) */
        int lead = g->ndim - t->ndim;
        for (int k = 0; k < d->ndim; k++) {
            int td = k - lead;
            d->strides[k] = td < 0 || t->shape[td] == 1 ? 0 : t->strides[td];
        }
        args[sl->arg] = d;
    }
    args[g->nargs] = (void *)&g->numel;
    if (rc == 0 && g->producer >= 0) {
        rc = run_epilogue(x, g, args);
    } else if (rc == 0) {
        group_run gr = {c, g, args, 0};
        group_all(&gr);
        if (__atomic_load_n(&gr.failed, __ATOMIC_RELAXED))
            rc = scratch_error(g);
    }
    if (args != argbuf)
        free(args);
    if (gathers != gbuf)
        free(gathers);
    return rc;
}

int jit_execute(const jit_compiled *c, tide_tensor *const *ext, const jit_node *rt_nodes,
                tide_tensor **out_values)
{
    exec_ctx x = {c, ext, td_calloc((size_t)(c->nnodes ? c->nnodes : 1), sizeof(tide_tensor *))};
    if (!x.vals)
        return td_error("jit: out of memory");
    tide_device *dev = c->device;
    tide_tensor *arena = NULL;
    int rc = -1;
    if (c->arena_bytes > 0) {
        int64_t nb = c->arena_bytes;
        arena = td_tensor_new("jit arena", dev, 1, &nb, TIDE_UINT8);
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
        const jit_node *nd = &c->nodes[st->node];
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
            if (td_numel(nd->ndim, nd->shape) > 0 &&
                dev->run(dev, (tide_op)nd->op, out, in, nd->nin, attrs) < 0)
                goto done;
        } else { /* JS_INPLACE */
            tide_tensor *dst = in[0];
            if (td_numel(dst->ndim, dst->shape) > 0 &&
                dev->run(dev, (tide_op)nd->op, dst, in + 1, nd->nin - 1, &nd->attrs) < 0)
                goto done;
            if (dst->storage)
                dst->storage->version++;
        }
    }
    for (int k = 0; k < c->noutputs; k++) {
        tide_tensor *v = value(&x, c->outputs[k]);
        if (v && c->nodes[c->outputs[k]].kind == JN_CONST) /* a fresh copy per run */
            v = NULL;
        out_values[k] = tide_retain(v);
    }
    rc = 0;
done:
    for (int i = 0; i < c->nnodes; i++)
        tide_release(x.vals[i]);
    free(x.vals);
    tide_release(arena);
    return rc;
}
