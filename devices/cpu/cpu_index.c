/*
 * cpu_index.c — gather, scatter_add and index_select on the CPU, for every dtype and any input
 * strides (0 for expanded dims, negative after a flip). Every index value is checked against its
 * bound before it is used to address memory.
 *
 * When a worker meets a bad index it stops and raises a flag; the error is then found again by a
 * serial scan in the index tensor's row-major order, so the message names the first bad index
 * whatever the thread count.
 *
 * scatter_add is deterministic: out positions that one index line (all coordinates but dim
 * fixed) can reach are reached by no other line, so lines run in parallel and each applies its
 * additions in index order. Lines are handled in blocks, walking the index along dim in the
 * outer loop, so that neighbouring lines touch neighbouring memory.
 */
#include <stdio.h>
#include <string.h>

#include "cpu_kernels.h"

/* The least bytes of output (or additions) one thread is given. */
#define GRAIN_BYTES (64 * 1024)
/* Lines of a scatter_add block: their offsets live on the stack. */
#define LINE_BLOCK 256

/* A tensor's shape and element strides, with a 0-dim tensor seen as [1]. */
typedef struct layout {
    int nd;
    int64_t shape[TIDE_MAX_DIMS], strides[TIDE_MAX_DIMS];
} layout;

static layout layout_of(const tide_tensor *t)
{
    layout l = {t->ndim > 0 ? t->ndim : 1, {1}, {0}};
    for (int d = 0; d < t->ndim; d++) {
        l.shape[d] = t->shape[d];
        l.strides[d] = t->strides[d];
    }
    return l;
}

static inline int64_t load_index(const char *base, bool is64, int64_t elem_off)
{
    return is64 ? ((const int64_t *)base)[elem_off] : ((const int32_t *)base)[elem_off];
}

static inline void copy_elem(char *dst, const char *src, size_t es)
{
    switch (es) {
    case 1: *dst = *src; break;
    case 4: memcpy(dst, src, 4); break;
    default: memcpy(dst, src, 8); break;
    }
}

/* Element offset of the row-major flat position f of shape in a tensor with strides; the
 * multi-index goes to idx when it is not NULL. */
static int64_t offset_of(const layout *l, int64_t f, int64_t *idx)
{
    int64_t off = 0;
    for (int d = l->nd - 1; d >= 0; d--) {
        int64_t i = f % l->shape[d];
        f /= l->shape[d];
        off += i * l->strides[d];
        if (idx)
            idx[d] = i;
    }
    return off;
}

/* "[0, 2]" of a multi-index. */
static const char *position_str(char *buf, size_t size, int nd, const int64_t *idx)
{
    return td_shape_str(buf, size, nd, idx);
}

/* Finds the first index (row-major over the index tensor) outside [0, bound) and sets the
 * error for it. Returns -1 (also when, against expectation, none is found). */
static int report_bad_index(const char *op, const tide_tensor *index, int dim, int64_t bound)
{
    layout il = layout_of(index);
    const char *ib = td_tensor_data(index);
    bool is64 = index->dtype == TIDE_INT64;
    int64_t n = td_numel(index->ndim, index->shape);
    for (int64_t f = 0; f < n; f++) {
        int64_t idx[TIDE_MAX_DIMS];
        int64_t v = load_index(ib, is64, offset_of(&il, f, idx));
        if (v < 0 || v >= bound) {
            char pos[200];
            position_str(pos, sizeof pos, index->ndim, idx);
            return td_error("%s: index %lld is out of bounds for dim %d of size %lld (at "
                            "position %s of the index)",
                            op, (long long)v, dim, (long long)bound, pos);
        }
    }
    return td_error("%s: an index is out of bounds for dim %d of size %lld", op, dim,
                    (long long)bound);
}

static void raise_flag(int *flag) { __atomic_store_n(flag, 1, __ATOMIC_RELAXED); }
static bool flag_raised(int *flag) { return __atomic_load_n(flag, __ATOMIC_RELAXED) != 0; }

