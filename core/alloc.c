/*
 * alloc.c — the caching allocator for host memory.
 *
 * An eager loop allocates the same large temporaries over and over. Going to the system each
 * time costs an mmap and a page fault per 4 KiB page (glibc returns big blocks to the kernel
 * on free), which is what makes some frameworks 5-10x slower here. So freed blocks are kept in
 * per-size-class free lists and handed out again. Size classes: multiples of 64 bytes up to
 * 512, then four classes per power of two (at most 25% slack). Blocks are 64-byte aligned;
 * large ones are mapped with huge pages (system_alloc).
 * Cached bytes are capped (TIDE_CACHE_LIMIT_MB, default 4096); beyond the cap a freed block goes
 * back to the system. A free block holds the free-list link in its first bytes.
 *
 * Live bytes are capped too (tide_set_memory_limit, else TIDE_MAX_MEMORY in MiB, else the
 * machine's physical memory):
 * past the cap an allocation fails with an error instead of the kernel killing the process
 * when an overcommitted block is first touched.
 */
#include <pthread.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <unistd.h>

#include "tensor.h"

#define HUGE_BLOCK ((size_t)4 << 20)
#define SMALL_CLASSES 8 /* 64, 128, ..., 512 */
#define NUM_CLASSES (SMALL_CLASSES + 4 * 56)

typedef struct free_block {
    struct free_block *next;
} free_block;

static pthread_mutex_t cache_lock = PTHREAD_MUTEX_INITIALIZER;
static free_block *free_lists[NUM_CLASSES];
static size_t bytes_cached, bytes_in_use, cache_limit;
static size_t bytes_peak; /* the most bytes_in_use reached since the last reset */

/* The class of nbytes and the size every block of that class has. */
static int size_class(size_t nbytes, size_t *rounded)
{
    if (nbytes <= 512) {
        size_t n = nbytes ? (nbytes + 63) / 64 : 1;
        *rounded = n * 64;
        return (int)n - 1;
    }
    int k = 63 - __builtin_clzll((unsigned long long)(nbytes - 1)); /* 2^k < nbytes <= 2^(k+1) */
    size_t step = (size_t)1 << (k - 2);
    size_t q = (nbytes + step - 1) / step; /* 5..8 */
    *rounded = q * step;
    return SMALL_CLASSES + (k - 9) * 4 + (int)(q - 5);
}

static size_t memory_cap;         /* atomic: the cap in force */
static size_t default_memory_cap; /* TIDE_MAX_MEMORY, else physical memory */
static pthread_once_t memory_cap_once = PTHREAD_ONCE_INIT;

static void memory_cap_init(void)
{
    const char *s = getenv("TIDE_MAX_MEMORY");
    long long mb = s ? atoll(s) : 0;
    if (mb > 0) {
        default_memory_cap = (size_t)mb << 20;
    } else {
        long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGESIZE);
        default_memory_cap =
            pages > 0 && page > 0 ? (size_t)pages * (size_t)page : (size_t)1 << 46;
    }
    __atomic_store_n(&memory_cap, default_memory_cap, __ATOMIC_RELAXED);
}

size_t td_memory_cap(void)
{
    pthread_once(&memory_cap_once, memory_cap_init);
    return __atomic_load_n(&memory_cap, __ATOMIC_RELAXED);
}

/* A cap below what live tensors hold already is allowed: the next allocations fail until
 * enough is released. 0 restores the default. */
void tide_set_memory_limit(size_t bytes)
{
    pthread_once(&memory_cap_once, memory_cap_init);
    __atomic_store_n(&memory_cap, bytes ? bytes : default_memory_cap, __ATOMIC_RELAXED);
}

size_t tide_get_memory_limit(void) { return td_memory_cap(); }

static size_t limit_from_env(void)
{
    const char *s = getenv("TIDE_CACHE_LIMIT_MB");
    long long mb = s ? atoll(s) : 4096;
    return mb < 0 ? 0 : (size_t)mb << 20;
}

/* Blocks of HUGE_BLOCK bytes and more are mapped straight from the kernel and ask it for
 * transparent huge pages (Debian gives them only where asked: "madvise"): a 64 MiB tensor then
 * needs 32 TLB entries instead of 16384, and takes 32 page faults on first touch instead of
 * 16384. Streaming through memory gains 10-17% (the jit's tanh chain on 16M float32: 7.6 ->
 * 6.4 ms, axpb 4.1 -> 3.3 ms, A/B alternating), eager ops as much. TIDE_HUGE_PAGES=0 turns it
 * off (read once). */
#if defined(MADV_HUGEPAGE) && !defined(__SANITIZE_ADDRESS__)
#define MAPPED_BLOCKS 1 /* ASan builds keep every block in ASan's allocator, which checks bounds */
static int huge_pages_wanted(void)
{
    static int wanted = -1; /* benign race: every thread computes the same value */
    int w = __atomic_load_n(&wanted, __ATOMIC_RELAXED);
    if (w < 0) {
        const char *s = getenv("TIDE_HUGE_PAGES");
        w = !(s && s[0] == '0' && s[1] == 0);
        __atomic_store_n(&wanted, w, __ATOMIC_RELAXED);
    }
    return w;
}
#endif

