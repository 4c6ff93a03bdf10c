#!/usr/bin/env bash
# The paper's comparison (FA-FP32, FA-FP16/FP32, PASA-FP16: configs/real_capture.json's algorithms) on a
# captured model's attention inputs, as a pasa-sweep over every (layer, head) of the capture folder.
#   experiments/real/run_paper_comparison.sh [capture-folder] [out-folder]
# capture-folder: written by pasa_capture (default results/real/capture, experiments/real/train_and_capture.py's);
# out-folder: default sweep-out/real_capture. BUILD_DIR (default build) holds pasa-sweep. The config run is
# written to <out-folder>/config.json: configs/real_capture.json with the folder and the grid (every layer,
# every query head) taken from the capture's index.json.
set -euo pipefail
here=$(cd "$(dirname "$0")/../.." && pwd)
cap=$(realpath "${1:-$here/results/real/capture}")
out=${2:-sweep-out/real_capture}
build=${BUILD_DIR:-$here/build}
[ -f "$cap/index.json" ] || { echo "run_paper_comparison: $cap/index.json not found (not a capture folder)" >&2; exit 2; }
[ -x "$build/pasa-sweep" ] || { echo "run_paper_comparison: $build/pasa-sweep not built (cmake --build build --target pasa-sweep)" >&2; exit 2; }
mkdir -p "$out"
python3 - "$here/configs/real_capture.json" "$cap" "$out/config.json" <<'PY'
import json, sys
cfg_file, cap, out = sys.argv[1:]
cfg = json.load(open(cfg_file))
index = json.load(open(f"{cap}/index.json"))
layers = index["layers"]
heads = {l["shape"]["Nq"] for l in layers}
if len(heads) != 1:
    sys.exit(f"run_paper_comparison: layers have different head counts {sorted(heads)}; edit the grid by hand")
cfg["problem"]["capture"]["dir"] = cap
cfg["grid"] = {"layer": list(range(len(layers))), "head": list(range(heads.pop()))}
cfg["description"] += f" Capture: {cap} (model {index.get('model', '?')})."
json.dump(cfg, open(out, "w"), indent=1)
print(f"{len(layers)} layers x {len(cfg['grid']['head'])} heads of {index.get('model', '?')}: "
      f"{len(layers) * len(cfg['grid']['head']) * len(cfg['algorithms'])} cases")
PY
"$build/pasa-sweep" "$out/config.json" --out "$out" --threads "${THREADS:-$(nproc)}"
# Per algorithm: the RMSE (Eq. 19) over the (layer, head) cases, and the NaN cases.
python3 - "$out/results.csv" <<'PY'
import csv, math, sys
rows = list(csv.DictReader(open(sys.argv[1])))
algs = list(dict.fromkeys(r["algorithm"] for r in rows))
print(f"{'algorithm':<14} {'cases':>5} {'rmse median':>12} {'rmse max':>10} {'NaN cases':>9}")
for a in algs:
    rs = [float(r["rmse"]) for r in rows if r["algorithm"] == a]
    nan = sum(1 for r in rows if r["algorithm"] == a and float(r["nan_pct"]) > 0)
    ok = sorted(x for x in rs if math.isfinite(x))
    med = ok[len(ok) // 2] if ok else math.nan
    print(f"{a:<14} {len(rs):>5} {med:>12.3e} {max(ok) if ok else math.nan:>10.3e} {nan:>9}")
PY
echo "results: $out/results.csv, $out/summary.json"
