/*
 * llama_step.c — one token through a Llama with tide's C API: RMSNorm, rotary embeddings over
 * adjacent pairs (2i, 2i+1), grouped-query attention against the KV cache, SwiGLU, the
 * classifier, and the greedy choice. Written so that one jit capture serves every position:
 * the token and the position are tensors, the rotary rows are looked up with tide_embedding at
 * pos, the cache is written at pos by tide_where over (positions == pos) and tide_copy_ (the C
 * API has no in-place indexed write with a runtime index), and attention sees positions <= pos
 * through a bool mask. No size depends on pos.
 */
#include "llama_model.h"

#include <stdio.h>

#define NORM_EPS 1e-5 /* llama2.c's RMSNorm eps */
#define MAX_HELD 96 /* a block holds about 55 */

/* The intermediates of one scope, released together; the first failure's message is kept (an
 * op given a NULL operand fails too, and would overwrite it). */
typedef struct held {
    tide_tensor *t[MAX_HELD];
    int n;
    char why[512];
} held;

static tide_tensor *hold(held *h, tide_tensor *t)
{
    if (!t && !h->why[0]) {
        const char *e = tide_last_error();
        size_t i = 0;
        for (; e[i] && i + 1 < sizeof h->why; i++)
            h->why[i] = e[i];
        h->why[i] = 0;
        if (!h->why[0])
            h->why[0] = '?';
    }
    if (t && h->n < MAX_HELD)
        h->t[h->n++] = t;
    else if (t) { /* a bug here, not the caller's: more intermediates than the scope allows */
        tide_release(t);
        t = NULL;
        if (!h->why[0])
            snprintf(h->why, sizeof h->why, "more than %d intermediates in one scope", MAX_HELD);
    }
    return t;
}

/* Releases the scope's tensors but keep (retained); keep, or NULL if anything failed. */
static tide_tensor *settle(held *h, tide_tensor *keep)
{
    if (!keep && !h->why[0])
        hold(h, NULL);
    tide_tensor *out = h->why[0] ? NULL : tide_retain(keep);
    for (int i = 0; i < h->n; i++)
        tide_release(h->t[i]);
    h->n = 0;
    return out;
}

static tide_tensor *view2(held *h, tide_tensor *x, int64_t a, int64_t b)
{
    const int64_t s[2] = {a, b};
    return hold(h, tide_reshape(x, 2, s));
}

static tide_tensor *view3(held *h, tide_tensor *x, int64_t a, int64_t b, int64_t c)
{
    const int64_t s[3] = {a, b, c};
    return hold(h, tide_reshape(x, 3, s));
}

/* x / sqrt(mean(x^2 over the last dim) + eps) * w */
static tide_tensor *rms_norm(held *h, tide_tensor *x, const tide_tensor *w)
{
    const int last = -1;
    tide_tensor *ms = hold(h, tide_mean(hold(h, tide_mul(x, x)), &last, 1, true));
    tide_tensor *r = hold(h, tide_rsqrt(hold(h, tide_add_scalar(ms, NORM_EPS))));
    return hold(h, tide_mul(hold(h, tide_mul(x, r)), w));
}

/* x [1, n * hs] -> [n, hs], each adjacent pair (a, b) of a head turned by its angle:
 * (a cos - b sin, a sin + b cos); cos and sin [1, hs/2] broadcast over the heads. */
static tide_tensor *rope(held *h, tide_tensor *x, int64_t n, int64_t hs, tide_tensor *cos,
                         tide_tensor *sin)
{
    tide_tensor *pairs = view3(h, x, n, hs / 2, 2);
    tide_tensor *a = hold(h, tide_select(pairs, 2, 0)), *b = hold(h, tide_select(pairs, 2, 1));
    tide_tensor *turned[2] = {
        hold(h, tide_sub(hold(h, tide_mul(a, cos)), hold(h, tide_mul(b, sin)))),
        hold(h, tide_add(hold(h, tide_mul(a, sin)), hold(h, tide_mul(b, cos))))};
    return view2(h, hold(h, tide_stack(turned, 2, 2)), n, hs);
}

/* cache[:, pos, :] = fresh (fresh [kvh, hs]): every row rewritten, the one at pos from fresh.
 * write is bool [1, seq_len, 1], true at pos. 0 or -1. */
static int cache_write(held *h, tide_tensor *cache, tide_tensor *fresh, tide_tensor *write)
{
    tide_tensor *f = hold(h, tide_unsqueeze(fresh, 1));
    tide_tensor *updated = hold(h, tide_where(write, f, cache));
    return updated ? tide_copy_(cache, updated) : -1;
}

