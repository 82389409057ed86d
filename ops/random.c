/*
 * random.c — random tensors: rand, randn, randint (the RANDOM primitive, on the device that
 * makes the tensor, so a tracer sees them), bernoulli (lt of rand against p, on p's device),
 * randperm (a Fisher-Yates shuffle on the host from the same Philox stream, written to the
 * device), the in-place uniform_/normal_ (a RANDOM result on the tensor's device copied in), and
 * the generator's seed and state (kept by core/rng.c).
 *
 * Every call reserves its elements from the global (seed, offset) under a lock, so results
 * depend only on the seed and the order of calls — never on the thread count.
 */
#include <float.h>
#include <math.h>
#include <string.h>

#include "../core/philox.h"
#include "../core/rng.h"
#include "dispatch.h"

enum { DIST_UNIFORM = 0, DIST_NORMAL = 1, DIST_INTEGER = 2 };

void tide_manual_seed(uint64_t seed) { td_rng_seed(seed); }

void tide_get_rng_state(uint64_t state[2])
{
    if (!state) {
        td_error("get_rng_state: state is NULL");
        return;
    }
    td_rng_get_state(&state[0], &state[1]);
}

void tide_set_rng_state(const uint64_t state[2])
{
    if (!state) {
        td_error("set_rng_state: state is NULL");
        return;
    }
    td_rng_set_state(state[0], state[1]);
}

static tide_tensor *random_op(tide_device *dev, const char *op, int ndim, const int64_t *shape,
                              tide_dtype dtype, int dist, double a, double b);

/* Uniform numbers in a half dtype: float32 ones cut to the dtype's precision (multiples of
 * 2^-11 for float16, 2^-8 for bfloat16) before scaling, since rounding [0, 1) to nearest would
 * give 1.0 (for rand, one element in 4096 in float16). As PyTorch, [a, b) scaled in float32
 * can still round to b. */
static tide_tensor *half_uniform(tide_device *dev, const char *op, int ndim, const int64_t *shape,
                                 tide_dtype dtype, double a, double b)
{
    double steps = dtype == TIDE_FLOAT16 ? 0x1p11 : 0x1p8;
    tide_tensor *u = random_op(dev, op, ndim, shape, TIDE_FLOAT32, DIST_UNIFORM, 0, 1);
    tide_tensor *scaled = u ? tide_mul_scalar(u, steps) : NULL;
    tide_tensor *whole = scaled ? tide_floor(scaled) : NULL;
    tide_tensor *unit = whole ? tide_mul_scalar(whole, (b - a) / steps) : NULL;
    tide_tensor *shifted = unit ? tide_add_scalar(unit, a) : NULL;
    tide_tensor *out = shifted ? tide_cast(shifted, dtype) : NULL;
    tide_release(u);
    tide_release(scaled);
    tide_release(whole);
    tide_release(unit);
    tide_release(shifted);
    return out;
}

/* A RANDOM op of the given shape and dtype drawing the next numel elements of the stream. */
static tide_tensor *random_op(tide_device *dev, const char *op, int ndim, const int64_t *shape,
                              tide_dtype dtype, int dist, double a, double b)
{
    if (!dev || td_check_shape(op, ndim, shape, dtype) < 0)
        return NULL;
    if (td_dtype_is_half(dtype) && dist == DIST_UNIFORM)
        return half_uniform(dev, op, ndim, shape, dtype, a, b);
    uint64_t seed, offset;
    td_rng_reserve((uint64_t)td_numel(ndim, shape), &seed, &offset);
    td_meta meta = {ndim, {0}, dtype, dev};
    if (ndim > 0)
        memcpy(meta.shape, shape, sizeof(int64_t) * (size_t)ndim);
    tide_attrs attrs = {.nints = 3,
                        .ints = {dist, (int64_t)seed, (int64_t)offset},
                        .values = {a, b}};
    TD_IN_OP(op, td_dispatch(TIDE_OP_RANDOM, &meta, NULL, 0, &attrs));
}

