#!/usr/bin/python3
"""The corpus's MobileNetV3-Small and EfficientNet-B0 carry random weights (no pretrained weights
can be downloaded here), and random networks amplify any perturbation, so their W8A8 output SQNR
says little about the architectures. This trains both here on a real task and measures the same
figures as bench/tensorrt_sqnr.py, so the two can be told apart: torchvision's architectures
(10 classes) trained on Fashion-MNIST's photographs, scaled to 64 x 64 with the grey channel
repeated and normalised with ImageNet's mean and deviation as torchvision's classifiers take
them, with Adam (seeded), exported by Debian's torch at the corpus's lowest opsets (MobileNetV3 9,
EfficientNet 11).

Per model: float top-1 on 1,000 test images; then, on 64 held-out test images, the output SQNR of
ONNX Runtime running the QDQ model against ONNX Runtime running the float model for naive PTQ
(64 calibration images from the training split) and with the observers tuned on 64 other test
images (`--target-sqnr 20 --max-trials 5`: every unit stays 8-bit), and the top-1 on the held-out
images of ORT's float model and of both QDQ models. The SQNRs pool all held-out images, as
tensorrt_sqnr.py's do; the median of the per-image figures follows in brackets.

  QFORGE_ORT_DIR=build/ort /usr/bin/python3 bench/trained_classifiers.py \\
      [--backend TensorRT] [--cache build/corpus/trained]

The models train once (a few minutes each on 2 cores) and are cached with their images under
--cache; nothing is committed. Prints a markdown table.
"""
import argparse
import gzip
import os
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
import torchvision.models as tvm

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus_table as ct  # noqa: E402
import tensorrt_sqnr as ts  # noqa: E402
from mobilenet_v3_detector import FASHION, adam_steps  # noqa: E402

# name -> (constructor, opset, Adam steps of 32, learning rate). EfficientNet's float model
# trained so answers a few images with logits of +-170, which dominate a pooled SQNR; 800 steps at
# 5e-4 gave a worse model (top-1 0.778 against 0.816).
ARCHITECTURES = {
    "mobilenet_v3_small": (lambda: tvm.mobilenet_v3_small(num_classes=10), 9, 600, 2e-3),
    "efficientnet_b0": (lambda: tvm.efficientnet_b0(num_classes=10), 11, 600, 2e-3),
}
SIZE = 64
MEAN = np.array([0.485, 0.456, 0.406], np.float32)[:, None, None]
STD = np.array([0.229, 0.224, 0.225], np.float32)[:, None, None]


def fashion(split, rows):
    """Fashion-MNIST images `rows` of `split` as [n, 3, SIZE, SIZE] model inputs, and labels."""
    with gzip.open(os.path.join(FASHION, f"{split}-images-idx3-ubyte.gz")) as f:
        images = np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)[rows]
    with gzip.open(os.path.join(FASHION, f"{split}-labels-idx1-ubyte.gz")) as f:
        labels = np.frombuffer(f.read(), np.uint8, offset=8)[rows].astype(np.int64)
    x = torch.from_numpy(images.astype(np.float32) / 255)
    x = F.interpolate(x, size=(SIZE, SIZE), mode="bilinear", align_corners=False).numpy()
    return ((np.repeat(x, 3, axis=1) - MEAN) / STD).astype(np.float32), labels


def train(name, cache):
    build, opset, steps, lr = ARCHITECTURES[name]
    path = os.path.join(cache, f"{name}_trained_op{opset}.onnx")
    if os.path.exists(path):
        return path
    torch.manual_seed(0)
    torch.set_num_threads(int(os.environ.get("QFORGE_NUM_THREADS", os.cpu_count() or 1)))
    images, labels = fashion("train", slice(0, 20000))
    model = adam_steps(build(), images, labels, F.cross_entropy, steps, lr,
                       f"trained_classifiers.py: {name}")
    test_x, test_y = fashion("t10k", slice(1000, 2000))
    with torch.no_grad():
        top1 = (model(torch.from_numpy(test_x)).argmax(1).numpy() == test_y).mean()
    print(f"trained_classifiers.py: {name} float top-1 on 1,000 test images {top1:.3f}",
          file=sys.stderr)
    os.makedirs(cache, exist_ok=True)
    torch.onnx.export(model, torch.zeros(1, 3, SIZE, SIZE), path + ".tmp", opset_version=opset,
                      input_names=["input"], output_names=["logits"],
                      dynamic_axes={"input": {0: "batch"}, "logits": {0: "batch"}})
    os.replace(path + ".tmp", path)
    with open(path + ".top1", "w") as f:
        f.write(f"{top1:.4f}\n")
    return path


def image_folder(cache, role, split, rows):
    folder = os.path.join(cache, role)
    if not os.path.isdir(folder):
        images, labels = fashion(split, rows)
        os.makedirs(folder + ".tmp", exist_ok=True)
        for i, image in enumerate(images):
            np.save(os.path.join(folder + ".tmp", f"{i:03d}.npy"), image)
        np.save(folder + ".labels.npy", labels)
        os.replace(folder + ".tmp", folder)
    return folder


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--qforge", default=os.path.join(ct.ROOT, "build/qforge"))
    p.add_argument("--cache", default=os.path.join(ct.ROOT, "build/corpus/trained"))
    p.add_argument("--backend", default="TensorRT")
    a = p.parse_args()
    calib = image_folder(a.cache, "calib", "train", slice(50000, 50064))
    val = image_folder(a.cache, "val", "t10k", slice(0, 64))
    held = image_folder(a.cache, "held", "t10k", slice(64, 128))
    held_labels = np.load(held + ".labels.npy")
    print(f"| model | float top-1 | float, input ±½ step | {a.backend} naive | observers tuned | "
          "chosen (validation SQNR) | top-1 on held-out: float / naive / tuned |")
    print("|---|---|---|---|---|---|---|")
    for name in ARCHITECTURES:
        path = train(name, a.cache)
        top1 = float(open(path + ".top1").read())
        with tempfile.TemporaryDirectory() as work:
            runs = ts.stacked_input(a.qforge, path, held, work)
            floor = ct.noise_floor(path, runs, work)
            reference = ct.ort_runs(path, runs, work)[0]
            figures, accuracy = {}, [(reference.argmax(1) == held_labels).mean()]
            for label, extra in (("naive", []),
                                 ("tuned", ["--target-sqnr", "20", "--max-trials", "5",
                                            "--eval", "folder:" + val])):
                with tempfile.TemporaryDirectory() as w:
                    out = ts.quantized(a.qforge, path, a.backend, calib, 64, w, extra)
                    qdq = os.path.join(out, "model.qdq.onnx")
                    got = ct.ort_runs(qdq, runs, w)[0]
                    per_image = [ct.sqnr_db(r, g) for r, g in zip(reference, got)]
                    figures[label] = (f"{ct.sqnr_db(reference, got):.1f} dB "
                                      f"({np.median(per_image):.1f})")
                    accuracy.append((got.argmax(1) == held_labels).mean())
                    if label == "tuned":
                        chosen, validation = ts.chosen_observers(out)
        print(f"| {name} (trained here) | {top1:.3f} | {floor:.1f} dB | {figures['naive']} | "
              f"{figures['tuned']} | {chosen} ({validation:.1f} dB) | "
              f"{' / '.join(f'{v:.3f}' for v in accuracy)} |", flush=True)


if __name__ == "__main__":
    main()
