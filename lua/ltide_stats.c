/*
 * ltide_stats.c — Lua bindings of the statistics, scans, sorting and searching ops (ops/stats.c,
 * scan.c, sort.c, search.c): var, std, var_mean, std_mean, amax, amin, nansum, nanmean,
 * count_nonzero, norm, cumprod, logcumsumexp, cummax, cummin, sort, argsort, median, quantile,
 * nonzero, unique, searchsorted, bincount, histc. Each is tide.X and a tensor method.
 *
 * Lua conventions: dims are 1-based (or negative); returned positions (sort's, median's,
 * cummax's indices, nonzero's coordinates, unique's inverse, searchsorted's insertion places)
 * are 1-based, and sorter tensors are read 1-based. bincount's and histc's inputs are data, not
 * positions, so bin v of bincount is element v + 1 of its result. PyTorch's keyword arguments
 * come as a trailing options table; the common positional forms work too.
 */
#include <math.h>
#include <string.h>

#include "ltide.h"

/* ---- arguments ------------------------------------------------------------------------------ */

typedef struct red_args {
    int dims[TIDE_MAX_DIMS];
    int ndims; /* 0: every dim */
    bool has_dim, keepdim;
    double correction;
} red_args;

static bool is_list(lua_State *L, int arg)
{
    return lua_type(L, arg) == LUA_TTABLE && lua_rawlen(L, arg) > 0;
}

static void set_dims(lua_State *L, int arg, const tide_tensor *x, const char *op, red_args *a)
{
    a->ndims = lt_checkdims(L, arg, tide_ndim(x), op, a->dims);
    a->has_dim = true;
}

/* An optional boolean option. */
static bool opt_flag(lua_State *L, int arg, const char *key, bool dflt, const char *op)
{
    int t = lt_getoption(L, arg, key);
    bool v = dflt;
    if (t == LUA_TBOOLEAN)
        v = lua_toboolean(L, -1);
    else if (t != LUA_TNIL)
        luaL_error(L, "%s: option %s must be a boolean, got %s", op, key, luaL_typename(L, -1));
    lua_pop(L, 1);
    return v;
}

/* (dim | {dims} | nil) [, unbiased] [, keepdim] [, {dim=, keepdim=, correction=, unbiased=}]:
 * with_unbiased takes the first boolean as var's unbiased (PyTorch's positional order). */
static void reduce_args(lua_State *L, int first, const tide_tensor *x, const char *op,
                        bool with_unbiased, red_args *a)
{
    static const char *const keys[] = {"dim", "keepdim", "correction", "unbiased", NULL};
    static const char *const plain_keys[] = {"dim", "keepdim", "p", NULL}; /* norm's p too */
    memset(a, 0, sizeof *a);
    a->correction = 1;
    int top = lua_gettop(L), bools = 0;
    for (int i = first; i <= top; i++) {
        int t = lua_type(L, i);
        if (t == LUA_TNIL)
            continue;
        if (i == first && (t == LUA_TNUMBER || is_list(L, i))) {
            set_dims(L, i, x, op, a);
        } else if (t == LUA_TBOOLEAN) {
            if (with_unbiased && bools == 0)
                a->correction = lua_toboolean(L, i) ? 1 : 0;
            else
                a->keepdim = lua_toboolean(L, i);
            bools++;
        } else if (t == LUA_TTABLE && i == top) {
            lt_checkkeys(L, i, op, with_unbiased ? keys : plain_keys);
            if (lt_getoption(L, i, "dim") != LUA_TNIL)
                set_dims(L, lua_gettop(L), x, op, a);
            lua_pop(L, 1);
            a->keepdim = opt_flag(L, i, "keepdim", a->keepdim, op);
            if (with_unbiased) {
                if (lt_getoption(L, i, "correction") != LUA_TNIL)
                    a->correction = luaL_checknumber(L, -1);
                lua_pop(L, 1);
                if (lt_getoption(L, i, "unbiased") != LUA_TNIL)
                    a->correction = opt_flag(L, i, "unbiased", true, op) ? 1 : 0;
                lua_pop(L, 1);
            }
        } else {
            luaL_error(L, "%s: unexpected argument %d (%s)", op, i, luaL_typename(L, i));
        }
    }
}

static const int *dims_of(const red_args *a) { return a->ndims ? a->dims : NULL; }

