/*
 * ltide_shape_ops.c — shape and indexing composites from Lua: tile, roll, repeat_interleave,
 * unbind, movedim/moveaxis, swapaxes/swapdims, broadcast_to, vstack/hstack/dstack/
 * column_stack, tensor_split, split_with_sizes, rot90, fliplr, flipud, meshgrid,
 * cartesian_prod, atleast_1d/2d/3d, x:unfold; masked_select, take, scatter(_), index_add(_),
 * index_copy(_), index_fill(_). Dims and index values are 1-based (converted here).
 */
#include <string.h>

#include "ltide.h"

static int raise_msg(lua_State *L, const char *err)
{
    return err[0] ? luaL_error(L, "%s", err) : lt_raise(L, NULL);
}

/* Integers given one by one from first, or as one table at first. */
static int int_list(lua_State *L, int first, const char *op, const char *what, int64_t *out)
{
    if (lua_type(L, first) == LUA_TTABLE) {
        int n = (int)lua_rawlen(L, first);
        if (n > TIDE_MAX_DIMS)
            luaL_error(L, "%s: at most %d %s, got %d", op, TIDE_MAX_DIMS, what, n);
        for (int i = 0; i < n; i++) {
            lua_rawgeti(L, first, i + 1);
            out[i] = lt_checkint(L, -1, op, what);
            lua_pop(L, 1);
        }
        return n;
    }
    int n = lua_gettop(L) - first + 1;
    if (n > TIDE_MAX_DIMS)
        luaL_error(L, "%s: at most %d %s, got %d", op, TIDE_MAX_DIMS, what, n);
    for (int i = 0; i < n; i++)
        out[i] = lt_checkint(L, first + i, op, what);
    return n < 0 ? 0 : n;
}

static int t_tile(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "tile");
    int64_t reps[TIDE_MAX_DIMS];
    int n = int_list(L, 2, "tile", "repetitions", reps);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_tile(x, n, reps), false);
}

/* roll(x, shifts [, dims]): numbers or tables of numbers. */
static int t_roll(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "roll");
    int64_t shifts[TIDE_MAX_DIMS];
    lua_settop(L, 3);
    int ns = lua_type(L, 2) == LUA_TTABLE ? int_list(L, 2, "roll", "shifts", shifts)
                                          : (shifts[0] = lt_checkint(L, 2, "roll", "shift"), 1);
    int dims[TIDE_MAX_DIMS], nd = lua_isnil(L, 3) ? 0 : lt_checkdims(L, 3, tide_ndim(x), "roll", dims);
    if (nd != (nd ? ns : 0) || (nd == 0 && ns != 1))
        return luaL_error(L, "roll: %d shifts for %d dims; give one shift per dim", ns, nd);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_roll(x, ns, shifts, dims, nd), false);
}

/* repeat_interleave(x, repeats [, dim]): repeats an integer or an integer tensor. */
static int t_repeat_interleave(lua_State *L)
{
    const char *op = "repeat_interleave";
    tide_tensor *x = lt_check(L, 1, op);
    tide_tensor *rt = lt_totensor(L, 2);
    int64_t r = rt ? 0 : lt_checkint(L, 2, op, "repeats");
    int d = 0;
    bool has_dim = !lua_isnoneornil(L, 3);
    if (has_dim)
        d = lt_checkdim(L, 3, tide_ndim(x), 0, op);
    lua_settop(L, 3);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, rt ? tide_repeat_interleave_tensor(x, rt, has_dim ? &d : NULL)
                            : tide_repeat_interleave(x, r, has_dim ? &d : NULL), false);
}

/* unbind(x [, dim]) -> a table of the selected views. */
static int t_unbind(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "unbind");
    if (tide_ndim(x) == 0)
        return luaL_error(L, "unbind: a 0-dim tensor has no dim to unbind");
    int d = lua_isnoneornil(L, 2) ? 0 : lt_checkdim(L, 2, tide_ndim(x), 0, "unbind");
    int64_t n = tide_shape(x)[d];
    lua_createtable(L, n > 100000 ? 0 : (int)n, 0);
    for (int64_t i = 0; i < n; i++) {
        lt_box *b = lt_newbox(L);
        lt_fill(L, b, tide_select(x, d, i), true);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
    return 1;
}

/* movedim(x, source, destination): dims or tables of dims. */
static int t_movedim(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "movedim");
    int src[TIDE_MAX_DIMS], dst[TIDE_MAX_DIMS];
    int ns = lt_checkdims(L, 2, tide_ndim(x), "movedim", src);
    int nd = lt_checkdims(L, 3, tide_ndim(x), "movedim", dst);
    if (ns != nd)
        return luaL_error(L, "movedim: %d source dims but %d destinations", ns, nd);
    lua_settop(L, 3);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_movedim(x, ns, src, dst), true);
}

