#!/usr/bin/python3
"""gen_optim_fixture.py — PyTorch 1.13's optimizers on a fixed small problem, for
tests/lua/test_optim_more.lua.

Run with Debian's python3 (torch 1.13):  /usr/bin/python3 scripts/gen_optim_fixture.py
Writes tests/lua/data/optim_fixture.lua: for each case the optimizer, its options, the number of
steps and the parameters W [3, 2] and b [2] after them (float64, flattened row-major).
The problem: loss = mean((x @ W + b - y)^2) + 0.1 * sum(W^4), x [4, 3], y [4, 2], with x, y
and the starting W, b from det() below (the Lua test computes the same values).
"""
import math
import os

import torch


def det(shape, seed, scale=0.5):
    n = math.prod(shape)
    v = [math.sin(1.3 * seed + 0.71 * i) * scale for i in range(n)]
    return torch.tensor(v, dtype=torch.float64).reshape(shape)


X, Y = det((4, 3), 1, 1.0), det((4, 2), 2, 1.0)


def loss_of(W, b):
    return ((X @ W + b - Y) ** 2).mean() + 0.1 * (W ** 4).sum()


CASES = [
    ("RMSprop", {}, 5),
    ("RMSprop", {"lr": 0.01, "momentum": 0.9, "centered": True, "weight_decay": 0.1}, 5),
    ("RMSprop", {"lr": 0.02, "alpha": 0.9, "momentum": 0.5}, 4),
    ("Adagrad", {}, 5),
    ("Adagrad", {"lr": 0.1, "lr_decay": 0.05, "weight_decay": 0.1,
                 "initial_accumulator_value": 0.2}, 5),
    ("Adadelta", {}, 5),
    ("Adadelta", {"lr": 0.5, "rho": 0.8, "eps": 1e-4, "weight_decay": 0.1}, 5),
    ("Adamax", {}, 5),
    ("Adamax", {"lr": 0.05, "betas": [0.8, 0.9], "weight_decay": 0.1}, 5),
    ("NAdam", {}, 5),
    ("NAdam", {"lr": 0.05, "betas": [0.8, 0.95], "weight_decay": 0.1,
               "momentum_decay": 0.01}, 5),
    ("RAdam", {}, 8),
    ("RAdam", {"lr": 0.05, "betas": [0.5, 0.6], "weight_decay": 0.1}, 8),
    ("LBFGS", {"lr": 1, "max_iter": 5}, 3),
    ("LBFGS", {"lr": 0.5, "max_iter": 4, "history_size": 2}, 3),
    ("LBFGS", {"lr": 1, "max_iter": 6, "line_search_fn": "strong_wolfe"}, 3),
]


def run(name, opts, steps):
    W = det((3, 2), 3).requires_grad_()
    b = det((2,), 4).requires_grad_()
    kw = dict(opts)
    if "betas" in kw:
        kw["betas"] = tuple(kw["betas"])
    if name == "NAdam":
        # 1.13's default (single-tensor) NAdam multiplies mu in twice into mu_product_next (fixed
        # in PyTorch 2.0); its foreach path has the paper's formula, which tide follows
        kw["foreach"] = True
    opt = getattr(torch.optim, name)([W, b], **kw)
    losses = []
    for _ in range(steps):
        def closure():
            opt.zero_grad()
            loss = loss_of(W, b)
            loss.backward()
            return loss
        losses.append(float(opt.step(closure)))
    return W, b, losses


def lua(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"%s"' % v
    if isinstance(v, list):
        return "{" + ", ".join(lua(i) for i in v) + "}"
    if isinstance(v, float):
        return "%.17g" % v
    return str(v)


def main():
    lines = ["-- optim_fixture.lua — written by scripts/gen_optim_fixture.py with torch %s; "
             "do not edit." % torch.__version__, "return {"]
    for name, opts, steps in CASES:
        W, b, losses = run(name, opts, steps)
        o = ", ".join("%s = %s" % (k, lua(v)) for k, v in opts.items())
        lines.append("  {optim = %s, opts = {%s}, steps = %d," % (lua(name), o, steps))
        lines.append("   W = %s," % lua(W.detach().reshape(-1).tolist()))
        lines.append("   b = %s," % lua(b.detach().reshape(-1).tolist()))
        lines.append("   losses = %s}," % lua(losses))
    lines.append("}")
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "tests", "lua", "data", "optim_fixture.lua")
    with open(path, "w") as f:
        f.write("\n".join(lines) + "\n")
    print("wrote", os.path.normpath(path), os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
