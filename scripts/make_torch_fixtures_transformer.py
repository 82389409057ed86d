#!/usr/bin/python3
"""Writes the PyTorch fixtures that tests/lua/test_nn_transformer.lua compares
nn.TransformerEncoderLayer and nn.TransformerEncoder against.

Run with Debian's python3-torch (1.13), as scripts/make_torch_fixtures.py (whose safetensors
writer it uses); the outputs are committed under tests/lua/data/, so the tests never need torch:

    /usr/bin/python3 scripts/make_torch_fixtures_transformer.py tests/lua/data

pytorch_transformer_<case>.safetensors holds the module's state_dict (PyTorch's names) and
io.<name> tensors: the input, the outputs without and with masks, the loss weights g and the
gradients of sum(g * output_masked) with respect to the input and every parameter
(grad.<parameter name>). Everything is float64 and in eval mode (dropout off). The cases:
  post: TransformerEncoderLayer(8, 2, dim_feedforward=16), relu, norm_first=False, [S, N, E];
  pre:  the same with gelu, norm_first=True, batch_first=True ([N, S, E]);
  encoder: TransformerEncoder(pre layer, 2, norm=LayerNorm(8)), layers given distinct weights.
Outputs are computed with autograd on, so PyTorch takes its reference Python path (not the
fused inference fast path).
"""
import os
import sys

import torch
from torch import nn

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from make_torch_fixtures import save_safetensors  # noqa: E402

E, H, FF, S, N = 8, 2, 16, 5, 3


def randomize(model):
    """Every parameter its own values (biases and norms are not 0 and 1), so a swapped or
    misplaced tensor shows."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm1.weight") or name.endswith("norm2.weight") or \
                    name == "norm.weight":
                p.uniform_(0.5, 1.5)
            else:
                p.normal_(0, 0.3)


def masks(batch_first):
    """A causal bool src_mask (True: not allowed) and a key padding mask hiding the last key of
    the second sequence and the last two of the third."""
    causal = torch.triu(torch.ones(S, S, dtype=torch.bool), diagonal=1)
    pad = torch.zeros(N, S, dtype=torch.bool)
    pad[1, S - 1] = True
    pad[2, S - 2:] = True
    return causal, pad


def run_case(out_dir, name, model, batch_first, encoder=False):
    model = model.double().eval()
    randomize(model)
    shape = (N, S, E) if batch_first else (S, N, E)
    x = torch.randn(*shape, dtype=torch.float64, requires_grad=True)
    causal, pad = masks(batch_first)
    if encoder:
        plain = model(x)
        masked = model(x, mask=causal, src_key_padding_mask=pad)
    else:
        plain = model(x)
        masked = model(x, src_mask=causal, src_key_padding_mask=pad)
    g = torch.randn(*masked.shape, dtype=torch.float64)
    (g * masked).sum().backward()
    tensors = dict(model.state_dict())
    tensors.update({"io.input": x, "io.output": plain, "io.output_masked": masked,
                    "io.src_mask": causal, "io.src_key_padding_mask": pad, "io.g": g,
                    "io.grad_input": x.grad})
    for pname, p in model.named_parameters():
        tensors["grad." + pname] = p.grad
    save_safetensors(os.path.join(out_dir, "pytorch_transformer_%s.safetensors" % name),
                     tensors, {"torch": torch.__version__})


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/lua/data"
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(21)
    run_case(out_dir, "post", nn.TransformerEncoderLayer(E, H, dim_feedforward=FF), False)
    run_case(out_dir, "pre", nn.TransformerEncoderLayer(
        E, H, dim_feedforward=FF, activation="gelu", norm_first=True, batch_first=True), True)
    layer = nn.TransformerEncoderLayer(E, H, dim_feedforward=FF, activation="gelu",
                                       norm_first=True, batch_first=True)
    run_case(out_dir, "encoder", nn.TransformerEncoder(
        layer, 2, norm=nn.LayerNorm(E), enable_nested_tensor=False), True, encoder=True)
    print("wrote transformer fixtures to", out_dir)


if __name__ == "__main__":
    main()
