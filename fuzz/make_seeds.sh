#!/usr/bin/env bash
# Writes the seed corpora under fuzz/corpus/<target>: plain files with Debian's python3
# (fuzz/make_seeds.py), and what qforge writes itself (models, a prepared model, a QAT checkpoint,
# convert formats) with fuzz_seed_writer from the fuzz build (scripts/sanitize.sh configures it).
# Seeds are committed; run this again when a format changes. Usage: fuzz/make_seeds.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build-sanitize}
corpus=fuzz/corpus
/usr/bin/python3 fuzz/make_seeds.py "$corpus"
cmake --build "$build" --target fuzz_seed_writer -j "${QFORGE_BUILD_JOBS:-$(nproc)}"
# LeakSanitizer off: the writer is a one-shot tool, not under test here.
ASAN_OPTIONS=detect_leaks=0 "$build/fuzz/fuzz_seed_writer" "$corpus"
