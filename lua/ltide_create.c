/*
 * ltide_create.c — making tensors from Lua: tide.tensor from nested tables, zeros/ones/empty/
 * full/arange/linspace/eye, the *_like forms, and random numbers (rand, randn, randint, randperm,
 * bernoulli, manual_seed, rng state, uniform_/normal_).
 *
 * Sizes come as integers or one table, with an optional options table last:
 * tide.zeros(2, 3), tide.zeros({2, 3}, {dtype = "int64"}), tide.zeros(2, 3, {dtype = "int64"}).
 * {device = name} makes the tensor on that device (else the thread's default device, see
 * tide.set_default_device); *_like follow their argument's device and dtype.
 */
#include <math.h>
#include <string.h>

#include "ltide.h"

/* Reads the sizes starting at first and the options table after them; returns ndim. */
static int sizes_and_options(lua_State *L, int first, const char *op, int64_t shape[TIDE_MAX_DIMS],
                             lt_options *o)
{
    int top = lua_gettop(L);
    int opt = top + 1, last = top;
    if (lua_type(L, first) == LUA_TTABLE) {
        if (top > first + 1)
            luaL_error(L, "%s: sizes given as a table take at most an options table after them",
                       op);
        last = first;
        opt = first + 1;
    } else if (top >= first && lua_type(L, top) == LUA_TTABLE) {
        opt = top;
        last = top - 1;
    }
    int nd = lt_checksizes(L, first, last, op, false, shape);
    lt_checkoptions(L, opt, op, o);
    return nd;
}

/* ---- tide.tensor(nested_table) -------------------------------------------------------------- */

enum { KIND_BOOL, KIND_INT, KIND_FLOAT };

typedef struct nest {
    int ndim;
    int64_t shape[TIDE_MAX_DIMS];
    int64_t path[TIDE_MAX_DIMS]; /* where the scan is, for error messages */
    int kind;
    bool any;
} nest;

static const char *path_str(char *buf, size_t size, const nest *n, int depth)
{
    size_t len = 0;
    buf[0] = 0;
    for (int i = 0; i < depth && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, "[%lld]", (long long)n->path[i] + 1);
    return buf;
}

/* The shape is read along the first elements; the scan then checks every table against it. */
static void nest_shape(lua_State *L, int idx, nest *n)
{
    lua_pushvalue(L, idx);
    while (lua_type(L, -1) == LUA_TTABLE) {
        if (n->ndim == TIDE_MAX_DIMS)
            luaL_error(L, "tensor: the nested tables are deeper than %d dims", TIDE_MAX_DIMS);
        lua_Unsigned len = lua_rawlen(L, -1);
        if (len > ((lua_Unsigned)1 << 40))
            luaL_error(L, "tensor: table too long");
        n->shape[n->ndim++] = (int64_t)len;
        if (len == 0)
            break;
        lua_rawgeti(L, -1, 1);
        lua_remove(L, -2);
    }
    lua_pop(L, 1);
}

static void nest_scan(lua_State *L, nest *n, int depth)
{
    char p[160];
    lua_Unsigned len = lua_rawlen(L, -1);
    if ((int64_t)len != n->shape[depth])
        luaL_error(L, "tensor: ragged nested table: the table at %s has %d elements, expected %d "
                   "like the first one at its depth",
                   depth ? path_str(p, sizeof p, n, depth) : "the top", (int)len,
                   (int)n->shape[depth]);
    luaL_checkstack(L, 4, "tensor: nesting too deep");
    for (int64_t i = 0; i < (int64_t)len; i++) {
        n->path[depth] = i;
        int type = lua_rawgeti(L, -1, (lua_Integer)i + 1);
        if (depth + 1 < n->ndim) {
            if (type != LUA_TTABLE)
                luaL_error(L, "tensor: ragged nested table: element %s is a %s where a table was "
                           "expected", path_str(p, sizeof p, n, depth + 1), luaL_typename(L, -1));
            nest_scan(L, n, depth + 1);
        } else if (type == LUA_TNUMBER) {
            int k = lua_isinteger(L, -1) ? KIND_INT : KIND_FLOAT;
            n->kind = k > n->kind ? k : n->kind;
            n->any = true;
        } else if (type == LUA_TBOOLEAN) {
            n->any = true;
        } else if (type == LUA_TTABLE) {
            luaL_error(L, "tensor: ragged nested table: element %s is a table where a number was "
                       "expected", path_str(p, sizeof p, n, depth + 1));
        } else if (type == LUA_TUSERDATA) {
            luaL_error(L, "tensor: element %s is a %s; elements must be numbers or booleans (use "
                       "tide.stack or tide.cat to combine tensors)",
                       path_str(p, sizeof p, n, depth + 1), luaL_typename(L, -1));
        } else {
            luaL_error(L, "tensor: element %s is a %s; elements must be numbers or booleans",
                       path_str(p, sizeof p, n, depth + 1), luaL_typename(L, -1));
        }
        lua_pop(L, 1);
    }
}

