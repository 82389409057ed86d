/*
 * test_io.c — tensor files (io/): safetensors checkpoints, .npy and IDX datasets.
 *
 * Round trips over every dtype, shapes from 0-dim and empty to odd sizes, and every layout the
 * writers must make contiguous; byte-exact comparisons with what the reference writers produce
 * (safetensors' own test vectors, numpy.save's header worked out by hand); files written by
 * hand in the ways other writers may write them; one crafted bad file per rejection path, each
 * checked for NULL/-1 and for the words of the error; the real Fashion-MNIST files.
 */
#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>
#include <zlib.h>

#include "tide.h"
#include "test_util.h"
#include "test_ref.h"

#define NDT 6
static const tide_dtype DTYPES[NDT] = {TIDE_FLOAT32, TIDE_FLOAT64, TIDE_INT32,
                                       TIDE_INT64,   TIDE_UINT8,   TIDE_BOOL};

/* ---- files -------------------------------------------------------------------------------- */

static char tmpdir[64];

/* A path in the test's own temporary directory (rotating buffers, so a few can be live). */
static const char *tpath(const char *name)
{
    static char bufs[8][128];
    static int next;
    char *b = bufs[next++ & 7];
    snprintf(b, 128, "%s/%s", tmpdir, name);
    return b;
}

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n)) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
    fclose(f);
}

static unsigned char *read_file(const char *path, size_t *n)
{
    *n = 0;
    FILE *f = fopen(path, "rb");
    if (!f)
        return NULL;
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *p = malloc((size_t)len + 1);
    if (p && fread(p, 1, (size_t)len, f) == (size_t)len)
        *n = (size_t)len;
    fclose(f);
    return p;
}

/* A safetensors file from a header given as text (no padding added) and data bytes. */
static const char *write_st(const char *name, const char *header, const void *data, size_t ndata)
{
    size_t hl = strlen(header);
    unsigned char *buf = malloc(8 + hl + ndata + 1);
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)((uint64_t)hl >> (8 * i));
    memcpy(buf + 8, header, hl);
    if (ndata)
        memcpy(buf + 8 + hl, data, ndata);
    const char *path = tpath(name);
    write_file(path, buf, 8 + hl + ndata);
    free(buf);
    return path;
}

static void remove_tmpdir(void)
{
    DIR *d = opendir(tmpdir);
    struct dirent *e;
    while (d && (e = readdir(d)) != NULL) {
        if (e->d_name[0] == '.')
            continue;
        char p[400];
        snprintf(p, sizeof p, "%s/%s", tmpdir, e->d_name);
        if (rmdir(p) != 0)
            unlink(p);
    }
    if (d)
        closedir(d);
    rmdir(tmpdir);
}

static bool error_has(const char *a, const char *b, const char *c)
{
    const char *e = tide_last_error();
    return (!a || strstr(e, a)) && (!b || strstr(e, b)) && (!c || strstr(e, c));
}

/* NULL from the safetensors loader, and an error naming the function, the file and the fault. */
#define CHECK_ST_REJECTS(path, frag1, frag2)                                                       \
    do {                                                                                           \
        const char *p_ = (path);                                                                   \
        tide_tensor_dict *d_ = tide_load_safetensors(p_);                                          \
        CHECK(!d_ && error_has("load_safetensors: ", p_, frag1) && error_has(frag2, NULL, NULL),  \
              "%s: got %s, error \"%s\"", p_, d_ ? "a dict" : "NULL", tide_last_error());         \
        tide_tensor_dict_free(d_);                                                                 \
    } while (0)

#define CHECK_LOAD_REJECTS(fn, op, path, frag1, frag2)                                             \
    do {                                                                                           \
        const char *p_ = (path);                                                                   \
        tide_tensor *t_ = fn(p_);                                                                  \
        CHECK(!t_ && error_has(op ": ", p_, frag1) && error_has(frag2, NULL, NULL),               \
              "%s: got %s, error \"%s\"", p_, t_ ? "a tensor" : "NULL", tide_last_error());       \
        tide_release(t_);                                                                          \
    } while (0)

#define CHECK_FAILS(call, frag1, frag2)                                                            \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        CHECK(rc_ == -1 && error_has(frag1, frag2, NULL), "%s gave %d, error \"%s\"", #call, rc_, \
              tide_last_error());                                                                  \
    } while (0)

/* ---- safetensors: round trips ------------------------------------------------------------- */

static const struct {
    int ndim;
    int64_t shape[4];
} SHAPES[] = {{0, {0}}, {1, {0}}, {1, {1}}, {1, {7}}, {2, {3, 5}}, {3, {2, 0, 3}},
              {3, {2, 3, 4}}, {4, {2, 1, 3, 2}}, {2, {13, 11}}};
#define NSHAPES ((int)(sizeof SHAPES / sizeof SHAPES[0]))

/* The reference writer's order: dtype rank (I64, F64, F32, I32, U8, BOOL), then name. */
static int st_rank(tide_dtype dt)
{
    switch (dt) {
    case TIDE_INT64: return 0;
    case TIDE_FLOAT64: return 1;
    case TIDE_FLOAT32: return 2;
    case TIDE_INT32: return 3;
    case TIDE_UINT8: return 4;
    default: return 5;
    }
}

typedef struct rt_item {
    char name[32];
    tide_tensor *t;
    double *v;
    int ndim;
    int64_t shape[4];
    tide_dtype dt;
} rt_item;

static int cmp_rt(const void *pa, const void *pb)
{
    const rt_item *a = pa, *b = pb;
    if (st_rank(a->dt) != st_rank(b->dt))
        return st_rank(a->dt) - st_rank(b->dt);
    return strcmp(a->name, b->name);
}

static void test_safetensors_round_trip(void)
{
    /* One file per layout, holding every dtype x shape. */
    for (int layout = 0; layout < REF_NUM_LAYOUTS; layout++) {
        rt_item items[NDT * NSHAPES];
        const char *names[NDT * NSHAPES];
        tide_tensor *tensors[NDT * NSHAPES];
        int n = 0;
        ref_seed(100 + (uint64_t)layout);
        for (int d = 0; d < NDT; d++)
            for (int s = 0; s < NSHAPES; s++) {
                rt_item *it = &items[n];
                it->ndim = SHAPES[s].ndim;
                memcpy(it->shape, SHAPES[s].shape, sizeof it->shape);
                it->dt = DTYPES[d];
                /* Names out of order and of different lengths, so sorting is exercised. */
                snprintf(it->name, sizeof it->name, "%s.%d.w%d", ref_dtype_name(it->dt),
                         (s * 7) % NSHAPES, s);
                int64_t numel = ref_numel(it->ndim, it->shape);
                it->v = malloc((size_t)(numel > 0 ? numel : 1) * sizeof *it->v);
                ref_fill(it->v, numel, it->dt, 0);
                ref_prepare(layout, it->ndim, it->shape, it->v);
                it->t = ref_make(it->v, it->ndim, it->shape, it->dt, layout);
                names[n] = it->name;
                tensors[n] = it->t;
                n++;
            }
        const char *path = tpath("round_trip.safetensors");
        int rc = tide_save_safetensors(path, names, tensors, n, NULL, 0);
        CHECK(rc == 0, "save_safetensors (%s layout): %s", ref_layout_name(layout),
              tide_last_error());

        /* The header length is a multiple of 8, padded with spaces, and the file ends where
         * the data section says. */
        size_t fsize;
        unsigned char *bytes = read_file(path, &fsize);
        uint64_t hl = 0;
        for (int i = 7; bytes && fsize >= 8 && i >= 0; i--)
            hl = hl << 8 | bytes[i];
        CHECK(bytes && hl % 8 == 0 && hl + 8 <= fsize && bytes[8] == '{',
              "header length %llu of a %zu-byte file", (unsigned long long)hl, fsize);
        if (bytes && hl + 8 <= fsize) {
            size_t last = 8 + (size_t)hl - 1;
            while (bytes[last] == ' ')
                last--;
            CHECK(bytes[last] == '}' && 8 + hl - 1 - last < 8, "padding after the JSON");
        }
        free(bytes);

        tide_tensor_dict *dict = tide_load_safetensors(path);
        CHECK(dict != NULL, "load_safetensors (%s layout): %s", ref_layout_name(layout),
              tide_last_error());
        if (dict) {
            CHECK(tide_tensor_dict_count(dict) == n, "count %d, want %d",
                  tide_tensor_dict_count(dict), n);
            CHECK(tide_tensor_dict_metadata_count(dict) == 0, "no metadata");
            /* File order is the reference writer's order. */
            rt_item sorted[NDT * NSHAPES];
            memcpy(sorted, items, sizeof sorted);
            qsort(sorted, (size_t)n, sizeof sorted[0], cmp_rt);
            for (int i = 0; i < n && i < tide_tensor_dict_count(dict); i++) {
                const char *nm = tide_tensor_dict_name(dict, i);
                CHECK(nm && strcmp(nm, sorted[i].name) == 0, "entry %d is '%s', want '%s'", i,
                      nm ? nm : "(null)", sorted[i].name);
            }
            for (int i = 0; i < n; i++) {
                char desc[128];
                snprintf(desc, sizeof desc, "safetensors %s %s %s (%s)", items[i].name,
                         ref_dtype_name(items[i].dt), ref_shape_str(items[i].ndim, items[i].shape),
                         ref_layout_name(layout));
                tide_tensor *got = tide_tensor_dict_find(dict, items[i].name);
                ref_check_tensor(desc, got, items[i].dt, items[i].ndim, items[i].shape,
                                 items[i].v, 0);
                CHECK(!got || tide_is_contiguous(got), "%s: loaded tensor is contiguous", desc);
            }
            tide_tensor_dict_free(dict);
        }
        for (int i = 0; i < n; i++) {
            tide_release(items[i].t);
            free(items[i].v);
        }
    }
}

/* Floats keep their exact bits, NaN payloads, infinities and signed zeros included. */
static void test_safetensors_float_bits(void)
{
    const uint32_t f32[] = {0x7FC00001u, 0xFF800000u, 0x7F800000u, 0x80000000u, 0x00000001u,
                            0x3F800000u};
    const uint64_t f64[] = {0x7FF8000000000123ull, 0xFFF0000000000000ull, 0x8000000000000000ull,
                            0x0000000000000001ull};
    int64_t n32 = 6, n64 = 4;
    tide_tensor *a = tide_from_data(f32, 1, &n32, TIDE_FLOAT32);
    tide_tensor *b = tide_from_data(f64, 1, &n64, TIDE_FLOAT64);
    const char *names[] = {"f32", "f64"};
    tide_tensor *ts[] = {a, b};
    const char *path = tpath("bits.safetensors");
    CHECK(tide_save_safetensors(path, names, ts, 2, NULL, 0) == 0, "save: %s", tide_last_error());
    tide_tensor_dict *d = tide_load_safetensors(path);
    CHECK(d != NULL, "load: %s", tide_last_error());
    if (d) {
        tide_tensor *ga = tide_tensor_dict_find(d, "f32"), *gb = tide_tensor_dict_find(d, "f64");
        CHECK(ga && memcmp(tide_data_ptr(ga), f32, sizeof f32) == 0, "float32 bits kept");
        CHECK(gb && memcmp(tide_data_ptr(gb), f64, sizeof f64) == 0, "float64 bits kept");
        tide_tensor_dict_free(d);
    }
    path = tpath("bits.npy");
    CHECK(tide_save_npy(path, a) == 0, "save_npy: %s", tide_last_error());
    tide_tensor *g = tide_load_npy(path);
    CHECK(g && memcmp(tide_data_ptr(g), f32, sizeof f32) == 0, "npy float32 bits kept");
    tide_release(g);
    tide_release(a);
    tide_release(b);
}

