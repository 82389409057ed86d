/* indexing.c — placeholder until this file is written: every function reports that it is not
 * implemented yet. */
#include "dispatch.h"

tide_tensor *tide_gather(const tide_tensor *x, int dim, const tide_tensor *index)
{
    (void)x;
    (void)dim;
    (void)index;
    td_error("gather: not implemented yet");
    return NULL;
}

tide_tensor *tide_scatter_add(const tide_tensor *x, int dim, const tide_tensor *index, const tide_tensor *src)
{
    (void)x;
    (void)dim;
    (void)index;
    (void)src;
    td_error("scatter_add: not implemented yet");
    return NULL;
}

tide_tensor *tide_index_select(const tide_tensor *x, int dim, const tide_tensor *index)
{
    (void)x;
    (void)dim;
    (void)index;
    td_error("index_select: not implemented yet");
    return NULL;
}

tide_tensor *tide_embedding(const tide_tensor *weight, const tide_tensor *indices)
{
    (void)weight;
    (void)indices;
    td_error("embedding: not implemented yet");
    return NULL;
}

tide_tensor *tide_one_hot(const tide_tensor *indices, int64_t num_classes)
{
    (void)indices;
    (void)num_classes;
    td_error("one_hot: not implemented yet");
    return NULL;
}

tide_tensor *tide_masked_fill(const tide_tensor *x, const tide_tensor *mask, double value)
{
    (void)x;
    (void)mask;
    (void)value;
    td_error("masked_fill: not implemented yet");
    return NULL;
}
