/*
 * strided_views.h — the backward helpers of the DIAGONAL and UNFOLD views (ops/strided_views.c),
 * written with public ops so autograd/formulas.c can call them like any formula.
 */
#ifndef TIDE_STRIDED_VIEWS_H
#define TIDE_STRIDED_VIEWS_H

#include "dispatch.h"

/* g (the diagonal's gradient, [rest..., L]) placed on the offset-th diagonal of dims (d1, d2) of
 * a zero tensor of the input's shape (ndim, shape). A new reference or NULL. */
tide_tensor *td_diagonal_grad(const tide_tensor *g, int ndim, const int64_t *shape,
                              int64_t offset, int d1, int d2);
/* g (unfold's gradient: [..., windows at dim, ..., size]) summed back into the input's shape:
 * element j of window w goes to position w * step + j along dim. */
tide_tensor *td_unfold_grad(const tide_tensor *g, int ndim, const int64_t *shape, int dim,
                            int64_t size, int64_t step);

#endif
