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
#include "jit.h"

#define MAX_SIGS 64
#define FIRST_MAX 16

struct tide_jit_function {
    tide_jit_stats stats;
    int max_sigs, nsigs;
    uint64_t sigs[MAX_SIGS];
    bool fallen_back;
    /* the first call's tensor arguments (for the message) */
    int first_n;
    int first_arg[FIRST_MAX];
    int8_t first_ndim[FIRST_MAX];
    int64_t first_shape[FIRST_MAX][TIDE_MAX_DIMS];
};

tide_jit_function *tide_jit_function_new(int max_signatures)
{
    if (max_signatures < 1 || max_signatures > MAX_SIGS) {
        td_error("jit: max_signatures must be in 1..%d, got %d", MAX_SIGS, max_signatures);
        return NULL;
    }
    tide_jit_function *f = td_calloc(1, sizeof *f);
    if (!f) {
        td_error("jit: out of memory");
        return NULL;
    }
    f->max_sigs = max_signatures;
    return f;
}

void tide_jit_function_free(tide_jit_function *f) { free(f); }

tide_jit_stats *tide_jit_function_stats(tide_jit_function *f) { return &f->stats; }

bool tide_jit_function_is_eager(const tide_jit_function *f) { return f->fallen_back; }

static uint64_t mix(uint64_t h, uint64_t v) { return (h ^ v) * 0x100000001b3ull; }

/* The signature of args (NULL entries are not tensors); records the first call's shapes. */
static uint64_t signature(tide_jit_function *f, tide_tensor *const *args, int nargs, uint64_t other)
{
    uint64_t h = mix(0xcbf29ce484222325ull, other);
    bool record = f->nsigs == 0;
    int k = 0;
    for (int i = 0; i < nargs; i++) {
        const tide_tensor *t = args[i];
        if (!t) {
            h = mix(h, 0x9e3779b97f4a7c15ull * (uint64_t)(i + 1));
            continue;
        }
        h = mix(h, (uint64_t)t->dtype * 31 + !!(t->flags & TD_REQUIRES_GRAD));
        h = mix(h, (uint64_t)t->ndim);
        for (int d = 0; d < t->ndim; d++)
            h = mix(h, (uint64_t)t->shape[d]);
        if (record && k < FIRST_MAX) {
            f->first_arg[k] = i;
            f->first_ndim[k] = (int8_t)t->ndim;
            memcpy(f->first_shape[k], t->shape, sizeof(int64_t) * (size_t)t->ndim);
            k++;
        }
    }
    if (record)
        f->first_n = k;
    return h;
}

/* "argument 2, dim 1 kept changing (first 128, now 96)" for the first tensor that differs. */
static void describe_change(const tide_jit_function *f, tide_tensor *const *args, int nargs,
                            char *buf, size_t size)
{
    snprintf(buf, size, "the argument types changed");
    for (int k = 0; k < f->first_n; k++) {
        int i = f->first_arg[k];
        const tide_tensor *t = i < nargs ? args[i] : NULL;
        if (!t)
            continue;
        if (t->ndim != f->first_ndim[k]) {
            snprintf(buf, size, "argument %d changed from %d to %d dims", i + 1,
                     f->first_ndim[k], t->ndim);
            return;
        }
        for (int d = 0; d < t->ndim; d++)
            if (t->shape[d] != f->first_shape[k][d]) {
                snprintf(buf, size, "argument %d, dim %d kept changing (first %lld, now %lld)",
                         i + 1, d + 1, (long long)f->first_shape[k][d], (long long)t->shape[d]);
                return;
            }
    }
}

int tide_jit_function_admit(tide_jit_function *f, tide_tensor *const *args, int nargs,
                            uint64_t other, const char *where)
{
    if (f->fallen_back || tide_jit_is_tracing()) /* eager, or inlined into an outer trace */
        return 0;
    uint64_t sig = signature(f, args, nargs, other);
    for (int i = 0; i < f->nsigs; i++)
        if (f->sigs[i] == sig)
            return 1;
    if (f->nsigs < f->max_sigs) {
        f->sigs[f->nsigs++] = sig;
        return 1;
    }
    char why[200];
    describe_change(f, args, nargs, why, sizeof why);
    f->fallen_back = true;
    tide_jit_note_fallback(&f->stats);
    where = where ? where : "";
    fprintf(stderr, "tide jit: %s%sfunction met %d distinct argument signatures; running it "
            "eagerly from now on (%s)\n", where, *where ? ": " : "", f->nsigs + 1, why);
    return 0;
}
