#!/usr/bin/env python3
"""The memory estimates of pasa-attn and pasa-sweep against the measured peak RSS.

Each case runs the built program in a child process; its peak resident set (os.wait4's ru_maxrss) is
compared with the estimate the program checks before it allocates (pasa-attn --json: memory_estimate_bytes;
pasa-sweep: the "needs about" of a run refused with --max-memory 1). Every ratio estimate / peak must lie in
[0.8, 1.25]: an estimate far above the peak refuses runs that fit, one far below lets a run exhaust memory.

usage: check_memory_estimates.py BUILD_DIR [--long]   (--long: larger shapes, minutes)
"""
import json
import os
import re
import subprocess
import sys
import tempfile

LO, HI = 0.8, 1.25
UNITS = {"bytes": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30, "TiB": 2**40}


def peak_rss(argv, cwd):
    """Runs argv; returns (exit status, stdout, stderr, peak RSS in bytes)."""
    with tempfile.TemporaryFile() as out, tempfile.TemporaryFile() as err:
        proc = subprocess.Popen(argv, stdout=out, stderr=err, cwd=cwd)
        _, status, usage = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
        out.seek(0)
        err.seek(0)
        return proc.returncode, out.read().decode(), err.read().decode(), usage.ru_maxrss * 1024


def attn_case(build, cwd, args):
    rc, out, err, peak = peak_rss([os.path.join(build, "pasa-attn"), "--json", "--threads", "2"] + args, cwd)
    if rc != 0:
        raise SystemExit(f"pasa-attn {' '.join(args)} failed ({rc}): {err}")
    return json.loads(out)["memory_estimate_bytes"], peak


def sweep_case(build, cwd, config):
    path = os.path.join(cwd, "sweep.json")
    with open(path, "w") as f:
        json.dump(config, f)
    exe = os.path.join(build, "pasa-sweep")
    rc, _, err, _ = peak_rss([exe, path, "--threads", "2", "--out", os.path.join(cwd, "refused"), "--max-memory", "1"], cwd)
    m = re.search(r"needs about ([0-9.]+) (bytes|KiB|MiB|GiB|TiB)", err)
    if rc == 0 or not m:
        raise SystemExit(f"pasa-sweep did not report its estimate ({rc}): {err}")
    estimate = float(m.group(1)) * UNITS[m.group(2)]
    out_dir = os.path.join(cwd, "sweep-out")
    rc, _, err, peak = peak_rss([exe, path, "--threads", "2", "--out", out_dir], cwd)
    if rc != 0:
        raise SystemExit(f"pasa-sweep failed ({rc}): {err}")
    subprocess.run(["rm", "-rf", out_dir], check=True)
    return estimate, peak


def write_npy(path, shape, dtype="<f2"):
    """A .npy of `shape` filled with small values (no numpy needed): float16 0.5 + i·2^-10 mod 1."""
    import struct
    n = 1
    for d in shape:
        n *= d
    header = "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }" % (dtype, ", ".join(map(str, shape)) + ("," if len(shape) == 1 else ""))
    header += " " * ((64 - (10 + len(header) + 1) % 64) % 64) + "\n"
    with open(path, "wb") as f:
        f.write(b"\x93NUMPY\x01\x00" + struct.pack("<H", len(header)) + header.encode())
        block = b"".join(struct.pack("<e", 0.5 + (i % 512) / 1024.0) for i in range(4096))
        left = n * 2
        while left > 0:
            f.write(block[: min(left, len(block))])
            left -= len(block)


