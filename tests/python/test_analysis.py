"""pasa.solve_beta, pasa.attribute and pasa.sweep: the same results as pasa-beta, pasa-attribute and
pasa-sweep on the same arguments, and the same error messages."""
import csv
import json

import numpy as np
import pytest

import pasa
from conftest import app_error, assert_same_json, read_json, run_app

SMALL = {"shape": {"Nq": 2, "Sq": 160, "D": 64}, "format": "fp16", "seed": 3,
         "generator": {"kind": "uniform", "x0": 20, "am": 0.5}}


def test_solve_beta_as_pasa_beta(tmp_path):
    run_app("pasa-beta", "--table3", "--json", tmp_path / "t3.json")
    rows = read_json(tmp_path / "t3.json")["rows"]
    assert_same_json(pasa.solve_beta(pasa.table3_initial_betas()), rows)
    run_app("pasa-beta", "--beta", 0.9, "--format", "bf16", "--n", 64, "--with-sqrt-d", 128, "--json", tmp_path / "b.json")
    assert_same_json(pasa.solve_beta(0.9, format="bf16", n=64, sqrt_d=128), read_json(tmp_path / "b.json")["rows"][0])
    # Table 3's optimised beta for fp16, n = 128, as the paper prints it
    assert abs(pasa.solve_beta(0.984375)["beta"] - 0.984497) < 5e-7


def test_solve_beta_errors_as_pasa_beta():
    with pytest.raises(ValueError) as e:
        pasa.solve_beta(1.5)
    assert str(e.value) == app_error("pasa-beta", "--beta", 1.5)
    with pytest.raises(ValueError) as e:
        pasa.solve_beta(0.9, n=0)
    assert "--" + str(e.value) == app_error("pasa-beta", "--beta", 0.9, "--n", 0)


def test_attribute_as_pasa_attribute(tmp_path):
    (tmp_path / "p.json").write_text(json.dumps(SMALL))
    run_app("pasa-attribute", "--problem", tmp_path / "p.json", "--algorithm", "pasa", "--alloc", "pasa_fp16",
            "--s1", 64, "--s2", 64, "--invariance", "--threads", 2, "--json", tmp_path / "a.json")
    cli = read_json(tmp_path / "a.json")
    a = pasa.attribute(SMALL, algorithm="pasa", alloc="pasa_fp16", s1=64, s2=64, invariance=True, threads=2)
    assert_same_json(a, cli)
    # the same inputs given as arrays
    inputs = pasa.generate(SMALL)
    b = pasa.attribute(**inputs, algorithm="pasa", alloc="pasa_fp16", s1=64, s2=64, invariance=True)
    assert_same_json(b["stages"], cli["stages"])
    assert "problem" not in b


def test_attribute_errors_as_pasa_attribute(tmp_path):
    (tmp_path / "p.json").write_text(json.dumps(SMALL))
    cli = app_error("pasa-attribute", "--problem", tmp_path / "p.json", "--algorithm", "fa2", "--alloc", "fa_fp16",
                    "--invariance")
    with pytest.raises(ValueError) as e:
        pasa.attribute(SMALL, algorithm="fa2", alloc="fa_fp16", invariance=True)
    assert str(e.value) == cli
    with pytest.raises(ValueError, match=r"^problem: give either a problem"):
        pasa.attribute()


CONFIG = {"name": "pytest", "problem": {"shape": {"Nq": 2, "Sq": 128, "D": 64}, "format": "fp16", "seed": "$seed",
                                        "generator": {"kind": "uniform", "x0": "$x0", "am": 0.5}},
          "grid": {"x0": [20, 30]}, "seeds": [1, 2],
          "algorithms": [{"label": "FA-FP16/FP32", "name": "fa2", "alloc": "fa_fp16_fp32"},
                         {"label": "PASA-FP16", "name": "pasa", "alloc": "pasa_fp16"}]}


def table(path):
    """The CSV rows without the timing columns (the only ones that differ between runs)."""
    with open(path) as f:
        rows = list(csv.DictReader(f))
    return [{k: v for k, v in r.items() if not k.endswith("time_s")} for r in rows]


def test_sweep_as_pasa_sweep(tmp_path):
    (tmp_path / "c.json").write_text(json.dumps(CONFIG))
    run_app("pasa-sweep", tmp_path / "c.json", "--out", tmp_path / "cli", "--threads", 2)
    r = pasa.sweep(CONFIG, tmp_path / "py", threads=2)
    assert r.attrs["cases_run"] == 8 and r.attrs["cases_reused"] == 0
    assert table(r.attrs["csv"]) == table(tmp_path / "cli" / "results.csv")
    assert "PASA-FP16" in r.attrs["digest"] and r.attrs["summary"].endswith("summary.json")
    # from the file, resumed: nothing left to run
    r2 = pasa.sweep(str(tmp_path / "c.json"), str(tmp_path / "py"), resume=True)
    assert r2.attrs["cases_run"] == 0 and r2.attrs["cases_reused"] == 8
    # a shard
    r3 = pasa.sweep(CONFIG, tmp_path / "shard", shard="1/2")
    assert r3.attrs["summary"] is None and r3.attrs["cases_run"] == 4


def test_sweep_errors_as_pasa_sweep(tmp_path):
    bad = dict(CONFIG, seeds="1")
    (tmp_path / "bad.json").write_text(json.dumps(bad))
    cli = app_error("pasa-sweep", tmp_path / "bad.json", "--out", tmp_path / "x")
    with pytest.raises(ValueError) as e:
        pasa.sweep(str(tmp_path / "bad.json"), tmp_path / "x")
    assert str(e.value) == cli
    with pytest.raises(ValueError) as e:
        pasa.sweep(bad, tmp_path / "x")
    assert str(e.value) == cli.replace(str(tmp_path / "bad.json"), "config")
    with pytest.raises(TypeError, match=r"^config: expected a dict, its JSON text or the path of a JSON file, got int$"):
        pasa.sweep(3)