static int64_t grain_for(int64_t bytes_per_item)
{
    int64_t g = GRAIN_BYTES / (bytes_per_item > 0 ? bytes_per_item : 1);
    return g > 0 ? g : 1;
}

/* ---- gather ------------------------------------------------------------------------------- */

typedef struct gather_job {
    layout il, xl; /* index and input; xl's stride at dim is applied to the index value */
    int dim;
    const char *ib, *xb;
    char *ob;
    bool is64;
    size_t es;
    int bad;
} gather_job;

static void gather_range(void *ctx, int64_t begin, int64_t end)
{
    gather_job *j = ctx;
    const int nd = j->il.nd, last = nd - 1, dim = j->dim;
    const int64_t bound = j->xl.shape[dim], xs_dim = j->xl.strides[dim];
    int64_t idx[TIDE_MAX_DIMS];
    int64_t ioff = offset_of(&j->il, begin, idx), xoff = 0;
    for (int d = 0; d < nd; d++)
        if (d != dim)
            xoff += idx[d] * j->xl.strides[d];
    const int64_t inner = j->il.shape[last], is_last = j->il.strides[last];
    const int64_t xs_last = last == dim ? 0 : j->xl.strides[last];
    for (int64_t f = begin; f < end;) {
        int64_t run = inner - idx[last];
        if (run > end - f)
            run = end - f;
        char *o = j->ob + (size_t)f * j->es;
        for (int64_t k = 0; k < run; k++) {
            int64_t v = load_index(j->ib, j->is64, ioff + k * is_last);
            if (v < 0 || v >= bound) {
                raise_flag(&j->bad);
                return;
            }
            copy_elem(o + (size_t)k * j->es,
                      j->xb + (xoff + k * xs_last + v * xs_dim) * (int64_t)j->es, j->es);
        }
        f += run;
        if (f >= end)
            break;
        /* Next row: carry into the outer dims. */
        idx[last] = 0;
        for (int d = last - 1; d >= 0; d--) {
            if (++idx[d] < j->il.shape[d])
                break;
            idx[d] = 0;
        }
        ioff = 0;
        xoff = 0;
        for (int e = 0; e < nd; e++) {
            ioff += idx[e] * j->il.strides[e];
            if (e != dim)
                xoff += idx[e] * j->xl.strides[e];
        }
    }
}

int td_cpu_gather(tide_tensor *out, const tide_tensor *x, const tide_tensor *index, int dim)
{
    gather_job j = {layout_of(index), layout_of(x), dim, td_tensor_data(index),
                    td_tensor_data(x), td_tensor_data(out), index->dtype == TIDE_INT64,
                    td_dtype_sizes[x->dtype], 0};
    int64_t n = td_numel(out->ndim, out->shape);
    td_parallel_for(n, grain_for((int64_t)j.es + 8), gather_range, &j);
    if (j.bad)
        return report_bad_index("gather", index, dim, j.xl.shape[dim]);
    return 0;
}

/* ---- scatter_add -------------------------------------------------------------------------- */

typedef struct scatter_job {
    layout il, sl, ol; /* index, src, out (contiguous, x's shape) */
    int dim;
    int64_t nlines, len; /* lines: index positions with dim left out; len: index.size(dim) */
    const char *ib, *sb;
    char *ob;
    bool is64;
    tide_dtype dtype;
    int bad;
} scatter_job;

/* out[o] += src[s] in the dtype's arithmetic: integers wrap, bool is or. */
static inline void add_elem(tide_dtype dt, char *o, const char *s)
{
    switch (dt) {
    case TIDE_FLOAT32: *(float *)o += *(const float *)s; break;
    case TIDE_FLOAT64: *(double *)o += *(const double *)s; break;
    case TIDE_INT32:
        *(int32_t *)o = (int32_t)((uint32_t) * (int32_t *)o + (uint32_t) * (const int32_t *)s);
        break;
    case TIDE_INT64:
        *(int64_t *)o = (int64_t)((uint64_t) * (int64_t *)o + (uint64_t) * (const int64_t *)s);
        break;
    case TIDE_UINT8: *(uint8_t *)o = (uint8_t)(*(uint8_t *)o + *(const uint8_t *)s); break;
    default: *(bool *)o = *(bool *)o || *(const bool *)s; break;
    }
}

