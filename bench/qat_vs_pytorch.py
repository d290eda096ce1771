#!/usr/bin/python3
"""Quantization-aware training step time, PyTorch eager QAT against `qforge qat`, in one run.

The peer is PyTorch's own QAT (torch.ao, FX graph mode) on the zoo model with the zoo's weights:
  - prepare_qat_fx with PyTorch's TensorRT backend config (signed int8-typed activations, which
    the default native config refuses: it would leave every activation float), so Conv-BN-ReLU
    and Conv-BN become the QAT ConvBnReLU2d / ConvBn2d modules (BatchNorm in train mode, its
    folding simulated on the weight);
  - every quantizer a `_LearnableFakeQuantize` (LSQ: learned scale, gradient scale
    1/sqrt(numel * qmax)) on TensorRT's symmetric signed grid [-(2^(b-1) - 1), 2^(b-1) - 1]:
    weights per output channel initialised by PerChannelMinMaxObserver, activations per tensor
    initialised by MovingAverageMinMaxObserver (averaging constant 0.1, qforge's EmaMinMax 0.9);
    zero points fixed at 0. `--peer fakequant` uses plain FakeQuantize modules instead (observers
    stay on during training, nothing learned: PyTorch's default QAT);
  - calibration: --calib-batches x --calib-batch train images in dataset order, eval mode, no
    gradient (BatchNorm uses its running statistics, as for qforge's calibration);
  - one step: forward, cross-entropy, backward, SGD (momentum 0.9, lr 1e-3, no weight decay
    unless told) on the weights, BatchNorm affine parameters and the learned scales.

Timed: --steps steps after --warmup untimed ones, batches drawn from a seeded permutation of
the first train images. With --qforge the same model, bits, batch, optimizer and thread count
run through `qforge qat ... --max-steps WARMUP+STEPS --json`, whose step_ms excludes its first
5 steps, and the ratio PyTorch ms / qforge ms is printed (> 1: qforge faster).

Before timing, the float module is checked against the ONNX file it was loaded from: logits of
the ONNX graph evaluated node by node (bench/reconstruction_vs_pytorch.py's OnnxGraph, ResNet
ops only) and top-1 on the 10,000 test images against the zoo's NAME.json.

  nice -n 19 /usr/bin/python3 bench/qat_vs_pytorch.py --pytorch-only [--model resnet]
  nice -n 19 /usr/bin/python3 bench/qat_vs_pytorch.py --qforge build/qforge [--bits 4]
      [--steps 100] [--warmup 5] [--batch 64] [--lr 1e-3] [--weight-decay 0] [--peer lsq]
      [--repeats 1] [--eval-limit 1000] [--json FILE]

Threads: QFORGE_NUM_THREADS, else every core (torch.set_num_threads and qforge's).
"""
import argparse
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.ao.quantization import FakeQuantize, QConfig, QConfigMapping
from torch.ao.quantization._learnable_fake_quantize import _LearnableFakeQuantize
from torch.ao.quantization.backend_config import get_tensorrt_backend_config
from torch.ao.quantization.observer import (MovingAverageMinMaxObserver,
                                            MovingAveragePerChannelMinMaxObserver,
                                            PerChannelMinMaxObserver)
from torch.ao.quantization.quantize_fx import prepare_qat_fx

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
sys.path.insert(0, HERE)
sys.path.insert(0, os.path.join(ROOT, "tools", "zoo"))
import reconstruction_vs_pytorch as onnx_bench  # noqa: E402  (OnnxGraph, Fashion-MNIST reader)
import zoo  # noqa: E402

QFORGE_WARMUP_STEPS = 5  # qforge qat's step_ms leaves out its first 5 steps (its --json contract)
LOGITS_ATOL = 1e-4
TOP1_TOLERANCE = 2  # test images, as the other PyTorch benches allow
EVAL_BATCH = 500


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


# ----------------------------------------------------------------------------------------------
# The float model, checked against the ONNX file

def load_float_model(name):
    path = os.path.join(ROOT, "models", "zoo", name + ".onnx")
    return zoo.load_onnx_weights(zoo.build(name), path), path


@torch.no_grad()
def top1_count(model, images, labels):
    correct = 0
    for i in range(0, len(images), EVAL_BATCH):
        correct += (model(images[i:i + EVAL_BATCH]).argmax(1) == labels[i:i + EVAL_BATCH]).sum()
    return int(correct)


