/*
 * formulas.c — the backward formula of every differentiable primitive, written only with the
 * public ops of tide.h (and, for max_pool2d's indices, the dispatcher), so a tracer records
 * backward like any other code. g is the gradient of the node's output: it has the output's
 * shape and dtype; each formula returns gradients of its inputs' shapes and dtypes.
 */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "../ops/dispatch.h"
#include "../ops/strided_views.h"
#include "autograd.h"

/* ---- a scope for the intermediates of one formula ----------------------------------------- */

#define SCOPE_MAX 64

typedef struct scope {
    tide_tensor *held[SCOPE_MAX];
    int n;
    bool failed;
    char first_error[512];
} scope;

/* Keeps t (a new reference) until the scope ends; remembers the first failure. */
static tide_tensor *keep(scope *s, tide_tensor *t)
{
    if (!t) {
        if (!s->failed)
            snprintf(s->first_error, sizeof s->first_error, "%s", tide_last_error());
        s->failed = true;
        return NULL;
    }
    if (s->n == SCOPE_MAX) {
        tide_release(t);
        if (!s->failed)
            snprintf(s->first_error, sizeof s->first_error, "internal error: scope full");
        s->failed = true;
        return NULL;
    }
    s->held[s->n++] = t;
    return t;
}

/* A result handed to the engine: a new reference (NULL when the scope failed). */
static tide_tensor *give(scope *s, tide_tensor *t) { return s->failed ? NULL : tide_retain(t); }

static void end_scope(scope *s)
{
    for (int i = 0; i < s->n; i++)
        tide_release(s->held[i]);
    s->n = 0;
}

#define K(e) keep(S, (e))

static tide_tensor *number(scope *S, double v) { return K(tide_number(v)); }

/* Zeros of the given shape and dtype on like's device. */
static tide_tensor *zeros_on(scope *S, int ndim, const int64_t *shape, tide_dtype dtype,
                             const tide_tensor *like)
{
    return K(td_full_on(like ? like->device : tide_cpu_device(), "backward", ndim, shape, 0,
                        dtype));
}

/* g moved to the device the input of a TO lived on (a TO of its own, so a gradient of the
 * gradient flows back too). */
static tide_tensor *to_input_device(scope *S, tide_tensor *g, const ag_input *a)
{
    return K(td_to_device(g, a->device));
}

/* Zeros of an input's shape and dtype, on g's device. */
static tide_tensor *zeros_like_input(scope *S, const ag_input *a, const tide_tensor *g)
{
    return zeros_on(S, a->ndim, a->shape, (tide_dtype)a->dtype, g);
}

/* g summed over the dims that broadcasting added or stretched, to (ndim, shape). */
static tide_tensor *sum_to(scope *S, tide_tensor *g, int ndim, const int64_t *shape)
{
    if (!g)
        return NULL;
    if (g->ndim == ndim && memcmp(g->shape, shape, sizeof(int64_t) * ndim) == 0)
        return g;
    int lead = g->ndim - ndim, dims[TIDE_MAX_DIMS], nd = 0;
    for (int d = 0; d < g->ndim; d++)
        if (d < lead || (shape[d - lead] == 1 && g->shape[d] != 1))
            dims[nd++] = d;
    tide_tensor *s = nd ? K(tide_sum(g, dims, nd, true)) : g;
    return s ? K(tide_reshape(s, ndim, shape)) : NULL;
}

static tide_tensor *sum_to_input(scope *S, tide_tensor *g, const ag_input *a)
{
    return sum_to(S, g, a->ndim, a->shape);
}

/* mask (bool) as 0/1 in dtype. */
static tide_tensor *as_float(scope *S, tide_tensor *mask, tide_dtype dtype)
{
    return mask ? K(tide_cast(mask, dtype)) : NULL;
}

/* t padded along dim d by (before, after); negative values crop. */
static tide_tensor *pad_dim(scope *S, tide_tensor *t, int d, int64_t before, int64_t after)
{
    if (!t)
        return NULL;
    int64_t pads[2 * TIDE_MAX_DIMS] = {0};
    int npairs = t->ndim - d; /* F.pad order: the last dim's pair first */
    pads[2 * (npairs - 1)] = before;
    pads[2 * (npairs - 1) + 1] = after;
    return K(tide_pad(t, pads, 2 * npairs, 0));
}

/* ---- which inputs each formula reads -------------------------------------------------------- */

