"""pasa.torch.deviation: a model's output under emulated attention kernels against a reference run (the golden:
every attention call in the fp64 allocation), in the manner of Golden et al., "Is Flash Attention Stable?"
(arXiv 2405.02803): the model's own arithmetic is kept, only the attention is swapped, and the layer outputs
are compared with the reference run's layer by layer. docs/deviation.md.

Imported by pasa.torch (which imports torch); the attention itself is pasa.torch.scaled_dot_product_attention.
"""
import contextlib
import math

import torch
import torch.nn.functional as F

import pasa

REFERENCE = {"label": "golden (fp64)", "alloc": "fp64"}
_SPEC_KEYS = ("kernel", "alloc", "algorithm", "spec")


def kernel_entry(k):
    """A kernels= item as a dict {label, and kernel | alloc [algorithm] | spec, optional dtype}: a str is a
    kernel recipe name (pasa.kernels()) or else an allocation; a dict is taken as given. dtype: the torch dtype
    q, k, v are cast to before the call (a kernel recipe's input format: torch.float16 for fp16 kernels); the
    output is cast back to the model's dtype."""
    if isinstance(k, str):
        names = {r["name"] for r in pasa.kernels()}
        k = {"kernel": k} if k in names else {"alloc": k}
    if not isinstance(k, dict):
        raise TypeError(f"kernels: item {k!r}: expected a kernel recipe or allocation name, or a dict")
    unknown = set(k) - set(_SPEC_KEYS) - {"label", "dtype"}
    if unknown:
        raise ValueError(f"kernels: item {k!r}: unknown key(s) {sorted(unknown)}; expected label, dtype and "
                         f"kernel | alloc [algorithm] | spec")
    given = [x for x in _SPEC_KEYS if x in k]
    if not given:
        raise ValueError(f"kernels: item {k!r}: give kernel, alloc (with algorithm) or spec")
    if "spec" in k and len(given) > 1:
        raise ValueError(f"kernels: item {k!r}: spec is a whole algorithm description; give it alone")
    e = dict(k)
    if "label" not in e:
        e["label"] = str(e.get("kernel") or e.get("alloc") or "spec")
    return e


