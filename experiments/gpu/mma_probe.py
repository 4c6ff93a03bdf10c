#!/usr/bin/env python3
"""mma_probe.py: Hopper's mma.sync with FP8 and INT8 operands, measured (kernels/mma_probe.cu), and INT8
GEMMs through torch._int_mm; the data that tests the models h100_mma_e4m3, h100_mma_e5m2, int8 and
int8_satfinite (src/pasa/attention/tensor_core_models.cpp) bit for bit.

What it does (GPU machine with nvcc and PyTorch; CuPy if present, else the driver API through ctypes; ~10 s)
  1. FP8: per kind (e4m3, e5m2) and chain length nk in 1, 2, 4, 8 (K = 32 nk), 32 cases of one 16 x 8 tile:
     24 with random codes (every finite code equally likely: subnormals to the largest), 8 "cancel" cases
     (k = 0, 1: a pair +x, -x on equal b, the rest 2^-d smaller: the kept bits below the largest exponent).
     C0: zero or a random float32. Each warp chains its nk instructions, D fed back as C.
  2. INT8 (s8 x s8 -> s32), wrapping and .satfinite: random codes, C0 random int32 near +-2^31 in half the
     cases (so that an instruction overflows).
  3. torch._int_mm: random int8 (32 x K) x (K x 32), K = 64, 1024, and K = 139264 of all 127 (the exact
     sum 2,246,189,056 exceeds int32): wrapped, saturated or exact.
Output: $OUT/mma_probe.npz (arrays <kind>_nk<nk>_A (cases, nk, 16, 32) uint8 codes, _Bt (cases, nk, 8, 32),
  _C0, _D (cases, 16, 8) uint32 bit patterns of float32 / int32) and $OUT/mma_probe.json (GPU, int_mm results).
How to run: python3 experiments/gpu/mma_probe.py --out DIR
"""
import argparse, json, os, subprocess, sys, time
import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
SEED = 20261202


def fp8_finite_codes(kind):
    codes = np.arange(256, dtype=np.uint8)
    if kind == "e4m3":
        return codes[(codes & 0x7F) != 0x7F]
    return codes[(codes & 0x7C) != 0x7C]  # e5m2: exponent field 11111 is inf / NaN


def fp8_code(kind, sign, e, m):
    """the code of (-1)^sign 2^e (1 + m / 2^mbits), a normal number of the kind"""
    eb, mb, bias = (4, 3, 7) if kind == "e4m3" else (5, 2, 15)
    return np.uint8((sign << 7) | ((e + bias) << mb) | m)


