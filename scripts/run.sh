#!/usr/bin/env bash
# The main job on the bundled default model: build, describe the model, run it on four reference
# images and check qforge's logits against PyTorch eager's.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh --target qforge >/dev/null
model=models/tiny_cnn.onnx
build/qforge inspect "$model"
echo
build/qforge run "$model" --input image=models/tiny_cnn.input.pb \
  --expect logits=models/tiny_cnn.output.pb "$@"
