#!/usr/bin/env python3
"""tc_probe.py: test vectors that determine, one feature at a time, how the H100's tensor cores (through
the GEMM calls of tc_common.py) multiply and accumulate. Method of Fasi, Higham, Mikaitis, Pranesh 2021
("Numerical behavior of NVIDIA tensor cores", PeerJ CS 7:e330) and Khattak, Mikaitis 2025 ("Accurate
models of NVIDIA tensor cores", arXiv:2512.07004): dot products whose exact value is known and whose
computed value changes with exactly one feature.

Notation: b = a power of two large for the format (fp16: 2^8, bf16/tf32: 1, fp8: 2^16); every term below is
a product a_k * b_k of two NORMAL numbers of the format (exact in any model that multiplies exactly);
positions are k indices; all other positions hold 0 * 0.

  thr    {0: +s*b, 1: -s*b, 2: y}, y = +-m * b * 2^-k, m in {1, 1.25, 1.5, 1.75}, k = 1..kmax,
         s = 1 (product significand 1) and s = 2.25 (= 1.5 * 1.5, significand >= 2), K = 16.
         The big pair cancels exactly, so the result is what survives of y after it was aligned to the
         block's largest exponent: y (kept), 0 (dropped) or y cut to the kept bits. The k where y starts to
         vanish gives the number of bits kept below the largest exponent (s = 2.25 tells whether alignment
         uses the exponent sum e_a + e_b or the normalised product); m and the sign tell truncation
         (toward zero), floor (two's complement) or rounding of the dropped bits.
  thrf   as thr with y at position 0 and the pair at 1, 2 (alignment does not depend on the order).
  blk    {0: +b, 1: -b, j: y}, y = b * 2^-kbig (below any kept bit), j = 2..63, K = 64: y survives iff
         position j is not in the first block -> products per block.
  abs    {0: y, j: +b, j+1: -b}, j = 1..K-2 (K = 64, 128, 256; every 4th j up to 1278 for K = 1280): y is
         absorbed (result 0) iff y sits in the same accumulator when the pair's block is added with y aligned
         to b; y survives when the accumulator is not part of the block's alignment, when the pair lands
         in another split of K (split-K) or after a promotion to an outer fp32 accumulator (FP8 recipes).
  rnd    {0: +-b, 1: y} and {0: +-b, 63: y} (K = 64: same block, later block), y = +-m * b * 2^-k: how the
         block result is normalised and rounded into the accumulator (RZ, RNE, ...) and with how many bits.
  accthr {0: +b, 62: -b, 63: y}, K = 64: y against the accumulator b when the next block is added: the bits
         kept relative to the accumulator's exponent.
  cvt    (tf32 only) {0: x, 1: -1} with float32 x = 1 + d just off the tf32 grid: how cuBLAS converts
         float32 inputs to tf32 (truncation or rounding).

Output ($OUT/tc_probe.npz, $OUT/tc_probe.json): per format f and K, arrays
  probe_<f>_K<K>_A, _Bt  (n, 128, K) inputs in the storage of tc_common (bit patterns for bf16 and fp8),
                         probe p in matrix p // 128 as row p % 128 of A and of Bt (so C[p%128, p%128])
  probe_<f>_K<K>_<variant>  (n, 128, 128) the GPU's C
and tc_probe.json lists every probe (format, K, index, family, parameters, terms).

How to run (GPU machine, PyTorch): python3 experiments/gpu/tc_probe.py --out DIR   (~20 s)
"""
import argparse
import os
import time

import numpy as np
import torch

import tc_common as tc

# Smallest and largest normal exponents of each input format (the probes use normal numbers only).
EXP_RANGE = {"fp16": (-14, 15), "bf16": (-126, 127), "tf32": (-126, 127), "e4m3": (-6, 8), "e5m2": (-14, 15)}
BASE_EXP = {"fp16": 8, "bf16": 0, "tf32": 0, "e4m3": 16, "e5m2": 16}


def representable(v, fmt):
    """v = m * 2^e with m in {1, 1.25, 1.5, 1.75} is a normal number of fmt."""
    if v == 0:
        return True
    m, e = np.frexp(abs(v))  # v = m * 2^e, m in [0.5, 1)
    e -= 1
    lo, hi = EXP_RANGE[fmt]
    if not lo <= e <= hi:
        return False
    return fmt != "e4m3" or abs(v) <= 448.0


def split(v, fa, fb):
    """Two normal numbers a (format fa), b (format fb) with a * b == v (v = +-m 2^e or +-2.25 2^e)."""
    if v == 0:
        return 0.0, 0.0
    sign = -1.0 if v < 0 else 1.0
    m, e = np.frexp(abs(v))
    m, e = m * 2, int(e) - 1  # |v| = m 2^e, m in [1, 2)
    if abs(m - 1.125) < 1e-12:  # 2.25 2^(e-1) = 1.5 2^x * 1.5 2^y
        ma, mb, e = 1.5, 1.5, e - 1
    else:
        ma, mb = m, 1.0
    for d in sorted(range(-60, 61), key=abs):
        e1 = e // 2 + d
        e2 = e - e1
        a, b = sign * ma * 2.0**e1, mb * 2.0**e2
        if representable(a, fa) and representable(b, fb):
            return a, b
    return None


