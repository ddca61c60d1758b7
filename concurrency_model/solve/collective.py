"""Closed forms of communication: crossovers, the largest data-parallel P, the bandwidth to hide a transfer
(see :mod:`concurrency_model.solve`)."""
from __future__ import annotations

import math
from functools import lru_cache

import sympy as sp

from .. import symbols as S
from ..comm.checks import check_name, check_ranks
from ..comm.collectives import ALGORITHMS, check_op_algorithm, collective_time
from ..comm.select import crossover
from .base import BUDGET, LOG_P, X_INT, EFFICIENCY, LINK_BW, T_COMPUTE, Solution, fraction, real_above, real_root


@lru_cache(maxsize=256)
def _crossover_expr(op: str, alg_a: str, alg_b: str, P: int):
    if "pipelined_chain" in (alg_a, alg_b):
        return None  # k* = floor(sqrt(...)) defeats solve: select.crossover goes numeric
    return crossover(op, alg_a, alg_b, P, S.alpha, S.beta, S.gamma_red)


def crossover_bytes(op: str, alg_a: str, alg_b: str, P: int, alpha_s: float, beta_s_per_byte: float,
                    gamma_s_per_byte: float = 0.0) -> Solution:
    """Message size (bytes) at which ``alg_a`` and ``alg_b`` cost the same, with its closed form.

    The number is :func:`concurrency_model.comm.select.crossover` (smallest ``n > 0`` where the cheaper
    algorithm changes; ``None`` if they never cross). ``expr`` is the root of ``T_a(n) = T_b(n)`` for this
    ``P`` in the symbols ``alpha, beta, gamma_red`` (every cost but the pipelined chain's is linear in n);
    it is the crossing wherever it is positive. Costs: :mod:`concurrency_model.comm.collectives`
    (Thakur, Rabenseifner & Gropp 2005; paper-models.md §2.2 [D]).

    Parameters
    ----------
    op, alg_a, alg_b : a collective of :data:`~concurrency_model.comm.collectives.OPS` and two of its
        algorithms
    P : ranks, integer >= 1
    alpha_s, beta_s_per_byte : latency (s) and inverse bandwidth (s/byte), both > 0
    gamma_s_per_byte : reduction compute (s/byte), >= 0

    Returns
    -------
    Solution with ``variable = n`` (bytes); ``value`` a float or ``None``.

    Examples
    --------
    >>> s = crossover_bytes("allreduce", "tree", "ring", 64, 1e-6, 1e-9)
    >>> s.expr
    2432*alpha/(107*(2*beta + gamma_red))
    >>> round(s.value, 3)
    11364.486
    """
    check_op_algorithm(op, alg_a, "alg_a")
    check_op_algorithm(op, alg_b, "alg_b")
    P = int(check_ranks(P))
    a, b = real_above("alpha_s", alpha_s), real_above("beta_s_per_byte", beta_s_per_byte)
    g = real_above("gamma_s_per_byte", gamma_s_per_byte, strict=False)
    value = crossover(op, alg_a, alg_b, P, a, b, g)
    value = None if value is None else float(value)
    expr = _crossover_expr(op, alg_a, alg_b, P)
    inputs = {S.alpha: a, S.beta: b, S.gamma_red: g}
    how = "numeric root (log grid + Brent)" if expr is None else "sympy.solve of T_a(n) = T_b(n)"
    note = f"{op}: {alg_a} vs {alg_b} on P={P}; {how}" + ("" if value is not None else "; they never cross")
    return Solution(expr, value, S.n_bytes, note, value, inputs)


# -- 2. microbatch count minimising a pipeline step ---------------------------------------------------
_DP_ARGS = (S.n_bytes, S.alpha, S.beta, S.gamma_red, BUDGET)