static int t_swapaxes(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "swapaxes");
    int a = lt_checkdim(L, 2, tide_ndim(x), 0, "swapaxes");
    int c = lt_checkdim(L, 3, tide_ndim(x), 0, "swapaxes");
    lua_settop(L, 3);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_transpose(x, a, c), true);
}

static int t_broadcast_to(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "broadcast_to");
    int64_t shape[TIDE_MAX_DIMS];
    int nd = lt_checksizes(L, 2, lua_gettop(L), "broadcast_to", true, shape);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_expand(x, nd, shape), true);
}

static tide_tensor **tensor_table(lua_State *L, int arg, const char *op, int *n)
{
    if (lua_type(L, arg) != LUA_TTABLE || lt_totensor(L, arg))
        luaL_error(L, "%s: expected a table of tensors, got %s", op, luaL_typename(L, arg));
    int len = (int)lua_rawlen(L, arg);
    if (len <= 0 || len > 64)
        luaL_error(L, "%s: expected 1 to 64 tensors, got %d", op, len);
    tide_tensor **xs = lua_newuserdatauv(L, (size_t)len * sizeof *xs, 0);
    for (int i = 0; i < len; i++) {
        lua_rawgeti(L, arg, i + 1);
        xs[i] = lt_totensor(L, -1);
        if (!xs[i])
            luaL_error(L, "%s: element %d is a %s, not a tensor", op, i + 1, luaL_typename(L, -1));
        lua_pop(L, 1);
    }
    *n = len;
    return xs;
}

/* vstack/hstack/dstack/column_stack({tensors}); upvalue 2 picks one. */
static int t_stacks(lua_State *L)
{
    static const char *const names[] = {"vstack", "hstack", "dstack", "column_stack"};
    int which = (int)lua_tointeger(L, lua_upvalueindex(2)), n;
    lua_settop(L, 1);
    tide_tensor **xs = tensor_table(L, 1, names[which], &n);
    lt_box *b = lt_newbox(L);
    tide_tensor *r = which == 0   ? tide_vstack(xs, n)
                     : which == 1 ? tide_hstack(xs, n)
                     : which == 2 ? tide_dstack(xs, n)
                                  : tide_column_stack(xs, n);
    return lt_fill(L, b, r, false);
}

/* tensor_split(x, n or {boundaries} [, dim]): n near-equal views (the first size % n one
 * larger), or views split before each boundary (PyTorch's numbers: a boundary counts the
 * elements before it, so {1, 4} gives x[1..1], x[2..4], x[5..]). */
static int t_tensor_split(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "tensor_split");
    if (tide_ndim(x) == 0)
        return luaL_error(L, "tensor_split: a 0-dim tensor cannot be split");
    int d = lua_isnoneornil(L, 3) ? 0 : lt_checkdim(L, 3, tide_ndim(x), 0, "tensor_split");
    int64_t size = tide_shape(x)[d];
    int64_t bounds[65];
    int nb = 0;
    if (lua_type(L, 2) == LUA_TTABLE) {
        nb = (int)lua_rawlen(L, 2);
        if (nb > 64)
            return luaL_error(L, "tensor_split: at most 64 boundaries");
        for (int i = 0; i < nb; i++) {
            lua_rawgeti(L, 2, i + 1);
            bounds[i] = lt_checkint(L, -1, "tensor_split", "a boundary");
            lua_pop(L, 1);
        }
    } else {
        int64_t n = lt_checkint(L, 2, "tensor_split", "the number of sections");
        if (n <= 0 || n > 65)
            return luaL_error(L, "tensor_split: sections must be 1 to 65, got %I", (lua_Integer)n);
        for (int64_t i = 1, at = 0; i < n; i++) {
            at += size / n + (i - 1 < size % n);
            bounds[nb++] = at;
        }
    }
    lua_createtable(L, nb + 1, 0);
    int64_t start = 0;
    for (int i = 0; i <= nb; i++) {
        int64_t end = i < nb ? bounds[i] : size;
        end = end < 0 ? end + size : end;
        end = end > size ? size : end < start ? start : end;
        lt_box *b = lt_newbox(L);
        lt_fill(L, b, tide_slice(x, d, start, end, 1), true);
        lua_rawseti(L, -2, i + 1);
        start = end;
    }
    return 1;
}

