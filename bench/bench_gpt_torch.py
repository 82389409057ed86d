#!/usr/bin/env python3
"""bench_gpt_torch.py — PyTorch's side of bench/bench_gpt.lua: the same GPT (tide.models.gpt:
6 layers, 384 wide, 6 heads, context 256, byte vocabulary, learned positions, pre-norm blocks
with biases, exact GELU, untied head without bias, nanoGPT's init) and the same training step
(batch 8 x 128 random tokens, cross-entropy, backward, gradient clipping at 1.0, AdamW lr 1e-3,
betas 0.9/0.95, weight decay 0.1 on the matrices only), float32 on the CPU. Attention is
torch.nn.functional.scaled_dot_product_attention with is_causal, PyTorch's fused kernel.

  PYTHON bench/bench_gpt_torch.py ROUNDS THREADS

Runs the step eagerly and with the model under torch.compile (inductor, default mode; the
optimizer step stays eager), alternating round by round after warm-up, and prints
`torch: VERSION`, `threads: N`, `compile_seconds: S` (the compiled model's first two steps) and
`step_eager: MEDIAN s`, `step_compiled: MEDIAN s` (wall clock, medians over ROUNDS).
"""
import math
import statistics
import sys
import time

import torch
import torch.nn.functional as F
from torch import nn

V, CTX, LAYERS, HEADS, C = 256, 256, 6, 6, 384
B, T = 8, 128


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(C), nn.LayerNorm(C)
        self.c_attn, self.attn_proj = nn.Linear(C, 3 * C), nn.Linear(C, C)
        self.c_fc, self.mlp_proj = nn.Linear(C, 4 * C), nn.Linear(4 * C, C)

    def forward(self, x):
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        heads = [t.view(B, T, HEADS, C // HEADS).transpose(1, 2) for t in (q, k, v)]
        y = F.scaled_dot_product_attention(*heads, is_causal=True)
        x = x + self.attn_proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x))))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(V, C), nn.Embedding(CTX, C)
        self.h = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(C)
        self.lm_head = nn.Linear(C, V, bias=False)
        for name, p in self.named_parameters():  # nanoGPT's init, as tide.models.gpt
            if name.endswith("proj.weight"):
                nn.init.normal_(p, 0, 0.02 / math.sqrt(2 * LAYERS))
            elif p.dim() == 2:
                nn.init.normal_(p, 0, 0.02)
            elif name.endswith("bias"):
                nn.init.zeros_(p)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(T))
        for block in self.h:
            x = block(x)
        logits = self.lm_head(self.ln_f(x))
        return F.cross_entropy(logits.view(-1, V), targets.view(-1))


def trainer(compiled):
    torch.manual_seed(0)
    model = GPT()
    decay = [p for p in model.parameters() if p.dim() >= 2]
    rest = [p for p in model.parameters() if p.dim() < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1},
                             {"params": rest, "weight_decay": 0.0}],
                            lr=1e-3, betas=(0.9, 0.95), eps=1e-8)
    forward = torch.compile(model) if compiled else model
    params = list(model.parameters())

    def step(x, y):
        opt.zero_grad(set_to_none=True)
        loss = forward(x, y)
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
