/*
 * test_jit_half.c — the jit on float16 and bfloat16 (the rule of jit/README.md: jit equals
 * eager bitwise). Eagerly, an op on 16-bit operands casts them up, computes in float32 and
 * casts the result down (ops/dispatch.c); under the jit those casts are members of the fused
 * groups on the CPU (jit/fusion.c asks the device), so a group reads and writes 16-bit values
 * itself, rounding after every op as eager does. Each program runs eagerly and under a trace
 * session, on both dtypes, and the results must be equal bit for bit: elementwise chains (with
 * a broadcast operand, a transposed operand, and a cast between the two 16-bit dtypes), row
 * reductions (sum, softmax), and a matmul with its epilogue (linear + bias + relu). The plans
 * dumped by TIDE_DUMP must show the casts fused (only those of broadcast or product operands
 * run as kernels of their own) and the epilogue taken. The reference device (devices/ref) runs
 * the same programs under its jit, equal to its own eager results; on Vulkan (no jit_member)
 * no 16-bit cast joins a group.
 */
#define _GNU_SOURCE /* mkdtemp, setenv, popen */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "devices/cpu/cpu_matmul_bf16.h"
#include "test_util.h"
#include "tide.h"

typedef tide_tensor *(*prog_fn)(tide_tensor *const *in);

/* tanh(x * a + b) * sigmoid(x) + 0.25, b broadcast over rows */
static tide_tensor *p_chain(tide_tensor *const *in)
{
    tide_tensor *t1 = tide_mul(in[0], in[1]), *t2 = tide_add(t1, in[2]), *t3 = tide_tanh(t2);
    tide_tensor *t4 = tide_sigmoid(in[0]), *t5 = tide_mul(t3, t4), *t6 = tide_add_scalar(t5, 0.25);
    tide_release(t1), tide_release(t2), tide_release(t3), tide_release(t4), tide_release(t5);
    return t6;
}

/* exp(x - a) / 3, through the other 16-bit dtype and back (a cast between them is a member) */
static tide_tensor *p_cross(tide_tensor *const *in)
{
    tide_dtype dt = tide_get_dtype(in[0]);
    tide_dtype other = dt == TIDE_FLOAT16 ? TIDE_BFLOAT16 : TIDE_FLOAT16;
    tide_tensor *d = tide_sub(in[0], in[1]), *o = tide_cast(d, other), *e = tide_exp(o);
    tide_tensor *back = tide_cast(e, dt), *r = tide_div_scalar(back, 3.0);
    tide_release(d), tide_release(o), tide_release(e), tide_release(back);
    return r;
}

/* sum over rows of x * x + b, and softmax over rows of x */
static tide_tensor *p_sum(tide_tensor *const *in)
{
    int dim = 1;
    tide_tensor *sq = tide_mul(in[0], in[0]), *s = tide_add(sq, in[1]);
    tide_tensor *r = tide_sum(s, &dim, 1, false);
    tide_release(sq), tide_release(s);
    return r;
}

/* exp(x^T) * x^T - 1: a 16-bit operand read through strides (the group gathers 2-byte elements) */
static tide_tensor *p_strided(tide_tensor *const *in)
{
    tide_tensor *t = tide_transpose(in[0], 0, 1), *e = tide_exp(t), *m = tide_mul(e, t);
    tide_tensor *r = tide_sub_scalar(m, 1.0);
    tide_release(t), tide_release(e), tide_release(m);
    return r;
}

static tide_tensor *p_softmax(tide_tensor *const *in) { return tide_softmax(in[0], -1); }

/* relu(x w^T + bias) */
static tide_tensor *p_linear(tide_tensor *const *in)
{
    tide_tensor *l = tide_linear(in[0], in[1], in[2]), *r = tide_relu(l);
    tide_release(l);
    return r;
}

typedef struct program {
    const char *name;
    prog_fn fn;
    int nin;
    int64_t shape[3][2]; /* [n, 0]: 1-D */
    const char *plan_has; /* a line the plan must hold, or NULL */
    int lone_casts; /* casts run as kernels of their own: of a broadcast operand (its shape is
                       not the group's domain) or of a product's operand */
} program;

