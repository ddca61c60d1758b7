"""Training distribution (paper §7.2, centralization): parameter servers, allreduce, gossip.

The paper (§7.2, Fig. 21) sets a central parameter server (PS), a sharded PS (DistBelief, Project Adam),
a hierarchical PS (Rudra) and decentralised exchange (allreduce, gossip) side by side and says the choice
"depends on multiple factors, including the network topology, bandwidth, communication latency, parameter
update frequency, and desired fault tolerance" [S1]. It gives **no cost formulas** for them: every time
below is **derived [D]** in the alpha-beta model of DESIGN.md (paper-models.md §5.2 lists the standard
forms, also tagged [D]). Consistency models are in :mod:`.consistency`, compression in :mod:`.compression`,
the gossip graphs and rounds in :mod:`.gossip`.

Conventions [D]: one synchronisation of an ``n``-byte gradient on each of ``P`` workers (push gradients,
pull weights); links are full duplex, ``alpha + bytes * beta`` per direction; messages crossing one link
at the same time share its bandwidth and their latencies overlap (``latency="overlap"``, one ``alpha``
per phase), or each pays its own (``latency="serial"``: single PS ``2P(alpha + n beta)``, the reading of
paper-models.md §5.2); servers are dedicated machines, ``gamma`` their reduction cost (s/byte); one worker
(``P = 1``) keeps its own model and pays nothing (``Min(P - 1, 1)`` for a symbolic P).

Numbers in give a float; a symbol anywhere gives the sympy expression.

>>> from concurrency_model.symbols import P, alpha, beta, n_bytes as n
>>> ps_time(n, P, alpha, beta)
(2*P*beta*n + 2*alpha)*Min(1, P - 1)
"""
from __future__ import annotations

import numpy as np
import pandas as pd
import sympy as sp

from ..comm.checks import active, as_value, check_n, check_name, check_ranks, check_rate
from ..comm.collectives import ALGORITHMS, collective_time
from ..graph import Graph
from ..hardware.clusters import load_cluster, place
from ..models import get_model
from ..units import dtype_bytes
from .compressed_sync import compressed_sync_on_cluster
from .compression import SCHEMES as COMPRESSION_SCHEMES
from .gossip import (LATENCY, TOPOLOGIES, consensus_rounds, gossip_degree, gossip_offsets,  # noqa: F401
                     gossip_round_time, gossip_time, mixing_matrix, spectral_gap)  # (re-exported)

__all__ = ["TOPOLOGIES", "ps_time", "ps_hierarchical_time", "allreduce_time", "gossip_degree", "gossip_offsets",
           "mixing_matrix", "spectral_gap", "consensus_rounds", "gossip_round_time", "gossip_time",
           "ps_on_cluster", "ps_hierarchical_on_cluster", "gossip_on_cluster", "compare_distribution"]


def ps_time(n, P, alpha, beta, servers=1, gamma=0, latency: str = "overlap"):
    """Synchronous push/pull through ``servers = S`` dedicated parameter servers, each holding ``n/S``.

    A worker sends ``n/S`` to every server and receives as much back (``n`` each way through its link); a
    server receives ``P n / S`` and sends as much (the incast). Per phase the busier end binds:

        T = Min(P-1, 1) [2 alpha + 2 n beta Max(1, P/S) + (P-1) (n/S) gamma]                  (overlap)
        T = Min(P-1, 1) [2 Max(S alpha + n beta, P alpha + P (n/S) beta) + (P-1) (n/S) gamma]  (serial)

    ``S = 1`` is the single PS, ``2 alpha + 2 P n beta``: P times the traffic of one worker on the
    server's link. More servers are never slower; from ``S = P`` on the worker link binds, ``2 alpha +
    2 n beta``, the bandwidth of reduce-scatter + allgather (``2 (P-1)/P n beta``) up to ``P/(P-1)``.

    >>> ps_time(1e6, 8, 1e-6, 1e-9), ps_time(1e6, 8, 1e-6, 1e-9, servers=8)
    (0.016002, 0.002002)
    """
    n, P, S = check_n(n), check_ranks(P), check_ranks(servers, "servers")
    a, b, g = check_rate("alpha", alpha), check_rate("beta", beta), check_rate("gamma", gamma)
    check_name("latency", latency, LATENCY)
    red = (P - 1) * n / S * g
    if latency == "overlap":
        t = 2 * a + 2 * n * b * sp.Max(1, P / S) + red
    else:
        t = 2 * sp.Max(S * a + n * b, P * a + P * n / S * b) + red
    return as_value(active(P) * t)


