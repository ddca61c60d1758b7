"""The shared core of the torch and ONNX importers: operators with full shapes -> graph nodes.

A traced graph has tensors with the batch dimension in them; the toolkit's graphs keep per-sample shapes
and costs that are expressions in the batch. :class:`Emitter` bridges the two: a tensor is *batched* when
it depends on a graph input whose first dimension is the example's batch ``B0``; the costs of an
operator on batched tensors are built with one leading count (rows, images, sequences) multiplied by
``batch / B0``, so that a graph traced once can be rebuilt for any batch, or a symbolic one, without
tracing again. Parameters are counted once, by the first operator that reads them (tied weights are
not counted twice); views, reshapes and other data movement are free and keep the producer's node.
Operators the library does not know become element-wise costs (one FLOP per output element) and are
listed, with their counts, in a warning and in ``graph.unknown_ops``: never dropped silently. The
operator methods live in :mod:`.operators` (the ``OperatorEmitters`` mixin); this module keeps the
tensor bookkeeping, ``emit`` and ``finish``.
"""
from __future__ import annotations

import warnings
from collections import Counter
from dataclasses import dataclass

import sympy as sp

from ..cost import Cost, OpCost, clog2
from ..graph import Graph
from ..models.builder import Builder
from .operators import ACTIVATIONS, EW_OPS, OperatorEmitters, prod  # noqa: F401 (ACTIVATIONS, EW_OPS re-exported)


@dataclass
class T:
    """A tensor of the traced graph: the node that produced it (None for constants and parameters), its
    full shape, whether it depends on the batched inputs, and the parameter it is (a view of), if any."""

    node: str | None
    shape: tuple
    batched: bool
    param: str | None = None


