/*
 * ltide_shape.c — views and movement from Lua: reshape/view/expand (sizes as integers or one
 * table, -1 allowed), permute, transpose, t, squeeze/unsqueeze, narrow, select, flatten,
 * unflatten, split/chunk, and the copying ones: cat, stack, pad, flip. Dims and positions are
 * 1-based; negative ones count from the end.
 */
#include <string.h>

#include "ltide.h"

/* x:reshape(2, 3), x:reshape({2, 3}), tide.reshape(x, 2, 3): upvalue 2 picks the function. */
static int t_reshape_like(lua_State *L)
{
    int which = (int)lua_tointeger(L, lua_upvalueindex(2));
    static const char *const names[] = {"reshape", "view", "expand"};
    const char *name = names[which];
    tide_tensor *x = lt_check(L, 1, name);
    int64_t shape[TIDE_MAX_DIMS];
    int nd = lt_checksizes(L, 2, lua_gettop(L), name, true, shape);
    lt_box *b = lt_newbox(L);
    tide_tensor *r = which == 0   ? tide_reshape(x, nd, shape)
                     : which == 1 ? tide_view(x, nd, shape)
                                  : tide_expand(x, nd, shape);
    return lt_fill(L, b, r, r && tide_shares_storage(r, x));
}

/* x:view_as(y), x:reshape_as(y), x:expand_as(y) */
static int t_as(lua_State *L)
{
    int which = (int)lua_tointeger(L, lua_upvalueindex(2));
    static const char *const names[] = {"reshape_as", "view_as", "expand_as"};
    tide_tensor *x = lt_check(L, 1, names[which]);
    tide_tensor *y = lt_check(L, 2, names[which]);
    lua_settop(L, 2);
    lt_box *b = lt_newbox(L);
    tide_tensor *r = which == 0   ? tide_reshape(x, tide_ndim(y), tide_shape(y))
                     : which == 1 ? tide_view(x, tide_ndim(y), tide_shape(y))
                                  : tide_expand(x, tide_ndim(y), tide_shape(y));
    return lt_fill(L, b, r, r && tide_shares_storage(r, x));
}

/* Dims given as integers from first, or one table at first. */
static int dims_list(lua_State *L, int first, int ndim, const char *op, int out[TIDE_MAX_DIMS])
{
    if (lua_type(L, first) == LUA_TTABLE)
        return lt_checkdims(L, first, ndim, op, out);
    int n = lua_gettop(L) - first + 1;
    if (n < 0)
        n = 0;
    if (n > TIDE_MAX_DIMS)
        luaL_error(L, "%s: %d dims given; a tensor has at most %d", op, n, TIDE_MAX_DIMS);
    for (int i = 0; i < n; i++)
        out[i] = lt_checkdim(L, first + i, ndim, 0, op);
    return n;
}

static int t_permute(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "permute");
    int nd = tide_ndim(x);
    int perm[TIDE_MAX_DIMS];
    int n = dims_list(L, 2, nd, "permute", perm);
    if (n != nd) {
        char s[200];
        return luaL_error(L, "permute: %d dims given for a tensor of shape %s with %d dims", n,
                          lt_shape_str(s, sizeof s, x), nd);
    }
    bool seen[TIDE_MAX_DIMS] = {false};
    for (int i = 0; i < n; i++) {
        if (seen[perm[i]])
            return luaL_error(L, "permute: dim %d is listed twice", perm[i] + 1);
        seen[perm[i]] = true;
    }
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_permute(x, perm), true);
}

static int t_transpose(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "transpose");
    int d0 = lt_checkdim(L, 2, tide_ndim(x), 0, "transpose");
    int d1 = lt_checkdim(L, 3, tide_ndim(x), 0, "transpose");
    lua_settop(L, 3);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_transpose(x, d0, d1), true);
}

static int t_t(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "t");
    int nd = tide_ndim(x);
    if (nd > 2) {
        char s[200];
        return luaL_error(L, "t: expects a tensor with at most 2 dims, got shape %s (use "
                          "transpose or permute)", lt_shape_str(s, sizeof s, x));
    }
    lua_settop(L, 1);
    if (nd < 2)
        return 1;
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_transpose(x, 0, 1), true);
}

static int t_unsqueeze(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "unsqueeze");
    int d = lt_checkdim(L, 2, tide_ndim(x), 1, "unsqueeze");
    lua_settop(L, 2);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_unsqueeze(x, d), true);
}

