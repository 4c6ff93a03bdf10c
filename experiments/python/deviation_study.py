#!/usr/bin/env python3
"""The end-to-end deviation study of docs/deviation.md: the tiny LM of tiny_lm.py (results/deviation/tiny_lm.pt,
run in float64 so that only the attention differs) under FA-FP16/FP32, PASA-FP16, FA3-FP8 (block scales,
Hadamard, P offset 8) and the torch_flash_sm90 and sage1_triton kernel recipes (fp16 inputs), against the
golden (every attention call in the fp64 allocation), by pasa.torch.deviation.

Per seed, 16 windows of 64 bytes of the held-out text (numpy's default_rng(seed) picks the offsets); 10 seeds.
Paired comparisons over the seeds: geometric-mean ratios with the 95 % t-interval of the mean log ratio
(field_common.paired), differences with the t-interval of the mean difference. Then the paper's Appendix G in
kind: 200 bytes generated greedily under each from a fixed prompt and 9 held-out ones, against the golden's,
and the first position where they differ.

    build/pasa-python experiments/python/deviation_study.py          # ~1 minute; writes results/deviation/
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import field_common as fc  # noqa: E402
import tiny_lm  # noqa: E402

import pasa  # noqa: E402
import pasa.torch as pt  # noqa: E402

KERNELS = [
    {"label": "FA-FP16/FP32", "alloc": "fa_fp16_fp32"},
    {"label": "PASA-FP16", "alloc": "pasa_fp16", "algorithm": "pasa"},
    {"label": "FA3-FP8", "spec": {"name": "fa2", "alloc": "fa_fp8_h100",
                                  "quant": {"scales": "block", "hadamard": True, "p_offset": 8}}},
    {"label": "torch_flash_sm90", "kernel": "torch_flash_sm90", "dtype": torch.float16},
    {"label": "sage1_triton", "kernel": "sage1_triton", "dtype": torch.float16},
]
# (kernel, against): the comparisons the page makes
PAIRS = [("PASA-FP16", "FA-FP16/FP32"), ("FA3-FP8", "FA-FP16/FP32"), ("torch_flash_sm90", "FA-FP16/FP32"),
         ("sage1_triton", "torch_flash_sm90")]
PROMPT = "PASA's pre-processing "
THRESHOLD = 1e-3


def diff_interval(a, b):
    """mean of a[s] - b[s] with its 95 % t-interval."""
    d = np.array([a[s] - b[s] for s in sorted(a)])
    half = fc.T975[len(d) - 1] * d.std(ddof=1) / math.sqrt(len(d)) if np.any(d != d[0]) else 0.0
    return {"estimate": f"{d.mean():.4g}", "lo95": f"{d.mean() - half:.4g}", "hi95": f"{d.mean() + half:.4g}",
            "differs": "yes" if (d.mean() - half > 0 or d.mean() + half < 0) else "no"}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dir", default=os.path.join(fc.ROOT, "results", "deviation"))
    ap.add_argument("--seeds", type=int, default=10)
    ap.add_argument("--windows", type=int, default=16)
    ap.add_argument("--chars", type=int, default=200)
    ap.add_argument("--prompts", type=int, default=10, help="the fixed prompt and prompts-1 held-out ones")
    a = ap.parse_args()
    torch.set_num_threads(1)
    t0 = time.time()
    model, ck = tiny_lm.load(os.path.join(a.dir, "tiny_lm.pt"))
    held = np.frombuffer(open(os.path.join(a.dir, "heldout.txt"), "rb").read(), dtype=np.uint8)
    ctx = ck["config"]["ctx"]
    rows, by = [], {}
    for seed in range(a.seeds):
        off = np.random.default_rng(seed).integers(0, len(held) - ctx, a.windows)
        x = torch.tensor(np.stack([held[o:o + ctx] for o in off]).astype(np.int64))
        r = pt.deviation(model, x, KERNELS, threshold=THRESHOLD, threads=1)
        for k in r["kernels"]:
            row = {"seed": seed, "kernel": k["label"], "calls": k["calls"]}
            row.update({m: f"{k[m]:.6g}" for m in ("logit_rmse", "logit_max_err", "logit_rel_rmse",
                                                   "top1_agreement", "kl_mean", "kl_max", "perplexity",
                                                   "perplexity_change")})
            row["perplexity_golden"] = f"{r['reference']['perplexity']:.6g}"
            for i, lay in enumerate(k["layers"]):
                row[f"layer{i}_rel_rmse"] = f"{lay['rel_rmse']:.4g}"
            row["first_layer_over"] = "" if k["first_layer_over"] is None else k["first_layer_over"]
            rows.append(row)
            by.setdefault(k["label"], {})[seed] = k
        print(f"seed {seed}: done ({time.time() - t0:.0f} s)", flush=True)
    fc.write_csv(os.path.join(a.dir, "per_seed.csv"), rows)

    summary = []
    for e in KERNELS:
        ks = list(by[e["label"]].values())
        s = {"kernel": e["label"], "seeds": len(ks)}
        for m in ("logit_rmse", "logit_max_err", "top1_agreement", "kl_mean", "kl_max", "perplexity_change"):
            v = np.array([k[m] for k in ks])
            s[f"{m}_mean"], s[f"{m}_min"], s[f"{m}_max"] = f"{v.mean():.4g}", f"{v.min():.4g}", f"{v.max():.4g}"
        for i in range(len(ks[0]["layers"])):
            s[f"layer{i}_rel_rmse_mean"] = f"{np.mean([k['layers'][i]['rel_rmse'] for k in ks]):.4g}"
        firsts = [k["first_layer_over"] for k in ks]
        s["first_layer_over"] = "none" if all(f is None for f in firsts) else \
            min(f for f in firsts if f is not None)
        summary.append(s)
    fc.write_csv(os.path.join(a.dir, "summary.csv"), summary)

    paired = []
    for num, den in PAIRS:
        for m in ("logit_rmse", "kl_mean"):
            p = fc.paired({s: k[m] for s, k in by[num].items()}, {s: k[m] for s, k in by[den].items()})
            paired.append({"kernel": num, "against": den, "metric": m, "kind": "ratio", "seeds": p["seeds"],
                           "estimate": p["ratio"], "lo95": p["lo95"], "hi95": p["hi95"], "differs": p["differs"]})
        for m in ("top1_agreement", "perplexity_change"):
            p = diff_interval({s: k[m] for s, k in by[num].items()}, {s: k[m] for s, k in by[den].items()})
            paired.append({"kernel": num, "against": den, "metric": m, "kind": "difference", "seeds": a.seeds,
                           "estimate": p.pop("estimate"), **p})
    fc.write_csv(os.path.join(a.dir, "paired.csv"), paired)

    # Appendix G in kind: the fixed prompt, then 32-byte prompts from the held-out text (default_rng(100 + i))
    prompts = [PROMPT.encode()] + [bytes(held[o:o + 32]) for o in
                                   (int(np.random.default_rng(100 + i).integers(0, len(held) - 32))
                                    for i in range(a.prompts - 1))]
    gens, grows = [], []
    for j, pr in enumerate(prompts):
        prompt = torch.tensor(list(pr), dtype=torch.long)
        golden = pt.generate(model, prompt, a.chars, pt.REFERENCE, ctx=ctx, threads=1)
        g = {"prompt": pr.decode("utf-8", "replace"), "golden": bytes(golden).decode("utf-8", "replace"),
             "kernels": []}
        for e in KERNELS:
            ids = pt.generate(model, prompt, a.chars, e, ctx=ctx, threads=1)
            first = next((i for i, (u, w) in enumerate(zip(ids, golden)) if u != w), None)
            g["kernels"].append({"kernel": e["label"], "first_divergence": first,
                                 "text": bytes(ids).decode("utf-8", "replace")})
            grows.append({"prompt": j, "kernel": e["label"], "first_divergence": "" if first is None else first,
                          "same_bytes": sum(u == w for u, w in zip(ids, golden))})
        gens.append(g)
        print(f"generation prompt {j}: done ({time.time() - t0:.0f} s)", flush=True)
    fc.write_csv(os.path.join(a.dir, "generation.csv"), grows)
    with open(os.path.join(a.dir, "generation.json"), "w") as f:
        json.dump({"chars": a.chars, "window": ctx, "prompts": gens}, f, indent=1, ensure_ascii=False)
        f.write("\n")
    with open(os.path.join(a.dir, "study.json"), "w") as f:
        json.dump({"checkpoint": "tiny_lm.pt", "corpus_sha256": ck["corpus_sha256"], "commit": ck["commit"],
                   "seeds": a.seeds, "windows_per_seed": a.windows, "window": ctx, "threshold": THRESHOLD,
                   "model_dtype": "float64", "kernels": [{k: (str(v) if k == "dtype" else v) for k, v in e.items()}
                                                         for e in KERNELS],
                   "torch": torch.__version__, "pasa": getattr(pasa, "__version__", "?"),
                   "seconds": round(time.time() - t0, 1)}, f, indent=1)
        f.write("\n")
    print(f"deviation_study: wrote {a.dir}/per_seed.csv, summary.csv, paired.csv, generation.csv/.json, study.json "
          f"({time.time() - t0:.0f} s)")


if __name__ == "__main__":
    main()
