/*
 * test_creation.c — making tensors (empty, zeros, ones, full, arange, linspace, eye, scalar,
 * from_data, wrap), reading them back (to_buffer, item), the queries and dtype helpers, and the
 * caching allocator's bookkeeping as seen through tide_memory_stats.
 */
#include <stdlib.h>

#include "tide.h"
#include "test_util.h"
#include "test_ref.h"

#define NDT 6
static const tide_dtype DTYPES[NDT] = {TIDE_FLOAT32, TIDE_FLOAT64, TIDE_INT32,
                                       TIDE_INT64,   TIDE_UINT8,   TIDE_BOOL};

static void test_dtype_helpers(void)
{
    static const char *names[NDT] = {"float32", "float64", "int32", "int64", "uint8", "bool"};
    static const size_t sizes[NDT] = {4, 8, 4, 8, 1, 1};
    for (int d = 0; d < NDT; d++) {
        CHECK(strcmp(tide_dtype_name(DTYPES[d]), names[d]) == 0, "tide_dtype_name(%d) = %s", d,
              tide_dtype_name(DTYPES[d]));
        CHECK(tide_dtype_size(DTYPES[d]) == sizes[d], "tide_dtype_size(%s) = %zu", names[d],
              tide_dtype_size(DTYPES[d]));
        CHECK(tide_dtype_from_name(names[d]) == (int)DTYPES[d], "tide_dtype_from_name(%s) = %d",
              names[d], tide_dtype_from_name(names[d]));
        CHECK(tide_dtype_is_floating(DTYPES[d]) == (d < 2), "tide_dtype_is_floating(%s)", names[d]);
    }
    CHECK(tide_dtype_from_name("float") == TIDE_FLOAT32, "alias float");
    CHECK(tide_dtype_from_name("double") == TIDE_FLOAT64, "alias double");
    CHECK(tide_dtype_from_name("long") == TIDE_INT64, "alias long");
    CHECK(tide_dtype_from_name("int") == TIDE_INT32, "alias int");
    CHECK(tide_dtype_from_name("half") == TIDE_FLOAT16, "alias half");
    CHECK(tide_dtype_from_name("bfloat16") == TIDE_BFLOAT16, "name bfloat16");
    CHECK(tide_dtype_from_name("float8") == -1, "unknown name float8");
    CHECK(tide_dtype_from_name("") == -1, "empty name");
    CHECK(tide_dtype_from_name(NULL) == -1, "NULL name");
    CHECK(strcmp(tide_dtype_name((tide_dtype)42), "invalid") == 0, "name of dtype 42");
    CHECK(strcmp(tide_dtype_name((tide_dtype)-1), "invalid") == 0, "name of dtype -1");
    CHECK(tide_dtype_size((tide_dtype)42) == 0, "size of dtype 42");
    CHECK(!tide_dtype_is_floating((tide_dtype)42), "dtype 42 is not floating");
}

