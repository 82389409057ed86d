/*
 * test_half_files.c — float16 and bfloat16 in files (io/): the PyTorch fixture
 * (tests/lua/data/pytorch_half.safetensors and pytorch_half_f16.npy, written by
 * scripts/make_half_fixtures.py with Debian's python3-torch 1.13) loaded and compared bit for
 * bit with what PyTorch computed, the files written again byte for byte, round trips of views,
 * and the errors: a byte count that does not match the dtype and shape, bfloat16 to .npy.
 *
 * Where tide and PyTorch 1.13 differ, on purpose, is only in which NaN comes out (tide keeps the
 * sign and the top payload bits and makes the NaN quiet, as x86's F16C instructions do; see
 * core/half.h):
 *  - float32 -> float16: torch writes sign | 0x7e00 (payload dropped);
 *  - float32 -> bfloat16: torch's vector kernel writes 0xffff for every NaN (sign dropped);
 *  - bfloat16 -> float32: torch shifts the bits, so a signaling NaN stays signaling; tide's
 *    comes back quiet (bit 22 set), as float16's does in both libraries.
 * For those elements the checks below ask for a NaN (with the sign where torch keeps it) and
 * compare every other element bitwise.
 */
#include <stdint.h>
#include <stdlib.h>
#include <unistd.h>

#include "tide.h"
#include "test_util.h"

#ifndef TIDE_TEST_DATA_DIR
#define TIDE_TEST_DATA_DIR "tests/lua/data"
#endif
#define FIXTURE TIDE_TEST_DATA_DIR "/pytorch_half.safetensors"
#define FIXTURE_NPY TIDE_TEST_DATA_DIR "/pytorch_half_f16.npy"

static char tmpdir[64];

static const char *tpath(const char *name)
{
    static char bufs[4][128];
    static int next;
    char *b = bufs[next++ & 3];
    snprintf(b, 128, "%s/%s", tmpdir, name);
    return b;
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

static void write_file(const char *path, const void *data, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f || (n && fwrite(data, 1, n, f) != n)) {
        fprintf(stderr, "cannot write %s\n", path);
        exit(2);
    }
    fclose(f);
}

static bool same_file(const char *a, const char *b)
{
    size_t na, nb;
    unsigned char *pa = read_file(a, &na), *pb = read_file(b, &nb);
    bool same = pa && pb && na == nb && memcmp(pa, pb, na) == 0;
    free(pa);
    free(pb);
    return same;
}

static tide_tensor *need(const tide_tensor_dict *d, const char *name, tide_dtype dt)
{
    tide_tensor *t = tide_tensor_dict_find(d, name);
    CHECK(t && tide_get_dtype(t) == dt, "fixture tensor %s: %s, want dtype %s", name,
          t ? tide_dtype_name(tide_get_dtype(t)) : "missing", tide_dtype_name(dt));
    return t && tide_get_dtype(t) == dt ? t : NULL;
}

static uint32_t bits32(const tide_tensor *t, int64_t i)
{
    uint32_t v;
    memcpy(&v, (const char *)tide_data_ptr(t) + 4 * i, 4);
    return v;
}

static uint16_t bits16(const tide_tensor *t, int64_t i)
{
    uint16_t v;
    memcpy(&v, (const char *)tide_data_ptr(t) + 2 * i, 2);
    return v;
}

static bool nan32(uint32_t b) { return (b & 0x7fffffffu) > 0x7f800000u; }
static bool nan16(uint16_t b, tide_dtype dt)
{
    return (b & 0x7fff) > (dt == TIDE_FLOAT16 ? 0x7c00 : 0x7f80);
}

/* tide's widening of a half tensor against torch's .float(): bitwise, except that tide makes a
 * signaling bfloat16 NaN quiet where torch keeps it. */
static void check_widen(const tide_tensor_dict *d, const char *half, const char *wide,
                        tide_dtype dt)
{
    tide_tensor *h = need(d, half, dt), *w = need(d, wide, TIDE_FLOAT32);
    if (!h || !w)
        return;
    tide_tensor *got = tide_cast(h, TIDE_FLOAT32);
    CHECK(got != NULL, "cast %s: %s", half, tide_last_error());
    int bad = 0;
    for (int64_t i = 0; got && i < tide_numel(h); i++) {
        uint32_t want = bits32(w, i), g = bits32(got, i);
        if (nan32(want))
            want |= 0x400000u; /* tide's NaN comes back quiet */
        if (g != want && bad++ < 5)
            fprintf(stderr, "%s[%lld] = %04x: tide %08x, torch %08x\n", half, (long long)i,
                    bits16(h, i), g, bits32(w, i));
    }
    CHECK(got && bad == 0, "%s -> float32: %d elements differ from torch", half, bad);
    tide_release(got);
}

