#!/usr/bin/env bash
# The scaling table of issue 27 (docs/speed.md, "Parallel scaling"): wall time, speed-up and parallel
# efficiency (speed-up / threads) at 1, 2, 4, 8, 16 threads of
#   - the blocked engines at (1, 64, 2048, 128) (pasa-bench-attention --threads LIST: FA-FP32, FA-FP16/FP32,
#     PASA-FP16 (and _strict), the H100 tensor-core and every-op models; each also as a ratio to OpenBLAS
#     sgemm at the same thread count, timed in the same run),
#   - the golden at the same shape (pasa-attn, which also times FA-FP32 once more),
#   - a decode step and its golden (pasa-bench-decode: B 8, Nq 32, Nkv 8, Skv 32768, D 128).
# The machine should be otherwise idle; the figures are only compared within one run.
#
# Usage:
#   experiments/scaling/run_scaling.sh --pack BUILD_DIR KIT_DIR   copy the three programs and the shared
#       libraries they load (but the C library) into KIT_DIR (e.g. build-scaling: ignored by git, so it can be
#       carried to another machine with the working tree)
#   experiments/scaling/run_scaling.sh DIR                         run from DIR (a build folder or a kit);
#       writes $OUT/scaling.csv (OUT defaults to ./scaling-out) and the programs' logs next to it
# Environment: THREADS (default "1 2 4 8 16"), REPS (attention bench repetitions, default 1),
#              SHAPE (default "64 2048 128": heads, sequence, head dimension), PARTS (default
#              "attention golden decode": which of the three to run, e.g. to split the run in two calls).
# About 6 minutes on a 16-core host (the golden at 1 thread is 40 s, the every-op models 10-20 s each).
set -euo pipefail

if [[ ${1:-} == --pack ]]; then
  (($# == 3)) || { echo "usage: $0 --pack BUILD_DIR KIT_DIR" >&2; exit 2; }
  build=$2 kit=$3
  mkdir -p "$kit/lib"
  for p in pasa-attn pasa-bench-attention pasa-bench-decode; do
    [[ -x $build/$p ]] || { echo "$build/$p: not built (cmake --build $build --target $p)" >&2; exit 1; }
    cp "$build/$p" "$kit/"
    ldd "$build/$p" | awk '/=> \// { print $3 }' | while read -r lib; do
      case $(basename "$lib") in libc.so.* | libm.so.* | ld-linux*) continue ;; esac
      cp -L "$lib" "$kit/lib/"
    done
  done
  du -sh "$kit"
  exit 0
fi

(($# == 1)) || { echo "usage: $0 DIR   |   $0 --pack BUILD_DIR KIT_DIR" >&2; exit 2; }
dir=$(cd "$1" && pwd)
[[ -d $dir/lib ]] && export LD_LIBRARY_PATH=$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
out=${OUT:-scaling-out}
mkdir -p "$out"
threads=(${THREADS:-1 2 4 8 16})
read -r heads seq dim <<<"${SHAPE:-64 2048 128}"
reps=${REPS:-1}
list=$(IFS=,; echo "${threads[*]}")
csv=$out/scaling.csv
echo "program,item,threads,seconds,speedup,efficiency,ratio_to_baseline" >"$csv.tmp"
echo "host $(uname -n), $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2-), load $(cut -d' ' -f1 /proc/loadavg)" | tee "$out/machine.txt"

# Rows "program,item,threads,seconds,ratio" (ratio may be empty) on stdin; appends speed-up and efficiency
# over the first thread count of each (program, item).
add_rows() {
  awk -F, -v OFS=, '{
    key = $1 "," $2
    if (!(key in t0)) { t0[key] = $4; n0[key] = $3 }
    s = t0[key] / $4
    printf "%s,\"%s\",%s,%s,%.3f,%.3f,%s\n", $1, $2, $3, $4, s, s * n0[key] / $3, $5
  }' >>"$csv.tmp"
}

parts=" ${PARTS:-attention golden decode} "
if [[ $parts == *" attention "* ]]; then
echo "== blocked engines: pasa-bench-attention --threads $list"
"$dir/pasa-bench-attention" --heads "$heads" --seq "$seq" --dim "$dim" --reps "$reps" --threads "$list" | tee "$out/bench-attention.log"
# Lines "threads T: OpenBLAS sgemm baseline X s, ..." then "  LABEL   X s  R GFLOP/s  Q of BLAS ...".
awk '/^threads [0-9]+: OpenBLAS sgemm baseline/ { t = $2; sub(":", "", t); printf "sgemm,OpenBLAS sgemm,%s,%s,\n", t, $6 }
     /^threads [0-9]+: no OpenBLAS/ { t = $2; sub(":", "", t) }
     t != "" && /^  .* s +[0-9.]+ GFLOP\/s/ {
       line = $0; sub(/^  /, "", line)
       match(line, / +[0-9.]+ s +[0-9.]+ GFLOP\/s/)
       label = substr(line, 1, RSTART - 1); rest = substr(line, RSTART)
       split(rest, f, " "); ratio = ""
       if (match(rest, /[0-9.]+ of BLAS/)) { ratio = substr(rest, RSTART, RLENGTH); sub(/ of BLAS/, "", ratio) }
       gsub(/,/, ";", label)
       printf "attention,%s,%s,%s,%s\n", label, t, f[1], ratio
     }' "$out/bench-attention.log" | add_rows
fi

if [[ $parts == *" golden "* ]]; then
echo "== golden at (1, $heads, $seq, $dim): pasa-attn --threads T"
for t in "${threads[@]}"; do
  "$dir/pasa-attn" --algorithm fa2 --alloc fa_fp32 --s1 128 --s2 128 --batch 1 --heads "$heads" --seq "$seq" --dim "$dim" \
    --threads "$t" >"$out/pasa-attn-$t.log"
  head -3 "$out/pasa-attn-$t.log" >&2
  awk -v t="$t" '/^algorithm/ { for (i = 1; i <= NF; ++i) if ($i == "s" || $i == "s,") a = $(i - 1) }
                 /^golden/ { for (i = 1; i <= NF; ++i) if ($i == "s" || $i == "s,") g = $(i - 1) }
                 END { printf "pasa-attn,FA-FP32 (pasa-attn),%s,%s,\n", t, a
                       printf "pasa-attn,golden,%s,%s,\n", t, g }' "$out/pasa-attn-$t.log"
done | sort -t, -k2,2 -s | add_rows
fi

if [[ $parts == *" decode "* ]]; then
echo "== decode step and its golden: pasa-bench-decode --threads T"
for t in "${threads[@]}"; do
  "$dir/pasa-bench-decode" --threads "$t" >"$out/bench-decode-$t.log"
  grep -E '^(emulated kernel|golden):' "$out/bench-decode-$t.log" >&2
  awk -v t="$t" '/^emulated kernel:/ { printf "decode,FA-FP16/FP32 decode step,%s,%s,\n", t, $3 }
                 /^golden:/ { printf "decode,golden of the decode step,%s,%s,\n", t, $2 }' "$out/bench-decode-$t.log"
done | sort -t, -k2,2 -s | add_rows
fi

mv "$csv.tmp" "$csv"
echo "== $csv"
column -s, -t <"$csv" 2>/dev/null || cat "$csv"
