"""FlashAttention-3 and -4 recipes (fa3_sm90, fa3_fp8_sm90, fa4_sm100, fa4_fp8_sm100): no GPU that runs them was
lent, so these tests check each modelled mechanism against the kernel sources read independently here (the
tuning table of FA4's software exp2, its lazy rescale and the FP8 P saturation of flash-attention #2716, FA3's
tile choice, the FP8 bf16 output), and the recipes against the MPFR golden."""
import numpy as np
import pytest

import pasa


def rel_rmse(a, b):
    return float(np.sqrt(np.mean((a - b) ** 2)) / np.sqrt(np.mean(b ** 2)))


def inputs(seed, B=1, Hq=2, Hkv=2, Sq=64, Skv=300, D=128, lo=-1.0, hi=1.0):
    rng = np.random.default_rng(seed)
    q = rng.uniform(lo, hi, (B, Hq, Sq, D))
    k = rng.uniform(lo, hi, (B, Hkv, Skv, D))
    v = rng.uniform(-1, 1, (B, Hkv, Skv, D))
    return q, k, v


@pytest.mark.parametrize("kernel, fmt, bound", [("fa3_sm90", "fp16", 2.0**-9), ("fa3_sm90", "bf16", 2.0**-6),
                                                ("fa4_sm100", "fp16", 2.0**-9), ("fa4_sm100", "bf16", 2.0**-6),
                                                ("fa3_fp8_sm90", "fp8_e4m3fn", 2.0**-3),
                                                ("fa4_fp8_sm100", "fp8_e4m3fn", 2.0**-3)])
@pytest.mark.parametrize("causal", [False, True])
def test_recipe_is_close_to_the_golden(kernel, fmt, bound, causal):
    q, k, v = inputs(1, Sq=300, Skv=300)
    o, lse = pasa.attention(q, k, v, format=fmt, kernel=kernel, causal=causal)
    g, glse = pasa.attention(q, k, v, format=fmt, alloc="fp64", algorithm="safe_softmax", causal=causal)
    assert rel_rmse(o, g) < bound
    assert np.max(np.abs(lse - glse)) < 1e-2
    # FP8 inputs give a bf16 output (flash_api.cpp:859, interface.py out_torch_dtype): every value a bf16
    out_fmt = "bf16" if "fp8" in kernel else fmt
    assert np.array_equal(pasa.round(o, out_fmt), o)
    if "fp8" in kernel:
        assert not np.array_equal(pasa.round(o, "fp8_e4m3fn"), o)


# FA4's software-exp2 choice (flash_fwd_sm100.py _TUNING_CONFIG / defaults, interface.py use_2cta_instrs), read
# here from the source on its own: (Hq, Hkv, Sq, D, causal) -> (freq, start), freq 0 = MUFU only; res is 4.
FA4_CHOICES = [
    ((1, 1, 64, 128, False), (16, 1)),   # 1-CTA (Sq <= 256), not in the table: the defaults
    ((1, 1, 300, 128, False), (10, 1)),  # 2-CTA non-causal hd128
    ((4, 1, 64, 128, False), (10, 1)),   # PackGQA, non-causal, hd > 64: 10 (Sq·G = 256: still 1-CTA)
    ((1, 1, 300, 128, True), (16, 1)),   # causal hd128
    ((1, 1, 300, 64, False), (16, 1)),   # hd64: defaults, no PackGQA rule (hd > 64 only)
    ((1, 1, 300, 192, False), (0, 1)),   # hd192 with dv 192: 1-CTA, emulation off
    ((1, 1, 300, 192, True), (32, 1)),   # causal hd192
]


