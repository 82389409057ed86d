/*
 * ref_attention.c — SDPA and SDPA_GRAD from their definitions in double: every score
 * s_ij = scale * q_i . k_j + mask_ij (-inf after i when causal), the softmax of a whole row at
 * once (max, then exp and sum), and the gradients as plain sums: P_ij = exp(s_ij - lse_i),
 * dV_j = sum_i P_ij dO_i, dP_ij = dO_i . V_j, D_i = sum_j P_ij dP_ij, which is dO_i . O_i for
 * the forward's O (SDPA_GRAD's packed input; read from there, so any packed gives the CPU's
 * result), dS = P (dP - D), dQ_i = scale sum_j dS_ij K_j, dK_j = scale sum_i dS_ij Q_i.
 * O(L * S) scratch per batch, which is fine for a reference.
 */
#include <math.h>
#include <stdlib.h>

#include "ref_internal.h"

typedef struct ref_attn {
    tide_tensor *const *in;
    const tide_attrs *a;
    int nb;
    int64_t n, L, S, E, Ev;
    int64_t heads; /* heads-last outputs (core/primitive.h): the last batch dim; else 1 */
} ref_attn;

static ref_attn attn_dims(tide_tensor *const *in, const tide_attrs *a)
{
    ref_attn r = {in, a, in[0]->ndim - 2, 0, 0, 0, 0, 0, 1};
    r.n = 1;
    for (int d = 0; d < r.nb; d++)
        r.n *= in[0]->shape[d];
    r.L = in[0]->shape[r.nb];
    r.E = in[0]->shape[r.nb + 1];
    r.S = in[1]->shape[r.nb];
    r.Ev = in[2]->shape[r.nb + 1];
    if (a->nints > 2 && a->ints[2] && r.nb > 0)
        r.heads = in[0]->shape[r.nb - 1];
    return r;
}

/* Where element (i, e) of batch b's [rows, width] output matrix is stored. */
static int64_t out_pos(const ref_attn *r, int64_t b, int64_t i, int64_t e, int64_t rows,
                       int64_t width)
{
    return ((b / r->heads * rows + i) * r->heads + b % r->heads) * width + e;
}

/* Element (b, i, j) of a [batch.., rows, cols] tensor. */
static double at(const ref_attn *r, const tide_tensor *t, int64_t b, int64_t i, int64_t j)
{
    int64_t idx[TIDE_MAX_DIMS];
    ref_unflatten(r->nb, t->shape, b, idx);
    idx[r->nb] = i;
    idx[r->nb + 1] = j;
    return ref_get_f(t, ref_offset(t, idx));
}

static double score(const ref_attn *r, int64_t b, int64_t i, int64_t j)
{
    if (r->a->ints[0] && j > i)
        return -INFINITY;
    double s = 0;
    for (int64_t e = 0; e < r->E; e++)
        s += at(r, r->in[0], b, i, e) * at(r, r->in[1], b, j, e);
    s *= r->a->values[0];
    return r->a->ints[1] ? s + at(r, r->in[3], b, i, j) : s;
}

int ref_sdpa(tide_tensor *out, tide_tensor *const *in, const tide_attrs *a)
{
    if (!ref_is_float(out->dtype))
        return ref_no_kernel(TIDE_OP_SDPA, out->dtype);
    ref_attn r = attn_dims(in, a);
    double *p = malloc(sizeof(double) * (size_t)(r.S > 0 ? r.S : 1));
    if (!p)
        return td_error("ref: scaled_dot_product_attention: out of memory");
    for (int64_t b = 0; b < r.n; b++)
        for (int64_t i = 0; i < r.L; i++) {
            double mx = -INFINITY, sum = 0;
            for (int64_t j = 0; j < r.S; j++) {
                p[j] = score(&r, b, i, j);
                mx = p[j] > mx ? p[j] : mx;
            }
            for (int64_t j = 0; j < r.S; j++)
                sum += p[j] = exp(p[j] - mx);
            for (int64_t e = 0; e < r.Ev; e++) {
                double o = 0;
                for (int64_t j = 0; j < r.S; j++)
                    o += p[j] * at(&r, in[2], b, j, e);
                ref_set_f(out, out_pos(&r, b, i, e, r.L, r.Ev), o / sum);
            }
            ref_set_f(out, r.n * r.L * r.Ev + b * r.L + i, mx + log(sum));
        }
    free(p);
    return 0;
}

/* dS (L x S) of batch b into ds, from P (kept after it) and dP; dV (S x Ev) after P. */
static void grad_scores(const ref_attn *r, const tide_tensor *packed, const tide_tensor *dout,
                        int64_t b, double *ds)
{
    int64_t L = r->L, S = r->S, Ev = r->Ev;
    double *dv = ds + 2 * L * S;
    for (int64_t o = 0; o < S * Ev; o++)
        dv[o] = 0;
    for (int64_t i = 0; i < L; i++) {
        double lse = ref_get_f(packed, r->n * L * Ev + b * L + i), D = 0;
        for (int64_t e = 0; e < Ev; e++) /* sum_j P_ij dP_ij = dO_i . O_i */
            D += at(r, dout, b, i, e) * ref_get_f(packed, out_pos(r, b, i, e, L, Ev));
        for (int64_t j = 0; j < S; j++) {
            double p = exp(score(r, b, i, j) - lse), dp = 0;
            for (int64_t e = 0; e < Ev; e++) {
                double g = at(r, dout, b, i, e);
                dp += g * at(r, r->in[2], b, j, e);
                dv[j * Ev + e] += p * g;
            }
            ds[i * S + j] = p * (dp - D);
        }
    }
}

int ref_sdpa_grad(tide_tensor *out, tide_tensor *const *in, int nin, const tide_attrs *a)
{
    if (!ref_is_float(out->dtype))
        return ref_no_kernel(TIDE_OP_SDPA_GRAD, out->dtype);
    ref_attn r = attn_dims(in, a);
    int64_t L = r.L, S = r.S, E = r.E, Ev = r.Ev;
    double *ds = malloc(sizeof(double) * (size_t)(2 * L * S + S * Ev + 1)) /* dS, (unused), dV */;
    if (!ds)
        return td_error("ref: scaled_dot_product_attention: out of memory");
    double scale = a->values[0];
    for (int64_t b = 0; b < r.n; b++) {
        grad_scores(&r, in[nin - 2], in[nin - 1], b, ds);
        for (int64_t o = 0; o < S * Ev; o++)
            ref_set_f(out, r.n * L * E + r.n * S * E + out_pos(&r, b, o / Ev, o % Ev, S, Ev),
                      ds[2 * L * S + o]);
        for (int64_t e = 0; e < E; e++) {
            for (int64_t i = 0; i < L; i++) {
                double s = 0;
                for (int64_t j = 0; j < S; j++)
                    s += ds[i * S + j] * at(&r, in[1], b, j, e);
                ref_set_f(out, out_pos(&r, b, i, e, L, E), scale * s);
            }
            for (int64_t j = 0; j < S; j++) {
                double s = 0;
                for (int64_t i = 0; i < L; i++)
                    s += ds[i * S + j] * at(&r, in[0], b, i, e);
                ref_set_f(out, r.n * L * E + out_pos(&r, b, j, e, S, E), scale * s);
            }
        }
    }
    free(ds);
    return 0;
}
