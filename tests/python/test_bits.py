"""pasa.encode / pasa.decode: every fp16 bit pattern against numpy's float16, the fp8 patterns pasa-round
--bits-output writes, dtypes by storage width, and errors naming the element."""
import numpy as np
import pytest

import pasa
from conftest import assert_same_bits, run_app


def test_fp16_round_trips_with_numpy_float16():
    bits = np.arange(1 << 16, dtype=np.uint32).astype(np.uint16)
    values = pasa.decode(bits, "fp16")
    assert values.dtype == np.float64
    assert_same_bits(values, bits.view(np.float16).astype(np.float64))
    finite = ~np.isnan(values)
    assert np.array_equal(pasa.encode(values[finite], "fp16"), bits[finite])
    assert pasa.encode(values, "fp16").dtype == np.uint16
    # float16 arrays are taken as they are
    h = bits.view(np.float16)[finite]
    assert np.array_equal(pasa.encode(h, "fp16"), h.view(np.uint16))
    # NaN encodes as the canonical quiet NaN
    assert pasa.encode(np.array([np.nan]), "fp16")[0] == 0x7E00


@pytest.mark.parametrize("fmt", ["fp8_e4m3fn", "fp8_e5m2", "bf16", "p=5,emax=7,subnormals=0"])
def test_bits_as_pasa_round_writes_them(tmp_path, rng, fmt):
    x = rng.normal(0, 4, 3000) * np.exp2(rng.integers(-12, 12, 3000))
    np.save(tmp_path / "x.npy", x)
    run_app("pasa-round", "-i", tmp_path / "x.npy", "-f", fmt, "--bits-output", tmp_path / "b.npy",
            "-o", tmp_path / "y.npy")
    cli_bits = np.load(tmp_path / "b.npy")
    y = pasa.round(x, fmt)
    b = pasa.encode(y, fmt)
    assert b.dtype == cli_bits.dtype and np.array_equal(b, cli_bits)
    assert_same_bits(pasa.decode(b, fmt), np.load(tmp_path / "y.npy"))
    # every pattern of an 8-bit format decodes and encodes back (NaNs aside)
    if pasa.format_info(fmt)["storage_bits"] == 8:
        allb = np.arange(256, dtype=np.uint8)
        v = pasa.decode(allb, fmt)
        ok = ~np.isnan(v)
        assert np.array_equal(pasa.encode(v[ok], fmt), allb[ok])


def test_widths_shapes_and_empty():
    assert pasa.encode([1.0], "fp32").dtype == np.uint32 and pasa.encode([1.0], "fp32")[0] == 0x3F800000
    assert pasa.encode([1.0], "tf32").dtype == np.uint32  # 19 storage bits
    assert pasa.encode([1.0], "tf32")[0] == 127 << 10  # exponent field 127 above 10 fraction bits
    assert pasa.encode([1.0], "fp64").dtype == np.uint64 and pasa.encode([1.0], "fp64")[0] == 0x3FF0000000000000
    assert pasa.decode(0x3C00, "fp16") == 1.0
    x = pasa.round(np.linspace(-3, 3, 24).reshape(2, 3, 4)[:, ::2], "fp8_e5m2")
    b = pasa.encode(x, "fp8_e5m2")
    assert b.shape == (2, 2, 4) and b.dtype == np.uint8
    assert_same_bits(pasa.decode(b[:, ::-1], "fp8_e5m2"), x[:, ::-1])
    assert pasa.encode(np.zeros((0, 3)), "fp16").shape == (0, 3)
    assert pasa.decode(np.zeros((4, 0), np.uint8), "fp8_e4m3fn").shape == (4, 0)


def test_errors_name_the_element():
    with pytest.raises(ValueError, match=r"^x: element 1: 1.1 is not a value of format fp16 \(round it first\)$"):
        pasa.encode([1.0, 1.1], "fp16")
    with pytest.raises(ValueError, match=r"^bits: element 2: bit pattern 0x100 is wider than format fp8_e5m2 \(8 bits\)$"):
        pasa.decode(np.array([1, 2, 256], np.uint16), "fp8_e5m2")
    with pytest.raises(ValueError, match=r"^bits: dtype int8 not accepted"):
        pasa.decode(np.array([1], np.int8), "fp8_e5m2")
    with pytest.raises(ValueError, match=r"^x: dtype int64 not accepted"):
        pasa.encode(np.array([1]), "fp16")
    with pytest.raises(ValueError, match=r'^format: unknown format "fp9"'):
        pasa.decode([1], "fp9")