static int t_squeeze(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "squeeze");
    bool all = lua_isnoneornil(L, 2);
    int d = all ? 0 : lt_checkdim(L, 2, tide_ndim(x), 0, "squeeze");
    lua_settop(L, 2);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, all ? tide_squeeze_all(x) : tide_squeeze(x, d), true);
}

/* x:narrow(dim, start, length): length elements from the 1-based start. */
static int t_narrow(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "narrow");
    if (tide_ndim(x) == 0)
        return luaL_error(L, "narrow: a 0-dim tensor cannot be narrowed");
    int d = lt_checkdim(L, 2, tide_ndim(x), 0, "narrow");
    int64_t size = tide_shape(x)[d];
    int64_t start = lt_checkint(L, 3, "narrow", "start");
    int64_t len = lt_checkint(L, 4, "narrow", "length");
    /* start may be one past the end when length is 0, as in PyTorch */
    int64_t s0 = start == size + 1 && len == 0 ? size : lt_position(L, start, size, "narrow", d);
    if (len < 0 || len > size - s0)
        return luaL_error(L, "narrow: start %I with length %I does not fit in dim %d of size %I",
                          (lua_Integer)start, (lua_Integer)len, d + 1, (lua_Integer)size);
    lua_settop(L, 4);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_slice(x, d, s0, s0 + len, 1), true);
}

static int t_select(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "select");
    if (tide_ndim(x) == 0)
        return luaL_error(L, "select: a 0-dim tensor has no dim to select from");
    int d = lt_checkdim(L, 2, tide_ndim(x), 0, "select");
    int64_t i = lt_position(L, lt_checkint(L, 3, "select", "index"), tide_shape(x)[d], "select", d);
    lua_settop(L, 3);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_select(x, d, i), true);
}

/* x:flatten([start [, end]]): dims start..end (1-based, inclusive) merged into one. */
static int t_flatten(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "flatten");
    int nd = tide_ndim(x);
    int s = lua_isnoneornil(L, 2) ? 0 : lt_checkdim(L, 2, nd, 0, "flatten");
    int e = lua_isnoneornil(L, 3) ? (nd ? nd - 1 : 0) : lt_checkdim(L, 3, nd, 0, "flatten");
    if (s > e)
        return luaL_error(L, "flatten: start dim %d comes after end dim %d", s + 1, e + 1);
    int64_t shape[TIDE_MAX_DIMS];
    int n = 0;
    const int64_t *xs = tide_shape(x);
    if (nd == 0) {
        shape[n++] = 1;
    } else {
        for (int i = 0; i < s; i++)
            shape[n++] = xs[i];
        int64_t m = 1;
        for (int i = s; i <= e; i++)
            m *= xs[i];
        shape[n++] = m;
        for (int i = e + 1; i < nd; i++)
            shape[n++] = xs[i];
    }
    lua_settop(L, 3);
    lt_box *b = lt_newbox(L);
    tide_tensor *r = tide_reshape(x, n, shape);
    return lt_fill(L, b, r, r && tide_shares_storage(r, x));
}

/* x:unflatten(dim, sizes): dim split into sizes (one -1 allowed). */
static int t_unflatten(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "unflatten");
    int nd = tide_ndim(x);
    int d = lt_checkdim(L, 2, nd, 0, "unflatten");
    if (lua_type(L, 3) != LUA_TTABLE)
        return luaL_error(L, "unflatten: sizes must be a table, got %s", luaL_typename(L, 3));
    int64_t sizes[TIDE_MAX_DIMS];
    int ns = lt_checksizes(L, 3, 3, "unflatten", true, sizes);
    if (nd - 1 + ns > TIDE_MAX_DIMS)
        return luaL_error(L, "unflatten: the result would have more than %d dims", TIDE_MAX_DIMS);
    int64_t shape[TIDE_MAX_DIMS];
    int n = 0;
    for (int i = 0; i < nd; i++) {
        if (i == d)
            for (int j = 0; j < ns; j++)
                shape[n++] = sizes[j];
        else
            shape[n++] = tide_shape(x)[i];
    }
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        if (shape[i] > 0 && __builtin_mul_overflow(p, shape[i], &p))
            return luaL_error(L, "unflatten: the sizes are too large (they multiply to more "
                              "than 2^63 elements)");
    lua_settop(L, 3);
    lt_box *b = lt_newbox(L);
    tide_tensor *r = tide_reshape(x, n, shape);
    return lt_fill(L, b, r, r && tide_shares_storage(r, x));
}

