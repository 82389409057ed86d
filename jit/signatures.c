/*
 * signatures.c — the per-function fallback of a traced function (tide_jit_function): the
 * distinct argument signatures it met (shapes, dtypes, requires_grad of its tensor arguments,
 * plus whatever the caller mixes in for other arguments). After max_signatures of them it runs
 * eagerly for good, and says once which argument and dim kept changing. The Lua binding's
 * tide.jit and C trace sessions share it.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../core/log.h"
#include "trace.h"

#define MAX_SIGS 64
#define MAX_SIG_ARGS 16  /* tensor arguments a signature records (the rest only hash) */
#define MAX_REASONS 32   /* recompile reasons kept for f:stats() (the latest) */
#define MAX_DYN 16       /* dynamic sizes passed to a call's trace */

/* One tensor argument of a signature: its type, its shape, and which dims are dynamic (any
 * size matches them). */
typedef struct sig_arg {
    int8_t present, dtype, grad, ndim;
    uint8_t dynamic; /* bit d: dim d */
    int64_t shape[TIDE_MAX_DIMS];
} sig_arg;

typedef struct signature {
    uint64_t other; /* what else the caller's signature holds, and the arguments past the recorded */
    int nargs;
    sig_arg args[MAX_SIG_ARGS];
    uint8_t said_small[MAX_SIG_ARGS]; /* dynamic dims met with size 0 or 1 (said once) */
} signature;

struct tide_jit_function {
    tide_jit_stats stats;
    int max_sigs, nsigs;
    signature *sigs; /* max_sigs of them */
    bool fallen_back;
    bool static_only;                 /* dynamic = false: every shape its own signature */
    uint8_t declared[MAX_SIG_ARGS];   /* dims declared dynamic (bit d), per argument */
    int ndyn;                         /* this call's dynamic sizes (for its trace) */
    int64_t dyn[MAX_DYN];
    int nreasons;                     /* recompile reasons met, the latest MAX_REASONS kept */
    char reasons[MAX_REASONS][200];
};

tide_jit_function *tide_jit_function_new(int max_signatures)
{
    if (max_signatures < 1 || max_signatures > MAX_SIGS) {
        td_error("jit: max_signatures must be in 1..%d, got %d", MAX_SIGS, max_signatures);
        return NULL;
    }
    tide_jit_function *f = td_calloc(1, sizeof *f);
    signature *sigs = f ? td_calloc((size_t)max_signatures, sizeof *sigs) : NULL;
    if (!sigs) {
        free(f);
        td_error("jit: out of memory");
        return NULL;
    }
    f->sigs = sigs;
    f->max_sigs = max_signatures;
    return f;
}

void tide_jit_function_free(tide_jit_function *f)
{
    if (f)
        free(f->sigs);
    free(f);
}

tide_jit_stats *tide_jit_function_stats(tide_jit_function *f) { return &f->stats; }

bool tide_jit_function_is_eager(const tide_jit_function *f) { return f->fallen_back; }

int tide_jit_function_set_dynamic(tide_jit_function *f, int arg, uint32_t dims)
{
    if (arg < 0 || arg >= MAX_SIG_ARGS || dims >= 1u << TIDE_MAX_DIMS)
        return td_error("jit: dynamic dims: argument %d (must be 0..%d), dims mask 0x%x (dims 0..%d)",
                        arg, MAX_SIG_ARGS - 1, dims, TIDE_MAX_DIMS - 1);
    if (f->nsigs)
        return td_error("jit: dynamic dims are declared before the first call");
    f->declared[arg] = (uint8_t)dims;
    return 0;
}

void tide_jit_function_set_static(tide_jit_function *f, bool static_only)
{
    f->static_only = static_only;
}

void jit_function_note_recompile(tide_jit_function *fn, const char *reason)
{
    snprintf(fn->reasons[fn->nreasons % MAX_REASONS], sizeof fn->reasons[0], "%s", reason);
    fn->nreasons++;
}

const char *tide_jit_function_recompile_reason(const tide_jit_function *f, int i)
{
    int kept = f->nreasons < MAX_REASONS ? f->nreasons : MAX_REASONS;
    if (i < 0 || i >= kept)
        return NULL;
    return f->reasons[(f->nreasons - kept + i) % MAX_REASONS];
}

