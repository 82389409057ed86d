/*
 * ltide_math.c — the Lua side of issue 24's elementwise math and activations (ops/math.c,
 * ops/nn_activation_more.c and the new primitives): tide.log1p ... tide.fmod as functions and
 * tensor methods (with in-place forms x:log1p_() where PyTorch has them), lerp, nan_to_num,
 * addcmul/addcdiv, and the activations tide.elu ... tide.glu that tide.nn.functional wraps.
 * Keyword options come as a trailing table ({value = 2}, {beta = 2, threshold = 10}); dims are
 * 1-based (glu's dim, default -1).
 */
#include <math.h>
#include <stdio.h>

#include "ltide.h"

typedef tide_tensor *(*unary_fn)(const tide_tensor *);
typedef tide_tensor *(*binary_fn)(const tide_tensor *, const tide_tensor *);

static const struct {
    const char *name;
    unary_fn fn;
    int where;    /* LT_BOTH: also a method; LT_FUNCTION: tide.name only */
    bool inplace; /* also x:name_() */
} unary_ops[] = {
    {"log1p", tide_log1p, LT_BOTH, true},     {"expm1", tide_expm1, LT_BOTH, true},
    {"log2", tide_log2, LT_BOTH, true},       {"tan", tide_tan, LT_BOTH, true},
    {"asin", tide_asin, LT_BOTH, true},       {"acos", tide_acos, LT_BOTH, true},
    {"atan", tide_atan, LT_BOTH, true},       {"sinh", tide_sinh, LT_BOTH, true},
    {"cosh", tide_cosh, LT_BOTH, true},       {"trunc", tide_trunc, LT_BOTH, true},
    {"square", tide_square, LT_BOTH, true},   {"frac", tide_frac, LT_BOTH, true},
    {"isnan", tide_isnan, LT_BOTH, false},    {"isinf", tide_isinf, LT_BOTH, false},
    {"isfinite", tide_isfinite, LT_BOTH, false},
    {"exp2", tide_exp2, LT_BOTH, true},       {"log10", tide_log10, LT_BOTH, true},
    {"selu", tide_selu, LT_FUNCTION, false},  {"mish", tide_mish, LT_FUNCTION, false},
    {"softsign", tide_softsign, LT_FUNCTION, false},
    {"hardswish", tide_hardswish, LT_FUNCTION, false},
    {"hardsigmoid", tide_hardsigmoid, LT_FUNCTION, false},
    {"logsigmoid", tide_logsigmoid, LT_FUNCTION, false},
    {"relu6", tide_relu6, LT_FUNCTION, false},
};

static const struct {
    const char *name;
    binary_fn fn;
    bool inplace;
} binary_ops[] = {
    {"atan2", tide_atan2, true},      {"fmod", tide_fmod, true},
    {"hypot", tide_hypot, true},      {"xlogy", tide_xlogy, true},
    {"logaddexp", tide_logaddexp, false},
    {"clamp_min", tide_clamp_min, true}, {"clamp_max", tide_clamp_max, true},
    {"logical_xor", tide_logical_xor, false},
};

static int unary(lua_State *L)
{
    int i = (int)lua_tointeger(L, lua_upvalueindex(2));
    tide_tensor *x = lt_check(L, 1, unary_ops[i].name);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, unary_ops[i].fn(x), false);
}

static int unary_inplace(lua_State *L)
{
    int i = (int)lua_tointeger(L, lua_upvalueindex(2));
    tide_tensor *x = lt_check(L, 1, unary_ops[i].name);
    lua_settop(L, 1);
    return lt_write_back(L, 1, x, unary_ops[i].fn(x), unary_ops[i].name);
}

/* fn over the operands at a and b (tensors or numbers); NULL with tide_last_error on failure. */
static tide_tensor *apply2(lua_State *L, int a, int b, binary_fn fn)
{
    lt_operand x = lt_make_operand(L, a), y = lt_make_operand(L, b);
    tide_tensor *r = x.t && y.t ? fn(x.t, y.t) : NULL;
    lt_free_operand(&x);
    lt_free_operand(&y);
    return r;
}