static void nest_fill(lua_State *L, const nest *n, int depth, bool as_int, void *buf, int64_t *pos)
{
    lua_Unsigned len = lua_rawlen(L, -1);
    for (lua_Unsigned i = 1; i <= len; i++) {
        lua_rawgeti(L, -1, (lua_Integer)i);
        if (depth + 1 < n->ndim) {
            nest_fill(L, n, depth + 1, as_int, buf, pos);
        } else if (as_int) {
            ((int64_t *)buf)[(*pos)++] =
                lua_type(L, -1) == LUA_TBOOLEAN ? lua_toboolean(L, -1) : lua_tointeger(L, -1);
        } else {
            ((double *)buf)[(*pos)++] =
                lua_type(L, -1) == LUA_TBOOLEAN ? lua_toboolean(L, -1) : lua_tonumber(L, -1);
        }
        lua_pop(L, 1);
    }
}

/* The host values in buf (src dtype) as dtype on device (NULL: the default): converted on the
 * host, then written through the device's write. */
static tide_tensor *from_data_as(const void *buf, int nd, const int64_t *shape, tide_dtype src,
                                 tide_dtype dtype, const char *device)
{
    tide_tensor *t0 = tide_from_data_on("cpu", buf, nd, shape, src);
    tide_tensor *t = t0 ? tide_cast(t0, dtype) : NULL;
    tide_release(t0);
    const char *target = device ? device : tide_get_default_device();
    if (!t || strcmp(target, tide_device_name(t)) == 0)
        return t;
    tide_tensor *placed = tide_from_data_on(target, tide_data_ptr(t), nd, shape, dtype);
    tide_release(t);
    return placed;
}

/* tide.tensor's result in box; a failure names "tensor" before the op inside that failed
 * (from_data, to: an unknown device). */
static int tensor_created(lua_State *L, lt_box *b, tide_tensor *t, const lt_options *o)
{
    if (!t)
        return luaL_error(L, "tensor: %s", tide_last_error());
    return lt_fill_created(L, b, t, o);
}

