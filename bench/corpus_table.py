#!/usr/bin/python3
"""Third-party ONNX corpus x built-in backends (issue #17): for every model, whether qforge loads
it, and per backend whether it quantizes (W8A8 backend defaults, naive PTQ), whether the written
ONNX artifacts load and run in ONNX Runtime and `qforge verify` passes, and the output SQNR of
ONNX Runtime running the QDQ model against ONNX Runtime running the float model on the same
calibration inputs. Prints a markdown table; a failing cell says why in one line. For image
models a column gives the float model's own output SQNR when its input moves by half an 8-bit
step (input_noise_floor): the best any quantizer of the input can do, which explains a model
that no backend brings to 20 dB.

  QFORGE_ORT_DIR=build/ort /usr/bin/python3 bench/corpus_table.py [--models a,b]
      [--backends TensorRT,SNPE] [--cache build/corpus] [--json FILE]
      [--calib-batches 2 --calib-batch 1] [--verify-limit 2]

Fetches the corpus (bench/corpus/fetch.sh, export_torchvision.py) and makes the calibration
photographs (bench/corpus/make_images.py: Debian's python3-skimage, installed when missing) on
first use.
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BACKENDS = ["Academic", "Academic_NLP", "NNIE", "ONNX_QNN", "ONNXRuntime", "OpenVINO", "PPLCUDA",
            "PPLW8A16", "QDQ", "QNN", "SNPE", "STPU", "Tengine_u8", "TensorRT", "TensorRT_NLP",
            "Vitis"]

# name -> (file under the cache, calibration: ("images", shape, layout, norm), ("random", params)
# or ("spec", a --calib source as given))
NPM_MODELS = {
    "u2netp": ("u2netp.onnx", ("images", "3,320,320", "nchw", "imagenet")),
    # M-LSD divides by 127.5 and subtracts 1 itself: it takes RGB in [0, 255] plus a channel of
    # ones, as the original M-LSD demo feeds it.
    "mlsd_320_tiny": ("mlsd_320_tiny.onnx", ("images", "320,320,4", "nhwc", "raw255")),
    "oww_melspectrogram": ("oww_melspectrogram.onnx", ("random", "normal,shape=16000")),
    "oww_embedding": ("oww_embedding.onnx", ("random", "normal")),
    # 512 samples of 16 kHz audio (noise at speech level), the LSTM state [2, batch, 128] at
    # zero as a stream starts, and the sample rate, which picks the If branch.
    "silero_vad_op15": ("silero_vad_op15.onnx",
                        ("spec", "input=random:normal,std=0.1,shape=512;state=const:0;"
                                 "sr=const:16000")),
    "isnet_fp16": ("isnet_fp16.onnx", ("images", "3,1024,1024", "nchw", "imagenet")),
    # PaddleOCR (Paddle2ONNX, weights as Constant nodes, HardSigmoid squeeze-excitation): crops
    # of skimage's pictures of printed text (a text detector's map is near zero everywhere on
    # photographs without text), normalised as PaddleOCR does (ImageNet mean/std for detection,
    # [-1, 1] for the 48-pixel-high text line models). The line models get single lines of the
    # printed page, padded as PaddleOCR pads them; the direction classifier half of them upside
    # down, which is what it is there to tell.
    "ppocr_v4_det": ("ppocr_v4_det.onnx", ("images", "3,320,320", "nchw", "imagenet", "text")),
    "ppocr_v4_rec": ("ppocr_v4_rec.onnx", ("images", "3,48,320", "nchw", "pm1", "lines")),
    "ppocr_mobile_cls": ("ppocr_mobile_cls.onnx",
                         ("images", "3,48,192", "nchw", "pm1", "lines", 0.5)),
}
TORCHVISION = ["mobilenet_v3_small", "efficientnet_b0", "shufflenet_v2_x0_5", "squeezenet1_1",
               "densenet121", "convnext_tiny", "vit_small"]


def run(cmd, **kw):
    return subprocess.run(cmd, capture_output=True, text=True, **kw)


def one_line(text):
    lines = [l for l in (text or "").strip().splitlines() if l.strip()]
    return lines[-1][:160] if lines else "(no message)"


def ensure_debian_package(package, module):
    """Installs a Debian package the bench needs (apt-get; sudo when not root) unless `module`
    already imports in Debian's python3."""
    if run(["/usr/bin/python3", "-c", f"import {module}"]).returncode == 0:
        return
    sudo = [] if os.geteuid() == 0 else ["sudo"]
    print(f"corpus_table.py: installing {package}", file=sys.stderr)
    run(sudo + ["apt-get", "update", "-qq"])
    done = run(sudo + ["apt-get", "install", "-y", "-qq", "--no-install-recommends", package],
               env=dict(os.environ, DEBIAN_FRONTEND="noninteractive"))
    if done.returncode != 0:
        sys.exit(f"corpus_table.py: apt-get install {package} failed: " + one_line(done.stderr))


