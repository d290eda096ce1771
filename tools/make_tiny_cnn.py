#!/usr/bin/python3
"""Writes models/tiny_cnn.onnx: a small residual CNN for 1x28x28 inputs (Fashion-MNIST's shape)
with fixed random weights, the bundled default model until the trained zoo replaces it.
It has the structure qforge's passes care about: Conv+BatchNorm+Relu, a residual Add, MaxPool,
GlobalAveragePool, Flatten and Gemm. Deterministic: same torch version, same bytes. Also writes tiny_cnn.input.pb (4 images) and
tiny_cnn.output.pb (PyTorch eager's logits for them).
"""
import os
import sys

import onnx.numpy_helper
import torch
import torch.nn as nn


class TinyResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(nn.Conv2d(1, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16),
                                  nn.ReLU(), nn.MaxPool2d(2))
        self.conv1 = nn.Conv2d(16, 16, 3, padding=1, bias=False)
        self.bn1 = nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 16, 3, padding=1, bias=False)
        self.bn2 = nn.BatchNorm2d(16)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(16, 10)

    def forward(self, x):
        x = self.stem(x)
        y = torch.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        x = torch.relu(x + y)
        return self.fc(torch.flatten(self.pool(x), 1))


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(
        os.path.dirname(os.path.abspath(__file__)), "..", "models", "tiny_cnn.onnx")
    torch.manual_seed(0)
    model = TinyResNet().eval()
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    tmp = out + ".tmp"
    # Keep BatchNormalization as its own node (training mode export off, no folding) so the
    # bundled model exercises the BN path that fold-BN passes will rewrite.
    torch.onnx.export(model, torch.randn(1, 1, 28, 28), tmp, opset_version=13,
                      input_names=["image"], output_names=["logits"],
                      dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}},
                      do_constant_folding=False, training=torch.onnx.TrainingMode.PRESERVE)
    os.replace(tmp, out)
    # A reference input and PyTorch eager's output for it, so `qforge run --expect` can check.
    torch.manual_seed(1)
    x = torch.rand(4, 1, 28, 28)
    with torch.no_grad():
        y = model(x)
    stem = out[:-len(".onnx")]
    for suffix, t in ((".input.pb", x), (".output.pb", y)):
        with open(stem + suffix, "wb") as f:
            f.write(onnx.numpy_helper.from_array(t.numpy()).SerializeToString())


if __name__ == "__main__":
    main()
