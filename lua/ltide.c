/*
 * ltide.c — the `tide` Lua module's entry point and the argument helpers every binding file
 * uses: tensor boxes, operands, 1-based dims and positions, sizes, dtypes and creation options.
 */
#include <limits.h>
#include <math.h>
#include <string.h>

#include "ltide.h"

/* ---- registration ---------------------------------------------------------------------------- */

void lt_setclosure(lua_State *L, const char *name, lua_CFunction fn, int nup, int where,
                   int methods, int module)
{
    lua_pushcclosure(L, fn, nup);
    if (where & LT_METHOD) {
        lua_pushvalue(L, -1);
        lua_setfield(L, methods, name);
    }
    if (where & LT_FUNCTION) {
        lua_pushvalue(L, -1);
        lua_setfield(L, module, name);
    }
    lua_pop(L, 1);
}

void lt_setfuncs(lua_State *L, const lt_reg *regs, int mt, int methods, int module)
{
    for (const lt_reg *r = regs; r->name; r++) {
        lua_pushvalue(L, mt);
        lt_setclosure(L, r->name, r->fn, 1, r->where, methods, module);
    }
}

/* ---- tensors on the stack -------------------------------------------------------------------- */

tide_tensor *lt_totensor(lua_State *L, int arg)
{
    lt_box *b = lua_touserdata(L, arg);
    if (!b || !lua_getmetatable(L, arg))
        return NULL;
    int ours = lua_rawequal(L, -1, LT_MT);
    lua_pop(L, 1);
    if (!ours)
        return NULL;
    if (!b->t)
        luaL_error(L, "tensor has been closed (its memory was released)");
    return b->t;
}

tide_tensor *lt_check(lua_State *L, int arg, const char *op)
{
    tide_tensor *t = lt_totensor(L, arg);
    if (!t)
        luaL_error(L, "%s: argument %d must be a tensor, got %s", op, arg, luaL_typename(L, arg));
    return t;
}

tide_tensor *lt_optcheck(lua_State *L, int arg, const char *op)
{
    return lua_isnoneornil(L, arg) ? NULL : lt_check(L, arg, op);
}

lt_box *lt_newbox(lua_State *L)
{
    lt_box *b = lua_newuserdatauv(L, sizeof *b, 0);
    b->t = NULL;
    lua_pushvalue(L, LT_MT);
    lua_setmetatable(L, -2);
    return b;
}

/* A tensor's struct and storage cost roughly this much beyond its elements. */
#define LT_TENSOR_OVERHEAD 256
/* Lua sees only the small userdata of a tensor, so its collector cannot tell when tensor memory
 * piles up: short-lived temporaries die in its minor collections, but those that lived through
 * two (and, in incremental mode, everything) wait for a cycle paced by Lua's own small heap.
 * So every LT_CHECK_BATCH bytes of tensors made, the binding looks at the tensor memory in use
 * and, once it reaches twice what was live after the last full collection (and at least
 * LT_MIN_COLLECT), runs a full collection: tensor memory stays within about twice its live
 * size, and a loop of small temporaries never pays for a full collection. */
#define LT_CHECK_BATCH ((size_t)1 << 20)
#define LT_MIN_COLLECT ((size_t)64 << 20)
static _Thread_local size_t lt_made;       /* tensor bytes made since the last look */
static _Thread_local size_t lt_live_after; /* tensor bytes in use after the last full collection */

void lt_account(lua_State *L, size_t nbytes)
{
    lt_made += nbytes;
    if (lt_made < LT_CHECK_BATCH)
        return;
    lt_made = 0;
    size_t in_use = 0, cached = 0;
    tide_memory_stats(&in_use, &cached);
    size_t limit = 2 * lt_live_after > LT_MIN_COLLECT ? 2 * lt_live_after : LT_MIN_COLLECT;
    if (in_use < limit || !lua_gc(L, LUA_GCISRUNNING)) /* respect a stopped collector */
        return;
    lua_gc(L, LUA_GCCOLLECT);
    tide_memory_stats(&lt_live_after, &cached);
}

int lt_fill(lua_State *L, lt_box *box, tide_tensor *t, bool view)
{
    if (!t)
        return lt_raise(L, NULL);
    box->t = t;
    size_t bytes = LT_TENSOR_OVERHEAD;
    if (!view)
        bytes += (size_t)tide_numel(t) * tide_dtype_size(tide_get_dtype(t));
    lt_account(L, bytes);
    return 1;
}

