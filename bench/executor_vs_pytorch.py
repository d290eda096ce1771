#!/usr/bin/python3
"""Forward latency of qforge's executor against PyTorch eager, in one run, on the same weights,
the same input and the same thread count. Reports the ratio qforge / PyTorch (target <= 1.10).

PyTorch is measured twice: the eager module as torchvision defines it (Conv and BatchNorm as
separate ops), and the same module with BatchNorm folded into Conv (torch.fx's fuse), which is the
graph torch.onnx.export writes and qforge runs. The second is the like-for-like comparison.

Usage: bench/executor_vs_pytorch.py [--qforge build/qforge] [--models-dir build/models]
                                    [--threads N] [--iters 20] [--json]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import onnx.numpy_helper
import torch
import torch.fx.experimental.optimization as fx_opt

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "tools"))
import export_torchvision_models as zoo  # noqa: E402

CASES = [("resnet18", 1), ("resnet18", 8), ("mobilenet_v2", 1), ("mobilenet_v2", 8)]


def torch_median_ms(model, x, iters, warmup):
    with torch.no_grad():
        for _ in range(warmup):
            model(x)
        times = []
        for _ in range(iters):
            start = time.perf_counter()
            model(x)
            times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def qforge_median_ms(qforge, model_path, input_path, iters, warmup, threads):
    env = dict(os.environ, QFORGE_NUM_THREADS=str(threads))
    out = subprocess.run([qforge, "run", model_path, "--input", "input=" + input_path, "--iters",
                          str(iters), "--warmup", str(warmup), "--json"],
                         check=True, capture_output=True, text=True, env=env)
    return json.loads(out.stdout)["median_ms"]


def main():
    root = os.path.join(HERE, "..")
    p = argparse.ArgumentParser(description="qforge executor vs PyTorch eager latency")
    p.add_argument("--qforge", default=os.path.join(root, "build", "qforge"))
    p.add_argument("--models-dir", default=os.path.join(root, "build", "models"))
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--iters", type=int, default=20)
    p.add_argument("--warmup", type=int, default=5)
    p.add_argument("--rounds", type=int, default=2, help="alternate the peers this many times")
    p.add_argument("--json", action="store_true")
    args = p.parse_args()

    torch.set_num_threads(args.threads)
    names = sorted({name for name, _ in CASES})
    subprocess.run([sys.executable, os.path.join(root, "tools", "export_torchvision_models.py"),
                    "--out", args.models_dir, "--models", *names], check=True)
    x1 = {name: onnx.numpy_helper.to_array(onnx.load_tensor(
        os.path.join(args.models_dir, name + ".input.pb"))) for name in names}

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for name, batch in CASES:
            eager = zoo.build(name)
            folded = fx_opt.fuse(zoo.build(name))
            x = torch.from_numpy(x1[name]).repeat(batch, 1, 1, 1).contiguous()
            input_path = os.path.join(tmp, f"{name}_b{batch}.pb")
            with open(input_path, "wb") as f:
                f.write(onnx.numpy_helper.from_array(x.numpy()).SerializeToString())
            model_path = os.path.join(args.models_dir, name + ".onnx")
            t_eager, t_folded, t_qforge = [], [], []
            # Alternate the peers so drifting machine load hits both alike; keep each one's best.
            for _ in range(args.rounds):
                t_eager.append(torch_median_ms(eager, x, args.iters, args.warmup))
                t_folded.append(torch_median_ms(folded, x, args.iters, args.warmup))
                t_qforge.append(qforge_median_ms(args.qforge, model_path, input_path, args.iters,
                                                 args.warmup, args.threads))
            rows.append({"model": name, "batch": batch, "threads": args.threads,
                         "pytorch_eager_ms": min(t_eager), "pytorch_bn_folded_ms": min(t_folded),
                         "qforge_ms": min(t_qforge),
                         "ratio_vs_eager": min(t_qforge) / min(t_eager),
                         "ratio_vs_bn_folded": min(t_qforge) / min(t_folded)})
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(f"{'model':<14}{'batch':>6}{'eager ms':>11}{'folded ms':>11}{'qforge ms':>11}"
          f"{'q/eager':>9}{'q/folded':>10}   (threads={args.threads}, median of {args.iters})")
    for r in rows:
        print(f"{r['model']:<14}{r['batch']:>6}{r['pytorch_eager_ms']:>11.2f}"
              f"{r['pytorch_bn_folded_ms']:>11.2f}{r['qforge_ms']:>11.2f}"
              f"{r['ratio_vs_eager']:>9.3f}{r['ratio_vs_bn_folded']:>10.3f}")


if __name__ == "__main__":
    main()
