#!/usr/bin/env python3
"""field_fa3_fp8_long_context.py: field question (a), FA3-FP8's long-context collapse (vllm #23813): RMSE and a
needle-retrieval signal against the context length, for fa3_fp8_sm90's chained e8m13 P·V accumulation and PR
#2250's two-level one, paired over seeds (docs/field-questions.md (a); extends fa3_fp8_two_level.py's 3 seeds).

  build/pasa-python experiments/python/field_fa3_fp8_long_context.py [configs/field_fa3_fp8_long_context.json]
      [--from-csv]   (the paired summary again from the committed per-seed file, in a second)

Per seed, V distribution and context length: Q, K ~ U(-1, 1), V ~ U(0, 1) or U(-1, 1), rounded to e4m3 first so
that the golden and both kernels see one set of values. Rows 0-3 give the relative RMSE (Eq. 19) against
pasa.golden. Rows 4-7 each get a planted needle key at a fixed fraction of the context: key = e4m3(t·sign(q_i))
with t set so that its weight is about 1/2, value (1 + s)/2 (U(0,1) V) or s (U(-1,1) V) for a balanced ±1 vector
s. Then r = <s, O>·2/D (or /D) is the needle's weight as O carries it (constant channels cancel, since Σs = 0),
and the retrieval error is |r − r_golden| / r_golden (the recovery r / r_golden also per needle position: 0 is the
first key, processed last in the kernel's reverse order).
Writes results/field/fa3_fp8_long_context.csv (per seed) and results/field/fa3_fp8_long_context_paired.csv.
"""
import os
import sys

import numpy as np

import pasa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from field_common import ROOT, geomean, load_config, paired, rel_rmse, write_csv  # noqa: E402

E4M3 = "fp8_e4m3fn"