/* Whether blocks of this (rounded) size come from mmap with huge pages. */
static bool mapped_block(size_t bytes)
{
#ifdef MAPPED_BLOCKS
    return bytes >= HUGE_BLOCK && huge_pages_wanted();
#else
    (void)bytes;
    return false;
#endif
}

static void *system_alloc(size_t bytes)
{
#ifdef MAPPED_BLOCKS
    if (mapped_block(bytes)) {
        /* Straight from the kernel: malloc would hand out heap memory that earlier blocks
         * already faulted in as small pages, and huge pages come only at the first fault. */
        void *p = mmap(NULL, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
        if (p == MAP_FAILED)
            return NULL;
        madvise(p, bytes, MADV_HUGEPAGE); /* advice: nothing to do if it is refused */
        return p;
    }
#endif
    return aligned_alloc(64, bytes);
}

static void system_free(void *p, size_t bytes)
{
    if (mapped_block(bytes))
        munmap(p, bytes);
    else
        free(p);
}

/* The size every block of class c has (size_class's inverse). */
static size_t class_bytes(int c)
{
    if (c < SMALL_CLASSES)
        return (size_t)(c + 1) * 64;
    int k = (c - SMALL_CLASSES) / 4 + 9, q = (c - SMALL_CLASSES) % 4 + 5;
    return (size_t)q << (k - 2);
}

void *td_cache_alloc(size_t nbytes)
{
    size_t cap = td_memory_cap();
    if (td_alloc_fails() || nbytes > cap)
        return NULL;
    size_t rounded;
    int c = size_class(nbytes, &rounded);
    /* The cap is checked and the bytes reserved under one lock, for a reused block as for a
     * new one, so that threads allocating at once cannot together pass the cap. */
    pthread_mutex_lock(&cache_lock);
    bool over_cap = bytes_in_use + rounded > cap;
    free_block *b = NULL;
    if (!over_cap) {
        bytes_in_use += rounded;
        if (bytes_in_use > bytes_peak)
            bytes_peak = bytes_in_use;
        b = free_lists[c];
        if (b) {
            free_lists[c] = b->next;
            bytes_cached -= rounded;
        }
    }
    pthread_mutex_unlock(&cache_lock);
    if (over_cap) {
        td_cache_empty();
        return NULL;
    }
    if (b)
        return b;
    void *p = system_alloc(rounded);
    if (!p) {
        /* Memory may be sitting in the cache under other size classes: give it back, retry. */
        td_cache_empty();
        p = system_alloc(rounded);
    }
    if (!p) {
        pthread_mutex_lock(&cache_lock);
        bytes_in_use -= rounded;
        pthread_mutex_unlock(&cache_lock);
    }
    return p;
}

void td_cache_free(void *ptr, size_t nbytes)
{
    if (!ptr)
        return;
    size_t rounded;
    int c = size_class(nbytes, &rounded);
    pthread_mutex_lock(&cache_lock);
    if (!cache_limit)
        cache_limit = limit_from_env();
    bytes_in_use -= rounded;
    bool keep = bytes_cached + rounded <= cache_limit;
    if (keep) {
        free_block *b = ptr;
        b->next = free_lists[c];
        free_lists[c] = b;
        bytes_cached += rounded;
    }
    pthread_mutex_unlock(&cache_lock);
    if (!keep)
        system_free(ptr, rounded);
}

void td_cache_empty(void)
{
    free_block *lists[NUM_CLASSES];
    pthread_mutex_lock(&cache_lock);
    for (int c = 0; c < NUM_CLASSES; c++) {
        lists[c] = free_lists[c];
        free_lists[c] = NULL;
    }
    bytes_cached = 0;
    pthread_mutex_unlock(&cache_lock);
    for (int c = 0; c < NUM_CLASSES; c++) {
        while (lists[c]) {
            free_block *next = lists[c]->next;
            system_free(lists[c], class_bytes(c));
            lists[c] = next;
        }
    }
}

void td_cache_stats(size_t *in_use, size_t *cached)
{
    pthread_mutex_lock(&cache_lock);
    if (in_use)
        *in_use = bytes_in_use;
    if (cached)
        *cached = bytes_cached;
    pthread_mutex_unlock(&cache_lock);
}


void tide_memory_stats(size_t *in_use, size_t *cached) { td_cache_stats(in_use, cached); }

size_t tide_memory_peak(bool reset)
{
    pthread_mutex_lock(&cache_lock);
    size_t peak = bytes_peak;
    if (reset)
        bytes_peak = bytes_in_use;
    pthread_mutex_unlock(&cache_lock);
    return peak;
}
