"""pasa.attention, pasa.golden, pasa.metrics, pasa.generate: the same bits and metrics as pasa-attn on the same
inputs (.npy files, bit patterns, a problem JSON), the float64 run against the golden and the golden against a
plain numpy softmax, input ranks, strided inputs, masks, allocations as names, JSON and dicts, threads, errors
with the programs' messages, and the GIL released while the library runs."""
import json
import threading
import time

import numpy as np
import pytest

import pasa
from conftest import app_error, assert_same_bits, assert_same_json, run_app

PROBLEM = {"shape": {"B": 1, "Nq": 4, "Nkv": 2, "Sq": 200, "Skv": 328, "D": 64}, "format": "fp16",
           "causal": True, "kv_len": [300], "seed": 5,
           "generator": {"kind": "hybrid", "x0": 20, "am": 50, "p": 0.01}}


def half_inputs(rng, x0, shape=(2, 200, 64)):
    return [(x0 + rng.uniform(-0.5, 0.5, shape)).astype(np.float16) for _ in range(3)]


def cli_attention(tmp_path, arrays, *args):
    for name, a in zip("qkv", arrays):
        np.save(tmp_path / f"{name}.npy", a)
    r = run_app("pasa-attn", "--q", tmp_path / "q.npy", "--k", tmp_path / "k.npy", "--v", tmp_path / "v.npy",
                "--out-npy", tmp_path / "o.npy", "--golden-npy", tmp_path / "g.npy", "--json", "--threads", 2, *args)
    return np.load(tmp_path / "o.npy"), np.load(tmp_path / "g.npy"), json.loads(r.stdout)


CASES = [  # algorithm, alloc, x0, extra pasa-attn options
    ("fa2", "fa_fp16_fp32", 30, []),   # overflows to NaN
    ("pasa", "pasa_fp16", 30, ["--s1", 64, "--s2", 64, "--beta", 0.95]),
    ("fa1", "fa_fp16", 3, ["--causal"]),
    ("smooth_k", "fa_fp16_fp32", 3, ["--scale", 0.5]),
    ("online_softmax", "fa_bf16_fp32", 1, []),
]


@pytest.mark.parametrize("algorithm,alloc,x0,extra", CASES)
def test_same_as_pasa_attn_on_npy_inputs(tmp_path, rng, algorithm, alloc, x0, extra):
    arrays = half_inputs(rng, x0)
    o_cli, g_cli, j = cli_attention(tmp_path, arrays, "--algorithm", algorithm, "--alloc", alloc, *extra)
    opts = dict(zip(["s1", "s2", "beta"], [e for e in extra[1::2]])) if "--s1" in extra else {}
    mask = dict(causal="--causal" in extra, scale=extra[1] if "--scale" in extra else None)
    out, lse = pasa.attention(*arrays, algorithm=algorithm, alloc=alloc, threads=2, **opts, **mask)
    assert out.shape == (2, 200, 64) and lse.shape == (2, 200) and out.dtype == np.float64
    assert_same_bits(out, o_cli.reshape(out.shape))
    g = pasa.golden(*arrays, threads=2, **mask)
    assert_same_bits(g["out"], g_cli.reshape(out.shape))
    assert g["guaranteed_bits"] == j["golden"]["guaranteed_bits"] and g["used_mpfr"] == j["golden"]["used_mpfr"]
    m = pasa.metrics(out, g, pasa.uniform_baseline(*arrays, **mask))
    assert m.pop("rel_rmse") == m["rmse"]  # Eq. 19's name; "rmse" is the programs' key
    assert_same_json(m, j["metrics"])
    assert_same_json(pasa.score_stats(*arrays, **mask), j["scores"])


def test_bit_patterns_with_their_format(tmp_path, rng):
    """bf16 inputs as uint16 bit patterns (numpy has no bfloat16), as pasa-attn --input-format bf16 reads them."""
    arrays = [pasa.encode(pasa.round(rng.normal(0, 2, (1, 2, 96, 32)), "bf16"), "bf16") for _ in range(3)]
    o_cli, _, _ = cli_attention(tmp_path, arrays, "--algorithm", "pasa", "--alloc", "pasa_bf16", "--input-format", "bf16")
    out, _ = pasa.attention(*arrays, algorithm="pasa", alloc="pasa_bf16", format="bf16")
    assert_same_bits(out, o_cli)
    with pytest.raises(ValueError, match=r"^q: <u2 holds bit patterns; name their format"):
        pasa.attention(*arrays)
    # float values with format=: rounded to it, as --input-format does
    f32 = [rng.normal(0, 1, (64, 32)).astype(np.float32) for _ in range(3)]
    o_cli, _, _ = cli_attention(tmp_path, f32, "--input-format", "fp8_e4m3fn", "--alloc", "fa_fp8")
    out, _ = pasa.attention(*f32, alloc="fa_fp8", format="fp8_e4m3fn")
    assert_same_bits(out, o_cli.reshape(out.shape))