static int check_floating(const char *op, tide_dtype dtype)
{
    if (!td_dtype_valid(dtype))
        return td_error("%s: invalid dtype %d", op, (int)dtype);
    if (!tide_dtype_is_floating(dtype))
        return td_error("%s: dtype %s is not supported; %s makes a floating dtype (float32, "
                        "float64, float16, bfloat16)", op,
                        tide_dtype_name(dtype), op);
    return 0;
}

tide_tensor *tide_rand_on(const char *device, int ndim, const int64_t *shape, tide_dtype dtype)
{
    tide_device *dev = td_creation_device("rand", device);
    if (!dev || check_floating("rand", dtype) < 0)
        return NULL;
    return random_op(dev, "rand", ndim, shape, dtype, DIST_UNIFORM, 0, 1);
}

tide_tensor *tide_randn_on(const char *device, int ndim, const int64_t *shape, tide_dtype dtype)
{
    tide_device *dev = td_creation_device("randn", device);
    if (!dev || check_floating("randn", dtype) < 0)
        return NULL;
    return random_op(dev, "randn", ndim, shape, dtype, DIST_NORMAL, 0, 1);
}

tide_tensor *tide_rand(int ndim, const int64_t *shape, tide_dtype dtype)
{
    return tide_rand_on(NULL, ndim, shape, dtype);
}

tide_tensor *tide_randn(int ndim, const int64_t *shape, tide_dtype dtype)
{
    return tide_randn_on(NULL, ndim, shape, dtype);
}

/* The integers a dtype holds exactly, as [lo, hi): int64 is bounded by the double that carries
 * low and high in the op's attributes. */
static void exact_range(tide_dtype dtype, double *lo, double *hi)
{
    switch (dtype) {
    case TIDE_BOOL: *lo = 0; *hi = 2; break;
    case TIDE_UINT8: *lo = 0; *hi = 256; break;
    case TIDE_INT32: *lo = -0x1p31; *hi = 0x1p31; break;
    case TIDE_FLOAT32: *lo = -0x1p24; *hi = 0x1p24 + 1; break;
    case TIDE_FLOAT16: *lo = -0x1p11; *hi = 0x1p11 + 1; break;
    case TIDE_BFLOAT16: *lo = -0x1p8; *hi = 0x1p8 + 1; break;
    default: *lo = -0x1p53; *hi = 0x1p53; break; /* int64, float64 */
    }
}

tide_tensor *tide_randint(int64_t low, int64_t high, int ndim, const int64_t *shape,
                          tide_dtype dtype)
{
    return tide_randint_on(NULL, low, high, ndim, shape, dtype);
}

static tide_tensor *randint_on_body(const char *device, int64_t low, int64_t high, int ndim,
                                    const int64_t *shape, tide_dtype dtype)
{
    tide_device *dev = td_creation_device("randint", device);
    if (!dev)
        return NULL;
    if (!td_dtype_valid(dtype)) {
        td_error("randint: invalid dtype %d", (int)dtype);
        return NULL;
    }
    if (low >= high) {
        td_error("randint: low (%lld) must be less than high (%lld)", (long long)low,
                 (long long)high);
        return NULL;
    }
    double lo, hi;
    exact_range(dtype, &lo, &hi);
    /* Within +-2^53 the int64s convert to doubles exactly. */
    if (low < -(INT64_C(1) << 53) || high > (INT64_C(1) << 53) || (double)low < lo ||
        (double)high > hi) {
        td_error("randint: range [%lld, %lld) does not fit %s, whose integers here are "
                 "[%.0f, %.0f)%s",
                 (long long)low, (long long)high, tide_dtype_name(dtype), lo, hi,
                 dtype == TIDE_INT64 ? " (low and high travel as doubles: at most 2^53)" : "");
        return NULL;
    }
    return random_op(dev, "randint", ndim, shape, dtype, DIST_INTEGER, (double)low,
                     (double)high);
}

