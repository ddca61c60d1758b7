"""Step time, breakdown and memory of a training scenario: data x tensor x pipeline parallelism.

Composition (DESIGN.md "How the pieces meet"; Narayanan et al. 2021 for the 3D layout):

1. The model is built for one microbatch of ``b`` samples; every layer's forward, ∇x and ∇w time on one
   device is :func:`~concurrency_model.timing.graph.layer_times` with the device's share under Megatron
   tensor parallelism (Shoeybi et al. 2019; sequence parallelism: Korthikanti et al. 2022).
2. Tensor-parallel communication per microbatch (on the critical path): an allreduce of each row-split
   GEMM's output in the forward pass and of each column-split GEMM's input gradient in the backward pass
   (Shoeybi et al. §3, the f/g operators); with sequence parallelism each becomes a reduce-scatter plus an
   allgather of the same volume. The tensor group sits inside a node (the fast tier) when it fits.
3. Recompute: ``full`` runs every layer's forward again in the backward pass; ``selective`` runs the
   attention core again (Korthikanti et al. §5).
4. Layers are split into ``pipeline`` stages by PipeDream's partitioner (minimise the slowest stage);
   the slowest stage's per-microbatch forward and backward times drive the schedule's closed form
   (:mod:`.pipeline`), with a point-to-point transfer of the boundary activation per microbatch.
5. Data parallelism over ``data`` ranks that share the node's NICs with the other tensor ranks: ZeRO 0
   allreduces the accumulated gradients once per step, 1 reduce-scatters them and gathers the updated
   parameters, 2 reduce-scatters each microbatch's gradients, 3 also gathers the parameters in each
   microbatch's forward and backward pass (Rajbhandari et al. 2020 §5, §7). With ``overlap`` each
   transfer hides behind the compute it follows (wait-free backprop, Li et al. 2020; ZeRO prefetching):
   what does not fit is exposed, and always the last 25 MiB gradient bucket.
6. The optimizer step is a memory-bound pass over the device's (ZeRO-sharded) model state.

A configuration over the device's memory raises ``ValueError`` with the reason, as do degrees that do
not divide heads, hidden sizes or layers.
"""
from __future__ import annotations

from dataclasses import dataclass, field

import pandas as pd

from ..comm.on_cluster import collective_on_cluster
from ..cluster import place
from ..models import get_model
from ..scenario import Scenario, load_scenario
from ..timing import roofline
from ..timing.graph import layer_times
from ..units import dtype_bytes
from . import memory, pipeline

GRAD_BYTES = {"fp32": 4, "tf32": 4}  # gradients in the training dtype otherwise (2 bytes for fp16/bf16)
BUCKET_BYTES = 25 * 2**20  # PyTorch DDP bucket_cap_mb = 25 (training-formulas §7)


@dataclass
class Estimate:
    """The result: ``step_time_s``, named ``breakdown`` seconds, memory, and the scenario it came from."""

    step_time_s: float
    throughput_samples_per_s: float
    flop_per_step: float
    achieved_flops_per_device: float
    memory_bytes_per_device: float
    breakdown: dict
    memory: dict
    scenario: Scenario = field(repr=False)
    stages: list = field(default_factory=list, repr=False)

    def to_dict(self) -> dict:
        return {"step_time_s": self.step_time_s, "throughput_samples_per_s": self.throughput_samples_per_s,
                "flop_per_step": self.flop_per_step, "achieved_flops_per_device": self.achieved_flops_per_device,
                "memory_bytes_per_device": self.memory_bytes_per_device, "breakdown": self.breakdown,
                "memory": {k: v for k, v in self.memory.items() if k != "reason"}, "gpus": self.scenario.gpus,
                "parallel": self.scenario.parallel, "training": self.scenario.training}

    def to_frame(self) -> pd.DataFrame:
        return pd.DataFrame([{"component": k, "seconds": v} for k, v in self.breakdown.items()])


def _transformer_shape(graph):
    att = [n for n in graph.layers() if n.kind == "attention"]
    if not att:
        return None
    a = att[0].attrs
    emb = [n for n in graph.layers() if n.kind == "embedding"]
    vocab = int(emb[0].cost.params) // (a["heads"] * a["head_dim"]) if emb else None
    return {"s": a["seq"], "h": a["heads"] * a["head_dim"], "a": a["heads"], "layers": len(att), "vocab": vocab}


