"""Per-layer hybrid parallelism (paper §6.4) and batch normalization under data parallelism (§6.1).

**One weird trick** (Krizhevsky 2014, "One weird trick for parallelizing convolutional neural networks",
arXiv:1404.5997, §3; the paper's §6.4: "a speedup of up to 6.25x can be achieved for 8 GPUs over one,
with less than 1% accuracy loss" [S1]): the convolutional layers, most of the compute and few weights,
run data-parallel (``batch`` samples per device, an allreduce of their weight gradients); the fully
connected layers, most of the weights and little compute, run model-parallel (each device holds
``1/P`` of every layer's neurons and computes them for all ``P batch`` samples). Between the two the
activations are redistributed: the last convolutional activations are allgathered so that every device
sees the whole batch, and their gradient is reduce-scattered back (each device gets its own samples'
gradient summed over the devices).

The step time is composed here [D] (no formula in the paper or in Krizhevsky's text): per layer the
device time of :mod:`concurrency_model.timing` (numbers, not symbols), the collectives of
:mod:`.model_parallel` (a model-parallel layer allgathers its input and reduce-scatters its ∇x, the
logits are allgathered for the loss; reference/paper-models §4.2, §4.4 [D]), the data-parallel gradient
allreduce, and the optimizer update (the parameters a device holds), added without overlap. Speedup is
throughput over one device with ``batch`` samples (128 samples per GPU, as recalled of Krizhevsky's
Table 1; unconfirmed).
"""
from __future__ import annotations

import math
from typing import TYPE_CHECKING

import sympy as sp

from ..comm.checks import check_ranks
from ..cost import to_python
from ..units import dtype_bytes
from .model_parallel import channel_split, comm_time, fc_split, network

if TYPE_CHECKING:  # annotations only
    import pandas as pd

#: Krizhevsky (2014) trained on NVIDIA K20 GPUs (recalled, not in shared/reference: unconfirmed). There is
#: no Kepler preset; the closest is the PCIe Maxwell Tesla M40 (6.8 TFLOP/s fp32, about twice a K20).
DEFAULT_DEVICE = "m40-24gb"
#: The K20's host interface, PCIe Gen2 x16: 8 GB/s per direction (unconfirmed, not in hardware.md), at an
#: assumed 75% efficiency, 10 us per message (estimates). With a GPU about twice a K20's speed this makes
#: communication relatively cheaper than in Krizhevsky's runs, so the speedups lean optimistic.
PCIE_ALPHA_S = 10e-6
PCIE_BETA_S_PER_BYTE = 1 / (8e9 * 0.75)
SCHEMES = ("hybrid", "data", "model")


def _times(g, dev, dtype):
    from ..timing.graph import layer_times
    t = layer_times(g, dev, dtype)
    return (t["forward_s"] + t["grad_input_s"] + t["grad_weight_s"]).tolist()


def _update_s(params, dev, dtype, optimizer):
    from ..timing import roofline
    from ..timing.graph import UPDATE_BYTES_PER_PARAM
    if optimizer not in UPDATE_BYTES_PER_PARAM:
        raise ValueError(f"optimizer: unknown {optimizer!r}; allowed: {', '.join(UPDATE_BYTES_PER_PARAM)}")
    return float(roofline(0.0, UPDATE_BYTES_PER_PARAM[optimizer] * dtype_bytes(dtype) * params, dev, dtype).time_s)


def first_fc(layers) -> int:
    k = next((i for i, n in enumerate(layers) if n.kind == "linear"), None)
    if k is None or any(n.kind not in ("linear", "relu", "dropout", "gelu", "tanh", "sigmoid", "softmax")
                        for n in layers[k:]):
        raise ValueError("model: one weird trick needs convolutional layers followed by fully connected "
                         "layers (and element-wise ones) only")
    return k