/* tide's narrowing of src against torch's: bitwise where torch's result is not NaN; where it is,
 * a NaN (with src's sign for float16, which torch keeps; torch's bfloat16 NaN is 0xffff). */
static void check_narrow(const tide_tensor_dict *d, const char *src_name, tide_dtype src_dt,
                         const char *half, tide_dtype dt)
{
    tide_tensor *src = need(d, src_name, src_dt), *h = need(d, half, dt);
    if (!src || !h)
        return;
    tide_tensor *got = tide_cast(src, dt);
    CHECK(got != NULL, "cast %s: %s", src_name, tide_last_error());
    int bad = 0, nans = 0;
    for (int64_t i = 0; got && i < tide_numel(h); i++) {
        uint16_t want = bits16(h, i), g = bits16(got, i);
        bool ok = g == want;
        if (nan16(want, dt)) {
            nans++;
            ok = nan16(g, dt) && (dt == TIDE_BFLOAT16 || (g & 0x8000) == (want & 0x8000));
        }
        if (!ok && bad++ < 5)
            fprintf(stderr, "%s[%lld]: tide %04x, torch %04x\n", half, (long long)i, g, want);
    }
    CHECK(got && bad == 0, "%s -> %s: %d elements differ from torch", src_name, half, bad);
    CHECK(nans > 0 || src_dt == TIDE_FLOAT64, "%s: the fixture has no NaN", half);
    tide_release(got);
}

static void test_fixture_values(const tide_tensor_dict *d)
{
    check_widen(d, "src_f16", "src_f16_f32", TIDE_FLOAT16);
    check_widen(d, "src_bf16", "src_bf16_f32", TIDE_BFLOAT16);
    check_widen(d, "bits_f16", "bits_f16_f32", TIDE_FLOAT16);
    check_widen(d, "bits_bf16", "bits_bf16_f32", TIDE_BFLOAT16);
    check_narrow(d, "src", TIDE_FLOAT32, "src_f16", TIDE_FLOAT16);
    check_narrow(d, "src", TIDE_FLOAT32, "src_bf16", TIDE_BFLOAT16);
    /* float64 goes through float32 in both libraries (double rounding: see test_half.c) */
    check_narrow(d, "wide", TIDE_FLOAT64, "wide_f16", TIDE_FLOAT16);
    check_narrow(d, "wide", TIDE_FLOAT64, "wide_bf16", TIDE_BFLOAT16);
    tide_tensor *b = need(d, "bits_f16", TIDE_FLOAT16);
    CHECK(b && tide_ndim(b) == 2 && tide_shape(b)[0] == 64 && tide_shape(b)[1] == 64,
          "bits_f16 has shape [64, 64]");
}

/* Loading then saving gives the fixture's bytes: the writer orders F16 and BF16 as the
 * reference writer does (BF16 before F16, after I32). */
static void test_fixture_rewrite(const tide_tensor_dict *d)
{
    int n = tide_tensor_dict_count(d);
    const char *names[32];
    tide_tensor *ts[32];
    for (int i = 0; i < n && i < 32; i++) {
        names[i] = tide_tensor_dict_name(d, i);
        ts[i] = tide_tensor_dict_tensor(d, i);
    }
    const char *meta[2] = {"format", "pt"};
    const char *out = tpath("rewrite.safetensors");
    CHECK(n == 12 && tide_save_safetensors(out, names, ts, n, meta, 1) == 0, "save: %s",
          tide_last_error());
    CHECK(same_file(out, FIXTURE), "tide's safetensors differ from the fixture's bytes");

    tide_tensor *npy = tide_load_npy(FIXTURE_NPY), *ref = tide_tensor_dict_find(d, "bits_f16");
    CHECK(npy && tide_get_dtype(npy) == TIDE_FLOAT16 && tide_ndim(npy) == 2 && ref &&
              memcmp(tide_data_ptr(npy), tide_data_ptr(ref), 64 * 64 * 2) == 0,
          "the npy <f2 fixture loads as bits_f16: %s", tide_last_error());
    const char *npy_out = tpath("rewrite.npy");
    CHECK(npy && tide_save_npy(npy_out, npy) == 0 && same_file(npy_out, FIXTURE_NPY),
          "tide's .npy differs from numpy.save's bytes: %s", tide_last_error());
    tide_release(npy);
}

