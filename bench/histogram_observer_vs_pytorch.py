#!/usr/bin/python3
"""qforge's KL (entropy) observer against PyTorch's HistogramObserver on the same data.

Both observe the same stream of 20 batches of 1M float32 values whose range grows batch by
batch, then compute quantization parameters; the script prints both times and their ratio
(target: qforge >= 3x faster), and how good each clipping threshold is, judged on the exact
histogram of the whole stream with two yardsticks:
  - the TensorRT entropy criterion KL(P || Q) (what the KL observer minimises),
  - the mean squared error of int8 symmetric quantization with that threshold.

Run with Debian's Python (torch 1.13):
  /usr/bin/python3 bench/histogram_observer_vs_pytorch.py --bench-binary build/bench/quant_bench
"""
import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import time

import torch
from torch.ao.quantization.observer import HistogramObserver


def make_stream(batches, batch_size, seed):
    """Batch k: a Laplace-tailed mixture whose scale grows with k, plus rare large outliers."""
    gen = torch.Generator().manual_seed(seed)
    stream = []
    for k in range(batches):
        scale = 1.0 + 0.35 * k
        gauss = torch.randn(batch_size, generator=gen) * scale
        u = torch.rand(batch_size, generator=gen).clamp_(1e-7, 1 - 1e-7)
        laplace = -torch.sign(u - 0.5) * torch.log1p(-2 * (u - 0.5).abs()) * scale
        pick = torch.rand(batch_size, generator=gen) < 0.1
        batch = torch.where(pick, laplace, gauss)
        outliers = torch.randint(0, batch_size, (20,), generator=gen)
        batch[outliers] *= 8.0
        stream.append(batch.contiguous())
    return stream


def tensorrt_kl(hist, m, levels):
    """KL(P || Q) of the TensorRT algorithm for keeping bins [0, m) of `hist` (float64 tensor)."""
    n = hist.numel()
    p = hist[:m].clone()
    p[m - 1] += hist[m:].sum()
    merged = m // levels
    q = torch.zeros(m, dtype=torch.float64)
    nonzero = p != 0
    for g in range(levels):
        start = g * merged
        stop = m if g == levels - 1 else start + merged
        total = hist[start:stop].sum()
        nz = int(nonzero[start:stop].sum())
        if nz:
            q[start:stop] = torch.where(nonzero[start:stop], total / nz, torch.zeros(1, dtype=torch.float64))
    if bool(((q == 0) & (p > 0)).any()):
        return math.inf
    p = p / p.sum()
    q = q / q.sum()
    mask = p > 0
    return float((p[mask] * torch.log(p[mask] / q[mask])).sum())


def int8_mse(stream, threshold):
    """Mean squared error of symmetric int8 ([-127, 127]) fake quantization with this threshold."""
    scale = threshold / 127.0
    total = 0.0
    count = 0
    for batch in stream:
        q = torch.fake_quantize_per_tensor_affine(batch, scale, 0, -127, 127)
        total += float(((q - batch).double() ** 2).sum())
        count += batch.numel()
    return total / count


def time_pytorch(stream, repeats):
    best = math.inf
    threshold = None
    for _ in range(repeats):
        start = time.perf_counter()
        obs = HistogramObserver(bins=2048, dtype=torch.qint8, qscheme=torch.per_tensor_symmetric)
        for batch in stream:
            obs(batch)
        scale, zero_point = obs.calculate_qparams()
        best = min(best, time.perf_counter() - start)
        # Symmetric qint8: scale = max(-min, max) / ((127 - (-128)) / 2).
        threshold = float(scale) * 127.5
    return best, threshold, float(scale), int(zero_point)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    here = os.path.dirname(os.path.abspath(__file__))
    parser.add_argument("--bench-binary", default=os.path.join(here, "..", "build", "bench", "quant_bench"))
    parser.add_argument("--batches", type=int, default=20)
    parser.add_argument("--batch-size", type=int, default=1_000_000)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()

    torch.set_num_threads(args.threads)
    stream = make_stream(args.batches, args.batch_size, args.seed)
    with tempfile.NamedTemporaryFile(suffix=".f32", delete=False) as f:
        path = f.name
        for batch in stream:
            f.write(batch.numpy().tobytes())
    try:
        env = dict(os.environ, QFORGE_NUM_THREADS=str(args.threads))
        out = subprocess.run(
            [args.bench_binary, "--histogram-stream=" + path, "--batch-size=%d" % args.batch_size,
             "--repeats=%d" % args.repeats, "--json"],
            check=True, capture_output=True, text=True, env=env)
        ours = json.loads(out.stdout.strip().splitlines()[-1])
    finally:
        os.unlink(path)

    pt_seconds, pt_threshold, pt_scale, pt_zp = time_pytorch(stream, args.repeats)

    # Judge both thresholds on the exact 2048-bin |x| histogram of the whole stream.
    amax = max(float(b.abs().max()) for b in stream)
    hist = torch.zeros(2048, dtype=torch.float64)
    for b in stream:
        hist += torch.histc(b.abs(), bins=2048, min=0.0, max=amax).double()
    width = amax / 2048

    def kl_of(threshold):
        m = min(max(int(round(threshold / width - 0.5)), 128), 2048)
        return tensorrt_kl(hist, m, 128)

    print("stream: %d batches x %d float32, max |x| %.4g, %d threads"
          % (args.batches, args.batch_size, amax, args.threads))
    print("qforge KlObserver          : %8.4f s   threshold %.5g  (scale %.6g)"
          % (ours["seconds"], ours["threshold"], ours["scale"]))
    print("PyTorch HistogramObserver  : %8.4f s   threshold %.5g  (scale %.6g, zero point %d)"
          % (pt_seconds, pt_threshold, pt_scale, pt_zp))
    print("speed ratio (PyTorch / qforge): %.1fx  (target >= 3x)" % (pt_seconds / ours["seconds"]))
    kl_ours, kl_pt = kl_of(ours["threshold"]), kl_of(pt_threshold)
    mse_ours, mse_pt = int8_mse(stream, ours["threshold"]), int8_mse(stream, pt_threshold)
    print("KL(P||Q) on the exact stream histogram: qforge %.6g, PyTorch %.6g -> %s"
          % (kl_ours, kl_pt, "qforge identical or better" if kl_ours <= kl_pt * (1 + 1e-9) else "PyTorch better"))
    print("int8 MSE with each threshold:          qforge %.6g, PyTorch %.6g" % (mse_ours, mse_pt))
    return 0


if __name__ == "__main__":
    sys.exit(main())
