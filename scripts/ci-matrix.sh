#!/usr/bin/env bash
# The build matrix that CI (.ci/run) runs after the README's test command (./scripts/test.sh, which leaves
# the native Release build in ./build). It proves what the README claims of every CPU and compiler:
#   1. portable: -march=x86-64-v3 (AVX2, FMA, F16C, no AVX-512), so every AVX-512 fast path's portable twin is
#      compiled and run; -Wshadow -Werror on the library; the default tests; and output hashes (every preset x
#      algorithm on three shapes, the four paper sweeps' first rows: scripts/output_hashes.py) equal to the
#      native build's, bit for bit.
#   2. baseline x86-64 (-march=x86-64-v2: no FMA, no F16C either): builds warning-free; the attention hashes equal.
#   3. clang + AddressSanitizer + UndefinedBehaviorSanitizer (Debug, -O1): the fast tests.
# Each stage prints its wall time; on 2 cores the whole matrix takes about 25 minutes (docs/building-and-testing.md).
# Usage: scripts/ci-matrix.sh [STAGE ...]   (stages: portable baseline sanitize; default: all three)
set -euo pipefail
cd "$(dirname "$0")/.."
jobs=$(nproc)
stages=("$@")
((${#stages[@]})) || stages=(portable baseline sanitize)
[[ -x build/pasa-attn ]] || { echo "ci-matrix: run ./scripts/test.sh first (it builds ./build)" >&2; exit 2; }
py=/usr/bin/python3
[[ -x $py ]] || py=python3
hashes_dir=$(mktemp -d "${TMPDIR:-/tmp}/pasa-ci-hashes.XXXXXX")
trap 'rm -rf "$hashes_dir"' EXIT

# The native build's hashes, computed once (full set, and the attention-only set for the slow baseline build).
native_hashes() {
  local kind=$1
  if [[ ! -f $hashes_dir/native-$kind.txt ]]; then
    "$py" scripts/output_hashes.py build $([[ $kind == quick ]] && echo --quick) >"$hashes_dir/native-$kind.txt"
  fi
  echo "$hashes_dir/native-$kind.txt"
}
# Compares a build's hashes with the native build's; fails naming the first differing runs.
same_hashes() {
  local build=$1 kind=$2 native
  native=$(native_hashes "$kind")
  "$py" scripts/output_hashes.py "$build" $([[ $kind == quick ]] && echo --quick) >"$hashes_dir/$build.txt"
  if ! diff "$native" "$hashes_dir/$build.txt" >"$hashes_dir/diff.txt"; then
    echo "ci-matrix: outputs of $build differ from the native build's:" >&2
    head -20 "$hashes_dir/diff.txt" >&2
    return 1
  fi
  echo "ci-matrix: $(wc -l <"$native") output hashes of $build equal the native build's"
}
# Debian packages a stage needs beyond scripts/deps.sh's (installed only when missing, as deps.sh does).
need_packages() {
  local missing=() p sudo_cmd=""
  for p in "$@"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  ((${#missing[@]})) || return 0
  echo "ci-matrix: installing ${missing[*]}" >&2
  [ "$(id -u)" -ne 0 ] && sudo_cmd="sudo"
  $sudo_cmd apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq "${missing[@]}" >/dev/null
}
run_stage() {
  local name=$1 start=$SECONDS
  echo "== ci-matrix: $name"
  case $name in
    portable)
      cmake -S . -B build-ci-portable -DCMAKE_BUILD_TYPE=Release -DPASA_ARCH=x86-64-v3 -DPASA_WERROR=ON >/dev/null
      cmake --build build-ci-portable -j"$jobs"
      ctest --test-dir build-ci-portable -LE long --output-on-failure -j"$jobs"
      same_hashes build-ci-portable full
      ;;
    baseline)
      cmake -S . -B build-ci-baseline -DCMAKE_BUILD_TYPE=Release -DPASA_ARCH=x86-64-v2 -DPASA_WERROR=ON \
        -DPASA_PYTHON=OFF >/dev/null
      cmake --build build-ci-baseline -j"$jobs" --target pasa-attn pasa-sweep
      same_hashes build-ci-baseline quick
      ;;
    sanitize)
      need_packages clang-14 libclang-rt-14-dev
      # Python (an uninstrumented interpreter) and the doc and argv tests (hundreds of program starts, each
      # paying ASan's start-up) stay with the other builds.
      CC=clang-14 CXX=clang++-14 cmake -S . -B build-ci-sanitize -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-g -O1" \
        -DPASA_SANITIZE=ON -DPASA_WERROR=ON -DPASA_PYTHON=OFF >/dev/null
      cmake --build build-ci-sanitize -j"$jobs"
      ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        ctest --test-dir build-ci-sanitize -LE "long|python" -E "^(doc_commands|cli_argv_property)$" \
        --output-on-failure -j"$jobs"
      ;;
    *) echo "ci-matrix: unknown stage $name (portable, baseline, sanitize)" >&2; exit 2 ;;
  esac
  echo "== ci-matrix: $name passed in $((SECONDS - start)) s"
}
for s in "${stages[@]}"; do run_stage "$s"; done
echo "ci-matrix: ${#stages[@]} stage(s) passed in $SECONDS s"
