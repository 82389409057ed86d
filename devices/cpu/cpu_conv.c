/* cpu_conv.c — placeholder until this file is written. */
#include "cpu_kernels.h"

int td_cpu_conv2d(tide_tensor *out, const tide_tensor *x, const tide_tensor *w, const int64_t *p)
{
    (void)out;
    (void)x;
    (void)w;
    (void)p;
    return td_error("cpu: conv2d is not implemented yet");
}

int td_cpu_conv2d_grad_input(tide_tensor *out, const tide_tensor *grad_out, const tide_tensor *w, const int64_t *p)
{
    (void)out;
    (void)grad_out;
    (void)w;
    (void)p;
    return td_error("cpu: conv2d_grad_input is not implemented yet");
}

int td_cpu_conv2d_grad_weight(tide_tensor *out, const tide_tensor *x, const tide_tensor *grad_out, const int64_t *p)
{
    (void)out;
    (void)x;
    (void)grad_out;
    (void)p;
    return td_error("cpu: conv2d_grad_weight is not implemented yet");
}

int td_cpu_pool2d(tide_op op, tide_tensor *out, const tide_tensor *x, const int64_t *p)
{
    (void)op;
    (void)out;
    (void)x;
    (void)p;
    return td_error("cpu: pool2d is not implemented yet");
}

int td_cpu_avg_pool2d_grad(tide_tensor *out, const tide_tensor *grad_out, const int64_t *p)
{
    (void)out;
    (void)grad_out;
    (void)p;
    return td_error("cpu: avg_pool2d_grad is not implemented yet");
}
