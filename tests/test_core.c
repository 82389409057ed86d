/* test_core.c — core/ internals: caching allocator, thread pool, promotion, shape helpers, and
 * the dispatcher's hooks (that every op really goes through them). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/tensor.h"
#include "ops/dispatch.h"
#include "test_util.h"

static void test_allocator(void)
{
    tide_empty_cache();
    size_t in_use0, cached0;
    tide_memory_stats(&in_use0, &cached0);
    CHECK(cached0 == 0, "cache not empty after tide_empty_cache: %zu", cached0);
    size_t sizes[] = {0, 1, 63, 64, 65, 512, 513, 4096, 1 << 20, (1 << 20) + 1, 50000000};
    for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
        void *p = td_cache_alloc(sizes[i]);
        CHECK(p != NULL, "alloc of %zu failed", sizes[i]);
        CHECK(((uintptr_t)p & 63) == 0, "block of %zu not 64-byte aligned", sizes[i]);
        if (sizes[i])
            memset(p, 0xab, sizes[i]); /* ASan/valgrind catch a block smaller than asked */
        td_cache_free(p, sizes[i]);
        /* The same size class comes back from the cache: the same block. */
        void *q = td_cache_alloc(sizes[i]);
        CHECK(q == p, "size %zu: freed block not reused", sizes[i]);
        td_cache_free(q, sizes[i]);
    }
    size_t in_use, cached;
    tide_memory_stats(&in_use, &cached);
    CHECK(in_use == in_use0, "in_use %zu after freeing all, expected %zu", in_use, in_use0);
    CHECK(cached > 50000000, "cached %zu bytes, expected the 50 MB block kept", cached);
    /* Sizes within one class share blocks; 25% slack at most. */
    void *a = td_cache_alloc(1000);
    td_cache_free(a, 1000);
    void *b = td_cache_alloc(1024);
    CHECK(a == b, "1000 and 1024 bytes should share a class");
    td_cache_free(b, 1024);
    tide_empty_cache();
    tide_memory_stats(NULL, &cached);
    CHECK(cached == 0, "cached %zu after empty", cached);
    /* A tensor's memory goes back to the cache on release, and is reused. */
    int64_t shape[1] = {100000};
    tide_tensor *t = tide_zeros(1, shape, TIDE_FLOAT32);
    const void *data = tide_data_ptr(t);
    tide_release(t);
    t = tide_ones(1, shape, TIDE_FLOAT32);
    CHECK(tide_data_ptr(t) == data, "a released tensor's block was not reused");
    tide_release(t);
    CHECK(td_cache_alloc((size_t)1 << 63) == NULL, "absurd allocation did not fail");
}

/* Huge pages, where the kernel gives them on request (transparent huge pages "always" or
 * "madvise"): a 16 MiB block, once touched, sits at least partly in huge pages (smaps'
 * AnonHugePages for the mapping that holds it). Skipped where the kernel gives none, with
 * TIDE_HUGE_PAGES=0, and in ASan builds (whose blocks all stay in ASan's allocator). */
static void test_huge_pages(void)
{
#ifdef __SANITIZE_ADDRESS__
    return;
#endif
    const char *env = getenv("TIDE_HUGE_PAGES");
    if (env && strcmp(env, "0") == 0)
        return;
    FILE *f = fopen("/sys/kernel/mm/transparent_hugepage/enabled", "r");
    char mode[128] = "";
    if (f) {
        if (!fgets(mode, sizeof mode, f))
            mode[0] = 0;
        fclose(f);
    }
    if (!strstr(mode, "[always]") && !strstr(mode, "[madvise]"))
        return;
    size_t bytes = (size_t)16 << 20;
    char *p = td_cache_alloc(bytes);
    CHECK(p != NULL, "16 MiB block");
    if (!p)
        return;
    memset(p, 1, bytes);
    f = fopen("/proc/self/smaps", "r");
    CHECK(f != NULL, "/proc/self/smaps");
    long huge_kb = -1;
    char line[512];
    bool inside = false;
    while (f && fgets(line, sizeof line, f)) {
        unsigned long lo, hi;
        if (sscanf(line, "%lx-%lx ", &lo, &hi) == 2 && strchr(line, '-') < strchr(line, ' '))
            inside = (uintptr_t)p >= lo && (uintptr_t)p < hi;
        else if (inside && sscanf(line, "AnonHugePages: %ld kB", &huge_kb) == 1)
            break;
    }
    if (f)
        fclose(f);
    CHECK(huge_kb >= 2048, "16 MiB block: %ld kB in huge pages (transparent huge pages: %s)",
          huge_kb, mode);
    td_cache_free(p, bytes);
}

