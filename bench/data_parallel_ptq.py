#!/usr/bin/env python3
"""Data-parallel PTQ over c10d (issue #19): `qforge quantize --world-size 2` against one process.

Calibration: for each model, backend and activation observer, one process and two ranks on
loopback calibrate the same batches; the table says whether quantizers.json is byte-identical and
how many quantizers it holds.

Reconstruction: BRECQ and QDrop on the zoo ResNet (Academic W4A4 with MSE calibration, the
README's reconstruction setting) in one process of one thread against two processes of one
thread each (QFORGE_NUM_THREADS=1), the same global batch; top-1 on all 10,000 test images, the
wall time of the whole command (rank 0 alone evaluates) and of the calibration and
reconstruction stages (rank 0's report), median [range] over --rounds, peers alternating.

    /usr/bin/python3 bench/data_parallel_ptq.py [--qforge build/qforge] [--rounds 3]
        [--iters 500] [--skip-calibration] [--skip-reconstruction] [--json FILE]
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

# (model, backend, activation observer or None for the backend's own)
CALIBRATION_CASES = [
    ("resnet", "TensorRT", None),
    ("resnet", "Academic", None),
    ("mobilenet", "SNPE", None),
    ("vit", "Academic_NLP", None),
    ("resnet", "Academic", "Kl"),
    ("resnet", "Academic", "Percentile"),
    ("resnet", "Academic", "EmaMse"),
    ("resnet", "Academic", "ClipStd"),
    ("unet", "QNN", None),
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def env_one_thread():
    env = dict(os.environ)
    env["QFORGE_NUM_THREADS"] = "1"
    return env


def model_path(name):
    return os.path.join(ROOT, "models/zoo", name + ".onnx")


def run_one(cmd, out):
    start = time.monotonic()
    done = subprocess.run(cmd + ["--out", out], capture_output=True, text=True, env=env_one_thread())
    seconds = time.monotonic() - start
    if done.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd)}: {done.stderr.strip()}")
    return seconds


def run_two(cmd, out):
    """Both ranks of `cmd`; rank 0 writes `out`. Returns the wall time until both exit."""
    master = f"127.0.0.1:{free_port()}"
    start = time.monotonic()
    procs = [subprocess.Popen(cmd + ["--world-size", "2", "--rank", str(r), "--master", master,
                                     "--out", out if r == 0 else out + ".rank1"],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                              env=env_one_thread()) for r in (0, 1)]
    results = [p.communicate() for p in procs]
    seconds = time.monotonic() - start
    for p, (_, err) in zip(procs, results):
        if p.returncode != 0:
            raise RuntimeError(f"{' '.join(cmd)} (2 ranks): {err.strip()}")
    return seconds


def observer_config(directory, observer):
    path = os.path.join(directory, f"act_{observer}.yaml")
    with open(path, "w") as f:
        f.write(f"activation: {{observer: {observer}}}\n")
    return path


def calibration_rows(a):
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for model, backend, observer in CALIBRATION_CASES:
            cmd = [a.qforge, "quantize", model_path(model), "--backend", backend,
                   "--calib", "fashion-mnist:train", "--calib-batches", str(a.calib_batches),
                   "--calib-batch", "32", "--no-deploy", "--quiet"]
            if observer:
                cmd += ["--config", observer_config(tmp, observer)]
            one, two = os.path.join(tmp, "one"), os.path.join(tmp, "two")
            for d in (one, two):
                subprocess.run(["rm", "-rf", d, d + ".rank1"])
            run_one(cmd, one)
            run_two(cmd, two)
            with open(os.path.join(one, "quantizers.json")) as f:
                single = f.read()
            with open(os.path.join(two, "quantizers.json")) as f:
                pair = f.read()
            rows.append({"model": model, "backend": backend,
                         "observer": observer or "backend's own",
                         "quantizers": len(json.loads(single)["quantizers"]),
                         "identical": single == pair})
            print(rows[-1], flush=True)
    return rows


def reconstruction_rows(a):
    config = os.path.join(ROOT, "bench/configs/w4a4_mse.yaml")
    rows = []
    for algo in ("brecq", "qdrop"):
        cmd = [a.qforge, "quantize", model_path("resnet"), "--backend", "Academic", "--config",
               config, "--calib", "fashion-mnist:train", "--calib-batches", "16",
               "--calib-batch", "64", "--algo", algo, "--iters", str(a.iters), "--seed", "0",
               "--eval", "fashion-mnist:test", "--no-deploy", "--quiet", "--json"]
        times = {1: [], 2: []}
        stages = {1: {"calibrate": [], "reconstruct": []}, 2: {"calibrate": [], "reconstruct": []}}
        top1 = {}
        with tempfile.TemporaryDirectory() as tmp:
            for r in range(a.rounds):
                order = (1, 2) if r % 2 == 0 else (2, 1)
                for world in order:
                    out = os.path.join(tmp, f"{world}-{r}")
                    runner = run_one if world == 1 else run_two
                    times[world].append(runner(cmd, out))
                    with open(os.path.join(out, "report.json")) as f:
                        report = json.load(f)
                    top1[world] = report["quantized"]["top1"]
                    for stage in ("calibrate", "reconstruct"):
                        stages[world][stage].append(report["seconds"][stage])
                    top1["float"] = report["float"]["top1"]
        speedups = [t1 / t2 for t1, t2 in zip(times[1], times[2])]
        rows.append({"algo": algo, "iters": a.iters, "float": top1["float"],
                     "one_rank": top1[1], "two_ranks": top1[2],
                     "seconds_one": times[1], "seconds_two": times[2], "speedup": speedups,
                     "stages_one": stages[1], "stages_two": stages[2]})
        print(rows[-1], flush=True)
    return rows


def median_range(values, fmt="{:.2f}"):
    return (fmt.format(statistics.median(values)) + " [" + fmt.format(min(values)) + "-" +
            fmt.format(max(values)) + "]")


def print_tables(calibration, reconstruction):
    if calibration:
        print("\n| model | backend | activation observer | quantizers | 2 ranks = 1 process |")
        print("|---|---|---|---|---|")
        for r in calibration:
            print(f"| {r['model']} | {r['backend']} | {r['observer']} | {r['quantizers']} | "
                  f"{'identical' if r['identical'] else 'DIFFERENT'} |")
    if reconstruction:
        print("\n| algorithm | iters/unit | float | 1 rank top-1 | 2 ranks top-1 | stage | 1 rank s | "
              "2 ranks s | speed-up |")
        print("|---|---|---|---|---|---|---|---|---|")
        for r in reconstruction:
            head = (f"| {r['algo']} | {r['iters']} | {100 * r['float']:.2f} | "
                    f"{100 * r['one_rank']:.2f} | {100 * r['two_ranks']:.2f} |")
            rows = [("whole command", r["seconds_one"], r["seconds_two"])]
            if "stages_one" in r:
                rows += [(stage, r["stages_one"][stage], r["stages_two"][stage])
                         for stage in ("calibrate", "reconstruct")]
            for i, (stage, one, two) in enumerate(rows):
                ratios = [a / b for a, b in zip(one, two)]
                print((head if i == 0 else "| | | | | |") +
                      f" {stage} | {median_range(one, '{:.1f}')} | "
                      f"{median_range(two, '{:.1f}')} | {median_range(ratios)}x |")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--qforge", default=os.path.join(ROOT, "build/qforge"))
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iters", type=int, default=500)
    p.add_argument("--calib-batches", type=int, default=8)
    p.add_argument("--skip-calibration", action="store_true")
    p.add_argument("--skip-reconstruction", action="store_true")
    p.add_argument("--json")
    a = p.parse_args()
    calibration = [] if a.skip_calibration else calibration_rows(a)
    reconstruction = [] if a.skip_reconstruction else reconstruction_rows(a)
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"calibration": calibration, "reconstruction": reconstruction}, f, indent=2)
    print_tables(calibration, reconstruction)


if __name__ == "__main__":
    main()
