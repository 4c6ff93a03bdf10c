#!/usr/bin/env python3
"""cudnn_decode_later_probe.py: a later, unseen check of torch_cudnn_sm90's split decode (cuDNN 9.19, torch 2.11),
taken after the rule (splits = pow2 >= ceil(Skv/254), at most 256 / (batch · KV heads), fewer than 4 -> one CTA)
and the strided partition were fixed in the recipe.

  python3 experiments/gpu/kernels/cudnn_decode_later_probe.py DIR     (20 s on an H200; from the repository root)

  - kernels.json: the profiler's launches (names, grids) at Skv 1024/2048/8192, D 64, for batch x heads where
    the cap decides (3, 5, 40, 48, 64 = 2 x 32 = 8 x 8, 96, 100, 128). Rows as cudnn_gap_probe.py's.
  - dec.npz / dec_manifest.json: O (uint16 bits) and LSE of 48 decode cases (uniform, x0 = 20, normal; fp16/bf16;
    Skv 777-8192, D 64-160, GQA 8:1 and 2:1): inputs from kernel_inputs.make_inputs and the manifest's seeds.
(The run of results/hardware/kernels/cudnn_decode_later_* was this script, minified to fit one device command.)
"""
import json
import sys
import time

import numpy as np

sys.path.insert(0, "experiments/gpu/kernels")
from kernel_inputs import make_inputs, sha256_hex  # noqa: E402

U = {"dist": "uniform", "x0": 0., "am": 1.}
X = {"dist": "uniform", "x0": 20., "am": .5}
N = {"dist": "normal", "mu": 0., "sigma": 1.}
GENS = {"uniform": [U, U, U], "uniformx20": [X, X, U], "normal": [N, N, N]}
SHAPES = ((2, 2, 1537, 64), (2, 2, 2100, 128), (8, 1, 3000, 128), (2, 2, 2100, 160), (4, 2, 4097, 96),
          (1, 1, 8192, 64), (8, 8, 1500, 64), (2, 2, 777, 64))  # (Hq, Hkv, Skv, D)


def main():
    import torch
    from torch.profiler import ProfilerActivity, profile
    out_dir = sys.argv[1]
    t0 = time.time()
    h16 = torch.float16

    def aten(q, k, v):
        r = torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0., False, False)
        return r[0], r[1].float().reshape(q.shape[0], q.shape[1], -1)[:, :, :1]

    def kernels_of(fn):
        fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as p:
            fn()
            torch.cuda.synchronize()
        p.export_chrome_trace("/tmp/t.json")
        return [(x["name"], x["args"].get("grid")) for x in json.load(open("/tmp/t.json"))["traceEvents"]
                if x.get("cat") == "kernel"]

    kern = []
    for (b, h) in ((1, 40), (1, 48), (1, 64), (2, 32), (1, 96), (1, 100), (1, 128), (8, 8), (1, 3), (1, 5)):
        for s in (1024, 2048, 8192):
            q = torch.randn(b, h, 1, 64, device="cuda", dtype=h16)
            k = torch.randn(b, h, s, 64, device="cuda", dtype=h16)
            kern.append([b, h, h, 1, s, 64, "fp16", 0, kernels_of(lambda: aten(q, k, k))])
    json.dump(kern, open(out_dir + "/kernels.json", "w"))
    res, cases, seed = {}, [], 940000
    for dist, g in GENS.items():
        for dt in ("fp16", "bf16"):
            for (hq, hk, s, d) in SHAPES:
                seed += 1
                case = {"name": f"dec_{dist}_{dt}_h{hq}x{hk}_skv{s}_d{d}", "gen": {"q": g[0], "k": g[1], "v": g[2]},
                        "seed": seed, "dtype": dt, "causal": False, "shape_q": [1, hq, 1, d], "shape_kv": [1, hk, s, d]}
                q, k, v = make_inputs(case)
                case["sha256"] = {"q": sha256_hex(q), "k": sha256_hex(k), "v": sha256_hex(v)}
                t = torch.float16 if dt == "fp16" else torch.bfloat16
                f = lambda x, sh: torch.from_numpy(x.reshape(sh).view(np.int16).copy()).cuda().view(t)  # noqa: E731
                o, lse = aten(f(q, case["shape_q"]), f(k, case["shape_kv"]), f(v, case["shape_kv"]))
                res[case["name"] + "__out"] = o.contiguous().view(torch.int16).cpu().numpy().view(np.uint16)
                res[case["name"] + "__lse"] = lse.cpu().numpy()
                cases.append(case)
    np.savez_compressed(out_dir + "/dec.npz", **res)
    json.dump({"env": [torch.__version__, torch.backends.cudnn.version()], "cases": cases},
              open(out_dir + "/dec_manifest.json", "w"))
    print(len(cases), time.time() - t0)


if __name__ == "__main__":
    main()
