/* cpu_matmul.c — placeholder until this file is written. */
#include "cpu_kernels.h"

int td_cpu_matmul(tide_tensor *out, const tide_tensor *a, const tide_tensor *b)
{
    (void)out;
    (void)a;
    (void)b;
    return td_error("cpu: matmul is not implemented yet");
}
