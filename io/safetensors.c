/*
 * safetensors.c — checkpoints in the safetensors format: an 8-byte little-endian header length
 * N, N bytes of JSON ({"name": {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]},
 * ..., "__metadata__": {"key": "value"}}), then the data section, where each tensor's row-major
 * little-endian bytes sit at [begin, end).
 *
 * The reader follows the reference implementation's rules (huggingface/safetensors): header at
 * most 100 MB and inside the file, valid UTF-8 JSON starting with '{', tensors tiling the data
 * section exactly when sorted by offset (no gap, no overlap, nothing after the last one), and
 * end - begin equal to the shape's element count times the dtype size. It is stricter in what
 * the reference silently accepts or overwrites: duplicate names or fields, unknown fields.
 * Every size is checked against the file before anything is allocated for the data.
 *
 * The writer produces what the reference writer produces for the same tensors, byte for byte:
 * tensors sorted by dtype (the reference's enum order, largest first) then by name, compact
 * JSON with "__metadata__" first, the header padded with spaces to a multiple of 8.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "io_internal.h"
#include "json.h"

#define ST_MAX_HEADER 100000000ull /* the reference reader's limit */

/* rank: position in the reference's Dtype enum, which orders tensors in the data section. */
static const struct {
    const char *name;
    tide_dtype dtype;
    int rank;
} st_dtypes[] = {
    {"BOOL", TIDE_BOOL, 0},   {"U8", TIDE_UINT8, 1},      {"F16", TIDE_FLOAT16, 7},
    {"BF16", TIDE_BFLOAT16, 8}, {"I32", TIDE_INT32, 9},   {"F32", TIDE_FLOAT32, 11},
    {"F64", TIDE_FLOAT64, 12}, {"I64", TIDE_INT64, 13},
};
#define ST_NDTYPES ((int)(sizeof st_dtypes / sizeof st_dtypes[0]))

/* Dtypes other safetensors writers produce that tide has no tensor type for. */
static const char *const st_unsupported[] = {"I8",      "I16",     "U16",     "U32", "U64",
                                             "C64",     "F8_E5M2", "F8_E4M3", "F8_E8M0", "F4",
                                             "F6_E2M3", "F6_E3M2"};

static int st_index_of(tide_dtype dt)
{
    for (int i = 0; i < ST_NDTYPES; i++)
        if (st_dtypes[i].dtype == dt)
            return i;
    return -1;
}

/* ---- reading ------------------------------------------------------------------------------ */

typedef struct st_entry {
    char *name;
    int dt; /* index into st_dtypes, -1 until read */
    int ndim;
    int64_t shape[TIDE_MAX_DIMS];
    uint64_t begin, end;
    bool has_shape, has_offsets;
    int order; /* position in the header, to keep sorting stable */
} st_entry;

typedef struct st_header {
    const td_io_ctx *ctx;
    td_json j;
    st_entry *entries;
    int count, cap;
    char **meta_keys, **meta_values;
    int nmeta, meta_cap;
    bool has_meta;
} st_header;

static int header_error(st_header *h, const char *where)
{
    return td_io_error(h->ctx, "header: %s%s", where, h->j.err);
}

static const char *qname(char *buf, size_t size, const char *name)
{
    return td_io_quote(buf, size, name, strlen(name));
}

static int parse_dtype(st_header *h, st_entry *e)
{
    char *s;
    size_t len;
    char q[80], where[120];
    snprintf(where, sizeof where, "tensor '%s': dtype: ", qname(q, sizeof q, e->name));
    if (td_json_string(&h->j, &s, &len) < 0)
        return header_error(h, where);
    for (int i = 0; i < ST_NDTYPES; i++)
        if (strcmp(s, st_dtypes[i].name) == 0) {
            e->dt = i;
            free(s);
            return 0;
        }
    char d[40];
    td_io_quote(d, sizeof d, s, len);
    bool known = false;
    for (size_t i = 0; i < sizeof st_unsupported / sizeof st_unsupported[0]; i++)
        known |= strcmp(s, st_unsupported[i]) == 0;
    if (known)
        td_io_error_code(h->ctx, TIDE_ERR_UNSUPPORTED, "tensor '%s' has unsupported dtype %s (tide "
                         "reads F32, F64, F16, BF16, I32, I64, U8 and BOOL)", q, d);
    else
        td_io_error(h->ctx, "tensor '%s' has unknown dtype '%s'", q, d);
    free(s);
    return -1;
}

