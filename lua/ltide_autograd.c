/*
 * ltide_autograd.c — autograd from Lua (x:requires_grad_(), loss:backward(), x:detach(),
 * tide.autograd.grad (through tide._autograd_grad; gradcheck is in lua/tide/autograd.lua),
 * tide.no_grad(fn), tide.set_grad_enabled(b), tide.autocast(dtype, fn); x.grad / x.requires_grad / x.grad_fn are
 * attributes in ltide_tensor.c) and the runtime: threads and memory (tide.collect()).
 */
#include <stdio.h>
#include <stdlib.h>

#include "ltide.h"

/* Backward hooks (tide.autograd.set_backward_hooks, below): this state's live in the
 * registry under HOOKS_KEY, a userdata holding the watched tensors, with user values on_ready,
 * on_done and {[tensor address] = index}. */
#define HOOKS_KEY "tide.backward_hooks"
#define HOOKS_MT "tide.backward_hooks_mt"
enum { UV_READY = 1, UV_DONE = 2, UV_INDEX = 3 };

typedef struct lt_hooks {
    lua_State *L;         /* the thread the hooks run in: the one in backward (t_backward) */
    tide_tensor **params; /* retained: a freed tensor's address could come back as another's */
    int n;
} lt_hooks;

/* The binding's hooks installed in this OS thread's engine, so a state removes only its own. */
static _Thread_local lt_hooks *installed;

static int t_requires_grad_(lua_State *L)
{
    lt_check(L, 1, "requires_grad_");
    bool on = true;
    if (!lua_isnoneornil(L, 2)) {
        if (lua_type(L, 2) != LUA_TBOOLEAN)
            return luaL_error(L, "requires_grad_: expected a boolean, got %s",
                              luaL_typename(L, 2));
        on = lua_toboolean(L, 2);
    }
    if (tide_requires_grad_(lt_check(L, 1, "requires_grad_"), on) < 0)
        return lt_raise(L, NULL);
    lua_settop(L, 1);
    return 1;
}

/* A boolean option of the table at opt (absent: dflt). */
static bool opt_bool(lua_State *L, int opt, const char *op, const char *key, bool dflt)
{
    int type = lua_getfield(L, opt, key);
    if (type != LUA_TNIL && type != LUA_TBOOLEAN)
        luaL_error(L, "%s: %s must be a boolean, got %s", op, key, luaL_typename(L, -1));
    bool v = type == LUA_TNIL ? dflt : lua_toboolean(L, -1);
    lua_pop(L, 1);
    return v;
}

/* loss:backward([grad] [, {retain_graph = b, create_graph = b}]); retain_graph defaults to
 * create_graph, as in PyTorch. */
static int t_backward(lua_State *L)
{
    tide_tensor *root = lt_check(L, 1, "backward");
    tide_tensor *grad = NULL;
    int opt = 2;
    if (lua_type(L, 2) == LUA_TUSERDATA) {
        grad = lt_check(L, 2, "backward");
        opt = 3;
    } else if (lua_isnil(L, 2) && lua_gettop(L) >= 3) {
        opt = 3;
    }
    bool retain = false, create = false;
    if (!lua_isnoneornil(L, opt)) {
        if (lua_type(L, opt) != LUA_TTABLE)
            return luaL_error(L, "backward: expected a gradient tensor and/or an options table "
                              "{retain_graph = true, create_graph = true}, got %s",
                              luaL_typename(L, opt));
        static const char *const keys[] = {"retain_graph", "create_graph", NULL};
        lt_checkkeys(L, opt, "backward", keys);
        create = opt_bool(L, opt, "backward", "create_graph", false);
        retain = opt_bool(L, opt, "backward", "retain_graph", create);
    }
    /* this state's hooks (kept on the stack, so a hook that replaces them cannot free them
     * under us) run in the thread calling backward, which may be a coroutine */
    lt_hooks *h = NULL;
    lua_State *hooks_thread = NULL;
    if (installed) {
        lua_getfield(L, LUA_REGISTRYINDEX, HOOKS_KEY);
        if ((h = lua_touserdata(L, -1)) != NULL) {
            hooks_thread = h->L;
            h->L = L;
        }
    }
    int rc = tide_backward_ex(root, grad, retain, create);
    if (h)
        h->L = hooks_thread;
    if (rc < 0)
        return lt_raise(L, NULL);
    return 0;
}

