"""Issue 23: Ctrl-C stops long calls (KeyboardInterrupt within a second or two, a sweep keeps its .partial
rows) and arguments are checked like the programs' options (ValueError/TypeError naming the argument)."""
import math
import os
import signal
import threading
import time

import numpy as np
import pytest

import pasa


def interrupt_after(seconds):
    t = threading.Timer(seconds, lambda: os.kill(os.getpid(), signal.SIGINT))
    t.start()
    return t


def small(sq=16, skv=16, d=8, seed=0):
    rng = np.random.default_rng(seed)
    return [rng.uniform(-1, 1, (1, n, d)).astype(np.float16) for n in (sq, skv, skv)]


def test_golden_at_100000_bits_stops_on_ctrl_c():
    q, k, v = small(sq=64, skv=256, d=64)
    timer = interrupt_after(0.5)
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        pasa.golden(q, k, v, precision_bits=100000, fast=False, threads=1)  # minutes without the interrupt
    elapsed = time.monotonic() - t0
    timer.join()
    assert elapsed < 2.5, elapsed
    # The library is usable again afterwards (the cancellation request was cleared).
    g = pasa.golden(*small(), threads=1)
    assert g["guaranteed_bits"] > 53


def test_attention_stops_on_ctrl_c_between_work_items():
    # Every product and sum of both GEMMs stochastically rounded: about 30 s on one thread (2 heads x 128
    # query blocks of 8 rows, ~0.2 s each). parallel_for checks the cancel flag between items, so the call
    # stops within one item; it ran to its end before.
    rng = np.random.default_rng(0)
    q, k, v = [rng.uniform(-1, 1, (2, 1024, 64)).astype(np.float16) for _ in range(3)]
    alloc = {"preset": "fa_fp16", "gemm": {"model": "every_op"}, "stages": {"qk_acc": {"format": "bf16", "round": "sr"}}}
    small_args = [x[:, :16] for x in (q, k, v)]
    before = pasa.attention(*small_args, alloc=alloc, s1=8, threads=1)
    timer = interrupt_after(0.5)
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        pasa.attention(q, k, v, alloc=alloc, s1=8, threads=2)
    elapsed = time.monotonic() - t0
    timer.join()
    assert elapsed < 2.5, elapsed
    # Not cancelled, the same call gives the same bits as before the interrupt (the request was cleared).
    after = pasa.attention(*small_args, alloc=alloc, s1=8, threads=1)
    assert np.array_equal(before[0], after[0]) and np.array_equal(before[1], after[1])


def test_sweep_stops_on_ctrl_c_and_keeps_partial(tmp_path):
    config = {"name": "interrupt", "problem": {"shape": {"Nq": 1, "Sq": 64, "D": 16}, "format": "fp16",
                                               "seed": "$seed", "generator": {"kind": "uniform", "x0": 0, "am": 1}},
              "seeds": list(range(1, 3001)),
              "algorithms": [{"label": "FA", "name": "fa2", "alloc": "fa_fp16_fp32"}]}
    timer = interrupt_after(1.0)
    t0 = time.monotonic()
    with pytest.raises(KeyboardInterrupt):
        pasa.sweep(config, tmp_path / "out", threads=1)
    elapsed = time.monotonic() - t0
    timer.join()
    assert elapsed < 3, elapsed
    out = tmp_path / "out"
    assert not (out / "results.csv").exists()
    partial = out / "results.csv.partial"
    assert partial.exists()
    done = len(partial.read_text().splitlines()) - 1
    assert 0 < done < 3000
    r = pasa.sweep(config | {"seeds": list(range(1, done + 2))}, tmp_path / "small", threads=1)
    assert r.attrs["cases_run"] == done + 1


def test_guaranteed_bits_beyond_1075_bits():
    g = pasa.golden(*small(sq=2, skv=4, d=4), precision_bits=2000, fast=False, threads=1)
    assert 900 < g["guaranteed_bits"] < 1000  # was -2147483648 (log2 of an underflowed bound)
    assert g["error_bound"] >= 0


