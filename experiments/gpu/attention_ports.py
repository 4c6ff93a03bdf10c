#!/usr/bin/env python3
"""attention_ports.py: literal PyTorch eager ports of the PASA paper's attention variants, run on the GPU on
the inputs of make_inputs.py; their outputs are what pasa-hwcompare compares the toolkit's emulation with.

What it does
  For every case of DIR/manifest.json, runs (KV blocked with s2 = 128, all query rows at once; rows do not
  interact, so this equals the toolkit's s1 = 128 row blocks):
    label          port                              inputs   toolkit config (configs/hardware/<label>.json)
    fa_fp32        FA-FP32        [PASA Fig. 1]       fp16     fa2, alloc fa_fp32
    fa_fp16_fp32   FA-FP16/FP32   [PASA Fig. 2]       fp16     fa2, alloc fa_fp16_fp32
    pasa_fp16      PASA-FP16      [PASA Alg. 1]       fp16     pasa, alloc pasa_fp16, printed, m0 = 0
    fa_fp32_bf16   FA-FP32 on bf16 inputs             bf16     fa2, alloc fa_fp32_bf16
    fa_bf16_fp32   FA-BF16/FP32                       bf16     fa2, alloc fa_bf16_fp32
    pasa_bf16      PASA-BF16: bf16 inputs converted   bf16     pasa, alloc pasa_bf16 (bf16_to_fp16 default)
                   to fp16, then PASA-FP16 [PASA §2.2]
  and saves DIR/<case>/out_<label>.npy in the output format (float16; bf16 as uint16 bit patterns).
  Every torch op is commented with the toolkit allocation stage (src/pasa/attention/allocation.hpp) whose
  format it rounds to: q, k, v, qk_acc, s, scale, max, exp, sum, p, pv_acc, pv, o, div, out, shift, k_shift,
  mean. Writes DIR/gpu_info.json (torch version, GPU, CUDA, cuBLAS/TF32 settings).

Numerics of the eager ops (why the ports are literal):
  * Elementwise ops on fp16/bf16 tensors compute in fp32 ("opmath") and round once to the tensor's dtype.
    For +, −, ×, ÷ of two fp16 (bf16) values the fp32 result, rounded again to fp16 (bf16), equals the
    exact result rounded once, because 24 >= 2·11 + 2 (2·8 + 2): double rounding is innocuous [Figueroa
    1995]. So these ops are exactly the toolkit's "compute exactly, round to the stage format". Scalars
    are therefore given as 0-dim tensors of the stage dtype (a Python float would be rounded to fp32, not
    to the stage format). exp on fp16 is expf in fp32, then rounded: it can differ from the correctly
    rounded exp near rounding boundaries (a known source of 1-ulp differences).
  * Reductions on fp16/bf16 (sum, mean) accumulate in fp32 (tree order) and round once; on fp32 they
    accumulate in fp32 in a tree order. The toolkit's reduction model (acc, order) must match this.
  * torch.backends.cuda.matmul.allow_tf32 = False: fp32 GEMMs must multiply in fp32, not TF32 (10-bit
    mantissa), since FA-FP32's S and P·V are fp32 GEMMs here. allow_fp16_reduced_precision_reduction and
    allow_bf16_reduced_precision_reduction = False: cuBLAS must accumulate fp16/bf16 GEMMs in fp32 (the
    qk_acc/pv_acc = fp32 of every preset), not in reduced precision in split-K reductions.
  * FA-FP32's S = Q·Kᵀ with an fp32 output: torch.matmul of fp16 tensors can only return fp16, so the fp16
    inputs are upcast to fp32 first. The product of two fp16 (or bf16) values is exact in fp32, so this
    GEMM sums the same exact products in fp32 as an fp16 tensor-core GEMM with an fp32 output would; only
    the accumulation order is cuBLAS's (as it is for any GEMM). The same for P·V with the fp32 output.

How to run (GPU machine; about 1-2 s per case, ~90 cases: about 2-3 min)
  python3 experiments/gpu/attention_ports.py --dir DIR [--labels fa_fp32,pasa_fp16] [--device cuda]
"""
import argparse
import json
import math
import os
import sys

