/*
 * ltide_ops.c — elementwise ops, their in-place forms and operators, reductions (with 1-based
 * dims and 1-based argmax/max indices), where, clamp, matmul, and the boolean checks
 * tide.equal / tide.allclose.
 */
#include <string.h>

#include "ltide.h"

/* ---- unary ----------------------------------------------------------------------------------- */

typedef tide_tensor *(*unary_fn)(const tide_tensor *);

static tide_tensor *silu(const tide_tensor *x) { return tide_silu(x); }

static const struct {
    const char *name;
    unary_fn fn;
    bool inplace; /* also register name_ */
} unary_ops[] = {
    {"neg", tide_neg, true},           {"abs", tide_abs, true},
    {"exp", tide_exp, true},           {"log", tide_log, true},
    {"sqrt", tide_sqrt, true},         {"rsqrt", tide_rsqrt, true},
    {"sin", tide_sin, true},           {"cos", tide_cos, true},
    {"tanh", tide_tanh, true},         {"sigmoid", tide_sigmoid, true},
    {"relu", tide_relu, true},         {"floor", tide_floor, true},
    {"ceil", tide_ceil, true},         {"round", tide_round, true},
    {"sign", tide_sign, true},         {"reciprocal", tide_reciprocal, true},
    {"logical_not", tide_logical_not, false}, {"erf", tide_erf, true},
    {"silu", silu, false},             {"contiguous", tide_contiguous, false},
    {"clone", tide_clone, false},      {"negative", tide_neg, false},
};

static int unary(lua_State *L)
{
    int i = (int)lua_tointeger(L, lua_upvalueindex(2));
    tide_tensor *x = lt_check(L, 1, unary_ops[i].name);
    lt_box *b = lt_newbox(L);
    tide_tensor *r = unary_ops[i].fn(x);
    return lt_fill(L, b, r, r && tide_shares_storage(r, x));
}

static int unary_inplace(lua_State *L)
{
    int i = (int)lua_tointeger(L, lua_upvalueindex(2));
    tide_tensor *x = lt_check(L, 1, unary_ops[i].name);
    lua_settop(L, 1);
    return lt_write_back(L, 1, x, unary_ops[i].fn(x), unary_ops[i].name);
}

/* ---- binary ---------------------------------------------------------------------------------- */

typedef tide_tensor *(*binary_fn)(const tide_tensor *, const tide_tensor *);

static const struct {
    const char *name;
    binary_fn fn;
    bool inplace;
} binary_ops[] = {
    {"add", tide_add, true},           {"sub", tide_sub, true},
    {"mul", tide_mul, true},           {"div", tide_div, true},
    {"pow", tide_pow, true},           {"maximum", tide_maximum, false},
    {"minimum", tide_minimum, false},  {"eq", tide_eq, false},
    {"ne", tide_ne, false},            {"lt", tide_lt, false},
    {"le", tide_le, false},            {"gt", tide_gt, false},
    {"ge", tide_ge, false},            {"logical_and", tide_logical_and, false},
    {"logical_or", tide_logical_or, false},
    {"subtract", tide_sub, false},     {"multiply", tide_mul, false},
    {"divide", tide_div, false},       {"greater", tide_gt, false},
    {"less", tide_lt, false},
    {"floor_divide", tide_floor_divide, true},
    {"remainder", tide_remainder, true},
};

static tide_tensor *apply_binary(lua_State *L, int a, int b, binary_fn fn)
{
    lt_operand x = lt_make_operand(L, a), y = lt_make_operand(L, b);
    tide_tensor *r = x.t && y.t ? fn(x.t, y.t) : NULL;
    lt_free_operand(&x);
    lt_free_operand(&y);
    return r;
}

static void check_binary_args(lua_State *L, const char *name)
{
    lt_check_operand(L, 1, name);
    lt_check_operand(L, 2, name);
    if (lua_type(L, 1) != LUA_TUSERDATA && lua_type(L, 2) != LUA_TUSERDATA)
        luaL_error(L, "%s: at least one argument must be a tensor", name);
}