def ps_hierarchical_time(n, ranks_per_node, nodes, alpha_intra, beta_intra, alpha_inter, beta_inter, servers=1,
                         gamma=0, intra_reduce: str = "rabenseifner", intra_broadcast: str = "scatter_allgather",
                         latency: str = "overlap"):
    """Hierarchical PS [D]: reduce inside each node to a leader, PS among the ``nodes`` leaders, broadcast.

    ``T = reduce(n, G; intra) + ps_time(n, nodes; inter, S) + broadcast(n, G; intra)`` with ``G =
    ranks_per_node`` and the comm module's reduce / broadcast formulas (Thakur et al. 2005). The server
    sees ``nodes`` pushes instead of ``P = G nodes``: aggregation cuts the incast by ``G`` (Rudra's
    hierarchy, Gupta et al. 2016, named by the paper's §7.2 [S1]).

    >>> ps_hierarchical_time(1e6, 8, 4, 1e-6, 1e-10, 5e-6, 1e-9)
    0.008376
    """
    G, N = check_ranks(ranks_per_node, "ranks_per_node"), check_ranks(nodes, "nodes")
    red = collective_time("reduce", intra_reduce, n, G, alpha_intra, beta_intra, gamma)
    bc = collective_time("broadcast", intra_broadcast, n, G, alpha_intra, beta_intra)
    return as_value(red + ps_time(n, N, alpha_inter, beta_inter, servers, gamma, latency) + bc)


def allreduce_time(n, P, alpha, beta, algorithm: str = "ring", gamma=0):
    """Decentralised synchronisation: one allreduce (:func:`concurrency_model.comm.collective_time`;
    ``"auto"`` picks the cheapest for numbers).

    >>> allreduce_time(1e6, 8, 1e-6, 1e-9)     # 14 alpha + 1.75 n beta
    0.001764
    """
    if algorithm == "auto":
        from ..comm.select import auto
        return as_value(auto("allreduce", n, P, alpha, beta, gamma)[1])
    return as_value(collective_time("allreduce", algorithm, n, P, alpha, beta, gamma))


# -- on a cluster: link loads of explicit transfers ------------------------------------------------------

def _transfer_time(src, dst, nbytes, node, nic_cap, node_bw, intra_bw, a_intra, a_inter,
                   oversubscription: float = 1.0, pod_nodes: int = 0) -> float:
    """One phase of concurrent transfers: ``alpha`` of the slowest tier used + the busiest link.

    Links [D, as :func:`concurrency_model.hardware.clusters.place`]: a GPU's intra-node port (``intra_bw`` each way),
    a GPU's own NIC share (``nic_cap``, at most one NIC), a node's NICs together (``node_bw``); all full
    duplex and busy at the same time. With an ``oversubscription`` r > 1 (the inter tier's), also the
    fabric's bisection: the bytes from the first half of the nodes to the second (and back) through
    ``1 / r`` of the smaller half's NICs, which a ring of neighbours hardly loads and a sharded server or
    an exponential graph does; with pods of ``pod_nodes`` nodes (full bisection inside), instead each pod's
    uplinks: the bytes leaving (and entering) a pod through ``1 / r`` of its nodes' NICs.
    """
    src, dst, nbytes = np.asarray(src), np.asarray(dst), np.broadcast_to(np.asarray(nbytes, float), np.shape(src))
    cross = node[src] != node[dst]
    local = ~cross & (src != dst)
    t, lat = 0.0, 0.0
    if local.any():
        E = len(node)
        busy = max(np.bincount(src[local], nbytes[local], E).max(), np.bincount(dst[local], nbytes[local], E).max())
        t, lat = max(t, busy / intra_bw), a_intra
    if cross.any():
        for ep in (src[cross], dst[cross]):
            t = max(t, (np.bincount(ep, nbytes[cross], len(node)) / nic_cap).max(),
                    (np.bincount(node[ep], nbytes[cross], len(node_bw)) / node_bw).max())
        lat = max(lat, a_inter)
        half = len(node_bw) // 2
        if oversubscription > 1 and pod_nodes:
            pod = np.arange(len(node_bw)) // pod_nodes
            from_pod, to_pod = pod[node[src]], pod[node[dst]]
            out = from_pod != to_pod
            for k in range(pod.max() + 1 if pod.max() > 0 else 0):
                up = node_bw[pod == k].sum() / oversubscription
                t = max(t, nbytes[out & (from_pod == k)].sum() / up, nbytes[out & (to_pod == k)].sum() / up)
        elif oversubscription > 1 and half:
            left_src, left_dst = node[src] < half, node[dst] < half
            across = max(nbytes[left_src & ~left_dst].sum(), nbytes[~left_src & left_dst].sum())
            t = max(t, across * oversubscription / min(node_bw[:half].sum(), node_bw[half:].sum()))
    return float(lat + t)


