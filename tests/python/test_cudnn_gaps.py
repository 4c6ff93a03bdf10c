"""torch_cudnn_sm90 where the earlier model stopped, against the H200's cuDNN 9.19 (torch 2.11):

- prefill at D = 160: the fold constant is an fp32 product, c = RN(RN(scale)·RN(log2 e)), one ulp below the
  double product at 1/sqrt(160) (schedule field fold_product). Shown on the probe's single-key inputs, whose
  LSE is RN(RN(S·c)·ln 2) alone, and on its D 160 captures (experiments/gpu/kernels/cudnn_gap_probe.py,
  results/hardware/kernels/cudnn_gap_probe_*) and the held-back ones.
- decode above 512 keys: the split kernel deals 128-key block b to CTA b mod splits (decode_partition
  strided), on the decode sweep of cudnn_decode_probe.py (cudnn_decode_probe_sweep.npz, Skv 513-1100).
The expected bits are the GPU's; the inputs are regenerated from the manifests' seeds (sha256-checked).
"""
import json
import os
import sys

import numpy as np
import pytest

import pasa

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RES = os.path.join(ROOT, "results", "hardware", "kernels")
sys.path.insert(0, os.path.join(ROOT, "experiments", "gpu", "kernels"))
from kernel_inputs import bits_to_float64, load_captures, make_inputs, sha256_hex  # noqa: E402
from fa2_model import tc_accumulate  # noqa: E402  (the NumPy tensor-core model of docs/tensor-cores.md)

GAP = json.load(open(os.path.join(RES, "cudnn_gap_probe_manifest.json")))
GAP_CASES = {c["name"]: c for c in GAP["cases"]}
GAP_OUT = np.load(os.path.join(RES, "cudnn_gap_probe.npz"))
NEG30 = {"fp16": 0xCF80, "bf16": 0xC1F0}  # -30 in either format


def gap_inputs(case):
    q, k, v = make_inputs(case)
    if case.get("transform") == "single_key":  # keys 1.. at -30: P = 0 there, the LSE is key 0's score alone
        k = k.copy()
        k[:, :, 1:, :] = NEG30[case["dtype"]]
    for t, x in zip("qkv", (q, k, v)):
        assert sha256_hex(x) == case["sha256"][t], f"{case['name']}: regenerated {t} is not the captured input"
    return q, k, v


def run(q, k, v, dtype, kernel="torch_cudnn_sm90", causal=False):
    out, _ = pasa.attention(q, k, v, format=dtype, kernel=kernel, causal=causal)
    return pasa.encode(out, dtype).astype(np.uint16)


@pytest.mark.parametrize("d", [128, 160, 192])
def test_single_key_lse_shows_the_fold_constant(d):
    """LSE = RN(RN(S·c)·RN(ln 2)) on every row, S from the tensor-core model: with c the fp32 product at every D,
    with the double product only where the two agree (D 128, 192), not at D 160."""
    f32 = np.float32
    scale = f32(d ** -0.5)
    c_float = f32(scale * f32(1.4426950408889634))
    c_double = f32(np.float64(scale) * 1.4426950408889634)
    names = [n for n in GAP_CASES if n.startswith("single_") and n.endswith(tuple(f"_d{d}_t{t}" for t in range(6)))]
    assert len(names) == 12
    hits = {"float": 0, "double": 0}
    rows = 0
    for name in names:
        case = GAP_CASES[name]
        q, k, _ = gap_inputs(case)
        dt = case["dtype"]
        qf, kf = bits_to_float64(q, dt), bits_to_float64(k, dt)
        emin = -14 if dt == "fp16" else -126
        lse = GAP_OUT[name + "__lse"].reshape(2, 64)
        for h in range(2):
            S = tc_accumulate(np.zeros((64, 1), f32), qf[0, h], kf[0, h, :1].T, block=16, emin_a=emin, emin_b=emin)[:, 0]
            for label, c in (("float", c_float), ("double", c_double)):
                hits[label] += int(np.sum(((S * c).astype(f32) * f32(0.693147182)).astype(f32) == lse[h]))
            rows += 64
    assert hits["float"] == rows, hits
    if d == 160:
        assert c_float != c_double and hits["double"] < 0.6 * rows, hits
    else:
        assert c_float == c_double


def d160_cases():
    out = [(n, "gap") for n in GAP_CASES if n.startswith("pre_")]
    held = json.load(open(os.path.join(RES, "heldback_manifest.json")))["cases"]
    out += [(c["name"], "heldback") for c in held if c["name"].endswith("_d160") and
            (not c["causal"] or c["shape_q"][2] == c["shape_kv"][2])]
    return out


HELD = {c["name"]: c for c in json.load(open(os.path.join(RES, "heldback_manifest.json")))["cases"]}
_held_caps = {}


