#!/usr/bin/env python3
"""A tiny causal transformer LM trained here on the project's own docs (byte-level), for the end-to-end
deviation study of docs/deviation.md (pasa.torch.deviation).

The project's other small model (experiments/real/train_and_capture.py, 7.6 M parameters, context 512) is
trained on a GPU and its weights are not committed (only a capture of its attention inputs), so it cannot be
rerun here on CPU; this one can: 2 layers, d_model 64, 4 heads of dimension 16, context 64, MLP 256, learned
positions, pre-norm, tied embedding, ~0.12 M parameters (a 0.25 MB fp16 checkpoint).

Every attention call goes through torch.nn.functional.scaled_dot_product_attention looked up at call time
(torch >= 2.0 has it; Debian's torch 1.13 does not, and then math_sdpa below, torch's documented formula, is
used), so that pasa.torch.deviation / emulate can put an emulated kernel in its place.

Reproducible: the corpus is docs/*.md read from git at a pinned commit (--commit), the seed is fixed, the step
count is fixed (not a time budget) and torch runs on one thread, so a rerun gives the same weights (the
checkpoint records the corpus SHA-256 and the final losses to compare).

    build/pasa-python experiments/python/tiny_lm.py     # ~5 minutes on 2 shared cores; writes results/deviation/
    build/pasa-python experiments/python/tiny_lm.py --steps 20 --out /tmp/tiny   # a quick check

Writes to --out: tiny_lm.pt (fp16 state dict, config, corpus hash, losses) and heldout.txt (the last 10 % of the
corpus, never trained on).
"""
import argparse
import hashlib
import json
import math
import os
import subprocess
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.realpath(__file__))))  # (docs tests link experiments/)
CONFIG = dict(vocab=256, d_model=64, n_layers=2, n_heads=4, ctx=64, mlp=256)
TRAIN = dict(steps=6000, batch=32, lr=3e-3, warmup=100, seed=0, heldout_fraction=0.1)
COMMIT = "92545dc"  # the docs the committed checkpoint was trained on (a commit on main, so every clone has it)


def math_sdpa(q, k, v, is_causal=False):
    """softmax(q kᵀ / sqrt(E) + causal) v: torch's documented semantics, used where torch has no SDPA."""
    s = q @ k.transpose(-2, -1) / math.sqrt(q.shape[-1])
    if is_causal:
        L, S = s.shape[-2:]
        s = s.masked_fill(~torch.ones(L, S, dtype=torch.bool, device=s.device).tril(), -math.inf)
    return torch.softmax(s, dim=-1) @ v


