#!/usr/bin/env python3
"""The β study of docs/beta.md: PASA's relative RMSE (Eq. 19) against β over [0.85, 0.999], paired on the same
inputs against the paper's β = 0.984497, and the binade mechanism that predicts it.

  build/pasa-python experiments/python/beta_study.py configs   # writes configs/beta_*.json (the study's configs)
  build/pasa-python experiments/python/beta_study.py run       # pasa-sweep --resume each into sweep-out/beta/<name>
  build/pasa-python experiments/python/beta_study.py analyse   # results/beta/{rmse.csv, paired.csv, best.csv, *.png}

`run` resumes: an interrupted study loses at most the problem in flight (pasa-sweep writes each row as it
finishes, docs/sweeps.md). `analyse` reads the sweeps' results.csv and writes:
- rmse.csv: one row per (config, x0, seed, algorithm): the RMSE as pasa-sweep printed it (%.17g), so the
  test tests/python/test_beta_study.py can re-run a slice and compare the strings;
- paired.csv: per (config, x0, β): the paired ratio RMSE(β) / RMSE(0.984497) over the seeds (geometric
  mean, 95 % t interval of the mean log ratio, as src/pasa/study/seed_stats.hpp), PASA(β) / FA on the same
  inputs, the `mean`-stage-fp32 ratio where it ran, and the binade prediction of the ratio (below);
- best.csv: per (config, x0): the β of the lowest measured ratio and the binade-predicted best β.

The binade prediction (docs/beta.md, "Mechanism"). PASA recovers the bias as Inva·S̄'_j from the row mean
S̄'_j = (1 − β_r)·S̄_j/α stored in the `mean` stage's format (β_r: the β the rounded M realises). Its
rounding error is uniform in ± ulp(S̄'_j)/2, so the recovered bias is off by Inva·ulp(S̄'_j)/√12 (rms):
g(β)² = mean over rows r and blocks j of (Inva·ulp(S̄'_rj))²/12, computed from the seed's inputs (S̄_rj =
q_r·k̄_j exactly in fp64, the rounded entries of M, the format's ulp at S̄'_rj). Model: RMSE(β)² = A² + κ²·g(β)²,
A = the RMSE with the `mean` stage in fp32 at the paper's β (what is left without that rounding), κ from
RMSE(0.984497) itself. So each seed's predicted ratio is sqrt(A² + κ²g(β)²) / RMSE(0.984497), from two
measurements at the paper's β only; every other β is predicted, not fitted.
"""
import csv
import json
import math
import os
import subprocess
import sys

ROOT = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
BETA_REF = 0.984497
SEEDS = list(range(1, 11))
SHAPE = {"B": 1, "Nq": 4, "Sq": 1280, "D": 128}  # 4 of the paper's 16 heads (docs/attribution.md's shape)
# 40 values evenly spaced in log(1 − β) from 0.15 to 0.001 (binades of S̄' = (1 − β)·S̄/α are evenly spaced
# there), rounded to 6 decimals, plus the paper's Table 3 β (initial and optimised) and its β = 0.984497.
GRID = sorted({round(1 - 0.15 * (0.001 / 0.15) ** (i / 39), 6) for i in range(40)})
TABLE3 = [0.9, 0.89970779, 0.9375, 0.96899414, 0.984497, 0.99031067, 0.99903107]
MEAN32_EVERY = 4  # the `mean`-fp32 variant at every 4th grid β (how constant A is) and at the paper's β
T975 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179, 2.160, 2.145, 2.131,
        2.120, 2.110, 2.101, 2.093, 2.086]

# (config name, generator kind, Am, x0 grid, format, block size s2). Fig. 9's benchmark point is uniform
# x0 = 20, Am = 0.5 (configs/fig9_uniform_x0.json), Fig. 10's hybrid x0 = 20, Am = 10 (fig10_hybrid_x0.json);
# x0 = 0 is both figures' unbiased end; uniform x0 = 25 (fp16) has another binade position of S̄' (x0²·√D).
STUDIES = [
    ("beta_uniform_fp16", "uniform", 0.5, [0, 20, 25], "fp16", 128),
    ("beta_hybrid_fp16", "hybrid", 10, [0, 20], "fp16", 128),
    ("beta_uniform_bf16", "uniform", 0.5, [0, 20], "bf16", 128),
    ("beta_hybrid_bf16", "hybrid", 10, [0, 20], "bf16", 128),
    ("beta_uniform_fp16_s64", "uniform", 0.5, [20], "fp16", 64),
    ("beta_hybrid_fp16_s64", "hybrid", 10, [20], "fp16", 64),
    ("beta_uniform_bf16_s64", "uniform", 0.5, [20], "bf16", 64),
    ("beta_hybrid_bf16_s64", "hybrid", 10, [20], "bf16", 64),
]


