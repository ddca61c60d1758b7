"""One training step as a sympy expression of its parts, lambdified once per structural variant.

The variant is what changes the expression's shape: the pipeline ``schedule``, the ZeRO stage and
whether communication overlaps compute. The symbols (:data:`STEP_INPUTS`) are per-microbatch seconds
of the slowest pipeline stage (``c_f, c_b, c_r``: forward, backward, recompute compute; ``c_w``: the
weight-gradient kernels inside ``c_b``, which the zb-h1 schedule defers; ``c_tf, c_tb``:
tensor-parallel collectives; ``c_ef, c_eb``: the expert-parallel all-to-alls; ``c_cf, c_cb``: the exposed
context-parallel communication, forward and backward with recompute, :func:`.features.context_exposed`;
``c_nf, c_nb``: synchronous batch norm's all-reduces, :meth:`.data_parallel.DataParallelMixin.batch_norm_sync`),
the stage-to-stage transfer ``t_p2p``, the degrees ``p, m, v``, the data-parallel collectives (``ar, rs, ag``:
gradient allreduce, reduce-scatter, parameter allgather; ``agb``: ZeRO-3's gathers in the backward pass;
``x_dp``: the seconds a microbatch the runtime never overlaps, :mod:`.runtime`; ``last``: the last gradient
bucket), the tied embedding's all-reduce between the first and last stages ``emb``
(:meth:`.data_parallel.DataParallelMixin.tied_sync`: once a step, exposed) and the optimizer step ``opt``. Composition
(DESIGN.md "How the pieces meet"):

* pipeline: :func:`~.pipeline.step_time_expr` with ``t_f = c_f + c_tf + c_ef + c_cf + c_nf`` and
  ``t_b = c_b + c_r + c_tb + c_eb + c_cb + c_nb`` (tensor-, expert- and context-parallel communication and
  the batch-norm all-reduces on the critical path);
  each at least the host's time to issue its kernels (``h_f``, ``h_b``: ``max(t_f, h_f)``; an eager
  framework issues every kernel from the CPU and runs ahead of the GPU within a pass,
  :data:`.host.HOST_S_PER_KERNEL`);
  the transfers on its critical path are ``2(p-1) t_p2p`` (interleaved ``2(vp-1) t_p2p``); the bubble
  is what is left of the step after ``m (t_f + t_b)`` and those transfers, run by the other stages at their own
  seconds: ``fill`` times the schedule's bubble at the slowest stage's, ``fill`` the other stages' seconds a
  microbatch over ``p - 1`` times the slowest one's (:meth:`.workload.Workload.stage`). The schedules' formulas
  assume equal stages (Narayanan et al. 2021 §2.2.1); with uneven ones (Megatron's output layer and loss on the
  last stage) 1F1B's first microbatch crosses every stage before the slowest, which then runs all ``m``, and the
  last backward crosses the stages before it again: ``sum of the others + m x the slowest`` [D], exact where the
  last stage is the slowest and an upper bound otherwise (tests/training/test_uneven_pipeline.py simulates the
  schedule); 1 with equal stages, the formulas' own case. The async schedule has no fill or drain;
* data parallelism, per ZeRO stage (Rajbhandari et al. 2020 §5, §7): 0 allreduces the accumulated
  gradients once; 1 reduce-scatters them and gathers the updated parameters; 2 reduce-scatters each
  microbatch's gradients; 3 also gathers the parameters in each microbatch's forward and backward pass.
  With overlap each transfer hides behind the compute it follows (wait-free backprop, Li et al. 2020;
  ZeRO prefetching): what does not fit is exposed, and always the last 25 MiB bucket;
* the step: pipeline + exposed data-parallel time + optimizer;
* consistency (:func:`.consistency.step_factors`, [D]): the replicas' compute (pipeline + optimizer) waits
  ``straggle`` times itself for the slowest replica, and the data-parallel terms count ``sync_frac`` times
  (local SGD synchronises every ``1 / sync_frac`` steps); 0 and 1 for synchronous SGD without stragglers.

Memory per device (:func:`memory_fn`) is the same kind of expression in ``b, t, p, m, v, d, c``, from
:mod:`.memory`; what the runtime (``training.framework``) adds to it and the band's upper end
(:func:`framework_memory_fn`) from :mod:`.allocator`.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np
import sympy as sp

from ..compiled import lambdified
from ..cost import unevaluated
from ..parallel import allocator, memory, pipeline, recompute
from ..symbols import nsimplified
from ..units import dtype_bytes, state_dtype
from .step_parts import STEP_INPUTS

MEMORY_INPUTS = ("b", "t", "p", "m", "v", "d", "act_graph", "c")
_SYM = {name: sp.Symbol(name, positive=True) for name in STEP_INPUTS + MEMORY_INPUTS}
SYMBOLS = _SYM


def _max(*args) -> sp.Expr:
    """``sympy.Max(*args)`` unevaluated, a ``Max`` among ``args`` flattened into it (as the evaluated one's argument
    filter does, sympy 1.14 ``sympy/functions/elementary/miscellaneous.py``, ``MinMaxBase.__new__``): in
    :func:`step_expressions` no argument is known to be the larger (nor ``0``, the larger of ``0`` and a transfer
    less the compute it hides behind), so the evaluated ``Max`` is this one, after a pairwise search of its
    arguments' order (``_find_localzeros``: most of the expressions' build); tests/training/test_compose.py compares
    every variant's expressions with those of ``sympy.Max`` and ``sympy.Min``.

    >>> x, y = sp.symbols("x y")
    >>> _max(0, _max(x, y)), _max(0, _max(x, y)) == sp.Max(0, sp.Max(x, y))
    (Max(0, x, y), True)
    """
    return unevaluated(sp.Max, *args)


def _min(*args) -> sp.Expr:
    """``sympy.Min(*args)`` unevaluated, as :func:`_max`."""
    return unevaluated(sp.Min, *args)


@lru_cache(maxsize=None)
def step_expressions(schedule: str, zero_stage: int, overlap: bool) -> dict:
    """The step and its parts (:data:`.step_parts.STEP_OUTPUTS`) as sympy expressions in
    :data:`.step_parts.STEP_INPUTS`.

    >>> e = step_expressions("1f1b", 0, False)
    >>> e["step"].subs({SYMBOLS["p"]: 1, SYMBOLS["h_f"]: 0, SYMBOLS["h_b"]: 0, SYMBOLS["straggle"]: 0,
    ...                 SYMBOLS["sync_frac"]: 1, SYMBOLS["x_dp"]: 0})
    ar + emb + m*(c_b + c_cb + c_cf + c_eb + c_ef + c_f + c_nb + c_nf + c_r + c_tb + c_tf) + opt
    """
    s = {k: _SYM[k] for k in STEP_INPUTS}
    gpu_f = s["c_f"] + s["c_tf"] + s["c_ef"] + s["c_cf"] + s["c_nf"]
    gpu_b = s["c_b"] + s["c_r"] + s["c_tb"] + s["c_eb"] + s["c_cb"] + s["c_nb"]
    # a pass lasts at least as long as the host takes to issue its kernels (h_f, h_b)
    t_f, t_b = _max(gpu_f, s["h_f"]), _max(gpu_b, s["h_b"])
    p, m, v, t_p2p = s["p"], s["m"], s["v"], s["t_p2p"]
    even = pipeline.step_time_expr(schedule).xreplace(
        {pipeline.T_F: t_f, pipeline.T_B: t_b, pipeline.T_W: s["c_w"], pipeline.T_P2P: t_p2p, pipeline.S.p: p,
         pipeline.S.m: m, pipeline.S.v: v})
    p2p_exposed = 2 * ((v * p if schedule == "interleaved" else p) - 1) * t_p2p
    bubble = _max(0, even - m * (t_f + t_b) - p2p_exposed)  # zb-h1's: 0 and its bubble's Max, flattened
    if schedule == "async":  # no fill or drain in the steady state
        step_pp = even
    else:  # the fill and drain run on the other stages, at their seconds (``fill``)
        bubble = s["fill"] * bubble
        step_pp = m * (t_f + t_b) + p2p_exposed + bubble
    ar, rs, ag = s["ar"], s["rs"], s["ag"]
    # (seconds, compute it can hide behind, times per step) of each synchronisation
    parts = {0: [(ar, t_b, 1)], 1: [(rs, t_b, 1), (ag, 0, 1)], 2: [(rs, t_b, m), (ag, 0, 1)],
             3: [(ag, t_f, m), (s["agb"] + rs, t_b, m)]}[zero_stage]
    hidden_total = sum(c * k for c, _, k in parts)
    exposed_outright = m * s["x_dp"]  # what the runtime never overlaps (:mod:`.runtime`)
    dp_total = hidden_total + exposed_outright
    if overlap:
        dp_exposed = _min(hidden_total, sum((c if hide == 0 else _max(0, c - hide)) * k for c, hide, k in parts)
                          + s["last"]) \
            + exposed_outright
        # overlap interference: the compute beside the overlapped transfers runs slower by kappa seconds per
        # second of transfer (the tier's overlap_slowdown; Rashidi et al. 2021)
        interference = s["kappa"] * (dp_total - dp_exposed)
    else:
        dp_exposed, interference = dp_total, sp.Integer(0)
    f = s["sync_frac"]
    straggler_wait = s["straggle"] * (step_pp + s["opt"])
    # the tied embedding's all-reduce between the first and last stages, after the data-parallel one (exposed)
    return {"step": step_pp + s["opt"] + s["emb"] + straggler_wait + f * (dp_exposed + interference),
            "step_pp": step_pp,
            "bubble": bubble, "p2p_exposed": p2p_exposed, "dp_total": f * dp_total, "dp_exposed": f * dp_exposed,
            "dp_interference": f * interference, "host_wait": m * (t_f - gpu_f + t_b - gpu_b),
            "straggler_wait": straggler_wait}


def memory_fn(params: float, optimizer: str, dtype: str, zero_stage: int, schedule: str, recompute: str,
              sequence_parallel: bool, shape: tuple | None, single_stage: bool, context_algorithm: str = "ring",
              kv_hidden: int | None = None, replicated: float = 0.0, frozen_weight_bytes: float = 0.0,
              sac: tuple | None = None, embedding: float = 0.0, optimizer_dtype: str = "fp32"):
    """``f(b, t, p, m, v, d, act_graph=0, c=1) -> (model_state_bytes, activation_bytes)`` per device,
    numpy-vectorised.

    ``shape`` = ``(s, h, a, layers, vocab, fused, moe[, eight_bit, modules, mla, dense, dropout, score_bytes])`` of a
    transformer (:data:`.workload.MEMORY_SHAPE` and :meth:`.workload.Workload.memory_shape`'s 8-bit inputs, selective
    recompute modules, dense widths, dropout and bytes a score; Korthikanti et al. 2022, via
    :func:`.memory.activation_bytes_per_device`); None for other graphs, whose stored activations per microbatch
    ``act_graph`` (:func:`.memory.graph_activation_bytes`) are spread over the ``p`` stages and
    held for the schedule's in-flight microbatches. ``single_stage``: p = 1 (the first stage is also the
    last, which holds the logits).

    Context parallelism over ``c`` devices (:mod:`..parallel.context`): each holds ``s / c`` tokens, so every
    Korthikanti term linear in ``s`` is divided by ``c``, and so is the attention-score term ``5 a s^2 b / t``:
    ring attention stores the scores of its ``s / c`` queries against all ``s`` keys, Ulysses those of all
    ``s`` queries of ``a / c`` heads, ``5 a s^2 b / (t c)`` either way [D]. The activations are the
    formula's at ``s`` over ``c``. Ring attention adds its transient receive buffers (one layer at a time):
    K and V of the block in use and of the block arriving, and in the backward pass dK and dV of both too,
    ``4 x 2 b (s / c) (kv_hidden / t)`` values (``kv_hidden``: key/value heads x head size, default ``h``;
    Liu et al. 2023 §3, [D]). The model state is sharded by ZeRO over ``data x context`` ranks (Megatron-LM
    reduces gradients and shards its distributed optimizer over the data- and context-parallel group);
    ``replicated`` of the ``params`` are not split by the tensor degree (the convolutions of Krizhevsky's
    hybrid, :mod:`.layerwise`); ``frozen_weight_bytes`` of the whole model are weights only (LoRA's base model,
    :mod:`.lora`: split over tensor and stages, and over data-parallel ranks under ZeRO-3, :func:`frozen_bytes`).
    ``sac``: a transformer block's matrix products (:func:`.recompute.block_products`) when ``selective`` is
    torchtitan's per-op policy (:func:`.memory.per_op_sac_bytes`; :func:`sac_of` says when). ``embedding``: the
    parameters the first stage holds on top of its share of the blocks (:func:`state_parts`)."""
    parts = state_parts_fn(params, optimizer, dtype, zero_stage, single_stage, replicated, frozen_weight_bytes,
                           embedding, optimizer_dtype)

    def state(t, p, d):
        return sum(parts(t, p, d).values())
    act = _activation_fn(schedule, recompute, sequence_parallel, shape, single_stage, sac)
    ctx = _context_fn(None if shape is None else shape[0], context_algorithm in ("ring", "allgather"),
                      (kv_hidden or (shape[1] if shape else 0)) * dtype_bytes(dtype))

    def run(b, t, p, m, v, d, act_graph=0.0, c=1):
        shape_ = np.broadcast_shapes(*(np.shape(x) for x in (b, t, p, m, v, d, act_graph, c)))
        c = np.asarray(c, dtype=float)
        return (np.broadcast_to(np.asarray(state(t, p, d * c), dtype=float), shape_),
                np.broadcast_to(np.asarray(ctx(b, t, c, act(b, t, p, m, v, act_graph)), dtype=float), shape_))
    return run


def _context_fn(s, ring: bool, kv_bytes_per_token: float):
    """``f(b, t, c, act)``: activations ``act`` of one device without context parallelism, divided over
    ``c`` devices, plus ring attention's receive buffers (:func:`memory_fn`); compiled once for every ``s`` and
    ``kv_bytes_per_token`` (its arguments)."""
    f = _context_compiled(bool(ring and s))
    numbers = (float(s or 0), float(kv_bytes_per_token))

    def run(b, t, c, act):
        return f(b, t, c, act, *numbers)
    return run


@lru_cache(maxsize=None)
def _context_compiled(ring: bool):
    """``f(b, t, c, act, s, kv_bytes_per_token)``: :func:`_context_fn`'s compiled function."""
    def build():
        b, t, c = _SYM["b"], _SYM["t"], _SYM["c"]
        a = sp.Symbol("act", nonnegative=True)
        s, kv = sp.Symbol("shape_s", nonnegative=True), sp.Symbol("kv_bytes", nonnegative=True)
        expr = a / c
        if ring:
            expr += sp.Piecewise((4 * 2 * b * (s / c) * kv / t, c > 1), (0, True))
        return [b, t, c, a, s, kv], expr
    return lambdified("context", (ring,), build)