def make_case(seed, skv, vdist, c):
    Sq, D = c["shape"]["Sq"], c["shape"]["D"]
    rng = np.random.default_rng([seed, skv, 0 if vdist == "U(0,1)" else 1])
    q = pasa.round(rng.uniform(-1, 1, (1, 1, Sq, D)), E4M3)
    k = pasa.round(rng.uniform(-1, 1, (1, 1, skv, D)), E4M3)
    v = pasa.round(rng.uniform(0 if vdist == "U(0,1)" else -1, 1, (1, 1, skv, D)), E4M3)
    scale = 1.0 / np.sqrt(D)
    signs = {}
    for row, frac in zip(c["needle_rows"], c["needle_position"]):
        p = int(round(frac * (skv - 1)))
        qi = q[0, 0, row]
        s = np.array([1.0] * (D // 2) + [-1.0] * (D // 2))
        rng.shuffle(s)
        others = np.delete(k[0, 0] @ qi * scale, p)
        w = c["needle_weight"]  # e^{s_n} = w/(1 − w)·Σ_{j≠p} e^{s_j}
        target = np.log(w / (1 - w)) + np.log(np.sum(np.exp(others - others.max()))) + others.max()
        t = target / (np.sum(np.abs(qi)) * scale)
        k[0, 0, p] = pasa.round(t * np.sign(qi), E4M3)
        v[0, 0, p] = (1 + s) / 2 if vdist == "U(0,1)" else s
        signs[row] = (p, s)
    return q, k, v, signs


def signal(o, row, s, vdist, D):
    return float(np.dot(s, np.asarray(o, dtype=np.float64)[0, 0, row])) * (2.0 if vdist == "U(0,1)" else 1.0) / D


def main():
    args = [a for a in sys.argv[1:] if not a.startswith("--")]
    cfg_path = args[0] if args else os.path.join(ROOT, "configs", "field_fa3_fp8_long_context.json")
    c = load_config(cfg_path)
    D = c["shape"]["D"]
    plain = [r for r in range(c["shape"]["Sq"]) if r not in c["needle_rows"]]
    rows, per = [], {}
    if "--from-csv" in sys.argv:  # the summary again from the per-seed file
        import csv
        rows = list(csv.DictReader(open(os.path.join(ROOT, "results", "field", "fa3_fp8_long_context.csv"))))
        for x in rows:
            x["skv"], x["seed"] = int(x["skv"]), int(x["seed"])
            for name in c["kernels"]:
                per.setdefault((x["v"], x["skv"], name), {})[x["seed"]] = tuple(
                    float(x[f"{m}_{name}"]) for m in ("rel_rmse", "retrieval_err", "recovery"))
    for vdist in ([] if rows else c["v"]):
        for skv in c["skv"]:
            for seed in c["seeds"]:
                q, k, v, signs = make_case(seed, skv, vdist, c)
                g = np.asarray(pasa.golden(q, k, v, format=E4M3)["out"])
                sc = (k[0, 0] @ q[0, 0].T) / np.sqrt(D)  # (skv, Sq): the needles' exact weights
                wts = np.exp(sc - sc.max(axis=0)) / np.sum(np.exp(sc - sc.max(axis=0)), axis=0)
                rec = {"v": vdist, "skv": skv, "seed": seed}
                for name, kern in c["kernels"].items():
                    o, _ = pasa.attention(q, k, v, format=E4M3, kernel=kern)
                    o = np.asarray(o, dtype=np.float64)
                    rmse = rel_rmse(o[0, 0, plain], g[0, 0, plain])
                    errs, recs = [], []
                    for (row, (p, s)), frac in zip(signs.items(), c["needle_position"]):
                        rg, rk = signal(g, row, s, vdist, D), signal(o, row, s, vdist, D)
                        errs.append(abs(rk - rg) / abs(rg))
                        recs.append(rk / rg)
                        rec[f"recovery_{name}_at_{frac}"] = f"{rk / rg:.6g}"
                    rec[f"rel_rmse_{name}"] = f"{rmse:.6g}"
                    rec[f"retrieval_err_{name}"] = f"{np.mean(errs):.6g}"
                    rec[f"recovery_{name}"] = f"{np.mean(recs):.6g}"
                    per.setdefault((vdist, skv, name), {})[seed] = (rmse, float(np.mean(errs)), float(np.mean(recs)))
                rec["needle_weight_min"] = f"{min(wts[p, r] for r, (p, _) in signs.items()):.4g}"
                rec["needle_weight_max"] = f"{max(wts[p, r] for r, (p, _) in signs.items()):.4g}"
                rows.append(rec)
                print(rec, flush=True)
    out = os.path.join(ROOT, "results", "field")
    if "--from-csv" not in sys.argv:
        write_csv(os.path.join(out, "fa3_fp8_long_context.csv"), rows)
    summary = []
    for vdist in c["v"]:
        for skv in c["skv"]:
            ch, tl = per[(vdist, skv, "chained")], per[(vdist, skv, "two_level")]
            for i, metric in enumerate(("rel_rmse", "retrieval_err")):
                r = {"v": vdist, "skv": skv, "metric": metric,
                     "chained_geomean": f"{geomean(x[i] for x in ch.values()):.4g}",
                     "two_level_geomean": f"{geomean(x[i] for x in tl.values()):.4g}",
                     "chained_recovery": f"{np.mean([x[2] for x in ch.values()]):.4g}",
                     "two_level_recovery": f"{np.mean([x[2] for x in tl.values()]):.4g}"}
                sel = [x for x in rows if x["v"] == vdist and x["skv"] == skv]
                for frac in c["needle_position"]:
                    rec_at = {name: {x["seed"]: float(x[f"recovery_{name}_at_{frac}"]) for x in sel}
                              for name in c["kernels"]}
                    for name in c["kernels"]:
                        r[f"{name}_recovery_at_{frac}"] = f"{np.mean(list(rec_at[name].values())):.4g}"
                    pr = paired(rec_at["chained"], rec_at["two_level"])  # recovery chained / two-level, paired
                    r[f"recovery_ratio_at_{frac}"] = f"{pr['ratio']} ({pr['lo95']}-{pr['hi95']})"
                r.update({f"chained/two_level_{k}": v for k, v in
                          paired({s: x[i] for s, x in ch.items()}, {s: x[i] for s, x in tl.items()}).items()})
                summary.append(r)
                print(r, flush=True)
    write_csv(os.path.join(out, "fa3_fp8_long_context_paired.csv"), summary)


if __name__ == "__main__":
    main()
