"""Collective operations in the alpha-beta-gamma model, per algorithm: ``collective_time``.

Model (DESIGN.md): a message of ``n`` bytes between two ranks costs ``alpha + n beta``; combining
``n`` bytes costs ``n gamma`` (gamma = reduction compute s/byte, *not* the paper's gamma, which is
``value_bytes``).  Single-ported, fully connected network, one message sent and one received per rank
per step.  Unless a line says otherwise the formulas are the standard table of Thakur, Rabenseifner &
Gropp, "Optimization of collective communication operations in MPICH", IJHPCA 19(1), 2005, and Chan,
Heimlich, Purkayastha & van de Geijn, "Collective communication: theory, practice, and experience",
CCPE 19(13), 2007, transcribed in ``reference/paper-models.md`` §2.2 — tagged **[D]** there: they are
**not the paper's** (Ben-Nun & Hoefler give only allreduce forms; see :mod:`concurrency_model.comm.paper`).

``n`` (DESIGN.md contract):
  * broadcast, reduce, allreduce: the vector size per rank;
  * allgather: the total gathered size (the final buffer; each rank contributes ``n/P``);
  * reduce_scatter: the total input size per rank (each rank ends with ``n/P``);
  * alltoall: the bytes each process sends in total (``n/P`` to each peer, its own block included);
  * p2p: the message size.

Logarithms: ``lg = log2``; binomial trees take ``ceil(lg P)`` steps.  Recursive doubling / halving and
Rabenseifner for ``P`` not a power of two follow MPICH (Thakur et al. 2005 §4): with
``p' = 2**floor(lg P)`` the ``r = P - p'`` extra ranks first send their whole input to a partner, which
combines it (one step ``alpha + n beta + n gamma``), the ``p'`` survivors run the power-of-two
algorithm, and the extra ranks receive their result at the end (one more step: ``alpha + n beta`` for
allreduce/allgather, ``alpha + (n/P) beta`` for reduce_scatter; none for reduce, whose root is taken to
be a survivor).  For the recursive-doubling allgather the pre-step carries the extra rank's ``n/P`` block.
The middle phase is costed as if the vector were split evenly among the ``p'`` survivors [D].
For a symbolic ``P`` the "is P a power of two" switch is ``Min(P - 2**floor(log(P, 2)), 1)`` and the
logarithms are ``floor``/``ceiling(log(P, 2))``; substituting a number gives the numeric call's value.
``P = 1`` costs 0 for every collective.
"""
from __future__ import annotations

from typing import Callable

import sympy as sp

from .checks import active, check_n, check_name, check_rate, check_ranks, clog2, flog2, nonpow2
from .chain import chain_time, optimal_segments

__all__ = ["ALGORITHMS", "OPS", "collective_time", "p2p_time"]

#: Which algorithms apply to which operation (the first listed wins ties in :func:`~.select.auto`).
ALGORITHMS: dict[str, tuple[str, ...]] = {
    "broadcast": ("tree", "scatter_allgather", "pipelined_chain"),
    "reduce": ("tree", "rabenseifner", "pipelined_chain"),
    "allreduce": ("recursive_doubling", "tree", "ring", "rabenseifner", "pipelined_chain",
                  "double_binary_tree"),
    "allgather": ("recursive_doubling", "bruck", "ring"),
    "reduce_scatter": ("recursive_doubling", "ring", "pairwise"),
    "alltoall": ("bruck", "pairwise"),
    "p2p": ("direct",),
}
OPS: tuple[str, ...] = tuple(ALGORITHMS)


def p2p_time(n, alpha, beta) -> sp.Expr:
    """Point-to-point send/recv: ``alpha + n beta`` (Hockney's model; DESIGN.md alpha-beta convention).

    >>> p2p_time(1000, 2, 0.5)
    502.000000000000
    """
    n = check_n(n)
    return check_rate("alpha", alpha) + n * check_rate("beta", beta)


def _mpich_extra(P, pre, post):
    """Pre- and post-steps of the MPICH non-power-of-two scheme (Thakur et al. 2005 §4), or 0."""
    return nonpow2(P) * (pre + post)


# --- formulas: f(n, P, a, b, g) -> expr; every argument already validated ------------------------------

def _bcast_tree(n, P, a, b, g):
    # binomial tree: ceil(lg P)(alpha + n beta)   [Thakur 2005 §4.2; paper-models.md §2.2]
    return clog2(P) * (a + n * b)


def _bcast_scatter_allgather(n, P, a, b, g):
    # van de Geijn: binomial scatter + ring allgather:
    # (ceil(lg P) + P - 1) alpha + 2 (P-1)/P n beta   [Thakur 2005 §4.2; Barnett et al. 1994]
    return (clog2(P) + P - 1) * a + 2 * (P - 1) / P * n * b


def _reduce_tree(n, P, a, b, g):
    # binomial tree: ceil(lg P)(alpha + n beta + n gamma)   [Thakur 2005 §4.5]
    return clog2(P) * (a + n * b + n * g)


