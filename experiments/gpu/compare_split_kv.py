#!/usr/bin/env python3
"""compare_split_kv.py: the toolkit's split-KV merge model against the GPU's flash-decoding port.

Given the folder split_kv_ports.py wrote on the GPU machine (x0_<x0>/out_p<parts>_<fp16|fp32>.npy,
inputs_digest.json, summary.csv), this regenerates the same inputs on the CPU (split_kv_ports.make_inputs, no
torch; checked against the GPU's input digests), runs pasa-attn on them with the matching allocation —
FA-FP16/FP32 (fa_fp16_fp32: S in fp16, fp32 elsewhere, output fp16), fa2 with KV blocks of s2 = 128, `parts`
splits, merge model normalised_lse with the partials stored in fp16 or fp32, lse in fp32, the merge in fp32
(docs/decode.md) — and prints, per point, the GPU's RMSE and the emulator's RMSE against the toolkit's MPFR
golden (PASA Eq. 19: ||O − O_golden||_F / ||O_golden||_F) and their ratio (the issue's goal: 0.95–1.05).

  python3 experiments/gpu/compare_split_kv.py GPU_DIR [--pasa-attn build/pasa-attn] [--csv out.csv]
      [--models normalised_lse,unnormalised] [--threads N] [--work DIR]

--models adds the unnormalised merge (the model before issue 25, "merge" rounded to fp32) as a second
emulated column. The golden is computed once per x0 (pasa-attn --golden-npy) and kept in --work (default
GPU_DIR/cpu); runs whose output exists there are not repeated.
"""
import argparse
import csv
import json
import os
import subprocess
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import split_kv_ports as ports  # noqa: E402  (numpy part only: make_inputs, SHAPE, X0S, PARTS, PARTIALS)

S2 = ports.S2


def rmse(o, ref):
    """PASA Eq. 19 over the finite elements of o (as split_kv_ports.rmse), and the non-finite count."""
    o, ref = np.asarray(o, np.float64), np.asarray(ref, np.float64)
    fin = np.isfinite(o)
    return float(np.linalg.norm((o - ref)[fin]) / np.linalg.norm(ref[fin])), int((~fin).sum())


def digest(arrays):
    return {n: int(np.frombuffer(t.tobytes(), np.uint16).astype(np.uint64).sum()) for n, t in zip("qkv", arrays)}


def algo_json(parts, partial, model):
    merge = {"model": model}
    if model == "normalised_lse":
        merge.update({"partial": partial, "lse": "fp32"})
    return {"name": "fa2", "s1": 64, "s2": S2, "splits": parts,
            "alloc": {"preset": "fa_fp16_fp32", "name": f"fa_fp16_fp32 split {model} {partial}",
                      "stages": {"merge": merge}}}


