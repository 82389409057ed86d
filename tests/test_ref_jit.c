/*
 * test_ref_jit.c — the reference device under the jit: a set of programs (elementwise chains
 * with broadcast and strided operands, row reductions with keepdim follow-ups, fused
 * write-backs, a matmul with a bias + relu epilogue, SCALAR members, casts, where,
 * comparisons) run
 *   (a) on ref under a trace session: it must compile and fuse (the plan dumped by TIDE_DUMP
 *       lists fusion groups, the epilogue, the write-backs), so ref's group interpreter
 *       (devices/ref/ref_jit.c) ran them;
 *   (b) on ref eagerly: (a) must equal (b) bitwise. The interpreter computes each member's
 *       element with the eager kernel's own function and reduces a row in the eager reduce's
 *       order, accumulating in double: the same numerics by construction;
 *   (c) on the CPU under the jit and (d) on Vulkan under the jit where a Vulkan device is
 *       present: within the tolerance derived from the program's ops against (b), the rule of
 *       devices/ref/README.md. Per program, |device - ref| <= rel 2u |ref| + abs 2u
 *       + sum u mag, where u is the unit roundoff (2^-24 float32, 2^-53 float64; 2u bounds an
 *       ulp relative to the value), mag the program run on ref with absolute operands (a
 *       sum's sum|terms|); the coefficients come with each program.
 * The per-op bounds are test_ref_device.c's (tolerance_ulps there): CPU float32 tanh 7 ulp,
 * sigmoid 3, exp 2; Vulkan tanh and sigmoid 14 ulp + 2^-20, exp 10, division 2.5, sqrt 6;
 * +, -, *, float compare and casts are exact everywhere (IEEE correctly rounded). A Vulkan
 * compiler may contract a*b+c into a fused multiply-add: one rounding less, at most one ulp of
 * the operands' magnitude per such pair, which the Vulkan coefficients allow for.
 */
#define _GNU_SOURCE /* mkdtemp, setenv */
#include <stdio.h>
#include <stdlib.h>

#include "test_ref.h"
#include "test_util.h"
#include "tide.h"

#define NIN 4
typedef tide_tensor *(*prog_fn)(tide_tensor *const *in);

typedef struct tol3 {
    double rel, abs_, sum; /* rel 2u |ref| + abs 2u + sum u mag (2u: 2^-23 float32) */
} tol3;

typedef struct program {
    const char *name;
    prog_fn fn;
    int nin;
    tide_dtype dt[NIN];
    int ndim[NIN];
    int64_t shape[NIN][3];
    double lo, hi;
    const char *plan_has[3]; /* lines the ref plan must hold (TIDE_DUMP) */
    tol3 cpu, vk;
    bool no_vulkan; /* float64: lavapipe's shaders here are float32 */
} program;

/* ---- the programs ------------------------------------------------------------------------ */

/* tanh(x * a^T + b) * sigmoid(x) + 0.25: a read transposed (strided), b broadcast [C].
 * |tanh|, |sigmoid| <= 1: CPU (7 + 3) ulp of a product <= 1 and two roundings: abs 12;
 * Vulkan (14 + 14) ulp + 2 * 2^-20 (16 units of 2^-23) + 2 roundings + a contraction
 * before tanh (|x a| + |b| < 2: 2 units): abs 50. */
static tide_tensor *p_chain(tide_tensor *const *in)
{
    tide_tensor *at = tide_transpose(in[1], 0, 1), *t1 = tide_mul(in[0], at);
    tide_tensor *t2 = tide_add(t1, in[2]), *t3 = tide_tanh(t2), *t4 = tide_sigmoid(in[0]);
    tide_tensor *t5 = tide_mul(t3, t4), *r = tide_add_scalar(t5, 0.25);
    tide_release(at), tide_release(t1), tide_release(t2), tide_release(t3), tide_release(t4);
    tide_release(t5);
    return r;
}

