#!/usr/bin/env bash
# shard_compare.sh: pasa-hwcompare attention over the cases of a make_inputs.py folder in SHARDS processes of
# 2 threads each (one process of 16 threads scales poorly: ~6 s per case on an H100 host's 16 cores, ~9 min
# for the 90 cases, past a 10-minute command limit with the inputs and ports). Each shard writes its own CSV,
# so what finished comes back even if the whole does not; then OUT/hw_attention.csv joins them in the
# manifest's case order (the same table one process would write).
#
#   experiments/gpu/shard_compare.sh ATTN_DIR PASA_BIN OUT [SHARDS]
set -euo pipefail
DIR=$1; BIN=$2; OUT=$3; SHARDS=${4:-8}
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
python3 - "$DIR" "$SHARDS" <<'PY'
import json, os, sys
d, n = sys.argv[1], int(sys.argv[2])
m = json.load(open(os.path.join(d, "manifest.json")))
for i in range(n):
    s = os.path.join(d, "shard_%d" % i)
    os.makedirs(s, exist_ok=True)
    cases = m["cases"][i::n]
    for c in cases:
        link = os.path.join(s, c["name"])
        if not os.path.exists(link):
            os.symlink(os.path.join("..", c["name"]), link)
    json.dump(dict(m, cases=cases), open(os.path.join(s, "manifest.json"), "w"), indent=1)
PY
pids=()
for ((i = 0; i < SHARDS; i++)); do
  "$BIN/pasa-hwcompare" attention --gpu-dir "$DIR/shard_$i" --configs "$ROOT/configs/hardware" \
    --out "$OUT/hw_attention_$i.csv" --threads 2 > "$OUT/shard_$i.log" 2>&1 &
  pids+=($!)
done
rc=0
for p in "${pids[@]}"; do wait "$p" || rc=1; done
python3 - "$DIR" "$OUT" "$SHARDS" <<'PY'
import csv, json, os, sys
d, out, n = sys.argv[1], sys.argv[2], int(sys.argv[3])
order = [c["name"] for c in json.load(open(os.path.join(d, "manifest.json")))["cases"]]
header, rows = None, {}
for i in range(n):
    f = os.path.join(out, "hw_attention_%d.csv" % i)
    if not os.path.exists(f):
        print("shard %d: no CSV (see shard_%d.log)" % (i, i), file=sys.stderr)
        continue
    r = list(csv.reader(open(f, newline="")))
    header = r[0]
    for row in r[1:]:
        rows.setdefault(row[0], []).append(row)
if header is None:
    sys.exit("shard_compare: no shard finished")
tmp = os.path.join(out, "hw_attention.csv.tmp")
with open(tmp, "w", newline="") as f:
    w = csv.writer(f, lineterminator="\n")
    w.writerow(header)
    for name in order:
        for row in rows.get(name, []):
            w.writerow(row)
os.replace(tmp, os.path.join(out, "hw_attention.csv"))
for i in range(n):
    for f in ("hw_attention_%d.csv" % i,):
        p = os.path.join(out, f)
        if os.path.exists(p): os.remove(p)
print("hw_attention.csv: %d cases of %d" % (sum(1 for c in order if c in rows), len(order)))
PY
exit $rc
