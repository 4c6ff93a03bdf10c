#!/usr/bin/env bash
# Runs the Slurm job-array recipe of docs/sweeps.md ("Shards") on a real, one-node Slurm cluster and checks it:
#   1. the recipe shown in docs/sweeps.md is, byte for byte, scripts/slurm/pasa-sweep-array.sh, the script run here;
#   2. a 3-task array over tests/slurm/small_sweep.json, merged with `pasa-sweep merge`, gives the table of a
#      single-machine run of the same config (two problems side by side: --jobs 2) byte for byte but the two
#      timing columns, and the same summary (its timing and machine fields aside);
#   3. a fresh submission with one task cancelled part-way (scancel, after its first rows are written) cannot
#      be merged; submitting that task again completes it, reusing the rows it had, and the merged table again
#      equals the single-machine run.
# The cluster is Debian's slurm-wlm and munge (installed with apt-get when missing and we are root), started
# here on localhost only: munged, slurmctld -D and slurmd -D with a minimal slurm.conf, their state, sockets
# and logs in a temporary folder, on ports of their own; every daemon started here is stopped on exit, also on
# failure or interruption. CTest test slurm_array (label long).
#
# Usage: run_slurm_array.sh SOURCE_DIR BUILD_DIR      (BUILD_DIR holds pasa-sweep)
# Exit status 0: passed; 77: skipped (no Slurm and it cannot be installed); anything else: failed.
set -euo pipefail

