"""The capacity questions of serving: the largest batch an inference scenario holds in device memory, with its
latency and throughput there (``concurrency-model infer --scenario FILE --max-batch``), and the tensor-parallel
degrees and batches a decoder can be served with, against a latency target (``--sweep``); and serving at full
load (``--max-load``, :func:`max_throughput`): the output tokens/s of an engine whose KV cache takes a fraction of the
memory left free and whose slots are all busy, as TensorRT-LLM's ``trtllm-bench throughput`` measures it.

A serving configuration's memory per device is its weights plus, per sequence, the KV cache of
``prompt_len + decode_len`` positions and the largest operator's workspace
(:func:`concurrency_model.serving.decoder.infer`): affine in the batch. The batch is solved from the memory at
batch 1 and 2 (priced on the same device with unbounded memory), then checked (and moved by one while
needed) against the real device, so that the answer fits and one more sequence does not.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import dataclass, replace

import numpy as np
import pandas as pd

from ..checks import count, items, number
from ..hardware.clusters import load_cluster
from ..ops.sparse import parse_sparsity
from ..progress import Progress
from ..scenario import inference_section, load_scenario, read_scenario
from ..units import dtype_bytes
from .decoder import infer, is_causal_decoder
from .output_lengths import lengths
from .overheads import WEIGHT_BYTES, expert_count, model_graph, model_shape
from .queueing import replicas_for

UNBOUNDED = 1e30  # bytes: a device whose memory never refuses, to price the memory of any batch


def _at(raw: dict, batch: int, cluster=None, memory_only: bool = False):
    """:func:`~concurrency_model.serving.decoder.infer` of the scenario at ``batch`` (on ``cluster`` when given);
    ``memory_only``: its ``memory`` alone, what the searches below read of every batch they try but the answer."""
    inf = {**raw["inference"], "batch": batch}
    return infer({**raw, "inference": inf, **({"cluster": cluster} if cluster is not None else {})},
                 memory_only=memory_only)


def _serving_scenario(scenario, decoder_for: str | None = None) -> dict:
    """The scenario's raw object, refused (``ValueError`` naming the field) without an ``inference`` object or, where
    ``decoder_for`` names the search, for a model that is not a causal decoder."""
    raw = read_scenario(scenario)
    if not isinstance(raw.get("inference"), dict):
        raise ValueError("inference: missing; give an object with prompt_len, decode_len, dtype")
    if decoder_for and not is_causal_decoder(raw.get("model")):
        raise ValueError(f"model: {decoder_for} is for causal decoders (batches of generated tokens); use infer for "
                         "one forward pass")
    return raw


def max_batch(scenario) -> tuple[int, object]:
    """``(batch, result)``: the largest batch of the scenario (its own ``inference.batch`` is replaced) whose
    memory fits every device, and :func:`~concurrency_model.serving.decoder.infer`'s result at it. ``ValueError``
    (the memory's reason) when not even one sequence fits.

    >>> b, r = max_batch({"model": "gpt2", "cluster": "dgx-a100",
    ...                   "inference": {"prompt_len": 512, "decode_len": 512}})
    >>> b > 1000, r.inference["batch"] == b
    (True, True)
    """
    raw = _serving_scenario(scenario)
    cl = load_cluster(raw.get("cluster"))
    usable = float(cl.device.mem_capacity)
    big = replace(cl, device=replace(cl.device, mem_capacity=UNBOUNDED))

    # memory does not depend on a load (inference.load_rps): probe without it, then answer with it
    bare = {**raw, "inference": {k: v for k, v in raw["inference"].items() if k != "load_rps"}}

    def need(b: int) -> float:
        return float(_at(bare, b, big, memory_only=True)["total_bytes"])

    unit = _unit(raw)  # batches in steps of what splits them evenly
    one = need(unit)
    if one > usable:
        _at(bare, unit)  # raises the memory's reason
    b = unit * largest(lambda k: need(k * unit), usable, one)
    return b, _at(raw, b)


def largest(need, usable: float, one: float | None = None) -> int:
    """The largest ``k >= 1`` with ``need(k) <= usable``, for ``need`` growing with ``k`` and ``need(1)`` (``one``,
    when known) within ``usable``. Memory is affine in a batch but for the workspace's pieces: a guess from
    ``need(1)`` and ``need(2)``, then steps doubling outwards until one fits and the next does not, then bisection
    (two more calls when the guess is right).

    >>> largest(lambda k: 10 + 3 * k, 100.0), largest(lambda k: k * k, 50.0)
    (30, 7)
    """
    one = need(1) if one is None else one
    slope = need(2) - one
    b, step = max(1, 1 + math.floor((usable - one) / slope) if slope > 0 else 1), 1
    if need(b) <= usable:
        while need(b + step) <= usable:
            b, step = b + step, 2 * step
        lo, hi = b, b + step
    else:
        while b - step >= 1 and need(b - step) > usable:
            b, step = b - step, 2 * step
        lo, hi = max(1, b - step), b
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if need(mid) <= usable else (lo, mid)
    return lo


def _unit(raw: dict) -> int:
    """The step of a scenario's batches: its replicas (``parallel.data``) split a batch evenly, and under continuous
    batching so do the groups of slots a pipeline stage each (``parallel.pipeline``); a field that is not a positive
    integer counts 1 (the scenario's checks name it)."""
    par = raw.get("parallel") or {}

    def positive(v) -> int:
        return v if isinstance(v, int) and not isinstance(v, bool) and v >= 1 else 1
    groups = positive(par.get("pipeline", 1)) if (raw.get("inference") or {}).get("batching") == "continuous" else 1
    return positive(par.get("data", 1)) * groups


# Serving at full load as TensorRT-LLM's ``trtllm-bench throughput`` runs it (NVIDIA/TensorRT-LLM):
# [perf]  docs/source/performance/perf-overview.md @ 00f37686: requests fed at an infinite rate, "Total Output
#         Throughput (tokens/sec)" of the run; --kv_cache_free_gpu_mem_fraction 0.95 "in many cases" (default 0.90)
# [tune]  tensorrt_llm/bench/build/tuning.py @ 04cba882 (calc_engine_setting, finetune_setting): the engine's
#         max_batch_size and max_num_tokens from the requests the KV cache would hold
# [gen]   tensorrt_llm/bench/benchmark/utils/general.py @ 0171265e (get_settings): chunked prefill off by default, so
#         max_num_tokens is raised to at least the longest prompt + max_batch_size
# [util]  tensorrt_llm/_torch/pyexecutor/_util.py (cal_max_tokens, estimate_max_kv_cache_tokens; the mid-2025 version
#         in the code index): KV cache = fraction x (the GPU's memory - the peak of a profiling pass: weights,
#         activations, memory outside torch)
# [sched] docs/source/performance/performance-tuning-guide/useful-runtime-flags.md: capacity scheduler
#         GUARANTEED_NO_EVICT by default: a request starts only when its prompt and its whole output fit in the cache
KV_FREE_FRACTION = 0.95  # [perf]
ENGINE_MAX_REQUESTS = 4096  # [tune]: the requests the engine's batch is sized for, at most (decoder buffers)
ENGINE_MAX_TOKENS = 32768  # [tune]: tokens an iteration, at most (activation buffers)


def engine_requests(mem_capacity: float, gpus: int, params: float, weight_bytes: float, layers: int, kv_heads: int,
                    tensor: int, head_dim: int, kv_bytes: float, context: int,
                    kv_fraction: float = KV_FREE_FRACTION) -> float:
    """The requests of ``context`` = input + output positions that trtllm-bench estimates its KV cache holds ([tune],
    ``calc_engine_setting``): ``kv_fraction`` of the ``gpus`` devices' memory less every parameter at ``weight_bytes``,
    over ``2 layers max(tensor, kv_heads) head_dim kv_bytes`` bytes a position (a tensor rank holds at least one KV
    head) times ``context``. An estimate for sizing the engine; the cache the run gets is :func:`max_throughput`'s.

    >>> round(engine_requests(80e9, 1, 8.03e9, 1, 32, 8, 1, 128, 1, 2000), 1)  # Llama 3.1 8B in fp8, 1000/1000
    521.6
    """
    per_position = 2 * layers * max(tensor, kv_heads) * head_dim * kv_bytes
    return (mem_capacity * gpus - params * weight_bytes) * kv_fraction / (per_position * context)


def engine_limits(requests: float, prompt_len: int, decode_len: int, pipeline: int = 1,
                  chunked: bool = False) -> tuple[int, int]:
    """``(max_batch_size, max_num_tokens)`` that trtllm-bench gives its engine ([tune], ``finetune_setting``) for
    ``requests`` (:func:`engine_requests`): the batch ``b = min(requests, 4096) / pipeline`` rounded up (to 32 and at
    least 64 below 256, to 128 below 1024, else to 256), the tokens ``min(b (1 + prompt_len / decode_len), 32768)``
    (the steady iteration's decode and prompt tokens) rounded up (to 256 and at least 2048 below 4096, to 512 below
    8192, else to 1024); without chunked prefill ([gen], the default) at least ``prompt_len + max_batch_size``.

    >>> engine_limits(521.6, 1000, 1000), engine_limits(8000, 128, 128), engine_limits(51.0, 20000, 2000)
    ((640, 2048), (4096, 8192), (64, 20064))
    """
    raw_bs = min(requests, ENGINE_MAX_REQUESTS) / pipeline
    raw_tokens = min(raw_bs * (1 + prompt_len / decode_len), ENGINE_MAX_TOKENS)
    step = 32 if raw_bs < 256 else 128 if raw_bs < 1024 else 256
    bs = step * math.ceil(raw_bs / step)
    bs = max(64, bs) if raw_bs < 256 else bs
    step = 256 if raw_tokens < 4096 else 512 if raw_tokens < 8192 else 1024
    tokens = step * math.ceil(raw_tokens / step)
    tokens = max(2048, tokens) if raw_tokens < 4096 else tokens
    return bs, tokens if chunked else max(tokens, prompt_len + bs)


@dataclass
class MaxLoad:
    """The result of :func:`max_throughput`: the slots that run (``slots``), what limits them (``limited_by``:
    ``kv_cache``, ``max_batch_size`` or ``max_num_tokens``), the sequences the KV cache holds (``kv_slots``), the
    engine's limits, the KV cache's share of the free memory and its bytes a device, and ``result``
    (:func:`~concurrency_model.serving.decoder.infer` of continuous batching at ``slots``)."""

    slots: int
    limited_by: str
    kv_slots: int
    max_batch_size: int
    max_num_tokens: int
    engine_requests: float
    kv_fraction: float
    free_bytes: float  # a device's memory less weights and workspace at ``slots``
    result: object
    gpus: int

    @property
    def output_tokens_per_s(self) -> float:
        """Output tokens a second of the whole system (every replica's devices): trtllm-bench's "Total Output
        Throughput" ([perf])."""
        return self.result.tokens_per_s

    @property
    def output_tokens_per_s_per_gpu(self) -> float:
        return self.result.tokens_per_s / self.gpus

    def summary(self) -> dict:
        return {"slots": self.slots, "limited_by": self.limited_by, "kv_slots": self.kv_slots,
                "max_batch_size": self.max_batch_size, "max_num_tokens": self.max_num_tokens,
                "engine_requests": self.engine_requests, "kv_fraction": self.kv_fraction,
                "free_bytes_per_device": self.free_bytes, "kv_cache_budget_bytes_per_device":
                self.kv_fraction * self.free_bytes, "kv_cache_bytes": self.result.kv_cache_bytes}

    def to_dict(self) -> dict:
        return {**self.result.to_dict(), "output_tokens_per_s": self.output_tokens_per_s,
                "output_tokens_per_s_per_gpu": self.output_tokens_per_s_per_gpu, "max_load": self.summary()}

    def __repr__(self) -> str:
        return (f"MaxLoad({self.slots} slots ({self.limited_by}): {self.output_tokens_per_s:,.0f} output tokens/s on "
                f"{self.gpus} GPU{'s' * (self.gpus != 1)})")


def max_throughput(scenario, kv_fraction: float = KV_FREE_FRACTION, max_batch_size: int | None = None,
                   max_num_tokens: int | None = None) -> MaxLoad:
    """Serving at full load (``infer --max-load``): every request of ``prompt_len`` input and ``decode_len`` output
    tokens queued at once, as ``trtllm-bench throughput`` runs ([perf]); continuous (inflight) batching in steady state
    with every slot busy (:mod:`concurrency_model.serving.continuous_batching`), the scenario's ``inference.batch`` replaced by:

    * the sequences whose KV cache (each at ``prompt_len + decode_len`` positions: the scheduler admits a request
      only when its whole output fits, [sched]) takes at most ``kv_fraction`` of a device's memory left free by the
      weights and the workspace ([util]): ``kv(b) <= kv_fraction (capacity - weights - workspace(b))`` (the memory
      of :func:`~concurrency_model.serving.decoder.infer`; memory outside the framework, CUDA graphs and NCCL buffers, is
      not counted [D]);
    * at most the engine's ``max_batch_size`` a pipeline stage (:func:`engine_limits` of :func:`engine_requests`, or
      the one given), and an iteration carries at most ``max_num_tokens`` tokens (``inference.max_batched_tokens``;
      given, or trtllm-bench's), which may keep fewer slots decoding (:func:`~concurrency_model.serving.continuous_batching.
      budget_slots`). The mean iteration is the same whether a prompt runs whole or in chunks.

    The output tokens/s are the system's (``parallel.data`` replicas of ``tensor x pipeline`` devices); ``per_gpu``
    divides by its devices. ``ValueError`` naming the field for a static batch, a load, a fraction outside (0, 1] or a
    cache that holds not even one sequence.

    >>> m = max_throughput({"model": {"hf_config": "llama-3.1-8b"}, "cluster": "dgx-h100",
    ...                     "inference": {"prompt_len": 1000, "decode_len": 1000, "dtype": "fp8", "kv_dtype": "fp8"}})
    >>> m.slots, m.limited_by, m.max_batch_size, m.max_num_tokens, m.output_tokens_per_s > 10_000
    (520, 'kv_cache', 640, 2048, True)
    """
    raw = _serving_scenario(scenario, decoder_for="serving at full load")
    kv_fraction = number("kv_fraction", kv_fraction, high=1, high_ok=True)
    count("max_batch_size", max_batch_size, none_ok=True)
    count("max_num_tokens", max_num_tokens, none_ok=True)
    inf = raw["inference"]
    if inf.get("batching", "continuous") != "continuous":
        raise ValueError(f"inference.batching: serving at full load runs continuous (inflight) batching, got "
                         f"{inf['batching']!r}; leave it out or give 'continuous'")
    if inf.get("load_rps") is not None:
        raise ValueError("inference.load_rps: serving at full load has every slot busy (requests at an infinite "
                         "rate); leave the load out")
    budget = max_num_tokens if max_num_tokens is not None else inf.get("max_batched_tokens")
    base = {**raw, "inference": {k: v for k, v in inf.items() if k != "max_batched_tokens"} | {"batching":
                                                                                               "continuous"}}
    cl = load_cluster(raw.get("cluster"))
    capacity = float(cl.device.mem_capacity)
    big = replace(cl, device=replace(cl.device, mem_capacity=UNBOUNDED))

    def parts(memory: dict) -> tuple[float, float]:
        """(weights + workspace, KV caches) bytes a device of a result's ``memory``."""
        fixed = float(memory["model_state_bytes"]) + float(memory["activations_bytes"])
        return fixed, float(memory["total_bytes"]) - fixed

    def need(k: int) -> float:  # kv <= f (capacity - fixed)  <=>  fixed + kv / f <= capacity
        fixed, kv = parts(_at(base, k * unit, big, memory_only=True))  # on an unbounded device
        return fixed + kv / kv_fraction

    unit = _unit(base)
    # the memory of one step of slots (its checks refuse what infer refuses); the engine's shape and layout read off the
    # scenario as infer reads them, without pricing an iteration that nothing here uses
    fixed, kv = parts(_at(base, unit, big, memory_only=True))
    inf_in = inference_section(base)
    if fixed + kv / kv_fraction > capacity:
        raise ValueError(f"memory: {kv_fraction:.0%} of the {max(0.0, capacity - fixed) / 1e9:,.1f} GB a device left "
                         f"free by the weights and workspace ({fixed / 1e9:,.1f} GB of {capacity / 1e9:,.1f} GB) holds "
                         f"not even {unit} sequence{'s' * (unit != 1)} of {inf_in.prompt_len + inf_in.decode_len:,} "
                         f"positions ({kv / 1e9:,.2f} GB); split the weights over more devices (parallel.tensor or "
                         "parallel.pipeline) or store them smaller (inference.weight_dtype)")
    kv_slots = unit * largest(need, capacity, fixed + kv / kv_fraction)
    shape, (t, p, d), weight_dtype = _engine_shape(base, inf_in)
    weight_bytes = WEIGHT_BYTES.get(weight_dtype) or dtype_bytes(weight_dtype)
    requests = engine_requests(capacity, t * p, shape["params"], weight_bytes, shape["layers"], shape["kv_heads"], t,
                               shape["head_dim"], shape["kv_bytes"], inf_in.prompt_len + inf_in.decode_len, kv_fraction)
    bs, tokens = engine_limits(requests, inf_in.prompt_len, inf_in.decode_len, p)
    bs = bs if max_batch_size is None else max_batch_size
    tokens = tokens if budget is None else budget
    slots = min(kv_slots, d * p * bs)
    result = _at({**base, "inference": {**base["inference"], "max_batched_tokens": tokens}}, slots)
    busy = int(result.inference.get("slots_busy_at_most", slots))
    why = "max_num_tokens" if busy < slots else "kv_cache" if kv_slots <= d * p * bs else "max_batch_size"
    free = capacity - float(result.memory["model_state_bytes"]) - float(result.memory["activations_bytes"])
    return MaxLoad(busy, why, kv_slots, bs, tokens, requests, kv_fraction, free, result, t * p * d)


def _engine_shape(raw: dict, inf) -> tuple[dict, tuple[int, int, int], str]:
    """``(shape, (tensor, pipeline, data), weight_dtype)`` of a serving scenario (``raw``, whose ``inference`` is
    ``inf`` parsed) as :func:`~concurrency_model.serving.decoder.infer` has them in its result's ``shape``, ``parallel``
    and ``inference``: the scenario loaded as infer loads it (its ``training`` defaulting to the inference dtype), the
    model's shape off its graph at batch 1 (:func:`~concurrency_model.serving.overheads.model_shape`) with the KV
    cache's bytes a value (``kv_dtype``, default ``dtype``), the weights' dtype defaulting to ``dtype``.

    >>> raw = {"model": "gpt2", "cluster": "dgx-a100", "parallel": {"tensor": 2},
    ...        "inference": {"prompt_len": 128, "decode_len": 32, "batching": "continuous", "kv_dtype": "fp8"}}
    >>> shape, lay, w = _engine_shape(raw, inference_section(raw))
    >>> shape["layers"], shape["kv_heads"], shape["head_dim"], shape["kv_bytes"], lay, w
    (12, 12, 64, 1, (2, 1, 1), 'fp16')
    """
    sc = load_scenario({**raw, "training": raw.get("training") or {"dtype": inf.dtype}})
    shape = {**model_shape(model_graph(sc.model, 1, None, dtype_bytes(inf.dtype))),
             "kv_bytes": dtype_bytes(inf.kv_dtype or inf.dtype)}
    par = sc.parallel
    return shape, (par.tensor, par.pipeline, par.data), inf.weight_dtype or inf.dtype


def _with_layout(raw: dict, t: int, e: int | None, p: int | None = None) -> dict:
    """The scenario with tensor degree ``t`` (and ``p`` pipeline stages, unless None) and one replica or, for a
    mixture of experts (``e`` not None), ``e`` replicas sharing their experts (``parallel.data =
    parallel.expert = e``)."""
    par = {**(raw.get("parallel") or {}), "tensor": t}  # one replica; a load's replicas are the sweep's columns
    if p is not None:
        par["pipeline"] = p
    return {**raw, "parallel": {**par, "data": e or 1, "expert": e or 1}}


def layouts(gpus_per_node: int, experts: int) -> list[tuple[int, int | None]]:
    """``(tensor, expert)`` degrees of a serving sweep inside a node: every power-of-two tensor degree, and for a
    model with ``experts`` per layer (0: none; ``expert`` then None) every power-of-two expert group of 2 or
    more replicas that divides them, beside the tensor ranks.

    >>> layouts(8, 0)
    [(1, None), (2, None), (4, None), (8, None)]
    >>> layouts(8, 8)
    [(1, 1), (1, 2), (1, 4), (1, 8), (2, 1), (2, 2), (2, 4), (4, 1), (4, 2), (8, 1)]
    """
    tensors = [2 ** i for i in range(gpus_per_node.bit_length()) if 2 ** i <= gpus_per_node]
    if not experts:
        return [(t, None) for t in tensors]
    return [(t, e) for t in tensors for e in tensors if t * e <= gpus_per_node and experts % e == 0]


def _with_weights(raw: dict, fmt: str) -> dict:
    """The scenario with its blocks' weights stored as ``fmt``: a ``weight_dtype`` (``int8``, ``fp8``, ``int4``, or
    the scenario's dtype) or a ``weight_sparsity`` (``2:4`` or a fraction of zeros); ``ValueError`` naming
    ``weights`` otherwise."""
    inf = {k: v for k, v in raw["inference"].items() if k not in ("weight_dtype", "weight_sparsity")}
    if fmt in WEIGHT_BYTES:
        return {**raw, "inference": {**inf, "weight_dtype": fmt}}
    try:
        return {**raw, "inference": {**inf, "weight_sparsity": parse_sparsity(fmt)}}
    except ValueError:
        raise ValueError(f"weights: unknown format {fmt!r}; give {', '.join(WEIGHT_BYTES)}, 2:4 or a fraction of "
                         "zeros") from None


def replicas_for_load(load_rps: float, row: dict, dist,
                      max_first_token_s: float | None) -> tuple[int, float]:
    """``(replicas, mean wait for a slot)`` of a continuous-batching sweep row under ``load_rps``
    (:func:`~concurrency_model.serving.queueing.replicas_for`): each of its replicas (``expert`` of them share the row's
    slots) a queue in front of its slots, a request holding one for its mean length of iterations at full slots;
    with a time-to-first-token target, enough replicas that the wait fits beside the row's first token."""
    g = row.get("expert") or 1
    room = None if max_first_token_s is None else max_first_token_s - row["prefill_s"]
    return replicas_for(load_rps / g, row["batch"] // g, dist.mean * row["decode_s_per_token"], dist.cv2, room)


def serving_sweep(scenario, max_decode_s: float | None = None, progress: bool = False,
                  weights: tuple | None = None, load_rps: float | None = None,
                  max_first_token_s: float | None = None, pipelines: tuple | None = None) -> pd.DataFrame:
    """Every tensor-parallel degree inside a node (powers of two that split the model; for a mixture of experts
    with every expert group beside it, :func:`layouts`) and every batch from 1 (one a replica) to the largest that
    fits (powers of two and the largest) of a causal decoder's scenario, one row each: ``tensor`` (and ``expert``
    for a mixture of experts), ``batch, gpus, prefill_s, decode_s_per_token, tokens_per_s, tokens_per_s_per_gpu,
    memory_bytes_per_device``, ``pareto`` (no other row has both a shorter decode step and more tokens/s per GPU)
    and, with ``max_decode_s`` and / or ``max_first_token_s`` (``prefill_s``: the time to the first token),
    ``meets_target``; per million generated tokens ``gpu_hours_per_million_tokens``, ``energy_per_token_j`` and,
    with ``inference.price_per_gpu_hour``, ``cost_per_million_tokens`` (:mod:`concurrency_model.serving.economics`);
    ``requests_per_s`` of one replica (its tokens/s over ``decode_len``) and, with ``load_rps`` requests a second
    to serve, ``replicas`` and ``gpus_for_load`` (replicas of the configuration, each serving its own requests,
    enough for the load; with continuous batching enough that each replica's queue for a free slot is stable and,
    with ``max_first_token_s``, that the mean wait in it, ``queue_wait_s``, fits beside the first token:
    :func:`replicas_for_load`). Sorted by tokens/s per GPU, the most first. ``weights``: formats of the blocks'
    weights to compare (``fp16``, ``int8``, ``int4``, ``2:4``, ...; :func:`_with_weights`), a ``weights`` column
    then telling them apart; default: the scenario's own. ``pipelines``: pipeline degrees to search as well (each a
    replica over that many stages, one a node when the tensor ranks fill it: a model over one node's memory), a
    ``pipeline`` column then on every row; default: the scenario's ``parallel.pipeline``.
    """
    raw = _serving_scenario(scenario, decoder_for="the serving sweep")
    if raw["inference"].get("load_rps") is not None:
        raise ValueError("inference.load_rps: not in a serving sweep, which runs every configuration at its capacity; "
                         "give the load to the sweep (--load RPS, load_rps=) to size the replicas for it")
    for name, v in (("max_decode_s", max_decode_s), ("max_first_token_s", max_first_token_s), ("load_rps", load_rps)):
        number(name, v, none_ok=True)
    given = items("weights", weights if weights is not None else ())
    formats = {f: _with_weights(raw, f) for f in given} if given else {None: raw}
    stages = [count("pipelines", p) for p in dict.fromkeys(items("pipelines", pipelines or ()))] or [None]
    cl = load_cluster(raw.get("cluster"))
    experts = expert_count(model_graph(raw["model"], 1, 1, 2))
    plans, errors = {}, []
    for fmt, sc in formats.items():
        for (t, e), p in itertools.product(layouts(cl.gpus_per_node, experts), stages):
            try:
                top, _ = max_batch(_with_layout(sc, t, e, p))
            except ValueError as err:  # the degree does not split the model, or nothing fits on that many devices
                errors.append(err)
                continue
            unit = _unit(_with_layout(sc, t, e, p))  # a batch splits over the replicas (and pipeline groups)
            plans[fmt, t, e, p] = sorted({unit * 2 ** i for i in range((top // unit).bit_length())
                                          if unit * 2 ** i <= top} | {top})
    if not plans:
        raise errors[-1] if "memory" in str(errors[-1]) else errors[0]  # why nothing fits, else the first error
    rows = []
    with Progress(sum(len(b) for b in plans.values()), "serving sweep", enabled=progress) as bar:
        for (fmt, t, e, p), batches in plans.items():
            for b in batches:
                r = _at(_with_layout(formats[fmt], t, e, p), b)
                gpus = t * r.parallel["pipeline"] * (e or 1)
                depth = r.parallel["pipeline"]
                rows.append({**({"weights": fmt} if weights else {}), "tensor": t,
                             **({"pipeline": depth} if depth > 1 or pipelines else {}),
                             **({"expert": e} if e is not None else {}), "batch": b, "gpus": gpus,
                             "prefill_s": r.prefill_s, "decode_s_per_token": r.decode_s_per_token,
                             "tokens_per_s": r.tokens_per_s, "tokens_per_s_per_gpu": r.tokens_per_s / gpus,
                             "memory_bytes_per_device": r.memory_bytes_per_device,
                             "requests_per_s": r.tokens_per_s / r.inference["decode_len"], **r.economics})
                bar.update()
    df = pd.DataFrame(rows)
    lat, thr = df["decode_s_per_token"].to_numpy(), df["tokens_per_s_per_gpu"].to_numpy()
    df["pareto"] = [not ((lat <= lat[i]) & (thr >= thr[i]) & ((lat < lat[i]) | (thr > thr[i]))).any()
                    for i in range(len(df))]
    if max_decode_s is not None or max_first_token_s is not None:
        df["meets_target"] = (df["decode_s_per_token"] <= (max_decode_s or np.inf)) & \
            (df["prefill_s"] <= (max_first_token_s or np.inf))
    if load_rps is not None and raw["inference"].get("batching") == "continuous":
        dist = lengths(raw["inference"].get("output_lengths", "fixed"), r.inference["decode_len"],
                       r.shape["context"] - r.inference["prompt_len"])
        fleet = [replicas_for_load(load_rps, row, dist, max_first_token_s) for row in df.to_dict("records")]
        df["replicas"] = [f[0] for f in fleet]
        df["queue_wait_s"] = [f[1] for f in fleet]
        if max_first_token_s is not None:  # a request's first token comes after its wait for a slot
            df["meets_target"] &= df["prefill_s"] + df["queue_wait_s"] <= max_first_token_s * (1 + 1e-12)
    elif load_rps is not None:  # a static batch: as many replicas as its requests a second need
        df["replicas"] = np.ceil(load_rps / df["requests_per_s"]).astype(int)
    if load_rps is not None:
        df["gpus_for_load"] = df["replicas"] * df["gpus"]
    return df.sort_values("tokens_per_s_per_gpu", ascending=False, kind="stable").reset_index(drop=True)
