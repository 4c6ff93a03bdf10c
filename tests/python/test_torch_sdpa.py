"""pasa.torch.scaled_dot_product_attention against torch's semantics, checked on a float64 reference computed
here with plain torch arithmetic (softmax(q kᵀ·scale + mask) v; Debian's torch 1.13 has no SDPA of its own):
the fp64 allocation agrees to 1e-12 on boolean and float masks, top-left is_causal with Sq != Skv, GQA,
scale=, any leading dimensions; and emulate() routes torch.nn.functional.scaled_dot_product_attention
through it (a stand-in function here, torch 1.13 having none; experiments/gpu/torch_emulate/ runs the real
one with a transformers model on torch 2.11)."""
import math

import pytest

torch = pytest.importorskip("torch")
import pasa.torch as pt  # noqa: E402

TOL = 1e-12


def reference(q, k, v, attn_mask=None, is_causal=False, scale=None, enable_gqa=False):
    """torch's documented semantics, in float64: the math of torch.nn.functional.scaled_dot_product_attention."""
    q, k, v = q.double(), k.double(), v.double()
    L, S = q.shape[-2], k.shape[-2]
    if enable_gqa:
        k = k.repeat_interleave(q.shape[-3] // k.shape[-3], -3)
        v = v.repeat_interleave(q.shape[-3] // v.shape[-3], -3)
    s = q @ k.transpose(-2, -1) * (1 / math.sqrt(q.shape[-1]) if scale is None else scale)
    if is_causal:
        s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), -math.inf)  # top-left
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, -math.inf) if attn_mask.dtype == torch.bool else s + attn_mask.double()
    return torch.softmax(s, -1) @ v


def draw(*shapes, seed=0, dtype=torch.float64):
    g = torch.Generator().manual_seed(seed)
    return [torch.randn(s, generator=g, dtype=torch.float64).to(dtype) for s in shapes]


def close(a, b, tol=TOL):
    assert a.shape == b.shape, (a.shape, b.shape)
    d = float((a.double() - b.double()).abs().max())
    assert d <= tol, d


@pytest.mark.parametrize("L, S", [(6, 6), (4, 9), (9, 9), (1, 13)])
def test_causal_is_top_left(L, S):
    q, k, v = draw((2, 3, L, 16), (2, 3, S, 16), (2, 3, S, 16))
    got = pt.scaled_dot_product_attention(q, k, v, is_causal=True, alloc="fp64")
    close(got, reference(q, k, v, is_causal=True))
    if L != S:  # pasa's own causal is bottom-right: another result, which the translation must not give
        import pasa

        bottom_right, _ = pasa.attention(q, k, v, alloc="fp64", causal=True)
        assert float((bottom_right - got).abs().max()) > 1e-3


def test_causal_with_more_queries_than_keys():
    # top-left with L > S: rows i < S see keys 0..i; later rows see all S keys
    q, k, v = draw((1, 2, 10, 8), (1, 2, 4, 8), (1, 2, 4, 8), seed=1)
    close(pt.scaled_dot_product_attention(q, k, v, is_causal=True, alloc="fp64"), reference(q, k, v, is_causal=True))


@pytest.mark.parametrize("shape", [(2, 4, 7, 11), (2, 1, 7, 11), (7, 11), (1, 4, 7, 11)])
def test_bool_mask_true_attends(shape):
    q, k, v = draw((2, 4, 7, 16), (2, 4, 11, 16), (2, 4, 11, 16), seed=2)
    g = torch.Generator().manual_seed(5)
    m = torch.rand(shape, generator=g) > 0.4
    m[..., 0] = True  # no fully masked row (torch gives NaN there)
    close(pt.scaled_dot_product_attention(q, k, v, attn_mask=m, alloc="fp64"), reference(q, k, v, attn_mask=m))


def test_mask_per_head_with_gqa():
    # a mask that differs between heads (pasa's keep mask is one per batch: one call per head) under GQA
    q, k, v = draw((2, 6, 7, 16), (2, 3, 11, 16), (2, 3, 11, 16), seed=11)
    g = torch.Generator().manual_seed(12)
    m = torch.rand((2, 6, 7, 11), generator=g) > 0.5
    m[..., 0] = True
    close(pt.scaled_dot_product_attention(q, k, v, attn_mask=m, enable_gqa=True, alloc="fp64"),
          reference(q, k, v, attn_mask=m, enable_gqa=True))