@lru_cache(maxsize=32)
def _dp_roots(algorithm: str, strong: bool):
    """``(roots, root_fns, lhs_fn, log2)``: ``lhs(var) = 0`` is ``T(P) = budget`` in ``var = P`` (ring) or
    in ``var = L``, ``P = 2**L`` with L real (the log-step algorithms); ``roots`` solve it for ``var``;
    the ``_fn`` are mpmath functions of ``_DP_ARGS`` (``lhs_fn``: of ``var`` first)."""
    if algorithm == "pipelined_chain":
        return (), (), None, False
    if algorithm == "ring":
        T = collective_time("allreduce", "ring", S.n_bytes, X_INT, S.alpha, S.beta, S.gamma_red)
        lhs, var, roots = T - (BUDGET / X_INT if strong else BUDGET), X_INT, None
        roots = tuple(sp.solve(lhs, X_INT))
    else:
        Li, z, var = sp.Symbol("L", integer=True, positive=True), sp.Dummy("z"), LOG_P
        T = sp.expand_log(collective_time("allreduce", algorithm, S.n_bytes, 2 ** Li, S.alpha, S.beta,
                                          S.gamma_red), force=True).xreplace({Li: LOG_P})
        lhs = sp.expand(T - (BUDGET / 2 ** LOG_P if strong else BUDGET))
        # every log-step cost at P = 2**L is  A L + c0 + c1 2**-L : solve that form once, substitute
        poly = sp.Poly(lhs.subs(2 ** LOG_P, 1 / z), LOG_P, z)
        roots = ()
        if set(poly.monoms()) <= {(1, 0), (0, 0), (0, 1)}:
            coef = {c: poly.coeff_monomial(mono) for c, mono in zip(_LW_COEFS, ((1, 0), (0, 0), (0, 1)))}
            roots = tuple(r.xreplace(coef) for r in _lambert_roots())
    fns = tuple(sp.lambdify(_DP_ARGS, r, "mpmath") for r in roots)
    return roots, fns, sp.lambdify((var,) + _DP_ARGS, lhs, "mpmath"), algorithm != "ring"


_LW_COEFS = (sp.Symbol("A", positive=True), sp.Symbol("c0", real=True), sp.Symbol("c1", real=True))


@lru_cache(maxsize=1)
def _lambert_roots():
    """Roots in L of ``A L + c0 + c1 2**-L = 0`` (Lambert W; with c1 = 0 simply ``-c0/A``)."""
    A, c0, c1 = _LW_COEFS
    return tuple(sp.solve(A * LOG_P + c0 + c1 * 2 ** (-LOG_P), LOG_P))


def _largest_ok(ok, seed_log2: float | None, cap: int) -> int:
    """Largest P <= cap with ``ok(P)`` for the allreduce costs: ``ok(1)`` holds, ``ok(2**k)`` holds for a
    prefix of k, and within ``[2**k, 2**(k+1))`` for a prefix of P (every cost is nondecreasing over powers
    of two, and an octave's other P cost at least its power of two; the budget does not grow with P)."""
    if ok(cap):
        return cap
    top = cap.bit_length() - 1  # 2**top <= cap
    k = 0 if seed_log2 is None or not seed_log2 >= 0 else min(top, int(math.floor(seed_log2)))
    while k > 0 and not ok(2 ** k):
        k -= 1
    while k < top and ok(2 ** (k + 1)):
        k += 1
    lo, hi = 2 ** k, min(2 ** (k + 1), cap)  # ok(lo), not ok(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if ok(mid) else (lo, mid)
    return lo