int lt_raise(lua_State *L, const char *fallback)
{
    const char *m = tide_last_error();
    if (!m || !*m)
        m = fallback ? fallback : "tide: operation failed";
    return luaL_error(L, "%s", m);
}

void lt_check_c_error(lua_State *L)
{
    const char *m = tide_last_error();
    if (m && *m)
        luaL_error(L, "%s", m);
}

/* ---- in place: an out-of-place result written back into self --------------------------------- */

static int dtype_category(tide_dtype d)
{
    if (d == TIDE_BOOL)
        return 0;
    return tide_dtype_is_floating(d) ? 2 : 1;
}

/* Writes r (a new reference, may be NULL) into x, the tensor at self, as PyTorch's in-place ops:
 * the result must keep x's shape and must not need a float-to-integer (or to bool) cast. */
int lt_write_back(lua_State *L, int self, tide_tensor *x, tide_tensor *r, const char *op)
{
    if (!r)
        return lt_raise(L, NULL);
    char msg[512] = "";
    int nd = tide_ndim(x);
    if (tide_ndim(r) != nd || memcmp(tide_shape(r), tide_shape(x), sizeof(int64_t) * nd) != 0) {
        char a[200], b[200];
        snprintf(msg, sizeof msg, "%s: the result's shape %s does not match the shape %s of the "
                 "tensor written in place", op, lt_shape_str(a, sizeof a, r),
                 lt_shape_str(b, sizeof b, x));
    } else if (dtype_category(tide_get_dtype(r)) > dtype_category(tide_get_dtype(x))) {
        snprintf(msg, sizeof msg, "%s: the result's dtype %s cannot be written in place into a "
                 "%s tensor", op, tide_dtype_name(tide_get_dtype(r)),
                 tide_dtype_name(tide_get_dtype(x)));
    }
    if (msg[0]) {
        tide_release(r);
        return luaL_error(L, "%s", msg);
    }
    const char *outer = tide_begin_op(op); /* grad_fn=<mul>, not the copy writing it back */
    int rc = tide_copy_(x, r);
    tide_end_op(outer);
    tide_release(r);
    if (rc < 0)
        return lt_raise(L, NULL);
    lua_settop(L, self);
    return 1;
}

/* ---- operands -------------------------------------------------------------------------------- */

void lt_check_operand(lua_State *L, int arg, const char *op)
{
    int type = lua_type(L, arg);
    if (type == LUA_TNUMBER || type == LUA_TBOOLEAN || lt_totensor(L, arg))
        return;
    luaL_error(L, "%s: argument %d must be a tensor or a number, got %s", op, arg,
               luaL_typename(L, arg));
}

lt_operand lt_make_operand(lua_State *L, int arg)
{
    lt_operand o = {NULL, false};
    switch (lua_type(L, arg)) {
    case LUA_TNUMBER:
        o.owned = true;
        if (lua_isinteger(L, arg))
            o.t = tide_integer(lua_tointeger(L, arg));
        else
            o.t = tide_number(lua_tonumber(L, arg));
        break;
    case LUA_TBOOLEAN:
        o.owned = true;
        o.t = tide_scalar(lua_toboolean(L, arg) ? 1.0 : 0.0, TIDE_BOOL);
        break;
    default:
        o.t = ((lt_box *)lua_touserdata(L, arg))->t;
        break;
    }
    return o;
}

void lt_free_operand(lt_operand *o)
{
    if (o->owned)
        tide_release(o->t);
    o->t = NULL;
    o->owned = false;
}

/* ---- numbers, dims, positions, sizes -------------------------------------------------------- */

int64_t lt_checkint(lua_State *L, int arg, const char *op, const char *what)
{
    int ok = 0;
    lua_Integer v = lua_tointegerx(L, arg, &ok);
    if (!ok) {
        if (lua_type(L, arg) == LUA_TNUMBER)
            luaL_error(L, "%s: %s must be an integer, got %s", op, what,
                       lua_tostring(L, arg));
        else
            luaL_error(L, "%s: %s must be an integer, got %s", op, what, luaL_typename(L, arg));
    }
    return (int64_t)v;
}

