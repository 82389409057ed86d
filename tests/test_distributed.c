/*
 * test_distributed.c — the collectives against values computed by hand from every rank's
 * operand: each dtype and reduction, in place on views, every root, gathers and scatters,
 * non-blocking works waited out of order, and the errors (no init, bad arguments, ranks that
 * disagree). ctest runs it alone (a world of one) and scripts/test.sh under
 * `mpirun -np 2` (tests/test_distributed.sh). Element i of rank r's operand is a small integer
 * of (r, i), so every sum, product and mean is exact in every dtype and the checks are equality.
 */
#include <stdlib.h>
#include <string.h>

#include "test_util.h"
#include "tide.h"

static int rank, world;

/* rank r's element i: small, distinct per rank, some negative for the signed dtypes */
static double value(int r, int i, tide_dtype dt)
{
    int v = (i * 3 + r * 5) % 7 + 1;
    if (dt == TIDE_BOOL)
        return (i + r) % 3 == 0;
    if (dt != TIDE_UINT8 && i % 4 == 1)
        v = -v;
    return v;
}

static tide_tensor *operand(int r, int n, tide_dtype dt)
{
    double *v = malloc(sizeof(double) * (size_t)n);
    for (int i = 0; i < n; i++)
        v[i] = value(r, i, dt);
    int64_t shape[1] = {n};
    tide_tensor *f = tide_from_data(v, 1, shape, TIDE_FLOAT64);
    tide_tensor *t = tide_cast(f, dt);
    tide_release(f);
    free(v);
    return t;
}

static double expected(int i, tide_dtype dt, tide_reduce_op op)
{
    double acc = value(0, i, dt);
    for (int r = 1; r < world; r++) {
        double v = value(r, i, dt);
        acc = op == TIDE_REDUCE_MAX ? (v > acc ? v : acc)
              : op == TIDE_REDUCE_MIN ? (v < acc ? v : acc)
              : op == TIDE_REDUCE_PROD ? acc * v
                                       : acc + v;
    }
    if (dt == TIDE_BOOL)
        return acc != 0;
    return op == TIDE_REDUCE_MEAN ? acc / world : acc;
}

static double at(const tide_tensor *t, int i)
{
    tide_tensor *f = tide_cast(t, TIDE_FLOAT64);
    tide_tensor *c = tide_contiguous(f);
    double v = ((const double *)tide_data_ptr(c))[i];
    tide_release(f);
    tide_release(c);
    return v;
}

static void check_all_reduce(tide_dtype dt, tide_reduce_op op)
{
    const int n = 37;
    tide_tensor *t = operand(rank, n, dt);
    CHECK(tide_all_reduce_(t, op) == 0, "all_reduce %s op %d: %s", tide_dtype_name(dt), op,
          tide_last_error());
    int bad = 0;
    for (int i = 0; i < n; i++)
        bad += at(t, i) != expected(i, dt, op);
    CHECK(bad == 0, "all_reduce %s op %d: %d wrong elements (element 0: %g, expected %g)",
          tide_dtype_name(dt), op, bad, at(t, 0), expected(0, dt, op));
    tide_release(t);
}

static void dtypes_and_reductions(void)
{
    tide_dtype dts[] = {TIDE_FLOAT32, TIDE_FLOAT64, TIDE_INT32, TIDE_INT64,
                        TIDE_UINT8,   TIDE_BOOL,    TIDE_FLOAT16, TIDE_BFLOAT16};
    for (size_t d = 0; d < sizeof dts / sizeof dts[0]; d++)
        for (int op = TIDE_REDUCE_SUM; op <= TIDE_REDUCE_PROD; op++) {
            bool is_float = dts[d] == TIDE_FLOAT32 || dts[d] == TIDE_FLOAT64 ||
                            dts[d] == TIDE_FLOAT16 || dts[d] == TIDE_BFLOAT16;
            if (op == TIDE_REDUCE_MEAN && !is_float)
                continue;
            check_all_reduce(dts[d], (tide_reduce_op)op);
        }
}

/* In place into a strided view: only the view's elements change. */
static void in_place_view(void)
{
    int64_t shape[2] = {4, 6};
    tide_tensor *base = tide_full(2, shape, 1.0, TIDE_FLOAT32);
    tide_tensor *col = tide_select(base, 1, 2); /* stride 6 */
    CHECK(tide_all_reduce_(col, TIDE_REDUCE_SUM) == 0, "%s", tide_last_error());
    const float *p = tide_data_ptr(base);
    int bad = 0;
    for (int i = 0; i < 24; i++)
        bad += p[i] != (i % 6 == 2 ? (float)world : 1.0f);
    CHECK(bad == 0, "all_reduce of a column view: %d wrong elements", bad);
    tide_release(col);
    tide_release(base);
}