typedef struct {
    int *hits;
    int64_t n;
    int bad_ranges; /* chunks handed out empty, inverted or past n */
} cover_ctx;

static void cover(void *p, int64_t begin, int64_t end)
{
    cover_ctx *c = p;
    if (begin < 0 || begin >= end || end > c->n)
        __atomic_add_fetch(&c->bad_ranges, 1, __ATOMIC_RELAXED);
    for (int64_t i = begin; i < end; i++)
        __atomic_add_fetch(&c->hits[i], 1, __ATOMIC_RELAXED);
}

/* Every small n under every thread count up to 17 (machines with 16 cores ran chunks that began
 * past n when ceil(n / threads) chunks overshot: n = 10 on 8 threads). */
static void test_thread_pool_chunks(void)
{
    int before = tide_get_num_threads(), bad = 0, worst_n = 0, worst_t = 0;
    for (int threads = 2; threads <= 17; threads++) {
        tide_set_num_threads(threads);
        for (int64_t n = 1; n <= 64; n++) {
            int hits[64] = {0};
            cover_ctx c = {hits, n, 0};
            td_parallel_for(n, 1, cover, &c);
            int wrong = c.bad_ranges;
            for (int64_t i = 0; i < n; i++)
                wrong += hits[i] != 1;
            if (wrong) {
                bad++;
                worst_n = (int)n;
                worst_t = threads;
            }
        }
    }
    CHECK(bad == 0, "parallel_for: %d (n, threads) pairs with bad chunks, e.g. n=%d threads=%d",
          bad, worst_n, worst_t);
    tide_set_num_threads(before);
}

static void nested(void *p, int64_t begin, int64_t end)
{
    cover_ctx *c = p;
    for (int64_t i = begin; i < end; i++) {
        cover_ctx inner = {c->hits + i * 10, 10, 0};
        td_parallel_for(10, 1, cover, &inner); /* runs inline inside a worker */
    }
}

static void *pool_user(void *arg)
{
    (void)arg;
    int *hits = calloc(5000, sizeof(int));
    cover_ctx c = {hits, 5000, 0};
    int ok = 1;
    for (int rep = 0; rep < 50; rep++)
        td_parallel_for(5000, 100, cover, &c);
    for (int i = 0; i < 5000; i++)
        ok &= hits[i] == 50;
    free(hits);
    return ok ? (void *)1 : NULL;
}