/* softmax over the last dim of every other column (a strided view): max (exact), x - max
 * (exact rounding), exp (e ulp), a sum of n = 50 positive terms (2 (n + 3) u relative), a
 * division (CPU exact rounding, Vulkan 2.5 ulp): relative e + 106 + 3 ulp (CPU e = 2: 111;
 * Vulkan e = 10 and the division: 122). */
static tide_tensor *p_softmax(tide_tensor *const *in)
{
    tide_tensor *xs = tide_slice(in[0], 1, 0, 100, 2), *r = tide_softmax(xs, -1);
    tide_release(xs);
    return r;
}

/* x / sum(exp(x)) over the last two dims (rows of 6 x 10 = 60 terms, nred = 2): exp's e ulp,
 * the sum 2 (60 + 3) = 126 ulp relative, a division: CPU 2 + 126 + 1, Vulkan 10 + 126 + 3. */
static tide_tensor *p_rows2(tide_tensor *const *in)
{
    int dims[2] = {1, 2};
    tide_tensor *e = tide_exp(in[0]), *s = tide_sum(e, dims, 2, true), *r = tide_div(in[0], s);
    tide_release(e), tide_release(s);
    return r;
}

/* SGD with momentum, written back in place: buf = buf * 0.9 + g; p = p - 0.05 * buf. Only
 * correctly rounded + and *: exact on the CPU; Vulkan may contract each a*b+c (|terms| < 4:
 * 4 units each, two pairs): abs 8. */
static tide_tensor *p_sgd(tide_tensor *const *in)
{
    tide_tensor *bm = tide_mul_scalar(in[1], 0.9), *nb = tide_add(bm, in[2]);
    CHECK(tide_copy_(in[1], nb) == 0, "sgd buf: %s", tide_last_error());
    tide_tensor *u = tide_mul_scalar(in[1], 0.05), *np = tide_sub(in[0], u);
    CHECK(tide_copy_(in[0], np) == 0, "sgd p: %s", tide_last_error());
    tide_release(bm), tide_release(nb), tide_release(u), tide_release(np);
    return tide_retain(in[0]);
}

/* relu(A @ W + bias): the group is the matmul's epilogue. The product is a sum of K = 20 terms:
 * 2 (K + 3) u sum|terms| (sum 46), then + bias and its rounding (1 ulp of |A||W| + |b|: folded
 * into sum as 2 more); relu exact. Same on both devices. */
static tide_tensor *p_linear(tide_tensor *const *in)
{
    tide_tensor *m = tide_matmul(in[0], in[1]), *b = tide_add(m, in[2]), *r = tide_relu(b);
    tide_release(m), tide_release(b);
    return r;
}

/* SCALAR members, casts, comparisons, where: s2 = s * 2 + 1 (0-dim: computed once per group);
 * where(x > s2, float(y) * s2, x - 1) + float(y < 3). Every op is exact or correctly rounded
 * (s * 2 is exact, so a contraction changes nothing): exact everywhere. */
static tide_tensor *p_select(tide_tensor *const *in)
{
    tide_tensor *s1 = tide_mul_scalar(in[2], 2), *s2 = tide_add_scalar(s1, 1);
    tide_tensor *c = tide_gt(in[0], s2), *yf = tide_cast(in[1], TIDE_FLOAT32);
    tide_tensor *a = tide_mul(yf, s2), *b = tide_add_scalar(in[0], -1), *w = tide_where(c, a, b);
    tide_tensor *three_d = tide_from_data_on(tide_device_name(in[1]), &(int32_t){3}, 0, NULL,
                                             TIDE_INT32);
    tide_tensor *lt = tide_lt(in[1], three_d), *ltf = tide_cast(lt, TIDE_FLOAT32);
    tide_tensor *r = tide_add(w, ltf);
    tide_release(s1), tide_release(s2), tide_release(c), tide_release(yf), tide_release(a);
    tide_release(b), tide_release(w), tide_release(three_d);
    tide_release(lt), tide_release(ltf);
    return r;
}

