#!/usr/bin/env python3
"""make_inputs.py: the PASA paper's benchmark inputs, generated on the GPU, saved as .npy for pasa-hwcompare.

What it does
  Reads the grids of configs/fig9_*.json, configs/fig10_*.json and configs/table4_*.json (keys "grid"
  {x0, Am} as a number, a list, or {"from", "to", "step"}; "problem.generator.kind"; "problem.shape"), takes
  the union of their (generator, x0, Am) points, and for every point and seed draws Q, K, V with torch on
  the GPU from torch.Generator(device).manual_seed(seed), in the order q, k, v:
    uniform [PASA Eq. 17]: U(x0 - Am, x0 + Am)                      (torch.rand in float64)
    hybrid  [PASA Eq. 18]: N(x0, 1) + N(0, Am^2) * Bernoulli(0.001)  (torch.randn / torch.rand < 0.001, float64)
  The float64 values are converted to fp16 and to bf16 by tensor.to(dtype) (round to nearest even; torch goes
  through float32 on the way, which does not matter here: both sides read the same stored values):
    DIR/<case>/{q,k,v}.npy       float16 (B, N, S, D)
    DIR/<case>/{q,k,v}_bf16.npy  uint16 bit patterns of bf16 (NumPy has no bfloat16)
  and DIR/manifest.json lists every case: name, generator, x0, Am, seed, shape, dtype, files.
  The generator is torch's, not the toolkit's (boost); both compare on these identical inputs.

How to run (GPU machine, PyTorch installed; about 1 s per case, ~90 cases, 3 seeds: < 2 min, 2.8 GB)
  python3 experiments/gpu/make_inputs.py --out DIR [--configs configs] [--seeds 3] [--shape 1,16,1280,128]
                                         [--device cuda] [--only-point uniform,20,0.5]
"""
import argparse
import glob
import json
import os
import sys

import numpy as np
import torch


def grid_values(v, where):
    """A grid axis: a number, a list of numbers, or {"from", "to", "step"} (inclusive)."""
    if isinstance(v, (int, float)):
        return [float(v)]
    if isinstance(v, list):
        return [float(x) for x in v]
    if isinstance(v, dict) and {"from", "to", "step"} <= v.keys():
        out, x, i = [], float(v["from"]), 0
        while x <= float(v["to"]) + 1e-9:
            out.append(x)
            i += 1
            x = float(v["from"]) + i * float(v["step"])
        return out
    sys.exit(f"make_inputs: {where}: grid axis must be a number, a list or {{from, to, step}}, got {v!r}")


def paper_points(config_dir):
    """The union of the (kind, x0, Am) points of the Fig. 9/10 and Table 4 configs, and their shape."""
    files = sorted(glob.glob(os.path.join(config_dir, "fig9_*.json")) + glob.glob(os.path.join(config_dir, "fig10_*.json"))
                   + glob.glob(os.path.join(config_dir, "table4_*.json")))
    if not files:
        sys.exit(f"make_inputs: no fig9_*.json, fig10_*.json or table4_*.json in {config_dir}")
    points, shape = set(), None
    for f in files:
        with open(f) as h:
            c = json.load(h)
        kind = c["problem"]["generator"]["kind"]
        if kind not in ("uniform", "hybrid"):
            sys.exit(f"make_inputs: {f}:/problem/generator/kind: expected uniform or hybrid, got {kind!r}")
        sh = c["problem"]["shape"]
        shape = shape or (sh["B"], sh["Nq"], sh["Sq"], sh["D"])
        for x0 in grid_values(c["grid"]["x0"], f + ":/grid/x0"):
            for am in grid_values(c["grid"]["Am"], f + ":/grid/Am"):
                points.add((kind, x0, am))
    return sorted(points), shape, files


def num(x):
    """A number as it appears in a case name: 20, 0.5 (no trailing .0)."""
    return f"{x:g}"


def draw(kind, x0, am, shape, gen, device):
    """One tensor in float64 [PASA Eq. 17 / Eq. 18]."""
    if kind == "uniform":  # Eq. 17: U(x0 - Am, x0 + Am)
        u = torch.rand(shape, generator=gen, device=device, dtype=torch.float64)
        return (x0 - am) + (2.0 * am) * u
    # Eq. 18: N(x0, 1) + N(0, Am^2) * Bernoulli(0.001)
    base = torch.randn(shape, generator=gen, device=device, dtype=torch.float64) + x0
    spike = torch.randn(shape, generator=gen, device=device, dtype=torch.float64) * am
    pick = torch.rand(shape, generator=gen, device=device, dtype=torch.float64) < 0.001
    return base + spike * pick


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, help="output folder (created)")
    ap.add_argument("--configs", default="configs", help="folder with fig9_*.json, fig10_*.json, table4_*.json")
    ap.add_argument("--seeds", type=int, default=3, help="seeds 1..N (default 3)")
    ap.add_argument("--shape", default=None, help="B,N,S,D (default: the configs' shape, (1,16,1280,128))")
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--only-point", default=None, help="kind,x0,Am: one grid point only (a quick test)")
    a = ap.parse_args()
    points, shape, files = paper_points(a.configs)
    if a.shape:
        shape = tuple(int(x) for x in a.shape.split(","))
        if len(shape) != 4:
            sys.exit(f"make_inputs: --shape must be B,N,S,D, got {a.shape!r}")
    if a.only_point:
        k, x0, am = a.only_point.split(",")
        points = [(k, float(x0), float(am))]
    os.makedirs(a.out, exist_ok=True)
    cases = []
    for kind, x0, am in points:
        for seed in range(1, a.seeds + 1):
            name = f"{kind}_x0_{num(x0)}_Am_{num(am)}_seed_{seed}"
            d = os.path.join(a.out, name)
            os.makedirs(d, exist_ok=True)
            gen = torch.Generator(device=a.device)
            gen.manual_seed(seed)
            for t in ("q", "k", "v"):
                x = draw(kind, x0, am, shape, gen, a.device)
                h = x.to(torch.float16)  # RNE (via float32)
                b = x.to(torch.bfloat16)  # RNE (via float32)
                if not torch.isfinite(h).all():
                    sys.exit(f"make_inputs: case {name}: {t} overflows fp16")
                np.save(os.path.join(d, f"{t}.npy"), h.cpu().numpy())
                np.save(os.path.join(d, f"{t}_bf16.npy"), b.view(torch.int16).cpu().numpy().view(np.uint16))
            cases.append({"name": name, "generator": kind, "x0": x0, "Am": am, "seed": seed, "shape": list(shape),
                          "dtype": "fp16", "files": {"fp16": ["q.npy", "k.npy", "v.npy"],
                                                     "bf16": ["q_bf16.npy", "k_bf16.npy", "v_bf16.npy"]}})
            print(f"{name}", flush=True)
    manifest = {"generator_source": "torch " + torch.__version__ + " on " + a.device, "configs": files,
                "bf16_storage": "uint16 bit patterns", "cases": cases}
    with open(os.path.join(a.out, "manifest.json"), "w") as h:
        json.dump(manifest, h, indent=1)
    print(f"{len(cases)} cases in {a.out}")


if __name__ == "__main__":
    main()
