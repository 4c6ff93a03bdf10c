"""pasa.round: the same bits as pasa-round (every mode, overflow policy and flush flag; float32 and float64
arrays), numpy's own float16 conversion and an integer bf16 rounding as independent references, any shape,
strided and 0-size arrays, the output dtype, out=, and errors with the programs' messages."""
import numpy as np
import pytest

import pasa
from conftest import app_error, assert_same_bits, run_app

FORMATS = ["fp16", "bf16", "fp8_e4m3fn", "fp8_e5m2", "tf32", "p=5,emax=7,subnormals=0"]
MODES = ["rne", "rna", "rz", "ru", "rd", "ro", "sr"]


def spread_f64(rng, n, fmt):
    """Values around the whole range of fmt: random significands and exponents from below its smallest
    subnormal to above its largest finite value, exact ties, zeros, infinities and NaN."""
    info = pasa.format_info(fmt)
    lo, hi = np.log2(info["min_subnormal"]) - 3, np.log2(info["max_finite"]) + 3
    x = (1 + rng.random(n)) * np.exp2(rng.integers(int(lo), int(hi), n).astype(np.float64))
    x[: n // 8] = np.round(x[: n // 8] / info["min_subnormal"] * 2) / 2 * info["min_subnormal"]  # ties
    x *= rng.choice([-1.0, 1.0], n)
    x[:6] = [0.0, -0.0, np.inf, -np.inf, np.nan, info["max_finite"] * (1 + 2 * info["unit_roundoff"])]
    return x


def spread_f32(rng, n):
    """Every kind of float32: random bit patterns (normals, subnormals, infinities, NaN)."""
    return rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32).view(np.float32)


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("dtype", ["float32", "float64"])
def test_same_bits_as_pasa_round(tmp_path, rng, fmt, dtype):
    x = spread_f32(rng, 4000) if dtype == "float32" else spread_f64(rng, 4000, fmt)
    np.save(tmp_path / "x.npy", x)
    for mode in MODES:
        for overflow in ["ieee", "saturate"]:
            run_app("pasa-round", "-i", tmp_path / "x.npy", "-o", tmp_path / "y.npy", "-f", fmt, "-m", mode,
                    "--overflow", overflow, "--seed", 7)
            y = pasa.round(x, fmt, mode=mode, overflow=overflow, seed=7)
            assert y.dtype == x.dtype and y.shape == x.shape
            assert_same_bits(y, np.load(tmp_path / "y.npy"))
    for flags in (["--flush-input"], ["--flush-output"]):
        run_app("pasa-round", "-i", tmp_path / "x.npy", "-o", tmp_path / "y.npy", "-f", fmt, *flags)
        y = pasa.round(x, fmt, flush_input=flags[0] == "--flush-input", flush_output=flags[0] == "--flush-output")
        assert_same_bits(y, np.load(tmp_path / "y.npy"))


def test_fp16_matches_numpy_float16(rng):
    """numpy's float16 conversion (round to nearest even from the float's own bits) as the reference."""
    x32 = spread_f32(rng, 1 << 16)
    x64 = spread_f64(rng, 1 << 16, "fp16")
    with np.errstate(over="ignore", invalid="ignore"):  # numpy warns where fp16 overflows to inf
        assert_same_bits(pasa.round(x32, "fp16"), x32.astype(np.float16))
        assert_same_bits(pasa.round(x64, "fp16"), x64.astype(np.float16))
    # and the results are float16 values: the conversion back is exact
    y = pasa.round(x32, "fp16")
    assert_same_bits(y.astype(np.float16), y)


def test_bf16_matches_integer_rounding(rng):
    """bf16 from float32 by integer arithmetic on the bits: add 0x7FFF plus the kept lowest bit, truncate."""
    x = spread_f32(rng, 1 << 16)
    x = x[~np.isnan(x)]
    u = x.view(np.uint32).astype(np.uint64)
    ref = (((u + 0x7FFF + ((u >> 16) & 1)) >> 16) << 16).astype(np.uint32).view(np.float32)
    assert_same_bits(pasa.round(x, "bf16"), ref)


