"""The spelling of non-finite values per file type (docs/sweeps.md "Non-finite values"), and results_flat.csv:
the sweep table with no quoted cell and no JSON in a cell, checked with awk -F, and against results.csv read
by Python's csv module with the JSON columns flattened here."""
import csv
import json
import math
import shutil
import subprocess

import pytest

import pasa
from conftest import SMALL_SWEEP, run_app

# x0 = 80: |QKᵀ| ≈ 80²·16 > 65504, so FA's fp16 scores overflow and its RMSE is nan; PASA's stay finite. A label
# with a comma, an allocation object and a list (kv_len) in the problem.
CONFIG = dict(SMALL_SWEEP, name="flat", grid={"x0": [1, 80]}, seeds=[1, 2])
CONFIG["problem"] = dict(SMALL_SWEEP["problem"], kv_len=[24])
CONFIG["algorithms"] = [dict(SMALL_SWEEP["algorithms"][0], label="FA, fp16 scores"),
                        dict(SMALL_SWEEP["algorithms"][1], alloc={"preset": "pasa_fp16", "stages": {"o": "fp32"}})]


def flatten(value, path, out):
    if isinstance(value, dict):
        for k, v in value.items():
            flatten(v, f"{path}.{k}", out)
    elif isinstance(value, list):
        for i, v in enumerate(value):
            flatten(v, f"{path}.{i}", out)
    else:
        out[path] = "" if value is None else value


def strict_json(text):
    def refuse(token):
        raise AssertionError(f"non-JSON token {token} in the summary")
    return json.loads(text, parse_constant=refuse)


@pytest.fixture(scope="module")
def swept(tmp_path_factory):
    out = tmp_path_factory.mktemp("flat") / "s"
    rows = pasa.sweep(CONFIG, out, threads=2)
    assert rows.attrs["flat_csv"] == str(out / "results_flat.csv")
    return out


def test_flat_csv_has_the_same_rows_without_quotes(swept):
    text = (swept / "results_flat.csv").read_text()
    assert '"' not in text
    if shutil.which("awk"):
        counts = subprocess.run(["awk", "-F,", "{print NF}", str(swept / "results_flat.csv")], capture_output=True,
                                text=True, check=True).stdout.split()
        assert len(counts) == 1 + 8 and len(set(counts)) == 1
    with open(swept / "results.csv", newline="") as f:
        full = list(csv.DictReader(f))
    lines = text.splitlines()
    header = lines[0].split(",")
    flat = [dict(zip(header, line.split(","))) for line in lines[1:]]
    assert len(flat) == len(full) == 8
    for f_row, row in zip(flat, full):
        want = {}
        for k, v in row.items():
            if k in ("problem_json", "algorithm_json"):
                leaves = {}
                flatten(json.loads(v), k[:-5], leaves)
                want.update({p: (json.dumps(x) if not isinstance(x, str) else x) for p, x in leaves.items()})
            else:
                want[k] = v.replace(",", ";")
        got = {k: v for k, v in f_row.items() if v != "" or k in want}
        assert got == want
    assert header[:6] == ["case_id", "problem_id", "grid_point", "seed", "algorithm", "x0"]
    assert {"problem.shape.Sq", "problem.kv_len.0", "algorithm.alloc", "algorithm.alloc.stages.o"} <= set(header)
    assert flat[0]["algorithm"] == "FA; fp16 scores" and flat[0]["algorithm.alloc"] == "fa_fp16_fp32"
    assert flat[1]["algorithm.alloc"] == "" and flat[1]["algorithm.alloc.stages.o"] == "fp32"


def test_one_spelling_of_non_finite_values_per_file_type(swept, tmp_path):
    with open(swept / "results.csv", newline="") as f:
        full = list(csv.DictReader(f))
    nan_rows = [r for r in full if r["algorithm"].startswith("FA") and r["x0"] == "80"]
    assert len(nan_rows) == 2 and all(r["rmse"] == "nan" for r in nan_rows)
    for name in ("results.csv", "results_flat.csv"):  # CSV: nan, inf, -inf, never NaN, Infinity, null
        text = (swept / name).read_text()
        assert ",nan," in text
        for other in ("NaN", "Infinity", "null", "None", "1.#"):
            assert other not in text, (name, other)
    summary = strict_json((swept / "summary.json").read_text())  # JSON: no NaN / Infinity tokens
    fa80 = [g for g in summary["groups"] if g["algorithm"].startswith("FA") and g["params"]["x0"] == 80][0]
    assert fa80["metrics"]["rmse"] == {"non_finite": 2, "mean": None, "sd": None, "min": None, "max": None}
    # --json: a non-finite number is the string "nan" / "inf" / "-inf"
    problem = dict(SMALL_SWEEP["problem"], seed=1, generator=dict(SMALL_SWEEP["problem"]["generator"], x0=80))
    (tmp_path / "p.json").write_text(json.dumps(problem))
    out = strict_json(run_app("pasa-attn", "--problem", tmp_path / "p.json", "--json").stdout)
    assert out["metrics"]["rmse"] == "nan" and math.isnan(float(out["metrics"]["rmse"]))


def test_rerun_and_overwrite_keep_it(swept, tmp_path):
    before = (swept / "results_flat.csv").read_bytes()
    again = pasa.sweep(CONFIG, swept, threads=1)
    assert again.attrs["already_complete"] and (swept / "results_flat.csv").read_bytes() == before
    pasa.sweep(CONFIG, swept, threads=1, overwrite=True)
    lines = lambda b: [l.split(",")[:-2] for l in b.decode().splitlines()]  # (the timing columns aside)
    assert lines((swept / "results_flat.csv").read_bytes()) == lines(before)
    shard = pasa.sweep(CONFIG, tmp_path / "shard", threads=1, shard="0/2")
    assert shard.attrs["flat_csv"] is None and not (tmp_path / "shard" / "results_flat.csv").exists()
