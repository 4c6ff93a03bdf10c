#!/usr/bin/env python3
"""Compares a regenerated paper reproduction with another one (by default the committed results/), cell by
cell, the timing columns aside: the sweep tables (sweeps/*/results.csv, by case_id), the figure CSVs and
table1/3/4.csv. Exit status 0 when every compared cell is the same text, 1 otherwise (each difference named).

Usage: experiments/compare_results.py NEW_DIR [REFERENCE_DIR]   (default reference: results)
e.g.   build/pasa-tables --out /tmp/rr --threads 2 && experiments/compare_results.py /tmp/rr
"""
import csv
import json
import sys
from pathlib import Path

TIMING = {"golden_time_s", "time_s"}  # wall-clock seconds of the run: the only columns allowed to differ
SWEEPS = ["fig9_uniform_x0", "fig9_uniform_am", "fig10_hybrid_x0", "fig10_hybrid_am"]
TABLES = ["table1.csv", "table3.csv", "table4.csv"] + [s + ".csv" for s in SWEEPS]


def read(path):
    with open(path, newline="") as f:
        rows = list(csv.reader(f))
    if not rows:
        raise SystemExit(f"{path}: empty file")
    return rows[0], rows[1:]


def compare(new, ref, key_col=None):
    """Returns (compared cells, list of difference descriptions)."""
    hn, rn = read(new)
    hr, rr = read(ref)
    if hn != hr:
        return 0, [f"{new}: header differs from {ref}"]
    diffs, cells = [], 0
    if len(rn) != len(rr):
        diffs.append(f"{new}: {len(rn)} rows, {ref}: {len(rr)}")
    if key_col is not None:  # rows matched by their key (case_id), not by position
        k = hn.index(key_col)
        rn = sorted(rn, key=lambda r: int(r[k]))
        rr = sorted(rr, key=lambda r: int(r[k]))
    skip = {i for i, h in enumerate(hn) if h in TIMING}
    for i, (a, b) in enumerate(zip(rn, rr)):
        if len(a) != len(b):
            diffs.append(f"{new}: row {i + 1} has {len(a)} fields, {ref} {len(b)}")
            continue
        for c, (x, y) in enumerate(zip(a, b)):
            if c in skip:
                continue
            cells += 1
            if x != y:
                diffs.append(f"{new}: row {i + 1} column {hn[c]}: {x!r} vs {y!r}")
    return cells, diffs


def summary_without_timing(path):
    """summary.json less what depends on the run: the timing metrics and the machine's name and cores."""
    with open(path) as f:
        j = json.load(f)
    j.pop("machine", None)
    for g in j.get("groups", []):
        for t in TIMING:
            g.get("metrics", {}).pop(t, None)
    return j


def main():
    if len(sys.argv) not in (2, 3):
        raise SystemExit(__doc__)
    new, ref = Path(sys.argv[1]), Path(sys.argv[2] if len(sys.argv) == 3 else "results")
    total, bad = 0, []
    pairs = [(new / "sweeps" / s / "results.csv", ref / "sweeps" / s / "results.csv", "case_id") for s in SWEEPS]
    pairs += [(new / t, ref / t, None) for t in TABLES]
    for n, r, key in pairs:
        if not n.exists() or not r.exists():
            bad.append(f"{n if not n.exists() else r}: missing")
            continue
        cells, diffs = compare(n, r, key)
        total += cells
        bad += diffs
        print(f"{n}: {cells} cells, {len(diffs)} differ")
    for s in SWEEPS:
        n, r = new / "sweeps" / s / "summary.json", ref / "sweeps" / s / "summary.json"
        if n.exists() and r.exists():
            same = summary_without_timing(n) == summary_without_timing(r)
            print(f"{n}: {'same' if same else 'DIFFERS'} (timing metrics and machine left out)")
            if not same:
                bad.append(f"{n}: differs from {r}")
    for d in bad[:50]:
        print("DIFF", d)
    print(f"{total} cells compared (timing columns {sorted(TIMING)} left out), {len(bad)} differences")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