def test_bf16_ties_away_matches_integer_rounding(rng):
    """mode "rna" to bf16 by integer arithmetic: add 0x8000 (half of bf16's last place) to the magnitude's bits,
    truncate; float32 ties (low half exactly 0x8000) and their negatives included, and every float32 overflow."""
    x = spread_f32(rng, 1 << 16)
    ties = (rng.integers(0, 2**16, 4096, dtype=np.uint64).astype(np.uint32) << 16) | 0x8000
    x = np.concatenate([x, ties.view(np.float32)])
    x = x[~np.isnan(x)]
    u = x.view(np.uint32).astype(np.uint64)
    ref = (((u + 0x8000) >> 16) << 16).astype(np.uint32).view(np.float32)
    assert_same_bits(pasa.round(x, "bf16", mode="rna"), ref)
    assert not np.array_equal(pasa.round(ties.view(np.float32), "bf16", mode="rne").view(np.uint32),
                              pasa.round(ties.view(np.float32), "bf16", mode="rna").view(np.uint32))


def test_shapes_strides_and_empty(rng):
    x = spread_f64(rng, 24 * 35, "bf16").reshape(24, 35)
    whole = pasa.round(x, "bf16", mode="sr", seed=3)
    for view in (x[::2, 1::3], x.T, x[::-1], x[:, 5]):
        before = view.copy()
        # stochastic rounding draws in C order of the view: compare with its contiguous copy
        assert_same_bits(pasa.round(view, "bf16", mode="sr", seed=3), pasa.round(np.ascontiguousarray(view), "bf16", mode="sr", seed=3))
        assert_same_bits(view, before)  # the input is not touched
    assert_same_bits(pasa.round(x.reshape(2, 12, 35), "bf16", mode="sr", seed=3).reshape(24, 35), whole)
    assert_same_bits(pasa.round(x.astype(">f8"), "bf16", mode="sr", seed=3), whole)  # big-endian input
    for shape in [(0,), (3, 0), (0, 4, 2)]:
        for dt in (np.float32, np.float64):
            y = pasa.round(np.zeros(shape, dt), "fp8_e4m3fn")
            assert y.shape == shape and y.dtype == dt
    assert pasa.round(np.array(0.1), "fp16").shape == ()
    assert isinstance(pasa.round(np.float64(0.1), "fp16"), float)


def test_output_dtype_and_out(rng):
    x = spread_f32(rng, 1000)
    y = pasa.round(x, "fp64")  # fp64 values are not all float32: float64 result, the input's values
    assert y.dtype == np.float64
    with np.errstate(invalid="ignore"):
        assert_same_bits(y, x.astype(np.float64))
    assert pasa.round(x, "p=30,emax=127").dtype == np.float64
    assert pasa.round(x, "fp32").dtype == np.float32
    assert pasa.round(1.1, "fp16") == 1.099609375 and isinstance(pasa.round(1.1, "fp16"), float)
    assert_same_bits(pasa.round([1.1, -2.2], "bf16"), [1.1015625, -2.203125])
    out = np.empty_like(x)
    assert pasa.round(x, "fp16", out=out) is out
    assert_same_bits(out, pasa.round(x, "fp16"))
    inplace = x.copy()
    pasa.round(inplace, "fp16", out=inplace)
    assert_same_bits(inplace, out)


def test_errors_carry_the_programs_messages(tmp_path):
    x = np.ones(3, np.float32)
    with pytest.raises(ValueError) as e:
        pasa.round(x, "fp17")
    # pasa-round checks the name while parsing its options (exit code 2, as every error the user can fix), with the library's message
    cli = run_app("pasa-round", "1", "-f", "fp17", expect_rc=2).stderr.splitlines()[0]
    assert "--" + str(e.value) == cli
    with pytest.raises(ValueError, match=r'^mode: unknown rounding mode "up"; known modes: rne'):
        pasa.round(x, "fp16", mode="up")
    with pytest.raises(ValueError, match=r'^overflow: unknown overflow policy'):
        pasa.round(x, "fp16", overflow="clamp")
    # (float16 and ml_dtypes arrays are accepted: tests/python/test_dtypes.py)
    with pytest.raises(ValueError, match=r"^x: dtype int64 not accepted; give float16, float32, float64"):
        pasa.round(np.arange(3), "fp16")
    with pytest.raises(ValueError, match=r"^out: expected a writeable float32 array of shape \(3,\)"):
        pasa.round(x, "fp16", out=np.empty(3))
