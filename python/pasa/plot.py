"""pasa.plot: a quick plot of any sweep (pasa-sweep or pasa.sweep) with gnuplot.

``pasa.plot.sweep(source, out, x="x0")`` draws a metric of the sweep's summary (summary.json, or results.csv
summarised here the same way: mean, sample sd, min and max over the seeds' finite values, as
src/pasa/study/sweep_table.cpp sweep_summary) against one of its grid keys, one line per algorithm (and per
value of the other varying grid keys), with interval bars, into a PNG or SVG. ``pasa.plot.series`` returns
the points it would draw. ``python -m pasa.plot DIR OUT --x x0`` is the same from the shell.

gnuplot, not matplotlib: gnuplot is what the project's figure scripts use (experiments/plot_figs.sh) and
needs no Python package; the script it runs, data inline, can be kept (``script=``) and edited.
"""
import argparse
import csv
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile

from ._sweep import _value  # a CSV cell or --where value as summary.json spells it

BARS = ("ci95", "sd", "range", "none")
_TERMINALS = {".png": "pngcairo size 900,600 noenhanced", ".svg": "svg size 900,600 dynamic noenhanced"}


def _betacf(a, b, x):
    """The continued fraction of the regularized incomplete beta function (modified Lentz; Numerical Recipes
    3rd ed. section 6.4, betacf)."""
    tiny = 1e-300
    qab, qap, qam = a + b, a + 1, a - 1
    c, d = 1.0, 1 - qab * x / qap
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((qam + m2) * (a + m2)), -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))):
            d = 1 + aa * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return h


def _student_t_cdf(t, df):
    """P(T <= t) for Student's t with df degrees of freedom: 1 - I_x(df/2, 1/2)/2 with x = df/(df + t²)."""
    x = df / (df + t * t)
    a, b = df / 2, 0.5
    front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x))
    ibeta = front * _betacf(a, b, x) / a if x < (a + 1) / (a + b + 2) else 1 - front * _betacf(b, a, 1 - x) / b
    return 1 - ibeta / 2 if t >= 0 else ibeta / 2


def t975(df):
    """The 0.975 quantile of Student's t with df > 0 degrees of freedom (bisection of the CDF to 1e-12): the
    half-width factor of a 95 % interval of a mean, as summary.json's paired intervals use
    (src/pasa/study/seed_stats.hpp student_t_quantile)."""
    lo, hi = 0.0, 1.0
    while _student_t_cdf(hi, df) < 0.975:
        hi *= 2
    while hi - lo > 1e-12 * hi:
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if _student_t_cdf(mid, df) < 0.975 else (lo, mid)
    return (lo + hi) / 2


def _stats(values):
    """mean, sample sd (None from fewer than 2 values), min, max and the non-finite count, as sweep_summary."""
    finite = [v for v in values if math.isfinite(v)]
    s = {"non_finite": len(values) - len(finite), "mean": None, "sd": None, "min": None, "max": None}
    if finite:
        mean = sum(finite) / len(finite)
        s.update(mean=mean, min=min(finite), max=max(finite))
        if len(finite) > 1:
            s["sd"] = math.sqrt(sum((v - mean) ** 2 for v in finite) / (len(finite) - 1))
    return s