/*
 * add(a, b, {alpha = s}) and sub: b is scaled first, as in PyTorch. Any other op given a third
 * argument is an error: dropping it silently would give a wrong value.
 */
static void apply_alpha(lua_State *L, const char *name)
{
    if (lua_gettop(L) < 3 || lua_isnil(L, 3))
        return;
    bool takes_alpha = !strcmp(name, "add") || !strcmp(name, "sub") || !strcmp(name, "subtract");
    if (!takes_alpha)
        luaL_error(L, "%s: takes two arguments, got %d", name, lua_gettop(L));
    if (lua_type(L, 3) == LUA_TTABLE)
        lua_getfield(L, 3, "alpha");
    else
        lua_pushvalue(L, 3);
    if (!lua_isnumber(L, -1))
        luaL_error(L, "%s: alpha must be a number (as {alpha = 2}), got %s", name, luaL_typename(L, -1));
    double alpha = lua_tonumber(L, -1);
    tide_tensor *s = lua_isinteger(L, -1) ? tide_integer(lua_tointeger(L, -1)) : tide_number(alpha);
    lua_pop(L, 1);
    if (alpha == 1) {
        tide_release(s);
        return;
    }
    lt_operand y = lt_make_operand(L, 2);
    tide_tensor *scaled = y.t && s ? tide_mul(y.t, s) : NULL;
    tide_release(s);
    lt_free_operand(&y);
    lt_box *b = lt_newbox(L);
    lt_fill(L, b, scaled, false);
    lua_replace(L, 2);
}

static int binary(lua_State *L)
{
    int i = (int)lua_tointeger(L, lua_upvalueindex(2));
    check_binary_args(L, binary_ops[i].name);
    apply_alpha(L, binary_ops[i].name);
    lua_settop(L, 2);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, apply_binary(L, 1, 2, binary_ops[i].fn), false);
}

static int binary_inplace(lua_State *L)
{
    int i = (int)lua_tointeger(L, lua_upvalueindex(2));
    const char *name = binary_ops[i].name;
    tide_tensor *x = lt_check(L, 1, name);
    lt_check_operand(L, 2, name);
    apply_alpha(L, name);
    lua_settop(L, 2);
    return lt_write_back(L, 1, x, apply_binary(L, 1, 2, binary_ops[i].fn), name);
}

/* Operators: the fast path for tensor op tensor, the common case in a loop. */
static int op_arith(lua_State *L, binary_fn fn, const char *name)
{
    check_binary_args(L, name);
    lua_settop(L, 2);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, apply_binary(L, 1, 2, fn), false);
}
static int op_add(lua_State *L) { return op_arith(L, tide_add, "add"); }
static int op_sub(lua_State *L) { return op_arith(L, tide_sub, "sub"); }
static int op_mul(lua_State *L) { return op_arith(L, tide_mul, "mul"); }
static int op_div(lua_State *L) { return op_arith(L, tide_div, "div"); }
static int op_pow(lua_State *L) { return op_arith(L, tide_pow, "pow"); }
static int op_idiv(lua_State *L) { return op_arith(L, tide_floor_divide, "floor_divide"); }
static int op_mod(lua_State *L) { return op_arith(L, tide_remainder, "remainder"); }
static int op_unm(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "neg");
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_neg(x), false);
}

/* x:fill_(v), x:zero_(), x:copy_(src) */
static int t_fill_(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "fill_");
    double v;
    tide_tensor *s;
    if (lua_type(L, 2) == LUA_TNUMBER) {
        v = lua_tonumber(L, 2);
    } else if (lua_type(L, 2) == LUA_TBOOLEAN) {
        v = lua_toboolean(L, 2);
    } else if ((s = lt_totensor(L, 2))) {
        if (tide_ndim(s) != 0 && tide_numel(s) != 1)
            return luaL_error(L, "fill_: the value must be a number or a one-element tensor");
        lua_settop(L, 2);
        if (tide_copy_(x, s) < 0) /* broadcasts the single element, keeps the value exact */
            return lt_raise(L, NULL);
        lua_settop(L, 1);
        return 1;
    } else {
        return luaL_error(L, "fill_: the value must be a number, got %s", luaL_typename(L, 2));
    }
    if (lua_isinteger(L, 2) && tide_get_dtype(x) == TIDE_INT64) {
        /* a double would round integers beyond 2^53 */
        tide_tensor *n = tide_integer((int64_t)lua_tointeger(L, 2));
        int rc = n ? tide_copy_(x, n) : -1;
        tide_release(n);
        if (rc < 0)
            return lt_raise(L, NULL);
    } else if (tide_fill_(x, v) < 0) {
        return lt_raise(L, NULL);
    }
    lua_settop(L, 1);
    return 1;
}