/* How many tensors arg holds: 1 for a tensor, the length of a list. */
static int list_len(lua_State *L, int arg, const char *what)
{
    if (lua_type(L, arg) == LUA_TUSERDATA)
        return 1;
    if (lua_type(L, arg) != LUA_TTABLE)
        return luaL_error(L, "grad: %s must be a tensor or a list of tensors, got %s", what,
                          luaL_typename(L, arg));
    lua_Integer n = luaL_len(L, arg);
    if (n < 1 || n > 4096)
        return luaL_error(L, "grad: %s must hold 1 to 4096 tensors, got %d", what, (int)n);
    return (int)n;
}

/* v[0..n-1] = the tensors of arg (a tensor or a list; the list keeps them alive). nil entries
 * are NULL when holes is set (grad_outputs), else an error. */
static void list_tensors(lua_State *L, int arg, const char *what, int n, bool holes,
                         tide_tensor **v)
{
    if (lua_type(L, arg) == LUA_TUSERDATA) {
        v[0] = lt_check(L, arg, "grad");
        return;
    }
    for (int i = 0; i < n; i++) {
        lua_geti(L, arg, i + 1);
        v[i] = lua_isnil(L, -1) && holes ? NULL : lt_totensor(L, -1);
        if (!v[i] && !(holes && lua_isnil(L, -1)))
            luaL_error(L, "grad: %s[%d] must be a tensor, got %s", what, i + 1,
                       luaL_typename(L, -1));
        lua_pop(L, 1);
    }
}

/* tide.autograd.grad(outputs, inputs [, {grad_outputs =, retain_graph =, create_graph =,
 * allow_unused =}]): the gradient of the outputs with respect to each input, as that many
 * values (nil for an unused input under allow_unused). No .grad is touched. */
static int f_autograd_grad(lua_State *L)
{
    int nout = list_len(L, 1, "outputs"), nin = list_len(L, 2, "inputs");
    bool create = false, retain = false, allow_unused = false;
    lua_settop(L, 3);
    if (!lua_isnil(L, 3)) {
        if (lua_type(L, 3) != LUA_TTABLE)
            return luaL_error(L, "grad: expected an options table {grad_outputs =, retain_graph "
                              "=, create_graph =, allow_unused =}, got %s", luaL_typename(L, 3));
        static const char *const keys[] = {"grad_outputs", "retain_graph", "create_graph",
                                           "allow_unused", NULL};
        lt_checkkeys(L, 3, "grad", keys);
        create = opt_bool(L, 3, "grad", "create_graph", false);
        retain = opt_bool(L, 3, "grad", "retain_graph", create);
        allow_unused = opt_bool(L, 3, "grad", "allow_unused", false);
    }
    /* slot 4: grad_outputs (nil: ones for one-element outputs) */
    if (lua_isnil(L, 3))
        lua_pushnil(L);
    else
        lua_getfield(L, 3, "grad_outputs");
    bool have_go = !lua_isnil(L, 4);
    if (have_go && lua_type(L, 4) == LUA_TTABLE && (int)luaL_len(L, 4) > nout)
        return luaL_error(L, "grad: grad_outputs holds %d tensors for %d outputs",
                          (int)luaL_len(L, 4), nout);
    if (have_go && lua_type(L, 4) == LUA_TUSERDATA && nout != 1)
        return luaL_error(L, "grad: grad_outputs must be a list of %d tensors", nout);
    /* one array: outputs, grad_outputs, inputs, results (a userdata the collector frees) */
    tide_tensor **v = lua_newuserdatauv(L, sizeof *v * (size_t)(2 * nout + 2 * nin), 0);
    tide_tensor **outs = v, **gouts = v + nout, **ins = v + 2 * nout, **grads = ins + nin;
    list_tensors(L, 1, "outputs", nout, false, outs);
    list_tensors(L, 2, "inputs", nin, false, ins);
    for (int i = 0; i < nout; i++)
        gouts[i] = NULL;
    if (have_go)
        list_tensors(L, 4, "grad_outputs", nout, true, gouts);
    if (tide_autograd_grad(outs, (const tide_tensor *const *)gouts, nout, ins, nin, retain,
                           create, allow_unused, grads) < 0)
        return lt_raise(L, NULL);
    luaL_checkstack(L, nin, "grad: too many inputs");
    for (int j = 0; j < nin; j++) {
        if (!grads[j]) {
            lua_pushnil(L);
            continue;
        }
        lt_box *b = lt_newbox(L);
        lt_fill(L, b, grads[j], false);
    }
    return nin;
}

/* ---- backward hooks: tide.autograd.set_backward_hooks (lua/tide/autograd.lua) -------------- */