def test_float_mask_is_added():
    q, k, v = draw((2, 4, 7, 16), (2, 4, 11, 16), (2, 4, 11, 16), seed=3)
    (m,) = draw((2, 4, 7, 11), seed=4)
    close(pt.scaled_dot_product_attention(q, k, v, attn_mask=m, alloc="fp64"), reference(q, k, v, attn_mask=m))
    m[:, :, :, 3:5] = -math.inf  # -inf entries: masked (as HF's additive masks)
    m[1, 2, 4, 0] = float(torch.finfo(torch.float16).min)
    close(pt.scaled_dot_product_attention(q, k, v, attn_mask=m, alloc="fp64"), reference(q, k, v, attn_mask=m))


def test_gqa_scale_and_shapes():
    q, k, v = draw((2, 8, 5, 16), (2, 2, 9, 16), (2, 2, 9, 16), seed=6)
    got = pt.scaled_dot_product_attention(q, k, v, scale=0.21, enable_gqa=True, alloc="fp64")
    close(got, reference(q, k, v, scale=0.21, enable_gqa=True))
    with pytest.raises(ValueError, match="give enable_gqa=True"):
        pt.scaled_dot_product_attention(q, k, v, alloc="fp64")
    q5, k5, v5 = draw((2, 3, 2, 5, 16), (2, 3, 2, 9, 16), (2, 3, 2, 9, 16), seed=7)  # two leading dimensions
    close(pt.scaled_dot_product_attention(q5, k5, v5, is_causal=True, alloc="fp64"),
          reference(q5, k5, v5, is_causal=True))
    q3, k3, v3 = draw((3, 5, 16), (3, 9, 16), (3, 9, 16), seed=8)  # (heads, L, E)
    close(pt.scaled_dot_product_attention(q3, k3, v3, alloc="fp64"), reference(q3, k3, v3))


def test_dtypes_come_back_and_default_numerics():
    q, k, v = draw((1, 2, 33, 32), (1, 2, 40, 32), (1, 2, 40, 32), seed=9)
    ref = reference(q, k, v)
    for dtype, tol in [(torch.float16, 2e-3), (torch.bfloat16, 2e-2), (torch.float32, 1e-6), (torch.float64, TOL)]:
        got = pt.scaled_dot_product_attention(q.to(dtype), k.to(dtype), v.to(dtype))
        assert got.dtype == dtype
        close(got, ref, tol)  # (inputs rounded to dtype: the error is the format's)
    h = [t.half() for t in (q, k, v)]
    o_kernel = pt.scaled_dot_product_attention(*h, kernel="torch_flash_sm90")
    assert o_kernel.dtype == torch.float16
    close(o_kernel, ref, 2e-3)


def test_refusals():
    q, k, v = draw((1, 2, 4, 8), (1, 2, 4, 8), (1, 2, 4, 8))
    with pytest.raises(ValueError, match="^dropout_p: 0.1: pasa's attention has no dropout"):
        pt.scaled_dot_product_attention(q, k, v, dropout_p=0.1)
    with pytest.raises(ValueError, match="not both"):
        pt.scaled_dot_product_attention(q, k, v, attn_mask=torch.ones(4, 4, dtype=torch.bool), is_causal=True)
    with pytest.raises(ValueError, match="kernel alone"):
        pt.scaled_dot_product_attention(q, k, v, kernel="torch_flash_sm90", alloc="fp64")
    with pytest.raises(ValueError, match="does not broadcast"):
        pt.scaled_dot_product_attention(q, k, v, attn_mask=torch.ones(3, 4, dtype=torch.bool))


def test_emulate_patches_and_restores(monkeypatch):
    F = torch.nn.functional
    calls = []

    def torch_own(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **kw):
        calls.append("torch")
        return reference(query, key, value, attn_mask, is_causal, scale).to(query.dtype)

    monkeypatch.setattr(F, "scaled_dot_product_attention", torch_own, raising=False)
    q, k, v = draw((1, 2, 6, 8), (1, 2, 6, 8), (1, 2, 6, 8), seed=10)
    lin = torch.nn.Linear(1, 1)
    with pt.emulate(alloc="fp64", layers=[1], model=lin) as em:
        for _ in range(2):  # two "forwards" of a model with two attention layers
            lin(torch.zeros(1))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            b = F.scaled_dot_product_attention(q, k, v, is_causal=True)
    assert (em.emulated, em.passed) == (2, 2) and calls == ["torch", "torch"]
    close(a, reference(q, k, v, is_causal=True))
    close(b, reference(q, k, v, is_causal=True))
    assert F.scaled_dot_product_attention is torch_own  # restored
    monkeypatch.delattr(F, "scaled_dot_product_attention")
    with pytest.raises(RuntimeError, match="has no torch.nn.functional.scaled_dot_product_attention"):
        with pt.emulate(alloc="fp64"):
            pass


def test_pasa_torch_attribute_is_lazy():
    import subprocess
    import sys

    code = "import sys, pasa; assert 'torch' not in sys.modules; m = pasa.torch; assert 'torch' in sys.modules"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
