"""Algorithm choice: ``auto`` (the cheapest applicable algorithm) and ``crossover`` (where two cost the same).

These are the discrete decisions of DESIGN.md "made numerically for the numbers at hand": ``auto`` needs
numbers and returns the chosen name together with its time, so the expression records the choice.
The costs are those of :mod:`.collectives` (Thakur, Rabenseifner & Gropp 2005 and the other sources
cited there); MPICH makes the same kind of size- and P-dependent switch (Thakur et al. 2005 §4).
"""
from __future__ import annotations

import math

import numpy as np
import sympy as sp

from .checks import check_n, check_name, check_rate, check_ranks, is_num
from .collectives import ALGORITHMS, OPS, check_op_algorithm, collective_time
from ..symbols import n_bytes

__all__ = ["auto", "crossover"]


def _number(field: str, x) -> sp.Expr:
    if not is_num(x):
        raise ValueError(f"{field}: auto needs a number, got the expression {x}")
    return x


def auto(op: str, n, P, alpha, beta, gamma=0) -> tuple[str, sp.Expr]:
    """The cheapest algorithm of ``ALGORITHMS[op]`` for these numbers, and its time.

    Ties go to the algorithm listed first in :data:`ALGORITHMS`.

    >>> auto("allreduce", 8, 64, 1e-6, 1e-10)
    ('recursive_doubling', 6.00480000000000e-6)
    >>> auto("allreduce", 10**9, 64, 1e-6, 1e-10)[0]
    'rabenseifner'
    """
    check_name("op", op, OPS)
    n = _number("n", check_n(n))
    P = _number("P", check_ranks(P))
    a = _number("alpha", check_rate("alpha", alpha))
    b = _number("beta", check_rate("beta", beta))
    g = _number("gamma", check_rate("gamma", gamma))
    best = None
    for alg in ALGORITHMS[op]:
        t = collective_time(op, alg, n, P, a, b, g)
        if best is None or float(t) < float(best[1]):
            best = (alg, t)
    return best


def _numeric_roots(f, lo: float = 0.0, hi: float = 2.0 ** 60) -> list[float]:
    """Sign changes of ``f`` on a log grid of n in [lo, hi], refined by bisection (brentq)."""
    from scipy.optimize import brentq

    grid = np.concatenate([[lo], np.logspace(-3, math.log10(hi), 4000)])
    vals = np.array([f(x) for x in grid], dtype=float)
    roots, last = [], None  # index of the last point with a nonzero difference
    for i in range(len(grid)):
        if vals[i] == 0:
            continue  # a touch is not a crossing: only a change of sign between nonzero points counts
        if last is not None and vals[last] * vals[i] < 0:
            roots.append(float(grid[last + 1]) if last + 1 < i else
                         brentq(f, grid[last], grid[i], xtol=1e-12, rtol=1e-12))
        last = i
    return roots


def crossover(op: str, alg_a: str, alg_b: str, P, alpha, beta, gamma=0):
    """Message size ``n`` (bytes) at which ``alg_a`` and ``alg_b`` cost the same, or ``None``.

    Solves ``T_a(n) = T_b(n)`` for ``n >= 0`` with ``sympy.solve`` (both sides are linear in ``n`` for
    every algorithm but the pipelined chain).  When ``solve`` cannot handle the expressions (the chain's
    optimal segment count contains ``floor``/``Min``) and the inputs are numbers, the smallest root is
    found numerically (sign changes on a log grid of n up to 2**60 bytes, then Brent's method).
    A crossing is a size ``n > 0`` where the cheaper of the two changes; touching at ``n = 0`` (both pure
    bandwidth terms) is not one. Returns ``None`` if they never cross or coincide for every ``n``; with
    several crossings, the smallest.

    >>> crossover("allreduce", "tree", "ring", 64, 1e-6, 1e-9)
    11364.4859813084
    >>> crossover("allreduce", "ring", "rabenseifner", 64, 1e-6, 1e-9) is None
    True
    """
    check_op_algorithm(op, alg_a, "alg_a")
    check_op_algorithm(op, alg_b, "alg_b")
    P = check_ranks(P)
    a, b, g = check_rate("alpha", alpha), check_rate("beta", beta), check_rate("gamma", gamma)
    n = n_bytes
    diff = collective_time(op, alg_a, n, P, a, b, g) - collective_time(op, alg_b, n, P, a, b, g)
    if sp.simplify(diff).is_zero:
        return None
    chain = "pipelined_chain" in (alg_a, alg_b)
    if not chain:
        try:
            sols = sp.solve(sp.Eq(diff, 0), n)
        except NotImplementedError:
            sols = None
        if sols is not None:
            keep = [s for s in sols if s.is_real is not False and s.is_positive is not False]
            numeric = [s for s in keep if s.is_number]
            if numeric:
                return min(numeric, key=float)
            return keep[0] if keep else None
    for field, x in (("P", P), ("alpha", a), ("beta", b), ("gamma", g)):
        if not is_num(x):
            raise ValueError(f"{field}: crossover with pipelined_chain needs a number, got {x}")
    f = sp.lambdify(n, diff, modules=["numpy", {"floor": np.floor}])
    roots = _numeric_roots(lambda x: float(f(x)))
    return sp.Float(min(roots)) if roots else None
