/*
 * tide.h — the public C API of tide, a tensor library.
 *
 * Conventions (see DESIGN.md "Conventions"):
 *  - Dims and indices are 0-based; a negative dim or position counts from the end (-1 is the last).
 *  - Every function that creates a tensor returns a new reference the caller owns and must give
 *    back with tide_release(). Inputs are borrowed: passing a tensor never consumes it.
 *  - A function that fails returns NULL (or a negative status) and leaves a message naming the op,
 *    the shapes and the dtypes in tide_last_error(), which is per thread. Nothing a caller passes
 *    — NULL, a bad dim, shapes that do not broadcast, a huge size — aborts or crashes the process.
 *  - Type promotion follows PyTorch (core/README.md). Numbers made with tide_number/tide_integer
 *    act like Python scalars: they take part in promotion only by category (bool < int < float).
 */
#ifndef TIDE_H
#define TIDE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#if defined(__GNUC__)
#define TIDE_API __attribute__((visibility("default")))
#else
#define TIDE_API
#endif

/* The library's version. CMakeLists.txt reads these three lines for project(VERSION), so the
 * shared library's version, tide.pc and tideConfigVersion.cmake cannot disagree with them. */
#define TIDE_VERSION_MAJOR 0
#define TIDE_VERSION_MINOR 1
#define TIDE_VERSION_PATCH 0
/* "MAJOR.MINOR.PATCH" of the library linked at run time (the macros are the header's). */
TIDE_API const char *tide_version(void);

#define TIDE_MAX_DIMS 8
/* Pass as the dim of tide_argmax/tide_argmin to reduce over the flattened tensor. */
#define TIDE_ALL_DIMS INT32_MIN

typedef struct tide_tensor tide_tensor;

typedef enum tide_dtype {
    TIDE_FLOAT32 = 0,
    TIDE_FLOAT64,
    TIDE_INT32,
    TIDE_INT64,
    TIDE_UINT8,
    TIDE_BOOL,
    TIDE_FLOAT16,  /* IEEE binary16 */
    TIDE_BFLOAT16, /* the top half of a float32 */
    TIDE_NUM_DTYPES
} tide_dtype;

/* ---- errors ------------------------------------------------------------------------------- */
/* What kind of failure the last error was, so that a program can act on it without parsing the
 * message. */
typedef enum tide_status {
    TIDE_OK = 0,               /* no error since the thread started or tide_clear_error */
    TIDE_ERR_INVALID_ARGUMENT, /* the caller's mistake: NULL, a bad dim, shape or dtype, ... */
    TIDE_ERR_OUT_OF_MEMORY,    /* host or device memory, or the cap of tide_set_memory_limit */
    TIDE_ERR_UNSUPPORTED,      /* valid, but this build or device cannot do it */
    TIDE_ERR_IO,               /* a file could not be opened, read or written, or is malformed */
    TIDE_ERR_INTERNAL,         /* a failure inside tide or a device driver */
    TIDE_ERR_DISTRIBUTED       /* a collective failed: MPI's error, another rank's, a timeout */
} tide_status;
/* The message and the code of the last error on this thread. A call that succeeds leaves both
 * as they were: test a function's own result (NULL or -1) first, then ask why. */
TIDE_API const char *tide_last_error(void); /* "" when no error has happened on this thread */
TIDE_API int tide_last_error_code(void);    /* a tide_status; TIDE_OK when there is none */
TIDE_API void tide_clear_error(void);       /* both: "" and TIDE_OK */
/* Sets this thread's error to message (a copy), for callbacks that tide calls (the backward
 * hooks) to say why they failed; its code follows the message as tide's own (out of memory,
 * else the caller's mistake). Returns -1. */
TIDE_API int tide_set_error(const char *message);

/* ---- dtypes ------------------------------------------------------------------------------- */
TIDE_API const char *tide_dtype_name(tide_dtype dtype); /* "float32", ...; "invalid" otherwise */
TIDE_API size_t tide_dtype_size(tide_dtype dtype);      /* bytes per element; 0 for an invalid dtype */
TIDE_API int tide_dtype_from_name(const char *name);    /* the dtype, or -1 for an unknown name */
TIDE_API bool tide_dtype_is_floating(tide_dtype dtype);
TIDE_API tide_dtype tide_promote_types(tide_dtype a, tide_dtype b);
/* One element of float16 or bfloat16 (its bits) to and from float: round to nearest, ties to
 * even; out of range to infinity; NaN stays NaN (made quiet). The kernels convert the same way. */
TIDE_API float tide_float16_to_float(uint16_t bits);
TIDE_API uint16_t tide_float_to_float16(float value);
TIDE_API float tide_bfloat16_to_float(uint16_t bits);
TIDE_API uint16_t tide_float_to_bfloat16(float value);

/* ---- lifetime ----------------------------------------------------------------------------- */
TIDE_API tide_tensor *tide_retain(tide_tensor *t); /* returns t; NULL-safe */
TIDE_API void tide_release(tide_tensor *t);        /* NULL-safe */

/* ---- creation ----------------------------------------------------------------------------- */
/* Every creation and random op makes its tensor on a device and fills it there with that
 * device's kernel. The plain forms use the calling thread's default device ("cpu" until
 * tide_set_default_device changes it); each has a form ending in _on whose first argument
 * names the device ("cpu", "vulkan", "vulkan:1"; NULL: the thread's default). An unknown
 * device is an error naming the op and the device. Wrapped numbers and tide_scalar stay 0-dim
 * CPU tensors (they go with any device). */
TIDE_API int tide_set_default_device(const char *device); /* 0, or -1 for an unknown device */
TIDE_API const char *tide_get_default_device(void);
TIDE_API tide_tensor *tide_empty(int ndim, const int64_t *shape, tide_dtype dtype);
TIDE_API tide_tensor *tide_zeros(int ndim, const int64_t *shape, tide_dtype dtype);
TIDE_API tide_tensor *tide_ones(int ndim, const int64_t *shape, tide_dtype dtype);
TIDE_API tide_tensor *tide_full(int ndim, const int64_t *shape, double value, tide_dtype dtype);
/* Values start, start+step, ... while < end (> end for a negative step), as torch.arange. */
TIDE_API tide_tensor *tide_arange(double start, double end, double step, tide_dtype dtype);
TIDE_API tide_tensor *tide_linspace(double start, double end, int64_t steps, tide_dtype dtype);
TIDE_API tide_tensor *tide_eye(int64_t n, int64_t m, tide_dtype dtype);
/* A 0-dim tensor holding value. */
TIDE_API tide_tensor *tide_scalar(double value, tide_dtype dtype);
/* Wrapped numbers: 0-dim operands that promote like Python's float and int scalars. */
TIDE_API tide_tensor *tide_number(double value);
TIDE_API tide_tensor *tide_integer(int64_t value);
/* Copies ndim/shape row-major elements of dtype from data. */
TIDE_API tide_tensor *tide_from_data(const void *data, int ndim, const int64_t *shape, tide_dtype dtype);
/* The _on forms (see above): device first, then the plain form's arguments. */
TIDE_API tide_tensor *tide_empty_on(const char *device, int ndim, const int64_t *shape,
                                    tide_dtype dtype);
TIDE_API tide_tensor *tide_zeros_on(const char *device, int ndim, const int64_t *shape,
                                    tide_dtype dtype);
TIDE_API tide_tensor *tide_ones_on(const char *device, int ndim, const int64_t *shape,
                                   tide_dtype dtype);
TIDE_API tide_tensor *tide_full_on(const char *device, int ndim, const int64_t *shape,
                                   double value, tide_dtype dtype);
TIDE_API tide_tensor *tide_arange_on(const char *device, double start, double end, double step,
                                     tide_dtype dtype);
TIDE_API tide_tensor *tide_linspace_on(const char *device, double start, double end,
                                       int64_t steps, tide_dtype dtype);
/* base ** linspace(start, end, steps) (PyTorch's logspace; base 10 there by default). */
TIDE_API tide_tensor *tide_logspace_on(const char *device, double start, double end,
                                       int64_t steps, double base, tide_dtype dtype);
TIDE_API tide_tensor *tide_eye_on(const char *device, int64_t n, int64_t m, tide_dtype dtype);
TIDE_API tide_tensor *tide_from_data_on(const char *device, const void *data, int ndim,
                                        const int64_t *shape, tide_dtype dtype);

/* Wraps a caller's buffer without copying. strides are in elements (NULL: row-major contiguous)
 * and must keep every element inside the buffer of nbytes. release(data, ctx) is called when the
 * last tensor viewing the buffer is released; it may be NULL. */
typedef void (*tide_release_fn)(void *data, void *ctx);
TIDE_API tide_tensor *tide_wrap(void *data, size_t nbytes, int ndim, const int64_t *shape,
                       const int64_t *strides, tide_dtype dtype, tide_release_fn release,
                       void *ctx);

/* ---- reading back ------------------------------------------------------------------------- */
/* Copies the elements row-major into dst (dst_bytes must be >= numel * dtype size). 0 or -1. */
TIDE_API int tide_to_buffer(const tide_tensor *t, void *dst, size_t dst_bytes);
/* The single element of a one-element tensor, as a double. 0 or -1. */
TIDE_API int tide_item(const tide_tensor *t, double *value);
/* The same as an int64, exact for every int64 (a double is not beyond 2^53). Integer and bool
 * tensors always have one; a floating one needs a whole value in int64's range. 0 or -1. */
TIDE_API int tide_item_int64(const tide_tensor *t, int64_t *value);

/* ---- queries (NULL-safe: 0 / NULL / false for a NULL tensor) ------------------------------- */
TIDE_API int tide_ndim(const tide_tensor *t);
TIDE_API int64_t tide_size(const tide_tensor *t, int dim); /* -1 (and an error) for a bad dim */
TIDE_API const int64_t *tide_shape(const tide_tensor *t);   /* ndim entries */
TIDE_API const int64_t *tide_strides(const tide_tensor *t); /* in elements */
TIDE_API int64_t tide_offset(const tide_tensor *t);         /* in elements, into the storage */
TIDE_API int64_t tide_numel(const tide_tensor *t);
TIDE_API tide_dtype tide_get_dtype(const tide_tensor *t);
TIDE_API bool tide_is_contiguous(const tide_tensor *t);
TIDE_API bool tide_shares_storage(const tide_tensor *a, const tide_tensor *b);
TIDE_API const char *tide_device_name(const tide_tensor *t);
/* Host pointer to the first element for tensors on the CPU; NULL elsewhere (another device,
 * or a placeholder during a jit capture). Elements are at the tensor's strides from there. */
