/*
 * test_matmul.c — tide_matmul against a naive triple loop in doubles: vector·vector,
 * matrix·vector, vector·matrix, matrix·matrix, batched with broadcast batch dims, odd sizes
 * (1, 7, 129), K = 0 and empty dims, every layout of each operand (contiguous, transposed,
 * sliced along columns (copied for BLAS), sliced along rows (passed with a leading dimension),
 * expanded), float32/float64 (BLAS), int32/int64/uint8 (exact, wrapping), dtype promotion,
 * NaN handling, every error, and, in child processes started before tide loads OpenBLAS, the
 * choice of OpenBLAS kernels, the environment variables around it and a missing library.
 */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdlib.h>
#include <strings.h>
#include <sys/wait.h>
#include <unistd.h>

#include "devices/cpu/cpu_blas.h"
#include "tide.h"
#include "test_util.h"
#include "test_ref.h"

#define NDT 5
static const tide_dtype DTYPES[NDT] = {TIDE_FLOAT32, TIDE_FLOAT64, TIDE_INT32, TIDE_INT64,
                                       TIDE_UINT8};

/* The layouts of test_ref.h, plus rows taken with a step (the matrix keeps a unit column
 * stride, so BLAS gets it without a copy, through its leading dimension) and the last two dims
 * transposed (BLAS's trans flag; test_ref.h's transposed layout reverses every dim, which for
 * batches leaves no unit stride and so takes the copy path). */
enum { ROW_SLICED = REF_NUM_LAYOUTS, MAT_TRANSPOSED, NUM_LAYOUTS };

static const char *layout_name(int layout)
{
    return layout == ROW_SLICED       ? "row-sliced"
           : layout == MAT_TRANSPOSED ? "matrix-transposed"
                                      : ref_layout_name(layout);
}

/* The values of v (row-major in shape) in a tensor whose last two dims are a transposed view. */
static tide_tensor *make_mat_transposed(const double *v, int ndim, const int64_t *shape,
                                        tide_dtype dt)
{
    int64_t st[TIDE_MAX_DIMS], idx[TIDE_MAX_DIMS] = {0}, sidx[TIDE_MAX_DIMS];
    memcpy(st, shape, (size_t)ndim * sizeof *shape);
    st[ndim - 2] = shape[ndim - 1];
    st[ndim - 1] = shape[ndim - 2];
    int64_t n = ref_numel(ndim, shape);
    double *sv = malloc((size_t)(n > 0 ? n : 1) * sizeof *sv);
    if (n > 0) {
        do {
            memcpy(sidx, idx, (size_t)ndim * sizeof *idx);
            sidx[ndim - 2] = idx[ndim - 1];
            sidx[ndim - 1] = idx[ndim - 2];
            sv[ref_flat(ndim, st, sidx)] = v[ref_flat(ndim, shape, idx)];
        } while (ref_next_index(ndim, shape, idx));
    }
    tide_tensor *s = ref_from_doubles(sv, ndim, st, dt);
    free(sv);
    tide_tensor *t = tide_transpose(s, -2, -1);
    tide_release(s);
    return t;
}

static tide_tensor *make(const double *v, int ndim, const int64_t *shape, tide_dtype dt,
                         int layout)
{
    if (layout == MAT_TRANSPOSED)
        return ndim < 2 ? ref_make(v, ndim, shape, dt, REF_CONTIG)
                        : make_mat_transposed(v, ndim, shape, dt);
    if (layout != ROW_SLICED || ndim < 2)
        return ref_make(v, ndim, shape, dt, layout == ROW_SLICED ? REF_SLICED : layout);
    int64_t big[TIDE_MAX_DIMS], idx[TIDE_MAX_DIMS] = {0}, bidx[TIDE_MAX_DIMS];
    memcpy(big, shape, (size_t)ndim * sizeof *shape);
    int64_t rows = shape[ndim - 2];
    big[ndim - 2] = 2 * rows + 1;
    int64_t n = ref_numel(ndim, shape), bn = ref_numel(ndim, big);
    double *bv = malloc((size_t)(bn > 0 ? bn : 1) * sizeof *bv);
    for (int64_t i = 0; i < bn; i++)
        bv[i] = 99; /* never read */
    if (n > 0) {
        do {
            memcpy(bidx, idx, (size_t)ndim * sizeof *idx);
            bidx[ndim - 2] = 2 * idx[ndim - 2] + 1;
            bv[ref_flat(ndim, big, bidx)] = v[ref_flat(ndim, shape, idx)];
        } while (ref_next_index(ndim, shape, idx));
    }
    tide_tensor *b = ref_from_doubles(bv, ndim, big, dt);
    free(bv);
    tide_tensor *t = tide_slice(b, ndim - 2, 1, 2 * rows + 1, 2);
    tide_release(b);
    return t;
}

/* ---- the reference -------------------------------------------------------------------------- */

