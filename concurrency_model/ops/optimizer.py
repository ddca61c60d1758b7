"""Optimizer updates per parameter (paper §2.2, Table 3 update rules).

Operations per parameter, each elementary operation once:

* ``sgd``: ``w -= lr * g`` -> 2 ops, depth 2; reads w, g, writes w.
* ``momentum``: ``v = mu v + g``; ``w -= lr v`` -> 4 ops, depth 4; reads w, g, v, writes w, v.
* ``adam`` (Kingma & Ba 2015): ``m = b1 m + (1-b1) g`` (3), ``v = b2 v + (1-b2) g²`` (4), bias corrections
  (2), sqrt, + eps, divide, times lr, subtract (5) -> 14 ops; the longest chain
  g² -> (1-b2)g² -> + -> /(1-b2^t) -> sqrt -> + eps -> divide -> * lr -> subtract has depth 9;
  reads w, g, m, v, writes w, m, v.
* ``adamw`` (Loshchilov & Hutter 2019): adam plus decoupled weight decay ``w -= lr wd w`` (2 ops).
"""
from __future__ import annotations

from ..cost import Cost, OpCost
from . import _check

# ops per parameter, depth, tensors read + written per parameter
RULES = {"sgd": (2, 2, 3), "momentum": (4, 4, 5), "adam": (14, 9, 7), "adamw": (16, 9, 7)}


def optimizer_update(kind: str, params, value_bytes=4) -> OpCost:
    """The update of ``params`` parameters (the "update" of a training step).

    >>> u = optimizer_update("adam", 10)
    >>> u.forward.flop, u.forward.depth, u.forward.bytes
    (140, 9, 280)
    """
    kind = _check.choice("optimizer", kind, RULES)
    n = _check.size("params", params, 0)
    vb = _check.value_bytes(value_bytes)
    ops, depth, tensors = RULES[kind]
    return OpCost(f"{kind}_update", Cost(flop=ops * n, depth=depth if n else 0, bytes=tensors * vb * n),
                  source="paper §2.2 Table 3; Kingma & Ba 2015; Loshchilov & Hutter 2019")
