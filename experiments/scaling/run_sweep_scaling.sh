#!/usr/bin/env bash
# The sweep scaling table of issue 27, goal 3 (docs/speed.md, "Sweeps side by side"): wall time, speed-up and
# parallel efficiency (speed-up / jobs) of the four paper sweeps (configs/fig9_uniform_x0.json,
# fig9_uniform_am.json, fig10_hybrid_x0.json, fig10_hybrid_am.json: 7 grid points x 3 seeds = 21 problems at
# (1, 16, 1280, 128), each a golden and three algorithms), each run on its own as
#   pasa-sweep CONFIG --jobs J --threads J        for J in 1 2 4 8 16,
# so J cores in all: J problems side by side on one thread each, and workers with no problem left helping
# the loops of those still running (SweepOptions::jobs, LoopHelpers). Wall time and CPU seconds (user + system) by
# bash's `time` of the whole process (start, plan, every case, the final table and summary); busy = CPU /
# wall, the cores kept busy on average (at J jobs, J − busy cores waited). A last item, "four paper
# sweeps", is the four one after another (sums). Every run's table must equal the first run's cell for cell
# (the timing columns golden_time_s and time_s aside), or the script fails.
#
# Usage:
#   experiments/scaling/run_sweep_scaling.sh --pack BUILD_DIR KIT_DIR   copy pasa-sweep and the shared
#       libraries it loads (but the C library) into KIT_DIR (e.g. build-sweep-scaling: ignored by git, so it
#       can be carried to another machine with the working tree)
#   experiments/scaling/run_sweep_scaling.sh DIR                        run from DIR (a build folder or a
#       kit); writes $OUT/sweep_scaling.csv (OUT defaults to ./sweep-scaling-out), machine.txt, the logs and
#       the sweeps' folders (runs/NAME-jJ) next to it
# Environment: JOBS (default "1 2 4 8 16"); SEEDS (default: the configs' three seeds; N < 3 runs every
#   sweep on its first N seeds only, the same grid, shape and algorithms: 7·N problems, for a quicker
#   look — but the last round then differs: the issue's figure is for SEEDS unset); SWEEPS (default the four
#   names above; a subset to split the run in calls); CONFIGS (the folder holding them, default configs/
#   of this checkout); SIDE_BY_SIDE (default 1: at a job count J where the sweeps' J·4 jobs fit the cores,
#   the four sweeps run at once, each its own process on its own J cores — J = 1, 2, 4 on 16 cores — so the
#   long one-job runs overlap; 0: every run alone, the strict measurement, about twice as long). Side by
#   side, the small runs share the host's memory system and clock with the others: if anything that makes
#   them slower, and the speed-ups over J = 1 high by as much (on the 2-core VM, both cores busy, two sweeps
#   at one job side by side took 0.95–1.02 of their time alone, two runs each: within the ±3 % noise).
# Time: one sweep at one job is 33 s on the 2-core VM (an AMD EPYC); the Xeon of the GPU machine's 16-core
# host ran the golden about half as fast per core (docs/speed.md, "Parallel scaling"), so about 60 s there.
# With SIDE_BY_SIDE=1: about 60 + 32 + 16 s (J = 1, 2, 4, the four at once) + 4 · (8 + 4) s (J = 8, 16) ≈
# 2.7 minutes on that host (estimated, not yet measured there); SIDE_BY_SIDE=0 about 8 minutes.
set -euo pipefail
source "$(dirname "$0")/kit.sh"