/* The loaded dict holds its own references: releasing the caller's tensors, or retaining a
 * loaded one past the dict, is safe. */
static void test_safetensors_ownership(void)
{
    int64_t sh[1] = {3};
    tide_tensor *t = tide_arange(0, 3, 1, TIDE_INT64);
    const char *names[] = {"x"};
    const char *path = tpath("own.safetensors");
    CHECK(tide_save_safetensors(path, names, &t, 1, NULL, 0) == 0, "save: %s", tide_last_error());
    tide_release(t);
    tide_tensor_dict *d = tide_load_safetensors(path);
    tide_tensor *x = d ? tide_retain(tide_tensor_dict_find(d, "x")) : NULL;
    tide_tensor_dict_free(d);
    double want[3] = {0, 1, 2};
    ref_check_tensor("tensor kept past the dict", x, TIDE_INT64, 1, sh, want, 0);
    tide_release(x);
}

/* ---- safetensors: the reference library's bytes -------------------------------------------- */

static void check_bytes(const char *desc, const char *path, const void *want, size_t nwant)
{
    size_t n;
    unsigned char *got = read_file(path, &n);
    size_t at = 0;
    while (got && at < n && at < nwant && got[at] == ((const unsigned char *)want)[at])
        at++;
    CHECK(got && n == nwant && at == n, "%s: %zu bytes, want %zu; first difference at byte %zu",
          desc, n, nwant, at);
    free(got);
}

static const float SIX[6] = {0, 1, 2, 3, 4, 5};
/* The bytes of the float32 values 0..5, little-endian. */
#define SIX_BYTES                                                                                  \
    "\x00\x00\x00\x00\x00\x00\x80\x3f\x00\x00\x00\x40\x00\x00\x40\x40\x00\x00\x80\x40\x00\x00"     \
    "\xa0\x40"

static void test_safetensors_reference_bytes(void)
{
    /* safetensors' test_serialization: {"attn.0": F32 [1, 2, 3]}; a 64-byte header needs no
     * padding. */
    static const char attn[] = "\x40\0\0\0\0\0\0\0"
                               "{\"attn.0\":{\"dtype\":\"F32\",\"shape\":[1,2,3],"
                               "\"data_offsets\":[0,24]}}" SIX_BYTES;
    int64_t s123[3] = {1, 2, 3};
    tide_tensor *t = tide_from_data(SIX, 3, s123, TIDE_FLOAT32);
    const char *n1[] = {"attn.0"};
    const char *path = tpath("attn.safetensors");
    CHECK(tide_save_safetensors(path, n1, &t, 1, NULL, 0) == 0, "save: %s", tide_last_error());
    check_bytes("attn.0 as the reference writes it", path, attn, sizeof attn - 1);
    tide_release(t);

    /* test_serialization_forced_alignement: "attn0" [1, 1, 2, 3] gives a 65-byte header,
     * padded with 7 spaces to 72. */
    static const char attn0[] = "\x48\0\0\0\0\0\0\0"
                                "{\"attn0\":{\"dtype\":\"F32\",\"shape\":[1,1,2,3],"
                                "\"data_offsets\":[0,24]}}       " SIX_BYTES;
    int64_t s1123[4] = {1, 1, 2, 3};
    t = tide_from_data(SIX, 4, s1123, TIDE_FLOAT32);
    const char *n2[] = {"attn0"};
    path = tpath("attn0.safetensors");
    CHECK(tide_save_safetensors(path, n2, &t, 1, NULL, 0) == 0, "save: %s", tide_last_error());
    check_bytes("attn0 padded to 8 bytes", path, attn0, sizeof attn0 - 1);
    tide_release(t);
    /* Reading the reference's bytes back. */
    write_file(tpath("attn0_ref.safetensors"), attn0, sizeof attn0 - 1);
    tide_tensor_dict *d = tide_load_safetensors(tpath("attn0_ref.safetensors"));
    double six[6] = {0, 1, 2, 3, 4, 5};
    ref_check_tensor("reference attn0", d ? tide_tensor_dict_find(d, "attn0") : NULL,
                     TIDE_FLOAT32, 4, s1123, six, 0);
    tide_tensor_dict_free(d);

    /* test_empty: no tensors gives "{}" and 6 spaces; with metadata framework=pt, 35 bytes
     * and 5 spaces. */
    static const char empty[] = "\x08\0\0\0\0\0\0\0{}      ";
    path = tpath("empty.safetensors");
    CHECK(tide_save_safetensors(path, NULL, NULL, 0, NULL, 0) == 0, "save empty: %s",
          tide_last_error());
    check_bytes("empty file", path, empty, sizeof empty - 1);
    static const char meta[] = "\x28\0\0\0\0\0\0\0{\"__metadata__\":{\"framework\":\"pt\"}}     ";
    const char *kv[] = {"framework", "pt"};
    path = tpath("meta.safetensors");
    CHECK(tide_save_safetensors(path, NULL, NULL, 0, kv, 1) == 0, "save metadata: %s",
          tide_last_error());
    check_bytes("metadata only", path, meta, sizeof meta - 1);
    d = tide_load_safetensors(path);
    CHECK(d && tide_tensor_dict_count(d) == 0 && tide_tensor_dict_metadata_count(d) == 1 &&
              strcmp(tide_tensor_dict_metadata_key(d, 0), "framework") == 0 &&
              strcmp(tide_tensor_dict_metadata_value(d, 0), "pt") == 0,
          "metadata read back: %s", tide_last_error());
    tide_tensor_dict_free(d);
}

/* Six dtypes in one file, worked out by hand with the reference writer's rules: order I64,
 * F64, F32, I32, U8, BOOL (then by name), compact JSON with __metadata__ first, offsets
 * tiling the data, a 362-byte header padded with 6 spaces to 368 (0x170). */
static void test_safetensors_mixed_bytes(void)
{
    static const char want[] =
        "\x70\x01\0\0\0\0\0\0"
        "{\"__metadata__\":{\"format\":\"pt\"},"
        "\"z\":{\"dtype\":\"I64\",\"shape\":[1],\"data_offsets\":[0,8]},"
        "\"a\":{\"dtype\":\"F64\",\"shape\":[2],\"data_offsets\":[8,24]},"
        "\"f\":{\"dtype\":\"F32\",\"shape\":[2,1],\"data_offsets\":[24,32]},"
        "\"c\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[32,36]},"
        "\"b\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[36,39]},"
        "\"m\":{\"dtype\":\"BOOL\",\"shape\":[2,0],\"data_offsets\":[39,39]}}      "
        "\xff\xff\xff\xff\xff\xff\xff\xff"                                 /* z: -1 */
        "\x00\x00\x00\x00\x00\x00\xf8\x3f\x00\x00\x00\x00\x00\x00\x00\xc0" /* a: 1.5, -2 */
        "\x00\x00\x80\x3e\x00\x00\x40\x40"                                 /* f: 0.25, 3 */
        "\x07\x00\x00\x00"                                                 /* c: 7 */
        "\x01\x02\x03";                                                    /* b */
    int64_t s1 = 1, s2 = 2, s3 = 3, s21[2] = {2, 1}, s20[2] = {2, 0};
    const uint8_t bv[3] = {1, 2, 3};
    const double av[2] = {1.5, -2};
    const int32_t cv = 7;
    const int64_t zv = -1;
    const float fv[2] = {0.25f, 3};
    tide_tensor *b = tide_from_data(bv, 1, &s3, TIDE_UINT8);
    tide_tensor *a = tide_from_data(av, 1, &s2, TIDE_FLOAT64);
    tide_tensor *c = tide_from_data(&cv, 0, NULL, TIDE_INT32);
    tide_tensor *m = tide_zeros(2, s20, TIDE_BOOL);
    tide_tensor *z = tide_from_data(&zv, 1, &s1, TIDE_INT64);
    tide_tensor *f = tide_from_data(fv, 2, s21, TIDE_FLOAT32);
    const char *names[] = {"b", "a", "c", "m", "z", "f"};
    tide_tensor *ts[] = {b, a, c, m, z, f};
    const char *kv[] = {"format", "pt"};
    const char *path = tpath("mixed.safetensors");
    CHECK(tide_save_safetensors(path, names, ts, 6, kv, 1) == 0, "save mixed: %s",
          tide_last_error());
    check_bytes("six dtypes with metadata", path, want, sizeof want - 1);
    for (int i = 0; i < 6; i++)
        tide_release(ts[i]);

    tide_tensor_dict *d = tide_load_safetensors(path);
    CHECK(d != NULL, "load mixed: %s", tide_last_error());
    if (!d)
        return;
    static const char *order[] = {"z", "a", "f", "c", "b", "m"};
    for (int i = 0; i < 6 && i < tide_tensor_dict_count(d); i++)
        CHECK(strcmp(tide_tensor_dict_name(d, i), order[i]) == 0, "entry %d: %s", i,
              tide_tensor_dict_name(d, i));
    double w_a[2] = {1.5, -2}, w_b[3] = {1, 2, 3}, w_c[1] = {7}, w_z[1] = {-1}, w_f[2] = {0.25, 3};
    ref_check_tensor("mixed a", tide_tensor_dict_find(d, "a"), TIDE_FLOAT64, 1, &s2, w_a, 0);
    ref_check_tensor("mixed b", tide_tensor_dict_find(d, "b"), TIDE_UINT8, 1, &s3, w_b, 0);
    ref_check_tensor("mixed c", tide_tensor_dict_find(d, "c"), TIDE_INT32, 0, NULL, w_c, 0);
    ref_check_tensor("mixed m", tide_tensor_dict_find(d, "m"), TIDE_BOOL, 2, s20, NULL, 0);
    ref_check_tensor("mixed z", tide_tensor_dict_find(d, "z"), TIDE_INT64, 1, &s1, w_z, 0);
    ref_check_tensor("mixed f", tide_tensor_dict_find(d, "f"), TIDE_FLOAT32, 2, s21, w_f, 0);
    CHECK(tide_tensor_dict_metadata_find(d, "format") &&
              strcmp(tide_tensor_dict_metadata_find(d, "format"), "pt") == 0,
          "metadata format=pt");
    tide_tensor_dict_free(d);
}

