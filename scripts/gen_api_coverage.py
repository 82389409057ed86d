#!/usr/bin/python3
"""Writes tests/lua/data/api_coverage.lua: the checked table of PyTorch's everyday API.

Four lists (torch.*, torch.nn.functional, torch.nn modules, torch.optim), each name with one
small call that has a known answer. The answer is computed here by PyTorch (Debian's
python3-torch 1.13, hence /usr/bin/python3); the Lua expression beside it is what a tide user
writes for the same call: 1-based dims and index values, keyword options in a trailing table.
tests/lua/test_api_coverage.lua evaluates every Lua expression, compares it with PyTorch's
answer, and prints how much of each list is present and right, so coverage is measured, not
claimed. Rerun only to change the table:

    /usr/bin/python3 scripts/gen_api_coverage.py tests/lua/data/api_coverage.lua

An entry is (list, name, python expression, Lua expression[, mode]). Modes:
  "value"  (default) the result's dtype, shape and values (float64 within 1e-9 relative);
  "shape"  random results: only the dtype and shape (the generators differ);
  "loose"  values within 1e-6 relative (iterative algorithms, LBFGS).
NAdam runs PyTorch's foreach path: 1.13's default path applies one momentum factor twice
(fixed in PyTorch 2.0), and tide follows the published formula.
Inputs are the same float64 tensors on both sides (A, B, P, U, V, W, S, X4, ...); PyTorch's
0-based index answers are shifted to tide's 1-based ones in the Python expression.
"""
import math
import sys

import torch
import torch.nn.functional as F
from torch import nn

torch.set_default_dtype(torch.float64)

INPUTS = {
    "A": [[0.5, -1.25, 2.0, 3.5], [-0.75, 1.5, -2.5, 0.25], [1.0, -0.5, 0.75, -3.0]],
    "B": [[1.5, 0.25, -1.0, 2.0], [0.5, -0.75, 1.25, -2.0], [-1.5, 3.0, 0.5, 1.0]],
    "P": [[0.5, 1.25, 2.0, 3.5], [0.75, 1.5, 2.5, 0.25], [1.0, 0.5, 0.75, 3.0]],
    "U": [[0.5, -0.25, 0.125, 0.75], [-0.625, 0.375, -0.5, 0.25], [0.875, -0.75, 0.0625, -0.125]],
    "V": [1.0, -2.0, 0.5, 3.0],
    "W": [0.25, -1.5, 2.0],
    "S": [[2.0, -1.0, 0.5], [1.0, 3.0, -2.0], [0.25, 0.5, 1.5]],
    "M": [[1.0, -0.5], [0.25, 2.0], [-1.5, 0.75], [0.5, 1.0]],
    "A3": [[[0.5, -1.0, 2.0, 1.5], [1.0, 0.25, -0.5, 2.5], [-2.0, 1.5, 0.75, -0.25]],
           [[1.25, 0.5, -1.5, 0.0], [-0.75, 2.0, 1.0, -1.0], [0.5, -0.5, 1.5, 2.0]]],
    # an image batch [2, 2, 4, 4] (N, C, H, W)
    "X4": [[[[1.5 * math.sin(1.0 + w + 4 * h + 16 * c + 32 * n) for w in range(4)] for h in range(4)]
            for c in range(2)] for n in range(2)],
    # a sequence batch [2, 3, 5] (N, C, L)
    "X3": [[[math.cos(0.7 * (l + 5 * c + 15 * n)) for l in range(5)] for c in range(3)]
           for n in range(2)],
}
INT_INPUTS = {"I": [[2, 0, 1, 3], [1, 1, 0, 2], [0, 3, 2, 1]], "J": [2, 0, 1], "C": [0, 2, 1, 2, 2, 4]}
BOOL_INPUTS = {"K": [[True, False, True, False], [False, False, True, True], [True, True, False, False]]}

ENV = {k: torch.tensor(v) for k, v in INPUTS.items()}
ENV.update({k: torch.tensor(v, dtype=torch.int64) for k, v in INT_INPUTS.items()})
ENV.update({k: torch.tensor(v) for k, v in BOOL_INPUTS.items()})


def fill(m):
    """Deterministic parameters: the k-th parameter by name gets 0.5 sin(i + k), i = 0, 1, ..."""
    m = m.double()
    with torch.no_grad():
        for k, (_, p) in enumerate(sorted(m.named_parameters()), start=1):
            p.copy_((0.5 * torch.sin(torch.arange(p.numel()) + k)).reshape(p.shape))
    return m


def opt_run(make, steps=5, closure_opt=False):
    """Steps of an optimizer on a fixed smooth function of three parameters; the end point."""
    p = torch.tensor([1.0, -2.0, 0.5], requires_grad=True)
    opt = make([p])
    target = torch.tensor([0.5, 0.25, -1.0])

    def loss_fn():
        return ((p - target) ** 2 * torch.tensor([1.0, 2.0, 0.5])).sum() + 0.1 * (p ** 4).sum()

    for _ in range(steps):
        def closure():
            opt.zero_grad()
            loss = loss_fn()
            loss.backward()
            return loss
        if closure_opt:
            opt.step(closure)
        else:
            closure()
            opt.step()
    return p.detach()


def sdpa(q, k, v, causal=False):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if causal:
        s = s.masked_fill(torch.ones(s.shape[-2], s.shape[-1], dtype=torch.bool).triu(1), -math.inf)
    return torch.softmax(s, -1) @ v


ENV.update(dict(torch=torch, F=F, nn=nn, math=math, fill=fill, opt_run=opt_run, sdpa=sdpa))