/* 0-based int64 positions as 1-based ones; releases r. */
static tide_tensor *one_based(tide_tensor *r)
{
    if (!r)
        return NULL;
    tide_tensor *one = tide_integer(1);
    tide_tensor *s = one ? tide_add(r, one) : NULL;
    tide_release(one);
    tide_release(r);
    return s;
}

/* Pushes tensors (new references) as results; raises op's error when the call failed. */
static int push_results(lua_State *L, int rc, tide_tensor **ts, int n, const char *op)
{
    if (rc < 0) {
        for (int i = 0; i < n; i++)
            tide_release(ts[i]);
        return lt_raise(L, op);
    }
    for (int i = 0; i < n; i++) {
        lt_box *b = lt_newbox(L);
        lt_fill(L, b, ts[i], false);
    }
    return n;
}

/* ---- reductions ----------------------------------------------------------------------------- */

static int var_like(lua_State *L, int which)
{
    static const char *const names[] = {"var", "std", "var_mean", "std_mean"};
    const char *op = names[which];
    tide_tensor *x = lt_check(L, 1, op);
    red_args a;
    reduce_args(L, 2, x, op, true, &a);
    tide_tensor *r[2] = {NULL, NULL};
    int rc = 0;
    if (which == 0)
        rc = (r[0] = tide_var(x, dims_of(&a), a.ndims, a.correction, a.keepdim)) ? 0 : -1;
    else if (which == 1)
        rc = (r[0] = tide_std(x, dims_of(&a), a.ndims, a.correction, a.keepdim)) ? 0 : -1;
    else
        rc = (which == 2 ? tide_var_mean : tide_std_mean)(x, dims_of(&a), a.ndims, a.correction,
                                                          a.keepdim, &r[0], &r[1]);
    return push_results(L, rc, r, which >= 2 ? 2 : 1, op);
}
static int t_var(lua_State *L) { return var_like(L, 0); }
static int t_std(lua_State *L) { return var_like(L, 1); }
static int t_var_mean(lua_State *L) { return var_like(L, 2); }
static int t_std_mean(lua_State *L) { return var_like(L, 3); }

typedef tide_tensor *(*red_fn)(const tide_tensor *, const int *, int, bool);

static int plain_reduce(lua_State *L, const char *op, red_fn fn)
{
    tide_tensor *x = lt_check(L, 1, op);
    red_args a;
    reduce_args(L, 2, x, op, false, &a);
    tide_tensor *r = fn(x, dims_of(&a), a.ndims, a.keepdim);
    return push_results(L, r ? 0 : -1, &r, 1, op);
}
static int t_amax(lua_State *L) { return plain_reduce(L, "amax", tide_amax); }
static int t_amin(lua_State *L) { return plain_reduce(L, "amin", tide_amin); }
static int t_nansum(lua_State *L) { return plain_reduce(L, "nansum", tide_nansum); }
static int t_nanmean(lua_State *L) { return plain_reduce(L, "nanmean", tide_nanmean); }

static int t_count_nonzero(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "count_nonzero");
    red_args a;
    reduce_args(L, 2, x, "count_nonzero", false, &a);
    tide_tensor *r = tide_count_nonzero(x, dims_of(&a), a.ndims);
    return push_results(L, r ? 0 : -1, &r, 1, "count_nonzero");
}

/* p: a number (math.huge for inf), 'fro' (2), or nil (2). */
static double norm_p(lua_State *L, int arg)
{
    if (lua_isnoneornil(L, arg))
        return 2;
    if (lua_type(L, arg) == LUA_TNUMBER)
        return lua_tonumber(L, arg);
    if (lua_type(L, arg) == LUA_TSTRING) {
        const char *s = lua_tostring(L, arg);
        if (strcmp(s, "fro") == 0)
            return 2;
        if (strcmp(s, "inf") == 0)
            return INFINITY;
        if (strcmp(s, "-inf") == 0)
            return -INFINITY;
        luaL_error(L, "norm: p must be a number, 'fro', 'inf' or '-inf', got '%s'", s);
    }
    return luaL_error(L, "norm: p must be a number or 'fro', got %s", luaL_typename(L, arg));
}