/* x:split(size [, dim]) -> a list of views of size (the last may be smaller);
 * x:split({s1, s2, ...} [, dim]) -> views of those sizes; x:chunk(n [, dim]). */
static int split_views(lua_State *L, tide_tensor *x, int d, const int64_t *lens, int64_t n)
{
    lua_createtable(L, n > 1000000 ? 0 : (int)n, 0);
    int64_t start = 0;
    for (int64_t i = 0; i < n; i++) {
        lt_box *b = lt_newbox(L);
        lt_fill(L, b, tide_slice(x, d, start, start + lens[i], 1), true);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
        start += lens[i];
    }
    return 1;
}

static int t_split(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "split");
    if (tide_ndim(x) == 0)
        return luaL_error(L, "split: a 0-dim tensor cannot be split");
    int d = lua_isnoneornil(L, 3) ? 0 : lt_checkdim(L, 3, tide_ndim(x), 0, "split");
    int64_t size = tide_shape(x)[d];
    if (lua_type(L, 2) == LUA_TTABLE) {
        lua_Unsigned n = lua_rawlen(L, 2);
        if (n > 1u << 20)
            return luaL_error(L, "split: too many pieces");
        int64_t *lens = lua_newuserdatauv(L, (n ? n : 1) * sizeof(int64_t), 0);
        int64_t total = 0;
        for (lua_Unsigned i = 0; i < n; i++) {
            lua_rawgeti(L, 2, (lua_Integer)i + 1);
            lens[i] = lt_checkint(L, -1, "split", "a piece size");
            lua_pop(L, 1);
            if (lens[i] < 0 || lens[i] > size - total)
                return luaL_error(L, "split: the piece sizes add up to more than dim %d's size "
                                  "%I", d + 1, (lua_Integer)size);
            total += lens[i];
        }
        if (total != size)
            return luaL_error(L, "split: the piece sizes add up to %I, but dim %d has size %I",
                              (lua_Integer)total, d + 1, (lua_Integer)size);
        return split_views(L, x, d, lens, (int64_t)n);
    }
    int64_t piece = lt_checkint(L, 2, "split", "the piece size");
    if (piece <= 0)
        return luaL_error(L, "split: the piece size must be positive, got %I", (lua_Integer)piece);
    int64_t n = size == 0 ? 1 : (size - 1) / piece + 1;
    if (n > 1 << 20)
        return luaL_error(L, "split: too many pieces");
    int64_t *lens = lua_newuserdatauv(L, (size_t)n * sizeof(int64_t), 0);
    for (int64_t i = 0; i < n; i++)
        lens[i] = size - i * piece < piece ? size - i * piece : piece;
    return split_views(L, x, d, lens, n);
}

static int t_chunk(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "chunk");
    if (tide_ndim(x) == 0)
        return luaL_error(L, "chunk: a 0-dim tensor cannot be split");
    int64_t chunks = lt_checkint(L, 2, "chunk", "the number of chunks");
    if (chunks <= 0)
        return luaL_error(L, "chunk: the number of chunks must be positive, got %I",
                          (lua_Integer)chunks);
    int d = lua_isnoneornil(L, 3) ? 0 : lt_checkdim(L, 3, tide_ndim(x), 0, "chunk");
    int64_t size = tide_shape(x)[d];
    int64_t piece = size == 0 ? 0 : (size - 1) / chunks + 1;
    lua_settop(L, 1);
    lua_pushinteger(L, (lua_Integer)(piece ? piece : 1));
    lua_pushinteger(L, d + 1);
    return t_split(L);
}

/* ---- copying movement ---------------------------------------------------------------------- */

/* The tensors of the list at arg into a userdata array pushed on the stack. */
static tide_tensor **tensor_list(lua_State *L, int arg, const char *op, int *n)
{
    if (lua_type(L, arg) != LUA_TTABLE)
        luaL_error(L, "%s: expected a table of tensors, got %s", op, luaL_typename(L, arg));
    lua_Unsigned len = lua_rawlen(L, arg);
    if (len == 0)
        luaL_error(L, "%s: expected a non-empty table of tensors", op);
    if (len > (1u << 24))
        luaL_error(L, "%s: too many tensors", op);
    tide_tensor **xs = lua_newuserdatauv(L, len * sizeof *xs, 0);
    for (lua_Unsigned i = 0; i < len; i++) {
        lua_rawgeti(L, arg, (lua_Integer)i + 1);
        xs[i] = lt_totensor(L, -1);
        if (!xs[i])
            luaL_error(L, "%s: element %d of the list is a %s, not a tensor", op, (int)i + 1,
                       luaL_typename(L, -1));
        lua_pop(L, 1);
    }
    *n = (int)len;
    return xs;
}

