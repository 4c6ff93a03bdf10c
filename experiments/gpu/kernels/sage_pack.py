#!/usr/bin/env python3
"""sage_pack.py: the committed part of a sage_capture.py run (results/hardware/sage/): its manifest (every case,
its inputs' sha256, the environment, the log), the SA1 outputs and LSEs of the cases the tests replay (not the
1024 x 1024 ones, and the 128-wide GQA case only at D 64: 2.2 MB in all rather than 39 MB), 8 of the 32 dot16
tiles and 4096 of the 2^20 division / exp2 probes. The identity figures of every case are in sage1_identity.csv
(sage_compare.py over the full capture).

  python3 sage_pack.py CAPTURE_DIR results/hardware/sage

With --sa2 it packs an SA2 capture (sage_capture.py --which sa2) into sage2_captures.npz beside it instead, and
merges its results into the committed manifest (the same cases, their inputs' sha256 checked): per case
`results.sa2` and `committed_sa2`, the capture's environment and log under `sa2_capture`. Committed: the SA2
output bits, LSE and the Q, K, V scales of the cases up to 257 x 257 keys (not the 1024 x 1024 ones, the GQA
case only at D 64: 3.7 MB), and the INT8 Q/K and FP8 V elements of the SA2_ELEMENTS cases. The identity
figures of every case are in sage2_identity.csv.

  python3 sage_pack.py --sa2 SA2_CAPTURE_DIR results/hardware/sage
"""
import glob
import json
import os
import sys

import numpy as np


def keep_case(name):
    if name.endswith("_long") or name.endswith("_odd"):
        return False
    return not (name.endswith("_gqa") and "_d128_" in name)


SA2_ELEMENTS = ("uniform_fp16_full_d64_sq128", "kbias5_bf16_causal_d64_odd", "hybridx20am10_fp16_full_d64_gqa",
                "uniform_bf16_full_d128_decode")


def keep_case_sa2(name):
    return not name.endswith("_long") and not (name.endswith("_gqa") and "_d128_" in name)


def load_arrays(src):
    arrays = {}
    for f in sorted(glob.glob(os.path.join(src, "sage_captures*.npz"))):
        with np.load(f) as z:
            arrays.update({k: z[k] for k in z.files})
    return arrays


def pack_sa2(src, dst):
    arrays = load_arrays(src)
    with open(os.path.join(src, "sage_manifest.json")) as f:
        cap = json.load(f)
    with open(os.path.join(dst, "sage_manifest.json")) as f:
        man = json.load(f)
    by_name = {c["name"]: c for c in cap["cases"]}
    out = {}
    for c in man["cases"]:
        s = by_name[c["name"]]
        if s["sha256"] != c["sha256"]:
            raise SystemExit(f"{c['name']}: the SA2 capture's inputs are not the committed manifest's")
        r = s.get("results", {}).get("sa2", {"status": "not run"})
        c.setdefault("results", {})["sa2"] = r
        c["committed_sa2"] = keep_case_sa2(c["name"]) and r.get("status") == "ok"
        if c["committed_sa2"]:
            parts = ("out", "lse", "qs", "ks", "vs") + (("qi", "ki", "v8") if c["name"] in SA2_ELEMENTS else ())
            for part in parts:
                out[f"{c['name']}__sa2__{part}"] = arrays[f"{c['name']}__sa2__{part}"]
    np.savez_compressed(os.path.join(dst, "sage2_captures.npz"), **out)
    man["files"]["sage2_captures.npz"] = sorted(out)
    man["sa2_capture"] = {"env": cap["env"], "sage_commit": cap["sage_commit"], "log": cap["log"]}
    with open(os.path.join(dst, "sage_manifest.json"), "w") as f:
        json.dump(man, f, indent=1)
    print(f"{sum(c['committed_sa2'] for c in man['cases'])} cases, {len(out)} arrays, "
          f"{os.path.getsize(os.path.join(dst, 'sage2_captures.npz')) / 2**20:.2f} MiB")


def main():
    if sys.argv[1] == "--sa2":
        return pack_sa2(sys.argv[2], sys.argv[3])
    src, dst = sys.argv[1], sys.argv[2]
    os.makedirs(dst, exist_ok=True)
    arrays = {}
    for f in sorted(glob.glob(os.path.join(src, "sage_captures*.npz"))):
        with np.load(f) as z:
            arrays.update({k: z[k] for k in z.files})
    with open(os.path.join(src, "sage_manifest.json")) as f:
        man = json.load(f)
    out = {}
    for c in man["cases"]:
        c["committed"] = keep_case(c["name"]) and c.get("results", {}).get("sa1", {}).get("status") == "ok"
        if c["committed"]:
            for part in ("out", "lse"):
                out[f"{c['name']}__sa1__{part}"] = arrays[f"{c['name']}__sa1__{part}"]
    tiles = sorted({k.rsplit("__", 1)[0] for k in arrays if k.startswith("dot16_")})
    for t in [t for t in tiles if t.endswith("_0") or t.endswith("_1")]:
        for part in ("p", "v", "o16"):
            out[f"{t}__{part}"] = arrays[f"{t}__{part}"]
    idx = np.random.default_rng(1).choice(arrays["elem__x"].size, 4096, replace=False)
    idx.sort()
    for part in ("x", "y", "div", "exp2"):
        out[f"elem__{part}"] = arrays[f"elem__{part}"][idx]
    np.savez_compressed(os.path.join(dst, "sage1_captures.npz"), **out)
    man["files"] = {"sage1_captures.npz": sorted(out)}
    man["packed_by"] = "experiments/gpu/kernels/sage_pack.py (a subset of the capture; see its header)"
    with open(os.path.join(dst, "sage_manifest.json"), "w") as f:
        json.dump(man, f, indent=1)
    print(f"{sum(c['committed'] for c in man['cases'])} cases, {len(out)} arrays, "
          f"{os.path.getsize(os.path.join(dst, 'sage1_captures.npz')) / 2**20:.2f} MiB")


if __name__ == "__main__":
    main()