static void test_thread_pool(void)
{
    CHECK(tide_get_num_threads() >= 1, "threads %d", tide_get_num_threads());
    int64_t sizes[] = {1, 7, 100, 1000, 100003};
    for (size_t s = 0; s < sizeof sizes / sizeof sizes[0]; s++) {
        int64_t n = sizes[s];
        int *hits = calloc((size_t)n, sizeof(int));
        cover_ctx c = {hits, n, 0};
        td_parallel_for(n, 16, cover, &c);
        int bad = 0;
        for (int64_t i = 0; i < n; i++)
            bad += hits[i] != 1;
        CHECK(bad == 0, "n=%lld: %d elements not visited exactly once", (long long)n, bad);
        free(hits);
    }
    int *hits = calloc(1000, sizeof(int));
    cover_ctx c = {hits, 100, 0};
    td_parallel_for(100, 1, nested, &c);
    int bad = 0;
    for (int i = 0; i < 1000; i++)
        bad += hits[i] != 1;
    CHECK(bad == 0, "nested parallel_for: %d elements wrong", bad);
    free(hits);
    /* Several application threads at once: each call completes, inline or pooled. */
    pthread_t th[4];
    for (int i = 0; i < 4; i++)
        pthread_create(&th[i], NULL, pool_user, NULL);
    for (int i = 0; i < 4; i++) {
        void *r;
        pthread_join(th[i], &r);
        CHECK(r != NULL, "thread %d saw wrong coverage", i);
    }
    /* Changing the thread count restarts the pool. */
    int before = tide_get_num_threads();
    tide_set_num_threads(3);
    CHECK(tide_get_num_threads() == 3, "set_num_threads(3) gave %d", tide_get_num_threads());
    void *r = pool_user(NULL);
    CHECK(r != NULL, "coverage wrong with 3 threads");
    tide_set_num_threads(before);
}

static tide_tensor *tensor_of(tide_dtype dt, int ndim, uint8_t flags)
{
    int64_t shape[2] = {2, 2};
    tide_tensor *t = tide_zeros(ndim, shape, dt);
    t->flags |= flags;
    return t;
}

static void test_promotion(void)
{
    /* The pairwise table against PyTorch's. */
    static const tide_dtype expect[6][6] = {
        /* f32 */ {TIDE_FLOAT32, TIDE_FLOAT64, TIDE_FLOAT32, TIDE_FLOAT32, TIDE_FLOAT32, TIDE_FLOAT32},
        /* f64 */ {TIDE_FLOAT64, TIDE_FLOAT64, TIDE_FLOAT64, TIDE_FLOAT64, TIDE_FLOAT64, TIDE_FLOAT64},
        /* i32 */ {TIDE_FLOAT32, TIDE_FLOAT64, TIDE_INT32, TIDE_INT64, TIDE_INT32, TIDE_INT32},
        /* i64 */ {TIDE_FLOAT32, TIDE_FLOAT64, TIDE_INT64, TIDE_INT64, TIDE_INT64, TIDE_INT64},
        /* u8  */ {TIDE_FLOAT32, TIDE_FLOAT64, TIDE_INT32, TIDE_INT64, TIDE_UINT8, TIDE_UINT8},
        /* b   */ {TIDE_FLOAT32, TIDE_FLOAT64, TIDE_INT32, TIDE_INT64, TIDE_UINT8, TIDE_BOOL},
    };
    for (int a = 0; a < 6; a++)
        for (int b = 0; b < 6; b++)
            CHECK(tide_promote_types(a, b) == expect[a][b], "promote(%s, %s) = %s",
                  tide_dtype_name(a), tide_dtype_name(b),
                  tide_dtype_name(tide_promote_types(a, b)));
    struct {
        tide_dtype a;
        int andim;
        uint8_t aflags;
        tide_dtype b;
        int bndim;
        uint8_t bflags;
        tide_dtype want;
    } cases[] = {
        {TIDE_INT32, 2, 0, TIDE_FLOAT64, 0, TD_WRAPPED_NUMBER, TIDE_FLOAT32},
        {TIDE_INT32, 2, 0, TIDE_INT64, 0, TD_WRAPPED_NUMBER, TIDE_INT32},
        {TIDE_UINT8, 2, 0, TIDE_INT64, 0, 0, TIDE_UINT8},
        {TIDE_FLOAT32, 2, 0, TIDE_FLOAT64, 0, 0, TIDE_FLOAT32},
        {TIDE_INT32, 2, 0, TIDE_FLOAT64, 0, 0, TIDE_FLOAT64},
        {TIDE_BOOL, 2, 0, TIDE_INT64, 0, TD_WRAPPED_NUMBER, TIDE_INT64},
        {TIDE_BOOL, 2, 0, TIDE_FLOAT64, 0, TD_WRAPPED_NUMBER, TIDE_FLOAT32},
        {TIDE_INT32, 0, 0, TIDE_FLOAT64, 0, TD_WRAPPED_NUMBER, TIDE_FLOAT32},
        {TIDE_FLOAT64, 0, 0, TIDE_FLOAT64, 0, TD_WRAPPED_NUMBER, TIDE_FLOAT64},
        {TIDE_INT64, 0, TD_WRAPPED_NUMBER, TIDE_FLOAT64, 0, TD_WRAPPED_NUMBER, TIDE_FLOAT32},
        {TIDE_INT64, 0, TD_WRAPPED_NUMBER, TIDE_INT64, 0, TD_WRAPPED_NUMBER, TIDE_INT64},
        {TIDE_FLOAT32, 2, 0, TIDE_INT64, 2, 0, TIDE_FLOAT32},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        tide_tensor *ts[2] = {tensor_of(cases[i].a, cases[i].andim, cases[i].aflags),
                              tensor_of(cases[i].b, cases[i].bndim, cases[i].bflags)};
        tide_dtype got = td_result_type(ts, 2);
        CHECK(got == cases[i].want, "case %zu: result type %s, expected %s", i,
              tide_dtype_name(got), tide_dtype_name(cases[i].want));
        tide_release(ts[0]);
        tide_release(ts[1]);
    }
    CHECK(tide_dtype_from_name("float64") == TIDE_FLOAT64, "from_name float64");
    CHECK(tide_dtype_from_name("long") == TIDE_INT64, "from_name long");
    CHECK(tide_dtype_from_name("complex64") == -1, "from_name of an unknown name");
    CHECK(strcmp(tide_dtype_name((tide_dtype)42), "invalid") == 0, "name of a bad dtype");
}

