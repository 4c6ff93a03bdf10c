"""Hostile arguments to the module: each is refused with a ValueError that names what was wrong,
never a crash (SIGSEGV), an internal error or a silent default; outputs never replace inputs."""
import json
import os
import subprocess
import sys

import numpy as np
import pytest

import pasa
import pasa_capture

from conftest import BUILD, run_app

SHAPE = {"B": 1, "Nq": 1, "Sq": 8, "D": 8}


def run_isolated(code):
    """Runs `code` in a fresh interpreter with the module on its path: a crash there is a test failure with
    its exit status, not the end of this test run."""
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    return subprocess.run([sys.executable, "-c", "import pasa\n" + code], capture_output=True, text=True, env=env,
                          timeout=120)


@pytest.mark.parametrize("build, call", [
    ('d = {"shape": %r}; d["self"] = d' % SHAPE, "pasa.generate(d)"),
    ('d = {"shape": %r, "q": []}; d["q"].append(d["q"])' % SHAPE, "pasa.generate(d)"),
    ("d = {}\nx = d\nfor _ in range(100000):\n    x['a'] = {}\n    x = x['a']", "pasa.generate(d)"),
    ("d = []\nx = d\nfor _ in range(100000):\n    x.append([])\n    x = x[0]", "pasa.sweep({'problem': {'shape': d}})"),
    ('s = [{"q_len": 1, "ctx_len": 4}]; s.append(s)',
     "import numpy as np; z = np.zeros((2, 1, 16, 8)); pasa.unified_attention(np.zeros((1, 1, 1, 8)), z, z, s)"),
    ('p = {"shape": %r}; p["generator"] = {"kind": "uniform", "p": p}' % SHAPE, "pasa.attribute(p)"),
])
def test_self_referencing_or_deep_objects_are_value_errors(build, call):
    r = run_isolated(build + "\ntry:\n    " + call + "\nexcept ValueError as e:\n    print('ValueError:', e)\n")
    assert r.returncode == 0, f"exit {r.returncode} (a crash?): {r.stderr[-400:]}"
    assert "ValueError:" in r.stdout, r.stdout + r.stderr
    assert "circular reference" in r.stdout or "nested more than 256 levels" in r.stdout, r.stdout


def test_non_finite_numbers_are_named():
    for bad, text in [(float("inf"), "number inf"), (float("nan"), "number nan"), (-float("inf"), "number -inf")]:
        with pytest.raises(ValueError, match=f"generator/x0: expected a finite number, got {text}$"):
            pasa.generate({"shape": SHAPE, "generator": {"x0": bad}})


def test_integers_beyond_64_bits_are_named():
    z = np.zeros((2, 1, 16, 8))
    with pytest.raises(ValueError, match=r"sequences/0/ctx_len: integer 18446744073709551616 is above 2\^64 - 1"):
        pasa.unified_attention(np.zeros((1, 1, 1, 8)), z, z, [{"q_len": 1, "ctx_len": 2**64}])


def test_scale_zero_is_refused_and_none_is_the_default():
    inputs = pasa.generate({"shape": SHAPE, "seed": 3})
    assert inputs["scale"] is None  # the default, which attention(**inputs) passes back as the default
    q, k, v = inputs["q"], inputs["k"], inputs["v"]
    for bad in (0, 0.0, -1.0, float("nan")):
        with pytest.raises(ValueError, match="scale: must be a finite number > 0"):
            pasa.attention(q, k, v, scale=bad)
        with pytest.raises(ValueError, match="scale: must be a finite number > 0"):
            pasa.golden(q, k, v, scale=bad)
    with pytest.raises(ValueError, match="problem:/scale: must be > 0"):
        pasa.generate({"shape": SHAPE, "scale": 0})
    # None and the explicit 1/sqrt(D) (the double nearest to it) are the same run, bit for bit.
    default, _ = pasa.attention(q, k, v)
    explicit, _ = pasa.attention(q, k, v, scale=1 / np.sqrt(8))
    assert np.array_equal(default, explicit)
    # A scale that is not the default changes the output (an argument that is dropped would not).
    other, _ = pasa.attention(q, k, v, scale=2.0)
    assert not np.array_equal(default, other)


