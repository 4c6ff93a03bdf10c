"""pasa.round / encode / decode / formats with the element formats of block-scaled quantisation (fp6_e2m3,
fp6_e3m2, fp4_e2m1, e8m0, int8/int4 and _full, hif8): names and ml_dtypes dtype names, the conventions,
every storage pattern round-tripped, and ml_dtypes arrays out where ml_dtypes is importable (bit patterns as
uint8 where it is not). References here: the OCP MX v1.0 value tables written out by hand."""
import math

import numpy as np
import pytest

import pasa

try:
    import ml_dtypes
except ImportError:
    ml_dtypes = None

FP4 = [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]  # OCP MX v1.0 Table 2: E2M1 magnitudes, codes 0..7


def test_listed_with_descriptors():
    fs = {f["name"]: f for f in pasa.formats()}
    for n in ["fp6_e2m3", "fp6_e3m2", "fp4_e2m1", "e8m0", "int8", "int8_full", "int4", "int4_full", "hif8"]:
        assert n in fs
    assert fs["fp4_e2m1"]["max_finite"] == 6 and fs["fp4_e2m1"]["storage_bits"] == 4 and not fs["fp4_e2m1"]["nan"]
    assert fs["e8m0"]["signed"] is False and fs["e8m0"]["zero"] is False and fs["e8m0"]["min_normal"] == 2.0**-127
    assert fs["int8_full"]["max_negative"] == 128 and fs["int8"]["max_negative"] == 127
    assert fs["hif8"]["tapered"] and fs["hif8"]["max_finite"] == 32768
    assert pasa.format_info("float4_e2m1fn")["name"] == "fp4_e2m1"


def test_fp4_values_and_codes():
    codes = pasa.encode(np.array(FP4 + [-x for x in FP4]), "fp4_e2m1")
    assert codes.dtype == np.uint8
    assert list(codes) == list(range(8)) + [8] + list(range(9, 16))
    assert list(pasa.decode(np.arange(8, dtype=np.uint8), "fp4_e2m1")) == FP4
    # RNE, saturating: 0.25 -> 0 (tie to even), 0.75 -> 1, 5 -> 4, 7 and 1e9 -> 6
    assert list(pasa.round([0.25, 0.75, 5, 7, 1e9, -1e9], "fp4_e2m1")) == [0, 1, 4, 6, 6, -6]
    assert list(pasa.round([0.25, 5], "fp4_e2m1", mode="rna")) == [0.5, 6]
    r = pasa.round([float("nan")], "fp4_e2m1")
    assert math.isnan(r[0])  # exact: NaN stays NaN ...
    with pytest.raises(ValueError, match="no NaN"):
        pasa.encode(r, "fp4_e2m1")  # ... and has no pattern
    z = pasa.round([float("nan")], "fp4_e2m1", convention="ml_dtypes")
    assert z[0] == 0 and math.copysign(1, z[0]) == -1  # ml_dtypes 0.6: +NaN -> -0


@pytest.mark.parametrize("name", ["fp6_e2m3", "fp6_e3m2", "fp4_e2m1", "e8m0", "int8", "int8_full", "int4",
                                  "int4_full", "hif8"])
def test_every_pattern_round_trips(name):
    bits = pasa.formats()
    nb = {f["name"]: f["storage_bits"] for f in bits}[name]
    codes = np.arange(1 << nb, dtype=np.uint64)
    if name in ("int8", "int4"):
        codes = codes[codes != (1 << (nb - 1))]  # the symmetric range leaves -2^(b-1) out
    v = pasa.decode(codes, name)
    finite = ~np.isnan(v)
    assert (pasa.round(v[finite], name) == v[finite]).all()
    back = pasa.encode(v, name) if name in ("e8m0", "hif8") else pasa.encode(v[finite], name)
    assert (back.astype(np.uint64) == (codes if name in ("e8m0", "hif8") else codes[finite])).all()


def test_e8m0_conventions():
    x = np.array([0.0, -3.0, 1.5, 2.0**-127 * 1.25, 3e38])
    ex = pasa.round(x, "e8m0")
    assert math.isnan(ex[0]) and math.isnan(ex[1]) and ex[2] == 2 and ex[3] == 2.0**-127 and math.isnan(ex[4])
    ml = pasa.round(x, "e8m0", convention="ml_dtypes")
    assert ml[3] == 2.0**-126 and math.isnan(ml[0])
    th = pasa.round(x, "e8m0", convention="torch")
    assert th[0] == 2.0**-127 and th[1] == 4 and th[3] == 2.0**-126 and math.isnan(th[4])
    sat = pasa.round(x, "e8m0", overflow="saturate")
    assert sat[0] == 2.0**-127 and sat[1] == 2.0**-127 and sat[4] == 2.0**127
    assert list(pasa.encode(np.array([1.0, 2.0**-127, float("nan")]), "e8m0")) == [0x7F, 0x00, 0xFF]
    with pytest.raises(ValueError, match="convention"):
        pasa.round(x, "e8m0", convention="numpy")


def test_hif8_and_hybrid():
    assert list(pasa.round([1.0625, 40960, 2.0**-23], "hif8", mode="rna")) == [1.125, math.inf, 2.0**-22]
    assert list(pasa.encode(np.array([32768.0, 2.0**-22, 0.5, math.inf]), "hif8")) == [0x6E, 0x01, 0x18, 0x6F]
    a = pasa.round(np.full(4000, 17.0), "hif8", mode="hr", seed=5)  # |E| = 4: stochastic between 16 and 20
    assert set(np.unique(a)) == {16.0, 20.0} and abs((a == 20).mean() - 0.25) < 0.05
    assert (pasa.round(np.full(100, 1.0625), "hif8", mode="hr", seed=5) == 1.125).all()  # |E| <= 3: ties away


def test_ml_dtypes_arrays_or_patterns():
    for dt, name in [("float4_e2m1fn", "fp4_e2m1"), ("float6_e2m3fn", "fp6_e2m3"), ("float6_e3m2fn", "fp6_e3m2"),
                     ("float8_e8m0fnu", "e8m0")]:
        if ml_dtypes is None:  # the name is refused (the type must not depend on what is installed) ...
            with pytest.raises(ValueError, match=f'^dtype: "{dt}" arrays need ml_dtypes'):
                pasa.round([1.0, 3.0], name, dtype=dt)
            r = pasa.round([1.0, 3.0], name, dtype=np.uint8)  # ... and the patterns are asked for as such
            assert r.dtype == np.uint8
        else:
            r = pasa.round([1.0, 3.0], name, dtype=dt)
        if ml_dtypes is None:
            assert list(pasa.decode(r, name)) == [1.0, 3.0] or name == "e8m0"
        else:
            assert r.dtype == np.dtype(getattr(ml_dtypes, dt))
            assert list(r.astype(np.float64)) == list(pasa.round([1.0, 3.0], name))
            assert list(pasa.decode(r, name)) == list(r.astype(np.float64))


def test_flush_refused_for_non_ieee_grids():
    with pytest.raises(ValueError, match="DAZ"):
        pasa.round([1.0], "int8", flush_output=True)
