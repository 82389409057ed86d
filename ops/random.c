/* random.c — placeholder until this file is written: every function reports that it is not
 * implemented yet. */
#include "dispatch.h"

void tide_manual_seed(uint64_t seed)
{
    (void)seed;
    td_error("manual_seed: not implemented yet");
}

void tide_get_rng_state(uint64_t state[2])
{
    (void)state;
    td_error("get_rng_state: not implemented yet");
}

void tide_set_rng_state(const uint64_t state[2])
{
    (void)state;
    td_error("set_rng_state: not implemented yet");
}

tide_tensor *tide_rand(int ndim, const int64_t *shape, tide_dtype dtype)
{
    (void)ndim;
    (void)shape;
    (void)dtype;
    td_error("rand: not implemented yet");
    return NULL;
}

tide_tensor *tide_randn(int ndim, const int64_t *shape, tide_dtype dtype)
{
    (void)ndim;
    (void)shape;
    (void)dtype;
    td_error("randn: not implemented yet");
    return NULL;
}

tide_tensor *tide_randint(int64_t low, int64_t high, int ndim, const int64_t *shape, tide_dtype dtype)
{
    (void)low;
    (void)high;
    (void)ndim;
    (void)shape;
    (void)dtype;
    td_error("randint: not implemented yet");
    return NULL;
}

tide_tensor *tide_bernoulli(const tide_tensor *p)
{
    (void)p;
    td_error("bernoulli: not implemented yet");
    return NULL;
}

tide_tensor *tide_randperm(int64_t n, tide_dtype dtype)
{
    (void)n;
    (void)dtype;
    td_error("randperm: not implemented yet");
    return NULL;
}

int tide_uniform_(tide_tensor *t, double low, double high)
{
    (void)t;
    (void)low;
    (void)high;
    td_error("uniform_: not implemented yet");
    return -1;
}

int tide_normal_(tide_tensor *t, double mean, double std)
{
    (void)t;
    (void)mean;
    (void)std;
    td_error("normal_: not implemented yet");
    return -1;
}
