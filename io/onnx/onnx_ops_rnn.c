/*
 * onnx_ops_rnn.c — ONNX's recurrent ops RNN, GRU and LSTM, composed step by step from tide ops
 * (matmul, sigmoid, tanh, slices, stack). The input projection X W^T + Wb of every step is one
 * matmul before the loop; each step adds H R^T + Rb and applies the gates. sequence_lens is a
 * mask: a batch entry whose sequence has ended keeps its state and outputs zeros, which also
 * gives the reverse direction's per-sequence start (its state stays initial until t = len - 1).
 * Supported: directions forward, reverse and bidirectional; layout 0 and 1; initial_h/initial_c;
 * LSTM peepholes; GRU linear_before_reset; activations Sigmoid, Tanh and Relu. Rejected in
 * check: clip, input_forget, other activations.
 */
#include <stdlib.h>
#include <string.h>

#include "onnx_ops_move.h"

enum rnn_kind { KIND_RNN, KIND_GRU, KIND_LSTM };
enum act { ACT_SIGMOID, ACT_TANH, ACT_RELU };

typedef struct rnn_spec {
    enum rnn_kind kind;
    int gates;          /* 1, 3 or 4 blocks of hidden_size rows in W and R */
    int64_t hidden;
    enum act f, g, h;   /* ONNX's activation names per direction (one set for both here) */
    bool lbr;           /* GRU linear_before_reset */
} rnn_spec;

static int act_of(const char *name)
{
    return !strcmp(name, "Sigmoid") ? ACT_SIGMOID
           : !strcmp(name, "Tanh")  ? ACT_TANH
           : !strcmp(name, "Relu")  ? ACT_RELU
                                    : -1;
}

static tide_tensor *act_apply(enum act a, const tide_tensor *x)
{
    return a == ACT_SIGMOID ? tide_sigmoid(x) : a == ACT_TANH ? tide_tanh(x) : tide_relu(x);
}

/* The activations attribute (per direction; both directions must agree here), else defaults. */
static int read_acts(const onnx_node *n, rnn_spec *s, char *why, size_t size)
{
    const Onnx__AttributeProto *a = onnx_attr(n, "activations");
    int per = s->kind == KIND_RNN ? 1 : s->kind == KIND_GRU ? 2 : 3;
    int acts[6] = {ACT_SIGMOID, ACT_TANH, ACT_TANH, ACT_SIGMOID, ACT_TANH, ACT_TANH};
    if (s->kind == KIND_RNN)
        acts[0] = acts[1] = ACT_TANH;
    if (a) {
        if ((int)a->n_strings != per && (int)a->n_strings != 2 * per)
            return snprintf(why, size, "activations has %d names; expected %d or %d",
                            (int)a->n_strings, per, 2 * per), 1;
        for (int k = 0; k < (int)a->n_strings; k++) {
            char name[32] = {0};
            size_t len = a->strings[k].len < 31 ? a->strings[k].len : 31;
            memcpy(name, a->strings[k].data, len);
            acts[k] = act_of(name);
            if (acts[k] < 0)
                return snprintf(why, size, "activation '%s' is not supported", name), 1;
            if (k >= per && acts[k] != acts[k - per])
                return snprintf(why, size, "different activations per direction"), 1;
        }
    }
    s->f = (enum act)acts[0];
    s->g = (enum act)acts[per > 1 ? 1 : 0];
    s->h = (enum act)acts[per > 2 ? 2 : 0];
    return 0;
}

static int fill_spec(const onnx_node *n, enum rnn_kind kind, rnn_spec *s, char *why, size_t size)
{
    memset(s, 0, sizeof *s);
    s->kind = kind;
    s->gates = kind == KIND_RNN ? 1 : kind == KIND_GRU ? 3 : 4;
    s->lbr = onnx_attr_int(n, "linear_before_reset", 0) != 0;
    char buf[32];
    const char *dir = onnx_attr_string(n, "direction", "forward", buf, sizeof buf);
    if (strcmp(dir, "forward") && strcmp(dir, "reverse") && strcmp(dir, "bidirectional"))
        return snprintf(why, size, "direction '%s' is not supported", dir), 1;
    int64_t layout = onnx_attr_int(n, "layout", 0);
    if (layout != 0 && layout != 1)
        return snprintf(why, size, "layout %lld is not supported", (long long)layout), 1;
    if (onnx_attr(n, "clip") || onnx_attr_int(n, "input_forget", 0) ||
        onnx_attr(n, "activation_alpha") || onnx_attr(n, "activation_beta"))
        return snprintf(why, size, "clip, input_forget and activation_alpha/beta are not "
                                   "supported"), 1;
    return read_acts(n, s, why, size);
}