static int f_cat(lua_State *L, bool stack)
{
    const char *op = stack ? "stack" : "cat";
    int n;
    lua_settop(L, 2);
    tide_tensor **xs = tensor_list(L, 1, op, &n);
    int d = lua_isnil(L, 2) ? 0 : lt_checkdim(L, 2, tide_ndim(xs[0]), stack, op);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, stack ? tide_stack(xs, n, d) : tide_cat(xs, n, d), false);
}
static int t_cat(lua_State *L) { return f_cat(L, false); }
static int t_stack(lua_State *L) { return f_cat(L, true); }

/* tide.pad(x, {left, right [, top, bottom ...]} [, value]), as torch's F.pad */
static int t_pad(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "pad");
    if (lua_type(L, 2) != LUA_TTABLE)
        return luaL_error(L, "pad: pads must be a table {before, after, ...}, got %s",
                          luaL_typename(L, 2));
    lua_Unsigned n = lua_rawlen(L, 2);
    if (n % 2 || n > 2 * TIDE_MAX_DIMS || n / 2 > (lua_Unsigned)tide_ndim(x))
        return luaL_error(L, "pad: expected an even number of pads, at most 2 per dim of the "
                          "tensor (%d dims), got %d", tide_ndim(x), (int)n);
    int64_t pads[2 * TIDE_MAX_DIMS];
    for (int i = 0; i < (int)n; i++) {
        lua_rawgeti(L, 2, i + 1);
        pads[i] = lt_checkint(L, -1, "pad", "a pad");
        lua_pop(L, 1);
    }
    double value = 0;
    if (!lua_isnoneornil(L, 3)) {
        if (lua_type(L, 3) != LUA_TNUMBER)
            return luaL_error(L, "pad: the value must be a number, got %s", luaL_typename(L, 3));
        value = lua_tonumber(L, 3);
    }
    lua_settop(L, 3);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_pad(x, pads, (int)n, value), false);
}

static int t_flip(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "flip");
    int dims[TIDE_MAX_DIMS];
    int n = dims_list(L, 2, tide_ndim(x), "flip", dims);
    if (n == 0)
        return luaL_error(L, "flip: expected at least one dim");
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_flip(x, dims, n), false);
}

static const lt_reg shape_regs[] = {
    {"permute", t_permute, LT_BOTH},
    {"transpose", t_transpose, LT_BOTH},
    {"t", t_t, LT_BOTH},
    {"unsqueeze", t_unsqueeze, LT_BOTH},
    {"squeeze", t_squeeze, LT_BOTH},
    {"narrow", t_narrow, LT_BOTH},
    {"select", t_select, LT_BOTH},
    {"flatten", t_flatten, LT_BOTH},
    {"unflatten", t_unflatten, LT_BOTH},
    {"split", t_split, LT_BOTH},
    {"chunk", t_chunk, LT_BOTH},
    {"cat", t_cat, LT_FUNCTION},
    {"concat", t_cat, LT_FUNCTION},
    {"stack", t_stack, LT_FUNCTION},
    {"pad", t_pad, LT_FUNCTION},
    {"flip", t_flip, LT_BOTH},
    {NULL, NULL, 0},
};

void lt_open_shape(lua_State *L, int mt, int methods, int module)
{
    lt_setfuncs(L, shape_regs, mt, methods, module);
    static const char *const names[] = {"reshape", "view", "expand"};
    static const char *const as_names[] = {"reshape_as", "view_as", "expand_as"};
    for (int i = 0; i < 3; i++) {
        lua_pushvalue(L, mt);
        lua_pushinteger(L, i);
        lt_setclosure(L, names[i], t_reshape_like, 2, LT_BOTH, methods, module);
        lua_pushvalue(L, mt);
        lua_pushinteger(L, i);
        lt_setclosure(L, as_names[i], t_as, 2, LT_METHOD, methods, module);
    }
}