static void scatter_range(void *ctx, int64_t begin, int64_t end)
{
    scatter_job *j = ctx;
    const int nd = j->il.nd, dim = j->dim;
    const int64_t bound = j->ol.shape[dim];
    const int64_t is_dim = j->il.strides[dim], ss_dim = j->sl.strides[dim];
    const int64_t os_dim = j->ol.strides[dim];
    const size_t es = td_dtype_sizes[j->dtype];
    /* The lines' shape: the index's with dim set to 1. */
    layout lines = j->il;
    lines.shape[dim] = 1;
    int64_t ioff[LINE_BLOCK], soff[LINE_BLOCK], ooff[LINE_BLOCK];
    for (int64_t l0 = begin; l0 < end; l0 += LINE_BLOCK) {
        int64_t nl = end - l0 < LINE_BLOCK ? end - l0 : LINE_BLOCK;
        for (int64_t l = 0; l < nl; l++) {
            int64_t idx[TIDE_MAX_DIMS];
            ioff[l] = offset_of(&lines, l0 + l, idx);
            soff[l] = ooff[l] = 0;
            for (int d = 0; d < nd; d++) {
                soff[l] += idx[d] * j->sl.strides[d];
                ooff[l] += idx[d] * j->ol.strides[d];
            }
        }
        for (int64_t k = 0; k < j->len; k++) {
            for (int64_t l = 0; l < nl; l++) {
                int64_t v = load_index(j->ib, j->is64, ioff[l] + k * is_dim);
                if (v < 0 || v >= bound) {
                    raise_flag(&j->bad);
                    return;
                }
                add_elem(j->dtype, j->ob + (ooff[l] + v * os_dim) * (int64_t)es,
                         j->sb + (soff[l] + k * ss_dim) * (int64_t)es);
            }
        }
        if (flag_raised(&j->bad))
            return;
    }
}

int td_cpu_scatter_add(tide_tensor *out, const tide_tensor *x, const tide_tensor *index,
                       const tide_tensor *src, int dim)
{
    if (td_cpu_copy(out, x) < 0)
        return -1;
    int64_t n = td_numel(index->ndim, index->shape);
    if (n == 0)
        return 0;
    scatter_job j = {layout_of(index), layout_of(src), layout_of(out), dim, 0, 0,
                     td_tensor_data(index), td_tensor_data(src), td_tensor_data(out),
                     index->dtype == TIDE_INT64, (tide_dtype)x->dtype, 0};
    j.len = j.il.shape[dim];
    j.nlines = n / j.len;
    int64_t per_line = j.len * (int64_t)(2 * td_dtype_sizes[x->dtype] + 8);
    td_parallel_for(j.nlines, grain_for(per_line), scatter_range, &j);
    if (j.bad)
        return report_bad_index("scatter_add", index, dim, j.ol.shape[dim]);
    return 0;
}

/* ---- index_select ------------------------------------------------------------------------- */

typedef struct select_job {
    const char *xb;
    char *ob;
    size_t es;
    const int64_t *rows;  /* the checked index values */
    int64_t k;            /* index length */
    int64_t xs_dim;       /* x's stride at dim (elements) */
    layout outer;         /* x's dims before dim */
    int n_in;             /* x's dims after dim, collapsed */
    int64_t in_shape[TIDE_MAX_DIMS], in_strides[TIDE_MAX_DIMS];
    int64_t inner;        /* elements per copied slice */
    bool inner_contiguous;
} select_job;