int lt_dim_value(lua_State *L, int64_t d, int ndim, int extra, const char *op)
{
    int n = ndim + extra;
    if (n == 0)
        n = 1; /* a 0-dim tensor accepts dim 1 / -1, as PyTorch's dim 0 / -1 */
    if (d >= 1 && d <= n)
        return (int)(d - 1);
    if (d <= -1 && d >= -n)
        return (int)(d + n);
    luaL_error(L, "%s: dim %I is out of range for a tensor with %d dims (1..%d, or -%d..-1 "
               "from the end)", op, (lua_Integer)d, ndim, n, n);
    return -1;
}

int lt_checkdim(lua_State *L, int arg, int ndim, int extra, const char *op)
{
    return lt_dim_value(L, lt_checkint(L, arg, op, "dim"), ndim, extra, op);
}

int64_t lt_position(lua_State *L, int64_t pos, int64_t size, const char *op, int dim0)
{
    if (pos >= 1 && pos <= size)
        return pos - 1;
    if (pos <= -1 && pos >= -size)
        return size + pos;
    if (size == 0)
        luaL_error(L, "%s: index %I is out of range for dim %d, which is empty", op,
                   (lua_Integer)pos, dim0 + 1);
    luaL_error(L, "%s: index %I is out of range for dim %d of size %I (1..%I, or -%I..-1 "
               "from the end)", op, (lua_Integer)pos, dim0 + 1, (lua_Integer)size,
               (lua_Integer)size, (lua_Integer)size);
    return -1;
}

int lt_checkdims(lua_State *L, int arg, int ndim, const char *op, int out[TIDE_MAX_DIMS])
{
    if (lua_isnoneornil(L, arg))
        return 0;
    if (lua_type(L, arg) != LUA_TTABLE)
        return out[0] = lt_checkdim(L, arg, ndim, 0, op), 1;
    lua_Unsigned n = lua_rawlen(L, arg);
    if (n > TIDE_MAX_DIMS)
        luaL_error(L, "%s: %d dims listed; a tensor has at most %d", op, (int)n, TIDE_MAX_DIMS);
    for (int i = 0; i < (int)n; i++) {
        lua_rawgeti(L, arg, i + 1);
        out[i] = lt_checkdim(L, -1, ndim, 0, op);
        lua_pop(L, 1);
    }
    return (int)n;
}

static int64_t size_value(lua_State *L, int idx, const char *op, bool allow_neg, int pos)
{
    int ok = 0;
    lua_Integer v = lua_tointegerx(L, idx, &ok);
    if (!ok)
        luaL_error(L, "%s: size %d must be an integer, got %s", op, pos,
                   lua_type(L, idx) == LUA_TNUMBER ? lua_tostring(L, idx) : luaL_typename(L, idx));
    if (v < (allow_neg ? -1 : 0))
        luaL_error(L, "%s: size %d is %I; sizes must be >= %d", op, pos, v, allow_neg ? -1 : 0);
    return (int64_t)v;
}

static int checked_sizes(lua_State *L, int first, int last, const char *op, bool allow_neg,
                         int64_t out[TIDE_MAX_DIMS]);

/* Sizes whose product overflows can never make a tensor; said here, before the C library's
 * arithmetic on them (even with a 0 among them, which would make the tensor empty). */
int lt_checksizes(lua_State *L, int first, int last, const char *op, bool allow_neg,
                  int64_t out[TIDE_MAX_DIMS])
{
    int n = checked_sizes(L, first, last, op, allow_neg, out);
    int64_t p = 1;
    for (int i = 0; i < n; i++)
        if (out[i] > 0 && __builtin_mul_overflow(p, out[i], &p))
            luaL_error(L, "%s: the sizes are too large (they multiply to more than 2^63 "
                       "elements)", op);
    return n;
}

