"""The model-building half of an estimate (:mod:`.estimate`, whose docstring gives the composition): the checks that
need the model, the workload, the slowest stage, memory (:func:`prepare`), the inputs of the compiled step function
(:func:`step_inputs`, :func:`numbers`), the band's inputs on the fitted constants' draws (:func:`band_inputs`), the
batch region and the layer table; and the step as one sympy expression in the what-if scales (:func:`step_expression`).

:func:`.estimate.prepared` runs it only for a scenario whose numbers are not cached yet: importing this module loads
the models, the timing and sympy, which a cached estimate does without (issue 41). The sweep composes the same inputs
on arrays (:func:`assemble`).
"""
from __future__ import annotations

import numpy as np
import sympy as sp

from ..ops.routing import check_applies
from ..parallel import allocator, memory
from ..parallel.batch_size import BatchRegion, region
from ..parallel.consistency import step_factors
from ..parallel.data_parallel import GRAD_BYTES
from ..parallel.gossip import gossip_degree
from ..parallel.host import host_per_kernel, host_seconds
from ..parallel.lora import check_lora
from ..parallel.pipeline import blocking_p2p_factor, p2p_blocking, p2p_scatter_gather
from ..parallel.recompute import check_modules, recompute_modules
from ..parallel.runtime import default_framework, kernel_policies
from ..scenario import Scenario, Training, check_interleaved, load_scenario
from ..uncertainty import band_of, draws
from ..timing.layers import ALIGN_BYTES, unaligned_head
from ..units import dtype_bytes, state_dtype, value_dtype
from . import compose
from .layer_table import layer_table
from .remedies import fits_with
from .step import step_fn
from .workload import ZERO_TRIPLE, context_exposed, transformer_shape, triple_seconds, workload


def numbers(sc: Scenario, w, stage: dict, state, key: tuple, mem: dict) -> dict:
    """The numbers of a scenario's record (:data:`.estimate.NUMBERS`) from :func:`prepare`'s objects: ``inputs`` of the
    step function at the presets' numbers, ``memory``, ``stages``, ``model_flop``, ``routing_factor``, ``seq_len`` (a
    transformer's sequence, else None), ``spatial`` and the model's ``notes`` (:func:`model_notes`).

    >>> sc = load_scenario({"model": "gpt2", "parallel": {"data": 8, "global_batch": 64, "microbatch_size": 8}})
    >>> w, stage, state, mem, key = prepare(sc)
    >>> n = numbers(sc, w, stage, state, key, mem)
    >>> n["stages"], n["seq_len"], n["inputs"]["m"]
    ([(0, 149)], 1024, 1)
    """
    par, tr = sc.parallel, sc.training
    inputs = step_inputs(w, stage, *key, state, sync=sync_of(sc), host=tr.host_overhead_s,
                         consistency=consistency_of(tr, par.data * par.context),
                         batch_norm=tr.batch_norm, schedule=par.schedule)
    b = par.microbatch_size
    shape = transformer_shape(w.graph(b))
    return {"inputs": inputs, "memory": mem, "stages": stage["stages"],
            "model_flop": w.training_flop(b) * (par.global_batch / b),
            "routing_factor": w.routing_factor(b, par.expert),
            "seq_len": shape["s"] if shape else None, "spatial": bool(w.spatial),
            "notes": model_notes(w.graph(b), value_dtype(tr.dtype))}


def model_notes(graph, dtype: str) -> list:
    """What an estimate says in words about the model as it runs (:attr:`.estimate.Estimate.notes`): a plain
    attention whose heads leave the tensor cores (:func:`~concurrency_model.timing.layers.unaligned_head`).

    >>> from concurrency_model.models import get_model
    >>> model_notes(get_model({"kind": "gpt", "hidden": 1728, "heads": 16}), "bf16")[0][:60]
    'attention: heads of 108 values (216 bytes) are not a multipl'
    >>> model_notes(get_model({"kind": "gpt", "hidden": 1728, "heads": 16, "fused_attention": True}), "bf16")
    []
    """
    dims = sorted({n.attrs["head_dim"] for n in graph.layers() if n.kind == "attention" and not n.attrs.get("fused")
                   and unaligned_head(n.attrs["head_dim"], dtype)})
    return [f"attention: heads of {d} values ({d * dtype_bytes(dtype)} bytes) are not a multiple of {ALIGN_BYTES} "
            "bytes, so the plain attention's QK^T and PV run on the CUDA cores at the fp32 rate (cuBLAS's "
            "tensor-core kernels want 16-byte alignment); a head size that is a multiple of 8, or "
            "model.fused_attention, keeps them on the tensor cores" for d in dims]


