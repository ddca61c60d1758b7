"""Closed forms: break-even points and optima of the cost models, solved with sympy.

Each function returns a :class:`Solution`: the symbolic answer (a sympy expression in the canonical
symbols of :mod:`concurrency_model.symbols` and this module's ``T_FIXED, T_SAMPLE, T_COMPUTE,
EFFICIENCY, BUBBLE``, when ``sympy.solve`` finds one) and the number for the given inputs. Where the
answer must be an integer (ranks, microbatches, stages) the continuous root only seeds a search over the
valid integers, which checks the inequality itself, so rounding can never pick an invalid or worse value.

* :func:`crossover_bytes` — message size at which two collective algorithms cost the same
  (:func:`concurrency_model.comm.select.crossover`; costs of Thakur, Rabenseifner & Gropp 2005,
  ``reference/paper-models.md`` §2.2 [D], not the paper's).
* :func:`optimal_microbatches` — the microbatch count minimising a pipeline step (closed forms of
  :func:`concurrency_model.parallel.pipeline.step_time_expr`, Narayanan et al. 2021 §2.2.1-§2.2.2,
  ``training-formulas.md`` §4.2-§4.3 [P]).
* :func:`max_data_parallel` — the largest data-parallel P keeping a target efficiency (the data-parallel
  step of ``paper-models.md`` §4.1 [D]: compute plus the exposed gradient allreduce).
* :func:`bandwidth_to_hide`, :func:`bandwidth_for_time` — the link bandwidth ``1/beta`` at which a
  transfer takes exactly the compute it should hide behind (alpha-beta model, paper-models §1.2).
* :func:`max_pipeline_stages` — the largest p whose bubble fraction stays within a target.

Every optimum and root here is derived in this module [D]; none is a formula of Ben-Nun & Hoefler.
"""
from __future__ import annotations

import math
import numbers
from dataclasses import dataclass, field
from functools import lru_cache

import sympy as sp

from . import symbols as S
from .comm._common import check_name, check_ranks
from .comm.collectives import ALGORITHMS, check_op_algorithm, collective_time
from .comm.select import crossover
from .parallel import pipeline as pp

__all__ = ["Solution", "crossover_bytes", "optimal_microbatches", "max_data_parallel", "bandwidth_to_hide",
           "bandwidth_for_time", "max_pipeline_stages", "T_FIXED", "T_SAMPLE", "T_COMPUTE", "EFFICIENCY",
           "BUBBLE", "LINK_BW"]

T_FIXED = sp.Symbol("t_fixed", positive=True)  # fixed forward+backward time per microbatch, s
T_SAMPLE = sp.Symbol("t_sample", positive=True)  # forward+backward time per sample, s
T_COMPUTE = sp.Symbol("t_compute", positive=True)  # compute a transfer should hide behind / per step, s
EFFICIENCY = sp.Symbol("E", positive=True)  # target parallel efficiency, 0 < E < 1
BUBBLE = sp.Symbol("f_bubble", positive=True)  # target pipeline bubble fraction
LINK_BW = sp.Symbol("bw", positive=True)  # link bandwidth 1/beta, bytes/s
_BUDGET = sp.Symbol("K", positive=True)  # allowed allreduce seconds (internal)
_L = sp.Symbol("L", nonnegative=True)  # log2 P, continuous (internal)
_X = sp.Symbol("x", positive=True)  # a positive real stand-in for an integer unknown (internal)


@dataclass(frozen=True)
class Solution:
    """A solved quantity.

    ``expr`` is the closed form (``None`` where sympy finds none), ``value`` the answer for the inputs
    (``None``: no solution; ``math.inf``: unbounded), ``variable`` the symbol solved for, ``note`` how it
    was found, ``continuous`` the closed form evaluated at the inputs before rounding to a valid integer,
    and ``inputs`` the numbers substituted for the symbols of ``expr``.
    """

    expr: sp.Expr | None
    value: int | float | None
    variable: sp.Symbol
    note: str
    continuous: float | None = None
    inputs: dict = field(default_factory=dict, compare=False, hash=False)


# -- input checks -------------------------------------------------------------------------------------
def _number(name: str, x, lower: float = 0.0, strict: bool = True) -> float:
    """A finite real ``> lower`` (``>= lower`` when not strict), else ``ValueError`` naming ``name``."""
    if isinstance(x, bool) or not isinstance(x, (numbers.Real, sp.Basic)) or \
            (isinstance(x, sp.Basic) and not x.is_number):
        raise ValueError(f"{name}: must be a number, got {x!r}")
    try:
        f = float(x)
    except TypeError:
        raise ValueError(f"{name}: must be a real number, got {x!r}") from None
    if not math.isfinite(f) or f < lower or (strict and f == lower):
        raise ValueError(f"{name}: must be a finite number {'>' if strict else '>='} {lower:g}, got {x!r}")
    return f


