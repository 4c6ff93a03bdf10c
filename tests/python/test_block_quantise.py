"""pasa.block_quantise: the OCP FLOOR rule restated in numpy (frexp) with pasa.round (checked against MPFR
elsewhere) for the elements, the axis and operand arguments, the microxcaling vectors through Python, and
errors that name the argument."""
import json
import os

import numpy as np
import pytest

import pasa

HERE = os.path.dirname(os.path.abspath(__file__))


def floor_reference(x, emax, fmt, block=32):
    """OCP MX v1.0 §6.3 along the last axis: X = 2^(floor(log2 amax) - emax), elements RNE and saturating."""
    xb = x.reshape(*x.shape[:-1], -1, block)
    amax = np.abs(xb).max(axis=-1, keepdims=True)
    _, e = np.frexp(amax)  # amax = m·2^e, m in [0.5, 1): floor(log2 amax) = e - 1
    X = np.where(amax > 0, np.ldexp(1.0, np.clip(e - 1 - emax, -127, 127)), 2.0 ** -127)
    el = pasa.round(xb / X, fmt, overflow="saturate")
    return (el * X).reshape(x.shape), X[..., 0]


def test_floor_rule_and_layout():
    rng = np.random.default_rng(5)
    x = rng.standard_normal((3, 5, 64)) * np.exp2(rng.integers(-20, 20, (3, 5, 1)))
    for scheme, emax, fmt in [("mxfp8_e4m3", 8, "fp8_e4m3fn"), ("mxfp8_e5m2", 15, "fp8_e5m2")]:
        r = pasa.block_quantise(x, scheme)
        want, X = floor_reference(x, emax, fmt)
        assert np.array_equal(r["values"], want)
        assert np.array_equal(r["scales"], X)
        assert r["scales"].shape == (3, 5, 2)
        assert np.array_equal(r["values"], r["elements"] * np.repeat(r["scales"], 32, axis=-1))
        # another axis: the same as moving it last
        t = pasa.block_quantise(np.moveaxis(x, -1, 0), scheme, axis=0)
        assert np.array_equal(np.moveaxis(t["values"], 0, -1), r["values"])


def test_scale_rule_and_round_keywords():
    x = np.array([0.3, 1.7, -5.0, 100.0] + [0.01] * 28)
    floor = pasa.block_quantise(x, "mxfp8_e4m3")
    ceil = pasa.block_quantise(x, "mxfp8_e4m3", scale_rule="ceil")
    assert floor["scales"][0] == 2.0 ** (6 - 8) and ceil["scales"][0] == 2.0 ** (7 - 8)
    assert ceil["scheme"]["scale_rule"] == "ceil"
    rna = pasa.block_quantise(x, {"scheme": "int8_per_block", "round": "rna"})
    assert rna["scheme"]["round"] == "rna" and np.all(np.abs(rna["elements"]) <= 127)


def sage_scale(amax):
    """quant_per_thread.py:41 tl.max(tl.abs(x)) / 127. + 0.0000001: Triton's division is a · MUFU.RCP(b), and
    ptxas contracts that product with the add, one FFMA rounded once (measured on the H200: every SA2 scale,
    tests/python/test_sage_recipes.py). The exact a·r + 1e-7 by fractions, rounded to the nearest fp32 (ties
    to even)."""
    from fractions import Fraction
    rcp127 = Fraction(float(pasa.gpu_math(np.array([127.0], dtype=np.float32), "rcp")[0]))
    out = []
    for a in amax.astype(np.float32):
        exact = Fraction(float(a)) * rcp127 + Fraction(float(np.float32(1e-7)))
        near = np.float32(float(exact))
        cands = [np.nextafter(near, np.float32(-1)), near, np.nextafter(near, np.float32(1))]
        dist = [abs(Fraction(float(c)) - exact) for c in cands]
        best = min(dist)
        ties = [c for c, d in zip(cands, dist) if d == best]
        out.append(float(min(ties, key=lambda c: int(np.float32(c).view(np.uint32)) & 1)))
    return np.array(out)


def test_sage_per_thread_groups():
    x = np.random.default_rng(2).standard_normal((64, 32)).astype(np.float32).astype(np.float64)
    q = pasa.block_quantise(x, "int8_per_thread")  # Q: 2 warps of 32 rows, 8 groups each
    assert q["scales"].shape == (16,)
    amax = np.array([np.abs(x[w * 32 + t: (w + 1) * 32: 8]).max() for w in range(2) for t in range(8)])
    assert np.array_equal(q["scales"], sage_scale(amax))
    k = pasa.block_quantise(x, "int8_per_thread", operand="b")  # K: 4 groups of rows 8i + 2t, + 1
    amax = np.array([np.abs(np.concatenate([x[2 * t::8], x[2 * t + 1::8]])).max() for t in range(4)])
    assert np.array_equal(k["scales"], sage_scale(amax))
    ieee = pasa.block_quantise(x, {"scheme": "int8_per_thread", "divide": "ieee"}, operand="b")
    assert np.array_equal(ieee["scales"], (amax.astype(np.float32) / np.float32(127) + np.float32(1e-7)).astype(np.float64))


def test_microxcaling_vectors():
    with open(os.path.join(HERE, "..", "numeric", "data", "mx_microxcaling.json")) as f:
        data = json.load(f)
    x = np.array([int(h, 16) for h in data["inputs"]], dtype=np.uint32).view(np.float32).astype(np.float64)
    for case in data["cases"]:
        if case["scheme"] not in ("mxfp8_e4m3", "mxfp8_e5m2", "mxint8"):
            try:
                pasa.block_quantise(x, case["scheme"])
            except ValueError:
                continue  # element format not in the registry yet
        want = np.array([int(h, 16) for h in case["values"]], dtype=np.uint32).view(np.float32)
        got = pasa.block_quantise(x, case["scheme"], round=case["pasa_round"])["values"]
        # microxcaling's floor(log2 amax) in fp32 rounds up just below a power of two: CEIL's scale there
        # (tests/numeric/test_block_scale_reference.cpp)
        ceil = pasa.block_quantise(x, case["scheme"], round=case["pasa_round"], scale_rule="ceil")["values"]
        amax = np.abs(x.astype(np.float32)).reshape(-1, 32).max(axis=1)
        up = np.floor(np.log2(amax, where=amax > 0, out=np.zeros_like(amax))) != np.frexp(amax)[1] - 1
        up &= amax > 0
        got = np.where(np.repeat(up, 32), ceil, got)
        assert np.array_equal(got.astype(np.float32).view(np.uint32), want.view(np.uint32)), case["scheme"]


def test_errors_name_the_argument():
    with pytest.raises(ValueError, match="scheme.*mxfp9.*mxfp8_e4m3"):
        pasa.block_quantise([1.0], "mxfp9")
    with pytest.raises(ValueError, match="scale_rule.*flor"):
        pasa.block_quantise([1.0], "mxfp8_e4m3", scale_rule="flor")
    with pytest.raises(ValueError, match="axis"):
        pasa.block_quantise([1.0, 2.0], "mxfp8_e4m3", axis=3)
    with pytest.raises(ValueError, match="operand"):
        pasa.block_quantise([1.0], "mxfp8_e4m3", operand="c")
    assert "nvfp4" in pasa.block_schemes()