def layers(sc: Scenario, w, stage: dict, key: tuple):
    """The layer table of the scenario's slowest stage (:func:`.layer_table.layer_table`).

    >>> sc = load_scenario({"model": "gpt2", "parallel": {"data": 8, "global_batch": 64, "microbatch_size": 8}})
    >>> w, stage, _, _, key = prepare(sc)
    >>> t = layers(sc, w, stage, key)
    >>> len(t), round(float(t["share"].sum()), 12)
    (149, 1.0)
    """
    par = sc.parallel
    return layer_table(w, stage, sc.training.recompute, par.context, par.context_algorithm, par.expert,
                       par.microbatch_size, key[1], key[2])


def band_inputs(sc: Scenario, w, stage: dict, state, key: tuple, scales: dict | None = None) -> dict:
    """The inputs of :func:`.step.step_fn` on :func:`~concurrency_model.uncertainty.draws` of the fitted
    constants' spread, around the hardware ``scales`` (default: the presets as they are): arrays, one value a
    draw."""
    at = {k: 1.0 for k in ("flops", "mem_bw", "launch", "intra_bw", "inter_bw")} | (scales or {})
    d = draws()
    f, b, la = d["flops"] * at["flops"], d["mem_bw"] * at["mem_bw"], d["launch"] * at["launch"]
    i, e = d["intra_bw"] * at["intra_bw"], d["inter_bw"] * at["inter_bw"]
    return step_inputs(w, stage, *key, state, lambda parts: parts.seconds(f, b, la),
                       lambda tr: triple_seconds(tr, i, e), lambda st: w.optimizer_seconds(st, b, la),
                       sync=sync_of(sc), host=sc.training.host_overhead_s,
                       consistency=consistency_of(sc.training, sc.parallel.data * sc.parallel.context),
                       batch_norm=sc.training.batch_norm, schedule=sc.parallel.schedule)


def step_band(sc: Scenario, w, stage: dict, state, key: tuple, scales: dict | None = None) -> tuple[float, float]:
    """10th and 90th percentile of the step time over the spread of the fitted constants, around the
    hardware ``scales`` (default: the presets as they are): :func:`band_inputs` through the step function,
    :func:`~concurrency_model.uncertainty.band_of`."""
    fn = step_fn(sc.parallel.schedule, sc.training.zero_stage, sc.overlap, ("step",))
    return band_of(fn(**band_inputs(sc, w, stage, state, key, scales))["step"])


def runtime_spec(tr: dict) -> tuple:
    """``(framework, bucket_bytes, prefetch, gradient bytes, overlap, reduce_dtype)`` of a scenario's training section,
    which :func:`.runtime.runtime_of` turns into a :class:`~.runtime.Runtime` once the ZeRO stage is known (a
    ``framework`` left null follows the stage, :func:`.runtime.default_framework`)."""
    return tr.framework, tr.bucket_bytes, tr.prefetch, GRAD_BYTES.get(tr.dtype, 2), tr.overlap, \
        tr.reduce_dtype


def sync_of(sc: Scenario) -> tuple:
    """``(sync, ps_servers, compression, gossip_topology, runtime, recompute)`` of a scenario's training section
    (:meth:`.features.Workload.data_parallel`); sufficient factors are per sample, so ``sfb`` comes with the
    global batch: ``("sfb", global_batch)``."""
    tr = sc.training
    comp = ("sfb", sc.parallel.global_batch) if tr.compression == "sfb" else tr.compression
    return tr.sync, tr.ps_servers, comp, tr.gossip_topology, runtime_spec(tr), tr.recompute


