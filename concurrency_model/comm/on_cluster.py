"""Collectives of one communicator placed on a cluster's tiers (:mod:`concurrency_model.hardware.clusters`).

* inside one node (``intra``) or one rank per node (``inter``): the flat algorithms with that tier's
  alpha and beta;
* spread over several nodes with several ranks each (``mixed``): a flat algorithm runs over a ring or
  tree that crosses the network, so it is bound by the slower tier (alpha and beta the larger of the
  two); ``hierarchical`` (allreduce, allgather, reduce_scatter: NCCL 2.4's 2D ring, training-formulas
  §6.6) works inside the node on the fast tier and across nodes on ``n / ranks_per_node`` bytes, with
  its phases pipelined over chunks as NCCL runs them (:func:`.hierarchical.hierarchical_pipelined`).

``auto`` takes the cheapest of them, except on a cluster of NVIDIA GPUs (a device with a CUDA compute
capability), where ``auto`` is what NCCL runs at NCCL's cost (:mod:`.nccl`: its tuning model's algorithm
and protocol, named ``nccl:<algorithm>/<protocol>``) for broadcast, reduce, allreduce, allgather and
reduce_scatter; alltoall and p2p (grouped sends in NCCL, outside its tuning model) keep the cheapest
alpha-beta algorithm. An explicit ``algorithm`` always prices the alpha-beta algorithm of that name, and
CPU clusters keep it throughout. Reductions inside NCCL overlap with the transfers, so ``gamma``
defaults to 0 here.

An oversubscribed fabric (the inter tier's ``oversubscription`` r: the nodes inject r times what its
bisection carries, e.g. a 2:1 fat tree) slows the algorithms whose inter-node steps have every node
exchange with far nodes at once: all-to-all (pairwise, Bruck), recursive doubling and halving (allreduce,
allgather, reduce-scatter, Rabenseifner's reduce and allreduce), Bruck's allgather and the pairwise
reduce-scatter: their inter-node seconds per byte are r times longer whenever they span nodes (a bound:
their nearest rounds may stay under one leaf switch). With pods (the tier's ``pod_nodes``: full bisection
inside a pod), a group inside one pod is not slowed, and one across pods by r times the share of a node's
peers outside its pod (:meth:`~concurrency_model.hardware.clusters.Tier.core_factor`). Rings, the two-level ring, trees and pipeline sends
pass traffic between neighbours, placed so that little of it crosses the core, and keep the NIC rate [D].
"""
from __future__ import annotations

from ..hardware.clusters import Placement, place
from . import nccl
from .collectives import ALGORITHMS, collective_time
from .hierarchical import PHASES as HIERARCHICAL, hierarchical_pipelined


def algorithms(op: str) -> tuple[str, ...]:
    """Algorithm names the CLI accepts for ``op`` on a cluster (``auto`` and ``hierarchical`` included)."""
    return ("auto", *ALGORITHMS[op], *(("hierarchical",) if op in HIERARCHICAL else ()))


# (op, algorithm) pairs whose inter-node steps load the fabric's bisection (module doc)
CORE_BOUND = {("alltoall", "pairwise"), ("alltoall", "bruck"), ("allreduce", "recursive_doubling"),
              ("allreduce", "rabenseifner"), ("allgather", "recursive_doubling"), ("allgather", "bruck"),
              ("reduce_scatter", "recursive_doubling"), ("reduce_scatter", "pairwise"), ("reduce", "rabenseifner")}


def inter_beta(placement: Placement, op: str | None = None, algorithm: str | None = None) -> float:
    """Seconds per byte of the inter tier for ``op`` run with ``algorithm`` (the tier's oversubscription
    applied to :data:`CORE_BOUND` algorithms across nodes)."""
    r = placement.cluster.inter.core_factor(placement.nodes) if (op, algorithm) in CORE_BOUND else 1.0
    return placement.inter[1] * r


def flat_alpha_beta(placement: Placement, op: str | None = None, algorithm: str | None = None) -> tuple:
    if placement.kind == "intra":
        return placement.intra
    beta = inter_beta(placement, op, algorithm)
    if placement.kind == "inter":
        return placement.inter[0], beta
    return max(placement.intra[0], placement.inter[0]), max(placement.intra[1], beta)


def time_on(op: str, algorithm: str, n, placement: Placement, gamma=0) -> float:
    """Seconds of one algorithm on a placement."""
    if algorithm == "hierarchical":
        if op not in HIERARCHICAL:
            raise ValueError(f"algorithm: hierarchical applies to {', '.join(HIERARCHICAL)}, not {op}")
        return float(hierarchical_pipelined(op, n, placement.ranks_per_node, placement.nodes, *placement.intra,
                                            *placement.inter, gamma))
    alpha, beta = flat_alpha_beta(placement, op, algorithm)
    return float(collective_time(op, algorithm, n, placement.ranks, alpha, beta, gamma))