static void test_empty_zeros_ones_full(void)
{
    static const struct {
        int ndim;
        int64_t shape[4];
    } shapes[] = {{2, {3, 4}}, {0, {0}}, {1, {0}}, {3, {2, 0, 5}}, {4, {1, 2, 1, 3}}, {1, {1000}}};
    static double want[1000];
    for (int d = 0; d < NDT; d++)
        for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; s++) {
            tide_dtype dt = DTYPES[d];
            int nd = shapes[s].ndim;
            const int64_t *sh = shapes[s].shape;
            int64_t n = ref_numel(nd, sh);
            char desc[128];

            tide_tensor *e = tide_empty(nd, sh, dt);
            snprintf(desc, sizeof desc, "empty(%s, %s)", ref_shape_str(nd, sh), ref_dtype_name(dt));
            CHECK(e && tide_get_dtype(e) == dt && ref_same_shape(e, nd, sh) && tide_numel(e) == n &&
                      tide_is_contiguous(e) && tide_offset(e) == 0,
                  "%s: %s", desc, tide_last_error());
            if (e) {
                int64_t st = 1;
                bool ok = true;
                for (int k = nd - 1; k >= 0; k--) {
                    ok = ok && (sh[k] <= 1 || tide_strides(e)[k] == st);
                    st *= sh[k] > 1 ? sh[k] : 1; /* PyTorch's strides treat size 0 as 1 */
                }
                CHECK(ok, "%s: strides %s not row-major", desc, ref_shape_str(nd, tide_strides(e)));
            }
            tide_release(e);

            for (int64_t i = 0; i < n; i++)
                want[i] = 0;
            snprintf(desc, sizeof desc, "zeros(%s, %s)", ref_shape_str(nd, sh), ref_dtype_name(dt));
            tide_tensor *z = tide_zeros(nd, sh, dt);
            ref_check_tensor(desc, z, dt, nd, sh, want, 0);
            tide_release(z);

            for (int64_t i = 0; i < n; i++)
                want[i] = 1;
            snprintf(desc, sizeof desc, "ones(%s, %s)", ref_shape_str(nd, sh), ref_dtype_name(dt));
            tide_tensor *o = tide_ones(nd, sh, dt);
            ref_check_tensor(desc, o, dt, nd, sh, want, 0);
            tide_release(o);

            double fill = dt == TIDE_UINT8 ? 200.7 : -2.7;
            for (int64_t i = 0; i < n; i++)
                want[i] = ref_quantize(dt, fill);
            snprintf(desc, sizeof desc, "full(%s, %g, %s)", ref_shape_str(nd, sh), fill,
                     ref_dtype_name(dt));
            tide_tensor *f = tide_full(nd, sh, fill, dt);
            ref_check_tensor(desc, f, dt, nd, sh, want, 0);
            tide_release(f);
        }
    int64_t s3[1] = {3};
    double nans[3] = {NAN, NAN, NAN}, infs[3] = {-INFINITY, -INFINITY, -INFINITY};
    tide_tensor *f = tide_full(1, s3, NAN, TIDE_FLOAT32);
    ref_check_tensor("full(NaN)", f, TIDE_FLOAT32, 1, s3, nans, 0);
    tide_release(f);
    f = tide_full(1, s3, -INFINITY, TIDE_FLOAT64);
    ref_check_tensor("full(-inf)", f, TIDE_FLOAT64, 1, s3, infs, 0);
    tide_release(f);
    /* Every one of 8 dims. */
    int64_t s8[8] = {1, 2, 1, 2, 1, 2, 1, 2};
    tide_tensor *z8 = tide_zeros(8, s8, TIDE_INT32);
    CHECK(z8 && tide_ndim(z8) == 8 && tide_numel(z8) == 16, "zeros with 8 dims: %s", tide_last_error());
    tide_release(z8);
}

