"""One problem, every front end: the same problems (prefill; decode with a position bias, a select
mask and kv_len, drawn and as the user's .npy tensors; split-KV) through pasa-attn (--problem, and .npy
inputs with --pse/--select/--kv-len), pasa-sweep and Python (generate() then attention(), and the user's
arrays as arguments) give the same output bits and the same metrics; what a front end cannot express is
refused with a message that names it."""
import csv
import json

import numpy as np
import pytest

import pasa
from conftest import app_error, assert_same_bits, assert_same_json, run_app

PREFILL = {"shape": {"B": 2, "Nq": 4, "Nkv": 2, "Sq": 96, "Skv": 160, "D": 32}, "format": "fp16", "seed": 3,
           "causal": True, "kv_len": [160, 101], "generator": {"kind": "hybrid", "x0": 2, "am": 8, "p": 0.01}}
# README's decode.json, smaller: drawn pse and select mask, per-batch lengths, GQA.
DECODE = {"shape": {"B": 2, "Nq": 8, "Nkv": 2, "Sq": 1, "Skv": 512, "D": 64}, "format": "fp16", "seed": 1,
          "kv_len": [512, 300], "generator": {"kind": "uniform", "x0": 0, "am": 1},
          "pse": {"kind": "uniform", "x0": 0, "am": 2}, "select": {"p": 0.1, "value": -1e12}}
# Paged KV / unified attention ([UA]): a decode step and a chunked prefill sharing a 4-block prefix (the second
# through share_from), a fresh prefill, a long decode step; a generated block table over a cache with spares.
PAGED = {"kind": "paged", "shape": {"Nq": 4, "Nkv": 2, "D": 32}, "format": "fp16", "seed": 5,
         "generator": {"kind": "hybrid", "x0": 1, "am": 6, "p": 0.02}, "block_size": 16, "num_blocks": 40,
         "sequences": [{"q_len": 1, "ctx_len": 150, "shared_blocks": 4},
                       {"q_len": 24, "ctx_len": 88, "shared_blocks": 4, "share_from": 0},
                       {"q_len": 17, "ctx_len": 17}, {"q_len": 1, "ctx_len": 300}]}
FA = {"name": "fa2", "alloc": "fa_fp16_fp32", "s1": 64, "s2": 64}
SPLIT = {"name": "fa2", "alloc": {"preset": "fa_fp16", "stages": {"merge": "fp32"}}, "s1": 1, "s2": 64, "splits": 4}
PASA = {"name": "pasa", "alloc": "pasa_fp16", "s1": 64, "s2": 64, "pasa": {"beta": 0.984497}}


def user_decode(tmp_path, rng):
    """DECODE with the user's own pse (fp16 values, batch-broadcast), a 4-D select mask (the same for every
    head) and kv_len, as .npy files named relative to the problem file."""
    B, Nq, Sq, Skv = 2, 8, 1, 512
    d = tmp_path / "tensors"
    d.mkdir(exist_ok=True)
    pse = rng.normal(0, 2, (1, Nq, Sq, Skv)).astype(np.float16)
    sel3 = rng.random((B, Sq, Skv)) < 0.15
    sel4 = np.broadcast_to(sel3[:, None], (B, Nq, Sq, Skv)).copy()
    kv_len = np.array([417, 512], dtype=np.int64)
    np.save(d / "pse.npy", pse)
    np.save(d / "select.npy", sel4)
    np.save(d / "kv_len.npy", kv_len)
    problem = dict(DECODE, pse={"npy": "tensors/pse.npy"}, select={"npy": "tensors/select.npy", "value": -3e4},
                   kv_len={"npy": "tensors/kv_len.npy"})
    return problem, {"pse": pse, "select": sel3, "select4": sel4, "kv_len": kv_len}


def cli_run(tmp_path, problem, algo, tag):
    (tmp_path / f"{tag}.json").write_text(json.dumps(problem))
    (tmp_path / f"{tag}_algo.json").write_text(json.dumps(algo))
    r = run_app("pasa-attn", "--problem", tmp_path / f"{tag}.json", "--algo-json", tmp_path / f"{tag}_algo.json",
                "--out-npy", tmp_path / f"{tag}_o.npy", "--json", "--threads", 2)
    return np.load(tmp_path / f"{tag}_o.npy"), json.loads(r.stdout)


def sweep_metrics(tmp_path, problem, algos, tag):
    """The metric columns of a pasa-sweep run of the problem (one seed, no grid), per algorithm label."""
    cfg = {"name": tag, "problem": dict(problem, seed="$seed"), "seeds": [problem["seed"]],
           "algorithms": [dict(a, label=f"a{i}") for i, a in enumerate(algos)],
           "outputs": {"dir": str(tmp_path / f"sweep_{tag}")}}
    (tmp_path / f"sweep_{tag}.json").write_text(json.dumps(cfg))
    run_app("pasa-sweep", tmp_path / f"sweep_{tag}.json", "--threads", 2)
    with open(tmp_path / f"sweep_{tag}" / "results.csv") as f:
        return {row["algorithm"]: row for row in csv.DictReader(f)}