/* torch.matmul's shape rule, in the test's own words. */
static int ref_out_shape(int na, const int64_t *as, int nb, const int64_t *bs, int64_t *out)
{
    int bna = na > 2 ? na - 2 : 0, bnb = nb > 2 ? nb - 2 : 0;
    int nbatch = bna > bnb ? bna : bnb, nd = 0;
    for (int d = 0; d < nbatch; d++) {
        int ia = d - (nbatch - bna), ib = d - (nbatch - bnb);
        int64_t sa = ia >= 0 ? as[ia] : 1, sb = ib >= 0 ? bs[ib] : 1;
        out[nd++] = sa == 1 ? sb : sa;
    }
    if (na > 1)
        out[nd++] = as[na - 2];
    if (nb > 1)
        out[nd++] = bs[nb - 1];
    return nd;
}

/* want[i] = sum_k a[..., m, k] * b[..., k, n] over the broadcast batch; bound[i] = sum |a*b|
 * (for the floating-point tolerance). Integer results wrap to dtype dt exactly. */
static void ref_matmul(const double *a, int na, const int64_t *as, const double *b, int nb,
                       const int64_t *bs, tide_dtype dt, double *want, double *bound)
{
    int64_t K = as[na - 1], M = na > 1 ? as[na - 2] : 1, N = nb > 1 ? bs[nb - 1] : 1;
    int bna = na > 2 ? na - 2 : 0, bnb = nb > 2 ? nb - 2 : 0;
    int nbatch = bna > bnb ? bna : bnb;
    int64_t batch[TIDE_MAX_DIMS], total = 1;
    for (int d = 0; d < nbatch; d++) {
        int ia = d - (nbatch - bna), ib = d - (nbatch - bnb);
        int64_t sa = ia >= 0 ? as[ia] : 1, sb = ib >= 0 ? bs[ib] : 1;
        batch[d] = sa == 1 ? sb : sa;
        total *= batch[d];
    }
    for (int64_t t = 0; t < total; t++) {
        int64_t idx[TIDE_MAX_DIMS], rem = t, oa = 0, ob = 0, sta = 1, stb = 1;
        for (int d = nbatch - 1; d >= 0; d--) {
            idx[d] = rem % batch[d];
            rem /= batch[d];
        }
        for (int d = nbatch - 1; d >= 0; d--) { /* row-major batch offsets, broadcast dims 0 */
            int ia = d - (nbatch - bna), ib = d - (nbatch - bnb);
            if (ia >= 0) {
                oa += (as[ia] == 1 ? 0 : idx[d]) * sta;
                sta *= as[ia];
            }
            if (ib >= 0) {
                ob += (bs[ib] == 1 ? 0 : idx[d]) * stb;
                stb *= bs[ib];
            }
        }
        const double *pa = a + oa * M * K, *pb = b + ob * K * N;
        for (int64_t i = 0; i < M; i++)
            for (int64_t j = 0; j < N; j++) {
                double sum = 0, abs_sum = 0;
                uint64_t wrapped = 0;
                for (int64_t l = 0; l < K; l++) {
                    double p = pa[i * K + l] * pb[l * N + j];
                    sum += p;
                    abs_sum += fabs(p);
                    wrapped += (uint64_t)(int64_t)pa[i * K + l] * (uint64_t)(int64_t)pb[l * N + j];
                }
                int64_t o = (t * M + i) * N + j;
                want[o] = ref_is_float(dt) ? sum : ref_quantize(dt, (double)(int64_t)wrapped);
                bound[o] = abs_sum;
            }
    }
}

/* Float results within K unit roundoffs of sum |a*b| (the classic bound for a dot product). */
static void check_result(const char *desc, const tide_tensor *t, tide_dtype dt, int nd,
                         const int64_t *shape, const double *want, const double *bound,
                         int64_t K)
{
    if (!t) {
        CHECK(t != NULL, "%s: failed: %s", desc, tide_last_error());
        return;
    }
    CHECK(tide_get_dtype(t) == dt, "%s: dtype %s, want %s", desc,
          ref_dtype_name(tide_get_dtype(t)), ref_dtype_name(dt));
    bool shape_ok = ref_same_shape(t, nd, shape);
    CHECK(shape_ok, "%s: shape %s, want %s", desc, ref_tensor_shape_str(t),
          ref_shape_str(nd, shape));
    if (!shape_ok)
        return;
    double *got = ref_read(t);
    CHECK(got != NULL, "%s: reading failed: %s", desc, tide_last_error());
    if (!got)
        return;
    double u = dt == TIDE_FLOAT32 ? 6e-8 : dt == TIDE_FLOAT64 ? 1.2e-16 : 0;
    int64_t n = ref_numel(nd, shape), bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++)
        if (!(fabs(got[i] - want[i]) <= (double)(K + 2) * u * bound[i]))
            bad = i;
    CHECK(bad < 0, "%s: first mismatch at %s: got %.10g, want %.10g", desc,
          ref_index_str(nd, shape, bad), bad >= 0 ? got[bad] : 0, bad >= 0 ? want[bad] : 0);
    free(got);
}

