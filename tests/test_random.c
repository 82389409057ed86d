/*
 * test_random.c — the random-number generator: Philox4x32-10 against Random123's known answers,
 * every op's values against a reference computed here from core/philox.h and the layout rules,
 * the same numbers for 1 and 2 threads, seeds and saved state, the moments of 1e6 samples,
 * randint ranges, randperm being a (uniform) permutation, the RANDOM op reaching the tracer,
 * and every error.
 */
#include <stdint.h>
#include <stdlib.h>

#include "core/philox.h"
#include "core/tensor.h"
#include "ops/dispatch.h"
#include "test_ref.h"
#include "test_util.h"

/* ---- helpers ------------------------------------------------------------------------------ */

static double *read_all(tide_tensor *t)
{
    double *v = ref_read(t);
    CHECK(v != NULL, "reading back failed: %s", tide_last_error());
    return v;
}

/* True when a and b have equal dtype, shape and bits. */
static bool same_tensor(tide_tensor *a, tide_tensor *b)
{
    if (!a || !b || tide_get_dtype(a) != tide_get_dtype(b) || tide_ndim(a) != tide_ndim(b))
        return false;
    for (int d = 0; d < tide_ndim(a); d++)
        if (tide_shape(a)[d] != tide_shape(b)[d])
            return false;
    size_t n = (size_t)tide_numel(a) * tide_dtype_size(tide_get_dtype(a));
    char *x = malloc(n + 1), *y = malloc(n + 1);
    bool same = tide_to_buffer(a, x, n) == 0 && tide_to_buffer(b, y, n) == 0 && memcmp(x, y, n) == 0;
    free(x);
    free(y);
    return same;
}

typedef struct moments {
    double mean, var, m4; /* m4: fourth central moment over var^2 (kurtosis) */
    double min, max;
} moments;

static moments moments_of(const double *v, int64_t n)
{
    moments m = {0, 0, 0, INFINITY, -INFINITY};
    for (int64_t i = 0; i < n; i++) {
        m.mean += v[i];
        if (v[i] < m.min)
            m.min = v[i];
        if (v[i] > m.max)
            m.max = v[i];
    }
    m.mean /= (double)n;
    double m2 = 0, m4 = 0;
    for (int64_t i = 0; i < n; i++) {
        double d = v[i] - m.mean;
        m2 += d * d;
        m4 += d * d * d * d;
    }
    m.var = m2 / (double)n;
    m.m4 = (m4 / (double)n) / (m.var * m.var);
    return m;
}

/* ---- Philox itself ------------------------------------------------------------------------ */

static void test_philox_known_answers(void)
{
    /* Random123's kat_vectors for philox4x32 with 10 rounds: counter, key, result. */
    static const uint32_t kat[3][10] = {
        {0, 0, 0, 0, 0, 0, 0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8},
        {0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff, 0x408f276d,
         0x41c83b0e, 0xa20bc7c6, 0x6d5451fd},
        {0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344, 0xa4093822, 0x299f31d0, 0xd16cfe09,
         0x94fdcceb, 0x5001e420, 0x24126ea1},
    };
    for (int t = 0; t < 3; t++) {
        uint32_t c[4] = {kat[t][0], kat[t][1], kat[t][2], kat[t][3]};
        td_philox4x32_10(c, kat[t][4], kat[t][5]);
        CHECK(c[0] == kat[t][6] && c[1] == kat[t][7] && c[2] == kat[t][8] && c[3] == kat[t][9],
              "vector %d: got %08x %08x %08x %08x", t, c[0], c[1], c[2], c[3]);
    }
    /* below64 against a 128-bit product. */
    uint64_t ranges[] = {0x100000001ull, 0xfffffffffffull, 1ull << 53, 0xffffffffffffffffull};
    uint32_t words[][2] = {{0, 0}, {0xffffffff, 0xffffffff}, {0x12345678, 0x9abcdef0}, {1, 0}};
    for (int r = 0; r < 4; r++) {
        for (int w = 0; w < 4; w++) {
            uint64_t x = ((uint64_t)words[w][0] << 32) | words[w][1];
            uint64_t want = (uint64_t)(((unsigned __int128)x * ranges[r]) >> 64);
            uint64_t got = td_philox_below64(words[w][0], words[w][1], ranges[r]);
            CHECK(got == want, "below64(%llx, %llx) = %llx, want %llx", (unsigned long long)x,
                  (unsigned long long)ranges[r], (unsigned long long)got, (unsigned long long)want);
        }
    }
}

/* ---- values against the layout rules ------------------------------------------------------- */

