/*
 * tensor.h — the tensor as the rest of the library sees it (tide.h keeps it opaque), and the
 * helpers of core/: storage and refcounts, shapes and strides, errors, the caching allocator
 * and the thread pool. Internal names start with td_.
 */
#ifndef TIDE_TENSOR_H
#define TIDE_TENSOR_H

#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "device.h"
#include "tide.h"
#include "tide_internal.h" /* the Lua binding's entry points, for their definitions */

/* ---- storage and tensor ------------------------------------------------------------------- */

typedef struct tide_storage {
    int refcount; /* atomic through td_ref_* */
    tide_device *device;
    void *buffer; /* the device's handle; a host pointer on the CPU */
    size_t nbytes;
    bool borrowed;           /* caller-owned memory from tide_wrap: the device never frees it */
    tide_release_fn release; /* called for borrowed memory when the last view goes; may be NULL */
    void *release_ctx;
    uint32_t version; /* bumped by every in-place write; autograd checks its saved tensors */
} tide_storage;

enum {
    TD_WRAPPED_NUMBER = 1, /* made by tide_number/tide_integer: promotes like a Python scalar */
    TD_REQUIRES_GRAD = 2,
    /* jit: a tracer's stand-in for an op's own new result (not a view of another value); the
     * tracer holds one reference to it until its segment runs. Autograd may then take it as a
     * leaf's first gradient without a copy, as it takes a fresh eager tensor. */
    TD_TRACE_RESULT = 4,
};

struct tide_tensor {
    int refcount;
    uint8_t dtype;
    uint8_t ndim;
    uint8_t flags;
    int64_t offset; /* in elements, into storage */
    int64_t shape[TIDE_MAX_DIMS];
    int64_t strides[TIDE_MAX_DIMS]; /* in elements; 0 for expanded dims */
    tide_storage *storage;          /* NULL only for a tensor a tracer has not yet computed */
    tide_device *device;
    /* Reserved for the rooms that come later, so the struct does not change under them. */
    void *grad_fn;      /* autograd: the backward node that produced this tensor */
    tide_tensor *grad;  /* autograd: the accumulated gradient of a leaf */
    void *trace_node;   /* jit: the graph node this tensor stands for while tracing */
};

/* autograd/: drops a tensor's reference to its backward node (tide_release calls it). */
void td_grad_fn_release(void *grad_fn);

/* A contiguous tensor with fresh storage on dev. NULL with the error set (op names the caller). */
tide_tensor *td_tensor_new(const char *op, tide_device *dev, int ndim, const int64_t *shape,
                           tide_dtype dtype);
/* A new tensor viewing base's storage with the given layout. */
tide_tensor *td_tensor_view(const tide_tensor *base, int ndim, const int64_t *shape,
                            const int64_t *strides, int64_t offset);
/* Entries [i0, i1) of t's first dim, as a view of it (NULL when out of memory). */
tide_tensor *td_tensor_narrow0(const tide_tensor *t, int64_t i0, int64_t i1);
/* Host address of the element at the tensor's offset (CPU tensors), else NULL. */
void *td_tensor_data(const tide_tensor *t);
tide_storage *td_storage_new(tide_device *dev, size_t nbytes);
void td_storage_release(tide_storage *s);

static inline void td_ref_inc(int *rc) { __atomic_add_fetch(rc, 1, __ATOMIC_RELAXED); }
static inline int td_ref_dec(int *rc) { return __atomic_sub_fetch(rc, 1, __ATOMIC_ACQ_REL); }

/* ---- dtypes ------------------------------------------------------------------------------- */

static inline bool td_dtype_valid(int dtype) { return dtype >= 0 && dtype < TIDE_NUM_DTYPES; }
extern const size_t td_dtype_sizes[TIDE_NUM_DTYPES];
/* float16 and bfloat16: stored in 2 bytes, computed in float32 (ops/dispatch.c widens them). */
static inline bool td_dtype_is_half(int dtype)
{
    return dtype == TIDE_FLOAT16 || dtype == TIDE_BFLOAT16;
}
/* The result dtype of the operands under PyTorch's rules (wrapped numbers and 0-dim tensors
 * count only when their category is higher). */
tide_dtype td_result_type(tide_tensor *const *ts, int n);

/* ---- shapes ------------------------------------------------------------------------------- */

int64_t td_numel(int ndim, const int64_t *shape);
void td_contiguous_strides(int ndim, const int64_t *shape, int64_t *strides);
/* The elements a layout spans from its offset: one past its last element (0 when empty). Its
 * caller keeps shapes and strides non-negative and small enough not to overflow. */
