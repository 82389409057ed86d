/*
 * test_device_create.c — creation on a device and TO as a dispatched op, from C: every
 * creation and random op's _on form and the thread's default device on Vulkan (values read
 * back), the errors for an unknown device, the gradient of tide_to going back to the source
 * device, and gradcheck across cpu <-> vulkan. With no Vulkan, the device-independent parts
 * run (the default device API, the errors, TO cpu -> cpu) and the rest is skipped with why.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "autograd/autograd.h"
#include "tide.h"
#include "test_util.h"

#define NMAX 64

/* t read back as doubles (at most NMAX elements). */
static int64_t read_back(const tide_tensor *t, double *out)
{
    tide_tensor *d = tide_to(t, "cpu");
    tide_tensor *c = d ? tide_cast(d, TIDE_FLOAT64) : NULL;
    int64_t n = c ? tide_numel(c) : -1;
    if (n < 0 || n > NMAX || tide_to_buffer(c, out, sizeof(double) * NMAX) < 0)
        n = -1;
    tide_release(c);
    tide_release(d);
    return n;
}

/* t is on device and holds want[0..n) exactly (small integers and dyadic fractions). */
static void check_on(const char *what, tide_tensor *t, const char *device, const double *want,
                     int64_t n)
{
    CHECK(t != NULL, "%s: %s", what, tide_last_error());
    if (!t)
        return;
    CHECK(strcmp(tide_device_name(t), device) == 0, "%s: on %s, expected %s", what,
          tide_device_name(t), device);
    double got[NMAX];
    int64_t m = read_back(t, got);
    CHECK(m == n, "%s: %lld elements, expected %lld (%s)", what, (long long)m, (long long)n,
          tide_last_error());
    for (int64_t i = 0; i < n && m == n; i++)
        CHECK(got[i] == want[i], "%s[%lld] = %g, expected %g", what, (long long)i, got[i],
              want[i]);
    tide_release(t);
}

/* a and b hold the same values, bit for bit. */
static void check_same(const char *what, tide_tensor *a, tide_tensor *b)
{
    double x[NMAX], y[NMAX];
    int64_t n = a && b ? read_back(a, x) : -1, m = a && b ? read_back(b, y) : -2;
    CHECK(n == m && n >= 0, "%s: %lld vs %lld elements (%s)", what, (long long)n, (long long)m,
          tide_last_error());
    for (int64_t i = 0; i < n && n == m; i++)
        CHECK(x[i] == y[i], "%s[%lld]: %.17g vs %.17g", what, (long long)i, x[i], y[i]);
    tide_release(a);
    tide_release(b);
}

static void test_errors(void)
{
    int64_t shape[1] = {2};
    CHECK_ERROR(tide_zeros_on("nodev", 1, shape, TIDE_FLOAT32), "zeros", "\"nodev\"",
                "unknown device");
    CHECK_ERROR(tide_randn_on("nodev", 1, shape, TIDE_FLOAT32), "randn", "\"nodev\"");
    CHECK_ERROR(tide_arange_on("cpu:7", 0, 3, 1, TIDE_INT64), "arange", "\"cpu:7\"");
    CHECK_ERROR(tide_from_data_on("nodev", shape, 1, shape, TIDE_INT64), "from_data", "nodev");
    CHECK(tide_set_default_device("nodev") < 0 &&
              strstr(tide_last_error(), "set_default_device: device \"nodev\""),
          "set_default_device names itself and the device: %s", tide_last_error());
    CHECK(strcmp(tide_get_default_device(), "cpu") == 0, "the default stays cpu");
}

static void *default_in_thread(void *arg)
{
    (void)arg;
    return (void *)tide_get_default_device();
}