/* tide.norm(x [, p] [, dim] [, keepdim] [, {p=, dim=, keepdim=}]) */
static int t_norm(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "norm");
    double p = 2;
    int first = 2;
    if (lua_type(L, 2) == LUA_TNUMBER || lua_type(L, 2) == LUA_TSTRING || lua_isnil(L, 2)) {
        p = norm_p(L, 2);
        first = 3;
    }
    int top = lua_gettop(L);
    if (top >= first && lua_type(L, top) == LUA_TTABLE && !is_list(L, top)) {
        if (lt_getoption(L, top, "p") != LUA_TNIL)
            p = norm_p(L, lua_gettop(L));
        lua_pop(L, 1);
    }
    red_args a;
    reduce_args(L, first, x, "norm", false, &a);
    tide_tensor *r = tide_norm(x, p, dims_of(&a), a.ndims, a.keepdim);
    return push_results(L, r ? 0 : -1, &r, 1, "norm");
}

/* ---- scans ---------------------------------------------------------------------------------- */

static int scan(lua_State *L, const char *op, tide_tensor *(*fn)(const tide_tensor *, int))
{
    tide_tensor *x = lt_check(L, 1, op);
    if (lua_isnoneornil(L, 2))
        return luaL_error(L, "%s: expected a dim", op);
    int dim = lt_checkdim(L, 2, tide_ndim(x), 0, op);
    tide_tensor *r = fn(x, dim);
    return push_results(L, r ? 0 : -1, &r, 1, op);
}
static int t_cumprod(lua_State *L) { return scan(L, "cumprod", tide_cumprod); }
static int t_logcumsumexp(lua_State *L) { return scan(L, "logcumsumexp", tide_logcumsumexp); }

static int cumpick(lua_State *L, bool is_max)
{
    const char *op = is_max ? "cummax" : "cummin";
    tide_tensor *x = lt_check(L, 1, op);
    if (lua_isnoneornil(L, 2))
        return luaL_error(L, "%s: expected a dim", op);
    int dim = lt_checkdim(L, 2, tide_ndim(x), 0, op);
    tide_tensor *r[2] = {NULL, NULL};
    int rc = (is_max ? tide_cummax : tide_cummin)(x, dim, &r[0], &r[1]);
    if (rc == 0 && !(r[1] = one_based(r[1])))
        rc = -1;
    return push_results(L, rc, r, 2, op);
}
static int t_cummax(lua_State *L) { return cumpick(L, true); }
static int t_cummin(lua_State *L) { return cumpick(L, false); }

/* ---- sort, argsort, median, quantile -------------------------------------------------------- */

/* x:sort([dim] [, descending] [, {dim=, descending=, stable=}]) (dim: the last) */
static void sort_args(lua_State *L, const tide_tensor *x, const char *op, int *dim, bool *desc)
{
    static const char *const keys[] = {"dim", "descending", "stable", NULL};
    *dim = tide_ndim(x) > 0 ? tide_ndim(x) - 1 : 0;
    *desc = false;
    int top = lua_gettop(L);
    for (int i = 2; i <= top; i++) {
        int t = lua_type(L, i);
        if (t == LUA_TNUMBER && i == 2) {
            *dim = lt_checkdim(L, i, tide_ndim(x), 0, op);
        } else if (t == LUA_TBOOLEAN) {
            *desc = lua_toboolean(L, i);
        } else if (t == LUA_TTABLE && i == top) {
            lt_checkkeys(L, i, op, keys);
            if (lt_getoption(L, i, "dim") != LUA_TNIL)
                *dim = lt_checkdim(L, lua_gettop(L), tide_ndim(x), 0, op);
            lua_pop(L, 1);
            *desc = opt_flag(L, i, "descending", *desc, op);
            (void)opt_flag(L, i, "stable", false, op); /* always stable */
        } else if (t != LUA_TNIL) {
            luaL_error(L, "%s: unexpected argument %d (%s)", op, i, luaL_typename(L, i));
        }
    }
}

static int t_sort(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "sort");
    int dim;
    bool desc;
    sort_args(L, x, "sort", &dim, &desc);
    tide_tensor *r[2] = {NULL, NULL};
    int rc = tide_sort(x, dim, desc, true, &r[0], &r[1]);
    if (rc == 0 && !(r[1] = one_based(r[1])))
        rc = -1;
    return push_results(L, rc, r, 2, "sort");
}

static int t_argsort(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "argsort");
    int dim;
    bool desc;
    sort_args(L, x, "argsort", &dim, &desc);
    tide_tensor *r = one_based(tide_argsort(x, dim, desc, true));
    return push_results(L, r ? 0 : -1, &r, 1, "argsort");
}