@pytest.mark.parametrize("name, where", d160_cases())
def test_d160_prefill_matches_the_gpu(name, where):
    if where == "gap":
        case = GAP_CASES[name]
        q, k, v = gap_inputs(case)
        want = GAP_OUT[name + "__out"]
    else:
        if not _held_caps:
            _held_caps.update(load_captures(os.path.join(RES, "captures_heldback.npz")))
        case = HELD[name]
        q, k, v = make_inputs(case)
        want = _held_caps[case["results"]["sdpa_cudnn"]["out_key"]]
    got = run(q, k, v, case["dtype"], causal=bool(case["causal"]))
    want = want.reshape(got.shape)
    same = np.mean(got == want) * 100
    assert same >= 99.99, f"{name}: {same:.4f} % of output bits identical"
    assert np.abs(got.astype(np.int64) - want.astype(np.int64)).max() <= 1


def test_fold_product_moves_the_d160_bits():
    case = GAP_CASES["pre_uniformx30_fp16_full_h2x2_128x128_d160"]
    q, k, v = gap_inputs(case)
    want = GAP_OUT[case["name"] + "__out"].reshape(case["shape_q"])
    base = np.mean(run(q, k, v, "fp16") == want)
    other = np.mean(run(q, k, v, "fp16", {"recipe": "torch_cudnn_sm90", "fold_product": "double"}) == want)
    assert base > 0.9999 and other < 0.9, (base, other)


SWEEP_MAN = json.load(open(os.path.join(RES, "cudnn_decode_probe_manifest.json")))
SWEEP = np.load(os.path.join(RES, "cudnn_decode_probe_sweep.npz"))
SWEEP_CFG = {c["name"]: c for c in SWEEP_MAN["sweep"]}


def sweep_identity(name, kernel, every=1):
    """% identical per Skv > 512 of one sweep configuration (one input sliced to its first Skv keys)."""
    c = SWEEP_CFG[name]
    q, K, V = make_inputs(c)
    assert sha256_hex(K) == c["sha256"]["k"]
    skvs = SWEEP[name + "__skv"]
    res = {}
    for i in [i for i, s in enumerate(skvs) if s > 512][::every]:
        s = int(skvs[i])
        got = run(q, np.ascontiguousarray(K[:, :, :s]), np.ascontiguousarray(V[:, :, :s]), c["dtype"], kernel)
        res[s] = float(np.mean(got.reshape(-1) == SWEEP[name + "__out"][i].reshape(-1)) * 100)
    return res


@pytest.mark.parametrize("name", ["sweep_uniform_fp16_h8x1_d64", "sweep_uniform_fp16_h2x2_d128",
                                  "sweep_uniformx20_fp16_h2x2_d64", "sweep_uniform_fp16_h2x2_d160",
                                  "sweep_uniformx20_fp16_h8x1_d96"])
def test_split_decode_deals_blocks_strided(name):
    """Every length >= 99 % identical (one element of 64-160 one ulp apart at worst) and most every bit; dealing
    one part per block instead (the earlier model) loses bits where a CTA holds two blocks."""
    got = sweep_identity(name, "torch_cudnn_sm90")
    assert len(got) >= 15
    assert min(got.values()) >= 99.0, {s: x for s, x in got.items() if x < 99}
    assert sum(x == 100 for x in got.values()) >= 0.7 * len(got), got
    per_block = sweep_identity(name, {"recipe": "torch_cudnn_sm90", "decode_partition": "per_block"})
    assert np.mean(list(per_block.values())) < np.mean(list(got.values())) - 0.3, (per_block, got)


LATER = json.load(open(os.path.join(RES, "cudnn_decode_later_manifest.json")))["cases"]
LATER_OUT = np.load(os.path.join(RES, "cudnn_decode_later.npz"))


def test_later_decode_set():
    """48 decode cases captured after the split rule and the strided partition were fixed (Skv 777-8192, 4-64
    CTAs, D 64-160, GQA 8:1 and 2:1, three distributions, fp16/bf16): each >= 99 % of output bits, most all."""
    ids = []
    for case in LATER:
        q, k, v = make_inputs(case)
        assert sha256_hex(k) == case["sha256"]["k"], case["name"]
        got = run(q, k, v, case["dtype"])
        ids.append(np.mean(got.reshape(-1) == LATER_OUT[case["name"] + "__out"].reshape(-1)) * 100)
    assert len(ids) == 48
    assert min(ids) >= 99.0, sorted(zip(ids, [c["name"] for c in LATER]))[:5]
    assert np.median(ids) == 100.0 and sum(x == 100 for x in ids) >= 30, ids



def test_split_decode_sums_the_ctas_in_order():
    """Over every committed sweep length above 512 (16 configurations, 500 lengths) the model gives every output bit
    at 469 (measured); the lean reduction summing the CTAs the other way round gives 452: the order is the CTAs'."""
    exact = sum(sum(x == 100 for x in sweep_identity(name, "torch_cudnn_sm90").values()) for name in SWEEP_CFG)
    assert exact >= 465, exact