/* Multiplies a and b of the given shapes in every pair of the layouts in the mask (bit i:
 * layout i) and the first ndtypes dtypes. */
static void check_case(int na, const int64_t *as, int nb, const int64_t *bs, unsigned layouts,
                       int ndtypes)
{
    int64_t an = ref_numel(na, as), bn = ref_numel(nb, bs), oshape[TIDE_MAX_DIMS];
    int nd = ref_out_shape(na, as, nb, bs, oshape);
    int64_t on = ref_numel(nd, oshape);
    double *av = malloc((size_t)(an ? an : 1) * sizeof *av);
    double *bv = malloc((size_t)(bn ? bn : 1) * sizeof *bv);
    double *want = malloc((size_t)(on ? on : 1) * sizeof *want);
    double *bound = malloc((size_t)(on ? on : 1) * sizeof *bound);
    for (int di = 0; di < ndtypes; di++) {
        tide_dtype dt = DTYPES[di];
        for (int la = 0; la < NUM_LAYOUTS; la++) {
            for (int lb = 0; lb < NUM_LAYOUTS; lb++) {
                if (!(layouts >> la & 1) || !(layouts >> lb & 1))
                    continue;
                ref_fill(av, an, dt, REF_GEN_GENERAL);
                ref_fill(bv, bn, dt, REF_GEN_GENERAL);
                ref_prepare(la >= REF_NUM_LAYOUTS ? REF_CONTIG : la, na, as, av);
                ref_prepare(lb >= REF_NUM_LAYOUTS ? REF_CONTIG : lb, nb, bs, bv);
                ref_matmul(av, na, as, bv, nb, bs, dt, want, bound);
                tide_tensor *a = make(av, na, as, dt, la), *b = make(bv, nb, bs, dt, lb);
                char desc[300];
                snprintf(desc, sizeof desc, "matmul %s %s (%s) @ %s (%s)", ref_dtype_name(dt),
                         ref_shape_str(na, as), layout_name(la), ref_shape_str(nb, bs),
                         layout_name(lb));
                CHECK(a && b, "%s: making inputs failed: %s", desc, tide_last_error());
                tide_tensor *c = a && b ? tide_matmul(a, b) : NULL;
                check_result(desc, c, dt, nd, oshape, want, bound, as[na - 1]);
                tide_release(a);
                tide_release(b);
                tide_release(c);
            }
        }
    }
    free(av);
    free(bv);
    free(want);
    free(bound);
}

#define ALL_LAYOUTS ((1u << NUM_LAYOUTS) - 1)
/* For the bigger cases (valgrind runs the suite too): the copy path, the trans flag, the
 * leading dimension, and a broadcast batch. */
#define KEY_LAYOUTS (1u << REF_CONTIG | 1u << REF_SLICED | 1u << MAT_TRANSPOSED)
#define BATCH_LAYOUTS (1u << REF_EXPANDED | 1u << ROW_SLICED | 1u << MAT_TRANSPOSED)

typedef struct {
    int na;
    int64_t as[4];
    int nb;
    int64_t bs[4];
    unsigned layouts;
} shape_pair;

