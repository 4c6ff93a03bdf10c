"""numpy conventions of pasa.round / encode / decode: formats by numpy's and ml_dtypes' names and dtypes,
narrow arrays out (float16; bfloat16 / float8 as ml_dtypes arrays or bit patterns), narrow arrays in, memory
order kept, NaN bits independent of the position, checked on every 2^16 / 2^8 bit pattern against references
computed here with numpy (and against ml_dtypes where it is installed)."""
import numpy as np
import pytest

import pasa

try:
    import ml_dtypes
except ImportError:
    ml_dtypes = None

ALL16 = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
ALL8 = np.arange(256, dtype=np.uint8)


def fp8_values(bits, exp_bits, fn):
    """The values of 8-bit patterns from their fields (sign, exp_bits exponent bits, the rest fraction):
    IEEE specials, or fn (E4M3FN: no infinities, only S.1111.111 is NaN)."""
    man_bits = 7 - exp_bits
    bias = (1 << (exp_bits - 1)) - 1
    b = bits.astype(np.int64)
    s, e, m = b >> 7, (b >> man_bits) & ((1 << exp_bits) - 1), b & ((1 << man_bits) - 1)
    top = (1 << exp_bits) - 1
    v = np.where(e == 0, np.ldexp(m / (1 << man_bits), 1 - bias), np.ldexp(1 + m / (1 << man_bits), e - bias))
    if fn:
        v = np.where((e == top) & (m == (1 << man_bits) - 1), np.nan, v)
    else:
        v = np.where(e == top, np.where(m == 0, np.inf, np.nan), v)
    return np.where(s == 1, -v, v)


