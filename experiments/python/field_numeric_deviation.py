#!/usr/bin/env python3
"""field_numeric_deviation.py: field question (f), Golden et al.'s numeric-deviation methodology (arXiv
2405.02803) with two references: a low-precision baseline attention (the paper's practice) and pasa.golden (exact),
paired over seeds (docs/field-questions.md (f)).

  build/pasa-python experiments/python/field_numeric_deviation.py [configs/field_numeric_deviation.json]

Per precision (the input format), shape and seed: Q, K, V N(0,1) rounded to the format; every method's output
and the low-precision reference's (a pasa.attention call, config "reference"). Per method and reference
('lowp' or 'golden'): the relative RMSE (Eq. 19) and the largest absolute difference (the paper's max deviation).
A method that is the reference itself has deviation 0 there and is left out of that reference's pairs. Writes
results/field/numeric_deviation.csv (per seed) and results/field/numeric_deviation_paired.csv (the config's
pairs, paired RMSE ratios under each reference, and whether the two references agree on the side of 1).
"""
import os
import sys

import numpy as np

import pasa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from field_common import ROOT, geomean, load_config, paired, rel_rmse, write_csv  # noqa: E402


def run(q, k, v, fmt, how):
    kw = {"kernel": how["kernel"]} if "kernel" in how else {"algorithm": how["algorithm"], "alloc": how["alloc"]}
    return np.asarray(pasa.attention(q, k, v, format=fmt, **kw)[0], dtype=np.float64)


def side(p):
    return "none" if p["differs"] == "no" else ("below" if float(p["hi95"]) < 1 else "above")


def main():
    cfg_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "configs", "field_numeric_deviation.json")
    c = load_config(cfg_path)
    rows, per = [], {}
    for fmt, pc in c["precisions"].items():
        for shp in c["shapes"]:
            S, D = shp["S"], shp["D"]
            for seed in c["seeds"]:
                rng = np.random.default_rng([seed, S, D])
                q, k, v = (pasa.round(rng.normal(0, 1, (1, c["heads"], S, D)), fmt) for _ in range(3))
                refs = {"golden": np.asarray(pasa.golden(q, k, v, format=fmt)["out"]),
                        "lowp": run(q, k, v, fmt, pc["reference"])}
                rec = {"format": fmt, "S": S, "D": D, "seed": seed}
                for name, how in pc["methods"].items():
                    o = run(q, k, v, fmt, how)
                    for rn, r in refs.items():
                        e, mx = rel_rmse(o, r), float(np.max(np.abs(o - r)))
                        rec[f"rmse_{name}_vs_{rn}"], rec[f"max_{name}_vs_{rn}"] = f"{e:.6g}", f"{mx:.6g}"
                        per.setdefault((fmt, S, D, name, rn), {})[seed] = e
                rows.append(rec)
                print(rec, flush=True)
    out = os.path.join(ROOT, "results", "field")
    write_csv(os.path.join(out, "numeric_deviation.csv"), rows)
    summary = []
    for fmt, pc in c["precisions"].items():
        for shp in c["shapes"]:
            S, D = shp["S"], shp["D"]
            for name in pc["methods"]:
                r = {"format": fmt, "S": S, "D": D, "method": name, "vs": ""}
                for rn in ("lowp", "golden"):
                    r[f"rmse_geomean_{rn}"] = f"{geomean(max(x, 1e-300) for x in per[(fmt, S, D, name, rn)].values()):.4g}"
                summary.append(r)
            for num, den in c["pairs"]:
                r = {"format": fmt, "S": S, "D": D, "method": num, "vs": den}
                sides = {}
                for rn in ("lowp", "golden"):
                    a, b = per[(fmt, S, D, num, rn)], per[(fmt, S, D, den, rn)]
                    if min(a.values()) == 0 or min(b.values()) == 0:  # one of them is this reference
                        r[f"{rn}_ratio"] = "reference"
                        continue
                    p = paired(a, b)
                    r.update({f"{rn}_{kk}": vv for kk, vv in p.items() if kk != "seeds"})
                    sides[rn] = side(p)
                if len(sides) == 2:
                    r["references_agree"] = "yes" if sides["lowp"] == sides["golden"] else "no"
                summary.append(r)
                print(r, flush=True)
    write_csv(os.path.join(out, "numeric_deviation_paired.csv"), summary)


if __name__ == "__main__":
    main()
