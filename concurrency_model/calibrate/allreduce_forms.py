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
* ``two_level(algorithm, G)``: the same composition one level up, for a switched network whose nodes sit
  in groups of ``G`` under one switch (a fat tree's leaf: links inside the group, shared up-links
  between groups): the ``algorithm`` all-reduce (``ring`` or ``rabenseifner``) of ``n`` bytes among the
  ``g = P G / N`` ranks of a group, then of ``n / g`` bytes among the ``K = N / G`` groups, each level
  with its own (alpha, beta); ``K = 1`` (one group, ``N <= G``) is the flat all-reduce.

>>> import numpy as np
>>> flat("ring").design(np.array([1000.0]), np.array([4.0]), np.array([1.0])).tolist()
[[6.0, 1500.0]]
>>> hierarchical_ring().design(np.array([800.0]), np.array([16.0]), np.array([2.0])).tolist()
[[14.0, 1400.0, 2.0, 100.0]]
>>> identifiable(hierarchical_ring(), [1e6, 2e6, 4e6], [16, 16, 16], [2, 2, 2])  # one split: no
False
>>> two_level("ring", 2).design(np.array([800.0]), np.array([4.0]), np.array([4.0])).tolist()
[[2.0, 800.0, 2.0, 400.0]]
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Callable

import numpy as np

from ..checks import count
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


#: The algorithms whose all-reduce is a reduce-scatter plus an all-gather (ring; Rabenseifner's recursive
#: halving and doubling), so that a two-level version splits into an all-reduce inside the group and one
#: of ``n/g`` bytes across groups (Thakur, Rabenseifner & Gropp 2005 §4.6; training-formulas §6.6).
TWO_LEVEL = ("ring", "rabenseifner")


def two_level(algorithm: str, group_nodes: int) -> Form:
    """``algorithm`` all-reduce on a two-level network, nodes in switch groups of ``group_nodes`` (G):
    reduce-scatter among the ``g = P G / N`` ranks of a group, all-reduce of ``n/g`` bytes across the
    ``K = N/G`` groups (the ``g`` of them in parallel on the up-links), all-gather in the group:
    ``T_alg(n, g; a_intra, b_intra) + T_alg(n/g, K; a_inter, b_inter)`` [D] (training-formulas §6.6, the
    NCCL 2.4 blog's 2D ring with the switch group in place of the node; Thakur et al. 2005 §4.6 for each
    level). Rabenseifner with equal constants is the flat Rabenseifner (``lg g + lg K = lg P``); for
    both, the bandwidth term sums to the flat ``2 (P-1)/P n``. ``two_level("ring", 1)`` is
    :func:`hierarchical_ring`. ``N`` must be at most G or a multiple of it."""
    if algorithm not in TWO_LEVEL:
        raise ValueError(f"algorithm: {algorithm!r} is not a reduce-scatter + all-gather; allowed: "
                         f"{', '.join(TWO_LEVEL)}")
    G = count("group_nodes", group_nodes)

    def design(n, P, N):
        n, P, N = _broadcast(n, P, N)
        p, nodes = _ranks(P), _ranks(N)
        if np.any((nodes > G) & (nodes % G != 0)):
            raise ValueError(f"nodes: a node count above the group size {G} must be a multiple of it")
        K = np.where(nodes > G, nodes / G, 1.0)
        g = p / K
        if np.any(g != np.round(g)):
            raise ValueError(f"ranks: every rank count must divide evenly among its {G}-node groups")
        intra = np.array([_coefficients(algorithm, int(x)) for x in g]).reshape(-1, 2)
        inter = np.array([_coefficients(algorithm, int(x)) for x in K]).reshape(-1, 2)
        return np.column_stack([intra[:, 0], intra[:, 1] * n, inter[:, 0], inter[:, 1] * n / g])

    return Form(f"{algorithm}, two-level (G={G})", ("alpha_intra", "beta_intra", "alpha_inter", "beta_inter"),
                design, "training-formulas.md §6.6 (NCCL 2.4 blog); Thakur, Rabenseifner & Gropp 2005 §4.6")
