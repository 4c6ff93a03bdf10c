#!/usr/bin/env python3
"""tc_compare.py: the H100's tensor-core GEMMs against the toolkit's tensor_core model, on this (CPU) machine.
Method: Fasi, Higham, Mikaitis, Pranesh 2021 (PeerJ CS 7:e330) and Khattak, Mikaitis 2025 (arXiv:2512.07004):
the probe vectors of tc_probe.py determine each feature; the randomised data of tc_random.py then test the
model bit for bit.

What it does
  1. Unpacks GPU_DIR/tc_probe.npz and tc_random_<f>.npz (written on the GPU machine) into WORK.
  2. Reads the probe outputs (the diagonal C[p, p] of each probe matrix) and derives each feature per format
     and GEMM variant: the bits kept below the largest exponent (thr), whether that exponent is the
     exponent sum (s = 2.25), truncation or rounding of the dropped bits and its sign handling (m = 1.75, +-),
     the block size (blk), whether the accumulator is aligned with the block (abs), where an outer
     accumulator takes over (abs at K = 256, 1280: promotion or split-K), the normalisation's rounding (rnd)
     and the tf32 input conversion (cvt) -> OUT/tc_probe_findings.csv.
  3. Runs `pasa-hwcompare gemm` on every probe and random (format, variant, K) with the measured model
     (MODELS below; tf32 with cuBLAS's split-K per K) and, for contrast, the `ordered` model (an fp32 FMA
     chain): OUT/tc_probe.csv and OUT/tc_random.csv (outputs, bit-identical, 1 ulp, 2-4 ulps, > 4 ulps,
     NaN mismatches, max ulps, identical %).

How to run (needs NumPy and a build of pasa-hwcompare):
  python3 experiments/gpu/tc_compare.py --gpu-dir GPU_DIR --bin build/pasa-hwcompare --out results/hardware
"""
import argparse
import csv
import json
import os
import subprocess
import sys
import tempfile
import zipfile

import numpy as np

PASA_FMT = {"fp16": "fp16", "bf16": "bf16", "tf32": "fp32", "e4m3": "fp8_e4m3fn", "e5m2": "fp8_e5m2"}
OUT_FMT = {"mm_f32": "fp32", "mm_f16": "fp16", "mm_bf16": "bf16", "mm_tf32": "fp32", "scaled_f32": "fp32",
           "scaled_f32_fast": "fp32"}
VARIANTS = {"fp16": ["mm_f32", "mm_f16"], "bf16": ["mm_f32", "mm_bf16"], "tf32": ["mm_tf32"],
            "e4m3": ["scaled_f32", "scaled_f32_fast"], "e5m2": ["scaled_f32", "scaled_f32_fast"]}
# The measured model of each (format, variant): a named tensor_core model (allocation.hpp).
MODELS = {("fp16", "mm_f32"): "h100_fp16", ("fp16", "mm_f16"): "h100_fp16", ("bf16", "mm_f32"): "h100_bf16",
          ("bf16", "mm_bf16"): "h100_bf16", ("tf32", "mm_tf32"): "h100_tf32", ("e4m3", "scaled_f32"): "h100_e4m3",
          ("e4m3", "scaled_f32_fast"): "h100_e4m3_fast", ("e5m2", "scaled_f32"): "h100_e5m2",
          ("e5m2", "scaled_f32_fast"): "h100_e5m2_fast"}
# cuBLAS's tf32 kernels for a 128 x 128 output split K into chunks reduced in order in fp32 (RNE), found by the
# abs probes and confirmed by the random data: the chunk per K (0: none). Modelled by "promote".
TF32_SPLIT = {16: 0, 64: 32, 128: 0, 256: 64, 1280: 96}


def unpack(npz, where):
    with zipfile.ZipFile(npz) as z:
        z.extractall(where)


def model_json(fmt, variant, K, model):
    if model == "ordered":
        return {"model": "ordered"}
    j = {"model": "tensor_core", "tensor_core": MODELS[(fmt, variant)]}
    if fmt == "tf32":
        j["promote"] = TF32_SPLIT[K]
    return j