/* Names and metadata with characters JSON must escape, written as serde_json writes them. */
static void test_safetensors_escapes(void)
{
    static const char want[] =
        "\x68\0\0\0\0\0\0\0"
        "{\"__metadata__\":{\"k\\\"\":\"tab\\there\\u0001\"},"
        "\"q\\\"\\\\\\n\xc3\xa9/\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,1]}}  "
        "\x05";
    const uint8_t five = 5;
    tide_tensor *t = tide_from_data(&five, 0, NULL, TIDE_UINT8);
    const char *names[] = {"q\"\\\n\xc3\xa9/"};
    const char *kv[] = {"k\"", "tab\there\x01"};
    /* The remaining short escapes and a byte that needs none (0x7f). */
    const char *kv2[] = {"\b\f\r\x1f\x7f", "v"};
    tide_tensor_dict *d2 = NULL;
    static const char want2[] = "\x28\0\0\0\0\0\0\0"
                                "{\"__metadata__\":{\"\\b\\f\\r\\u001f\x7f\":\"v\"}}  ";
    CHECK(tide_save_safetensors(tpath("esc2.safetensors"), NULL, NULL, 0, kv2, 1) == 0, "save: %s",
          tide_last_error());
    check_bytes("\\b \\f \\r \\u001f escapes", tpath("esc2.safetensors"), want2, sizeof want2 - 1);
    d2 = tide_load_safetensors(tpath("esc2.safetensors"));
    CHECK(d2 && strcmp(tide_tensor_dict_metadata_key(d2, 0), kv2[0]) == 0, "escapes read back");
    tide_tensor_dict_free(d2);
    const char *path = tpath("escapes.safetensors");
    CHECK(tide_save_safetensors(path, names, &t, 1, kv, 1) == 0, "save: %s", tide_last_error());
    check_bytes("escaped name and metadata", path, want, sizeof want - 1);
    tide_release(t);
    tide_tensor_dict *d = tide_load_safetensors(path);
    CHECK(d && strcmp(tide_tensor_dict_name(d, 0), names[0]) == 0 &&
              strcmp(tide_tensor_dict_metadata_value(d, 0), kv[1]) == 0,
          "escapes read back: %s", tide_last_error());
    tide_tensor_dict_free(d);
}

/* What other writers may produce and the format allows: any key order, whitespace, metadata
 * last, \u escapes and surrogate pairs, offsets in any header order, several empty tensors at
 * one offset. */
static void test_safetensors_reads_other_writers(void)
{
    static const char header[] =
        "{\n  \"b\" : {\"data_offsets\": [8, 12], \"shape\": [ 1 ], \"dtype\": \"I32\"},\r\n"
        "\t\"\\u00e9\\u20ac\\ud83d\\ude00\": {\"shape\": [2], \"dtype\": \"F32\", "
        "\"data_offsets\": [0, 8]},"
        " \"e1\": {\"dtype\": \"F64\", \"shape\": [0, 4], \"data_offsets\": [12, 12]},"
        " \"e0\": {\"dtype\": \"BOOL\", \"shape\": [0], \"data_offsets\": [12, 12]},"
        " \"flag\": {\"dtype\": \"BOOL\", \"shape\": [3], \"data_offsets\": [12, 15]},"
        " \"__metadata__\": {\"a\\/b\": \"\\u0041\\n\"} }  \n ";
    static const unsigned char data[15] = {0, 0, 0x20, 0x41, 0, 0, 0xa0, 0xc0, /* 10, -5 */
                                           0xfe, 0xff, 0xff, 0xff,             /* -2 */
                                           0, 2, 255};                         /* bools */
    const char *path = write_st("other.safetensors", header, data, sizeof data);
    tide_tensor_dict *d = tide_load_safetensors(path);
    CHECK(d != NULL, "load hand-written file: %s", tide_last_error());
    if (!d)
        return;
    CHECK(tide_tensor_dict_count(d) == 5, "5 tensors, got %d", tide_tensor_dict_count(d));
    static const char *order[] = {"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80", "b", "e1", "e0",
                                  "flag"};
    for (int i = 0; i < 5 && i < tide_tensor_dict_count(d); i++)
        CHECK(strcmp(tide_tensor_dict_name(d, i), order[i]) == 0, "entry %d is '%s'", i,
              tide_tensor_dict_name(d, i));
    int64_t s2 = 2, s1 = 1, s04[2] = {0, 4}, s0 = 0, s3 = 3;
    double w0[2] = {10, -5}, w1[1] = {-2}, wflag[3] = {0, 1, 1};
    ref_check_tensor("utf-8 name", tide_tensor_dict_find(d, order[0]), TIDE_FLOAT32, 1, &s2, w0,
                     0);
    ref_check_tensor("b", tide_tensor_dict_find(d, "b"), TIDE_INT32, 1, &s1, w1, 0);
    ref_check_tensor("e1", tide_tensor_dict_find(d, "e1"), TIDE_FLOAT64, 2, s04, NULL, 0);
    ref_check_tensor("e0", tide_tensor_dict_find(d, "e0"), TIDE_BOOL, 1, &s0, NULL, 0);
    tide_tensor *flag = tide_tensor_dict_find(d, "flag");
    ref_check_tensor("flag", flag, TIDE_BOOL, 1, &s3, wflag, 0);
    CHECK(flag && ((const uint8_t *)tide_data_ptr(flag))[1] == 1 &&
              ((const uint8_t *)tide_data_ptr(flag))[2] == 1,
          "bools stored as 2 and 255 read as 1");
    CHECK(tide_tensor_dict_metadata_count(d) == 1 &&
              strcmp(tide_tensor_dict_metadata_key(d, 0), "a/b") == 0 &&
              strcmp(tide_tensor_dict_metadata_value(d, 0), "A\n") == 0,
          "metadata with escapes");
    tide_tensor_dict_free(d);
}

/* ---- safetensors: rejections --------------------------------------------------------------- */

static void test_safetensors_rejects_headers(void)
{
    static const unsigned char f8[4] = {0};
    /* Header JSON that is not valid, each with the words that explain it. */
    static const struct {
        const char *header, *frag;
    } bad[] = {
        {"[]", "does not start with '{'"},
        {" {}", "does not start with '{'"},
        {"{", "unterminated object"},
        {"{\"a\" {}}", "expected ':'"},
        {"{\"a\":{\"dtype\":\"F32\",}}", "trailing comma"},
        {"{\"a\":{\"dtype\":\"F32\" \"shape\":[]}}", "expected ',' or '}'"},
        {"{\"a:{}}", "unterminated string"},
        {"{\"a\\x\":{}}", "invalid escape '\\x'"},
        {"{\"a\\ud800\":{}}", "high surrogate"},
        {"{\"a\\udc00\":{}}", "lone low surrogate"},
        {"{\"a\\u12G4\":{}}", "invalid hex digit"},
        {"{\"a\\u0000\":{}}", "NUL character"},
        {"{\"a\tb\":{}}", "control character 0x09"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[01],\"data_offsets\":[0,4]}}", "leading zero"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1.0],\"data_offsets\":[0,4]}}", "not an integer"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1e0],\"data_offsets\":[0,4]}}", "not an integer"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[-1],\"data_offsets\":[0,4]}}", "negative number -1"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1.],\"data_offsets\":[0,4]}}", "no digits after"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1e],\"data_offsets\":[0,4]}}",
         "no digits in the exp"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[18446744073709551616],\"data_offsets\":[0,4]}}",
         "too large"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[9223372036854775808],\"data_offsets\":[0,4]}}",
         "size 9223372036854775808 in dim 0 is too large"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[true],\"data_offsets\":[0,4]}}",
         "expected a non-negative integer, found a boolean"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}} x", "trailing bytes"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}}", "trailing bytes"},
        {"{\"a\":{\"dtype\":\"I16\",\"shape\":[2],\"data_offsets\":[0,4]}}",
         "tensor 'a' has unsupported dtype I16"},
        {"{\"a\":{\"dtype\":\"U16\",\"shape\":[2],\"data_offsets\":[0,4]}}",
         "unsupported dtype U16"},
        {"{\"a\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,4]}}",
         "data_offsets [0, 4] do not match shape [3] of BF16 (6 bytes)"},
        {"{\"a\":{\"dtype\":\"Q4\",\"shape\":[2],\"data_offsets\":[0,4]}}", "unknown dtype 'Q4'"},
        {"{\"a\":{\"dtype\":32,\"shape\":[],\"data_offsets\":[0,4]}}",
         "expected a string, found a number"},
        {"{\"a\":{\"shape\":[],\"data_offsets\":[0,4]}}", "tensor 'a' lacks its dtype"},
        {"{\"a\":{\"dtype\":\"F32\",\"data_offsets\":[0,4]}}", "lacks its shape"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[]}}", "lacks its data_offsets"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4],\"x\":1}}",
         "unknown field 'x'"},
        {"{\"a\":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}",
         "field 'dtype' twice"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"shape\":[],\"data_offsets\":[0,4]}}",
         "field 'shape' twice"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]},\"a\":{\"dtype\":\"F32\","
         "\"shape\":[],\"data_offsets\":[0,4]}}", "duplicate tensor name 'a'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0]}}", "expected ','"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4,8]}}", "expected ']'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,4]}}",
         "more than 8 dims"},
        {"{\"a\":[]}", "tensor 'a': expected '{', found an array"},
        {"{\"__metadata__\":{\"k\":1},\"a\":{\"dtype\":\"F32\",\"shape\":[],"
         "\"data_offsets\":[0,4]}}",
         "metadata value of 'k' is a number"},
        {"{\"__metadata__\":{},\"__metadata__\":{}}", "__metadata__ twice"},
        {"{\"__metadata__\":{\"k\":\"1\",\"k\":\"2\"}}", "duplicate metadata key 'k'"},
        {"{\"__metadata__\":[]}", "__metadata__: expected '{'"},
        {"{\"__metadata__\":{1:\"v\"}}", "__metadata__: expected a string, found a number"},
        {"{\"__metadata__\":{\"k\" \"v\"}}", "__metadata__: expected ':'"},
        {"{\"__metadata__\":{\"k\":\"v\"", "__metadata__: expected ',' or '}', found the end"},
        {"{\"__metadata__\":{\"k\":\"v}}", "__metadata__: unterminated string"},
        {"{\"__metadata__\":{\"k\":null}}", "metadata value of 'k' is null"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":null,\"data_offsets\":[0,4]}}",
         "tensor 'a': shape: expected '[', found null"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1,],\"data_offsets\":[0,4]}}",
         "tensor 'a': shape: trailing comma"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[1:],\"data_offsets\":[0,4]}}",
         "expected ',' or ']', found ':'"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,0]}:",
         "expected ',' or '}', found ':'"},
        {"{\"a\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[0,0]}",
         "found the end of the header"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[}]}", "found '}'"},
        {"{\"a\":{\"dtype\":\"F32\",\"shape\":[#]}}", "found an invalid character"},
        {"{\"a\":{1:2}}", "tensor 'a': expected a string, found a number"},
        {"{\"a\":{\"dtype\" \"F32\"}}", "tensor 'a': expected ':'"},
        {"{\"a\x01\":{}}", "control character 0x01"},
        {"{\"a\\\x01\":{}}", "backslash before byte 0x01"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *p = write_st("bad_header.safetensors", bad[i].header, f8, 4);
        CHECK_ST_REJECTS(p, bad[i].frag, NULL);
    }
    /* A NUL after the JSON, which a C string reader would stop at. */
    static const char nul_after[] =
        "{\"a\":{\"dtype\":\"F32\",\"shape\":[],\"data_offsets\":[0,4]}}";
    unsigned char buf[128] = {(unsigned char)sizeof nul_after};
    memcpy(buf + 8, nul_after, sizeof nul_after);
    memcpy(buf + 8 + sizeof nul_after, f8, 4);
    write_file(tpath("nul_after.safetensors"), buf, 8 + sizeof nul_after + 4);
    CHECK_ST_REJECTS(tpath("nul_after.safetensors"), "trailing bytes", NULL);
    /* A long name is cut short in messages, not the message's other words. */
    char longh[600];
    char longname[301];
    memset(longname, 'n', 300);
    longname[300] = 0;
    snprintf(longh, sizeof longh, "{\"%s\":{\"dtype\":\"X\",\"shape\":[],\"data_offsets\":[0,0]}}",
             longname);
    CHECK_ST_REJECTS(write_st("long_name.safetensors", longh, NULL, 0),
                     "nnn...' has unknown dtype 'X'", NULL);
    /* Invalid UTF-8 anywhere in the header. */
    CHECK_ST_REJECTS(write_st("utf8.safetensors", "{\"\xc3\x28\":{}}", NULL, 0), "not valid UTF-8",
                     NULL);
    CHECK_ST_REJECTS(write_st("utf8b.safetensors", "{\"\xed\xa0\x80\":{}}", NULL, 0),
                     "not valid UTF-8", NULL);
    CHECK_ST_REJECTS(write_st("utf8c.safetensors", "{\"\xc0\xaf\":{}}", NULL, 0), "not valid UTF-8",
                     NULL);
    CHECK_ST_REJECTS(write_st("empty_header.safetensors", "", NULL, 0), "does not start with '{'",
                     NULL);
}

