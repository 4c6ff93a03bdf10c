"""torch tensors in and out of the package's functions (python/pasa/__init__.py wraps each function with them).

A call that is given a torch tensor anywhere among its arguments (or in a dict, list or tuple among them) gets
numpy arrays in their place, of the same values: float16, float32 and float64 tensors as the arrays torch
shares with them; bfloat16 (and torch 2's float8) tensors as their float32 values, exact, marked with their
format (``__pasa_format__``, read by python/module_support.hpp's TensorArg as it reads an ml_dtypes array's
dtype), so that the library sees the inputs numpy users give as bit patterns of that format. A CUDA tensor is
copied to the CPU first, with a warning. The call's arrays then come back as torch tensors on the first
tensor's device: in the dtype of the format the values belong to where torch has one (the allocation's out
format for attention, the format for round and decode, gemm's out), else float64 (or the array's own dtype),
so that the values, and thus the bits, are the numpy path's.

torch is never imported here: a tensor is recognised by its type (its class or a base named Tensor of module
torch), and torch itself is taken from sys.modules, where it is whenever a tensor exists. `import pasa` so
neither needs nor loads torch.
"""
import sys as _sys
import warnings as _warnings

import numpy as _np

# The library's formats torch has dtypes of (torch 2.1 added the float8 ones; earlier torch lacks them).
_TORCH_DTYPE_OF_FORMAT = {"fp16": "float16", "bf16": "bfloat16", "fp32": "float32", "fp64": "float64",
                          "fp8_e4m3fn": "float8_e4m3fn", "fp8_e5m2": "float8_e5m2"}
# torch's float dtypes that numpy lacks: passed as float32 values marked with their format.
_MARKED = {"bfloat16": "bf16", "float8_e4m3fn": "fp8_e4m3fn", "float8_e5m2": "fp8_e5m2"}


def is_tensor(x):
    """Whether x is a torch tensor (torch.Tensor or a subclass: nn.Parameter, ...), without importing torch."""
    return any(c.__name__ == "Tensor" and c.__module__ == "torch" for c in type(x).__mro__)


def is_torch_dtype(x):
    return type(x).__name__ == "dtype" and type(x).__module__ == "torch"


def torch_dtype_name(d):
    """torch.float16 -> "float16" (numpy's and ml_dtypes' names, which the library knows)."""
    return str(d).split(".", 1)[1]


def _torch():
    return _sys.modules["torch"]


class MarkedValues(_np.ndarray):
    """float32 values of a format numpy has no dtype for (``__pasa_format__``: its name), from a torch tensor."""


def has_tensor(args, kwargs):
    return any(_contains_tensor(a, 0) for a in args) or any(_contains_tensor(v, 0) for v in kwargs.values())


def _contains_tensor(x, depth):
    if is_tensor(x):
        return True
    if depth < 3 and isinstance(x, (list, tuple)):
        return any(_contains_tensor(e, depth + 1) for e in x)
    if depth < 3 and isinstance(x, dict):
        return any(_contains_tensor(e, depth + 1) for e in x.values())
    return False


class Conversion:
    """The arrays of one call: tensors to numpy (to_numpy, recursively) and results back (to_torch)."""

    def __init__(self, function_name):
        self.function_name = function_name
        self.device = None     # the first tensor's device: results go back there
        self.formats = {}      # argument path -> the format of a bfloat16 / float8 tensor's values

    def tensor_to_numpy(self, t, where):
        torch = _torch()
        t = t.detach()
        if self.device is None:
            self.device = t.device
        if t.device.type != "cpu":
            _warnings.warn(f"pasa.{self.function_name}: {where} is a {t.device.type} tensor; copied to the CPU "
                           "(pasa computes there)", stacklevel=4)
            t = t.cpu()
        if hasattr(t, "resolve_neg"):
            t = t.resolve_neg().resolve_conj()
        name = torch_dtype_name(t.dtype)
        if name in _MARKED:
            a = t.to(torch.float32).numpy().view(MarkedValues)  # (bf16 and fp8 values are float32 values)
            a.__pasa_format__ = _MARKED[name]
            self.formats[where] = _MARKED[name]
            return a
        return t.numpy()

    def to_numpy(self, x, where="", depth=0):
        if is_tensor(x):
            return self.tensor_to_numpy(x, where)
        if depth < 3 and isinstance(x, (list, tuple)):
            return type(x)(self.to_numpy(e, f"{where}[{i}]", depth + 1) for i, e in enumerate(x))
        if depth < 3 and isinstance(x, dict):
            return {k: self.to_numpy(v, f"{where}[{k!r}]" if where else str(k), depth + 1) for k, v in x.items()}
        return x

    def array_to_torch(self, a, torch_dtype=None):
        """A result array as a tensor on the call's device: in torch_dtype (its values must be of it), else in
        the array's dtype (unsigned bit patterns wider than a byte in torch's signed type of their width, the
        same bits, as x.view(torch.int16) gives them)."""
        torch = _torch()
        a = _np.asarray(a)
        if a.dtype.kind == "u" and a.itemsize > 1:
            a = a.view(f"int{8 * a.itemsize}")
        if not a.flags.writeable:
            a = a.copy()
        t = torch.from_numpy(a) if a.dtype.kind in "fiub" else torch.as_tensor(a)
        if torch_dtype is not None and t.dtype != torch_dtype:
            t = t.to(torch_dtype)
        return t.to(self.device) if self.device is not None and self.device.type != "cpu" else t

    def to_torch(self, r, first_dtype=None, depth=0):
        """Every numpy array in r (a result: an array, or a tuple, list or dict holding them) as a tensor; the
        first array met (attention's out, round's result) in first_dtype."""
        if isinstance(r, _np.ndarray):
            return self.array_to_torch(r, first_dtype)
        if depth < 3 and isinstance(r, tuple):
            return tuple(self.to_torch(e, first_dtype if i == 0 else None, depth + 1) for i, e in enumerate(r))
        if depth < 3 and isinstance(r, list):
            return [self.to_torch(e, None, depth + 1) for e in r]
        if depth < 3 and isinstance(r, dict):
            return {k: self.to_torch(v, None, depth + 1) for k, v in r.items()}
        return r


def torch_dtype_of_format(format_info):
    """The torch dtype for values of a format (a format_info dict): its own where torch has it, else float32
    when every value of the format is a float32, else float64."""
    torch = _torch()
    own = _TORCH_DTYPE_OF_FORMAT.get(format_info["name"])
    if own is not None and hasattr(torch, own):
        return getattr(torch, own)
    fits32 = (format_info["p"] <= 24 and format_info["max_finite"] <= float(_np.finfo(_np.float32).max)
              and format_info["min_subnormal"] >= 2.0 ** -149)
    return torch.float32 if fits32 else torch.float64
