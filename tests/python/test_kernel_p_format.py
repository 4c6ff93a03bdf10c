"""P's format on the flash engine ("p_format"): an ablation field (E5M2 P against FA4's saturating E4M3 P of
flash-attention #2716, docs/field-questions.md). Checked against P values worked out by hand here: two keys whose
P are 2^8 and 2^7.5 = 181.02, so E4M3 (step 16 in [128, 256)) gives 176 and E5M2 (step 32) gives 192."""
import numpy as np
import pytest

import pasa

SCALE = 0.5 / np.log2(np.e)  # c = scale·log2 e = 0.5: scores 2 and 1 give P = 2^(0.5·(s − 2) + 8)


def two_keys(D=16):
    q = np.zeros((1, 1, 1, D))
    q[0, 0, 0, 0] = 1.0
    k = np.zeros((1, 1, 2, D))
    k[0, 0, 0, 0], k[0, 0, 1, 0] = 2.0, 1.0
    v = np.zeros((1, 1, 2, D))
    v[0, 0, 0, 0], v[0, 0, 1, 1] = 1.0, 1.0  # O's channel j is key j's rounded P over l
    return q, k, v


@pytest.mark.parametrize("p_format, p1", [(None, 176.0), ("fp8_e4m3fn", 176.0), ("fp8_e5m2", 192.0)])
def test_p_is_cast_to_p_format(p_format, p1):
    q, k, v = two_keys()
    kern = {"recipe": "fa4_fp8_sm100"} if p_format is None else {"recipe": "fa4_fp8_sm100", "p_format": p_format}
    o, _ = pasa.attention(q, k, v, format="fp8_e4m3fn", kernel=kern, scale=SCALE)
    l = 256.0 + 2.0**7.5  # the row sum adds P before its cast (fp32)
    assert o[0, 0, 0, 0] == pytest.approx(256.0 / l, rel=2.0**-8)
    assert o[0, 0, 0, 1] == pytest.approx(p1 / l, rel=2.0**-8)


def test_e5m2_p_does_not_saturate_where_e4m3_does():
    # A growing max under the lazy rescale (threshold 4, max_offset 8; one key per block): key 1 (score 1) is
    # processed first (reverse order), then key 0 (score 7) raises the max by (7 − 1)·c = 3 ≤ 4, so the old max is
    # kept and its P = 2^(3 + 8) = 2048: above E4M3's 448 (saturated there), exact in E5M2. l = 256 + 2048.
    q, k, v = two_keys()
    k[0, 0, 0, 0], k[0, 0, 1, 0] = 7.0, 1.0
    base = {"recipe": "fa4_fp8_sm100", "rescale": "lazy", "rescale_threshold": 4, "block_n": 1}
    e4, _ = pasa.attention(q, k, v, format="fp8_e4m3fn", kernel=base, scale=SCALE)
    e5, _ = pasa.attention(q, k, v, format="fp8_e4m3fn", kernel=dict(base, p_format="fp8_e5m2"), scale=SCALE)
    assert e4[0, 0, 0, 0] == pytest.approx(448.0 / 2304.0, rel=2.0**-8)
    assert e5[0, 0, 0, 0] == pytest.approx(2048.0 / 2304.0, rel=2.0**-8)
    assert e4[0, 0, 0, 1] == pytest.approx(256.0 / 2304.0, rel=2.0**-8)
    assert e5[0, 0, 0, 1] == pytest.approx(256.0 / 2304.0, rel=2.0**-8)


def test_p_format_refused_off_the_flash_and_sage_engines():
    q, k, v = two_keys()
    with pytest.raises(ValueError, match="p_format of the sage and flash engines"):
        pasa.attention(q.astype(np.float16), k, v, format="fp16", kernel={"recipe": "ascend_ifa", "p_format": "fp16"})


def test_overflow_check_uses_p_format():
    q, k, v = two_keys()
    lazy = {"recipe": "fa4_fp8_sm100", "rescale": "lazy", "rescale_threshold": 4, "p_saturate": False}
    with pytest.raises(ValueError, match="P can reach 2\\^12 .*fp8_e4m3fn"):
        pasa.attention(q, k, v, format="fp8_e4m3fn", kernel=lazy, scale=SCALE)
    o, _ = pasa.attention(q, k, v, format="fp8_e4m3fn", kernel=dict(lazy, p_format="fp8_e5m2"), scale=SCALE)
    assert np.isfinite(o).all()
