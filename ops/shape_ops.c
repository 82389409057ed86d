/*
 * shape_ops.c — shape composites: tile, roll, repeat_interleave, movedim, rot90, atleast_nd,
 * hstack/vstack/dstack/column_stack, meshgrid and cartesian_prod. Each is views (unsqueeze,
 * expand, reshape, permute, slice) plus cat, flip or index_select, so gradients, the jit and
 * devices come from those ops. repeat_interleave with a tensor of repeats reads it back to the
 * host: its result's size depends on the values (under the jit that read is a graph break).
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#include "nn_common.h"

/* x with dim d repeated r times as a block ([a, b] -> [a, b, a, b]) when whole, or each element
 * r times ([a, a, b, b]) when !whole: unsqueeze, expand, merge. */
static tide_tensor *repeat_dim(nn_scope *s, const tide_tensor *x, int d, int64_t r, bool whole)
{
    if (!x)
        return NULL;
    int at = whole ? d : d + 1, nd = x->ndim + 1;
    tide_tensor *u = nn_keep(s, tide_unsqueeze(x, at));
    if (!u)
        return NULL;
    int64_t shape[TIDE_MAX_DIMS], merged[TIDE_MAX_DIMS];
    for (int i = 0; i < nd; i++)
        shape[i] = i == at ? r : u->shape[i];
    for (int i = 0; i < x->ndim; i++)
        merged[i] = x->shape[i];
    if (__builtin_mul_overflow(x->shape[d], r, &merged[d]))
        return nn_keep(s, (td_error("%lld repetitions of a dim of size %lld are more elements "
                                    "than an int64 counts", (long long)r,
                                    (long long)x->shape[d]), NULL));
    tide_tensor *e = nn_keep(s, tide_expand(u, nd, shape));
    return nn_keep(s, tide_reshape(e, x->ndim, merged));
}

static tide_tensor *tile_body(const tide_tensor *x, int nreps, const int64_t *reps)
{
    if (td_check_tensor("tile", "input", x) < 0)
        return NULL;
    if (nreps < 0 || nreps > TIDE_MAX_DIMS || (nreps > 0 && !reps))
        return td_error("tile: %d repetitions given; at most %d", nreps, TIDE_MAX_DIMS), NULL;
    for (int i = 0; i < nreps; i++)
        if (reps[i] < 0)
            return td_error("tile: repetition %d is %lld; it must be >= 0", i,
                            (long long)reps[i]), NULL;
    nn_scope s = {0};
    int nd = nreps > x->ndim ? nreps : x->ndim;
    int64_t shape[TIDE_MAX_DIMS];
    for (int d = 0; d < nd; d++)
        shape[d] = d < nd - x->ndim ? 1 : x->shape[d - (nd - x->ndim)];
    tide_tensor *t = nn_keep(&s, tide_reshape(x, nd, shape));
    for (int d = 0; d < nd; d++) {
        int k = d - (nd - nreps);
        if (k >= 0 && reps[k] != 1)
            t = repeat_dim(&s, t, d, reps[k], true);
    }
    return nn_finish(&s, "tile", t ? nn_keep(&s, tide_retain(t)) : NULL);
}

tide_tensor *tide_tile(const tide_tensor *x, int nreps, const int64_t *reps)
{
    TD_IN_OP("tile", tile_body(x, nreps, reps));
}

static tide_tensor *roll_dim(nn_scope *s, tide_tensor *t, int d, int64_t shift)
{
    int64_t n = t ? t->shape[d] : 0;
    if (!t || n == 0 || ((shift % n) + n) % n == 0)
        return t;
    int64_t k = ((shift % n) + n) % n;
    tide_tensor *parts[2] = {nn_keep(s, tide_slice(t, d, n - k, n, 1)),
                             nn_keep(s, tide_slice(t, d, 0, n - k, 1))};
    return nn_keep(s, parts[0] && parts[1] ? tide_cat(parts, 2, d) : NULL);
}

static tide_tensor *roll_body(const tide_tensor *x, int nshifts, const int64_t *shifts,
                              const int *dims, int ndims)
{
    const char *op = "roll";
    if (td_check_tensor(op, "input", x) < 0)
        return NULL;
    if (nshifts < 1 || !shifts || (ndims == 0 ? nshifts != 1 : ndims != nshifts) || ndims < 0 ||
        ndims > TIDE_MAX_DIMS || (ndims > 0 && !dims))
        return td_error("%s: %d shifts for %d dims; give one shift per dim (or one shift and "
                        "no dims)", op, nshifts, ndims), NULL;
    nn_scope s = {0};
    if (ndims == 0) {
        tide_tensor *flat = nn_keep(&s, tide_reshape(x, 1, (const int64_t[]){-1}));
        tide_tensor *r = roll_dim(&s, flat, 0, shifts[0]);
        return nn_finish(&s, op, nn_keep(&s, tide_reshape(r, x->ndim, x->shape)));
    }
    tide_tensor *t = nn_keep(&s, tide_retain((tide_tensor *)x));
    for (int i = 0; i < ndims && t; i++) {
        int d = td_normalize_dim(op, dims[i], x->ndim);
        t = d < 0 ? nn_keep(&s, NULL) : roll_dim(&s, t, d, shifts[i]);
    }
    return nn_finish(&s, op, t ? nn_keep(&s, tide_retain(t)) : NULL);
}

