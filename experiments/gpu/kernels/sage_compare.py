#!/usr/bin/env python3
"""sage_compare.py: pasa's SageAttention recipes against the captures of sage_capture.py, bit for bit.

  build/pasa-python experiments/gpu/kernels/sage_compare.py CAPTURE_DIR [--recipe sage1_triton] [--which sa1]
                    [--csv OUT.csv] [--only TEXT] [--override JSON]

Per case: the quantised Q and K (elements and scales) against pasa.block_quantise under the recipe's scheme,
the share of output bits identical, the largest ulp distance, the share of LSE bits identical, and the RMSE of
the emulation and of the kernel against a float64 reference (softmax(QKᵀ·scale)·V on the same inputs). Where
the capture holds SA2's intermediates (`qi qs ki ks v8 vs`), the share of them pasa.block_quantise reproduces
under int8_per_thread_sm90 and fp8_per_channel (column quant_identical_pct). Then the dot16 probes (the fp16-
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


# per_channel_fp8 (quant.py :233) permutes each 16 keys of V^T by this before quantising
V_PERM = np.array([0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15])


def sa2_quantised(case, arrays, q, k, v):
    """The share of SA2's captured INT8 Q/K and FP8 V elements and scales (those the capture holds: the committed
    one has the elements of a few cases only) that pasa reproduces, in %: smooth K
    (the mean over the keys rounded once to the input format, K - km in fp32 rounded to it: core.py :949,
    quant_per_thread.py :159), Q and K zero-padded to the kernel's 64 / 128-row blocks (their scale arrays'
    layout: the padding groups' scale is 0 / 127 + 1e-7), V^T unpermuted."""
    name, dt = case["name"], case["dtype"]
    get = lambda part: arrays[f"{name}__sa2__{part}"]  # noqa: E731
    km = pasa.round(k.mean(axis=2, keepdims=True), dt)
    ks = pasa.round((k.astype(np.float32) - km.astype(np.float32)).astype(np.float64), dt)
    same = total = 0
    for x, p, blk in ((q, "q", 64), (ks, "k", 128)):
        S = x.shape[2]
        pad = np.zeros(x.shape[:2] + (-(-S // blk) * blk - S, x.shape[3]))
        r = pasa.block_quantise(np.concatenate([x, pad], axis=2), "int8_per_thread_sm90",
                                operand="a" if p == "q" else "b")
        for mine, part in ((r["elements"][:, :, :S], f"{p}i"), (r["scales"].astype(np.float32), f"{p}s")):
            if f"{name}__sa2__{part}" not in arrays:
                continue
            gpu = get(part)
            same += int(np.sum(mine == gpu)) if mine.shape == gpu.shape else 0
            total += gpu.size
    rv = pasa.block_quantise(v, "fp8_per_channel", operand="b")
    same += int(np.sum(rv["scales"].astype(np.float32) == get("vs")))
    total += get("vs").size
    if f"{name}__sa2__v8" not in arrays:
        return 100.0 * same / total
    v8 = get("v8")
    pos = (np.arange(v8.shape[-1]) // 16) * 16 + V_PERM[np.arange(v8.shape[-1]) % 16]
    unperm = np.empty_like(v8)
    unperm[..., pos] = v8
    gpu_v = unperm[..., :v.shape[2]].transpose(0, 1, 3, 2)
    mine_v = pasa.encode(rv["elements"], "fp8_e4m3fn").astype(np.uint8)
    same += int(np.sum(mine_v == gpu_v))
    total += gpu_v.size
    return 100.0 * same / total


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
        out, lse = pasa.attention(q.reshape(shp_q), k.reshape(shp_kv), v.reshape(shp_kv), format=dt, kernel=kernel,
                                  causal=bool(c["causal"]))
        g_lse = arrays[f"{c['name']}__{a.which}__lse"]
        lse_same = float(np.mean(np.asarray(lse, dtype=np.float32).reshape(g_lse.shape).view(np.uint32) ==
                                 g_lse.view(np.uint32)) * 100)
        emu = pasa.encode(out, dt).astype(np.uint16)
        gpu = arrays[f"{c['name']}__{a.which}__out"].reshape(shp_q)
        same = float(np.mean(emu == gpu) * 100)
        qf, kf, vf = (bits_to_float64(x, dt).reshape(s) for x, s in ((q, shp_q), (k, shp_kv), (v, shp_kv)))
        ref = reference_attention(qf, kf, vf, c["scale_effective"], bool(c["causal"]))
        g = bits_to_float64(gpu.ravel(), dt).reshape(shp_q)
        rg = float(np.sqrt(np.mean((g - ref) ** 2)))
        re = float(np.sqrt(np.mean((out - ref) ** 2)))
        rows.append({"case": c["name"], "identical_pct": f"{same:.4f}", "max_ulp": int(ulp_distance(emu, gpu).max()),
                     "lse_identical_pct": f"{lse_same:.4f}",
                     "rmse_gpu": f"{rg:.6e}", "rmse_emu": f"{re:.6e}", "rmse_ratio": f"{re / rg:.6f}" if rg else "nan"})
        if f"{c['name']}__sa2__qs" in arrays and a.which == "sa2":
            rows[-1]["quant_identical_pct"] = f"{sa2_quantised(c, arrays, qf, kf, vf):.4f}"
        print(f"{c['name']:45s} {same:9.4f} %  max ulp {rows[-1]['max_ulp']:6d}  lse {lse_same:9.4f} %  "
              f"quant {rows[-1].get('quant_identical_pct', '-')}  rmse ratio {rows[-1]['rmse_ratio']}")
    print(identity_summary(rows))
    if a.csv:
        write_rows_csv(a.csv, rows)

if __name__ == "__main__":
    main()