/* Words of element p: main stream and second stream. */
static void words_of(uint64_t seed, uint64_t p, uint32_t m[4], uint32_t s[4])
{
    td_philox_block(seed, p >> 2, 0, m);
    td_philox_block(seed, p >> 2, 1, s);
}

static double ref_uniform_value(tide_dtype dt, uint64_t seed, uint64_t p)
{
    uint32_t m[4], s[4];
    words_of(seed, p, m, s);
    return dt == TIDE_FLOAT32 ? (double)td_philox_u24(m[p & 3]) : td_philox_u53(m[p & 3], s[p & 3]);
}

static double ref_normal_value(tide_dtype dt, uint64_t seed, uint64_t p)
{
    uint32_t m[4], s[4];
    words_of(seed, p, m, s);
    unsigned w = (unsigned)(p & 2);
    double u1 = dt == TIDE_FLOAT32 ? td_philox_open32(m[w]) : td_philox_open53(m[w], s[w]);
    double u2 = dt == TIDE_FLOAT32 ? m[w + 1] * 0x1p-32 : td_philox_u53(m[w + 1], s[w + 1]);
    double r = sqrt(-2 * log(u1)), th = 2 * M_PI * u2;
    return (p & 1) ? r * sin(th) : r * cos(th);
}

static int64_t ref_int_value(uint64_t seed, uint64_t p, int64_t low, int64_t high)
{
    uint32_t m[4], s[4];
    words_of(seed, p, m, s);
    uint64_t range = (uint64_t)(high - low);
    uint64_t r = range <= 0x100000000ull ? td_philox_below32(m[p & 3], range)
                                         : td_philox_below64(m[p & 3], s[p & 3], range);
    return (int64_t)((uint64_t)low + r);
}

static void test_reference_values(void)
{
    const uint64_t seed = 0x0123456789abcdefull;
    int64_t n = 1003;
    for (int di = 0; di < 2; di++) {
        tide_dtype dt = di ? TIDE_FLOAT64 : TIDE_FLOAT32;
        uint64_t st[2] = {seed, 40};
        tide_set_rng_state(st);
        tide_tensor *u = tide_rand(1, &n, dt);
        tide_tensor *z = tide_randn(1, &n, dt);
        double *uv = read_all(u), *zv = read_all(z);
        int64_t bad_u = -1, bad_z = -1;
        /* rand takes elements 40..1042; randn starts at the next multiple of 4: 1044. */
        for (int64_t i = 0; uv && zv && i < n; i++) {
            if (bad_u < 0 && uv[i] != ref_uniform_value(dt, seed, 40 + (uint64_t)i))
                bad_u = i;
            double want = ref_quantize(dt, ref_normal_value(dt, seed, 1044 + (uint64_t)i));
            if (bad_z < 0 && !ref_close(zv[i], want, dt == TIDE_FLOAT32 ? 1e-7 : 1e-14, 1e-14))
                bad_z = i;
        }
        CHECK(bad_u < 0, "%s rand: element %lld differs from the reference", ref_dtype_name(dt),
              (long long)bad_u);
        CHECK(bad_z < 0, "%s randn: element %lld differs from the reference", ref_dtype_name(dt),
              (long long)bad_z);
        free(uv);
        free(zv);
        tide_release(u);
        tide_release(z);
    }
    /* randint, small and large ranges, into several dtypes. */
    struct {
        int64_t low, high;
        tide_dtype dt;
    } cases[] = {{-5, 7, TIDE_INT64},
                 {0, 1, TIDE_INT32},
                 {-2147483648ll, 2147483647ll, TIDE_INT32},
                 {0, 256, TIDE_UINT8},
                 {0, 2, TIDE_BOOL},
                 {-1000, 1000, TIDE_FLOAT32},
                 {-(1ll << 53), 1ll << 53, TIDE_INT64},
                 {3, (1ll << 32) + 3, TIDE_INT64},
                 {3, (1ll << 32) + 4, TIDE_INT64},
                 {-(1ll << 40), 1ll << 40, TIDE_FLOAT64}};
    for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++) {
        uint64_t st[2] = {seed + c, 8};
        tide_set_rng_state(st);
        tide_tensor *r = tide_randint(cases[c].low, cases[c].high, 1, &n, cases[c].dt);
        CHECK(r && tide_get_dtype(r) == cases[c].dt, "randint case %zu: %s", c, tide_last_error());
        double *v = r ? read_all(r) : NULL;
        int64_t bad = -1;
        for (int64_t i = 0; v && i < n && bad < 0; i++)
            if (v[i] != (double)ref_int_value(seed + c, 8 + (uint64_t)i, cases[c].low, cases[c].high))
                bad = i;
        CHECK(v && bad < 0, "randint [%lld, %lld) %s: element %lld differs", (long long)cases[c].low,
              (long long)cases[c].high, ref_dtype_name(cases[c].dt), (long long)bad);
        free(v);
        tide_release(r);
    }
}

