#!/usr/bin/env python3
"""kernel_inputs.py: the deterministic Q, K, V of the SDPA kernel captures, regenerable on any machine with NumPy alone (no torch, no GPU).

The generator
  One stream per case: numpy.random.PCG64(seed) (seeded through NumPy's SeedSequence, stable across NumPy
  versions), read only through PCG64.random_raw(), never through numpy.random.Generator's methods (whose
  algorithms NumPy does not promise to keep). A uniform double is u = (raw >> 11) * 2^-53 in [0, 1), as in
  Generator.random(). Q, then K, then V draw from the same stream, each in C order of its shape
  (B, H, S, D), each with its own distribution:
    uniform  {"dist": "uniform", "x0", "am"}      x0 + am * (2u - 1), i.e. U(x0 - am, x0 + am)   [PASA Eq. 17]
    normal   {"dist": "normal", "mu", "sigma"}   mu + sigma * z, z by Box-Muller: pairs (u1, u2) drawn as
                                                  u1 = all first halves, then u2 = all second halves
                                                  (ceil(n/2) each), r = sqrt(-2 ln(1 - u1)),
                                                  z = [r cos(2 pi u2), r sin(2 pi u2)] concatenated, first n
    hybrid   {"dist": "hybrid", "x0", "am", "p"} N(x0, 1) + N(0, am^2) * Bernoulli(p)              [PASA Eq. 18]
                                                  = x0 + z1 + am * z2 * (u < p), drawn z1 (n normals),
                                                  then z2 (n normals), then u (n uniforms)
    zeros    {"dist": "zeros"}                    0 (draws nothing)
    onehot_rows {"dist": "onehot_rows"}           row s of every (b, h) is e_s (1 at column s) for s < D,
                                                  0 for s >= D (draws nothing). As V: O[i, s] = P[i, s] / l_i
    onehot_random {"dist": "onehot_random", "scale"}  row = scale * e_c, c = floor(u * D), one u per row
    int_range {"dist": "int_range", "lo", "hi"}   integers lo..hi inclusive, floor(lo + u * (hi - lo + 1))
  The float64 values are then stored in the case's dtype:
    fp16: float64 -> float32 (numpy astype, round to nearest even) -> float16 (numpy astype, RNE)
    bf16: float64 -> float32 (numpy astype, RNE) -> bf16 by round to nearest even on the float32 bits in
          integer arithmetic: (b + 0x7FFF + ((b >> 16) & 1)) >> 16, NaN kept quiet (none occur here)
  Both go through float32 on purpose (double rounding is part of the definition, like torch's .to()).
  The result is a uint16 array of bit patterns; sha256 of q.tobytes() + k.tobytes() + v.tobytes() (little
  endian uint16, C order) is what the manifest records per tensor.

Use
  from kernel_inputs import make_inputs, sha256_hex
  q, k, v = make_inputs(case)   # case: a manifest entry: "gen": {"q": dist, "k": dist, "v": dist},
                                #       "seed", "dtype" ("fp16"|"bf16"), "shape_q", "shape_kv"
  python3 kernel_inputs.py verify MANIFEST.json [...]   # regenerates every case, compares the sha256
"""
import hashlib
import json
import math
import sys

import numpy as np


class Stream:
    """Uniform doubles from PCG64's raw 64-bit outputs: (raw >> 11) * 2^-53."""

    def __init__(self, seed):
        self.bg = np.random.PCG64(int(seed))

    def uniform(self, n):
        if n == 0:
            return np.zeros(0)
        raw = self.bg.random_raw(int(n))
        raw = np.asarray(raw, dtype=np.uint64)
        return (raw >> np.uint64(11)).astype(np.float64) * (2.0 ** -53)

    def normal(self, n):
        m = (int(n) + 1) // 2
        u1 = self.uniform(m)
        u2 = self.uniform(m)
        r = np.sqrt(-2.0 * np.log(1.0 - u1))
        t = 2.0 * math.pi * u2
        return np.concatenate([r * np.cos(t), r * np.sin(t)])[:n]


def draw(stream, dist, shape):
    n = int(np.prod(shape))
    kind = dist["dist"]
    if kind == "uniform":
        x = float(dist["x0"]) + float(dist["am"]) * (2.0 * stream.uniform(n) - 1.0)
    elif kind == "normal":
        x = float(dist["mu"]) + float(dist["sigma"]) * stream.normal(n)
    elif kind == "hybrid":
        z1 = stream.normal(n)
        z2 = stream.normal(n)
        u = stream.uniform(n)
        x = float(dist["x0"]) + z1 + float(dist["am"]) * z2 * (u < float(dist["p"]))
    elif kind == "zeros":
        x = np.zeros(n)
    elif kind == "onehot_rows":
        B, H, S, D = shape
        x = np.zeros(shape)
        s = np.arange(min(S, D))
        x[:, :, s, s] = 1.0
        x = x.reshape(-1)
    elif kind == "onehot_random":
        B, H, S, D = shape
        c = np.floor(stream.uniform(B * H * S) * D).astype(np.int64)
        x = np.zeros((B * H * S, D))
        x[np.arange(B * H * S), c] = float(dist.get("scale", 1.0))
        x = x.reshape(-1)
    elif kind == "int_range":
        lo, hi = int(dist["lo"]), int(dist["hi"])
        x = np.floor(lo + stream.uniform(n) * (hi - lo + 1))
    else:
        raise ValueError(f"kernel_inputs: unknown dist {kind!r}")
    return np.asarray(x, dtype=np.float64).reshape(shape)


