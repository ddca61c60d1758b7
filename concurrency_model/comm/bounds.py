"""Lower bounds on collective time in the alpha-beta-gamma model: ``lower_bound``.

Chan, Heimlich, Purkayastha & van de Geijn, "Collective communication: theory, practice, and
experience", CCPE 19(13), 2007, §3 (transcribed in ``reference/paper-models.md`` §2.2, tagged [D]:
standard literature, **not the paper's**; the paper's own allreduce bound is ``paper.T_lower``).
Single-ported, fully connected network, ``n`` as in :mod:`.collectives`:

==============  ========================================================================
broadcast       ceil(lg P) alpha + n beta
reduce          ceil(lg P) alpha + n beta + (P-1)/P n gamma
allgather       ceil(lg P) alpha + (P-1)/P n beta
reduce_scatter  ceil(lg P) alpha + (P-1)/P n (beta + gamma)
allreduce       ceil(lg P) alpha + 2 (P-1)/P n beta + (P-1)/P n gamma
alltoall        ceil(lg P) alpha + (P-1)/P n beta     [D] not in Chan et al.: every rank must receive
                the (P-1)/P n bytes addressed to it by others, and data of every rank must reach every
                rank, which takes ceil(lg P) rounds when the number of informed ranks at most doubles
                per round (Bruck et al. 1997 give the same latency bound)
p2p             alpha + n beta
==============  ========================================================================

The latency term: information from every rank must reach some (or every) rank and the number of ranks
holding it at most doubles each step.  The bandwidth terms: every byte a rank needs from others crosses
its single input port; allreduce must both receive and send (P-1)/P n.  ``P = 1`` gives 0.
"""
from __future__ import annotations

import sympy as sp

from .checks import active, check_n, check_name, check_rate, check_ranks, clog2
from .collectives import OPS

__all__ = ["lower_bound"]


def lower_bound(op: str, n, P, alpha, beta, gamma=0) -> sp.Expr:
    """Chan et al. 2007 lower bound on the time of ``op`` (see the module table).

    >>> lower_bound("allreduce", 1000, 8, 1, 1)
    1753
    >>> lower_bound("broadcast", 1000, 1, 1, 1)
    0
    """
    check_name("op", op, OPS)
    n, P = check_n(n), check_ranks(P)
    a, b, g = check_rate("alpha", alpha), check_rate("beta", beta), check_rate("gamma", gamma)
    lat = clog2(P) * a
    f = (P - 1) / P
    if op == "broadcast":
        return lat + active(P) * n * b
    if op == "reduce":
        return lat + active(P) * n * b + f * n * g
    if op in ("allgather", "alltoall"):
        return lat + f * n * b
    if op == "reduce_scatter":
        return lat + f * n * (b + g)
    if op == "allreduce":
        return lat + 2 * f * n * b + f * n * g
    return active(P) * (a + n * b)  # p2p
