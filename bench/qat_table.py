#!/usr/bin/env python3
"""Quantization-aware training on the zoo models (issue #7's proof table): each QAT row is
`qforge qat` from the zoo's float weights (calibrated start, then --epochs over the Fashion-MNIST
train split, top-1 on all 10,000 test images) followed by `qforge verify` of the deployed model,
which runs the QDQ model in ONNX Runtime against qforge's simulation; each PTQ row is
`qforge quantize` (naive calibration, 16 x 64 train images) and the same verify, for comparison.

    QFORGE_ORT_DIR=build/ort /usr/bin/python3 bench/qat_table.py [--rows 'resnet-*,mobilenet-lsq']
        [--qforge build/qforge] [--epochs E] [--limit N] [--eval-limit N]
        [--optimizer sgd|adam] [--lr X] [--schedule cosine|step|none] [--json FILE] [--resume]
    /usr/bin/python3 bench/qat_table.py --list
    /usr/bin/python3 bench/qat_table.py --from-json FILE

Rows (--list): ResNet and MobileNet W4A4 LSQ on TensorRT, ResNet W4A4 with PACT, DSQ, DoReFa and
TQT, and W8A8 QAT (5 epochs) beside W8A8 PTQ for both models. Optimizer, learning rate and
schedule are qforge qat's defaults unless given here. --limit trains on the first N train images
only and --epochs overrides every row's epochs: both for quick runs, not for the table.
"""
import argparse
import fnmatch
import json
import os
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
CONFIGS = os.path.join(ROOT, "bench", "configs")

# id -> (model, backend, bits, algo, epochs); algo "ptq" is `qforge quantize`, naive calibration.
# W4A4 rows use Academic (MQBench's academic setting: BN unfolded, 8-bit first and last layers;
# TensorRT's own deploy format takes 8-bit activations only); W8A8 rows use TensorRT (simulated
# BN folding). The settings each row was measured with are in ROW_FLAGS.
ROWS = {
    "resnet-lsq": ("resnet", "Academic", "W4A4", "lsq", 3),
    "mobilenet-lsq": ("mobilenet", "Academic", "W4A4", "lsq", 5),
    "resnet-pact": ("resnet", "Academic", "W4A4", "pact", 3),
    "resnet-dsq": ("resnet", "Academic", "W4A4", "dsq", 3),
    "resnet-dorefa": ("resnet", "Academic", "W4A4", "dorefa", 3),
    "resnet-tqt": ("resnet", "Academic", "W4A4", "tqt", 3),
    "resnet-w8a8-qat": ("resnet", "TensorRT", "W8A8", "lsq", 5),
    "resnet-w8a8-ptq": ("resnet", "TensorRT", "W8A8", "ptq", 0),
    "mobilenet-w8a8-qat": ("mobilenet", "TensorRT", "W8A8", "lsq", 5),
    "mobilenet-w8a8-ptq": ("mobilenet", "TensorRT", "W8A8", "ptq", 0),
}
# Every QAT row: SGD lr 0.002 (cosine), batch 64, BN frozen for the last epoch. W4A4 starts from
# MSE-searched ranges. W8A8 starts from the backend's own observers (the PTQ model) and trains
# with the loss the zoo models were trained with (label smoothing 0.1): at 8 bits there is no
# quantization error to recover, so QAT beats PTQ only by training the model further, and one
# epoch at a small lr loses a tenth of a point in float too (bench/finetune_control.py).
W4A4_FLAGS = ["--batch", "64", "--lr", "0.002"]
W8A8_FLAGS = ["--batch", "64", "--lr", "0.002", "--label-smoothing", "0.1"]
QAT_CONFIG = {"W4A4": "w4a4_qat.yaml", "W8A8": "w8a8_qat.yaml"}
PTQ_CONFIG = {"W4A4": "w4a4_qat.yaml", "W8A8": "w8a8_default.yaml"}
BACKEND_FILES = {"TensorRT_QDQ": "tensorrt_qdq.json"}  # backends that are not built in


def row_flags(bits, epochs):
    flags = W8A8_FLAGS if bits == "W8A8" else W4A4_FLAGS
    return flags + ["--freeze-bn-epoch", str(max(epochs - 1, 0))]


