/*
 * npy.c — single tensors in NumPy's .npy format: the magic "\x93NUMPY", a version (major,
 * minor), the header length (2 bytes little-endian in 1.0, 4 in 2.0 and 3.0), a header that is
 * a Python dict literal {'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), } padded with
 * spaces and a newline so the data starts on a 64-byte boundary, then the raw data.
 *
 * The reader parses the dict literal strictly (the three keys once each, string/bool/tuple of
 * non-negative ints) instead of evaluating it, and checks the data size against the file before
 * allocating. The writer reproduces numpy.save (numpy >= 1.24: 21 - len(repr(shape[0])) spare
 * spaces after the dict, so the header can be rewritten in place as the array grows).
 */
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"

#define NPY_MAX_HEADER (1u << 20) /* numpy writes well under 1 KiB; bounds the allocation */
#define NPY_ALIGN 64
#define NPY_GROWTH_DIGITS 21

/* ---- the header dict ---------------------------------------------------------------------- */

typedef struct npy_header {
    const char *s;
    size_t n, pos;
    char descr[32];
    bool fortran_order;
    int ndim;
    int64_t shape[TIDE_MAX_DIMS];
    char err[200];
} npy_header;

static int npy_fail(npy_header *h, const char *msg)
{
    snprintf(h->err, sizeof h->err, "header: %s at byte %zu of the dict", msg, h->pos);
    return -1;
}

static void npy_ws(npy_header *h)
{
    while (h->pos < h->n && strchr(" \t\r\n", h->s[h->pos]) && h->s[h->pos])
        h->pos++;
}

static bool npy_take(npy_header *h, char c)
{
    npy_ws(h);
    if (h->pos < h->n && h->s[h->pos] == c) {
        h->pos++;
        return true;
    }
    return false;
}

/* A quoted Python string without escapes ('...' or "..."), copied into out. */
static int npy_string(npy_header *h, char *out, size_t size)
{
    npy_ws(h);
    if (h->pos >= h->n || (h->s[h->pos] != '\'' && h->s[h->pos] != '"'))
        return npy_fail(h, "expected a quoted string");
    char quote = h->s[h->pos++];
    size_t start = h->pos;
    while (h->pos < h->n && h->s[h->pos] != quote) {
        char c = h->s[h->pos];
        if (c == '\n')
            return npy_fail(h, "unterminated string");
        if (c == '\\' || (unsigned char)c < 0x20 || (unsigned char)c >= 0x7F)
            return npy_fail(h, "unsupported character in a string");
        h->pos++;
    }
    if (h->pos >= h->n)
        return npy_fail(h, "unterminated string");
    size_t len = h->pos - start;
    h->pos++;
    if (len >= size)
        return npy_fail(h, "string too long");
    memcpy(out, h->s + start, len);
    out[len] = 0;
    return 0;
}

static int npy_int(npy_header *h, int64_t *v)
{
    npy_ws(h);
    size_t start = h->pos;
    if (h->pos < h->n && h->s[h->pos] == '-')
        return npy_fail(h, "negative size in the shape");
    uint64_t x = 0;
    while (h->pos < h->n && h->s[h->pos] >= '0' && h->s[h->pos] <= '9') {
        unsigned d = (unsigned)(h->s[h->pos] - '0');
        if (x > ((uint64_t)INT64_MAX - d) / 10)
            return npy_fail(h, "size in the shape is too large");
        x = x * 10 + d;
        h->pos++;
    }
    if (h->pos == start)
        return npy_fail(h, "expected an integer in the shape");
    if (h->s[start] == '0' && h->pos - start > 1)
        return npy_fail(h, "integer with a leading zero");
    if (h->pos < h->n && (h->s[h->pos] == 'L' || h->s[h->pos] == 'l'))
        h->pos++; /* Python 2's long suffix, which numpy also accepts in 1.0/2.0 headers */
    *v = (int64_t)x;
    return 0;
}

/* (), (n,), (a, b), (a, b,) — a Python tuple; "(n)" is an int in Python, not a tuple. */
static int npy_shape(npy_header *h)
{
    if (!npy_take(h, '('))
        return npy_fail(h, "shape is not a tuple");
    h->ndim = 0;
    if (npy_take(h, ')'))
        return 0;
    for (;;) {
        if (h->ndim == TIDE_MAX_DIMS)
            return npy_fail(h, "shape has more than 8 dims (tide's limit)");
        if (npy_int(h, &h->shape[h->ndim]) < 0)
            return -1;
        h->ndim++;
        bool comma = npy_take(h, ',');
        if (npy_take(h, ')')) {
            if (h->ndim == 1 && !comma)
                return npy_fail(h, "shape (n) is not a tuple (write (n,))");
            return 0;
        }
        if (!comma)
            return npy_fail(h, "expected ',' or ')' in the shape");
    }
}

