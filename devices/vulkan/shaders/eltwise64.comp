#version 450
// eltwise64.comp — elementwise ops where an operand is int64 or float64 (the device must have
// shaderInt64 and shaderFloat64): arithmetic, comparisons and logic in int64 or double, casts
// between every pair of dtypes, where, copy and fill, any strides. Float64 transcendental
// functions are not here (GLSL has none in double): those fall back to the CPU.
#extension GL_GOOGLE_include_directive : require
#extension GL_ARB_gpu_shader_int64 : require
#include "common.glsl"

layout(local_size_x = 256) in;
// the op (or mode), fixed when the pipeline is made: the driver compiles that case alone
layout(constant_id = 0) const uint SPEC = 0u;

layout(std430, binding = 0) readonly buffer Params {
    uint n, ndim, op, nin;
    uint out_dt;
    uint in_dt[3];
    int shape[8];
    int out_st[8];
    int in_st[24];
    int out_base;
    int in_base[3];
    uint bits, out_contig, bits_hi, pad0;
} P;
layout(std430, binding = 1) buffer Out { uint o[]; };
layout(std430, binding = 2) readonly buffer In0 { uint a[]; };
layout(std430, binding = 3) readonly buffer In1 { uint b[]; };
layout(std430, binding = 4) readonly buffer In2 { uint c[]; };

