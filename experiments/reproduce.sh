#!/usr/bin/env bash
# Regenerates the PASA paper's Tables 1, 3, 4 and Figs. 9/10 into results/ and reports the time taken.
# Usage: experiments/reproduce.sh [--full] [THREADS]   (default: all cores). Finished sweeps in results/ are
# kept (pasa-tables and pasa-sweep --resume); delete results/sweeps to recompute everything.
#   default  Tables 1, 3, 4 (Table 4 over 50 seeds, golden-free), Figs. 9/10 (3 seeds) with the paired
#            ratios fig*_paired.csv: 184 CPU-s, about 95 s on 2 idle cores (the goal: <= 120 s)
#   --full   also the 10-seed sweeps behind the README's comparisons (configs/pasa_allocations.json,
#            pasa_allocations_hybrid.json, zero_mean_v.json -> results/<name>/, paired ratios in their
#            summary.json), error_model.csv (docs/error-model.md) and ranges.csv / ranges.png (K, K', S,
#            S' per head), the cloud maps (results/clouds/), and docs/fp8.md's 10-seed FP8 sweeps
#            (configs/fp8_fa3_{seeds_uniform,seeds_hybrid,paired_hybrid,paired_uniform,benchmark}.json ->
#            results/fp8_fa3/<name without fp8_fa3_>/) with their tables: about 760 CPU-s, 6.5 min on 2
#            idle cores (docs/reproducing-the-paper.md, "Time", gives each part's measured CPU time)
set -euo pipefail
cd "$(dirname "$0")/.."
full=0
if [ "${1:-}" = "--full" ]; then full=1; shift; fi
threads="${1:-$(nproc)}"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
targets=(pasa-tables pasa-sweep)
[ "$full" = 1 ] && targets+=(pasa_python)  # the Python scripts of --full
cmake --build build -j"$(nproc)" --target "${targets[@]}"
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
extra=()
if [ "$full" = 1 ]; then
  for n in pasa_allocations pasa_allocations_hybrid zero_mean_v; do
    resume=()
    [ -f "results/$n/config.json" ] && resume=(--resume)
    ./build/pasa-sweep "configs/$n.json" --out "results/$n" --threads "$threads" "${resume[@]}" >/dev/null
    extra+=(--error-model-sweep "results/$n")
  done
  extra+=(--error-model-heads 4 --error-model-seeds 3 --range-heads 4)
  for n in fp8_fa3_benchmark fp8_fa3_seeds_uniform fp8_fa3_seeds_hybrid fp8_fa3_paired_hybrid fp8_fa3_paired_uniform; do
    out="results/fp8_fa3/${n#fp8_fa3_}"
    resume=()
    [ -f "$out/config.json" ] && resume=(--resume)
    ./build/pasa-sweep "configs/$n.json" --out "$out" --threads "$threads" "${resume[@]}" >/dev/null
  done
  ./build/pasa-python experiments/python/fa3_benchmark.py results/fp8_fa3/benchmark >/dev/null
  /usr/bin/env python3 experiments/python/fp8_seeds_table.py results/fp8_fa3/seeds_uniform results/fp8_fa3/seeds_hybrid >/dev/null
  ./build/pasa-python experiments/python/cloud_maps.py results/clouds >/dev/null
fi
./build/pasa-tables --out results --threads "$threads" "${extra[@]}"
experiments/plot_figs.sh results
[ "$full" = 1 ] && gnuplot -e "dir='results'" experiments/plot_ranges.gp && echo "wrote results/ranges.png"
wall=$(awk -v a="$start" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }')
children_cpu
cpu=$(awk -v a="$cpu0" -v b="$child_cpu" 'BEGIN { printf "%.1f", b - a }')  # pasa-tables and gnuplot
printf "reproduction took %.0f s on %s threads (%s cores; %.0f CPU-s; load %s)\n" "$wall" "$threads" "$(nproc)" "$cpu" \
  "$(cut -d' ' -f1-3 /proc/loadavg)"
# The goal, from scratch (no finished sweep kept), without --full: at most 120 s on the 2-core machine.
[ "$full" = 1 ] || printf "goal <= 120 s: %s\n" "$(awk -v w="$wall" 'BEGIN { print (w <= 120 ? "met" : "NOT met") }')"
