#!/usr/bin/env python3
"""sage_compare.py: pasa's SageAttention recipes against the captures of sage_capture.py, bit for bit.

  build/pasa-python experiments/gpu/kernels/sage_compare.py CAPTURE_DIR [--recipe sage1_triton] [--which sa1]
                    [--csv OUT.csv] [--only TEXT] [--override JSON]

Per case: the quantised Q and K (elements and scales) against pasa.block_quantise under the recipe's scheme,
the share of output bits identical, the largest ulp distance, and the RMSE of the emulation and of the kernel
against a float64 reference (softmax(QKᵀ·scale)·V on the same inputs). Then the dot16 probes (the fp16-
accumulated tile) against pasa.gemm under the recipe's P·V model, and Triton's fp32 division and exp2.
"""
import argparse
import glob
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from kernel_inputs import (bits_to_float64, identity_summary, make_inputs, sha256_hex, ulp_distance,  # noqa: E402
                           write_rows_csv)

import pasa  # noqa: E402
from pasa_capture import reference_attention  # noqa: E402


def load(capdir):
    arrays = {}
    for f in sorted(glob.glob(os.path.join(capdir, "sage*_captures*.npz"))):
        with np.load(f) as z:
            arrays.update({k: z[k] for k in z.files})
    with open(os.path.join(capdir, "sage_manifest.json")) as f:
        return json.load(f), arrays


def probes(arrays):
    out = {}
    keys = sorted({k.rsplit("__", 1)[0] for k in arrays if k.startswith("dot16_")})
    same = total = 0
    for key in keys:
        p = arrays[f"{key}__p"].view(np.float16).astype(np.float64)
        v = arrays[f"{key}__v"].view(np.float16).astype(np.float64)
        want = arrays[f"{key}__o16"]
        got = pasa.gemm(p, v, a_format="fp16", b_format="fp16", acc="fp16", out="fp16", model="h100_fp16_f16acc")
        got = pasa.encode(got, "fp16").astype(np.uint16)
        same += int(np.sum(got == want))
        total += want.size
    out["dot16_identical_pct"] = 100.0 * same / max(total, 1)
    x, y = arrays["elem__x"], arrays["elem__y"]
    div_rn = (x.astype(np.float64) / y.astype(np.float64)).astype(np.float32)
    out["div_rn_identical_pct"] = float(np.mean(div_rn.view(np.uint32) == arrays["elem__div"].view(np.uint32)) * 100)
    e = arrays["elem__exp2"]
    gpu_e = e[np.isfinite(x)]
    out["exp2_subnormal_results"] = int(np.sum((gpu_e > 0) & (gpu_e < np.float32(2.0 ** -126))))
    out["exp2_zero_for_x_above_-150"] = int(np.sum((e == 0) & (x > -149)))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("capdir")
    ap.add_argument("--recipe", default="sage1_triton")
    ap.add_argument("--which", default="sa1")
    ap.add_argument("--override", default="", help="JSON fields overriding the recipe's schedule")
    ap.add_argument("--csv", default=None)
    ap.add_argument("--only", default="")
    ap.add_argument("--no-probes", action="store_true")
    a = ap.parse_args()
    man, arrays = load(a.capdir)
    kernel = {"recipe": a.recipe, **(json.loads(a.override) if a.override else {})}
    if not a.no_probes:
        print(json.dumps(probes(arrays)))
    rows = []
    for c in man["cases"]:
        r = c.get("results", {}).get(a.which)
        if not r or r["status"] != "ok" or a.only not in c["name"] or f"{c['name']}__{a.which}__out" not in arrays:
            continue
        q, k, v = make_inputs(c)
        for t, x in zip("qkv", (q, k, v)):
            if sha256_hex(x) != c["sha256"][t]:
                raise SystemExit(f"{c['name']}: regenerated {t} differs from the capture's inputs")
        dt = c["dtype"]
        shp_q, shp_kv = c["shape_q"], c["shape_kv"]
        out, _ = pasa.attention(q.reshape(shp_q), k.reshape(shp_kv), v.reshape(shp_kv), format=dt, kernel=kernel,
                                causal=bool(c["causal"]))
        emu = pasa.encode(out, dt).astype(np.uint16)
        gpu = arrays[f"{c['name']}__{a.which}__out"].reshape(shp_q)
        same = float(np.mean(emu == gpu) * 100)
        qf, kf, vf = (bits_to_float64(x, dt).reshape(s) for x, s in ((q, shp_q), (k, shp_kv), (v, shp_kv)))
        ref = reference_attention(qf, kf, vf, c["scale_effective"], bool(c["causal"]))
        g = bits_to_float64(gpu.ravel(), dt).reshape(shp_q)
        rg = float(np.sqrt(np.mean((g - ref) ** 2)))
        re = float(np.sqrt(np.mean((out - ref) ** 2)))
        rows.append({"case": c["name"], "identical_pct": f"{same:.4f}", "max_ulp": int(ulp_distance(emu, gpu).max()),
                     "rmse_gpu": f"{rg:.6e}", "rmse_emu": f"{re:.6e}", "rmse_ratio": f"{re / rg:.6f}" if rg else "nan"})
        print(f"{c['name']:45s} {same:9.4f} %  max ulp {rows[-1]['max_ulp']:6d}  rmse ratio {rows[-1]['rmse_ratio']}")
    print(identity_summary(rows))
    if a.csv:
        write_rows_csv(a.csv, rows)

if __name__ == "__main__":
    main()
