/*
 * ltide_print.c — tostring(x) in PyTorch's layout (torch/_tensor_str.py): "tensor(" prefix,
 * nested brackets indented under it, one width for every element, floats with 4 decimals (or
 * "1." when every value is whole, or scientific when values span more than 1e3 or leave
 * [1e-4, 1e8]), rows wrapped at 80 columns, and for tensors over 1000 elements only the first
 * and last 3 entries of each long dim around "...". Suffixes name what is not the default:
 * device, size of an empty tensor, dtype (other than float32, int64, bool), grad_fn or
 * requires_grad. Booleans print as Lua's true/false.
 */
#include <math.h>
#include <string.h>

#include "ltide.h"

#define PRINT_THRESHOLD 1000
#define PRINT_EDGE 3
#define PRINT_LINEWIDTH 80

typedef struct fmt {
    tide_dtype dtype;  /* of the original tensor */
    bool floating;
    bool int_mode, sci_mode;
    int width;
    const double *f;   /* values, when floating */
    const int64_t *i;  /* values, otherwise */
    int nd;
    const int64_t *shape; /* of the summary */
    bool elided[TIDE_MAX_DIMS];
    int64_t stride[TIDE_MAX_DIMS];
} fmt;

static int format_value(const fmt *f, int64_t k, char *out, size_t size)
{
    if (!f->floating) {
        if (f->dtype == TIDE_BOOL)
            return snprintf(out, size, "%s", f->i[k] ? "true" : "false");
        return snprintf(out, size, "%lld", (long long)f->i[k]);
    }
    double v = f->f[k];
    if (isnan(v))
        return snprintf(out, size, "nan");
    if (isinf(v))
        return snprintf(out, size, v > 0 ? "inf" : "-inf");
    if (f->sci_mode)
        return snprintf(out, size, "%.4e", v);
    if (f->int_mode)
        return snprintf(out, size, "%.0f.", v);
    return snprintf(out, size, "%.4f", v);
}

/* Chooses the float mode and the common width, as torch's _Formatter (torch/_tensor_str.py).
 * Only the nonzero finite values count; with lo and hi their smallest and largest magnitudes:
 *  - int mode ("3.") when every one is whole; scientific ("%.4e") when hi / lo > 1000 or
 *    hi > 1e8;
 *  - otherwise scientific when hi / lo > 1000, hi > 1e8 or lo < 1e-4, else fixed ("%.4f").
 * Every comparison is strict (1e8 itself prints as "100000000."), in double precision on the
 * tensor's values (a float32 1e-4 is 9.99999975e-05, so it prints as 1.0000e-04). The width is
 * the longest of those values; zeros, nan and inf are padded to it. */
static void measure(fmt *f, int64_t n)
{
    char s[64];
    f->int_mode = true;
    f->sci_mode = false;
    f->width = 1;
    if (!f->floating) {
        for (int64_t k = 0; k < n; k++) {
            int len = format_value(f, k, s, sizeof s);
            f->width = len > f->width ? len : f->width;
        }
        return;
    }
    double lo = INFINITY, hi = 0;
    bool any = false;
    for (int64_t k = 0; k < n; k++) {
        double v = f->f[k];
        if (!isfinite(v) || v == 0)
            continue;
        any = true;
        double a = fabs(v);
        lo = a < lo ? a : lo;
        hi = a > hi ? a : hi;
        if (v != ceil(v))
            f->int_mode = false;
    }
    if (!any)
        return;
    if (f->int_mode)
        f->sci_mode = hi / lo > 1000.0 || hi > 1e8;
    else
        f->sci_mode = hi / lo > 1000.0 || hi > 1e8 || lo < 1e-4;
    for (int64_t k = 0; k < n; k++) {
        double v = f->f[k];
        if (!isfinite(v) || v == 0)
            continue;
        int len = format_value(f, k, s, sizeof s);
        f->width = len > f->width ? len : f->width;
    }
}

static void add_padded(luaL_Buffer *b, const fmt *f, int64_t k)
{
    char s[64];
    int len = format_value(f, k, s, sizeof s);
    for (int i = len; i < f->width; i++)
        luaL_addchar(b, ' ');
    luaL_addstring(b, s);
}

