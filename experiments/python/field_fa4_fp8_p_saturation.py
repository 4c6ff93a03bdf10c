#!/usr/bin/env python3
"""field_fa4_fp8_p_saturation.py: field question (b), FA4's E4M3 P saturation (flash-attention #2716): on which
inputs the lazy rescale with threshold 4 and P offset 8 loses accuracy, and by how much, against HEAD (threshold 0),
E5M2 P and offset 4 (#2717), paired over seeds (docs/field-questions.md (b)).

  build/pasa-python experiments/python/field_fa4_fp8_p_saturation.py [configs/field_fa4_fp8_p_saturation.json]

Inputs (e4m3, one decode row per head, per-head K and V): 'random' N(0,1) entries; 'growing': K[j, 0] carries a
ramp R·(skv − 1 − j)/(skv − 1) and q[0] = 2, so that the score rises by growth_per_block log2 units per block of
block_n keys in the kernel's order (reverse: the last block first); 'sorted': the random keys (and their values)
sorted by score, highest first, so the scores rise in the kernel's order. Per kernel: the relative RMSE against
pasa.golden, and the output's mass sum|O| / sum|golden| (saturated P shrinks O while l counts P in full).
Writes results/field/fa4_fp8_p_saturation.csv (per seed) and results/field/fa4_fp8_p_saturation_paired.csv.
"""
import os
import sys

import numpy as np

import pasa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from field_common import ROOT, geomean, load_config, paired, rel_rmse, write_csv  # noqa: E402

E4M3 = "fp8_e4m3fn"


def make_case(seed, kind, growth, c):
    N, D, skv, bn = c["shape"]["Nq"], c["shape"]["D"], c["skv"], c["block_n"]
    rng = np.random.default_rng([seed, ["random", "growing", "sorted"].index(kind), int(growth * 8)])
    q = rng.normal(0, 1, (1, N, 1, D))
    k = rng.normal(0, 1, (1, N, skv, D))
    v = rng.normal(0, 1, (1, N, skv, D))
    scale = 1.0 / np.sqrt(D)
    if kind == "growing":
        q[..., 0] = 2.0
        # score shift 2·ramp·scale natural units = 2·ramp·scale·log2 e log2 units; growth per block over skv/bn blocks
        R = growth * (skv / bn) / (2.0 * scale * np.log2(np.e))
        k[..., 0] += R * (skv - 1 - np.arange(skv)) / (skv - 1)
    q, k, v = (pasa.round(x, E4M3) for x in (q, k, v))
    if kind == "sorted":
        for h in range(N):
            order = np.argsort(-(k[0, h] @ q[0, h, 0]))  # highest score first: processed last
            k[0, h], v[0, h] = k[0, h][order], v[0, h][order]
    return q, k, v


def main():
    cfg_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "configs", "field_fa4_fp8_p_saturation.json")
    c = load_config(cfg_path)
    points = [(kind, g) for kind in c["inputs"] for g in (c["growth_per_block"] if kind == "growing" else [0.0])]
    rows, per = [], {}
    for kind, growth in points:
        for seed in c["seeds"]:
            q, k, v = make_case(seed, kind, growth, c)
            g = np.asarray(pasa.golden(q, k, v, format=E4M3)["out"])
            rec = {"inputs": kind, "growth_per_block": growth, "seed": seed}
            for name, kern in c["kernels"].items():
                o = np.asarray(pasa.attention(q, k, v, format=E4M3, kernel=kern)[0], dtype=np.float64)
                e, mass = rel_rmse(o, g), float(np.sum(np.abs(o)) / np.sum(np.abs(g)))
                rec[f"rel_rmse_{name}"], rec[f"mass_{name}"] = f"{e:.6g}", f"{mass:.5g}"
                per.setdefault((kind, growth, name), {})[seed] = (e, mass)
            rows.append(rec)
            print(rec, flush=True)
    out = os.path.join(ROOT, "results", "field")
    write_csv(os.path.join(out, "fa4_fp8_p_saturation.csv"), rows)
    base = c["baseline"]
    summary = []
    for kind, growth in points:
        b = per[(kind, growth, base)]
        for name in c["kernels"]:
            x = per[(kind, growth, name)]
            r = {"inputs": kind, "growth_per_block": growth, "kernel": name,
                 "rel_rmse_geomean": f"{geomean(e for e, _ in x.values()):.4g}",
                 "mass_mean": f"{np.mean([m for _, m in x.values()]):.4g}"}
            r.update({f"vs_{base}_{kk}": vv for kk, vv in
                      paired({s: e for s, (e, _) in x.items()}, {s: e for s, (e, _) in b.items()}).items()})
            if name != "lazy4_e4m3":  # the fix against the bug: lazy4_e4m3 over this one
                bug = per[(kind, growth, "lazy4_e4m3")]
                r.update({f"lazy4_e4m3_over_this_{kk}": vv for kk, vv in
                          paired({s: e for s, (e, _) in bug.items()}, {s: e for s, (e, _) in x.items()}).items()})
            summary.append(r)
            print(r, flush=True)
    write_csv(os.path.join(out, "fa4_fp8_p_saturation_paired.csv"), summary)


if __name__ == "__main__":
    main()
