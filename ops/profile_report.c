/*
 * profile_report.c — a finished profile's report: rows aggregated by (op or group, source
 * line, device) and sorted by total time, each against the roofline; the text table; the
 * Chrome trace-event JSON. Built once at tide_profile_end from the recorder's events.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../core/strbuf.h"
#include "profile_internal.h"

static tide_profile_row *rows;
static tide_profile_event *pub;
static int nrows, npub;
static bool ready; /* a report exists (a profile ended since the last begin) */
static tide_profile_summary summary;

void td_prof_report_clear(void) { ready = false; }

static const td_prof_event *sort_base;

/* Events of one row next to each other: by name, line, device. */
static int by_key(const void *a, const void *b)
{
    const td_prof_event *x = &sort_base[*(const int *)a], *y = &sort_base[*(const int *)b];
    if (x->name != y->name)
        return x->name < y->name ? -1 : 1;
    if (x->where != y->where)
        return x->where < y->where ? -1 : 1;
    return strcmp(x->device, y->device);
}

static int by_time(const void *a, const void *b)
{
    double x = ((const tide_profile_row *)a)->total_ms, y = ((const tide_profile_row *)b)->total_ms;
    return x < y ? 1 : x > y ? -1 : 0;
}

/* A row's rates and its place under the roofline: compute-bound when its FLOPs per byte
 * exceed the machine's balance (sgemm GFLOP/s over STREAM GB/s). Off the CPU the references
 * (measured on the CPU) say nothing: -1. */
static void rate_row(tide_profile_row *r, double wall_ms)
{
    double s = r->total_ms / 1e3;
    r->percent = wall_ms > 0 ? 100.0 * r->total_ms / wall_ms : 0;
    r->gbps = s > 0 ? (double)r->bytes / s / 1e9 : 0;
    r->gflops = s > 0 ? (double)r->flops / s / 1e9 : 0;
    double balance = summary.sgemm_gflops / summary.stream_gbps;
    r->compute_bound = r->bytes > 0 ? (double)r->flops / (double)r->bytes > balance : r->flops > 0;
    if (strcmp(r->device, "cpu") != 0)
        r->roofline = -1;
    else
        r->roofline = r->compute_bound ? r->gflops / summary.sgemm_gflops
                                       : r->gbps / summary.stream_gbps;
}

static int make_rows(const td_prof_event *ev, int n, double wall_ms)
{
    int *order = malloc(sizeof *order * (size_t)(n ? n : 1));
    rows = realloc(rows, sizeof *rows * (size_t)(n ? n : 1));
    if (!order || !rows) {
        free(order);
        return td_error_code(TIDE_ERR_OUT_OF_MEMORY, "tide_profile_end: out of memory");
    }
    for (int i = 0; i < n; i++)
        order[i] = i;
    sort_base = ev;
    qsort(order, (size_t)n, sizeof *order, by_key);
    nrows = 0;
    for (int i = 0; i < n; i++) {
        const td_prof_event *e = &ev[order[i]];
        if (i == 0 || by_key(&order[i - 1], &order[i]) != 0)
            rows[nrows++] = (tide_profile_row){td_profile_string(e->name), e->device,
                                               td_profile_string(e->where), 0, 0, 0, 0, 0,
                                               0, 0, false, 0};
        tide_profile_row *r = &rows[nrows - 1];
        r->calls++;
        r->total_ms += e->dur_us / 1e3;
        r->bytes += e->bytes;
        r->flops += e->flops;
    }
    free(order);
    for (int i = 0; i < nrows; i++)
        rate_row(&rows[i], wall_ms);
    qsort(rows, (size_t)nrows, sizeof *rows, by_time);
    return 0;
}

int td_prof_report_build(const td_prof_event *ev, int n, double wall_ms)
{
    memset(&summary, 0, sizeof summary);
    td_profile_roofline(&summary.stream_gbps, &summary.sgemm_gflops, summary.cpu,
                        sizeof summary.cpu);
    pub = realloc(pub, sizeof *pub * (size_t)(n ? n : 1));
    if (!pub)
        return td_error_code(TIDE_ERR_OUT_OF_MEMORY, "tide_profile_end: out of memory");
    summary.wall_ms = wall_ms;
    for (int i = 0; i < n; i++) {
        pub[i] = (tide_profile_event){td_profile_string(ev[i].name), ev[i].device,
                                      td_profile_string(ev[i].where), ev[i].tid, ev[i].ts_us,
                                      ev[i].dur_us, ev[i].bytes, ev[i].flops};
        summary.kernel_ms += ev[i].dur_us / 1e3;
    }
    npub = n;
    if (make_rows(ev, n, wall_ms) < 0)
        return -1;
    summary.nevents = npub;
    summary.nrows = nrows;
    ready = true;
    return 0;
}