@torch.no_grad()
def check_float(model, path, test_images, test_labels):
    """The module must compute what the ONNX file computes: logits against the ONNX graph run
    node by node (when this bench's evaluator knows every op) and top-1 against the zoo's
    recorded figure. Returns (ok, report)."""
    model.eval()
    report, ok = {}, True
    try:
        graph = onnx_bench.OnnxGraph(path)
    except ValueError as e:  # e.g. MobileNet's Clip: the top-1 check below still runs
        graph = None
        report["logits_check"] = f"skipped: {e}"
        print(f"float module vs the ONNX graph: not compared ({e}); top-1 only")
    if graph is not None:
        x = test_images[:512]
        onnx_logits = graph.run({graph.graph_inputs[0]: x}, graph.graph_outputs)[
            graph.graph_outputs[0]]
        diff = (model(x) - onnx_logits).abs().max().item()
        report["logits_max_abs_diff"] = diff
        ok &= diff <= LOGITS_ATOL
        print(f"float module vs the ONNX graph on 512 test images: max |logit diff| {diff:.3g} "
              f"({'ok' if diff <= LOGITS_ATOL else 'FAIL'}, atol {LOGITS_ATOL})")
    correct = top1_count(model, test_images, test_labels)
    with open(os.path.splitext(path)[0] + ".json") as f:
        expected = json.load(f)["test"]["top1_count"]
    verdict = abs(correct - expected) <= TOP1_TOLERANCE
    ok &= verdict
    report.update(float_top1_count=correct, zoo_top1_count=expected)
    print(f"float module top-1 {correct} / {len(test_labels)} (zoo's {expected}; "
          f"{'ok' if verdict else 'FAIL'})")
    return ok, report


# ----------------------------------------------------------------------------------------------
# PyTorch QAT: prepare, calibrate, switch to training

def symmetric_range(bits):
    """TensorRT's signed grid without its most negative level (symmetric_range in qforge)."""
    return -(2 ** (bits - 1) - 1), 2 ** (bits - 1) - 1


def qat_qconfig(peer, bits):
    qmin, qmax = symmetric_range(bits)
    grid = dict(quant_min=qmin, quant_max=qmax, dtype=torch.qint8)
    if peer == "lsq":
        # channel_len 1 is a placeholder: the factory cannot know a layer's channel count, so
        # resize_weight_scales() gives every weight quantizer one scale per channel afterwards.
        weight = _LearnableFakeQuantize.with_args(
            observer=PerChannelMinMaxObserver, qscheme=torch.per_channel_symmetric, ch_axis=0,
            channel_len=1, use_grad_scaling=True, **grid)
        activation = _LearnableFakeQuantize.with_args(
            observer=MovingAverageMinMaxObserver, qscheme=torch.per_tensor_symmetric,
            averaging_constant=0.1, use_grad_scaling=True, **grid)
    else:
        weight = FakeQuantize.with_args(
            observer=MovingAveragePerChannelMinMaxObserver, qscheme=torch.per_channel_symmetric,
            ch_axis=0, averaging_constant=0.1, **grid)
        activation = FakeQuantize.with_args(
            observer=MovingAverageMinMaxObserver, qscheme=torch.per_tensor_symmetric,
            averaging_constant=0.1, **grid)
    return QConfig(activation=activation, weight=weight)


def fake_quantizers(model):
    return [m for m in model.modules() if isinstance(m, (_LearnableFakeQuantize, FakeQuantize))]


def resize_weight_scales(model):
    for module in model.modules():
        fq = getattr(module, "weight_fake_quant", None)
        if isinstance(fq, _LearnableFakeQuantize):
            channels = module.weight.shape[fq.ch_axis]
            fq.scale = nn.Parameter(torch.ones(channels))
            fq.zero_point = nn.Parameter(torch.zeros(channels))


def prepare(float_model, peer, bits):
    model = float_model.train()  # train mode: prepare_qat_fx fuses Conv-BN(-ReLU) into QAT modules
    qconfig = QConfigMapping().set_global(qat_qconfig(peer, bits))
    prepared = prepare_qat_fx(model, qconfig, example_inputs=(torch.zeros(1, 1, 28, 28),),
                              backend_config=get_tensorrt_backend_config())
    if peer == "lsq":
        resize_weight_scales(prepared)
    return prepared


@torch.no_grad()
def calibrate(model, images, batch):
    model.eval()
    for i in range(0, len(images), batch):
        model(images[i:i + batch])


def start_training(model, peer):
    """After calibration: LSQ learns the scales from the observers' ranges (observers off);
    zero points stay 0, as on qforge's symmetric grid."""
    if peer == "lsq":
        for fq in fake_quantizers(model):
            fq.enable_param_learning()
            fq.zero_point.requires_grad_(False)
    model.train()