if (($# != 2)); then
  echo "usage: $0 SOURCE_DIR BUILD_DIR" >&2
  exit 2
fi
src=$(cd "$1" && pwd)
build=$(cd "$2" && pwd)
[[ -x $build/pasa-sweep ]] || { echo "$build/pasa-sweep: not built" >&2; exit 2; }
recipe=$src/scripts/slurm/pasa-sweep-array.sh
config=$src/tests/slurm/small_sweep.json
shards=3

fail() { echo "run_slurm_array: FAILED: $*" >&2; exit 1; }
step() { echo "== $*"; }

# ---- Slurm and munge -------------------------------------------------------------------------------------
if ! command -v slurmctld >/dev/null || ! command -v slurmd >/dev/null || ! command -v munged >/dev/null; then
  if ((EUID == 0)) && command -v apt-get >/dev/null; then
    step "installing slurm-wlm and munge (apt-get)"
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q slurm-wlm munge >/dev/null ||
      { echo "run_slurm_array: skipped: apt-get install slurm-wlm munge failed" >&2; exit 77; }
  else
    echo "run_slurm_array: skipped: slurmctld, slurmd or munged missing (apt-get install slurm-wlm munge, as root)" >&2
    exit 77
  fi
fi
if ((EUID != 0)); then
  echo "run_slurm_array: skipped: the test cluster runs its daemons as root (SlurmUser=root)" >&2
  exit 77
fi

tmp=$(mktemp -d "${TMPDIR:-/tmp}/pasa-slurm.XXXXXX")
pids=()
cleanup() {
  local rc=$?
  # Jobs first (slurmd kills their processes), then the daemons this script started, by their process ids.
  if [[ -n ${SLURM_CONF:-} ]]; then
    scancel --quiet --user=root 2>/dev/null || true
    for _ in $(seq 100); do [[ -z $(squeue -h -o %i 2>/dev/null) ]] && break; sleep 0.1; done
  fi
  local p
  for p in "${pids[@]}"; do kill -TERM "$p" 2>/dev/null || true; done
  for p in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$p" 2>/dev/null || break; sleep 0.1; done
    kill -KILL "$p" 2>/dev/null || true
    wait "$p" 2>/dev/null || true
  done
  if ((rc != 0 && rc != 77)); then
    for log in "$tmp"/slurmctld.log "$tmp"/slurmd.log "$tmp"/jobs/slurm-*.out; do
      [[ -f $log ]] && { echo "---- $log (last lines)"; tail -n 25 "$log"; }
    done
  fi
  rm -rf "$tmp"
  exit "$rc"
}
trap cleanup EXIT
trap 'exit 130' INT
trap 'exit 143' TERM

# Free TCP ports on localhost for slurmctld and slurmd (so that a test never meets another cluster).
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}
ctld_port=$(free_port)
slurmd_port=$(free_port)
while [[ $slurmd_port == "$ctld_port" ]]; do slurmd_port=$(free_port); done

step "starting munged, slurmctld and slurmd in $tmp (ports $ctld_port, $slurmd_port)"
mkdir -p "$tmp/state" "$tmp/spool" "$tmp/munge" "$tmp/jobs"
chmod 700 "$tmp/munge"
dd if=/dev/urandom of="$tmp/munge/munge.key" bs=1024 count=1 status=none
chmod 400 "$tmp/munge/munge.key"
munged --foreground --force --key-file="$tmp/munge/munge.key" --socket="$tmp/munge/munge.socket" \
  --pid-file="$tmp/munge/munged.pid" --log-file="$tmp/munge/munged.log" --seed-file="$tmp/munge/munged.seed" 2>"$tmp/munge/munged.stderr" &
pids+=($!)
for _ in $(seq 100); do [[ -S $tmp/munge/munge.socket ]] && break; sleep 0.1; done
[[ -S $tmp/munge/munge.socket ]] || fail "munged did not start (log: $(cat "$tmp/munge/munged.log" 2>/dev/null))"

cpus=$(nproc)
cat >"$tmp/slurm.conf" <<EOF
ClusterName=pasatest
SlurmctldHost=localhost(127.0.0.1)
SlurmctldPort=$ctld_port
SlurmdPort=$slurmd_port
SlurmUser=root
SlurmdUser=root
AuthType=auth/munge
CredType=cred/munge
AuthInfo=socket=$tmp/munge/munge.socket
StateSaveLocation=$tmp/state
SlurmdSpoolDir=$tmp/spool
SlurmctldPidFile=$tmp/slurmctld.pid
SlurmdPidFile=$tmp/slurmd.pid
SlurmctldLogFile=$tmp/slurmctld.log
SlurmdLogFile=$tmp/slurmd.log
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
AccountingStorageType=accounting_storage/none
SchedulerType=sched/backfill
SelectType=select/cons_tres
SelectTypeParameters=CR_CPU
ReturnToService=2
MpiDefault=none
MinJobAge=3600
KillWait=5
NodeName=localhost NodeAddr=127.0.0.1 CPUs=$cpus RealMemory=1000 State=UNKNOWN
PartitionName=debug Nodes=localhost Default=YES MaxTime=INFINITE State=UP
EOF
export SLURM_CONF=$tmp/slurm.conf
slurmctld -D -i -f "$SLURM_CONF" >"$tmp/slurmctld.stdout" 2>&1 &
pids+=($!)
slurmd -D -N localhost -f "$SLURM_CONF" >"$tmp/slurmd.stdout" 2>&1 &
pids+=($!)
ready=0
for _ in $(seq 300); do
  state=$(sinfo -h -N -o %T 2>/dev/null || true)
  [[ $state == idle* ]] && { ready=1; break; }
  sleep 0.2
done
((ready)) || fail "the node did not become idle (sinfo: ${state:-no answer})"
sinfo -N -o '%N %T %c' | sed 's/^/   /'

# ---- The recipe ------------------------------------------------------------------------------------------
step "docs/sweeps.md shows scripts/slurm/pasa-sweep-array.sh verbatim"
# The block after the marker <!-- doc-test: file=pasa-sweep-array.sh --> in docs/sweeps.md.
awk '/<!-- doc-test: file=pasa-sweep-array.sh -->/ { m = 1; next }
     m == 1 && /^```/ { m = 2; next }
     m == 2 && /^```/ { exit }
     m == 2 { print }' "$src/docs/sweeps.md" >"$tmp/recipe-from-docs.sh"
[[ -s $tmp/recipe-from-docs.sh ]] || fail "docs/sweeps.md: no block after <!-- doc-test: file=pasa-sweep-array.sh -->"
diff -u "$recipe" "$tmp/recipe-from-docs.sh" || fail "docs/sweeps.md shows another recipe than $recipe"

# The submit folder, as in the recipe: ./build, ./scripts and the config.
cd "$tmp/jobs"
ln -s "$build" build
ln -s "$src/scripts" scripts
cp "$config" sweep.json

# Waits for every task of job $1 to leave the queue; prints "task state exit" per task.
wait_job() {
  local job=$1
  for _ in $(seq 1800); do
    [[ -z $(squeue -h -j "$job" -o %i 2>/dev/null) ]] && break
    sleep 0.2
  done
  [[ -z $(squeue -h -j "$job" -o %i 2>/dev/null) ]] || fail "job $job still queued or running after 6 minutes"
  scontrol -o show job "$job" | sed -E 's/.*ArrayTaskId=([0-9]+).*JobState=([A-Z_]+).*ExitCode=([0-9:]+).*/\1 \2 \3/'
}
# Compares results.csv of two folders cell by cell, the timing columns aside, and their summary.json but for
# the timing and machine fields.
same_results() {
  python3 - "$1" "$2" <<'PY'
import csv, json, sys
a, b = sys.argv[1], sys.argv[2]
def table(d):
    with open(d + "/results.csv", newline="") as f:
        rows = list(csv.reader(f))
    keep = [i for i, h in enumerate(rows[0]) if h not in ("golden_time_s", "time_s")]
    return [[r[i] for i in keep] for r in rows]
ta, tb = table(a), table(b)
if ta != tb:
    diffs = [(i, x, y) for i, (x, y) in enumerate(zip(ta, tb)) if x != y][:3]
    sys.exit(f"results.csv: {a} and {b} differ ({len(ta)} and {len(tb)} lines; first differences {diffs})")
# And byte for byte: the text of each line up to the timing columns (the last two, plain numbers).
def text(d):
    with open(d + "/results.csv", "rb") as f:
        return [line.rsplit(b",", 2)[0] for line in f.read().split(b"\n")]
if text(a) != text(b):
    sys.exit(f"results.csv: {a} and {b} hold the same cells written differently")
def summary(d):
    s = json.load(open(d + "/summary.json"))
    s.pop("machine", None)
    def strip(x):
        if isinstance(x, dict):
            return {k: strip(v) for k, v in x.items() if k not in ("golden_time_s", "time_s")}
        if isinstance(x, list):
            return [strip(v) for v in x]
        return x
    return strip(s)
if summary(a) != summary(b):
    sys.exit(f"summary.json: {a} and {b} differ (timing and machine fields aside)")
print(f"   same table ({len(ta) - 1} rows, {len(ta[0])} columns compared) and summary")
PY
}

step "single-machine run"
"$build/pasa-sweep" sweep.json --out single --jobs 2 --threads 2 >single.log 2>&1 || { cat single.log; fail "pasa-sweep (single run)"; }
cases=$(($(wc -l <single/results.csv) - 1))
((cases >= 4 * shards)) || fail "single/results.csv: $cases cases, expected at least $((4 * shards))"

step "job array of $shards tasks, as in the recipe"
job=$(sbatch --parsable --array=0-$((shards - 1)) --cpus-per-task=1 scripts/slurm/pasa-sweep-array.sh sweep.json runs/a $shards)
echo "   job $job"
states=$(wait_job "$job")
echo "$states" | sed 's/^/   task /'
[[ $(grep -c ' COMPLETED 0:0$' <<<"$states") == "$shards" ]] || fail "not every task completed: $states"
./build/pasa-sweep merge runs/a/shard-* --out runs/a >merge-a.log 2>&1 || { cat merge-a.log; fail "merge of the array's shards"; }
cat merge-a.log | sed 's/^/   /'
same_results runs/a single || fail "merged array and single run differ"

step "job array with task 1 cancelled part-way, then resubmitted"
job=$(sbatch --parsable --array=0-$((shards - 1)) --cpus-per-task=1 scripts/slurm/pasa-sweep-array.sh sweep.json runs/b $shards)
echo "   job $job"
partial=runs/b/shard-1/results.shard-1-of-$shards.csv.partial
rows=0
for _ in $(seq 3000); do
  [[ -f $partial ]] && rows=$(($(wc -l <"$partial") - 1))
  ((rows >= 1)) && break
  sleep 0.02
done
((rows >= 1)) || fail "task 1 wrote no row within 60 s"
scancel "${job}_1"
echo "   cancelled task ${job}_1 after $rows row(s)"
states=$(wait_job "$job")
echo "$states" | sed 's/^/   task /'
grep -q '^1 CANCELLED ' <<<"$states" || fail "task 1 was not cancelled (it finished first?): $states"
[[ ! -f runs/b/shard-1/results.shard-1-of-$shards.csv ]] || fail "cancelled task 1 left a final table"
kept=$(($(wc -l <"$partial") - 1))
((kept >= 1 && kept < cases / shards)) || fail "task 1 cancelled with $kept of $((cases / shards)) rows: not part-way"
if ./build/pasa-sweep merge runs/b/shard-* --out runs/b >merge-b1.log 2>&1; then fail "merge accepted a missing shard"; fi
grep -q 'shard 1/3 is missing' merge-b1.log || { cat merge-b1.log; fail "merge: no 'shard 1/3 is missing'"; }
echo "   merge refused: $(cat merge-b1.log)"
job2=$(sbatch --parsable --array=1 --cpus-per-task=1 scripts/slurm/pasa-sweep-array.sh sweep.json runs/b $shards)
states=$(wait_job "$job2")
echo "$states" | sed 's/^/   resubmitted task /'
[[ $states == "1 COMPLETED 0:0" ]] || fail "resubmitted task 1: $states"
log=slurm-${job2}_1.out
grep -Eq "^[0-9]+ cases run, $kept kept from an earlier run" "$log" || { cat "$log"; fail "$log: the resubmitted task did not keep its $kept rows"; }
grep -E "cases run, [0-9]+ kept" "$log" | sed 's/^/   /'
./build/pasa-sweep merge runs/b/shard-* --out runs/b >merge-b2.log 2>&1 || { cat merge-b2.log; fail "merge after the resubmission"; }
same_results runs/b single || fail "merged array (after the resubmission) and single run differ"

echo "run_slurm_array: passed"
