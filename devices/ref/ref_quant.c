/*
 * ref_quant.c — quantized weights from their definitions (core/quant.h): quantize and
 * dequantize block by block through core/quant.h (so every device stores the same bytes), and
 * qlinear as its stated numerics: activations quantized per block to int8 with float32 scales,
 * each element's products w*x summed exactly as integers per block, the blocks' terms
 * (weight scale * activation scale * integer sum) added in double and rounded once.
 */
#include "../../core/quant.h"
#include "ref_internal.h"

int ref_quantize(tide_tensor *out, const tide_tensor *w, int fmt)
{
    const float *x = td_tensor_data(w);
    uint8_t *q = td_tensor_data(out);
    int64_t nblocks = ref_numel(w) / TD_QBLOCK;
    for (int64_t b = 0; b < nblocks; b++)
        td_quantize_block(fmt, x + b * TD_QBLOCK, q + b * td_qblock_bytes(fmt));
    return 0;
}

int ref_dequantize(tide_tensor *out, const tide_tensor *q, int fmt)
{
    const uint8_t *src = td_tensor_data(q);
    float *y = td_tensor_data(out);
    int64_t nblocks = ref_numel(out) / TD_QBLOCK;
    for (int64_t b = 0; b < nblocks; b++)
        td_dequantize_block(fmt, src + b * td_qblock_bytes(fmt), y + b * TD_QBLOCK);
    return 0;
}

/* One output: weight row w . activation row (x) over nb blocks. */
static float qdot(int fmt, int64_t nb, const uint8_t *w, const float *x)
{
    double acc = 0;
    for (int64_t b = 0; b < nb; b++, w += td_qblock_bytes(fmt), x += TD_QBLOCK) {
        int8_t xq[TD_QBLOCK], wi[TD_QBLOCK];
        float dx = td_qact_block(x, xq);
        td_qblock_ints(fmt, w, wi);
        int64_t s = 0;
        for (int i = 0; i < TD_QBLOCK; i++)
            s += (int64_t)wi[i] * xq[i];
        acc += (double)td_qblock_scale(w) * (double)dx * (double)s;
    }
    return (float)acc;
}

int ref_qlinear(tide_tensor *out, const tide_tensor *x, const tide_tensor *q, int fmt)
{
    int64_t m = x->shape[0], k = x->shape[1], n = q->shape[0];
    const float *xs = td_tensor_data(x);
    const uint8_t *ws = td_tensor_data(q);
    float *y = td_tensor_data(out);
    for (int64_t i = 0; i < m; i++)
        for (int64_t r = 0; r < n; r++)
            y[i * n + r] = qdot(fmt, k / TD_QBLOCK, ws + r * q->shape[1], xs + i * k);
    return 0;
}
