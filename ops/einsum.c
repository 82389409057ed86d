/*
 * einsum.c — torch.einsum's equation language, lowered to the ops the rest of tide has:
 * diagonal (a label repeated within one operand), sum (a label no one else needs), permute,
 * reshape, expand and one batched matmul per pair of operands (left to right). No loop over
 * elements, so autograd, the jit and every device come from those ops.
 *
 * Syntax: operands' subscripts separated by ',', an optional "->" and output subscripts.
 * Labels are letters (case matters); "..." stands for the dims not labelled, right-aligned and
 * broadcast across operands. Without "->" the output is "..." then the labels used exactly
 * once, in ASCII order (upper case first), as PyTorch. A label's sizes must agree across
 * operands (or be 1, which broadcasts).
 */
#include <stdio.h>
#include <string.h>

#include "nn_common.h"

#define EIN_LETTERS 52
#define EIN_LABELS (EIN_LETTERS + TIDE_MAX_DIMS) /* ellipsis dims get labels 52.. */
#define EIN_MAX_OPERANDS 16

typedef struct ein_operand {
    tide_tensor *t; /* held by the scope */
    int n;          /* == t->ndim */
    int label[TIDE_MAX_DIMS];
} ein_operand;

typedef struct ein_plan {
    int nops;
    ein_operand op[EIN_MAX_OPERANDS];
    int nout, out[EIN_LABELS];
    int64_t size[EIN_LABELS]; /* each label's size (the largest seen) */
    int ellipsis;             /* number of ellipsis dims (the most any operand has) */
} ein_plan;

static int letter_id(char c)
{
    return c >= 'A' && c <= 'Z' ? c - 'A' : c >= 'a' && c <= 'z' ? 26 + c - 'a' : -1;
}

/* Reads one operand's subscripts (str, len) for tensor x into o; *ell its ellipsis dims. */
static int parse_term(const char *eq, const char *str, int len, const tide_tensor *x, int which,
                      int *labels, int *nlabels, int *ell_at)
{
    *nlabels = 0;
    *ell_at = -1;
    for (int i = 0; i < len; i++) {
        if (str[i] == '.') {
            if (*ell_at >= 0 || i + 2 >= len + 0 || str[i + 1] != '.' || str[i + 2] != '.')
                return td_error("einsum: \"%s\": operand %d has a '.' that is not one \"...\"",
                                eq, which);
            *ell_at = *nlabels;
            i += 2;
            continue;
        }
        int id = letter_id(str[i]);
        if (id < 0)
            return td_error("einsum: \"%s\": '%c' is not a letter (subscripts are a-z, A-Z or "
                            "\"...\")", eq, str[i]);
        if (*nlabels == TIDE_MAX_DIMS)
            return td_error("einsum: \"%s\": operand %d has more than %d subscripts", eq, which,
                            TIDE_MAX_DIMS);
        labels[(*nlabels)++] = id;
    }
    if (x && (*ell_at < 0 ? x->ndim != *nlabels : x->ndim < *nlabels)) {
        char s1[160];
        return td_error("einsum: \"%s\": operand %d has %d subscripts%s but is %s", eq, which,
                        *nlabels, *ell_at >= 0 ? " and \"...\"" : "",
                        nn_describe(s1, sizeof s1, x));
    }
    return 0;
}

/* Sets a label's size; sizes must agree or be 1. */
static int note_size(const char *eq, ein_plan *p, int label, int64_t size, int which)
{
    int64_t *s = &p->size[label];
    if (*s < 0 || *s == 1)
        *s = size;
    else if (size != 1 && size != *s) {
        if (label < EIN_LETTERS)
            return td_error("einsum: \"%s\": subscript '%c' has size %lld in operand %d but %lld "
                            "elsewhere", eq, label < 26 ? 'A' + label : 'a' + label - 26,
                            (long long)size, which, (long long)*s);
        return td_error("einsum: \"%s\": the \"...\" dims of operand %d do not broadcast with "
                        "the others (%lld vs %lld)", eq, which, (long long)size, (long long)*s);
    }
    return 0;
}