def bf16_values(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


REFERENCE = {  # format -> (all bit patterns, their values computed from the fields, the narrow dtype's name)
    "fp16": (ALL16, lambda: ALL16.view(np.float16).astype(np.float64), "float16"),
    "bf16": (ALL16, lambda: bf16_values(ALL16).astype(np.float64), "bfloat16"),
    "fp8_e4m3fn": (ALL8, lambda: fp8_values(ALL8, 4, True), "float8_e4m3fn"),
    "fp8_e5m2": (ALL8, lambda: fp8_values(ALL8, 5, False), "float8_e5m2"),
}


def round_dtype(name):
    """A narrow dtype= for round: the ml_dtypes name where ml_dtypes is installed, else the bit patterns,
    asked for as such (round refuses the name without ml_dtypes: test_round_types_do_not_depend_on_ml_dtypes)."""
    if name == "float16" or ml_dtypes is not None:
        return name
    return np.uint16 if name == "bfloat16" else np.uint8


def as_bits(a):
    """The bit patterns of a narrow array (float16, ml_dtypes, or already unsigned)."""
    return a.view(np.uint16 if a.itemsize == 2 else np.uint8)


def canonical_nan(fmt, negative):
    bits, _, _ = REFERENCE[fmt]
    nbits = 8 * bits.itemsize
    q = {"fp16": 0x7E00, "bf16": 0x7FC0, "fp8_e4m3fn": 0x7F, "fp8_e5m2": 0x7E}[fmt]
    return q | (1 << (nbits - 1) if negative else 0)


@pytest.mark.parametrize("fmt", sorted(REFERENCE))
@pytest.mark.parametrize("dtype_in", [np.float64, np.float32])
def test_every_pattern_round_trips(fmt, dtype_in):
    bits, values_of, narrow = REFERENCE[fmt]
    with np.errstate(invalid="ignore"):
        values = values_of().astype(dtype_in)
    nan = np.isnan(values)
    neg = np.signbit(values)
    # decode: the fields' values (NaN where they are NaN, with its sign)
    d = pasa.decode(bits, fmt)
    assert np.array_equal(np.isnan(d), nan)
    assert np.array_equal(d[~nan], values[~nan].astype(np.float64))
    assert np.array_equal(np.signbit(d), neg)
    # encode: the patterns back; NaN the canonical quiet NaN with its sign
    expect = bits.copy()
    expect[nan & ~neg] = canonical_nan(fmt, False)
    expect[nan & neg] = canonical_nan(fmt, True)
    for dtype in (None, narrow):
        e = pasa.encode(values, fmt, dtype=dtype)
        assert e.itemsize == bits.itemsize
        assert np.array_equal(as_bits(e), expect), (fmt, dtype)
    # round with a narrow dtype: every value is its own rounding, and comes out as the pattern
    r = pasa.round(values, fmt, dtype=round_dtype(narrow))
    assert np.array_equal(as_bits(r)[~nan], bits[~nan])
    # the NaNs stay NaN of the same sign
    rb = as_bits(r)[nan].astype(np.uint64)
    nbits = 8 * bits.itemsize
    assert np.array_equal(rb >> (nbits - 1) == 1, neg[nan])
    assert np.array_equal(pasa.decode(as_bits(r)[nan], fmt), np.full(nan.sum(), np.nan), equal_nan=True)


def test_narrow_dtypes_come_out():
    x = np.linspace(-3, 3, 12).reshape(3, 4)
    assert pasa.round(x, "fp16", dtype=np.float16).dtype == np.float16
    assert pasa.round(x, "float16", dtype="float16").dtype == np.float16
    assert pasa.encode(pasa.round(x, "fp16"), "fp16", dtype=np.float16).dtype == np.float16
    for name, width in [("bfloat16", 2), ("float8_e4m3fn", 1), ("float8_e5m2", 1)]:
        if ml_dtypes is None:  # the bit patterns only when asked for
            with pytest.raises(ValueError, match=f'^dtype: "{name}" arrays need ml_dtypes, which is not installed'):
                pasa.round(x, name, dtype=name)
            r = pasa.round(x, name, dtype=round_dtype(name))
            assert r.dtype == (np.uint16 if width == 2 else np.uint8)
        else:
            r = pasa.round(x, name, dtype=name)
            assert r.dtype == np.dtype(getattr(ml_dtypes, name))
        assert np.array_equal(as_bits(r), pasa.encode(pasa.round(x, name), name))
    # unsigned dtypes: the patterns, as encode() gives them
    assert np.array_equal(pasa.round(x, "fp8_e5m2", dtype=np.uint8), pasa.encode(pasa.round(x, "fp8_e5m2"), "fp8_e5m2"))
    # float32 from float64 input, when the format fits
    assert pasa.round(x, "bf16", dtype=np.float32).dtype == np.float32
    assert np.array_equal(pasa.round(x, "bf16", dtype=np.float32), pasa.round(x, "bf16"))


def test_round_to_float16_is_numpys_conversion(rng):
    # numpy converts float32 and float64 to float16 with one rounding to nearest even: the reference
    for dtype in (np.float32, np.float64):
        x = (rng.normal(0, 1, 200_000) * np.exp2(rng.integers(-30, 20, 200_000))).astype(dtype)
        with np.errstate(over="ignore"):
            ref = x.astype(np.float16)
        assert np.array_equal(pasa.round(x, "fp16", dtype=np.float16).view(np.uint16), ref.view(np.uint16))
    # and bf16 from float32: the integer carry of the 16 dropped bits (non-NaN), computed here
    with np.errstate(over="ignore"):
        x = np.ldexp(rng.normal(0, 1, 200_000).astype(np.float32), rng.integers(-140, 120, 200_000).astype(np.int32))
    assert x.dtype == np.float32
    u = x.view(np.uint32).astype(np.uint64)
    ref = ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)
    finite = np.isfinite(x)
    assert np.array_equal(as_bits(pasa.round(x, "bf16", dtype=round_dtype("bfloat16")))[finite], ref[finite])


def test_narrow_inputs_are_accepted(rng):
    h = rng.normal(0, 100, 1000).astype(np.float16)
    r = pasa.round(h, "fp8_e5m2")
    assert r.dtype == np.float32
    assert np.array_equal(r, pasa.round(h.astype(np.float32), "fp8_e5m2"))
    assert np.array_equal(pasa.round(h, "fp16", dtype=np.float16).view(np.uint16), h.view(np.uint16))
    assert np.array_equal(pasa.encode(h, "fp16"), h.view(np.uint16))
    assert np.array_equal(pasa.decode(h, "fp16"), h.astype(np.float64))  # a float16 array stands for its patterns


