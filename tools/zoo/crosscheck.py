#!/usr/bin/python3
"""Cross-check: qforge's float results on the zoo equal PyTorch's.

For each zoo model, PyTorch runs the original module (tools/zoo/zoo.py's class, with the
weights read back from the exported ONNX file) on the full Fashion-MNIST test set, and
`qforge eval --dump-outputs` runs the ONNX file on the same data. Passes when, per model:
  classifiers: the same number of correct top-1 predictions, and max |logit diff| <= 1e-4;
  denoiser:    max |output diff| <= 1e-4 on the same noisy inputs (qforge's --noise is
               reproduced bit for bit from ATen's generator), and the same PSNR to 1e-3 dB.

Usage: tools/zoo/crosscheck.py [--qforge build/qforge] [--zoo models/zoo] [--models resnet vit]
                               [--limit N] [--threads 2] [--json FILE]
Exits 1 when any model fails.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, "..", ".."))
sys.path.insert(0, HERE)
import zoo  # noqa: E402

TOLERANCE = 1e-4


def qforge_eval(qforge, model_path, limit, batch, noise, threads, dump):
    cmd = [qforge, "eval", model_path, "--data", "fashion-mnist:test", "--batch", str(batch),
           "--json", "--dump-outputs", dump]
    if limit:
        cmd += ["--limit", str(limit)]
    if noise:
        cmd += ["--noise", str(noise), "--metric", "psnr"]
    env = dict(os.environ, QFORGE_NUM_THREADS=str(threads))
    out = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)} failed: {out.stderr.strip()}")
    return json.loads(out.stdout), np.load(dump)


@torch.no_grad()
def torch_outputs(module, x, batch):
    return torch.cat([module(x[i:i + batch]) for i in range(0, len(x), batch)])


def check(name, args, x, y):
    path = os.path.join(args.zoo, name + ".onnx")
    module = zoo.load_onnx_weights(zoo.build(name), path)
    denoise = zoo.MODELS[name][1] == "denoise"
    inputs = zoo.noisy_test_inputs(x) if denoise else x
    ref = torch_outputs(module, inputs, args.batch)
    with tempfile.TemporaryDirectory() as tmp:
        report, ours = qforge_eval(args.qforge, path, args.limit, args.batch,
                                   zoo.NOISE_SIGMA if denoise else 0, args.threads,
                                   os.path.join(tmp, "out.npy"))
    ours = torch.from_numpy(ours)
    row = {"model": name, "samples": len(x),
           "max_abs_diff": (ours - ref).abs().max().item() if ours.shape == ref.shape else None}
    ok = row["max_abs_diff"] is not None and row["max_abs_diff"] <= TOLERANCE
    if denoise:
        psnr, _ = zoo.psnr_per_image(ref, x)
        row["torch_psnr_db"] = psnr.mean().item()
        row["qforge_psnr_db"] = report["psnr_db"]
        ok = ok and abs(row["torch_psnr_db"] - row["qforge_psnr_db"]) <= 1e-3
    else:
        row["torch_top1_correct"] = int((ref.argmax(1) == y).sum())
        row["qforge_top1_correct"] = report["top1_correct"]
        # The dumped logits must give qforge's own count too (the dump is what was scored).
        row["dump_top1_correct"] = int((ours.argmax(1) == y).sum())
        ok = ok and row["torch_top1_correct"] == row["qforge_top1_correct"] == \
            row["dump_top1_correct"]
    row["ok"] = bool(ok)
    return row


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--qforge", default=os.path.join(ROOT, "build", "qforge"))
    p.add_argument("--zoo", default=os.path.join(ROOT, "models", "zoo"))
    p.add_argument("--models", nargs="+", default=list(zoo.MODELS))
    p.add_argument("--limit", type=int, default=0, help="first N test images (0: all 10,000)")
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--json", help="also write the rows to this file")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    x, y = zoo.load_split("test")
    if args.limit:
        x, y = x[:args.limit], y[:args.limit]
    rows = []
    for name in args.models:
        row = check(name, args, x, y)
        rows.append(row)
        if "torch_top1_correct" in row:
            detail = (f"top-1 correct: PyTorch {row['torch_top1_correct']}, "
                      f"qforge {row['qforge_top1_correct']}")
        else:
            detail = (f"PSNR: PyTorch {row['torch_psnr_db']:.4f} dB, "
                      f"qforge {row['qforge_psnr_db']:.4f} dB")
        print(f"{'PASS' if row['ok'] else 'FAIL'} {name:10s} {row['samples']} images  {detail}  "
              f"max |diff| {row['max_abs_diff']:.3g} (<= {TOLERANCE:g})", flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=2)
    passed = sum(r["ok"] for r in rows)
    print(f"crosscheck: {passed} passed, {len(rows) - passed} failed")
    return 0 if passed == len(rows) else 1


if __name__ == "__main__":
    sys.exit(main())
