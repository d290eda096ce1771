#!/usr/bin/env bash
# Builds qforge, installs ONNX Runtime for Node.js into build/ort, and runs the whole test suite
# (unit tests, ONNX conformance, reference models).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
# ONNX Runtime for the verify tests (build/ort; the tests default to it). Without network this
# fails and those tests fail with the install command to run.
scripts/install-ort.sh build/ort || echo "test.sh: onnxruntime-node not installed; ONNX Runtime tests will fail" >&2
cd build
ctest --output-on-failure -j "${QFORGE_TEST_JOBS:-$(nproc)}" "$@"