static int parse_shape(st_header *h, st_entry *e)
{
    char q[80], where[120];
    snprintf(where, sizeof where, "tensor '%s': shape: ", qname(q, sizeof q, e->name));
    if (td_json_expect(&h->j, '[') < 0)
        return header_error(h, where);
    int count = 0, r;
    while ((r = td_json_next(&h->j, ']', &count)) == 1) {
        uint64_t v;
        if (count > TIDE_MAX_DIMS)
            return td_io_error(h->ctx, "tensor '%s' has more than %d dims; tide tensors have at "
                               "most %d", q, TIDE_MAX_DIMS, TIDE_MAX_DIMS);
        if (td_json_uint(&h->j, &v) < 0)
            return header_error(h, where);
        if (v > (uint64_t)INT64_MAX)
            return td_io_error(h->ctx, "tensor '%s': size %llu in dim %d is too large", q,
                               (unsigned long long)v, count - 1);
        e->shape[count - 1] = (int64_t)v;
    }
    if (r < 0)
        return header_error(h, where);
    e->ndim = count;
    return 0;
}

static int parse_offsets(st_header *h, st_entry *e)
{
    char q[80], where[120];
    snprintf(where, sizeof where, "tensor '%s': data_offsets: ", qname(q, sizeof q, e->name));
    if (td_json_expect(&h->j, '[') < 0 || td_json_uint(&h->j, &e->begin) < 0 ||
        td_json_expect(&h->j, ',') < 0 || td_json_uint(&h->j, &e->end) < 0 ||
        td_json_expect(&h->j, ']') < 0)
        return header_error(h, where);
    return 0;
}

static int parse_entry(st_header *h, st_entry *e)
{
    char q[80], where[120];
    snprintf(where, sizeof where, "tensor '%s': ", qname(q, sizeof q, e->name));
    if (td_json_expect(&h->j, '{') < 0)
        return header_error(h, where);
    int count = 0, r;
    while ((r = td_json_next(&h->j, '}', &count)) == 1) {
        char *key;
        size_t len;
        if (td_json_string(&h->j, &key, &len) < 0 || td_json_expect(&h->j, ':') < 0) {
            free(key);
            return header_error(h, where);
        }
        char k[60];
        td_io_quote(k, sizeof k, key, len);
        bool dup = false;
        int rc;
        if (strcmp(key, "dtype") == 0) {
            rc = (dup = e->dt >= 0) ? -1 : parse_dtype(h, e);
        } else if (strcmp(key, "shape") == 0) {
            rc = (dup = e->has_shape) ? -1 : parse_shape(h, e);
            e->has_shape = true;
        } else if (strcmp(key, "data_offsets") == 0) {
            rc = (dup = e->has_offsets) ? -1 : parse_offsets(h, e);
            e->has_offsets = true;
        } else {
            rc = td_io_error(h->ctx, "tensor '%s' has unknown field '%s' (a tensor has dtype, "
                             "shape and data_offsets)", q, k);
        }
        if (dup)
            td_io_error(h->ctx, "tensor '%s' has field '%s' twice", q, k);
        free(key);
        if (rc < 0)
            return -1;
    }
    if (r < 0)
        return header_error(h, where);
    if (e->dt < 0 || !e->has_shape || !e->has_offsets)
        return td_io_error(h->ctx, "tensor '%s' lacks %s", q,
                           e->dt < 0 ? "its dtype" : !e->has_shape ? "its shape"
                                                                  : "its data_offsets");
    return 0;
}

