"""pasa_capture: the Q, K and V a PyTorch model feeds its attention, written as a capture folder that pasa
reads as problems.

    import pasa_capture
    index = pasa_capture.capture(model, input_ids, "cap/", model_name="my-model")

runs model(inputs) once (eval mode, no gradients) and writes, for every attention call, the layer's Q, K and V
as .npy files plus cap/index.json (the layers, their shapes, dtype, scale and causal flag; the format is in
src/pasa/io/capture_folder.hpp). A problem then reads one layer and head of it:
``{"capture": {"dir": "cap", "layer": 0, "head": 3}}`` (docs/real-models.md).

Two ways to see the attention:

* ``torch.nn.functional.scaled_dot_product_attention`` (torch >= 2.0) is wrapped during the forward pass, so
  any model that calls it through ``torch.nn.functional`` (or ``F.``) is captured with no help: its arguments are
  Q, K, V after RoPE, ``scale`` (None: 1/sqrt(D)) and ``is_causal``. A model that imported the function by name
  before the capture (``from torch.nn.functional import scaled_dot_product_attention``) bypasses the wrapper:
  give it an adapter.
* ``adapters={AttentionClass: fn}`` for attention modules that compute softmax(QK^T)V themselves: fn(module,
  args, kwargs) gets the module and the arguments of its forward call and returns ``(q, k, v, scale, causal)``
  with q (B, Nq, Sq, D), k and v (B, Nkv, Skv, D), after RoPE (see tests/python/test_capture.py). A key may
  also be a module's qualified name ("blocks.0.attn"). Calls of scaled_dot_product_attention inside an adapted
  module are not captured twice.

GQA: K and V with Nkv < Nq heads are written as such (query head h reads KV head h // (Nq // Nkv)); K and V
that a model repeated to Nq heads before the call (repeat_interleave, as Hugging Face's repeat_kv) are
collapsed back to Nkv heads when ``collapse_repeated_kv`` (exact equality of the repeated heads).

Masks: ``is_causal`` or an ``attn_mask`` equal to a causal mask (bool, True = keep; or additive, 0 / -inf) is
recorded as causal; pasa's causal mask is aligned to the end (key j visible to query i iff j <= i + Skv - Sq),
torch's is_causal to the start, so is_causal with Sq != Skv is refused, as is any other mask (pasa's problem
has no slot for it) and dropout.

torch is imported only inside capture(): this module imports without it.
"""
import json
import math
import os
import shutil
import tempfile

CAPTURE_VERSION = 1  # "pasa_capture" in index.json (src/pasa/io/capture_folder.hpp: kCaptureVersion)

__all__ = ["capture", "load", "reference_attention", "CaptureError"]


class CaptureError(ValueError):
    """A capture that cannot be written faithfully (an unsupported mask, dropout, shapes)."""


_DTYPE_NAMES = {"torch.float16": "float16", "torch.bfloat16": "bfloat16", "torch.float32": "float32",
                "torch.float64": "float64"}


def _dtype_name(t):
    name = _DTYPE_NAMES.get(str(t.dtype))
    if name is None:
        raise CaptureError(f"attention input of dtype {t.dtype}: pasa reads float16, bfloat16, float32 or float64")
    return name


def _causal_keep(sq, skv, device):
    """pasa's causal mask (True = visible): key j for query i iff j <= i + (skv - sq)."""
    import torch
    i = torch.arange(sq, device=device).unsqueeze(1)
    j = torch.arange(skv, device=device).unsqueeze(0)
    return j <= i + (skv - sq)


def _mask_kind(attn_mask, sq, skv, where):
    """Whether attn_mask (bool, True = keep; or additive: 0 keeps, -inf or the dtype's lowest value hides) is
    no mask (False) or pasa's causal mask (True); anything else is refused."""
    import torch
    try:
        m = attn_mask.expand(*attn_mask.shape[:-2], sq, skv) if attn_mask.dim() >= 2 else attn_mask.expand(sq, skv)
    except RuntimeError:
        raise CaptureError(f"{where}: attn_mask of shape {tuple(attn_mask.shape)} does not broadcast to ({sq}, {skv})")
    if m.dtype == torch.bool:
        keep = m
    else:
        hidden = (m == -math.inf) | (m == torch.finfo(m.dtype).min)
        if not bool(((m == 0) | hidden).all()):
            raise CaptureError(f"{where}: attn_mask adds values other than 0 and -inf (a position bias): pasa's "
                               "capture does not record it; give an adapter that returns Q, K, V without it")
        keep = ~hidden
    if bool(keep.all()):
        return False
    if bool((keep == _causal_keep(sq, skv, m.device)).all()):
        return True
    raise CaptureError(f"{where}: attn_mask is neither all-visible nor causal (aligned to the end); pasa's "
                       "capture records only the causal flag")


