#!/usr/bin/env python3
"""ex2_poly_probe.py: FlashAttention-4's software exp2 on the GPU, every float32 input, as chunk digests.

ex2_poly_probe.cu holds the kernel's instruction sequence; this runs it on all 2^32 bit patterns in 256 chunks
of 2^24 (chunk c = bit patterns c * 2^24 .. (c + 1) * 2^24 - 1) and writes, per chunk, the sha256 of the
little-endian uint32 outputs to OUT/ex2_poly_digest.json, with the nvcc and GPU it ran on.
tests/python/test_kernel_recipes.py recomputes chunks with pasa.gpu_math(x, "ex2_poly3"); tests that are
labelled long recompute all 256.

  python3 experiments/gpu/kernels/ex2_poly_probe.py --out DIR        (about a minute on an H200)
"""
import argparse
import hashlib
import json
import os
import subprocess
import time

import cupy as cp
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
CH = 1 << 24


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    cub = "/tmp/ex2_poly_probe.cubin"
    subprocess.run(["nvcc", "-cubin", "-arch=sm_90", "-O3", "-o", cub, os.path.join(HERE, "ex2_poly_probe.cu")],
                   check=True)
    sass = subprocess.run(["cuobjdump", "-sass", cub], capture_output=True, text=True, check=True).stdout
    k = cp.RawModule(path=cub).get_function("ex2_poly3_all")
    out = cp.empty(CH, dtype=cp.uint32)
    digests = []
    for c in range(256):
        k(((CH + 255) // 256,), (256,), (np.uint32(c * CH), np.uint32(CH), out))
        digests.append(hashlib.sha256(cp.asnumpy(out).astype("<u4").tobytes()).hexdigest())
    nvcc = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    gpu = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
                         capture_output=True, text=True).stdout.strip()
    ins = [l.split(";")[0].split("*/")[-1].strip() for l in sass.splitlines() if "/*0" in l and "*/" in l]
    rep = {"what": "FlashAttention-4 ex2_emulation (POLY_EX2[3]) on all 2^32 float32 inputs, sha256 per chunk of "
                   "2^24 outputs (little-endian uint32)",
           "nvcc": nvcc, "gpu": gpu, "chunk_sha256": digests, "sass": [i for i in ins if i and "NOP" not in i],
           "seconds": round(time.time() - t0, 1)}
    with open(os.path.join(a.out, "ex2_poly_digest.json"), "w") as h:
        json.dump(rep, h, indent=1)
    print(f"ex2_poly3: 256 chunks in {rep['seconds']} s on {gpu}")


if __name__ == "__main__":
    main()
