/*
 * ltide_index.c — indexing from Lua. x[i] selects along dim 1 (a view); x[{2, {1, 3}, {}}] is
 * Torch7's form: a number selects (dropping the dim), {a, b} is the inclusive range a..b,
 * {a, b, step} steps, {a} is a..a keeping the dim, {} keeps the whole dim; negative positions
 * count from the end. Assignment writes a number or a tensor into that view. x[mask] = v writes
 * where a bool mask is true; x[index_tensor] picks rows (index_select along dim 1).
 *
 * Also the ops that take index tensors (gather, scatter_add, index_select, embedding, one_hot)
 * and masked_fill: Lua's index values are 1-based, so they are checked against 1..size here
 * (naming the op and the Lua values) and shifted down by one for the C API.
 */
#include <string.h>

#include "ltide.h"

enum { IX_SELECT, IX_SLICE, IX_ALL };

typedef struct ix_entry {
    int kind;
    int64_t start, end, step; /* 0-based, end excluded; start for a select */
} ix_entry;

/* Reads entry e of an index table: an integer for a range bound. */
static int64_t range_value(lua_State *L, int tbl, int i, const char *what)
{
    lua_rawgeti(L, tbl, i);
    int64_t v = lt_checkint(L, -1, "index", what);
    lua_pop(L, 1);
    return v;
}

/* Parses the key at stack slot key for tensor x into entries; returns how many. Raises on any
 * mistake, before a tensor has been made. */
static int parse_key(lua_State *L, tide_tensor *x, int key, ix_entry *e)
{
    int nd = tide_ndim(x);
    const int64_t *shape = tide_shape(x);
    if (lua_type(L, key) == LUA_TNUMBER) {
        if (nd == 0)
            luaL_error(L, "index: a 0-dim tensor cannot be indexed with a number (use x:item())");
        e[0].kind = IX_SELECT;
        e[0].start = lt_position(L, lt_checkint(L, key, "index", "an index"), shape[0], "index", 0);
        return 1;
    }
    lua_Unsigned n = lua_rawlen(L, key);
    if (n > (lua_Unsigned)nd)
        luaL_error(L, "index: %d entries given for a tensor with %d dims", (int)n, nd);
    for (int d = 0; d < (int)n; d++) {
        int type = lua_rawgeti(L, key, d + 1);
        int item = lua_gettop(L);
        if (type == LUA_TNUMBER) {
            e[d].kind = IX_SELECT;
            e[d].start = lt_position(L, lt_checkint(L, item, "index", "an index"), shape[d],
                                     "index", d);
        } else if (type == LUA_TTABLE) {
            lua_Unsigned len = lua_rawlen(L, item);
            if (len == 0) {
                e[d].kind = IX_ALL;
            } else if (len > 3) {
                luaL_error(L, "index: the range for dim %d has %d entries; expected {}, {a}, "
                           "{a, b} or {a, b, step}", d + 1, (int)len);
            } else {
                int64_t a = range_value(L, item, 1, "a range start");
                int64_t b = len >= 2 ? range_value(L, item, 2, "a range end") : a;
                int64_t step = len == 3 ? range_value(L, item, 3, "a range step") : 1;
                if (step <= 0)
                    luaL_error(L, "index: the step for dim %d must be positive, got %I", d + 1,
                               (lua_Integer)step);
                int64_t size = shape[d];
                int64_t a0 = a < 0 ? size + a : a - 1;
                int64_t b0 = b < 0 ? size + b : b - 1;
                if (a == 0 || b == 0 || a0 < 0 || (b < 0 && b0 < 0) || a0 > size ||
                    b0 >= size || b0 < a0 - 1)
                    luaL_error(L, "index: the range {%I, %I} does not fit in dim %d of size %I "
                               "(positions 1..%I, or -%I..-1 from the end)", (lua_Integer)a,
                               (lua_Integer)b, d + 1, (lua_Integer)size, (lua_Integer)size,
                               (lua_Integer)size);
                e[d].kind = IX_SLICE;
                e[d].start = a0;
                e[d].end = b0 + 1;
                e[d].step = step;
            }
        } else {
            luaL_error(L, "index: entry %d must be a number or a range table, got %s", d + 1,
                       luaL_typename(L, item));
        }
        lua_pop(L, 1);
    }
    return (int)n;
}