@lru_cache(maxsize=None)
def state_parts_fn(params: float, optimizer: str, dtype: str, zero_stage: int, single_stage: bool,
                   replicated: float = 0.0, frozen_weight_bytes: float = 0.0, embedding: float = 0.0,
                   optimizer_dtype: str = "fp32"):
    """``f(t, p, d) -> {"weights", "gradients", "optimizer"}`` bytes a device (:func:`state_parts`) on arrays of
    tensor degrees, stages and ZeRO ranks: a sweep's rows (:mod:`concurrency_model.sweep`). Compiled once a
    structure (optimizer and its state's dtype, dtype, ZeRO stage, one stage or several): the parameters split by the
    tensor degree, the replicated ones, the frozen weights' bytes and the first stage's ``embedding``
    (:func:`state_parts`) are the compiled function's arguments (:func:`model_numbers`).

    >>> f = state_parts_fn(1e9, "adam", "bf16", 1, True)
    >>> {k: float(v) / 1e9 for k, v in f(1, 1, 8).items()}   # ZeRO-1 over 8: 2 + 2 + 12 / 8 bytes a parameter
    {'weights': 2.0, 'gradients': 2.0, 'optimizer': 1.5}
    """
    f = _state_parts_compiled(optimizer, dtype, zero_stage, single_stage, optimizer_dtype)
    numbers = (float(params) - float(replicated) - float(embedding), float(replicated), float(frozen_weight_bytes),
               float(embedding))

    def run(t_, p_, d_) -> dict:
        shape = np.broadcast_shapes(*(np.shape(x) for x in (t_, p_, d_)))
        return {k: np.broadcast_to(np.asarray(x, dtype=float), shape)
                for k, x in zip(STATE_PARTS, f(t_, p_, d_, *numbers))}
    return run


