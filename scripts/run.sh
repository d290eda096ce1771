#!/usr/bin/env bash
# The main job on the bundled default: build, then quantize the bundled ResNet (trained on
# Fashion-MNIST, models/zoo/) for TensorRT — naive PTQ with 32 calibration batches of 64 training
# images — and print float vs int8 top-1 on the full test split. Files land in build/quantized/.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh --target qforge >/dev/null
build/qforge quantize models/zoo/resnet.onnx --backend TensorRT \
  --calib fashion-mnist:train --calib-batches 32 --calib-batch 64 \
  --eval fashion-mnist:test --out build/quantized/resnet-tensorrt "$@"
