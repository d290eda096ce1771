#!/usr/bin/env bash
# The main job on the bundled default: build, then quantize the bundled ResNet (trained on
# Fashion-MNIST, models/zoo/) for TensorRT — naive PTQ with 32 calibration batches of 64 training
# images — print float vs int8 top-1 on the full test split, deploy it (QDQ ONNX, TensorRT clip
# ranges and calibration cache) and prove the deployed model in ONNX Runtime against qforge's
# simulation on the same 10,000 images. Files land in build/quantized/resnet-tensorrt/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh --target qforge >/dev/null
build/qforge quantize models/zoo/resnet.onnx --backend TensorRT \
  --calib fashion-mnist:train --calib-batches 32 --calib-batch 64 \
  --eval fashion-mnist:test --out build/quantized/resnet-tensorrt "$@"
# ONNX Runtime (npm onnxruntime-node, pinned) for the proof; installed once into build/ort.
scripts/install-ort.sh build/ort
QFORGE_ORT_DIR=build/ort build/qforge verify build/quantized/resnet-tensorrt --data fashion-mnist:test