/* ---- seeds, state, threads ----------------------------------------------------------------- */

static void test_default_seed(void)
{
    uint64_t st[2];
    tide_get_rng_state(st);
    CHECK(st[0] == 67280421310721ull && st[1] == 0, "default state (%llu, %llu)",
          (unsigned long long)st[0], (unsigned long long)st[1]);
}

static void test_seed_and_state(void)
{
    int64_t shape[2] = {7, 5};
    tide_manual_seed(42);
    tide_tensor *a = tide_rand(2, shape, TIDE_FLOAT32);
    tide_manual_seed(42);
    tide_tensor *b = tide_rand(2, shape, TIDE_FLOAT32);
    tide_tensor *c = tide_rand(2, shape, TIDE_FLOAT32);
    tide_manual_seed(43);
    tide_tensor *d = tide_rand(2, shape, TIDE_FLOAT32);
    CHECK(same_tensor(a, b), "same seed, different numbers");
    CHECK(!same_tensor(a, c), "a second call repeated the first");
    CHECK(!same_tensor(a, d), "seeds 42 and 43 gave the same numbers");
    tide_release(a), tide_release(b), tide_release(c), tide_release(d);

    /* Offsets: 35 elements take 36 (whole blocks); manual_seed restarts at 0. */
    uint64_t st[2];
    tide_manual_seed(7);
    tide_get_rng_state(st);
    CHECK(st[0] == 7 && st[1] == 0, "after manual_seed(7): (%llu, %llu)",
          (unsigned long long)st[0], (unsigned long long)st[1]);
    a = tide_randn(2, shape, TIDE_FLOAT64);
    tide_get_rng_state(st);
    CHECK(st[1] == 36, "offset after 35 elements: %llu", (unsigned long long)st[1]);

    /* Saving and restoring the state repeats every kind of draw. */
    tide_get_rng_state(st);
    int64_t n = 100;
    tide_tensor *r1 = tide_randn(1, &n, TIDE_FLOAT32);
    tide_tensor *r2 = tide_randint(-3, 9, 1, &n, TIDE_INT64);
    tide_tensor *r3 = tide_randperm(50, TIDE_INT64);
    tide_set_rng_state(st);
    tide_tensor *s1 = tide_randn(1, &n, TIDE_FLOAT32);
    tide_tensor *s2 = tide_randint(-3, 9, 1, &n, TIDE_INT64);
    tide_tensor *s3 = tide_randperm(50, TIDE_INT64);
    CHECK(same_tensor(r1, s1) && same_tensor(r2, s2) && same_tensor(r3, s3),
          "restored state gave other numbers");
    tide_release(a), tide_release(r1), tide_release(r2), tide_release(r3);
    tide_release(s1), tide_release(s2), tide_release(s3);

    /* Element i depends on (seed, offset + i) only: starting 4 later drops the first 4. */
    uint64_t s0[2] = {99, 0}, s4[2] = {99, 4};
    n = 1000;
    int64_t m = 996;
    tide_set_rng_state(s0);
    tide_tensor *full = tide_randn(1, &n, TIDE_FLOAT64);
    tide_set_rng_state(s4);
    tide_tensor *tail = tide_randn(1, &m, TIDE_FLOAT64);
    tide_tensor *full_tail = tide_slice(full, 0, 4, 1000, 1);
    tide_tensor *ftc = tide_contiguous(full_tail);
    CHECK(same_tensor(tail, ftc), "randn at offset 4 is not the tail of randn at offset 0");
    tide_release(full), tide_release(tail), tide_release(full_tail), tide_release(ftc);

    /* An unaligned restored offset starts at the next whole block. */
    uint64_t odd[2] = {5, 6};
    tide_set_rng_state(odd);
    n = 3;
    a = tide_rand(1, &n, TIDE_FLOAT32);
    tide_get_rng_state(st);
    CHECK(st[1] == 12, "offset after 3 elements from 6: %llu, want 12", (unsigned long long)st[1]);
    double *av = a ? read_all(a) : NULL;
    CHECK(av && av[0] == ref_uniform_value(TIDE_FLOAT32, 5, 8), "unaligned offset start");
    free(av);
    tide_release(a);

    /* An offset near 2^64 wraps with the counter instead of writing nothing. */
    uint64_t wrap[2] = {11, UINT64_MAX - 7};
    tide_set_rng_state(wrap);
    n = 16;
    a = tide_rand(1, &n, TIDE_FLOAT64);
    av = a ? read_all(a) : NULL;
    bool ok = av != NULL;
    for (int i = 0; ok && i < 16; i++)
        ok = av[i] == ref_uniform_value(TIDE_FLOAT64, 11, UINT64_MAX - 7 + (uint64_t)i);
    CHECK(ok, "draws across the 2^64 wrap differ from the reference");
    free(av);
    tide_release(a);
}