static int t_zero_(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "zero_");
    if (tide_fill_(x, 0) < 0)
        return lt_raise(L, NULL);
    lua_settop(L, 1);
    return 1;
}

static int t_copy_(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "copy_");
    if (lua_type(L, 2) == LUA_TNUMBER || lua_type(L, 2) == LUA_TBOOLEAN)
        return t_fill_(L);
    tide_tensor *s = lt_check(L, 2, "copy_");
    if (tide_copy_(x, s) < 0)
        return lt_raise(L, NULL);
    lua_settop(L, 1);
    return 1;
}

/* ---- reductions ------------------------------------------------------------------------------ */

typedef tide_tensor *(*reduce_fn)(const tide_tensor *, const int *, int, bool);

static const struct {
    const char *name;
    reduce_fn fn;
} reduce_ops[] = {
    {"sum", tide_sum}, {"prod", tide_prod}, {"mean", tide_mean}, {"logsumexp", tide_logsumexp},
};

static bool check_keepdim(lua_State *L, int arg, const char *op)
{
    if (lua_isnoneornil(L, arg))
        return false;
    if (lua_type(L, arg) != LUA_TBOOLEAN)
        luaL_error(L, "%s: keepdim must be a boolean, got %s", op, luaL_typename(L, arg));
    return lua_toboolean(L, arg);
}

/* x:sum(), x:sum(dim [, keepdim]), x:sum({d1, d2} [, keepdim]) */
static int reduce(lua_State *L)
{
    int i = (int)lua_tointeger(L, lua_upvalueindex(2));
    const char *name = reduce_ops[i].name;
    tide_tensor *x = lt_check(L, 1, name);
    int dims[TIDE_MAX_DIMS];
    int n = lt_checkdims(L, 2, tide_ndim(x), name, dims);
    if (n == 0 && lua_type(L, 2) == LUA_TTABLE) /* {} names no dim: nothing to reduce */
        return luaL_error(L, "%s: the dim list is empty", name);
    bool keepdim = check_keepdim(L, 3, name);
    lua_settop(L, 3);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, reduce_ops[i].fn(x, n ? dims : NULL, n, keepdim), false);
}

/* argmax's 0-based positions as 1-based ones (int64 stays int64). */
static tide_tensor *plus_one(tide_tensor *r)
{
    if (!r)
        return NULL;
    tide_tensor *one = tide_integer(1);
    tide_tensor *s = one ? tide_add(r, one) : NULL;
    tide_release(one);
    tide_release(r);
    return s;
}

/* x:max() (all), x:max(dim [, keepdim]) -> values, 1-based indices, x:max(other) (maximum). */
static int minmax(lua_State *L, bool is_max)
{
    const char *name = is_max ? "max" : "min";
    tide_tensor *x = lt_check(L, 1, name);
    if (lua_type(L, 2) == LUA_TUSERDATA) {
        tide_tensor *y = lt_check(L, 2, name);
        lua_settop(L, 2);
        lt_box *b = lt_newbox(L);
        return lt_fill(L, b, (is_max ? tide_maximum : tide_minimum)(x, y), false);
    }
    if (lua_isnoneornil(L, 2)) {
        lua_settop(L, 1);
        lt_box *b = lt_newbox(L);
        return lt_fill(L, b, (is_max ? tide_max : tide_min)(x, NULL, 0, false), false);
    }
    int dim = lt_checkdim(L, 2, tide_ndim(x), 0, name);
    bool keepdim = check_keepdim(L, 3, name);
    lua_settop(L, 3);
    lt_box *values = lt_newbox(L);
    lt_box *indices = lt_newbox(L);
    lt_fill(L, values, (is_max ? tide_max : tide_min)(x, &dim, 1, keepdim), false);
    return lt_fill(L, indices, plus_one((is_max ? tide_argmax : tide_argmin)(x, dim, keepdim)),
                   false) + 1;
}
static int t_max(lua_State *L) { return minmax(L, true); }
static int t_min(lua_State *L) { return minmax(L, false); }