@contextlib.contextmanager
def swapped(entry, threads=None):
    """torch.nn.functional.scaled_dot_product_attention is `entry`'s emulation within the block (set even on
    torch < 2.0, which has no such function, and removed again after); yields a list counting the calls."""
    from pasa.torch import scaled_dot_product_attention as sdpa  # (here: pasa.torch imports this module)
    had = hasattr(F, "scaled_dot_product_attention")
    original = getattr(F, "scaled_dot_product_attention", None)
    calls = []
    dtype = entry.get("dtype")
    numerics = {x: entry[x] for x in _SPEC_KEYS if x in entry}

    def patched(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        calls.append(tuple(query.shape))
        cast = (lambda t: t if t is None or dtype is None or not t.is_floating_point() else t.to(dtype))
        out = sdpa(cast(query), cast(key), cast(value), cast(attn_mask), dropout_p, is_causal, scale, enable_gqa,
                   threads=threads, **numerics)
        return out.to(query.dtype)

    F.scaled_dot_product_attention = patched
    try:
        yield calls
    finally:
        if had:
            F.scaled_dot_product_attention = original
        else:
            del F.scaled_dot_product_attention


def _logits(out):
    for get in (lambda o: o.logits, lambda o: o[0]):
        if isinstance(out, torch.Tensor):
            return out
        try:
            out = get(out)
        except (AttributeError, TypeError, IndexError, KeyError):
            pass
    if not isinstance(out, torch.Tensor):
        raise TypeError(f"model: returned {type(out).__name__}; expected logits, or an object with .logits or [0]")
    return out


def _default_layers(model):
    for name, m in model.named_modules():
        if isinstance(m, torch.nn.ModuleList) and len(m) > 0:
            return [(f"{name}.{i}", b) for i, b in enumerate(m)]
    raise ValueError("layers: the model has no nn.ModuleList of blocks; give layers= (module names)")


def _run(model, inputs, entry, layers, threads):
    """One forward under `entry` (None: the model's own attention): (logits float64, [layer outputs], calls)."""
    outs = []

    def hook(_m, _i, o):
        o = o[0] if isinstance(o, (tuple, list)) else o
        outs.append(o.detach().to(torch.float64).clone())

    hooks = [m.register_forward_hook(hook) for _, m in layers]
    try:
        ctx = contextlib.nullcontext([]) if entry is None else swapped(entry, threads)
        with torch.no_grad(), ctx as calls:
            out = model(**inputs) if isinstance(inputs, dict) else (
                model(*inputs) if isinstance(inputs, tuple) else model(inputs))
    finally:
        for h in hooks:
            h.remove()
    return _logits(out).detach().to(torch.float64), outs, len(calls)


def deviation(model, inputs, kernels, *, reference=REFERENCE, targets=None, layers=None, threshold=1e-3,
              threads=None):
    """Runs `model` on `inputs` with each of `kernels` in place of its attention, and once with `reference`
    (default: the golden, the fp64 allocation; None: the model's own attention), and compares.

    model: a torch module calling torch.nn.functional.scaled_dot_product_attention (looked up at call time),
    in eval mode, in the dtype it should run in (float64 isolates the attention's error). inputs: a tensor of
    token ids (B, T), a tuple of positional or a dict of keyword arguments; it returns logits (B, T, V) (or an
    object with .logits or [0]). kernels: kernel_entry items (names or dicts). targets: (B, T) next-token ids
    for the perplexity; None with tensor inputs: inputs shifted by one (logits[:, :-1] predict inputs[:, 1:]).
    layers: module names whose outputs are compared (None: the elements of the model's first ModuleList).
    threshold: the relative RMSE above which a layer's output counts as deviating.

    Returns {"reference": {label, perplexity, calls}, "kernels": [per kernel: label, calls, logit_rmse,
    logit_max_err, logit_rel_rmse, top1_agreement, kl_mean, kl_max (KL(reference || kernel) of the next-token
    distributions, nats), perplexity, perplexity_ratio, perplexity_change (ratio - 1),
    per_position {kl (B, T'), top1 (B, T') bool},
    layers [{name, rmse, rel_rmse, max_err}], first_layer_over (index into layers, or None)]}."""
    model.eval()
    named = dict(model.named_modules())
    if layers is None:
        layers = _default_layers(model)
    else:
        missing = [n for n in layers if n not in named]
        if missing:
            raise ValueError(f"layers: {missing} not modules of the model (model.named_modules())")
        layers = [(n, named[n]) for n in layers]
    entries = [kernel_entry(k) for k in kernels]
    ref_entry = None if reference is None else kernel_entry(reference)
    if targets is None:
        if not isinstance(inputs, torch.Tensor):
            raise ValueError("targets: give the next-token ids when inputs is not a tensor of token ids")
        targets, cut = inputs[:, 1:], slice(None, -1)
    else:
        cut = slice(None)
    ref_logits, ref_layers, ref_calls = _run(model, inputs, ref_entry, layers, threads)
    if ref_entry is not None and ref_calls == 0:
        raise ValueError("model: made no call to torch.nn.functional.scaled_dot_product_attention; its "
                         "attention cannot be swapped (call F.scaled_dot_product_attention looked up at call time)")
    ref_lp = torch.log_softmax(ref_logits[:, cut], dim=-1)
    tgt = targets.to(torch.long).to(ref_lp.device)

    def ppl(lp):
        return math.exp(-float(lp.gather(-1, tgt.unsqueeze(-1)).mean()))

    report = {"reference": {"label": "model's own" if ref_entry is None else ref_entry["label"],
                            "perplexity": ppl(ref_lp), "calls": ref_calls}, "kernels": []}
    for e in entries:
        logits, outs, calls = _run(model, inputs, e, layers, threads)
        d = logits - ref_logits
        lp = torch.log_softmax(logits[:, cut], dim=-1)
        kl = (ref_lp.exp() * (ref_lp - lp)).sum(-1).clamp_min(0.0)  # (rounding can give -1e-17)
        top1 = lp.argmax(-1) == ref_lp.argmax(-1)
        lay = []
        for (name, _), o, r in zip(layers, outs, ref_layers):
            rms_ref = float(r.pow(2).mean().sqrt())
            rmse = float((o - r).pow(2).mean().sqrt())
            lay.append({"name": name, "rmse": rmse, "rel_rmse": rmse / rms_ref if rms_ref > 0 else math.inf,
                        "max_err": float((o - r).abs().max())})
        over = [i for i, x in enumerate(lay) if x["rel_rmse"] > threshold]
        p = ppl(lp)
        rms = float(ref_logits.pow(2).mean().sqrt())
        report["kernels"].append({
            "label": e["label"], "calls": calls, "logit_rmse": float(d.pow(2).mean().sqrt()),
            "logit_max_err": float(d.abs().max()), "logit_rel_rmse": float(d.pow(2).mean().sqrt()) / rms,
            "top1_agreement": float(top1.double().mean()), "kl_mean": float(kl.mean()), "kl_max": float(kl.max()),
            "perplexity": p, "perplexity_ratio": p / report["reference"]["perplexity"],
            "perplexity_change": p / report["reference"]["perplexity"] - 1.0,
            "per_position": {"kl": kl, "top1": top1}, "layers": lay,
            "first_layer_over": over[0] if over else None})
    return report


def generate(model, prompt, n, entry=None, *, ctx=None, threads=None):
    """Greedy continuation of `prompt` (a 1-D tensor of token ids) by n tokens under `entry` (None: the
    model's own attention); the window is the last `ctx` tokens (None: all). Returns the n new ids (list)."""
    ids = prompt.to(torch.long).tolist()
    e = None if entry is None else kernel_entry(entry)
    for _ in range(n):
        x = torch.tensor([ids[-ctx:] if ctx else ids], dtype=torch.long)
        ctxm = contextlib.nullcontext() if e is None else swapped(e, threads)
        with torch.no_grad(), ctxm:
            ids.append(int(_logits(model(x))[0, -1].argmax()))
    return ids[len(prompt):]
