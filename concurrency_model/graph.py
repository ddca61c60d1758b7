"""DNN graphs: a DAG of layer nodes with inferred shapes (paper §2.5 and §4).

Work adds over all nodes; depth is the critical path (branches such as Inception modules or residual
blocks take the maximum). The training step is forward, then backward, then the optimizer update:

* backward runs the DAG in reverse. A node's output gradient is ready when every consumer has produced
  its ∇x; with k consumers the k contributions are summed (``(k-1)`` adds per element, depth
  ``ceil(log2 k)``). ∇x is computed only where an input depends on parameters (no gradient is formed
  for the data); ∇w runs alongside ∇x of the same node;
* the update of all parameters is element-wise and independent per parameter (depth of one update).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import sympy as sp

from .cost import Cost, OpCost, clog2, max_of, sum_work, to_python as num
from .ops.optimizer import optimizer_update

if TYPE_CHECKING:  # annotations only
    import pandas as pd

PASSES = ("forward", "backward", "training")


def _has_weights(n: "Node") -> bool:
    """Parameters of its own, or weights tied to another layer's (a ∇w to compute)."""
    return n.cost is not None and (n.cost.params != 0 or n.cost.grad_weight.flop != 0)


@dataclass(frozen=True)
class Node:
    """One layer: its operator cost and per-sample output shape (the batch dimension is left out)."""

    name: str
    kind: str
    inputs: tuple[str, ...]
    shape: tuple[int, ...]
    cost: OpCost | None = None  # None for graph inputs
    attrs: dict = field(default_factory=dict, compare=False)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)


