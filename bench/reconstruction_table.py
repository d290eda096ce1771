#!/usr/bin/env python3
"""Low-bit PTQ by reconstruction on the zoo models (issue #6's proof): for every model and bit
setting on the Academic backend (8-bit first and last layers, per-channel weights), naive MinMax
and MSE calibration, then AdaRound, BRECQ and QDrop from the MSE calibration; each row is
`qforge quantize ... --eval fashion-mnist:test` (all 10,000 test images), and with --verify the
deployed QDQ model is run in ONNX Runtime (`qforge verify`) for the accuracy gap.

    QFORGE_ORT_DIR=build/ort /usr/bin/python3 bench/reconstruction_table.py \\
        [--models resnet,mobilenet] [--bits w4a4,w2a4,w4a8] [--algos naive,adaround,brecq,qdrop]
        [--iters 2000] [--verify] [--json FILE]
    /usr/bin/python3 bench/reconstruction_table.py --from-json FILE
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BITS = {"w4a4": ("W4A4", "w4a4"), "w2a4": ("W2A4", "w2a4"), "w4a8": ("W4A8", "w4a8")}


def run(cmd):
    done = subprocess.run(cmd, capture_output=True, text=True)
    if done.returncode not in (0, 1):
        raise RuntimeError(f"{' '.join(cmd)}: {done.stderr.strip()}")
    return json.loads(done.stdout)


def one_row(a, model, bits, algo):
    observer = "minmax" if algo == "naive-minmax" else "mse"
    config = os.path.join(ROOT, "bench/configs", f"{BITS[bits][1]}_{observer}.yaml")
    with tempfile.TemporaryDirectory() as out:
        cmd = [a.qforge, "quantize", os.path.join(ROOT, "models/zoo", model + ".onnx"),
               "--backend", "Academic", "--config", config, "--calib", "fashion-mnist:train",
               "--calib-batches", str(a.calib_batches), "--calib-batch", "64",
               "--eval", "fashion-mnist:test", "--out", out, "--json", "--seed", "0"]
        if algo not in ("naive-minmax", "naive-mse"):
            cmd += ["--algo", algo, "--iters", str(a.iters)]
        r = run(cmd)
        row = {"model": model, "bits": BITS[bits][0], "algo": algo,
               "float": r["float"]["top1"], "quantized": r["quantized"]["top1"],
               "seconds": r["seconds"], "peak_rss_bytes": r.get("peak_rss_bytes")}
        if "reconstruction" in r:
            rec = r["reconstruction"]
            row["iterations_per_second"] = rec["iterations_per_second"]
            row["units"] = len(rec["units"])
            row["peak_cache_bytes"] = rec["peak_cache_bytes"]
        if a.verify:
            v = run([a.qforge, "verify", out, "--data", "fashion-mnist:test", "--json", "--quiet",
                     "--max-accuracy-gap", "0.001"])
            row["ort_qdq"] = v["accuracy"]["ONNX Runtime, QDQ model"]
            row["verify_passed"] = v["passed"]
        return row


def table(rows):
    lines = ["| model | bits | algorithm | float top-1 | quantized top-1 | drop (points) | ORT QDQ top-1 | it/s | seconds |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['model']} | {r['bits']} | {r['algo']} | error: {r['error'][:80]} | | | | | |")
            continue
        ort = f"{100 * r['ort_qdq']:.2f}" if "ort_qdq" in r else "-"
        ips = f"{r['iterations_per_second']:.0f}" if "iterations_per_second" in r else "-"
        lines.append(f"| {r['model']} | {r['bits']} | {r['algo']} | {100 * r['float']:.2f} | "
                     f"{100 * r['quantized']:.2f} | {100 * (r['float'] - r['quantized']):.2f} | "
                     f"{ort} | {ips} | {r['seconds']['total']:.0f} |")
    return "\n".join(lines)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--qforge", default=os.path.join(ROOT, "build/qforge"))
    p.add_argument("--models", default="resnet,mobilenet")
    p.add_argument("--bits", default="w4a4,w2a4,w4a8")
    p.add_argument("--algos", default="naive-minmax,naive-mse,adaround,brecq,qdrop")
    p.add_argument("--iters", type=int, default=2000, help="iterations per unit")
    p.add_argument("--calib-batches", type=int, default=16, help="of 64 images")
    p.add_argument("--verify", action="store_true", help="also run the QDQ model in ORT")
    p.add_argument("--json", help="write every row here")
    p.add_argument("--from-json", help="print the table of an earlier run")
    p.add_argument("--resume", action="store_true",
                   help="keep the rows already in --json and run only the missing ones")
    a = p.parse_args()
    if a.from_json:
        print(table(json.load(open(a.from_json))))
        return
    rows = []
    if a.resume and a.json and os.path.exists(a.json):
        rows = [r for r in json.load(open(a.json)) if "error" not in r]
    done = {(r["model"], r["bits"], r["algo"]) for r in rows}
    for model in a.models.split(","):
        for bits in a.bits.split(","):
            for algo in a.algos.split(","):
                if (model, BITS[bits][0], algo) in done:
                    continue
                try:
                    r = one_row(a, model, bits, algo)
                except (RuntimeError, KeyError, OSError) as e:
                    r = {"model": model, "bits": BITS[bits][0], "algo": algo, "error": str(e)}
                rows.append(r)
                print(json.dumps(r), file=sys.stderr, flush=True)
                if a.json:
                    with open(a.json, "w") as f:
                        json.dump(rows, f, indent=1)
    print(table(rows))


if __name__ == "__main__":
    main()
