#!/usr/bin/env python3
"""Cloud maps like the PASA paper's Figs. 11-14 (Appendix F), from the toolkit's own data: for one head, the
keys K and the shifted keys K' = M·K (Eq. 11, M of Eq. 10 with 1/α inside, blocks of s2 keys) over
(sequence, head dimension) (Figs. 11/12), and the scores S = QKᵀ (unscaled, as FA-FP16/FP32 stores them) and
S' = QK'ᵀ (as PASA stores them) over (query, key) (Figs. 13/14), with the ranges and fp16 overflow counts
pasa.range_stats gives (the numbers pasa-attn --ranges prints).

Two cases (the paper's are Qwen2-7B and SVD-IMG2VID heads, which we do not have):
  resonance  the paper's overflow mechanism of §3.3.2 drawn by the resonance generator: Q and K oscillate
             along D with a phase lag of 180° (scores ≈ −am²·D/2), K with a bias growing along the sequence
  real       the head with the largest |S| of the small model trained here (results/real/capture, 7.6 M
             parameters, docs/real-models.md): a small model, not Qwen2; its scores do not overflow fp16
Also writes the ranges of every (layer, head) of the capture to OUT/real_ranges.csv.

Run:  build/pasa-python experiments/python/cloud_maps.py [OUT]   (default results/clouds; needs gnuplot;
      about 5 s)
"""
import csv
import math
import os
import subprocess
import sys
import tempfile

import numpy as np

import pasa

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
OUT = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "results", "clouds")
BETA, S2 = 0.984497, 128
CAPTURE = os.path.join(ROOT, "results", "real", "capture")


def shifted(inputs, head):
    """K, K' (per block of S2 keys), S, S' of one query head, in float64; causal: hidden scores NaN."""
    q, k = inputs["q"][0, head], inputs["k"][0, head // (inputs["q"].shape[1] // inputs["k"].shape[1])]
    scale = inputs["scale"] or 1 / math.sqrt(q.shape[1])
    kp = np.empty_like(k)
    for k0 in range(0, k.shape[0], S2):
        block = k[k0:k0 + S2]
        kp[k0:k0 + S2] = (block - BETA * block.mean(axis=0)) * scale
    s, sp = q @ k.T, q @ kp.T
    if inputs["causal"]:
        sq, skv = s.shape
        hidden = np.arange(skv)[None, :] > np.arange(sq)[:, None] + skv - sq
        s[hidden] = sp[hidden] = np.nan
    return k, kp, s, sp


def draw(name, title, inputs, head, tmp):
    r = pasa.range_stats(**inputs, beta=BETA, s2=S2)[head]
    k, kp, s, sp = shifted(inputs, head)
    files = {}
    for key, m in (("k", k), ("kp", kp), ("s", s), ("sp", sp)):
        files[key] = os.path.join(tmp, f"{name}_{key}.bin")
        np.asarray(m, dtype=np.float32).tofile(files[key])

    def rng(a, b):
        return f"[{a:.4g}, {b:.4g}]"
    panels = [
        ("k", k.shape, f"K {rng(r['k_min'], r['k_max'])}", "head dimension", "key position"),
        ("kp", kp.shape, f"K' = M·K {rng(r['kp_min'], r['kp_max'])}", "head dimension", "key position"),
        ("s", s.shape, f"S = QK^T {rng(r['s_min'], r['s_max'])}, {r['s_overflow']} of {r['scores']} overflow fp16",
         "key", "query"),
        ("sp", sp.shape, f"S' = QK'^T {rng(r['sp_min'], r['sp_max'])}, {r['sp_overflow']} overflow fp16", "key", "query")]
    gp = [f"set terminal pngcairo size 1000,800 font ',9'", f"set output '{os.path.join(OUT, name + '.png')}'",
          "set palette defined (0 '#313695', 1 '#4575b4', 2 '#abd9e9', 3 '#ffffbf', 4 '#fdae61', 5 '#d73027', 6 '#a50026')",
          "set datafile missing NaN", "set yrange [*:*] reverse", "unset key",
          f"set multiplot layout 2,2 title \"{title} (β = {BETA}, s2 = {S2})\""]
    for key, (rows, cols), t, xl, yl in panels:
        gp += [f"set title \"{t}\"", f"set xlabel '{xl}'", f"set ylabel '{yl}'", f"set xrange [0:{cols}]",
               f"set yrange [{rows}:0]",
               f"plot '{files[key]}' binary array=({cols},{rows}) format='%float' origin=(0,0) with image"]
    gp.append("unset multiplot")
    subprocess.run(["gnuplot"], input="\n".join(gp), text=True, check=True)
    print(f"wrote {os.path.join(OUT, name + '.png')}: head {head}, K {rng(r['k_min'], r['k_max'])} -> "
          f"K' {rng(r['kp_min'], r['kp_max'])}, S {rng(r['s_min'], r['s_max'])} ({r['s_overflow']} overflow) -> "
          f"S' {rng(r['sp_min'], r['sp_max'])} ({r['sp_overflow']})")
    return r


os.makedirs(OUT, exist_ok=True)
rows = []
with tempfile.TemporaryDirectory() as tmp:
    resonance = {"shape": {"B": 1, "Nq": 1, "Sq": 512, "D": 128}, "format": "fp16", "seed": 1,
                 "generator": {"kind": "resonance", "x0": 0, "am": 40, "wavelength": 8, "phase_deg": 0, "noise": 1},
                 "k": {"phase_deg": 180, "seq_bias": 30}}
    r = draw("resonance", "resonance generator (§3.3.2): Q, K in antiphase along D, K biased along the sequence",
             pasa.generate(resonance), 0, tmp)
    rows.append({"case": "resonance", "layer": "", **r})
    layers = []
    for layer in range(len(__import__("json").load(open(os.path.join(CAPTURE, "index.json")))["layers"])):
        inputs = pasa.generate({"capture": {"dir": CAPTURE, "layer": layer}})
        for h in pasa.range_stats(**inputs, beta=BETA, s2=S2):
            layers.append({"case": "real", "layer": layer, **h})
    top = max(layers, key=lambda h: max(abs(h["s_min"]), abs(h["s_max"])))
    r = draw("real", f"small model trained here (results/real/capture), layer {top['layer']}, head {top['head']}, causal",
             pasa.generate({"capture": {"dir": CAPTURE, "layer": top["layer"]}}), top["head"], tmp)
    rows.append({"case": "real", "layer": top["layer"], **r})
keys = ["case", "layer", "batch", "head", "k_min", "k_max", "kp_min", "kp_max", "s_min", "s_max", "sp_min", "sp_max",
        "scores", "s_overflow", "sp_overflow"]
for name, table in (("cloud_ranges.csv", rows), ("real_ranges.csv", layers)):
    with open(os.path.join(OUT, name), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=keys)
        w.writeheader()
        for row in table:
            w.writerow({k: (repr(v) if isinstance(v, float) else v) for k, v in row.items()})
    print(f"wrote {os.path.join(OUT, name)}")
