/*
 * ltide.h — what the files of the Lua binding share: the tensor userdata, argument checks that
 * turn Lua's 1-based dims and positions into the C API's 0-based ones, and the rule that keeps a
 * Lua error from leaking a tensor.
 *
 * The leak rule: a binding first checks every Lua argument (which may raise), then pushes the
 * userdata box that will own the result (which may raise on memory), and only then calls the C
 * API. Between a C call that returns a new reference and the moment that reference is stored in
 * a box or released, nothing may raise a Lua error.
 *
 * Every function registered through lt_setfuncs has the tensor metatable as upvalue 1, so
 * recognizing a tensor is one pointer comparison instead of a registry lookup.
 */
#ifndef LTIDE_H
#define LTIDE_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#include <lauxlib.h>
#include <lua.h>

#include "tide.h"
#include "tide_internal.h" /* the trace-session hooks tide.jit needs */

#define LT_METATABLE "tide.tensor" /* registry key of the tensor metatable */
#define LT_METHODS "tide.methods"  /* registry key of the method table */
#define LT_MT lua_upvalueindex(1)

/* The userdata: one owned reference, NULL once closed (or before the C call filled it). */
typedef struct lt_box {
    tide_tensor *t;
} lt_box;

/* Where a binding is registered. */
enum { LT_METHOD = 1, LT_FUNCTION = 2, LT_BOTH = 3 };

typedef struct lt_reg {
    const char *name;
    lua_CFunction fn;
    int where;
} lt_reg;

/* Registers regs as closures over the metatable into the method table and/or the module table
 * (the stack holds ... metatable methods module, at the given absolute indices). */
void lt_setfuncs(lua_State *L, const lt_reg *regs, int mt, int methods, int module);
/* Registers one closure over the nup values on top of the stack (the metatable first, then any
 * extra upvalues such as an index into an op table), popping them. */
void lt_setclosure(lua_State *L, const char *name, lua_CFunction fn, int nup, int where,
                   int methods, int module);

/* ---- tensors on the stack ------------------------------------------------------------------ */
/* The tensor at arg, or NULL when arg is not a tensor. Raises when it is a closed tensor. */
tide_tensor *lt_totensor(lua_State *L, int arg);
/* The tensor at arg, or a Lua error naming op. */
tide_tensor *lt_check(lua_State *L, int arg, const char *op);
/* NULL for none/nil, else as lt_check. */
tide_tensor *lt_optcheck(lua_State *L, int arg, const char *op);
/* Pushes an empty box carrying the tensor metatable. */
lt_box *lt_newbox(lua_State *L);
/* Stores t (a new reference from the C API) in box, which must be on top of the stack, and
 * returns 1; when t is NULL raises tide_last_error(). view: t shares an input's memory, so it
 * adds nothing to the collector's count. */
int lt_fill(lua_State *L, lt_box *box, tide_tensor *t, bool view);
/* Tells Lua's collector about nbytes of tensor memory it cannot see. */
void lt_account(lua_State *L, size_t nbytes);
/* Raises tide_last_error() (or fallback when empty). */
int lt_raise(lua_State *L, const char *fallback);
/* Raises when a bool-returning C call has left an error ("not implemented yet"). */
void lt_check_c_error(lua_State *L);

/* Writes r (a new reference from an out-of-place op, may be NULL) into x, the tensor at stack
 * slot self, as PyTorch's in-place ops do: same shape, no float-to-integer or to-bool cast.
 * Releases r, leaves x on top and returns 1, or raises. */
int lt_write_back(lua_State *L, int self, tide_tensor *x, tide_tensor *r, const char *op);

/* A tensor or a Lua number/boolean as an op operand. */
typedef struct lt_operand {
    tide_tensor *t;
    bool owned; /* made here from a number: release after the op */
} lt_operand;
/* Checks that arg is a tensor, a number or a boolean (raises otherwise). */
void lt_check_operand(lua_State *L, int arg, const char *op);
/* Makes the operand after every check has passed: never raises; t is NULL on failure. */
lt_operand lt_make_operand(lua_State *L, int arg);
void lt_free_operand(lt_operand *o);

/* Intermediate results of a binding made of several C calls: lt_keep returns t and remembers it;
 * lt_drop releases them all (call it before raising). */
#define LT_MAX_TEMPS 24
typedef struct lt_temps {
    tide_tensor *t[LT_MAX_TEMPS];
    int n;
} lt_temps;
static inline tide_tensor *lt_keep(lt_temps *k, tide_tensor *t)
{
    if (t && k->n < LT_MAX_TEMPS)
        k->t[k->n++] = t;
    return t;
}
static inline void lt_drop(lt_temps *k)
{
    while (k->n > 0)
        tide_release(k->t[--k->n]);
}

/* ---- numbers, dims, positions, sizes -------------------------------------------------------- */
/* An integer argument (floats with an integral value are accepted), or an error naming op. */
int64_t lt_checkint(lua_State *L, int arg, const char *op, const char *what);
/* A 1-based (or negative) dim of a tensor with ndim dims, as a 0-based dim. extra widens the
 * range (unsqueeze: ndim + 1 places). */
int lt_checkdim(lua_State *L, int arg, int ndim, int extra, const char *op);
/* The same for a value already read. */
int lt_dim_value(lua_State *L, int64_t d, int ndim, int extra, const char *op);
/* A 1-based (or negative) position along a dim of the given size, as a 0-based position. */
int64_t lt_position(lua_State *L, int64_t pos, int64_t size, const char *op, int dim0);
/* Dims given as one number or a table of numbers (nil: none) into out; returns how many. */
int lt_checkdims(lua_State *L, int arg, int ndim, const char *op, int out[TIDE_MAX_DIMS]);
/* Sizes given as integers from first to last, or one table at first; returns ndim.
 * allow_neg: -1 is accepted (view, reshape, expand). */
