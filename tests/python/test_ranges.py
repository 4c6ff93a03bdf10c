"""Range statistics (PASA's Fig. 5 / Figs. 11-14: K, K' = M·K, S = QKᵀ, S' = QK'ᵀ per head) from the three
front ends: pasa.range_stats, pasa-attn --ranges --json and pasa-sweep --ranges must give the same numbers,
and those numbers must equal a numpy computation of the shift (Eq. 10-12) from the generated tensors."""
import csv
import json
import math

import numpy as np
import pytest

import pasa
from conftest import run_app

BETA, S2 = 0.984497, 64


def problem(x0, am, nkv=2, seed=3):
    return {"shape": {"B": 1, "Nq": 4, "Nkv": nkv, "Sq": 32, "Skv": 160, "D": 128}, "format": "fp16", "seed": seed,
            "generator": {"kind": "uniform", "x0": x0, "am": am}}


def numpy_ranges(inputs, beta, s2):
    """K' per block of s2 keys (the last one shorter), scale 1/sqrt(D) inside; fp16 overflow = |x| >= 65520;
    causal: the scores of key j <= i + Skv - Sq only."""
    q, k = inputs["q"][0], inputs["k"][0]
    sq, skv = q.shape[1], k.shape[1]
    seen = np.arange(skv)[None, :] <= np.arange(sq)[:, None] + skv - sq if inputs.get("causal") else np.ones((sq, skv), bool)
    group = q.shape[0] // k.shape[0]
    out = []
    for h in range(q.shape[0]):
        kh = k[h // group]
        kp = np.empty_like(kh)
        for k0 in range(0, kh.shape[0], s2):
            block = kh[k0:k0 + s2]
            kp[k0:k0 + s2] = (block - beta * block.mean(axis=0)) / math.sqrt(kh.shape[1])
        s, sp = (q[h] @ kh.T)[seen], (q[h] @ kp.T)[seen]
        out.append({"head": h, "k_min": kh.min(), "k_max": kh.max(), "kp_min": kp.min(), "kp_max": kp.max(),
                    "s_min": s.min(), "s_max": s.max(), "sp_min": sp.min(), "sp_max": sp.max(),
                    "s_overflow": int((np.abs(s) >= 65520).sum()), "sp_overflow": int((np.abs(sp) >= 65520).sum()),
                    "scores": s.size})
    return out


def check_against_numpy(got, want):
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g["head"] == w["head"]
        for key in ("k_min", "k_max"):
            assert g[key] == w[key]
        for key in ("kp_min", "kp_max", "s_min", "s_max", "sp_min", "sp_max"):
            assert math.isclose(g[key], w[key], rel_tol=1e-12, abs_tol=1e-12), (key, g[key], w[key])
        assert (g["s_overflow"], g["sp_overflow"], g["scores"]) == (w["s_overflow"], w["sp_overflow"], w["scores"])


def test_python_equals_numpy_with_gqa():
    # Wide uniform keys near the fp16 limit: part of S overflows fp16, S' does not.
    inputs = pasa.generate(problem(22, 20))
    got = pasa.range_stats(**inputs, beta=BETA, s2=S2)
    want = numpy_ranges(inputs, BETA, S2)
    check_against_numpy(got, want)
    assert 0 < sum(r["s_overflow"] for r in got) < sum(r["scores"] for r in got)
    assert all(r["sp_overflow"] == 0 for r in got)
    assert [r["head"] for r in pasa.range_stats(**inputs, heads=2)] == [0, 1]
    # causal (aligned to the end, Sq < Skv): the visible scores only
    causal = dict(problem(22, 20), causal=True)
    inputs = pasa.generate(causal)
    got = pasa.range_stats(**inputs, beta=BETA, s2=S2)
    check_against_numpy(got, numpy_ranges(inputs, BETA, S2))
    assert got[0]["scores"] == sum(min(160, i + 1 + 160 - 32) for i in range(32))


def test_pasa_attn_and_sweep_give_the_same_numbers(tmp_path):
    p = problem(30, 0.5)
    (tmp_path / "p.json").write_text(json.dumps(p))
    r = run_app("pasa-attn", "--problem", tmp_path / "p.json", "--algorithm", "pasa", "--alloc", "pasa_fp16",
                "--s2", S2, "--ranges", "--json")
    from_attn = json.loads(r.stdout)["ranges"]
    inputs = pasa.generate(p)
    from_python = pasa.range_stats(**inputs, beta=BETA, s2=S2)
    assert from_attn == from_python
    assert all(x["s_overflow"] == x["scores"] and x["sp_overflow"] == 0 for x in from_attn)  # x0 = 30
    text = run_app("pasa-attn", "--problem", tmp_path / "p.json", "--ranges").stdout
    assert "ranges per head" in text and "[29.5, 30.5]" in text

    cfg = {"name": "r", "problem": dict(p, seed="$seed", generator={"kind": "uniform", "x0": "$x0", "am": 0.5}),
           "grid": {"x0": [0, 30]}, "seeds": [1, 2],
           "algorithms": [{"name": "pasa", "alloc": "pasa_fp16", "s1": 32, "s2": S2, "pasa": {"beta": 0.5}}]}
    (tmp_path / "c.json").write_text(json.dumps(cfg))
    run_app("pasa-sweep", tmp_path / "c.json", "--out", tmp_path / "s", "--ranges", 2)
    rows = list(csv.DictReader(open(tmp_path / "s" / "ranges.csv")))
    assert len(rows) == 2 * 2 * 2  # grid points x seeds x heads
    for row in rows:
        q = dict(problem(float(row["x0"]), 0.5, seed=int(row["seed"])))
        want = numpy_ranges(pasa.generate(q), 0.5, S2)[int(row["head"])]  # the config's β and s2
        got = {k: (int(v) if k in ("head", "s_overflow", "sp_overflow", "scores") else float(v)) for k, v in row.items()
               if k in want}
        check_against_numpy([got], [want])
    # inputs whose scores are not QKᵀ alone (here: kv_len) are refused before anything is run
    cfg["problem"]["kv_len"] = [100]
    (tmp_path / "m.json").write_text(json.dumps(cfg))
    r = run_app("pasa-sweep", tmp_path / "m.json", "--out", tmp_path / "m", "--ranges", 1, expect_rc=2)
    assert "kv_len" in r.stderr and not (tmp_path / "m").exists()


def test_python_sweep_ranges_equal_the_cli(tmp_path):
    """pasa.sweep(ranges=N) writes the ranges.csv of pasa-sweep --ranges N, byte for byte (whose numbers the
    test above checks against numpy), at any thread count; the same refusals, before anything is created."""
    template = dict(problem(0, 0.5), seed="$seed", generator={"kind": "uniform", "x0": "$x0", "am": 0.5})
    cfg = {"name": "r", "problem": template,
           "grid": {"x0": [0, 30]}, "seeds": [1, 2],
           "algorithms": [{"name": "pasa", "alloc": "pasa_fp16", "s1": 32, "s2": S2, "pasa": {"beta": 0.5}}]}
    (tmp_path / "c.json").write_text(json.dumps(cfg))
    run_app("pasa-sweep", tmp_path / "c.json", "--out", tmp_path / "cli", "--ranges", 3, "--threads", 1)
    cli = (tmp_path / "cli" / "ranges.csv").read_bytes()
    assert len(cli.splitlines()) == 1 + 2 * 2 * 3  # header, grid points x seeds x heads
    for threads in (1, 2):
        rows = pasa.sweep(cfg, tmp_path / f"py{threads}", threads=threads, ranges=3)
        assert rows.attrs["ranges"] == str(tmp_path / f"py{threads}" / "ranges.csv")
        assert (tmp_path / f"py{threads}" / "ranges.csv").read_bytes() == cli
    assert pasa.sweep(cfg, tmp_path / "none", threads=1).attrs["ranges"] is None
    assert not (tmp_path / "none" / "ranges.csv").exists()
    with pytest.raises(ValueError, match="ranges: not with shard"):
        pasa.sweep(cfg, tmp_path / "shard", ranges=1, shard="0/2")
    with pytest.raises(ValueError, match="ranges"):
        pasa.sweep(cfg, tmp_path / "zero", ranges=0)
    cfg["problem"]["kv_len"] = [100]
    with pytest.raises(ValueError, match="kv_len"):
        pasa.sweep(cfg, tmp_path / "m", ranges=1)
    assert not (tmp_path / "m").exists() and not (tmp_path / "shard").exists() and not (tmp_path / "zero").exists()