# :func:`state_parts_fn`'s numbers as symbols: the parameters the tensor degree splits besides the embedding, the
# replicated ones, the frozen weights' bytes (each may be 0); the first stage's embedding is :data:`_EMBEDDING`
_SPLIT_PARAMS, _FROZEN = sp.Symbol("n_split", nonnegative=True), sp.Symbol("frozen_bytes", nonnegative=True)


@lru_cache(maxsize=None)
def _state_parts_compiled(optimizer: str, dtype: str, zero_stage: int, single_stage: bool,
                          optimizer_dtype: str = "fp32"):
    """``f(t, p, d, split, replicated, frozen_bytes, embedding)``: :func:`state_parts_fn`'s compiled function."""
    def build():
        t, p, d = _SYM["t"], _SYM["p"], _SYM["d"]
        parts = state_parts(_SPLIT_PARAMS + _REPLICATED + _EMBEDDING, optimizer, dtype, zero_stage, single_stage,
                            _REPLICATED, _FROZEN, t, p, d, _EMBEDDING, optimizer_dtype)
        return [t, p, d, _SPLIT_PARAMS, _REPLICATED, _FROZEN, _EMBEDDING], [sp.sympify(parts[k]) for k in STATE_PARTS]
    return lambdified("state_parts", (optimizer, dtype, zero_stage, single_stage, optimizer_dtype), build)