def _layout(c, workers: int, per_node: int, servers: int, server_placement: str, server_nics):
    """Endpoint -> node, NIC cap per endpoint, NIC bandwidth per node, and the servers' endpoints."""
    nodes = workers // per_node
    bw = c.inter.effective_bw
    node = list(np.arange(workers) // per_node)
    cap, node_bw = [bw] * workers, [bw * c.nics_per_node] * nodes
    if server_placement == "dedicated":
        sn = c.nics_per_node if server_nics is None else int(check_ranks(server_nics, "server_nics"))
        srv = list(range(workers, workers + servers))
        node += list(range(nodes, nodes + servers))
        cap += [bw * sn] * servers
        node_bw += [bw * sn] * servers
    else:  # colocated: shard j on node j mod nodes, spread over its GPUs
        srv = [(j % nodes) * per_node + (j // nodes) % per_node for j in range(servers)]
    return np.array(node), np.array(cap, float), np.array(node_bw, float), np.array(srv)


def _ps_phase(c, n, workers, per_node, servers, server_placement, server_nics) -> float:
    node, cap, node_bw, srv = _layout(c, workers, per_node, servers, server_placement, server_nics)
    src = np.repeat(np.arange(workers), servers)
    dst = np.tile(srv, workers)
    return _transfer_time(src, dst, n / servers, node, cap, node_bw, c.intra.effective_bw, c.intra.latency,
                          c.inter.latency, c.inter.oversubscription, c.inter.pod_nodes)


def ps_on_cluster(n, P: int, cluster, servers: int = 1, server_placement: str = "dedicated",
                  ranks_per_node: int | None = None, server_nics: int | None = None) -> float:
    """Seconds of a synchronous PS push + pull on ``cluster`` [D].

    Workers fill nodes (:func:`concurrency_model.hardware.clusters.place`). ``dedicated`` servers are extra machines
    with ``server_nics`` NICs of the network tier (default: as many as a worker node); ``colocated`` puts
    shard ``j`` on a GPU of worker node ``j mod nodes`` (traffic to a shard on the same node goes over the
    intra-node tier, to the same GPU is free). Each phase is timed by the busiest link
    (:func:`_transfer_time`); the pull mirrors the push.

    >>> round(ps_on_cluster(1e8, 16, "dgx1-v100") * 1e3, 2)      # 16 x 100 MB into 4 EDR NICs, twice
    71.12
    """

    c = load_cluster(cluster)
    n = float(check_n(n))
    S = int(check_ranks(servers, "servers"))
    check_name("server_placement", server_placement, ("dedicated", "colocated"))
    p = place(c, int(check_ranks(P)), ranks_per_node)
    if p.ranks == 1:
        return 0.0
    return 2 * _ps_phase(c, n, p.ranks, p.ranks_per_node, S, server_placement, server_nics)


def ps_hierarchical_on_cluster(n, P: int, cluster, servers: int = 1, server_placement: str = "dedicated",
                               ranks_per_node: int | None = None, server_nics: int | None = None) -> float:
    """Hierarchical PS on ``cluster`` [D]: the cheapest reduce to a leader GPU on the intra-node tier, a PS
    among the node leaders (one NIC each), the cheapest broadcast back.

    >>> round(ps_hierarchical_on_cluster(1e8, 16, "dgx1-v100") * 1e3, 2)  # leaders: 100 MB on one NIC, twice
    19.88
    """

    c = load_cluster(cluster)
    n = float(check_n(n))
    p = place(c, int(check_ranks(P)), ranks_per_node)
    G, N = p.ranks_per_node, p.nodes
    a, b = p.intra
    intra = 0.0
    if G > 1:
        intra = min(float(collective_time("reduce", x, n, G, a, b)) for x in ALGORITHMS["reduce"]) + \
            min(float(collective_time("broadcast", x, n, G, a, b)) for x in ALGORITHMS["broadcast"])
    if N == 1:
        return float(intra)
    S = int(check_ranks(servers, "servers"))
    check_name("server_placement", server_placement, ("dedicated", "colocated"))
    return float(intra) + 2 * _ps_phase(c, n, N, 1, S, server_placement, server_nics)


def gossip_on_cluster(n, P: int, cluster, topology: str = "ring", ranks_per_node: int | None = None) -> float:
    """One gossip round on ``cluster`` [D]: every worker sends ``n`` bytes to each out-neighbour of
    :func:`gossip_offsets` at once; timed by the busiest link (worker ``i`` on node ``i // ranks_per_node``).

    >>> round(gossip_on_cluster(1e8, 16, "dgx1-v100", "ring") * 1e3, 2)    # the node-boundary workers
    8.89
    """

    c = load_cluster(cluster)
    n = float(check_n(n))
    p = place(c, int(check_ranks(P)), ranks_per_node)
    if p.ranks == 1:
        return 0.0
    offs = gossip_offsets(topology, p.ranks)
    node, cap, node_bw, _ = _layout(c, p.ranks, p.ranks_per_node, 0, "colocated", None)
    src = np.repeat(np.arange(p.ranks), len(offs))
    dst = (src + np.tile(offs, p.ranks)) % p.ranks
    return _transfer_time(src, dst, n, node, cap, node_bw, c.intra.effective_bw, c.intra.latency, c.inter.latency,
                          c.inter.oversubscription, c.inter.pod_nodes)


# -- the comparison --------------------------------------------------------------------------------------

COMPRESSIONS = ("fp16", "bf16", "int8", "1bit", "terngrad", "qsgd", "topk", "dgc", "powersgd")


def compare_distribution(model, cluster, P, *, ranks_per_node: int | None = None, grad_dtype: str = "fp32",
                         servers: int | None = None, server_placement: str = "dedicated", eps: float = 1e-3,
                         compressions=COMPRESSIONS, **compression_options) -> pd.DataFrame:
    """Per-step synchronisation time of each distribution scheme for a model's gradients on a cluster.

    ``model``: a zoo name, a model spec or a graph (``get_model(model).params`` values of ``grad_dtype``);
    ``P``: a worker count or a list. Rows (``scheme``): ``ps_single`` (one dedicated server),
    ``ps_sharded`` (``servers`` shards, default one per worker node and at least 2), ``ps_hierarchical``
    (one server), ``allreduce`` (``auto`` on the cluster), ``gossip_ring`` and ``gossip_exponential`` (one
    round per step, as D-PSGD / SGP; ``consensus_rounds`` and ``consensus_s`` for an average within
    ``eps``), and ``allreduce+<compression>`` for each of ``compressions`` (options to
    :func:`.compression.compress`). Columns: ``P, scheme, compression, algorithm, servers, message_bytes``
    (one worker's gradient message), ``sent_bytes`` (bytes a worker sends per step), ``comm_s, encode_s,
    decode_s, time_s`` (seconds per step), ``consensus_rounds, consensus_s`` (gossip only).

    >>> df = compare_distribution("resnet50", "dgx1-v100", 16, compressions=("fp16",))
    >>> df.set_index("scheme").time_s.round(4).to_dict()["allreduce"]
    0.0033
    """

    c = load_cluster(cluster)
    g = model if isinstance(model, Graph) else get_model(model)
    vb = dtype_bytes(grad_dtype)
    n = float(g.params * vb)
    for x in compressions:
        check_name("compressions", x, COMPRESSION_SCHEMES)
    rows = []
    for p in ([P] if isinstance(P, (int, np.integer)) else list(P)):
        p = int(check_ranks(p))
        k = min(p, c.gpus_per_node) if ranks_per_node is None else ranks_per_node
        nodes = max(1, p // k)
        S = max(2, nodes) if servers is None else int(check_ranks(servers, "servers"))
        base = dict(P=p, compression="none", algorithm="", servers=0, message_bytes=n, sent_bytes=n * (p > 1),
                    encode_s=0.0, decode_s=0.0, consensus_rounds=np.nan, consensus_s=np.nan)

        def add(scheme, comm, **kw):
            rows.append({**base, "scheme": scheme, "comm_s": comm, "time_s": comm, **kw})

        add("ps_single", ps_on_cluster(n, p, c, 1, server_placement, ranks_per_node), servers=1)
        add("ps_sharded", ps_on_cluster(n, p, c, S, server_placement, ranks_per_node), servers=S)
        add("ps_hierarchical", ps_hierarchical_on_cluster(n, p, c, 1, server_placement, ranks_per_node),
            servers=1)
        r = compressed_sync_on_cluster("fp32", g, p, c, ranks_per_node, value_bytes=vb)
        add("allreduce", r["comm_s"], algorithm=r["algorithm"], sent_bytes=r["sent_bytes"])
        for topo in ("ring", "exponential"):
            t = gossip_on_cluster(n, p, c, topo, ranks_per_node)
            rounds = consensus_rounds(spectral_gap(topo, p), eps) if p > 1 else 0
            deg = gossip_degree(topo, p)
            add(f"gossip_{topo}", t, algorithm=f"degree {deg}", sent_bytes=deg * n, consensus_rounds=rounds,
                consensus_s=rounds * t)
        for x in compressions:
            r = compressed_sync_on_cluster(x, g, p, c, ranks_per_node, value_bytes=vb, **compression_options)
            rows.append({**base, "scheme": f"allreduce+{x}", "compression": x, **r})
    cols = ["P", "scheme", "compression", "algorithm", "servers", "message_bytes", "sent_bytes", "comm_s", "encode_s",
            "decode_s", "time_s", "consensus_rounds", "consensus_s"]
    return pd.DataFrame(rows)[cols]