def run(cmd):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"compare_split_kv: {' '.join(cmd)} failed ({r.returncode}):\n{r.stderr}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("gpu_dir", help="the folder split_kv_ports.py wrote")
    ap.add_argument("--pasa-attn", default="build/pasa-attn")
    ap.add_argument("--work", help="folder for inputs, goldens and emulated outputs (default GPU_DIR/cpu)")
    ap.add_argument("--csv", help="write the table as CSV here")
    ap.add_argument("--models", default="normalised_lse", help="comma list: normalised_lse, unnormalised")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, default=1, help="the seed split_kv_ports.py ran with")
    ap.add_argument("--shape", help="B,Nq,Nkv,Skv,D instead of split_kv_ports.SHAPE (a reduced self-check)")
    a = ap.parse_args()
    if a.shape:
        try:
            dims = [int(x) for x in a.shape.split(",")]
            if len(dims) != 5 or min(dims) < 1:
                raise ValueError
        except ValueError:
            raise SystemExit(f"compare_split_kv: --shape {a.shape!r}: expected five positive integers B,Nq,Nkv,Skv,D")
        ports.SHAPE.update(zip(("B", "Nq", "Nkv", "Skv", "D"), dims))
    models = a.models.split(",")
    for m in models:
        if m not in ("normalised_lse", "unnormalised"):
            raise SystemExit(f"compare_split_kv: unknown model {m!r} (normalised_lse, unnormalised)")
    work = a.work or os.path.join(a.gpu_dir, "cpu")
    rows = []
    for x0 in ports.X0S:
        gdir = os.path.join(a.gpu_dir, f"x0_{x0}")
        if not os.path.isdir(gdir):
            print(f"compare_split_kv: {gdir} missing, x0 = {x0} skipped", file=sys.stderr)
            continue
        wdir = os.path.join(work, f"x0_{x0}")
        os.makedirs(wdir, exist_ok=True)
        arrays = ports.make_inputs(a.seed, x0)
        dg_file = os.path.join(gdir, "inputs_digest.json")
        if os.path.exists(dg_file):
            with open(dg_file) as f:
                if json.load(f) != digest(arrays):
                    raise SystemExit(f"compare_split_kv: the regenerated inputs differ from the GPU's ({dg_file}); "
                                     "same seed and NumPy version?")
        files = {}
        for name, t in zip("qkv", arrays):
            files[name] = os.path.join(wdir, f"{name}.npy")
            if not os.path.exists(files[name]):
                np.save(files[name], t)
        del arrays
        golden = os.path.join(wdir, "golden.npy")
        for parts in ports.PARTS:
            for pname in ports.PARTIALS:
                gpu_file = os.path.join(gdir, f"out_p{parts}_{pname}.npy")
                if not os.path.exists(gpu_file):
                    print(f"compare_split_kv: {gpu_file} missing, skipped", file=sys.stderr)
                    continue
                emu = {}
                for model in models:
                    tag = f"p{parts}_{pname}_{model}"
                    out = os.path.join(wdir, f"emu_{tag}.npy")
                    if not os.path.exists(out) or not os.path.exists(golden):
                        aj = os.path.join(wdir, f"algo_{tag}.json")
                        with open(aj, "w") as f:
                            json.dump(algo_json(parts, pname, model), f, indent=1)
                        cmd = [a.pasa_attn, "--q", files["q"], "--k", files["k"], "--v", files["v"], "--algo-json", aj,
                               "--threads", str(a.threads), "--out-npy", out, "--json"]
                        if not os.path.exists(golden):
                            cmd += ["--golden-npy", golden]
                        run(cmd)
                    emu[model] = np.load(out)
                g = np.load(golden)
                gpu = np.load(gpu_file)
                if gpu.shape != g.shape:
                    raise SystemExit(f"compare_split_kv: {gpu_file} has shape {gpu.shape}, the golden {g.shape}")
                e_gpu, nf_gpu = rmse(gpu, g)
                row = {"x0": x0, "parts": parts, "partial": pname, "rmse_gpu": e_gpu, "nonfinite_gpu": nf_gpu}
                for model in models:
                    e, nf = rmse(emu[model], g)
                    row[f"rmse_{model}"] = e
                    row[f"nonfinite_{model}"] = nf
                    row[f"ratio_{model}"] = e / e_gpu if e_gpu > 0 else float("nan")
                    row[f"equal_pct_{model}"] = 100.0 * float(np.mean(emu[model] == gpu))
                rows.append(row)
                print("  ".join(f"{k} {v:.6g}" if isinstance(v, float) else f"{k} {v}" for k, v in row.items()),
                      flush=True)
    if not rows:
        raise SystemExit("compare_split_kv: no GPU outputs found")
    if a.csv:
        with open(a.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0]))
            w.writeheader()
            w.writerows(rows)
    ratios = [r["ratio_normalised_lse"] for r in rows if "ratio_normalised_lse" in r]
    if ratios:
        inside = sum(0.95 <= x <= 1.05 for x in ratios)
        print(f"normalised_lse: {inside} of {len(ratios)} points within 0.95-1.05 of the GPU's RMSE "
              f"(min {min(ratios):.4f}, max {max(ratios):.4f})")


if __name__ == "__main__":
    main()
