"""Step time, breakdown and memory of a training scenario: data x tensor x pipeline x context parallelism.

Composition (DESIGN.md "How the pieces meet"; Narayanan et al. 2021 for the 3D layout):

1. The model is built for one microbatch of ``b`` samples; every layer's forward, ∇x and ∇w time on one
   device is :func:`~concurrency_model.timing.graph.layer_times` with the device's share under Megatron
   tensor parallelism (Shoeybi et al. 2019; sequence parallelism: Korthikanti et al. 2022).
2. Tensor-parallel communication per microbatch (on the critical path): an allreduce of each row-split
   GEMM's output in the forward pass and of each column-split GEMM's input gradient in the backward pass
   (Shoeybi et al. §3, the f/g operators); with sequence parallelism each becomes a reduce-scatter plus an
   allgather of the same volume. The tensor group sits inside a node (the fast tier) when it fits.
3. Recompute: ``full`` runs every transformer block's forward again in the backward pass (not the embedding,
   final norm, output layer and loss around them; a network without blocks: every layer,
   :func:`~concurrency_model.parallel.recompute.full_recompute_rows`); ``selective`` runs the attention core
   again (Korthikanti et al. §5).
4. Layers are split into ``pipeline`` stages by PipeDream's partitioner (minimise the slowest stage);
   the slowest stage's per-microbatch forward and backward times drive the schedule's closed form
   (:mod:`.pipeline`), with a point-to-point transfer of the boundary activation per microbatch.
5. Data parallelism over ``data`` ranks that share the node's NICs with the other tensor ranks: ZeRO 0
   allreduces the accumulated gradients once per step, 1 reduce-scatters them and gathers the updated
   parameters, 2 reduce-scatters each microbatch's gradients, 3 also gathers the parameters in each
   microbatch's forward and backward pass (Rajbhandari et al. 2020 §5, §7). With ``overlap`` each
   transfer hides behind the compute it follows (wait-free backprop, Li et al. 2020; ZeRO prefetching):
   what does not fit is exposed, and always the last 25 MiB gradient bucket.
   Consistency (``training.consistency``, paper §7.1; :func:`.consistency.step_factors`, [D]): with
   ``straggler_cv`` > 0 the replicas' compute time per step varies and a synchronous step waits for the
   slowest of the ``data x context`` replicas (the expected gaussian maximum); ``ssp`` with bound
   ``staleness`` pays that wait as a window of ``staleness + 1`` steps, ``asynchronous`` (parameter
   servers) not at all, and ``local_sgd`` averages the models every ``local_steps`` steps (not overlapped).
6. The optimizer step is a memory-bound pass over the device's (ZeRO-sharded) model state.
7. Context parallelism over ``context`` devices (:mod:`.features`): each device holds ``s / context``
   tokens of every sequence; ring attention (Liu et al. 2023) adds ``context - 1`` attention blocks per
   layer and pass and the part of its key/value sends that the blocks do not hide; Ulysses (Jacobs et al.
   2023) runs attention on the whole sequence for ``heads / context`` heads between all-to-alls. The
   exposed communication is on the critical path (``context_parallel_comm_s``); data-parallel gradients
   are reduced, and ZeRO shards, over ``data x context`` ranks. On a CNN ``context`` is the spatial
   split (:mod:`.spatial`): every feature map by rows, with halo exchanges, batch-norm statistics
   all-reduced over the group, and a gather or reduction where the rows end (``context_parallel_comm_s``).
8. Expert parallelism over ``expert`` of the data-parallel replicas (:mod:`.expert`): each holds
   ``1 / expert`` of every mixture-of-experts layer's experts; two all-to-alls per MoE layer and pass (dispatch,
   combine) on the critical path (``expert_parallel_comm_s``), the experts' state divided, their gradients
   reduced over ``data / expert`` replicas.
9. Batch normalization (``training.batch_norm``): ``local`` normalizes over a device's own samples;
   ``sync`` all-reduces each batch-norm layer's ``2 C`` statistics forward and backward over the ``data``
   replicas, on the passes' critical path (``batch_norm_sync_s``;
   :meth:`.data_parallel.DataParallelMixin.batch_norm_sync`).
10. A network without transformer blocks (a CNN, an MLP) takes ``tensor`` as the paper's model
    parallelism (§6.2; :mod:`~concurrency_model.models.channel_split`): every convolution and fully
    connected layer computes ``1 / tensor`` of its output channels from its whole input, gathered forward
    (its ∇x reduce-scattered backward, both in ``tensor_parallel_comm_s``); channel-local layers (batch
    norm, activations, pooling, residual adds) and grouped convolutions work on the device's channels;
    weights, gradients and the activations other than the gathered inputs are divided by ``tensor``.
11. ``tensor_layers = "fc"`` (:mod:`.layerwise`): Krizhevsky's hybrid, the convolutions data-parallel over
    ``data x tensor`` devices (each on ``1 / tensor`` of its group's microbatch) and only the fully connected
    layers split by neurons over the tensor group, which gathers the last convolutional activations.

The numbers come from :mod:`.features` (cached per model, cluster and dtype) and are composed by the
lambdified expressions of :mod:`.compose`, the same path :mod:`concurrency_model.sweep` evaluates on
arrays: a configuration gets the same step time from both.

A configuration over the device's memory raises ``ValueError`` with the reason, as do degrees that do
not divide heads, hidden sizes, layers or the sequence length.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property, partial
from typing import TYPE_CHECKING

import numpy as np
import sympy as sp

from .. import compiled, uncertainty
from ..ops.routing import check_applies
from ..parallel import allocator, memory
from ..parallel.batch_size import BatchRegion, region
from ..parallel.consistency import step_factors
from ..parallel.data_parallel import GRAD_BYTES
from ..parallel.gossip import gossip_degree
from ..parallel.host import host_per_kernel, host_seconds
from ..parallel.lora import check_lora
from ..parallel.pipeline import blocking_p2p_factor, p2p_blocking, p2p_scatter_gather
from ..parallel.runtime import default_framework, kernel_policies
from ..scenario import CURRENCY, Scenario, Training, check_interleaved, load_scenario
from ..uncertainty import SAMPLES, band_of, draws
from ..units import state_dtype
from . import compose
from .layer_table import by_kind, layer_table
from .remedies import fits_with
from .run import WAIT_PARTS, busy_share, run_cost
from .workload import (MEMORY_SHAPE, ZERO_TRIPLE, context_exposed, model_key, stable_model, transformer_shape,
                       triple_seconds, workload)

if TYPE_CHECKING:  # annotations only
    import pandas as pd


@dataclass
class Estimate:
    """The result: ``step_time_s``, named ``breakdown`` seconds, memory, and the scenario it came from."""

    step_time_s: float
    step_time_p10_s: float  # the 80% band from the fitted constants' spread (:mod:`concurrency_model.uncertainty`)
    step_time_p90_s: float
    throughput_samples_per_s: float
    flop_per_step: float
    achieved_flops_per_device: float
    memory_bytes_per_device: float
    breakdown: dict
    memory: dict
    scenario: Scenario = field(repr=False)
    stages: list = field(default_factory=list, repr=False)
    run: dict | None = None  # steps, days, GPU-hours, cost, energy of the scenario's run, if it has one
    context_split: str = ""  # with context > 1: "rows" of a CNN's feature maps or the "sequence" of a transformer
    region_of: object = field(default=None, repr=False)  # () -> BatchRegion, computed when first asked for
    expert_imbalance_factor: float = 1.0  # the busiest device's routed rows over the mean (:mod:`..routing`)
    layers_of: object = field(default=None, repr=False)  # () -> the layer table (:mod:`.layer_table`)
    # the band's upper end (the caching allocator's reserved headroom, :mod:`.allocator`); None: the central figure
    memory_p90_bytes_per_device: float | None = None
    # steps, seconds, GPU-hours (and cost) to training.target's quality, with bands (:mod:`..convergence.target`)
    target: dict | None = None

    @property
    def memory_at_risk(self) -> bool:
        """The central figure fits the device and the band's upper end does not (:mod:`.allocator`)."""
        return bool(self.memory.get("at_risk"))

    @cached_property
    def batch_region(self) -> BatchRegion | None:
        """The global batch in the paper's Fig. 6a (:mod:`.batch_size`); computed on first use (a few more
        stage timings), not for every estimate of a validation or a report."""
        return self.region_of() if self.region_of else None

    @cached_property
    def _symbolic(self) -> tuple:
        return step_expression(self.scenario)

    @property
    def expression(self):
        """The step time as a sympy expression in the what-if scales of the hardware (``s_flops``, ``s_mem_bw``,
        ``s_launch``, ``s_intra``, ``s_inter``, ``s_latency``, ``s_host``: factors of the presets' numbers) and in
        ``m``, the microbatches a step (:func:`step_expression`; built on first use).
        ``expression.subs(expression_values)`` is ``step_time_s``; substitute other values for a what-if, or
        ``sympy.lambdify`` it for arrays.

        >>> e = estimate({"model": "gpt2", "parallel": {"data": 8, "global_batch": 64, "microbatch_size": 8}})
        >>> abs(float(e.expression.subs(e.expression_values)) / e.step_time_s - 1) < 1e-12
        True
        >>> s_inter = next(x for x in e.expression_values if x.name == "s_inter")
        >>> float(e.expression.subs({**e.expression_values, s_inter: 2})) <= e.step_time_s * (1 + 1e-12)  # 2x network
        True
        """
        return self._symbolic[0]

    @property
    def expression_values(self) -> dict:
        """The values of :attr:`expression`'s symbols for the scenario as given (every scale 1, ``m`` its
        microbatches)."""
        return self._symbolic[1]

    @property
    def notes(self) -> tuple:
        """What the step time does not say: a global batch outside the paper's region B."""
        return tuple(self.batch_region.notes()) if self.batch_region else ()

    def to_dict(self) -> dict:
        return {"step_time_s": self.step_time_s, "step_time_p10_s": self.step_time_p10_s,
                "step_time_p90_s": self.step_time_p90_s, "throughput_samples_per_s": self.throughput_samples_per_s,
                "flop_per_step": self.flop_per_step, "achieved_flops_per_device": self.achieved_flops_per_device,
                "memory_bytes_per_device": self.memory_bytes_per_device,
                "memory_p90_bytes_per_device": (self.memory_bytes_per_device if self.memory_p90_bytes_per_device is None
                                                else self.memory_p90_bytes_per_device),
                "memory_at_risk": self.memory_at_risk,
                **({"memory_risk": self.memory["reason"]} if self.memory_at_risk else {}), "breakdown": self.breakdown,
                "memory": {k: v for k, v in self.memory.items() if k != "reason"}, "gpus": self.scenario.gpus,
                "cluster": self.scenario.cluster.name, "device": self.scenario.cluster.device.name,
                "parallel": {**self.scenario.parallel.to_dict(),
                             **({"context_split": self.context_split} if self.context_split else {}),
                             **({"expert_imbalance_factor": self.expert_imbalance_factor}
                                if self.scenario.parallel.expert > 1 else {})},
                "training": self.training.to_dict(), **(self.run or {}), **(self.target or {}),
                **({"currency": self.scenario.run.currency or CURRENCY} if (self.run or {}).get("cost") is not None
                   else {}),  # the unit of cost (:mod:`.run`)
                **({"batch_region": self.batch_region.to_dict()} if self.batch_region else {}),
                **({"notes": list(self.notes)} if self.notes else {})}

    @property
    def training(self) -> Training:
        """The scenario's training section with the runtime it was priced with (``framework``: a null one
        follows the ZeRO stage, :func:`.runtime.default_framework`)."""
        tr = self.scenario.training
        return replace(tr, framework=tr.framework or default_framework(tr.zero_stage))

    @cached_property
    def _layers(self) -> pd.DataFrame:
        return self.layers_of()

    def layers(self) -> pd.DataFrame:
        """One microbatch on the slowest pipeline stage, layer by layer (:func:`.layer_table.layer_table`):
        ``layer``, ``kind``, ``forward_s``, ``backward_s``, ``recompute_s``, ``tensor_comm_s``, ``expert_comm_s``,
        ``context_comm_s``, ``total_s``, ``share`` of the stage and ``bound`` (compute, memory or launch).

        >>> e = estimate({"model": "gpt2", "parallel": {"data": 8, "global_batch": 64, "microbatch_size": 8}})
        >>> t = e.layers().set_index("layer")
        >>> t.loc["h.0.fc1", "bound"], t.loc["h.0.ln1", "bound"], round(float(t["share"].sum()), 12)
        ('compute', 'memory', 1.0)
        """
        return self._layers.copy()

    def layer_kinds(self) -> pd.DataFrame:
        """:meth:`layers` summed by kind, largest first (:func:`.layer_table.by_kind`)."""
        return by_kind(self._layers)

    def to_frame(self) -> pd.DataFrame:
        """One row per breakdown component: ``seconds``, ``in_step`` (the parts that add up to the step,
        :data:`.compose.STEP_PARTS`) and their ``share`` of it (NaN for totals and overlapped seconds)."""
        import pandas as pd  # heavy (0.4 s): loaded when a table is built
        return pd.DataFrame([{"component": k, "seconds": v, "in_step": k in compose.STEP_PARTS,
                              "share": v / self.step_time_s if k in compose.STEP_PARTS else float("nan")}
                             for k, v in self.breakdown.items()])

    def __repr__(self) -> str:
        p = self.scenario.parallel
        extra = "".join(f" x {k} {getattr(p, k)}" for k in ("context", "expert") if getattr(p, k) > 1)
        return (f"Estimate(step {self.step_time_s:.4g} s, 80% band {self.step_time_p10_s:.4g}-"
                f"{self.step_time_p90_s:.4g} s; {self.scenario.gpus} devices as data {p.data} x tensor "
                f"{p.tensor} x pipeline {p.pipeline}{extra}; {self.throughput_samples_per_s:,.4g} samples/s; "
                f"{self.memory_bytes_per_device / 1e9:,.3g} GB per device)")


