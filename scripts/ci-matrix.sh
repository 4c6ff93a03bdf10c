#!/usr/bin/env bash
# The build matrix that CI (.ci/run) runs after the README's test command (./scripts/test.sh, which leaves
# the native Release build in ./build). It proves what the README claims of every CPU and compiler:
#   1. portable: -march=x86-64-v3 (AVX2, FMA, F16C, no AVX-512), so every AVX-512 fast path's portable twin is
#      compiled and run; -Wshadow -Werror on the library; the default tests; and output hashes (every preset x
#      algorithm on three shapes, the four paper sweeps' first rows: scripts/output_hashes.py) equal to the
#      native build's, bit for bit.
#   2. baseline x86-64 (-march=x86-64-v2: no FMA, no F16C either): builds warning-free; the attention hashes equal.
#   3. sanitize: clang 14 (the clang build of the matrix) with AddressSanitizer + UndefinedBehaviorSanitizer
#      (Debug, -O1, -Werror): the fast tests.
#   4. aarch64 (not in the default set: about an hour): Debian's cross compiler, the numeric, exact and
#      attention tests and the attention hashes under qemu-user, equal to the native build's.
# Each stage prints its wall time (figures: docs/building-and-testing.md).
# Usage: scripts/ci-matrix.sh [STAGE ...]   (stages: portable baseline sanitize aarch64; default: the first three)
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
# Compares a build's hashes with the native build's; fails naming the first differing runs. A third
# argument is a command prefix for the build's programs (an emulator).
same_hashes() {
  local build=$1 kind=$2 runner=${3:-} native
  native=$(native_hashes "$kind")
  "$py" scripts/output_hashes.py "$build" $([[ $kind == quick ]] && echo --quick) --runner "$runner" \
    >"$hashes_dir/$build.txt"
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
  DEBIAN_FRONTEND=noninteractive $sudo_cmd apt-get install -y -qq --no-remove "${missing[@]}" >/dev/null
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
      # clang-14 (the clang build of the matrix), installed where it is missing. A machine that can neither
      # find nor install it skips the stage, loudly: GCC 12's AVX-512 headers trip -Werror=uninitialized at -O1
      # (a false positive in avx512fintrin.h), so GCC is no drop-in replacement here.
      local cc=clang-14 cxx=clang++-14
      if ! need_packages clang-14 libclang-rt-14-dev; then
        echo "ci-matrix: SKIPPED sanitize: clang-14 is neither installed nor installable here" >&2
        return 0
      fi
      CC=$cc CXX=$cxx cmake -S . -B build-ci-sanitize -DCMAKE_BUILD_TYPE=Debug "-DCMAKE_CXX_FLAGS_DEBUG=-g -O1" \
        -DPASA_SANITIZE=ON -DPASA_WERROR=ON -DPASA_PYTHON=OFF >/dev/null
      cmake --build build-ci-sanitize -j"$jobs"
      # Left to the other builds, each for a reason of the sanitizers' own, not of the code:
      #  - python: an uninstrumented interpreter cannot load an ASan module (not built here);
      #  - doc_commands, cli_argv_property: hundreds of program starts, each paying ASan's start-up (minutes);
      #  - memory_estimates: compares estimates with the peak RSS, which ASan's shadow memory, redzones and
      #    quarantine inflate by design;
      #  - packaging_install_consumer: installs the instrumented archives and links an uninstrumented program
      #    against them (the ASan runtime is then missing; the install itself is checked by the other builds).
      # cli_hardening runs, its ulimit -v check replaced by ASan's allocation limit (tests/cli/run_cli_checks.sh).
      ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=halt_on_error=1:print_stacktrace=1 \
        ctest --test-dir build-ci-sanitize -LE "long|python" \
        -E "^(doc_commands|cli_argv_property|memory_estimates|packaging_install_consumer)$" \
        --output-on-failure -j"$jobs"
      ;;
    aarch64)
      # The target's libraries through dpkg multiarch (the header-only ones are the host's).
      if ! dpkg --print-foreign-architectures | grep -qx arm64; then
        [ "$(id -u)" -eq 0 ] || { echo "ci-matrix: aarch64 needs root for dpkg --add-architecture arm64" >&2; exit 2; }
        dpkg --add-architecture arm64
      fi
      need_packages g++-aarch64-linux-gnu qemu-user libmpfr-dev:arm64 libgmp-dev:arm64 libfmt-dev:arm64
      # Linked statically: Debian 12's qemu-user (7.2) hangs at the first std::thread of a dynamically linked
      # aarch64 program (a two-line std::thread program does too); static ones run.
      cmake -S . -B build-ci-aarch64 --toolchain cmake/toolchain-aarch64-linux-gnu.cmake -DCMAKE_BUILD_TYPE=Release \
        -DPASA_WERROR=ON -DPASA_STATIC=ON >/dev/null
      cmake --build build-ci-aarch64 -j"$jobs" --target pasa-tests pasa-attn
      # The tests of the numeric, exact and attention layers (CTest runs pasa-tests through qemu-aarch64).
      local names
      names=$(cd tests && ls numeric/test_*.cpp exact/test_*.cpp attention/test_*.cpp | xargs -n1 basename |
              sed 's/\.cpp$//' | paste -sd'|')
      ctest --test-dir build-ci-aarch64 -LE long -R "^($names)$" --output-on-failure -j"$jobs"
      same_hashes build-ci-aarch64 quick "qemu-aarch64 -L /usr/aarch64-linux-gnu"
      ;;
    *) echo "ci-matrix: unknown stage $name (portable, baseline, sanitize, aarch64)" >&2; exit 2 ;;
  esac
  echo "== ci-matrix: $name passed in $((SECONDS - start)) s"
}
for s in "${stages[@]}"; do run_stage "$s"; done
echo "ci-matrix: ${#stages[@]} stage(s) passed in $SECONDS s"