/* The view the entries describe (new reference), or NULL with the C error set. */
static tide_tensor *apply_key(tide_tensor *x, const ix_entry *e, int n)
{
    tide_tensor *cur = tide_retain(x);
    int dim = 0;
    for (int i = 0; i < n && cur; i++) {
        tide_tensor *next;
        if (e[i].kind == IX_ALL) {
            dim++;
            continue;
        }
        if (e[i].kind == IX_SELECT) {
            next = tide_select(cur, dim, e[i].start);
        } else {
            next = tide_slice(cur, dim, e[i].start, e[i].end, e[i].step);
            dim++;
        }
        tide_release(cur);
        cur = next;
    }
    return cur;
}

/* ---- index tensors: 1-based values checked and shifted --------------------------------------- */

static void check_index_dtype(lua_State *L, tide_tensor *idx, const char *op)
{
    tide_dtype d = tide_get_dtype(idx);
    if (d != TIDE_INT64 && d != TIDE_INT32)
        luaL_error(L, "%s: the index must be an int64 or int32 tensor, got %s", op,
                   tide_dtype_name(d));
}

/* Reads a one-element tensor as an integer; false on failure. */
static bool read_int(tide_tensor *t, int64_t *v)
{
    if (!t)
        return false;
    tide_tensor *l = tide_cast(t, TIDE_INT64);
    bool ok = l && tide_to_buffer(l, v, sizeof *v) == 0;
    tide_release(l);
    return ok;
}

/* idx - 1, after checking every value is in 1..limit (limit < 0: no upper bound). Returns a new
 * reference, or NULL with a message in err (or, when err is empty, in tide_last_error()). */
tide_tensor *lt_zero_based(tide_tensor *idx, int64_t limit, const char *op, const char *what,
                               char *err, size_t errsize)
{
    err[0] = 0;
    /* The range check reads the indices, which would end a jit segment on every call (a
     * training step's targets); while tracing, the kernels' own bounds check reports a bad index
     * instead (in 0-based terms: the value after the shift). */
    if (tide_numel(idx) > 0 && !tide_jit_is_tracing()) {
        tide_tensor *lo = tide_min(idx, NULL, 0, false);
        tide_tensor *hi = lo ? tide_max(idx, NULL, 0, false) : NULL;
        int64_t vlo = 0, vhi = 0;
        bool ok = read_int(lo, &vlo) && read_int(hi, &vhi);
        tide_release(lo);
        tide_release(hi);
        if (!ok)
            return NULL;
        bool low = vlo < 1, high = limit >= 0 && vhi > limit;
        int64_t bad = low ? vlo : vhi;
        if (low || high) {
            if (limit >= 0)
                snprintf(err, errsize, "%s: index value %lld is out of range for %s of size %lld "
                         "(index values are 1-based: 1..%lld)", op, (long long)bad, what,
                         (long long)limit, (long long)limit);
            else
                snprintf(err, errsize, "%s: index value %lld is out of range (index values are "
                         "1-based)", op, (long long)bad);
            return NULL;
        }
    }
    tide_tensor *one = tide_integer(1);
    tide_tensor *r = one ? tide_sub(idx, one) : NULL;
    tide_release(one);
    return r;
}

static int raise_err(lua_State *L, const char *err)
{
    if (err[0])
        return luaL_error(L, "%s", err);
    return lt_raise(L, NULL);
}

/* The rows of x picked by a 1-based integer index tensor of any shape: index.shape + rest. */
static tide_tensor *pick_rows(tide_tensor *x, tide_tensor *idx, char *err, size_t errsize)
{
    lt_temps k = {.n = 0};
    tide_tensor *r = NULL;
    int64_t flat = -1;
    tide_tensor *i0 =
        lt_keep(&k, lt_zero_based(idx, tide_shape(x)[0], "index", "dim 1", err, errsize));
    tide_tensor *i1 = i0 ? lt_keep(&k, tide_reshape(i0, 1, &flat)) : NULL;
    tide_tensor *rows = i1 ? lt_keep(&k, tide_index_select(x, 0, i1)) : NULL;
    if (rows) {
        int64_t shape[2 * TIDE_MAX_DIMS];
        int n = 0;
        for (int i = 0; i < tide_ndim(idx); i++)
            shape[n++] = tide_shape(idx)[i];
        for (int i = 1; i < tide_ndim(x); i++)
            shape[n++] = tide_shape(x)[i];
        if (n > TIDE_MAX_DIMS)
            snprintf(err, errsize, "index: the result would have more than %d dims", TIDE_MAX_DIMS);
        else
            r = tide_reshape(rows, n, shape);
    }
    lt_drop(&k);
    return r;
}