STATE_PARTS = ("weights", "gradients", "optimizer")  # the model state's parts (:func:`state_parts`)


def state_parts(params: float, optimizer: str, dtype: str, zero_stage: int, single_stage: bool, replicated: float,
                frozen_weight_bytes: float, t, p, d, embedding=0.0, optimizer_dtype: str = "fp32") -> dict:
    """One device's ``weights``, ``gradients`` and ``optimizer`` bytes (:func:`.memory.model_state_bytes`, ZeRO
    §3.1, §5) at tensor ``t``, ``p`` stages and ``d`` ZeRO ranks (numbers or sympy symbols), the frozen weights
    counted as weights (:func:`memory_fn`), on the first stage: ``embedding`` of the ``params`` (the layers before
    the first block, :meth:`.workload.Workload.embedding_params`) sit whole on it, split by the tensor degree only,
    the rest over the ``p`` stages. Megatron-Core and torchtitan put the embedding on the first stage and the output
    layer on the last, on top of their share of the blocks (:mod:`.partition`); the last stage's output layer (an
    untied one, or Megatron-Core's copy of a tied embedding: NVIDIA/Megatron-LM @ 2a75ac12 ``language_module.py``
    ``setup_embeddings_and_output_layer``) is about as large, and the first stage also holds the most activations
    (:func:`.memory.activation_bytes_per_device`), so its figure stands for the busiest stage [D]."""
    out = dict.fromkeys(STATE_PARTS, 0)
    for n, tensor, stages in stage_groups(params, replicated, embedding, t, 1 if single_stage else p):
        if n:
            got = memory.model_state_bytes(n, optimizer, state_dtype(dtype), tensor=tensor,
                                           pipeline=stages, data=d, zero_stage=zero_stage,
                                           optimizer_dtype=optimizer_dtype)
            out = {k: out[k] + got[k] for k in out}
    out["weights"] += frozen_bytes(nsimplified(frozen_weight_bytes), zero_stage, single_stage, t, p, d)
    return out


