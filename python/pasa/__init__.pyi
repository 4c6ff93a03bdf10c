# Type stubs of the package pasa (python/pasa/__init__.py over the extension pasa._pasa). Each function's
# parameters are those its docstring opens with (tests/python/test_package.py holds the two together).
import os
from typing import Any, Sequence

import numpy as np
import numpy.typing as npt

__version__: str
__all__: list[str]

# A format: a name ("fp16", "bf16", "fp8_e4m3fn", "float16", "bfloat16", "p=8,emax=15", ...), a numpy /
# ml_dtypes dtype or scalar type (numpy.float16, ml_dtypes.bfloat16, numpy.dtype("float32")), or a torch
# dtype (torch.bfloat16).
Format = str | np.dtype[Any] | type
# A dtype= argument: numpy's or ml_dtypes' dtype, scalar type or name.
DTypeLike = npt.DTypeLike
# An array argument: numpy arrays (float16/32/64, ml_dtypes, or bit patterns where documented), what
# numpy.asarray reads, or CPU/CUDA torch tensors (float16, bfloat16, float32, float64; results then come back
# as tensors: python/pasa/_tensors.py).
ArrayLike = npt.ArrayLike | Any
# An allocation: a preset name, an allocation's JSON text, or its dict.
Allocation = str | dict[str, Any]

def formats() -> list[dict[str, Any]]: ...
def format_info(name: Format) -> dict[str, Any]: ...
def round(x: ArrayLike | float, format: Format, *, mode: str = "rne", overflow: str = "ieee",
          flush_input: bool = False, flush_output: bool = False, seed: int = 0, dtype: DTypeLike | None = None,
          out: np.ndarray | None = None, convention: str = "exact") -> np.ndarray | float: ...
def block_schemes() -> list[str]: ...
def block_quantise(x: ArrayLike, scheme: str | dict, axis: int = -1, *, scale_rule: str | None = None,
                   round: str | None = None, saturate: bool | None = None, operand: str = "a",
                   seed: int | None = None) -> dict: ...
def encode(x: ArrayLike, format: Format, dtype: DTypeLike | None = None) -> np.ndarray: ...
def decode(bits: ArrayLike, format: Format) -> npt.NDArray[np.float64]: ...
def algorithms() -> list[str]: ...
def presets() -> list[str]: ...
def allocation(alloc: Allocation) -> dict[str, Any]: ...
def attention(q: ArrayLike, k: ArrayLike, v: ArrayLike, *, algorithm: str | None = "fa2",
              alloc: Allocation | None = "fa_fp16_fp32", beta: float | None = 0.984497, s1: int | None = 128,
              s2: int | None = 128, seed: int | None = 0, spec: dict[str, Any] | str | None = None,
              format: Format | None = None, scale: float | None = None, causal: bool = False,
              kv_len: Sequence[int] | None = None, mask: ArrayLike | None = None, pse: ArrayLike | None = None,
              select: ArrayLike | None = None, select_value: float = -1e12, allow_nonfinite: bool = False,
              threads: int | None = None, kernel: str | dict[str, Any] | None = None
              ) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]: ...
def kernels() -> list[dict[str, Any]]: ...
def gpu_math(x: ArrayLike, function: str = "ex2") -> npt.NDArray[np.float32]: ...
def compare_kernel(q: ArrayLike, k: ArrayLike, v: ArrayLike, gpu_out: ArrayLike, *, format: Format | None = None,
                   scale: float | None = None, causal: bool = False, threads: int | None = None) -> dict[str, Any]: ...
def golden(q: ArrayLike, k: ArrayLike, v: ArrayLike, *, format: Format | None = None, scale: float | None = None,
           causal: bool = False, kv_len: Sequence[int] | None = None, mask: ArrayLike | None = None,
           pse: ArrayLike | None = None, select: ArrayLike | None = None, select_value: float = -1e12,
           allow_nonfinite: bool = False, precision_bits: int = 128, fast: bool = True, threads: int | None = None) -> dict[str, Any]: ...
def uniform_baseline(q: ArrayLike, k: ArrayLike, v: ArrayLike, *, format: Format | None = None, scale: float | None = None,
                     causal: bool = False, kv_len: Sequence[int] | None = None, mask: ArrayLike | None = None,
                     pse: ArrayLike | None = None, select: ArrayLike | None = None, select_value: float = -1e12,
                     allow_nonfinite: bool = False, threads: int | None = None) -> npt.NDArray[np.float64]: ...
def score_stats(q: ArrayLike, k: ArrayLike, v: ArrayLike, *, score_format: Format = "fp16",
                format: Format | None = None, scale: float | None = None, causal: bool = False,
                kv_len: Sequence[int] | None = None, mask: ArrayLike | None = None,
                pse: ArrayLike | None = None, select: ArrayLike | None = None, select_value: float = -1e12,
                allow_nonfinite: bool = False, threads: int | None = None) -> dict[str, Any]: ...
