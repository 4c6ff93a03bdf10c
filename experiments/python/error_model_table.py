#!/usr/bin/env python3
"""docs/error-model.md's comparison table from results/error_model.csv (pasa-tables --error-model-heads N
--error-model-seeds M): prediction, measured mean, their ratio, the largest term and the regime (the largest
exponent shifts the model linearises), as Markdown rows. Also prints the ratio's spread per regime band.
Usage: python3 experiments/python/error_model_table.py [results/error_model.csv]"""
import csv
import math
import sys

rows = list(csv.DictReader(open(sys.argv[1] if len(sys.argv) > 1 else "results/error_model.csv")))
names = {"fig9_uniform_x0": "uniform x0 (Fig. 9)", "fig9_uniform_am": "uniform Am (Fig. 9)",
         "fig10_hybrid_x0": "hybrid x0 (Fig. 10)", "fig10_hybrid_am": "hybrid Am (Fig. 10)",
         "pasa_allocations": "uniform allocations", "pasa_allocations_hybrid": "hybrid allocations",
         "zero_mean_v": "uniform, V mean 0"}


def sci(v):
    if v in ("", "NaN", "inf"):
        return {"": "—", "NaN": "NaN", "inf": "overflow"}[v]
    if not math.isfinite(float(v)):
        return "NaN" if math.isnan(float(v)) else "overflow"
    m, e = f"{float(v):.2e}".split("e")
    return f"{m}·10{''.join('⁻⁰¹²³⁴⁵⁶⁷⁸⁹'[0] if c == '-' else '⁰¹²³⁴⁵⁶⁷⁸⁹'[int(c)] for c in str(int(e)))}"


terms = ["scores", "block_mean", "p", "o_l", "out"]
print("| sweep | x0 | Am | algorithm | predicted | measured | measured / predicted | largest term | max shift: score / block |")
print("|---|---|---|---|---|---|---|---|---|")
bands = {}
for r in rows:
    big = "—"
    if r["predicted_rmse"] not in ("inf", ""):
        big = max(terms, key=lambda t: float(r["pred_" + t])).replace("_", "\\_")
    ratio = f"{float(r['measured_over_predicted']):.2f}" if r["measured_over_predicted"] else "—"
    shift = max(float(r["max_score_shift"]), float(r["max_block_shift"]))
    print(f"| {names.get(r['sweep'], r['sweep'])} | {r['x0']} | {r['Am']} | {r['algorithm']} | {sci(r['predicted_rmse'])} | "
          f"{sci(r['measured_rmse_mean'])} | {ratio} | {big} | {float(r['max_score_shift']):.2g} / {float(r['max_block_shift']):.2g} |")
    if r["measured_over_predicted"]:
        band = "< 0.1" if shift < 0.1 else "0.1-1" if shift < 1 else ">= 1"
        bands.setdefault(band, []).append(float(r["measured_over_predicted"]))
for b in ("< 0.1", "0.1-1", ">= 1"):
    if b in bands:
        v = sorted(bands[b])
        print(f"largest shift {b}: {len(v)} rows, measured/predicted {v[0]:.2f}-{v[-1]:.2f} (median {v[len(v) // 2]:.2f})",
              file=sys.stderr)
