#!/usr/bin/env python3
"""field_decode_prefill_fp8.py: field question (d), decode/prefill divergence with an FP8 KV cache (vllm #54035):
the same query row as decode (Sq = 1) and as the last row of a causal prefill (Sq = kv_len), over kv_len around
kBlockN, for the kernel pairs of the config (docs/field-questions.md (d)).

  build/pasa-python experiments/python/field_decode_prefill_fp8.py [configs/field_decode_prefill_fp8.json]

Per pair, kv_len and seed: the share of the row's output elements whose bits differ between the two paths, the
largest |difference|, and each path's relative RMSE against pasa.golden (paired ratio decode / prefill).
Writes results/field/decode_prefill_fp8.csv (per seed) and results/field/decode_prefill_fp8_paired.csv.
"""
import os
import sys

import numpy as np

import pasa

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from field_common import ROOT, load_config, paired, rel_rmse, write_csv  # noqa: E402


def main():
    cfg_path = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "configs", "field_decode_prefill_fp8.json")
    c = load_config(cfg_path)
    N, D = c["shape"]["Nq"], c["shape"]["D"]
    rows, per = [], {}
    for n in c["kv_len"]:
        for seed in c["seeds"]:
            rng = np.random.default_rng([seed, n])
            qp, k, v = (rng.normal(0, 1, (1, N, s, D)) for s in (n, n, n))
            for name, (fmt, dec_k, pre_k) in c["pairs"].items():
                qf, kf, vf = (pasa.round(x, fmt) for x in (qp, k, v))
                qd = qf[:, :, -1:, :]
                g = np.asarray(pasa.golden(qd, kf, vf, format=fmt)["out"])
                dec = np.asarray(pasa.attention(qd, kf, vf, format=fmt, kernel=dec_k)[0], dtype=np.float64)
                pre = np.asarray(pasa.attention(qf, kf, vf, format=fmt, kernel=pre_k, causal=True)[0],
                                 dtype=np.float64)[:, :, -1:, :]
                diff = dec != pre
                ed, ep = rel_rmse(dec, g), rel_rmse(pre, g)
                rec = {"pair": name, "kv_len": n, "seed": seed, "differing_pct": f"{100 * diff.mean():.4g}",
                       "max_abs_diff": f"{np.abs(dec - pre).max():.4g}", "rel_rmse_decode": f"{ed:.6g}",
                       "rel_rmse_prefill": f"{ep:.6g}"}
                per.setdefault((name, n), {})[seed] = (100 * diff.mean(), ed, ep, np.abs(dec - pre).max())
                rows.append(rec)
        print(n, {name: np.mean([x[0] for x in per[(name, n)].values()]) for name in c["pairs"]}, flush=True)
    out = os.path.join(ROOT, "results", "field")
    write_csv(os.path.join(out, "decode_prefill_fp8.csv"), rows)
    summary = []
    for name in c["pairs"]:
        for n in c["kv_len"]:
            x = per[(name, n)]
            pct = np.array([a for a, _, _, _ in x.values()])
            r = {"pair": name, "kv_len": n, "seeds": len(x), "seeds_with_a_difference": int(np.sum(pct > 0)),
                 "differing_pct_mean": f"{pct.mean():.4g}", "differing_pct_min": f"{pct.min():.4g}",
                 "differing_pct_max": f"{pct.max():.4g}",
                 "max_abs_diff": f"{max(d for _, _, _, d in x.values()):.4g}"}
            if pct.max() > 0:
                r.update({f"rmse_decode/prefill_{kk}": vv for kk, vv in
                          paired({s: e for s, (_, e, _, _) in x.items()}, {s: e for s, (_, _, e, _) in x.items()}).items()})
            summary.append(r)
    write_csv(os.path.join(out, "decode_prefill_fp8_paired.csv"), summary)
    for r in summary:
        print(r)


if __name__ == "__main__":
    main()