def max_data_parallel(compute_s: float, grad_bytes: float, alpha_s: float, beta_s_per_byte: float,
                      efficiency: float, algorithm: str = "ring", overlap: bool = False,
                      gamma_s_per_byte: float = 0.0, scaling: str = "weak",
                      max_ranks: int = 2 ** 30) -> Solution:
    """Largest number of data-parallel ranks P with ``compute / (compute + exposed allreduce) >= efficiency``.

    Data-parallel step (paper-models.md §4.1 [D]): each rank computes for ``c`` seconds (``compute_s``
    with ``scaling="weak"``, a fixed local batch; ``compute_s / P`` with ``"strong"``, a fixed global
    batch), then allreduces ``grad_bytes`` of gradients
    (:func:`~concurrency_model.comm.collectives.collective_time`). Without overlap the whole allreduce is
    exposed; with ``overlap`` it runs during the compute (wait-free backprop, an upper bound on hiding) and
    only ``max(0, T - c)`` is. The condition is ``T(P) <= c (1 - E)/E``, with overlap ``T(P) <= c/E`` [D].

    Closed forms (sympy) [D]: ring, ``2(P-1) alpha + (P-1)/P n (2 beta + gamma) = K`` is a quadratic in P
    (weak and strong scaling); for tree, recursive doubling, Rabenseifner and the double binary tree the
    root over powers of two ``P = 2**L`` (L real; Lambert W for Rabenseifner); the integer answer then
    comes from a search that also covers non-powers of two (MPICH's extra steps make some octaves
    cheaper than their lower power of two). The pipelined chain is numeric only; ``"auto"`` takes the
    best algorithm at every P (the largest of the per-algorithm answers).

    Parameters
    ----------
    compute_s : compute per step (s), > 0
    grad_bytes : gradient bytes allreduced per step, > 0
    alpha_s, beta_s_per_byte : latency (s), inverse bandwidth (s/byte), > 0
    efficiency : target, strictly between 0 and 1
    algorithm : an allreduce algorithm of ``ALGORITHMS["allreduce"]``, or ``"auto"``
    overlap : hide the allreduce behind the compute
    gamma_s_per_byte : reduction compute (s/byte), >= 0
    scaling : ``"weak"`` or ``"strong"``
    max_ranks : the search stops there (default 2**30); the log-step algorithms' latency grows so slowly
        that their answer can exceed any machine (``continuous`` is then huge or ``inf``)

    Returns
    -------
    Solution with ``variable = P``; ``value`` an int in ``[1, max_ranks]``; ``expr`` the real P where the
    budget runs out.

    Examples
    --------
    >>> s = max_data_parallel(0.1, 1e8, 1e-5, 1e-10, 0.8)
    >>> s.value, round(s.continuous, 3)
    (254, 254.923)
    >>> max_data_parallel(0.1, 1e8, 1e-5, 1e-10, 0.8, algorithm="tree").value
    2
    """
    C, n = real_above("compute_s", compute_s), real_above("grad_bytes", grad_bytes)
    a, b = real_above("alpha_s", alpha_s), real_above("beta_s_per_byte", beta_s_per_byte)
    g = real_above("gamma_s_per_byte", gamma_s_per_byte, strict=False)
    E = fraction("efficiency", efficiency)
    check_name("algorithm", algorithm, ALGORITHMS["allreduce"] + ("auto",))
    check_name("scaling", scaling, ("weak", "strong"))
    if not isinstance(overlap, bool):
        raise ValueError(f"overlap: must be True or False, got {overlap!r}")
    cap = int(check_ranks(max_ranks, "max_ranks"))
    strong = scaling == "strong"
    budget = T_COMPUTE / EFFICIENCY if overlap else T_COMPUTE * (1 - EFFICIENCY) / EFFICIENCY
    inputs = {S.n_bytes: n, S.alpha: a, S.beta: b, S.gamma_red: g, T_COMPUTE: C, EFFICIENCY: E}
    k_num = float(budget.xreplace(inputs))

    def solve_one(alg: str) -> Solution:
        def ok(P: int) -> bool:
            c = C / P if strong else C
            T = float(collective_time("allreduce", alg, n, P, a, b, g))
            exposed = max(0.0, T - c) if overlap else T
            return c / (c + exposed) >= E

        roots, fns, lhs_fn, log2 = _dp_roots(alg, strong)
        args = (n, a, b, g, k_num)

        def solves(r: float) -> bool:  # the root really solves T = budget (the right Lambert W branch)
            return abs(float(lhs_fn(r, *args))) <= 1e-6 * k_num

        root = real_root(roots, fns, args, solves, positive=not log2)
        expr = cont = seed = None
        if root is not None:
            expr, cont = root[0].xreplace({BUDGET: budget}), root[1]
            seed = cont if log2 else math.log2(cont)
            if log2:  # the root is lg P
                expr, cont = 2 ** expr, (2.0 ** cont if cont < 1000 else math.inf)
        value = _largest_ok(ok, seed, cap)
        how = "closed form over P = 2**L, then" if log2 and expr is not None else \
            ("closed form, then" if expr is not None else "numeric:")
        note = f"{alg} allreduce, {scaling} scaling{', overlapped' if overlap else ''}; {how} integer search" + \
            (f"; capped at max_ranks={cap}" if value == cap else "")
        return Solution(expr, value, S.P, note, cont, inputs)

    if algorithm != "auto":
        return solve_one(algorithm)
    best = max((solve_one(alg) for alg in ALGORITHMS["allreduce"]), key=lambda s: s.value)
    return Solution(None, best.value, S.P, f"auto: best at the largest P is {best.note}", None, inputs)