tide_tensor *tide_roll(const tide_tensor *x, int nshifts, const int64_t *shifts, const int *dims,
                       int ndims)
{
    TD_IN_OP("roll", roll_body(x, nshifts, shifts, dims, ndims));
}

/* x itself with the dim normalized, or x flattened with dim 0 when dim is NULL. */
static tide_tensor *dim_or_flat(nn_scope *s, const char *op, const tide_tensor *x, const int *dim,
                                int *d)
{
    if (!dim) {
        *d = 0;
        return nn_keep(s, tide_reshape(x, 1, (const int64_t[]){-1}));
    }
    *d = td_normalize_dim(op, *dim, x->ndim);
    if (*d < 0)
        return nn_keep(s, NULL);
    if (x->ndim == 0)
        return nn_keep(s, tide_reshape(x, 1, (const int64_t[]){1}));
    return nn_keep(s, tide_retain((tide_tensor *)x));
}

static tide_tensor *repeat_interleave_body(const tide_tensor *x, int64_t repeats, const int *dim)
{
    const char *op = "repeat_interleave";
    if (td_check_tensor(op, "input", x) < 0)
        return NULL;
    if (repeats < 0)
        return td_error("%s: repeats must be >= 0, got %lld", op, (long long)repeats), NULL;
    nn_scope s = {0};
    int d;
    tide_tensor *t = dim_or_flat(&s, op, x, dim, &d);
    return nn_finish(&s, op, repeat_dim(&s, t, d, repeats, false));
}

tide_tensor *tide_repeat_interleave(const tide_tensor *x, int64_t repeats, const int *dim)
{
    TD_IN_OP("repeat_interleave", repeat_interleave_body(x, repeats, dim));
}

/* The index [0 x r0, 1 x r1, ...] built on the host from the repeats read back. */
static tide_tensor *repeat_index(nn_scope *s, const char *op, const tide_tensor *repeats,
                                 int64_t n, tide_device *dev)
{
    tide_tensor *r64 = nn_keep(s, tide_cast(repeats, TIDE_INT64));
    r64 = nn_keep(s, tide_contiguous(r64));
    int64_t *r = td_malloc((size_t)(n ? n : 1) * sizeof *r);
    if (!r64 || !r || tide_to_buffer(r64, r, (size_t)n * sizeof *r) < 0) {
        if (!r)
            td_error("%s: out of memory", op);
        free(r);
        return nn_keep(s, NULL);
    }
    int64_t total = 0;
    for (int64_t i = 0; i < n; i++) {
        if (r[i] < 0 || total > INT64_MAX / 2 - r[i]) {
            td_error("%s: repeats[%lld] is %lld; repeats must be >= 0", op, (long long)i,
                     (long long)r[i]);
            free(r);
            return nn_keep(s, NULL);
        }
        total += r[i];
    }
    int64_t *idx = td_malloc((size_t)(total ? total : 1) * sizeof *idx);
    if (!idx)
        td_error("%s: out of memory for %lld indices", op, (long long)total);
    for (int64_t i = 0, k = 0; idx && i < n; i++)
        for (int64_t j = 0; j < r[i]; j++)
            idx[k++] = i;
    tide_tensor *out = idx ? td_from_data_on(dev, idx, 1, &total, TIDE_INT64) : NULL;
    free(idx);
    free(r);
    return nn_keep(s, out);
}