/* x:median() -> the median of all; x:median(dim [, keepdim]) -> values, 1-based indices */
static int t_median(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "median");
    red_args a;
    reduce_args(L, 2, x, "median", false, &a);
    if (a.ndims > 1)
        return luaL_error(L, "median: expected one dim, got %d", a.ndims);
    tide_tensor *r[2] = {NULL, NULL};
    if (!a.has_dim) {
        int rc = tide_median(x, TIDE_ALL_DIMS, false, &r[0], NULL);
        return push_results(L, rc, r, 1, "median");
    }
    int rc = tide_median(x, a.dims[0], a.keepdim, &r[0], &r[1]);
    if (rc == 0 && !(r[1] = one_based(r[1])))
        rc = -1;
    return push_results(L, rc, r, 2, "median");
}

/* tide.quantile(x, q [, dim] [, keepdim] [, {dim=, keepdim=, interpolation=}]); q a number or
 * a 1-D tensor. */
static int t_quantile(lua_State *L)
{
    static const char *const keys[] = {"dim", "keepdim", "interpolation", NULL};
    const char *op = "quantile";
    tide_tensor *x = lt_check(L, 1, op);
    int dim = TIDE_ALL_DIMS, top = lua_gettop(L);
    bool number = lua_type(L, 2) == LUA_TNUMBER;
    tide_tensor *q = number ? NULL : lt_check(L, 2, op);
    bool keepdim = false;
    const char *interp = "linear";
    for (int i = 3; i <= top; i++) {
        int t = lua_type(L, i);
        if (t == LUA_TNUMBER && i == 3) {
            dim = lt_checkdim(L, i, tide_ndim(x), 0, op);
        } else if (t == LUA_TBOOLEAN) {
            keepdim = lua_toboolean(L, i);
        } else if (t == LUA_TTABLE && i == top) {
            lt_checkkeys(L, i, op, keys);
            if (lt_getoption(L, i, "dim") != LUA_TNIL)
                dim = lt_checkdim(L, lua_gettop(L), tide_ndim(x), 0, op);
            lua_pop(L, 1);
            keepdim = opt_flag(L, i, "keepdim", keepdim, op);
            int it = lt_getoption(L, i, "interpolation");
            if (it == LUA_TSTRING)
                interp = lua_tostring(L, -1); /* the options table keeps the string alive */
            else if (it != LUA_TNIL)
                return luaL_error(L, "%s: interpolation must be a string, got %s", op,
                                  luaL_typename(L, -1));
            lua_pop(L, 1);
        } else if (t != LUA_TNIL) {
            return luaL_error(L, "%s: unexpected argument %d (%s)", op, i, luaL_typename(L, i));
        }
    }
    tide_tensor *r = number ? tide_quantile_scalar(x, lua_tonumber(L, 2), dim, keepdim, interp)
                            : tide_quantile(x, q, dim, keepdim, interp);
    return push_results(L, r ? 0 : -1, &r, 1, op);
}

/* ---- nonzero, unique, searchsorted, bincount, histc ----------------------------------------- */

/* tide.nonzero(x [, {as_tuple = true}]) -> int64 [count, ndim] of 1-based coordinates, or with
 * as_tuple a table of ndim 1-D tensors (one per dim). */
static int t_nonzero(lua_State *L)
{
    static const char *const keys[] = {"as_tuple", NULL};
    tide_tensor *x = lt_check(L, 1, "nonzero");
    bool as_tuple = false;
    if (lua_istable(L, 2)) {
        lt_checkkeys(L, 2, "nonzero", keys);
        as_tuple = opt_flag(L, 2, "as_tuple", false, "nonzero");
    }
    lua_settop(L, 2);
    lt_box *b = lt_newbox(L);
    lt_fill(L, b, one_based(tide_nonzero(x)), false);
    if (!as_tuple)
        return 1;
    tide_tensor *all = lt_check(L, 3, "nonzero");
    int nd = tide_ndim(x) > 0 ? tide_ndim(x) : 1;
    lua_createtable(L, nd, 0);
    for (int d = 0; d < nd; d++) {
        lt_box *col = lt_newbox(L);
        tide_tensor *coord = tide_ndim(x) > 0 ? tide_select(all, 1, d) : NULL;
        tide_tensor *copy = coord ? tide_contiguous(coord) : NULL;
        tide_release(coord);
        lt_fill(L, col, copy, false);
        lua_rawseti(L, -2, d + 1);
    }
    return 1;
}

