/*
 * onnx_conformance — runs the ONNX backend test suite (Debian's libonnx-testdata) through
 * tide's importer and compares every output with the ONNX backend runner's defaults
 * (rtol 1e-3, atol 1e-7; NaN matches NaN).
 *
 *   onnx_conformance [--data DIR] [--device D] [--baseline FILE] [--scope FILE]
 *                    [--summary FILE] [--write-baseline FILE] [--only SUBSTRING] [--quiet]
 *                    [--jit]
 *
 * --list-ops prints the importer's op table as the Markdown list of docs/onnx.md and exits.
 *
 * --jit runs every model inside a trace session (what tide.jit does: ops recorded, fused and
 * compiled; a read of a value is a graph break) instead of eagerly: the jit-vs-eager check.
 * A test is supported when tide_onnx_open accepts its model: every node's op is in the
 * importer's table at the model's opset with attributes the entry supports, and its inputs and
 * initializers have tide dtypes. That is decided before anything runs; a supported test whose
 * values differ, or that fails while running, is a *fail*. Tests in the scope file (training
 * ops, strings, sequences, optionals) count as unsupported with their reason. Prints
 * pass / fail / unsupported per test and per folder; exits 1 on any fail or when a test of the
 * baseline list does not pass.
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "tide.h"
#include "tide_internal.h"

static const char *const folders[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};
enum { NFOLDERS = 4 };
#define RTOL 1e-3
#define ATOL 1e-7

typedef struct names {
    char **v;
    char **why; /* scope reasons */
    int n, cap;
} names;

static void names_add(names *s, const char *name, const char *why)
{
    if (s->n == s->cap) {
        s->cap = s->cap ? 2 * s->cap : 256;
        s->v = realloc(s->v, sizeof *s->v * (size_t)s->cap);
        s->why = realloc(s->why, sizeof *s->why * (size_t)s->cap);
        if (!s->v || !s->why) {
            fprintf(stderr, "onnx_conformance: out of memory\n");
            exit(2);
        }
    }
    s->v[s->n] = strdup(name);
    s->why[s->n++] = why ? strdup(why) : NULL;
}

static int names_find(const names *s, const char *name)
{
    for (int i = 0; i < s->n; i++)
        if (!strcmp(s->v[i], name))
            return i;
    return -1;
}

/* Lines "folder/test" or "folder/test<TAB>reason"; '#' starts a comment line. */
static void names_read(names *s, const char *path)
{
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "onnx_conformance: cannot read %s\n", path);
        exit(2);
    }
    char line[1024];
    while (fgets(line, sizeof line, f)) {
        line[strcspn(line, "\r\n")] = 0;
        if (!line[0] || line[0] == '#')
            continue;
        char *tab = strchr(line, '\t');
        if (tab)
            *tab++ = 0;
        names_add(s, line, tab);
    }
    fclose(f);
}

static int cmp_str(const void *a, const void *b)
{
    return strcmp(*(char *const *)a, *(char *const *)b);
}

static bool exists(const char *path)
{
    struct stat st;
    return stat(path, &st) == 0;
}

/* ---- comparing ------------------------------------------------------------------------------ */
static double *as_doubles(const tide_tensor *t)
{
    tide_tensor *d = tide_cast(t, TIDE_FLOAT64);
    int64_t n = tide_numel(t);
    double *v = malloc(sizeof *v * (size_t)(n ? n : 1));
    if (!d || !v || tide_to_buffer(d, v, sizeof *v * (size_t)(n ? n : 1)) < 0) {
        free(v);
        v = NULL;
    }
    tide_release(d);
    return v;
}

static bool close_enough(double got, double want)
{
    if (isnan(want) || isnan(got))
        return isnan(want) && isnan(got);
    if (isinf(want) || isinf(got))
        return got == want;
    return fabs(got - want) <= ATOL + RTOL * fabs(want);
}

