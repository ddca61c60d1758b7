"""LogGP point-to-point cost and its reduction to alpha-beta.

Alexandrov, Ionescu, Schauser & Scheiman, "LogGP: Incorporating Long Messages into the LogP Model",
SPAA 1995.  Parameters: L latency (s), o per-message CPU overhead at sender and at receiver (s), g gap
between consecutive message injections (s), G gap per byte of a long message (s/byte).

One message of ``n >= 1`` bytes:     ``T = L + 2 o + (n - 1) G``      (Alexandrov et al. 1995 §2)

The first byte's injection is covered by o and L, hence ``n - 1``.

**Mapping to alpha-beta** (DESIGN.md ``T = alpha + n beta``).  Equating the two for every n:

    alpha = L + 2 o - G,      beta = G           (exact; at o = g = 0: alpha = L - G)

Ben-Nun & Hoefler §2.5 simplify LogP with o = g = 0 and read ``L = alpha``, ``G = beta``
(paper-models.md §1.2, [S1]); that is ``L + n G``, one byte-time ``G`` more than LogGP's
``L + (n - 1) G`` — negligible (``G`` is ~0.04 ns at 25 GB/s) but not zero.  :func:`to_alpha_beta` gives
the exact mapping; ``paper=True`` gives the paper's reading.  ``g`` matters only when a rank sends
several messages back to back (:func:`loggp_messages`, :func:`loggp_ring_allreduce`).
"""
from __future__ import annotations

import sympy as sp

from .checks import active, check_n, check_rate, check_ranks

__all__ = ["loggp_p2p", "loggp_messages", "to_alpha_beta", "loggp_ring_allreduce"]


def _params(L, o, G, g=0):
    return (check_rate("L", L), check_rate("o", o), check_rate("G", G), check_rate("g", g))


def loggp_p2p(n, L, o, G) -> sp.Expr:
    """One message of ``n`` bytes: ``L + 2 o + (n - 1) G`` (Alexandrov et al. 1995).

    >>> loggp_p2p(1001, 5, 1, 0.5)
    507.000000000000
    """
    L, o, G, _ = _params(L, o, G)
    n = check_n(n)
    if n.is_number and n < 1:
        raise ValueError(f"n: a LogGP message has at least 1 byte, got {n}")
    return L + 2 * o + (n - 1) * G


def loggp_messages(k, n, L, o, G, g) -> sp.Expr:
    """``k`` back-to-back messages of ``n`` bytes from one sender to one receiver.

    [D] from the LogGP definitions: the sender starts a message no sooner than ``g`` after the previous
    one and not before it has injected it (``o + (n - 1) G``), so the last one starts after
    ``(k - 1) max(g, o + (n - 1) G)`` and then takes ``L + 2 o + (n - 1) G``.

    >>> loggp_messages(3, 1, 10, 1, 0, 4)
    20
    """
    L, o, G, g = _params(L, o, G, g)
    k = check_ranks(k, "k")
    n = check_n(n)
    return (k - 1) * sp.Max(g, o + (n - 1) * G) + L + 2 * o + (n - 1) * G


def to_alpha_beta(L, o, G, paper: bool = False) -> tuple[sp.Expr, sp.Expr]:
    """``(alpha, beta)`` with ``alpha + n beta == L + 2 o + (n - 1) G`` (``paper=True``: ``(L + 2o, G)``).

    >>> to_alpha_beta(5, 0, 0.5)
    (4.50000000000000, 0.500000000000000)
    """
    L, o, G, _ = _params(L, o, G)
    return (L + 2 * o, G) if paper else (L + 2 * o - G, G)


def loggp_ring_allreduce(n, P, L, o, G, g=0, gamma=0) -> sp.Expr:
    """Ring allreduce in LogGP, for illustration: ``2(P-1)`` dependent steps of ``n/P`` bytes each.

    [D] Each step is a LogGP message of ``n/P`` bytes on the critical path (send overhead, wire, receive
    overhead): ``L + 2 o + (n/P - 1) G``, and no shorter than the gap ``g`` between a rank's consecutive
    sends; the ``P - 1`` reduce-scatter steps add ``(n/P) gamma`` each:

        T = 2 (P - 1) max(g, L + 2 o + (n/P - 1) G) + (P - 1)/P n gamma

    At ``o = g = 0`` this is the alpha-beta ring ``2(P-1) alpha + 2 (P-1)/P n beta + (P-1)/P n gamma``
    with ``alpha = L - G``, ``beta = G`` (:func:`to_alpha_beta`).

    >>> loggp_ring_allreduce(400, 4, 10, 0, 1)
    654
    """
    L, o, G, g = _params(L, o, G, g)
    n, P, gm = check_n(n), check_ranks(P), check_rate("gamma", gamma)
    step = L + 2 * o + (n / P - 1) * G
    if not g.is_zero:
        step = sp.Max(g, step)
    return active(P) * (2 * (P - 1) * step + (P - 1) / P * n * gm)
