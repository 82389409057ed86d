/* rng.c — the global (seed, offset) of the random-number generator, behind a mutex (rng.h). */
#include <pthread.h>

#include "rng.h"

static pthread_mutex_t rng_lock = PTHREAD_MUTEX_INITIALIZER;
static uint64_t rng_seed = TD_RNG_DEFAULT_SEED;
static uint64_t rng_offset;

/* Offsets wrap modulo 2^64 like the counter they index; 2^64 elements are never drawn. */
static uint64_t round_up4(uint64_t v) { return (v + 3) & ~(uint64_t)3; }

void td_rng_seed(uint64_t seed)
{
    pthread_mutex_lock(&rng_lock);
    rng_seed = seed;
    rng_offset = 0;
    pthread_mutex_unlock(&rng_lock);
}

void td_rng_get_state(uint64_t *seed, uint64_t *offset)
{
    pthread_mutex_lock(&rng_lock);
    *seed = rng_seed;
    *offset = rng_offset;
    pthread_mutex_unlock(&rng_lock);
}

void td_rng_set_state(uint64_t seed, uint64_t offset)
{
    pthread_mutex_lock(&rng_lock);
    rng_seed = seed;
    rng_offset = offset;
    pthread_mutex_unlock(&rng_lock);
}

void td_rng_reserve(uint64_t n, uint64_t *seed, uint64_t *offset)
{
    pthread_mutex_lock(&rng_lock);
    /* A restored offset need not be aligned: start at the next whole block so the pairs of a
     * normal (elements 2k, 2k+1 of a block) never straddle two calls. */
    uint64_t start = round_up4(rng_offset);
    *seed = rng_seed;
    *offset = start;
    rng_offset = start + round_up4(n);
    pthread_mutex_unlock(&rng_lock);
}
