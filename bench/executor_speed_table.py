#!/usr/bin/python3
"""qforge's executor against ONNX Runtime (issue #19): model x batch, the same inputs and thread
count, measured in one run. For each row: ONNX Runtime's float latency (onnxruntime-node, default
graph optimizations, through tools/ort/run_model.js --time-runs), qforge's float latency
(`qforge run`), qforge in calibration mode (`qforge run --backend B --mode calibration`: the model
prepared for B with every observer on, what each calibration batch costs), the throughput ratios
ORT / qforge (1.0: as fast as ONNX Runtime; higher is better) and each process's peak RSS.

Each row is measured --rounds times with the peers alternating; a ratio is the median of the
rounds with their range beside it (a peer's spread shows a measurement to distrust). A round's
latency is the median of its --iters runs, or with --statistic p10 their 10th percentile: on a
machine whose memory system is shared with other tenants, runs of a few hundred microseconds
come in slow phases lasting hundreds of runs (a register-only loop there stays within 10%), and
the low percentile of enough runs (--iters 200 and more) measures the code rather than the phase.

  QFORGE_ORT_DIR=build/ort /usr/bin/python3 bench/executor_speed_table.py
      [--models zoo,untuned | zoo_resnet,tv_mobilenet_v2] [--batches 1,8] [--rounds 3] [--iters 10]
      [--round-ms MS] [--statistic median|p10] [--threads N] [--backend TensorRT] [--json FILE]

The whole table of issue #19 in one run (every model at its own batches, about 25 minutes):
  ... --models zoo,untuned --rounds 7 --iters 200 --round-ms 2000 --statistic p10

Models: the zoo (models/zoo, 1x28x28), torchvision ResNet-18 and MobileNetV2 at 224x224 (random
weights; tools/export_torchvision_models.py writes them into build/models on first use) and
U^2-NetP at 320x320 (bench/corpus/fetch.sh, when the corpus is fetched; its batch is fixed at 1,
and a copy with the batch opened runs at 8). `--models untuned` (or
`zoo,untuned`) adds exports no executor work was tuned on: torchvision ShuffleNetV2, MobileNetV3
(opset 11), EfficientNet-B0, SqueezeNet 1.1 (opset 9) and a small ViT from
bench/corpus/export_torchvision.py, and PaddleOCR's direction classifier at 3x48x192.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

import numpy as np
import onnx
import onnx.numpy_helper

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.path.join(ROOT, "build")

# name -> (path, the batches measured by default, one sample's dims for inputs with open dims)
MODELS = {
    "zoo_resnet": ("models/zoo/resnet.onnx", [1, 100], None),
    "zoo_mobilenet": ("models/zoo/mobilenet.onnx", [1, 100], None),
    "zoo_unet": ("models/zoo/unet.onnx", [1, 100], None),
    "zoo_vit": ("models/zoo/vit.onnx", [1, 100], None),
    "tv_resnet18": ("build/models/resnet18.onnx", [1, 8], None),
    "tv_mobilenet_v2": ("build/models/mobilenet_v2.onnx", [1, 8], None),
    "u2netp": ("build/corpus/u2netp.onnx", [1], None),
    # The same export with its fixed batch of 1 opened (inputs' and outputs' first dim): nothing
    # in its graph depends on the batch, so it runs at 8 in both runtimes.
    "u2netp_any_batch": ("build/corpus/u2netp_any_batch.onnx", [8], None),
}

# Exports nothing here was tuned on (bench/corpus: torchvision at 224x224 with random weights,
# ViT-small at 64x64, PaddleOCR's direction classifier at 48x192); --models untuned measures them.
UNTUNED = {
    "tv_shufflenet_v2_x0_5": ("build/corpus/torchvision/shufflenet_v2_x0_5_op13.onnx", [1, 8],
                              None),
    "tv_mobilenet_v3_small_op11": ("build/corpus/torchvision/mobilenet_v3_small_op11.onnx",
                                   [1, 8], None),
    "tv_efficientnet_b0": ("build/corpus/torchvision/efficientnet_b0_op13.onnx", [1, 8], None),
    "tv_vit_small": ("build/corpus/torchvision/vit_small_op13.onnx", [1, 8], None),
    "tv_squeezenet1_1_op9": ("build/corpus/torchvision/squeezenet1_1_op9.onnx", [1, 8], None),
    "ppocr_mobile_cls": ("build/corpus/ppocr_mobile_cls.onnx", [1, 8], [3, 48, 192]),
}


def run(cmd, env=None):
    done = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if done.returncode != 0:
        lines = [l for l in (done.stderr or done.stdout).strip().splitlines() if l.strip()]
        raise RuntimeError(lines[-1] if lines else f"{cmd[0]} exited with {done.returncode}")
    return done.stdout


def ensure_model(name, path):
    if os.path.exists(path):
        return True
    if name in UNTUNED and name.startswith("tv_"):
        run(["/usr/bin/python3", os.path.join(ROOT, "bench", "corpus", "export_torchvision.py"),
             os.path.dirname(path), os.path.basename(path).split("_op")[0]])
    elif name.startswith("tv_"):
        run(["/usr/bin/python3", os.path.join(ROOT, "tools", "export_torchvision_models.py"),
             "--out", os.path.dirname(path)])
    elif name == "u2netp_any_batch":
        fixed = os.path.join(os.path.dirname(path), "u2netp.onnx")
        if not ensure_model("u2netp", fixed):
            return False
        open_batch_dim(fixed, path)
    elif name in ("u2netp", "ppocr_mobile_cls"):
        fetch = subprocess.run([os.path.join(ROOT, "bench", "corpus", "fetch.sh"),
                                os.path.dirname(path)], capture_output=True, text=True)
        if fetch.returncode != 0:
            return False
    return os.path.exists(path)


def open_batch_dim(src, dst):
    """Writes `src` with the first dim of every graph input and output made symbolic."""
    model = onnx.load(src)
    for value in list(model.graph.input) + list(model.graph.output):
        dims = value.type.tensor_type.shape.dim
        if dims:
            dims[0].ClearField("dim_value")
            dims[0].dim_param = "batch"
    del model.graph.value_info[:]  # inferred shapes there still say 1
    tmp = dst + ".tmp"
    onnx.save(model, tmp)
    os.replace(tmp, dst)


def write_inputs(model_path, batch, seed, out_dir, sample_dims=None):
    """One standard-normal tensor per graph input, its batch dim set to `batch` and open dims
    after it taken from `sample_dims`: as .npy (for ONNX Runtime) and as a TensorProto .pb (for
    `qforge run --input`). Returns (npy, pb) lists of (name, file)."""
    graph = onnx.load(model_path, load_external_data=False).graph
    initializers = {t.name for t in graph.initializer}
    rng = np.random.default_rng(seed)
    npy, pb = [], []
    for k, value in enumerate(i for i in graph.input if i.name not in initializers):
        dims = [d.dim_value if d.dim_value > 0 else 0 for d in value.type.tensor_type.shape.dim]
        if dims and dims[0] not in (0, batch):
            raise RuntimeError(f"input '{value.name}' has a fixed batch of {dims[0]}")
        if sample_dims is not None:
            if len(sample_dims) != len(dims) - 1 or any(
                    d not in (0, given) for d, given in zip(dims[1:], sample_dims)):
                raise RuntimeError(f"input '{value.name}' {dims} does not take {sample_dims}")
            dims = [dims[0]] + list(sample_dims)
        if any(d == 0 for d in dims[1:]):
            raise RuntimeError(f"input '{value.name}' has a free dim besides the batch")
        shape = [batch] + dims[1:]
        array = rng.standard_normal(shape).astype(np.float32)
        npy_file = os.path.join(out_dir, f"input_{k}.npy")
        pb_file = os.path.join(out_dir, f"input_{k}.pb")
        np.save(npy_file, array)
        with open(pb_file, "wb") as f:
            f.write(onnx.numpy_helper.from_array(array, value.name).SerializeToString())
        npy.append((value.name, npy_file))
        pb.append((value.name, pb_file))
    return npy, pb


def latency(args, times_ms):
    if args.statistic == "p10":
        return float(np.percentile(times_ms, 10))
    return statistics.median(times_ms)


def time_ort(args, model, npy, work, iters):
    cmd = ["node", os.path.join(ROOT, "tools", "ort", "run_model.js"), "--model", model,
           "--out-dir", os.path.join(work, "ort_out"), "--threads", str(args.threads),
           "--time-runs", str(iters), "--warmup", str(args.warmup)]
    if args.ort_dir:
        cmd += ["--ort-dir", args.ort_dir]
    for name, f in npy:
        cmd += ["--input", name, f]
    manifest = json.loads(run(cmd))
    return latency(args, manifest["times_ms"]), manifest["peak_rss_bytes"]


def time_qforge(args, model, pb, iters, extra):
    cmd = [args.qforge, "run", model, "--iters", str(iters), "--warmup", str(args.warmup),
           "--json"] + extra
    for name, f in pb:
        cmd += ["--input", f"{name}={f}"]
    env = dict(os.environ, QFORGE_NUM_THREADS=str(args.threads))
    report = json.loads(run(cmd, env))
    return latency(args, report["times_ms"]), report["peak_rss_bytes"]


def measure(args, name, model, batch, sample_dims=None):
    with tempfile.TemporaryDirectory() as work:
        npy, pb = write_inputs(model, batch, 0, work, sample_dims)
        iters = args.iters
        if args.round_ms:
            # About round_ms of runs per peer and round: a batch-1 row of a small model gets
            # enough runs for its p10, a large model at batch 8 does not take an hour.
            probe_ms, _ = time_ort(args, model, npy, work, 3)
            iters = max(5, min(args.iters, int(args.round_ms / max(probe_ms, 1e-3))))
        rounds = []
        for _ in range(args.rounds):
            ort_ms, ort_rss = time_ort(args, model, npy, work, iters)
            float_ms, float_rss = time_qforge(args, model, pb, iters, [])
            calib_ms, calib_rss = time_qforge(
                args, model, pb, iters, ["--backend", args.backend, "--mode", "calibration"])
            rounds.append({"ort_ms": ort_ms, "float_ms": float_ms, "calib_ms": calib_ms,
                           "ort_rss": ort_rss, "float_rss": float_rss, "calib_rss": calib_rss})
    row = {"model": name, "batch": batch, "iters": iters, "rounds": rounds}
    for key in ("ort_ms", "float_ms", "calib_ms"):
        row[key] = statistics.median(r[key] for r in rounds)
    for peer in ("float", "calib"):
        ratios = [r["ort_ms"] / r[f"{peer}_ms"] for r in rounds]
        row[f"{peer}_ratio"] = statistics.median(ratios)
        row[f"{peer}_ratio_range"] = [min(ratios), max(ratios)]
    for key in ("ort_rss", "float_rss", "calib_rss"):
        row[key] = max(r[key] for r in rounds)
    return row


def print_table(rows, args):
    runs = (f"up to {args.iters} runs (about {args.round_ms:g} ms of ONNX Runtime's runs)"
            if args.round_ms else f"{args.iters} runs")
    print(f"threads {args.threads}, {args.rounds} rounds of {runs} "
          f"(+{args.warmup} warm-up, {args.statistic} of each round's runs), calibration mode: "
          f"{args.backend}; ratio = ORT ms / qforge ms (throughput against ONNX Runtime), "
          "median [range] over rounds\n")
    print("| model | batch | ORT ms | qforge float ms | float ratio | calibration ms "
          "| calibration ratio | peak RSS ORT / float / calib (MiB) |")
    print("|---|---|---|---|---|---|---|---|")
    mib = 1024 * 1024
    for r in rows:
        if "error" in r:
            print(f"| {r['model']} | {r['batch']} | {r['error']} | | | | | |")
            continue
        fr, cr = r["float_ratio_range"], r["calib_ratio_range"]
        print(f"| {r['model']} | {r['batch']} | {r['ort_ms']:.2f} | {r['float_ms']:.2f} "
              f"| {r['float_ratio']:.2f} [{fr[0]:.2f}-{fr[1]:.2f}] | {r['calib_ms']:.2f} "
              f"| {r['calib_ratio']:.2f} [{cr[0]:.2f}-{cr[1]:.2f}] "
              f"| {r['ort_rss'] / mib:.0f} / {r['float_rss'] / mib:.0f} / "
              f"{r['calib_rss'] / mib:.0f} |")


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--qforge", default=os.path.join(BUILD, "qforge"))
    p.add_argument("--ort-dir", default=os.environ.get("QFORGE_ORT_DIR",
                                                       os.path.join(BUILD, "ort")))
    p.add_argument("--models", default=",".join(MODELS),
                   help="comma-separated names; 'zoo' and 'untuned' stand for their groups")
    p.add_argument("--batches", help="comma-separated; default: each model's own")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--iters", type=int, default=10)
    p.add_argument("--round-ms", type=float,
                   help="runs per round: as many as fill this many ms of ONNX Runtime's "
                        "latency (probed once per row), between 5 and --iters")
    p.add_argument("--warmup", type=int, default=3)
    p.add_argument("--statistic", choices=["median", "p10"], default="median",
                   help="of each round's runs (p10: see above)")
    p.add_argument("--threads", type=int, default=os.cpu_count())
    p.add_argument("--backend", default="TensorRT")
    p.add_argument("--json", help="also write the rows (every round) to this file")
    args = p.parse_args()

    rows = []
    names = []
    for name in args.models.split(","):
        names += list(UNTUNED) if name == "untuned" else list(MODELS) if name == "zoo" else [name]
    for name in names:
        known = {**MODELS, **UNTUNED}
        if name not in known:
            sys.exit(f"executor_speed_table.py: unknown model '{name}' (known: "
                     f"{', '.join(known)})")
        path, batches, sample_dims = known[name]
        path = os.path.join(ROOT, path)
        if args.batches:
            batches = [int(b) for b in args.batches.split(",")]
        if not ensure_model(name, path):
            rows.append({"model": name, "batch": "-", "error": f"{path} is missing"})
            continue
        for batch in batches:
            try:
                rows.append(measure(args, name, path, batch, sample_dims))
            except RuntimeError as e:
                rows.append({"model": name, "batch": batch, "error": str(e)[:160]})
            print(f"executor_speed_table.py: {name} batch {batch} done", file=sys.stderr)
    print_table(rows, args)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    main()