def consistency_of(training: Training, replicas) -> dict:
    """``straggle``, ``sync_frac`` (:func:`.consistency.step_factors`, per number of data-parallel
    ``replicas``: a number or an array) and ``exposed`` (local SGD's averaging is not overlapped) of a
    scenario's training section. With gossip a worker waits for its neighbours only (D-PSGD, Lian et al.
    2017): the expected maximum is over ``degree + 1`` replicas [D], a lower bound (delays also travel
    along the graph)."""
    if training.sync == "gossip":
        hood = np.vectorize(lambda d: gossip_degree(training.gossip_topology, int(d)) + 1, otypes=[float])
        replicas = np.minimum(replicas, hood(replicas))
        replicas = float(replicas) if np.ndim(replicas) == 0 else replicas
    straggle, frac = step_factors(replicas, training.consistency, training.straggler_cv, training.staleness,
                                  training.local_steps)
    return {"straggle": straggle, "sync_frac": frac, "exposed": training.consistency == "local_sgd"}


def policies_of(tr, zero: int) -> tuple:
    """:func:`~concurrency_model.parallel.runtime.kernel_policies` of the scenario's runtime, the selective policy
    replaced by ``training.recompute_modules`` where given (Megatron-Core's modules, :mod:`..parallel.recompute`)."""
    sel, *rest = kernel_policies(tr.framework, zero, tr.fp8_recipe)
    return (recompute_modules(tr.recompute_modules) if tr.recompute_modules is not None else sel, *rest)


def prepare(sc: Scenario) -> tuple:
    """Checks, the workload, the slowest stage, memory (refused if over the device's), and the layout key
    ``(b, t, sp, recompute, p, d, m, v, zero)`` that :func:`step_inputs` takes (the context-parallel
    degree and algorithm travel in the stage, ``stage["cp"]``)."""
    par, tr, cl = sc.parallel, sc.training, sc.cluster
    d, t, p, v = par.data, par.tensor, par.pipeline, par.interleave
    b, m, sp = par.microbatch_size, sc.microbatches, par.sequence_parallel
    schedule, rec, zero = par.schedule, tr.recompute, tr.zero_stage
    c, alg, e = par.context, par.context_algorithm, par.expert
    args = (cl, tr.dtype, par.tensor_layers, tr.lora_rank, tr.lora_base_dtype, par.expert_imbalance,
            *policies_of(tr, zero), par.tp_overlap, par.moe_dispatcher, par.expert_overlap, par.stage_split,
            tr.compile, tr.cuda_graph)
    w = workload(sc.model, *args)
    check_lora(tr.lora_rank, tr.lora_base_dtype, w.graph(1))
    w.check_tensor(t)
    w.check_context(c, t, alg)
    w.check_expert(e, d)
    check_applies(w.expert_imbalance, w.expert_count)
    w.check_batch_norm(tr.batch_norm)
    check_modules(w.graph(1).layers(), w.selective)
    if p > w.layer_count:
        raise ValueError(f"parallel.pipeline: {p} stages exceed the {w.layer_count} blocks the model can be cut into")
    check_interleaved(schedule, m, p)  # also made on load; a Parallel built in code meets it here
    stage = w.stage(b, t, sp, rec, p, c, alg, e, host_per_kernel(w.dev, tr.host_overhead_s))
    # memory first: a configuration that does not fit is refused, not estimated
    state, mem = memory_at(sc, w, b, m)
    if mem["at_risk"]:  # the central figure fits, the band's upper end does not: estimated, and said so
        mem["reason"] += fits_with(sc, w, memory_at, lambda model: workload(model, *args))
    elif not mem["fits"]:
        raise ValueError(mem["reason"] + fits_with(sc, w, memory_at, lambda model: workload(model, *args)))
    return w, stage, state, mem, (b, t, sp, rec, p, d, m, v, zero)