static int check_rnn(const onnx_node *n, char *why, size_t size)
{
    rnn_spec s;
    return fill_spec(n, KIND_RNN, &s, why, size);
}
static int check_gru(const onnx_node *n, char *why, size_t size)
{
    rnn_spec s;
    return fill_spec(n, KIND_GRU, &s, why, size);
}
static int check_lstm(const onnx_node *n, char *why, size_t size)
{
    rnn_spec s;
    return fill_spec(n, KIND_LSTM, &s, why, size);
}

/* The weights of one direction, transposed for x @ W^T, and the biases split. */
typedef struct rnn_dir {
    tide_tensor *wt, *rt;   /* [in, G*H], [H, G*H] */
    tide_tensor *wb, *rb;   /* [G*H] each, or NULL without B */
    tide_tensor *p;         /* LSTM peepholes [3H] or NULL */
} rnn_dir;

static void dir_release(rnn_dir *d)
{
    tide_tensor *ts[] = {d->wt, d->rt, d->wb, d->rb, d->p};
    onnx_release_all(ts, 5);
}

static tide_tensor *transposed_slice(const tide_tensor *w, int d)
{
    tide_tensor *s = tide_select(w, 0, d);
    tide_tensor *t = s ? tide_transpose(s, 0, 1) : NULL;
    tide_release(s);
    return t;
}

static int dir_load(onnx_ctx *c, const rnn_spec *s, int d, rnn_dir *out)
{
    memset(out, 0, sizeof *out);
    int64_t gh = s->gates * s->hidden;
    out->wt = transposed_slice(c->in[1], d);
    out->rt = out->wt ? transposed_slice(c->in[2], d) : NULL;
    if (!out->rt)
        return onnx_fail(c);
    if (c->nin > 3 && c->in[3]) {
        tide_tensor *b = tide_select(c->in[3], 0, d);
        out->wb = b ? tide_slice(b, 0, 0, gh, 1) : NULL;
        out->rb = b ? tide_slice(b, 0, gh, 2 * gh, 1) : NULL;
        tide_release(b);
        if (!out->wb || !out->rb)
            return onnx_fail(c);
    }
    if (s->kind == KIND_LSTM && c->nin > 7 && c->in[7] && !(out->p = tide_select(c->in[7], 0, d)))
        return onnx_fail(c);
    return 0;
}

/* a + b where b may be NULL (a new reference either way). */
static tide_tensor *add_opt(const tide_tensor *a, const tide_tensor *b)
{
    return !a ? NULL : b ? tide_add(a, b) : tide_retain((tide_tensor *)a);
}

static tide_tensor *gate(const tide_tensor *g, int k, int64_t hidden)
{
    return tide_slice(g, 1, k * hidden, (k + 1) * hidden, 1);
}

/* x + p * c for the LSTM peephole block k (p may be NULL). */
static tide_tensor *peep(const tide_tensor *x, const tide_tensor *p, int k, int64_t hidden,
                         const tide_tensor *cell)
{
    if (!p || !x)
        return x ? tide_retain((tide_tensor *)x) : NULL;
    tide_tensor *pk = tide_slice(p, 0, k * hidden, (k + 1) * hidden, 1);
    tide_tensor *pc = pk ? tide_mul(pk, cell) : NULL;
    tide_tensor *r = pc ? tide_add(x, pc) : NULL;
    tide_release(pk);
    tide_release(pc);
    return r;
}