CALIB = ["--calib-batches", "16", "--calib-batch", "64"]


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def run(cmd):
    """Runs a qforge command that prints one JSON object; exit code 1 is a report that says
    something failed (verify's gates), anything else an error."""
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode not in (0, 1) or not done.stdout.strip().startswith("{"):
        raise RuntimeError(f"{cmd[1]} exit {done.returncode}: {done.stderr.strip()[-600:]}")
    return json.loads(done.stdout)


def fractions(report, keys):
    """qforge qat reports top-1 in percent (its contract), quantize and verify as fractions; the
    float top-1 (~90) tells which, should that change."""
    scale = 100.0 if report.get("float_top1", 0) > 1.0 else 1.0
    return [None if report.get(k) is None else report[k] / scale for k in keys]


def model_path(model):
    return os.path.join(ROOT, "models", "zoo", model + ".onnx")


def backend_arg(backend):
    return os.path.join(CONFIGS, BACKEND_FILES[backend]) if backend in BACKEND_FILES else backend


def verify(a, out):
    cmd = [a.qforge, "verify", out, "--data", "fashion-mnist:test", "--json", "--quiet"]
    if a.eval_limit:
        cmd += ["--limit", str(a.eval_limit)]
    v = run(cmd)
    acc = v["accuracy"]
    # verify judges ORT against the simulation with ORT's int32 biases when it has one.
    sim = acc.get("qforge simulation, ONNX Runtime's arithmetic", acc.get("qforge simulation"))
    return {"ort_qdq": acc.get("ONNX Runtime, QDQ model"), "verify_sim": sim,
            "verify_passed": v.get("passed"), "verify_failures": v.get("failures", [])}


def qat_row(a, row_id, model, backend, bits, algo, epochs, out):
    cmd = [a.qforge, "qat", model_path(model), "--backend", backend_arg(backend), "--algo", algo,
           "--config", os.path.join(CONFIGS, QAT_CONFIG[bits]),
           "--data", "fashion-mnist:train", "--epochs", str(epochs), "--out", out,
           "--eval", "fashion-mnist:test", "--seed", "0", "--json", "--quiet"] + CALIB
    cmd += row_flags(bits, epochs)
    for flag in ("optimizer", "lr", "schedule"):
        if getattr(a, flag) is not None:
            cmd += [f"--{flag}", str(getattr(a, flag))]
    if a.limit:
        cmd += ["--limit", str(a.limit)]
    if a.eval_limit:
        cmd += ["--eval-limit", str(a.eval_limit)]
    log(f"{row_id}: {' '.join(cmd[1:])}")
    r = run(cmd)
    float_top1, ptq_start, quantized = fractions(r, ("float_top1", "ptq_top1", "qat_top1"))
    return {"float": float_top1, "ptq_start": ptq_start, "quantized": quantized,
            "train_seconds": r.get("train_seconds"),
            "step_ms": r.get("step_ms"), "steps": r.get("steps"),
            "samples_per_second": r.get("samples_per_second"), "epoch_log": r.get("epochs"),
            "command": " ".join(cmd[1:])}


def ptq_row(a, row_id, model, backend, bits, out):
    cmd = [a.qforge, "quantize", model_path(model), "--backend", backend_arg(backend),
           "--config", os.path.join(CONFIGS, PTQ_CONFIG[bits]), "--calib", "fashion-mnist:train",
           "--eval", "fashion-mnist:test", "--out", out, "--json", "--quiet"] + CALIB
    if a.eval_limit:
        cmd += ["--eval-limit", str(a.eval_limit)]
    log(f"{row_id}: {' '.join(cmd[1:])}")
    r = run(cmd)
    return {"float": r["float"]["top1"], "ptq_start": r["quantized"]["top1"], "quantized": None,
            "train_seconds": None, "seconds": r["seconds"]["total"],
            "command": " ".join(cmd[1:])}


def row_header(a, row_id):
    model, backend, bits, algo, epochs = ROWS[row_id]
    if algo != "ptq" and a.epochs is not None:
        epochs = a.epochs
    return {"id": row_id, "model": model, "backend": backend, "bits": bits, "algo": algo,
            "epochs": epochs, "limit": (a.limit or None) if algo != "ptq" else None,
            "eval_limit": a.eval_limit or None}


def one_row(a, row_id):
    row = row_header(a, row_id)
    model, backend, bits, algo, epochs = (row[k] for k in ("model", "backend", "bits", "algo",
                                                            "epochs"))
    with tempfile.TemporaryDirectory() as out:
        if algo == "ptq":
            row.update(ptq_row(a, row_id, model, backend, bits, out))
        else:
            row.update(qat_row(a, row_id, model, backend, bits, algo, epochs, out))
        row.update(verify(a, out))
    return row


