/*
 * onnx_window.h — the sliding-window geometry Conv, ConvTranspose and the pools share: kernel,
 * strides, dilations, explicit pads or auto_pad, and the output size they give (onnx_window.c).
 */
#ifndef TIDE_ONNX_WINDOW_H
#define TIDE_ONNX_WINDOW_H

#include "onnx_internal.h"

#define ONNX_MAX_SPATIAL 3

typedef struct onnx_window {
    int nd;                                       /* spatial dims (1..3) */
    int64_t in[ONNX_MAX_SPATIAL];                 /* input spatial sizes */
    int kernel[ONNX_MAX_SPATIAL], stride[ONNX_MAX_SPATIAL], dilation[ONNX_MAX_SPATIAL];
    int64_t begin[ONNX_MAX_SPATIAL], end[ONNX_MAX_SPATIAL]; /* pads before and after */
    int64_t out[ONNX_MAX_SPATIAL];                /* output spatial sizes */
} onnx_window;

/* Reads the window of node c over x [N, C, spatial...]: kernel from kernel_shape (or from
 * kernel, the weight's spatial dims, when not NULL), strides, dilations, pads / auto_pad, and
 * computes the output size (ceil_mode as PyTorch: a last window starting in the end padding is
 * dropped). 0, or -1 with the error set. */
int onnx_window_read(const onnx_ctx *c, const tide_tensor *x, const int64_t *kernel,
                     bool ceil_mode, onnx_window *w);
/* Whether pads are equal before and after in every dim. */
bool onnx_window_symmetric(const onnx_window *w);
/* The int pads (one a dim) for tide's symmetric-padding ops. */
void onnx_window_pads(const onnx_window *w, int *pads);
/* x padded with value so that every window of w lies inside it (pads before, and after up to the
 * last window's end; cut when the pads after reach past it). */
tide_tensor *onnx_window_pad(const onnx_window *w, const tide_tensor *x, double value);
/* check for Conv/pools: auto_pad is NOTSET, SAME_UPPER, SAME_LOWER or VALID. */
int onnx_check_auto_pad(const onnx_node *n, char *why, size_t size);

#endif
