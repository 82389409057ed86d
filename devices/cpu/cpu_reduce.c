/*
 * cpu_reduce.c — sum/prod/max/min over dims and argmax/argmin along one dim on the CPU.
 *
 * This file decides how to walk the input; the inner loops live in cpu_reduce_isa.c, one
 * table per vector ISA. A reduction is planned in three steps:
 *  1. Drop size-1 dims, make reduced strides positive (only the order of a sum's terms changes)
 *     and sort the reduced dims by stride, then merge dims that are contiguous with each other.
 *  2. Pick a shape of loop:
 *     - per output: the innermost reduced dim is a contiguous (or strided) run handed to a run
 *       kernel; runs of the outer reduced dims are combined in a wide accumulator. With one run
 *       per output, a multi kernel takes a batch of outputs per call (short rows);
 *     - rows: a kept dim has stride 1, so whole rows of outputs are reduced at once into an
 *       accumulator row, vectorized across that dim (narrow packed rows are summed as one flat
 *       array, see cpu_reduce_isa.c).
 *  3. Split the work over threads. Outputs (or column tiles) are independent; when there are
 *     few outputs and much to reduce, each output's reduction is cut into fixed-size pieces
 *     whose partial results are combined in piece order. Piece sizes depend on the shape only,
 *     so a result never depends on the number of threads.
 * Small inputs skip threading and never allocate.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu_kernels.h"
#include "cpu_reduce.h"

/* Below this many input bytes a reduction runs on the calling thread: waking the pool costs
 * more than it saves. */
#define PAR_BYTES (256 * 1024)
/* The least work one thread is given, in input bytes. */
#define GRAIN_BYTES (128 * 1024)
/* Size of one piece of a split reduction: at least PIECE_BYTES, so that a piece's overhead is
 * noise and 2 threads balance on a few MB; up to 4x that on large inputs (about 64 pieces),
 * where each thread then streams longer stretches before jumping to its next piece. */
#define PIECE_BYTES (256 * 1024)
/* At most this many partials for a split reduction (they live on the stack). */
#define MAX_PIECES 1024
/* Fewer outputs than this, each with at least two pieces of work, are split into pieces. */
#define FEW_OUTPUTS 16
/* Row-split reductions keep at most this many partial rows per column tile (a temporary from
 * the caching allocator), each covering at least MIN_PIECE_ROWS rows so that combining the
 * partial rows, serially at the end, stays small next to reading the input. */
#define MAX_ROW_PIECES 64
#define MIN_PIECE_ROWS 256
/* Outputs per multi-kernel call (their wide results sit on the stack). */
#define MULTI_BATCH 256

typedef enum acc_kind { ACC_FLOAT, ACC_UINT, ACC_INT } acc_kind;

typedef struct red_dim {
    int64_t size, xs, os; /* size, input stride, output stride (elements) */
} red_dim;

/* A walk over some dims: the multi-index and the offsets it gives into input and output. */
typedef struct dim_iter {
    const red_dim *dims;
    int n;
    int64_t idx[TIDE_MAX_DIMS];
    int64_t xoff, ooff;
} dim_iter;

typedef struct red_plan {
    const td_red_kernels *k;
    int rop; /* TD_RED_SUM.. */
    acc_kind kind;
    tide_dtype odt;
    size_t xes, oes; /* element sizes */
    const char *x;   /* input base, moved to the lowest address of every flipped reduced dim */
    char *out;
    td_red_run_fn run;
    td_red_multi_fn multi;
    td_red_rows_fn rows;
    /* kept dims, outer to inner; in the rows shape, without the column dim */
    int nkept;
    red_dim kept[TIDE_MAX_DIMS];
    /* reduced dims other than the innermost, outer to inner, and the innermost run */
    int nouter;
    red_dim outer[TIDE_MAX_DIMS];
    int64_t n_in, s_in;
    int64_t len; /* elements (or rows) reduced per output: product of all reduced sizes */
    /* rows shape: the stride-1 kept dim */
    int64_t ncols, os_col, ntiles, tile_w;
    /* split reductions */
    int64_t piece, npieces;
    td_red_acc *partials;
} red_plan;

/* ---- small helpers ----------------------------------------------------------------------- */

