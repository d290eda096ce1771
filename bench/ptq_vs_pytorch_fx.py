#!/usr/bin/python3
"""Naive post-training quantization, PyTorch FX against `qforge quantize`, side by side: the zoo's
weights, the same calibration images (the first 32 batches of 64 of the Fashion-MNIST train
split, in dataset order), the same 10,000 test images, the same thread count.

PyTorch: prepare_fx with get_default_qconfig_mapping(CONFIG), calibration forward passes,
convert_fx, top-1 of the int8 model on the quantized engine that runs CONFIG; also the top-1 of
convert_to_reference_fx's model (quantize/dequantize around float ops: what the int8 model should
compute, without the kernels). qforge: `qforge quantize --backend BACKEND ... --json`.
Reported per model and configuration pair: float top-1, both quantized top-1s, and the wall time
of prepare + calibrate for both, with the ratio qforge / PyTorch.

Configuration pairs (--backends), PYTORCH_CONFIG:QFORGE_BACKEND:
  qnnpack:ONNXRuntime  per-tensor symmetric int8 weights, asymmetric uint8 activations
  x86:TensorRT         per-channel symmetric int8 weights (x86 falls back to fbgemm's mapping
                       in a torch without it; the engine is x86, fbgemm or onednn, whichever
                       this torch has)

Usage: bench/ptq_vs_pytorch_fx.py [--models resnet mobilenet vit] [--threads 2]
           [--qforge build/qforge] [--backends qnnpack:ONNXRuntime x86:TensorRT]
           [--limit-eval N] [--pytorch-only] [--json [FILE]]
"""
import argparse
import copy
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings

import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.ao.quantization import get_default_qconfig_mapping
from torch.ao.quantization.quantize_fx import convert_fx, convert_to_reference_fx, prepare_fx

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.normpath(os.path.join(HERE, ".."))
sys.path.insert(0, os.path.join(ROOT, "tools", "zoo"))
import zoo  # noqa: E402

CLASSIFIERS = [name for name, spec in zoo.MODELS.items() if spec[1] == "classify"]
DEFAULT_MODELS = ["resnet", "mobilenet", "vit"]
DEFAULT_PAIRS = ["qnnpack:ONNXRuntime", "x86:TensorRT"]
EVAL_BATCH = 500  # zoo.evaluate's default, so the float top-1 is the zoo's own figure
# Two top-1s "agree" within 0.02 points: 2 images of the 10,000 test images.
TOP1_TOLERANCE = 0.0002
# Past this gap the int8 kernels do not compute what the reference model says they should.
KERNEL_GAP = 0.02


def log(msg):
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


def short_error(exc):
    text = f"{type(exc).__name__}: {exc}".strip().splitlines()[0]
    return text[:200]


# ----------------------------------------------------------------------------------------------
# The float model

def float_module(name, zoo_dir):
    """The zoo's PyTorch definition holding the ONNX file's initializers. The ViT's zoo.Linear
    (an nn.Linear subclass) is not a torch.nn leaf for the FX tracer: it is traced through and
    its F.linear call is quantized as a functional linear, which is what we want."""
    return zoo.load_onnx_weights(zoo.build(name), os.path.join(zoo_dir, name + ".onnx"))


def check_float_top1(name, top1, full_test, qforge_top1, zoo_dir):
    """Compares the eager float top-1 with qforge eval's and, on the full test split, with the
    one stored in the zoo's NAME.json. Returns (ok or None when nothing to compare, notes)."""
    notes, verdicts = [], []
    if qforge_top1 is not None:
        agree = abs(top1 - qforge_top1) <= TOP1_TOLERANCE
        verdicts.append(agree)
        notes.append(f"qforge eval {100 * qforge_top1:.2f}% ({'agrees' if agree else 'DIFFERS'})")
    info_path = os.path.join(zoo_dir, name + ".json")
    if full_test and os.path.exists(info_path):
        with open(info_path) as f:
            stored = json.load(f)["test"]["top1"]
        agree = abs(top1 - stored) <= TOP1_TOLERANCE
        verdicts.append(agree)
        notes.append(f"{name}.json {100 * stored:.2f}% ({'agrees' if agree else 'DIFFERS'})")
    return (all(verdicts) if verdicts else None), notes