def _fraction(name: str, x) -> float:
    f = _number(name, x)
    if f >= 1:
        raise ValueError(f"{name}: must lie strictly between 0 and 1, got {x!r}")
    return f


def _real_root(sols, fns, args, check, positive: bool = True) -> tuple[sp.Expr, float] | None:
    """The root ``sols[i]`` whose value ``fns[i](*args)`` (mpmath, 30 digits) is real (and positive) and
    passes ``check``; the largest such."""
    import mpmath

    best = None
    with mpmath.workdps(30):
        for s, f in zip(sols, fns):
            try:
                z = complex(f(*(mpmath.mpf(x) for x in args)))
            except (TypeError, ValueError, ZeroDivisionError, OverflowError):
                continue
            if abs(z.imag) > 1e-9 * max(1.0, abs(z.real)) or (positive and not z.real > 0) or not check(z.real):
                continue
            if best is None or z.real > best[1]:
                best = (s, z.real)
    return best


# -- 1. crossover of two collective algorithms ---------------------------------------------------------
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
    a, b = _number("alpha_s", alpha_s), _number("beta_s_per_byte", beta_s_per_byte)
    g = _number("gamma_s_per_byte", gamma_s_per_byte, strict=False)
    value = crossover(op, alg_a, alg_b, P, a, b, g)
    value = None if value is None else float(value)
    expr = _crossover_expr(op, alg_a, alg_b, P)
    inputs = {S.alpha: a, S.beta: b, S.gamma_red: g}
    how = "numeric root (log grid + Brent)" if expr is None else "sympy.solve of T_a(n) = T_b(n)"
    note = f"{op}: {alg_a} vs {alg_b} on P={P}; {how}" + ("" if value is not None else "; they never cross")
    return Solution(expr, value, S.n_bytes, note, value, inputs)


# -- 2. microbatch count minimising a pipeline step ---------------------------------------------------
@lru_cache(maxsize=8)
def _microbatch_expr(schedule: str):
    """Stationary point of step(m) with t_f + t_b = t_fixed + t_sample B / m, or None."""
    step = pp.step_time_expr(schedule).xreplace({pp.T_F: T_FIXED + T_SAMPLE * S.B / _X, pp.T_B: 0, S.m: _X})
    sols = [s for s in sp.solve(sp.diff(step, _X), _X) if s.is_positive is not False]
    return sols[0] if len(sols) == 1 else None