static int npy_bool(npy_header *h, bool *v)
{
    npy_ws(h);
    if (h->n - h->pos >= 4 && memcmp(h->s + h->pos, "True", 4) == 0) {
        h->pos += 4, *v = true;
        return 0;
    }
    if (h->n - h->pos >= 5 && memcmp(h->s + h->pos, "False", 5) == 0) {
        h->pos += 5, *v = false;
        return 0;
    }
    return npy_fail(h, "fortran_order is not True or False");
}

static int npy_parse(npy_header *h)
{
    if (!npy_take(h, '{'))
        return npy_fail(h, "header is not a dict");
    bool seen[3] = {false, false, false};
    for (int count = 0;; count++) {
        if (npy_take(h, '}'))
            break;
        if (count > 0 && !npy_take(h, ','))
            return npy_fail(h, "expected ',' or '}'");
        if (count > 0 && npy_take(h, '}'))
            break; /* numpy writes a trailing comma */
        char key[32];
        if (npy_string(h, key, sizeof key) < 0)
            return -1;
        if (!npy_take(h, ':'))
            return npy_fail(h, "expected ':' after a key");
        int k = strcmp(key, "descr") == 0           ? 0
              : strcmp(key, "fortran_order") == 0 ? 1
              : strcmp(key, "shape") == 0         ? 2 : -1;
        if (k < 0)
            return npy_fail(h, "unknown key (a .npy header has descr, fortran_order, shape)");
        if (seen[k])
            return npy_fail(h, "key given twice");
        seen[k] = true;
        int rc;
        if (k == 0) {
            npy_ws(h);
            if (h->pos < h->n && h->s[h->pos] == '[')
                return npy_fail(h, "structured dtypes (a list as descr) are not supported");
            rc = npy_string(h, h->descr, sizeof h->descr);
        } else if (k == 1) {
            rc = npy_bool(h, &h->fortran_order);
        } else {
            rc = npy_shape(h);
        }
        if (rc < 0)
            return -1;
    }
    npy_ws(h);
    if (h->pos != h->n)
        return npy_fail(h, "unexpected text after the dict");
    if (!seen[0] || !seen[1] || !seen[2])
        return npy_fail(h, !seen[0] ? "no descr" : !seen[1] ? "no fortran_order" : "no shape");
    return 0;
}

/* ---- dtypes ------------------------------------------------------------------------------- */

static const struct {
    const char *descr; /* what numpy writes on a little-endian machine */
    tide_dtype dtype;
} npy_dtypes[] = {
    {"<f4", TIDE_FLOAT32}, {"<f8", TIDE_FLOAT64}, {"<f2", TIDE_FLOAT16}, {"<i4", TIDE_INT32},
    {"<i8", TIDE_INT64},   {"|u1", TIDE_UINT8},   {"|b1", TIDE_BOOL},
};
#define NPY_NDTYPES ((int)(sizeof npy_dtypes / sizeof npy_dtypes[0]))

/* The dtype of a descr, and whether its bytes need swapping; -1 if tide has no such dtype.
 * Byte order: '<' little, '>' big, '=' native (little here), '|' not applicable. */
static int npy_dtype_of(const char *descr, bool *swap)
{
    if (strlen(descr) != 3 || !strchr("<>=|", descr[0]))
        return -1;
    for (int i = 0; i < NPY_NDTYPES; i++)
        if (strcmp(descr + 1, npy_dtypes[i].descr + 1) == 0) {
            *swap = descr[0] == '>' && descr[2] != '1';
            return npy_dtypes[i].dtype;
        }
    return -1;
}

/* ---- reading ------------------------------------------------------------------------------ */

/* The magic, the version and the header's length, which must fit the file and the limit;
 * *prefix: the bytes before the header. 0, or -1 with the error set. */
