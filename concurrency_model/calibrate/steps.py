"""``calibrate steps``: GPT training steps, prompt passes and decode steps timed on this machine, for validation.

A plain GPT-2 architecture in torch (Radford et al. 2019: pre-LN blocks, learned positions, GELU MLP of 4 x
hidden, dropout after the embedding and each residual branch, a tied output layer; the GPT-3 sizes of Brown
et al. 2020, Table 2.1): the toolkit's ``{"kind": "gpt", ...}`` graph, parameter for parameter (tested), so
that its estimate of the same model can be checked (:mod:`concurrency_model.validate.measured`):

* ``train``: forward, cross-entropy, backward and a fused AdamW step in bf16 autocast (fp32 weights; on a
  CPU fp32 throughout, fewer and smaller runs); attention by ``scaled_dot_product_attention`` (``flash``)
  or by matmul + mask + softmax + matmul (``unfused``); the peak of allocated memory over the timed steps;
* ``prefill``: one forward of ``batch x seq`` tokens, the next token's logits only (no cache written);
* ``decode``: one token per sequence against a KV cache holding ``seq`` positions, the eager Python loop's
  launches included.

Times are the median of per-step timings (CUDA events on a GPU) after warm-up. Writes ``DIR/gpt_steps.csv``
with the device, library versions and date on every row, rewritten after each run (temporary file and
rename), so that a run stopped half-way keeps what it measured; nothing is overwritten without ``force``.
"""
from __future__ import annotations

import gc
import math
import os
import platform
import time
from datetime import datetime, timezone

import pandas as pd
import torch
import torch.nn.functional as F
from torch import nn

from ..progress import Progress
from .files import atomic_write, check_targets, partial_path
from .kernels import device_label

SIZES = {  # name -> (layers, hidden, heads); GPT-2 (Radford et al. 2019), GPT-3 (Brown et al. 2020 Table 2.1)
    "gpt2": (12, 768, 12), "gpt2-medium": (24, 1024, 16), "gpt2-large": (36, 1280, 20), "gpt2-xl": (48, 1600, 25),
    "gpt3-2.7b": (32, 2560, 32), "gpt3-6.7b": (32, 4096, 32), "gpt-mini": (6, 512, 8), "tiny": (2, 64, 4)}
VOCAB = 50257
DROPOUT = 0.1  # GPT-2's embedding and residual dropout (its attention dropout is left out, as in the toolkit's graph)
GPU_RUNS = [  # (kind, model, batch, seq, attention)
    *[("train", "gpt2", b, 1024, "flash") for b in (1, 4, 8, 16)],
    *[("train", "gpt2", b, 1024, "unfused") for b in (4, 8)],
    *[("train", "gpt2-medium", b, 1024, "flash") for b in (4, 8)],
    ("train", "gpt2-large", 4, 1024, "flash"), ("train", "gpt2-xl", 1, 1024, "flash"),
    ("train", "gpt2-xl", 4, 1024, "flash"), ("train", "gpt3-2.7b", 1, 2048, "flash"),
    ("train", "gpt3-2.7b", 2, 2048, "flash"),
    ("prefill", "gpt2-xl", 1, 1024, "flash"), ("prefill", "gpt2-xl", 8, 1024, "flash"),
    ("prefill", "gpt3-6.7b", 1, 2048, "flash"), ("prefill", "gpt3-6.7b", 4, 2048, "flash"),
    *[("decode", "gpt2-xl", b, 1024, "flash") for b in (1, 16, 64)],
    *[("decode", "gpt3-6.7b", b, 1024, "flash") for b in (1, 8, 32)],
]
CPU_RUNS = [  # fp32 on a CPU, sized for a minute or two on 2 cores
    ("train", "gpt-mini", 4, 128, "flash"), ("train", "gpt-mini", 4, 128, "unfused"),
    ("train", "gpt2", 1, 128, "flash"),
    ("train", "gpt2", 2, 256, "flash"), ("prefill", "gpt2", 1, 512, "flash"), ("prefill", "gpt2", 4, 128, "flash"),
    ("decode", "gpt2", 1, 256, "flash"), ("decode", "gpt2", 8, 256, "flash"), ("decode", "gpt-mini", 1, 256, "flash")]
TINY = [("train", "tiny", 2, 32, "flash"), ("train", "tiny", 2, 32, "unfused"), ("prefill", "tiny", 2, 32, "flash"),
        ("decode", "tiny", 2, 32, "flash")]