def estimate(scenario) -> Estimate:
    """Estimate one training step of ``scenario`` (a :class:`~concurrency_model.scenario.Scenario`, a dict
    or a file path).

    >>> e = estimate({"model": "gpt2", "cluster": "dgx-a100", "parallel": {"data": 8, "global_batch": 64,
    ...               "microbatch_size": 8}})
    >>> e.breakdown["bubble_s"], e.scenario.gpus
    (0.0, 8)
    """
    sc = load_scenario(scenario)
    par, tr = sc.parallel, sc.training
    rec = prepared(sc)  # the numbers of the scenario alone, memoised (:func:`prepared`)
    inputs, mem = rec["inputs"], dict(rec["memory"])
    out = {k: float(x) for k, x in compose.step_fn(par.schedule, tr.zero_stage, tr.overlap)(**inputs).items()}
    breakdown = {k: float(x) for k, x in compose.breakdown(inputs, out).items()}
    # the step from the function the sweep evaluates (the step alone: its own common subexpressions, so its own
    # order of additions), so that a configuration's step time is the sweep's to the last bit
    step = float(compose.step_fn(par.schedule, tr.zero_stage, tr.overlap, ("step",))(**inputs)["step"])
    model_flop = rec["model_flop"]
    run = None
    if sc.run:
        run = run_cost(sc.run, step, par.global_batch, sc.gpus,
                       busy_share(step, sum(breakdown[k] for k in WAIT_PARTS)),
                       float(sc.cluster.device.board_power_w), rec["seq_len"])
    lo, hi = band_of(band_steps_of(sc, rec))
    target = None
    if tr.target is not None:  # time to a quality target: steps at the global batch x this step (issue 40)
        from ..convergence.target import curve_of, penalty_of, time_to_target, with_penalty
        curve = curve_of(tr.target, steps=True)
        target = time_to_target(curve, par.global_batch, step, sc.gpus, sc.run.price_per_gpu_hour if sc.run else None)
        penalty = penalty_of(tr, par.data)  # stale or local updates: their step penalty, model only
        if penalty is not None:
            target = with_penalty(curve, target, par.global_batch, step, sc.gpus, penalty)
    return Estimate(step, lo, hi, par.global_batch / step, model_flop, model_flop / step / sc.gpus,
                    float(mem["total_bytes"]), breakdown, mem, sc, list(rec["stages"]), run,
                    ("rows" if rec["spatial"] else "sequence") if par.context > 1 else "",
                    partial(region_of, sc, rec), rec["routing_factor"], partial(layers_of, sc),
                    float(mem["upper_bytes"]), target)