# ----------------------------------------------------------------------------------------------
# PyTorch FX

def qconfig_mapping(config):
    """get_default_qconfig_mapping(config); 'x86' falls back to 'fbgemm' in a torch without it.
    torch answers an unknown name with a generic default instead of an error, so a name whose
    mapping is that generic default is refused."""
    def global_qconfig(name):
        return repr(get_default_qconfig_mapping(name).global_qconfig)

    generic = global_qconfig("no such backend")
    for candidate in ([config, "fbgemm"] if config == "x86" else [config]):
        if global_qconfig(candidate) != generic:
            return candidate, get_default_qconfig_mapping(candidate)
    raise ValueError(f"torch {torch.__version__} has no default qconfig mapping {config!r}")


def quantized_engine(config):
    """The engine whose kernels run a model converted with CONFIG's mapping. Debian's torch has
    neither x86 nor fbgemm: onednn runs the same per-channel int8 scheme on x86."""
    supported = torch.backends.quantized.supported_engines
    preferences = {"x86": ["x86", "fbgemm", "onednn"], "fbgemm": ["fbgemm", "x86", "onednn"]}
    for engine in preferences.get(config, [config]):
        if engine in supported:
            return engine
    raise ValueError(f"no quantized engine for {config!r} (this torch has {supported})")


def weighted_layer_counts(converted):
    """(quantized, total) Conv/Linear layers of a converted model, as modules (nn.Conv2d stays
    float, torch's *.quantized modules are int8) or as functional calls (F.linear against
    quantized.linear, as in the ViT's traced-through zoo.Linear)."""
    float_types = (nn.Conv1d, nn.Conv2d, nn.Conv3d, nn.ConvTranspose2d, nn.Linear)
    float_functions = {F.conv1d, F.conv2d, F.conv3d, F.conv_transpose2d, F.linear}
    quantized = total = 0
    for m in converted.modules():
        if isinstance(m, float_types):
            total += 1
        elif ".quantized" in type(m).__module__ and callable(getattr(m, "weight", None)):
            quantized += 1
            total += 1
    for node in converted.graph.nodes:
        if node.op != "call_function":
            continue
        if node.target in float_functions:
            total += 1
        elif str(node.target).startswith(("quantized.conv", "quantized.linear")):
            quantized += 1
            total += 1
    return quantized, total


def float_ops(converted):
    """{op: count} of the nodes that read a dequantized tensor: what the converted model still
    computes in float (Softmax in the ViT, for example), besides the graph output."""
    def is_dequantize(node):
        return (isinstance(node, torch.fx.Node)
                and ((node.op == "call_method" and node.target == "dequantize")
                     or (node.op == "call_function" and node.target is torch.dequantize)))

    skip = {"quantize_per_tensor", "quantize_per_channel", "getitem", "size"}
    counts = {}
    for node in converted.graph.nodes:
        if node.op in ("output", "placeholder", "get_attr") or is_dequantize(node):
            continue
        if not any(is_dequantize(arg) for arg in node.all_input_nodes):
            continue
        if node.op == "call_module":
            op = type(converted.get_submodule(node.target)).__name__
        else:
            op = getattr(node.target, "__name__", str(node.target))
        if op not in skip:
            counts[op] = counts.get(op, 0) + 1
    return counts


def top1(module, name, x, y):
    return zoo.evaluate(module, name, x, y, batch=EVAL_BATCH)["top1"]


