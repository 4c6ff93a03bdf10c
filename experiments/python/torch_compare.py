#!/usr/bin/env python3
"""torch_compare.py: the GPU's attention against the emulator's, on the same torch tensors.

What it does
  For each seed, draws Q, K, V with torch on the GPU (uniform, PASA Eq. 17: U(x0 - Am, x0 + Am), or hybrid,
  Eq. 18; float64, then .to(float16) as torch rounds: nearest even), runs torch's attention on them
  (torch.nn.functional.scaled_dot_product_attention with the chosen backend: flash = FlashAttention-2, the
  kernel the paper's FA-FP16 stands for; efficient; or math), and hands the same tensors to the emulator
  through .cpu().numpy(): pasa.attention under each allocation asked for, and pasa.golden. It prints, per
  seed and allocation, the RMSE (PASA Eq. 19) of the GPU and of the emulator against the golden, their NaN %,
  and how many output elements are bit-identical / within one fp16 ulp between GPU and emulator.

  The default allocation "kernel" is what a FlashAttention-2 kernel keeps: fp16 inputs, S, the softmax and
  O in fp32 registers, P cast to fp16 for the P·V GEMM, fp32 accumulation, the output stored in fp16
  ({"preset": "fa_fp32", "stages": {"p": "fp16", "out": "fp16"}}); any preset name or allocation JSON may be
  added with --alloc (e.g. fa_fp16_fp32, the paper's Fig. 2, overflows where the kernel does not).

How to run (one command on a GPU machine with PyTorch, where `import pasa` works: a build of this repository
with the module, for that Python; about 10 s per seed at the paper's shape, 16 threads):
  PYTHONPATH=build/python python3 experiments/python/torch_compare.py [--device cuda] [--seeds 1,2,3]
      [--shape 1,16,1280,128] [--gen uniform] [--x0 20] [--am 0.5] [--backend flash]
      [--alloc kernel --alloc fa_fp16_fp32 ...] [--threads N] [--save DIR] [--json FILE]
  Without the module on that machine: run it there with --save DIR (torch only: the inputs and the GPU's
  outputs as .npy), then anywhere the module is built:
      build/pasa-python experiments/python/torch_compare.py --compare DIR [--alloc ...] [--json FILE]
"""
import argparse
import json
import math
import os
import sys

import numpy as np

KERNEL = {"preset": "fa_fp32", "name": "fa2_kernel_fp16", "stages": {"p": "fp16", "out": "fp16"}}


def parse_args():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--device", default="cuda")
    ap.add_argument("--seeds", default="1,2,3", help="comma-separated torch seeds")
    ap.add_argument("--shape", default="1,16,1280,128", help="B,N,S,D (the paper's shape)")
    ap.add_argument("--gen", choices=["uniform", "hybrid"], default="uniform")
    ap.add_argument("--x0", type=float, default=20.0)
    ap.add_argument("--am", type=float, default=0.5)
    ap.add_argument("--backend", choices=["flash", "efficient", "math"], default="flash")
    ap.add_argument("--alloc", action="append", help="'kernel' (default), a preset name or allocation JSON; repeatable")
    ap.add_argument("--threads", type=int, default=None, help="emulator threads (default: all cores)")
    ap.add_argument("--save", help="also write the inputs and the GPU outputs to this folder")
    ap.add_argument("--compare", help="no torch: compare the folder a --save run wrote")
    ap.add_argument("--json", help="write the results table as JSON")
    a = ap.parse_args()
    a.alloc = a.alloc or ["kernel"]
    return a


def torch_cases(a):
    """Yields (name, q, k, v, gpu_out) as numpy arrays (float16), drawing and running attention with torch."""
    import torch
    import torch.nn.functional as F

    dev = torch.device(a.device)
    shape = tuple(int(x) for x in a.shape.split(","))
    torch.backends.cuda.matmul.allow_tf32 = False
    try:  # torch >= 2.3
        from torch.nn.attention import SDPBackend, sdpa_kernel
        backend = {"flash": SDPBackend.FLASH_ATTENTION, "efficient": SDPBackend.EFFICIENT_ATTENTION,
                   "math": SDPBackend.MATH}[a.backend]
        ctx = lambda: sdpa_kernel([backend])
    except ImportError:  # older torch
        flags = dict(enable_flash=a.backend == "flash", enable_mem_efficient=a.backend == "efficient",
                     enable_math=a.backend == "math")
        ctx = lambda: torch.backends.cuda.sdp_kernel(**flags)
    info = {"torch": torch.__version__, "device": str(dev), "backend": a.backend,
            "gpu": torch.cuda.get_device_name(dev) if dev.type == "cuda" else "cpu"}
    print(f"# torch {info['torch']}, {info['gpu']}, SDPA backend {a.backend}")
    for seed in (int(s) for s in a.seeds.split(",")):
        g = torch.Generator(device=dev).manual_seed(seed)
        def draw():
            if a.gen == "uniform":
                x = a.x0 - a.am + 2 * a.am * torch.rand(shape, generator=g, device=dev, dtype=torch.float64)
            else:
                x = (a.x0 + torch.randn(shape, generator=g, device=dev, dtype=torch.float64)
                     + a.am * torch.randn(shape, generator=g, device=dev, dtype=torch.float64)
                     * (torch.rand(shape, generator=g, device=dev, dtype=torch.float64) < 0.001))
            return x.to(torch.float16)
        q, k, v = draw(), draw(), draw()
        with ctx():
            out = F.scaled_dot_product_attention(q, k, v)
        if dev.type == "cuda":
            torch.cuda.synchronize()
        name = f"{a.gen}_x0={a.x0:g}_Am={a.am:g}_seed={seed}"
        yield name, q.cpu().numpy(), k.cpu().numpy(), v.cpu().numpy(), out.cpu().numpy(), info


