/* cpu_features.c — detects the vector ISA once (cpuid through gcc's builtins); see cpu_isa.h. */
#include "cpu_isa.h"

#include <cpuid.h>
#include <stdlib.h>
#include <string.h>

/* F16C through cpuid itself: clang's __builtin_cpu_supports does not know "f16c". */
static int has_f16c(void)
{
    unsigned a, b, c, d;
    return __get_cpuid(1, &a, &b, &c, &d) && (c & bit_F16C);
}

static td_isa_level detect(void)
{
    __builtin_cpu_init();
    td_isa_level best = TD_ISA_BASELINE;
    /* the avx2 tier is compiled with -mf16c too (float16 casts: cpu_half_isa.c) */
    if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && has_f16c())
        best = TD_ISA_AVX2;
    if (best == TD_ISA_AVX2 && __builtin_cpu_supports("avx512f") &&
        __builtin_cpu_supports("avx512dq") && __builtin_cpu_supports("avx512bw") &&
        __builtin_cpu_supports("avx512vl"))
        best = TD_ISA_AVX512;
    /* A user may ask for less (to compare, or to dodge a CPU erratum), never for more. */
    const char *want = getenv("TIDE_CPU_ISA");
    if (want) {
        td_isa_level cap = best;
        if (strcmp(want, "baseline") == 0)
            cap = TD_ISA_BASELINE;
        else if (strcmp(want, "avx2") == 0)
            cap = TD_ISA_AVX2;
        else if (strcmp(want, "avx512") == 0)
            cap = TD_ISA_AVX512;
        if (cap < best)
            best = cap;
    }
    return best;
}

td_isa_level td_cpu_isa(void)
{
    static int level = -1; /* benign race: every thread computes the same value */
    int l = __atomic_load_n(&level, __ATOMIC_RELAXED);
    if (l < 0) {
        l = (int)detect();
        __atomic_store_n(&level, l, __ATOMIC_RELAXED);
    }
    return (td_isa_level)l;
}

const char *td_cpu_isa_name(td_isa_level level)
{
    switch (level) {
    case TD_ISA_AVX512: return "avx512";
    case TD_ISA_AVX2: return "avx2";
    default: return "baseline";
    }
}