tide_tensor *tide_randint_on(const char *device, int64_t low, int64_t high, int ndim,
                             const int64_t *shape, tide_dtype dtype)
{
    TD_IN_OP("randint", randint_on_body(device, low, high, ndim, shape, dtype));
}

static tide_tensor *bernoulli_body(const tide_tensor *p)
{
    if (td_check_tensor("bernoulli", "p", p) < 0)
        return NULL;
    if (!tide_dtype_is_floating((tide_dtype)p->dtype)) {
        td_error("bernoulli: p must hold floating probabilities, got %s",
                 tide_dtype_name((tide_dtype)p->dtype));
        return NULL;
    }
    /* p outside [0, 1] is not checked (that would read p back to the host): p <= 0 and NaN
     * give 0, p >= 1 gives 1, as rand < p says. */
    tide_tensor *u = random_op(p->device, "bernoulli", p->ndim, p->shape, (tide_dtype)p->dtype,
                               DIST_UNIFORM, 0, 1);
    tide_tensor *mask = u ? tide_lt(u, p) : NULL;
    tide_release(u);
    tide_tensor *out = mask ? tide_cast(mask, (tide_dtype)p->dtype) : NULL;
    tide_release(mask);
    return out;
}

tide_tensor *tide_bernoulli(const tide_tensor *p)
{
    TD_IN_OP("bernoulli", bernoulli_body(p));
}

/* Element p's integer in [0, range), by the integer rule of core/philox.h. */
typedef struct stream_reader {
    uint64_t seed, block;
    uint32_t m[4], s[4];
    bool have, have_second;
} stream_reader;

static uint64_t draw_below(stream_reader *r, uint64_t p, uint64_t range)
{
    uint64_t block = (p >> 2) & ((UINT64_C(1) << 62) - 1);
    if (!r->have || r->block != block) {
        td_philox_block(r->seed, block, 0, r->m);
        r->block = block;
        r->have = true;
        r->have_second = false;
    }
    if (range <= UINT64_C(0x100000000))
        return td_philox_below32(r->m[p & 3], range);
    if (!r->have_second) {
        td_philox_block(r->seed, block, 1, r->s);
        r->have_second = true;
    }
    return td_philox_below64(r->m[p & 3], r->s[p & 3], range);
}

tide_tensor *tide_randperm(int64_t n, tide_dtype dtype) { return tide_randperm_on(NULL, n, dtype); }

/* The permutation in a CPU tensor of dtype, or written through dev's write when dev is not the
 * CPU. */
static tide_tensor *placed(tide_device *dev, tide_tensor *perm, tide_dtype dtype)
{
    tide_tensor *cast = perm && dtype != TIDE_INT64 ? tide_cast(perm, dtype) : tide_retain(perm);
    tide_release(perm);
    if (!cast || dev == tide_cpu_device())
        return cast;
    tide_tensor *out = td_from_data_on(dev, td_tensor_data(cast), cast->ndim, cast->shape, dtype);
    tide_release(cast);
    return out;
}