static int parse_metadata(st_header *h)
{
    if (td_json_expect(&h->j, '{') < 0)
        return header_error(h, "__metadata__: ");
    int count = 0, r;
    while ((r = td_json_next(&h->j, '}', &count)) == 1) {
        if (h->nmeta == h->meta_cap) {
            int cap = h->meta_cap ? 2 * h->meta_cap : 8;
            char **k = td_realloc(h->meta_keys, (size_t)cap * sizeof *k);
            if (k)
                h->meta_keys = k;
            char **v = k ? td_realloc(h->meta_values, (size_t)cap * sizeof *v) : NULL;
            if (!v)
                return td_io_error(h->ctx, "out of memory reading the metadata");
            h->meta_values = v;
            h->meta_cap = cap;
        }
        char *key, *value;
        size_t klen, vlen;
        if (td_json_string(&h->j, &key, &klen) < 0)
            return header_error(h, "__metadata__: ");
        h->meta_keys[h->nmeta] = key;
        h->meta_values[h->nmeta] = NULL;
        h->nmeta++;
        if (td_json_expect(&h->j, ':') < 0)
            return header_error(h, "__metadata__: ");
        td_json_skip_ws(&h->j);
        if (h->j.pos < h->j.n && h->j.s[h->j.pos] != '"') {
            char k[60];
            return td_io_error(h->ctx, "metadata value of '%s' is %s; metadata values are "
                               "strings", td_io_quote(k, sizeof k, key, klen), td_json_what(&h->j));
        }
        if (td_json_string(&h->j, &value, &vlen) < 0)
            return header_error(h, "__metadata__: ");
        h->meta_values[h->nmeta - 1] = value;
    }
    if (r < 0)
        return header_error(h, "__metadata__: ");
    return 0;
}

static int parse_header(st_header *h)
{
    td_json *j = &h->j;
    if (j->n == 0 || j->s[0] != '{')
        return td_io_error(h->ctx, "header does not start with '{' (not a safetensors file?)");
    j->pos = 1;
    int count = 0, r;
    while ((r = td_json_next(j, '}', &count)) == 1) {
        char *key;
        size_t len;
        if (td_json_string(j, &key, &len) < 0)
            return header_error(h, "");
        if (td_json_expect(j, ':') < 0) {
            free(key);
            return header_error(h, "");
        }
        if (strcmp(key, "__metadata__") == 0) {
            free(key);
            if (h->has_meta)
                return td_io_error(h->ctx, "header has __metadata__ twice");
            h->has_meta = true;
            if (parse_metadata(h) < 0)
                return -1;
            continue;
        }
        if (h->count == h->cap) {
            int cap = h->cap ? 2 * h->cap : 16;
            st_entry *e = td_realloc(h->entries, (size_t)cap * sizeof *e);
            if (!e) {
                free(key);
                return td_io_error(h->ctx, "out of memory reading the header");
            }
            h->entries = e;
            h->cap = cap;
        }
        st_entry *e = &h->entries[h->count];
        memset(e, 0, sizeof *e);
        e->name = key;
        e->dt = -1;
        e->order = h->count++;
        if (parse_entry(h, e) < 0)
            return -1;
    }
    if (r < 0)
        return header_error(h, "");
    td_json_skip_ws(j);
    if (j->pos < j->n)
        return td_io_error(h->ctx, "header has trailing bytes after its JSON object (at byte %zu "
                           "of %zu)", j->pos, j->n);
    return 0;
}

static void header_free(st_header *h)
{
    for (int i = 0; i < h->count; i++)
        free(h->entries[i].name);
    free(h->entries);
    for (int i = 0; i < h->nmeta; i++) {
        free(h->meta_keys[i]);
        free(h->meta_values[i]);
    }
    free(h->meta_keys);
    free(h->meta_values);
}