unsigned ag_saved_inputs(tide_op op, unsigned needed)
{
    /* Bilinear ops: each input's gradient reads only the other input. */
    unsigned cross = ((needed & 1u) ? 2u : 0u) | ((needed & 2u) ? 1u : 0u);
    switch (op) {
    case TIDE_OP_MUL: case TIDE_OP_MATMUL: case TIDE_OP_CONV2D: case TIDE_OP_LINEAR_HALF:
    case TIDE_OP_CONV2D_GRAD_INPUT: case TIDE_OP_CONV2D_GRAD_WEIGHT:
        return cross;
    case TIDE_OP_DIV: /* a / b: both gradients read b; b's reads a */
        return 2u | ((needed & 2u) ? 1u : 0u);
    case TIDE_OP_ABS: case TIDE_OP_EXP: case TIDE_OP_LOG: case TIDE_OP_SQRT: case TIDE_OP_RSQRT:
    case TIDE_OP_SIN: case TIDE_OP_COS: case TIDE_OP_TANH: case TIDE_OP_SIGMOID:
    case TIDE_OP_RELU: case TIDE_OP_RECIPROCAL: case TIDE_OP_ERF: case TIDE_OP_GELU:
    case TIDE_OP_LOG1P: case TIDE_OP_EXPM1: case TIDE_OP_LOG2: case TIDE_OP_TAN:
    case TIDE_OP_ASIN: case TIDE_OP_ACOS: case TIDE_OP_ATAN: case TIDE_OP_SINH: case TIDE_OP_COSH:
    case TIDE_OP_PROD: case TIDE_OP_MAX: case TIDE_OP_MIN:
    case TIDE_OP_WHERE: /* the condition */
    case TIDE_OP_MAX_POOL2D:
    case TIDE_OP_CUMSUM: /* cumprod's and logcumsumexp's gradients read x (a sum's does not) */
        return 1u;
    case TIDE_OP_POW: case TIDE_OP_MAXIMUM: case TIDE_OP_MINIMUM: case TIDE_OP_ATAN2:
        return 3u;
    case TIDE_OP_REMAINDER: /* b's gradient reads a // b */
    case TIDE_OP_FMOD:      /* b's gradient reads trunc(a / b) */
        return (needed & 2u) ? 3u : 0u;
    case TIDE_OP_GATHER: case TIDE_OP_INDEX_SELECT: case TIDE_OP_SCATTER_ADD:
        return 2u; /* the index */
    case TIDE_OP_SDPA: /* q, k, v, [mask,] and the packed output with the logsumexps */
        return 0x1fu;
    case TIDE_OP_QLINEAR: /* x's gradient reads the quantized weight; q has none */
        return (needed & 1u) ? 2u : 0u;
    default:
        return 0;
    }
}

/* ---- formulas ---------------------------------------------------------------------------------- */

/* The unary primitives of issue 24 (log1p ... cosh) and gelu: g times the derivative at x. */
static int unary_grad_24(scope *S, tide_op op, tide_tensor *x, tide_tensor *g, tide_tensor **r)
{
    tide_tensor *d = NULL;
    switch (op) {
    case TIDE_OP_LOG1P: d = K(tide_reciprocal(K(tide_add_scalar(x, 1)))); break;
    case TIDE_OP_EXPM1: d = K(tide_exp(x)); break;
    case TIDE_OP_LOG2: d = K(tide_reciprocal(K(tide_mul_scalar(x, 0.69314718055994531)))); break;
    case TIDE_OP_TAN: { /* 1 + tan^2 x */
        tide_tensor *t = K(tide_tan(x));
        d = K(tide_add_scalar(K(tide_mul(t, t)), 1));
        break;
    }
    case TIDE_OP_ASIN: case TIDE_OP_ACOS: { /* +-1 / sqrt(1 - x^2) */
        d = K(tide_rsqrt(K(tide_add_scalar(K(tide_neg(K(tide_mul(x, x)))), 1))));
        if (op == TIDE_OP_ACOS)
            d = K(tide_neg(d));
        break;
    }
    case TIDE_OP_ATAN: d = K(tide_reciprocal(K(tide_add_scalar(K(tide_mul(x, x)), 1)))); break;
    case TIDE_OP_SINH: d = K(tide_cosh(x)); break;
    case TIDE_OP_COSH: d = K(tide_sinh(x)); break;
    case TIDE_OP_GELU: { /* Phi(x) + x phi(x), with Phi = gelu(x) / x (1/2 at 0): the
                          * primitive's relative accuracy, and ~5x faster than erf's SLEEF call */
        tide_tensor *zero = K(tide_eq(x, number(S, 0)));
        tide_tensor *safe = K(tide_where(zero, number(S, 1), x));
        tide_tensor *ratio = K(tide_div(K(td_gelu_exact(x)), safe));
        tide_tensor *cdf = K(tide_where(zero, number(S, 0.5), ratio));
        tide_tensor *gauss = K(tide_exp(K(tide_mul_scalar(K(tide_mul(x, x)), -0.5))));
        tide_tensor *pdf = K(tide_mul_scalar(gauss, 0.3989422804014327)); /* 1 / sqrt(2 pi) */
        d = K(tide_add(cdf, K(tide_mul(x, pdf))));
        break;
    }
    default:
        return td_error("no backward formula for %s", tide_op_name(op));
    }
    *r = K(tide_mul(g, d));
    return 0; /* a failure shows as NULL through the scope, as in unary_grad */
}

