#!/usr/bin/env python3
"""docs/fp8.md's 10-seed tables from the sweeps of configs/fp8_fa3_seeds_{hybrid,uniform}.json: per grid point
and algorithm the seed mean of the RMSE (Eq. 19) with the 95 % confidence interval of that mean, and the paired
ratios (pasa-sweep's summary.json: geometric mean of the per-seed ratios, 95 % t interval) that the page's
claims rest on. Writes DIR/seeds_table.csv (means) and DIR/seeds_paired.csv (the chosen pairs, each as
"numerator / denominator", < 1: the numerator's error is lower) and prints the markdown tables.

Run:  python3 experiments/python/fp8_seeds_table.py results/fp8_fa3/seeds_hybrid results/fp8_fa3/seeds_uniform
"""
import csv
import json
import math
import os
import sys

T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131]
SHORT = {"FA-FP16/FP32 (H100 GEMMs)": "FA-FP16/FP32", "FA-FP8 plain cast": "FA plain cast", "FA-FP8 tensor": "FA tensor",
         "FA-FP8 tensor+H": "FA tensor+H", "FA-FP8 block": "FA block", "FA-FP8 block+H": "FA block+H",
         "PASA-FP8 block": "PASA block", "PASA-FP8 block+H": "PASA block+H",
         "PASA-FP8 block, shift first": "PASA block, shift first",
         "PASA-FP8 block+H, shift first": "PASA block+H, shift first"}
FA8 = ["FA-FP8 plain cast", "FA-FP8 tensor", "FA-FP8 tensor+H", "FA-FP8 block", "FA-FP8 block+H"]
# The comparisons the page states: each PASA variant against FA with the same scales and transform and against
# FA's best variant at that point (lowest seed-mean RMSE), shifting first against after, and the transform.
PAIRS = [("PASA-FP8 block", "FA-FP8 block"), ("PASA-FP8 block+H", "FA-FP8 block+H"),
         ("PASA-FP8 block, shift first", "FA-FP8 block"), ("PASA-FP8 block+H, shift first", "FA-FP8 block+H"),
         ("PASA-FP8 block, shift first", "PASA-FP8 block"), ("PASA-FP8 block+H, shift first", "PASA-FP8 block+H"),
         ("FA-FP8 block+H", "FA-FP8 block"), ("FA-FP8 tensor+H", "FA-FP8 tensor"), ("FA-FP8 block", "FA-FP8 plain cast")]


def fmt(x):
    return "nan" if x is None or not math.isfinite(x) else f"{x:.3g}"


for d in sys.argv[1:]:
    s = json.load(open(os.path.join(d, "summary.json")))
    cfg = s["config"]
    shape = cfg["problem"]["shape"]
    points = {}
    for g in s["groups"]:
        points.setdefault(g["grid_point"], {"params": g["params"], "algs": {}})["algs"][g["algorithm"]] = g
    paired = {(p["grid_point"], p["numerator"], p["denominator"]): p for p in s["paired"]}

    def ratio(gp, a, b):
        if (gp, a, b) in paired:
            p = paired[(gp, a, b)]
            return p["ratio_geo_mean"], *(p["ratio_ci95"] or [None, None]), p["pairs"]
        p = paired[(gp, b, a)]
        lo, hi = p["ratio_ci95"] or [None, None]
        inv = lambda x: None if x is None else 1 / x
        return inv(p["ratio_geo_mean"]), inv(hi), inv(lo), p["pairs"]

    algs = [a["label"] for a in cfg["algorithms"]]
    table, pair_rows = [], []
    print(f"\n{cfg['name']}: shape ({shape['B']}, {shape['Nq']}, {shape['Sq']}, {shape['D']}), seeds "
          f"{len(cfg['seeds'])}; RMSE seed mean (95 % CI of the mean)\n")
    print("| x0, Am | " + " | ".join(SHORT[a] for a in algs) + " |")
    print("|---" * (len(algs) + 1) + "|")
    for gp in sorted(points):
        prm = points[gp]["params"]
        cells = []
        for a in algs:
            m = points[gp]["algs"][a]["metrics"]["rmse"]
            n = len(cfg["seeds"]) - m["non_finite"]
            if m["non_finite"]:
                cells.append(f"nan ({m['non_finite']} seeds)")
                table.append([prm.get("x0"), prm.get("Am"), a, n, "nan", "", "", m["non_finite"]])
                continue
            h = T975[n - 2] * m["sd"] / math.sqrt(n)
            cells.append(f"{m['mean']:.2e} ({m['mean'] - h:.1e}–{m['mean'] + h:.1e})")
            table.append([prm.get("x0"), prm.get("Am"), a, n, m["mean"], m["mean"] - h, m["mean"] + h, 0])
        print(f"| {prm.get('x0')}, {prm.get('Am')} | " + " | ".join(cells) + " |")
        best = min(FA8, key=lambda a: points[gp]["algs"][a]["metrics"]["rmse"]["mean"])
        for num, den in PAIRS + [(p, best) for p in algs if p.startswith("PASA") and (p, best) not in PAIRS]:
            r, lo, hi, n = ratio(gp, num, den)
            pair_rows.append([prm.get("x0"), prm.get("Am"), num, den, "YES" if (num, den) not in PAIRS else "",
                              n, r, lo, hi, "YES" if lo is not None and (hi < 1 or lo > 1) else "NO"])
    with open(os.path.join(d, "seeds_table.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["x0", "Am", "algorithm", "seeds", "rmse_mean", "rmse_mean_ci95_lo", "rmse_mean_ci95_hi", "nan_seeds"])
        w.writerows(table)
    with open(os.path.join(d, "seeds_paired.csv"), "w", newline="") as f:
        w = csv.writer(f)
        w.writerow(["x0", "Am", "numerator", "denominator", "fa_best", "pairs", "ratio_geo_mean", "ratio_ci95_lo", "ratio_ci95_hi",
                    "ci95_excludes_1"])
        w.writerows(pair_rows)
    print(f"\npaired RMSE ratios (geometric mean, 95 % interval; * where it excludes 1):\n")
    print("| x0, Am | ratio | value |\n|---|---|---|")
    for x0, am, num, den, best, n, r, lo, hi, ex in pair_rows:
        den_label = SHORT[den] + (" (FA's best)" if best else "")
        print(f"| {x0}, {am} | {SHORT[num]} / {den_label} | {fmt(r)} ({fmt(lo)}–{fmt(hi)}){' *' if ex == 'YES' else ''} |")