TIDE_API const void *tide_data_ptr(const tide_tensor *t);
/* The same, for writing the elements in place. Views share them: a write shows in every tensor
 * sharing t's storage. */
TIDE_API void *tide_mutable_data_ptr(tide_tensor *t);

/* ---- elementwise unary -------------------------------------------------------------------- */
/* Integer and bool inputs of exp/log/sqrt/rsqrt/sin/cos/tanh/erf/sigmoid/reciprocal give
 * float32. */
TIDE_API tide_tensor *tide_neg(const tide_tensor *x);
TIDE_API tide_tensor *tide_abs(const tide_tensor *x);
TIDE_API tide_tensor *tide_exp(const tide_tensor *x);
TIDE_API tide_tensor *tide_log(const tide_tensor *x);
TIDE_API tide_tensor *tide_sqrt(const tide_tensor *x);
TIDE_API tide_tensor *tide_rsqrt(const tide_tensor *x);
TIDE_API tide_tensor *tide_sin(const tide_tensor *x);
TIDE_API tide_tensor *tide_cos(const tide_tensor *x);
TIDE_API tide_tensor *tide_tanh(const tide_tensor *x);
TIDE_API tide_tensor *tide_erf(const tide_tensor *x); /* error function, within 1 ulp on the CPU */
TIDE_API tide_tensor *tide_sigmoid(const tide_tensor *x);
TIDE_API tide_tensor *tide_relu(const tide_tensor *x);
TIDE_API tide_tensor *tide_floor(const tide_tensor *x);
TIDE_API tide_tensor *tide_ceil(const tide_tensor *x);
TIDE_API tide_tensor *tide_round(const tide_tensor *x); /* half to even, as torch.round */
TIDE_API tide_tensor *tide_sign(const tide_tensor *x);
TIDE_API tide_tensor *tide_reciprocal(const tide_tensor *x);
TIDE_API tide_tensor *tide_logical_not(const tide_tensor *x); /* bool result */

/* ---- elementwise binary (NumPy broadcasting, PyTorch promotion) ---------------------------- */
TIDE_API tide_tensor *tide_add(const tide_tensor *a, const tide_tensor *b);
TIDE_API tide_tensor *tide_sub(const tide_tensor *a, const tide_tensor *b);
TIDE_API tide_tensor *tide_mul(const tide_tensor *a, const tide_tensor *b);
TIDE_API tide_tensor *tide_div(const tide_tensor *a, const tide_tensor *b); /* true division */
TIDE_API tide_tensor *tide_pow(const tide_tensor *a, const tide_tensor *b);
TIDE_API tide_tensor *tide_maximum(const tide_tensor *a, const tide_tensor *b); /* NaN propagates */
TIDE_API tide_tensor *tide_minimum(const tide_tensor *a, const tide_tensor *b);
/* floor(a / b), rounded toward -inf (Python's //), and a - floor(a / b) * b with the divisor's
 * sign (Python's %), as PyTorch >= 1.13. Integers stay integers; integer division by zero gives
 * 0 for both (NumPy's choice; PyTorch raises), float division by zero follows IEEE (inf, nan). */
TIDE_API tide_tensor *tide_floor_divide(const tide_tensor *a, const tide_tensor *b);
TIDE_API tide_tensor *tide_remainder(const tide_tensor *a, const tide_tensor *b);
TIDE_API tide_tensor *tide_eq(const tide_tensor *a, const tide_tensor *b); /* bool results */
TIDE_API tide_tensor *tide_ne(const tide_tensor *a, const tide_tensor *b);
TIDE_API tide_tensor *tide_lt(const tide_tensor *a, const tide_tensor *b);
TIDE_API tide_tensor *tide_le(const tide_tensor *a, const tide_tensor *b);
TIDE_API tide_tensor *tide_gt(const tide_tensor *a, const tide_tensor *b);
TIDE_API tide_tensor *tide_ge(const tide_tensor *a, const tide_tensor *b);
TIDE_API tide_tensor *tide_logical_and(const tide_tensor *a, const tide_tensor *b);
TIDE_API tide_tensor *tide_logical_or(const tide_tensor *a, const tide_tensor *b);
/* The same with a float scalar on the right (a Python float: int tensors promote to float32). */
TIDE_API tide_tensor *tide_add_scalar(const tide_tensor *a, double b);
TIDE_API tide_tensor *tide_sub_scalar(const tide_tensor *a, double b);
TIDE_API tide_tensor *tide_mul_scalar(const tide_tensor *a, double b);
TIDE_API tide_tensor *tide_div_scalar(const tide_tensor *a, double b);
TIDE_API tide_tensor *tide_pow_scalar(const tide_tensor *a, double b);

/* cond ? a : b, all three broadcast together; cond is read as bool. */
TIDE_API tide_tensor *tide_where(const tide_tensor *cond, const tide_tensor *a, const tide_tensor *b);
/* A copy converted to dtype; a new reference to x itself when it already has that dtype. */
TIDE_API tide_tensor *tide_cast(const tide_tensor *x, tide_dtype dtype);

/* ---- more elementwise math (PyTorch's names and semantics) --------------------------------- */
/* Primitives (one kernel each: accuracy needs them; within 1 ulp on the CPU, see ops/README.md).
 * Integer inputs give float32, except trunc (a copy) and fmod (C's %, the dividend's sign). */
TIDE_API tide_tensor *tide_log1p(const tide_tensor *x);
TIDE_API tide_tensor *tide_expm1(const tide_tensor *x);
TIDE_API tide_tensor *tide_log2(const tide_tensor *x);
TIDE_API tide_tensor *tide_tan(const tide_tensor *x);
TIDE_API tide_tensor *tide_asin(const tide_tensor *x);
TIDE_API tide_tensor *tide_acos(const tide_tensor *x);
TIDE_API tide_tensor *tide_atan(const tide_tensor *x);
TIDE_API tide_tensor *tide_sinh(const tide_tensor *x);
TIDE_API tide_tensor *tide_cosh(const tide_tensor *x);
TIDE_API tide_tensor *tide_trunc(const tide_tensor *x);
TIDE_API tide_tensor *tide_atan2(const tide_tensor *a, const tide_tensor *b); /* angle of (b, a) */
TIDE_API tide_tensor *tide_fmod(const tide_tensor *a, const tide_tensor *b);
/* Composites of the primitives (ops/math.c). */
TIDE_API tide_tensor *tide_square(const tide_tensor *x);
TIDE_API tide_tensor *tide_frac(const tide_tensor *x); /* x - trunc(x) */
TIDE_API tide_tensor *tide_hypot(const tide_tensor *a, const tide_tensor *b);
/* start + weight * (end - start) */
TIDE_API tide_tensor *tide_lerp(const tide_tensor *start, const tide_tensor *end,
                                const tide_tensor *weight);
TIDE_API tide_tensor *tide_logaddexp(const tide_tensor *a, const tide_tensor *b);
TIDE_API tide_tensor *tide_xlogy(const tide_tensor *x, const tide_tensor *y); /* 0 where x == 0 */
/* NaN -> nan, +inf -> *posinf, -inf -> *neginf; NULL: the dtype's largest/lowest finite value. */
TIDE_API tide_tensor *tide_nan_to_num(const tide_tensor *x, double nan, const double *posinf,
                                      const double *neginf);
TIDE_API tide_tensor *tide_isnan(const tide_tensor *x); /* bool results */
TIDE_API tide_tensor *tide_isinf(const tide_tensor *x);
TIDE_API tide_tensor *tide_isfinite(const tide_tensor *x);
/* input + value * t1 * t2, input + value * t1 / t2 (all three broadcast) */
TIDE_API tide_tensor *tide_addcmul(const tide_tensor *input, const tide_tensor *t1,
                                   const tide_tensor *t2, double value);
TIDE_API tide_tensor *tide_addcdiv(const tide_tensor *input, const tide_tensor *t1,
                                   const tide_tensor *t2, double value);
TIDE_API tide_tensor *tide_clamp_min(const tide_tensor *x, const tide_tensor *min);
TIDE_API tide_tensor *tide_clamp_max(const tide_tensor *x, const tide_tensor *max);
TIDE_API tide_tensor *tide_exp2(const tide_tensor *x);  /* 2^x */
TIDE_API tide_tensor *tide_log10(const tide_tensor *x); /* base-10 logarithm */
TIDE_API tide_tensor *tide_logical_xor(const tide_tensor *a, const tide_tensor *b); /* bool */

/* ---- elementwise activations (ops/nn_activation_more.c), as torch.nn.functional ------------ */
TIDE_API tide_tensor *tide_elu(const tide_tensor *x, double alpha);
TIDE_API tide_tensor *tide_selu(const tide_tensor *x);
TIDE_API tide_tensor *tide_celu(const tide_tensor *x, double alpha);
TIDE_API tide_tensor *tide_softplus(const tide_tensor *x, double beta, double threshold);
TIDE_API tide_tensor *tide_mish(const tide_tensor *x);
TIDE_API tide_tensor *tide_softsign(const tide_tensor *x);
TIDE_API tide_tensor *tide_hardtanh(const tide_tensor *x, double min_val, double max_val);
TIDE_API tide_tensor *tide_relu6(const tide_tensor *x);
TIDE_API tide_tensor *tide_leaky_relu(const tide_tensor *x, double negative_slope);
TIDE_API tide_tensor *tide_hardswish(const tide_tensor *x);
TIDE_API tide_tensor *tide_hardsigmoid(const tide_tensor *x);
TIDE_API tide_tensor *tide_logsigmoid(const tide_tensor *x);
/* a * sigmoid(b), a and b the two halves of x along dim (0-based; its size must be even) */
TIDE_API tide_tensor *tide_glu(const tide_tensor *x, int dim);

/* ---- reductions --------------------------------------------------------------------------- */
/* Over the ndims dims listed (ndims == 0 or dims == NULL: every dim). Integer and bool inputs
 * of sum and prod give int64, as PyTorch; mean needs a floating input. */
TIDE_API tide_tensor *tide_sum(const tide_tensor *x, const int *dims, int ndims, bool keepdim);
TIDE_API tide_tensor *tide_prod(const tide_tensor *x, const int *dims, int ndims, bool keepdim);
TIDE_API tide_tensor *tide_mean(const tide_tensor *x, const int *dims, int ndims, bool keepdim);
TIDE_API tide_tensor *tide_max(const tide_tensor *x, const int *dims, int ndims, bool keepdim);
TIDE_API tide_tensor *tide_min(const tide_tensor *x, const int *dims, int ndims, bool keepdim);
/* int64 0-based positions along dim (TIDE_ALL_DIMS: in the flattened tensor); first one wins. */
TIDE_API tide_tensor *tide_argmax(const tide_tensor *x, int dim, bool keepdim);
TIDE_API tide_tensor *tide_argmin(const tide_tensor *x, int dim, bool keepdim);