static void test_shapes(void)
{
    int64_t a[2] = {3, 1}, b[3] = {2, 1, 4}, out[8];
    int n;
    CHECK(td_broadcast_shape(2, a, 3, b, &n, out) == 0 && n == 3 && out[0] == 2 && out[1] == 3 &&
              out[2] == 4,
          "broadcast [3,1] with [2,1,4]");
    int64_t c[1] = {5};
    CHECK(td_broadcast_shape(2, a, 1, c, &n, out) == 0 && out[1] == 5, "broadcast with [5]");
    int64_t d[2] = {3, 2};
    CHECK(td_broadcast_shape(2, d, 1, c, &n, out) < 0, "[3,2] with [5] must not broadcast");
    char s[64];
    CHECK(strcmp(td_shape_str(s, sizeof s, 3, b), "[2, 1, 4]") == 0, "shape string %s", s);
    CHECK(strcmp(td_shape_str(s, sizeof s, 0, b), "[]") == 0, "0-dim shape string %s", s);
    CHECK(td_normalize_dim("x", -1, 3) == 2, "dim -1 of 3");
    CHECK(td_normalize_dim("x", 3, 3) < 0 && strstr(tide_last_error(), "out of range"),
          "dim 3 of 3: %s", tide_last_error());
}

/* A fake tracer and autograd, to see every op pass through the dispatcher's hooks. */
static int traced_ops[TIDE_NUM_OPS], recorded_ops[TIDE_NUM_OPS];

static tide_tensor *fake_trace(void *ctx, tide_op op, const td_meta *meta, tide_tensor *dst,
                               tide_tensor *const *in, int nin, const tide_attrs *attrs,
                               const tide_tensor *out_view)
{
    (void)ctx, (void)in, (void)nin, (void)attrs;
    traced_ops[op]++;
    if (dst)
        return tide_retain(dst);
    if (out_view)
        return tide_retain((tide_tensor *)out_view);
    /* Stands for the result without computing it. */
    return tide_empty(meta->ndim, meta->shape, meta->dtype);
}

static int fake_record(void *ctx, tide_op op, tide_tensor *out, tide_tensor *const *in, int nin,
                       const tide_attrs *attrs)
{
    (void)ctx, (void)out, (void)in, (void)nin, (void)attrs;
    recorded_ops[op]++;
    return 0;
}

