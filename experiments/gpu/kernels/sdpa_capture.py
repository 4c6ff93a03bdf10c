#!/usr/bin/env python3
"""sdpa_capture.py: capture torch's fused SDPA kernels (FlashAttention-2, cuDNN, memory-efficient) once on a
GPU, on inputs that a CPU machine regenerates with NumPy alone, so that models of the kernels' numerics can
be fitted and checked later without a GPU.

What it does
  1. Builds three case lists (main grid, stage-isolating probes, a held-back set; see cases_*() below) and
     their Q, K, V with kernel_inputs.make_inputs (PCG64 + NumPy conversions, documented there); records the
     sha256 of each tensor's uint16 bits.
  2. Per case, on the GPU, fp16 or bf16 (B, H, S, D) tensors:
       sdpa_flash, sdpa_cudnn, sdpa_efficient: F.scaled_dot_product_attention under
           torch.nn.attention.sdpa_kernel(<that backend only>), enable_gqa=True where Hq != Hkv
       sdpa_math: the same under SDPBackend.MATH (not stored: only its errors are recorded)
       aten_flash:     torch.ops.aten._scaled_dot_product_flash_attention(q, k, v, 0.0, causal, False, scale=)
       aten_efficient: torch.ops.aten._scaled_dot_product_efficient_attention(q, k, v, None, True, 0.0, causal,
                                                                               scale=)
       aten_cudnn:     torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, causal,
                                                                           False, scale=)
     (the aten ops are tried with Hkv heads first; if they refuse, with K, V expanded by repeat_interleave to
     Hq heads, recorded as "kv_expanded"). A backend that refuses a case is recorded with its message and
     warnings (status "refused"), it does not stop the run. Every op runs twice; "repeat_identical" says
     whether both outputs were bit-identical.
  3. Per op, the max |O - O_ref| against a float64 reference on the GPU (same stored inputs) with the
     causal mask aligned top-left (key j visible to query i iff j <= i) and bottom-right (j <= i + Skv - Sq),
     the LSE's max |lse - lse_ref| likewise, and the share of output elements bit-identical to sdpa_flash.
  4. Saves, per set, the outputs as uint16 bit patterns and the logsumexps as float32 in an .npz
     (np.savez_compressed), keys "<case>__<op>__out" (B, Hq, Sq, D) and "<case>__<op>__lse" (B, Hq, Sq); an
     aten op's output that is bit-identical to its sdpa backend's is not stored again ("out_same_as"); one
     that differs is stored as "<case>__<op>__xor", its bits XOR those of the sdpa backend's ("out_xor_of").
       $OUT/sdpa_manifest.json   main + probe cases, environment;  $OUT/sdpa_main.npz, $OUT/sdpa_probes.npz
       $OUT/heldback_manifest.json, $OUT/heldback_sdpa.npz   (the held-back set: modellers keep out of it)
     A set over 15 MiB compressed goes into <stem>_part<N>.npz; the manifest's "files" says which key is where.

How to run (GPU machine with PyTorch; about a minute)
  python3 experiments/gpu/kernels/sdpa_capture.py --out DIR [--quick]
  python3 experiments/gpu/kernels/sdpa_capture.py --list            # the cases, no torch needed
Check here (NumPy only): python3 experiments/gpu/kernels/kernel_inputs.py verify DIR/sdpa_manifest.json
"""
import argparse
import json
import math
import os
import subprocess
import sys
import time
import warnings

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kernel_inputs import make_inputs, sha256_hex  # noqa: E402

LN2 = math.log(2.0)
U11 = {"dist": "uniform", "x0": 0.0, "am": 1.0}


def uni(x0, am):
    return {"dist": "uniform", "x0": float(x0), "am": float(am)}


def case(name, gen, seed, dtype, causal, hq, hkv, sq, skv, d, scale=None, set_="main", note=""):
    return {"name": name, "set": set_, "gen": gen, "seed": int(seed), "dtype": dtype, "causal": bool(causal),
            "shape_q": [1, hq, sq, d], "shape_kv": [1, hkv, skv, d], "scale": scale,
            "scale_effective": (1.0 / math.sqrt(d)) if scale is None else float(scale), "note": note}


