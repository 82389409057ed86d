/*
 * attention.c — scaled_dot_product_attention, as torch.nn.functional's: softmax(q k^T * scale
 * + mask) v, one fused library op (the SDPA primitive) whose kernels never store the L x S
 * scores (devices/cpu/cpu_attention.c: flash-attention style blocks with an online softmax).
 *
 * The forward keeps what its backward reads beside the output: SDPA writes one 1-D "packed"
 * tensor, the outputs (contiguous [B.., L, Ev]) then each row's logsumexp. Autograd never saves
 * an op's output (autograd/README.md: a cycle), so the packed tensor is made with grad mode off
 * and the backward node is recorded by hand (td_record_grad) for the output view, with packed
 * as one more input that the formula reads; its gradient (SDPA_GRAD) recomputes the scores
 * block by block from q, k and the logsumexp. Broadcast batch dims are expand views recorded
 * normally, so their backward sums the gradients back to each operand's shape.
 *
 * A bool mask becomes 0 / -inf in q's dtype here, so kernels see one additive mask. The jit
 * keeps SDPA and SDPA_GRAD opaque, like matmul.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "autocast.h"
#include "nn_common.h"

typedef struct sdpa_dims {
    int nb; /* batch dims */
    int64_t batch[TIDE_MAX_DIMS];
    int64_t n, L, S, E, Ev; /* n: the batch's numel */
} sdpa_dims;

/* "q [2, 3, 4] float32, k ..., v ..." for an error message. */
static const char *describe_qkv(char *buf, size_t size, const tide_tensor *q, const tide_tensor *k,
                                const tide_tensor *v)
{
    char a[160], b[160], c[160];
    snprintf(buf, size, "query %s, key %s, value %s", nn_describe(a, sizeof a, q),
             nn_describe(b, sizeof b, k), nn_describe(c, sizeof c, v));
    return buf;
}

/* The broadcast batch dims of q, k and v (all but their last two). */
static int batch_dims(const char *op, const tide_tensor *q, const tide_tensor *k,
                      const tide_tensor *v, sdpa_dims *d)
{
    char buf[600];
    int n1, n2;
    int64_t s1[TIDE_MAX_DIMS], s2[TIDE_MAX_DIMS];
    if (td_broadcast_shape(q->ndim - 2, q->shape, k->ndim - 2, k->shape, &n1, s1) < 0 ||
        td_broadcast_shape(n1, s1, v->ndim - 2, v->shape, &n2, s2) < 0)
        return td_error("%s: the batch dims (all but the last two) of %s do not broadcast", op,
                        describe_qkv(buf, sizeof buf, q, k, v));
    d->nb = n2;
    memcpy(d->batch, s2, sizeof(int64_t) * (size_t)n2);
    d->n = td_numel(n2, s2);
    return 0;
}

/* The shape error of check_qkv, or 0; the description is formatted only for an error. */
static int qkv_shape_error(const char *op, const tide_tensor *q, const tide_tensor *k,
                           const tide_tensor *v)
{
    char buf[600];
    if (k->dtype != q->dtype || v->dtype != q->dtype)
        return td_error("%s: query, key and value must have one dtype; got %s", op,
                        describe_qkv(buf, sizeof buf, q, k, v));
    if (k->device != q->device || v->device != q->device)
        return td_error("%s: query, key and value must be on one device; got %s on %s, %s, %s",
                        op, describe_qkv(buf, sizeof buf, q, k, v), q->device->name,
                        k->device->name, v->device->name);
    if (q->ndim < 2 || k->ndim < 2 || v->ndim < 2)
        return td_error("%s: query [..., L, E], key [..., S, E] and value [..., S, Ev] need at "
                        "least 2 dims; got %s",
                        op, describe_qkv(buf, sizeof buf, q, k, v));
    int64_t E = q->shape[q->ndim - 1], S = k->shape[k->ndim - 2];
    if (k->shape[k->ndim - 1] != E)
        return td_error("%s: key's last dim must equal query's (E = %lld); got %s", op,
                        (long long)E, describe_qkv(buf, sizeof buf, q, k, v));
    if (v->shape[v->ndim - 2] != S)
        return td_error("%s: value's second-to-last dim must equal key's (S = %lld); got %s",
                        op, (long long)S, describe_qkv(buf, sizeof buf, q, k, v));
    return 0;
}

static int check_qkv(const char *op, const tide_tensor *q, const tide_tensor *k,
                     const tide_tensor *v, sdpa_dims *d)
{
    if (nn_check_floating(op, "query", q) < 0 || nn_check_floating(op, "key", k) < 0 ||
        nn_check_floating(op, "value", v) < 0 || qkv_shape_error(op, q, k, v) < 0)
        return -1;
    d->L = q->shape[q->ndim - 2];
    d->E = q->shape[q->ndim - 1];
    d->S = k->shape[k->ndim - 2];
    d->Ev = v->shape[v->ndim - 1];
    return batch_dims(op, q, k, v, d);
}