def test_generated_problem_as_pasa_attn(tmp_path):
    (tmp_path / "p.json").write_text(json.dumps(PROBLEM))
    r = run_app("pasa-attn", "--problem", tmp_path / "p.json", "--algorithm", "pasa", "--alloc", "pasa_fp16",
                "--s1", 64, "--s2", 64, "--out-npy", tmp_path / "o.npy", "--golden-npy", tmp_path / "g.npy",
                "--json", "--threads", 2)
    j = json.loads(r.stdout)
    inputs = pasa.generate(PROBLEM)
    assert inputs["q"].shape == (1, 4, 200, 64) and inputs["k"].shape == (1, 2, 328, 64)
    assert inputs["format"] == "fp16" and inputs["causal"] and inputs["kv_len"] == [300]
    assert_same_bits(pasa.round(inputs["q"], "fp16"), inputs["q"])  # values of the problem's format
    out, lse = pasa.attention(**inputs, algorithm="pasa", alloc="pasa_fp16", s1=64, s2=64)
    assert_same_bits(out, np.load(tmp_path / "o.npy"))
    g = pasa.golden(**inputs)
    assert_same_bits(g["out"], np.load(tmp_path / "g.npy"))
    m = pasa.metrics(out, g, pasa.uniform_baseline(**inputs))
    assert m.pop("rel_rmse") == m["rmse"]
    assert_same_json(m, j["metrics"])
    assert np.all(np.isfinite(lse))
    # the JSON text of the problem reads the same
    assert_same_bits(pasa.generate(json.dumps(PROBLEM))["k"], inputs["k"])


def test_float64_run_equals_golden_and_golden_equals_numpy(rng):
    q, k, v = (rng.normal(0, 3, (2, 150, 48)) for _ in range(3))
    g = pasa.golden(q, k, v)
    assert g["guaranteed_bits"] >= 54
    s = q @ k.transpose(0, 2, 1) / np.sqrt(48)
    p = np.exp(s - s.max(-1, keepdims=True))
    ref = (p / p.sum(-1, keepdims=True)) @ v
    assert np.max(np.abs(g["out"] - ref)) < 1e-12 * np.max(np.abs(v))
    assert np.max(np.abs(g["lse"] - (s.max(-1) + np.log(p.sum(-1))))) < 1e-12
    for algorithm in pasa.algorithms():
        out, lse = pasa.attention(q, k, v, algorithm=algorithm, alloc="fp64", s1=64, s2=32)
        assert np.max(np.abs(out - g["out"])) < 1e-13 * np.max(np.abs(v)), algorithm
        assert np.max(np.abs(lse - g["lse"])) < 1e-12, algorithm


def test_ranks_strides_masks_threads(rng):
    q, k, v = half_inputs(rng, 0.5, (1, 2, 96, 32))
    out4, lse4 = pasa.attention(q, k, v, alloc="fa_fp16")
    out3, lse3 = pasa.attention(q[0], k[0], v[0], alloc="fa_fp16")
    out2, lse2 = pasa.attention(q[0, 1], k[0, 1], v[0, 1], alloc="fa_fp16")
    assert out3.shape == (2, 96, 32) and lse3.shape == (2, 96) and out2.shape == (96, 32) and lse2.shape == (96,)
    assert_same_bits(out3, out4[0])
    assert_same_bits(out2, out4[0, 1])
    assert_same_bits(lse2, lse4[0, 1])
    # strided views (a transposed K, every other row of a longer Q) equal their contiguous copies
    kt = np.ascontiguousarray(k.transpose(0, 1, 3, 2)).transpose(0, 1, 3, 2)
    qq = np.repeat(q, 2, axis=2)[:, :, ::2]
    assert not kt.flags.c_contiguous and not qq.flags.c_contiguous
    assert_same_bits(pasa.attention(qq, kt, v, alloc="fa_fp16")[0], out4)
    # a boolean mask equal to the causal one gives the causal result; an all-True mask changes nothing
    causal = np.tril(np.ones((96, 96), bool))[None]
    assert_same_bits(pasa.attention(q, k, v, mask=causal)[0], pasa.attention(q, k, v, causal=True)[0])
    assert_same_bits(pasa.golden(q, k, v, mask=causal)["out"], pasa.golden(q, k, v, causal=True)["out"])
    assert_same_bits(pasa.attention(q, k, v, mask=np.ones((1, 96, 96), bool))[0], pasa.attention(q, k, v)[0])
    # kv_len = 40 equals the first 40 keys
    assert_same_bits(pasa.golden(q, k, v, kv_len=[40])["out"], pasa.golden(q, k[:, :, :40], v[:, :, :40])["out"])
    # the thread count does not change a bit
    a = pasa.attention(q, k, v, algorithm="pasa", alloc="pasa_fp16", threads=1)
    b = pasa.attention(q, k, v, algorithm="pasa", alloc="pasa_fp16", threads=3)
    assert_same_bits(a[0], b[0])
    assert_same_bits(a[1], b[1])