def pytorch_ptq(module, name, config, calib_batches, x_test, y_test, rounds=1):
    """Prepares, calibrates (timed), converts and evaluates one configuration. Failures are
    recorded per stage: whatever ran before the failure is still reported."""
    result = {"config": config, "qconfig_mapping": None, "engine": None, "seconds": {},
              "int8_top1": None, "reference_top1": None, "quantized_layers": None,
              "float_ops": None, "errors": []}
    stage = "qconfig"
    try:
        result["qconfig_mapping"], mapping = qconfig_mapping(config)
        stage = "engine"
        result["engine"] = quantized_engine(config)
        torch.backends.quantized.engine = result["engine"]

        # Each round prepares a fresh copy and calibrates it; the fastest round is reported
        # (the machine is shared) and the last one's observers are converted.
        best = None
        for _ in range(rounds):
            model = copy.deepcopy(module).eval()
            stage = "prepare_fx"
            start, cpu_start = time.perf_counter(), time.process_time()
            prepared = prepare_fx(model, mapping, example_inputs=(calib_batches[0],))
            prepared_at = time.perf_counter()
            stage = "calibrate"
            with torch.no_grad():
                for batch in calib_batches:
                    prepared(batch)
            calibrated_at, cpu_end = time.perf_counter(), time.process_time()
            timing = {"prepare": prepared_at - start, "calibrate": calibrated_at - prepared_at,
                      "prepare_calibrate": calibrated_at - start,
                      "prepare_calibrate_cpu": cpu_end - cpu_start}
            if best is None or timing["prepare_calibrate"] < best["prepare_calibrate"]:
                best = timing
        result["seconds"] = dict(best, rounds=rounds)
    except Exception as exc:  # noqa: BLE001 - one model's failure must not end the run
        result["errors"].append(f"{stage}: {short_error(exc)}")
        return result

    try:
        reference = convert_to_reference_fx(copy.deepcopy(prepared))
        result["reference_top1"] = top1(reference, name, x_test, y_test)
    except Exception as exc:  # noqa: BLE001
        result["errors"].append(f"reference model: {short_error(exc)}")

    stage = "convert_fx"
    try:
        start = time.perf_counter()
        converted = convert_fx(prepared)
        result["seconds"]["convert"] = time.perf_counter() - start
        result["quantized_layers"] = list(weighted_layer_counts(converted))
        result["float_ops"] = float_ops(converted)
        stage = "int8 evaluation"
        result["int8_top1"] = top1(converted, name, x_test, y_test)
    except Exception as exc:  # noqa: BLE001
        result["errors"].append(f"{stage}: {short_error(exc)}")
    return result


# ----------------------------------------------------------------------------------------------
# qforge

def qforge_env(threads):
    return dict(os.environ, QFORGE_NUM_THREADS=str(threads))


def parse_json_output(text):
    """The JSON object of a --json run, tolerating stray lines before it."""
    start = text.find("{")
    if start < 0:
        raise ValueError("no JSON object in the output")
    return json.JSONDecoder().raw_decode(text[start:])[0]


def qforge_eval_top1(qforge, path, limit, threads):
    cmd = [qforge, "eval", path, "--data", "fashion-mnist:test", "--json"]
    if limit:
        cmd += ["--limit", str(limit)]
    done = subprocess.run(cmd, capture_output=True, text=True, env=qforge_env(threads))
    if done.returncode != 0:
        raise RuntimeError(f"qforge eval exited {done.returncode}: {done.stderr.strip()[-300:]}")
    return parse_json_output(done.stdout)["top1"]


def dig(report, dotted):
    value = report
    for key in dotted.split("."):
        if not isinstance(value, dict) or key not in value:
            return None
        value = value[key]
    return value if isinstance(value, (int, float)) and not isinstance(value, bool) else None


def run_qforge_quantize(args, path, backend):
    """One `qforge quantize` run: (its JSON report, wall seconds, the command line)."""
    out_dir = tempfile.mkdtemp(prefix="qforge-ptq-")
    cmd = [args.qforge, "quantize", path, "--backend", backend,
           "--calib", "fashion-mnist:train", "--calib-batches", str(args.calib_batches),
           "--calib-batch", str(args.calib_batch), "--eval", "fashion-mnist:test",
           "--out", out_dir, "--json"]
    if args.limit_eval:
        cmd += [args.qforge_limit_flag, str(args.limit_eval)]
    cmd += args.qforge_arg
    try:
        start = time.perf_counter()
        done = subprocess.run(cmd, capture_output=True, text=True, env=qforge_env(args.threads))
        wall = time.perf_counter() - start
        if done.returncode != 0:
            tail = (done.stderr.strip() or done.stdout.strip())[-300:]
            raise RuntimeError(f"exited {done.returncode}: {tail}")
        return parse_json_output(done.stdout), wall, " ".join(cmd)
    finally:
        if args.keep_out:
            log(f"qforge output kept in {out_dir}")
        else:
            shutil.rmtree(out_dir, ignore_errors=True)


