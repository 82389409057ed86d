/*
 * test_util.h — the few macros every C test program uses. A failed CHECK prints where and why
 * and the program goes on, so one run shows every failure; test_summary() prints the closing
 * "N passed, N failed" line and gives the exit status.
 */
#ifndef TIDE_TEST_UTIL_H
#define TIDE_TEST_UTIL_H

#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

/* RUNNING_ON_VALGRIND: tests that are slow under valgrind (lavapipe compiling shaders) run a
 * subset there; 0 where valgrind's header is absent. */
#if defined(__has_include)
#if __has_include(<valgrind/valgrind.h>)
#include <valgrind/valgrind.h>
#endif
#endif
#ifndef RUNNING_ON_VALGRIND
#define RUNNING_ON_VALGRIND 0
#endif

static int test_passed, test_failed;

#define CHECK(cond, ...)                                                                           \
    do {                                                                                           \
        if (cond) {                                                                                \
            test_passed++;                                                                         \
        } else {                                                                                   \
            test_failed++;                                                                         \
            fprintf(stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);              \
            fprintf(stderr, __VA_ARGS__);                                                          \
            fputc('\n', stderr);                                                                   \
        }                                                                                          \
    } while (0)

/* Checks that x is NULL and tide_last_error() contains every one of the given fragments. */
#define CHECK_ERROR(x, ...)                                                                        \
    do {                                                                                           \
        tide_tensor *check_error_t_ = (x);                                                         \
        const char *check_error_frags_[] = {__VA_ARGS__, NULL};                                    \
        int check_error_ok_ = check_error_t_ == NULL;                                              \
        for (int i_ = 0; check_error_ok_ && check_error_frags_[i_]; i_++)                          \
            check_error_ok_ = strstr(tide_last_error(), check_error_frags_[i_]) != NULL;          \
        CHECK(check_error_ok_, "%s gave %s with error \"%s\"", #x,                                \
              check_error_t_ ? "a tensor" : "NULL", tide_last_error());                           \
        tide_release(check_error_t_);                                                              \
    } while (0)

/* The spacing of float32 (f32) or float64 numbers just above |want|: an ulp of the reference
 * value in the output dtype (the smallest denormal's at 0). */
static inline double test_ulp_of(double want, bool f32)
{
    int e;
    frexp(want == 0 ? 0x1p-1000 : fabs(want), &e); /* |want| in [2^(e-1), 2^e) */
    double u = ldexp(1.0, e - 1 - (f32 ? 23 : 52));
    double tiny = f32 ? 0x1p-149 : 0x1p-1074;
    return u > tiny ? u : tiny;
}

static inline int test_summary(const char *name)
{
    printf("%s: %d passed, %d failed\n", name, test_passed, test_failed);
    return test_failed ? 1 : 0;
}

#endif
