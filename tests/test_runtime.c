/* test_runtime.c — what an embedder needs around the library's lifetime: the memory cap
 * (TIDE_MAX_MEMORY and tide_set_memory_limit, also with threads allocating at once),
 * tide_empty_cache with release hooks, and tide_shutdown (the library works again after it). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>

#include "core/tensor.h"
#include "test_util.h"

static double sum_of(const tide_tensor *t)
{
    tide_tensor *s = tide_sum(t, NULL, 0, false);
    double v = NAN;
    if (!s || tide_item(s, &v) < 0)
        v = NAN;
    tide_release(s);
    return v;
}

static void test_env_cap(void)
{
    /* main() set TIDE_MAX_MEMORY=64 before any allocation. */
    CHECK(tide_get_memory_limit() == (size_t)64 << 20, "cap %zu", tide_get_memory_limit());
    int64_t big[1] = {(int64_t)20 << 20}; /* 80 MiB of float32 */
    CHECK_ERROR(tide_zeros(1, big, TIDE_FLOAT32), "out of memory", "[20971520]", "cap 64 MiB",
                "TIDE_MAX_MEMORY");
    int64_t ok_shape[1] = {(int64_t)4 << 20}; /* 16 MiB */
    tide_tensor *ok = tide_ones(1, ok_shape, TIDE_FLOAT32);
    CHECK(ok && sum_of(ok) == (double)(4 << 20), "16 MiB under a 64 MiB cap: %s", tide_last_error());
    tide_release(ok);
}

static void test_api_cap(void)
{
    tide_set_memory_limit((size_t)1 << 20);
    CHECK(tide_get_memory_limit() == (size_t)1 << 20, "cap %zu", tide_get_memory_limit());
    int64_t shape[1] = {1 << 18}; /* exactly 1 MiB of float32 fits */
    tide_tensor *a = tide_ones(1, shape, TIDE_FLOAT32);
    CHECK(a != NULL, "1 MiB under a 1 MiB cap: %s", tide_last_error());
    /* A second one does not: the op's error names it, the shape and the cap. */
    CHECK_ERROR(tide_mul_scalar(a, 2.0), "out of memory", "cap 1 MiB", "tide_set_memory_limit");
    tide_release(a);
    tide_tensor *b = tide_ones(1, shape, TIDE_FLOAT32);
    CHECK(b != NULL, "after a release the memory is usable again: %s", tide_last_error());
    /* the cap is full: even the 4-byte result of a sum does not fit, cached block or not */
    CHECK_ERROR(tide_sum(b, NULL, 0, false), "out of memory", "cap 1 MiB");
    tide_set_memory_limit(0);
    CHECK(b && sum_of(b) == (double)(1 << 18), "the values under the cap: %s", tide_last_error());
    tide_release(b);
    CHECK(tide_get_memory_limit() == (size_t)64 << 20, "0 restores TIDE_MAX_MEMORY: %zu",
          tide_get_memory_limit());
}

/* Threads allocating at once never hold more than the cap together. */
#define CAP_THREADS 4
static size_t cap_max_seen;
static pthread_mutex_t cap_mu = PTHREAD_MUTEX_INITIALIZER;

static void *cap_worker(void *arg)
{
    (void)arg;
    tide_tensor *held[64] = {NULL};
    int64_t shape[1] = {64 << 10}; /* 256 KiB */
    for (int round = 0; round < 4; round++) {
        int n = 0;
        while (n < 64 && (held[n] = tide_zeros(1, shape, TIDE_FLOAT32)) != NULL)
            n++;
        size_t in_use;
        tide_memory_stats(&in_use, NULL);
        pthread_mutex_lock(&cap_mu);
        if (in_use > cap_max_seen)
            cap_max_seen = in_use;
        pthread_mutex_unlock(&cap_mu);
        for (int i = 0; i < n; i++) {
            tide_release(held[i]);
            held[i] = NULL;
        }
    }
    return NULL;
}

static void test_cap_threads(void)
{
    tide_empty_cache();
    size_t base;
    tide_memory_stats(&base, NULL);
    size_t cap = base + ((size_t)4 << 20);
    tide_set_memory_limit(cap);
    pthread_t th[CAP_THREADS];
    for (int i = 0; i < CAP_THREADS; i++)
        pthread_create(&th[i], NULL, cap_worker, NULL);
    for (int i = 0; i < CAP_THREADS; i++)
        pthread_join(th[i], NULL);
    CHECK(cap_max_seen <= cap && cap_max_seen > base, "in use %zu with a cap of %zu",
          cap_max_seen, cap);
    tide_set_memory_limit(0);
}

static int hook_calls[2];
static void hook(bool shutting_down) { hook_calls[shutting_down ? 1 : 0]++; }

static void test_empty_cache_and_hooks(void)
{
    CHECK(td_on_release(hook) == 0, "register: %s", tide_last_error());
    CHECK(td_on_release(hook) == 0, "registering again is a no-op");
    int64_t shape[2] = {256, 256};
    tide_tensor *t = tide_ones(2, shape, TIDE_FLOAT32);
    tide_release(t);
    size_t in_use, cached;
    tide_memory_stats(&in_use, &cached);
    CHECK(cached >= 256 * 256 * 4, "a released tensor's block is cached: %zu", cached);
    tide_empty_cache();
    tide_memory_stats(&in_use, &cached);
    CHECK(cached == 0, "tide_empty_cache left %zu bytes cached", cached);
    CHECK(hook_calls[0] == 1 && hook_calls[1] == 0, "hook calls %d %d (once, not shutting down)",
          hook_calls[0], hook_calls[1]);
}

static void test_shutdown(void)
{
    /* Big enough for the thread pool to split it. */
    tide_set_num_threads(4);
    int64_t shape[1] = {1 << 20};
    tide_tensor *x = tide_arange(0, 1 << 20, 1, TIDE_FLOAT64);
    double expect = (double)(1 << 20) * ((1 << 20) - 1) / 2;
    CHECK(x && sum_of(x) == expect, "before shutdown: %.17g", sum_of(x));
    tide_shutdown();
    CHECK(hook_calls[1] == 1, "shutdown calls the hooks with true: %d", hook_calls[1]);
    size_t in_use, cached;
    tide_memory_stats(&in_use, &cached);
    CHECK(cached == 0, "shutdown left %zu bytes cached", cached);
    /* Live tensors stay valid, and the library starts again on the next call. */
    CHECK(sum_of(x) == expect, "after shutdown: %.17g", sum_of(x));
    tide_tensor *y = tide_full(1, shape, 0.5, TIDE_FLOAT32);
    CHECK(y && sum_of(y) == (double)(1 << 19), "a new op after shutdown: %s", tide_last_error());
    tide_release(y);
    tide_release(x);
    tide_shutdown();
    tide_shutdown(); /* twice is fine */
    tide_memory_stats(&in_use, &cached);
    CHECK(in_use == 0 && cached == 0, "after releasing everything: %zu in use, %zu cached", in_use,
          cached);
}

int main(void)
{
    setenv("TIDE_MAX_MEMORY", "64", 1);
    test_env_cap();
    test_api_cap();
    test_cap_threads();
    test_empty_cache_and_hooks();
    test_shutdown();
    return test_summary("test_runtime");
}