const td_red_kernels *td_red_kernels_current(void)
{
    static const td_red_kernels *const tables[] = {&td_red_kernels_baseline,
                                                   &td_red_kernels_avx2, &td_red_kernels_avx512};
    return tables[td_cpu_isa()];
}

static bool dtype_is_float(tide_dtype dt) { return dt == TIDE_FLOAT32 || dt == TIDE_FLOAT64; }

static int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }
static int64_t max64(int64_t a, int64_t b) { return a > b ? a : b; }
/* a*b, or INT64_MAX when that overflows: an expanded view can hold 2^62 elements, and the
 * byte counts below only choose a work split. */
static int64_t sat_mul(int64_t a, int64_t b)
{
    int64_t r;
    return __builtin_mul_overflow(a, b, &r) ? INT64_MAX : r;
}
static int64_t min64(int64_t a, int64_t b) { return a < b ? a : b; }

static td_red_acc acc_identity(int rop, acc_kind kind)
{
    td_red_acc a;
    switch (rop) {
    case TD_RED_SUM:
        if (kind == ACC_FLOAT)
            a.f = 0.0;
        else
            a.u = 0;
        break;
    case TD_RED_PROD:
        if (kind == ACC_FLOAT)
            a.f = 1.0;
        else
            a.u = 1;
        break;
    case TD_RED_MAX:
        if (kind == ACC_FLOAT)
            a.f = -INFINITY;
        else
            a.i = INT64_MIN;
        break;
    default:
        if (kind == ACC_FLOAT)
            a.f = INFINITY;
        else
            a.i = INT64_MAX;
        break;
    }
    return a;
}

/* Combines two partial results; a NaN on either side survives max and min. */
static td_red_acc acc_combine(int rop, acc_kind kind, td_red_acc a, td_red_acc b)
{
    td_red_acc r;
    if (kind == ACC_FLOAT) {
        switch (rop) {
        case TD_RED_SUM: r.f = a.f + b.f; break;
        case TD_RED_PROD: r.f = a.f * b.f; break;
        case TD_RED_MAX: r.f = (isnan(a.f) || a.f >= b.f) ? a.f : b.f; break;
        default: r.f = (isnan(a.f) || a.f <= b.f) ? a.f : b.f; break;
        }
    } else {
        switch (rop) {
        case TD_RED_SUM: r.u = a.u + b.u; break; /* uint64: wraps like the int64 result must */
        case TD_RED_PROD: r.u = a.u * b.u; break;
        case TD_RED_MAX: r.i = a.i >= b.i ? a.i : b.i; break;
        default: r.i = a.i <= b.i ? a.i : b.i; break;
        }
    }
    return r;
}

/* Writes a wide result as the output dtype. */
static void acc_store(tide_dtype odt, void *dst, td_red_acc a)
{
    switch (odt) {
    case TIDE_FLOAT32: *(float *)dst = (float)a.f; break;
    case TIDE_FLOAT64: *(double *)dst = a.f; break;
    case TIDE_INT32: *(int32_t *)dst = (int32_t)a.i; break;
    case TIDE_INT64: *(int64_t *)dst = a.i; break;
    default: *(uint8_t *)dst = (uint8_t)a.i; break; /* uint8, bool */
    }
}

static void iter_seek(dim_iter *it, const red_dim *dims, int n, int64_t lin)
{
    it->dims = dims;
    it->n = n;
    it->xoff = it->ooff = 0;
    for (int d = n - 1; d >= 0; d--) {
        it->idx[d] = lin % dims[d].size;
        lin /= dims[d].size;
        it->xoff += it->idx[d] * dims[d].xs;
        it->ooff += it->idx[d] * dims[d].os;
    }
}

static void iter_next(dim_iter *it)
{
    for (int d = it->n - 1; d >= 0; d--) {
        const red_dim *dd = &it->dims[d];
        it->xoff += dd->xs;
        it->ooff += dd->os;
        if (++it->idx[d] < dd->size)
            return;
        it->idx[d] = 0;
        it->xoff -= dd->size * dd->xs;
        it->ooff -= dd->size * dd->os;
    }
}

static int64_t dims_numel(const red_dim *dims, int n)
{
    int64_t p = 1;
    for (int d = 0; d < n; d++)
        p *= dims[d].size;
    return p;
}