/* A tensor big enough to be split over threads, made with 1 and with 2 threads. */
static void test_threads(void)
{
    int saved = tide_get_num_threads();
    int64_t shape[2] = {301, 1001}; /* 301301 elements: many chunks, odd edges */
    for (int kind = 0; kind < 7; kind++) {
        tide_tensor *r[2];
        for (int t = 0; t < 2; t++) {
            tide_set_num_threads(t + 1);
            tide_manual_seed(1234);
            switch (kind) {
            case 0: r[t] = tide_rand(2, shape, TIDE_FLOAT32); break;
            case 1: r[t] = tide_rand(2, shape, TIDE_FLOAT64); break;
            case 2: r[t] = tide_randn(2, shape, TIDE_FLOAT32); break;
            case 3: r[t] = tide_randn(2, shape, TIDE_FLOAT64); break;
            case 4: r[t] = tide_randint(-50, 50, 2, shape, TIDE_INT32); break;
            case 5: r[t] = tide_randint(0, 1ll << 50, 2, shape, TIDE_INT64); break;
            default: r[t] = tide_randperm(301301, TIDE_INT64); break;
            }
        }
        CHECK(r[0] && same_tensor(r[0], r[1]), "kind %d: 1 and 2 threads differ (%s)", kind,
              tide_last_error());
        tide_release(r[0]);
        tide_release(r[1]);
    }
    tide_set_num_threads(saved);
}

/* ---- distributions --------------------------------------------------------------------------- */

#define NSAMPLES 1000000

static void check_moments(const char *what, tide_tensor *t, double mean, double var, double kurt,
                          double lo, double hi)
{
    double *v = t ? read_all(t) : NULL;
    CHECK(v != NULL, "%s: %s", what, tide_last_error());
    if (!v)
        return;
    int64_t n = tide_numel(t);
    moments m = moments_of(v, n);
    /* Five standard errors of each estimate. */
    double se_mean = sqrt(var / (double)n), se_var = var * sqrt((kurt - 1) / (double)n);
    CHECK(fabs(m.mean - mean) < 5 * se_mean, "%s: mean %.6f, want %.6f +- %.2g", what, m.mean,
          mean, 5 * se_mean);
    CHECK(fabs(m.var - var) < 5 * se_var, "%s: variance %.6f, want %.6f +- %.2g", what, m.var, var,
          5 * se_var);
    if (kurt == 3) /* normal: sqrt(96 / n) is the kurtosis estimate's standard error */
        CHECK(fabs(m.m4 - 3) < 5 * sqrt(96.0 / (double)n), "%s: kurtosis %.4f, want 3", what,
              m.m4);
    CHECK(m.min >= lo && m.max < hi, "%s: values in [%g, %g], want [%g, %g)", what, m.min, m.max,
          lo, hi);
    if (kurt == 3) {
        /* The cosine and sine of one Box-Muller pair are uncorrelated. */
        double c = 0;
        for (int64_t i = 0; i + 1 < n; i += 2)
            c += (v[i] - m.mean) * (v[i + 1] - m.mean);
        c /= (double)(n / 2) * m.var;
        CHECK(fabs(c) < 5 / sqrt((double)(n / 2)), "%s: pair correlation %.5f", what, c);
    }
    free(v);
}