static int f_tensor(lua_State *L)
{
    lt_options o;
    lt_checkoptions(L, 2, "tensor", &o);
    lua_settop(L, 2);
    tide_tensor *src;
    int type = lua_type(L, 1);
    if (type == LUA_TNUMBER || type == LUA_TBOOLEAN) {
        tide_dtype dflt = type == LUA_TBOOLEAN ? TIDE_BOOL
                          : lua_isinteger(L, 1) ? TIDE_INT64 : TIDE_FLOAT32;
        tide_dtype dtype = o.dtype >= 0 ? (tide_dtype)o.dtype : dflt;
        lt_box *b = lt_newbox(L);
        tide_tensor *t;
        if (lua_isinteger(L, 1)) {
            int64_t v = (int64_t)lua_tointeger(L, 1);
            t = from_data_as(&v, 0, NULL, TIDE_INT64, dtype, o.device);
        } else {
            double v = type == LUA_TBOOLEAN ? lua_toboolean(L, 1) : lua_tonumber(L, 1);
            t = from_data_as(&v, 0, NULL, TIDE_FLOAT64, dtype, o.device);
        }
        return tensor_created(L, b, t, &o);
    }
    if ((src = lt_totensor(L, 1))) {
        lt_box *b = lt_newbox(L);
        tide_tensor *t = o.dtype >= 0 && o.dtype != (int)tide_get_dtype(src)
                             ? tide_cast(src, (tide_dtype)o.dtype) : tide_clone(src);
        if (t && o.device) { /* a copy of a tensor onto a device is a move */
            tide_tensor *moved = tide_to(t, o.device);
            tide_release(t);
            t = moved;
        }
        return tensor_created(L, b, t, &o);
    }
    if (type != LUA_TTABLE)
        return luaL_error(L, "tensor: expected a (nested) table of numbers, a number or a tensor, "
                          "got %s", luaL_typename(L, 1));
    nest n;
    memset(&n, 0, sizeof n);
    nest_shape(L, 1, &n);
    int64_t numel = 1;
    for (int i = 0; i < n.ndim; i++) {
        if (n.shape[i] && numel > ((int64_t)1 << 40) / n.shape[i])
            return luaL_error(L, "tensor: too many elements");
        numel *= n.shape[i];
    }
    lua_pushvalue(L, 1);
    nest_scan(L, &n, 0);
    tide_dtype dflt = !n.any ? TIDE_FLOAT32
                      : n.kind == KIND_FLOAT ? TIDE_FLOAT32
                      : n.kind == KIND_INT ? TIDE_INT64 : TIDE_BOOL;
    tide_dtype dtype = o.dtype >= 0 ? (tide_dtype)o.dtype : dflt;
    bool as_int = n.kind != KIND_FLOAT;
    void *buf = lua_newuserdatauv(L, numel ? (size_t)numel * 8 : 8, 0);
    lua_pushvalue(L, 1);
    int64_t pos = 0;
    nest_fill(L, &n, 0, as_int, buf, &pos);
    lua_pop(L, 1);
    lt_box *b = lt_newbox(L);
    return tensor_created(L, b, from_data_as(buf, n.ndim, n.shape,
                                              as_int ? TIDE_INT64 : TIDE_FLOAT64, dtype, o.device),
                           &o);
}

/* ---- zeros, ones, empty, rand, randn --------------------------------------------------------- */

typedef tide_tensor *(*shape_fn)(const char *, int, const int64_t *, tide_dtype);

static const struct {
    const char *name;
    shape_fn fn;
} shape_makers[] = {
    {"zeros", tide_zeros_on}, {"ones", tide_ones_on}, {"empty", tide_empty_on},
    {"rand", tide_rand_on},   {"randn", tide_randn_on},
};

static int f_shaped(lua_State *L)
{
    int i = (int)lua_tointeger(L, lua_upvalueindex(2));
    int64_t shape[TIDE_MAX_DIMS];
    lt_options o;
    int nd = sizes_and_options(L, 1, shape_makers[i].name, shape, &o);
    lt_box *b = lt_newbox(L);
    tide_dtype dtype = o.dtype >= 0 ? (tide_dtype)o.dtype : TIDE_FLOAT32;
    return lt_fill_created(L, b, shape_makers[i].fn(o.device, nd, shape, dtype), &o);
}

/* The device of a *_like result: the option, else x's. */
static const char *like_device(const lt_options *o, tide_tensor *x)
{
    return o->device ? o->device : tide_device_name(x);
}

/* zeros_like(x [, opts]) ...: the shape and (unless given) the dtype and device of x. */
static int f_shaped_like(lua_State *L)
{
    int i = (int)lua_tointeger(L, lua_upvalueindex(2));
    char name[40];
    snprintf(name, sizeof name, "%s_like", shape_makers[i].name);
    tide_tensor *x = lt_check(L, 1, name);
    lt_options o;
    lt_checkoptions(L, 2, name, &o);
    lua_settop(L, 2);
    lt_box *b = lt_newbox(L);
    tide_dtype dtype = o.dtype >= 0 ? (tide_dtype)o.dtype : tide_get_dtype(x);
    return lt_fill_created(
        L, b, shape_makers[i].fn(like_device(&o, x), tide_ndim(x), tide_shape(x), dtype), &o);
}

