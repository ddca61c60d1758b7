"""``concurrency-model collective OP``: time of a collective in the alpha-beta model or on a cluster."""
from __future__ import annotations

import argparse

from ..comm import ALGORITHMS, OPS, algbw, auto, busbw, collective_time, lower_bound
from ..comm.nccl import split_name
from ..comm.on_cluster import algorithms, collective_on_cluster
from ..hardware.clusters import cluster_names
from . import add_json, byte_count, positive_int

NAMES = ("auto", "hierarchical", *sorted({a for algs in ALGORITHMS.values() for a in algs}))


def nonnegative_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text!r}") from None
    if not v >= 0:
        raise argparse.ArgumentTypeError(f"must be a number >= 0, got {text}")
    return v


def run(a) -> dict:
    if a.bytes < 0:
        raise ValueError(f"bytes: must be >= 0, got {a.bytes}")
    if (a.cluster is None) == (a.alpha is None or a.beta is None):
        raise ValueError("cluster: give either --cluster or both --alpha and --beta")
    out = {"op": a.op, "bytes": a.bytes, "ranks": a.ranks}
    if a.cluster is not None:
        alg, t, p = collective_on_cluster(a.op, a.bytes, a.ranks, a.cluster, a.ranks_per_node, a.algorithm,
                                          a.gamma or 0)
        out["placement"] = p.to_dict()
    else:
        if a.ranks_per_node is not None:
            raise ValueError("ranks_per_node: needs --cluster")
        if a.algorithm == "hierarchical":
            raise ValueError("algorithm: hierarchical needs --cluster (two tiers)")
        gamma = a.gamma or 0.0
        if a.algorithm == "auto":
            alg, t = auto(a.op, a.bytes, a.ranks, a.alpha, a.beta, gamma)
        else:
            if a.algorithm not in ALGORITHMS[a.op]:
                raise ValueError(f"algorithm: {a.algorithm!r} does not apply to {a.op}; allowed: "
                                 f"{', '.join(algorithms(a.op))}")
            alg, t = a.algorithm, collective_time(a.op, a.algorithm, a.bytes, a.ranks, a.alpha, a.beta, gamma)
        out["lower_bound_s"] = float(lower_bound(a.op, a.bytes, a.ranks, a.alpha, a.beta, gamma))
    t = float(t)
    out.update({"time_s": t, "algorithm": alg, "protocol": split_name(alg)[1],
                "algbw_Bps": float(algbw(a.bytes, t)) if t > 0 else None,
                "busbw_Bps": float(busbw(a.op, a.bytes, t, a.ranks)) if t > 0 else None})
    return out


def show(out: dict) -> None:
    where = out["placement"]["cluster"] if "placement" in out else "alpha-beta"
    print(f"{out['op']} of {out['bytes']:,} bytes on {out['ranks']} ranks ({where}): "
          f"{out['time_s'] * 1e6:,.2f} us with {out['algorithm']}"
          + (f" (NCCL protocol {out['protocol']})" if out.get("protocol") else ""))
    if out["algbw_Bps"]:
        print(f"  algbw {out['algbw_Bps'] / 1e9:,.2f} GB/s, busbw {out['busbw_Bps'] / 1e9:,.2f} GB/s")
    if "lower_bound_s" in out:
        print(f"  lower bound (Chan et al. 2007): {out['lower_bound_s'] * 1e6:,.2f} us")
    if "placement" in out:
        p = out["placement"]
        print(f"  placement: {p['kind']}, {p['nodes']} node(s) x {p['ranks_per_node']} ranks; "
              f"intra {p['intra_bw_Bps'] / 1e9:,.1f} GB/s, inter {p['inter_bw_Bps'] / 1e9:,.1f} GB/s per rank")


def register(sub) -> None:
    c = sub.add_parser("collective", help="time of a collective (alpha-beta model, every algorithm, or a cluster)")
    c.add_argument("op", choices=[o for o in OPS if o != "p2p"])
    c.add_argument("--bytes", type=byte_count, required=True,
                   help="vector size per rank (allreduce/reduce/broadcast), total gathered size (allgather, "
                        "reduce_scatter), bytes sent per rank (alltoall): 1048576, 1e9, 256MiB or 1GB")
    c.add_argument("--ranks", type=positive_int, required=True)
    c.add_argument("--alpha", type=nonnegative_float, help="latency, seconds")
    c.add_argument("--beta", type=nonnegative_float, help="seconds per byte")
    c.add_argument("--gamma", type=nonnegative_float, help="reduction seconds per byte (default 0)")
    c.add_argument("--cluster", help=f"cluster preset ({', '.join(cluster_names())}) or a JSON file")
    c.add_argument("--ranks-per-node", type=positive_int, default=None)
    c.add_argument("--algorithm", choices=NAMES, default="auto")
    add_json(c)
    c.set_defaults(run=run, show=show)
