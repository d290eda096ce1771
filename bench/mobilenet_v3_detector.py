#!/usr/bin/python3
"""A mobile object-mask detector of the kind issue #18 names, built here and trained on a real
task so that its thresholded output means something: torchvision's MobileNetV3-Small backbone
(HardSwish, squeeze-excitation gates with HardSigmoid) under a small U-Net decoder (ConvTranspose
and Resize upsampling, skip Concats, a HardSigmoid-gated skip, a sigmoid head). The task: find
the Fashion-MNIST garment pasted at a random place and scale on a smooth random background; the
target is the garment's mask. Exported with Debian's torch at opsets 11 and 13 (batch dynamic),
then for each backend: `qforge quantize` (naive W8A8 PTQ on photographs of the task), `qforge
verify` (ONNX Runtime's QDQ model against the simulation), and the IoU of ONNX Runtime's
thresholded mask on the QDQ model against ONNX Runtime's on the float model.

  QFORGE_ORT_DIR=build/ort /usr/bin/python3 bench/mobilenet_v3_detector.py \\
      [--backends TensorRT,ONNXRuntime,SNPE,OpenVINO] [--opsets 11,13] [--cache build/corpus/detector]

The model is trained once (about a minute on 2 cores, seeded) and cached with its sample folders
under --cache; nothing is committed. Prints a markdown table.
"""
import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch
import torch.nn.functional as F
import torchvision.models as tvm

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SIZE = 96
FASHION = "/usr/share/datasets/fashion-mnist"


def fashion_images(split):
    with gzip.open(os.path.join(FASHION, f"{split}-images-idx3-ubyte.gz")) as f:
        return np.frombuffer(f.read(), np.uint8, offset=16).reshape(-1, 28, 28)


def scenes(garments, count, seed):
    """`count` [3, SIZE, SIZE] images in [0, 1] and their [1, SIZE, SIZE] masks: a garment scaled
    to 40-72 pixels, tinted, pasted on a smooth coloured background at a random place."""
    rng = np.random.default_rng(seed)
    images = np.empty((count, 3, SIZE, SIZE), np.float32)
    masks = np.empty((count, 1, SIZE, SIZE), np.float32)
    for i in range(count):
        low = torch.from_numpy(rng.uniform(0, 1, (1, 3, 6, 6)).astype(np.float32))
        background = F.interpolate(low, size=(SIZE, SIZE), mode="bicubic",
                                   align_corners=False)[0].clamp(0, 1).numpy()
        g = garments[rng.integers(len(garments))].astype(np.float32) / 255
        side = int(rng.integers(40, 73))
        g = F.interpolate(torch.from_numpy(g)[None, None], size=(side, side), mode="bilinear",
                          align_corners=False)[0, 0].numpy()
        y, x = rng.integers(0, SIZE - side + 1, 2)
        alpha = np.zeros((SIZE, SIZE), np.float32)
        alpha[y:y + side, x:x + side] = g
        tint = rng.uniform(0.3, 1.0, 3).astype(np.float32)[:, None, None]
        images[i] = background * (1 - alpha) + tint * alpha
        masks[i, 0] = alpha > 0.15
    return images, masks


class Detector(torch.nn.Module):
    def __init__(self):
        super().__init__()
        features = tvm.mobilenet_v3_small().features
        self.stem = features[:2]     # stride 4, 16 channels
        self.mid = features[2:4]     # stride 8, 24 channels
        self.deep = features[4:9]    # stride 16, 48 channels
        self.up_deep = torch.nn.ConvTranspose2d(48, 24, 2, stride=2)
        self.gate = torch.nn.Sequential(torch.nn.Conv2d(24, 24, 1), torch.nn.Hardsigmoid())
        self.fuse_mid = torch.nn.Sequential(torch.nn.Conv2d(48, 24, 3, padding=1),
                                            torch.nn.BatchNorm2d(24), torch.nn.Hardswish())
        self.fuse_stem = torch.nn.Sequential(torch.nn.Conv2d(40, 16, 3, padding=1),
                                             torch.nn.BatchNorm2d(16), torch.nn.ReLU6())
        self.head = torch.nn.Conv2d(16, 1, 1)

    def forward(self, x):
        s4 = self.stem(x)
        s8 = self.mid(s4)
        s16 = self.deep(s8)
        up = self.up_deep(s16)
        m = self.fuse_mid(torch.cat([up, s8 * self.gate(s8)], 1))
        m = F.interpolate(m, scale_factor=2.0, mode="bilinear", align_corners=False)
        s = self.fuse_stem(torch.cat([m, s4], 1))
        logits = F.interpolate(self.head(s), scale_factor=4.0, mode="nearest")
        return torch.sigmoid(logits)