# fmt: off
T, FN, NN, OPT = "torch", "functional", "nn", "optim"
ENTRIES = [
    # ---- creation and random
    (T, "tensor", "torch.tensor([[1, 2], [3, 4]])", 'tide.tensor({{1, 2}, {3, 4}})'),
    (T, "zeros", "torch.zeros(2, 3)", 'tide.zeros(2, 3, {dtype="float64"})'),
    (T, "ones", "torch.ones(2, 3)", 'tide.ones(2, 3, {dtype="float64"})'),
    (T, "full", "torch.full((2, 2), 1.5)", 'tide.full(2, 2, 1.5, {dtype="float64"})'),
    (T, "empty", "torch.empty(2, 3)", 'tide.empty(2, 3, {dtype="float64"})', "shape"),
    (T, "arange", "torch.arange(1, 7, 2)", 'tide.arange(1, 7, 2)'),
    (T, "linspace", "torch.linspace(0, 1, 5)", 'tide.linspace(0, 1, 5, {dtype="float64"})'),
    (T, "logspace", "torch.logspace(0, 2, 3)", 'tide.logspace(0, 2, 3, {dtype="float64"})'),
    (T, "eye", "torch.eye(3, 2)", 'tide.eye(3, 2, {dtype="float64"})'),
    (T, "zeros_like", "torch.zeros_like(A)", 'tide.zeros_like(A)'),
    (T, "ones_like", "torch.ones_like(A)", 'tide.ones_like(A)'),
    (T, "full_like", "torch.full_like(A, 2.5)", 'tide.full_like(A, 2.5)'),
    (T, "empty_like", "torch.empty_like(A)", 'tide.empty_like(A)', "shape"),
    (T, "rand", "torch.rand(3, 2)", 'tide.rand(3, 2, {dtype="float64"})', "shape"),
    (T, "randn", "torch.randn(3, 2)", 'tide.randn(3, 2, {dtype="float64"})', "shape"),
    (T, "randint", "torch.randint(0, 5, (4,))", 'tide.randint(0, 5, {4})', "shape"),
    (T, "randperm", "torch.randperm(5)", 'tide.randperm(5)', "shape"),
    (T, "rand_like", "torch.rand_like(A)", 'tide.rand_like(A)', "shape"),
    (T, "randn_like", "torch.randn_like(A)", 'tide.randn_like(A)', "shape"),
    (T, "normal", "torch.normal(A, P)", 'tide.normal(A, P)', "shape"),
    (T, "bernoulli", "torch.bernoulli(P / 4)", 'tide.bernoulli(P / 4)', "shape"),
    (T, "multinomial", "torch.multinomial(P, 2)", 'tide.multinomial(P, 2)', "shape"),
    (T, "manual_seed", "torch.rand(2) * 0", 'tide.manual_seed(3); return tide.rand(2, {dtype="float64"}) * 0'),
    # ---- elementwise math
    (T, "abs", "torch.abs(A)", 'tide.abs(A)'),
    (T, "neg", "torch.neg(A)", 'tide.neg(A)'),
    (T, "exp", "torch.exp(A)", 'tide.exp(A)'),
    (T, "exp2", "torch.exp2(A)", 'tide.exp2(A)'),
    (T, "log", "torch.log(P)", 'tide.log(P)'),
    (T, "log2", "torch.log2(P)", 'tide.log2(P)'),
    (T, "log10", "torch.log10(P)", 'tide.log10(P)'),
    (T, "log1p", "torch.log1p(U)", 'tide.log1p(U)'),
    (T, "expm1", "torch.expm1(U)", 'tide.expm1(U)'),
    (T, "sqrt", "torch.sqrt(P)", 'tide.sqrt(P)'),
    (T, "rsqrt", "torch.rsqrt(P)", 'tide.rsqrt(P)'),
    (T, "sin", "torch.sin(A)", 'tide.sin(A)'),
    (T, "cos", "torch.cos(A)", 'tide.cos(A)'),
    (T, "tan", "torch.tan(U)", 'tide.tan(U)'),
    (T, "asin", "torch.asin(U)", 'tide.asin(U)'),
    (T, "acos", "torch.acos(U)", 'tide.acos(U)'),
    (T, "atan", "torch.atan(A)", 'tide.atan(A)'),
    (T, "sinh", "torch.sinh(A)", 'tide.sinh(A)'),
    (T, "cosh", "torch.cosh(A)", 'tide.cosh(A)'),
    (T, "tanh", "torch.tanh(A)", 'tide.tanh(A)'),
    (T, "sigmoid", "torch.sigmoid(A)", 'tide.sigmoid(A)'),
    (T, "erf", "torch.erf(A)", 'tide.erf(A)'),
    (T, "floor", "torch.floor(A)", 'tide.floor(A)'),
    (T, "ceil", "torch.ceil(A)", 'tide.ceil(A)'),
    (T, "round", "torch.round(A)", 'tide.round(A)'),
    (T, "trunc", "torch.trunc(A)", 'tide.trunc(A)'),
    (T, "frac", "torch.frac(A)", 'tide.frac(A)'),
    (T, "sign", "torch.sign(A)", 'tide.sign(A)'),
    (T, "reciprocal", "torch.reciprocal(A)", 'tide.reciprocal(A)'),
    (T, "square", "torch.square(A)", 'tide.square(A)'),
    (T, "add", "torch.add(A, B, alpha=2)", 'tide.add(A, B, {alpha = 2})'),
    (T, "sub", "torch.sub(A, B)", 'tide.sub(A, B)'),
    (T, "mul", "torch.mul(A, B)", 'tide.mul(A, B)'),
    (T, "div", "torch.div(A, P)", 'tide.div(A, P)'),
    (T, "pow", "torch.pow(P, B)", 'tide.pow(P, B)'),
    (T, "remainder", "torch.remainder(A, 0.75)", 'tide.remainder(A, 0.75)'),
    (T, "fmod", "torch.fmod(A, 0.75)", 'tide.fmod(A, 0.75)'),
    (T, "floor_divide", "torch.floor_divide(A, P)", 'tide.floor_divide(A, P)'),
    (T, "maximum", "torch.maximum(A, B)", 'tide.maximum(A, B)'),
    (T, "minimum", "torch.minimum(A, B)", 'tide.minimum(A, B)'),
    (T, "atan2", "torch.atan2(A, B)", 'tide.atan2(A, B)'),
    (T, "hypot", "torch.hypot(A, B)", 'tide.hypot(A, B)'),
    (T, "lerp", "torch.lerp(A, B, 0.25)", 'tide.lerp(A, B, 0.25)'),
    (T, "logaddexp", "torch.logaddexp(A, B)", 'tide.logaddexp(A, B)'),
    (T, "xlogy", "torch.xlogy(A, P)", 'tide.xlogy(A, P)'),
    (T, "clamp", "torch.clamp(A, -1, 1)", 'tide.clamp(A, -1, 1)'),
    (T, "clip", "torch.clip(A, -1, 1)", 'tide.clip(A, -1, 1)'),
    (T, "clamp_min", "torch.clamp_min(A, 0.5)", 'tide.clamp_min(A, 0.5)'),
    (T, "addcmul", "torch.addcmul(A, B, P, value=0.5)", 'tide.addcmul(A, B, P, {value = 0.5})'),
    (T, "addcdiv", "torch.addcdiv(A, B, P, value=0.5)", 'tide.addcdiv(A, B, P, {value = 0.5})'),
    (T, "nan_to_num", "torch.nan_to_num(torch.log(A), neginf=-7.0, nan=0.5)",
     'tide.nan_to_num(tide.log(A), {neginf = -7, nan = 0.5})'),
    (T, "where", "torch.where(K, A, B[0])", 'tide.where(K, A, B[1])'),
    # ---- comparisons and tests
    (T, "eq", "torch.eq(A, B)", 'tide.eq(A, B)'),
    (T, "ne", "torch.ne(A, B)", 'tide.ne(A, B)'),
    (T, "lt", "torch.lt(A, B)", 'tide.lt(A, B)'),
    (T, "le", "torch.le(A, B)", 'tide.le(A, B)'),
    (T, "gt", "torch.gt(A, B)", 'tide.gt(A, B)'),
    (T, "ge", "torch.ge(A, B)", 'tide.ge(A, B)'),
    (T, "equal", "torch.equal(A, A.clone())", 'tide.equal(A, A:clone())'),
    (T, "allclose", "torch.allclose(A, A + 1e-10)", 'tide.allclose(A, A + 1e-10)'),
    (T, "isclose", "torch.isclose(A, A + 1e-3 * B)", 'tide.isclose(A, A + 1e-3 * B)'),
    (T, "isnan", "torch.isnan(torch.log(A))", 'tide.isnan(tide.log(A))'),
    (T, "isinf", "torch.isinf(1 / torch.trunc(A))", 'tide.isinf(1 / tide.trunc(A))'),
    (T, "isfinite", "torch.isfinite(torch.log(A))", 'tide.isfinite(tide.log(A))'),
    (T, "logical_and", "torch.logical_and(K, A > 0)", 'tide.logical_and(K, A:gt(0))'),
    (T, "logical_or", "torch.logical_or(K, A > 0)", 'tide.logical_or(K, A:gt(0))'),
    (T, "logical_not", "torch.logical_not(K)", 'tide.logical_not(K)'),
    (T, "logical_xor", "torch.logical_xor(K, A > 0)", 'tide.logical_xor(K, A:gt(0))'),
    # ---- reductions
    (T, "sum", "torch.sum(A, 1)", 'tide.sum(A, 2)'),
    (T, "mean", "torch.mean(A, 0, keepdim=True)", 'tide.mean(A, 1, true)'),
    (T, "prod", "torch.prod(A, 1)", 'tide.prod(A, 2)'),
    (T, "max", "(lambda r: (r.values, r.indices + 1))(torch.max(A, 1))", 'tide.max(A, 2)'),
    (T, "min", "(lambda r: (r.values, r.indices + 1))(torch.min(A, 0))", 'tide.min(A, 1)'),
    (T, "amax", "torch.amax(A, 1)", 'tide.amax(A, 2)'),
    (T, "amin", "torch.amin(A, 0)", 'tide.amin(A, 1)'),
    (T, "argmax", "torch.argmax(A, 1) + 1", 'tide.argmax(A, 2)'),
    (T, "argmin", "torch.argmin(A, 0) + 1", 'tide.argmin(A, 1)'),
    (T, "var", "torch.var(A, 1)", 'tide.var(A, 2)'),
    (T, "std", "torch.std(A, 0, unbiased=False)", 'tide.std(A, 1, {correction = 0})'),
    (T, "var_mean", "torch.var_mean(A, 1)", 'tide.var_mean(A, 2)'),
    (T, "std_mean", "torch.std_mean(A, 1)", 'tide.std_mean(A, 2)'),
    (T, "median", "(lambda r: (r.values, r.indices + 1))(torch.median(A, 1))", 'tide.median(A, 2)'),
    (T, "quantile", "torch.quantile(A, 0.3, dim=1)", 'tide.quantile(A, 0.3, 2)'),
    (T, "norm", "torch.norm(A, dim=1)", 'tide.norm(A, 2, 2)'),
    (T, "logsumexp", "torch.logsumexp(A, 1)", 'tide.logsumexp(A, 2)'),
    (T, "all", "torch.all(K, 1)", 'tide.all(K, 2)'),
    (T, "any", "torch.any(K, 0)", 'tide.any(K, 1)'),
    (T, "nansum", "torch.nansum(torch.log(A), 1)", 'tide.nansum(tide.log(A), 2)'),
    (T, "nanmean", "torch.nanmean(torch.log(A), 1)", 'tide.nanmean(tide.log(A), 2)'),
    (T, "count_nonzero", "torch.count_nonzero(torch.trunc(A), 1)", 'tide.count_nonzero(tide.trunc(A), 2)'),
    # ---- scans
    (T, "cumsum", "torch.cumsum(A, 1)", 'tide.cumsum(A, 2)'),
    (T, "cumprod", "torch.cumprod(A, 1)", 'tide.cumprod(A, 2)'),
    (T, "cummax", "(lambda r: (r.values, r.indices + 1))(torch.cummax(A, 1))", 'tide.cummax(A, 2)'),
    (T, "cummin", "(lambda r: (r.values, r.indices + 1))(torch.cummin(A, 0))", 'tide.cummin(A, 1)'),
    (T, "logcumsumexp", "torch.logcumsumexp(A, 1)", 'tide.logcumsumexp(A, 2)'),
    # ---- sorting and searching
    (T, "sort", "(lambda r: (r.values, r.indices + 1))(torch.sort(A, 1, descending=True))",
     'tide.sort(A, 2, true)'),
    (T, "argsort", "torch.argsort(A, 0) + 1", 'tide.argsort(A, 1)'),
    (T, "topk", "(lambda r: (r.values, r.indices + 1))(torch.topk(A, 2, 1))", 'tide.topk(A, 2, 2)'),
    (T, "unique", "torch.unique(I, return_counts=True)", 'tide.unique(I, {return_counts = true})'),
    (T, "nonzero", "torch.nonzero(K) + 1", 'tide.nonzero(K)'),
    (T, "searchsorted", "torch.searchsorted(torch.tensor([0.5, 1.0, 2.0, 3.0]), W) + 1",
     'tide.searchsorted(tide.tensor({0.5, 1.0, 2.0, 3.0}, {dtype = "float64"}), W)'),
    (T, "bincount", "torch.bincount(C)", 'tide.bincount(C)'),
    (T, "histc", "torch.histc(A, bins=4, min=-3, max=4)", 'tide.histc(A, {bins = 4, min = -3, max = 4})'),
    # ---- linear algebra
    (T, "matmul", "torch.matmul(A, M)", 'tide.matmul(A, M)'),
    (T, "mm", "torch.mm(A, M)", 'tide.mm(A, M)'),
    (T, "bmm", "torch.bmm(A3, A3.transpose(1, 2))", 'tide.bmm(A3, A3:transpose(2, 3))'),
    (T, "mv", "torch.mv(A, V)", 'tide.mv(A, V)'),
    (T, "dot", "torch.dot(V, V)", 'tide.dot(V, V)'),
    (T, "addmm", "torch.addmm(W.reshape(3, 1), A, M, beta=0.5, alpha=2)",
     'tide.addmm(W:reshape(3, 1), A, M, {beta = 0.5, alpha = 2})'),
    (T, "baddbmm", "torch.baddbmm(torch.ones(2, 3, 3), A3, A3.transpose(1, 2), alpha=0.5)",
     'tide.baddbmm(tide.ones(2, 3, 3, {dtype = "float64"}), A3, A3:transpose(2, 3), {alpha = 0.5})'),
    (T, "outer", "torch.outer(W, V)", 'tide.outer(W, V)'),
    (T, "cross", "torch.cross(S, S.flip(1), dim=1)", 'tide.cross(S, S:flip(2), 2)'),
    (T, "diag", "torch.diag(S, 1)", 'tide.diag(S, 1)'),
    (T, "diagonal", "torch.diagonal(A3, 0, 1, 2)", 'tide.diagonal(A3, 0, 2, 3)'),
    (T, "trace", "torch.trace(S)", 'tide.trace(S)'),
    (T, "kron", "torch.kron(S[:2, :2], M[:2])", 'tide.kron(S:narrow(1, 1, 2):narrow(2, 1, 2), M:narrow(1, 1, 2))'),
    (T, "tensordot", "torch.tensordot(A3, A, dims=([1, 2], [0, 1]))", 'tide.tensordot(A3, A, {{2, 3}, {1, 2}})'),
    (T, "cdist", "torch.cdist(A, B)", 'tide.cdist(A, B)'),
    (T, "block_diag", "torch.block_diag(S, M)", 'tide.block_diag(S, M)'),
    (T, "einsum", "torch.einsum('bij,bkj->bik', A3, A3)", 'tide.einsum("bij,bkj->bik", A3, A3)'),
    # ---- shapes
    (T, "reshape", "torch.reshape(A, (4, 3))", 'tide.reshape(A, 4, 3)'),
    (T, "flatten", "torch.flatten(A3, 1)", 'tide.flatten(A3, 2)'),
    (T, "squeeze", "torch.squeeze(A.reshape(3, 1, 4), 1)", 'tide.squeeze(A:reshape(3, 1, 4), 2)'),
    (T, "unsqueeze", "torch.unsqueeze(V, 0)", 'tide.unsqueeze(V, 1)'),
    (T, "transpose", "torch.transpose(A3, 0, 2)", 'tide.transpose(A3, 1, 3)'),
    (T, "t", "torch.t(A)", 'tide.t(A)'),
    (T, "permute", "torch.permute(A3, (2, 0, 1))", 'tide.permute(A3, {3, 1, 2})'),
    (T, "cat", "torch.cat([A, B], 1)", 'tide.cat({A, B}, 2)'),
    (T, "concat", "torch.concat([A, B], 0)", 'tide.concat({A, B}, 1)'),
    (T, "stack", "torch.stack([A, B], 1)", 'tide.stack({A, B}, 2)'),
    (T, "split", "torch.split(A, [1, 3], 1)", 'tide.split(A, {1, 3}, 2)'),
    (T, "chunk", "torch.chunk(A, 2, 1)", 'tide.chunk(A, 2, 2)'),
    (T, "narrow", "torch.narrow(A, 1, 1, 2)", 'tide.narrow(A, 2, 2, 2)'),
    (T, "flip", "torch.flip(A, [0])", 'tide.flip(A, {1})'),
    (T, "tril", "torch.tril(A)", 'tide.tril(A)'),
    (T, "triu", "torch.triu(A, 1)", 'tide.triu(A, 1)'),
    (T, "tile", "torch.tile(W, (2, 2))", 'tide.tile(W, {2, 2})'),
    (T, "roll", "torch.roll(A, 1, 1)", 'tide.roll(A, 1, 2)'),
    (T, "repeat_interleave", "torch.repeat_interleave(W, 2)", 'tide.repeat_interleave(W, 2)'),
    (T, "unbind", "torch.unbind(A, 1)", 'tide.unbind(A, 2)'),
    (T, "movedim", "torch.movedim(A3, 0, 2)", 'tide.movedim(A3, 1, 3)'),
    (T, "swapaxes", "torch.swapaxes(A3, 0, 1)", 'tide.swapaxes(A3, 1, 2)'),
    (T, "broadcast_to", "torch.broadcast_to(V, (2, 4))", 'tide.broadcast_to(V, {2, 4})'),
    (T, "vstack", "torch.vstack([V, V])", 'tide.vstack({V, V})'),
    (T, "hstack", "torch.hstack([A, B])", 'tide.hstack({A, B})'),
    (T, "dstack", "torch.dstack([A, B])", 'tide.dstack({A, B})'),
    (T, "column_stack", "torch.column_stack([W, A])", 'tide.column_stack({W, A})'),
    (T, "tensor_split", "torch.tensor_split(V, 3)", 'tide.tensor_split(V, 3)'),
    (T, "split_with_sizes", "A.split_with_sizes([2, 2], 1)", 'A:split_with_sizes({2, 2}, 2)'),
    (T, "unflatten", "torch.unflatten(A, 1, (2, 2))", 'tide.unflatten(A, 2, {2, 2})'),
    (T, "rot90", "torch.rot90(A, 1, [0, 1])", 'tide.rot90(A, 1, {1, 2})'),
    (T, "fliplr", "torch.fliplr(A)", 'tide.fliplr(A)'),
    (T, "flipud", "torch.flipud(A)", 'tide.flipud(A)'),
    (T, "meshgrid", "torch.meshgrid(W, V, indexing='ij')", 'tide.meshgrid(W, V, {indexing = "ij"})'),
    (T, "cartesian_prod", "torch.cartesian_prod(W, V[:2])", 'tide.cartesian_prod(W, V:narrow(1, 1, 2))'),
    (T, "atleast_2d", "torch.atleast_2d(V)", 'tide.atleast_2d(V)'),
    # ---- indexing
    (T, "gather", "torch.gather(A, 1, I)", 'tide.gather(A, 2, I + 1)'),
    (T, "scatter", "torch.scatter(torch.zeros(3, 4), 1, I[:, :2], B[:, :2])",
     'tide.scatter(tide.zeros(3, 4, {dtype = "float64"}), 2, I:narrow(2, 1, 2) + 1, B:narrow(2, 1, 2))'),
    (T, "scatter_add", "torch.scatter_add(torch.zeros(3, 4), 1, I, B)",
     'tide.scatter_add(tide.zeros(3, 4, {dtype = "float64"}), 2, I + 1, B)'),
    (T, "index_select", "torch.index_select(A, 1, J)", 'tide.index_select(A, 2, J + 1)'),
    (T, "masked_select", "torch.masked_select(A, K)", 'tide.masked_select(A, K)'),
    (T, "masked_fill", "A.masked_fill(K, -9.0)", 'tide.masked_fill(A, K, -9)'),
    (T, "take", "torch.take(A, J)", 'tide.take(A, J + 1)'),
    (T, "index_add", "torch.index_add(A, 0, J, B, alpha=2)", 'tide.index_add(A, 1, J + 1, B, {alpha = 2})'),
    (T, "index_copy", "torch.index_copy(A, 0, J, B)", 'tide.index_copy(A, 1, J + 1, B)'),
    (T, "index_fill", "torch.index_fill(A, 1, J[:2], -1.0)", 'tide.index_fill(A, 2, J:narrow(1, 1, 2) + 1, -1)'),
    # ---- autograd and misc
    (T, "clone", "torch.clone(A)", 'tide.clone(A)'),
    (T, "detach", "torch.detach(A)", 'tide.detach(A)'),
    (T, "numel", "torch.numel(A3)", 'tide.numel(A3)'),
    (T, "is_tensor", "torch.is_tensor(A)", 'tide.is_tensor(A)'),
    (T, "is_floating_point", "torch.is_floating_point(I)", 'tide.is_floating_point(I)'),
    (T, "no_grad", "A * 2", 'tide.no_grad(function() return A * 2 end)'),
    (T, "set_grad_enabled", "torch.is_grad_enabled()", 'tide.set_grad_enabled(true); return tide.is_grad_enabled()'),
    (T, "softmax", "torch.softmax(A, 1)", 'tide.softmax(A, 2)'),
    (T, "log_softmax", "torch.log_softmax(A, 0)", 'tide.log_softmax(A, 1)'),
    (T, "relu", "torch.relu(A)", 'tide.relu(A)'),
    (T, "dropout", "torch.dropout(A, 0.5, False)", 'tide.dropout(A, 0.5, false)'),
    (T, "one_hot", "F.one_hot(J, 4)", 'tide.one_hot(J + 1, 4)'),
    (T, "embedding", "F.embedding(J, S)", 'tide.embedding(J + 1, S)'),
    # ---- torch.nn.functional
    (FN, "relu", "F.relu(A)", 'F.relu(A)'),
    (FN, "relu6", "F.relu6(A * 3)", 'F.relu6(A * 3)'),
    (FN, "elu", "F.elu(A, 0.5)", 'F.elu(A, 0.5)'),
    (FN, "selu", "F.selu(A)", 'F.selu(A)'),
    (FN, "celu", "F.celu(A, 0.5)", 'F.celu(A, 0.5)'),
    (FN, "leaky_relu", "F.leaky_relu(A, 0.1)", 'F.leaky_relu(A, 0.1)'),
    (FN, "gelu", "F.gelu(A)", 'F.gelu(A)'),
    (FN, "silu", "F.silu(A)", 'F.silu(A)'),
    (FN, "mish", "F.mish(A)", 'F.mish(A)'),
    (FN, "softplus", "F.softplus(A, 2)", 'F.softplus(A, 2)'),
    (FN, "softsign", "F.softsign(A)", 'F.softsign(A)'),
    (FN, "hardtanh", "F.hardtanh(A, -0.5, 1.5)", 'F.hardtanh(A, -0.5, 1.5)'),
    (FN, "hardswish", "F.hardswish(A)", 'F.hardswish(A)'),
    (FN, "hardsigmoid", "F.hardsigmoid(A)", 'F.hardsigmoid(A)'),
    (FN, "sigmoid", "F.sigmoid(A)", 'F.sigmoid(A)'),
    (FN, "tanh", "F.tanh(A)", 'F.tanh(A)'),
    (FN, "glu", "F.glu(A, 1)", 'F.glu(A, 2)'),
    (FN, "logsigmoid", "F.logsigmoid(A)", 'F.logsigmoid(A)'),
    (FN, "softmax", "F.softmax(A, 1)", 'F.softmax(A, 2)'),
    (FN, "log_softmax", "F.log_softmax(A, 1)", 'F.log_softmax(A, 2)'),
    (FN, "linear", "F.linear(A, M.t(), W[:2])", 'F.linear(A, M:t(), W:narrow(1, 1, 2))'),
    (FN, "bilinear", "F.bilinear(A, B, torch.ones(2, 4, 4) * 0.1)",
     'F.bilinear(A, B, tide.ones(2, 4, 4, {dtype = "float64"}) * 0.1)'),
    (FN, "conv1d", "F.conv1d(X3, torch.ones(2, 3, 2) * 0.5, padding=1)",
     'F.conv1d(X3, tide.ones(2, 3, 2, {dtype = "float64"}) * 0.5, nil, {padding = 1})'),
    (FN, "conv2d", "F.conv2d(X4, torch.ones(3, 2, 2, 2) * 0.25, stride=2)",
     'F.conv2d(X4, tide.ones(3, 2, 2, 2, {dtype = "float64"}) * 0.25, nil, {stride = 2})'),
    (FN, "conv3d", "F.conv3d(X4.unsqueeze(1), torch.ones(2, 1, 2, 2, 2) * 0.25)",
     'F.conv3d(X4:unsqueeze(2), tide.ones(2, 1, 2, 2, 2, {dtype = "float64"}) * 0.25)'),
    (FN, "conv_transpose1d", "F.conv_transpose1d(X3, torch.ones(3, 2, 2) * 0.5, stride=2)",
     'F.conv_transpose1d(X3, tide.ones(3, 2, 2, {dtype = "float64"}) * 0.5, nil, {stride = 2})'),
    (FN, "conv_transpose2d", "F.conv_transpose2d(X4, torch.ones(2, 1, 3, 3) * 0.5, padding=1)",
     'F.conv_transpose2d(X4, tide.ones(2, 1, 3, 3, {dtype = "float64"}) * 0.5, nil, {padding = 1})'),
    (FN, "max_pool1d", "F.max_pool1d(X3, 2)", 'F.max_pool1d(X3, 2)'),
    (FN, "max_pool2d", "F.max_pool2d(X4, 2)", 'F.max_pool2d(X4, 2)'),
    (FN, "max_pool3d", "F.max_pool3d(X4.unsqueeze(1), 2)", 'F.max_pool3d(X4:unsqueeze(2), 2)'),
    (FN, "avg_pool1d", "F.avg_pool1d(X3, 2)", 'F.avg_pool1d(X3, 2)'),
    (FN, "avg_pool2d", "F.avg_pool2d(X4, 2)", 'F.avg_pool2d(X4, 2)'),
    (FN, "avg_pool3d", "F.avg_pool3d(X4.unsqueeze(1), 2)", 'F.avg_pool3d(X4:unsqueeze(2), 2)'),
    (FN, "adaptive_avg_pool1d", "F.adaptive_avg_pool1d(X3, 2)", 'F.adaptive_avg_pool1d(X3, 2)'),
    (FN, "adaptive_avg_pool2d", "F.adaptive_avg_pool2d(X4, 2)", 'F.adaptive_avg_pool2d(X4, 2)'),
    (FN, "adaptive_max_pool2d", "F.adaptive_max_pool2d(X4, 3)", 'F.adaptive_max_pool2d(X4, 3)'),
    (FN, "dropout", "F.dropout(A, 0.5, training=False)", 'F.dropout(A, 0.5, false)'),
    (FN, "dropout2d", "F.dropout2d(X4, 0.5, training=False)", 'F.dropout2d(X4, 0.5, false)'),
    (FN, "embedding", "F.embedding(J, S)", 'F.embedding(J + 1, S)'),
    (FN, "one_hot", "F.one_hot(J, 3)", 'F.one_hot(J + 1, 3)'),
    (FN, "pad", "F.pad(X4, (1, 1, 2, 0), mode='reflect')", 'F.pad(X4, {1, 1, 2, 0}, "reflect")'),
    (FN, "interpolate", "F.interpolate(X4, scale_factor=2, mode='bilinear', align_corners=False)",
     'F.interpolate(X4, {scale_factor = 2, mode = "bilinear", align_corners = false})'),
    (FN, "pixel_shuffle", "F.pixel_shuffle(X4.reshape(1, 4, 4, 4), 2)", 'F.pixel_shuffle(X4:reshape(1, 4, 4, 4), 2)'),
    (FN, "grid_sample", "F.grid_sample(X4, U.reshape(2, 1, 3, 2) * 1.2, align_corners=False)",
     'F.grid_sample(X4, U:reshape(2, 1, 3, 2) * 1.2, {align_corners = false})'),
    (FN, "unfold", "F.unfold(X4, 2, stride=2)", 'F.unfold(X4, 2, {stride = 2})'),
    (FN, "fold", "F.fold(F.unfold(X4, 2), (4, 4), 2)", 'F.fold(F.unfold(X4, 2), {4, 4}, 2)'),
    (FN, "batch_norm", "F.batch_norm(A, torch.zeros(4), torch.ones(4), training=True)",
     'F.batch_norm(A, tide.zeros(4, {dtype = "float64"}), tide.ones(4, {dtype = "float64"}), nil, nil, true)'),
    (FN, "layer_norm", "F.layer_norm(A, (4,))", 'F.layer_norm(A, {4})'),
    (FN, "group_norm", "F.group_norm(X4, 2)", 'F.group_norm(X4, 2)'),
    (FN, "instance_norm", "F.instance_norm(X4)", 'F.instance_norm(X4)'),
    (FN, "normalize", "F.normalize(A, dim=1)", 'F.normalize(A, {dim = 2})'),
    (FN, "cosine_similarity", "F.cosine_similarity(A, B)", 'F.cosine_similarity(A, B)'),
    (FN, "pairwise_distance", "F.pairwise_distance(A, B)", 'F.pairwise_distance(A, B)'),
    (FN, "cross_entropy", "F.cross_entropy(A, J.clamp(max=2))", 'F.cross_entropy(A, J:clamp(nil, 2) + 1)'),
    (FN, "nll_loss", "F.nll_loss(A, J)", 'F.nll_loss(A, J + 1)'),
    (FN, "mse_loss", "F.mse_loss(A, B)", 'F.mse_loss(A, B)'),
    (FN, "l1_loss", "F.l1_loss(A, B)", 'F.l1_loss(A, B)'),
    (FN, "smooth_l1_loss", "F.smooth_l1_loss(A, B, beta=0.5)", 'F.smooth_l1_loss(A, B, {beta = 0.5})'),
    (FN, "huber_loss", "F.huber_loss(A, B, delta=0.5)", 'F.huber_loss(A, B, {delta = 0.5})'),
    (FN, "binary_cross_entropy", "F.binary_cross_entropy(torch.sigmoid(A), torch.sigmoid(B))",
     'F.binary_cross_entropy(tide.sigmoid(A), tide.sigmoid(B))'),
    (FN, "binary_cross_entropy_with_logits", "F.binary_cross_entropy_with_logits(A, torch.sigmoid(B))",
     'F.binary_cross_entropy_with_logits(A, tide.sigmoid(B))'),
    (FN, "kl_div", "F.kl_div(F.log_softmax(A, 1), F.softmax(B, 1), reduction='batchmean')",
     'F.kl_div(F.log_softmax(A, 2), F.softmax(B, 2), {reduction = "batchmean"})'),
    (FN, "margin_ranking_loss", "F.margin_ranking_loss(V, V.flip(0), torch.tensor([1.0, -1.0, 1.0, -1.0]), margin=0.5)",
     'F.margin_ranking_loss(V, V:flip({1}), tide.tensor({1.0, -1.0, 1.0, -1.0}, {dtype = "float64"}), {margin = 0.5})'),
    (FN, "hinge_embedding_loss", "F.hinge_embedding_loss(P, torch.sign(A))", 'F.hinge_embedding_loss(P, tide.sign(A))'),
    (FN, "soft_margin_loss", "F.soft_margin_loss(A, torch.sign(B))", 'F.soft_margin_loss(A, tide.sign(B))'),
    (FN, "multi_margin_loss", "F.multi_margin_loss(A, J)", 'F.multi_margin_loss(A, J + 1)'),
    (FN, "cosine_embedding_loss", "F.cosine_embedding_loss(A, B, torch.tensor([1.0, -1.0, 1.0]))",
     'F.cosine_embedding_loss(A, B, tide.tensor({1.0, -1.0, 1.0}, {dtype = "float64"}))'),
    (FN, "triplet_margin_loss", "F.triplet_margin_loss(A, B, P)", 'F.triplet_margin_loss(A, B, P)'),
    (FN, "ctc_loss", "F.ctc_loss(F.log_softmax(A3.permute(1, 0, 2), 2), torch.tensor([[1, 2], [3, 3]]), torch.tensor([3, 3]), torch.tensor([2, 2]))",
     'F.ctc_loss(F.log_softmax(A3:permute({2, 1, 3}), 3), tide.tensor({{2, 3}, {4, 4}}), tide.tensor({3, 3}), tide.tensor({2, 2}))'),
    (FN, "scaled_dot_product_attention", "sdpa(A3, A3, A3, causal=True)",
     'F.scaled_dot_product_attention(A3, A3, A3, {is_causal = true})'),
    # ---- torch.nn modules (parameters filled by fill(): 0.5 sin(i + k) for the k-th by name)
    (NN, "Linear", "fill(nn.Linear(4, 2))(A)", 'fill(nn.Linear(4, 2))(A)'),
    (NN, "Bilinear", "fill(nn.Bilinear(4, 4, 2))(A, B)", 'fill(nn.Bilinear(4, 4, 2))(A, B)'),
    (NN, "Identity", "nn.Identity()(A)", 'nn.Identity()(A)'),
    (NN, "Conv1d", "fill(nn.Conv1d(3, 2, 2))(X3)", 'fill(nn.Conv1d(3, 2, 2))(X3)'),
    (NN, "Conv2d", "fill(nn.Conv2d(2, 3, 3, padding=1))(X4)", 'fill(nn.Conv2d(2, 3, 3, {padding = 1}))(X4)'),
    (NN, "Conv3d", "fill(nn.Conv3d(1, 2, 2))(X4.unsqueeze(1))", 'fill(nn.Conv3d(1, 2, 2))(X4:unsqueeze(2))'),
    (NN, "ConvTranspose1d", "fill(nn.ConvTranspose1d(3, 2, 2))(X3)", 'fill(nn.ConvTranspose1d(3, 2, 2))(X3)'),
    (NN, "ConvTranspose2d", "fill(nn.ConvTranspose2d(2, 1, 2, stride=2))(X4)", 'fill(nn.ConvTranspose2d(2, 1, 2, {stride = 2}))(X4)'),
    (NN, "MaxPool1d", "nn.MaxPool1d(2)(X3)", 'nn.MaxPool1d(2)(X3)'),
    (NN, "MaxPool2d", "nn.MaxPool2d(2)(X4)", 'nn.MaxPool2d(2)(X4)'),
    (NN, "AvgPool2d", "nn.AvgPool2d(2)(X4)", 'nn.AvgPool2d(2)(X4)'),
    (NN, "AdaptiveAvgPool2d", "nn.AdaptiveAvgPool2d(1)(X4)", 'nn.AdaptiveAvgPool2d(1)(X4)'),
    (NN, "BatchNorm1d", "fill(nn.BatchNorm1d(4))(A)", 'fill(nn.BatchNorm1d(4))(A)'),
    (NN, "BatchNorm2d", "fill(nn.BatchNorm2d(2))(X4)", 'fill(nn.BatchNorm2d(2))(X4)'),
    (NN, "LayerNorm", "fill(nn.LayerNorm(4))(A)", 'fill(nn.LayerNorm(4))(A)'),
    (NN, "GroupNorm", "fill(nn.GroupNorm(1, 2))(X4)", 'fill(nn.GroupNorm(1, 2))(X4)'),
    (NN, "InstanceNorm2d", "nn.InstanceNorm2d(2)(X4)", 'nn.InstanceNorm2d(2)(X4)'),
    (NN, "Dropout", "nn.Dropout(0.5).eval()(A)", 'nn.Dropout(0.5):eval()(A)'),
    (NN, "Dropout2d", "nn.Dropout2d(0.5).eval()(X4)", 'nn.Dropout2d(0.5):eval()(X4)'),
    (NN, "Embedding", "fill(nn.Embedding(5, 2))(J)", 'fill(nn.Embedding(5, 2))(J + 1)'),
    (NN, "EmbeddingBag", "fill(nn.EmbeddingBag(5, 2, mode='mean'))(I)", 'fill(nn.EmbeddingBag(5, 2, {mode = "mean"}))(I + 1)'),
    (NN, "ReLU", "nn.ReLU()(A)", 'nn.ReLU()(A)'),
    (NN, "ReLU6", "nn.ReLU6()(A * 3)", 'nn.ReLU6()(A * 3)'),
    (NN, "LeakyReLU", "nn.LeakyReLU(0.2)(A)", 'nn.LeakyReLU(0.2)(A)'),
    (NN, "ELU", "nn.ELU()(A)", 'nn.ELU()(A)'),
    (NN, "GELU", "nn.GELU()(A)", 'nn.GELU()(A)'),
    (NN, "SiLU", "nn.SiLU()(A)", 'nn.SiLU()(A)'),
    (NN, "Mish", "nn.Mish()(A)", 'nn.Mish()(A)'),
    (NN, "Sigmoid", "nn.Sigmoid()(A)", 'nn.Sigmoid()(A)'),
    (NN, "Tanh", "nn.Tanh()(A)", 'nn.Tanh()(A)'),
    (NN, "Softplus", "nn.Softplus()(A)", 'nn.Softplus()(A)'),
    (NN, "Softmax", "nn.Softmax(1)(A)", 'nn.Softmax(2)(A)'),
    (NN, "LogSoftmax", "nn.LogSoftmax(1)(A)", 'nn.LogSoftmax(2)(A)'),
    (NN, "Flatten", "nn.Flatten()(X4)", 'nn.Flatten()(X4)'),
    (NN, "Unflatten", "nn.Unflatten(1, (2, 2))(A)", 'nn.Unflatten(2, {2, 2})(A)'),
    (NN, "Sequential", "fill(nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2)))(A)",
     'fill(nn.Sequential(nn.Linear(4, 3), nn.Tanh(), nn.Linear(3, 2)))(A)'),
    (NN, "ModuleList", "fill(nn.ModuleList([nn.Linear(4, 2)]))[0](A)", 'fill(nn.ModuleList({nn.Linear(4, 2)}))[1](A)'),
    (NN, "ModuleDict", "fill(nn.ModuleDict({'f': nn.Linear(4, 2)}))['f'](A)", 'fill(nn.ModuleDict({f = nn.Linear(4, 2)}))["f"](A)'),
    (NN, "MSELoss", "nn.MSELoss()(A, B)", 'nn.MSELoss()(A, B)'),
    (NN, "L1Loss", "nn.L1Loss(reduction='sum')(A, B)", 'nn.L1Loss({reduction = "sum"})(A, B)'),
    (NN, "SmoothL1Loss", "nn.SmoothL1Loss()(A, B)", 'nn.SmoothL1Loss()(A, B)'),
    (NN, "CrossEntropyLoss", "nn.CrossEntropyLoss()(A, J)", 'nn.CrossEntropyLoss()(A, J + 1)'),
    (NN, "NLLLoss", "nn.NLLLoss()(A, J)", 'nn.NLLLoss()(A, J + 1)'),
    (NN, "BCELoss", "nn.BCELoss()(torch.sigmoid(A), torch.sigmoid(B))", 'nn.BCELoss()(tide.sigmoid(A), tide.sigmoid(B))'),
    (NN, "BCEWithLogitsLoss", "nn.BCEWithLogitsLoss()(A, torch.sigmoid(B))", 'nn.BCEWithLogitsLoss()(A, tide.sigmoid(B))'),
    (NN, "RNN", "fill(nn.RNN(4, 3, batch_first=True))(A3)", 'fill(nn.RNN(4, 3, {batch_first = true}))(A3)'),
    (NN, "LSTM", "fill(nn.LSTM(4, 3, batch_first=True))(A3)", 'fill(nn.LSTM(4, 3, {batch_first = true}))(A3)'),
    (NN, "GRU", "fill(nn.GRU(4, 3, batch_first=True))(A3)", 'fill(nn.GRU(4, 3, {batch_first = true}))(A3)'),
    (NN, "MultiheadAttention", "fill(nn.MultiheadAttention(4, 2, batch_first=True))(A3, A3, A3, need_weights=False)[0]",
     'fill(nn.MultiheadAttention(4, 2, {batch_first = true}))(A3, A3, A3, {need_weights = false})'),
    (NN, "TransformerEncoderLayer", "fill(nn.TransformerEncoderLayer(4, 2, 8, dropout=0.0, batch_first=True))(A3)",
     'fill(nn.TransformerEncoderLayer(4, 2, {dim_feedforward = 8, dropout = 0, batch_first = true}))(A3)'),
    (NN, "Upsample", "nn.Upsample(scale_factor=2, mode='nearest')(X4)", 'nn.Upsample({scale_factor = 2, mode = "nearest"})(X4)'),
    (NN, "PixelShuffle", "nn.PixelShuffle(2)(X4.reshape(1, 4, 4, 4))", 'nn.PixelShuffle(2)(X4:reshape(1, 4, 4, 4))'),
    (NN, "ZeroPad2d", "nn.ZeroPad2d((1, 0, 2, 1))(X4)", 'nn.ZeroPad2d({1, 0, 2, 1})(X4)'),
    # ---- optimizers: five steps on a fixed function of three parameters
    (OPT, "SGD", "opt_run(lambda p: torch.optim.SGD(p, lr=0.05, momentum=0.9, nesterov=True))",
     'opt_run(function(p) return optim.SGD(p, {lr = 0.05, momentum = 0.9, nesterov = true}) end)'),
    (OPT, "Adam", "opt_run(lambda p: torch.optim.Adam(p, lr=0.1))", 'opt_run(function(p) return optim.Adam(p, {lr = 0.1}) end)'),
    (OPT, "AdamW", "opt_run(lambda p: torch.optim.AdamW(p, lr=0.1, weight_decay=0.1))",
     'opt_run(function(p) return optim.AdamW(p, {lr = 0.1, weight_decay = 0.1}) end)'),
    (OPT, "RMSprop", "opt_run(lambda p: torch.optim.RMSprop(p, lr=0.05, momentum=0.5, centered=True))",
     'opt_run(function(p) return optim.RMSprop(p, {lr = 0.05, momentum = 0.5, centered = true}) end)'),
    (OPT, "Adagrad", "opt_run(lambda p: torch.optim.Adagrad(p, lr=0.3))", 'opt_run(function(p) return optim.Adagrad(p, {lr = 0.3}) end)'),
    (OPT, "Adadelta", "opt_run(lambda p: torch.optim.Adadelta(p, lr=1.0))", 'opt_run(function(p) return optim.Adadelta(p, {lr = 1.0}) end)'),
    (OPT, "Adamax", "opt_run(lambda p: torch.optim.Adamax(p, lr=0.1))", 'opt_run(function(p) return optim.Adamax(p, {lr = 0.1}) end)'),
    (OPT, "NAdam", "opt_run(lambda p: torch.optim.NAdam(p, lr=0.1, foreach=True))", 'opt_run(function(p) return optim.NAdam(p, {lr = 0.1}) end)'),
    (OPT, "RAdam", "opt_run(lambda p: torch.optim.RAdam(p, lr=0.1), steps=8)", 'opt_run(function(p) return optim.RAdam(p, {lr = 0.1}) end, 8)'),
    (OPT, "LBFGS", "opt_run(lambda p: torch.optim.LBFGS(p, lr=0.5, max_iter=4), steps=2, closure_opt=True)",
     'opt_run(function(p) return optim.LBFGS(p, {lr = 0.5, max_iter = 4}) end, 2, true)', "loose"),
]
# fmt: on