/* int32: where(x > y, |x * y - 7|, maximum(x, y)) + sum of the row (y broadcast from a
 * column): integer arithmetic wraps and sums are exact: exact everywhere. */
static tide_tensor *p_ints(tide_tensor *const *in)
{
    int dim = 1;
    tide_tensor *c = tide_gt(in[0], in[1]), *m = tide_mul(in[0], in[1]);
    tide_tensor *d = tide_sub_scalar(m, 7), *a = tide_abs(d), *mx = tide_maximum(in[0], in[1]);
    tide_tensor *w = tide_where(c, a, mx), *s = tide_sum(w, &dim, 1, true);
    tide_tensor *s32 = tide_cast(s, TIDE_INT32), *r = tide_add(w, s32);
    tide_release(c), tide_release(m), tide_release(d), tide_release(a), tide_release(mx);
    tide_release(w), tide_release(s), tide_release(s32);
    return r;
}

/* float64: log(exp(x) * y + 1) with y broadcast over rows: CPU exp and log 2 ulp each (SLEEF
 * u10 + glibc's 1). exp's 2 ulp and the * and + roundings make the log's argument a off by
 * at most 3 ulp of a relative, which log's derivative 1/a turns into abs 3 (units of 2u);
 * log's own 2 ulp and its rounding: rel 3. */
static tide_tensor *p_f64(tide_tensor *const *in)
{
    tide_tensor *e = tide_exp(in[0]), *m = tide_mul(e, in[1]), *a = tide_add_scalar(m, 1);
    tide_tensor *r = tide_log(a);
    tide_release(e), tide_release(m), tide_release(a);
    return r;
}

static const program programs[] = {
    {"chain", p_chain, 3, {TIDE_FLOAT32, TIDE_FLOAT32, TIDE_FLOAT32}, {2, 2, 1},
     {{37, 29}, {29, 37}, {29}}, -1, 1, {"group", NULL}, {0, 12, 0}, {0, 50, 0}, false},
    {"softmax", p_softmax, 1, {TIDE_FLOAT32}, {2}, {{23, 100}}, -3, 3, {"rows of 50", NULL},
     {111, 0, 0}, {122, 0, 0}, false},
    {"rows2", p_rows2, 1, {TIDE_FLOAT32}, {3}, {{5, 6, 10}}, -2, 2, {"rows of 60", NULL},
     {129, 0, 0}, {139, 0, 0}, false},
    {"sgd", p_sgd, 3, {TIDE_FLOAT32, TIDE_FLOAT32, TIDE_FLOAT32}, {2, 2, 2},
     {{40, 50}, {40, 50}, {40, 50}}, -1, 1, {"(written back)", NULL}, {0, 0, 0}, {0, 8, 0},
     false},
    {"linear", p_linear, 3, {TIDE_FLOAT32, TIDE_FLOAT32, TIDE_FLOAT32}, {2, 2, 1},
     {{33, 20}, {20, 17}, {17}}, -1, 1, {"the epilogue of", NULL}, {0, 0, 48}, {0, 0, 48},
     false},
    {"select", p_select, 3, {TIDE_FLOAT32, TIDE_INT32, TIDE_FLOAT32}, {2, 2, 0},
     {{31, 19}, {31, 19}, {0}}, -4, 5, {"group", NULL}, {0, 0, 0}, {0, 0, 0}, false},
    {"ints", p_ints, 2, {TIDE_INT32, TIDE_INT32}, {2, 2}, {{21, 30}, {21, 1}}, -50, 50,
     {"rows of 30", NULL}, {0, 0, 0}, {0, 0, 0}, false},
    {"f64", p_f64, 2, {TIDE_FLOAT64, TIDE_FLOAT64}, {2, 1}, {{17, 26}, {26}}, -2, 2,
     {"group", NULL}, {3, 3, 0}, {0, 0, 0}, true},
};
#define NPROGRAMS (int)(sizeof programs / sizeof programs[0])

/* ---- running ----------------------------------------------------------------------------- */