/* One LSTM step: gates in the order i, o, f, c; peepholes i, o, f. */
static int lstm_step(const rnn_spec *s, const rnn_dir *d, const tide_tensor *xg,
                     const tide_tensor *h, const tide_tensor *cell, tide_tensor **hn,
                     tide_tensor **cn)
{
    int64_t H = s->hidden;
    tide_tensor *hr = tide_matmul(h, d->rt), *hrb = add_opt(hr, d->rb);
    tide_tensor *g = hrb ? tide_add(xg, hrb) : NULL;
    tide_tensor *gi = g ? gate(g, 0, H) : NULL, *go = g ? gate(g, 1, H) : NULL;
    tide_tensor *gf = g ? gate(g, 2, H) : NULL, *gc = g ? gate(g, 3, H) : NULL;
    tide_tensor *pi = peep(gi, d->p, 0, H, cell), *pf = peep(gf, d->p, 2, H, cell);
    tide_tensor *i = pi ? act_apply(s->f, pi) : NULL, *f = pf ? act_apply(s->f, pf) : NULL;
    tide_tensor *ct = gc ? act_apply(s->g, gc) : NULL;
    tide_tensor *fc = f ? tide_mul(f, cell) : NULL, *ic = i && ct ? tide_mul(i, ct) : NULL;
    *cn = fc && ic ? tide_add(fc, ic) : NULL;
    tide_tensor *po = *cn ? peep(go, d->p, 1, H, *cn) : NULL;
    tide_tensor *o = po ? act_apply(s->f, po) : NULL;
    tide_tensor *hc = *cn ? act_apply(s->h, *cn) : NULL;
    *hn = o && hc ? tide_mul(o, hc) : NULL;
    tide_tensor *tmp[] = {hr, hrb, g, gi, go, gf, gc, pi, pf, i, f, ct, fc, ic, po, o, hc};
    onnx_release_all(tmp, 17);
    return *hn ? 0 : -1;
}

/* One GRU step: gates z, r, h. */
static int gru_step(const rnn_spec *s, const rnn_dir *d, const tide_tensor *xg,
                    const tide_tensor *h, tide_tensor **hn)
{
    int64_t H = s->hidden;
    tide_tensor *rz = tide_slice(d->rt, 1, 0, 2 * H, 1), *rh = tide_slice(d->rt, 1, 2 * H, 3 * H, 1);
    tide_tensor *bz = d->rb ? tide_slice(d->rb, 0, 0, 2 * H, 1) : NULL;
    tide_tensor *bh = d->rb ? tide_slice(d->rb, 0, 2 * H, 3 * H, 1) : NULL;
    tide_tensor *hz = rz ? tide_matmul(h, rz) : NULL, *hzb = add_opt(hz, bz);
    tide_tensor *xzr = tide_slice(xg, 1, 0, 2 * H, 1), *xh = tide_slice(xg, 1, 2 * H, 3 * H, 1);
    tide_tensor *zr_in = hzb && xzr ? tide_add(xzr, hzb) : NULL;
    tide_tensor *zr = zr_in ? act_apply(s->f, zr_in) : NULL;
    tide_tensor *z = zr ? gate(zr, 0, H) : NULL, *r = zr ? gate(zr, 1, H) : NULL;
    tide_tensor *rec = NULL;
    if (r && rh && s->lbr) {
        tide_tensor *hh = tide_matmul(h, rh), *hhb = add_opt(hh, bh);
        rec = hhb ? tide_mul(r, hhb) : NULL;
        tide_release(hh);
        tide_release(hhb);
    } else if (r && rh) {
        tide_tensor *rhs = tide_mul(r, h), *hh = rhs ? tide_matmul(rhs, rh) : NULL;
        rec = add_opt(hh, bh);
        tide_release(rhs);
        tide_release(hh);
    }
    tide_tensor *pre = rec && xh ? tide_add(xh, rec) : NULL;
    tide_tensor *cand = pre ? act_apply(s->g, pre) : NULL;
    /* (1 - z) * cand + z * h = cand + z * (h - cand) */
    tide_tensor *diff = cand ? tide_sub(h, cand) : NULL, *zd = diff && z ? tide_mul(z, diff) : NULL;
    *hn = zd ? tide_add(cand, zd) : NULL;
    tide_tensor *tmp[] = {rz, rh, bz, bh, hz, hzb, xzr, xh, zr_in, zr, z, r, rec, pre, cand,
                          diff, zd};
    onnx_release_all(tmp, 17);
    return *hn ? 0 : -1;
}

