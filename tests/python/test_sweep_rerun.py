"""A sweep run a second time into its output folder (the README's main job, run twice, failed
with exit 2): a folder holding this sweep's complete results is reported as it is, with nothing run or
written; an incomplete one is refused, naming both ways on (resume, overwrite); --overwrite / overwrite=True
runs every case again. The first run's files (bytes and modification times) are the reference."""
import json

import pytest

import pasa
from conftest import SMALL_SWEEP, run_app

CONFIG = dict(SMALL_SWEEP, name="rerun")


def snapshot(folder):
    """Every file of the folder but its lock: name -> (bytes, mtime_ns)."""
    return {p.name: (p.read_bytes(), p.stat().st_mtime_ns) for p in folder.iterdir() if p.name != ".pasa-sweep.lock"}


def untimed(text):
    return [",".join(f for i, f in enumerate(line.split(",")) if i not in (line.count(",") - 1, line.count(",")))
            for line in text.splitlines()]


@pytest.fixture
def finished(tmp_path):
    (tmp_path / "c.json").write_text(json.dumps(CONFIG))
    out = tmp_path / "out"
    run_app("pasa-sweep", tmp_path / "c.json", "--out", out, "--threads", 1)
    return tmp_path / "c.json", out


def test_a_second_run_reports_complete_results_and_writes_nothing(finished):
    config, out = finished
    before = snapshot(out)
    r = run_app("pasa-sweep", config, "--out", out, "--threads", 1)
    assert "holds this sweep's complete results: nothing run (--overwrite runs it again)" in r.stderr
    assert r.stdout.startswith("0 cases run, 8 kept from an earlier run\n")
    assert "PASA" in r.stdout  # the digest, as after the first run
    assert snapshot(out) == before


def test_overwrite_runs_every_case_again(finished):
    config, out = finished
    before = snapshot(out)
    r = run_app("pasa-sweep", config, "--out", out, "--threads", 1, "--overwrite")
    assert r.stdout.startswith("8 cases run, 0 kept from an earlier run\n")
    after = snapshot(out)
    assert after["results.csv"][1] != before["results.csv"][1]  # written again ...
    assert untimed(after["results.csv"][0].decode()) == untimed(before["results.csv"][0].decode())  # ... the same
    r = run_app("pasa-sweep", config, "--out", out, "--resume", "--overwrite", expect_rc=None)
    assert r.returncode != 0 and "excludes" in r.stderr


@pytest.mark.parametrize("damage, rerun", [("lost", 1), ("corrupt", 1), ("duplicate", 0)])
def test_an_incomplete_folder_is_refused_and_left_as_it_is(finished, damage, rerun):
    config, out = finished
    table = out / "results.csv"
    lines = table.read_text().splitlines(keepends=True)
    # one case lost, its time_s (the last column) not a number (its row would be dropped on resume), or its
    # row twice (every case is there, but the table is not one a sweep writes)
    last = {"lost": [], "corrupt": [lines[-1].rsplit(",", 1)[0] + ",banana\n"],
            "duplicate": [lines[-1], lines[-1]]}[damage]
    table.write_text("".join(lines[:-1] + last))
    before = snapshot(out)
    msg = run_app("pasa-sweep", config, "--out", out, "--threads", 1, expect_rc=2).stderr
    assert "already holds unfinished results of this sweep" in msg
    assert "give --resume to complete them, --overwrite to run the sweep again from scratch" in msg
    assert snapshot(out) == before
    r = run_app("pasa-sweep", config, "--out", out, "--threads", 1, "--resume")
    assert r.stdout.startswith(f"{rerun} cases run, {8 - rerun} kept from an earlier run\n")
    assert table.read_text().count("\n") == 9


def test_python_second_run_and_overwrite(finished, monkeypatch):
    monkeypatch.setitem(__import__("sys").modules, "pandas", None)
    config, out = finished
    before = snapshot(out)
    rows = pasa.sweep(str(config), out, threads=1)
    assert rows.attrs["already_complete"] and rows.attrs["cases_run"] == 0 and rows.attrs["cases_reused"] == 8
    assert len(rows) == 8 and snapshot(out) == before
    rows = pasa.sweep(str(config), out, threads=1, overwrite=True)
    assert not rows.attrs["already_complete"] and rows.attrs["cases_run"] == 8
    (out / "summary.json").unlink()  # a table without its summary is not complete
    with pytest.raises(ValueError, match=r"give resume=True to complete them, overwrite=True to run"):
        pasa.sweep(str(config), out, threads=1)
    with pytest.raises(ValueError, match=r"^resume=True and overwrite=True: give one"):
        pasa.sweep(str(config), out, resume=True, overwrite=True)