def check_all_routes(tmp_path, problem, algos, tag, cwd_problem=None):
    """pasa-attn --problem, pasa-sweep and pasa.generate + pasa.attention (a paged problem:
    pasa.unified_attention) agree bit for bit."""
    inputs = pasa.generate(cwd_problem or problem, threads=2)
    paged = problem.get("kind") == "paged"
    attention, golden_of, baseline_of, score_stats = (
        (pasa.unified_attention, pasa.unified_golden, pasa.unified_baseline, pasa.unified_score_stats) if paged
        else (pasa.attention, pasa.golden, pasa.uniform_baseline, pasa.score_stats))
    golden = golden_of(**inputs, threads=2)
    baseline = baseline_of(**inputs, threads=2)
    rows = sweep_metrics(tmp_path, problem, algos, tag)
    outs = []
    for i, algo in enumerate(algos):
        o_cli, j = cli_run(tmp_path, problem, algo, f"{tag}{i}")
        out, _ = attention(**inputs, spec=algo, threads=2)
        assert_same_bits(out, o_cli)
        m = pasa.metrics(out, golden, baseline)
        assert m.pop("rel_rmse") == m["rmse"]  # Eq. 19's name; "rmse" is the programs' key
        assert_same_json(m, j["metrics"])
        assert_same_json(score_stats(**inputs), j["scores"])
        row = rows[f"a{i}"]
        for key, value in j["metrics"].items():  # the CSV writes 17 significant digits: exact
            if isinstance(value, (int, float)):
                assert float(row[key]) == float(value) or (np.isnan(float(row[key])) and np.isnan(value)), key
        outs.append(out)
    return inputs, outs


def test_prefill_every_route(tmp_path):
    check_all_routes(tmp_path, PREFILL, [FA, PASA], "prefill")


def test_decode_drawn_pse_and_select_every_route(tmp_path):
    inputs, outs = check_all_routes(tmp_path, DECODE, [FA, SPLIT], "decode")
    # generate() returns the decode inputs; without them attention() is another problem (once
    # 3.0333e-4 vs 2.90772e-4): they must matter here, or the test above could not fail.
    assert inputs["pse"].shape == (2, 8, 1, 512) and inputs["select"].dtype == np.bool_
    assert inputs["select"].any() and inputs["select_value"] == -1e12
    dropped = {k: v for k, v in inputs.items() if k not in ("pse", "select", "select_value")}
    out, _ = pasa.attention(**dropped, spec=FA, threads=2)
    assert not np.array_equal(out, outs[0])


def test_decode_user_tensors_every_route(tmp_path, rng, monkeypatch):
    problem, t = user_decode(tmp_path, rng)
    monkeypatch.chdir(tmp_path)  # Python's generate() reads relative names from the working directory
    inputs, outs = check_all_routes(tmp_path, problem, [FA, SPLIT], "user")
    assert_same_bits(inputs["pse"], np.broadcast_to(t["pse"].astype(np.float64), (1, 8, 1, 512)))
    assert np.array_equal(inputs["select"], t["select"]) and inputs["kv_len"] == [417, 512]
    # The user's arrays as Python arguments (3-D and 4-D masks, an int array kv_len): the same bits.
    for sel in (t["select"], t["select4"]):
        out, _ = pasa.attention(inputs["q"], inputs["k"], inputs["v"], format="fp16", kv_len=t["kv_len"],
                                pse=t["pse"], select=sel, select_value=-3e4, spec=FA, threads=2)
        assert_same_bits(out, outs[0])
    # pasa-attn on .npy Q/K/V with --pse/--select/--kv-len: the same bits.
    for name in "qkv":
        np.save(tmp_path / f"{name}.npy", inputs[name].astype(np.float16))
    (tmp_path / "fa.json").write_text(json.dumps(FA))
    run_app("pasa-attn", "--q", tmp_path / "q.npy", "--k", tmp_path / "k.npy", "--v", tmp_path / "v.npy",
            "--pse", tmp_path / "tensors/pse.npy", "--select", tmp_path / "tensors/select.npy", "--select-value",
            -3e4, "--kv-len", tmp_path / "tensors/kv_len.npy", "--algo-json", tmp_path / "fa.json",
            "--out-npy", tmp_path / "o_npy.npy", "--threads", 2)
    assert_same_bits(np.load(tmp_path / "o_npy.npy"), outs[0])


