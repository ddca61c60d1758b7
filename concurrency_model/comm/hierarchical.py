"""Two-level (intra-node / inter-node) collectives: ``hierarchical_allreduce``, ``..._allgather``,
``..._reduce_scatter``.

Source: NVIDIA blog "Massively Scale Your Deep Learning Training with NCCL 2.4" (S. Jeaugey, 2019-02-04),
quoted in ``reference/training-formulas.md`` §6.6: "The hierarchical ring is a 2D ring ... which performs
a reduce-scatter operation inside the node, then multiple all-reduce operations between nodes, then an
all-gather operation inside the node again."  With ``g`` ranks per node and ``N`` nodes, the ``g``
inter-node allreduces (one per local rank, each of ``n/g`` bytes) run in parallel on separate NIC shares,
so the time is the sum of the three phases [D]:

    T_AR = RS_intra(n, g) + AR_inter(n/g, N) + AG_intra(n, g)

With ring phases and gamma = 0 this is training-formulas.md §6.6's
``2[(g-1) a_intra + (g-1)/g n b_intra] + 2(N-1) a_inter + 2 (N-1)/N (n/g) b_inter``.

Allgather and reduce-scatter [D], by the same construction, keep the inter-node traffic at ``n/g``:

    T_RS = RS_intra(n, g) + RS_inter(n/g, N)       (reduce inside the node first, then across nodes)
    T_AG = AG_inter(n/g, N) + AG_intra(n, g)       (gather across nodes first, then inside the node)

(``n`` = the total size, as for the flat operations; the result is the flat one up to a permutation of
the blocks among ranks.)  Tiers, placement and cluster presets live elsewhere (``concurrency_model.hardware.clusters``);
these functions take the two tiers' alpha and beta directly.
"""
from __future__ import annotations

import sympy as sp

from .checks import check_n, check_ranks
from .collectives import collective_time

__all__ = ["hierarchical_allreduce", "hierarchical_allgather", "hierarchical_reduce_scatter", "hierarchical_pipelined"]


def hierarchical_allreduce(n, ranks_per_node, nodes, alpha_intra, beta_intra, alpha_inter, beta_inter,
                           gamma=0, inter_algorithm: str = "ring", intra_algorithm: str = "ring") -> sp.Expr:
    """Reduce-scatter inside the node, allreduce of ``n/ranks_per_node`` across nodes, allgather inside.

    ``intra_algorithm`` must apply to both reduce_scatter and allgather (``ring`` or ``recursive_doubling``);
    ``inter_algorithm`` is any allreduce algorithm.

    >>> hierarchical_allreduce(800, 8, 2, 0, 1, 0, 10)
    2400
    """
    n, g, N = check_n(n), check_ranks(ranks_per_node, "ranks_per_node"), check_ranks(nodes, "nodes")
    rs = collective_time("reduce_scatter", intra_algorithm, n, g, alpha_intra, beta_intra, gamma)
    ar = collective_time("allreduce", inter_algorithm, n / g, N, alpha_inter, beta_inter, gamma)
    ag = collective_time("allgather", intra_algorithm, n, g, alpha_intra, beta_intra)
    return rs + ar + ag


def hierarchical_reduce_scatter(n, ranks_per_node, nodes, alpha_intra, beta_intra, alpha_inter, beta_inter,
                                gamma=0, inter_algorithm: str = "ring",
                                intra_algorithm: str = "ring") -> sp.Expr:
    """Reduce-scatter of ``n`` bytes inside the node, then of ``n/ranks_per_node`` across nodes.

    >>> hierarchical_reduce_scatter(800, 8, 2, 0, 1, 0, 10)
    1200
    """
    n, g, N = check_n(n), check_ranks(ranks_per_node, "ranks_per_node"), check_ranks(nodes, "nodes")
    intra = collective_time("reduce_scatter", intra_algorithm, n, g, alpha_intra, beta_intra, gamma)
    inter = collective_time("reduce_scatter", inter_algorithm, n / g, N, alpha_inter, beta_inter, gamma)
    return intra + inter


def hierarchical_allgather(n, ranks_per_node, nodes, alpha_intra, beta_intra, alpha_inter, beta_inter,
                           inter_algorithm: str = "ring", intra_algorithm: str = "ring") -> sp.Expr:
    """Allgather of ``n/ranks_per_node`` bytes across nodes, then of ``n`` bytes inside the node.

    >>> hierarchical_allgather(800, 8, 2, 0, 1, 0, 10)
    1200
    """
    n, g, N = check_n(n), check_ranks(ranks_per_node, "ranks_per_node"), check_ranks(nodes, "nodes")
    inter = collective_time("allgather", inter_algorithm, n / g, N, alpha_inter, beta_inter)
    intra = collective_time("allgather", intra_algorithm, n, g, alpha_intra, beta_intra)
    return inter + intra


PHASES = {  # (tier, op, size divided by ranks_per_node?) in order
    "allreduce": (("intra", "reduce_scatter", False), ("inter", "allreduce", True), ("intra", "allgather", False)),
    "reduce_scatter": (("intra", "reduce_scatter", False), ("inter", "reduce_scatter", True)),
    "allgather": (("inter", "allgather", True), ("intra", "allgather", False)),
}


def hierarchical_pipelined(op: str, n, ranks_per_node, nodes, alpha_intra, beta_intra, alpha_inter, beta_inter,
                           gamma=0, inter_algorithm: str = "ring", intra_algorithm: str = "ring") -> sp.Expr:
    """The two-level collective with its phases pipelined over chunks, as NCCL runs them [D].

    NCCL splits the buffer into chunks that flow through the phases concurrently, so each tier is busy
    for the sum of its phases' transfer times and the tiers work at the same time; the latencies of the
    phases still add up:

        T = sum_phases alpha-part + max(sum intra beta-parts, sum inter beta-parts, sum gamma-parts)

    where a phase's alpha-part is its time with beta = gamma = 0, its beta-part with alpha = gamma = 0
    (pipeline fill is left out: large messages). For 2 x 8 A100 with 230 GB/s NVSwitch per GPU and 8
    HDR NICs this gives an allreduce busbw of ~246 GB/s, against the 238 GB/s that nccl-tests measured
    on a comparable RoCE system (hardware.md 3C); the sequential sum would give ~142.

    >>> hierarchical_pipelined("allreduce", 800, 8, 2, 0, 1, 0, 10)
    1400
    """
    if op not in PHASES:
        raise ValueError(f"op: hierarchical applies to {', '.join(PHASES)}, not {op!r}")
    n, g, N = check_n(n), check_ranks(ranks_per_node, "ranks_per_node"), check_ranks(nodes, "nodes")
    tiers = {"intra": (alpha_intra, beta_intra, g, intra_algorithm), "inter": (alpha_inter, beta_inter, N, inter_algorithm)}
    latency, busy, compute = sp.Integer(0), {"intra": sp.Integer(0), "inter": sp.Integer(0)}, sp.Integer(0)
    for tier, phase_op, divided in PHASES[op]:
        a, b, ranks, alg = tiers[tier]
        size = n / g if divided else n
        red = gamma if phase_op != "allgather" else 0
        latency += collective_time(phase_op, alg, size, ranks, a, 0, 0)
        busy[tier] += collective_time(phase_op, alg, size, ranks, 0, b, 0)
        compute += collective_time(phase_op, alg, size, ranks, 0, 0, red) if red else 0
    parts = (busy["intra"], busy["inter"], compute)
    if all(x.is_number for x in parts):  # numbers: the larger directly (sympy's Max compares them slowly)
        return latency + max(parts, key=float)
    return latency + sp.Max(*parts)