def range_stats(q: ArrayLike, k: ArrayLike, v: ArrayLike, *, beta: float = 0.984497, s2: int = 128,
                score_format: Format = "fp16", heads: int = 0, format: Format | None = None, scale: float | None = None,
                causal: bool = False, kv_len: Sequence[int] | None = None, mask: ArrayLike | None = None,
                pse: ArrayLike | None = None, select: ArrayLike | None = None, select_value: float = -1e12,
                allow_nonfinite: bool = False, threads: int | None = None) -> list[dict[str, Any]]: ...
def metrics(out: ArrayLike, golden: ArrayLike | dict[str, Any], baseline: ArrayLike | None = None) -> dict[str, Any]: ...
def generate(problem: dict[str, Any] | str, *, threads: int | None = None) -> dict[str, Any]: ...
def unified_attention(q: ArrayLike, k_cache: ArrayLike, v_cache: ArrayLike, sequences: Sequence[dict[str, Any]], *,
                      algorithm: str | None = "fa2", alloc: Allocation | None = "fa_fp16_fp32",
                      beta: float | None = 0.984497, s1: int | None = 128, s2: int | None = 128,
                      seed: int | None = 0, spec: dict[str, Any] | str | None = None, format: Format | None = None,
                      scale: float | None = None, threads: int | None = None) -> tuple[npt.NDArray[np.float64], npt.NDArray[np.float64]]: ...
def unified_golden(q: ArrayLike, k_cache: ArrayLike, v_cache: ArrayLike, sequences: Sequence[dict[str, Any]], *,
                   format: Format | None = None, scale: float | None = None, precision_bits: int = 128, fast: bool = True,
                   threads: int | None = None) -> dict[str, Any]: ...
def unified_baseline(q: ArrayLike, k_cache: ArrayLike, v_cache: ArrayLike, sequences: Sequence[dict[str, Any]], *,
                     format: Format | None = None, scale: float | None = None,
                     threads: int | None = None) -> npt.NDArray[np.float64]: ...
def unified_score_stats(q: ArrayLike, k_cache: ArrayLike, v_cache: ArrayLike, sequences: Sequence[dict[str, Any]], *,
                        score_format: Format = "fp16", format: Format | None = None, scale: float | None = None,
                        threads: int | None = None) -> dict[str, Any]: ...
def gemm(a: ArrayLike, b: ArrayLike, *, a_format: Format | None = None, b_format: Format | None = None,
         acc: Format = "fp32", out: Format = "fp32", model: str | dict[str, Any] = "ordered") -> npt.NDArray[np.float64]: ...
def table3_initial_betas() -> list[float]: ...
def solve_beta(beta0: float | Sequence[float], *, n: int = 128, format: Format = "fp16", sqrt_d: int = 0,
               tol: float = 1e-8, max_iter: int = 1000) -> dict[str, Any] | list[dict[str, Any]]: ...
def attribute(problem: dict[str, Any] | str | None = None, *, q: ArrayLike | None = None,
              k: ArrayLike | None = None, v: ArrayLike | None = None, format: Format | None = None,
              scale: float | None = None, causal: bool = False, kv_len: Sequence[int] | None = None,
              mask: ArrayLike | None = None, pse: ArrayLike | None = None, select: ArrayLike | None = None,
              select_value: float = -1e12, allow_nonfinite: bool = False, algorithm: str | None = "pasa", alloc: Allocation | None = "pasa_fp16",
              beta: float | None = 0.984497, s1: int | None = 128, s2: int | None = 128, seed: int | None = 0,
              spec: dict[str, Any] | str | None = None, invariance: bool = False,
              threads: int | None = None) -> dict[str, Any]: ...
class SweepRows(list[dict[str, Any]]):
    attrs: dict[str, Any]
def sweep(config: dict[str, Any] | str | os.PathLike[str], out_dir: str | os.PathLike[str] | None = None, *,
          threads: int | None = None, jobs: int = 1, resume: bool = False, overwrite: bool = False, shard: str | None = None,
          progress: bool | None = None, ranges: int | None = None) -> SweepRows | Any: ...

# pasa.torch (python/pasa/torch.py, imported on first use: it imports torch): scaled_dot_product_attention,
# emulate, register_transformers.
from . import torch as torch
# pasa.plot (python/pasa/plot.py, imported on first use): sweep, series, t975 (gnuplot).
from . import plot as plot

# pasa_capture's, imported on first use (python/pasa_capture.py; torch only inside capture()).
class CaptureError(ValueError): ...
def capture(model: Any, inputs: Any, out_dir: str | os.PathLike[str], *, adapters: dict[Any, Any] | None = None,
            layers: Sequence[int] | None = None, dtype: str | None = None, model_name: str | None = None,
            collapse_repeated_kv: bool = True, notes: Any = None, overwrite: bool = False) -> dict[str, Any]: ...
