"""torch tensors wherever the module takes numpy arrays (python/pasa/_tensors.py, _calls.py): float16,
bfloat16, float32 and float64 tensors give the bits of the numpy path (bfloat16: its uint16 patterns with
format="bf16", the way numpy users pass them without ml_dtypes), results come back as tensors in the dtype of
their format, format= takes torch dtypes, and `import pasa` does not import torch. Run with Debian's torch
1.13 (skipped where torch is missing)."""
import json
import subprocess
import sys

import numpy as np
import pytest

import pasa

torch = pytest.importorskip("torch")

DTYPES = [torch.float16, torch.bfloat16, torch.float32, torch.float64]


def numpy_path(t):
    """What a numpy user passes for tensor t, and the format= that goes with it (bf16: its patterns)."""
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view(np.uint16), "bf16"
    return t.numpy(), None


def same_dict(a, b):
    """Equal results (dicts, lists of dicts), NaN equal to NaN."""
    assert json.dumps(a, sort_keys=True, default=repr) == json.dumps(b, sort_keys=True, default=repr)


def same(t, a):
    """Tensor t holds exactly the float64 values of array a (NaN where a has NaN)."""
    assert isinstance(t, torch.Tensor), type(t)
    u = t.detach().to(torch.float64).numpy()
    a = np.asarray(a, dtype=np.float64)
    assert u.shape == a.shape
    assert np.array_equal(np.isnan(u), np.isnan(a))
    assert np.array_equal(u[~np.isnan(u)].view(np.uint64), a[~np.isnan(a)].view(np.uint64))


@pytest.fixture
def qkv():
    g = torch.Generator().manual_seed(7)
    return [torch.randn(shape, generator=g, dtype=torch.float64) * 2 for shape in [(2, 4, 40, 32), (2, 2, 56, 32),
                                                                                     (2, 2, 56, 32)]]


def test_import_pasa_does_not_import_torch():
    code = ("import sys, numpy, pasa; pasa.round(numpy.ones(3), 'fp16'); pasa.attention(*[numpy.ones((4, 8))] * 3);"
            "assert 'torch' not in sys.modules, 'torch imported'")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_attention_same_bits_as_numpy(qkv, dtype):
    q, k, v = (t.to(dtype) for t in qkv)
    (qn, f), (kn, _), (vn, _) = numpy_path(q), numpy_path(k), numpy_path(v)
    for alloc, out_dtype in [("fa_fp16_fp32", torch.float16), ("fa_bf16_fp32", torch.bfloat16),
                             ("fa_fp32", torch.float16), ("fp64", torch.float64)]:
        o, lse = pasa.attention(q, k, v, alloc=alloc, causal=True)
        on, lsen = pasa.attention(qn, kn, vn, alloc=alloc, causal=True, format=f)
        assert o.dtype == out_dtype and lse.dtype == torch.float64  # out: the allocation's out format
        same(o, on)
        same(lse, lsen)
    g = pasa.golden(q, k, v, causal=True)
    gn = pasa.golden(qn, kn, vn, causal=True, format=f)
    same(g["out"], gn["out"])
    same(g["lse"], gn["lse"])
    assert g["error_bound"] == gn["error_bound"]
    same(pasa.uniform_baseline(q, k, v), pasa.uniform_baseline(qn, kn, vn, format=f))
    same_dict(pasa.metrics(o, g), pasa.metrics(on, gn))  # tensors in a dict too
    same_dict(pasa.score_stats(q, k, v), pasa.score_stats(qn, kn, vn, format=f))


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_kernel_recipe_out_dtype_is_the_input_format(qkv, dtype):
    q, k, v = (t.to(dtype) for t in qkv)
    (qn, f), (kn, _), (vn, _) = numpy_path(q), numpy_path(k), numpy_path(v)
    o, _ = pasa.attention(q, k, v, kernel="torch_flash_sm90")
    assert o.dtype == dtype
    same(o, pasa.attention(qn, kn, vn, kernel="torch_flash_sm90", format=f)[0])


def test_masks_and_decode_inputs_as_tensors(qkv):
    q, k, v = (t.to(torch.float16) for t in qkv)
    g = torch.Generator().manual_seed(3)
    mask = torch.rand((2, 40, 56), generator=g) > 0.2
    mask[..., 0] = True
    pse = torch.randn((1, 4, 40, 56), generator=g, dtype=torch.float32)
    kv_len = torch.tensor([56, 30])
    o, _ = pasa.attention(q, k, v, mask=mask, pse=pse, kv_len=kv_len)
    on, _ = pasa.attention(q.numpy(), k.numpy(), v.numpy(), mask=mask.numpy(), pse=pse.numpy(), kv_len=kv_len.numpy())
    same(o, on)


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_round_encode_decode(dtype):
    x64 = torch.linspace(-300, 300, 1001, dtype=torch.float64) * torch.linspace(0.001, 1, 1001, dtype=torch.float64)
    x = x64.to(dtype)
    xn = x.to(torch.float32).numpy() if dtype == torch.bfloat16 else x.numpy()
    for fmt, want in [("fp16", torch.float16), ("bf16", torch.bfloat16), ("fp32", torch.float32),
                      ("fp8_e5m2", getattr(torch, "float8_e5m2", torch.float32)), ("tf32", torch.float32),
                      ("p=30,emax=300", torch.float64)]:
        r = pasa.round(x, fmt)
        assert r.dtype == want, fmt  # the format's dtype where torch has one, else float32 / float64
        same(r, pasa.round(xn, fmt))
        same(pasa.round(x, fmt, mode="sr", seed=4), pasa.round(xn, fmt, mode="sr", seed=4))
    r = pasa.round(x, "bf16")
    bits = pasa.encode(r, "bf16")
    assert bits.dtype == torch.int16  # torch's 16-bit integers, the bits of r.view(torch.int16)
    assert torch.equal(bits, r.view(torch.int16))
    assert torch.equal(pasa.encode(r, "bf16", dtype=torch.bfloat16), r)
    same(pasa.decode(bits, "bf16"), pasa.decode(bits.numpy().view(np.uint16), "bf16"))
    assert pasa.decode(bits, "bf16").dtype == torch.bfloat16
    same(pasa.decode(r, "bf16"), r.to(torch.float64).numpy())  # a bfloat16 tensor is its values


