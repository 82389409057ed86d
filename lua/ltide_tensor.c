/*
 * ltide_tensor.c — the tensor userdata itself: its lifetime (__gc, __close), its attributes
 * (x.shape, x.dtype, x.grad ...), queries (size, dim, numel, stride), reading values back into
 * Lua (item, totable) and dtype conversions.
 */
#include <string.h>

#include "ltide.h"

static int t_gc(lua_State *L)
{
    lt_box *b = lua_touserdata(L, 1);
    if (b && b->t) {
        tide_release(b->t);
        b->t = NULL;
    }
    return 0;
}

static int t_len(lua_State *L)
{
    tide_tensor *t = lt_check(L, 1, "#");
    if (tide_ndim(t) == 0)
        return luaL_error(L, "#: a 0-dim tensor has no length");
    lua_pushinteger(L, (lua_Integer)tide_shape(t)[0]);
    return 1;
}

static int t_size(lua_State *L)
{
    tide_tensor *t = lt_check(L, 1, "size");
    int nd = tide_ndim(t);
    if (lua_isnoneornil(L, 2)) {
        lt_pushints(L, tide_shape(t), nd);
        return 1;
    }
    int d = lt_checkdim(L, 2, nd, 0, "size");
    lua_pushinteger(L, nd ? (lua_Integer)tide_shape(t)[d] : 1);
    return 1;
}

static int t_stride(lua_State *L)
{
    tide_tensor *t = lt_check(L, 1, "stride");
    int nd = tide_ndim(t);
    if (lua_isnoneornil(L, 2)) {
        lt_pushints(L, tide_strides(t), nd);
        return 1;
    }
    int d = lt_checkdim(L, 2, nd, 0, "stride");
    lua_pushinteger(L, nd ? (lua_Integer)tide_strides(t)[d] : 1);
    return 1;
}

static int t_dim(lua_State *L)
{
    lua_pushinteger(L, tide_ndim(lt_check(L, 1, "dim")));
    return 1;
}

static int t_numel(lua_State *L)
{
    lua_pushinteger(L, (lua_Integer)tide_numel(lt_check(L, 1, "numel")));
    return 1;
}

static int t_element_size(lua_State *L)
{
    tide_tensor *t = lt_check(L, 1, "element_size");
    lua_pushinteger(L, (lua_Integer)tide_dtype_size(tide_get_dtype(t)));
    return 1;
}

static int t_is_contiguous(lua_State *L)
{
    lua_pushboolean(L, tide_is_contiguous(lt_check(L, 1, "is_contiguous")));
    return 1;
}

static int t_is_floating_point(lua_State *L)
{
    lua_pushboolean(L, tide_dtype_is_floating(tide_get_dtype(lt_check(L, 1, "is_floating_point"))));
    return 1;
}

static int t_shares_storage(lua_State *L)
{
    tide_tensor *a = lt_check(L, 1, "shares_storage");
    tide_tensor *b = lt_check(L, 2, "shares_storage");
    lua_pushboolean(L, tide_shares_storage(a, b));
    return 1;
}

/* tide.is_tensor(v): true for any tide tensor, a closed one too (it is still a tensor whose
 * memory was released; using it raises "tensor has been closed"); false for anything else. */
static int t_is_tensor(lua_State *L)
{
    bool yes = lua_touserdata(L, 1) && lua_getmetatable(L, 1);
    if (yes) {
        yes = lua_rawequal(L, -1, LT_MT);
        lua_pop(L, 1);
    }
    lua_pushboolean(L, yes);
    return 1;
}

/* ---- values back to Lua ---------------------------------------------------------------------- */

