/*
 * collective.c — the collective ops between processes (all_reduce, broadcast, all_gather,
 * reduce_scatter): their checks and results for the dispatcher, and their kernel, which the
 * dispatcher runs itself (td_run_primitive) because it belongs to no device: it stages the
 * operand into a contiguous host buffer of a dtype MPI reduces (float32 for the half types, in
 * which a sum is rounded once at the end), hands it to distributed/, and writes the result back
 * into the output on its device. A CPU tensor that is already contiguous goes to MPI as it is.
 * The non-blocking forms (collective_async.c) share the staging.
 */
#include <string.h>

#include "../distributed/dist.h"
#include "collective.h"

static bool is_float(tide_dtype d)
{
    return d == TIDE_FLOAT32 || d == TIDE_FLOAT64 || td_dtype_is_half(d);
}

static bool reduces(tide_op op) { return op == TIDE_OP_ALL_REDUCE || op == TIDE_OP_REDUCE_SCATTER; }

/* Half types are reduced in float32; what only moves keeps its bits. */
static tide_dtype wire_dtype(tide_op op, tide_dtype d)
{
    return reduces(op) && td_dtype_is_half(d) ? TIDE_FLOAT32 : d;
}

/* The wire reduction: bool's sum and max are "or", its min and prod "and". */
static int wire_red(tide_dtype d, int op)
{
    static const int red[] = {[TIDE_REDUCE_SUM] = TD_RED_SUM, [TIDE_REDUCE_MEAN] = TD_RED_SUM,
                              [TIDE_REDUCE_MAX] = TD_RED_MAX, [TIDE_REDUCE_MIN] = TD_RED_MIN,
                              [TIDE_REDUCE_PROD] = TD_RED_PROD};
    if (d == TIDE_BOOL)
        return op == TIDE_REDUCE_MIN || op == TIDE_REDUCE_PROD ? TD_RED_LAND : TD_RED_LOR;
    return red[op];
}

static bool host_dense(const tide_tensor *t, tide_dtype wire)
{
    return t->device->host_buffers && t->dtype == wire && td_is_contiguous(t);
}

/* t's elements as a contiguous host tensor of dtype wire (t itself when it is one). */
static tide_tensor *stage_in(const char *op, const tide_tensor *t, tide_dtype wire)
{
    if (host_dense(t, wire))
        return tide_retain((tide_tensor *)t);
    tide_device *cpu = tide_cpu_device();
    tide_tensor *host = NULL, *w = NULL;
    if (t->device->host_buffers) {
        host = tide_retain((tide_tensor *)t);
    } else if ((host = td_tensor_new(op, cpu, t->ndim, t->shape, (tide_dtype)t->dtype)) &&
               td_copy_between_devices(host, t) < 0) {
        tide_release(host);
        return NULL;
    }
    if (host && host_dense(host, wire))
        return host;
    tide_tensor *in[1] = {host};
    if (host && (w = td_tensor_new(op, cpu, t->ndim, t->shape, wire)) &&
        td_run_eager_into(TIDE_OP_COPY, w, in, 1, NULL) < 0) {
        tide_release(w);
        w = NULL;
    }
    tide_release(host);
    return w;
}

/* src (contiguous, host) into out, any layout, dtype or device (COPY converts the dtype). */
static int write_back(const char *op, tide_tensor *out, tide_tensor *src)
{
    tide_tensor *from = tide_retain(src);
    if (!out->device->host_buffers) {
        tide_tensor *dev_copy = td_tensor_new(op, out->device, src->ndim, src->shape,
                                              (tide_dtype)src->dtype);
        tide_release(from);
        if (!dev_copy || td_copy_between_devices(dev_copy, src) < 0) {
            tide_release(dev_copy);
            return -1;
        }
        from = dev_copy;
    }
    tide_tensor *in[1] = {from};
    int rc = td_run_eager_into(TIDE_OP_COPY, out, in, 1, NULL);
    tide_release(from);
    return rc;
}

static bool same_place(const tide_tensor *a, const tide_tensor *b)
{
    return a == b || (a->storage == b->storage && a->offset == b->offset && a->ndim == b->ndim &&
                      !memcmp(a->shape, b->shape, sizeof(int64_t) * (size_t)a->ndim) &&
                      !memcmp(a->strides, b->strides, sizeof(int64_t) * (size_t)a->ndim));
}