static void add_spaces(luaL_Buffer *b, int n)
{
    for (int i = 0; i < n; i++)
        luaL_addchar(b, ' ');
}

/* Entry j of a summarized dim is preceded by "..." when it is the first of the tail. */
static bool dots_before(const fmt *f, int d, int64_t j)
{
    return f->elided[d] && j == PRINT_EDGE;
}

static void add_vector(luaL_Buffer *b, const fmt *f, int64_t base, int indent)
{
    int per_line = (PRINT_LINEWIDTH - indent) / (f->width + 2);
    if (per_line < 1)
        per_line = 1;
    int d = f->nd - 1;
    int64_t n = f->shape[d];
    luaL_addchar(b, '[');
    int on_line = 0;
    bool first = true;
    for (int64_t j = 0; j < n; j++) {
        for (int item = dots_before(f, d, j) ? 0 : 1; item < 2; item++) {
            if (!first) {
                if (on_line == per_line) {
                    luaL_addstring(b, ",\n");
                    add_spaces(b, indent + 1);
                    on_line = 0;
                } else {
                    luaL_addstring(b, ", ");
                }
            }
            first = false;
            if (item == 0)
                luaL_addstring(b, " ...");
            else
                add_padded(b, f, base + j * f->stride[d]);
            on_line++;
        }
    }
    luaL_addchar(b, ']');
}

static void add_tensor(luaL_Buffer *b, const fmt *f, int d, int64_t base, int indent)
{
    if (d == f->nd - 1) {
        add_vector(b, f, base, indent);
        return;
    }
    int remaining = f->nd - d;
    luaL_addchar(b, '[');
    bool first = true;
    for (int64_t j = 0; j < f->shape[d]; j++) {
        for (int item = dots_before(f, d, j) ? 0 : 1; item < 2; item++) {
            if (!first) {
                luaL_addchar(b, ',');
                for (int k = 0; k < remaining - 1; k++)
                    luaL_addchar(b, '\n');
                add_spaces(b, indent + 1);
            }
            first = false;
            if (item == 0)
                luaL_addstring(b, "...");
            else
                add_tensor(b, f, d + 1, base + j * f->stride[d], indent + 1);
        }
    }
    luaL_addchar(b, ']');
}

/* The first and last PRINT_EDGE entries of every dim from d on that is longer than
 * 2 * PRINT_EDGE (new reference), made with public ops so that only what is printed is read
 * back. Each half is narrowed in every later dim before the halves are joined, so even a huge
 * expanded view only ever copies the printed corners. */
static tide_tensor *summarize(tide_tensor *t, int d, bool *elided)
{
    if (d == tide_ndim(t))
        return tide_retain(t);
    int64_t n = tide_shape(t)[d];
    elided[d] = n > 2 * PRINT_EDGE;
    if (!elided[d])
        return summarize(t, d + 1, elided);
    tide_tensor *parts[2] = {NULL, NULL};
    for (int h = 0; h < 2; h++) {
        int64_t start = h ? n - PRINT_EDGE : 0;
        tide_tensor *half = tide_slice(t, d, start, start + PRINT_EDGE, 1);
        parts[h] = half ? summarize(half, d + 1, elided) : NULL;
        tide_release(half);
        if (!parts[h])
            break;
    }
    tide_tensor *r = parts[0] && parts[1] ? tide_cat(parts, 2, d) : NULL;
    tide_release(parts[0]);
    tide_release(parts[1]);
    return r;
}

/* Appends ", s" to out (or a line break and the prefix's indent when the line would pass the
 * width), as torch's _add_suffixes. */
static void add_suffix(char *out, size_t size, int *line_len, const char *s)
{
    int len = (int)strlen(s);
    size_t used = strlen(out);
    if (*line_len + len + 2 > PRINT_LINEWIDTH) {
        snprintf(out + used, size - used, ",\n       %s", s);
        *line_len = 7 + len;
    } else {
        snprintf(out + used, size - used, ", %s", s);
        *line_len += len + 2;
    }
}

/* PyTorch's keywords after the values, each where it differs from the default: device,
 * size (an empty tensor's shape), dtype, grad_fn or requires_grad; then the closing ")". */
