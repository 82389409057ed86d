// common.glsl — what the elementwise shaders share: dtype loads and stores over 32-bit words,
// and the op bodies in float (vec4) and integer (ivec4) arithmetic, matching the CPU kernels'
// semantics (NaN propagation in maximum/minimum, round half to even, sign(-0) = -0, ...).
#include "../vk_opcodes.h"

// DEFINE_LOAD(name, buf) defines uint name(int i, uint dt): element i of buf (32-bit words) of
// dtype dt as its raw bits (a byte for uint8/bool). Written with if, not ?:, so that a driver that
// runs both sides of a select (lavapipe) makes one load, not two.
#define DEFINE_LOAD(name, buf)                                                                 \
    uint name(int i, uint dt)                                                                  \
    {                                                                                          \
        if (dt == VK_DT_U8 || dt == VK_DT_BOOL)                                                \
            return (buf[i >> 2] >> (uint(i & 3) * 8u)) & 0xffu;                                \
        return buf[i];                                                                         \
    }

float raw_to_f(uint raw, uint dt)
{
    if (dt == VK_DT_F32) return uintBitsToFloat(raw);
    if (dt == VK_DT_I32) return float(int(raw));
    if (dt == VK_DT_U8) return float(raw);
    return raw != 0u ? 1.0 : 0.0;
}

int raw_to_i(uint raw, uint dt)
{
    if (dt == VK_DT_BOOL) return raw != 0u ? 1 : 0;
    return int(raw);
}

// float -> int32 as x86 does: truncation, and INT_MIN for NaN and values out of range
int f2i(float v)
{
    return (v >= -2147483648.0 && v < 2147483648.0) ? int(v) : int(0x80000000u);
}

uint encode_f(float v, uint dt)
{
    if (dt == VK_DT_F32) return floatBitsToUint(v);
    if (dt == VK_DT_I32) return uint(f2i(v));
    // uint8: the low byte of the int64 conversion; every float at or above 2^31 in magnitude
    // is a multiple of 256, and NaN converts to INT64_MIN: both give 0
    if (dt == VK_DT_U8) return abs(v) < 2147483648.0 ? uint(int(v)) & 0xffu : 0u;
    return (v == 0.0) ? 0u : 1u; // NaN is true
}

uint encode_i(int v, uint dt)
{
    if (dt == VK_DT_F32) return floatBitsToUint(float(v));
    if (dt == VK_DT_I32) return uint(v);
    if (dt == VK_DT_U8) return uint(v) & 0xffu;
    return v != 0 ? 1u : 0u;
}

vec4 sel(vec4 a, vec4 b, bvec4 c) { return mix(a, b, c); } // c ? b : a

float tanh1(float x)
{
    float a = abs(x);
    float r;
    if (a < 0.4) {
        float x2 = a * a;
        r = a * (1.0 + x2 * (-1.0 / 3.0 + x2 * (2.0 / 15.0 + x2 * (-17.0 / 315.0 +
            x2 * (62.0 / 2835.0 + x2 * (-1382.0 / 155925.0 + x2 * (21844.0 / 6081075.0)))))));
    } else if (a < 9.5) {
        float t = exp(-2.0 * a);
        r = (1.0 - t) / (1.0 + t);
    } else {
        r = 1.0;
    }
    if (isnan(x)) return x;
    return x < 0.0 || (x == 0.0 && floatBitsToUint(x) != 0u) ? -r : r;
}

// erfc(z)/2 for z >= 0 in float32: erfc(z) = t exp(-z^2 + g(t)), t = 2/(2 + z), g the 12-term
// polynomial in s = (2t - 1 - A)/(1 - A), A = 1/6, fitted (Chebyshev interpolation of g from a
// 50-digit erfc) to relative error 2.6e-9 on z in [0, 10]; s is clamped at -1 past the fit, where
// exp(-z^2) takes the value to 0. The error is relative, so erfc's smallest values keep their
// digits.
float half_erfc1(float z)
{
    float h = 1.0 / (z + 2.0); // t / 2
    float s = max(h * 4.8 - 1.4, -1.0);
    float g = -4.7177399865712735e-06;
    g = g * s - 2.2855769681526915e-05; g = g * s + 6.7834031783185731e-05;
    g = g * s + 0.0001298682143473287;  g = g * s - 0.00054729439540930852;
    g = g * s - 0.00027596115799807943; g = g * s + 0.0037131527712421391;
    g = g * s - 0.0010455518350085862;  g = g * s - 0.029471350434957733;
    g = g * s + 0.015745074072071874;   g = g * s + 0.57030715365546358;
    g = g * s - 0.55859535372792468;
    return h * exp(g - z * z);
}