def optimal_microbatches(schedule: str, p: int, global_batch: int, t_fixed_s: float, t_per_sample_s: float,
                         v: int = 1, t_p2p_s: float = 0.0) -> Solution:
    """Microbatch count ``m`` (a divisor of the batch) that minimises one pipeline step.

    A batch of ``B = global_batch`` samples per pipeline replica is split into ``m`` microbatches of
    ``B/m``; one microbatch's forward + backward on the slowest stage takes ``t_fixed + t_sample B/m``
    (per-microbatch overhead such as kernel launches, plus work proportional to the samples) [D]. With the
    step of :func:`~concurrency_model.parallel.pipeline.step_time_expr` this is Narayanan et al. 2021
    §3.4 Eq. (1), ``(B/b + p - 1)(t_f(b) + t_b(b))`` (training-formulas.md §4.2 [P]), and
    ``d step/dm = 0`` gives [D]

    * gpipe, 1f1b: ``(m + p - 1)(t_fixed + t_sample B/m)``, ``m* = sqrt((p - 1) t_sample B / t_fixed)``;
    * interleaved: ``(m + (p - 1)/v)(...)``, ``m* = sqrt((p - 1) t_sample B / (v t_fixed))``, m a multiple
      of p (§2.2.2);
    * async: the step grows with m (no stationary point): the smallest valid m, 1.

    The step is convex in m, so the best valid m is one of the two valid divisors around ``m*``; the
    cheaper wins (ties: the smaller m). Point-to-point terms follow ``step_time_expr``.

    Parameters
    ----------
    schedule : ``gpipe``, ``1f1b``, ``interleaved`` or ``async``
    p : pipeline stages, integer >= 1
    global_batch : samples per step per pipeline replica (B), integer >= 1
    t_fixed_s, t_per_sample_s : seconds per microbatch and per sample (forward + backward), > 0
    v : model chunks per device (interleaved only), integer >= 1
    t_p2p_s : one stage-to-stage transfer, s, >= 0

    Returns
    -------
    Solution with ``variable = m``; ``value`` an int; ``continuous`` is ``m*``.

    Examples
    --------
    >>> s = optimal_microbatches("1f1b", 4, 64, 0.01, 0.0025)
    >>> s.expr
    sqrt(B)*sqrt(t_sample)*sqrt(p - 1)/sqrt(t_fixed)
    >>> s.continuous, s.value
    (6.928203230275509, 8)
    """
    check_name("schedule", schedule, pp.SCHEDULES)
    p, B, v = int(check_ranks(p, "p")), int(check_ranks(global_batch, "global_batch")), int(check_ranks(v, "v"))
    a, c = _number("t_fixed_s", t_fixed_s), _number("t_per_sample_s", t_per_sample_s)
    t_p2p = _number("t_p2p_s", t_p2p_s, strict=False)
    if schedule != "interleaved" and v != 1:
        raise ValueError(f"v: only the interleaved schedule takes v chunks per device; {schedule!r} needs v=1")
    valid = [d for d in sp.divisors(B) if schedule != "interleaved" or d % p == 0]
    if not valid:
        raise ValueError(f"global_batch: the interleaved schedule needs m to be a multiple of p={p} dividing "
                         f"B={B}; there is none")

    def step(m: int) -> float:
        return float(pp.step_time(schedule, p, m, a + c * B / m, 0.0, v, t_p2p))

    expr = _microbatch_expr(schedule)
    inputs = {S.p: p, S.B: B, S.v: v, T_FIXED: a, T_SAMPLE: c}
    if expr is None:
        m_star, note = None, f"{schedule}: the step grows with m; smallest valid m"
        cands = [valid[0]]
    else:
        m_star = float(expr.xreplace(inputs))
        lower, upper = [d for d in valid if d <= m_star], [d for d in valid if d >= m_star]
        cands = sorted({*(lower[-1:]), *(upper[:1])})
        note = f"{schedule}: m* from d step/dm = 0, then the cheaper valid divisor of B={B} around it"
    best = min(cands, key=step)
    return Solution(expr, int(best), S.m, note, m_star, inputs)


# -- 3. largest data-parallel P at a target efficiency ------------------------------------------------
_DP_ARGS = (S.n_bytes, S.alpha, S.beta, S.gamma_red, _BUDGET)


@lru_cache(maxsize=32)
def _dp_roots(algorithm: str, strong: bool):
    """``(roots, root_fns, lhs_fn, log2)``: ``lhs(var) = 0`` is ``T(P) = budget`` in ``var = P`` (ring) or
    in ``var = L``, ``P = 2**L`` with L real (the log-step algorithms); ``roots`` solve it for ``var``;
    the ``_fn`` are mpmath functions of ``_DP_ARGS`` (``lhs_fn``: of ``var`` first)."""
    if algorithm == "pipelined_chain":
        return (), (), None, False
    if algorithm == "ring":
        T = collective_time("allreduce", "ring", S.n_bytes, _X, S.alpha, S.beta, S.gamma_red)
        lhs, var, roots = T - (_BUDGET / _X if strong else _BUDGET), _X, None
        roots = tuple(sp.solve(lhs, _X))
    else:
        Li, z, var = sp.Symbol("L", integer=True, positive=True), sp.Dummy("z"), _L
        T = sp.expand_log(collective_time("allreduce", algorithm, S.n_bytes, 2 ** Li, S.alpha, S.beta,
                                          S.gamma_red), force=True).xreplace({Li: _L})
        lhs = sp.expand(T - (_BUDGET / 2 ** _L if strong else _BUDGET))
        # every log-step cost at P = 2**L is  A L + c0 + c1 2**-L : solve that form once, substitute
        poly = sp.Poly(lhs.subs(2 ** _L, 1 / z), _L, z)
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
    return tuple(sp.solve(A * _L + c0 + c1 * 2 ** (-_L), _L))


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
    C, n = _number("compute_s", compute_s), _number("grad_bytes", grad_bytes)
    a, b = _number("alpha_s", alpha_s), _number("beta_s_per_byte", beta_s_per_byte)
    g = _number("gamma_s_per_byte", gamma_s_per_byte, strict=False)
    E = _fraction("efficiency", efficiency)
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

        root = _real_root(roots, fns, args, solves, positive=not log2)
        expr = cont = seed = None
        if root is not None:
            expr, cont = root[0].xreplace({_BUDGET: budget}), root[1]
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
    n, P = _number("size_bytes", size_bytes), int(check_ranks(P))
    a, C = _number("alpha_s", alpha_s, strict=False), _number("compute_s", compute_s)
    g = _number("gamma_s_per_byte", gamma_s_per_byte, strict=False)
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
    C = _number("compute_s", compute_s)
    inputs = {k: _number(f"values[{k}]", x, strict=False) for k, x in (values or {}).items()}
    T = comm_time.xreplace(inputs)
    if T.free_symbols - {S.beta}:
        raise ValueError(f"values: no number for {sorted(map(str, T.free_symbols - {S.beta}))}")
    value = _bw_value(T, C)
    inputs[T_COMPUTE] = C
    return Solution(_bw_expr(comm_time), value, LINK_BW, "comm_time = compute solved for beta", value, inputs)