/* A tensor of shape filled with the Lua value at arg (exact for 64-bit integers). */
static tide_tensor *full_of(lua_State *L, int arg, const char *device, int nd,
                           const int64_t *shape, tide_dtype dtype)
{
    if (lua_isinteger(L, arg) && dtype == TIDE_INT64) {
        tide_tensor *t = tide_full_on(device, nd, shape, 0, dtype); /* errors name "full" */
        if (!t)
            return NULL;
        tide_tensor *v = tide_integer((int64_t)lua_tointeger(L, arg));
        int rc = v ? tide_copy_(t, v) : -1;
        tide_release(v);
        if (rc < 0) {
            tide_release(t);
            return NULL;
        }
        return t;
    }
    double v = lua_type(L, arg) == LUA_TBOOLEAN ? lua_toboolean(L, arg) : lua_tonumber(L, arg);
    return tide_full_on(device, nd, shape, v, dtype);
}

static tide_dtype value_dtype(lua_State *L, int arg)
{
    if (lua_type(L, arg) == LUA_TBOOLEAN)
        return TIDE_BOOL;
    return lua_isinteger(L, arg) ? TIDE_INT64 : TIDE_FLOAT32;
}

static void check_value(lua_State *L, int arg, const char *op)
{
    if (lua_type(L, arg) != LUA_TNUMBER && lua_type(L, arg) != LUA_TBOOLEAN)
        luaL_error(L, "%s: the fill value must be a number or a boolean, got %s", op,
                   luaL_typename(L, arg));
}

/* full({2, 3}, v [, opts]) or full(2, 3, v [, opts]) */
static int f_full(lua_State *L)
{
    int top = lua_gettop(L);
    int64_t shape[TIDE_MAX_DIMS];
    lt_options o;
    int nd, varg;
    if (lua_type(L, 1) == LUA_TTABLE) {
        nd = lt_checksizes(L, 1, 1, "full", false, shape);
        varg = 2;
        lt_checkoptions(L, 3, "full", &o);
    } else {
        int opt = top >= 1 && lua_type(L, top) == LUA_TTABLE ? top : top + 1;
        varg = opt - 1;
        if (varg < 1)
            return luaL_error(L, "full: expected sizes and a fill value");
        nd = lt_checksizes(L, 1, varg - 1, "full", false, shape);
        lt_checkoptions(L, opt, "full", &o);
    }
    check_value(L, varg, "full");
    tide_dtype dtype = o.dtype >= 0 ? (tide_dtype)o.dtype : value_dtype(L, varg);
    lt_box *b = lt_newbox(L);
    return lt_fill_created(L, b, full_of(L, varg, o.device, nd, shape, dtype), &o);
}

static int f_full_like(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "full_like");
    check_value(L, 2, "full_like");
    lt_options o;
    lt_checkoptions(L, 3, "full_like", &o);
    lua_settop(L, 3);
    tide_dtype dtype = o.dtype >= 0 ? (tide_dtype)o.dtype : tide_get_dtype(x);
    lt_box *b = lt_newbox(L);
    return lt_fill_created(
        L, b, full_of(L, 2, like_device(&o, x), tide_ndim(x), tide_shape(x), dtype), &o);
}

/* ---- ranges --------------------------------------------------------------------------------- */

static double check_number(lua_State *L, int arg, const char *op, const char *what)
{
    if (lua_type(L, arg) != LUA_TNUMBER)
        luaL_error(L, "%s: %s must be a number, got %s", op, what, luaL_typename(L, arg));
    return lua_tonumber(L, arg);
}

/* arange(end) or arange(start, end [, step]), end excluded, as torch.arange */
static int f_arange(lua_State *L)
{
    int top = lua_gettop(L);
    int opt = top >= 1 && lua_type(L, top) == LUA_TTABLE ? top : top + 1;
    int nnum = opt - 1;
    if (nnum < 1 || nnum > 3)
        return luaL_error(L, "arange: expected arange(end) or arange(start, end [, step])");
    double start = 0, end, step = 1;
    bool ints = true;
    for (int a = 1; a <= nnum; a++) {
        check_number(L, a, "arange", a == 3 ? "step" : nnum == 1 || a == 2 ? "end" : "start");
        ints = ints && lua_isinteger(L, a);
    }
    if (nnum == 1) {
        end = lua_tonumber(L, 1);
    } else {
        start = lua_tonumber(L, 1);
        end = lua_tonumber(L, 2);
        if (nnum == 3)
            step = lua_tonumber(L, 3);
    }
    lt_options o;
    lt_checkoptions(L, opt, "arange", &o);
    tide_dtype dtype = o.dtype >= 0 ? (tide_dtype)o.dtype : ints ? TIDE_INT64 : TIDE_FLOAT32;
    lt_box *b = lt_newbox(L);
    return lt_fill_created(L, b, tide_arange_on(o.device, start, end, step, dtype), &o);
}

