#!/usr/bin/env bash
# Runs every command shown in the documentation and fails, naming the file, line and command, if one
# exits non-zero.
#
# Usage: run_doc_commands.sh [--long] [--list] SOURCE_DIR BUILD_DIR [FILE.md ...]
#   (default files: SOURCE_DIR/README.md and SOURCE_DIR/docs/*.md)
#
# What runs: every fenced block whose info string is sh, bash or shell. A comment line right before the
# fence sets options for that block:
#   <!-- doc-test: long -->          run only with --long (CTest test doc_commands_long, label "long")
#   <!-- doc-test: long repo-root --> ... from the repository root instead of a temporary folder (for the
#                                    scripts that build into ./build themselves)
#   <!-- doc-test: needs=TOOL -->     skip the block, saying so, when TOOL is not on PATH
#   <!-- doc-test: file=NAME -->      (before any fenced block, e.g. json) write the block to NAME for the
#                                    blocks that follow on the same page
# Blocks of one page run in order in one temporary folder holding `build` (a link to BUILD_DIR) and links
# to the repository's configs/, experiments/, scripts/ and results/; BUILD_DIR is first on PATH. Each
# command (a line, with its continuation lines and here-documents) is checked on its own, so a failure
# inside `a && b` or a pipeline (pipefail) is caught too.
set -uo pipefail

long=0
list=0
while [[ ${1:-} == --* ]]; do
  case $1 in
    --long) long=1 ;;
    --list) list=1 ;;  # print the blocks that would run (FILE:LINE, where, first command) without running them
    *) echo "unknown option $1" >&2; exit 2 ;;
  esac
  shift
