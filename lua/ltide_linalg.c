/*
 * ltide_linalg.c — linear algebra, einsum and normal from Lua: addmm, addmv, baddbmm, addbmm
 * ({beta =, alpha =} as a trailing table), outer, cross, diag, diagonal, diag_embed, trace,
 * kron, tensordot, cdist, block_diag, einsum, normal. Dims are 1-based; negative ones count
 * from the end.
 */
#include <math.h>
#include <string.h>

#include "ltide.h"

static double number_option(lua_State *L, int arg, const char *key, double fallback,
                            const char *op)
{
    int type = lt_getoption(L, arg, key);
    double v = fallback;
    if (type == LUA_TNUMBER)
        v = lua_tonumber(L, -1);
    else if (type != LUA_TNIL)
        luaL_error(L, "%s: option %s must be a number, got %s", op, key, lua_typename(L, type));
    lua_pop(L, 1);
    return v;
}

/* The tensors at first..top, or in one table at first (a trailing options table is skipped by
 * the caller). Pushes a userdata array; returns the count. */
static tide_tensor **tensor_args(lua_State *L, int first, int last, const char *op, int *n)
{
    bool list = lua_type(L, first) == LUA_TTABLE && !lt_totensor(L, first);
    int count = list ? (int)lua_rawlen(L, first) : last - first + 1;
    if (count <= 0 || count > 64)
        luaL_error(L, "%s: expected 1 to 64 tensors, got %d", op, count < 0 ? 0 : count);
    tide_tensor **xs = lua_newuserdatauv(L, (size_t)count * sizeof *xs, 0);
    for (int i = 0; i < count; i++) {
        if (list)
            lua_rawgeti(L, first, i + 1);
        else
            lua_pushvalue(L, first + i);
        xs[i] = lt_totensor(L, -1);
        if (!xs[i])
            luaL_error(L, "%s: argument %d is a %s, not a tensor", op, i + 1, luaL_typename(L, -1));
        lua_pop(L, 1);
    }
    *n = count;
    return xs;
}

/* addmm(input, a, b [, {beta =, alpha =}]) and its three relatives; upvalue 2 picks one. */
static int t_addmm_like(lua_State *L)
{
    static const char *const names[] = {"addmm", "addmv", "baddbmm", "addbmm"};
    int which = (int)lua_tointeger(L, lua_upvalueindex(2));
    const char *op = names[which];
    tide_tensor *in = lt_check(L, 1, op), *a = lt_check(L, 2, op), *b = lt_check(L, 3, op);
    if (!lua_isnoneornil(L, 4) && lua_type(L, 4) != LUA_TTABLE)
        return luaL_error(L, "%s: options must be a table {beta=, alpha=}, got %s", op,
                          luaL_typename(L, 4));
    if (!lua_isnoneornil(L, 4))
        lt_checkkeys(L, 4, op, (const char *const[]){"beta", "alpha", NULL});
    double beta = number_option(L, 4, "beta", 1, op), alpha = number_option(L, 4, "alpha", 1, op);
    lua_settop(L, 4);
    lt_box *box = lt_newbox(L);
    tide_tensor *r = which == 0   ? tide_addmm(in, a, b, beta, alpha)
                     : which == 1 ? tide_addmv(in, a, b, beta, alpha)
                     : which == 2 ? tide_baddbmm(in, a, b, beta, alpha)
                                  : tide_addbmm(in, a, b, beta, alpha);
    return lt_fill(L, box, r, false);
}

/* Two tensors in, one out: outer, kron. */
static int t_outer(lua_State *L)
{
    tide_tensor *a = lt_check(L, 1, "outer"), *b = lt_check(L, 2, "outer");
    lua_settop(L, 2);
    lt_box *box = lt_newbox(L);
    return lt_fill(L, box, tide_outer(a, b), false);
}

static int t_kron(lua_State *L)
{
    tide_tensor *a = lt_check(L, 1, "kron"), *b = lt_check(L, 2, "kron");
    lua_settop(L, 2);
    lt_box *box = lt_newbox(L);
    return lt_fill(L, box, tide_kron(a, b), false);
}