# -- 5. largest pipeline depth at a bubble target ------------------------------------------------------
@lru_cache(maxsize=2)
def _stages_expr(of: str) -> sp.Expr:
    form = (_X - 1) / (S.v * S.m) if of == "ideal" else (_X - 1) / (S.v * S.m + _X - 1)
    return sp.solve(sp.Eq(form, BUBBLE), _X)[0]


def max_pipeline_stages(schedule: str, m: int, bubble_fraction: float, v: int = 1,
                        of: str = "ideal") -> Solution:
    """Largest number of stages p whose bubble fraction is at most ``bubble_fraction``.

    ``of="ideal"``: bubble over the ideal time, ``(p - 1)/(v m)`` (Narayanan et al. 2021 §2.2.1-§2.2.2,
    training-formulas.md §4.2-§4.3 [P]), so ``p* = 1 + f v m``; ``of="step"``: bubble over the whole step,
    ``(p - 1)/(v m + p - 1)`` (GPipe's form; training-formulas §4.2 [D]), so ``p* = 1 + f v m/(1 - f)``
    [D]. Interleaved needs m to be a multiple of p (p a divisor of m). ``async`` has no bubble: unbounded
    (``math.inf``). The fraction grows with p, so the answer is the last p at or below ``p*`` (checked with
    the fraction itself, not the rounded root).

    Parameters
    ----------
    schedule : ``gpipe``, ``1f1b``, ``interleaved`` or ``async``
    m : microbatches per step, integer >= 1
    bubble_fraction : target, strictly between 0 and 1
    v : model chunks per device (interleaved only), integer >= 1
    of : ``"ideal"`` (Narayanan et al.'s definition) or ``"step"``

    Returns
    -------
    Solution with ``variable = p``; ``value`` an int, or ``math.inf`` for ``async``.

    Examples
    --------
    >>> s = max_pipeline_stages("1f1b", 32, 0.25)
    >>> s.expr, s.value
    (f_bubble*m*v + 1, 9)
    >>> max_pipeline_stages("1f1b", 32, 0.25, of="step").value
    11
    """
    check_name("schedule", schedule, pp.SCHEDULES)
    check_name("of", of, ("ideal", "step"))
    m, v = int(check_ranks(m, "m")), int(check_ranks(v, "v"))
    f = _fraction("bubble_fraction", bubble_fraction)
    if schedule != "interleaved" and v != 1:
        raise ValueError(f"v: only the interleaved schedule takes v chunks per device; {schedule!r} needs v=1")
    inputs = {S.m: m, S.v: v, BUBBLE: f}
    if schedule == "async":
        return Solution(None, math.inf, S.p, "async: no bubble, any p", None, inputs)
    expr = _stages_expr(of)
    cont = float(expr.xreplace(inputs))

    def within(p: int) -> bool:  # the fraction as pipeline.bubble_fraction(_of_step) computes it
        x = sp.Rational(p - 1, v * m) if of == "ideal" else sp.Rational(p - 1, v * m + p - 1)
        return float(x) <= f

    p0 = max(1, int(math.floor(cont)))  # the fraction grows with p: step to the last p within the target
    while within(p0 + 1):
        p0 += 1
    while p0 > 1 and not within(p0):
        p0 -= 1
    if schedule == "interleaved":  # m a multiple of p (Narayanan et al. 2021 §2.2.2)
        p0 = max(d for d in sp.divisors(m) if d <= p0)
    return Solution(expr, p0, S.p, f"{schedule}: p* from the bubble fraction = target, then the last valid p",
                    cont, inputs)
