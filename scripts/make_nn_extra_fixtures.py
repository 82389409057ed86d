#!/usr/bin/python3
"""Known answers for tests/lua/test_nn_extra.lua from PyTorch (Debian's python3-torch 1.13):
each case's inputs, its output and the gradients of sum(output * r) for a random r, in float64,
written as a Lua table to tests/lua/data/nn_extra_fixtures.lua.
Run: /usr/bin/python3 scripts/make_nn_extra_fixtures.py"""
import os
import torch
import torch.nn.functional as F

torch.manual_seed(24)
D = torch.float64


def lua(v):
    if isinstance(v, torch.Tensor):
        v = v.tolist()
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return "{" + ", ".join(lua(x) for x in v) + "}"
    if isinstance(v, float):
        if v == float("inf"):
            return "math.huge"
        if v == float("-inf"):
            return "-math.huge"
        return "%.13g" % v  # 13 digits: far below the tests' 1e-9 tolerances
    return str(v)


cases = {}


def case(name, fn, inputs, grad=None, shift=None):
    """grad: names of the inputs to differentiate. shift: int inputs to store 1-based."""
    grad = grad or []
    ts = {k: (v.clone().requires_grad_(k in grad) if v.is_floating_point() else v)
          for k, v in inputs.items()}
    out = fn(**ts)
    entry = {"inputs": {k: (v + 1 if shift and k in shift else v) for k, v in inputs.items()},
             "out": out.detach()}
    if grad:
        r = torch.randn(out.shape, dtype=D)
        (out * r).sum().backward()
        entry["r"] = r
        entry["grads"] = {k: ts[k].grad for k in grad}
    cases[name] = entry


def randn(*s):
    return torch.randn(*s, dtype=D)


x4 = randn(2, 4, 3, 5)
case("group_norm", lambda x, w, b: F.group_norm(x, 2, w, b, 1e-5),
     {"x": x4, "w": randn(4), "b": randn(4)}, ["x", "w", "b"])
case("instance_norm", lambda x, w, b: F.instance_norm(x, weight=w, bias=b),
     {"x": randn(2, 3, 4, 5), "w": randn(3), "b": randn(3)}, ["x", "w", "b"])
case("normalize", lambda x: F.normalize(x, p=2, dim=1), {"x": randn(3, 4)}, ["x"])
case("cosine_similarity", lambda a, b: F.cosine_similarity(a, b, dim=1),
     {"a": randn(3, 5), "b": randn(3, 5)}, ["a", "b"])
case("pairwise_distance", lambda a, b: F.pairwise_distance(a, b), {"a": randn(3, 5),
     "b": randn(3, 5)}, ["a", "b"])
case("pairwise_distance_p1", lambda a, b: F.pairwise_distance(a, b, p=1), {"a": randn(3, 5),
     "b": randn(3, 5)}, ["a", "b"])
a, t = randn(4, 3) * 2, randn(4, 3)
case("smooth_l1_loss", lambda a, t: F.smooth_l1_loss(a, t, beta=0.7, reduction="none"),
     {"a": a, "t": t}, ["a", "t"])
case("huber_loss", lambda a, t: F.huber_loss(a, t, delta=1.3, reduction="sum"), {"a": a, "t": t},
     ["a", "t"])
p = torch.rand(4, 3, dtype=D) * 0.9 + 0.05
case("bce", lambda p, t, w: F.binary_cross_entropy(p, t, weight=w),
     {"p": p, "t": torch.rand(4, 3, dtype=D), "w": torch.rand(4, 3, dtype=D)}, ["p"])
lp = F.log_softmax(randn(3, 5), 1)
q = F.softmax(randn(3, 5), 1)
case("kl_div", lambda i, t: F.kl_div(i, t, reduction="batchmean"), {"i": lp, "t": q}, ["i", "t"])
case("kl_div_log", lambda i, t: F.kl_div(i, t, reduction="sum", log_target=True),
     {"i": lp, "t": q.log()}, ["i", "t"])
y = torch.tensor([1.0, -1.0, 1.0, -1.0, 1.0], dtype=D)
case("margin_ranking_loss", lambda a, b, y: F.margin_ranking_loss(a, b, y, margin=0.3),
     {"a": randn(5), "b": randn(5), "y": y}, ["a", "b"])
case("hinge_embedding_loss", lambda x, y: F.hinge_embedding_loss(x, y, margin=1.5,
     reduction="none"), {"x": randn(5), "y": y}, ["x"])
case("soft_margin_loss", lambda x, y: F.soft_margin_loss(x, y), {"x": randn(5), "y": y}, ["x"])
case("multi_margin_loss", lambda x, y, w: F.multi_margin_loss(x, y, p=2, margin=0.8, weight=w,
     reduction="none"), {"x": randn(4, 5), "y": torch.tensor([0, 4, 2, 2]), "w": torch.rand(5,
     dtype=D)}, ["x"], shift={"y"})
case("cosine_embedding_loss", lambda a, b, y: F.cosine_embedding_loss(a, b, y, margin=-0.2),
     {"a": randn(5, 3), "b": randn(5, 3), "y": y}, ["a", "b"])
case("triplet_margin_loss", lambda a, p, n: F.triplet_margin_loss(a, p, n, margin=1.0, swap=True),
     {"a": randn(4, 6), "p": randn(4, 6), "n": randn(4, 6)}, ["a", "p", "n"])
