#!/usr/bin/env bash
# Installs qforge's Debian dependencies. Idempotent: does nothing when they are all present.
#   scripts/install-deps.sh [--sanitize]   --sanitize: also the Clang toolchain of the ASan+UBSan
#                                          and libFuzzer build (scripts/sanitize.sh, fuzz.sh)
set -euo pipefail

packages=(
  build-essential cmake ccache pkg-config
  libtorch-dev libonnx-dev libprotobuf-dev protobuf-compiler
  nlohmann-json3-dev libcli11-dev libyaml-cpp-dev googletest libgtest-dev libbenchmark-dev libstb-dev
  dataset-fashion-mnist libonnx-testdata
  python3-torch python3-torchvision python3-onnx
  # OpenBLAS: installing it points the libblas.so.3 alternative, which Debian's libtorch calls for
  # MatMul and Gemm, away from the reference BLAS (the zoo ViT at batch 100: 189 -> 24 ms). The
  # OpenMP build shares libtorch's OpenMP threads; the pthread build's own pool spun against them
  # (MobileNetV2 calibration 76 -> 70 ms, bench/executor_speed_table.py).
  libopenblas0-openmp
  # oneDNN's headers and CMake package: inference convolutions call the oneDNN that libtorch
  # links directly, with weights reordered once and BatchNormalization/activations fused
  # (exec/ops/dnnl_conv.cpp; bench/executor_speed_table.py).
  libdnnl-dev
  # c10d's ProcessGroupGloo headers (data-parallel QAT) include gloo's.
  libgloo-dev
  # groff renders the generated man pages in tests/cli/man_page_test.cpp (man-db pulls it in
  # where man is installed; minimal images have neither).
  groff-base
  # The Python package (`import qforge`, python/): pybind11 and Python's headers to build it,
  # numpy and pytest for its tests.
  pybind11-dev python3-dev python3-numpy python3-pytest
  # Headless rendering of `qforge analyze`'s HTML report in the tests
  # (tests/pipelines/analysis_html_browser_test.cpp): its charts are drawn by the page's script.
  chromium
  # `cpack -G DEB` computes the package's Depends with dpkg-shlibdeps (build-essential pulls
  # dpkg-dev in already; named for that tool).
  dpkg-dev
)

# Only for the instrumented build: Clang, its sanitizer and libFuzzer runtimes (libclang-rt-14-dev
# has libclang_rt.fuzzer, so -fsanitize=fuzzer needs no libfuzzer-14-dev), llvm-symbolizer for
# file:line in sanitizer reports (llvm-14).
if [ "${1:-}" = "--sanitize" ]; then
  packages+=(clang-14 libclang-rt-14-dev llvm-14)
fi

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
# Node.js runs ONNX Runtime for `qforge verify`. Checked by command, not package: a Node.js from
# elsewhere (NodeSource's nodejs bundles npm) is as good, and Debian's npm would conflict with it.
command -v node >/dev/null || missing+=(nodejs)
command -v npm >/dev/null || missing+=(npm)
[ ${#missing[@]} -eq 0 ] && exit 0

echo "install-deps: installing ${missing[*]}" >&2
sudo_cmd=()
[ "$(id -u)" -ne 0 ] && sudo_cmd=(sudo)
"${sudo_cmd[@]}" apt-get update -qq
DEBIAN_FRONTEND=noninteractive "${sudo_cmd[@]}" apt-get install -y -qq --no-install-recommends \
  "${missing[@]}" >/dev/null