static int unary_grad(scope *S, const ag_node *n, tide_tensor *g, tide_tensor **gi)
{
    const ag_input *a = &n->in[0];
    tide_tensor *x = a->saved, *r = NULL;
    switch (n->op) {
    case TIDE_OP_NEG: r = K(tide_neg(g)); break;
    case TIDE_OP_ABS: r = K(tide_mul(g, K(tide_sign(x)))); break;
    case TIDE_OP_EXP: r = K(tide_mul(g, K(tide_exp(x)))); break;
    case TIDE_OP_LOG: r = K(tide_div(g, x)); break;
    case TIDE_OP_SQRT: r = K(tide_div(g, K(tide_mul_scalar(K(tide_sqrt(x)), 2)))); break;
    case TIDE_OP_RSQRT: /* -x^(-3/2) / 2 = -rsqrt(x) / (2x) */
        r = K(tide_mul(g, K(tide_mul_scalar(K(tide_div(K(tide_rsqrt(x)), x)), -0.5))));
        break;
    case TIDE_OP_SIN: r = K(tide_mul(g, K(tide_cos(x)))); break;
    case TIDE_OP_COS: r = K(tide_mul(g, K(tide_neg(K(tide_sin(x)))))); break;
    case TIDE_OP_TANH: {
        tide_tensor *t = K(tide_tanh(x));
        r = K(tide_mul(g, K(tide_add_scalar(K(tide_neg(K(tide_mul(t, t)))), 1))));
        break;
    }
    case TIDE_OP_ERF: /* d/dx erf x = 2/sqrt(pi) exp(-x^2) */
        r = K(tide_mul(g, K(tide_mul_scalar(K(tide_exp(K(tide_neg(K(tide_mul(x, x)))))),
                                            1.1283791670955126))));
        break;
    case TIDE_OP_SIGMOID: {
        tide_tensor *s = K(tide_sigmoid(x));
        r = K(tide_mul(g, K(tide_mul(s, K(tide_add_scalar(K(tide_neg(s)), 1))))));
        break;
    }
    case TIDE_OP_RELU:
        r = K(tide_where(K(tide_gt(x, number(S, 0))), g, number(S, 0)));
        break;
    case TIDE_OP_RECIPROCAL: {
        tide_tensor *rc = K(tide_reciprocal(x));
        r = K(tide_neg(K(tide_mul(g, K(tide_mul(rc, rc))))));
        break;
    }
    case TIDE_OP_FLOOR: case TIDE_OP_CEIL: case TIDE_OP_ROUND: case TIDE_OP_SIGN:
    case TIDE_OP_TRUNC:
        r = zeros_like_input(S, a, g); /* piecewise constant */
        break;
    default:
        if (unary_grad_24(S, n->op, x, g, &r) < 0)
            return -1;
        break;
    }
    gi[0] = give(S, r);
    return 0;
}

static int binary_grad(scope *S, const ag_node *n, tide_tensor *g, tide_tensor **gi)
{
    const ag_input *ia = &n->in[0], *ib = &n->in[1];
    tide_tensor *a = ia->saved, *b = ib->saved, *ga = NULL, *gb = NULL;
    bool na = ag_input_needed(ia), nb = ag_input_needed(ib);
    tide_dtype dt = (tide_dtype)n->out_dtype;
    switch (n->op) {
    case TIDE_OP_ADD: ga = g; gb = g; break;
    case TIDE_OP_SUB: ga = g; gb = nb ? K(tide_neg(g)) : NULL; break;
    case TIDE_OP_MUL:
        ga = na ? K(tide_mul(g, b)) : NULL;
        gb = nb ? K(tide_mul(g, a)) : NULL;
        break;
    case TIDE_OP_DIV:
        ga = na ? K(tide_div(g, b)) : NULL;
        gb = nb ? K(tide_neg(K(tide_div(K(tide_div(K(tide_mul(g, a)), b)), b)))) : NULL;
        break;
    case TIDE_OP_POW:
        /* d/da = b a^(b-1), 0 where b == 0; d/db = a^b log a, 0 where a == 0 and b >= 0 (as
         * PyTorch, so 0^b with b >= 0 has no NaN gradient). */
        if (na) {
            tide_tensor *d = K(tide_mul(b, K(tide_pow(a, K(tide_sub_scalar(b, 1))))));
            d = K(tide_where(K(tide_eq(b, number(S, 0))), number(S, 0), d));
            ga = K(tide_mul(g, d));
        }
        if (nb) {
            tide_tensor *d = K(tide_mul(K(tide_pow(a, b)), K(tide_log(a))));
            tide_tensor *z = K(tide_logical_and(K(tide_eq(a, number(S, 0))),
                                                K(tide_ge(b, number(S, 0)))));
            d = K(tide_where(z, number(S, 0), d));
            gb = K(tide_mul(g, d));
        }
        break;
    case TIDE_OP_MAXIMUM:
    case TIDE_OP_MINIMUM: {
        /* The larger (smaller) input gets the gradient; a tie splits it in halves. */
        bool mx = n->op == TIDE_OP_MAXIMUM;
        tide_tensor *half = K(tide_mul_scalar(as_float(S, K(tide_eq(a, b)), dt), 0.5));
        if (na) {
            tide_tensor *w = as_float(S, K(mx ? tide_gt(a, b) : tide_lt(a, b)), dt);
            ga = K(tide_mul(g, K(tide_add(w, half))));
        }
        if (nb) {
            tide_tensor *w = as_float(S, K(mx ? tide_lt(a, b) : tide_gt(a, b)), dt);
            gb = K(tide_mul(g, K(tide_add(w, half))));
        }
        break;
    }
    case TIDE_OP_FLOOR_DIVIDE: /* piecewise constant, as PyTorch */
        ga = na ? zeros_like_input(S, ia, g) : NULL;
        gb = nb ? zeros_like_input(S, ib, g) : NULL;
        break;
    case TIDE_OP_REMAINDER: /* a - floor(a / b) * b: d/da = 1, d/db = -(a // b) */
        ga = g;
        gb = nb ? K(tide_neg(K(tide_mul(g, K(tide_floor_divide(a, b)))))) : NULL;
        break;
    case TIDE_OP_FMOD: /* a - trunc(a / b) * b: d/da = 1, d/db = -trunc(a / b), as PyTorch */
        ga = g;
        gb = nb ? K(tide_neg(K(tide_mul(g, K(tide_trunc(K(tide_div(a, b)))))))) : NULL;
        break;
    case TIDE_OP_ATAN2: { /* d/da = b / (a^2 + b^2), d/db = -a / (a^2 + b^2) */
        tide_tensor *r2 = K(tide_add(K(tide_mul(a, a)), K(tide_mul(b, b))));
        ga = na ? K(tide_div(K(tide_mul(g, b)), r2)) : NULL;
        gb = nb ? K(tide_neg(K(tide_div(K(tide_mul(g, a)), r2)))) : NULL;
        break;
    }
    default:
        return td_error("no backward formula for %s", tide_op_name(n->op));
    }
    if (na)
        gi[0] = give(S, sum_to_input(S, ga, ia));
    if (nb)
        gi[1] = give(S, sum_to_input(S, gb, ib));
    return 0;
}