def saved_cases(folder):
    with open(os.path.join(folder, "cases.json")) as f:
        meta = json.load(f)
    for name in meta["cases"]:
        d = os.path.join(folder, name)
        yield (name, *(np.load(os.path.join(d, f"{t}.npy")) for t in ("q", "k", "v", "gpu_out")), meta["info"])


def alloc_arg(s):
    if s == "kernel":
        return KERNEL
    return json.loads(s) if s.lstrip().startswith("{") else s


def fp16_ulp_distance(a, b):
    """|a - b| in fp16 ulps (both fp16 values); NaN where either is NaN."""
    def ordered(x):
        i = x.astype(np.float16).view(np.int16).astype(np.int64)
        return np.where(i < 0, -(i & 0x7FFF), i)
    d = np.abs(ordered(a) - ordered(b)).astype(np.float64)
    return np.where(np.isnan(a) | np.isnan(b), np.nan, d)


def main():
    a = parse_args()
    pasa = None
    try:
        import pasa
    except ImportError as e:
        if a.compare:
            sys.exit(f"torch_compare: the pasa module is needed for --compare ({e}); run it with build/pasa-python")
        print(f"# import pasa failed ({e}): only the torch half runs; finish with --compare on a machine with the module")
        if not a.save:
            sys.exit("torch_compare: give --save DIR to keep the GPU's results for --compare")
    cases = saved_cases(a.compare) if a.compare else torch_cases(a)
    names, rows = [], []
    for name, q, k, v, gpu, info in cases:
        names.append(name)
        if a.save and not a.compare:
            os.makedirs(os.path.join(a.save, name), exist_ok=True)
            for t, x in zip(("q", "k", "v", "gpu_out"), (q, k, v, gpu)):
                np.save(os.path.join(a.save, name, f"{t}.npy"), x)
            with open(os.path.join(a.save, "cases.json"), "w") as f:
                json.dump({"cases": names, "info": info}, f, indent=1)
        if pasa is None:
            continue
        g = pasa.golden(q, k, v, threads=a.threads)
        base = pasa.uniform_baseline(q, k, v, threads=a.threads)
        m_gpu = pasa.metrics(gpu.astype(np.float64), g, base)
        for spec in a.alloc:
            out, _ = pasa.attention(q, k, v, algorithm="fa2", alloc=alloc_arg(spec), threads=a.threads)
            m_emu = pasa.metrics(out, g, base)
            ulps = fp16_ulp_distance(out, gpu.astype(np.float64))
            both = ~np.isnan(ulps)
            row = {"case": name, "alloc": spec if spec != "kernel" else "kernel", "rmse_gpu": m_gpu["rmse"],
                   "rmse_emulator": m_emu["rmse"], "nan_pct_gpu": m_gpu["nan_pct"], "nan_pct_emulator": m_emu["nan_pct"],
                   "identical_pct": 100 * float(np.mean(ulps[both] == 0)) if both.any() else math.nan,
                   "within_1ulp_pct": 100 * float(np.mean(ulps[both] <= 1)) if both.any() else math.nan,
                   "golden_bits": g["guaranteed_bits"]}
            rows.append(row)
            print(f"{name:<34} {row['alloc'][:16]:<16} RMSE GPU {row['rmse_gpu']:.4e} emulator {row['rmse_emulator']:.4e}"
                  f" (ratio {row['rmse_emulator'] / row['rmse_gpu']:.3f}); NaN % {row['nan_pct_gpu']:.3g} / "
                  f"{row['nan_pct_emulator']:.3g}; identical {row['identical_pct']:.2f} %, within 1 ulp "
                  f"{row['within_1ulp_pct']:.2f} %", flush=True)
    if a.json and rows:
        with open(a.json, "w") as f:
            json.dump({"info": info, "rows": rows}, f, indent=1)


if __name__ == "__main__":
    main()