static int t_split_with_sizes(lua_State *L)
{
    lt_check(L, 1, "split_with_sizes");
    if (lua_type(L, 2) != LUA_TTABLE)
        return luaL_error(L, "split_with_sizes: sizes must be a table, got %s",
                          luaL_typename(L, 2));
    lua_getfield(L, lua_upvalueindex(2), "split");
    lua_insert(L, 1);
    lua_call(L, lua_gettop(L) - 1, 1);
    return 1;
}

/* rot90(x [, k [, dims]]) with dims {1, 2} by default. */
static int t_rot90(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "rot90");
    int64_t k = lua_isnoneornil(L, 2) ? 1 : lt_checkint(L, 2, "rot90", "k");
    int dims[TIDE_MAX_DIMS] = {0, 1};
    if (tide_ndim(x) < 2)
        return luaL_error(L, "rot90: input must have at least 2 dims, got %d", tide_ndim(x));
    if (!lua_isnoneornil(L, 3) && lt_checkdims(L, 3, tide_ndim(x), "rot90", dims) != 2)
        return luaL_error(L, "rot90: dims must name exactly 2 dims");
    lua_settop(L, 3);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_rot90(x, k, dims[0], dims[1]), false);
}

/* fliplr (dim 2) and flipud (dim 1); upvalue 2 picks one. */
static int t_flip_lr_ud(lua_State *L)
{
    int ud = (int)lua_tointeger(L, lua_upvalueindex(2));
    const char *op = ud ? "flipud" : "fliplr";
    tide_tensor *x = lt_check(L, 1, op);
    if (tide_ndim(x) < (ud ? 1 : 2))
        return luaL_error(L, "%s: input must have at least %d dims, got %d", op, ud ? 1 : 2,
                          tide_ndim(x));
    int d = ud ? 0 : 1;
    lua_settop(L, 1);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_flip(x, &d, 1), false);
}

/* meshgrid(a, b, ... [, {indexing = "ij"|"xy"}]) or meshgrid({a, b, ...} [, opts]): one
 * expanded view per input, returned as several values. */
static int t_meshgrid(lua_State *L)
{
    int top = lua_gettop(L), n = 0;
    int opts = top >= 1 && lua_type(L, top) == LUA_TTABLE && !lt_totensor(L, top) &&
                       (top > 1 || lua_rawlen(L, top) == 0)
                   ? top : 0;
    bool xy = false;
    if (opts) {
        lt_checkkeys(L, opts, "meshgrid", (const char *const[]){"indexing", NULL});
        lua_getfield(L, opts, "indexing");
        const char *ix = lua_isnil(L, -1) ? "ij" : luaL_checkstring(L, -1);
        if (strcmp(ix, "ij") != 0 && strcmp(ix, "xy") != 0)
            return luaL_error(L, "meshgrid: indexing must be \"ij\" or \"xy\", got \"%s\"", ix);
        xy = ix[0] == 'x';
        lua_pop(L, 1);
    }
    int last = opts ? top - 1 : top;
    tide_tensor *xs[TIDE_MAX_DIMS];
    bool list = lua_type(L, 1) == LUA_TTABLE && !lt_totensor(L, 1);
    n = list ? (int)lua_rawlen(L, 1) : last;
    if (n < 1 || n > TIDE_MAX_DIMS)
        return luaL_error(L, "meshgrid: expected 1 to %d tensors, got %d", TIDE_MAX_DIMS, n);
    for (int i = 0; i < n; i++) {
        if (list)
            lua_rawgeti(L, 1, i + 1);
        else
            lua_pushvalue(L, i + 1);
        xs[i] = lt_check(L, -1, "meshgrid");
        lua_pop(L, 1);
    }
    luaL_checkstack(L, n + 2, "meshgrid");
    lt_box *boxes[TIDE_MAX_DIMS];
    for (int i = 0; i < n; i++) /* the boxes first: nothing raises once the views exist */
        boxes[i] = lt_newbox(L);
    tide_tensor *out[TIDE_MAX_DIMS];
    if (tide_meshgrid(xs, n, xy, out) < 0)
        return lt_raise(L, NULL);
    for (int i = 0; i < n; i++)
        boxes[i]->t = out[i];
    return n;
}

static int t_cartesian_prod(lua_State *L)
{
    tide_tensor *xs[TIDE_MAX_DIMS];
    bool list = lua_type(L, 1) == LUA_TTABLE && !lt_totensor(L, 1);
    int n = list ? (int)lua_rawlen(L, 1) : lua_gettop(L);
    if (n < 1 || n > TIDE_MAX_DIMS)
        return luaL_error(L, "cartesian_prod: expected 1 to %d tensors, got %d", TIDE_MAX_DIMS, n);
    for (int i = 0; i < n; i++) {
        if (list)
            lua_rawgeti(L, 1, i + 1);
        else
            lua_pushvalue(L, i + 1);
        xs[i] = lt_check(L, -1, "cartesian_prod");
        lua_pop(L, 1);
    }
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_cartesian_prod(xs, n), false);
}

