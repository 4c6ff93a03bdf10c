#!/usr/bin/env python3
"""Field question (e), thu-ml/SageAttention #221 ("black images"): on which inputs SageAttention's kernels give NaN or
inf, and at which step (docs/field-questions.md, (e)).

Inputs (configs/field_sage_nan.json): fp16 Q, K ~ U(-a, a), V ~ U(x0 - am, x0 + am), drawn per seed with numpy's
PCG64, optionally one V channel set to 0 for every key. Per kernel recipe and seed: the share of output
elements that are NaN or inf, and the relative RMSE (Eq. 19) over the finite ones against the golden; the
paired ratio of each recipe's RMSE to torch's FA2 kernel where both are finite. The step responsible is named
by ablation: the same recipe with that one step changed (SA1's fp16 P·V accumulator → fp32), on the same inputs.

Run:  build/pasa-python experiments/python/field_sage_nan.py      (about a minute; writes results/field/sage_nan.csv)
"""
import csv
import json
import os
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from field_common import ROOT, geomean, paired, rel_rmse  # noqa: E402

import pasa  # noqa: E402

CFG = json.load(open(os.path.join(ROOT, "configs", "field_sage_nan.json")))
OUT = os.path.join(ROOT, "results", "field", "sage_nan.csv")


def draw(seed, spec, shape):
    rng = np.random.Generator(np.random.PCG64(seed))
    B, N, S, D = shape["B"], shape["N"], shape["S"], shape["D"]
    q = rng.uniform(-spec["qk_am"], spec["qk_am"], (B, N, S, D))
    k = rng.uniform(-spec["qk_am"], spec["qk_am"], (B, N, S, D))
    v = rng.uniform(spec["v_x0"] - spec["v_am"], spec["v_x0"] + spec["v_am"], (B, N, S, D))
    if "zero_v_channel" in spec:
        v[..., spec["zero_v_channel"]] = 0.0
    return tuple(pasa.round(x, "fp16") for x in (q, k, v))


def main():
    rows = []
    base_label = "torch FA2 (flash)"
    for name, spec in CFG["inputs"].items():
        rmse = {lab: {} for lab in CFG["kernels"]}
        nonfinite = {lab: [] for lab in CFG["kernels"]}
        for seed in CFG["seeds"]:
            q, k, v = draw(seed, spec, CFG["shape"])
            g = pasa.golden(q, k, v, format="fp16")["out"]
            for lab, kern in CFG["kernels"].items():
                o, _ = pasa.attention(q, k, v, format="fp16", kernel=kern)
                bad = ~np.isfinite(o)
                nonfinite[lab].append(float(bad.mean()))
                if not bad.all():
                    rmse[lab][seed] = rel_rmse(o[~bad], g[~bad])
        for lab in CFG["kernels"]:
            nf = np.array(nonfinite[lab]) * 100
            row = {"inputs": name, "kernel": lab, "seeds": len(CFG["seeds"]),
                   "nonfinite_pct_min": f"{nf.min():.4g}", "nonfinite_pct_max": f"{nf.max():.4g}",
                   "rmse_finite_geomean": f"{geomean(rmse[lab].values()):.4e}" if rmse[lab] else "nan"}
            if lab != base_label and len(set(rmse[lab]) & set(rmse[base_label])) >= 2:
                p = paired(rmse[lab], rmse[base_label])
                row.update({"ratio_to_fa2": p["ratio"], "lo95": p["lo95"], "hi95": p["hi95"], "differs": p["differs"]})
            rows.append(row)
            print(f"{name:45s} {lab:30s} non-finite {row['nonfinite_pct_min']}-{row['nonfinite_pct_max']} %  "
                  f"rmse {row['rmse_finite_geomean']}  x{row.get('ratio_to_fa2', '-')} ({row.get('lo95', '')}-{row.get('hi95', '')})")
    keys = ["inputs", "kernel", "seeds", "nonfinite_pct_min", "nonfinite_pct_max", "rmse_finite_geomean",
            "ratio_to_fa2", "lo95", "hi95", "differs"]
    with open(OUT, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys, restval="")
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
