/*
 * test_ref.h — what the C tests share to check tide against plain double-precision reference
 * loops: a small deterministic random generator, values chosen per op domain, tensors built in
 * several memory layouts that hold the same logical values, and reading a tensor back into
 * doubles. Only the public API (tide.h) is used, so every layout is made the way a user would.
 */
#ifndef TIDE_TEST_REF_H
#define TIDE_TEST_REF_H

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tide.h"

/* ---- random values ------------------------------------------------------------------------ */

static uint64_t ref_rng_state = 0x9E3779B97F4A7C15ull;

static inline void ref_seed(uint64_t seed) { ref_rng_state = seed * 2654435761ull + 1; }

/* A 64-bit LCG (Knuth's MMIX constants); the high bits are the good ones. */
static inline uint32_t ref_rand_u32(void)
{
    ref_rng_state = ref_rng_state * 6364136223846793005ull + 1442695040888963407ull;
    return (uint32_t)(ref_rng_state >> 32);
}

/* Uniform in [0, 1). */
static inline double ref_uniform(void) { return ref_rand_u32() / 4294967296.0; }

/* Uniform integer in [lo, hi]. */
static inline int64_t ref_randint(int64_t lo, int64_t hi)
{
    return lo + (int64_t)(ref_rand_u32() % (uint64_t)(hi - lo + 1));
}

/* Value domains, chosen per op so a reference in doubles is meaningful. */
enum ref_gen {
    REF_GEN_GENERAL,  /* floats in [-4, 4]; ints in [-10, 10]; uint8 in [0, 20]; bool 0/1 */
    REF_GEN_POSITIVE, /* floats in [0.1, 10]; ints in [1, 20] (log, sqrt, rsqrt) */
    REF_GEN_NONZERO,  /* floats in [-4, -0.25] u [0.25, 4]; ints without 0 */
    REF_GEN_SMALL,    /* floats in multiples of 0.5 in [-2, 2]; ints in [-3, 3]: many ties */
    REF_GEN_QUARTERS, /* floats in multiples of 0.25 in [-5, 5]: halves for round */
    REF_GEN_POW_BASE, /* floats in [0.1, 3]; ints in [-4, 4]; uint8 in [0, 4] */
    REF_GEN_POW_EXP,  /* floats in [-2, 2]; ints in [0, 4]; uint8 in [0, 3] */
    REF_GEN_UNIT,     /* floats in [0.5, 1.5]; ints in {-2, -1, 1, 2}; uint8 in {1, 2} (prod) */
};

static inline bool ref_is_float(tide_dtype dt) { return dt == TIDE_FLOAT32 || dt == TIDE_FLOAT64; }

/* The value v becomes once stored as dtype dt: float32 rounding, integer truncation toward zero
 * and two's-complement wrapping, bool as nonzero. */
static inline double ref_quantize(tide_dtype dt, double v)
{
    switch (dt) {
    case TIDE_FLOAT32: return (double)(float)v;
    case TIDE_FLOAT64: return v;
    case TIDE_INT32: return (double)(int32_t)(uint32_t)(uint64_t)(int64_t)v;
    case TIDE_INT64: return (double)(int64_t)v;
    case TIDE_UINT8: return (double)(uint8_t)(uint64_t)(int64_t)v;
    case TIDE_BOOL: return v != 0 ? 1.0 : 0.0;
    default: return v;
    }
}

