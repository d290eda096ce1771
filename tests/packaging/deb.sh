#!/usr/bin/env bash
# package_deb: `cpack -G DEB`, then the three packages as dpkg sees them: their control fields, their
# contents (every file `cmake --install` installs is in exactly one of them), the CMake package of
# qforge-dev found where it was extracted, and the qforge command of the qforge package, extracted
# into an empty root, quantizing the bundled ResNet, and `import qforge` from python3-qforge.
# Usage: deb.sh SOURCE_DIR BUILD_DIR WORK_DIR VERSION   (env: CMAKE, CPACK)
set -euo pipefail
src=$1 build=$2 work=$3 version=$4
cmake=${CMAKE:-cmake} cpack=${CPACK:-cpack}
arch=$(dpkg --print-architecture)
fail() { echo "package_deb: $*" >&2; exit 1; }

rm -rf "$work" && mkdir -p "$work"
# In a Makefile build tree cpack first runs `make preinstall`, which builds every target (the
# whole test suite too). A test packages what is built, as `cmake --install` installs it: named
# as a Ninja tree, which has no preinstall step, cpack only runs the install scripts.
"$cpack" -G DEB --config "$build/CPackConfig.cmake" -B "$work" -D CPACK_CMAKE_GENERATOR=Ninja \
  >"$work/cpack.log" 2>&1 || { cat "$work/cpack.log"; fail "cpack failed"; }
deb=$work/qforge_${version}_${arch}.deb dev=$work/qforge-dev_${version}_${arch}.deb
py=$work/python3-qforge_${version}_${arch}.deb
if [ ! -f "$deb" ] || [ ! -f "$dev" ] || [ ! -f "$py" ]; then
  ls -l "$work"
  fail "no qforge / qforge-dev / python3-qforge .deb for $version"
fi
ls -l "$deb" "$dev" "$py"

# Control fields.
field() { dpkg-deb -f "$1" "$2"; }
expect() {  # PACKAGE FIELD REGEX
  # Read whole first: `grep -q` may close the pipe early, and under pipefail dpkg-deb's SIGPIPE
  # would fail a field that matched.
  local value
  value=$(field "$1" "$2")
  grep -Eq "$3" <<<"$value" || fail "$(basename "$1"): $2 '$value' !~ /$3/"
}
dpkg-deb -I "$deb"
dpkg-deb -I "$dev"
dpkg-deb -I "$py"
expect "$deb" Package '^qforge$'
expect "$dev" Package '^qforge-dev$'
expect "$py" Package '^python3-qforge$'
for p in "$deb" "$dev" "$py"; do
  expect "$p" Version "^${version//./\\.}\$"
  expect "$p" Architecture "^$arch\$"
  expect "$p" Maintainer '^.+ <.+@.+>$'
  expect "$p" Description '.'
done
expect "$deb" Depends '(^|, )libtorch[0-9.]+ '  # from dpkg-shlibdeps: the soname packages
expect "$deb" Depends '(^|, )libc6 '
expect "$deb" Recommends 'nodejs'
expect "$dev" Depends "(^|, )qforge \(= ${version//./\\.}\)"
expect "$dev" Depends '(^|, )libtorch-dev(,|$)'
expect "$py" Depends '(^|, )python3-torch(,|$)'
expect "$py" Depends '(^|, )libtorch[0-9.]+ '
[ -z "$(field "$deb" Homepage)" ] || fail "a Homepage field"

