/*
 * fault.c — the allocation wrappers every part of tide allocates through (td_malloc and its
 * siblings, and td_cache_alloc), and the hook that makes the Nth allocation fail.
 *
 * The hook is how the tests reach the error paths, the way SQLite tests its own: run some work
 * with allocation N failing, for N = 1, 2, 3, ... until it succeeds; every run must either
 * succeed with the same values or fail with a message, and leak nothing
 * (tests/test_alloc_faults.c). Allocations that libraries make for tide (libtcc, zlib, a
 * Vulkan driver) cannot be failed from here, so the call that makes them asks td_alloc_fails
 * first and acts as if the library had failed.
 *
 * Off (the default), the hook costs one relaxed load per allocation; nothing is counted.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "tensor.h"

/* The count at which allocations start failing (0: never; -1: TIDE_FAULT_ALLOC not read yet),
 * whether every later one fails too, the allocations counted since the hook was set, and how
 * many of them it failed. All atomic: workers of the thread pool allocate while the hook is
 * set. */
static long fault_at = -1, fault_count, fault_failed;
static bool fault_persistent;
static pthread_once_t fault_once = PTHREAD_ONCE_INIT;

/* TIDE_FAULT_ALLOC=N fails the process's Nth allocation, N+ that one and every later one: a
 * way to reach error paths from any program (a Lua script) without recompiling it. */
static void fault_init(void)
{
    const char *s = getenv("TIDE_FAULT_ALLOC");
    char *end = NULL;
    long n = s ? strtol(s, &end, 10) : 0;
    if (n <= 0 || (*end && strcmp(end, "+") != 0)) {
        __atomic_store_n(&fault_at, 0, __ATOMIC_RELEASE);
        return;
    }
    __atomic_store_n(&fault_persistent, *end == '+', __ATOMIC_RELAXED);
    __atomic_store_n(&fault_at, n, __ATOMIC_RELEASE);
}

bool td_alloc_fails(void)
{
    long at = __atomic_load_n(&fault_at, __ATOMIC_ACQUIRE);
    if (at < 0) { /* the first allocation reads the environment */
        pthread_once(&fault_once, fault_init);
        at = __atomic_load_n(&fault_at, __ATOMIC_ACQUIRE);
    }
    if (!at)
        return false;
    long k = __atomic_add_fetch(&fault_count, 1, __ATOMIC_RELAXED);
    bool fail = k == at || (k > at && __atomic_load_n(&fault_persistent, __ATOMIC_RELAXED));
    if (fail)
        __atomic_add_fetch(&fault_failed, 1, __ATOMIC_RELAXED);
    return fail;
}

void td_fault_alloc_set(long n, bool persistent)
{
    pthread_once(&fault_once, fault_init); /* so the environment cannot override this later */
    __atomic_store_n(&fault_at, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&fault_count, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&fault_failed, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&fault_persistent, persistent, __ATOMIC_RELAXED);
    __atomic_store_n(&fault_at, n > 0 ? n : 0, __ATOMIC_RELEASE);
}

long td_fault_alloc_count(void) { return __atomic_load_n(&fault_count, __ATOMIC_RELAXED); }

long td_fault_alloc_failed(void) { return __atomic_load_n(&fault_failed, __ATOMIC_RELAXED); }

void *td_malloc(size_t n) { return td_alloc_fails() ? NULL : malloc(n); }

void *td_calloc(size_t n, size_t size) { return td_alloc_fails() ? NULL : calloc(n, size); }

/* A failed realloc leaves p as it was, as realloc does. */
void *td_realloc(void *p, size_t n) { return td_alloc_fails() ? NULL : realloc(p, n); }

char *td_strdup(const char *s) { return td_alloc_fails() ? NULL : strdup(s); }
