#!/usr/bin/env python3
"""mufu_probe.py: the hardware exp2 (MUFU.EX2, PTX ex2.approx.ftz.f32) and reciprocal (rcp.approx.ftz.f32)
measured on every float32 input, with bit-exact models tested on the GPU.

What it does (GPU machine with nvcc, cuobjdump and CuPy; kernels in mufu_probe.cu, described there)
  1. SASS: compiles sass_probe.cu for sm_90 with the default flags, -ftz=true and --use_fast_math, dumps
     cuobjdump -sass, and lists per kernel its floating-point / MUFU instructions.
  2. ex2.approx.ftz.f32 on all 2^32 bit patterns, in 256 chunks of 2^24 (chunk c = bit patterns
     c * 2^24 .. (c + 1) * 2^24 - 1; chunks 128..255 are the negative floats): per chunk the sha256 of the
     outputs (little-endian uint32), and statistics against RN(2^x) (float64 exp2 rounded to float32).
  3. Structure: for F = 12..28 and five ways to cut x to F fraction bits (floor, ceil, trunc, round-half-even,
     round-half-away), counts the normal x (finer than 2^-F) with ex2(x) != ex2(cut(x)). The smallest F
     with 0 mismatches (and its cut) is the hardware's input quantisation.
  4. Model: with that F, the tables g[k] = ex2(k / 2^F) and h[k] = ex2(-k / 2^F), k < 2^F, and the models
     two's complement: ex2(x) = g[X mod 2^F] * 2^(X >> F), X = cut(x * 2^F), and sign-magnitude: the same
     for x >= 0, h[T mod 2^F] * 2^-(T >> F), T = cut(|x| * 2^F), for x < 0; each tested on all 2^32 inputs
     (per category), also with RN / RZ / RU tables of 2^(+-k / 2^F) and any tables given by --candidates.
  5. rcp.approx.ftz.f32 on [1, 2) (2^23 inputs) against __frcp_rn, its input quantisation (F = 8..23,
     trunc / round-half-even), and the model rcp(+-1.m * 2^E) = +-r[m] * 2^-E on all 2^32 inputs.
  6. Writes $OUT/mufu_report.json (everything above, numbers and examples), $OUT/mufu_tables.npz:
       ex2_F, ex2_mode           the quantisation found (mode: 0 floor 1 ceil 2 trunc 3 rne 4 round-away)
       ex2_g_first, ex2_g_diff   g losslessly: g_bits = cumsum([ex2_g_first] + ex2_g_diff) (int8 or int16)
       ex2_g_minus_rn            g_bits - bits(RN(2^(k/2^F))) (int8; RN from the GPU's float64 exp2)
       ex2_g_sha256, ex2_g_rn_sha256   (uint8 arrays of the hex digests) of the uint32 tables g and RN
       ex2_h_*                   the same for h (negative x)
       ex2_chunk_sha256          (256, 64) uint8: hex digests per chunk of the full measured output
       rcp_r_minus_rn            bits(rcp.approx(1.m)) - bits(__frcp_rn(1.m)), m = 0 .. 2^23 - 1 (int8)
       special_in, special_ex2, special_ex2_noftz, special_rcp   outputs on a list of hand-picked inputs
     and $OUT/sass.txt (the three cuobjdump listings).

How to run (about 1-2 min on an H100/H200)
  python3 experiments/gpu/kernels/mufu_probe.py --out DIR [--quick] [--candidates FILE.npz]
  (--candidates: arrays named cand_<name>_g and optionally cand_<name>_h, int deltas against the measured
   g and h (same F); each pair is tested in the sign-magnitude model over all 2^32 inputs.)
"""
import argparse
import concurrent.futures as cf
import hashlib
import json
import os
import re
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
HB = 8
NSTAT = 14 + 2 * HB
MODES = ["floor", "ceil", "trunc", "rne", "round_away"]
EX2_CATS = ["nan_in", "inf_in", "zero_or_subnormal_in", "normal_result_x_neg", "normal_result_x_pos",
            "underflow_model_zero", "overflow_model_inf"]
RCP_CATS = ["nan_in", "inf_in", "zero_or_subnormal_in", "normal_result", "underflow_model_zero"]


def sh(cmd, **kw):
    r = subprocess.run(cmd, shell=True, capture_output=True, text=True, **kw)
    return r.returncode, r.stdout + r.stderr


def f2b(x):
    return int(np.float32(x).view(np.uint32))


