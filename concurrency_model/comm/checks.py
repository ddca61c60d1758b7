"""Input checks and integer-logarithm helpers shared by the communication models.

Numbers are checked strictly (``ValueError`` naming the field); symbols are accepted unless their
assumptions contradict the field (a symbol declared negative for ``n``, non-integer for ``P`` ...).

Logarithms of the rank count follow DESIGN.md: exact integers when ``P`` is a number, and
``sympy.floor`` / ``sympy.ceiling`` of ``log(P, 2)`` when ``P`` is a symbol, so that substituting a
number into the symbolic form gives the same value as the numeric call.
"""
from __future__ import annotations

import math
import numbers

import sympy as sp

from ..cost import clog2

__all__ = ["clog2", "flog2", "nonpow2", "active", "check_n", "check_ranks", "check_rate", "check_name",
           "is_num", "as_value"]


def is_num(x: sp.Expr) -> bool:
    """True when ``x`` is a plain number (no free symbols)."""
    return bool(getattr(x, "is_number", False))


def as_value(x):
    """A float when ``x`` is a number, else the sympy expression (numbers in -> float out)."""
    x = sp.sympify(x)
    return float(x) if is_num(x) else x


def check_name(field: str, value, allowed) -> str:
    """``value`` if it is one of ``allowed``, else ``ValueError`` naming ``field`` and listing ``allowed``."""
    if not isinstance(value, str) or value not in allowed:
        raise ValueError(f"{field}: unknown {value!r}; allowed: {', '.join(allowed)}")
    return value


def _real(field: str, value) -> sp.Expr:
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, sp.Basic)):
        raise ValueError(f"{field}: must be a real number or a sympy expression, got {value!r}")
    x = value if isinstance(value, sp.Basic) else sp.sympify(value)
    if x.is_number and (x.is_real is False or not x.is_finite):
        raise ValueError(f"{field}: must be a finite real number, got {value!r}")
    return x


def _nonnegative(field: str, value, unit: str = "") -> sp.Expr:
    """A number >= 0, or an expression not known to be negative."""
    x = _real(field, value)
    if x.is_number:
        if x < 0:
            raise ValueError(f"{field}: must be >= 0{unit}, got {value!r}")
    elif x.is_negative or x.is_real is False:
        raise ValueError(f"{field}: expression {x} must be a non-negative real")
    return x


def check_n(value, field: str = "n") -> sp.Expr:
    """Message size in bytes: a number >= 0, or an expression not known to be negative."""
    return _nonnegative(field, value, " bytes")


def check_rate(field: str, value) -> sp.Expr:
    """alpha (s), beta and gamma (s/byte): a number >= 0 or a symbol not known to be negative."""
    return _nonnegative(field, value)


def check_ranks(value, field: str = "P") -> sp.Expr:
    """Number of ranks: an integer >= 1 (``4.0`` is accepted as 4), or an integer positive symbol."""
    if isinstance(value, bool):
        raise ValueError(f"{field}: must be an integer >= 1, got {value!r}")
    if isinstance(value, sp.Basic) and not value.is_number:
        if value.is_integer is False or value.is_positive is False or value.is_real is False:
            raise ValueError(f"{field}: expression {value} must be a positive integer")
        return value
    if isinstance(value, numbers.Integral) or (isinstance(value, sp.Basic) and value.is_Integer):
        iv = int(value)
    elif isinstance(value, (numbers.Real, sp.Basic)) and float(value).is_integer():
        iv = int(float(value))
    else:
        raise ValueError(f"{field}: must be an integer >= 1, got {value!r}")
    if iv < 1:
        raise ValueError(f"{field}: must be an integer >= 1, got {iv}")
    return sp.Integer(iv)


def flog2(P: sp.Expr) -> sp.Expr:
    """``floor(log2 P)``: exact for integers, ``sympy.floor(log(P, 2))`` for symbols.

    >>> flog2(sp.Integer(6)), flog2(sp.Integer(8)), flog2(sp.Integer(1))
    (2, 3, 0)
    """
    if P.is_Integer:
        return sp.Integer(int(P).bit_length() - 1)
    if P.is_number:
        return sp.Integer(math.floor(math.log2(float(P))))
    return sp.floor(sp.log(P, 2))


def nonpow2(P: sp.Expr) -> sp.Expr:
    """1 if ``P`` is not a power of two, else 0 (symbolic: ``Min(P - 2**floor(log2 P), 1)``).

    ``P - 2**floor(log2 P)`` is the number of "extra" ranks of Thakur, Rabenseifner & Gropp 2005 §4.

    >>> nonpow2(sp.Integer(6)), nonpow2(sp.Integer(8)), nonpow2(sp.Integer(1))
    (1, 0, 0)
    """
    if P.is_Integer:
        p = int(P)
        return sp.Integer(1 if p & (p - 1) else 0)
    return sp.Min(P - 2 ** flog2(P), 1)


def active(P: sp.Expr) -> sp.Expr:
    """1 if there is anyone to talk to (``P >= 2``), else 0 (symbolic: ``Min(P - 1, 1)``)."""
    if P.is_number:
        return sp.Integer(1 if P >= 2 else 0)
    return sp.Min(P - 1, 1)