static int binary(lua_State *L)
{
    int i = (int)lua_tointeger(L, lua_upvalueindex(2));
    const char *name = binary_ops[i].name;
    lt_check_operand(L, 1, name);
    lt_check_operand(L, 2, name);
    if (lua_type(L, 1) != LUA_TUSERDATA && lua_type(L, 2) != LUA_TUSERDATA)
        return luaL_error(L, "%s: at least one argument must be a tensor", name);
    lua_settop(L, 2);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, apply2(L, 1, 2, binary_ops[i].fn), false);
}

static int binary_inplace(lua_State *L)
{
    int i = (int)lua_tointeger(L, lua_upvalueindex(2));
    const char *name = binary_ops[i].name;
    tide_tensor *x = lt_check(L, 1, name);
    lt_check_operand(L, 2, name);
    lua_settop(L, 2);
    return lt_write_back(L, 1, x, apply2(L, 1, 2, binary_ops[i].fn), name);
}

/* A number argument: the field key of the options table at opts (when there is one there),
 * else the positional argument pos, else dflt. Raises naming op when it is not a number. */
static double param(lua_State *L, int opts, int pos, const char *op, const char *key, double dflt)
{
    int arg = pos;
    if (lua_istable(L, opts)) {
        lua_getfield(L, opts, key);
        arg = lua_gettop(L);
    }
    double v = dflt;
    if (!lua_isnoneornil(L, arg)) {
        if (lua_type(L, arg) != LUA_TNUMBER)
            luaL_error(L, "%s: %s must be a number, got %s", op, key, luaL_typename(L, arg));
        v = lua_tonumber(L, arg);
    }
    if (arg != pos)
        lua_pop(L, 1);
    return v;
}

/* tide.lerp(start, end, weight): weight a number or a tensor. */
static int f_lerp(lua_State *L)
{
    lt_check(L, 1, "lerp");
    lt_check(L, 2, "lerp");
    lt_check_operand(L, 3, "lerp");
    lua_settop(L, 3);
    lt_box *b = lt_newbox(L);
    lt_operand w = lt_make_operand(L, 3);
    tide_tensor *r = w.t ? tide_lerp(lt_totensor(L, 1), lt_totensor(L, 2), w.t) : NULL;
    lt_free_operand(&w);
    return lt_fill(L, b, r, false);
}

/* tide.nan_to_num(x [, nan [, posinf [, neginf]]]) or (x, {nan=, posinf=, neginf=}). */
static int f_nan_to_num(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "nan_to_num");
    double nan = param(L, 2, 2, "nan_to_num", "nan", 0);
    double pinf = param(L, 2, 3, "nan_to_num", "posinf", 0);
    double ninf = param(L, 2, 4, "nan_to_num", "neginf", 0);
    bool has_p, has_n;
    if (lua_istable(L, 2)) {
        has_p = lua_getfield(L, 2, "posinf") != LUA_TNIL;
        has_n = lua_getfield(L, 2, "neginf") != LUA_TNIL;
        lua_pop(L, 2);
    } else {
        has_p = !lua_isnoneornil(L, 3);
        has_n = !lua_isnoneornil(L, 4);
    }
    lua_settop(L, 4);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_nan_to_num(x, nan, has_p ? &pinf : NULL, has_n ? &ninf : NULL),
                   false);
}

/* tide.addcmul(input, t1, t2 [, value | {value=}]), addcdiv the same. */
static int addc(lua_State *L, bool divide)
{
    const char *op = divide ? "addcdiv" : "addcmul";
    tide_tensor *in = lt_check(L, 1, op), *t1 = lt_check(L, 2, op), *t2 = lt_check(L, 3, op);
    double value = param(L, 4, 4, op, "value", 1);
    lua_settop(L, 4);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, (divide ? tide_addcdiv : tide_addcmul)(in, t1, t2, value), false);
}
static int f_addcmul(lua_State *L) { return addc(L, false); }
static int f_addcdiv(lua_State *L) { return addc(L, true); }