/* 0 when got matches want (dtype, shape, values), else 1 with why. */
static int compare(const tide_tensor *got, const tide_tensor *want, int k, char *why, size_t n)
{
    if (tide_get_dtype(got) != tide_get_dtype(want)) {
        snprintf(why, n, "output %d is %s; expected %s", k, tide_dtype_name(tide_get_dtype(got)),
                 tide_dtype_name(tide_get_dtype(want)));
        return 1;
    }
    bool same = tide_ndim(got) == tide_ndim(want);
    for (int d = 0; same && d < tide_ndim(got); d++)
        same = tide_shape(got)[d] == tide_shape(want)[d];
    if (!same) {
        snprintf(why, n, "output %d has %d dims (first %lld); expected %d dims (first %lld)", k,
                 tide_ndim(got), tide_ndim(got) ? (long long)tide_shape(got)[0] : 0LL,
                 tide_ndim(want), tide_ndim(want) ? (long long)tide_shape(want)[0] : 0LL);
        return 1;
    }
    double *a = as_doubles(got), *b = as_doubles(want);
    int rc = 0;
    if (!a || !b) {
        snprintf(why, n, "output %d cannot be read: %s", k, tide_last_error());
        rc = 1;
    }
    for (int64_t i = 0; rc == 0 && i < tide_numel(got); i++)
        if (!close_enough(a[i], b[i])) {
            snprintf(why, n, "output %d element %lld is %.9g; expected %.9g", k, (long long)i,
                     a[i], b[i]);
            rc = 1;
        }
    free(a);
    free(b);
    return rc;
}

/* ---- one test ------------------------------------------------------------------------------- */
typedef enum { PASS, FAIL, UNSUPPORTED } verdict;
static const char *const verdict_names[] = {"pass", "fail", "unsupported"};

/* Loads <set>/<prefix>_K.pb for K = 0.. into ts (at most max). The count, or -1. */
static int load_set(const char *set, const char *prefix, tide_tensor **ts, int max, char *why,
                    size_t n)
{
    int k = 0;
    for (; k < max; k++) {
        char path[8192];
        snprintf(path, sizeof path, "%s/%s_%d.pb", set, prefix, k);
        if (!exists(path))
            break;
        if (!(ts[k] = tide_onnx_load_tensor(path))) {
            snprintf(why, n, "%s_%d.pb: %s", prefix, k, tide_last_error());
            for (int j = 0; j < k; j++) {
                tide_release(ts[j]);
                ts[j] = NULL;
            }
            return -1;
        }
    }
    return k;
}

enum { MAXIO = 64 };

/* Moves ts[0..n) to device (the test data load on the default device). */
static int move_all(tide_tensor **ts, int n, const char *device)
{
    for (int k = 0; device && k < n; k++) {
        tide_tensor *moved = tide_to(ts[k], device);
        if (!moved)
            return -1;
        tide_release(ts[k]);
        ts[k] = moved;
    }
    return 0;
}

static bool use_jit;

/* tide_onnx_run, eagerly or in a trace session (--jit). */
static int run_model(tide_onnx_model *m, tide_tensor **in, int nin, tide_tensor **got)
{
    if (!use_jit)
        return tide_onnx_run(m, in, nin, got);
    if (tide_jit_trace_begin(NULL, NULL, NULL) < 0)
        return -1;
    int rc = tide_onnx_run(m, in, nin, got);
    if (tide_jit_trace_end() < 0 && rc == 0) {
        for (int k = 0; k < tide_onnx_num_outputs(m); k++) {
            tide_release(got[k]);
            got[k] = NULL;
        }
        rc = -1;
    }
    return rc;
}

static verdict run_set(tide_onnx_model *m, const char *set, const char *device, char *why,
                       size_t n)
{
    tide_tensor *in[MAXIO] = {0}, *want[MAXIO] = {0}, *got[MAXIO] = {0};
    int nin = load_set(set, "input", in, MAXIO, why, n);
    int nwant = nin < 0 ? -1 : load_set(set, "output", want, MAXIO, why, n);
    verdict v = FAIL;
    if (nin < 0 || nwant < 0) {
        /* a test data file tide cannot read (a dtype it has no name for) */
        v = tide_last_error_code() == TIDE_ERR_UNSUPPORTED ? UNSUPPORTED : FAIL;
    } else if (nwant != tide_onnx_num_outputs(m)) {
        snprintf(why, n, "the model has %d outputs; the test data %d",
                 tide_onnx_num_outputs(m), nwant);
    } else if (move_all(in, nin, device) < 0) {
        snprintf(why, n, "moving the inputs to %s: %s", device, tide_last_error());
    } else if (run_model(m, in, nin, got) < 0) {
        snprintf(why, n, "run: %s", tide_last_error());
    } else {
        v = PASS;
        for (int k = 0; k < nwant && v == PASS; k++)
            if (compare(got[k], want[k], k, why, n))
                v = FAIL;
    }
    for (int k = 0; k < MAXIO; k++) {
        tide_release(in[k]);
        tide_release(want[k]);
        tide_release(got[k]);
    }
    return v;
}

