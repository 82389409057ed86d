#!/usr/bin/python3
"""onnx_models.py OUT_DIR — the three models bench_onnx.sh times, exported from PyTorch.

mlp.onnx          784-512-512-10 with ReLU, input "x" [batch, 784]
cnn.onnx          conv3x3(3->32)-relu-maxpool2, conv3x3(32->64)-relu-maxpool2, linear 4096->10,
                  input "x" [batch, 3, 32, 32]
encoder.onnx      nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024,
                  batch_first=True) in eval mode, input "x" [batch, 64, 256]

Fixed seed, opset 14, dim 0 of input and output named "batch". Run with Debian's torch
(/usr/bin/python3); never needed by the tests.
"""
import os
import sys

import torch
from torch import nn


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
            nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2))
        self.classifier = nn.Linear(64 * 8 * 8, 10)

    def forward(self, x):
        return self.classifier(torch.flatten(self.features(x), 1))


def models():
    yield "mlp", nn.Sequential(nn.Linear(784, 512), nn.ReLU(), nn.Linear(512, 512), nn.ReLU(),
                               nn.Linear(512, 10)), (784,)
    yield "cnn", ConvNet(), (3, 32, 32)
    yield "encoder", nn.TransformerEncoderLayer(d_model=256, nhead=4, dim_feedforward=1024,
                                                batch_first=True), (64, 256)


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "build/bench-onnx"
    os.makedirs(out, exist_ok=True)
    torch.manual_seed(0)
    for name, model, shape in models():
        model.eval()
        x = torch.randn(2, *shape)
        path = os.path.join(out, name + ".onnx")
        # Grad stays enabled: in eval mode under no_grad, TransformerEncoderLayer takes its
        # fused fast path (aten::_transformer_encoder_layer_fwd), which has no ONNX export.
        torch.onnx.export(model, (x,), path, opset_version=14, input_names=["x"],
                          output_names=["y"], dynamic_axes={"x": {0: "batch"}, "y": {0: "batch"}})
        print(path)


if __name__ == "__main__":
    main()