def fp8_inputs(rng, kind, nk, cases=32):
    finite = fp8_finite_codes(kind)
    A = rng.choice(finite, size=(cases, nk, 16, 32)).astype(np.uint8)
    Bt = rng.choice(finite, size=(cases, nk, 8, 32)).astype(np.uint8)
    mb = 3 if kind == "e4m3" else 2
    for c in range(24, cases):  # cancel cases: A[:, 0] = +x, A[:, 1] = -x, B[0] = B[1] = y; the rest small
        for q in range(nk):
            big = rng.integers(3, 8)
            x = fp8_code(kind, 0, int(big), int(rng.integers(0, 1 << mb)))
            A[c, q, :, 0] = x
            A[c, q, :, 1] = x | 0x80
            Bt[c, q, :, 0] = Bt[c, q, :, 1] = fp8_code(kind, 0, int(big), 0)
            for r in range(16):
                lo = rng.integers(-6, 2)
                A[c, q, r, 2:] = [fp8_code(kind, int(rng.integers(0, 2)), int(lo), int(rng.integers(0, 1 << mb))) for _ in range(30)]
            Bt[c, q, :, 2:] = [[fp8_code(kind, int(rng.integers(0, 2)), int(rng.integers(-6, 1)), int(rng.integers(0, 1 << mb)))
                                for _ in range(30)] for _ in range(8)]
    C0 = rng.standard_normal((cases, 16, 8)).astype(np.float32) * np.float32(2.0) ** rng.integers(-10, 20, (cases, 16, 8)).astype(np.float32)
    C0[: cases // 4] = 0.0
    return A, Bt, C0.view(np.uint32)


def int8_inputs(rng, nk, cases=32):
    A = rng.integers(0, 256, size=(cases, nk, 16, 32)).astype(np.uint8)
    Bt = rng.integers(0, 256, size=(cases, nk, 8, 32)).astype(np.uint8)
    C0 = rng.integers(-2**20, 2**20, size=(cases, 16, 8)).astype(np.int64)
    near = rng.integers(0, 2, size=(cases, 16, 8)).astype(bool)
    edge = rng.choice([2**31 - 1 - 20000, -2**31 + 20000], size=(cases, 16, 8))
    C0 = np.where(near, edge, C0)
    C0[: cases // 4] = 0
    return A, Bt, C0.astype(np.int32).view(np.uint32)


def int_mm(torch, out):
    res = {}
    g = torch.Generator().manual_seed(SEED)
    for K in (64, 1024):
        a = torch.randint(-128, 128, (32, K), generator=g, dtype=torch.int8)
        b = torch.randint(-128, 128, (K, 32), generator=g, dtype=torch.int8)
        d = torch._int_mm(a.cuda(), b.cuda()).cpu().numpy().astype(np.int64)
        exact = a.numpy().astype(np.int64) @ b.numpy().astype(np.int64)
        res[f"random_K{K}"] = {"outputs": int(d.size), "equal_exact": int((d == exact).sum())}
        out[f"intmm_K{K}_A"], out[f"intmm_K{K}_B"], out[f"intmm_K{K}_D"] = a.numpy(), b.numpy(), d.astype(np.int32)
    K = 139264
    a = torch.full((32, K), 127, dtype=torch.int8)
    b = torch.full((K, 32), 127, dtype=torch.int8)
    d = torch._int_mm(a.cuda(), b.cuda()).cpu().numpy().astype(np.int64)
    exact = 127 * 127 * K
    res["overflow_K139264"] = {"exact": exact, "wrapped": int(np.int64(exact).astype(np.int32)), "saturated": 2**31 - 1,
                               "gpu_values": sorted(set(int(v) for v in d.ravel()))}
    return res


def launcher(cubin, torch):
    """fn(name, A, Bt, C0, nk) -> D: the kernel on one warp per case (CuPy, or the driver API via ctypes)"""
    try:
        import cupy as cp
        mod = cp.RawModule(path=cubin)

        def run(name, A, Bt, C0, nk):
            dA, dB, dC = cp.asarray(A), cp.asarray(Bt), cp.asarray(C0)
            dD = cp.zeros_like(dC)
            mod.get_function(name)((A.shape[0],), (32,), (dA, dB, dC, dD, np.int32(nk)))
            cp.cuda.Device().synchronize()
            return cp.asnumpy(dD)
        return run
    except ImportError:
        pass
    import ctypes
    torch.zeros(1, device="cuda")  # (a current context: PyTorch's primary one)
    cu = ctypes.CDLL("libcuda.so.1")
    module = ctypes.c_void_p()
    assert cu.cuModuleLoad(ctypes.byref(module), cubin.encode()) == 0, "cuModuleLoad"

    def run(name, A, Bt, C0, nk):
        fn = ctypes.c_void_p()
        assert cu.cuModuleGetFunction(ctypes.byref(fn), module, name.encode()) == 0, "cuModuleGetFunction"
        t = [torch.from_numpy(np.ascontiguousarray(x)).cuda() for x in (A, Bt, C0.view(np.int32))]
        d = torch.zeros_like(t[2])
        ptrs = [ctypes.c_void_p(x.data_ptr()) for x in (*t, d)]
        n = ctypes.c_int(nk)
        args = (ctypes.c_void_p * 5)(*[ctypes.cast(ctypes.byref(p), ctypes.c_void_p) for p in ptrs],
                                     ctypes.cast(ctypes.byref(n), ctypes.c_void_p))
        assert cu.cuLaunchKernel(fn, A.shape[0], 1, 1, 32, 1, 1, 0, None, args, None) == 0, "cuLaunchKernel"
        torch.cuda.synchronize()
        return d.cpu().numpy().view(np.uint32)
    return run


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    rep = {"seed": SEED}
    cubin = os.path.join(args.out, "mma_probe.cubin")
    for arch in ("sm_90", "sm_90a"):
        r = subprocess.run(f"nvcc -cubin -arch={arch} -O3 -o {cubin} {os.path.join(HERE, 'kernels', 'mma_probe.cu')}",
                           shell=True, capture_output=True, text=True)
        rep["nvcc"] = f"-arch={arch}: " + (r.stdout + r.stderr)[-2000:]
        if r.returncode == 0:
            break
    if r.returncode != 0:
        print(rep["nvcc"]); sys.exit(1)
    import torch
    rep["gpu"] = torch.cuda.get_device_name(0)
    rep["capability"] = list(torch.cuda.get_device_capability(0))
    rep["torch"] = torch.__version__
    launch = launcher(cubin, torch)
    rng = np.random.default_rng(SEED)
    out = {}
    t0 = time.time()
    for kind, fn in (("e4m3", "mma_e4m3"), ("e5m2", "mma_e5m2"), ("s8", "mma_s8"), ("s8_sat", "mma_s8_sat")):
        for nk in (1, 2, 4, 8):
            A, Bt, C0 = fp8_inputs(rng, kind, nk) if kind in ("e4m3", "e5m2") else int8_inputs(rng, nk)
            key = f"{kind}_nk{nk}"
            out[key + "_A"], out[key + "_Bt"], out[key + "_C0"], out[key + "_D"] = A, Bt, C0, launch(fn, A, Bt, C0, nk)
    rep["mma_seconds"] = time.time() - t0
    # the integer kernels against exact arithmetic, here already (the models' test repeats it in pasa)
    checks = {}
    for kind in ("s8", "s8_sat"):
        ok = total = 0
        for nk in (1, 2, 4, 8):
            key = f"{kind}_nk{nk}"
            A = out[key + "_A"].view(np.int8).astype(np.int64); Bt = out[key + "_Bt"].view(np.int8).astype(np.int64)
            c = out[key + "_C0"].view(np.int32).astype(np.int64)
            for q in range(nk):
                c = c + np.einsum("crk,cjk->crj", A[:, q], Bt[:, q])
                c = np.clip(c, -2**31, 2**31 - 1) if kind == "s8_sat" else c.astype(np.int32).astype(np.int64)  # wrap
            d = out[key + "_D"].view(np.int32).astype(np.int64)
            ok += int((d == c).sum()); total += d.size
        checks[kind] = {"outputs": total, "equal_model": ok}
    rep["int_mma_vs_model"] = checks
    rep["int_mm"] = int_mm(torch, out)
    np.savez_compressed(os.path.join(args.out, "mma_probe.npz"), **out)
    with open(os.path.join(args.out, "mma_probe.json"), "w") as f:
        json.dump(rep, f, indent=1)
    print(json.dumps({k: v for k, v in rep.items() if k != "nvcc"}, indent=1))


if __name__ == "__main__":
    main()
