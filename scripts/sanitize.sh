#!/usr/bin/env bash
# The instrumented build: Clang with AddressSanitizer and UndefinedBehaviorSanitizer, plus the
# libFuzzer targets (cmake/sanitize.cmake), in build-sanitize/. Builds everything and runs the
# test suite there with the sanitizers' options of scripts/sanitizers/env.sh; prints how long the
# build and the tests took.
#   scripts/sanitize.sh [CTEST_ARGS...]     (scripts/test.sh --sanitize does the same)
#   scripts/sanitize.sh --configure-only    configure only (scripts/fuzz.sh)
# No Python module and no packaging tests here: python3 is not instrumented (an ASan library
# cannot be loaded into it without LD_PRELOAD of the runtime), and the packages are built from the
# normal build. No benchmarks either.
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh --sanitize
build=build-sanitize
CC=clang-14 CXX=clang++-14 cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release \
  -DQFORGE_SANITIZE=ON -DQFORGE_FUZZ=ON -DQFORGE_BUILD_PYTHON=OFF -DQFORGE_BUILD_BENCH=OFF >/dev/null
[ "${1:-}" = --configure-only ] && exit 0

start=$SECONDS
cmake --build "$build" -j "${QFORGE_BUILD_JOBS:-$(nproc)}"
build_seconds=$((SECONDS - start))
scripts/install-ort.sh "$build/ort" ||
  echo "sanitize.sh: onnxruntime-node not installed; ONNX Runtime tests will fail" >&2

# shellcheck source=sanitizers/env.sh
source scripts/sanitizers/env.sh
start=$SECONDS
status=0
(cd "$build" && ctest --output-on-failure -LE packaging --timeout 3600 \
  -j "${QFORGE_TEST_JOBS:-$(nproc)}" "$@") || status=$?
echo "sanitize.sh: build ${build_seconds}s, tests $((SECONDS - start))s" >&2
exit "$status"
