/*
 * llama_load.c — reads a Llama checkpoint in llama2.c's format with tide_load_raw: seven int32
 * (dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size (negative: an unshared classifier
 * follows), seq_len), then float32 arrays, every matrix [out, in] row-major:
 *   token_embedding [vocab, dim], rms_att [layers, dim], wq [layers, dim, dim],
 *   wk [layers, kv_dim, dim], wv [layers, kv_dim, dim], wo [layers, dim, dim],
 *   rms_ffn [layers, dim], w1 [layers, hidden, dim], w2 [layers, dim, hidden],
 *   w3 [layers, hidden, dim], rms_final [dim], two unused RoPE tables of
 *   seq_len * head_size / 2 floats each, wcls [vocab, dim] when unshared.
 * The file's size must be exactly what the header implies.
 */
#define _POSIX_C_SOURCE 200809L
#include "llama_model.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define HEADER_BYTES 28
#define ROPE_THETA 10000.0 /* llama2.c's, and Llama 2's */

enum { A_TOK, A_RMS_ATT, A_WQ, A_WK, A_WV, A_WO, A_RMS_FFN, A_W1, A_W2, A_W3, A_RMS_FINAL, A_WCLS };

typedef struct array_layout {
    int ndim;
    int64_t shape[3];
} array_layout;

static int load_error(const char *path, const char *what)
{
    fprintf(stderr, "embed_llama: %s: %s\n", path, what);
    return -1;
}

/* The header's checks: positive sizes, heads dividing dim into an even head size, kv heads
 * dividing the heads. */
static int check_config(const char *path, const llama_config *c)
{
    const int64_t v[7] = {c->dim, c->hidden_dim, c->n_layers, c->n_heads, c->n_kv_heads,
                          c->vocab_size, c->seq_len};
    int ok = 1;
    for (int i = 0; i < 7; i++)
        ok = ok && v[i] > 0;
    ok = ok && c->dim % c->n_heads == 0 && (c->dim / c->n_heads) % 2 == 0 &&
         c->n_heads % c->n_kv_heads == 0;
    if (ok)
        return 0;
    char msg[320];
    snprintf(msg, sizeof msg, "the header (dim %lld, hidden_dim %lld, n_layers %lld, n_heads "
             "%lld, n_kv_heads %lld, vocab_size %lld, seq_len %lld) is not a Llama: sizes must "
             "be positive, dim n_heads times an even head size, n_heads a multiple of "
             "n_kv_heads", (long long)v[0], (long long)v[1], (long long)v[2], (long long)v[3],
             (long long)v[4], (long long)v[5], (long long)v[6]);
    return load_error(path, msg);
}

static int read_header(const char *path, llama_config *c)
{
    const int64_t seven = 7;
    tide_tensor *h = tide_load_raw(path, 0, TIDE_INT32, 1, &seven);
    if (!h) {
        fprintf(stderr, "embed_llama: %s\n", tide_last_error());
        return -1;
    }
    const int32_t *v = tide_data_ptr(h);
    c->dim = v[0], c->hidden_dim = v[1], c->n_layers = v[2], c->n_heads = v[3];
    c->n_kv_heads = v[4], c->vocab_size = v[5] < 0 ? -(int64_t)v[5] : v[5], c->seq_len = v[6];
    c->shared_classifier = v[5] > 0;
    tide_release(h);
    return check_config(path, c);
}

/* The arrays' shapes in the file's order; the unused RoPE tables are entries 11 and 12 (1-D). */
static int layout_of(const llama_config *c, array_layout *a)
{
    int64_t L = c->n_layers, D = c->dim, H = c->hidden_dim, V = c->vocab_size;
    int64_t kv = c->n_kv_heads * (D / c->n_heads), rope = c->seq_len * (D / c->n_heads) / 2;
    const array_layout all[14] = {
        {2, {V, D}},    {2, {L, D}},    {3, {L, D, D}}, {3, {L, kv, D}}, {3, {L, kv, D}},
        {3, {L, D, D}}, {2, {L, D}},    {3, {L, H, D}}, {3, {L, D, H}},  {3, {L, H, D}},
        {1, {D}},       {1, {rope}},    {1, {rope}},    {2, {V, D}}};
    int n = c->shared_classifier ? 13 : 14;
    memcpy(a, all, sizeof all);
    return n;
}

/* Elements of an array, or -1 past 2^60 (no real file is that large: the size check fails). */
static int64_t numel_of(const array_layout *a)
{
    int64_t n = 1;
    for (int d = 0; d < a->ndim; d++) {
        if (a->shape[d] > ((int64_t)1 << 60) / n)
            return -1;
        n *= a->shape[d];
    }
    return n;
}

/* The file must hold exactly the header and the arrays it implies. */
static int check_size(const char *path, const llama_config *c, const array_layout *a, int n)
{
    struct stat st;
    if (stat(path, &st) != 0)
        return load_error(path, "cannot read its size");
    int64_t want = HEADER_BYTES;
    for (int i = 0; i < n && want >= 0; i++) {
        int64_t e = numel_of(&a[i]);
        want = e < 0 || e > (((int64_t)1 << 60) - want) / 4 ? -1 : want + 4 * e;
    }
    if (want == (int64_t)st.st_size)
        return 0;
    char msg[400];
    snprintf(msg, sizeof msg, "its header (dim %lld, hidden_dim %lld, n_layers %lld, n_heads "
             "%lld, n_kv_heads %lld, vocab_size %lld%s, seq_len %lld) needs %s%lld bytes, but "
             "the file has %lld", (long long)c->dim, (long long)c->hidden_dim,
             (long long)c->n_layers, (long long)c->n_heads, (long long)c->n_kv_heads,
             (long long)c->vocab_size, c->shared_classifier ? "" : " unshared",
             (long long)c->seq_len, want < 0 ? "more than " : "",
             (long long)(want < 0 ? ((int64_t)1 << 60) : want), (long long)st.st_size);
    return load_error(path, msg);
}