def fused_module_counts(model):
    counts = {}
    for m in model.modules():
        kind = type(m).__name__
        if kind in ("ConvBnReLU2d", "ConvBn2d", "ConvReLU2d", "Conv2d", "Linear"):
            key = ("qat." if ".qat." in type(m).__module__ else "") + kind
            counts[key] = counts.get(key, 0) + 1
    return counts


# ----------------------------------------------------------------------------------------------
# The timed loop

def train_steps(model, optimizer, images, labels, order, batch, first, count):
    """Runs COUNT optimizer steps on batches FIRST, FIRST+1, ... of ORDER (wrapping around);
    returns each step's wall time in seconds and the last loss."""
    seconds, loss = [], None
    for step in range(first, first + count):
        offset = (step * batch) % len(order)
        index = order[offset:offset + batch]
        if len(index) < batch:  # the permutation's tail: start it over
            index = order[:batch]
        start = time.perf_counter()
        logits = model(images[index])
        loss = F.cross_entropy(logits, labels[index])
        optimizer.zero_grad(set_to_none=True)
        loss.backward()
        optimizer.step()
        seconds.append(time.perf_counter() - start)
    return seconds, loss.item()


def summarize(seconds, batch):
    ordered = sorted(seconds)
    mean_ms = 1000 * sum(seconds) / len(seconds)
    return {"steps": len(seconds), "step_ms": mean_ms,
            "step_ms_median": 1000 * ordered[len(ordered) // 2], "step_ms_min": 1000 * ordered[0],
            "samples_per_second": batch / (mean_ms / 1000)}


class PytorchQat:
    """The peer, set up once (float check, prepare, calibration, optimizer); run() times more
    steps of the same training run, so repeats alternate with qforge's runs."""

    def __init__(self, args):
        self.args = args
        test_images = onnx_bench.fashion_images("test", 10000)
        test_labels = onnx_bench.fashion_labels("test", 10000)
        float_model, path = load_float_model(args.model)
        ok, self.float_check = check_float(float_model, path, test_images, test_labels)
        if not ok:
            raise SystemExit("the float module does not reproduce the ONNX model; not timing it")
        self.eval_images = test_images[:args.eval_limit]
        self.eval_labels = test_labels[:args.eval_limit]

        calib_count = args.calib_batches * args.calib_batch
        steps = args.warmup + args.steps * args.repeats
        train_count = min(60000, max(calib_count, steps * args.batch))
        self.images = onnx_bench.fashion_images("train", train_count)
        self.labels = onnx_bench.fashion_labels("train", train_count)

        torch.manual_seed(args.seed)
        self.model = prepare(float_model, args.peer, args.bits)
        start = time.perf_counter()
        calibrate(self.model, self.images[:calib_count], args.calib_batch)
        self.calibration_seconds = time.perf_counter() - start
        self.ptq_top1 = self.top1()
        start_training(self.model, args.peer)
        self.trainable = [p for p in self.model.parameters() if p.requires_grad]
        self.optimizer = torch.optim.SGD(self.trainable, lr=args.lr, momentum=args.momentum,
                                         weight_decay=args.weight_decay)
        self.order = torch.randperm(train_count,
                                    generator=torch.Generator().manual_seed(args.seed))
        self.steps_done = 0
        self.loss = None

    def top1(self):
        count = top1_count(self.model.eval(), self.eval_images, self.eval_labels)
        return count / len(self.eval_labels)

    def run(self, count):
        self.model.train()
        seconds, self.loss = train_steps(self.model, self.optimizer, self.images, self.labels,
                                         self.order, self.args.batch, self.steps_done, count)
        self.steps_done += count
        return seconds

    def describe(self):
        weight_quantizers = [m for m in self.model.modules() if hasattr(m, "weight_fake_quant")]
        return {
            "peer": ("_LearnableFakeQuantize (LSQ)" if self.args.peer == "lsq"
                     else "FakeQuantize + MovingAverageMinMax observers"),
            "backend_config": "torch.ao get_tensorrt_backend_config()",
            "weight_fake_quantizers": len(weight_quantizers),
            "activation_fake_quantizers":
                len(fake_quantizers(self.model)) - len(weight_quantizers),
            "modules": fused_module_counts(self.model),
            "trainable_tensors": len(self.trainable),
            "trainable_values": sum(p.numel() for p in self.trainable),
            "calibration_seconds": self.calibration_seconds,
            "float_check": self.float_check,
        }


# ----------------------------------------------------------------------------------------------
# qforge's side

def qat_config_file(args):
    name = f"w{args.bits}a{args.bits}_lsq.yaml"
    path = os.path.join(HERE, "configs", name)
    if not os.path.exists(path):
        raise SystemExit(f"no {os.path.relpath(path, ROOT)} for --bits {args.bits}")
    return path


def time_qforge(args, threads):
    with tempfile.TemporaryDirectory() as out:
        cmd = [args.qforge, "qat", os.path.join(ROOT, "models", "zoo", args.model + ".onnx"),
               "--backend", "TensorRT", "--config", qat_config_file(args), "--algo", "lsq",
               "--data", "fashion-mnist:train", "--epochs", "1", "--out", os.path.join(out, "q"),
               "--optimizer", "sgd", "--lr", str(args.lr), "--momentum", str(args.momentum),
               "--weight-decay", str(args.weight_decay), "--schedule", "none",
               "--batch", str(args.batch), "--calib-batches", str(args.calib_batches),
               "--calib-batch", str(args.calib_batch), "--seed", str(args.seed),
               "--max-steps", str(QFORGE_WARMUP_STEPS + args.steps),
               "--eval", "fashion-mnist:test", "--eval-limit", str(args.eval_limit),
               "--no-deploy", "--json", "--quiet"]
        env = dict(os.environ, QFORGE_NUM_THREADS=str(threads))
        log("qforge: " + " ".join(cmd[1:]))
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, env=env)
        wall = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"qforge qat failed ({done.returncode}): {done.stderr.strip()}")
    report = json.loads(done.stdout)
    keep = ("steps", "train_seconds", "step_ms", "samples_per_second", "float_top1", "ptq_top1",
            "qat_top1", "batchnorms_simulated", "quantizer_parameters", "peak_rss_bytes")
    result = {k: report[k] for k in keep if k in report}
    result.update(command=" ".join(cmd[1:]), process_seconds=wall, threads=threads)
    return result


