"""SageAttention's recipes against the GPU: SA1 (sageattn_qk_int8_pv_fp16_triton of thu-ml/SageAttention d1a57a5)
run by Triton on an H200 and SA2 (sageattn_qk_int8_pv_fp8_cuda_sm90, per_thread, fp32+fp32: the compiled CUDA
kernel) on the same H200 (results/hardware/sage/, experiments/gpu/kernels/sage_capture.py), and pasa's
sage1_triton and sage2_sm90 on the same inputs, regenerated here from the manifest's seeds (sha256-checked); the
probes that pinned their steps (Triton's float32 division, the fp16-accumulated tensor-core tile, SA2's INT8 Q/K
and FP8 V elements and scales). The expected bits are the GPU's."""
import json
import os
import sys

import numpy as np
import pytest

import pasa

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RES = os.path.join(ROOT, "results", "hardware", "sage")
sys.path.insert(0, os.path.join(ROOT, "experiments", "gpu", "kernels"))
from kernel_inputs import make_inputs, sha256_hex  # noqa: E402

MANIFEST = json.load(open(os.path.join(RES, "sage_manifest.json")))
CASES = [c for c in MANIFEST["cases"] if c.get("committed")]
with np.load(os.path.join(RES, "sage1_captures.npz")) as _z:
    CAP = {k: _z[k] for k in _z.files}
CASES2 = [c for c in MANIFEST["cases"] if c.get("committed_sa2")]
with np.load(os.path.join(RES, "sage2_captures.npz")) as _z:
    CAP2 = {k: _z[k] for k in _z.files}


def inputs(case):
    q, k, v = make_inputs(case)
    for t, x in zip("qkv", (q, k, v)):
        assert sha256_hex(x) == case["sha256"][t], f"{case['name']}: regenerated {t} is not the captured input"
    return q.reshape(case["shape_q"]), k.reshape(case["shape_kv"]), v.reshape(case["shape_kv"])


def run(case, kernel="sage1_triton", threads=2):
    q, k, v = inputs(case)
    out, lse = pasa.attention(q, k, v, format=case["dtype"], kernel=kernel, causal=bool(case["causal"]),
                              threads=threads)
    return pasa.encode(out, case["dtype"]).astype(np.uint16), lse


def test_triton_division_is_x_times_mufu_rcp():
    x, y, gpu = CAP["elem__x"], CAP["elem__y"], CAP["elem__div"]
    rcp = pasa.gpu_math(y, "rcp").astype(np.float32)
    assert np.array_equal((x * rcp).astype(np.float32).view(np.uint32), gpu.view(np.uint32))
    ieee = (x.astype(np.float64) / y.astype(np.float64)).astype(np.float32)
    assert np.mean(ieee.view(np.uint32) != gpu.view(np.uint32)) > 0.1  # (not the IEEE quotient)


def test_fp16_accumulated_tile():
    keys = sorted({k.rsplit("__", 1)[0] for k in CAP if k.startswith("dot16_")})
    assert len(keys) == 8
    for key in keys:
        p = CAP[f"{key}__p"].view(np.float16).astype(np.float64)
        v = CAP[f"{key}__v"].view(np.float16).astype(np.float64)
        got = pasa.gemm(p, v, a_format="fp16", b_format="fp16", acc="fp16", out="fp16", model="h100_fp16_f16acc")
        assert np.array_equal(pasa.encode(got, "fp16").astype(np.uint16), CAP[f"{key}__o16"]), key
    # (an fp32 accumulator rounded once to fp16 is another result on the large-V tiles)
    key = [k for k in keys if "u100" in k][0]
    p = CAP[f"{key}__p"].view(np.float16).astype(np.float64)
    v = CAP[f"{key}__v"].view(np.float16).astype(np.float64)
    f32 = pasa.gemm(p, v, a_format="fp16", b_format="fp16", acc="fp32", out="fp16", model="h100_fp16")
    assert not np.array_equal(pasa.encode(f32, "fp16").astype(np.uint16), CAP[f"{key}__o16"])


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_sage1_triton_bits(case):
    bits, lse = run(case)
    gpu = CAP[f"{case['name']}__sa1__out"].reshape(case["shape_q"])
    assert np.array_equal(bits, gpu), f"{np.mean(bits == gpu) * 100:.4f} % of output bits identical"
    # the LSE: 99.5 % of its bits over these cases (the wrapper's q·km correction in fp16 and log2f's last bit
    # are not pinned): within 2 ulp of fp32, or of the fp16 correction's rounding times the scale
    g = CAP[f"{case['name']}__sa1__lse"].reshape(lse.shape)
    assert np.mean(lse.astype(np.float32).view(np.uint32) == g.view(np.uint32)) >= 0.8
    assert np.all(np.abs(lse - g) <= 2 ** -10 * np.maximum(1.0, np.abs(g)))