/* ---- views: share the storage of x --------------------------------------------------------- */
TIDE_API tide_tensor *tide_view(const tide_tensor *x, int ndim, const int64_t *shape); /* one -1 allowed */
TIDE_API tide_tensor *tide_reshape(const tide_tensor *x, int ndim, const int64_t *shape); /* copies if needed */
TIDE_API tide_tensor *tide_permute(const tide_tensor *x, const int *perm);   /* perm has ndim entries */
TIDE_API tide_tensor *tide_transpose(const tide_tensor *x, int dim0, int dim1);
TIDE_API tide_tensor *tide_expand(const tide_tensor *x, int ndim, const int64_t *shape); /* -1 keeps */
/* Elements start, start+step, ... < end along dim; start/end clamp like Python slices. step > 0. */
TIDE_API tide_tensor *tide_slice(const tide_tensor *x, int dim, int64_t start, int64_t end, int64_t step);
TIDE_API tide_tensor *tide_select(const tide_tensor *x, int dim, int64_t index);
TIDE_API tide_tensor *tide_squeeze(const tide_tensor *x, int dim); /* no-op unless dim has size 1 */
TIDE_API tide_tensor *tide_squeeze_all(const tide_tensor *x);
TIDE_API tide_tensor *tide_unsqueeze(const tide_tensor *x, int dim); /* dim in [-ndim-1, ndim] */

/* ---- copying movement ---------------------------------------------------------------------- */
TIDE_API tide_tensor *tide_contiguous(const tide_tensor *x); /* new reference to x when already contiguous */
TIDE_API tide_tensor *tide_clone(const tide_tensor *x);      /* always a fresh contiguous copy */
TIDE_API tide_tensor *tide_cat(tide_tensor *const *xs, int n, int dim);
TIDE_API tide_tensor *tide_stack(tide_tensor *const *xs, int n, int dim);
/* pads holds npads/2 (before, after) pairs, the first pair for the last dim, as torch's F.pad. */
TIDE_API tide_tensor *tide_pad(const tide_tensor *x, const int64_t *pads, int npads, double value);
TIDE_API tide_tensor *tide_flip(const tide_tensor *x, const int *dims, int ndims);
/* torch.triu/tril: zeros below (triu) or above (tril) the diagonal-th diagonal of the last two
 * dims (0 the main one, > 0 above, < 0 below); leading dims are a batch. ndim >= 2. */
TIDE_API tide_tensor *tide_triu(const tide_tensor *x, int64_t diagonal);
TIDE_API tide_tensor *tide_tril(const tide_tensor *x, int64_t diagonal);
/* Inclusive prefix sums along dim, added in order along it; integer and bool inputs give int64,
 * as PyTorch. */
TIDE_API tide_tensor *tide_cumsum(const tide_tensor *x, int dim);
/* The k largest (largest false: smallest) elements along dim into *values (x's dtype) and their
 * int64 0-based positions into *indices (either may be NULL), best first whatever sorted says;
 * ties go to the lower position, NaN counts as the largest. Values are a gather of x, so their
 * gradient is scattered back to the chosen places. 0, or -1 with the error set. */
TIDE_API int tide_topk(const tide_tensor *x, int64_t k, int dim, bool largest, bool sorted,
                       tide_tensor **values, tide_tensor **indices);

/* ---- statistics, scans, sorting and searching (ops/stats.c, scan.c, sort.c, search.c) ------- */
/* var/std over dims (NULL/0: all), divided by max(0, N - correction) (1: unbiased); float only.
 * The _mean forms also give the mean (0, or -1 with the error set). */
TIDE_API tide_tensor *tide_var(const tide_tensor *x, const int *dims, int ndims, double correction,
                               bool keepdim);
TIDE_API tide_tensor *tide_std(const tide_tensor *x, const int *dims, int ndims, double correction,
                               bool keepdim);
TIDE_API int tide_var_mean(const tide_tensor *x, const int *dims, int ndims, double correction,
                           bool keepdim, tide_tensor **var, tide_tensor **mean);
TIDE_API int tide_std_mean(const tide_tensor *x, const int *dims, int ndims, double correction,
                           bool keepdim, tide_tensor **std, tide_tensor **mean);
TIDE_API tide_tensor *tide_amax(const tide_tensor *x, const int *dims, int ndims, bool keepdim);
TIDE_API tide_tensor *tide_amin(const tide_tensor *x, const int *dims, int ndims, bool keepdim);
TIDE_API tide_tensor *tide_nansum(const tide_tensor *x, const int *dims, int ndims, bool keepdim);
TIDE_API tide_tensor *tide_nanmean(const tide_tensor *x, const int *dims, int ndims, bool keepdim);
TIDE_API tide_tensor *tide_count_nonzero(const tide_tensor *x, const int *dims, int ndims);
/* p = 2 (also 'fro'), 1, INFINITY, -INFINITY, 0 (the count of nonzeros) or any other p. */
TIDE_API tide_tensor *tide_norm(const tide_tensor *x, double p, const int *dims, int ndims,
                                bool keepdim);
/* Running products (integers give int64), log(sum(exp)) and max/min with the int64 0-based
 * position of each (the later one on ties; NaN wins once met), as torch.cumprod etc. */
TIDE_API tide_tensor *tide_cumprod(const tide_tensor *x, int dim);
TIDE_API tide_tensor *tide_logcumsumexp(const tide_tensor *x, int dim);
TIDE_API int tide_cummax(const tide_tensor *x, int dim, tide_tensor **values, tide_tensor **indices);
TIDE_API int tide_cummin(const tide_tensor *x, int dim, tide_tensor **values, tide_tensor **indices);
/* Sorted values and their int64 0-based positions along dim (either out may be NULL); always
 * stable; NaN the largest (last ascending, first descending). */
TIDE_API int tide_sort(const tide_tensor *x, int dim, bool descending, bool stable,
                       tide_tensor **values, tide_tensor **indices);
TIDE_API tide_tensor *tide_argsort(const tide_tensor *x, int dim, bool descending, bool stable);
/* The lower median along dim (TIDE_ALL_DIMS: of every element, 0-dim) and its position; a line
 * with a NaN gives its first NaN. indices may be NULL. */
TIDE_API int tide_median(const tide_tensor *x, int dim, bool keepdim, tide_tensor **values,
                         tide_tensor **indices);
/* q: 0-dim or 1-D floating, values in [0, 1]; dim may be TIDE_ALL_DIMS; interpolation
 * "linear" (NULL), "lower", "higher", "nearest" or "midpoint". A 1-D q adds a first dim. */
TIDE_API tide_tensor *tide_quantile(const tide_tensor *x, const tide_tensor *q, int dim,
                                    bool keepdim, const char *interpolation);
/* The same for one q, checked here: nothing is read back (a tensor q's values are, to check). */
TIDE_API tide_tensor *tide_quantile_scalar(const tide_tensor *x, double q, int dim, bool keepdim,
                                           const char *interpolation);
/* int64 [count, ndim] 0-based coordinates of the nonzero elements, in row-major order. Reads
 * the count back (a graph break under the jit). */
TIDE_API tide_tensor *tide_nonzero(const tide_tensor *x);
/* The sorted distinct values of x (flattened); inverse (x's shape) and counts may be NULL. */
TIDE_API int tide_unique(const tide_tensor *x, bool sorted, tide_tensor **values,
                         tide_tensor **inverse, tide_tensor **counts);
/* Positions (int64, or int32) to insert values into each sorted row of sorted_sequence; right:
 * after equal elements; sorter (int64 0-based, may be NULL) sorts sorted_sequence. */
TIDE_API tide_tensor *tide_searchsorted(const tide_tensor *sorted_sequence,
                                        const tide_tensor *values, bool out_int32, bool right,
                                        const tide_tensor *sorter);
/* Counts (or summed weights, may be NULL) of each value of a 1-D non-negative integer x. */
TIDE_API tide_tensor *tide_bincount(const tide_tensor *x, const tide_tensor *weights,
                                    int64_t minlength);
/* A histogram of bins equal bins over [min, max] (min == max: x's own range). */
TIDE_API tide_tensor *tide_histc(const tide_tensor *x, int64_t bins, double min, double max);

/* ---- in place ----------------------------------------------------------------------------- */
/* Writes src (broadcast to dst's shape, converted to dst's dtype) into dst, which may be a view. */
TIDE_API int tide_copy_(tide_tensor *dst, const tide_tensor *src);
TIDE_API int tide_fill_(tide_tensor *dst, double value);

/* ---- linear algebra ------------------------------------------------------------------------ */
/* torch.matmul: 1-D·1-D is a dot product, 2-D·2-D a matrix product, 1-D operands gain a dim that
 * is then dropped, and dims before the last two broadcast as batch dims. float32/float64 go to
 * BLAS; integer dtypes use a plain loop; bool is an error. */
TIDE_API tide_tensor *tide_matmul(const tide_tensor *a, const tide_tensor *b);

/* ---- convolution and pooling (NCHW) --------------------------------------------------------- */
/* x [N, C, H, W], weight [O, C/groups, kH, kW], bias [O] or NULL. stride, padding and dilation
 * hold (height, width). */
TIDE_API tide_tensor *tide_conv2d(const tide_tensor *x, const tide_tensor *weight,
                                  const tide_tensor *bias, const int stride[2],
                                  const int padding[2], const int dilation[2], int groups);
/* The gradients of conv2d (autograd uses them; also useful alone): with respect to the input
 * (whose H and W are given, since stride can make them ambiguous) and to the weight. */
TIDE_API tide_tensor *tide_conv2d_grad_input(const tide_tensor *grad_out, const tide_tensor *weight,
                                             const int64_t input_hw[2], const int stride[2],
                                             const int padding[2], const int dilation[2], int groups);
TIDE_API tide_tensor *tide_conv2d_grad_weight(const tide_tensor *x, const tide_tensor *grad_out,
                                              const int64_t kernel_hw[2], const int stride[2],
                                              const int padding[2], const int dilation[2],
                                              int groups);
/* Padding counts as -inf. With indices non-NULL, *indices receives (new reference) the int64
 * position of each maximum in its H*W plane, as PyTorch's return_indices. */
TIDE_API tide_tensor *tide_max_pool2d(const tide_tensor *x, const int kernel[2], const int stride[2],
                                      const int padding[2], tide_tensor **indices);