static int t_atleast(lua_State *L)
{
    int nd = (int)lua_tointeger(L, lua_upvalueindex(2));
    tide_tensor *x = lt_check(L, 1, nd == 1 ? "atleast_1d" : nd == 2 ? "atleast_2d" : "atleast_3d");
    lua_settop(L, 1);
    lt_box *b = lt_newbox(L);
    tide_tensor *r = tide_atleast(x, nd);
    return lt_fill(L, b, r, r && tide_shares_storage(r, x));
}

/* x:unfold(dim, size, step): a view of the windows. */
static int t_unfold(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "unfold");
    int d = lt_checkdim(L, 2, tide_ndim(x), 0, "unfold");
    int64_t size = lt_checkint(L, 3, "unfold", "size"), step = lt_checkint(L, 4, "unfold", "step");
    lua_settop(L, 4);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_unfold(x, d, size, step), true);
}

/* ---- indexing -------------------------------------------------------------------------------- */

static void check_index(lua_State *L, tide_tensor *idx, const char *op)
{
    tide_dtype dt = tide_get_dtype(idx);
    if (dt != TIDE_INT64 && dt != TIDE_INT32)
        luaL_error(L, "%s: index must be an int64 or int32 tensor, got %s", op,
                   tide_dtype_name(dt));
}

static int t_masked_select(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "masked_select"), *m = lt_check(L, 2, "masked_select");
    lua_settop(L, 2);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_masked_select(x, m), false);
}

static int t_take(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "take"), *idx = lt_check(L, 2, "take");
    check_index(L, idx, "take");
    lua_settop(L, 2);
    lt_box *b = lt_newbox(L);
    char err[300] = "";
    tide_tensor *i0 = lt_zero_based(idx, tide_numel(x), "take", "the flattened input", err,
                                    sizeof err);
    if (!i0)
        return raise_msg(L, err);
    tide_tensor *r = tide_take(x, i0);
    tide_release(i0);
    return lt_fill(L, b, r, false);
}

/* The index-driven ops: x:scatter(dim, index, src|value [, {reduce =}]), x:index_add(dim,
 * index, source [, {alpha =}]), x:index_copy(dim, index, source), x:index_fill(dim, index,
 * value), each with an in-place form (trailing _). Upvalue 2: which; upvalue 3: in place. */
enum { IX_SCATTER, IX_ADD, IX_COPY, IX_FILL };

static const char *ix_name(int which, bool inplace)
{
    static const char *const names[2][4] = {
        {"scatter", "index_add", "index_copy", "index_fill"},
        {"scatter_", "index_add_", "index_copy_", "index_fill_"}};
    return names[inplace][which];
}

static tide_tensor *ix_run(int which, tide_tensor *x, int d, tide_tensor *i0, tide_tensor *src,
                           double value, const char *reduce, double alpha)
{
    switch (which) {
    case IX_SCATTER:
        return src ? tide_scatter(x, d, i0, src, reduce) : tide_scatter_value(x, d, i0, value, reduce);
    case IX_ADD: return tide_index_add(x, d, i0, src, alpha);
    case IX_COPY: return tide_index_copy(x, d, i0, src);
    default: return tide_index_fill(x, d, i0, value);
    }
}

