"""The capacity questions of serving: the largest batch an inference scenario holds in device memory, with its
latency and throughput there (``concurrency-model infer --scenario FILE --max-batch``), and the tensor-parallel
degrees and batches a decoder can be served with, against a latency target (``--sweep``).

A serving configuration's memory per device is its weights plus, per sequence, the KV cache of
``prompt_len + decode_len`` positions and the largest operator's workspace
(:func:`concurrency_model.inference.infer`): affine in the batch. The batch is solved from the memory at
batch 1 and 2 (priced on the same device with unbounded memory), then checked (and moved by one while
needed) against the real device, so that the answer fits and one more sequence does not.
"""
from __future__ import annotations

import itertools
import math
from dataclasses import replace

import numpy as np
import pandas as pd

from .checks import count, items, number
from .cluster import load_cluster
from .inference import infer, is_causal_decoder
from .lengths import lengths
from .ops.sparse import parse_sparsity
from .progress import Progress
from .queueing import replicas_for
from .scenario import read_scenario
from .serving import WEIGHT_BYTES, expert_count, model_graph

UNBOUNDED = 1e30  # bytes: a device whose memory never refuses, to price the memory of any batch


def _at(raw: dict, batch: int, cluster=None):
    inf = {**raw["inference"], "batch": batch}
    return infer({**raw, "inference": inf, **({"cluster": cluster} if cluster is not None else {})})


def max_batch(scenario) -> tuple[int, object]:
    """``(batch, result)``: the largest batch of the scenario (its own ``inference.batch`` is replaced) whose
    memory fits every device, and :func:`~concurrency_model.inference.infer`'s result at it. ``ValueError``
    (the memory's reason) when not even one sequence fits.

    >>> b, r = max_batch({"model": "gpt2", "cluster": "dgx-a100",
    ...                   "inference": {"prompt_len": 512, "decode_len": 512}})
    >>> b > 1000, r.inference["batch"] == b
    (True, True)
    """
    raw = read_scenario(scenario)
    if not isinstance(raw.get("inference"), dict):
        raise ValueError("inference: missing; give an object with prompt_len, decode_len, dtype")
    cl = load_cluster(raw.get("cluster"))
    usable = float(cl.device.mem_capacity)
    big = replace(cl, device=replace(cl.device, mem_capacity=UNBOUNDED))

    # memory does not depend on a load (inference.load_rps): probe without it, then answer with it
    bare = {**raw, "inference": {k: v for k, v in raw["inference"].items() if k != "load_rps"}}

    def need(b: int) -> float:
        return float(_at(bare, b, big).memory["total_bytes"])

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
    (:func:`~concurrency_model.queueing.replicas_for`): each of its replicas (``expert`` of them share the row's
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
    with ``inference.price_per_gpu_hour``, ``cost_per_million_tokens`` (:mod:`concurrency_model.economics`);
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
    raw = read_scenario(scenario)
    if not isinstance(raw.get("inference"), dict):
        raise ValueError("inference: missing; give an object with prompt_len, decode_len, dtype")
    if not is_causal_decoder(raw.get("model")):
        raise ValueError("model: the serving sweep is for causal decoders (batches of generated tokens); "
                         "use infer for one forward pass")
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
    elif load_rps is not None:  # a static batch: as many replicas as its requests a second need
        df["replicas"] = np.ceil(load_rps / df["requests_per_s"]).astype(int)
    if load_rps is not None:
        df["gpus_for_load"] = df["replicas"] * df["gpus"]
    return df.sort_values("tokens_per_s_per_gpu", ascending=False, kind="stable").reset_index(drop=True)
