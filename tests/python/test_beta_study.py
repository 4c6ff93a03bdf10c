"""The β study of docs/beta.md re-run in part: a slice of its configs (3 β, 2 seeds, the x0 = 20 points)
through pasa-sweep must give the committed results/beta/rmse.csv rows bit for bit (the RMSE strings are
pasa-sweep's %.17g), and pasa-beta's binade rule must give the β the study measured, whose RMSE is lower
than the paper's β's on every seed re-run."""
import csv
import json
import pathlib

import pytest

from conftest import run_app

ROOT = pathlib.Path(__file__).resolve().parents[2]
RESULTS = ROOT / "results" / "beta" / "rmse.csv"


def committed():
    with open(RESULTS, newline="") as f:
        return {(r["config"], r["x0"], r["seed"], r["algorithm"]): r["rmse"] for r in csv.DictReader(f)}


def rerun(tmp_path, name, x0, labels, seeds=(1, 2)):
    """The config's problem at one x0 and the given seeds, with only the labelled algorithms: rmse per
    (seed, label) as pasa-sweep writes it."""
    cfg = json.loads((ROOT / "configs" / f"{name}.json").read_text())
    cfg["grid"]["x0"] = [x0]
    cfg["seeds"] = list(seeds)
    cfg["algorithms"] = [a for a in cfg["algorithms"] if a["label"] in labels]
    assert len(cfg["algorithms"]) == len(labels), [a["label"] for a in cfg["algorithms"]]
    out = tmp_path / name
    cfg["outputs"] = {"dir": str(out)}
    path = tmp_path / f"{name}.json"
    path.write_text(json.dumps(cfg))
    run_app("pasa-sweep", path, "--threads", 2)
    with open(out / "results.csv", newline="") as f:
        return {(r["seed"], r["algorithm"]): r["rmse"] for r in csv.DictReader(f)}


@pytest.mark.parametrize("name", ["beta_uniform_fp16", "beta_hybrid_bf16"])
def test_slice_reproduces_committed_rows(tmp_path, name):
    labels = ["PASA b=0.9", "PASA b=0.9375", "PASA b=0.984497"]
    rows = committed()
    got = rerun(tmp_path, name, 20, labels)
    assert len(got) == 6
    for (seed, lab), rmse in got.items():
        assert rows[(name, "20", seed, lab)] == rmse, (name, seed, lab)


def binade_beta(tmp_path, fmt, n, score_mean):
    out = tmp_path / "rule.json"
    run_app("pasa-beta", "--rule", "binade", "--beta", 0.984497, "--format", fmt, "--n", n, "--with-sqrt-d", 128,
            "--score-mean", score_mean, "--json", out)
    return json.loads(out.read_text())["rows"][0]["beta"]


def test_binade_rule_beta_is_the_measured_one_and_beats_the_paper(tmp_path):
    # x0 = 20, D = 128: |S̄|/α = x0²·√D (the configs' description and docs/beta.md)
    x = 400 * 128 ** 0.5
    beta = binade_beta(tmp_path, "fp16", 128, repr(x))
    cfg = json.loads((ROOT / "configs" / "beta_rule_uniform_fp16.json").read_text())
    lab = f"PASA binade b={beta:.8g}"
    assert lab in [a["label"] for a in cfg["algorithms"]], (lab, [a["label"] for a in cfg["algorithms"]])
    got = rerun(tmp_path, "beta_rule_uniform_fp16", 20, [lab, "PASA b=0.984497"])
    rows = committed()
    for seed in ("1", "2"):
        assert rows[("beta_rule_uniform_fp16", "20", seed, lab)] == got[(seed, lab)]
        assert float(got[(seed, lab)]) < float(got[(seed, "PASA b=0.984497")]), seed


def test_binade_rule_refusals():
    r = run_app("pasa-beta", "--rule", "binade", "--beta", 0.98, expect_rc=2)
    assert "--score-mean" in r.stderr
    r = run_app("pasa-beta", "--beta", 0.98, "--score-mean", 4525, expect_rc=2)
    assert "--score-mean is an option of --rule binade" in r.stderr