// erf in float32. |x| < 0.5: the Taylor series 2/sqrt(pi) sum (-1)^n x^(2n+1) / (n! (2n+1)) to
// n = 7 (the first term left out is below 2^-31 of the sum). 0.5 <= |x| < 4: 1 - erfc(|x|)
// (half_erfc1); erfc is at most 0.48 there, so its few-ulp error is at most half as large
// relative to erf. Past 4, erf rounds to 1. Measured on lavapipe against a double erf
// (tests/test_erf.c): within 4 ulps.
float erf1(float x)
{
    float a = abs(x);
    float r;
    if (a < 0.5) {
        float x2 = a * a;
        r = 1.1283791670955126 * a * (1.0 + x2 * (-1.0 / 3.0 + x2 * (1.0 / 10.0 + x2 * (-1.0 / 42.0
            + x2 * (1.0 / 216.0 + x2 * (-1.0 / 1320.0 + x2 * (1.0 / 9360.0
            + x2 * (-1.0 / 75600.0))))))));
    } else if (a < 4.0) {
        r = 1.0 - 2.0 * half_erfc1(a);
    } else {
        r = 1.0;
    }
    if (isnan(x)) return x;
    return x < 0.0 || (x == 0.0 && floatBitsToUint(x) != 0u) ? -r : r; // erf(-0) = -0
}

// gelu x Phi(x) in float32, Phi(x) = erfc(-x/sqrt2)/2: half_erfc1(|x|/sqrt2) below 0, one minus
// it above; relative everywhere, so negative x keep their digits (1 + erf(x/sqrt2) would cancel).
// -inf gives NaN (-inf * 0), as x * Phi(x) does.
float gelu1(float x)
{
    float q = half_erfc1(abs(x) * 0.70710678118654752);
    return x * (x < 0.0 ? q : 1.0 - q);
}

float sigmoid1(float x)
{
    float e = exp(-abs(x));
    if (isnan(x)) return x;
    return x >= 0.0 ? 1.0 / (1.0 + e) : e / (1.0 + e);
}

float pow1(float a, float b)
{
    if (b == 0.0 || a == 1.0) return 1.0;
    if (isnan(a) || isnan(b)) return a + b;
    float r = pow(abs(a), b);
    if (a == 0.0) r = b > 0.0 ? 0.0 : uintBitsToFloat(0x7f800000u);
    if (floatBitsToUint(a) >= 0x80000000u) { // negative, or -0
        if (abs(b) < 16777216.0 && floor(b) == b) {
            if (mod(b, 2.0) == 1.0) r = -r;
        } else if (a != 0.0 && !isinf(b)) {
            return uintBitsToFloat(0x7fc00000u);
        }
    }
    return r;
}

// C's fmod, exact: a Vulkan division and fma may be inexact, so the remainder is taken by
// subtracting |b| * 2^k for k from the exponent gap down to 0; each subtraction is exact
// (Sterbenz: s <= x < 2s). At most ~280 steps for float32's range.
float fmod1(float a, float b)
{
    if (isnan(a) || isnan(b) || isinf(a) || b == 0.0) return uintBitsToFloat(0x7fc00000u);
    float x = abs(a), y = abs(b);
    if (isinf(b) || x < y) return a;
    int ex, ey;
    frexp(x, ex);
    frexp(y, ey);
    for (int k = ex - ey; k >= 0; k--) {
        float s = ldexp(y, k);
        if (x >= s) x -= s;
    }
    return a < 0.0 ? -x : x;
}

// x as hi + lo, 12 significant bits each (Veltkamp's split), so that products of halves are exact.
void split12(float x, out float hi, out float lo)
{
    precise float c = 4097.0 * x;
    precise float h = c - (c - x);
    precise float l = x - h;
    hi = h;
    lo = l;
}