static int checked_sizes(lua_State *L, int first, int last, const char *op, bool allow_neg,
                         int64_t out[TIDE_MAX_DIMS])
{
    if (lua_type(L, first) == LUA_TTABLE && !lt_totensor(L, first)) {
        lua_Unsigned n = lua_rawlen(L, first);
        if (n > TIDE_MAX_DIMS)
            luaL_error(L, "%s: %d sizes given; a tensor has at most %d dims", op, (int)n,
                       TIDE_MAX_DIMS);
        for (int i = 0; i < (int)n; i++) {
            lua_rawgeti(L, first, i + 1);
            out[i] = size_value(L, -1, op, allow_neg, i + 1);
            lua_pop(L, 1);
        }
        return (int)n;
    }
    int n = last - first + 1;
    if (n < 0)
        n = 0;
    if (n > TIDE_MAX_DIMS)
        luaL_error(L, "%s: %d sizes given; a tensor has at most %d dims", op, n, TIDE_MAX_DIMS);
    for (int i = 0; i < n; i++)
        out[i] = size_value(L, first + i, op, allow_neg, i + 1);
    return n;
}

void lt_pushints(lua_State *L, const int64_t *v, int n)
{
    lua_createtable(L, n, 0);
    for (int i = 0; i < n; i++) {
        lua_pushinteger(L, (lua_Integer)v[i]);
        lua_rawseti(L, -2, i + 1);
    }
}

const char *lt_shape_str(char *buf, size_t size, const tide_tensor *t)
{
    size_t len = (size_t)snprintf(buf, size, "{");
    int nd = tide_ndim(t);
    const int64_t *shape = tide_shape(t);
    for (int i = 0; i < nd && len < size; i++)
        len += (size_t)snprintf(buf + len, size - len, i ? ", %lld" : "%lld", (long long)shape[i]);
    if (len < size)
        snprintf(buf + len, size - len, "}");
    return buf;
}

tide_dtype lt_checkdtype(lua_State *L, int arg, const char *op, tide_dtype fallback)
{
    if (lua_isnoneornil(L, arg))
        return fallback;
    if (lua_type(L, arg) != LUA_TSTRING)
        luaL_error(L, "%s: dtype must be a string such as \"float32\", got %s", op,
                   luaL_typename(L, arg));
    const char *name = lua_tostring(L, arg);
    int d = tide_dtype_from_name(name);
    if (d >= 0) /* names and PyTorch's aliases (float, double, half, int, long, byte) */
        return (tide_dtype)d;
    luaL_error(L, "%s: unknown dtype \"%s\" (float32, float64, float16, bfloat16, int32, int64, "
               "uint8, bool)", op, name);
    return fallback;
}

bool lt_isdtype(const char *name)
{
    return tide_dtype_from_name(name) >= 0;
}

const char *lt_checkdevice(lua_State *L, const char *op, const char *name, char *buf, size_t n)
{
    char why[512];
    if (tide_device_check(name, why, sizeof why) < 0)
        luaL_error(L, "%s: device \"%s\" is not available: %s", op, name, why);
    if (strlen(name) >= n)
        luaL_error(L, "%s: device name \"%s\" is too long", op, name);
    memcpy(buf, name, strlen(name) + 1);
    return buf;
}

/* ---- options tables ------------------------------------------------------------------------- */

int lt_getoption(lua_State *L, int arg, const char *key)
{
    if (lua_type(L, arg) != LUA_TTABLE) {
        lua_pushnil(L);
        return LUA_TNIL;
    }
    return lua_getfield(L, arg, key);
}

void lt_checkkeys(lua_State *L, int arg, const char *op, const char *const *allowed)
{
    arg = lua_absindex(L, arg);
    lua_pushnil(L);
    while (lua_next(L, arg)) {
        lua_pop(L, 1);
        bool ok = false;
        if (lua_type(L, -1) == LUA_TSTRING)
            for (const char *const *a = allowed; *a && !ok; a++)
                ok = strcmp(lua_tostring(L, -1), *a) == 0;
        if (!ok) {
            lua_pushvalue(L, -1); /* tostring on a copy keeps lua_next's key intact */
            luaL_error(L, "%s: unknown option '%s'", op, luaL_tolstring(L, -1, NULL));
        }
    }
}

static const char *const creation_keys[] = {"dtype", "device", "requires_grad", NULL};

