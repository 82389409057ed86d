#version 450
// pool.comp — float32 max pooling (values or int64 positions in the H*W plane), average
// pooling, and the average-pool gradient, NCHW with any input strides; one thread per output
// element. Windows are clipped to the plane exactly as on the CPU: padding acts as -inf for max
// and counts in the divisor only with count_include_pad; NaN propagates, ties keep the first.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
// the op (or mode), fixed when the pipeline is made: the driver compiles that case alone
layout(constant_id = 0) const uint SPEC = 0u;

layout(std430, binding = 0) readonly buffer Params {
    uint total, op, C, H;
    uint W, OH, OW, cip;
    int kh, kw, sh, sw;
    int ph, pw, in_base, pad0;
    int s[4]; // the input's (grad_out's for the gradient) strides
} P;
layout(std430, binding = 1) buffer Out { uint o[]; };
layout(std430, binding = 2) readonly buffer In0 { float x[]; };

// the window of output (oh, ow) clipped to the plane, and the divisor of an average over it
int window_of(int oh, int ow, out int hs, out int he, out int ws, out int we)
{
    int h0 = oh * P.sh - P.ph, w0 = ow * P.sw - P.pw;
    int h1 = min(h0 + P.kh, int(P.H) + P.ph), w1 = min(w0 + P.kw, int(P.W) + P.pw);
    int padded = (h1 - h0) * (w1 - w0);
    hs = max(h0, 0);
    ws = max(w0, 0);
    he = min(h1, int(P.H));
    we = min(w1, int(P.W));
    return P.cip != 0u ? padded : (he - hs) * (we - ws);
}

void main()
{
    uint i = group_index() * 256u + gl_LocalInvocationID.x;
    if (i >= P.total) return;
    if (SPEC == 3u) { // average-pool gradient: i indexes the input plane [N, C, H, W]
        int iw = int(i % P.W), ih = int((i / P.W) % P.H);
        uint plane = i / (P.W * P.H);
        int n = int(plane / P.C), c = int(plane % P.C);
        int base = P.in_base + n * P.s[0] + c * P.s[1];
        // windows containing (ih, iw): oh*sh - ph <= ih < oh*sh - ph + kh
        int oh0 = max(0, (ih + P.ph - P.kh + P.sh) / P.sh), oh1 = min(int(P.OH) - 1, (ih + P.ph) / P.sh);
        int ow0 = max(0, (iw + P.pw - P.kw + P.sw) / P.sw), ow1 = min(int(P.OW) - 1, (iw + P.pw) / P.sw);
        if (ih + P.ph - P.kh + P.sh < 0) oh0 = 0;
        if (iw + P.pw - P.kw + P.sw < 0) ow0 = 0;
        float acc = 0.0;
        for (int oh = oh0; oh <= oh1; oh++)
            for (int ow = ow0; ow <= ow1; ow++) {
                int hs, he, ws, we;
                int div = window_of(oh, ow, hs, he, ws, we);
                if (ih >= hs && ih < he && iw >= ws && iw < we)
                    acc += x[base + oh * P.s[2] + ow * P.s[3]] / float(div);
            }
        o[i] = floatBitsToUint(acc);
        return;
    }
    int ow = int(i % P.OW), oh = int((i / P.OW) % P.OH);
    uint plane = i / (P.OW * P.OH);
    int n = int(plane / P.C), c = int(plane % P.C);
    int base = P.in_base + n * P.s[0] + c * P.s[1];
    int hs, he, ws, we;
    int div = window_of(oh, ow, hs, he, ws, we);
    if (SPEC == 2u) {
        float sum = 0.0;
        for (int ih = hs; ih < he; ih++)
            for (int iw = ws; iw < we; iw++)
                sum += x[base + ih * P.s[2] + iw * P.s[3]];
        o[i] = floatBitsToUint(sum / float(div));
        return;
    }
    float best = uintBitsToFloat(0xff800000u);
    int at = hs * int(P.W) + ws;
    for (int ih = hs; ih < he; ih++)
        for (int iw = ws; iw < we; iw++) {
            float v = x[base + ih * P.s[2] + iw * P.s[3]];
            if (v > best || isnan(v)) {
                best = v;
                at = ih * int(P.W) + iw;
            }
        }
    if (SPEC == 1u) {
        o[2u * i] = uint(at);
        o[2u * i + 1u] = 0u;
    } else {
        o[i] = floatBitsToUint(best);
    }
}