def band_inputs(sc: Scenario, w, stage: dict, state, key: tuple, scales: dict | None = None) -> dict:
    """The inputs of :func:`.compose.step_fn` on :func:`~concurrency_model.uncertainty.draws` of the fitted
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
    fn = compose.step_fn(sc.parallel.schedule, sc.training.zero_stage, sc.training.overlap, ("step",))
    return band_of(fn(**band_inputs(sc, w, stage, state, key, scales))["step"])


# -- the fast path (issue 41): what an estimate computes from the scenario alone, kept per scenario -----------------
MEMO_SIZE = 64  # scenarios whose numbers a process keeps (the oldest goes first)
_MEMO: dict = {}
NUMBERS = ("inputs", "memory", "stages", "model_flop", "routing_factor", "seq_len", "spatial")  # a record's numbers


def scenario_key(sc: Scenario) -> tuple:
    """What :func:`prepare` and the step's inputs depend on: the model (:func:`.workload.model_key`), the cluster and
    every parallel and training field (all of them, not a list of those known to matter, so that a field added
    later can never read another scenario's numbers)."""
    return (model_key(sc.model), repr(sc.cluster), repr(sorted(sc.parallel.to_dict().items())),
            repr(sorted(sc.training.to_dict().items())))


def prepared(sc: Scenario) -> dict:
    """The numbers :func:`estimate` computes from the scenario alone, before it evaluates the step function
    (:data:`NUMBERS`): ``inputs`` of :func:`.compose.step_fn` at the presets' numbers, ``memory`` (:func:`memory_at`'s
    figures), ``stages``, ``model_flop``, ``routing_factor``, ``seq_len`` (a transformer's sequence, else None) and
    ``spatial``; the step on the band's draws comes from :func:`band_steps_of`.

    Built once by :func:`prepare` (the model, its layers' kernels, the partition, memory), then kept for the
    process (the last :data:`MEMO_SIZE` scenarios, by :func:`scenario_key`) and, for a model that is the same in
    every process (:func:`.workload.stable_model`), across processes in the cache of numbers of
    :mod:`concurrency_model.compiled` (keyed as its compiled functions are: the package's sources and versions): a
    later estimate of the scenario evaluates the compiled step function on these numbers without building the model.
    The scalars travel as one JSON text (exact for floats and ints) in the process that builds them too, so a fresh
    and a cached record are the same values. A scenario :func:`prepare` refuses raises its ``ValueError`` every time.

    >>> sc = load_scenario({"model": "gpt2", "parallel": {"data": 8, "global_batch": 64, "microbatch_size": 8}})
    >>> rec = prepared(sc)
    >>> rec is prepared(sc), rec["stages"], rec["inputs"]["m"]
    (True, [(0, 149)], 1)
    """
    k = scenario_key(sc)
    rec = _MEMO.get(k)
    if rec is None:
        for old in _MEMO.values():  # the objects of prepare() stay with the newest record only (memory)
            old["objects"] = None
        # the model is held, so that an object model's id in the key is not reused while the record is kept
        rec = {"key": k, "model": sc.model, "stable": stable_model(sc.model), "objects": None, "band": {}}

        def build() -> dict:
            w, stage, state, key, mem = _objects(sc, rec)
            par, tr = sc.parallel, sc.training
            inputs = step_inputs(w, stage, *key, state, sync=sync_of(sc), host=tr.host_overhead_s,
                                 consistency=consistency_of(tr, par.data * par.context),
                                 batch_norm=tr.batch_norm, schedule=par.schedule)
            b = par.microbatch_size
            shape = transformer_shape(w.graph(b))
            numbers = {"inputs": inputs, "memory": mem, "stages": stage["stages"],
                       "model_flop": w.training_flop(b) * (par.global_batch / b),
                       "routing_factor": w.routing_factor(b, par.expert),
                       "seq_len": shape["s"] if shape else None, "spatial": bool(w.spatial)}
            return {"json": np.frombuffer(json.dumps(numbers, default=_plain).encode(), dtype=np.uint8)}
        text = (compiled.arrays("estimate", k, build) if rec["stable"] else build())["json"]
        rec.update(json.loads(text.tobytes().decode()))
        rec["stages"] = [tuple(x) for x in rec["stages"]]
        if len(_MEMO) >= MEMO_SIZE:
            _MEMO.pop(next(iter(_MEMO)))
        _MEMO[k] = rec
    return rec


def _plain(x):
    """A numpy scalar as JSON writes the Python value (``json.dumps``' ``default``)."""
    if isinstance(x, np.generic):
        return x.item()
    raise TypeError(f"not JSON: {type(x).__name__}")


def _objects(sc: Scenario, rec: dict) -> tuple:
    """``(w, stage, state, key, memory)`` of :func:`prepare` for a :func:`prepared` record, built when first needed
    (a record read from the cache needs them only for the band on other spreads, the batch region or the layers)."""
    if rec["objects"] is None:
        w, stage, state, mem, key = prepare(sc)
        rec["objects"] = (w, stage, state, key, mem)
    return rec["objects"]


def band_steps_of(sc: Scenario, rec: dict) -> np.ndarray:
    """The step time of a :func:`prepared` scenario on each of :func:`~concurrency_model.uncertainty.draws`
    (:func:`band_inputs` through the sweep's step function), kept in its record per spread of the fitted constants
    (:func:`~concurrency_model.uncertainty.spreads`) and, across processes, in the cache of numbers (one array of
    :data:`~concurrency_model.uncertainty.SAMPLES` values, not the inputs': 3 kB a scenario, not 70 kB)."""
    spread = tuple(uncertainty.spreads().items())  # through the module: a test may set another spread
    got = rec["band"].get(spread)
    if got is None:
        def build() -> dict:
            fn = compose.step_fn(sc.parallel.schedule, sc.training.zero_stage, sc.training.overlap, ("step",))
            return {"step": fn(**band_inputs(sc, *_objects(sc, rec)[:4]))["step"]}
        got = (compiled.arrays("estimate_band", (rec["key"], spread, SAMPLES, np.__version__), build)
               if rec["stable"] else build())["step"]
        rec["band"][spread] = got
    return got


def region_of(sc: Scenario, rec: dict) -> BatchRegion:
    """:func:`batch_region` of a :func:`prepared` scenario, kept in its record and, across processes, in the cache
    of numbers (the fields of the :class:`~.batch_size.BatchRegion` as JSON)."""
    if "region" not in rec:
        def build() -> dict:
            w, _, _, key = _objects(sc, rec)[:4]
            fields = asdict(batch_region(sc, w, key))
            return {"json": np.frombuffer(json.dumps(fields, default=_plain).encode(), dtype=np.uint8)}
        text = (compiled.arrays("estimate_region", rec["key"], build) if rec["stable"] else build())["json"]
        rec["region"] = BatchRegion(**json.loads(text.tobytes().decode()))
    return rec["region"]


def layers_of(sc: Scenario):
    """The layer table of the scenario's slowest stage (:func:`.layer_table.layer_table`)."""
    w, stage, _, key = _objects(sc, prepared(sc))[:4]
    par = sc.parallel
    return layer_table(w, stage, sc.training.recompute, par.context, par.context_algorithm, par.expert,
                       par.microbatch_size, key[1], key[2])


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


def prepare(sc: Scenario) -> tuple:
    """Checks, the workload, the slowest stage, memory (refused if over the device's), and the layout key
    ``(b, t, sp, recompute, p, d, m, v, zero)`` that :func:`step_inputs` takes (the context-parallel
    degree and algorithm travel in the stage, ``stage["cp"]``)."""
    par, tr, cl = sc.parallel, sc.training, sc.cluster
    d, t, p, v = par.data, par.tensor, par.pipeline, par.interleave
    b, m, sp = par.microbatch_size, sc.microbatches, par.sequence_parallel
    schedule, rec, zero = par.schedule, tr.recompute, tr.zero_stage
    c, alg, e = par.context, par.context_algorithm, par.expert
    w = workload(sc.model, cl, tr.dtype, par.tensor_layers, tr.lora_rank, tr.lora_base_dtype,
                 par.expert_imbalance, *kernel_policies(tr.framework, zero, tr.fp8_recipe),
                 par.tp_overlap, par.moe_dispatcher, par.expert_overlap,
                 par.stage_split, tr.compile)
    check_lora(tr.lora_rank, tr.lora_base_dtype, w.graph(1))
    w.check_tensor(t)
    w.check_context(c, t, alg)
    w.check_expert(e, d)
    check_applies(w.expert_imbalance, w.expert_count)
    w.check_batch_norm(tr.batch_norm)
    if p > w.layer_count:
        raise ValueError(f"parallel.pipeline: {p} stages exceed the {w.layer_count} blocks the model can be cut into")
    check_interleaved(schedule, m, p)  # also made on load; a Parallel built in code meets it here
    stage = w.stage(b, t, sp, rec, p, c, alg, e, host_per_kernel(w.dev, tr.host_overhead_s))
    # memory first: a configuration that does not fit is refused, not estimated
    state, mem = memory_at(sc, w, b, m)
    if mem["at_risk"]:  # the central figure fits, the band's upper end does not: estimated, and said so
        mem["reason"] += fits_with(sc, w, memory_at)
    elif not mem["fits"]:
        raise ValueError(mem["reason"] + fits_with(sc, w, memory_at))
    return w, stage, state, mem, (b, t, sp, rec, p, d, m, v, zero)


# the parts of a device's memory in ``Estimate.memory`` that add up to its total, with their names in words
MEMORY_PARTS = {"weights_bytes": "weights", "gradients_bytes": "gradients", "optimizer_bytes": "optimizer state",
                "activations_bytes": "activations"}


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
    mem_fn = compose.memory_fn(w.state_params(e), tr.optimizer, tr.dtype, tr.zero_stage,
                               "1f1b" if schedule == "interleaved" and v == 1 else schedule, rec,
                               par.sequence_parallel,
                               None if shape is None else tuple(shape[k] for k in MEMORY_SHAPE),
                               p == 1, par.context_algorithm, shape["kv"] if shape else None, w.replicated_params,
                               frozen, sac)
    state, act = (float(x) for x in mem_fn(b, t, p, m, v, par.data, act_graph, c))
    # the optimizer's pass streams the trained parameters' state, not the frozen weights (:mod:`.lora`)
    trained = state - compose.frozen_bytes(frozen, tr.zero_stage, p == 1, t, p, par.data * c)
    runtime = {k: float(x) for k, x in compose.framework_memory_fn(
        fw, w.state_params(e), tr.dtype, tr.zero_stage,
        "1f1b" if schedule == "interleaved" and v == 1 else schedule,
        rec, par.sequence_parallel, None if shape is None else tuple(shape[k] for k in MEMORY_SHAPE), p == 1,
        allocator.is_hopper(sc.cluster.device.name), w.replicated_params, sac, tr.loss)(b, t, p, m, v, par.data,
                                                                                            act, c).items()}
    extra = {k: runtime[k] for k in allocator.PARTS} if fw != "ideal" else None  # ideal: today's figures exactly
    # ZeRO 1 with expert parallelism: the experts' optimizer state is sharded over d / e ranks, not d (:mod:`.expert`)
    x_opt = w.expert_optimizer_extra(e, tr.zero_stage, tr.optimizer, state_dtype(tr.dtype), t, p,
                                     par.data * c)
    state, trained = state + x_opt, trained + x_opt
    mem = memory.memory_per_device(state, act, sc.cluster.device, extra=extra, headroom=runtime["headroom"])
    outside = sum(runtime[k] for k in allocator.OUTSIDE)
    mem["reserved_bytes"] = allocator.reserved_bytes(mem["total_bytes"] - outside, runtime["fragmentation"], outside,
                                                     mem["capacity_bytes"])
    # the model state's split, for the breakdown: the compiled function the sweep evaluates (the same bits)
    parts = dict(compose.state_parts_fn(w.state_params(e), tr.optimizer, tr.dtype, tr.zero_stage, p == 1,
                                        w.replicated_params, frozen)(float(t), float(p), float(par.data * c)))
    parts["optimizer"] = parts["optimizer"] + x_opt
    mem.update({f"{k}_bytes": float(v) for k, v in parts.items()})
    return trained, mem


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
    """Inputs of :func:`.compose.step_fn` for one layout of workload ``w``: kernel parts become seconds
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
                    c_w=seconds(stage["w"]), p2p_blocks=p2p_blocking(runtime_name(sync, zero), schedule))


def assemble(c_f, c_b, c_r, triples: dict, comm, zero: int, p, m, v, opt, kappa, c_cf, c_cb, h_f=0.0, h_b=0.0,
             straggle=0.0, sync_frac=1.0, exposed: bool = False, c_w=0.0, p2p_blocks=False) -> dict:
    """The inputs of :func:`.compose.step_fn` from a stage's compute seconds and its communication
    ``triples`` (``tp_f, tp_b, tp_r, ep_f, ep_b, ep_r, bn_f, bn_b, bn_r, p2p, ar, rs, ag, last_ar, last_rs``)
    priced by ``comm``, the host issue seconds ``h_f``, ``h_b`` (:func:`host_seconds`) and the consistency factors
    (:func:`consistency_of`; ``exposed``: the whole allreduce is exposed, as its last bucket; ``c_w``: the
    weight-gradient seconds inside ``c_b``, :mod:`.compose`; ``p2p_blocks``: the runtime blocks on every pipeline
    exchange, :func:`.pipeline.p2p_blocking`, a bool or, from a sweep, an array of 0 / 1 per layout): shared by
    :func:`step_inputs` (one layout) and :mod:`concurrency_model.sweep` (arrays of layouts)."""
    t_p2p = comm(triples["p2p"])
    if isinstance(p2p_blocks, np.ndarray):
        t_p2p = np.where(p2p_blocks > 0, t_p2p * blocking_p2p_factor(p, m, v), t_p2p)
    elif p2p_blocks:
        t_p2p = t_p2p * blocking_p2p_factor(p, m, v)
    return {"h_f": h_f, "h_b": h_b, "c_f": c_f, "c_b": c_b, "c_w": c_w,
            "c_r": c_r + comm(triples["tp_r"]) + comm(triples["ep_r"]) + comm(triples["bn_r"]),
            "c_tf": comm(triples["tp_f"]), "c_tb": comm(triples["tp_b"]), "c_ef": comm(triples["ep_f"]),
            "c_eb": comm(triples["ep_b"]), "c_nf": comm(triples["bn_f"]), "c_nb": comm(triples["bn_b"]),
            "c_cf": c_cf, "c_cb": c_cb, "t_p2p": t_p2p,
            "p": p, "m": m, "v": v, "ar": comm(triples["ar"]), "rs": comm(triples["rs"]), "ag": comm(triples["ag"]),
            "agb": comm(triples["agb"]), "x_dp": comm(triples["x_dp"]),
            "last": comm(triples["ar"] if exposed else triples["last_ar"] if zero == 0 else triples["last_rs"]),
            "opt": opt, "kappa": kappa, "straggle": straggle, "sync_frac": sync_frac}


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
        return sum(float(n) * (sp.Max(float(c) / s["s_flops"], float(mm) / s["s_mem_bw"], evaluate=False) + float(e) / s["s_mem_bw"]
                               + float(la) * s["s_launch"])
                   for c, mm, e, la, n in zip(parts.compute, parts.memory, parts.extra, parts.launch, parts.count))

    def host_wait(stage):  # the host's issue seconds, scaled by s_host
        return tuple(x * s["s_host"] for x in host_seconds(stage, w.dev, sc.training.host_overhead_s))

    def comm(tr):
        return float(tr[0]) * s["s_latency"] + sp.Max(float(tr[1]) / s["s_intra"], float(tr[2]) / s["s_inter"], evaluate=False)

    def optimizer(state_bytes):
        return float(w.optimizer_seconds(state_bytes, 1.0, 0.0)) / s["s_mem_bw"] + \
            float(w.dev.launch_overhead) * s["s_launch"]

    b, t, spar, rec, p, d, m, v, zero = key
    inputs = step_inputs(w, stage, b, t, spar, rec, p, d, s["m"], v, zero, state, seconds, comm, optimizer,
                         sync=sync_of(sc), host=sc.training.host_overhead_s, host_wait=host_wait,
                         consistency=consistency_of(sc.training, d * sc.parallel.context),
                         batch_norm=sc.training.batch_norm, schedule=sc.parallel.schedule)
    expr = compose.step_expressions(sc.parallel.schedule, zero, sc.training.overlap)["step"]
    expr = expr.xreplace({compose.SYMBOLS[k]: sp.sympify(x) for k, x in inputs.items()})
    values = {sym: (m if k == "m" else 1) for k, sym in s.items()}
    return expr, values
