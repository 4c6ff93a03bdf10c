#!/usr/bin/env python3
"""ex2_fit.py: compact candidate models of the measured MUFU.EX2 fraction tables (CPU, NumPy + SciPy).

Input: results/hardware/kernels/mufu_tables.npz (mufu_probe.py): the tables g[k] = ex2.approx.ftz(k / 2^23)
(in [1, 2), value 1 + G_k 2^-23) and h[k] = ex2.approx.ftz(-k / 2^23) (in (0.5, 1], value 0.5 + H_k 2^-24),
k < 2^23. Together with the sign-magnitude structure (mufu_report.json: 0 mismatches on all 2^32 inputs)
they are the whole function.

A candidate splits k into m high bits (segment s) and 23 - m low bits xl, and predicts
G_k (or H_k) = floor(Y_s(xl)), with per segment
  quad      Y = c0 + c1 u + c2 u^2,  u = 2 xl / 2^(23-m) - 1          (a smooth piecewise quadratic)
  bits+u2   Y = c0 + sum_j w_j bit_j(xl) + c2 (xl / 2^(23-m))^2        (linear term with one weight per bit
                                                                       of xl: models truncated partial
                                                                       products of c1 * xl)
with real coefficients chosen by a linear program that maximises the smallest margin to the band
G_k <= Y < G_k + 1 (no floor or rounding offset is lost: the offset is part of c0). A positive margin
would mean a bit-exact model of that form; none was found (see the README).

Output: results/hardware/kernels/ex2_candidates.npz with, per candidate NAME:
  cand_NAME_g, cand_NAME_h   int8 candidate minus measured (0 where the candidate is right), the input of
                             mufu_probe.py --candidates (tested there on all 2^32 inputs)
  coef_NAME_g, coef_NAME_h   (2^m, ncoef) float64 coefficients, margin_NAME_g/h (2^m,) the LP margins
  cand_NAMEhard0_*           NAME with segment 0 refitted so that its entries k < 2^H are exact
                             (hardbits_NAMEhard0_g/h = H): most inputs use small k
It also prints, per candidate, the number of float32 inputs with a wrong result, from the table errors and
the exact number of inputs per table entry (input_weights; it reproduces the GPU's counts).
How to run: python3 experiments/gpu/kernels/ex2_fit.py [--jobs 2]      (python3-scipy; ~10 min on 2 cores)
            python3 experiments/gpu/kernels/ex2_fit.py --hard-seg0 bitsu2_m6   (adds bitsu2_m6hard0, ~1 min)
"""
import argparse
import hashlib
import os
import sys
from multiprocessing import Pool

import numpy as np

ROOT = os.path.abspath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", ".."))
TABLES = os.path.join(ROOT, "results", "hardware", "kernels", "mufu_tables.npz")
OUT = os.path.join(ROOT, "results", "hardware", "kernels", "ex2_candidates.npz")


def load_tables(path=TABLES):
    z = np.load(path)
    out = {}
    for nm, off in (("g", 0x3F800000), ("h", 0x3F000000)):
        t = np.concatenate([[np.int64(z[f"ex2_{nm}_first"])], z[f"ex2_{nm}_diff"].astype(np.int64)]).cumsum()
        if hashlib.sha256(t.astype("<u4").tobytes()).hexdigest() != bytes(z[f"ex2_{nm}_sha256"]).decode():
            sys.exit(f"ex2_fit: table {nm} does not match its sha256")
        out[nm] = t - off
    return out


def design(kind, nb):
    n = 1 << nb
    xl = np.arange(n)
    if kind == "quad":
        u = 2.0 * xl / n - 1.0
        return np.stack([np.ones(n), u, u * u], 1)
    if kind == "bits+u2":
        u = xl / n
        cols = [np.ones(n)] + [((xl >> j) & 1).astype(float) for j in range(nb)] + [u * u]
        return np.stack(cols, 1)
    raise ValueError(kind)


def fit_segment(args):
    from scipy.optimize import linprog
    vals, kind, nb = args
    A = design(kind, nb)
    n = len(vals)
    c_ls = np.linalg.lstsq(A, vals + 0.5, rcond=None)[0]
    v = vals - A @ c_ls
    a_ub = np.block([[-A, np.ones((n, 1))], [A, np.ones((n, 1))]])
    b_ub = np.concatenate([-v, v + 1.0])
    cost = np.zeros(A.shape[1] + 1)
    cost[-1] = -1.0
    r = linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=[(None, None)] * (A.shape[1] + 1), method="highs")
    if r.x is None:
        return c_ls, np.nan, np.floor(A @ c_ls).astype(np.int64)
    c = c_ls + r.x[:-1]
    return c, -r.fun, np.floor(A @ c).astype(np.int64)