static void test_shapes(void)
{
    /* Every layout pair and dtype. */
    static const shape_pair small[] = {
        {1, {7}, 1, {7}, 0},                 /* dot */
        {1, {1}, 1, {1}, 0},
        {1, {0}, 1, {0}, 0},                 /* an empty dot is 0 */
        {1, {0}, 2, {0, 3}, 0},
        {2, {7, 5}, 1, {5}, 0},              /* matrix · vector: gemv */
        {1, {5}, 2, {5, 7}, 0},              /* vector · matrix: gemv on B transposed */
        {1, {5}, 3, {3, 5, 7}, 0},
        {3, {2, 7, 5}, 1, {5}, 0},           /* folds into one gemv of 14 rows */
        {2, {1, 1}, 2, {1, 1}, 0},
        {2, {7, 1}, 2, {1, 7}, 0},           /* K = 1 */
        {2, {1, 7}, 2, {7, 1}, 0},
        {2, {7, 5}, 2, {5, 7}, 0},
        {2, {3, 0}, 2, {0, 4}, 0},           /* K = 0: zeros */
        {2, {0, 3}, 2, {3, 4}, 0},           /* empty results */
        {2, {3, 4}, 2, {4, 0}, 0},
        {3, {3, 7, 5}, 3, {3, 5, 7}, 0},     /* batched */
        {4, {2, 1, 3, 4}, 3, {5, 4, 2}, 0},  /* broadcast batch: [2, 5, 3, 2] */
        {3, {1, 7, 5}, 3, {4, 5, 1}, 0},
        {3, {4, 6, 5}, 2, {5, 7}, 0},        /* B shared: one tall gemm */
        {3, {4, 1, 5}, 2, {5, 7}, 0},
        {2, {6, 5}, 3, {4, 5, 7}, 0},        /* A shared */
        {4, {2, 3, 7, 5}, 2, {5, 1}, 0},
        {4, {2, 0, 3, 4}, 2, {4, 2}, 0},     /* empty batch */
        {3, {3, 2, 0}, 3, {3, 0, 4}, 0},     /* batched K = 0 */
    };
    for (size_t i = 0; i < sizeof small / sizeof small[0]; i++)
        check_case(small[i].na, small[i].as, small[i].nb, small[i].bs, ALL_LAYOUTS, NDT);
    /* Bigger: odd sizes past BLAS's blocking and its threading threshold; fewer layouts. */
    static const shape_pair big[] = {
        {1, {129}, 1, {129}, 0},
        {2, {129, 7}, 2, {7, 129}, 0},
        {2, {7, 129}, 2, {129, 1}, 0},
        {2, {1, 129}, 2, {129, 7}, 0},
        {2, {129, 129}, 2, {129, 129}, KEY_LAYOUTS},
        {3, {64, 8, 9}, 3, {64, 9, 7}, 0},   /* small products side by side on tide's threads */
        {3, {100, 1, 16}, 3, {100, 16, 1}, 0},
        {3, {3, 33, 17}, 3, {3, 17, 40}, 0},
        {3, {2, 20, 128}, 3, {2, 128, 128}, BATCH_LAYOUTS}, /* 16-row blocks across threads */
        {3, {3, 100, 500}, 3, {3, 500, 1}, 0},  /* gemv in 18-row blocks */
        /* float32 with B row-major, 4..64 rows, whole vectors of columns: summed in registers
         * on the AVX2 and AVX-512 tiers (cpu_matmul_direct.c): a partial block of rows, 5, 7
         * and 16 vectors of columns (tiles of 3 with 2 and 1 left), a batch folding into 64
         * rows, a batch that does not (their transposed layouts of B take the dot tiles) */
        {2, {64, 96}, 2, {96, 256}, KEY_LAYOUTS},
        {2, {5, 40}, 2, {40, 80}, 0},
        {3, {4, 16, 33}, 2, {33, 64}, 0},
        {3, {3, 12, 48}, 3, {3, 48, 112}, 0},
        /* ... and with B transposed (cpu_matmul_dot_isa.c): k past whole vectors (a masked
         * last step), partial blocks of rows and of B's rows */
        {2, {6, 397}, 2, {397, 70}, 0},
        {2, {40, 512}, 2, {512, 64}, KEY_LAYOUTS},
    };
    for (size_t i = 0; i < sizeof big / sizeof big[0]; i++)
        check_case(big[i].na, big[i].as, big[i].nb, big[i].bs,
                   big[i].layouts ? big[i].layouts : ALL_LAYOUTS, 3);
}

/* A transposed batch: the batch dims' strides come from the permutation as well. */
static void test_permuted_batch(void)
{
    int64_t shape[3] = {5, 4, 3}; /* stored [3, 4, 5]... permuted to [5, 4, 3] */
    double v[60];
    for (int i = 0; i < 60; i++)
        v[i] = (double)(i % 11) - 5;
    tide_tensor *base = ref_from_doubles(v, 3, (int64_t[]){3, 4, 5}, TIDE_FLOAT32);
    tide_tensor *a = tide_permute(base, (int[]){2, 1, 0});     /* [5, 4, 3] */
    tide_tensor *b = tide_permute(base, (int[]){2, 0, 1});     /* [5, 3, 4] */
    tide_tensor *c = tide_matmul(a, b);                         /* [5, 4, 4] */
    double want[80], bound[80], av[60], bv[60];
    for (int i = 0; i < 5; i++)
        for (int j = 0; j < 4; j++)
            for (int k = 0; k < 3; k++) {
                av[(i * 4 + j) * 3 + k] = v[(k * 4 + j) * 5 + i];
                bv[(i * 3 + k) * 4 + j] = v[(k * 4 + j) * 5 + i];
            }
    ref_matmul(av, 3, shape, bv, 3, (int64_t[]){5, 3, 4}, TIDE_FLOAT32, want, bound);
    check_result("matmul of permuted batches", c, TIDE_FLOAT32, 3, (int64_t[]){5, 4, 4}, want,
                 bound, 3);
    tide_release(base);
    tide_release(a);
    tide_release(b);
    tide_release(c);
}

