#!/usr/bin/env python3
"""Trains a small causal transformer on text that ships with Debian, then captures its attention inputs
(Q, K, V after RoPE, per layer, GQA layout) on a held-out sequence with pasa_capture.

A small model trained here, NOT Qwen2 or any published model: its attention has the structure of a real
LLM's (learned projections, RoPE, GQA, causal mask, head dimension 128 as in the paper's shape) and is the
nearest to "real tensors" that can be made without downloading weights.

    PYTHONPATH=build/python python3 experiments/real/train_and_capture.py --out $OUT     # GPU, a few minutes
    PYTHONPATH=build/python python3 experiments/real/train_and_capture.py --smoke --out /tmp/cap   # CPU check

Writes to --out (default $OUT): capture/ (index.json and fp16 .npy per layer, a few MB; the format is in
src/pasa/io/capture_folder.hpp), training.json (configuration, data files, losses), README.md. No weights.
Then experiments/real/run_paper_comparison.sh <out>/capture runs the paper's comparison on it.

PyTorch only; no downloads. Byte-level tokens (vocabulary 256), so no tokenizer is needed.
"""
import argparse
import gzip
import hashlib
import json
import math
import os
import sys
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))
import pasa_capture  # noqa: E402  (python/pasa_capture.py; also on PYTHONPATH=build/python)

FULL = dict(d_model=512, n_layers=4, n_heads=4, n_kv_heads=2, head_dim=128, mlp=1024, ctx=512, batch=64,
            steps=4000, lr=1e-3, warmup=200, max_minutes=6.0, max_bytes=32 << 20)
SMOKE = dict(d_model=64, n_layers=2, n_heads=2, n_kv_heads=1, head_dim=32, mlp=128, ctx=64, batch=4,
             steps=5, lr=1e-3, warmup=2, max_minutes=1.0, max_bytes=1 << 20)


# ---------------------------------------------------------------------------------------------------- data
def read_text(path):
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                data = f.read(4 << 20)
        else:
            with open(path, "rb") as f:
                data = f.read(4 << 20)
    except OSError:
        return b""
    # text only: refuse files with NUL bytes (binaries) or mostly non-printable bytes
    if not data or b"\0" in data[:4096]:
        return b""
    printable = sum(32 <= c < 127 or c in (9, 10, 13) for c in data[:4096])
    return data if printable >= 0.95 * min(len(data), 4096) else b""


def collect_corpus(max_bytes, lic="/usr/share/common-licenses", doc="/usr/share/doc"):
    """Debian's license texts and package copyright files; when those give under 1 MB (a trimmed image),
    every text file under /usr/share/doc (README, changelog.Debian.gz, ...). Identical files counted once."""
    sources = []
    if os.path.isdir(lic):
        sources += sorted(os.path.join(lic, f) for f in os.listdir(lic))
    if os.path.isdir(doc):
        sources += sorted(os.path.join(doc, p, "copyright") for p in os.listdir(doc))
    used, seen, total, chunks = [], set(), 0, []

    def add(paths):
        nonlocal total
        for p in paths:
            if total >= max_bytes:
                return
            if not os.path.isfile(p):
                continue
            data = read_text(p)
            h = hashlib.sha256(data).digest()
            if not data or h in seen:
                continue
            seen.add(h)
            data = data[: max_bytes - total]
            chunks.append(data)
            used.append(p)
            total += len(data)

    add(sources)
    fallback = total < (1 << 20)
    if fallback and os.path.isdir(doc):
        extra = []
        for root, _, files in os.walk(doc):
            extra += [os.path.join(root, f) for f in sorted(files)]
        add(sorted(extra))
    if total < 10000:
        sys.exit(f"train_and_capture: found only {total} bytes of text under /usr/share/common-licenses and "
                 "/usr/share/doc; install a few Debian packages (their /usr/share/doc) and try again")
    return b"\n\n".join(chunks), used, fallback