static int argminmax(lua_State *L, bool is_max)
{
    const char *name = is_max ? "argmax" : "argmin";
    tide_tensor *x = lt_check(L, 1, name);
    int dim = lua_isnoneornil(L, 2) ? TIDE_ALL_DIMS : lt_checkdim(L, 2, tide_ndim(x), 0, name);
    bool keepdim = check_keepdim(L, 3, name);
    lua_settop(L, 3);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, plus_one((is_max ? tide_argmax : tide_argmin)(x, dim, keepdim)), false);
}
static int t_argmax(lua_State *L) { return argminmax(L, true); }
static int t_argmin(lua_State *L) { return argminmax(L, false); }

/* x:triu([diagonal]), x:tril([diagonal]): diagonal is an offset (0 the main one), not a
 * position, so it is not shifted to 1-based. */
static int triangle(lua_State *L, bool upper)
{
    const char *name = upper ? "triu" : "tril";
    tide_tensor *x = lt_check(L, 1, name);
    int64_t diagonal = lua_isnoneornil(L, 2) ? 0 : lt_checkint(L, 2, name, "diagonal");
    lua_settop(L, 2);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, (upper ? tide_triu : tide_tril)(x, diagonal), false);
}
static int t_triu(lua_State *L) { return triangle(L, true); }
static int t_tril(lua_State *L) { return triangle(L, false); }

/* An optional boolean field of the options table at arg. */
static bool opt_bool(lua_State *L, int arg, const char *key, bool dflt, const char *op)
{
    lua_getfield(L, arg, key);
    bool v = dflt;
    if (lua_isboolean(L, -1))
        v = lua_toboolean(L, -1);
    else if (!lua_isnil(L, -1))
        luaL_error(L, "%s: option %s must be a boolean, got %s", op, key, luaL_typename(L, -1));
    lua_pop(L, 1);
    return v;
}

/* x:topk(k [, dim | {dim=, largest=, sorted=}]) -> values, 1-based indices (dim: the last). */
static int t_topk(lua_State *L)
{
    const char *op = "topk";
    tide_tensor *x = lt_check(L, 1, op);
    int64_t k = lt_checkint(L, 2, op, "k");
    int dim = tide_ndim(x) > 0 ? tide_ndim(x) - 1 : 0;
    bool largest = true, sorted = true;
    if (lua_istable(L, 3)) {
        lua_getfield(L, 3, "dim");
        if (!lua_isnil(L, -1))
            dim = lt_checkdim(L, -1, tide_ndim(x), 0, op);
        lua_pop(L, 1);
        largest = opt_bool(L, 3, "largest", true, op);
        sorted = opt_bool(L, 3, "sorted", true, op);
    } else if (!lua_isnoneornil(L, 3)) {
        dim = lt_checkdim(L, 3, tide_ndim(x), 0, op);
    }
    lua_settop(L, 3);
    lt_box *values = lt_newbox(L);
    lt_box *indices = lt_newbox(L);
    tide_tensor *v = NULL, *i = NULL;
    if (tide_topk(x, k, dim, largest, sorted, &v, &i) < 0)
        return lt_raise(L, op);
    lt_fill(L, values, v, false);
    return lt_fill(L, indices, plus_one(i), false) + 1;
}

/* tide.multinomial(probs, num_samples [, replacement | {replacement=false}]) -> int64 1-based
 * category indices, as topk's. */
