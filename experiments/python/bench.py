#!/usr/bin/env python3
"""bench.py: the Python module's speed against the C++ programs, in the same run (the goals of docs/python.md).

  round      pasa.round on a 64M-element float32 array (RNE to fp16, bf16, fp8_e4m3fn, fp8_e5m2; values over each
             format's whole range) against pasa-bench-round's 1-thread round_span rate on the same kind of array,
             both best of --reps. Goal: within 10 %. Python is timed writing into a preallocated out= (what the
             C++ benchmark does) and into a fresh array (the plain call: the fresh pages' first touch included).
  attention  pasa.attention at the paper's shape (1, 16, 1280, 128), uniform x0 = 20, Am = 0.5, against the
             algorithm time pasa-attn reports for the same problem (best of --reps each, alternating).
             Goal: within 5 %.

Run: build/pasa-python experiments/python/bench.py [round|attention ...] [--reps 5] [--threads 2]
"""
import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

import pasa

BUILD = Path(pasa.__file__).resolve().parent.parent  # <build>/python/pasa*.so


def spread_values(fmt, n, seed=1):
    """As pasa-bench-round draws them: random signs and significands, exponents uniform from two binades below
    the format's smallest subnormal to two above its largest finite value (within float32's range)."""
    info = pasa.format_info(fmt)
    lo = max(info["emin"] - info["p"] - 1, -149)
    hi = min(info["emax"] + 2, 127)
    g = np.random.default_rng(seed)
    m = (1 + g.integers(0, 1 << 23, n, dtype=np.int64) * 2.0**-23).astype(np.float32)
    e = g.integers(lo, hi + 1, n).astype(np.int32)
    return np.ldexp(np.where(g.random(n) < 0.5, -m, m), e).astype(np.float32)


def best(f, reps):
    t = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        t = min(t, time.perf_counter() - t0)
    return t


def bench_round(a):
    n = 64 << 20
    r = subprocess.run([str(BUILD / "pasa-bench-round"), "-n", str(n), "--reps", str(a.reps)], capture_output=True,
                       text=True, check=True)
    cpp = {}  # format -> 1-thread elements/s
    for line in r.stdout.splitlines():
        f = line.split()
        if len(f) >= 5 and f[1] == "1" and re.match(r"^[0-9.e+]+$", f[2]):
            cpp[f[0]] = float(f[2])
    print(f"pasa.round on {n} float32 elements ({n * 4 >> 20} MiB), best of {a.reps}; C++: pasa-bench-round, 1 thread")
    print(f"{'format':<11} {'C++ elem/s':>11} {'py out= elem/s':>15} {'ratio':>6} {'py fresh elem/s':>16} {'ratio':>6}")
    rows = []
    out = np.empty(n, np.float32)
    out.fill(0)  # fault the pages in, as the C++ benchmark does
    for fmt in ("fp16", "bf16", "tf32", "fp8_e4m3fn", "fp8_e5m2"):
        x = spread_values(fmt, n)
        t_out = best(lambda: pasa.round(x, fmt, out=out), a.reps)
        t_new = best(lambda: pasa.round(x, fmt), a.reps)
        rows.append({"format": fmt, "cpp": cpp[fmt], "py_out": n / t_out, "py_fresh": n / t_new})
        print(f"{fmt:<11} {cpp[fmt]:>11.4g} {n / t_out:>15.4g} {n / t_out / cpp[fmt]:>6.3f} {n / t_new:>16.4g} "
              f"{n / t_new / cpp[fmt]:>6.3f}", flush=True)
    return rows


def bench_attention(a):
    problem = {"shape": {"B": 1, "Nq": 16, "Sq": 1280, "D": 128}, "format": "fp16", "seed": 1,
               "generator": {"kind": "uniform", "x0": 20, "am": 0.5}}
    inputs = pasa.generate(problem)
    print(f"pasa.attention at (1, 16, 1280, 128), {a.threads} threads, best of {a.reps}; C++: pasa-attn's algorithm time")
    print(f"{'algorithm':<22} {'pasa-attn s':>11} {'pasa.attention s':>16} {'ratio':>6}")
    rows = []
    with tempfile.TemporaryDirectory() as d:
        Path(d, "p.json").write_text(json.dumps(problem))
        for algorithm, alloc in (("fa2", "fa_fp16_fp32"), ("pasa", "pasa_fp16"), ("fa2", "fa_fp32")):
            t_cpp = t_py = float("inf")
            for _ in range(a.reps):  # alternating, so that both see the same (shared, noisy) machine
                r = subprocess.run([str(BUILD / "pasa-attn"), "--problem", str(Path(d, "p.json")), "--algorithm",
                                    algorithm, "--alloc", alloc, "--threads", str(a.threads),
                                    "--json"], capture_output=True, text=True, check=True)
                t_cpp = min(t_cpp, json.loads(r.stdout)["algorithm_seconds"])
                t_py = min(t_py, best(lambda: pasa.attention(**inputs, algorithm=algorithm, alloc=alloc,
                                                             threads=a.threads), 1))
            rows.append({"algorithm": f"{algorithm}/{alloc}", "cpp_s": t_cpp, "py_s": t_py})
            print(f"{algorithm + ' / ' + alloc:<22} {t_cpp:>11.3f} {t_py:>16.3f} {t_py / t_cpp:>6.3f}", flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("what", nargs="*", default=["round", "attention"], choices=["round", "attention"])
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--json", help="write the figures as JSON")
    a = ap.parse_args()
    res = {w: {"round": bench_round, "attention": bench_attention}[w](a) for w in a.what}
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=1) + "\n")


if __name__ == "__main__":
    sys.exit(main())