#define DEFINE_LOAD64(name, buf)                                                               \
    DEFINE_LOAD(name##_32, buf)                                                                \
    uint64_t name(int i, uint dt)                                                              \
    {                                                                                          \
        if (dt >= VK_DT_I64)                                                                   \
            return packUint2x32(uvec2(buf[2 * i], buf[2 * i + 1]));                            \
        return uint64_t(name##_32(i, dt));                                                     \
    }
DEFINE_LOAD64(load_a, a)
DEFINE_LOAD64(load_b, b)
DEFINE_LOAD64(load_c, c)

bool is_float(uint dt) { return dt == VK_DT_F32 || dt == VK_DT_F64; }

// float32 bits to float64 in integer arithmetic, as the CPU converts: a float register would
// flush a subnormal to zero and give a NaN the driver's own payload (NVIDIA does both).
double f32_bits_to_d(uint x)
{
    uint sign = x & 0x80000000u, e = (x >> 23) & 0xffu, f = x & 0x7fffffu;
    uint hi = sign | ((e + 896u) << 20); // normal: the float64 bias is 896 more
    if (e == 255u) // infinity, or NaN made quiet with its payload
        hi = sign | 0x7ff00000u | (f != 0u ? 0x80000u : 0u);
    if (e == 0u && f == 0u)
        hi = sign;
    if (e == 0u && f != 0u) { // subnormal f 2^-149: normal in float64, led by f's top bit m
        uint m = uint(findMSB(f));
        f = (f << (23u - m)) & 0x7fffffu;
        hi = sign | ((m + 874u) << 20);
    }
    return packDouble2x32(uvec2(f << 29, hi | (f >> 3)));
}

double to_d(uint64_t raw, uint dt)
{
    if (dt == VK_DT_F64) return packDouble2x32(unpackUint2x32(raw));
    if (dt == VK_DT_F32) return f32_bits_to_d(uint(raw));
    if (dt == VK_DT_I64) return double(int64_t(raw));
    if (dt == VK_DT_I32) return double(int(uint(raw)));
    if (dt == VK_DT_U8) return double(uint(raw));
    return raw != 0ul ? 1.0lf : 0.0lf;
}

int64_t to_l(uint64_t raw, uint dt)
{
    if (dt == VK_DT_I64) return int64_t(raw);
    if (dt == VK_DT_I32) return int64_t(int(uint(raw)));
    if (dt == VK_DT_BOOL) return raw != 0ul ? 1l : 0l;
    return int64_t(raw); // uint8
}

// double -> int64 as x86 does: truncation, INT64_MIN for NaN and out of range
int64_t d2l(double v)
{
    return (v >= -9223372036854775808.0lf && v < 9223372036854775808.0lf) ? int64_t(v)
                                                                          : int64_t(0x8000000000000000ul);
}

uint64_t encode_d(double v, uint dt)
{
    if (dt == VK_DT_F64) return packUint2x32(unpackDouble2x32(v));
    if (dt == VK_DT_F32) return uint64_t(floatBitsToUint(float(v)));
    if (dt == VK_DT_I64) return uint64_t(d2l(v));
    if (dt == VK_DT_I32)
        return uint64_t(uint((v >= -2147483648.0lf && v < 2147483648.0lf) ? int(v) : int(0x80000000u)));
    if (dt == VK_DT_U8) return uint64_t(d2l(v)) & 0xfful;
    return v == 0.0lf ? 0ul : 1ul;
}

uint64_t encode_l(int64_t v, uint dt)
{
    if (dt == VK_DT_F64) return packUint2x32(unpackDouble2x32(double(v)));
    if (dt == VK_DT_F32) return uint64_t(floatBitsToUint(float(v)));
    if (dt == VK_DT_I64) return uint64_t(v);
    if (dt == VK_DT_I32) return uint64_t(uint(v));
    if (dt == VK_DT_U8) return uint64_t(v) & 0xfful;
    return v != 0l ? 1ul : 0ul;
}

double unary_d(uint op, double x)
{
    switch (op) {
    case VK_OP_NEG: return -x;
    case VK_OP_ABS: return abs(x);
    case VK_OP_SQRT: return sqrt(x);
    case VK_OP_RSQRT: return 1.0lf / sqrt(x);
    case VK_OP_RELU: return x < 0.0lf ? 0.0lf : x;
    case VK_OP_FLOOR: return floor(x);
    case VK_OP_TRUNC: return trunc(x);
    case VK_OP_CEIL: return ceil(x);
    case VK_OP_ROUND: return roundEven(x);
    case VK_OP_SIGN: return x > 0.0lf ? 1.0lf : x < 0.0lf ? -1.0lf : x;
    case VK_OP_RECIPROCAL: return 1.0lf / x;
    case VK_OP_NOT: return x == 0.0lf ? 1.0lf : 0.0lf;
    default: return x;
    }
}

// The double versions of common.glsl's fmod1, floordiv1 and mod1.
double fmod_d(double a, double b)
{
    if (isnan(a) || isnan(b) || isinf(a) || b == 0.0lf)
        return packDouble2x32(uvec2(0u, 0x7ff80000u)); // NaN
    double x = abs(a), y = abs(b);
    if (isinf(b) || x < y) return a;
    int ex, ey;
    frexp(x, ex);
    frexp(y, ey);
    for (int k = ex - ey; k >= 0; k--) {
        double s = ldexp(y, k);
        if (x >= s) x -= s;
    }
    return a < 0.0lf ? -x : x;
}

double floordiv_d(double a, double b)
{
    if (b == 0.0lf) return a / b;
    double m = fmod_d(a, b);
    double d = (a - m) / b;
    if (m != 0.0lf && (b < 0.0lf) != (m < 0.0lf)) d -= 1.0lf;
    if (d == 0.0lf) // copysign(0, a / b): the sign of a / b is the two signs' xor
        return ((unpackDouble2x32(a).y ^ unpackDouble2x32(b).y) & 0x80000000u) != 0u ? -0.0lf
                                                                                   : 0.0lf;
    double f = floor(d);
    return d - f > 0.5lf ? f + 1.0lf : f;
}

double mod_d(double a, double b)
{
    double m = fmod_d(a, b);
    return (m != 0.0lf && (b < 0.0lf) != (m < 0.0lf)) ? m + b : m;
}

// Integers through magnitudes (INT64_MIN // -1 wraps); a zero divisor gives 0 for both.
int64_t floordiv_l(int64_t a, int64_t b)
{
    if (b == 0l) return 0l;
    uint64_t ua = uint64_t(a < 0l ? -a : a), ub = uint64_t(b < 0l ? -b : b), q = ua / ub;
    if ((a < 0l) == (b < 0l)) return int64_t(q);
    return -int64_t(q) - (q * ub != ua ? 1l : 0l);
}

double binary_d(uint op, double a, double b)
{
    switch (op) {
    case VK_OP_ADD: return a + b;
    case VK_OP_SUB: return a - b;
    case VK_OP_MUL: return a * b;
    case VK_OP_DIV: return a / b;
    case VK_OP_MAXIMUM: return (a > b || isnan(a)) ? a : b;
    case VK_OP_MINIMUM: return (a < b || isnan(a)) ? a : b;
    case VK_OP_FLOORDIV: return floordiv_d(a, b);
    case VK_OP_REMAINDER: return mod_d(a, b);
    case VK_OP_FMOD: return fmod_d(a, b);
    case VK_OP_EQ: return a == b ? 1.0lf : 0.0lf;
    case VK_OP_NE: return !(a == b) ? 1.0lf : 0.0lf;
    case VK_OP_LT: return a < b ? 1.0lf : 0.0lf;
    case VK_OP_LE: return a <= b ? 1.0lf : 0.0lf;
    case VK_OP_GT: return a > b ? 1.0lf : 0.0lf;
    case VK_OP_GE: return a >= b ? 1.0lf : 0.0lf;
    case VK_OP_AND: return (!(a == 0.0lf) && !(b == 0.0lf)) ? 1.0lf : 0.0lf;
    default: return (!(a == 0.0lf) || !(b == 0.0lf)) ? 1.0lf : 0.0lf;
    }
}

int64_t unary_l(uint op, int64_t x)
{
    switch (op) {
    case VK_OP_NEG: return -x;
    case VK_OP_ABS: return x < 0l ? -x : x;
    case VK_OP_RELU: return x < 0l ? 0l : x;
    case VK_OP_SIGN: return x > 0l ? 1l : x < 0l ? -1l : 0l;
    case VK_OP_NOT: return x == 0l ? 1l : 0l;
    default: return x;
    }
}

int64_t binary_l(uint op, int64_t a, int64_t b)
{
    switch (op) {
    case VK_OP_ADD: return a + b;
    case VK_OP_SUB: return a - b;
    case VK_OP_MUL: return a * b;
    case VK_OP_MAXIMUM: return a > b ? a : b;
    case VK_OP_MINIMUM: return a < b ? a : b;
    case VK_OP_FLOORDIV: return floordiv_l(a, b);
    case VK_OP_REMAINDER: return b == 0l ? 0l : a - floordiv_l(a, b) * b;
    case VK_OP_FMOD: { // C's %, the dividend's sign, through magnitudes; 0 for a zero divisor
        if (b == 0l) return 0l;
        uint64_t r = uint64_t(a < 0l ? -a : a) % uint64_t(b < 0l ? -b : b);
        return a < 0l ? -int64_t(r) : int64_t(r);
    }
    case VK_OP_EQ: return a == b ? 1l : 0l;
    case VK_OP_NE: return a != b ? 1l : 0l;
    case VK_OP_LT: return a < b ? 1l : 0l;
    case VK_OP_LE: return a <= b ? 1l : 0l;
    case VK_OP_GT: return a > b ? 1l : 0l;
    case VK_OP_GE: return a >= b ? 1l : 0l;
    case VK_OP_AND: return (a != 0l && b != 0l) ? 1l : 0l;
    default: return (a != 0l || b != 0l) ? 1l : 0l;
    }
}

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
    uint64_t res[4];
    int oo[4];
    for (uint j = 0u; j < 4u; j++) {
        res[j] = 0ul;
        oo[j] = 0;
        if (j >= cnt) continue;
        int o0, o1, o2;
        offsets(first + j, oo[j], o0, o1, o2);
        uint64_t ra = 0ul, rb = 0ul, rc = 0ul;
        if (P.nin > 0u) ra = load_a(o0, P.in_dt[0]);
        if (P.nin > 1u) rb = load_b(o1, P.in_dt[1]);
        if (P.nin > 2u) rc = load_c(o2, P.in_dt[2]);
        if (op == VK_OP_FILL) {
            res[j] = packUint2x32(uvec2(P.bits, P.bits_hi));
        } else if (op == VK_OP_WHERE) {
            res[j] = ra != 0ul ? rb : rc;
        } else if (is_float(P.in_dt[0])) {
            double x = to_d(ra, P.in_dt[0]);
            double r = (op >= VK_OP_ADD && op < VK_OP_WHERE) ? binary_d(op, x, to_d(rb, P.in_dt[1]))
                                                             : unary_d(op, x);
            res[j] = encode_d(r, odt);
        } else if (op == VK_OP_CAST && is_float(odt)) {
            res[j] = encode_d(to_d(ra, P.in_dt[0]), odt);
        } else {
            int64_t x = to_l(ra, P.in_dt[0]);
            int64_t r = (op >= VK_OP_ADD && op < VK_OP_WHERE) ? binary_l(op, x, to_l(rb, P.in_dt[1]))
                                                              : unary_l(op, x);
            res[j] = encode_l(r, odt);
        }
    }
    if (odt == VK_DT_U8 || odt == VK_DT_BOOL) {
        uint w = uint(oo[0]) >> 2;
        uint word = cnt == 4u ? 0u : o[w];
        for (uint j = 0u; j < cnt; j++)
            word = (word & ~(0xffu << (8u * j))) | ((uint(res[j]) & 0xffu) << (8u * j));
        o[w] = word;
    } else if (odt >= VK_DT_I64) {
        for (uint j = 0u; j < cnt; j++) {
            uvec2 w = unpackUint2x32(res[j]);
            o[2 * oo[j]] = w.x;
            o[2 * oo[j] + 1] = w.y;
        }
    } else {
        for (uint j = 0u; j < cnt; j++) o[oo[j]] = uint(res[j]);
    }
}
