#!/usr/bin/python3
"""Throughput of `qforge eval` against PyTorch eager on the zoo, in one run: same model (the
original module with the ONNX file's weights), same test images, same batch size, same thread
count. Reports images/s of the model alone for both, their ratio qforge / PyTorch, and qforge's
end-to-end rate (data loading and scoring included).

Usage: bench/eval_vs_pytorch.py [--qforge build/qforge] [--models resnet vit] [--batch 100]
                                [--limit 5000] [--threads 2] [--rounds 2] [--json]
"""
import argparse
import json
import os
import subprocess
import sys
import time

import torch

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "zoo"))
import zoo  # noqa: E402


@torch.no_grad()
def torch_images_per_second(module, x, batch):
    module(x[:batch])  # warm-up
    start = time.perf_counter()
    for i in range(0, len(x), batch):
        module(x[i:i + batch])
    return len(x) / (time.perf_counter() - start)


def qforge_rates(qforge, path, batch, limit, noise, threads):
    cmd = [qforge, "eval", path, "--data", "fashion-mnist:test", "--batch", str(batch),
           "--limit", str(limit), "--json"]
    if noise:
        cmd += ["--noise", str(noise)]
    env = dict(os.environ, QFORGE_NUM_THREADS=str(threads))
    report = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True,
                                       env=env).stdout)
    return report["model_images_per_second"], report["images_per_second"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--qforge", default=os.path.join(ROOT, "build", "qforge"))
    p.add_argument("--zoo", default=os.path.join(ROOT, "models", "zoo"))
    p.add_argument("--models", nargs="+", default=list(zoo.MODELS))
    p.add_argument("--batch", type=int, default=100)
    p.add_argument("--limit", type=int, default=5000)
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--rounds", type=int, default=2, help="alternate the peers; keep each best")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()
    torch.set_num_threads(args.threads)
    x, _ = zoo.load_split("test")
    x = x[:args.limit]
    rows = []
    for name in args.models:
        path = os.path.join(args.zoo, name + ".onnx")
        module = zoo.load_onnx_weights(zoo.build(name), path)
        noise = zoo.NOISE_SIGMA if zoo.MODELS[name][1] == "denoise" else 0
        inputs = zoo.noisy_test_inputs(x) if noise else x
        best_torch = best_qforge = best_e2e = 0.0
        for _ in range(args.rounds):
            best_torch = max(best_torch, torch_images_per_second(module, inputs, args.batch))
            model_rate, e2e = qforge_rates(args.qforge, path, args.batch, args.limit, noise,
                                           args.threads)
            best_qforge, best_e2e = max(best_qforge, model_rate), max(best_e2e, e2e)
        rows.append({"model": name, "batch": args.batch, "images": len(x),
                     "threads": args.threads, "pytorch_images_per_second": best_torch,
                     "qforge_images_per_second": best_qforge,
                     "qforge_end_to_end_images_per_second": best_e2e,
                     "ratio_qforge_over_pytorch": best_qforge / best_torch})
    if args.json:
        print(json.dumps(rows, indent=2))
        return 0
    print(f"{'model':10s} {'PyTorch img/s':>14s} {'qforge img/s':>13s} {'ratio':>6s} "
          f"{'qforge e2e':>11s}   (batch {args.batch}, {args.threads} threads, "
          f"{len(x)} images)")
    for r in rows:
        print(f"{r['model']:10s} {r['pytorch_images_per_second']:14.0f} "
              f"{r['qforge_images_per_second']:13.0f} {r['ratio_qforge_over_pytorch']:6.2f} "
              f"{r['qforge_end_to_end_images_per_second']:11.0f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
