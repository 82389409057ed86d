/*
 * linear_fit.c — fit y = w*x + b by full-batch gradient descent, written with tide ops.
 *
 * The smallest real training loop: data, a model, a loss, gradients, an update, all through the
 * public C API. The gradients are written out by hand (autograd is another example's job), so
 * every tensor made here is visible and released here. At the end the fitted parameters are
 * checked against the closed-form least-squares answer computed in plain double C: the program
 * exits 0 only when they agree to 1e-3, so it doubles as an end-to-end test.
 *
 * Build: part of the examples CMake target (links libtide). Run: ./linear_fit
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "tide.h"

#define N_POINTS 500
#define STEPS 1000
#define PRINT_EVERY 100
/* x spans [0, 2], so the loss's curvature is about 4.4 along its steepest direction and 0.3
 * along its flattest. Any rate below 2/4.4 converges; 0.05 shrinks the slow direction's error
 * by 1.5% a step: slow enough that the printed progress shows the descent, fast enough to be
 * float32-exact well before STEPS. */
#define LEARNING_RATE 0.05
#define TRUE_W 2.5
#define TRUE_B (-1.0)
#define TOLERANCE 1e-3

/* Every tide call goes through this: a NULL result stops the program with the reason. */
static tide_tensor *checked(tide_tensor *t, const char *what)
{
    if (!t)
        fprintf(stderr, "linear_fit: %s failed: %s\n", what, tide_last_error());
    return t;
}

/* y = TRUE_W*x + TRUE_B + 0.1*sin(37x): a fixed "noise" so every run fits the same data and
 * the least-squares answer differs a little from the true parameters, as with real data. */
static tide_tensor *make_targets(const tide_tensor *x)
{
    tide_tensor *line = NULL, *scaled = NULL, *x37 = NULL, *wave = NULL, *noise = NULL, *y = NULL;
    if (!(scaled = checked(tide_mul_scalar(x, TRUE_W), "x * w")) ||
        !(line = checked(tide_add_scalar(scaled, TRUE_B), "w*x + b")) ||
        !(x37 = checked(tide_mul_scalar(x, 37.0), "37 * x")) ||
        !(wave = checked(tide_sin(x37), "sin")) ||
        !(noise = checked(tide_mul_scalar(wave, 0.1), "0.1 * sin")))
        goto done;
    y = checked(tide_add(line, noise), "line + noise");
done:
    tide_release(scaled);
    tide_release(line);
    tide_release(x37);
    tide_release(wave);
    tide_release(noise);
    return y;
}

/* The value of a 0-dim parameter. Returns 0 or -1. */
static int read_param(const tide_tensor *t, const char *name, double *value)
{
    if (tide_item(t, value) != 0) {
        fprintf(stderr, "linear_fit: reading %s failed: %s\n", name, tide_last_error());
        return -1;
    }
    return 0;
}

/* The mean squared error at (w, b), read back as a double. Returns 0 or -1. */
static int mse(const tide_tensor *x, const tide_tensor *y, const tide_tensor *w,
               const tide_tensor *b, double *loss)
{
    tide_tensor *wx = NULL, *pred = NULL, *r = NULL, *r2 = NULL, *mean_r2 = NULL;
    int status = -1;
    if (!(wx = checked(tide_mul(w, x), "w * x")) ||
        !(pred = checked(tide_add(wx, b), "w*x + b")) ||
        !(r = checked(tide_sub(pred, y), "pred - y")) ||
        !(r2 = checked(tide_mul(r, r), "r * r")) ||
        !(mean_r2 = checked(tide_mean(r2, NULL, 0, false), "mean(r^2)")))
        goto done;
    if (tide_item(mean_r2, loss) != 0) {
        fprintf(stderr, "linear_fit: reading the loss failed: %s\n", tide_last_error());
        goto done;
    }
    status = 0;
done:
    tide_release(wx);
    tide_release(pred);
    tide_release(r);
    tide_release(r2);
    tide_release(mean_r2);
    return status;
}

/* One gradient-descent step on L = mean((w*x + b - y)^2): replaces *w and *b with the updated
 * parameters (and releases the old ones). Returns 0, or -1 leaving *w and *b as they were. */