static int check_mask(const char *op, const tide_tensor *q, const tide_tensor *mask,
                      bool is_causal, const sdpa_dims *d)
{
    if (!mask)
        return 0;
    char a[160], b[160];
    if (is_causal)
        return td_error("%s: attn_mask and is_causal cannot both be set (as PyTorch); got "
                        "attn_mask %s with is_causal = true",
                        op, nn_describe(a, sizeof a, mask));
    if (mask->dtype != TIDE_BOOL && mask->dtype != q->dtype)
        return td_error("%s: attn_mask must be bool or the query's dtype; got attn_mask %s for "
                        "query %s",
                        op, nn_describe(a, sizeof a, mask), nn_describe(b, sizeof b, q));
    if (mask->device != q->device)
        return td_error("%s: attn_mask is on %s, query on %s", op, mask->device->name,
                        q->device->name);
    if (tide_requires_grad(mask))
        return td_error("%s: a gradient for attn_mask is not supported; detach() it (attn_mask "
                        "%s)",
                        op, nn_describe(a, sizeof a, mask));
    int64_t want[TIDE_MAX_DIMS + 2];
    memcpy(want, d->batch, sizeof(int64_t) * (size_t)d->nb);
    want[d->nb] = d->L;
    want[d->nb + 1] = d->S;
    int nd = d->nb + 2, lead = nd - mask->ndim;
    bool ok = mask->ndim <= nd;
    for (int i = 0; ok && i < mask->ndim; i++)
        ok = mask->shape[i] == 1 || mask->shape[i] == want[lead + i];
    if (!ok)
        return td_error("%s: attn_mask %s does not broadcast to [..., L, S] = [..., %lld, %lld] "
                        "(query %s)",
                        op, nn_describe(a, sizeof a, mask), (long long)d->L, (long long)d->S,
                        nn_describe(b, sizeof b, q));
    return 0;
}

static int check_options(const char *op, double dropout_p, const double *scale)
{
    if (!(dropout_p >= 0 && dropout_p < 1))
        return td_error("%s: dropout_p must be in [0, 1), got %g", op, dropout_p);
    if (dropout_p > 0)
        return td_error("%s: dropout_p > 0 is not supported yet (got %g); apply dropout to the "
                        "inputs or use the composite matmul/softmax/dropout/matmul",
                        op, dropout_p);
    if (scale && !isfinite(*scale))
        return td_error("%s: scale must be finite, got %g", op, *scale);
    return 0;
}

/* x ([..., rows, cols]) as the kernels want it: rows of element stride 1, expanded to the
 * batch dims (stride 0 where broadcast). The expand is recorded, so its backward sums. */
static tide_tensor *operand(nn_scope *s, const tide_tensor *x, const sdpa_dims *d)
{
    tide_tensor *c = (tide_tensor *)x;
    if (x->shape[x->ndim - 1] > 1 && x->strides[x->ndim - 1] != 1)
        c = nn_keep(s, tide_contiguous(x));
    if (!c)
        return NULL;
    int64_t shape[TIDE_MAX_DIMS];
    memcpy(shape, d->batch, sizeof(int64_t) * (size_t)d->nb);
    shape[d->nb] = x->shape[x->ndim - 2];
    shape[d->nb + 1] = x->shape[x->ndim - 1];
    return nn_keep(s, tide_expand(c, d->nb + 2, shape));
}

/* The mask as q's dtype, added to the scores (bool: 0 where true, -inf where false), expanded
 * to [batch.., L, S]. */
static tide_tensor *additive_mask(nn_scope *s, const tide_tensor *mask, const tide_tensor *q,
                                  const sdpa_dims *d)
{
    tide_tensor *m = (tide_tensor *)mask;
    if (mask->dtype == TIDE_BOOL) {
        tide_tensor *zero = nn_keep(s, td_full_on(q->device, "scaled_dot_product_attention", 0,
                                                  NULL, 0, (tide_dtype)q->dtype));
        tide_tensor *ninf = nn_keep(s, td_full_on(q->device, "scaled_dot_product_attention", 0,
                                                  NULL, -INFINITY, (tide_dtype)q->dtype));
        m = nn_keep(s, tide_where(mask, zero, ninf));
    }
    if (!m)
        return NULL;
    int64_t shape[TIDE_MAX_DIMS];
    memcpy(shape, d->batch, sizeof(int64_t) * (size_t)d->nb);
    shape[d->nb] = d->L;
    shape[d->nb + 1] = d->S;
    return nn_keep(s, tide_expand(m, d->nb + 2, shape));
}

