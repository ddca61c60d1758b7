"""Embedding lookup: a gather of rows of a (vocab x dim) table; no arithmetic in the forward pass.

Backward: ∇table is a scatter-add of ``tokens`` rows; in the worst case all tokens hit the same row, a
reduction of ``tokens`` values with depth ``ceil(log2 tokens)`` (paper §2.5).
"""
from __future__ import annotations

from ..cost import Cost, OpCost, clog2
from . import checks

INDEX_BYTES = 8  # int64 token ids


def embedding(tokens, vocab, dim, value_bytes=4) -> OpCost:
    """Look up ``tokens`` rows of ``dim`` values in a ``vocab x dim`` table.

    >>> e = embedding(4, 10, 3)
    >>> e.params, e.forward.flop, e.grad_weight.flop, e.grad_weight.depth
    (30, 0, 12, 2)
    """
    tokens, vocab, dim = checks.size("tokens", tokens), checks.size("vocab", vocab), checks.size("dim", dim)
    vb = checks.value_bytes(value_bytes)
    fwd = Cost(bytes=2 * vb * tokens * dim + INDEX_BYTES * tokens, params=vocab * dim,
               act_bytes=INDEX_BYTES * tokens)
    gw = Cost(flop=tokens * dim, depth=clog2(tokens), bytes=3 * vb * tokens * dim + INDEX_BYTES * tokens)
    return OpCost("embedding", fwd, grad_weight=gw, source="gather / scatter-add")