static void test_arange(void)
{
    struct {
        double start, end, step;
        tide_dtype dt;
        int64_t n;
        double vals[12];
    } cases[] = {
        {0, 5, 1, TIDE_FLOAT32, 5, {0, 1, 2, 3, 4}},
        {0, 1, 0.3, TIDE_FLOAT32, 4, {0, 0.3, 0.6, 0.9}},
        {5, 0, -1, TIDE_INT64, 5, {5, 4, 3, 2, 1}},
        {0, 10, 3, TIDE_INT32, 4, {0, 3, 6, 9}},
        {1, 2.5, 0.5, TIDE_FLOAT64, 3, {1, 1.5, 2}},
        {-1, 1, 0.25, TIDE_FLOAT64, 8, {-1, -0.75, -0.5, -0.25, 0, 0.25, 0.5, 0.75}},
        {0, 0, 1, TIDE_FLOAT32, 0, {0}},
        {0, -3.5, -1, TIDE_FLOAT32, 4, {0, -1, -2, -3}},
        {2, 3, 5, TIDE_INT64, 1, {2}},
        {0, 1, 0.1, TIDE_FLOAT64, 10, {0, 0.1, 0.2, 0.30000000000000004, 0.4, 0.5, 0.6000000000000001,
                                       0.7000000000000001, 0.8, 0.9}},
        {-5, 5, 2, TIDE_INT32, 5, {-5, -3, -1, 1, 3}},
        {10, 0, -2.5, TIDE_FLOAT32, 4, {10, 7.5, 5, 2.5}},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char desc[128];
        snprintf(desc, sizeof desc, "arange(%g, %g, %g, %s)", cases[c].start, cases[c].end,
                 cases[c].step, ref_dtype_name(cases[c].dt));
        double want[12];
        for (int64_t i = 0; i < cases[c].n; i++)
            want[i] = ref_quantize(cases[c].dt, cases[c].vals[i]);
        tide_tensor *t = tide_arange(cases[c].start, cases[c].end, cases[c].step, cases[c].dt);
        ref_check_tensor(desc, t, cases[c].dt, 1, &cases[c].n, want,
                     cases[c].dt == TIDE_FLOAT32 ? 2e-6 : cases[c].dt == TIDE_FLOAT64 ? 1e-12 : 0);
        tide_release(t);
    }
    /* A long float32 arange: start + i*step, not an accumulated float32 sum. */
    tide_tensor *t = tide_arange(0, 999.95, 0.1, TIDE_FLOAT32);
    int64_t n = 10000;
    double *want = malloc((size_t)n * sizeof *want);
    for (int64_t i = 0; i < n; i++)
        want[i] = (double)(float)(0.1 * (double)i);
    ref_check_tensor("arange(0, 999.95, 0.1)", t, TIDE_FLOAT32, 1, &n, want, 2e-6);
    free(want);
    tide_release(t);
    /* A step of the wrong sign: PyTorch refuses; an empty result is the only other answer. */
    tide_clear_error();
    t = tide_arange(0, 10, -1, TIDE_FLOAT32);
    CHECK((t == NULL && strstr(tide_last_error(), "arange")) || (t && tide_numel(t) == 0),
          "arange(0, 10, -1): got %s, error \"%s\"", t ? "a non-empty tensor" : "NULL",
          tide_last_error());
    tide_release(t);
    CHECK_ERROR(tide_arange(0, 10, 0, TIDE_FLOAT32), "arange");
    CHECK_ERROR(tide_arange(0, INFINITY, 1, TIDE_FLOAT32), "arange");
    CHECK_ERROR(tide_arange(NAN, 1, 1, TIDE_FLOAT32), "arange");
    CHECK_ERROR(tide_arange(0, 1e30, 1e-10, TIDE_FLOAT32), "arange");
}

/* logspace: base ** linspace in float64, rounded once; exact where the powers are exact. */
static void test_logspace(void)
{
    int64_t n4 = 4, n3 = 3;
    double w2[4] = {1, 2, 4, 8};
    tide_tensor *t = tide_logspace_on(NULL, 0, 3, 4, 2, TIDE_FLOAT32);
    ref_check_tensor("logspace(0, 3, 4, base 2)", t, TIDE_FLOAT32, 1, &n4, w2, 0);
    tide_release(t);
    double w10[3] = {0.1, 1, 10}; /* pow(10, -1) in double, rounded to the nearest: exact here */
    t = tide_logspace_on(NULL, -1, 1, 3, 10, TIDE_FLOAT64);
    ref_check_tensor("logspace(-1, 1, 3)", t, TIDE_FLOAT64, 1, &n3, w10, 0);
    tide_release(t);
    double wi[3] = {1, 31, 1000}; /* 10^1.5 = 31.62 truncates to 31 as PyTorch's int cast */
    t = tide_logspace_on(NULL, 0, 3, 3, 10, TIDE_INT64);
    ref_check_tensor("logspace(0, 3, 3, int64)", t, TIDE_INT64, 1, &n3, wi, 0);
    tide_release(t);
    CHECK_ERROR(tide_logspace_on(NULL, 0, 1, -1, 10, TIDE_FLOAT32), "logspace");
    CHECK_ERROR(tide_logspace_on(NULL, 0, 1, 3, NAN, TIDE_FLOAT32), "logspace");
}

