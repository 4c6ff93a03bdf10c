#!/usr/bin/env python3
"""fa2_model.py: a NumPy prototype of torch's FlashAttention-2 forward (docs/kernel-sources.md §1), float32
operation by operation, compared bit for bit with the SDPA captures of results/hardware/kernels/.
It is where the recipe's steps were found before the C++ engine (src/pasa/attention/detail/kernel_fa2.cpp)
took them; run it to see which step moves the identity:

  python3 experiments/gpu/kernels/fa2_model.py [--backend sdpa_flash] [--only SUBSTRING] [--variant NAME=VALUE ...]

Float32 arithmetic in NumPy is IEEE binary32 with round-to-nearest-even per operation, as the GPU's FADD/FMUL
(no FMA is formed unless np.float32 fma is emulated explicitly through float64, exact for one product).
"""
import argparse
import json
import os
import sys

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, HERE)
from kernel_inputs import make_inputs, bits_to_float64, load_captures  # noqa: E402

RES = os.path.join(ROOT, "results", "hardware", "kernels")
F32 = np.float32


# ---- the tensor core: mma.sync m16n8k16 with an fp32 accumulator, as docs/tensor-cores.md's h100 model ----
def _exp_of(x, emin):
    """floor(log2 |x|) per element (x != 0), subnormals counted at emin."""
    ax = np.abs(x)
    m, e = np.frexp(ax)  # ax = m * 2^e, m in [0.5, 1)
    e = e - 1
    return np.where(ax == 0, -100000, np.maximum(e, emin))


def tc_accumulate(acc, a, b, block=16, align_bits=25, emin_a=-14, emin_b=-14):
    """acc (M, N) float32 plus a (M, K) · b (K, N) (values exact in float64) in blocks of `block` products:
    per output the block's terms (the accumulator and the products) are aligned to the largest exponent E
    (a product's exponent the sum of its operands'), each cut toward zero to a multiple of 2^(E - align_bits),
    summed exactly and rounded toward zero into fp32."""
    acc = acc.astype(np.float64)
    M, K = a.shape
    N = b.shape[1]
    ea = _exp_of(a, emin_a)
    eb = _exp_of(b, emin_b)
    for t0 in range(0, K, block):
        t1 = min(K, t0 + block)
        ec = np.where(acc == 0, -100000, _exp_of(acc, -126))
        E = ec.copy()
        for t in range(t0, t1):
            pe = np.where((a[:, t:t + 1] == 0) | (b[t:t + 1, :] == 0), -100000, ea[:, t:t + 1] + eb[t:t + 1, :])
            E = np.maximum(E, pe)
        unit = np.ldexp(1.0, np.clip(E - align_bits, -1070, 1000))
        total = np.trunc(acc / unit)  # exact: the cut accumulator in units
        for t in range(t0, t1):
            p = a[:, t:t + 1] * b[t:t + 1, :]  # exact in double (11 x 11 bits)
            total = total + np.trunc(p / unit)  # integers below 2^27: exact sums
        exact = total * unit
        acc = rz_to_f32(exact)
    return acc.astype(F32)


def rz_to_f32(x):
    """float64 -> float32 rounded toward zero."""
    f = x.astype(F32)
    over = np.abs(f.astype(np.float64)) > np.abs(x)
    f = np.where(over, np.nextafter(f, F32(0)), f)
    return f


# ---- the exp2 of the kernel ----
_EX2 = {}


def ex2_table():
    if not _EX2:
        z = np.load(os.path.join(RES, "mufu_tables.npz"))
        frac = np.arange(1 << 23, dtype=np.float64) / (1 << 23)
        rn_h = np.exp2(-frac).astype(F32).view(np.uint32).astype(np.int64)
        _EX2["h"] = (rn_h + z["ex2_h_minus_rn"].astype(np.int64)).astype(np.uint32).view(F32)
        rn_g = np.exp2(frac).astype(F32).view(np.uint32).astype(np.int64)
        _EX2["g"] = (rn_g + z["ex2_g_minus_rn"].astype(np.int64)).astype(np.uint32).view(F32)
    return _EX2