static void test_safetensors_rejects_sizes(void)
{
    unsigned char data[800] = {0};
    const char *p;
    /* The message the issue gives as the example. */
    p = write_st("mismatch.safetensors",
                 "{\"w\":{\"dtype\":\"F32\",\"shape\":[10,20],\"data_offsets\":[0,400]}}", data,
                 400);
    CHECK_ST_REJECTS(p, "tensor 'w' data_offsets [0, 400] do not match shape [10, 20] of F32 (800 "
                     "bytes)", NULL);
    p = write_st("reversed.safetensors",
                 "{\"w\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[8,4]}}", data, 8);
    CHECK_ST_REJECTS(p, "data_offsets [8, 4] end before they begin", NULL);
    p = write_st("outside.safetensors",
                 "{\"w\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[4,12]}}", data, 8);
    CHECK_ST_REJECTS(p, "lie outside the data section (8 bytes)", NULL);
    /* A file cut short inside its data: the same check, against the real size. */
    p = write_st("truncated.safetensors",
                 "{\"w\":{\"dtype\":\"F64\",\"shape\":[100],\"data_offsets\":[0,800]}}", data, 799);
    CHECK_ST_REJECTS(p, "outside the data section (799 bytes)", NULL);
    p = write_st("overlap.safetensors",
                 "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                 "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}", data, 6);
    CHECK_ST_REJECTS(p, "tensor 'b' data_offsets [2, 6] overlap tensor 'a' [0, 4]", NULL);
    p = write_st("same.safetensors",
                 "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                 "\"b\":{\"dtype\":\"I32\",\"shape\":[],\"data_offsets\":[0,4]}}", data, 4);
    CHECK_ST_REJECTS(p, "overlap", NULL);
    p = write_st("gap.safetensors",
                 "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]},"
                 "\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[6,10]}}", data, 10);
    CHECK_ST_REJECTS(p, "bytes [4, 6) of the data section belong to no tensor", NULL);
    p = write_st("lead_gap.safetensors",
                 "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[2,6]}}", data, 6);
    CHECK_ST_REJECTS(p, "bytes [0, 2) of the data section belong to no tensor", NULL);
    p = write_st("trailing.safetensors",
                 "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[0,4]}}", data, 9);
    CHECK_ST_REJECTS(p, "data section has 9 bytes but its tensors cover 4", NULL);
    p = write_st("trailing_empty.safetensors", "{}", data, 1);
    CHECK_ST_REJECTS(p, "data section has 1 bytes but its tensors cover 0", NULL);
    /* Shapes whose byte size overflows, with offsets that look harmless. */
    p = write_st("overflow.safetensors",
                 "{\"a\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296],"
                 "\"data_offsets\":[0,0]}}",
                 NULL, 0);
    CHECK_ST_REJECTS(p, "shape [4294967296, 4294967296] of U8, whose size overflows", NULL);
    p = write_st("overflow8.safetensors",
                 "{\"a\":{\"dtype\":\"F64\",\"shape\":[2305843009213693952],"
                 "\"data_offsets\":[0,0]}}",
                 NULL, 0);
    CHECK_ST_REJECTS(p, "overflows 64 bits", NULL);
    /* Offsets near 2^64, which must not wrap in any sum. */
    p = write_st("huge_offsets.safetensors",
                 "{\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[18446744073709551612,"
                 "18446744073709551615]}}", data, 4);
    CHECK_ST_REJECTS(p, "do not match", NULL);
    p = write_st("huge_offsets2.safetensors",
                 "{\"a\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[18446744073709551612,"
                 "18446744073709551615]}}", data, 4);
    CHECK_ST_REJECTS(p, "outside the data section", NULL);
    /* Empty tensors may have big sizes beside the 0, within core's bound on the product of
     * the non-zero sizes (2^47 bytes). */
    p = write_st("zero_dim_big.safetensors",
                 "{\"a\":{\"dtype\":\"F32\",\"shape\":[0,1073741824],"
                 "\"data_offsets\":[0,0]}}", NULL, 0);
    tide_tensor_dict *d = tide_load_safetensors(p);
    CHECK(d && tide_numel(tide_tensor_dict_tensor(d, 0)) == 0, "empty tensor with a big dim: %s",
          tide_last_error());
    tide_tensor_dict_free(d);
    /* The other sizes of an empty tensor still set its strides, so core bounds them too. */
    p = write_st("zero_dim_huge.safetensors",
                 "{\"a\":{\"dtype\":\"F32\",\"shape\":[0,4611686018427387904],"
                 "\"data_offsets\":[0,0]}}", NULL, 0);
    CHECK_ST_REJECTS(p, "too large", NULL);
    p = write_st("zero_dim_strides.safetensors",
                 "{\"a\":{\"dtype\":\"U8\",\"shape\":[1099511627776,1099511627776,0],"
                 "\"data_offsets\":[0,0]}}", NULL, 0);
    CHECK_ST_REJECTS(p, "whose sizes other than 0 multiply past 2^62", NULL);
}

static void test_safetensors_rejects_files(void)
{
    const char *p;
    CHECK_ST_REJECTS(tpath("missing.safetensors"), "cannot open", "No such file");
    CHECK_ST_REJECTS(tmpdir, "not a regular file", NULL);
    write_file(p = tpath("short.safetensors"), "\x02\0\0\0", 4);
    CHECK_ST_REJECTS(p, "file has 4 bytes", NULL);
    write_file(p = tpath("zero.safetensors"), "", 0);
    CHECK_ST_REJECTS(p, "file has 0 bytes", NULL);
    /* Header lengths that lie: past the end of the file, and absurdly large. */
    write_file(p = tpath("long_header.safetensors"), "\x10\0\0\0\0\0\0\0{}", 10);
    CHECK_ST_REJECTS(p, "header length 16 is more than the 2 bytes after it", NULL);
    write_file(p = tpath("huge_header.safetensors"), "\xff\xff\xff\xff\xff\xff\xff\x7f{}", 10);
    CHECK_ST_REJECTS(p, "header length 9223372036854775807 is more than", NULL);
    write_file(p = tpath("max_header.safetensors"), "\xff\xff\xff\xff\xff\xff\xff\xff{}", 10);
    CHECK_ST_REJECTS(p, "header length 18446744073709551615 is more than", NULL);
    /* Over the reference's 100 MB limit in a file big enough to hold it (sparse: no disk). */
    p = tpath("limit.safetensors");
    write_file(p, "\x01\xe1\xf5\x05\0\0\0\0{", 9); /* 100000001 */
    CHECK(truncate(p, 100000100) == 0, "truncate");
    CHECK_ST_REJECTS(p, "header length 100000001 is over the limit of 100000000 bytes", NULL);
    unlink(p);
    /* Arguments. */
    tide_tensor_dict *d = tide_load_safetensors(NULL);
    CHECK(!d && error_has("load_safetensors: path is NULL", NULL, NULL), "NULL path: %s",
          tide_last_error());
    d = tide_load_safetensors("");
    CHECK(!d && error_has("load_safetensors: path is empty", NULL, NULL), "empty path: %s",
          tide_last_error());
}

static void test_safetensors_save_errors(void)
{
    int64_t s2 = 2;
    tide_tensor *t = tide_ones(1, &s2, TIDE_FLOAT32);
    tide_tensor *ts[2] = {t, t};
    const char *p = tpath("save_err.safetensors");
    const char *names_ok[2] = {"a", "b"};
    CHECK_FAILS(tide_save_safetensors(NULL, names_ok, ts, 1, NULL, 0),
                "save_safetensors: path is NULL", NULL);
    CHECK_FAILS(tide_save_safetensors("", names_ok, ts, 1, NULL, 0), "path is empty", NULL);
    CHECK_FAILS(tide_save_safetensors(p, names_ok, ts, -1, NULL, 0), "-1 tensors", NULL);
    CHECK_FAILS(tide_save_safetensors(p, NULL, ts, 1, NULL, 0), "names is NULL", NULL);
    CHECK_FAILS(tide_save_safetensors(p, names_ok, NULL, 1, NULL, 0), "tensors is NULL", NULL);
    const char *names_null[2] = {"a", NULL};
    CHECK_FAILS(tide_save_safetensors(p, names_null, ts, 2, NULL, 0), "name 1 is NULL", NULL);
    const char *names_dup[2] = {"a", "a"};
    CHECK_FAILS(tide_save_safetensors(p, names_dup, ts, 2, NULL, 0), "duplicate tensor name 'a'",
                NULL);
    const char *names_meta[1] = {"__metadata__"};
    CHECK_FAILS(tide_save_safetensors(p, names_meta, ts, 1, NULL, 0), "reserves", NULL);
    const char *names_utf8[1] = {"\xff"};
    CHECK_FAILS(tide_save_safetensors(p, names_utf8, ts, 1, NULL, 0), "name 0 is not valid UTF-8",
                NULL);
    tide_tensor *ts_null[2] = {t, NULL};
    CHECK_FAILS(tide_save_safetensors(p, names_ok, ts_null, 2, NULL, 0),
                "tensor 1 ('b') is NULL", NULL);
    CHECK_FAILS(tide_save_safetensors(p, names_ok, ts, 1, NULL, -2), "-2 metadata entries", NULL);
    CHECK_FAILS(tide_save_safetensors(p, names_ok, ts, 1, NULL, 1), "metadata is NULL", NULL);
    const char *kv_null[2] = {"k", NULL};
    CHECK_FAILS(tide_save_safetensors(p, names_ok, ts, 1, kv_null, 1), "metadata value 0 is NULL",
                NULL);
    const char *kv_dup[4] = {"k", "1", "k", "2"};
    CHECK_FAILS(tide_save_safetensors(p, names_ok, ts, 1, kv_dup, 2), "duplicate metadata key 'k'",
                NULL);
    const char *kv_utf8[2] = {"k", "\xc3"};
    CHECK_FAILS(tide_save_safetensors(p, names_ok, ts, 1, kv_utf8, 1),
                "metadata value 0 is not valid UTF-8", NULL);
    CHECK_FAILS(tide_save_safetensors(tpath("no/such/dir.safetensors"), names_ok, ts, 1, NULL, 0),
                "cannot open for writing", "No such file");
    /* A full disk shows up at the write or the close. */
    if (access("/dev/full", W_OK) == 0)
        CHECK_FAILS(tide_save_safetensors("/dev/full", names_ok, ts, 2, NULL, 0),
                    "save_safetensors: /dev/full: write failed", "No space left");
    tide_release(t);
}