def _reduce_rabenseifner(n, P, a, b, g):
    # reduce-scatter by recursive halving + binomial gather to the root:
    # 2 lg P alpha + 2 (P-1)/P n beta + (P-1)/P n gamma   [Thakur 2005 §4.5]; non-power-of-two: pre-step only
    L = flog2(P)
    q = 2 ** L
    core = 2 * L * a + 2 * (q - 1) / q * n * b + (q - 1) / q * n * g
    return core + _mpich_extra(P, a + n * b + n * g, 0)


def _allreduce_tree(n, P, a, b, g):
    # binomial reduce then binomial broadcast: 2 ceil(lg P)(alpha + n beta) + ceil(lg P) n gamma
    # [Thakur 2005 §4.6; the paper's T_tree at gamma = 0]
    return 2 * clog2(P) * (a + n * b) + clog2(P) * n * g


def _allreduce_recursive_doubling(n, P, a, b, g):
    # butterfly: lg P (alpha + n beta + n gamma)   [Thakur 2005 §4.6; the paper's T_bfly at gamma = 0]
    L = flog2(P)
    return L * (a + n * b + n * g) + _mpich_extra(P, a + n * b + n * g, a + n * b)


def _allreduce_ring(n, P, a, b, g):
    # ring reduce-scatter + ring allgather: 2(P-1) alpha + 2 (P-1)/P n beta + (P-1)/P n gamma
    # [Thakur 2005 §4.6 / Patarasuk & Yuan 2009; the paper's T_pipe at gamma = 0]
    return 2 * (P - 1) * a + 2 * (P - 1) / P * n * b + (P - 1) / P * n * g


def _allreduce_rabenseifner(n, P, a, b, g):
    # recursive-halving reduce-scatter + recursive-doubling allgather:
    # 2 lg P alpha + 2 (P-1)/P n beta + (P-1)/P n gamma   [Thakur 2005 §4.6; the paper's T_rabe]
    L = flog2(P)
    q = 2 ** L
    core = 2 * L * a + 2 * (q - 1) / q * n * b + (q - 1) / q * n * g
    return core + _mpich_extra(P, a + n * b + n * g, a + n * b)


def _allreduce_double_binary_tree(n, P, a, b, g):
    # NCCL double binary tree (Sanders, Speck & Traeff 2009; NVIDIA blog "Massively Scale Your Deep
    # Learning Training with NCCL 2.4", 2019): two trees each carry n/2; reduce then broadcast, pipelined.
    # [D] training-formulas.md §6.5: 2 ceil(lg P) alpha + 2 n beta (pipeline fill ignored; per phase each
    # rank sends and receives at most n/2 twice = n bytes).  gamma [D]: a rank is an inner node of at
    # most one tree and combines its two children's halves there: n gamma.
    return active(P) * (2 * clog2(P) * a + 2 * n * b + n * g)


def _allgather_ring(n, P, a, b, g):
    # (P-1) alpha + (P-1)/P n beta   [Thakur 2005 §4.1]
    return (P - 1) * a + (P - 1) / P * n * b


def _allgather_recursive_doubling(n, P, a, b, g):
    # lg P alpha + (P-1)/P n beta for P a power of two   [Thakur 2005 §4.1]; non-power-of-two: the MPICH
    # pre/post scheme of the module docstring [D]: pre alpha + (n/P) beta, post alpha + n beta
    L = flog2(P)
    q = 2 ** L
    return L * a + (q - 1) / q * n * b + _mpich_extra(P, a + n / P * b, a + n * b)


def _allgather_bruck(n, P, a, b, g):
    # Bruck et al. 1997, any P: ceil(lg P) alpha + (P-1)/P n beta   [Thakur 2005 §4.1]
    return clog2(P) * a + (P - 1) / P * n * b


def _reduce_scatter_ring(n, P, a, b, g):
    # (P-1) alpha + (P-1)/P n (beta + gamma)   [Thakur 2005 §4.4; Chan et al. 2007]
    return (P - 1) * a + (P - 1) / P * n * (b + g)


def _reduce_scatter_halving(n, P, a, b, g):
    # recursive halving: lg P alpha + (P-1)/P n (beta + gamma) for P a power of two [Thakur 2005 §4.4];
    # non-power-of-two: pre alpha + n (beta + gamma), post alpha + (n/P) beta (the extra rank's block)
    L = flog2(P)
    q = 2 ** L
    return L * a + (q - 1) / q * n * (b + g) + _mpich_extra(P, a + n * (b + g), a + n / P * b)


def _alltoall_pairwise(n, P, a, b, g):
    # pairwise exchange: (P-1) alpha + (P-1)/P n beta   [Thakur 2005 §4.3]
    return (P - 1) * a + (P - 1) / P * n * b


def _alltoall_bruck(n, P, a, b, g):
    # Bruck: ceil(lg P) alpha + (n/2) lg P beta   [Thakur 2005 §4.3].  Exact for P a power of two; for
    # other P we keep (n/2) ceil(lg P) beta, an upper bound (step k ships the blocks whose index has bit k
    # set: at most P/2 of the P blocks).  Local rotations are not costed.
    return clog2(P) * (a + n / 2 * b)


