#!/usr/bin/env python3
"""cudnn_gap_probe.py: probes for the two places where torch_cudnn_sm90 (cuDNN 9.19 through torch 2.11's
CUDNN_ATTENTION backend) was not pinned: prefill at D = 160, and decode (Sq = 1) with Skv above 512.

  python3 experiments/gpu/kernels/cudnn_gap_probe.py DIR        (50 s on an H200; run from the repository root)

(The run of results/hardware/kernels/cudnn_gap_probe_* was this script, minified to fit one device command.)

Parts (all inputs regenerable on a CPU by kernel_inputs.make_inputs plus the transform named in the manifest):
  A. kernels: torch.profiler (CUDA activity) names and grids of every launch of one
     aten._scaled_dot_product_cudnn_attention call (for 120 s at most):
       - prefill at D 64/128/160/192/256 on the held-back shapes, fp16/bf16, causal or not: D 160 runs the
         D 192 kernel (knob_7 64x128x192), so the D 160 gap is not another engine;
       - decode grids: where the split count changes above 2028 (the 4 -> 8 switch at 1016/1017 fits
         "pow2 >= ceil(Skv/254)" and "pow2 >= ceil((Skv + 8)/256)": 2033..2048 separates them), at D 160, and
         over KV heads / batch.  -> kernels.json: [b, hq, hkv, sq, skv, d, dtype, causal, [[name, grid], ...]]
  B. single live key (prefill, Hq = Hkv = 2, Sq 64, Skv 128): Q, K ~ U(29, 31), then K rows 1..127 replaced by
     -30 in every column ("transform": "single_key"): their scores lie ~1e4 below key 0's, P = 0 exactly, so the
     LSE is the kernel's scaled max alone, RN(RN(S·c)·ln 2): it shows the fold constant c at D 128, 160, 192.
  C. D 160 prefill captures with O and LSE (uniform, x0 = 30, normal; fp16/bf16; 64x128, GQA 8:1 37x129,
     128x128 causal or not).  -> gap.npz (NAME__out uint16 bits, NAME__lse float32), gap_manifest.json
"""
import json
import sys
import time

import numpy as np

sys.path.insert(0, "experiments/gpu/kernels")
from kernel_inputs import make_inputs, sha256_hex  # noqa: E402

U = {"dist": "uniform", "x0": 0., "am": 1.}
X = {"dist": "uniform", "x0": 30., "am": 1.}
N = {"dist": "normal", "mu": 0., "sigma": 1.}
GENS = {"uniform": [U, U, U], "uniformx30": [X, X, U], "normal": [N, N, N]}
NEG30 = {"fp16": 0xCF80, "bf16": 0xC1F0}


def main():
    import torch
    from torch.profiler import ProfilerActivity, profile
    out_dir = sys.argv[1]
    t0 = time.time()

    def aten(q, k, v, causal):
        r = torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0., causal, False)
        return r[0], r[1].float().reshape(q.shape[0], q.shape[1], -1)[:, :, :q.shape[2]]

    def kernels_of(fn):
        fn()
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CUDA]) as p:
            fn()
            torch.cuda.synchronize()
        p.export_chrome_trace("/tmp/t.json")
        return [(x["name"], x["args"].get("grid")) for x in json.load(open("/tmp/t.json"))["traceEvents"]
                if x.get("cat") == "kernel"]

    # A. kernels
    cfgs = [(1,) + s + (d, dt, c) for d in (64, 128, 160, 192, 256)
            for s in ((8, 1, 37, 129), (4, 1, 129, 385), (2, 2, 128, 128)) for dt in ("fp16", "bf16") for c in (0, 1)]
    cfgs += [(1, 2, 2, 1, s, 64, "fp16", 0) for s in list(range(2028, 2052)) + [4080, 4088, 4089, 4096]]
    cfgs += [(1, 2, 2, 1, s, 160, "fp16", 0) for s in list(range(500, 1101, 24)) + list(range(1100, 2200, 32)) + [4096, 8192]]
    cfgs += [(b, h, h, 1, s, 64, "fp16", 0) for h in (1, 32) for b in (1, 4) for s in (1024, 2048, 4096, 8192)]
    kern = []
    for (b, hq, hk, sq, sk, d, dt, c) in cfgs:
        t = torch.float16 if dt == "fp16" else torch.bfloat16
        q, k, v = (torch.randn(b, h, s, d, device="cuda", dtype=t) for h, s in ((hq, sq), (hk, sk), (hk, sk)))
        if time.time() - t0 < 120:
            kern.append([b, hq, hk, sq, sk, d, dt, c, kernels_of(lambda: aten(q, k, v, bool(c)))])
    json.dump(kern, open(out_dir + "/kernels.json", "w"))

    res, cases = {}, []
    seed = [930000]

    def tens(x, dt, shape):
        return torch.from_numpy(x.reshape(shape).view(np.int16).copy()).cuda().view(
            torch.float16 if dt == "fp16" else torch.bfloat16)

    def capture(name, dist, dt, hq, hk, sq, sk, d, causal, transform=None):
        seed[0] += 1
        g = GENS[dist]
        case = {"name": name, "gen": {"q": g[0], "k": g[1], "v": g[2]}, "seed": seed[0], "dtype": dt,
                "causal": bool(causal), "shape_q": [1, hq, sq, d], "shape_kv": [1, hk, sk, d], "transform": transform}
        q, k, v = make_inputs(case)
        if transform:
            k = k.copy()
            k[:, :, 1:, :] = NEG30[dt]
        case["sha256"] = {"q": sha256_hex(q), "k": sha256_hex(k), "v": sha256_hex(v)}
        o, lse = aten(tens(q, dt, case["shape_q"]), tens(k, dt, case["shape_kv"]), tens(v, dt, case["shape_kv"]),
                      bool(causal))
        res[name + "__out"] = o.contiguous().view(torch.int16).cpu().numpy().view(np.uint16)
        res[name + "__lse"] = lse.cpu().numpy()
        cases.append(case)

    # B. single live key
    for d in (128, 160, 192):
        for dt in ("fp16", "bf16"):
            for t in range(6):
                capture(f"single_x30_{dt}_d{d}_t{t}", "uniformx30", dt, 2, 2, 64, 128, d, 0, "single_key")
    # C. D 160 prefill
    for dist in GENS:
        for dt in ("fp16", "bf16"):
            for (hq, hk, sq, sk) in ((2, 2, 64, 128), (8, 1, 37, 129), (2, 2, 128, 128)):
                for c in (0, 1) if sq == sk else (0,):
                    capture(f"pre_{dist}_{dt}_{'causal' if c else 'full'}_h{hq}x{hk}_{sq}x{sk}_d160", dist, dt,
                            hq, hk, sq, sk, 160, c)
    np.savez_compressed(out_dir + "/gap.npz", **res)
    json.dump({"env": [torch.__version__, torch.backends.cudnn.version()], "cases": cases},
              open(out_dir + "/gap_manifest.json", "w"))
    print(len(cases), time.time() - t0)


if __name__ == "__main__":
    main()