# The binade rule (pasa-beta --rule binade, docs/beta.md) measured on the same inputs: per (kind, format) a
# config with the paper's β and the rule's β for |S̄|/α = x0²·√D at s2 = 128 and 64; uniform fp16 also at
# x0 = 25 with the rule's β for both x0 (a β chosen for one bias is not the one for another).
RULE_STUDIES = [
    ("beta_rule_uniform_fp16", "uniform", 0.5, [20, 25], "fp16", [20, 25]),
    ("beta_rule_hybrid_fp16", "hybrid", 10, [20], "fp16", [20]),
    ("beta_rule_uniform_bf16", "uniform", 0.5, [20], "bf16", [20]),
    ("beta_rule_hybrid_bf16", "hybrid", 10, [20], "bf16", [20]),
]


def score_mean(x0, D=128):
    return x0 * x0 * math.sqrt(D)


def rule_beta(build, fmt, s2, x0):
    import tempfile
    with tempfile.TemporaryDirectory() as d:
        out = os.path.join(d, "rule.json")
        subprocess.run([os.path.join(build, "pasa-beta"), "--rule", "binade", "--beta", str(BETA_REF), "--format", fmt,
                        "--n", str(s2), "--with-sqrt-d", "128", "--score-mean", repr(score_mean(x0)), "--json", out],
                       check=True, capture_output=True, text=True)
        with open(out) as f:
            return json.load(f)["rows"][0]["beta"]


def rule_config(build, name, kind, am, x0s, fmt, rule_x0s):
    algs = []
    for s2 in (128, 64):
        tag = "" if s2 == 128 else "s64 "
        algs.append({"label": f"PASA {tag}b={BETA_REF:.8g}", "name": "pasa", "alloc": f"pasa_{fmt}", "s1": 128,
                     "s2": s2, "pasa": {"beta": BETA_REF}})
        for x in (rule_x0s if s2 == 128 else rule_x0s[:1]):
            b = rule_beta(build, fmt, s2, x)
            algs.append({"label": f"PASA {tag}binade b={b:.8g}", "name": "pasa", "alloc": f"pasa_{fmt}", "s1": 128,
                         "s2": s2, "pasa": {"beta": b}})
    cfg = config(name, kind, am, x0s, fmt, 128)
    cfg["description"] = (f"docs/beta.md: pasa-beta --rule binade (|S-bar|/alpha = x0^2*sqrt(D) for x0 in {rule_x0s}) "
                          f"against the paper's beta = 0.984497, same inputs; {kind} inputs, Am = {am}; written by "
                          "experiments/python/beta_study.py rule-configs")
    cfg["algorithms"] = algs
    return cfg


def betas_of(s2):
    extra = TABLE3 if s2 == 128 else [0.9, 0.9375, BETA_REF]  # Table 3 is for n = 128
    return sorted(set(GRID) | set(extra))


def label(beta, mean32=False):
    return f"PASA b={beta:.8g}" + (" mean fp32" if mean32 else "")


def config(name, kind, am, x0s, fmt, s2):
    pasa_alloc = f"pasa_{fmt}"
    algs = [{"label": f"FA-{fmt.upper()}/FP32", "name": "fa2", "alloc": f"fa_{fmt}_fp32", "s1": 128, "s2": s2}]
    for b in betas_of(s2):
        algs.append({"label": label(b), "name": "pasa", "alloc": pasa_alloc, "s1": 128, "s2": s2, "pasa": {"beta": b}})
    for b in sorted(set(GRID[::MEAN32_EVERY]) | {BETA_REF}):
        algs.append({"label": label(b, True), "name": "pasa", "s1": 128, "s2": s2, "pasa": {"beta": b},
                     "alloc": {"preset": pasa_alloc, "stages": {"mean": "fp32"}}})
    return {
        "name": name,
        "description": f"docs/beta.md: PASA ({pasa_alloc}) RMSE against beta, paired against the paper's beta = "
                       f"0.984497 on the same inputs; {kind} inputs, Am = {am}, s2 = {s2}; written by "
                       "experiments/python/beta_study.py configs",
        "problem": {"shape": SHAPE, "format": fmt, "seed": "$seed",
                    "generator": {"kind": kind, "x0": "$x0", "am": am}},
        "grid": {"x0": x0s},
        "seeds": SEEDS,
        "algorithms": algs,
        "golden": {"precision_bits": 128},
        "score_format": fmt,
        "outputs": {"dir": f"sweep-out/beta/{name}"},
    }


