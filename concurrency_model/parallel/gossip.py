"""Gossip (decentralised averaging with neighbours, paper §7.2): topologies, mixing matrices, spectral
gaps, consensus rounds and the alpha-beta time of a round [D]. :mod:`.distribution` re-exports all of it
and prices gossip on a cluster's links (:func:`~.distribution.gossip_on_cluster`).
"""
from __future__ import annotations

import numpy as np
import sympy as sp

from ..choices import TOPOLOGIES
from ..comm.checks import as_value, check_n, check_name, check_ranks, check_rate, is_num

__all__ = ["TOPOLOGIES", "LATENCY", "gossip_degree", "gossip_offsets", "mixing_matrix", "spectral_gap",
           "consensus_rounds", "gossip_round_time", "gossip_time"]

LATENCY = ("overlap", "serial")  # latencies of messages crossing one link together: overlapped or one each


def gossip_offsets(topology: str, P: int) -> list[int]:
    """Out-neighbours of worker ``i`` are ``(i + o) mod P`` for these offsets ``o``.

    ``ring``: ``+-1`` (D-PSGD, Lian et al., NeurIPS 2017); ``exponential``: ``2**j`` for ``j <
    ceil(log2 P)`` (the static exponential graph of Assran et al., "Stochastic Gradient Push", ICML 2019,
    and Ying et al., NeurIPS 2021); ``complete``: every other worker.

    >>> gossip_offsets("exponential", 16), gossip_offsets("ring", 2)
    ([1, 2, 4, 8], [1])
    """
    check_name("topology", topology, TOPOLOGIES)
    P = int(check_ranks(P))
    if topology == "ring":
        offs = {1 % P, -1 % P}
    elif topology == "exponential":
        offs = {2**j % P for j in range((P - 1).bit_length())}
    else:
        offs = set(range(P))
    return sorted(offs - {0})


def gossip_degree(topology: str, P):
    """Messages a worker sends per gossip round: ring ``min(2, P - 1)``, exponential ``ceil(log2 P)``,
    complete ``P - 1``.

    >>> from concurrency_model.symbols import P
    >>> gossip_degree("exponential", P), gossip_degree("ring", 8)
    (ceiling(log(P)/log(2)), 2)
    """
    check_name("topology", topology, TOPOLOGIES)
    P = check_ranks(P)
    if is_num(P):
        return len(gossip_offsets(topology, int(P)))
    return {"ring": sp.Min(P - 1, 2), "exponential": sp.ceiling(sp.log(P, 2)), "complete": P - 1}[topology]


def mixing_matrix(topology: str, P: int) -> np.ndarray:
    """Doubly stochastic gossip matrix ``W``: each worker averages itself and its in-neighbours with equal
    weights ``1 / (degree + 1)`` (circulant, so ``W`` is normal).

    >>> mixing_matrix("ring", 3)[0].round(3).tolist()
    [0.333, 0.333, 0.333]
    """
    offs = gossip_offsets(topology, P)
    W = np.eye(P)
    for o in offs:
        W += np.roll(np.eye(P), o, axis=1)
    return W / (len(offs) + 1)


def spectral_gap(topology: str, P: int) -> float:
    """``1 - rho``, ``rho = max_{j != 0} |lambda_j(W)|`` of :func:`mixing_matrix` (exact: the eigenvalues
    of a circulant are the DFT of its first row). Ring: ``rho = (1 + 2 cos(2 pi / P)) / 3`` for ``P >= 3``
    (a gap ``~ 4 pi^2 / (3 P^2)``); exponential graph at P a power of two: ``rho = 1 - 2/(1 + log2 P)``,
    as Ying et al. 2021 state it (both checked in the tests).

    >>> round(spectral_gap("exponential", 16), 6), spectral_gap("complete", 5)
    (0.4, 1.0)
    """
    P = int(check_ranks(P))
    if P == 1:
        return 1.0
    lam = np.fft.fft(mixing_matrix(topology, P)[0])
    return float(1 - min(1.0, np.abs(lam[1:]).max()))


def consensus_rounds(gap, eps=1e-3):
    """Gossip rounds until every worker is within ``eps`` (relative, 2-norm) of the average:
    ``ceil(ln(1/eps) / ln(1/(1 - gap)))``, at most ``ceil(ln(1/eps) / gap)``.

    From ``||x_t - mean|| <= rho^t ||x_0 - mean||`` for a doubly stochastic normal ``W`` with
    ``rho = 1 - gap`` (Xiao & Boyd, "Fast linear iterations for distributed averaging", Systems & Control
    Letters 53, 2004; Boyd, Ghosh, Prabhakar & Shah, "Randomized gossip algorithms", IEEE Trans. Inf.
    Theory 52(6), 2006). A gap of 1 (exact average in one round) gives 1.

    >>> consensus_rounds(spectral_gap("ring", 16)), consensus_rounds(spectral_gap("exponential", 16))
    (133, 14)
    """
    gap, eps = sp.sympify(gap), sp.sympify(eps)
    if is_num(gap) and not 0 < gap <= 1:
        raise ValueError(f"gap: must be in (0, 1], got {gap}")
    if is_num(eps) and not 0 < eps < 1:
        raise ValueError(f"eps: must be in (0, 1), got {eps}")
    if is_num(gap) and gap >= 1:
        return 1
    r = sp.ceiling(sp.log(1 / eps) / sp.log(1 / (1 - gap)))
    return int(r) if is_num(r) else r


def gossip_round_time(n, degree, alpha, beta, latency: str = "overlap"):
    """One gossip round: a worker sends its ``n``-byte model to ``degree`` neighbours and receives as many
    [D]: ``alpha + degree n beta`` (overlap) or ``degree (alpha + n beta)`` (serial).

    >>> gossip_round_time(1e6, 2, 1e-6, 1e-9)
    0.002001
    """
    n, k = check_n(n), sp.sympify(degree)
    if not isinstance(degree, (int, sp.Basic)) or isinstance(degree, bool) or (is_num(k) and k < 0):
        raise ValueError(f"degree: must be an integer >= 0, got {degree!r}")
    a, b = check_rate("alpha", alpha), check_rate("beta", beta)
    check_name("latency", latency, LATENCY)
    t = a * sp.Min(k, 1) + k * n * b if latency == "overlap" else k * (a + n * b)
    return as_value(t)


def gossip_time(n, P, alpha, beta, topology: str = "ring", rounds=1, latency: str = "overlap"):
    """``rounds`` gossip rounds on ``topology`` (D-PSGD and SGP do one per step; :func:`consensus_rounds`
    for an average within eps).

    >>> from concurrency_model.symbols import P, alpha, beta, n_bytes as n
    >>> gossip_time(n, 16, alpha, beta, "exponential")
    alpha + 4*beta*n
    """
    return as_value(sp.sympify(rounds) * gossip_round_time(n, gossip_degree(topology, P), alpha, beta, latency))
