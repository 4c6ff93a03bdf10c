#!/usr/bin/env python3
"""ex2_model_check.py: the CPU model of ex2.approx.ftz.f32 (MUFU.EX2) rebuilt from the measured tables, checked
against the GPU's sha256 digests of its output on all 2^32 inputs (NumPy only; ~10 min for all 256 chunks).

Model (results/hardware/kernels/README.md, part B): T = trunc(|x| * 2^23) (zero and subnormal x -> T = 0),
n = T >> 23, k = T mod 2^23; x >= 0: g[k] * 2^n, x < 0: h[k] * 2^-n (exponent field shifted; <= 0 -> +0,
>= 255 -> +inf); x >= 128 and +inf -> +inf, x < -1000 and -inf -> +0, NaN -> 0x7fffffff.
g, h: mufu_tables.npz (ex2_g_first/ex2_g_diff, ex2_h_first/ex2_h_diff).

  python3 experiments/gpu/kernels/ex2_model_check.py [CHUNK ...]   (default: all 256; chunk c = bit patterns
                                                                     c * 2^24 .. (c + 1) * 2^24 - 1)
"""
import hashlib
import os
import sys

import numpy as np

TABLES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "results", "hardware", "kernels",
                      "mufu_tables.npz")


def tables(z):
    def tab(nm):
        return np.concatenate([[np.int64(z[f"ex2_{nm}_first"])], z[f"ex2_{nm}_diff"].astype(np.int64)]).cumsum()
    return tab("g"), tab("h")


def ex2_model(bits, g, h):
    """uint32 bit patterns -> uint32 bit patterns of ex2.approx.ftz.f32 as measured on the H200."""
    b = bits.astype(np.int64)
    s = b >> 31
    ef = (b >> 23) & 0xFF
    m24 = (b & 0x7FFFFF) | (1 << 23)
    e = ef - 127
    t = np.where(e >= 0, m24 << np.clip(e, 0, 40), m24 >> np.clip(-e, 0, 63))
    t = np.where(ef == 0, 0, t)
    n, k = t >> 23, t & 0x7FFFFF
    tp, tn = g[k], h[k]
    ep, en = (tp >> 23) + n, (tn >> 23) - n
    pos = np.where(ep >= 255, 0x7F800000, np.where(ep <= 0, 0, tp + (n << 23)))
    neg = np.where(en <= 0, 0, tn - (n << 23))
    out = np.where(s == 0, pos, neg)
    x = bits.view(np.float32)
    out = np.where((s == 0) & (x >= 128), 0x7F800000, out)
    out = np.where((s == 1) & (x < -1000), 0, out)
    out = np.where(np.isnan(x), 0x7FFFFFFF, out)
    out = np.where(np.isinf(x) & (s == 0), 0x7F800000, out)
    out = np.where(np.isinf(x) & (s == 1), 0, out)
    return out.astype("<u4")


def main():
    z = np.load(TABLES)
    g, h = tables(z)
    ref = z["ex2_chunk_sha256"]
    chunks = [int(c) for c in sys.argv[1:]] or list(range(256))
    ok = 0
    for c in chunks:
        bits = (np.arange(1 << 24, dtype=np.uint64) + np.uint64(c << 24)).astype(np.uint32)
        same = hashlib.sha256(ex2_model(bits, g, h).tobytes()).hexdigest() == bytes(ref[c]).decode()
        ok += same
        if not same:
            print(f"chunk {c}: MISMATCH")
    print(f"ex2_model_check: {ok} of {len(chunks)} chunks reproduce the GPU's sha256")
    return 0 if ok == len(chunks) else 1


if __name__ == "__main__":
    sys.exit(main())