class Graph:
    """A DNN as a DAG of :class:`Node`; build it with :class:`concurrency_model.models.builder.Builder`.

    ``batch`` is a number or a positive integer symbol; every cost is a sympy expression in it.

    Examples
    --------
    >>> from concurrency_model.models import get_model
    >>> g = get_model("lenet5", batch=1)
    >>> g.params
    61706
    """

    def __init__(self, name: str, batch, value_bytes=4):
        self.name = name
        self.batch = sp.sympify(batch)
        self.value_bytes = value_bytes
        self.nodes: dict[str, Node] = {}
        self._consumers: dict[str, dict[str, None]] = {}  # node -> the nodes reading it, in the order added

    @property
    def dag(self):
        """The graph as a ``networkx.DiGraph`` (an edge from each input to its reader), built when asked for:
        networkx (0.1 s to import) is loaded only then. A new DiGraph on each access."""
        import networkx as nx
        g = nx.DiGraph()
        g.add_nodes_from(self.nodes)
        g.add_edges_from((i, c) for i, readers in self._consumers.items() for c in readers)
        return g

    # -- construction (used by the builder) ------------------------------------------------------
    def add(self, node: Node) -> Node:
        if node.name in self.nodes:
            raise ValueError(f"name: node {node.name!r} already exists")
        for i in node.inputs:
            if i not in self.nodes:
                raise ValueError(f"inputs: unknown node {i!r}")
        self.nodes[node.name] = node
        for i in node.inputs:
            self._consumers.setdefault(i, {})[node.name] = None
        return node

    def _order(self) -> list[Node]:
        # insertion order is topological: a node can only be added after its inputs
        return list(self.nodes.values())

    def layers(self) -> list[Node]:
        """Nodes that compute (graph inputs left out), in topological order."""
        return [n for n in self._order() if n.cost is not None]

    # -- totals ----------------------------------------------------------------------------------
    @property
    def params(self):
        total = sum((n.cost.params for n in self.layers()), sp.Integer(0))
        return int(total) if total.is_number else total

    def forward(self, depth: bool = True) -> Cost:
        """Forward pass: W sums, D is the longest path through the DAG (``depth=False``: D left 0, the same W
        without the critical path's ``Max`` terms, which cost a large model seconds of sympy)."""
        if not depth:
            return sum_work(n.cost.forward for n in self._order() if n.cost is not None)
        done: dict[str, sp.Expr] = {}
        for n in self._order():
            start = max_of(*(done[i] for i in n.inputs)) if n.inputs else sp.Integer(0)
            done[n.name] = start if n.cost is None else start + n.cost.forward.depth
        return sum_work(n.cost.forward for n in self._order() if n.cost is not None).with_(
            depth=max_of(*done.values()))

    def _requires_grad(self) -> dict[str, bool]:
        req: dict[str, bool] = {}
        for n in self._order():
            req[n.name] = _has_weights(n) or any(req[i] for i in n.inputs)
        return req

    def backward(self, depth: bool = True) -> Cost:
        """Backward pass, measured from the moment the loss gradient is available (``depth=False``: as
        :meth:`forward`)."""
        req = self._requires_grad()
        gin_done: dict[str, sp.Expr] = {}
        ends = [sp.Integer(0)]
        work = []  # the costs added up in this order (their depths aside)
        for n in reversed(self._order()):
            consumers = [c for c in self._consumers.get(n.name, ()) if c in gin_done]
            if consumers:
                k = len(consumers)
                t = max_of(*(gin_done[c] for c in consumers)) + clog2(k) if depth else sp.Integer(0)
                if k > 1:  # sum the k gradient contributions
                    work.append(Cost(flop=(k - 1) * self.batch * n.numel,
                                     bytes=(k + 1) * self.value_bytes * self.batch * n.numel))
            else:
                t = sp.Integer(0)
            if n.cost is None or not req[n.name]:
                continue
            if _has_weights(n):
                gw = n.cost.grad_weight
                work.append(gw)
                if depth:
                    ends.append(t + gw.depth)
            if any(req[i] for i in n.inputs):
                gi = n.cost.grad_input
                work.append(gi)
                gin_done[n.name] = t + gi.depth if depth else t
                ends.append(gin_done[n.name])
        return sum_work(work).with_(depth=max_of(*ends) if depth else 0)

    def update(self, optimizer: str = "sgd") -> Cost:
        return optimizer_update(optimizer, self.params if self.params else 0, self.value_bytes).forward

    def training(self, optimizer: str = "sgd") -> Cost:
        """One training step: forward, backward, then the update (paper Alg. 2)."""
        return self.forward() + self.backward() + self.update(optimizer)

    def cost(self, pass_: str = "forward", optimizer: str = "sgd") -> Cost:
        if pass_ not in PASSES:
            raise ValueError(f"pass: unknown {pass_!r}; allowed: {', '.join(PASSES)}")
        if pass_ == "training":
            return self.training(optimizer)
        return self.forward() if pass_ == "forward" else self.backward()

    # -- the contract's accessors ----------------------------------------------------------------
    def forward_flop(self):
        return self.forward().flop

    def forward_macs(self):
        return self.forward().macs

    def work(self, pass_: str = "forward"):
        return self.cost(pass_).flop

    def depth(self, pass_: str = "forward"):
        return self.cost(pass_).depth

    def average_parallelism(self, pass_: str = "forward"):
        return self.cost(pass_).average_parallelism

    def subs(self, expr, **values):
        """Substitute ``batch=...`` (or any symbol by name) into an expression of this graph."""
        mapping = {}
        for k, v in values.items():
            if k == "batch":
                if self.batch.free_symbols:
                    mapping[next(iter(self.batch.free_symbols))] = v
            else:
                mapping[sp.Symbol(k)] = v
        return sp.sympify(expr).subs(mapping)

    def table(self) -> pd.DataFrame:
        """One row per layer: shape, parameters, forward FLOP and MACs, depth, bytes, stored activations,
        backward FLOP. Numbers when the batch is a number, expressions otherwise."""
        import pandas as pd  # heavy (0.4 s): loaded when a table is built
        rows = []
        for n in self.layers():
            c = n.cost
            rows.append({"name": n.name, "op": n.kind, "inputs": ",".join(n.inputs),
                         "shape": "x".join(map(str, n.shape)), "params": num(c.params),
                         "forward_flop": num(c.forward.flop), "forward_macs": num(c.forward.macs),
                         "depth": num(c.forward.depth), "bytes": num(c.forward.bytes),
                         "act_bytes": num(c.forward.act_bytes), "backward_flop": num(c.backward.flop)})
        return pd.DataFrame(rows)

    def __repr__(self) -> str:
        return f"Graph({self.name!r}, {len(self.layers())} layers, batch={self.batch})"

