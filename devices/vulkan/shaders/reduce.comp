#version 450
// reduce.comp — float32 sum/prod/max/min over any set of dims, and argmax/argmin along one,
// as workgroup tree reductions. Kept dims are decoded from the output index, reduced dims from
// the position in the reduction; both with any strides. Mode 0: a workgroup reduces one chunk
// of one output (chunks > 1: partial results for a second pass). Mode 1: a thread reduces one
// whole output (many outputs, short reductions).
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
// the op (or mode), fixed when the pipeline is made: the driver compiles that case alone
layout(constant_id = 0) const uint SPEC = 0u;

layout(std430, binding = 0) readonly buffer Params {
    uint nout, nred, op, mode;
    uint nkept, nreduced, chunk, nchunks;
    int kshape[8], kst[8];  // innermost first
    int rshape[8], rst[8];
    int in_base, pad0, pad1, pad2;
} P;
layout(std430, binding = 1) buffer Out { uint o[]; };
layout(std430, binding = 2) readonly buffer In0 { float a[]; };

shared float sv[256];
shared uint si[256];

float ident(uint op)
{
    if (op == VK_RED_SUM) return 0.0;
    if (op == VK_RED_PROD) return 1.0;
    if (op == VK_RED_MAX || op == VK_RED_ARGMAX) return uintBitsToFloat(0xff800000u); // -inf
    return uintBitsToFloat(0x7f800000u);
}

float combine(uint op, float x, float y)
{
    if (op == VK_RED_SUM) return x + y;
    if (op == VK_RED_PROD) return x * y;
    if (op == VK_RED_MAX) return (isnan(x) || x >= y) ? x : y;
    return (isnan(x) || x <= y) ? x : y;
}

// (x, i) beats (y, j) for argmax/argmin: the first NaN wins, then the best value, then the
// lower position.
bool better(uint op, float x, uint i, float y, uint j)
{
    bool nx = isnan(x), ny = isnan(y);
    if (nx || ny) return nx && (!ny || i < j);
    if (x == y) return i < j;
    return op == VK_RED_ARGMAX ? x > y : x < y;
}

int out_offset(uint oi)
{
    int off = P.in_base;
    uint rest = oi;
    for (uint d = 0u; d < P.nkept; d++) {
        uint s = uint(P.kshape[d]);
        off += int(rest % s) * P.kst[d];
        rest /= s;
    }
    return off;
}

int red_offset(uint r)
{
    if (P.nreduced == 1u) return int(r) * P.rst[0];
    int off = 0;
    uint rest = r;
    for (uint d = 0u; d < P.nreduced; d++) {
        uint s = uint(P.rshape[d]);
        off += int(rest % s) * P.rst[d];
        rest /= s;
    }
    return off;
}

void store(uint slot, float v, uint idx)
{
    if (SPEC >= VK_RED_ARGMAX) { // int64 positions
        o[2u * slot] = idx;
        o[2u * slot + 1u] = 0u;
    } else {
        o[slot] = floatBitsToUint(v);
    }
}

void main()
{
    uint op = SPEC;
    bool arg = op >= VK_RED_ARGMAX;
    uint lid = gl_LocalInvocationID.x;
    if (P.mode == 1u) {
        uint oi = group_index() * 256u + lid;
        if (oi >= P.nout) return;
        int base = out_offset(oi);
        float acc = ident(op);
        uint best = 0u;
        for (uint r = 0u; r < P.nred; r++) {
            float v = a[base + red_offset(r)];
            if (arg) {
                if (r == 0u || better(op, v, r, acc, best)) { acc = v; best = r; }
            } else {
                acc = combine(op, acc, v);
            }
        }
        store(oi, acc, best);
        return;
    }
    uint g = group_index();
    if (g >= P.nout * P.nchunks) return;
    uint oi = g / P.nchunks, ch = g % P.nchunks;
    uint r0 = ch * P.chunk, r1 = min(P.nred, r0 + P.chunk);
    int base = out_offset(oi);
    float acc = ident(op);
    uint best = 0xffffffffu;
    for (uint r = r0 + lid; r < r1; r += 256u) {
        float v = a[base + red_offset(r)];
        if (arg) {
            if (best == 0xffffffffu || better(op, v, r, acc, best)) { acc = v; best = r; }
        } else {
            acc = combine(op, acc, v);
        }
    }
    sv[lid] = acc;
    si[lid] = best;
    barrier();
    for (uint s = 128u; s > 0u; s >>= 1) {
        if (lid < s) {
            if (arg) {
                uint j = si[lid + s];
                if (j != 0xffffffffu &&
                    (si[lid] == 0xffffffffu || better(op, sv[lid + s], j, sv[lid], si[lid]))) {
                    sv[lid] = sv[lid + s];
                    si[lid] = j;
                }
            } else {
                sv[lid] = combine(op, sv[lid], sv[lid + s]);
            }
        }
        barrier();
    }
    if (lid == 0u)
        store(g, sv[0], si[0]);
}
