/*
 * onnx_ops_text.c — ONNX's TfIdfVectorizer over integer tokens, in TF mode: counts of the
 * n-grams of a pool (pool_int64s) in each row of the input, skips allowed, on the host (a
 * lookup of short token runs; the input is read back). Listed in onnx_ops_index.c's table.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_ops_move.h"

/* The pool: pool[starts[n - 1] ..) holds the n-grams (n tokens each) up to the next section;
 * the i-th n-gram of the whole pool counts into output index[i]. */
typedef struct tfidf_pool {
    const int64_t *pool, *starts, *index;
    int npool, nstarts, nindex;
    int64_t width; /* output entries per row: max(index) + 1 */
} tfidf_pool;

int onnx_check_tfidf(const onnx_node *n, char *why, size_t size)
{
    char buf[16];
    const char *mode = onnx_attr_string(n, "mode", "", buf, sizeof buf);
    if (strcmp(mode, "TF")) {
        snprintf(why, size, "TfIdfVectorizer mode '%s' is not supported (TF is)", mode);
        return 1;
    }
    if (onnx_attr(n, "pool_strings")) {
        snprintf(why, size, "TfIdfVectorizer over strings is not supported");
        return 1;
    }
    return 0;
}

/* The pool's attributes, checked against each other. */
static int read_pool(onnx_ctx *c, tfidf_pool *p)
{
    p->pool = onnx_attr_ints(c->node, "pool_int64s", &p->npool);
    p->starts = onnx_attr_ints(c->node, "ngram_counts", &p->nstarts);
    p->index = onnx_attr_ints(c->node, "ngram_indexes", &p->nindex);
    int64_t grams = 0;
    for (int s = 0; s < p->nstarts; s++) {
        int64_t from = p->starts[s], to = s + 1 < p->nstarts ? p->starts[s + 1] : p->npool;
        if (from < 0 || to < from || to > p->npool || (to - from) % (s + 1))
            return onnx_error(c, "ngram_counts[%d] = %lld does not split pool_int64s (%d "
                              "tokens) into %d-grams", s, (long long)from, p->npool, s + 1);
        grams += (to - from) / (s + 1);
    }
    if (grams != p->nindex)
        return onnx_error(c, "the pool holds %lld n-grams and ngram_indexes %d entries",
                          (long long)grams, p->nindex);
    p->width = 0;
    for (int i = 0; i < p->nindex; i++) {
        if (p->index[i] < 0 || p->index[i] >= (1 << 24))
            return onnx_error(c, "ngram_indexes[%d] is %lld", i, (long long)p->index[i]);
        if (p->index[i] + 1 > p->width)
            p->width = p->index[i] + 1;
    }
    return 0;
}

/* The output index of the n-gram row[0], row[step], ... (n tokens), or -1 when the pool has
 * no such n-gram. */
static int64_t find_gram(const tfidf_pool *p, const int64_t *row, int64_t n, int64_t step)
{
    if (n > p->nstarts)
        return -1;
    int64_t from = p->starts[n - 1], to = n < p->nstarts ? p->starts[n] : p->npool;
    int64_t ordinal = 0;
    for (int64_t s = 0; s < n - 1; s++) /* n-grams in the sections before */
        ordinal += ((s + 1 < p->nstarts ? p->starts[s + 1] : p->npool) - p->starts[s]) / (s + 1);
    for (int64_t g = from; g < to; g += n, ordinal++) {
        int64_t k = 0;
        while (k < n && p->pool[g + k] == row[k * step])
            k++;
        if (k == n)
            return p->index[ordinal];
    }
    return -1;
}

/* Adds the counts of one row (len tokens) into out (p->width entries). */
static void count_row(const tfidf_pool *p, const int64_t *row, int64_t len, int64_t min_n,
                      int64_t max_n, int64_t max_skip, float *out)
{
    for (int64_t n = min_n; n <= max_n; n++)
        for (int64_t skip = 0; skip <= (n == 1 ? 0 : max_skip); skip++) /* unigrams once */
            for (int64_t s = 0; s + (n - 1) * (skip + 1) < len; s++) {
                int64_t at = find_gram(p, row + s, n, skip + 1);
                if (at >= 0)
                    out[at] += 1;
            }
}

int onnx_run_tfidf(onnx_ctx *c)
{
    const tide_tensor *x = c->in[0];
    tfidf_pool p;
    int64_t min_n = onnx_attr_int(c->node, "min_gram_length", 0);
    int64_t max_n = onnx_attr_int(c->node, "max_gram_length", 0);
    int64_t max_skip = onnx_attr_int(c->node, "max_skip_count", 0);
    if (onnx_check_index(c, 0) < 0 || read_pool(c, &p) < 0)
        return -1;
    if (tide_ndim(x) < 1 || tide_ndim(x) > 2 || min_n < 1 || max_n < min_n || max_skip < 0)
        return onnx_error(c, "a %d-D input, gram lengths [%lld, %lld], max_skip_count %lld",
                          tide_ndim(x), (long long)min_n, (long long)max_n, (long long)max_skip);
    int64_t rows = tide_ndim(x) == 2 ? tide_shape(x)[0] : 1, len = tide_shape(x)[tide_ndim(x) - 1];
    int64_t *tokens = td_malloc(sizeof *tokens * (size_t)(rows * len + 1));
    float *out = tokens ? td_calloc((size_t)(rows * p.width + 1), sizeof *out) : NULL;
    tide_tensor *wide = out ? tide_cast(x, TIDE_INT64) : NULL;
    int rc = wide && tide_to_buffer(wide, tokens, sizeof *tokens * (size_t)(rows * len + 1)) == 0
                 ? 0 : onnx_fail(c);
    for (int64_t r = 0; r < rows && rc == 0; r++)
        count_row(&p, tokens + r * len, len, min_n, max_n, max_skip, out + r * p.width);
    int64_t shape[2] = {rows, p.width};
    int nd = tide_ndim(x);
    tide_tensor *y = rc == 0 ? tide_from_data_on(onnx_device_of(c), out, nd,
                                                 nd == 2 ? shape : shape + 1, TIDE_FLOAT32)
                             : NULL;
    tide_release(wide);
    free(tokens);
    free(out);
    return rc < 0 ? rc : onnx_set(c, y);
}
