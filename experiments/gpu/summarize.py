#!/usr/bin/env python3
"""summarize.py: the emulator-against-GPU tables of results/hardware/ from what run_all.sh brought back.

  python3 experiments/gpu/summarize.py RUN_OUT [--results results/hardware]

Reads RUN_OUT/{hw_attention.csv, hw_conversions.csv, gpu_info.json, manifest.json} (pasa-hwcompare's
per-(case, label) rows and conversion summaries) and writes, in --results:
  hw_attention.csv      the per-case rows, unchanged (one row per case and hardware config)
  hw_conversions.csv    the conversion summaries, unchanged
  gpu_info.json         torch / CUDA / GPU and the cuBLAS flags the ports ran with
  hw_summary.csv        per (generator, x0, Am, label): seed means of the GPU's and the emulator's RMSE against
                        the golden, their ratio (mean, min, max over seeds), the share of output elements
                        bit-identical and within 1 ulp, and both NaN percentages
  hw_by_label.csv       per label over every case: the same, with the ratio's min / median / max
and prints hw_by_label as a Markdown table (for the README). Standard library only (no NumPy).
"""
import argparse
import csv
import json
import os
import shutil
import statistics
import sys
from collections import OrderedDict


def num(s):
    return float(s) if s not in ("", "nan", "NaN") else float("nan")


def mean(xs):
    xs = [x for x in xs if x == x]
    return statistics.fmean(xs) if xs else float("nan")


def fmt(x):
    return "nan" if x != x else repr(x)


def write_csv(path, header, rows):
    tmp = path + ".tmp"
    with open(tmp, "w", newline="") as f:
        w = csv.writer(f, lineterminator="\n")
        w.writerow(header)
        w.writerows(rows)
    os.replace(tmp, path)


def summarize(rows, key):
    groups = OrderedDict()
    for r in rows:
        groups.setdefault(key(r), []).append(r)
    out = []
    for k, rs in groups.items():
        ok = [r for r in rs if r["status"] == "ok"]
        ratios = [num(r["ratio_emu_gpu"]) for r in ok if num(r["ratio_emu_gpu"]) == num(r["ratio_emu_gpu"])]
        out.append(list(k) + [
            len(ok), fmt(mean(num(r["rmse_gpu"]) for r in ok)), fmt(mean(num(r["rmse_emu"]) for r in ok)),
            fmt(mean(ratios)), fmt(min(ratios) if ratios else float("nan")),
            fmt(statistics.median(ratios) if ratios else float("nan")), fmt(max(ratios) if ratios else float("nan")),
            fmt(mean(num(r["identical_pct"]) for r in ok)), fmt(min((num(r["identical_pct"]) for r in ok), default=float("nan"))),
            fmt(mean(num(r["within_1ulp_pct"]) for r in ok)),
            fmt(mean(num(r["nan_pct_gpu"]) for r in ok)), fmt(mean(num(r["nan_pct_emu"]) for r in ok)),
            len(rs) - len(ok)])
    return out


STATS = ["cases", "rmse_gpu_mean", "rmse_emu_mean", "ratio_mean", "ratio_min", "ratio_median", "ratio_max",
         "identical_pct_mean", "identical_pct_min", "within_1ulp_pct_mean", "nan_pct_gpu_mean", "nan_pct_emu_mean",
         "not_ok"]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("run_out", help="folder run_all.sh wrote (OUT)")
    ap.add_argument("--results", default="results/hardware")
    a = ap.parse_args()
    src = os.path.join(a.run_out, "hw_attention.csv")
    if not os.path.exists(src):
        sys.exit("summarize.py: %s not found" % src)
    os.makedirs(a.results, exist_ok=True)
    for f in ("hw_attention.csv", "hw_conversions.csv", "gpu_info.json"):
        p = os.path.join(a.run_out, f)
        if os.path.exists(p):
            shutil.copyfile(p, os.path.join(a.results, f))
    rows = list(csv.DictReader(open(src, newline="")))
    if not rows:
        sys.exit("summarize.py: %s has no rows" % src)
    labels = list(OrderedDict.fromkeys(r["label"] for r in rows))
    order = {}
    for l in ["fa_fp32", "fa_fp16_fp32", "pasa_fp16", "fa_fp32_bf16", "fa_bf16_fp32", "pasa_bf16"] + labels:
        order.setdefault(l, len(order))
    rows.sort(key=lambda r: (r["generator"], num(r["x0"]), num(r["Am"]), order[r["label"]], int(r["seed"])))
    write_csv(os.path.join(a.results, "hw_summary.csv"), ["generator", "x0", "Am", "label"] + STATS,
              summarize(rows, lambda r: (r["generator"], r["x0"], r["Am"], r["label"])))
    by = sorted(summarize(rows, lambda r: (r["label"],)), key=lambda s: order[s[0]])
    write_csv(os.path.join(a.results, "hw_by_label.csv"), ["label"] + STATS, by)
    print("| config | cases | RMSE ratio emulator/GPU: min / median / max | bit-identical elements: mean (min) | within 1 ulp | NaN % GPU / emulator |")
    print("|---|---|---|---|---|---|")
    for s in by:
        d = dict(zip(["label"] + STATS, s))
        print("| `%s` | %s | %.3f / %.3f / %.3f | %.2f %% (%.1f %%) | %.2f %% | %.3g / %.3g |" % (
            d["label"], d["cases"], float(d["ratio_min"]), float(d["ratio_median"]), float(d["ratio_max"]),
            float(d["identical_pct_mean"]), float(d["identical_pct_min"]), float(d["within_1ulp_pct_mean"]),
            float(d["nan_pct_gpu_mean"]), float(d["nan_pct_emu_mean"])))


if __name__ == "__main__":
    main()