def ex2_mufu_ftz(x):
    """MUFU.EX2 (ex2.approx.ftz.f32) from the measured tables: 2^-n · h(f) for x < 0 with |x| = n + f (f cut to
    23 fraction bits), 2^n · g(f) for x >= 0; flushed to 0 below 2^-126."""
    t = ex2_table()
    x = np.asarray(x, dtype=F32).astype(np.float64)
    out = np.zeros(x.shape, dtype=np.float64)
    neg = x < 0
    a = np.abs(x)
    n = np.floor(a)
    f = np.floor((a - n) * (1 << 23)).astype(np.int64)
    f = np.clip(f, 0, (1 << 23) - 1)
    hv = t["h"][f].astype(np.float64)
    gv = t["g"][f].astype(np.float64)
    with np.errstate(over="ignore", invalid="ignore"):
        r = np.where(neg, np.ldexp(hv, -np.minimum(n, 300).astype(np.int64)), np.ldexp(gv, np.minimum(n, 300).astype(np.int64)))
    r = np.where(r < 2.0 ** -126, 0.0, r)
    r = np.where(np.isneginf(x), 0.0, r)
    r = np.where(np.isnan(x), np.nan, r)
    out = r.astype(F32)
    return out


def exp2f(x, impl):
    x = np.asarray(x, dtype=F32)
    if impl == "rn":
        return np.exp2(x.astype(np.float64)).astype(F32)
    # CUDA's exp2f without fast math (results/hardware/kernels/mufu_report.json sass k_exp2f): below -126 the
    # argument is halved and the result squared, so subnormal results survive.
    small = x < F32(-126)
    xh = np.where(small, x * F32(0.5), x)
    r = ex2_mufu_ftz(xh)
    return np.where(small, r * r, r)


def _bits(u):
    return np.array([u], dtype=np.uint32).view(F32)[0]


def fma32(a, b, c):
    """RN32(a·b + c) for float32 arrays (the product exact in double; the double sum may round once before the
    float rounding: exact unless the terms are 2^29 apart, which these kernels' operands are not)."""
    return (np.asarray(a, F32).astype(np.float64) * np.asarray(b, F32).astype(np.float64)
            + np.asarray(c, F32).astype(np.float64)).astype(F32)


def fma32_rm(a, b, c):
    x = np.asarray(a, F32).astype(np.float64) * np.asarray(b, F32).astype(np.float64) + np.asarray(c, F32).astype(np.float64)
    f = x.astype(F32)
    return np.where(f.astype(np.float64) > x, np.nextafter(f, F32(-np.inf)), f).astype(F32)


def expf_precise(x):
    """CUDA's expf without fast math, as its PTX (results/hardware/kernels/sass.txt, k_expf) computes it."""
    x = np.asarray(x, F32)
    f4 = fma32(x, _bits(0x3BBB989D), F32(0.5))
    f5 = np.clip(f4, F32(0), F32(1))
    f8 = fma32_rm(f5, _bits(0x437C0000), _bits(0x4B400001))
    f9 = (f8 + _bits(0xCB40007F)).astype(F32)
    f12 = fma32(x, _bits(0x3FB8AA3B), -f9)
    f14 = fma32(x, _bits(0x32A57060), f12)
    f15 = (f8.view(np.uint32) << np.uint32(23)).view(F32)
    return (ex2_mufu_ftz(f14) * f15).astype(F32)


