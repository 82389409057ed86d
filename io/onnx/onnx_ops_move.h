/*
 * onnx_ops_move.h — what the shape and indexing handler files share: helpers for int64 index
 * tensors, and the handlers that live in their own files (onnx_ops_slice.c, onnx_ops_gen.c,
 * onnx_ops_select.c, onnx_ops_spectral.c, onnx_ops_text.c) but
 * are listed in onnx_ops_shape.c's and onnx_ops_index.c's tables.
 */
#ifndef TIDE_ONNX_OPS_MOVE_H
#define TIDE_ONNX_OPS_MOVE_H

#include "onnx_internal.h"

/* The device the model's tensors live on. */
const char *onnx_device_of(const onnx_ctx *c);
/* An int64 tensor of the given shape on the model's device. */
tide_tensor *onnx_int64_tensor(const onnx_ctx *c, const int64_t *v, int ndim,
                               const int64_t *shape);
/* idx as int64 with ONNX's negative indices wrapped: idx < 0 becomes idx + size, where size
 * (int64) broadcasts against idx. A new tensor, or NULL with the error set. */
tide_tensor *onnx_wrap_negative(const tide_tensor *idx, const tide_tensor *size);
/* The same with one size for every element. */
tide_tensor *onnx_wrap_negative_by(const onnx_ctx *c, const tide_tensor *idx, int64_t size);
/* onnx_axis for an op that indexes a dim of its input: a 0-D input (no dims) is an error. */
int onnx_dim_axis(const onnx_ctx *c, int64_t axis, int rank, int *out);
/* Input k must hold indices (int32 or int64): else an error naming the op. */
int onnx_check_index(const onnx_ctx *c, int k);
/* Releases n tensors (NULL-safe). */
void onnx_release_all(tide_tensor **ts, int n);

/* onnx_ops_slice.c */
int onnx_run_slice(onnx_ctx *c);
int onnx_run_split(onnx_ctx *c);
int onnx_check_pad(const onnx_node *n, char *why, size_t size);
int onnx_run_pad(onnx_ctx *c);

/* onnx_ops_gen.c */
int onnx_run_range(onnx_ctx *c);
int onnx_run_constant_of_shape(onnx_ctx *c);
int onnx_check_constant_of_shape(const onnx_node *n, char *why, size_t size);
int onnx_run_eye_like(onnx_ctx *c);
int onnx_check_eye_like(const onnx_node *n, char *why, size_t size);
int onnx_run_trilu(onnx_ctx *c);
int onnx_run_unique(onnx_ctx *c);

/* onnx_ops_select.c */
int onnx_run_non_max_suppression(onnx_ctx *c);

/* onnx_ops_spectral.c */
int onnx_run_dft(onnx_ctx *c);
int onnx_run_stft(onnx_ctx *c);
int onnx_run_hann_window(onnx_ctx *c);
int onnx_run_hamming_window(onnx_ctx *c);
int onnx_run_blackman_window(onnx_ctx *c);
int onnx_run_mel_weight_matrix(onnx_ctx *c);

/* onnx_ops_text.c */
int onnx_check_tfidf(const onnx_node *n, char *why, size_t size);
int onnx_run_tfidf(onnx_ctx *c);

#endif /* TIDE_ONNX_OPS_MOVE_H */