/* Merges neighbours (outer a, inner b) that walk memory as one dim, in input and output. */
static int collapse_dims(red_dim *dims, int n)
{
    int m = 0;
    for (int d = 0; d < n; d++) {
        if (m > 0) {
            red_dim *a = &dims[m - 1];
            const red_dim *b = &dims[d];
            if (a->xs == b->xs * b->size && a->os == b->os * b->size) {
                a->size *= b->size;
                a->xs = b->xs;
                a->os = b->os;
                continue;
            }
        }
        dims[m++] = dims[d];
    }
    return m;
}

/* Reduced dims, largest stride first, so the innermost run is the densest one. */
static void sort_by_stride_desc(red_dim *dims, int n)
{
    for (int i = 1; i < n; i++) {
        red_dim v = dims[i];
        int j = i;
        for (; j > 0 && dims[j - 1].xs < v.xs; j--)
            dims[j] = dims[j - 1];
        dims[j] = v;
    }
}

/* ---- threads ----------------------------------------------------------------------------- */

/* Tasks are dealt into one contiguous slot per thread; each thread works through its own slot
 * first, then helps with what is left of the others. Owning a fixed stretch matters: on a
 * machine whose cores have separate caches, the same thread rereads the same part of an input
 * that fits in their sum, where a shared queue would scatter the parts differently each call.
 * Helping matters too: a worker that wakes late does not hold back the end. */
#define MAX_SLOTS 64

typedef struct claim_slot {
    int64_t next; /* atomic: the slot's next unclaimed task */
    int64_t end;
    char pad[64 - 2 * sizeof(int64_t)]; /* one cache line each: claims do not contend */
} claim_slot;

typedef struct claim_ctx {
    td_range_fn fn;
    void *ctx;
    int64_t step;
    int nslots;
    claim_slot slots[MAX_SLOTS];
} claim_ctx;

static void claim_loop(void *ctx, int64_t begin, int64_t end)
{
    claim_ctx *c = ctx;
    (void)end;
    for (int k = 0; k < c->nslots; k++) {
        claim_slot *sl = &c->slots[(begin + k) % c->nslots];
        int64_t t;
        while ((t = __atomic_fetch_add(&sl->next, c->step, __ATOMIC_RELAXED)) < sl->end)
            c->fn(c->ctx, t, min64(t + c->step, sl->end));
    }
}

/* Runs fn over tasks [0, ntasks), at most step at a time, on the pool. */
static void parallel_tasks(int64_t ntasks, int64_t step, td_range_fn fn, void *ctx)
{
    claim_ctx c;
    c.fn = fn;
    c.ctx = ctx;
    c.step = step;
    c.nslots = (int)min64(min64(td_num_threads(), MAX_SLOTS), ceil_div(ntasks, step));
    for (int k = 0; k < c.nslots; k++) {
        c.slots[k].next = ntasks * k / c.nslots;
        c.slots[k].end = ntasks * (k + 1) / c.nslots;
    }
    td_parallel_for(c.nslots, 1, claim_loop, &c);
}

/* ---- walking the reduced elements of one output ------------------------------------------ */

/* Reduces elements [a, b) of one output's reduction (runs laid end to end) starting at xb. */
static td_red_acc reduce_span(const red_plan *p, const char *xb, int64_t a, int64_t b)
{
    if (p->nouter == 0)
        return p->run(xb + a * p->s_in * (int64_t)p->xes, b - a, p->s_in);
    td_red_acc acc = acc_identity(p->rop, p->kind);
    dim_iter it;
    iter_seek(&it, p->outer, p->nouter, a / p->n_in);
    int64_t j = a % p->n_in;
    while (a < b) {
        int64_t n = min64(p->n_in - j, b - a);
        const char *src = xb + (it.xoff + j * p->s_in) * (int64_t)p->xes;
        acc = acc_combine(p->rop, p->kind, acc, p->run(src, n, p->s_in));
        a += n;
        j = 0;
        iter_next(&it);
    }
    return acc;
}

