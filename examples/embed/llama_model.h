/*
 * llama_model.h — a Llama checkpoint in llama2.c's format and its one-token decoding step, built
 * with tide's public C API only (embed_llama.c drives it). See examples/README.md.
 */
#ifndef EMBED_LLAMA_MODEL_H
#define EMBED_LLAMA_MODEL_H

#include <stddef.h>
#include <stdint.h>

#include <tide.h>

/* llama2.c's header: seven int32 (vocab_size < 0 there: the classifier is not the embedding). */
typedef struct llama_config {
    int64_t dim, hidden_dim, n_layers, n_heads, n_kv_heads, vocab_size, seq_len;
    int shared_classifier;
} llama_config;

/* One block's weights: views into the stacked [n_layers, ...] arrays of the file. */
typedef struct llama_layer {
    tide_tensor *rms_att, *wq, *wk, *wv, *wo, *rms_ffn, *w1, *w2, *w3;
} llama_layer;

#define LLAMA_NUM_ARRAYS 12 /* the float32 arrays the model keeps, in the file's order */

typedef struct llama_model {
    llama_config c;
    int64_t head_size;
    tide_tensor *arrays[LLAMA_NUM_ARRAYS]; /* owned: token_embedding ... rms_final, wcls */
    tide_tensor *tok, *rms_final, *wcls;   /* borrowed from arrays (wcls may be tok) */
    llama_layer *layers;                   /* n_layers entries, each a view (owned) */
    tide_tensor *cos, *sin;                /* [seq_len, head_size / 2] float32 */
    tide_tensor *positions;                /* int64 0 .. seq_len - 1 */
} llama_model;

/* The keys and values of every position so far: per layer [n_kv_heads, seq_len, head_size]. */
typedef struct llama_cache {
    int64_t n_layers;
    tide_tensor **k, **v;
} llama_cache;

/* Reads path (llama2.c's format). 0, or -1 after a message on stderr naming the file and what
 * is wrong: a header that is not a Llama, or one whose arrays disagree with the file's size. */
int llama_load(llama_model *m, const char *path);
void llama_free(llama_model *m);

int llama_cache_new(llama_cache *cache, const llama_model *m); /* zeros; 0 or -1 */
void llama_cache_free(llama_cache *cache);

/* One decoding step: token and pos are int64 [1] (0-based id and position, pos < seq_len).
 * Writes the token's key and value at pos in the cache (an in-place write of the whole cache
 * through a where() on pos, so that pos is a runtime value under a jit capture), attends to
 * positions 0..pos and returns the greedy next token, int64 [1]; NULL on failure, with the
 * first failing op's message (and the layer) in why (nwhy bytes). */
tide_tensor *llama_step(const llama_model *m, llama_cache *cache, tide_tensor *token,
                        tide_tensor *pos, char *why, size_t nwhy);

#endif
