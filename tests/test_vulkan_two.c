/*
 * test_vulkan_two.c — two Vulkan devices open at once. ctest runs it with the loader shown two
 * copies of lavapipe's ICD file (VK_DRIVER_FILES=a.json:b.json: two physical devices), where it
 * opens "vulkan" and "vulkan:1", runs ops on both, moves tensors between them and checks the
 * values and that each device has its own state; and with one ICD, where "vulkan:1" must be a
 * clear error. Without Vulkan it says so and passes (TIDE_TEST_EXPECT_VULKAN=1 makes that fail).
 *
 * Every value here is a small integer or half-integer in float32, and the ops are add, mul,
 * sum and matmul of at most 16 terms: exact on any device, so values are compared with ==.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "device.h"
#include "tide.h"
#include "test_util.h"

enum { N = 12 }; /* elements of the test vectors; the matrices are 3x4 and 4x3 */

static tide_tensor *vec(double scale, double shift)
{
    float v[N];
    for (int i = 0; i < N; i++)
        v[i] = (float)(i * scale + shift);
    int64_t n = N;
    return tide_from_data(v, 1, &n, TIDE_FLOAT32);
}

/* Whether t has the values of want (n float32s) and sits on device. */
static int same(const tide_tensor *t, const char *device, const float *want, int n)
{
    float got[64];
    if (!t || n > 64 || strcmp(tide_device_name(t), device) != 0)
        return 0;
    if (tide_to_buffer(t, got, (size_t)n * sizeof *got) < 0)
        return 0;
    for (int i = 0; i < n; i++)
        if (got[i] != want[i])
            return 0;
    return 1;
}

/* (x + y) * 3 and the matmul of x as 3x4 by y as 4x3, computed on the device x and y are on. */
static void work(tide_tensor *x, tide_tensor *y, tide_tensor **ew, tide_tensor **mm)
{
    tide_tensor *s = tide_add(x, y);
    *ew = s ? tide_mul_scalar(s, 3) : NULL;
    tide_release(s);
    int64_t sa[2] = {3, 4}, sb[2] = {4, 3};
    tide_tensor *a = tide_reshape(x, 2, sa), *b = tide_reshape(y, 2, sb);
    *mm = a && b ? tide_matmul(a, b) : NULL;
    tide_release(a);
    tide_release(b);
}

static void expected(float *ew, float *mm)
{
    float x[N], y[N];
    for (int i = 0; i < N; i++) {
        x[i] = (float)(i * 0.5 + 1);
        y[i] = (float)(i * 1.0 - 4);
        ew[i] = (x[i] + y[i]) * 3;
    }
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++) {
            float acc = 0;
            for (int k = 0; k < 4; k++)
                acc += x[r * 4 + k] * y[k * 3 + c];
            mm[r * 3 + c] = acc;
        }
}

static void test_listing(int nvk)
{
    /* the kinds in the build's order: cpu, the Vulkan devices, then ref (the reference device) */
    CHECK(tide_device_count() == 2 + nvk, "tide_device_count %d, want %d", tide_device_count(),
          2 + nvk);
    for (int i = 0; i <= nvk; i++) {
        char name[64], about[256], want[32];
        if (i < 2)
            snprintf(want, sizeof want, "%s", i == 0 ? "cpu" : "vulkan");
        else
            snprintf(want, sizeof want, "vulkan:%d", i - 1);
        CHECK(tide_device_info(i, name, sizeof name, about, sizeof about) == 0 &&
                  strcmp(name, want) == 0 && (i == 0 || strstr(about, "(")),
              "device %d: %s (%s), want %s", i, name, about, want);
    }
    char last[64];
    CHECK(tide_device_info(1 + nvk, last, sizeof last, NULL, 0) == 0 && strcmp(last, "ref") == 0,
          "device %d: %s, want ref", 1 + nvk, last);
    CHECK(tide_device_info(2 + nvk, NULL, 0, NULL, 0) < 0 &&
              strstr(tide_last_error(), "no device"),
          "device past the end: %s", tide_last_error());
}

