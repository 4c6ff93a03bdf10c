#!/usr/bin/env bash
# Style and lint checks (clang-format-14, clang-tidy-14; Debian: apt-get install clang-format-14 clang-tidy-14).
#   scripts/check.sh                 clang-format on the lines this branch changed (against main's merge base,
#                                    uncommitted changes included): prints the reformatting they need
#   scripts/check.sh --all           clang-format --dry-run on every C++ file of the repository
#   scripts/check.sh --tidy FILE...  clang-tidy (.clang-tidy's checks) on the given .cpp files, with the
#                                    compile commands of BUILD_DIR (default ./build; configured here if needed)
# Exits 1 when a check reports something, 0 when all is clean. Nothing is modified.
set -euo pipefail
cd "$(dirname "$0")/.."
fmt=clang-format-14 tidy=clang-tidy-14 build=${BUILD_DIR:-build}
need() { command -v "$1" >/dev/null || { echo "check: $1 not found (apt-get install ${1%-14}-14)" >&2; exit 2; }; }
cxx_files() { git ls-files '*.cpp' '*.hpp' '*.h'; }

case ${1:-} in
  "")
    need "$fmt"
    base=$(git merge-base HEAD main 2>/dev/null || git rev-parse HEAD)
    out=$(git diff -U0 --no-color "$base" -- '*.cpp' '*.hpp' '*.h' | clang-format-diff-14 -p1 -binary "$fmt" || true)
    if [[ -n $out ]]; then
      echo "$out"
      echo "check: the changed lines above need formatting (apply: git diff -U0 $base | clang-format-diff-14 -p1 -i)" >&2
      exit 1
    fi
    echo "check: changed lines formatted (against $base)"
    ;;
  --all)
    need "$fmt"
    mapfile -t files < <(cxx_files)
    n=0
    for f in "${files[@]}"; do
      "$fmt" --dry-run "$f" 2>/dev/null | grep -q . && { echo "needs formatting: $f"; n=$((n + 1)); }
    done
    ((n == 0)) || { echo "check: $n of ${#files[@]} files need formatting (clang-format-14 -i FILE)" >&2; exit 1; }
    echo "check: all ${#files[@]} files formatted"
    ;;
  --tidy)
    shift
    (($#)) || { echo "usage: scripts/check.sh --tidy FILE.cpp..." >&2; exit 2; }
    need "$tidy"
    if [[ ! -f $build/compile_commands.json ]]; then
      cmake -S . -B "$build" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON >/dev/null
    fi
    log=$(mktemp "${TMPDIR:-/tmp}/pasa-tidy.XXXXXX")
    trap 'rm -f "$log"' EXIT
    "$tidy" -p "$build" --quiet "$@" >"$log" 2>/dev/null || true
    if grep -qE ': (warning|error):' "$log"; then
      cat "$log"
      echo "check: clang-tidy reported $(grep -cE ': (warning|error):' "$log") finding(s)" >&2
      exit 1
    fi
    echo "check: clang-tidy clean on $# file(s)"
    ;;
  *) echo "usage: scripts/check.sh [--all | --tidy FILE...]" >&2; exit 2 ;;
esac
