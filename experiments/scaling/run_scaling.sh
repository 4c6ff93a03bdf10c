#!/usr/bin/env bash
# The scaling table of issue 27 (docs/speed.md, "Parallel scaling"): wall time, speed-up and parallel
# efficiency (speed-up / threads) at 1, 2, 4, 8, 16 threads of
#   - the blocked engines at (1, 64, 2048, 128) (pasa-bench-attention --threads LIST: FA-FP32, FA-FP16/FP32,
#     PASA-FP16 (and _strict), the H100 tensor-core and every-op models; each also as a ratio to OpenBLAS
#     sgemm at the same thread count, timed in the same run),
#   - the golden at the same shape (pasa-attn, which also times FA-FP32 once more),
#   - a decode step and its golden (pasa-bench-decode: B 8, Nq 32, Nkv 8, Skv 32768, D 128),
#   - the machine's ceiling: K = 1, 2, ... 16 one-thread copies of the attention benchmark at once (rows
#     "ceiling"; see that part below): the efficiency no threading of ours can exceed on this host.
# The machine should be otherwise idle; the figures are only compared within one run. Besides wall time each
# row has the run's CPU seconds (all threads) and busy = CPU / wall, the cores kept busy on average: at T
# threads, T − busy cores waited (a serial part, an unbalanced end of a loop) — what docs/speed.md reads as
# the serial time. machine.txt records the CPU topology (lscpu: threads per core), since 16 logical CPUs
# that are 8 cores with two hyperthreads each cannot scale 16x.
#
# Usage:
#   experiments/scaling/run_scaling.sh --pack BUILD_DIR KIT_DIR   copy the three programs and the shared
#       libraries they load (but the C library) into KIT_DIR (e.g. build-scaling: ignored by git, so it can be
#       carried to another machine with the working tree)
#   experiments/scaling/run_scaling.sh DIR                         run from DIR (a build folder or a kit);
#       writes $OUT/scaling.csv (OUT defaults to ./scaling-out) and the programs' logs next to it
# Environment: THREADS (default "1 2 4 8 16"), REPS (attention bench repetitions, default 1),
#              SHAPE (default "64 2048 128": heads, sequence, head dimension), PARTS (default
#              "attention golden decode ceiling": which parts to run, e.g. to split the run in two calls),
#              CEILING_REPS (repetitions of each ceiling copy, default 3), WARMUP (default 1: first write
#              and free WARMUP_GIB, default 16, GiB of memory, kit.sh's warm_memory; 0: none).
# About 9 minutes on a 16-core host (the golden at 1 thread is 40 s, the every-op models 10-20 s each, the
# tensor-core rows 15-30 s each, timed alternately with their ordered twins, the ceiling 2 minutes);
# THREADS="1 16" REPS=2 PARTS="attention golden decode": 3 minutes.
set -euo pipefail
source "$(dirname "$0")/kit.sh"

