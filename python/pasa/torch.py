"""pasa.torch: pasa's emulated attention in place of PyTorch's (imported by ``import pasa.torch``, or on first
use of ``pasa.torch``; it imports torch, which ``import pasa`` does not).

- ``scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
  enable_gqa=False, *, kernel=None, alloc=None, algorithm=None, threads=None)``: torch's function, with its
  signature and semantics (torch.nn.functional.scaled_dot_product_attention, torch 2.5's), computed by
  pasa.attention under an emulated kernel recipe or precision allocation.
- ``emulate(kernel=None, *, alloc=None, algorithm=None, layers=None, model=None, threads=None)``: a context
  manager routing torch.nn.functional.scaled_dot_product_attention (torch >= 2.0) through it.
- ``deviation(model, inputs, kernels=[...])``: the model's output under each emulated kernel against the golden
  (fp64) attention, logits and layer by layer (pasa/_deviation.py; docs/deviation.md).
- ``register_transformers(name="pasa", ...)``: the same as an attention implementation of Hugging Face
  transformers (its AttentionInterface), selected by ``attn_implementation=name``.

How torch's semantics map onto pasa's arguments (docs/python.md, "PyTorch"):
- attn_mask boolean (True = attend) -> mask= (B, Sq, Skv), or per head one call per head (pasa's keep mask
  is one per batch); float -> pse= (added to the scaled scores, exactly), its -inf entries a keep mask.
- is_causal: torch aligns the causal mask top-left (query i sees keys j <= i), pasa's causal= bottom-right
  (j <= i + Skv - Sq): equal when Sq == Skv, otherwise given as the keep mask tril(ones(Sq, Skv)). Under a
  kernel recipe, the kernel's own alignment (its schedule's "causal"; torch's flash backend: bottom-right).
- scale=None: 1/sqrt(E), pasa's default. enable_gqa: Hq a multiple of Hkv, query head h reads KV head
  h // (Hq / Hkv), as torch's repeat_interleave (pasa's GQA mapping). dropout_p: refused unless 0.
- The result has query's dtype and device; it carries no autograd graph.
"""
import contextlib
import math

import torch

import pasa

# Every stage in fp32 (the presets' fa_fp32 has fp16 inputs and output): float32 queries' default.
FP32_ALLOC = {"preset": "fp64", "name": "fp32",
              "stages": {**{s: "fp32" for s in ("q", "k", "v", "k_shift", "s", "scale", "qk_acc", "max", "mean",
                                                 "shift", "exp", "sum", "p", "pv", "pv_acc", "o", "div", "out")},
                         "merge": {"format": "fp32", "lse": "fp32", "partial": "fp32", "model": "unnormalised"}}}
# The allocation of each query dtype when neither kernel, alloc nor algorithm is given: FlashAttention-2's
# mixed precision in the input format (fp32 accumulation and softmax), or every stage in fp32 / fp64.
DEFAULT_ALLOC = {torch.float16: "fa_fp16_fp32", torch.bfloat16: "fa_bf16_fp32", torch.float32: FP32_ALLOC,
                 torch.float64: "fp64"}


def _spec(query, kernel, alloc, algorithm, spec=None):
    """The pasa.attention arguments that pick the numerics."""
    if spec is not None:
        if kernel is not None or alloc is not None or algorithm is not None:
            raise ValueError("spec: a whole algorithm description (with its alloc and quant); give spec alone")
        return {"spec": spec}
    if kernel is not None:
        if alloc is not None or algorithm is not None:
            raise ValueError("kernel: a kernel recipe fixes the algorithm and allocation; give kernel alone")
        return {"kernel": kernel}
    if alloc is None and algorithm is None:
        if query.dtype not in DEFAULT_ALLOC:
            raise ValueError(f"query: dtype {query.dtype} not accepted; give float16, bfloat16, float32 or float64")
        alloc = DEFAULT_ALLOC[query.dtype]
    if algorithm is None:
        algorithm = "pasa" if isinstance(alloc, str) and alloc.startswith("pasa") else "fa2"
    return {"algorithm": algorithm, "alloc": alloc}


