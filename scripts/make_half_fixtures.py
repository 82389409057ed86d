#!/usr/bin/python3
"""Writes the float16/bfloat16 fixtures that tests/test_half_files.c and
tests/lua/test_half_files.lua load: what PyTorch itself stores and computes for half tensors.

Needs Debian's python3-torch 1.13 (it brings python3-numpy), hence /usr/bin/python3. The outputs
are committed under tests/lua/data/, so the tests never need torch; rerun this only to change
them:

    /usr/bin/python3 scripts/make_half_fixtures.py tests/lua/data

pytorch_half.safetensors holds, with metadata {"format": "pt"}:
  src            F32 [N]    edge values: zeros, subnormals, the largest finite values and the
                            overflow boundaries of both formats, ties, NaN payloads, infinities
  src_f16        F16 [N]    src.half()       (torch's float32 -> float16 rounding)
  src_bf16       BF16 [N]   src.bfloat16()
  src_f16_f32    F32 [N]    src_f16.float()  (torch's exact widening)
  src_bf16_f32   F32 [N]    src_bf16.float()
  bits_f16       F16 [64, 64]   random bit patterns (every class: subnormal, normal, inf, NaN)
  bits_f16_f32   F32 [64, 64]   bits_f16.float()
  bits_bf16      BF16 [64, 64]
  bits_bf16_f32  F32 [64, 64]
  wide           F64 [M]    float64 values where rounding once and rounding twice differ
  wide_f16       F16 [M]    wide.half(): torch goes through float32 (double rounding)
  wide_bf16      BF16 [M]   wide.bfloat16()
pytorch_half_f16.npy is bits_f16 saved by numpy.save as '<f2'.

The safetensors format is written by hand (8-byte little-endian header length, compact JSON
header padded with spaces to 8 bytes, raw little-endian data) in the reference writer's order
(dtype rank descending, then name), so tide's writer must reproduce the file byte for byte.
Half tensors' bytes come from tensor.view(torch.int16): numpy has no bfloat16.
"""
import json
import os
import struct
import sys

import numpy as np
import torch

DTYPES = {torch.float16: "F16", torch.bfloat16: "BF16", torch.float32: "F32",
          torch.float64: "F64"}
RANK = {"F16": 7, "BF16": 8, "F32": 11, "F64": 12}  # the reference's Dtype enum order


def raw_bytes(t):
    t = t.detach().contiguous().cpu()
    if t.dtype in (torch.float16, torch.bfloat16):
        t = t.view(torch.int16)
    return t.numpy().tobytes()  # the host's (little-endian) byte order


def save_safetensors(path, tensors, metadata):
    names = sorted(tensors, key=lambda n: (-RANK[DTYPES[tensors[n].dtype]], n))
    header, blobs, offset = {"__metadata__": metadata}, [], 0
    for name in names:
        data = raw_bytes(tensors[name])
        header[name] = {"dtype": DTYPES[tensors[name].dtype], "shape": list(tensors[name].shape),
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


def from_bits32(bits):
    return torch.tensor([b - (1 << 32) if b >= 1 << 31 else b for b in bits],
                        dtype=torch.int32).view(torch.float32)


def from_bits16(bits, dtype):
    return torch.tensor([b - (1 << 16) if b >= 1 << 15 else b for b in bits],
                        dtype=torch.int16).view(dtype)


def edge_values():
    """float32 bit patterns at the places where conversion to 16 bits is delicate."""
    p = lambda x: struct.unpack("<I", struct.pack("<f", x))[0]
    f16 = [0.0, 2.0**-24, 2.0**-25, 3 * 2.0**-25, 2.0**-25 * (1 + 2.0**-23),   # subnormal ties
           1023 * 2.0**-24, 1023.5 * 2.0**-24, 2.0**-14, 65504.0, 65519.0,      # -> smallest normal
           np.float32(65519.99), 65520.0, 65536.0, 1e10, 1 + 2.0**-11,         # 65520: to inf
           1 + 3 * 2.0**-11, 1 + 2.0**-11 + 2.0**-23, 2049.0, 2051.0, 1 / 3, np.pi, 0.1]
    bf16 = [2.0**-133, 2.0**-134, 3 * 2.0**-134, 2.0**-126, 1 + 2.0**-8, 1 + 3 * 2.0**-8,
            257.0, 259.0, 1e-40]
    bits = [p(float(x)) for x in f16 + bf16]
    bits += [0x7F7F7FFF, 0x7F7F8000, 0x7F7EFFFF, 0x7F7F0000, 0x7F7FFFFF,  # bf16 overflow edge
             0x00008000, 0x00018000, 0x007FFFFF, 0x00800000,              # bf16 subnormal ties
             0x7F800000, 0x7FC00000, 0x7FC00001, 0x7FD55555, 0x7F800001,   # inf, quiet/signal NaN
             0x7FA00000, 0x7F802000, 0x7FBFFFFF, 0x7F810000]
    return bits + [b | 0x80000000 for b in bits]  # every value with both signs


def wide_values():
    """float64 values halfway (after rounding to float32) between two 16-bit neighbours."""
    return [1 + 2.0**-11 + 2.0**-40, 1 + 2.0**-11 - 2.0**-40, 1 + 2.0**-8 + 2.0**-40,
            65519.999999999, 2.0**-25 + 2.0**-60, 1e300, -1e300, 1e-300, float("nan"),
            -2.0 / 3, 0.1]


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/lua/data"
    src = from_bits32(edge_values())
    gen = torch.Generator().manual_seed(22)
    bits = torch.randint(0, 1 << 16, (64, 64), generator=gen).tolist()
    bits_f16 = from_bits16(sum(bits, []), torch.float16).reshape(64, 64)
    bits = torch.randint(0, 1 << 16, (64, 64), generator=gen).tolist()
    bits_bf16 = from_bits16(sum(bits, []), torch.bfloat16).reshape(64, 64)
    wide = torch.tensor(wide_values(), dtype=torch.float64)
    tensors = {
        "src": src, "src_f16": src.half(), "src_bf16": src.bfloat16(),
        "bits_f16": bits_f16, "bits_f16_f32": bits_f16.float(),
        "bits_bf16": bits_bf16, "bits_bf16_f32": bits_bf16.float(),
        "wide": wide, "wide_f16": wide.half(), "wide_bf16": wide.bfloat16(),
    }
    tensors["src_f16_f32"] = tensors["src_f16"].float()
    tensors["src_bf16_f32"] = tensors["src_bf16"].float()
    save_safetensors(os.path.join(out, "pytorch_half.safetensors"), tensors, {"format": "pt"})
    np.save(os.path.join(out, "pytorch_half_f16.npy"),
            bits_f16.view(torch.int16).numpy().view(np.float16))


if __name__ == "__main__":
    main()
