"""Communication *triples* ``(latency, intra-node busy seconds, inter-node busy seconds)``.

A collective's time at link-bandwidth scales ``s`` is ``latency + max(intra / s_intra, inter / s_inter)``:
exact for a flat algorithm on one tier and for NCCL's pipelined two-level collective
(:func:`~concurrency_model.comm.hierarchical.hierarchical_pipelined`, whose tiers work concurrently). The
algorithm is the one ``auto`` picks on the nominal cluster. On NVIDIA GPUs that is NCCL's choice
(:mod:`concurrency_model.comm.nccl`): its latency (launch included) goes into the latency slot and
``bytes / bandwidth`` onto the tier that bounds the bandwidth NCCL's model used (the NIC for channels at
the NIC's rate, else the intra-node links), so that the estimate and a sweep that rescales the links see
the time :func:`~concurrency_model.comm.on_cluster.collective_on_cluster` gives. :mod:`.features` and its
mixins keep every collective of a step in this form so that :mod:`concurrency_model.sweep` can rescale the links.
"""
from __future__ import annotations

import numpy as np

from ..comm.collectives import collective_time
from ..comm.hierarchical import hierarchical_pipelined
from ..comm.on_cluster import flat_alpha_beta, collective_on_cluster, inter_beta, nccl_on

ZERO_TRIPLE = (0.0, 0.0, 0.0)


def add_triples(a, b):
    """Two communication triples one after the other: latency, intra- and inter-node busy seconds add.

    >>> add_triples((1.0, 2.0, 0.0), (0.5, 0.0, 3.0))
    (1.5, 2.0, 3.0)
    """
    return tuple(x + y for x, y in zip(a, b))


def triple_seconds(tr, s_intra=1.0, s_inter=1.0):
    """Seconds of a communication triple at link-bandwidth scales (see the module)."""
    return tr[0] + np.maximum(tr[1] / s_intra, tr[2] / s_inter)


def collective_triple(op: str, nbytes: float, ranks: int, cluster, ranks_per_node: int, groups_sharing: int = 1):
    """``(latency, intra busy, inter busy)`` seconds of the collective ``auto`` picks on ``cluster``."""
    if ranks == 1 or nbytes == 0:
        return ZERO_TRIPLE
    alg, _, pl = collective_on_cluster(op, nbytes, ranks, cluster, ranks_per_node, groups_sharing=groups_sharing)
    if alg.startswith("nccl:"):
        c = nccl_on(op, nbytes, pl)
        busy = nbytes / c.bw_Bps
        fixed = c.time_s - busy  # the latency and a tree's pipeline fill (.nccl.tree_fill_s): the triple adds to time_s
        return (fixed, 0.0, busy) if c.bound == "inter" else (fixed, busy, 0.0)
    if alg == "hierarchical":
        g, n = pl.ranks_per_node, pl.nodes
        (ai, bi), (ae, be) = pl.intra, pl.inter
        return (float(hierarchical_pipelined(op, nbytes, g, n, ai, 0, ae, 0)),
                float(hierarchical_pipelined(op, nbytes, g, n, 0, bi, 0, 0)),
                float(hierarchical_pipelined(op, nbytes, g, n, 0, 0, 0, be)))
    alpha, beta = flat_alpha_beta(pl, op, alg)
    lat = float(collective_time(op, alg, nbytes, ranks, alpha, 0))
    busy = float(collective_time(op, alg, nbytes, ranks, 0, beta))
    on_inter = pl.kind == "inter" or (pl.kind == "mixed" and inter_beta(pl, op, alg) >= pl.intra[1])
    return (lat, 0.0, busy) if on_inter else (lat, busy, 0.0)
