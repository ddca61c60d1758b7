"""Closed forms of pipelines: the optimal microbatch count and the largest stage count for a bubble target
(see :mod:`concurrency_model.solve`)."""
from __future__ import annotations

import math
from functools import lru_cache

import sympy as sp

from .. import symbols as S
from ..comm.checks import check_name, check_ranks
from ..parallel import pipeline as pp
from .base import X_INT, BUBBLE, T_FIXED, T_SAMPLE, Solution, fraction, real_above


@lru_cache(maxsize=8)
def _microbatch_expr(schedule: str):
    """Stationary point of step(m) with t_f + t_b = t_fixed + t_sample B / m, or None."""
    step = pp.step_time_expr(schedule).xreplace({pp.T_F: T_FIXED + T_SAMPLE * S.B / X_INT, pp.T_B: 0, S.m: X_INT})
    sols = [s for s in sp.solve(sp.diff(step, X_INT), X_INT) if s.is_positive is not False]
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
    a, c = real_above("t_fixed_s", t_fixed_s), real_above("t_per_sample_s", t_per_sample_s)
    t_p2p = real_above("t_p2p_s", t_p2p_s, strict=False)
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
@lru_cache(maxsize=2)
def _stages_expr(of: str) -> sp.Expr:
    form = (X_INT - 1) / (S.v * S.m) if of == "ideal" else (X_INT - 1) / (S.v * S.m + X_INT - 1)
    return sp.solve(sp.Eq(form, BUBBLE), X_INT)[0]


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
    f = fraction("bubble_fraction", bubble_fraction)
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
