#!/usr/bin/python3
"""Exports torchvision architectures to ONNX with Debian's torch (1.13), the way users' older
exports look: opsets 9, 11, 13 and 17, batch dimension dynamic. The weights are torchvision's
initialisation under a fixed seed (no pretrained download here), so outputs are not meaningful
classes; what the corpus tests is that every graph form loads, quantizes, deploys and verifies.
BatchNorm statistics are then measured on 8 batches of standard-normal images (as a trained
network's are on its data): with torchvision's initial statistics (mean 0, variance 1) the
activations of EfficientNet and MobileNetV3 shrink layer by layer to outputs near 1e-14, which
every quantizer rounds to zero (0 dB SQNR, whatever the backend).

  /usr/bin/python3 bench/corpus/export_torchvision.py OUT_DIR [name ...]

Needs Debian's python3-torchvision (scripts/install-deps.sh installs it). Prints NAME PATH lines.
"""
import os
import sys

import torch
import torchvision.models as tvm

# name -> (constructor, input size, opsets)
ARCHITECTURES = {
    "mobilenet_v3_small": (lambda: tvm.mobilenet_v3_small(), 224, (9, 11, 13, 17)),
    "efficientnet_b0": (lambda: tvm.efficientnet_b0(), 224, (11, 13, 17)),
    "shufflenet_v2_x0_5": (lambda: tvm.shufflenet_v2_x0_5(), 224, (9, 11, 13, 17)),
    "squeezenet1_1": (lambda: tvm.squeezenet1_1(), 224, (9, 11, 13, 17)),
    "densenet121": (lambda: tvm.densenet121(), 224, (11, 13)),
    "convnext_tiny": (lambda: tvm.convnext_tiny(), 224, (13, 17)),
    # ViT-B/16 at reduced size: 4 layers, 192 wide, on 64x64 images.
    "vit_small": (lambda: tvm.VisionTransformer(image_size=64, patch_size=16, num_layers=4,
                                                 num_heads=3, hidden_dim=192, mlp_dim=768),
                  64, (13, 17)),
}

# Detectors take one image [3, H, W] (torchvision's list-of-images API) and return boxes, scores
# and labels after batched NMS: If, NonZero, TopK and GatherND at opset 11.
DETECTORS = {
    "ssdlite320_mobilenet_v3_large": (
        lambda: tvm.detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None),
        320, (11,)),
}


def measure_batchnorm_statistics(model, size):
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.reset_running_stats()
            m.momentum = None  # a plain average over the batches below
    model.train()
    with torch.no_grad():
        for _ in range(8):
            model(torch.randn(8, 3, size, size))
    return model.eval()


def export(name, out_dir):
    build, size, opsets = ARCHITECTURES[name]
    model = None  # built only when some opset is not in the cache yet
    for opset in opsets:
        path = os.path.join(out_dir, f"{name}_op{opset}.onnx")
        if not os.path.exists(path):
            if model is None:
                torch.manual_seed(0)
                model = measure_batchnorm_statistics(build(), size)
                x = torch.randn(1, 3, size, size)
            tmp = path + ".tmp"
            try:
                torch.onnx.export(model, x, tmp, opset_version=opset, input_names=["input"],
                                  output_names=["logits"],
                                  dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
            except Exception as e:  # an op this opset cannot express: say so, go on
                print(f"# {name} opset {opset}: not exportable ({str(e).splitlines()[0]})",
                      file=sys.stderr)
                continue
            os.replace(tmp, path)
        print(f"{name}_op{opset} {path}")


def export_detector(name, out_dir):
    build, size, opsets = DETECTORS[name]
    for opset in opsets:
        path = os.path.join(out_dir, f"{name}_op{opset}.onnx")
        if not os.path.exists(path):
            torch.manual_seed(0)
            model = build().eval()
            tmp = path + ".tmp"
            torch.onnx.export(model, ([torch.rand(3, size, size)],), tmp, opset_version=opset,
                              input_names=["image"], output_names=["boxes", "scores", "labels"])
            os.replace(tmp, path)
        print(f"{name}_op{opset} {path}")


def main():
    out_dir = sys.argv[1]
    os.makedirs(out_dir, exist_ok=True)
    for name in sys.argv[2:] or list(ARCHITECTURES) + list(DETECTORS):
        (export_detector if name in DETECTORS else export)(name, out_dir)


if __name__ == "__main__":
    main()
