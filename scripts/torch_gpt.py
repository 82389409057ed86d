"""The PyTorch twin of lua/tide/models/gpt.lua, for the scripts that compare tide with PyTorch
(gen_gpt_fixture.py, gpt_loss_curve.py): nanoGPT's layout and parameter names (learned
positions, pre-norm blocks, exact GELU, causal attention scaled by 1/sqrt(head_dim), an untied
head without bias), the composite attention PyTorch 1.13 has (no fused op there; `fused=True`
takes PyTorch 2's F.scaled_dot_product_attention instead, for bench/bench_gpt_torch.py), and
nanoGPT's init.
"""
import math

import torch
from torch import nn
from torch.nn import functional as F


class CausalSelfAttention(nn.Module):
    def __init__(self, n_embd, n_head, fused=False):
        super().__init__()
        self.n_head = n_head
        self.fused = fused
        self.c_attn = nn.Linear(n_embd, 3 * n_embd)
        self.c_proj = nn.Linear(n_embd, n_embd)

    def forward(self, x):
        B, T, C = x.shape
        H = self.n_head
        q, k, v = self.c_attn(x).split(C, dim=2)
        q, k, v = (t.view(B, T, H, C // H).transpose(1, 2) for t in (q, k, v))
        if self.fused:
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        else:
            att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(C // H))
            mask = torch.ones(T, T, dtype=torch.bool).triu(1)
            att = F.softmax(att.masked_fill(mask, float("-inf")), dim=-1)
            y = att @ v
        y = y.transpose(1, 2).contiguous().view(B, T, C)
        return self.c_proj(y)


class MLP(nn.Module):
    def __init__(self, n_embd):
        super().__init__()
        self.c_fc = nn.Linear(n_embd, 4 * n_embd)
        self.c_proj = nn.Linear(4 * n_embd, n_embd)

    def forward(self, x):
        return self.c_proj(F.gelu(self.c_fc(x)))  # exact (erf) GELU


class Block(nn.Module):
    def __init__(self, n_embd, n_head, fused=False):
        super().__init__()
        self.ln_1 = nn.LayerNorm(n_embd, eps=1e-5)
        self.attn = CausalSelfAttention(n_embd, n_head, fused)
        self.ln_2 = nn.LayerNorm(n_embd, eps=1e-5)
        self.mlp = MLP(n_embd)

    def forward(self, x):
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


class GPT(nn.Module):
    def __init__(self, vocab_size, block_size, n_layer, n_head, n_embd, fused=False):
        super().__init__()
        self.wte = nn.Embedding(vocab_size, n_embd)
        self.wpe = nn.Embedding(block_size, n_embd)
        self.h = nn.ModuleList([Block(n_embd, n_head, fused) for _ in range(n_layer)])
        self.ln_f = nn.LayerNorm(n_embd, eps=1e-5)
        self.lm_head = nn.Linear(n_embd, vocab_size, bias=False)
        self.n_layer = n_layer

    def forward(self, idx):
        pos = torch.arange(idx.shape[1])
        x = self.wte(idx) + self.wpe(pos)
        for block in self.h:
            x = block(x)
        return self.lm_head(self.ln_f(x))

    def nanogpt_init(self):
        """N(0, 0.02) weights, N(0, 0.02 / sqrt(2 n_layer)) residual projections, zero biases,
        LayerNorms 1 and 0 (what tide.models.gpt does with tide's RNG)."""
        with torch.no_grad():
            for name, p in self.named_parameters():
                if name.endswith("c_proj.weight"):
                    p.normal_(0, 0.02 / math.sqrt(2 * self.n_layer))
                elif name.endswith("weight") and p.dim() == 2:
                    p.normal_(0, 0.02)
                elif name.endswith("bias"):
                    p.zero_()