int tide_jit_function_dynamic_dims(const tide_jit_function *f, int *args, int *dims, int max)
{
    uint8_t all[MAX_SIG_ARGS] = {0};
    for (int s = 0; s < f->nsigs; s++)
        for (int i = 0; i < f->sigs[s].nargs; i++)
            all[i] |= f->sigs[s].args[i].dynamic;
    int n = 0;
    for (int i = 0; i < MAX_SIG_ARGS; i++)
        for (int d = 0; d < TIDE_MAX_DIMS; d++)
            if (all[i] >> d & 1) {
                if (n < max) {
                    args[n] = i;
                    dims[n] = d;
                }
                n++;
            }
    return n;
}

static uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull; }

/* The signature of a call: its first MAX_SIG_ARGS arguments recorded (NULL entries are not
 * tensors), the others hashed into `other` with the caller's own. */
static void signature_of(tide_tensor *const *args, int nargs, uint64_t other, signature *sig)
{
    memset(sig, 0, sizeof *sig);
    uint64_t h = mix(0xcbf29ce484222325ull, other);
    for (int i = 0; i < nargs; i++) {
        const tide_tensor *t = args[i];
        if (i < MAX_SIG_ARGS) {
            if (t) {
                sig_arg *a = &sig->args[i];
                *a = (sig_arg){1, (int8_t)t->dtype, !!(t->flags & TD_REQUIRES_GRAD),
                               (int8_t)t->ndim, 0, {0}};
                memcpy(a->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
            }
            continue;
        }
        h = mix(h, t ? (uint64_t)t->dtype * 31 + !!(t->flags & TD_REQUIRES_GRAD) : 7);
        for (int d = 0; t && d < t->ndim; d++)
            h = mix(h, (uint64_t)t->shape[d]);
    }
    sig->nargs = nargs < MAX_SIG_ARGS ? nargs : MAX_SIG_ARGS;
    sig->other = h;
}

/* Whether two signatures have the same types, ranks and everything but sizes. */
static bool same_types(const signature *a, const signature *b)
{
    if (a->other != b->other || a->nargs != b->nargs)
        return false;
    for (int i = 0; i < a->nargs; i++) {
        const sig_arg *x = &a->args[i], *y = &b->args[i];
        if (x->present != y->present || x->dtype != y->dtype || x->grad != y->grad ||
            x->ndim != y->ndim)
            return false;
    }
    return true;
}

/* Whether call c matches recorded signature s (its dynamic dims by any size: sizes 0 and 1
 * specialize in the segments' plans, not here). */
static bool matches(const signature *s, const signature *c)
{
    if (!same_types(s, c))
        return false;
    for (int i = 0; i < s->nargs; i++)
        for (int d = 0; d < s->args[i].ndim; d++) {
            if (!(s->args[i].dynamic >> d & 1) && c->args[i].shape[d] != s->args[i].shape[d])
                return false;
        }
    return true;
}

/* Whether call c differs from s only in sizes of at least 2 on both sides: then those dims
 * become dynamic in s (said in the log and kept for f:stats()). */
static bool generalize(tide_jit_function *f, signature *s, const signature *c, const char *where)
{
    if (f->static_only || !same_types(s, c))
        return false;
    for (int i = 0; i < s->nargs; i++)
        for (int d = 0; d < s->args[i].ndim; d++) {
            int64_t was = s->args[i].shape[d], now = c->args[i].shape[d];
            if (was != now && (was < 2 || now < 2) && !(s->args[i].dynamic >> d & 1))
                return false;
        }
    for (int i = 0; i < s->nargs; i++)
        for (int d = 0; d < s->args[i].ndim; d++) {
            int64_t was = s->args[i].shape[d], now = c->args[i].shape[d];
            if (was == now || s->args[i].dynamic >> d & 1)
                continue;
            s->args[i].dynamic |= (uint8_t)(1u << d);
            char line[200];
            snprintf(line, sizeof line, "argument %d dim %d was %lld, now %lld: dim made symbolic",
                     i + 1, d + 1, (long long)was, (long long)now);
            td_log("jit", "recompile%s%s: %s", *where ? " at " : "", where, line);
            jit_function_note_recompile(f, line);
        }
    return true;
}

/* A dynamic dim met with size 0 or 1 the first time: its plans specialize (said once). */
static void note_small(tide_jit_function *f, signature *s, int i, int d, int64_t size,
                       const char *where)
{
    if (s->said_small[i] >> d & 1)
        return;
    s->said_small[i] |= (uint8_t)(1u << d);
    char line[200];
    snprintf(line, sizeof line, "argument %d dim %d is %lld: sizes 0 and 1 specialize (a plan "
             "of their own)", i + 1, d + 1, (long long)size);
    td_log("jit", "recompile%s%s: %s", *where ? " at " : "", where, line);
    jit_function_note_recompile(f, line);
}

/* This call's sizes of the dynamic dims of signature s (its trace makes sizes derived from
 * them symbolic). */
static void note_dynamic_sizes(tide_jit_function *f, signature *s, const signature *c,
                               const char *where)
{
    f->ndyn = 0;
    for (int i = 0; i < s->nargs; i++)
        for (int d = 0; d < s->args[i].ndim; d++) {
            if (!(s->args[i].dynamic >> d & 1))
                continue;
            if (f->ndyn < MAX_DYN)
                f->dyn[f->ndyn++] = c->args[i].shape[d];
            if (c->args[i].shape[d] < 2)
                note_small(f, s, i, d, c->args[i].shape[d], where);
        }
}

/* A new signature: the call's, with its declared dynamic dims (where the size is 2 or more). */
static void record(tide_jit_function *f, const signature *c)
{
    signature *s = &f->sigs[f->nsigs++];
    *s = *c;
    for (int i = 0; i < s->nargs; i++)
        for (int d = 0; d < s->args[i].ndim; d++)
            if (f->declared[i] >> d & 1 && !f->static_only && s->args[i].shape[d] >= 2)
                s->args[i].dynamic |= (uint8_t)(1u << d);
}

/* "argument 2, dim 1 kept changing (first 128, now 96)" for the first tensor that differs
 * from the first signature. */
static void describe_change(const tide_jit_function *f, const signature *c, char *buf,
                            size_t size)
{
    snprintf(buf, size, "the argument types changed");
    const signature *first = &f->sigs[0];
    for (int i = 0; i < first->nargs && i < c->nargs; i++) {
        const sig_arg *a = &first->args[i], *b = &c->args[i];
        if (!a->present || !b->present)
            continue;
        if (a->ndim != b->ndim) {
            snprintf(buf, size, "argument %d changed from %d to %d dims", i + 1, a->ndim, b->ndim);
            return;
        }
        for (int d = 0; d < a->ndim; d++)
            if (a->shape[d] != b->shape[d]) {
                snprintf(buf, size, "argument %d, dim %d kept changing (first %lld, now %lld)",
                         i + 1, d + 1, (long long)a->shape[d], (long long)b->shape[d]);
                return;
            }
    }
}

int tide_jit_function_admit(tide_jit_function *f, tide_tensor *const *args, int nargs,
                            uint64_t other, const char *where)
{
    if (f->fallen_back || tide_jit_is_tracing()) /* eager, or inlined into an outer trace */
        return 0;
    where = where ? where : "";
    signature call;
    signature_of(args, nargs, other, &call);
    for (int i = 0; i < f->nsigs; i++)
        if (matches(&f->sigs[i], &call)) {
            note_dynamic_sizes(f, &f->sigs[i], &call, where);
            return 1;
        }
    for (int i = 0; i < f->nsigs; i++)
        if (generalize(f, &f->sigs[i], &call, where)) {
            note_dynamic_sizes(f, &f->sigs[i], &call, where);
            return 1;
        }
    if (f->nsigs < f->max_sigs) {
        record(f, &call);
        note_dynamic_sizes(f, &f->sigs[f->nsigs - 1], &call, where);
        return 1;
    }
    char why[200];
    describe_change(f, &call, why, sizeof why);
    f->fallen_back = true;
    tide_jit_note_fallback(&f->stats);
    fprintf(stderr, "tide jit: %s%sfunction met %d distinct argument signatures; running it "
            "eagerly from now on (%s)\n", where, *where ? ": " : "", f->nsigs + 1, why);
    return 0;
}

int tide_jit_trace_begin_function(tide_jit_function *f, const char *(*where)(void *ctx),
                                  void *ctx)
{
    if (tide_jit_trace_begin(&f->stats, where, ctx) < 0)
        return -1;
    jit_trace *tr = jit_current;
    tr->fn = f;
    tr->static_only = f->static_only;
    tr->ndyn = f->ndyn;
    memcpy(tr->dyn, f->dyn, sizeof(int64_t) * (size_t)f->ndyn);
    return 0;
}
