"""pasa: numerical analysis of low-precision attention, from Python (the package around pasa._pasa).

The functions are those of the extension module pasa._pasa (python/pasa_module.cpp and the python/module_*.cpp
it binds), each wrapped here once, generically, for what a pybind11 function cannot do itself: an
inspect.signature (read from the first lines of its docstring, which spell the defaults out), and format
arguments given as numpy or ml_dtypes dtypes (numpy.float16, ml_dtypes.bfloat16, numpy.dtype("float32")),
passed on by their dtype names, which the library knows. Nothing else is added, so a function bound there
appears here as it is; except sweep (python/pasa/_sweep.py), which returns the table's rows.

Besides them, ``pasa.capture`` and ``pasa.CaptureError`` are those of the pure-Python module pasa_capture
(python/pasa_capture.py: a PyTorch model's attention inputs written as a capture folder), imported on first
use, so that ``import pasa`` neither needs nor loads torch.
"""
import ast as _ast
import inspect as _inspect

from . import _pasa, _tensors
from ._calls import call as _call

__version__ = _pasa.__version__
__doc__ = _pasa.__doc__

# Arguments that name a format (any function's, and format_info's `name`): a dtype given there is passed on
# by its name.
_FORMAT_ARGUMENTS = frozenset({"format", "score_format"})
_FORMAT_ARGUMENTS_OF = {"format_info": frozenset({"name"}), "gemm": frozenset({"a_format", "b_format", "acc", "out"})}


def _format_name(value):
    """A format argument as the library reads it: a string or None as it is, a dtype (or dtype-like type) by
    numpy's name for it ("float16", "bfloat16", "float8_e4m3fn", ...), a torch dtype by torch's (the same
    names: torch.bfloat16 -> "bfloat16")."""
    if value is None or isinstance(value, str):
        return value
    if _tensors.is_torch_dtype(value):
        return _tensors.torch_dtype_name(value)
    import numpy

    try:
        return numpy.dtype(value).name
    except TypeError:
        raise ValueError(f"format: {value!r} is neither a format name nor a dtype") from None


def _signature(function):
    """The signature spelt at the start of a docstring, "name(a, b=1, *, c="x") -> ...", possibly over several
    lines: the text between the first "(" and its matching ")" parsed as a Python parameter list. None when
    the docstring does not open so (tests/python/test_package.py reports such a function; it still works)."""
    doc = function.__doc__ or ""
    start = doc.find("(")
    depth = 0
    for end in range(start, len(doc)):
        depth += {"(": 1, ")": -1}.get(doc[end], 0)
        if depth == 0:
            break
    if start < 0 or depth != 0:
        return None
    try:
        args = _ast.parse(f"def f({' '.join(doc[start + 1:end].split())}): pass").body[0].args
    except SyntaxError:
        return None
    P = _inspect.Parameter
    params = []
    positional = args.posonlyargs + args.args
    defaults = [P.empty] * (len(positional) - len(args.defaults)) + [_ast.literal_eval(d) for d in args.defaults]
    for a, d in zip(args.posonlyargs, defaults):
        params.append(P(a.arg, P.POSITIONAL_ONLY, default=d))
    for a, d in zip(args.args, defaults[len(args.posonlyargs):]):
        params.append(P(a.arg, P.POSITIONAL_OR_KEYWORD, default=d))
    for a, d in zip(args.kwonlyargs, args.kw_defaults):
        params.append(P(a.arg, P.KEYWORD_ONLY, default=P.empty if d is None else _ast.literal_eval(d)))
    if args.vararg or args.kwarg:
        return None
    return _inspect.Signature(params)


def _wrap(name, function):
    try:
        signature = _signature(function)
    except ValueError:  # a default that is not a literal
        signature = None
    if signature is None:
        signature = _inspect.Signature([_inspect.Parameter("args", _inspect.Parameter.VAR_POSITIONAL),
                                        _inspect.Parameter("kwargs", _inspect.Parameter.VAR_KEYWORD)])
    formats = _FORMAT_ARGUMENTS | _FORMAT_ARGUMENTS_OF.get(name, frozenset())
    positions = [(i, p.name) for i, p in enumerate(signature.parameters.values())
                 if p.name in formats and p.kind != p.KEYWORD_ONLY]
    keywords = [p.name for p in signature.parameters.values() if p.name in formats]
    if any(p.kind == p.VAR_KEYWORD for p in signature.parameters.values()):
        keywords = sorted(formats)  # no signature: format arguments given by keyword are still converted
    if any(p.kind == p.VAR_KEYWORD for p in signature.parameters.values()):
        positions = []

    def wrapper(*args, **kwargs):
        # round(x, numpy.float16): a format given as a dtype is the result's dtype too, unless dtype= says
        # otherwise (as numpy's astype(numpy.float16) gives float16).
        if name == "round" and "dtype" not in kwargs:
            f = args[1] if len(args) > 1 else kwargs.get("format")
            if f is not None and not isinstance(f, str):
                kwargs["dtype"] = f
        for i, _ in positions:
            if i < len(args):
                args = args[:i] + (_format_name(args[i]),) + args[i + 1:]
        for k in keywords:
            if k in kwargs:
                kwargs[k] = _format_name(kwargs[k])
        return _call(name, function, signature, args, kwargs)

    wrapper.__name__ = wrapper.__qualname__ = name
    wrapper.__doc__ = function.__doc__
    wrapper.__module__ = __name__
    wrapper.__signature__ = signature
    wrapper.__wrapped__ = function
    return wrapper


__all__ = []
for _name in dir(_pasa):
    if _name.startswith("_"):
        continue
    _value = getattr(_pasa, _name)
    globals()[_name] = _wrap(_name, _value) if _inspect.isbuiltin(_value) else _value
    __all__.append(_name)
del _name, _value

# pasa.sweep returns the table's rows (python/pasa/_sweep.py, around the extension's sweep).
from ._sweep import SweepRows, sweep  # noqa: E402

__all__.append("SweepRows")

# Attributes of pasa_capture, imported when first asked for (PEP 562): it imports torch only inside capture(),
# but even its own import is left to those who capture.
_CAPTURE_ATTRIBUTES = ("capture", "CaptureError")
__all__ += _CAPTURE_ATTRIBUTES


def __getattr__(name):
    # pasa.torch (python/pasa/torch.py) imports torch, so only when asked for; pasa.plot (python/pasa/plot.py)
    # likewise, so that `python -m pasa.plot` finds it not yet imported.
    if name in ("torch", "plot"):
        import importlib

        return importlib.import_module("." + name, __name__)
    if name in _CAPTURE_ATTRIBUTES:
        import pasa_capture

        return getattr(pasa_capture, name)
    raise AttributeError(f"module 'pasa' has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(_CAPTURE_ATTRIBUTES) | {"torch", "plot"})
