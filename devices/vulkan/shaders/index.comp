#version 450
// index.comp — the indexing primitives over 32-bit elements (float32, int32) with int64 or int32
// indices, any strides: mode 0 checks every index against its bound (a flag word is set when one
// is out of range: the host then lets the CPU kernel report which), 1 gather, 2 index_select,
// 3 scatter_add (atomic adds: compare-and-swap for float32).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
// the op (or mode), fixed when the pipeline is made: the driver compiles that case alone
layout(constant_id = 0) const uint SPEC = 0u;

layout(std430, binding = 0) readonly buffer Params {
    uint mode, n, ndim, dim;
    uint bound, idx64, is_float, pad0;
    int shape[8];  // the shape iterated over, row-major, dim 0 outermost
    int xst[8];    // x's strides (the output's for scatter_add)
    int ist[8];    // the index's strides
    int sst[8];    // src's strides (scatter_add)
    int x_base, i_base, s_base, out_base;
} P;
layout(std430, binding = 1) buffer Out { uint o[]; };
layout(std430, binding = 2) readonly buffer X { uint x[]; };
layout(std430, binding = 3) readonly buffer I { uint idx[]; };
layout(std430, binding = 4) readonly buffer S { uint src[]; };

void main()
{
    uint i = group_index() * 256u + gl_LocalInvocationID.x;
    if (i >= P.n) return;
    int coord[8];
    uint rest = i;
    for (int d = int(P.ndim) - 1; d >= 0; d--) {
        uint s = uint(P.shape[d]);
        coord[d] = int(rest % s);
        rest /= s;
    }
    if (SPEC == 2u) { // index_select: i runs over out = x's shape with dim -> len(index)
        int io = P.i_base + coord[P.dim] * P.ist[0];
        uint v = P.idx64 != 0u ? idx[2 * io] : idx[io];
        int xo = P.x_base;
        for (uint d = 0u; d < P.ndim; d++)
            xo += (d == P.dim ? int(v) : coord[d]) * P.xst[d];
        o[P.out_base + int(i)] = x[xo];
        return;
    }
    int io = P.i_base;
    for (uint d = 0u; d < P.ndim; d++)
        io += coord[d] * P.ist[d];
    uint lo = P.idx64 != 0u ? idx[2 * io] : idx[io];
    if (SPEC == 0u) {
        bool bad = P.idx64 != 0u ? (idx[2 * io + 1] != 0u || lo >= P.bound)
                                 : (int(lo) < 0 || lo >= P.bound);
        if (bad) o[0] = 1u;
        return;
    }
    int xo = 0;
    for (uint d = 0u; d < P.ndim; d++)
        xo += (d == P.dim ? int(lo) : coord[d]) * P.xst[d];
    if (SPEC == 1u) { // gather: i runs over out = the index's shape
        o[P.out_base + int(i)] = x[P.x_base + xo];
        return;
    }
    // scatter_add: i runs over the index (and src); out was filled with x before
    int so = P.s_base;
    for (uint d = 0u; d < P.ndim; d++)
        so += coord[d] * P.sst[d];
    uint add = src[so];
    int t = P.out_base + xo;
    if (P.is_float == 0u) {
        atomicAdd(o[t], add);
        return;
    }
    uint old = o[t];
    for (;;) {
        uint want = floatBitsToUint(uintBitsToFloat(old) + uintBitsToFloat(add));
        uint seen = atomicCompSwap(o[t], old, want);
        if (seen == old) break;
        old = seen;
    }
}