/* The same for the rows shape: rows [a, b) of the reduction into the accumulator row acc. */
static void rows_span(const red_plan *p, const char *xb, int64_t a, int64_t b, int64_t nc,
                      td_red_acc *acc)
{
    dim_iter it;
    iter_seek(&it, p->outer, p->nouter, a / p->n_in);
    int64_t j = a % p->n_in;
    while (a < b) {
        int64_t n = min64(p->n_in - j, b - a);
        p->rows(xb + (it.xoff + j * p->s_in) * (int64_t)p->xes, n, p->s_in, nc, acc);
        a += n;
        j = 0;
        iter_next(&it);
    }
}

/* ---- per-output shape -------------------------------------------------------------------- */

/* Writes n wide results as the output dtype, the switch outside the loop. */
static void store_batch(tide_dtype odt, void *dst, const td_red_acc *acc, int64_t n)
{
    switch (odt) {
    case TIDE_FLOAT32:
        for (int64_t k = 0; k < n; k++)
            ((float *)dst)[k] = (float)acc[k].f;
        break;
    case TIDE_FLOAT64:
        for (int64_t k = 0; k < n; k++)
            ((double *)dst)[k] = acc[k].f;
        break;
    default:
        for (int64_t k = 0; k < n; k++)
            acc_store(odt, (char *)dst + k * (int64_t)td_dtype_sizes[odt], acc[k]);
        break;
    }
}

/* One run per output: the innermost kept dim is handed to the multi kernel in batches. */
static void outputs_range_multi(const red_plan *p, int64_t begin, int64_t end)
{
    const red_dim *in = &p->kept[p->nkept - 1];
    td_red_acc buf[MULTI_BATCH];
    for (int64_t o = begin; o < end;) {
        dim_iter it;
        iter_seek(&it, p->kept, p->nkept - 1, o / in->size);
        int64_t i = o % in->size, cnt = min64(min64(in->size - i, end - o), MULTI_BATCH);
        p->multi(p->x + (it.xoff + i * in->xs) * (int64_t)p->xes, p->n_in, p->s_in, cnt, in->xs,
                 buf);
        store_batch(p->odt, p->out + o * (int64_t)p->oes, buf, cnt); /* out is contiguous */
        o += cnt;
    }
}

static void outputs_range(void *ctx, int64_t begin, int64_t end)
{
    const red_plan *p = ctx;
    if (p->nouter == 0 && p->nkept > 0) {
        outputs_range_multi(p, begin, end);
        return;
    }
    dim_iter it;
    iter_seek(&it, p->kept, p->nkept, begin);
    for (int64_t o = begin; o < end; o++) {
        td_red_acc acc = reduce_span(p, p->x + it.xoff * (int64_t)p->xes, 0, p->len);
        acc_store(p->odt, p->out + it.ooff * (int64_t)p->oes, acc);
        iter_next(&it);
    }
}

/* Task t is piece t % npieces of output t / npieces. */
static void pieces_range(void *ctx, int64_t begin, int64_t end)
{
    const red_plan *p = ctx;
    for (int64_t t = begin; t < end; t++) {
        dim_iter it;
        iter_seek(&it, p->kept, p->nkept, t / p->npieces);
        int64_t a = (t % p->npieces) * p->piece;
        p->partials[t] = reduce_span(p, p->x + it.xoff * (int64_t)p->xes, a,
                                     min64(a + p->piece, p->len));
    }
}

static int64_t piece_bytes(int64_t bytes_per_out)
{
    return min64(max64(bytes_per_out / 64, PIECE_BYTES), 4 * PIECE_BYTES);
}

/* Picks a piece size (a multiple of the base size) so that nout outputs need at most
 * max_pieces partials in all. */
static void choose_pieces(red_plan *p, int64_t nout, int64_t base, int64_t max_pieces)
{
    p->piece = max64(base, 1);
    while (nout * ceil_div(p->len, p->piece) > max_pieces)
        p->piece *= 2;
    p->npieces = ceil_div(p->len, p->piece);
}