static void broadcasts(void)
{
    for (int root = 0; root < world; root++) {
        tide_tensor *t = operand(rank, 9, TIDE_INT64);
        CHECK(tide_broadcast_(t, root) == 0, "%s", tide_last_error());
        int bad = 0;
        for (int i = 0; i < 9; i++)
            bad += at(t, i) != value(root, i, TIDE_INT64);
        CHECK(bad == 0, "broadcast from %d: %d wrong", root, bad);
        tide_release(t);
    }
    tide_tensor *h = operand(rank, 5, TIDE_BFLOAT16); /* moved as bits */
    CHECK(tide_broadcast_(h, world - 1) == 0 && at(h, 3) == value(world - 1, 3, TIDE_BFLOAT16),
          "bfloat16 broadcast: %s", tide_last_error());
    tide_release(h);
}

static void gathers_and_scatters(void)
{
    tide_tensor *t = operand(rank, 6, TIDE_FLOAT32);
    tide_tensor *g = tide_all_gather(t);
    CHECK(g && tide_ndim(g) == 1 && tide_shape(g)[0] == 6 * world, "all_gather shape");
    int bad = 0;
    for (int r = 0; g && r < world; r++)
        for (int i = 0; i < 6; i++)
            bad += at(g, r * 6 + i) != value(r, i, TIDE_FLOAT32);
    CHECK(bad == 0, "all_gather: %d wrong", bad);
    tide_release(g);
    tide_tensor *s = tide_scalar(rank + 1.0, TIDE_FLOAT64);
    g = tide_all_gather(s);
    CHECK(g && tide_ndim(g) == 1 && tide_shape(g)[0] == world && at(g, world - 1) == world,
          "all_gather of a 0-dim tensor");
    tide_release(g);
    tide_release(s);
    tide_release(t);
    for (int op = TIDE_REDUCE_SUM; op <= TIDE_REDUCE_MAX; op++) {
        t = operand(rank, 4 * world, TIDE_FLOAT32);
        tide_tensor *mine = tide_reduce_scatter(t, (tide_reduce_op)op);
        CHECK(mine && tide_shape(mine)[0] == 4, "reduce_scatter shape: %s", tide_last_error());
        bad = 0;
        for (int i = 0; mine && i < 4; i++)
            bad += at(mine, i) != expected(rank * 4 + i, TIDE_FLOAT32, (tide_reduce_op)op);
        CHECK(bad == 0, "reduce_scatter op %d: %d wrong", op, bad);
        tide_release(mine);
        tide_release(t);
    }
}

/* Three works started, waited in the reverse order. */
static void non_blocking(void)
{
    tide_tensor *a = operand(rank, 1000, TIDE_FLOAT32), *b = operand(rank, 8, TIDE_INT32);
    tide_tensor *c = operand(rank, 2 * world, TIDE_FLOAT64);
    tide_work *wa = tide_all_reduce_async(a, TIDE_REDUCE_MAX);
    tide_work *wb = tide_all_gather_async(b);
    tide_work *wc = tide_reduce_scatter_async(c, TIDE_REDUCE_SUM);
    CHECK(wa && wb && wc, "starting works: %s", tide_last_error());
    tide_tensor *rc = tide_work_wait(wc), *rb = tide_work_wait(wb), *ra = tide_work_wait(wa);
    CHECK(ra == a, "all_reduce's work gives its tensor back");
    CHECK(tide_work_is_completed(wa), "a waited work is completed");
    int bad = 0;
    for (int i = 0; ra && i < 1000; i++)
        bad += at(a, i) != expected(i, TIDE_FLOAT32, TIDE_REDUCE_MAX);
    for (int r = 0; rb && r < world; r++)
        for (int i = 0; i < 8; i++)
            bad += at(rb, r * 8 + i) != value(r, i, TIDE_INT32);
    for (int i = 0; rc && i < 2; i++)
        bad += at(rc, i) != expected(rank * 2 + i, TIDE_FLOAT64, TIDE_REDUCE_SUM);
    CHECK(ra && rb && rc && bad == 0, "non-blocking, waited out of order: %d wrong", bad);
    tide_tensor *again = tide_work_wait(wa);
    CHECK(again == a, "a second wait gives the result again");
    tide_release(again);
    tide_release(ra), tide_release(rb), tide_release(rc);
    tide_work_free(wa), tide_work_free(wb), tide_work_free(wc);
    tide_work *unwaited = tide_all_reduce_async(b, TIDE_REDUCE_SUM);
    tide_work_free(unwaited); /* waits first */
    tide_release(a), tide_release(b), tide_release(c);
}