/* Copies one slice of x's dims after dim (strided) to contiguous dst. */
static void copy_slice(const select_job *j, char *dst, const char *src)
{
    if (j->inner_contiguous) {
        memcpy(dst, src, (size_t)j->inner * j->es);
        return;
    }
    int last = j->n_in - 1;
    int64_t idx[TIDE_MAX_DIMS] = {0};
    int64_t off = 0, n = j->in_shape[last], st = j->in_strides[last];
    for (int64_t done = 0; done < j->inner; done += n) {
        for (int64_t i = 0; i < n; i++)
            copy_elem(dst + (size_t)(done + i) * j->es, src + (off + i * st) * (int64_t)j->es,
                      j->es);
        for (int d = last - 1; d >= 0; d--) {
            off += j->in_strides[d];
            if (++idx[d] < j->in_shape[d])
                break;
            off -= idx[d] * j->in_strides[d];
            idx[d] = 0;
        }
    }
}

static void select_range(void *ctx, int64_t begin, int64_t end)
{
    const select_job *j = ctx;
    for (int64_t r = begin; r < end; r++) {
        int64_t o = r / j->k, k = r % j->k;
        int64_t xoff = offset_of(&j->outer, o, NULL) + j->rows[k] * j->xs_dim;
        copy_slice(j, j->ob + (size_t)r * (size_t)j->inner * j->es,
                   j->xb + xoff * (int64_t)j->es);
    }
}

int td_cpu_index_select(tide_tensor *out, const tide_tensor *x, const tide_tensor *index, int dim)
{
    layout xl = layout_of(x);
    int64_t k = td_numel(index->ndim, index->shape), bound = xl.shape[dim];
    size_t rows_bytes = (size_t)(k > 0 ? k : 1) * sizeof(int64_t);
    int64_t *rows = td_cache_alloc(rows_bytes);
    if (!rows)
        return td_error("index_select: out of memory for %lld indices", (long long)k);
    /* The index is 1-D (or 0-dim): check it whole, in order, before any copy. */
    const char *ib = td_tensor_data(index);
    int64_t is = index->ndim ? index->strides[0] : 0;
    for (int64_t i = 0; i < k; i++) {
        int64_t v = load_index(ib, index->dtype == TIDE_INT64, i * is);
        if (v < 0 || v >= bound) {
            td_cache_free(rows, rows_bytes);
            return td_error("index_select: index %lld is out of bounds for dim %d of size %lld "
                            "(at position %lld of the index)",
                            (long long)v, dim, (long long)bound, (long long)i);
        }
        rows[i] = v;
    }
    select_job j = {.xb = td_tensor_data(x),
                    .ob = td_tensor_data(out),
                    .es = td_dtype_sizes[x->dtype],
                    .rows = rows,
                    .k = k,
                    .xs_dim = xl.strides[dim]};
    j.outer.nd = dim > 0 ? dim : 1;
    j.outer.shape[0] = 1;
    j.outer.strides[0] = 0;
    for (int d = 0; d < dim; d++) {
        j.outer.shape[d] = xl.shape[d];
        j.outer.strides[d] = xl.strides[d];
    }
    /* Dims after dim, without size-1 dims, merged where contiguous with each other. */
    j.inner = 1;
    j.n_in = 0;
    for (int d = dim + 1; d < xl.nd; d++) {
        j.inner *= xl.shape[d];
        if (xl.shape[d] == 1)
            continue;
        if (j.n_in > 0 && j.in_strides[j.n_in - 1] == xl.strides[d] * xl.shape[d]) {
            j.in_shape[j.n_in - 1] *= xl.shape[d];
            j.in_strides[j.n_in - 1] = xl.strides[d];
        } else {
            j.in_shape[j.n_in] = xl.shape[d];
            j.in_strides[j.n_in] = xl.strides[d];
            j.n_in++;
        }
    }
    if (j.n_in == 0) {
        j.in_shape[0] = 1;
        j.in_strides[0] = 1;
        j.n_in = 1;
    }
    j.inner_contiguous = j.n_in == 1 && j.in_strides[0] == 1;
    int64_t nrows = td_numel(out->ndim, out->shape) / (j.inner > 0 ? j.inner : 1);
    if (j.inner > 0)
        td_parallel_for(nrows, grain_for(j.inner * (int64_t)j.es), select_range, &j);
    td_cache_free(rows, rows_bytes);
    return 0;
}
