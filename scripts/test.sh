#!/usr/bin/env bash
# Builds qforge, installs ONNX Runtime for Node.js into build/ort, and runs the whole test suite
# (unit tests, ONNX conformance, reference models, fuzz corpus replays).
#   scripts/test.sh [CTEST_ARGS...]
#   scripts/test.sh --sanitize [CTEST_ARGS...]   the same under ASan+UBSan (scripts/sanitize.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ "${1:-}" = --sanitize ]; then
  shift
  exec scripts/sanitize.sh "$@"
fi
scripts/build.sh
# ONNX Runtime for the verify tests (build/ort; the tests default to it). Without network this
# fails and those tests fail with the install command to run.
scripts/install-ort.sh build/ort || echo "test.sh: onnxruntime-node not installed; ONNX Runtime tests will fail" >&2
cd build
ctest --output-on-failure -j "${QFORGE_TEST_JOBS:-$(nproc)}" "$@"
