#!/usr/bin/python3
"""W8A8 output quality of the corpus's image models on one backend (TensorRT by default), on
photographs no calibration or tuning saw (issue #17's "TensorRT W8A8 output SQNR >= 20 dB with
real-image calibration"). Per model, three disjoint sets of crops of skimage's pictures (the
corpus's own kind of data for that model, bench/corpus/make_images.py, different seeds):
calibration (--calib, default 32), validation (16) and held-out (16). Columns, each the SQNR of
ONNX Runtime running the QDQ model against ONNX Runtime running the float model on the held-out
crops (the lowest over float outputs):

- float, input ±½ step: the float model itself when its input moves by half an 8-bit step;
- naive: `qforge quantize` with the backend's observers (EMA MinMax for TensorRT);
- observers tuned: `--target-sqnr 20 --max-trials 5 --eval VALIDATION`, which stops before any
  unit is widened or kept float, so every weight and activation stays 8-bit: the baseline, then
  Percentile, Kl and Mse for activations and Mse for weights, each kept when it scores better on
  the validation crops. The observers chosen are named.
- distilled (with --qat-epochs N): `qforge qat` from the tuned observers, trained without labels
  on 256 other crops (seed 11; `--loss auto`: KL on the scores before a final Softmax, else MSE
  against the float model; BN frozen), Adam 1e-4 with a cosine schedule, batches of 8, N epochs.
  Still every weight and activation int8. A model with several outputs is distilled on all of
  them (qforge's default); --distill-at V1,V2 distils those intermediate values too (names of
  one model: use it with --models).

  QFORGE_ORT_DIR=build/ort /usr/bin/python3 bench/tensorrt_sqnr.py [--models a,b]
      [--backend TensorRT] [--calib 32] [--qat-epochs N [--distill-at V1,V2]]
      [--cache build/corpus] [--json FILE]

By default one export per torchvision architecture (its lowest opset); --models names others.

Fetches the corpus and makes the crops on first use (as bench/corpus_table.py does). Prints a
markdown table.
"""
import argparse
import json
import os
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus_table as ct  # noqa: E402

# Image models that are not judged here, and why.
LEFT_OUT = {
    # torchvision initialises the classification head to zero: a constant output.
    "vit_small": "constant output (zero-initialised head)",
    # One image without a batch axis, and boxes after NMS: their number and order move.
    "ssdlite320": "outputs after NMS (boxes come and go)",
}


def crops(cache, name, spec, role, count, seed):
    """A folder of `count` crops for `role` (calib, val, held) of the model's kind."""
    return ct.make_crops(os.path.join(cache, "images", "sqnr", f"{name}_{role}"), spec, count,
                         seed)


def stacked_input(qforge, model, folder, work):
    """The folder's samples stacked on a batch axis as one .npy, fed one row at a time."""
    name = json.loads(ct.run([qforge, "inspect", model, "--json"]).stdout)["inputs"][0]["name"]
    x = np.stack([np.load(os.path.join(folder, f)) for f in sorted(os.listdir(folder))])
    path = os.path.join(work, "held.npy")
    np.save(path, x)
    return [({name: path}, True)]


def held_out_sqnr(model, qdq, runs, work):
    ref = ct.ort_runs(model, runs, work)
    got = ct.ort_runs(qdq, runs, work)
    return min(ct.sqnr_db(r, g) for r, g in zip(ref, got) if r.dtype.kind == "f")


