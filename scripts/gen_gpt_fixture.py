#!/usr/bin/python3
"""Writes the GPT parity fixture that tests/lua/test_gpt_parity.lua compares tide against.

Needs Debian's python3-torch (1.13), hence /usr/bin/python3. The outputs are committed under
tests/lua/data/, so the test never needs torch; rerun this only to change them:

    /usr/bin/python3 scripts/gen_gpt_fixture.py tests/lua/data

The model is the GPT of lua/tide/models/gpt.lua (nanoGPT's layout: learned positions, pre-norm
blocks, exact GELU, causal attention scaled by 1/sqrt(head_dim), untied head), 2 layers, 32
wide, 2 heads, context 16, a 64-token vocabulary, written here in plain PyTorch. Two files:
  pytorch_gpt.safetensors     model.state_dict() with PyTorch's names (h.0.attn.c_attn.weight...)
  pytorch_gpt_io.safetensors  tokens and targets [2, 16] (0-based, as PyTorch indexes; tide adds
                              1), the logits [2, 16, 64], the mean cross-entropy loss, and
                              grad.<name> for every parameter after loss.backward().
The weights are not nanoGPT's init (zero biases, unit norms would hide a swapped or misplaced
tensor): every tensor gets values of its own, seeded, O(1) activations throughout.
"""
import math
import os
import sys

import torch
from torch import nn
from torch.nn import functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_torch_fixtures import save_safetensors  # noqa: E402

VOCAB, BLOCK, N_LAYER, N_HEAD, N_EMBD = 64, 16, 2, 2, 32
BATCH = 2


class CausalSelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_attn = nn.Linear(N_EMBD, 3 * N_EMBD)
        self.c_proj = nn.Linear(N_EMBD, N_EMBD)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, N_HEAD, C // N_HEAD).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // N_HEAD))
        mask = torch.ones(T, T, dtype=torch.bool).triu(1)
        att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
        y = (att @ v).transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.c_fc = nn.Linear(N_EMBD, 4 * N_EMBD)
        self.c_proj = nn.Linear(4 * N_EMBD, N_EMBD)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))  # exact (erf) GELU


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1 = nn.LayerNorm(N_EMBD, eps=1e-5)
        self.attn = CausalSelfAttention()
        self.ln_2 = nn.LayerNorm(N_EMBD, eps=1e-5)
        self.mlp = MLP()

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte = nn.Embedding(VOCAB, N_EMBD)
        self.wpe = nn.Embedding(BLOCK, N_EMBD)
        self.h = nn.ModuleList([Block() for _ in range(N_LAYER)])
        self.ln_f = nn.LayerNorm(N_EMBD, eps=1e-5)
        self.lm_head = nn.Linear(N_EMBD, VOCAB, bias=False)

    def forward(self, idx):
        pos = torch.arange(idx.shape[1])
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))


def fixed_weights(model):
    """Matrices ~ N(0, 1/fan_in) (embeddings N(0, 0.5)), biases N(0, 0.1), norm weights around
    1 and norm biases around 0, so every tensor is distinct and the outputs are O(1)."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.startswith(("wte", "wpe")):
                p.normal_(0, 0.5)
            elif name.startswith("ln") or ".ln_" in name:
                p.copy_((1 if name.endswith("weight") else 0) + 0.1 * torch.randn_like(p))
            elif name.endswith("weight"):
                p.normal_(0, 1 / math.sqrt(p.shape[1]))
            else:
                p.normal_(0, 0.1)


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/lua/data"
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(21)
    model = GPT()
    fixed_weights(model)
    tokens = torch.randint(0, VOCAB, (BATCH, BLOCK))
    targets = torch.randint(0, VOCAB, (BATCH, BLOCK))
    logits = model(tokens)
    loss = F.cross_entropy(logits.view(-1, VOCAB), targets.view(-1))
    loss.backward()
    save_safetensors(os.path.join(out_dir, "pytorch_gpt.safetensors"), model.state_dict(),
                     {"torch": torch.__version__})
    io = {"tokens": tokens, "targets": targets, "logits": logits, "loss": loss}
    for name, p in model.named_parameters():
        io["grad." + name] = p.grad
    save_safetensors(os.path.join(out_dir, "pytorch_gpt_io.safetensors"), io)
    print("wrote the GPT fixture to", out_dir, "loss", loss.item())


if __name__ == "__main__":
    main()