static int read_prefix(td_io_ctx *ctx, FILE *f, uint64_t size, uint64_t *hlen, uint64_t *prefix)
{
    uint8_t pre[12];
    if (size < 10)
        return td_io_error(ctx, "file has %llu bytes, too few for a .npy header",
                           (unsigned long long)size);
    if (td_io_read_exact(ctx, f, pre, 8, "the magic") < 0)
        return -1;
    if (memcmp(pre, "\x93NUMPY", 6) != 0)
        return td_io_error(ctx, "not a .npy file (it does not start with \\x93NUMPY)");
    int major = pre[6], minor = pre[7];
    if (!(minor == 0 && major >= 1 && major <= 3))
        return td_io_error(ctx, "unsupported .npy version %d.%d (tide reads 1.0, 2.0 and 3.0)",
                           major, minor);
    size_t lenbytes = major == 1 ? 2 : 4;
    if (td_io_read_exact(ctx, f, pre + 8, lenbytes, "the header length") < 0)
        return -1;
    *hlen = major == 1 ? (uint64_t)pre[8] | (uint64_t)pre[9] << 8
                       : (uint64_t)pre[8] | (uint64_t)pre[9] << 8 | (uint64_t)pre[10] << 16 |
                             (uint64_t)pre[11] << 24;
    *prefix = 8 + lenbytes;
    if (*hlen > size - *prefix)
        return td_io_error(ctx, "header length %llu is more than the %llu bytes after it in the "
                           "file", (unsigned long long)*hlen,
                           (unsigned long long)(size - *prefix));
    if (*hlen > NPY_MAX_HEADER)
        return td_io_error(ctx, "header length %llu is over the limit of %u bytes",
                           (unsigned long long)*hlen, NPY_MAX_HEADER);
    return 0;
}

/* The data's size from the header's shape and dtype (*numel elements, *nbytes bytes), which
 * must be exactly the avail bytes after the header. 0, or -1 with the error set. */
static int check_data_size(td_io_ctx *ctx, const npy_header *h, int dt, uint64_t avail,
                           uint64_t *numel_out, uint64_t *nbytes_out)
{
    char s[160];
    td_io_shape_str(s, sizeof s, h->ndim, h->shape);
    if (h->fortran_order)
        return td_io_error_code(ctx, TIDE_ERR_UNSUPPORTED, "fortran_order is True (column-major "
                                "data of shape %s); tide reads C-order arrays only: save "
                                "np.ascontiguousarray(a)", s);
    uint64_t numel = 1, esize = tide_dtype_size((tide_dtype)dt);
    bool zero = false, overflow = false;
    for (int i = 0; i < h->ndim; i++)
        zero |= h->shape[i] == 0;
    for (int i = 0; i < h->ndim && !zero; i++) {
        if (numel > UINT64_MAX / esize / (uint64_t)h->shape[i])
            overflow = true;
        numel *= (uint64_t)h->shape[i];
    }
    uint64_t nbytes = zero ? 0 : numel * esize;
    if (zero && !td_io_strides_fit(h->ndim, h->shape))
        return td_io_error(ctx, "shape %s has sizes other than 0 that multiply past 2^62", s);
    if (overflow)
        return td_io_error(ctx, "shape %s of %s needs more than 2^64 bytes of data", s, h->descr);
    if (nbytes > avail)
        return td_io_error(ctx, "shape %s of %s needs %llu bytes of data; the file has %llu after "
                           "the header (truncated?)", s, h->descr, (unsigned long long)nbytes,
                           (unsigned long long)avail);
    if (nbytes < avail)
        return td_io_error(ctx, "%llu bytes follow the %llu bytes of data of shape %s of %s",
                           (unsigned long long)(avail - nbytes), (unsigned long long)nbytes, s,
                           h->descr);
    *numel_out = numel;
    *nbytes_out = nbytes;
    return 0;
}