static void test_linspace(void)
{
    int64_t n0 = 0, n1 = 1;
    tide_tensor *t = tide_linspace(0, 1, 0, TIDE_FLOAT32);
    ref_check_tensor("linspace(0, 1, 0)", t, TIDE_FLOAT32, 1, &n0, NULL, 0);
    tide_release(t);
    double three = 3;
    t = tide_linspace(3, 7, 1, TIDE_FLOAT64);
    ref_check_tensor("linspace(3, 7, 1)", t, TIDE_FLOAT64, 1, &n1, &three, 0);
    tide_release(t);
    int64_t n5 = 5;
    double w5[5] = {0, 0.25, 0.5, 0.75, 1};
    t = tide_linspace(0, 1, 5, TIDE_FLOAT32);
    ref_check_tensor("linspace(0, 1, 5)", t, TIDE_FLOAT32, 1, &n5, w5, 0);
    tide_release(t);
    double wi[5] = {0, 2, 5, 7, 10};
    t = tide_linspace(0, 10, 5, TIDE_INT64);
    ref_check_tensor("linspace(0, 10, 5, int64)", t, TIDE_INT64, 1, &n5, wi, 0);
    tide_release(t);

    /* Endpoints are exact whatever rounding the steps take. */
    struct {
        double a, b;
        int64_t n;
        tide_dtype dt;
    } cases[] = {
        {-1, 1, 7, TIDE_FLOAT32},    {1, 0.1, 10, TIDE_FLOAT32}, {0.1, 0.7, 1001, TIDE_FLOAT32},
        {0.1, 0.7, 1001, TIDE_FLOAT64}, {-3.3, 2.9, 33, TIDE_FLOAT64}, {5, 5, 4, TIDE_FLOAT32},
    };
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        char desc[96];
        snprintf(desc, sizeof desc, "linspace(%g, %g, %lld, %s)", cases[c].a, cases[c].b,
                 (long long)cases[c].n, ref_dtype_name(cases[c].dt));
        t = tide_linspace(cases[c].a, cases[c].b, cases[c].n, cases[c].dt);
        double *want = malloc((size_t)cases[c].n * sizeof *want);
        double step = (cases[c].b - cases[c].a) / (double)(cases[c].n - 1);
        for (int64_t i = 0; i < cases[c].n; i++)
            want[i] = ref_quantize(cases[c].dt, cases[c].a + step * (double)i);
        CHECK(t && tide_get_dtype(t) == cases[c].dt && ref_same_shape(t, 1, &cases[c].n),
              "%s: got %s %s (%s)", desc, t ? ref_dtype_name(tide_get_dtype(t)) : "NULL",
              ref_tensor_shape_str(t), tide_last_error());
        double *got = ref_read(t);
        /* float32 steps carry the rounding of the step: allow an error on the scale of the range */
        double eps = cases[c].dt == TIDE_FLOAT32 ? 2e-6 : 1e-12;
        double atol = eps * (fabs(cases[c].a) + fabs(cases[c].b));
        int64_t bad = -1;
        for (int64_t i = 0; got && i < cases[c].n && bad < 0; i++)
            if (!(fabs(got[i] - want[i]) <= eps * fabs(want[i]) + atol))
                bad = i;
        CHECK(got && bad < 0, "%s: element %lld: got %.10g, want %.10g", desc, (long long)bad,
              got && bad >= 0 ? got[bad] : NAN, bad >= 0 ? want[bad] : NAN);
        CHECK(got && got[0] == ref_quantize(cases[c].dt, cases[c].a) &&
                  got[cases[c].n - 1] == ref_quantize(cases[c].dt, cases[c].b),
              "%s: endpoints %.17g, %.17g", desc, got ? got[0] : NAN,
              got ? got[cases[c].n - 1] : NAN);
        bool monotone = true;
        for (int64_t i = 1; got && i < cases[c].n; i++)
            monotone = monotone && (cases[c].b >= cases[c].a ? got[i] >= got[i - 1] : got[i] <= got[i - 1]);
        CHECK(monotone, "%s: not monotone", desc);
        free(got);
        free(want);
        tide_release(t);
    }
    CHECK_ERROR(tide_linspace(0, 1, -1, TIDE_FLOAT32), "linspace");
}