@pytest.mark.skipif(ml_dtypes is None, reason="ml_dtypes is not installed (optional)")
@pytest.mark.parametrize("name", ["bfloat16", "float8_e4m3fn", "float8_e5m2"])
def test_against_ml_dtypes(rng, name):
    dt = getattr(ml_dtypes, name)
    bits = ALL16 if np.dtype(dt).itemsize == 2 else ALL8
    narrow = bits.view(dt)
    ok = ~np.isnan(narrow.astype(np.float32))
    assert np.array_equal(pasa.encode(narrow, name)[ok], bits[ok])  # ml_dtypes arrays in
    assert np.array_equal(pasa.round(narrow, name, dtype=dt).view(bits.dtype)[ok], bits[ok])
    x = np.ldexp(rng.normal(0, 1, 100_000).astype(np.float32), rng.integers(-20, 10, 100_000).astype(np.int32))
    with np.errstate(over="ignore", invalid="ignore"):
        ref = x.astype(dt)
    mine = pasa.round(x, dt, dtype=dt)  # the format given as the ml_dtypes type too
    fin = np.isfinite(ref.astype(np.float32))
    assert np.array_equal(mine.view(bits.dtype)[fin], ref.view(bits.dtype)[fin])


@pytest.mark.parametrize("fmt", ["fp16", "bf16", "fp8_e4m3fn", "fp8_e5m2", "p=5,emax=7"])
@pytest.mark.parametrize("dtype_in", [np.float32, np.float64])
def test_nan_bits_do_not_depend_on_the_position(fmt, dtype_in):
    """A signalling NaN, a negative one and one with a long payload, at every position of arrays longer than
    a SIMD block: the same quiet NaN bits wherever they are, their sign kept."""
    n = 67
    if dtype_in == np.float32:
        nans = np.array([0x7F800001, 0xFF800001, 0x7FBFFFFF, 0x7FC00000], np.uint32).view(np.float32)
        quiet, sign = np.uint32(1 << 22), np.uint32(1 << 31)
    else:
        nans = np.array([0x7FF0000000000001, 0xFFF0000000000001, 0x7FF7FFFFFFFFFFFF], np.uint64).view(np.float64)
        quiet, sign = np.uint64(1 << 51), np.uint64(1 << 63)
    utype = np.uint32 if dtype_in == np.float32 else np.uint64
    for nan in nans:
        seen = set()
        for i in range(n):
            x = np.ones(n, dtype_in)
            x[i] = nan
            r = pasa.round(x, fmt)
            assert r.dtype == dtype_in
            b = r[i:i + 1].view(utype)[0]
            assert b & quiet, f"{fmt}: NaN {nan.view(utype):#x} at {i} comes out signalling: {b:#x}"
            assert (b & sign) == (nan.view(utype) & sign)
            assert np.all(r[np.arange(n) != i] == 1.0)
            seen.add(int(b))
        assert len(seen) == 1, f"{fmt}: NaN {nan.view(utype):#x} gives {sorted(map(hex, seen))} by position"


def test_memory_order_is_kept(rng):
    x = rng.normal(0, 10, (6, 5))
    f = np.asfortranarray(x)
    for kwargs in ({}, {"dtype": np.float16}, {"dtype": round_dtype("bfloat16")}, {"mode": "rz"}):
        fmt = "bf16" if kwargs.get("dtype") in ("bfloat16", np.uint16) else "fp16"
        c_result = pasa.round(x, fmt, **kwargs)
        f_result = pasa.round(f, fmt, **kwargs)
        assert f_result.flags.f_contiguous and not f_result.flags.c_contiguous
        assert c_result.flags.c_contiguous
        assert np.array_equal(as_bits(f_result) if f_result.itemsize <= 2 else f_result,
                              as_bits(c_result) if c_result.itemsize <= 2 else c_result)
    # stochastic rounding draws in C order, whatever the memory order
    assert np.array_equal(pasa.round(f, "fp8_e4m3fn", mode="sr", seed=5), pasa.round(x, "fp8_e4m3fn", mode="sr", seed=5))
    y = pasa.round(f, "fp16")
    e = pasa.encode(y, "fp16")
    assert e.flags.f_contiguous and np.array_equal(e, pasa.encode(np.ascontiguousarray(y), "fp16"))
    # the element an error names is counted in C order
    bad = np.ones((3, 4), order="F")
    bad[1, 2] = 1.1
    with pytest.raises(ValueError, match=r"^x: element 6: 1.1 is not a value of format fp16"):
        pasa.encode(bad, "fp16")
    # out= in Fortran order
    out = np.empty((6, 5), np.float16, order="F")
    assert pasa.round(x, "fp16", dtype=np.float16, out=out) is out
    assert np.array_equal(out, x.astype(np.float16))