# ----------------------------------------------------------------------------------------------

def pct(x):
    return "-" if x is None else f"{100 * x:.2f}"


def points(a, b):
    return "-" if a is None or b is None else f"{100 * (a - b):+.2f}"


def table(rows):
    lines = ["| model | backend | bits | algo | epochs | float | PTQ start | QAT sim top-1 | drop "
             "| ORT QDQ | ORT−sim | train s |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        head = f"| {r['model']} | {r['backend']} | {r['bits']} | {r['algo']} "
        if "error" in r:
            lines.append(head + f"| | error: {r['error'][:100]} | | | | | | |")
            continue
        epochs = "-" if r["algo"] == "ptq" else str(r["epochs"])
        if r.get("limit"):
            epochs += f" ({r['limit']} images)"
        final = r["quantized"] if r["quantized"] is not None else r["ptq_start"]
        train = "-" if r.get("train_seconds") is None else f"{r['train_seconds']:.0f}"
        lines.append(head + f"| {epochs} | {pct(r['float'])} | {pct(r['ptq_start'])} "
                     f"| {pct(r['quantized'])} | {points(r['float'], final)} "
                     f"| {pct(r['ort_qdq'])} | {points(r['ort_qdq'], r['verify_sim'])} "
                     f"| {train} |")
    notes = [r for r in rows if "error" not in r and r.get("eval_limit")]
    if notes:
        lines.append(f"\n(top-1 on the first {notes[0]['eval_limit']} test images only)")
    return "\n".join(lines)


def selected_rows(patterns):
    wanted = [p.strip() for p in patterns.split(",") if p.strip()]
    ids = [i for i in ROWS if any(fnmatch.fnmatch(i, p) for p in wanted)]
    if not ids:
        raise SystemExit(f"--rows {patterns!r} selects nothing; rows: {', '.join(ROWS)}")
    return ids


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--qforge", default=os.path.join(ROOT, "build", "qforge"))
    p.add_argument("--rows", default="*", help="comma-separated row ids or globs (see --list)")
    p.add_argument("--epochs", type=int, help="override every QAT row's epochs")
    p.add_argument("--limit", type=int, default=0, help="train on the first N train images")
    p.add_argument("--eval-limit", type=int, default=0,
                   help="evaluate and verify on the first N test images (0: all 10,000)")
    p.add_argument("--optimizer", choices=["sgd", "adam"], help="default: qforge qat's")
    p.add_argument("--lr", type=float, help="default: qforge qat's")
    p.add_argument("--schedule", choices=["cosine", "step", "none"], help="default: qforge qat's")
    p.add_argument("--json", help="write every row here (rewritten after each row)")
    p.add_argument("--resume", action="store_true",
                   help="keep the rows already in --json and run only the missing ones")
    p.add_argument("--from-json", help="print the table of an earlier run, run nothing")
    p.add_argument("--list", action="store_true", help="list the rows and exit")
    a = p.parse_args()
    if a.list:
        for row_id, (model, backend, bits, algo, epochs) in ROWS.items():
            what = "PTQ (qforge quantize)" if algo == "ptq" else f"QAT {algo}, {epochs} epochs"
            print(f"{row_id:20s} {model:10s} {backend:13s} {bits}  {what}")
        return 0
    if a.from_json:
        with open(a.from_json) as f:
            print(table(json.load(f)))
        return 0
    os.environ.setdefault("QFORGE_ORT_DIR", os.path.join(ROOT, "build", "ort"))

    rows = []
    if a.resume and a.json and os.path.exists(a.json):
        with open(a.json) as f:
            rows = [r for r in json.load(f) if "error" not in r]
    done = {r["id"] for r in rows}
    for row_id in selected_rows(a.rows):
        if row_id in done:
            log(f"{row_id}: in {a.json} already, skipped")
            continue
        try:
            r = one_row(a, row_id)
        except (RuntimeError, KeyError, OSError, ValueError) as e:
            r = dict(row_header(a, row_id), error=str(e))
        rows.append(r)
        log(json.dumps({k: v for k, v in r.items() if k not in ("epoch_log", "command")}))
        if a.json:
            with open(a.json, "w") as f:
                json.dump(rows, f, indent=1)
    order = list(ROWS)
    rows.sort(key=lambda r: order.index(r["id"]) if r.get("id") in order else len(order))
    print(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
