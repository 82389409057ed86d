#version 450
// eltwise_v8.comp — eltwise_vec4.comp with 32-byte accesses (8 float32 per invocation, moved as
// u64vec4): on lavapipe each buffer access costs about the same whatever its width, so this
// runs ~2x the vec4 rate; used where the device has shaderInt64. The specialization constant is
// the op | 128 when input 0 is a single value | 256 when input 1 is.
#extension GL_GOOGLE_include_directive : require
#extension GL_ARB_gpu_shader_int64 : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint SPEC = 0u;
const uint OP = SPEC & 127u;
const bool SCALAR0 = (SPEC & 128u) != 0u;
const bool SCALAR1 = (SPEC & 256u) != 0u;

layout(std430, binding = 0) readonly buffer Params {
    uint n, op, nin, pad0;
    uint scalar[2];
    int in_base[2];  // in elements; multiples of 8 unless the input is a single value
    int out_base;    // a multiple of 8
} P;
layout(std430, binding = 1) buffer Out { u64vec4 o[]; };
layout(std430, binding = 2) readonly buffer In0 { u64vec4 a[]; };
layout(std430, binding = 3) readonly buffer In1 { u64vec4 b[]; };

vec4 lo4(u64vec4 v) { return vec4(uintBitsToFloat(unpackUint2x32(v.x)), uintBitsToFloat(unpackUint2x32(v.y))); }
vec4 hi4(u64vec4 v) { return vec4(uintBitsToFloat(unpackUint2x32(v.z)), uintBitsToFloat(unpackUint2x32(v.w))); }
uint64_t pack2(vec2 v) { return packUint2x32(floatBitsToUint(v)); }

float one(u64vec4 w, int i)
{
    uvec2 u = unpackUint2x32(w[(i >> 1) & 3]);
    return uintBitsToFloat((i & 1) != 0 ? u.y : u.x);
}

void main()
{
    uint g = group_index() * 256u + gl_LocalInvocationID.x;
    uint first = g * 8u;
    if (first >= P.n)
        return;
    int ia = P.in_base[0], ib = P.in_base[1];
    vec4 x0, x1, r0, r1;
    if (SCALAR0) {
        x0 = x1 = vec4(one(a[ia >> 3], ia));
    } else {
        u64vec4 w = a[(ia >> 3) + int(g)];
        x0 = lo4(w);
        x1 = hi4(w);
    }
    if (OP >= VK_OP_ADD && OP < VK_OP_WHERE) {
        vec4 y0, y1;
        if (SCALAR1) {
            y0 = y1 = vec4(one(b[ib >> 3], ib));
        } else {
            u64vec4 w = b[(ib >> 3) + int(g)];
            y0 = lo4(w);
            y1 = hi4(w);
        }
        r0 = binary_f(OP, x0, y0);
        r1 = binary_f(OP, x1, y1);
    } else {
        r0 = unary_f(OP, x0);
        r1 = unary_f(OP, x1);
    }
    int w = (P.out_base >> 3) + int(g);
    u64vec4 res = u64vec4(pack2(r0.xy), pack2(r0.zw), pack2(r1.xy), pack2(r1.zw));
    if (first + 8u <= P.n) {
        o[w] = res;
    } else {
        // the tail: whole pairs, then half of the last 64-bit word (this invocation's alone)
        for (uint k = 0u; k < 4u; k++) {
            uint e = first + 2u * k;
            if (e + 2u <= P.n) {
                o[w][k] = res[k];
            } else if (e < P.n) {
                uvec2 old = unpackUint2x32(o[w][k]);
                old.x = unpackUint2x32(res[k]).x;
                o[w][k] = packUint2x32(old);
            }
        }
    }
}
