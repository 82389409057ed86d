/*
 * threadpool.c — td_parallel_for on a fixed set of worker threads.
 *
 * One job at a time: the caller publishes the job, wakes the workers it needs and runs chunks
 * itself; each chunk goes to whoever claims it first (an atomic counter). Workers spin briefly
 * before sleeping, so back-to-back kernels do not pay a futex wake each. A call made while the
 * pool is busy (another application thread) or from inside a worker runs inline: correct, and
 * never a deadlock. Thread count: tide_set_num_threads, else TIDE_NUM_THREADS, else the CPUs
 * this process may run on.
 */
#define _GNU_SOURCE
#include <pthread.h>
#include <sched.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

#include "tensor.h"

#if defined(__x86_64__) || defined(__i386__)
#define cpu_relax() __builtin_ia32_pause()
#else
#define cpu_relax() ((void)0)
#endif

typedef struct job {
    td_range_fn fn;
    void *ctx;
    int64_t n, chunk;
    int nchunks;
    int next_chunk; /* atomic */
    int finished;   /* atomic: participating workers done with this job */
} job;

static struct {
    pthread_mutex_t busy; /* held by the caller running a job */
    pthread_mutex_t sleep_mu;
    pthread_cond_t sleep_cv;
    /* generation in the high 32 bits, number of workers asked to help in the low 32 */
    uint64_t signal; /* atomic */
    job *current;
    int nthreads;     /* caller included; 0 = not decided yet */
    int nworkers;     /* started */
    pthread_t *threads;
    int stop; /* atomic */
    uint64_t start_generation;
} pool = {.busy = PTHREAD_MUTEX_INITIALIZER,
          .sleep_mu = PTHREAD_MUTEX_INITIALIZER,
          .sleep_cv = PTHREAD_COND_INITIALIZER};

/* How long an idle worker spins before it sleeps, in nanoseconds of the monotonic clock (a
 * count of pause instructions is no measure: 2000 pauses, meant as 0.1 ms, took 22 us on a
 * Sapphire Rapids core). Long enough to catch the next parallel op across the Lua and tracing
 * work between ops: the MLP training step at batch 128 on 2 cores ran 8% faster eagerly and 6%
 * under the jit at 100 us than at 22 us (a late worker leaves its chunk to the caller, or
 * wakes in the middle of the op). Short enough to give the core back soon: with another
 * process busy on one of the 2 cores the same step ran 10% slower at 100 us than at 22 us
 * (and slower still than with one thread). */
#ifndef TD_WORKER_SPIN_NS
#define TD_WORKER_SPIN_NS 100000
#endif
/* The caller waiting for its helpers yields the core after this many spins: a helper that was
 * descheduled needs the core to finish. */
#define CALLER_SPINS 1000

static int64_t now_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static pthread_mutex_t config_lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local int in_pool_work;

static void run_chunks(job *j)
{
    int c;
    while ((c = __atomic_fetch_add(&j->next_chunk, 1, __ATOMIC_RELAXED)) < j->nchunks) {
        int64_t begin = (int64_t)c * j->chunk;
        int64_t end = begin + j->chunk < j->n ? begin + j->chunk : j->n;
        j->fn(j->ctx, begin, end);
    }
}

static void *worker_main(void *arg)
{
    int id = (int)(intptr_t)arg;
    in_pool_work = 1;
    /* The generation when this worker was made, not now: a job published before the thread got
     * here must still be seen as new. */
    uint64_t seen = pool.start_generation;
    for (;;) {
        uint64_t sig;
        int spins = 0;
        int64_t spin_until = 0;
        while (((sig = __atomic_load_n(&pool.signal, __ATOMIC_ACQUIRE)) >> 32) == seen &&
               !__atomic_load_n(&pool.stop, __ATOMIC_ACQUIRE)) {
            cpu_relax();
            if (++spins % 32) /* the clock every 32 pauses: under 1 us */
                continue;
            int64_t now = now_ns();
            if (!spin_until)
                spin_until = now + TD_WORKER_SPIN_NS;
            if (now < spin_until)
                continue;
            pthread_mutex_lock(&pool.sleep_mu);
            while ((__atomic_load_n(&pool.signal, __ATOMIC_ACQUIRE) >> 32) == seen &&
                   !__atomic_load_n(&pool.stop, __ATOMIC_ACQUIRE))
                pthread_cond_wait(&pool.sleep_cv, &pool.sleep_mu);
            pthread_mutex_unlock(&pool.sleep_mu);
        }
        if (__atomic_load_n(&pool.stop, __ATOMIC_ACQUIRE))
            return NULL;
        seen = sig >> 32;
        if (id < (int)(sig & 0xffffffffu)) {
            job *j = pool.current;
            run_chunks(j);
            __atomic_add_fetch(&j->finished, 1, __ATOMIC_RELEASE);
        }
    }
}

static int default_threads(void)
{
    const char *s = getenv("TIDE_NUM_THREADS");
    if (s && atoi(s) > 0)
        return atoi(s);
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0 && CPU_COUNT(&set) > 0)
        return CPU_COUNT(&set);
    long n = sysconf(_SC_NPROCESSORS_ONLN);
    return n > 0 ? (int)n : 1;
}

