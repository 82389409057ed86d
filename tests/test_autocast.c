/*
 * test_autocast.c — the C side of autocast (tide_set_autocast): the state and its errors, which
 * ops change dtype, a matmul's gradient against the float32 product of the rounded operands
 * (bitwise: the same sgemm on the same values, rounded once), backward with autocast off, and a
 * captured graph refused under another autocast setting.
 */
#include <stdint.h>

#include "tide.h"
#include "test_util.h"

static bool bitwise_equal(const tide_tensor *a, const tide_tensor *b)
{
    if (!a || !b || tide_get_dtype(a) != tide_get_dtype(b) || tide_numel(a) != tide_numel(b))
        return false;
    size_t size = (size_t)tide_numel(a) * tide_dtype_size(tide_get_dtype(a));
    tide_tensor *ca = tide_contiguous(a), *cb = tide_contiguous(b);
    bool same = ca && cb && memcmp(tide_data_ptr(ca), tide_data_ptr(cb), size) == 0;
    tide_release(ca);
    tide_release(cb);
    return same;
}

static void test_state(void)
{
    CHECK(tide_get_autocast() == TIDE_AUTOCAST_OFF, "off at start");
    CHECK(tide_set_autocast(TIDE_INT32) == -1 &&
              strstr(tide_last_error(), "float16 or bfloat16") != NULL,
          "int32 refused: %s", tide_last_error());
    CHECK(tide_get_autocast() == TIDE_AUTOCAST_OFF, "unchanged by the refusal");
    CHECK(tide_set_autocast(TIDE_BFLOAT16) == 0 && tide_get_autocast() == TIDE_BFLOAT16, "set");
    CHECK(tide_set_autocast(TIDE_AUTOCAST_OFF) == 0, "off");
}

static void test_dtypes(void)
{
    int64_t s[2] = {3, 4};
    tide_tensor *a = tide_randn(2, s, TIDE_FLOAT32), *b = tide_transpose(a, 0, 1);
    tide_tensor *h = tide_cast(a, TIDE_FLOAT16);
    tide_set_autocast(TIDE_FLOAT16);
    tide_tensor *p = tide_matmul(a, b), *sm = tide_softmax(h, 1), *lin = tide_linear(a, a, NULL);
    tide_set_autocast(TIDE_AUTOCAST_OFF);
    tide_tensor *sm_off = tide_softmax(h, 1);
    CHECK(p && tide_get_dtype(p) == TIDE_FLOAT16, "matmul under float16 autocast");
    CHECK(lin && tide_get_dtype(lin) == TIDE_FLOAT16, "linear under float16 autocast");
    CHECK(sm && tide_get_dtype(sm) == TIDE_FLOAT32, "softmax of float16 under autocast: float32");
    CHECK(sm_off && tide_get_dtype(sm_off) == TIDE_FLOAT16, "softmax outside autocast: float16");
    tide_tensor *all[] = {a, b, h, p, sm, lin, sm_off};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tide_release(all[i]);
}

/* x @ w under bfloat16 autocast, backward with g: the gradients are float32 and equal
 * bf16(g16 @ w16^T) and bf16(x16^T @ g16), each computed in float32 on the rounded operands. */
static void test_matmul_grad(void)
{
    int64_t sx[2] = {5, 7}, sw[2] = {7, 3}, sg[2] = {5, 3};
    tide_tensor *x = tide_randn(2, sx, TIDE_FLOAT32), *w = tide_randn(2, sw, TIDE_FLOAT32);
    tide_tensor *g = tide_randn(2, sg, TIDE_FLOAT32), *g16 = tide_cast(g, TIDE_BFLOAT16);
    tide_requires_grad_(x, true);
    tide_requires_grad_(w, true);
    tide_set_autocast(TIDE_BFLOAT16);
    tide_tensor *y = tide_matmul(x, w);
    CHECK(tide_backward(y, g16, false) == 0, "backward under autocast: %s", tide_last_error());
    tide_set_autocast(TIDE_AUTOCAST_OFF);
    tide_tensor *gx = tide_grad(x), *gw = tide_grad(w);
    CHECK(gx && gw && tide_get_dtype(gx) == TIDE_FLOAT32 && tide_get_dtype(gw) == TIDE_FLOAT32,
          "float32 gradients");
    tide_tensor *r[8];
    r[0] = tide_cast(g16, TIDE_FLOAT32);
    tide_tensor *x16 = tide_cast(x, TIDE_BFLOAT16), *w16 = tide_cast(w, TIDE_BFLOAT16);
    r[1] = tide_cast(x16, TIDE_FLOAT32);
    r[2] = tide_cast(w16, TIDE_FLOAT32);
    tide_tensor *wt = tide_transpose(r[2], 0, 1), *xt = tide_transpose(r[1], 0, 1);
    r[3] = tide_matmul(r[0], wt);
    r[4] = tide_matmul(xt, r[0]);
    r[5] = tide_cast(r[3], TIDE_BFLOAT16);
    r[6] = tide_cast(r[4], TIDE_BFLOAT16);
    tide_tensor *want_gx = tide_cast(r[5], TIDE_FLOAT32), *want_gw = tide_cast(r[6], TIDE_FLOAT32);
    CHECK(bitwise_equal(gx, want_gx), "grad of x: bf16(g @ w^T) on rounded operands");
    CHECK(bitwise_equal(gw, want_gw), "grad of w: bf16(x^T @ g) on rounded operands");
    r[7] = tide_matmul(r[1], r[2]);
    tide_tensor *want_y = tide_cast(r[7], TIDE_BFLOAT16);
    CHECK(bitwise_equal(y, want_y), "forward: bf16(x16 @ w16) in float32");
    tide_tensor *all[] = {x, w, g, g16, y, gx, gw, x16, w16, wt, xt, want_gx, want_gw, want_y};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++)
        tide_release(all[i]);
    for (int i = 0; i < 8; i++)
        tide_release(r[i]);
}

/* A graph captured under autocast refuses to run outside it, and the other way. */
static void test_graph_guard(void)
{
    int64_t s[2] = {4, 4};
    tide_tensor *a = tide_randn(2, s, TIDE_FLOAT32), *out = NULL;
    tide_set_autocast(TIDE_BFLOAT16);
    CHECK(tide_jit_begin(&a, 1) == 0, "begin: %s", tide_last_error());
    tide_tensor *p = tide_matmul(a, a);
    tide_graph *gr = tide_jit_end(&p, 1);
    CHECK(gr != NULL, "captured: %s", tide_last_error());
    CHECK(tide_graph_run(gr, &a, 1, &out) == 0 && out && tide_get_dtype(out) == TIDE_BFLOAT16,
          "runs under the same autocast: %s", tide_last_error());
    tide_release(out);
    out = NULL;
    tide_set_autocast(TIDE_AUTOCAST_OFF);
    CHECK(tide_graph_run(gr, &a, 1, &out) == -1 &&
              strstr(tide_last_error(), "captured with autocast bfloat16 and runs with autocast "
                                        "off") != NULL,
          "refused outside autocast: %s", tide_last_error());
    tide_graph_free(gr);
    tide_release(p);
    tide_release(a);
}

int main(void)
{
    tide_manual_seed(11);
    test_state();
    test_dtypes();
    test_matmul_grad();
    test_graph_guard();
    return test_summary("test_autocast");
}