void lt_checkoptions(lua_State *L, int arg, const char *op, lt_options *o)
{
    o->dtype = -1;
    o->requires_grad = false;
    o->device = NULL;
    if (lua_isnoneornil(L, arg))
        return;
    if (lua_type(L, arg) != LUA_TTABLE || lt_totensor(L, arg))
        luaL_error(L, "%s: argument %d must be an options table {dtype=, device=, "
                   "requires_grad=}, got %s", op, arg, luaL_typename(L, arg));
    lt_checkkeys(L, arg, op, creation_keys);
    lua_getfield(L, arg, "dtype");
    if (!lua_isnil(L, -1))
        o->dtype = (int)lt_checkdtype(L, -1, op, TIDE_FLOAT32);
    lua_pop(L, 1);
    if (lua_getfield(L, arg, "device") != LUA_TNIL) {
        /* the op checks the name when it makes the tensor (an unknown one names op and it) */
        const char *dev = lua_tostring(L, -1);
        if (!dev || lua_type(L, -1) != LUA_TSTRING)
            luaL_error(L, "%s: device must be a string such as \"cpu\"", op);
        o->device = lt_checkdevice(L, op, dev, o->device_name, sizeof o->device_name);
    }
    lua_pop(L, 1);
    int type = lua_getfield(L, arg, "requires_grad");
    if (type != LUA_TNIL && type != LUA_TBOOLEAN)
        luaL_error(L, "%s: requires_grad must be a boolean, got %s", op, luaL_typename(L, -1));
    o->requires_grad = lua_toboolean(L, -1);
    lua_pop(L, 1);
}

int lt_fill_created(lua_State *L, lt_box *box, tide_tensor *t, const lt_options *o)
{
    lt_fill(L, box, t, false);
    if (o->requires_grad && tide_requires_grad_(box->t, true) < 0)
        return lt_raise(L, NULL);
    return 1;
}

/* ---- the module ------------------------------------------------------------------------------ */

static void set_dtype_names(lua_State *L, int module)
{
    static const struct {
        const char *field;
        const char *name;
    } names[] = {
        {"float32", "float32"}, {"float64", "float64"}, {"int32", "int32"}, {"int64", "int64"},
        {"uint8", "uint8"},     {"bool", "bool"},       {"float", "float32"}, {"double", "float64"},
        {"int", "int32"},       {"long", "int64"},      {"byte", "uint8"},
        {"float16", "float16"}, {"half", "float16"},    {"bfloat16", "bfloat16"},
    };
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        lua_pushstring(L, names[i].name);
        lua_setfield(L, module, names[i].field);
    }
}

int luaopen_tide(lua_State *L)
{
    luaL_checkversion(L);
    luaL_newmetatable(L, LT_METATABLE);
    int mt = lua_gettop(L);
    lua_newtable(L);
    int methods = lua_gettop(L);
    lua_newtable(L);
    int module = lua_gettop(L);

    lt_open_tensor(L, mt, methods, module);
    lt_open_create(L, mt, methods, module);
    lt_open_ops(L, mt, methods, module);
    lt_open_math(L, mt, methods, module);
    lt_open_stats(L, mt, methods, module);
    lt_open_shape(L, mt, methods, module);
    lt_open_index(L, mt, methods, module);
    lt_open_linalg(L, mt, methods, module);
    lt_open_shape_ops(L, mt, methods, module);
    lt_open_device(L, mt, methods, module);
    lt_open_nn(L, mt, methods, module);
    lt_open_resize(L, mt, methods, module);
    lt_open_conv_nd(L, mt, methods, module);
    lt_open_quant(L, mt, methods, module);
    lt_open_dist(L, mt, methods, module);
    lt_open_autograd(L, mt, methods, module);
    lt_open_print(L, mt, methods, module);
    lt_open_jit(L, mt, methods, module);
    lt_open_io(L, mt, methods, module);
    lt_open_onnx(L, mt, methods, module);
    lt_open_export(L, mt, methods, module);
    lt_open_dtype(L, mt, methods, module);
    lt_open_profile(L, mt, methods, module); /* ltide_profile.c */

    set_dtype_names(L, module);
    lua_pushstring(L, TIDE_VERSION_STRING);
    lua_setfield(L, module, "version");
    lua_pushstring(L, "tensor");
    lua_setfield(L, mt, "__name");
    lua_pushvalue(L, methods);
    lua_setfield(L, LUA_REGISTRYINDEX, LT_METHODS);
    /* tide.Tensor: the method table, for adding methods from Lua as torch.Tensor allows. */
    lua_pushvalue(L, methods);
    lua_setfield(L, module, "Tensor");
    lua_pushvalue(L, module);
    return 1;
}