int lt_checksizes(lua_State *L, int first, int last, const char *op, bool allow_neg,
                  int64_t out[TIDE_MAX_DIMS]);
/* Pushes a table {a, b, ...} of n integers. */
void lt_pushints(lua_State *L, const int64_t *v, int n);
/* Writes "{2, 3}" into buf. */
const char *lt_shape_str(char *buf, size_t size, const tide_tensor *t);
/* A dtype name (or nil/none: fallback); raises for unknown names. */
tide_dtype lt_checkdtype(lua_State *L, int arg, const char *op, tide_dtype fallback);

/* The creation options table {dtype=, device=, requires_grad=} at arg (absent: none). */
typedef struct lt_options {
    int dtype; /* -1 when not given */
    bool requires_grad;
    const char *device; /* the device's name (in device_name); NULL when not given */
    char device_name[64];
} lt_options;
void lt_checkoptions(lua_State *L, int arg, const char *op, lt_options *o);
/* The device called name, checked (tide_device_check); a Lua error naming op when there is
 * none. Copies the name into buf (n bytes) and returns buf. */
const char *lt_checkdevice(lua_State *L, const char *op, const char *name, char *buf, size_t n);
/* Whether name is a dtype name or alias (as lt_checkdtype takes). */
bool lt_isdtype(const char *name);
/* A new tensor in box honouring requires_grad; raises on failure (the box owns t either way). */
int lt_fill_created(lua_State *L, lt_box *box, tide_tensor *t, const lt_options *o);
/* Reads an optional field of an options table: pushes it (or nil) and returns its type. */
int lt_getoption(lua_State *L, int arg, const char *key);
/* Raises for a key of the options table at arg that is not in allowed (NULL-terminated). */
void lt_checkkeys(lua_State *L, int arg, const char *op, const char *const *allowed);

/* Index values given 1-based from Lua as the C API's 0-based ones: idx - 1, after checking every
 * value is in 1..limit (limit < 0: no upper bound). A new reference, or NULL with a message in
 * err (or, when err is empty, in tide_last_error()). Never raises. */
tide_tensor *lt_zero_based(tide_tensor *idx, int64_t limit, const char *op, const char *what,
                           char *err, size_t errsize);

/* ---- the parts of the module ----------------------------------------------------------------- */
void lt_open_tensor(lua_State *L, int mt, int methods, int module);
void lt_open_create(lua_State *L, int mt, int methods, int module);
void lt_open_ops(lua_State *L, int mt, int methods, int module);
void lt_open_math(lua_State *L, int mt, int methods, int module); /* issue 24's math */
void lt_open_stats(lua_State *L, int mt, int methods, int module); /* ltide_stats.c */
void lt_open_shape(lua_State *L, int mt, int methods, int module);
void lt_open_index(lua_State *L, int mt, int methods, int module);
void lt_open_linalg(lua_State *L, int mt, int methods, int module);    /* ltide_linalg.c */
void lt_open_shape_ops(lua_State *L, int mt, int methods, int module); /* ltide_shape_ops.c */
void lt_open_device(lua_State *L, int mt, int methods, int module); /* ltide_device.c */
void lt_open_nn(lua_State *L, int mt, int methods, int module);
void lt_open_resize(lua_State *L, int mt, int methods, int module); /* ltide_resize.c */
void lt_open_conv_nd(lua_State *L, int mt, int methods, int module); /* ltide_conv_nd.c */
void lt_open_quant(lua_State *L, int mt, int methods, int module); /* ltide_quant.c */
void lt_open_dist(lua_State *L, int mt, int methods, int module);  /* ltide_dist.c */
void lt_open_autograd(lua_State *L, int mt, int methods, int module);
void lt_open_print(lua_State *L, int mt, int methods, int module);
void lt_open_dtype(lua_State *L, int mt, int methods, int module);
/* tide.jit(fn [, opts]) and tide.jit_stats() (ltide_jit.c) */
void lt_open_jit(lua_State *L, int mt, int methods, int module);
/* tide.save/load, npy, idx, isatty; the embedded Lua modules (tide.nn ...) in package.preload */
void lt_open_io(lua_State *L, int mt, int methods, int module);
void lt_open_onnx(lua_State *L, int mt, int methods, int module);
/* tide.export, tide.load_graph (ltide_export.c) */
void lt_open_export(lua_State *L, int mt, int methods, int module);
/* The device option of a load's options table at arg, {device = "cpu"} (NULL: none given). */
const char *lt_device_option(lua_State *L, int arg, const char *who);
/* tide.profile(fn [, opts]) (ltide_profile.c) */
void lt_open_profile(lua_State *L, int mt, int methods, int module);

/* Pushes tostring(t) in PyTorch's layout. */
void lt_pushtensorstring(lua_State *L, tide_tensor *t);
/* __index / __newindex helpers living in ltide_index.c. */
int lt_index_get(lua_State *L);
int lt_index_set(lua_State *L);
/* Attribute reads and writes (x.shape, x.grad = nil...) living in ltide_tensor.c. */
int lt_attr_get(lua_State *L);
int lt_attr_set(lua_State *L);

/* The module's entry point (also used by the tide program's package.preload). */
#if defined(__GNUC__)
__attribute__((visibility("default")))
#endif
int luaopen_tide(lua_State *L);

#endif
