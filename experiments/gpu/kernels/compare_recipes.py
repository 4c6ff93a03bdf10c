#!/usr/bin/env python3
"""compare_recipes.py: pasa's kernel recipes against the SDPA captures of results/hardware/kernels/,
bit for bit, case by case: the percentage of output elements identical, the largest ulp distance, and the
RMSE of emulation and kernel against an exact float64 reference on the same inputs.

  build/pasa-python experiments/gpu/kernels/compare_recipes.py [--set main|heldback] [--recipe torch_flash_sm90]
                    [--backend sdpa_flash] [--csv results/hardware/kernels/recipe_identity_main.csv] [--only TEXT]

Inputs are regenerated from the manifest (kernel_inputs.py) and checked against its sha256 first.
"""
import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
from kernel_inputs import (bits_to_float64, identity_summary, load_captures, make_inputs, sha256_hex,  # noqa: E402
                           ulp_distance, write_rows_csv)

import pasa  # noqa: E402
from pasa_capture import reference_attention  # noqa: E402  (float64 softmax(QKᵀ·scale)·V, GQA, causal to the end)

RES = os.path.join(ROOT, "results", "hardware", "kernels")


def captures(which):
    return load_captures(os.path.join(RES, f"captures_{which}.npz"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--set", default="main", choices=["main", "heldback", "engines"])
    ap.add_argument("--recipe", default="torch_flash_sm90", help="a recipe name or its JSON {\"recipe\": ..., ...}")
    ap.add_argument("--backend", default="sdpa_flash")
    ap.add_argument("--csv", default=None)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    man = json.load(open(os.path.join(RES, {"main": "sdpa_manifest.json", "heldback": "heldback_manifest.json",
                                            "engines": "engines_manifest.json"}[a.set])))
    caps = captures(a.set)
    recipe = json.loads(a.recipe) if a.recipe.lstrip().startswith("{") else a.recipe
    rows, refused = [], []
    for case in man["cases"]:
        if a.only not in case["name"]:
            continue
        r = case["results"].get(a.backend)
        if not r or r.get("status") != "ok" or r["out_key"] not in caps:
            continue
        q, k, v = make_inputs(case)
        for t, x in zip("qkv", (q, k, v)):
            if sha256_hex(x) != case["sha256"][t]:
                raise SystemExit(f"{case['name']}: regenerated {t} differs from the capture's inputs (sha256)")
        dt = case["dtype"]
        qf, kf, vf = (bits_to_float64(x, dt) for x in (q, k, v))
        gpu_bits = caps[r["out_key"]].reshape(case["shape_q"])
        fmt = "fp16" if dt == "fp16" else "bf16"
        scale = case["scale"]
        try:
            out, _ = pasa.attention(q.view(np.uint16), k.view(np.uint16), v.view(np.uint16), format=fmt,
                                    kernel=recipe, scale=scale, causal=bool(case["causal"]))
        except ValueError as e:  # a case the recipe refuses (e.g. top-left causal with Sq != Skv)
            refused.append((case["name"], str(e)))
            continue
        emu_bits = pasa.encode(out, fmt).astype(np.uint16)
        same = float(np.mean(emu_bits == gpu_bits) * 100)
        ref = reference_attention(qf, kf, vf, case["scale_effective"], bool(case["causal"]))
        gpu_vals = bits_to_float64(gpu_bits, dt)
        rmse_gpu = float(np.sqrt(np.mean((gpu_vals - ref) ** 2)))
        rmse_emu = float(np.sqrt(np.mean((out - ref) ** 2)))
        rows.append({"case": case["name"], "dtype": dt, "causal": case["causal"], "shape_q": "x".join(map(str, case["shape_q"])),
                     "shape_kv": "x".join(map(str, case["shape_kv"])), "identical_pct": f"{same:.4f}",
                     "max_ulp": int(ulp_distance(emu_bits, gpu_bits).max()),
                     "rmse_gpu": f"{rmse_gpu:.6e}", "rmse_emu": f"{rmse_emu:.6e}",
                     "rmse_ratio": f"{rmse_emu / rmse_gpu:.6f}" if rmse_gpu > 0 else "nan"})
        print(f"{case['name']:55s} {same:9.4f} %  max ulp {rows[-1]['max_ulp']}  rmse ratio {rows[-1]['rmse_ratio']}")
    for name, why in refused:
        print(f"{name:55s} refused: {why[:100]}")
    print(f"{identity_summary(rows)}; {len(refused)} refused")
    if a.csv:
        write_rows_csv(a.csv, rows)

if __name__ == "__main__":
    main()
