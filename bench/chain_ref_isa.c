/*
 * chain_ref_isa.c — the ceiling bench_jit sets beside tide's fused tanh chain: the same chain,
 * tanh(x*a+b) * sigmoid(x) + c, written as one C loop that gcc -O3 compiles for one vector ISA,
 * calling SLEEF's vector functions of that width (tanhf u35, expf u10; sigmoid as 1/(1+e^-x)).
 *
 * Compiled once per tier by bench/CMakeLists.txt with tide's own flags for that tier (plain
 * x86-64 SSE2; -mavx2 -mfma; -mavx512f...) and REF_ISA naming the symbol; bench_jit calls the
 * one td_cpu_isa() picks, so TIDE_CPU_ISA caps the reference as it caps tide. Only the bench
 * uses target-specific flags.
 */
#include <stdint.h>
#include <string.h>

#include <immintrin.h>
#include <sleef.h>

#ifndef REF_ISA
#error "chain_ref_isa.c is compiled with REF_ISA set (bench/CMakeLists.txt)"
#endif
#define REF_CAT2(a, b) a##_##b
#define REF_CAT(a, b) REF_CAT2(a, b)

#if defined(__AVX512F__)
typedef __m512 vsleef;
#define REF_TANH Sleef_tanhf16_u35avx512f
#define REF_EXP Sleef_expf16_u10avx512f
#elif defined(__AVX2__)
typedef __m256 vsleef;
#define REF_TANH Sleef_tanhf8_u35avx2
#define REF_EXP Sleef_expf8_u10avx2
#else
typedef __m128 vsleef;
#define REF_TANH Sleef_tanhf4_u35sse2
#define REF_EXP Sleef_expf4_u10sse2
#endif
typedef float vf __attribute__((vector_size(sizeof(vsleef))));

static inline vf chain(vf x, float a, float b, float c)
{
    vf t = (vf)REF_TANH((vsleef)(x * a + b));
    vf s = 1.0f / (1.0f + (vf)REF_EXP((vsleef)-x));
    return t * s + c;
}

void REF_CAT(chain_ref, REF_ISA)(float *out, const float *x, int64_t n, float a, float b,
                                 float c);

void REF_CAT(chain_ref, REF_ISA)(float *out, const float *x, int64_t n, float a, float b, float c)
{
    enum { W = sizeof(vf) / sizeof(float) };
    int64_t i = 0;
    for (; i + W <= n; i += W) {
        vf v;
        memcpy(&v, x + i, sizeof v);
        v = chain(v, a, b, c);
        memcpy(out + i, &v, sizeof v);
    }
    if (i < n) {
        float pad[W] = {0};
        memcpy(pad, x + i, (size_t)(n - i) * sizeof(float));
        vf v;
        memcpy(&v, pad, sizeof v);
        v = chain(v, a, b, c);
        memcpy(pad, &v, sizeof v);
        memcpy(out + i, pad, (size_t)(n - i) * sizeof(float));
    }
}
