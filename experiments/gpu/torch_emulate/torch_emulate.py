#!/usr/bin/env python3
"""torch_emulate.py: pasa.torch on the GPU machine (torch >= 2.5, transformers 5.x): a tiny Llama (random
weights from a fixed seed, no download) run with torch's own SDPA and with pasa's emulated attention in its
place, and pasa.torch.scaled_dot_product_attention against torch's own function on its semantics.

  experiments/gpu/torch_emulate/run.sh      (builds the module if needed; results in $OUT/torch_emulate.json)

Checks, each printed with its figure and kept in the JSON:
 1. semantics: pasa.torch.scaled_dot_product_attention(alloc="fp64") against torch's float64 SDPA (math
    backend) on bool and float masks, is_causal with Sq < Skv and Sq > Skv (torch's top-left alignment),
    enable_gqa and scale=: max |difference| (expected ~1e-15).
 2. emulate(kernel="torch_flash_sm90"): the fp16 model's logits against the same model with torch's FLASH
    backend: the share of bit-identical logits (the recipe pins the kernel's output bits, so expected 100 %).
 3. emulate(alloc="fp64") on the float64 model against torch's float64 SDPA: max |logit difference|.
 4. emulate(alloc="pasa_fp16") and emulate(alloc="fa_fp16_fp32"): top-1 agreement with the float64 model.
 5. emulate(layers=[0], model=model): one emulated call per forward.
 6. register_transformers("pasa", kernel="torch_flash_sm90"): the model's attn_implementation="pasa" gives
    the logits of check 2.
 7. the CUDA-tensor warning: raised, once per call site.
"""
import json
import os
import sys
import time
import warnings

import torch
import torch.nn.functional as F

import pasa
import pasa.torch as pt

OUT = os.environ.get("OUT") or "torch_emulate_out"
os.makedirs(OUT, exist_ok=True)
results = {"torch": torch.__version__, "pasa": pasa.__version__, "checks": {}}
t0 = time.time()


def note(name, value, ok):
    results["checks"][name] = {"value": value, "ok": bool(ok)}
    print(f"{'ok  ' if ok else 'FAIL'} {name}: {value}", flush=True)


def math_sdpa(*args, **kwargs):
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(*args, **kwargs)


# 1. semantics against torch's own function, float64 (CPU: torch's math kernel; pasa's fp64 allocation)
g = torch.Generator().manual_seed(1)
worst = 0.0
for L, S, Hq, Hkv in [(7, 7, 4, 4), (5, 11, 4, 2), (11, 5, 4, 4), (1, 9, 8, 2)]:
    q = torch.randn(2, Hq, L, 16, generator=g, dtype=torch.float64)
    k = torch.randn(2, Hkv, S, 16, generator=g, dtype=torch.float64)
    v = torch.randn(2, Hkv, S, 16, generator=g, dtype=torch.float64)
    bool_mask = torch.rand(2, Hq, L, S, generator=g) > 0.3
    bool_mask[..., 0] = True
    float_mask = torch.randn(2, 1, L, S, generator=g, dtype=torch.float64)
    gqa = Hq != Hkv
    for kw in [{}, {"is_causal": True}, {"attn_mask": bool_mask}, {"attn_mask": float_mask}, {"scale": 0.37}]:
        if kw.get("is_causal") and L > S:
            continue  # rows without a visible key: torch gives NaN there, pasa 0 (not compared)
        ref = math_sdpa(q, k, v, enable_gqa=gqa, **kw)
        got = pt.scaled_dot_product_attention(q, k, v, enable_gqa=gqa, alloc="fp64", **kw)
        worst = max(worst, float((ref - got).abs().max()))
note("semantics: max |pasa fp64 - torch fp64 SDPA|", worst, worst < 1e-12)

if not torch.cuda.is_available():
    print("no CUDA device: the model checks need one")
    json.dump(results, open(os.path.join(OUT, "torch_emulate.json"), "w"), indent=1)
    sys.exit(1)

