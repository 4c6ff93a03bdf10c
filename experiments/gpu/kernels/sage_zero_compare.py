#!/usr/bin/env python3
"""sage_zero_compare.py: pasa's SageAttention recipes against sage_zero_channel.py's captures, bit for bit.

  build/pasa-python experiments/gpu/kernels/sage_zero_compare.py CAPTURE_DIR --csv OUT.csv

Per case and kernel (sa1 -> sage1_triton, sa2 -> sage2_sm90): the NaN elements of the kernel and of the
emulation (counts, and whether they sit at the same positions), the share of output bits identical (a NaN
equal to a NaN), and the share of LSE values identical. The inputs are regenerated from the case seeds
(sage_zero_channel.make) and checked against the captured ones (or the manifest's input_sha256), so the captures' inputs need not be
kept: results/hardware/sage/ holds the D 64 cases' outputs and the manifest.
"""
import argparse
import csv
import hashlib
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from sage_zero_channel import make  # noqa: E402

import pasa  # noqa: E402

RECIPES = {"sa1": "sage1_triton", "sa2": "sage2_sm90"}


def compare(capdir, log=print):
    """The rows (one per case and kernel held in capdir's captures); raises where a regenerated input differs
    from the captured one (its bits, or the manifest's input_sha256)."""
    with open(os.path.join(capdir, "sage_zero_manifest.json" if os.path.exists(os.path.join(
            capdir, "sage_zero_manifest.json")) else "zero_groups_manifest.json")) as f:
        man = json.load(f)
    npz = [n for n in ("sage_zero_captures.npz", "zero_groups_captures.npz") if os.path.exists(os.path.join(capdir, n))]
    z = np.load(os.path.join(capdir, npz[0]))
    rows = []
    for c in man["cases"]:
        name = c["name"]
        q, k, v = make(c["zero"], c["dtype"], c["d"], c["seed"])
        for key, x in (("q", q), ("k", k), ("v", v)):
            b = x.view(np.uint16)
            ok = (np.array_equal(z[f"{name}__{key}"], b) if f"{name}__{key}" in z.files
                  else hashlib.sha256(b.tobytes()).hexdigest() == c["input_sha256"][key])
            if not ok:
                raise ValueError(f"{name}: the regenerated {key} differs from the captured one")
        for which, recipe in RECIPES.items():
            if c["results"].get(which, {}).get("status") != "ok" or f"{name}__{which}__out" not in z.files:
                continue
            got = z[f"{name}__{which}__out"]
            lse_k = z[f"{name}__{which}__lse"].astype(np.float64)
            fp16 = c["dtype"] == "fp16"
            args = (q, k, v) if fp16 else tuple(x.view(np.uint16) for x in (q, k, v))
            out, lse = pasa.attention(*args, kernel=recipe, **({} if fp16 else {"format": "bf16"}))
            out = np.asarray(out, dtype=np.float64)
            emu = out.astype(np.float16).view(np.uint16) if fp16 else pasa.encode(out, "bf16")
            ker_f = got.view(np.float16).astype(np.float64) if fp16 else pasa.decode(got, "bf16")
            nan_k, nan_e = np.isnan(ker_f), np.isnan(out)
            same = (emu == got) | (nan_k & nan_e)
            lse_e = np.asarray(lse, dtype=np.float64).astype(np.float32).astype(np.float64)
            rows.append({
                "case": name, "zero": c["zero"], "dtype": c["dtype"], "d": c["d"], "kernel": which, "recipe": recipe,
                "nan_kernel": int(nan_k.sum()), "nan_emulated": int(nan_e.sum()),
                "nan_positions_equal": bool(np.array_equal(nan_k, nan_e)),
                "nan_head1_kernel": int(nan_k[0, 1].sum()),
                "identical_bits_pct": f"{100.0 * same.mean():.4f}",
                "lse_identical_pct": f"{100.0 * np.mean((lse_e == lse_k) | (np.isnan(lse_e) & np.isnan(lse_k))):.4f}",
            })
            r = rows[-1]
            log(f"{name:24s} {which}: NaN kernel {r['nan_kernel']:6d} emulated {r['nan_emulated']:6d} "
                  f"same places {r['nan_positions_equal']}, bits {r['identical_bits_pct']} %, "
                  f"LSE {r['lse_identical_pct']} %")
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capdir")
    ap.add_argument("--csv", required=True)
    a = ap.parse_args()
    rows = compare(a.capdir)
    with open(a.csv, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)


if __name__ == "__main__":
    main()
