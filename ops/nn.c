/* nn.c — placeholder until this file is written: every function reports that it is not
 * implemented yet. */
#include "dispatch.h"

tide_tensor *tide_softmax(const tide_tensor *x, int dim)
{
    (void)x;
    (void)dim;
    td_error("softmax: not implemented yet");
    return NULL;
}

tide_tensor *tide_log_softmax(const tide_tensor *x, int dim)
{
    (void)x;
    (void)dim;
    td_error("log_softmax: not implemented yet");
    return NULL;
}

tide_tensor *tide_logsumexp(const tide_tensor *x, const int *dims, int ndims, bool keepdim)
{
    (void)x;
    (void)dims;
    (void)ndims;
    (void)keepdim;
    td_error("logsumexp: not implemented yet");
    return NULL;
}

tide_tensor *tide_layer_norm(const tide_tensor *x, int n_normalized, const tide_tensor *weight, const tide_tensor *bias, double eps)
{
    (void)x;
    (void)n_normalized;
    (void)weight;
    (void)bias;
    (void)eps;
    td_error("layer_norm: not implemented yet");
    return NULL;
}

tide_tensor *tide_batch_norm(const tide_tensor *x, tide_tensor *running_mean, tide_tensor *running_var, const tide_tensor *weight, const tide_tensor *bias, bool training, double momentum, double eps)
{
    (void)x;
    (void)running_mean;
    (void)running_var;
    (void)weight;
    (void)bias;
    (void)training;
    (void)momentum;
    (void)eps;
    td_error("batch_norm: not implemented yet");
    return NULL;
}

tide_tensor *tide_linear(const tide_tensor *x, const tide_tensor *weight, const tide_tensor *bias)
{
    (void)x;
    (void)weight;
    (void)bias;
    td_error("linear: not implemented yet");
    return NULL;
}

tide_tensor *tide_dropout(const tide_tensor *x, double p, bool training)
{
    (void)x;
    (void)p;
    (void)training;
    td_error("dropout: not implemented yet");
    return NULL;
}

tide_tensor *tide_cross_entropy(const tide_tensor *logits, const tide_tensor *target, tide_reduction reduction, double label_smoothing, int64_t ignore_index)
{
    (void)logits;
    (void)target;
    (void)reduction;
    (void)label_smoothing;
    (void)ignore_index;
    td_error("cross_entropy: not implemented yet");
    return NULL;
}

tide_tensor *tide_nll_loss(const tide_tensor *log_probs, const tide_tensor *target, tide_reduction reduction, int64_t ignore_index)
{
    (void)log_probs;
    (void)target;
    (void)reduction;
    (void)ignore_index;
    td_error("nll_loss: not implemented yet");
    return NULL;
}

tide_tensor *tide_mse_loss(const tide_tensor *input, const tide_tensor *target, tide_reduction reduction)
{
    (void)input;
    (void)target;
    (void)reduction;
    td_error("mse_loss: not implemented yet");
    return NULL;
}

tide_tensor *tide_binary_cross_entropy_with_logits(const tide_tensor *logits, const tide_tensor *target, tide_reduction reduction)
{
    (void)logits;
    (void)target;
    (void)reduction;
    td_error("binary_cross_entropy_with_logits: not implemented yet");
    return NULL;
}

tide_tensor *tide_gelu(const tide_tensor *x, bool approximate_tanh)
{
    (void)x;
    (void)approximate_tanh;
    td_error("gelu: not implemented yet");
    return NULL;
}

tide_tensor *tide_silu(const tide_tensor *x)
{
    (void)x;
    td_error("silu: not implemented yet");
    return NULL;
}