static void reduced_dims(const ag_node *n, int *dims, int *nd)
{
    *nd = n->attrs.nints;
    for (int i = 0; i < *nd; i++)
        dims[i] = (int)n->attrs.ints[i];
}

/* The reductions' outputs keep the reduced dims as size 1 (ops/reduce.c drops them with a
 * view afterwards), so g broadcasts against the input directly. */
static int reduce_grad(scope *S, const ag_node *n, tide_tensor *g, tide_tensor **gi)
{
    const ag_input *a = &n->in[0];
    tide_tensor *x = a->saved, *r = NULL;
    tide_dtype dt = (tide_dtype)a->dtype;
    int dims[TIDE_MAX_DIMS], nd;
    reduced_dims(n, dims, &nd);
    switch (n->op) {
    case TIDE_OP_SUM: r = K(tide_expand(g, a->ndim, a->shape)); break;
    case TIDE_OP_PROD: {
        /* The product of the others: y/x where no element is 0; where exactly one is, that
         * element gets the product of the non-zero ones; with two or more zeros, all get 0. */
        tide_tensor *is0 = K(tide_eq(x, number(S, 0)));
        tide_tensor *safe = K(tide_where(is0, number(S, 1), x));
        tide_tensor *pnz = K(tide_prod(safe, dims, nd, true));
        tide_tensor *zeros = K(tide_sum(as_float(S, is0, dt), dims, nd, true));
        tide_tensor *none0 = K(tide_eq(zeros, number(S, 0)));
        tide_tensor *one0 = K(tide_eq(zeros, number(S, 1)));
        tide_tensor *others = K(tide_where(none0, K(tide_div(pnz, safe)),
                                           K(tide_where(K(tide_logical_and(one0, is0)), pnz,
                                                        number(S, 0)))));
        r = K(tide_mul(g, others));
        break;
    }
    case TIDE_OP_MAX:
    case TIDE_OP_MIN: {
        /* To the positions holding the extreme value, split evenly among ties (as amax). */
        tide_tensor *y = K(n->op == TIDE_OP_MAX ? tide_max(x, dims, nd, true)
                                                : tide_min(x, dims, nd, true));
        tide_tensor *mask = as_float(S, K(tide_eq(x, y)), dt);
        tide_tensor *count = K(tide_sum(mask, dims, nd, true));
        r = K(tide_mul(mask, K(tide_div(g, count))));
        break;
    }
    default:
        return td_error("no backward formula for %s", tide_op_name(n->op));
    }
    gi[0] = give(S, r);
    return 0;
}

static int view_grad(scope *S, const ag_node *n, tide_tensor *g, tide_tensor **gi)
{
    const ag_input *a = &n->in[0];
    const int64_t *v = n->attrs.ints;
    tide_tensor *r = NULL;
    switch (n->op) {
    case TIDE_OP_RESHAPE: r = K(tide_reshape(g, a->ndim, a->shape)); break;
    case TIDE_OP_PERMUTE: {
        int inv[TIDE_MAX_DIMS];
        for (int i = 0; i < a->ndim; i++)
            inv[v[i]] = i;
        r = K(tide_permute(g, inv));
        break;
    }
    case TIDE_OP_EXPAND: r = sum_to_input(S, g, a); break;
    case TIDE_OP_SLICE: {
        int d = (int)v[0];
        int64_t start = v[1], step = v[3], size = a->shape[d], len = g->shape[d];
        if (len == 0) {
            r = zeros_like_input(S, a, g);
            break;
        }
        tide_tensor *t = g;
        if (step > 1) {
            /* [.., len, ..] -> [.., len, step, ..] with zeros after each element -> [.., len*step, ..] */
            int64_t shape[TIDE_MAX_DIMS];
            memcpy(shape, g->shape, sizeof(int64_t) * g->ndim);
            shape[d] = len * step;
            t = pad_dim(S, K(tide_unsqueeze(g, d + 1)), d + 1, 0, step - 1);
            t = t ? K(tide_reshape(t, g->ndim, shape)) : NULL;
            if (t && len * step > size - start)
                t = K(tide_slice(t, d, 0, size - start, 1));
        }
        r = t ? pad_dim(S, t, d, start, size - start - t->shape[d]) : NULL;
        break;
    }
    case TIDE_OP_SELECT: {
        int d = (int)v[0];
        int64_t index = v[1];
        r = pad_dim(S, K(tide_unsqueeze(g, d)), d, index, a->shape[d] - 1 - index);
        break;
    }
    case TIDE_OP_DIAGONAL:
        r = K(td_diagonal_grad(g, a->ndim, a->shape, v[0], (int)v[1], (int)v[2]));
        break;
    case TIDE_OP_UNFOLD:
        r = K(td_unfold_grad(g, a->ndim, a->shape, (int)v[0], v[1], v[2]));
        break;
    default:
        return td_error("no backward formula for %s", tide_op_name(n->op));
    }
    gi[0] = give(S, r);
    return 0;
}