def _p2p(n, P, a, b, g):
    # alpha + n beta (0 when there is no peer, P = 1)
    return active(P) * (a + n * b)


_FORMULAS: dict[tuple[str, str], Callable] = {
    ("broadcast", "tree"): _bcast_tree,
    ("broadcast", "scatter_allgather"): _bcast_scatter_allgather,
    ("reduce", "tree"): _reduce_tree,
    ("reduce", "rabenseifner"): _reduce_rabenseifner,
    ("allreduce", "tree"): _allreduce_tree,
    ("allreduce", "recursive_doubling"): _allreduce_recursive_doubling,
    ("allreduce", "ring"): _allreduce_ring,
    ("allreduce", "rabenseifner"): _allreduce_rabenseifner,
    ("allreduce", "double_binary_tree"): _allreduce_double_binary_tree,
    ("allgather", "ring"): _allgather_ring,
    ("allgather", "recursive_doubling"): _allgather_recursive_doubling,
    ("allgather", "bruck"): _allgather_bruck,
    ("reduce_scatter", "ring"): _reduce_scatter_ring,
    ("reduce_scatter", "pairwise"): _reduce_scatter_ring,  # pairwise exchange: same cost as the ring
    ("reduce_scatter", "recursive_doubling"): _reduce_scatter_halving,
    ("alltoall", "pairwise"): _alltoall_pairwise,
    ("alltoall", "bruck"): _alltoall_bruck,
    ("p2p", "direct"): _p2p,
}


def check_op_algorithm(op: str, algorithm: str, field: str = "algorithm") -> None:
    """``ValueError`` naming ``op`` or ``field`` (and the allowed values) if the pair does not apply."""
    check_name("op", op, OPS)
    allowed = ALGORITHMS[op]
    if not isinstance(algorithm, str) or algorithm not in allowed:
        raise ValueError(f"{field}: {algorithm!r} does not apply to {op}; allowed: {', '.join(allowed)}")


def collective_time(op: str, algorithm: str, n, P, alpha, beta, gamma=0, *, segments=None) -> sp.Expr:
    """Time of collective ``op`` run with ``algorithm`` on ``P`` ranks, as a sympy expression.

    Parameters
    ----------
    op : one of :data:`OPS`
    algorithm : one of ``ALGORITHMS[op]``
    n : bytes, see the module docstring for what ``n`` counts per operation (number >= 0 or symbol)
    P : number of ranks (integer >= 1 or a positive integer symbol)
    alpha, beta, gamma : latency (s), inverse bandwidth (s/byte), reduction cost (s/byte)
    segments : only for ``pipelined_chain``: the segment count k (default: the optimal k*)

    Examples
    --------
    >>> from concurrency_model.symbols import alpha, beta, gamma_red, n_bytes as n
    >>> collective_time("allreduce", "ring", n, 4, alpha, beta, gamma_red)
    6*alpha + 3*beta*n/2 + 3*gamma_red*n/4
    >>> collective_time("allreduce", "recursive_doubling", n, 6, alpha, beta)
    4*alpha + 4*beta*n
    >>> collective_time("allgather", "tree", n, 4, alpha, beta)
    Traceback (most recent call last):
    ...
    ValueError: algorithm: 'tree' does not apply to allgather; allowed: recursive_doubling, bruck, ring
    """
    key = (op, algorithm, *((type(x), x) for x in (n, P, alpha, beta, gamma, segments)))
    try:
        hit = _CACHE.get(key)
    except TypeError:  # an unhashable argument: no caching (the checks below reject it)
        key, hit = None, None
    if hit is not None:
        return hit
    out = _collective_time(op, algorithm, n, P, alpha, beta, gamma, segments)
    if key is not None:
        if len(_CACHE) >= _CACHE_SIZE:
            _CACHE.clear()
        _CACHE[key] = out
    return out


# Results of collective_time by (op, algorithm, (type, value) of each argument): a sweep asks for the same
# phase of the same collective many times (four in five calls repeat). Types are part of the key, so that
# True never hits the entry of 1 and 800 never returns the exact result computed for 800.0. Only results are
# stored: a call with a bad argument raises every time.
_CACHE: dict = {}
_CACHE_SIZE = 1 << 16


def _collective_time(op, algorithm, n, P, alpha, beta, gamma, segments) -> sp.Expr:
    check_op_algorithm(op, algorithm)
    n = check_n(n)
    P = check_ranks(P)
    a, b, g = check_rate("alpha", alpha), check_rate("beta", beta), check_rate("gamma", gamma)
    if segments is not None and algorithm != "pipelined_chain":
        raise ValueError(f"segments: only used by algorithm 'pipelined_chain', not {algorithm!r}")
    if P.is_number and P == 1:
        return sp.Integer(0)
    if algorithm == "pipelined_chain":
        k = optimal_segments(op, n, P, a, b, g) if segments is None else check_ranks(segments, "segments")
        return chain_time(op, n, P, a, b, g, k)
    return _FORMULAS[(op, algorithm)](n, P, a, b, g)
