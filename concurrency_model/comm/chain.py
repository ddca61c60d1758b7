"""Pipelined chain (linear pipeline) collectives with k segments, and the optimal segment count k*.

The message of ``n`` bytes is cut into ``k`` segments of ``n/k`` bytes that stream down a chain of
``P`` ranks; the last segment leaves the first rank after ``k - 1`` steps and needs ``P - 1`` more, so
the chain takes ``P + k - 2`` steps of one segment each.

Broadcast   ``T(k) = (P + k - 2) (alpha + (n/k) beta)``
            Thakur, Rabenseifner & Gropp 2005 / paper-models.md §2.2 table ("pipelined chain, k segments").
Reduce      ``T(k) = (P + k - 2) (alpha + (n/k) (beta + gamma))``  [D] the same chain run towards the
            root, each rank combining its segment with the incoming one (gamma per byte).
Allreduce   ``T(k) = (P + k - 2) (2 alpha + (n/k) (2 beta + gamma))`` [D] chain reduce to the end of the
            chain followed by a chain broadcast back (no overlap of the two phases assumed).

All three have the form ``T(k) = (P + k - 2)(a + c n / k)`` with ``a = c_a alpha``, so

    T(k) = (P - 2) a + n c + k a + (P - 2) n c / k,     dT/dk = a - (P - 2) n c / k**2 = 0,

    k* = sqrt((P - 2) n c / a)                                   [D]

(``T`` is convex in ``k > 0``).  For the broadcast ``c/a = beta/alpha`` and for the allreduce at
gamma = 0 ``c/a = 2 beta / (2 alpha)``, both giving the classical ``k* = sqrt((P - 2) n beta / alpha)``
(e.g. Pjesivac-Grbovic et al., "Performance analysis of MPI collective operations", Cluster Computing
10(2), 2007, segmented chain broadcast; the minimum is ``T* = (sqrt((P-2) a) + sqrt(n c))**2``).
k must be an integer in ``[1, n]`` (at least one segment, at most one byte per segment): for numbers we
take whichever of ``floor(k*)`` / ``ceil(k*)`` (clipped to ``[1, max(1, floor(n))]``) is cheaper, which is
the integer optimum since T is convex; for symbols ``Max(1, Min(n, floor(k* + 1/2)))`` (k* rounded).
"""
from __future__ import annotations

import math

import sympy as sp

from .checks import active, is_num

CHAIN_OPS = ("broadcast", "reduce", "allreduce")


def _coefficients(op: str, beta, gamma):
    """(alpha multiplier c_a, per-byte cost c) of one chain step for ``op``."""
    if op == "broadcast":
        return 1, beta
    if op == "reduce":
        return 1, beta + gamma
    if op == "allreduce":
        return 2, 2 * beta + gamma
    raise ValueError(f"op: pipelined_chain applies to {', '.join(CHAIN_OPS)}, not {op!r}")


def chain_time(op: str, n, P, alpha, beta, gamma, k) -> sp.Expr:
    """``(P + k - 2)(c_a alpha + (n/k) c)`` for an already-validated input; 0 when ``P == 1``.

    >>> from sympy import symbols
    >>> a, b = symbols("alpha beta")
    >>> chain_time("broadcast", 8, sp.Integer(4), a, b, 0, 2)
    4*alpha + 16*beta
    """
    ca, c = _coefficients(op, beta, gamma)
    k = sp.sympify(k)
    P = sp.sympify(P)
    return active(P) * (P + k - 2) * (ca * alpha + (n / k) * c)


def optimal_segments(op: str, n, P, alpha, beta, gamma=0) -> sp.Expr:
    """Integer segment count minimising :func:`chain_time` (see the module docstring for k*).

    >>> optimal_segments("broadcast", 10**6, sp.Integer(10), 1e-5, 1e-9)
    28
    """
    ca, c = _coefficients(op, beta, gamma)
    n, P, alpha = sp.sympify(n), sp.sympify(P), sp.sympify(alpha)
    a = ca * alpha
    if all(is_num(x) for x in (n, P, a, sp.sympify(c))):
        kmax = max(1, math.floor(n))
        if P <= 2 or kmax == 1:
            return sp.Integer(1)
        af, cf = float(a), float(c)
        if af == 0 or cf == 0:
            return sp.Integer(kmax if cf > 0 else 1)
        kc = min(float(kmax), math.sqrt(float(P - 2) * float(n) * cf / af))  # inf (tiny alpha) -> kmax
        cands = {min(kmax, max(1, math.floor(kc))), min(kmax, max(1, math.ceil(kc)))}
        best = min(sorted(cands), key=lambda k: float(chain_time(op, n, P, alpha, beta, gamma, k)))
        return sp.Integer(best)
    kc = sp.sqrt(sp.Max(P - 2, 0) * n * c / a)
    return sp.Max(1, sp.Min(n, sp.floor(kc + sp.Rational(1, 2))))