# --------------------------------------------------------------------------------------------------- model
def rope(x, base=10000.0):
    """Rotary position embedding (RoFormer), halves of the head dimension rotated (as Llama/Qwen2)."""
    s, d = x.shape[-2], x.shape[-1]
    inv = base ** (-torch.arange(0, d // 2, device=x.device, dtype=torch.float32) / (d // 2))
    ang = torch.arange(s, device=x.device, dtype=torch.float32)[:, None] * inv[None, :]
    cos, sin = torch.cos(ang).to(x.dtype), torch.sin(ang).to(x.dtype)
    x1, x2 = x[..., : d // 2], x[..., d // 2:]
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class Attention(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.h, self.hkv, self.d = c["n_heads"], c["n_kv_heads"], c["head_dim"]
        self.wq = nn.Linear(c["d_model"], self.h * self.d, bias=True)  # Qwen2 has q/k/v biases
        self.wk = nn.Linear(c["d_model"], self.hkv * self.d, bias=True)
        self.wv = nn.Linear(c["d_model"], self.hkv * self.d, bias=True)
        self.wo = nn.Linear(self.h * self.d, c["d_model"], bias=False)
        self.scale = 1 / math.sqrt(self.d)

    def qkv(self, x):
        b, s, _ = x.shape
        q = self.wq(x).view(b, s, self.h, self.d).transpose(1, 2)
        k = self.wk(x).view(b, s, self.hkv, self.d).transpose(1, 2)
        v = self.wv(x).view(b, s, self.hkv, self.d).transpose(1, 2)
        return rope(q), rope(k), v

    def forward(self, x):
        q, k, v = self.qkv(x)
        g = self.h // self.hkv
        k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)  # as Hugging Face's repeat_kv
        sdpa = getattr(F, "scaled_dot_product_attention", None)  # looked up per call: capture wraps it
        if sdpa is not None:
            o = sdpa(q, k, v, is_causal=True)
        else:  # torch < 2.0
            s = x.shape[1]
            mask = torch.ones(s, s, dtype=torch.bool, device=x.device).tril()
            o = torch.softmax((q @ k.transpose(-2, -1) * self.scale).masked_fill(~mask, -math.inf), dim=-1) @ v
        b, s = x.shape[:2]
        return self.wo(o.transpose(1, 2).reshape(b, s, self.h * self.d))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.n1, self.n2 = nn.LayerNorm(c["d_model"]), nn.LayerNorm(c["d_model"])
        self.attn = Attention(c)
        self.mlp = nn.Sequential(nn.Linear(c["d_model"], c["mlp"]), nn.GELU(), nn.Linear(c["mlp"], c["d_model"]))

    def forward(self, x):
        x = x + self.attn(self.n1(x))
        return x + self.mlp(self.n2(x))


class ByteLM(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.emb = nn.Embedding(256, c["d_model"])
        self.blocks = nn.ModuleList(Block(c) for _ in range(c["n_layers"]))
        self.norm = nn.LayerNorm(c["d_model"])
        self.out = nn.Linear(c["d_model"], 256, bias=False)

    def forward(self, ids):
        x = self.emb(ids)
        for b in self.blocks:
            x = b(x)
        return self.out(self.norm(x))


def adapter(module, args, kwargs):
    """pasa_capture adapter (used where torch has no scaled_dot_product_attention to wrap)."""
    q, k, v = module.qkv(*args, **kwargs)
    return q, k, v, module.scale, True


# ---------------------------------------------------------------------------------------------------- main
def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.environ.get("OUT"), help="output folder (default: $OUT)")
    ap.add_argument("--smoke", action="store_true", help="tiny model, a few steps (a CPU check of the script)")
    ap.add_argument("--steps", type=int, help="training steps (default: 4000; smoke: 5)")
    ap.add_argument("--max-minutes", type=float, help="stop training after this long (default 6)")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--capture-batch", type=int, default=1, help="held-out sequences in the capture (B)")
    a = ap.parse_args()
    if not a.out:
        ap.error("give --out or set $OUT")
    c = dict(SMOKE if a.smoke else FULL)
    if a.steps is not None:
        c["steps"] = a.steps
    if a.max_minutes is not None:
        c["max_minutes"] = a.max_minutes
    torch.manual_seed(a.seed)
    dev = torch.device(a.device)

    text, used, fallback = collect_corpus(c["max_bytes"])
    print(f"data: {len(text)} bytes from {len(used)} files ({'fallback: every text file under /usr/share/doc' if fallback else '/usr/share/common-licenses and /usr/share/doc/*/copyright'})")
    for p in used[:10]:
        print(f"  {p}")
    if len(used) > 10:
        print(f"  ... and {len(used) - 10} more (all listed in training.json)")
    data = torch.frombuffer(bytearray(text), dtype=torch.uint8).long()
    split = int(0.95 * len(data))
    train, held = data[:split], data[split:]
    if len(held) <= c["ctx"] * a.capture_batch + 1:
        sys.exit(f"train_and_capture: the held-out text ({len(held)} bytes) is shorter than the capture")

    model = ByteLM(c).to(dev)
    n_params = sum(p.numel() for p in model.parameters())
    print(f"model: {n_params / 1e6:.2f} M parameters, {c['n_layers']} layers, {c['n_heads']} query heads on "
          f"{c['n_kv_heads']} KV heads of dimension {c['head_dim']}, context {c['ctx']}; device {dev}")
    opt = torch.optim.AdamW(model.parameters(), lr=c["lr"], betas=(0.9, 0.95), weight_decay=0.1)
    gen = torch.Generator().manual_seed(a.seed)
    use_bf16 = dev.type == "cuda"

    def batch(src, n):
        i = torch.randint(0, len(src) - c["ctx"] - 1, (n,), generator=gen)
        x = torch.stack([src[j: j + c["ctx"]] for j in i.tolist()])
        y = torch.stack([src[j + 1: j + 1 + c["ctx"]] for j in i.tolist()])
        return x.to(dev), y.to(dev)

    def loss_of(x, y):
        with torch.autocast(device_type=dev.type, dtype=torch.bfloat16, enabled=use_bf16):
            return F.cross_entropy(model(x).float().view(-1, 256), y.view(-1))

    log, t0, step = [], time.time(), 0
    model.train()
    for step in range(1, c["steps"] + 1):
        lr = c["lr"] * min(1.0, step / c["warmup"]) * 0.5 * (1 + math.cos(math.pi * min(1.0, step / c["steps"])))
        for g in opt.param_groups:
            g["lr"] = lr
        x, y = batch(train, c["batch"])
        loss = loss_of(x, y)
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        opt.step()
        if step % max(1, c["steps"] // 20) == 0 or step == 1 or step == c["steps"]:
            model.eval()
            with torch.no_grad():
                val = loss_of(*batch(held, min(c["batch"], 16))).item()
            model.train()
            log.append({"step": step, "train_loss": loss.item(), "val_loss": val, "seconds": time.time() - t0})
            print(f"step {step}: train {loss.item():.3f} val {val:.3f} nats/byte ({time.time() - t0:.0f} s)", flush=True)
        if time.time() - t0 > 60 * c["max_minutes"]:
            print(f"stopping at step {step}: --max-minutes {c['max_minutes']} reached")
            break
    if not log or log[-1]["step"] != step:
        model.eval()
        with torch.no_grad():
            val = loss_of(*batch(held, min(c["batch"], 16))).item()
        log.append({"step": step, "train_loss": loss.item(), "val_loss": val, "seconds": time.time() - t0})

    # The capture: one held-out batch (the last bytes of the text: no training sequence overlaps them), the
    # model in float32 (the values stored as fp16, the paper's input format).
    model.float().eval()
    n = c["ctx"] * a.capture_batch
    ids = held[-n:].view(a.capture_batch, c["ctx"]).to(dev)
    os.makedirs(a.out, exist_ok=True)
    cap_dir = os.path.join(a.out, "capture")
    has_sdpa = hasattr(F, "scaled_dot_product_attention")
    index = pasa_capture.capture(
        model, ids, cap_dir, dtype="float16", overwrite=True, model_name="pasa-bytelm" + ("-smoke" if a.smoke else ""),
        adapters=None if has_sdpa else {Attention: adapter},
        notes=f"A {n_params / 1e6:.1f} M-parameter byte-level transformer trained by experiments/real/"
              f"train_and_capture.py for {step} steps on Debian's license and copyright texts; NOT Qwen2.")
    size = sum(os.path.getsize(os.path.join(cap_dir, f)) for f in os.listdir(cap_dir))
    print(f"capture: {len(index['layers'])} layers via {'scaled_dot_product_attention' if has_sdpa else 'an adapter'}"
          f" -> {cap_dir} ({size / 1e6:.1f} MB)")
    # The captured tensors reproduce the model's attention (a check of the capture itself).
    _, arrays = pasa_capture.load(cap_dir)
    ranges = []
    for layer, arr in zip(index["layers"], arrays):
        ranges.append({k: [float(arr[k].min()), float(arr[k].max())] for k in ("q", "k", "v")})
    info = {"config": c, "smoke": a.smoke, "seed": a.seed, "device": str(dev), "torch": str(torch.__version__),
            "parameters": n_params, "steps_run": step, "log": log, "data_bytes": len(text), "data_fallback": fallback,
            "data_files": used, "capture": {"dir": "capture", "layers": len(index["layers"]), "bytes": size,
                                             "value_ranges": ranges}}
    with open(os.path.join(a.out, "training.json"), "w") as f:
        json.dump(info, f, indent=1)
    final = log[-1]
    with open(os.path.join(a.out, "README.md"), "w") as f:
        f.write(f"""# Attention inputs of a small model trained here (not Qwen2)

`capture/` holds the Q, K and V (after RoPE) that a small byte-level transformer fed its attention on one
held-out sequence, written by `pasa_capture` (python/pasa_capture.py; format in
src/pasa/io/capture_folder.hpp). **This is a {n_params / 1e6:.1f} M-parameter model trained by
`experiments/real/train_and_capture.py`{' --smoke' if a.smoke else ''} in {final['seconds']:.0f} s on
{dev}, not Qwen2-7B or any published model** (the paper's Table 2 cases need their weights, which this
repository does not download).

- Model: {c['n_layers']} layers, d_model {c['d_model']}, {c['n_heads']} query heads on {c['n_kv_heads']} KV heads
  (GQA) of dimension {c['head_dim']}, RoPE, causal, pre-LayerNorm, GELU MLP {c['mlp']}, q/k/v biases;
  byte tokens (vocabulary 256), context {c['ctx']}.
- Data: {len(text)} bytes from {len(used)} distinct files ({'every text file under /usr/share/doc' if fallback else '/usr/share/common-licenses/* and /usr/share/doc/*/copyright'}),
  95 % for training, the last 5 % held out; file list in training.json.
- Training: {step} steps of batch {c['batch']} x {c['ctx']} bytes, AdamW lr {c['lr']} (warm-up {c['warmup']}, cosine),
  {'bf16 autocast' if use_bf16 else 'float32'}; final train loss {final['train_loss']:.3f}, held-out loss
  {final['val_loss']:.3f} nats/byte. Seed {a.seed}, torch {torch.__version__}.
- Capture: the last {n} held-out bytes as B = {a.capture_batch} sequence(s) of {c['ctx']}, the model in float32,
  values stored as float16; {len(index['layers'])} layers, {size / 1e6:.1f} MB; scale 1/sqrt({c['head_dim']}), causal.

Run the paper's comparison (FA-FP32, FA-FP16/FP32, PASA-FP16) over (layer, head):
`experiments/real/run_paper_comparison.sh {os.path.join(a.out, 'capture')}`.
""")
    print(f"wrote {a.out}/README.md and training.json")


if __name__ == "__main__":
    main()