@pytest.mark.parametrize("shape, choice", FA4_CHOICES)
def test_fa4_software_exp2_follows_its_tuning_table(shape, choice):
    Hq, Hkv, Sq, D, causal = shape
    q, k, v = inputs(2, Hq=Hq, Hkv=Hkv, Sq=Sq, Skv=260, D=D)
    tuned, _ = pasa.attention(q, k, v, format="bf16", kernel="fa4_sm100", causal=causal)
    freq, start = choice
    fixed = {"recipe": "fa4_sm100", "soft_exp2": "fixed", "soft_exp2_freq": freq, "soft_exp2_res": 4,
             "soft_exp2_start": start}
    same, _ = pasa.attention(q, k, v, format="bf16", kernel=fixed, causal=causal)
    assert np.array_equal(tuned, same)
    other = dict(fixed, soft_exp2_freq=8 if freq != 8 else 16)
    moved, _ = pasa.attention(q, k, v, format="bf16", kernel=other, causal=causal)
    assert not np.array_equal(tuned, moved), "the pattern should move some bits"


def test_fa4_exp2_pairs_are_the_emulated_columns():
    # One query, one block of 128 keys, V the identity: O[j] = P_j / l, so the columns whose P takes the software
    # exp2 are those where soft_exp2 moves the output. freq 16, res 4, start 1: pairs k mod 16 in {12, 14} of
    # fragments 1 and 2 (the last fragment, 3, is never emulated).
    D = 128
    rng = np.random.default_rng(3)
    q = rng.uniform(-1, 1, (1, 1, 1, D))
    k = rng.uniform(-1, 1, (1, 1, 128, D))
    v = np.eye(128)[None, None]
    hw, _ = pasa.attention(q, k, v, format="fp16", kernel={"recipe": "fa4_sm100", "soft_exp2": "none"})
    sw, _ = pasa.attention(q, k, v, format="fp16", kernel={"recipe": "fa4_sm100", "soft_exp2": "fixed",
                                                           "soft_exp2_freq": 16, "soft_exp2_res": 4,
                                                           "soft_exp2_start": 1})
    emulated = {32 * j + k0 + e for j in (1, 2) for k0 in (12, 14, 28, 30) for e in (0, 1)}
    differ = set(np.nonzero(hw[0, 0, 0] != sw[0, 0, 0])[0].tolist())
    assert differ and differ <= emulated, (sorted(differ), sorted(emulated))


def lazy_case():
    # Reverse KV order: the block of keys 128..255 first, all at score 0, then keys 0..127 whose scores are
    # 3.9 log2 units higher: FA4 keeps the old max (3.9 < threshold), so their P is 2^(3.9 + offset).
    D = 16
    q = np.zeros((1, 1, 1, D))
    q[..., 0] = 1.0
    k = np.zeros((1, 1, 256, D))
    scale = 0.125
    k[0, 0, :128, 0] = 3.9 / (scale * np.log2(np.e))  # (rounded to fp8 / fp16 by the format)
    v = np.random.default_rng(4).uniform(-1, 1, (1, 1, 256, D))
    return q, k, v, scale


def test_fa4_fp8_threshold_4_saturates_p():
    # flash-attention #2716: max_offset 8 with rescale threshold 4 lets P reach 2^(8 + 3.9) > 448 = e4m3's max,
    # so P saturates in its cast while l counts it in full: the output shrinks. HEAD's FP8 threshold 0 does not.
    q, k, v, scale = lazy_case()
    g, _ = pasa.attention(q, k, v, format="fp8_e4m3fn", alloc="fp64", algorithm="safe_softmax", scale=scale)
    head, _ = pasa.attention(q, k, v, format="fp8_e4m3fn", kernel="fa4_fp8_sm100", scale=scale)
    bug, _ = pasa.attention(q, k, v, format="fp8_e4m3fn", scale=scale,
                            kernel={"recipe": "fa4_fp8_sm100", "rescale": "lazy", "rescale_threshold": 4})
    assert rel_rmse(head, g) < 0.1
    assert rel_rmse(bug, g) > 0.5
    assert np.sum(np.abs(bug)) < 0.5 * np.sum(np.abs(g))  # shrunk: 448/2^11.9 of the weight kept
    with pytest.raises(ValueError, match="P can reach 2\\^12 .* it would overflow"):
        pasa.attention(q, k, v, format="fp8_e4m3fn", scale=scale,
                       kernel={"recipe": "fa4_fp8_sm100", "rescale": "lazy", "rescale_threshold": 4,
                               "p_saturate": False})