def main():
    build = os.path.abspath(sys.argv[1])
    k = 4 if "--long" in sys.argv[2:] else 1  # the long run's shapes are 4x longer
    cases = []
    with tempfile.TemporaryDirectory() as cwd:
        gen = ["--format", "fp16", "--x0", "1", "--am", "0.5"]

        def attn(name, args):
            cases.append((name, attn_case(build, cwd, gen + args)))

        def shape(nq, sq, d, nkv=None, skv=None):
            return ["--heads", str(nq), "--kv-heads", str(nkv or nq), "--seq", str(sq), "--kv-seq", str(skv or sq),
                    "--dim", str(d)]

        attn(f"prefill fa2 (1, 8, {1024 * k}, 128)", shape(8, 1024 * k, 128))
        attn(f"prefill pasa (1, 8, {1024 * k}, 128)", shape(8, 1024 * k, 128) + ["--algorithm", "pasa", "--alloc", "pasa_fp16"])
        attn(f"prefill fa2 (1, 2, {4096 * k}, 16)", shape(2, 4096 * k, 16))
        attn(f"decode Sq 1, Skv {300000 * k}, D 8", shape(1, 1, 8, skv=300000 * k))
        attn(f"decode Sq 1, Skv {50000 * k}, D 128", shape(1, 1, 128, skv=50000 * k))
        attn(f"decode GQA 32/8, Sq 1, Skv {10000 * k}, D 128", shape(32, 1, 128, nkv=8, skv=10000 * k))
        attn(f"decode GQA 32/8, Sq 4, Skv {10000 * k}, D 64", shape(32, 4, 64, nkv=8, skv=10000 * k) + ["--causal"])
        algo = os.path.join(cwd, "split.json")
        with open(algo, "w") as f:
            json.dump({"name": "fa2", "alloc": "fa_fp16_fp32", "s1": 16, "s2": 128, "splits": 8}, f)
        attn(f"split-KV decode (8 splits), Sq 16, Skv {12500 * k}", shape(8, 16, 128, skv=12500 * k) + ["--algo-json", algo])
        fp8 = os.path.join(cwd, "fp8.json")
        with open(fp8, "w") as f:
            json.dump({"name": "fa2", "alloc": "fa_fp8", "quant": {"scales": "block", "hadamard": True, "p_offset": 8}}, f)
        attn(f"FP8 recipe (1, 8, {1024 * k}, 128)", shape(8, 1024 * k, 128) + ["--algo-json", fp8])
        for d, skv in ((128, 25000 * k), (16, 100000 * k)):
            write_npy(os.path.join(cwd, "q.npy"), (8, 1, d))
            write_npy(os.path.join(cwd, "k.npy"), (8, skv, d))
            write_npy(os.path.join(cwd, "v.npy"), (8, skv, d))
            cases.append((f".npy decode Q (8, 1, {d}), K/V (8, {skv}, {d})",
                          attn_case(build, cwd, ["--q", "q.npy", "--k", "k.npy", "--v", "v.npy"])))
        cases.append((f"sweep (1, 8, {1024 * k}, 128) x 3 algorithms",
                      sweep_case(build, cwd, {
                          "problem": {"shape": {"Nq": 8, "Sq": 1024 * k, "D": 128}, "format": "fp16", "seed": "$seed",
                                      "generator": {"x0": "$x0", "am": 0.5}},
                          "grid": {"x0": [1, 2]},
                          "algorithms": [{"name": "fa2", "alloc": "fa_fp32"}, {"name": "fa2", "alloc": "fa_fp16_fp32"},
                                         {"name": "pasa", "alloc": "pasa_fp16"}]})))
        cases.append((f"sweep decode Sq 1, Skv {25000 * k}",
                      sweep_case(build, cwd, {
                          "problem": {"shape": {"Nq": 8, "Sq": 1, "Skv": 25000 * k, "D": 64}, "format": "fp16",
                                      "seed": "$seed", "generator": {"x0": 1, "am": 0.5}},
                          "algorithms": [{"name": "fa2", "alloc": "fa_fp16_fp32"}, {"name": "pasa", "alloc": "pasa_fp16"}]})))
        # Paged KV (unified attention): decode steps sharing a prefix and a chunked prefill; fa2 reads the cache
        # in place, pasa gathers each sequence.
        paged = {"kind": "paged", "shape": {"Nq": 8, "Nkv": 2, "D": 128}, "format": "fp16", "seed": 1,
                 "generator": {"x0": 1, "am": 0.5}, "block_size": 16,
                 "sequences": [{"q_len": 1, "ctx_len": 40000 * k, "shared_blocks": 100}] +
                              [{"q_len": 1, "ctx_len": 25000 * k, "shared_blocks": 100, "share_from": 0}] * 3 +
                              [{"q_len": 256, "ctx_len": 15000 * k}]}
        with open(os.path.join(cwd, "paged.json"), "w") as f:
            json.dump(paged, f)
        for algo in ("fa2", "pasa"):
            cases.append((f"paged {algo}: 4 decode steps (ctx {40000 * k}) + a chunked prefill",
                          attn_case(build, cwd, ["--problem", "paged.json", "--algorithm", algo, "--s1", "64"])))
        cases.append((f"sweep paged, ctx {40000 * k}",
                      sweep_case(build, cwd, {"problem": dict(paged, seed="$seed"),
                                              "algorithms": [{"name": "fa2", "alloc": "fa_fp16_fp32"},
                                                             {"name": "pasa", "alloc": "pasa_fp16"}]})))
    bad = 0
    for name, (estimate, peak) in cases:
        ratio = estimate / peak
        ok = LO <= ratio <= HI
        bad += not ok
        print(f"{'ok ' if ok else 'BAD'} {name:55s} estimate {estimate / 2**20:9.1f} MiB  peak {peak / 2**20:9.1f} MiB"
              f"  ratio {ratio:.2f}")
    if bad:
        raise SystemExit(f"{bad} estimates outside [{LO}, {HI}] of the peak RSS")


if __name__ == "__main__":
    main()
