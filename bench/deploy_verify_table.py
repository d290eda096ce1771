#!/usr/bin/env python3
"""Deployed accuracy vs simulated accuracy: for every (model, backend) pair runs `qforge quantize`
(naive PTQ, 32 calibration batches of 64 train images) and then `qforge verify` on the test
split, and prints a markdown table: top-1 of qforge's simulation, of ONNX Runtime on the exported
QDQ and QOperator models and of qforge's integer emulation, top-1 agreement, and output
differences in units of the output's quantization step.

    bench/deploy_verify_table.py [--qforge build/qforge] [--models resnet,mobilenet,vit,unet]
                                 [--backends TensorRT,QDQ,ONNX_QNN | all] [--limit N]
                                 [--calib-batches 32] [--matrix] [--json FILE]
--matrix prints one line per model and one cell per backend (pass, or the first failure), the
form of issue #18's 16 x 4 proof.
ONNX Runtime comes from $QFORGE_ORT_DIR (scripts/install-ort.sh installs it; default build/ort).
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
# verify's accuracy of the simulation with ORT's int32 biases and fused kernels.
SIM_AS_ORT = "qforge simulation, ONNX Runtime's arithmetic"
ALL_BACKENDS = ["Academic", "Academic_NLP", "NNIE", "ONNX_QNN", "ONNXRuntime", "OpenVINO",
                "PPLCUDA", "PPLW8A16", "QDQ", "QNN", "SNPE", "STPU", "Tengine_u8", "TensorRT",
                "TensorRT_NLP", "Vitis"]


def run(cmd):
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode not in (0, 1) or not done.stdout.strip().startswith("{"):
        raise RuntimeError(f"{' '.join(cmd)}: {done.stderr.strip()}")
    return json.loads(done.stdout)


def verify_pair(qforge, model, backend, limit, calib_batches):
    with tempfile.TemporaryDirectory() as out:
        run([qforge, "quantize", os.path.join(ROOT, "models/zoo", model + ".onnx"),
             "--backend", backend, "--calib", "fashion-mnist:train", "--calib-batches", str(calib_batches),
             "--calib-batch", "64", "--out", out, "--json"])
        cmd = [qforge, "verify", out, "--data", "fashion-mnist:test", "--json"]
        if limit:
            cmd += ["--limit", str(limit)]
        return run(cmd)


def pct(x):
    return f"{100 * x:.2f}" if x is not None else "-"


def print_table(rows):
    print("| model | backend | qforge sim (ORT's arithmetic) | ORT QDQ | ORT QOperator "
          "| qforge emulation | ORT vs reference | top-1 agreement | max / p99 steps "
          "| exact elements | passed |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in rows:
        if "error" in r:
            print(f"| {r['model']} | {r['backend']} | error | | | | | | | | |")
            continue
        acc = r["accuracy"]
        sim = pct(acc.get("qforge simulation"))
        if SIM_AS_ORT in acc:
            sim += f" ({pct(acc[SIM_AS_ORT])})"
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


def print_matrix(rows):
    backends = list(dict.fromkeys(r["backend"] for r in rows))
    models = list(dict.fromkeys(r["model"] for r in rows))
    cell = {(r["model"], r["backend"]): r for r in rows}
    print("| model | " + " | ".join(backends) + " | passed |")
    print("|---|" + "---|" * (len(backends) + 1))
    for m in models:
        cells, passed = [], 0
        for b in backends:
            r = cell.get((m, b))
            if r is None:
                cells.append("-")
            elif "error" in r:
                cells.append("error: " + r["error"].splitlines()[-1][-120:])
            elif r["passed"]:
                cells.append("ok")
                passed += 1
            else:
                cells.append("no: " + r["failures"][0])
        print(f"| {m} | " + " | ".join(cells) + f" | {passed}/{len(backends)} |")


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--qforge", default=os.path.join(ROOT, "build/qforge"))
    p.add_argument("--models", default="resnet,mobilenet,vit")
    p.add_argument("--backends", default="TensorRT,QDQ,ONNX_QNN")
    p.add_argument("--limit", type=int, default=0, help="verify only N test images (quick runs)")
    p.add_argument("--calib-batches", type=int, default=32, help="calibration batches of 64")
    p.add_argument("--matrix", action="store_true", help="one cell per (model, backend)")
    p.add_argument("--json", help="write every result here")
    p.add_argument("--from-json", help="print the table of an earlier --json file, run nothing")
    a = p.parse_args()
    os.environ.setdefault("QFORGE_ORT_DIR", os.path.join(ROOT, "build/ort"))
    if a.from_json:
        with open(a.from_json) as f:
            rows = json.load(f)
        (print_matrix if a.matrix else print_table)(rows)
        return
    if a.backends == "all":
        a.backends = ",".join(ALL_BACKENDS)
    rows = []
    for model in a.models.split(","):
        for backend in a.backends.split(","):
            try:
                r = verify_pair(a.qforge, model, backend, a.limit, a.calib_batches)
            except RuntimeError as e:
                print(f"{model} {backend}: ERROR {e}", file=sys.stderr)
                rows.append({"model": model, "backend": backend, "error": str(e)})
                continue
            r.update(model=model, backend=backend)
            rows.append(r)
            print(f"{model:10s} {backend:10s} passed={r['passed']}", file=sys.stderr)
    (print_matrix if a.matrix else print_table)(rows)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
