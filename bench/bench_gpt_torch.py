#!/usr/bin/env python3
"""bench_gpt_torch.py — PyTorch's side of bench/bench_gpt.lua: the same GPT (scripts/torch_gpt.py,
the PyTorch twin of tide.models.gpt, at 6 layers, 384 wide, 6 heads, context 256, byte
vocabulary, with nanoGPT's init) and the same training step
(batch 8 x 128 random tokens, cross-entropy, backward, gradient clipping at 1.0, AdamW lr 1e-3,
betas 0.9/0.95, weight decay 0.1 on the matrices only), float32 on the CPU. Attention is
torch.nn.functional.scaled_dot_product_attention with is_causal, PyTorch's fused kernel.

  PYTHON bench/bench_gpt_torch.py ROUNDS THREADS

Runs the step eagerly and with the model under torch.compile (inductor, default mode; the
optimizer step stays eager), alternating round by round after warm-up, and prints
`torch: VERSION`, `threads: N`, `compile_seconds: S` (the compiled model's first two steps) and
`step_eager: MEDIAN s`, `step_compiled: MEDIAN s` (wall clock, medians over ROUNDS).
"""
import os
import statistics
import sys
import time

import torch
from torch.nn import functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scripts"))
from torch_gpt import GPT  # noqa: E402  the PyTorch twin of tide.models.gpt

V, CTX, LAYERS, HEADS, C = 256, 256, 6, 6, 384
B, T = 8, 128


def trainer(compiled):
    torch.manual_seed(0)
    model = GPT(V, CTX, LAYERS, HEADS, C, fused=True)
    model.nanogpt_init()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    forward = torch.compile(model) if compiled else model
    params = list(model.parameters())

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = F.cross_entropy(forward(x).view(-1, V), y.view(-1))
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        return loss.item()
    return step


def main():
    rounds, threads = int(sys.argv[1]), int(sys.argv[2])
    torch.set_num_threads(threads)
    x, y = torch.randint(0, V, (B, T)), torch.randint(0, V, (B, T))
    eager, compiled = trainer(False), trainer(True)
    for _ in range(2):
        eager(x, y)
    t0 = time.perf_counter()
    for _ in range(2):
        compiled(x, y)
    compile_s = time.perf_counter() - t0
    times = {"eager": [], "compiled": []}
    for _ in range(rounds):
        for name, step in (("eager", eager), ("compiled", compiled)):
            t0 = time.perf_counter()
            step(x, y)
            times[name].append(time.perf_counter() - t0)
    print(f"torch: {torch.__version__}")
    print(f"threads: {torch.get_num_threads()}")
    print(f"compile_seconds: {compile_s:.2f}")
    for name in ("eager", "compiled"):
        print(f"step_{name}: {statistics.median(times[name]):.4f} s")


if __name__ == "__main__":
    main()