// a / b rounded to nearest. Vulkan lets / be off by 2.5 ulp, and on NVIDIA it is; floor_divide
// floors the quotient, so an ulp shows. The residual a - q b is computed exactly from q's and b's
// mantissas (Dekker's product: Vulkan rounds + - * correctly, but need not fuse fma), and one
// step on it rounds the quotient as IEEE division does (but within a tiny fraction of a tie).
float div_rn(float a, float b)
{
    float q = a / b;
    if (isinf(q) || isnan(q) || q == 0.0 || isinf(b)) return q;
    int eq, eb;
    float qm = frexp(q, eq), bm = frexp(b, eb);
    float as = ldexp(a, -(eq + eb)); // about qm * bm: in [1/4, 1)
    float qh, ql, bh, bl;
    split12(qm, qh, ql);
    split12(bm, bh, bl);
    precise float p = qm * bm;
    precise float e = ((qh * bh - p) + qh * bl + ql * bh) + ql * bl;
    precise float r = (as - p) - e;
    return ldexp(qm + r / bm, eq);
}

// Python's // and % as PyTorch computes them (see the CPU kernels): IEEE's a / b for b = 0.
float floordiv1(float a, float b)
{
    if (b == 0.0) return a / b;
    float m = fmod1(a, b);
    float d = div_rn(a - m, b);
    if (m != 0.0 && (b < 0.0) != (m < 0.0)) d -= 1.0;
    if (d == 0.0) // copysign(0, a / b): the sign of a / b is the two signs' xor
        return uintBitsToFloat((floatBitsToUint(a) ^ floatBitsToUint(b)) & 0x80000000u);
    float f = floor(d);
    return d - f > 0.5 ? f + 1.0 : f;
}

float mod1(float a, float b)
{
    float m = fmod1(a, b);
    return (m != 0.0 && (b < 0.0) != (m < 0.0)) ? m + b : m;
}

// Integers: through magnitudes, so INT_MIN // -1 wraps; a zero divisor gives 0 for both.
int floordiv_i1(int a, int b)
{
    if (b == 0) return 0;
    uint ua = uint(abs(a)), ub = uint(abs(b)), q = ua / ub;
    if ((a < 0) == (b < 0)) return int(q);
    return -int(q) - (q * ub != ua ? 1 : 0);
}

int mod_i1(int a, int b) { return b == 0 ? 0 : a - floordiv_i1(a, b) * b; }

// ---- issue 24's math, measured on lavapipe against libm's double functions by
// tests/test_math_ulps.c: log1p 1.9 ulps, log2 2.3, tan (tan1 below) 2.4, asin 2.6, acos 2.4, atan 1.2, atan2 1.8, trunc and fmod exact; expm1 14.5 on
// [-20, 20], sinh and cosh 9.8 on [-12, 12]: there the driver's exp sets the error (Vulkan
// bounds it by 3 + 2|x| ulps).

// log1p. For -0.5 < x <= 1 by the series log(1 + x) = 2 atanh(s), s = x / (2 + x), so
// |s| <= 1/3 and 2 (s + s^3/3 + ... + s^17/17) leaves out under 2^-30 of the sum; no log near 1,
// where Vulkan only bounds the driver's log absolutely (2^-21). Elsewhere log(1 + x), whose
// argument is outside [0.5, 2] (1 + x is exact below -0.5).
float log1p1(float x)
{
    if (x > -0.5 && x <= 1.0) {
        float s = x / (2.0 + x), s2 = s * s;
        float p = 1.0 / 17.0;
        p = p * s2 + 1.0 / 15.0; p = p * s2 + 1.0 / 13.0; p = p * s2 + 1.0 / 11.0;
        p = p * s2 + 1.0 / 9.0;  p = p * s2 + 1.0 / 7.0;  p = p * s2 + 1.0 / 5.0;
        p = p * s2 + 1.0 / 3.0;
        return 2.0 * (s + s * s2 * p); // -0 stays -0
    }
    return log(1.0 + x);
}

// log2: near 1, where the driver's log2 is bounded only absolutely, log1p1(x - 1) / ln 2 (x - 1
// exact there); elsewhere the built-in, exact at powers of two.
float log2_1(float x)
{
    return x > 0.5 && x < 2.0 ? log1p1(x - 1.0) * 1.44269504 : log2(x);
}