# Contents: the packages together hold exactly the files of an install to /usr, each file in one
# package (every .deb cpack made: an install component of its own would be a package of its own).
list() { dpkg-deb -c "$1" | awk '$1 !~ /^d/ { sub(/^\./, "", $6); print $6 }' | sort; }
mkdir -p "$work/files"
for p in "$work"/*.deb; do
  list "$p" >"$work/files/$(dpkg-deb -f "$p" Package)"
done
DESTDIR=$work/stage "$cmake" --install "$build" --prefix /usr >"$work/install.log" 2>&1 ||
  { cat "$work/install.log"; fail "cmake --install failed"; }
(cd "$work/stage" && find . ! -type d | sed 's/^\.//' | sort) >"$work/installed.files"
sort "$work"/files/* >"$work/packaged.files"
if uniq -d "$work/packaged.files" | grep .; then fail "files in two packages (above)"; fi
diff "$work/installed.files" "$work/packaged.files" ||
  fail "the packages' files (>) differ from what cmake --install installs (<)"
has() {  # LIST REGEX
  grep -Eq "$2" "$work/files/$1" || fail "$1: no file matching $2"
}
has qforge '^/usr/bin/qforge$'
has python3-qforge '^/usr/lib/python3/dist-packages/qforge/_qforge\.cpython-[^/]+\.so$'
has python3-qforge '^/usr/lib/python3/dist-packages/qforge/__init__\.pyi?$'
has qforge-dev '^/usr/lib/([^/]+/)?libqforge\.a$'
has qforge-dev '^/usr/include/qforge/ir/graph\.h$'
for f in qforgeConfig qforgeConfigVersion qforgeTargets; do
  has qforge-dev "^/usr/lib/([^/]+/)?cmake/qforge/$f\.cmake$"
done
# Man pages and shell completion, whichever the build installs, come with the command.
docs='^/usr/share/(man|bash-completion)/'
grep -E "$docs" "$work/installed.files" | tee "$work/docs.files"
grep -E "$docs" "$work/files/qforge" | diff "$work/docs.files" - ||
  fail "man pages or completion (<) not in the qforge package"

# qforge-dev's CMake package, extracted elsewhere, points at where it was extracted.
root=$work/root
dpkg-deb -x "$dev" "$root"
mkdir -p "$work/probe"
cat >"$work/probe/CMakeLists.txt" <<'CMAKE'
cmake_minimum_required(VERSION 3.18)
project(probe LANGUAGES CXX)
find_package(qforge REQUIRED)
get_target_property(includes qforge::qforge INTERFACE_INCLUDE_DIRECTORIES)
get_target_property(library qforge::qforge LOCATION)
message(STATUS "probe: ${qforge_DIR}|${includes}|${library}")
CMAKE
"$cmake" -S "$work/probe" -B "$work/probe/build" -DCMAKE_PREFIX_PATH="$root/usr" \
  >"$work/probe.log" || { cat "$work/probe.log"; fail "find_package(qforge) from qforge-dev failed"; }
probe=$(sed -n 's/^-- probe: //p' "$work/probe.log")
echo "find_package(qforge) from qforge-dev: $probe"
IFS='|' read -r dir includes library <<<"$probe"
[[ $dir == "$root"/usr/lib*/cmake/qforge ]] || fail "qforge_DIR $dir not under $root"
[ "$includes" = "$root/usr/include/qforge" ] || fail "include directories $includes"
[[ $library == "$root"/usr/lib*/libqforge.a && -f $library ]] || fail "library $library"

# The qforge package alone, in a root of its own: the command runs from it (on the system's
# shared libraries, no RUNPATH into this build) and quantizes.
rm -rf "$root" && dpkg-deb -x "$deb" "$root"
qforge=$root/usr/bin/qforge
if readelf -d "$qforge" | grep -E 'R(UN)?PATH'; then fail "the installed qforge has an RPATH"; fi
"$qforge" --version | tee "$work/version.txt"
grep -qF "$version" "$work/version.txt" || fail "qforge --version does not say $version"
out=$work/quantized
"$qforge" quantize "$src/models/zoo/resnet.onnx" --backend TensorRT --calib fashion-mnist:train \
  --calib-batches 1 --calib-batch 32 --out "$out" --quiet ||
  fail "qforge quantize exited with $?"
for f in prepared.onnx prepared.json deploy.json; do
  [ -s "$out/$f" ] || { ls -l "$out"; fail "quantize wrote no $f"; }
done

# python3-qforge alone: Debian's python3 imports it from the extracted root and runs a command.
pyroot=$work/pyroot
rm -rf "$pyroot" && dpkg-deb -x "$py" "$pyroot"
PYTHONPATH=$pyroot/usr/lib/python3/dist-packages /usr/bin/python3 -c '
import sys, qforge
assert qforge.__file__.startswith(sys.argv[1]), qforge.__file__
print("python3-qforge:", qforge.__version__, qforge.inspect(sys.argv[2])["outputs"][0]["name"])
' "$pyroot" "$src/models/zoo/resnet.onnx" || fail "import qforge from python3-qforge failed"
echo "package_deb: ok"
