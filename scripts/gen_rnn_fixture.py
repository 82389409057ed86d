#!/usr/bin/python3
"""gen_rnn_fixture.py — PyTorch's recurrent layers on fixed weights, for tests/lua/test_nn_rnn.lua.

Run with Debian's python3 (torch 1.13):  /usr/bin/python3 scripts/gen_rnn_fixture.py
Writes tests/lua/data/rnn_fixture.lua: for each case its spec (the module's arguments, the
sequence length and batch, lengths), the outputs (output, h_n, c_n) and the gradients of
loss = sum(output * R_out) + sum(h_n * R_h) [+ sum(c_n * R_c)] with respect to every parameter
(by PyTorch's name), the input and the initial states, all flattened row-major, in float64.
Every input, weight and R is det(n, seed) below, which the Lua test computes the same way.
"""
import math
import os

import torch

torch.set_default_dtype(torch.float64)


def det(shape, seed, scale=0.5):
    """Deterministic values sin(1.3 * seed + 0.71 * i) * scale, i = 0.., in row-major order."""
    n = math.prod(shape)
    v = [math.sin(1.3 * seed + 0.71 * i) * scale for i in range(n)]
    return torch.tensor(v, dtype=torch.float64).reshape(shape)


CASES = [
    dict(name="rnn_tanh", mode="RNN", input_size=3, hidden_size=4, num_layers=2,
         bidirectional=True, batch_first=True, T=5, B=3),
    dict(name="rnn_relu_nobias", mode="RNN", input_size=3, hidden_size=4, num_layers=1,
         nonlinearity="relu", bias=False, T=4, B=2, h0=True),
    dict(name="lstm_2l_bidir_lengths", mode="LSTM", input_size=3, hidden_size=3, num_layers=2,
         bidirectional=True, T=5, B=3, lengths=[5, 3, 2], h0=True),
    dict(name="lstm_h0", mode="LSTM", input_size=2, hidden_size=3, num_layers=1, T=4, B=2,
         h0=True),
    dict(name="gru_bidir_lengths_unsorted", mode="GRU", input_size=3, hidden_size=3,
         num_layers=1, bidirectional=True, batch_first=True, T=5, B=3, lengths=[4, 5, 1]),
    dict(name="gru_2l", mode="GRU", input_size=2, hidden_size=4, num_layers=2, T=4, B=2,
         h0=True),
    dict(name="rnncell", mode="RNNCell", input_size=3, hidden_size=4, B=2, h0=True),
    dict(name="lstmcell", mode="LSTMCell", input_size=3, hidden_size=4, B=2, h0=True),
    dict(name="grucell", mode="GRUCell", input_size=3, hidden_size=4, B=2, h0=True),
]

MODULE_ARGS = ("num_layers", "bias", "batch_first", "bidirectional", "nonlinearity")


def build(case):
    kw = {k: case[k] for k in MODULE_ARGS if k in case}
    if case["mode"].endswith("Cell"):
        kw.pop("num_layers", None)
    mod = getattr(torch.nn, case["mode"])(case["input_size"], case["hidden_size"], **kw)
    for k, (_, p) in enumerate(mod.named_parameters()):
        with torch.no_grad():
            p.copy_(det(p.shape, 10 + k))
    return mod


def run_layer(case, mod):
    T, B, H = case["T"], case["B"], case["hidden_size"]
    bf = case.get("batch_first", False)
    dirs = 2 if case.get("bidirectional") else 1
    x = det((B, T, case["input_size"]) if bf else (T, B, case["input_size"]), 1).requires_grad_()
    states = []
    hx = None
    if case.get("h0"):
        shape = (case.get("num_layers", 1) * dirs, B, H)
        states = [det(shape, 2).requires_grad_()]
        if case["mode"] == "LSTM":
            states.append(det(shape, 3).requires_grad_())
        hx = tuple(states) if case["mode"] == "LSTM" else states[0]
    if case.get("lengths"):
        packed = torch.nn.utils.rnn.pack_padded_sequence(x, case["lengths"], batch_first=bf,
                                                         enforce_sorted=False)
        out, hn = mod(packed, hx)
        out, _ = torch.nn.utils.rnn.pad_packed_sequence(out, batch_first=bf, total_length=T)
    else:
        out, hn = mod(x, hx)
    results = {"output": out}
    if case["mode"] == "LSTM":
        results["h_n"], results["c_n"] = hn
    else:
        results["h_n"] = hn
    return x, states, results


def run_cell(case, mod):
    B, H = case["B"], case["hidden_size"]
    x = det((B, case["input_size"]), 1).requires_grad_()
    states = [det((B, H), 2).requires_grad_()]
    if case["mode"] == "LSTMCell":
        states.append(det((B, H), 3).requires_grad_())
        h, c = mod(x, tuple(states))
        return x, states, {"h_n": h, "c_n": c}
    return x, states, {"h_n": mod(x, states[0])}


def flat(t):
    return "{" + ", ".join("%.17g" % v for v in t.detach().reshape(-1).tolist()) + "}"


def lua_value(v):
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"%s"' % v
    if isinstance(v, list):
        return "{" + ", ".join(str(i) for i in v) + "}"
    return str(v)


def case_text(case):
    mod = build(case)
    runner = run_cell if case["mode"].endswith("Cell") else run_layer
    x, states, results = runner(case, mod)
    loss = 0
    for k, (key, t) in enumerate(sorted(results.items())):
        loss = loss + (t * det(t.shape, 20 + k)).sum()  # R in sorted-name order
    loss.backward()
    lines = ["  %s = {" % case["name"]]
    spec = ", ".join("%s = %s" % (k, lua_value(v)) for k, v in case.items() if k != "name")
    lines.append("    spec = {%s}," % spec)
    for key, t in sorted(results.items()):
        lines.append("    %s = %s," % (key, flat(t)))
    lines.append("    grad = {")
    for name, p in mod.named_parameters():
        lines.append("      %s = %s," % (name, flat(p.grad)))
    lines.append("      input = %s," % flat(x.grad))
    for i, s in enumerate(states):
        lines.append("      %s = %s," % (("h_0", "c_0")[i], flat(s.grad)))
    lines.append("    },")
    lines.append("  },")
    return "\n".join(lines)


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    path = os.path.join(here, "..", "tests", "lua", "data", "rnn_fixture.lua")
    body = [
        "-- rnn_fixture.lua — written by scripts/gen_rnn_fixture.py with torch %s; do not edit."
        % torch.__version__,
        "return {",
    ]
    body += [case_text(c) for c in CASES]
    body.append("}")
    with open(path, "w") as f:
        f.write("\n".join(body) + "\n")
    print("wrote", os.path.normpath(path), os.path.getsize(path), "bytes")


if __name__ == "__main__":
    main()
