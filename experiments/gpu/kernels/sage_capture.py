#!/usr/bin/env python3
"""sage_capture.py: SageAttention's kernels on the GPU, captured once so that pasa's SageAttention recipes can be
checked bit for bit on a CPU later (sage_compare.py).

  python3 sage_capture.py --sage SAGE_CHECKOUT --out OUT [--deadline SECONDS] [--quick] [--which sa1,sa2]

SAGE_CHECKOUT is a thu-ml/SageAttention checkout (commit d1a57a5). Its Triton kernels run as they are; the
compiled SA2 sm90 kernel and V's FP8 quantisation run where `sage_setup.py build_ext --inplace` has built them
(otherwise that part is skipped and the manifest says so). Nothing of SageAttention is copied into pasa.

What is captured, per case (inputs: kernel_inputs.py, regenerable from the manifest; their sha256 recorded):
  sa1  sageattention.sageattn_qk_int8_pv_fp16_triton(q, k, v, is_causal, return_lse=True): the output bits and
       LSE; and the wrapper's intermediates, recomputed with its own functions in its own order: km =
       k.mean(seq), per_block_int8(q, k, km, sm_scale) -> q_int8, q_scale, k_int8, k_scale
  sa2  sageattention.sageattn_qk_int8_pv_fp8_cuda_sm90(..., qk_quant_gran="per_thread", pv_accum_dtype=
       "fp32+fp32"): output bits, LSE; per_thread_int8(q, k, km, 64, 16, 128, 128) and per_channel_fp8(v)
Probes (Triton, SA1's launch shapes):
  dot16   tl.dot(P, V, out_dtype=float16) of one 128 x 64 by 64 x D tile: the tensor core's fp16 accumulation
  div     x / y in fp32 (Triton's division), exp2 (tl.math.exp2) on inputs that reach subnormal results
"""
import argparse
import importlib
import json
import math
import os
import sys
import time
import types

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from kernel_inputs import make_inputs, sha256_hex  # noqa: E402
from sdpa_capture import U11, case, env_info, save_arrays, uni  # noqa: E402

DISTS = {
    "uniform": {"q": U11, "k": U11, "v": U11},
    "uniformx20": {"q": uni(20, 0.5), "k": uni(20, 0.5), "v": U11},
    "hybridx20am10": {"q": {"dist": "hybrid", "x0": 20.0, "am": 10.0, "p": 0.001},
                      "k": {"dist": "hybrid", "x0": 20.0, "am": 10.0, "p": 0.001}, "v": U11},
    "kbias5": {"q": U11, "k": uni(5, 1), "v": uni(0.5, 0.5)},  # K with a mean smooth K takes out; V >= 0
}
SHAPES = {  # (Hq, Hkv, Sq, Skv); causal only where Sq = Skv (SageAttention's causal is top-left)
    "sq128": (2, 2, 128, 128),
    "gqa": (4, 2, 200, 333),
    "odd": (2, 2, 257, 257),
    "long": (1, 1, 1024, 1024),
    "decode": (2, 2, 1, 333),
}


def cases(quick):
    out, seed = [], 7000
    for dist, gen in DISTS.items():
        for dtype in ("fp16", "bf16"):
            for d in (64, 128):
                for sname, (hq, hkv, sq, skv) in SHAPES.items():
                    for causal in ((False, True) if sq == skv else (False,)):
                        seed += 1
                        if quick and (dist != "uniform" or sname not in ("sq128", "gqa")):
                            continue
                        out.append(case(f"{dist}_{dtype}_{'causal' if causal else 'full'}_d{d}_{sname}", gen, seed,
                                        dtype, causal, hq, hkv, sq, skv, d, set_="sage"))
    return out


def load_sage(path, log):
    """Imports the checkout's package; a missing compiled extension becomes an empty module (its users fail)."""
    sys.path.insert(0, path)
    built = {}
    for ext in ("_fused", "_qattn_sm90", "_qattn_sm80", "_qattn_sm89"):
        name = f"sageattention.{ext}"
        try:
            importlib.import_module(name)
            built[ext] = True
        except Exception as e:  # noqa: BLE001
            sys.modules[name] = types.ModuleType(name)
            built[ext] = False
            log(f"{name}: not built ({str(e)[:120]})")
    import sageattention
    import sageattention.core as core
    return sageattention, core, built