static void test_promotion(void)
{
    static const struct {
        tide_dtype a, b, out;
    } cases[] = {
        {TIDE_INT32, TIDE_FLOAT32, TIDE_FLOAT32}, {TIDE_FLOAT32, TIDE_FLOAT64, TIDE_FLOAT64},
        {TIDE_UINT8, TIDE_INT64, TIDE_INT64},     {TIDE_UINT8, TIDE_INT32, TIDE_INT32},
        {TIDE_INT64, TIDE_FLOAT32, TIDE_FLOAT32},
    };
    double av[6] = {1, 2, 3, 4, 5, 6}, bv[6] = {6, 5, 4, 3, 2, 1};
    double want[4] = {1 * 6 + 2 * 4 + 3 * 2, 1 * 5 + 2 * 3 + 3 * 1, 4 * 6 + 5 * 4 + 6 * 2,
                      4 * 5 + 5 * 3 + 6 * 1};
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tide_tensor *a = ref_from_doubles(av, 2, (int64_t[]){2, 3}, cases[i].a);
        tide_tensor *b = ref_from_doubles(bv, 2, (int64_t[]){3, 2}, cases[i].b);
        tide_tensor *c = tide_matmul(a, b);
        char desc[100];
        snprintf(desc, sizeof desc, "matmul %s @ %s", ref_dtype_name(cases[i].a),
                 ref_dtype_name(cases[i].b));
        ref_check_tensor(desc, c, cases[i].out, 2, (int64_t[]){2, 2}, want, 0);
        tide_release(a);
        tide_release(b);
        tide_release(c);
    }
}

/* Integer products wrap like the rest of tide's integer arithmetic (two's complement). */
static void test_integer_wrap(void)
{
    int32_t a32[2] = {100000, 100000}, b32[2] = {100000, 70000};
    tide_tensor *a = tide_from_data(a32, 1, (int64_t[]){2}, TIDE_INT32);
    tide_tensor *b = tide_from_data(b32, 1, (int64_t[]){2}, TIDE_INT32);
    tide_tensor *c = tide_matmul(a, b);
    int32_t got32 = 0;
    int32_t want32 = (int32_t)((uint32_t)100000 * 100000u + (uint32_t)100000 * 70000u);
    CHECK(c && tide_ndim(c) == 0 && tide_to_buffer(c, &got32, 4) == 0 && got32 == want32,
          "int32 dot wraps: got %d, want %d (%s)", got32, want32, tide_last_error());
    tide_release(a);
    tide_release(b);
    tide_release(c);

    uint8_t a8[2] = {200, 100}, b8[2] = {2, 1};
    a = tide_from_data(a8, 2, (int64_t[]){1, 2}, TIDE_UINT8);
    b = tide_from_data(b8, 2, (int64_t[]){2, 1}, TIDE_UINT8);
    c = tide_matmul(a, b);
    uint8_t got8 = 0;
    CHECK(c && tide_to_buffer(c, &got8, 1) == 0 && got8 == (uint8_t)500, "uint8 wraps: got %d",
          got8);
    tide_release(a);
    tide_release(b);
    tide_release(c);

    int64_t a64[2] = {(int64_t)1 << 62, -3}, b64[2] = {4, INT64_MAX};
    a = tide_from_data(a64, 2, (int64_t[]){1, 2}, TIDE_INT64);
    b = tide_from_data(b64, 2, (int64_t[]){2, 1}, TIDE_INT64);
    c = tide_matmul(a, b);
    int64_t got64 = 0;
    int64_t want64 = (int64_t)(((uint64_t)1 << 62) * 4u + (uint64_t)-3 * (uint64_t)INT64_MAX);
    CHECK(c && tide_to_buffer(c, &got64, 8) == 0 && got64 == want64,
          "int64 wraps: got %lld, want %lld", (long long)got64, (long long)want64);
    tide_release(a);
    tide_release(b);
    tide_release(c);
}

/* BLAS is told beta = 0, so whatever the recycled output memory held (a NaN here) must not
 * leak into the next result; and a NaN input does reach its row. */
static void test_nan(void)
{
    for (int gemv = 0; gemv < 2; gemv++) {
        int64_t n = gemv ? 1 : 16;
        double *nan_v = malloc(16 * 16 * sizeof *nan_v), *ones = malloc(16 * 16 * sizeof *ones);
        for (int i = 0; i < 256; i++) {
            nan_v[i] = NAN;
            ones[i] = 1;
        }
        tide_tensor *x = ref_from_doubles(nan_v, 2, (int64_t[]){16, 16}, TIDE_FLOAT32);
        tide_tensor *y = ref_from_doubles(ones, 2, (int64_t[]){16, n}, TIDE_FLOAT32);
        tide_tensor *c = tide_matmul(x, y);
        double *got = ref_read(c);
        CHECK(got && isnan(got[0]) && isnan(got[16 * n - 1]), "NaN input gives NaN (%s)",
              gemv ? "gemv" : "gemm");
        free(got);
        tide_release(c); /* its memory, full of NaN, goes back to the cache */
        tide_release(x);
        x = ref_from_doubles(ones, 2, (int64_t[]){16, 16}, TIDE_FLOAT32);
        c = tide_matmul(x, y);
        got = ref_read(c);
        bool all16 = got != NULL;
        for (int64_t i = 0; got && i < 16 * n; i++)
            all16 = all16 && got[i] == 16;
        CHECK(all16, "recycled output memory does not leak NaN (%s)", gemv ? "gemv" : "gemm");
        free(got);
        free(nan_v);
        free(ones);
        tide_release(c);
        tide_release(x);
        tide_release(y);
    }
}

