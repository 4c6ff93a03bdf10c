"""pasa.sweep as a Python user meets it: the table's rows as the result (a list of dicts, or a
pandas DataFrame when pandas imports), jobs= and every core by default, a progress line only when stderr is a
terminal, and messages that name the Python argument (resume=True), not pasa-sweep's option."""
import csv
import inspect
import math
import sys
import types

import pytest

import pasa
from conftest import SMALL_SWEEP

CONFIG = dict(SMALL_SWEEP, name="rows")


def csv_rows(path):
    """The table as csv.DictReader reads it (all text): the reference the rows are checked against."""
    with open(path, newline="") as f:
        return list(csv.DictReader(f))


def same_number(value, text):
    return (math.isnan(value) and text == "nan") or value == float(text)


@pytest.fixture
def no_pandas(monkeypatch):
    monkeypatch.setitem(sys.modules, "pandas", None)  # `import pandas` raises ImportError


def test_rows_are_the_table(tmp_path, no_pandas):
    rows = pasa.sweep(CONFIG, tmp_path / "a", threads=1)
    assert isinstance(rows, list) and isinstance(rows, pasa.SweepRows)
    assert rows.attrs["cases_run"] == 8 and rows.attrs["cases_reused"] == 0
    assert rows.attrs["csv"] == str(tmp_path / "a" / "results.csv") and "PASA" in rows.attrs["digest"]
    reference = csv_rows(tmp_path / "a" / "results.csv")
    assert len(rows) == len(reference) == 8
    for row, ref in zip(rows, reference):
        assert list(row) == list(ref)
        assert isinstance(row["case_id"], int) and isinstance(row["rmse"], float) and row["algorithm"] in ("FA", "PASA")
        for k, text in ref.items():
            if isinstance(row[k], str):
                assert row[k] == text
            else:
                assert same_number(row[k], text), (k, row[k], text)
    assert [r["case_id"] for r in rows] == list(range(8))


def test_a_dataframe_when_pandas_imports(tmp_path, monkeypatch):
    made = {}

    class DataFrame:  # a stand-in for pandas' (not installed here): what pasa.sweep gives it
        def __init__(self, data, columns):
            made["data"], made["columns"] = data, columns
            self.attrs = {}

    monkeypatch.setitem(sys.modules, "pandas", types.SimpleNamespace(DataFrame=DataFrame))
    frame = pasa.sweep(CONFIG, tmp_path / "a", threads=1)
    assert isinstance(frame, DataFrame) and frame.attrs["cases_run"] == 8
    assert made["columns"] == list(csv_rows(tmp_path / "a" / "results.csv")[0])
    assert len(made["data"]) == 8 and made["data"][3]["case_id"] == 3


def test_jobs_and_threads(tmp_path, no_pandas):
    sig = inspect.signature(pasa.sweep).parameters
    assert sig["threads"].default is None and sig["jobs"].default == 1  # every core, one problem at a time
    one = pasa.sweep(CONFIG, tmp_path / "one", threads=1)
    two = pasa.sweep(CONFIG, tmp_path / "two", threads=2, jobs=2)
    every = pasa.sweep(CONFIG, tmp_path / "every")
    untimed = [[{k: v for k, v in r.items() if not k.endswith("time_s")} for r in t] for t in (one, two, every)]
    assert untimed[0] == untimed[1] == untimed[2]
    with pytest.raises(ValueError, match="jobs"):
        pasa.sweep(CONFIG, tmp_path / "bad", jobs=0)
    assert not (tmp_path / "bad").exists()


def test_progress_only_on_a_terminal(tmp_path, capfd, monkeypatch, no_pandas):
    pasa.sweep(CONFIG, tmp_path / "a", threads=1)  # stderr is pytest's capture: not a terminal
    assert "[pasa.sweep]" not in capfd.readouterr().err
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    pasa.sweep(CONFIG, tmp_path / "b", threads=1)
    err = capfd.readouterr().err
    assert "\r[pasa.sweep] 8/8 cases, " in err and err.endswith("left   \n")
    monkeypatch.undo()
    pasa.sweep(CONFIG, tmp_path / "c", threads=1, progress=True)
    assert "[pasa.sweep] 1/8 cases" in capfd.readouterr().err


def test_messages_name_python_arguments(tmp_path, no_pandas):
    pasa.sweep(CONFIG, tmp_path / "a", threads=1)
    # An interrupted run's folder: its config and one row of its partial table.
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "config.json").write_text((tmp_path / "a" / "config.json").read_text())
    lines = (tmp_path / "a" / "results.csv").read_text().splitlines(keepends=True)
    (tmp_path / "b" / "results.csv.partial").write_text("".join(lines[:2]))
    with pytest.raises(ValueError) as e:
        pasa.sweep(CONFIG, tmp_path / "b", threads=1)
    assert "resume=True" in str(e.value) and "--" not in str(e.value)
    rows = pasa.sweep(CONFIG, tmp_path / "b", threads=1, resume=True)
    assert rows.attrs["cases_reused"] == 1 and rows.attrs["cases_run"] == 7