def _split(node, n, P, dev, dtype, net, first: bool):
    """Compute seconds of ``node`` split by outputs over ``P`` devices on ``n`` samples, and its
    collectives: allgather of the input, reduce-scatter of ∇x (none for the first layer)."""
    a = node.attrs
    if node.kind == "conv2d":
        if a["groups"] != 1:
            raise ValueError(f"model: {node.name} is a grouped convolution; the filter split needs groups = 1")
        s = channel_split(n, a["c_in"], a["c_out"], a["h"], a["w"], a["kh"], P, a["kw"], a["stride"], a["pad"],
                          a["dilation"], gather_output=False, grad_input=None, needs_grad_input=not first,
                          device=dev, dtype=dtype)
        x = n * a["c_in"] * a["h"] * a["w"]
    else:
        rows = n * a["rows_per_sample"]
        s = fc_split(rows, a["c_in"], a["c_out"], P, gather_output=False, grad_input=None,
                     needs_grad_input=not first, device=dev, dtype=dtype)
        x = rows * a["c_in"]
    comm = [] if first else [(node.name, "forward", "allgather", x * dtype_bytes(dtype)),
                             (node.name, "backward", "reduce_scatter", x * dtype_bytes(dtype))]
    return float(s.compute_s), comm


def scheme_step(model="alexnet", scheme="hybrid", P=8, batch=128, device=DEFAULT_DEVICE, dtype="fp32",
                cluster=None, alpha=None, beta=None, ranks_per_node=None, optimizer="momentum") -> dict:
    """Seconds of one training step with ``batch`` samples per device (``P batch`` in all) under
    ``scheme``: ``hybrid`` (one weird trick, module doc), ``data`` (every layer data-parallel: an
    allreduce of all gradients), ``model`` (every convolution split by filters and every FC layer by
    neurons over ``P`` devices for all ``P batch`` samples; each allgathers its input and reduce-scatters
    its ∇x [D]). Without ``cluster``, alpha and beta default to PCIe Gen2 (:data:`PCIE_BETA_S_PER_BYTE`).

    Returns ``compute_s, comm_s, update_s, step_s`` and ``comm`` (a DataFrame: layer, phase, op, bytes,
    seconds, algorithm).

    >>> r = scheme_step("alexnet", "hybrid", P=2, batch=32)
    >>> sorted(r["comm"]["op"].unique()), r["step_s"] > r["compute_s"] > 0
    (['allgather', 'allreduce', 'reduce_scatter'], True)
    """
    import pandas as pd  # heavy (0.4 s): loaded when a table is built
    from ..models import get_model
    from ..timing import device as as_device
    if scheme not in SCHEMES:
        raise ValueError(f"scheme: unknown {scheme!r}; allowed: {', '.join(SCHEMES)}")
    P = int(check_ranks(P, "P"))
    batch = int(check_ranks(batch, "batch"))
    dev, vb = as_device(device), dtype_bytes(dtype)
    if cluster is None:
        alpha = PCIE_ALPHA_S if alpha is None else alpha
        beta = PCIE_BETA_S_PER_BYTE if beta is None else beta
    net = network(cluster, alpha, beta, ranks_per_node)
    g = get_model(model, batch=batch, value_bytes=vb)
    layers = g.layers()
    local = _times(g, dev, dtype)  # batch samples, or P batch samples with 1/P of the channels (same count)
    k = 0 if scheme == "model" else len(layers) if scheme == "data" else first_fc(layers)
    compute, comm, replicated, split_params = 0.0, [], 0, 0
    for i, node in enumerate(layers):
        params = int(node.cost.params)
        if i < k or node.kind not in ("conv2d", "linear"):
            compute += local[i]
            replicated += params if i < k else 0
            split_params += params if i >= k else 0
            continue
        t, c = _split(node, P * batch, P, dev, dtype, net, first=(i == 0))
        compute, comm, split_params = compute + t, comm + c, split_params + params
    if k < len(layers):  # the loss needs whole rows of logits
        comm.append((layers[-1].name, "forward", "allgather", P * batch * layers[-1].numel * vb))
    if replicated:
        comm.append(("data-parallel layers", "backward", "allreduce", replicated * vb))
    rows = []
    for name, phase, op, n in comm:
        t, alg = comm_time(op, n, P, net)
        rows.append({"layer": name, "phase": phase, "op": op, "bytes": n, "seconds": float(t), "algorithm": alg})
    frame = pd.DataFrame(rows, columns=["layer", "phase", "op", "bytes", "seconds", "algorithm"])
    update = _update_s(replicated + split_params / P, dev, dtype, optimizer)
    comm_s = float(frame["seconds"].sum())
    return {"scheme": scheme, "P": P, "batch": batch, "compute_s": compute, "comm_s": comm_s, "update_s": update,
            "step_s": compute + comm_s + update, "comm": frame}


