/*
 * cpu_jit.h — the CPU device's side of the jit (jit/group.h): the layout of a group's scratch,
 * the code generator (cpu_codegen.c: C compiled in-process by libtcc, or an interpreter of the
 * same program), and the runner that splits a group's rows over the threads and runs a
 * matmul's epilogue block by block (cpu_jit_run.c).
 */
#ifndef TIDE_CPU_JIT_H
#define TIDE_CPU_JIT_H

#include "../../jit/group.h"

/* Gather descriptor for an input read through strides: the group domain's index space
 * (FULL inputs: the domain; ROW inputs: the rows) mapped to the input's elements. */
typedef struct jit_gather {
    int ndim;
    int es;
    int64_t shape[TIDE_MAX_DIMS];
    int64_t strides[TIDE_MAX_DIMS]; /* in elements, 0 on broadcast dims */
    const char *base;               /* set per run */
} jit_gather;

/* The device hooks (core/device.h). */
bool td_cpu_jit_member(tide_device *dev, int op, int dtype);
int64_t td_cpu_jit_epilogue_rows(tide_device *dev, const void *plan, int p);
int td_cpu_jit_compile(tide_device *dev, const void *plan, void *group, int index);
int td_cpu_jit_run(tide_device *dev, const void *plan, const void *group, tide_tensor *const *t);
void td_cpu_jit_free(tide_device *dev, void *group);

/* Runs group g, the epilogue of a conv2d (t as in jit/group.h), inside the convolution's stores
 * when it is a bias per channel and/or a ReLU (cpu_jit_conv.c): 1 when done, 0 when not this
 * case (nothing written: run the convolution, then the group), -1 with the error set. */
int td_cpu_jit_conv_fused(const jit_plan *c, const jit_group *g, tide_tensor *const *t);

/* Lays out group g's scratch (tiles, operand buffers, splats, streaming tiles). */
void td_cpu_jit_layout(const jit_plan *c, jit_group *g);
/* Renders group g of c as C, compiles it with libtcc and sets g->fn (or leaves it NULL, so the
 * group runs through the interpreter, when codegen is off). 0 or -1. */
int td_cpu_codegen_group(const jit_plan *c, jit_group *g, int index);
void td_cpu_codegen_free(jit_group *g);
/* The interpreter of a group's program, the same computation as the generated code. 0, or -1
 * (nothing computed) when out of memory; the caller sets the error. */
int td_cpu_group_interpret(const jit_plan *c, const jit_group *g, void **args, int64_t r0,
                           int64_t r1, char *scratch);
/* A group's rows are split over threads in chunks of at least this many elements (64K split in
 * two, as eager's cheap ops: cpu_elementwise.c PAR_MIN_CHEAP); a group this small or smaller
 * runs on one thread. */
#define JIT_GROUP_GRAIN_ELEMS 32768
/* Rows of C per BLAS call when the CPU device runs a product of nbatch [m, k] x [k, n]
 * matrices eagerly (a batch folded into one tall product is one matrix), or 0 when it cuts C
 * by columns (cpu_matmul.c): a matmul's epilogue blocks are these calls. */
int64_t td_cpu_matmul_call_rows(int64_t nbatch, int64_t m, int64_t n, int64_t k);

/* Helpers the generated code calls (also used by the interpreter). */
void td_jit_gather(const jit_gather *d, void *dst, int64_t begin, int64_t n);
void td_jit_splat(int64_t es, void *dst, const void *src, int64_t n);
void td_jit_stream(void *dst, const void *src, int64_t bytes);
void td_jit_stream_fence(void);
void td_jit_prefetch(const void *base, int64_t begin, int64_t n, int64_t total, int64_t es,
                     int write);
void td_jit_reduce(int op, int dtype, int odtype, void *out, const void *x, int64_t n);
void td_jit_cast(int64_t n, void *out, int odtype, const void *x, int idtype);
/* Whether input slot sl is read in place; the others are gathered into scratch, per tile or
 * (JIT_TILE_CONST) once per call. */
static inline bool td_cpu_slot_in_place(const jit_slot *sl)
{
    return sl->direct == JIT_IN_PLACE || sl->direct == JIT_PERIODIC;
}
/* The kernel pointers a group member calls (NULL when the op has no tile kernel). */
void *td_jit_tile_kernel(int op, int dtype);

#endif /* TIDE_CPU_JIT_H */