static tide_tensor *repeat_interleave_t_body(const tide_tensor *x, const tide_tensor *repeats,
                                             const int *dim)
{
    const char *op = "repeat_interleave";
    if (td_check_tensor(op, "input", x) < 0 || td_check_tensor(op, "repeats", repeats) < 0)
        return NULL;
    if (tide_dtype_is_floating((tide_dtype)repeats->dtype) || repeats->dtype == TIDE_BOOL ||
        repeats->ndim > 1)
        return td_error("%s: repeats must be a 0-D or 1-D integer tensor, got %s", op,
                        nn_describe((char[160]){0}, 160, repeats)), NULL;
    nn_scope s = {0};
    int d;
    tide_tensor *t = dim_or_flat(&s, op, x, dim, &d);
    int64_t n = t ? t->shape[d] : 0, len = td_numel(repeats->ndim, repeats->shape);
    if (t && repeats->ndim == 1 && len != n) {
        char s1[160];
        td_error("%s: repeats has %lld entries but dim %d of the input %s has size %lld", op,
                 (long long)len, d, nn_describe(s1, sizeof s1, x), (long long)n);
        return nn_finish(&s, op, nn_keep(&s, NULL));
    }
    tide_tensor *rep = repeats->ndim == 0 ? nn_keep(&s, tide_expand(repeats, 1, &n))
                                          : (tide_tensor *)repeats;
    tide_tensor *idx = t && rep ? repeat_index(&s, op, rep, n, x->device) : NULL;
    return nn_finish(&s, op, idx ? nn_keep(&s, tide_index_select(t, d, idx)) : nn_keep(&s, NULL));
}

tide_tensor *tide_repeat_interleave_tensor(const tide_tensor *x, const tide_tensor *repeats,
                                           const int *dim)
{
    TD_IN_OP("repeat_interleave", repeat_interleave_t_body(x, repeats, dim));
}

tide_tensor *tide_movedim(const tide_tensor *x, int n, const int *src, const int *dst)
{
    const char *op = "movedim";
    if (td_check_tensor(op, "input", x) < 0)
        return NULL;
    if (n < 0 || n > x->ndim || (n > 0 && (!src || !dst)))
        return td_error("%s: %d dims to move in a tensor of %d dims", op, n, x->ndim), NULL;
    int perm[TIDE_MAX_DIMS];
    unsigned used_src = 0, used_dst = 0;
    for (int d = 0; d < x->ndim; d++)
        perm[d] = -1;
    for (int i = 0; i < n; i++) {
        int a = td_normalize_dim(op, src[i], x->ndim);
        int b = a < 0 ? -1 : td_normalize_dim(op, dst[i], x->ndim);
        if (b < 0)
            return NULL;
        if ((used_src & (1u << a)) || (used_dst & (1u << b)))
            return td_error("%s: a dim is repeated in source or destination", op), NULL;
        used_src |= 1u << a, used_dst |= 1u << b;
        perm[b] = a;
    }
    for (int d = 0, k = 0; d < x->ndim; d++) {
        if (perm[d] >= 0)
            continue;
        while (used_src & (1u << k))
            k++;
        perm[d] = k++;
    }
    return tide_permute(x, perm);
}

static tide_tensor *rot90_body(const tide_tensor *x, int64_t k, int dim0, int dim1)
{
    const char *op = "rot90";
    if (td_check_tensor(op, "input", x) < 0)
        return NULL;
    if (x->ndim < 2)
        return td_error("%s: input must have at least 2 dims, got %d", op, x->ndim), NULL;
    int a = td_normalize_dim(op, dim0, x->ndim), b = a < 0 ? -1 : td_normalize_dim(op, dim1, x->ndim);
    if (b < 0)
        return NULL;
    if (a == b)
        return td_error("%s: the two dims must differ, both are %d", op, a), NULL;
    k = ((k % 4) + 4) % 4;
    nn_scope s = {0};
    tide_tensor *r;
    if (k == 0)
        r = nn_keep(&s, tide_clone(x));
    else if (k == 2)
        r = nn_keep(&s, tide_flip(x, (const int[]){a, b}, 2));
    else
        r = nn_keep(&s, tide_transpose(nn_keep(&s, tide_flip(x, k == 1 ? &b : &a, 1)), a, b));
    return nn_finish(&s, op, r ? nn_keep(&s, tide_contiguous(r)) : NULL);
}

tide_tensor *tide_rot90(const tide_tensor *x, int64_t k, int dim0, int dim1)
{
    TD_IN_OP("rot90", rot90_body(x, k, dim0, dim1));
}

tide_tensor *tide_atleast(const tide_tensor *x, int ndim)
{
    if (td_check_tensor("atleast", "input", x) < 0)
        return NULL;
    if (ndim < 1 || ndim > 3)
        return td_error("atleast: ndim must be 1, 2 or 3, got %d", ndim), NULL;
    if (x->ndim >= ndim)
        return tide_retain((tide_tensor *)x);
    int64_t shape[3] = {1, 1, 1};
    if (x->ndim == 1)
        shape[1] = x->shape[0]; /* [N] -> [1, N] or [1, N, 1] */
    if (x->ndim == 2)
        shape[0] = x->shape[0], shape[1] = x->shape[1];
    return tide_reshape(x, ndim, shape);
}

/* Each of xs made at least nd-D (column_stack: 0/1-D as columns), then cat along dim (hstack:
 * dim 0 when the first is 1-D). */
