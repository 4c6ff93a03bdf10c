#!/usr/bin/env python3
"""One row of the PASA paper's Table 4 and one error attribution, from Python.

Table 4, row 3: uniform inputs (Eq. 17), x0 = 20, Am = 20, the paper's shape (1, 16, 1280, 128), seeds 1-3:
the NaN % of FA-FP16/FP32's output (paper: 8.14 %), and PASA-FP16 and FA-FP32 (paper: 0 %). Then which
rounding stage makes PASA-FP16's error at uniform x0 = 20, Am = 0.5 (docs/attribution.md), on 2 of the 16
heads (36 runs of the algorithm: all 16 take 8 times as long). The same numbers as `pasa-tables`
(results/table4.csv) and `pasa-attribute` on the same problems.

Run (about 75 s of CPU; 3 min on a loaded 2-core machine):  build/pasa-python experiments/python/table4_and_attribution.py [--threads N]
"""
import argparse

import numpy as np

import pasa

ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
ap.add_argument("--threads", type=int, default=None, help="worker threads (default: all cores)")
ap.add_argument("--seq", type=int, default=1280, help="sequence length (the paper's: 1280)")
ap.add_argument("--attribution-heads", type=int, default=2, help="heads of the attribution's problem (paper: 16)")
args = ap.parse_args()
shape = {"B": 1, "Nq": 16, "Sq": args.seq, "D": 128}
configs = {"FA-FP32": ("fa2", "fa_fp32"), "FA-FP16/FP32": ("fa2", "fa_fp16_fp32"), "PASA-FP16": ("pasa", "pasa_fp16")}

print("Table 4, row 3: uniform x0 = 20, Am = 20, NaN % of the output (seeds 1-3)")
nan_pct = {label: [] for label in configs}
for seed in (1, 2, 3):
    inputs = pasa.generate({"shape": shape, "format": "fp16", "seed": seed,
                            "generator": {"kind": "uniform", "x0": 20, "am": 20}}, threads=args.threads)
    for label, (algorithm, alloc) in configs.items():
        out, _ = pasa.attention(**inputs, algorithm=algorithm, alloc=alloc, threads=args.threads)
        nan_pct[label].append(100 * np.isnan(out).mean())
for label, v in nan_pct.items():
    se = np.std(v, ddof=1) / np.sqrt(len(v))
    print(f"  {label:<13} {np.mean(v):6.3f} % ± {se:.3f} (seeds: {', '.join(f'{x:.3f}' for x in v)})")

print(f"Attribution: PASA-FP16 at uniform x0 = 20, Am = 0.5 (seed 1, {args.attribution_heads} heads); "
      "RMSE with one stage lifted to fp64")
a = pasa.attribute({"shape": dict(shape, Nq=args.attribution_heads), "format": "fp16", "seed": 1, "generator": {"kind": "uniform", "x0": 20, "am": 0.5}},
                   algorithm="pasa", alloc="pasa_fp16", threads=args.threads)
print(f"  all stages as allocated: RMSE {a['stages'][0]['rmse_base']:.3e}")
for s in sorted(a["stages"], key=lambda s: -s["share"])[:4]:
    print(f"  {s['stage']:<7} ({s['format']}) lifted: RMSE {s['rmse_lifted']:.3e}, share {100 * s['share']:5.1f} %")
