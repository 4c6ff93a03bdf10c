#!/usr/bin/env python3
"""tc_random.py: randomised comparison data for the tensor-core models (the second step of the method of
Fasi, Higham, Mikaitis, Pranesh 2021, PeerJ CS 7:e330, and Khattak, Mikaitis 2025, arXiv:2512.07004:
after the probes, many random dot products, compared bit for bit with the model on the CPU).

What it does
  For every input format (fp16, bf16, tf32, e4m3, e5m2), every K in 64, 128, 256, 1280 (the attention shapes:
  S = Q K^T with head dimension K = 64..256, P V over a KV length of 1280) and four input sets, draws A
  (128 x K) and Bt (128 x K) with numpy.random.default_rng(seed) in float32, converts them on the GPU to
  the format (torch's RNE conversion) and runs every GEMM variant of tc_common.VARIANTS (one 128 x 128 tile
  per call, as attention's 128 x 128 blocks): 4 x 16384 = 65536 dot products per (format, K, variant),
  262144 per format and variant. Sets (values in float32 before conversion; clipped to the format's range):
    s0  A, B ~ N(0, 1)
    s1  A ~ U(0, 1) (attention's P), B ~ N(0, 1)
    s2  A, B ~ N(0, 1) * 2^U{-r..r} (wide exponents: exercises alignment; r = 8 fp16, 20 bf16/tf32,
        4 e4m3, 8 e5m2)
    s3  A, B ~ N(2, 1) (same-sign sums that grow with K, as Q K^T with an offset)
  tf32: sets s0, s1 hold values already on the tf32 grid (low 13 bits of float32 cleared); s2, s3 hold full
  float32 values, so the conversion float32 -> tf32 inside cuBLAS is part of what is compared.

Output: $OUT/tc_random_<f>.npz with arrays (storage as tc_common: bit patterns for bf16 and fp8)
    K<K>_A, K<K>_Bt   (4, 128, K)      K<K>_<variant>   (4, 128, 128)
  and $OUT/tc_random.json (seeds, sets, b formats, notes, GPU).

How to run (GPU machine, PyTorch): python3 experiments/gpu/tc_random.py --out DIR [--seed 20261123]  (~20 s)
"""
import argparse
import os
import time

import numpy as np
import torch

import tc_common as tc

KS = (64, 128, 256, 1280)
SPREAD = {"fp16": 8, "bf16": 20, "tf32": 20, "e4m3": 4, "e5m2": 8}


def draw(rng, fmt, s, K):
    shape = (128, K)
    if s == 0:
        a, b = rng.standard_normal(shape), rng.standard_normal(shape)
    elif s == 1:
        a, b = rng.random(shape), rng.standard_normal(shape)
    elif s == 2:
        r = SPREAD[fmt]
        a = rng.standard_normal(shape) * 2.0 ** rng.integers(-r, r + 1, shape)
        b = rng.standard_normal(shape) * 2.0 ** rng.integers(-r, r + 1, shape)
    else:
        a, b = rng.normal(2.0, 1.0, shape), rng.normal(2.0, 1.0, shape)
    mx = tc.FORMATS[fmt][3]
    a = np.clip(a, -mx, mx).astype(np.float32)
    b = np.clip(b, -mx, mx).astype(np.float32)
    if fmt == "tf32" and s < 2:  # on the tf32 grid: clear the 13 low significand bits
        a = (a.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
        b = (b.view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    return a, b


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=20261123)
    ap.add_argument("--formats", default=",".join(tc.FORMATS))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    tc.setup()
    t0 = time.time()
    meta = {"info": tc.gpu_info(), "seed": args.seed, "Ks": KS, "sets": 4, "b_format": {}, "files": {}}
    for fi, fmt in enumerate(args.formats.split(",")):
        fb = tc.e5m2_b_format() if fmt == "e5m2" else fmt
        meta["b_format"][fmt] = fb
        arrays = {}
        for K in KS:
            rng = np.random.default_rng([args.seed, fi, K])
            As, Bs, outs = [], [], {v: [] for v, _ in tc.VARIANTS[fmt]}
            for s in range(4):
                a, b = draw(rng, fmt, s, K)
                if fb != fmt:
                    b = np.clip(b, -tc.FORMATS[fb][3], tc.FORMATS[fb][3])
                ta, tb = tc.to_device(a, fmt), tc.to_device(b, fb)
                As.append(tc.storage(ta, fmt))
                Bs.append(tc.storage(tb, fb))
                for variant, out_fmt in tc.VARIANTS[fmt]:
                    try:
                        c = tc.gemm(fmt, variant, ta, tb)
                    except (RuntimeError, ValueError) as e:
                        tc.NOTES[f"{fmt}/{variant}"] = f"failed: {str(e)[:300]}"
                        c = None
                    if c is not None:
                        outs[variant].append(tc.out_storage(c, out_fmt))
            arrays[f"K{K}_A"] = np.stack(As)
            arrays[f"K{K}_Bt"] = np.stack(Bs)
            for v, lst in outs.items():
                if len(lst) == 4:
                    arrays[f"K{K}_{v}"] = np.stack(lst)
        path = os.path.join(args.out, f"tc_random_{fmt}.npz")
        tc.save_npz(path, arrays)
        meta["files"][fmt] = os.path.basename(path)
    torch.cuda.synchronize()
    meta["notes"] = tc.NOTES
    meta["seconds"] = time.time() - t0
    tc.write_json(os.path.join(args.out, "tc_random.json"), meta)
    print("notes:", tc.NOTES)


if __name__ == "__main__":
    main()
