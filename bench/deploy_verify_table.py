#!/usr/bin/env python3
"""Deployed accuracy vs simulated accuracy: for every (model, backend) pair runs `qforge quantize`
(naive PTQ, 32 calibration batches of 64 train images) and then `qforge verify` on the test
split, and prints a markdown table: top-1 of qforge's simulation, of ONNX Runtime on the exported
QDQ and QOperator models and of qforge's integer emulation, top-1 agreement, and output
differences in units of the output's quantization step.

    bench/deploy_verify_table.py [--qforge build/qforge] [--models resnet,mobilenet,vit]
                                 [--backends TensorRT,QDQ,ONNX_QNN] [--limit N] [--json FILE]
ONNX Runtime comes from $QFORGE_ORT_DIR (scripts/install-ort.sh installs it; default build/ort).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def run(cmd):
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode not in (0, 1) or not done.stdout.strip().startswith("{"):
        raise RuntimeError(f"{' '.join(cmd)}: {done.stderr.strip()}")
    return json.loads(done.stdout)


def verify_pair(qforge, model, backend, limit):
    with tempfile.TemporaryDirectory() as out:
        run([qforge, "quantize", os.path.join(ROOT, "models/zoo", model + ".onnx"),
             "--backend", backend, "--calib", "fashion-mnist:train", "--calib-batches", "32",
             "--calib-batch", "64", "--out", out, "--json"])
        cmd = [qforge, "verify", out, "--data", "fashion-mnist:test", "--json"]
        if limit:
            cmd += ["--limit", str(limit)]
        return run(cmd)


def pct(x):
    return f"{100 * x:.2f}" if x is not None else "-"


def print_table(rows):
    print("| model | backend | qforge sim (int32 biases as ORT) | ORT QDQ | ORT QOperator "
          "| qforge emulation | ORT vs reference | top-1 agreement | max / p99 steps "
          "| exact elements | passed |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['model']} | {r['backend']} | error | | | | | | | | |")
            continue
        acc = r["accuracy"]
        sim = pct(acc.get("qforge simulation"))
        if "qforge simulation, int32 biases as ONNX Runtime" in acc:
            sim += f" ({pct(acc['qforge simulation, int32 biases as ONNX Runtime'])})"
        for c in r["comparisons"]:
            judged = "" if c.get("judged", True) else " (diagnostic)"
            print(f"| {r['model']} | {r['backend']} | {sim} "
                  f"| {pct(acc.get('ONNX Runtime, QDQ model'))} "
                  f"| {pct(acc.get('ONNX Runtime, QOperator model'))} "
                  f"| {pct(acc.get('qforge integer emulation'))} "
                  f"| {c['model']} vs {c['reference']}{judged} "
                  f"| {c['top1_agree']}/{c['samples']} ({pct(c['top1_agreement'])}%) "
                  f"| {c['max_steps']:.2f} / {c['p99_steps']:.2f} | {pct(c['exact_fraction'])}% "
                  f"| {'yes' if r['passed'] else 'no: ' + '; '.join(r['failures'])} |")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--qforge", default=os.path.join(ROOT, "build/qforge"))
    p.add_argument("--models", default="resnet,mobilenet,vit")
    p.add_argument("--backends", default="TensorRT,QDQ,ONNX_QNN")
    p.add_argument("--limit", type=int, default=0, help="verify only N test images (quick runs)")
    p.add_argument("--json", help="write every result here")
    p.add_argument("--from-json", help="print the table of an earlier --json file, run nothing")
    a = p.parse_args()
    os.environ.setdefault("QFORGE_ORT_DIR", os.path.join(ROOT, "build/ort"))
    if a.from_json:
        with open(a.from_json) as f:
            print_table(json.load(f))
        return
    rows = []
    for model in a.models.split(","):
        for backend in a.backends.split(","):
            try:
                r = verify_pair(a.qforge, model, backend, a.limit)
            except RuntimeError as e:
                print(f"{model} {backend}: ERROR {e}", file=sys.stderr)
                rows.append({"model": model, "backend": backend, "error": str(e)})
                continue
            r.update(model=model, backend=backend)
            rows.append(r)
            print(f"{model:10s} {backend:10s} passed={r['passed']}", file=sys.stderr)
    print_table(rows)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