def bits(t):
    import torch
    return t.contiguous().view(torch.int16).cpu().numpy().view(np.uint16)


def run_cases(torch, core, built, cs, arrays, log, deadline, which=("sa1", "sa2")):
    for c in cs:
        if time.time() > deadline:
            c["skipped"] = "deadline"
            continue
        qb, kb, vb = make_inputs(c)
        c["sha256"] = {"q": sha256_hex(qb), "k": sha256_hex(kb), "v": sha256_hex(vb)}
        dt = torch.float16 if c["dtype"] == "fp16" else torch.bfloat16
        q, k, v = (torch.from_numpy(x.reshape(s).view(np.int16).copy()).cuda().view(dt)
                   for x, s in ((qb, c["shape_q"]), (kb, c["shape_kv"]), (vb, c["shape_kv"])))
        causal, D = c["causal"], c["shape_q"][3]
        sm_scale = D ** -0.5
        c["results"] = {}
        name = c["name"]
        km = k.mean(dim=2, keepdim=True)
        if "sa1" in which:
            try:
                o, lse = core.sageattn_qk_int8_pv_fp16_triton(q, k, v, tensor_layout="HND", is_causal=causal, return_lse=True)
                qi, qs, ki, ks = core.per_block_int8_triton(q, k, km=km, sm_scale=sm_scale, tensor_layout="HND")
                torch.cuda.synchronize()
                for key, val in (("out", bits(o)), ("lse", lse.float().cpu().numpy()), ("km", bits(km)),
                                 ("qi", qi.cpu().numpy()), ("qs", qs.cpu().numpy()), ("ki", ki.cpu().numpy()),
                                 ("ks", ks.cpu().numpy())):
                    arrays[f"{name}__sa1__{key}"] = val
                c["results"]["sa1"] = {"status": "ok"}
            except Exception as e:  # noqa: BLE001
                c["results"]["sa1"] = {"status": "error", "error": str(e)[:300]}
        if "sa2" in which and built.get("_qattn_sm90") and built.get("_fused"):
            try:
                o, lse = core.sageattn_qk_int8_pv_fp8_cuda_sm90(q, k, v, tensor_layout="HND", is_causal=causal,
                                                                qk_quant_gran="per_thread", pv_accum_dtype="fp32+fp32",
                                                                return_lse=True)
                qi, qs, ki, ks = core.per_thread_int8_triton(q, k, km, tensor_layout="HND", BLKQ=64, WARPQ=16,
                                                             BLKK=128, WARPK=128)
                vv = v if D in (64, 128) else None
                v8, vs, _ = core.per_channel_fp8(vv, tensor_layout="HND", smooth_v=False)
                torch.cuda.synchronize()
                for key, val in (("out", bits(o)), ("lse", lse.float().cpu().numpy()), ("qi", qi.cpu().numpy()),
                                 ("qs", qs.cpu().numpy()), ("ki", ki.cpu().numpy()), ("ks", ks.cpu().numpy()),
                                 ("v8", v8.view(torch.uint8).cpu().numpy()), ("vs", vs.cpu().numpy())):
                    arrays[f"{name}__sa2__{key}"] = val
                c["results"]["sa2"] = {"status": "ok"}
            except Exception as e:  # noqa: BLE001
                c["results"]["sa2"] = {"status": "error", "error": str(e)[:300]}
        log(f"{name}: " + ", ".join(f"{k}={r['status']}" for k, r in c["results"].items()))


