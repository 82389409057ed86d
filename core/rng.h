/*
 * rng.h — the global random-number state (DESIGN.md: core owns the RNG): a seed and an offset,
 * the position in the Philox stream (core/philox.h) of the next unused element. Ops reserve a
 * run of elements under a lock and hand (seed, offset) to the RANDOM primitive, so two calls —
 * from any threads — never share counters, and saving the pair is saving the generator.
 */
#ifndef TIDE_RNG_H
#define TIDE_RNG_H

#include <stdint.h>

/* PyTorch's default seed: a program that never seeds still repeats itself run after run. */
#define TD_RNG_DEFAULT_SEED 67280421310721ull

void td_rng_seed(uint64_t seed); /* offset back to 0 */
void td_rng_get_state(uint64_t *seed, uint64_t *offset);
void td_rng_set_state(uint64_t seed, uint64_t offset);
/* Reserves n elements: *seed and *offset (a multiple of 4, so whole Philox blocks) for them;
 * the state's offset moves past them, rounded up to a multiple of 4. */
void td_rng_reserve(uint64_t n, uint64_t *seed, uint64_t *offset);

#endif /* TIDE_RNG_H */