def adam_steps(model, inputs, targets, loss_fn, steps, lr, tag):
    """`steps` Adam steps on batches of 32 drawn with a seeded generator per step, the loss
    printed every 100 steps after `tag`; leaves the model in eval mode."""
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    model.train()
    for step in range(steps):
        idx = np.random.default_rng(step).integers(0, len(inputs), 32)
        x, y = torch.from_numpy(inputs[idx]), torch.from_numpy(targets[idx])
        loss = loss_fn(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 100 == 0:
            print(f"{tag}: step {step} loss {loss.item():.4f}", file=sys.stderr)
    return model.eval()


def train(cache):
    torch.manual_seed(0)
    torch.set_num_threads(int(os.environ.get("QFORGE_NUM_THREADS", os.cpu_count() or 1)))
    images, masks = scenes(fashion_images("train"), 6000, seed=1)
    model = adam_steps(Detector(), images, masks, F.binary_cross_entropy, 600, 2e-3,
                       "mobilenet_v3_detector.py")
    test_x, test_y = scenes(fashion_images("t10k"), 256, seed=2)
    with torch.no_grad():
        pred = model(torch.from_numpy(test_x)).numpy() > 0.5
    inter = np.logical_and(pred, test_y > 0.5).sum()
    union = np.logical_or(pred, test_y > 0.5).sum()
    print(f"mobilenet_v3_detector.py: float IoU against the true masks {inter / union:.3f}",
          file=sys.stderr)
    return model


def prepare(cache):
    os.makedirs(cache, exist_ok=True)
    paths = {op: os.path.join(cache, f"mobilenet_v3_detector_op{op}.onnx") for op in (11, 13)}
    if not all(os.path.exists(p) for p in paths.values()):
        model = train(cache)
        for opset, path in paths.items():
            torch.onnx.export(model, torch.zeros(1, 3, SIZE, SIZE), path + ".tmp",
                              opset_version=opset, input_names=["image"], output_names=["mask"],
                              dynamic_axes={"image": {0: "batch"}, "mask": {0: "batch"}})
            os.replace(path + ".tmp", path)
    for split, seed, count in (("calib", 3, 256), ("eval", 4, 64)):
        folder = os.path.join(cache, split)
        if os.path.isdir(folder):
            continue
        images, _ = scenes(fashion_images("t10k" if split == "eval" else "train"), count, seed)
        os.makedirs(folder + ".tmp", exist_ok=True)
        for i, image in enumerate(images):
            np.save(os.path.join(folder + ".tmp", f"{i:03d}.npy"), image)
        os.replace(folder + ".tmp", folder)
    return paths


def ort_masks(model, images_npy, work):
    out = tempfile.mkdtemp(dir=work)
    done = subprocess.run(
        ["node", os.path.join(ROOT, "tools/ort/run_model.js"), "--model", model, "--input",
         "image", images_npy, "--out-dir", out, "--ort-dir",
         os.environ.get("QFORGE_ORT_DIR", os.path.join(ROOT, "build/ort"))],
        capture_output=True, text=True)
    if done.returncode != 0:
        raise RuntimeError(done.stderr.strip().splitlines()[-1])
    return np.load(os.path.join(out, "output_0.npy"))


def iou(a, b):
    union = np.logical_or(a, b).sum()
    return 1.0 if union == 0 else float(np.logical_and(a, b).sum() / union)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--qforge", default=os.path.join(ROOT, "build/qforge"))
    p.add_argument("--cache", default=os.path.join(ROOT, "build/corpus/detector"))
    p.add_argument("--backends", default="TensorRT,ONNXRuntime,SNPE,OpenVINO")
    p.add_argument("--opsets", default="11,13")
    a = p.parse_args()
    paths = prepare(a.cache)
    calib = "folder:" + os.path.join(a.cache, "calib")
    evaluation = os.path.join(a.cache, "eval")
    print("| opset | backend | verify | ORT QDQ vs simulation | mask IoU, ORT QDQ vs ORT float |")
    print("|---|---|---|---|---|")
    with tempfile.TemporaryDirectory() as work:
        batch = np.stack([np.load(os.path.join(evaluation, f))
                          for f in sorted(os.listdir(evaluation))])
        images_npy = os.path.join(work, "images.npy")
        np.save(images_npy, batch)
        for opset in [int(o) for o in a.opsets.split(",")]:
            reference = ort_masks(paths[opset], images_npy, work) > 0.5
            for backend in a.backends.split(","):
                out = os.path.join(work, f"{backend}_{opset}")
                done = subprocess.run(
                    [a.qforge, "quantize", paths[opset], "--backend", backend, "--calib", calib,
                     "--calib-batches", "8", "--calib-batch", "32", "--out", out, "--quiet"],
                    capture_output=True, text=True)
                if done.returncode != 0:
                    print(f"| {opset} | {backend} | no: {done.stderr.strip()[:150]} | | |")
                    continue
                done = subprocess.run(
                    [a.qforge, "verify", out, "--data", "folder:" + evaluation, "--limit", "64",
                     "--iou-threshold", "0.5", "--json"], capture_output=True, text=True)
                report = json.loads(done.stdout) if done.stdout.strip().startswith("{") else {}
                verdict = "ok" if done.returncode == 0 else \
                    "MISMATCH: " + "; ".join(report.get("failures", [done.stderr.strip()]))[:150]
                sim = next((c for c in report.get("comparisons", [])
                            if c.get("model") == "qdq" and c.get("reference") == "simulation"),
                           None)
                agreement = "-" if sim is None else \
                    f"max {sim['max_steps']:.3g} steps, exact {100 * sim['exact_fraction']:.1f}%"
                quantized = ort_masks(os.path.join(out, "model.qdq.onnx"), images_npy, work)
                print(f"| {opset} | {backend} | {verdict} | {agreement} | "
                      f"{iou(quantized > 0.5, reference):.4f} |", flush=True)


if __name__ == "__main__":
    main()
