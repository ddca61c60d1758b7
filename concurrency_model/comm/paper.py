"""The allreduce cost forms of Ben-Nun & Hoefler (2019), §2.5 — **the paper's**, by their names.

Source: ``reference/paper-models.md`` §1.2 and §2.1.  The paper uses a LogP model simplified to
alpha-beta (o = g = 0): L = alpha (latency), G = beta (s/byte), P ranks, m values of gamma bytes each,
so ``gamma * m`` is the message size in bytes.  The paper's gamma is bytes per value (``value_bytes`` in
this toolkit), **not** a reduction cost; the paper ignores reduction compute.  The functions below take
the message size directly, ``n = gamma * m`` bytes (see :func:`message_bytes`), with ``alpha = L`` and
``beta = G``.  Logarithms are the real ``log2 P`` as printed (exact for P a power of two).

Confidence tags from paper-models.md (only [S1], [M+] and [M] items are presented as the paper's):

==========  ===========================================  ======  =============================
name        formula                                      tag     general algorithm (gamma = 0)
==========  ===========================================  ======  =============================
T_tree      2 log2(P) (L + gamma m G)                    [S1]    allreduce "tree"
T_bfly      log2(P) (L + gamma m G)                      [M]     allreduce "recursive_doubling"
T_pipe      2 (P - 1) (L + gamma (m/P) G)                [M]     allreduce "ring"
T_rabe      2 L log2(P) + 2 gamma m G (P - 1)/P          [M]     allreduce "rabenseifner"
T_lower     L log2(P) + 2 gamma m G (P - 1)/P            [S1]*   lower bound (Chan et al.)
==========  ===========================================  ======  =============================

\\* [S1] transcribes the bound **without** the factor 2 (``L log2 P + gamma m G (P-1)/P``); the 2 is
what Chan et al. 2007 give and is consistent with "Rabenseifner achieves the bound".  ``T_lower`` takes
``factor_two`` (default True, Chan's form); ``factor_two=False`` gives the transcription verbatim.
The partial bounds ``T_r >= L log2 P`` [M+] and ``T_r >= gamma m G`` [M] are ``T_lower_latency`` and
``T_lower_bandwidth``.
"""
from __future__ import annotations

import sympy as sp

from .checks import check_n, check_rate, check_ranks

__all__ = ["PAPER_FORMS", "message_bytes", "T_tree", "T_bfly", "T_pipe", "T_rabe", "T_lower",
           "T_lower_latency", "T_lower_bandwidth"]

#: name -> (general allreduce algorithm it equals at gamma = 0 and P a power of two, confidence tag)
PAPER_FORMS: dict[str, tuple[str, str]] = {
    "T_tree": ("tree", "[S1]"),
    "T_bfly": ("recursive_doubling", "[M]"),
    "T_pipe": ("ring", "[M]"),
    "T_rabe": ("rabenseifner", "[M]"),
}


def message_bytes(m, value_bytes) -> sp.Expr:
    """The paper's ``gamma * m``: ``m`` values of ``value_bytes`` bytes each (§2.5).

    >>> message_bytes(25_000_000, 4)
    100000000
    """
    return check_n(m, "m") * check_n(value_bytes, "value_bytes")


def _args(n, P, alpha, beta):
    return check_n(n), check_ranks(P), check_rate("alpha", alpha), check_rate("beta", beta)


def _lg(P):
    return sp.log(P, 2)


def T_tree(n, P, alpha, beta) -> sp.Expr:
    """Reduce to a root, then broadcast back: ``2 log2(P) (L + gamma m G)`` [S1], paper §2.5.

    >>> T_tree(100, 8, 1, 1)
    606
    """
    n, P, a, b = _args(n, P, alpha, beta)
    return 2 * _lg(P) * (a + n * b)


def T_bfly(n, P, alpha, beta) -> sp.Expr:
    """Butterfly (recursive doubling): ``log2(P) (L + gamma m G)`` [M], paper §2.5.

    >>> T_bfly(100, 8, 1, 1)
    303
    """
    n, P, a, b = _args(n, P, alpha, beta)
    return _lg(P) * (a + n * b)


def T_pipe(n, P, alpha, beta) -> sp.Expr:
    """Pipelined ring: ``2 (P - 1) (L + gamma (m/P) G)`` [M], paper §2.5.

    >>> T_pipe(100, 4, 1, 1)
    156
    """
    n, P, a, b = _args(n, P, alpha, beta)
    return 2 * (P - 1) * (a + n / P * b)


def T_rabe(n, P, alpha, beta) -> sp.Expr:
    """Rabenseifner (reduce-scatter then allgather): ``2 L log2(P) + 2 gamma m G (P-1)/P`` [M], paper §2.5.

    >>> T_rabe(100, 4, 1, 1)
    154
    """
    n, P, a, b = _args(n, P, alpha, beta)
    return 2 * a * _lg(P) + 2 * n * b * (P - 1) / P


def T_lower(n, P, alpha, beta, factor_two: bool = True) -> sp.Expr:
    """Allreduce lower bound ``L log2(P) + 2 gamma m G (P-1)/P`` (``factor_two=False``: without the 2, as
    transcribed in [S1]); paper §2.5 citing Chan et al. 2007.

    >>> T_lower(100, 4, 1, 1), T_lower(100, 4, 1, 1, factor_two=False)
    (152, 77)
    """
    n, P, a, b = _args(n, P, alpha, beta)
    return a * _lg(P) + (2 if factor_two else 1) * n * b * (P - 1) / P


def T_lower_latency(P, alpha) -> sp.Expr:
    """Latency bound (depth of the reduction DAG): ``T_r >= L log2(P)`` [M+], paper §2.5."""
    return check_rate("alpha", alpha) * _lg(check_ranks(P))


def T_lower_bandwidth(n, beta) -> sp.Expr:
    """Bandwidth bound (each element sent at least once): ``T_r >= gamma m G`` [M], paper §2.5."""
    return check_n(n) * check_rate("beta", beta)
