/*
 * test_api.c — the parts of tide.h about the API itself rather than an op: the version macros
 * and tide_version(), the error code beside the message (tide_last_error_code) for each kind of
 * failure, tide_item_int64 beyond 2^53, the const and mutable data pointers, and that
 * tide_jit_cache_clear leaves live graphs working.
 */
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "core/tensor.h" /* td_error_code, td_fault_alloc_set (test-only) */
#include "tide.h"
#include "test_util.h"

/* Checks that call failed (NULL or -1, as failed_ says) with code and a message. */
#define CHECK_CODE(failed_, code, what)                                                            \
    CHECK((failed_) && tide_last_error_code() == (code) && tide_last_error()[0],                  \
          "%s: code %d (want %d), error \"%s\"", what, tide_last_error_code(), (int)(code),        \
          tide_last_error())

static void test_version(void)
{
    char want[32];
    snprintf(want, sizeof want, "%d.%d.%d", TIDE_VERSION_MAJOR, TIDE_VERSION_MINOR,
             TIDE_VERSION_PATCH);
    CHECK(strcmp(tide_version(), want) == 0, "tide_version %s, macros %s", tide_version(), want);
    /* the version CMake gives the shared library, tide.pc and tideConfigVersion.cmake */
    CHECK(strcmp(tide_version(), TIDE_CMAKE_VERSION) == 0, "tide_version %s, CMake %s",
          tide_version(), TIDE_CMAKE_VERSION);
}

static void test_codes_of_failures(void)
{
    tide_clear_error();
    CHECK(tide_last_error_code() == TIDE_OK && !tide_last_error()[0], "clear: code %d",
          tide_last_error_code());

    /* a bad shape: the caller's mistake */
    tide_tensor *a = tide_zeros(2, (int64_t[]){2, 3}, TIDE_FLOAT32);
    tide_tensor *b = tide_zeros(1, (int64_t[]){4}, TIDE_FLOAT32);
    tide_tensor *c = tide_add(a, b);
    CHECK_CODE(!c, TIDE_ERR_INVALID_ARGUMENT, "add [2,3] + [4]");
    CHECK_CODE(!tide_view(a, 1, (int64_t[]){5}), TIDE_ERR_INVALID_ARGUMENT, "view as [5]");

    /* a call that succeeds leaves the last error as it was, message and code */
    char before[512];
    snprintf(before, sizeof before, "%s", tide_last_error());
    c = tide_add(a, a);
    CHECK(c && tide_last_error_code() == TIDE_ERR_INVALID_ARGUMENT &&
              strcmp(before, tide_last_error()) == 0,
          "success changed the error: code %d \"%s\"", tide_last_error_code(), tide_last_error());
    tide_release(c);

    /* an allocation that fails, injected: the first allocation from now on and every later one */
    td_fault_alloc_set(1, true);
    c = tide_zeros(1, (int64_t[]){1000}, TIDE_FLOAT32);
    td_fault_alloc_set(0, false);
    CHECK_CODE(!c, TIDE_ERR_OUT_OF_MEMORY, "zeros with allocations failing");
    /* past the memory cap */
    tide_set_memory_limit(1 << 20);
    c = tide_zeros(1, (int64_t[]){1 << 20}, TIDE_FLOAT32); /* 4 MiB */
    tide_set_memory_limit(0);
    CHECK_CODE(!c, TIDE_ERR_OUT_OF_MEMORY, "zeros past a 1 MiB cap");

    /* files: missing, malformed, valid but unsupported, and a saver's argument */
    CHECK_CODE(!tide_load_npy("/nonexistent/tide_test_api.npy"), TIDE_ERR_IO, "missing .npy");
    CHECK_CODE(!tide_load_safetensors("/nonexistent/x.safetensors"), TIDE_ERR_IO,
               "missing .safetensors");
    char path[64];
    snprintf(path, sizeof path, "/tmp/tide_test_api_%d.npy", (int)getpid());
    FILE *f = fopen(path, "wb");
    fputs("this is not a .npy file at all", f);
    fclose(f);
    CHECK_CODE(!tide_load_npy(path), TIDE_ERR_IO, "garbage .npy");
    /* complex64 (<c8): a valid .npy tide does not read */
    char header[128];
    int len = snprintf(header, sizeof header,
                       "{'descr': '<c8', 'fortran_order': False, 'shape': (1,), }");
    while ((10 + len + 1) % 64)
        header[len++] = ' ';
    header[len++] = '\n';
    f = fopen(path, "wb");
    fwrite("\x93NUMPY\x01\x00", 1, 8, f);
    fputc(len & 0xff, f);
    fputc(len >> 8, f);
    fwrite(header, 1, (size_t)len, f);
    fwrite("\x00\x00\x80\x3f\x00\x00\x00\x00", 1, 8, f); /* 1 + 0i */
    fclose(f);
    CHECK_CODE(!tide_load_npy(path), TIDE_ERR_UNSUPPORTED, "complex64 .npy");
    CHECK_CODE(tide_save_npy(path, NULL) == -1, TIDE_ERR_INVALID_ARGUMENT, "save_npy(NULL)");
    /* a valid file whose load runs out of memory is out of memory, not I/O */
    CHECK(tide_save_npy(path, a) == 0, "save_npy: %s", tide_last_error());
    td_fault_alloc_set(1, true);
    c = tide_load_npy(path);
    td_fault_alloc_set(0, false);
    CHECK_CODE(!c, TIDE_ERR_OUT_OF_MEMORY, "load_npy with allocations failing");
    tide_release(c);
    unlink(path);

    /* a device that does not exist is the caller's mistake; one this machine lacks is not */
    CHECK_CODE(!tide_to(a, "no_such_device"), TIDE_ERR_INVALID_ARGUMENT, "to no_such_device");
    CHECK_CODE(!tide_to(a, "cpu:1"), TIDE_ERR_INVALID_ARGUMENT, "to cpu:1");
    if (tide_vulkan_available(NULL, 0)) {
        CHECK_CODE(!tide_to(a, "vulkan:99"), TIDE_ERR_INVALID_ARGUMENT, "to vulkan:99");
    } else {
        c = tide_to(a, "vulkan");
        CHECK_CODE(!c, TIDE_ERR_UNSUPPORTED, "to vulkan without Vulkan");
        tide_release(c);
    }

    tide_clear_error();
    CHECK(tide_last_error_code() == TIDE_OK, "clear after errors: code %d", tide_last_error_code());
    tide_release(a);
    tide_release(b);
}