/* A transposed view of each half dtype is written row-major and reads back as its copy. */
static void test_view_round_trip(tide_dtype dt)
{
    uint16_t v[6] = {0x0001, 0x8000, 0x7bff, 0x3c00, 0xfe01, 0x7c00};
    int64_t shape[2] = {2, 3};
    tide_tensor *x = tide_from_data(v, 2, shape, dt), *xt = x ? tide_transpose(x, 0, 1) : NULL;
    const char *name = "t", *st = tpath("view.safetensors"), *np = tpath("view.npy");
    CHECK(xt && tide_save_safetensors(st, &name, &xt, 1, NULL, 0) == 0, "save %s view: %s",
          tide_dtype_name(dt), tide_last_error());
    tide_tensor_dict *d = tide_load_safetensors(st);
    tide_tensor *back = d ? tide_tensor_dict_find(d, "t") : NULL;
    static const uint16_t want[6] = {0x0001, 0x3c00, 0x8000, 0xfe01, 0x7bff, 0x7c00};
    CHECK(back && tide_get_dtype(back) == dt && tide_shape(back)[0] == 3 &&
              memcmp(tide_data_ptr(back), want, sizeof want) == 0,
          "%s view through safetensors: %s", tide_dtype_name(dt), tide_last_error());
    if (dt == TIDE_FLOAT16) {
        tide_tensor *b2 = tide_save_npy(np, xt) == 0 ? tide_load_npy(np) : NULL;
        CHECK(b2 && memcmp(tide_data_ptr(b2), want, sizeof want) == 0,
              "float16 view through .npy: %s", tide_last_error());
        tide_release(b2);
    } else {
        tide_clear_error();
        unlink(np);
        CHECK(tide_save_npy(np, xt) == -1 && strstr(tide_last_error(), "save_npy: ") &&
                  strstr(tide_last_error(), "bfloat16") &&
                  strstr(tide_last_error(), "safetensors") && access(np, F_OK) != 0,
              "bfloat16 to .npy: error \"%s\"", tide_last_error());
    }
    tide_tensor_dict_free(d);
    tide_release(xt);
    tide_release(x);
}

/* A file whose bytes do not match its dtype and shape stays an error naming both. */
static void test_size_mismatch(void)
{
    const char *h = "{\"a\":{\"dtype\":\"F16\",\"shape\":[2,3],\"data_offsets\":[0,10]}}";
    size_t hl = strlen(h);
    unsigned char buf[128] = {0};
    for (int i = 0; i < 8; i++)
        buf[i] = (unsigned char)(hl >> (8 * i));
    memcpy(buf + 8, h, hl);
    const char *p = tpath("bad.safetensors");
    write_file(p, buf, 8 + hl + 10);
    tide_tensor_dict *d = tide_load_safetensors(p);
    CHECK(!d && strstr(tide_last_error(), "do not match shape [2, 3] of F16 (12 bytes)"),
          "F16 size mismatch: \"%s\"", tide_last_error());
    tide_tensor_dict_free(d);

    /* a <f2 .npy of shape (3,) with 5 data bytes */
    const char *dict = "{'descr': '<f2', 'fortran_order': False, 'shape': (3,), }";
    size_t dl = strlen(dict), total = 10 + dl + 1;
    size_t pad = (64 - total % 64) % 64;
    unsigned char nb[256] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0};
    nb[8] = (unsigned char)(dl + 1 + pad);
    memcpy(nb + 10, dict, dl);
    memset(nb + 10 + dl, ' ', pad);
    nb[10 + dl + pad] = '\n';
    p = tpath("bad.npy");
    write_file(p, nb, total + pad + 5);
    tide_tensor *t = tide_load_npy(p);
    CHECK(!t && strstr(tide_last_error(), "shape [3] of <f2 needs 6 bytes of data; the file has 5"),
          "<f2 size mismatch: \"%s\"", tide_last_error());
    tide_release(t);
}

int main(void)
{
    snprintf(tmpdir, sizeof tmpdir, "/tmp/tide_test_half_files_XXXXXX");
    if (!mkdtemp(tmpdir)) {
        perror("mkdtemp");
        return 2;
    }
    tide_tensor_dict *d = tide_load_safetensors(FIXTURE);
    CHECK(d != NULL, "load %s: %s", FIXTURE, tide_last_error());
    if (d) {
        test_fixture_values(d);
        test_fixture_rewrite(d);
    }
    tide_tensor_dict_free(d);
    test_view_round_trip(TIDE_FLOAT16);
    test_view_round_trip(TIDE_BFLOAT16);
    test_size_mismatch();
    const char *files[] = {"rewrite.safetensors", "rewrite.npy", "view.safetensors", "view.npy",
                           "bad.safetensors", "bad.npy"};
    for (size_t i = 0; i < sizeof files / sizeof files[0]; i++)
        unlink(tpath(files[i]));
    rmdir(tmpdir);
    return test_summary("test_half_files");
}
