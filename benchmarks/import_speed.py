"""Import speed of ``from_torch`` on a 7B-parameter LLaMA-style model built on the meta device.

The issue's bar: under 30 s and under 1 GB. The model is Llama-2-7B's shape (32 layers, hidden 4096,
32 heads, SwiGLU 11008, vocabulary 32000, RMSNorm, untied head; 6,738,415,616 parameters) written with
plain torch.nn modules (no transformers dependency), traced for one sequence of 4096 tokens.

Run: ``python benchmarks/import_speed.py [--layers 32] [--seq 4096] [--json]``. Prints the build, trace
and graph times, the process's peak resident memory (everything: Python, torch, sympy) and the
imported graph's parameters and forward FLOP.
"""
from __future__ import annotations

import argparse
import json
import resource
import sys
import time


def llama_like(vocab=32000, hidden=4096, layers=32, heads=32, kv_heads=32, ffn=11008):
    import torch
    import torch.nn as nn
    import torch.nn.functional as F

    class Attention(nn.Module):
        def __init__(self):
            super().__init__()
            self.heads, self.kv, self.hd = heads, kv_heads, hidden // heads
            self.q_proj = nn.Linear(hidden, hidden, bias=False)
            self.k_proj = nn.Linear(hidden, kv_heads * self.hd, bias=False)
            self.v_proj = nn.Linear(hidden, kv_heads * self.hd, bias=False)
            self.o_proj = nn.Linear(hidden, hidden, bias=False)

        def forward(self, x, cos, sin):
            b, s, _ = x.shape
            q = self.q_proj(x).view(b, s, self.heads, self.hd).transpose(1, 2)
            k = self.k_proj(x).view(b, s, self.kv, self.hd).transpose(1, 2)
            v = self.v_proj(x).view(b, s, self.kv, self.hd).transpose(1, 2)

            def rotate(t):  # rotary embedding (Su et al. 2021): x cos + rotate_half(x) sin
                t1, t2 = t.chunk(2, dim=-1)
                return t * cos + torch.cat((-t2, t1), dim=-1) * sin
            q, k = rotate(q), rotate(k)
            if self.kv != self.heads:
                k = k.repeat_interleave(self.heads // self.kv, dim=1)
                v = v.repeat_interleave(self.heads // self.kv, dim=1)
            y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            return self.o_proj(y.transpose(1, 2).reshape(b, s, hidden))

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            self.input_layernorm = nn.RMSNorm(hidden)
            self.self_attn = Attention()
            self.post_attention_layernorm = nn.RMSNorm(hidden)
            self.gate_proj = nn.Linear(hidden, ffn, bias=False)
            self.up_proj = nn.Linear(hidden, ffn, bias=False)
            self.down_proj = nn.Linear(ffn, hidden, bias=False)

        def forward(self, x, cos, sin):
            x = x + self.self_attn(self.input_layernorm(x), cos, sin)
            y = self.post_attention_layernorm(x)
            return x + self.down_proj(F.silu(self.gate_proj(y)) * self.up_proj(y))

    class LlamaLike(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed_tokens = nn.Embedding(vocab, hidden)
            self.layers = nn.ModuleList(Block() for _ in range(layers))
            self.norm = nn.RMSNorm(hidden)
            self.lm_head = nn.Linear(hidden, vocab, bias=False)
            hd = hidden // heads
            self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, hd, 2).float() / hd), persistent=False)

        def forward(self, tokens):
            s = tokens.shape[1]
            t = torch.arange(s, device=tokens.device).float()
            freqs = torch.outer(t, self.inv_freq)
            emb = torch.cat((freqs, freqs), dim=-1)
            cos, sin = emb.cos(), emb.sin()
            x = self.embed_tokens(tokens)
            for layer in self.layers:
                x = layer(x, cos, sin)
            return self.lm_head(self.norm(x))

    return LlamaLike()


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--layers", type=int, default=32)
    ap.add_argument("--seq", type=int, default=4096)
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args(argv)
    t0 = time.perf_counter()
    import torch

    from concurrency_model import from_torch
    t_import = time.perf_counter() - t0
    t0 = time.perf_counter()
    with torch.device("meta"):
        model = llama_like(layers=args.layers)
    t_build = time.perf_counter() - t0
    t0 = time.perf_counter()
    g = from_torch(model, torch.empty(1, args.seq, dtype=torch.long, device="meta"))
    t_from_torch = time.perf_counter() - t0
    t0 = time.perf_counter()
    fwd = float(g.forward_flop())
    t_flop = time.perf_counter() - t0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * (1 if sys.platform == "darwin" else 1024)
    out = {"layers": args.layers, "seq": args.seq, "params": int(g.params),
           "torch_params": sum(p.numel() for p in model.parameters()), "forward_flop": fwd,
           "import_torch_s": round(t_import, 2), "build_meta_model_s": round(t_build, 2),
           "from_torch_s": round(t_from_torch, 2), "forward_flop_s": round(t_flop, 2),
           "peak_rss_bytes": peak, "nodes": len(g.layers()), "unknown_ops": g.unknown_ops}
    if args.json:
        print(json.dumps(out))
    else:
        for k, v in out.items():
            print(f"{k:>20}: {v:,}" if isinstance(v, (int, float)) else f"{k:>20}: {v}")
        ok = t_from_torch < 30 and peak < 2**30
        print(f"\nbar (under 30 s and 1 GB): {'met' if ok else 'NOT met'}")
    return out


if __name__ == "__main__":
    main()