static void test_tensor_dict_accessors(void)
{
    int64_t s1 = 1;
    tide_tensor *t = tide_zeros(1, &s1, TIDE_INT32);
    const char *names[] = {"only"};
    const char *p = tpath("dict.safetensors");
    CHECK(tide_save_safetensors(p, names, &t, 1, NULL, 0) == 0, "save: %s", tide_last_error());
    tide_release(t);
    tide_tensor_dict *d = tide_load_safetensors(p);
    CHECK(d != NULL, "load: %s", tide_last_error());
    CHECK_ERROR(tide_retain(tide_tensor_dict_tensor(d, 1)), "tensor_dict_tensor: index 1 out of "
                "range for 1 entries");
    CHECK_ERROR(tide_retain(tide_tensor_dict_tensor(d, -1)), "index -1 out of range");
    CHECK_ERROR(tide_retain(tide_tensor_dict_tensor(NULL, 0)), "tensor_dict_tensor: dict is NULL");
    CHECK_ERROR(tide_retain(tide_tensor_dict_find(d, "other")), "no tensor named 'other'");
    CHECK_ERROR(tide_retain(tide_tensor_dict_find(d, NULL)), "tensor_dict_find: name is NULL");
    CHECK(tide_tensor_dict_name(d, 5) == NULL && error_has("tensor_dict_name: index 5", NULL, NULL),
          "name out of range: %s", tide_last_error());
    CHECK(tide_tensor_dict_metadata_key(d, 0) == NULL &&
              error_has("metadata_key: index 0 out of range for 0", NULL, NULL),
          "metadata key out of range: %s", tide_last_error());
    CHECK(tide_tensor_dict_metadata_value(NULL, 0) == NULL &&
              error_has("tensor_dict_metadata_value: dict is NULL", NULL, NULL),
          "metadata value of NULL");
    CHECK(tide_tensor_dict_metadata_find(d, NULL) == NULL &&
              error_has("tensor_dict_metadata_find: key is NULL", NULL, NULL),
          "metadata_find with NULL key");
    CHECK(tide_tensor_dict_metadata_find(d, "x") == NULL &&
              error_has("no metadata key 'x'", NULL, NULL),
          "missing metadata key: %s", tide_last_error());
    CHECK(tide_tensor_dict_count(NULL) == 0 && tide_tensor_dict_metadata_count(NULL) == 0,
          "counts of NULL");
    tide_tensor_dict_free(d);
    tide_tensor_dict_free(NULL);
}

/* ---- npy ---------------------------------------------------------------------------------- */

static void test_npy_round_trip(void)
{
    for (int layout = 0; layout < REF_NUM_LAYOUTS; layout++)
        for (int d = 0; d < NDT; d++)
            for (int s = 0; s < NSHAPES; s++) {
                int ndim = SHAPES[s].ndim;
                const int64_t *shape = SHAPES[s].shape;
                tide_dtype dt = DTYPES[d];
                int64_t numel = ref_numel(ndim, shape);
                double *v = malloc((size_t)(numel > 0 ? numel : 1) * sizeof *v);
                ref_seed(7 + (uint64_t)(layout * 100 + d * 10 + s));
                ref_fill(v, numel, dt, 0);
                ref_prepare(layout, ndim, shape, v);
                tide_tensor *t = ref_make(v, ndim, shape, dt, layout);
                const char *p = tpath("rt.npy");
                char desc[128];
                snprintf(desc, sizeof desc, "npy %s %s (%s)", ref_dtype_name(dt),
                         ref_shape_str(ndim, shape), ref_layout_name(layout));
                CHECK(tide_save_npy(p, t) == 0, "%s: save: %s", desc, tide_last_error());
                size_t n;
                unsigned char *bytes = read_file(p, &n);
                size_t esize = ref_dtype_size(dt);
                CHECK(bytes && n >= 128 && (n - (size_t)numel * esize) % 64 == 0 &&
                          bytes[6] == 1 && bytes[7] == 0,
                      "%s: version 1.0, data 64-byte aligned (file of %zu bytes)", desc, n);
                free(bytes);
                tide_tensor *g = tide_load_npy(p);
                ref_check_tensor(desc, g, dt, ndim, shape, v, 0);
                tide_release(g);
                tide_release(t);
                free(v);
            }
}

/* numpy.save's bytes, worked out from numpy/lib/format.py: the dict repr with sorted keys and a
 * trailing ", ", then 21 - len(repr(shape[0])) spaces (none for 0-dim), then spaces and "\n"
 * so that 10 + header length is a multiple of 64. For (2, 3): 59 + 20 + 1 = 80 bytes, 38 spaces
 * of padding, header length 118 (0x76), data at 128. */
static void test_npy_reference_bytes(void)
{
    static const char want23[] =
        "\x93NUMPY\x01\x00\x76\x00"
        "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }"
        "                    "                   /* 20 spare spaces */
        "                                      " /* 38 spaces of padding */
        "\n" SIX_BYTES;
    int64_t s23[2] = {2, 3};
    tide_tensor *t = tide_from_data(SIX, 2, s23, TIDE_FLOAT32);
    const char *p = tpath("ref23.npy");
    CHECK(tide_save_npy(p, t) == 0, "save: %s", tide_last_error());
    check_bytes("float32 (2, 3) as numpy.save writes it", p, want23, sizeof want23 - 1);
    tide_release(t);

    /* 0-dim float64: "()" and no spare spaces; 55 + 1 + 62 = 118. */
    static const char want0[] = "\x93NUMPY\x01\x00\x76\x00"
                                "{'descr': '<f8', 'fortran_order': False, 'shape': (), }"
                                "                                                              "
                                "\n"
                                "\x00\x00\x00\x00\x00\x00\x04\xc0"; /* -2.5 */
    t = tide_scalar(-2.5, TIDE_FLOAT64);
    p = tpath("ref0.npy");
    CHECK(tide_save_npy(p, t) == 0, "save: %s", tide_last_error());
    check_bytes("0-dim float64", p, want0, sizeof want0 - 1);
    tide_release(t);

    /* 1-dim bool: "(5,)" and 20 spare spaces; 57 + 20 + 1 + 40 = 118. */
    static const char want5[] = "\x93NUMPY\x01\x00\x76\x00"
                                "{'descr': '|b1', 'fortran_order': False, 'shape': (5,), }"
                                "                    "
                                "                                        "
                                "\n"
                                "\x01\x00\x00\x01\x01";
    const uint8_t bv[5] = {1, 0, 0, 1, 1};
    int64_t s5 = 5;
    t = tide_from_data(bv, 1, &s5, TIDE_BOOL);
    p = tpath("ref5.npy");
    CHECK(tide_save_npy(p, t) == 0, "save: %s", tide_last_error());
    check_bytes("bool (5,)", p, want5, sizeof want5 - 1);
    tide_release(t);

    /* int64 and int32 and uint8 descr strings. */
    static const struct {
        tide_dtype dt;
        const char *descr;
    } descrs[] = {{TIDE_INT64, "'<i8'"}, {TIDE_INT32, "'<i4'"}, {TIDE_UINT8, "'|u1'"},
                  {TIDE_FLOAT64, "'<f8'"}};
    for (int i = 0; i < 4; i++) {
        int64_t s0 = 0;
        t = tide_empty(1, &s0, descrs[i].dt);
        p = tpath("descr.npy");
        CHECK(tide_save_npy(p, t) == 0, "save: %s", tide_last_error());
        size_t n;
        unsigned char *b = read_file(p, &n);
        CHECK(b && n == 128 && memcmp(b + 10 + 10, descrs[i].descr, 5) == 0 &&
                  memcmp(b + 10 + 50, "(0,), }", 7) == 0 && b[127] == '\n',
              "descr %s of an empty tensor", descrs[i].descr);
        free(b);
        tide_release(t);
    }
}

/* An .npy file from a version, a header dict and data; padding as numpy writes it. */
static const char *write_npy(const char *name, int major, const char *dict, const void *data,
                             size_t ndata)
{
    size_t lenbytes = major == 1 ? 2 : 4, dl = strlen(dict);
    size_t hlen = dl + 1, pad = 64 - (8 + lenbytes + hlen) % 64;
    size_t total = 8 + lenbytes + hlen + pad + ndata;
    unsigned char *b = malloc(total);
    memcpy(b, "\x93NUMPY", 6);
    b[6] = (unsigned char)major;
    b[7] = 0;
    size_t field = hlen + pad;
    for (size_t i = 0; i < lenbytes; i++)
        b[8 + i] = (unsigned char)(field >> (8 * i));
    memcpy(b + 8 + lenbytes, dict, dl);
    memset(b + 8 + lenbytes + dl, ' ', pad);
    b[8 + lenbytes + dl + pad] = '\n';
    if (ndata)
        memcpy(b + total - ndata, data, ndata);
    const char *p = tpath(name);
    write_file(p, b, total);
    free(b);
    return p;
}