def lua_number(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if math.isnan(v):
        return "0/0"
    if math.isinf(v):
        return "math.huge" if v > 0 else "-math.huge"
    return repr(float(v))


def describe(r):
    """PyTorch's result as a Lua literal: {dtype=, shape=, v=} per tensor, a list for tuples."""
    if isinstance(r, (tuple, list)):
        return "{" + ", ".join(describe(x) for x in r) + "}"
    if isinstance(r, torch.Tensor):
        dtype = str(r.dtype).replace("torch.", "")
        vals = r.detach().reshape(-1).tolist()
        shape = ", ".join(str(s) for s in r.shape)
        return '{dtype = "%s", shape = {%s}, v = {%s}}' % (dtype, shape, ", ".join(lua_number(v) for v in vals))
    if isinstance(r, (bool, int, float)):
        return "{scalar = %s}" % lua_number(r)
    if isinstance(r, torch.Size):
        return "{scalar = %d}" % r.numel()
    raise TypeError(f"cannot describe {type(r)}")


def main(path):
    out = ["-- Generated by scripts/gen_api_coverage.py from PyTorch %s; do not edit." % torch.__version__,
           "-- The inputs, then one entry per name: {list, name, lua, mode, expect}.",
           "return {", "  inputs = {"]
    for k, v in INPUTS.items():
        out.append('    %s = {dtype = "float64", v = %s},' % (k, repr(v).replace("[", "{").replace("]", "}")))
    for k, v in INT_INPUTS.items():
        out.append('    %s = {dtype = "int64", v = %s},' % (k, repr(v).replace("[", "{").replace("]", "}")))
    for k, v in BOOL_INPUTS.items():
        out.append('    %s = {dtype = "bool", v = %s},' % (k, repr(v).replace("[", "{").replace("]", "}")
                                                          .replace("True", "true").replace("False", "false")))
    out.append("  },")
    out.append("  entries = {")
    for e in ENTRIES:
        lst, name, py, lua = e[:4]
        mode = e[4] if len(e) > 4 else "value"
        torch.manual_seed(0)
        try:
            result = eval(py, ENV)
        except Exception as exc:
            sys.exit(f"{lst}.{name}: {py}: {exc}")
        out.append("    {%r, %r, %s, %r, %s}," % (lst, name, lua_string(lua), mode, describe(result)))
    out.append("  },")
    out.append("}")
    with open(path, "w") as f:
        f.write("\n".join(out) + "\n")
    print(f"{path}: {len(ENTRIES)} entries")


def lua_string(s):
    return "[==[" + s + "]==]"


if __name__ == "__main__":
    main(sys.argv[1])
