"""Algorithm and bus bandwidth of a collective, as nccl-tests reports them.

Source: ``NVIDIA/nccl-tests`` ``doc/PERFORMANCE.md`` and ``src/*.cu`` (commit a0b82b22), transcribed in
``reference/training-formulas.md`` §6.1 [P]:

    algbw = S / t,       busbw = algbw * factor

with ``S`` the size nccl-tests uses (= this toolkit's ``n`` for every op: per-rank vector for
allreduce/broadcast/reduce, total array for allgather/reduce_scatter, bytes sent per rank for alltoall)
and factor ``2(P-1)/P`` (allreduce), ``(P-1)/P`` (allgather, reduce_scatter, alltoall), ``1``
(broadcast, reduce, p2p = nccl-tests' SendRecv).  busbw "should reflect the speed of the hardware
bottleneck"; e.g. a ring allreduce at ``beta = 1/B`` and ``alpha = 0`` has ``busbw = B``.
"""
from __future__ import annotations

import sympy as sp

from .checks import as_value, check_n, check_name, check_ranks, check_rate
from .collectives import OPS

__all__ = ["algbw", "busbw", "busbw_factor"]


def busbw_factor(op: str, P) -> sp.Expr:
    """nccl-tests' busbw/algbw factor for ``op`` on ``P`` ranks."""
    check_name("op", op, OPS)
    P = check_ranks(P)
    if op == "allreduce":
        return 2 * (P - 1) / P
    if op in ("allgather", "reduce_scatter", "alltoall"):
        return (P - 1) / P
    return sp.Integer(1)


def _time(t) -> sp.Expr:
    t = check_rate("t", t)
    if t.is_zero:
        raise ValueError("t: must be > 0 seconds")
    return t


def algbw(n, t):
    """``n / t`` bytes/s (a float for numbers, else a sympy expression).

    >>> algbw(1e9, 0.5)
    2000000000.0
    """
    return as_value(check_n(n) / _time(t))


def busbw(op: str, n, t, P):
    """``algbw(n, t) * factor(op, P)`` per nccl-tests (training-formulas.md §6.1).

    >>> busbw("allreduce", 1e9, 1.0, 4)
    1500000000.0
    """
    factor = busbw_factor(op, P)
    return as_value(check_n(n) / _time(t) * factor)