static int f_linspace(lua_State *L)
{
    double start = check_number(L, 1, "linspace", "start");
    double end = check_number(L, 2, "linspace", "end");
    int64_t steps = lt_checkint(L, 3, "linspace", "steps");
    lt_options o;
    lt_checkoptions(L, 4, "linspace", &o);
    lua_settop(L, 4);
    lt_box *b = lt_newbox(L);
    tide_dtype dtype = o.dtype >= 0 ? (tide_dtype)o.dtype : TIDE_FLOAT32;
    return lt_fill_created(L, b, tide_linspace_on(o.device, start, end, steps, dtype), &o);
}

/* logspace(start, end, steps [, base] [, opts]) */
static int f_logspace(lua_State *L)
{
    double start = check_number(L, 1, "logspace", "start");
    double end = check_number(L, 2, "logspace", "end");
    int64_t steps = lt_checkint(L, 3, "logspace", "steps");
    int opt = 4;
    double base = 10;
    if (lua_type(L, 4) == LUA_TNUMBER)
        base = lua_tonumber(L, opt++);
    lt_options o;
    lt_checkoptions(L, opt, "logspace", &o);
    lua_settop(L, 5);
    lt_box *b = lt_newbox(L);
    tide_dtype dtype = o.dtype >= 0 ? (tide_dtype)o.dtype : TIDE_FLOAT32;
    return lt_fill_created(L, b, tide_logspace_on(o.device, start, end, steps, base, dtype), &o);
}

/* eye(n [, m] [, opts]) */
static int f_eye(lua_State *L)
{
    int64_t n = lt_checkint(L, 1, "eye", "n");
    int64_t m = n;
    int opt = 2;
    if (lua_type(L, 2) == LUA_TNUMBER) {
        m = lt_checkint(L, 2, "eye", "m");
        opt = 3;
    }
    lt_options o;
    lt_checkoptions(L, opt, "eye", &o);
    lua_settop(L, 3);
    lt_box *b = lt_newbox(L);
    tide_dtype dtype = o.dtype >= 0 ? (tide_dtype)o.dtype : TIDE_FLOAT32;
    return lt_fill_created(L, b, tide_eye_on(o.device, n, m, dtype), &o);
}

/* ---- random numbers ------------------------------------------------------------------------- */

static int f_manual_seed(lua_State *L)
{
    int64_t s = lt_checkint(L, 1, "manual_seed", "the seed");
    tide_manual_seed((uint64_t)s);
    return 0;
}

static int f_get_rng_state(lua_State *L)
{
    uint64_t st[2];
    tide_get_rng_state(st);
    int64_t v[2] = {(int64_t)st[0], (int64_t)st[1]};
    lt_pushints(L, v, 2);
    return 1;
}

static int f_set_rng_state(lua_State *L)
{
    luaL_argexpected(L, lua_type(L, 1) == LUA_TTABLE, 1, "table {seed, offset}");
    uint64_t st[2];
    for (int i = 0; i < 2; i++) {
        lua_rawgeti(L, 1, i + 1);
        st[i] = (uint64_t)lt_checkint(L, -1, "set_rng_state", "a state entry");
        lua_pop(L, 1);
    }
    tide_set_rng_state(st);
    return 0;
}