static void test_moments(void)
{
    tide_manual_seed(2024);
    int64_t n = NSAMPLES;
    for (int di = 0; di < 2; di++) {
        tide_dtype dt = di ? TIDE_FLOAT64 : TIDE_FLOAT32;
        char what[64];
        tide_tensor *u = tide_rand(1, &n, dt);
        snprintf(what, sizeof what, "rand %s", ref_dtype_name(dt));
        check_moments(what, u, 0.5, 1.0 / 12, 1.8, 0, 1);
        tide_release(u);
        tide_tensor *z = tide_randn(1, &n, dt);
        snprintf(what, sizeof what, "randn %s", ref_dtype_name(dt));
        check_moments(what, z, 0, 1, 3, -9, 9);
        tide_release(z);
    }
    tide_tensor *t = tide_empty(1, &n, TIDE_FLOAT32);
    CHECK(tide_uniform_(t, 2, 5) == 0, "uniform_: %s", tide_last_error());
    check_moments("uniform_(2, 5)", t, 3.5, 0.75, 1.8, 2, 5);
    CHECK(tide_normal_(t, 5, 2) == 0, "normal_: %s", tide_last_error());
    check_moments("normal_(5, 2)", t, 5, 4, 3, 5 - 18, 5 + 18);
    tide_release(t);

    /* randint: a chi-square over the 10 values of [-3, 7) and the extremes of a wide range. */
    tide_tensor *r = tide_randint(-3, 7, 1, &n, TIDE_INT64);
    double *v = r ? read_all(r) : NULL;
    if (v) {
        int64_t count[10] = {0}, outside = 0;
        for (int64_t i = 0; i < n; i++) {
            if (v[i] < -3 || v[i] > 6 || v[i] != floor(v[i]))
                outside++;
            else
                count[(int)v[i] + 3]++;
        }
        double chi2 = 0, e = n / 10.0;
        for (int k = 0; k < 10; k++)
            chi2 += (count[k] - e) * (count[k] - e) / e;
        CHECK(outside == 0, "randint(-3, 7): %lld values outside", (long long)outside);
        CHECK(chi2 < 33.7, "randint(-3, 7): chi-square %.2f (9 dof; 33.7 is p = 1e-4)", chi2);
    }
    free(v);
    tide_release(r);
    int64_t wide = 1ll << 40;
    r = tide_randint(-wide, wide, 1, &n, TIDE_INT64);
    check_moments("randint(-2^40, 2^40)", r, -0.5, (4.0 * wide * wide) / 12, 1.8, -wide, wide);
    tide_release(r);

    /* bernoulli: the mean is p; p = 0 and 1 are exact; the dtype is p's. */
    tide_tensor *p = tide_full(1, &n, 0.3, TIDE_FLOAT64);
    tide_tensor *b = tide_bernoulli(p);
    CHECK(b && tide_get_dtype(b) == TIDE_FLOAT64, "bernoulli dtype");
    check_moments("bernoulli(0.3)", b, 0.3, 0.21, (1 - 3 * 0.21) / 0.21 + 0, -0.5, 1.5);
    tide_release(b);
    tide_release(p);
    int64_t shape[2] = {3, 33};
    double pv[99];
    for (int i = 0; i < 99; i++)
        pv[i] = i % 3 == 0 ? 0.0 : i % 3 == 1 ? 1.0 : (i % 2 ? -0.5 : 1.5); /* outside [0, 1] */
    p = ref_from_doubles(pv, 2, shape, TIDE_FLOAT32);
    b = tide_bernoulli(p);
    double *bv = b ? read_all(b) : NULL;
    bool ok = bv && tide_get_dtype(b) == TIDE_FLOAT32 && ref_same_shape(b, 2, shape);
    for (int i = 0; ok && i < 99; i++)
        ok = bv[i] == (pv[i] >= 1 ? 1.0 : 0.0);
    CHECK(ok, "bernoulli with p in {0, 1, -0.5, 1.5}");
    free(bv);
    tide_release(b);
    tide_release(p);
}