static tide_tensor *stack_like(const char *op, tide_tensor *const *xs, int n, int nd, int dim)
{
    if (n <= 0 || n > NN_SCOPE_MAX - 1 || !xs)
        return td_error("%s: expected 1 to %d tensors, got %d", op, NN_SCOPE_MAX - 1, n), NULL;
    for (int i = 0; i < n; i++)
        if (td_check_tensor(op, "tensor", xs[i]) < 0)
            return NULL;
    nn_scope s = {0};
    tide_tensor *parts[NN_SCOPE_MAX];
    for (int i = 0; i < n; i++) {
        const tide_tensor *x = xs[i];
        if (nd == 0) /* column_stack */
            parts[i] = nn_keep(&s, x->ndim <= 1 ? tide_reshape(x, 2, (const int64_t[]){-1, 1})
                                                : tide_retain((tide_tensor *)x));
        else
            parts[i] = nn_keep(&s, tide_atleast(x, nd));
    }
    if (dim < 0) /* hstack */
        dim = parts[0] && parts[0]->ndim == 1 ? 0 : 1;
    return nn_finish(&s, op, s.failed ? NULL : nn_keep(&s, tide_cat(parts, n, dim)));
}

tide_tensor *tide_hstack(tide_tensor *const *xs, int n) { TD_IN_OP("hstack", stack_like("hstack", xs, n, 1, -1)); }
tide_tensor *tide_vstack(tide_tensor *const *xs, int n) { TD_IN_OP("vstack", stack_like("vstack", xs, n, 2, 0)); }
tide_tensor *tide_dstack(tide_tensor *const *xs, int n) { TD_IN_OP("dstack", stack_like("dstack", xs, n, 3, 2)); }
tide_tensor *tide_column_stack(tide_tensor *const *xs, int n)
{
    TD_IN_OP("column_stack", stack_like("column_stack", xs, n, 0, 1));
}

int tide_meshgrid(tide_tensor *const *xs, int n, bool xy, tide_tensor **out)
{
    if (n <= 0 || n > TIDE_MAX_DIMS || !xs || !out)
        return td_error("meshgrid: expected 1 to %d tensors, got %d", TIDE_MAX_DIMS, n);
    int64_t shape[TIDE_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        if (td_check_tensor("meshgrid", "tensor", xs[i]) < 0)
            return -1;
        if (xs[i]->ndim > 1) {
            char s1[160];
            return td_error("meshgrid: tensor %d is %s; each must be 0-D or 1-D", i,
                            nn_describe(s1, sizeof s1, xs[i]));
        }
        shape[i] = xs[i]->ndim ? xs[i]->shape[0] : 1;
    }
    int pos[TIDE_MAX_DIMS]; /* where input i's values run */
    for (int i = 0; i < n; i++)
        pos[i] = xy && n >= 2 && i < 2 ? 1 - i : i;
    int64_t full[TIDE_MAX_DIMS];
    for (int i = 0; i < n; i++)
        full[pos[i]] = shape[i];
    for (int i = 0; i < n; i++) {
        int64_t vs[TIDE_MAX_DIMS];
        for (int d = 0; d < n; d++)
            vs[d] = d == pos[i] ? shape[i] : 1;
        tide_tensor *v = tide_reshape(xs[i], n, vs);
        out[i] = v ? tide_expand(v, n, full) : NULL;
        tide_release(v);
        if (!out[i]) {
            for (int j = 0; j < i; j++)
                tide_release(out[j]);
            return -1;
        }
    }
    return 0;
}

static tide_tensor *cartesian_prod_body(tide_tensor *const *xs, int n)
{
    tide_tensor *grid[TIDE_MAX_DIMS];
    if (tide_meshgrid(xs, n, false, grid) < 0)
        return NULL;
    for (int i = 0; i < n; i++)
        if (xs[i]->ndim != 1) {
            for (int j = 0; j < n; j++)
                tide_release(grid[j]);
            return td_error("cartesian_prod: tensor %d is not 1-D", i), NULL;
        }
    if (n == 1) {
        tide_release(grid[0]);
        return tide_retain(xs[0]);
    }
    nn_scope s = {0};
    tide_tensor *cols[TIDE_MAX_DIMS];
    for (int i = 0; i < n; i++) {
        nn_keep(&s, grid[i]);
        cols[i] = nn_keep(&s, tide_reshape(grid[i], 1, (const int64_t[]){-1}));
    }
    return nn_finish(&s, "cartesian_prod", s.failed ? NULL : nn_keep(&s, tide_stack(cols, n, 1)));
}

tide_tensor *tide_cartesian_prod(tide_tensor *const *xs, int n)
{
    TD_IN_OP("cartesian_prod", cartesian_prod_body(xs, n));
}