static int rnn_step(const rnn_spec *s, const rnn_dir *d, const tide_tensor *xg,
                    const tide_tensor *h, tide_tensor **hn)
{
    tide_tensor *hr = tide_matmul(h, d->rt), *hrb = add_opt(hr, d->rb);
    tide_tensor *g = hrb ? tide_add(xg, hrb) : NULL;
    *hn = g ? act_apply(s->f, g) : NULL;
    tide_tensor *tmp[] = {hr, hrb, g};
    onnx_release_all(tmp, 3);
    return *hn ? 0 : -1;
}

/* where(mask, a, b) with mask NULL meaning every entry is a (a new reference). */
static tide_tensor *masked(const tide_tensor *mask, const tide_tensor *a, const tide_tensor *b)
{
    return mask ? tide_where(mask, a, b) : tide_retain((tide_tensor *)a);
}

/* The sequence_lens masks: masks[t] bool [batch, 1], t < len[b]; all NULL when every sequence
 * is full length. */
static int read_masks(onnx_ctx *c, int64_t seq, int64_t batch, tide_tensor **masks)
{
    for (int64_t t = 0; t < seq; t++)
        masks[t] = NULL;
    if (c->nin <= 4 || !c->in[4])
        return 0;
    int64_t *lens = td_malloc(sizeof *lens * (size_t)batch);
    uint8_t *m = td_malloc((size_t)batch);
    int count = 0, rc = lens && m ? 0 : onnx_fail(c);
    if (!rc)
        rc = onnx_input_ints(c, 4, lens, (int)batch, &count);
    if (!rc && count != batch)
        rc = onnx_error(c, "sequence_lens has %d entries for a batch of %lld", count,
                        (long long)batch);
    bool full = true;
    for (int64_t b = 0; !rc && b < batch; b++) {
        if (lens[b] < 0 || lens[b] > seq)
            rc = onnx_error(c, "sequence_lens[%lld] = %lld is outside [0, %lld]", (long long)b,
                            (long long)lens[b], (long long)seq);
        full = full && lens[b] == seq;
    }
    int64_t shape[2] = {batch, 1};
    for (int64_t t = 0; !rc && !full && t < seq; t++) {
        for (int64_t b = 0; b < batch; b++)
            m[b] = t < lens[b];
        masks[t] = tide_from_data_on(onnx_device_of(c), m, 2, shape, TIDE_BOOL);
        if (!masks[t])
            rc = onnx_fail(c);
    }
    free(lens);
    free(m);
    return rc;
}

/* The initial state k (5: initial_h, 6: initial_c) of direction d, else zeros [batch, H]. */
static tide_tensor *initial_state(onnx_ctx *c, int k, int d, int64_t batch, int64_t hidden,
                                  bool batch_first)
{
    if (c->nin > k && c->in[k])
        return tide_select(c->in[k], batch_first ? 1 : 0, d);
    int64_t shape[2] = {batch, hidden};
    return tide_zeros_on(onnx_device_of(c), 2, shape, tide_get_dtype(c->in[0]));
}

typedef struct rnn_run {
    const rnn_spec *s;
    const tide_tensor *x;   /* [seq, batch, in] */
    tide_tensor **masks;    /* per step, or NULLs */
    tide_tensor *zeros;     /* [batch, H], the output of a finished sequence */
} rnn_run;

/* One direction over the sequence: ys[t] [batch, H] (may be NULL when Y is not wanted), the
 * last h and c. The state h, c lives in hc[0], hc[1]. */