static void test_uniform_edges(void)
{
    /* [1, next float after 1): every value must be 1, not b after rounding. */
    int64_t n = 4096;
    tide_tensor *t = tide_empty(1, &n, TIDE_FLOAT32);
    CHECK(tide_uniform_(t, 1.0, 1.0 + 0x1p-23) == 0, "uniform_: %s", tide_last_error());
    double *v = read_all(t);
    bool ok = v != NULL;
    for (int64_t i = 0; ok && i < n; i++)
        ok = v[i] == 1.0;
    CHECK(ok, "uniform_ on a one-float range reached high");
    free(v);
    /* low == high: every value is low. */
    CHECK(tide_uniform_(t, -2.5, -2.5) == 0, "uniform_(-2.5, -2.5): %s", tide_last_error());
    v = read_all(t);
    ok = v != NULL;
    for (int64_t i = 0; ok && i < n; i++)
        ok = v[i] == -2.5;
    CHECK(ok, "uniform_ with low == high");
    free(v);

    /* 0.1 is not a float: values that round up to float(0.1) > 0.1 must come back below. */
    CHECK(tide_uniform_(t, 0.0999999, 0.1) == 0, "uniform_(0.0999999, 0.1): %s",
          tide_last_error());
    v = read_all(t);
    ok = v != NULL;
    for (int64_t i = 0; ok && i < n; i++)
        ok = v[i] < 0.1 && v[i] >= (double)(float)0.0999999 - 1e-9;
    CHECK(ok, "uniform_(0.0999999, 0.1) in float32 left [low, high)");
    free(v);
    tide_release(t);
    tide_tensor *d = tide_empty(1, &n, TIDE_FLOAT64);
    CHECK(tide_uniform_(d, 1.0, 1.0 + 0x1p-52) == 0, "uniform_ float64: %s", tide_last_error());
    v = read_all(d);
    ok = v != NULL;
    for (int64_t i = 0; ok && i < n; i++)
        ok = v[i] == 1.0;
    CHECK(ok, "float64 uniform_ on a one-double range reached high");
    free(v);
    tide_release(d);

    /* In place into a strided view: only the view changes. */
    int64_t shape[2] = {6, 8};
    tide_tensor *z = tide_zeros(2, shape, TIDE_FLOAT64);
    tide_tensor *col = tide_slice(z, 1, 1, 8, 3); /* columns 1, 4, 7 */
    tide_tensor *colt = tide_transpose(col, 0, 1);
    CHECK(tide_normal_(colt, 10, 1) == 0, "normal_ on a view: %s", tide_last_error());
    v = read_all(z);
    ok = v != NULL;
    for (int i = 0; ok && i < 48; i++) {
        bool in_view = (i % 8) % 3 == 1;
        ok = in_view ? (v[i] > 0) : (v[i] == 0);
    }
    CHECK(ok, "normal_ on a strided view wrote outside it or missed an element");
    free(v);
    tide_release(colt), tide_release(col), tide_release(z);

    /* Shapes: 0-dim and empty. */
    tide_tensor *s = tide_rand(0, NULL, TIDE_FLOAT64);
    CHECK(s && tide_ndim(s) == 0 && tide_numel(s) == 1, "0-dim rand");
    double sv = -1;
    CHECK(s && tide_item(s, &sv) == 0 && sv >= 0 && sv < 1, "0-dim rand value %g", sv);
    tide_release(s);
    int64_t e[2] = {3, 0};
    s = tide_randn(2, e, TIDE_FLOAT32);
    CHECK(s && tide_numel(s) == 0 && ref_same_shape(s, 2, e), "empty randn");
    tide_release(s);
    s = tide_randint(0, 3, 2, e, TIDE_INT32);
    CHECK(s && tide_numel(s) == 0, "empty randint");
    tide_release(s);
}

static void test_randperm(void)
{
    tide_manual_seed(5);
    int64_t sizes[] = {0, 1, 2, 17, 1000, 100003};
    tide_dtype dts[] = {TIDE_INT64, TIDE_INT32, TIDE_FLOAT32, TIDE_FLOAT64, TIDE_UINT8};
    for (size_t si = 0; si < sizeof sizes / sizeof sizes[0]; si++) {
        for (size_t di = 0; di < sizeof dts / sizeof dts[0]; di++) {
            int64_t n = sizes[si];
            if (dts[di] == TIDE_UINT8 && n > 256)
                continue;
            tide_tensor *p = tide_randperm(n, dts[di]);
            CHECK(p && tide_get_dtype(p) == dts[di] && ref_same_shape(p, 1, &n),
                  "randperm(%lld, %s): %s", (long long)n, ref_dtype_name(dts[di]),
                  tide_last_error());
            double *v = p ? read_all(p) : NULL;
            char *seen = calloc((size_t)n + 1, 1);
            bool ok = v != NULL;
            int64_t moved = 0;
            for (int64_t i = 0; ok && i < n; i++) {
                int64_t k = (int64_t)v[i];
                ok = v[i] == (double)k && k >= 0 && k < n && !seen[k];
                if (ok)
                    seen[k] = 1;
                moved += k != i;
            }
            CHECK(ok, "randperm(%lld, %s) is not a permutation", (long long)n,
                  ref_dtype_name(dts[di]));
            if (n >= 1000)
                CHECK(moved > n * 9 / 10, "randperm(%lld) left %lld of %lld in place",
                      (long long)n, (long long)(n - moved), (long long)n);
            free(seen);
            free(v);
            tide_release(p);
        }
    }
    /* Uniform over the 6 permutations of 3: a chi-square over 6000 draws. */
    int count[6] = {0};
    for (int t = 0; t < 6000; t++) {
        tide_tensor *p = tide_randperm(3, TIDE_INT64);
        int64_t v[3] = {0};
        if (!p || tide_to_buffer(p, v, sizeof v) < 0) {
            CHECK(0, "randperm(3): %s", tide_last_error());
            tide_release(p);
            break;
        }
        count[v[0] * 2 + (v[1] > v[2])]++;
        tide_release(p);
    }
    double chi2 = 0;
    for (int k = 0; k < 6; k++)
        chi2 += (count[k] - 1000.0) * (count[k] - 1000.0) / 1000.0;
    CHECK(chi2 < 25.7, "randperm(3): chi-square %.2f over 6 permutations (5 dof; p = 1e-4)", chi2);
}