def memory_at(sc: Scenario, w, b: int, m: int) -> tuple[float, dict]:
    """Model-state bytes and :func:`.memory.memory_per_device` of the scenario's layout at microbatch ``b``
    with ``m`` microbatches a step."""
    par, tr = sc.parallel, sc.training
    t, p, v, c, e = par.tensor, par.pipeline, par.interleave, par.context, par.expert
    rec, schedule = tr.recompute, par.schedule
    shape = transformer_shape(w.graph(b))
    act_graph = w.activation_bytes(b, rec, t) if shape is None else 0.0
    frozen = w.frozen_weight_bytes(e)
    fw = tr.framework or default_framework(tr.zero_stage)  # null: the runtime the ZeRO stage implies
    sac = compose.sac_of(fw, w.graph(1))  # torchtitan's per-op selective checkpointing under fsdp2
    sharded = allocator.state_zero_stage(fw, state_dtype(tr.dtype), tr.zero_stage)  # as the model state is sharded
    shape_t = w.memory_shape(shape, fw)
    mem_fn = compose.memory_fn(w.state_params(e), tr.optimizer, tr.dtype, sharded,
                               "1f1b" if schedule == "interleaved" and v == 1 else schedule, rec,
                               par.sequence_parallel, shape_t, p == 1, par.context_algorithm,
                               shape["kv"] if shape else None, w.replicated_params, frozen, sac, w.embedding_params,
                               tr.optimizer_dtype)
    state, act = (float(x) for x in mem_fn(b, t, p, m, v, par.data, act_graph, c))
    act = gpipe_activation_bytes(w, shape, schedule, rec, b, t, par.sequence_parallel, p, m, c,
                                 par.context_algorithm, e, tr.host_overhead_s) or act
    # the optimizer's pass streams the trained parameters' state, not the frozen weights (:mod:`.lora`)
    trained = state - compose.frozen_bytes(frozen, tr.zero_stage, p == 1, t, p, par.data * c)
    if sharded != tr.zero_stage:  # DeepSpeed's BF16_Optimizer: its memory sharded, its step's time stage 0's
        trained += unsharded_optimizer_bytes(w, tr, tr.zero_stage, sharded, e, p == 1, frozen, t, p, par.data * c)
    runtime = {k: float(x) for k, x in compose.framework_memory_fn(
        fw, w.state_params(e), tr.dtype, tr.zero_stage,
        "1f1b" if schedule == "interleaved" and v == 1 else schedule,
        rec, par.sequence_parallel, shape_t, p == 1,
        allocator.is_hopper(sc.cluster.device.name), w.replicated_params, sac, tr.loss, w.embedding_params,
        tr.cuda_context_bytes)(
            b, t, p, m, v, par.data, act, c).items()}
    extra = {k: runtime[k] for k in allocator.PARTS} if fw != "ideal" else None  # ideal: today's figures exactly
    # ZeRO 1 with expert parallelism: the experts' optimizer state is sharded over d / e ranks, not d (:mod:`.expert`)
    x_opt = w.expert_optimizer_extra(e, sharded, tr.optimizer, state_dtype(tr.dtype), t, p, par.data * c,
                                     tr.optimizer_dtype)
    state, trained = state + x_opt, trained + x_opt
    total = state + act + sum((extra or {}).values())
    mem = memory.memory_per_device(state, act, sc.cluster.device, extra=extra,
                                   headroom=allocator.upper_headroom_bytes(fw, total, runtime))
    outside = sum(runtime[k] for k in allocator.OUTSIDE)
    mem["reserved_bytes"] = allocator.reserved_bytes(mem["total_bytes"] - outside, runtime["fragmentation"], outside,
                                                     mem["capacity_bytes"])
    mem["fragmentation_bytes"] = runtime["fragmentation"]  # the reserved figure's part above the allocated peak
    # the model state's split, for the breakdown: the compiled function the sweep evaluates (the same bits)
    parts = dict(compose.state_parts_fn(w.state_params(e), tr.optimizer, tr.dtype, sharded, p == 1,
                                        w.replicated_params, frozen, w.embedding_params, tr.optimizer_dtype)(
        float(t), float(p), float(par.data * c)))
    parts["optimizer"] = parts["optimizer"] + x_opt
    mem.update({f"{k}_bytes": float(v) for k, v in parts.items()})
    return trained, mem


def gpipe_activation_bytes(w, shape, schedule: str, rec: str, b: int, t: int, sp: bool, p: int, m: int, c: int,
                           algorithm: str, e: int, host_overhead_s) -> float | None:
    """A graph model's (a CNN's) activations on its busiest stage under GPipe with ``full`` recompute: the stages'
    inputs for all ``m`` microbatches and one microbatch's activations of the stage
    (:meth:`.layerwise.LayerwiseMixin.rematerialised_bytes`, GPipe §2.3), on :meth:`.workload.Workload.stage`'s
    partition, in the place of the sqrt(n) checkpoints a stage keeps for each microbatch otherwise; None where that
    does not apply (a transformer, another schedule or recompute, a context split, Krizhevsky's hybrid)."""
    if shape is not None or schedule != "gpipe" or rec != "full" or c != 1:
        return None
    stages = w.stage(b, t, sp, rec, p, c, algorithm, e, host_per_kernel(w.dev, host_overhead_s))["stages"]
    return w.rematerialised_bytes(b, t, stages, m)


