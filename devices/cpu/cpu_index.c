/* cpu_index.c — placeholder until this file is written. */
#include "cpu_kernels.h"

int td_cpu_gather(tide_tensor *out, const tide_tensor *x, const tide_tensor *index, int dim)
{
    (void)out;
    (void)x;
    (void)index;
    (void)dim;
    return td_error("cpu: gather is not implemented yet");
}

int td_cpu_scatter_add(tide_tensor *out, const tide_tensor *x, const tide_tensor *index, const tide_tensor *src, int dim)
{
    (void)out;
    (void)x;
    (void)index;
    (void)src;
    (void)dim;
    return td_error("cpu: scatter_add is not implemented yet");
}

int td_cpu_index_select(tide_tensor *out, const tide_tensor *x, const tide_tensor *index, int dim)
{
    (void)out;
    (void)x;
    (void)index;
    (void)dim;
    return td_error("cpu: index_select is not implemented yet");
}
