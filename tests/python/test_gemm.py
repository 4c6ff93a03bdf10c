"""pasa.gemm and pasa-gemm: the same bits from Python and the program; the fp64 ordered model on
integers is numpy's exact product; pasa-hwcompare gemm on 2-D arrays chooses the GEMM model by input format as
the _h100 presets do (fp8 inputs: the FP8 tensor-core model), and its max_ulp counts through zero across a
sign change."""
import numpy as np
import pytest

import pasa
from conftest import app_error, assert_same_bits, run_app


def fp8_operands(rng, m=24, k=256, n=20):
    a = pasa.round(rng.normal(0, 4, (m, k)), "fp8_e4m3fn")
    b = pasa.round(rng.normal(0, 4, (k, n)), "fp8_e4m3fn")
    return a, b


@pytest.mark.parametrize("model,acc,out,fmt", [
    ("ordered", "fp16", "fp32", "fp16"),
    ("chunked", "fp32", "bf16", "bf16"),
    ("h100", "fp32", "fp32", "fp16"),
    ('{"model": "tensor_core", "tensor_core": "h100_fp16", "align_bits": 10}', "fp32", "fp16", "fp16"),
])
def test_same_bits_as_pasa_gemm(tmp_path, rng, model, acc, out, fmt):
    a = pasa.round(rng.normal(0, 3, (3, 17, 70)), fmt)
    b = pasa.round(rng.normal(0, 3, (3, 70, 9)), fmt)
    np.save(tmp_path / "a.npy", a)
    np.save(tmp_path / "b.npy", b)
    run_app("pasa-gemm", "--a", tmp_path / "a.npy", "--b", tmp_path / "b.npy", "--out", tmp_path / "c.npy",
            "--a-format", fmt, "--acc", acc, "--out-format", out, "--model", model)
    c = pasa.gemm(a, b, a_format=fmt, acc=acc, out=out, model=model)
    assert c.shape == (3, 17, 9) and c.dtype == np.float64
    assert_same_bits(c, np.load(tmp_path / "c.npy"))
    assert_same_bits(pasa.gemm(a[1], b[1], a_format=fmt, acc=acc, out=out, model=model), c[1])  # 2-D
    assert_same_bits(pasa.round(c, out), c)  # values of the output format


def test_fp64_ordered_on_integers_is_the_exact_product(rng):
    a = rng.integers(-1000, 1000, (7, 33)).astype(np.float64)
    b = rng.integers(-1000, 1000, (33, 5)).astype(np.float64)
    assert_same_bits(pasa.gemm(a, b, acc="fp64", out="fp64"), a @ b)
    # ... and a narrow accumulator differs from it (the model is applied)
    assert not np.array_equal(pasa.gemm(a, b, acc="fp16", out="fp64"), a @ b)


def test_hwcompare_picks_the_model_by_input_format(tmp_path, rng):
    a, b = fp8_operands(rng)
    c_fp8 = pasa.gemm(a, b, a_format="fp8_e4m3fn", model="h100")   # the FP8 tensor-core model
    c_fp16 = pasa.gemm(a, b, a_format="fp8_e4m3fn", model="h100_fp16")
    assert not np.array_equal(c_fp8, c_fp16)  # the two models differ on these inputs
    np.save(tmp_path / "a.npy", pasa.encode(a, "fp8_e4m3fn"))
    np.save(tmp_path / "bt.npy", pasa.encode(np.ascontiguousarray(b.T), "fp8_e4m3fn"))  # 2-D (N, K)
    np.save(tmp_path / "c.npy", c_fp8.astype(np.float32))                              # 2-D (M, N)
    args = ["gemm", "--a", tmp_path / "a.npy", "--b", tmp_path / "bt.npy", "--c", tmp_path / "c.npy",
            "--a-format", "fp8_e4m3fn", "--out-format", "fp32"]
    row = run_app("pasa-hwcompare", *args).stdout.strip().split(",")
    assert row[0] == row[1] == str(c_fp8.size)  # the default (h100) model: every output identical
    row16 = run_app("pasa-hwcompare", *args, "--gemm", "h100_fp16").stdout.strip().split(",")
    assert int(row16[1]) < c_fp8.size


def test_hwcompare_max_ulp_across_a_sign_change(tmp_path, rng):
    a, b = fp8_operands(rng, 4, 32, 3)
    c = pasa.gemm(a, b, a_format="fp8_e4m3fn", model="h100").astype(np.float32)
    i = np.flatnonzero(c)[0]
    flipped = c.copy().reshape(-1)
    flipped[i] = -flipped[i]
    np.save(tmp_path / "a.npy", pasa.encode(a, "fp8_e4m3fn"))
    np.save(tmp_path / "bt.npy", pasa.encode(np.ascontiguousarray(b.T), "fp8_e4m3fn"))
    np.save(tmp_path / "c.npy", flipped.reshape(c.shape))
    row = run_app("pasa-hwcompare", "gemm", "--a", tmp_path / "a.npy", "--b", tmp_path / "bt.npy", "--c",
                  tmp_path / "c.npy", "--a-format", "fp8_e4m3fn", "--out-format", "fp32").stdout.strip().split(",")
    ordinal = int(np.abs(c.reshape(-1)[i:i + 1]).view(np.uint32)[0])  # values between 0 and |x|
    assert int(row[-1]) == 2 * ordinal and int(row[4]) == 1


def test_gemm_errors(tmp_path, rng):
    a = rng.normal(size=(4, 5))
    with pytest.raises(ValueError, match=r"a, b: shapes 1 x 4 x 5 and 1 x 4 x 5 are not"):
        pasa.gemm(a, a)
    with pytest.raises(ValueError, match='model: unknown GEMM model "fast"'):
        pasa.gemm(a, a.T, model="fast")
    with pytest.raises(ValueError, match="no H100 tensor-core model for fp64"):
        pasa.gemm(a, a.T, model="h100")
    np.save(tmp_path / "a.npy", a)
    msg = app_error("pasa-gemm", "--a", tmp_path / "a.npy", "--b", tmp_path / "a.npy", "--out", tmp_path / "c.npy")
    assert "a.npy" in msg and "not A (batch, M, K) and B (batch, K, N)" in msg
    assert not (tmp_path / "c.npy").exists()