static int parse_inputs(const char *eq, const char *lhs, int lhs_len, tide_tensor *const *xs,
                        int n, ein_plan *p, int counts[EIN_LABELS])
{
    const char *term = lhs;
    int ells[EIN_MAX_OPERANDS], nl[EIN_MAX_OPERANDS], labels[EIN_MAX_OPERANDS][TIDE_MAX_DIMS];
    for (int k = 0; k < n; k++) {
        const char *end = memchr(term, ',', (size_t)(lhs + lhs_len - term));
        if (!end)
            end = lhs + lhs_len;
        if ((k < n - 1) != (end < lhs + lhs_len))
            return td_error("einsum: \"%s\" has subscripts for %s operands than the %d given", eq,
                            k < n - 1 ? "fewer" : "more", n);
        if (td_check_tensor("einsum", "operand", xs[k]) < 0 ||
            parse_term(eq, term, (int)(end - term), xs[k], k, labels[k], &nl[k], &ells[k]) < 0)
            return -1;
        int e = ells[k] < 0 ? 0 : xs[k]->ndim - nl[k];
        if (e > p->ellipsis)
            p->ellipsis = e;
        term = end + 1;
    }
    for (int k = 0; k < n; k++) {
        ein_operand *o = &p->op[k];
        int e = ells[k] < 0 ? 0 : xs[k]->ndim - nl[k], d = 0;
        for (int i = 0; i <= nl[k]; i++) {
            if (i == ells[k])
                for (int j = 0; j < e; j++)
                    o->label[d++] = EIN_LETTERS + p->ellipsis - e + j;
            if (i < nl[k])
                o->label[d++] = labels[k][i];
        }
        o->n = d;
        for (int i = 0; i < d; i++) {
            if (note_size(eq, p, o->label[i], xs[k]->shape[i], k) < 0)
                return -1;
            counts[o->label[i]]++;
        }
    }
    return 0;
}

static int parse_output(const char *eq, const char *rhs, ein_plan *p, const int counts[EIN_LABELS])
{
    p->nout = 0;
    if (!rhs) { /* implicit: "..." then the labels used once, in ASCII order */
        for (int j = 0; j < p->ellipsis; j++)
            p->out[p->nout++] = EIN_LETTERS + j;
        for (int id = 0; id < EIN_LETTERS; id++)
            if (counts[id] == 1)
                p->out[p->nout++] = id;
        return 0;
    }
    int labels[EIN_LABELS], nl = 0, ell = -1;
    int len = (int)strlen(rhs);
    for (int i = 0; i < len; i++) {
        if (rhs[i] == '.') {
            if (ell >= 0 || i + 2 >= len + 0 || rhs[i + 1] != '.' || rhs[i + 2] != '.')
                return td_error("einsum: \"%s\": the output has a '.' that is not one \"...\"", eq);
            ell = nl;
            i += 2;
            continue;
        }
        int id = letter_id(rhs[i]);
        if (id < 0)
            return td_error("einsum: \"%s\": '%c' in the output is not a letter", eq, rhs[i]);
        if (counts[id] == 0)
            return td_error("einsum: \"%s\": output subscript '%c' appears in no operand", eq,
                            rhs[i]);
        for (int j = 0; j < nl; j++)
            if (labels[j] == id)
                return td_error("einsum: \"%s\": output subscript '%c' appears twice", eq, rhs[i]);
        labels[nl++] = id;
    }
    for (int i = 0; i <= nl; i++) {
        if (i == ell)
            for (int j = 0; j < p->ellipsis; j++)
                p->out[p->nout++] = EIN_LETTERS + j;
        if (i < nl)
            p->out[p->nout++] = labels[i];
    }
    if (p->nout > TIDE_MAX_DIMS)
        return td_error("einsum: \"%s\": the output would have %d dims; at most %d", eq, p->nout,
                        TIDE_MAX_DIMS);
    return 0;
}

static bool has_label(const ein_operand *o, int label)
{
    for (int i = 0; i < o->n; i++)
        if (o->label[i] == label)
            return true;
    return false;
}

static bool in_output(const ein_plan *p, int label)
{
    for (int i = 0; i < p->nout; i++)
        if (p->out[i] == label)
            return true;
    return false;
}

