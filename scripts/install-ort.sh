#!/usr/bin/env bash
# Installs the pinned onnxruntime-node (ONNX Runtime for Node.js; `qforge verify` runs models in
# it) into DIR, default build/ort. Idempotent: does nothing when that version is already there.
# The versions come from tools/ort/package-lock.json. --ignore-scripts because the package ships
# its CPU binaries; its install script only fetches optional GPU libraries from NuGet.
#   scripts/install-ort.sh [DIR]      then: QFORGE_ORT_DIR=DIR qforge verify ...
set -euo pipefail
cd "$(dirname "$0")/.."
dir=${1:-build/ort}
command -v node >/dev/null && command -v npm >/dev/null ||
  { echo "install-ort: Node.js and npm are needed: apt install nodejs npm" >&2; exit 1; }

version=$(node -p "require('./tools/ort/package.json').dependencies['onnxruntime-node']")
installed="$dir/node_modules/onnxruntime-node/package.json"
if [ -f "$installed" ] &&
   [ "$(node -p 'require(process.argv[1]).version' "$(realpath "$installed")")" = "$version" ]; then
  exit 0
fi

echo "install-ort: installing onnxruntime-node@$version into $dir" >&2
mkdir -p "$dir"
cp tools/ort/package.json tools/ort/package-lock.json "$dir/"
npm ci --ignore-scripts --prefer-offline --no-audit --no-fund --loglevel=error --prefix "$dir"