int td_coll_prepare(td_coll_job *j, tide_op op, tide_tensor *out, tide_tensor *x,
                    const tide_attrs *a)
{
    const char *name = tide_op_name(op);
    tide_dtype wire = wire_dtype(op, (tide_dtype)x->dtype);
    memset(j, 0, sizeof *j);
    j->op = op;
    j->out = tide_retain(out);
    j->mean = reduces(op) && a->ints[0] == TIDE_REDUCE_MEAN;
    if (!(j->wire_in = stage_in(name, x, wire)))
        return -1;
    if (same_place(out, x))
        j->wire_out = tide_retain(j->wire_in); /* in place: MPI writes over its input */
    else if (host_dense(out, wire))
        j->wire_out = tide_retain(out);
    else if (!(j->wire_out = td_tensor_new(name, tide_cpu_device(), out->ndim, out->shape, wire)))
        return -1;
    static const td_coll_kind kinds[] = {TD_COLL_ALL_REDUCE, TD_COLL_BROADCAST,
                                         TD_COLL_ALL_GATHER, TD_COLL_REDUCE_SCATTER};
    td_coll *c = &j->c;
    c->kind = kinds[op - TIDE_OP_ALL_REDUCE];
    c->red_or_root = op == TIDE_OP_BROADCAST ? (int)a->ints[0]
                     : reduces(op)            ? wire_red(wire, (int)a->ints[0])
                                              : 0;
    c->dtype = wire;
    c->user_dtype = (tide_dtype)x->dtype;
    c->ndim = x->ndim;
    memcpy(c->shape, x->shape, sizeof(int64_t) * (size_t)x->ndim);
    c->send = td_tensor_data(j->wire_in);
    c->recv = td_tensor_data(j->wire_out);
    c->count = (size_t)td_numel(op == TIDE_OP_REDUCE_SCATTER ? out->ndim : x->ndim,
                                op == TIDE_OP_REDUCE_SCATTER ? out->shape : x->shape);
    c->op = name;
    return 0;
}

/* MEAN is the sum over the ranks divided by their number, in the wire dtype. A power-of-two
 * world multiplies by its exact reciprocal (the same bits as the division); four lanes at a time
 * (SSE2, which every x86-64 has): a scalar divide here cost as much as the all_reduce itself. */
typedef float v4f __attribute__((vector_size(16)));
static void divide_floats(float *p, int64_t n, int world)
{
    float w = (float)world, inv = 1.0f / w;
    bool pow2 = (world & (world - 1)) == 0;
    v4f wv = {w, w, w, w}, iv = {inv, inv, inv, inv};
    int64_t i = 0;
    for (; i + 4 <= n; i += 4) {
        v4f x;
        memcpy(&x, p + i, sizeof x);
        x = pow2 ? x * iv : x / wv;
        memcpy(p + i, &x, sizeof x);
    }
    for (; i < n; i++)
        p[i] = pow2 ? p[i] * inv : p[i] / w;
}

static void divide_by_world(tide_tensor *t)
{
    int64_t n = td_numel(t->ndim, t->shape);
    int world = td_dist_world();
    if (t->dtype == TIDE_FLOAT64) {
        double *p = td_tensor_data(t);
        for (int64_t i = 0; i < n; i++)
            p[i] /= world;
    } else {
        divide_floats(td_tensor_data(t), n, world);
    }
}

int td_coll_finish(td_coll_job *j, int rc)
{
    if (rc == 0 && j->mean)
        divide_by_world(j->wire_out);
    if (rc == 0 && j->wire_out->storage != j->out->storage)
        rc = write_back(tide_op_name(j->op), j->out, j->wire_out);
    td_coll_job_release(j);
    return rc;
}

void td_coll_job_release(td_coll_job *j)
{
    tide_release(j->out);
    tide_release(j->wire_in);
    tide_release(j->wire_out);
    j->out = j->wire_in = j->wire_out = NULL;
}

