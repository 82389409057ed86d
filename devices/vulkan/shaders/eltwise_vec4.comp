#version 450
// eltwise_vec4.comp — float32 unary and binary ops (and the float32 copy) whose operands are
// contiguous or single values: 16-byte loads and stores, about 3x the scalar rate on lavapipe.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
// the op | 128 when input 0 is a single value | 256 when input 1 is, fixed when the pipeline is
// made: the driver compiles that case alone
layout(constant_id = 0) const uint SPEC = 0u;
const uint OP = SPEC & 127u;
const bool SCALAR0 = (SPEC & 128u) != 0u;
const bool SCALAR1 = (SPEC & 256u) != 0u;

layout(std430, binding = 0) readonly buffer Params {
    uint n, op, nin, pad0;
    uint scalar[2];  // input k is one value (broadcast)
    int in_base[2];  // in elements; a multiple of 4 unless the input is a single value
    int out_base;    // a multiple of 4
} P;
layout(std430, binding = 1) buffer Out { vec4 o[]; };
layout(std430, binding = 2) readonly buffer In0 { vec4 a[]; };
layout(std430, binding = 3) readonly buffer In1 { vec4 b[]; };

void main()
{
    uint g = group_index() * 256u + gl_LocalInvocationID.x;
    uint first = g * 4u;
    if (first >= P.n)
        return;
    int ia = P.in_base[0], ib = P.in_base[1];
    vec4 x, r;
    if (SCALAR0) // statements, not ?:, so only one of the loads is made
        x = vec4(a[ia >> 2][ia & 3]);
    else
        x = a[(ia >> 2) + int(g)];
    if (OP >= VK_OP_ADD && OP < VK_OP_WHERE) {
        vec4 y;
        if (SCALAR1)
            y = vec4(b[ib >> 2][ib & 3]);
        else
            y = b[(ib >> 2) + int(g)];
        r = binary_f(OP, x, y);
    } else {
        r = unary_f(OP, x);
    }
    int w = (P.out_base >> 2) + int(g);
    if (first + 4u <= P.n) {
        o[w] = r;
    } else {
        for (uint j = 0u; first + j < P.n; j++)
            o[w][j] = r[j];
    }
}