static void hooks_release(lt_hooks *h)
{
    for (int i = 0; i < h->n; i++)
        tide_release(h->params[i]);
    free(h->params);
    h->params = NULL;
    h->n = 0;
    if (installed == h) {
        tide_set_backward_hooks(NULL, NULL, NULL);
        installed = NULL;
    }
}

static int hooks_gc(lua_State *L)
{
    hooks_release(lua_touserdata(L, 1));
    return 0;
}

/* Calls user value uv of h's userdata (with index when > 0) under lua_pcall: a Lua error must
 * not unwind through the engine's C frames, so it becomes the engine's error instead. */
static int hooks_call(lt_hooks *h, int uv, tide_tensor *leaf)
{
    lua_State *L = h->L;
    if (!lua_checkstack(L, 4))
        return tide_set_error("backward hook: no room on the Lua stack");
    int top = lua_gettop(L), status = LUA_OK;
    lua_getfield(L, LUA_REGISTRYINDEX, HOOKS_KEY);
    if (lua_touserdata(L, -1) == h) { /* else replaced from Lua, and no longer wanted */
        lua_getiuservalue(L, -1, uv);
        int nargs = 0;
        if (leaf) {
            lua_getiuservalue(L, -2, UV_INDEX);
            if (lua_rawgetp(L, -1, leaf) == LUA_TNIL) { /* not in the list: ignored */
                lua_settop(L, top);
                return 0;
            }
            lua_remove(L, -2);
            nargs = 1;
        }
        status = lua_pcall(L, nargs, 0, 0);
    }
    if (status != LUA_OK) {
        const char *msg = lua_tostring(L, -1);
        char buf[400];
        snprintf(buf, sizeof buf, "backward: the %s hook raised: %s",
                 uv == UV_READY ? "on_ready" : "on_done",
                 msg ? msg : "(an error object that is not a string)");
        tide_set_error(buf);
    }
    lua_settop(L, top);
    return status == LUA_OK ? 0 : -1;
}

static int hook_ready(void *ctx, tide_tensor *leaf) { return hooks_call(ctx, UV_READY, leaf); }
static int hook_done(void *ctx) { return hooks_call(ctx, UV_DONE, NULL); }

static bool callable(lua_State *L, int arg)
{
    if (lua_type(L, arg) == LUA_TFUNCTION)
        return true;
    if (luaL_getmetafield(L, arg, "__call") == LUA_TNIL)
        return false;
    lua_pop(L, 1);
    return true;
}

/* Checks set_backward_hooks' arguments: a list of tensors, then two callables or nils (one at
 * least). Returns the list's length. */
static int hooks_check(lua_State *L)
{
    if (lua_type(L, 1) != LUA_TTABLE)
        return luaL_error(L, "set_backward_hooks: expected a list of tensors (or nil to remove "
                          "the hooks), got %s", luaL_typename(L, 1));
    for (int arg = 2; arg <= 3; arg++)
        if (!lua_isnil(L, arg) && !callable(L, arg))
            return luaL_error(L, "set_backward_hooks: %s must be a function or nil, got %s",
                              arg == 2 ? "on_ready" : "on_done", luaL_typename(L, arg));
    if (lua_isnil(L, 2) && lua_isnil(L, 3))
        return luaL_error(L, "set_backward_hooks: give on_ready and/or on_done (or nil alone to "
                          "remove the hooks)");
    lua_Integer n = luaL_len(L, 1);
    if (n < 0 || n > (1 << 24))
        return luaL_error(L, "set_backward_hooks: the list holds %d entries", (int)n);
    return (int)n;
}

/* Fills h and the index table (on top) from the list at 1; raises on a bad entry (h->n counts
 * what is retained so far, so the collector releases it). */
static void hooks_fill(lua_State *L, lt_hooks *h, int n)
{
    for (int i = 1; i <= n; i++) {
        lua_geti(L, 1, i);
        tide_tensor *t = lt_totensor(L, -1);
        if (!t)
            luaL_error(L, "set_backward_hooks: params[%d] must be a tensor, got %s", i,
                       luaL_typename(L, -1));
        lua_pop(L, 1);
        if (lua_rawgetp(L, -1, t) != LUA_TNIL)
            luaL_error(L, "set_backward_hooks: params[%d] is params[%d] again", i,
                       (int)lua_tointeger(L, -1));
        lua_pop(L, 1);
        lua_pushinteger(L, i);
        lua_rawsetp(L, -2, t);
        h->params[h->n++] = tide_retain(t);
    }
}

