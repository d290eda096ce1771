#!/usr/bin/env bash
# Configures and builds qforge in build/ (Release, ccache, precompiled headers).
set -euo pipefail
cd "$(dirname "$0")/.."
scripts/install-deps.sh
jobs=${QFORGE_BUILD_JOBS:-$(nproc)}
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j "$jobs" "$@"