import numpy as np
import torch

S2 = 128            # KV block size s2
BETA = 0.984497     # PASA Table 3's β for fp16, n = 128

F16, BF16, F32 = torch.float16, torch.bfloat16, torch.float32


def fa2(q, k, v, s_dtype, lp):
    """FlashAttention 2 [FA2, Alg. 1] under PASA Fig. 1 (s_dtype fp32) or Fig. 2 (s_dtype = lp).

    q, k, v: (B, H, S, D) tensors of dtype lp (stages q, k, v). Everything between the GEMMs is fp32."""
    B, H, S, D = q.shape
    scale = torch.tensor(1.0 / math.sqrt(D), dtype=F32, device=q.device)  # scale: 1/sqrt(D) rounded to fp32
    m = torch.full((B, H, S, 1), -math.inf, dtype=F32, device=q.device)  # max: running max, −inf
    l = torch.zeros((B, H, S, 1), dtype=F32, device=q.device)           # sum: running row sum
    O = torch.zeros((B, H, S, D), dtype=F32, device=q.device)           # o: running output
    for j0 in range(0, k.shape[2], S2):
        kj, vj = k[:, :, j0:j0 + S2], v[:, :, j0:j0 + S2]
        if s_dtype == F32:
            # qk_acc fp32, s fp32: the exact lp products summed in fp32 by an fp32 GEMM (see header)
            s = torch.matmul(q.to(F32), kj.to(F32).transpose(-1, -2))
        else:
            # qk_acc fp32 (cuBLAS, reduced-precision reduction off), s = lp: the GEMM writes S in lp
            s = torch.matmul(q, kj.transpose(-1, -2))
        z = s.to(F32) * scale                          # scale: S·scale in fp32
        mnew = torch.maximum(m, z.amax(dim=-1, keepdim=True))  # max: m_j = max(m_{j−1}, rowmax(S_j))
        a = m - mnew                                   # max: m_{j−1} − m_j
        a = torch.exp(a)                               # exp: e^{m_{j−1} − m_j} (0 on the first block)
        x = z - mnew                                   # exp: S_j − m_j
        p = torch.exp(x)                               # exp: P̃_j
        rs = p.sum(dim=-1, keepdim=True)               # sum: rowsum(P̃_j), fp32 accumulation
        p_lp = p.to(lp)                                # p: P̃_j cast to lp for the P·V GEMM
        pv = torch.matmul(p_lp.to(F32), vj.to(F32))    # pv_acc fp32, pv fp32: exact lp products summed in fp32
        l = a * l                                      # sum: e^{..}·l_{j−1}
        l = l + rs                                     # sum: + rowsum
        O = a * O                                      # o: e^{..}·O_{j−1}
        O = O + pv                                     # o: + P̃_j·V_j
        m = mnew
    o = O / l                                          # div: O / l in fp32
    return o.to(lp)                                    # out: cast to lp


