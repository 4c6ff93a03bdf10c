"""fp8_chain.py: FlashAttention-3's FP8 quantise -> GEMM -> dequantise chain on the GPU, for fp8_chain_compare.
Per case (4 input kinds x 2 draws, NumPy seed 20261123, fp16): Q 128 x 128, K 256 x 128 (D = 128);
scale = amax.float() / 448 (fp32), x8 = (x.float() / scale).to(float8_e4m3fn), S = torch._scaled_mm(q8, k8.t(),
scale_a = s_q, scale_b = s_k, out_dtype = float32) (use_fast_accum False: promotion every 128): per tensor, and
per block (K cut in two blocks of 128 rows, each with its own scale; Q is one block). Writes float32 .npy to $OUT."""
import os
import numpy as np
import torch
O, d, E = os.environ["OUT"], "cuda", torch.float8_e4m3fn
rng = np.random.default_rng(20261123)
def gen(c, shape):
    x = rng.standard_normal(shape)
    if c == 1: x += (rng.random(shape) < 0.01) * rng.standard_normal(shape) * 50  # outliers
    if c == 2: x *= 1e-3                                                            # small
    if c == 3: x = 0.5 * x + 10                                                     # biased
    return x.astype(np.float16)
def qz(x):
    s = x.abs().amax().float() / 448
    return (x.float() / s).to(E), s
def mm(a, b, sa, sb):
    return torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.float32)
R = {n: [] for n in ["q", "k", "q8", "k8", "k8b", "st", "sb", "scales"]}
for c in range(4):
    for r in range(2):
        q = torch.tensor(gen(c, (128, 128)), device=d)
        k = torch.tensor(gen(c, (256, 128)), device=d)
        q8, sq = qz(q)
        k8, sk = qz(k)
        st = mm(q8, k8, sq, sk)
        kb = [qz(k[128 * b:128 * b + 128]) for b in range(2)]
        sb = torch.cat([mm(q8, x8, sq, s) for x8, s in kb], dim=1)
        for n, v in [("q", q), ("k", k), ("q8", q8), ("k8", k8), ("k8b", torch.cat([x for x, _ in kb])), ("st", st), ("sb", sb),
                     ("scales", torch.stack([sq, sk, kb[0][1], kb[1][1]]))]:
            R[n].append(v.float().cpu().numpy())
for n, v in R.items():
    np.save(os.path.join(O, n + ".npy"), np.stack(v).astype(np.float32))
print(torch.cuda.get_device_name(), torch.__version__, {n: np.stack(v).shape for n, v in R.items()})
