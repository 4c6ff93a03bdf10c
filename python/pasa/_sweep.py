"""pasa.sweep: the extension's sweep (python/module_study.cpp, which runs the sweep as pasa-sweep does and
writes results.csv and summary.json) with what a Python user expects around it: every core by default, a
progress line only when stderr is a terminal (a notebook or a log gets none), and the table's rows as the
result (a pandas DataFrame when pandas is importable, else a list of dicts), the files and counts in its
``attrs``."""
import csv as _csv
import sys as _sys

from . import _pasa


class SweepRows(list):
    """The rows of a sweep's table (dicts, in case_id order), with ``attrs`` as a DataFrame has them:
    {"csv", "summary", "cases_run", "cases_reused", "digest", "already_complete", "ranges", "flat_csv"}."""

    def __init__(self, rows, attrs):
        super().__init__(rows)
        self.attrs = attrs


def _value(text):
    """A CSV cell as a number where it is one (int, else float: "nan" and "inf" included), else the text
    (labels, and the JSON of the problem and algorithm columns)."""
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def read_rows(path):
    """The rows of a results.csv, numbers converted: (header, list of dicts)."""
    with open(path, newline="") as f:
        reader = _csv.reader(f)
        header = next(reader)
        return header, [dict(zip(header, map(_value, r))) for r in reader]


def _stderr_is_terminal():
    try:
        return _sys.stderr is not None and _sys.stderr.isatty()
    except (AttributeError, ValueError):  # a replaced or closed stderr
        return False


def sweep(config, out_dir=None, *, threads=None, jobs=1, resume=False, overwrite=False, shard=None, progress=None,
          ranges=None):
    """sweep(config, out_dir=None, *, threads=None, jobs=1, resume=False, overwrite=False, shard=None,
          progress=None, ranges=None) -> rows

    Run a sweep (grid x seeds x algorithms) as pasa-sweep does (docs/sweeps.md): config is a dict, its JSON
    text or the path of a config file; out_dir overrides the config's outputs.dir. threads: threads in all
    (None: every core); jobs: problems run side by side, each on max(1, threads / jobs) threads (the table
    does not depend on either); resume=True completes a folder an interrupted run left; a folder that already
    holds this sweep's complete results is read, nothing run (attrs["already_complete"]); overwrite=True
    replaces them by a new run; shard "I/N" runs every N-th problem. progress: a progress line on stderr (None:
    when stderr is a terminal). ranges=N also writes ranges.csv there, as pasa-sweep --ranges N: K, K', S, S'
    ranges and overflow counts of the first N heads of each problem (not with shard; attrs["ranges"]).
    Writes results.csv and summary.json in the output folder and returns the table's rows: a pandas
    DataFrame when pandas is importable, else a list of dicts (numbers as int or float), with ``.attrs``
    {"csv", "summary" (None for a shard), "cases_run", "cases_reused", "digest" (the mean RMSE and NaN % per
    grid point), "already_complete", "ranges" (the path of ranges.csv, or None), "flat_csv" (results_flat.csv,
    the table for awk -F, and gnuplot: no quoted cell, a column per JSON leaf; None for a shard)}."""
    if progress is None:
        progress = _stderr_is_terminal()
    r = _pasa.sweep(config, out_dir, threads=threads, jobs=jobs, resume=resume, overwrite=overwrite, shard=shard,
                    progress=bool(progress), ranges=ranges)
    header, rows = read_rows(r["csv"])
    attrs = dict(r)
    try:
        import pandas
    except ImportError:
        return SweepRows(rows, attrs)
    frame = pandas.DataFrame(rows, columns=header)
    frame.attrs.update(attrs)
    return frame


sweep.__module__ = SweepRows.__module__ = "pasa"  # (as the package's other functions)