def test_formats_by_the_names_users_type():
    for dtype_name, name in [("float16", "fp16"), ("bfloat16", "bf16"), ("float8_e4m3fn", "fp8_e4m3fn"),
                             ("float8_e5m2", "fp8_e5m2"), ("float32", "fp32"), ("float64", "fp64")]:
        assert pasa.format_info(dtype_name) == pasa.format_info(name)
    assert pasa.format_info(np.float16)["name"] == "fp16"
    assert pasa.format_info(np.dtype("float32"))["name"] == "fp32"
    x = np.linspace(-1, 1, 9)
    assert np.array_equal(pasa.round(x, np.float16), pasa.round(x, "fp16"))
    assert np.array_equal(pasa.round(x, format=np.float16), pasa.round(x, "fp16"))
    q = np.linspace(-2, 2, 64).reshape(1, 1, 8, 8)
    assert pasa.score_stats(q, q, q, score_format=np.float16) == pasa.score_stats(q, q, q, score_format="fp16")
    with pytest.raises(ValueError, match=r"^format: 3 is neither a format name nor a dtype$"):
        pasa.round(x, 3)
    with pytest.raises(ValueError, match=r'^format: unknown format "float17"'):
        pasa.round(x, "float17")


def test_dtype_errors():
    x = np.linspace(-1, 1, 5)
    with pytest.raises(ValueError, match=r"^dtype: float16 cannot hold every value of format bf16$"):
        pasa.round(x, "bf16", dtype=np.float16)
    with pytest.raises(ValueError, match=r"^dtype: uint8 cannot hold the 16-bit patterns of format fp16; give uint16$"):
        pasa.round(x, "fp16", dtype=np.uint8)
    with pytest.raises(ValueError, match=r"^dtype: int32 not accepted"):
        pasa.round(x, "fp16", dtype=np.int32)
    with pytest.raises(ValueError, match=r"^dtype: 'float17' is not a dtype$"):
        pasa.round(x, "fp16", dtype="float17")
    with pytest.raises(ValueError, match=r"^dtype: float32 does not hold the bit patterns of format fp16; give uint16 or float16$"):
        pasa.encode(x, "fp16", dtype=np.float32)
    with pytest.raises(ValueError, match=r"^x: dtype int64 not accepted"):
        pasa.round(np.arange(3), "fp16")


def test_metrics_rel_rmse_and_its_alias(rng):
    g = rng.normal(0, 1, (2, 8, 4))
    out = g + rng.normal(0, 1e-3, g.shape)
    m = pasa.metrics(out, g)
    ref = np.linalg.norm(out - g) / np.linalg.norm(g)  # PASA Eq. 19
    assert m["rel_rmse"] == pytest.approx(ref, rel=1e-12)
    assert m["rmse"] == m["rel_rmse"]
    assert list(m)[0] == "rel_rmse"


@pytest.mark.skipif(ml_dtypes is None, reason="ml_dtypes is not installed (optional)")
def test_attention_reads_ml_dtypes_arrays(rng):
    q = rng.normal(0, 1, (1, 2, 16, 8))
    b = [pasa.round(t, "bf16", dtype=ml_dtypes.bfloat16) for t in (q, q[:, :1], q[:, :1] * 2)]
    bits = [pasa.encode(pasa.round(t, "bf16"), "bf16") for t in (q, q[:, :1], q[:, :1] * 2)]
    out, _ = pasa.attention(*b, s1=8, s2=8)
    ref, _ = pasa.attention(*bits, format="bf16", s1=8, s2=8)
    assert np.array_equal(out, ref)
