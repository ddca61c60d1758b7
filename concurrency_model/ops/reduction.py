"""The reduction primitive (paper §2.5, Fig. 5): y = x_1 ⊕ ... ⊕ x_n with an associative ⊕.

Tree form (Fig. 5b): ``W = n - 1``, ``D = ceil(log2 n)``; linear chain (Fig. 5a): ``D = n - 1``.
Every summation inside the operator models is an instance of it.
"""
from __future__ import annotations

from ..cost import Cost, OpCost, clog2
from . import checks


def reduction(n, tree: bool = True, value_bytes=4) -> OpCost:
    """Reduce ``n`` values to one.

    >>> r = reduction(8)
    >>> r.forward.flop, r.forward.depth
    (7, 3)
    >>> reduction(8, tree=False).forward.depth
    7
    """
    n = checks.size("n", n)
    vb = checks.value_bytes(value_bytes)
    depth = clog2(n) if tree else n - 1
    fwd = Cost(flop=n - 1, depth=depth, bytes=vb * (n + 1))
    # the gradient of a sum broadcasts ∇y to every input: n copies, depth 1
    gin = Cost(flop=0, depth=1, bytes=vb * (n + 1))
    return OpCost("reduction" if tree else "reduction_chain", fwd, gin, source="paper §2.5, Fig. 5")