def test_allocations_as_names_json_and_dicts(rng):
    q, k, v = half_inputs(rng, 20, (1, 512, 64))
    override = {"preset": "pasa_fp16", "stages": {"mean": "fp32", "sum": {"format": "fp16", "acc": "fp32"}}}
    full = pasa.allocation(override)  # every stage written out
    assert full["stages"]["mean"] == "fp32" and full["stages"]["sum"]["acc"] == "fp32"
    a = pasa.attention(q, k, v, algorithm="pasa", alloc=override)[0]
    assert_same_bits(pasa.attention(q, k, v, algorithm="pasa", alloc=json.dumps(override))[0], a)
    assert_same_bits(pasa.attention(q, k, v, algorithm="pasa", alloc=full)[0], a)
    spec = {"name": "pasa", "alloc": override, "s1": 128, "s2": 128, "pasa": {"beta": 0.984497}}
    assert_same_bits(pasa.attention(q, k, v, spec=spec)[0], a)
    assert_same_bits(pasa.attention(q, k, v, spec=json.dumps(spec))[0], a)
    assert not np.array_equal(pasa.attention(q, k, v, algorithm="pasa", alloc="pasa_fp16")[0], a)
    assert "pasa_fp16" in pasa.presets() and "pasa" in pasa.algorithms()