/* count_include_pad as PyTorch (its default is true). */
TIDE_API tide_tensor *tide_avg_pool2d(const tide_tensor *x, const int kernel[2], const int stride[2],
                                      const int padding[2], bool count_include_pad);
TIDE_API tide_tensor *tide_avg_pool2d_grad(const tide_tensor *grad_out, const int64_t input_hw[2],
                                           const int kernel[2], const int stride[2],
                                           const int padding[2], bool count_include_pad);
/* Output [N, C, out_h, out_w]; bins as PyTorch's adaptive_avg_pool2d. */
TIDE_API tide_tensor *tide_adaptive_avg_pool2d(const tide_tensor *x, int64_t out_h, int64_t out_w);

/* The convolution family beyond 2-D (ops/conv_nd.c, pool_nd.c, fold.c): nd spatial dims (1, 2
 * or 3) after [N, C]; each array holds nd values (NULL: PyTorch's default). Composites of the
 * 2-D primitives, so gradients and devices come with them. conv: weight [O, C/groups, k...];
 * conv_transpose: weight [Cin, Cout/groups, k...], output_padding < stride (depth: < stride or
 * dilation). Pools: stride NULL means the kernel size; ceil_mode as PyTorch; indices (max_pool
 * 1-D only, may be NULL) as tide_max_pool2d. */
TIDE_API tide_tensor *tide_conv_nd(int nd, const tide_tensor *x, const tide_tensor *weight,
                                   const tide_tensor *bias, const int *stride, const int *padding,
                                   const int *dilation, int groups);
TIDE_API tide_tensor *tide_conv_transpose_nd(int nd, const tide_tensor *x, const tide_tensor *weight,
                                             const tide_tensor *bias, const int *stride,
                                             const int *padding, const int *output_padding,
                                             int groups, const int *dilation);
TIDE_API tide_tensor *tide_max_pool_nd(int nd, const tide_tensor *x, const int *kernel,
                                       const int *stride, const int *padding, bool ceil_mode,
                                       tide_tensor **indices);
TIDE_API tide_tensor *tide_avg_pool_nd(int nd, const tide_tensor *x, const int *kernel,
                                       const int *stride, const int *padding, bool ceil_mode,
                                       bool count_include_pad);
TIDE_API tide_tensor *tide_adaptive_avg_pool_nd(int nd, const tide_tensor *x,
                                                const int64_t *output_size);
/* F.unfold: x [N, C, H, W] -> [N, C*kh*kw, L] (channel-major rows, as PyTorch); F.fold: its
 * adjoint, [N, C*kh*kw, L] -> [N, C, output_size], overlapping entries summed. */
TIDE_API tide_tensor *tide_unfold_patches(const tide_tensor *x, const int kernel[2],
                                          const int dilation[2], const int padding[2],
                                          const int stride[2]);
TIDE_API tide_tensor *tide_fold_patches(const tide_tensor *cols, const int64_t output_size[2],
                                        const int kernel[2], const int dilation[2],
                                        const int padding[2], const int stride[2]);

/* ---- indexing (index tensors are int64 or int32; every index is bounds-checked) ------------ */
TIDE_API tide_tensor *tide_gather(const tide_tensor *x, int dim, const tide_tensor *index);
/* A copy of x with src[i][j][k] added at index[i][j][k] along dim (functional). */
TIDE_API tide_tensor *tide_scatter_add(const tide_tensor *x, int dim, const tide_tensor *index,
                                       const tide_tensor *src);
TIDE_API tide_tensor *tide_index_select(const tide_tensor *x, int dim, const tide_tensor *index);
/* weight [V, D], indices of any shape: result indices.shape + [D]. */
TIDE_API tide_tensor *tide_embedding(const tide_tensor *weight, const tide_tensor *indices);
/* int64 result indices.shape + [num_classes]; num_classes < 0: max index + 1. */
TIDE_API tide_tensor *tide_one_hot(const tide_tensor *indices, int64_t num_classes);
TIDE_API tide_tensor *tide_masked_fill(const tide_tensor *x, const tide_tensor *mask, double value);

/* ---- random numbers ------------------------------------------------------------------------ */
/* Counter-based (Philox4x32-10): a seed gives the same numbers for any thread count and on
 * every device. The state is (seed, offset); each call consumes numbers and advances offset. */
TIDE_API void tide_manual_seed(uint64_t seed);
TIDE_API void tide_get_rng_state(uint64_t state[2]);
TIDE_API void tide_set_rng_state(const uint64_t state[2]);
TIDE_API tide_tensor *tide_rand(int ndim, const int64_t *shape, tide_dtype dtype);  /* [0, 1) */
TIDE_API tide_tensor *tide_randn(int ndim, const int64_t *shape, tide_dtype dtype); /* N(0, 1) */
/* Integers uniform in [low, high). */
TIDE_API tide_tensor *tide_randint(int64_t low, int64_t high, int ndim, const int64_t *shape,
                                   tide_dtype dtype);
/* 1 with probability p (a tensor of probabilities), else 0; p's shape and dtype. */
TIDE_API tide_tensor *tide_bernoulli(const tide_tensor *p);
TIDE_API tide_tensor *tide_randperm(int64_t n, tide_dtype dtype);
TIDE_API tide_tensor *tide_rand_on(const char *device, int ndim, const int64_t *shape,
                                   tide_dtype dtype);
TIDE_API tide_tensor *tide_randn_on(const char *device, int ndim, const int64_t *shape,
                                    tide_dtype dtype);
TIDE_API tide_tensor *tide_randint_on(const char *device, int64_t low, int64_t high, int ndim,
                                      const int64_t *shape, tide_dtype dtype);
/* The permutation is shuffled on the host and written through the device's write. */
TIDE_API tide_tensor *tide_randperm_on(const char *device, int64_t n, tide_dtype dtype);
TIDE_API int tide_uniform_(tide_tensor *t, double low, double high);
/* torch.multinomial: num_samples int64 0-based category indices per row of probs (1-D [K] or
 * 2-D [N, K] finite non-negative float weights, any scale), drawn with or without replacement
 * from the same stream as tide_rand, on probs' device. Result [num_samples] or [N, num_samples];
 * not differentiable. The weights are read back to be checked (ops/multinomial.c). */
TIDE_API tide_tensor *tide_multinomial(const tide_tensor *probs, int64_t num_samples,
                                       bool replacement);
TIDE_API int tide_normal_(tide_tensor *t, double mean, double std);

/* ---- composite neural-network ops (built from the ops above) -------------------------------- */
typedef enum tide_reduction {
    TIDE_REDUCTION_NONE = 0,
    TIDE_REDUCTION_MEAN,
    TIDE_REDUCTION_SUM
} tide_reduction;
TIDE_API tide_tensor *tide_softmax(const tide_tensor *x, int dim);
TIDE_API tide_tensor *tide_log_softmax(const tide_tensor *x, int dim);
TIDE_API tide_tensor *tide_logsumexp(const tide_tensor *x, const int *dims, int ndims, bool keepdim);
/* Normalizes over the last n_normalized dims; weight and bias (that shape) may be NULL. */
TIDE_API tide_tensor *tide_layer_norm(const tide_tensor *x, int n_normalized,
                                      const tide_tensor *weight, const tide_tensor *bias, double eps);
/* x [N, C, ...]. Training: batch statistics, and running_mean/running_var (if given) are updated
 * in place with momentum (unbiased variance, as PyTorch). Eval: the running statistics. */
TIDE_API tide_tensor *tide_batch_norm(const tide_tensor *x, tide_tensor *running_mean,
                                      tide_tensor *running_var, const tide_tensor *weight,
                                      const tide_tensor *bias, bool training, double momentum,
                                      double eps);
/* x @ weight^T + bias; weight [out, in]; bias may be NULL. */
TIDE_API tide_tensor *tide_linear(const tide_tensor *x, const tide_tensor *weight,
                                  const tide_tensor *bias);
TIDE_API tide_tensor *tide_dropout(const tide_tensor *x, double p, bool training);

/* ---- quantized weights (docs/quantization.md; block layouts in core/quant.h) --------------- */
/* llama.cpp's block formats: a row of K values (K a multiple of 32) is K/32 blocks of a float16
 * scale and 32 values, q8_0 as int8 (34 bytes a block), q4_0 as 4-bit (18 bytes). A quantized
 * weight is an ordinary uint8 tensor [rows, K/32 * block bytes]; its format travels beside it. */
typedef enum tide_qformat { TIDE_Q8_0 = 0, TIDE_Q4_0 = 1 } tide_qformat;
/* "q8_0", "q4_0"; NULL for an unknown value. */
TIDE_API const char *tide_qformat_name(tide_qformat fmt);
/* The format named name, or -1 (no error set) when there is none. */
TIDE_API int tide_qformat_from_name(const char *name);
/* Bytes per block of 32 values (34, 18), 0 for an unknown format. */
TIDE_API int tide_qformat_block_bytes(tide_qformat fmt);
/* w float32/float16/bfloat16 [rows, K] -> uint8 [rows, K/32 * block bytes]. */
TIDE_API tide_tensor *tide_quantize(const tide_tensor *w, tide_qformat fmt);
/* q uint8 [rows, K/32 * block bytes] -> float32 [rows, K]. */
TIDE_API tide_tensor *tide_dequantize(const tide_tensor *q, tide_qformat fmt, int64_t k);
/* x float32 (or half, cast up) [..., K] times dequantize(q)^T: float32 [..., rows]. x is
 * quantized per block of 32 to int8 on the fly (integer dot products); differentiable in x
 * (dx = g @ dequantize(q)), not in q. */
TIDE_API tide_tensor *tide_qlinear(const tide_tensor *x, const tide_tensor *q, tide_qformat fmt);
/* torch.nn.functional.scaled_dot_product_attention: softmax(q k^T * scale + mask) v with
 * q [..., L, E], k [..., S, E], v [..., S, Ev] (batch dims broadcast), float32 or float64, one
 * fused kernel that never stores the L x S scores. attn_mask (NULL: none) is bool (true = take
 * part) or q's float dtype (added to the scores), broadcastable to [..., L, S]; is_causal lets
 * query i see keys j <= i (top-left), and excludes attn_mask. scale NULL: 1/sqrt(E). dropout_p
 * must be 0 (not supported yet). A row with every key masked gives NaN, as the composite. */
TIDE_API tide_tensor *tide_scaled_dot_product_attention(const tide_tensor *q, const tide_tensor *k,
                                                        const tide_tensor *v,
                                                        const tide_tensor *attn_mask,
                                                        bool is_causal, double dropout_p,
                                                        const double *scale);