tide_tensor *td_sdpa_unpack(const tide_tensor *flat, int ndim, const int64_t *shape,
                            bool heads_last)
{
    int nb = ndim - 2;
    if (!heads_last || nb == 0)
        return tide_reshape(flat, ndim, shape);
    int64_t stored_shape[TIDE_MAX_DIMS];
    memcpy(stored_shape, shape, sizeof(int64_t) * (size_t)ndim);
    stored_shape[nb - 1] = shape[nb];
    stored_shape[nb] = shape[nb - 1];
    tide_tensor *stored = tide_reshape(flat, ndim, stored_shape);
    tide_tensor *view = stored ? tide_transpose(stored, nb - 1, nb) : NULL;
    tide_release(stored);
    return view;
}

/* packed's first N*L*Ev elements as [batch.., L, Ev] (a view). With a batch dim, the outputs
 * are stored heads-last (core/primitive.h): as [batch.. but the last, L, heads, Ev], so that
 * out:transpose(-3, -2):reshape(.., L, heads * Ev), how a model joins its heads, is a view. */
static tide_tensor *output_view(nn_scope *s, tide_tensor *packed, const sdpa_dims *d)
{
    int64_t shape[TIDE_MAX_DIMS];
    memcpy(shape, d->batch, sizeof(int64_t) * (size_t)d->nb);
    shape[d->nb] = d->L;
    shape[d->nb + 1] = d->Ev;
    tide_tensor *head = nn_keep(s, tide_slice(packed, 0, 0, d->n * d->L * d->Ev, 1));
    return head ? nn_keep(s, td_sdpa_unpack(head, d->nb + 2, shape, d->nb > 0)) : NULL;
}

/* SDPA with grad mode off, the output view, then the node recorded by hand with packed as a
 * last input. in holds q, k, v [, mask] and room for packed. */
static tide_tensor *run_sdpa(nn_scope *s, tide_tensor **in, int nin, const tide_attrs *attrs,
                             const sdpa_dims *d)
{
    td_meta meta = {1, {d->n * d->L * (d->Ev + 1)}, (tide_dtype)in[0]->dtype, in[0]->device};
    bool grad = nn_no_grad_begin();
    tide_tensor *packed = nn_keep(s, td_dispatch(TIDE_OP_SDPA, &meta, in, nin, attrs));
    tide_tensor *out = packed ? output_view(s, packed, d) : NULL;
    nn_no_grad_end(grad);
    if (!out)
        return NULL;
    in[nin] = packed;
    if (grad)
        nn_check_status(s, td_record_grad(TIDE_OP_SDPA, out, in, nin + 1, attrs));
    return out;
}

static tide_tensor *sdpa_body(const tide_tensor *q, const tide_tensor *k, const tide_tensor *v,
                              const tide_tensor *mask, bool is_causal, double dropout_p,
                              const double *scale)
{
    const char *op = "scaled_dot_product_attention";
    sdpa_dims d;
    if (check_qkv(op, q, k, v, &d) < 0 || check_mask(op, q, mask, is_causal, &d) < 0 ||
        check_options(op, dropout_p, scale) < 0)
        return NULL;
    tide_attrs attrs = {0};
    attrs.ints[0] = is_causal;
    attrs.ints[1] = mask != NULL;
    attrs.ints[2] = d.nb > 0; /* heads-last outputs (output_view) */
    attrs.nints = 3;
    attrs.values[0] = scale ? *scale : 1.0 / sqrt((double)d.E);
    nn_scope s = {0};
    tide_tensor *in[5] = {operand(&s, q, &d), operand(&s, k, &d), operand(&s, v, &d), NULL};
    int nin = 3;
    if (mask)
        in[nin++] = additive_mask(&s, mask, q, &d);
    tide_tensor *out = NULL;
    if (!s.failed)
        out = run_sdpa(&s, in, nin, &attrs, &d);
    return nn_finish(&s, op, out);
}

tide_tensor *tide_scaled_dot_product_attention(const tide_tensor *q, const tide_tensor *k,
                                                const tide_tensor *v, const tide_tensor *attn_mask,
                                                bool is_causal, double dropout_p,
                                                const double *scale)
{
    /* A float mask is cast with q (it must have q's dtype); a bool one stays bool. */
    TD_IN_AUTOCAST_OP("scaled_dot_product_attention", TD_AUTOCAST_LOWER,
                      sdpa_body(q, k, v, attn_mask, is_causal, dropout_p, scale), 4, &q, &k, &v,
                      &attn_mask);
}