MAIN_DISTS = {
    "uniform": {"q": U11, "k": U11, "v": U11},
    "uniformx20": {"q": uni(20, 0.5), "k": uni(20, 0.5), "v": U11},
    "hybridx20am10": {"q": {"dist": "hybrid", "x0": 20.0, "am": 10.0, "p": 0.001},
                      "k": {"dist": "hybrid", "x0": 20.0, "am": 10.0, "p": 0.001}, "v": U11},
}
MAIN_SHAPES = {  # name: (Hq, Hkv, Sq, Skv)
    "gqa": (4, 2, 128, 128),
    "decode": (2, 2, 1, 333),
    "rect": (2, 2, 100, 300),
    "odd": (2, 2, 257, 257),
}


def cases_main():
    out, seed = [], 1000
    for dist, gen in MAIN_DISTS.items():
        for dtype in ("fp16", "bf16"):
            for causal in (False, True):
                for d in (64, 128, 256):
                    for sname, (hq, hkv, sq, skv) in MAIN_SHAPES.items():
                        seed += 1
                        out.append(case(f"{dist}_{dtype}_{'causal' if causal else 'full'}_d{d}_{sname}", gen, seed,
                                        dtype, causal, hq, hkv, sq, skv, d))
    return out


def cases_probes():
    out, seed = [], 5000
    onehot_v = {"dist": "onehot_rows"}

    def add(name, gen, causal, hq, hkv, sq, skv, d, scale=None, note=""):
        nonlocal seed
        for dtype in ("fp16", "bf16"):
            seed += 1
            out.append(case(f"probe_{name}_{dtype}_{'causal' if causal else 'full'}_d{d}", gen, seed, dtype, causal,
                            hq, hkv, sq, skv, d, scale, "probe", note))

    # single KV block (<= 64 keys): no online-softmax rescaling; 65 keys: a second block of one key
    for skv in (1, 17, 64, 65):
        for d in (64, 128):
            add(f"singleblock_skv{skv}", MAIN_DISTS["uniformx20"], False, 2, 2, 64, skv, d,
                note="single KV block (Skv <= 64) vs 65 = one more key in a second block")
    add("singleblock_skv64", MAIN_DISTS["uniformx20"], True, 2, 2, 64, 64, 64, note="causal, one block")
    # one-hot V: O[i, s] = P[i, s] / l_i for s < min(Skv, D): the rounded P and the final division, per key
    for (qk, tag) in ((U11, "u11"), (uni(20, 0.5), "x20")):
        g = {"q": qk, "k": qk, "v": onehot_v}
        add(f"onehotv_{tag}_skv64", g, False, 2, 2, 64, 64, 128, note="one-hot V, one KV block, all P visible")
        add(f"onehotv_{tag}_skv128", g, False, 2, 2, 64, 128, 128, note="one-hot V, two 64-key blocks, all P visible")
        add(f"onehotv_{tag}_skv256", g, False, 2, 2, 64, 256, 256, note="one-hot V, four blocks, all P visible")
        add(f"onehotv_{tag}_skv256", g, True, 2, 2, 256, 256, 256, note="one-hot V, causal")
    # exact P: Q rows one-hot (score = one integer entry of K, -12..0), scale = ln 2 so that
    # scale * log2(e) rounds to 1.0f: exp2 arguments are integers, P = 2^(s - m) exactly (if exp2 is exact at
    # integers), l a short sum of powers of two; with one-hot V, O = 2^(s - m) / l rounded once.
    ph = {"q": {"dist": "onehot_random", "scale": 1.0}, "k": {"dist": "int_range", "lo": -12, "hi": 0}, "v": onehot_v}
    add("pow2_skv128", ph, False, 2, 2, 64, 128, 128, LN2, "integer log2-domain scores, one-hot V")
    add("pow2_skv256", ph, False, 2, 2, 64, 256, 256, LN2, "integer log2-domain scores, one-hot V, 4 blocks")
    add("pow2_skv128", ph, True, 2, 2, 128, 128, 128, LN2, "integer log2-domain scores, one-hot V, causal")
    phv = {"q": ph["q"], "k": ph["k"], "v": U11}
    add("pow2v_skv300", phv, False, 2, 2, 64, 300, 64, LN2, "integer log2-domain scores, uniform V")
    # equal scores (Q = 0): P = 1, l = number of visible keys, O = mean of V: the PV GEMM and the division
    zq = {"q": {"dist": "zeros"}, "k": U11, "v": U11}
    for skv in (64, 300):
        add(f"zeroq_skv{skv}", zq, False, 2, 2, 64, skv, 64, note="Q = 0: P = 1, O = mean(V)")
    add("zeroq_skv300", zq, True, 2, 2, 300, 300, 128, note="Q = 0, causal: O_i = mean(V_0..i)")
    # scale: default vs the same value passed explicitly vs other scales
    for d in (64, 128):
        for sc, tag in ((None, "default"), (1.0 / math.sqrt(d), "explicit"), (0.3, "0.3"), (1.0, "1.0"), (LN2, "ln2")):
            add(f"scale_{tag}", MAIN_DISTS["uniform"], False, 2, 2, 200, 200, d, sc)
    # the scale probes share inputs within (dtype, d): give them the seed of the 'default' case
    by = {}
    for c in out:
        if c["name"].startswith("probe_scale_"):
            key = (c["dtype"], c["shape_q"][3])
            by.setdefault(key, c["seed"])
            c["seed"] = by[key]
            c["note"] = "same inputs for every scale of this (dtype, D)"
    return out