static inline double ref_gen_value(tide_dtype dt, int gen)
{
    if (dt == TIDE_BOOL)
        return gen == REF_GEN_POSITIVE || gen == REF_GEN_NONZERO || gen == REF_GEN_UNIT
                   ? 1.0
                   : (double)ref_randint(0, 1);
    if (ref_is_float(dt)) {
        double u = ref_uniform(), v;
        switch (gen) {
        case REF_GEN_POSITIVE: v = 0.1 + 9.9 * u; break;
        case REF_GEN_NONZERO: v = (0.25 + 3.75 * u) * (ref_randint(0, 1) ? 1 : -1); break;
        case REF_GEN_SMALL: v = 0.5 * (double)ref_randint(-4, 4); break;
        case REF_GEN_QUARTERS: v = 0.25 * (double)ref_randint(-20, 20); break;
        case REF_GEN_POW_BASE: v = 0.1 + 2.9 * u; break;
        case REF_GEN_POW_EXP: v = -2 + 4 * u; break;
        case REF_GEN_UNIT: v = 0.5 + u; break;
        default: v = -4 + 8 * u; break;
        }
        return ref_quantize(dt, v);
    }
    if (dt == TIDE_UINT8) {
        switch (gen) {
        case REF_GEN_POSITIVE: return (double)ref_randint(1, 20);
        case REF_GEN_NONZERO: return (double)ref_randint(1, 20);
        case REF_GEN_SMALL: return (double)ref_randint(0, 4);
        case REF_GEN_POW_BASE: return (double)ref_randint(0, 4);
        case REF_GEN_POW_EXP: return (double)ref_randint(0, 3);
        case REF_GEN_UNIT: return (double)ref_randint(1, 2);
        default: return (double)ref_randint(0, 20);
        }
    }
    switch (gen) { /* int32, int64 */
    case REF_GEN_POSITIVE: return (double)ref_randint(1, 20);
    case REF_GEN_NONZERO: {
        int64_t v = ref_randint(1, 10);
        return (double)(ref_randint(0, 1) ? v : -v);
    }
    case REF_GEN_SMALL: return (double)ref_randint(-3, 3);
    case REF_GEN_POW_BASE: return (double)ref_randint(-4, 4);
    case REF_GEN_POW_EXP: return (double)ref_randint(0, 4);
    case REF_GEN_UNIT: {
        int64_t v = ref_randint(1, 2);
        return (double)(ref_randint(0, 1) ? v : -v);
    }
    default: return (double)ref_randint(-10, 10);
    }
}

static inline void ref_fill(double *v, int64_t n, tide_dtype dt, int gen)
{
    for (int64_t i = 0; i < n; i++)
        v[i] = ref_gen_value(dt, gen);
}

/* ---- raw element access ------------------------------------------------------------------- */

static inline void ref_store(void *buf, tide_dtype dt, int64_t i, double v)
{
    switch (dt) {
    case TIDE_FLOAT32: ((float *)buf)[i] = (float)v; break;
    case TIDE_FLOAT64: ((double *)buf)[i] = v; break;
    case TIDE_INT32: ((int32_t *)buf)[i] = (int32_t)(uint32_t)(uint64_t)(int64_t)v; break;
    case TIDE_INT64: ((int64_t *)buf)[i] = (int64_t)v; break;
    case TIDE_UINT8: ((uint8_t *)buf)[i] = (uint8_t)(uint64_t)(int64_t)v; break;
    case TIDE_BOOL: ((bool *)buf)[i] = v != 0; break;
    default: break;
    }
}

static inline double ref_load(const void *buf, tide_dtype dt, int64_t i)
{
    switch (dt) {
    case TIDE_FLOAT32: return ((const float *)buf)[i];
    case TIDE_FLOAT64: return ((const double *)buf)[i];
    case TIDE_INT32: return ((const int32_t *)buf)[i];
    case TIDE_INT64: return (double)((const int64_t *)buf)[i];
    case TIDE_UINT8: return ((const uint8_t *)buf)[i];
    case TIDE_BOOL: return ((const uint8_t *)buf)[i] ? 1.0 : 0.0;
    default: return 0;
    }
}

static inline size_t ref_dtype_size(tide_dtype dt)
{
    static const size_t sizes[] = {4, 8, 4, 8, 1, 1};
    return (unsigned)dt < 6 ? sizes[dt] : 0;
}

static inline const char *ref_dtype_name(tide_dtype dt)
{
    static const char *const names[] = {"float32", "float64", "int32", "int64", "uint8", "bool"};
    return (unsigned)dt < 6 ? names[dt] : "invalid";
}

static inline int64_t ref_numel(int ndim, const int64_t *shape)
{
    int64_t n = 1;
    for (int i = 0; i < ndim; i++)
        n *= shape[i];
    return n;
}

/* "[2, 3]" into buf (one of a few rotating buffers, so two can appear in one printf). */
static inline const char *ref_shape_str(int ndim, const int64_t *shape)
{
    static char bufs[4][128];
    static int next;
    char *buf = bufs[next++ & 3];
    size_t len = 0;
    len += (size_t)snprintf(buf + len, 128 - len, "[");
    for (int i = 0; i < ndim && len < 100; i++)
        len += (size_t)snprintf(buf + len, 128 - len, "%s%lld", i ? ", " : "", (long long)shape[i]);
    snprintf(buf + len, 128 - len, "]");
    return buf;
}

