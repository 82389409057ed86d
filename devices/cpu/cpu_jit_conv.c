/*
 * cpu_jit_conv.c — a conv2d's epilogue group (jit/fusion.c) run inside the convolution's own
 * stores, when the group is what follows a convolution in a conv net: a bias per output
 * channel, a ReLU, or the bias then the ReLU. The direct path (cpu_conv_direct.c) adds and
 * clamps each sum in registers, so the output is written once instead of three times; at
 * batch 1 those two passes cost about a tenth of a small conv net's time.
 *
 * Bits: each output is the same sum as eager's convolution (the direct path is the one eager
 * takes for these shapes), then the same float32 add and relu's v < 0 ? 0 : v. Anything else
 * (another op in the group, an intermediate value needed outside, a write-back, a shape the
 * direct path does not take, a product another step reads) returns 0 and the caller runs the
 * convolution and then the group.
 */
#include <stdlib.h>

#include "cpu_jit.h"
#include "cpu_kernels.h"

/* The group as conv (+ the value of slot bias_slot) (then relu), its result in out_slot. */
typedef struct conv_tail {
    int bias_slot; /* or -1 */
    int out_slot;
    bool relu;
} conv_tail;

/* Whether member i (node nd, reading the value of node prev) continues the bias-then-relu form. */
static bool tail_member(const jit_group *g, const jit_node *nd, int i, int prev, conv_tail *ct)
{
    if (nd->kind != JN_OP || nd->dtype != TIDE_FLOAT32)
        return false;
    if (nd->op == TIDE_OP_ADD && i == 0 && nd->nin == 2 && nd->in[0] != nd->in[1]) {
        int other = nd->in[0] == prev ? nd->in[1] : nd->in[1] == prev ? nd->in[0] : -1;
        ct->bias_slot = other < 0 ? -1 : jit_slot_of(g, other);
        return ct->bias_slot >= 0 && !g->slots[ct->bias_slot].member;
    }
    if (nd->op == TIDE_OP_RELU && nd->nin == 1 && nd->in[0] == prev && !ct->relu) {
        ct->relu = true;
        return true;
    }
    return false;
}

static bool match_tail(const jit_plan *c, const jit_group *g, conv_tail *ct)
{
    if (!g->product_private || g->nmembers < 1 || g->nmembers > 2)
        return false;
    for (int s = 0; s < g->nslots; s++)
        if (g->slots[s].into >= 0)
            return false;
    ct->bias_slot = -1;
    ct->relu = false;
    int prev = g->producer;
    for (int i = 0; i < g->nmembers; i++) {
        const jit_slot *sl = &g->slots[g->members[i]];
        bool needed_outside = i < g->nmembers - 1 && sl->output;
        if (needed_outside || !tail_member(g, &c->nodes[sl->node], i, prev, ct))
            return false;
        prev = sl->node;
    }
    ct->out_slot = g->members[g->nmembers - 1];
    return g->slots[ct->out_slot].output;
}

/* b as one value per channel of the domain [N, O, OH, OW] (bias[o]), when it broadcasts over
 * the other three dims. */
static bool channel_values(const tide_tensor *b, const int64_t *domain, float *bias)
{
    if (!b || b->dtype != TIDE_FLOAT32 || b->ndim > 4)
        return false;
    int lead = 4 - b->ndim;
    int64_t step = 0;
    for (int k = 0; k < 4; k++) {
        int bk = k - lead;
        if (bk < 0 || b->shape[bk] == 1)
            continue;
        if (k == 1)
            step = b->strides[bk];
        else if (b->strides[bk] != 0)
            return false;
    }
    const float *v = td_tensor_data(b);
    for (int64_t o = 0; o < domain[1]; o++)
        bias[o] = v[o * step];
    return true;
}

int td_cpu_jit_conv_fused(const jit_plan *c, const jit_group *g, tide_tensor *const *t)
{
    conv_tail ct;
    if (!match_tail(c, g, &ct))
        return 0;
    tide_tensor *out = t[ct.out_slot];
    if (!out || out->ndim != 4 || out->dtype != TIDE_FLOAT32 || !td_is_contiguous(out))
        return 0;
    float *bias = NULL;
    if (ct.bias_slot >= 0) {
        bias = td_malloc((size_t)out->shape[1] * sizeof(float) + 1);
        if (!bias)
            return td_error("jit: conv2d's epilogue: out of memory");
        if (!channel_values(t[ct.bias_slot], out->shape, bias)) {
            free(bias);
            return 0;
        }
    }
    const jit_node *p = &c->nodes[g->producer];
    int rc = td_cpu_conv2d_fused(out, t[g->nslots + 1], t[g->nslots + 2], p->attrs.ints, bias,
                                 ct.relu);
    free(bias);
    return rc;
}