/* cross(a, b [, dim]): without dim, the first dim of size 3 (torch.cross's default). */
static int t_cross(lua_State *L)
{
    tide_tensor *a = lt_check(L, 1, "cross"), *b = lt_check(L, 2, "cross");
    int nd = tide_ndim(a) > tide_ndim(b) ? tide_ndim(a) : tide_ndim(b), d = -1;
    if (!lua_isnoneornil(L, 3)) {
        d = lt_checkdim(L, 3, nd, 0, "cross");
    } else {
        for (int i = 0; i < tide_ndim(a) && d < 0; i++)
            if (tide_shape(a)[i] == 3)
                d = i + nd - tide_ndim(a);
        if (d < 0)
            return luaL_error(L, "cross: no dim of size 3 in the input");
    }
    lua_settop(L, 3);
    lt_box *box = lt_newbox(L);
    return lt_fill(L, box, tide_cross(a, b, d), false);
}

static int64_t opt_int(lua_State *L, int arg, int64_t fallback, const char *op, const char *what)
{
    return lua_isnoneornil(L, arg) ? fallback : lt_checkint(L, arg, op, what);
}

static int t_diag(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "diag");
    int64_t k = opt_int(L, 2, 0, "diag", "diagonal");
    lua_settop(L, 2);
    lt_box *box = lt_newbox(L);
    return lt_fill(L, box, tide_diag(x, k), false);
}

/* diagonal(x [, offset [, dim1 [, dim2]]]) (a view) and diag_embed(x [, offset, dim1, dim2]) */
static int t_diagonal(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "diagonal");
    int64_t k = opt_int(L, 2, 0, "diagonal", "offset");
    int nd = tide_ndim(x);
    if (nd < 2)
        return luaL_error(L, "diagonal: input must have at least 2 dims, got %d", nd);
    int d1 = lua_isnoneornil(L, 3) ? 0 : lt_checkdim(L, 3, nd, 0, "diagonal");
    int d2 = lua_isnoneornil(L, 4) ? 1 : lt_checkdim(L, 4, nd, 0, "diagonal");
    lua_settop(L, 4);
    lt_box *box = lt_newbox(L);
    return lt_fill(L, box, tide_diagonal(x, k, d1, d2), true);
}

static int t_diag_embed(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "diag_embed");
    int64_t k = opt_int(L, 2, 0, "diag_embed", "offset");
    int nd = tide_ndim(x) + 1;
    int d1 = lua_isnoneornil(L, 3) ? nd - 2 : lt_checkdim(L, 3, nd, 0, "diag_embed");
    int d2 = lua_isnoneornil(L, 4) ? nd - 1 : lt_checkdim(L, 4, nd, 0, "diag_embed");
    lua_settop(L, 4);
    lt_box *box = lt_newbox(L);
    return lt_fill(L, box, tide_diag_embed(x, k, d1, d2), false);
}

static int t_trace(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "trace");
    lua_settop(L, 1);
    lt_box *box = lt_newbox(L);
    return lt_fill(L, box, tide_trace(x), false);
}

/* The dims of one side of tensordot's {{a dims}, {b dims}}. */
static int dims_of(lua_State *L, int tbl, int side, int ndim, int *out)
{
    lua_rawgeti(L, tbl, side);
    int n = lt_checkdims(L, lua_gettop(L), ndim, "tensordot", out);
    lua_pop(L, 1);
    return n;
}

/* tensordot(a, b [, dims]): dims a count (the last dims of a with the first of b; default 2)
 * or {{a dims}, {b dims}}. */
static int t_tensordot(lua_State *L)
{
    tide_tensor *a = lt_check(L, 1, "tensordot"), *b = lt_check(L, 2, "tensordot");
    int da[TIDE_MAX_DIMS], db[TIDE_MAX_DIMS], n;
    if (lua_type(L, 3) == LUA_TTABLE) {
        n = dims_of(L, 3, 1, tide_ndim(a), da);
        if (dims_of(L, 3, 2, tide_ndim(b), db) != n)
            return luaL_error(L, "tensordot: the two lists of dims differ in length");
    } else {
        int64_t k = opt_int(L, 3, 2, "tensordot", "dims");
        if (k < 0 || k > tide_ndim(a) || k > tide_ndim(b))
            return luaL_error(L, "tensordot: dims = %d does not fit inputs of %d and %d dims",
                              (int)k, tide_ndim(a), tide_ndim(b));
        n = (int)k;
        for (int i = 0; i < n; i++)
            da[i] = tide_ndim(a) - n + i, db[i] = i;
    }
    lua_settop(L, 3);
    lt_box *box = lt_newbox(L);
    return lt_fill(L, box, tide_tensordot(a, b, n, da, db), false);
}