@pytest.mark.parametrize("precision_bits", [128, 300, 2000])
def test_golden_precision_and_fast_reach_the_library(precision_bits):
    # golden_mpfr.cpp's MPFR path (fast=False) documents E = 2.2·(1.01·max δ + u) + 1.1·(3n + 2)·u with u = 2^-P
    # (error_bound a double: 2^-P underflows beyond ~1074 bits); Q = 0 makes every score 0 and δ = 0 exactly,
    # so E = (2.2 + 1.1·(3n + 2))·u and bits = floor(-log2 E) (at most 999, golden.hpp), computed here from the
    # arguments passed; the output is the mean of V. The fast path (the default) reports no MPFR.
    q, k, v = small(sq=2, skv=5, d=4)
    q[:] = 0
    n = 5
    g = pasa.golden(q, k, v, precision_bits=precision_bits, fast=False, threads=1)
    c = 2.2 + 1.1 * (3 * n + 2)
    assert g["used_mpfr"] is True
    assert g["guaranteed_bits"] == min(999, math.floor(precision_bits - math.log2(c)))
    if precision_bits <= 900:
        assert g["error_bound"] == pytest.approx(c * 2.0 ** -precision_bits, rel=1e-12)
    np.testing.assert_array_equal(g["out"], np.broadcast_to(v.astype(np.float64).mean(axis=1, keepdims=True), g["out"].shape))
    fast = pasa.golden(q, k, v, threads=1)
    assert fast["used_mpfr"] is False


@pytest.mark.parametrize("kwargs, error, match", [
    ({"threads": 0}, ValueError, r"^threads: 0 is not an integer in \[1, 4096\]"),
    ({"threads": -1}, ValueError, r"^threads: -1 is not"),
    ({"s1": -1}, ValueError, r"^s1: -1 is not an integer"),
    ({"s2": 2**64}, ValueError, r"^s2: 18446744073709551616 is not"),
    ({"seed": -5}, ValueError, r"^seed: -5 is not"),
    ({"kv_len": [-1]}, ValueError, r"^kv_len: kv_len\[0\] = -1 lies outside \[0, Skv = "),
    ({"s1": 1.5}, TypeError, r"^s1: expected an integer, got float"),
    ({"algorithm": "pasa", "beta": math.nan}, ValueError, r"^beta: must be a finite number, got nan"),
])
def test_attention_arguments(kwargs, error, match):
    with pytest.raises(error, match=match):
        pasa.attention(*small(), **kwargs)


def test_nonfinite_advice_is_python_spelling():
    q, k, v = small()
    q = q.astype(np.float64)
    q[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match="allow_nonfinite=True") as e:
        pasa.attention(q, k, v)
    assert "--allow-nonfinite" not in str(e.value)


def test_other_arguments():
    with pytest.raises(ValueError, match=r"^threads: 0 is not"):
        pasa.golden(*small(), threads=0)
    with pytest.raises(ValueError, match=r"^precision_bits: 50 is not an integer in \[106, 100000\]"):
        pasa.golden(*small(), precision_bits=50)
    with pytest.raises(ValueError, match=r"^threads: -1 is not"):
        pasa.generate({"shape": {"Nq": 1, "Sq": 4, "D": 4}}, threads=-1)
    with pytest.raises(ValueError, match=r"^max_iter: 0 is not"):
        pasa.solve_beta(0.9, max_iter=0)
    with pytest.raises(ValueError, match=r"^sqrt_d: -1 is not"):
        pasa.solve_beta(0.9, sqrt_d=-1)
    with pytest.raises(TypeError, match="^x: expected a number"):
        pasa.round(None, "fp16")
    with pytest.raises(TypeError, match="^x: expected a number"):
        pasa.round("1.5", "fp16")
    with pytest.raises(TypeError, match="^x: expected a number"):
        pasa.round(["1.5"], "fp16")
    assert pasa.round(1.5, "fp16") == 1.5
    assert pasa.round([1, 2], "fp16").tolist() == [1.0, 2.0]


def test_generate_is_sized_first():
    with pytest.raises(ValueError, match=r"^problem needs about .* of memory"):
        pasa.generate({"shape": {"Nq": 64, "Sq": 10**7, "D": 1024}})


def test_sweep_takes_json_text(tmp_path):
    import json
    config = {"name": "text", "problem": {"shape": {"Nq": 1, "Sq": 16, "D": 8}, "format": "fp16", "seed": "$seed",
                                          "generator": {"kind": "uniform", "x0": 0, "am": 1}},
              "seeds": [1, 2], "algorithms": [{"label": "FA", "name": "fa2", "alloc": "fa_fp16_fp32"}]}
    a = pasa.sweep(json.dumps(config), tmp_path / "a", threads=1)
    b = pasa.sweep(config, tmp_path / "b", threads=1)
    assert a.attrs["digest"] == b.attrs["digest"] and a.attrs["cases_run"] == 2
