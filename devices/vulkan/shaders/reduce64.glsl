// reduce64.glsl — the body of reduce_i64.comp and reduce_f64.comp: reduce.comp's tree
// reductions for integer and float64 inputs, accumulating in VT (int64_t or double). Integer
// sums and products wrap in 64 bits as on the CPU. Inputs: float64, int64, int32, uint8, bool;
// outputs: int64, float64 or int32 (max/min of int32), or int64 positions (argmax/argmin).
#extension GL_GOOGLE_include_directive : require
#extension GL_ARB_gpu_shader_int64 : require
#include "common.glsl"

layout(local_size_x = 256) in;
// the op (or mode), fixed when the pipeline is made: the driver compiles that case alone
layout(constant_id = 0) const uint SPEC = 0u;

layout(std430, binding = 0) readonly buffer Params {
    uint nout, nred, op, mode;
    uint nkept, nreduced, chunk, nchunks;
    int kshape[8], kst[8];
    int rshape[8], rst[8];
    int in_base, in_dt, out_dt, pad0;
} P;
layout(std430, binding = 1) buffer Out { uint o[]; };
layout(std430, binding = 2) readonly buffer In0 { uint a[]; };

DEFINE_LOAD(load_raw, a)

shared VT sv[256];
shared uint si[256];

VT load(int i)
{
    uint dt = uint(P.in_dt);
    if (dt == VK_DT_I64 || dt == VK_DT_F64) {
        uvec2 w = uvec2(a[2 * i], a[2 * i + 1]);
#ifdef IS_FLOAT
        return packDouble2x32(w);
#else
        return int64_t(packUint2x32(w));
#endif
    }
    uint raw = load_raw(i, dt);
    if (dt == VK_DT_I32) return VT(int(raw));
    if (dt == VK_DT_BOOL) return VT(raw != 0u ? 1 : 0);
    return VT(raw);
}

VT ident(uint op)
{
    if (op == VK_RED_SUM) return VT(0);
    if (op == VK_RED_PROD) return VT(1);
#ifdef IS_FLOAT
    if (op == VK_RED_MAX || op == VK_RED_ARGMAX) return packDouble2x32(uvec2(0u, 0xfff00000u));
    return packDouble2x32(uvec2(0u, 0x7ff00000u));
#else
    if (op == VK_RED_MAX || op == VK_RED_ARGMAX) return int64_t(0x8000000000000000ul);
    return int64_t(0x7ffffffffffffffful);
#endif
}

bool nan_(VT x)
{
#ifdef IS_FLOAT
    return isnan(x);
#else
    return false;
#endif
}

VT combine(uint op, VT x, VT y)
{
    if (op == VK_RED_SUM) return x + y;
    if (op == VK_RED_PROD) return x * y;
    if (op == VK_RED_MAX) return (nan_(x) || x >= y) ? x : y;
    return (nan_(x) || x <= y) ? x : y;
}

bool better(uint op, VT x, uint i, VT y, uint j)
{
    bool nx = nan_(x), ny = nan_(y);
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

void store(uint slot, VT v, uint idx)
{
    uint dt = uint(P.out_dt);
    if (SPEC >= VK_RED_ARGMAX) {
        o[2u * slot] = idx;
        o[2u * slot + 1u] = 0u;
    } else if (dt == VK_DT_I32) {
        o[slot] = uint(int(v));
    } else {
#ifdef IS_FLOAT
        uvec2 w = unpackDouble2x32(v);
#else
        uvec2 w = unpackUint2x32(uint64_t(v));
#endif
        o[2u * slot] = w.x;
        o[2u * slot + 1u] = w.y;
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
        VT acc = ident(op);
        uint best = 0u;
        for (uint r = 0u; r < P.nred; r++) {
            VT v = load(base + red_offset(r));
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
    VT acc = ident(op);
    uint best = 0xffffffffu;
    for (uint r = r0 + lid; r < r1; r += 256u) {
        VT v = load(base + red_offset(r));
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