# -- 4. bandwidth that hides a transfer behind compute ------------------------------------------------
def _bw_value(T, C: float, f=None) -> float | None:
    """Bandwidth 1/beta with T(beta) = C, for T a function of beta alone (sympy expr, or numeric ``f``)."""
    if f is None and sp.diff(T, S.beta, 2) == 0 and T.is_polynomial(S.beta):
        T0, T1 = float(T.subs(S.beta, 0)), float(sp.diff(T, S.beta))
        if T0 > C:
            return None
        if T1 == 0:
            return 0.0
        return math.inf if T0 == C else T1 / (C - T0)
    f = f or (lambda x: float(T.subs(S.beta, x)))
    if f(0.0) > C:
        return None
    if f(0.0) == C:
        return math.inf
    lo, hi = 0.0, 1e-12
    while f(hi) <= C:  # T grows without bound in beta when anything is sent
        lo, hi = hi, hi * 2
        if hi > 1e300:
            return 0.0
    for _ in range(400):  # T is nondecreasing in beta: bisection
        mid = (lo + hi) / 2
        if mid in (lo, hi):
            break
        lo, hi = (mid, hi) if f(mid) <= C else (lo, mid)
    return 1 / lo if lo > 0 else math.inf


def _bw_expr(T):
    try:
        sols = [s for s in sp.solve(sp.Eq(T, T_COMPUTE), S.beta) if s.is_negative is not True]
    except NotImplementedError:
        return None
    return sp.simplify(1 / sols[0]) if len(sols) == 1 and sols[0] != 0 else None


@lru_cache(maxsize=64)
def _collective_bw_expr(op: str, algorithm: str):
    if algorithm == "pipelined_chain":
        return None  # the optimal segment count floor(sqrt(...beta...)) defeats solve
    return _bw_expr(collective_time(op, algorithm, S.n_bytes, S.P, S.alpha, S.beta, S.gamma_red))


