#!/bin/bash
# experiments/gpu/long_context_threads.sh: pasa-bench-long at 1 and 16 threads on the GPU machine's 16 cores
# (builds pasa there first: experiments/gpu/device_build.sh, carry ["build-debs"]), for the golden's parallel
# efficiency against the emulated kernel's, t(1) / (16 t(16)), at long context. Log in $OUT/long_threads.txt.
cd "$(dirname "$0")/../.."
OUT=${OUT:-long_threads_out}; mkdir -p "$OUT"; L="$OUT/long_threads.txt"
PASA_JOBS=16 . experiments/gpu/device_build.sh pasa-bench-long >> "$L" 2>&1 || exit 1
nproc >> "$L"
for t in 16 1 16; do build/pasa-bench-long --threads $t --lengths 8192,16384 --modes prefill >> "$L" 2>&1; done
for t in 16 1 16; do build/pasa-bench-long --threads $t --lengths 32768 --modes decode >> "$L" 2>&1; done