def attention(q, k, v):
    """The model's one attention call: torch's SDPA as it is at call time (swappable), else math_sdpa."""
    sdpa = getattr(F, "scaled_dot_product_attention", None)
    return sdpa(q, k, v, is_causal=True) if sdpa is not None else math_sdpa(q, k, v, is_causal=True)


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        d = c["d_model"]
        self.n_heads = c["n_heads"]
        self.ln1, self.ln2 = nn.LayerNorm(d), nn.LayerNorm(d)
        self.qkv = nn.Linear(d, 3 * d)
        self.proj = nn.Linear(d, d)
        self.mlp = nn.Sequential(nn.Linear(d, c["mlp"]), nn.GELU(), nn.Linear(c["mlp"], d))

    def forward(self, x):
        B, T, d = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(B, T, 3, self.n_heads, d // self.n_heads).permute(2, 0, 3, 1, 4)
        a = attention(q, k, v).transpose(1, 2).reshape(B, T, d)
        x = x + self.proj(a)
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    def __init__(self, c=CONFIG):
        super().__init__()
        self.config = dict(c)
        self.tok = nn.Embedding(c["vocab"], c["d_model"])
        self.pos = nn.Embedding(c["ctx"], c["d_model"])
        self.blocks = nn.ModuleList(Block(c) for _ in range(c["n_layers"]))
        self.ln = nn.LayerNorm(c["d_model"])
        for e in (self.tok, self.pos):  # GPT-2's std 0.02: torch's N(0, 1) makes the tied logits' std ~8
            nn.init.normal_(e.weight, std=0.02)

    def forward(self, idx):
        T = idx.shape[1]
        if T > self.config["ctx"]:
            raise ValueError(f"idx: {T} tokens; the context is {self.config['ctx']}")
        x = self.tok(idx) + self.pos(torch.arange(T, device=idx.device))
        for b in self.blocks:
            x = b(x)
        return self.ln(x) @ self.tok.weight.t()  # tied output embedding: logits (B, T, 256)


def load(path, dtype=torch.float64):
    """The checkpoint's model in `dtype`, in eval mode; returns (model, checkpoint dict)."""
    # torch >= 2.6 loads weights only by default, and refuses the TorchVersion object that the committed
    # checkpoint's "torch" entry is (saved by torch 1.13, where weights_only defaulted to False): allowed by
    # name where torch has safe_globals (2.4 and later), the plain load before.
    safe = getattr(torch.serialization, "safe_globals", None)
    if safe is None:
        ck = torch.load(path, map_location="cpu")
    else:
        with safe([torch.torch_version.TorchVersion]):
            ck = torch.load(path, map_location="cpu", weights_only=True)
    m = TinyLM(ck["config"])
    m.load_state_dict({k: v.to(torch.float32) for k, v in ck["state_dict"].items()})
    return m.to(dtype).eval(), ck


def corpus(commit):
    """docs/*.md at `commit`, concatenated in name order (bytes)."""
    names = subprocess.run(["git", "-C", ROOT, "ls-tree", "--name-only", commit, "docs/"], check=True,
                           capture_output=True, text=True).stdout.split()
    names = sorted(n for n in names if n.endswith(".md"))
    if not names:
        raise SystemExit(f"tiny_lm: no docs/*.md at commit {commit}")
    return names, b"".join(subprocess.run(["git", "-C", ROOT, "show", f"{commit}:{n}"], check=True,
                                          capture_output=True).stdout for n in names)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", default=os.path.join(ROOT, "results", "deviation"))
    ap.add_argument("--commit", default=COMMIT, help="the git commit whose docs/*.md are the corpus")
    ap.add_argument("--steps", type=int, default=TRAIN["steps"])
    a = ap.parse_args()
    torch.set_num_threads(1)  # (bit-reproducible weights whatever the machine's cores)
    torch.manual_seed(TRAIN["seed"])
    names, text = corpus(a.commit)
    data = torch.tensor(list(text), dtype=torch.long)
    cut = int(len(data) * (1 - TRAIN["heldout_fraction"]))
    train, held = data[:cut], data[cut:]
    model = TinyLM()
    opt = torch.optim.AdamW(model.parameters(), lr=TRAIN["lr"], weight_decay=0.01)
    g = torch.Generator().manual_seed(TRAIN["seed"])
    ctx, B = CONFIG["ctx"], TRAIN["batch"]

    def batch(src):
        i = torch.randint(0, len(src) - ctx - 1, (B,), generator=g)
        x = torch.stack([src[j:j + ctx + 1] for j in i.tolist()])
        return x[:, :-1], x[:, 1:]

    def loss_of(src):
        x, y = batch(src)
        return F.cross_entropy(model(x).reshape(-1, CONFIG["vocab"]), y.reshape(-1))

    log, t0 = [], time.time()
    for step in range(1, a.steps + 1):
        lr = TRAIN["lr"] * min(1.0, step / TRAIN["warmup"]) * 0.5 * (1 + math.cos(math.pi * step / a.steps))
        for pg in opt.param_groups:
            pg["lr"] = lr
        model.train()
        loss = loss_of(train)
        opt.zero_grad()
        loss.backward()
        opt.step()
        if step % 250 == 0 or step == a.steps:
            model.eval()
            with torch.no_grad():
                val = float(sum(loss_of(held) for _ in range(4)) / 4)
            log.append({"step": step, "train_loss": round(float(loss), 4), "heldout_loss": round(val, 4),
                        "seconds": round(time.time() - t0, 1)})
            print(json.dumps(log[-1]), flush=True)
    os.makedirs(a.out, exist_ok=True)
    ck = {"config": CONFIG, "train": dict(TRAIN, steps=a.steps), "commit": a.commit, "files": names,
          "corpus_sha256": hashlib.sha256(text).hexdigest(), "corpus_bytes": len(text), "heldout_from": cut,
          "torch": str(torch.__version__), "log": log,
          "state_dict": {k: v.detach().to(torch.float16) for k, v in model.state_dict().items()}}
    torch.save(ck, os.path.join(a.out, "tiny_lm.pt"))
    with open(os.path.join(a.out, "heldout.txt"), "wb") as f:
        f.write(text[cut:])
    print(f"tiny_lm: {sum(p.numel() for p in model.parameters())} parameters, {len(text)} corpus bytes "
          f"({len(text) - cut} held out); wrote {a.out}/tiny_lm.pt and heldout.txt")


if __name__ == "__main__":
    main()