def write_configs():
    for st in STUDIES:
        path = os.path.join(ROOT, "configs", st[0] + ".json")
        with open(path, "w") as f:
            json.dump(config(*st), f, indent=2)
            f.write("\n")
        print(path)


def write_rule_configs(build):
    for st in RULE_STUDIES:
        path = os.path.join(ROOT, "configs", st[0] + ".json")
        with open(path, "w") as f:
            json.dump(rule_config(build, *st), f, indent=2)
            f.write("\n")
        print(path)


def run(build):
    for st in STUDIES + RULE_STUDIES:
        cfg = os.path.join(ROOT, "configs", st[0] + ".json")
        out = os.path.join(ROOT, "sweep-out", "beta", st[0])
        if os.path.exists(os.path.join(out, "summary.json")):
            continue
        cmd = [os.path.join(build, "pasa-sweep"), cfg, "--out", out, "--threads", "2", "--jobs", "2"]
        if os.path.exists(out):
            cmd.append("--resume")
        print(" ".join(cmd), flush=True)
        subprocess.run(cmd, check=True)


# ---------------------------------------------------------------- statistics

def paired(a, b):
    """Geometric mean of a_i/b_i with the 95 % t interval of the mean log ratio (seed_stats.hpp)."""
    logs = [math.log(x / y) for x, y in zip(a, b) if math.isfinite(x) and math.isfinite(y) and x > 0 and y > 0]
    n = len(logs)
    if n < 2:
        return None
    m = sum(logs) / n
    sd = math.sqrt(sum((x - m) ** 2 for x in logs) / (n - 1))
    h = T975[n - 2] * sd / math.sqrt(n)
    return math.exp(m), math.exp(m - h), math.exp(m + h), n


# ---------------------------------------------------------------- binade prediction

def ulp(x, p, emin):
    """Spacing of the p-bit format at |x| (subnormal spacing below 2^emin)."""
    ax = abs(x)
    e = max(math.floor(math.log2(ax)), emin) if ax > 0 else emin
    return 2.0 ** (e - p + 1)


def g_of_beta(pasa, np, problem, betas, s2):
    """g(β) (module docstring) for one seed's inputs, every β."""
    fmt = problem["format"]
    info = pasa.format_info(fmt)
    p, emin = info["p"], info["emin"]
    inp = pasa.generate(problem)
    q, k = inp["q"][0], inp["k"][0]  # (N, S, D)
    D = q.shape[-1]
    alpha = math.sqrt(D)
    S = k.shape[1]
    nb = S // s2
    kbar = k[:, : nb * s2].reshape(k.shape[0], nb, s2, D).mean(axis=2)   # (N, blocks, D), fp64
    sbar = np.einsum("nsd,nbd->nsb", q, kbar)                            # S̄_rj (unscaled), exact enough in fp64
    out = {}
    for b in betas:
        # the rounded entries of M/α (Eq. 10, the `shift` stage = the format): M_r's block means scale K̄ by
        # d + (n − 1)·o = (1 − β_r)/α.
        d = float(pasa.round(np.array([(s2 - b) / (alpha * s2)]), fmt)[0])
        o = float(pasa.round(np.array([-b / (alpha * s2)]), fmt)[0])
        sp = (d + (s2 - 1) * o) * sbar                                  # S̄' realised
        inva = float(pasa.round(np.array([b / (1 - b)]), fmt)[0])      # Inva rounded to the `mean` stage
        e = np.floor(np.log2(np.maximum(np.abs(sp), 2.0 ** emin)))
        u = 2.0 ** (np.maximum(e, emin) - p + 1)
        out[b] = math.sqrt(float(np.mean((inva * u) ** 2)) / 12)
    return out


# ---------------------------------------------------------------- analysis