def cases_heldback():
    out, seed = [], 900000
    dists = {"normal": {"q": {"dist": "normal", "mu": 0.0, "sigma": 1.0}, "k": {"dist": "normal", "mu": 0.0, "sigma": 1.0},
                        "v": {"dist": "normal", "mu": 0.0, "sigma": 1.0}},
             "uniformx30": {"q": uni(30, 0.5), "k": uni(30, 0.5), "v": U11}}
    shapes = {"gqa8x1dec": (8, 1, 1, 513, 96), "gqa8x1": (8, 1, 37, 129, 160), "odd513": (2, 2, 513, 513, 96),
              "gqa4x1": (4, 1, 129, 385, 160), "odd255": (2, 1, 255, 255, 64), "odd31": (2, 2, 31, 97, 128)}
    for dist, gen in dists.items():
        for dtype in ("fp16", "bf16"):
            for causal in (False, True):
                for sname, (hq, hkv, sq, skv, d) in shapes.items():
                    seed += 7
                    out.append(case(f"heldback_{dist}_{dtype}_{'causal' if causal else 'full'}_{sname}_d{d}", gen, seed,
                                    dtype, causal, hq, hkv, sq, skv, d, None, "heldback"))
    return out


def cases_engines():
    """Where cuDNN runs other engines than the prefill one torch_cudnn_sm90 models (docs/kernels.md): decode
    (Sq = 1) over key lengths and head dimensions, with and without GQA, and prefill at head dimensions other
    than 64/128/256. For the next modelling round; captured after the recipes were fixed."""
    out, seed = [], 700000
    dists = {"uniform": MAIN_DISTS["uniform"], "uniformx20": MAIN_DISTS["uniformx20"]}
    for dist, gen in dists.items():
        for dtype in ("fp16", "bf16"):
            for skv in (128, 129, 333, 1024):
                for d in (64, 96, 128, 160):
                    for hq, hkv in ((2, 2), (8, 1)):
                        seed += 3
                        out.append(case(f"engines_{dist}_{dtype}_dec{hq}x{hkv}_skv{skv}_d{d}", gen, seed, dtype, False,
                                        hq, hkv, 1, skv, d, None, "engines"))
            for d in (32, 80, 96, 160, 192):
                for causal in (False, True):
                    seed += 3
                    out.append(case(f"engines_{dist}_{dtype}_{'causal' if causal else 'full'}_pre128_d{d}", gen, seed,
                                    dtype, causal, 2, 2, 128, 128, d, None, "engines"))
    return out