static void push_element(lua_State *L, tide_dtype dtype, const void *buf, int64_t i)
{
    switch (dtype) {
    case TIDE_FLOAT32: lua_pushnumber(L, ((const float *)buf)[i]); break;
    case TIDE_FLOAT64: lua_pushnumber(L, ((const double *)buf)[i]); break;
    case TIDE_INT32: lua_pushinteger(L, ((const int32_t *)buf)[i]); break;
    case TIDE_INT64: lua_pushinteger(L, ((const int64_t *)buf)[i]); break;
    case TIDE_UINT8: lua_pushinteger(L, ((const uint8_t *)buf)[i]); break;
    case TIDE_BOOL: lua_pushboolean(L, ((const uint8_t *)buf)[i] != 0); break;
    case TIDE_FLOAT16: lua_pushnumber(L, tide_float16_to_float(((const uint16_t *)buf)[i])); break;
    case TIDE_BFLOAT16:
        lua_pushnumber(L, tide_bfloat16_to_float(((const uint16_t *)buf)[i]));
        break;
    default: lua_pushnil(L); break;
    }
}

static int t_item(lua_State *L)
{
    tide_tensor *t = lt_check(L, 1, "item");
    if (tide_numel(t) != 1) {
        char s[200];
        return luaL_error(L, "item: only a one-element tensor has an item; this one has shape %s",
                          lt_shape_str(s, sizeof s, t));
    }
    union {
        double f64;
        int64_t i64;
        unsigned char bytes[16];
    } v;
    if (tide_to_buffer(t, &v, sizeof v) < 0)
        return lt_raise(L, NULL);
    push_element(L, tide_get_dtype(t), &v, 0);
    return 1;
}

/* Builds nested tables for dims d.. of shape from buf starting at element *pos. */
static void push_table(lua_State *L, tide_dtype dtype, const void *buf, const int64_t *shape,
                       int nd, int d, int64_t *pos)
{
    luaL_checkstack(L, 3, "totable: nesting too deep");
    lua_createtable(L, shape[d] > INT32_MAX ? 0 : (int)shape[d], 0);
    for (int64_t i = 0; i < shape[d]; i++) {
        if (d == nd - 1)
            push_element(L, dtype, buf, (*pos)++);
        else
            push_table(L, dtype, buf, shape, nd, d + 1, pos);
        lua_rawseti(L, -2, (lua_Integer)i + 1);
    }
}

static int t_totable(lua_State *L)
{
    tide_tensor *t = lt_check(L, 1, "totable");
    tide_dtype dtype = tide_get_dtype(t);
    int64_t numel = tide_numel(t);
    if (numel > ((int64_t)1 << 31)) { /* an expanded view can be far larger than memory */
        char s[200];
        return luaL_error(L, "totable: a tensor of shape %s has %I elements, too many for Lua "
                          "tables", lt_shape_str(s, sizeof s, t), (lua_Integer)numel);
    }
    size_t bytes = (size_t)numel * tide_dtype_size(dtype);
    void *buf = lua_newuserdatauv(L, bytes ? bytes : 1, 0); /* freed by the collector */
    if (tide_to_buffer(t, buf, bytes ? bytes : 1) < 0)
        return lt_raise(L, NULL);
    int nd = tide_ndim(t);
    if (nd == 0) {
        push_element(L, dtype, buf, 0);
        return 1;
    }
    int64_t pos = 0;
    push_table(L, dtype, buf, tide_shape(t), nd, 0, &pos);
    return 1;
}

/* ---- conversions ----------------------------------------------------------------------------- */

static int cast_to(lua_State *L, int self, tide_dtype dtype)
{
    tide_tensor *t = lt_check(L, self, "to");
    if (tide_get_dtype(t) == dtype) {
        lua_pushvalue(L, self);
        return 1;
    }
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_cast(t, dtype), false);
}

/* x:float(), x:double() ...: upvalue 2 is the dtype. */
static int t_cast_method(lua_State *L)
{
    lt_check(L, 1, lua_tostring(L, lua_upvalueindex(3)));
    return cast_to(L, 1, (tide_dtype)lua_tointeger(L, lua_upvalueindex(2)));
}

