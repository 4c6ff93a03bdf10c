"""pasa.torch.deviation: a model's output under emulated attention against a reference run. A 2-layer causal
transformer built here (random weights, float64) calls torch.nn.functional.scaled_dot_product_attention
looked up at call time (Debian's torch 1.13 has none: deviation installs it for the run), with a float64
math fallback that is torch's documented formula, the independent reference of the fp64 check."""
import math

import pytest

torch = pytest.importorskip("torch")
import torch.nn as nn  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import pasa.torch as pt  # noqa: E402


def math_sdpa(q, k, v):
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    L, S = s.shape[-2:]
    return torch.softmax(s.masked_fill(~torch.ones(L, S, dtype=torch.bool).tril(), -math.inf), -1) @ v


class Block(nn.Module):
    def __init__(self, d, h):
        super().__init__()
        self.h, self.qkv, self.proj, self.ln = h, nn.Linear(d, 3 * d), nn.Linear(d, d), nn.LayerNorm(d)

    def forward(self, x):
        B, T, d = x.shape
        q, k, v = self.qkv(self.ln(x)).view(B, T, 3, self.h, d // self.h).permute(2, 0, 3, 1, 4)
        sdpa = getattr(F, "scaled_dot_product_attention", None)
        a = sdpa(q, k, v, is_causal=True) if sdpa is not None else math_sdpa(q, k, v)
        return x + self.proj(a.transpose(1, 2).reshape(B, T, d))


class LM(nn.Module):
    def __init__(self, vocab=32, d=32, h=2, n=3, scale=1.0):
        super().__init__()
        torch.manual_seed(0)
        self.emb = nn.Embedding(vocab, d)
        with torch.no_grad():
            self.emb.weight.mul_(scale)  # larger embeddings: larger scores, more attention error
        self.blocks = nn.ModuleList(Block(d, h) for _ in range(n))
        self.out = nn.Linear(d, vocab)

    def forward(self, idx):
        x = self.emb(idx)
        for b in self.blocks:
            x = b(x)
        return self.out(x)


@pytest.fixture(scope="module")
def model():
    return LM(scale=4.0).double().eval()


@pytest.fixture(scope="module")
def tokens():
    return torch.randint(0, 32, (2, 24), generator=torch.Generator().manual_seed(1))


def test_identical_kernels_give_zero_deviation(model, tokens):
    r = pt.deviation(model, tokens, ["fa_fp16_fp32"], reference="fa_fp16_fp32")
    k = r["kernels"][0]
    assert k["calls"] == 3 and r["reference"]["calls"] == 3
    assert k["logit_rmse"] == 0 and k["logit_max_err"] == 0 and k["kl_max"] == 0
    assert k["top1_agreement"] == 1 and k["perplexity_ratio"] == 1
    assert all(x["rmse"] == 0 for x in k["layers"]) and k["first_layer_over"] is None


def test_fp64_allocation_is_the_models_own_float64_attention(model, tokens):
    r = pt.deviation(model, tokens, ["fp64", "fa_fp16_fp32"], reference=None)
    assert r["reference"]["label"] == "model's own"
    fp64, fp16 = r["kernels"]
    assert fp64["logit_max_err"] < 1e-12 and fp64["kl_max"] < 1e-15 and fp64["top1_agreement"] == 1
    assert fp16["logit_max_err"] > 1e-5  # (and the check above can fail: fp16 attention is visible)
    assert not hasattr(F, "scaled_dot_product_attention") or torch.__version__ >= "2"  # (removed again)


def test_coarse_allocation_deviates_more_than_fine(model, tokens):
    r = pt.deviation(model, tokens, ["fa_fp32", "fa_fp16_fp32", {"label": "fp8", "alloc": "fa_fp8_h100"}])
    fp32, fp16, fp8 = r["kernels"]
    assert fp8["label"] == "fp8"
    assert 0 < fp32["logit_rmse"] < fp16["logit_rmse"] < fp8["logit_rmse"]
    assert fp32["kl_mean"] < fp16["kl_mean"] < fp8["kl_mean"]
    assert fp8["layers"][-1]["rel_rmse"] > fp16["layers"][-1]["rel_rmse"]


def test_report_shapes_and_first_layer_over(model, tokens):
    r = pt.deviation(model, tokens, ["fa_fp16_fp32"], threshold=0.0)
    k = r["kernels"][0]
    assert [x["name"] for x in k["layers"]] == ["blocks.0", "blocks.1", "blocks.2"]
    assert k["per_position"]["kl"].shape == (2, 23) and k["per_position"]["top1"].shape == (2, 23)
    assert k["first_layer_over"] == 0
    assert pt.deviation(model, tokens, ["fa_fp16_fp32"], threshold=1e9)["kernels"][0]["first_layer_over"] is None
    # the error grows through the residual stream of a random model: later layers deviate at least as much
    assert k["layers"][0]["rmse"] > 0
    one = pt.deviation(model, tokens, ["fa_fp16_fp32"], layers=["blocks.1"])["kernels"][0]["layers"]
    assert [x["name"] for x in one] == ["blocks.1"] and one[0]["rmse"] == k["layers"][1]["rmse"]


def test_kernel_recipe_with_fp16_inputs_and_spec(model, tokens):
    r = pt.deviation(model, tokens, [{"kernel": "torch_flash_sm90", "dtype": torch.float16},
                                     {"label": "fp8 block", "spec": {"name": "fa2", "alloc": "fa_fp8_h100", "quant": {
                                         "scales": "block", "hadamard": True, "p_offset": 8}}}])
    flash, fp8 = r["kernels"]
    assert flash["label"] == "torch_flash_sm90" and flash["calls"] == 3
    assert 0 < flash["logit_rmse"] < fp8["logit_rmse"]


def test_errors_name_the_argument(model, tokens):
    with pytest.raises(ValueError, match="layers: \\['nope'\\]"):
        pt.deviation(model, tokens, ["fp64"], layers=["nope"])
    with pytest.raises(ValueError, match="unknown key"):
        pt.deviation(model, tokens, [{"alloc": "fp64", "allocation": 1}])
    with pytest.raises(ValueError, match="targets"):
        pt.deviation(model, (tokens,), ["fp64"])


def test_generate_greedy_is_the_models_own_under_fp64(model):
    prompt = torch.tensor([1, 2, 3, 4])
    own = pt.generate(model, prompt, 8)
    assert len(own) == 8 and pt.generate(model, prompt, 8, "fp64") == own


def test_committed_study_reproduces_its_first_seed():
    """results/deviation/per_seed.csv's seed 0 from the committed checkpoint (experiments/python/*.py)."""
    import csv
    import pathlib
    import sys
    root = pathlib.Path(__file__).resolve().parents[2]
    sys.path.insert(0, str(root / "experiments" / "python"))
    import deviation_study as ds
    import numpy as np
    out = root / "results" / "deviation"
    model, ck = ds.tiny_lm.load(out / "tiny_lm.pt")
    held = np.frombuffer((out / "heldout.txt").read_bytes(), dtype=np.uint8)
    off = np.random.default_rng(0).integers(0, len(held) - 64, 16)
    x = torch.tensor(np.stack([held[o:o + 64] for o in off]).astype(np.int64))
    r = pt.deviation(model, x, ds.KERNELS, threshold=ds.THRESHOLD, threads=1)
    with open(out / "per_seed.csv") as f:
        rows = {row["kernel"]: row for row in csv.DictReader(f) if row["seed"] == "0"}
    assert len(rows) == len(ds.KERNELS) == len(r["kernels"])
    for k in r["kernels"]:
        for m in ("logit_rmse", "kl_mean", "top1_agreement", "perplexity"):
            assert k[m] == pytest.approx(float(rows[k["label"]][m]), rel=1e-5), (k["label"], m)
