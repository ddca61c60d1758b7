"""The largest batch an inference scenario holds in device memory, and its latency and throughput there
(``concurrency-model infer --scenario FILE --max-batch``): the capacity question of serving.

A serving configuration's memory per device is its weights plus, per sequence, the KV cache of
``prompt_len + decode_len`` positions and the largest operator's workspace
(:func:`concurrency_model.inference.infer`): affine in the batch. The batch is solved from the memory at
batch 1 and 2 (priced on the same device with unbounded memory), then checked (and moved by one while
needed) against the real device, so that the answer fits and one more sequence does not.
"""
from __future__ import annotations

import math
from dataclasses import replace

from .cluster import load_cluster
from .inference import infer
from .scenario import read_scenario

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

    def need(b: int) -> float:
        return float(_at(raw, b, big).memory["total_bytes"])

    one = need(1)
    if one > usable:
        _at(raw, 1)  # raises the memory's reason
    slope = need(2) - one
    b = 1 + math.floor((usable - one) / slope) if slope > 0 else 1
    while b > 1 and need(b) > usable:
        b -= 1
    while need(b + 1) <= usable:
        b += 1
    return b, _at(raw, b)