def unsharded_optimizer_bytes(w, tr, zero: int, sharded: int, e: int, single_stage: bool, frozen: float, t, p, d):
    """What the optimizer state of ZeRO stage ``zero`` exceeds that of the stage ``sharded`` it is held as
    (:func:`.allocator.state_zero_stage`) by, on arrays or numbers ``t, p, d``: DeepSpeed's ``BF16_Optimizer`` shards
    its state as ZeRO-1 does, but its step is priced as stage 0's, the state a stage-0 step streams: its all-reduce is
    stage 0's (in bf16: the engine casts the fp32 gradients to its ``communication_data_type``, bf16 in bf16 training,
    microsoft/DeepSpeed @ 56c52238 ``engine.py`` ``allreduce_bucket``), its fp32 accumulation after every microbatch
    is priced (:meth:`.data_parallel.DataParallelMixin.fp32_accumulation`), and the step on the shard with the
    all-gather of the updated bf16 weights after it (``step``, ``update_lp_params``) is not modelled
    (docs/residuals.md)."""
    whole, shard = (compose.state_parts_fn(w.state_params(e), tr.optimizer, tr.dtype, z, single_stage,
                                           w.replicated_params, frozen, w.embedding_params,
                                           tr.optimizer_dtype)(t, p, d)["optimizer"]
                    for z in (zero, sharded))
    return whole - shard