def test_user_tensor_errors_name_file_and_place(tmp_path, rng):
    problem, t = user_decode(tmp_path, rng)
    d = tmp_path / "tensors"
    np.save(d / "bad_pse.npy", np.zeros((2, 8, 1, 511), np.float32))
    np.save(d / "bad_sel.npy", np.ones((2, 1, 512), np.float32))
    heads = t["select4"].copy()
    heads[1, 3, 0, 7] = ~heads[1, 3, 0, 7]
    np.save(d / "heads.npy", heads)
    np.save(d / "neg.npy", np.array([5, -1]))
    cases = [
        ({"pse": {"npy": "tensors/bad_pse.npy"}}, ["/pse/npy", "bad_pse.npy", "(2, 8, 1, 511)", "Skv"]),
        ({"select": {"npy": "tensors/bad_sel.npy"}}, ["/select/npy", "bad_sel.npy", "<f4"]),
        ({"select": {"npy": "tensors/heads.npy"}}, ["/select/npy", "heads.npy", "heads 0 and 3", "b=1, i=0, j=7"]),
        ({"select": {"npy": "tensors/heads.npy", "p": 0.1}}, ["/select", "not both"]),
        ({"kv_len": {"npy": "tensors/neg.npy"}}, ["/kv_len/npy", "neg.npy", "kv_len[1] = -1"]),
        ({"pse": {"npy": "tensors/missing.npy"}}, ["/pse/npy", "missing.npy", "cannot open"]),
    ]
    for change, words in cases:
        (tmp_path / "p.json").write_text(json.dumps(dict(problem, **change)))
        msg = app_error("pasa-attn", "--problem", tmp_path / "p.json")
        assert msg.startswith(str(tmp_path / "p.json")), msg
        for w in words:
            assert w in msg, (w, msg)
    # Python arguments: the same checks, named by the argument.
    inputs = pasa.generate(DECODE)
    with pytest.raises(ValueError, match=r"pse: pse shape \(8, 1, 512\) is not \(B or 1, Nq, Sq, Skv\)"):
        pasa.attention(inputs["q"], inputs["k"], inputs["v"], pse=np.zeros((8, 1, 512)))
    with pytest.raises(ValueError, match="select: select mask differs between heads 0 and 3"):
        pasa.attention(inputs["q"], inputs["k"], inputs["v"], select=heads)
    with pytest.raises(ValueError, match="kv_len: kv_len dtype <f8 not accepted"):
        pasa.golden(inputs["q"], inputs["k"], inputs["v"], kv_len=np.array([1.0, 2.0]))
    # pasa-attn options: exclusive with --problem (whose JSON says it), and checked like the JSON's.
    (tmp_path / "p.json").write_text(json.dumps(DECODE))
    r = run_app("pasa-attn", "--problem", tmp_path / "p.json", "--pse", d / "pse.npy", expect_rc=None)
    assert r.returncode != 0 and "excludes" in r.stderr
    msg = app_error("pasa-attn", "--batch", 2, "--heads", 8, "--kv-heads", 2, "--seq", 1, "--kv-seq", 512,
                    "--dim", 64, "--pse", d / "bad_pse.npy")
    assert msg.startswith("--pse: ") and "bad_pse.npy" in msg, msg


def test_problem_json_round_trip_keeps_user_tensors(tmp_path, rng):
    """to_json writes the user's tensors as {"npy": resolved file}: pasa-attn --json's problem, read back, is the
    same problem."""
    problem, _ = user_decode(tmp_path, rng)
    o1, j = cli_run(tmp_path, problem, FA, "rt")
    assert j["problem"]["pse"] == {"npy": str(tmp_path / "tensors/pse.npy")}
    assert j["problem"]["select"]["npy"] == str(tmp_path / "tensors/select.npy")
    o2, _ = cli_run(tmp_path / "tensors", j["problem"], FA, "rt2")
    assert_same_bits(o1, o2)


PAGED_SPLIT = {"name": "pasa", "alloc": {"preset": "pasa_fp16", "stages": {"merge": "fp32"}}, "s1": 8, "s2": 32,
               "splits": 3, "pasa": {"beta": 0.984497}}


