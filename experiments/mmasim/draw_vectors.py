#!/usr/bin/env python3
"""Draws tensor-core test vectors with MMA-Sim's published arithmetic (microsoft/MMA-Sim, run out of tree).
Runs on torch 1.13 through a shim: the fp8/e8m0 dtypes MMA-Sim names are sentinels, and operand tensors carry
their dtype tag (a Tensor subclass) so that MMA-Sim's extract_significand_exponent sees the right format."""
import importlib.util, json, math, random, struct, sys, subprocess
import numpy as np
import torch

MMASIM = sys.argv[1]          # the extracted repository
OUTDIR = sys.argv[2]
COMMIT = sys.argv[3]

class FakeDtype:
    def __init__(s, name): s.name = name
    def __repr__(s): return "torch." + s.name
for n in ["float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu", "float8_e5m2fnuz", "float8_e4m3fnuz", "uint16", "uint32"]:
    if not hasattr(torch, n): setattr(torch, n, FakeDtype(n))

def tagged_class(tag):
    class Tagged(torch.Tensor):
        @property
        def dtype(self): return tag
        @classmethod
        def __torch_function__(cls, func, types, args=(), kwargs=None):
            kwargs = kwargs or {}
            with torch._C.DisableTorchFunction():
                ret = func(*args, **kwargs)
            if func is torch.Tensor.__getitem__ and isinstance(ret, torch.Tensor):
                return ret.as_subclass(cls)
            return ret
    return Tagged
TAGS = {n: tagged_class(getattr(torch, n)) for n in ["float8_e4m3fn", "float8_e5m2", "float8_e8m0fnu"]}
def tagged(vals, name):
    return torch.tensor(vals, dtype=torch.float32).as_subclass(TAGS[name])

spec = importlib.util.spec_from_file_location("mmasim_arith", MMASIM + "/mmasim/simulator/arithmetic.py")
ar = importlib.util.module_from_spec(spec); spec.loader.exec_module(ar)

rng = random.Random(20261202)
nrng = np.random.default_rng(20261202)

def table_fp8(ebits, mbits, fn):
    bias = (1 << (ebits - 1)) - 1
    vals = []
    for code in range(1 << (ebits + mbits)):
        e, m = code >> mbits, code & ((1 << mbits) - 1)
        if fn and e == (1 << ebits) - 1 and m == (1 << mbits) - 1: continue   # NaN
        if not fn and e == (1 << ebits) - 1: continue                       # inf/NaN
        v = (m / (1 << mbits)) * 2.0 ** (1 - bias) if e == 0 else (1 + m / (1 << mbits)) * 2.0 ** (e - bias)
        vals += [v, -v]
    return sorted(set(vals))
E4M3 = table_fp8(4, 3, True)
E5M2 = table_fp8(5, 2, False)
E2M1 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
E2M1 = sorted(set(E2M1 + [-x for x in E2M1]))
UE4M3 = [x for x in E4M3 if x > 0]

def f32(x): return struct.unpack("f", struct.pack("f", x))[0]