// expm1. For |x| < 0.5 the Taylor series to x^9/9! (the rest is under 2^-30 relative); else
// exp(x) - 1, where the subtraction at most 2.5x magnifies exp's relative error.
float expm1_1(float x)
{
    if (abs(x) < 0.5) {
        float p = 1.0 / 362880.0;
        p = p * x + 1.0 / 40320.0; p = p * x + 1.0 / 5040.0; p = p * x + 1.0 / 720.0;
        p = p * x + 1.0 / 120.0;   p = p * x + 1.0 / 24.0;   p = p * x + 1.0 / 6.0;
        p = p * x + 0.5;
        return x == 0.0 ? x : x + x * x * p; // -0 stays -0
    }
    return x > 88.8 ? uintBitsToFloat(0x7f800000u) : exp(x) - 1.0; // exp(-inf) - 1 = -1
}

// sinh near 0 from expm1 (e^a - e^-a = e + e / (e + 1) with e = expm1(a), no cancellation);
// past 20 as e^(a/2) squared over 2, so it overflows only where sinh does.
float sinh1(float x)
{
    float a = abs(x);
    precise float r;
    if (a < 1.0) {
        float e = expm1_1(a);
        r = 0.5 * (e + e / (e + 1.0));
    } else if (a < 20.0) {
        float e = exp(a);
        r = 0.5 * (e - 1.0 / e);
    } else {
        precise float h = exp(0.5 * a), half_h = 0.5 * h; // precise: h * h first overflows
        r = half_h * h;
    }
    if (isnan(x)) return x;
    return x < 0.0 || (x == 0.0 && floatBitsToUint(x) != 0u) ? -r : r;
}

float cosh1(float x)
{
    float a = abs(x);
    if (a >= 20.0) {
        precise float h = exp(0.5 * a), half_h = 0.5 * h; // precise: h * h first overflows
        precise float r = half_h * h;
        return r;
    }
    float e = exp(a);
    return 0.5 * (e + 1.0 / e);
}

// Integers: C's %, the dividend's sign, through magnitudes; a zero divisor gives 0.
int fmod_i1(int a, int b)
{
    if (b == 0) return 0;
    uint r = uint(abs(a)) % uint(abs(b));
    return a < 0 ? -int(r) : int(r);
}

// atan, asin, acos, atan2 of our own: lavapipe's built-ins were 300-3800 ulps off. atan1
// reduces |x| to |t| <= tan(pi/8) (t = x, (x - 1)/(x + 1) plus pi/4, or -1/x plus pi/2), then
// sums the Taylor series to t^19 (the rest is under 2^-27 relative); the added multiple of pi/4
// is a float plus its remainder (hi + (lo + p)) so it is exact to 2^-50.
float atan1(float x)
{
    float a = abs(x), t = a, hi = 0.0, lo = 0.0;
    if (a > 2.41421356) {
        t = -1.0 / a; hi = 1.57079637; lo = -4.37113900e-8;
    } else if (a > 0.414213562) {
        t = (a - 1.0) / (a + 1.0); hi = 0.785398185; lo = -2.18556950e-8;
    }
    float z = t * t, p = -1.0 / 19.0;
    p = p * z + 1.0 / 17.0; p = p * z - 1.0 / 15.0; p = p * z + 1.0 / 13.0;
    p = p * z - 1.0 / 11.0; p = p * z + 1.0 / 9.0;  p = p * z - 1.0 / 7.0;
    p = p * z + 1.0 / 5.0;  p = p * z - 1.0 / 3.0;
    float r = hi + (lo + (t + t * z * p));
    if (isnan(x)) return x;
    return x < 0.0 || (x == 0.0 && floatBitsToUint(x) != 0u) ? -r : r; // atan(-0) = -0
}

// asin x = atan(x / sqrt((1 - x)(1 + x))): 1 - x and 1 + x are exact or nearly, and near +-1,
// where the quotient is large, atan damps its rounding; +-1 give x/0 = +-inf, so +-pi/2.
float asin1(float x)
{
    if (abs(x) > 1.0) return uintBitsToFloat(0x7fc00000u);
    return atan1(x / sqrt((1.0 - x) * (1.0 + x)));
}