def corpus(cache):
    done = run([os.path.join(ROOT, "bench/corpus/fetch.sh"), cache])
    if done.returncode != 0:
        sys.exit("corpus_table.py: " + one_line(done.stderr))
    models = {}
    for line in done.stdout.splitlines():
        name, path = line.split()
        if name in NPM_MODELS:
            models[name] = (path, NPM_MODELS[name][1])
    tv = os.path.join(cache, "torchvision")
    done = run(["/usr/bin/python3", os.path.join(ROOT, "bench/corpus/export_torchvision.py"), tv])
    for line in done.stdout.splitlines():
        name, path = line.split()
        if name.startswith("ssdlite320"):
            # One [3, 320, 320] image in [0, 1] per run; the model normalises it itself.
            models[name] = (path, ("images", "3,320,320", "nchw", "unit"))
            continue
        size = "64" if name.startswith("vit_small") else "224"
        models[name] = (path, ("images", f"3,{size},{size}", "nchw", "imagenet"))
    return models


def calibration(cache, name, spec):
    if spec[0] == "random":
        return "random:" + spec[1]
    if spec[0] == "spec":
        return spec[1]
    _, shape, layout, norm, *rest = spec
    pictures = rest[0] if rest else "photos"
    turn = rest[1] if len(rest) > 1 else 0.0
    ensure_debian_package("python3-skimage", "skimage.data")
    folder = os.path.join(cache, "images", f"{shape.replace(',', 'x')}_{layout}_{norm}" +
                          ("" if pictures == "photos" else "_" + pictures) +
                          (f"_turn{round(turn * 100)}" if turn else ""))
    return "folder:" + make_crops(folder, spec)


def make_crops(folder, spec, count=16, seed=0):
    """`folder`, holding `count` crops of an ("images", shape, layout, norm[, pictures[, turn]])
    spec made by make_images.py with `seed` unless it exists already."""
    _, shape, layout, norm, *rest = spec
    pictures = rest[0] if rest else "photos"
    turn = rest[1] if len(rest) > 1 else 0.0
    if not os.path.isdir(folder):
        done = run(["/usr/bin/python3", os.path.join(ROOT, "bench/corpus/make_images.py"),
                    folder + ".tmp", "--shape", shape, "--layout", layout, "--norm", norm,
                    "--count", str(count), "--seed", str(seed), "--pictures", pictures,
                    "--turn", str(turn)])
        if done.returncode != 0:
            sys.exit(f"{os.path.basename(sys.argv[0])}: make_images.py: " +
                     one_line(done.stderr))
        os.replace(folder + ".tmp", folder)
    return folder


def sqnr_db(reference, test):
    noise = np.sum((reference.astype(np.float64) - test) ** 2)
    signal = np.sum(reference.astype(np.float64) ** 2)
    return float("inf") if noise == 0 else 10 * np.log10(signal / noise)