def qforge_ptq(args, path, backend, calib_count):
    """Runs `qforge quantize` (--rounds times, keeping the fastest prepare+calibrate) and reads
    its JSON defensively: whatever is missing is listed, not guessed."""
    result = {"backend": backend, "float_top1": None, "top1": None, "samples": None,
              "seconds": {}, "wall_seconds": None, "missing": [], "errors": [], "command": None}
    report, best_total = None, float("inf")
    for _ in range(args.rounds):
        try:
            candidate, wall, result["command"] = run_qforge_quantize(args, path, backend)
        except Exception as exc:  # noqa: BLE001
            result["errors"].append(short_error(exc))
            return result
        timed = [dig(candidate, "seconds." + key) for key in ("prepare", "calibrate")]
        total = sum(timed) if None not in timed else wall
        if total < best_total:
            report, best_total, result["wall_seconds"] = candidate, total, wall
    result["report"] = report
    for key, dotted in [("float_top1", "float.top1"), ("top1", "quantized.top1"),
                        ("samples", "quantized.samples")]:
        result[key] = dig(report, dotted)
        if result[key] is None and key != "samples":
            result["missing"].append(dotted)
    for key in ["prepare", "calibrate"]:
        value = dig(report, "seconds." + key)
        if value is None:
            result["missing"].append("seconds." + key)
        else:
            result["seconds"][key] = value
    if len(result["seconds"]) == 2:
        result["seconds"]["prepare_calibrate"] = (result["seconds"]["prepare"] +
                                                  result["seconds"]["calibrate"])
    result["seconds"]["rounds"] = args.rounds
    if result["missing"]:
        log(f"qforge quantize --backend {backend}: JSON lacks {', '.join(result['missing'])}")
    calib_images = dig(report, "calibration.samples") or dig(report, "calib.samples")
    if calib_images is not None and calib_images != calib_count:
        result["errors"].append(f"calibrated on {calib_images} images, PyTorch on {calib_count}")
    return result


# ----------------------------------------------------------------------------------------------
# Report

def percent(value):
    return "—" if value is None else f"{100 * value:.2f}"


def seconds(value):
    return "—" if value is None else f"{value:.2f}"