static int gd_step(const tide_tensor *x, const tide_tensor *y, tide_tensor **w, tide_tensor **b)
{
    tide_tensor *wx = NULL, *pred = NULL, *r = NULL, *rx = NULL, *mean_rx = NULL, *grad_w = NULL,
                *mean_r = NULL, *grad_b = NULL, *step_w = NULL, *step_b = NULL, *new_w = NULL,
                *new_b = NULL;
    int status = -1;

    if (!(wx = checked(tide_mul(*w, x), "w * x")) ||
        !(pred = checked(tide_add(wx, *b), "w*x + b")) ||
        !(r = checked(tide_sub(pred, y), "pred - y")))
        goto done;
    /* dL/dw = mean(2*r*x), dL/db = mean(2*r): the factor 2 is applied to the 0-dim mean, not
     * to the N-element residual, which saves a full pass over the data for the same value. */
    if (!(rx = checked(tide_mul(r, x), "r * x")) ||
        !(mean_rx = checked(tide_mean(rx, NULL, 0, false), "mean(r*x)")) ||
        !(grad_w = checked(tide_mul_scalar(mean_rx, 2.0), "2 * mean(r*x)")) ||
        !(mean_r = checked(tide_mean(r, NULL, 0, false), "mean(r)")) ||
        !(grad_b = checked(tide_mul_scalar(mean_r, 2.0), "2 * mean(r)")))
        goto done;
    if (!(step_w = checked(tide_mul_scalar(grad_w, LEARNING_RATE), "lr * grad_w")) ||
        !(step_b = checked(tide_mul_scalar(grad_b, LEARNING_RATE), "lr * grad_b")) ||
        !(new_w = checked(tide_sub(*w, step_w), "w - lr*grad_w")) ||
        !(new_b = checked(tide_sub(*b, step_b), "b - lr*grad_b")))
        goto done;
    tide_release(*w);
    tide_release(*b);
    *w = new_w;
    *b = new_b;
    new_w = new_b = NULL;
    status = 0;
done:
    tide_release(wx);
    tide_release(pred);
    tide_release(r);
    tide_release(rx);
    tide_release(mean_rx);
    tide_release(grad_w);
    tide_release(mean_r);
    tide_release(grad_b);
    tide_release(step_w);
    tide_release(step_b);
    tide_release(new_w);
    tide_release(new_b);
    return status;
}

/* Prints one progress line: the loss at the parameters shown. Returns 0 or -1. */
static int report(int step, const tide_tensor *x, const tide_tensor *y, const tide_tensor *w,
                  const tide_tensor *b)
{
    double loss, wv, bv;
    if (mse(x, y, w, b, &loss) != 0 || read_param(w, "w", &wv) != 0 ||
        read_param(b, "b", &bv) != 0)
        return -1;
    printf("step %4d  loss %.8f  w %.6f  b %.6f\n", step, loss, wv, bv);
    return 0;
}

/* The exact minimiser of the same loss, from the same float32 data, in double:
 * w = cov(x, y) / var(x), b = mean(y) - w*mean(x). */
static int least_squares(const tide_tensor *x, const tide_tensor *y, double *w, double *b)
{
    static float xs[N_POINTS], ys[N_POINTS];
    if (tide_to_buffer(x, xs, sizeof xs) != 0 || tide_to_buffer(y, ys, sizeof ys) != 0) {
        fprintf(stderr, "linear_fit: reading the data back failed: %s\n", tide_last_error());
        return -1;
    }
    double mx = 0.0, my = 0.0;
    for (int i = 0; i < N_POINTS; i++) {
        mx += xs[i];
        my += ys[i];
    }
    mx /= N_POINTS;
    my /= N_POINTS;
    double sxy = 0.0, sxx = 0.0; /* centred sums: no cancellation between two large terms */
    for (int i = 0; i < N_POINTS; i++) {
        sxy += (xs[i] - mx) * (ys[i] - my);
        sxx += (xs[i] - mx) * (xs[i] - mx);
    }
    *w = sxy / sxx;
    *b = my - *w * mx;
    return 0;
}

int main(void)
{
    int status = EXIT_FAILURE;
    tide_tensor *x = NULL, *y = NULL, *w = NULL, *b = NULL;

    if (!(x = checked(tide_linspace(0.0, 2.0, N_POINTS, TIDE_FLOAT32), "linspace")) ||
        !(y = make_targets(x)) ||
        /* 0-dim parameters: they broadcast against the N-element data in every op */
        !(w = checked(tide_scalar(0.0, TIDE_FLOAT32), "scalar w")) ||
        !(b = checked(tide_scalar(0.0, TIDE_FLOAT32), "scalar b")))
        goto done;

    printf("fitting y = w*x + b to %d points (true w = %.2f, b = %.2f, plus 0.1*sin(37x))\n",
           N_POINTS, TRUE_W, TRUE_B);
    for (int step = 0; step < STEPS; step++) {
        if (step % PRINT_EVERY == 0 && report(step, x, y, w, b) != 0)
            goto done;
        if (gd_step(x, y, &w, &b) != 0)
            goto done;
    }
    if (report(STEPS, x, y, w, b) != 0)
        goto done;

    double w_fit, b_fit, w_ls, b_ls;
    if (read_param(w, "w", &w_fit) != 0 || read_param(b, "b", &b_fit) != 0 ||
        least_squares(x, y, &w_ls, &b_ls) != 0)
        goto done;
    printf("gradient descent: w = %.6f  b = %.6f\n", w_fit, b_fit);
    printf("least squares:    w = %.6f  b = %.6f\n", w_ls, b_ls);
    if (fabs(w_fit - w_ls) <= TOLERANCE && fabs(b_fit - b_ls) <= TOLERANCE) {
        printf("agree to %g: OK\n", TOLERANCE);
        status = EXIT_SUCCESS;
    } else {
        printf("differ by more than %g: FAIL\n", TOLERANCE);
    }
done:
    tide_release(x);
    tide_release(y);
    tide_release(w);
    tide_release(b);
    return status;
}