def one_weird_trick(model="alexnet", P=8, batch=128, device=DEFAULT_DEVICE, dtype="fp32", cluster=None,
                    alpha=None, beta=None, ranks_per_node=None, optimizer="momentum") -> dict:
    """Krizhevsky's hybrid (conv data-parallel, FC model-parallel) against pure data and pure model
    parallelism on ``P`` devices with ``batch`` samples per device: step seconds per scheme and speedup
    ``P T_1 / T_P`` over one device with ``batch`` samples (throughput). The paper reports 6.25x on 8 GPUs
    for the hybrid (§6.4 [S1]); this model gives about 1.97, 3.72 and 6.66 on 2, 4 and 8 M40s on PCIe
    Gen2, against 1.40, 2.44 and 4.58 for pure data parallelism (the paper: a single scheme reaches at
    best about 2.2x on 4 GPUs [S1]).

    >>> r = one_weird_trick(P=1, batch=16)
    >>> {s: round(v, 6) for s, v in r["speedup"].items()}
    {'hybrid': 1.0, 'data': 1.0, 'model': 1.0}
    """
    kw = dict(model=model, batch=batch, device=device, dtype=dtype, cluster=cluster, alpha=alpha, beta=beta,
              ranks_per_node=ranks_per_node, optimizer=optimizer)
    one = scheme_step(scheme="data", P=1, **kw)["step_s"]
    steps = {s: scheme_step(scheme=s, P=P, **kw) for s in SCHEMES}
    return {"P": int(P), "batch": batch, "global_batch": int(P) * batch, "serial_step_s": one,
            "step_s": {s: r["step_s"] for s, r in steps.items()},
            "speedup": {s: int(P) * one / r["step_s"] for s, r in steps.items()}, "steps": steps}


def one_weird_trick_table(Ps=(1, 2, 4, 8), **kwargs) -> pd.DataFrame:
    """One row per device count and scheme: ``P, scheme, step_s, compute_s, comm_s, update_s, speedup``
    (keyword arguments as :func:`one_weird_trick`)."""
    import pandas as pd  # heavy (0.4 s): loaded when a table is built
    rows = []
    for P in Ps:
        r = one_weird_trick(P=P, **kwargs)
        for s, st in r["steps"].items():
            rows.append({"P": P, "scheme": s, **{f: st[f] for f in ("step_s", "compute_s", "comm_s", "update_s")},
                         "speedup": r["speedup"][s]})
    return pd.DataFrame(rows)