def stage_groups(params, replicated, embedding, t, p) -> tuple:
    """The first pipeline stage's parameters of one device as ``(count, tensor ranks, stages)`` groups, each group's
    share ``count / (tensor ranks x stages)`` (:func:`state_parts`): the parameters the tensor degree splits over
    the ``p`` stages, the ``replicated`` ones (whole on every tensor rank) over the stages, the ``embedding`` whole on
    the first stage, split by the tensor degree; numbers or sympy symbols.

    >>> [n / (k * s) for n, k, s in stage_groups(100.0, 20.0, 8.0, 2, 4)]
    [9.0, 5.0, 4.0]
    """
    return (params - replicated - embedding, t, p), (replicated, 1, p), (embedding, t, 1)


def frozen_bytes(weight_bytes, zero_stage: int, single_stage: bool, t, p, d):
    """One device's share of a model's ``weight_bytes`` of frozen weights (:func:`memory_fn`): split over the
    tensor ranks and the stages, and over the data-parallel ranks under ZeRO-3, which shards the parameters;
    numbers, numpy arrays or sympy symbols for ``t, p, d``.

    >>> frozen_bytes(14e9, 3, False, 2, 2, 8)  # 7 B weights in bf16 over 2 x 2 ranks, sharded over 8 by ZeRO-3
    437500000.0
    """
    return weight_bytes / (t * (1 if single_stage else p)) / (d if zero_stage == 3 else 1)


def _activation_fn(schedule: str, recompute: str, sequence_parallel: bool, shape: tuple | None, single_stage: bool,
                   sac: tuple | None = None):
    """``f(b, t, p, m, v, act_graph)``: :func:`memory_fn`'s activations of the first stage, compiled once a structure
    (:func:`model_numbers`: the shape's sizes and the products' widths are the compiled function's arguments)."""
    numbers, structure = model_numbers(shape, sac)
    f = _activation_compiled(schedule, recompute, sequence_parallel, single_stage, structure)

    def run(b, t, p, m, v, g):
        return f(b, t, p, m, v, g, *numbers)
    return run


@lru_cache(maxsize=None)
def _activation_compiled(schedule: str, recompute: str, sequence_parallel: bool, single_stage: bool,
                         structure: tuple):
    """``f(b, t, p, m, v, act_graph, *sizes)``: :func:`_activation_fn`'s compiled function."""
    shape, sac = _symbolic(structure)

    def build():
        b, t, p, m, v, g = (_SYM[k] for k in ("b", "t", "p", "m", "v", "act_graph"))
        p_ = 1 if single_stage else p
        v_ = v if schedule == "interleaved" else 1
        if shape is not None:
            sq, h, a, layers, vocab, fused, moe, q8, mods, mla, dense, drop, scores = shape
            act = memory.activation_bytes_per_device(sq, b, h, a, layers, t, sequence_parallel, recompute, p_,
                                                     schedule, m, v_, 0, vocab, fused_attention=fused, sac=sac,
                                                     moe=moe, eight_bit=q8, modules=mods, mla=mla, dense=dense,
                                                     dropout=drop, score_bytes=scores)
        else:
            act = g / p_ * memory._in_flight(schedule, p_, m, v_, 0)
        return [b, t, p, m, v, g] + model_symbols(structure), sp.sympify(act)
    return lambdified("activation", (schedule, recompute, sequence_parallel, single_stage, structure), build)


