"""Checks of numeric inputs: the value, or a one-line ``ValueError`` that names the field.

Every scenario field, preset field and API argument that must be a number or a count goes through
:func:`number` or :func:`count`, so that the same bad value gets the same message everywhere
(``"parallel.data: must be a positive integer, got 0"``). Booleans are refused (``True`` is an ``int`` in
Python, never a size); numpy scalars are accepted; with ``symbols_ok`` a sympy expression with free symbols
passes unchecked (what-if sweeps put symbols in place of numbers).
"""
from __future__ import annotations

import difflib
import math
import numbers

import sympy as sp


def _symbolic(v) -> bool:
    return isinstance(v, sp.Basic) and not v.is_number


def _range(low: float, low_ok: bool, high: float, high_ok: bool) -> str:
    if high == math.inf:
        if low == 0 and not low_ok:
            return "a positive number"
        return f"a number {'>=' if low_ok else '>'} {low:g}"
    return f"a number in {'[' if low_ok else '('}{low:g}, {high:g}{']' if high_ok else ')'}"


def number(field: str, v, *, low: float = 0.0, low_ok: bool = False, high: float = math.inf,
           high_ok: bool = False, none_ok: bool = False, symbols_ok: bool = False):
    """``v`` as a float if it is a finite real in the interval from ``low`` to ``high`` (each end included
    when its ``_ok`` says so), else ``ValueError`` naming ``field``. ``None`` passes with ``none_ok``, a
    sympy expression with free symbols with ``symbols_ok`` (both returned as they are).

    >>> number("inference.load_rps", 2)
    2.0
    >>> number("price", 0, low_ok=True)
    0.0
    >>> number("efficiency", 1.5, high=1, high_ok=True)
    Traceback (most recent call last):
    ...
    ValueError: efficiency: must be a number in (0, 1], got 1.5
    """
    if v is None and none_ok:
        return None
    if symbols_ok and _symbolic(v):
        return v
    what = _range(low, low_ok, high, high_ok)
    if isinstance(v, bool) or not isinstance(v, (numbers.Real, sp.Basic)):
        raise ValueError(f"{field}: must be {what}, got {v!r}")
    try:
        f = float(v)
    except TypeError:  # a sympy expression that is not a real number
        raise ValueError(f"{field}: must be {what}, got {v!r}") from None
    inside = (low <= f if low_ok else low < f) and (f <= high if high_ok else f < high)
    if not math.isfinite(f) or not inside:
        raise ValueError(f"{field}: must be {what}, got {v!r}")
    return f


def items(field: str, v) -> list:
    """``v`` as a list if it is a list or tuple, else ``ValueError`` naming ``field`` (one value where a list is
    asked for: ``pipelines=2`` for ``pipelines=(2,)``).

    >>> items("pipelines", (1, 2))
    [1, 2]
    """
    if not isinstance(v, (list, tuple)):
        raise ValueError(f"{field}: expected a list, got {v!r}")
    return list(v)


EXACT = 2**53  # float64 holds every integer up to 2**53 exactly, and not every one past it


def count(field: str, v, *, low: int = 1, high: int | None = None, none_ok: bool = False,
          symbols_ok: bool = False):
    """``v`` as an int if it is an integer ``>= low`` (and ``<= high``), else ``ValueError`` naming
    ``field``. Floats are refused even when whole (a count written ``2.0`` is a typo worth naming).

    >>> count("parallel.data", 4)
    4
    >>> count("parallel.data", 0)
    Traceback (most recent call last):
    ...
    ValueError: parallel.data: must be a positive integer, got 0
    """
    if v is None and none_ok:
        return None
    if symbols_ok and _symbolic(v):
        return v
    integral = isinstance(v, numbers.Integral) or (isinstance(v, sp.Basic) and v.is_Integer)
    if isinstance(v, bool) or not integral or int(v) < low or (high is not None and int(v) > high):
        if high is not None:
            what = f"an integer in [{low}, {high}]"
        else:
            what = "a positive integer" if low == 1 else f"an integer >= {low}"
        raise ValueError(f"{field}: must be {what}, got {v!r}")
    if int(v) > EXACT:
        raise ValueError(f"{field}: {int(v):.3g} is past 2**53, where the model's floating point stops counting "
                         "exactly")
    return int(v)


def did_you_mean(word, allowed) -> str:
    """``"; did you mean 'tensor'?"`` when ``word`` is a near miss of one of ``allowed`` (difflib's ratio at least
    0.6), else ``""``: appended to an "unknown" error, it turns a typo into its fix.

    >>> did_you_mean("tensr", ["data", "tensor", "pipeline"]), did_you_mean("x", ["data", "tensor"])
    ("; did you mean 'tensor'?", '')
    """
    if not isinstance(word, str):
        return ""
    close = difflib.get_close_matches(word, [str(a) for a in allowed], n=1)
    return f"; did you mean {close[0]!r}?" if close else ""