/* The program's inputs on the cpu (fixed by the program's index); y of p_f64 kept positive. */
static void make_inputs(int k, tide_tensor **in)
{
    const program *p = &programs[k];
    for (int i = 0; i < p->nin; i++) {
        int64_t n = ref_numel(p->ndim[i], p->shape[i]);
        double *v = malloc(sizeof(double) * (size_t)(n ? n : 1));
        for (int64_t j = 0; j < n; j++) {
            double lo = (k == NPROGRAMS - 1 && i == 1) ? 0.5 : p->lo;
            v[j] = lo + (p->hi - lo) * ref_uniform();
            if (p->dt[i] == TIDE_INT32)
                v[j] = floor(v[j]);
        }
        in[i] = ref_from_doubles(v, p->ndim[i], p->shape[i], p->dt[i]);
        free(v);
    }
}

/* The program on device dev (fresh copies of the inputs: programs write into them), under a
 * trace session when jit (its plan dumped into dump, when given), absolute inputs when absval;
 * the result on the cpu. */
static tide_tensor *run_on(int k, tide_tensor *const *host, const char *dev, bool jit, bool absval,
                           const char *dump, tide_jit_stats *st)
{
    const program *p = &programs[k];
    tide_tensor *in[NIN] = {0};
    for (int i = 0; i < p->nin; i++) {
        tide_tensor *a = absval && p->dt[i] != TIDE_INT32 ? tide_abs(host[i]) : tide_clone(host[i]);
        in[i] = a ? tide_to(a, dev) : NULL;
        tide_release(a);
        CHECK(in[i] != NULL, "%s: input %d to %s: %s", p->name, i, dev, tide_last_error());
        if (!in[i])
            return NULL;
    }
    if (dump)
        setenv("TIDE_DUMP", dump, 1);
    if (jit)
        CHECK(tide_jit_trace_begin(st, NULL, NULL) == 0, "%s", tide_last_error());
    tide_tensor *r = p->fn(in);
    if (jit)
        CHECK(tide_jit_trace_end() == 0, "%s on %s: %s", p->name, dev, tide_last_error());
    unsetenv("TIDE_DUMP");
    CHECK(r != NULL, "%s on %s%s: %s", p->name, dev, jit ? " (jit)" : "", tide_last_error());
    tide_tensor *h = r ? tide_to(r, "cpu") : NULL;
    tide_release(r);
    for (int i = 0; i < p->nin; i++)
        tide_release(in[i]);
    return h;
}

static double *to_doubles(const tide_tensor *t)
{
    int64_t n = tide_numel(t);
    size_t es = tide_dtype_size(tide_get_dtype(t));
    char *raw = malloc((size_t)n * es + 1);
    double *v = malloc(sizeof(double) * (size_t)(n + 1));
    tide_to_buffer(t, raw, (size_t)n * es);
    for (int64_t i = 0; i < n; i++)
        v[i] = ref_load(raw, tide_get_dtype(t), i);
    free(raw);
    return v;
}

static bool same_bits(const tide_tensor *a, const tide_tensor *b)
{
    if (!a || !b || tide_numel(a) != tide_numel(b) || tide_get_dtype(a) != tide_get_dtype(b))
        return false;
    size_t n = (size_t)tide_numel(a) * tide_dtype_size(tide_get_dtype(a));
    char *x = malloc(n + 1), *y = malloc(n + 1);
    tide_to_buffer(a, x, n);
    tide_to_buffer(b, y, n);
    bool same = memcmp(x, y, n) == 0;
    free(x), free(y);
    return same;
}