/* set_backward_hooks(params, on_ready, on_done): on_ready(i) once params[i]'s grad is final in
 * a backward pass, on_done() after the pass; set_backward_hooks(nil) removes them. */
static int f_set_backward_hooks(lua_State *L)
{
    lua_settop(L, 3);
    lua_getfield(L, LUA_REGISTRYINDEX, HOOKS_KEY); /* 4: the hooks being replaced */
    int n = lua_isnil(L, 1) && lua_isnil(L, 2) && lua_isnil(L, 3) ? -1 : hooks_check(L);
    if (n >= 0) {
        lt_hooks *h = lua_newuserdatauv(L, sizeof *h, 3); /* 5 */
        *h = (lt_hooks){.L = L};
        if (luaL_newmetatable(L, HOOKS_MT)) {
            lua_pushcfunction(L, hooks_gc);
            lua_setfield(L, -2, "__gc");
        }
        lua_setmetatable(L, 5);
        if (n > 0 && !(h->params = malloc(sizeof *h->params * (size_t)n)))
            return luaL_error(L, "set_backward_hooks: out of memory");
        lua_pushvalue(L, 2);
        lua_setiuservalue(L, 5, UV_READY);
        lua_pushvalue(L, 3);
        lua_setiuservalue(L, 5, UV_DONE);
        lua_createtable(L, 0, n);
        hooks_fill(L, h, n);
        lua_setiuservalue(L, 5, UV_INDEX);
        tide_set_backward_hooks(lua_isnil(L, 2) ? NULL : hook_ready,
                                lua_isnil(L, 3) ? NULL : hook_done, h);
        installed = h;
    }
    if (!lua_isnil(L, 4))
        hooks_release(lua_touserdata(L, 4)); /* uninstalls it unless replaced just above */
    lua_pushvalue(L, n >= 0 ? 5 : 1);          /* the new hooks, or nil */
    lua_setfield(L, LUA_REGISTRYINDEX, HOOKS_KEY);
    return 0;
}

static int t_detach(lua_State *L)
{
    tide_tensor *x = lt_check(L, 1, "detach");
    lua_settop(L, 1);
    lt_box *b = lt_newbox(L);
    return lt_fill(L, b, tide_detach(x), true);
}

/* Runs fn(...) with grad mode set to enabled, restoring the previous mode even when fn raises;
 * returns fn's results. */
static int with_grad_mode(lua_State *L, bool enabled, const char *op)
{
    if (lua_type(L, 1) != LUA_TFUNCTION)
        return luaL_error(L, "%s: expected a function, got %s", op, luaL_typename(L, 1));
    tide_clear_error();
    bool prev = tide_set_grad_enabled(enabled);
    lt_check_c_error(L);
    int status = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
    tide_set_grad_enabled(prev);
    if (status != LUA_OK)
        return lua_error(L);
    return lua_gettop(L);
}
static int f_no_grad(lua_State *L) { return with_grad_mode(L, false, "no_grad"); }
static int f_enable_grad(lua_State *L) { return with_grad_mode(L, true, "enable_grad"); }

/* set_grad_enabled(b) returns the previous setting. */
static int f_set_grad_enabled(lua_State *L)
{
    if (lua_type(L, 1) != LUA_TBOOLEAN)
        return luaL_error(L, "set_grad_enabled: expected a boolean, got %s", luaL_typename(L, 1));
    tide_clear_error();
    bool prev = tide_set_grad_enabled(lua_toboolean(L, 1));
    lt_check_c_error(L);
    lua_pushboolean(L, prev);
    return 1;
}

static int f_is_grad_enabled(lua_State *L)
{
    tide_clear_error();
    bool on = tide_is_grad_enabled();
    lt_check_c_error(L);
    lua_pushboolean(L, on);
    return 1;
}

/* autocast(dtype, fn, ...): fn(...) with the thread's autocast dtype set ("float16",
 * "bfloat16"; "float32" or nil: off), the previous one restored even when fn raises; returns
 * fn's results. */
