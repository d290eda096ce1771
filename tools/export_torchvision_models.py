#!/usr/bin/python3
"""Exports torchvision's ResNet-18 and MobileNetV2 (random weights, fixed seed) to ONNX opset 13
with a dynamic batch axis, plus a reference input and PyTorch eager's output for it, so qforge's
tests and benchmarks can compare against PyTorch on exactly the same weights.

Writes, per model, into --out:
  <name>.onnx                the model
  <name>.input.pb            a 1x3x224x224 float input (ONNX TensorProto)
  <name>.output.pb           PyTorch eager's output for that input
Tools only: uses Debian's /usr/bin/python3 with python3-torch, python3-torchvision, python3-onnx.
"""
import argparse
import hashlib
import os
import sys

import onnx
import onnx.numpy_helper
import torch
import torchvision

MODELS = {
    "resnet18": lambda: torchvision.models.resnet18(weights=None),
    "mobilenet_v2": lambda: torchvision.models.mobilenet_v2(weights=None),
}


def build(name):
    torch.manual_seed(0)
    model = MODELS[name]()
    # Random BN statistics, so BatchNormalization is not the identity it is at initialisation.
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, torch.nn.BatchNorm2d):
                m.running_mean.uniform_(-0.1, 0.1)
                m.running_var.uniform_(0.5, 1.5)
    return model.eval()


def write_tensor(path, array):
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(onnx.numpy_helper.from_array(array).SerializeToString())
    os.replace(tmp, path)


def export(name, out_dir):
    model = build(name)
    torch.manual_seed(1)
    x = torch.randn(1, 3, 224, 224)
    path = os.path.join(out_dir, name + ".onnx")
    tmp = path + ".tmp"
    torch.onnx.export(model, x, tmp, opset_version=13, input_names=["input"],
                      output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
    onnx.checker.check_model(tmp)
    os.replace(tmp, path)
    with torch.no_grad():
        y = model(x)
    write_tensor(os.path.join(out_dir, name + ".input.pb"), x.numpy())
    write_tensor(os.path.join(out_dir, name + ".output.pb"), y.numpy())


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", required=True, help="output directory")
    parser.add_argument("--models", nargs="*", default=sorted(MODELS), choices=sorted(MODELS))
    args = parser.parse_args()
    os.makedirs(args.out, exist_ok=True)
    # Re-export only when this script or torch changed.
    stamp = hashlib.sha256(open(__file__, "rb").read() + torch.__version__.encode()).hexdigest()
    for name in args.models:
        stamp_path = os.path.join(args.out, name + ".stamp")
        if os.path.exists(stamp_path) and open(stamp_path).read() == stamp and \
                os.path.exists(os.path.join(args.out, name + ".output.pb")):
            continue
        export(name, args.out)
        with open(stamp_path, "w") as f:
            f.write(stamp)
        print(f"exported {name} to {args.out}", file=sys.stderr)


if __name__ == "__main__":
    main()
