"""The host's seconds of an eager step's backward pass against its forward pass, per framework call: a direction
for the open lead of docs/residuals.md ("A cheaper host for the backward pass": vTrain's rows want the backward's
calls at 0.3-0.4 of the forward's host seconds to reach a 7% mean APE).

Runs, on this machine's CPU, a stack of GPT layers (pre-norm, one fused QKV linear, a causal softmax attention from
``baddbmm`` and ``bmm``, dropout, GELU MLP: the operations of Megatron's layer as built-in PyTorch calls, no custom
autograd functions) at toy sizes (hidden 16, 8 tokens), where the dispatcher's work, not the arithmetic, is the
time; counts each pass's ATen calls with a ``TorchDispatchMode`` and times the passes over many steps. What it
leaves out: CUDA's launch call (a few microseconds a kernel on both passes, hardware.md 3D) and Megatron's Python
autograd functions (fused layer norm, softmax and tensor-parallel mappings run Python in the backward too), so it
is a direction, not a figure to fit. Needs the ``torch`` extra.

    python benchmarks/host_pass_split.py [--layers 12] [--steps 300]
"""
from __future__ import annotations

import argparse
import json
import time

import torch
import torch.nn.functional as F
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode


class _Count(TorchDispatchMode):
    """Counts the ATen calls made while it is active."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.calls += 1
        return func(*args, **(kwargs or {}))


class _Layer(nn.Module):
    def __init__(self, hidden: int, heads: int):
        super().__init__()
        self.ln1, self.ln2 = nn.LayerNorm(hidden), nn.LayerNorm(hidden)
        self.qkv, self.proj = nn.Linear(hidden, 3 * hidden), nn.Linear(hidden, hidden)
        self.fc1, self.fc2 = nn.Linear(hidden, 4 * hidden), nn.Linear(4 * hidden, hidden)
        self.drop, self.heads = nn.Dropout(0.1), heads

    def forward(self, x):
        s, b, h = x.shape
        q, k, v = self.qkv(self.ln1(x)).view(s, b * self.heads, 3 * h // self.heads).chunk(3, dim=-1)
        scores = torch.baddbmm(torch.empty(b * self.heads, s, s), q.transpose(0, 1), k.transpose(0, 1).transpose(1, 2),
                               beta=0.0, alpha=(h // self.heads) ** -0.5)
        mask = torch.ones(s, s, dtype=torch.bool).triu(1)
        p = self.drop(torch.softmax(scores.masked_fill(mask, -1e4), dim=-1))
        x = x + self.drop(self.proj(torch.bmm(p, v.transpose(0, 1)).transpose(0, 1).reshape(s, b, h)))
        return x + self.drop(self.fc2(F.gelu(self.fc1(self.ln2(x)))))


def measure(layers: int = 12, steps: int = 300, hidden: int = 16, heads: int = 2, tokens: int = 8) -> dict:
    """Seconds and ATen calls of each pass, and the backward call's seconds over the forward call's."""
    torch.manual_seed(0)
    torch.set_num_threads(1)
    model = nn.Sequential(*[_Layer(hidden, heads) for _ in range(layers)])
    x = torch.randn(tokens, 1, hidden, requires_grad=True)
    for _ in range(max(10, steps // 6)):  # warm-up
        model(x).sum().backward()
    fwd = bwd = 0.0
    for _ in range(steps):
        t0 = time.perf_counter()
        loss = model(x).sum()
        t1 = time.perf_counter()
        loss.backward()
        fwd, bwd = fwd + t1 - t0, bwd + time.perf_counter() - t1
    with _Count() as c:
        loss = model(x).sum()
    n_f = c.calls
    with _Count() as c:
        loss.backward()
    n_b = c.calls
    f_s, b_s = fwd / steps, bwd / steps
    return {"torch": torch.__version__, "layers": layers, "forward_s": f_s, "backward_s": b_s,
            "forward_calls": n_f, "backward_calls": n_b, "forward_s_per_call": f_s / n_f,
            "backward_s_per_call": b_s / n_b, "backward_over_forward_per_call": (b_s / n_b) / (f_s / n_f),
            "backward_over_forward_pass": b_s / f_s}


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--steps", type=int, default=300)
    a = ap.parse_args(argv)
    if a.layers < 1 or a.steps < 1:
        raise SystemExit("--layers and --steps: must be >= 1")
    out = measure(a.layers, a.steps)
    print(json.dumps(out, indent=1))
    return out


if __name__ == "__main__":
    main()