/* ---- __index / __newindex -------------------------------------------------------------------- */

int lt_index_get(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "index");
    int type = lua_type(L, 2);
    tide_tensor *idx;
    if (type == LUA_TUSERDATA && (idx = lt_totensor(L, 2))) {
        if (tide_get_dtype(idx) == TIDE_BOOL)
            return luaL_error(L, "index: reading through a bool mask is not supported (use "
                              "tide.where or x:masked_fill); x[mask] = v assigns");
        check_index_dtype(L, idx, "index");
        if (tide_ndim(x) == 0)
            return luaL_error(L, "index: a 0-dim tensor cannot be indexed with a tensor");
        lua_settop(L, 2);
        lt_box *b = lt_newbox(L);
        char err[300];
        tide_tensor *r = pick_rows(x, idx, err, sizeof err);
        if (!r)
            return raise_err(L, err);
        return lt_fill(L, b, r, false);
    }
    if (type != LUA_TNUMBER && type != LUA_TTABLE)
        return luaL_error(L, "index: a tensor is indexed with an integer, a table such as "
                          "{2, {1, 3}, {}} or a tensor, got %s", luaL_typename(L, 2));
    ix_entry e[TIDE_MAX_DIMS];
    int n = parse_key(L, x, 2, e);
    lua_settop(L, 2);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, apply_key(x, e, n), true);
}

/* Writes the value at slot v into view: a number, a boolean or a tensor (broadcast). */
static int assign(tide_tensor *view, lua_State *L, int v)
{
    if (lua_type(L, v) == LUA_TNUMBER && lua_isinteger(L, v)) {
        tide_tensor *n = tide_integer((int64_t)lua_tointeger(L, v));
        int rc = n ? tide_copy_(view, n) : -1;
        tide_release(n);
        return rc;
    }
    if (lua_type(L, v) == LUA_TNUMBER)
        return tide_fill_(view, lua_tonumber(L, v));
    if (lua_type(L, v) == LUA_TBOOLEAN)
        return tide_fill_(view, lua_toboolean(L, v));
    return tide_copy_(view, ((lt_box *)lua_touserdata(L, v))->t);
}

int lt_index_set(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "newindex");
    int vt = lua_type(L, 3);
    if (vt != LUA_TNUMBER && vt != LUA_TBOOLEAN && !lt_totensor(L, 3))
        return luaL_error(L, "index: the assigned value must be a number, a boolean or a "
                          "tensor, got %s", luaL_typename(L, 3));
    int type = lua_type(L, 2);
    tide_tensor *mask;
    if (type == LUA_TUSERDATA && (mask = lt_totensor(L, 2))) {
        if (tide_get_dtype(mask) != TIDE_BOOL)
            return luaL_error(L, "index: assignment through a tensor key needs a bool mask, got "
                              "a %s tensor", tide_dtype_name(tide_get_dtype(mask)));
        lt_operand v = lt_make_operand(L, 3);
        tide_tensor *r = v.t ? tide_where(mask, v.t, x) : NULL;
        lt_free_operand(&v);
        int rc = -1;
        if (r) {
            int nd = tide_ndim(x);
            if (tide_ndim(r) == nd && memcmp(tide_shape(r), tide_shape(x), 8 * (size_t)nd) == 0) {
                rc = tide_copy_(x, r);
            } else {
                char a[200], b[200];
                tide_release(r);
                return luaL_error(L, "index: the mask and value (broadcast to %s) do not fit the "
                                  "tensor of shape %s", lt_shape_str(a, sizeof a, r),
                                  lt_shape_str(b, sizeof b, x));
            }
        }
        tide_release(r);
        return rc < 0 ? lt_raise(L, NULL) : 0;
    }
    if (type != LUA_TNUMBER && type != LUA_TTABLE)
        return luaL_error(L, "index: a tensor is indexed with an integer, a table such as "
                          "{2, {1, 3}, {}} or a bool mask, got %s", luaL_typename(L, 2));
    ix_entry e[TIDE_MAX_DIMS];
    int n = parse_key(L, x, 2, e);
    tide_tensor *view = apply_key(x, e, n);
    int rc = view ? assign(view, L, 3) : -1;
    tide_release(view);
    return rc < 0 ? lt_raise(L, NULL) : 0;
}