def f32_to_bf16_bits(x32):
    b = np.ascontiguousarray(x32, dtype=np.float32).view(np.uint32).astype(np.uint64)
    r = (b + np.uint64(0x7FFF) + ((b >> np.uint64(16)) & np.uint64(1))) >> np.uint64(16)
    r = r.astype(np.uint16)
    nan = np.isnan(x32)
    if nan.any():
        r[nan] = ((b[nan] >> np.uint64(16)).astype(np.uint16)) | np.uint16(0x40)
    return r


def to_bits(x64, dtype):
    x32 = np.asarray(x64, dtype=np.float64).astype(np.float32)
    if dtype == "fp16":
        return x32.astype(np.float16).view(np.uint16)
    if dtype == "bf16":
        return f32_to_bf16_bits(x32)
    raise ValueError(f"kernel_inputs: unknown dtype {dtype!r}")


def bits_to_float64(bits, dtype):
    """uint16 bit patterns -> float64 values (for CPU-side models)."""
    bits = np.asarray(bits, dtype=np.uint16)
    if dtype == "fp16":
        return bits.view(np.float16).astype(np.float64)
    if dtype == "bf16":
        return (bits.astype(np.uint32) << np.uint32(16)).view(np.float32).astype(np.float64)
    raise ValueError(dtype)


def make_inputs(case):
    """(q, k, v) uint16 bit patterns for a manifest entry."""
    s = Stream(case["seed"])
    g = case["gen"]
    out = []
    for name, shape in (("q", case["shape_q"]), ("k", case["shape_kv"]), ("v", case["shape_kv"])):
        out.append(to_bits(draw(s, g[name], tuple(shape)), case["dtype"]))
    return tuple(out)


def sha256_hex(a):
    return hashlib.sha256(np.ascontiguousarray(a, dtype=np.uint16).astype("<u2").tobytes()).hexdigest()


def verify(paths):
    bad = 0
    total = 0
    for p in paths:
        with open(p) as h:
            man = json.load(h)
        for c in man["cases"]:
            q, k, v = make_inputs(c)
            for name, a in (("q", q), ("k", k), ("v", v)):
                total += 1
                if sha256_hex(a) != c["sha256"][name]:
                    bad += 1
                    print(f"MISMATCH {p}: {c['name']} {name}")
    print(f"kernel_inputs verify: {total - bad}/{total} tensors regenerate bit for bit (numpy {np.__version__})")
    return 1 if bad else 0


if __name__ == "__main__":
    if len(sys.argv) >= 3 and sys.argv[1] == "verify":
        sys.exit(verify(sys.argv[2:]))
    print(__doc__)
    sys.exit(2)


# ---- the captures as committed (results/hardware/kernels/captures_*.npz; repack_captures.py wrote them) ----
# Each array "<case>__<op>" as the GPU gave it (uint16 bit patterns of outputs, float32 LSEs), except that an
# output is stored XOR the case's sdpa_flash output ("<case>__<op>__xor_flash") and an LSE XOR the case's
# aten_flash LSE ("<case>__<op>__xor_flash_lse") where those exist with the same shape: the backends agree in
# most bits, so the XOR compresses to a fraction. load_captures undoes it.

def ulp_distance(a_bits, b_bits):
    """|a - b| in units of the 16-bit format's grid (sign-magnitude bit patterns made monotone)."""
    def key(x):
        x = x.astype(np.int64)
        return np.where(x & 0x8000, 0x8000 - (x & 0x7FFF), 0x8000 + x)
    return np.abs(key(a_bits) - key(b_bits))


def identity_summary(rows):
    """The one-line summary of per-case identity rows (identical_pct, rmse_ratio) and the CSV they make."""
    ids = np.array([float(r["identical_pct"]) for r in rows])
    ratios = np.array([float(r["rmse_ratio"]) for r in rows if r["rmse_ratio"] != "nan"])
    return (f"{len(rows)} cases: identical median {np.median(ids):.4f} %, min {ids.min():.4f} %, every bit in "
            f"{int(np.sum(ids == 100))} of {len(ids)}; rmse ratio {ratios.min():.4f}-{ratios.max():.4f}")


def write_rows_csv(path, rows):
    import csv
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
        w.writeheader()
        w.writerows(rows)

def load_captures(path):
    z = np.load(path)
    raw = {k: z[k] for k in z.files}
    out = {}
    for k, a in raw.items():
        if k.endswith("__xor_flash"):
            case, op = k[: -len("__xor_flash")].split("__", 1)
            out[f"{case}__{op}"] = a ^ raw[f"{case}__sdpa_flash__out"]
        elif k.endswith("__xor_flash_lse"):
            case, op = k[: -len("__xor_flash_lse")].split("__", 1)
            out[f"{case}__{op}"] = (a.view(np.uint32) ^ raw[f"{case}__aten_flash__lse"].view(np.uint32)).view(np.float32)
        else:
            out[k] = a
    return out
