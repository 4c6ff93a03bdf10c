#!/usr/bin/env python3
"""SageAttention's recipes against FlashAttention's, paired over seeds (docs/sageattention.md).

Reads the sweeps of configs/sage_comparison_{uniform,hybrid}.json and configs/sage_outlier_ablation.json
(results/sage/<kind>/results.csv) and writes
results/sage/comparison.csv: per input point and algorithm the RMSE (Eq. 19, relative to the golden) over the
seeds — geometric mean, and the 2.5-97.5 % range of the single draws — and the paired ratio of its RMSE to
FA-FP16/FP32's on the same inputs: geometric mean over seeds with a 95 % t-interval of the mean log ratio.
A ratio whose interval contains 1 is reported as such ("no difference" not excluded).

Run:  build/pasa-python experiments/python/sage_comparison.py        (after both sweeps; a second)
"""
import csv
import math
import os
import sys
from collections import defaultdict

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = os.path.join(ROOT, "results", "sage")
T975 = {n: t for n, t in zip(range(1, 21), [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                             2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086])}
BASE = "FA-FP16/FP32"


def main():
    rows_out = []
    for kind, config in (("uniform", "sage_comparison_uniform"), ("hybrid", "sage_comparison_hybrid"),
                         ("outlier_ablation", "sage_outlier_ablation")):
        path = os.path.join(OUT, kind, "results.csv")
        if not os.path.exists(path):
            sys.exit(f"{path}: run ./build/pasa-sweep configs/{config}.json first")
        rmse = defaultdict(dict)  # (x0, alg) -> seed -> rmse
        order = []
        for r in csv.DictReader(open(path)):
            x0 = float(__import__("json").loads(r["problem_json"])["generator"]["x0"])
            rmse[(x0, r["algorithm"])][int(r["seed"])] = float(r["rmse"])
            if r["algorithm"] not in order:
                order.append(r["algorithm"])
        for x0 in sorted({k[0] for k in rmse}):
            base = rmse[(x0, BASE)]
            for alg in order:
                v = rmse[(x0, alg)]
                seeds = sorted(set(v) & set(base))
                vals = np.array([v[s] for s in seeds])
                lr = np.log(np.array([v[s] / base[s] for s in seeds]))
                n = len(lr)
                half = T975[n - 1] * lr.std(ddof=1) / math.sqrt(n) if n > 1 else float("nan")
                lo, hi = math.exp(lr.mean() - half), math.exp(lr.mean() + half)
                rows_out.append({
                    "inputs": kind, "x0": x0, "algorithm": alg, "seeds": n,
                    "rmse_geomean": f"{math.exp(np.log(vals).mean()):.4e}",
                    "rmse_p2.5": f"{np.percentile(vals, 2.5):.4e}", "rmse_p97.5": f"{np.percentile(vals, 97.5):.4e}",
                    f"ratio_to_{BASE}": f"{math.exp(lr.mean()):.4f}", "ratio_lo95": f"{lo:.4f}", "ratio_hi95": f"{hi:.4f}",
                    "differs": "yes" if (lo > 1 or hi < 1) else "no"})
    with open(os.path.join(OUT, "comparison.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows_out[0].keys()))
        w.writeheader()
        w.writerows(rows_out)
    for r in rows_out:
        print(f"{r['inputs']:8s} x0 {r['x0']:4g} {r['algorithm']:24s} rmse {r['rmse_geomean']} "
              f"({r['rmse_p2.5']}-{r['rmse_p97.5']})  x{r[f'ratio_to_{BASE}']} ({r['ratio_lo95']}-{r['ratio_hi95']})")


if __name__ == "__main__":
    main()