def _summarise_csv(path, grid_keys, metric):
    """The groups of a summary.json (grid point, algorithm, params, seeds, metrics[metric]) from a
    results.csv's rows, in table order."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        header = reader.fieldnames or []
        rows = list(reader)
    if metric not in header:
        raise ValueError(f"{path}: no column {metric!r}; its metric columns: {', '.join(_metric_columns(header))}")
    groups = {}
    for r in rows:
        g = groups.setdefault((int(r["grid_point"]), r["algorithm"]), {
            "grid_point": int(r["grid_point"]), "algorithm": r["algorithm"],
            "params": {k: _value(r[k]) for k in grid_keys}, "values": []})
        g["values"].append(float(r[metric]))
    out = []
    for g in groups.values():
        values = g.pop("values")
        out.append(dict(g, seeds=len(values), metrics={metric: _stats(values)}))
    return out


def _metric_columns(header):
    fixed = {"case_id", "problem_id", "grid_point", "seed", "algorithm", "problem_json", "algorithm_json"}
    return [c for c in header if c not in fixed]


def _load(source, metric):
    """(groups, grid keys, where the summary came from) of a sweep folder, a summary.json or a results.csv
    (with its folder's config.json for the grid keys)."""
    source = os.fspath(source)
    if os.path.isdir(source):
        folder, name = source, None
    elif os.path.isfile(source):
        folder, name = os.path.dirname(source) or ".", os.path.basename(source)
    else:
        raise FileNotFoundError(f"{source}: no such file or folder (a sweep's output folder, summary.json or "
                                "results.csv)")
    summary = os.path.join(folder, name or "summary.json")
    if name is None or name.endswith(".json"):
        if not os.path.isfile(summary):
            csv_path = os.path.join(folder, "results.csv")
            if name is None and os.path.isfile(csv_path):
                return _load(csv_path, metric)
            raise FileNotFoundError(f"{summary}: not found (and no results.csv beside it)")
        with open(summary) as f:
            s = json.load(f)
        if "groups" not in s:
            raise ValueError(f"{summary}: not a sweep summary (no 'groups')")
        groups = s["groups"]
        known = sorted(groups[0]["metrics"]) if groups else []
        if groups and metric not in groups[0]["metrics"]:
            raise ValueError(f"{summary}: no metric {metric!r}; it has: {', '.join(known)}")
        keys = list(groups[0]["params"]) if groups else sorted((s.get("config", {}).get("grid") or {}))
        return groups, keys, summary
    config = os.path.join(folder, "config.json")
    if not os.path.isfile(config):
        raise FileNotFoundError(f"{config}: not found: the grid keys of {source} are read from its sweep's "
                                "config.json")
    with open(config) as f:
        keys = sorted(json.load(f).get("grid") or {})  # the sweep takes its axes in name order
    return _summarise_csv(source, keys, metric), keys, source


def _bar(stats, seeds, bars):
    """(low, high) of a point's interval bar, or None where the summary has none (an sd from < 2 values)."""
    mean = stats["mean"]
    if bars == "range":
        return stats["min"], stats["max"]
    sd, n = stats["sd"], seeds - stats["non_finite"]
    if sd is None or n < 2 or bars == "none":  # (summaries written before sd was null from one value say 0)
        return None
    half = sd if bars == "sd" else t975(n - 1) * sd / math.sqrt(n)
    return mean - half, mean + half


def series(source, x, metric="rmse", *, bars="ci95", where=None, algorithms=None):
    """series(source, x, metric="rmse", *, bars="ci95", where=None, algorithms=None) -> dict

    The lines pasa.plot.sweep draws: {label: [(x, mean, low, high), ...]} sorted by x, one label per
    algorithm (with the other varying grid keys' values appended, "PASA-FP16 Am=0.5", where there are any).
    source: a sweep's output folder, its summary.json, or a results.csv (summarised over the seeds here, the
    grid keys read from config.json beside it). x: a grid key. metric: a column of results.csv (rmse,
    nan_pct, max_abs_err, cosine, ...). bars: "ci95" (the 95 % t interval of the mean over the seeds with a
    finite value), "sd" (mean ± sample sd), "range" (min to max) or "none"; low and high are None where there
    is no bar (one seed). where: {grid key: value} keeps those grid points only. algorithms: the labels to
    keep, in that order (default: all, in the summary's order). A point whose every seed is non-finite (the
    mean is null) is left out."""
    if bars not in BARS:
        raise ValueError(f"bars: {bars!r} is not one of {', '.join(BARS)}")
    groups, keys, where_from = _load(source, metric)
    if x not in keys:
        raise ValueError(f"x: {x!r} is not a grid key of {where_from}; its grid keys: {', '.join(keys) or 'none'}")
    where = dict(where or {})
    for k, v in where.items():
        if k not in keys:
            raise ValueError(f"where: {k!r} is not a grid key of {where_from}; its grid keys: {', '.join(keys)}")
        values = sorted({g["params"][k] for g in groups}, key=str)
        if v not in values:
            raise ValueError(f"where: {k}={v!r} is not on the grid of {where_from}; {k} takes {values}")
    labels = list(dict.fromkeys(g["algorithm"] for g in groups))
    for a in algorithms or ():
        if a not in labels:
            raise ValueError(f"algorithms: {a!r} is not an algorithm of {where_from}; it has: {', '.join(labels)}")
    order = list(algorithms) if algorithms else labels
    varying = [k for k in keys if k != x and k not in where and len({str(g["params"][k]) for g in groups}) > 1]
    lines = {}
    for a in order:
        for g in groups:
            if g["algorithm"] != a or any(g["params"][k] != v for k, v in where.items()):
                continue
            s = g["metrics"][metric]
            label = " ".join([a] + [f"{k}={g['params'][k]}" for k in varying])
            points = lines.setdefault(label, [])
            if s["mean"] is None:
                continue
            bar = _bar(s, g["seeds"], bars)
            points.append((g["params"][x], s["mean"]) + (bar if bar else (None, None)))
    numeric = all(isinstance(p[0], (int, float)) for pts in lines.values() for p in pts)
    for pts in lines.values():
        pts.sort(key=lambda p: p[0] if numeric else str(p[0]))
    return lines


def _script(lines, x, metric, out, terminal, title, logy, bars):
    numeric = all(isinstance(p[0], (int, float)) for pts in lines.values() for p in pts)
    xs = sorted({p[0] for pts in lines.values() for p in pts}, key=lambda v: v if numeric else str(v))
    position = {v: (v if numeric else i) for i, v in enumerate(xs)}
    text = [f"set terminal {terminal}", f"set output {json.dumps(out)}", f"set xlabel {json.dumps(x)}",
            f"set ylabel {json.dumps(metric)}", "set key outside right top", "set grid",
            "set datafile missing 'NaN'"]
    if title:
        text.append(f"set title {json.dumps(title)}")
    if logy:
        text += ["set logscale y", "set format y '%.0e'"]
    if not numeric:
        text.append("set xtics (" + ", ".join(f"{json.dumps(str(v))} {i}" for i, v in enumerate(xs)) + ")")
    plots = []
    for i, (label, pts) in enumerate(lines.items()):
        text.append(f"$d{i} << EOD")
        for p in pts:
            low, high = (p[1], p[1]) if p[2] is None else (p[2], p[3])
            text.append(f"{position[p[0]]!r} {p[1]!r} {low!r} {high!r}")
        text.append("EOD")
        style = "yerrorlines" if bars != "none" else "linespoints"
        using = "1:2:3:4" if bars != "none" else "1:2"
        plots.append(f"$d{i} using {using} with {style} title {json.dumps(label)}")
    text.append("plot " + ", \\\n     ".join(plots))
    return "\n".join(text) + "\n"


def sweep(source, out, x, metric="rmse", *, bars="ci95", where=None, algorithms=None, title=None, logy=None,
          script=None):
    """sweep(source, out, x, metric="rmse", *, bars="ci95", where=None, algorithms=None, title=None,
          logy=None, script=None) -> str

    Draw `metric` of a sweep against its grid key `x` into `out` (.png or .svg), one line per algorithm, with
    interval bars (series() says what source, bars, where and algorithms take). logy: a log y axis (None:
    when every mean is > 0 and they span a factor of 20 or more). script: also write the gnuplot script
    (the data inline) there, to edit and rerun with `gnuplot FILE`. Returns out. Needs gnuplot on PATH."""
    out = os.fspath(out)
    ext = os.path.splitext(out)[1].lower()
    if ext not in _TERMINALS:
        raise ValueError(f"out: {out}: the name must end in {' or '.join(_TERMINALS)} (the image format)")
    lines = series(source, x, metric, bars=bars, where=where, algorithms=algorithms)
    means = [p[1] for pts in lines.values() for p in pts]
    if not means:
        raise ValueError(f"{os.fspath(source)}: no finite {metric} to plot (every seed non-finite, or `where` "
                         "kept no grid point)")
    if logy is None:
        logy = min(means) > 0 and max(means) >= 20 * min(means)
    gnuplot = shutil.which("gnuplot")
    if gnuplot is None:
        raise RuntimeError("gnuplot: not found on PATH (apt-get install gnuplot-nox); pasa.plot.series gives the "
                           "points without it")
    text = _script(lines, x, metric, out, _TERMINALS[ext], title, logy, bars)
    if script is not None:
        with open(script, "w") as f:
            f.write(text)
    with tempfile.NamedTemporaryFile("w", suffix=".gp", delete=False) as f:
        f.write(text)
    try:
        r = subprocess.run([gnuplot, f.name], capture_output=True, text=True)
    finally:
        os.unlink(f.name)
    if r.returncode != 0:
        raise RuntimeError(f"gnuplot failed (exit {r.returncode}) drawing {out}: {r.stderr.strip()[-2000:]}")
    return out


def main(argv=None):
    """python -m pasa.plot SOURCE OUT --x KEY [--metric M] [--bars B] [--where K=V ...]: pasa.plot.sweep."""
    p = argparse.ArgumentParser(prog="python -m pasa.plot", description="Plot a sweep's metric against a grid key "
                                "(gnuplot), one line per algorithm, with interval bars.")
    p.add_argument("source", help="a sweep's output folder, its summary.json or a results.csv")
    p.add_argument("out", help="the image: .png or .svg")
    p.add_argument("--x", required=True, help="the grid key on the x axis")
    p.add_argument("--metric", default="rmse", help="a column of results.csv (default rmse)")
    p.add_argument("--bars", default="ci95", choices=BARS, help="interval bars (default ci95: 95 %% t interval)")
    p.add_argument("--where", action="append", default=[], metavar="KEY=VALUE", help="keep these grid points only")
    p.add_argument("--algorithm", action="append", dest="algorithms", help="an algorithm to draw (default: all)")
    p.add_argument("--title")
    p.add_argument("--logy", choices=("auto", "yes", "no"), default="auto")
    p.add_argument("--script", help="also write the gnuplot script here")
    a = p.parse_args(argv)
    where = {}
    for w in a.where:
        k, eq, v = w.partition("=")
        if not eq:
            p.error(f"--where {w}: expected KEY=VALUE")
        where[k] = _value(v)
    try:
        sweep(a.source, a.out, a.x, a.metric, bars=a.bars, where=where, algorithms=a.algorithms, title=a.title,
              logy={"auto": None, "yes": True, "no": False}[a.logy], script=a.script)
    except (ValueError, FileNotFoundError, RuntimeError) as e:
        print(f"pasa.plot: {e}", file=sys.stderr)
        return 2
    print(a.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