/* tide.unique(x [, sorted [, return_inverse [, return_counts]]] [, {sorted=, return_inverse=,
 * return_counts=, dim=}]) -> values [, 1-based inverse] [, counts] */
static int t_unique(lua_State *L)
{
    static const char *const keys[] = {"sorted", "return_inverse", "return_counts", "dim", NULL};
    const char *op = "unique";
    tide_tensor *x = lt_check(L, 1, op);
    bool flags[3] = {true, false, false};
    int top = lua_gettop(L), nflag = 0;
    for (int i = 2; i <= top; i++) {
        if (lua_type(L, i) == LUA_TBOOLEAN && nflag < 3) {
            flags[nflag++] = lua_toboolean(L, i);
        } else if (lua_type(L, i) == LUA_TTABLE && i == top) {
            lt_checkkeys(L, i, op, keys);
            flags[0] = opt_flag(L, i, "sorted", flags[0], op);
            flags[1] = opt_flag(L, i, "return_inverse", flags[1], op);
            flags[2] = opt_flag(L, i, "return_counts", flags[2], op);
            if (lt_getoption(L, i, "dim") != LUA_TNIL)
                return luaL_error(L, "%s: only dim = nil (the flattened input) is supported", op);
            lua_pop(L, 1);
        } else if (!lua_isnil(L, i)) {
            return luaL_error(L, "%s: unexpected argument %d (%s)", op, i, luaL_typename(L, i));
        }
    }
    tide_tensor *r[3] = {NULL, NULL, NULL};
    int rc = tide_unique(x, flags[0], &r[0], flags[1] ? &r[1] : NULL, flags[2] ? &r[2] : NULL);
    if (rc == 0 && flags[1] && !(r[1] = one_based(r[1])))
        rc = -1;
    int n = 1;
    if (flags[1])
        r[n++] = r[1];
    if (flags[2])
        r[n++] = r[2];
    return push_results(L, rc, r, n, op);
}

/* tide.searchsorted(sorted_sequence, values [, {right=, side=, out_int32=, sorter=}]) -> 1-based
 * insertion places (as table.insert's pos: 1..M+1). values may be a number. */
static int t_searchsorted(lua_State *L)
{
    static const char *const keys[] = {"right", "side", "out_int32", "sorter", NULL};
    const char *op = "searchsorted";
    tide_tensor *seq = lt_check(L, 1, op);
    lt_check_operand(L, 2, op);
    bool right = false, out_int32 = false;
    tide_tensor *sorter = NULL;
    if (lua_istable(L, 3)) {
        lt_checkkeys(L, 3, op, keys);
        right = opt_flag(L, 3, "right", false, op);
        out_int32 = opt_flag(L, 3, "out_int32", false, op);
        if (lt_getoption(L, 3, "side") == LUA_TSTRING) {
            const char *side = lua_tostring(L, -1);
            if (strcmp(side, "left") && strcmp(side, "right"))
                return luaL_error(L, "%s: side must be 'left' or 'right', got '%s'", op, side);
            if (right && strcmp(side, "left") == 0)
                return luaL_error(L, "%s: side 'left' contradicts right = true", op);
            right = strcmp(side, "right") == 0;
        }
        lua_pop(L, 1);
        if (lt_getoption(L, 3, "sorter") != LUA_TNIL)
            sorter = lt_check(L, lua_gettop(L), op);
        lua_pop(L, 1); /* the options table keeps sorter alive */
    }
    char err[256];
    tide_tensor *s0 = NULL;
    if (sorter) {
        int64_t m = tide_ndim(seq) > 0 ? tide_shape(seq)[tide_ndim(seq) - 1] : 0;
        s0 = lt_zero_based(sorter, m, op, "sorted_sequence", err, sizeof err);
        if (!s0)
            return err[0] ? luaL_error(L, "%s", err) : lt_raise(L, op);
    }
    lt_operand v = lt_make_operand(L, 2);
    tide_tensor *r = v.t ? tide_searchsorted(seq, v.t, out_int32, right, s0) : NULL;
    lt_free_operand(&v);
    tide_release(s0);
    r = one_based(r);
    if (r && out_int32) {
        tide_tensor *c = tide_cast(r, TIDE_INT32);
        tide_release(r);
        r = c;
    }
    return push_results(L, r ? 0 : -1, &r, 1, op);
}

