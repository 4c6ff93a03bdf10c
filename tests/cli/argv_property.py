#!/usr/bin/env python3
"""Property test of every program's argument handling: random argv drawn from each program's own
options (read from its --help), with valid, boundary and hostile values, each run in a fresh folder with a
time limit. Properties: no signal, never exit 3 ("internal error"), no hang (the time limit), and a run that
fails leaves no new file behind (nor does any run leave a temporary file). Seeded and reproducible; a failure
prints the argv, ready to paste into a shell in the kept folder.

Usage: argv_property.py BUILD_DIR [--runs N] [--seed S] [--jobs J] [--timeout SECONDS]
"""
import argparse
import concurrent.futures
import json
import os
import random
import re
import shlex
import shutil
import struct
import subprocess
import sys
import tempfile

# Each program with the arguments that keep a run small (a random option replaces the base option of the
# same name). pasa-tables would run every paper sweep: its repository has no configs, so it stops early.
BASE = {
    "pasa-attn": ["--heads", "1", "--seq", "16", "--dim", "8", "--threads", "1"],
    "pasa-attribute": ["--problem", "problem.json", "--threads", "1"],
    "pasa-beta": ["--beta", "0.9", "--n", "16"],
    "pasa-fdpp": ["--lengths", "16", "--threads", "1", "--out", "fdpp.csv"],
    "pasa-hwcompare attention": ["--gpu-dir", "gpu", "--configs", "configs", "--out", "hw.csv", "--threads", "1"],
    "pasa-hwcompare conversions": ["--gpu-dir", "gpu", "--out", "conv.csv", "--threads", "1"],
    "pasa-hwcompare gemm": ["--a", "a.npy", "--b", "a.npy", "--c", "c.npy", "--a-format", "fp16", "--out-format", "fp32"],
    "pasa-round": ["1", "2.5", "-f", "fp16"],
    "pasa-sweep": ["sweep.json", "--threads", "1", "--out", "sweep-out"],
    "pasa-tables": ["--repo", "norepo", "--out", "tables", "--threads", "1"],
    "pasa-bench-attention": ["--heads", "1", "--seq", "32", "--dim", "8", "--reps", "1"],
    "pasa-bench-decode": ["--batch", "1", "--heads", "2", "--kv-heads", "1", "--kv-seq", "64", "--dim", "8",
                          "--block", "16", "--threads", "1"],
    "pasa-bench-every-op": ["--heads", "1", "--seq", "128", "--dim", "8", "--reps", "1"],
    "pasa-bench-golden": ["--heads", "1", "--seq", "32", "--dim", "8", "--threads", "1"],
    "pasa-bench-long": ["--lengths", "16,32", "--dim", "8", "--threads", "1"],
    "pasa-bench-round": ["-n", "1000", "--reps", "1"],
}
# Options whose huge values are legitimate requests for a long run (a repetition count): no huge values.
NO_HUGE = {"--reps", "--max-iter", "--mismatches", "--precision-bits", "--with-sqrt-d", "--n"}

SMALL = ["1", "2", "3", "8", "16", "64"]
BOUNDARY = ["0", "-1", "18446744073709551615", "18446744073709551616", "9223372036854775808", "100000000000",
            "2147483648", "1e308", "1e11", "nan", "inf", "-inf", "", "abc", "1.5", "-0", "0x10", " 1"]
NAMES = ["fp16", "bf16", "fp8_e4m3fn", "fp32", "fp64", "p=99999999999999999999,emax=15", "p=0,emax=1", "nope",
         "fa2", "pasa", "fa_fp16_fp32", "pasa_fp16", "uniform", "hybrid", "resonance", "rne", "sr", "saturate"]
PATHS = ["/dev/null", "missing.json", "missing/x.csv", ".", "/", "problem.json", "q.npy", "a.npy", "sweep.json",
         "bad.json", "empty.npy", "out.npy", "out.csv", "gpu", "configs", "1G", "64M", "0", "-5K"]


def fixtures(root):
    """Small inputs the options may name: a problem, .npy tensors, a sweep config, a broken JSON file."""
    def npy(name, shape, dtype="<f8", fill=0.5):
        header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (
            dtype, "".join(f"{d}, " for d in shape))
        header = header.ljust(117) + "\n"
        n = 1
        for d in shape:
            n *= d
        data = struct.pack("<%dd" % n, *([fill] * n)) if dtype == "<f8" else b""
        with open(os.path.join(root, name), "wb") as f:
            f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode() + data)
    npy("q.npy", (1, 16, 8))
    npy("a.npy", (1, 4, 4))
    npy("c.npy", (1, 4, 4))
    with open(os.path.join(root, "empty.npy"), "wb"):
        pass
    json.dump({"shape": {"B": 1, "Nq": 1, "Nkv": 1, "Sq": 16, "Skv": 16, "D": 8}, "format": "fp16", "seed": 1,
               "generator": {"kind": "uniform", "x0": 0, "am": 1}}, open(os.path.join(root, "problem.json"), "w"))
    json.dump({"name": "tiny", "problem": {"shape": {"Nq": 1, "Sq": 16, "D": 8}, "format": "fp16", "seed": "$seed",
                                           "generator": {"kind": "uniform", "x0": "$x0", "am": 0.5}},
               "grid": {"x0": [0, 1]}, "seeds": [1],
               "algorithms": [{"label": "FA", "name": "fa2", "alloc": "fa_fp16_fp32"}]},
              open(os.path.join(root, "sweep.json"), "w"))
    with open(os.path.join(root, "bad.json"), "w") as f:
        f.write('{"shape": [')
    os.makedirs(os.path.join(root, "gpu"))
    os.makedirs(os.path.join(root, "configs"))