def logf_precise(x):
    """CUDA's logf without fast math (PTX of k_logf): exponent split, degree-9 polynomial in FFMA."""
    x = np.asarray(x, F32)
    small = x < _bits(0x00800000)
    f1 = np.where(small, (x * _bits(0x4B000000)).astype(F32), x)
    f7 = np.where(small, _bits(0xC1B80000), F32(0))
    r2 = f1.view(np.int32)
    r4 = (r2 - np.int32(1059760811)) & np.int32(-8388608)
    f8 = (r2 - r4).view(F32)
    f9 = r4.astype(F32)
    f11 = fma32(f9, _bits(0x34000000), f7)
    f12 = (f8 + _bits(0xBF800000)).astype(F32)
    acc = fma32(_bits(0xBE055027), f12, _bits(0x3E1039F6))
    for k in (0xBDF8CDCC, 0x3E0F2955, 0xBE2AD8B9, 0x3E4CED0B, 0xBE7FFF22, 0x3EAAAA78, 0xBF000000):
        acc = fma32(acc, f12, _bits(k))
    f30 = (f12 * acc).astype(F32)
    f31 = fma32(f30, f12, f12)
    r = fma32(f11, _bits(0x3F317218), f31)
    r = np.where(r2.view(np.uint32) < np.uint32(2139095040), r, fma32(f1, F32(np.inf), F32(np.inf)))
    return np.where(f1 == 0, F32(-np.inf), r).astype(F32)


def logf_fast(x):
    """__logf: lg2.approx.f32 · ln2 (MUFU.LG2 not measured: its correctly rounded log2 stands in)."""
    x = np.asarray(x, F32)
    with np.errstate(divide="ignore"):
        lg = np.log2(x.astype(np.float64)).astype(F32)
    return (lg * _bits(0x3F317218)).astype(F32)