def b2f(b):
    return float(np.uint32(b).view(np.float32))


def sass_section(out, log):
    """Compile sass_probe.cu three ways; return {variant: {kernel: [instructions]}} and the raw text."""
    src = os.path.join(HERE, "sass_probe.cu")
    variants = {"default": "", "ftz": "-ftz=true", "fast_math": "--use_fast_math"}
    raw, summary = [], {}
    for name, flags in variants.items():
        cub = f"/tmp/sass_probe_{name}.cubin"
        rc, txt = sh(f"nvcc -cubin -arch=sm_90 -O3 {flags} -o {cub} {src}")
        if rc:
            log(f"sass {name}: nvcc failed: {txt[-500:]}")
            summary[name] = {"error": txt[-500:]}
            continue
        rc, txt = sh(f"cuobjdump -sass {cub}")
        raw.append(f"===== nvcc -cubin -arch=sm_90 -O3 {flags} sass_probe.cu ; cuobjdump -sass =====\n{txt}")
        rc2, ptx = sh(f"nvcc -ptx -arch=sm_90 -O3 {flags} -o - {src}")
        raw.append(f"===== nvcc -ptx -arch=sm_90 -O3 {flags} sass_probe.cu =====\n{ptx}")
        kern, cur = {}, None
        for line in txt.splitlines():
            m = re.search(r"Function : (\S+)", line)
            if m:
                cur = m.group(1)
                kern[cur] = []
                continue
            m = re.search(r"/\*[0-9a-f]{4}\*/\s+(.*?);", line)
            if cur and m:
                ins = m.group(1).strip()
                op = ins.split()[0] if not ins.startswith("@") else ins.split()[1]
                if re.match(r"(MUFU|FFMA|FMUL|FADD|FSETP|FSEL|FCHK|FMNMX|FRND|F2F|FSET)", op) or "MUFU" in ins:
                    kern[cur].append(ins)
        summary[name] = kern
    with open(os.path.join(out, "sass.txt"), "w") as h:
        h.write("\n".join(raw))
    return summary


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--candidates", default=None)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    t_start = time.time()
    logs = []

    def log(s):
        print(s, flush=True)
        logs.append(s)

    rep = {"what": "MUFU ex2.approx.ftz.f32 / rcp.approx.ftz.f32 on float32 inputs"}
    rc, v = sh("nvcc --version")
    rep["nvcc"] = v.strip().splitlines()[-1] if v.strip() else v
    rc, v = sh("nvidia-smi --query-gpu=name,driver_version,clocks.max.sm --format=csv,noheader")
    rep["nvidia_smi"] = v.strip()
    log(f"{rep['nvcc']} | {rep['nvidia_smi']}")

    rep["sass"] = sass_section(a.out, log)
    for var in ("default", "fast_math"):
        for k in ("k_exp2f", "k_fa2_exp2", "k_fast_expf", "k_ptx_ex2_ftz"):
            log(f"sass {var} {k}: {rep['sass'].get(var, {}).get(k)}")

    cubin = "/tmp/mufu_probe.cubin"
    rc, txt = sh(f"nvcc -cubin -arch=sm_90 -O3 -o {cubin} {os.path.join(HERE, 'mufu_probe.cu')}")
    if rc:
        log(txt)
        sys.exit("mufu_probe: nvcc failed")
    import cupy as cp
    mod = cp.RawModule(path=cubin)
    K = {n: mod.get_function(n) for n in ("eval_op", "eval_list", "ex2_stats", "ex2_struct", "ex2_model", "ex2_table",
                                           "rcp_stats", "rcp_struct", "rcp_model", "cmp_ops")}
    dev = cp.cuda.runtime.getDeviceProperties(0)
    rep["gpu"] = dev["name"].decode() if isinstance(dev["name"], bytes) else str(dev["name"])
    nsm = dev["multiProcessorCount"]
    big_grid = (nsm * 16,)
    B = 256

    def launch1d(fn, n, args):
        fn(((n + B - 1) // B,), (B,), args)

    def stats_dict(c, n):
        c = [int(x) for x in c]
        hist = {str(d): c[7 + d + HB] for d in range(-HB, HB + 1)}
        hist["below"] = c[8 + 2 * HB]
        hist["above"] = c[9 + 2 * HB]
        return {"inputs": n, "nan_out": c[1], "inf_out": c[2], "zero_out": c[3], "subnormal_out": c[4],
                "compared": c[5], "exact_vs_rn": c[6], "ulp_diff_hist": hist,
                "max_err_ulps": float(np.uint64(c[10 + 2 * HB]).view(np.float64)),
                "max_err_at_x": b2f(c[13 + 2 * HB] & 0xFFFFFFFF),
                "most_negative_x_nonzero": b2f(c[11 + 2 * HB]) if c[11 + 2 * HB] else None,
                "most_negative_x_nonzero_bits": hex(c[11 + 2 * HB]),
                "largest_x_finite": b2f(c[12 + 2 * HB]), "largest_x_finite_bits": hex(c[12 + 2 * HB])}

    # ---------------------------------------------------------------- 2. ex2 on all inputs, chunk hashes
    CH = 1 << 24
    chunks = list(range(256)) if not a.quick else [0, 63, 64, 127, 128, 133, 134, 255]
    out_d = cp.empty(CH, dtype=cp.uint32)
    cnt = cp.zeros(NSTAT, dtype=cp.uint64)
    cnt_neg = cp.zeros(NSTAT, dtype=cp.uint64)
    hashes = {}
    pool = cf.ThreadPoolExecutor(12)
    futs = {}
    t0 = time.time()
    for c in chunks:
        base = c * CH
        launch1d(K["eval_op"], CH, (np.int32(0), np.uint32(base), np.uint32(CH), out_d))
        launch1d(K["ex2_stats"], CH, (np.uint32(base), np.uint32(CH), out_d, cnt))
        if c >= 128:
            launch1d(K["ex2_stats"], CH, (np.uint32(base), np.uint32(CH), out_d, cnt_neg))
        host = cp.asnumpy(out_d)
        futs[c] = pool.submit(lambda arr: hashlib.sha256(memoryview(arr.astype("<u4", copy=False))).hexdigest(), host)
        if len(futs) > 24:
            for k in list(futs)[:8]:
                hashes[k] = futs.pop(k).result()
    for k in list(futs):
        hashes[k] = futs.pop(k).result()
    cp.cuda.Device().synchronize()
    n_all = len(chunks) * CH
    rep["ex2_all"] = stats_dict(cp.asnumpy(cnt), n_all)
    rep["ex2_negative"] = stats_dict(cp.asnumpy(cnt_neg), sum(CH for c in chunks if c >= 128))
    rep["ex2_chunks"] = chunks
    log(f"ex2 eval+hash of {len(chunks)} chunks: {time.time() - t0:.1f} s")
    log("ex2 all: " + json.dumps(rep["ex2_all"]))
    neg_concat = hashlib.sha256("".join(hashes[c] for c in sorted(hashes) if c >= 128).encode()).hexdigest()
    rep["ex2_negative_sha256_of_chunk_hexdigests"] = neg_concat

    # special inputs
    specials = [0.0, -0.0, 1e-45, -1e-45, 1.1754942e-38, -1.1754942e-38, 1.17549435e-38, -1.17549435e-38,
                2.0 ** -40, -(2.0 ** -40), 2.0 ** -24, -(2.0 ** -24), 2.0 ** -23, -(2.0 ** -23), 2.0 ** -22,
                -(2.0 ** -22), 0.5, -0.5, 1.0, -1.0, 1.5, -1.5, 126.0, 127.0, 127.5, 127.99999, 128.0, 128.5,
                200.0, 3.0e38, -3.0e38, -125.0, -125.5, -126.0, -126.0000076, -126.25, -126.5, -126.75,
                -126.99999, -127.0, -127.0000153, -127.25, -127.5, -128.0, -140.0, -149.0, -150.0, -160.0,
                float("inf"), float("-inf")]
    sp_bits = [f2b(x) for x in specials] + [0x7FC00000, 0x7F800001, 0xFFC00000, 0xFFFFFFFF, 0x7FFFFFFF]
    sp_in = cp.asarray(np.array(sp_bits, dtype=np.uint32))
    sp_out = {}
    for op, name in ((0, "ex2"), (1, "ex2_noftz"), (2, "rcp")):
        o = cp.empty(len(sp_bits), dtype=cp.uint32)
        launch1d(K["eval_list"], len(sp_bits), (np.int32(op), sp_in, np.uint32(len(sp_bits)), o))
        sp_out[name] = cp.asnumpy(o)
    rep["specials"] = [{"x_bits": hex(b), "x": repr(b2f(b)), "ex2": hex(int(sp_out["ex2"][i])),
                        "ex2_val": repr(b2f(int(sp_out["ex2"][i]))), "ex2_noftz": hex(int(sp_out["ex2_noftz"][i])),
                        "rcp": hex(int(sp_out["rcp"][i])), "rcp_val": repr(b2f(int(sp_out["rcp"][i])))}
                       for i, b in enumerate(sp_bits)]
    # the neighbourhood of the flush threshold, every float from -125.99 to -127.01 is too many: a sweep
    sweep = np.arange(-127.2, -125.8, 1.0 / 64, dtype=np.float64).astype(np.float32)
    sw = cp.asarray(sweep.view(np.uint32))
    o = cp.empty(len(sweep), dtype=cp.uint32)
    launch1d(K["eval_list"], len(sweep), (np.int32(0), sw, np.uint32(len(sweep)), o))
    rep["ex2_sweep_near_-126"] = [[float(x), hex(int(y)), repr(b2f(int(y)))] for x, y in zip(sweep, cp.asnumpy(o))]

    # ---------------------------------------------------------------- 3. structure scan
    t0 = time.time()
    Fs = list(range(12, 29)) if not a.quick else [22, 23, 24]
    scan = []
    c6 = cp.zeros(6, dtype=cp.uint64)
    for F in Fs:
        for mi, mn in enumerate(MODES):
            c6.fill(0)
            K["ex2_struct"](big_grid, (B,), (np.int32(F), np.int32(mi), c6))
            r = [int(x) for x in cp.asnumpy(c6)]
            scan.append({"F": F, "mode": mn, "tested": r[0], "mismatch": r[1], "mismatch_x_neg": r[2],
                         "example": None if not r[3] else {"x": repr(b2f(r[3] & 0xFFFFFFFF)), "x_bits": hex(r[3] & 0xFFFFFFFF),
                                                           "ex2_x": hex(r[4]), "ex2_cut": hex(r[5])}})
    rep["ex2_structure_scan"] = scan
    log(f"structure scan {time.time() - t0:.1f} s")
    for s_ in scan:
        if s_["mismatch"] == 0 or s_["F"] in (20, 21, 22, 23, 24):
            log(f"  F={s_['F']:2d} {s_['mode']:10s} tested {s_['tested']:11d} mismatch {s_['mismatch']:11d}")
    zero = [s_ for s_ in scan if s_["mismatch"] == 0 and s_["tested"] > 0]
    best = min(zero, key=lambda s_: (s_["F"], MODES.index(s_["mode"]))) if zero else None
    rep["ex2_quantisation"] = best and {"F": best["F"], "mode": best["mode"],
                                        "all_modes_zero_at_F": [s_["mode"] for s_ in zero if s_["F"] == best["F"]]}
    log(f"ex2 quantisation: {rep['ex2_quantisation']}")

    tables = {}
    if best is not None and best["F"] <= 24:
        F, mode = best["F"], MODES.index(best["mode"])
        n = 1 << F

        def table(kind, sgn):
            t_d = cp.empty(n, dtype=cp.uint32)
            launch1d(K["ex2_table"], n, (np.int32(F), np.int32(kind), np.int32(sgn), np.uint32(n), t_d))
            return t_d

        g_d, h_d = table(0, 1), table(0, -1)
        ref = {nm: (table(kind, 1), table(kind, -1)) for kind, nm in ((1, "rn"), (2, "rz"), (3, "ru"))}
        g = cp.asnumpy(g_d).astype(np.int64)
        h = cp.asnumpy(h_d).astype(np.int64)
        rep["ex2_table"] = {"entries": n, "F": F, "mode": MODES[mode],
                            "g": "g[k] = bits(ex2.approx.ftz(k / 2^F)), in [1, 2)",
                            "h": "h[k] = bits(ex2.approx.ftz(-k / 2^F)), in (0.5, 1]"}
        for nm, t in (("g", g), ("h", h)):
            diff = np.diff(t)
            dt = np.int8 if diff.min() >= -128 and diff.max() <= 127 else np.int16
            tables[f"ex2_{nm}_first"] = np.uint32(t[0])
            tables[f"ex2_{nm}_diff"] = diff.astype(dt)
            sha = hashlib.sha256(t.astype("<u4").tobytes()).hexdigest()
            tables[f"ex2_{nm}_sha256"] = np.frombuffer(sha.encode(), np.uint8)
            info = {"first": hex(int(t[0])), "last": hex(int(t[-1])), "sha256": sha,
                    "monotone": bool((diff >= 0).all()) if nm == "g" else bool((diff <= 0).all())}
            for rnm, (rg, rh) in ref.items():
                r = cp.asnumpy(rg if nm == "g" else rh).astype(np.int64)
                d = t - r
                vals, cnts = np.unique(d, return_counts=True)
                info[f"minus_{rnm}_hist"] = {str(int(v_)): int(c_) for v_, c_ in zip(vals, cnts)}
                if rnm == "rn":
                    tables[f"ex2_{nm}_minus_rn"] = d.astype(np.int8 if np.abs(d).max() < 128 else np.int16)
                    rsha = hashlib.sha256(r.astype("<u4").tobytes()).hexdigest()
                    tables[f"ex2_{nm}_rn_sha256"] = np.frombuffer(rsha.encode(), np.uint8)
                    info["rn_sha256"] = rsha
            rep["ex2_table"][nm] = info
        # h[k] against g[n - k] / 2 (both 2^(-k / 2^F)), k = 1 .. n-1, in units of h's last place
        d = h[1:] - (g[n - np.arange(1, n)] - (1 << 23))
        vals, cnts = np.unique(d, return_counts=True)
        rep["ex2_table"]["h_minus_g_shifted_hist"] = {str(int(v_)): int(c_) for v_, c_ in zip(vals, cnts)}
        log("ex2 table: " + json.dumps(rep["ex2_table"]))
        cands = {"twos_complement_g": (g_d, g_d, 0), "sign_magnitude_measured": (g_d, h_d, 1)}
        for nm, (rg, rh) in ref.items():
            cands[f"sign_magnitude_{nm}"] = (rg, rh, 1)
        if a.candidates:
            z = np.load(a.candidates)
            for key in z.files:
                if key.startswith("cand_") and key.endswith("_g"):
                    base = key[5:-2]
                    dg = z[key].astype(np.int64)
                    dh = z[f"cand_{base}_h"].astype(np.int64) if f"cand_{base}_h" in z.files else np.zeros(n, np.int64)
                    if dg.shape[0] != n or dh.shape[0] != n:
                        log(f"candidate {base}: wrong size, skipped")
                        continue
                    cands[base] = (cp.asarray((g + dg).astype(np.uint32)), cp.asarray((h + dh).astype(np.uint32)), 1)
        models = {}
        c16 = cp.zeros(16, dtype=cp.uint64)
        ex = cp.zeros(3 * 64, dtype=cp.uint32)
        for name, (tg, th, use_h) in cands.items():
            c16.fill(0)
            ex.fill(0)
            t0 = time.time()
            K["ex2_model"](big_grid, (B,), (np.int32(F), np.int32(mode), tg, th, np.int32(use_h), c16, ex))
            r = [int(x) for x in cp.asnumpy(c16)]
            e = cp.asnumpy(ex).reshape(-1, 3)[:min(r[15], 64)]
            models[name] = {"use_h": use_h, "per_category": {cat: {"inputs": r[2 * j], "mismatch": r[2 * j + 1]}
                                                             for j, cat in enumerate(EX2_CATS)},
                            "mismatch_total": sum(r[2 * j + 1] for j in range(7)), "nan_in_to_7fffffff": r[14],
                            "examples": [[hex(int(x)), repr(b2f(int(x))), hex(int(y)), hex(int(p))] for x, y, p in e[:16]],
                            "seconds": round(time.time() - t0, 3)}
            log(f"ex2 model {name}: mismatches {models[name]['mismatch_total']} "
                f"{json.dumps({k: v['mismatch'] for k, v in models[name]['per_category'].items()})}")
        rep["ex2_models"] = models

    # ex2.approx.ftz vs ex2.approx (no ftz) on all inputs
    c16 = cp.zeros(16, dtype=cp.uint64)
    ex = cp.zeros(3 * 64, dtype=cp.uint32)
    K["cmp_ops"](big_grid, (B,), (np.int32(0), np.int32(1), c16, ex))
    r = [int(x) for x in cp.asnumpy(c16)]
    e = cp.asnumpy(ex).reshape(-1, 3)[:min(r[15], 64)]
    rep["ex2_ftz_vs_noftz"] = {"differ": r[0], "input_zero_or_subnormal": r[1], "noftz_result_subnormal": r[2],
                               "other": r[3], "both_nan": r[4],
                               "examples_other": [[hex(int(x)), repr(b2f(int(x))), hex(int(y)), hex(int(p))] for x, y, p in e[:16]]}
    log("ex2 ftz vs noftz: " + json.dumps(rep["ex2_ftz_vs_noftz"]))

    # ---------------------------------------------------------------- 5. rcp
    n23 = 1 << 23
    r_d = cp.empty(n23, dtype=cp.uint32)
    launch1d(K["eval_op"], n23, (np.int32(2), np.uint32(0x3F800000), np.uint32(n23), r_d))
    cr = cp.zeros(NSTAT, dtype=cp.uint64)
    launch1d(K["rcp_stats"], n23, (np.uint32(0x3F800000), np.uint32(n23), r_d, cr))
    rep["rcp_1_2"] = stats_dict(cp.asnumpy(cr), n23)
    log("rcp [1,2): " + json.dumps(rep["rcp_1_2"]))
    xs = (np.arange(n23, dtype=np.uint32) + np.uint32(0x3F800000)).view(np.float32)
    rn_r = (np.float32(1.0) / xs).view(np.uint32).astype(np.int64)
    rr = cp.asnumpy(r_d).astype(np.int64)
    dr = rr - rn_r
    tables["rcp_r_minus_rn"] = dr.astype(np.int8 if np.abs(dr).max() < 128 else np.int16)
    tables["rcp_r_sha256"] = np.frombuffer(hashlib.sha256(rr.astype("<u4").tobytes()).hexdigest().encode(), np.uint8)
    vals, cnts = np.unique(dr, return_counts=True)
    rep["rcp_table"] = {"r_minus_rn_hist": {str(int(v_)): int(c_) for v_, c_ in zip(vals, cnts)},
                        "r_sha256": hashlib.sha256(rr.astype("<u4").tobytes()).hexdigest(),
                        "monotone_nonincreasing": bool((np.diff(rr) <= 0).all())}
    rscan = []
    for F in (range(8, 24) if not a.quick else (12, 16, 22)):
        for mi in (2, 3):
            c6.fill(0)
            launch1d(K["rcp_struct"], n23, (np.int32(F), np.int32(mi), c6))
            r = [int(x) for x in cp.asnumpy(c6)]
            rscan.append({"F": F, "mode": MODES[mi], "tested": r[0], "mismatch": r[1]})
    rep["rcp_structure_scan"] = rscan
    log("rcp structure: " + " ".join(f"F{s_['F']}{s_['mode'][0]}:{s_['mismatch']}" for s_ in rscan))
    c16 = cp.zeros(16, dtype=cp.uint64)
    ex = cp.zeros(3 * 64, dtype=cp.uint32)
    K["rcp_model"](big_grid, (B,), (r_d, c16, ex))
    r = [int(x) for x in cp.asnumpy(c16)]
    e = cp.asnumpy(ex).reshape(-1, 3)[:min(r[15], 64)]
    rep["rcp_model"] = {"per_category": {cat: {"inputs": r[2 * j], "mismatch": r[2 * j + 1]} for j, cat in enumerate(RCP_CATS)},
                        "mismatch_total": sum(r[2 * j + 1] for j in range(5)), "nan_in_to_7fffffff": r[14],
                        "examples": [[hex(int(x)), repr(b2f(int(x))), hex(int(y)), hex(int(p))] for x, y, p in e[:16]]}
    log("rcp model: " + json.dumps(rep["rcp_model"]))

    tables["ex2_chunk_index"] = np.array(sorted(hashes), dtype=np.int32)
    tables["ex2_chunk_sha256"] = np.stack([np.frombuffer(hashes[c].encode(), np.uint8) for c in sorted(hashes)])
    tables["special_in"] = np.array(sp_bits, dtype=np.uint32)
    tables["special_ex2"] = sp_out["ex2"]
    tables["special_ex2_noftz"] = sp_out["ex2_noftz"]
    tables["special_rcp"] = sp_out["rcp"]
    np.savez_compressed(os.path.join(a.out, "mufu_tables.npz"), **tables)
    rep["seconds"] = round(time.time() - t_start, 1)
    rep["log"] = logs
    with open(os.path.join(a.out, "mufu_report.json"), "w") as h:
        json.dump(rep, h, indent=1)
    for f in sorted(os.listdir(a.out)):
        print(f"file {f}: {os.path.getsize(os.path.join(a.out, f)) / 2 ** 20:.2f} MiB")
    print(f"done in {rep['seconds']} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