/* A contiguous tensor of dtype dt holding the n doubles v (converted like ref_store). */
static inline tide_tensor *ref_from_doubles(const double *v, int ndim, const int64_t *shape,
                                            tide_dtype dt)
{
    int64_t n = ref_numel(ndim, shape);
    void *buf = malloc((size_t)(n > 0 ? n : 1) * 8);
    for (int64_t i = 0; i < n; i++)
        ref_store(buf, dt, i, v[i]);
    tide_tensor *t = tide_from_data(buf, ndim, shape, dt);
    free(buf);
    return t;
}

/* ---- layouts ------------------------------------------------------------------------------ */

enum ref_layout {
    REF_CONTIG,     /* row-major */
    REF_TRANSPOSED, /* data made for the reversed shape, then permuted back (ndim >= 2) */
    REF_SLICED,     /* every other element of a bigger tensor, from offset 1 (ndim >= 1) */
    REF_EXPANDED,   /* a size-1 dim 0 expanded: stride 0; values repeat along dim 0 */
    REF_NUM_LAYOUTS
};

static inline const char *ref_layout_name(int layout)
{
    static const char *const names[] = {"contiguous", "transposed", "sliced", "expanded"};
    return (unsigned)layout < REF_NUM_LAYOUTS ? names[layout] : "?";
}

/* Makes v (n = numel values) fit the layout: the expanded one repeats dim 0's first slice. */
static inline void ref_prepare(int layout, int ndim, const int64_t *shape, double *v)
{
    if (layout != REF_EXPANDED || ndim == 0 || shape[0] <= 1)
        return;
    int64_t n = ref_numel(ndim, shape), inner = n / shape[0];
    for (int64_t i = inner; i < n; i++)
        v[i] = v[i % inner];
}

/* The row-major flat index of the multi-index idx in shape. */
static inline int64_t ref_flat(int ndim, const int64_t *shape, const int64_t *idx)
{
    int64_t f = 0;
    for (int d = 0; d < ndim; d++)
        f = f * shape[d] + idx[d];
    return f;
}

/* Advances the multi-index idx in shape; false after the last one. */
static inline bool ref_next_index(int ndim, const int64_t *shape, int64_t *idx)
{
    for (int d = ndim - 1; d >= 0; d--) {
        if (++idx[d] < shape[d])
            return true;
        idx[d] = 0;
    }
    return false;
}

/*
 * A tensor of dtype dt with the logical shape and row-major values v, stored in the given
 * layout. Layouts that do not apply to the shape (transposed below 2 dims, the others at 0 dims)
 * give the contiguous one. v must have been through ref_prepare for the expanded layout.
 * NULL (with the library's error) when the library fails.
 */
