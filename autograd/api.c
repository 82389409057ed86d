/* api.c — placeholder until this file is written: every function reports that it is not
 * implemented yet. */
#include "../ops/dispatch.h"

int tide_requires_grad_(tide_tensor *t, bool requires_grad)
{
    (void)t;
    (void)requires_grad;
    td_error("requires_grad_: not implemented yet");
    return -1;
}

bool tide_requires_grad(const tide_tensor *t)
{
    (void)t;
    td_error("requires_grad: not implemented yet");
    return false;
}

tide_tensor *tide_grad(const tide_tensor *t)
{
    (void)t;
    td_error("grad: not implemented yet");
    return NULL;
}

int tide_set_grad(tide_tensor *t, const tide_tensor *grad)
{
    (void)t;
    (void)grad;
    td_error("set_grad: not implemented yet");
    return -1;
}

int tide_backward(tide_tensor *root, const tide_tensor *grad_root, bool retain_graph)
{
    (void)root;
    (void)grad_root;
    (void)retain_graph;
    td_error("backward: not implemented yet");
    return -1;
}

tide_tensor *tide_detach(const tide_tensor *t)
{
    (void)t;
    td_error("detach: not implemented yet");
    return NULL;
}

bool tide_set_grad_enabled(bool enabled)
{
    (void)enabled;
    td_error("set_grad_enabled: not implemented yet");
    return false;
}

bool tide_is_grad_enabled(void)
{
    td_error("is_grad_enabled: not implemented yet");
    return false;
}

const char *tide_grad_fn_name(const tide_tensor *t)
{
    (void)t;
    td_error("grad_fn_name: not implemented yet");
    return NULL;
}