def _collapse_kv(q, k, v):
    """K and V repeated to Nq heads (head h = KV head h // g) back to Nq // g heads, g the largest such."""
    nq = q.shape[1]
    for g in sorted((g for g in range(2, nq + 1) if nq % g == 0), reverse=True):
        def rep(t):
            b, n, s, d = t.shape
            r = t.reshape(b, n // g, g, s, d)
            return bool((r == r[:, :, :1]).all())
        if rep(k) and rep(v):
            return k[:, ::g], v[:, ::g]
    return k, v


class _Recorder:
    def __init__(self, layers, collapse_repeated_kv):
        self.calls = []           # dicts: name, q, k, v, scale, causal (tensors detached to cpu)
        self.count = 0            # attention calls seen (the layer index of the next one)
        self.stack = []           # qualified names of the modules being run
        self.inside_adapter = 0   # > 0 while an adapted module runs
        self.layers = None if layers is None else set(layers)
        self.collapse = collapse_repeated_kv
        self.names_seen = {}

    def record(self, q, k, v, scale, causal, source):
        index = self.count
        self.count += 1
        name = self.stack[-1] if self.stack else ""
        n = self.names_seen.get(name, 0)
        self.names_seen[name] = n + 1
        if n:
            name = f"{name}#{n}"  # the same module called attention more than once
        if self.layers is not None and index not in self.layers:
            return
        where = f"attention call {index} ({name or 'top level'}, {source})"
        for t, what in ((q, "q"), (k, "k"), (v, "v")):
            if t.dim() != 4:
                raise CaptureError(f"{where}: {what} has shape {tuple(t.shape)}; expected (B, heads, S, D)")
        b, nq, sq, d = q.shape
        if k.shape[0] != b or k.shape[3] != d or v.shape != k.shape or nq % k.shape[1] != 0:
            raise CaptureError(f"{where}: shapes q {tuple(q.shape)}, k {tuple(k.shape)}, v {tuple(v.shape)} are not "
                               "(B, Nq, Sq, D), (B, Nkv, Skv, D) with Nq a multiple of Nkv")
        if not (q.dtype == k.dtype == v.dtype):
            raise CaptureError(f"{where}: q, k, v dtypes differ ({q.dtype}, {k.dtype}, {v.dtype})")
        q, k, v = (t.detach().to("cpu").contiguous() for t in (q, k, v))
        if self.collapse and k.shape[1] == nq:
            k, v = _collapse_kv(q, k, v)
        scale = 1.0 / math.sqrt(d) if scale is None else float(scale)
        if not (math.isfinite(scale) and scale > 0):
            raise CaptureError(f"{where}: scale {scale} is not finite and > 0")
        self.calls.append({"index": index, "name": name, "q": q, "k": k, "v": v, "scale": scale,
                           "causal": bool(causal), "source": source})


def _sdpa_wrapper(original, rec):
    import torch

    def sdpa(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, **kwargs):
        if not rec.inside_adapter:
            where = f"attention call {rec.count} (scaled_dot_product_attention)"
            if dropout_p:
                raise CaptureError(f"{where}: dropout_p = {dropout_p}; capture in eval mode without dropout")
            sq, skv = query.shape[-2], key.shape[-2]
            causal = bool(is_causal)
            if causal and sq != skv:
                raise CaptureError(f"{where}: is_causal with Sq = {sq} != Skv = {skv}: torch aligns the mask to "
                                   "the start, pasa to the end; pass the mask as attn_mask (aligned to the end)")
            if attn_mask is not None:
                if causal:
                    raise CaptureError(f"{where}: both attn_mask and is_causal given")
                causal = _mask_kind(attn_mask, sq, skv, where)
            with torch.no_grad():
                rec.record(query, key, value, scale, causal, "scaled_dot_product_attention")
        if scale is not None:
            kwargs["scale"] = scale
        return original(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal, **kwargs)

    return sdpa


def _adapter_for(adapters, name, module):
    for key, fn in adapters.items():
        if (isinstance(key, str) and key == name) or (isinstance(key, type) and isinstance(module, key)):
            return fn
    return None


def capture(model, inputs, out_dir, *, adapters=None, layers=None, dtype=None, model_name=None,
            collapse_repeated_kv=True, notes=None, overwrite=False):
    """Runs model on inputs once and writes each attention call's Q, K, V to out_dir (a capture folder).

    inputs: a tensor (model(inputs)), a tuple or list (model(*inputs)) or a dict (model(**inputs)).
    adapters: {module class or qualified name: fn(module, args, kwargs) -> (q, k, v, scale, causal)}.
    layers: the attention calls to write, by index in call order (None: all); the others still count.
    dtype: "float16" or "float32" to store the values in (None: as the model holds them, bfloat16 as float32,
    which holds it exactly, with dtype "bfloat16" in the index). The index's dtype is the format the stored
    values are exact in (the problem's default storage format).
    overwrite: replace an existing non-empty out_dir (otherwise refused). The folder is written in a sibling
    temporary folder and renamed into place, so a failed capture leaves nothing behind.
    Returns the index (a dict, as written to out_dir/index.json).
    """
    import numpy as np
    import torch

    if dtype not in (None, "float16", "float32"):
        raise CaptureError(f"dtype {dtype!r}: give None, 'float16' or 'float32'")
    out_dir = os.fspath(out_dir)
    if os.path.exists(out_dir) and (not os.path.isdir(out_dir) or os.listdir(out_dir)) and not overwrite:
        raise CaptureError(f"{out_dir}: exists and is not empty (pass overwrite=True to replace it)")
    adapters = dict(adapters or {})
    rec = _Recorder(layers, collapse_repeated_kv)

    handles, patched = [], []
    for name, module in model.named_modules():
        def pre(mod, args, name=name):
            rec.stack.append(name)

        def post(mod, args, out):
            rec.stack.pop()
        handles.append(module.register_forward_pre_hook(pre))
        handles.append(module.register_forward_hook(post))
        fn = _adapter_for(adapters, name, module)
        if fn is not None:
            original = module.forward

            def forward(*args, _fn=fn, _mod=module, _orig=original, **kwargs):
                with torch.no_grad():
                    got = _fn(_mod, args, kwargs)
                if not (isinstance(got, (tuple, list)) and len(got) == 5):
                    raise CaptureError(f"adapter for {type(_mod).__name__}: expected (q, k, v, scale, causal), got "
                                       f"{type(got).__name__}")
                rec.record(*got, source="adapter")
                rec.inside_adapter += 1
                try:
                    return _orig(*args, **kwargs)
                finally:
                    rec.inside_adapter -= 1
            module.forward = forward  # an instance attribute: nn.Module.__call__ calls it
            patched.append(module)
    F = torch.nn.functional
    original_sdpa = getattr(F, "scaled_dot_product_attention", None)
    if original_sdpa is not None:
        F.scaled_dot_product_attention = _sdpa_wrapper(original_sdpa, rec)
    was_training = model.training
    try:
        model.eval()
        with torch.no_grad():
            if isinstance(inputs, dict):
                model(**inputs)
            elif isinstance(inputs, (tuple, list)):
                model(*inputs)
            else:
                model(inputs)
    finally:
        model.train(was_training)
        if original_sdpa is not None:
            F.scaled_dot_product_attention = original_sdpa
        for h in handles:
            h.remove()
        for m in patched:
            del m.forward
    if not rec.calls:
        raise CaptureError("no attention call was captured: the model does not call "
                           "torch.nn.functional.scaled_dot_product_attention (torch >= 2.0) through the module "
                           "attribute; give adapters={AttentionClass: fn} (see help(pasa_capture))")

    parent = os.path.dirname(os.path.abspath(out_dir))
    os.makedirs(parent, exist_ok=True)
    tmp = tempfile.mkdtemp(prefix=".pasa-capture-", dir=parent)
    try:
        entries = []
        for c in rec.calls:
            model_dtype = _dtype_name(c["q"])
            stored = dtype or model_dtype
            np_dtype = {"float16": np.float16, "bfloat16": np.float32, "float32": np.float32,
                        "float64": np.float64}[stored]
            prefix = f"layer{c['index']:03d}"
            files = {}
            for t in ("q", "k", "v"):
                a = c[t].to(torch.float64 if stored == "float64" else torch.float32).numpy().astype(np_dtype)
                if not np.isfinite(a).all():
                    raise CaptureError(f"attention call {c['index']} ({c['name']}): {t} has non-finite values"
                                       + (" after conversion to float16" if dtype == "float16" else ""))
                files[t] = f"{prefix}_{t}.npy"
                np.save(os.path.join(tmp, files[t]), a)
            b, nq, sq, d = c["q"].shape
            entries.append({"name": c["name"], **files, "dtype": stored,
                            "shape": {"B": b, "Nq": nq, "Nkv": c["k"].shape[1], "Sq": sq, "Skv": c["k"].shape[2], "D": d},
                            "scale": c["scale"], "causal": c["causal"]})
        index = {"pasa_capture": CAPTURE_VERSION, "model": model_name or type(model).__name__,
                 "torch_version": str(torch.__version__), "created_by": "pasa_capture.capture", "layers": entries}
        if notes:
            index["notes"] = str(notes)
        with open(os.path.join(tmp, "index.json"), "w") as f:
            json.dump(index, f, indent=1)
            f.write("\n")
        if os.path.exists(out_dir):
            shutil.rmtree(out_dir) if os.path.isdir(out_dir) else os.remove(out_dir)
        os.replace(tmp, out_dir)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return index


def _layer_file(out_dir, layer, key, where):
    """A layer's tensor file as read_capture_index (src/pasa/io/capture_folder.cpp) takes it: a plain name
    inside the folder (no absolute path, no "..", no control characters), a regular file there."""
    name = layer.get(key) if isinstance(layer, dict) else None
    if not isinstance(name, str) or not name:
        raise CaptureError(f"{where}/{key}: missing or not a file name")
    if any(ord(c) < 32 or ord(c) == 127 for c in name):
        raise CaptureError(f"{where}/{key}: {name!r} holds a control character")
    norm = os.path.normpath(name)
    if os.path.isabs(name) or norm == ".." or norm.startswith(".." + os.sep):
        raise CaptureError(f"{where}/{key}: '{name}' is not a file name inside the capture folder")
    path = os.path.join(out_dir, norm)
    root = os.path.realpath(out_dir)
    if os.path.commonpath([root, os.path.realpath(path)]) != root:
        raise CaptureError(f"{where}/{key}: '{name}' leads outside the capture folder (through a link)")
    if not os.path.isfile(path):
        raise CaptureError(f"{where}/{key}: {path} is not a regular file")
    return path


def load(out_dir):
    """A capture folder read back: (index, [{"q", "k", "v"} numpy arrays per layer, in index order]).

    The index is checked as pasa-attn checks it: file names inside the folder, each array's shape the one the
    index gives ((B, Nq, Sq, D) for q, (B, Nkv, Skv, D) for k and v), float16/32/64 values; CaptureError
    otherwise. Arrays are loaded with allow_pickle=False."""
    import numpy as np
    index_file = os.path.join(out_dir, "index.json")
    with open(index_file) as f:
        index = json.load(f)
    layers = index.get("layers") if isinstance(index, dict) else None
    if not isinstance(layers, list) or not layers:
        raise CaptureError(f"{index_file}:/layers: expected a non-empty list of layers")
    arrays = []
    for i, layer in enumerate(layers):
        where = f"{index_file}:/layers/{i}"
        shape = layer.get("shape") if isinstance(layer, dict) else None
        dims = ("B", "Nq", "Nkv", "Sq", "Skv", "D")
        if not isinstance(shape, dict) or any(not isinstance(shape.get(d), int) or isinstance(shape.get(d), bool)
                                              or shape.get(d) < 1 for d in dims):
            raise CaptureError(f"{where}/shape: expected {{B, Nq, Nkv, Sq, Skv, D}}, positive integers")
        want = {"q": (shape["B"], shape["Nq"], shape["Sq"], shape["D"]),
                "k": (shape["B"], shape["Nkv"], shape["Skv"], shape["D"]),
                "v": (shape["B"], shape["Nkv"], shape["Skv"], shape["D"])}
        got = {}
        for t in ("q", "k", "v"):
            path = _layer_file(out_dir, layer, t, where)
            a = np.load(path, allow_pickle=False)
            if a.dtype not in (np.float16, np.float32, np.float64):
                raise CaptureError(f"{path}: {t} dtype {a.dtype} not accepted; a capture holds float16/32/64 values")
            if tuple(a.shape) != want[t]:
                raise CaptureError(f"{path}: {t} shape {tuple(a.shape)} differs from the index's {want[t]}")
            got[t] = a
        arrays.append(got)
    return index, arrays


def reference_attention(q, k, v, scale, causal):
    """softmax(Q K^T scale + causal mask) V in float64 (numpy), GQA as pasa reads it: query head h uses KV head
    h // (Nq // Nkv); the causal mask is aligned to the end (key j visible to query i iff j <= i + Skv - Sq)."""
    import numpy as np
    q, k, v = (np.asarray(t, dtype=np.float64) for t in (q, k, v))
    g = q.shape[1] // k.shape[1]
    k = np.repeat(k, g, axis=1)
    v = np.repeat(v, g, axis=1)
    s = np.einsum("bhid,bhjd->bhij", q, k) * scale
    if causal:
        sq, skv = s.shape[-2:]
        hidden = np.arange(skv)[None, :] > np.arange(sq)[:, None] + (skv - sq)
        s = np.where(hidden, -np.inf, s)
    s = s - s.max(axis=-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(axis=-1, keepdims=True)
    return np.einsum("bhij,bhjd->bhid", p, v)