static int t_multinomial(lua_State *L)
{
    const char *op = "multinomial";
    tide_tensor *probs = lt_check(L, 1, op);
    int64_t n = lt_checkint(L, 2, op, "num_samples");
    bool replacement = false;
    if (lua_istable(L, 3)) {
        lua_pushnil(L);
        while (lua_next(L, 3)) {
            lua_pop(L, 1);
            if (lua_type(L, -1) != LUA_TSTRING || strcmp(lua_tostring(L, -1), "replacement"))
                return luaL_error(L, "%s: unknown option %s (expected replacement)", op,
                                  luaL_tolstring(L, -1, NULL));
        }
        replacement = opt_bool(L, 3, "replacement", false, op);
    } else if (lua_isboolean(L, 3)) {
        replacement = lua_toboolean(L, 3);
    } else if (!lua_isnoneornil(L, 3)) {
        return luaL_error(L, "%s: argument 3 must be a boolean (replacement) or an options "
                          "table, got %s", op, luaL_typename(L, 3));
    }
    lua_settop(L, 3);
    lt_box *b = lt_newbox(L);
    tide_tensor *idx = tide_multinomial(probs, n, replacement);
    if (!idx)
        return lt_raise(L, op);
    return lt_fill(L, b, plus_one(idx), false);
}

/* x:cumsum(dim), dim 1-based or negative. */
static int t_cumsum(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "cumsum");
    if (lua_isnoneornil(L, 2))
        return luaL_error(L, "cumsum: expected a dim");
    int dim = lt_checkdim(L, 2, tide_ndim(x), 0, "cumsum");
    lua_settop(L, 2);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_cumsum(x, dim), false);
}

/* x:all([dim [, keepdim]]), x:any(...): bool tensors, composed from != 0 and sum. */
static int allany(lua_State *L, bool all)
{
    const char *name = all ? "all" : "any";
    tide_tensor *x = lt_check(L, 1, name);
    int dims[TIDE_MAX_DIMS];
    int n = lt_checkdims(L, 2, tide_ndim(x), name, dims);
    bool keepdim = check_keepdim(L, 3, name);
    lua_settop(L, 3);
    lt_box *b = lt_newbox(L);
    lt_temps k = {.n = 0};
    tide_tensor *zero = lt_keep(&k, tide_integer(0));
    tide_tensor *hit = zero ? lt_keep(&k, all ? tide_eq(x, zero) : tide_ne(x, zero)) : NULL;
    tide_tensor *count = hit ? lt_keep(&k, tide_sum(hit, n ? dims : NULL, n, keepdim)) : NULL;
    tide_tensor *r = count ? (all ? tide_eq(count, zero) : tide_ne(count, zero)) : NULL;
    lt_drop(&k);
    return lt_fill(L, b, r, false);
}
static int t_all(lua_State *L) { return allany(L, true); }
static int t_any(lua_State *L) { return allany(L, false); }

/* ---- where, clamp ---------------------------------------------------------------------------- */

static int f_where(lua_State *L)
{
    tide_tensor *c = lt_check(L, 1, "where");
    lt_check_operand(L, 2, "where");
    lt_check_operand(L, 3, "where");
    lua_settop(L, 3);
    lt_box *b = lt_newbox(L);
    lt_operand x = lt_make_operand(L, 2), y = lt_make_operand(L, 3);
    tide_tensor *r = x.t && y.t ? tide_where(c, x.t, y.t) : NULL;
    lt_free_operand(&x);
    lt_free_operand(&y);
    return lt_fill(L, b, r, false);
}

/* x:where(cond, y) is where(cond, x, y), as PyTorch's method. */
static int t_where(lua_State *L)
{
    lt_check(L, 1, "where");
    lt_check(L, 2, "where");
    lt_check_operand(L, 3, "where");
    lua_settop(L, 3);
    lua_rotate(L, 1, 1); /* y x cond */
    lua_rotate(L, 1, 1); /* cond y x */
    lua_rotate(L, 2, 1); /* cond x y */
    return f_where(L);
}

/* max(x, lo) then min(., hi), both named clamp (grad_fn=<clamp>). The operands are made before
 * the op is named: making one may raise a Lua error, which must not leave the name set. */