def test_errors_carry_the_programs_messages(tmp_path, rng):
    q, k, v = half_inputs(rng, 0, (1, 64, 32))
    # a shape mismatch: validate()'s message, as pasa-attn prints it
    for name, a in zip("qkv", (q, k[:, :, :16], v)):
        np.save(tmp_path / f"{name}.npy", a)
    cli = app_error("pasa-attn", "--q", tmp_path / "q.npy", "--k", tmp_path / "k.npy", "--v", tmp_path / "v.npy")
    with pytest.raises(ValueError) as e:
        pasa.attention(q, k[:, :, :16], v)
    # (pasa-attn checks the .npy headers first and names the files and their shapes in front)
    files = ", ".join(f"{n.upper()} {tmp_path / (n + '.npy')} {s}" for n, s in zip("qkv", ("(1, 64, 32)", "(1, 64, 16)", "(1, 64, 32)")))
    assert cli == files + ": " + str(e.value)
    # a misspelt allocation key: the JSON reader's message, at the argument's JSON path
    (tmp_path / "a.json").write_text(json.dumps({"name": "fa2", "alloc": {"preset": "fa_fp16", "stagse": {}}}))
    cli = app_error("pasa-attn", "--algo-json", tmp_path / "a.json", "--seq", 64, "--dim", 32)
    with pytest.raises(ValueError) as e:
        pasa.attention(q, k, v, spec=tmp_path.joinpath("a.json").read_text())
    assert str(e.value) == cli.replace(f"{tmp_path / 'a.json'}:", "spec:")
    assert "unknown key 'stagse' (did you mean 'stages'?)" in str(e.value)
    with pytest.raises(ValueError, match=r"^pasa.attention:/alloc: unknown allocation preset \"fa_fp17\""):
        pasa.attention(q, k, v, alloc="fa_fp17")
    with pytest.raises(ValueError, match=r"^pasa.attention:/name: unknown algorithm \"fa3\""):
        pasa.attention(q, k, v, algorithm="fa3")
    with pytest.raises(ValueError, match=r"^spec: give spec or the separate arguments"):
        pasa.attention(q, k, v, spec={"name": "fa2"}, alloc="fa_fp16")
    with pytest.raises(ValueError, match=r"^q: shape \(0, 32\) is empty$"):
        pasa.attention(np.zeros((0, 32)), np.zeros((0, 32)), np.zeros((0, 32)))
    with pytest.raises(ValueError, match=r"^q: shape \(32,\) is not \(S, D\), \(N, S, D\) or \(B, N, S, D\)$"):
        pasa.attention(np.zeros(32), np.zeros(32), np.zeros(32))
    with pytest.raises(ValueError, match=r"^k: dtype int64 not accepted"):
        pasa.attention(q, np.zeros((64, 32), np.int64), v)
    with pytest.raises(ValueError, match=r"^mask: dtype float64 not accepted"):
        pasa.attention(q, k, v, mask=np.ones((1, 64, 64)))
    with pytest.raises(ValueError, match=r"mask"):
        pasa.attention(q, k, v, mask=np.ones((1, 64, 63), bool))
    # the shape is checked, not only the element count: a transposed (B, Skv, Sq) mask is refused
    qr, kr, vr = np.zeros((1, 1, 4, 8)), np.zeros((1, 1, 6, 8)), np.zeros((1, 1, 6, 8))
    with pytest.raises(ValueError, match=r"^mask: shape \(1, 6, 4\) is not \(B, Sq, Skv\) = \(1, 4, 6\)"):
        pasa.attention(qr, kr, vr, mask=np.ones((1, 6, 4), bool))
    with pytest.raises(ValueError, match=r"^mask: shape \(24,\) is not"):
        pasa.golden(qr, kr, vr, mask=np.ones(24, bool))
    m = np.arange(24).reshape(4, 6) % 5 != 0
    assert_same_bits(pasa.attention(qr, kr, vr, mask=m[None])[0], pasa.attention(qr, kr, vr, mask=m)[0])  # B = 1
    (tmp_path / "p.json").write_text(json.dumps({"shape": {"Sqq": 3}}))
    cli = app_error("pasa-attn", "--problem", tmp_path / "p.json")
    with pytest.raises(ValueError) as e:
        pasa.generate({"shape": {"Sqq": 3}})
    assert str(e.value) == cli.replace(f"{tmp_path / 'p.json'}:", "problem:")
    assert str(e.value).startswith("problem:/shape/Sqq: unknown key 'Sqq' (did you mean 'Sq'?)")
    with pytest.raises(ValueError, match=r"^problem:/shape/Sq: problem shape has a zero: B=1 Nq=1 Nkv=1 Sq=0"):
        pasa.generate({"shape": {"Sq": 0}})
    with pytest.raises(ValueError, match=r"^problem: invalid JSON"):
        pasa.generate("{")
    with pytest.raises(ValueError, match=r"shape"):
        pasa.metrics(np.zeros((2, 3)), np.zeros((3, 3)))
    nan_q = q.astype(np.float64)
    nan_q[0, 0, 0] = np.nan
    with pytest.raises(ValueError, match=r"^Q has a non-finite element nan at \(b=0, n=0, s=0, d=0\)"):
        pasa.attention(nan_q, k, v)
    out, _ = pasa.attention(nan_q, k, v, allow_nonfinite=True)  # runs; the other query rows are unchanged
    assert_same_bits(out[0, 1:], pasa.attention(q, k, v)[0][0, 1:])


def test_gil_released_while_the_library_runs(rng):
    q, k, v = half_inputs(rng, 0, (1, 8, 2048, 64))  # about 0.3 s on one idle core: long enough to tell
    span = {}

    def work():
        span["start"] = time.perf_counter()
        pasa.attention(q, k, v, algorithm="pasa", alloc="pasa_fp16", threads=1)
        span["end"] = time.perf_counter()

    t = threading.Thread(target=work)
    ticks = []
    t.start()
    while t.is_alive():
        ticks.append(time.perf_counter())
        time.sleep(0.001)
    t.join()
    lo, hi = span["start"] + 0.02, span["end"] - 0.02
    assert hi - lo > 0.05, "the call was too short to tell"
    inside = sum(lo < x < hi for x in ticks)  # with the GIL held throughout the call, none
    assert inside >= 3, f"{inside} ticks in {hi - lo:.3f} s: the GIL was held"