static void test_eye(void)
{
    struct {
        int64_t n, m;
        tide_dtype dt;
    } cases[] = {{3, 3, TIDE_FLOAT32}, {2, 4, TIDE_INT64}, {4, 2, TIDE_BOOL},
                 {0, 3, TIDE_FLOAT64}, {1, 1, TIDE_UINT8}, {5, 7, TIDE_INT32}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        double want[64];
        int64_t shape[2] = {cases[c].n, cases[c].m};
        for (int64_t i = 0; i < cases[c].n; i++)
            for (int64_t j = 0; j < cases[c].m; j++)
                want[i * cases[c].m + j] = i == j;
        char desc[64];
        snprintf(desc, sizeof desc, "eye(%lld, %lld, %s)", (long long)cases[c].n,
                 (long long)cases[c].m, ref_dtype_name(cases[c].dt));
        tide_tensor *t = tide_eye(cases[c].n, cases[c].m, cases[c].dt);
        ref_check_tensor(desc, t, cases[c].dt, 2, shape, want, 0);
        tide_release(t);
    }
    CHECK_ERROR(tide_eye(-1, 3, TIDE_FLOAT32), "eye");
}

static void test_scalar_from_data(void)
{
    double item = 0;
    tide_tensor *s = tide_scalar(3.5, TIDE_FLOAT64);
    CHECK(s && tide_ndim(s) == 0 && tide_numel(s) == 1 && tide_get_dtype(s) == TIDE_FLOAT64 &&
              tide_item(s, &item) == 0 && item == 3.5,
          "scalar(3.5, float64): %g", item);
    tide_release(s);
    s = tide_scalar(-3.7, TIDE_INT32);
    CHECK(s && tide_item(s, &item) == 0 && item == -3, "scalar(-3.7, int32) = %g, want -3", item);
    tide_release(s);
    s = tide_scalar(0.1, TIDE_FLOAT32);
    CHECK(s && tide_item(s, &item) == 0 && item == (double)0.1f, "scalar(0.1, float32) = %.17g", item);
    tide_release(s);
    s = tide_scalar(5, TIDE_BOOL);
    CHECK(s && tide_item(s, &item) == 0 && item == 1, "scalar(5, bool) = %g", item);
    tide_release(s);

    /* from_data copies, for every dtype. */
    for (int d = 0; d < NDT; d++) {
        tide_dtype dt = DTYPES[d];
        double v[6] = {1, 0, 3, 4, 1, 6}, want[6];
        unsigned char buf[48];
        int64_t shape[2] = {2, 3};
        for (int i = 0; i < 6; i++) {
            ref_store(buf, dt, i, v[i]);
            want[i] = ref_quantize(dt, v[i]);
        }
        tide_tensor *t = tide_from_data(buf, 2, shape, dt);
        memset(buf, 0, sizeof buf);
        char desc[64];
        snprintf(desc, sizeof desc, "from_data(%s [2, 3]) then clearing the source", ref_dtype_name(dt));
        ref_check_tensor(desc, t, dt, 2, shape, want, 0);
        tide_release(t);
    }
    /* 0-dim and empty */
    int32_t one = 42;
    tide_tensor *t = tide_from_data(&one, 0, NULL, TIDE_INT32);
    CHECK(t && tide_ndim(t) == 0 && tide_item(t, &item) == 0 && item == 42, "from_data 0-dim");
    tide_release(t);
    int64_t z[2] = {0, 4};
    t = tide_from_data(NULL, 2, z, TIDE_FLOAT32);
    CHECK(t && tide_numel(t) == 0 && ref_same_shape(t, 2, z), "from_data(NULL, [0, 4]): %s",
          tide_last_error());
    tide_release(t);
    /* int64 values beyond 2^53 survive. */
    int64_t big[2] = {INT64_MAX, INT64_MIN + 1}, got[2] = {0, 0}, two = 2;
    t = tide_from_data(big, 1, &two, TIDE_INT64);
    CHECK(t && tide_to_buffer(t, got, sizeof got) == 0 && got[0] == big[0] && got[1] == big[1],
          "int64 round trip: %lld %lld", (long long)got[0], (long long)got[1]);
    tide_release(t);
}

static int release_calls;
static void *release_data;
static void *release_ctx;
static void count_release(void *data, void *ctx)
{
    release_calls++;
    release_data = data;
    release_ctx = ctx;
}