/* randint(high, size [, opts]) or randint(low, high, size [, opts]): values in [low, high). */
static int f_randint(lua_State *L)
{
    int size_arg = lua_type(L, 2) == LUA_TTABLE ? 2 : 3;
    int64_t low = 0, high;
    if (size_arg == 2) {
        high = lt_checkint(L, 1, "randint", "high");
    } else {
        low = lt_checkint(L, 1, "randint", "low");
        high = lt_checkint(L, 2, "randint", "high");
    }
    if (lua_type(L, size_arg) != LUA_TTABLE)
        return luaL_error(L, "randint: expected randint([low,] high, size_table [, options])");
    int64_t shape[TIDE_MAX_DIMS];
    int nd = lt_checksizes(L, size_arg, size_arg, "randint", false, shape);
    lt_options o;
    lt_checkoptions(L, size_arg + 1, "randint", &o);
    lua_settop(L, size_arg + 1);
    tide_dtype dtype = o.dtype >= 0 ? (tide_dtype)o.dtype : TIDE_INT64;
    lt_box *b = lt_newbox(L);
    return lt_fill_created(L, b, tide_randint_on(o.device, low, high, nd, shape, dtype), &o);
}

/* randperm(n): a permutation of 1..n (1-based, as positions are in Lua). */
static int f_randperm(lua_State *L)
{
    int64_t n = lt_checkint(L, 1, "randperm", "n");
    lt_options o;
    lt_checkoptions(L, 2, "randperm", &o);
    lua_settop(L, 2);
    tide_dtype dtype = o.dtype >= 0 ? (tide_dtype)o.dtype : TIDE_INT64;
    lt_box *b = lt_newbox(L);
    tide_tensor *p = tide_randperm_on(o.device, n, dtype);
    tide_tensor *one = p ? tide_integer(1) : NULL;
    tide_tensor *r = one ? tide_add(p, one) : NULL;
    tide_release(one);
    tide_release(p);
    return lt_fill_created(L, b, r, &o);
}

static int f_bernoulli(lua_State *L)
{
    tide_tensor *p = lt_check(L, 1, "bernoulli");
    lua_settop(L, 1);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_bernoulli(p), false);
}

static int t_uniform_(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "uniform_");
    double lo = lua_isnoneornil(L, 2) ? 0.0 : check_number(L, 2, "uniform_", "from");
    double hi = lua_isnoneornil(L, 3) ? 1.0 : check_number(L, 3, "uniform_", "to");
    if (tide_uniform_(x, lo, hi) < 0)
        return lt_raise(L, NULL);
    lua_settop(L, 1);
    return 1;
}

static int t_normal_(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "normal_");
    double mean = lua_isnoneornil(L, 2) ? 0.0 : check_number(L, 2, "normal_", "mean");
    double std = lua_isnoneornil(L, 3) ? 1.0 : check_number(L, 3, "normal_", "std");
    if (tide_normal_(x, mean, std) < 0)
        return lt_raise(L, NULL);
    lua_settop(L, 1);
    return 1;
}

static const lt_reg create_regs[] = {
    {"tensor", f_tensor, LT_FUNCTION},
    {"full", f_full, LT_FUNCTION},
    {"full_like", f_full_like, LT_FUNCTION},
    {"arange", f_arange, LT_FUNCTION},
    {"linspace", f_linspace, LT_FUNCTION},
    {"logspace", f_logspace, LT_FUNCTION},
    {"eye", f_eye, LT_FUNCTION},
    {"manual_seed", f_manual_seed, LT_FUNCTION},
    {"get_rng_state", f_get_rng_state, LT_FUNCTION},
    {"set_rng_state", f_set_rng_state, LT_FUNCTION},
    {"randint", f_randint, LT_FUNCTION},
    {"randperm", f_randperm, LT_FUNCTION},
    {"bernoulli", f_bernoulli, LT_BOTH},
    {"uniform_", t_uniform_, LT_METHOD},
    {"normal_", t_normal_, LT_METHOD},
    {NULL, NULL, 0},
};

void lt_open_create(lua_State *L, int mt, int methods, int module)
{
    lt_setfuncs(L, create_regs, mt, methods, module);
    char name[40];
    for (size_t i = 0; i < sizeof shape_makers / sizeof shape_makers[0]; i++) {
        lua_pushvalue(L, mt);
        lua_pushinteger(L, (lua_Integer)i);
        lt_setclosure(L, shape_makers[i].name, f_shaped, 2, LT_FUNCTION, methods, module);
        snprintf(name, sizeof name, "%s_like", shape_makers[i].name);
        lua_pushvalue(L, mt);
        lua_pushinteger(L, (lua_Integer)i);
        lt_setclosure(L, name, f_shaped_like, 2, LT_FUNCTION, methods, module);
    }
}