T, N, C = 6, 3, 4
# PyTorch's CTC gradient assumes log_probs came from log_softmax (it returns the logits'
# gradient), so the cases differentiate logits x through log_softmax, where both agree.
case("ctc_loss", lambda x, tg, il, tl: F.ctc_loss(F.log_softmax(x, 2), tg, il, tl, blank=0,
     reduction="none"), {"x": randn(T, N, C), "tg": torch.tensor([[1, 2, 2], [3, 1, 0],
     [2, 0, 0]]), "il": torch.tensor([6, 5, 3]), "tl": torch.tensor([3, 2, 1])}, ["x"],
     shift={"tg"})
case("ctc_loss_mean", lambda x, tg, il, tl: F.ctc_loss(F.log_softmax(x, 2), tg, il, tl, blank=2),
     {"x": randn(T, N, C), "tg": torch.tensor([0, 1, 3, 3, 1, 0]),
      "il": torch.tensor([6, 6, 4]), "tl": torch.tensor([2, 3, 1])}, ["x"], shift={"tg"})
case("ctc_loss_inf", lambda x, tg, il, tl: F.ctc_loss(F.log_softmax(x, 2), tg, il, tl,
     reduction="sum", zero_infinity=True), {"x": randn(T, 2, C), "tg": torch.tensor(
     [[1, 1, 1], [1, 2, 3]]), "il": torch.tensor([4, 6]), "tl": torch.tensor([3, 3])}, ["x"],
     shift={"tg"})
case("pixel_shuffle", lambda x: F.pixel_shuffle(x, 2), {"x": randn(1, 8, 2, 3)}, ["x"])
case("pixel_unshuffle", lambda x: F.pixel_unshuffle(x, 2), {"x": randn(1, 2, 4, 6)}, ["x"])
xm = randn(2, 3, 7, 5)
case("adaptive_max_pool2d", lambda x: F.adaptive_max_pool2d(x, (3, 2)), {"x": xm}, ["x"])
cases["adaptive_max_pool2d_indices"] = {"inputs": {"x": xm},
                                        "out": F.adaptive_max_pool2d(xm, (3, 2), True)[1] + 1}
xg = randn(2, 3, 4, 5)
grid = torch.rand(2, 3, 4, 2, dtype=D) * 2.4 - 1.2
for mode in ["bilinear", "nearest", "bicubic"]:
    for pad in ["zeros", "border", "reflection"]:
        for ac in [False, True]:
            g = ["x", "grid"] if mode != "nearest" else ["x"]
            case("grid_sample_%s_%s_%s" % (mode, pad, ac), lambda x, grid, m=mode, p=pad, a=ac:
                 F.grid_sample(x, grid, mode=m, padding_mode=p, align_corners=a),
                 {"x": xg, "grid": grid}, g)
xi = randn(2, 3, 4, 5)
for ac in [False, True]:
    case("interp_bilinear_size_%s" % ac, lambda x, a=ac: F.interpolate(x, size=(7, 3),
         mode="bilinear", align_corners=a), {"x": xi}, ["x"])
    case("interp_bilinear_scale_%s" % ac, lambda x, a=ac: F.interpolate(x, scale_factor=1.7,
         mode="bilinear", align_corners=a), {"x": xi}, ["x"])
    case("interp_linear_%s" % ac, lambda x, a=ac: F.interpolate(x, size=9, mode="linear",
         align_corners=a), {"x": randn(2, 2, 4)}, ["x"])
case("interp_nearest_size", lambda x: F.interpolate(x, size=(7, 3)), {"x": xi}, ["x"])
case("interp_nearest_scale", lambda x: F.interpolate(x, scale_factor=(1.5, 0.5)), {"x": xi}, ["x"])
case("interp_nearest_exact", lambda x: F.interpolate(x, size=(7, 3), mode="nearest-exact"),
     {"x": xi}, ["x"])
case("interp_recompute", lambda x: F.interpolate(x, scale_factor=1.7, mode="bilinear",
     recompute_scale_factor=True), {"x": xi}, ["x"])
case("interp_trilinear", lambda x: F.interpolate(x, size=(3, 4, 2), mode="trilinear"),
     {"x": randn(1, 2, 2, 3, 4)}, ["x"])
xp = randn(2, 3, 4, 5)
for mode in ["reflect", "replicate", "circular"]:
    case("pad_" + mode, lambda x, m=mode: F.pad(x, (2, 3, 1, 2), mode=m), {"x": xp}, ["x"])
case("pad_reflect_1d", lambda x: F.pad(x, (3, 1), mode="reflect"), {"x": randn(2, 2, 5)}, ["x"])
case("bilinear", lambda a, b, w, bias: F.bilinear(a, b, w, bias), {"a": randn(4, 3),
     "b": randn(4, 2), "w": randn(5, 3, 2), "bias": randn(5)}, ["a", "b", "w", "bias"])

out = os.path.join(os.path.dirname(__file__), "..", "tests", "lua", "data",
                   "nn_extra_fixtures.lua")
with open(out, "w") as f:
    f.write("-- Generated by scripts/make_nn_extra_fixtures.py from PyTorch %s (float64); "
            "do not edit.\nreturn {\n" % torch.__version__)
    for name in sorted(cases):
        e = cases[name]
        f.write("  %s = {\n    inputs = {%s},\n    out = %s,\n" % (name, ", ".join(
            "%s = %s" % (k, lua(v)) for k, v in sorted(e["inputs"].items())), lua(e["out"])))
        if "r" in e:
            f.write("    r = %s,\n    grads = {%s},\n" % (lua(e["r"]), ", ".join(
                "%s = %s" % (k, lua(v)) for k, v in sorted(e["grads"].items()))))
        f.write("  },\n")
    f.write("}\n")
print("wrote", out, len(cases), "cases")