/* Whether label is still wanted after operand k is combined: by the output or a later operand. */
static bool needed_after(const ein_plan *p, int k, int label)
{
    if (in_output(p, label))
        return true;
    for (int j = k + 1; j < p->nops; j++)
        if (has_label(&p->op[j], label))
            return true;
    return false;
}

/* A label repeated within o becomes one diagonal dim (moved last, as tide_diagonal does). */
static int take_diagonals(nn_scope *s, ein_operand *o)
{
    for (int i = 0; i < o->n; i++)
        for (int j = i + 1; j < o->n; j++) {
            if (o->label[i] != o->label[j])
                continue;
            if (o->t->shape[i] != o->t->shape[j])
                return td_error("einsum: a subscript repeated in one operand spans dims of "
                                "sizes %lld and %lld", (long long)o->t->shape[i],
                                (long long)o->t->shape[j]);
            int label = o->label[i];
            o->t = nn_keep(s, tide_diagonal(o->t, 0, i, j));
            if (!o->t)
                return -1;
            int k = 0;
            for (int d = 0; d < o->n; d++)
                if (d != i && d != j)
                    o->label[k++] = o->label[d];
            o->label[k++] = label;
            o->n = k;
            i = -1; /* start over: positions moved */
            break;
        }
    return 0;
}

/* Sums o over the labels keep() rejects. */
static int sum_out(nn_scope *s, ein_operand *o, const ein_plan *p, int k, const ein_operand *other)
{
    int dims[TIDE_MAX_DIMS], nd = 0, kept = 0;
    for (int d = 0; d < o->n; d++) {
        int l = o->label[d];
        if (needed_after(p, k, l) || (other && has_label(other, l)))
            o->label[kept++] = l;
        else
            dims[nd++] = d;
    }
    if (nd == 0)
        return 0;
    o->t = nn_keep(s, tide_sum(o->t, dims, nd, false));
    o->n = kept;
    return o->t ? 0 : -1;
}

/* o permuted to the label groups g[0..2] (each label once), expanded to the plan's sizes for
 * the shared groups, and reshaped to [prod g0, prod g1, prod g2]. */
static tide_tensor *as_batched(nn_scope *s, const ein_operand *o, const ein_plan *p,
                               const int *g, const int *ng, const bool *shared)
{
    int perm[TIDE_MAX_DIMS], k = 0;
    int64_t full[TIDE_MAX_DIMS], merged[3] = {1, 1, 1};
    for (int grp = 0; grp < 3; grp++)
        for (int i = 0; i < ng[grp]; i++) {
            int l = g[grp * EIN_LABELS + i], d = 0;
            while (o->label[d] != l)
                d++;
            perm[k] = d;
            full[k] = shared[grp] ? p->size[l] : o->t->shape[d];
            merged[grp] *= full[k++];
        }
    tide_tensor *t = nn_keep(s, tide_permute(o->t, perm));
    t = nn_keep(s, tide_expand(t, k, full));
    return nn_keep(s, tide_reshape(t, 3, merged));
}

