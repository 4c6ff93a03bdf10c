"""tc_common.py: what tc_probe.py and tc_random.py share: the input formats, the GEMM calls whose
tensor-core arithmetic they measure, and the storage of inputs and outputs as NumPy arrays.

Method: test vectors that isolate one feature of the multiply-accumulate at a time, then randomised
comparison until a software model is bit-accurate -- Fasi, Higham, Mikaitis, Pranesh, "Numerical behavior of
NVIDIA tensor cores", PeerJ Comput. Sci. 7:e330 (2021); Khattak, Mikaitis, "Accurate models of NVIDIA tensor
cores", arXiv:2512.07004 (2025).

Every GEMM is C (M x N) = A (M x K) . B (K x N) with B handed over as Bt (N x K, row-major), i.e. every
output element C[i, j] = sum_k A[i, k] * Bt[j, k] is one dot product of length K.

Variants (the GPU call each output comes from; the output format in brackets):
  fp16  mm_f32    torch.mm(a, b, out_dtype=torch.float32)          [fp32]  (the fp32 accumulator itself)
        mm_f16    torch.mm(a, b)                                    [fp16]  (the accumulator rounded to fp16)
  bf16  mm_f32, mm_bf16                                             as fp16
  tf32  mm_tf32   torch.mm on float32 with allow_tf32 = True        [fp32]  (inputs stored as float32)
  e4m3  scaled_f32       torch._scaled_mm(a, b, scale 1, 1, out_dtype=float32, use_fast_accum=False) [fp32]
        scaled_f32_fast  the same with use_fast_accum=True                                            [fp32]
  e5m2  as e4m3 (B in e5m2 too; if cuBLAS refuses e5m2 x e5m2, B in e4m3 and the manifest says so)
Reduced-precision reductions (allow_fp16/bf16_reduced_precision_reduction) are off, TF32 off except for tf32.
"""
import json
import sys

import numpy as np
import torch

DEV = "cuda"

# name: (torch dtype of the inputs, numpy storage dtype, pasa format name, largest finite value)
FORMATS = {
    "fp16": (torch.float16, np.float16, "fp16", 65504.0),
    "bf16": (torch.bfloat16, np.uint16, "bf16", 3.3895313892515355e38),
    "tf32": (torch.float32, np.float32, "tf32", 3.4028234663852886e38),
    "e4m3": (torch.float8_e4m3fn, np.uint8, "fp8_e4m3fn", 448.0),
    "e5m2": (torch.float8_e5m2, np.uint8, "fp8_e5m2", 57344.0),
}
VARIANTS = {
    "fp16": [("mm_f32", "fp32"), ("mm_f16", "fp16")],
    "bf16": [("mm_f32", "fp32"), ("mm_bf16", "bf16")],
    "tf32": [("mm_tf32", "fp32")],
    "e4m3": [("scaled_f32", "fp32"), ("scaled_f32_fast", "fp32")],
    "e5m2": [("scaled_f32", "fp32"), ("scaled_f32_fast", "fp32")],
}
NOTES = {}  # variant -> note (fallbacks taken), written to the manifest


def setup():
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_fp16_reduced_precision_reduction = False
    torch.backends.cuda.matmul.allow_bf16_reduced_precision_reduction = False


def gpu_info():
    p = torch.cuda.get_device_properties(0)
    return {"torch": torch.__version__, "cuda": torch.version.cuda, "gpu": p.name,
            "capability": list(torch.cuda.get_device_capability(0)),
            "cublas_flags": {"allow_fp16_reduced_precision_reduction": False,
                             "allow_bf16_reduced_precision_reduction": False}}


def to_device(x32, fmt):
    """float32 numpy array -> torch tensor of the format on the GPU (torch's RNE conversion, proven equal to
    pasa::round by conversions.py); values must already lie within the format's range."""
    dt = FORMATS[fmt][0]
    t = torch.from_numpy(np.ascontiguousarray(x32, dtype=np.float32)).to(DEV)
    return t if dt == torch.float32 else t.to(dt)


def storage(t, fmt):
    """A GPU tensor of the format -> the numpy array stored in the .npz (bit patterns for bf16 and fp8)."""
    if fmt == "bf16":
        return t.view(torch.int16).cpu().numpy().view(np.uint16)
    if fmt in ("e4m3", "e5m2"):
        return t.view(torch.uint8).cpu().numpy()
    return t.cpu().numpy()


def values(t):
    return t.float().cpu().numpy().astype(np.float64)


def out_storage(c, out_fmt):
    if out_fmt == "bf16":
        return c.contiguous().view(torch.int16).cpu().numpy().view(np.uint16)
    return c.cpu().numpy()


def gemm(fmt, variant, a, bt):
    """One GEMM on the GPU: a (M x K), bt (N x K) tensors of the format -> C (M x N)."""
    if fmt in ("fp16", "bf16"):
        b = bt.t().contiguous()
        if variant == "mm_f32":
            try:
                return torch.mm(a, b, out_dtype=torch.float32)
            except (TypeError, RuntimeError) as e:  # older torch: no out_dtype
                NOTES[f"{fmt}/{variant}"] = f"torch.mm out_dtype failed ({e}); variant skipped"
                return None
        return torch.mm(a, b)
    if fmt == "tf32":
        torch.backends.cuda.matmul.allow_tf32 = True
        try:
            return torch.mm(a, bt.t().contiguous())
        finally:
            torch.backends.cuda.matmul.allow_tf32 = False
    # FP8: _scaled_mm wants A row-major and B column-major (bt row-major is B column-major).
    one = torch.tensor(1.0, device=DEV, dtype=torch.float32)
    fast = variant == "scaled_f32_fast"
    return torch._scaled_mm(a, bt.t(), scale_a=one, scale_b=one, out_dtype=torch.float32, use_fast_accum=fast)


def e5m2_b_format():
    """cuBLAS may refuse e5m2 x e5m2; then B is e4m3 (recorded)."""
    a = torch.ones(16, 16, device=DEV).to(torch.float8_e5m2)
    try:
        gemm("e5m2", "scaled_f32", a, a)
        return "e5m2"
    except (RuntimeError, ValueError) as e:
        NOTES["e5m2"] = f"e5m2 x e5m2 refused ({str(e)[:200]}); B operand in e4m3"
        return "e4m3"


def save_npz(path, arrays, compressed=False):
    (np.savez_compressed if compressed else np.savez)(path, **arrays)
    size = sum(a.nbytes for a in arrays.values())
    print(f"wrote {path}: {len(arrays)} arrays, {size / 2**20:.1f} MiB", flush=True)


def write_json(path, obj):
    with open(path, "w") as h:
        json.dump(obj, h, indent=1)


def die(msg):
    sys.exit(f"tc: {msg}")
