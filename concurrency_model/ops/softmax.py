"""Softmax over the last dimension (rows of k values).

Forward per row: max (k-1), x - max (k), exp (k), sum (k-1), divide (k): ``W = 5k - 2``,
``D = 2 ceil(log2 k) + 3`` (two reductions, paper §2.5). Backward ``∇x = y ⊙ (∇y - Σ ∇y ⊙ y)``:
``4k - 1`` per row, ``D = ceil(log2 k) + 3``. It stores its output.
"""
from __future__ import annotations

from ..cost import Cost, OpCost, clog2
from . import checks


def softmax(rows, k, value_bytes=4) -> OpCost:
    """Softmax of ``rows`` rows of length ``k``.

    >>> sm = softmax(2, 4)
    >>> sm.forward.flop, sm.forward.depth, sm.grad_input.flop
    (36, 7, 30)
    """
    rows, k = checks.size("rows", rows), checks.size("k", k)
    vb = checks.value_bytes(value_bytes)
    el = rows * k
    fwd = Cost(flop=rows * (5 * k - 2), depth=2 * clog2(k) + 3, bytes=2 * vb * el, act_bytes=vb * el)
    gin = Cost(flop=rows * (4 * k - 1), depth=clog2(k) + 3, bytes=3 * vb * el)
    return OpCost("softmax", fwd, gin, source="softmax with max-subtraction (standard); reductions per §2.5")