/* The __index metamethod: methods first (one table lookup), then attributes and indexing. */
static int t_index(lua_State *L)
{
    if (lua_type(L, 2) == LUA_TSTRING) {
        lua_pushvalue(L, 2);
        if (lua_rawget(L, lua_upvalueindex(2)) != LUA_TNIL)
            return 1;
        lua_pop(L, 1);
        return lt_attr_get(L);
    }
    return lt_index_get(L);
}

static int t_newindex(lua_State *L)
{
    if (lua_type(L, 2) == LUA_TSTRING)
        return lt_attr_set(L);
    return lt_index_set(L);
}

/* ---- ops with index tensors ------------------------------------------------------------------ */

/* x:gather(dim, index) */
static int t_gather(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "gather");
    int d = lt_checkdim(L, 2, tide_ndim(x), 0, "gather");
    tide_tensor *idx = lt_check(L, 3, "gather");
    check_index_dtype(L, idx, "gather");
    lua_settop(L, 3);
    lt_box *b = lt_newbox(L);
    char err[300];
    int64_t size = tide_ndim(x) ? tide_shape(x)[d] : 1;
    tide_tensor *i0 = lt_zero_based(idx, size, "gather", "the gathered dim", err, sizeof err);
    if (!i0)
        return raise_err(L, err);
    tide_tensor *r = tide_gather(x, d, i0);
    tide_release(i0);
    return lt_fill(L, b, r, false);
}

/* x:index_select(dim, index) */
static int t_index_select(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "index_select");
    int d = lt_checkdim(L, 2, tide_ndim(x), 0, "index_select");
    tide_tensor *idx = lt_check(L, 3, "index_select");
    check_index_dtype(L, idx, "index_select");
    lua_settop(L, 3);
    lt_box *b = lt_newbox(L);
    char err[300];
    int64_t size = tide_ndim(x) ? tide_shape(x)[d] : 1;
    tide_tensor *i0 = lt_zero_based(idx, size, "index_select", "the selected dim", err, sizeof err);
    if (!i0)
        return raise_err(L, err);
    tide_tensor *r = tide_index_select(x, d, i0);
    tide_release(i0);
    return lt_fill(L, b, r, false);
}

/* x:scatter_add(dim, index, src) (a copy) and x:scatter_add_(dim, index, src) (in place) */
typedef struct scatter_args {
    tide_tensor *x, *idx, *src;
    int dim;
} scatter_args;

static void scatter_check(lua_State *L, const char *op, scatter_args *a)
{
    a->x = lt_check(L, 1, op);
    a->dim = lt_checkdim(L, 2, tide_ndim(a->x), 0, op);
    a->idx = lt_check(L, 3, op);
    a->src = lt_check(L, 4, op);
    check_index_dtype(L, a->idx, op);
    lua_settop(L, 4);
}

static tide_tensor *scatter_run(const scatter_args *a, const char *op, char *err, size_t errsize)
{
    int64_t size = tide_ndim(a->x) ? tide_shape(a->x)[a->dim] : 1;
    tide_tensor *i0 = lt_zero_based(a->idx, size, op, "the scattered dim", err, errsize);
    tide_tensor *r = i0 ? tide_scatter_add(a->x, a->dim, i0, a->src) : NULL;
    tide_release(i0);
    return r;
}

static int t_scatter_add(lua_State *L)
{
    scatter_args a;
    scatter_check(L, "scatter_add", &a);
    lt_box *b = lt_newbox(L);
    char err[300];
    tide_tensor *r = scatter_run(&a, "scatter_add", err, sizeof err);
    if (!r)
        return raise_err(L, err);
    return lt_fill(L, b, r, false);
}

