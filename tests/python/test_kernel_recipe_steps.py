"""Kernel recipes, step by step: the steps that
test_kernel_recipes.py's 99.99 % tolerance or its choice of cases lets move a bit unseen, each pinned by an
independent expectation.

- GPU captures (results/hardware/kernels/, main and held-back sets) on which the recipe is exact today: every
  output bit must stay the GPU's. Each case is there for a step it alone exercises (the comment beside it).
- A hand computation: CUDA's exp2f below -126 (sass.txt k_exp2f: halve, ex2, square) keeps a subnormal P.
- The split count of FlashAttention-2's num_splits_heuristic as docs/kernel-sources.md §1 writes it (Tapi:262-327,
  2·SMs, mblocks of 64, the GQA decode swap of Tapi:408-415), transcribed here, at shapes the captures lack.
"""
import json
import math
import os
import sys

import numpy as np
import pytest

import pasa

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RES = os.path.join(ROOT, "results", "hardware", "kernels")
sys.path.insert(0, os.path.join(ROOT, "experiments", "gpu", "kernels"))
from kernel_inputs import load_captures, make_inputs, sha256_hex  # noqa: E402

SETS = {"main": ("sdpa_manifest.json", "captures_main.npz"),
        "heldback": ("heldback_manifest.json", "captures_heldback.npz")}
_loaded = {}


def case_and_captures(name):
    which = "heldback" if name.startswith("heldback_") else "main"
    if which not in _loaded:
        man, cap = SETS[which]
        cases = {c["name"]: c for c in json.load(open(os.path.join(RES, man)))["cases"]}
        _loaded[which] = (cases, load_captures(os.path.join(RES, cap)))
    cases, caps = _loaded[which]
    return cases[name], caps


# (case, recipe, GPU op whose output is the expectation, the step it pins)
EXACT = [
    # FA2's alpha = exp2f(RN(RN(m_prev - m_cur)·c)): two key blocks of 64 at d128, large scores (Tsm:154)
    ("uniformx20_bf16_full_d128_gqa", "torch_flash_sm90", "sdpa_flash"),
    ("heldback_uniformx30_fp16_full_odd255_d64", "torch_flash_sm90", "sdpa_flash"),
    # mem-efficient's quad reduce (t0 + t1) + (t2 + t3) (Tli:83-89)
    ("uniformx20_fp16_causal_d128_odd", "torch_efficient_sm90", "sdpa_efficient"),
    ("probe_singleblock_skv65_bf16_full_d64", "torch_efficient_sm90", "sdpa_efficient"),
    # the split combine's sum of expf(LSE_s - lse_max) and its logf (U257 flash_fwd_kernel.h:1139-1146)
    ("uniform_bf16_full_d64_odd", "torch_flash_sm90", "sdpa_flash"),
    ("probe_zeroq_skv300_fp16_causal_d128", "torch_flash_sm90", "sdpa_flash"),
    ("probe_scale_default_bf16_full_d128", "torch_flash_sm90", "sdpa_flash"),
    ("uniform_fp16_full_d64_rect", "torch_flash_sm90", "sdpa_flash"),
    # c = RN(scale·log2e) with log2e a double (Tapi:130): 1/sqrt(160) is a scale where it is not RN(scale·RN(log2e))
    ("heldback_uniformx30_fp16_full_gqa8x1_d160", "torch_flash_sm90", "sdpa_flash"),
    # FA2's bottom-right causal diagonal, Sq 100 < Skv 300 (aten's flash op; SDPA refuses it, Tmask:53)
    ("uniform_fp16_causal_d64_rect", "torch_flash_sm90", "aten_flash"),
    ("uniform_bf16_causal_d128_rect", "torch_flash_sm90", "aten_flash"),
]


@pytest.mark.parametrize("name, recipe, op", EXACT)
def test_recipe_is_the_gpu_bit_for_bit(name, recipe, op):
    case, caps = case_and_captures(name)
    r = case["results"][op]
    assert r["status"] == "ok" and not r.get("kv_expanded")
    key = r.get("out_key") or case["results"][r["out_same_as"]]["out_key"]
    q, k, v = make_inputs(case)
    for t, x in zip("qkv", (q, k, v)):
        assert sha256_hex(x) == case["sha256"][t], f"{name}: regenerated {t} is not the captured input"
    out, _ = pasa.attention(q, k, v, format=case["dtype"], kernel=recipe, scale=case["scale"],
                            causal=bool(case["causal"]))
    got = pasa.encode(out, case["dtype"]).astype(np.uint16)
    want = caps[key].reshape(got.shape)
    bad = np.flatnonzero(got != want)
    assert bad.size == 0, f"{name}: {bad.size} of {got.size} output bits differ from the GPU's (first at {bad[:5]})"


