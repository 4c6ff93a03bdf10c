#!/usr/bin/env python3
"""tc_compare_random.py: tc_compare.py's randomised comparison alone (no probes), for a re-run of
tc_random.py on another GPU: the FP8 wgmma models (h100_e4m3, h100_e4m3_fast, ...) against an H200's
torch._scaled_mm outputs. Same inputs (tc_random.py's seed), same models, same columns as tc_random.csv.

How to run: python3 experiments/gpu/tc_compare_random.py --gpu-dir DIR --bin build/pasa-hwcompare
            --out results/hardware/tc_random_h200 [--formats e4m3,e5m2]"""
import argparse, json, os, tempfile

import tc_compare as tc


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--gpu-dir", required=True)
    ap.add_argument("--bin", required=True)
    ap.add_argument("--out", required=True)
    ap.add_argument("--formats", default="e4m3,e5m2")
    args = ap.parse_args()
    meta = json.load(open(os.path.join(args.gpu_dir, "tc_random.json")))
    work = tempfile.mkdtemp(prefix="tc_compare_random_")
    fields = ["outputs", "identical", "ulp_1", "ulp_2_4", "ulp_over_4", "nan_mismatch", "max_ulp"]
    rows = []
    for fmt in args.formats.split(","):
        rdir = os.path.join(work, fmt)
        tc.unpack(os.path.join(args.gpu_dir, f"tc_random_{fmt}.npz"), rdir)
        for var in tc.VARIANTS[fmt]:
            for model in ("tensor_core", "ordered"):
                for K in (64, 128, 256, 1280):
                    base = os.path.join(rdir, f"K{K}")
                    gemm = tc.model_json(fmt, var, K, model)
                    v = tc.compare(args.bin, base + "_A.npy", base + "_Bt.npy", f"{base}_{var}.npy", fmt,
                                   meta["b_format"][fmt], var, gemm)
                    rows.append({"format": fmt, "variant": var, "K": K, "model": json.dumps(gemm), **dict(zip(fields, v)),
                                 "identical_pct": f"{100 * v[1] / v[0]:.4f}"})
                    print(fmt, var, K, model, v, flush=True)
    os.makedirs(args.out, exist_ok=True)
    tc.write_csv(os.path.join(args.out, "tc_random.csv"), rows)
    with open(os.path.join(args.out, "tc_random.json"), "w") as f:
        json.dump(meta, f, indent=1)


if __name__ == "__main__":
    main()
