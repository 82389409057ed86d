#version 450
// eltwise.comp — any elementwise op (unary, binary, where, cast/copy, fill) over strided and
// broadcast operands of dtypes float32, int32, uint8 and bool. Each thread makes 4 consecutive
// output elements, so a byte-sized output is written one whole 32-bit word at a time.
#extension GL_GOOGLE_include_directive : require
#include "common.glsl"

layout(local_size_x = 256) in;
// the op (or mode), fixed when the pipeline is made: the driver compiles that case alone
layout(constant_id = 0) const uint SPEC = 0u;

layout(std430, binding = 0) readonly buffer Params {
    uint n, ndim, op, nin;
    uint out_dt;
    uint in_dt[3];
    int shape[8];   // merged dims, innermost first
    int out_st[8];
    int in_st[24];  // input k's strides at [8k, 8k+8)
    int out_base;
    int in_base[3];
    uint bits;      // FILL: the value's bit pattern in out's dtype
    uint out_contig;
} P;
layout(std430, binding = 1) buffer Out { uint o[]; };
layout(std430, binding = 2) readonly buffer In0 { uint a[]; };
layout(std430, binding = 3) readonly buffer In1 { uint b[]; };
layout(std430, binding = 4) readonly buffer In2 { uint c[]; };
DEFINE_LOAD(load_a, a)
DEFINE_LOAD(load_b, b)
DEFINE_LOAD(load_c, c)

void offsets(uint i, out int oo, out int o0, out int o1, out int o2)
{
    oo = P.out_base; o0 = P.in_base[0]; o1 = P.in_base[1]; o2 = P.in_base[2];
    uint rest = i;
    for (uint d = 0u; d < P.ndim; d++) {
        uint s = uint(P.shape[d]);
        int k = int(rest % s);
        rest /= s;
        oo += k * P.out_st[d];
        o0 += k * P.in_st[d];
        o1 += k * P.in_st[8 + d];
        o2 += k * P.in_st[16 + d];
    }
}

void main()
{
    uint first = (group_index() * 256u + gl_LocalInvocationID.x) * 4u;
    if (first >= P.n)
        return;
    uint cnt = min(4u, P.n - first);
    uint op = SPEC, odt = P.out_dt;
    uint ra[4], rb[4], rc[4];
    int oo[4];
    for (uint j = 0u; j < 4u; j++) {
        ra[j] = 0u; rb[j] = 0u; rc[j] = 0u; oo[j] = 0;
        if (j >= cnt) continue;
        int o0, o1, o2;
        offsets(first + j, oo[j], o0, o1, o2);
        if (P.nin > 0u) ra[j] = load_a(o0, P.in_dt[0]);
        if (P.nin > 1u) rb[j] = load_b(o1, P.in_dt[1]);
        if (P.nin > 2u) rc[j] = load_c(o2, P.in_dt[2]);
    }
    uint res[4];
    if (op == VK_OP_FILL) {
        for (uint j = 0u; j < 4u; j++) res[j] = P.bits;
    } else if (op == VK_OP_WHERE) {
        for (uint j = 0u; j < 4u; j++) res[j] = ra[j] != 0u ? rb[j] : rc[j];
    } else if (P.in_dt[0] == VK_DT_F32) {
        vec4 x = vec4(uintBitsToFloat(ra[0]), uintBitsToFloat(ra[1]), uintBitsToFloat(ra[2]),
                      uintBitsToFloat(ra[3]));
        vec4 r;
        if (op >= VK_OP_ADD && op < VK_OP_WHERE) {
            vec4 y = vec4(uintBitsToFloat(rb[0]), uintBitsToFloat(rb[1]), uintBitsToFloat(rb[2]),
                          uintBitsToFloat(rb[3]));
            r = binary_f(op, x, y);
        } else {
            r = unary_f(op, x);
        }
        for (uint j = 0u; j < 4u; j++) res[j] = encode_f(r[j], odt);
        if (op == VK_OP_CAST && odt == VK_DT_BOOL) // on the bits: a flushed subnormal is not 0
            for (uint j = 0u; j < 4u; j++) res[j] = (ra[j] & 0x7fffffffu) != 0u ? 1u : 0u;
    } else {
        uint idt = P.in_dt[0];
        ivec4 x = ivec4(raw_to_i(ra[0], idt), raw_to_i(ra[1], idt), raw_to_i(ra[2], idt),
                        raw_to_i(ra[3], idt));
        if (op == VK_OP_CAST && odt == VK_DT_F32) {
            for (uint j = 0u; j < 4u; j++) res[j] = floatBitsToUint(raw_to_f(ra[j], idt));
        } else {
            ivec4 r;
            if (op >= VK_OP_ADD && op < VK_OP_WHERE) {
                uint jdt = P.in_dt[1];
                ivec4 y = ivec4(raw_to_i(rb[0], jdt), raw_to_i(rb[1], jdt), raw_to_i(rb[2], jdt),
                                raw_to_i(rb[3], jdt));
                r = binary_i(op, x, y);
            } else {
                r = unary_i(op, x);
            }
            for (uint j = 0u; j < 4u; j++) res[j] = encode_i(r[j], odt);
        }
    }
    if (odt >= VK_DT_U8) {
        // contiguous output starting on a word: the 4 elements are one word (the last one,
        // partly outside the tensor, keeps its other bytes)
        uint w = uint(oo[0]) >> 2;
        uint word = cnt == 4u ? 0u : o[w];
        for (uint j = 0u; j < cnt; j++)
            word = (word & ~(0xffu << (8u * j))) | ((res[j] & 0xffu) << (8u * j));
        o[w] = word;
    } else {
        for (uint j = 0u; j < cnt; j++) o[oo[j]] = res[j];
    }
}