def markdown(rows, meta):
    threads = f"{meta['threads']} thread{'s' if meta['threads'] != 1 else ''}"
    lines = [f"Calibration: first {meta['calib_batches']} x {meta['calib_batch']} "
             f"Fashion-MNIST train images; evaluation: {meta['eval_samples']} test images; "
             f"{threads}; torch {meta['torch']}.", "",
             "| model | config | float top-1 | PyTorch int8 top-1 | PyTorch reference top-1 | "
             "qforge top-1 | PyTorch prepare+calib s | qforge prepare+calib s | "
             "time ratio qforge/PyTorch |",
             "|---|---|---|---|---|---|---|---|---|"]
    notes = []

    def note(text):
        notes.append(text)
        return f" [{len(notes)}]"

    for row in rows:
        torch_side, qforge_side = row["pytorch"], row.get("qforge")
        config = torch_side["config"]
        if torch_side["engine"] != config:
            config += f" ({torch_side['engine'] or 'no'} engine)"
        int8, reference = percent(torch_side["int8_top1"]), percent(torch_side["reference_top1"])
        float_cell = percent(row["float_top1"])
        if row["float_check"] is False:
            float_cell += note(f"{row['model']}: float top-1 does not match: "
                               + "; ".join(row["float_check_notes"]))
        for error in torch_side["errors"]:
            int8 += note(f"{row['model']} {torch_side['config']}: PyTorch {error}")
        if (torch_side["int8_top1"] is not None and torch_side["reference_top1"] is not None
                and abs(torch_side["int8_top1"] - torch_side["reference_top1"]) > KERNEL_GAP):
            int8 += note(f"{row['model']} {torch_side['config']}: the {torch_side['engine']} "
                         "int8 kernels disagree with PyTorch's own reference model")
        torch_time = torch_side["seconds"].get("prepare_calibrate")
        if qforge_side is None:
            config += " / —"
            qforge_top1 = qforge_time = ratio = "—"
        else:
            config += f" / {qforge_side['backend']}"
            qforge_top1 = percent(qforge_side["top1"])
            qforge_seconds = qforge_side["seconds"].get("prepare_calibrate")
            qforge_time = seconds(qforge_seconds)
            ratio = ("—" if qforge_seconds is None or not torch_time
                     else f"{qforge_seconds / torch_time:.2f}")
            for error in qforge_side["errors"]:
                qforge_top1 += note(f"{row['model']} {qforge_side['backend']}: qforge {error}")
            if qforge_side["missing"]:
                qforge_top1 += note(f"{row['model']} {qforge_side['backend']}: qforge JSON "
                                    f"lacks {', '.join(qforge_side['missing'])}")
            if (qforge_side["float_top1"] is not None and row["float_top1"] is not None
                    and abs(qforge_side["float_top1"] - row["float_top1"]) > TOP1_TOLERANCE):
                float_cell += note(f"{row['model']}: qforge quantize's float top-1 is "
                                   f"{percent(qforge_side['float_top1'])}")
            if qforge_side["samples"] not in (None, row["eval_samples"]):
                qforge_top1 += note(f"{row['model']}: qforge evaluated "
                                    f"{qforge_side['samples']} images, PyTorch "
                                    f"{row['eval_samples']}")
        lines.append(f"| {row['model']} | {config} | {float_cell} | {int8} | {reference} | "
                     f"{qforge_top1} | {seconds(torch_time)} | {qforge_time} | {ratio} |")
    if notes:
        lines.append("")
        lines += [f"[{i}] {text}" for i, text in enumerate(notes, 1)]
    return "\n".join(lines)


# ----------------------------------------------------------------------------------------------