def ort_outputs(model, inputs, out_dir, rows=True):
    """ONNX Runtime's outputs; `rows`: the inputs are rows of a batch, run one row at a time (a
    model with a fixed batch of 1 takes no more), else each input is one whole run."""
    cmd = ["node", os.path.join(ROOT, "tools/ort/run_model.js"), "--model", model,
           "--out-dir", out_dir, "--ort-dir", os.environ.get("QFORGE_ORT_DIR", "build/ort"),
           "--batch", "1" if rows else "0"]
    for name, path in inputs.items():
        cmd += ["--input", name, path]
    done = run(cmd)
    if done.returncode != 0:
        raise RuntimeError(one_line(done.stderr))
    files = sorted(f for f in os.listdir(out_dir) if f.startswith("output_"))
    return [np.load(os.path.join(out_dir, f)) for f in files]


def cell(qforge, model, backend, calib, work, calib_batches=2, calib_batch=1, verify_limit=2):
    out = os.path.join(work, backend)
    done = run([qforge, "quantize", model, "--backend", backend, "--calib", calib,
                "--calib-batches", str(calib_batches), "--calib-batch", str(calib_batch),
                "--out", out, "--quiet", "--json"])
    if done.returncode != 0:
        return {"quantizes": False, "why": one_line(done.stderr)}
    result = {"quantizes": True}
    done = run([qforge, "verify", out, "--data", calib, "--limit", str(verify_limit), "--quiet"])
    result["verifies"] = done.returncode == 0
    if done.returncode != 0:
        mismatch = [l for l in done.stdout.splitlines() if l.startswith("MISMATCH")]
        message = one_line(done.stderr or done.stdout)
        if "lists no ONNX model to verify" in message and "no affine grid" in message:
            result["why"] = "no ONNX artifact: the backend's grid (NNIE's logarithmic one) has " \
                            "no QuantizeLinear form, so there is nothing for ONNX Runtime to run"
        else:
            result["why"] = "verify: " + (mismatch[0][len("MISMATCH"):].strip() if mismatch
                                          else message)
    result["sqnr_db"] = None
    qdq = os.path.join(out, "model.qdq.onnx")
    if os.path.exists(qdq):
        try:
            runs = dump_inputs(qforge, model, calib, work)
            ref = ort_runs(model, runs, work)
            got = ort_runs(qdq, runs, work)
            result["sqnr_db"] = min(sqnr_db(r, g) for r, g in zip(ref, got))
        except RuntimeError as e:
            result["verifies"] = False
            result["why"] = "ONNX Runtime: " + str(e)
        except LookupError:
            pass  # random data: verify's own figures stand
    return result


def input_noise_floor(qforge, model, calib, work):
    """The output SQNR of the float model itself when its input moves by uniform noise of half an
    8-bit step of the input's range: what any quantizer that rounds the input to 8 bits can reach
    at best. A model that amplifies small input changes (M-LSD) stays far below 20 dB here."""
    return noise_floor(model, dump_inputs(qforge, model, calib, work), work)


def noise_floor(model, runs, work):
    """input_noise_floor on given runs of the model's one input."""
    noisy_runs = []
    for k, (inputs, rows) in enumerate(runs):
        (name, path), = inputs.items()
        x = np.load(path)
        step = (float(x.max()) - float(x.min())) / 255
        noise = np.random.default_rng(k).uniform(-step / 2, step / 2, x.shape).astype(x.dtype)
        noisy_path = os.path.join(work, f"inputs_noisy_{k}.npy")
        np.save(noisy_path, x + noise)
        noisy_runs.append(({name: noisy_path}, rows))
    ref = ort_runs(model, runs, work)
    got = ort_runs(model, noisy_runs, work)
    return min(sqnr_db(r, g) for r, g in zip(ref, got) if r.dtype.kind == "f")