static void errors(void)
{
    int64_t shape[1] = {3 + (world > 1 ? rank : 0)};
    tide_tensor *t = tide_zeros(1, shape, TIDE_FLOAT32);
    if (world > 1) { /* ranks disagree on the shape: every rank fails, none hangs */
        CHECK(tide_all_reduce_(t, TIDE_REDUCE_SUM) < 0 &&
                  strstr(tide_last_error(), "disagree") && strstr(tide_last_error(), "rank 1") &&
                  tide_last_error_code() == TIDE_ERR_DISTRIBUTED,
              "mismatched shapes: %s", tide_last_error());
        tide_tensor *ok = tide_ones(1, shape, TIDE_FLOAT32); /* the group still works after */
        tide_tensor *ok1 = tide_ones(0, NULL, TIDE_FLOAT32);
        CHECK(tide_all_reduce_(ok1, TIDE_REDUCE_SUM) == 0 && at(ok1, 0) == world,
              "a collective after a refused one: %s", tide_last_error());
        tide_release(ok), tide_release(ok1);
    }
    tide_tensor *i = tide_zeros(1, shape, TIDE_INT64);
    CHECK(tide_all_reduce_(i, TIDE_REDUCE_MEAN) < 0 && strstr(tide_last_error(), "mean needs"),
          "mean of int64: %s", tide_last_error());
    CHECK(tide_all_reduce_(t, (tide_reduce_op)9) < 0 && strstr(tide_last_error(), "unknown"),
          "bad reduction: %s", tide_last_error());
    CHECK(tide_broadcast_(t, world) < 0 && strstr(tide_last_error(), "not a rank"),
          "root out of range: %s", tide_last_error());
    tide_tensor *scalar = tide_scalar(1, TIDE_FLOAT32);
    CHECK_ERROR(tide_reduce_scatter(scalar, TIDE_REDUCE_SUM), "reduce_scatter", "equal blocks");
    tide_release(scalar);
    tide_tensor *w = tide_ones(1, shape, TIDE_FLOAT32);
    tide_requires_grad_(w, true);
    CHECK(tide_all_reduce_(w, TIDE_REDUCE_SUM) < 0 && strstr(tide_last_error(), "requires grad"),
          "a tensor that requires grad: %s", tide_last_error());
    CHECK(tide_all_reduce_(NULL, TIDE_REDUCE_SUM) < 0, "NULL tensor");
    tide_release(w), tide_release(i), tide_release(t);
}

int main(void)
{
    int64_t one[1] = {1};
    tide_tensor *t = tide_ones(1, one, TIDE_FLOAT32);
    CHECK(tide_dist_rank() == -1 && !tide_dist_is_initialized(), "nothing before init");
    if (!tide_dist_available()) { /* built without MPI: the error says how to get it */
        CHECK(tide_dist_init(0) < 0 && strstr(tide_last_error(), "without MPI") &&
                  tide_last_error_code() == TIDE_ERR_UNSUPPORTED,
              "%s", tide_last_error());
        tide_release(t);
        return test_summary("test_distributed (built without MPI)");
    }
    CHECK(tide_all_reduce_(t, TIDE_REDUCE_SUM) < 0 && strstr(tide_last_error(), "init"),
          "a collective before init: %s", tide_last_error());
    CHECK(tide_dist_init(120) == 0, "init: %s", tide_last_error());
    CHECK(tide_dist_init(0) == 0, "init twice");
    rank = tide_dist_rank();
    world = tide_dist_world_size();
    CHECK(world >= 1 && rank >= 0 && rank < world, "rank %d of %d", rank, world);
    CHECK(tide_dist_set_timeout(-1) < 0 && tide_dist_set_timeout(120) == 0, "set_timeout");
    tide_release(t);
    dtypes_and_reductions();
    in_place_view();
    broadcasts();
    gathers_and_scatters();
    non_blocking();
    errors();
    CHECK(tide_dist_barrier() == 0, "barrier: %s", tide_last_error());
    char name[64];
    snprintf(name, sizeof name, "test_distributed (rank %d of %d)", rank, world);
    return test_summary(name);
}