def test_fa4_lazy_rescale_keeps_the_old_max():
    # 16-bit: threshold 8 keeps the first block's max; the result stays correct (P up to 2^3.9 fits fp16), but
    # its bits differ from rescaling at once.
    q, k, v, scale = lazy_case()
    g, _ = pasa.attention(q, k, v, format="fp16", alloc="fp64", algorithm="safe_softmax", scale=scale)
    lazy, _ = pasa.attention(q, k, v, format="fp16", kernel="fa4_sm100", scale=scale)
    eager, _ = pasa.attention(q, k, v, format="fp16", kernel={"recipe": "fa4_sm100", "rescale": "always"}, scale=scale)
    assert rel_rmse(lazy, g) < 2.0**-9 and rel_rmse(eager, g) < 2.0**-9
    assert not np.array_equal(lazy, eager)


@pytest.mark.parametrize("D, causal, block", [(64, False, 192), (64, True, 128), (96, False, 144), (128, False, 176),
                                              (128, True, 128), (160, False, 112), (256, False, 80)])
def test_fa3_tile_is_tile_size_fwd_sm90(D, causal, block):
    q, k, v = inputs(5, Sq=96, Skv=400, D=D)
    a, _ = pasa.attention(q, k, v, format="fp16", kernel="fa3_sm90", causal=causal)
    b, _ = pasa.attention(q, k, v, format="fp16", causal=causal,
                          kernel={"recipe": "fa3_sm90", "block_n": block, "causal_block_n": None})
    assert np.array_equal(a, b)
    c, _ = pasa.attention(q, k, v, format="fp16", causal=causal,
                          kernel={"recipe": "fa3_sm90", "block_n": 64, "causal_block_n": None})
    assert not np.array_equal(a, c)


def test_fa3_fp8_two_level_accumulation_is_an_option():
    # vllm #23813's mechanism: V of positive mean makes O grow, and the chained e8m13 accumulator truncates it
    # at every wgmma; one fp32 add per KV block (PR #2250) keeps the error at P's rounding (docs/kernels.md:
    # 26-29x at Skv 4096 over 3 seeds).
    q, k, _ = inputs(6, Sq=8, Skv=4096)
    v = np.random.default_rng(7).uniform(0, 1, k.shape)
    g, _ = pasa.attention(q, k, v, format="fp8_e4m3fn", alloc="fp64", algorithm="safe_softmax")
    a, _ = pasa.attention(q, k, v, format="fp8_e4m3fn", kernel="fa3_fp8_sm90")
    b, _ = pasa.attention(q, k, v, format="fp8_e4m3fn", kernel={"recipe": "fa3_fp8_sm90", "pv_two_level": True})
    assert rel_rmse(a, g) > 0.03 and rel_rmse(b, g) < 0.005
    listed = {r["name"]: r for r in pasa.kernels()}
    assert listed["fa3_fp8_sm90"]["schedule"]["pv_two_level"] is False
    assert "not measured" in listed["fa3_fp8_sm90"]["status"]


def test_refusals_name_the_recipe_and_the_value():
    q, k, v = inputs(7, Sq=8, Skv=8, D=256)
    with pytest.raises(ValueError, match="kernel fa4_sm100: head dimension 256 is above the 192"):
        pasa.attention(q, k, v, format="fp16", kernel="fa4_sm100")
    with pytest.raises(ValueError, match="fa3_fp8_sm90: runs on Q, K and V of one format among fp8_e4m3fn"):
        pasa.attention(q, k, v, format="fp16", kernel="fa3_fp8_sm90")
    with pytest.raises(ValueError, match="kernel/inputs/0: \"fp32\": a kernel recipe takes 16-bit or 8-bit inputs"):
        pasa.attention(q, k, v, format="fp16", kernel={"recipe": "fa3_sm90", "inputs": ["fp32"]})
    with pytest.raises(ValueError, match="kernel/soft_exp2_freq: a fixed software-exp2 pattern needs"):
        pasa.attention(q, k, v, format="fp16", kernel={"recipe": "fa3_sm90", "soft_exp2_freq": 4})
    with pytest.raises(ValueError, match="kernel/rescale_threshold: -1.*expected 0 to 64"):
        pasa.attention(q, k, v, format="fp16", kernel={"recipe": "fa4_sm100", "rescale_threshold": -1})


