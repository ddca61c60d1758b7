"""The kernels of a serving pass over a causal decoder (:mod:`concurrency_model.serving.decoder`): a forward pass over
the prompt (prefill), and a step that feeds ``queries`` new tokens per sequence and attends over the KV cache
(a decode step: 1; a speculative verification: the draft's tokens + 1, :mod:`concurrency_model.serving.speculative`).

A step is the model's graph built for ``seq = queries`` without its attention cores, plus per layer one
attention of ``queries`` queries against the cache of ``L`` positions: the work of
:func:`~concurrency_model.ops.attention.attention` with ``seq_q = queries, seq_kv = L`` and traffic ``batch x
bytes x head_dim x (2 kv_heads L + (2 heads + 2 kv_heads) queries)`` (K and V of ``L`` positions read once, Q
read, O and the new K, V written; the causal mask among the new tokens is left out [D]), a roofline on the
non-tensor units: the maximum of two affine functions of ``L``, averaged over a range of contexts in closed
form (:func:`sum_max_affine`). See :mod:`concurrency_model.serving.decoder` for the sources.
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache, partial

import numpy as np
import sympy as sp

from ..models.transformer import is_lm_head
from ..ops.attention import attention as attention_op
from ..parallel.host import issued
from ..timing import decided_float, gemm_coeffs
from ..timing.graph import layer_parts
from ..timing.layers import attention_kernels
from ..timing.parts import Parts, bound_of, total
from ..units import dtype_bytes, value_dtype
from .memo import device_key, memoized
from .overheads import FREE

_L = sp.Symbol("L", positive=True, integer=True)  # context length of a step


def sum_max_affine(a1: float, c1: float, a2: float, c2: float, lo: int, hi: int) -> float:
    """``sum(max(a1 L + c1, a2 L + c2) for L in range(lo, hi + 1))`` in closed form: split at the
    crossing ``L* = (c2 - c1) / (a1 - a2)``, then two arithmetic series (derived).

    >>> sum_max_affine(1.0, 0.0, 0.0, 5.0, 1, 10) == sum(max(L, 5) for L in range(1, 11))
    True
    """
    def series(a, c, u, v):  # sum of a L + c over L = u..v
        return 0.0 if v < u else (v - u + 1) * (c + a * (u + v) / 2)

    if a1 == a2:
        return series(a1, max(c1, c2), lo, hi)
    if a1 < a2:
        a1, c1, a2, c2 = a2, c2, a1, c1
    k = min(max(math.ceil((c2 - c1) / (a1 - a2)), lo), hi + 1)  # first L where the steeper line is the larger
    return series(a2, c2, lo, k - 1) + series(a1, c1, k, hi)


def pass_parts(graph, dev, dtype: str, t: int, batch: int, step: bool, weight_bytes=None, weight_sparsity=None,
               all_logits: bool = False, head_rows: int | None = None, expert: int = 1, imbalance=1.0) -> Parts:
    """Kernels of one forward pass: dropout free, the output layer on the last position only (on every
    position with ``all_logits``: a verification needs each token's distribution; on ``head_rows`` rows when
    given: the sampling rows of a mixed iteration, :mod:`concurrency_model.serving.continuous_batching`); in a ``step`` the
    attention cores are left out (priced by :func:`kv_attention`); ``expert``: the expert-parallel degree (the
    experts a device holds and the batch reaches, :func:`~concurrency_model.timing.graph.expert_gemms`; ``imbalance``:
    its routing). Computed once a graph and set of arguments (:mod:`.memo`)."""
    args = (dev, dtype, t, batch, step, weight_bytes, weight_sparsity, all_logits, head_rows, expert, imbalance)
    return memoized(graph, ("pass_parts", device_key(dev), *args[1:]),
                    lambda: total(parts for _, parts in pass_rows(graph, *args)))


def pass_rows(graph, dev, dtype: str, t: int, batch: int, step: bool, weight_bytes=None, weight_sparsity=None,
              all_logits: bool = False, head_rows: int | None = None, expert: int = 1, imbalance=1.0):
    """``(kind, Parts)`` of each layer :func:`pass_parts` adds up (the output layer as kind ``output_layer``)."""
    key = ("layer_parts", "forward", device_key(dev), dtype, t, weight_bytes, weight_sparsity, expert, imbalance)
    timed = memoized(graph, key, lambda: layer_parts(graph, dev, dtype, tensor=t, weight_bytes=weight_bytes,
                                                     weight_sparsity=weight_sparsity, expert=expert,
                                                     imbalance=imbalance, passes=("forward",)))
    for node, row in zip(graph.layers(), timed):
        if node.kind in FREE or (step and node.kind == "attention"):
            continue
        kind = "output_layer" if is_lm_head(node) else node.kind
        if is_lm_head(node) and (head_rows is not None or (node.attrs["rows_per_sample"] > 1 and not all_logits)):
            rows = batch if head_rows is None else head_rows
            c = gemm_coeffs(rows, -(-node.attrs["c_out"] // t), node.attrs["c_in"], dev, dtype)
            yield kind, Parts.from_coeffs(c, dev)
        else:
            yield kind, row["forward"]


def pass_kinds(rows, breakdown: dict) -> list[dict]:
    """A step by kind of layer, largest first: ``kind``, ``layers``, ``seconds``, ``share`` and ``bound`` (compute,
    memory or launch, :func:`~concurrency_model.timing.parts.bound_of`) of :func:`pass_rows`' ``rows`` (the
    kernels of the step's ``compute_s``), then the rest of its ``breakdown`` (the cache's attention, communication,
    host waits) as rows of their own."""
    others = {k: v for k, v in breakdown.items() if k != "compute_s"}

    kinds = {}
    for kind, parts in rows:
        kinds.setdefault(kind, []).append(parts)
    out = [{"kind": k, "layers": len(v), "seconds": sum(p.total() for p in v), "bound": bound_of(*v)}
           for k, v in kinds.items()]
    out += [{"kind": k.removesuffix("_s"), "layers": 0, "seconds": float(v), "bound": ""}
            for k, v in others.items() if v]
    whole = sum(r["seconds"] for r in out) or 1.0
    return sorted(({**r, "share": r["seconds"] / whole} for r in out), key=lambda r: -r["seconds"])


def prompt_attention(graph, dev, dtype: str, t: int, cached: int = 0) -> Parts:
    """The attention cores of a prompt pass over ``graph`` (built for the whole prompt of ``seq`` positions): the
    queries of the positions after the first ``cached`` (a prefix already in the cache) against the keys of all
    ``seq`` (:func:`~concurrency_model.ops.attention.attention` with ``seq_q = seq - cached``: a fused causal kernel
    computes the pairs below the diagonal, an unfused one every score of its rows; their kernels
    :func:`~concurrency_model.timing.layers.attention_kernels`), one device's heads under tensor ``t``. Computed once
    a graph and set of arguments (:mod:`.memo`)."""
    return memoized(graph, ("prompt_attention", device_key(dev), dtype, t, cached),
                    lambda: _prompt_attention(graph, dev, dtype, t, cached))


def _prompt_attention(graph, dev, dtype: str, t: int, cached: int) -> Parts:
    dtype = value_dtype(dtype)  # as the graph's own attention (:func:`~concurrency_model.timing.graph.layer_parts`)
    vb, priced = dtype_bytes(dtype), {}  # identical layers priced once
    for node in graph.layers():
        if node.kind != "attention":
            continue
        a = node.attrs
        heads, q = max(1, a["heads"] // t), a["seq"] - cached
        key = (heads, q, a["head_dim"], a["seq"], a["fused"], a["causal"])
        if key not in priced:
            cost = attention_op(graph.batch, heads, q, a["head_dim"], seq_kv=a["seq"], fused=a["fused"],
                                causal=a["causal"], value_bytes=vb).forward
            priced[key] = [total(Parts.from_coeffs(c, dev, k) for c, k in attention_kernels(
                cost, graph.batch, heads, q, a["head_dim"], dev, dtype, a["fused"], a["causal"], "forward",
                a["seq"])), 0]
        priced[key][1] += 1
    return total(parts.times(n) for parts, n in priced.values())


def kv_attention(batch: int, heads: int, kv_heads: int, head_dim: int, dev, dtype: str, t: int,
                 queries: int = 1, kv_bytes: float | None = None) -> tuple:
    """One layer's attention of ``queries`` new tokens at context ``L`` as ``(a_c, c_c, a_m, c_m, launch)``
    seconds: ``max(a_c L + c_c, a_m L + c_m) + launch`` (the module docstring); the cache of ``kv_bytes`` a value
    (default: the math's, :func:`~concurrency_model.units.value_dtype`), the queries and outputs in 16 bits under
    8-bit math."""
    dtype = value_dtype(dtype)
    vb = dtype_bytes(dtype)
    kb = vb if kv_bytes is None else kv_bytes
    hq, hk = heads // t, -(-kv_heads // t)
    a_f, c_f = _flop_line(batch, hq, queries, head_dim, vb)
    e = dev.efficiency
    rate = decided_float(dev.vector_flops.get(dtype, dev.peak(dtype)), dev.decide) * e.compute
    bw = decided_float(dev.mem_bw, dev.decide) * e.memory
    a_m, c_m = batch * kb * head_dim * 2 * hk, batch * head_dim * (2 * hq * vb + 2 * hk * kb) * queries
    return a_f / rate, c_f / rate, a_m / bw, c_m / bw, decided_float(dev.launch_overhead, dev.decide)


@lru_cache(maxsize=4096, typed=True)
def _flop_line(batch: int, heads: int, queries: int, head_dim: int, vb: int) -> tuple[float, float]:
    """``(a, c)`` of the fused attention's work ``a L + c`` FLOP of ``queries`` queries against ``L`` keys
    (:func:`~concurrency_model.ops.attention.attention`, symbolic in ``L``): the same few lines for every step and
    iteration a search prices, so derived once each: from the work at 1, 2 and 3 keys when those lie on one line
    (exact integers: the same coefficients), else from the symbolic work's polynomial in ``L`` (sympy's expansion,
    four times the cost)."""
    at = [sp.sympify(attention_op(batch, heads, queries, head_dim, seq_kv=k, fused=True, value_bytes=vb).forward.flop)
          for k in (1, 2, 3)]
    a, c = at[1] - at[0], 2 * at[0] - at[1]
    if all(v.is_Integer for v in at) and at[2] == c + 3 * a:
        return float(a), float(c)
    flop = sp.Poly(sp.expand(attention_op(batch, heads, queries, head_dim, seq_kv=_L, fused=True, value_bytes=vb)
                             .forward.flop), _L)
    return float(flop.coeff_monomial(_L)), float(flop.coeff_monomial(1))


COMM = ("tensor_comm_s", "expert_comm_s", "pipeline_p2p_s")  # a breakdown's communication


def comm_s(breakdown: dict) -> float:
    """Seconds of communication in a pass's or step's ``breakdown`` (scaled as a whole by the network's speed)."""
    return sum(breakdown.get(k, 0.0) for k in COMM)


def with_experts(b: dict, comm, graph, batch: int, vb: int) -> dict:
    """``b`` with ``expert_comm_s`` after ``tensor_comm_s`` under expert parallelism (:meth:`~concurrency_model.
    serving.Comm.expert`); unchanged without."""
    if comm.e == 1:
        return b
    out = {}
    for k, v in b.items():
        out[k] = v
        if k == "tensor_comm_s":
            out["expert_comm_s"] = comm.expert(graph, batch, vb)
    return out


@dataclass
class Pass:
    """A prompt pass: its kernels, the host's seconds to issue them and ``breakdown`` (``compute_s,
    host_wait_s, tensor_comm_s``, ``expert_comm_s`` under expert parallelism, ``pipeline_p2p_s``)."""

    parts: Parts
    host_s: float
    breakdown: dict

    def scaled(self, flops, mem_bw, launch, net) -> np.ndarray:
        """Seconds on arrays of hardware scales (as :meth:`Step.scaled`)."""
        return np.maximum(self.parts.seconds(flops, mem_bw, launch), self.host_s) + comm_s(self.breakdown) / net


def prefill_pass(graph, hidden: int, dev, dtype: str, t: int, batch: int, comm, prompt_len: int,
                 host_overhead_s: float = 0.0, weight_bytes=None, weight_sparsity=None, cached: int = 0,
                 whole=None) -> Pass:
    """The forward pass of ``graph`` (built for ``prompt_len`` tokens) that fills the KV cache: the logits of the
    last position only, the tensor-parallel collectives, the pipeline sends of ``batch x prompt_len x hidden``
    values, the expert-parallel all-to-alls; the host issues each kernel (``host_overhead_s``). With a cached
    prefix of ``cached`` positions, ``graph`` is built for the ``prompt_len - cached`` new tokens, which the
    layers, collectives and sends carry, and their attention reads the whole prompt's keys (``whole``: the graph
    of the whole prompt, :func:`prompt_attention`)."""
    vb = dtype_bytes(value_dtype(dtype))  # activations on the wire (8-bit math: 16-bit messages)
    parts = pass_parts(graph, dev, dtype, t, batch, cached > 0, weight_bytes, weight_sparsity, expert=comm.e,
                       imbalance=comm.imbalance)
    if cached:
        parts = parts + prompt_attention(whole, dev, dtype, t, cached)
    host = host_overhead_s * issued(parts, float(dev.launch_overhead))
    new = prompt_len - cached
    return Pass(parts, host, with_experts({"compute_s": parts.total(), "host_wait_s": max(0.0, host - parts.total()),
                                           "tensor_comm_s": comm.tensor(graph, batch, vb, last_only=True),
                                           "pipeline_p2p_s": comm.pipeline(batch * new * hidden * vb)},
                                          comm, graph, batch, vb))


@dataclass
class Step:
    """One step (its kernels, attention and communication), its mean seconds over the contexts ``lo..hi``
    (``breakdown``: ``compute_s, kv_attention_s, tensor_comm_s``, ``expert_comm_s`` under expert parallelism,
    ``pipeline_p2p_s, host_wait_s``)."""

    parts: Parts
    attention: tuple
    layers: int
    lo: int
    hi: int
    host_s: float
    breakdown: dict
    rows_of: object = None  # () -> (kind, Parts) of the kernels in ``compute_s`` (:func:`pass_rows`)

    @property
    def seconds(self) -> float:
        return sum(self.breakdown.values())

    def kinds(self) -> list[dict]:
        """The step by kind of layer (:func:`pass_kinds`)."""
        return pass_kinds(self.rows_of(), self.breakdown)

    def scaled(self, flops, mem_bw, launch, net) -> np.ndarray:
        """Mean seconds of the step on arrays of hardware scales (:mod:`concurrency_model.uncertainty`);
        communication scaled as a whole by its tier's bandwidth ``net``."""
        a_c, c_c, a_m, c_m, att_launch = self.attention
        n = self.hi - self.lo + 1
        att = np.array([sum_max_affine(a_c / f, c_c / f, a_m / m, c_m / m, self.lo, self.hi)
                        for f, m in zip(flops, mem_bw)]) / n + att_launch * launch
        return np.maximum(self.parts.seconds(flops, mem_bw, launch) + self.layers * att, self.host_s) + \
            comm_s(self.breakdown) / net


def decode_step(graph, shape: dict, dev, dtype: str, t: int, batch: int, comm, lo: int, hi: int,
                host_overhead_s: float = 0.0, weight_bytes=None, weight_sparsity=None, queries: int = 1) -> Step:
    """The step of ``graph`` (built for ``seq = queries``; ``shape``: :func:`~concurrency_model.serving.decoder.
    model_shape` of the model) averaged over contexts ``lo..hi``; ``comm``: :class:`~concurrency_model.serving.overheads.
    Comm`. The host issues the step's kernels and one attention kernel a layer (``host_overhead_s`` each)."""
    vb = dtype_bytes(value_dtype(dtype))  # activations on the wire
    parts = pass_parts(graph, dev, dtype, t, batch, True, weight_bytes, weight_sparsity, all_logits=queries > 1,
                       expert=comm.e, imbalance=comm.imbalance)
    att = kv_attention(batch, shape["heads"], shape["kv_heads"], shape["head_dim"], dev, dtype, t, queries,
                       shape.get("kv_bytes"))
    n = hi - lo + 1
    host = host_overhead_s * (issued(parts, float(dev.launch_overhead)) + shape["layers"])
    b = {"compute_s": parts.total(),
         "kv_attention_s": shape["layers"] * (sum_max_affine(*att[:4], lo, hi) / n + att[4]),
         "tensor_comm_s": comm.tensor(graph, batch, vb, last_only=queries == 1),
         "pipeline_p2p_s": comm.pipeline(batch * queries * shape["hidden"] * vb)}
    b = with_experts(b, comm, graph, batch, vb)
    b["host_wait_s"] = max(0.0, host - b["compute_s"] - b["kv_attention_s"])
    return Step(parts, att, shape["layers"], lo, hi, host, b,
                partial(pass_rows, graph, dev, dtype, t, batch, True, weight_bytes, weight_sparsity,
                        all_logits=queries > 1, expert=comm.e, imbalance=comm.imbalance))
