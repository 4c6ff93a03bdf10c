"""Shared by the field-question scripts (docs/field-questions.md): paired ratios over seeds with a 95 % t-interval
of the mean log ratio (as experiments/python/sage_comparison.py), the relative RMSE (Eq. 19) and config loading."""
import json
import math
import os

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
T975 = {n: t for n, t in zip(range(1, 31), [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                                             2.201, 2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                                             2.080, 2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042])}


def rel_rmse(a, g):
    a, g = np.asarray(a, dtype=np.float64), np.asarray(g, dtype=np.float64)
    return float(np.sqrt(np.mean((a - g) ** 2)) / np.sqrt(np.mean(g ** 2)))


def paired(num, den):
    """Geometric mean of num[s]/den[s] over the seeds both hold, with the 95 % t-interval of the mean log ratio;
    'differs' is 'no' where the interval contains 1 (no difference not excluded)."""
    seeds = sorted(set(num) & set(den))
    lr = np.log(np.array([num[s] / den[s] for s in seeds]))
    n = len(lr)
    if n < 2:
        raise ValueError(f"paired: {n} common seeds; at least 2 are needed for an interval")
    if np.all(lr == lr[0]):
        lo = hi = mid = math.exp(lr[0])
    else:
        half = T975[n - 1] * lr.std(ddof=1) / math.sqrt(n)
        mid, lo, hi = math.exp(lr.mean()), math.exp(lr.mean() - half), math.exp(lr.mean() + half)
    return {"seeds": n, "ratio": f"{mid:.4g}", "lo95": f"{lo:.4g}", "hi95": f"{hi:.4g}",
            "differs": "yes" if (lo > 1 or hi < 1) else "no"}


def geomean(vals):
    return float(np.exp(np.mean(np.log(np.asarray(list(vals), dtype=np.float64)))))


def load_config(path):
    with open(path) as f:
        c = json.load(f)
    for key in ("name", "seeds"):
        if key not in c:
            raise SystemExit(f"{path}: missing \"{key}\"")
    if len(c["seeds"]) < 10:
        raise SystemExit(f"{path}: seeds: {len(c['seeds'])} given; paired claims need at least 10")
    return c


def write_csv(path, rows):
    import csv
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    with open(path, "w", newline="") as h:
        keys = list(dict.fromkeys(k for r in rows for k in r))  # every row's columns, in first-seen order
        w = csv.DictWriter(h, fieldnames=keys, restval="")
        w.writeheader()
        w.writerows(rows)
