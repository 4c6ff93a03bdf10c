#!/usr/bin/env bash
# Regenerates the PASA paper's Tables 1, 3, 4 and Figs. 9/10 into results/ and reports the time taken.
# Usage: experiments/reproduce.sh [THREADS]   (default: all cores). Finished sweeps in results/sweeps are
# kept (pasa-tables resumes); delete results/sweeps to recompute everything.
set -euo pipefail
cd "$(dirname "$0")/.."
threads="${1:-$(nproc)}"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target pasa-tables
# CPU seconds (user + system) of this shell's finished children into $child_cpu, from `times`, which must
# run in this shell (in a subshell, $(...) or a pipeline, it reports the subshell's own zero times).
times_file=$(mktemp)
trap 'rm -f "$times_file"' EXIT
children_cpu() {
  times > "$times_file"
  child_cpu=$(tail -1 "$times_file" | awk '{ split($1, u, /[ms]/); split($2, s, /[ms]/); printf "%.1f", u[1] * 60 + u[2] + s[1] * 60 + s[2] }')
}
children_cpu
cpu0=$child_cpu  # the build above
start=$(date +%s.%N)
./build/pasa-tables --out results --threads "$threads"
experiments/plot_figs.sh results
wall=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
children_cpu
cpu=$(awk -v a="$cpu0" -v b="$child_cpu" 'BEGIN { printf "%.1f", b - a }')  # pasa-tables and gnuplot
printf "reproduction took %.0f s on %s threads (%s cores; %.0f CPU-s; load %s)\n" "$wall" "$threads" "$(nproc)" "$cpu" \
  "$(cut -d' ' -f1-3 /proc/loadavg)"
# The goal, from scratch (no finished sweep kept): at most 120 s on the 2-core machine.
printf "goal <= 120 s: %s\n" "$(awk -v w="$wall" 'BEGIN { print (w <= 120 ? "met" : "NOT met") }')"