/* cos and sin of pos * theta^(-2i / head_size), angles in double, as float32 [seq_len, hs/2]. */
static int rope_tables(llama_model *m)
{
    int64_t S = m->c.seq_len, half = m->head_size / 2, shape[2] = {S, half};
    float *cs = malloc((size_t)(S * half) * 2 * sizeof(float));
    if (!cs)
        return load_error("rope tables", "out of memory");
    for (int64_t p = 0; p < S; p++)
        for (int64_t i = 0; i < half; i++) {
            double angle = (double)p * pow(ROPE_THETA, -2.0 * (double)i / (double)m->head_size);
            cs[p * half + i] = (float)cos(angle);
            cs[S * half + p * half + i] = (float)sin(angle);
        }
    m->cos = tide_from_data(cs, 2, shape, TIDE_FLOAT32);
    m->sin = tide_from_data(cs + S * half, 2, shape, TIDE_FLOAT32);
    m->positions = tide_arange(0, (double)S, 1, TIDE_INT64);
    free(cs);
    return m->cos && m->sin && m->positions ? 0 : load_error("rope tables", tide_last_error());
}

/* Per-layer views of the stacked arrays. */
static int split_layers(llama_model *m)
{
    m->layers = calloc((size_t)m->c.n_layers, sizeof *m->layers);
    if (!m->layers)
        return load_error("layers", "out of memory");
    for (int64_t l = 0; l < m->c.n_layers; l++) {
        llama_layer *y = &m->layers[l];
        tide_tensor **dst[9] = {&y->rms_att, &y->wq, &y->wk, &y->wv, &y->wo,
                                &y->rms_ffn, &y->w1, &y->w2, &y->w3};
        for (int k = 0; k < 9; k++)
            if (!(*dst[k] = tide_select(m->arrays[A_RMS_ATT + k], 0, l)))
                return load_error("layers", tide_last_error());
    }
    return 0;
}

int llama_load(llama_model *m, const char *path)
{
    memset(m, 0, sizeof *m);
    array_layout a[14];
    if (read_header(path, &m->c) < 0)
        return -1;
    int n = layout_of(&m->c, a);
    if (check_size(path, &m->c, a, n) < 0)
        return -1;
    m->head_size = m->c.dim / m->c.n_heads;
    uint64_t offset = HEADER_BYTES;
    for (int i = 0, kept = 0; i < n; i++) {
        if (i != 11 && i != 12) { /* 11, 12: the unused tables */
            m->arrays[kept] = tide_load_raw(path, offset, TIDE_FLOAT32, a[i].ndim, a[i].shape);
            if (!m->arrays[kept++]) {
                fprintf(stderr, "embed_llama: %s\n", tide_last_error());
                return -1;
            }
        }
        offset += 4 * (uint64_t)numel_of(&a[i]);
    }
    m->tok = m->arrays[A_TOK];
    m->rms_final = m->arrays[A_RMS_FINAL];
    m->wcls = m->c.shared_classifier ? m->tok : m->arrays[A_WCLS];
    return split_layers(m) < 0 || rope_tables(m) < 0 ? -1 : 0;
}

void llama_free(llama_model *m)
{
    for (int64_t l = 0; m->layers && l < m->c.n_layers; l++) {
        llama_layer *y = &m->layers[l];
        tide_tensor *all[9] = {y->rms_att, y->wq, y->wk, y->wv, y->wo,
                               y->rms_ffn, y->w1, y->w2, y->w3};
        for (int k = 0; k < 9; k++)
            tide_release(all[k]);
    }
    free(m->layers);
    for (int i = 0; i < LLAMA_NUM_ARRAYS; i++)
        tide_release(m->arrays[i]);
    tide_release(m->cos);
    tide_release(m->sin);
    tide_release(m->positions);
    memset(m, 0, sizeof *m);
}

int llama_cache_new(llama_cache *cache, const llama_model *m)
{
    int64_t shape[3] = {m->c.n_kv_heads, m->c.seq_len, m->head_size};
    cache->n_layers = m->c.n_layers;
    cache->k = calloc((size_t)m->c.n_layers, sizeof *cache->k);
    cache->v = calloc((size_t)m->c.n_layers, sizeof *cache->v);
    if (!cache->k || !cache->v)
        return load_error("KV cache", "out of memory");
    for (int64_t l = 0; l < m->c.n_layers; l++)
        if (!(cache->k[l] = tide_zeros(3, shape, TIDE_FLOAT32)) ||
            !(cache->v[l] = tide_zeros(3, shape, TIDE_FLOAT32)))
            return load_error("KV cache", tide_last_error());
    return 0;
}

void llama_cache_free(llama_cache *cache)
{
    for (int64_t l = 0; l < cache->n_layers; l++) {
        tide_release(cache->k ? cache->k[l] : NULL);
        tide_release(cache->v ? cache->v[l] : NULL);
    }
    free(cache->k);
    free(cache->v);
    memset(cache, 0, sizeof *cache);
}
