#!/usr/bin/env bash
# package_find_package: installs the build tree into a fresh prefix, builds examples/custom_backend
# as a project of its own against it (find_package(qforge); nothing from the source tree's src/,
# the build tree's generated/ or its libqforge.a), and runs it on the bundled ResNet as the in-tree
# custom_backend_example test does.
# Usage: find_package.sh SOURCE_DIR BUILD_DIR WORK_DIR   (env: CMAKE, CCACHE)
set -euo pipefail
src=$1 build=$2 work=$3
cmake=${CMAKE:-cmake}
prefix=$work/prefix consumer=$work/consumer
fail() { echo "package_find_package: $*" >&2; exit 1; }

rm -rf "$work" && mkdir -p "$work"
"$cmake" --install "$build" --prefix "$prefix" >"$work/install.log" 2>&1 ||
  { cat "$work/install.log"; fail "cmake --install failed (is the build tree built?)"; }
[ -x "$prefix/bin/qforge" ] || fail "no bin/qforge in $prefix"
[ -f "$prefix/include/qforge/ir/graph.h" ] || fail "no include/qforge/ir/graph.h in $prefix"
[ ! -e "$prefix/include/qforge/cli" ] || fail "the CLI's headers were installed"
config_dir=$(dirname "$(find "$prefix" -name qforgeConfig.cmake | head -1)")
[ "$config_dir" != . ] || fail "no qforgeConfig.cmake in $prefix"
for f in qforgeConfigVersion.cmake qforgeTargets.cmake; do
  [ -f "$config_dir/$f" ] || fail "no $f in $config_dir"
done
# The package must not point back at the trees it was built in (or at this prefix: relocatable).
if grep -rnF -e "$src/src" -e "$build" "$config_dir"; then
  fail "the installed CMake package names the source or build tree (above)"
fi

launcher=()
[ -x "${CCACHE:-}" ] && launcher=("-DCMAKE_CXX_COMPILER_LAUNCHER=$CCACHE")  # reruns hit the cache
"$cmake" -S "$src/examples/custom_backend" -B "$consumer" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON "${launcher[@]}" \
  >"$work/configure.log" || { cat "$work/configure.log"; fail "configuring the example failed"; }
found=$(sed -n 's/^qforge_DIR:PATH=//p' "$consumer/CMakeCache.txt")
[ "$found" -ef "$config_dir" ] || fail "find_package(qforge) found '$found', not $config_dir"
"$cmake" --build "$consumer" -j 2 >"$work/build.log" ||
  { cat "$work/build.log"; fail "building the example failed"; }

# Compiled against the installed headers only, without the in-tree precompiled header...
commands=$consumer/compile_commands.json
grep -qF "$prefix/include/qforge" "$commands" || fail "no $prefix/include/qforge in $commands"
if grep -nF -e "$src/src" -e "$build/generated" -e cmake_pch "$commands"; then
  fail "the example compiled with the source tree's headers or the in-tree PCH (above)"
fi
# ...and linked with the installed library.
link=$consumer/CMakeFiles/custom_backend_example.dir/link.txt
grep -qE "$prefix/[^ ]*/libqforge\.a" "$link" || fail "the example did not link $prefix's libqforge.a"
! grep -qF "$build/libqforge.a" "$link" || fail "the example linked the build tree's libqforge.a"

out=$("$consumer/custom_backend_example" "$src/models/zoo/resnet.onnx" \
  "$src/examples/custom_backend/toy_npu.json" "$work/out" 200)
echo "$out"
grep -Eq "^top-1 on 200 test images: float [0-9.]+%, ToyNPU [0-9.]+%" <<<"$out" ||
  fail "the example printed no top-1 line"
[ -s "$work/out/toy_npu.params" ] || fail "the example wrote no toy_npu.params"
echo "package_find_package: ok"
