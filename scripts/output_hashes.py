#!/usr/bin/env python3
"""Prints a hash of every output of a fixed set of runs, one line each, so that two builds (native and
portable, x86-64 and aarch64, gcc and clang) can be compared: "same bits on every CPU" holds when the two
listings are equal (diff exits 0).

Runs: every allocation preset x every algorithm of pasa-attn on three small shapes (prefill with GQA, a
ragged causal shape whose sizes are no multiple of the SIMD width, and a decode step), hashing the output
.npy (or the refusal's exit status), and the first row (first grid point, first seed, every algorithm) of
each of the four paper sweeps, hashing results.csv without its timing columns.

Usage: output_hashes.py BUILD_DIR [--quick] [--runner 'qemu-aarch64 -L /usr/aarch64-linux-gnu']
"""
import argparse
import csv
import hashlib
import io
import json
import os
import pathlib
import re
import shlex
import subprocess
import sys
import tempfile

ROOT = pathlib.Path(__file__).resolve().parent.parent
SHAPES = {
    "gqa": ["--batch", "1", "--heads", "4", "--kv-heads", "2", "--seq", "48", "--kv-seq", "64", "--dim", "32",
            "--gen", "uniform", "--x0", "20", "--am", "0.5"],
    "ragged": ["--batch", "2", "--heads", "3", "--kv-heads", "1", "--seq", "17", "--kv-seq", "41", "--dim", "23",
               "--gen", "hybrid", "--x0", "5", "--am", "10", "--causal"],
    "decode": ["--batch", "2", "--heads", "8", "--kv-heads", "2", "--seq", "1", "--kv-seq", "300", "--dim", "64",
               "--gen", "uniform", "--x0", "0", "--am", "3"],
}
PAPER_SWEEPS = ["fig9_uniform_x0", "fig9_uniform_am", "fig10_hybrid_x0", "fig10_hybrid_am"]
TIMING = re.compile(r"(seconds|_s$|time|wall)")


def sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()[:16]


def help_choices(runner, build, option):
    text = subprocess.run(runner + [str(build / "pasa-attn"), "--help"], capture_output=True, text=True).stdout
    m = re.search(re.escape(option) + r" TEXT[^\n]*\n\s+[^:\n]*:\s*([^\n]+)", text)
    if not m:
        sys.exit(f"output_hashes: cannot read the {option} list from pasa-attn --help")
    return [w.strip() for w in m.group(1).split(",")]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--quick", action="store_true", help="the attention runs only, no paper sweeps")
    ap.add_argument("--runner", default="", help="command prefix, e.g. an emulator")
    a = ap.parse_args()
    build = pathlib.Path(a.build).resolve()
    runner = shlex.split(a.runner)
    algorithms = help_choices(runner, build, "--algorithm")
    presets = help_choices(runner, build, "--alloc")
    with tempfile.TemporaryDirectory() as tmp:
        out = pathlib.Path(tmp) / "o.npy"
        for shape, args in SHAPES.items():
            for preset in presets:
                for algo in algorithms:
                    if out.exists():
                        out.unlink()
                    r = subprocess.run(runner + [str(build / "pasa-attn"), *args, "--algorithm", algo, "--alloc",
                                                 preset, "--threads", "2", "--out-npy", str(out)],
                                       capture_output=True)
                    h = sha(out.read_bytes()) if r.returncode == 0 and out.exists() else f"exit{r.returncode}"
                    print(f"attn {shape} {preset} {algo} {h}", flush=True)
        if a.quick:
            return
        for name in PAPER_SWEEPS:
            cfg = json.loads((ROOT / "configs" / f"{name}.json").read_text())
            for k, v in cfg["grid"].items():  # first grid point only
                if isinstance(v, dict):
                    cfg["grid"][k] = v["from"]
                elif isinstance(v, list):
                    cfg["grid"][k] = v[0]
            cfg["seeds"] = cfg["seeds"][:1]
            cfg.pop("outputs", None)
            cpath = pathlib.Path(tmp) / f"{name}.json"
            cpath.write_text(json.dumps(cfg))
            odir = pathlib.Path(tmp) / f"out-{name}"
            r = subprocess.run(runner + [str(build / "pasa-sweep"), str(cpath), "--out", str(odir), "--threads", "2"],
                               capture_output=True, text=True)
            if r.returncode != 0:
                print(f"sweep {name} exit{r.returncode}")
                continue
            rows = list(csv.reader(io.StringIO((odir / "results.csv").read_text())))
            keep = [i for i, c in enumerate(rows[0]) if not TIMING.search(c)]
            text = "\n".join(",".join(row[i] for i in keep) for row in rows)
            print(f"sweep {name} {sha(text.encode())}", flush=True)


if __name__ == "__main__":
    main()
