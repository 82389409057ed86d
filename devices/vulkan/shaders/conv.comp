#version 450
// conv.comp — float32 conv2d (NCHW, stride, padding, dilation, groups) computed directly, and its
// two gradients: mode 0 forward (a thread per output element), mode 1 the input gradient (a
// thread per input element, gathering the windows that read it), mode 2 the weight gradient (a
// workgroup per weight element, a tree reduction over batch and positions). Inputs may have any
// strides.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
// the op (or mode), fixed when the pipeline is made: the driver compiles that case alone
layout(constant_id = 0) const uint SPEC = 0u;

layout(std430, binding = 0) readonly buffer Params {
    uint total, mode, N, C;
    uint H, W, O, OH;
    uint OW, KH, KW, groups;
    int sh, sw, ph, pw;
    int dh, dw, a_base, b_base;
    int sa[4], sb[4];
} P;
layout(std430, binding = 1) buffer Out { float o[]; };
layout(std430, binding = 2) readonly buffer InA { float a[]; };
layout(std430, binding = 3) readonly buffer InB { float b[]; };

shared float part[256];

void main()
{
    uint Cg = P.C / P.groups, Og = P.O / P.groups;
    if (SPEC == 2u) { // weight gradient: A = x, B = grad_out; out [O, Cg, KH, KW]
        uint g = group_index();
        if (g >= P.total) return;
        int kw = int(g % P.KW), kh = int((g / P.KW) % P.KH);
        uint c = (g / (P.KW * P.KH)) % Cg, oc = g / (P.KW * P.KH * Cg);
        uint xc = (oc / Og) * Cg + c;
        uint count = P.N * P.OH * P.OW;
        float acc = 0.0;
        for (uint t = gl_LocalInvocationID.x; t < count; t += 256u) {
            int ow = int(t % P.OW), oh = int((t / P.OW) % P.OH), n = int(t / (P.OW * P.OH));
            int ih = oh * P.sh - P.ph + kh * P.dh, iw = ow * P.sw - P.pw + kw * P.dw;
            if (ih < 0 || ih >= int(P.H) || iw < 0 || iw >= int(P.W)) continue;
            acc += a[P.a_base + n * P.sa[0] + int(xc) * P.sa[1] + ih * P.sa[2] + iw * P.sa[3]] *
                   b[P.b_base + n * P.sb[0] + int(oc) * P.sb[1] + oh * P.sb[2] + ow * P.sb[3]];
        }
        uint lid = gl_LocalInvocationID.x;
        part[lid] = acc;
        barrier();
        for (uint s = 128u; s > 0u; s >>= 1) {
            if (lid < s) part[lid] += part[lid + s];
            barrier();
        }
        if (lid == 0u) o[g] = part[0];
        return;
    }
    uint i = group_index() * 256u + gl_LocalInvocationID.x;
    if (i >= P.total) return;
    if (SPEC == 0u) { // forward: A = x, B = w; out [N, O, OH, OW]
        int ow = int(i % P.OW), oh = int((i / P.OW) % P.OH);
        uint oc = (i / (P.OW * P.OH)) % P.O, n = i / (P.OW * P.OH * P.O);
        uint c0 = (oc / Og) * Cg;
        float acc = 0.0;
        for (uint c = 0u; c < Cg; c++)
            for (int kh = 0; kh < int(P.KH); kh++) {
                int ih = oh * P.sh - P.ph + kh * P.dh;
                if (ih < 0 || ih >= int(P.H)) continue;
                for (int kw = 0; kw < int(P.KW); kw++) {
                    int iw = ow * P.sw - P.pw + kw * P.dw;
                    if (iw < 0 || iw >= int(P.W)) continue;
                    acc += a[P.a_base + int(n) * P.sa[0] + int(c0 + c) * P.sa[1] + ih * P.sa[2] +
                             iw * P.sa[3]] *
                           b[P.b_base + int(oc) * P.sb[0] + int(c) * P.sb[1] + kh * P.sb[2] +
                             kw * P.sb[3]];
                }
            }
        o[i] = acc;
        return;
    }
    // input gradient: A = grad_out [N, O, OH, OW], B = w; out [N, C, H, W]
    int iw = int(i % P.W), ih = int((i / P.W) % P.H);
    uint xc = (i / (P.W * P.H)) % P.C, n = i / (P.W * P.H * P.C);
    uint grp = xc / Cg, c = xc % Cg;
    float acc = 0.0;
    for (uint k = 0u; k < Og; k++) {
        uint oc = grp * Og + k;
        for (int kh = 0; kh < int(P.KH); kh++) {
            int th = ih + P.ph - kh * P.dh;
            if (th < 0 || th % P.sh != 0) continue;
            int oh = th / P.sh;
            if (oh >= int(P.OH)) continue;
            for (int kw = 0; kw < int(P.KW); kw++) {
                int tw = iw + P.pw - kw * P.dw;
                if (tw < 0 || tw % P.sw != 0) continue;
                int ow = tw / P.sw;
                if (ow >= int(P.OW)) continue;
                acc += a[P.a_base + int(n) * P.sa[0] + int(oc) * P.sa[1] + oh * P.sa[2] + ow * P.sa[3]] *
                       b[P.b_base + int(oc) * P.sb[0] + int(c) * P.sb[1] + kh * P.sb[2] + kw * P.sb[3]];
            }
        }
    }
    o[i] = acc;
}