/* logits [N, C] or [N, C, d...] (or [C]); target class indices (0-based, int64) [N] or
 * [N, d...]; ignore_index as PyTorch (-100 by default there). */
TIDE_API tide_tensor *tide_cross_entropy(const tide_tensor *logits, const tide_tensor *target,
                                         tide_reduction reduction, double label_smoothing,
                                         int64_t ignore_index);
TIDE_API tide_tensor *tide_nll_loss(const tide_tensor *log_probs, const tide_tensor *target,
                                    tide_reduction reduction, int64_t ignore_index);
TIDE_API tide_tensor *tide_mse_loss(const tide_tensor *input, const tide_tensor *target,
                                    tide_reduction reduction);
TIDE_API tide_tensor *tide_binary_cross_entropy_with_logits(const tide_tensor *logits,
                                                            const tide_tensor *target,
                                                            tide_reduction reduction);
/* approximate_tanh: the tanh approximation (PyTorch's approximate="tanh"); else erf-exact. */
TIDE_API tide_tensor *tide_gelu(const tide_tensor *x, bool approximate_tanh);
TIDE_API tide_tensor *tide_silu(const tide_tensor *x);
/* Normalizations, resizing and padding (ops/nn_group_norm.c, nn_resize.c, nn_pad.c). */
/* x [N, C, ...]: each of num_groups groups of C/num_groups channels normalized per sample
 * (biased variance, eps inside the root); weight and bias [C] or NULL. */
TIDE_API tide_tensor *tide_group_norm(const tide_tensor *x, int64_t num_groups,
                                      const tide_tensor *weight, const tide_tensor *bias,
                                      double eps);
/* x [N, C, spatial...] (at least one spatial dim): each channel of each sample normalized over
 * its spatial dims (input statistics; no running statistics). */
TIDE_API tide_tensor *tide_instance_norm(const tide_tensor *x, const tide_tensor *weight,
                                         const tide_tensor *bias, double eps);
typedef enum tide_interp_mode {
    TIDE_INTERP_NEAREST = 0, /* src = floor(dst * scale), PyTorch's "nearest" */
    TIDE_INTERP_LINEAR,
    TIDE_INTERP_NEAREST_EXACT /* src = floor((dst + 0.5) * scale), PyTorch's "nearest-exact" */
} tide_interp_mode;
/* x [N, C, nsp spatial dims] (nsp 1..3) resized to size (nsp sizes) or, when size is NULL, to
 * floor(in * scales[i]); the scales, when given, set the source coordinates as PyTorch's
 * scale_factor does. LINEAR is linear/bilinear/trilinear; align_corners as PyTorch. */
TIDE_API tide_tensor *tide_interpolate(const tide_tensor *x, int nsp, const int64_t *size,
                                       const double *scales, tide_interp_mode mode,
                                       bool align_corners);
typedef enum tide_grid_mode { TIDE_GRID_BILINEAR = 0, TIDE_GRID_NEAREST, TIDE_GRID_BICUBIC } tide_grid_mode;
typedef enum tide_grid_padding {
    TIDE_GRID_ZEROS = 0,
    TIDE_GRID_BORDER,
    TIDE_GRID_REFLECTION
} tide_grid_padding;
/* F.grid_sample: input [N, C, H, W] sampled at grid [N, Ho, Wo, 2] ((x, y) in [-1, 1]) ->
 * [N, C, Ho, Wo], with PyTorch's coordinates, padding modes and align_corners. */
TIDE_API tide_tensor *tide_grid_sample(const tide_tensor *input, const tide_tensor *grid,
                                       tide_grid_mode mode, tide_grid_padding padding,
                                       bool align_corners);
typedef enum tide_padding_mode {
    TIDE_PAD_CONSTANT = 0,
    TIDE_PAD_REFLECT,
    TIDE_PAD_REPLICATE,
    TIDE_PAD_CIRCULAR
} tide_padding_mode;
/* tide_pad with F.pad's modes (pads as tide_pad; value is used by CONSTANT only). */
TIDE_API tide_tensor *tide_pad_mode(const tide_tensor *x, const int64_t *pads, int npads,
                                    tide_padding_mode mode, double value);
/* [..., C*r*r, H, W] -> [..., C, H*r, W*r], and back. */
TIDE_API tide_tensor *tide_pixel_shuffle(const tide_tensor *x, int64_t upscale_factor);
TIDE_API tide_tensor *tide_pixel_unshuffle(const tide_tensor *x, int64_t downscale_factor);

/* ---- autograd ------------------------------------------------------------------------------ */
/* Marks a floating-point leaf as needing gradients (or not). 0 or -1. */
TIDE_API int tide_requires_grad_(tide_tensor *t, bool requires_grad);
TIDE_API bool tide_requires_grad(const tide_tensor *t);
/* The accumulated gradient (new reference), or NULL when there is none (not an error). */
TIDE_API tide_tensor *tide_grad(const tide_tensor *t);
/* Replaces the gradient (NULL clears it). 0 or -1. */
TIDE_API int tide_set_grad(tide_tensor *t, const tide_tensor *grad);
/* Accumulates d(root)/d(leaf) into every leaf's grad. grad_root NULL means 1 (root must have
 * one element). Without retain_graph the graph's saved tensors are freed. 0 or -1. */
TIDE_API int tide_backward(tide_tensor *root, const tide_tensor *grad_root, bool retain_graph);
/* tide_backward with create_graph: the backward pass is itself recorded, so the leaves' grads
 * are in a graph and can be differentiated again (Hessian-vector products, gradient penalties).
 * Grads are then accumulated out of place. A leaf's grad made so refers to the leaf through its
 * graph (a reference cycle, as in PyTorch): set it to NULL (tide_set_grad) when done, or use
 * tide_autograd_grad, which touches no .grad. PyTorch's default is retain_graph = create_graph. */
TIDE_API int tide_backward_ex(tide_tensor *root, const tide_tensor *grad_root, bool retain_graph,
                              bool create_graph);
/* Hooks that backward (tide_backward, tide_backward_ex; not tide_autograd_grad) calls on the
 * calling thread: grad_ready(ctx, leaf) once a leaf tensor's .grad holds every contribution
 * of this backward pass (it runs before the walk ends, while other nodes still wait), and
 * done(ctx) after the walk ended without error. A -1 return (with the error set) stops backward
 * with that error. Passing NULLs removes them. grad_ready runs once per leaf and pass, with grad
 * mode off (unless create_graph) and autocast off; a leaf whose every contribution was empty
 * still gets it. Data-parallel training starts reducing a bucket of gradients from it. */
typedef int (*tide_grad_ready_fn)(void *ctx, tide_tensor *leaf);
typedef int (*tide_backward_done_fn)(void *ctx);
TIDE_API void tide_set_backward_hooks(tide_grad_ready_fn grad_ready, tide_backward_done_fn done,
                                      void *ctx);
/* torch.autograd.grad: grads[j] = d(sum_i <outputs[i], grad_outputs[i]>)/d(inputs[j]) (new
 * references), without touching any .grad. grad_outputs NULL (or a NULL entry) means 1 for a
 * one-element output. inputs may be leaves or results inside the graph; each must require grad.
 * An input no gradient reaches is an error unless allow_unused (then its grads[j] is NULL).
 * With create_graph the gradients are in a graph (differentiable again). 0, or -1 with the
 * error set and every grads[j] NULL. */
TIDE_API int tide_autograd_grad(tide_tensor *const *outputs, const tide_tensor *const *grad_outputs,
                                int noutputs, tide_tensor *const *inputs, int ninputs,
                                bool retain_graph, bool create_graph, bool allow_unused,
                                tide_tensor **grads);
/* The same values, outside the graph (shares storage). */
TIDE_API tide_tensor *tide_detach(const tide_tensor *t);
/* Grad mode of the calling thread; returns the previous setting. */
TIDE_API bool tide_set_grad_enabled(bool enabled);
TIDE_API bool tide_is_grad_enabled(void);
/* Autocast (mixed precision) of the calling thread, as PyTorch's CPU autocast. While it is
 * TIDE_FLOAT16 or TIDE_BFLOAT16, matmul, linear, conv2d and scaled_dot_product_attention cast
 * their float32 inputs to it (results in it; autograd carries gradients back through the casts
 * to float32 leaves), and softmax, log_softmax, logsumexp, layer_norm, batch_norm, cross_entropy,
 * nll_loss, mse_loss and binary_cross_entropy_with_logits cast half inputs to float32. Backward
 * runs with it off. tide_set_autocast: 0, or -1 for a dtype other than those two or
 * TIDE_AUTOCAST_OFF. */
#define TIDE_AUTOCAST_OFF (-1)
TIDE_API int tide_set_autocast(int dtype);
TIDE_API int tide_get_autocast(void); /* the dtype, or TIDE_AUTOCAST_OFF */
/* The name of the op that made t inside a graph ("add", "matmul"...), or NULL for a leaf. */
TIDE_API const char *tide_grad_fn_name(const tide_tensor *t);
/* For a binding whose op is several C calls (Lua's clamp, dot, x:mul_()): until tide_end_op,
 * the backward nodes recorded are named name (tide_grad_fn_name) and an allocation failure
 * names it, unless an enclosing op already names them. name must live as long as the program
 * (a string literal). tide_begin_op returns what tide_end_op must be given. */
TIDE_API const char *tide_begin_op(const char *name);
TIDE_API void tide_end_op(const char *previous);

/* ---- files (io/) --------------------------------------------------------------------------- */
/* Loaders check every size a file declares against the file's real size before allocating, so
 * a truncated, corrupted or lying file gives NULL (or -1) and an error naming the function, the
 * file and what is wrong — never a crash, an over-read or a huge allocation. Loaded tensors are
 * contiguous, on the CPU. Writers do not create directories; a failed write leaves whatever
 * part of the file was written. */

/* Named tensors read from a checkpoint, in file order (by data offset), with its string
 * metadata. Tensors handed out are borrowed: valid until tide_tensor_dict_free (tide_retain one
 * to keep it longer). An index out of range gives NULL and an error. */