static void test_wrap(void)
{
    float buf[12];
    for (int i = 0; i < 12; i++)
        buf[i] = (float)i;
    int64_t s34[2] = {3, 4};
    int ctx_marker = 0;
    release_calls = 0;
    tide_tensor *w = tide_wrap(buf, sizeof buf, 2, s34, NULL, TIDE_FLOAT32, count_release, &ctx_marker);
    CHECK(w != NULL, "wrap: %s", tide_last_error());
    if (!w)
        return;
    CHECK(tide_data_ptr(w) == (void *)buf, "wrap does not copy: data_ptr %p, buffer %p",
          tide_data_ptr(w), (void *)buf);
    CHECK(tide_is_contiguous(w) && tide_strides(w)[0] == 4 && tide_strides(w)[1] == 1,
          "wrap with NULL strides is row-major");
    buf[5] = 99;
    double item = 0;
    tide_tensor *row = tide_select(w, 0, 1);
    tide_tensor *el = tide_select(row, 0, 1);
    CHECK(el && tide_item(el, &item) == 0 && item == 99, "a write to the caller's buffer is seen: %g", item);
    /* writes through the tensor land in the caller's buffer */
    CHECK(tide_fill_(row, -1) == 0 && buf[4] == -1 && buf[7] == -1 && buf[3] == 3 && buf[8] == 8,
          "fill_ of a row of a wrapped buffer writes the buffer");
    tide_tensor *t = tide_transpose(w, 0, 1);
    tide_release(w);
    tide_release(row);
    CHECK(release_calls == 0, "release callback ran while views are alive (%d)", release_calls);
    tide_release(el);
    CHECK(release_calls == 0, "release callback ran while a view is alive (%d)", release_calls);
    tide_tensor *sum = tide_add(t, t); /* an op result owns its own memory */
    tide_release(t);
    CHECK(release_calls == 1 && release_data == (void *)buf && release_ctx == &ctx_marker,
          "release callback once with (data, ctx) after the last view: %d calls", release_calls);
    tide_release(sum);
    CHECK(release_calls == 1, "release callback called %d times", release_calls);

    /* custom strides: a column-major [4, 3] view of the buffer */
    for (int i = 0; i < 12; i++)
        buf[i] = (float)i;
    int64_t s43[2] = {4, 3}, st[2] = {1, 4};
    release_calls = 0;
    w = tide_wrap(buf, sizeof buf, 2, s43, st, TIDE_FLOAT32, count_release, NULL);
    double want[12];
    for (int i = 0; i < 4; i++)
        for (int j = 0; j < 3; j++)
            want[i * 3 + j] = j * 4 + i;
    ref_check_tensor("wrap [4, 3] strides [1, 4]", w, TIDE_FLOAT32, 2, s43, want, 0);
    CHECK(w && !tide_is_contiguous(w), "a column-major wrap is not contiguous");
    tide_tensor *c = tide_contiguous(w);
    ref_check_tensor("contiguous of a strided wrap", c, TIDE_FLOAT32, 2, s43, want, 0);
    CHECK(c && !tide_shares_storage(c, w), "contiguous of a strided wrap copies");
    tide_release(c);
    tide_release(w);
    CHECK(release_calls == 1, "strided wrap: release called %d times", release_calls);

    /* a stride-0 wrap reads one value many times; NULL release is allowed */
    int64_t s5[1] = {5}, st0[1] = {0};
    double dv = 2.5;
    w = tide_wrap(&dv, sizeof dv, 1, s5, st0, TIDE_FLOAT64, NULL, NULL);
    double fives[5] = {2.5, 2.5, 2.5, 2.5, 2.5};
    ref_check_tensor("wrap with stride 0", w, TIDE_FLOAT64, 1, s5, fives, 0);
    tide_release(w);
    /* a wrap over an offset inside a bigger buffer, int64 */
    int64_t ibuf[6] = {10, 11, 12, 13, 14, 15}, s2[1] = {2}, st2[1] = {2};
    w = tide_wrap(ibuf + 1, 5 * sizeof *ibuf, 1, s2, st2, TIDE_INT64, NULL, NULL);
    double wi[2] = {11, 13};
    ref_check_tensor("wrap of ibuf+1 with stride 2", w, TIDE_INT64, 1, s2, wi, 0);
    tide_release(w);
}