/* td_error's rules, which the library's own reports rely on (core/error.c). */
static void test_code_rules(void)
{
    td_error("op: out of memory for %d bytes", 64);
    CHECK(tide_last_error_code() == TIDE_ERR_OUT_OF_MEMORY, "the wording: %d",
          tide_last_error_code());
    td_error("vulkan: out of device memory");
    CHECK(tide_last_error_code() == TIDE_ERR_OUT_OF_MEMORY, "device wording: %d",
          tide_last_error_code());
    td_error_code(TIDE_ERR_IO, "load: f: out of memory");
    CHECK(tide_last_error_code() == TIDE_ERR_OUT_OF_MEMORY, "the wording beats a code: %d",
          tide_last_error_code());
    td_error_code(TIDE_ERR_UNSUPPORTED, "cpu: no kernel for op x");
    td_error("outer op: %s", tide_last_error()); /* a caller adding its name */
    CHECK(tide_last_error_code() == TIDE_ERR_UNSUPPORTED &&
              strcmp(tide_last_error(), "outer op: cpu: no kernel for op x") == 0,
          "a wrapped error keeps its code: %d \"%s\"", tide_last_error_code(), tide_last_error());
    td_error("another op: bad dim 3");
    CHECK(tide_last_error_code() == TIDE_ERR_INVALID_ARGUMENT, "a new message: %d",
          tide_last_error_code());
    td_error("x: internal error: an operand is missing");
    CHECK(tide_last_error_code() == TIDE_ERR_INTERNAL, "internal wording: %d",
          tide_last_error_code());
    td_error_code(TIDE_ERR_UNSUPPORTED, "y: explicit");
    CHECK(tide_last_error_code() == TIDE_ERR_UNSUPPORTED, "explicit: %d", tide_last_error_code());
    tide_clear_error();
}

static void *other_thread(void *arg)
{
    *(int *)arg = tide_last_error_code();
    return NULL;
}

static void test_code_per_thread(void)
{
    td_error_code(TIDE_ERR_IO, "this thread's error");
    int seen = -1;
    pthread_t th;
    pthread_create(&th, NULL, other_thread, &seen);
    pthread_join(th, NULL);
    CHECK(seen == TIDE_OK && tide_last_error_code() == TIDE_ERR_IO,
          "another thread saw code %d; this one has %d", seen, tide_last_error_code());
    tide_clear_error();
}

static void check_item_int64(tide_tensor *t, int64_t want, const char *what)
{
    int64_t got = 0;
    int rc = tide_item_int64(t, &got);
    CHECK(rc == 0 && got == want, "%s: rc %d, got %lld, want %lld (%s)", what, rc,
          (long long)got, (long long)want, tide_last_error());
    tide_release(t);
}