def batch_region(sc: Scenario, w, key: tuple) -> BatchRegion:
    """Where the scenario's global batch sits in the paper's Fig. 6a (:mod:`.batch_size`): a device's
    samples/s at microbatch ``x`` is ``x`` over its stage's forward and backward (with recompute) seconds,
    each pass at least the host's issue time, as :mod:`.compose` has it."""
    par, tr = sc.parallel, sc.training
    b, t, sp, rec, p, d, m = key[:7]
    host = host_per_kernel(w.dev, tr.host_overhead_s)

    def rate(x):
        st = w.stage(int(x), t, sp, rec, p, par.context, par.context_algorithm, par.expert, host)
        h_f, h_b = host_seconds(st, w.dev, tr.host_overhead_s)
        return x / (max(st["f"].seconds(), h_f) + max(st["b"].seconds() + st["r"].seconds(), h_b))

    def fits(x):
        return x == b or memory_at(sc, w, int(x), max(1, par.global_batch // (d * int(x))))[1]["fits"]
    unit = t if par.tensor_layers == "fc" else 1  # the hybrid splits each microbatch over the tensor group
    return region(par.global_batch, tr.max_global_batch, par.global_batch // d, rate, fits, unit)


def runtime_name(sync: tuple, zero: int) -> str:
    """The runtime a :func:`sync_of` tuple names (its ``runtime`` entry's framework, null: the one ZeRO stage ``zero``
    implies, :func:`.runtime.default_framework`); ``ideal`` for a tuple without a runtime.

    >>> runtime_name(("allreduce", 0, "none"), 0), runtime_name(("allreduce", 0, "none", "ring", (None,)), 0)
    ('ideal', 'megatron')
    """
    if len(sync) < 5:
        return "ideal"
    return sync[4][0] or default_framework(zero)


def step_inputs(w, stage: dict, b: int, t: int, sp: bool, rec: str, p: int, d: int, m, v, zero: int, state_bytes,
                seconds=None, comm=None, optimizer=None, sync: tuple = ("allreduce", 0, "none"),
                host: float | None = None, host_wait=None, consistency: dict | None = None,
                batch_norm: str = "local", schedule: str = "1f1b") -> dict:
    """Inputs of :func:`.step.step_fn` for one layout of workload ``w``: kernel parts become seconds
    through ``seconds`` (default: on the nominal device), communication triples through ``comm`` (default
    :func:`.features.triple_seconds`) and the optimizer's state bytes through ``optimizer`` (default
    :meth:`.features.Workload.optimizer_seconds`); :mod:`.sensitivity` passes symbolic ones. ``host``: host
    seconds per kernel (:func:`host_per_kernel`); ``host_wait``: the stage's host issue seconds (default
    :func:`host_seconds`; :mod:`.sensitivity` passes symbolic ones); ``consistency``: :func:`consistency_of`
    (default: synchronous, no stragglers); ``batch_norm``: ``local`` or ``sync`` (the stage's batch-norm
    all-reduces in both passes, and again in a fully recomputed forward); ``schedule``: the pipeline schedule (whether
    the runtime's exchanges block, :func:`.pipeline.p2p_blocking`)."""
    seconds = seconds or (lambda parts: parts.seconds())
    comm = comm or triple_seconds
    optimizer = optimizer or w.optimizer_seconds
    cp = stage.get("cp") or {"c": 1, "algorithm": "ring"}
    c, alg = cp["c"], cp["algorithm"]
    c_cf, c_cb = (0.0, 0.0) if c == 1 else context_exposed(
        c, cp["layers"], cp["rec_layers"], seconds(cp["blk_f"]), seconds(cp["blk_b"]), comm(cp["kv"]), comm(cp["a2a"]),
        cp.get("gathered", 0.0))
    if c > 1:  # a CNN's spatial split: halo exchanges, batch-norm statistics, where the rows end
        c_cf, c_cb = c_cf + comm(cp["halo_f"]), c_cb + comm(cp["halo_b"])
    dp = w.data_parallel(t, p, d * c, *sync, e=stage.get("e", 1), zero=zero)
    bn = w.batch_norm_sync(stage["bn_channels"], t, d) if batch_norm == "sync" else ZERO_TRIPLE
    triples = {**{k: stage[k] for k in ("tp_f", "tp_b", "tp_r", "ep_f", "ep_b", "ep_r")}, **dp,
               "p2p": w.p2p(b, t, sp, rec, p, d, c, alg, host_per_kernel(w.dev, host),
                            p2p_scatter_gather(runtime_name(sync, zero))), "bn_f": bn, "bn_b": bn,
               "bn_r": bn if rec == "full" else ZERO_TRIPLE}
    h_f, h_b = (host_wait or (lambda st: host_seconds(st, w.dev, host)))(stage)
    return assemble(seconds(stage["f"]), seconds(stage["b"]), seconds(stage["r"]), triples, comm, zero, p, m, v,
                    optimizer(state_bytes), dp["kappa"], c_cf, c_cb, h_f, h_b, **(consistency or {}),
                    c_w=seconds(stage["w"]), p2p_blocks=p2p_blocking(runtime_name(sync, zero), schedule),
                    fill=stage["fill"])


def assemble(c_f, c_b, c_r, triples: dict, comm, zero: int, p, m, v, opt, kappa, c_cf, c_cb, h_f=0.0, h_b=0.0,
             straggle=0.0, sync_frac=1.0, exposed: bool = False, c_w=0.0, p2p_blocks=0, fill=1.0) -> dict:
    """The inputs of :func:`.step.step_fn` from a stage's compute seconds and its communication
    ``triples`` (``tp_f, tp_b, tp_r, ep_f, ep_b, ep_r, bn_f, bn_b, bn_r, p2p, ar, rs, ag, emb, last_ar, last_rs``;
    ``emb``: the tied embedding's all-reduce) priced by ``comm``, the host issue seconds ``h_f``, ``h_b``
    (:func:`host_seconds`) and the consistency factors
    (:func:`consistency_of`; ``exposed``: the whole allreduce is exposed, as its last bucket; ``c_w``: the
    weight-gradient seconds inside ``c_b``, :mod:`.compose`; ``p2p_blocks``: how the runtime blocks on every pipeline
    exchange, :func:`.pipeline.p2p_blocking`, 0 / 1 / 2 or, from a sweep, an array of them per layout): shared by
    :func:`step_inputs` (one layout) and :mod:`concurrency_model.sweep` (arrays of layouts)."""
    t_p2p = comm(triples["p2p"])
    if isinstance(p2p_blocks, np.ndarray):
        t_p2p = np.where(p2p_blocks > 0, t_p2p * blocking_p2p_factor(p, m, v, p2p_blocks), t_p2p)
    elif p2p_blocks:
        t_p2p = t_p2p * blocking_p2p_factor(p, m, v, p2p_blocks)
    return {"h_f": h_f, "h_b": h_b, "c_f": c_f, "c_b": c_b, "c_w": c_w,
            "c_r": c_r + comm(triples["tp_r"]) + comm(triples["ep_r"]) + comm(triples["bn_r"]),
            "c_tf": comm(triples["tp_f"]), "c_tb": comm(triples["tp_b"]), "c_ef": comm(triples["ep_f"]),
            "c_eb": comm(triples["ep_b"]), "c_nf": comm(triples["bn_f"]), "c_nb": comm(triples["bn_b"]),
            "c_cf": c_cf, "c_cb": c_cb, "t_p2p": t_p2p,
            "p": p, "m": m, "v": v, "ar": comm(triples["ar"]), "rs": comm(triples["rs"]), "ag": comm(triples["ag"]),
            "agb": comm(triples["agb"]), "x_dp": comm(triples["x_dp"]), "emb": comm(triples["emb"]),
            "last": comm(triples["ar"] if exposed else triples["last_ar"] if zero == 0 else triples["last_rs"]),
            "opt": opt, "kappa": kappa, "straggle": straggle, "sync_frac": sync_frac, "fill": fill}


# -- the step as one sympy expression in the what-if scales (used by :mod:`.sensitivity`) --------------------
SCALES = {"s_flops": "peak FLOP/s", "s_mem_bw": "memory bandwidth", "s_launch": "kernel launch overhead",
          "s_intra": "intra-node link bandwidth", "s_inter": "inter-node link bandwidth",
          "s_latency": "network latency", "s_host": "host (framework) seconds per kernel",
          "m": "microbatches per step (global batch at fixed data x microbatch)"}


def step_expression(scenario) -> tuple[sp.Expr, dict]:
    """The step time of ``scenario`` as a sympy expression and the values of its symbols (see the module).

    >>> from concurrency_model import estimate
    >>> sc = {"model": "gpt2", "parallel": {"data": 8, "global_batch": 64, "microbatch_size": 8}}
    >>> T, at = step_expression(sc)
    >>> abs(float(T.subs(at)) / estimate(sc).step_time_s - 1) < 1e-12
    True
    """
    sc = load_scenario(scenario)
    w, stage, state, _, key = prepare(sc)
    s = {k: sp.Symbol(k, positive=True) for k in SCALES}

    def seconds(parts):
        return sum(float(n) * (sp.Max(float(c) / s["s_flops"], float(mm) / s["s_mem_bw"], evaluate=False)
                               + float(e) / s["s_mem_bw"] + float(la) * s["s_launch"])
                   for c, mm, e, la, n in zip(parts.compute, parts.memory, parts.extra, parts.launch, parts.count))

    def host_wait(stage):  # the host's issue seconds, scaled by s_host
        return tuple(x * s["s_host"] for x in host_seconds(stage, w.dev, sc.training.host_overhead_s))

    def comm(tr):
        return float(tr[0]) * s["s_latency"] + sp.Max(float(tr[1]) / s["s_intra"], float(tr[2]) / s["s_inter"],
                                                      evaluate=False)

    def optimizer(state_bytes):
        return float(w.optimizer_seconds(state_bytes, 1.0, 0.0)) / s["s_mem_bw"] + \
            float(w.dev.launch_overhead) * s["s_launch"]

    b, t, spar, rec, p, d, m, v, zero = key
    inputs = step_inputs(w, stage, b, t, spar, rec, p, d, s["m"], v, zero, state, seconds, comm, optimizer,
                         sync=sync_of(sc), host=sc.training.host_overhead_s, host_wait=host_wait,
                         consistency=consistency_of(sc.training, d * sc.parallel.context),
                         batch_norm=sc.training.batch_norm, schedule=sc.parallel.schedule)
    expr = compose.step_expressions(sc.parallel.schedule, zero, sc.overlap)["step"]
    expr = expr.xreplace({compose.SYMBOLS[k]: sp.sympify(x) for k, x in inputs.items()})
    values = {sym: (m if k == "m" else 1) for k, sym in s.items()}
    return expr, values