static int t_cdist(lua_State *L)
{
    tide_tensor *a = lt_check(L, 1, "cdist"), *b = lt_check(L, 2, "cdist");
    double p = 2;
    if (lua_type(L, 3) == LUA_TNUMBER)
        p = lua_tonumber(L, 3);
    else if (lua_type(L, 3) == LUA_TTABLE)
        p = number_option(L, 3, "p", 2, "cdist");
    else if (!lua_isnoneornil(L, 3))
        return luaL_error(L, "cdist: p must be a number, got %s", luaL_typename(L, 3));
    lua_settop(L, 3);
    lt_box *box = lt_newbox(L);
    return lt_fill(L, box, tide_cdist(a, b, p), false);
}

static int t_block_diag(lua_State *L)
{
    int n;
    tide_tensor **xs = tensor_args(L, 1, lua_gettop(L), "block_diag", &n);
    lt_box *box = lt_newbox(L);
    return lt_fill(L, box, tide_block_diag(xs, n), false);
}

/* einsum("ij,jk->ik", a, b) or einsum("ij,jk", {a, b}) */
static int t_einsum(lua_State *L)
{
    const char *eq = luaL_checkstring(L, 1);
    int n;
    tide_tensor **xs = tensor_args(L, 2, lua_gettop(L), "einsum", &n);
    lt_box *box = lt_newbox(L);
    return lt_fill(L, box, tide_einsum(eq, xs, n), false);
}

/* normal(mean, std): tensors or numbers (a number with a tensor becomes a 0-dim tensor of its
 * dtype); normal(mean, std, size [, opts]) with two numbers: a new tensor of that size. */
static int t_normal(lua_State *L)
{
    bool ta = lt_totensor(L, 1) != NULL, tb = lt_totensor(L, 2) != NULL;
    if (!ta && !tb) {
        double mean = luaL_checknumber(L, 1), std = luaL_checknumber(L, 2);
        if (!(std >= 0))
            return luaL_error(L, "normal: std must be >= 0, got %g", std);
        int64_t shape[TIDE_MAX_DIMS];
        int nd = lt_checksizes(L, 3, 3, "normal", false, shape);
        lt_options o;
        lt_checkoptions(L, 4, "normal", &o);
        lua_settop(L, 4);
        lt_box *box = lt_newbox(L);
        tide_dtype dt = o.dtype < 0 ? TIDE_FLOAT32 : (tide_dtype)o.dtype;
        tide_tensor *r = o.device ? tide_randn_on(o.device, nd, shape, dt) : tide_randn(nd, shape, dt);
        if (r && (std != 1 || mean != 0)) {
            tide_tensor *s = tide_mul_scalar(r, std);
            tide_release(r);
            r = s ? tide_add_scalar(s, mean) : NULL;
            tide_release(s);
        }
        return lt_fill_created(L, box, r, &o);
    }
    lt_check_operand(L, 1, "normal");
    lt_check_operand(L, 2, "normal");
    lua_settop(L, 2);
    lt_box *box = lt_newbox(L);
    lt_operand a = lt_make_operand(L, 1), b = lt_make_operand(L, 2);
    tide_tensor *r = a.t && b.t ? tide_normal(a.t, b.t) : NULL;
    lt_free_operand(&a);
    lt_free_operand(&b);
    return lt_fill(L, box, r, false);
}

static const lt_reg linalg_regs[] = {
    {"outer", t_outer, LT_BOTH},       {"ger", t_outer, LT_BOTH},
    {"kron", t_kron, LT_BOTH},         {"cross", t_cross, LT_BOTH},
    {"diag", t_diag, LT_BOTH},         {"diagonal", t_diagonal, LT_BOTH},
    {"diag_embed", t_diag_embed, LT_BOTH}, {"trace", t_trace, LT_BOTH},
    {"tensordot", t_tensordot, LT_FUNCTION}, {"cdist", t_cdist, LT_FUNCTION},
    {"block_diag", t_block_diag, LT_FUNCTION}, {"einsum", t_einsum, LT_FUNCTION},
    {"normal", t_normal, LT_FUNCTION}, {NULL, NULL, 0},
};

void lt_open_linalg(lua_State *L, int mt, int methods, int module)
{
    lt_setfuncs(L, linalg_regs, mt, methods, module);
    static const char *const names[] = {"addmm", "addmv", "baddbmm", "addbmm"};
    for (int i = 0; i < 4; i++) {
        lua_pushvalue(L, mt);
        lua_pushinteger(L, i);
        lt_setclosure(L, names[i], t_addmm_like, 2, LT_BOTH, methods, module);
    }
}
