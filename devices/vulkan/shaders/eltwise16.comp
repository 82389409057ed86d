#version 450
// eltwise16.comp — cast, copy and fill where the output or the input is float16 or bfloat16,
// any strides. Both are read and written as uint16_t through 16-bit storage buffers (the
// device's storageBuffer16BitAccess) and converted in integer arithmetic, exactly as
// core/half.h does on the CPU: round to nearest even, overflow to infinity, NaN made quiet with
// its sign and top payload bits. So no float16 arithmetic, rounding mode or denormal mode of
// the device is involved, and results equal the CPU's bit for bit.
// Dtypes here: float16, bfloat16 with float32, int32, uint8 and bool inputs, and float32, int32
// outputs (vk_half.c takes int64, float64, uint8 and bool outputs in two steps through float32).
#extension GL_GOOGLE_include_directive : require
#extension GL_EXT_shader_16bit_storage : require
#include "common.glsl"

layout(local_size_x = 256) in;
layout(constant_id = 0) const uint SPEC = 0u; // the op: VK_OP_CAST (also copy) or VK_OP_FILL

// the same parameters as eltwise.comp (vk_run.c's ew_params)
layout(std430, binding = 0) readonly buffer Params {
    uint n, ndim, op, nin;
    uint out_dt;
    uint in_dt[3];
    int shape[8];
    int out_st[8];
    int in_st[24];
    int out_base;
    int in_base[3];
    uint bits;      // FILL: the value's 16-bit pattern
    uint out_contig;
} P;
// each binding seen both as 32-bit words and as 16-bit elements
layout(std430, binding = 1) buffer Out { uint o[]; };
layout(std430, binding = 1) buffer Out16 { uint16_t o16[]; };
layout(std430, binding = 2) readonly buffer In0 { uint a[]; };
layout(std430, binding = 2) readonly buffer In16 { uint16_t a16[]; };
DEFINE_LOAD(load_a, a)

// q + rem / 2^shift rounded to nearest, ties to even (core/half.h td_round_shifted)
uint round_shifted(uint full, uint shift)
{
    uint q = full >> shift, rem = full & ((1u << shift) - 1u), halfway = 1u << (shift - 1u);
    return q + ((rem > halfway || (rem == halfway && (q & 1u) != 0u)) ? 1u : 0u);
}

uint f32_to_f16(uint x)
{
    uint sign = (x >> 16) & 0x8000u, ax = x & 0x7fffffffu;
    if (ax > 0x7f800000u) return sign | 0x7e00u | ((ax >> 13) & 0x3ffu); // NaN, quiet
    if (ax >= 0x477ff000u) return sign | 0x7c00u; // 65520 and above: infinity
    uint e = ax >> 23;
    if (e >= 113u) return sign | round_shifted(ax - (112u << 23), 13u); // normal
    if (e < 102u) return sign; // below 2^-25: zero
    return sign | round_shifted((ax & 0x7fffffu) | 0x800000u, 126u - e); // subnormal
}

uint f16_to_f32(uint h)
{
    uint sign = (h & 0x8000u) << 16, e = (h >> 10) & 0x1fu, f = h & 0x3ffu;
    if (e == 0u) { // zero or subnormal f * 2^-24: normalized by the top set bit m
        if (f == 0u) return sign;
        uint m = uint(findMSB(f));
        return sign | ((m + 103u) << 23) | ((f << (23u - m)) & 0x7fffffu);
    }
    if (e == 31u) return sign | 0x7f800000u | (f << 13) | (f != 0u ? 0x400000u : 0u);
    return sign | ((e + 112u) << 23) | (f << 13);
}

uint f32_to_bf16(uint x)
{
    if ((x & 0x7fffffffu) > 0x7f800000u) return (x >> 16) | 0x40u; // NaN, quiet
    return (x + 0x7fffu + ((x >> 16) & 1u)) >> 16;
}

uint bf16_to_f32(uint b)
{
    uint x = b << 16;
    return (x & 0x7fffffffu) > 0x7f800000u ? x | 0x400000u : x;
}

// element i of the input as float32 bits (the value every conversion goes through)
uint load_f32_bits(int i, uint dt)
{
    if (dt == VK_DT_F16) return f16_to_f32(uint(a16[i]));
    if (dt == VK_DT_BF16) return bf16_to_f32(uint(a16[i]));
    if (dt == VK_DT_F32) return a[i]; // as bits: no float register may touch a NaN or subnormal
    return floatBitsToUint(raw_to_f(load_a(i, dt), dt));
}

void offsets(uint i, out int oo, out int o0)
{
    oo = P.out_base; o0 = P.in_base[0];
    uint rest = i;
    for (uint d = 0u; d < P.ndim; d++) {
        uint s = uint(P.shape[d]);
        int k = int(rest % s);
        rest /= s;
        oo += k * P.out_st[d];
        o0 += k * P.in_st[d];
    }
}

void convert_one(uint i)
{
    int oo, o0;
    offsets(i, oo, o0);
    uint odt = P.out_dt, idt = P.in_dt[0];
    if (SPEC == VK_OP_FILL) {
        o16[oo] = uint16_t(P.bits);
    } else if (idt == odt) { // a half copy moves the bits (a signaling NaN stays signaling)
        o16[oo] = a16[o0];
    } else if (odt == VK_DT_F16 || odt == VK_DT_BF16) {
        uint x = load_f32_bits(o0, idt);
        o16[oo] = uint16_t(odt == VK_DT_F16 ? f32_to_f16(x) : f32_to_bf16(x));
    } else if (odt == VK_DT_F32) {
        o[oo] = load_f32_bits(o0, idt);
    } else { // int32: truncation; infinities and NaN give INT_MIN, as on the CPU
        o[oo] = uint(f2i(uintBitsToFloat(load_f32_bits(o0, idt))));
    }
}

void main()
{
    uint first = (group_index() * 256u + gl_LocalInvocationID.x) * 4u;
    for (uint j = 0u; j < 4u; j++)
        if (first + j < P.n)
            convert_one(first + j);
}