def make_probes(fmt, fb):
    """[(family, params, K, {pos: value})] for input format fmt (B operand format fb)."""
    lo_a, hi_a = EXP_RANGE[fmt]
    lo_b, _ = EXP_RANGE[fb]
    be = BASE_EXP[fmt]
    b = 2.0**be
    kmax = be - (lo_a + lo_b) - 1  # smallest product of two normals: 2^(lo_a + lo_b)
    kmax = min(kmax, 60)
    ybig = b * 2.0**-kmax
    P = []
    for s in (1.0, 2.25):
        for m in (1.0, 1.25, 1.5, 1.75):
            for sg in (1, -1):
                for k in range(1, kmax + 1):
                    y = sg * m * b * 2.0**-k
                    P.append(("thr", {"s": s, "m": m, "sign": sg, "k": k}, 16, {0: s * b, 1: -s * b, 2: y}))
    for k in range(1, kmax + 1):
        P.append(("thrf", {"k": k}, 16, {0: b * 2.0**-k, 1: b, 2: -b}))
    for j in range(2, 64):
        P.append(("blk", {"j": j}, 64, {0: b, 1: -b, j: ybig}))
    for K in (64, 128, 256, 1280):
        js = range(1, K - 1) if K <= 256 else range(1, K - 1, 4)
        for j in js:
            P.append(("abs", {"j": j}, K, {0: ybig, j: b, j + 1: -b}))
    for sb in (1, -1):
        for m in (1.0, 1.25, 1.5, 1.75):
            for sg in (1, -1):
                for k in range(1, min(kmax, 40) + 1):
                    y = sg * m * b * 2.0**-k
                    P.append(("rnd", {"base": sb, "m": m, "sign": sg, "k": k, "pos": 1}, 64, {0: sb * b, 1: y}))
                    P.append(("rnd", {"base": sb, "m": m, "sign": sg, "k": k, "pos": 63}, 64, {0: sb * b, 63: y}))
    for m in (1.0, 1.75):
        for sg in (1, -1):
            for k in range(1, kmax + 1):
                P.append(("accthr", {"m": m, "sign": sg, "k": k}, 64, {0: b, 62: -b, 63: sg * m * b * 2.0**-k}))
    return P


CVT_D = [2.0**-11, 2.0**-11 + 2.0**-23, 2.0**-11 - 2.0**-23, 2.0**-12, 3 * 2.0**-12, 2.0**-10 + 2.0**-11,
         2.0**-23, 2.0**-10 - 2.0**-23, 5 * 2.0**-12]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--formats", default=",".join(tc.FORMATS))
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    tc.setup()
    t0 = time.time()
    arrays, meta = {}, {"info": tc.gpu_info(), "probes": [], "b_format": {}}
    for fmt in args.formats.split(","):
        fb = tc.e5m2_b_format() if fmt == "e5m2" else fmt
        meta["b_format"][fmt] = fb
        probes = []
        for fam, par, K, terms in make_probes(fmt, fb):
            pairs = {}
            ok = True
            for pos, v in terms.items():
                ab = split(v, fmt, fb)
                if ab is None:
                    ok = False
                    break
                pairs[pos] = ab
            if ok:
                probes.append((fam, par, K, pairs))
        if fmt == "tf32":
            for sg in (1, -1):
                for d in CVT_D:
                    probes.append(("cvt", {"d": d, "sign": sg}, 16, {0: (sg * (1 + d), 1.0), 1: (-sg * 1.0, 1.0)}))
                    probes.append(("cvt_b", {"d": d, "sign": sg}, 16, {0: (1.0, sg * (1 + d)), 1: (-sg * 1.0, 1.0)}))
        for K in sorted({p[2] for p in probes}):
            group = [p for p in probes if p[2] == K]
            n = (len(group) + 127) // 128
            A = np.zeros((n, 128, K), np.float32)
            Bt = np.zeros((n, 128, K), np.float32)
            for i, (fam, par, _, pairs) in enumerate(group):
                for pos, (a, bb) in pairs.items():
                    A[i // 128, i % 128, pos] = a
                    Bt[i // 128, i % 128, pos] = bb
                meta["probes"].append({"format": fmt, "K": K, "index": i, "family": fam, "params": par,
                                       "terms": {str(p): [a, bb] for p, (a, bb) in pairs.items()}})
            key = f"probe_{fmt}_K{K}"
            ta = [tc.to_device(A[q], fmt) for q in range(n)]
            tb = [tc.to_device(Bt[q], fb) for q in range(n)]
            # every probe value must have survived the conversion (normal numbers of the format)
            for q in range(n):
                if fmt != "tf32":
                    assert np.array_equal(tc.values(ta[q]), A[q].astype(np.float64)), f"{key}: A not exact"
                    assert np.array_equal(tc.values(tb[q]), Bt[q].astype(np.float64)), f"{key}: Bt not exact"
            arrays[key + "_A"] = np.stack([tc.storage(t, fmt) for t in ta])
            arrays[key + "_Bt"] = np.stack([tc.storage(t, fb) for t in tb])
            for variant, out_fmt in tc.VARIANTS[fmt]:
                outs = []
                for q in range(n):
                    try:
                        c = tc.gemm(fmt, variant, ta[q], tb[q])
                    except (RuntimeError, ValueError) as e:
                        tc.NOTES[f"{fmt}/{variant}"] = f"failed: {str(e)[:300]}"
                        c = None
                    if c is None:
                        break
                    outs.append(tc.out_storage(c, out_fmt))
                if len(outs) == n:
                    arrays[f"{key}_{variant}"] = np.stack(outs)
            print(f"{fmt} K={K}: {len(group)} probes", flush=True)
    torch.cuda.synchronize()
    meta["notes"] = tc.NOTES
    meta["seconds"] = time.time() - t0
    tc.save_npz(os.path.join(args.out, "tc_probe.npz"), arrays, compressed=True)  # mostly zeros
    tc.write_json(os.path.join(args.out, "tc_probe.json"), meta)
    print("notes:", tc.NOTES)


if __name__ == "__main__":
    main()