// acos x = 2 atan(sqrt((1 - x)/(1 + x))): 0 at 1 and 2 atan(inf) = pi at -1.
float acos1(float x)
{
    if (abs(x) > 1.0) return uintBitsToFloat(0x7fc00000u);
    return 2.0 * atan1(sqrt((1.0 - x) / (1.0 + x)));
}

// atan2 from atan1(y / x), plus or minus pi (as a float plus its remainder) for x < 0, with C's
// values where the quotient says nothing: both zero (+-0 or +-pi by the signs), both infinite
// (+-pi/4, +-3pi/4), x = +-0 (+-pi/2).
float atan2_1(float y, float x)
{
    bool xneg = floatBitsToUint(x) >= 0x80000000u, yneg = floatBitsToUint(y) >= 0x80000000u;
    float r;
    if (y == 0.0 && x == 0.0) r = xneg ? 3.14159274 : 0.0;
    else if (isinf(x) && isinf(y)) r = xneg ? 2.35619449 : 0.785398163;
    else if (x == 0.0) r = 1.57079637;
    else r = -1.0; // the quotient's case, below
    r = yneg ? -r : r;
    float q = atan1(y / x);
    float pi_hi = yneg ? -3.14159274 : 3.14159274, pi_lo = yneg ? 8.74227766e-8 : -8.74227766e-8;
    float f = xneg ? pi_hi + (pi_lo + q) : q;
    bool quotient = abs(r) == 1.0;
    return isnan(x) || isnan(y) ? x + y : quotient ? f : r; // (no early returns: glslc -O)
}

// x less a multiple of 2 pi, in about [-pi, pi], with 2 pi in three parts (Cody and Waite): the
// first two have 9 significant bits, so k times them is exact for |k| < 2^15. Vulkan bounds the
// drivers' sin and cos only on [-pi, pi] (an absolute 2^-11); on NVIDIA their error grew with |x|
// (1e-5 at x = 255). Each subtraction rounds once, within 2^-23 here; inf stays NaN.
vec4 reduce_2pi(vec4 x)
{
    vec4 k = roundEven(x * 0.159154937);
    precise vec4 r = ((x - k * 6.28125) - k * 0.001934051513671875) - k * 1.25566589e-06;
    return r;
}

// tan without the driver's sin and cos, which Vulkan bounds only absolutely: on NVIDIA
// sin(3e-6) / cos came out 0.1% off and tan near its poles hundreds of ulps. x less k pi/2 in
// three Cody-Waite parts (the first has 8 significant bits, the second 12, so k times them is
// exact for |k| < 2^12) gives r in [-pi/4, pi/4]; there sin and cos are their Taylor series to
// r^11 and r^12 (the first term left out is under 2^-28 of the sum), and tan is sin/cos, or
// -cos/sin for odd k. Simulated in float32 against libm (no fused multiply-adds): 3.2 ulps
// worst on [-300, 300], 1e-30 and 3e-6 exact.
float tan1(float x)
{
    float k = roundEven(x * 0.636619747);
    precise float r = ((x - k * 1.5703125) - k * 4.838705062866211e-4) + k * 4.371138828673793e-8;
    precise float r2 = r * r;
    precise float sp = (((-2.5052108e-8 * r2 + 2.7557319e-6) * r2 - 1.9841270e-4) * r2
                        + 8.3333333e-3) * r2 - 1.6666667e-1;
    precise float sn = r + (r * r2) * sp;
    precise float cp = (((2.0876757e-9 * r2 - 2.7557319e-7) * r2 + 2.4801587e-5) * r2
                        - 1.3888889e-3) * r2 + 4.1666667e-2;
    precise float cs = (1.0 - 0.5 * r2) + (r2 * r2) * cp;
    return (int(k) & 1) == 0 ? sn / cs : -cs / sn;
}

// max(x, 0) with NaN kept, decided on the bits: NVIDIA's compiler turned x < 0 ? 0 : x into a
// max that drops NaN. Negative finite and -inf floats are the words above 0x80000000 up to
// 0xff800000; -0 stays -0, as on the CPU.
vec4 relu4(vec4 x)
{
    uvec4 u = floatBitsToUint(x);
    bvec4 neg = bvec4(uvec4(greaterThan(u, uvec4(0x80000000u))) &
                      uvec4(lessThanEqual(u, uvec4(0xff800000u))));
    return sel(x, vec4(0.0), neg);
}

