#!/usr/bin/env bash
# Installs the build into a temporary prefix (cmake --install) and builds a project outside the source tree
# against it twice: with CMake (find_package(pasa), pasa::pasa) and with pkg-config (pasa.pc). Both programs
# must print what the build's own pasa-round and pasa-attn give for the same inputs, and nothing may be
# installed outside the prefix.
# Usage: install_consumer.sh SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/pasa-install.XXXXXX")
trap 'rm -rf "$work"' EXIT
prefix=$work/prefix

fail() { echo "install_consumer: $*" >&2; exit 1; }

cmake --install "$build" --prefix "$prefix" >"$work/install.log" || { cat "$work/install.log"; fail "cmake --install failed"; }
for f in include/pasa/numeric/round.hpp include/pasa/study/sweep.hpp lib/cmake/pasa/pasaConfig.cmake \
         lib/cmake/pasa/pasaConfigVersion.cmake lib/pkgconfig/pasa.pc lib/libpasa_numeric.a bin/pasa-attn; do
  [[ -e $prefix/$f ]] || fail "$f is not installed under the prefix"
done
# Every installed file lies under the prefix (the log lists each one).
if grep -E '^-- (Installing|Up-to-date): ' "$work/install.log" | grep -v -- ": $prefix/"; then
  fail "files installed outside $prefix"
fi
# No header includes a file that was not installed (a header of src/ missing from include/).
(cd "$prefix/include" && grep -rhoE '#include "pasa/[^"]+"' pasa | sort -u | sed -E 's/#include "(.*)"/\1/' |
  while read -r h; do [[ -e $h ]] || fail "an installed header includes $h, which is not installed"; done)

# What the build's programs say for the consumer's inputs.
cat >"$work/problem.json" <<'JSON'
{"shape": {"Nq": 2, "Sq": 64, "D": 32}, "seed": 3, "generator": {"kind": "uniform", "x0": 30, "am": 0.5}}
JSON
rmse=$("$build/pasa-attn" --problem "$work/problem.json" --algorithm pasa --alloc pasa_fp16 --threads 1 --json |
       "${PYTHON:-python3}" -c 'import json,sys; m=json.load(sys.stdin)["metrics"]; print("%.6e %d" % (m["rmse"], m["nan_count"]))')
expected="round 0.1 fp16 0.0999755859375 0x2e66
pasa pasa_fp16 rmse $rmse"
expected=${expected/rmse $rmse/rmse ${rmse% *} nan ${rmse#* }}

# 1. CMake: find_package(pasa) through CMAKE_PREFIX_PATH only.
cmake -S "$src/tests/packaging/consumer" -B "$work/cmake-build" -DCMAKE_PREFIX_PATH="$prefix" \
      -DCMAKE_BUILD_TYPE=Release >"$work/configure.log" 2>&1 || { cat "$work/configure.log"; fail "configuring the consumer failed"; }
cmake --build "$work/cmake-build" >"$work/build.log" 2>&1 || { cat "$work/build.log"; fail "building the consumer failed"; }
got=$("$work/cmake-build/consumer")
[[ $got == "$expected" ]] || fail "the CMake consumer printed
$got
expected
$expected"

# 2. pkg-config.
flags=$(PKG_CONFIG_PATH="$prefix/lib/pkgconfig" pkg-config --cflags --libs pasa) || fail "pkg-config pasa failed"
[[ $flags == *"-I$prefix/lib/pkgconfig/../../include"* || $flags == *"-I$prefix/include"* ]] ||
  fail "pasa.pc's include path is not the prefix's: $flags"
# shellcheck disable=SC2086
"${CXX:-c++}" -O1 -o "$work/consumer-pc" "$src/tests/packaging/consumer/main.cpp" $flags ||
  fail "building the consumer with pkg-config's flags failed: $flags"
got=$("$work/consumer-pc")
[[ $got == "$expected" ]] || fail "the pkg-config consumer printed
$got
expected
$expected"
echo "install_consumer: both consumers built against $prefix and agree with the programs"
