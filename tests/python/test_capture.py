"""pasa_capture (python/pasa_capture.py, issue 26): tiny PyTorch transformers built here (2 layers, GQA 4 query
heads on 2 KV heads, RoPE, causal), captured through scaled_dot_product_attention and through an adapter; the
captured Q, K, V must reproduce each attention module's own output, and pasa-sweep / pasa-attn must run on the
folder."""
import csv
import json
import math
import os

import numpy as np
import pytest

from conftest import BUILD, run_app

torch = pytest.importorskip("torch", reason="torch is not importable (Debian: apt-get install python3-torch; "
                                            "scripts/deps.sh installs it)")
import pasa_capture  # noqa: E402  (after the skip: it imports without torch, but its tests need it)

nn = torch.nn
DIM, HEADS, KV_HEADS, HEAD_DIM, VOCAB, SEQ = 32, 4, 2, 8, 50, 16


def fallback_sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
    """torch >= 2.0's scaled_dot_product_attention for torch 1.13 (Debian 12): same signature and semantics
    (is_causal aligned to the start, bool masks True = keep)."""
    s = query @ key.transpose(-2, -1) * (1 / math.sqrt(query.shape[-1]) if scale is None else scale)
    if is_causal:
        keep = torch.ones(s.shape[-2:], dtype=torch.bool).tril()
        s = s.masked_fill(~keep, -math.inf)
    if attn_mask is not None:
        s = s.masked_fill(~attn_mask, -math.inf) if attn_mask.dtype == torch.bool else s + attn_mask
    return torch.softmax(s, dim=-1) @ value


@pytest.fixture(autouse=True)
def sdpa_available(monkeypatch):
    if not hasattr(torch.nn.functional, "scaled_dot_product_attention"):
        monkeypatch.setattr(torch.nn.functional, "scaled_dot_product_attention", fallback_sdpa, raising=False)