static verdict run_test(const char *dir, const char *device, char *why, size_t n)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    tide_onnx_model *m = tide_onnx_open(path, device);
    if (!m) {
        snprintf(why, n, "%s", tide_last_error());
        return tide_last_error_code() == TIDE_ERR_UNSUPPORTED ? UNSUPPORTED : FAIL;
    }
    verdict v = PASS;
    for (int s = 0; v == PASS; s++) {
        snprintf(path, sizeof path, "%s/test_data_set_%d", dir, s);
        if (!exists(path)) {
            if (s == 0) {
                snprintf(why, n, "no test_data_set_0");
                v = FAIL;
            }
            break;
        }
        v = run_set(m, path, device, why, n);
    }
    tide_onnx_close(m);
    return v;
}

/* ---- the suite -------------------------------------------------------------------------------- */
typedef struct options {
    const char *data, *device, *baseline, *scope, *summary, *write_baseline, *only;
    bool quiet;
} options;

static names list_tests(const char *dir)
{
    names s = {0};
    DIR *d = opendir(dir);
    if (!d)
        return s;
    struct dirent *e;
    while ((e = readdir(d)))
        if (!strncmp(e->d_name, "test_", 5))
            names_add(&s, e->d_name, NULL);
    closedir(d);
    qsort(s.v, (size_t)s.n, sizeof *s.v, cmp_str);
    return s;
}

static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        if (*s == '"' || *s == '\\')
            fprintf(f, "\\%c", *s);
        else if ((unsigned char)*s < 0x20)
            fprintf(f, "\\u%04x", *s);
        else
            fputc(*s, f);
    }
    fputc('"', f);
}

typedef struct op_entry {
    const char *name;
    int since, until;
} op_entry;

static int cmp_entry(const void *a, const void *b)
{
    const op_entry *x = a, *y = b;
    int c = strcmp(x->name, y->name);
    return c ? c : x->since - y->since;
}

/* "- Abs: opset 6+" lines, sorted by op; several ranges of one op on one line. */
static int list_ops(void)
{
    op_entry e[1024];
    int n = 0;
    while (n < 1024 && td_onnx_op_entry(n, &e[n].name, &e[n].since, &e[n].until) == 0)
        n++;
    qsort(e, (size_t)n, sizeof *e, cmp_entry);
    int ops = 0;
    for (int i = 0; i < n; i++) {
        bool first = i == 0 || strcmp(e[i].name, e[i - 1].name);
        if (first) {
            printf("%s- %s: opset ", i ? "\n" : "", e[i].name);
            ops++;
        } else {
            printf(", ");
        }
        if (e[i].until)
            printf("%d-%d", e[i].since, e[i].until);
        else
            printf("%d+", e[i].since);
    }
    printf("\n\n%d ops.\n", ops);
    return 0;
}

