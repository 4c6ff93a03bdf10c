"""One call of an extension function, as python/pasa/__init__.py's wrapper makes it: torch tensors among the
arguments converted (pasa/_tensors.py) and the results converted back, per function where the dtype of a
result is that of a format (attention's out, round's, decode's, gemm's); and pybind11's answer to a wrong
keyword or type (several KB: every overload, then every argument printed, arrays included) replaced by one
line naming the argument."""
import difflib as _difflib

from . import _pasa, _tensors

# torch's (and other libraries') names of pasa's arguments: the hint a wrong keyword gets.
_OTHER_NAMES = {"is_causal": "causal=", "attn_mask": "mask= (boolean, True = attend) or pse= (added to the scores)",
                "softmax_scale": "scale=", "sm_scale": "scale=", "num_threads": "threads="}


def _argument_error(name, signature, args, kwargs):
    """The one-line TypeError for arguments pybind11 refused: the keyword it does not know (with the
    nearest spelling), or which arguments have which types (no values: they may be large arrays)."""
    try:
        signature.bind(*args, **kwargs)
    except TypeError as e:
        text = str(e)
        known = [p for p in signature.parameters]
        for k in kwargs:
            if k not in signature.parameters:
                hint = _OTHER_NAMES.get(k) or next((f"{m}=" for m in _difflib.get_close_matches(k, known, 1)), None)
                if hint and hint.split("=")[0] not in known:
                    hint = None
                return (f"pasa.{name}(): unknown keyword argument {k!r}" + (f"; did you mean {hint}?" if hint else "")
                        + f" (arguments: {', '.join(known)})")
        return f"pasa.{name}(): {text}"
    given = [f"{type(a).__name__}" for a in args] + [f"{k}={type(v).__name__}" for k, v in kwargs.items()]
    return (f"pasa.{name}(): an argument of a type it does not take; given ({', '.join(given)}); see "
            f"help(pasa.{name})")


def _plain(name, function, signature, args, kwargs):
    try:
        return function(*args, **kwargs)
    except TypeError as e:
        if "incompatible function arguments" not in str(e):
            raise
        raise TypeError(_argument_error(name, signature, args, kwargs)) from None


def call(name, function, signature, args, kwargs):
    torch_dtype = kwargs.get("dtype") if name in ("round", "encode") else None
    if not _tensors.has_tensor(args, kwargs) and not _tensors.is_torch_dtype(torch_dtype):
        return _plain(name, function, signature, args, kwargs)
    import sys

    torch = sys.modules["torch"]  # (a tensor or a torch dtype was given: torch is loaded)
    conv = _tensors.Conversion(name)
    out = kwargs.get("out") if name == "round" else None
    names = list(signature.parameters)
    args = tuple(conv.to_numpy(a, names[i] if i < len(names) else f"argument {i}") for i, a in enumerate(args))
    kwargs = {k: conv.to_numpy(v, k) for k, v in kwargs.items()}
    bound = {**dict(zip(names, args)), **kwargs}
    first = None  # the dtype of the first result array (that of its format), where the function fixes one
    if name == "round":
        if _tensors.is_tensor(out):  # (written with the result below)
            del kwargs["out"]
        info = _pasa.format_info(bound["format"])
        if _tensors.is_torch_dtype(torch_dtype):
            first = torch_dtype
            _check_fits(info, first)
            kwargs["dtype"] = None
        elif torch_dtype is None:
            first = _tensors.torch_dtype_of_format(info)
        if first is not None and not first.is_floating_point:
            raise ValueError(f"dtype: {torch_dtype}: give a floating dtype (bit patterns: pasa.encode)")
        r = conv.to_torch(_plain(name, function, signature, args, kwargs), first)
        if _tensors.is_tensor(out):
            return out.copy_(r)
        return r
    if name == "encode" and _tensors.is_torch_dtype(torch_dtype):
        kwargs["dtype"] = None  # the patterns, then viewed as torch's narrow float of them
        bits = conv.to_torch(_plain(name, function, signature, args, kwargs))
        if bits.element_size() != torch.empty((), dtype=torch_dtype).element_size() or not torch_dtype.is_floating_point:
            raise ValueError(f"dtype: {torch_dtype} does not hold the bit patterns of format {bound['format']}")
        return bits.view(torch_dtype)
    if name == "decode":
        bits = bound.get("bits")
        if getattr(bits, "dtype", None) is not None and bits.dtype.kind == "i" and bits.dtype.itemsize > 1:
            # torch's patterns wider than a byte are its signed integers (x.view(torch.int16)): the same bits
            bits = bits.view(f"uint{8 * bits.dtype.itemsize}")
            args, kwargs = (bits,) + args[1:] if args else args, ({**kwargs, "bits": bits} if not args else kwargs)
        first = _tensors.torch_dtype_of_format(_pasa.format_info(bound["format"]))
    elif name == "gemm":
        first = _tensors.torch_dtype_of_format(_pasa.format_info(bound.get("out") or "fp32"))
    elif name in ("attention", "unified_attention"):
        first = _attention_out_dtype(bound, conv)
    return conv.to_torch(_plain(name, function, signature, args, kwargs), first)


def _check_fits(info, torch_dtype):
    if not torch_dtype.is_floating_point:
        return
    name = _tensors.torch_dtype_name(torch_dtype)
    try:
        into = _pasa.format_info(name)
    except ValueError:
        return
    if not (info["p"] <= into["p"] and info["max_finite"] <= into["max_finite"]
            and info["min_subnormal"] >= into["min_subnormal"]):
        raise ValueError(f"dtype: {torch_dtype} cannot hold every value of format {info['name']}")


def _attention_out_dtype(bound, conv):
    """The torch dtype of attention's out: that of the allocation's out format (a kernel recipe's output, or
    its input format), as python/module_attention.cpp runs it; None (float64) where it cannot be told."""
    import json

    try:
        kernel, spec, alloc = bound.get("kernel"), bound.get("spec"), bound.get("alloc")
        if kernel is not None:
            recipe = kernel if isinstance(kernel, str) else kernel.get("recipe")
            entry = next(k for k in _pasa.kernels() if k["name"] == recipe)
            out = (kernel.get("output") if isinstance(kernel, dict) else None) or entry["schedule"]["output"]
            if not out:
                out = bound.get("format") or conv.formats.get("q") or _numpy_format(bound["q"])
        else:
            if spec is not None:
                alloc = (json.loads(spec) if isinstance(spec, str) else spec).get("alloc")
            out = _pasa.allocation(alloc if alloc is not None else "fa_fp16_fp32")["stages"]["out"]
        return _tensors.torch_dtype_of_format(_pasa.format_info(out))
    except (ValueError, KeyError, StopIteration, TypeError, AttributeError):
        return None


def _numpy_format(a):
    return {"float16": "fp16", "float32": "fp32"}.get(str(getattr(a, "dtype", "")), "fp64")