vec4 unary_f(uint op, vec4 x)
{
    switch (op) {
    case VK_OP_NEG: return -x;
    case VK_OP_ABS: return abs(x);
    case VK_OP_EXP: return exp(x);
    case VK_OP_LOG: return log(x);
    case VK_OP_SQRT: return sqrt(x);
    case VK_OP_RSQRT: return 1.0 / sqrt(x);
    case VK_OP_SIN: return sin(reduce_2pi(x));
    case VK_OP_COS: return cos(reduce_2pi(x));
    case VK_OP_TANH: return vec4(tanh1(x.x), tanh1(x.y), tanh1(x.z), tanh1(x.w));
    case VK_OP_SIGMOID: return vec4(sigmoid1(x.x), sigmoid1(x.y), sigmoid1(x.z), sigmoid1(x.w));
    case VK_OP_RELU: return relu4(x);
    case VK_OP_FLOOR: return floor(x);
    case VK_OP_CEIL: return ceil(x);
    case VK_OP_ROUND: return roundEven(x);
    case VK_OP_SIGN:
        return sel(sel(x, vec4(-1.0), lessThan(x, vec4(0.0))), vec4(1.0), greaterThan(x, vec4(0.0)));
    case VK_OP_RECIPROCAL: return 1.0 / x;
    case VK_OP_NOT: return vec4(equal(x, vec4(0.0)));
    case VK_OP_ERF: return vec4(erf1(x.x), erf1(x.y), erf1(x.z), erf1(x.w));
    case VK_OP_LOG1P: return vec4(log1p1(x.x), log1p1(x.y), log1p1(x.z), log1p1(x.w));
    case VK_OP_EXPM1: return vec4(expm1_1(x.x), expm1_1(x.y), expm1_1(x.z), expm1_1(x.w));
    case VK_OP_LOG2: return vec4(log2_1(x.x), log2_1(x.y), log2_1(x.z), log2_1(x.w));
    case VK_OP_TAN: return sel(vec4(tan1(x.x), tan1(x.y), tan1(x.z), tan1(x.w)), x, equal(x, vec4(0.0))); // keeps -0
    case VK_OP_ASIN: return vec4(asin1(x.x), asin1(x.y), asin1(x.z), asin1(x.w));
    case VK_OP_ACOS: return vec4(acos1(x.x), acos1(x.y), acos1(x.z), acos1(x.w));
    case VK_OP_ATAN: return vec4(atan1(x.x), atan1(x.y), atan1(x.z), atan1(x.w));
    case VK_OP_SINH: return vec4(sinh1(x.x), sinh1(x.y), sinh1(x.z), sinh1(x.w));
    case VK_OP_COSH: return vec4(cosh1(x.x), cosh1(x.y), cosh1(x.z), cosh1(x.w));
    case VK_OP_TRUNC: return trunc(x);
    case VK_OP_GELU: return vec4(gelu1(x.x), gelu1(x.y), gelu1(x.z), gelu1(x.w));
    default: return x; // VK_OP_CAST between float32 tensors: a copy
    }
}

bvec4 isnan4(vec4 x) { return bvec4(isnan(x.x), isnan(x.y), isnan(x.z), isnan(x.w)); }
bvec4 or4(bvec4 a, bvec4 b) { return bvec4(a.x || b.x, a.y || b.y, a.z || b.z, a.w || b.w); }
bvec4 and4(bvec4 a, bvec4 b) { return bvec4(a.x && b.x, a.y && b.y, a.z && b.z, a.w && b.w); }