static void test_read_back_and_queries(void)
{
    double v[24];
    for (int i = 0; i < 24; i++)
        v[i] = i * 1.5;
    int64_t s234[3] = {2, 3, 4};
    tide_tensor *x = ref_from_doubles(v, 3, s234, TIDE_FLOAT64);
    CHECK(tide_ndim(x) == 3 && tide_numel(x) == 24, "ndim/numel");
    CHECK(tide_size(x, 0) == 2 && tide_size(x, 2) == 4 && tide_size(x, -1) == 4 && tide_size(x, -3) == 2,
          "tide_size with positive and negative dims");
    CHECK(tide_size(x, 3) == -1 && strstr(tide_last_error(), "3") != NULL, "tide_size(x, 3): %s",
          tide_last_error());
    CHECK(tide_size(x, -4) == -1, "tide_size(x, -4)");
    CHECK(tide_shape(x)[1] == 3 && tide_strides(x)[0] == 12 && tide_strides(x)[1] == 4 &&
              tide_strides(x)[2] == 1 && tide_offset(x) == 0,
          "shape/strides/offset");
    CHECK(tide_get_dtype(x) == TIDE_FLOAT64 && tide_is_contiguous(x), "dtype/contiguous");
    CHECK(tide_device_name(x) && strcmp(tide_device_name(x), "cpu") == 0, "device name %s",
          tide_device_name(x));
    CHECK(tide_retain(x) == x, "retain returns its argument");
    tide_release(x); /* the extra reference */
    CHECK(tide_numel(x) == 24, "still alive after releasing the extra reference");

    /* data_ptr of a view points at its first element */
    tide_tensor *sl = tide_slice(x, 2, 1, 4, 2);
    CHECK(sl && tide_offset(sl) == 1 &&
              (const char *)tide_data_ptr(sl) == (const char *)tide_data_ptr(x) + 1 * sizeof(double),
          "data_ptr of x[:, :, 1::2]");
    CHECK(sl && *(const double *)tide_data_ptr(sl) == 1.5, "first element through data_ptr");

    /* to_buffer of a non-contiguous view is row-major in logical order */
    tide_tensor *t = tide_transpose(sl, 0, 2); /* [2,3,2] */
    double out[12], want[12];
    int k = 0;
    for (int i = 0; i < 2; i++)
        for (int j = 0; j < 3; j++)
            for (int l = 0; l < 2; l++)
                want[k++] = v[(l * 3 + j) * 4 + 1 + 2 * i];
    CHECK(t && tide_to_buffer(t, out, sizeof out) == 0 && memcmp(out, want, sizeof out) == 0,
          "to_buffer of a transposed slice");
    CHECK(tide_to_buffer(t, out, sizeof out + 64) == 0, "to_buffer into a bigger buffer");
    CHECK(tide_to_buffer(t, out, sizeof out - 1) == -1 && strstr(tide_last_error(), "to_buffer"),
          "to_buffer into a buffer 1 byte short: %s", tide_last_error());
    tide_release(t);

    /* item */
    int64_t s111[3] = {1, 1, 1};
    tide_tensor *o = tide_full(3, s111, -7.25, TIDE_FLOAT32);
    double item = 0;
    CHECK(tide_item(o, &item) == 0 && item == -7.25, "item of [1,1,1]: %g", item);
    tide_release(o);
    int64_t big = ((int64_t)1 << 53) + 1;
    o = tide_from_data(&big, 0, NULL, TIDE_INT64);
    CHECK(tide_item(o, &item) == 0 && item == 9007199254740992.0, "item of int64 2^53+1: %.17g", item);
    tide_release(o);
    CHECK(tide_item(x, &item) == -1 && strstr(tide_last_error(), "item"), "item of 24 elements: %s",
          tide_last_error());
    tide_release(sl);
    tide_release(x);

    int prev = tide_get_num_threads();
    CHECK(prev >= 1, "tide_get_num_threads() = %d", prev);
    tide_set_num_threads(2);
    CHECK(tide_get_num_threads() == 2, "set_num_threads(2) -> %d", tide_get_num_threads());
    tide_set_num_threads(prev);
    CHECK(tide_get_num_threads() == prev, "num threads restored");
}