def test_sage1_schedule_fields_move_bits():
    # the measured contraction of acc·alpha + dot, and tl.sum's order: each, undone, moves bits
    case = next(c for c in CASES if c["name"] == "uniform_fp16_full_d64_gqa")  # (six 64-key blocks)
    gpu = CAP[f"{case['name']}__sa1__out"].reshape(case["shape_q"])
    for override in ({"pv_rescale_fma": False}, {"row_sum": "sequential"}):
        bits, _ = run(case, {"recipe": "sage1_triton", **override})
        assert not np.array_equal(bits, gpu), override


@pytest.mark.parametrize("case", CASES2, ids=[c["name"] for c in CASES2])
def test_sage2_sm90_bits(case):
    bits, lse = run(case, "sage2_sm90")
    gpu = CAP2[f"{case['name']}__sa2__out"].reshape(case["shape_q"])
    assert np.array_equal(bits, gpu), f"{np.mean(bits == gpu) * 100:.4f} % of output bits identical"
    # the LSE: every bit in 112 of the 128 captured cases, at least 99.6 % in each; the rest is the wrapper's
    # lse_correction q·km (core.py :962), a cuBLAS fp16 matmul whose fp32 accumulation order lands on the other
    # side of an fp16 midpoint: within half an fp16 ulp of the correction times the scale
    g = CAP2[f"{case['name']}__sa2__lse"].reshape(lse.shape)
    assert np.mean(lse.astype(np.float32).view(np.uint32) == g.view(np.uint32)) >= 0.995
    assert np.all(np.abs(lse - g) <= 2 ** -10 * np.maximum(1.0, np.abs(g)))


def smoothed_k(case, k):
    """core.py :949 km = k.mean(seq) in the input dtype, quant_per_thread.py :159 k - km (fp32, rounded to it)."""
    kf = pasa.decode(k, case["dtype"])
    km = pasa.round(kf.mean(axis=2, keepdims=True), case["dtype"])
    return pasa.round((kf.astype(np.float32) - km.astype(np.float32)).astype(np.float64), case["dtype"])