static int t_scatter_add_(lua_State *L)
{
    scatter_args a;
    scatter_check(L, "scatter_add_", &a);
    char err[300];
    tide_tensor *r = scatter_run(&a, "scatter_add_", err, sizeof err);
    if (!r)
        return raise_err(L, err);
    return lt_write_back(L, 1, a.x, r, "scatter_add_");
}

/* tide.embedding(indices, weight), as torch's F.embedding */
static int f_embedding(lua_State *L)
{
    tide_tensor *idx = lt_check(L, 1, "embedding");
    tide_tensor *w = lt_check(L, 2, "embedding");
    check_index_dtype(L, idx, "embedding");
    if (tide_ndim(w) != 2) {
        char s[200];
        return luaL_error(L, "embedding: the weight must be 2-dim [num, dim], got shape %s",
                          lt_shape_str(s, sizeof s, w));
    }
    lua_settop(L, 2);
    lt_box *b = lt_newbox(L);
    char err[300];
    tide_tensor *i0 = lt_zero_based(idx, tide_shape(w)[0], "embedding", "the embedding table", err,
                                 sizeof err);
    if (!i0)
        return raise_err(L, err);
    tide_tensor *r = tide_embedding(w, i0);
    tide_release(i0);
    return lt_fill(L, b, r, false);
}

/* tide.one_hot(indices [, num_classes]): class c (1-based) sets column c. */
static int f_one_hot(lua_State *L)
{
    tide_tensor *idx = lt_check(L, 1, "one_hot");
    check_index_dtype(L, idx, "one_hot");
    int64_t classes = lua_isnoneornil(L, 2) ? -1 : lt_checkint(L, 2, "one_hot", "num_classes");
    if (classes < -1)
        return luaL_error(L, "one_hot: num_classes must be positive (or -1), got %I",
                          (lua_Integer)classes);
    lua_settop(L, 2);
    lt_box *b = lt_newbox(L);
    char err[300];
    tide_tensor *i0 = lt_zero_based(idx, classes, "one_hot", "num_classes", err, sizeof err);
    if (!i0)
        return raise_err(L, err);
    tide_tensor *r = tide_one_hot(i0, classes);
    tide_release(i0);
    return lt_fill(L, b, r, false);
}

/* x:masked_fill(mask, value), x:masked_fill_(mask, value) */
static int masked_fill(lua_State *L, bool inplace)
{
    const char *op = inplace ? "masked_fill_" : "masked_fill";
    tide_tensor *x = lt_check(L, 1, op);
    tide_tensor *mask = lt_check(L, 2, op);
    if (lua_type(L, 3) != LUA_TNUMBER && lua_type(L, 3) != LUA_TBOOLEAN)
        return luaL_error(L, "%s: the value must be a number, got %s", op, luaL_typename(L, 3));
    double v = lua_type(L, 3) == LUA_TBOOLEAN ? lua_toboolean(L, 3) : lua_tonumber(L, 3);
    lua_settop(L, 3);
    if (inplace)
        return lt_write_back(L, 1, x, tide_masked_fill(x, mask, v), op);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_masked_fill(x, mask, v), false);
}
static int t_masked_fill(lua_State *L) { return masked_fill(L, false); }
static int t_masked_fill_(lua_State *L) { return masked_fill(L, true); }

static const lt_reg index_regs[] = {
    {"gather", t_gather, LT_BOTH},
    {"index_select", t_index_select, LT_BOTH},
    {"scatter_add", t_scatter_add, LT_BOTH},
    {"scatter_add_", t_scatter_add_, LT_METHOD},
    {"embedding", f_embedding, LT_FUNCTION},
    {"one_hot", f_one_hot, LT_BOTH},
    {"masked_fill", t_masked_fill, LT_BOTH},
    {"masked_fill_", t_masked_fill_, LT_METHOD},
    {NULL, NULL, 0},
};

void lt_open_index(lua_State *L, int mt, int methods, int module)
{
    lt_setfuncs(L, index_regs, mt, methods, module);
    lua_pushvalue(L, mt);
    lua_pushvalue(L, methods);
    lua_pushcclosure(L, t_index, 2);
    lua_setfield(L, mt, "__index");
    lua_pushvalue(L, mt);
    lua_pushcclosure(L, t_newindex, 1);
    lua_setfield(L, mt, "__newindex");
}