static void stop_workers(void)
{
    __atomic_store_n(&pool.stop, 1, __ATOMIC_RELEASE);
    pthread_mutex_lock(&pool.sleep_mu);
    pthread_cond_broadcast(&pool.sleep_cv);
    pthread_mutex_unlock(&pool.sleep_mu);
    for (int i = 0; i < pool.nworkers; i++)
        pthread_join(pool.threads[i], NULL);
    free(pool.threads);
    pool.threads = NULL;
    pool.nworkers = 0;
    __atomic_store_n(&pool.stop, 0, __ATOMIC_RELEASE);
}

/* Called with pool.busy held. Starts the workers when none run yet. */
static void ensure_workers(void)
{
    int want = td_num_threads() - 1;
    if (pool.nworkers == want || !want)
        return;
    if (pool.nworkers)
        stop_workers();
    pool.start_generation = __atomic_load_n(&pool.signal, __ATOMIC_RELAXED) >> 32;
    pool.threads = td_calloc((size_t)want, sizeof(pthread_t));
    if (!pool.threads)
        return;
    for (int i = 0; i < want; i++) {
        if (pthread_create(&pool.threads[i], NULL, worker_main, (void *)(intptr_t)i) != 0)
            break;
        pool.nworkers++;
    }
}

static void static_init_threads(void)
{
    pthread_mutex_lock(&config_lock);
    if (__atomic_load_n(&pool.nthreads, __ATOMIC_RELAXED) == 0)
        __atomic_store_n(&pool.nthreads, default_threads(), __ATOMIC_RELAXED);
    pthread_mutex_unlock(&config_lock);
}

int td_num_threads(void)
{
    if (__atomic_load_n(&pool.nthreads, __ATOMIC_RELAXED) == 0)
        static_init_threads();
    return __atomic_load_n(&pool.nthreads, __ATOMIC_RELAXED);
}

bool td_in_parallel_for(void) { return in_pool_work != 0; }

void td_parallel_for(int64_t n, int64_t grain, td_range_fn fn, void *ctx)
{
    if (n <= 0)
        return;
    if (grain < 1)
        grain = 1;
    int threads = td_num_threads();
    if (threads <= 1 || n < 2 * grain || in_pool_work) {
        fn(ctx, 0, n);
        return;
    }
    if (pthread_mutex_trylock(&pool.busy) != 0) {
        /* Another thread has the pool: the chunks run here, one after another, but as chunks
         * (nested work sees td_in_parallel_for), so what they compute does not depend on it. */
        in_pool_work = 1;
        fn(ctx, 0, n);
        in_pool_work = 0;
        return;
    }
    ensure_workers();
    int64_t max_chunks = n / grain;
    int nchunks = (int)(max_chunks < threads ? max_chunks : threads);
    if (nchunks > pool.nworkers + 1)
        nchunks = pool.nworkers + 1;
    /* Equal chunks of ceil(n / nchunks) can need fewer than nchunks to cover n (n = 10 in 8
     * chunks is 5 chunks of 2): count them again, so no chunk starts past n. */
    int64_t chunk = (n + nchunks - 1) / nchunks;
    nchunks = (int)((n + chunk - 1) / chunk);
    if (nchunks < 2) {
        pthread_mutex_unlock(&pool.busy);
        fn(ctx, 0, n);
        return;
    }
    job j = {fn, ctx, n, chunk, nchunks, 0, 0};
    int helpers = nchunks - 1;
    pool.current = &j;
    uint64_t gen = (__atomic_load_n(&pool.signal, __ATOMIC_RELAXED) >> 32) + 1;
    __atomic_store_n(&pool.signal, (gen << 32) | (uint64_t)helpers, __ATOMIC_RELEASE);
    pthread_mutex_lock(&pool.sleep_mu);
    pthread_cond_broadcast(&pool.sleep_cv);
    pthread_mutex_unlock(&pool.sleep_mu);

    in_pool_work = 1;
    run_chunks(&j);
    in_pool_work = 0;
    /* j lives on this stack: wait until every helper asked has finished with it. */
    for (int spins = 0; __atomic_load_n(&j.finished, __ATOMIC_ACQUIRE) < helpers; spins++) {
        if (spins < CALLER_SPINS)
            cpu_relax();
        else
            sched_yield();
    }
    pthread_mutex_unlock(&pool.busy);
}

void tide_set_num_threads(int n)
{
    if (n < 1)
        n = default_threads();
    pthread_mutex_lock(&pool.busy);
    /* atomic: td_num_threads reads it without the lock, from any thread */
    __atomic_store_n(&pool.nthreads, n, __ATOMIC_RELAXED);
    if (pool.nworkers && pool.nworkers != n - 1)
        stop_workers();
    pthread_mutex_unlock(&pool.busy);
}

int tide_get_num_threads(void) { return td_num_threads(); }

void td_threadpool_shutdown(void)
{
    pthread_mutex_lock(&pool.busy);
    if (pool.nworkers)
        stop_workers();
    pthread_mutex_unlock(&pool.busy);
}