/* A string argument of x:to that is no dtype: a device name, or a mistake either way. */
static const char *to_device_name(lua_State *L, const char *s, char *buf, size_t n)
{
    char why[512];
    if (tide_device_check(s, why, sizeof why) < 0 && strstr(why, "unknown device") == why)
        luaL_error(L, "to: \"%s\" is neither a dtype (float32, float64, int32, int64, uint8, "
                   "bool) nor a device: %s", s, why);
    return lt_checkdevice(L, "to", s, buf, n);
}

/* x:to(dtype), x:to("cpu"), x:to(other_tensor), x:to({dtype=, device=}) */
static int t_to(lua_State *L)
{
    tide_tensor *t = lt_check(L, 1, "to");
    tide_dtype dtype = tide_get_dtype(t);
    const char *device = NULL;
    char name[64];
    for (int arg = 2; arg <= lua_gettop(L); arg++) {
        tide_tensor *other;
        if (lua_type(L, arg) == LUA_TSTRING) {
            const char *s = lua_tostring(L, arg);
            if (lt_isdtype(s))
                dtype = lt_checkdtype(L, arg, "to", dtype);
            else
                device = to_device_name(L, s, name, sizeof name);
        } else if ((other = lt_totensor(L, arg))) {
            dtype = tide_get_dtype(other);
        } else if (lua_type(L, arg) == LUA_TTABLE) {
            static const char *const keys[] = {"dtype", "device", NULL};
            lt_checkkeys(L, arg, "to", keys);
            lua_getfield(L, arg, "dtype");
            dtype = lt_checkdtype(L, -1, "to", dtype);
            if (lua_getfield(L, arg, "device") == LUA_TSTRING)
                device = lt_checkdevice(L, "to", lua_tostring(L, -1), name, sizeof name);
            else if (!lua_isnil(L, -1))
                luaL_error(L, "to: device must be a string such as \"cpu\"");
            lua_pop(L, 2);
        } else if (!lua_isnil(L, arg)) {
            return luaL_error(L, "to: argument %d must be a dtype or device name, a tensor or "
                              "an options table, got %s", arg, luaL_typename(L, arg));
        }
    }
    if (device && strcmp(device, tide_device_name(t)) != 0) {
        tide_tensor *moved = tide_to(t, device);
        tide_tensor *r = moved && tide_get_dtype(moved) != dtype ? tide_cast(moved, dtype)
                                                                  : tide_retain(moved);
        tide_release(moved);
        return lt_fill(L, lt_newbox(L), r, false);
    }
    return cast_to(L, 1, dtype);
}

/* x:type() is the dtype name; x:type(dtype) converts. */
static int t_type(lua_State *L)
{
    tide_tensor *t = lt_check(L, 1, "type");
    if (lua_isnoneornil(L, 2)) {
        lua_pushstring(L, tide_dtype_name(tide_get_dtype(t)));
        return 1;
    }
    return cast_to(L, 1, lt_checkdtype(L, 2, "type", TIDE_FLOAT32));
}

/* ---- attributes (x.shape ...) ---------------------------------------------------------------- */

int lt_attr_get(lua_State *L)
{
    tide_tensor *t = lt_check(L, 1, "index");
    const char *k = lua_tostring(L, 2);
    if (strcmp(k, "shape") == 0) {
        lt_pushints(L, tide_shape(t), tide_ndim(t));
    } else if (strcmp(k, "dtype") == 0) {
        lua_pushstring(L, tide_dtype_name(tide_get_dtype(t)));
    } else if (strcmp(k, "device") == 0) {
        lua_pushstring(L, tide_device_name(t));
    } else if (strcmp(k, "ndim") == 0) {
        lua_pushinteger(L, tide_ndim(t));
    } else if (strcmp(k, "requires_grad") == 0) {
        tide_clear_error();
        bool r = tide_requires_grad(t);
        lt_check_c_error(L);
        lua_pushboolean(L, r);
    } else if (strcmp(k, "grad") == 0) {
        lt_box *b = lt_newbox(L);
        tide_clear_error();
        tide_tensor *g = tide_grad(t);
        if (!g) {
            lt_check_c_error(L);
            lua_pushnil(L);
        } else {
            lt_fill(L, b, g, true);
        }
    } else if (strcmp(k, "grad_fn") == 0 || strcmp(k, "is_leaf") == 0) {
        tide_clear_error();
        const char *name = tide_grad_fn_name(t);
        lt_check_c_error(L);
        if (k[0] == 'i')
            lua_pushboolean(L, name == NULL);
        else if (name)
            lua_pushstring(L, name);
        else
            lua_pushnil(L);
    } else if (strcmp(k, "data") == 0) {
        lt_box *b = lt_newbox(L);
        lt_fill(L, b, tide_detach(t), true);
    } else {
        lua_pushnil(L);
    }
    return 1;
}

