#!/usr/bin/python3
"""Writes the GPT parity fixture that tests/lua/test_gpt_parity.lua compares tide against.

Needs Debian's python3-torch (1.13), hence /usr/bin/python3. The outputs are committed under
tests/lua/data/, so the test never needs torch; rerun this only to change them:

    /usr/bin/python3 scripts/gen_gpt_fixture.py tests/lua/data

The model is scripts/torch_gpt.py's GPT, the PyTorch twin of lua/tide/models/gpt.lua, 2 layers,
32 wide, 2 heads, context 16, a 64-token vocabulary. Two files:
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
from torch.nn import functional as F

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_torch_fixtures import save_safetensors  # noqa: E402
from torch_gpt import GPT  # noqa: E402

CONFIG = dict(vocab_size=64, block_size=16, n_layer=2, n_head=2, n_embd=32)
BATCH = 2


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
    model = GPT(**CONFIG)
    fixed_weights(model)
    vocab, block = CONFIG["vocab_size"], CONFIG["block_size"]
    tokens = torch.randint(0, vocab, (BATCH, block))
    targets = torch.randint(0, vocab, (BATCH, block))
    logits = model(tokens)
    loss = F.cross_entropy(logits.view(-1, vocab), targets.view(-1))
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