static int movement_grad(scope *S, const ag_node *n, tide_tensor *g, tide_tensor **gi)
{
    const int64_t *v = n->attrs.ints;
    switch (n->op) {
    case TIDE_OP_CAST:
        gi[0] = give(S, K(tide_cast(g, (tide_dtype)n->in[0].dtype)));
        return 0;
    case TIDE_OP_TO:
        gi[0] = give(S, to_input_device(S, g, &n->in[0]));
        return 0;
    case TIDE_OP_COPY: { /* copy_ broadcast the source to the destination and converted it */
        tide_tensor *r = sum_to_input(S, g, &n->in[0]);
        gi[0] = give(S, r ? K(tide_cast(r, (tide_dtype)n->in[0].dtype)) : NULL);
        return 0;
    }
    case TIDE_OP_CAT: {
        int d = (int)v[0];
        int64_t off = 0;
        for (int i = 0; i < n->nin; i++) {
            const ag_input *a = &n->in[i];
            /* 1-D empty inputs are skipped by cat whatever the other shapes */
            if (a->ndim == 1 && a->shape[0] == 0) {
                if (ag_input_needed(a))
                    gi[i] = give(S, zeros_like_input(S, a, g));
                continue;
            }
            if (ag_input_needed(a)) {
                tide_tensor *part = K(tide_slice(g, d, off, off + a->shape[d], 1));
                gi[i] = give(S, part ? K(tide_cast(part, (tide_dtype)a->dtype)) : NULL);
            }
            off += a->shape[d];
        }
        return 0;
    }
    case TIDE_OP_PAD: {
        /* The adjoint of padding by (before, after) is padding by (-before, -after). */
        int nd = n->in[0].ndim;
        int64_t pads[2 * TIDE_MAX_DIMS];
        for (int d = 0; d < nd; d++) {
            int i = nd - 1 - d;
            pads[2 * i] = -v[2 * d];
            pads[2 * i + 1] = -v[2 * d + 1];
        }
        gi[0] = give(S, K(tide_pad(g, pads, 2 * nd, 0)));
        return 0;
    }
    case TIDE_OP_FLIP: {
        int dims[TIDE_MAX_DIMS];
        for (int i = 0; i < n->attrs.nints; i++)
            dims[i] = (int)v[i];
        gi[0] = give(S, n->attrs.nints ? K(tide_flip(g, dims, n->attrs.nints)) : g);
        return 0;
    }
    case TIDE_OP_WHERE: {
        tide_tensor *cond = n->in[0].saved, *zero = number(S, 0);
        if (ag_input_needed(&n->in[1]))
            gi[1] = give(S, sum_to_input(S, K(tide_where(cond, g, zero)), &n->in[1]));
        if (ag_input_needed(&n->in[2]))
            gi[2] = give(S, sum_to_input(S, K(tide_where(cond, zero, g)), &n->in[2]));
        return 0;
    }
    default:
        return td_error("no backward formula for %s", tide_op_name(n->op));
    }
}

static int index_grad(scope *S, const ag_node *n, tide_tensor *g, tide_tensor **gi)
{
    int d = (int)n->attrs.ints[0];
    const ag_input *ax = &n->in[0];
    tide_tensor *index = n->in[1].saved;
    switch (n->op) {
    case TIDE_OP_GATHER:
        gi[0] = give(S, K(tide_scatter_add(zeros_like_input(S, ax, g), d, index, g)));
        return 0;
    case TIDE_OP_SCATTER_ADD: {
        const ag_input *as = &n->in[2];
        if (ag_input_needed(ax))
            gi[0] = give(S, g);
        if (ag_input_needed(as)) {
            /* src elements outside the index's extent are not added anywhere: gradient 0 */
            tide_tensor *t = K(tide_gather(g, d, index));
            for (int k = 0; t && k < as->ndim; k++)
                if (t->shape[k] != as->shape[k])
                    t = pad_dim(S, t, k, 0, as->shape[k] - t->shape[k]);
            gi[2] = give(S, t);
        }
        return 0;
    }
    case TIDE_OP_INDEX_SELECT: {
        /* index_add: scatter the rows of g back along d with the index broadcast over g */
        int64_t len = td_numel(index->ndim, index->shape), shape[TIDE_MAX_DIMS];
        for (int k = 0; k < g->ndim; k++)
            shape[k] = k == d ? len : 1;
        tide_tensor *idx = K(tide_reshape(index, g->ndim, shape));
        idx = idx ? K(tide_expand(idx, g->ndim, g->shape)) : NULL;
        gi[0] = give(S, K(tide_scatter_add(zeros_like_input(S, ax, g), d, idx, g)));
        return 0;
    }
    default:
        return td_error("no backward formula for %s", tide_op_name(n->op));
    }
}