static int f_autocast(lua_State *L)
{
    tide_dtype dt = lt_checkdtype(L, 1, "autocast", TIDE_FLOAT32);
    if (dt != TIDE_FLOAT32 && dt != TIDE_FLOAT16 && dt != TIDE_BFLOAT16)
        return luaL_error(L, "autocast: the dtype must be \"float16\", \"bfloat16\" or "
                          "\"float32\"/nil (off), got %s", tide_dtype_name(dt));
    bool callable = lua_type(L, 2) == LUA_TFUNCTION;
    if (!callable && luaL_getmetafield(L, 2, "__call") != LUA_TNIL) { /* a tide.jit function */
        lua_pop(L, 1);
        callable = true;
    }
    if (!callable)
        return luaL_error(L, "autocast: expected a function after the dtype, got %s",
                          luaL_typename(L, 2));
    lua_remove(L, 1);
    int prev = tide_get_autocast();
    tide_set_autocast(dt == TIDE_FLOAT32 ? TIDE_AUTOCAST_OFF : (int)dt);
    int status = lua_pcall(L, lua_gettop(L) - 1, LUA_MULTRET, 0);
    tide_set_autocast(prev);
    if (status != LUA_OK)
        return lua_error(L);
    return lua_gettop(L);
}

/* get_autocast(): the thread's autocast dtype name, or nil when off. */
static int f_get_autocast(lua_State *L)
{
    int dt = tide_get_autocast();
    if (dt == TIDE_AUTOCAST_OFF)
        lua_pushnil(L);
    else
        lua_pushstring(L, tide_dtype_name((tide_dtype)dt));
    return 1;
}

/* ---- runtime ----------------------------------------------------------------------------- */

static int f_set_num_threads(lua_State *L)
{
    int64_t n = lt_checkint(L, 1, "set_num_threads", "the thread count");
    if (n < 1 || n > 4096)
        return luaL_error(L, "set_num_threads: expected 1..4096 threads, got %I", (lua_Integer)n);
    tide_set_num_threads((int)n);
    return 0;
}

static int f_get_num_threads(lua_State *L)
{
    lua_pushinteger(L, tide_get_num_threads());
    return 1;
}

static void push_memory(lua_State *L)
{
    size_t in_use = 0, cached = 0;
    tide_memory_stats(&in_use, &cached);
    lua_createtable(L, 0, 3);
    lua_pushinteger(L, (lua_Integer)in_use);
    lua_setfield(L, -2, "in_use");
    lua_pushinteger(L, (lua_Integer)tide_memory_peak(false));
    lua_setfield(L, -2, "peak");
    lua_pushinteger(L, (lua_Integer)cached);
    lua_setfield(L, -2, "cached");
}

static int f_memory_stats(lua_State *L)
{
    push_memory(L);
    return 1;
}

/* tide.reset_peak_memory_stats(): memory_stats().peak starts again from the bytes in use. */
static int f_reset_peak(lua_State *L)
{
    (void)L;
    tide_memory_peak(true);
    return 0;
}

/* tide.collect(): a full Lua collection (so unreachable tensors are freed), then the cached
 * blocks go back to the system. Returns the memory statistics afterwards. */
static int f_collect(lua_State *L)
{
    lua_gc(L, LUA_GCCOLLECT);
    tide_empty_cache();
    push_memory(L);
    return 1;
}

static int f_empty_cache(lua_State *L)
{
    (void)L;
    tide_empty_cache();
    return 0;
}

static const lt_reg autograd_regs[] = {
    {"requires_grad_", t_requires_grad_, LT_METHOD},
    {"backward", t_backward, LT_BOTH},
    {"detach", t_detach, LT_BOTH},
    {"_autograd_grad", f_autograd_grad, LT_FUNCTION}, /* tide.autograd.grad (lua/tide/autograd.lua) */
    {"_set_backward_hooks", f_set_backward_hooks, LT_FUNCTION}, /* tide.autograd.set_backward_hooks */
    {"no_grad", f_no_grad, LT_FUNCTION},
    {"enable_grad", f_enable_grad, LT_FUNCTION},
    {"set_grad_enabled", f_set_grad_enabled, LT_FUNCTION},
    {"is_grad_enabled", f_is_grad_enabled, LT_FUNCTION},
    {"autocast", f_autocast, LT_FUNCTION},
    {"get_autocast", f_get_autocast, LT_FUNCTION},
    {"set_num_threads", f_set_num_threads, LT_FUNCTION},
    {"get_num_threads", f_get_num_threads, LT_FUNCTION},
    {"memory_stats", f_memory_stats, LT_FUNCTION},
    {"reset_peak_memory_stats", f_reset_peak, LT_FUNCTION},
    {"collect", f_collect, LT_FUNCTION},
    {"empty_cache", f_empty_cache, LT_FUNCTION},
    {NULL, NULL, 0},
};

void lt_open_autograd(lua_State *L, int mt, int methods, int module)
{
    lt_setfuncs(L, autograd_regs, mt, methods, module);
}
