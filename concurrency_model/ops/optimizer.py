"""Optimizer updates per parameter (paper §2.2, Table 3 update rules).

Operations per parameter, each elementary operation once:

* ``sgd``: ``w -= lr * g`` -> 2 ops, depth 2; reads w, g, writes w.
* ``momentum``: ``v = mu v + g``; ``w -= lr v`` -> 4 ops, depth 4; reads w, g, v, writes w, v.
* ``nesterov`` (Table 3's look-ahead rule in the form libraries run it, Sutskever et al. 2013: the gradient
  at ``w - mu v`` folded into the update): ``v = mu v + g``; ``w -= lr (g + mu v)`` -> 6 ops, depth 6;
  reads w, g, v, writes w, v.
* ``adagrad`` (Table 3; Duchi et al. 2011): ``A += g²`` (2), ``w -= lr g / sqrt(A + eps)`` (+ eps, sqrt,
  divide, times lr, subtract: 5) -> 7 ops, depth 7; reads w, g, A, writes w, A.
* ``rmsprop`` (Table 3; Tieleman & Hinton 2012): ``A = b A + (1-b) g²`` (4), then as adagrad (5) -> 9 ops,
  depth 8 (g² -> (1-b)g² -> + -> + eps -> sqrt -> divide -> * lr -> subtract); reads w, g, A, writes w, A.
* ``adam`` (Kingma & Ba 2015): ``m = b1 m + (1-b1) g`` (3), ``v = b2 v + (1-b2) g²`` (4), bias corrections
  (2), sqrt, + eps, divide, times lr, subtract (5) -> 14 ops; the longest chain
  g² -> (1-b2)g² -> + -> /(1-b2^t) -> sqrt -> + eps -> divide -> * lr -> subtract has depth 9;
  reads w, g, m, v, writes w, m, v.
* ``adamw`` (Loshchilov & Hutter 2019): adam plus decoupled weight decay ``w -= lr wd w`` (2 ops).
* ``lamb`` (You et al. 2020, Algorithm 2, BERT's large-batch optimizer): adam's moments and bias
  corrections up to ``r = m / (sqrt(v) + eps)`` (12), ``u = r + wd w`` (2), the squares and sums of the
  layer norms ``||w||`` and ``||u||`` (4), ``w -= (lr phi(||w||) / ||u||) u`` with the ratio once per
  layer (2) -> 20 ops; depth 14 along the element's chain (divide at 7, + wd w, square, then after the
  norm reduction sqrt, divide, times lr, times u, subtract) plus the reduction tree, ``ceil(log2 params)``
  with the parameters taken as one layer (an upper bound for per-layer norms). The norm of
  ``u`` is needed before any weight changes, so the update takes two passes over the tensors [D]: read
  w, g, m, v and write m, v, u; read w, u and write w -> 10 tensors.
"""
from __future__ import annotations

from ..cost import Cost, OpCost, clog2
from . import checks

# ops per parameter, depth, tensors read + written per parameter
RULES = {"sgd": (2, 2, 3), "momentum": (4, 4, 5), "nesterov": (6, 6, 5), "adagrad": (7, 7, 5), "rmsprop": (9, 8, 5),
         "adam": (14, 9, 7), "adamw": (16, 9, 7), "lamb": (20, 14, 10)}


def optimizer_update(kind: str, params, value_bytes=4) -> OpCost:
    """The update of ``params`` parameters (the "update" of a training step).

    >>> u = optimizer_update("adam", 10)
    >>> u.forward.flop, u.forward.depth, u.forward.bytes
    (140, 9, 280)
    """
    kind = checks.choice("optimizer", kind, RULES)
    n = checks.size("params", params, 0)
    vb = checks.value_bytes(value_bytes)
    ops, depth, tensors = RULES[kind]
    if kind == "lamb" and n:
        depth += clog2(n)
    return OpCost(f"{kind}_update", Cost(flop=ops * n, depth=depth if n else 0, bytes=tensors * vb * n),
                  source="paper §2.2 Table 3 [M]; Kingma & Ba 2015; Loshchilov & Hutter 2019; You et al. 2020")