bool ag_stored_transposed(const tide_tensor *t)
{
    int d = t->ndim;
    return d >= 2 && t->shape[d - 1] > 1 && t->shape[d - 2] > 1 && t->strides[d - 2] == 1 &&
           t->strides[d - 1] == t->shape[d - 2];
}

/* Attention (ops/attention.c): SDPA_GRAD recomputes the scores block by block from q, k and the
 * logsumexps kept in the packed forward (the node's last input) and gives dq, dk, dv in one
 * flat tensor; each is a view of it. The broadcast batch dims were expands, summed by theirs.
 * The output's gradient goes as it is when its rows have element stride 1 (a model's heads
 * split from [B, T, H * D] and transposed: no copy). */
static int sdpa_grad(scope *S, const ag_node *n, tide_tensor *g, tide_tensor **gi)
{
    tide_tensor *in[6];
    for (int i = 0; i < n->nin; i++)
        in[i] = n->in[i].saved;
    bool rows_ok = g->ndim >= 2 && (g->shape[g->ndim - 1] <= 1 || g->strides[g->ndim - 1] == 1);
    in[n->nin] = rows_ok ? g : K(tide_contiguous(g));
    bool heads_last = n->attrs.nints > 2 && n->attrs.ints[2];
    const ag_input *q = &n->in[0], *k = &n->in[1], *v = &n->in[2];
    int64_t sizes[3] = {td_numel(q->ndim, q->shape), td_numel(k->ndim, k->shape),
                        td_numel(v->ndim, v->shape)};
    td_meta meta = {1, {sizes[0] + sizes[1] + sizes[2]}, (tide_dtype)q->dtype, in[0]->device};
    tide_tensor *flat = in[n->nin] ? K(td_dispatch(TIDE_OP_SDPA_GRAD, &meta, in, n->nin + 1,
                                                   &n->attrs))
                                   : NULL;
    int64_t start = 0;
    for (int i = 0; i < 3; i++) {
        const ag_input *a = &n->in[i];
        tide_tensor *part = flat && ag_input_needed(a)
                                ? K(tide_slice(flat, 0, start, start + sizes[i], 1))
                                : NULL;
        tide_tensor *grad = part ? K(td_sdpa_unpack(part, a->ndim, a->shape, heads_last)) : NULL;
        if (grad)
            gi[i] = give(S, grad);
        start += sizes[i];
    }
    return 0;
}

/* t's sums over j >= i along d: a reversed cumsum. */
static tide_tensor *reverse_cumsum(scope *S, tide_tensor *t, int d)
{
    tide_tensor *f = t ? K(tide_flip(t, &d, 1)) : NULL;
    tide_tensor *c = f ? K(tide_cumsum(f, d)) : NULL;
    return c ? K(tide_flip(c, &d, 1)) : NULL;
}

/* cumprod's gradient dx_i = sum_{j >= i} g_j prod_{k <= j, k != i} x_k, exact with zeros and
 * O(n) (PyTorch's case split, written with ops): with z the first zero of the line,
 *  - i < z: sum_{j >= i} g_j out_j / x_i (x_i is not zero; out_j = 0 from z on);
 *  - i = z: sum_{j >= z} g_j out'_j, out' the cumprod with x_z set to 1;
 *  - i > z: 0 (every product keeps the factor x_z = 0). */
static tide_tensor *cumprod_grad(scope *S, tide_tensor *x, tide_tensor *g, int d)
{
    tide_tensor *zero = K(tide_scalar(0, (tide_dtype)x->dtype));
    tide_tensor *one = K(tide_scalar(1, (tide_dtype)x->dtype));
    tide_tensor *is_zero = K(tide_eq(x, zero));
    tide_tensor *zeros_so_far = K(tide_cumsum(is_zero, d));
    tide_tensor *before = K(tide_eq(zeros_so_far, K(tide_integer(0))));
    tide_tensor *first = K(tide_logical_and(is_zero, K(tide_eq(zeros_so_far, K(tide_integer(1))))));
    tide_tensor *out = K(tide_cumprod(x, d));
    tide_tensor *sums = reverse_cumsum(S, K(tide_mul(g, out)), d);
    tide_tensor *g_before = K(tide_div(sums, K(tide_where(before, x, one))));
    tide_tensor *out1 = K(tide_cumprod(K(tide_where(first, one, x)), d));
    tide_tensor *from_z = K(tide_where(before, zero, K(tide_mul(g, out1))));
    tide_tensor *g_first = reverse_cumsum(S, from_z, d);
    return K(tide_where(before, g_before, K(tide_where(first, g_first, zero))));
}

/* t's log(sum(exp)) over j >= i along d. */
static tide_tensor *reverse_logcumsumexp(scope *S, tide_tensor *t, int d)
{
    tide_tensor *f = t ? K(tide_flip(t, &d, 1)) : NULL;
    tide_tensor *c = f ? K(tide_logcumsumexp(f, d)) : NULL;
    return c ? K(tide_flip(c, &d, 1)) : NULL;
}

/* logcumsumexp's gradient dx_i = sum_{j >= i} g_j exp(x_i - out_j), in log space so nothing
 * overflows: exp(x + reversed logcumsumexp(log|g| - out)) over the positive g, minus the same
 * over the negative g, as PyTorch. The other sign's places get the lowest finite number, not
 * -inf, so differentiating this again meets no inf - inf. */
