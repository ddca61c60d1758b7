"""Collectives of one communicator placed on a cluster's tiers (:mod:`concurrency_model.cluster`).

* inside one node (``intra``) or one rank per node (``inter``): the flat algorithms with that tier's
  alpha and beta;
* spread over several nodes with several ranks each (``mixed``): a flat algorithm runs over a ring or
  tree that crosses the network, so it is bound by the slower tier (alpha and beta the larger of the
  two); ``hierarchical`` (allreduce, allgather, reduce_scatter: NCCL 2.4's 2D ring, training-formulas
  §6.6) works inside the node on the fast tier and across nodes on ``n / ranks_per_node`` bytes, with
  its phases pipelined over chunks as NCCL runs them (:func:`.hierarchical.hierarchical_pipelined`).

``auto`` takes the cheapest of them. Reductions inside NCCL overlap with the transfers, so ``gamma``
defaults to 0 here.
"""
from __future__ import annotations

from ..cluster import Placement, place
from .collectives import ALGORITHMS, collective_time
from .hierarchical import PHASES as HIERARCHICAL
from .hierarchical import hierarchical_pipelined


def algorithms(op: str) -> tuple[str, ...]:
    """Algorithm names the CLI accepts for ``op`` on a cluster (``auto`` and ``hierarchical`` included)."""
    return ("auto", *ALGORITHMS[op], *(("hierarchical",) if op in HIERARCHICAL else ()))


def _flat(placement: Placement) -> tuple:
    if placement.kind == "intra":
        return placement.intra
    if placement.kind == "inter":
        return placement.inter
    return max(placement.intra[0], placement.inter[0]), max(placement.intra[1], placement.inter[1])


def time_on(op: str, algorithm: str, n, placement: Placement, gamma=0) -> float:
    """Seconds of one algorithm on a placement."""
    if algorithm == "hierarchical":
        if op not in HIERARCHICAL:
            raise ValueError(f"algorithm: hierarchical applies to {', '.join(HIERARCHICAL)}, not {op}")
        return float(hierarchical_pipelined(op, n, placement.ranks_per_node, placement.nodes, *placement.intra,
                                            *placement.inter, gamma))
    alpha, beta = _flat(placement)
    return float(collective_time(op, algorithm, n, placement.ranks, alpha, beta, gamma))


def collective_on_cluster(op: str, n, ranks: int, cluster, ranks_per_node: int | None = None,
                          algorithm: str = "auto", gamma=0, groups_sharing: int = 1) -> tuple[str, float, Placement]:
    """``(algorithm, seconds, placement)`` of a collective of ``ranks`` ranks on ``cluster``.

    >>> alg, t, p = collective_on_cluster("allreduce", 2**30, 16, "dgx-a100")
    >>> alg, p.kind
    ('hierarchical', 'mixed')
    """
    if op not in ALGORITHMS:
        raise ValueError(f"op: unknown {op!r}; allowed: {', '.join(ALGORITHMS)}")
    allowed = algorithms(op)
    if algorithm not in allowed:
        raise ValueError(f"algorithm: {algorithm!r} does not apply to {op}; allowed: {', '.join(allowed)}")
    p = place(cluster, ranks, ranks_per_node, groups_sharing)
    if algorithm != "auto":
        return algorithm, time_on(op, algorithm, n, p, gamma), p
    best = min(((time_on(op, a, n, p, gamma), a) for a in allowed[1:]), key=lambda x: x[0])
    return best[1], best[0], p