static void test_npy_reads_other_writers(void)
{
    /* Version 2.0 and 3.0, big-endian data, key order, double quotes, no trailing comma,
     * Python 2's long suffix, '=' native order, '<u1'. */
    static const unsigned char be_i4[8] = {0, 0, 1, 2, 0xff, 0xff, 0xff, 0xfe}; /* 258, -2 */
    static const unsigned char be_f8[8] = {0x40, 0x09, 0x21, 0xfb, 0x54, 0x44, 0x2d, 0x18};
    static const unsigned char le_f8[8] = {0x18, 0x2d, 0x44, 0x54, 0xfb, 0x21, 0x09, 0x40};
    static const unsigned char u1[3] = {0, 128, 255};
    int64_t s2 = 2, s1 = 1, s13[2] = {1, 3};
    double w_i4[2] = {258, -2}, w_pi[1] = {3.141592653589793}, w_u1[3] = {0, 128, 255};
    tide_tensor *t;
    t = tide_load_npy(write_npy("v2.npy", 2, "{'shape': (2,), 'fortran_order': False, 'descr': "
                                             "'>i4'}", be_i4, 8));
    ref_check_tensor("v2.0 big-endian int32", t, TIDE_INT32, 1, &s2, w_i4, 0);
    tide_release(t);
    t = tide_load_npy(write_npy("v3.npy", 3, "{\"descr\": \">f8\", \"fortran_order\": False, "
                                             "\"shape\": (1L,)}", be_f8, 8));
    ref_check_tensor("v3.0 big-endian float64, long suffix", t, TIDE_FLOAT64, 1, &s1, w_pi, 0);
    tide_release(t);
    t = tide_load_npy(write_npy("native.npy", 1, "{'descr':'=f8','fortran_order':False,"
                                                 "'shape':(1,),}", le_f8, 8));
    ref_check_tensor("native-order float64, no spaces", t, TIDE_FLOAT64, 1, &s1, w_pi, 0);
    tide_release(t);
    t = tide_load_npy(write_npy("u1.npy", 1, "{'descr': '<u1', 'fortran_order': False, "
                                             "'shape': (1, 3), }", u1, 3));
    ref_check_tensor("'<u1' 2-d", t, TIDE_UINT8, 2, s13, w_u1, 0);
    tide_release(t);
    /* Fortran order is harmless for one element but still refused: the rule is simple. */
    static const unsigned char bools[3] = {0, 7, 1};
    double w_b[3] = {0, 1, 1};
    int64_t s3 = 3;
    t = tide_load_npy(write_npy("b1.npy", 1, "{'descr': '|b1', 'fortran_order': False, 'shape': "
                                             "(3,), }", bools, 3));
    ref_check_tensor("bools stored as 7 read as 1", t, TIDE_BOOL, 1, &s3, w_b, 0);
    CHECK(t && ((const uint8_t *)tide_data_ptr(t))[1] == 1, "bool byte normalized");
    tide_release(t);
}

static void test_npy_rejects(void)
{
    static const unsigned char data[64] = {0};
    static const struct {
        int major;
        const char *dict;
        size_t ndata;
        const char *frag;
    } bad[] = {
        {1, "{'descr': '<f4', 'fortran_order': True, 'shape': (2, 3), }", 24,
         "fortran_order is True"},
        {1, "{'descr': '<f2', 'fortran_order': False, 'shape': (2,), }", 3,
         "shape [2] of <f2 needs 4 bytes of data; the file has 3"},
        {1, "{'descr': '<c8', 'fortran_order': False, 'shape': (2,), }", 16,
         "unsupported dtype '<c8'"},
        {1, "{'descr': '|i1', 'fortran_order': False, 'shape': (2,), }", 2, "unsupported dtype"},
        {1, "{'descr': '<U5', 'fortran_order': False, 'shape': (2,), }", 40, "unsupported dtype"},
        {1, "{'descr': [('x', '<f4')], 'fortran_order': False, 'shape': (2,), }", 8,
         "structured dtypes"},
        {1, "{'descr': '<f4', 'fortran_order': False, }", 4, "no shape"},
        {1, "{'fortran_order': False, 'shape': (1,), }", 4, "no descr"},
        {1, "{'descr': '<f4', 'shape': (1,), }", 4, "no fortran_order"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), 'x': 1, }", 4, "unknown key"},
        {1, "{'descr': '<f4', 'descr': '<f4', 'fortran_order': False, 'shape': (1,), }", 4,
         "key given twice"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1), }", 4, "not a tuple"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': 1, }", 4, "shape is not a tuple"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (-1,), }", 4, "negative size"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (9223372036854775808,), }", 4,
         "too large"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,1,1,1,1,1,1,1,1), }", 4,
         "more than 8 dims"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2 3), }", 24, "expected ','"},
        {1, "{'descr': '<f4', 'fortran_order': false, 'shape': (1,), }", 4, "not True or False"},
        {1, "{'descr' '<f4', 'fortran_order': False, 'shape': (1,), }", 4, "expected ':'"},
        {1, "{'descr': '<f4, 'fortran_order': False, 'shape': (1,), }", 4, "expected ',' or '}'"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (1,), } x", 4, "after the dict"},
        {1, "{'descr': '<\\f4', 'fortran_order': False, 'shape': (1,), }", 4,
         "unsupported character"},
        {1, "['descr']", 4, "not a dict"},
        {1, "{descr: '<f4', 'fortran_order': False, 'shape': (1,), }", 4,
         "expected a quoted string"},
        {1, "{'descr': '<f4", 4, "unterminated string"},
        {1, "{'descr': '<f4444444444444444444444444444444444444', 'fortran_order': False, "
            "'shape': (1,), }", 4, "string too long"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (,), }", 4, "expected an integer"},
        {1, "{'descr': '<f4' 'fortran_order': False}", 4, "expected ',' or '}'"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (01,), }", 4, "leading zero"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 23,
         "shape [2, 3] of <f4 needs 24 bytes of data; the file has 23"},
        {1, "{'descr': '<f4', 'fortran_order': False, 'shape': (2, 3), }", 25,
         "1 bytes follow the 24 bytes of data"},
        {1, "{'descr': '<f8', 'fortran_order': False, 'shape': (4294967296, 4294967296), }", 8,
         "needs more than 2^64 bytes"},
        {1, "{'descr': '|u1', 'fortran_order': False, 'shape': (1099511627776, 1099511627776, "
            "0), }", 0, "sizes other than 0 that multiply past 2^62"},
        {2, "{'descr': '<f4', 'fortran_order': False, 'shape': (3037000499, 2), }", 8,
         "needs 24296003992 bytes of data; the file has 8"},
        {2, "{'descr': '<f4', 'fortran_order': False, 'shape': (3037000500, 3037000500), }", 8,
         "needs more than 2^64 bytes"},
    };
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        const char *p = write_npy("bad.npy", bad[i].major, bad[i].dict, data, bad[i].ndata);
        CHECK_LOAD_REJECTS(tide_load_npy, "load_npy", p, bad[i].frag, NULL);
    }
    const char *p;
    write_file(p = tpath("magic.npy"), "\x93NUMPX\x01\x00\x00\x00", 10);
    CHECK_LOAD_REJECTS(tide_load_npy, "load_npy", p, "not a .npy file", NULL);
    write_file(p = tpath("version.npy"), "\x93NUMPY\x04\x00\x00\x00\x00\x00", 12);
    CHECK_LOAD_REJECTS(tide_load_npy, "load_npy", p, "unsupported .npy version 4.0", NULL);
    write_file(p = tpath("short.npy"), "\x93NUMPY\x01", 7);
    CHECK_LOAD_REJECTS(tide_load_npy, "load_npy", p, "file has 7 bytes", NULL);
    write_file(p = tpath("hlen.npy"), "\x93NUMPY\x01\x00\xff\x00{}", 12);
    CHECK_LOAD_REJECTS(tide_load_npy, "load_npy", p, "header length 255 is more than the 2 bytes",
                       NULL);
    write_file(p = tpath("hlen2.npy"), "\x93NUMPY\x02\x00\xff\xff\xff\xff{}", 14);
    CHECK_LOAD_REJECTS(tide_load_npy, "load_npy", p, "header length 4294967295 is more than", NULL);
    write_file(p = tpath("v2short.npy"), "\x93NUMPY\x02\x00\x05\x00", 10);
    CHECK_LOAD_REJECTS(tide_load_npy, "load_npy", p, "file ends inside the header length", NULL);
    /* A 2 MB header in a file that has room for it (sparse). */
    p = tpath("bighdr.npy");
    write_file(p, "\x93NUMPY\x02\x00\x00\x00\x20\x00{", 13);
    CHECK(truncate(p, 3 << 20) == 0, "truncate");
    CHECK_LOAD_REJECTS(tide_load_npy, "load_npy", p, "header length 2097152 is over the limit",
                       NULL);
    unlink(p);
    CHECK_LOAD_REJECTS(tide_load_npy, "load_npy", tpath("missing.npy"), "cannot open", NULL);
    CHECK_LOAD_REJECTS(tide_load_npy, "load_npy", tmpdir, "not a regular file", NULL);
    CHECK_ERROR(tide_load_npy(NULL), "load_npy: path is NULL");

    int64_t s1 = 1;
    tide_tensor *t = tide_ones(1, &s1, TIDE_FLOAT32);
    CHECK_FAILS(tide_save_npy(NULL, t), "save_npy: path is NULL", NULL);
    CHECK_FAILS(tide_save_npy(tpath("x.npy"), NULL), "save_npy: ", "tensor is NULL");
    CHECK_FAILS(tide_save_npy(tpath("nodir/x.npy"), t), "cannot open for writing", NULL);
    if (access("/dev/full", W_OK) == 0) {
        CHECK_FAILS(tide_save_npy("/dev/full", t), "save_npy: /dev/full: write failed", NULL);
        /* Bigger than stdio's buffer: the failure shows at the write itself. */
        int64_t sbig = 1 << 20;
        tide_tensor *big = tide_zeros(1, &sbig, TIDE_FLOAT32);
        CHECK_FAILS(tide_save_npy("/dev/full", big), "save_npy: /dev/full: write failed",
                    "No space left");
        const char *nm[1] = {"big"};
        CHECK_FAILS(tide_save_safetensors("/dev/full", nm, &big, 1, NULL, 0),
                    "save_safetensors: /dev/full: write failed", "No space left");
        tide_release(big);
    }
    tide_release(t);
}

/* ---- IDX ---------------------------------------------------------------------------------- */

/* An IDX file from its header fields and raw (already big-endian) data, gzipped or plain. */
static const char *write_idx(const char *name, int code, int ndim, const uint32_t *dims,
                             const void *data, size_t ndata, bool gz)
{
    unsigned char head[4 + 4 * 16] = {0, 0, (unsigned char)code, (unsigned char)ndim};
    for (int i = 0; i < ndim; i++)
        for (int b = 0; b < 4; b++)
            head[4 + 4 * i + b] = (unsigned char)(dims[i] >> (24 - 8 * b));
    const char *p = tpath(name);
    if (gz) {
        gzFile g = gzopen(p, "wb");
        gzwrite(g, head, 4 + 4 * (unsigned)ndim);
        if (ndata)
            gzwrite(g, data, (unsigned)ndata);
        gzclose(g);
    } else {
        unsigned char *b = malloc(4 + 4 * (size_t)ndim + ndata + 1);
        memcpy(b, head, 4 + 4 * (size_t)ndim);
        if (ndata)
            memcpy(b + 4 + 4 * ndim, data, ndata);
        write_file(p, b, 4 + 4 * (size_t)ndim + ndata);
        free(b);
    }
    return p;
}

