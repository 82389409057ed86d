#!/usr/bin/env python3
"""Fits the polynomial and rational coefficients of the float32 vector kernels in
devices/cpu/cpu_elementwise_isa.c (tanh, and the exp inside sigmoid).

A developer's tool, not part of the build: it needs numpy (Debian: python3-numpy).

Method: linear least squares on a dense Chebyshev-spaced sample, reweighted each round by the
error of the last (Lawson's iteration), which moves the fit towards the minimax one; the best
round is kept. For the rational function the equation is linearised as x P(s) - t Q(s) = 0 and
divided by the previous round's Q (Loeb's method), with s = x^2 scaled to [0, 1] so the normal
equations stay well conditioned.

    python3 scripts/fit_transcendentals.py tanh 9.1 4 4   # clamp, degree of P, degree of Q
    python3 scripts/fit_transcendentals.py exp 4          # degree of P in 1 + r + r^2 P(r)
"""
import sys

import numpy as np


def fit_tanh(clamp, dp, dq, rounds=300):
    x = clamp / 2 * (1 - np.cos(np.linspace(0, np.pi, 40000)))
    x = np.concatenate([x, np.geomspace(1e-6, 1, 2000)])
    x = x[(x > 0) & (x <= clamp)]
    u = (x / clamp) ** 2
    t = np.tanh(x)
    q_prev = np.ones_like(x)
    w = np.ones_like(x) / len(x)
    best = None
    for _ in range(rounds):
        a = np.hstack([x[:, None] * u[:, None] ** np.arange(dp + 1),
                       -(t[:, None] * u[:, None] ** np.arange(1, dq + 1))])
        scale = np.sqrt(w) / (t * q_prev)
        sol, *_ = np.linalg.lstsq(a * scale[:, None], t * scale, rcond=None)
        p = sol[:dp + 1]
        q = np.concatenate([[1.0], sol[dp + 1:]])
        qv = np.polyval(q[::-1], u)
        err = np.abs((x * np.polyval(p[::-1], u) / qv - t) / t)
        q_prev = qv
        if best is None or err.max() < best[0]:
            best = (err.max(), p.copy(), q.copy())
        w = w * err
        w /= w.sum()
    err, p, q = best
    # back to powers of s = x^2
    ps = [p[k] / clamp ** (2 * k) for k in range(dp + 1)]
    qs = [q[k] / clamp ** (2 * k) for k in range(dq + 1)]
    print("tanh x = x P(x^2) / Q(x^2) on [0, %g]: max relative error %.3e" % (clamp, err))
    print("P, highest degree first:", ", ".join("%.9e" % v for v in reversed(ps)))
    print("Q, highest degree first:", ", ".join("%.9e" % v for v in reversed(qs)))


def fit_exp(deg, rounds=400):
    half = np.log(2) / 2 * 1.0001
    r = half * np.cos(np.linspace(0, np.pi, 20001))
    r = r[np.abs(r) > 1e-6]
    f = (np.expm1(r) - r) / (r * r)  # P's target
    to_rel = r * r / np.exp(r)        # an error in P, as a relative error of e^r
    w = np.ones_like(r) / len(r)
    best = None
    for _ in range(rounds):
        a = r[:, None] ** np.arange(deg + 1)
        scale = np.sqrt(w) * to_rel
        c, *_ = np.linalg.lstsq(a * scale[:, None], f * scale, rcond=None)
        err = np.abs((a @ c - f) * to_rel)
        if best is None or err.max() < best[0]:
            best = (err.max(), c.copy())
        w = w * err
        w /= w.sum()
    err, c = best
    print("e^r = 1 + r + r^2 P(r) on [-ln2/2, ln2/2]: max relative error %.3e" % err)
    print("P, highest degree first:", ", ".join("%.10e" % v for v in reversed(c)))


if __name__ == "__main__":
    if len(sys.argv) == 5 and sys.argv[1] == "tanh":
        fit_tanh(float(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]))
    elif len(sys.argv) == 3 and sys.argv[1] == "exp":
        fit_exp(int(sys.argv[2]))
    else:
        sys.exit(__doc__)