static void add_keywords(char *out, size_t cap, int *line_len, tide_tensor *t)
{
    char suffix[200];
    int nd = tide_ndim(t);
    int64_t numel = tide_numel(t);
    tide_dtype dtype = tide_get_dtype(t);
    const char *dev = tide_device_name(t);
    if (dev && strcmp(dev, "cpu") != 0) {
        snprintf(suffix, sizeof suffix, "device='%s'", dev);
        add_suffix(out, cap, line_len, suffix);
    }
    if (numel == 0 && nd != 1) {
        char shape[160];
        snprintf(suffix, sizeof suffix, "size=%s", lt_shape_str(shape, sizeof shape, t));
        add_suffix(out, cap, line_len, suffix);
    }
    bool show_dtype = dtype != TIDE_FLOAT32 &&
                      (numel == 0 || (dtype != TIDE_INT64 && dtype != TIDE_BOOL));
    if (show_dtype) {
        snprintf(suffix, sizeof suffix, "dtype=tide.%s", tide_dtype_name(dtype));
        add_suffix(out, cap, line_len, suffix);
    }
    tide_clear_error();
    const char *grad_fn = tide_grad_fn_name(t);
    if (grad_fn) {
        snprintf(suffix, sizeof suffix, "grad_fn=<%s>", grad_fn);
        add_suffix(out, cap, line_len, suffix);
    } else if (tide_requires_grad(t)) {
        add_suffix(out, cap, line_len, "requires_grad=true");
    }
    tide_clear_error(); /* autograd may not be there yet: printing never fails for it */
    size_t used = strlen(out);
    snprintf(out + used, cap - used, ")");
}

void lt_pushtensorstring(lua_State *L, tide_tensor *t)
{
    int nd = tide_ndim(t);
    tide_dtype dtype = tide_get_dtype(t);
    fmt f;
    memset(&f, 0, sizeof f);
    f.dtype = dtype;
    f.floating = tide_dtype_is_floating(dtype);
    f.nd = nd;
    int64_t numel = tide_numel(t);

    /* the summary and its values, owned by Lua so that a failure below leaks nothing */
    lt_box *sbox = lt_newbox(L);
    int sslot = lua_gettop(L);
    bool summarized = numel > PRINT_THRESHOLD;
    tide_tensor *s = summarized ? summarize(t, 0, f.elided) : tide_retain(t);
    tide_tensor *v = s ? tide_cast(s, f.floating ? TIDE_FLOAT64 : TIDE_INT64) : NULL;
    tide_release(s);
    lt_fill(L, sbox, v, true);
    int64_t n = tide_numel(v);
    void *data = lua_newuserdatauv(L, n ? (size_t)n * 8 : 8, 0);
    if (n && tide_to_buffer(v, data, (size_t)n * 8) < 0)
        lt_raise(L, NULL);
    f.f = data;
    f.i = data;
    f.shape = tide_shape(v);
    int64_t st = 1;
    for (int d = nd - 1; d >= 0; d--) {
        f.stride[d] = st;
        st *= f.shape[d];
    }
    measure(&f, n);

    luaL_Buffer b;
    luaL_buffinit(L, &b);
    luaL_addstring(&b, "tensor(");
    if (numel == 0) {
        luaL_addstring(&b, "[]");
    } else if (nd == 0) {
        add_padded(&b, &f, 0);
    } else {
        add_tensor(&b, &f, 0, 0, 7);
    }
    luaL_pushresult(&b);
    size_t len;
    const char *body = lua_tolstring(L, -1, &len);
    const char *nl = strrchr(body, '\n');
    int line_len = (int)(nl ? len - (size_t)(nl - body) + 1 : len + 1);
    char out[1024] = "";
    add_keywords(out, sizeof out, &line_len, t);
    lua_pushstring(L, out);
    lua_concat(L, 2);
    lua_replace(L, sslot);
    lua_settop(L, sslot);
}

static int t_tostring(lua_State *L)
{
    tide_tensor *t = lt_check(L, 1, "tostring");
    lt_pushtensorstring(L, t);
    return 1;
}

void lt_open_print(lua_State *L, int mt, int methods, int module)
{
    (void)methods;
    (void)module;
    lua_pushvalue(L, mt);
    lua_pushcclosure(L, t_tostring, 1);
    lua_setfield(L, mt, "__tostring");
}