if [[ ${1:-} == --pack ]]; then
  (($# == 3)) || { echo "usage: $0 --pack BUILD_DIR KIT_DIR" >&2; exit 2; }
  build=$2 kit=$3
  pack_programs "$build" "$kit" pasa-sweep
  du -sh "$kit"
  exit 0
fi

(($# == 1)) || { echo "usage: $0 DIR   |   $0 --pack BUILD_DIR KIT_DIR" >&2; exit 2; }
dir=$(cd "$1" && pwd)
[[ -x $dir/pasa-sweep ]] || { echo "$dir/pasa-sweep: not found (a build folder or a kit from --pack)" >&2; exit 1; }
[[ -d $dir/lib ]] && export LD_LIBRARY_PATH=$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
configs=${CONFIGS:-$(cd "$(dirname "$0")/../../configs" && pwd)}
out=${OUT:-sweep-scaling-out}
mkdir -p "$out/runs" "$out/configs"
jobs_list=(${JOBS:-1 2 4 8 16})
sweeps=(${SWEEPS:-fig9_uniform_x0 fig9_uniform_am fig10_hybrid_x0 fig10_hybrid_am})
seeds=${SEEDS:-}
[[ -z $seeds || $seeds =~ ^[1-9][0-9]*$ ]] || { echo "SEEDS=$seeds: a positive number of seeds" >&2; exit 2; }
csv=$out/sweep_scaling.csv
echo "program,item,threads,seconds,speedup,efficiency,cpu_seconds,busy" >"$csv.tmp"
{
  machine_info
  echo "jobs: ${jobs_list[*]}; seeds: ${seeds:-as in the configs}; sweeps: ${sweeps[*]}; side by side: ${SIDE_BY_SIDE:-1}"
} | tee "$out/machine.txt"

# The config with its seed list cut to the first $seeds (the JSON flattened to one line: newlines are only
# whitespace in JSON, strings cannot hold a raw one).
config_for() {
  local name=$1 src=$configs/$1.json
  [[ -f $src ]] || { echo "$src: not found (CONFIGS=$configs)" >&2; exit 1; }
  if [[ -z $seeds ]]; then
    echo "$src"
    return
  fi
  tr '\n' ' ' <"$src" | awk -v n="$seeds" -v f="$src" '{
    if (!match($0, /"seeds"[ ]*:[ ]*\[[^]]*\]/)) { print f ": no \"seeds\" list" > "/dev/stderr"; exit 1 }
    list = substr($0, RSTART, RLENGTH); sub(/^[^[]*\[/, "", list); sub(/\]$/, "", list)
    k = split(list, s, ",")
    if (n > k) { print f ": has " k " seeds, SEEDS=" n > "/dev/stderr"; exit 1 }
    kept = s[1]; for (i = 2; i <= n; ++i) kept = kept "," s[i]
    print substr($0, 1, RSTART - 1) "\"seeds\": [" kept "]" substr($0, RSTART + RLENGTH)
  }' >"$out/configs/$name.json"
  echo "$out/configs/$name.json"
}

# A results.csv without its last two columns (golden_time_s, time_s: plain numbers, never quoted).
untimed() { sed -E 's/,[^,]*,[^,]*$//' "$1"; }

# One run: pasa-sweep NAME at J jobs, its row "pasa-sweep,NAME,J,wall,cpu" into $out/NAME-jJ.row.
run_one() {
  local name=$1 j=$2 cfg=$3 run=$out/runs/$1-j$2 real user sys
  rm -rf "$run"
  { TIMEFORMAT="%R %U %S"; time "$dir/pasa-sweep" "$cfg" --out "$run" --jobs "$j" --threads "$j" \
      >"$out/$name-j$j.log" 2>&1; } 2>"$out/$name-j$j.time" || { cat "$out/$name-j$j.log" >&2; return 1; }
  read -r real user sys <"$out/$name-j$j.time"
  echo "pasa-sweep,$name,$j,$real,$(awk -v u="$user" -v s="$sys" 'BEGIN { printf "%.2f", u + s }')" >"$out/$name-j$j.row"
}

warm_memory "${WARMUP_GIB:-16}" | tee -a "$out/machine.txt"
cores=$(nproc)
side_by_side=${SIDE_BY_SIDE:-1}
declare -A cfg_of
for name in "${sweeps[@]}"; do cfg_of[$name]=$(config_for "$name"); done
for j in "${jobs_list[@]}"; do
  if ((side_by_side && ${#sweeps[@]} * j <= cores)); then
    # The sweeps at this job count side by side (their jobs fit the cores): each its own process and cores.
    pids=()
    for name in "${sweeps[@]}"; do run_one "$name" "$j" "${cfg_of[$name]}" & pids+=($!); done
    failed=0
    for p in "${pids[@]}"; do wait "$p" || failed=1; done
    ((failed == 0)) || exit 1
  else
    for name in "${sweeps[@]}"; do run_one "$name" "$j" "${cfg_of[$name]}" || exit 1; done
  fi
  for name in "${sweeps[@]}"; do cat "$out/$name-j$j.row"; done
done
rows=$out/rows.tmp
: >"$rows"
for name in "${sweeps[@]}"; do
  first=
  for j in "${jobs_list[@]}"; do
    cat "$out/$name-j$j.row" >>"$rows"
    rm -f "$out/$name-j$j.row"
    run=$out/runs/$name-j$j
    if [[ -z $first ]]; then
      first=$run
    elif ! cmp -s <(untimed "$first/results.csv") <(untimed "$run/results.csv"); then
      echo "$run/results.csv differs from $first/results.csv (timing columns aside)" >&2
      exit 1
    fi
  done
done
# The four one after another: per job count, the sums.
if ((${#sweeps[@]} > 1)); then
  awk -F, -v OFS=, '{ s[$3] += $4; c[$3] += $5; if (!($3 in s0)) order[n++] = $3; s0[$3] = 1 }
       END { for (i = 0; i < n; ++i) printf "pasa-sweep,the %d sweeps one after another,%s,%.3f,%.2f\n", n ? NR / n : 0, order[i], s[order[i]], c[order[i]] }' \
    "$rows" >"$rows.sum"
  cat "$rows.sum" >>"$rows"
  rm -f "$rows.sum"
fi
# Speed-up and efficiency over the first job count of each item; busy = CPU / wall.
awk -F, -v OFS=, '{
  key = $1 "," $2
  if (!(key in t0)) { t0[key] = $4; n0[key] = $3 }
  s = t0[key] / $4
  printf "%s,\"%s\",%s,%s,%.3f,%.3f,%s,%.2f\n", $1, $2, $3, $4, s, s * n0[key] / $3, $5, $5 / $4
}' "$rows" >>"$csv.tmp"
rm -f "$rows"
mv "$csv.tmp" "$csv"
echo "== $csv"
column -s, -t <"$csv" 2>/dev/null || cat "$csv"