def nccl_layout(placement: Placement, nccl_env: dict | None = None) -> nccl.Layout | None:
    """What NCCL's tuning model sees of a placement (:class:`.nccl.Layout`), or None where NCCL does not run
    (no CUDA compute capability on the cluster's device: CPUs, other vendors' GPUs). ``nccl_env``: the run's
    ``NCCL_ALGO`` / ``NCCL_PROTO`` / ``NCCL_NVLS_ENABLE`` / ``NCCL_IB_QPS_PER_CONNECTION`` /
    ``NCCL_IB_SPLIT_DATA_ON_QPS`` (:func:`.nccl.env_settings`).

    >>> lay = nccl_layout(place("dgx-a100", 16))
    >>> lay.cc, lay.nodes, lay.nics, lay.amd_host, lay.nvls
    (80, 2, 8.0, True, False)
    """
    c = placement.cluster
    cc = int(round(float(c.device.compute_capability) * 10))
    if c.device.kind != "gpu" or cc <= 0:
        return None
    nvlink = c.intra.kind in ("nvlink", "nvswitch")
    env = nccl.env_settings(nccl_env)
    # NICs per rank: the placement's share, which stops at one; a node with more NICs than GPUs (OCI
    # BM.GPU4.8: 16 ports for 8 GPUs) gives each rank its NICs, as NCCL's search finds a channel per NIC
    per_rank = placement.nic_share if placement.nic_share < 1 else max(1.0, c.nics_per_node / c.gpus_per_node)
    nvls = c.intra.kind == "nvswitch" and cc >= 90 and env.pop("nvls", True)
    return nccl.Layout(ranks=placement.ranks, nodes=placement.nodes, cc=cc, nvlink=nvlink,
                       nvls=nvls, intra_bw=float(placement.intra_bw),
                       nic_bw=float(c.inter.effective_bw), nics=placement.ranks_per_node * per_rank,
                       amd_host=c.host_cpu == "amd", launch_s=float(c.device.launch_overhead), **env)


def nccl_on(op: str, n, placement: Placement, nccl_version: str | None = None,
            nccl_env: dict | None = None) -> nccl.Choice | None:
    """The (algorithm, protocol) NCCL runs for ``op`` on ``placement`` and its cost (:func:`.nccl.nccl_choice`),
    or None where the NCCL layer does not apply (not an NVIDIA GPU cluster, one rank, alltoall or p2p)."""
    lay = nccl_layout(placement, nccl_env)
    if lay is None or op not in nccl.OPS or placement.ranks < 2:
        return None
    return nccl.nccl_choice(op, float(n), lay, nccl_version or nccl.DEFAULT_VERSION)


def collective_on_cluster(op: str, n, ranks: int, cluster, ranks_per_node: int | None = None,
                          algorithm: str = "auto", gamma=0, groups_sharing: int = 1,
                          nccl_version: str | None = None,
                          nccl_env: dict | None = None) -> tuple[str, float, Placement]:
    """``(algorithm, seconds, placement)`` of a collective of ``ranks`` ranks on ``cluster``.

    ``auto`` on NVIDIA GPUs: NCCL's choice and cost (module doc; ``nccl_version`` one of
    :data:`.nccl.VERSIONS`, default the newest; ``nccl_env`` the run's NCCL variables, :data:`.nccl.ENV_VARS`,
    :func:`.nccl.env_settings`), named ``nccl:<algorithm>/<protocol>``
    (:func:`.nccl.split_name`); any other ``algorithm``: that alpha-beta algorithm.

    >>> alg, t, p = collective_on_cluster("allreduce", 2**30, 16, "dgx-a100")
    >>> alg, p.kind
    ('nccl:tree/Simple', 'mixed')
    >>> collective_on_cluster("allreduce", 2**30, 16, "dgx-a100", algorithm="hierarchical")[0]
    'hierarchical'
    """
    if op not in ALGORITHMS:
        raise ValueError(f"op: unknown {op!r}; allowed: {', '.join(ALGORITHMS)}")
    allowed = algorithms(op)
    if algorithm not in allowed:
        raise ValueError(f"algorithm: {algorithm!r} does not apply to {op}; allowed: {', '.join(allowed)}")
    p = place(cluster, ranks, ranks_per_node, groups_sharing)
    if algorithm == "auto":
        c = nccl_on(op, n, p, nccl_version, nccl_env)
        if c is not None:
            return c.name, c.time_s, p
    if algorithm != "auto":
        return algorithm, time_on(op, algorithm, n, p, gamma), p
    best = min(((time_on(op, a, n, p, gamma), a) for a in allowed[1:]), key=lambda x: x[0])
    return best[1], best[0], p