typedef struct tide_tensor_dict tide_tensor_dict;
TIDE_API int tide_tensor_dict_count(const tide_tensor_dict *d);
TIDE_API const char *tide_tensor_dict_name(const tide_tensor_dict *d, int i);
TIDE_API tide_tensor *tide_tensor_dict_tensor(const tide_tensor_dict *d, int i);
TIDE_API tide_tensor *tide_tensor_dict_find(const tide_tensor_dict *d, const char *name);
TIDE_API int tide_tensor_dict_metadata_count(const tide_tensor_dict *d);
TIDE_API const char *tide_tensor_dict_metadata_key(const tide_tensor_dict *d, int i);
TIDE_API const char *tide_tensor_dict_metadata_value(const tide_tensor_dict *d, int i);
TIDE_API const char *tide_tensor_dict_metadata_find(const tide_tensor_dict *d, const char *key);
TIDE_API void tide_tensor_dict_free(tide_tensor_dict *d); /* NULL-safe; releases the tensors */

/* safetensors (8-byte little-endian header length, a JSON header, raw little-endian data), as
 * the reference library writes it: tensors ordered by dtype size then name, the header padded
 * with spaces to a multiple of 8 bytes. Names are distinct UTF-8 strings other than
 * "__metadata__"; metadata holds nmetadata (key, value) pairs of UTF-8 strings stored under
 * "__metadata__" (NULL and 0 for none). Strided tensors are written row-major. 0 or -1. */
TIDE_API int tide_save_safetensors(const char *path, const char *const *names,
                                   tide_tensor *const *tensors, int n,
                                   const char *const *metadata, int nmetadata);
/* Dtypes F32, F64, I32, I64, U8 and BOOL; others (F16, BF16, ...) are an "unsupported dtype"
 * error. Stored bools other than 0 read as true. */
TIDE_API tide_tensor_dict *tide_load_safetensors(const char *path);

/* NumPy's .npy: writes version 1.0 byte for byte as numpy.save does; reads 1.0, 2.0 and 3.0
 * with descr <f4 <f8 <i4 <i8 |u1 |b1 (big-endian '>' variants are converted) in C order
 * (fortran_order True is an error). */
TIDE_API int tide_save_npy(const char *path, const tide_tensor *t);
TIDE_API tide_tensor *tide_load_npy(const char *path);

/* The IDX format of MNIST and Fashion-MNIST, gzipped or plain: big-endian sizes and data.
 * Type codes map to tide dtypes: 0x08 uint8, 0x09 int8 and 0x0B int16 widen to int32, 0x0C
 * int32, 0x0D float32, 0x0E float64. Images come back [N, 28, 28] uint8, labels [N] uint8. */
TIDE_API tide_tensor *tide_load_idx(const char *path);

/* Raw little-endian elements with no header of their own: shape's elements of dtype read from
 * byte offset of path (as llama2.c's checkpoints store their arrays). A file too short for
 * them is an error naming the bytes needed and the file's size. */
TIDE_API tide_tensor *tide_load_raw(const char *path, uint64_t offset, tide_dtype dtype,
                                    int ndim, const int64_t *shape);

/* ---- jit (jit/README.md) ------------------------------------------------------------------ */
/* Capture: between tide_jit_begin and tide_jit_end the calling thread records the ops it calls
 * instead of running them (results are placeholders: reading their data is an error until
 * tide_jit_end). inputs are the graph's arguments, replaced on every tide_graph_run (pass
 * scalars such as a learning rate as 0-dim tensors, e.g. tide_number, so they stay runtime
 * values); every other tensor the ops read is captured by reference: each run reads its current
 * values, and in-place writes into it (tide_copy_, tide_fill_) happen again on each run.
 * tide_jit_end compiles the graph (or finds it in the cache), runs it once so every tensor made
 * during the capture holds its value, and returns it; outputs are what tide_graph_run returns.
 * NULL on error (the capture is then over). Captures do not nest. */
typedef struct tide_graph tide_graph;
TIDE_API int tide_jit_begin(tide_tensor *const *inputs, int ninputs);
TIDE_API tide_graph *tide_jit_end(tide_tensor *const *outputs, int noutputs);
/* Runs the graph on new inputs (same shapes, dtypes and strides as captured; checked):
 * outputs[i] receives a new reference. Safe to call from several threads at once. 0 or -1. */
TIDE_API int tide_graph_run(tide_graph *g, tide_tensor *const *inputs, int ninputs,
                            tide_tensor **outputs);
TIDE_API int tide_graph_num_outputs(const tide_graph *g);
/* A capture whose graph serves other sizes of some input dims (jit/README.md, "C API"): bit d
 * of dim_masks[i] makes dim d (0-based) of input i dynamic (NULL or all 0: tide_jit_begin).
 * Each dynamic dim is captured at a size of at least 2. tide_jit_end compiles one symbolic
 * plan; tide_graph_run then takes inputs whose dynamic dims have any size of at least 2 (same
 * rank, dtype, device and static dims; contiguous where the captured one was; dynamic dims
 * equal at capture stay equal) and returns outputs of the shapes the captured ops give at
 * those sizes, with no recompile. Ops replay their arguments as captured: a FILL's or random
 * tensor's shape and a slice's bounds stay literal; a reshape keeps a dynamic size in the dim
 * that carried it. What cannot follow the sizes is an error naming the op, at tide_jit_end
 * (which tries other sizes) or at tide_graph_run: a reshape splitting a dynamic size over
 * several dims, a slice along one, an op without a shape rule (gather, pad, topk...) reading
 * one, a reduction's count over one read as a number (tide_mean over the batch), a guard of
 * the plan a run breaks (a fused row past 32768). */
TIDE_API int tide_jit_begin_dynamic(tide_tensor *const *inputs, int ninputs,
                                    const uint32_t *dim_masks);
TIDE_API void tide_graph_free(tide_graph *g); /* NULL-safe */

/* A graph's argument and result names, dtypes and shapes (an imported model's, tide_onnx_load;
 * a captured graph's inputs are "input0"..., its outputs "output0"...). A dim -1 is one the
 * model leaves free (ONNX's dim_param); tide_graph_dim_name gives its name. NULL or -1 for a bad
 * index. */
TIDE_API int tide_graph_num_inputs(const tide_graph *g);
TIDE_API const char *tide_graph_input_name(const tide_graph *g, int i);
TIDE_API const char *tide_graph_output_name(const tide_graph *g, int i);
/* dtype and ndim (may be NULL); shape receives min(ndim, max_dims) sizes. 0 or -1. */
TIDE_API int tide_graph_input_info(const tide_graph *g, int i, tide_dtype *dtype, int *ndim,
                                   int64_t *shape, int max_dims);
TIDE_API int tide_graph_output_info(const tide_graph *g, int i, tide_dtype *dtype, int *ndim,
                                    int64_t *shape, int max_dims);
/* The name of input i's free dim d (ONNX dim_param), or NULL when that dim is fixed. */
TIDE_API const char *tide_graph_dim_name(const tide_graph *g, int i, int d);
/* A compiled graph as one file (docs/export.md): its ops, the tensors it captured (weights;
 * aligned blobs, mapped on load), its dynamic dims, input and output names, a format version and
 * checksums. tide_graph_save writes g (names NULL: the graph's own, "input0"...).
 * tide_graph_load reads one back compiled for device (NULL: the device it was saved from), with
 * no Lua needed: runs give the saved graph's bits on the CPU. Captured CPU tensors stay views of
 * the mapped file. A file from a newer format, a damaged section (checksums) or nodes that do
 * not hold together are errors naming the file and the fault. 0 / -1, the graph / NULL. */
typedef struct tide_graph_save_options {
    const char *const *input_names;  /* num_inputs names, or NULL */
    const char *const *output_names; /* num_outputs names, or NULL */
    int nmetadata;                   /* string metadata: nmetadata key, value pairs */
    const char *const *metadata;     /* key0, value0, key1, value1, ... */
} tide_graph_save_options;
TIDE_API int tide_graph_save(const tide_graph *g, const char *path,
                             const tide_graph_save_options *opts);
/* A loaded graph runs inputs its plan does not take but its declared types do (a size 1 in a
 * dynamic dim, strides other than the saved ones) through a plan of their own, made from the
 * file's nodes at those layouts; a static dim at another size is an error naming it. */
TIDE_API tide_graph *tide_graph_load(const char *path, const char *device);
/* A loaded graph's metadata: the value of key, or NULL; the keys by index. */
TIDE_API const char *tide_graph_metadata(const tide_graph *g, const char *key);
TIDE_API int tide_graph_num_metadata(const tide_graph *g);
TIDE_API const char *tide_graph_metadata_key(const tide_graph *g, int i);
/* Pauses the calling thread's trace or capture: ops run eagerly until tide_jit_resume, and their
 * results are constants of the trace (an importer folds shape arithmetic this way). Returns a
 * token for tide_jit_resume (NULL when the thread was not tracing; resuming NULL does nothing).
 * Pauses do not nest. */
TIDE_API void *tide_jit_pause(void);
TIDE_API void tide_jit_resume(void *token);

/* Counts of a traced function (or of the whole process). */
typedef struct tide_jit_stats {
    int64_t compiles, hits, misses, breaks, fallbacks;
    double compile_ms;
} tide_jit_stats;
/* Trace sessions (what tide.jit uses; its other hooks are in core/tide_internal.h): ops are
 * recorded; a read of tensor data (tide_item, tide_to_buffer) is a graph break: the pending
 * segment is compiled (or found in the cache) and run, then recording goes on. Every tensor a
 * segment reads from outside is a runtime argument. stats (may be NULL) is updated; where(ctx),
 * if given, names the caller's source line for TIDE_LOG=jit. tide_jit_trace_end runs what is
 * pending and stops. 0 or -1. */
TIDE_API int tide_jit_trace_begin(tide_jit_stats *stats, const char *(*where)(void *ctx),
                                  void *ctx);
TIDE_API int tide_jit_trace_end(void);
TIDE_API void tide_jit_global_stats(tide_jit_stats *stats);
/* A traced function's fallback (what tide.jit keeps per function): before each call,
 * tide_jit_function_admit(f, args, nargs, other, where) returns 1 when the call is to be traced
 * (a trace session with tide_jit_function_stats(f)) and 0 when it runs eagerly: inside another
 * trace, or for good once max_signatures (1..64) distinct signatures were met (shapes, dtypes
 * and requires_grad of the tensor arguments; NULL entries are not tensors, and `other` mixes in
 * what else the caller's signature holds). The fallback is counted and said once on stderr,
 * naming where (may be NULL) and the argument and dim that kept changing. */
typedef struct tide_jit_function tide_jit_function;
TIDE_API tide_jit_function *tide_jit_function_new(int max_signatures);
TIDE_API void tide_jit_function_free(tide_jit_function *f); /* NULL-safe */
TIDE_API int tide_jit_function_admit(tide_jit_function *f, tide_tensor *const *args, int nargs,
                                     uint64_t other, const char *where);