def test_paged_every_route(tmp_path):
    """A paged problem (prefix sharing, mixed prefill and decode, splits) through every front end, the same
    bits; fp64 equals the golden; the problem's numbers are what the JSON says."""
    inputs, outs = check_all_routes(tmp_path, PAGED, [FA, SPLIT, PAGED_SPLIT], "paged")
    assert inputs["q"].shape == (1, 4, 43, 32) and inputs["k_cache"].shape == (40, 2, 16, 32)
    seqs = inputs["sequences"]
    assert [s["ctx_len"] for s in seqs] == [150, 88, 17, 300]
    assert seqs[1]["block_table"][:4] == seqs[0]["block_table"][:4]
    fresh = [b for i, s in enumerate(seqs) for t, b in enumerate(s["block_table"]) if not (i == 1 and t < 4)]
    assert len(set(fresh)) == len(fresh) == 10 + 2 + 2 + 19
    # The output is that of the gathered sequence: sequence 3's decode row is softmax(q k^T) v of its context.
    s3 = seqs[3]
    k = np.concatenate([inputs["k_cache"][b] for b in s3["block_table"]], axis=1)[:, :300]
    v = np.concatenate([inputs["v_cache"][b] for b in s3["block_table"]], axis=1)[:, :300]
    q = inputs["q"][0, :, 42]  # the batch's last token
    k, v = np.repeat(k, 2, axis=0), np.repeat(v, 2, axis=0)  # GQA: query head h reads KV head h // 2
    sc = np.einsum("hd,hjd->hj", q, k) / np.sqrt(32)
    w = np.exp(sc - sc.max(axis=1, keepdims=True))
    want = np.einsum("hj,hjd->hd", w / w.sum(axis=1, keepdims=True), v)
    g = pasa.unified_golden(**inputs)["out"][0, :, 42]
    assert np.max(np.abs(g - want)) < 1e-12
    # fp64: the golden within 1e-13 (relative), for fa2 and pasa with splits.
    for algo in (dict(FA, alloc="fp64"), dict(PAGED_SPLIT, alloc="fp64")):
        out, _ = pasa.unified_attention(**inputs, spec=algo, threads=2)
        assert pasa.metrics(out, pasa.unified_golden(**inputs))["rmse"] <= 1e-13
    # Low precision is not the golden: the test above compares real errors.
    assert pasa.metrics(outs[0], pasa.unified_golden(**inputs))["rmse"] > 1e-5


def test_paged_sweep_grid(tmp_path):
    """A sweep over a paged problem's fields (block size, a context length): each row is pasa-attn's."""
    problem = json.loads(json.dumps(PAGED))
    problem.pop("num_blocks")  # (the tables' own count: 40 blocks of 8 tokens do not hold the sequences)
    problem["block_size"], problem["sequences"][3]["ctx_len"] = "$bs", "$ctx"
    cfg = {"name": "paged_grid", "problem": dict(problem, seed="$seed"), "seeds": [5],
           "grid": {"bs": [8, 16], "ctx": [40, 300]}, "algorithms": [dict(FA, label="fa")],
           "outputs": {"dir": str(tmp_path / "grid")}}
    (tmp_path / "grid.json").write_text(json.dumps(cfg))
    run_app("pasa-sweep", tmp_path / "grid.json", "--threads", 2)
    with open(tmp_path / "grid" / "results.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4
    for row in rows:
        p = json.loads(json.dumps(PAGED))
        p["block_size"], p["sequences"][3]["ctx_len"] = int(row["bs"]), int(row["ctx"])
        p.pop("num_blocks")
        _, j = cli_run(tmp_path, p, FA, "grid_cli")
        assert float(row["rmse"]) == j["metrics"]["rmse"]


def test_paged_refusals_before_work(tmp_path):
    (tmp_path / "p.json").write_text(json.dumps(PAGED))
    msg = app_error("pasa-attn", "--problem", tmp_path / "p.json", "--algorithm", "fa1", "--out-npy", tmp_path / "o.npy")
    assert "/name: unified attention needs fa2 or pasa" in msg, msg
    assert not (tmp_path / "o.npy").exists()
    msg = app_error("pasa-attn", "--problem", tmp_path / "p.json", "--max-memory", "1M")
    assert "this problem" in msg and "memory" in msg, msg
    bad = dict(PAGED, sequences=[{"q_len": 3, "ctx_len": 2}])
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    msg = app_error("pasa-attn", "--problem", tmp_path / "bad.json")
    assert msg.startswith(f"{tmp_path / 'bad.json'}:/sequences/0/q_len: q_len = 3"), msg
    with pytest.raises(ValueError, match=r"problem:/sequences/0/q_len"):
        pasa.generate(bad)
    inputs = pasa.generate(PAGED)
    with pytest.raises(ValueError, match="needs fa2 or pasa"):
        pasa.unified_attention(**inputs, algorithm="smooth_k")
    with pytest.raises(ValueError, match="sequences/0: missing \"block_table\""):
        pasa.unified_attention(inputs["q"], inputs["k_cache"], inputs["v_cache"], [{"q_len": 1, "ctx_len": 150}],
                               format="fp16")
    with pytest.raises(ValueError, match="/kind: a paged problem runs unified attention"):
        pasa.attribute(PAGED)  # (dense inputs only: refused, not run on the wrong problem)
    with pytest.raises(ValueError, match="wider than fp32|at most fp32"):
        pasa.unified_attention(inputs["q"], inputs["k_cache"], inputs["v_cache"], inputs["sequences"])
