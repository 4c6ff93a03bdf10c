#!/usr/bin/env python3
"""mma_probe_pack.py: the INT8 part of mma_probe.py's output as the JSON that tests/attention/
test_tensor_core_models.cpp reads (results/hardware/mma_probe/int8_mma.json: 8 cases per kind and chain
length; int_mm.json: torch._int_mm's random GEMMs), and the raw capture kept beside it (mma_probe.npz).
How to run: python3 experiments/gpu/mma_probe_pack.py DIR_WITH_mma_probe.npz results/hardware/mma_probe"""
import json, os, shutil, sys
import numpy as np

src, dst = sys.argv[1], sys.argv[2]
d = np.load(os.path.join(src, "mma_probe.npz"))
os.makedirs(dst, exist_ok=True)
out = {"source": "experiments/gpu/mma_probe.py on an NVIDIA H200 (kernels/mma_probe.cu: mma.sync m16n8k32 s8.s8.s32)",
       "layout": "per case: A (16 x K) int8, B (K x 8) int8, C0 and D (16 x 8) int32; D = the chain of K/32 instructions",
       "kinds": {}}
for kind, model in (("s8", "int8"), ("s8_sat", "int8_satfinite")):
    cases = []
    for nk in (1, 2, 4, 8):
        A = d[f"{kind}_nk{nk}_A"].view(np.int8); Bt = d[f"{kind}_nk{nk}_Bt"].view(np.int8)
        C0 = d[f"{kind}_nk{nk}_C0"].view(np.int32); D = d[f"{kind}_nk{nk}_D"].view(np.int32)
        for c in list(range(0, 8)) + list(range(24, 28)):  # zero C0 and random / near-2^31 ones
            a = np.concatenate([A[c, q] for q in range(nk)], axis=1)          # 16 x K
            b = np.concatenate([Bt[c, q] for q in range(nk)], axis=1).T        # K x 8
            cases.append({"K": 32 * nk, "a": a.ravel().tolist(), "b": b.ravel().tolist(),
                          "c0": C0[c].ravel().tolist(), "d": D[c].ravel().tolist()})
    out["kinds"][model] = cases
with open(os.path.join(dst, "int8_mma.json"), "w") as f:
    json.dump(out, f, separators=(",", ":"))
mm = {"source": "torch._int_mm on an NVIDIA H200 (mma_probe.py): D = A (32 x K) . B (K x 32), int8 -> int32", "cases": []}
for K in (64, 1024):
    mm["cases"].append({"K": K, "a": d[f"intmm_K{K}_A"].ravel().tolist(), "b": d[f"intmm_K{K}_B"].ravel().tolist(),
                        "d": d[f"intmm_K{K}_D"].ravel().tolist()})
with open(os.path.join(dst, "int_mm.json"), "w") as f:
    json.dump(mm, f, separators=(",", ":"))
shutil.copy(os.path.join(src, "mma_probe.npz"), os.path.join(dst, "mma_probe.npz"))