def distbelief_step(model="alexnet", replicas=4, partitions=2, batch=128, device=DEFAULT_DEVICE, dtype="fp32",
                    servers=1, alpha=None, beta=None, optimizer="momentum") -> dict:
    """DistBelief / Project Adam style combination [D]: ``replicas`` data-parallel replicas, each the model
    split over ``partitions`` devices (``scheme_step(..., "model")`` on ``batch`` samples per replica),
    their gradients pushed to and the weights pulled from ``servers`` parameter-server shards, synchronously
    (:func:`~concurrency_model.parallel.distribution.ps_time`, itself [D]; the partitions of a replica
    talk to the servers at the same time, each about its ``1/partitions`` of the weights).

    The paper (§6.4, Fig. 17c [S2]) describes DistBelief as replicas (data parallelism) of a model split
    by neurons (model parallelism) and by layers (pipelining), and Project Adam as the same three with
    pipelining restricted to the cores of one node; neither pipelining nor the asynchrony of Downpour SGD
    is modelled here. Speedup: throughput over one device with ``batch`` samples.

    >>> r = distbelief_step(replicas=1, partitions=1, batch=16)
    >>> r["ps_s"], round(r["speedup"], 6)
    (0, 1.0)
    """
    from .distribution import ps_time
    replicas, partitions = int(check_ranks(replicas, "replicas")), int(check_ranks(partitions, "partitions"))
    if batch % partitions:
        raise ValueError(f"batch: {batch} samples per replica are not divisible by partitions = {partitions}")
    if alpha is None or beta is None:
        alpha, beta = PCIE_ALPHA_S if alpha is None else alpha, PCIE_BETA_S_PER_BYTE if beta is None else beta
    kw = dict(model=model, device=device, dtype=dtype, alpha=alpha, beta=beta, optimizer=optimizer)
    replica = scheme_step(scheme="model", P=partitions, batch=batch // partitions, **kw)
    from ..models import get_model
    shard = get_model(model, batch=1).params * dtype_bytes(dtype) / partitions
    ps = float(ps_time(shard, replicas, alpha, beta, servers=servers)) if replicas > 1 else 0
    one = scheme_step(scheme="data", P=1, batch=batch, **kw)["step_s"]
    step = replica["step_s"] + ps
    return {"replicas": replicas, "partitions": partitions, "devices": replicas * partitions, "step_s": step,
            "replica_s": replica["step_s"], "ps_s": ps, "speedup": replicas * one / step, "replica": replica}


# -- batch normalization under data parallelism ---------------------------------------------------------

def batch_norm_sync(graph, P, dtype="fp32", cluster=None, alpha=None, beta=None, ranks_per_node=None) -> dict:
    """Synchronous against local batch normalization with data parallelism over ``P`` devices.

    *Local* BN normalizes over the ``batch/P`` samples of each device: no communication; the paper notes
    that BN, which reduces over the minibatch (depth O(log N), Table 4 [S1]), is "the scalability
    bottleneck" of data parallelism and is in practice approximated on local subsets of at least 32
    samples (§6.1 [S1]); ``local_batch_ok`` says whether ``batch/P >= 32``. *Synchronous* BN reduces
    over the whole minibatch [D]: per BN layer an allreduce of ``2 C`` values forward (sum and sum of
    squares) and one of ``2 C`` backward (Σ∇y and Σ∇y·x̂, Ioffe & Szegedy 2015 §3), on the critical path.
    Depth: the BN cost model of :mod:`concurrency_model.ops.norm` with the whole batch (``m = N H W``)
    against ``batch/P`` samples; the difference per layer is about ``3 log2 P`` (two chained reductions
    forward, one backward) [D]. ``extra_depth`` sums over the BN layers, the critical path's increase
    when they are all on it (a chain; an upper bound otherwise).

    >>> from concurrency_model import get_model
    >>> r = batch_norm_sync(get_model("resnet50", batch=256), 8, alpha=0, beta=1e-9)
    >>> len(r["layers"]), r["local_batch"], r["local_batch_ok"], int(r["layers"]["extra_depth"].iloc[0])
    (53, 32, True, 9)
    """
    import pandas as pd  # heavy (0.4 s): loaded when a table is built
    from ..ops.norm import batch_norm
    P = check_ranks(P, "P")
    N = graph.batch
    if P.is_number and N.is_number and int(N) % int(P):
        raise ValueError(f"P: {P} does not divide the batch {N}")
    local, vb, net = N / P, sp.Integer(dtype_bytes(dtype)), network(cluster, alpha, beta, ranks_per_node)
    M = sp.Symbol("M_local", integer=True, positive=True)
    rows = []
    for node in graph.layers():
        if node.kind != "batch_norm":
            continue
        c, spatial = node.shape[0], math.prod(node.shape[1:])
        depth = {}
        for key, n in (("local", local), ("sync", N)):
            op = batch_norm(M, c, spatial, value_bytes=vb)
            depth[key] = (op.forward.depth + op.grad_input.depth).subs(M, n)
        t, alg = comm_time("allreduce", 2 * c * vb, P, net)
        rows.append({"name": node.name, "channels": c, "bytes": to_python(2 * c * vb), "algorithm": alg,
                     "sync_s": to_python(2 * t), "depth_local": to_python(depth["local"]),
                     "depth_sync": to_python(depth["sync"]), "extra_depth": to_python(depth["sync"] - depth["local"])})
    frame = pd.DataFrame(rows)
    total = lambda col: to_python(sum((sp.sympify(v) for v in frame[col]), sp.Integer(0))) if rows else 0  # noqa
    ok = sp.sympify(local >= 32)
    return {"layers": frame, "sync_extra_s": total("sync_s"), "extra_depth": total("extra_depth"),
            "local_batch": to_python(local), "local_batch_ok": bool(ok) if ok in (sp.true, sp.false) else ok}
