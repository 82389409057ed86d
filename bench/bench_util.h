/*
 * bench_util.h — what the C benchmarks share: clocks, the median of alternating slices, and the
 * machine line every figure is printed beside (CPU model and ISA tier).
 */
#ifndef TIDE_BENCH_UTIL_H
#define TIDE_BENCH_UTIL_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "../devices/cpu/cpu_isa.h"

static inline double clock_seconds(clockid_t clock)
{
    struct timespec ts;
    clock_gettime(clock, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

static inline double now_seconds(void) { return clock_seconds(CLOCK_MONOTONIC); }

static inline int compare_doubles(const void *x, const void *y)
{
    double a = *(const double *)x, b = *(const double *)y;
    return (a > b) - (a < b);
}

/* The median of v[0..n) (sorted in place). */
static inline double median_of(double *v, int n)
{
    qsort(v, (size_t)n, sizeof v[0], compare_doubles);
    return 0.5 * (v[(n - 1) / 2] + v[n / 2]);
}

/* The "cpu_model: ..." line. */
static inline void print_cpu_model(void)
{
    char line[256], model[256] = "unknown";
    FILE *f = fopen("/proc/cpuinfo", "r");
    while (f && fgets(line, sizeof line, f)) {
        const char *v = strchr(line, ':');
        if (strncmp(line, "model name", 10) == 0 && v) {
            snprintf(model, sizeof model, "%s", v + 2);
            model[strcspn(model, "\n")] = 0;
            break;
        }
    }
    if (f)
        fclose(f);
    printf("cpu_model: %s\n", model);
}

/* "cpu_model: ..." and "cpu_isa: ..." lines. */
static inline void print_machine(void)
{
    print_cpu_model();
    printf("cpu_isa: %s\n", td_cpu_isa_name(td_cpu_isa()));
}

#endif /* TIDE_BENCH_UTIL_H */