def one_block_case(seed, D=128, n=128):
    """One query, n keys of one block, integer Q and K (exact scores), V the identity: O[j] = P_j / l."""
    rng = np.random.default_rng(seed)
    q = rng.integers(-1, 2, (1, 1, 1, D)).astype(np.float64)
    k = rng.integers(-1, 2, (1, 1, n, D)).astype(np.float64)
    v = np.eye(n, D)[None, None]
    return q, k, v


def expected_one_block(q, k, row_sum, soft):
    """The softmax chain of FA3/FA4 written out here from their sources, in float32 numpy and the measured GPU
    units: u = RN(m·c), P = ex2(FFMA(s, c, −u)) (the FMA exact in float64: s is a small integer), the row sum
    in the kernel's layout, inv = MUFU.RCP(l), O_j = RN(fp16(P_j)·inv), left in fp32 (the recipe's output set
    to fp32, so that every bit of l and inv shows)."""
    D = q.shape[-1]
    s = (q[0, 0, 0] @ k[0, 0].T).astype(np.float64)
    scale = np.float32(1 / np.sqrt(D))
    c = np.float32(np.float64(scale) * np.log2(np.e))
    u = np.float32(np.float64(np.float32(s.max())) * np.float64(c))
    arg = (s * np.float64(c) - np.float64(u)).astype(np.float32)
    P = pasa.gpu_math(arg, "ex2")
    for j in soft:
        P[j] = pasa.gpu_math(arg[j:j + 1], "ex2_poly3")[0]
    if row_sum == "quad_fragment":  # thread t: columns 8i + 2t + {0, 1} in order; (t0 + t2) + (t1 + t3)
        t = [np.float32(0)] * 4
        for j, p in enumerate(P):
            t[(j % 8) // 2] = np.float32(t[(j % 8) // 2] + p)
        l = np.float32(np.float32(t[0] + t[2]) + np.float32(t[1] + t[3]))
    else:  # row_interleaved8: a[j mod 8], then ((a0 + a2) + (a4 + a6)) + ((a1 + a3) + (a5 + a7))
        a = list(P[:8])
        for j in range(8, len(P)):
            a[j % 8] = np.float32(a[j % 8] + P[j])
        f = lambda x, y: np.float32(x + y)  # noqa: E731
        l = f(f(f(a[0], a[2]), f(a[4], a[6])), f(f(a[1], a[3]), f(a[5], a[7])))
    inv = pasa.gpu_math(np.float32([l]), "rcp")[0]
    p16 = P.astype(np.float16).astype(np.float32)
    return (p16 * inv).astype(np.float32).astype(np.float64)


@pytest.mark.parametrize("kernel, row_sum, soft", [
    ("fa3_sm90", "quad_fragment", []),
    ("fa4_sm100", "row_interleaved8", [32 * f + k0 + e for f in (1, 2) for k0 in (12, 14, 28, 30) for e in (0, 1)])])
def test_one_block_softmax_chain_bit_for_bit(kernel, row_sum, soft):
    moved = {"normalise": 0, "row_sum": 0}
    other = "quad_fragment" if row_sum != "quad_fragment" else "row_interleaved8"
    for seed in range(16):
        q, k, v = one_block_case(seed)
        out, _ = pasa.attention(q, k, v, format="fp16", kernel={"recipe": kernel, "output": "fp32"})
        want = expected_one_block(q, k, row_sum, soft)
        assert np.array_equal(out[0, 0, 0], want), (seed, np.nonzero(out[0, 0, 0] != want))
        # (the check has power: IEEE 1/l or another row-sum order would have been seen)
        ieee, _ = pasa.attention(q, k, v, format="fp16",
                                 kernel={"recipe": kernel, "output": "fp32", "normalise": "reciprocal"})
        moved["normalise"] += not np.array_equal(ieee, out)
        moved["row_sum"] += not np.array_equal(expected_one_block(q, k, other, soft), want)
    assert moved["normalise"] > 0 and moved["row_sum"] > 0, moved


@pytest.mark.parametrize("mode", ["rz", "ru", "rd", "rne"])
def test_out_round_is_the_output_cast(mode):
    # The output cast alone: the fp32 output of the same schedule, rounded to fp16 in that mode by pasa.round.
    q, k, v = inputs(8, Sq=40, Skv=200, D=64)
    o32, _ = pasa.attention(q, k, v, format="fp16", kernel={"recipe": "torch_flash_sm90", "output": "fp32"})
    o16, _ = pasa.attention(q, k, v, format="fp16", kernel={"recipe": "torch_flash_sm90", "out_round": mode})
    assert np.array_equal(o16, pasa.round(o32, "fp16", mode=mode))


def ifa_alloc(fmt, mode="rna"):
    base = "fa_fp32" if fmt == "fp16" else "fa_fp32_bf16"
    return {"preset": base, "stages": {"p": {"format": fmt, "round": mode}, "out": {"format": fmt, "round": mode}}}


@pytest.mark.parametrize("fmt", ["fp16", "bf16"])
@pytest.mark.parametrize("Hq, s2", [(2, 8192), (5, 4096), (10, 2048)])
def test_ascend_ifa_is_fa2_with_its_casts_and_blocks(fmt, Hq, s2):
    # Seed 004's pipeline written as a pasa algorithm here: fa2, fp32 softmax, P and out cast with CAST_ROUND
    # (rna), the KV block of CalcInnerSize for G = Hq query heads on one KV head.
    rng = np.random.default_rng(9)
    q = rng.uniform(-1, 1, (1, Hq, 1, 64))
    k = rng.uniform(-1, 1, (1, 1, 9000, 64))
    v = rng.uniform(-1, 1, (1, 1, 9000, 64))
    pse = rng.uniform(-2, 2, (1, Hq, 1, 9000))
    sel = rng.uniform(size=(1, 1, 9000)) < 0.1
    got, _ = pasa.attention(q, k, v, format=fmt, kernel="ascend_ifa", pse=pse, select=sel, kv_len=[8500])
    want, _ = pasa.attention(q, k, v, format=fmt, algorithm="fa2", alloc=ifa_alloc(fmt), s1=1, s2=s2, pse=pse,
                             select=sel, kv_len=[8500])
    assert np.array_equal(got, want)
    other, _ = pasa.attention(q, k, v, format=fmt, algorithm="fa2", alloc=ifa_alloc(fmt), s1=1,
                              s2=2048 if s2 != 2048 else 8192, pse=pse, select=sel, kv_len=[8500])
    assert not np.array_equal(got, other), "the block size should move bits"
    g, _ = pasa.attention(q, k, v, format=fmt, alloc="fp64", algorithm="safe_softmax", pse=pse, select=sel,
                          kv_len=[8500])
    assert rel_rmse(got, g) < (2.0**-9 if fmt == "fp16" else 2.0**-6)


def test_ascend_ifa_casts_ties_away():
    # CAST_ROUND against CAST_RINT: on enough P and outputs some ties occur, and the two part there.
    q, k, v = inputs(10, Hq=4, Hkv=4, Sq=32, Skv=600, D=64)
    rna, _ = pasa.attention(q, k, v, format="fp16", kernel="ascend_ifa")
    rne, _ = pasa.attention(q, k, v, format="fp16", kernel={"recipe": "ascend_ifa", "p_round": "rne",
                                                            "out_round": "rne"})
    assert not np.array_equal(rna, rne)
    assert rel_rmse(rna, rne) < 2.0**-11  # (a tie's neighbour: P or the output one fp16 ulp apart)
