"""Work and depth of generating text with a causal decoder: the paper's W-D analysis (§2.5) applied to
autoregressive inference [D] (``concurrency-model workdepth --generate PROMPT TOKENS``).

* **Prefill**: the forward pass of the graph built for ``prompt_len`` tokens: W and D as
  :meth:`~concurrency_model.graph.Graph.forward` gives them.
* **A decode step at context L**: the graph built for one new token, each attention core replaced by one query
  against ``L`` cached positions (:func:`~concurrency_model.ops.attention.attention` with ``seq_q = 1``,
  ``seq_kv = L``; every block's attention is on the critical path, so the depth changes by the same amount per
  layer). The steps run one after another (each feeds the token the previous one produced): the depth of
  generating ``T`` tokens is the prefill's plus the sum of ``T`` step depths, and the average parallelism
  ``W / D`` of a decode step at batch 1 is that of one token's pass, small next to the prefill's.
* **Speculative decoding** (:mod:`concurrency_model.serving.speculative`, Leviathan et al. 2023): ``T / E`` iterations
  of ``gamma`` draft steps and one target step over ``gamma + 1`` queries: more work (the draft, and the
  verified tokens that are rejected), less depth when the draft's steps are shallow.
"""
from __future__ import annotations

from collections import Counter

import numpy as np
import sympy as sp

from ..checks import count
from ..ops.attention import attention
from ..scenario import check_speculative
from .overheads import model_graph
from .speculative import tokens_per_iteration

_L = sp.Symbol("L", positive=True, integer=True)


def _step(model, batch: int, queries: int, lo: int, hi: int) -> tuple[float, float]:
    """Mean work and depth of a step over ``queries`` new tokens at contexts ``lo..hi``."""
    g = model_graph(model, batch, queries, 2)
    fwd = g.forward()
    att = [n for n in g.layers() if n.kind == "attention"]
    work, depth = fwd.flop, fwd.depth
    for (heads, head_dim, fused), times in Counter((n.attrs["heads"], n.attrs["head_dim"], n.attrs["fused"])
                                                   for n in att).items():  # the blocks' cores, priced once
        here = attention(batch, heads, queries, head_dim, fused=fused, causal=True).forward
        cached = attention(batch, heads, queries, head_dim, seq_kv=_L, fused=fused).forward
        work += times * (cached.flop - here.flop)
        depth += times * (cached.depth - here.depth)
    L = np.arange(lo, hi + 1, dtype=float)
    mean = [float(np.mean(np.broadcast_to(sp.lambdify(_L, sp.sympify(e), "numpy")(L), L.shape))) for e in (work, depth)]
    return mean[0], mean[1]


def generation_cost(model, batch: int = 1, prompt_len: int = 512, decode_len: int = 128,
                    speculative: dict | None = None) -> dict:
    """``{"prefill": {work, depth}, "decode": {work, depth, steps}, "work", "depth", "average_parallelism"}``
    of generating ``decode_len`` tokens after a ``prompt_len``-token prompt for ``batch`` sequences (FLOP and
    dependent operations); with ``speculative`` (``{"draft", "tokens", "acceptance"}``) also ``"speculative"``:
    the same figures, ``iterations`` and ``depth_reduction`` (plain decode depth over speculative).

    >>> c = generation_cost("gpt2", 1, 128, 32)
    >>> c["decode"]["steps"], c["depth"] == c["prefill"]["depth"] + c["decode"]["depth"]
    (32, True)
    """
    for name, v in (("batch", batch), ("prompt_len", prompt_len), ("decode_len", decode_len)):
        count(name, v)
    from .decoder import model_shape  # the causal-decoder check and the context
    context = model_shape(model_graph(model, 1, None, 2))["context"]
    if prompt_len + decode_len > context:
        raise ValueError(f"decode_len: prompt_len + decode_len = {prompt_len + decode_len} exceeds the model's "
                         f"context of {context} positions")
    lo, hi = prompt_len + 1, prompt_len + decode_len
    pre = model_graph(model, batch, prompt_len, 2).forward()
    prefill = {"work": float(pre.flop), "depth": float(pre.depth)}
    w, d = _step(model, batch, 1, lo, hi)
    decode = {"work": decode_len * w, "depth": decode_len * d, "steps": decode_len}
    out = _summary(prefill, decode)
    if speculative is not None:
        spec = check_speculative(speculative)
        gamma, E = spec["tokens"], tokens_per_iteration(spec["tokens"], float(spec["acceptance"]))
        try:
            model_shape(model_graph(spec["draft"], 1, None, 2))
            dp = model_graph(spec["draft"], batch, prompt_len, 2).forward()
            dw, dd = _step(spec["draft"], batch, 1, lo, hi)
        except ValueError as e:
            raise ValueError(f"inference.speculative.draft: {e}") from None
        vw, vd = _step(model, batch, gamma + 1, lo, hi)
        it = decode_len / E
        s_pre = {"work": prefill["work"] + float(dp.flop), "depth": prefill["depth"] + float(dp.depth)}
        s_dec = {"work": it * (gamma * dw + vw), "depth": it * (gamma * dd + vd), "iterations": it}
        out["speculative"] = {**_summary(s_pre, s_dec), "tokens_per_iteration": E,
                              "depth_reduction": decode["depth"] / s_dec["depth"],
                              "work_increase": s_dec["work"] / decode["work"]}
    return out


def _summary(prefill: dict, decode: dict) -> dict:
    work, depth = prefill["work"] + decode["work"], prefill["depth"] + decode["depth"]
    return {"prefill": prefill, "decode": decode, "work": work, "depth": depth, "average_parallelism": work / depth}
