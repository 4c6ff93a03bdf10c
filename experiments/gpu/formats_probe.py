#!/usr/bin/env python3
"""formats_probe.py: the casts of every float32 bit pattern to the OCP MX element formats by ml_dtypes and
torch, recorded as transition tables, for pasa's rounding tests (tests/python/test_formats_hardware.py).

What it records
  A cast is a function of the input's 32-bit pattern. Its complete description is the list of patterns
  where the output code changes: [[pattern, code], ...] starting at pattern 0, each code holding up to the
  next entry's pattern (the last up to 0xFFFFFFFF). Rounding is monotone in |x| for each sign, so a format of
  256 codes has a few hundred entries; anything non-monotone (a NaN region, a sign flip, a library quirk)
  is in the table too, because every one of the 2^32 inputs is converted (in chunks) and every change kept.

  ml_dtypes (CPU, all cores): float4_e2m1fn, float6_e2m3fn, float6_e3m2fn, float8_e8m0fnu via numpy astype.
  torch (CUDA, and CPU): float8_e8m0fnu via tensor.to(dtype); float4_e2m1fn_x2 where torch has a cast from
  float32 to it (torch 2.11 has none: the attempt's error is recorded).

How to run (GPU machine; about a minute)
  python3 experiments/gpu/formats_probe.py --out DIR
  python3 experiments/gpu/formats_probe.py --out DIR --limit 16777216   (a quick check of the first patterns)
Writes DIR/formats_transitions.json: {"versions": {...}, "tables": [{"library", "device", "dtype",
"patterns": [...], "codes": [...]}], "errors": [...]}.
"""
import argparse
import json
import multiprocessing as mp
import os
import platform
import sys
import time

import numpy as np

N = 1 << 32
ML_DTYPES = ["float4_e2m1fn", "float6_e2m3fn", "float6_e3m2fn", "float8_e8m0fnu"]


def changes(codes, first, prev):
    """(patterns, codes) where codes changes, for inputs first.. with `prev` the code before `first`."""
    c = codes.astype(np.int16)
    d = np.empty(len(c), dtype=bool)
    d[0] = prev is None or c[0] != prev
    d[1:] = c[1:] != c[:-1]
    idx = np.nonzero(d)[0]
    return [int(first + i) for i in idx], [int(c[i]) for i in idx]


def ml_chunk(args):
    name, first, count = args
    import ml_dtypes  # noqa: F401  (each worker process)
    dt = np.dtype(getattr(ml_dtypes, name))
    x = np.arange(first, first + count, dtype=np.uint32).view(np.float32)
    with np.errstate(all="ignore"):
        codes = x.astype(dt).view(np.uint8)
    # the chunk's first code and its changes; the caller joins chunks
    return first, int(codes[0]), changes(codes, first, None)


def join(parts):
    parts.sort(key=lambda p: p[0])
    pats, cods, prev = [], [], None
    for _, c0, (p, c) in parts:
        for a, b in zip(p, c):
            if prev is None or b != prev:
                pats.append(a)
                cods.append(b)
                prev = b
    return pats, cods


def probe_ml_dtypes(limit, chunk, out):
    import ml_dtypes
    out["versions"]["ml_dtypes"] = ml_dtypes.__version__
    jobs = mp.cpu_count()
    with mp.Pool(jobs) as pool:
        for name in ML_DTYPES:
            t = time.time()
            parts = pool.map(ml_chunk, [(name, f, min(chunk, limit - f)) for f in range(0, limit, chunk)])
            p, c = join(parts)
            out["tables"].append({"library": "ml_dtypes", "device": "cpu", "dtype": name, "patterns": p, "codes": c,
                                  "inputs": limit, "seconds": round(time.time() - t, 2)})
            print(f"ml_dtypes {name}: {len(p)} transitions, {time.time() - t:.1f} s", flush=True)


def probe_torch(limit, chunk, out):
    import torch
    out["versions"]["torch"] = torch.__version__
    out["versions"]["cuda"] = torch.version.cuda
    devices = ["cuda", "cpu"] if torch.cuda.is_available() else ["cpu"]
    if torch.cuda.is_available():
        out["versions"]["gpu"] = torch.cuda.get_device_name(0)
    targets = [("float8_e8m0fnu", getattr(torch, "float8_e8m0fnu", None)),
               ("float4_e2m1fn_x2", getattr(torch, "float4_e2m1fn_x2", None))]
    for name, dt in targets:
        if dt is None:
            out["errors"].append({"library": "torch", "dtype": name, "error": "no such dtype"})
            continue
        for dev in devices:
            t = time.time()
            pats, cods, prev = [], [], None
            try:
                for f in range(0, limit, chunk):
                    n = min(chunk, limit - f)
                    bits = torch.arange(f, f + n, dtype=torch.int64, device=dev).to(torch.int32)
                    x = bits.view(torch.float32)
                    y = x.to(dt).view(torch.uint8).to(torch.int16)
                    d = torch.ones(n, dtype=torch.bool, device=dev)
                    d[1:] = y[1:] != y[:-1]
                    if prev is not None:
                        d[0] = bool(y[0].item() != prev)
                    idx = torch.nonzero(d).flatten()
                    vals = y[idx].cpu().tolist()
                    for i, v in zip((idx + f).cpu().tolist(), vals):
                        pats.append(int(i))
                        cods.append(int(v))
                    prev = int(y[-1].item())
            except Exception as e:  # noqa: BLE001  (no cast: recorded)
                out["errors"].append({"library": "torch", "device": dev, "dtype": name, "error": repr(e)[:400]})
                print(f"torch {dev} {name}: {e!r}"[:300], flush=True)
                continue
            out["tables"].append({"library": "torch", "device": dev, "dtype": name, "patterns": pats, "codes": cods,
                                  "inputs": limit, "seconds": round(time.time() - t, 2)})
            print(f"torch {dev} {name}: {len(pats)} transitions, {time.time() - t:.1f} s", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True)
    ap.add_argument("--limit", type=int, default=N, help="convert patterns 0 .. limit-1 (default: all 2^32)")
    ap.add_argument("--chunk", type=int, default=1 << 24)
    ap.add_argument("--skip", default="", help="comma list: ml_dtypes, torch")
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    out = {"versions": {"python": platform.python_version(), "numpy": np.__version__}, "tables": [], "errors": []}
    skip = set(filter(None, a.skip.split(",")))
    for lib, fn, ch in (("ml_dtypes", probe_ml_dtypes, a.chunk), ("torch", probe_torch, 1 << 28)):
        if lib in skip:
            continue
        try:
            fn(a.limit, min(ch, a.limit), out)
        except ImportError as e:
            out["errors"].append({"library": lib, "error": repr(e)})
            print(f"{lib}: {e!r}", file=sys.stderr)
    with open(os.path.join(a.out, "formats_transitions.json"), "w") as f:
        json.dump(out, f, separators=(",", ":"))
    print("wrote", os.path.join(a.out, "formats_transitions.json"))


if __name__ == "__main__":
    main()
