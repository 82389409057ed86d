#!/usr/bin/python3
"""Writes the PyTorch checkpoints that tests/lua/test_pytorch_checkpoint.lua loads.

Needs Debian's python3-torch (apt-get install python3-torch; it brings python3-numpy), hence the
interpreter /usr/bin/python3 rather than whatever `python3` is first on PATH. The outputs are
committed under tests/lua/data/, so the tests never need torch; rerun this only to change them:

    /usr/bin/python3 scripts/make_torch_fixtures.py tests/lua/data

For each model it writes two safetensors files:
  pytorch_<name>.safetensors     model.state_dict() exactly as PyTorch names and lays it out
                                 (0-based Sequential/ModuleList indices, BatchNorm's int64
                                 num_batches_tracked ...), what a user's checkpoint holds;
  pytorch_<name>_io.safetensors  a fixed input and the outputs PyTorch computed from it.
The safetensors format is written here by hand (8-byte little-endian header length, a JSON
header, raw little-endian data), as safetensors.torch.save_file lays it out, so no pip package
is needed.
"""
import json
import os
import struct
import sys

import torch
from torch import nn

DTYPES = {torch.float32: "F32", torch.float64: "F64", torch.int64: "I64", torch.int32: "I32",
          torch.uint8: "U8", torch.bool: "BOOL"}


def save_safetensors(path, tensors, metadata=None):
    """tensors: {name: torch.Tensor}; written in name order, the header padded to 8 bytes."""
    header, blobs, offset = {}, [], 0
    if metadata:
        header["__metadata__"] = metadata
    for name in sorted(tensors):
        t = tensors[name].detach().contiguous().cpu()
        data = t.numpy().tobytes()  # numpy writes the host's (little-endian) byte order
        header[name] = {"dtype": DTYPES[t.dtype], "shape": list(t.shape),
                        "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for b in blobs:
            f.write(b)


def sequential_model():
    """Sequentials nested two deep, Conv2d, BatchNorm2d/1d, Linear, LayerNorm."""
    return nn.Sequential(
        nn.Sequential(nn.Conv2d(2, 3, 3, padding=1), nn.BatchNorm2d(3), nn.ReLU()),  # 0.*
        nn.Flatten(),                                                              # 1
        nn.Linear(3 * 4 * 4, 8),                                                   # 2
        nn.BatchNorm1d(8),                                                         # 3
        nn.ReLU(),                                                                 # 4
        nn.Sequential(nn.Linear(8, 6), nn.LayerNorm(6), nn.Tanh(), nn.Linear(6, 3)),  # 5.*
    )


class EmbedNet(nn.Module):
    """A custom module: an Embedding, a ModuleList of Sequentials (residual blocks), a head."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(10, 6)
        self.blocks = nn.ModuleList([nn.Sequential(nn.Linear(6, 6), nn.GELU())
                                     for _ in range(2)])
        self.head = nn.Linear(6, 2)

    def forward(self, idx):
        x = self.embed(idx)
        for block in self.blocks:
            x = x + block(x)
        return self.head(x)


def randomize_norms(model):
    """Norm layers start at weight 1, bias 0, which would not show a swapped or misplaced
    tensor: give them values of their own."""
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.BatchNorm1d, nn.BatchNorm2d, nn.LayerNorm)):
                m.weight.uniform_(0.5, 1.5)
                m.bias.normal_(0, 0.5)


def make_sequential(out_dir):
    torch.manual_seed(0)
    model = sequential_model()
    randomize_norms(model)
    # Three training steps' worth of forward passes give the BatchNorms running statistics
    # other than their initial 0 and 1, and num_batches_tracked = 3.
    model.train()
    with torch.no_grad():
        for _ in range(3):
            model(torch.randn(5, 2, 4, 4) * 2 + 0.5)
    x = torch.randn(4, 2, 4, 4)
    model.eval()
    with torch.no_grad():
        y_eval = model(x)
    save_safetensors(os.path.join(out_dir, "pytorch_sequential.safetensors"),
                     model.state_dict(), {"torch": torch.__version__})
    # After the state dict is saved: a training-mode pass (batch statistics) and the running
    # statistics it leaves, to check tide's BatchNorm updates them as PyTorch does.
    model.train()
    with torch.no_grad():
        y_train = model(x)
    bn = model[0][1]
    save_safetensors(os.path.join(out_dir, "pytorch_sequential_io.safetensors"),
                     {"input": x, "output_eval": y_eval, "output_train": y_train,
                      "bn_running_mean_after": bn.running_mean,
                      "bn_running_var_after": bn.running_var,
                      "bn_num_batches_tracked_after": bn.num_batches_tracked})


def make_embed(out_dir):
    torch.manual_seed(1)
    model = EmbedNet().eval()
    idx = torch.tensor([[0, 3, 9], [5, 5, 1]])
    with torch.no_grad():
        y = model(idx)
    save_safetensors(os.path.join(out_dir, "pytorch_embednet.safetensors"), model.state_dict(),
                     {"torch": torch.__version__})
    save_safetensors(os.path.join(out_dir, "pytorch_embednet_io.safetensors"),
                     {"input": idx, "output": y})


def main():
    out_dir = sys.argv[1] if len(sys.argv) > 1 else "tests/lua/data"
    os.makedirs(out_dir, exist_ok=True)
    make_sequential(out_dir)
    make_embed(out_dir)
    print("wrote PyTorch fixtures to", out_dir)


if __name__ == "__main__":
    main()