static int run_direction(onnx_ctx *c, const rnn_run *r, const rnn_dir *d, bool reverse,
                         tide_tensor *hc[2], tide_tensor **ys)
{
    int64_t seq = tide_shape(r->x)[0];
    tide_tensor *xw = tide_matmul(r->x, d->wt), *xg_all = add_opt(xw, d->wb);
    tide_release(xw);
    if (!xg_all)
        return onnx_fail(c);
    int rc = 0;
    for (int64_t k = 0; !rc && k < seq; k++) {
        int64_t t = reverse ? seq - 1 - k : k;
        tide_tensor *xg = tide_select(xg_all, 0, t), *hn = NULL, *cn = NULL;
        int st = !xg ? -1
                 : r->s->kind == KIND_LSTM ? lstm_step(r->s, d, xg, hc[0], hc[1], &hn, &cn)
                 : r->s->kind == KIND_GRU  ? gru_step(r->s, d, xg, hc[0], &hn)
                                           : rnn_step(r->s, d, xg, hc[0], &hn);
        tide_release(xg);
        tide_tensor *m = r->masks[t];
        tide_tensor *h2 = st ? NULL : masked(m, hn, hc[0]);
        tide_tensor *c2 = !h2 || !cn ? NULL : masked(m, cn, hc[1]);
        if (h2 && ys)
            ys[t] = masked(m, hn, r->zeros);
        rc = !h2 || (cn && !c2) || (ys && !ys[t]) ? onnx_fail(c) : 0;
        tide_release(hn);
        tide_release(cn);
        tide_release(hc[0]);
        hc[0] = h2;
        if (cn) {
            tide_release(hc[1]);
            hc[1] = c2;
        }
    }
    tide_release(xg_all);
    return rc;
}

static bool wanted(const onnx_ctx *c, int k) { return k < c->nout && c->node->out[k] >= 0; }

/* W [dirs, G*H, in] and R [dirs, G*H, H] must agree with X [seq, batch, in] and direction. */
static int check_shapes(onnx_ctx *c, const rnn_spec *s, const tide_tensor *x, int dirs)
{
    const tide_tensor *w = c->in[1], *r = c->in[2];
    if (tide_ndim(x) != 3 || tide_ndim(w) != 3 || tide_ndim(r) != 3)
        return onnx_error(c, "X, W and R must be 3-D; they have %d, %d and %d dims",
                          tide_ndim(x), tide_ndim(w), tide_ndim(r));
    int64_t gh = s->gates * s->hidden;
    if (tide_shape(w)[0] != dirs || tide_shape(r)[0] != dirs || tide_shape(w)[1] != gh ||
        tide_shape(r)[1] != gh || tide_shape(w)[2] != tide_shape(x)[2])
        return onnx_error(c, "W [%lld, %lld, %lld] and R [%lld, %lld, %lld] do not fit X's "
                             "input size %lld, %d direction(s) and hidden size %lld",
                          (long long)tide_shape(w)[0], (long long)tide_shape(w)[1],
                          (long long)tide_shape(w)[2], (long long)tide_shape(r)[0],
                          (long long)tide_shape(r)[1], (long long)tide_shape(r)[2],
                          (long long)tide_shape(x)[2], dirs, (long long)s->hidden);
    if (!tide_dtype_is_floating(tide_get_dtype(x)))
        return onnx_unsupported(c, "X is %s; only floating types are supported",
                                tide_dtype_name(tide_get_dtype(x)));
    return 0;
}

/* Y [seq, dirs, batch, H] (layout 1: [batch, seq, dirs, H]) from per-direction [seq, batch, H]. */
static tide_tensor *join_y(tide_tensor **yd, int dirs, bool batch_first)
{
    tide_tensor *y = tide_stack(yd, dirs, 1);
    if (!y || !batch_first)
        return y;
    static const int perm[4] = {2, 0, 1, 3};
    tide_tensor *p = tide_permute(y, perm);
    tide_release(y);
    return p;
}

/* Y_h or Y_c [dirs, batch, H] (layout 1: [batch, dirs, H]). */
static tide_tensor *join_state(tide_tensor **st, int dirs, bool batch_first)
{
    tide_tensor *s = tide_stack(st, dirs, 0);
    if (!s || !batch_first)
        return s;
    tide_tensor *t = tide_transpose(s, 0, 1);
    tide_release(s);
    return t;
}

