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

This module is the estimate from a scenario's numbers (issue 41): :func:`prepared` keeps them per scenario, in the
process and across processes, and :func:`estimate` evaluates the compiled step function (:mod:`.step`) on them.
The model is built, and sympy imported, by :mod:`.prepare` only for a scenario whose numbers are not cached: a
cached estimate imports the scenario's checks, numpy, the cache reader and this module.

A configuration over the device's memory raises ``ValueError`` with the reason, as do degrees that do
not divide heads, hidden sizes, layers or the sequence length.
"""
from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field, replace
from functools import cached_property, partial
from typing import TYPE_CHECKING

import numpy as np

from .. import compiled, uncertainty
from ..parallel.batch_size import BatchRegion
from ..parallel.runtime import default_framework
from ..scenario import CURRENCY, Scenario, Training, load_scenario
from ..uncertainty import SAMPLES
from .keys import scenario_key, stable_model
from .run import WAIT_PARTS, busy_share, run_cost
from .step import step_fn
from .step_parts import STEP_PARTS, breakdown

if TYPE_CHECKING:  # annotations only
    import pandas as pd


def _builder():
    """:mod:`.prepare`, which builds the model and the numbers of a scenario (the models, the timing, sympy): imported
    when a scenario's numbers are first needed and not cached, never by a cached estimate (issue 41)."""
    from . import prepare
    return prepare


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
    # the band's upper end (the caching allocator's reserved headroom and the spread of measured peaks,
    # :mod:`.allocator`); None: the central figure
    memory_p90_bytes_per_device: float | None = None
    # steps, seconds, GPU-hours (and cost) to training.target's quality, with bands (:mod:`..convergence.target`)
    target: dict | None = None
    model_notes: tuple = ()  # the model as it runs, in words (:func:`.prepare.model_notes`)

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
        return _builder().step_expression(self.scenario)

    @property
    def expression(self):
        """The step time as a sympy expression in the what-if scales of the hardware (``s_flops``, ``s_mem_bw``,
        ``s_launch``, ``s_intra``, ``s_inter``, ``s_latency``, ``s_host``: factors of the presets' numbers) and in
        ``m``, the microbatches a step (:func:`.prepare.step_expression`; built on first use).
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
        """What the step time does not say: a global batch outside the paper's region B; the model's own notes (a
        plain attention whose heads leave the tensor cores: :func:`.prepare.model_notes`)."""
        return (tuple(self.batch_region.notes()) if self.batch_region else ()) + tuple(self.model_notes)

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
        from .layer_table import by_kind  # with the layer table (``--layers``): pandas
        return by_kind(self._layers)

    def to_frame(self) -> pd.DataFrame:
        """One row per breakdown component: ``seconds``, ``in_step`` (the parts that add up to the step,
        :data:`.step_parts.STEP_PARTS`) and their ``share`` of it (NaN for totals and overlapped seconds)."""
        import pandas as pd  # heavy (0.4 s): loaded when a table is built
        return pd.DataFrame([{"component": k, "seconds": v, "in_step": k in STEP_PARTS,
                              "share": v / self.step_time_s if k in STEP_PARTS else float("nan")}
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
    out = {k: float(x) for k, x in step_fn(par.schedule, tr.zero_stage, sc.overlap)(**inputs).items()}
    parts = {k: float(x) for k, x in breakdown(inputs, out).items()}
    # the step from the function the sweep evaluates (the step alone: its own common subexpressions, so its own
    # order of additions), so that a configuration's step time is the sweep's to the last bit
    step = float(step_fn(par.schedule, tr.zero_stage, sc.overlap, ("step",))(**inputs)["step"])
    model_flop = rec["model_flop"]
    run = None
    if sc.run:
        run = run_cost(sc.run, step, par.global_batch, sc.gpus,
                       busy_share(step, sum(parts[k] for k in WAIT_PARTS)),
                       float(sc.cluster.device.board_power_w), rec["seq_len"])
    lo, hi = step_band_of(sc, rec)
    target = None
    if tr.target is not None:  # time to a quality target: steps at the global batch x this step (issue 40)
        from ..convergence.target import curve_of, penalty_of, time_to_target, with_penalty
        curve = curve_of(tr.target, steps=True)
        target = time_to_target(curve, par.global_batch, step, sc.gpus, sc.run.price_per_gpu_hour if sc.run else None)
        penalty = penalty_of(tr, par.data)  # stale or local updates: their step penalty, model only
        if penalty is not None:
            target = with_penalty(curve, target, par.global_batch, step, sc.gpus, penalty)
    return Estimate(step, lo, hi, par.global_batch / step, model_flop, model_flop / step / sc.gpus,
                    float(mem["total_bytes"]), parts, mem, sc, list(rec["stages"]), run,
                    ("rows" if rec["spatial"] else "sequence") if par.context > 1 else "",
                    partial(region_of, sc, rec), rec["routing_factor"], partial(layers_of, sc),
                    float(mem["upper_bytes"]), target, tuple(rec["notes"]))


# the parts of a device's memory in ``Estimate.memory`` that add up to its total, with their names in words
MEMORY_PARTS = {"weights_bytes": "weights", "gradients_bytes": "gradients", "optimizer_bytes": "optimizer state",
                "activations_bytes": "activations"}



# -- the fast path (issue 41): what an estimate computes from the scenario alone, kept per scenario -----------------
MEMO_SIZE = 64  # scenarios whose numbers a process keeps (the oldest goes first)
_MEMO: dict = {}
NUMBERS = ("inputs", "memory", "stages", "model_flop", "routing_factor", "seq_len", "spatial",
           "notes")  # a record's numbers


def prepared(sc: Scenario) -> dict:
    """The numbers :func:`estimate` computes from the scenario alone, before it evaluates the step function
    (:data:`NUMBERS`): ``inputs`` of :func:`.step.step_fn` at the presets' numbers, ``memory``
    (:func:`.prepare.memory_at`'s figures), ``stages``, ``model_flop``, ``routing_factor``, ``seq_len`` (a
    transformer's sequence, else None) and ``spatial``; the band from :func:`step_band_of`.

    Built once by :func:`.prepare.prepare` (the model, its layers' kernels, the partition, memory), then kept for the
    process (the last :data:`MEMO_SIZE` scenarios, by :func:`scenario_key`) and, for a model that is the same in
    every process (:func:`.keys.stable_model`), across processes in the cache of numbers of
    :mod:`concurrency_model.compiled` (keyed as its compiled functions are: the package's sources and versions): a
    later estimate of the scenario evaluates the compiled step function on these numbers without building the model.
    The scalars travel as one JSON text (exact for floats and ints) in the process that builds them too, so a fresh
    and a cached record are the same values. A scenario :func:`.prepare.prepare` refuses raises its ``ValueError``
    every time.

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
            numbers = _builder().numbers(sc, *_objects(sc, rec))
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
    """``(w, stage, state, key, memory)`` of :func:`.prepare.prepare` for a :func:`prepared` record, built when first
    needed (a record read from the cache needs them only for the band on other spreads, the batch region or the
    layers)."""
    if rec["objects"] is None:
        w, stage, state, mem, key = _builder().prepare(sc)
        rec["objects"] = (w, stage, state, key, mem)
    return rec["objects"]


def step_band_of(sc: Scenario, rec: dict) -> tuple[float, float]:
    """The 80% band ``(p10, p90)`` of a :func:`prepared` scenario's step: the step on each of
    :func:`~concurrency_model.uncertainty.draws` through the sweep's step function and
    :func:`~concurrency_model.uncertainty.band_of` of it (:func:`.prepare.step_band`), kept in its record per spread
    of the fitted constants (:func:`~concurrency_model.uncertainty.spreads`) and, across processes, in the cache of
    numbers (the two floats, exact; keyed also by :data:`~concurrency_model.uncertainty.SAMPLES` and numpy's version,
    whose generator draws them): a cached estimate neither draws nor takes quantiles (numpy's random and masked-array
    modules, issue 41).

    >>> sc = load_scenario({"model": "gpt2", "parallel": {"data": 8, "global_batch": 64, "microbatch_size": 8}})
    >>> lo, hi = step_band_of(sc, prepared(sc))
    >>> lo < estimate(sc).step_time_s < hi, (lo, hi) == step_band_of(sc, prepared(sc))
    (True, True)
    """
    spread = tuple(uncertainty.spreads().items())  # through the module: a test may set another spread
    got = rec["band"].get(spread)
    if got is None:
        def build() -> dict:
            return {"band": np.array(_builder().step_band(sc, *_objects(sc, rec)[:4]), dtype=float)}
        got = tuple(float(x) for x in (compiled.arrays("estimate_band", (rec["key"], spread, SAMPLES, np.__version__),
                                                       build) if rec["stable"] else build())["band"])
        rec["band"][spread] = got
    return got


def region_of(sc: Scenario, rec: dict) -> BatchRegion:
    """:func:`.prepare.batch_region` of a :func:`prepared` scenario, kept in its record and, across processes, in the
    cache of numbers (the fields of the :class:`~.batch_size.BatchRegion` as JSON)."""
    if "region" not in rec:
        def build() -> dict:
            w, _, _, key = _objects(sc, rec)[:4]
            fields = asdict(_builder().batch_region(sc, w, key))
            return {"json": np.frombuffer(json.dumps(fields, default=_plain).encode(), dtype=np.uint8)}
        text = (compiled.arrays("estimate_region", rec["key"], build) if rec["stable"] else build())["json"]
        rec["region"] = BatchRegion(**json.loads(text.tobytes().decode()))
    return rec["region"]


def layers_of(sc: Scenario):
    """The layer table of the scenario's slowest stage (:func:`.prepare.layers`)."""
    w, stage, _, key = _objects(sc, prepared(sc))[:4]
    return _builder().layers(sc, w, stage, key)
