#!/usr/bin/env bash
# Regenerates the PASA paper's Tables 1, 3, 4 and Figs. 9/10 into results/ and reports the time taken.
# Usage: experiments/reproduce.sh [THREADS]   (default: all cores). Finished sweeps in results/sweeps are
# kept (pasa-tables resumes); delete results/sweeps to recompute everything.
set -euo pipefail
cd "$(dirname "$0")/.."
threads="${1:-$(nproc)}"
cmake -S . -B build -DCMAKE_BUILD_TYPE=Release >/dev/null
cmake --build build -j"$(nproc)" --target pasa-tables
start=$(date +%s)
./build/pasa-tables --out results --threads "$threads"
experiments/plot_figs.sh results
echo "reproduction took $(( $(date +%s) - start )) s on $threads threads ($(nproc) cores)"