def compare(binary, a, b, c, fmt, b_fmt, variant, gemm):
    cmd = [binary, "gemm", "--a", a, "--b", b, "--c", c, "--a-format", PASA_FMT[fmt], "--b-format", PASA_FMT[b_fmt],
           "--out-format", OUT_FMT[variant], "--gemm", json.dumps(gemm)]
    if fmt == "tf32":
        cmd += ["--convert", "tf32", "--convert-mode", "rne"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        sys.exit(f"tc_compare: {' '.join(cmd)} failed: {r.stderr}")
    return [int(x) for x in r.stdout.strip().split(",")]


def findings(work, meta):
    """Each feature from the probes' diagonal outputs."""
    z = {}
    for f in os.listdir(work):
        if f.endswith(".npy"):
            z[f[:-4]] = np.load(os.path.join(work, f))
    rows = []

    def out(fmt, K, var, i):
        c = z[f"probe_{fmt}_K{K}_{var}"][i // 128, i % 128, i % 128]
        if var == "mm_bf16":
            return float(np.array([int(c) << 16], dtype=np.uint32).view(np.float32)[0])
        return float(c)

    for fmt, variants in VARIANTS.items():
        for var in variants:
            P = [p for p in meta["probes"] if p["format"] == fmt]

            def fam(name, **kw):
                return [p for p in P if p["family"] == name and all(p["params"].get(k) == v for k, v in kw.items())]

            def y_of(p, pos):
                a, b = p["terms"][pos]
                return a * b

            def kept_bits(s):
                ks = [p["params"]["k"] for p in fam("thr", s=s, m=1.0, sign=1) if out(fmt, 16, var, p["index"]) == 0]
                return min(ks) - 1 if ks else None

            r = {"format": fmt, "variant": var, "bits_kept_sig1": kept_bits(1.0), "bits_kept_sig2_25": kept_bits(2.25)}
            F = r["bits_kept_sig1"]
            if F is not None:  # y = +-1.75 units below the cut: 1.5 (truncation) or 2 (rounding) units survive
                for sg, key in ((1, "units_left_of_+1.75u"), (-1, "units_left_of_-1.75u")):
                    p = fam("thr", s=1.0, m=1.75, sign=sg, k=F)
                    if p:
                        r[key] = out(fmt, 16, var, p[0]["index"]) / y_of(p[0], "2") * 1.75 * sg
            blk = [p["params"]["j"] for p in fam("blk") if out(fmt, 64, var, p["index"]) != 0]
            r["block"] = min(blk) if blk else None
            for K in (64, 128, 256, 1280):
                surv = [p["params"]["j"] for p in fam("abs") if p["K"] == K and out(fmt, K, var, p["index"]) != 0]
                r[f"abs_K{K}_first_survivor"] = min(surv) if surv else None
            r["acc_in_block"] = r["abs_K64_first_survivor"] is None or (r["block"] is not None and r["abs_K64_first_survivor"] > r["block"])
            # rnd: 1 + y with y = -2^-25 (kept): RZ gives 1 - 2^-24, RNE gives 1 (tie to even)
            p = fam("rnd", base=1, m=1.0, sign=-1, k=25, pos=1)
            if p and fmt in ("fp16", "bf16", "tf32") and OUT_FMT[var] == "fp32":
                o = out(fmt, 64, var, p[0]["index"])
                b = abs(y_of(p[0], "0"))
                r["one_minus_2^-25"] = {1 - 2**-24: "rz", 1.0: "rne"}.get(o / b, f"{o / b!r}")
            if fmt == "tf32":
                tie = [p for p in fam("cvt", sign=1) if p["params"]["d"] == 2.0**-11]
                if tie:
                    o = out(fmt, 16, var, tie[0]["index"])
                    r["tf32_cvt_of_1+2^-11"] = {0.0: "rne (tie to even)", 2.0**-10: "rna or ru"}.get(o, repr(o))
            rows.append(r)
    return rows


def write_csv(path, rows):
    keys = []
    for r in rows:
        keys += [k for k in r if k not in keys]
    with open(path, "w", newline="") as h:
        w = csv.DictWriter(h, fieldnames=keys)
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {path} ({len(rows)} rows)")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--gpu-dir", required=True)
    ap.add_argument("--bin", required=True, help="pasa-hwcompare")
    ap.add_argument("--out", required=True)
    ap.add_argument("--work", help="scratch folder (default: a temporary one)")
    args = ap.parse_args()
    work = args.work or tempfile.mkdtemp(prefix="tc_compare_")
    os.makedirs(args.out, exist_ok=True)
    meta = json.load(open(os.path.join(args.gpu_dir, "tc_probe.json")))
    pdir = os.path.join(work, "probe")
    unpack(os.path.join(args.gpu_dir, "tc_probe.npz"), pdir)
    write_csv(os.path.join(args.out, "tc_probe_findings.csv"), findings(pdir, meta))
    prow, rrow = [], []
    fields = ["outputs", "identical", "ulp_1", "ulp_2_4", "ulp_over_4", "nan_mismatch", "max_ulp"]
    for fmt, variants in VARIANTS.items():
        b_fmt = meta["b_format"][fmt]
        rdir = os.path.join(work, fmt)
        unpack(os.path.join(args.gpu_dir, f"tc_random_{fmt}.npz"), rdir)
        for var in variants:
            for model in ("tensor_core", "ordered"):
                for K in (16, 64, 128, 256, 1280):
                    base = os.path.join(pdir, f"probe_{fmt}_K{K}")
                    gemm = model_json(fmt, var, K, model)
                    v = compare(args.bin, base + "_A.npy", base + "_Bt.npy", f"{base}_{var}.npy", fmt, b_fmt, var, gemm)
                    prow.append({"format": fmt, "variant": var, "K": K, "model": json.dumps(gemm), **dict(zip(fields, v)),
                                 "identical_pct": f"{100 * v[1] / v[0]:.4f}"})
                for K in (64, 128, 256, 1280):
                    base = os.path.join(rdir, f"K{K}")
                    gemm = model_json(fmt, var, K, model)
                    v = compare(args.bin, base + "_A.npy", base + "_Bt.npy", f"{base}_{var}.npy", fmt, b_fmt, var, gemm)
                    rrow.append({"format": fmt, "variant": var, "K": K, "model": json.dumps(gemm), **dict(zip(fields, v)),
                                 "identical_pct": f"{100 * v[1] / v[0]:.4f}"})
                    print(fmt, var, K, model, v, flush=True)
    write_csv(os.path.join(args.out, "tc_probe.csv"), prow)
    write_csv(os.path.join(args.out, "tc_random.csv"), rrow)


if __name__ == "__main__":
    main()