/* ---- the op reaches the tracer -------------------------------------------------------------- */

static int traced_random;
static tide_attrs traced_attrs;

static tide_tensor *trace_random(void *ctx, tide_op op, const td_meta *meta, tide_tensor *dst,
                                 tide_tensor *const *in, int nin, const tide_attrs *attrs,
                                 const tide_tensor *out_view)
{
    (void)ctx, (void)in, (void)nin;
    if (op == TIDE_OP_RANDOM) {
        traced_random++;
        traced_attrs = *attrs;
    }
    if (dst)
        return tide_retain(dst);
    if (out_view)
        return tide_retain((tide_tensor *)out_view);
    return tide_empty(meta->ndim, meta->shape, meta->dtype);
}

static void test_traced(void)
{
    uint64_t st[2] = {77, 16};
    tide_set_rng_state(st);
    td_hooks *h = td_thread_hooks();
    h->trace = trace_random;
    int64_t n = 10;
    tide_tensor *r = tide_randint(2, 9, 1, &n, TIDE_INT64);
    h->trace = NULL;
    CHECK(traced_random == 1, "RANDOM traced %d times", traced_random);
    CHECK(traced_attrs.nints == 3 && traced_attrs.ints[0] == 2 && traced_attrs.ints[1] == 77 &&
              traced_attrs.ints[2] == 16 && traced_attrs.values[0] == 2 &&
              traced_attrs.values[1] == 9,
          "traced attributes (%lld, %lld, %lld), (%g, %g)", (long long)traced_attrs.ints[0],
          (long long)traced_attrs.ints[1], (long long)traced_attrs.ints[2],
          traced_attrs.values[0], traced_attrs.values[1]);
    tide_release(r);
}

/* ---- errors --------------------------------------------------------------------------------- */