static void test_item_int64(void)
{
    const int64_t beyond = ((int64_t)1 << 53) + 1; /* the first integer a double cannot hold */
    check_item_int64(tide_integer(beyond), beyond, "2^53+1");
    check_item_int64(tide_integer(-beyond), -beyond, "-(2^53+1)");
    check_item_int64(tide_integer(INT64_MAX), INT64_MAX, "INT64_MAX");
    check_item_int64(tide_integer(INT64_MIN), INT64_MIN, "INT64_MIN");
    int64_t three[3] = {1, INT64_MAX - 1, 3};
    tide_tensor *v = tide_from_data(three, 1, (int64_t[]){3}, TIDE_INT64);
    check_item_int64(tide_select(v, 0, 1), INT64_MAX - 1, "an element of a view");
    /* the double path cannot tell 2^53+1 from 2^53; this is why the function exists */
    double d = 0;
    tide_tensor *t = tide_integer(beyond);
    CHECK(tide_item(t, &d) == 0 && d == 0x1p53, "tide_item rounds 2^53+1 to %.17g", d);
    tide_release(t);

    int32_t i32 = -7;
    check_item_int64(tide_from_data(&i32, 0, NULL, TIDE_INT32), -7, "int32");
    uint8_t u8 = 255;
    check_item_int64(tide_from_data(&u8, 0, NULL, TIDE_UINT8), 255, "uint8");
    bool yes = true;
    check_item_int64(tide_from_data(&yes, 0, NULL, TIDE_BOOL), 1, "bool");
    check_item_int64(tide_scalar(0x1p53, TIDE_FLOAT64), (int64_t)1 << 53, "float64 2^53");
    check_item_int64(tide_scalar(-0x1p63, TIDE_FLOAT64), INT64_MIN, "float64 -2^63");
    check_item_int64(tide_scalar(-3.0, TIDE_FLOAT32), -3, "float32 -3");

    /* floats that are not an int64 */
    const double bad[] = {2.5, 0x1p63, -0x1p64, NAN, INFINITY};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        int64_t got = 42;
        t = tide_scalar(bad[i], TIDE_FLOAT64);
        int rc = tide_item_int64(t, &got);
        CHECK(rc == -1 && got == 42 && strstr(tide_last_error(), "item_int64") &&
                  tide_last_error_code() == TIDE_ERR_INVALID_ARGUMENT,
              "%g: rc %d got %lld \"%s\"", bad[i], rc, (long long)got, tide_last_error());
        tide_release(t);
    }
    int64_t got = 0;
    CHECK(tide_item_int64(v, &got) == -1 && strstr(tide_last_error(), "shape [3]"),
          "3 elements: \"%s\"", tide_last_error());
    CHECK(tide_item_int64(NULL, &got) == -1 && strstr(tide_last_error(), "item_int64"),
          "NULL tensor: \"%s\"", tide_last_error());
    CHECK(tide_item_int64(v, NULL) == -1 && strstr(tide_last_error(), "item_int64"),
          "NULL value: \"%s\"", tide_last_error());
    tide_release(v);
}

static void test_data_ptr(void)
{
    tide_tensor *t = tide_zeros(1, (int64_t[]){4}, TIDE_FLOAT32);
    const float *r = tide_data_ptr(t);
    float *w = tide_mutable_data_ptr(t);
    CHECK(r && (const void *)w == (const void *)r, "const %p, mutable %p", (const void *)r,
          (void *)w);
    w[2] = 7.5f;
    tide_tensor *e = tide_select(t, 0, 2);
    double v = 0;
    CHECK(tide_item(e, &v) == 0 && v == 7.5 && r[2] == 7.5f, "written through the mutable "
          "pointer: %g", v);
    /* a view's pointer is its first element */
    CHECK(tide_data_ptr(e) == (const void *)(r + 2), "view pointer");
    CHECK(tide_data_ptr(NULL) == NULL && tide_mutable_data_ptr(NULL) == NULL, "NULL tensor");
    tide_release(e);
    tide_release(t);
}

/* tide.h: tide_jit_cache_clear drops the cache's plans; a live graph keeps its own. */
static void test_cache_clear_with_live_graph(void)
{
    tide_tensor *x = tide_zeros(1, (int64_t[]){4}, TIDE_FLOAT32);
    tide_tensor *in[1] = {x};
    CHECK(tide_jit_begin(in, 1) == 0, "jit_begin: %s", tide_last_error());
    tide_tensor *y2 = tide_mul_scalar(x, 2.0);
    tide_tensor *y = tide_add_scalar(y2, 1.0);
    tide_graph *g = tide_jit_end(&y, 1);
    CHECK(g != NULL, "jit_end: %s", tide_last_error());
    tide_release(y2);
    tide_release(y);
    tide_jit_cache_clear();
    float xs[4] = {0, 1, -2, 0.5f};
    tide_tensor *x2 = tide_from_data(xs, 1, (int64_t[]){4}, TIDE_FLOAT32);
    tide_tensor *out = NULL;
    CHECK(g && tide_graph_run(g, &x2, 1, &out) == 0, "run after clear: %s", tide_last_error());
    float got[4] = {0};
    CHECK(out && tide_to_buffer(out, got, sizeof got) == 0, "read: %s", tide_last_error());
    /* x*2+1 is exact in float32 for these values */
    CHECK(got[0] == 1 && got[1] == 3 && got[2] == -3 && got[3] == 2, "got %g %g %g %g", got[0],
          got[1], got[2], got[3]);
    tide_release(out);
    tide_release(x2);
    tide_graph_free(g);
    tide_release(x);
}

int main(void)
{
    test_version();
    test_codes_of_failures();
    test_code_rules();
    test_code_per_thread();
    test_item_int64();
    test_data_ptr();
    test_cache_clear_with_live_graph();
    tide_shutdown();
    return test_summary("test_api");
}
