"""Results of a serving computation kept with the graph they were computed from, so that a search that prices the
same graph again (a serving sweep, the bisections over slots and batches of :mod:`.capacity` and
:mod:`.continuous_batching`, the prompt pass every iteration of a replica carries) computes each once.

A graph is never changed once built (:func:`concurrency_model.models.get_model` hands the same object to every
caller asking for the same model, batch and sequence length), so what is computed from it and from hashable
arguments is the same every time; the memo is dropped with the graph (a weak reference) and again whenever nodes
were added to it. A device enters a key without its memory capacity (:func:`device_key`): a search prices its
batches on a copy of the device with unbounded memory and the kernels' seconds do not read the capacity (the
memory is checked apart, :func:`concurrency_model.parallel.memory.memory_per_device`). Arguments that cannot be
hashed are computed afresh.
"""
from __future__ import annotations

import weakref
from dataclasses import replace

_MEMO: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # graph -> (its node count, {key: value})


def device_key(dev) -> tuple:
    """What identifies ``dev`` for its kernels' seconds: every compared field but the memory capacity, and the
    numbers of a symbolic device's choices (``decide``, not compared by the device's own equality).

    >>> from concurrency_model.hardware.devices import load_device
    >>> from dataclasses import replace
    >>> d = load_device("h100-sxm5-80gb")
    >>> device_key(d) == device_key(replace(d, mem_capacity=1e30)), device_key(d) == device_key(replace(d, mem_bw=1))
    (True, False)
    """
    return replace(dev, mem_capacity=0.0), tuple(sorted((str(k), repr(v)) for k, v in dev.decide.items()))


def memoized(graph, key: tuple, compute):
    """``compute()``, kept with ``graph`` under ``key`` (module docstring): the value computed the first time.

    >>> from concurrency_model.models import get_model
    >>> g, calls = get_model("gpt2", batch=2), []
    >>> [memoized(g, ("twice", 21), lambda: calls.append(1) or 42) for _ in range(3)], len(calls)
    ([42, 42, 42], 1)
    """
    try:
        hash(key)
    except TypeError:
        return compute()
    known = _MEMO.get(graph)
    if known is None or known[0] != len(graph.nodes):
        known = _MEMO[graph] = (len(graph.nodes), {})
    memo = known[1]
    if key not in memo:
        memo[key] = compute()
    return memo[key]


__all__ = ["memoized", "device_key"]
