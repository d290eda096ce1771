#!/usr/bin/env bash
# The main job on the bundled default: build, then evaluate the bundled ResNet (trained on
# Fashion-MNIST, models/zoo/) on the full Fashion-MNIST test split and print its accuracy.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh --target qforge >/dev/null
build/qforge eval models/zoo/resnet.onnx --data fashion-mnist:test "$@"
