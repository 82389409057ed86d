/*
 * test_errors.c — every kind of user mistake gives NULL (or -1) and a message in
 * tide_last_error() that names the op and the shapes or dtypes involved; nothing aborts. One
 * test per failure kind, a NULL argument to every API function, and the error being per thread.
 */
#include <pthread.h>
#include <stdlib.h>

#include "tide.h"
#include "test_util.h"
#include "test_ref.h"

/* Checks a status-returning call failed with -1 and an error holding the fragments. */
#define CHECK_STATUS_ERROR(call, ...)                                                              \
    do {                                                                                           \
        int status_ = (call);                                                                      \
        const char *frags_[] = {__VA_ARGS__, NULL};                                                \
        int ok_ = status_ == -1;                                                                   \
        for (int k_ = 0; ok_ && frags_[k_]; k_++)                                                  \
            ok_ = strstr(tide_last_error(), frags_[k_]) != NULL;                                   \
        CHECK(ok_, "%s returned %d with error \"%s\"", #call, status_, tide_last_error());         \
    } while (0)

static tide_tensor *make(int ndim, const int64_t *shape, tide_dtype dt)
{
    return tide_zeros(ndim, shape, dt);
}

static const struct {
    const char *name;
    tide_tensor *(*fn)(const tide_tensor *);
} UNARY[] = {
    {"neg", tide_neg},         {"abs", tide_abs},     {"exp", tide_exp},
    {"log", tide_log},         {"sqrt", tide_sqrt},   {"rsqrt", tide_rsqrt},
    {"sin", tide_sin},         {"cos", tide_cos},     {"tanh", tide_tanh},
    {"sigmoid", tide_sigmoid}, {"relu", tide_relu},   {"floor", tide_floor},
    {"ceil", tide_ceil},       {"round", tide_round}, {"sign", tide_sign},
    {"reciprocal", tide_reciprocal}, {"logical_not", tide_logical_not},
    {"erf", tide_erf},         {"log1p", tide_log1p}, {"expm1", tide_expm1},
    {"log2", tide_log2},       {"tan", tide_tan},     {"asin", tide_asin},
    {"acos", tide_acos},       {"atan", tide_atan},   {"sinh", tide_sinh},
    {"cosh", tide_cosh},       {"trunc", tide_trunc},
};

static const struct {
    const char *name;
    tide_tensor *(*fn)(const tide_tensor *, const tide_tensor *);
} BINARY[] = {
    {"add", tide_add}, {"sub", tide_sub}, {"mul", tide_mul}, {"div", tide_div},
    {"pow", tide_pow}, {"maximum", tide_maximum}, {"minimum", tide_minimum},
    {"eq", tide_eq}, {"ne", tide_ne}, {"lt", tide_lt}, {"le", tide_le}, {"gt", tide_gt},
    {"ge", tide_ge}, {"logical_and", tide_logical_and}, {"logical_or", tide_logical_or},
    {"floor_divide", tide_floor_divide}, {"remainder", tide_remainder},
    {"atan2", tide_atan2}, {"fmod", tide_fmod},
};

static const struct {
    const char *name;
    tide_tensor *(*fn)(const tide_tensor *, double);
} SCALAR[] = {
    {"add", tide_add_scalar}, {"sub", tide_sub_scalar}, {"mul", tide_mul_scalar},
    {"div", tide_div_scalar}, {"pow", tide_pow_scalar},
};

static const struct {
    const char *name;
    tide_tensor *(*fn)(const tide_tensor *, const int *, int, bool);
} REDUCE[] = {
    {"sum", tide_sum}, {"prod", tide_prod}, {"mean", tide_mean}, {"max", tide_max}, {"min", tide_min},
};

/* ---- shapes that do not broadcast --------------------------------------------------------- */

static void test_broadcast_mismatch(void)
{
    int64_t s23[2] = {2, 3}, s4[1] = {4}, s32[2] = {3, 2};
    tide_tensor *a = make(2, s23, TIDE_FLOAT32), *b = make(1, s4, TIDE_FLOAT32);
    for (size_t i = 0; i < sizeof BINARY / sizeof BINARY[0]; i++)
        CHECK_ERROR(BINARY[i].fn(a, b), BINARY[i].name, "[2, 3]", "[4]");
    CHECK_ERROR(tide_add(b, a), "add", "[4]", "[2, 3]");
    tide_tensor *c = make(2, s32, TIDE_BOOL);
    CHECK_ERROR(tide_where(c, a, a), "where", "[3, 2]", "[2, 3]");
    CHECK_STATUS_ERROR(tide_copy_(a, b), "copy_", "[2, 3]", "[4]");
    /* copy_ broadcasts src to dst, never dst to src */
    int64_t s3[1] = {3};
    tide_tensor *small = make(1, s3, TIDE_FLOAT32);
    CHECK_STATUS_ERROR(tide_copy_(small, a), "copy_", "[3]", "[2, 3]");
    tide_release(small);
    tide_release(a);
    tide_release(b);
    tide_release(c);
}

/* ---- dims out of range ---------------------------------------------------------------------- */

static void test_dim_out_of_range(void)
{
    int64_t s23[2] = {2, 3};
    tide_tensor *x = make(2, s23, TIDE_FLOAT32);
    int d2 = 2, dm3 = -3;
    for (size_t i = 0; i < sizeof REDUCE / sizeof REDUCE[0]; i++) {
        CHECK_ERROR(REDUCE[i].fn(x, &d2, 1, false), REDUCE[i].name, "2");
        CHECK_ERROR(REDUCE[i].fn(x, &dm3, 1, true), REDUCE[i].name, "-3");
    }
    int dup[2] = {0, -2};
    CHECK_ERROR(tide_sum(x, dup, 2, false), "sum");
    CHECK_ERROR(tide_argmax(x, 2, false), "argmax", "2");
    CHECK_ERROR(tide_argmin(x, -3, false), "argmin", "-3");
    CHECK_ERROR(tide_transpose(x, 0, 2), "transpose", "2");
    CHECK_ERROR(tide_transpose(x, -3, 0), "transpose", "-3");
    CHECK_ERROR(tide_slice(x, 2, 0, 1, 1), "slice", "2");
    CHECK_ERROR(tide_select(x, -3, 0), "select", "-3");
    CHECK_ERROR(tide_squeeze(x, 2), "squeeze", "2");
    CHECK_ERROR(tide_unsqueeze(x, 3), "unsqueeze", "3");
    CHECK_ERROR(tide_unsqueeze(x, -4), "unsqueeze", "-4");
    CHECK_ERROR(tide_flip(x, &d2, 1), "flip", "2");
    int fdup[2] = {1, -1};
    CHECK_ERROR(tide_flip(x, fdup, 2), "flip");
    tide_tensor *xs[2] = {x, x};
    CHECK_ERROR(tide_cat(xs, 2, 2), "cat", "2");
    CHECK_ERROR(tide_stack(xs, 2, 3), "stack", "3");
    CHECK_ERROR(tide_stack(xs, 2, -4), "stack", "-4");
    tide_clear_error();
    CHECK(tide_size(x, 2) == -1 && strstr(tide_last_error(), "2"), "tide_size(x, 2): error \"%s\"",
          tide_last_error());
    /* A 0-dim tensor has no dims to index. */
    tide_tensor *z = tide_scalar(1, TIDE_FLOAT32);
    CHECK_ERROR(tide_select(z, 0, 0), "select");
    CHECK_ERROR(tide_transpose(z, 0, 1), "transpose");
    CHECK_ERROR(tide_slice(z, 0, 0, 1, 1), "slice");
    tide_release(z);
    tide_release(x);
}

/* ---- dtypes an op does not take ------------------------------------------------------------- */

static void test_unsupported_dtype(void)
{
    int64_t s3[1] = {3};
    tide_tensor *b = make(1, s3, TIDE_BOOL), *i = make(1, s3, TIDE_INT32), *u = make(1, s3, TIDE_UINT8);
    CHECK_ERROR(tide_sub(b, b), "sub", "bool");
    CHECK_ERROR(tide_floor_divide(b, b), "floor_divide", "bool");
    CHECK_ERROR(tide_remainder(b, b), "remainder", "bool");
    CHECK_ERROR(tide_neg(b), "neg", "bool");
    CHECK_ERROR(tide_mean(i, NULL, 0, false), "mean", "int32");
    CHECK_ERROR(tide_mean(b, NULL, 0, false), "mean", "bool");
    CHECK_ERROR(tide_mean(u, NULL, 0, true), "mean", "uint8");
    tide_release(b);
    tide_release(i);
    tide_release(u);
}

/* ---- negative sizes, too many dims ---------------------------------------------------------- */

static void test_bad_shapes(void)
{
    int64_t neg[2] = {2, -1}, neg3[3] = {4, -2, 1};
    CHECK_ERROR(tide_zeros(2, neg, TIDE_FLOAT32), "zeros", "-1");
    CHECK_ERROR(tide_empty(3, neg3, TIDE_FLOAT32), "empty", "-2");
    CHECK_ERROR(tide_ones(2, neg, TIDE_INT32), "ones", "-1");
    CHECK_ERROR(tide_full(2, neg, 1, TIDE_INT64), "full", "-1");
    float data[4] = {0};
    CHECK_ERROR(tide_from_data(data, 2, neg, TIDE_FLOAT32), "from_data", "-1");
    int64_t s9[9] = {1, 1, 1, 1, 1, 1, 1, 1, 1};
    CHECK_ERROR(tide_zeros(9, s9, TIDE_FLOAT32), "zeros", "9");
    CHECK_ERROR(tide_zeros(-1, s9, TIDE_FLOAT32), "zeros");
    CHECK_ERROR(tide_from_data(data, 9, s9, TIDE_FLOAT32), "from_data", "9");

    int64_t s8[8] = {1, 1, 1, 1, 1, 1, 1, 2};
    tide_tensor *x8 = make(8, s8, TIDE_FLOAT32);
    CHECK_ERROR(tide_unsqueeze(x8, 0), "unsqueeze");
    CHECK_ERROR(tide_view(x8, 9, s9), "view", "9");
    CHECK_ERROR(tide_reshape(x8, 9, s9), "reshape", "9");
    CHECK_ERROR(tide_expand(x8, 9, s9), "expand", "9");
    tide_tensor *xs[2] = {x8, x8};
    CHECK_ERROR(tide_stack(xs, 2, 0), "stack");
    tide_release(x8);

    int64_t s23[2] = {2, 3};
    tide_tensor *x = make(2, s23, TIDE_FLOAT32);
    int64_t s4[1] = {4}, two_m1[2] = {-1, -1}, bad_m2[2] = {-2, -3}, s7[1] = {7};
    CHECK_ERROR(tide_view(x, 1, s4), "view", "[2, 3]", "[4]");
    CHECK_ERROR(tide_reshape(x, 1, s7), "reshape", "[2, 3]", "[7]");
    CHECK_ERROR(tide_view(x, 2, two_m1), "view");
    CHECK_ERROR(tide_view(x, 2, bad_m2), "view");
    int64_t e_bad[2] = {4, 3}, e_neg[3] = {-1, 2, 3}, e_neg2[2] = {2, -5};
    CHECK_ERROR(tide_expand(x, 2, e_bad), "expand", "[2, 3]", "[4, 3]");
    CHECK_ERROR(tide_expand(x, 3, e_neg), "expand"); /* -1 only keeps existing dims */
    CHECK_ERROR(tide_expand(x, 2, e_neg2), "expand");
    int64_t s1[1] = {3};
    CHECK_ERROR(tide_expand(x, 1, s1), "expand"); /* fewer dims than the tensor */
    CHECK_ERROR(tide_slice(x, 1, 0, 3, 0), "slice");
    CHECK_ERROR(tide_slice(x, 1, 0, 3, -1), "slice");
    int64_t pads_odd[3] = {1, 1, 1}, pads_many[6] = {1, 1, 1, 1, 1, 1};
    CHECK_ERROR(tide_pad(x, pads_odd, 3, 0), "pad");
    CHECK_ERROR(tide_pad(x, pads_many, 6, 0), "pad");
    CHECK_ERROR(tide_linspace(0, 1, -3, TIDE_FLOAT32), "linspace");
    CHECK_ERROR(tide_eye(2, -1, TIDE_FLOAT32), "eye");
    CHECK_ERROR(tide_arange(0, 1, 0, TIDE_FLOAT32), "arange");
    tide_release(x);
}

/* ---- a NULL argument to every function -------------------------------------------------------- */

static void test_null_arguments(void)
{
    int64_t s23[2] = {2, 3};
    tide_tensor *x = make(2, s23, TIDE_FLOAT32);
    double v = 0;
    float buf[6];

    /* queries are NULL-safe */
    CHECK(tide_retain(NULL) == NULL, "retain(NULL)");
    tide_release(NULL);
    CHECK(tide_ndim(NULL) == 0, "ndim(NULL)");
    CHECK(tide_numel(NULL) == 0, "numel(NULL)");
    CHECK(tide_shape(NULL) == NULL, "shape(NULL)");
    CHECK(tide_strides(NULL) == NULL, "strides(NULL)");
    CHECK(tide_offset(NULL) == 0, "offset(NULL)");
    CHECK(!tide_is_contiguous(NULL), "is_contiguous(NULL)");
    CHECK(!tide_shares_storage(NULL, x) && !tide_shares_storage(x, NULL) &&
              !tide_shares_storage(NULL, NULL),
          "shares_storage with NULL");
    CHECK(tide_device_name(NULL) == NULL, "device_name(NULL)");
    CHECK(tide_data_ptr(NULL) == NULL, "data_ptr(NULL)");
    CHECK(tide_size(NULL, 0) == -1 || tide_size(NULL, 0) == 0, "size(NULL, 0)");
    (void)tide_get_dtype(NULL);

    /* runtime calls with nonsense arguments do not crash */
    tide_memory_stats(NULL, NULL);
    int threads = tide_get_num_threads();
    tide_set_num_threads(0);
    tide_set_num_threads(-3);
    CHECK(tide_get_num_threads() >= 1, "threads after set_num_threads(-3): %d", tide_get_num_threads());
    tide_set_num_threads(threads);

    /* creation */
    int64_t s3[1] = {3};
    CHECK_ERROR(tide_zeros(2, NULL, TIDE_FLOAT32), "zeros");
    CHECK_ERROR(tide_empty(1, NULL, TIDE_FLOAT32), "empty");
    CHECK_ERROR(tide_ones(1, NULL, TIDE_FLOAT32), "ones");
    CHECK_ERROR(tide_full(1, NULL, 1, TIDE_FLOAT32), "full");
    CHECK_ERROR(tide_from_data(NULL, 1, s3, TIDE_FLOAT32), "from_data");
    CHECK_ERROR(tide_from_data(buf, 1, NULL, TIDE_FLOAT32), "from_data");
    CHECK_ERROR(tide_wrap(NULL, 12, 1, s3, NULL, TIDE_FLOAT32, NULL, NULL), "wrap");
    CHECK_ERROR(tide_wrap(buf, sizeof buf, 1, NULL, NULL, TIDE_FLOAT32, NULL, NULL), "wrap");

    /* reading back */
    CHECK_STATUS_ERROR(tide_to_buffer(NULL, buf, sizeof buf), "to_buffer");
    CHECK_STATUS_ERROR(tide_to_buffer(x, NULL, sizeof buf), "to_buffer");
    CHECK_STATUS_ERROR(tide_item(NULL, &v), "item");
    int64_t s1[1] = {1};
    tide_tensor *one = make(1, s1, TIDE_FLOAT32);
    CHECK_STATUS_ERROR(tide_item(one, NULL), "item");
    tide_release(one);

    /* elementwise */
    for (size_t i = 0; i < sizeof UNARY / sizeof UNARY[0]; i++)
        CHECK_ERROR(UNARY[i].fn(NULL), UNARY[i].name);
    for (size_t i = 0; i < sizeof BINARY / sizeof BINARY[0]; i++) {
        CHECK_ERROR(BINARY[i].fn(NULL, x), BINARY[i].name);
        CHECK_ERROR(BINARY[i].fn(x, NULL), BINARY[i].name);
        CHECK_ERROR(BINARY[i].fn(NULL, NULL), BINARY[i].name);
    }
    for (size_t i = 0; i < sizeof SCALAR / sizeof SCALAR[0]; i++)
        CHECK_ERROR(SCALAR[i].fn(NULL, 2.0), SCALAR[i].name);
    CHECK_ERROR(tide_where(NULL, x, x), "where");
    CHECK_ERROR(tide_where(x, NULL, x), "where");
    CHECK_ERROR(tide_where(x, x, NULL), "where");
    CHECK_ERROR(tide_cast(NULL, TIDE_INT32), "cast");

    /* reductions */
    for (size_t i = 0; i < sizeof REDUCE / sizeof REDUCE[0]; i++)
        CHECK_ERROR(REDUCE[i].fn(NULL, NULL, 0, false), REDUCE[i].name);
    CHECK_ERROR(tide_argmax(NULL, 0, false), "argmax");
    CHECK_ERROR(tide_argmin(NULL, TIDE_ALL_DIMS, false), "argmin");

    /* views */
    int64_t s6[1] = {6};
    int perm[2] = {1, 0}, d0 = 0;
    CHECK_ERROR(tide_view(NULL, 1, s6), "view");
    CHECK_ERROR(tide_view(x, 1, NULL), "view");
    CHECK_ERROR(tide_reshape(NULL, 1, s6), "reshape");
    CHECK_ERROR(tide_reshape(x, 1, NULL), "reshape");
    CHECK_ERROR(tide_permute(NULL, perm), "permute");
    CHECK_ERROR(tide_permute(x, NULL), "permute");
    CHECK_ERROR(tide_transpose(NULL, 0, 1), "transpose");
    CHECK_ERROR(tide_expand(NULL, 2, s23), "expand");
    CHECK_ERROR(tide_expand(x, 2, NULL), "expand");
    CHECK_ERROR(tide_slice(NULL, 0, 0, 1, 1), "slice");
    CHECK_ERROR(tide_select(NULL, 0, 0), "select");
    CHECK_ERROR(tide_squeeze(NULL, 0), "squeeze");
    CHECK_ERROR(tide_squeeze_all(NULL), "squeeze");
    CHECK_ERROR(tide_unsqueeze(NULL, 0), "unsqueeze");

    /* copying movement */
    CHECK_ERROR(tide_contiguous(NULL), "contiguous");
    CHECK_ERROR(tide_clone(NULL), "clone");
    tide_tensor *with_null[2] = {x, NULL};
    CHECK_ERROR(tide_cat(NULL, 2, 0), "cat");
    CHECK_ERROR(tide_cat(with_null, 2, 0), "cat");
    CHECK_ERROR(tide_stack(NULL, 2, 0), "stack");
    CHECK_ERROR(tide_stack(with_null, 2, 0), "stack");
    int64_t pads[2] = {1, 1};
    CHECK_ERROR(tide_pad(NULL, pads, 2, 0), "pad");
    CHECK_ERROR(tide_pad(x, NULL, 2, 0), "pad");
    CHECK_ERROR(tide_flip(NULL, &d0, 1), "flip");
    CHECK_ERROR(tide_flip(x, NULL, 1), "flip");

    /* in place */
    CHECK_STATUS_ERROR(tide_copy_(NULL, x), "copy_");
    CHECK_STATUS_ERROR(tide_copy_(x, NULL), "copy_");
    CHECK_STATUS_ERROR(tide_fill_(NULL, 1), "fill_");
    tide_release(x);
}

/* ---- bad permutations ------------------------------------------------------------------------ */

static void test_bad_permutation(void)
{
    int64_t s234[3] = {2, 3, 4};
    tide_tensor *x = make(3, s234, TIDE_FLOAT32);
    int dup[3] = {0, 0, 1}, out[3] = {0, 1, 3}, negdup[3] = {0, -3, 2}, neg_out[3] = {-4, 0, 1};
    CHECK_ERROR(tide_permute(x, dup), "permute");
    CHECK_ERROR(tide_permute(x, out), "permute", "3");
    CHECK_ERROR(tide_permute(x, negdup), "permute");
    CHECK_ERROR(tide_permute(x, neg_out), "permute");
    tide_release(x);
}

/* ---- views that cannot be views, indices out of range ---------------------------------------- */

static void test_view_of_non_viewable(void)
{
    int64_t s23[2] = {2, 3}, s6[1] = {6};
    tide_tensor *x = make(2, s23, TIDE_FLOAT32);
    tide_tensor *t = tide_transpose(x, 0, 1);
    CHECK_ERROR(tide_view(t, 1, s6), "view");
    int64_t s2_2[2] = {2, 2};
    tide_tensor *sl = tide_slice(x, 1, 0, 1, 1); /* [2,1] */
    tide_tensor *ex = tide_expand(sl, 2, s2_2);  /* strides [3, 0] */
    int64_t s4[1] = {4};
    CHECK_ERROR(tide_view(ex, 1, s4), "view");
    tide_tensor *r = tide_reshape(ex, 1, s4);
    CHECK(r && tide_numel(r) == 4, "reshape of an expanded tensor copies: %s", tide_last_error());
    tide_release(r);
    tide_release(ex);
    tide_release(sl);
    tide_release(t);
    tide_release(x);
}

static void test_select_out_of_range(void)
{
    int64_t s23[2] = {2, 3};
    tide_tensor *x = make(2, s23, TIDE_FLOAT32);
    CHECK_ERROR(tide_select(x, 1, 3), "select", "3");
    CHECK_ERROR(tide_select(x, 1, -4), "select", "-4");
    CHECK_ERROR(tide_select(x, 0, 2), "select", "2");
    int64_t s03[2] = {0, 3};
    tide_tensor *e = make(2, s03, TIDE_FLOAT32);
    CHECK_ERROR(tide_select(e, 0, 0), "select");
    tide_release(e);
    tide_release(x);
}

static void test_cat_mismatch(void)
{
    int64_t s23[2] = {2, 3}, s24[2] = {2, 4}, s3[1] = {3};
    tide_tensor *a = make(2, s23, TIDE_FLOAT32), *b = make(2, s24, TIDE_FLOAT32),
                *c = make(1, s3, TIDE_FLOAT32);
    tide_tensor *ab[2] = {a, b}, *ac[2] = {a, c};
    CHECK_ERROR(tide_cat(ab, 2, 0), "cat", "[2, 3]", "[2, 4]");
    CHECK_ERROR(tide_cat(ac, 2, 0), "cat");
    CHECK_ERROR(tide_stack(ab, 2, 0), "stack", "[2, 3]", "[2, 4]");
    CHECK_ERROR(tide_cat(ab, 0, 0), "cat");
    CHECK_ERROR(tide_stack(ab, 0, 0), "stack");
    CHECK_ERROR(tide_cat(ab, -1, 0), "cat");
    /* the same inputs along the dim where they differ are fine */
    tide_tensor *ok = tide_cat(ab, 2, 1);
    CHECK(ok && tide_size(ok, 1) == 7, "cat [2,3] and [2,4] along dim 1: %s", tide_last_error());
    tide_release(ok);
    tide_release(a);
    tide_release(b);
    tide_release(c);
}

/* ---- sizes too large to allocate --------------------------------------------------------------- */

static void test_too_large(void)
{
    int64_t huge2[2] = {(int64_t)1 << 40, (int64_t)1 << 40};
    CHECK_ERROR(tide_zeros(2, huge2, TIDE_FLOAT32), "zeros");
    CHECK_ERROR(tide_empty(2, huge2, TIDE_UINT8), "empty");
    int64_t bytes62[1] = {(int64_t)1 << 60}; /* 2^62 bytes of float32 */
    CHECK_ERROR(tide_empty(1, bytes62, TIDE_FLOAT32), "empty");
    CHECK_ERROR(tide_full(1, bytes62, 1, TIDE_FLOAT32), "full");
    int64_t max1[1] = {INT64_MAX};
    CHECK_ERROR(tide_ones(1, max1, TIDE_FLOAT64), "ones");
    int64_t overflow3[3] = {(int64_t)1 << 31, (int64_t)1 << 31, (int64_t)1 << 31};
    CHECK_ERROR(tide_zeros(3, overflow3, TIDE_BOOL), "zeros");
    CHECK_ERROR(tide_eye((int64_t)1 << 32, (int64_t)1 << 32, TIDE_FLOAT32), "eye");
    CHECK_ERROR(tide_linspace(0, 1, (int64_t)1 << 62, TIDE_FLOAT32), "linspace");
    CHECK_ERROR(tide_arange(0, 1e19, 1, TIDE_INT64), "arange");

    /* An expanded view of a huge shape is fine (no memory); copying it is not. */
    int64_t one[1] = {1}, big[1] = {(int64_t)1 << 60};
    tide_tensor *x = make(1, one, TIDE_FLOAT32);
    tide_tensor *e = tide_expand(x, 1, big);
    CHECK(e && tide_numel(e) == big[0], "expand [1] -> [2^60] is a view: %s", tide_last_error());
    if (e) {
        CHECK_ERROR(tide_contiguous(e), "contiguous");
        CHECK_ERROR(tide_add(e, e), "add");
        int64_t pads[2] = {0, 1};
        CHECK_ERROR(tide_pad(e, pads, 2, 0), "pad");
    }
    tide_release(e);
    /* a view that multiplies past INT64_MAX elements is refused */
    int64_t s2[2] = {1, 1}, bigger[2] = {(int64_t)1 << 40, (int64_t)1 << 40};
    tide_tensor *y = make(2, s2, TIDE_FLOAT32);
    CHECK_ERROR(tide_expand(y, 2, bigger), "expand");
    tide_release(y);
    tide_release(x);

    /* Zero-size dims do not exempt the other sizes: strides are computed from them. */
    int64_t empty_huge[3] = {0, (int64_t)1 << 40, INT64_MAX};
    CHECK_ERROR(tide_zeros(3, empty_huge, TIDE_FLOAT32), "zeros", "too large");
    /* reshape's known sizes multiplying past int64, with and without an inferred dim */
    int64_t four[1] = {4}, zero[1] = {0};
    tide_tensor *v4 = make(1, four, TIDE_FLOAT32), *v0 = make(1, zero, TIDE_FLOAT32);
    int64_t r_infer[3] = {-1, (int64_t)1 << 62, (int64_t)1 << 62};
    int64_t r_empty[3] = {0, (int64_t)1 << 40, (int64_t)1 << 40};
    CHECK_ERROR(tide_reshape(v4, 3, r_infer), "reshape", "int64");
    CHECK_ERROR(tide_reshape(v0, 3, r_infer), "reshape");
    CHECK_ERROR(tide_reshape(v0, 3, r_empty), "reshape", "too large");
    int64_t r_ok[3] = {0, 5, 7};
    tide_tensor *ok = tide_reshape(v0, 3, r_ok);
    CHECK(ok && tide_numel(ok) == 0 && tide_size(ok, 2) == 7, "reshape [0] -> [0,5,7]: %s",
          tide_last_error());
    tide_release(ok);
    tide_release(v4);
    tide_release(v0);

    /* Reading a 2^62-element expanded view into a buffer: the byte count would wrap. */
    int64_t sq[2] = {(int64_t)1 << 31, (int64_t)1 << 31};
    tide_tensor *o = make(1, one, TIDE_FLOAT64);
    tide_tensor *wide = o ? tide_expand(o, 2, sq) : NULL;
    char buf[16];
    CHECK(wide && tide_to_buffer(wide, buf, sizeof buf) == -1 &&
              strstr(tide_last_error(), "to_buffer"),
          "to_buffer of a 2^62-element view: %s", tide_last_error());
    tide_release(wide);
    tide_release(o);
}

/* ---- reading into too small a buffer ----------------------------------------------------------- */

static void test_to_buffer_too_small(void)
{
    int64_t s23[2] = {2, 3};
    tide_tensor *x = make(2, s23, TIDE_FLOAT64);
    double buf[6];
    CHECK_STATUS_ERROR(tide_to_buffer(x, buf, sizeof buf - 1), "to_buffer");
    CHECK_STATUS_ERROR(tide_to_buffer(x, buf, 0), "to_buffer");
    CHECK(tide_to_buffer(x, buf, sizeof buf) == 0, "to_buffer with the exact size");
    double v;
    CHECK_STATUS_ERROR(tide_item(x, &v), "item", "[2, 3]");
    int64_t s0[1] = {0};
    tide_tensor *e = make(1, s0, TIDE_FLOAT64);
    CHECK_STATUS_ERROR(tide_item(e, &v), "item");
    tide_release(e);
    /* wrap: the strides must keep every element inside the buffer */
    float fb[6];
    int64_t s32[2] = {3, 2}, bad_st[2] = {3, 1}, neg_st[2] = {-2, 1};
    CHECK_ERROR(tide_wrap(fb, sizeof fb, 2, s32, bad_st, TIDE_FLOAT32, NULL, NULL), "wrap");
    CHECK_ERROR(tide_wrap(fb, sizeof fb - 1, 2, s32, NULL, TIDE_FLOAT32, NULL, NULL), "wrap");
    CHECK_ERROR(tide_wrap(fb, sizeof fb, 2, s32, neg_st, TIDE_FLOAT32, NULL, NULL), "wrap");
    tide_release(x);
}

/* ---- invalid dtype values ---------------------------------------------------------------------- */

static void test_invalid_dtype(void)
{
    tide_dtype bad = (tide_dtype)42, negbad = (tide_dtype)-1;
    int64_t s2[1] = {2};
    float data[2] = {1, 2};
    CHECK_ERROR(tide_zeros(1, s2, bad), "zeros", "dtype");
    CHECK_ERROR(tide_empty(1, s2, negbad), "empty", "dtype");
    CHECK_ERROR(tide_ones(1, s2, bad), "ones", "dtype");
    CHECK_ERROR(tide_full(1, s2, 1, bad), "full", "dtype");
    CHECK_ERROR(tide_arange(0, 3, 1, bad), "arange", "dtype");
    CHECK_ERROR(tide_linspace(0, 1, 3, bad), "linspace", "dtype");
    CHECK_ERROR(tide_eye(2, 2, bad), "eye", "dtype");
    CHECK_ERROR(tide_scalar(1, bad), "scalar", "dtype");
    CHECK_ERROR(tide_from_data(data, 1, s2, bad), "from_data", "dtype");
    CHECK_ERROR(tide_wrap(data, sizeof data, 1, s2, NULL, bad, NULL, NULL), "wrap", "dtype");
    tide_tensor *x = make(1, s2, TIDE_FLOAT32);
    CHECK_ERROR(tide_cast(x, bad), "cast", "dtype");
    CHECK_ERROR(tide_cast(x, TIDE_NUM_DTYPES), "cast", "dtype");
    tide_release(x);
}

/* ---- errors are per thread --------------------------------------------------------------------- */

static char thread_saw_initially[512];
static char thread_saw_after[512];

static void *thread_body(void *arg)
{
    (void)arg;
    snprintf(thread_saw_initially, sizeof thread_saw_initially, "%s", tide_last_error());
    int64_t s4[1] = {4}, s5[1] = {5};
    tide_tensor *a = tide_zeros(1, s4, TIDE_FLOAT32), *b = tide_zeros(1, s5, TIDE_FLOAT32);
    tide_tensor *r = tide_mul(a, b); /* fails on this thread */
    snprintf(thread_saw_after, sizeof thread_saw_after, "%s", tide_last_error());
    tide_release(r);
    tide_release(a);
    tide_release(b);
    return NULL;
}

static void test_error_per_thread(void)
{
    int64_t neg[1] = {-7};
    CHECK_ERROR(tide_zeros(1, neg, TIDE_FLOAT32), "zeros", "-7");
    char mine[512];
    snprintf(mine, sizeof mine, "%s", tide_last_error());
    pthread_t th;
    CHECK(pthread_create(&th, NULL, thread_body, NULL) == 0, "pthread_create");
    pthread_join(th, NULL);
    CHECK(thread_saw_initially[0] == '\0', "a new thread starts with no error, saw \"%s\"",
          thread_saw_initially);
    CHECK(strstr(thread_saw_after, "mul") && strstr(thread_saw_after, "[4]") &&
              strstr(thread_saw_after, "[5]"),
          "the thread's own error: \"%s\"", thread_saw_after);
    CHECK(strcmp(tide_last_error(), mine) == 0, "this thread's error unchanged: \"%s\" vs \"%s\"",
          tide_last_error(), mine);
    tide_clear_error();
    CHECK(tide_last_error()[0] == '\0', "tide_clear_error empties it");
}

/* ---- the library still works after all that --------------------------------------------------- */

static void test_still_works(void)
{
    int64_t s3[1] = {3};
    tide_tensor *a = tide_ones(1, s3, TIDE_FLOAT32);
    tide_tensor *r = tide_add(a, a);
    float f[3];
    CHECK(r && tide_to_buffer(r, f, sizeof f) == 0 && f[0] == 2 && f[2] == 2, "ones + ones");
    tide_release(r);
    tide_release(a);
}

int main(void)
{
    test_broadcast_mismatch();
    test_dim_out_of_range();
    test_unsupported_dtype();
    test_bad_shapes();
    test_null_arguments();
    test_bad_permutation();
    test_view_of_non_viewable();
    test_select_out_of_range();
    test_cat_mismatch();
    test_to_buffer_too_small();
    test_invalid_dtype();
    test_error_per_thread();
    test_too_large();
    test_still_works();
    return test_summary("test_errors");
}