def test_round_into_torch_dtypes_and_out():
    x = torch.linspace(-3, 3, 50, dtype=torch.float64)
    assert pasa.round(x, "fp8_e4m3fn", dtype=torch.bfloat16).dtype == torch.bfloat16
    assert pasa.round(x.numpy(), torch.float16).dtype == torch.float16  # a torch dtype asks for a tensor
    with pytest.raises(ValueError, match=r"^dtype: torch.bfloat16 cannot hold every value of format fp16"):
        pasa.round(x, "fp16", dtype=torch.bfloat16)
    out = torch.empty(50, dtype=torch.float16)
    assert pasa.round(x, "fp16", out=out) is out
    same(out, pasa.round(x.numpy(), "fp16"))


def test_format_takes_torch_dtypes(qkv):
    for t, name in [(torch.float16, "fp16"), (torch.bfloat16, "bf16"), (torch.float32, "fp32"), (torch.float64, "fp64")]:
        assert pasa.format_info(t)["name"] == name
    q, k, v = qkv
    same(pasa.attention(q, k, v, format=torch.bfloat16)[0], pasa.attention(q, k, v, format="bf16")[0])
    x = np.linspace(-1, 1, 11)
    assert np.array_equal(pasa.round(x, "bf16"), pasa.round(x, torch.bfloat16).to(torch.float64).numpy())


def test_other_functions(qkv):
    q, k, v = (t.to(torch.float16) for t in qkv)
    a, b = q[0, 0], k[0, 0].T.contiguous()
    c = pasa.gemm(a, b, out="fp16")
    assert c.dtype == torch.float16
    same(c, pasa.gemm(a.numpy(), b.numpy(), out="fp16"))
    same_dict(pasa.range_stats(q, k, v), pasa.range_stats(q.numpy(), k.numpy(), v.numpy()))
    r = pasa.attribute(q=q[:, :, :16], k=k[:, :, :16], v=v[:, :, :16], s1=8, s2=8)
    same_dict(r, pasa.attribute(q=q[:, :, :16].numpy(), k=k[:, :, :16].numpy(), v=v[:, :, :16].numpy(), s1=8, s2=8))
    x = torch.linspace(-4, 4, 33, dtype=torch.float32)
    same(pasa.gpu_math(x, "ex2"), pasa.gpu_math(x.numpy(), "ex2"))
    bq = pasa.block_quantise(x.reshape(1, 33)[:, :32], "mxfp8_e4m3")
    bn = pasa.block_quantise(x.numpy().reshape(1, 33)[:, :32], "mxfp8_e4m3")
    same(bq["values"], bn["values"])


def test_paged(qkv):
    p = pasa.generate({"kind": "paged", "shape": {"Nq": 4, "Nkv": 2, "D": 32}, "format": "fp16", "seed": 1,
                       "block_size": 8, "num_blocks": 20, "sequences": [{"q_len": 1, "ctx_len": 40},
                                                                         {"q_len": 9, "ctx_len": 30}]})
    t = {k: torch.from_numpy(p[k]) for k in ("q", "k_cache", "v_cache")}
    o, lse = pasa.unified_attention(t["q"], t["k_cache"], t["v_cache"], p["sequences"], format=p["format"])
    on, lsen = pasa.unified_attention(p["q"], p["k_cache"], p["v_cache"], p["sequences"], format=p["format"])
    assert o.dtype == torch.float16
    same(o, on)
    same(lse, lsen)


def test_views_parameters_and_grad(qkv):
    q, k, v = (t.to(torch.float32) for t in qkv)
    qt = q.transpose(2, 3).contiguous().transpose(2, 3)  # a non-contiguous view of the same values
    assert not qt.is_contiguous()
    same(pasa.attention(qt, k, v)[0], pasa.attention(q.numpy(), k.numpy(), v.numpy())[0])
    p = torch.nn.Parameter(q.clone())
    same(pasa.attention(p, k, v)[0], pasa.attention(q, k, v)[0])
    assert not pasa.attention(p, k, v)[0].requires_grad