/* Runs direction d into yd[d] (when Y is wanted), hs[d] and cs[d]. */
static int run_one(onnx_ctx *c, const rnn_run *r, int d, bool reverse, bool batch_first,
                   tide_tensor **yd, tide_tensor **hs, tide_tensor **cs)
{
    int64_t seq = tide_shape(r->x)[0], batch = tide_shape(r->x)[1], H = r->s->hidden;
    rnn_dir w;
    tide_tensor *hc[2] = {NULL, NULL}, **ys = NULL;
    int rc = dir_load(c, r->s, d, &w);
    if (!rc && wanted(c, 0) && !(ys = td_calloc((size_t)seq, sizeof *ys)))
        rc = onnx_fail(c);
    if (!rc) {
        hc[0] = initial_state(c, 5, d, batch, H, batch_first);
        hc[1] = r->s->kind == KIND_LSTM ? initial_state(c, 6, d, batch, H, batch_first) : NULL;
        if (!hc[0] || (r->s->kind == KIND_LSTM && !hc[1]))
            rc = onnx_fail(c);
    }
    if (!rc)
        rc = run_direction(c, r, &w, reverse, hc, ys);
    if (!rc && ys && !(yd[d] = tide_stack(ys, (int)seq, 0)))
        rc = onnx_fail(c);
    hs[d] = hc[0];
    cs[d] = hc[1];
    if (ys)
        onnx_release_all(ys, (int)seq);
    free(ys);
    dir_release(&w);
    return rc;
}

static int run_recurrent(onnx_ctx *c, enum rnn_kind kind)
{
    rnn_spec s;
    char why[128], buf[32];
    if (fill_spec(c->node, kind, &s, why, sizeof why))
        return onnx_unsupported(c, "%s", why);
    s.hidden = tide_ndim(c->in[2]) == 3 ? tide_shape(c->in[2])[2] : 0;
    const char *dir = onnx_attr_string(c->node, "direction", "forward", buf, sizeof buf);
    int dirs = !strcmp(dir, "bidirectional") ? 2 : 1;
    bool batch_first = onnx_attr_int(c->node, "layout", 0) == 1;
    if (tide_ndim(c->in[0]) != 3)
        return onnx_error(c, "X must be 3-D; it has %d dims", tide_ndim(c->in[0]));
    tide_tensor *x = batch_first ? tide_transpose(c->in[0], 0, 1) : tide_retain(c->in[0]);
    if (!x)
        return onnx_fail(c);
    int64_t seq = tide_shape(x)[0], batch = tide_shape(x)[1], zshape[2] = {batch, s.hidden};
    tide_tensor **masks = td_calloc((size_t)seq + 1, sizeof *masks);
    tide_tensor *yd[2] = {NULL, NULL}, *hs[2] = {NULL, NULL}, *cs[2] = {NULL, NULL};
    rnn_run r = {&s, x, masks, NULL};
    int rc = !masks ? onnx_fail(c) : check_shapes(c, &s, x, dirs);
    if (!rc)
        rc = read_masks(c, seq, batch, masks);
    if (!rc && !(r.zeros = tide_zeros_on(onnx_device_of(c), 2, zshape, tide_get_dtype(x))))
        rc = onnx_fail(c);
    for (int d = 0; !rc && d < dirs; d++)
        rc = run_one(c, &r, d, d == 1 || !strcmp(dir, "reverse"), batch_first, yd, hs, cs);
    if (!rc && wanted(c, 0) && !(c->out[0] = join_y(yd, dirs, batch_first)))
        rc = onnx_fail(c);
    if (!rc && wanted(c, 1) && !(c->out[1] = join_state(hs, dirs, batch_first)))
        rc = onnx_fail(c);
    if (!rc && kind == KIND_LSTM && wanted(c, 2) && !(c->out[2] = join_state(cs, dirs, batch_first)))
        rc = onnx_fail(c);
    if (masks)
        onnx_release_all(masks, (int)seq);
    free(masks);
    tide_tensor *tmp[] = {x, r.zeros, yd[0], yd[1], hs[0], hs[1], cs[0], cs[1]};
    onnx_release_all(tmp, 8);
    return rc;
}

static int run_rnn(onnx_ctx *c) { return run_recurrent(c, KIND_RNN); }
static int run_gru(onnx_ctx *c) { return run_recurrent(c, KIND_GRU); }
static int run_lstm(onnx_ctx *c) { return run_recurrent(c, KIND_LSTM); }

const onnx_op onnx_ops_rnn[] = {
    {"RNN", 7, 0, 3, 6, check_rnn, run_rnn, 0},
    {"GRU", 7, 0, 3, 6, check_gru, run_gru, 0},
    {"LSTM", 7, 0, 3, 8, check_lstm, run_lstm, 0},
    {0},
};