static tide_tensor *randperm_on_body(const char *device, int64_t n, tide_dtype dtype)
{
    tide_device *dev = td_creation_device("randperm", device);
    if (!dev)
        return NULL;
    if (!td_dtype_valid(dtype)) {
        td_error("randperm: invalid dtype %d", (int)dtype);
        return NULL;
    }
    if (n < 0) {
        td_error("randperm: n must be non-negative, got %lld", (long long)n);
        return NULL;
    }
    if (dtype == TIDE_BOOL) {
        td_error("randperm: dtype bool cannot hold a permutation");
        return NULL;
    }
    double lo, hi;
    exact_range(dtype, &lo, &hi);
    if ((double)n > hi) {
        td_error("randperm: n = %lld does not fit %s (at most %.0f)", (long long)n,
                 tide_dtype_name(dtype), hi);
        return NULL;
    }
    /* The int64 permutation is shuffled in place in a CPU tensor: its memory comes from the
     * allocator, under the host memory cap, so a huge n is an error, not a huge malloc. */
    tide_tensor *out = td_tensor_new("randperm", tide_cpu_device(), 1, &n, TIDE_INT64);
    if (!out)
        return NULL;
    int64_t *perm = td_tensor_data(out);
    for (int64_t i = 0; i < n; i++)
        perm[i] = i;
    /* Fisher-Yates: position i swaps with a position drawn below i + 1 from element
     * offset + i of the stream. */
    stream_reader r = {0};
    uint64_t offset;
    td_rng_reserve((uint64_t)n, &r.seed, &offset);
    for (int64_t i = n - 1; i > 0; i--) {
        int64_t j = (int64_t)draw_below(&r, offset + (uint64_t)i, (uint64_t)i + 1);
        int64_t t = perm[i];
        perm[i] = perm[j];
        perm[j] = t;
    }
    return placed(dev, out, dtype);
}

tide_tensor *tide_randperm_on(const char *device, int64_t n, tide_dtype dtype)
{
    TD_IN_OP("randperm", randperm_on_body(device, n, dtype));
}

/* Checks of the in-place fills: a floating destination and finite parameters. */
static int check_fill_target(const char *op, const tide_tensor *t)
{
    if (td_check_tensor(op, "tensor", t) < 0)
        return -1;
    if (!tide_dtype_is_floating((tide_dtype)t->dtype))
        return td_error("%s: the tensor must be floating (float32, float64, float16, bfloat16), "
                        "got %s", op,
                        tide_dtype_name((tide_dtype)t->dtype));
    return 0;
}

/* A parameter a float32 tensor cannot hold would only make infinities. */
static int check_in_range(const char *op, const tide_tensor *t, double v, const char *what)
{
    double limit = t->dtype == TIDE_FLOAT16 ? 65504.0 : t->dtype == TIDE_FLOAT64 ? DBL_MAX : FLT_MAX;
    if (fabs(v) > limit)
        return td_error("%s: %s %g is outside %s's range", op, what, v,
                        tide_dtype_name((tide_dtype)t->dtype));
    return 0;
}

static int fill_random(const char *op, tide_tensor *t, int dist, double a, double b)
{
    tide_tensor *r = random_op(t->device, op, t->ndim, t->shape, (tide_dtype)t->dtype, dist, a,
                               b);
    if (!r)
        return -1;
    int rc = tide_copy_(t, r);
    tide_release(r);
    return rc;
}

int tide_uniform_(tide_tensor *t, double low, double high)
{
    if (check_fill_target("uniform_", t) < 0)
        return -1;
    if (!isfinite(low) || !isfinite(high) || !isfinite(high - low))
        return td_error("uniform_: low %g and high %g must be finite (and so must high - low)",
                        low, high);
    if (low > high)
        return td_error("uniform_: low (%g) must not be greater than high (%g)", low, high);
    if (check_in_range("uniform_", t, low, "low") < 0 ||
        check_in_range("uniform_", t, high, "high") < 0)
        return -1;
    return fill_random("uniform_", t, DIST_UNIFORM, low, high);
}

int tide_normal_(tide_tensor *t, double mean, double std)
{
    if (check_fill_target("normal_", t) < 0)
        return -1;
    if (!isfinite(mean) || !isfinite(std))
        return td_error("normal_: mean %g and std %g must be finite", mean, std);
    if (std < 0)
        return td_error("normal_: std must be non-negative, got %g", std);
    if (check_in_range("normal_", t, mean, "mean") < 0 ||
        check_in_range("normal_", t, std, "std") < 0)
        return -1;
    return fill_random("normal_", t, DIST_NORMAL, mean, std);
}
