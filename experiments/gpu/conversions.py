#!/usr/bin/env python3
"""conversions.py: the GPU's own float32 → fp16 / bf16 / float8_e4m3fn / float8_e5m2 conversions of every
one of the 2^32 float32 bit patterns, for pasa-hwcompare's conversions check of the rounding layer.

What it does
  For every format, converts all float32 bit patterns 0x00000000 .. 0xFFFFFFFF (in input order, chunks of
  2^27) with tensor.to(dtype) on the GPU (round to nearest even, no saturation: PyTorch's
  c10/util/Float8_e4m3fn.h maps |x| >= 480 (after RNE: every |x| > 464), inf and NaN to 0x7F|sign, a NaN;
  Float8_e5m2.h maps overflow to inf; pasa-hwcompare compares with pasa's Overflow::ieee and also counts
  the saturate choice) and writes the result bits as raw little-endian files:
    DIR/conv_fp16.bin  2^32 uint16 (8 GiB)      DIR/conv_bf16.bin      2^32 uint16 (8 GiB)
    DIR/conv_fp8_e4m3.bin  2^32 uint8 (4 GiB)   DIR/conv_fp8_e5m2.bin  2^32 uint8 (4 GiB)
  (24 GiB in all; --first/--count convert a sub-range instead: the file then holds `count` results for
  inputs first .. first + count − 1, and DIR/conv_range.json records first and count.)

How to run (GPU machine: ~1-2 min, bound by the disk writes)
  python3 experiments/gpu/conversions.py --out DIR [--formats fp16,bf16,fp8_e4m3,fp8_e5m2] [--first 0 --count 4294967296]
"""
import argparse
import json
import os
import sys

import numpy as np
import torch

FORMATS = {  # pasa format name: (torch dtype, numpy storage dtype)
    "fp16": (torch.float16, np.uint16),
    "bf16": (torch.bfloat16, np.uint16),
    "fp8_e4m3": (torch.float8_e4m3fn, np.uint8),
    "fp8_e5m2": (torch.float8_e5m2, np.uint8),
}
CHUNK = 1 << 27


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--formats", default=",".join(FORMATS))
    ap.add_argument("--first", type=int, default=0)
    ap.add_argument("--count", type=int, default=1 << 32)
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    if a.first < 0 or a.count <= 0 or a.first + a.count > (1 << 32):
        sys.exit(f"conversions: --first {a.first} --count {a.count} is outside 0 .. 2^32")
    os.makedirs(a.out, exist_ok=True)
    for name in a.formats.split(","):
        if name not in FORMATS:
            sys.exit(f"conversions: unknown format {name!r}; known: {', '.join(FORMATS)}")
        dtype, store = FORMATS[name]
        path = os.path.join(a.out, f"conv_{name}.bin")
        with open(path + ".tmp", "wb") as h:
            for c0 in range(a.first, a.first + a.count, CHUNK):
                n = min(CHUNK, a.first + a.count - c0)
                bits = torch.arange(c0, c0 + n, dtype=torch.int64, device=a.device)
                bits = torch.where(bits >= (1 << 31), bits - (1 << 32), bits).to(torch.int32)  # two's complement
                x = bits.view(torch.float32)
                y = x.to(dtype)
                raw = y.view(torch.int16 if store == np.uint16 else torch.uint8).cpu().numpy().view(store)
                h.write(raw.astype("<u2" if store is np.uint16 else "u1", copy=False).tobytes())  # little-endian
        os.replace(path + ".tmp", path)
        print(f"{path}: {a.count} results", flush=True)
    with open(os.path.join(a.out, "conv_range.json"), "w") as h:
        json.dump({"first": a.first, "count": a.count, "torch": torch.__version__}, h)


if __name__ == "__main__":
    main()
