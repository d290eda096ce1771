#!/usr/bin/env bash
# Builds qforge and runs the whole test suite (unit tests, ONNX conformance, reference models).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/build.sh
cd build
ctest --output-on-failure -j "${QFORGE_TEST_JOBS:-$(nproc)}" "$@"
