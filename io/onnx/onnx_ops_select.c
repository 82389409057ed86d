/*
 * onnx_ops_select.c — ONNX's NonMaxSuppression: the greedy box-by-box choice runs on the host
 * over the boxes and scores read back (the result's size depends on the values). Listed in
 * onnx_ops_index.c's table.
 */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "onnx_ops_move.h"

/* ---- NonMaxSuppression ---------------------------------------------------------------------- */

typedef struct nms_box {
    float y1, x1, y2, x2; /* corners, y1 <= y2 and x1 <= x2 */
} nms_box;

static nms_box box_at(const float *b, bool center)
{
    nms_box r;
    if (center) { /* [x_center, y_center, width, height] */
        r.x1 = b[0] - b[2] / 2, r.x2 = b[0] + b[2] / 2;
        r.y1 = b[1] - b[3] / 2, r.y2 = b[1] + b[3] / 2;
    } else { /* [y1, x1, y2, x2], either diagonal */
        r.y1 = fminf(b[0], b[2]), r.y2 = fmaxf(b[0], b[2]);
        r.x1 = fminf(b[1], b[3]), r.x2 = fmaxf(b[1], b[3]);
    }
    return r;
}

/* Whether a and b overlap by more than threshold (intersection over union); boxes with no
 * area never suppress each other. */
static bool overlaps(nms_box a, nms_box b, float threshold)
{
    float ih = fminf(a.y2, b.y2) - fmaxf(a.y1, b.y1), iw = fminf(a.x2, b.x2) - fmaxf(a.x1, b.x1);
    if (ih <= 0 || iw <= 0)
        return false;
    float inter = ih * iw;
    float uni = (a.y2 - a.y1) * (a.x2 - a.x1) + (b.y2 - b.y1) * (b.x2 - b.x1) - inter;
    return uni > 0 && inter / uni > threshold;
}

static _Thread_local const float *nms_scores;

/* Higher score first; equal scores keep the lower box index first. */
static int by_score(const void *pa, const void *pb)
{
    int64_t a = *(const int64_t *)pa, b = *(const int64_t *)pb;
    if (nms_scores[a] != nms_scores[b])
        return nms_scores[a] > nms_scores[b] ? -1 : 1;
    return a < b ? -1 : a > b;
}

typedef struct nms_args {
    const float *boxes, *scores; /* [B, N, 4], [B, C, N] */
    int64_t nb, nc, n, max_out;
    float iou, score_min;
    bool has_score_min, center;
} nms_args;

/* The boxes kept for batch b, class k, appended to out as (b, k, box) rows. The row count. */
static int64_t nms_class(const nms_args *a, int64_t b, int64_t k, int64_t *order,
                         int64_t *kept, int64_t *out)
{
    const float *sc = a->scores + (b * a->nc + k) * a->n;
    int64_t cand = 0, nkept = 0;
    for (int64_t i = 0; i < a->n; i++)
        if (!a->has_score_min || sc[i] > a->score_min)
            order[cand++] = i;
    nms_scores = sc;
    qsort(order, (size_t)cand, sizeof *order, by_score);
    for (int64_t i = 0; i < cand && nkept < a->max_out; i++) {
        nms_box bi = box_at(a->boxes + (b * a->n + order[i]) * 4, a->center);
        bool keep = true;
        for (int64_t j = 0; j < nkept && keep; j++)
            keep = !overlaps(bi, box_at(a->boxes + (b * a->n + kept[j]) * 4, a->center), a->iou);
        if (keep) {
            kept[nkept] = order[i];
            out[3 * nkept] = b, out[3 * nkept + 1] = k, out[3 * nkept + 2] = order[i];
            nkept++;
        }
    }
    return nkept;
}

/* Input k (float32 on the host) into a new buffer of n floats. */
static float *read_floats(onnx_ctx *c, int k, int64_t n)
{
    float *buf = td_malloc(sizeof *buf * (size_t)(n + 1));
    tide_tensor *f = buf ? tide_cast(c->in[k], TIDE_FLOAT32) : NULL;
    if (!f || tide_to_buffer(f, buf, sizeof *buf * (size_t)(n + 1)) < 0) {
        free(buf);
        buf = NULL;
        onnx_fail(c);
    }
    tide_release(f);
    return buf;
}

/* The optional inputs: max boxes per class (0 when absent), IoU and score thresholds. */
static int nms_limits(onnx_ctx *c, nms_args *a)
{
    double v;
    a->max_out = 0;
    a->iou = 0;
    a->has_score_min = c->nin > 4 && c->in[4];
    int n;
    if (c->nin > 2 && c->in[2] && onnx_input_ints(c, 2, &a->max_out, 1, &n) < 0)
        return -1;
    if (c->nin > 3 && c->in[3]) {
        if (onnx_input_scalar(c, 3, &v) < 0)
            return -1;
        a->iou = (float)v;
    }
    if (a->has_score_min) {
        if (onnx_input_scalar(c, 4, &v) < 0)
            return -1;
        a->score_min = (float)v;
    }
    if (a->max_out < 0)
        a->max_out = 0;
    if (a->max_out > a->n)
        a->max_out = a->n;
    return 0;
}

int onnx_run_non_max_suppression(onnx_ctx *c)
{
    const tide_tensor *bx = c->in[0], *sc = c->in[1];
    if (tide_ndim(bx) != 3 || tide_ndim(sc) != 3 || tide_shape(bx)[2] != 4 ||
        tide_shape(sc)[0] != tide_shape(bx)[0] || tide_shape(sc)[2] != tide_shape(bx)[1])
        return onnx_error(c, "boxes must be [B, N, 4] and scores [B, C, N]");
    nms_args a = {.nb = tide_shape(bx)[0], .nc = tide_shape(sc)[1], .n = tide_shape(bx)[1],
                  .center = onnx_attr_int(c->node, "center_point_box", 0) != 0};
    if (nms_limits(c, &a) < 0)
        return -1;
    float *boxes = read_floats(c, 0, tide_numel(bx));
    float *scores = boxes ? read_floats(c, 1, tide_numel(sc)) : NULL;
    int64_t rows_max = a.nb * a.nc * a.max_out, rows = 0;
    int64_t *work = scores ? td_malloc(sizeof *work * (size_t)(2 * a.n + 3 * rows_max + 1))
                           : NULL;
    int rc = work ? 0 : scores ? onnx_fail(c) : -1;
    if (rc == 0) {
        a.boxes = boxes, a.scores = scores;
        int64_t *out = work + 2 * a.n;
        for (int64_t b = 0; b < a.nb; b++)
            for (int64_t k = 0; k < a.nc; k++)
                rows += nms_class(&a, b, k, work, work + a.n, out + 3 * rows);
        int64_t shape[2] = {rows, 3};
        rc = onnx_set(c, onnx_int64_tensor(c, out, 2, shape));
    }
    free(boxes);
    free(scores);
    free(work);
    return rc;
}