static inline tide_tensor *ref_make(const double *v, int ndim, const int64_t *shape, tide_dtype dt,
                                    int layout)
{
    int64_t n = ref_numel(ndim, shape);
    if (layout == REF_TRANSPOSED && ndim >= 2) {
        int64_t pshape[TIDE_MAX_DIMS], idx[TIDE_MAX_DIMS] = {0}, pidx[TIDE_MAX_DIMS];
        int perm[TIDE_MAX_DIMS];
        for (int d = 0; d < ndim; d++) {
            pshape[d] = shape[ndim - 1 - d];
            perm[d] = ndim - 1 - d;
        }
        double *pv = malloc((size_t)(n > 0 ? n : 1) * sizeof *pv);
        if (n > 0) {
            do {
                for (int d = 0; d < ndim; d++)
                    pidx[d] = idx[ndim - 1 - d];
                pv[ref_flat(ndim, pshape, pidx)] = v[ref_flat(ndim, shape, idx)];
            } while (ref_next_index(ndim, shape, idx));
        }
        tide_tensor *p = ref_from_doubles(pv, ndim, pshape, dt);
        free(pv);
        tide_tensor *t = ndim == 2 ? tide_transpose(p, 0, 1) : tide_permute(p, perm);
        tide_release(p);
        return t;
    }
    if (layout == REF_SLICED && ndim >= 1) {
        int64_t bshape[TIDE_MAX_DIMS], idx[TIDE_MAX_DIMS] = {0}, bidx[TIDE_MAX_DIMS];
        memcpy(bshape, shape, (size_t)ndim * sizeof *shape);
        int64_t last = shape[ndim - 1];
        bshape[ndim - 1] = 2 * last + 1;
        int64_t bn = ref_numel(ndim, bshape);
        double *bv = malloc((size_t)(bn > 0 ? bn : 1) * sizeof *bv);
        for (int64_t i = 0; i < bn; i++)
            bv[i] = 77; /* filler that must never be read */
        if (n > 0) {
            do {
                memcpy(bidx, idx, (size_t)ndim * sizeof *idx);
                bidx[ndim - 1] = 2 * idx[ndim - 1] + 1;
                bv[ref_flat(ndim, bshape, bidx)] = v[ref_flat(ndim, shape, idx)];
            } while (ref_next_index(ndim, shape, idx));
        }
        tide_tensor *b = ref_from_doubles(bv, ndim, bshape, dt);
        free(bv);
        tide_tensor *t = tide_slice(b, ndim - 1, 1, 2 * last + 1, 2);
        tide_release(b);
        return t;
    }
    if (layout == REF_EXPANDED && ndim >= 1) {
        int64_t s1[TIDE_MAX_DIMS];
        memcpy(s1, shape, (size_t)ndim * sizeof *shape);
        s1[0] = 1;
        int64_t inner = ref_numel(ndim, s1);
        double *one = malloc((size_t)(inner > 0 ? inner : 1) * sizeof *one);
        for (int64_t i = 0; i < inner; i++)
            one[i] = n > 0 ? v[i] : 0;
        tide_tensor *b = ref_from_doubles(one, ndim, s1, dt);
        free(one);
        tide_tensor *t = tide_expand(b, ndim, shape);
        tide_release(b);
        return t;
    }
    return ref_from_doubles(v, ndim, shape, dt);
}

/* ---- reading back ------------------------------------------------------------------------- */

/* The elements of t as doubles (malloc'ed, at least one slot), read through tide_cast to
 * float64 and tide_to_buffer. NULL when the library fails. */
static inline double *ref_read(const tide_tensor *t)
{
    if (!t)
        return NULL;
    int64_t n = tide_numel(t);
    double *out = malloc((size_t)(n > 0 ? n : 1) * sizeof *out);
    tide_tensor *d = tide_cast(t, TIDE_FLOAT64);
    if (!d || tide_to_buffer(d, out, (size_t)(n > 0 ? n : 0) * sizeof *out) != 0) {
        tide_release(d);
        free(out);
        return NULL;
    }
    tide_release(d);
    return out;
}

/* The elements of t in its own dtype (no cast), converted to doubles. */
static inline double *ref_read_native(const tide_tensor *t)
{
    if (!t)
        return NULL;
    int64_t n = tide_numel(t);
    tide_dtype dt = tide_get_dtype(t);
    size_t es = ref_dtype_size(dt);
    void *raw = malloc((size_t)(n > 0 ? n : 1) * 8);
    double *out = malloc((size_t)(n > 0 ? n : 1) * sizeof *out);
    if (tide_to_buffer(t, raw, (size_t)(n > 0 ? n : 0) * es) != 0) {
        free(raw);
        free(out);
        return NULL;
    }
    for (int64_t i = 0; i < n; i++)
        out[i] = ref_load(raw, dt, i);
    free(raw);
    return out;
}

/* ---- comparing ---------------------------------------------------------------------------- */

/* Tolerances for a result of dtype dt: transcendental results get more room in float32. */
static inline void ref_tolerance(tide_dtype dt, bool transcendental, double *rtol, double *atol)
{
    if (dt == TIDE_FLOAT32) {
        *rtol = transcendental ? 1e-5 : 2e-6;
        *atol = transcendental ? 1e-6 : 1e-37;
    } else if (dt == TIDE_FLOAT64) {
        *rtol = 1e-12;
        *atol = transcendental ? 1e-15 : 1e-300;
    } else {
        *rtol = 0;
        *atol = 0;
    }
}

static inline bool ref_close(double got, double want, double rtol, double atol)
{
    if (isnan(want))
        return isnan(got);
    if (isinf(want))
        return got == want;
    if (isnan(got) || isinf(got))
        return false;
    return fabs(got - want) <= atol + rtol * fabs(want);
}

/* The first index where got and want differ beyond the tolerance, or -1. */
static inline int64_t ref_mismatch(const double *got, const double *want, int64_t n, double rtol,
                                   double atol)
{
    for (int64_t i = 0; i < n; i++)
        if (!ref_close(got[i], want[i], rtol, atol))
            return i;
    return -1;
}