vec4 binary_f(uint op, vec4 a, vec4 b)
{
    switch (op) {
    case VK_OP_ADD: return a + b;
    case VK_OP_SUB: return a - b;
    case VK_OP_MUL: return a * b;
    // correctly rounded as on the CPU: a quotient near a tie feeds round() (ONNX's quantizers)
    case VK_OP_DIV: return vec4(div_rn(a.x, b.x), div_rn(a.y, b.y), div_rn(a.z, b.z), div_rn(a.w, b.w));
    case VK_OP_POW: return vec4(pow1(a.x, b.x), pow1(a.y, b.y), pow1(a.z, b.z), pow1(a.w, b.w));
    case VK_OP_MAXIMUM: return sel(b, a, or4(greaterThan(a, b), isnan4(a)));
    case VK_OP_MINIMUM: return sel(b, a, or4(lessThan(a, b), isnan4(a)));
    case VK_OP_FLOORDIV:
        return vec4(floordiv1(a.x, b.x), floordiv1(a.y, b.y), floordiv1(a.z, b.z),
                    floordiv1(a.w, b.w));
    case VK_OP_REMAINDER:
        return vec4(mod1(a.x, b.x), mod1(a.y, b.y), mod1(a.z, b.z), mod1(a.w, b.w));
    case VK_OP_ATAN2:
        return vec4(atan2_1(a.x, b.x), atan2_1(a.y, b.y), atan2_1(a.z, b.z), atan2_1(a.w, b.w));
    case VK_OP_FMOD:
        return vec4(fmod1(a.x, b.x), fmod1(a.y, b.y), fmod1(a.z, b.z), fmod1(a.w, b.w));
    case VK_OP_EQ: return vec4(equal(a, b));
    case VK_OP_NE: return vec4(not(equal(a, b)));
    case VK_OP_LT: return vec4(lessThan(a, b));
    case VK_OP_LE: return vec4(lessThanEqual(a, b));
    case VK_OP_GT: return vec4(greaterThan(a, b));
    case VK_OP_GE: return vec4(greaterThanEqual(a, b));
    case VK_OP_AND: return vec4(and4(not(equal(a, vec4(0.0))), not(equal(b, vec4(0.0)))));
    default: return vec4(or4(not(equal(a, vec4(0.0))), not(equal(b, vec4(0.0)))));
    }
}

ivec4 unary_i(uint op, ivec4 x)
{
    switch (op) {
    case VK_OP_NEG: return -x;
    case VK_OP_ABS: return abs(x);
    case VK_OP_RELU: return max(x, ivec4(0));
    case VK_OP_SIGN: return sign(x);
    case VK_OP_NOT: return ivec4(equal(x, ivec4(0)));
    default: return x;
    }
}

ivec4 binary_i(uint op, ivec4 a, ivec4 b)
{
    switch (op) {
    case VK_OP_ADD: return a + b;
    case VK_OP_SUB: return a - b;
    case VK_OP_MUL: return a * b;
    case VK_OP_MAXIMUM: return max(a, b);
    case VK_OP_MINIMUM: return min(a, b);
    case VK_OP_FLOORDIV:
        return ivec4(floordiv_i1(a.x, b.x), floordiv_i1(a.y, b.y), floordiv_i1(a.z, b.z),
                     floordiv_i1(a.w, b.w));
    case VK_OP_REMAINDER:
        return ivec4(mod_i1(a.x, b.x), mod_i1(a.y, b.y), mod_i1(a.z, b.z), mod_i1(a.w, b.w));
    case VK_OP_FMOD:
        return ivec4(fmod_i1(a.x, b.x), fmod_i1(a.y, b.y), fmod_i1(a.z, b.z), fmod_i1(a.w, b.w));
    case VK_OP_EQ: return ivec4(equal(a, b));
    case VK_OP_NE: return ivec4(notEqual(a, b));
    case VK_OP_LT: return ivec4(lessThan(a, b));
    case VK_OP_LE: return ivec4(lessThanEqual(a, b));
    case VK_OP_GT: return ivec4(greaterThan(a, b));
    case VK_OP_GE: return ivec4(greaterThanEqual(a, b));
    case VK_OP_AND: return ivec4(and4(notEqual(a, ivec4(0)), notEqual(b, ivec4(0))));
    default: return ivec4(or4(notEqual(a, ivec4(0)), notEqual(b, ivec4(0))));
    }
}

// The workgroup's linear index when a large dispatch is spread over x, y and z.
uint group_index()
{
    return (gl_WorkGroupID.z * gl_NumWorkGroups.y + gl_WorkGroupID.y) * gl_NumWorkGroups.x +
           gl_WorkGroupID.x;
}