/* Activations with parameters: (x [, p1 [, p2]]) or (x, {name1=, name2=}). */
static int f_elu(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "elu");
    double alpha = param(L, 2, 2, "elu", "alpha", 1);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_elu(x, alpha), false);
}

static int f_celu(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "celu");
    double alpha = param(L, 2, 2, "celu", "alpha", 1);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_celu(x, alpha), false);
}

static int f_softplus(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "softplus");
    double beta = param(L, 2, 2, "softplus", "beta", 1);
    double threshold = param(L, 2, 3, "softplus", "threshold", 20);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_softplus(x, beta, threshold), false);
}

static int f_hardtanh(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "hardtanh");
    double lo = param(L, 2, 2, "hardtanh", "min_val", -1);
    double hi = param(L, 2, 3, "hardtanh", "max_val", 1);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_hardtanh(x, lo, hi), false);
}

static int f_leaky_relu(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "leaky_relu");
    double slope = param(L, 2, 2, "leaky_relu", "negative_slope", 0.01);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_leaky_relu(x, slope), false);
}

/* tide.glu(x [, dim | {dim=}]): dim 1-based or negative, the last by default. */
static int f_glu(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "glu");
    double d = param(L, 2, 2, "glu", "dim", -1);
    if (!(d >= -64 && d <= 64) || d != floor(d)) /* checked before any conversion to int */
        return luaL_error(L, "glu: dim must be an integer dim of the input, got %f", d);
    int dim = lt_dim_value(L, (int64_t)d, tide_ndim(x), 0, "glu");
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_glu(x, dim), false);
}

static const lt_reg math_regs[] = {
    {"lerp", f_lerp, LT_BOTH},         {"nan_to_num", f_nan_to_num, LT_BOTH},
    {"addcmul", f_addcmul, LT_BOTH},   {"addcdiv", f_addcdiv, LT_BOTH},
    {"elu", f_elu, LT_FUNCTION},       {"celu", f_celu, LT_FUNCTION},
    {"softplus", f_softplus, LT_FUNCTION}, {"hardtanh", f_hardtanh, LT_FUNCTION},
    {"leaky_relu", f_leaky_relu, LT_FUNCTION}, {"glu", f_glu, LT_FUNCTION},
    {NULL, NULL, 0},
};

static void set_op(lua_State *L, const char *name, lua_CFunction fn, int i, int where, int mt,
                   int methods, int module)
{
    lua_pushvalue(L, mt);
    lua_pushinteger(L, i);
    lt_setclosure(L, name, fn, 2, where, methods, module);
}

void lt_open_math(lua_State *L, int mt, int methods, int module)
{
    char name[64];
    for (int i = 0; i < (int)(sizeof unary_ops / sizeof unary_ops[0]); i++) {
        set_op(L, unary_ops[i].name, unary, i, unary_ops[i].where, mt, methods, module);
        snprintf(name, sizeof name, "%s_", unary_ops[i].name);
        if (unary_ops[i].inplace)
            set_op(L, name, unary_inplace, i, LT_METHOD, mt, methods, module);
    }
    for (int i = 0; i < (int)(sizeof binary_ops / sizeof binary_ops[0]); i++) {
        set_op(L, binary_ops[i].name, binary, i, LT_BOTH, mt, methods, module);
        snprintf(name, sizeof name, "%s_", binary_ops[i].name);
        if (binary_ops[i].inplace)
            set_op(L, name, binary_inplace, i, LT_METHOD, mt, methods, module);
    }
    lt_setfuncs(L, math_regs, mt, methods, module);
}