static inline bool ref_same_shape(const tide_tensor *t, int ndim, const int64_t *shape)
{
    if (!t || tide_ndim(t) != ndim)
        return false;
    const int64_t *s = tide_shape(t);
    for (int i = 0; i < ndim; i++)
        if (s[i] != shape[i])
            return false;
    return true;
}

/* The multi-index of the row-major flat index f in shape, as "(1, 2)". */
static inline const char *ref_index_str(int ndim, const int64_t *shape, int64_t f)
{
    static char bufs[2][128];
    static int next;
    char *buf = bufs[next++ & 1];
    int64_t idx[TIDE_MAX_DIMS];
    for (int d = ndim - 1; d >= 0; d--) {
        idx[d] = shape[d] > 0 ? f % shape[d] : 0;
        f = shape[d] > 0 ? f / shape[d] : 0;
    }
    size_t len = (size_t)snprintf(buf, 128, "(");
    for (int d = 0; d < ndim && len < 100; d++)
        len += (size_t)snprintf(buf + len, 128 - len, "%s%lld", d ? ", " : "", (long long)idx[d]);
    snprintf(buf + len, 128 - len, ")");
    return buf;
}

static inline const char *ref_tensor_shape_str(const tide_tensor *t)
{
    if (!t)
        return "(null)";
    return ref_shape_str(tide_ndim(t), tide_shape(t));
}

/* ---- checking a result ------------------------------------------------------------------- */

#ifdef TIDE_TEST_UTIL_H
/* Checks dtype, shape and values (needs test_util.h's CHECK); float32 values within rtol of want (exact when rtol is 0). */
static inline void ref_check_tensor(const char *desc, const tide_tensor *t, tide_dtype dt, int ndim,
                         const int64_t *shape, const double *want,
                                    double rtol)
{
    if (!t) {
        CHECK(t != NULL, "%s: failed: %s", desc, tide_last_error());
        return;
    }
    CHECK(tide_get_dtype(t) == dt, "%s: dtype %s, want %s", desc, ref_dtype_name(tide_get_dtype(t)),
          ref_dtype_name(dt));
    bool shape_ok = ref_same_shape(t, ndim, shape);
    CHECK(shape_ok, "%s: shape %s, want %s", desc, ref_tensor_shape_str(t),
          ref_shape_str(ndim, shape));
    if (!shape_ok)
        return;
    double *got = ref_read(t);
    CHECK(got != NULL, "%s: reading failed: %s", desc, tide_last_error());
    if (!got)
        return;
    int64_t bad = ref_mismatch(got, want, ref_numel(ndim, shape), rtol, 0);
    CHECK(bad < 0, "%s: first mismatch at %s: got %.10g, want %.10g", desc,
          ref_index_str(ndim, shape, bad), got[bad], want[bad]);
    free(got);
}
#endif

/* max |a-b| / (1 + |b|) over elements, or -1 when shapes/dtypes differ; *bitwise set when the
 * bytes are identical. */
static inline double ref_compare(const tide_tensor *a, const tide_tensor *b, bool *bitwise)
{
    *bitwise = false;
    if (!a || !b || tide_ndim(a) != tide_ndim(b) || tide_get_dtype(a) != tide_get_dtype(b))
        return -1;
    for (int d = 0; d < tide_ndim(a); d++)
        if (tide_size(a, d) != tide_size(b, d))
            return -1;
    int64_t n = tide_numel(a);
    size_t es = tide_dtype_size(tide_get_dtype(a));
    char *x = malloc(n * es + 1), *y = malloc(n * es + 1);
    tide_to_buffer(a, x, n * es);
    tide_to_buffer(b, y, n * es);
    *bitwise = memcmp(x, y, n * es) == 0;
    double worst = 0;
    for (int64_t i = 0; i < n; i++) {
        double u = ref_load(x, tide_get_dtype(a), i), v = ref_load(y, tide_get_dtype(a), i);
        if (isnan(u) && isnan(v))
            continue;
        double e = fabs(u - v) / (1 + fabs(v));
        if (!(e <= worst))
            worst = isnan(e) ? INFINITY : e;
    }
    free(x);
    free(y);
    return worst;
}

#endif /* TIDE_TEST_REF_H */
