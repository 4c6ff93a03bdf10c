"""Shared helpers of the Python module's tests (tests/python/): the command-line programs the module must
agree with, and a bit-exact comparison of float arrays."""
import json
import os
import pathlib
import subprocess

import numpy as np
import pytest

BUILD = pathlib.Path(os.environ.get("PASA_BUILD_DIR", pathlib.Path(__file__).resolve().parents[2] / "build"))


def run_app(name, *args, expect_rc=0):
    """Runs build/<name> with args; returns the CompletedProcess (stdout/stderr as text)."""
    r = subprocess.run([str(BUILD / name), *map(str, args)], capture_output=True, text=True)
    if expect_rc is not None and r.returncode != expect_rc:
        raise AssertionError(f"{name} {' '.join(map(str, args))}: exit {r.returncode}, expected {expect_rc}\n{r.stderr}")
    return r


def app_error(name, *args):
    """The message a program prints for an input error (exit 2), without its "<name>: error: " prefix."""
    r = run_app(name, *args, expect_rc=2)
    prefix = f"{name}: error: "
    line = r.stderr.strip()
    assert line.startswith(prefix), line
    return line[len(prefix):]


def assert_same_bits(a, b):
    """a and b hold the same float64 values bit for bit (the sign of zero included; any NaN matches any NaN)."""
    with np.errstate(invalid="ignore"):  # float32 signalling NaNs raise "invalid" when widened
        a = np.asarray(a, dtype=np.float64)
        b = np.asarray(b, dtype=np.float64)
    assert a.shape == b.shape, (a.shape, b.shape)
    na, nb = np.isnan(a), np.isnan(b)
    assert np.array_equal(na, nb), f"NaN at different places: {np.argwhere(na != nb)[:5]}"
    ua, ub = a[~na].view(np.uint64), b[~nb].view(np.uint64)
    bad = np.flatnonzero(ua != ub)
    assert bad.size == 0, f"{bad.size} of {ua.size} differ, first at {bad[0]}: {a[~na][bad[0]]!r} vs {b[~nb][bad[0]]!r}"


def assert_same_json(a, b, path=""):
    """The module's dict/list a equals the programs' JSON b, values exactly. JSON has no NaN or infinities:
    the programs write them as the strings "nan", "inf", "-inf" (metrics) or as null (nlohmann's NaN)."""
    if isinstance(a, dict):
        assert isinstance(b, dict) and a.keys() == b.keys(), f"{path}: {sorted(a)} vs {sorted(b) if isinstance(b, dict) else b}"
        for k in a:
            assert_same_json(a[k], b[k], f"{path}/{k}")
    elif isinstance(a, list):
        assert isinstance(b, list) and len(a) == len(b), f"{path}: {a} vs {b}"
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same_json(x, y, f"{path}/{i}")
    elif isinstance(a, float) and np.isnan(a):
        assert b in (None, "nan") or (isinstance(b, float) and np.isnan(b)), f"{path}: nan vs {b!r}"
    elif isinstance(a, float) and np.isinf(a):
        assert b == a or b == ("inf" if a > 0 else "-inf"), f"{path}: {a!r} vs {b!r}"
    else:
        assert a == b and type(a) is type(b), f"{path}: {a!r} vs {b!r}"


def read_json(path):
    return json.loads(pathlib.Path(path).read_text())


@pytest.fixture
def rng():
    return np.random.default_rng(20261123)


# A sweep of 8 cases that runs in a fraction of a second (2 grid points, one of them overflowing fp16 in
# FA-FP16/FP32, x 2 seeds x 2 algorithms): the tests of pasa.sweep's rows and of a second run into a folder.
SMALL_SWEEP = {"name": "small", "problem": {"shape": {"Nq": 1, "Sq": 32, "D": 16}, "format": "fp16", "seed": "$seed",
                                            "generator": {"kind": "uniform", "x0": "$x0", "am": 0.5}},
               "grid": {"x0": [1, 30]}, "seeds": [1, 2],
               "algorithms": [{"label": "FA", "name": "fa2", "alloc": "fa_fp16_fp32", "s1": 16, "s2": 16},
                              {"label": "PASA", "name": "pasa", "alloc": "pasa_fp16", "s1": 16, "s2": 16}]}