# ---- one (batch, head): torch's FA2 ----
def num_splits_heuristic(bhm, num_sm2, nblocks, max_splits=128):
    if bhm >= 0.8 * num_sm2:
        return 1
    max_splits = min(max_splits, num_sm2, nblocks)
    eff = []
    best = 0.0
    def eligible(s):
        return s == 1 or -(-nblocks // s) != -(-nblocks // (s - 1))
    for s in range(1, max_splits + 1):
        if not eligible(s):
            eff.append(0.0)
            continue
        w = bhm * s / num_sm2
        e = w / np.ceil(w)
        best = max(best, e)
        eff.append(e)
    for s in range(1, max_splits + 1):
        if eligible(s) and eff[s - 1] >= 0.85 * best:
            return s
    return 1


def flash_tiles(d):
    dr = 32 * ((d + 31) // 32) if d <= 64 else (96 if d <= 96 else (128 if d <= 128 else (160 if d <= 160 else (192 if d <= 192 else (224 if d <= 224 else 256)))))
    bn = {32: 128, 64: 128, 96: 64, 128: 64, 160: 32, 192: 64, 224: 64, 256: 64}[dr]
    split_bn = 256 if d <= 64 else (128 if d <= 128 else 64)
    return bn, split_bn


def flash_head(q, k, v, scale, causal, dtype, v_):
    """q (Sq, D), k, v (Skv, D) float64 values; returns out (Sq, D) float32 before the output cast, lse."""
    Sq, D = q.shape
    Skv = k.shape[0]
    emin = -14 if dtype == "fp16" else -126
    c = F32(np.float64(F32(scale)) * np.log2(np.e)) if v_["c"] == "double" else F32(F32(scale) * F32(np.log2(np.e)))
    S = tc_accumulate(np.zeros((Sq, Skv), F32), q, k.T, emin_a=emin, emin_b=emin)
    bn = v_["bn"]
    nblocks = -(-Skv // bn)
    splits = v_["splits"]
    nbps = -(-nblocks // splits)
    rows = np.arange(Sq)
    O_parts, L_parts = [], []
    for s in range(splits):
        b_lo, b_hi = s * nbps, min(nblocks, (s + 1) * nbps)
        m = np.full(Sq, -np.inf, F32)
        ls = np.zeros((Sq, 4), F32)  # per-thread partial sums of the quad
        O = np.zeros((Sq, D), F32)
        first = True
        order = range(b_hi - 1, b_lo - 1, -1) if v_["order"] == "reverse" else range(b_lo, b_hi)
        for j in order:
            c0, c1 = j * bn, min(Skv, (j + 1) * bn)
            Sb = S[:, c0:c1].copy()
            cols = np.arange(c0, c1)
            vis = np.ones((Sq, c1 - c0), bool)
            if causal:
                vis &= cols[None, :] <= rows[:, None] + (Skv - Sq)
            Sb = np.where(vis, Sb, F32(-np.inf))
            m_new = np.maximum(m, Sb.max(axis=1))
            if not first:
                m_cur = np.where(np.isneginf(m_new), F32(0), m_new)
                alpha = exp2f(((m - m_cur).astype(F32) * c).astype(F32), v_["exp"])
                ls = (ls * alpha[:, None]).astype(F32)
                O = (O * alpha[:, None]).astype(F32)
            m = m_new
            u = np.where(np.isneginf(m), F32(0), (m * c).astype(F32))
            if v_["fma"]:
                arg = (Sb.astype(np.float64) * np.float64(c) - u.astype(np.float64)[:, None]).astype(F32)
            else:
                arg = ((Sb * c).astype(F32) - u[:, None]).astype(F32)
            P = exp2f(arg, v_["exp"])
            # row sums: thread t of the quad holds columns 8j + 2t + {0, 1} of the block, in increasing order
            n = c1 - c0
            for t in range(4):
                tc = [cc for cc in range(n) if (cc % 8) // 2 == t]
                for idx, cc in enumerate(tc):
                    if first and idx == 0:
                        ls[:, t] = P[:, cc]
                    else:
                        ls[:, t] = (ls[:, t] + P[:, cc]).astype(F32)
            Pq = P.astype(np.float16 if dtype == "fp16" else np.float32)
            if dtype == "bf16":
                Pq = bf16_round(P)
            O = tc_accumulate(O, Pq.astype(np.float64), v[c0:c1], emin_a=emin, emin_b=emin)
            first = False
        total = ((ls[:, 0] + ls[:, 2]).astype(F32) + (ls[:, 1] + ls[:, 3]).astype(F32)).astype(F32)
        inv = np.where((total == 0) | np.isnan(total), F32(1), (F32(1) / total).astype(F32))
        On = (O * inv[:, None]).astype(F32)
        with np.errstate(divide="ignore", invalid="ignore"):
            if v_["lse_fma"]:
                lse = fma32(m, F32(scale), logf_fast(total))
            else:
                lse = ((m * F32(scale)).astype(F32) + logf_fast(total)).astype(F32)
        O_parts.append(On)
        L_parts.append(lse)
    if splits == 1:
        return O_parts[0], L_parts[0]
    L = np.stack(L_parts)  # (splits, Sq)
    lmax = L.max(axis=0)
    lmax = np.where(np.isneginf(lmax), F32(0), lmax)
    ssum = np.zeros(Sq, F32)
    for s in range(splits):
        ssum = (ssum + expf_precise((L[s] - lmax).astype(F32))).astype(F32)
    lse = (logf_precise(ssum) + lmax).astype(F32)
    out = np.zeros((Sq, D), F32)
    for s in range(splits):
        w = expf_precise((L[s] - lse).astype(F32))
        out = fma32(w[:, None], O_parts[s], out) if v_.get("combine_fma", True) else ((w[:, None] * O_parts[s]).astype(F32) + out).astype(F32)
    return out, lse


def eff_tiles(d):
    """(kQueriesPerBlock, kKeysPerBlock, warp columns kN, gmem output path) of torch's mem-efficient kernel."""
    if d <= 64:
        return 64, 64, 2, False
    if d <= 128:
        return 64, 128, 4, False
    return 32, 128, 4, True


def efficient_head(q, k, v, scale, causal, dtype, v_):
    """torch's memory-efficient attention (docs/kernel-sources.md §2), one head: forward key blocks, the scale
    and log2e applied in two roundings, the max in log2 units, rescale only when the max grows."""
    Sq, D = q.shape
    Skv = k.shape[0]
    emin = -14 if dtype == "fp16" else -126
    _, bk, kN, gmem = eff_tiles(D)
    blk = v_.get("mma_block", 8)
    S = tc_accumulate(np.zeros((Sq, Skv), F32), q, k.T, block=blk, emin_a=emin, emin_b=emin)
    S = (S * F32(scale)).astype(F32)
    l2e = F32(np.log2(np.e))
    rows = np.arange(Sq)
    mi = np.full(Sq, -np.inf, F32)
    sp = np.zeros(Sq, F32)
    O = np.zeros((Sq, D), F32)
    first = True
    for c0 in range(0, Skv, bk):
        c1 = min(Skv, c0 + bk)
        n = c1 - c0
        cols = np.arange(c0, c1)
        Sb = S[:, c0:c1]
        vis = np.ones((Sq, n), bool)
        if causal:
            vis &= cols[None, :] <= rows[:, None]
        if v_.get("eff_fma", False):
            Sl = Sb  # log2e folded into the FFMA below
            mx = np.where(vis, (Sb * l2e).astype(F32), F32(-np.inf)).max(axis=1)
        else:
            Sl = (Sb * l2e).astype(F32)
            mx = np.where(vis, Sl, F32(-np.inf)).max(axis=1)
        m_new = np.maximum(mi, mx)
        grew = m_new > mi
        r = np.where(grew & ~np.isneginf(mi), exp2f((mi - m_new).astype(F32), v_["exp"]), F32(1))
        r = np.where(np.isneginf(mi) & grew, F32(0), r)
        m_use = np.where(np.isneginf(m_new), F32(0), m_new)
        if v_.get("eff_fma", False):
            arg = fma32(Sl, l2e, -m_use[:, None])
        else:
            arg = (Sl - m_use[:, None]).astype(F32)
        P = np.where(vis, exp2f(arg, v_["exp"]), F32(0))
        # row sums: warp column w holds columns [32w, 32w+32); thread t of the quad: 8j + 2t + {0, 1}, j = 0..3
        parts = []
        for w in range(kN):
            th = []
            for t in range(4):
                acc = np.zeros(Sq, F32)
                for j in range(4):
                    for e in (0, 1):
                        cc = 32 * w + 8 * j + 2 * t + e
                        if cc < n:
                            acc = (acc + P[:, cc]).astype(F32)
                th.append(acc)
            parts.append(((th[0] + th[1]).astype(F32) + (th[2] + th[3]).astype(F32)).astype(F32))
        spn = np.where(grew, (sp * r).astype(F32), sp)
        for w in range(kN):
            spn = (spn + parts[w]).astype(F32)
        Pq = P.astype(np.float16).astype(np.float64) if dtype == "fp16" else bf16_round(P).astype(np.float64)
        if not gmem:
            if not first:
                O = np.where(grew[:, None], (O * r[:, None]).astype(F32), O)
            O = tc_accumulate(O, Pq, v[c0:c1], block=blk, emin_a=emin, emin_b=emin)
        else:
            acc = tc_accumulate(np.zeros((Sq, D), F32), Pq, v[c0:c1], block=blk, emin_a=emin, emin_b=emin)
            last = c1 == Skv
            alpha = np.where(spn == 0, F32(1), (F32(1) / spn).astype(F32)) if last else np.ones(Sq, F32)
            rr = np.where(grew, r, F32(1))
            beta = (alpha * rr).astype(F32)
            X = (O * beta[:, None]).astype(F32)
            O = fma32(alpha[:, None], acc, X)
        sp = spn
        mi = m_new
        first = False
    if not gmem:
        alpha = np.where(sp == 0, F32(1), (F32(1) / sp).astype(F32))
        O = (O * alpha[:, None]).astype(F32)
    return O, None


def cudnn_head(q, k, v, scale, causal, dtype, v_):
    """A model of cuDNN's SDPA after the frontend's open sm90 kernel (docs/kernel-sources.md §6): forward key
    blocks of bn, m in scaled log2 units RN(max·c), s' = RN(RN(c·s) − m), per-thread block sums from 0 folded
    by l = alpha·l + sum, quad xor 1 then 2, reciprocal."""
    Sq, D = q.shape
    Skv = k.shape[0]
    emin = -14 if dtype == "fp16" else -126
    c = F32(np.float64(F32(scale)) * np.log2(np.e)) if v_["c"] == "double" else F32(F32(scale) * F32(np.log2(np.e)))
    S = tc_accumulate(np.zeros((Sq, Skv), F32), q, k.T, block=v_.get("mma_block", 16), emin_a=emin, emin_b=emin)
    if v_.get("cudnn_s") == "scaled_first":  # S·scale rounded before the log2e factor
        S = (S * F32(scale)).astype(F32)
        c = F32(np.log2(np.e))
    bn = v_.get("cudnn_bn", 128)
    rows = np.arange(Sq)
    m = np.full(Sq, -np.inf, F32)
    m_rawmax = np.full(Sq, -np.inf, F32)
    ls = np.zeros((Sq, 4), F32)
    O = np.zeros((Sq, D), F32)
    ex = "ftz" if v_["exp"] == "mufu" else v_["exp"]
    def e2(x):
        return ex2_mufu_ftz(x) if ex == "ftz" else exp2f(x, ex)
    for c0 in range(0, Skv, bn):
        c1 = min(Skv, c0 + bn)
        n = c1 - c0
        cols = np.arange(c0, c1)
        vis = np.ones((Sq, n), bool)
        if causal:  # SDPA's is_causal reaches cuDNN top-left aligned (the mem-efficient kernel's too)
            vis &= cols[None, :] <= rows[:, None]
        Sb = np.where(vis, S[:, c0:c1], F32(-np.inf))
        mraw = Sb.max(axis=1)
        if v_.get("cudnn_s") == "sub_first":  # the max kept raw, alpha as FA2 forms it
            m_rawmax_new = np.maximum(m_rawmax, mraw)
            mcur = np.where(np.isneginf(m_rawmax_new), F32(0), m_rawmax_new)
            alpha = np.where(np.isneginf(m_rawmax), F32(0), e2(((m_rawmax - mcur).astype(F32) * c).astype(F32)))
            m_rawmax = m_rawmax_new
            mnew_s = np.where(np.isneginf(m_rawmax), F32(-np.inf), (m_rawmax * c).astype(F32))
            m_rawmax = np.where(np.isneginf(m_rawmax), F32(-np.inf), m_rawmax)
        else:
            mnew_s = np.where(np.isneginf(mraw), F32(-np.inf), (mraw * c).astype(F32))
            mnew_s = np.maximum(m, mnew_s)
            alpha = np.where(np.isneginf(m), F32(0), e2((m - mnew_s).astype(F32)))
        mu = np.where(np.isneginf(mnew_s), F32(0), mnew_s)
        if v_.get("cudnn_s") == "sub_first":  # RN(RN(s − m_raw)·c): the difference first, then the scale
            mraw_run = np.where(np.isneginf(mnew_s), F32(0), (mnew_s / c).astype(F32))
            arg = ((Sb - m_rawmax[:, None]).astype(F32) * c).astype(F32)
        elif v_.get("cudnn_fma"):
            arg = fma32(Sb, c, -mu[:, None])
        else:
            arg = ((Sb * c).astype(F32) - mu[:, None]).astype(F32)
        P = np.where(vis, e2(arg), F32(0))
        blk = np.zeros((Sq, 4), F32)
        for t in range(4):
            for cc in range(n):
                if (cc % 8) // 2 == t:
                    blk[:, t] = (blk[:, t] + P[:, cc]).astype(F32)
        if v_.get("l_fma", True):
            ls = fma32(alpha[:, None], ls, blk)
        else:
            ls = ((alpha[:, None] * ls).astype(F32) + blk).astype(F32)
        O = (O * alpha[:, None]).astype(F32)
        Pq = P.astype(np.float16).astype(np.float64) if dtype == "fp16" else bf16_round(P).astype(np.float64)
        O = tc_accumulate(O, Pq, v[c0:c1], block=v_.get("mma_block", 16), emin_a=emin, emin_b=emin)
        m = mnew_s
    total = ((ls[:, 0] + ls[:, 1]).astype(F32) + (ls[:, 2] + ls[:, 3]).astype(F32)).astype(F32)
    inv = np.where(total == 0, F32(0), (F32(1) / total).astype(F32))
    return (O * inv[:, None]).astype(F32), None


def bf16_round(x):
    b = np.asarray(x, F32).view(np.uint32).astype(np.uint64)
    r = ((b + 0x7FFF + ((b >> 16) & 1)) >> 16) << 16
    return r.astype(np.uint32).view(F32)


def model_case(case, variant):
    q, k, v = make_inputs(case)
    dt = case["dtype"]
    qf, kf, vf = (bits_to_float64(t, dt) for t in (q, k, v))
    B, Hq, Sq, D = case["shape_q"]
    Hkv, Skv = case["shape_kv"][1], case["shape_kv"][2]
    scale = case["scale_effective"]
    causal = case["causal"] and Sq > 1
    bn, split_bn = flash_tiles(D)
    mblocks = -(-Sq // 64)
    nb_split = -(-Skv // split_bn)
    splits = num_splits_heuristic(B * Hq * mblocks, 2 * 132, nb_split) if variant.get("splits") is None else variant["splits"]
    v_ = dict(variant)
    v_["splits"] = splits
    v_["bn"] = split_bn if splits > 1 else bn
    out = np.zeros((B, Hq, Sq, D), F32)
    lse = np.zeros((B, Hq, Sq), F32)
    g = Hq // Hkv
    for b in range(B):
        for h in range(Hq):
            if variant.get("backend") == "cudnn":
                out[b, h] = cudnn_head(qf[b, h], kf[b, h // g], vf[b, h // g], scale, case["causal"], dt, v_)[0]
                continue
            if variant.get("backend") == "efficient":
                o, l = efficient_head(qf[b, h], kf[b, h // g], vf[b, h // g], scale, case["causal"], dt, v_)
                out[b, h] = o
                continue
            o, l = flash_head(qf[b, h], kf[b, h // g], vf[b, h // g], scale, causal, dt, v_)
            out[b, h], lse[b, h] = o, l
    if dt == "fp16":
        bits = out.astype(np.float16).view(np.uint16)
    else:
        bits = (bf16_round(out).view(np.uint32) >> 16).astype(np.uint16)
    return bits, lse, splits


_CAPS = {}


def load_capture(key):
    if not _CAPS:
        _CAPS.update(load_captures(os.path.join(RES, "captures_main.npz")))
    return _CAPS.get(key)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--backend", default="sdpa_flash")
    ap.add_argument("--only", default="")
    ap.add_argument("--exp", default="mufu")
    ap.add_argument("--fma", type=int, default=0)
    ap.add_argument("--order", default="reverse")
    ap.add_argument("--c", default="double")
    ap.add_argument("--lse-fma", type=int, default=1)
    ap.add_argument("--eff-fma", type=int, default=0)
    ap.add_argument("--bn", type=int, default=128)
    ap.add_argument("--l-fma", type=int, default=1)
    ap.add_argument("--cudnn-s", default="")
    ap.add_argument("--mma-block", type=int, default=8)
    ap.add_argument("--max-cases", type=int, default=1000)
    a = ap.parse_args()
    man = json.load(open(os.path.join(RES, "sdpa_manifest.json")))
    variant = {"exp": a.exp, "fma": bool(a.fma), "order": a.order, "c": a.c, "splits": None, "lse_fma": bool(a.lse_fma),
               "backend": "efficient" if "efficient" in a.backend else ("cudnn" if "cudnn" in a.backend else "flash"),
               "cudnn_bn": a.bn, "l_fma": bool(a.l_fma), "cudnn_fma": bool(a.fma), "cudnn_s": a.cudnn_s, "eff_fma": bool(a.eff_fma),
               "mma_block": a.mma_block}
    n = 0
    for case in man["cases"]:
        if a.only not in case["name"]:
            continue
        r = case["results"].get(a.backend)
        if not r or r.get("status") != "ok":
            continue
        want = load_capture(r["out_key"])
        if want is None:
            continue
        bits, lse, splits = model_case(case, variant)
        same = np.mean(bits == want.reshape(bits.shape)) * 100
        print(f"{case['name']:50s} splits {splits}  identical {same:7.3f} %")
        n += 1
        if n >= a.max_cases:
            break


if __name__ == "__main__":
    main()