static void run_per_output(red_plan *p)
{
    int64_t nout = dims_numel(p->kept, p->nkept);
    int64_t bytes_per_out = sat_mul(p->len, (int64_t)p->xes);
    if (sat_mul(nout, bytes_per_out) < PAR_BYTES) {
        outputs_range(p, 0, nout);
        return;
    }
    if (nout < FEW_OUTPUTS && bytes_per_out >= 2 * PIECE_BYTES) {
        td_red_acc partials[MAX_PIECES];
        choose_pieces(p, nout, piece_bytes(bytes_per_out) / (int64_t)p->xes, MAX_PIECES);
        p->partials = partials;
        parallel_tasks(nout * p->npieces, 1, pieces_range, p);
        for (int64_t o = 0; o < nout; o++) {
            td_red_acc acc = partials[o * p->npieces];
            for (int64_t k = 1; k < p->npieces; k++)
                acc = acc_combine(p->rop, p->kind, acc, partials[o * p->npieces + k]);
            acc_store(p->odt, p->out + o * (int64_t)p->oes, acc);
        }
        return;
    }
    parallel_tasks(nout, max64(1, GRAIN_BYTES / max64(bytes_per_out, 1)), outputs_range, p);
}

/* ---- rows shape -------------------------------------------------------------------------- */

/* Item i is column tile i % ntiles of outer kept index i / ntiles. */
static void item_origin(const red_plan *p, int64_t item, const char **xb, int64_t *ooff,
                        int64_t *nc)
{
    dim_iter it;
    iter_seek(&it, p->kept, p->nkept, item / p->ntiles);
    int64_t col = (item % p->ntiles) * TD_RED_TILE;
    *xb = p->x + (it.xoff + col) * (int64_t)p->xes;
    *ooff = it.ooff + col * p->os_col;
    *nc = min64(TD_RED_TILE, p->ncols - col);
}

static void fill_identity(const red_plan *p, td_red_acc *acc, int64_t n)
{
    td_red_acc id = acc_identity(p->rop, p->kind);
    for (int64_t j = 0; j < n; j++)
        acc[j] = id;
}

static void store_row(const red_plan *p, int64_t ooff, const td_red_acc *acc, int64_t nc)
{
    for (int64_t j = 0; j < nc; j++)
        acc_store(p->odt, p->out + (ooff + j * p->os_col) * (int64_t)p->oes, acc[j]);
}

static void items_range(void *ctx, int64_t begin, int64_t end)
{
    const red_plan *p = ctx;
    td_red_acc acc[TD_RED_TILE];
    for (int64_t item = begin; item < end; item++) {
        const char *xb;
        int64_t ooff, nc;
        item_origin(p, item, &xb, &ooff, &nc);
        fill_identity(p, acc, nc);
        rows_span(p, xb, 0, p->len, nc, acc);
        store_row(p, ooff, acc, nc);
    }
}

/* Task t is row piece t % npieces of item t / npieces; its partial row is at t * tile_w. */
static void row_pieces_range(void *ctx, int64_t begin, int64_t end)
{
    const red_plan *p = ctx;
    for (int64_t t = begin; t < end; t++) {
        const char *xb;
        int64_t ooff, nc;
        item_origin(p, t / p->npieces, &xb, &ooff, &nc);
        td_red_acc *acc = p->partials + t * p->tile_w;
        int64_t a = (t % p->npieces) * p->piece;
        fill_identity(p, acc, nc);
        rows_span(p, xb, a, min64(a + p->piece, p->len), nc, acc);
    }
}

/* acc[j] = acc[j] op src[j]: acc_combine with the switch outside the loop, so it vectorizes. */
static void combine_row(int rop, acc_kind kind, td_red_acc *restrict acc,
                        const td_red_acc *restrict src, int64_t n)
{
    if (kind == ACC_FLOAT) {
        switch (rop) {
        case TD_RED_SUM:
            for (int64_t j = 0; j < n; j++)
                acc[j].f += src[j].f;
            break;
        case TD_RED_PROD:
            for (int64_t j = 0; j < n; j++)
                acc[j].f *= src[j].f;
            break;
        case TD_RED_MAX:
            for (int64_t j = 0; j < n; j++)
                acc[j].f = (acc[j].f >= src[j].f) | (acc[j].f != acc[j].f) ? acc[j].f : src[j].f;
            break;
        default:
            for (int64_t j = 0; j < n; j++)
                acc[j].f = (acc[j].f <= src[j].f) | (acc[j].f != acc[j].f) ? acc[j].f : src[j].f;
            break;
        }
        return;
    }
    for (int64_t j = 0; j < n; j++)
        acc[j] = acc_combine(rop, kind, acc[j], src[j]);
}