def pasa(q, k, v, lp=F16):
    """PASA [PASA Alg. 1] as printed (P' = exp(S' − m'_j) with the local max, rescaled by e^{Δm_j}; m_0 = 0),
    every tensor in fp16; GEMMs accumulate in fp32 and write fp16 (Fig. 3). The same steps, in the same
    order, as the toolkit's pasa engine with form "printed" (src/pasa/attention/detail/pasa_attention.cpp)."""
    B, H, S, D = q.shape
    dev = q.device
    if lp != F16:
        sys.exit("attention_ports: the PASA port runs in fp16 (bf16 inputs are converted first, PASA §2.2)")
    # Constants rounded once from float64 to fp16 by NumPy (correctly rounded; torch converts a double to
    # half through float, a double rounding).
    c = lambda x: torch.from_numpy(np.array(x, dtype=np.float64).astype(np.float16)).to(dev)
    n = S2
    # shift: M = (I − β/s2·J)/α [Eq. 10], 1/α = 1/sqrt(D) folded in; computed in float64, rounded once to fp16
    inv_alpha = 1.0 / math.sqrt(D)
    M64 = np.full((n, n), -BETA / n * inv_alpha, dtype=np.float64)
    np.fill_diagonal(M64, (1.0 - BETA / n) * inv_alpha)
    M = torch.from_numpy(M64.astype(np.float16)).to(dev)
    if k.shape[2] % n:
        sys.exit("attention_ports: PASA port needs the KV length to be a multiple of s2 = 128")
    # k_shift: K' = M·K_j per block [Eq. 11] (the paper writes Kᵀ·M, the transpose of the same product);
    # qk_acc fp32, written in lp
    kb = k.reshape(B, H, k.shape[2] // n, n, D)
    kshift = torch.matmul(M, kb).reshape(B, H, k.shape[2], D)
    inva = c(BETA / (1.0 - BETA))                      # mean: Inva = β/(1 − β) rounded to lp
    m = torch.zeros((B, H, S, 1), dtype=lp, device=dev)   # max: m_0 = 0 as printed
    l = torch.zeros((B, H, S, 1), dtype=lp, device=dev)   # sum
    O = torch.zeros((B, H, S, D), dtype=lp, device=dev)   # o
    F = torch.zeros((B, H, S, 1), dtype=lp, device=dev)   # mean: pseudo-average F
    for jj, j0 in enumerate(range(0, k.shape[2], n), start=1):
        kj, vj = kshift[:, :, j0:j0 + n], v[:, :, j0:j0 + n]
        z = torch.matmul(q, kj.transpose(-1, -2))     # qk_acc fp32, s lp: S' = Q·K'ᵀ [Eq. 12]
        mean = z.mean(dim=-1, keepdim=True)            # mean: S̄'_j = rowmean(S') (step 13; fp32 acc, one rounding)
        if jj == 1:                                    # mean: F^1 = F^0 = S̄'_1 [Eq. 15]
            Fnew, Fold = mean, mean
        else:
            Fold = F
            Fnew = c(jj - 1) * F                       # mean: (j − 1)·F^{j−1}
            Fnew = Fnew + mean                         # mean: + S̄'_j
            Fnew = Fnew / c(jj)                        # mean: / j  [Eq. 15]
        d_old = Fold - Fnew                            # mean: F^{j−1} − F^j (step 15)
        d_old = inva * d_old                           # mean: Δm'_{j−1} = Inva·(F^{j−1} − F^j)
        d_new = mean - Fnew                            # mean: S̄'_j − F^j
        d_new = inva * d_new                           # mean: Δm'_j = Inva·(S̄'_j − F^j)
        F = Fnew
        mloc = z.amax(dim=-1, keepdim=True)            # max: m'_j = rowmax(S') (step 12)
        cand_old = m + d_old                           # max: m_{j−1} + Δm'_{j−1}
        cand_new = mloc + d_new                        # max: m'_j + Δm'_j
        mnew = torch.maximum(cand_old, cand_new)       # max: m_j (step 16)
        a_old = m - mnew                               # max: m_{j−1} − m_j
        a_old = a_old + d_old                          # max: Δm_{j−1} = m_{j−1} − m_j + Δm'_{j−1} (step 17)
        a_old = torch.exp(a_old)                       # exp: e^{Δm_{j−1}}
        a_new = mloc - mnew                            # max: m'_j − m_j
        a_new = a_new + d_new                          # max: Δm_j = m'_j − m_j + Δm'_j (step 17)
        a_new = torch.exp(a_new)                       # exp: e^{Δm_j}
        m = mnew
        x = z - mloc                                   # exp: S' − m'_j
        p = torch.exp(x)                               # exp: P' = exp(S' − m'_j) (step 12)
        rs = p.sum(dim=-1, keepdim=True)               # sum: l'_j = rowsum(P') (fp32 acc, one rounding)
        pv = torch.matmul(p, vj)                       # p lp, pv_acc fp32, pv lp: P'·V_j (step 19)
        rs = a_new * rs                                # sum: e^{Δm_j}·l'_j (step 18)
        pv = a_new * pv                                # o: e^{Δm_j}·(P'V) (step 20)
        l = a_old * l                                  # sum: e^{Δm_{j−1}}·l_{j−1}
        l = l + rs                                     # sum: l_j (step 18)
        O = a_old * O                                  # o: e^{Δm_{j−1}}·O_{j−1}
        O = O + pv                                     # o: O_j (step 20)
    o = O / l                                          # div: O / l (step 22)
    return o                                           # out: lp


def load(d, name, bf16):
    x = np.load(os.path.join(d, name))
    t = torch.from_numpy(x)
    if bf16:
        if x.dtype != np.uint16:
            sys.exit(f"attention_ports: {os.path.join(d, name)}: expected uint16 bf16 bits, got {x.dtype}")
        return t.view(torch.int16).view(BF16)
    if x.dtype != np.float16:
        sys.exit(f"attention_ports: {os.path.join(d, name)}: expected float16, got {x.dtype}")
    return t


LABELS = {
    # label: (input dtype, function)
    "fa_fp32": ("fp16", lambda q, k, v: fa2(q, k, v, F32, F16)),
    "fa_fp16_fp32": ("fp16", lambda q, k, v: fa2(q, k, v, F16, F16)),
    "pasa_fp16": ("fp16", lambda q, k, v: pasa(q, k, v, F16)),
    "fa_fp32_bf16": ("bf16", lambda q, k, v: fa2(q, k, v, F32, BF16)),
    "fa_bf16_fp32": ("bf16", lambda q, k, v: fa2(q, k, v, BF16, BF16)),
    # [PASA §2.2] with bf16 inputs PASA runs in fp16: q, k, v converted bf16 → fp16 (the toolkit's default
    # bf16_to_fp16); the output is fp16.
    "pasa_bf16": ("bf16", lambda q, k, v: pasa(q.to(F16), k.to(F16), v.to(F16), F16)),
}


def save_out(path, o):
    if o.dtype == BF16:
        np.save(path, o.view(torch.int16).cpu().numpy().view(np.uint16))
    else:
        np.save(path, o.cpu().numpy())


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dir", required=True, help="folder written by make_inputs.py")
    ap.add_argument("--labels", default=",".join(LABELS), help="comma-separated subset of " + ",".join(LABELS))
    ap.add_argument("--device", default="cuda")
    a = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False
    labels = a.labels.split(",")
    for lb in labels:
        if lb not in LABELS:
            sys.exit(f"attention_ports: unknown label {lb!r}; known: {', '.join(LABELS)}")
    with open(os.path.join(a.dir, "manifest.json")) as h:
        manifest = json.load(h)
    info = {
        "torch": torch.__version__, "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0) if a.device.startswith("cuda") else a.device,
        "capability": list(torch.cuda.get_device_capability(0)) if a.device.startswith("cuda") else None,
        "cublas": {"allow_tf32": torch.backends.cuda.matmul.allow_tf32,
                   "allow_fp16_reduced_precision_reduction":
                       torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction,
                   "allow_bf16_reduced_precision_reduction":
                       torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction,
                   "cudnn_allow_tf32": torch.backends.cudnn.allow_tf32},
        "why": "TF32 off: fp32 GEMMs multiply in fp32; reduced-precision reductions off: fp16/bf16 GEMMs "
               "accumulate in fp32 (qk_acc = pv_acc = fp32 in every preset)",
        "s2": S2, "beta": BETA, "labels": labels,
    }
    with open(os.path.join(a.dir, "gpu_info.json"), "w") as h:
        json.dump(info, h, indent=1)
    with torch.no_grad():
        for case in manifest["cases"]:
            d = os.path.join(a.dir, case["name"])
            inputs = {}
            for lb in labels:
                kind, fn = LABELS[lb]
                if kind not in inputs:
                    files = case["files"][kind]
                    inputs[kind] = [load(d, f, kind == "bf16").to(a.device) for f in files]
                o = fn(*inputs[kind])
                save_out(os.path.join(d, f"out_{lb}.npy"), o)
            print(case["name"], flush=True)
    print(f"{len(manifest['cases'])} cases x {len(labels)} labels done")


if __name__ == "__main__":
    main()
