#!/usr/bin/env python3
"""split_kv_ports.py: split-KV ("flash-decoding") as the kernels store it, ported to PyTorch eager on the GPU,
for comparison with the toolkit's split-KV merge models.

Flash-decoding kernels (FlashAttention-2's splitkv + combine kernels, vLLM's paged attention v2, FlashInfer)
run each KV part t to the end of its own softmax and write its NORMALISED output O_t = Õ_t / l_t in a partial
format (the output dtype, or an fp32 accumulation buffer) together with lse_t = m_t + log l_t in fp32; the
combine kernel then merges, in fp32,
    lse = log Σ_t e^{lse_t − lse_max} + lse_max,   O = Σ_t e^{lse_t − lse} · O_t,   out = O cast to fp16.
The toolkit's "merge" stage (docs/decode.md) instead keeps the UNNORMALISED Õ_t, m_t, l_t and rounds those.

What it does
  Draws Q (B, Nq, 1, D), K, V (B, Nkv, Skv, D) with NumPy (default_rng(seed·1000 + x0), float64, uniform
  x0 ± 1: the PASA Eq. 17 generator) and rounds them to fp16, so that the CPU side makes the same inputs
  without copying 270 MB back (--inputs-only); then on the GPU, for every (x0, parts, partial format), runs
    * each part under FA-FP16/FP32 [PASA Fig. 2] (attention_ports.py fa2 with s_dtype fp16; KV blocks of 128
      inside the part), GQA by repeating K/V heads;
    * the combine above, with O_t stored in fp16 or fp32 and lse_t in fp32;
  and a float64 reference of the same inputs (torch, exact enough to rank the errors: the toolkit's golden is
  computed again on the CPU from the saved inputs).
  Grid: B 4, Nq 32, Nkv 8, Skv 8192, D 128; x0 in {0, 10}; parts in {4, 16, 64}; partials fp16 and fp32.

Files written to OUT (default $OUT):
  x0_<x0>/q.npy, k.npy, v.npy           float16 inputs (B, Nq, 1, D), (B, Nkv, Skv, D) (only with --save-inputs
                                        or --inputs-only: 135 MB per x0)
  x0_<x0>/ref64.npy                     float64 reference output (B, Nq, 1, D)
  x0_<x0>/out_p<parts>_<fp16|fp32>.npy  float16 outputs of the ported kernel
  x0_<x0>/lse_p<parts>_<fp16|fp32>.npy  float32 final lse (B, Nq, 1)
  summary.csv                           x0, parts, partial, rmse_vs_ref64 (PASA Eq. 19 form), nan_pct
  gpu_info.json                         torch, CUDA, GPU, matmul settings

How to run (GPU machine, about a minute):
  python3 experiments/gpu/split_kv_ports.py --out "$OUT" [--seed 1] [--device cuda]
and on the CPU machine the same inputs (no torch needed):
  python3 experiments/gpu/split_kv_ports.py --out DIR --inputs-only
Then on the CPU machine, the toolkit on the same inputs (e.g. pasa-attn --q x0_0/q.npy --k x0_0/k.npy --v
x0_0/v.npy --algo-json with "splits": 64 and the merge model) against the golden, and the ratio of the two
RMSEs per point (the issue's target: 0.95-1.05).
"""
import argparse
import csv
import json
import math
import os

import numpy as np

try:
    import torch
    F16, F32, F64 = torch.float16, torch.float32, torch.float64
except ImportError:  # --inputs-only runs without torch
    torch = F16 = F32 = F64 = None
S2 = 128
SHAPE = dict(B=4, Nq=32, Nkv=8, Skv=8192, D=128)
X0S = (0, 10)
PARTS = (4, 16, 64)
PARTIALS = ("fp16", "fp32")  # the format each part's O_t is stored in


def part_fa2(q, k, v):
    """One KV part under FA-FP16/FP32 [PASA Fig. 2] (attention_ports.py fa2, s_dtype fp16), to the end of its
    softmax: returns the normalised O_t (fp32) and lse_t (fp32). q (B, H, 1, D), k, v (B, H, n, D) fp16."""
    B, H, S, D = q.shape
    scale = torch.tensor(1.0 / math.sqrt(D), dtype=F32, device=q.device)  # scale: 1/sqrt(D) in fp32
    m = torch.full((B, H, S, 1), -math.inf, dtype=F32, device=q.device)   # max
    l = torch.zeros((B, H, S, 1), dtype=F32, device=q.device)            # sum
    O = torch.zeros((B, H, S, D), dtype=F32, device=q.device)            # o
    for j0 in range(0, k.shape[2], S2):
        kj, vj = k[:, :, j0:j0 + S2], v[:, :, j0:j0 + S2]
        s = torch.matmul(q, kj.transpose(-1, -2))      # qk_acc fp32, s fp16
        z = s.to(F32) * scale                          # scale
        mnew = torch.maximum(m, z.amax(dim=-1, keepdim=True))
        a = torch.exp(m - mnew)
        p = torch.exp(z - mnew)                        # exp
        rs = p.sum(dim=-1, keepdim=True)               # sum, fp32
        pv = torch.matmul(p.to(F16).to(F32), vj.to(F32))  # p fp16, pv fp32
        l = a * l + rs
        O = a * O + pv
        m = mnew
    return O / l, m + torch.log(l)                     # the part's normalised output and its lse (fp32)