static int run_row_pieces(red_plan *p, int64_t items, int64_t row_bytes)
{
    int64_t base = max64(ceil_div(PIECE_BYTES, row_bytes), MIN_PIECE_ROWS);
    choose_pieces(p, items, base, items * MAX_ROW_PIECES);
    p->tile_w = min64(p->ncols, TD_RED_TILE);
    size_t nbytes = (size_t)(items * p->npieces * p->tile_w) * sizeof(td_red_acc);
    p->partials = td_cache_alloc(nbytes); /* cached: a fresh mapping would fault per page */
    if (!p->partials)
        return td_error("reduction: out of memory for a temporary of %zu bytes", nbytes);
    parallel_tasks(items * p->npieces, 1, row_pieces_range, p);
    for (int64_t item = 0; item < items; item++) {
        const char *xb;
        int64_t ooff, nc;
        item_origin(p, item, &xb, &ooff, &nc);
        td_red_acc *acc = p->partials + item * p->npieces * p->tile_w;
        for (int64_t k = 1; k < p->npieces; k++)
            combine_row(p->rop, p->kind, acc, acc + k * p->tile_w, nc);
        store_row(p, ooff, acc, nc);
    }
    td_cache_free(p->partials, nbytes);
    return 0;
}

static int run_rows(red_plan *p)
{
    p->ntiles = ceil_div(p->ncols, TD_RED_TILE);
    int64_t items = dims_numel(p->kept, p->nkept) * p->ntiles;
    int64_t row_bytes = min64(p->ncols, TD_RED_TILE) * (int64_t)p->xes;
    int64_t bytes_per_item = p->len * row_bytes;
    if (items * bytes_per_item < PAR_BYTES) {
        items_range(p, 0, items);
        return 0;
    }
    if (items < FEW_OUTPUTS && bytes_per_item >= 2 * PIECE_BYTES)
        return run_row_pieces(p, items, row_bytes);
    parallel_tasks(items, max64(1, GRAIN_BYTES / max64(bytes_per_item, 1)), items_range, p);
    return 0;
}

/* ---- planning ---------------------------------------------------------------------------- */

static int reduce_op_index(tide_op op)
{
    switch (op) {
    case TIDE_OP_SUM: return TD_RED_SUM;
    case TIDE_OP_PROD: return TD_RED_PROD;
    case TIDE_OP_MAX: return TD_RED_MAX;
    default: return TD_RED_MIN;
    }
}

/* Contiguous strides of out's shape (out->strides may say anything on size-1 dims). */
static void out_strides(const tide_tensor *out, int64_t *os)
{
    int64_t s = 1;
    for (int d = out->ndim - 1; d >= 0; d--) {
        os[d] = s;
        s *= out->shape[d];
    }
}

/* Fills the kept and reduced dims of p from x; returns the number of reduced dims. */
static int split_dims(red_plan *p, const tide_tensor *x, const bool *reduced, const int64_t *os,
                      red_dim *red)
{
    int nred = 0;
    p->nkept = 0;
    for (int d = 0; d < x->ndim; d++) {
        int64_t size = x->shape[d], xs = x->strides[d];
        if (size == 1)
            continue;
        if (!reduced[d]) {
            p->kept[p->nkept++] = (red_dim){size, xs, os[d]};
            continue;
        }
        /* Max and min of a repeated element is that element. */
        if (xs == 0 && (p->rop == TD_RED_MAX || p->rop == TD_RED_MIN))
            continue;
        if (xs < 0) { /* reduce the flipped dim forwards: only the order of terms changes */
            p->x += xs * (size - 1) * (int64_t)p->xes;
            xs = -xs;
        }
        red[nred++] = (red_dim){size, xs, 0};
    }
    p->nkept = collapse_dims(p->kept, p->nkept);
    sort_by_stride_desc(red, nred);
    return collapse_dims(red, nred);
}

/* Takes the (innermost) kept dim of input stride 1 out of dims as the column dim of the rows
 * shape: its size and output stride. False when there is none. */
static bool take_column_dim(red_dim *dims, int *n, int64_t *ncols, int64_t *os_col)
{
    for (int d = *n - 1; d >= 0; d--) {
        if (dims[d].xs != 1)
            continue;
        *ncols = dims[d].size;
        *os_col = dims[d].os;
        memmove(&dims[d], &dims[d + 1], (size_t)(*n - d - 1) * sizeof(red_dim));
        (*n)--;
        return true;
    }
    return false;
}

