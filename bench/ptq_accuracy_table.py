#!/usr/bin/env python3
"""Naive PTQ accuracy of the zoo models across backends: runs `qforge quantize` for every
(model, backend[, config]) pair with 32 calibration batches of 64 train images and the full test
split, and prints a markdown table of float vs quantized top-1 and the drop in points.

    bench/ptq_accuracy_table.py [--qforge build/qforge] [--models resnet,mobilenet,vit]
                                [--backends TensorRT,SNPE,OpenVINO,QDQ,Academic] [--json FILE]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
LOW_BIT_ROWS = [("W4A8 MinMax", "w4a8_minmax.yaml"), ("W4A8 MSE", "w4a8_mse.yaml"),
                ("W4A4 MinMax", "w4a4_minmax.yaml"), ("W4A4 MSE", "w4a4_mse.yaml")]


def quantize(qforge, model, backend, config, limit):
    with tempfile.TemporaryDirectory() as out:
        cmd = [qforge, "quantize", os.path.join(ROOT, "models/zoo", model + ".onnx"),
               "--backend", backend, "--calib", "fashion-mnist:train", "--calib-batches", "32",
               "--calib-batch", "64", "--eval", "fashion-mnist:test", "--out", out, "--json"]
        if config:
            cmd += ["--config", os.path.join(ROOT, "bench/configs", config)]
        if limit:
            cmd += ["--eval-limit", str(limit)]
        done = subprocess.run(cmd, capture_output=True, text=True)
        if done.returncode != 0:
            return {"error": done.stderr.strip()}
        return json.loads(done.stdout)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--qforge", default=os.path.join(ROOT, "build/qforge"))
    p.add_argument("--models", default="resnet,mobilenet,vit")
    p.add_argument("--backends", default="TensorRT,SNPE,OpenVINO,QDQ,Academic")
    p.add_argument("--low-bit-backend", default="Academic")
    p.add_argument("--limit", type=int, default=0, help="evaluate only N test images (quick runs)")
    p.add_argument("--json", help="write every result here")
    a = p.parse_args()
    rows = []
    for model in a.models.split(","):
        runs = [(b, b, None) for b in a.backends.split(",")]
        runs += [(f"{a.low_bit_backend} {name}", a.low_bit_backend, cfg) for name, cfg in LOW_BIT_ROWS]
        for label, backend, config in runs:
            r = quantize(a.qforge, model, backend, config, a.limit)
            rows.append({**r, "model": model, "config": label})
            if "error" in r:
                print(f"{model:10s} {label:22s} ERROR {r['error']}", file=sys.stderr)
            else:
                print(f"{model:10s} {label:22s} {100 * r['float']['top1']:.2f} -> "
                      f"{100 * r['quantized']['top1']:.2f}", file=sys.stderr)
    print("| model | backend / config | float top-1 | quantized top-1 | drop (points) | prepare+calibrate s |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['model']} | {r['config']} | | error: {r['error'][:80]} | | |")
            continue
        s = r["seconds"]
        print(f"| {r['model']} | {r['config']} | {100 * r['float']['top1']:.2f}% | "
              f"{100 * r['quantized']['top1']:.2f}% | {r['top1_drop_points']:.2f} | "
              f"{s['prepare'] + s['calibrate']:.2f} |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
