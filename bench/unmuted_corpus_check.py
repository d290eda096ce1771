#!/usr/bin/python3
"""Output SQNR of two torchvision corpus exports whose initialisation mutes parts of the model,
with those parts switched back on: ViT-small's head starts at zero (every output is 0, so any
quantization scores inf dB) and ConvNeXt-T's layer scales start at 1e-6 (each block adds almost
nothing to its residual). This copy gives the head random weights (normal, sd 0.05, seed 0) and
sets the 1e-6 layer scales to 0.5, then runs bench/corpus_table.py's cell (quantize, verify, ORT
QDQ against ORT float on the corpus photographs) for each binary and backend. The sixth session
of bench/README.md used it to check the GELU and MatMul-bias placement on models nothing was
tuned on.

  QFORGE_ORT_DIR=build/ort /usr/bin/python3 bench/unmuted_corpus_check.py BIN[,BIN...] \
      [--backends TensorRT,QNN,ONNXRuntime,SNPE] [--cache build/corpus]
"""
import argparse
import os
import sys
import tempfile

import numpy as np
import onnx
from onnx import numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import corpus_table  # noqa: E402


def unmuted_copy(source, target, pick, replace):
    """Writes `source` to `target` with every initializer `pick` accepts replaced."""
    model = onnx.load(source)
    for init in model.graph.initializer:
        value = numpy_helper.to_array(init)
        if pick(init.name, value):
            init.CopyFrom(numpy_helper.from_array(replace(value).astype(value.dtype), init.name))
    onnx.save(model, target)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("binaries")
    p.add_argument("--backends", default="TensorRT,QNN,ONNXRuntime,SNPE")
    p.add_argument("--cache", default=os.path.join(corpus_table.ROOT, "build/corpus"))
    args = p.parse_args()
    models = corpus_table.corpus(args.cache)  # fetches and exports what is missing
    rng = np.random.default_rng(0)
    with tempfile.TemporaryDirectory() as work:
        vit = os.path.join(work, "vit_small_op13_random_head.onnx")
        unmuted_copy(models["vit_small_op13"][0], vit,
                     lambda name, v: "heads" in name, lambda v: rng.normal(0, 0.05, v.shape))
        convnext = os.path.join(work, "convnext_tiny_op13_layer_scale_half.onnx")
        unmuted_copy(models["convnext_tiny_op13"][0], convnext,
                     lambda name, v: v.size > 1 and np.allclose(v, 1e-6),
                     lambda v: np.full(v.shape, 0.5))
        cases = [(path, corpus_table.calibration(args.cache, name, models[name][1]))
                 for path, name in ((vit, "vit_small_op13"), (convnext, "convnext_tiny_op13"))]
        print("| binary | model | " + " | ".join(args.backends.split(",")) + " |")
        print("|---" * (2 + len(args.backends.split(","))) + "|")
        for binary in args.binaries.split(","):
            for model, calib in cases:
                cells = []
                for backend in args.backends.split(","):
                    with tempfile.TemporaryDirectory(dir=work) as cell_dir:
                        r = corpus_table.cell(binary, model, backend, calib, cell_dir)
                    status = "ok" if r.get("verifies") else r.get("why", "fails")
                    sqnr = r.get("sqnr_db")
                    cells.append(status + ("" if sqnr is None else " %.1f dB" % sqnr))
                print("| %s | %s | %s |" % (binary, os.path.basename(model), " | ".join(cells)),
                      flush=True)


if __name__ == "__main__":
    main()
