"""Symbols, the :class:`Solution` record and input checks of :mod:`concurrency_model.solve`."""
from __future__ import annotations

from dataclasses import dataclass, field

import sympy as sp

from ..checks import number


T_FIXED = sp.Symbol("t_fixed", positive=True)  # fixed forward+backward time per microbatch, s
T_SAMPLE = sp.Symbol("t_sample", positive=True)  # forward+backward time per sample, s
T_COMPUTE = sp.Symbol("t_compute", positive=True)  # compute a transfer should hide behind / per step, s
EFFICIENCY = sp.Symbol("E", positive=True)  # target parallel efficiency, 0 < E < 1
BUBBLE = sp.Symbol("f_bubble", positive=True)  # target pipeline bubble fraction
LINK_BW = sp.Symbol("bw", positive=True)  # link bandwidth 1/beta, bytes/s
BUDGET = sp.Symbol("K", positive=True)  # allowed allreduce seconds (internal)
LOG_P = sp.Symbol("L", nonnegative=True)  # log2 P, continuous (internal)
X_INT = sp.Symbol("x", positive=True)  # a positive real stand-in for an integer unknown (internal)


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
def real_above(name: str, x, lower: float = 0.0, strict: bool = True) -> float:
    """A finite real ``> lower`` (``>= lower`` when not strict), else ``ValueError`` naming ``name``."""
    return number(name, x, low=lower, low_ok=not strict)


def fraction(name: str, x) -> float:
    """A number strictly between 0 and 1."""
    return number(name, x, high=1)


def real_root(sols, fns, args, check, positive: bool = True) -> tuple[sp.Expr, float] | None:
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
