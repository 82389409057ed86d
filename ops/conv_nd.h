/*
 * conv_nd.h — what conv_nd.c (conv1d/3d, conv_transpose1d/2d/3d) shares with pool_nd.c (the
 * 1-D/3-D pools, adaptive pools, unfold/fold): sliding windows along one dim as views and pads,
 * so that the 1-D and 3-D ops are composites of the 2-D primitives (and of slice, pad, cat),
 * which autograd, the jit and every device already know.
 */
#ifndef TIDE_OPS_CONV_ND_H
#define TIDE_OPS_CONV_ND_H

#include "dispatch.h"

/* "[2, 3, 8] float32" into buf. */
const char *td_describe(char *buf, size_t size, const tide_tensor *t);

/* x padded along dim by before and after (negative values crop) with value. */
tide_tensor *td_pad_dim(const tide_tensor *x, int dim, int64_t before, int64_t after,
                        double value);

/* The n elements i*dil, i*dil + stride, ... along dim: the inputs the i-th kernel tap of a
 * sliding window reads for n outputs (a strided slice view). */
tide_tensor *td_window_slice(const tide_tensor *x, int dim, int64_t i, int64_t dil,
                             int64_t stride, int64_t n);

/* The adjoint of a window slice: y's elements j along dim placed at offset + j*stride of a
 * dim of length total, zeros elsewhere; positions outside [0, total) are dropped. */
tide_tensor *td_window_place(const tide_tensor *y, int dim, int64_t offset, int64_t stride,
                             int64_t total);

/* The output length of a sliding window over in (+ pad on both sides), or -1 when the dilated
 * kernel does not fit. */
int64_t td_window_out_len(int64_t in, int64_t k, int64_t stride, int64_t pad, int64_t dil);

/* nd values of a user's array (dflt when v is NULL) into out, each at least min, else an error
 * naming op and what. */
int td_read_ints(const char *op, const char *what, const int *v, int nd, int dflt, int min,
                 int64_t *out);

#endif
