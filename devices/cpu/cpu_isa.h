/*
 * cpu_isa.h — run-time choice of the vector ISA for the CPU kernels.
 *
 * Files named *_isa.c are compiled three times (CMakeLists.txt): with TD_ISA defined as
 * baseline (x86-64 SSE2), avx2 (+FMA) and avx512 (F/DQ/BW/VL). Each compile names its symbols
 * with TD_ISA_FN(name) -> name_baseline / name_avx2 / name_avx512, and a plain .c file picks one
 * set through td_cpu_isa(), once. So no -march=native ships, and every x86-64 runs the best code
 * it can.
 */
#ifndef TIDE_CPU_ISA_H
#define TIDE_CPU_ISA_H

#define TD_ISA_CAT2(a, b) a##_##b
#define TD_ISA_CAT(a, b) TD_ISA_CAT2(a, b)
#ifdef TD_ISA
#define TD_ISA_FN(name) TD_ISA_CAT(name, TD_ISA)
#endif

typedef enum td_isa_level { TD_ISA_BASELINE = 0, TD_ISA_AVX2 = 1, TD_ISA_AVX512 = 2 } td_isa_level;

/* The best level this CPU supports, capped by TIDE_CPU_ISA=baseline|avx2|avx512 when set. */
td_isa_level td_cpu_isa(void);
const char *td_cpu_isa_name(td_isa_level level);

#endif