GPU_QUICK = [("train", "gpt2", 8, 1024, "flash"), ("prefill", "gpt2-xl", 1, 1024, "flash"),
             ("decode", "gpt2-xl", 1, 1024, "flash")]
FILE = "gpt_steps.csv"


class Block(nn.Module):
    def __init__(self, h: int, heads: int, unfused: bool):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(h), nn.LayerNorm(h)
        self.qkv, self.proj = nn.Linear(h, 3 * h), nn.Linear(h, h)
        self.fc, self.out = nn.Linear(h, 4 * h), nn.Linear(4 * h, h)
        self.heads, self.unfused = heads, unfused
        self.drop = nn.Dropout(DROPOUT)

    def attend(self, x, cache=None, pos=0):
        b, s, h = x.shape
        q, k, v = (t.view(b, s, self.heads, -1).transpose(1, 2) for t in self.qkv(x).split(h, dim=-1))
        if cache is not None:  # decode: write this token's keys and values, attend to every cached position
            cache[0][:, :, pos:pos + s], cache[1][:, :, pos:pos + s] = k, v
            k, v = cache[0][:, :, :pos + s], cache[1][:, :, :pos + s]
            a = F.scaled_dot_product_attention(q, k, v)
        elif self.unfused:
            att = (q @ k.transpose(-2, -1)) / math.sqrt(q.shape[-1])
            att = att.masked_fill(torch.ones(s, s, dtype=torch.bool, device=x.device).triu(1), float("-inf"))
            a = att.softmax(-1) @ v
        else:
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.drop(self.proj(a.transpose(1, 2).reshape(b, s, h)))

    def forward(self, x, cache=None, pos=0):
        x = x + self.attend(self.ln1(x), cache, pos)
        return x + self.drop(self.out(F.gelu(self.fc(self.ln2(x)), approximate="tanh")))


class GPT(nn.Module):
    def __init__(self, layers: int, h: int, heads: int, positions: int, unfused: bool = False):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, h), nn.Embedding(positions, h)
        self.blocks = nn.ModuleList(Block(h, heads, unfused) for _ in range(layers))
        self.ln, self.drop = nn.LayerNorm(h), nn.Dropout(DROPOUT)

    def forward(self, ids, caches=None, pos=0, last_only=False):
        x = self.drop(self.wte(ids) + self.wpe(torch.arange(pos, pos + ids.shape[1], device=ids.device)))
        for i, blk in enumerate(self.blocks):
            x = blk(x, None if caches is None else caches[i], pos)
        if last_only:  # a prompt pass needs the next token's logits only
            x = x[:, -1:]
        return self.ln(x) @ self.wte.weight.t()  # tied output layer


def timed(fn, warmup: int, reps: int, dev: str) -> list:
    for _ in range(warmup):
        fn()
    out = []
    for _ in range(reps):
        if dev == "cuda":
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            out.append(a.elapsed_time(b))
        else:
            t = time.perf_counter()
            fn()
            out.append((time.perf_counter() - t) * 1e3)
    return sorted(out)