FRAMEWORK_OUTPUTS = allocator.PARTS + ("fragmentation", "headroom")  # :func:`framework_memory_fn`'s arrays
SAC_FRAMEWORKS = ("fsdp2",)  # runtimes whose "selective" recompute is torchtitan's per-op policy (:func:`sac_of`)


def sac_of(framework: str, graph) -> tuple | None:
    """What :func:`memory_fn` and :func:`framework_memory_fn` take as ``sac``: the block's matrix products
    (:func:`.recompute.block_products`) under ``fsdp2``, the runtime as torchtitan configures it, whose
    ``selective`` activation checkpointing is its per-op policy (``selective_ac_option = 'op'``, :mod:`.memory`);
    None otherwise (Korthikanti et al.'s selective recompute, Megatron's).

    >>> from concurrency_model.models import get_model
    >>> len(sac_of("fsdp2", get_model("gpt2", batch=1))), sac_of("megatron", get_model("gpt2", batch=1))
    (6, None)
    """
    return recompute.block_products(graph) if framework in SAC_FRAMEWORKS else None


@lru_cache(maxsize=None)
def framework_memory_fn(framework: str, params: float, dtype: str, zero_stage: int, schedule: str, recompute: str,
                        sequence_parallel: bool, shape: tuple | None, single_stage: bool, hopper: bool,
                        replicated: float = 0.0, sac: tuple | None = None, loss: str | None = None,
                        embedding: float = 0.0, cuda_context: float | None = None):
    """``f(b, t, p, m, v, d, act, c=1) -> dict`` of :data:`FRAMEWORK_OUTPUTS` per device, numpy-vectorised: the parts
    :func:`.allocator.framework_parts` adds to :func:`memory_fn`'s model state and activations ``act`` under runtime
    ``framework``, the allocator's ``fragmentation`` and the band's ``headroom`` above the central figure
    (:func:`.allocator.headroom_bytes`; ``ideal``: all 0). ``d``: the data-parallel degree (ZeRO shards over
    ``d x c``).

    A unit (what ZeRO-3 gathers at a time) is one transformer block, ``params / layers`` over the tensor degree [D: the
    embeddings' share spread over the blocks]; a graph without blocks is one unit. The loss sits on the last stage,
    :func:`memory_fn`'s figure is the first stage's (``sac``: as :func:`memory_fn`'s; ``loss``: ``training.loss``,
    :func:`.allocator.loss_buffer_bytes`): with several stages the loss
    buffers count what the last stage's activations, fp32 logits and loss exceed the first stage's by (never less
    than 0), so the total is the larger of the two stages. The recompute buffer is
    :func:`.memory.activation_bytes_per_device`'s ``recompute_buffer`` (one layer's activations rebuilt in the
    backward pass). ``cuda_context``: ``training.cuda_context_bytes`` (None: :data:`.allocator.CUDA_CONTEXT_BYTES`).

    The compiled function is one a structure (:func:`model_numbers`): the model's numbers (``params``,
    ``replicated``, the state's bytes a value, the shape's sizes, the products' widths of ``sac``) are its arguments,
    not constants of its expression, so models of one structure share it; the figures are those of the expression
    with the numbers in it up to float rounding (the last bits).

    >>> f = framework_memory_fn("ideal", 1e9, "bf16", 0, "1f1b", "none", False, None, True, False)
    >>> sorted({float(x) for x in f(1, 1, 1, 1, 1, 8, 5e9).values()})
    [0.0]
    """
    allocator.check_framework(framework)
    numbers, structure = model_numbers(shape, sac)
    values = (float(params), float(replicated), float(dtype_bytes(state_dtype(dtype))), float(embedding)) + numbers
    f = _framework_memory_compiled(framework, zero_stage, schedule, recompute, sequence_parallel, single_stage, hopper,
                                   loss, structure, allocator.bf16_optimizer(framework, state_dtype(dtype), zero_stage))

    def run(b_, t_, p_a, m_, v_a, d_, act_, c_=1) -> dict:
        args = (b_, t_, p_a, m_, v_a, d_, c_, act_)
        shape_ = np.broadcast_shapes(*(np.shape(x) for x in args))
        out = {k: np.broadcast_to(np.asarray(x, dtype=float), shape_)
               for k, x in zip(FRAMEWORK_OUTPUTS, f(*args, *values))}
        if cuda_context is not None and framework != "ideal":  # a constant outside the allocator: nothing else reads it
            out["cuda_context"] = np.broadcast_to(float(cuda_context), shape_)
        return out
    return run