TIDE_API tide_jit_stats *tide_jit_function_stats(tide_jit_function *f);
TIDE_API bool tide_jit_function_is_eager(const tide_jit_function *f);
/* Symbolic dims (jit/README.md). A call whose tensor arguments differ from a signature met
 * before only in sizes of 2 or more makes those dims dynamic: it is the same signature, and its
 * trace's plans take the sizes at run time (one compile serves every size; sizes 0 and 1
 * specialize). tide_jit_function_set_dynamic declares dims (bit d of dims: dim d, 0-based) of
 * argument arg (0-based, < 16) dynamic from the first call; set_static(f, true) keeps a plan
 * per shape (every shape its own signature). Both before the first call. */
TIDE_API int tide_jit_function_set_dynamic(tide_jit_function *f, int arg, uint32_t dims);
TIDE_API void tide_jit_function_set_static(tide_jit_function *f, bool static_only);
/* The dims that became (or were declared) dynamic: their count; the first max into args[] and
 * dims[] (0-based). */
TIDE_API int tide_jit_function_dynamic_dims(const tide_jit_function *f, int *args, int *dims,
                                            int max);
/* Why the function's plans recompiled, the i-th of the latest 32 kept (NULL past them): "argument
 * 1 dim 1 was 64, now 37: dim made symbolic", "input 2 dim 1 was 3, now 1 (sizes 0 and 1
 * specialize): compiled for this shape", ... */
TIDE_API const char *tide_jit_function_recompile_reason(const tide_jit_function *f, int i);
/* A trace session for a call that tide_jit_function_admit admitted: with f's statistics, and
 * its dynamic dims' sizes in this call (so its plans can be symbolic). 0 or -1. */
TIDE_API int tide_jit_trace_begin_function(tide_jit_function *f,
                                           const char *(*where)(void *ctx), void *ctx);
/* Drops the compiled plans the cache holds (later captures and traces compile again). A live
 * tide_graph keeps its own plan, freed with the graph, so graphs still run. Safe while other
 * threads run ops and graphs. */
TIDE_API void tide_jit_cache_clear(void);

/* ---- ONNX models (io/onnx/README.md, docs/onnx.md) ---------------------------------------- */
/* An imported ONNX model run op by op (eagerly, or recorded by a trace it runs in): inputs and
 * outputs in the model's order (tide_graph_* names them through tide_onnx_load's graph; here
 * tide_onnx_input_name). Initializers live on `device` (NULL: the default device); inputs must
 * be there too. An op, attribute or dtype the importer does not support is an error naming the
 * op, the node and the opset (TIDE_ERR_UNSUPPORTED), at load. External data files must lie in
 * the model's folder. NULL / -1 with tide_last_error() set. */
typedef struct tide_onnx_model tide_onnx_model;
TIDE_API tide_onnx_model *tide_onnx_open(const char *path, const char *device);
TIDE_API void tide_onnx_close(tide_onnx_model *m); /* NULL-safe */
TIDE_API int tide_onnx_num_inputs(const tide_onnx_model *m);
TIDE_API int tide_onnx_num_outputs(const tide_onnx_model *m);
TIDE_API const char *tide_onnx_input_name(const tide_onnx_model *m, int i);
TIDE_API const char *tide_onnx_output_name(const tide_onnx_model *m, int i);
/* As tide_graph_input_info: the declared dtype and shape, -1 for a free dim (dim_name names it
 * when dim_name is not NULL: max_dims entries, NULL for a fixed dim). */
TIDE_API int tide_onnx_input_info(const tide_onnx_model *m, int i, tide_dtype *dtype, int *ndim,
                                  int64_t *shape, const char **dim_names, int max_dims);
TIDE_API int tide_onnx_output_info(const tide_onnx_model *m, int i, tide_dtype *dtype,
                                   int *ndim, int64_t *shape, const char **dim_names,
                                   int max_dims);
/* Runs the model: ninputs must be the model's input count (a NULL input is an error);
 * outputs[i] receives a new reference. 0 or -1. */
TIDE_API int tide_onnx_run(tide_onnx_model *m, tide_tensor *const *inputs, int ninputs,
                           tide_tensor **outputs);
/* Loads path and compiles it into a graph (tide_graph_run, tide_graph_free; names and
 * declared shapes through tide_graph_input_name & co.). Free dims are captured at the sizes of
 * opts->dim_sizes for the names opts->dim_names (1 for any other), and a run with other sizes
 * compiles (once) and runs a plan for them. opts may be NULL. */
typedef struct tide_onnx_options {
    const char *device;          /* NULL: the default device */
    int ndims;                   /* free dims given sizes for the capture */
    const char *const *dim_names;
    const int64_t *dim_sizes;
} tide_onnx_options;
TIDE_API tide_graph *tide_onnx_load(const char *path, const tide_onnx_options *opts);
/* A TensorProto file (.pb, as the ONNX test data store them) as a tensor on the default
 * device. */
TIDE_API tide_tensor *tide_onnx_load_tensor(const char *path);

/* ---- devices ------------------------------------------------------------------------------ */
/* Tensors live on "cpu" (the default) or "vulkan" (devices/vulkan: any Vulkan GPU, or Mesa's
 * lavapipe on the CPU). Ops run on their operands' device; operands on two devices are an error
 * (wrapped numbers and 0-dim CPU tensors go with any device). Vulkan ops are queued and run at
 * the next synchronization point: a read to the host (tide_to_buffer, tide_item, printing,
 * tide_to "cpu") or tide_sync. */
/* A copy of t on device ("cpu", "vulkan", "vulkan:1"); a new reference to t when it is already
 * there. A dispatched op (TO): autograd records it (the gradient goes back to t's device) and
 * the jit traces it in the segment of t's device. */
TIDE_API tide_tensor *tide_to(const tide_tensor *t, const char *device);
/* Waits until every queued kernel and copy of every device has finished. 0 or -1. */
TIDE_API int tide_sync(void);
/* The devices present, over every kind the build has (each kind's devices in order), and for
 * device i the name tide_to takes ("cpu", "vulkan" for the Vulkan default, "vulkan:1"...) and
 * what it is (may be empty). Nothing is opened. 0 or -1 for a bad index. */
TIDE_API int tide_device_count(void);
TIDE_API int tide_device_info(int i, char *name, size_t n, char *about, size_t an);
/* 0 when name ("cpu", "vulkan", "vulkan:1"...) names a device that can be used (it is opened
 * then); -1 when not, and why (n bytes, may be NULL) says why, such as "unknown device
 * (devices: cpu, vulkan)" or why the Vulkan device is not available. Sets no error. */
TIDE_API int tide_device_check(const char *name, char *why, size_t n);
/* Whether the Vulkan device can be used. When it cannot, why (n bytes, may be NULL) says why:
 * no loader (libvulkan.so.1), no driver, no device. TIDE_VULKAN_DEVICE=index picks a device;
 * otherwise a discrete GPU is preferred, then an integrated one, then a CPU implementation. */
TIDE_API bool tide_vulkan_available(char *why, size_t n);
/* The Vulkan devices seen (0 when there is no Vulkan at all), and for device i its name, kind
 * ("discrete GPU", "integrated GPU", "virtual GPU", "CPU", "other") and whether tide uses it.
 * 0 or -1 for a bad index. */
TIDE_API int tide_vulkan_device_count(void);
TIDE_API int tide_vulkan_device_info(int i, char *name, size_t n, const char **kind,
                                     bool *selected);

/* ---- runtime ------------------------------------------------------------------------------ */
/* Threads used by kernels above a size threshold. Default: TIDE_NUM_THREADS, else the cores. */
TIDE_API void tide_set_num_threads(int n);
TIDE_API int tide_get_num_threads(void);
/* Gives cached memory blocks back to the system, and drops the jit's cached plans with the
 * compiled code no live tide_graph holds (later calls compile again). Safe while other threads
 * run ops. */
TIDE_API void tide_empty_cache(void);
/* Bytes held by live tensors and bytes cached for reuse. */
TIDE_API void tide_memory_stats(size_t *in_use, size_t *cached);
/* The most bytes live tensors held at once since the last reset (or the start); reset: start
 * again from the bytes in use now. */
TIDE_API size_t tide_memory_peak(bool reset);
/* Caps the host memory live tensors may hold, in bytes (0: back to the default, TIDE_MAX_MEMORY
 * MiB or else the machine's physical memory). An allocation past the cap fails: the op returns
 * NULL and tide_last_error() says "out of memory ... cap N MiB". Safe from any thread. */
TIDE_API void tide_set_memory_limit(size_t bytes);
TIDE_API size_t tide_get_memory_limit(void);
/* Frees everything tide holds itself: stops and joins the thread pool, empties the allocator's
 * cache, and frees the caches of the jit and devices that registered a release hook. Call it
 * once no other thread is calling tide, after releasing your tensors and graphs (so that a
 * leak checker sees nothing left). tide stays usable afterwards: the next call starts again. */
TIDE_API void tide_shutdown(void);

/* ---- linear algebra, shapes, indexing, einsum (issue 24; composites of the ops above) ------- */
/* beta * input + alpha * (m1 @ m2); input broadcasts to the product. beta 0 ignores input. */
TIDE_API tide_tensor *tide_addmm(const tide_tensor *input, const tide_tensor *m1,
                                 const tide_tensor *m2, double beta, double alpha);
TIDE_API tide_tensor *tide_addmv(const tide_tensor *input, const tide_tensor *mat,
                                 const tide_tensor *vec, double beta, double alpha);
TIDE_API tide_tensor *tide_baddbmm(const tide_tensor *input, const tide_tensor *b1,
                                   const tide_tensor *b2, double beta, double alpha);
/* beta * input + alpha * sum over the batch of b1[i] @ b2[i] (one product). */
TIDE_API tide_tensor *tide_addbmm(const tide_tensor *input, const tide_tensor *b1,
                                  const tide_tensor *b2, double beta, double alpha);
TIDE_API tide_tensor *tide_outer(const tide_tensor *a, const tide_tensor *b);
TIDE_API tide_tensor *tide_cross(const tide_tensor *a, const tide_tensor *b, int dim); /* size 3 */
TIDE_API tide_tensor *tide_kron(const tide_tensor *a, const tide_tensor *b);
/* Contracts dims_a[i] of a with dims_b[i] of b (n pairs). */
TIDE_API tide_tensor *tide_tensordot(const tide_tensor *a, const tide_tensor *b, int n,
                                     const int *dims_a, const int *dims_b);