static void test_errors(void)
{
    tide_tensor *m23 = tide_ones(2, (int64_t[]){2, 3}, TIDE_FLOAT32);
    tide_tensor *m45 = tide_ones(2, (int64_t[]){4, 5}, TIDE_FLOAT32);
    tide_tensor *v3 = tide_ones(1, (int64_t[]){3}, TIDE_FLOAT32);
    tide_tensor *v4 = tide_ones(1, (int64_t[]){4}, TIDE_FLOAT32);
    tide_tensor *s = tide_scalar(2, TIDE_FLOAT32), *num = tide_number(2);
    tide_tensor *bool23 = tide_ones(2, (int64_t[]){2, 3}, TIDE_BOOL);
    tide_tensor *bool3 = tide_ones(1, (int64_t[]){3}, TIDE_BOOL);
    tide_tensor *b234 = tide_ones(3, (int64_t[]){2, 3, 4}, TIDE_FLOAT32);
    tide_tensor *b344 = tide_ones(3, (int64_t[]){3, 4, 4}, TIDE_FLOAT32);

    CHECK_ERROR(tide_matmul(NULL, m23), "matmul", "first input is NULL");
    CHECK_ERROR(tide_matmul(m23, NULL), "matmul", "second input is NULL");
    CHECK_ERROR(tide_matmul(s, v3), "matmul", "at least 1 dim", "[] float32", "[3] float32");
    CHECK_ERROR(tide_matmul(v3, num), "matmul", "at least 1 dim");
    CHECK_ERROR(tide_matmul(bool23, v3), "matmul", "bool", "[2, 3] bool", "[3] float32");
    CHECK_ERROR(tide_matmul(bool3, bool3), "matmul", "bool");
    CHECK_ERROR(tide_matmul(m23, m45),
                "matmul: shapes [2, 3] and [4, 5] cannot be multiplied (3 != 4)");
    CHECK_ERROR(tide_matmul(v3, v4), "matmul: shapes [3] and [4] cannot be multiplied (3 != 4)");
    CHECK_ERROR(tide_matmul(m23, v4), "[2, 3] and [4]", "(3 != 4)");
    CHECK_ERROR(tide_matmul(v4, m23), "[4] and [2, 3]", "(4 != 2)");
    CHECK_ERROR(tide_matmul(b234, m23), "[2, 3, 4] and [2, 3]", "(4 != 2)");
    CHECK_ERROR(tide_matmul(b234, b344), "matmul: batch dims [2] and [3]", "cannot be broadcast");
    /* A result no memory can hold: expanded inputs cost nothing, the output 4 TiB. */
    tide_tensor *one = tide_ones(2, (int64_t[]){1, 1}, TIDE_FLOAT32);
    tide_tensor *tall = tide_expand(one, 2, (int64_t[]){1 << 20, 1});
    tide_tensor *wide = tide_expand(one, 2, (int64_t[]){1, 1 << 20});
    CHECK_ERROR(tide_matmul(tall, wide), "matmul", "[1048576, 1048576]");
    tide_release(one);
    tide_release(tall);
    tide_release(wide);

    tide_release(m23);
    tide_release(m45);
    tide_release(v3);
    tide_release(v4);
    tide_release(s);
    tide_release(num);
    tide_release(bool23);
    tide_release(bool3);
    tide_release(b234);
    tide_release(b344);
}

/* The views a 1-D operand adds are gone from the result, and the result owns fresh memory. */
static void test_result_shapes(void)
{
    tide_tensor *v = tide_ones(1, (int64_t[]){3}, TIDE_FLOAT64);
    tide_tensor *m = tide_ones(2, (int64_t[]){3, 2}, TIDE_FLOAT64);
    tide_tensor *c = tide_matmul(v, v);
    double d = 0;
    CHECK(c && tide_ndim(c) == 0 && tide_item(c, &d) == 0 && d == 3, "dot is 0-dim: %g", d);
    tide_release(c);
    c = tide_matmul(v, m);
    CHECK(c && tide_ndim(c) == 1 && tide_size(c, 0) == 2 && tide_is_contiguous(c) &&
              !tide_shares_storage(c, m),
          "vector @ matrix is [2]");
    tide_release(c);
    tide_release(v);
    tide_release(m);
}

/* ---- child processes: what happens when OpenBLAS is loaded ---------------------------------- */

/* Runs fn in a fresh child (tide not yet initialized there, since main forks these first) and
 * checks it exited with 0 failures. */
static void in_child(const char *name, int (*fn)(void))
{
    fflush(stdout);
    fflush(stderr);
    pid_t pid = fork();
    if (pid == 0)
        _exit(fn());
    int status = 0;
    CHECK(pid > 0 && waitpid(pid, &status, 0) == pid && WIFEXITED(status) &&
              WEXITSTATUS(status) == 0,
          "child '%s' failed (status %d)", name, status);
}

