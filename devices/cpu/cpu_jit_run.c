/*
 * cpu_jit_run.c — runs a fusion group on the CPU (jit/group.h): each slot's tensor becomes an
 * argument of the generated code (its data, or a gather descriptor for an operand read
 * through strides), and the group's rows or tiles are split over the thread pool. A group that
 * is a matmul's epilogue runs block by block after the product's BLAS calls.
 */
#include <stdlib.h>
#include <string.h>

#include "cpu_jit.h"
#include "cpu_kernels.h"

typedef struct group_run {
    const jit_plan *c;
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
    int failed; /* atomic: the tide_status of a failed block (its thread's code), 0 while none */
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
    /* one matrix of several rows is one gemm in eager, cut by rows: a block of one row is a
     * gemm then (a product of one row alone is a gemv); a batch's blocks are eager's calls */
    bool gemm_rows = er->nbatch == 1 && er->units > 1 && er->unit_elems > 1;
    int rc = in[0] && in[1] && out
                 ? td_cpu_matmul_rows_of(out, in[0], in[1], gemm_rows, er->units)
                 : -1;
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

/* The code of a block that failed on this thread (never TIDE_OK, which reads as no failure). */
static int block_failure(void)
{
    int code = tide_last_error_code();
    return code != TIDE_OK ? code : TIDE_ERR_INTERNAL;
}

/* Blocks [begin, end): one product call each, then the group over it. */
static void epilogue_range(void *ctx, int64_t begin, int64_t end)
{
    epilogue_run *er = ctx;
    for (int64_t b = begin; b < end; b++) {
        int64_t batch, u0, u1;
        block_rows(er, b, &batch, &u0, &u1);
        if (run_product_block(er, batch, u0, u1) < 0) {
            __atomic_store_n(&er->failed, block_failure(), __ATOMIC_RELAXED);
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

/* A conv2d's epilogue: inside the convolution's stores where the device can (cpu_jit_conv.c),
 * else the convolution whole, as eager runs it, and then the group over its result. */
static int run_conv_epilogue(const jit_plan *c, const jit_group *g, void **args,
                             tide_tensor *const *t)
{
    int rc = td_cpu_jit_conv_fused(c, g, t);
    if (rc != 0)
        return rc < 0 ? -1 : 0;
    if (td_cpu_conv2d(t[g->nslots], t[g->nslots + 1], t[g->nslots + 2],
                      c->nodes[g->producer].attrs.ints) < 0)
        return -1;
    group_run gr = {c, g, args, 0};
    group_all(&gr);
    return __atomic_load_n(&gr.failed, __ATOMIC_RELAXED) ? scratch_error(g) : 0;
}

/* t[nslots] is the product's result, t[nslots + 1] and t[nslots + 2] its operands. */
static int run_epilogue(const jit_plan *c, const jit_group *g, void **args, tide_tensor *const *t)
{
    const jit_node *p = &c->nodes[g->producer];
    if (p->op == TIDE_OP_CONV2D)
        return run_conv_epilogue(c, g, args, t);
    epilogue_run er = {{c, g, args, 0}, c->device, p, t[g->nslots + 1], t[g->nslots + 2],
                       t[g->nslots], 0, 0, 0, 0, 0, 0};
    jit_product_layout(p, &er.nbatch, &er.units, &er.unit_elems);
    if (er.nbatch > 1 && batch_folds(p, er.in0, er.in1, er.out)) {
        er.units *= er.nbatch;
        er.nbatch = 1;
    }
    choose_blocks(&er);
    int64_t nblocks = er.nbatch * er.blocks_per_matrix;
    if (nblocks == 1) { /* one call: the product (cut by the device as it likes), then the group */
        if (run_product_block(&er, 0, 0, er.units) < 0)
            er.failed = block_failure();
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
    int code = __atomic_load_n(&er.failed, __ATOMIC_RELAXED);
    if (code) { /* the message stays on the thread that failed; its code comes here */
        char shape[96];
        return td_error_code(code, "jit: the %s %s fused with its epilogue failed%s",
                             tide_op_name(p->op),
                             td_shape_str(shape, sizeof shape, p->ndim, p->shape),
                             code == TIDE_ERR_OUT_OF_MEMORY ? ": out of memory" : "");
    }
    return 0;
}

/* d's dims merged where one index runs over both (dim k-1 steps by dim k's whole extent, as
 * in a contiguous block or a broadcast over both): the gather's runs get longer, e.g. one splat
 * of a conv's bias over a whole [H, W] plane rather than one per row. */
static void merge_gather_dims(jit_gather *d)
{
    int nd = 0;
    for (int k = 0; k < d->ndim; k++) {
        if (nd > 0 && d->strides[nd - 1] == d->strides[k] * d->shape[k]) {
            d->shape[nd - 1] *= d->shape[k];
            d->strides[nd - 1] = d->strides[k];
            continue;
        }
        d->shape[nd] = d->shape[k];
        d->strides[nd++] = d->strides[k];
    }
    d->ndim = nd;
}

/* Slot s's argument: its data, or a gather descriptor (filled in d) for an operand read
 * through strides or broadcast. */
static void *slot_arg(const jit_group *g, const jit_slot *sl, tide_tensor *t, jit_gather *d)
{
    if (sl->member || sl->vkind == JV_SCALAR || td_cpu_slot_in_place(sl))
        return td_tensor_data(t);
    d->es = sl->es;
    d->base = td_tensor_data(t);
    /* FULL operands: the domain; ROW operands: the rows (the domain's leading dims) */
    d->ndim = sl->vkind == JV_FULL ? g->ndim : g->ndim - g->nred;
    memcpy(d->shape, g->domain, sizeof(int64_t) * (size_t)d->ndim);
    int lead = g->ndim - t->ndim; /* t broadcast to the domain (its dims align at the right) */
    for (int k = 0; k < d->ndim; k++) {
        int td = k - lead;
        d->strides[k] = td < 0 || t->shape[td] == 1 ? 0 : t->strides[td];
    }
    merge_gather_dims(d);
    return d;
}

/* A symbolic row group's scratch for the run's row length (group.h, step 4): g bound to the
 * run's sizes, its slots laid out again into the copy *out (slots: its own array), and the
 * layout as the generated code reads it (cpu_codegen.c: O[3 * slot + buffer]). 0 or -1. */
static int layout_rows(const jit_plan *c, const jit_group *g, jit_group *out, jit_slot **slots,
                       int64_t **offsets)
{
    *out = *g;
    *slots = td_malloc(sizeof **slots * (size_t)g->nslots);
    *offsets = td_malloc(sizeof **offsets * 3 * (size_t)g->nslots);
    if (!*slots || !*offsets)
        return td_error("jit: out of memory");
    for (int s = 0; s < g->nslots; s++) {
        (*slots)[s] = g->slots[s];
        (*slots)[s].scratch = (*slots)[s].splat = (*slots)[s].stream = -1;
    }
    out->slots = *slots;
    td_cpu_jit_layout(c, out);
    for (int s = 0; s < g->nslots; s++) {
        (*offsets)[3 * s] = out->slots[s].scratch;
        (*offsets)[3 * s + 1] = out->slots[s].splat;
        (*offsets)[3 * s + 2] = out->slots[s].stream;
    }
    return 0;
}

/* The arguments of the generated code: each slot's (its data, or a gather descriptor for an
 * operand read through strides), then the domain's element count, then for a symbolic row
 * group its row length and scratch layout. */
static void fill_args(const jit_group *g, tide_tensor *const *t, void **args, jit_gather *gathers,
                      const int64_t *offsets)
{
    for (int s = 0, gi = 0; s < g->nslots; s++) {
        const jit_slot *sl = &g->slots[s];
        if (sl->arg < 0)
            continue;
        bool gathered = !sl->member && !td_cpu_slot_in_place(sl) && sl->vkind != JV_SCALAR;
        args[sl->arg] = slot_arg(g, sl, t[s], gathered ? &gathers[gi++] : NULL);
    }
    args[g->nargs] = (void *)&g->numel;
    args[g->nargs + 1] = (void *)&g->rowlen;
    args[g->nargs + 2] = (void *)offsets;
}

int td_cpu_jit_run(tide_device *dev, const void *plan, const void *group, tide_tensor *const *t)
{
    (void)dev;
    const jit_plan *c = plan;
    const jit_group *g = group;
    void *argbuf[67];
    jit_gather gbuf[32];
    jit_group relaid;
    jit_slot *slots = NULL;
    int64_t *offsets = NULL;
    void **args = g->nargs < 64 ? argbuf : td_malloc(sizeof(void *) * (size_t)(g->nargs + 3));
    int ngathers = 0; /* operands read through strides: one descriptor each */
    for (int s = 0; s < g->nslots; s++)
        ngathers += !g->slots[s].member && !td_cpu_slot_in_place(&g->slots[s]) &&
                    g->slots[s].vkind != JV_SCALAR;
    jit_gather *gathers = ngathers <= 32 ? gbuf : td_malloc(sizeof *gathers * (size_t)ngathers);
    int rc = 0;
    if (!args || !gathers) {
        rc = td_error("jit: out of memory");
        goto done;
    }
    if (g->symbolic && g->row_mode) {
        if ((rc = layout_rows(c, g, &relaid, &slots, &offsets)) < 0)
            goto done;
        g = &relaid;
    }
    fill_args(g, t, args, gathers, offsets);
    if (g->producer >= 0) {
        rc = run_epilogue(c, g, args, t);
    } else {
        group_run gr = {c, g, args, 0};
        group_all(&gr);
        if (__atomic_load_n(&gr.failed, __ATOMIC_RELAXED))
            rc = scratch_error(g);
    }
done:
    if (args != argbuf)
        free(args);
    if (gathers != gbuf)
        free(gathers);
    free(slots);
    free(offsets);
    return rc;
}