static void test_idx_types(void)
{
    static const unsigned char u8[6] = {0, 1, 127, 128, 254, 255};
    static const unsigned char i16[6] = {0x00, 0x01, 0xff, 0xfe, 0x80, 0x00}; /* 1 -2 -32768 */
    static const unsigned char i32[8] = {0x00, 0x01, 0x00, 0x00, 0x80, 0x00, 0x00, 0x00};
    static const unsigned char f32[8] = {0x3f, 0xc0, 0x00, 0x00, 0xc1, 0x20, 0x00, 0x00};
    static const unsigned char f64[8] = {0xc0, 0x09, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00};
    uint32_t d23[2] = {2, 3}, d3 = 3, d2 = 2, d1 = 1, d6 = 6;
    int64_t s23[2] = {2, 3}, s3 = 3, s2 = 2, s1 = 1, s6 = 6;
    double w_u8[6] = {0, 1, 127, 128, 254, 255};
    double w_i8[6] = {0, 1, 127, -128, -2, -1};
    double w_i16[3] = {1, -2, -32768};
    double w_i32[2] = {65536, -2147483648.0};
    double w_f32[2] = {1.5, -10};
    double w_f64[1] = {-3.125};
    for (int gz = 0; gz < 2; gz++) {
        char desc[64];
        tide_tensor *t;
#define IDX_CASE(label, code, nd, dims, bytes, dt, snd, shape, want)                               \
    snprintf(desc, sizeof desc, "idx %s (%s)", label, gz ? "gzip" : "plain");                    \
    t = tide_load_idx(write_idx("t.idx", code, nd, dims, bytes, sizeof bytes, gz));               \
    ref_check_tensor(desc, t, dt, snd, shape, want, 0);                                            \
    tide_release(t)
        IDX_CASE("uint8 [2, 3]", 0x08, 2, d23, u8, TIDE_UINT8, 2, s23, w_u8);
        IDX_CASE("int8 [6] as int32", 0x09, 1, &d6, u8, TIDE_INT32, 1, &s6, w_i8);
        IDX_CASE("int16 [3] as int32", 0x0B, 1, &d3, i16, TIDE_INT32, 1, &s3, w_i16);
        IDX_CASE("int32 [2]", 0x0C, 1, &d2, i32, TIDE_INT32, 1, &s2, w_i32);
        IDX_CASE("float32 [2]", 0x0D, 1, &d2, f32, TIDE_FLOAT32, 1, &s2, w_f32);
        IDX_CASE("float64 [1]", 0x0E, 1, &d1, f64, TIDE_FLOAT64, 1, &s1, w_f64);
#undef IDX_CASE
        /* 0 dims: one element; a zero dim: no data. */
        t = tide_load_idx(write_idx("scalar.idx", 0x08, 0, NULL, u8 + 4, 1, gz));
        double w254[1] = {254};
        ref_check_tensor("idx 0-dim", t, TIDE_UINT8, 0, NULL, w254, 0);
        tide_release(t);
        uint32_t d40[2] = {4, 0};
        int64_t s40[2] = {4, 0};
        t = tide_load_idx(write_idx("empty.idx", 0x0D, 2, d40, NULL, 0, gz));
        ref_check_tensor("idx [4, 0]", t, TIDE_FLOAT32, 2, s40, NULL, 0);
        tide_release(t);
    }
    /* Data larger than the first read chunk (1 MiB), so the buffer grows. */
    size_t big = (3u << 20) + 5;
    unsigned char *b = malloc(big);
    for (size_t i = 0; i < big; i++)
        b[i] = (unsigned char)(i * 2654435761u >> 13);
    uint32_t dbig = (uint32_t)big;
    tide_tensor *t = tide_load_idx(write_idx("big.idx", 0x08, 1, &dbig, b, big, true));
    CHECK(t && tide_numel(t) == (int64_t)big && memcmp(tide_data_ptr(t), b, big) == 0,
          "3 MiB gzipped uint8 read intact: %s", tide_last_error());
    tide_release(t);
    free(b);
}

static void test_idx_rejects(void)
{
    static const unsigned char data[16] = {0};
    uint32_t d10 = 10, d4 = 4;
    uint32_t big[9] = {4294967295u, 4294967295u, 4294967295u, 1, 1, 1, 1, 1, 1};
    uint32_t d1g[2] = {1u << 30, 1};
    for (int gz = 0; gz < 2; gz++) {
        const char *p;
        p = write_idx("bad.idx", 0x08, 1, &d10, data, 9, gz);
        CHECK_LOAD_REJECTS(tide_load_idx, "load_idx", p, "data ends after 9 of the 10 bytes", NULL);
        p = write_idx("bad.idx", 0x08, 1, &d4, data, 5, gz);
        CHECK_LOAD_REJECTS(tide_load_idx, "load_idx", p, "more data follows the 4 bytes", NULL);
        p = write_idx("bad.idx", 0x0A, 1, &d4, data, 4, gz);
        CHECK_LOAD_REJECTS(tide_load_idx, "load_idx", p, "unknown IDX type code 0x0a", NULL);
        p = write_idx("bad.idx", 0x08, 9, big, data, 0, gz);
        CHECK_LOAD_REJECTS(tide_load_idx, "load_idx", p, "declares 9 dims", NULL);
        p = write_idx("bad.idx", 0x0E, 3, big, data, 0, gz);
        CHECK_LOAD_REJECTS(tide_load_idx, "load_idx", p, "declare more than 2^47 bytes", NULL);
        uint32_t zero_dims[4] = {4294967295u, 4294967295u, 4294967295u, 0};
        p = write_idx("bad.idx", 0x08, 4, zero_dims, data, 0, gz);
        CHECK_LOAD_REJECTS(tide_load_idx, "load_idx", p, "multiply past 2^62", NULL);
        /* 1 GiB declared by a tiny file: refused after reading what is there, without
         * allocating the declared size. */
        p = write_idx("bad.idx", 0x08, 2, d1g, data, 16, gz);
        CHECK_LOAD_REJECTS(tide_load_idx, "load_idx", p, "data ends after 16 of the 1073741824",
                           NULL);
        /* Dims cut off. */
        p = write_idx("bad.idx", 0x08, 3, big, data, 0, gz);
        if (!gz)
            truncate(p, 10);
        CHECK_LOAD_REJECTS(tide_load_idx, "load_idx", p, gz ? "more than 2^47" : "file ends inside "
                           "the 3 dims", NULL);
    }
    const char *p;
    write_file(p = tpath("magic.idx"), "\x01\x00\x08\x01\0\0\0\0", 8);
    CHECK_LOAD_REJECTS(tide_load_idx, "load_idx", p, "not an IDX file", "01000801");
    write_file(p = tpath("short.idx"), "\x00\x00", 2);
    CHECK_LOAD_REJECTS(tide_load_idx, "load_idx", p, "file has 2 bytes", NULL);
    /* A gzip file cut short, and one with a damaged body. */
    static unsigned char payload[4096];
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = (unsigned char)(i * 7 + (i >> 5));
    uint32_t dp = sizeof payload;
    p = write_idx("gz.idx", 0x08, 1, &dp, payload, sizeof payload, true);
    size_t n;
    unsigned char *gzb = read_file(p, &n);
    write_file(p = tpath("cut.idx.gz"), gzb, n - 12);
    CHECK_LOAD_REJECTS(tide_load_idx, "load_idx", p, "truncated", NULL);
    write_file(p = tpath("cut2.idx.gz"), gzb, n - 4); /* data complete, gzip trailer cut */
    CHECK_LOAD_REJECTS(tide_load_idx, "load_idx", p, "gzip stream ends early", "member 1");
    for (size_t i = n / 2; i < n / 2 + 8; i++)
        gzb[i] ^= 0x5A;
    write_file(p = tpath("damaged.idx.gz"), gzb, n);
    CHECK_LOAD_REJECTS(tide_load_idx, "load_idx", p, "gzip member 1", "damaged");
    free(gzb);
    CHECK_LOAD_REJECTS(tide_load_idx, "load_idx", tpath("missing.idx"), "cannot open", NULL);
    CHECK_LOAD_REJECTS(tide_load_idx, "load_idx", tmpdir, "not a regular file", NULL);
    CHECK_ERROR(tide_load_idx(NULL), "load_idx: path is NULL");
    CHECK_ERROR(tide_load_idx(""), "load_idx: path is empty");
}

/* ---- gzip faults (io/gzip_read.c) --------------------------------------------------------- */

/* data gzipped in memory as one member (level 0: stored blocks, so a flipped data byte is
 * certain to reach the CRC check rather than break the deflate codes). */
static unsigned char *gzip_bytes(const void *data, size_t n, int level, size_t *out_n)
{
    z_stream z = {0};
    unsigned char *out = malloc(n + 64 + n / 100);
    CHECK(out && deflateInit2(&z, level, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) ==
                     Z_OK, "deflateInit2");
    z.next_in = (unsigned char *)(uintptr_t)data;
    z.avail_in = (uInt)n;
    z.next_out = out;
    z.avail_out = (uInt)(n + 64 + n / 100);
    CHECK(deflate(&z, Z_FINISH) == Z_STREAM_END, "deflate");
    *out_n = z.total_out;
    deflateEnd(&z);
    return out;
}

/* An IDX file of 600 uint8 values (i * 13 mod 256) as bytes, gzipped in two members split at
 * `split` (0: one member), with `tail` (ntail bytes) appended; written to name. */
static const char *write_gz_idx(const char *name, size_t split, int level, const void *tail,
                                size_t ntail)
{
    unsigned char idx[8 + 600] = {0, 0, 0x08, 1, 0, 0, 600 >> 8, 600 & 255};
    for (int i = 0; i < 600; i++)
        idx[8 + i] = (unsigned char)(i * 13);
    size_t n1, n2 = 0;
    unsigned char *m1 = gzip_bytes(idx, split ? split : sizeof idx, level, &n1);
    unsigned char *m2 = split ? gzip_bytes(idx + split, sizeof idx - split, level, &n2) : NULL;
    unsigned char *file = malloc(n1 + n2 + ntail + 1);
    memcpy(file, m1, n1);
    if (m2)
        memcpy(file + n1, m2, n2);
    if (ntail)
        memcpy(file + n1 + n2, tail, ntail);
    const char *p = tpath(name);
    write_file(p, file, n1 + n2 + ntail);
    free(m1);
    free(m2);
    free(file);
    return p;
}

/* Loads p, expecting the 600 values write_gz_idx writes. */
static void check_gz_idx_loads(const char *p, const char *what)
{
    tide_tensor *t = tide_load_idx(p);
    bool ok = t && tide_ndim(t) == 1 && tide_numel(t) == 600 && tide_get_dtype(t) == TIDE_UINT8;
    const uint8_t *d = ok ? tide_data_ptr(t) : NULL;
    for (int i = 0; ok && i < 600; i++)
        ok = d[i] == (uint8_t)(i * 13);
    CHECK(ok, "%s: %s", what, t ? "wrong values" : tide_last_error());
    tide_release(t);
}

/* The message names the file and the fault, never zlib's "<fd:N>" stand-in for the path. */
#define CHECK_GZ_REJECTS(path, frag1, frag2)                                                       \
    do {                                                                                           \
        CHECK_LOAD_REJECTS(tide_load_idx, "load_idx", path, frag1, frag2);                         \
        CHECK(!strstr(tide_last_error(), "<fd"), "fd in \"%s\"", tide_last_error());               \
    } while (0)