/* got against ref's want within t (mag: the program on |inputs|, for sums); NaN equals NaN. */
static void check_within(const char *what, const program *p, const tide_tensor *got,
                         const tide_tensor *want, const tide_tensor *mag, tol3 t)
{
    CHECK(got && want && tide_numel(got) == tide_numel(want), "%s %s: no result", p->name, what);
    if (!got || !want || tide_numel(got) != tide_numel(want))
        return;
    double *g = to_doubles(got), *w = to_doubles(want), *m = mag ? to_doubles(mag) : NULL;
    double u = tide_get_dtype(want) == TIDE_FLOAT64 ? 0x1p-53 : 0x1p-24, e = 2 * u;
    int64_t n = tide_numel(want), bad = -1;
    for (int64_t i = 0; i < n && bad < 0; i++) {
        double allowed = t.rel * e * fabs(w[i]) + t.abs_ * e + (m ? t.sum * u * m[i] : 0);
        if (!(isnan(g[i]) && isnan(w[i])) && !(fabs(g[i] - w[i]) <= allowed))
            bad = i;
    }
    CHECK(bad < 0, "%s %s: element %lld is %.9g, ref %.9g", p->name, what, (long long)bad,
          bad >= 0 ? g[bad] : 0, bad >= 0 ? w[bad] : 0);
    free(g), free(w), free(m);
}

/* How many lines of the plans dumped into dir hold text. */
static int plan_lines(const char *dir, const char *text)
{
    char cmd[512];
    snprintf(cmd, sizeof cmd, "cat %s/*_plan.txt 2>/dev/null | grep -cF '%s'", dir, text);
    FILE *f = popen(cmd, "r");
    int n = -1;
    if (f) {
        if (fscanf(f, "%d", &n) != 1)
            n = -1;
        pclose(f);
    }
    return n;
}

static void check_program(int k, bool vulkan)
{
    const program *p = &programs[k];
    tide_tensor *host[NIN] = {0};
    make_inputs(k, host);
    char dir[] = "/tmp/tide_ref_jit_XXXXXX";
    CHECK(mkdtemp(dir) != NULL, "mkdtemp");
    tide_jit_stats st = {0};
    tide_tensor *jit = run_on(k, host, "ref", true, false, dir, &st);
    CHECK(st.compiles >= 1 && st.breaks == 0, "%s on ref: %lld compiles, %lld breaks", p->name,
          (long long)st.compiles, (long long)st.breaks);
    CHECK(plan_lines(dir, "group") >= 1, "%s on ref: no fusion group in the plan", p->name);
    for (int j = 0; j < 3 && p->plan_has[j]; j++)
        CHECK(plan_lines(dir, p->plan_has[j]) >= 1, "%s on ref: the plan has no \"%s\"", p->name,
              p->plan_has[j]);
    char cmd[600];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    CHECK(system(cmd) == 0, "%s", cmd);
    tide_tensor *want = run_on(k, host, "ref", false, false, NULL, NULL);
    CHECK(same_bits(jit, want), "%s: ref under the jit differs from ref eager", p->name);
    tide_tensor *mag = p->cpu.sum > 0 ? run_on(k, host, "ref", false, true, NULL, NULL) : NULL;
    tide_tensor *cpu = run_on(k, host, "cpu", true, false, NULL, NULL);
    check_within("cpu jit", p, cpu, want, mag, p->cpu);
    if (vulkan && !p->no_vulkan) {
        tide_tensor *vk = run_on(k, host, "vulkan", true, false, NULL, NULL);
        check_within("vulkan jit", p, vk, want, mag, p->vk);
        tide_release(vk);
    }
    tide_release(jit), tide_release(want), tide_release(mag), tide_release(cpu);
    for (int i = 0; i < NIN; i++)
        tide_release(host[i]);
}

int main(void)
{
    tide_tensor *probe = tide_from_data_on("vulkan", &(float){1}, 0, NULL, TIDE_FLOAT32);
    /* under valgrind lavapipe compiles shaders ~50x slower: test_vulkan_jit covers it there */
    bool vulkan = probe != NULL && !RUNNING_ON_VALGRIND;
    tide_release(probe);
    if (!vulkan)
        printf("no vulkan device (or valgrind): the vulkan jit is not compared\n");
    for (int k = 0; k < NPROGRAMS; k++)
        check_program(k, vulkan);
    return test_summary("test_ref_jit");
}