def interp_log(curve, beta):
    """A(β) from the `mean`-fp32 runs [(β, rmse)]: linear in log A against log(1 − β), constant beyond the ends."""
    x = math.log(1 - beta)
    pts = sorted((math.log(1 - b), math.log(a)) for b, a in curve)
    if x <= pts[0][0]:
        return math.exp(pts[0][1])
    for (x0, y0), (x1, y1) in zip(pts, pts[1:]):
        if x <= x1:
            return math.exp(y0 + (y1 - y0) * (x - x0) / (x1 - x0))
    return math.exp(pts[-1][1])


def read_rows(name):
    path = os.path.join(ROOT, "sweep-out", "beta", name, "results.csv")
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def fnum(s):
    return float(s)


def analyse():
    sys.path.insert(0, os.path.join(ROOT, "build", "python"))
    import numpy as np
    import pasa

    outdir = os.path.join(ROOT, "results", "beta")
    os.makedirs(outdir, exist_ok=True)
    rmse_rows, paired_rows, best_rows = [], [], []
    for name, kind, am, x0s, fmt, s2 in STUDIES:
        try:
            rows = read_rows(name)
        except FileNotFoundError:
            print(f"{name}: no results yet", file=sys.stderr)
            continue
        cfg = config(name, kind, am, x0s, fmt, s2)
        fa_label = cfg["algorithms"][0]["label"]
        val = {}  # (x0, seed, label) -> rmse
        for r in rows:
            x0 = fnum(r["x0"])
            val[(x0, int(r["seed"]), r["algorithm"])] = fnum(r["rmse"])
            rmse_rows.append({"config": name, "format": fmt, "kind": kind, "am": am, "s2": s2, "x0": r["x0"],
                              "seed": r["seed"], "algorithm": r["algorithm"], "rmse": r["rmse"],
                              "nan_pct": r["nan_pct"]})
        betas = betas_of(s2)
        for x0 in x0s:
            seeds = [s for s in SEEDS if (x0, s, label(BETA_REF)) in val]
            if len(seeds) < 2:
                continue
            ref = [val[(x0, s, label(BETA_REF))] for s in seeds]
            a32 = [val.get((x0, s, label(BETA_REF, True)), math.nan) for s in seeds]
            m32_betas = sorted(set(GRID[::MEAN32_EVERY]) | {BETA_REF})
            m32_curve = {s: [(b, val[(x0, s, label(b, True))]) for b in m32_betas if (x0, s, label(b, True)) in val]
                         for s in seeds}
            g = {s: g_of_beta(pasa, np, {"shape": SHAPE, "format": fmt, "seed": s,
                                         "generator": {"kind": kind, "x0": x0, "am": am}}, betas, s2)
                 for s in seeds}
            pt = []
            for b in betas:
                if any((x0, s, label(b)) not in val for s in seeds):
                    continue
                e = [val[(x0, s, label(b))] for s in seeds]
                fa = [val[(x0, s, fa_label)] for s in seeds]
                rr = paired(e, ref)
                rf = paired(e, fa)
                m32 = [val.get((x0, s, label(b, True)), math.nan) for s in seeds]
                r32 = paired(m32, ref) if all(math.isfinite(x) for x in m32) else None
                pred, pred_a = [], []
                for i, s in enumerate(seeds):
                    A2 = a32[i] ** 2
                    k2 = max(ref[i] ** 2 - A2, 0.0) / g[s][BETA_REF] ** 2
                    pred.append(math.sqrt(A2 + k2 * g[s][b] ** 2) / ref[i])
                    Ab = interp_log(m32_curve[s], b)
                    pred_a.append(math.sqrt(Ab ** 2 + k2 * g[s][b] ** 2) / ref[i])
                pg = math.exp(sum(math.log(x) for x in pred) / len(pred))
                pga = math.exp(sum(math.log(x) for x in pred_a) / len(pred_a))
                row = {"config": name, "format": fmt, "kind": kind, "am": am, "s2": s2, "x0": x0, "beta": b,
                       "seeds": rr[3], "ratio": rr[0], "ratio_lo": rr[1], "ratio_hi": rr[2],
                       "predicted": pg, "predicted_measured_A": pga, "g_ratio": math.exp(sum(math.log(g[s][b] / g[s][BETA_REF]) for s in seeds) / len(seeds)),
                       "vs_fa": rf[0] if rf else math.nan, "vs_fa_lo": rf[1] if rf else math.nan,
                       "vs_fa_hi": rf[2] if rf else math.nan,
                       "mean32_ratio": r32[0] if r32 else math.nan,
                       "mean32_lo": r32[1] if r32 else math.nan, "mean32_hi": r32[2] if r32 else math.nan,
                       "rmse_mean": sum(e) / len(e)}
                paired_rows.append(row)
                pt.append(row)
            best = min(pt, key=lambda r: r["ratio"])
            bpred = min(pt, key=lambda r: r["predicted"])
            best_rows.append({"config": name, "format": fmt, "kind": kind, "am": am, "s2": s2, "x0": x0,
                              "best_beta": best["beta"], "ratio": best["ratio"], "ratio_lo": best["ratio_lo"],
                              "ratio_hi": best["ratio_hi"], "vs_fa": best["vs_fa"], "vs_fa_lo": best["vs_fa_lo"],
                              "vs_fa_hi": best["vs_fa_hi"], "predicted_best_beta": bpred["beta"],
                              "measured_at_predicted_best": bpred["ratio"], "predicted_at_predicted_best": bpred["predicted"]})
    rule_rows = []
    main_rmse = {(r["config"], r["x0"], r["seed"], r["algorithm"]): r["rmse"] for r in rmse_rows}
    for name, kind, am, x0s, fmt, rule_x0s in RULE_STUDIES:
        try:
            rows = read_rows(name)
        except FileNotFoundError:
            print(f"{name}: no results yet", file=sys.stderr)
            continue
        val = {}
        for r in rows:
            val[(fnum(r["x0"]), int(r["seed"]), r["algorithm"])] = fnum(r["rmse"])
            rmse_rows.append({"config": name, "format": fmt, "kind": kind, "am": am,
                              "s2": 64 if r["algorithm"].startswith("PASA s64") else 128, "x0": r["x0"],
                              "seed": r["seed"], "algorithm": r["algorithm"], "rmse": r["rmse"],
                              "nan_pct": r["nan_pct"]})
            # the paper's β on the same inputs is the main study's row, bit for bit
            main = f"beta_{kind}_{fmt}" + ("_s64" if r["algorithm"].startswith("PASA s64") else "")
            key = (main, r["x0"], r["seed"], label(BETA_REF))
            if r["algorithm"].endswith(f"b={BETA_REF:.8g}") and key in main_rmse:
                assert main_rmse[key] == r["rmse"], (name, key, main_rmse[key], r["rmse"])
        labels = sorted({k[2] for k in val})
        for x0 in x0s:
            for lab in labels:
                if "binade" not in lab:
                    continue
                ref_lab = "PASA s64 b=0.984497" if lab.startswith("PASA s64") else "PASA b=0.984497"
                seeds = [s for s in SEEDS if (x0, s, lab) in val and (x0, s, ref_lab) in val]
                rr = paired([val[(x0, s, lab)] for s in seeds], [val[(x0, s, ref_lab)] for s in seeds])
                if rr:
                    rule_rows.append({"config": name, "format": fmt, "kind": kind, "x0": x0,
                                      "s2": 64 if lab.startswith("PASA s64") else 128, "algorithm": lab,
                                      "beta": float(lab.split("=")[1]), "seeds": rr[3], "ratio": rr[0],
                                      "ratio_lo": rr[1], "ratio_hi": rr[2]})
    write_csv(os.path.join(outdir, "rule.csv"), rule_rows, floats=True)
    write_csv(os.path.join(outdir, "rmse.csv"), rmse_rows)
    write_csv(os.path.join(outdir, "paired.csv"), paired_rows, floats=True)
    write_csv(os.path.join(outdir, "best.csv"), best_rows, floats=True)
    accuracy(paired_rows, os.path.join(outdir, "prediction.csv"))
    plots(paired_rows, outdir)