def dump_inputs(qforge, model, calib, work):
    """The first two calibration photographs as runs of the model's one input, each run an
    ({input: file}, rows) pair: one run of both stacked on a batch axis (rows, fed one at a time),
    or, when a photograph has the input's whole shape (no batch axis: SSDlite), one whole run each
    (image models only: a random: source has no files to reuse)."""
    if not calib.startswith("folder:"):
        raise LookupError("no files")
    graph_input = json.loads(run([qforge, "inspect", model, "--json"]).stdout)["inputs"][0]
    folder = calib[len("folder:"):]
    photos = [np.load(os.path.join(folder, f)) for f in sorted(os.listdir(folder))[:2]]
    whole = photos[0].ndim == len(graph_input["shape"])
    runs = []
    for k, x in enumerate(photos if whole else [np.stack(photos)]):
        path = os.path.join(work, f"inputs_{k}.npy")
        np.save(path, x)
        runs.append(({graph_input["name"]: path}, not whole))
    return runs


def ort_runs(model, runs, work):
    """ONNX Runtime's outputs over several runs, each output concatenated along its first axis
    (scalars stacked)."""
    per_run = [ort_outputs(model, inputs, tempfile.mkdtemp(dir=work), rows)
               for inputs, rows in runs]
    if len(per_run) == 1:
        return per_run[0]
    return [np.concatenate(parts) if parts[0].ndim > 0 else np.stack(parts)
            for parts in zip(*per_run)]


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--qforge", default=os.path.join(ROOT, "build/qforge"))
    p.add_argument("--cache", default=os.path.join(ROOT, "build/corpus"))
    p.add_argument("--models", default="")
    p.add_argument("--backends", default=",".join(BACKENDS))
    p.add_argument("--json", default="")
    p.add_argument("--calib-batches", type=int, default=2)
    p.add_argument("--calib-batch", type=int, default=1)
    # Two samples keep the table under two hours; a quality gap (ORT's SQNR against the float
    # model beside the simulation's) over 2 samples of a 2-class output is 4 numbers, so a
    # failing gap is worth rerunning with more.
    p.add_argument("--verify-limit", type=int, default=2)
    a = p.parse_args()
    models = corpus(a.cache)
    wanted = [m for m in a.models.split(",") if m] or sorted(models)
    rows = {}
    print("| model | loads | float, input ±½ step | " + " | ".join(a.backends.split(",")) + " |")
    print("|---|---|---|" + "---|" * len(a.backends.split(",")))
    for name in wanted:
        path, spec = models[name]
        inspect = run([a.qforge, "inspect", path])
        loads = inspect.returncode == 0 and "cannot run" not in inspect.stdout
        row = {"loads": loads, "backends": {}}
        cells = []
        if not loads:
            row["why"] = one_line(inspect.stdout if inspect.returncode == 0 else inspect.stderr)
        with tempfile.TemporaryDirectory() as work:
            calib = calibration(a.cache, name, spec) if loads else None
            floor = None
            if loads and calib.startswith("folder:"):
                try:
                    floor = input_noise_floor(a.qforge, path, calib, work)
                except RuntimeError as e:
                    row["floor_error"] = str(e)
            row["input_noise_floor_db"] = floor
            for backend in a.backends.split(","):
                if not loads:
                    cells.append("-")
                    continue
                c = cell(a.qforge, path, backend, calib, work, a.calib_batches, a.calib_batch,
                         a.verify_limit)
                row["backends"][backend] = c
                if not c["quantizes"]:
                    cells.append("no: " + c["why"])
                elif not c["verifies"]:
                    cells.append("q; " + c.get("why", "verify failed"))
                else:
                    s = c["sqnr_db"]
                    cells.append("ok" + ("" if s is None else f" {s:.1f} dB"))
        rows[name] = row
        floor_cell = "-" if row.get("input_noise_floor_db") is None else f"{floor:.1f} dB"
        print(f"| {name} | {'yes' if loads else 'no: ' + row['why']} | {floor_cell} | " +
              " | ".join(cells) + " |", flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
