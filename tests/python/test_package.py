"""The package around the extension: __all__, signatures read from the docstrings, the type stubs, format
arguments given as dtypes, docstrings that list every algorithm, and one version for the module, the programs
and a sweep's summary.json (CMakeLists.txt's project VERSION)."""
import ast
import inspect
import json
import pathlib
import re

import numpy as np
import pytest

import pasa
from conftest import BUILD, run_app

ROOT = pathlib.Path(__file__).resolve().parents[2]
PUBLIC = [n for n in dir(pasa._pasa) if not n.startswith("_")]


def test_all_lists_every_function_of_the_extension():
    assert sorted(pasa.__all__) == sorted(PUBLIC + ["capture", "CaptureError", "SweepRows"])
    for name in PUBLIC:
        f = getattr(pasa, name)
        assert f.__module__ == "pasa" and f.__name__ == name
        # (sweep is python/pasa/_sweep.py's: it returns rows, and says so)
        assert f.__doc__ == getattr(pasa._pasa, name).__doc__ or name == "sweep"


def test_signatures():
    s = inspect.signature(pasa.round)
    assert str(s) == ("(x, format, *, mode='rne', overflow='ieee', flush_input=False, flush_output=False, seed=0, "
                      "dtype=None, out=None, convention='exact')")
    assert str(inspect.signature(pasa.encode)) == "(x, format, dtype=None)"
    assert str(inspect.signature(pasa.formats)) == "()"
    for name in PUBLIC:
        sig = inspect.signature(getattr(pasa, name))
        assert not any(p.kind in (p.VAR_POSITIONAL, p.VAR_KEYWORD) for p in sig.parameters.values()), (
            f"pasa.{name}: its docstring does not open with its signature, name(a, b=1, *, c=\"x\") -> ...")
        # the signature's names are the extension's: every keyword it shows is accepted by name
        for p in sig.parameters.values():
            if p.kind == p.KEYWORD_ONLY and p.default is not p.empty and p.default is not None:
                assert f"{p.name}=" in getattr(pasa, name).__doc__.split("\n\n")[0]


def test_keywords_of_the_signature_reach_the_extension():
    # a keyword the docstring names but the binding does not would raise TypeError here
    x = np.linspace(-1, 1, 5)
    kwargs = {p.name: p.default for p in inspect.signature(pasa.round).parameters.values() if p.default is not p.empty}
    assert np.array_equal(pasa.round(x, "fp16", **kwargs), pasa.round(x, "fp16"))
    q = np.linspace(-1, 1, 64).reshape(1, 1, 8, 8)
    kwargs = {p.name: p.default for p in inspect.signature(pasa.golden).parameters.values() if p.default is not p.empty}
    assert np.array_equal(pasa.golden(q, q, q, **kwargs)["out"], pasa.golden(q, q, q)["out"])
    # (attention's beta= is PASA's: given with another algorithm it is an error, so its default is not passed)
    kwargs = {p.name: p.default for p in inspect.signature(pasa.attention).parameters.values()
              if p.default is not p.empty and p.name != "beta"}
    kwargs.update(s1=8, s2=8)
    out, _ = pasa.attention(q, q, q, **kwargs)
    assert np.array_equal(out, pasa.attention(q, q, q, s1=8, s2=8)[0])


def _stub_functions():
    stub = ast.parse((pathlib.Path(pasa.__file__).parent / "__init__.pyi").read_text())
    return {n.name: n for n in stub.body if isinstance(n, ast.FunctionDef)}


def test_stubs_match_the_signatures():
    stubs = _stub_functions()
    missing = sorted(set(PUBLIC) - set(stubs))
    assert not missing, f"python/pasa/__init__.pyi lacks {missing}; their signatures: " + "; ".join(
        f"{n}{inspect.signature(getattr(pasa, n))}" for n in missing)
    for name in PUBLIC:
        a = stubs[name].args
        stub_params = [(x.arg, "pos") for x in a.posonlyargs + a.args] + [(x.arg, "kw") for x in a.kwonlyargs]
        sig_params = [(p.name, "kw" if p.kind == p.KEYWORD_ONLY else "pos")
                      for p in inspect.signature(getattr(pasa, name)).parameters.values()]
        assert stub_params == sig_params, f"{name}: stub {stub_params} vs signature {sig_params}"
        defaults = [ast.literal_eval(d) for d in a.defaults] + [ast.literal_eval(d) for d in a.kw_defaults if d]
        sig_defaults = [p.default for p in inspect.signature(getattr(pasa, name)).parameters.values()
                        if p.default is not p.empty]
        assert defaults == sig_defaults, f"{name}: stub defaults {defaults} vs {sig_defaults}"
    assert (pathlib.Path(pasa.__file__).parent / "py.typed").is_file()


def test_attention_docstring_lists_every_algorithm():
    for name in pasa.algorithms():
        assert re.search(rf"\b{name}\b", pasa.attention.__doc__), f"attention's docstring does not name {name}"


def test_one_version(tmp_path):
    version = re.search(r"project\(\s*pasa\s+VERSION\s+([0-9.]+)", (ROOT / "CMakeLists.txt").read_text()).group(1)
    assert pasa.__version__ == version
    assert re.search(r"^version: (\S+)$", (ROOT / "CITATION.cff").read_text(), re.M).group(1) == version
    programs = sorted(p.stem for p in [*ROOT.glob("apps/pasa-*.cpp"), *ROOT.glob("bench/pasa-*.cpp")])
    assert "pasa-attn" in programs and "pasa-bench-round" in programs
    for name in programs:
        assert run_app(name, "--version").stdout.strip() == f"{name} {version}"
    config = {"name": "version", "seeds": [1], "grid": {"x0": [1.0]},
              "problem": {"shape": {"Sq": 16, "Skv": 16, "D": 8}, "seed": "$seed",
                          "generator": {"kind": "uniform", "x0": "$x0", "am": 0.5}},
              "algorithms": [{"label": "FA", "name": "fa2", "alloc": "fa_fp32", "s1": 8, "s2": 8}]}
    r = pasa.sweep(config, tmp_path)
    assert json.loads(pathlib.Path(r.attrs["summary"]).read_text())["toolkit"] == {"name": "pasa", "version": version}


def test_capture_is_a_lazy_attribute():
    # `import pasa` loads neither pasa_capture nor torch; pasa.capture is pasa_capture's, and its stub matches
    code = ("import sys, pasa; assert 'pasa_capture' not in sys.modules and 'torch' not in sys.modules; "
            "import pasa_capture; assert pasa.capture is pasa_capture.capture; "
            "assert pasa.CaptureError is pasa_capture.CaptureError; assert 'capture' in dir(pasa); "
            "assert 'torch' not in sys.modules")
    import subprocess
    import sys
    subprocess.run([sys.executable, "-c", code], check=True)
    with pytest.raises(AttributeError, match="no attribute 'captur'"):
        pasa.captur
    import pasa_capture
    a = _stub_functions()["capture"].args
    stub = [x.arg for x in a.posonlyargs + a.args] + [x.arg for x in a.kwonlyargs]
    assert stub == list(inspect.signature(pasa_capture.capture).parameters)