/* p-norm distances between the rows of x1 [B.., P, M] and x2 [B.., R, M]: [B.., P, R]. */
TIDE_API tide_tensor *tide_cdist(const tide_tensor *x1, const tide_tensor *x2, double p);
TIDE_API tide_tensor *tide_block_diag(tide_tensor *const *xs, int n);
/* Views: the offset-th diagonal of dims (dim1, dim2) as the last dim; windows of size along
 * dim every step, as a new last dim. */
TIDE_API tide_tensor *tide_diagonal(const tide_tensor *x, int64_t offset, int dim1, int dim2);
TIDE_API tide_tensor *tide_unfold(const tide_tensor *x, int dim, int64_t size, int64_t step);
TIDE_API tide_tensor *tide_diag_embed(const tide_tensor *x, int64_t offset, int dim1, int dim2);
TIDE_API tide_tensor *tide_diag(const tide_tensor *x, int64_t diagonal); /* 1-D <-> 2-D */
TIDE_API tide_tensor *tide_trace(const tide_tensor *x);
TIDE_API tide_tensor *tide_tile(const tide_tensor *x, int nreps, const int64_t *reps);
/* ndims 0: x flattened, rolled by shifts[0], shaped back. */
TIDE_API tide_tensor *tide_roll(const tide_tensor *x, int nshifts, const int64_t *shifts,
                                const int *dims, int ndims);
/* dim NULL: x flattened first. The tensor form reads repeats back (its size depends on them). */
TIDE_API tide_tensor *tide_repeat_interleave(const tide_tensor *x, int64_t repeats, const int *dim);
TIDE_API tide_tensor *tide_repeat_interleave_tensor(const tide_tensor *x, const tide_tensor *repeats,
                                                    const int *dim);
TIDE_API tide_tensor *tide_movedim(const tide_tensor *x, int n, const int *src, const int *dst);
TIDE_API tide_tensor *tide_rot90(const tide_tensor *x, int64_t k, int dim0, int dim1);
TIDE_API tide_tensor *tide_atleast(const tide_tensor *x, int ndim); /* ndim 1, 2 or 3 */
TIDE_API tide_tensor *tide_hstack(tide_tensor *const *xs, int n);
TIDE_API tide_tensor *tide_vstack(tide_tensor *const *xs, int n);
TIDE_API tide_tensor *tide_dstack(tide_tensor *const *xs, int n);
TIDE_API tide_tensor *tide_column_stack(tide_tensor *const *xs, int n);
/* n 1-D tensors to n expanded views (indexing "ij"; xy swaps the first two dims). 0 or -1. */
TIDE_API int tide_meshgrid(tide_tensor *const *xs, int n, bool xy, tide_tensor **out);
TIDE_API tide_tensor *tide_cartesian_prod(tide_tensor *const *xs, int n);
/* The elements of x where mask (broadcast together) is true, 1-D; reads the count back. */
TIDE_API tide_tensor *tide_masked_select(const tide_tensor *x, const tide_tensor *mask);
TIDE_API tide_tensor *tide_take(const tide_tensor *x, const tide_tensor *index);
/* reduce NULL: src replaces (of a repeated index the last source along dim wins), "add",
 * "multiply". */
TIDE_API tide_tensor *tide_scatter(const tide_tensor *x, int dim, const tide_tensor *index,
                                   const tide_tensor *src, const char *reduce);
TIDE_API tide_tensor *tide_scatter_value(const tide_tensor *x, int dim, const tide_tensor *index,
                                         double value, const char *reduce);
TIDE_API tide_tensor *tide_index_add(const tide_tensor *x, int dim, const tide_tensor *index,
                                     const tide_tensor *src, double alpha);
TIDE_API tide_tensor *tide_index_copy(const tide_tensor *x, int dim, const tide_tensor *index,
                                      const tide_tensor *src);
TIDE_API tide_tensor *tide_index_fill(const tide_tensor *x, int dim, const tide_tensor *index,
                                      double value);
/* mean + std * randn over the broadcast shape of mean and std. */
TIDE_API tide_tensor *tide_normal(const tide_tensor *mean, const tide_tensor *std);
/* PyTorch's einsum: "ij,jk->ik", implicit output, "...", repeated indices (diagonals). */
TIDE_API tide_tensor *tide_einsum(const char *equation, tide_tensor *const *xs, int n);

/* ---- profiler (ops/profile.c, docs/profile.md) ----------------------------------------------
 * While a profile runs, every eager kernel and every step of a compiled plan (a kernel, an
 * in-place write, a fused group) is timed and recorded with its device, bytes moved and FLOPs.
 * TIDE_PROFILE=path in the environment profiles a whole process (the Chrome trace to path, the
 * table to stderr at exit). Off, it costs one predictable branch per op. */
typedef struct tide_profile_row {
    const char *name;   /* the primitive ("matmul") or fused group ("fused(mul+add)") */
    const char *device; /* "cpu", "vulkan", ... */
    const char *where;  /* the Lua source line that issued or traced it, or "" */
    int64_t calls;
    double total_ms, percent; /* percent of the profiled wall time */
    int64_t bytes, flops;     /* summed over the calls */
    double gbps, gflops;      /* achieved */
    bool compute_bound;       /* FLOPs per byte above the machine's (sgemm / STREAM) */
    double roofline;          /* achieved / the bound's reference (0..1), -1 off the CPU */
} tide_profile_row;
typedef struct tide_profile_event {
    const char *name, *device, *where;
    int tid;
    double ts_us, dur_us; /* from the profile's start */
    int64_t bytes, flops;
} tide_profile_event;
typedef struct tide_profile_summary {
    double wall_ms;      /* from tide_profile_begin to tide_profile_end */
    double kernel_ms;    /* the recorded events' time */
    double stream_gbps;  /* STREAM triad of this process (the CPU's threads) */
    double sgemm_gflops; /* a square float32 matmul through the CPU device */
    char cpu[160];       /* the CPU model and ISA tier */
    int nevents, nrows;
} tide_profile_summary;
/* Starts recording (clearing the last profile's results). -1 when a profile already runs. */
TIDE_API int tide_profile_begin(void);
/* Stops recording; the results stay until the next begin. -1 when none runs. */
TIDE_API int tide_profile_end(void);
TIDE_API bool tide_profile_active(void);
/* The last profile's rows (sorted by total time) and events (in order), valid until the next
 * tide_profile_begin; the count, or -1 while a profile runs. */
TIDE_API int tide_profile_rows(const tide_profile_row **rows);
TIDE_API int tide_profile_events(const tide_profile_event **events);
TIDE_API int tide_profile_summarize(tide_profile_summary *s);
/* The Chrome trace-event JSON of the last profile (chrome://tracing, ui.perfetto.dev). 0 or -1. */
TIDE_API int tide_profile_write_trace(const char *path);
/* The table as text (malloc'd; the caller frees it), or NULL with the error set. */
TIDE_API char *tide_profile_table(void);
/* The calling thread's source-line callback for eager ops (the Lua module sets it); where(ctx)
 * returns "file:line" or NULL. NULL clears it. */
TIDE_API void tide_profile_set_where(const char *(*where)(void *ctx), void *ctx);
/* ---- end of profiler ---- */

/* ---- distributed (distributed/README.md, docs/distributed.md) --------------------------------
 * Collectives over MPI between the processes a launcher (mpirun, mpiexec) started. Each rank
 * calls the same collectives in the same order with tensors of the same dtype and shape; a
 * difference is an error on every rank (TIDE_ERR_DISTRIBUTED), never a hang or mixed data. A
 * rank that waits longer than the timeout for the others fails with an error naming it. CPU
 * tensors go to MPI directly; other devices' are staged through host memory. Built without MPI,
 * every function here fails with TIDE_ERR_UNSUPPORTED saying so. */
typedef enum tide_reduce_op {
    TIDE_REDUCE_SUM, TIDE_REDUCE_MEAN, TIDE_REDUCE_MAX, TIDE_REDUCE_MIN, TIDE_REDUCE_PROD
} tide_reduce_op;
/* Joins the ranks (MPI_Init_thread); idempotent. timeout_s > 0 sets the timeout (else
 * TIDE_DIST_TIMEOUT seconds, else 300). 0 or -1. */
TIDE_API int tide_dist_init(double timeout_s);
TIDE_API bool tide_dist_is_initialized(void);
TIDE_API bool tide_dist_available(void); /* built with MPI */
TIDE_API int tide_dist_rank(void);       /* 0-based; -1 before init */
TIDE_API int tide_dist_world_size(void); /* -1 before init */
TIDE_API int tide_dist_set_timeout(double seconds);
TIDE_API int tide_dist_barrier(void);
/* In place, as torch.distributed: t becomes the reduction over the ranks (MEAN: float dtypes). */
TIDE_API int tide_all_reduce_(tide_tensor *t, tide_reduce_op op);
/* In place: t becomes root's t. */
TIDE_API int tide_broadcast_(tide_tensor *t, int root);
/* Every rank's t along a new first block: [world * n, ...] for t [n, ...] ([world] for 0-dim). */
TIDE_API tide_tensor *tide_all_gather(const tide_tensor *t);
/* t [world * n, ...] reduced over the ranks; rank r gets block r, [n, ...]. */
TIDE_API tide_tensor *tide_reduce_scatter(const tide_tensor *t, tide_reduce_op op);
/* Non-blocking forms: the collective starts on tide's communication thread and the caller goes
 * on; tide_work_wait finishes it (writing t, for the in-place ones) and returns the result (a
 * new reference: t itself for all_reduce_ and broadcast_) or NULL with the error. Works may be
 * waited in any order; a blocking collective first waits for every started one. Until it is
 * waited, t must not be read or written. Under a trace the collective is recorded as a blocking
 * op of the compiled graph and its work is already done. */
typedef struct tide_work tide_work;
TIDE_API tide_work *tide_all_reduce_async(tide_tensor *t, tide_reduce_op op);
TIDE_API tide_work *tide_broadcast_async(tide_tensor *t, int root);
TIDE_API tide_work *tide_all_gather_async(const tide_tensor *t);
TIDE_API tide_work *tide_reduce_scatter_async(const tide_tensor *t, tide_reduce_op op);
TIDE_API bool tide_work_is_completed(tide_work *w); /* true once waiting would not block */
TIDE_API tide_tensor *tide_work_wait(tide_work *w);
TIDE_API void tide_work_free(tide_work *w); /* waits first when it was not waited */
/* Ends every rank at once (MPI_Abort with code): for a rank that failed while the others may be
 * waiting for it inside a collective. Does nothing before init. */
TIDE_API void tide_dist_abort(int code);

#ifdef __cplusplus
}
#endif
#endif /* TIDE_H */
