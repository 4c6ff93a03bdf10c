#!/usr/bin/env bash
# The property harness's long run (tests/property/, 100,000 cases) split over the cores of a big host:
# PASA_PROPERTY_SHARD=I/N makes process I run cases I, I + N, ... of the same sequence, so the N logs together
# are exactly the cases of one `ctest -L long -R property` run. Usage: run_property_shards.sh DIR [N]
# (DIR holds pasa-tests and, in lib/, the shared libraries it needs: run_scaling.sh --pack, plus pasa-tests).
set -euo pipefail
dir=$(cd "$1" && pwd)
n=${2:-$(nproc)}
out=${OUT:-property-out}
mkdir -p "$out"
export LD_LIBRARY_PATH="$dir/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
start=$SECONDS
for ((i = 0; i < n; ++i)); do
  PASA_PROPERTY_SHARD="$i/$n" "$dir/pasa-tests" "property: the contract on many random problems (long)" \
    >"$out/shard-$i.log" 2>&1 &
done
fails=0
for job in $(jobs -p); do wait "$job" || fails=$((fails + 1)); done
echo "property long run: $n shards, $fails failed, $((SECONDS - start)) s wall"
grep -h "^\[property\]" "$out"/shard-*.log
exit $((fails > 0))