/* Positions' tensors a step shares between its layers. */
typedef struct step_inputs {
    tide_tensor *cos, *sin; /* [1, hs/2]: the rotary rows at pos */
    tide_tensor *seen;      /* bool [1, 1, seq_len]: keys 0..pos */
    tide_tensor *write;     /* bool [1, seq_len, 1]: pos itself */
} step_inputs;

/* Attention of x [1, dim] (normalized) at pos; writes the layer's cache; [1, dim]. */
static tide_tensor *attention(held *h, const llama_model *m, const llama_layer *y,
                              tide_tensor *kc, tide_tensor *vc, tide_tensor *x,
                              const step_inputs *in)
{
    int64_t H = m->c.n_heads, KVH = m->c.n_kv_heads, hs = m->head_size;
    tide_tensor *q = rope(h, hold(h, tide_linear(x, y->wq, NULL)), H, hs, in->cos, in->sin);
    tide_tensor *k = rope(h, hold(h, tide_linear(x, y->wk, NULL)), KVH, hs, in->cos, in->sin);
    tide_tensor *v = view2(h, hold(h, tide_linear(x, y->wv, NULL)), KVH, hs);
    if (!q || !k || !v || cache_write(h, kc, k, in->write) < 0 ||
        cache_write(h, vc, v, in->write) < 0)
        return hold(h, NULL);
    /* Grouped-query: the H / KVH query heads of kv head j are rows of one [g, hs] block. */
    tide_tensor *qg = view3(h, q, KVH, H / KVH, hs);
    tide_tensor *att = hold(h, tide_scaled_dot_product_attention(qg, kc, vc, in->seen, false, 0,
                                                                 NULL));
    return hold(h, tide_linear(view2(h, att, 1, m->c.dim), y->wo, NULL));
}

/* One block on x [1, dim]; a new reference, or NULL with *why set. */
static tide_tensor *block(const llama_model *m, int64_t l, llama_cache *cache, tide_tensor *x,
                          const step_inputs *in, char *why, size_t nwhy)
{
    held h = {{0}, 0, {0}};
    const llama_layer *y = &m->layers[l];
    tide_tensor *a = attention(&h, m, y, cache->k[l], cache->v[l], rms_norm(&h, x, y->rms_att),
                               in);
    tide_tensor *x1 = hold(&h, tide_add(x, a));
    tide_tensor *n = rms_norm(&h, x1, y->rms_ffn);
    tide_tensor *gate = hold(&h, tide_silu(hold(&h, tide_linear(n, y->w1, NULL))));
    tide_tensor *up = hold(&h, tide_linear(n, y->w3, NULL));
    tide_tensor *ffn = hold(&h, tide_linear(hold(&h, tide_mul(gate, up)), y->w2, NULL));
    tide_tensor *out = settle(&h, hold(&h, tide_add(x1, ffn)));
    if (!out)
        snprintf(why, nwhy, "layer %lld: %s", (long long)l, h.why);
    return out;
}

static int step_inputs_make(held *h, const llama_model *m, tide_tensor *pos, step_inputs *in)
{
    int64_t S = m->c.seq_len;
    in->cos = hold(h, tide_embedding(m->cos, pos));
    in->sin = hold(h, tide_embedding(m->sin, pos));
    in->seen = view3(h, hold(h, tide_le(m->positions, pos)), 1, 1, S);
    in->write = view3(h, hold(h, tide_eq(m->positions, pos)), 1, S, 1);
    return in->write ? 0 : -1;
}

tide_tensor *llama_step(const llama_model *m, llama_cache *cache, tide_tensor *token,
                        tide_tensor *pos, char *why, size_t nwhy)
{
    held h = {{0}, 0, {0}};
    step_inputs in;
    why[0] = 0;
    /* x is owned here rather than held: a scope holds a bounded number of tensors, and the
     * model may have any number of layers. */
    tide_tensor *x = tide_embedding(m->tok, token); /* [1, dim] */
    if (!x)
        hold(&h, NULL);
    if (step_inputs_make(&h, m, pos, &in) < 0) {
        tide_release(x);
        x = NULL;
    }
    for (int64_t l = 0; x && l < m->c.n_layers; l++) {
        tide_tensor *next = block(m, l, cache, x, &in, why, nwhy);
        tide_release(x);
        x = next;
    }
    tide_tensor *logits = x ? hold(&h, tide_linear(rms_norm(&h, x, m->rms_final), m->wcls, NULL))
                            : NULL;
    tide_release(x);
    tide_tensor *next = settle(&h, hold(&h, tide_argmax(logits, 1, false)));
    if (!next && !why[0])
        snprintf(why, nwhy, "%s", h.why);
    return next;
}