def parse_pairs(specs):
    pairs = []
    for spec in specs:
        config, sep, backend = spec.partition(":")
        if not sep or not config or not backend:
            raise SystemExit(f"--backends: {spec!r} is not PYTORCH_CONFIG:QFORGE_BACKEND")
        pairs.append((config, backend))
    return pairs


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--models", nargs="+", default=DEFAULT_MODELS, choices=CLASSIFIERS)
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--qforge", default=os.path.join(ROOT, "build", "qforge"))
    p.add_argument("--zoo", default=os.path.join(ROOT, "models", "zoo"))
    p.add_argument("--backends", nargs="+", default=DEFAULT_PAIRS, metavar="CONFIG:BACKEND",
                   help="PyTorch qconfig mapping : qforge backend (default: %(default)s)")
    p.add_argument("--calib-batches", type=int, default=32)
    p.add_argument("--calib-batch", type=int, default=64)
    p.add_argument("--rounds", type=int, default=1,
                   help="time prepare+calibrate this many times per side, keep the fastest")
    p.add_argument("--limit-eval", type=int, help="evaluate on the first N test images only")
    p.add_argument("--pytorch-only", action="store_true", help="do not run qforge quantize")
    p.add_argument("--qforge-limit-flag", default="--eval-limit",
                   help="qforge quantize's option that --limit-eval is passed to")
    p.add_argument("--qforge-arg", action="append", default=[],
                   help="extra argument for qforge quantize (repeatable)")
    p.add_argument("--keep-out", action="store_true", help="keep qforge's --out directories")
    p.add_argument("--json", nargs="?", const="-", metavar="FILE",
                   help="write JSON to FILE, or to stdout instead of the table")
    args = p.parse_args()
    if args.rounds < 1:
        raise SystemExit("--rounds must be at least 1")
    if args.limit_eval is not None and args.limit_eval <= 0:
        raise SystemExit("--limit-eval must be positive")
    pairs = parse_pairs(args.backends)

    # Observer deprecation chatter (reduce_range) and FX's note on the packed weights of the
    # ViT's functional linears, once per layer, would bury the report.
    warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\.ao\.quantization")
    warnings.filterwarnings("ignore", category=UserWarning, module=r"torch\.fx")
    torch.set_num_threads(args.threads)
    x_train, _ = zoo.load_split("train")
    calib_count = args.calib_batches * args.calib_batch
    if calib_count > len(x_train):
        raise SystemExit(f"{calib_count} calibration images asked, the train split has "
                         f"{len(x_train)}")
    calib_batches = [x_train[i * args.calib_batch:(i + 1) * args.calib_batch]
                     for i in range(args.calib_batches)]
    x_test, y_test = zoo.load_split("test")
    full_test = args.limit_eval is None or args.limit_eval >= len(x_test)
    if not full_test:
        x_test, y_test = x_test[:args.limit_eval], y_test[:args.limit_eval]
    has_qforge = os.path.isfile(args.qforge) and os.access(args.qforge, os.X_OK)
    if not has_qforge:
        log(f"{args.qforge}: no such executable; "
            + ("float weights are checked against the zoo's NAME.json only"
               if args.pytorch_only else "the qforge columns will be empty"))

    rows = []
    for name in args.models:
        path = os.path.join(args.zoo, name + ".onnx")
        module = float_module(name, args.zoo)
        float_top1 = top1(module, name, x_test, y_test)
        qforge_float = None
        if has_qforge:
            try:
                qforge_float = qforge_eval_top1(args.qforge, path, args.limit_eval, args.threads)
            except Exception as exc:  # noqa: BLE001
                log(f"{name}: qforge eval failed ({short_error(exc)})")
        float_ok, float_notes = check_float_top1(name, float_top1, full_test,
                                                 qforge_float, args.zoo)
        log(f"{name}: float top-1 {percent(float_top1)}%"
            + (f"; {'; '.join(float_notes)}" if float_notes else "; nothing to check it against"))
        for config, backend in pairs:
            log(f"{name}: PyTorch {config}")
            torch_side = pytorch_ptq(module, name, config, calib_batches, x_test, y_test,
                                     args.rounds)
            log(f"{name}: PyTorch {config} on engine {torch_side['engine']}: int8 "
                f"{percent(torch_side['int8_top1'])}%, reference "
                f"{percent(torch_side['reference_top1'])}%, prepare+calibrate "
                f"{seconds(torch_side['seconds'].get('prepare_calibrate'))} s"
                + (f", errors: {torch_side['errors']}" if torch_side["errors"] else ""))
            qforge_side = None
            if not args.pytorch_only:
                log(f"{name}: qforge quantize --backend {backend}")
                if has_qforge:
                    qforge_side = qforge_ptq(args, path, backend, calib_count)
                else:
                    qforge_side = {"backend": backend, "float_top1": None, "top1": None,
                                   "samples": None, "seconds": {}, "wall_seconds": None,
                                   "missing": [], "errors": [f"{args.qforge} not found"]}
            rows.append({"model": name, "eval_samples": len(x_test), "float_top1": float_top1,
                         "qforge_eval_float_top1": qforge_float, "float_check": float_ok,
                         "float_check_notes": float_notes, "pytorch": torch_side,
                         "qforge": qforge_side})

    meta = {"torch": torch.__version__, "threads": args.threads,
            "quantized_engines": torch.backends.quantized.supported_engines,
            "calib_batches": args.calib_batches, "calib_batch": args.calib_batch,
            "calibration": f"fashion-mnist:train, first {calib_count} images in dataset order",
            "eval_samples": len(x_test), "pairs": [f"{c}:{b}" for c, b in pairs]}
    document = {"meta": meta, "rows": rows}
    if args.json and args.json != "-":
        with open(args.json, "w") as f:
            json.dump(document, f, indent=2)
            f.write("\n")
    if args.json == "-":
        print(json.dumps(document, indent=2))
    else:
        print(markdown(rows, meta))
    return 0


if __name__ == "__main__":
    sys.exit(main())