def _masks(attn_mask, is_causal, B, H, L, S):
    """torch's attn_mask and is_causal as (keep: bool (B, H, L, S) or None, bias: float64 (B, H, L, S) or None,
    causal: pasa's bottom-right flag)."""
    keep = bias = None
    causal = False
    if attn_mask is not None:
        m = attn_mask.detach().to("cpu")
        if m.dtype != torch.bool and not m.is_floating_point():
            raise ValueError(f"attn_mask: dtype {attn_mask.dtype} not accepted; give a bool mask (True = attend) "
                             "or a float mask (added to the scores)")
        try:  # (the leading dimensions flattened into B: a mask broadcasts over them as given, or in full)
            m = m.broadcast_to(m.shape[:-2] + (L, S) if m.dim() > 4 else (B, H, L, S)).reshape(B, H, L, S)
        except RuntimeError:
            raise ValueError(f"attn_mask: shape {tuple(attn_mask.shape)} does not broadcast to (..., H, L, S) = "
                             f"(..., {H}, {L}, {S})") from None
        if m.dtype == torch.bool:
            keep = m
        else:
            m = m.to(torch.float64)
            neg_inf = torch.isneginf(m)
            keep = ~neg_inf if bool(neg_inf.any()) else None
            bias = torch.where(neg_inf, torch.zeros((), dtype=torch.float64), m)
            if not bool(bias.any()):
                bias = None
    if is_causal:
        if L == S:
            causal = True  # pasa's bottom-right mask is torch's top-left one when Sq == Skv
        else:
            tril = torch.ones((L, S), dtype=torch.bool).tril().broadcast_to((B, H, L, S))
            keep = tril if keep is None else keep & tril
    return keep, bias, causal