/* tide.bincount(x [, weights] [, minlength] [, {weights=, minlength=}]) */
static int t_bincount(lua_State *L)
{
    static const char *const keys[] = {"weights", "minlength", NULL};
    const char *op = "bincount";
    tide_tensor *x = lt_check(L, 1, op), *w = NULL;
    int64_t minlength = 0;
    int top = lua_gettop(L);
    for (int i = 2; i <= top; i++) {
        if (lua_type(L, i) == LUA_TUSERDATA) {
            w = lt_check(L, i, op);
        } else if (lua_type(L, i) == LUA_TNUMBER) {
            minlength = lt_checkint(L, i, op, "minlength");
        } else if (lua_type(L, i) == LUA_TTABLE && i == top) {
            lt_checkkeys(L, i, op, keys);
            if (lt_getoption(L, i, "weights") != LUA_TNIL)
                w = lt_check(L, lua_gettop(L), op);
            lua_pop(L, 1);
            if (lt_getoption(L, i, "minlength") != LUA_TNIL)
                minlength = lt_checkint(L, lua_gettop(L), op, "minlength");
            lua_pop(L, 1);
        } else if (!lua_isnil(L, i)) {
            return luaL_error(L, "%s: unexpected argument %d (%s)", op, i, luaL_typename(L, i));
        }
    }
    tide_tensor *r = tide_bincount(x, w, minlength);
    return push_results(L, r ? 0 : -1, &r, 1, op);
}

/* tide.histc(x [, bins [, min [, max]]] [, {bins=, min=, max=}]) */
static int t_histc(lua_State *L)
{
    static const char *const keys[] = {"bins", "min", "max", NULL};
    const char *op = "histc";
    tide_tensor *x = lt_check(L, 1, op);
    int64_t bins = 100;
    double mm[2] = {0, 0};
    int top = lua_gettop(L), npos = 0;
    for (int i = 2; i <= top; i++) {
        if (lua_type(L, i) == LUA_TNUMBER && npos < 3) {
            if (npos == 0)
                bins = lt_checkint(L, i, op, "bins");
            else
                mm[npos - 1] = lua_tonumber(L, i);
            npos++;
        } else if (lua_type(L, i) == LUA_TTABLE && i == top) {
            lt_checkkeys(L, i, op, keys);
            if (lt_getoption(L, i, "bins") != LUA_TNIL)
                bins = lt_checkint(L, lua_gettop(L), op, "bins");
            lua_pop(L, 1);
            if (lt_getoption(L, i, "min") != LUA_TNIL)
                mm[0] = luaL_checknumber(L, -1);
            lua_pop(L, 1);
            if (lt_getoption(L, i, "max") != LUA_TNIL)
                mm[1] = luaL_checknumber(L, -1);
            lua_pop(L, 1);
        } else if (!lua_isnil(L, i)) {
            return luaL_error(L, "%s: unexpected argument %d (%s)", op, i, luaL_typename(L, i));
        }
    }
    tide_tensor *r = tide_histc(x, bins, mm[0], mm[1]);
    return push_results(L, r ? 0 : -1, &r, 1, op);
}

static const lt_reg stats_regs[] = {
    {"var", t_var, LT_BOTH},
    {"std", t_std, LT_BOTH},
    {"var_mean", t_var_mean, LT_BOTH},
    {"std_mean", t_std_mean, LT_BOTH},
    {"amax", t_amax, LT_BOTH},
    {"amin", t_amin, LT_BOTH},
    {"nansum", t_nansum, LT_BOTH},
    {"nanmean", t_nanmean, LT_BOTH},
    {"count_nonzero", t_count_nonzero, LT_BOTH},
    {"norm", t_norm, LT_BOTH},
    {"cumprod", t_cumprod, LT_BOTH},
    {"logcumsumexp", t_logcumsumexp, LT_BOTH},
    {"cummax", t_cummax, LT_BOTH},
    {"cummin", t_cummin, LT_BOTH},
    {"sort", t_sort, LT_BOTH},
    {"argsort", t_argsort, LT_BOTH},
    {"median", t_median, LT_BOTH},
    {"quantile", t_quantile, LT_BOTH},
    {"nonzero", t_nonzero, LT_BOTH},
    {"unique", t_unique, LT_BOTH},
    {"searchsorted", t_searchsorted, LT_FUNCTION},
    {"bincount", t_bincount, LT_BOTH},
    {"histc", t_histc, LT_BOTH},
    {NULL, NULL, 0},
};

void lt_open_stats(lua_State *L, int mt, int methods, int module)
{
    lt_setfuncs(L, stats_regs, mt, methods, module);
}