from transformers import LlamaConfig, LlamaForCausalLM  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

config = LlamaConfig(vocab_size=512, hidden_size=128, intermediate_size=256, num_hidden_layers=2,
                     num_attention_heads=4, num_key_value_heads=4, max_position_embeddings=256,
                     attn_implementation="sdpa")
torch.manual_seed(0)
model64 = LlamaForCausalLM(config).to(torch.float64).eval()
model = LlamaForCausalLM(config).eval()
model.load_state_dict(model64.state_dict())
model = model.to("cuda", torch.float16)
ids = torch.randint(0, 512, (1, 48), generator=torch.Generator().manual_seed(2))
results["model"] = {"layers": 2, "heads": 4, "head_dim": 32, "tokens": 48}

with torch.no_grad():
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        native = model(ids.cuda()).logits.float().cpu()
    with sdpa_kernel(SDPBackend.MATH):
        ref64 = model64(ids).logits
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with pt.emulate(kernel="torch_flash_sm90", model=model) as em:
            flash_emulated = model(ids.cuda()).logits.float().cpu()
    same = float((flash_emulated.view(torch.int32) == native.view(torch.int32)).float().mean())
    note("emulate(torch_flash_sm90): bit-identical logits vs torch FLASH", f"{100 * same:.3f} % ({em})", same == 1.0)
    cuda_notes = [w for w in caught if "copied to the CPU" in str(w.message)]
    note("CUDA tensors copied with a warning", len(cuda_notes), len(cuda_notes) > 0)

    with pt.emulate(alloc="fp64", model=model64):
        emu64 = model64(ids).logits
    d64 = float((emu64 - ref64).abs().max())
    note("emulate(fp64) on the float64 model: max |logit diff| vs torch", d64, d64 < 1e-10)

    top_ref = ref64.argmax(-1)
    for alloc in ("pasa_fp16", "fa_fp16_fp32"):
        with pt.emulate(alloc=alloc, model=model):
            lg = model(ids.cuda()).logits.double().cpu()
        agree = float((lg.argmax(-1) == top_ref).double().mean())
        kl = float(torch.nn.functional.kl_div(lg.log_softmax(-1), ref64.log_softmax(-1), log_target=True,
                                              reduction="batchmean"))
        note(f"emulate({alloc}): top-1 agreement with the float64 model", f"{100 * agree:.2f} %, KL {kl:.3e}",
             agree > 0.9)
    with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
        agree = float((native.double().argmax(-1) == top_ref).double().mean())
    note("torch FLASH itself: top-1 agreement with the float64 model", f"{100 * agree:.2f} %", True)

    with pt.emulate(kernel="torch_flash_sm90", layers=[0], model=model) as em:
        model(ids.cuda())
        model(ids.cuda())
    note("emulate(layers=[0]): emulated / passed calls over two forwards", f"{em.emulated} / {em.passed}",
         em.emulated == 2 and em.passed == 2)

    try:
        pt.register_transformers("pasa", kernel="torch_flash_sm90")
        model.set_attn_implementation("pasa")
        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
            via_hf = model(ids.cuda()).logits.float().cpu()
        model.set_attn_implementation("sdpa")
        same = float((via_hf.view(torch.int32) == flash_emulated.view(torch.int32)).float().mean())
        note("transformers attn_implementation='pasa': logits of emulate()", f"{100 * same:.3f} % identical",
             same == 1.0)
    except Exception as e:  # (reported, not hidden: the adapter's first run on transformers 5)
        note("transformers attn_implementation='pasa'", f"{type(e).__name__}: {e}", False)

results["seconds"] = round(time.time() - t0, 1)
results["all_ok"] = all(c["ok"] for c in results["checks"].values())
json.dump(results, open(os.path.join(OUT, "torch_emulate.json"), "w"), indent=1)
print(f"{'all ok' if results['all_ok'] else 'SOME FAILED'} in {results['seconds']} s; {OUT}/torch_emulate.json")
sys.exit(0 if results["all_ok"] else 1)
