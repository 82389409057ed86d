/*
 * profile.h — the profiler's recorder, for the two places that run kernels: the dispatcher
 * (eager ops) and jit/exec.c (a plan's steps). Off, each of them reads td_profile_on once per
 * op: one predictable branch. docs/profile.md says what is measured.
 *   profile.c          begin/end, the event buffer, interned strings, TIDE_PROFILE
 *   profile_cost.c     bytes moved and FLOPs per primitive
 *   profile_report.c   rows, the table, the Chrome trace
 *   profile_roofline.c the references: STREAM triad and sgemm, measured in the process
 */
#ifndef TIDE_OPS_PROFILE_H
#define TIDE_OPS_PROFILE_H

#include "../core/tensor.h"

/* Set only between tide_profile_begin and tide_profile_end. */
extern bool td_profile_on;

static inline bool td_profiling(void) { return __atomic_load_n(&td_profile_on, __ATOMIC_RELAXED); }

/* A monotonic clock in microseconds. */
double td_profile_now_us(void);
/* A string's id (0 is ""), kept until the next tide_profile_begin; -1 when out of memory. */
int td_profile_intern(const char *s);
/* The calling thread's source line (tide_profile_set_where's callback), interned; 0 if none. */
int td_profile_where(void);
/* Waits for a device that queues its kernels (Vulkan), so a timer around a kernel sees it run. */
void td_profile_sync(tide_device *dev);
/* One timed run of a kernel or group: it started at t0_us (td_profile_now_us) and took dur_us. */
void td_profile_record(const char *name, const tide_device *dev, int where, double t0_us,
                       double dur_us, int64_t bytes, int64_t flops);

/* A kernel timed from start to end, for the dispatcher and a plan's steps alike: start waits
 * for dev's queue and returns the time; end waits again and records op (its result out, the
 * destination of an in-place op; its operands in) with its cost and source line. */
double td_profile_kernel_start(tide_device *dev);
void td_profile_kernel_end(int op, tide_device *dev, int where, const tide_tensor *out,
                           tide_tensor *const *in, int nin, double t0_us);

/* ---- costs (profile_cost.c) ---- */
typedef struct td_prof_shape {
    int ndim;
    const int64_t *shape;
} td_prof_shape;
/* FLOPs of one primitive from its result's and operands' shapes (the counts are in the file). */
int64_t td_profile_flops(int op, td_prof_shape out, const td_prof_shape *in, int nin);
/* Bytes a tensor's elements occupy, counting a broadcast (stride 0) dim once. */
int64_t td_profile_bytes(const tide_tensor *t);
/* An eager kernel's cost: its operands read and its result written. */
void td_profile_kernel_cost(int op, const tide_tensor *out, tide_tensor *const *in, int nin,
                            int64_t *bytes, int64_t *flops);

/* ---- references (profile_roofline.c) ---- */
/* Measures STREAM triad (GB/s) and sgemm (GFLOP/s) once per process; writes the CPU's name. */
void td_profile_roofline(double *stream_gbps, double *sgemm_gflops, char *cpu, size_t n);

#endif /* TIDE_OPS_PROFILE_H */
