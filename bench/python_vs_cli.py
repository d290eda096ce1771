#!/usr/bin/python3
"""The cost of calling qforge from Python instead of the CLI, on the same quantization job.

Each round runs, in turn and in fresh processes (so neither benefits from the other's warm
caches more than the other):
  cli      qforge quantize MODEL --calib fashion-mnist:train ... --eval fashion-mnist:test ...
  python   /usr/bin/python3 -c "import qforge; qforge.quantize(MODEL, calib='fashion-mnist:train', ...)"
           the same job by source string: interpreter start, `import qforge`, the binding
  numpy    the same job with the calibration and evaluation images handed over as numpy arrays:
           the whole process less the time numpy spends reading and converting the images (which
           the CLI does inside its own run); torch is imported when the arrays cross
  +malloc  the same after qforge.configure_allocator(), the malloc policy the CLI applies itself
Prints the median wall time of each and the overhead of python over cli, with the spread.

    PYTHONPATH=build/python /usr/bin/python3 bench/python_vs_cli.py --rounds 5
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

PY_JOB = """
import sys, time
import qforge
if {tune}:
    qforge.configure_allocator()
reading = 0.0
args = dict(backend="TensorRT", calib_batches={batches}, calib_batch=64, eval_limit={evals},
            out=sys.argv[1], quiet=True)
if "{mode}" == "numpy":
    t0 = time.perf_counter()  # the caller's own data code: numpy, reading, converting
    import gzip, numpy as np
    def idx(name, offset):
        with gzip.open("/usr/share/datasets/fashion-mnist/" + name) as f:
            return np.frombuffer(f.read(), np.uint8, offset=offset)
    train = (idx("train-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28)[:{batches} * 64]
             .astype(np.float32) / 255)
    test = idx("t10k-images-idx3-ubyte.gz", 16).reshape(-1, 1, 28, 28)[:{evals}].astype(np.float32) / 255
    labels = idx("t10k-labels-idx1-ubyte.gz", 8)[:{evals}].astype(np.int64)
    reading = time.perf_counter() - t0
    r = qforge.quantize("{model}", calib=train, eval=(test, labels), **args)
else:
    r = qforge.quantize("{model}", calib="fashion-mnist:train", eval="fashion-mnist:test", **args)
print(reading, r["quantized"]["top1"])
"""


def run_cli(cli, model, batches, evals, out):
    start = time.perf_counter()
    subprocess.run([cli, "quantize", model, "--backend", "TensorRT", "--calib", "fashion-mnist:train",
                    "--calib-batches", str(batches), "--calib-batch", "64", "--eval",
                    "fashion-mnist:test", "--eval-limit", str(evals), "--out", out, "--quiet"],
                   check=True, capture_output=True)
    return time.perf_counter() - start, json.load(open(os.path.join(out, "report.json")))["quantized"]["top1"]


def run_python(mode, model, batches, evals, out):
    tune = mode.endswith("+malloc")
    mode = mode.replace("+malloc", "")
    code = PY_JOB.format(mode=mode, model=model, batches=batches, evals=evals, tune=tune)
    start = time.perf_counter()
    done = subprocess.run([sys.executable, "-c", code, out], check=True, capture_output=True, text=True)
    wall = time.perf_counter() - start
    reading, top1 = done.stdout.split()
    return wall - float(reading), float(top1)


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--cli", default=os.path.join(ROOT, "build", "qforge"))
    p.add_argument("--model", default=os.path.join(ROOT, "models", "zoo", "resnet.onnx"))
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--calib-batches", type=int, default=32)
    p.add_argument("--eval-limit", type=int, default=10000)
    a = p.parse_args()
    times = {"cli": [], "python": [], "python+malloc": [], "numpy": [], "numpy+malloc": []}
    top1 = {}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(a.rounds):
            for name in times:
                out = os.path.join(tmp, f"{name}{r}")
                if name == "cli":
                    t, top1[name] = run_cli(a.cli, a.model, a.calib_batches, a.eval_limit, out)
                else:
                    t, top1[name] = run_python(name, a.model, a.calib_batches, a.eval_limit, out)
                times[name].append(t)
    cli = statistics.median(times["cli"])
    print(f"job: quantize {os.path.basename(a.model)} TensorRT, {a.calib_batches * 64} calibration "
          f"images, {a.eval_limit} evaluated float and int8; {a.rounds} rounds, threads "
          f"{os.environ.get('QFORGE_NUM_THREADS', 'all')}")
    print(f"{'path':14} {'median s':>9} {'min':>7} {'max':>7} {'vs cli':>8}  int8 top-1")
    for name, ts in times.items():
        med = statistics.median(ts)
        print(f"{name:14} {med:9.2f} {min(ts):7.2f} {max(ts):7.2f} {100 * (med / cli - 1):+7.1f}%  "
              f"{top1[name]:.4f}")


if __name__ == "__main__":
    main()