int td_collective_run(tide_op op, tide_tensor *out, tide_tensor *const *in, int nin,
                      const tide_attrs *a)
{
    (void)nin;
    td_coll_job j;
    if (td_coll_prepare(&j, op, out, in[0], a) < 0) {
        td_coll_job_release(&j);
        return -1;
    }
    return td_coll_finish(&j, td_dist_run(&j.c));
}

/* ---- checks and the public ops ------------------------------------------------------------ */

int td_coll_check(const char *op, const tide_tensor *t, int red)
{
    if (td_check_tensor(op, "tensor", t) < 0 || td_dist_require(op) < 0)
        return -1;
    if (red < TIDE_REDUCE_SUM || red > TIDE_REDUCE_PROD)
        return td_error("%s: unknown reduction %d (sum, mean, max, min or prod)", op, red);
    if (red == TIDE_REDUCE_MEAN && !is_float((tide_dtype)t->dtype))
        return td_error("%s: mean needs a floating-point tensor, got %s (use sum)", op,
                        tide_dtype_name((tide_dtype)t->dtype));
    if ((t->flags & TD_REQUIRES_GRAD) && tide_is_grad_enabled())
        return td_error("%s: the tensor requires grad, and collectives have no gradient: pass "
                        "its .grad or t:detach()", op);
    return 0;
}

int tide_all_reduce_(tide_tensor *t, tide_reduce_op op)
{
    if (td_coll_check("all_reduce", t, op) < 0)
        return -1;
    tide_attrs a = {.ints = {op}, .nints = 1};
    tide_tensor *in[1] = {t};
    return td_dispatch_inplace(TIDE_OP_ALL_REDUCE, t, in, 1, &a);
}

int td_coll_check_root(const char *op, const tide_tensor *t, int root)
{
    if (td_coll_check(op, t, TIDE_REDUCE_SUM) < 0)
        return -1;
    if (root < 0 || root >= td_dist_world())
        return td_error("%s: root %d is not a rank (0 to %d)", op, root, td_dist_world() - 1);
    return 0;
}

int tide_broadcast_(tide_tensor *t, int root)
{
    if (td_coll_check_root("broadcast", t, root) < 0)
        return -1;
    tide_attrs a = {.ints = {root}, .nints = 1};
    tide_tensor *in[1] = {t};
    return td_dispatch_inplace(TIDE_OP_BROADCAST, t, in, 1, &a);
}

int td_coll_meta(tide_op op, const tide_tensor *t, td_meta *m)
{
    int world = td_dist_world();
    m->dtype = (tide_dtype)t->dtype;
    m->device = t->device;
    m->ndim = t->ndim > 0 ? t->ndim : 1;
    memcpy(m->shape, t->shape, sizeof(int64_t) * (size_t)t->ndim);
    int64_t first = t->ndim > 0 ? t->shape[0] : 1;
    if (op == TIDE_OP_ALL_GATHER) {
        m->shape[0] = first * world;
        return 0;
    }
    if (t->ndim == 0 || first % world != 0)
        return td_error("reduce_scatter: the first dim (%lld) must split into %d equal blocks, "
                        "one per rank", (long long)(t->ndim ? first : 0), world);
    m->shape[0] = first / world;
    return 0;
}

tide_tensor *tide_all_gather(const tide_tensor *t)
{
    td_meta m;
    if (td_coll_check("all_gather", t, TIDE_REDUCE_SUM) < 0 ||
        td_coll_meta(TIDE_OP_ALL_GATHER, t, &m) < 0)
        return NULL;
    tide_attrs a = {.nints = 1};
    tide_tensor *in[1] = {(tide_tensor *)t};
    return td_dispatch(TIDE_OP_ALL_GATHER, &m, in, 1, &a);
}

tide_tensor *tide_reduce_scatter(const tide_tensor *t, tide_reduce_op op)
{
    td_meta m;
    if (td_coll_check("reduce_scatter", t, op) < 0 ||
        td_coll_meta(TIDE_OP_REDUCE_SCATTER, t, &m) < 0)
        return NULL;
    tide_attrs a = {.ints = {op}, .nints = 1};
    tide_tensor *in[1] = {(tide_tensor *)t};
    return td_dispatch(TIDE_OP_REDUCE_SCATTER, &m, in, 1, &a);
}