if [[ ${1:-} == --pack ]]; then
  (($# == 3)) || { echo "usage: $0 --pack BUILD_DIR KIT_DIR" >&2; exit 2; }
  build=$2 kit=$3
  pack_programs "$build" "$kit" pasa-attn pasa-bench-attention pasa-bench-decode
  # The clock probe of the ceiling part (x86-64 only: AVX-512 intrinsics).
  if [[ $(uname -m) == x86_64 ]]; then cc -O2 -o "$kit/clock_probe" "$(dirname "$0")/clock_probe.c"; fi
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
echo "program,item,threads,seconds,speedup,efficiency,ratio_to_baseline,ratio_to_ordered,cpu_seconds,busy" >"$csv.tmp"
{
  machine_info
  echo "transparent huge pages: $(cat /sys/kernel/mm/transparent_hugepage/enabled 2>/dev/null)"
} | tee "$out/machine.txt"

# Rows "program,item,threads,seconds,ratio,ratio_to_ordered,cpu" (the last three may be empty) on stdin;
# appends speed-up and efficiency over the first thread count of each (program, item), and busy = cpu / wall.
add_rows() {
  awk -F, -v OFS=, '{
    key = $1 "," $2
    if (!(key in t0)) { t0[key] = $4; n0[key] = $3 }
    s = t0[key] / $4
    busy = $7 != "" ? sprintf("%.2f", $7 / $4) : ""
    printf "%s,\"%s\",%s,%s,%.3f,%.3f,%s,%s,%s,%s\n", $1, $2, $3, $4, s, s * n0[key] / $3, $5, $6, $7, busy
  }' >>"$csv.tmp"
}

parts=" ${PARTS:-attention golden decode ceiling} "
warm_memory "${WARMUP_GIB:-16}" | tee -a "$out/machine.txt"
# The host's "cpu" line of /proc/stat before and after each part (user nice system idle iowait irq softirq
# steal ..., in ticks of 1/100 s): steal is the time the hypervisor ran something else on our vCPUs, which a
# thread's CPU time counts as its own (so it inflates CPU seconds without any code of ours running).
procstat() { echo "$1 $(head -1 /proc/stat)" >>"$out/procstat.txt"; }
: >"$out/procstat.txt"
if [[ $parts == *" attention "* ]]; then
procstat "attention-start"
echo "== blocked engines: pasa-bench-attention --threads $list"
"$dir/pasa-bench-attention" --heads "$heads" --seq "$seq" --dim "$dim" --reps "$reps" --threads "$list" | tee "$out/bench-attention.log"
# Lines "threads T: OpenBLAS sgemm baseline X s, R GFLOP/s (CPU C s; ...)" then
# "  LABEL   X s  R GFLOP/s  Q of BLAS[, W of the ordered model ...]  [CPU C s, ...]".
awk '/^threads [0-9]+: OpenBLAS sgemm baseline/ {
       t = $2; sub(":", "", t); c = $0; sub(/.*\(CPU /, "", c); sub(/ s.*/, "", c)
       printf "sgemm,OpenBLAS sgemm,%s,%s,,,%s\n", t, $6, c }
     /^threads [0-9]+: no OpenBLAS/ { t = $2; sub(":", "", t) }
     t != "" && /^  .* s +[0-9.]+ GFLOP\/s/ {
       line = $0; sub(/^  /, "", line)
       match(line, / +[0-9.]+ s +[0-9.]+ GFLOP\/s/)
       label = substr(line, 1, RSTART - 1); rest = substr(line, RSTART)
       split(rest, f, " "); ratio = ""; twin = ""; cpu = ""
       if (match(rest, /[0-9.]+ of BLAS/)) { ratio = substr(rest, RSTART, RLENGTH); sub(/ of BLAS/, "", ratio) }
       if (match(rest, /[0-9.]+ of the ordered model/)) { twin = substr(rest, RSTART, RLENGTH); sub(/ of the.*/, "", twin) }
       if (match(rest, /\[CPU [0-9.]+ s/)) { cpu = substr(rest, RSTART + 5, RLENGTH - 7) }
       gsub(/,/, ";", label)
       printf "attention,%s,%s,%s,%s,%s,%s\n", label, t, f[1], ratio, twin, cpu
     }' "$out/bench-attention.log" | add_rows
fi

if [[ $parts == *" golden "* ]]; then
procstat "golden-start"
echo "== golden at (1, $heads, $seq, $dim): pasa-attn --threads T"
for t in "${threads[@]}"; do
  # bash's time keyword: the process's wall and CPU seconds (generation, FA-FP32 and the golden; the
  # golden is 95 % of it), for the golden's busy cores.
  { TIMEFORMAT="%R %U %S"; time "$dir/pasa-attn" --algorithm fa2 --alloc fa_fp32 --s1 128 --s2 128 --batch 1 --heads "$heads" \
      --seq "$seq" --dim "$dim" --threads "$t" >"$out/pasa-attn-$t.log"; } 2>"$out/pasa-attn-$t.time"
  head -3 "$out/pasa-attn-$t.log" >&2
  read -r real user sys <"$out/pasa-attn-$t.time"
  awk -v t="$t" -v real="$real" -v cpu="$(awk -v u="$user" -v s="$sys" 'BEGIN { print u + s }')" '
                 /^algorithm/ { for (i = 1; i <= NF; ++i) if ($i == "s" || $i == "s,") a = $(i - 1) }
                 /^golden/ { for (i = 1; i <= NF; ++i) if ($i == "s" || $i == "s,") g = $(i - 1) }
                 END { printf "pasa-attn,FA-FP32 (pasa-attn),%s,%s,,,\n", t, a
                       printf "pasa-attn,golden,%s,%s,,,\n", t, g
                       printf "pasa-attn,whole process (pasa-attn),%s,%s,,,%s\n", t, real, cpu }' "$out/pasa-attn-$t.log"
done | sort -t, -k2,2 -s | add_rows
fi

if [[ $parts == *" decode "* ]]; then
procstat "decode-start"
echo "== decode step and its golden: pasa-bench-decode --threads T"
for t in "${threads[@]}"; do
  "$dir/pasa-bench-decode" --threads "$t" >"$out/bench-decode-$t.log"
  grep -E '^(emulated kernel|golden):' "$out/bench-decode-$t.log" >&2
  # (the kernel's ratio_to_baseline: its wall time over one read of the cache at the same thread count)
  awk -v t="$t" '/^baseline: reading the cache once/ { r = $6 }
                 /^emulated kernel:/ { printf "decode,FA-FP16/FP32 decode step,%s,%s,%s,,%s\n", t, $3, (r > 0 ? sprintf("%.2f", $3 / r) : ""), $6 }
                 /^golden:/ { printf "decode,golden of the decode step,%s,%s,,,%s\n", t, $2, $5 }' "$out/bench-decode-$t.log"
done | sort -t, -k2,2 -s | add_rows
fi

if [[ $parts == *" ceiling "* ]]; then
procstat "ceiling-start"
# The machine's own ceiling: K copies of the one-thread attention benchmark started at once, each on 1/16 of
# the heads (the same work per copy whatever K). Independent processes share no data, lock or allocator:
# what slows each copy down at K > 1 is the machine (clock under all-core load, shared cache and memory,
# a hypervisor's vCPU placement). efficiency = t(1 copy) / t(K copies), per kernel; the engines'
# in-process efficiency at T threads is read against this one at K = T. The lone copy runs first and
# again last (the faster counts), since a shared host drifts.
ceil_heads=$(( heads >= 16 ? heads / 16 : 1 ))
echo "== ceiling: K copies of pasa-bench-attention --threads 1 --heads $ceil_heads at once"
rounds=("${threads[@]}" 1)  # round r in $out/ceiling-r; the last repeats K = 1
for r in "${!rounds[@]}"; do
  k=${rounds[r]} d=$out/ceiling-$r
  rm -rf "$d" && mkdir -p "$d"
  for ((i = 1; i <= k; ++i)); do
    "$dir/pasa-bench-attention" --heads "$ceil_heads" --seq "$seq" --dim "$dim" --reps "${CEILING_REPS:-3}" --threads 1 \
      >"$d/$i.log" 2>&1 &
  done
  wait
  if [[ -x $dir/clock_probe ]]; then  # the same for loops that never leave the core (clock_probe.c)
    for ((i = 1; i <= k; ++i)); do "$dir/clock_probe" >"$d/probe-$i.txt" & done
    wait
  fi
done
for r in "${!rounds[@]}"; do
  # Per kernel: the mean over the copies of each copy's time (the sgemm baseline as "OpenBLAS sgemm").
  k=${rounds[r]} d=$out/ceiling-$r
  cat "$d"/*.log | awk -v k="$k" '
    /^threads 1: OpenBLAS sgemm baseline/ { s["OpenBLAS sgemm"] += $6; n["OpenBLAS sgemm"]++ }
    /^  .* s +[0-9.]+ GFLOP\/s/ {
      line = $0; sub(/^  /, "", line); match(line, / +[0-9.]+ s +[0-9.]+ GFLOP\/s/)
      label = substr(line, 1, RSTART - 1); split(substr(line, RSTART), f, " "); gsub(/,/, ";", label)
      s[label] += f[1]; n[label]++ }
    END { for (l in s) printf "%s,%s,%.4f\n", l, k, s[l] / n[l] }'
  if [[ -x $dir/clock_probe ]]; then
    cat "$d"/probe-*.txt | awk -v k="$k" '
      { for (i = 1; i < NF; i += 2) { s[$i] += $(i + 1); n[$i]++ } }
      END { for (l in s) printf "clock probe %s,%s,%.4f\n", l, k, s[l] / n[l] }'
  fi
done | awk -F, -v OFS=, '
  # K = 1 twice (first and last round): the faster counts, as the one row of K = 1.
  $2 == 1 { if (!($1 in t1) || $3 < t1[$1]) t1[$1] = $3; next }
  { rows[++n] = $0 }
  END { for (l in t1) rows[++n] = l "," 1 "," t1[l]
        for (i = 1; i <= n; ++i) { split(rows[i], f, ","); e = t1[f[1]] / f[3]
          printf "ceiling,\"%s\",%s,%s,%.3f,%.3f,,,,\n", f[1], f[2], f[3], e * f[2], e } }' |
  sort -t, -k2,2 -k3,3n >>"$csv.tmp"
fi
procstat "end"
# Steal per part (ticks to seconds), from consecutive procstat lines.
awk '{ t = 0; for (i = 3; i <= 10; ++i) t += $i
       if (NR > 1) printf "%s: steal %.2f s of %.2f s of vCPU time\n", prev, ($10 - s0) / 100, (t - t0) / 100
       prev = $1; s0 = $10; t0 = t }' "$out/procstat.txt" | tee "$out/steal.txt"

mv "$csv.tmp" "$csv"
echo "== $csv"
column -s, -t <"$csv" 2>/dev/null || cat "$csv"