static tide_tensor *logcumsumexp_grad(scope *S, tide_tensor *x, tide_tensor *g, int d)
{
    tide_dtype dt = (tide_dtype)x->dtype;
    tide_tensor *out = K(tide_logcumsumexp(x, d));
    tide_tensor *zero = K(tide_scalar(0, dt));
    tide_tensor *lowest = K(tide_scalar(dt == TIDE_FLOAT32 ? -FLT_MAX : -DBL_MAX, dt));
    tide_tensor *log_abs = K(tide_log(K(tide_abs(g))));
    tide_tensor *parts[2];
    for (int k = 0; k < 2; k++) {
        tide_tensor *sign = K(k == 0 ? tide_gt(g, zero) : tide_lt(g, zero));
        tide_tensor *lg = K(tide_sub(K(tide_where(sign, log_abs, lowest)), out));
        parts[k] = K(tide_exp(K(tide_add(reverse_logcumsumexp(S, lg, d), x))));
    }
    return K(tide_sub(parts[0], parts[1]));
}

static int library_grad(scope *S, const ag_node *n, tide_tensor *g, tide_tensor **gi)
{
    const ag_input *i0 = &n->in[0], *i1 = n->nin > 1 ? &n->in[1] : NULL;
    tide_tensor *x0 = i0->saved, *x1 = i1 ? i1->saved : NULL;
    const int64_t *v = n->attrs.ints;
    bool n0 = ag_input_needed(i0), n1 = i1 && ag_input_needed(i1);
    int stride[2] = {(int)v[0], (int)v[1]}, pad[2] = {(int)v[2], (int)v[3]},
        dil[2] = {(int)v[4], (int)v[5]}, groups = (int)v[6];
    switch (n->op) {
    case TIDE_OP_MATMUL: /* [.., M, K] @ [.., K, N]: batch dims already equal */
        /* An operand stored transposed (linear's weight^T) gets its gradient computed
         * transposed too, so the view's own backward hands back a contiguous tensor. */
        if (n0)
            gi[0] = give(S, i0->transposed
                                ? K(tide_transpose(K(tide_matmul(x1, K(tide_transpose(g, -1, -2)))),
                                                   -1, -2))
                                : K(tide_matmul(g, K(tide_transpose(x1, -1, -2)))));
        if (n1)
            gi[1] = give(S, i1->transposed
                                ? K(tide_transpose(K(tide_matmul(K(tide_transpose(g, -1, -2)), x0)),
                                                   -1, -2))
                                : K(tide_matmul(K(tide_transpose(x0, -1, -2)), g)));
        return 0;
    case TIDE_OP_LINEAR_HALF: /* x [M, K] float32 @ widen(w [N, K])^T */
        if (n0) /* g @ w, the weight widened (backward of half weights is rare: a plain cast) */
            gi[0] = give(S, K(tide_matmul(g, K(tide_cast(x1, TIDE_FLOAT32)))));
        if (n1) /* g^T @ x in float32, rounded once to the weight's dtype */
            gi[1] = give(S, K(tide_cast(K(tide_matmul(K(tide_transpose(g, 0, 1)), x0)),
                                        (tide_dtype)i1->dtype)));
        return 0;
    case TIDE_OP_CONV2D: { /* (x, w) */
        if (n0) {
            int64_t hw[2] = {i0->shape[2], i0->shape[3]};
            gi[0] = give(S, K(tide_conv2d_grad_input(g, x1, hw, stride, pad, dil, groups)));
        }
        if (n1) {
            int64_t khw[2] = {i1->shape[2], i1->shape[3]};
            gi[1] = give(S, K(tide_conv2d_grad_weight(x0, g, khw, stride, pad, dil, groups)));
        }
        return 0;
    }
    case TIDE_OP_CONV2D_GRAD_INPUT: { /* (grad_out, w) -> input-shaped; linear in each */
        if (n0)
            gi[0] = give(S, K(tide_conv2d(g, x1, NULL, stride, pad, dil, groups)));
        if (n1) {
            int64_t khw[2] = {i1->shape[2], i1->shape[3]};
            gi[1] = give(S, K(tide_conv2d_grad_weight(g, x0, khw, stride, pad, dil, groups)));
        }
        return 0;
    }
    case TIDE_OP_CONV2D_GRAD_WEIGHT: { /* (x, grad_out) -> weight-shaped */
        if (n0) {
            int64_t hw[2] = {i0->shape[2], i0->shape[3]};
            gi[0] = give(S, K(tide_conv2d_grad_input(x1, g, hw, stride, pad, dil, groups)));
        }
        if (n1)
            gi[1] = give(S, K(tide_conv2d(x0, g, NULL, stride, pad, dil, groups)));
        return 0;
    }
    case TIDE_OP_MAX_POOL2D: {
        /* The positions of the maxima (the same primitive max_pool2d's indices come from),
         * then each gradient added at its position of the H*W plane. */
        td_meta meta = {4, {n->out_shape[0], n->out_shape[1], n->out_shape[2], n->out_shape[3]},
                         TIDE_INT64, x0->device};
        tide_tensor *in = x0;
        tide_tensor *idx = K(td_dispatch(TIDE_OP_MAX_POOL2D_INDICES, &meta, &in, 1, &n->attrs));
        int64_t flat_out[3] = {meta.shape[0], meta.shape[1], meta.shape[2] * meta.shape[3]};
        int64_t flat_in[3] = {i0->shape[0], i0->shape[1], i0->shape[2] * i0->shape[3]};
        tide_tensor *gf = K(tide_reshape(g, 3, flat_out));
        tide_tensor *xf = idx ? K(tide_reshape(idx, 3, flat_out)) : NULL;
        tide_tensor *z = zeros_on(S, 3, flat_in, (tide_dtype)i0->dtype, g);
        tide_tensor *s = K(tide_scatter_add(z, 2, xf, gf));
        gi[0] = give(S, s ? K(tide_reshape(s, 4, i0->shape)) : NULL);
        return 0;
    }
    case TIDE_OP_AVG_POOL2D:
    case TIDE_OP_AVG_POOL2D_GRAD: {
        int kernel[2] = {(int)v[0], (int)v[1]}, st[2] = {(int)v[2], (int)v[3]},
            pd[2] = {(int)v[4], (int)v[5]};
        bool cip = v[6] != 0;
        if (n->op == TIDE_OP_AVG_POOL2D) {
            int64_t hw[2] = {i0->shape[2], i0->shape[3]};
            gi[0] = give(S, K(tide_avg_pool2d_grad(g, hw, kernel, st, pd, cip)));
        } else { /* the adjoint of the gradient is the pool itself */
            gi[0] = give(S, K(tide_avg_pool2d(g, kernel, st, pd, cip)));
        }
        return 0;
    }
    case TIDE_OP_CUMSUM: {
        /* d out[j] / d x[i] = 1 for j >= i: the gradient is the reversed cumsum of g. */
        if (i0->ndim == 0) {
            gi[0] = give(S, g);
            return 0;
        }
        int dim = (int)v[0];
        if (n->attrs.nints > 1 && v[1] == TIDE_SCAN_PROD) {
            gi[0] = give(S, cumprod_grad(S, x0, g, dim));
            return 0;
        }
        if (n->attrs.nints > 1 && v[1] == TIDE_SCAN_LOGSUMEXP) {
            gi[0] = give(S, logcumsumexp_grad(S, x0, g, dim));
            return 0;
        }
        gi[0] = give(S, reverse_cumsum(S, g, dim));
        return 0;
    }
    case TIDE_OP_SDPA:
        return sdpa_grad(S, n, g, gi);
    case TIDE_OP_SDPA_GRAD: /* reached only through create_graph: refused, never approximated */
        return td_error("double backward of scaled_dot_product_attention is not supported "
                        "(its gradient, sdpa_grad, has no formula); differentiate attention "
                        "once, or write it with matmul and softmax for higher orders");
    case TIDE_OP_QLINEAR: /* x [M, K] @ dequantize(q)^T: dx = g @ dequantize(q) */
        if (n0)
            gi[0] = give(S, K(tide_matmul(g, K(tide_dequantize(x1, (tide_qformat)v[0],
                                                                i0->shape[1])))));
        return 0;
    default:
        /* a gradient primitive (x_grad...) is reached only by differentiating a gradient */
        if (strstr(tide_op_name(n->op), "_grad"))
            return td_error("double backward of %s is not supported (its gradient primitive "
                            "%s has no formula)",
                            n->name ? n->name : tide_op_name(n->op), tide_op_name(n->op));
        return td_error("no backward formula for %s", tide_op_name(n->op));
    }
}