static tide_tensor *clamp_of(lua_State *L, tide_tensor *x, int lo, int hi)
{
    lt_operand o[2] = {{NULL, false}, {NULL, false}};
    if (!lua_isnil(L, lo))
        o[0] = lt_make_operand(L, lo);
    if (!lua_isnil(L, hi))
        o[1] = lt_make_operand(L, hi);
    const char *outer = tide_begin_op("clamp");
    tide_tensor *r = tide_retain(x);
    for (int i = 0; i < 2 && r; i++) {
        if (lua_isnil(L, i ? hi : lo))
            continue;
        tide_tensor *next = o[i].t ? (i ? tide_minimum(r, o[i].t) : tide_maximum(r, o[i].t)) : NULL;
        tide_release(r);
        r = next;
    }
    tide_end_op(outer);
    lt_free_operand(&o[0]);
    lt_free_operand(&o[1]);
    return r;
}

static void check_clamp_args(lua_State *L, const char *op)
{
    lua_settop(L, 3);
    for (int a = 2; a <= 3; a++)
        if (!lua_isnil(L, a))
            lt_check_operand(L, a, op);
    if (lua_isnil(L, 2) && lua_isnil(L, 3))
        luaL_error(L, "%s: at least one of min and max must be given", op);
}

static int t_clamp(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "clamp");
    check_clamp_args(L, "clamp");
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, clamp_of(L, x, 2, 3), false);
}

static int t_clamp_(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "clamp_");
    check_clamp_args(L, "clamp_");
    return lt_write_back(L, 1, x, clamp_of(L, x, 2, 3), "clamp_");
}

/* ---- matmul ---------------------------------------------------------------------------------- */

static int matmul_checked(lua_State *L, const char *op, int nda, int ndb)
{
    tide_tensor *a = lt_check(L, 1, op);
    tide_tensor *b = lt_check(L, 2, op);
    if ((nda && tide_ndim(a) != nda) || (ndb && tide_ndim(b) != ndb)) {
        char sa[200], sb[200];
        return luaL_error(L, "%s: expected a %d-dim and a %d-dim tensor, got shapes %s and %s",
                          op, nda, ndb, lt_shape_str(sa, sizeof sa, a),
                          lt_shape_str(sb, sizeof sb, b));
    }
    lua_settop(L, 2);
    lt_box *box = lt_newbox(L);
    const char *outer = tide_begin_op(op); /* grad_fn=<dot>, not matmul */
    tide_tensor *r = tide_matmul(a, b);
    tide_end_op(outer);
    return lt_fill(L, box, r, false);
}
static int t_matmul(lua_State *L) { return matmul_checked(L, "matmul", 0, 0); }
static int t_mm(lua_State *L) { return matmul_checked(L, "mm", 2, 2); }
static int t_bmm(lua_State *L) { return matmul_checked(L, "bmm", 3, 3); }
static int t_mv(lua_State *L) { return matmul_checked(L, "mv", 2, 1); }
static int t_dot(lua_State *L) { return matmul_checked(L, "dot", 1, 1); }

/* ---- equal, allclose ------------------------------------------------------------------------- */

static bool same_shape(const tide_tensor *a, const tide_tensor *b)
{
    int nd = tide_ndim(a);
    return nd == tide_ndim(b) && memcmp(tide_shape(a), tide_shape(b), sizeof(int64_t) * nd) == 0;
}

/* Reads a 0-dim count as an integer; -1 on failure. */
static int64_t count_of(tide_tensor *c)
{
    int64_t v = -1;
    if (c && tide_get_dtype(c) == TIDE_INT64 && tide_to_buffer(c, &v, sizeof v) < 0)
        v = -1;
    return v;
}

static int f_equal(lua_State *L)
{
    tide_tensor *a = lt_check(L, 1, "equal");
    tide_tensor *b = lt_check(L, 2, "equal");
    if (!same_shape(a, b)) {
        lua_pushboolean(L, 0);
        return 1;
    }
    lt_temps k = {.n = 0};
    tide_tensor *ne = lt_keep(&k, tide_ne(a, b));
    int64_t n = count_of(ne ? lt_keep(&k, tide_sum(ne, NULL, 0, false)) : NULL);
    lt_drop(&k);
    if (n < 0)
        return lt_raise(L, NULL);
    lua_pushboolean(L, n == 0);
    return 1;
}