class Emitter(OperatorEmitters):
    """Builds a :class:`~concurrency_model.graph.Graph` from operators on full shapes."""

    def __init__(self, name: str, batch0: int, batch, value_bytes, frontend: str):
        self.b = Builder(name, batch, value_bytes)
        self.B0 = max(int(batch0), 1)
        self.k = self.b.batch / self.B0
        self.vb = value_bytes
        self.frontend = frontend
        self.vals: dict[str, T] = {}
        self.param_numel: dict[str, int] = {}
        self.claimed: set[str] = set()
        self.unknown: Counter = Counter()
        self._names: Counter = Counter()

    # -- tensors ----------------------------------------------------------------------------------
    def input(self, key: str, shape, name: str | None = None, batch_dim: int = 0) -> None:
        shape = tuple(int(v) for v in shape)
        batched = len(shape) > batch_dim and shape[batch_dim] == self.B0
        node = self.b.input(self.per_sample(shape, batched), name=self.unique(name or key))
        self.vals[key] = T(node, shape, batched)

    def parameter(self, key: str, shape) -> None:
        shape = tuple(int(v) for v in shape)
        self.vals[key] = T(None, shape, False, key)
        self.param_numel[key] = prod(shape)

    def constant(self, key: str, shape, batched: bool = False) -> None:
        self.vals[key] = T(None, tuple(int(v) for v in shape), batched)

    def alias(self, out: str, src: str, shape) -> None:
        """A view or copy without arithmetic: ``out`` is ``src`` with another shape (free)."""
        s = self.vals[src]
        self.vals[out] = T(s.node, tuple(int(v) for v in shape), s.batched, s.param)

    def carry(self, out: str, ins, shape) -> None:
        """A tensor made of parameters only (slices, concatenations, transposes of weights, as exporters
        write gate reorderings): it stands for the parameters it was made of, counted by its reader."""
        total = 0
        for i in ins:
            p = self._unclaimed(i)
            if p is not None:
                self.claimed.add(p)
                total += self.param_numel[p]
        self.param_numel[out] = total
        self.vals[out] = T(None, tuple(int(v) for v in shape), False, out if total else None)

    def has(self, key) -> bool:
        return key in self.vals

    def shape(self, key: str) -> tuple:
        return self.vals[key].shape

    def is_param(self, key: str) -> bool:
        return self.vals[key].param is not None

    def foldable(self, ins) -> bool:
        """True when no input comes from a node or is a parameter: the result is a constant of the model
        (masks, position ids, rotary tables) computed once, not per sample."""
        return all(self.vals[i].node is None and self.vals[i].param is None for i in ins)

    def _unclaimed(self, key):
        p = self.vals[key].param
        return p if p is not None and p not in self.claimed else None

    def batched(self, ins) -> bool:
        return any(self.vals[i].batched for i in ins)

    # -- counts -----------------------------------------------------------------------------------
    def per_sample(self, shape, batched: bool) -> tuple:
        """The shape without the batch: the first dimension equal to the example batch is dropped (a
        sequence-first or head-merged layout too); else the first one it divides is divided."""
        shape = tuple(int(v) for v in shape)
        if not batched:
            return shape or (1,)
        if self.B0 in shape:
            i = shape.index(self.B0)
            return shape[:i] + shape[i + 1:] or (1,)
        for i, v in enumerate(shape):
            if v % self.B0 == 0:
                return (*shape[:i], v // self.B0, *shape[i + 1:])
        n = prod(shape)
        return (n // self.B0,) if n % self.B0 == 0 else (n,)

    def lead(self, n, batched: bool):
        """A count that includes the batch: ``n * batch / B0`` on batched tensors."""
        return self.k * int(n) if batched else sp.Integer(int(n))

    def lead_first(self, batched: bool, *counts):
        """Scale the first count the example batch divides (e.g. the batch of a batched GEMM before its
        rows); the others stay numbers."""
        counts = [int(c) for c in counts]
        if not batched:
            return [sp.Integer(c) for c in counts]
        i = next((j for j, c in enumerate(counts) if c % self.B0 == 0), 0)
        return [self.k * c if j == i else sp.Integer(c) for j, c in enumerate(counts)]

    def per_sample_count(self, n, batched: bool):
        if not batched:
            return int(n)
        return int(n) // self.B0 if int(n) % self.B0 == 0 else int(n) / self.B0

    def unique(self, name: str) -> str:
        name = name.strip(".") or "op"
        k = self._names[name]
        self._names[name] += 1
        return name if k == 0 else f"{name}_{k}"

    # -- nodes ------------------------------------------------------------------------------------
    def emit(self, kind: str, ins, out: str, shape, cost: OpCost, name: str, **attrs) -> str:
        """Add a node reading ``ins`` (tensor keys), claiming the parameters among them."""
        ins = [i for i in ins if i is not None and i in self.vals]
        claimed = 0
        for i in ins:
            p = self._unclaimed(i)
            if p is not None:
                self.claimed.add(p)
                claimed += self.param_numel[p]
        batched = self.batched(ins)
        if claimed != cost.params or (claimed and cost.grad_weight.flop == 0):
            gw = cost.grad_weight
            if claimed and gw.flop == 0:  # a parameter used element-wise: ∇p sums ∇y ⊙ x over the rest [D]
                n = self.lead(prod(shape), batched)
                gw = Cost(flop=2 * n, depth=1 + clog2(sp.Max(1, sp.ceiling(n / claimed))),
                          bytes=self.vb * (2 * n + claimed))
            cost = OpCost(cost.op, cost.forward.with_(params=claimed), cost.grad_input, gw, cost.source)
        nodes = list(dict.fromkeys(self.vals[i].node for i in ins if self.vals[i].node is not None))
        node = self.b.node(kind, nodes, self.per_sample(shape, batched), cost, self.unique(name), **attrs)
        self.vals[out] = T(node, tuple(int(v) for v in shape), batched)
        return node

    # -- result -----------------------------------------------------------------------------------
    def finish(self, rebuild=None) -> Graph:
        g = self.b.graph
        g.unknown_ops = dict(self.unknown)
        g.unused_params = sum(v for k, v in self.param_numel.items() if k not in self.claimed)
        if self.unknown:
            listed = ", ".join(f"{k} x{v}" for k, v in self.unknown.most_common())
            warnings.warn(f"{self.frontend}: {sum(self.unknown.values())} operators of {g.name!r} are not in the "
                          f"operator library and were counted as element-wise (1 FLOP per output element): "
                          f"{listed}", UnknownOperatorWarning, stacklevel=3)
        if rebuild is not None:
            g.rebuild = rebuild
        return g


class UnknownOperatorWarning(UserWarning):
    """Operators of an imported model that the operator library does not model."""
