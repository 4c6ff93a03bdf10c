#!/usr/bin/env python3
"""pack_mufu_tables.py: build src/pasa/numeric/data/mufu_tables.bin from the committed measurements.

The library embeds the measured MUFU outputs over one binade (numeric/gpu_math.cpp): per table 2^23 uint32,
the first entry then each entry minus the one before (mod 2^32), one zlib stream each, after the magic
"PASAMUFU" and, per table, a 4-byte name and the stream's length (little-endian uint32).

  EX2P  ex2.approx.ftz(+f),  f = m / 2^23   (mufu_tables.npz ex2_g_first + cumsum(ex2_g_diff))
  EX2N  ex2.approx.ftz(-f)                  (ex2_h_*)
  LG2M  lg2.approx.ftz(1.m)                 (lg2_table.npz first + cumsum(diff))
  RCPM  rcp.approx.ftz(1.m)                 (__frcp_rn(1.m) + rcp_r_minus_rn)

Each table is checked against the sha256 the probe recorded before it is written, so a wrong
reconstruction cannot reach the library. Usage: pack_mufu_tables.py [--check] (--check: compare the
tables inside the existing file instead of writing it).
"""
import argparse
import hashlib
import pathlib
import struct
import sys
import zlib

import numpy as np

ROOT = pathlib.Path(__file__).resolve().parents[3]
DATA = ROOT / "results/hardware/kernels"
OUT = ROOT / "src/pasa/numeric/data/mufu_tables.bin"
N = 1 << 23


def digest(a):
    return hashlib.sha256(a.astype("<u4").tobytes()).hexdigest()


def from_diff(first, diff):
    v = np.empty(N, np.uint64)
    v[0] = int(first)
    v[1:] = diff.astype(np.int64).astype(np.uint64)
    return (np.cumsum(v) & 0xFFFFFFFF).astype(np.uint32)


def tables():
    z = np.load(DATA / "mufu_tables.npz")
    lg = np.load(DATA / "lg2_table.npz")
    sha = lambda k: bytes(z[k]).decode()  # (hex digests stored as uint8 text)
    g = from_diff(z["ex2_g_first"], z["ex2_g_diff"])
    h = from_diff(z["ex2_h_first"], z["ex2_h_diff"])
    L = from_diff(lg["first"], lg["diff"])
    one_m = (np.uint32(0x3F800000) + np.arange(N, dtype=np.uint32)).view(np.float32)
    rn = (np.float32(1) / one_m).view(np.uint32)  # IEEE division: __frcp_rn
    r = (rn.astype(np.int64) + z["rcp_r_minus_rn"].astype(np.int64)).astype(np.uint32)
    out = {"EX2P": g, "EX2N": h, "LG2M": L, "RCPM": r}
    want = {"EX2P": sha("ex2_g_sha256"), "EX2N": sha("ex2_h_sha256"), "RCPM": sha("rcp_r_sha256"),
            "LG2M": bytes(lg["sha256"]).hex()}
    for k, v in out.items():
        if digest(v) != want[k]:
            sys.exit(f"pack_mufu_tables: table {k} does not match the probe's sha256 {want[k]}")
    return out


def encode(v):
    d = np.empty(N, np.uint32)
    d[0] = v[0]
    d[1:] = v[1:] - v[:-1]  # (uint32 arithmetic: mod 2^32)
    return zlib.compress(d.astype("<u4").tobytes(), 9)


def read_bin(path):
    b = path.read_bytes()
    assert b[:8] == b"PASAMUFU", "bad magic"
    p, got = 8, {}
    while p < len(b):
        name, n = b[p:p + 4].decode(), struct.unpack("<I", b[p + 4:p + 8])[0]
        d = np.frombuffer(zlib.decompress(b[p + 8:p + 8 + n]), "<u4")
        got[name] = (np.cumsum(d.astype(np.uint64)) & 0xFFFFFFFF).astype(np.uint32)
        p += 8 + n
    return got


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare with the existing file, write nothing")
    a = ap.parse_args()
    t = tables()
    if a.check:
        got = read_bin(OUT)
        bad = [k for k in t if k not in got or not np.array_equal(got[k], t[k])]
        print("mufu_tables.bin:", "matches" if not bad else f"differs in {bad}")
        return 1 if bad else 0
    blob = b"PASAMUFU"
    for k, v in t.items():
        s = encode(v)
        blob += k.encode() + struct.pack("<I", len(s)) + s
    OUT.write_bytes(blob)
    print(f"wrote {OUT} ({len(blob)} bytes; tables {', '.join(t)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