static void fill_empty(const red_plan *p, int64_t nout)
{
    td_red_acc id = acc_identity(p->rop, p->kind);
    for (int64_t o = 0; o < nout; o++)
        acc_store(p->odt, p->out + o * (int64_t)p->oes, id);
}

int td_cpu_reduce(tide_op op, tide_tensor *out, const tide_tensor *x, const int64_t *dims,
                  int ndims)
{
    red_plan p;
    p.k = td_red_kernels_current();
    p.rop = reduce_op_index(op);
    tide_dtype xdt = (tide_dtype)x->dtype;
    p.odt = (tide_dtype)out->dtype;
    p.kind = dtype_is_float(xdt) ? ACC_FLOAT
             : (p.rop == TD_RED_SUM || p.rop == TD_RED_PROD) ? ACC_UINT
                                                               : ACC_INT;
    p.xes = td_dtype_sizes[xdt];
    p.oes = td_dtype_sizes[p.odt];
    p.x = td_tensor_data(x);
    p.out = td_tensor_data(out);
    p.run = p.k->run[p.rop][xdt];
    p.multi = p.k->multi[p.rop][xdt];
    p.rows = p.k->rows[p.rop][xdt];

    bool reduced[TIDE_MAX_DIMS] = {false};
    int64_t nred_elems = 1, os[TIDE_MAX_DIMS];
    for (int i = 0; i < ndims; i++) {
        reduced[dims[i]] = true;
        nred_elems *= x->shape[dims[i]];
    }
    int64_t nout = td_numel(out->ndim, out->shape);
    if (nout == 0)
        return 0;
    if (nred_elems == 0) {
        fill_empty(&p, nout);
        return 0;
    }
    out_strides(out, os);

    red_dim red[TIDE_MAX_DIMS];
    int nred = split_dims(&p, x, reduced, os, red);
    p.n_in = nred ? red[nred - 1].size : 1;
    p.s_in = nred ? red[nred - 1].xs : 0;
    p.nouter = nred ? nred - 1 : 0;
    memcpy(p.outer, red, (size_t)p.nouter * sizeof(red_dim));
    p.len = p.n_in * dims_numel(p.outer, p.nouter);

    if (!(nred && p.s_in == 1) && take_column_dim(p.kept, &p.nkept, &p.ncols, &p.os_col))
        return run_rows(&p);
    run_per_output(&p);
    return 0;
}

/* ---- argmax / argmin --------------------------------------------------------------------- */

typedef struct arg_plan {
    td_arg_run_fn run;
    td_arg_rows_fn rows;
    size_t xes;
    const char *x;
    int64_t *out;
    int nkept;
    red_dim kept[TIDE_MAX_DIMS];
    int64_t n, s; /* the reduced dim */
    int64_t ncols, os_col, ntiles;
    int64_t piece, npieces;
    int64_t *cand; /* split runs: each piece's first extreme, as a position in the run */
} arg_plan;

static void arg_outputs_range(void *ctx, int64_t begin, int64_t end)
{
    const arg_plan *p = ctx;
    dim_iter it;
    iter_seek(&it, p->kept, p->nkept, begin);
    for (int64_t o = begin; o < end; o++) {
        p->out[it.ooff] = p->run(p->x + it.xoff * (int64_t)p->xes, p->n, p->s);
        iter_next(&it);
    }
}

static void arg_pieces_range(void *ctx, int64_t begin, int64_t end)
{
    const arg_plan *p = ctx;
    for (int64_t t = begin; t < end; t++) {
        dim_iter it;
        iter_seek(&it, p->kept, p->nkept, t / p->npieces);
        int64_t a = (t % p->npieces) * p->piece, n = min64(p->piece, p->n - a);
        const char *src = p->x + (it.xoff + a * p->s) * (int64_t)p->xes;
        p->cand[t] = a + p->run(src, n, p->s);
    }
}

/* Each piece found its first extreme; the winner is the first extreme among those values,
 * which the run kernel itself finds once they are gathered side by side. */