static void test_default_device(const char *device)
{
    CHECK(strcmp(tide_get_default_device(), "cpu") == 0, "cpu unless set");
    CHECK(tide_set_default_device(device) == 0, "set %s: %s", device, tide_last_error());
    int64_t shape[1] = {3};
    double zeros[3] = {0, 0, 0}, ar[3] = {0, 1, 2};
    check_on("default zeros", tide_zeros(1, shape, TIDE_FLOAT32), device, zeros, 3);
    check_on("default arange", tide_arange(0, 3, 1, TIDE_INT32), device, ar, 3);
    tide_tensor *s = tide_scalar(2, TIDE_FLOAT32);
    CHECK(s && strcmp(tide_device_name(s), "cpu") == 0, "tide_scalar stays on the CPU");
    tide_release(s);
    /* per thread: another thread still makes CPU tensors */
    pthread_t th;
    void *other = NULL;
    pthread_create(&th, NULL, default_in_thread, NULL);
    pthread_join(th, &other);
    CHECK(other && strcmp(other, "cpu") == 0, "another thread's default is cpu");
    CHECK(tide_set_default_device("cpu") == 0, "back to cpu");
}

static void test_creation_on(const char *d)
{
    int64_t s23[2] = {2, 3}, s2[1] = {2};
    double z6[6] = {0}, o2[2] = {1, 1}, f4[4] = {2.5, 2.5, 2.5, 2.5};
    check_on("zeros_on", tide_zeros_on(d, 2, s23, TIDE_FLOAT32), d, z6, 6);
    check_on("ones_on int32", tide_ones_on(d, 1, s2, TIDE_INT32), d, o2, 2);
    int64_t s22[2] = {2, 2};
    check_on("full_on", tide_full_on(d, 2, s22, 2.5, TIDE_FLOAT64), d, f4, 4);
    double ar[5] = {1, 2, 3, 4, 5}, quarters[4] = {0, 0.25, 0.5, 0.75};
    check_on("arange_on", tide_arange_on(d, 1, 6, 1, TIDE_INT64), d, ar, 5);
    check_on("arange_on float", tide_arange_on(d, 0, 1, 0.25, TIDE_FLOAT32), d, quarters, 4);
    double lin[5] = {0, 0.25, 0.5, 0.75, 1};
    check_on("linspace_on", tide_linspace_on(d, 0, 1, 5, TIDE_FLOAT32), d, lin, 5);
    double eye[6] = {1, 0, 0, 0, 1, 0};
    check_on("eye_on", tide_eye_on(d, 2, 3, TIDE_FLOAT32), d, eye, 6);
    float data[4] = {1.5f, -2, 3, 4};
    double fd[4] = {1.5, -2, 3, 4};
    check_on("from_data_on", tide_from_data_on(d, data, 2, s22, TIDE_FLOAT32), d, fd, 4);
    tide_tensor *e = tide_empty_on(d, 2, s23, TIDE_UINT8);
    CHECK(e && strcmp(tide_device_name(e), d) == 0 && tide_numel(e) == 6, "empty_on");
    tide_release(e);
}

/* Random ops on device d draw the CPU's numbers under the same seed. */
static void test_random_on(const char *d)
{
    int64_t s[2] = {4, 5};
    tide_manual_seed(5);
    tide_tensor *a = tide_rand_on(d, 2, s, TIDE_FLOAT32);
    tide_manual_seed(5);
    check_same("rand_on", a, tide_rand_on("cpu", 2, s, TIDE_FLOAT32));
    tide_manual_seed(6);
    a = tide_randn_on(d, 2, s, TIDE_FLOAT64);
    CHECK(a && strcmp(tide_device_name(a), d) == 0, "randn_on device");
    tide_manual_seed(6);
    check_same("randn_on", a, tide_randn_on("cpu", 2, s, TIDE_FLOAT64));
    tide_manual_seed(7);
    a = tide_randint_on(d, -4, 9, 2, s, TIDE_INT32);
    tide_manual_seed(7);
    check_same("randint_on", a, tide_randint_on("cpu", -4, 9, 2, s, TIDE_INT32));
    tide_manual_seed(8);
    a = tide_randperm_on(d, 10, TIDE_INT64);
    CHECK(a && strcmp(tide_device_name(a), d) == 0, "randperm_on device");
    tide_manual_seed(8);
    check_same("randperm_on", a, tide_randperm_on("cpu", 10, TIDE_INT64));
    /* bernoulli and uniform_ follow their tensor */
    tide_tensor *p = tide_full_on(d, 2, s, 0.5, TIDE_FLOAT32);
    tide_manual_seed(9);
    tide_tensor *b = p ? tide_bernoulli(p) : NULL;
    CHECK(b && strcmp(tide_device_name(b), d) == 0, "bernoulli follows p");
    tide_tensor *pc = p ? tide_to(p, "cpu") : NULL;
    tide_manual_seed(9);
    check_same("bernoulli", b, pc ? tide_bernoulli(pc) : NULL);
    tide_release(pc);
    CHECK(p && tide_uniform_(p, 2, 3) == 0 && strcmp(tide_device_name(p), d) == 0, "uniform_");
    tide_release(p);
}