int lt_attr_set(lua_State *L)
{
    tide_tensor *t = lt_check(L, 1, "newindex");
    const char *k = lua_tostring(L, 2);
    if (strcmp(k, "grad") == 0) {
        tide_tensor *g = NULL;
        if (!lua_isnil(L, 3) && !(g = lt_totensor(L, 3)))
            return luaL_error(L, "grad: a gradient must be a tensor or nil, got %s",
                              luaL_typename(L, 3));
        if (tide_set_grad(t, g) < 0)
            return lt_raise(L, NULL);
        return 0;
    }
    if (strcmp(k, "requires_grad") == 0) {
        if (lua_type(L, 3) != LUA_TBOOLEAN)
            return luaL_error(L, "requires_grad: must be a boolean, got %s", luaL_typename(L, 3));
        if (tide_requires_grad_(t, lua_toboolean(L, 3)) < 0)
            return lt_raise(L, NULL);
        return 0;
    }
    return luaL_error(L, "cannot set field '%s' of a tensor (settable: grad, requires_grad)", k);
}

static const lt_reg tensor_regs[] = {
    {"size", t_size, LT_BOTH},
    {"stride", t_stride, LT_METHOD},
    {"dim", t_dim, LT_METHOD},
    {"ndimension", t_dim, LT_METHOD},
    {"numel", t_numel, LT_BOTH},
    {"nelement", t_numel, LT_METHOD},
    {"element_size", t_element_size, LT_METHOD},
    {"is_contiguous", t_is_contiguous, LT_METHOD},
    {"is_floating_point", t_is_floating_point, LT_BOTH},
    {"shares_storage", t_shares_storage, LT_METHOD},
    {"is_tensor", t_is_tensor, LT_FUNCTION},
    {"item", t_item, LT_METHOD},
    {"totable", t_totable, LT_METHOD},
    {"tolist", t_totable, LT_METHOD},
    {"to", t_to, LT_METHOD},
    {"type", t_type, LT_METHOD},
    {NULL, NULL, 0},
};

void lt_open_tensor(lua_State *L, int mt, int methods, int module)
{
    lt_setfuncs(L, tensor_regs, mt, methods, module);
    static const struct {
        const char *name;
        lua_CFunction fn;
    } meta[] = {{"__gc", t_gc}, {"__close", t_gc}, {"__len", t_len}};
    for (size_t i = 0; i < sizeof meta / sizeof meta[0]; i++) {
        lua_pushvalue(L, mt);
        lua_pushcclosure(L, meta[i].fn, 1);
        lua_setfield(L, mt, meta[i].name);
    }
    static const struct {
        const char *name;
        tide_dtype dtype;
    } casts[] = {
        {"float", TIDE_FLOAT32}, {"double", TIDE_FLOAT64}, {"int", TIDE_INT32},
        {"long", TIDE_INT64},    {"byte", TIDE_UINT8},     {"bool", TIDE_BOOL},
        {"half", TIDE_FLOAT16},  {"bfloat16", TIDE_BFLOAT16},
    };
    for (size_t i = 0; i < sizeof casts / sizeof casts[0]; i++) {
        lua_pushvalue(L, mt);
        lua_pushinteger(L, casts[i].dtype);
        lua_pushstring(L, casts[i].name);
        lt_setclosure(L, casts[i].name, t_cast_method, 3, LT_METHOD, methods, module);
    }
}
