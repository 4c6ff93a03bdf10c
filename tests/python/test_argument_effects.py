"""Arguments of the Python module that must change the result: unified_attention's and
unified_golden's scale= (against attention computed by numpy in float64 with that scale, and against the
dense pasa.attention of each gathered sequence), and attention's seed= under stochastic rounding (against the
same seed given through spec=, and another seed)."""
import numpy as np

import pasa
from conftest import assert_same_bits

# A decode step with cached context, a fresh prefill and a chunked prefill, GQA 4 on 2.
PAGED = {"kind": "paged", "shape": {"Nq": 4, "Nkv": 2, "D": 16}, "format": "fp16", "seed": 3,
         "generator": {"kind": "uniform", "x0": 0, "am": 2}, "block_size": 8,
         "sequences": [{"q_len": 1, "ctx_len": 37}, {"q_len": 9, "ctx_len": 9}, {"q_len": 5, "ctx_len": 20}]}
SR_ALLOC = {"preset": "fa_fp16_fp32", "stages": {"p": {"format": "fp16", "round": "sr"},
                                                 "o": {"format": "fp16", "round": "sr"}}}


def gathered(inputs, s):
    """Sequence s's new tokens' Q (Nq, q_len, D) and its context's K, V (Nkv, ctx_len, D) from the cache."""
    seqs = inputs["sequences"]
    sq = seqs[s]
    off = sum(x["q_len"] for x in seqs[:s])
    q = np.asarray(inputs["q"], dtype=np.float64)[0, :, off:off + sq["q_len"]]
    k = np.concatenate([inputs["k_cache"][b] for b in sq["block_table"]], axis=1)[:, :sq["ctx_len"]]
    v = np.concatenate([inputs["v_cache"][b] for b in sq["block_table"]], axis=1)[:, :sq["ctx_len"]]
    return q, np.asarray(k, dtype=np.float64), np.asarray(v, dtype=np.float64)


def numpy_unified(inputs, scale):
    """Causal (bottom-right) GQA attention of every sequence in float64, concatenated like unified's output."""
    outs = []
    for s, sq in enumerate(inputs["sequences"]):
        q, k, v = gathered(inputs, s)
        G = q.shape[0] // k.shape[0]
        k, v = np.repeat(k, G, axis=0), np.repeat(v, G, axis=0)
        sc = np.einsum("hid,hjd->hij", q, k) * scale
        cached = sq["ctx_len"] - sq["q_len"]
        visible = np.arange(sq["ctx_len"])[None, :] <= cached + np.arange(sq["q_len"])[:, None]
        sc = np.where(visible[None], sc, -np.inf)
        w = np.exp(sc - sc.max(axis=2, keepdims=True))
        outs.append(np.einsum("hij,hjd->hid", w / w.sum(axis=2, keepdims=True), v))
    return np.concatenate(outs, axis=1)[None]


def test_unified_scale_reaches_attention_and_golden():
    inputs = pasa.generate(PAGED, threads=2)
    base = {k: inputs[k] for k in ("q", "k_cache", "v_cache", "sequences")}
    default = numpy_unified(inputs, 1 / np.sqrt(16))
    for scale in (1.0, 0.1):
        want = numpy_unified(inputs, scale)
        assert np.max(np.abs(want - default)) > 1e-3  # the scale matters on these inputs
        out, _ = pasa.unified_attention(**base, format="fp16", scale=scale, algorithm="fa2", alloc="fp64", threads=2)
        assert np.max(np.abs(out - want)) < 1e-12, scale
        golden = pasa.unified_golden(**base, format="fp16", scale=scale, threads=2)["out"]
        assert np.max(np.abs(golden - want)) < 1e-12, scale
        # Low precision too: each sequence's rows are the dense engine's on the gathered sequence with the
        # same scale (a fresh prefill: one causal part, bit for bit).
        low, _ = pasa.unified_attention(**base, format="fp16", scale=scale, alloc="fa_fp16_fp32", s1=16, s2=16)
        q, k, v = gathered(inputs, 1)
        dense, _ = pasa.attention(q[None], k[None], v[None], format="fp16", scale=scale, causal=True,
                                  alloc="fa_fp16_fp32", s1=16, s2=16)
        assert_same_bits(low[:, :, 1:10], dense)
    # None is the default 1/sqrt(D).
    out, _ = pasa.unified_attention(**base, format="fp16", alloc="fp64")
    assert np.max(np.abs(out - default)) < 1e-12


def test_attention_seed_moves_stochastic_rounding():
    rng = np.random.default_rng(37)
    q, k, v = (rng.uniform(-1, 1, (1, 2, n, 32)).astype(np.float16) for n in (24, 96, 96))
    spec = {"name": "fa2", "alloc": SR_ALLOC, "s1": 128, "s2": 128}

    def run(**kw):
        return pasa.attention(q, k, v, alloc=SR_ALLOC, s1=128, s2=128, **kw)[0]

    one, two = run(seed=1), run(seed=2)
    assert_same_bits(one, run(seed=1))  # reproducible
    assert not np.array_equal(one, two)  # another seed, other roundings
    # The seed argument is the spec's seed.
    assert_same_bits(one, pasa.attention(q, k, v, spec=dict(spec, seed=1))[0])
    assert_same_bits(two, pasa.attention(q, k, v, spec=dict(spec, seed=2))[0])
    assert_same_bits(run(), pasa.attention(q, k, v, spec=spec)[0])  # no seed: the spec's default