static const program programs[] = {
    {"chain", p_chain, 3, {{64, 999}, {64, 999}, {1, 999}}, NULL, 1},
    {"cross", p_cross, 2, {{100, 333}, {100, 333}}, NULL, 0},
    {"sum", p_sum, 2, {{80, 257}, {1, 257}}, NULL, 1},
    {"softmax", p_softmax, 1, {{96, 300}}, NULL, 0},
    {"strided", p_strided, 1, {{200, 301}}, NULL, 0},
    {"linear_relu", p_linear, 3, {{150, 48}, {130, 48}, {130, 0}}, "the epilogue of", 3},
};
#define NPROGRAMS ((int)(sizeof programs / sizeof programs[0]))

static uint64_t rng = 0x2545f4914f6cdd1dULL;
static double uniform(void)
{
    rng ^= rng << 13, rng ^= rng >> 7, rng ^= rng << 17;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* A tensor of dtype dt on device with values in [-2, 2), made through float32; 1-D when
 * shape[1] is 0. */
static tide_tensor *input(const char *device, const int64_t *shape, tide_dtype dt)
{
    int ndim = shape[1] ? 2 : 1;
    int64_t n = shape[0] * (ndim > 1 ? shape[1] : 1);
    float *v = malloc(sizeof(float) * (size_t)n);
    for (int64_t i = 0; i < n; i++)
        v[i] = (float)(4 * uniform() - 2);
    tide_tensor *f = tide_from_data_on(device, v, ndim, shape, TIDE_FLOAT32);
    tide_tensor *t = tide_cast(f, dt);
    tide_release(f);
    free(v);
    return t;
}

/* Elements whose bits differ between a and b (same dtype and shape), -1 when they cannot be
 * compared. */
static int64_t bits_differ(const tide_tensor *a, const tide_tensor *b)
{
    if (!a || !b || tide_get_dtype(a) != tide_get_dtype(b) || tide_numel(a) != tide_numel(b))
        return -1;
    tide_tensor *ca = tide_to(a, "cpu"), *cb = tide_to(b, "cpu");
    tide_tensor *xa = tide_contiguous(ca), *xb = tide_contiguous(cb);
    const uint16_t *pa = tide_data_ptr(xa), *pb = tide_data_ptr(xb);
    int64_t n = tide_numel(a), bad = 0;
    for (int64_t i = 0; i < n; i++)
        bad += pa[i] != pb[i];
    tide_release(ca), tide_release(cb), tide_release(xa), tide_release(xb);
    return bad;
}

/* How many lines of the plans dumped into dir match pattern. */
static int plan_lines(const char *dir, const char *pattern)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cat %s/*_plan.txt 2>/dev/null | grep -c '%s'", dir, pattern);
    FILE *f = popen(cmd, "r");
    int n = -1;
    if (f) {
        if (fscanf(f, "%d", &n) != 1)
            n = -1;
        pclose(f);
    }
    return n;
}

/* Removes a dump directory once every check so far has passed (else it is left to read). */
static void remove_dump(const char *dir)
{
    if (test_failed == 0) {
        char cmd[600];
        snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
        CHECK(system(cmd) == 0, "%s", cmd);
    }
}

static void run_program(const char *device, const program *pg, tide_dtype dt)
{
    char dir[] = "/tmp/tide_jit_half_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    setenv("TIDE_DUMP", dir, 1);
    tide_tensor *in[3] = {0};
    for (int i = 0; i < pg->nin; i++)
        in[i] = input(device, pg->shape[i], dt);
    tide_tensor *want = pg->fn(in);
    CHECK(want != NULL, "%s %s %s eager: %s", device, pg->name, tide_dtype_name(dt),
          tide_last_error());
    CHECK(tide_jit_trace_begin(NULL, NULL, NULL) == 0, "%s", tide_last_error());
    tide_tensor *got = pg->fn(in);
    CHECK(tide_jit_trace_end() == 0, "%s %s trace: %s", device, pg->name, tide_last_error());
    int64_t bad = bits_differ(got, want);
    CHECK(bad == 0, "%s %s %s: %lld elements differ from eager", device, pg->name,
          tide_dtype_name(dt), (long long)bad);
    /* the casts fused: only those the program expects run as kernels of their own. Where the
     * CPU multiplies bfloat16 on AMX tiles, a product takes its operands as they are (no casts
     * of them) and is no epilogue's (cpu_jit.c): only the broadcast bias's cast is left. */
    bool tiles = dt == TIDE_BFLOAT16 && strcmp(device, "cpu") == 0 && td_cpu_bf16_native() &&
                 strcmp(pg->name, "linear_relu") == 0;
    int want_lone = tiles ? 1 : pg->lone_casts;
    int groups = plan_lines(dir, "^step.* group"), lone = plan_lines(dir, "kernel: .* op cast");
    CHECK(groups > 0 && lone == want_lone, "%s %s %s: %d groups, %d casts as kernels, "
          "want %d (plans in %s)", device, pg->name, tide_dtype_name(dt), groups, lone,
          want_lone, dir);
    if (pg->plan_has && !tiles)
        CHECK(plan_lines(dir, pg->plan_has) > 0, "%s %s %s: no '%s' in the plan (%s)", device,
              pg->name, tide_dtype_name(dt), pg->plan_has, dir);
    unsetenv("TIDE_DUMP");
    remove_dump(dir);
    tide_release(got), tide_release(want);
    for (int i = 0; i < pg->nin; i++)
        tide_release(in[i]);
}

/* Vulkan renders no 16-bit cast in a group (it has no jit_member): every cast to a 16-bit
 * dtype runs as a kernel of its own there. Its fused exp is not eager's bit for bit (within 10
 * float32 ulp: test_ref_jit.c), which may flip exp's rounding to bfloat16 (1 ulp), and the
 * division by 3 after it adds at most one more flip: 2 bfloat16 ulp, 2^-6 relative. */
static void check_vulkan(void)
{
    tide_tensor *probe = tide_from_data_on("vulkan", &(float){1}, 0, NULL, TIDE_FLOAT32);
    if (!probe || RUNNING_ON_VALGRIND) {
        printf("test_jit_half: no vulkan device (or valgrind): its casts are not checked\n");
        tide_release(probe);
        return;
    }
    tide_release(probe);
    char dir[] = "/tmp/tide_jit_half_vk_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    setenv("TIDE_DUMP", dir, 1);
    const program *pg = &programs[1]; /* cross: casts both ways and between the 16-bit dtypes */
    tide_tensor *in[2] = {input("vulkan", pg->shape[0], TIDE_BFLOAT16),
                          input("vulkan", pg->shape[1], TIDE_BFLOAT16)};
    tide_tensor *want = pg->fn(in);
    CHECK(tide_jit_trace_begin(NULL, NULL, NULL) == 0, "%s", tide_last_error());
    tide_tensor *got = pg->fn(in);
    CHECK(tide_jit_trace_end() == 0, "vulkan trace: %s", tide_last_error());
    unsetenv("TIDE_DUMP");
    int members = plan_lines(dir, "^    .* op cast b*f*l*o*a*t16"),
        kernels = plan_lines(dir, "kernel: .* op cast b*f*l*o*a*t16");
    CHECK(members == 0 && kernels > 0, "vulkan: %d 16-bit casts in groups, %d as kernels (%s)",
          members, kernels, dir);
    tide_tensor *g32 = tide_cast(got, TIDE_FLOAT32), *w32 = tide_cast(want, TIDE_FLOAT32);
    tide_tensor *gc = tide_to(g32, "cpu"), *wc = tide_to(w32, "cpu");
    const float *gv = tide_data_ptr(gc), *wv = tide_data_ptr(wc);
    int64_t bad = 0;
    for (int64_t i = 0; gv && wv && i < tide_numel(wc); i++)
        bad += !(fabs(gv[i] - wv[i]) <= 0x1p-6 * fabs(wv[i]));
    CHECK(gv && wv && bad == 0, "vulkan cross: %lld elements beyond 2^-6 relative of eager",
          (long long)bad);
    tide_release(g32), tide_release(w32), tide_release(gc), tide_release(wc);
    tide_release(got), tide_release(want), tide_release(in[0]), tide_release(in[1]);
    remove_dump(dir);
}

int main(void)
{
    static const tide_dtype dts[2] = {TIDE_FLOAT16, TIDE_BFLOAT16};
    static const char *devices[2] = {"cpu", "ref"};
    for (int d = 0; d < 2; d++)
        for (int k = 0; k < NPROGRAMS; k++)
            for (int t = 0; t < 2; t++)
                run_program(devices[d], &programs[k], dts[t]);
    check_vulkan();
    return test_summary("test_jit_half");
}