def test_gemm_formats_as_dtypes_and_wide_operands():
    a = (np.arange(16, dtype=np.float64).reshape(4, 4) / 8).astype(np.float16)
    by_name = pasa.gemm(a, a, a_format="fp16")
    assert np.array_equal(pasa.gemm(a, a, a_format=np.float16), by_name)
    assert np.array_equal(pasa.gemm(a, a, a_format=np.dtype("float16"), acc=np.float32), by_name)
    with pytest.raises(ValueError, match=r"model h100: a tensor-core model takes operands of at most 26 bits.*B is fp64"):
        pasa.gemm(a, a.astype(np.float64), model="h100")
    with pytest.raises(ValueError, match=r"a tensor-core model takes operands .*A is fp64"):
        pasa.gemm(a.astype(np.float64), a.astype(np.float64), model="h100_fp16")


def test_gemm_is_sized_before_any_work():
    a, b = np.zeros((300000, 1)), np.zeros((1, 300000))  # C would be 720 GB
    with pytest.raises(ValueError, match=r"this GEMM needs about .* of memory .*C \(1 x 300000 x 300000\)"):
        pasa.gemm(a, b)


def test_a_sweep_never_replaces_its_config(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    cfg = {"name": "t", "problem": {"shape": SHAPE, "format": "fp16", "seed": "$seed"}, "seeds": [1],
           "algorithms": [{"name": "fa2", "alloc": "fa_fp32", "s1": 8, "s2": 8}]}
    for name in ("results.csv", "summary.json", "results.csv.partial"):
        path = out / name
        path.write_text(json.dumps(cfg))
        before = path.read_bytes()
        with pytest.raises(ValueError, match=f"the sweep's output .*{name}: is the same file as the input the config"):
            pasa.sweep(str(path), str(out))
        assert path.read_bytes() == before
        r = run_app("pasa-sweep", path, "--out", out, expect_rc=2)
        assert "is the same file as the input the config" in r.stderr
        assert path.read_bytes() == before
        path.unlink()


def write_capture(folder, q_name="q.npy", shape_q=(1, 1, 4, 8)):
    folder.mkdir(exist_ok=True)
    rng = np.random.default_rng(1)
    np.save(folder / "q.npy", rng.standard_normal(shape_q).astype(np.float32))
    for t in "kv":
        np.save(folder / f"{t}.npy", rng.standard_normal((1, 1, 4, 8)).astype(np.float32))
    index = {"pasa_capture": 1, "model": "m", "layers": [{
        "name": "l0", "q": q_name, "k": "k.npy", "v": "v.npy", "dtype": "float32",
        "shape": {"B": 1, "Nq": 1, "Nkv": 1, "Sq": 4, "Skv": 4, "D": 8}, "scale": 0.35, "causal": False}]}
    (folder / "index.json").write_text(json.dumps(index))


def test_capture_load_applies_the_readers_checks(tmp_path):
    write_capture(tmp_path / "ok")
    index, arrays = pasa_capture.load(tmp_path / "ok")
    assert arrays[0]["q"].shape == (1, 1, 4, 8)
    outside = tmp_path / "secret.npy"
    np.save(outside, np.zeros((1, 1, 4, 8), np.float32))
    for name, msg in [("../secret.npy", "not a file name inside the capture folder"),
                      (str(outside), "not a file name inside the capture folder"),
                      ("q.npy\0x", "control character"), ("nope.npy", "not a regular file")]:
        write_capture(tmp_path / "bad", q_name=name)
        with pytest.raises(pasa_capture.CaptureError, match=msg):
            pasa_capture.load(tmp_path / "bad")
    os.symlink(outside, tmp_path / "bad" / "link.npy")
    write_capture(tmp_path / "bad", q_name="link.npy")
    with pytest.raises(pasa_capture.CaptureError, match="leads outside the capture folder"):
        pasa_capture.load(tmp_path / "bad")
    write_capture(tmp_path / "shape", shape_q=(1, 1, 5, 8))
    with pytest.raises(pasa_capture.CaptureError, match=r"q shape \(1, 1, 5, 8\) differs from the index's \(1, 1, 4, 8\)"):
        pasa_capture.load(tmp_path / "shape")


def test_capture_names_with_control_characters_are_refused_by_the_programs(tmp_path):
    write_capture(tmp_path / "cap", q_name="q.npy\u0001")
    (tmp_path / "p.json").write_text(json.dumps({"capture": {"dir": str(tmp_path / "cap"), "layer": 0}}))
    r = run_app("pasa-attn", "--problem", tmp_path / "p.json", expect_rc=2)
    assert "/layers/0/q: the file name holds a control character" in r.stderr, r.stderr
