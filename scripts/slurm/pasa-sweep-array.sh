#!/bin/bash
# One shard of a pasa-sweep per task of a Slurm job array (docs/sweeps.md, "Shards"). Submit from the folder
# that holds ./build and the config; every shard writes its own folder OUT/shard-I:
#   sbatch --array=0-7 --cpus-per-task=8 scripts/slurm/pasa-sweep-array.sh configs/fig10_hybrid_am.json runs/fig10 8
#   ./build/pasa-sweep merge runs/fig10/shard-* --out runs/fig10     # once every task has completed
# A task that was killed or failed: submit that task again with the same arguments (sbatch --array=3 ...);
# --resume keeps the rows it had finished. The shard count is an argument, not the array's size, so that a
# resubmitted task still splits the sweep as the first submission did. tests/slurm/run_slurm_array.sh runs
# this script on a one-node Slurm cluster.
#SBATCH --job-name=pasa-sweep
#SBATCH --output=slurm-%A_%a.out
set -euo pipefail
usage() {
  echo "usage: sbatch --array=0-(N-1) [--cpus-per-task=T] $0 CONFIG OUT_DIR N" >&2
  [ -n "${1:-}" ] && echo "$0: $1" >&2
  exit 2
}
(($# == 3)) || usage
config=$1 out=$2 shards=$3
[ -n "${SLURM_ARRAY_TASK_ID:-}" ] || usage "SLURM_ARRAY_TASK_ID is not set: run it as a task of a job array (sbatch --array)"
# A CONFIG or OUT_DIR that starts with '-' would be read as an option (--print-default runs nothing, exit 0).
case $config in -*) usage "CONFIG '$config' starts with '-': name it ./$config";; esac
case $out in -*) usage "OUT_DIR '$out' starts with '-': name it ./$out";; esac
[ -f "$config" ] || usage "CONFIG '$config' is not a file"
exec ./build/pasa-sweep "$config" --out "$out/shard-$SLURM_ARRAY_TASK_ID" --threads "${SLURM_CPUS_PER_TASK:-1}" \
  --shard "$SLURM_ARRAY_TASK_ID/$shards" --resume