static void test_memory_stats(void)
{
    size_t used0, cached0, used1, cached1, used2, cached2, used3, cached3;
    tide_empty_cache();
    tide_memory_stats(&used0, &cached0);
    CHECK(cached0 == 0, "after tide_empty_cache nothing is cached: %zu", cached0);
    int64_t n = 1 << 18; /* 1 MiB of float32 */
    tide_tensor *t = tide_zeros(1, &n, TIDE_FLOAT32);
    tide_memory_stats(&used1, &cached1);
    CHECK(used1 >= used0 + (size_t)n * 4, "in use grows by the tensor: %zu -> %zu", used0, used1);
    tide_tensor *v = tide_slice(t, 0, 0, n, 2);
    tide_release(t);
    tide_memory_stats(&used2, &cached2);
    CHECK(used2 == used1 && cached2 == cached1, "a live view keeps the memory in use");
    tide_release(v);
    tide_memory_stats(&used2, &cached2);
    CHECK(used2 == used0, "released memory is no longer in use: %zu, was %zu", used2, used0);
    CHECK(cached2 >= cached1 + (size_t)n * 4, "released memory is cached: %zu -> %zu", cached1,
          cached2);
    /* The same size again comes from the cache. */
    t = tide_empty(1, &n, TIDE_FLOAT32);
    tide_memory_stats(&used3, &cached3);
    CHECK(used3 == used1 && cached3 + (size_t)n * 4 <= cached2,
          "a same-size tensor reuses the cached block: used %zu cached %zu (before %zu)", used3,
          cached3, cached2);
    tide_release(t);
    tide_empty_cache();
    tide_memory_stats(&used3, &cached3);
    CHECK(used3 == used0 && cached3 == 0, "empty_cache gives everything back: used %zu cached %zu",
          used3, cached3);
    /* A wrapped buffer is the caller's memory, not the cache's. */
    float buf[256];
    int64_t s256 = 256;
    tide_tensor *w = tide_wrap(buf, sizeof buf, 1, &s256, NULL, TIDE_FLOAT32, NULL, NULL);
    tide_release(w);
    tide_memory_stats(&used3, &cached3);
    CHECK(used3 == used0 && cached3 == 0, "a wrap leaves the cache alone: used %zu cached %zu", used3,
          cached3);
}

/* An allocation refused by the memory cap names the op that was called (zeros), not the
 * primitive that allocates (FILL, IOTA, RANDOM). */
static void test_out_of_memory_names_the_op(void)
{
    size_t limit = tide_get_memory_limit();
    tide_set_memory_limit((size_t)64 << 20);
    int64_t big = (int64_t)1 << 30; /* 4 GiB of float32, over the 64 MiB cap */
    CHECK_ERROR(tide_zeros(1, &big, TIDE_FLOAT32), "zeros: out of memory");
    CHECK_ERROR(tide_ones(1, &big, TIDE_FLOAT32), "ones: out of memory");
    CHECK_ERROR(tide_full(1, &big, 2.5, TIDE_FLOAT32), "full: out of memory");
    CHECK_ERROR(tide_empty(1, &big, TIDE_FLOAT32), "empty: out of memory");
    CHECK_ERROR(tide_rand(1, &big, TIDE_FLOAT32), "rand: out of memory");
    CHECK_ERROR(tide_randn(1, &big, TIDE_FLOAT32), "randn: out of memory");
    CHECK_ERROR(tide_randint(0, 9, 1, &big, TIDE_INT64), "randint: out of memory");
    CHECK_ERROR(tide_randperm(big, TIDE_INT64), "randperm: out of memory");
    CHECK_ERROR(tide_arange(0, (double)big, 1, TIDE_FLOAT32), "arange: out of memory");
    CHECK_ERROR(tide_linspace(0, 1, big, TIDE_FLOAT32), "linspace: out of memory");
    CHECK_ERROR(tide_eye(1 << 16, 1 << 16, TIDE_FLOAT32), "eye: out of memory");
    CHECK(!strstr(tide_last_error(), "fill"), "eye's error names no primitive: %s",
          tide_last_error());
    tide_set_memory_limit(limit);
}

int main(void)
{
    test_dtype_helpers();
    test_empty_zeros_ones_full();
    test_arange();
    test_linspace();
    test_logspace();
    test_eye();
    test_scalar_from_data();
    test_wrap();
    test_read_back_and_queries();
    test_memory_stats();
    test_out_of_memory_names_the_op();
    return test_summary("test_creation");
}