def run(kind, name, batch, seq, attention, dev, reps, dtype="bf16"):
    layers, h, heads = SIZES[name]
    positions = max(seq + 64, 1024 if name != "tiny" else 128)
    with torch.device(dev):
        model = GPT(layers, h, heads, positions, attention == "unfused")
    ids = torch.randint(0, VOCAB, (batch, seq), device=dev)
    half = dtype == "bf16"
    ac = torch.autocast(dev, dtype=torch.bfloat16, enabled=half)  # mixed precision: fp32 weights, bf16 math
    if kind == "train":
        opt = torch.optim.AdamW(model.parameters(), lr=1e-4, fused=dev == "cuda")

        def fn():
            with ac:
                loss = F.cross_entropy(model(ids).float().view(-1, VOCAB), ids.view(-1))
            loss.backward()
            opt.step()
            opt.zero_grad(set_to_none=True)
        warmup = 3
    else:
        tdt = torch.bfloat16 if half else torch.float32
        model = model.to(tdt).eval()
        if kind == "prefill":
            def fn():
                with torch.inference_mode():
                    model(ids, last_only=True)
        else:
            hd = h // heads
            caches = [tuple(torch.randn(batch, heads, seq + 64, hd, dtype=tdt, device=dev)
                            for _ in range(2)) for _ in range(layers)]
            tok, state = ids[:, :1], {"pos": seq}

            def fn():  # one token for each sequence, at positions seq, seq + 1, ... (the cache has 64 spare)
                with torch.inference_mode():
                    model(tok, caches, state["pos"])
                state["pos"] = seq + (state["pos"] - seq + 1) % 64
        warmup = 5
    if dev == "cuda":
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
    times = timed(fn, warmup, reps, dev)
    peak = torch.cuda.max_memory_allocated() if dev == "cuda" else float("nan")
    params = sum(p.numel() for p in model.parameters())
    return {"median_ms": times[len(times) // 2], "min_ms": times[0], "max_ms": times[-1], "repetitions": reps,
            "peak_allocated_bytes": peak, "params": params, "positions": positions, "layers": layers, "hidden": h,
            "heads": heads}


def calibrate(out_dir, quick: bool = False, force: bool = False, budget_s: float | None = None, stream=None,
              runs=None) -> dict:
    """Time the runs (``GPU_RUNS`` in bf16 where CUDA is, else ``CPU_RUNS`` in fp32; ``quick``: ``GPU_QUICK``
    or ``TINY``; ``runs``: a list of ``(kind, model, batch, seq, attention)``) and write ``DIR/gpt_steps.csv``.
    ``budget_s``: start no new run after this many seconds. Returns ``{out, rows, files, failed, device,
    elapsed_s}``; ``failed`` lists the runs that raised (out of memory) or were left for lack of time."""
    t0 = time.perf_counter()
    out = check_targets(out_dir, force, (FILE,))
    cuda = torch.cuda.is_available()
    dev, dtype = ("cuda", "bf16") if cuda else ("cpu", "fp32")
    runs = list(runs if runs is not None else (GPU_QUICK if quick else GPU_RUNS) if cuda else
                (TINY if quick else CPU_RUNS))
    for r in runs:
        if len(r) != 5 or r[0] not in ("train", "prefill", "decode") or r[1] not in SIZES:
            raise ValueError(f"runs: {r!r} is not (train|prefill|decode, one of {', '.join(SIZES)}, batch, seq, "
                             "flash|unfused)")
    torch.backends.cuda.matmul.allow_tf32 = True
    name, soft = device_label(torch, cuda)
    date, rows, failed = datetime.now(timezone.utc).isoformat(timespec="seconds"), [], []
    out.mkdir(parents=True, exist_ok=True)
    # progress into the file when it is new, else beside it (FILE.partial): an old whole file is replaced once
    progress = partial_path(out / FILE) if (out / FILE).exists() else out / FILE
    with Progress(len(runs), "calibrate steps", stream) as bar:
        for kind, model, batch, seq, attention in runs:
            what = f"{kind} {model} b{batch} s{seq} {attention}"
            if budget_s is not None and time.perf_counter() - t0 > budget_s:
                failed.append({"run": what, "reason": "time budget spent"})
                bar.update(1, what)
                continue
            torch.manual_seed(0)
            try:
                r = run(kind, model, batch, seq, attention, dev, 10 if kind != "decode" else 32, dtype)
            except (RuntimeError, torch.OutOfMemoryError) as e:  # out of memory: kept as a row with its error
                layers, h, heads = SIZES[model]
                r = {"layers": layers, "hidden": h, "heads": heads, "error": str(e).splitlines()[0][:160]}
                failed.append({"run": what, "reason": r["error"]})
            rows.append({"kind": kind, "model": model, "batch": batch, "seq": seq, "attention": attention,
                         "dtype": dtype, "vocab": VOCAB, **r, "device": name, "software": soft,
                         "host": platform.node(), "cpu_count": os.cpu_count(), "date": date,
                         "source": "concurrency-model calibrate steps"})
            gc.collect()
            if cuda:
                torch.cuda.empty_cache()
            atomic_write(progress, pd.DataFrame(rows).to_csv(index=False))  # kept if stopped
            bar.update(1, what)
    if rows:  # an old file replaced once, by the whole run
        atomic_write(out / FILE, pd.DataFrame(rows).to_csv(index=False))
    if progress != out / FILE:
        progress.unlink(missing_ok=True)
    return {"out": str(out), "rows": len(rows), "files": [str(out / FILE)] if rows else [], "failed": failed,
            "device": name, "elapsed_s": round(time.perf_counter() - t0, 2)}
