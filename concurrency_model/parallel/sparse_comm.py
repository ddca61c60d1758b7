"""Exchanging sparse and factored gradients (paper §7.3.2 and §7.3 "other"): SparCML's sparse allreduce
with fill-in, and sufficient-factor broadcasting. Used by :mod:`.compression`; formulas **derived [D]**
from the methods' descriptions (paper-models.md §5.3 lists the size models, tagged [D]).

**Sparse allreduce** (SparCML, Renggli et al., SC 2019: recursive doubling over sparse vectors, switching
to a dense vector once the sparse one is no smaller). In round ``i`` of ``L = ceil(log2 P)`` each worker
sends its partial sum to the worker ``2^i`` away. The supports of the workers' top-k sets differ, so the
partial sum fills in: in the worst case (disjoint supports, SparCML's bound) it holds ``2^i k`` entries in
round ``i``, until that is no smaller than the dense vector. With ``s`` the bytes of one worker's sparse
message and ``D`` the dense gradient's bytes, round ``i`` moves ``min(2^i s, D)`` bytes and all rounds

    ``sum_i min(2^i s, D) = s (2^j - 1) + (L - j) D``,  ``j = min(L, ceil(log2(D / s)))``

so the time is ``L alpha + beta (s (2^j - 1) + (L - j) D)``. For ``P`` not a power of two, MPICH-style
recursive doubling adds a pre- and post-exchange; ``ceil(log2 P)`` rounds stand for them here.

**Sufficient-factor broadcasting** (SFB: Xie et al. 2016; Poseidon's hybrid communication, Zhang et al.,
USENIX ATC 2017). A fully connected layer's weight gradient over ``r`` rows (samples, or tokens of a
sequence) is a sum of ``r`` outer products, ``dW = sum_r u_r v_r^T`` (``u``: the ``c_out`` output
gradients, ``v``: the ``c_in`` inputs), so a worker can broadcast ``r (c_in + c_out)`` values instead of
the ``c_in c_out`` of the matrix, and every worker rebuilds the sum from the ``P`` workers' factors (one
GEMM of depth ``r`` per remote worker). The factors of the ``P`` workers are gathered, not summed. A layer
goes by SFB when that sends fewer bytes than the bandwidth-optimal allreduce of its matrix:
``(P - 1) r (c_in + c_out) < 2 (P - 1)/P c_in c_out``, i.e. ``P r (c_in + c_out) < 2 c_in c_out``
(Poseidon's choice per layer between SFB and a parameter server weighs the same two volumes); without
``P`` the plain size rule ``r (c_in + c_out) < c_in c_out``. Everything else (convolutions, biases, norms)
is all-reduced densely.
"""
from __future__ import annotations

import sympy as sp

from ..comm.checks import as_value, check_n, check_ranks, check_rate, is_num
from ..timing.graph import matrix_copies, owns_matrix

__all__ = ["sparse_allreduce_rounds", "sparse_allreduce_time", "sufficient_factors"]


def _rounds(P):
    return sp.Integer(int(P - 1).bit_length()) if is_num(P) else sp.ceiling(sp.log(P, 2))


def _dense_rounds(sparse_bytes, dense_bytes, L):
    """``j``: the rounds that still send sparse partial sums (``2^i s < D``)."""
    if is_num(sparse_bytes) and is_num(dense_bytes):
        s, D = float(sparse_bytes), float(dense_bytes)
        j = 0
        while j < 64 and s * 2 ** j < D:
            j += 1
        return sp.Min(L, j) if not is_num(L) else min(int(L), j)
    return sp.Min(L, sp.Max(0, sp.ceiling(sp.log(dense_bytes / sparse_bytes, 2))))


def sparse_allreduce_rounds(sparse_bytes, dense_bytes, P: int) -> list:
    """Bytes each worker sends in each round of the sparse allreduce (worst-case fill-in; module doc).

    >>> sparse_allreduce_rounds(1000, 6000, 16)     # 1000, 2000, 4000, then dense
    [1000.0, 2000.0, 4000.0, 6000.0]
    """
    s, D = check_n(sparse_bytes, "sparse_bytes"), check_n(dense_bytes, "dense_bytes")
    P = check_ranks(P, "P")
    if not (is_num(P) and is_num(s) and is_num(D)):
        raise ValueError("P: the rounds of a sparse allreduce need numbers; use sparse_allreduce_time for symbols")
    return [float(min(2 ** i * s, D)) for i in range(int(_rounds(P)))]


def sparse_allreduce_time(sparse_bytes, dense_bytes, P, alpha, beta):
    """Seconds of SparCML's sparse allreduce (recursive doubling with worst-case fill-in, module doc).

    >>> sparse_allreduce_time(1000, 6000, 16, 1e-6, 1e-9)     # 4 alpha + (1000 + 2000 + 4000 + 6000) beta
    1.7e-05
    >>> from concurrency_model.symbols import P, alpha, beta
    >>> sparse_allreduce_time(1000, 10**6, P, alpha, beta)
    alpha*ceiling(log(P)/log(2)) + beta*(1000*2**Min(10, ceiling(log(P)/log(2))) + 1000000*ceiling(log(P)/log(2)) - 1000000*Min(10, ceiling(log(P)/log(2))) - 1000)
    """
    s, D = check_n(sparse_bytes, "sparse_bytes"), check_n(dense_bytes, "dense_bytes")
    P = check_ranks(P, "P")
    a, b = check_rate("alpha", alpha), check_rate("beta", beta)
    L = _rounds(P)
    j = _dense_rounds(s, D, L)
    return as_value(L * a + b * (s * (2 ** sp.sympify(j) - 1) + (L - j) * D))


def sufficient_factors(graph, workers=None) -> tuple[tuple, object, object]:
    """``(layers, factor_values, dense_values)`` of sufficient-factor broadcasting for ``graph`` (built for
    the samples one worker contributes to a step): ``layers`` the ``(c_out, c_in, rows)`` of the fully
    connected layers sent as factors, ``factor_values`` the ``rows (c_in + c_out)`` values one worker
    sends for them, ``dense_values`` every other parameter (all-reduced). ``workers``: ``P`` for Poseidon's
    rule, ``None`` for the size rule (module doc).

    >>> from concurrency_model import get_model
    >>> layers, factors, rest = sufficient_factors(get_model("alexnet", batch=32), workers=8)
    >>> layers, factors, rest     # the three fully connected layers; the convolutions and biases dense
    (((4096, 9216, 32), (4096, 4096, 32), (1000, 4096, 32)), 851200, 2478888)
    """

    P = None if workers is None else check_ranks(workers, "workers")
    layers, factors, matrices = [], sp.Integer(0), sp.Integer(0)
    for n in graph.layers():
        a = n.attrs
        if not owns_matrix(n):  # a weight tied to an embedding is all-reduced with it
            continue
        c_out, c_in = int(a["c_out"]), int(a["c_in"])
        rows = sp.sympify(graph.batch) * a.get("rows_per_sample", 1)
        if not is_num(rows):
            raise ValueError(f"graph: layer {n.name!r} has a symbolic batch; build the graph for a number of samples")
        rows = int(rows)
        # an expert layer holds one matrix per expert; each routed row's factors go to its expert
        sent, dense = rows * (c_in + c_out), matrix_copies(n) * c_in * c_out
        if (P * sent < 2 * dense) if P is not None else (sent < dense):
            layers.append((c_out, c_in, rows))
            factors += sent
            matrices += dense
    return tuple(layers), factors, sp.sympify(graph.params) - matrices
