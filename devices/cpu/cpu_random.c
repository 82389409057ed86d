/* cpu_random.c — placeholder until this file is written. */
#include "cpu_kernels.h"

int td_cpu_random(tide_tensor *out, int distribution, uint64_t seed, uint64_t offset, double a, double b)
{
    (void)out;
    (void)distribution;
    (void)seed;
    (void)offset;
    (void)a;
    (void)b;
    return td_error("cpu: random is not implemented yet");
}
