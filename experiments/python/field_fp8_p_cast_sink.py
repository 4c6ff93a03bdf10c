#!/usr/bin/env python3
"""field_fp8_p_cast_sink.py: field question (c), FP8 P-cast underflow and attention-sink collapse: the P-Cast
paper's S = 2^8 scaling of P before the e4m3 cast (fa3_fp8_sm90's P offset 8) and reverse KV order, each paired
against its absence on inputs with an attention sink (docs/field-questions.md (c)).

  build/pasa-python experiments/python/field_fp8_p_cast_sink.py [configs/field_fp8_p_cast_sink.json]

Inputs (e4m3): Q, K U(-1,1), V U(0,1); q[..., 0] = 2, k[j, 0] = 0 except the sink k[0, 0] = B / (2·scale·log2 e),
so that key 0's score is B log2 units above the others (before e4m3 rounding; the golden sees the rounded inputs).
The sink's value row is 0 and v[j, D-1] = 1 for every other key, so that output channel D-1 is the attention mass
of the non-sink keys: 'mass' is its mean over rows divided by the golden's (1: no weight lost). Per kernel: the
relative RMSE against pasa.golden and that mass. Writes results/field/fp8_p_cast_sink.csv (per seed) and
results/field/fp8_p_cast_sink_paired.csv (paired RMSE ratios, the config's pairs).
"""
import os
import sys

import numpy as np

import pasa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from field_common import ROOT, geomean, load_config, paired, rel_rmse, write_csv  # noqa: E402

E4M3 = "fp8_e4m3fn"


def make_case(seed, skv, boost, c):
    N, Sq, D = c["shape"]["Nq"], c["shape"]["Sq"], c["shape"]["D"]
    rng = np.random.default_rng([seed, skv, int(boost * 4)])
    q = rng.uniform(-1, 1, (1, N, Sq, D))
    k = rng.uniform(-1, 1, (1, N, skv, D))
    v = rng.uniform(0, 1, (1, N, skv, D))
    scale = 1.0 / np.sqrt(D)
    q[..., 0], k[..., 0] = 2.0, 0.0
    k[:, :, 0, 0] = boost / (2.0 * scale * np.log2(np.e))  # score shift q0·k00·scale nats = boost log2 units
    v[:, :, 0, :] = 0.0
    v[:, :, 1:, D - 1] = 1.0
    return tuple(pasa.round(x, E4M3) for x in (q, k, v))


def main():
    cfg_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "configs", "field_fp8_p_cast_sink.json")
    c = load_config(cfg_path)
    points = [(skv, b) for skv in c["skv"] for b in c["sink_boost"]]
    rows, per = [], {}
    for skv, boost in points:
        for seed in c["seeds"]:
            q, k, v = make_case(seed, skv, boost, c)
            g = np.asarray(pasa.golden(q, k, v, format=E4M3)["out"])
            gm = float(np.mean(g[..., -1]))
            rec = {"skv": skv, "sink_boost": boost, "seed": seed, "golden_nonsink_mass": f"{gm:.6g}"}
            for name, kern in c["kernels"].items():
                o = np.asarray(pasa.attention(q, k, v, format=E4M3, kernel=kern)[0], dtype=np.float64)
                e, mass = rel_rmse(o, g), float(np.mean(o[..., -1]) / gm)
                rec[f"rel_rmse_{name}"], rec[f"mass_{name}"] = f"{e:.6g}", f"{mass:.5g}"
                per.setdefault((skv, boost, name), {})[seed] = (e, mass)
            rows.append(rec)
            print(rec, flush=True)
    out = os.path.join(ROOT, "results", "field")
    write_csv(os.path.join(out, "fp8_p_cast_sink.csv"), rows)
    summary = []
    for skv, boost in points:
        for name in c["kernels"]:
            x = per[(skv, boost, name)]
            ms = [m for _, m in x.values()]
            summary.append({"skv": skv, "sink_boost": boost, "kernel": name, "vs": "",
                            "rel_rmse_geomean": f"{geomean(e for e, _ in x.values()):.4g}",
                            "mass_mean": f"{np.mean(ms):.4g}", "mass_min": f"{min(ms):.4g}",
                            "mass_max": f"{max(ms):.4g}"})
        for num, den in c["pairs"]:
            a, b = per[(skv, boost, num)], per[(skv, boost, den)]
            r = {"skv": skv, "sink_boost": boost, "kernel": num, "vs": den}
            r.update(paired({s: e for s, (e, _) in a.items()}, {s: e for s, (e, _) in b.items()}))
            summary.append(r)
            print(r, flush=True)
    write_csv(os.path.join(out, "fp8_p_cast_sink_paired.csv"), summary)


if __name__ == "__main__":
    main()