def scaled_dot_product_attention(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None,
                                 enable_gqa=False, *, kernel=None, alloc=None, algorithm=None, spec=None,
                                 threads=None):
    """torch.nn.functional.scaled_dot_product_attention computed by pasa.attention (module docstring).

    query (..., Hq, L, E), key (..., Hkv, S, E), value (..., Hkv, S, E) of one dtype (float16, bfloat16,
    float32, float64; a CUDA tensor is computed on the CPU and the result returned to its device). kernel=: a
    kernel recipe (pasa.kernels()); alloc= / algorithm=: a precision allocation and algorithm as
    pasa.attention takes them; spec=: a whole algorithm description (pasa.attention's spec=, e.g. with
    "quant"); none of them: the allocation of query's dtype (DEFAULT_ALLOC). threads=:
    pasa's threads (None: every core). Returns (..., Hq, L, E) in query's dtype on query's device."""
    if dropout_p != 0.0:
        raise ValueError(f"dropout_p: {dropout_p}: pasa's attention has no dropout; give 0.0 (the model in eval())")
    if is_causal and attn_mask is not None:
        raise ValueError("attn_mask: give attn_mask or is_causal=True, not both (as torch)")
    for name, t in (("query", query), ("key", key), ("value", value)):
        if not isinstance(t, torch.Tensor):
            raise TypeError(f"{name}: expected a torch tensor, got {type(t).__name__}")
        if t.dim() < 2:
            raise ValueError(f"{name}: shape {tuple(t.shape)}: expected (..., sequence, head_dim)")
    if not (query.dtype == key.dtype == value.dtype):
        raise ValueError(f"query, key, value: dtypes {query.dtype}, {key.dtype}, {value.dtype}: expected one dtype")
    L, E = query.shape[-2:]
    S = key.shape[-2]
    if key.shape[-1] != E or value.shape[-1] != E or value.shape[-2] != S:
        raise ValueError(f"key {tuple(key.shape)}, value {tuple(value.shape)}: pasa needs the head dimension E "
                         f"of query {tuple(query.shape)} in both and the sequence of key in value")
    lead = query.shape[:-3] if query.dim() >= 3 else ()
    if key.shape[:-3] != lead or value.shape[:-3] != lead or key.shape[:-2] != value.shape[:-2]:
        raise ValueError(f"query {tuple(query.shape)}, key {tuple(key.shape)}, value {tuple(value.shape)}: the "
                         "batch dimensions differ (pasa does not broadcast them)")
    H = query.shape[-3] if query.dim() >= 3 else 1
    Hkv = key.shape[-3] if key.dim() >= 3 else 1
    if Hkv != H and not (enable_gqa and H % Hkv == 0):
        raise ValueError(f"key: {Hkv} heads for {H} query heads: " +
                         ("not a divisor" if enable_gqa else "give enable_gqa=True for grouped-query attention"))
    B = math.prod(lead)
    q = query.reshape(B, H, L, E)
    k = key.reshape(B, Hkv, S, E)
    v = value.reshape(B, Hkv, S, E)
    # A kernel recipe takes the causal flag alone and aligns it as that GPU kernel does (its schedule's
    # "causal": torch's flash backend bottom-right, its efficient one top-left, as measured: kernels.md), so
    # that the emulation is the kernel's, quirks included; it takes no other mask (the library says so).
    keep, bias, causal = _masks(attn_mask, is_causal and kernel is None, B, H, L, S)
    causal = causal or (is_causal and kernel is not None)
    args = dict(_spec(query, kernel, alloc, algorithm, spec), scale=scale, causal=causal, threads=threads)
    if keep is not None and bool(keep.all()):
        keep = None
    per_head = keep is not None and H > 1 and not bool((keep == keep[:, :1]).all())
    if not per_head:
        if keep is not None:
            args["mask"] = keep[:, 0].contiguous()
        if bias is not None:
            args["pse"] = bias.contiguous()
        out, _ = pasa.attention(q, k, v, **args)
    else:  # pasa's keep mask is one per batch: a call per query head
        g = H // Hkv
        heads = []
        for h in range(H):
            a = dict(args, mask=keep[:, h].contiguous())
            if bias is not None:
                a["pse"] = bias[:, h:h + 1].contiguous()
            o, _ = pasa.attention(q[:, h:h + 1], k[:, h // g:h // g + 1], v[:, h // g:h // g + 1], **a)
            heads.append(o)
        out = torch.cat(heads, dim=1)
    return out.to(query.dtype).reshape(query.shape).to(query.device)


class Emulation:
    """What emulate() yields: the numbers of calls emulated and passed to torch's own function."""

    def __init__(self):
        self.emulated = 0
        self.passed = 0
        self.call_index = 0  # within the current forward of `model` (or since the with block began)

    def __repr__(self):
        return f"Emulation(emulated={self.emulated}, passed={self.passed})"


@contextlib.contextmanager
def emulate(kernel=None, *, alloc=None, algorithm=None, layers=None, model=None, threads=None):
    """Within the block, torch.nn.functional.scaled_dot_product_attention is scaled_dot_product_attention
    above with these numerics. layers: None (every call) or the indices of the calls to emulate, counted from
    0 in the order of the calls within each forward of `model` (a forward pre-hook restarts the count; without
    model the count runs from the start of the block); other calls go to torch's own function. Yields an
    Emulation counting the calls. Needs torch >= 2.0 (which has the function)."""
    F = torch.nn.functional
    if not hasattr(F, "scaled_dot_product_attention"):
        raise RuntimeError(f"torch {torch.__version__} has no torch.nn.functional.scaled_dot_product_attention "
                           "(torch >= 2.0): call pasa.torch.scaled_dot_product_attention directly")
    _spec(torch.empty((), dtype=torch.float32), kernel, alloc, algorithm)  # (refuses kernel with alloc now)
    original = F.scaled_dot_product_attention
    state = Emulation()
    wanted = None if layers is None else set(layers)

    def patched(query, key, value, attn_mask=None, dropout_p=0.0, is_causal=False, scale=None, enable_gqa=False):
        index = state.call_index
        state.call_index += 1
        if wanted is not None and index not in wanted:
            state.passed += 1
            extra = {"enable_gqa": enable_gqa} if enable_gqa else {}
            return original(query, key, value, attn_mask=attn_mask, dropout_p=dropout_p, is_causal=is_causal,
                            scale=scale, **extra)
        state.emulated += 1
        return scaled_dot_product_attention(query, key, value, attn_mask, dropout_p, is_causal, scale, enable_gqa,
                                            kernel=kernel, alloc=alloc, algorithm=algorithm, threads=threads)

    hook = None
    if model is not None:
        def restart(*_):
            state.call_index = 0
        hook = model.register_forward_pre_hook(restart)
    F.scaled_dot_product_attention = patched
    try:
        yield state
    finally:
        F.scaled_dot_product_attention = original
        if hook is not None:
            hook.remove()


def register_transformers(name="pasa", kernel=None, *, alloc=None, algorithm=None, layers=None, threads=None):
    """Registers `name` as an attention implementation of Hugging Face transformers (>= 4.48: its
    AttentionInterface; the masks of "sdpa"): transformers' own SDPA path (repeat_kv, masks, the transpose)
    with scaled_dot_product_attention above in torch's place, for the layers whose layer_idx is in `layers`
    (None: all). Select it with from_pretrained(..., attn_implementation=name) or
    model.set_attn_implementation(name). Returns name."""
    from transformers import AttentionInterface
    from transformers.integrations.sdpa_attention import sdpa_attention_forward

    wanted = None if layers is None else set(layers)

    def forward(module, query, key, value, attention_mask, **kwargs):
        if wanted is not None and getattr(module, "layer_idx", None) not in wanted:
            return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)
        with emulate(kernel, alloc=alloc, algorithm=algorithm, threads=threads):
            return sdpa_attention_forward(module, query, key, value, attention_mask, **kwargs)

    AttentionInterface.register(name, forward)
    try:  # transformers >= 4.53 builds each implementation's masks by its own function
        from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS, AttentionMaskInterface, sdpa_mask
    except ImportError:
        pass
    else:
        AttentionMaskInterface.register(name, ALL_MASK_ATTENTION_FUNCTIONS.get("sdpa", sdpa_mask))
    return name


from pasa._deviation import REFERENCE, deviation, generate, kernel_entry  # noqa: E402,F401  (it imports this module)