static void test_hooks(void)
{
    int64_t shape[2] = {2, 3};
    tide_tensor *x = tide_ones(2, shape, TIDE_FLOAT32);
    tide_tensor *i = tide_ones(2, shape, TIDE_INT32);
    td_hooks *h = td_thread_hooks();
    h->trace = fake_trace;
    tide_tensor *a = tide_add(x, i); /* cast of i, then add */
    tide_tensor *e = tide_exp(a);
    tide_tensor *s = tide_sum(e, NULL, 0, false); /* sum, then a reshape view */
    tide_tensor *t = tide_transpose(x, 0, 1);
    tide_copy_(x, e);
    h->trace = NULL;
    CHECK(traced_ops[TIDE_OP_CAST] == 1, "cast traced %d times", traced_ops[TIDE_OP_CAST]);
    CHECK(traced_ops[TIDE_OP_ADD] == 1, "add traced %d times", traced_ops[TIDE_OP_ADD]);
    CHECK(traced_ops[TIDE_OP_EXP] == 1, "exp traced %d times", traced_ops[TIDE_OP_EXP]);
    CHECK(traced_ops[TIDE_OP_SUM] == 1, "sum traced %d times", traced_ops[TIDE_OP_SUM]);
    CHECK(traced_ops[TIDE_OP_PERMUTE] == 1, "permute traced %d", traced_ops[TIDE_OP_PERMUTE]);
    CHECK(traced_ops[TIDE_OP_COPY] == 1, "copy traced %d", traced_ops[TIDE_OP_COPY]);
    /* While tracing, no kernel ran: x still holds ones. */
    double v;
    tide_tensor *x00 = tide_select(x, 0, 0);
    tide_tensor *x000 = tide_select(x00, 0, 0);
    CHECK(tide_item(x000, &v) == 0 && v == 1.0, "x changed while tracing: %g", v);
    tide_release(x000);
    tide_release(x00);
    tide_release(a), tide_release(e), tide_release(s), tide_release(t);

    /* The autograd hook sees ops whose inputs require grad, and only those. */
    h->record = fake_record;
    x->flags |= TD_REQUIRES_GRAD;
    tide_tensor *m = tide_mul(x, x);
    tide_tensor *plain = tide_mul(i, i);
    tide_tensor *v2 = tide_unsqueeze(x, 0);
    h->record = NULL;
    x->flags &= (uint8_t)~TD_REQUIRES_GRAD;
    CHECK(recorded_ops[TIDE_OP_MUL] == 1, "mul recorded %d times", recorded_ops[TIDE_OP_MUL]);
    CHECK(recorded_ops[TIDE_OP_RESHAPE] == 1, "unsqueeze (reshape) recorded %d times",
          recorded_ops[TIDE_OP_RESHAPE]);
    tide_release(m), tide_release(plain), tide_release(v2);
    tide_release(x), tide_release(i);
}

static void *error_elsewhere(void *arg)
{
    (void)arg;
    return (void *)(intptr_t)(tide_last_error()[0] == '\0');
}

static void test_errors_per_thread(void)
{
    tide_tensor *r = tide_add(NULL, NULL);
    CHECK(r == NULL && strstr(tide_last_error(), "add"), "add(NULL): %s", tide_last_error());
    pthread_t th;
    void *clean;
    pthread_create(&th, NULL, error_elsewhere, NULL);
    pthread_join(th, &clean);
    CHECK(clean != NULL, "another thread saw this thread's error");
    tide_clear_error();
    CHECK(tide_last_error()[0] == '\0', "clear_error left \"%s\"", tide_last_error());
}

int main(void)
{
    test_allocator();
    test_huge_pages();
    test_thread_pool();
    test_thread_pool_chunks();
    test_promotion();
    test_shapes();
    test_hooks();
    test_errors_per_thread();
    return test_summary("test_core");
}
