"""Candidate all-reduce cost forms for fitting, as design matrices: ``t = X(n, P, N) @ x`` with ``x >= 0``.

Every alpha-beta formula is linear in its constants, so a form is a function that returns one column per
constant (the coefficient of alpha, of beta, ...) for ``n`` bytes per rank, ``P`` ranks and ``N`` nodes
(numpy arrays, one entry per measurement; ``P`` and ``N`` may be one number). :mod:`.fit_select` fits and compares them.

* ``flat(algorithm)``: columns ``[T(n, P; 1, 0), T(n, P; 0, 1)]`` of
  :func:`~concurrency_model.comm.collectives.collective_time` for ``ring``, ``rabenseifner``,
  ``recursive_doubling``, ``tree`` (binomial) and ``double_binary_tree``: the formulas of Thakur,
  Rabenseifner & Gropp, IJHPCA 19(1), 2005 §4.6, and NCCL's double binary tree (training-formulas §6.5),
  with MPICH's non-power-of-two handling, at gamma = 0 (the reduction cost is, for ring and Rabenseifner,
  collinear with beta and cannot be told apart from it).
* ``hierarchical_ring()``: the two-tier (intra-node / inter-node) ring of training-formulas §6.6 (NCCL 2.4
  blog) with ``g = P / N`` ranks per node, constants ``(alpha_intra, beta_intra, alpha_inter, beta_inter)``:
  ``2 (g-1) a_i + 2 (g-1)/g n b_i + 2 (N-1) a_e + 2 (N-1)/N (n/g) b_e``.

>>> import numpy as np
>>> flat("ring").design(np.array([1000.0]), np.array([4.0]), np.array([1.0])).tolist()
[[6.0, 1500.0]]
>>> hierarchical_ring().design(np.array([800.0]), np.array([16.0]), np.array([2.0])).tolist()
[[14.0, 1400.0, 2.0, 100.0]]
>>> identifiable(hierarchical_ring(), [1e6, 2e6, 4e6], [16, 16, 16], [2, 2, 2])  # one split: no
False
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import numpy as np

from ..comm.collectives import collective_time

#: The flat all-reduce algorithms whose cost is linear in n (the pipelined chain's optimal segment count
#: is not), in the order that wins ties.
FLAT = ("ring", "rabenseifner", "recursive_doubling", "tree", "double_binary_tree")


@dataclass(frozen=True)
class Form:
    """A cost form linear in its ``k`` non-negative constants: ``design(n, P, N) -> (rows, k)`` seconds per
    unit constant; ``names`` of the constants (``alpha`` s, ``beta`` s/byte, ...); ``source`` cites it."""

    name: str
    names: tuple[str, ...]
    design: Callable[[np.ndarray, np.ndarray, np.ndarray], np.ndarray]
    source: str

    @property
    def k(self) -> int:
        return len(self.names)


@lru_cache(maxsize=None)
def _coefficients(algorithm: str, P: int) -> tuple[float, float]:
    """Coefficients of alpha and of n * beta in ``collective_time("allreduce", algorithm, n, P, ...)``."""
    a = float(collective_time("allreduce", algorithm, 1, P, 1, 0, 0))
    b = float(collective_time("allreduce", algorithm, 1, P, 0, 1, 0))
    return a, b


def _broadcast(n, P, N):
    """``n, P, N`` as float arrays of ``n``'s length (``P``, ``N`` may be one number each)."""
    n = np.atleast_1d(np.asarray(n, dtype=float))
    return (n, *(np.array(np.broadcast_to(np.asarray(v, dtype=float), n.shape)) for v in (P, N)))


def _ranks(P) -> np.ndarray:
    p = np.asarray(P, dtype=float)
    if np.any(p < 1) or np.any(p != np.round(p)):
        raise ValueError("ranks: every rank count must be an integer >= 1")
    return p


def identifiable(form: Form, n, P, N) -> bool:
    """Whether the rows pin every constant of ``form``: its design matrix, each column scaled to unit
    norm, has full column rank (e.g. the two-tier form needs two different ranks-per-node / node splits)."""
    X = form.design(n, P, N)
    norms = np.linalg.norm(X, axis=0)
    return bool(np.all(norms > 0) and np.linalg.matrix_rank(X / norms, tol=1e-9) == form.k)


def flat(algorithm: str) -> Form:
    """The one-level ``algorithm`` all-reduce (Thakur et al. 2005 §4.6; NCCL double binary tree, §6.5)."""
    if algorithm not in FLAT:
        raise ValueError(f"algorithm: {algorithm!r} is not linear in n; allowed: {', '.join(FLAT)}")

    def design(n, P, N):
        n, P, N = _broadcast(n, P, N)
        u, inv = np.unique(_ranks(P), return_inverse=True)
        c = np.array([_coefficients(algorithm, int(x)) for x in u]).reshape(-1, 2)[inv.ravel()]
        return np.column_stack([c[:, 0], c[:, 1] * np.asarray(n, dtype=float)])

    return Form(algorithm, ("alpha", "beta"), design, "Thakur, Rabenseifner & Gropp 2005 §4.6; NCCL 2.4 blog")


def hierarchical_ring() -> Form:
    """Reduce-scatter in the node, ring all-reduce of ``n/g`` across nodes, all-gather in the node
    (training-formulas §6.6 [P], NCCL 2.4 blog; :func:`~concurrency_model.comm.hierarchical.
    hierarchical_allreduce` with ring phases at gamma = 0)."""

    def design(n, P, N):
        n, P, N = _broadcast(n, P, N)
        p, nodes = _ranks(P), _ranks(N)
        if np.any(p % nodes):
            raise ValueError("nodes: every rank count must be a multiple of its node count")
        g = p / nodes
        return np.column_stack([2 * (g - 1), 2 * (g - 1) / g * n, 2 * (nodes - 1), 2 * (nodes - 1) / nodes * n / g])

    return Form("hierarchical_ring", ("alpha_intra", "beta_intra", "alpha_inter", "beta_inter"), design,
                "training-formulas.md §6.6 (NCCL 2.4 blog)")