# --------------------------------------------------------------------------------------------------- GPU side

DEADLINE = None  # time.time() after which remaining cases are skipped (--deadline)
OPS = ("sdpa_flash", "sdpa_cudnn", "sdpa_efficient", "sdpa_math", "aten_flash", "aten_efficient", "aten_cudnn")
STORED = ("sdpa_flash", "sdpa_cudnn", "sdpa_efficient", "aten_flash", "aten_efficient", "aten_cudnn")


def env_info(torch):
    info = {"torch": torch.__version__, "cuda": torch.version.cuda, "cudnn": torch.backends.cudnn.version(),
            "numpy": np.__version__, "python": sys.version.split()[0]}
    p = torch.cuda.get_device_properties(0)
    info["gpu"] = p.name
    info["capability"] = list(torch.cuda.get_device_capability(0))
    info["sm_count"] = p.multi_processor_count
    try:
        r = subprocess.run(["nvidia-smi", "--query-gpu=driver_version,name,clocks.max.sm", "--format=csv,noheader"],
                           capture_output=True, text=True, timeout=30)
        info["nvidia_smi"] = r.stdout.strip()
        info["driver"] = r.stdout.strip().split(",")[0]
    except Exception as e:  # noqa: BLE001
        info["driver"] = f"unknown ({e})"
    for f in ("flash_sdp_enabled", "mem_efficient_sdp_enabled", "cudnn_sdp_enabled", "math_sdp_enabled"):
        g = getattr(torch.backends.cuda, f, None)
        info[f] = bool(g()) if g else None
    info["matmul_allow_tf32"] = torch.backends.cuda.matmul.allow_tf32
    return info