def bandwidth_to_hide(op: str, algorithm: str, size_bytes: float, P: int, alpha_s: float, compute_s: float,
                      gamma_s_per_byte: float = 0.0) -> Solution:
    """Link bandwidth (bytes/s, ``1/beta``) at which a collective takes exactly ``compute_s``.

    Every cost but the pipelined chain's is linear in beta, ``T = T0 + beta T1``
    (:mod:`concurrency_model.comm.collectives`), so ``bw = T1 / (compute - T0)``: ``T1`` is the bytes on
    the critical path, ``T0`` the latency (and reduction) time [D]. Any faster link hides the transfer.
    ``value`` is ``None`` when ``T0`` alone exceeds the compute (no bandwidth is enough), ``math.inf``
    when it equals it, ``0.0`` when nothing is sent (``P = 1``). The chain (its optimal segment count
    depends on beta) is solved by bisection on beta.

    Parameters
    ----------
    op, algorithm : a collective (``p2p`` with ``direct`` for one transfer) and one of its algorithms
    size_bytes : message size (bytes, as :func:`~concurrency_model.comm.collectives.collective_time`
        counts it for ``op``), > 0
    P : ranks, integer >= 1
    alpha_s : latency per message (s), >= 0
    compute_s : the compute to hide behind (s), > 0
    gamma_s_per_byte : reduction compute (s/byte), >= 0

    Returns
    -------
    Solution with ``variable = bw`` (``LINK_BW``), bytes/s.

    Examples
    --------
    >>> s = bandwidth_to_hide("allreduce", "ring", 1e9, 4, 0.0, 0.5)
    >>> s.expr
    2*n*(P - 1)/(-2*P**2*alpha + 2*P*alpha - P*gamma_red*n + P*t_compute + gamma_red*n)
    >>> s.value
    3000000000.0
    """
    check_op_algorithm(op, algorithm)
    n, P = real_above("size_bytes", size_bytes), int(check_ranks(P))
    a, C = real_above("alpha_s", alpha_s, strict=False), real_above("compute_s", compute_s)
    g = real_above("gamma_s_per_byte", gamma_s_per_byte, strict=False)
    inputs = {S.n_bytes: n, S.P: P, S.alpha: a, S.gamma_red: g, T_COMPUTE: C}
    if algorithm == "pipelined_chain":
        value = _bw_value(None, C, lambda x: float(collective_time(op, algorithm, n, P, a, x, g)))
        note = f"{op} {algorithm}: bisection on beta"
    else:
        value = _bw_value(collective_time(op, algorithm, n, P, a, S.beta, g), C)
        note = f"{op} {algorithm}: T0 + beta T1 = compute solved for beta"
    if value is None:
        note += "; the latency terms alone exceed the compute"
    return Solution(_collective_bw_expr(op, algorithm), value, LINK_BW, note, value, inputs)


def bandwidth_for_time(comm_time: sp.Expr, compute_s: float, values: dict | None = None) -> Solution:
    """Bandwidth ``1/beta`` at which ``comm_time`` (a sympy expression in ``symbols.beta``) equals
    ``compute_s``, e.g. ``alpha + n beta`` for one message; ``values`` gives numbers for its other symbols.

    ``expr`` solves ``comm_time = t_compute`` for beta (``sympy.solve``); ``value`` as in
    :func:`bandwidth_to_hide` (``None`` when nothing is fast enough; a cost that is not linear in beta is
    solved by bisection, assuming it does not decrease as beta grows).

    Parameters
    ----------
    comm_time : sympy expression containing :data:`concurrency_model.symbols.beta`
    compute_s : the compute to hide behind (s), > 0
    values : ``{symbol: number >= 0}`` for every other symbol of ``comm_time``

    Returns
    -------
    Solution with ``variable = bw`` (``LINK_BW``), bytes/s.

    Examples
    --------
    >>> from concurrency_model.symbols import alpha, beta, n_bytes as n
    >>> s = bandwidth_for_time(alpha + n * beta, 0.002, {alpha: 0.001, n: 1e6})
    >>> s.expr, s.value
    (-n/(alpha - t_compute), 1000000000.0)
    """
    if not isinstance(comm_time, sp.Expr) or S.beta not in comm_time.free_symbols:
        raise ValueError(f"comm_time: must be a sympy expression in symbols.beta, got {comm_time!r}")
    C = real_above("compute_s", compute_s)
    inputs = {k: real_above(f"values[{k}]", x, strict=False) for k, x in (values or {}).items()}
    T = comm_time.xreplace(inputs)
    if T.free_symbols - {S.beta}:
        raise ValueError(f"values: no number for {sorted(map(str, T.free_symbols - {S.beta}))}")
    value = _bw_value(T, C)
    inputs[T_COMPUTE] = C
    return Solution(_bw_expr(comm_time), value, LINK_BW, "comm_time = compute solved for beta", value, inputs)


# -- 5. largest pipeline depth at a bubble target ------------------------------------------------------