static void arg_pick_pieces(const arg_plan *p, int64_t nout)
{
    char vals[MAX_PIECES * sizeof(double)];
    for (int64_t o = 0; o < nout; o++) {
        dim_iter it;
        iter_seek(&it, p->kept, p->nkept, o);
        const int64_t *cand = p->cand + o * p->npieces;
        for (int64_t k = 0; k < p->npieces; k++)
            memcpy(vals + k * p->xes, p->x + (it.xoff + cand[k] * p->s) * (int64_t)p->xes,
                   p->xes);
        p->out[it.ooff] = cand[p->run(vals, p->npieces, 1)];
    }
}

static void arg_per_output(arg_plan *p)
{
    int64_t nout = dims_numel(p->kept, p->nkept);
    int64_t bytes_per_out = sat_mul(p->n, (int64_t)p->xes);
    if (sat_mul(nout, bytes_per_out) < PAR_BYTES) {
        arg_outputs_range(p, 0, nout);
        return;
    }
    if (nout < FEW_OUTPUTS && bytes_per_out >= 2 * PIECE_BYTES) {
        int64_t cand[MAX_PIECES];
        p->piece = piece_bytes(bytes_per_out) / (int64_t)p->xes;
        while (nout * ceil_div(p->n, p->piece) > MAX_PIECES)
            p->piece *= 2;
        p->npieces = ceil_div(p->n, p->piece);
        p->cand = cand;
        parallel_tasks(nout * p->npieces, 1, arg_pieces_range, p);
        arg_pick_pieces(p, nout);
        return;
    }
    parallel_tasks(nout, max64(1, GRAIN_BYTES / bytes_per_out), arg_outputs_range, p);
}

static void arg_items_range(void *ctx, int64_t begin, int64_t end)
{
    const arg_plan *p = ctx;
    for (int64_t item = begin; item < end; item++) {
        dim_iter it;
        iter_seek(&it, p->kept, p->nkept, item / p->ntiles);
        int64_t col = (item % p->ntiles) * TD_RED_TILE;
        p->rows(p->x + (it.xoff + col) * (int64_t)p->xes, p->n, p->s,
                min64(TD_RED_TILE, p->ncols - col), p->out + it.ooff + col * p->os_col,
                p->os_col);
    }
}

static void arg_rows(arg_plan *p)
{
    p->ntiles = ceil_div(p->ncols, TD_RED_TILE);
    int64_t items = dims_numel(p->kept, p->nkept) * p->ntiles;
    int64_t bytes_per_item = p->n * min64(p->ncols, TD_RED_TILE) * (int64_t)p->xes;
    if (items * bytes_per_item < PAR_BYTES)
        arg_items_range(p, 0, items);
    else
        parallel_tasks(items, max64(1, GRAIN_BYTES / bytes_per_item), arg_items_range, p);
}

int td_cpu_argreduce(tide_op op, tide_tensor *out, const tide_tensor *x, int dim)
{
    int aop = op == TIDE_OP_ARGMAX ? TD_ARG_MAX : TD_ARG_MIN;
    tide_dtype xdt = (tide_dtype)x->dtype;
    const td_red_kernels *k = td_red_kernels_current();
    arg_plan p;
    p.run = k->arg_run[aop][xdt];
    p.rows = k->arg_rows[aop][xdt];
    p.xes = td_dtype_sizes[xdt];
    p.x = td_tensor_data(x);
    p.out = td_tensor_data(out);
    p.n = x->shape[dim];
    p.s = x->strides[dim];

    int64_t nout = td_numel(out->ndim, out->shape), os[TIDE_MAX_DIMS];
    if (nout == 0)
        return 0;
    if (p.n == 1) { /* nothing to compare: also keeps the kernels' n >= 1 */
        memset(p.out, 0, (size_t)nout * sizeof(int64_t));
        return 0;
    }
    out_strides(out, os);
    p.nkept = 0;
    for (int d = 0; d < x->ndim; d++)
        if (d != dim && x->shape[d] != 1)
            p.kept[p.nkept++] = (red_dim){x->shape[d], x->strides[d], os[d]};
    p.nkept = collapse_dims(p.kept, p.nkept);

    /* The order of a run matters here (the first extreme wins), so strides keep their sign. */
    if (p.s != 1 && take_column_dim(p.kept, &p.nkept, &p.ncols, &p.os_col)) {
        arg_rows(&p);
        return 0;
    }
    arg_per_output(&p);
    return 0;
}