def input_weights(neg):
    """How many float32 inputs with a normal result use table entry k (exact counts, checked against the
    GPU's per-category totals): x in binade 2^e, e <= -24 -> k = 0; -23 <= e <= -1 -> each k in
    [2^(e+23), 2^(e+24)) gets 2^-e inputs; 0 <= e <= 6 -> every k = 0 mod 2^e gets 2^e (negative x:
    |x| <= 126 only)."""
    n = 1 << 23
    w = np.zeros(n)
    w[0] += 103 * 2 ** 23
    for e in range(-23, 0):
        w[2 ** (e + 23):2 ** (e + 24)] += 2.0 ** (-e)
    for e in range(0, 7):
        if neg and e == 6:
            w[::64] += 62
            w[0] += 1
        else:
            w[::2 ** e] += 2 ** e
    return w


def hard_seg0(name, tabs, out):
    """Refit segment 0 of candidate `name` with the entries k < 2^H held exactly (largest feasible H of
    14, 12, ..., 2): the inputs are concentrated on small k (k = 0 alone takes every |x| < 2^-23)."""
    from scipy.optimize import linprog
    kind, m = name.rsplit("_m", 1)
    kind = {"bitsu2": "bits+u2", "quad": "quad"}[kind]
    nb = 23 - int(m)
    n = 1 << nb
    A = design(kind, nb)
    for nm, V in tabs.items():
        vals = V[:n].astype(np.float64)
        c_ls = np.linalg.lstsq(A, vals + 0.5, rcond=None)[0]
        v = vals - A @ c_ls
        for H in (14, 12, 10, 8, 6, 4, 2):
            hard = np.arange(n) < (1 << H)
            s = ~hard
            a_ub = np.block([[-A[s], np.ones((s.sum(), 1))], [A[s], np.ones((s.sum(), 1))],
                             [-A[hard], np.zeros((hard.sum(), 1))], [A[hard], np.zeros((hard.sum(), 1))]])
            b_ub = np.concatenate([-v[s], v[s] + 1.0, -v[hard], v[hard] + 1.0 - 1e-9])
            cost = np.zeros(A.shape[1] + 1)
            cost[-1] = -1.0
            r = linprog(cost, A_ub=a_ub, b_ub=b_ub, bounds=[(None, None)] * (A.shape[1] + 1), method="highs")
            if r.x is not None:
                break
        d = out[f"cand_{name}_{nm}"].astype(np.int64).copy()
        c = c_ls + r.x[:-1]
        d[:n] = np.floor(A @ c).astype(np.int64) - V[:n]
        out[f"cand_{name}hard0_{nm}"] = d.astype(np.int8)
        coef = out[f"coef_{name}_{nm}"].copy()
        coef[0] = c
        out[f"coef_{name}hard0_{nm}"] = coef
        out[f"hardbits_{name}hard0_{nm}"] = np.int32(H)
        print(f"{name}hard0 {nm}: segment 0 with k < 2^{H} exact, margin {-r.fun:.4f}; "
              f"{int((d != 0).sum())} table entries wrong", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--candidates", default="quad:6,quad:8,bits+u2:6")
    ap.add_argument("--hard-seg0", default=None, help="NAME: add NAMEhard0 to an existing OUT (no refit)")
    a = ap.parse_args()
    tabs = load_tables()
    if a.hard_seg0:
        out = dict(np.load(OUT))
        hard_seg0(a.hard_seg0, tabs, out)
        report(out)
        np.savez_compressed(OUT, **out)
        return
    out = {}
    with Pool(a.jobs) as p:
        for spec in a.candidates.split(","):
            kind, m = spec.split(":")
            m = int(m)
            nb = 23 - m
            n = 1 << nb
            name = f"{kind.replace('+', '')}_m{m}"
            for nm, V in tabs.items():
                res = p.map(fit_segment, [(V[s * n:(s + 1) * n].astype(np.float64), kind, nb) for s in range(1 << m)])
                cand = np.concatenate([r[2] for r in res])
                out[f"cand_{name}_{nm}"] = (cand - V).astype(np.int8)
                out[f"coef_{name}_{nm}"] = np.stack([r[0] for r in res])
                out[f"margin_{name}_{nm}"] = np.array([r[1] for r in res])
                mis = int((cand != V).sum())
                print(f"{name} {nm}: {mis} of {len(V)} table entries wrong ({100 * mis / len(V):.3f} %), "
                      f"worst LP margin {np.nanmin(out[f'margin_{name}_{nm}']):.4f}", flush=True)
    report(out)
    np.savez_compressed(OUT, **out)
    print(f"wrote {OUT} ({os.path.getsize(OUT) / 2 ** 20:.2f} MiB)")


def report(out):
    """Mismatches over all 2^32 inputs, from the table errors and the input counts per entry."""
    w = {"g": input_weights(False), "h": input_weights(True)}
    for key in sorted(out):
        if key.startswith("cand_") and key.endswith("_g"):
            name = key[5:-2]
            pos = float((w["g"] * (out[key] != 0)).sum())
            neg = float((w["h"] * (out[f"cand_{name}_h"] != 0)).sum())
            print(f"  {name}: inputs with a wrong result x >= 0: {pos:.0f}, x < 0: {neg:.0f}, total {pos + neg:.0f}")


if __name__ == "__main__":
    main()