def options_of(build, program):
    """(name, takes_value) for each option of the program's --help, positionals excluded."""
    out = subprocess.run([os.path.join(build, program.split()[0])] + program.split()[1:] + ["--help"],
                         capture_output=True, text=True, timeout=30).stdout
    opts = []
    for line in out.splitlines():
        m = re.match(r"^\s+(?:-\w,)?(--[\w-]+)(?:\s+(\S+))?", line)
        if not m or m.group(1) == "--help":
            continue
        kind = m.group(2) or ""
        opts.append((m.group(1), bool(kind) and kind.split(":")[0].isupper()))
    return opts


def draw_value(rng, option):
    pools = [SMALL, BOUNDARY, NAMES, PATHS]
    pool = rng.choice(pools)
    v = rng.choice(pool)
    if option in NO_HUGE and (len(v) > 6 and v.lstrip("-").isdigit() or v in ("1e308", "1e11", "inf")):
        v = "0"
    return v


def draw_argv(rng, program, opts):
    base = list(BASE[program])
    args = []
    for _ in range(rng.randint(1, 3)):
        name, takes_value = rng.choice(opts)
        if name in base:  # replace the base option of that name (and its value)
            i = base.index(name)
            del base[i:i + (2 if i + 1 < len(base) and not base[i + 1].startswith("--") else 1)]
        args.append(name)
        if takes_value:
            args.append(draw_value(rng, name))
    return program.split() + base + args


def tree(root):
    found = set()
    for d, dirs, files in os.walk(root):
        for x in dirs + files:
            found.add(os.path.relpath(os.path.join(d, x), root))
    return found


def run_one(build, template, argv, timeout):
    work = tempfile.mkdtemp(prefix="argv-")
    shutil.rmtree(work)
    shutil.copytree(template, work)
    before = tree(work)
    env = dict(os.environ, OPENBLAS_CORETYPE=os.environ.get("OPENBLAS_CORETYPE", "Haswell"), OPENBLAS_NUM_THREADS="1")
    exe = [os.path.join(build, argv[0])] + argv[1:]
    problem = None
    try:
        p = subprocess.run(exe, cwd=work, capture_output=True, text=True, timeout=timeout, env=env,
                           stdin=subprocess.DEVNULL)
        rc, output = p.returncode, (p.stdout + p.stderr)[-2000:]
        if rc < 0:
            problem = f"killed by signal {-rc}"
        elif rc == 3:
            problem = "exit 3 (internal error)"
        else:
            after = tree(work)
            temporary = sorted(x for x in after if re.search(r"\.tmp|~$", x))
            left = sorted(after - before)
            if temporary:
                problem = f"temporary files left: {temporary}"
            elif rc != 0 and left:
                problem = f"exit {rc}, yet new files: {left}"
    except subprocess.TimeoutExpired:
        rc, output, problem = None, "", f"no result within {timeout} s (a hang?)"
    if problem is None:
        shutil.rmtree(work, ignore_errors=True)
        return None
    return f"{problem}\n  cd {work} && {shlex.join(exe)}\n" + "".join("    " + l + "\n" for l in output.splitlines()[-8:])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--runs", type=int, default=300)
    ap.add_argument("--seed", type=int, default=23)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=30)
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    programs = [p for p in BASE if os.path.exists(os.path.join(build, p.split()[0]))]
    missing = sorted({p.split()[0] for p in BASE} - {p.split()[0] for p in programs})
    if missing:
        print(f"programs not built (skipped): {', '.join(missing)}")
    opts = {p: options_of(build, p) for p in programs}
    rng = random.Random(a.seed)
    argvs = [draw_argv(rng, p, opts[p]) for p in (rng.choice(programs) for _ in range(a.runs))]
    template = tempfile.mkdtemp(prefix="argv-fixtures-")
    fixtures(template)
    failures = []
    with concurrent.futures.ThreadPoolExecutor(a.jobs) as pool:
        for r in pool.map(lambda v: run_one(build, template, v, a.timeout), argvs):
            if r:
                failures.append(r)
                print("FAIL: " + r, flush=True)
    shutil.rmtree(template, ignore_errors=True)
    print(f"{len(argvs)} runs (seed {a.seed}) over {len(programs)} programs: {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