int64_t td_layout_span(int ndim, const int64_t *shape, const int64_t *strides);
/* Row-major with no gaps, whatever the strides of size-1 dims (td_is_contiguous: a tensor's). */
bool td_dense_layout(int ndim, const int64_t *shape, const int64_t *strides);
bool td_is_contiguous(const tide_tensor *t);
/* Broadcast shapes a and b into out (ndim in *nout). -1 with no error set when they don't. */
int td_broadcast_shape(int na, const int64_t *a, int nb, const int64_t *b, int *nout,
                       int64_t *out);
/* Strides that read t as if expanded to shape (ndim >= t's ndim): 0 on broadcast dims. */
void td_broadcast_strides(const tide_tensor *t, int ndim, const int64_t *shape, int64_t *strides);
/* dim in [-ndim, ndim) made non-negative, or -1 with an error naming op. */
int td_normalize_dim(const char *op, int dim, int ndim);
/* Writes "[2, 3]" into buf. Returns buf. */
char *td_shape_str(char *buf, size_t size, int ndim, const int64_t *shape);
/* Checks ndim and sizes a user gave (0 <= ndim <= 8, sizes >= 0, total bytes fit). */
int td_check_shape(const char *op, int ndim, const int64_t *shape, tide_dtype dtype);
/* The same for a view's shape: bounds the element count, not bytes. */
int td_check_view_shape(const char *op, int ndim, const int64_t *shape, tide_dtype dtype);

/* ---- errors ------------------------------------------------------------------------------- */

/* Sets this thread's error message. Always returns -1 so callers can `return td_error(...)`.
 * Its code (tide_last_error_code) is TIDE_ERR_OUT_OF_MEMORY when the message says "out of
 * memory" or "out of device memory" (the wording every failed allocation uses), TIDE_ERR_INTERNAL
 * when it says "internal error", the previous code when the message contains the previous
 * message (a caller adding its name), else TIDE_ERR_INVALID_ARGUMENT. */
int td_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* The same with a code (a TIDE_ERR_*): I/O, unsupported, internal. "out of memory" still wins. */
int td_error_code(int code, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* ---- caching allocator (host memory) ----------------------------------------------------- */

/* 64-byte aligned blocks; freed blocks are kept by size class and reused. */
void *td_cache_alloc(size_t nbytes);
void td_cache_free(void *ptr, size_t nbytes);
void td_cache_empty(void);
/* The most bytes of host memory live tensors may hold (TIDE_MAX_MEMORY, MiB). */
size_t td_memory_cap(void);
void td_cache_stats(size_t *in_use, size_t *cached);

/* ---- allocation wrappers and failure injection (fault.c) ---------------------------------- */

/* Every allocation tide makes goes through these (host tensor memory through td_cache_alloc),
 * so that a test can make any one of them fail. The contracts of malloc, calloc, realloc and
 * strdup; the memory is given back with free. */
void *td_malloc(size_t n);
void *td_calloc(size_t n, size_t size);
void *td_realloc(void *p, size_t n);
char *td_strdup(const char *s);
/* Counts one allocation and says whether the hook fails it. Called by the wrappers, and by
 * tide just before a library call that allocates for it (libtcc, zlib, a Vulkan driver): when
 * true the caller acts as if that call had failed. */
bool td_alloc_fails(void);
/* Test-only (tests/test_alloc_faults.c): the nth allocation counted from now fails (n >= 1),
 * and with persistent every one after it too; n = 0 turns the hook off. TIDE_FAULT_ALLOC=N
 * (or N+, persistent) sets it when the process starts. */
void td_fault_alloc_set(long n, bool persistent);
/* Test-only: allocations counted since td_fault_alloc_set (none while it is off), and how
 * many of them failed. */
long td_fault_alloc_count(void);
long td_fault_alloc_failed(void);

/* ---- release hooks (runtime.c) ------------------------------------------------------------ */

/* Called by tide_empty_cache (shutting_down false: release what no live object uses, e.g.
 * compiled code no tide_graph holds) and tide_shutdown (true: release everything; no tensor or
 * graph of the module is in use). Lets jit/ and the devices free their caches without core
 * calling them. Registering the same hook twice is a no-op. 0, or -1 when the table is full. */
typedef void (*td_release_hook)(bool shutting_down);
int td_on_release(td_release_hook fn);

/* ---- thread pool -------------------------------------------------------------------------- */

typedef void (*td_range_fn)(void *ctx, int64_t begin, int64_t end);
/* Runs fn over [0, n) in chunks of at least grain on the pool's threads; inline when n < 2*grain,
 * when called from inside a worker, or when another thread is using the pool. */
void td_parallel_for(int64_t n, int64_t grain, td_range_fn fn, void *ctx);
/* Whether this thread is running chunks of a td_parallel_for of n >= 2 * grain items, on the
 * pool or inline because another thread had it (a nested call then runs inline). */
bool td_in_parallel_for(void);
/* Stops and joins the workers (tide_shutdown); the next parallel call starts them again. */
void td_threadpool_shutdown(void);
int td_num_threads(void);

#endif /* TIDE_TENSOR_H */
