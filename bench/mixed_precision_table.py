#!/usr/bin/env python3
"""Mixed precision under a weight-bits budget against the uniform widths (issue #21), over several
calibration subsets: for each `--calib-shuffle` seed, `qforge quantize --bits-budget B --eval ...`
chooses one width per unit and measures every uniform width in the same run. Prints a markdown
table per seed (the choice, uniform W(b-1), W(b), W(b+1), the line between W(b-1) and W(b+1) at
the chosen size, and the nearest-width interpolation qforge reports) and the mean and spread of the
differences. On a model whose top-1 moves by a few images between widths, one calibration set
cannot tell the choice from the uniform width; several can.

    bench/mixed_precision_table.py [--qforge build/qforge] [--model models/zoo/resnet.onnx]
        [--backend Academic] [--budget 5] [--seeds 1-8] [--calib-batches 32]
        [--eval fashion-mnist:test] [--tune-metric auto|top1|sqnr] [--json FILE]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def seeds_of(text):
    if "-" in text:
        first, last = text.split("-")
        return list(range(int(first), int(last) + 1))
    return [int(s) for s in text.split(",")]


def run_seed(args, seed, out):
    cmd = [args.qforge, "quantize", args.model, "--backend", args.backend,
           "--calib-batches", str(args.calib_batches), "--calib-shuffle", str(seed),
           "--eval", args.eval, "--tune-metric", args.tune_metric, "--bits-budget", str(args.budget), "--no-deploy", "--json",
           "--out", out]
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode != 0:
        sys.exit(f"{' '.join(cmd)}: {done.stderr.strip()}")
    return json.loads(done.stdout)["mixed_precision"]


def uniform(mp, bits):
    for trial in mp["trials"]:
        if trial["change"] == f"uniform W{bits}":
            return trial
    sys.exit(f"the run measured no uniform W{bits}: the backend does not allow it")


def line_at(low, high, bits):
    """The metric of the straight line from `low` to `high` (trials) at `bits` per weight."""
    x0, x1 = low["avg_weight_bits"], high["avg_weight_bits"]
    return low["metric"] + (high["metric"] - low["metric"]) * (bits - x0) / (x1 - x0)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--qforge", default=os.path.join(ROOT, "build", "qforge"))
    parser.add_argument("--model", default=os.path.join(ROOT, "models", "zoo", "resnet.onnx"))
    parser.add_argument("--backend", default="Academic")
    parser.add_argument("--budget", type=int, default=5, help="average weight bits (whole)")
    parser.add_argument("--seeds", default="1-8")
    parser.add_argument("--calib-batches", type=int, default=32)
    parser.add_argument("--eval", default="fashion-mnist:test")
    parser.add_argument("--tune-metric", default="auto")
    parser.add_argument("--json")
    args = parser.parse_args()

    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for seed in seeds_of(args.seeds):
            mp = run_seed(args, seed, os.path.join(tmp, f"seed{seed}"))
            below, at, above = (uniform(mp, args.budget + d) for d in (-1, 0, 1))
            rows.append({"seed": seed, "float": mp["float"], "mixed": mp["chosen_metric"],
                         "mixed_bits": mp["average_bits"], "below": below["metric"],
                         "at": at["metric"], "at_bits": at["avg_weight_bits"],
                         "above": above["metric"],
                         "line": line_at(below, above, mp["average_bits"]),
                         "nearest": mp["uniform_interpolated"], "seconds": mp["seconds"]})
            print(f"seed {seed}: mixed {rows[-1]['mixed']:.2f}, W{args.budget} {at['metric']:.2f}",
                  file=sys.stderr)

    b = args.budget
    print(f"| calibration seed | float | mixed (bits) | W{b - 1} | W{b} (bits) | W{b + 1} | "
          f"W{b - 1}-W{b + 1} line | nearest widths | seconds |")
    print("|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        # SQNR has no float figure (the float model is its reference).
        float_text = "-" if r["float"] is None else f"{r['float']:.2f}"
        print(f"| {r['seed']} | {float_text} | {r['mixed']:.2f} ({r['mixed_bits']:.2f}) | "
              f"{r['below']:.2f} | {r['at']:.2f} ({r['at_bits']:.2f}) | {r['above']:.2f} | "
              f"{r['line']:.2f} | {r['nearest']:.2f} | {r['seconds']:.0f} |")
    for name, key in ((f"W{b}", "at"), (f"W{b - 1}-W{b + 1} line", "line"),
                      ("nearest widths", "nearest")):
        diffs = [r["mixed"] - r[key] for r in rows]
        print(f"\nmixed - {name}: mean {statistics.mean(diffs):+.3f}, median "
              f"{statistics.median(diffs):+.3f}, range {min(diffs):+.3f}..{max(diffs):+.3f}, "
              f"mixed ahead or equal in {sum(d >= -1e-9 for d in diffs)} of {len(diffs)}", end="")
    print()
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