int ag_backward_formula(const ag_node *n, tide_tensor *g, tide_tensor **gi)
{
    scope S_ = {0}, *S = &S_;
    int rc;
    tide_op op = n->op;
    if (tide_op_is_unary(op))
        rc = unary_grad(S, n, g, gi);
    else if (tide_op_is_binary(op))
        rc = binary_grad(S, n, g, gi);
    else if (op == TIDE_OP_SUM || op == TIDE_OP_PROD || op == TIDE_OP_MAX || op == TIDE_OP_MIN)
        rc = reduce_grad(S, n, g, gi);
    else if (op == TIDE_OP_RESHAPE || op == TIDE_OP_PERMUTE || op == TIDE_OP_EXPAND ||
             op == TIDE_OP_SLICE || op == TIDE_OP_SELECT || op == TIDE_OP_DIAGONAL ||
             op == TIDE_OP_UNFOLD)
        rc = view_grad(S, n, g, gi);
    else if (op == TIDE_OP_CAST || op == TIDE_OP_COPY || op == TIDE_OP_CAT || op == TIDE_OP_PAD || op == TIDE_OP_FLIP ||
             op == TIDE_OP_WHERE || op == TIDE_OP_TO)
        rc = movement_grad(S, n, g, gi);
    else if (op == TIDE_OP_GATHER || op == TIDE_OP_SCATTER_ADD || op == TIDE_OP_INDEX_SELECT)
        rc = index_grad(S, n, g, gi);
    else
        rc = library_grad(S, n, g, gi);
    if (rc == 0 && S->failed) {
        rc = td_error("backward of %s: %s", tide_op_name(op), S->first_error);
    } else if (rc < 0) {
        char msg[512];
        snprintf(msg, sizeof msg, "%s", tide_last_error());
        td_error("backward: %s", msg);
    }
    if (rc < 0)
        for (int i = 0; i < n->nin; i++) {
            tide_release(gi[i]);
            gi[i] = NULL;
        }
    end_scope(S);
    return rc;
}