/* One float32 matmul, checked. */
static int small_matmul_ok(void)
{
    float av[4] = {1, 2, 3, 4}, bv[4] = {5, 6, 7, 8}, got[4] = {0};
    tide_tensor *a = tide_from_data(av, 2, (int64_t[]){2, 2}, TIDE_FLOAT32);
    tide_tensor *b = tide_from_data(bv, 2, (int64_t[]){2, 2}, TIDE_FLOAT32);
    tide_tensor *c = tide_matmul(a, b);
    int ok = c && tide_to_buffer(c, got, sizeof got) == 0 && got[0] == 19 && got[1] == 22 &&
             got[2] == 43 && got[3] == 50;
    tide_release(a);
    tide_release(b);
    tide_release(c);
    return ok;
}

/* Reads what the child wrote to stderr (redirected to a temporary file) back into buf. */
static int capture_stderr(FILE **tmp)
{
    fflush(stderr);
    int saved = dup(2);
    *tmp = tmpfile();
    if (*tmp)
        dup2(fileno(*tmp), 2);
    return saved;
}

static void release_stderr(FILE *tmp, int saved, char *buf, size_t size)
{
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    buf[0] = 0;
    if (!tmp)
        return;
    rewind(tmp);
    size_t n = fread(buf, 1, size - 1, tmp);
    buf[n] = 0;
    fclose(tmp);
}

static bool avx512_cpu(void)
{
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512cd");
}

/* An inherited OPENBLAS_CORETYPE=Haswell is overridden for the load, the choice is logged, and
 * the variable is as it was afterwards. */
static int child_core_choice(void)
{
    setenv("OPENBLAS_CORETYPE", "Haswell", 1);
    setenv("TIDE_LOG", "jit,blas", 1);
    unsetenv("TIDE_BLAS_CORETYPE");
    unsetenv("TIDE_CPU_ISA");
    FILE *tmp;
    int saved = capture_stderr(&tmp);
    CHECK(small_matmul_ok(), "matmul after loading OpenBLAS: %s", tide_last_error());
    char log[4096];
    release_stderr(tmp, saved, log, sizeof log);
    const char *req = td_blas_requested_core(), *core = td_blas_corename();
    CHECK(strcasecmp(req, core) == 0, "OpenBLAS runs %s, tide asked for %s", core, req);
    if (avx512_cpu())
        CHECK(strcmp(req, "SkylakeX") == 0 || strcmp(req, "Cooperlake") == 0,
              "AVX-512 CPU gets AVX-512 kernels, not %s", req);
    const char *env = getenv("OPENBLAS_CORETYPE");
    CHECK(env && strcmp(env, "Haswell") == 0, "OPENBLAS_CORETYPE restored, is %s",
          env ? env : "(unset)");
    CHECK(getenv("OPENBLAS_NUM_THREADS") == NULL, "OPENBLAS_NUM_THREADS unset again");
    CHECK(strstr(log, "tide[blas]: core type") && strstr(log, "tide[blas]: loaded"),
          "TIDE_LOG=blas logs the choice: %s", log);
    if (strcasecmp(req, "Haswell") != 0)
        CHECK(strstr(log, "overriding the inherited OPENBLAS_CORETYPE=Haswell") != NULL,
              "the override is logged: %s", log);
    return test_failed;
}

/* TIDE_BLAS_CORETYPE forces a core type; OpenBLAS's thread count follows tide's. */
static int child_forced_core(void)
{
    setenv("TIDE_BLAS_CORETYPE", "haswell", 1);
    setenv("TIDE_NUM_THREADS", "1", 1);
    unsetenv("TIDE_LOG");
    __builtin_cpu_init();
    bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    CHECK(small_matmul_ok(), "matmul: %s", tide_last_error());
    if (avx2)
        CHECK(strcmp(td_blas_corename(), "Haswell") == 0, "forced Haswell, runs %s",
              td_blas_corename());
    void *h = dlopen("libopenblas.so.0", RTLD_NOW | RTLD_NOLOAD);
    int (*get_threads)(void) = h ? (int (*)(void))dlsym(h, "openblas_get_num_threads") : NULL;
    if (get_threads) {
        CHECK(get_threads() == 1, "OpenBLAS threads %d, tide's 1", get_threads());
        tide_set_num_threads(2);
        CHECK(small_matmul_ok(), "matmul: %s", tide_last_error());
        CHECK(get_threads() == 1, "OpenBLAS stays single-threaded (tide splits products): %d",
              get_threads());
        /* a product large enough to be split over tide's two threads */
        int64_t n = 96;
        tide_tensor *a = tide_randn(2, (int64_t[]){n, n}, TIDE_FLOAT64);
        tide_tensor *b = tide_randn(2, (int64_t[]){n, n + 3}, TIDE_FLOAT64);
        tide_tensor *c = tide_matmul(a, b);
        const double *av = tide_data_ptr(a), *bv = tide_data_ptr(b), *cv = c ? tide_data_ptr(c) : NULL;
        double worst = cv ? 0 : 1;
        for (int64_t i = 0; cv && i < n; i++)
            for (int64_t j = 0; j < n + 3; j++) {
                double ref = 0;
                for (int64_t l = 0; l < n; l++)
                    ref += av[i * n + l] * bv[l * (n + 3) + j];
                double e = fabs(cv[i * (n + 3) + j] - ref);
                worst = e > worst ? e : worst;
            }
        CHECK(worst < 1e-9, "split 96x96 @ 96x99 product: worst error %g", worst);
        tide_release(a);
        tide_release(b);
        tide_release(c);
    }
    if (h)
        dlclose(h);
    return test_failed;
}