static int t_index_op(lua_State *L)
{
    int which = (int)lua_tointeger(L, lua_upvalueindex(2));
    bool inplace = lua_toboolean(L, lua_upvalueindex(3));
    const char *op = ix_name(which, inplace);
    tide_tensor *x = lt_check(L, 1, op);
    int d = lt_checkdim(L, 2, tide_ndim(x), 0, op);
    tide_tensor *idx = lt_check(L, 3, op), *src = lt_totensor(L, 4);
    check_index(L, idx, op);
    double value = 0, alpha = 1;
    const char *reduce = NULL;
    bool wants_value = which == IX_FILL || (which == IX_SCATTER && !src);
    if (wants_value && lua_type(L, 4) != LUA_TNUMBER && lua_type(L, 4) != LUA_TBOOLEAN)
        return luaL_error(L, "%s: the value must be a number%s, got %s", op,
                          which == IX_SCATTER ? " or a tensor" : "", luaL_typename(L, 4));
    if (wants_value)
        value = lua_isboolean(L, 4) ? lua_toboolean(L, 4) : lua_tonumber(L, 4);
    else if (!src)
        return luaL_error(L, "%s: source must be a tensor, got %s", op, luaL_typename(L, 4));
    if (!lua_isnoneornil(L, 5)) {
        if (lua_type(L, 5) != LUA_TTABLE)
            return luaL_error(L, "%s: options must be a table, got %s", op, luaL_typename(L, 5));
        lt_checkkeys(L, 5, op, (const char *const[]){"reduce", "alpha", NULL});
        if (lt_getoption(L, 5, "reduce") != LUA_TNIL) {
            reduce = luaL_checkstring(L, -1);
            if (which != IX_SCATTER || (strcmp(reduce, "add") && strcmp(reduce, "multiply")))
                return luaL_error(L, "%s: reduce must be \"add\" or \"multiply\" (scatter only), "
                                  "got \"%s\"", op, reduce);
        }
        if (lt_getoption(L, 5, "alpha") != LUA_TNIL)
            alpha = luaL_checknumber(L, -1);
        lua_pop(L, 2);
    }
    int64_t size = tide_ndim(x) ? tide_shape(x)[d] : 1;
    char err[300] = "";
    if (inplace) {
        tide_tensor *i0 = lt_zero_based(idx, size, op, "the indexed dim", err, sizeof err);
        if (!i0)
            return raise_msg(L, err);
        tide_tensor *r = ix_run(which, x, d, i0, src, value, reduce, alpha);
        tide_release(i0);
        return lt_write_back(L, 1, x, r, op);
    }
    lt_box *b = lt_newbox(L);
    tide_tensor *i0 = lt_zero_based(idx, size, op, "the indexed dim", err, sizeof err);
    if (!i0)
        return raise_msg(L, err);
    tide_tensor *r = ix_run(which, x, d, i0, src, value, reduce, alpha);
    tide_release(i0);
    return lt_fill(L, b, r, false);
}

static const lt_reg shape_ops_regs[] = {
    {"tile", t_tile, LT_BOTH},
    {"roll", t_roll, LT_BOTH},
    {"repeat_interleave", t_repeat_interleave, LT_BOTH},
    {"unbind", t_unbind, LT_BOTH},
    {"movedim", t_movedim, LT_BOTH},
    {"moveaxis", t_movedim, LT_BOTH},
    {"swapaxes", t_swapaxes, LT_BOTH},
    {"swapdims", t_swapaxes, LT_BOTH},
    {"broadcast_to", t_broadcast_to, LT_BOTH},
    {"tensor_split", t_tensor_split, LT_BOTH},
    {"rot90", t_rot90, LT_BOTH},
    {"meshgrid", t_meshgrid, LT_FUNCTION},
    {"cartesian_prod", t_cartesian_prod, LT_FUNCTION},
    {"unfold", t_unfold, LT_METHOD},
    {"masked_select", t_masked_select, LT_BOTH},
    {"take", t_take, LT_BOTH},
    {NULL, NULL, 0},
};

void lt_open_shape_ops(lua_State *L, int mt, int methods, int module)
{
    lt_setfuncs(L, shape_ops_regs, mt, methods, module);
    static const char *const stacks[] = {"vstack", "hstack", "dstack", "column_stack"};
    for (int i = 0; i < 4; i++) {
        lua_pushvalue(L, mt);
        lua_pushinteger(L, i);
        lt_setclosure(L, stacks[i], t_stacks, 2, LT_FUNCTION, methods, module);
    }
    lua_pushvalue(L, mt);
    lua_pushvalue(L, module);
    lt_setclosure(L, "split_with_sizes", t_split_with_sizes, 2, LT_BOTH, methods, module);
    for (int i = 0; i < 2; i++) {
        lua_pushvalue(L, mt);
        lua_pushinteger(L, i);
        lt_setclosure(L, i ? "flipud" : "fliplr", t_flip_lr_ud, 2, LT_BOTH, methods, module);
    }
    for (int nd = 1; nd <= 3; nd++) {
        static const char *const names[] = {"atleast_1d", "atleast_2d", "atleast_3d"};
        lua_pushvalue(L, mt);
        lua_pushinteger(L, nd);
        lt_setclosure(L, names[nd - 1], t_atleast, 2, LT_BOTH, methods, module);
    }
    for (int which = 0; which < 4; which++)
        for (int inplace = 0; inplace < 2; inplace++) {
            lua_pushvalue(L, mt);
            lua_pushinteger(L, which);
            lua_pushboolean(L, inplace);
            lt_setclosure(L, ix_name(which, inplace), t_index_op, 3,
                          inplace ? LT_METHOD : LT_BOTH, methods, module);
        }
}