static double opt_number(lua_State *L, int arg, const char *op, const char *what, double dflt)
{
    if (lua_isnoneornil(L, arg))
        return dflt;
    if (lua_type(L, arg) != LUA_TNUMBER)
        luaL_error(L, "%s: %s must be a number, got %s", op, what, luaL_typename(L, arg));
    return lua_tonumber(L, arg);
}

/* |a - b| <= atol + rtol * |b| everywhere (equal infinities count as close; NaNs only with
 * equal_nan), broadcasting a and b, as torch.allclose. */
static tide_tensor *isclose(tide_tensor *a0, tide_tensor *b0, double rtol, double atol,
                            bool equal_nan)
{
    lt_temps k = {.n = 0};
    tide_tensor *r = NULL;
    tide_tensor *a = lt_keep(&k, tide_cast(a0, TIDE_FLOAT64));
    tide_tensor *b = lt_keep(&k, tide_cast(b0, TIDE_FLOAT64));
    tide_tensor *d = a && b ? lt_keep(&k, tide_sub(a, b)) : NULL;
    tide_tensor *ad = d ? lt_keep(&k, tide_abs(d)) : NULL;
    tide_tensor *ab = ad ? lt_keep(&k, tide_abs(b)) : NULL;
    tide_tensor *tol = ab ? lt_keep(&k, tide_mul_scalar(ab, rtol)) : NULL;
    tide_tensor *tol2 = tol ? lt_keep(&k, tide_add_scalar(tol, atol)) : NULL;
    tide_tensor *le = tol2 ? lt_keep(&k, tide_le(ad, tol2)) : NULL;
    tide_tensor *eq = le ? lt_keep(&k, tide_eq(a, b)) : NULL;
    tide_tensor *ok = eq ? lt_keep(&k, tide_logical_or(le, eq)) : NULL;
    if (ok && equal_nan) {
        tide_tensor *na = lt_keep(&k, tide_ne(a, a));
        tide_tensor *nb = na ? lt_keep(&k, tide_ne(b, b)) : NULL;
        tide_tensor *nn = nb ? lt_keep(&k, tide_logical_and(na, nb)) : NULL;
        ok = nn ? lt_keep(&k, tide_logical_or(ok, nn)) : NULL;
    }
    r = tide_retain(ok);
    lt_drop(&k);
    return r;
}

static void check_close_args(lua_State *L, const char *op, double *rtol, double *atol, bool *nan)
{
    *rtol = opt_number(L, 3, op, "rtol", 1e-5);
    *atol = opt_number(L, 4, op, "atol", 1e-8);
    *nan = false;
    if (!lua_isnoneornil(L, 5)) {
        if (lua_type(L, 5) != LUA_TBOOLEAN)
            luaL_error(L, "%s: equal_nan must be a boolean", op);
        *nan = lua_toboolean(L, 5);
    }
}

static int f_allclose(lua_State *L)
{
    tide_tensor *a = lt_check(L, 1, "allclose");
    tide_tensor *b = lt_check(L, 2, "allclose");
    double rtol, atol;
    bool nan;
    check_close_args(L, "allclose", &rtol, &atol, &nan);
    lt_temps k = {.n = 0};
    tide_tensor *ok = lt_keep(&k, isclose(a, b, rtol, atol, nan));
    tide_tensor *bad = ok ? lt_keep(&k, tide_logical_not(ok)) : NULL;
    int64_t n = count_of(bad ? lt_keep(&k, tide_sum(bad, NULL, 0, false)) : NULL);
    lt_drop(&k);
    if (n < 0)
        return lt_raise(L, NULL);
    lua_pushboolean(L, n == 0);
    return 1;
}

static int f_isclose(lua_State *L)
{
    tide_tensor *a = lt_check(L, 1, "isclose");
    tide_tensor *b = lt_check(L, 2, "isclose");
    double rtol, atol;
    bool nan;
    check_close_args(L, "isclose", &rtol, &atol, &nan);
    lua_settop(L, 5);
    lt_box *box = lt_newbox(L);
    return lt_fill(L, box, isclose(a, b, rtol, atol, nan), false);
}

