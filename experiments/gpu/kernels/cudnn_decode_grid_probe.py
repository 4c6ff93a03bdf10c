#!/usr/bin/env python3
"""cudnn_decode_grid_probe.py: which kernels and grids cuDNN 9.19's SDPA decode (Sq = 1) launches for every
Skv from 480 to 1100, through torch's aten._scaled_dot_product_cudnn_attention under torch.profiler (CUDA
activity): where its split engine's part count changes (docs/kernels.md "cuDNN decode" leaves the lengths
above 512 other than 1024 unpinned).

  python3 experiments/gpu/kernels/cudnn_decode_grid_probe.py --out DIR      (about 2 minutes on an H200)

-> DIR/cudnn_decode_grid.json: per (hq, hkv, d, skv) the launches' names, grids and blocks.
"""
import argparse
import json
import os
import time

import torch
from torch.profiler import ProfilerActivity, profile


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--deadline", type=float, default=400)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    dev = "cuda"
    rows = []
    trace = "/tmp/cudnn_grid_trace.json"
    cfgs = [(2, 2, 64, s) for s in range(480, 1101)] + [(8, 1, 128, s) for s in range(480, 1101, 7)]
    for hq, hkv, d, skv in cfgs:
        if time.time() - t0 > a.deadline:
            break
        q = torch.randn(1, hq, 1, d, device=dev, dtype=torch.float16)
        k = torch.randn(1, hkv, skv, d, device=dev, dtype=torch.float16)
        v = torch.randn(1, hkv, skv, d, device=dev, dtype=torch.float16)
        call = lambda: torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, False, False)  # noqa
        call()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as prof:
            call()
            torch.cuda.synchronize()
        prof.export_chrome_trace(trace)
        ev = json.load(open(trace))
        ev = ev["traceEvents"] if isinstance(ev, dict) else ev
        ks = [{"name": e.get("name"), "grid": e.get("args", {}).get("grid"), "block": e.get("args", {}).get("block")}
              for e in ev if e.get("cat") == "kernel"]
        rows.append({"hq": hq, "hkv": hkv, "d": d, "skv": skv, "kernels": ks})
    json.dump({"torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
               "gpu": torch.cuda.get_device_name(), "rows": rows, "seconds": round(time.time() - t0, 1)},
              open(os.path.join(a.out, "cudnn_decode_grid.json"), "w"))
    last = None
    for r in rows:
        sig = [(x["name"][:60], tuple(x["grid"] or ())) for x in r["kernels"]]
        if sig != last:
            print(r["hq"], r["hkv"], r["d"], r["skv"], sig)
            last = sig
    print(f"{len(rows)} configurations in {time.time() - t0:.0f} s")


if __name__ == "__main__":
    main()