# the model's numbers as arguments of the compiled memory functions (:func:`model_numbers`): sizes the checks of
# :mod:`.memory` want as positive integer symbols, the mixture-of-experts widths (a shared expert's may be 0) as
# non-negative ones, the parameter counts and the bytes a value as positive reals (``replicated`` may be 0)
_PARAMS, _REPLICATED = sp.Symbol("n_params", positive=True), sp.Symbol("n_replicated", nonnegative=True)
_WB = sp.Symbol("state_value_bytes", positive=True)
_EMBEDDING = sp.Symbol("n_embedding", nonnegative=True)  # the first stage's parameters on top of its blocks
_SHAPE_SYMS = tuple(sp.Symbol(f"shape_{k}", positive=True, integer=True) for k in ("s", "h", "a", "layers", "vocab"))
_MOE_SYMS = tuple(sp.Symbol(f"moe_{i}", nonnegative=True, integer=True) for i in range(6))
_DENSE_SYMS = tuple(sp.Symbol(f"dense_{i}", positive=True, integer=True) for i in range(4))


def model_numbers(shape: tuple | None, sac: tuple | None) -> tuple:
    """``(numbers, structure)`` of ``shape`` (:func:`memory_fn`'s) and ``sac``: their sizes (floats, in the order of
    :func:`model_symbols`) and what is left of the two when the sizes are taken out (the flags: ``fused``, whether
    there is a vocabulary, the mixture of experts' ``head_norms``, 8-bit inputs, the recompute's modules, multi-latent
    attention, whether a dense layer's widths are given, dropout, the bytes a score; the products' splits). The memory
    expressions branch in Python on the flags only (:mod:`.memory`, :mod:`.allocator`: the sizes enter sums, products,
    ``Max``, ``Min`` and ``Piecewise``), so one compiled function a structure serves every model of it.

    >>> numbers, structure = model_numbers((4096, 4096, 32, 32, 128256, True, None), ((4096, "column"),))
    >>> numbers
    (4096.0, 4096.0, 32.0, 32.0, 128256.0, 4096.0)
    >>> structure
    ((True, True, None, False, (), False, False, True, None), ('column',))
    >>> model_symbols(structure)
    [shape_s, shape_h, shape_a, shape_layers, shape_vocab, sac_0]
    """
    numbers, flags, splits = (), None, None
    if shape is not None:
        sq, h, a, layers, vocab, fused, moe, *rest = shape
        q8, mods, mla, dense, drop, scores = (tuple(rest) + (False, (), False, None, True, None)[len(rest):])[:6]
        numbers = tuple(float(x) for x in (sq, h, a, layers) + (() if vocab is None else (vocab,)))
        if moe is not None:
            numbers += tuple(float(x) for x in moe[:6])
        if dense is not None:
            numbers += tuple(float(x) for x in dense)
        flags = (fused, vocab is not None, None if moe is None else bool(moe[6]), bool(q8), tuple(mods), bool(mla),
                 dense is not None, bool(drop), None if scores is None else int(scores))
    if sac is not None:
        numbers += tuple(float(width) for width, _ in sac)
        splits = tuple(split for _, split in sac)
    return numbers, (flags, splits)


def model_symbols(structure: tuple) -> list:
    """The symbols of :func:`model_numbers`' numbers for a ``structure``, in their order: the sizes of its
    :func:`_symbolic` shape and products."""
    shape, sac = _symbolic(structure)
    syms = [] if shape is None else ([x for x in shape[:5] if x is not None] + list((shape[6] or ())[:6])
                                     + list(shape[10] or ()))
    return syms + [width for width, _ in sac or ()]


def _symbolic(structure: tuple) -> tuple:
    """``(shape, sac)`` of a :func:`model_numbers` structure with every size its symbol."""
    flags, splits = structure
    shape = None
    if flags is not None:
        fused, has_vocab, norms, q8, mods, mla, has_dense, drop, scores = flags
        shape = _SHAPE_SYMS[:4] + (_SHAPE_SYMS[4] if has_vocab else None, fused,
                                   None if norms is None else _MOE_SYMS + (norms,), q8, mods, mla,
                                   _DENSE_SYMS if has_dense else None, drop, scores)
    sac = None if splits is None else tuple((sp.Symbol(f"sac_{i}", positive=True, integer=True), split)
                                            for i, split in enumerate(splits))
    return shape, sac