static int cmp_str_ptr(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

/* The first name that appears twice, or NULL. Sorting copies of the pointers keeps it
 * O(n log n) for headers with millions of entries. */
static const char *find_duplicate(char *const *names, int n, bool *oom)
{
    *oom = false;
    if (n < 2)
        return NULL;
    char **sorted = td_malloc((size_t)n * sizeof *sorted);
    if (!sorted) {
        *oom = true;
        return NULL;
    }
    memcpy(sorted, names, (size_t)n * sizeof *sorted);
    qsort(sorted, (size_t)n, sizeof *sorted, cmp_str_ptr);
    const char *dup = NULL;
    for (int i = 1; i < n && !dup; i++)
        if (strcmp(sorted[i - 1], sorted[i]) == 0)
            dup = sorted[i];
    free(sorted);
    return dup;
}

static int check_duplicates(st_header *h)
{
    char **names = td_malloc((size_t)(h->count ? h->count : 1) * sizeof *names);
    if (!names)
        return td_io_error(h->ctx, "out of memory checking the header");
    for (int i = 0; i < h->count; i++)
        names[i] = h->entries[i].name;
    bool oom1, oom2;
    const char *dup = find_duplicate(names, h->count, &oom1);
    char q[80];
    int rc = 0;
    if (dup)
        rc = td_io_error(h->ctx, "duplicate tensor name '%s'", qname(q, sizeof q, dup));
    free(names);
    if (rc == 0 && (dup = find_duplicate(h->meta_keys, h->nmeta, &oom2)) != NULL)
        rc = td_io_error(h->ctx, "duplicate metadata key '%s'", qname(q, sizeof q, dup));
    if (rc == 0 && (oom1 || oom2))
        rc = td_io_error(h->ctx, "out of memory checking the header");
    return rc;
}

/* shape * dtype size against data_offsets, and the offsets against the data section. */
static int check_entry(st_header *h, const st_entry *e, uint64_t data_len)
{
    char q[80], s[160];
    qname(q, sizeof q, e->name);
    td_io_shape_str(s, sizeof s, e->ndim, e->shape);
    const char *dname = st_dtypes[e->dt].name;
    uint64_t numel = 1;
    bool zero = false, overflow = false;
    for (int i = 0; i < e->ndim; i++)
        zero |= e->shape[i] == 0;
    for (int i = 0; i < e->ndim && !zero; i++) {
        if (numel > UINT64_MAX / (uint64_t)e->shape[i])
            overflow = true;
        numel *= (uint64_t)e->shape[i];
    }
    size_t esize = tide_dtype_size(st_dtypes[e->dt].dtype);
    if (zero)
        numel = 0;
    if (overflow || numel > UINT64_MAX / esize)
        return td_io_error(h->ctx, "tensor '%s' has shape %s of %s, whose size overflows 64 bits",
                           q, s, dname);
    if (zero && !td_io_strides_fit(e->ndim, e->shape))
        return td_io_error(h->ctx, "tensor '%s' has shape %s, whose sizes other than 0 multiply "
                           "past 2^62", q, s);
    uint64_t nbytes = numel * esize;
    if (e->end < e->begin)
        return td_io_error(h->ctx, "tensor '%s' data_offsets [%llu, %llu] end before they begin",
                           q, (unsigned long long)e->begin, (unsigned long long)e->end);
    if (e->end - e->begin != nbytes)
        return td_io_error(h->ctx, "tensor '%s' data_offsets [%llu, %llu] do not match shape %s "
                           "of %s (%llu bytes)", q, (unsigned long long)e->begin,
                           (unsigned long long)e->end, s, dname, (unsigned long long)nbytes);
    if (e->end > data_len)
        return td_io_error(h->ctx, "tensor '%s' data_offsets [%llu, %llu] lie outside the data "
                           "section (%llu bytes)", q, (unsigned long long)e->begin,
                           (unsigned long long)e->end, (unsigned long long)data_len);
    return 0;
}

static int cmp_offsets(const void *pa, const void *pb)
{
    const st_entry *a = *(st_entry *const *)pa, *b = *(st_entry *const *)pb;
    if (a->begin != b->begin)
        return a->begin < b->begin ? -1 : 1;
    if (a->end != b->end)
        return a->end < b->end ? -1 : 1;
    return a->order - b->order;
}

/* Sorted by offset, the tensors must cover [0, data_len) exactly, one after the other. */
static int check_tiling(st_header *h, st_entry **sorted, uint64_t data_len)
{
    uint64_t expected = 0;
    const st_entry *prev = NULL;
    for (int i = 0; i < h->count; i++) {
        const st_entry *e = sorted[i];
        char q[80], p[80];
        if (e->begin < expected)
            return td_io_error(h->ctx, "tensor '%s' data_offsets [%llu, %llu] overlap tensor '%s' "
                               "[%llu, %llu]", qname(q, sizeof q, e->name),
                               (unsigned long long)e->begin, (unsigned long long)e->end,
                               qname(p, sizeof p, prev->name), (unsigned long long)prev->begin,
                               (unsigned long long)prev->end);
        if (e->begin > expected)
            return td_io_error(h->ctx, "bytes [%llu, %llu) of the data section belong to no tensor "
                               "(the next one, '%s', starts at %llu)",
                               (unsigned long long)expected, (unsigned long long)e->begin,
                               qname(q, sizeof q, e->name), (unsigned long long)e->begin);
        expected = e->end;
        prev = e;
    }
    if (expected != data_len)
        return td_io_error(h->ctx, "the data section has %llu bytes but its tensors cover %llu "
                           "(trailing bytes)", (unsigned long long)data_len,
                           (unsigned long long)expected);
    return 0;
}

static tide_tensor_dict *dict_new(int count, int nmeta)
{
    tide_tensor_dict *d = td_calloc(1, sizeof *d);
    if (!d)
        return NULL;
    size_t nc = (size_t)(count ? count : 1), nm = (size_t)(nmeta ? nmeta : 1);
    d->names = td_calloc(nc, sizeof *d->names);
    d->tensors = td_calloc(nc, sizeof *d->tensors);
    d->meta_keys = td_calloc(nm, sizeof *d->meta_keys);
    d->meta_values = td_calloc(nm, sizeof *d->meta_values);
    if (!d->names || !d->tensors || !d->meta_keys || !d->meta_values) {
        tide_tensor_dict_free(d);
        return NULL;
    }
    return d;
}

/* Reads the tensors, in data order, into a new dict; takes the names and metadata from h. */
static tide_tensor_dict *read_tensors(st_header *h, FILE *f, st_entry **sorted)
{
    tide_tensor_dict *d = dict_new(h->count, h->nmeta);
    if (!d) {
        td_io_error(h->ctx, "out of memory");
        return NULL;
    }
    for (int i = 0; i < h->nmeta; i++) {
        d->meta_keys[i] = h->meta_keys[i];
        d->meta_values[i] = h->meta_values[i];
        h->meta_keys[i] = h->meta_values[i] = NULL;
        d->nmeta++;
    }
    for (int i = 0; i < h->count; i++) {
        st_entry *e = sorted[i];
        char q[80], what[120];
        qname(q, sizeof q, e->name);
        tide_tensor *t = tide_empty_on("cpu", e->ndim, e->shape, st_dtypes[e->dt].dtype);
        if (!t) {
            td_io_error(h->ctx, "tensor '%s': %s", q, tide_last_error());
            tide_tensor_dict_free(d);
            return NULL;
        }
        d->names[i] = e->name;
        d->tensors[i] = t;
        e->name = NULL;
        d->count++;
        size_t nbytes = (size_t)(e->end - e->begin);
        snprintf(what, sizeof what, "tensor '%s'", q);
        if (nbytes && td_io_read_exact(h->ctx, f, tide_mutable_data_ptr(t), nbytes, what) < 0) {
            tide_tensor_dict_free(d);
            return NULL;
        }
        if (st_dtypes[e->dt].dtype == TIDE_BOOL)
            td_io_normalize_bools(tide_mutable_data_ptr(t), nbytes);
    }
    return d;
}

tide_tensor_dict *tide_load_safetensors(const char *path)
{
    if (td_io_check_path("load_safetensors", path) < 0)
        return NULL;
    td_io_ctx ctx = {"load_safetensors", path};
    uint64_t size;
    FILE *f = td_io_open_read(&ctx, &size);
    if (!f)
        return NULL;
    tide_tensor_dict *d = NULL;
    char *text = NULL;
    st_header h = {.ctx = &ctx};
    st_entry **sorted = NULL;
    uint8_t len8[8];
    if (size < 8) {
        td_io_error(&ctx, "file has %llu bytes; a safetensors file starts with an 8-byte header "
                    "length", (unsigned long long)size);
        goto done;
    }
    if (td_io_read_exact(&ctx, f, len8, 8, "the header length") < 0)
        goto done;
    uint64_t n = 0;
    for (int i = 7; i >= 0; i--)
        n = n << 8 | len8[i];
    if (n > size - 8) {
        td_io_error(&ctx, "header length %llu is more than the %llu bytes after it in the file",
                    (unsigned long long)n, (unsigned long long)(size - 8));
        goto done;
    }
    if (n > ST_MAX_HEADER) {
        td_io_error(&ctx, "header length %llu is over the limit of %llu bytes",
                    (unsigned long long)n, ST_MAX_HEADER);
        goto done;
    }
    text = td_malloc((size_t)n + 1);
    if (!text) {
        td_io_error(&ctx, "out of memory for a header of %llu bytes", (unsigned long long)n);
        goto done;
    }
    if (td_io_read_exact(&ctx, f, text, (size_t)n, "the header") < 0)
        goto done;
    text[n] = 0;
    if (!td_io_utf8_valid(text, (size_t)n)) {
        td_io_error(&ctx, "header is not valid UTF-8");
        goto done;
    }
    h.j.s = text;
    h.j.n = (size_t)n;
    if (parse_header(&h) < 0 || check_duplicates(&h) < 0)
        goto done;
    uint64_t data_len = size - 8 - n;
    for (int i = 0; i < h.count; i++)
        if (check_entry(&h, &h.entries[i], data_len) < 0)
            goto done;
    sorted = td_malloc((size_t)(h.count ? h.count : 1) * sizeof *sorted);
    if (!sorted) {
        td_io_error(&ctx, "out of memory");
        goto done;
    }
    for (int i = 0; i < h.count; i++)
        sorted[i] = &h.entries[i];
    qsort(sorted, (size_t)h.count, sizeof *sorted, cmp_offsets);
    if (check_tiling(&h, sorted, data_len) < 0)
        goto done;
    d = read_tensors(&h, f, sorted);
done:
    free(sorted);
    header_free(&h);
    free(text);
    fclose(f);
    return d;
}

/* ---- writing ------------------------------------------------------------------------------ */

typedef struct st_item {
    const char *name;
    const tide_tensor *t;
    int dt; /* index into st_dtypes */
} st_item;

static int cmp_items(const void *pa, const void *pb)
{
    const st_item *a = pa, *b = pb;
    if (st_dtypes[a->dt].rank != st_dtypes[b->dt].rank)
        return st_dtypes[b->dt].rank - st_dtypes[a->dt].rank; /* larger alignment first */
    return strcmp(a->name, b->name);
}

static int check_string(const td_io_ctx *c, const char *s, const char *what, int i)
{
    if (!s)
        return td_io_error_code(c, TIDE_ERR_INVALID_ARGUMENT, "%s %d is NULL", what, i);
    if (!td_io_utf8_valid(s, strlen(s)))
        return td_io_error_code(c, TIDE_ERR_INVALID_ARGUMENT, "%s %d is not valid UTF-8", what,
                                    i);
    return 0;
}

static int check_save_args(const td_io_ctx *c, const char *const *names,
                           tide_tensor *const *tensors, int n, const char *const *metadata,
                           int nmetadata, st_item *items)
{
    for (int i = 0; i < n; i++) {
        if (check_string(c, names[i], "name", i) < 0)
            return -1;
        char q[80];
        qname(q, sizeof q, names[i]);
        if (strcmp(names[i], "__metadata__") == 0)
            return td_io_error_code(c, TIDE_ERR_INVALID_ARGUMENT,
                                    "name %d is \"__metadata__\", which the format reserves", i);
        if (!tensors[i])
            return td_io_error_code(c, TIDE_ERR_INVALID_ARGUMENT, "tensor %d ('%s') is NULL", i,
                                    q);
        items[i].name = names[i];
        items[i].t = tensors[i];
        items[i].dt = st_index_of(tide_get_dtype(tensors[i]));
        if (items[i].dt < 0)
            return td_io_error_code(c, TIDE_ERR_INVALID_ARGUMENT,
                                    "tensor %d ('%s') has an invalid dtype", i, q);
    }
    for (int i = 0; i < 2 * nmetadata; i++)
        if (check_string(c, metadata[i], i % 2 ? "metadata value" : "metadata key", i / 2) < 0)
            return -1;
    char **tmp = td_malloc((size_t)(n > nmetadata ? n : nmetadata) * sizeof *tmp + 1);
    if (!tmp)
        return td_io_error(c, "out of memory");
    bool oom;
    char q[80];
    for (int i = 0; i < n; i++)
        tmp[i] = (char *)names[i];
    const char *dup = find_duplicate(tmp, n, &oom);
    int rc = 0;
    if (dup)
        rc = td_io_error_code(c, TIDE_ERR_INVALID_ARGUMENT, "duplicate tensor name '%s'",
                              qname(q, sizeof q, dup));
    for (int i = 0; rc == 0 && i < nmetadata; i++)
        tmp[i] = (char *)metadata[2 * i];
    if (rc == 0 && (dup = find_duplicate(tmp, nmetadata, &oom)) != NULL)
        rc = td_io_error_code(c, TIDE_ERR_INVALID_ARGUMENT, "duplicate metadata key '%s'",
                              qname(q, sizeof q, dup));
    if (rc == 0 && oom)
        rc = td_io_error(c, "out of memory");
    free(tmp);
    return rc;
}

static void build_header(td_io_buf *b, const st_item *items, int n, const char *const *metadata,
                         int nmetadata)
{
    td_io_buf_str(b, "{");
    if (nmetadata > 0) {
        td_io_buf_str(b, "\"__metadata__\":{");
        for (int i = 0; i < nmetadata; i++) {
            if (i)
                td_io_buf_str(b, ",");
            td_json_write_string(b, metadata[2 * i], strlen(metadata[2 * i]));
            td_io_buf_str(b, ":");
            td_json_write_string(b, metadata[2 * i + 1], strlen(metadata[2 * i + 1]));
        }
        td_io_buf_str(b, n ? "}," : "}");
    }
    uint64_t offset = 0;
    for (int i = 0; i < n; i++) {
        const tide_tensor *t = items[i].t;
        if (i)
            td_io_buf_str(b, ",");
        td_json_write_string(b, items[i].name, strlen(items[i].name));
        td_io_buf_printf(b, ":{\"dtype\":\"%s\",\"shape\":[", st_dtypes[items[i].dt].name);
        for (int d = 0; d < tide_ndim(t); d++)
            td_io_buf_printf(b, "%s%lld", d ? "," : "", (long long)tide_size(t, d));
        uint64_t nbytes = (uint64_t)tide_numel(t) * tide_dtype_size(tide_get_dtype(t));
        td_io_buf_printf(b, "],\"data_offsets\":[%llu,%llu]}", (unsigned long long)offset,
                         (unsigned long long)(offset + nbytes));
        offset += nbytes;
    }
    td_io_buf_str(b, "}");
    while (b->len % 8)
        td_io_buf_str(b, " ");
}

int tide_save_safetensors(const char *path, const char *const *names, tide_tensor *const *tensors,
                          int n, const char *const *metadata, int nmetadata)
{
    if (td_io_check_path("save_safetensors", path) < 0)
        return -1;
    td_io_ctx ctx = {"save_safetensors", path};
    if (n < 0)
        return td_io_error_code(&ctx, TIDE_ERR_INVALID_ARGUMENT, "%d tensors requested", n);
    if (n > 0 && (!names || !tensors))
        return td_io_error_code(&ctx, TIDE_ERR_INVALID_ARGUMENT, "%s is NULL for %d tensors",
                                names ? "tensors" : "names", n);
    if (nmetadata < 0)
        return td_io_error_code(&ctx, TIDE_ERR_INVALID_ARGUMENT, "%d metadata entries requested",
                                nmetadata);
    if (nmetadata > 0 && !metadata)
        return td_io_error_code(&ctx, TIDE_ERR_INVALID_ARGUMENT, "metadata is NULL for %d entries",
                                nmetadata);
    st_item *items = td_malloc((size_t)(n ? n : 1) * sizeof *items);
    if (!items)
        return td_io_error(&ctx, "out of memory");
    td_io_buf header = {0};
    FILE *f = NULL;
    int rc = check_save_args(&ctx, names, tensors, n, metadata, nmetadata, items);
    if (rc < 0)
        goto done;
    qsort(items, (size_t)n, sizeof *items, cmp_items);
    build_header(&header, items, n, metadata, nmetadata);
    if (header.failed) {
        rc = td_io_error(&ctx, "out of memory building the header");
        goto done;
    }
    if (header.len > ST_MAX_HEADER) {
        rc = td_io_error(&ctx, "header of %zu bytes is over the format's limit of %llu bytes",
                         header.len, ST_MAX_HEADER);
        goto done;
    }
    uint8_t len8[8];
    for (int i = 0; i < 8; i++)
        len8[i] = (uint8_t)((uint64_t)header.len >> (8 * i));
    f = td_io_open_write(&ctx);
    if (!f) {
        rc = -1;
        goto done;
    }
    rc = td_io_write(&ctx, f, len8, 8);
    if (rc == 0)
        rc = td_io_write(&ctx, f, header.data, header.len);
    for (int i = 0; rc == 0 && i < n; i++)
        rc = td_io_write_tensor(&ctx, f, items[i].t);
    if (rc == 0)
        rc = td_io_close_write(&ctx, f);
    else
        fclose(f); /* the first failure is the one reported */
done:
    td_io_buf_free(&header);
    free(items);
    return rc;
}