done
if (($# < 2)); then
  echo "usage: $0 [--long] [--list] SOURCE_DIR BUILD_DIR [FILE.md ...]" >&2
  exit 2
fi
src=$(cd "$1" && pwd) || exit 2
build=$(cd "$2" && pwd) || exit 2
shift 2
files=("$@")
if ((${#files[@]} == 0)); then files=("$src/README.md" "$src"/docs/*.md); fi

# A command shown in the docs may run the tests (./scripts/test.sh, ctest -L long), which hold this test:
# a nested run does nothing.
if [[ -n ${PASA_DOC_COMMANDS_ACTIVE:-} ]]; then
  echo "run_doc_commands: nested run (a documented command runs the tests): skipped"
  exit 0
fi
export PASA_DOC_COMMANDS_ACTIVE=1
export PATH="$build:$PATH"

block_timeout=${PASA_DOC_BLOCK_TIMEOUT:-600}
failures=0
ran=0
skipped=0
work_root=$(mktemp -d "${TMPDIR:-/tmp}/pasa-doc-commands.XXXXXX")
trap 'rm -rf "$work_root"' EXIT

# Writes a script that runs the given block lines (the first is markdown line `line0` of `file`) command
# by command, each followed by a check that names FILE:LINE and the command's first line.
make_script() {
  local rel=$1 file=$2 line0=$3 out=$4
  shift 4
  local -a L=("$@")
  local n=${#L[@]} i=0 start delim
  {
    echo 'set -o pipefail'
    while ((i < n)); do
      local line=${L[i]}
      if [[ -z ${line//[[:space:]]/} || $line =~ ^[[:space:]]*# ]]; then ((i++)); continue; fi
      start=$i
      echo '{'
      while :; do
        line=${L[i]}
        echo "$line"
        ((i++))
        if [[ $line =~ $re_heredoc ]]; then
          delim=${BASH_REMATCH[1]}
          while ((i < n)) && [[ ${L[i]} != "$delim" ]]; do echo "${L[i]}"; ((i++)); done
          ((i < n)) && { echo "${L[i]}"; ((i++)); }
          break
        fi
        if [[ $line =~ $re_continued ]] && ((i < n)); then continue; fi
        break
      done
      echo '}'
      printf '__rc=$?; if ((__rc != 0)); then echo "%s:%d: exit status $__rc: $(sed -n %dp %q)" >&2; exit 1; fi\n' \
        "$rel" "$((line0 + start))" "$((line0 + start))" "$file"
    done
  } >"$out"
}

re_heredoc="<<-?[[:space:]]*['\"]?([A-Za-z_][A-Za-z0-9_]*)"
re_continued='(\\|&&|\|\||\|)[[:space:]]*$'
re_marker='^<!--[[:space:]]*doc-test:(.*)-->[[:space:]]*$'
re_fence='^[[:space:]]*(```+|~~~+)[[:space:]]*([A-Za-z0-9_+-]*)'
for f in "${files[@]}"; do
  [[ $f == /* ]] || f="$PWD/$f"
  rel=${f#"$src"/}
  [[ -f $f ]] || { echo "$rel: no such file" >&2; failures=$((failures + 1)); continue; }
  mapfile -t lines <"$f"
  page_dir="$work_root/$(echo "$rel" | tr '/.' '__')"
  mkdir -p "$page_dir"
  ln -s "$build" "$page_dir/build"
  for d in configs experiments scripts results; do [[ -e $src/$d ]] && ln -s "$src/$d" "$page_dir/$d"; done
  opts=""
  i=0
  n=${#lines[@]}
  while ((i < n)); do
    line=${lines[i]}
    if [[ $line =~ $re_marker ]]; then
      opts=${BASH_REMATCH[1]}
      ((i++))
      continue
    fi
    if [[ $line =~ $re_fence ]]; then
      fence=${BASH_REMATCH[1]}
      lang=${BASH_REMATCH[2]}
      fence_line=$((i + 1))
      body=()
      ((i++))
      unclosed=0
      while ((i < n)) && [[ ! ${lines[i]} =~ ^[[:space:]]*${fence}[[:space:]]*$ ]]; do
        # A fence of the same length with an info string inside a block can only be the next block's
        # opening line: this block's closing fence is missing.
        if [[ ${lines[i]} =~ ^[[:space:]]*${fence}[A-Za-z] ]]; then unclosed=1; break; fi
        body+=("${lines[i]}")
        ((i++))
      done
      if ((i >= n || unclosed)); then
        # An unclosed fence swallows the rest of the page: renderers show prose as code and every block
        # after it would silently go untested.
        echo "$rel:$fence_line: the code fence opened here is never closed" >&2
        failures=$((failures + 1))
        break
      fi
      ((i++))
      block_opts=$opts
      opts=""
      is_long=0
      [[ " $block_opts " =~ [[:space:]]long[[:space:]] ]] && is_long=1
      if [[ $block_opts =~ file=([^[:space:]]+) ]]; then
        printf '%s\n' "${body[@]}" >"$page_dir/${BASH_REMATCH[1]}"
        continue
      fi
      [[ $lang == sh || $lang == bash || $lang == shell ]] || continue
      ((is_long == long)) || continue
      if [[ $block_opts =~ needs=([^[:space:]]+) ]] && ! command -v "${BASH_REMATCH[1]}" >/dev/null; then
        echo "$rel:$fence_line: skipped: needs ${BASH_REMATCH[1]}, which is not installed"
        skipped=$((skipped + 1))
        continue
      fi
      cwd=$page_dir
      [[ " $block_opts " =~ [[:space:]]repo-root[[:space:]] ]] && cwd=$src
      script="$work_root/block.sh"
      make_script "$rel" "$f" "$((fence_line + 1))" "$script" "${body[@]}"
      if ((list)); then
        echo "$rel:$fence_line: $([[ $cwd == "$src" ]] && echo repo-root || echo tmp): ${body[0]}"
        continue
      fi
      echo "== $rel:$fence_line"
      ran=$((ran + 1))
      if ! (cd "$cwd" && timeout "$block_timeout" bash "$script"); then
        echo "FAILED: $rel:$fence_line (block above; the failing command is named just before)" >&2
        failures=$((failures + 1))
      fi
      continue
    fi
    [[ -n ${line//[[:space:]]/} ]] && opts=""
    ((i++))
  done
done

echo "run_doc_commands: $ran block(s) run, $skipped skipped, $failures failed"
((failures == 0))