def draw(fmt, n, spread):
    """n operand values of fmt; spread: the exponent range of the N(0,1) draws (float formats)."""
    if fmt == "e4m3": return [rng.choice(E4M3) for _ in range(n)]
    if fmt == "e5m2": return [rng.choice(E5M2) for _ in range(n)]
    if fmt == "e2m1": return [rng.choice(E2M1) for _ in range(n)]
    x = nrng.standard_normal(n) * np.exp2(nrng.integers(-spread, spread + 1, n))
    if rng.random() < 0.2: x[nrng.integers(0, n, max(1, n // 8))] = 0.0
    if fmt == "fp16": return [float(v) for v in np.clip(x, -60000, 60000).astype(np.float16)]
    if fmt == "bf16": return [float(v) for v in torch.tensor(x, dtype=torch.float32).to(torch.bfloat16).double()]
    if fmt == "fp32": return [float(v) for v in x.astype(np.float32)]
    raise ValueError(fmt)

def tensor(vals, fmt):
    if fmt == "fp16": return torch.tensor(vals, dtype=torch.float16)
    if fmt == "bf16": return torch.tensor(vals, dtype=torch.bfloat16)
    if fmt == "fp32": return torch.tensor(vals, dtype=torch.float32)
    if fmt == "e4m3": return tagged(vals, "float8_e4m3fn")
    if fmt == "e5m2": return tagged(vals, "float8_e5m2")
    raise ValueError(fmt)

def draw_c(spread):
    if rng.random() < 0.25: return 0.0
    return f32(rng.gauss(0, 1) * 2.0 ** rng.randint(-spread, spread))

# Each model: (name, function, arch, instruction, operand formats, k per call, calls per instruction (split-K),
# fractional bits, output_type, tf32 truncation, block scales)
PLAIN = [
    ("volta_fp16", "Volta", "mma m8n8k4.f32.f16.f16.f32", "fp16", 4, 1, 23, "f32", False),
    ("turing_fp16", "Turing", "mma m16n8k8.f32.f16.f16.f32", "fp16", 8, 1, 24, "f32", False),
    ("a100_fp16", "Ampere", "mma m16n8k16.f32.f16.f16.f32 (is_split_k)", "fp16", 16, 2, 24, "f32", False),
    ("a100_bf16", "Ampere", "mma m16n8k16.f32.bf16.bf16.f32 (is_split_k)", "bf16", 16, 2, 24, "f32", False),
    ("a100_tf32", "Ampere", "mma m16n8k8.f32.tf32.tf32.f32 (is_split_k, truncate_to_tf32)", "fp32", 8, 2, 24, "f32", True),
    ("ada_fp16", "Ada Lovelace", "mma m16n8k16.f32.f16.f16.f32 (is_split_k)", "fp16", 16, 2, 24, "f32", False),
    ("ada_e4m3", "Ada Lovelace", "mma m16n8k32.f32.e4m3.e4m3.f32 (is_split_k; f32_e8m13)", "e4m3", 32, 2, 13, "f32_e8m13", False),
    ("ada_e5m2", "Ada Lovelace", "mma m16n8k32.f32.e5m2.e5m2.f32 (is_split_k; f32_e8m13)", "e5m2", 32, 2, 13, "f32_e8m13", False),
    ("b200_fp16", "Blackwell", "tcgen05.mma kind::f16 (k16), f32", "fp16", 16, 1, 25, "f32", False),
    ("b200_bf16", "Blackwell", "tcgen05.mma kind::f16 bf16 (k16), f32", "bf16", 16, 1, 25, "f32", False),
    ("b200_tf32", "Blackwell", "tcgen05.mma kind::tf32 (k8, truncate_to_tf32), f32", "fp32", 8, 1, 25, "f32", True),
    ("b200_f8f6f4", "Blackwell", "tcgen05.mma kind::f8f6f4 e4m3 (k32), f32", "e4m3", 32, 1, 25, "f32", False),
    ("sm120_e4m3", "RTX Blackwell", "mma m16n8k32.f32.e4m3.e4m3.f32", "e4m3", 32, 1, 25, "f32", False),
]

def hexs(v): return float(v).hex()

def run_plain(name, arch, instr, fmt, kinstr, calls, F, otype, tf32, ncase=120):
    cases = []
    for i in range(ncase):
        ninstr = rng.choice([1, 2, 4])
        K = kinstr * ninstr
        spread = rng.choice([2, 8, 14] if fmt == "fp16" else [2, 8, 20, 60])
        a, b = draw(fmt, K, spread), draw(fmt, K, spread)
        c0 = draw_c(min(spread * 2, 60))
        if i >= ncase - 30:  # cancel: a big pair +x·y, -x·y in the first instruction, the rest 2^-d smaller
            big = max(abs(v) for v in a + b) or 1.0
            a[0], a[1], b[0], b[1] = big, -big, big, big
            c0 = 0.0 if i % 2 else c0
        A, B = tensor(a, fmt), tensor(b, fmt)
        if tf32:
            A, B = ar.truncate_to_tf32(A), ar.truncate_to_tf32(B)
        c = torch.tensor(c0, dtype=torch.float32)
        kc = kinstr // calls
        for t0 in range(0, K, kc):
            c = ar.nv_fused_dot_add(A[t0:t0 + kc], B[t0:t0 + kc], c, n_fractional_bits=F, output_type=otype)
        cases.append({"a": a, "b": b, "c0": hexs(c0), "d": hexs(c.item())})
    return {"model": name, "provenance": {"mmasim_commit": COMMIT, "function": "mmasim/simulator/arithmetic.py nv_fused_dot_add"
            + (" (after truncate_to_tf32)" if tf32 else ""), "arch": arch, "instruction": instr,
            "n_fractional_bits": F, "output_type": otype, "k_per_call": kinstr // calls,
            "how": "per case: K = instructions x k; D = the chain of nv_fused_dot_add calls over consecutive k_per_call slices, C = c0 first; the last 30 cases hold a cancelling pair (k = 0, 1) of the largest operand"},
            "operands": fmt, "cases": cases}

def draw_e8m0(lo, hi): return 2.0 ** rng.randint(lo, hi)

def run_mx8(name, arch, instr, fmt, ncase=160):
    cases = []
    for i in range(ncase):
        ninstr = rng.choice([1, 2, 4]); K = 32 * ninstr
        a, b = draw(fmt, K, 0), draw(fmt, K, 0)
        lo, hi = rng.choice([(-4, 4), (-30, 30), (-127, 50)])
        sa, sb = [draw_e8m0(lo, hi) for _ in range(ninstr)], [draw_e8m0(lo, hi) for _ in range(ninstr)]
        c0 = draw_c(40)
        if i >= ncase - 40:  # cancel: c0 = -(the first instruction's scaled products), exactly
            c0 = f32(-sum(a[t] * b[t] for t in range(32)) * sa[0] * sb[0])
        A, B = tensor(a, fmt), tensor(b, fmt)
        c = torch.tensor(c0, dtype=torch.float32)
        for q in range(ninstr):
            c = ar.nv_fused_dot_add(A[32 * q:32 * q + 32], B[32 * q:32 * q + 32], c, 25, "f32",
                                    tagged([sa[q]], "float8_e8m0fnu")[0], tagged([sb[q]], "float8_e8m0fnu")[0])
        cases.append({"a": a, "b": b, "c0": hexs(c0),
                      "sa": sa, "sb": sb, "d": hexs(c.item())})
    return {"model": name, "provenance": {"mmasim_commit": COMMIT, "function": "mmasim/simulator/arithmetic.py nv_fused_dot_add (scale_a, scale_b: ue8m0)",
            "arch": arch, "instruction": instr, "n_fractional_bits": 25, "output_type": "f32", "k_per_call": 32, "scale_block": 32,
            "how": "per case: K = instructions x 32, one e8m0 scale per 32 of each operand (sa[q] for A, sb[q] for B), D chained as the instructions; the last 40 cases: c0 = -(the first instruction's scaled products)"},
            "operands": fmt, "cases": cases}

def run_mx4(name, arch, instr, sfmt, sblock, ncase=160):
    cases = []
    for i in range(ncase):
        ninstr = rng.choice([1, 2, 3]); K = 64 * ninstr
        a, b = draw("e2m1", K, 0), draw("e2m1", K, 0)
        nsc = K // sblock
        if sfmt == "ue8m0":
            lo, hi = rng.choice([(-4, 4), (-30, 30), (-127, 50)])
            sa, sb = [draw_e8m0(lo, hi) for _ in range(nsc)], [draw_e8m0(lo, hi) for _ in range(nsc)]
        else:  # e4m3 values, signs drawn too (ue4m3 ignores them), zeros possible
            sa, sb = [rng.choice(E4M3) for _ in range(nsc)], [rng.choice(E4M3) for _ in range(nsc)]
        c0 = draw_c(40)
        if i >= ncase - 60:  # cancel: the first scale block's scales large, the others small, c0 = -(its terms)
            if sfmt == "ue8m0":
                sa[0], sb[0] = 2.0 ** rng.randint(8, 12), 2.0 ** rng.randint(8, 12)
                for q in range(1, nsc): sa[q], sb[q] = 2.0 ** rng.randint(-5, -1), 2.0 ** rng.randint(-5, -1)
            else:
                sa[0], sb[0] = rng.choice([x for x in UE4M3 if x >= 64]), rng.choice([x for x in UE4M3 if x >= 64])
                for q in range(1, nsc): sa[q], sb[q] = rng.choice([x for x in UE4M3 if x <= 0.25]), rng.choice([x for x in UE4M3 if x <= 0.25])
            v0 = sum(a[t] * b[t] for t in range(sblock)) * abs(sa[0]) * abs(sb[0])
            c0 = f32(-v0)
        c = torch.tensor(c0, dtype=torch.float32)
        tagname = "float8_e8m0fnu" if sfmt == "ue8m0" else "float8_e4m3fn"
        per = 64 // sblock
        for q in range(ninstr):
            A = torch.tensor(a[64 * q:64 * q + 64], dtype=torch.float32)
            B = torch.tensor(b[64 * q:64 * q + 64], dtype=torch.float32)
            c = ar.nv_fused_dot_add_with_block_scale(A, B, c, tagged(sa[per * q:per * q + per], tagname),
                                                     tagged(sb[per * q:per * q + per], tagname), 35)
        cases.append({"a": a, "b": b, "c0": hexs(c0),
                      "sa": sa, "sb": sb, "d": hexs(c.item())})
    return {"model": name, "provenance": {"mmasim_commit": COMMIT, "function": "mmasim/simulator/arithmetic.py nv_fused_dot_add_with_block_scale (after unpack_fp4_tensor)",
            "arch": arch, "instruction": instr, "n_fractional_bits": 35, "output_type": "f32", "k_per_call": 64, "scale_block": sblock,
            "scale_format": sfmt,
            "how": "per case: K = instructions x 64 fp4 (e2m1) values, one scale per scale_block of each operand, D chained as the instructions; the last 60 cases cancel c0 against the first scale block's terms (its scales large, the others small)"},
            "operands": "e2m1", "cases": cases}

out = {}
for args in PLAIN: out[args[0]] = run_plain(*args)
out["b200_mxf8f6f4"] = run_mx8("b200_mxf8f6f4", "Blackwell", "tcgen05.mma.block_scale kind::mxf8f6f4 e4m3 (k32, ue8m0 per 32)", "e4m3")
out["sm120_mxf8f6f4"] = run_mx8("sm120_mxf8f6f4", "RTX Blackwell", "mma m16n8k32.block32.f32.e4m3.e5m2.f32.ue8m0", "e5m2")
out["b200_mxf4"] = run_mx4("b200_mxf4", "Blackwell", "tcgen05.mma.block_scale kind::mxf4 (k64, ue8m0 per 32)", "ue8m0", 32)
out["b200_mxf4nvf4"] = run_mx4("b200_mxf4nvf4", "Blackwell", "tcgen05.mma.block_scale kind::mxf4nvf4 (k64, ue4m3 per 16)", "ue4m3", 16)
out["sm120_mxf4nvf4"] = run_mx4("sm120_mxf4nvf4", "RTX Blackwell", "mma m16n8k64.block16.f32.e2m1.e2m1.f32.ue4m3", "ue4m3", 16)
import os
os.makedirs(OUTDIR, exist_ok=True)
for name, d in out.items():
    with open(os.path.join(OUTDIR, name + ".json"), "w") as f:
        json.dump(d, f, separators=(",", ":"))
    print(name, len(d["cases"]))
