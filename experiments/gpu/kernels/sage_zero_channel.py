#!/usr/bin/env python3
"""sage_zero_channel.py: what SageAttention's kernels give where a quantisation group is all zero, on the GPU.

  python3 sage_zero_channel.py --sage SAGE_CHECKOUT --out OUT

The question users bring (thu-ml/SageAttention #221, black images): does a V channel, a Q block or K that is
all zero make the output NaN? The source reads so for SA2's per-channel FP8 V (csrc/fused/fused.cu,
MeanScaleKernel: the scale amax / 448 is 0 and the reciprocal 448 / amax is inf, so 0 · inf = NaN), while
Q's and K's INT8 groups start their amax at 1e-7 ("prevent from dividing by zero"). pasa's recipes
(sage1_triton, sage2_sm90) follow the source; this measures it. Per case, the inputs and every output bit
and LSE go to OUT/sage_zero_captures.npz (keys <case>__q/k/v/__sa1__out/...), compared on a CPU by
sage_zero_compare.py. SAGE_CHECKOUT is a thu-ml/SageAttention checkout (d1a57a5) with its sm90 extensions
built in place (sage_setup.py); SA1 (Triton) runs without them.
"""
import argparse
import json
import os
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from sage_capture import bits, load_sage  # noqa: E402

# (name, what is zero): every case has Hq = Hkv = 2, Sq = Skv = 256, one batch; head 0 holds the zero group,
# head 1 is left as drawn (its output must stay finite: the zero group is per head).
ZEROS = ["v_channel", "v_all", "q_block", "k_all", "none"]


def make(name, dtype, d, seed):
    rng = np.random.default_rng(seed)
    q, k, v = (rng.uniform(-1, 1, (1, 2, 256, d)) for _ in range(3))
    if name == "v_channel":
        v[0, 0, :, 5] = 0.0       # one channel of V over every key
    elif name == "v_all":
        v[0, 0] = 0.0
    elif name == "q_block":
        q[0, 0, :128] = 0.0       # a whole 128-row block of Q (SA2's BLKQ 64 and SA1's 128 both)
    elif name == "k_all":
        k[0, 0] = 0.0             # K smoothed by its mean is zero too
    if dtype == "fp16":
        return tuple(x.astype(np.float16) for x in (q, k, v))
    try:
        import ml_dtypes
        return tuple(x.astype(ml_dtypes.bfloat16) for x in (q, k, v))
    except ImportError:  # (the CPU side without ml_dtypes: the same bits as uint16, via float32 and RNE)
        def bf16_bits(x):
            f = x.astype(np.float32).view(np.uint32).astype(np.uint64)
            return ((f + 0x7FFF + ((f >> 16) & 1)) >> 16).astype(np.uint16)
        return tuple(bf16_bits(x) for x in (q, k, v))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sage", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    lines = []

    def log(s):
        lines.append(f"{time.time() - t0:7.1f}s {s}")
        print(lines[-1], flush=True)

    import torch
    _, core, built = load_sage(os.path.abspath(a.sage), log)
    arrays, cases, seed = {}, [], 9100
    for zero in ZEROS:
        for dtype in ("fp16", "bf16"):
            for d in (64, 128):
                seed += 1
                name = f"{zero}_{dtype}_d{d}"
                q, k, v = make(zero, dtype, d, seed)
                tdt = torch.float16 if dtype == "fp16" else torch.bfloat16
                tq, tk, tv = (torch.from_numpy(x.view(np.int16).copy()).cuda().view(tdt) for x in (q, k, v))
                for key, x in (("q", q), ("k", k), ("v", v)):
                    arrays[f"{name}__{key}"] = x.view(np.uint16)
                c = {"name": name, "zero": zero, "dtype": dtype, "d": d, "seed": seed, "results": {}}
                for which in ("sa1", "sa2"):
                    try:
                        if which == "sa1":
                            o, lse = core.sageattn_qk_int8_pv_fp16_triton(tq, tk, tv, tensor_layout="HND",
                                                                          is_causal=False, return_lse=True)
                        elif built.get("_qattn_sm90") and built.get("_fused"):
                            o, lse = core.sageattn_qk_int8_pv_fp8_cuda_sm90(
                                tq, tk, tv, tensor_layout="HND", is_causal=False, qk_quant_gran="per_thread",
                                pv_accum_dtype="fp32+fp32", return_lse=True)
                        else:
                            c["results"][which] = {"status": "not built"}
                            continue
                        torch.cuda.synchronize()
                        ob = bits(o)
                        arrays[f"{name}__{which}__out"] = ob
                        arrays[f"{name}__{which}__lse"] = lse.float().cpu().numpy()
                        of = o.float().cpu().numpy()
                        c["results"][which] = {"status": "ok", "nan_head0": int(np.isnan(of[0, 0]).sum()),
                                               "nan_head1": int(np.isnan(of[0, 1]).sum()),
                                               "nan_columns_head0": sorted({int(j) for j in np.where(
                                                   np.isnan(of[0, 0]).any(axis=0))[0]})[:16]}
                    except Exception as e:  # noqa: BLE001
                        c["results"][which] = {"status": "error", "error": str(e)[:300]}
                log(f"{name}: " + json.dumps(c["results"]))
                cases.append(c)
    np.savez_compressed(os.path.join(a.out, "sage_zero_captures.npz"), **arrays)
    with open(os.path.join(a.out, "sage_zero_manifest.json"), "w") as f:
        json.dump({"sage_commit": "d1a57a546c3d395b1ffcbeecc66d81db76f3b4b5", "torch": torch.__version__,
                   "gpu": torch.cuda.get_device_name(), "sage_built": built, "cases": cases, "log": lines}, f,
                  indent=1)
    log("done")


if __name__ == "__main__":
    main()