# ----------------------------------------------------------------------------------------------

def thread_count():
    value = os.environ.get("QFORGE_NUM_THREADS", "")
    return int(value) if value.strip() else os.cpu_count()


def percent(report, key):
    """qforge qat reports top-1 in percent (its contract); the float top-1 (~90) tells, should
    that change."""
    return report[key] * (1.0 if report.get("float_top1", 100) > 1.0 else 100.0)


def main():
    p = argparse.ArgumentParser(description=__doc__,
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", default="resnet", choices=["resnet", "mobilenet"])
    p.add_argument("--bits", type=int, default=4, help="weights and activations")
    p.add_argument("--peer", default="lsq", choices=["lsq", "fakequant"],
                   help="lsq: _LearnableFakeQuantize; fakequant: FakeQuantize + observers")
    p.add_argument("--steps", type=int, default=100, help="timed optimizer steps")
    p.add_argument("--warmup", type=int, default=5, help="untimed steps before them")
    p.add_argument("--repeats", type=int, default=1,
                   help="timed runs of --steps, alternating PyTorch and qforge (busy machines)")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=1e-3)
    p.add_argument("--momentum", type=float, default=0.9)
    p.add_argument("--weight-decay", type=float, default=0.0)
    p.add_argument("--calib-batches", type=int, default=16)
    p.add_argument("--calib-batch", type=int, default=64)
    p.add_argument("--eval-limit", type=int, default=1000,
                   help="test images for the PTQ-start and after-training top-1 (a sanity check)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--qforge", metavar="PATH", help="qforge binary (default build/qforge)",
                   default=os.path.join(ROOT, "build", "qforge"))
    p.add_argument("--pytorch-only", action="store_true", help="time PyTorch only")
    p.add_argument("--json", metavar="FILE", help="write the configuration and results here")
    args = p.parse_args()
    if not 2 <= args.bits <= 8:
        p.error("--bits must be in 2..8")
    if min(args.steps, args.batch, args.eval_limit, args.repeats) < 1 or args.warmup < 0:
        p.error("--steps, --batch, --eval-limit and --repeats must be >= 1, --warmup >= 0")
    if args.warmup != QFORGE_WARMUP_STEPS and not args.pytorch_only:
        log(f"note: qforge's step_ms always leaves out {QFORGE_WARMUP_STEPS} warm-up steps")

    threads = thread_count()
    torch.set_num_threads(threads)
    load = os.getloadavg()[0]
    if threads > 1 and load >= 1.0 and os.environ.get("OMP_WAIT_POLICY", "").upper() != "PASSIVE":
        # libgomp's threads spin between ops and lose to other processes on a busy machine.
        log(f"warning: load average {load:.1f} with {threads} OpenMP threads: timings are "
            f"unreliable; use QFORGE_NUM_THREADS=1 or OMP_WAIT_POLICY=PASSIVE (bench/README.md)")

    peer = PytorchQat(args)
    d = peer.describe()
    log(f"PyTorch QAT ({d['peer']}), {args.model} W{args.bits}A{args.bits}, batch {args.batch}, "
        f"{threads} threads: {args.warmup} warm-up steps, then {args.repeats} x {args.steps} "
        f"timed steps" + ("" if args.pytorch_only else ", each followed by a qforge qat run"))
    warmup_seconds = peer.run(args.warmup)
    repeats = []
    for repeat in range(args.repeats):
        entry = {"pytorch": summarize(peer.run(args.steps), args.batch)}
        if not args.pytorch_only:
            entry["qforge"] = time_qforge(args, threads)
            entry["speed_ratio_vs_pytorch"] = (entry["pytorch"]["step_ms"] /
                                               entry["qforge"]["step_ms"])
        repeats.append(entry)
        line = f"repeat {repeat + 1}: PyTorch {entry['pytorch']['step_ms']:.1f} ms/step"
        if "qforge" in entry:
            line += (f", qforge {entry['qforge']['step_ms']:.1f} ms/step, "
                     f"ratio {entry['speed_ratio_vs_pytorch']:.2f}x")
        log(line)
    qat_top1 = peer.top1()

    pytorch_ms = [r["pytorch"]["step_ms"] for r in repeats]
    print(f"PyTorch eager QAT, {args.model} W{args.bits}A{args.bits}, {d['peer']}, batch "
          f"{args.batch}, {threads} threads ({d['weight_fake_quantizers']} weight + "
          f"{d['activation_fake_quantizers']} activation fake quantizers, modules {d['modules']})")
    for i, r in enumerate(repeats):
        t = r["pytorch"]
        print(f"  run {i + 1}: {t['step_ms']:.2f} ms/step mean, {t['step_ms_median']:.2f} median, "
              f"{t['step_ms_min']:.2f} min over {t['steps']} steps "
              f"({t['samples_per_second']:.0f} samples/s)")
    print(f"  top-1 on {len(peer.eval_labels)} test images: PTQ start {100 * peer.ptq_top1:.2f}, "
          f"after {peer.steps_done} steps {100 * qat_top1:.2f} (last loss {peer.loss:.4f}); "
          f"peak RSS {resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024:.0f} MiB")
    if not args.pytorch_only:
        simulated = repeats[0]["qforge"].get("batchnorms_simulated", "?")
        pytorch_simulated = sum(n for kind, n in d["modules"].items() if "ConvBn" in kind)
        print(f"qforge qat, TensorRT W{args.bits}A{args.bits} LSQ, same model, batch, optimizer "
              f"and threads (step_ms: its steps after the first {QFORGE_WARMUP_STEPS}; "
              f"{simulated} Conv+BN with simulated folding, PyTorch {pytorch_simulated})")
        for i, r in enumerate(repeats):
            q = r["qforge"]
            top1 = ""
            if "ptq_top1" in q and "qat_top1" in q:
                top1 = (f"; top-1 PTQ start {percent(q, 'ptq_top1'):.2f}, after "
                        f"{q.get('steps')} steps {percent(q, 'qat_top1'):.2f}")
            print(f"  run {i + 1}: {q['step_ms']:.2f} ms/step "
                  f"({q.get('samples_per_second', 0):.0f} samples/s){top1}")
        ratios = [r["speed_ratio_vs_pytorch"] for r in repeats]
        print("speed ratio (PyTorch ms / qforge ms, > 1 = qforge faster): "
              + ", ".join(f"{x:.2f}x" for x in ratios)
              + f" (median {statistics.median(ratios):.2f}x)")
    results = {"pytorch": dict(d, warmup_step_ms=[1000 * x for x in warmup_seconds],
                               ptq_top1=peer.ptq_top1, qat_top1=qat_top1,
                               steps_trained=peer.steps_done, last_loss=peer.loss,
                               eval_images=len(peer.eval_labels),
                               step_ms_per_run=pytorch_ms,
                               peak_rss_bytes=resource.getrusage(
                                   resource.RUSAGE_SELF).ru_maxrss * 1024),
               "runs": repeats}
    if args.json:
        config = {k: v for k, v in vars(args).items() if k not in ("json",)}
        config.update(threads=threads, torch=torch.__version__,
                      python=platform.python_version(),
                      omp_wait_policy=os.environ.get("OMP_WAIT_POLICY", ""),
                      load_average_at_start=load)
        with open(args.json, "w") as f:
            json.dump({"config": config, "results": results}, f, indent=2)
            f.write("\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