def _check_tensor(graph, t: int) -> None:
    if t == 1:
        return
    for n in graph.layers():
        if n.kind == "attention" and n.attrs["heads"] % t:
            raise ValueError(f"parallel.tensor: {t} does not divide the {n.attrs['heads']} attention heads")
        split = n.attrs.get("split")
        if split == "column" and n.name.split(".")[-1] != "lm_head" and n.attrs["c_out"] % t:
            raise ValueError(f"parallel.tensor: {t} does not divide {n.name}'s {n.attrs['c_out']} outputs")
        if split == "row" and n.attrs["c_in"] % t:
            raise ValueError(f"parallel.tensor: {t} does not divide {n.name}'s {n.attrs['c_in']} inputs")
    if not any(n.attrs.get("split") for n in graph.layers()):
        raise ValueError(f"parallel.tensor: {t} > 1 is modelled for transformer blocks only (this model has none)")


def estimate(scenario) -> Estimate:
    """Estimate one training step of ``scenario`` (a :class:`~concurrency_model.scenario.Scenario`, a dict
    or a file path).

    >>> e = estimate({"model": "gpt2", "cluster": "dgx-a100", "parallel": {"data": 8, "global_batch": 64,
    ...               "microbatch_size": 8}})
    >>> e.breakdown["bubble_s"], e.scenario.gpus
    (0.0, 8)
    """
    sc = load_scenario(scenario)
    par, tr, cl = sc.parallel, sc.training, sc.cluster
    d, t, p, v = par["data"], par["tensor"], par["pipeline"], par["interleave"]
    b, m, sp = par["microbatch_size"], sc.microbatches, par["sequence_parallel"]
    dtype, dev = tr["dtype"], cl.device
    vb = dtype_bytes(dtype)
    g = get_model(sc.model, batch=b, value_bytes=vb)
    _check_tensor(g, t)
    layers = g.layers()
    if p > len(layers):
        raise ValueError(f"parallel.pipeline: {p} stages exceed the model's {len(layers)} layers")
    if par["schedule"] == "interleaved" and m % p:
        raise ValueError(f"parallel.schedule: interleaved needs the {m} microbatches to be a multiple of pipeline={p}")
    lt = layer_times(g, dev, dtype, tensor=t, sequence_parallel=sp).set_index("name")

    # tensor-parallel collectives per layer, per microbatch (Shoeybi et al. §3)
    tp_f = {n.name: 0.0 for n in layers}
    tp_b = dict(tp_f)
    if t > 1:
        rpn = min(t, cl.gpus_per_node)
        op = "reduce_scatter" if sp else "allreduce"
        for n in layers:
            split = n.attrs.get("split")
            if split not in ("row", "column") or n.name.split(".")[-1] == "lm_head":
                continue
            rows = b * n.attrs["rows_per_sample"]
            nbytes = rows * (n.attrs["c_out"] if split == "row" else n.attrs["c_in"]) * vb
            one = collective_on_cluster(op, nbytes, t, cl, rpn)[1]
            if sp:  # the matching allgather of the same volume
                one += collective_on_cluster("allgather", nbytes, t, cl, rpn)[1]
            (tp_f if split == "row" else tp_b)[n.name] = one
    rec = {n.name: 0.0 for n in layers}
    if tr["recompute"] == "full":
        rec = {name: float(lt.loc[name, "forward_s"]) + tp_f[name] for name in rec}
    elif tr["recompute"] == "selective":
        rec = {n.name: float(lt.loc[n.name, "forward_s"]) if n.kind == "attention" else 0.0 for n in layers}
    names = [n.name for n in layers]
    fwd = [float(lt.loc[x, "forward_s"]) for x in names]
    bwd = [float(lt.loc[x, "grad_input_s"] + lt.loc[x, "grad_weight_s"]) for x in names]
    per_layer = [fwd[i] + bwd[i] + rec[x] + tp_f[x] + tp_b[x] for i, x in enumerate(names)]
    stages = pipeline.partition(per_layer, p) if p > 1 else [(0, len(names))]
    slow = max(stages, key=lambda r: sum(per_layer[r[0]:r[1]]))
    sl = range(*slow)
    c_f, c_b = sum(fwd[i] for i in sl), sum(bwd[i] for i in sl)
    c_r = sum(rec[names[i]] for i in sl)
    c_tf, c_tb = sum(tp_f[names[i]] for i in sl), sum(tp_b[names[i]] for i in sl)
    t_f, t_b = c_f + c_tf, c_b + c_r + c_tb

    # pipeline: boundary activation per microbatch, point to point between stages (Narayanan et al. 2021 §3.2)
    t_p2p = 0.0
    if p > 1:
        boundary = layers[stages[0][1] - 1]
        nbytes = b * boundary.numel * vb / (t if sp else 1)
        crosses = t * d >= cl.gpus_per_node  # a stage fills whole nodes: stages talk across the network
        alpha, beta = place(cl, 2, 1 if crosses else 2).inter if crosses else place(cl, 2, 2).intra
        t_p2p = alpha + nbytes * beta
    step_pp = float(pipeline.step_time(par["schedule"], p, m, t_f, t_b, v, t_p2p))
    # transfers on the critical path of the closed forms (pipeline.step_time_expr): 2(p-1), interleaved 2(vp-1)
    p2p_exposed = 2 * ((v * p if par["schedule"] == "interleaved" else p) - 1) * t_p2p if p > 1 else 0.0
    bubble = max(0.0, step_pp - m * (t_f + t_b) - p2p_exposed)

    # data parallelism: gradient synchronisation over d ranks sharing the node's NICs with the tensor ranks
    params = float(g.params)
    params_dev = params / (t * p)
    dp_total = dp_exposed = 0.0
    if d > 1:
        rpn = max(1, min(d, cl.gpus_per_node // min(t, cl.gpus_per_node)))
        sharing = max(1, min(t, cl.gpus_per_node // rpn))
        grad_bytes = params_dev * GRAD_BYTES.get(dtype, 2)
        zero = tr["zero_stage"]

        def coll(op, nbytes):
            return collective_on_cluster(op, nbytes, d, cl, rpn, groups_sharing=sharing)[1]

        gather = coll("allgather", params_dev * vb)
        # (seconds, compute it can hide behind, times per step) of each synchronisation (ZeRO §5, §7):
        # stage 0 allreduces the accumulated gradients once; 1 reduce-scatters them and gathers the
        # updated parameters; 2 reduce-scatters every microbatch's gradients; 3 also gathers the
        # parameters in every microbatch's forward and backward pass
        if zero == 0:
            parts = [(coll("allreduce", grad_bytes), t_b, 1)]
        elif zero == 1:
            parts = [(coll("reduce_scatter", grad_bytes), t_b, 1), (gather, 0.0, 1)]
        elif zero == 2:
            parts = [(coll("reduce_scatter", grad_bytes), t_b, m), (gather, 0.0, 1)]
        else:
            parts = [(gather, t_f, m), (gather + coll("reduce_scatter", grad_bytes), t_b, m)]
        dp_total = sum(c * k for c, _, k in parts)
        if tr["overlap"]:
            # each transfer goes out during the compute it follows (wait-free backprop, ZeRO prefetching);
            # the last gradient bucket (DDP's 25 MiB cap, Li et al. 2020 §4.2) only starts when the first
            # layers' gradients are ready: it is always exposed
            op = "allreduce" if zero == 0 else "reduce_scatter"
            last = coll(op, min(grad_bytes, BUCKET_BYTES))
            dp_exposed = min(dp_total, sum(max(0.0, c - hide) * k for c, hide, k in parts) + last)
        else:
            dp_exposed = dp_total

    # memory and the optimizer step
    state = memory.model_state_bytes(params, tr["optimizer"], dtype if dtype in ("fp32", "tf32", "fp16", "bf16", "fp64")
                                     else "bf16", tensor=t, pipeline=p, data=d, zero_stage=tr["zero_stage"])
    shape = _transformer_shape(g)
    if shape is not None:
        act = memory.activation_bytes_per_device(shape["s"], b, shape["h"], shape["a"], shape["layers"], t, sp,
                                                 tr["recompute"], p, par["schedule"], m, v, 0, shape["vocab"])
    else:
        act = float(memory.graph_activation_bytes(g, tr["recompute"])) / p * \
            float(memory._in_flight(par["schedule"], p, m, v, 0))
    mem = memory.memory_per_device(state, act, dev)
    if not mem["fits"]:
        raise ValueError(mem["reason"])
    opt = float(roofline(0.0, 2 * float(state["optimizer"] + state["weights"] + state["gradients"]), dev, dtype).time_s)

    step = step_pp + dp_exposed + opt
    model_flop = float(g.forward().flop + g.backward().flop) * (par["global_batch"] / b)
    breakdown = {"forward_s": m * c_f, "backward_s": m * c_b, "recompute_s": m * c_r,
                 "tensor_parallel_comm_s": m * (c_tf + c_tb), "pipeline_p2p_s": p2p_exposed, "bubble_s": bubble,
                 "data_parallel_comm_s": dp_total, "data_parallel_exposed_s": dp_exposed,
                 "data_parallel_overlapped_s": dp_total - dp_exposed, "optimizer_s": opt}
    breakdown["compute_s"] = breakdown["forward_s"] + breakdown["backward_s"] + breakdown["recompute_s"]
    breakdown["communication_s"] = breakdown["tensor_parallel_comm_s"] + p2p_exposed + dp_exposed
    return Estimate(step, par["global_batch"] / step, model_flop, model_flop / step / sc.gpus,
                    float(mem["total_bytes"]), breakdown, mem, sc, stages)