def write_csv(path, rows, floats=False):
    if not rows:
        return
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(rows[0].keys()), lineterminator="\n")
        w.writeheader()
        for r in rows:
            w.writerow({k: (f"{v:.6g}" if floats and isinstance(v, float) else v) for k, v in r.items()})
    print(path)


def accuracy(rows, path):
    """How well the binade prediction does, per (config, x0) and prediction (A constant, A(β) measured): over
    the β other than the paper's, the median, 90th percentile and largest |predicted/measured − 1|, how many
    predictions lie in the measured 95 % interval, and Spearman's rank correlation of predicted and measured
    ratio (does it order the β as measured)."""
    out = []
    keys = sorted({(r["config"], r["x0"]) for r in rows}, key=lambda k: (k[0], k[1]))
    for key in keys:
        pts = [r for r in rows if (r["config"], r["x0"]) == key and r["beta"] != BETA_REF]
        for col in ("predicted", "predicted_measured_A"):
            dev = sorted(abs(r[col] / r["ratio"] - 1) for r in pts)
            inside = sum(r["ratio_lo"] <= r[col] <= r["ratio_hi"] for r in pts)
            out.append({"config": key[0], "x0": key[1], "prediction": col, "betas": len(pts),
                        "median_abs_dev": dev[len(dev) // 2], "p90_abs_dev": dev[int(0.9 * (len(dev) - 1))],
                        "max_abs_dev": dev[-1], "inside_interval": inside,
                        "spearman": spearman([r[col] for r in pts], [r["ratio"] for r in pts]),
                        "measured_min": min(r["ratio"] for r in pts), "measured_max": max(r["ratio"] for r in pts)})
    write_csv(path, out, floats=True)


def spearman(a, b):
    def ranks(x):
        order = sorted(range(len(x)), key=lambda i: x[i])
        r = [0.0] * len(x)
        for pos, i in enumerate(order):
            r[i] = pos
        return r
    ra, rb = ranks(a), ranks(b)
    n = len(a)
    ma, mb = sum(ra) / n, sum(rb) / n
    num = sum((x - ma) * (y - mb) for x, y in zip(ra, rb))
    den = math.sqrt(sum((x - ma) ** 2 for x in ra) * sum((y - mb) ** 2 for y in rb))
    return num / den if den else math.nan


def plots(rows, outdir):
    """results/beta/<config>_x0<x0>.png: measured paired ratio with its interval, the binade prediction, and
    PASA/FA, against 1 − β (log axis)."""
    keys = sorted({(r["config"], r["x0"]) for r in rows})
    for cfg, x0 in keys:
        pts = sorted((r for r in rows if (r["config"], r["x0"]) == (cfg, x0)), key=lambda r: r["beta"])
        stem = f"{cfg}_x0_{x0:g}"
        dat = os.path.join(outdir, stem + ".dat")
        with open(dat, "w") as f:
            for r in pts:
                f.write(f"{1 - r['beta']:.8g} {r['ratio']:.6g} {r['ratio_lo']:.6g} {r['ratio_hi']:.6g} "
                        f"{r['predicted']:.6g} {r['vs_fa']:.6g} {r['vs_fa_lo']:.6g} {r['vs_fa_hi']:.6g} "
                        f"{r['predicted_measured_A']:.6g}\n")
        fa_ok = all(math.isfinite(r["vs_fa"]) for r in pts)
        script = f"""set terminal pngcairo size 900,560 font ",11"
set output '{os.path.join(outdir, stem + ".png")}'
set logscale x
set xrange [0.17:0.0009]
set xlabel '1 - beta (log; beta = 0.85 left, 0.999 right)'
set ylabel 'RMSE ratio, same inputs (geometric mean over seeds, 95% t interval)'
set title "{cfg}, x0 = {x0:g}: PASA RMSE(beta) / RMSE(0.984497), {len(SEEDS)} seeds" noenhanced
set key top left
set grid
set arrow from {1 - BETA_REF},graph 0 to {1 - BETA_REF},graph 1 nohead dt 2 lc rgb 'gray40'
plot '{dat}' using 1:2:3:4 with yerrorlines lc rgb '#1f77b4' pt 7 ps 0.6 title 'measured / paper beta', \\
     '{dat}' using 1:5 with linespoints lc rgb '#d62728' pt 6 ps 0.6 title 'binade prediction (A const)', \\
     '{dat}' using 1:9 with lines lc rgb '#ff7f0e' dt 3 title 'binade prediction, A(beta) measured'""" + (
            f""", \\
     '{dat}' using 1:6:7:8 with yerrorlines lc rgb '#2ca02c' pt 5 ps 0.4 title 'PASA(beta) / FA'""" if fa_ok else "") + \
            ", \\\n     1 with lines lc rgb 'black' notitle\n"
        subprocess.run(["gnuplot"], input=script, text=True, check=True)
        os.remove(dat)


if __name__ == "__main__":
    cmd = sys.argv[1] if len(sys.argv) > 1 else ""
    if cmd == "configs":
        write_configs()
    elif cmd == "rule-configs":
        write_rule_configs(sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "build"))
    elif cmd == "run":
        run(sys.argv[2] if len(sys.argv) > 2 else os.path.join(ROOT, "build"))
    elif cmd == "analyse":
        analyse()
    else:
        sys.exit(__doc__)