static void test_gzip_faults(void)
{
    size_t n;
    const char *p = write_gz_idx("one.idx.gz", 0, 6, NULL, 0);
    check_gz_idx_loads(p, "one member");
    unsigned char *b = read_file(p, &n);
    /* Trailer: CRC-32 (4 bytes, little-endian) then the length mod 2^32. */
    char at[64];
    b[n - 8] ^= 1;
    write_file(p = tpath("crc.idx.gz"), b, n);
    snprintf(at, sizeof at, "(the checksum at byte %zu)", n - 8);
    CHECK_GZ_REJECTS(p, "CRC-32 mismatch at the end of gzip member 1", at);
    b[n - 8] ^= 1;
    b[n - 1] ^= 1;
    write_file(p = tpath("len.idx.gz"), b, n);
    snprintf(at, sizeof at, "(the size at byte %zu", n - 4);
    CHECK_GZ_REJECTS(p, "length mismatch at the end of gzip member 1", at);
    b[n - 1] ^= 1;
    write_file(p = tpath("cut_hdr.idx.gz"), b, 6);
    CHECK_GZ_REJECTS(p, "gzip stream ends early", "inside the header of member 1");
    write_file(p = tpath("cut_body.idx.gz"), b, n / 2);
    CHECK_GZ_REJECTS(p, "gzip stream ends early", "truncated file");
    b[3] = 0xE0; /* reserved FLG bits */
    write_file(p = tpath("flags.idx.gz"), b, n);
    CHECK_GZ_REJECTS(p, "bad gzip header in member 1", "unknown header flags");
    b[3] = 0;
    b[2] = 7; /* compression method other than deflate */
    write_file(p = tpath("method.idx.gz"), b, n);
    CHECK_GZ_REJECTS(p, "bad gzip header in member 1", "unknown compression method");
    b[2] = 8;
    b[10] = 0x07; /* first deflate block: final, type 3 (reserved) */
    write_file(p = tpath("block.idx.gz"), b, n);
    CHECK_GZ_REJECTS(p, "damaged compressed data in gzip member 1 near byte", "invalid block type");
    free(b);
    /* Stored blocks: a flipped data byte is caught by the CRC, whichever byte it is. */
    p = write_gz_idx("stored.idx.gz", 0, 0, NULL, 0);
    check_gz_idx_loads(p, "stored blocks");
    b = read_file(p, &n);
    b[n / 2] ^= 0x40;
    write_file(p = tpath("stored_bad.idx.gz"), b, n);
    CHECK_GZ_REJECTS(p, "CRC-32 mismatch at the end of gzip member 1", NULL);
    free(b);
    /* Trailing bytes that are not a gzip member: an error, zeros included. */
    CHECK_GZ_REJECTS(write_gz_idx("junk.idx.gz", 0, 6, "junk", 4),
                     "trailing garbage: 4 bytes after the end of gzip member 1", "not another");
    CHECK_GZ_REJECTS(write_gz_idx("zero.idx.gz", 0, 6, "\0\0\0\0\0\0\0\0", 8),
                     "trailing garbage: 8 bytes", NULL);
    CHECK_GZ_REJECTS(write_gz_idx("half.idx.gz", 0, 6, "\x1f", 1), "trailing garbage: 1 bytes",
                     NULL);
    /* Concatenated members read as one stream, split anywhere: in the magic, the dims, the data. */
    size_t splits[] = {2, 5, 8, 9, 300, 607};
    for (size_t i = 0; i < sizeof splits / sizeof splits[0]; i++) {
        char what[64];
        snprintf(what, sizeof what, "two members split at byte %zu", splits[i]);
        check_gz_idx_loads(write_gz_idx("two.idx.gz", splits[i], 6, NULL, 0), what);
    }
    /* ... and a fault in the second member names member 2. */
    p = write_gz_idx("two.idx.gz", 300, 6, NULL, 0);
    b = read_file(p, &n);
    b[n - 8] ^= 1;
    write_file(p = tpath("two_crc.idx.gz"), b, n);
    CHECK_GZ_REJECTS(p, "CRC-32 mismatch at the end of gzip member 2", NULL);
    b[n - 8] ^= 1;
    write_file(p = tpath("two_cut.idx.gz"), b, n - 3);
    CHECK_GZ_REJECTS(p, "gzip stream ends early", "member 2");
    free(b);
    CHECK_GZ_REJECTS(write_gz_idx("two_junk.idx.gz", 300, 6, "x", 1),
                     "trailing garbage: 1 bytes after the end of gzip member 2", NULL);
}

/* The real Fashion-MNIST (Debian's dataset-fashion-mnist). The statistics were computed once
 * with Python's gzip module from the same files. */
static void test_fashion_mnist(void)
{
    const char *dir = "/usr/share/datasets/fashion-mnist";
    static const struct {
        const char *file;
        int64_t n;
        int64_t first_sum; /* pixels of the first image, or all labels */
        int first_label[5];
    } sets[] = {
        {"train-images-idx3-ubyte.gz", 60000, 76247, {0}},
        {"train-labels-idx1-ubyte.gz", 60000, 270000, {9, 0, 0, 3, 0}},
        {"t10k-images-idx3-ubyte.gz", 10000, 33456, {0}},
        {"t10k-labels-idx1-ubyte.gz", 10000, 45000, {9, 2, 1, 1, 6}},
    };
    char path[256];
    snprintf(path, sizeof path, "%s/%s", dir, sets[0].file);
    if (access(path, R_OK) != 0) {
        printf("test_io: %s is not installed (scripts/setup.sh installs dataset-fashion-mnist); "
               "skipping the real-data checks\n", dir);
        return;
    }
    for (int i = 0; i < 4; i++) {
        snprintf(path, sizeof path, "%s/%s", dir, sets[i].file);
        tide_tensor *t = tide_load_idx(path);
        CHECK(t != NULL, "%s: %s", sets[i].file, tide_last_error());
        if (!t)
            continue;
        bool images = i % 2 == 0;
        const uint8_t *p = tide_data_ptr(t);
        CHECK(tide_get_dtype(t) == TIDE_UINT8, "%s: uint8", sets[i].file);
        if (images) {
            CHECK(tide_ndim(t) == 3 && tide_size(t, 0) == sets[i].n && tide_size(t, 1) == 28 &&
                      tide_size(t, 2) == 28,
                  "%s: shape %s", sets[i].file, ref_tensor_shape_str(t));
            int64_t sum = 0;
            for (int k = 0; k < 784 && tide_numel(t) >= 784; k++)
                sum += p[k];
            CHECK(sum == sets[i].first_sum, "%s: first image sums to %lld, want %lld",
                  sets[i].file, (long long)sum, (long long)sets[i].first_sum);
        } else {
            CHECK(tide_ndim(t) == 1 && tide_size(t, 0) == sets[i].n, "%s: shape %s", sets[i].file,
                  ref_tensor_shape_str(t));
            int64_t sum = 0, counts[10] = {0};
            uint8_t maxv = 0;
            for (int64_t k = 0; k < tide_numel(t); k++) {
                sum += p[k];
                maxv = p[k] > maxv ? p[k] : maxv;
                if (p[k] < 10)
                    counts[p[k]]++;
            }
            CHECK(maxv <= 9, "%s: labels in 0..9 (max %d)", sets[i].file, maxv);
            CHECK(sum == sets[i].first_sum, "%s: labels sum to %lld", sets[i].file,
                  (long long)sum);
            for (int c = 0; c < 10; c++)
                CHECK(counts[c] == sets[i].n / 10, "%s: %lld of class %d", sets[i].file,
                      (long long)counts[c], c);
            for (int k = 0; k < 5; k++)
                CHECK(p[k] == sets[i].first_label[k], "%s: label %d is %d", sets[i].file, k, p[k]);
        }
        tide_release(t);
    }
}

/* A loader that blocked on a FIFO would hang the suite: the alarm ends the program instead. */
static void on_alarm(int sig)
{
    (void)sig;
    static const char msg[] = "test_io: a loader blocked on a FIFO (no answer in 20 s)\n";
    if (write(2, msg, sizeof msg - 1) < 0)
        _exit(3);
    _exit(3);
}

/* A Unix socket bound at path (its fd; -1 when sockets cannot be made here). */
static int bind_socket(const char *path)
{
    struct sockaddr_un a = {.sun_family = AF_UNIX};
    if (strlen(path) >= sizeof a.sun_path)
        return -1;
    strcpy(a.sun_path, path);
    int fd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (fd >= 0 && bind(fd, (struct sockaddr *)&a, sizeof a) != 0) {
        close(fd);
        fd = -1;
    }
    return fd;
}

/* Every loader refuses what is not a regular file, at once and saying what it is: a FIFO (whose
 * open used to wait forever for a writer), a socket, a directory, a character device. */
static void test_loaders_refuse_special_files(void)
{
    char fifo[128], sock[128];
    snprintf(fifo, sizeof fifo, "%s", tpath("pipe.safetensors"));
    snprintf(sock, sizeof sock, "%s", tpath("sock.npy"));
    CHECK(mkfifo(fifo, 0600) == 0, "mkfifo %s", fifo);
    int sfd = bind_socket(sock);
    CHECK(sfd >= 0, "a Unix socket at %s", sock);
    struct {
        const char *path, *kind;
    } cases[] = {{fifo, "a named pipe (FIFO)"}, {sock, "a socket"}, {tmpdir, "a directory"},
                 {"/dev/null", "a character device"}};
    signal(SIGALRM, on_alarm);
    alarm(20);
    for (int i = 0; i < 4; i++) {
        const char *p = cases[i].path, *k = cases[i].kind;
        if (i == 1 && sfd < 0)
            continue;
        CHECK_ST_REJECTS(p, "not a regular file: it is ", k);
        CHECK_LOAD_REJECTS(tide_load_npy, "load_npy", p, "not a regular file: it is ", k);
        CHECK_LOAD_REJECTS(tide_load_idx, "load_idx", p, "not a regular file: it is ", k);
    }
    /* a saver into a FIFO nobody reads fails at once instead of waiting for a reader */
    int64_t one = 1;
    tide_tensor *t = tide_zeros(1, &one, TIDE_FLOAT32);
    CHECK(t && tide_save_npy(fifo, t) < 0 && strstr(tide_last_error(), "save_npy") &&
              strstr(tide_last_error(), "named pipe (FIFO) with no reader"),
          "save_npy into a FIFO with no reader: %s", tide_last_error());
    tide_release(t);
    /* with a writer waiting on the other end too */
    int wfd = open(fifo, O_RDWR | O_NONBLOCK);
    CHECK(wfd >= 0, "open %s for writing", fifo);
    CHECK_ST_REJECTS(fifo, "not a regular file: it is a named pipe", NULL);
    if (wfd >= 0)
        close(wfd);
    alarm(0);
    signal(SIGALRM, SIG_DFL);
    if (sfd >= 0)
        close(sfd);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tide_test_io_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    test_safetensors_round_trip();
    test_safetensors_float_bits();
    test_safetensors_ownership();
    test_safetensors_reference_bytes();
    test_safetensors_mixed_bytes();
    test_safetensors_escapes();
    test_safetensors_reads_other_writers();
    test_safetensors_rejects_headers();
    test_safetensors_rejects_sizes();
    test_safetensors_rejects_files();
    test_safetensors_save_errors();
    test_tensor_dict_accessors();
    test_npy_round_trip();
    test_npy_reference_bytes();
    test_npy_reads_other_writers();
    test_npy_rejects();
    test_idx_types();
    test_idx_rejects();
    test_gzip_faults();
    test_fashion_mnist();
    test_loaders_refuse_special_files();
    remove_tmpdir();
    return test_summary("test_io");
}