def test_exp2f_keeps_a_subnormal_p():
    """One query, two keys, scale ln 2 so that c = RN(scale·log2e) = 1.0f: s = (130, 0), so P = (1, exp2f(-130)).
    CUDA's exp2f below -126 halves, takes ex2 and squares (sass.txt k_exp2f): P1 = 2^-130, a float subnormal that
    bf16 holds, and with V's rows e_0, e_1, O = (1, 2^-130, 0, ...) / (1 + 2^-130) = (1, 2^-130, 0, ...).
    ex2.approx.ftz alone would give P1 = 0."""
    D = 64
    q = np.zeros((1, 1, 1, D))
    k = np.zeros((1, 1, 2, D))
    v = np.zeros((1, 1, 2, D))
    q[0, 0, 0, 0], k[0, 0, 0, 0] = 10.0, 13.0
    v[0, 0, 0, 0] = v[0, 0, 1, 1] = 1.0
    out, _ = pasa.attention(q, k, v, format="bf16", kernel="torch_flash_sm90", scale=math.log(2))
    want = np.zeros(D)
    want[0], want[1] = 1.0, 2.0 ** -130
    assert np.array_equal(out[0, 0, 0], want), out[0, 0, 0, :4]


def documented_splits(bhm, num_sms, n_blocks, max_splits=128, keep=0.85):
    """num_splits_heuristic (Tapi:262-296) as docs/kernel-sources.md §1 gives it, the efficiencies in float."""
    f = np.float32
    if f(bhm) >= f(0.8) * f(num_sms):
        return 1
    max_splits = min(max_splits, num_sms, n_blocks)
    ceildiv = lambda a, b: (a + b - 1) // b  # noqa: E731
    eligible = [s for s in range(1, max_splits + 1) if s == 1 or ceildiv(n_blocks, s) != ceildiv(n_blocks, s - 1)]
    eff = {}
    for s in eligible:
        w = f(bhm * s) / f(num_sms)
        eff[s] = w / f(math.ceil(w))
    best = max(eff.values())
    return next(s for s in eligible if eff[s] >= f(keep) * best)


SMS = 132  # H100/H200 SXM


def torch_splits(Hq, Hkv, Sq, Skv, D, **reading):
    """The split count torch's flash path asks for (batch 1): b·h·ceil(Sq/64) tiles, 2·SMs, KV blocks of the
    split kernel's kBlockN (256 for d <= 64); decode with GQA counts the group's queries as rows of one head."""
    swap = reading.get("swap", True) and Sq == 1 and Hq > Hkv
    heads, rows = (Hkv, Hq // Hkv) if swap else (Hq, Sq)
    bn = 256 if D <= 64 else 128 if D <= 128 else 64
    sms = reading.get("sms", 2 * SMS)
    return documented_splits(heads * math.ceil(rows / 64), sms, math.ceil(Skv / bn), keep=reading.get("keep", 0.85))


# (Hq, Hkv, Sq, Skv, D, the other reading of the source that this shape tells apart)
SPLIT_SHAPES = [
    (27, 27, 1, 2560, 32, {"keep": 0.8}),     # efficiency >= 0.85·max, not 0.8: 5 parts, not 4
    (27, 27, 1, 2560, 32, {"sms": SMS}),      # num_sms = 2·132: 5 parts, not 4
    (110, 110, 1, 512, 32, {"sms": SMS}),     # 110 tiles < 0.8·264: 2 parts (with 132 SMs, none)
    (64, 1, 1, 2048, 32, {"swap": False}),   # GQA decode swapped: 1 tile, 8 parts (unswapped, 64 tiles: 4)
]


@pytest.mark.parametrize("Hq, Hkv, Sq, Skv, D, other", SPLIT_SHAPES)
def test_split_count_is_the_documented_heuristics(Hq, Hkv, Sq, Skv, D, other):
    want = torch_splits(Hq, Hkv, Sq, Skv, D)
    alt = torch_splits(Hq, Hkv, Sq, Skv, D, **other)
    assert want != alt  # (the shape tells the two readings apart)
    rng = np.random.default_rng(Hq * 100003 + Skv)
    q = rng.uniform(-1, 1, (1, Hq, Sq, D))
    k = rng.uniform(-1, 1, (1, Hkv, Skv, D))
    v = rng.uniform(-1, 1, (1, Hkv, Skv, D))

    def run(kernel):
        return pasa.attention(q, k, v, format="fp16", kernel=kernel)[0]

    got = run("torch_flash_sm90")
    fixed = lambda s: run({"recipe": "torch_flash_sm90", "split": "fixed", "splits": s})  # noqa: E731
    assert np.array_equal(got, fixed(want)), f"not the {want} parts the heuristic gives"
    assert not np.array_equal(got, fixed(alt)), f"{alt} parts give the same bits: the shape tells nothing apart"