def quantized(qforge, model, backend, calib, calib_count, work, extra=()):
    out = os.path.join(work, "q")
    batch = 4 if calib_count > 4 else calib_count
    done = ct.run([qforge, "quantize", model, "--backend", backend, "--calib", "folder:" + calib,
                   "--calib-batches", str(calib_count // batch), "--calib-batch", str(batch),
                   "--out", out, "--quiet", "--json", *extra])
    if done.returncode != 0:
        raise RuntimeError(ct.one_line(done.stderr))
    return out


def distilled(qforge, model, backend, calib, calib_count, train, config, epochs, work,
              distill_at=""):
    """`qforge qat` without labels from the tuned observers' config; the output directory."""
    path = os.path.join(work, "config.json")
    with open(path, "w") as f:
        json.dump(config or {}, f)
    out = os.path.join(work, "qat")
    done = ct.run([qforge, "qat", model, "--backend", backend, "--data", "folder:" + train,
                   "--calib", "folder:" + calib, "--calib-batches", str(calib_count // 4),
                   "--calib-batch", "4", "--batch", "8", "--optimizer", "adam", "--lr", "1e-4",
                   "--epochs", str(epochs), "--config", path, "--out", out, "--quiet", "--json",
                   *(["--distill-at", distill_at] if distill_at else [])])
    if done.returncode != 0:
        raise RuntimeError(ct.one_line(done.stderr))
    return out


def chosen_observers(out):
    report = json.load(open(os.path.join(out, "report.json")))["autotune"]
    best = report["trials"][report["best_trial"] - 1]
    config = best["config"]
    names = []
    for kind in ("activation", "weight"):
        observer = (config.get(kind) or {}).get("observer")
        if observer:
            names.append(f"{kind} {observer}")
    return ", ".join(names) or "backend's", best["metric"], config


def one_export_each(models):
    """The models, with only the lowest opset of each torchvision architecture: the exports of
    one architecture carry the same weights, and every one is raised to opset 13 for TensorRT's
    per-channel weights, so they quantize alike."""
    chosen = {}
    for name in sorted(models, key=lambda n: (n.split("_op")[0], int(n.split("_op")[1])
                                              if "_op" in n else 0)):
        chosen.setdefault(name.split("_op")[0], name)
    return sorted(chosen.values())


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--qforge", default=os.path.join(ct.ROOT, "build/qforge"))
    p.add_argument("--cache", default=os.path.join(ct.ROOT, "build/corpus"))
    p.add_argument("--models", default="")
    p.add_argument("--backend", default="TensorRT")
    p.add_argument("--calib", type=int, default=32)
    p.add_argument("--qat-epochs", type=int, default=0)
    p.add_argument("--distill-at", default="")
    p.add_argument("--json", default="")
    a = p.parse_args()
    models = {name: (path, spec) for name, (path, spec) in ct.corpus(a.cache).items()
              if spec[0] == "images"}
    wanted = [m for m in a.models.split(",") if m] or one_export_each(models)
    ct.ensure_debian_package("python3-skimage", "skimage.data")
    rows = {}
    qat = f" distilled, {a.qat_epochs} epochs |" if a.qat_epochs else ""
    print(f"| model | float, input ±½ step | {a.backend} naive | observers tuned | chosen "
          f"(validation SQNR) |{qat}")
    print("|---|---|---|---|---|" + ("---|" if qat else ""))
    for name in wanted:
        path, spec = models[name]
        skip = [why for prefix, why in LEFT_OUT.items() if name.startswith(prefix)]
        if skip:
            print(f"| {name} | - | - | - | not judged: {skip[0]} |" + (" - |" if qat else ""),
                  flush=True)
            rows[name] = {"left_out": skip[0]}
            continue
        calib = crops(a.cache, name, spec, "calib", a.calib, 0)
        val = crops(a.cache, name, spec, "val", 16, 3)
        held = crops(a.cache, name, spec, "held", 16, 7)
        row = {}
        with tempfile.TemporaryDirectory() as work:
            runs = stacked_input(a.qforge, path, held, work)
            row["input_floor_db"] = ct.noise_floor(path, runs, work)
            try:
                with tempfile.TemporaryDirectory() as w:
                    out = quantized(a.qforge, path, a.backend, calib, a.calib, w)
                    row["naive_db"] = held_out_sqnr(path, os.path.join(out, "model.qdq.onnx"),
                                                    runs, w)
                with tempfile.TemporaryDirectory() as w:
                    out = quantized(a.qforge, path, a.backend, calib, a.calib, w,
                                    ["--target-sqnr", "20", "--max-trials", "5", "--eval",
                                     "folder:" + val])
                    row["tuned_db"] = held_out_sqnr(path, os.path.join(out, "model.qdq.onnx"),
                                                    runs, w)
                    row["chosen"], row["validation_db"], config = chosen_observers(out)
                if a.qat_epochs:
                    train = crops(a.cache, name, spec, "train", 256, 11)
                    with tempfile.TemporaryDirectory() as w:
                        out = distilled(a.qforge, path, a.backend, calib, a.calib, train, config,
                                        a.qat_epochs, w, a.distill_at)
                        row["distilled_db"] = held_out_sqnr(
                            path, os.path.join(out, "model.qdq.onnx"), runs, w)
            except RuntimeError as e:
                row["error"] = str(e)
        rows[name] = row
        fmt = lambda k: f"{row[k]:.1f} dB" if k in row else "-"  # noqa: E731
        chosen = (f"{row['chosen']} ({row['validation_db']:.1f} dB)" if "chosen" in row
                  else row.get("error", "-"))
        print(f"| {name} | {fmt('input_floor_db')} | {fmt('naive_db')} | {fmt('tuned_db')} | "
              f"{chosen} |" + (f" {fmt('distilled_db')} |" if qat else ""), flush=True)
    if a.json:
        with open(a.json, "w") as f:
            json.dump(rows, f, indent=2)


if __name__ == "__main__":
    main()