int main(int argc, char **argv)
{
    options o = {.data = "/usr/include/onnx/backend/test/data"};
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        const char **slot = !strcmp(a, "--data") ? &o.data : !strcmp(a, "--device") ? &o.device
                          : !strcmp(a, "--baseline") ? &o.baseline : !strcmp(a, "--scope") ? &o.scope
                          : !strcmp(a, "--summary") ? &o.summary
                          : !strcmp(a, "--write-baseline") ? &o.write_baseline
                          : !strcmp(a, "--only") ? &o.only : NULL;
        if (!strcmp(a, "--list-ops")) {
            return list_ops();
        } else if (!strcmp(a, "--quiet")) {
            o.quiet = true;
        } else if (!strcmp(a, "--jit")) {
            use_jit = true;
        } else if (slot && v) {
            *slot = v;
            i++;
        } else {
            fprintf(stderr, "usage: onnx_conformance [--data DIR] [--device D] [--baseline F] "
                            "[--scope F] [--summary F] [--write-baseline F] [--only S] [--quiet] [--jit]\n");
            return 2;
        }
    }
    names scope = {0}, baseline = {0}, passed = {0};
    if (o.scope)
        names_read(&scope, o.scope);
    if (o.baseline)
        names_read(&baseline, o.baseline);
    FILE *summary = o.summary ? fopen(o.summary, "w") : NULL;
    if (o.summary && !summary) {
        fprintf(stderr, "onnx_conformance: cannot write %s\n", o.summary);
        return 2;
    }
    if (summary)
        fprintf(summary, "{\"rtol\": %g, \"atol\": %g, \"tests\": [\n", RTOL, ATOL);
    int total[3] = {0}, first = 1;
    for (int f = 0; f < NFOLDERS; f++) {
        char dir[2048];
        snprintf(dir, sizeof dir, "%.2000s/%s", o.data, folders[f]);
        names tests = list_tests(dir);
        int count[3] = {0};
        for (int t = 0; t < tests.n; t++) {
            char id[512], why[1024] = "", tdir[3072];
            snprintf(id, sizeof id, "%s/%s", folders[f], tests.v[t]);
            if (o.only && !strstr(id, o.only))
                continue;
            int sc = names_find(&scope, id);
            verdict v;
            if (sc >= 0) {
                v = UNSUPPORTED;
                snprintf(why, sizeof why, "out of scope: %s", scope.why[sc] ? scope.why[sc] : "");
            } else {
                snprintf(tdir, sizeof tdir, "%s/%s", dir, tests.v[t]);
                v = run_test(tdir, o.device, why, sizeof why);
                tide_clear_error();
            }
            count[v]++;
            if (v == PASS)
                names_add(&passed, id, NULL);
            if (!o.quiet || v == FAIL)
                printf("%-11s %s%s%s\n", verdict_names[v], id, why[0] ? "  " : "", why);
            if (summary) {
                fprintf(summary, "%s{\"test\": ", first ? "" : ",\n");
                json_str(summary, id);
                fprintf(summary, ", \"result\": \"%s\", \"why\": ", verdict_names[v]);
                json_str(summary, why);
                fputc('}', summary);
                first = 0;
            }
        }
        int n = count[0] + count[1] + count[2];
        printf("folder %s: %d pass, %d fail, %d unsupported of %d (%.1f%% pass)\n", folders[f],
               count[PASS], count[FAIL], count[UNSUPPORTED], n, n ? 100.0 * count[PASS] / n : 0.0);
        if (summary)
            fprintf(summary, "%s{\"folder\": \"%s\", \"pass\": %d, \"fail\": %d, "
                    "\"unsupported\": %d, \"total\": %d}", first ? "" : ",\n", folders[f],
                    count[PASS], count[FAIL], count[UNSUPPORTED], n);
        first = 0;
        for (int k = 0; k < 3; k++)
            total[k] += count[k];
    }
    int missing = 0;
    for (int i = 0; i < baseline.n; i++)
        if (names_find(&passed, baseline.v[i]) < 0 && (!o.only || strstr(baseline.v[i], o.only))) {
            printf("regression  %s  passed in the baseline list and does not now\n",
                   baseline.v[i]);
            missing++;
        }
    if (summary) {
        fprintf(summary, "\n], \"pass\": %d, \"fail\": %d, \"unsupported\": %d, "
                "\"regressions\": %d}\n", total[PASS], total[FAIL], total[UNSUPPORTED], missing);
        fclose(summary);
    }
    if (o.write_baseline) {
        FILE *b = fopen(o.write_baseline, "w");
        if (!b) {
            fprintf(stderr, "onnx_conformance: cannot write %s\n", o.write_baseline);
            return 2;
        }
        fprintf(b, "# ONNX backend tests that pass (tests/onnx_conformance --write-baseline)\n");
        for (int i = 0; i < passed.n; i++)
            fprintf(b, "%s\n", passed.v[i]);
        fclose(b);
    }
    printf("onnx conformance: %d pass, %d fail, %d unsupported; %d regressions against the "
           "baseline list\n", total[PASS], total[FAIL], total[UNSUPPORTED], missing);
    return total[FAIL] || missing ? 1 : 0;
}
