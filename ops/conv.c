/* conv.c — placeholder until this file is written: every function reports that it is not
 * implemented yet. */
#include "dispatch.h"

tide_tensor *tide_conv2d(const tide_tensor *x, const tide_tensor *weight, const tide_tensor *bias, const int stride[2], const int padding[2], const int dilation[2], int groups)
{
    (void)x;
    (void)weight;
    (void)bias;
    (void)stride;
    (void)padding;
    (void)dilation;
    (void)groups;
    td_error("conv2d: not implemented yet");
    return NULL;
}

tide_tensor *tide_conv2d_grad_input(const tide_tensor *grad_out, const tide_tensor *weight, const int64_t input_hw[2], const int stride[2], const int padding[2], const int dilation[2], int groups)
{
    (void)grad_out;
    (void)weight;
    (void)input_hw;
    (void)stride;
    (void)padding;
    (void)dilation;
    (void)groups;
    td_error("conv2d_grad_input: not implemented yet");
    return NULL;
}

tide_tensor *tide_conv2d_grad_weight(const tide_tensor *x, const tide_tensor *grad_out, const int64_t kernel_hw[2], const int stride[2], const int padding[2], const int dilation[2], int groups)
{
    (void)x;
    (void)grad_out;
    (void)kernel_hw;
    (void)stride;
    (void)padding;
    (void)dilation;
    (void)groups;
    td_error("conv2d_grad_weight: not implemented yet");
    return NULL;
}

tide_tensor *tide_max_pool2d(const tide_tensor *x, const int kernel[2], const int stride[2], const int padding[2], tide_tensor **indices)
{
    (void)x;
    (void)kernel;
    (void)stride;
    (void)padding;
    (void)indices;
    td_error("max_pool2d: not implemented yet");
    return NULL;
}

tide_tensor *tide_avg_pool2d(const tide_tensor *x, const int kernel[2], const int stride[2], const int padding[2], bool count_include_pad)
{
    (void)x;
    (void)kernel;
    (void)stride;
    (void)padding;
    (void)count_include_pad;
    td_error("avg_pool2d: not implemented yet");
    return NULL;
}

tide_tensor *tide_avg_pool2d_grad(const tide_tensor *grad_out, const int64_t input_hw[2], const int kernel[2], const int stride[2], const int padding[2], bool count_include_pad)
{
    (void)grad_out;
    (void)input_hw;
    (void)kernel;
    (void)stride;
    (void)padding;
    (void)count_include_pad;
    td_error("avg_pool2d_grad: not implemented yet");
    return NULL;
}

tide_tensor *tide_adaptive_avg_pool2d(const tide_tensor *x, int64_t out_h, int64_t out_w)
{
    (void)x;
    (void)out_h;
    (void)out_w;
    td_error("adaptive_avg_pool2d: not implemented yet");
    return NULL;
}