class Runner:
    def __init__(self, torch):
        import torch.nn.functional as F
        from torch.nn.attention import SDPBackend, sdpa_kernel
        self.torch, self.F, self.sdpa_kernel = torch, F, sdpa_kernel
        self.backend = {"sdpa_flash": SDPBackend.FLASH_ATTENTION, "sdpa_cudnn": SDPBackend.CUDNN_ATTENTION,
                        "sdpa_efficient": SDPBackend.EFFICIENT_ATTENTION, "sdpa_math": SDPBackend.MATH}

    def tensor(self, bits, dtype, shape):
        t = self.torch
        x = t.from_numpy(bits.reshape(shape).view(np.int16).copy()).cuda()
        return x.view(t.float16 if dtype == "fp16" else t.bfloat16)

    def call(self, op, q, k, v, causal, scale):
        """-> (out, lse or None, extra dict). Raises on refusal."""
        t = self.torch
        hq, hkv = q.shape[1], k.shape[1]
        extra = {}
        if op.startswith("sdpa_"):
            kw = {"is_causal": causal, "scale": scale}
            if hq != hkv:
                kw["enable_gqa"] = True
            with self.sdpa_kernel([self.backend[op]]):
                o = self.F.scaled_dot_product_attention(q, k, v, **kw)
            return o, None, extra

        def run(kk, vv):
            if op == "aten_flash":
                r = t.ops.aten._scaled_dot_product_flash_attention(q, kk, vv, 0.0, causal, False, scale=scale)
            elif op == "aten_efficient":
                r = t.ops.aten._scaled_dot_product_efficient_attention(q, kk, vv, None, True, 0.0, causal, scale=scale)
            elif op == "aten_cudnn":
                r = t.ops.aten._scaled_dot_product_cudnn_attention(q, kk, vv, None, True, 0.0, causal, False, scale=scale)
            else:
                raise ValueError(op)
            return r[0], r[1]

        try:
            o, lse = run(k, v)
            if tuple(o.shape) != tuple(q.shape):
                raise RuntimeError(f"output shape {tuple(o.shape)} != {tuple(q.shape)}")
        except Exception as e:  # noqa: BLE001
            if hq == hkv:
                raise
            extra["native_gqa_error"] = str(e)[:300]
            rep = hq // hkv
            o, lse = run(k.repeat_interleave(rep, dim=1).contiguous(), v.repeat_interleave(rep, dim=1).contiguous())
            extra["kv_expanded"] = True
        extra["lse_raw_shape"] = list(lse.shape)
        extra["lse_raw_dtype"] = str(lse.dtype)
        b, h, sq = q.shape[0], q.shape[1], q.shape[2]
        lse = lse.float().reshape(b, h, -1)[:, :, :sq]
        return o, lse, extra

    def reference(self, q, k, v, causal, scale_eff):
        """float64 O and LSE with top-left and bottom-right causal alignment (identical if not causal)."""
        t = self.torch
        hq, hkv, sq, skv = q.shape[1], k.shape[1], q.shape[2], k.shape[2]
        q64, k64, v64 = q.double(), k.double(), v.double()
        if hq != hkv:
            k64 = k64.repeat_interleave(hq // hkv, dim=1)
            v64 = v64.repeat_interleave(hq // hkv, dim=1)
        s = t.matmul(q64, k64.transpose(-1, -2)) * scale_eff
        refs = {}
        i = t.arange(sq, device=q.device).view(-1, 1)
        j = t.arange(skv, device=q.device).view(1, -1)
        for align, off in (("tl", 0), ("br", skv - sq)):
            ss = s
            if causal:
                ss = s.masked_fill(j > i + off, float("-inf"))
            lse = t.logsumexp(ss, dim=-1)
            p = t.exp(ss - lse.unsqueeze(-1))
            o = t.matmul(p, v64)
            refs[align] = (o, lse)
        return refs


def run_set(runner, cases, prefix, outdir, env, log):
    torch = runner.torch
    arrays = {}
    t0 = time.time()
    for n, c in enumerate(cases):
        if DEADLINE and time.time() > DEADLINE:
            c["skipped"] = "deadline"
            continue
        q_bits, k_bits, v_bits = make_inputs(c)
        c["sha256"] = {"q": sha256_hex(q_bits), "k": sha256_hex(k_bits), "v": sha256_hex(v_bits)}
        q = runner.tensor(q_bits, c["dtype"], c["shape_q"])
        k = runner.tensor(k_bits, c["dtype"], c["shape_kv"])
        v = runner.tensor(v_bits, c["dtype"], c["shape_kv"])
        refs = runner.reference(q, k, v, c["causal"], c["scale_effective"])
        res = {}
        outs = {}
        for op in OPS:
            r = {}
            with warnings.catch_warnings(record=True) as wl:
                warnings.simplefilter("always")
                try:
                    o, lse, extra = runner.call(op, q, k, v, c["causal"], c["scale"])
                    o2, lse2, _ = runner.call(op, q, k, v, c["causal"], c["scale"])
                    torch.cuda.synchronize()
                    r["status"] = "ok"
                    r.update(extra)
                    r["repeat_identical"] = bool(torch.equal(o.view(torch.int16), o2.view(torch.int16)) and
                                                 (lse is None or torch.equal(lse, lse2)))
                except Exception as e:  # noqa: BLE001
                    r["status"] = "refused"
                    r["message"] = str(e).strip()[:600]
                    o = lse = None
            msgs = sorted({str(w.message).strip()[:400] for w in wl})
            if msgs:
                r["warnings"] = msgs
            if o is not None:
                if tuple(o.shape) != tuple(q.shape):
                    r["status"] = "bad_shape"
                    r["shape"] = list(o.shape)
                else:
                    o64 = o.double()
                    r["nan_count"] = int(torch.isnan(o64).sum())
                    for al in ("tl", "br"):
                        r[f"max_abs_err_{al}"] = float((o64 - refs[al][0]).abs().nan_to_num(float("inf")).max())
                        if lse is not None:
                            r[f"lse_max_abs_err_{al}"] = float((lse.double() - refs[al][1]).abs().nan_to_num(float("inf")).max())
                    if c["causal"] and c["shape_q"][2] != c["shape_kv"][2]:
                        r["causal_alignment"] = ("top-left" if r["max_abs_err_tl"] < r["max_abs_err_br"] else "bottom-right")
                    outs[op] = o
                    bits = o.contiguous().view(torch.int16).cpu().numpy().view(np.uint16)
                    if op in STORED:
                        base = "sdpa_" + op[5:] if op.startswith("aten_") else None
                        if base and base in outs and torch.equal(outs[base].view(torch.int16), o.view(torch.int16)):
                            r["out_same_as"] = base
                        elif base and base in outs:
                            bb = outs[base].contiguous().view(torch.int16).cpu().numpy().view(np.uint16)
                            arrays[f"{c['name']}__{op}__xor"] = bits ^ bb
                            r["out_xor_key"] = f"{c['name']}__{op}__xor"
                            r["out_xor_of"] = base
                        else:
                            arrays[f"{c['name']}__{op}__out"] = bits
                            r["out_key"] = f"{c['name']}__{op}__out"
                    if lse is not None:
                        arrays[f"{c['name']}__{op}__lse"] = lse.cpu().numpy().astype(np.float32)
                        r["lse_key"] = f"{c['name']}__{op}__lse"
            res[op] = r
        if "sdpa_flash" in outs:
            fb = outs["sdpa_flash"].view(torch.int16)
            for op, o in outs.items():
                if op != "sdpa_flash":
                    res[op]["identical_to_sdpa_flash_pct"] = float((o.view(torch.int16) == fb).double().mean() * 100)
        c["results"] = res
        ok = [op for op in OPS if res[op]["status"] == "ok"]
        log(f"[{prefix} {n + 1}/{len(cases)}] {c['name']}: ok {','.join(ok)}; refused "
            f"{','.join(op for op in OPS if op not in ok) or '-'}")
    log(f"[{prefix}] {len(cases)} cases in {time.time() - t0:.1f} s, {len(arrays)} arrays")
    return arrays


def save_arrays(arrays, outdir, stem, limit=15.0 * 2 ** 20):
    """np.savez_compressed into <stem>.npz, or, where that would pass `limit`, into <stem>_part<N>.npz filled
    greedily in key order by each array's zlib size. -> {file: [keys]}"""
    import zlib
    est = {k: len(zlib.compress(np.ascontiguousarray(a).tobytes(), 6)) + 200 for k, a in arrays.items()}
    keys = sorted(arrays)
    if sum(est.values()) <= limit:
        parts = [keys]
    else:
        parts, cur, size = [], [], 0
        for k in keys:
            if cur and size + est[k] > limit:
                parts.append(cur)
                cur, size = [], 0
            cur.append(k)
            size += est[k]
        parts.append(cur)
    files = {}
    for i, ks in enumerate(parts):
        name = f"{stem}.npz" if len(parts) == 1 else f"{stem}_part{i + 1}.npz"
        np.savez_compressed(os.path.join(outdir, name), **{k: arrays[k] for k in ks})
        files[name] = ks
    return files


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", default=None)
    ap.add_argument("--quick", action="store_true", help="first 3 cases of each set (smoke test)")
    ap.add_argument("--list", action="store_true")
    ap.add_argument("--deadline", type=float, default=0, help="seconds; cases not started by then are skipped")
    ap.add_argument("--sets", default="main,probe,heldback", help="main,probe,heldback (the first capture) or engines")
    a = ap.parse_args()
    global DEADLINE
    if a.deadline:
        DEADLINE = time.time() + a.deadline
    ap_sets = a.sets.split(",")
    sets = {"main": cases_main(), "probe": cases_probes(), "heldback": cases_heldback(), "engines": cases_engines()}
    if a.quick:
        sets = {k: v[:3] + v[-2:] for k, v in sets.items()}
    if a.list:
        for k, v in sets.items():
            elems = sum(int(np.prod(c["shape_q"])) for c in v)
            print(f"{k}: {len(v)} cases, {elems} output elements per op")
            for c in v:
                print("  ", c["name"], c["seed"], c["shape_q"], c["shape_kv"], c["scale"])
        return 0
    if not a.out:
        ap.error("--out is required")
    os.makedirs(a.out, exist_ok=True)
    import torch
    logs = []

    def log(s):
        print(s, flush=True)
        logs.append(s)

    torch.manual_seed(0)
    torch.backends.cuda.matmul.allow_tf32 = False
    env = env_info(torch)
    # kernel_inputs' float32 -> bf16 / fp16 conversions against torch's on the same float32 values
    from kernel_inputs import Stream, to_bits
    x64 = np.concatenate([Stream(7).normal(1 << 20) * 10.0 ** np.arange(-6, 6).repeat((1 << 20) // 12 + 1)[:1 << 20],
                          np.array([1.00390625, 1.01171875, -1.00390625, 65504.0, 65520.0, 1e-8, 3e38])])
    x32 = torch.from_numpy(x64.astype(np.float32))
    for dt, tdt in (("bf16", torch.bfloat16), ("fp16", torch.float16)):
        mine = to_bits(x64, dt)
        theirs = x32.to(tdt).view(torch.int16).numpy().view(np.uint16)
        env[f"{dt}_conversion_matches_torch"] = int((mine != theirs).sum())
    log(json.dumps(env))
    runner = Runner(torch)
    all_files = {}
    if ap_sets == ["engines"]:
        arrays = run_set(runner, sets["engines"], "engines", a.out, env, log)
        files = save_arrays(arrays, a.out, "engines_sdpa")
        man = {"what": "cuDNN's other engines (decode, odd head dimensions): same format as sdpa_manifest.json",
               "env": env, "ops": OPS, "stored_ops": STORED, "files": files, "cases": sets["engines"], "log": logs}
        with open(os.path.join(a.out, "engines_manifest.json"), "w") as h:
            json.dump(man, h, indent=1)
        return 0
    arrays_main = run_set(runner, sets["main"], "main", a.out, env, log)
    arrays_probe = run_set(runner, sets["probe"], "probe", a.out, env, log)
    files = {}
    files.update(save_arrays(arrays_main, a.out, "sdpa_main"))
    files.update(save_arrays(arrays_probe, a.out, "sdpa_probes"))
    man = {"what": "torch SDPA backend captures; inputs: kernel_inputs.py; outputs: uint16 bit patterns",
           "env": env, "ops": OPS, "stored_ops": STORED, "files": files,
           "cases": sets["main"] + sets["probe"], "log": logs}
    with open(os.path.join(a.out, "sdpa_manifest.json"), "w") as h:
        json.dump(man, h, indent=1)
    all_files.update(files)
    arrays_hb = run_set(runner, sets["heldback"], "heldback", a.out, env, log)
    files_hb = save_arrays(arrays_hb, a.out, "heldback_sdpa")
    man_hb = {"what": "HELD-BACK set: keep out of model fitting; same format as sdpa_manifest.json", "env": env,
              "ops": OPS, "stored_ops": STORED, "files": files_hb, "cases": sets["heldback"], "log": logs}
    with open(os.path.join(a.out, "heldback_manifest.json"), "w") as h:
        json.dump(man_hb, h, indent=1)
    all_files.update(files_hb)
    tot = 0
    for f in sorted(os.listdir(a.out)):
        s = os.path.getsize(os.path.join(a.out, f))
        tot += s
        log(f"file {f}: {s / 2 ** 20:.2f} MiB")
    log(f"total {tot / 2 ** 20:.2f} MiB in {len(os.listdir(a.out))} files")
    return 0


if __name__ == "__main__":
    sys.exit(main())