/* A name tide does not know is refused with a message, and the detected core is used. */
static int child_bad_core(void)
{
    setenv("TIDE_BLAS_CORETYPE", "Pentium9000", 1);
    unsetenv("TIDE_CPU_ISA");
    FILE *tmp;
    int saved = capture_stderr(&tmp);
    CHECK(small_matmul_ok(), "matmul: %s", tide_last_error());
    char log[4096];
    release_stderr(tmp, saved, log, sizeof log);
    CHECK(strstr(log, "TIDE_BLAS_CORETYPE=Pentium9000 ignored: unknown core type") != NULL,
          "unknown core type reported: %s", log);
    CHECK(td_blas_requested_core()[0] != 0, "falls back to detection");
    return test_failed;
}

/* TIDE_CPU_ISA=baseline keeps OpenBLAS on SSE kernels too. */
static int child_isa_cap(void)
{
    setenv("TIDE_CPU_ISA", "baseline", 1);
    unsetenv("TIDE_BLAS_CORETYPE");
    CHECK(small_matmul_ok(), "matmul: %s", tide_last_error());
    __builtin_cpu_init();
    if (__builtin_cpu_supports("sse4.2"))
        CHECK(strcmp(td_blas_requested_core(), "Nehalem") == 0, "capped to Nehalem, got %s",
              td_blas_requested_core());
    return test_failed;
}

/* Without OpenBLAS: a clear error at the first floating-point matmul, integers still work,
 * and the gemm door itself falls back to a plain loop. */
static int child_missing_library(void)
{
    setenv("TIDE_BLAS_LIBRARY", "/nonexistent/libopenblas.so.0", 1);
    float av[4] = {1, 2, 3, 4};
    tide_tensor *a = tide_from_data(av, 2, (int64_t[]){2, 2}, TIDE_FLOAT32);
    CHECK_ERROR(tide_matmul(a, a), "matmul: cannot load OpenBLAS (/nonexistent/libopenblas.so.0)",
                "TIDE_BLAS_LIBRARY");
    CHECK_ERROR(tide_matmul(a, a), "matmul: cannot load OpenBLAS"); /* every time, not once */
    tide_tensor *ai = tide_cast(a, TIDE_INT32), *ci = tide_matmul(ai, ai);
    int32_t got[4] = {0};
    CHECK(ci && tide_to_buffer(ci, got, sizeof got) == 0 && got[0] == 7 && got[3] == 22,
          "int32 matmul needs no BLAS: %s", tide_last_error());
    float c[4] = {0}, x[2] = {1, 1}, y[2] = {0};
    td_blas_sgemm(false, true, 2, 2, 2, 1.0f, av, 2, av, 2, 0.0f, c, 2); /* A A^T */
    CHECK(c[0] == 5 && c[1] == 11 && c[2] == 11 && c[3] == 25, "fallback sgemm: %g %g %g %g",
          c[0], c[1], c[2], c[3]);
    td_blas_sgemv(true, 2, 2, 1.0f, av, 2, x, 1, 0.0f, y, 1); /* A^T [1, 1] */
    CHECK(y[0] == 4 && y[1] == 6, "fallback sgemv: %g %g", y[0], y[1]);
    tide_release(a);
    tide_release(ai);
    tide_release(ci);
    return test_failed;
}

static int child_not_blas(void)
{
    setenv("TIDE_BLAS_LIBRARY", "libm.so.6", 1);
    tide_tensor *a = tide_ones(2, (int64_t[]){2, 2}, TIDE_FLOAT64);
    CHECK_ERROR(tide_matmul(a, a), "matmul: libm.so.6 has no cblas_sgemm");
    tide_release(a);
    return test_failed;
}

int main(void)
{
    /* First, before this process loads OpenBLAS: each child starts from scratch. */
    in_child("core choice", child_core_choice);
    in_child("forced core", child_forced_core);
    in_child("unknown core", child_bad_core);
    in_child("TIDE_CPU_ISA cap", child_isa_cap);
    in_child("missing library", child_missing_library);
    in_child("not a BLAS", child_not_blas);

    test_shapes();
    test_permuted_batch();
    test_promotion();
    test_integer_wrap();
    test_nan();
    test_result_shapes();
    test_errors();
    return test_summary("test_matmul");
}