@lru_cache(maxsize=None)
def _framework_memory_compiled(framework: str, zero_stage: int, schedule: str, recompute: str, sequence_parallel: bool,
                               single_stage: bool, hopper: bool, loss: str | None, structure: tuple,
                               fp32_accumulation: bool = False):
    """:func:`framework_memory_fn`'s compiled function of one structure: ``f(b, t, p, m, v, d, c, act, params,
    replicated, value_bytes, embedding, *sizes)``; ``fp32_accumulation``: DeepSpeed's ``BF16_Optimizer``
    (:func:`.allocator.bf16_optimizer`)."""
    shape, sac = _symbolic(structure)

    def build():
        b, t, p, m, v, d, c = (_SYM[k] for k in ("b", "t", "p", "m", "v", "d", "c"))
        act = sp.Symbol("act", nonnegative=True)
        p_ = sp.Integer(1) if single_stage else p
        v_ = v if schedule == "interleaved" else 1
        wb = _WB
        stage = sum(n / (k * s) for n, k, s in stage_groups(_PARAMS, _REPLICATED, _EMBEDDING, t, p_))
        unit, logits, rebuild, last_extra = stage, sp.Integer(0), sp.Integer(0), sp.Integer(0)
        if shape is not None:
            sq, h, a, layers, vocab, fused_, moe, q8, mods, mla, dense, drop, scores = shape
            unit = _PARAMS / (layers * t)
            logits = sq * b * vocab / (t * c)
            args = (sq, b, h, a, layers, t, sequence_parallel, recompute, p_, schedule, m, v_)
            layer = {"moe": moe, "eight_bit": q8, "modules": mods, "mla": mla, "dense": dense, "dropout": drop,
                     "score_bytes": scores}
            first = sp.sympify(memory.activation_bytes_per_device(*args, 0, vocab, fused_attention=fused_, sac=sac,
                                                                  **layer))
            if framework != "ideal":
                rebuild = (sp.sympify(memory.activation_bytes_per_device(*args, 0, vocab, True, fused_, sac,
                                                                         **layer)) - first) / c
            if not single_stage:  # the last stage: its activations and fp32 logits against the first stage's
                q = sp.Symbol("q", positive=True, integer=True)  # the last stage, p - 1, substituted below
                last = sp.sympify(memory.activation_bytes_per_device(*args, q, fused_attention=fused_, sac=sac,
                                                                     **layer)).subs(q, p_ - 1)
                width = memory.hidden_width(h, moe, dense)
                last += 4 * sq * b * width / t + 4 * sq * b * vocab / t  # final norm, output input, fp32 logits (§4.3)
                last_extra = (last - first) / c
        loss_bytes = sp.sympify(allocator.loss_buffer_bytes(framework, logits, loss))
        if not single_stage and framework != "ideal":
            loss_bytes = sp.Max(0, last_extra + loss_bytes, evaluate=False)  # unevaluated: Max's search costs seconds
        groups = (d * c, t, p, c)
        parts = allocator.framework_parts(framework, zero_stage, stage, unit, wb, d * c, groups, logits, rebuild,
                                          hopper, not single_stage, framework == "fsdp2" and not single_stage, loss,
                                          fp32_accumulation)
        parts["loss_buffers"] = 0 if framework == "ideal" else loss_bytes
        # what the backward pass frees before the optimizer step: its transient bytes and the gradient buffers it
        # moves to the step's copies; the allocator's transient bytes hold the buffers only under FSDP (freed a unit
        # at a time)
        freed = act + sum(sp.sympify(parts[k]) for k in allocator.TRANSIENT)
        transient = freed if framework in ("fsdp", "fsdp2") else freed - sp.sympify(parts["gradient_buffers"])
        # the step's gradient copies past those freed bytes, and the freed bytes the allocator keeps cached beside the
        # copies' new segments
        step = (framework, zero_stage, stage, wb, d * c, freed, fp32_accumulation)
        parts["gradient_buffers"] = sp.sympify(parts["gradient_buffers"]) + sp.sympify(
            allocator.step_gradient_bytes(*step))
        cached = sp.sympify(allocator.step_cached_bytes(*step))
        out = {**parts, "fragmentation": allocator.fragmentation_bytes(framework, transient) + cached,
               "headroom": allocator.headroom_bytes(framework, transient, groups) + cached}
        syms = [b, t, p, m, v, d, c, act, _PARAMS, _REPLICATED, _WB, _EMBEDDING] + model_symbols(structure)
        return syms, [sp.sympify(out[k]) for k in FRAMEWORK_OUTPUTS]
    return lambdified("framework_memory", (framework, zero_stage, schedule, recompute, sequence_parallel, single_stage,
                                           hopper, loss, structure, fp32_accumulation), build, cse=True)