def probes(torch, arrays, log):
    import triton
    import triton.language as tl

    @triton.jit
    def dot16(P, V, O, O32, D: tl.constexpr, M: tl.constexpr, N: tl.constexpr):
        m = tl.arange(0, M)
        n = tl.arange(0, N)
        d = tl.arange(0, D)
        p = tl.load(P + m[:, None] * N + n[None, :])
        v = tl.load(V + n[:, None] * D + d[None, :])
        tl.store(O + m[:, None] * D + d[None, :], tl.dot(p, v, out_dtype=tl.float16))
        tl.store(O32 + m[:, None] * D + d[None, :], tl.dot(p, v, out_dtype=tl.float32))

    @triton.jit
    def elementwise(X, Y, Q, E, n, BLOCK: tl.constexpr):
        i = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
        msk = i < n
        x = tl.load(X + i, mask=msk)
        y = tl.load(Y + i, mask=msk, other=1.0)
        tl.store(Q + i, x / y, mask=msk)
        tl.store(E + i, tl.math.exp2(x), mask=msk)

    rng = np.random.default_rng(20261202)
    for D in (64, 128):
        for vname, vscale in (("u1", 1.0), ("u100", 100.0)):
            for t in range(8):
                # P as the kernel casts it: 2^(x) of x in [-20, 0], to fp16; one 1 per row (the max)
                x = -20.0 * rng.random((128, 64))
                x[np.arange(128), rng.integers(0, 64, 128)] = 0.0
                p = np.exp2(x).astype(np.float16)
                v = (vscale * (2 * rng.random((64, D)) - 1)).astype(np.float16)
                P = torch.from_numpy(p).cuda()
                V = torch.from_numpy(v).cuda()
                O = torch.empty((128, D), dtype=torch.float16, device="cuda")
                O32 = torch.empty((128, D), dtype=torch.float32, device="cuda")
                dot16[(1,)](P, V, O, O32, D=D, M=128, N=64, num_warps=4 if D == 64 else 8,
                            num_stages=3 if D == 64 else 4)
                torch.cuda.synchronize()
                key = f"dot16_d{D}_{vname}_{t}"
                arrays[f"{key}__p"] = p.view(np.uint16)
                arrays[f"{key}__v"] = v.view(np.uint16)
                arrays[f"{key}__o16"] = bits(O)
                arrays[f"{key}__o32"] = O32.cpu().numpy()
    n = 1 << 20
    xs = np.concatenate([(rng.random(n // 2) * 300 - 160), rng.standard_normal(n // 2) * 10]).astype(np.float32)
    ys = (np.exp2(rng.random(n) * 40 - 20) * np.sign(rng.random(n) - 0.5)).astype(np.float32)
    X, Y = torch.from_numpy(xs).cuda(), torch.from_numpy(ys).cuda()
    Q, E = torch.empty_like(X), torch.empty_like(X)
    elementwise[(n // 1024,)](X, Y, Q, E, n, BLOCK=1024)
    torch.cuda.synchronize()
    arrays["elem__x"], arrays["elem__y"] = xs, ys
    arrays["elem__div"], arrays["elem__exp2"] = Q.cpu().numpy(), E.cpu().numpy()
    log(f"probes: dot16 32 tiles, elementwise {n} values")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sage", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--deadline", type=float, default=300)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--which", default="sa1,sa2", help="kernels to run, comma-separated (sa1, sa2)")
    a = ap.parse_args()
    which = tuple(a.which.split(","))
    if not set(which) <= {"sa1", "sa2"}:
        ap.error(f"--which: {a.which!r}: expected sa1 and/or sa2")
    os.makedirs(a.out, exist_ok=True)
    t0 = time.time()
    lines = []

    def log(s):
        lines.append(f"{time.time() - t0:7.1f}s {s}")
        print(lines[-1], flush=True)

    import torch
    import triton
    env = env_info(torch)
    env["triton"] = triton.__version__
    _, core, built = load_sage(os.path.abspath(a.sage), log)
    env["sage_built"] = built
    arrays = {}
    if "sa1" in which:  # the probes are SA1's (Triton) steps
        probes(torch, arrays, log)
    cs = cases(a.quick)
    run_cases(torch, core, built, cs, arrays, log, t0 + a.deadline, which)
    files = save_arrays(arrays, a.out, "sage_captures")
    man = {"env": env, "sage_commit": "d1a57a546c3d395b1ffcbeecc66d81db76f3b4b5", "files": files, "cases": cs,
           "log": lines}
    with open(os.path.join(a.out, "sage_manifest.json"), "w") as f:
        json.dump(man, f, indent=1)
    log("done")


if __name__ == "__main__":
    main()