/* a and b (each summed already) combined by one batched matmul into a. */
static int contract(nn_scope *s, ein_operand *a, const ein_operand *b, const ein_plan *p, int k)
{
    int ga[3 * EIN_LABELS], gb[3 * EIN_LABELS], na[3] = {0}, nb[3] = {0};
    int lab[TIDE_MAX_DIMS * 2], nl = 0;
    int64_t shape[TIDE_MAX_DIMS * 2];
    for (int i = 0; i < a->n; i++) { /* batch (shared, kept) and a's own */
        int l = a->label[i];
        bool shared = has_label(b, l), keep = needed_after(p, k, l);
        if (shared && !keep) {
            ga[2 * EIN_LABELS + na[2]++] = l; /* contracted: last in a, first in b */
            gb[EIN_LABELS + nb[1]++] = l;
        } else if (shared) {
            ga[na[0]++] = l;
            gb[nb[0]++] = l;
        } else {
            ga[EIN_LABELS + na[1]++] = l;
        }
    }
    for (int i = 0; i < b->n; i++)
        if (!has_label(a, b->label[i]))
            gb[2 * EIN_LABELS + nb[2]++] = b->label[i];
    const bool sh_a[3] = {true, false, true}, sh_b[3] = {true, true, false};
    tide_tensor *ma = as_batched(s, a, p, ga, na, sh_a);
    tide_tensor *mb = as_batched(s, b, p, gb, nb, sh_b);
    tide_tensor *prod = nn_keep(s, tide_matmul(ma, mb));
    for (int i = 0; i < na[0]; i++)
        lab[nl] = ga[i], shape[nl++] = p->size[ga[i]];
    for (int i = 0; i < na[1]; i++) {
        int l = ga[EIN_LABELS + i], d = 0;
        while (a->label[d] != l)
            d++;
        lab[nl] = l, shape[nl++] = a->t->shape[d];
    }
    for (int i = 0; i < nb[2]; i++) {
        int l = gb[2 * EIN_LABELS + i], d = 0;
        while (b->label[d] != l)
            d++;
        lab[nl] = l, shape[nl++] = b->t->shape[d];
    }
    if (nl > TIDE_MAX_DIMS)
        return td_error("einsum: an intermediate product would have %d dims; at most %d", nl,
                        TIDE_MAX_DIMS);
    a->t = nn_keep(s, tide_reshape(prod, nl, shape));
    memcpy(a->label, lab, sizeof(int) * (size_t)nl);
    a->n = nl;
    return a->t ? 0 : -1;
}

static tide_tensor *einsum_body(const char *eq, tide_tensor *const *xs, int n)
{
    if (!eq)
        return td_error("einsum: the equation is NULL"), NULL;
    if (n < 1 || n > EIN_MAX_OPERANDS || !xs)
        return td_error("einsum: expected 1 to %d operands, got %d", EIN_MAX_OPERANDS, n), NULL;
    char buf[512];
    int len = 0;
    for (const char *c = eq; *c; c++)
        if (*c != ' ' && len < (int)sizeof buf - 1)
            buf[len++] = *c;
    buf[len] = 0;
    const char *arrow = strstr(buf, "->");
    ein_plan p = {.nops = n};
    int counts[EIN_LABELS] = {0};
    for (int i = 0; i < EIN_LABELS; i++)
        p.size[i] = -1;
    if (parse_inputs(eq, buf, arrow ? (int)(arrow - buf) : len, xs, n, &p, counts) < 0 ||
        parse_output(eq, arrow ? arrow + 2 : NULL, &p, counts) < 0)
        return NULL;
    if (arrow && strstr(arrow + 2, "->"))
        return td_error("einsum: \"%s\" has more than one \"->\"", eq), NULL;
    nn_scope s = {0};
    for (int k = 0; k < n; k++) {
        p.op[k].t = nn_keep(&s, tide_retain(xs[k]));
        if (take_diagonals(&s, &p.op[k]) < 0)
            return nn_finish(&s, "einsum", nn_keep(&s, NULL));
    }
    ein_operand *acc = &p.op[0];
    int rc = sum_out(&s, acc, &p, 0, n > 1 ? &p.op[1] : NULL);
    for (int k = 1; k < n && rc == 0; k++) {
        rc = sum_out(&s, &p.op[k], &p, k, acc);
        rc = rc < 0 ? rc : contract(&s, acc, &p.op[k], &p, k);
        if (rc == 0 && k + 1 < n)
            rc = sum_out(&s, acc, &p, k, &p.op[k + 1]);
    }
    int perm[TIDE_MAX_DIMS];
    if (rc == 0 && acc->n != p.nout)
        rc = td_error("einsum: internal error: %d dims left for %d outputs", acc->n, p.nout);
    for (int i = 0; rc == 0 && i < p.nout; i++)
        for (int d = 0; d < acc->n; d++)
            if (acc->label[d] == p.out[i])
                perm[i] = d;
    tide_tensor *out = rc < 0 ? nn_keep(&s, NULL) : nn_keep(&s, tide_permute(acc->t, perm));
    return nn_finish(&s, "einsum", out ? nn_keep(&s, tide_contiguous(out)) : NULL);
}

tide_tensor *tide_einsum(const char *equation, tide_tensor *const *xs, int n)
{
    TD_IN_OP("einsum", einsum_body(equation, xs, n));
}
