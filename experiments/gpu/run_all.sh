#!/usr/bin/env bash
# run_all.sh: the whole emulator-against-GPU check on an NVIDIA GPU machine with PyTorch.
#
#   experiments/gpu/run_all.sh WORK PASA_BIN OUT [SEEDS] [PART]
#
#   WORK      scratch folder for the inputs, the GPU outputs and the conversion files (~3 GB + 24 GiB)
#   PASA_BIN  folder holding pasa-hwcompare (a -DPASA_STATIC=ON -DPASA_ARCH=x86-64-v3 build runs
#             without Debian dev packages on any x86 server since 2015)
#   OUT       folder for what comes back (small): hw_attention.csv, hw_conversions.csv, gpu_info.json,
#             manifest.json, run_all.log
#   SEEDS     seeds 1..SEEDS per grid point (default 3)
#   PART      all (default), attention (inputs, ports, hwcompare attention: ~7 min) or conversions (~3 min);
#             two calls (attention, then conversions) keep each under a 10-minute command limit
# Run from the repository root. Expected times on an H100 with 16 cores (3 seeds, 90 cases):
#   make_inputs.py        ~10 s      (90 cases x 6 tensors, fp16 + bf16 .npy, 2.8 GB)
#   attention_ports.py    ~10 s      (90 cases x 6 labels; mostly .npy I/O)
#   conversions.py        ~1-2 min   (4 x 2^32 conversions; 24 GiB written)
#   hwcompare attention   ~4 min     (per case 2 goldens + 6 emulated runs: ~27 CPU-s; 8 processes x 2 threads)
#   hwcompare conversions ~1 min     (4 x 2^32 roundings on 16 threads, reading the 24 GiB back)
set -euo pipefail
if [ $# -lt 3 ]; then echo "usage: $0 WORK PASA_BIN OUT [SEEDS] [all|attention|conversions]" >&2; exit 2; fi
WORK=$1; BIN=$2; OUT=$3; SEEDS=${4:-3}; PART=${5:-all}
case $PART in all|attention|conversions) ;; *) echo "run_all: PART must be all, attention or conversions" >&2; exit 2;; esac
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
[ -x "$BIN/pasa-hwcompare" ] || { echo "run_all: $BIN/pasa-hwcompare not found or not executable" >&2; exit 2; }
mkdir -p "$WORK" "$OUT"
LOG="$OUT/run_all_$PART.log"
: > "$LOG"
step() {  # runs a command, logs its output, time and exit status; returns that status
  local t0 rc=0; t0=$(date +%s); echo "== $*" | tee -a "$LOG"
  "$@" 2>&1 | tee -a "$LOG" || rc=$?
  echo "   ($(( $(date +%s) - t0 )) s, exit $rc)" | tee -a "$LOG"; return $rc
}
THREADS=$(nproc)
if [ "$PART" != conversions ]; then
  step python3 "$HERE/make_inputs.py" --out "$WORK/attn" --configs "$ROOT/configs" --seeds "$SEEDS"
  step python3 "$HERE/attention_ports.py" --dir "$WORK/attn"
  cp "$WORK/attn/gpu_info.json" "$OUT/gpu_info.json"
  cp "$WORK/attn/manifest.json" "$OUT/manifest.json"
  # 8 processes of 2 threads (one of 16 scales poorly); exit status 1: a shard failed (see OUT/shard_*.log)
  step "$HERE/shard_compare.sh" "$WORK/attn" "$BIN" "$OUT" 8 || echo "run_all: hwcompare attention failed" | tee -a "$LOG"
fi
if [ "$PART" != attention ]; then
  step python3 "$HERE/conversions.py" --out "$WORK/conv"
  step "$BIN/pasa-hwcompare" conversions --gpu-dir "$WORK/conv" --out "$OUT/hw_conversions.csv" --threads "$THREADS"
  rm -f "$WORK"/conv/conv_*.bin  # 24 GiB
fi
nvidia-smi --query-gpu=name,driver_version --format=csv >> "$LOG" 2>&1 || true
echo "done: $(ls "$OUT")" | tee -a "$LOG"