/* y = sum(to(to(x, d) * 2, cpu)): x.grad = 2 on the CPU. */
static void test_to_grad(const char *d)
{
    double xs[3] = {1, 2, 3}, twos[3] = {2, 2, 2};
    int64_t n = 3;
    tide_tensor *x = tide_from_data_on("cpu", xs, 1, &n, TIDE_FLOAT64);
    tide_requires_grad_(x, true);
    tide_tensor *v = tide_to(x, d);
    CHECK(v && tide_requires_grad(v), "to records a node: %s", tide_last_error());
    tide_tensor *m = v ? tide_mul_scalar(v, 2) : NULL;
    tide_tensor *back = m ? tide_to(m, "cpu") : NULL;
    tide_tensor *y = back ? tide_sum(back, NULL, 0, false) : NULL;
    CHECK(y && tide_backward(y, NULL, false) == 0, "backward: %s", tide_last_error());
    check_on("x.grad", tide_grad(x), "cpu", twos, 3);
    tide_release(y);
    tide_release(back);
    tide_release(m);
    tide_release(v);
    tide_release(x);
}

/* f(x, w) = to(to(x, d) * to(w, d) + to(x, d)^2, cpu): exercises TO's gradient in both
 * directions and a gradient summed from two TO nodes of one input. */
static tide_tensor *cross_device(void *ctx, tide_tensor *const *in, int n)
{
    const char *d = ctx;
    (void)n;
    tide_tensor *xv = tide_to(in[0], d), *wv = xv ? tide_to(in[1], d) : NULL;
    tide_tensor *xv2 = wv ? tide_to(in[0], d) : NULL;
    tide_tensor *p = xv2 ? tide_mul(xv, wv) : NULL, *q = p ? tide_mul(xv2, xv2) : NULL;
    tide_tensor *s = q ? tide_add(p, q) : NULL, *r = s ? tide_to(s, "cpu") : NULL;
    tide_release(s);
    tide_release(q);
    tide_release(p);
    tide_release(xv2);
    tide_release(wv);
    tide_release(xv);
    return r;
}

static void test_gradcheck(const char *d)
{
    double xs[6] = {0.5, -1.25, 2, 0.75, -0.3, 1.1}, ws[6] = {1, 2, -0.5, 0.25, 3, -2};
    int64_t s[2] = {2, 3};
    tide_tensor *in[2] = {tide_from_data_on("cpu", xs, 2, s, TIDE_FLOAT64),
                          tide_from_data_on("cpu", ws, 2, s, TIDE_FLOAT64)};
    tide_requires_grad_(in[0], true);
    tide_requires_grad_(in[1], true);
    /* float64 products and sums on either device: central differences with eps 1e-6 of a
     * quadratic are exact up to rounding, ~1e-10 relative */
    CHECK(td_gradcheck(cross_device, (void *)d, in, 2, 1e-6, 1e-7, 1e-6) == 0,
          "gradcheck cpu <-> %s: %s", d, tide_last_error());
    tide_release(in[0]);
    tide_release(in[1]);
}

int main(void)
{
    test_errors();
    test_default_device("cpu");
    test_creation_on("cpu");
    test_random_on("cpu");
    test_to_grad("cpu");
    char why[512];
    if (!tide_vulkan_available(why, sizeof why)) {
        printf("test_device_create: no Vulkan device, the Vulkan tests are skipped: %s\n", why);
        return test_summary("test_device_create");
    }
    test_default_device("vulkan");
    test_creation_on("vulkan");
    test_random_on("vulkan");
    test_to_grad("vulkan");
    test_gradcheck("vulkan");
    return test_summary("test_device_create");
}
