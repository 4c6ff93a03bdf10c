"""pasa.plot: a sweep's metric against a grid key, one line per algorithm, with interval bars (gnuplot).
The points are checked against statistics recomputed here from results.csv (statistics.mean / stdev, and
Student's t quantiles from printed tables), the images by their file signatures and SVG text."""
import csv
import math
import os
import shutil
import statistics
import subprocess
import sys

import pytest

import pasa
from conftest import BUILD, SMALL_SWEEP

# The 0.975 quantiles of Student's t (any printed table, e.g. NIST/SEMATECH e-Handbook 1.3.6.7.2).
T975 = {1: 12.706, 2: 4.303, 4: 2.776, 9: 2.262, 30: 2.042, 100: 1.984}

# Closed forms for 1 and 2 degrees of freedom (Cauchy: tan(pi (p - 1/2)); df = 2: F(t) = 1/2 + t / (2 sqrt(2 + t²))).
T975_EXACT = {1: math.tan(math.pi * 0.475), 2: math.sqrt(2 * 0.95**2 / (1 - 0.95**2))}

needs_gnuplot = pytest.mark.skipif(shutil.which("gnuplot") is None, reason="gnuplot not installed")


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    """A 2 x 2 grid (x0, Am) x 3 seeds x 2 algorithms, run once for the module."""
    out = tmp_path_factory.mktemp("plot") / "sweep"
    config = dict(SMALL_SWEEP, name="plot", grid={"x0": [1, 30], "Am": [0.5, 4]}, seeds=[1, 2, 3])
    config["problem"] = dict(SMALL_SWEEP["problem"], generator=dict(SMALL_SWEEP["problem"]["generator"], am="$Am"))
    pasa.sweep(config, out, threads=2)
    return out


def reference(folder, x, metric, bars, where):
    """{label: [(x, mean, low, high)]} from results.csv, by the definitions of docs/sweeps.md."""
    with open(folder / "results.csv", newline="") as f:
        rows = list(csv.DictReader(f))
    other = [k for k in ("Am", "x0") if k != x and k not in where]
    lines = {}
    for r in rows:
        if any(float(r[k]) != v for k, v in where.items()):
            continue
        label = " ".join([r["algorithm"]] + [f"{k}={r[k]}" for k in other])
        lines.setdefault(label, {}).setdefault(float(r[x]), []).append(float(r[metric]))
    out = {}
    for label, by_x in lines.items():
        out[label] = []
        for xv, vs in sorted(by_x.items()):
            m, sd = statistics.mean(vs), statistics.stdev(vs)
            half = {"sd": sd, "ci95": T975_EXACT[len(vs) - 1] * sd / math.sqrt(len(vs))}.get(bars)
            low, high = (min(vs), max(vs)) if bars == "range" else (m - half, m + half)
            out[label].append((xv, m, low, high))
    return out


def test_t_quantiles():
    for df, t in T975.items():
        assert pasa.plot.t975(df) == pytest.approx(t, abs=6e-4), df
    for df, t in T975_EXACT.items():
        assert pasa.plot.t975(df) == pytest.approx(t, rel=1e-10), df


@pytest.mark.parametrize("bars", ["ci95", "sd", "range"])
def test_points_are_the_summary(swept, bars):
    ref = reference(swept, "x0", "rmse", bars, {})
    for source in (swept, swept / "summary.json", swept / "results.csv"):
        got = pasa.plot.series(source, "x0", bars=bars)
        assert list(got) == ["FA Am=0.5", "FA Am=4", "PASA Am=0.5", "PASA Am=4"]
        assert sorted(got) == sorted(ref)
        for label, pts in got.items():
            assert len(pts) == 2
            for p, q in zip(pts, ref[label]):
                assert p == pytest.approx(q, rel=1e-12, abs=0), (source, label)


def test_where_algorithms_and_another_metric(swept):
    got = pasa.plot.series(swept, "Am", "max_abs_err", bars="range", where={"x0": 30}, algorithms=["PASA"])
    ref = reference(swept, "Am", "max_abs_err", "range", {"x0": 30})
    assert list(got) == ["PASA"]
    assert len(got["PASA"]) == 2
    for p, q in zip(got["PASA"], ref["PASA"]):
        assert p == pytest.approx(q, rel=1e-12, abs=0)
    assert pasa.plot.series(swept, "Am", bars="none", where={"x0": 1})["FA"][0][2:] == (None, None)


@needs_gnuplot
def test_images(swept, tmp_path):
    png = pasa.plot.sweep(swept, tmp_path / "a.png", "x0", script=tmp_path / "a.gp")
    assert png == str(tmp_path / "a.png")
    assert (tmp_path / "a.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    script = (tmp_path / "a.gp").read_text()
    mean = pasa.plot.series(swept, "x0")["PASA Am=4"][1][1]
    means = [p[1] for pts in pasa.plot.series(swept, "x0").values() for p in pts]
    assert repr(mean) in script and ("set logscale y" in script) == (max(means) >= 20 * min(means))
    pasa.plot.sweep(swept, tmp_path / "b.svg", "Am", where={"x0": 1}, title="small", logy=True)
    svg = (tmp_path / "b.svg").read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    assert ">PASA<" in svg and ">FA<" in svg and ">small<" in svg


def test_errors_name_what_is_wrong(swept, tmp_path):
    with pytest.raises(FileNotFoundError, match="nowhere"):
        pasa.plot.series(tmp_path / "nowhere", "x0")
    with pytest.raises(ValueError, match=r"x: 'beta' is not a grid key .*grid keys: Am, x0"):
        pasa.plot.series(swept, "beta")
    with pytest.raises(ValueError, match=r"no metric 'rmsee'.*rmse"):
        pasa.plot.series(swept, "x0", "rmsee")
    with pytest.raises(ValueError, match=r"no column 'rmsee'"):
        pasa.plot.series(swept / "results.csv", "x0", "rmsee")
    with pytest.raises(ValueError, match=r"where: x0=2 is not on the grid.*\[1, 30\]"):
        pasa.plot.series(swept, "Am", where={"x0": 2})
    with pytest.raises(ValueError, match=r"algorithms: 'FA3'.*FA, PASA"):
        pasa.plot.series(swept, "Am", algorithms=["FA3"])
    with pytest.raises(ValueError, match="bars"):
        pasa.plot.series(swept, "Am", bars="minmax")
    with pytest.raises(ValueError, match=r"out: .*\.jpg: the name must end in \.png or \.svg"):
        pasa.plot.sweep(swept, tmp_path / "a.jpg", "x0")
    lone = tmp_path / "lone"
    lone.mkdir()
    shutil.copy(swept / "results.csv", lone)
    with pytest.raises(FileNotFoundError, match="config.json"):
        pasa.plot.series(lone / "results.csv", "x0")


@needs_gnuplot
def test_command_line(swept, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(BUILD / "python"))
    run = [sys.executable, "-m", "pasa.plot"]
    r = subprocess.run(run + [str(swept), str(tmp_path / "c.png"), "--x", "x0", "--where", "Am=0.5"],
                       capture_output=True, text=True, env=env)
    assert r.returncode == 0 and r.stdout == f"{tmp_path / 'c.png'}\n" and r.stderr == "", r.stderr
    assert (tmp_path / "c.png").read_bytes()[:4] == b"\x89PNG"
    r = subprocess.run(run + [str(swept), str(tmp_path / "d.png"), "--x", "Sq"], capture_output=True, text=True,
                       env=env)
    assert r.returncode == 2 and r.stderr.startswith("pasa.plot: x: 'Sq' is not a grid key") and r.stdout == ""
    assert not (tmp_path / "d.png").exists()
