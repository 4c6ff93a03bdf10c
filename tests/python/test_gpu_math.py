"""The GPU instruction models of numeric/gpu_math.hpp that the kernel recipes added for FlashAttention-3/4,
against what an H200 gave: MUFU.RCP (rcp.approx.ftz.f32, the probe's table of [1, 2) and its hand-picked
specials, results/hardware/kernels/mufu_tables.npz) and FlashAttention-4's software exp2 (its instruction
sequence run on every float32 input, digests in results/hardware/kernels/ex2_poly_digest.json). The expected
bits are the GPU's; `ctest -L long` (gpu_math_all_chunks) checks all 256 chunks."""
import hashlib
import json
import os

import numpy as np
import pytest

import pasa

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RES = os.path.join(ROOT, "results", "hardware", "kernels")
POLY = json.load(open(os.path.join(RES, "ex2_poly_digest.json")))
MUFU = np.load(os.path.join(RES, "mufu_tables.npz"))


def chunk_digest(function, chunk):
    bits = (np.arange(1 << 24, dtype=np.uint64) + np.uint64(chunk << 24)).astype(np.uint32)
    out = pasa.gpu_math(bits.view(np.float32), function)
    return hashlib.sha256(out.view("<u4").tobytes()).hexdigest()


# +0 and small positives, [0.5, 2), [2, 8) and [8, 32) (the kernel's arguments lie in [-127, 16]), −0 and
# negative subnormals / tiny normals (floor −1), [−2, −0.5), [−32, −2), [−128, −32) (the −127 clamp), −inf/NaN;
# 0x7f: huge positives, +inf (a canonical NaN from the FFMA) and NaNs.
@pytest.mark.parametrize("chunk", [0x00, 0x3f, 0x40, 0x41, 0x7f, 0x80, 0xbf, 0xc0, 0xc1, 0xc2, 0xff])
def test_ex2_poly3_reproduces_the_gpu(chunk):
    assert chunk_digest("ex2_poly3", chunk) == POLY["chunk_sha256"][chunk], f"chunk {chunk:#x} differs from the H200"


def test_ex2_poly3_structure():
    # 2^n exactly at integers (p(0) = 1), floor on the way down, the clamp at −127 giving +0 (exponent field 0).
    x = np.float32([0, 1, 3, -1, -2, -126, -127, -200, np.nan])
    assert pasa.gpu_math(x, "ex2_poly3").tolist() == [1, 2, 8, 0.5, 0.25, 2.0**-126, 0, 0, 0]
    # Within 2^-13 or so of 2^x (a degree-3 minimax fit): a software exp, not the hardware's.
    t = np.linspace(-20, 8, 10001, dtype=np.float32)
    rel = np.abs(pasa.gpu_math(t, "ex2_poly3") / np.exp2(t.astype(np.float64)) - 1)
    assert 1e-5 < rel.max() < 2e-4
    assert np.any(pasa.gpu_math(t, "ex2_poly3") != pasa.gpu_math(t, "ex2"))


def test_rcp_matches_the_measured_table():
    one_m = (np.uint32(0x3F800000) + np.arange(1 << 23, dtype=np.uint32)).view(np.float32)
    want = ((np.float32(1) / one_m).view(np.uint32).astype(np.int64) + MUFU["rcp_r_minus_rn"]).astype(np.uint32)
    assert np.array_equal(pasa.gpu_math(one_m, "rcp").view(np.uint32), want)
    # Other binades scale by the exponent (the probe's model, 0 mismatches over 2^32 on the GPU).
    for e in (-126, -20, 5, 100, 125, 126, 127):
        x = (one_m[::997] * np.float32(2.0**e)).astype(np.float32)
        got = pasa.gpu_math(x, "rcp").view(np.uint32)
        ref = (want[::997].view(np.float32) * np.float32(2.0**-e)).astype(np.float32)
        ref = np.where(np.abs(ref) < np.float32(2.0**-126), np.float32(0), ref).view(np.uint32)
        assert np.array_equal(got, ref), f"binade 2^{e}"


def test_rcp_specials():
    got = pasa.gpu_math(MUFU["special_in"].view(np.float32), "rcp").view(np.uint32)
    assert np.array_equal(got, MUFU["special_rcp"])


def test_every_chunk():
    if os.environ.get("PASA_GPU_MATH_ALL") != "1":
        pytest.skip("all 256 chunks: PASA_GPU_MATH_ALL=1 (ctest -L long runs it)")
    bad = [c for c in range(256) if chunk_digest("ex2_poly3", c) != POLY["chunk_sha256"][c]]
    assert not bad, f"chunks differing from the H200: {bad}"