#define CHECK_STATUS_ERROR(call, ...)                                                              \
    do {                                                                                           \
        int rc_ = (call);                                                                          \
        const char *frags_[] = {__VA_ARGS__, NULL};                                                \
        bool ok_ = rc_ == -1;                                                                      \
        for (int k_ = 0; ok_ && frags_[k_]; k_++)                                                  \
            ok_ = strstr(tide_last_error(), frags_[k_]) != NULL;                                   \
        CHECK(ok_, "%s gave %d with error \"%s\"", #call, rc_, tide_last_error());                \
    } while (0)

static void test_errors(void)
{
    int64_t shape[2] = {2, 3}, neg[2] = {2, -1}, n = 4;
    int64_t big[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    CHECK_ERROR(tide_rand(2, shape, TIDE_INT32), "rand", "int32", "floating dtype");
    CHECK_ERROR(tide_randn(2, shape, TIDE_BOOL), "randn", "bool");
    CHECK_ERROR(tide_rand(2, shape, (tide_dtype)99), "rand", "invalid dtype");
    CHECK_ERROR(tide_rand(2, neg, TIDE_FLOAT32), "rand", "-1");
    CHECK_ERROR(tide_randn(9, big, TIDE_FLOAT32), "randn");
    CHECK_ERROR(tide_rand(1, NULL, TIDE_FLOAT32), "rand");
    CHECK_ERROR(tide_randint(5, 5, 1, &n, TIDE_INT64), "randint", "low (5)", "high (5)");
    CHECK_ERROR(tide_randint(7, 3, 1, &n, TIDE_INT64), "randint", "less than");
    CHECK_ERROR(tide_randint(0, 3, 2, neg, TIDE_INT64), "randint", "-1");
    CHECK_ERROR(tide_randint(0, 3, 1, &n, (tide_dtype)-1), "randint", "invalid dtype");
    CHECK_ERROR(tide_randint(-1, 3, 1, &n, TIDE_UINT8), "randint", "uint8");
    CHECK_ERROR(tide_randint(0, 257, 1, &n, TIDE_UINT8), "randint", "uint8", "256");
    CHECK_ERROR(tide_randint(0, 3, 1, &n, TIDE_BOOL), "randint", "bool");
    CHECK_ERROR(tide_randint(0, 2147483649ll, 1, &n, TIDE_INT32), "randint", "int32");
    CHECK_ERROR(tide_randint(0, (1ll << 24) + 2, 1, &n, TIDE_FLOAT32), "randint", "float32");
    CHECK_ERROR(tide_randint(0, (1ll << 53) + 1, 1, &n, TIDE_INT64), "randint", "int64");
    CHECK_ERROR(tide_randint(INT64_MIN, 0, 1, &n, TIDE_INT64), "randint", "int64");
    CHECK_ERROR(tide_bernoulli(NULL), "bernoulli", "NULL");
    tide_tensor *ip = tide_zeros(2, shape, TIDE_INT64);
    CHECK_ERROR(tide_bernoulli(ip), "bernoulli", "int64");
    CHECK_ERROR(tide_randperm(-1, TIDE_INT64), "randperm", "non-negative", "-1");
    CHECK_ERROR(tide_randperm(3, TIDE_BOOL), "randperm", "bool");
    CHECK_ERROR(tide_randperm(257, TIDE_UINT8), "randperm", "uint8");
    CHECK_ERROR(tide_randperm(3, (tide_dtype)42), "randperm", "invalid dtype");
    CHECK_ERROR(tide_randperm(INT64_MAX, TIDE_INT64), "randperm");
    CHECK_ERROR(tide_randperm(INT64_C(1) << 40, TIDE_INT64), "randperm", "out of memory");
    tide_tensor *f = tide_zeros(2, shape, TIDE_FLOAT32);
    CHECK_STATUS_ERROR(tide_uniform_(NULL, 0, 1), "uniform_", "NULL");
    CHECK_STATUS_ERROR(tide_uniform_(ip, 0, 1), "uniform_", "int64");
    CHECK_STATUS_ERROR(tide_uniform_(f, 2, 1), "uniform_", "greater");
    CHECK_STATUS_ERROR(tide_uniform_(f, 0, INFINITY), "uniform_", "finite");
    CHECK_STATUS_ERROR(tide_uniform_(f, -1.7e308, 1.7e308), "uniform_", "finite");
    CHECK_STATUS_ERROR(tide_uniform_(f, NAN, 1), "uniform_", "finite");
    CHECK_STATUS_ERROR(tide_uniform_(f, 0, 1e39), "uniform_", "high", "float32's range");
    CHECK_STATUS_ERROR(tide_uniform_(f, -1e39, 0), "uniform_", "low", "float32's range");
    CHECK_STATUS_ERROR(tide_normal_(f, 1e39, 1), "normal_", "mean", "float32's range");
    CHECK_STATUS_ERROR(tide_normal_(f, 0, 1e39), "normal_", "std", "float32's range");
    CHECK_STATUS_ERROR(tide_normal_(NULL, 0, 1), "normal_", "NULL");
    CHECK_STATUS_ERROR(tide_normal_(ip, 0, 1), "normal_", "int64");
    CHECK_STATUS_ERROR(tide_normal_(f, 0, -1), "normal_", "std", "-1");
    CHECK_STATUS_ERROR(tide_normal_(f, NAN, 1), "normal_", "finite");
    CHECK_STATUS_ERROR(tide_normal_(f, 0, INFINITY), "normal_", "finite");
    /* A failed fill leaves the tensor alone. */
    double *fv = read_all(f);
    CHECK(fv && fv[0] == 0 && fv[5] == 0, "a failed uniform_/normal_ wrote into the tensor");
    free(fv);
    /* The state functions are void: NULL leaves an error message and the state unchanged. */
    uint64_t before[2], after[2];
    tide_get_rng_state(before);
    tide_clear_error();
    tide_get_rng_state(NULL);
    CHECK(strstr(tide_last_error(), "get_rng_state"), "get_rng_state(NULL): \"%s\"",
          tide_last_error());
    tide_clear_error();
    tide_set_rng_state(NULL);
    CHECK(strstr(tide_last_error(), "set_rng_state"), "set_rng_state(NULL): \"%s\"",
          tide_last_error());
    tide_get_rng_state(after);
    CHECK(before[0] == after[0] && before[1] == after[1], "the NULL calls changed the state");
    /* A failed call draws nothing. */
    tide_get_rng_state(before);
    tide_release(tide_randint(3, 1, 1, &n, TIDE_INT64));
    tide_get_rng_state(after);
    CHECK(before[1] == after[1], "a failed randint advanced the offset");
    tide_release(f);
    tide_release(ip);
}

int main(void)
{
    test_default_seed(); /* first: nothing has drawn yet */
    test_philox_known_answers();
    test_reference_values();
    test_seed_and_state();
    test_threads();
    test_moments();
    test_uniform_edges();
    test_randperm();
    test_traced();
    test_errors();
    return test_summary("test_random");
}