def flash_decode(q, k, v, parts, partial):
    """Split the keys into `parts` equal parts, run each, store O_t in `partial` and lse_t in fp32, and combine
    as FA2's combine kernel does (fp32), output cast to fp16."""
    G = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(G, dim=1)                  # GQA: query head h reads KV head h // G
    v = v.repeat_interleave(G, dim=1)
    n = k.shape[2] // parts
    Os, lses = [], []
    for t in range(parts):
        o_t, lse_t = part_fa2(q, k[:, :, t * n:(t + 1) * n], v[:, :, t * n:(t + 1) * n])
        Os.append(o_t.to(partial))                     # partial O_t stored in the partial format
        lses.append(lse_t.to(F32))                     # lse_t in fp32
    lse_t = torch.stack(lses)                          # (parts, B, H, 1, 1)
    lse_max = lse_t.amax(dim=0)
    lse = torch.log(torch.exp(lse_t - lse_max).sum(dim=0)) + lse_max
    O = torch.zeros_like(Os[0], dtype=F32)
    for t in range(parts):
        O = O + torch.exp(lse_t[t] - lse) * Os[t].to(F32)  # merge weights e^{lse_t - lse}, fp32
    return O.to(F16), lse.squeeze(-1)


def reference64(q, k, v):
    G = q.shape[1] // k.shape[1]
    k = k.to(F64).repeat_interleave(G, dim=1)
    v = v.to(F64).repeat_interleave(G, dim=1)
    s = torch.matmul(q.to(F64), k.transpose(-1, -2)) / math.sqrt(q.shape[-1])
    return torch.matmul(torch.softmax(s, dim=-1), v)


def rmse(o, ref):
    """PASA Eq. 19: ||O - O_ref||_F / ||O_ref||_F over finite elements, and the NaN/inf percentage."""
    o, ref = o.to(F64), ref.to(F64)
    fin = torch.isfinite(o)
    e = torch.linalg.norm((o - ref)[fin]) / torch.linalg.norm(ref[fin])
    return float(e), 100.0 * float((~fin).sum()) / o.numel()


def make_inputs(seed, x0):
    """Q, K, V as float16 numpy arrays: uniform x0 ± 1 drawn in float64, rounded to fp16 (nearest even)."""
    B, Nq, Nkv, Skv, D = (SHAPE[x] for x in ("B", "Nq", "Nkv", "Skv", "D"))
    rng = np.random.default_rng(seed * 1000 + x0)
    draw = lambda *s: (x0 + rng.uniform(-1.0, 1.0, s)).astype(np.float16)
    return draw(B, Nq, 1, D), draw(B, Nkv, Skv, D), draw(B, Nkv, Skv, D)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.environ.get("OUT"), help="output folder (default $OUT)")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--save-inputs", action="store_true", help="also write q/k/v.npy (135 MB per x0)")
    ap.add_argument("--inputs-only", action="store_true", help="write q/k/v.npy and stop (CPU, no torch)")
    a = ap.parse_args()
    if not a.out:
        raise SystemExit("split_kv_ports: give --out or set $OUT")
    if a.inputs_only:
        for x0 in X0S:
            d = os.path.join(a.out, f"x0_{x0}")
            os.makedirs(d, exist_ok=True)
            for name, t in zip("qkv", make_inputs(a.seed, x0)):
                np.save(os.path.join(d, f"{name}.npy"), t)
        return
    if torch is None:
        raise SystemExit("split_kv_ports: needs torch (or --inputs-only)")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    os.makedirs(a.out, exist_ok=True)
    rows = []
    for x0 in X0S:
        arrays = make_inputs(a.seed, x0)
        q, k, v = (torch.from_numpy(t).to(a.device) for t in arrays)
        d = os.path.join(a.out, f"x0_{x0}")
        os.makedirs(d, exist_ok=True)
        if a.save_inputs:
            for name, t in zip("qkv", arrays):
                np.save(os.path.join(d, f"{name}.npy"), t)
        # input digests, so that the CPU side can check it regenerated the same inputs
        rows_digest = {n: int(np.frombuffer(t.tobytes(), np.uint16).astype(np.uint64).sum()) for n, t in zip("qkv", arrays)}
        with open(os.path.join(d, "inputs_digest.json"), "w") as f:
            json.dump(rows_digest, f)
        ref = reference64(q, k, v)
        np.save(os.path.join(d, "ref64.npy"), ref.cpu().numpy())
        for parts in PARTS:
            for pname in PARTIALS:
                o, lse = flash_decode(q, k, v, parts, F16 if pname == "fp16" else F32)
                np.save(os.path.join(d, f"out_p{parts}_{pname}.npy"), o.cpu().numpy())
                np.save(os.path.join(d, f"lse_p{parts}_{pname}.npy"), lse.cpu().numpy())
                e, nan = rmse(o, ref)
                rows.append({"x0": x0, "parts": parts, "partial": pname, "rmse_vs_ref64": e, "nan_pct": nan})
                print(f"x0 {x0:>2} parts {parts:>2} partial {pname}: rmse {e:.6e}, NaN/inf {nan:.3f} %")
    with open(os.path.join(a.out, "summary.csv"), "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0]))
        w.writeheader()
        w.writerows(rows)
    info = {"torch": torch.__version__, "cuda": torch.version.cuda, "device": torch.cuda.get_device_name() if a.device.startswith("cuda") else a.device,
            "shape": SHAPE, "seed": a.seed, "allow_tf32": False, "allow_fp16_reduced_precision_reduction": False}
    with open(os.path.join(a.out, "gpu_info.json"), "w") as f:
        json.dump(info, f, indent=2)


if __name__ == "__main__":
    main()