def padded(x, rows):  # (the kernel's 64-row Q blocks and 128-key K blocks: their scale arrays' layout)
    pad = -(-x.shape[2] // rows) * rows - x.shape[2]
    return np.concatenate([x, np.zeros(x.shape[:2] + (pad, x.shape[3]))], axis=2)


@pytest.mark.parametrize("case", CASES2, ids=[c["name"] for c in CASES2])
def test_sage2_quantisation(case):
    # per_thread_int8_triton (BLKQ 64, WARPQ 16, BLKK = WARPK 128) and per_channel_fp8(smooth_v=False) as the GPU
    # ran them: every scale of every committed case, the elements where committed
    q, k, v = inputs(case)
    name = case["name"]
    for x, part, rows in ((pasa.decode(q, case["dtype"]), "q", 64), (smoothed_k(case, k), "k", 128)):
        r = pasa.block_quantise(padded(x, rows), "int8_per_thread_sm90", operand="a" if part == "q" else "b")
        assert np.array_equal(r["scales"].astype(np.float32), CAP2[f"{name}__sa2__{part}s"]), part
        if f"{name}__sa2__{part}i" in CAP2:
            assert np.array_equal(r["elements"][:, :, :x.shape[2]], CAP2[f"{name}__sa2__{part}i"]), part
    rv = pasa.block_quantise(pasa.decode(v, case["dtype"]), "fp8_per_channel", operand="b")
    assert np.array_equal(rv["scales"].astype(np.float32), CAP2[f"{name}__sa2__vs"])
    if f"{name}__sa2__v8" in CAP2:
        v8 = CAP2[f"{name}__sa2__v8"]  # Vᵀ, each 16 keys permuted (quant.py :233), padded to 64
        perm = np.array([0, 1, 8, 9, 2, 3, 10, 11, 4, 5, 12, 13, 6, 7, 14, 15])
        pos = (np.arange(v8.shape[-1]) // 16) * 16 + perm[np.arange(v8.shape[-1]) % 16]
        keys = np.empty_like(v8)
        keys[..., pos] = v8
        mine = pasa.encode(rv["elements"], "fp8_e4m3fn").astype(np.uint8)
        assert np.array_equal(mine, keys[..., :v.shape[2]].transpose(0, 1, 3, 2))


def test_sage2_committed_elements():
    assert sum(f"{c['name']}__sa2__qi" in CAP2 for c in CASES2) == 4 and len(CASES2) == 88


def test_sage2_scale_is_one_ffma():
    # tl.max(|x|) / 127. + 1e-7 (quant_per_thread.py :41) is one FFMA of amax and MUFU.RCP(127) on the GPU; the
    # two-rounding form (IEEE division, then the add) misses a third of the captured Q scales
    case = next(c for c in CASES2 if c["name"] == "uniform_fp16_full_d64_sq128")
    q = padded(pasa.decode(inputs(case)[0], "fp16"), 64)
    gpu = CAP2["uniform_fp16_full_d64_sq128__sa2__qs"]
    ieee = pasa.block_quantise(q, {"scheme": "int8_per_thread_sm90", "divide": "ieee"})["scales"].astype(np.float32)
    assert np.mean(ieee == gpu) < 0.9
    amax = np.abs(q.reshape(1, 2, 8, 2, 8, 64)).max(axis=(3, 5)).reshape(1, 2, 64)
    r127 = float(pasa.gpu_math(np.array([127.0]), "rcp")[0])
    ffma = pasa.round(amax.astype(np.float32).astype(np.float64) * r127 + float(np.float32(1e-7)), "fp32")
    assert np.array_equal(ffma.astype(np.float32), gpu)


def test_sage2_schedule_fields_move_bits():
    # the contractions measured on the H200, each undone, move output bits: RO·o_scale + RO_temp and d·o_scale
    # + the first tile's sum (nvcc's FFMAs); and the LSE moves with the d one
    for name, override in (("uniform_fp16_full_d64_gqa", {"pv_rescale_fma": False}),
                           ("uniform_fp16_full_d128_odd", {"sum_rescale_fma": False})):
        case = next(c for c in CASES2 if c["name"] == name)
        gpu = CAP2[f"{name}__sa2__out"].reshape(case["shape_q"])
        bits, _ = run(case, {"recipe": "sage2_sm90", **override})
        assert not np.array_equal(bits, gpu), override


def test_sage2_sm90_properties():
    case = next(c for c in CASES if c["name"] == "uniform_fp16_full_d128_gqa" or c["name"] == "uniform_fp16_full_d64_gqa")
    q, k, v = inputs(case)
    out1, _ = pasa.attention(q, k, v, format="fp16", kernel="sage2_sm90", threads=1)
    out3, _ = pasa.attention(q, k, v, format="fp16", kernel="sage2_sm90", threads=3)
    assert np.array_equal(out1, out3) and np.all(np.isfinite(out1))
    gold = pasa.golden(q, k, v, format="fp16")["out"]
    rel = np.sqrt(np.mean((out1 - gold) ** 2) / np.mean(gold ** 2))
    assert rel < 2 ** -3  # FP8 P and V (3 fraction bits) on zero-mean V: the property harness's FP8 bound
    # per_channel_fp8 of an all-zero channel: 448 / 0 = inf, 0 · inf = NaN, so that channel's output is NaN
    vz = pasa.decode(v, "fp16").copy()
    vz[..., 3] = 0.0
    outz, _ = pasa.attention(q, k, vz, format="fp16", kernel="sage2_sm90")
    assert np.all(np.isnan(outz[..., 3])) and np.all(np.isfinite(np.delete(outz, 3, axis=-1)))


def test_nvfp4_sa3_quantisation():
    # fp4_quantization_4d.cu :185-230 restated: SF = amax / 6 (fast math: amax · rcp(6)) to e4m3, inv = rcp(SF),
    # elements RN-satfinite to e2m1 of x · inv, per 16 along the row
    rng = np.random.default_rng(3)
    x = pasa.round(rng.standard_normal((8, 64)) * np.exp2(rng.integers(-6, 6, (8, 1))), "bf16")
    r = pasa.block_quantise(x, "nvfp4_sa3")
    f32 = np.float32
    amax = np.abs(x.reshape(8, 4, 16)).max(axis=-1).astype(f32)
    rcp6 = pasa.gpu_math(np.array([6.0], dtype=f32), "rcp").astype(f32)[0]
    sf = pasa.round((amax * rcp6).astype(f32).astype(np.float64), "fp8_e4m3fn")
    inv = pasa.gpu_math(sf.astype(f32), "rcp").astype(f32)
    q = (x.reshape(8, 4, 16).astype(f32) * inv[..., None]).astype(f32)
    el = pasa.round(q.astype(np.float64), "fp4_e2m1", overflow="saturate").reshape(8, 64)
    assert np.array_equal(r["scales"], sf)
    assert np.array_equal(r["elements"], el)


def test_sage3_sm100_from_source():
    case = next(c for c in CASES if c["name"] == "uniform_bf16_full_d64_gqa")
    q, k, v = inputs(case)
    out1, _ = pasa.attention(q, k, v, format="bf16", kernel="sage3_sm100", threads=1)
    out3, _ = pasa.attention(q, k, v, format="bf16", kernel="sage3_sm100", threads=3)
    assert np.array_equal(out1, out3) and np.all(np.isfinite(out1))
    gold = pasa.golden(q, k, v, format="bf16")["out"]
    rel = np.sqrt(np.mean((out1 - gold) ** 2) / np.mean(gold ** 2))
    assert 2 ** -6 < rel < 2 ** -1  # FP4 Q, K, P and V (one fraction bit): far coarser than SA2, still attention
    # its steps matter: without smooth Q (and its δS) the result moves
    alt, _ = pasa.attention(q, k, v, format="bf16", kernel={"recipe": "sage3_sm100", "smooth_q": 0}, threads=1)
    assert not np.array_equal(alt, out1)