tide_tensor *tide_load_npy(const char *path)
{
    if (td_io_check_path("load_npy", path) < 0)
        return NULL;
    td_io_ctx ctx = {"load_npy", path};
    uint64_t size;
    FILE *f = td_io_open_read(&ctx, &size);
    if (!f)
        return NULL;
    tide_tensor *t = NULL;
    char *text = NULL;
    uint64_t hlen = 0, prefix = 0;
    if (read_prefix(&ctx, f, size, &hlen, &prefix) < 0)
        goto done;
    text = td_malloc((size_t)hlen + 1);
    if (!text) {
        td_io_error(&ctx, "out of memory");
        goto done;
    }
    if (td_io_read_exact(&ctx, f, text, (size_t)hlen, "the header") < 0)
        goto done;
    text[hlen] = 0;
    npy_header h = {.s = text, .n = (size_t)hlen};
    if (npy_parse(&h) < 0) {
        td_io_error(&ctx, "%s", h.err);
        goto done;
    }
    bool swap = false;
    int dt = npy_dtype_of(h.descr, &swap);
    if (dt < 0) {
        td_io_error_code(&ctx, TIDE_ERR_UNSUPPORTED, "unsupported dtype '%s' (tide reads <f4, <f8, "
                         "<f2, <i4, <i8, |u1 and |b1, and their big-endian forms)", h.descr);
        goto done;
    }
    uint64_t numel = 0, nbytes = 0, esize = tide_dtype_size((tide_dtype)dt);
    if (check_data_size(&ctx, &h, dt, size - prefix - hlen, &numel, &nbytes) < 0)
        goto done;
    t = tide_empty_on("cpu", h.ndim, h.shape, (tide_dtype)dt);
    if (!t) {
        td_io_error(&ctx, "%s", tide_last_error());
        goto done;
    }
    if (nbytes &&
        td_io_read_exact(&ctx, f, tide_mutable_data_ptr(t), (size_t)nbytes, "the data") < 0) {
        tide_release(t);
        t = NULL;
        goto done;
    }
    if (swap)
        td_io_swap_bytes(tide_mutable_data_ptr(t), (size_t)numel, (size_t)esize);
    if (dt == TIDE_BOOL)
        td_io_normalize_bools(tide_mutable_data_ptr(t), (size_t)nbytes);
done:
    free(text);
    fclose(f);
    return t;
}

/* ---- writing ------------------------------------------------------------------------------ */

int tide_save_npy(const char *path, const tide_tensor *t)
{
    if (td_io_check_path("save_npy", path) < 0)
        return -1;
    td_io_ctx ctx = {"save_npy", path};
    if (!t)
        return td_io_error_code(&ctx, TIDE_ERR_INVALID_ARGUMENT, "tensor is NULL");
    const char *descr = NULL;
    for (int i = 0; i < NPY_NDTYPES; i++)
        if (npy_dtypes[i].dtype == tide_get_dtype(t))
            descr = npy_dtypes[i].descr;
    if (!descr && tide_get_dtype(t) == TIDE_BFLOAT16)
        return td_io_error_code(&ctx, TIDE_ERR_UNSUPPORTED, "tensor has dtype bfloat16, which .npy "
                                "cannot hold (numpy has no bfloat16): save it as safetensors "
                                "(BF16: tide_save_safetensors, tide.save in Lua) or cast it to "
                                "float32 first");
    if (!descr)
        return td_io_error_code(&ctx, TIDE_ERR_INVALID_ARGUMENT, "tensor has an invalid dtype");
    int ndim = tide_ndim(t);
    td_io_buf b = {0};
    td_io_buf_printf(&b, "{'descr': '%s', 'fortran_order': False, 'shape': (", descr);
    for (int i = 0; i < ndim; i++)
        td_io_buf_printf(&b, "%s%lld", i ? ", " : "", (long long)tide_size(t, i));
    td_io_buf_str(&b, ndim == 1 ? ",), }" : "), }");
    if (ndim > 0) {
        char first[24];
        int digits = snprintf(first, sizeof first, "%lld", (long long)tide_size(t, 0));
        for (int i = digits; i < NPY_GROWTH_DIGITS; i++)
            td_io_buf_str(&b, " ");
    }
    /* Spaces and a newline so that magic + version + length + header is a multiple of 64. */
    size_t hlen = b.len + 1;
    size_t pad = NPY_ALIGN - (10 + hlen) % NPY_ALIGN;
    for (size_t i = 0; i < pad; i++)
        td_io_buf_str(&b, " ");
    td_io_buf_str(&b, "\n");
    if (b.failed) {
        td_io_buf_free(&b);
        return td_io_error(&ctx, "out of memory");
    }
    uint8_t pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)(b.len & 0xFF),
                       (uint8_t)(b.len >> 8)};
    FILE *f = td_io_open_write(&ctx);
    int rc = f ? 0 : -1;
    if (rc == 0)
        rc = td_io_write(&ctx, f, pre, sizeof pre);
    if (rc == 0)
        rc = td_io_write(&ctx, f, b.data, b.len);
    if (rc == 0)
        rc = td_io_write_tensor(&ctx, f, t);
    if (f && rc == 0)
        rc = td_io_close_write(&ctx, f);
    else if (f)
        fclose(f);
    td_io_buf_free(&b);
    return rc;
}
