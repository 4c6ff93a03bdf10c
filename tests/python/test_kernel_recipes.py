"""Kernel recipes against the GPU (issue 38): torch SDPA's flash backend captured on an H200
(results/hardware/kernels/, experiments/gpu/kernels/sdpa_capture.py) and pasa's torch_flash_sm90 recipe on the
same inputs, regenerated here from the manifest's seeds (sha256-checked). The expected bits are the GPU's."""
import json
import os
import sys

import numpy as np
import pytest

import pasa

from conftest import run_app

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
RES = os.path.join(ROOT, "results", "hardware", "kernels")
sys.path.insert(0, os.path.join(ROOT, "experiments", "gpu", "kernels"))
from kernel_inputs import load_captures, make_inputs, sha256_hex  # noqa: E402

MANIFEST = json.load(open(os.path.join(RES, "sdpa_manifest.json")))
CASES = {c["name"]: c for c in MANIFEST["cases"]}
# One per dtype x mask x head dimension x shape family, split-KV (1 to 6 parts) and not, biased inputs.
CHOSEN = ["uniform_fp16_full_d64_gqa", "uniform_fp16_full_d128_decode", "uniform_fp16_full_d256_odd",
          "uniform_bf16_causal_d128_odd", "uniform_bf16_full_d256_rect", "uniformx20_fp16_full_d128_rect",
          "uniformx20_bf16_causal_d256_odd", "hybridx20am10_fp16_causal_d128_odd", "hybridx20am10_bf16_full_d64_gqa",
          "probe_onehotv_u11_skv256_fp16_full_d256", "probe_scale_0.3_fp16_full_d128"]


CAPTURES = load_captures(os.path.join(RES, "captures_main.npz"))


def capture(key):
    return CAPTURES[key]


def run_recipe(case, kernel="torch_flash_sm90"):
    q, k, v = make_inputs(case)
    for t, x in zip("qkv", (q, k, v)):
        assert sha256_hex(x) == case["sha256"][t], f"{case['name']}: regenerated {t} is not the captured input"
    out, lse = pasa.attention(q, k, v, format=case["dtype"], kernel=kernel, scale=case["scale"],
                              causal=bool(case["causal"]))
    return pasa.encode(out, case["dtype"]).astype(np.uint16), lse


# torch_efficient_sm90: the same cases where SDPA ran the backend (no GQA there), d > 128 through its fp32
# output buffer, and causal with Sq = Skv (top-left, refused otherwise).
EFFICIENT = ["uniform_fp16_full_d64_odd", "uniform_bf16_full_d256_rect", "uniform_fp16_causal_d256_odd",
             "uniformx20_fp16_causal_d256_odd", "hybridx20am10_fp16_full_d256_rect", "uniformx20_bf16_full_d128_decode",
             "probe_onehotv_u11_skv256_fp16_causal_d256"]


@pytest.mark.parametrize("backend, recipe, name",
                         [("sdpa_flash", "torch_flash_sm90", n) for n in CHOSEN if n in CASES] +
                         [("sdpa_efficient", "torch_efficient_sm90", n) for n in EFFICIENT if n in CASES])
def test_recipe_matches_the_gpu(backend, recipe, name):
    case = CASES[name]
    r = case["results"][backend]
    assert r["status"] == "ok"
    got, _ = run_recipe(case, recipe)
    want = capture(r["out_key"]).reshape(got.shape)
    same = np.mean(got == want) * 100
    assert same >= 99.99, f"{name}: {same:.4f} % of output bits identical"
    # Where they differ, by one unit of the 16-bit grid at most.
    diff = np.abs(got.astype(np.int64) - want.astype(np.int64))
    assert diff.max() <= 1, f"{name}: {diff.max()} ulps apart"


@pytest.mark.parametrize("name, field, value", [
    ("uniform_fp16_full_d128_gqa", "kv_order", "forward"),  # 2 key blocks of 64, no split
    ("uniform_fp16_full_d128_gqa", "exp2", "exact"),
    ("uniform_fp16_full_d128_gqa", "row_sum", "sequential"),
    ("uniform_fp16_full_d128_gqa", "normalise", "divide"),
    ("uniform_fp16_full_d128_gqa", "block_n", 128),
    ("uniform_fp16_full_d256_odd", "split", "none"),  # 5 parts of one block each
    ("uniformx20_fp16_full_d128_rect", "lse_fma", False),  # scores near 10^4: the LSE's FFMA matters
])
def test_a_schedule_field_moves_the_bits(name, field, value):
    """Each overridable field is one the kernel's bits depend on: changed alone, it moves the output away from
    the GPU's (an ignored field would leave the bits as they are)."""
    case = CASES[name]
    want = capture(case["results"]["sdpa_flash"]["out_key"]).reshape(case["shape_q"])
    base, _ = run_recipe(case)
    got, _ = run_recipe(case, {"recipe": "torch_flash_sm90", field: value})
    assert not np.array_equal(got, base), f"{field}={value} changed nothing"
    assert np.mean(got == want) < np.mean(base == want), f"{field}={value} matched the GPU as well as the recipe"


def test_kernels_listing_and_refusals(tmp_path):
    names = [k["name"] for k in pasa.kernels()]
    assert "torch_flash_sm90" in names
    k = pasa.kernels()[names.index("torch_flash_sm90")]
    assert k["schedule"]["kv_order"] == "reverse" and "flash-attention" in k["source"]
    q = np.zeros((1, 1, 8, 64), np.float16)
    with pytest.raises(ValueError, match="unknown kernel recipe \"nope\"; known: torch_flash_sm90"):
        pasa.attention(q, q, q, kernel="nope")
    with pytest.raises(ValueError, match="kernel: a kernel recipe fixes the algorithm"):
        pasa.attention(q, q, q, kernel="torch_flash_sm90", alloc="fa_fp32")
    with pytest.raises(ValueError, match="kernel/kv_order: unknown value \"sideways\"; known: forward, reverse"):
        pasa.attention(q, q, q, kernel={"recipe": "torch_flash_sm90", "kv_order": "sideways"})
    with pytest.raises(ValueError, match="runs on fp16 or bf16 Q, K and V"):
        pasa.attention(q.astype(np.float32), q.astype(np.float32), q.astype(np.float32), kernel="torch_flash_sm90")
    r = run_app("pasa-attn", "--list-kernels")
    assert "`torch_flash_sm90`" in r.stdout
    r = run_app("pasa-attn", "--heads", 1, "--seq", 16, "--dim", 64, "--kernel", "torch_flash_sm90")
    assert "rmse" in r.stdout
    r = run_app("pasa-attn", "--heads", 1, "--seq", 16, "--dim", 64, "--kernel", "torch_flash_sm90", "--alloc",
                "fa_fp32", expect_rc=2)
    assert "--kernel" in r.stderr


def test_top_left_causal_is_refused_where_it_differs_from_pasas():
    case = CASES["uniform_fp16_causal_d128_rect"]  # Sq 100, Skv 300
    with pytest.raises(ValueError, match="aligned top-left .* Sq = 100 != Skv = 300"):
        run_recipe(case, "torch_efficient_sm90")


def test_recipe_results_do_not_depend_on_threads():
    case = CASES["uniform_bf16_causal_d128_odd"]
    q, k, v = make_inputs(case)
    one, _ = pasa.attention(q, k, v, format="bf16", kernel="torch_flash_sm90", causal=True, threads=1)
    many, _ = pasa.attention(q, k, v, format="bf16", kernel="torch_flash_sm90", causal=True, threads=3)
    assert np.array_equal(one, many)