def rope(x, base=10000.0):
    """Rotary position embedding (RoFormer) of x (B, H, S, D), rotating the halves of D."""
    s, d = x.shape[-2], x.shape[-1]
    inv = base ** (-torch.arange(0, d // 2, dtype=torch.float32) / (d // 2))
    ang = torch.arange(s, dtype=torch.float32)[:, None] * inv[None, :]
    cos, sin = torch.cos(ang), torch.sin(ang)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class Attention(nn.Module):
    """GQA attention with RoPE. mode: "sdpa" (K, V repeated to the query heads, is_causal, as Hugging Face
    models call it), "sdpa_mask" (a bool causal attn_mask and an explicit scale), "manual" (its own softmax:
    only an adapter sees it), "sdpa_bias" (an additive mask that is not causal: refused)."""

    def __init__(self, mode):
        super().__init__()
        self.mode = mode
        self.wq = nn.Linear(DIM, HEADS * HEAD_DIM, bias=False)
        self.wk = nn.Linear(DIM, KV_HEADS * HEAD_DIM, bias=False)
        self.wv = nn.Linear(DIM, KV_HEADS * HEAD_DIM, bias=False)
        self.wo = nn.Linear(HEADS * HEAD_DIM, DIM, bias=False)
        self.scale = 0.2 if mode != "sdpa" else 1 / math.sqrt(HEAD_DIM)
        self.last_out = None

    def qkv(self, x):
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, HEADS, HEAD_DIM).transpose(1, 2)
        k = self.wk(x).view(b, s, KV_HEADS, HEAD_DIM).transpose(1, 2)
        v = self.wv(x).view(b, s, KV_HEADS, HEAD_DIM).transpose(1, 2)
        return rope(q), rope(k), v

    def forward(self, x):
        q, k, v = self.qkv(x)
        s = x.shape[1]
        F = torch.nn.functional
        causal = torch.ones(s, s, dtype=torch.bool).tril()
        if self.mode == "manual":
            kk = k.repeat_interleave(HEADS // KV_HEADS, dim=1)
            vv = v.repeat_interleave(HEADS // KV_HEADS, dim=1)
            sc = (q @ kk.transpose(-2, -1) * self.scale).masked_fill(~causal, -math.inf)
            o = torch.softmax(sc, dim=-1) @ vv
        else:
            kk = k.repeat_interleave(HEADS // KV_HEADS, dim=1)
            vv = v.repeat_interleave(HEADS // KV_HEADS, dim=1)
            if self.mode == "sdpa":
                o = F.scaled_dot_product_attention(q, kk, vv, is_causal=True)
            elif self.mode == "sdpa_mask":
                o = F.scaled_dot_product_attention(q, kk, vv, attn_mask=causal, scale=self.scale)
            else:
                bias = torch.zeros(s, s).masked_fill(~causal, -math.inf) + 0.5 * torch.eye(s)
                o = F.scaled_dot_product_attention(q, kk, vv, attn_mask=bias)
        self.last_out = o.detach().clone()
        b = x.shape[0]
        return self.wo(o.transpose(1, 2).reshape(b, s, HEADS * HEAD_DIM))


class Block(nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.norm1, self.norm2 = nn.LayerNorm(DIM), nn.LayerNorm(DIM)
        self.attn = Attention(mode)
        self.mlp = nn.Sequential(nn.Linear(DIM, 4 * DIM), nn.GELU(), nn.Linear(4 * DIM, DIM))

    def forward(self, x):
        x = x + self.attn(self.norm1(x))
        return x + self.mlp(self.norm2(x))


class Tiny(nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.emb = nn.Embedding(VOCAB, DIM)
        self.layers = nn.ModuleList([Block(mode), Block(mode)])
        self.head = nn.Linear(DIM, VOCAB)

    def forward(self, ids):
        x = self.emb(ids)
        for blk in self.layers:
            x = blk(x)
        return self.head(x)


def build(mode):
    torch.manual_seed(1234)
    model = Tiny(mode)
    ids = torch.randint(0, VOCAB, (2, SEQ), generator=torch.Generator().manual_seed(7))
    return model, ids


def adapter(module, args, kwargs):
    q, k, v = module.qkv(*args, **kwargs)
    return q, k, v, module.scale, True


def check_reproduces(model, out_dir, scale):
    """Each layer's captured Q, K, V give the module's attention output: softmax(QK^T scale + mask)V in
    float64 against the module's float32 result."""
    index, arrays = pasa_capture.load(out_dir)
    assert [l["name"] for l in index["layers"]] == ["layers.0.attn", "layers.1.attn"]
    for blk, layer, a in zip(model.layers, index["layers"], arrays):
        assert layer["shape"] == {"B": 2, "Nq": HEADS, "Nkv": KV_HEADS, "Sq": SEQ, "Skv": SEQ, "D": HEAD_DIM}
        assert layer["causal"] is True
        assert layer["scale"] == pytest.approx(scale, rel=1e-15)
        assert a["q"].shape == (2, HEADS, SEQ, HEAD_DIM) and a["k"].shape == (2, KV_HEADS, SEQ, HEAD_DIM)
        ref = pasa_capture.reference_attention(a["q"], a["k"], a["v"], layer["scale"], layer["causal"])
        got = blk.attn.last_out.double().numpy()
        # float32 dot products of length 8 and sums of <= 16 weights: errors ~1e-7 of the values' size
        err = np.abs(ref - got).max() / np.abs(got).max()
        assert err < 1e-5, err
        # and the reference can tell: without the mask (or RoPE) the output is far off
        wrong = pasa_capture.reference_attention(a["q"], a["k"], a["v"], layer["scale"], False)
        assert np.abs(wrong - got).max() / np.abs(got).max() > 1e-2


def test_sdpa_capture_reproduces_attention(tmp_path):
    model, ids = build("sdpa")
    out = tmp_path / "cap"
    index = pasa_capture.capture(model, ids, out, model_name="tiny-sdpa")
    assert index["model"] == "tiny-sdpa" and index["pasa_capture"] == 1
    # K and V were repeated to 4 heads before the call: collapsed back to the model's 2 KV heads
    check_reproduces(model, out, 1 / math.sqrt(HEAD_DIM))
    assert sorted(os.listdir(out)) == sorted(["index.json"] + [f"layer00{i}_{t}.npy" for i in (0, 1) for t in "qkv"])
    assert np.load(out / "layer000_q.npy").dtype == np.float32
    # the hooks and the wrapper are gone: a second forward is unchanged and captures nothing
    assert torch.nn.functional.scaled_dot_product_attention.__name__ != "sdpa"


def test_attn_mask_and_scale(tmp_path):
    model, ids = build("sdpa_mask")
    pasa_capture.capture(model, ids, tmp_path / "cap")
    check_reproduces(model, tmp_path / "cap", 0.2)


def test_adapter_for_a_module_without_sdpa(tmp_path):
    model, ids = build("manual")
    with pytest.raises(pasa_capture.CaptureError, match="no attention call was captured"):
        pasa_capture.capture(model, ids, tmp_path / "none")
    assert not (tmp_path / "none").exists()
    pasa_capture.capture(model, ids, tmp_path / "cap", adapters={Attention: adapter})
    check_reproduces(model, tmp_path / "cap", 0.2)
    # by qualified name, one layer only (the layer keeps its call index in the file name)
    pasa_capture.capture(model, ids, tmp_path / "one", adapters={"layers.1.attn": adapter})
    index, _ = pasa_capture.load(tmp_path / "one")
    assert [l["name"] for l in index["layers"]] == ["layers.1.attn"]


def test_refusals_leave_nothing(tmp_path):
    model, ids = build("sdpa_bias")
    with pytest.raises(pasa_capture.CaptureError, match="other than 0 and -inf"):
        pasa_capture.capture(model, ids, tmp_path / "cap")
    assert not (tmp_path / "cap").exists() and not os.listdir(tmp_path)
    model, ids = build("sdpa")
    pasa_capture.capture(model, ids, tmp_path / "cap")
    with pytest.raises(pasa_capture.CaptureError, match="not empty"):
        pasa_capture.capture(model, ids, tmp_path / "cap")
    pasa_capture.capture(model, ids, tmp_path / "cap", overwrite=True, layers=[1], dtype="float16")
    index, arrays = pasa_capture.load(tmp_path / "cap")
    assert len(arrays) == 1 and arrays[0]["q"].dtype == np.float16 and index["layers"][0]["dtype"] == "float16"
    assert index["layers"][0]["q"] == "layer001_q.npy"


def test_sweep_and_attn_over_a_capture(tmp_path):
    model, ids = build("sdpa")
    cap = tmp_path / "cap"
    pasa_capture.capture(model, ids, cap, model_name="tiny")
    cfg = {
        "name": "capture",
        "problem": {"capture": {"dir": "cap", "layer": "$layer", "head": "$head"}, "format": "fp16", "seed": "$seed"},
        "grid": {"layer": [0, 1], "head": [0, 1, 2, 3]},
        "seeds": [0],
        "algorithms": [{"label": "FA-FP64", "name": "fa2", "alloc": "fp64", "s1": 8, "s2": 8},
                       {"label": "PASA-FP16", "name": "pasa", "alloc": "pasa_fp16", "s1": 8, "s2": 8}],
        "golden": {"precision_bits": 128},
    }
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))  # "cap" relative to the config's folder
    run_app("pasa-sweep", tmp_path / "cfg.json", "--out", tmp_path / "out", "--threads", "2")
    rows = list(csv.DictReader(open(tmp_path / "out" / "results.csv")))
    assert len(rows) == 16
    assert sorted({(r["layer"], r["head"]) for r in rows}) == [(str(l), str(h)) for l in (0, 1) for h in range(4)]
    for r in rows:
        rmse = float(r["rmse"])
        # fp16 inputs in an fp64 algorithm: the golden's own inputs, so exact; PASA-FP16: fp16-level error
        assert (rmse < 1e-13) if r["algorithm"] == "FA-FP64" else (0 < rmse < 1e-2), r
    # pasa-attn on one (layer, head) from a problem file; a wrong head names the file and the JSON path
    (tmp_path / "p.json").write_text(json.dumps({"capture": {"dir": "cap", "layer": 1, "head": 3}}))
    r = run_app("pasa-attn", "--problem", tmp_path / "p.json", "--json")
    out = json.loads(r.stdout)
    assert out["metrics"]["rmse"] < 1e-2
    (tmp_path / "bad.json").write_text(json.dumps({"capture": {"dir": "cap", "layer": 1, "head": 4}}))
    r = run_app("pasa-attn", "--problem", tmp_path / "bad.json", expect_rc=2)
    assert "bad.json:/capture/head" in r.stderr and "Nq = 4" in r.stderr
