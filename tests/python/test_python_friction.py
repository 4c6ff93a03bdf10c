"""Friction items of the Python module, each fixed and held here: a wrong keyword answered in one
line naming it (no arrays printed); round's result type the same whatever is installed (bit patterns only
when asked for); decode of a narrow float array never reinterprets its bits as another format's; a format
given as a dtype is the result's dtype."""
import numpy as np
import pytest

import pasa

try:
    import ml_dtypes
except ImportError:
    ml_dtypes = None

BIG = np.full((64, 64), 0.123456789)  # printed by pybind11's message, it would be thousands of characters


@pytest.mark.parametrize("function, args, keyword, hint", [
    ("attention", (BIG, BIG, BIG), "is_causal", "causal="),
    ("attention", (BIG, BIG, BIG), "attn_mask", "mask= (boolean, True = attend) or pse= (added to the scores)"),
    ("golden", (BIG, BIG, BIG), "softmax_scale", "scale="),
    ("golden", (BIG, BIG, BIG), "casual", "causal="),
    ("round", (BIG, "fp16"), "rounding", None),
])
def test_wrong_keyword_is_one_line_naming_it(function, args, keyword, hint):
    with pytest.raises(TypeError) as e:
        getattr(pasa, function)(*args, **{keyword: True})
    text = str(e.value)
    assert "\n" not in text and len(text) < 400, text
    assert text.startswith(f"pasa.{function}(): unknown keyword argument '{keyword}'"), text
    assert "0.1234" not in text  # no array printed
    if hint:
        assert f"; did you mean {hint}? (arguments: " in text, text


def test_wrong_type_is_one_line_without_values():
    with pytest.raises(TypeError) as e:
        pasa.attention(BIG, BIG, BIG, causal=[1, 2])
    text = str(e.value)
    assert "\n" not in text and "0.1234" not in text and text.startswith("pasa.attention(): "), text
    assert "causal=list" in text, text
    with pytest.raises(TypeError, match=r"^pasa.attention\(\): missing a required argument: 'v'$"):
        pasa.attention(BIG, BIG)


def test_round_types_do_not_depend_on_ml_dtypes():
    x = np.linspace(-2, 2, 9)
    for name in ("bfloat16", "float8_e4m3fn", "float8_e5m2"):
        if ml_dtypes is None:
            with pytest.raises(ValueError, match=f'^dtype: "{name}" arrays need ml_dtypes, which is not installed; '
                                                 'give dtype="float32" for its values, or numpy.uint'):
                pasa.round(x, name, dtype=name)
        else:
            assert pasa.round(x, name, dtype=name).dtype == np.dtype(getattr(ml_dtypes, name))
        # patterns when asked for: an unsigned dtype (or encode, whose result they are)
        bits = pasa.round(x, name, dtype=np.uint16 if name == "bfloat16" else np.uint8)
        assert bits.dtype.kind == "u" and np.array_equal(bits, pasa.encode(pasa.round(x, name), name))
        assert pasa.round(x, name).dtype == np.float64  # no dtype: floats, as always


def test_decode_does_not_reinterpret_narrow_arrays():
    h = np.array([1.5, -0.25, 65504.0], np.float16)
    assert np.array_equal(pasa.decode(h, "fp16"), h.astype(np.float64))  # a float16 array: its own values
    assert np.array_equal(pasa.decode(h, "float16"), h.astype(np.float64))
    with pytest.raises(ValueError, match=r'^bits: a float16 array holds values of fp16, not bit patterns of bf16; '
                                         r'give format="fp16", or the patterns as unsigned integers'):
        pasa.decode(h, "bf16")  # (read as bf16 patterns, 1.5 would be 0.125)
    assert pasa.decode(h.view(np.uint16), "bf16")[0] == 0.125  # the patterns, asked for as such


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64, np.dtype("float16")])
def test_format_as_dtype_is_the_result_dtype(dtype):
    x = np.linspace(-3, 3, 13)
    r = pasa.round(x, dtype)
    assert r.dtype == np.dtype(dtype)
    assert np.array_equal(r, x.astype(dtype))  # numpy's own conversion, nearest even
    assert pasa.round(x, dtype, dtype=np.float64).dtype == np.float64  # dtype= still decides
    assert pasa.round(x, "fp16").dtype == np.float64  # a name: the wide default, as before