static int not_ready(const char *fn)
{
    return td_error("%s: no finished profile (%s)", fn,
                    tide_profile_active() ? "one is running: call tide_profile_end first"
                                          : "call tide_profile_begin and tide_profile_end");
}

int tide_profile_rows(const tide_profile_row **r)
{
    if (!ready)
        return not_ready("tide_profile_rows");
    if (r)
        *r = rows;
    return nrows;
}

int tide_profile_events(const tide_profile_event **e)
{
    if (!ready)
        return not_ready("tide_profile_events");
    if (e)
        *e = pub;
    return npub;
}

int tide_profile_summarize(tide_profile_summary *s)
{
    if (!ready)
        return not_ready("tide_profile_summarize");
    if (!s)
        return td_error("tide_profile_summarize: the summary pointer is NULL");
    *s = summary;
    return 0;
}

static void emit_row(td_sbuf *b, const tide_profile_row *r)
{
    char roof[16];
    if (r->roofline < 0)
        snprintf(roof, sizeof roof, "-");
    else
        snprintf(roof, sizeof roof, "%.1f%%", 100 * r->roofline);
    td_emit(b, "%10.3f %6.1f %7lld %9.2f %9.2f %8s %-7s %-7s %-28s %s\n", r->total_ms,
            r->percent, (long long)r->calls, r->gbps, r->gflops, roof,
            r->compute_bound ? "compute" : "memory", r->device, r->name,
            *r->where ? r->where : "-");
}

char *tide_profile_table(void)
{
    if (!ready) {
        not_ready("tide_profile_table");
        return NULL;
    }
    td_sbuf b = {0};
    td_emit(&b, "tide profile: %.3f ms profiled, %.3f ms in %d kernels and groups (%.1f%%)\n",
            summary.wall_ms, summary.kernel_ms, npub,
            summary.wall_ms > 0 ? 100 * summary.kernel_ms / summary.wall_ms : 0.0);
    td_emit(&b, "cpu: %s, %d threads; roofline: STREAM triad %.2f GB/s, sgemm %.2f GFLOP/s\n",
            summary.cpu, td_num_threads(), summary.stream_gbps, summary.sgemm_gflops);
    td_emit(&b, "%10s %6s %7s %9s %9s %8s %-7s %-7s %-28s %s\n", "total ms", "%", "calls",
            "GB/s", "GFLOP/s", "roofline", "bound", "device", "op or group", "where");
    for (int i = 0; i < nrows; i++)
        emit_row(&b, &rows[i]);
    if (b.failed) {
        free(b.s);
        td_error_code(TIDE_ERR_OUT_OF_MEMORY, "tide_profile_table: out of memory");
        return NULL;
    }
    return b.s;
}

/* A JSON string: quotes, backslashes and control characters escaped. */
static void json_str(FILE *f, const char *s)
{
    fputc('"', f);
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c == '"' || c == '\\')
            fprintf(f, "\\%c", c);
        else if (c < 0x20)
            fprintf(f, "\\u%04x", c);
        else
            fputc(c, f);
    }
    fputc('"', f);
}

static void json_event(FILE *f, const tide_profile_event *e, int pid)
{
    fputs("{\"name\":", f);
    json_str(f, e->name);
    fprintf(f, ",\"cat\":\"%s\",\"ph\":\"X\",\"ts\":%.3f,\"dur\":%.3f,\"pid\":%d,\"tid\":%d,"
               "\"args\":{\"device\":",
            strncmp(e->name, "fused(", 6) == 0 ? "group" : "kernel", e->ts_us, e->dur_us, pid,
            e->tid);
    json_str(f, e->device);
    fputs(",\"where\":", f);
    json_str(f, e->where);
    fprintf(f, ",\"bytes\":%lld,\"flops\":%lld}}", (long long)e->bytes, (long long)e->flops);
}

int tide_profile_write_trace(const char *path)
{
    if (!path || !*path)
        return td_error("tide_profile_write_trace: the path is %s", path ? "empty" : "NULL");
    if (!ready)
        return not_ready("tide_profile_write_trace");
    FILE *f = fopen(path, "w");
    if (!f)
        return td_error("tide_profile_write_trace: cannot open '%s' for writing", path);
    int pid = (int)getpid();
    fputs("{\"displayTimeUnit\":\"ms\",\"traceEvents\":[", f);
    for (int i = 0; i < npub; i++) {
        fputs(i ? ",\n" : "\n", f);
        json_event(f, &pub[i], pid);
    }
    fputs("\n]}\n", f);
    if (fclose(f) != 0)
        return td_error("tide_profile_write_trace: writing '%s' failed", path);
    return 0;
}
