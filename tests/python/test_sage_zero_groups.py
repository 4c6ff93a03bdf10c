"""SageAttention where a quantisation group is all zero, against the H200: SA2's per-channel FP8 V turns a V
channel that is zero over every key into NaN (448 / 0 = inf, 0 · inf = NaN), V all zero the whole head, while a
zero Q block or K stays finite (their INT8 amax starts at 1e-7); SA1 stays finite throughout. The GPU's output
bits of the D 64 cases are in results/hardware/sage/zero_groups_captures.npz
(experiments/gpu/kernels/sage_zero_channel.py); pasa's sage1_triton and sage2_sm90 must give every bit of them,
NaN positions included, on inputs regenerated from the manifest's seeds (sha256-checked)."""
import os
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(ROOT, "experiments", "gpu", "kernels"))
from sage_zero_compare import compare  # noqa: E402

ROWS = compare(os.path.join(ROOT, "results", "hardware", "sage"), log=lambda s: None)


def test_every_committed_case_is_compared():
    assert len(ROWS) == 20  # 5 zero groups x fp16, bf16 x sa1, sa2 at D 64
    assert {r["zero"] for r in ROWS} == {"v_channel", "v_all", "q_block", "k_all", "none"}


@pytest.mark.parametrize("row", ROWS, ids=lambda r: f"{r['case']}-{r['kernel']}")
def test_every_bit_and_every_nan_as_the_gpu(row):
    assert row["identical_bits_pct"] == "100.0000" and row["nan_positions_equal"], row
    assert row["nan_head1_kernel"] == 0  # the NaN stays in its head


def test_the_nan_pattern_itself():
    by = {(r["zero"], r["dtype"], r["kernel"]): r for r in ROWS}
    for dtype in ("fp16", "bf16"):
        assert by[("v_channel", dtype, "sa2")]["nan_kernel"] == 256  # one channel, every query row
        assert by[("v_all", dtype, "sa2")]["nan_kernel"] == 256 * 64  # the whole head
        for zero in ("v_channel", "v_all", "q_block", "k_all", "none"):
            assert by[(zero, dtype, "sa1")]["nan_kernel"] == 0
        for zero in ("q_block", "k_all", "none"):
            assert by[(zero, dtype, "sa2")]["nan_kernel"] == 0