static const lt_reg ops_regs[] = {
    {"fill_", t_fill_, LT_METHOD},
    {"zero_", t_zero_, LT_METHOD},
    {"copy_", t_copy_, LT_METHOD},
    {"max", t_max, LT_BOTH},
    {"min", t_min, LT_BOTH},
    {"argmax", t_argmax, LT_BOTH},
    {"argmin", t_argmin, LT_BOTH},
    {"all", t_all, LT_BOTH},
    {"any", t_any, LT_BOTH},
    {"where", t_where, LT_METHOD},
    {"clamp", t_clamp, LT_BOTH},
    {"clip", t_clamp, LT_BOTH},
    {"clamp_", t_clamp_, LT_METHOD},
    {"matmul", t_matmul, LT_BOTH},
    {"mm", t_mm, LT_BOTH},
    {"bmm", t_bmm, LT_BOTH},
    {"mv", t_mv, LT_BOTH},
    {"dot", t_dot, LT_BOTH},
    {"equal", f_equal, LT_BOTH},
    {"allclose", f_allclose, LT_BOTH},
    {"isclose", f_isclose, LT_BOTH},
    {"triu", t_triu, LT_BOTH},
    {"tril", t_tril, LT_BOTH},
    {"cumsum", t_cumsum, LT_BOTH},
    {"topk", t_topk, LT_BOTH},
    {"multinomial", t_multinomial, LT_BOTH},
    {NULL, NULL, 0},
};

static void set_meta(lua_State *L, int mt, const char *name, lua_CFunction fn)
{
    lua_pushvalue(L, mt);
    lua_pushcclosure(L, fn, 1);
    lua_setfield(L, mt, name);
}

void lt_open_ops(lua_State *L, int mt, int methods, int module)
{
    char name[64];
    for (size_t i = 0; i < sizeof unary_ops / sizeof unary_ops[0]; i++) {
        lua_pushvalue(L, mt);
        lua_pushinteger(L, (lua_Integer)i);
        lt_setclosure(L, unary_ops[i].name, unary, 2, LT_BOTH, methods, module);
        if (unary_ops[i].inplace) {
            snprintf(name, sizeof name, "%s_", unary_ops[i].name);
            lua_pushvalue(L, mt);
            lua_pushinteger(L, (lua_Integer)i);
            lt_setclosure(L, name, unary_inplace, 2, LT_METHOD, methods, module);
        }
    }
    for (size_t i = 0; i < sizeof binary_ops / sizeof binary_ops[0]; i++) {
        lua_pushvalue(L, mt);
        lua_pushinteger(L, (lua_Integer)i);
        lt_setclosure(L, binary_ops[i].name, binary, 2, LT_BOTH, methods, module);
        if (binary_ops[i].inplace) {
            snprintf(name, sizeof name, "%s_", binary_ops[i].name);
            lua_pushvalue(L, mt);
            lua_pushinteger(L, (lua_Integer)i);
            lt_setclosure(L, name, binary_inplace, 2, LT_METHOD, methods, module);
        }
    }
    for (size_t i = 0; i < sizeof reduce_ops / sizeof reduce_ops[0]; i++) {
        lua_pushvalue(L, mt);
        lua_pushinteger(L, (lua_Integer)i);
        lt_setclosure(L, reduce_ops[i].name, reduce, 2, LT_BOTH, methods, module);
    }
    lt_setfuncs(L, ops_regs, mt, methods, module);
    /* tide.where(cond, a, b) differs from the method x:where(cond, y) */
    lua_pushvalue(L, mt);
    lt_setclosure(L, "where", f_where, 1, LT_FUNCTION, methods, module);
    set_meta(L, mt, "__add", op_add);
    set_meta(L, mt, "__sub", op_sub);
    set_meta(L, mt, "__mul", op_mul);
    set_meta(L, mt, "__div", op_div);
    set_meta(L, mt, "__pow", op_pow);
    set_meta(L, mt, "__idiv", op_idiv); /* a // b */
    set_meta(L, mt, "__mod", op_mod);   /* a % b */
    set_meta(L, mt, "__unm", op_unm);
}