static void test_two(void)
{
    test_listing(2);
    tide_device *d0 = td_device_find("test", "vulkan"), *d1 = td_device_find("test", "vulkan:1");
    CHECK(d0 && d1 && d0 != d1 && d0->state && d1->state && d0->state != d1->state,
          "two devices, each with its own state");
    CHECK(td_device_find("test", "vulkan:0") == d0, "vulkan:0 is the default device \"vulkan\"");
    CHECK(d1 && strcmp(d1->name, "vulkan:1") == 0, "the second device is called vulkan:1");

    float ew[N], mm[9];
    expected(ew, mm);
    tide_tensor *x = vec(0.5, 1), *y = vec(1, -4);
    tide_tensor *x0 = tide_to(x, "vulkan"), *y0 = tide_to(y, "vulkan");
    tide_tensor *x1 = tide_to(x, "vulkan:1"), *y1 = tide_to(y, "vulkan:1");
    /* both devices' batches are recorded before either is read */
    tide_tensor *ew0, *mm0, *ew1, *mm1;
    work(x0, y0, &ew0, &mm0);
    work(x1, y1, &ew1, &mm1);
    CHECK(same(ew0, "vulkan", ew, N) && same(mm0, "vulkan", mm, 9), "ops on vulkan: %s",
          tide_last_error());
    CHECK(same(ew1, "vulkan:1", ew, N) && same(mm1, "vulkan:1", mm, 9), "ops on vulkan:1: %s",
          tide_last_error());

    /* operands on two devices are an error naming both */
    CHECK_ERROR(tide_add(x0, y1), "add", "vulkan", "vulkan:1");

    /* vulkan -> vulkan:1 and back, through tide_to: then computed on with the other's tensors */
    tide_tensor *moved = tide_to(ew0, "vulkan:1");
    tide_tensor *sum = moved ? tide_add(moved, ew1) : NULL;
    float twice[N];
    for (int i = 0; i < N; i++)
        twice[i] = 2 * ew[i];
    CHECK(same(moved, "vulkan:1", ew, N) && same(sum, "vulkan:1", twice, N),
          "vulkan to vulkan:1: %s", tide_last_error());
    tide_tensor *mmt = tide_transpose(mm1, 0, 1); /* a strided view moves as its values */
    tide_tensor *back = mmt ? tide_to(mmt, "vulkan") : NULL;
    float mmT[9];
    for (int r = 0; r < 3; r++)
        for (int c = 0; c < 3; c++)
            mmT[c * 3 + r] = mm[r * 3 + c];
    CHECK(same(back, "vulkan", mmT, 9), "a transposed view from vulkan:1 to vulkan: %s",
          tide_last_error());
    CHECK(tide_sync() == 0, "tide_sync over both devices: %s", tide_last_error());

    CHECK_ERROR(tide_to(x, "vulkan:2"), "to", "vulkan:2", "there are 2 vulkan devices");
    tide_tensor *all[] = {x, y, x0, y0, x1, y1, ew0, mm0, ew1, mm1, moved, sum, mmt, back};
    for (size_t i = 0; i < sizeof all / sizeof all[0]; i++)
        tide_release(all[i]);
}

static void test_one(void)
{
    test_listing(1);
    int64_t n = 2;
    tide_tensor *x = tide_ones(1, &n, TIDE_FLOAT32);
    CHECK_ERROR(tide_to(x, "vulkan:1"), "to", "vulkan:1", "there is 1 vulkan device");
    tide_device *d0 = td_device_find("test", "vulkan");
    CHECK(d0 && d0->state && td_device_find("test", "vulkan:0") == d0 &&
              strcmp(d0->name, "vulkan") == 0,
          "vulkan:0 is the one device, \"vulkan\", with its state");
    tide_tensor *v = tide_to(x, "vulkan:0");
    CHECK(v && strcmp(tide_device_name(v), "vulkan") == 0, "to vulkan:0: %s", tide_last_error());
    tide_release(v);
    tide_release(x);
}

int main(void)
{
    char why[512];
    if (!tide_vulkan_available(why, sizeof why)) {
        const char *expect = getenv("TIDE_TEST_EXPECT_VULKAN");
        printf("test_vulkan_two: no Vulkan device, skipped: %s\n", why);
        CHECK(!(expect && strcmp(expect, "1") == 0), "Vulkan was expected: %s", why);
        return test_summary("test_vulkan_two");
    }
    int nvk = tide_vulkan_device_count();
    printf("test_vulkan_two: %d Vulkan device%s\n", nvk, nvk == 1 ? "" : "s");
    if (nvk >= 2)
        test_two();
    else
        test_one();
    return test_summary("test_vulkan_two");
}
