"""Input checks shared by the operator models (and the parallel models built on them): sizes are positive integers
or positive sympy symbols."""
from __future__ import annotations

import numbers

import sympy as sp

from ..symbols import nsimplified


def size(name: str, value, minimum: int = 1) -> sp.Expr:
    """Return ``value`` as a sympy expression, or raise ``ValueError`` naming ``name``.

    Numbers must be integers >= ``minimum``; symbols must be declared positive (and integer).
    """
    if isinstance(value, bool):
        raise ValueError(f"{name}: must be an integer >= {minimum}, got {value!r}")
    if isinstance(value, sp.Basic) and not value.is_number:
        sign_ok = value.is_positive if minimum >= 1 else value.is_nonnegative
        if sign_ok is not True or value.is_integer is False:  # unknown sign: not declared positive
            raise ValueError(f"{name}: symbol {value} must be a positive integer symbol")
        return value
    if isinstance(value, numbers.Integral) or (isinstance(value, sp.Basic) and value.is_Integer):
        iv = int(value)
    elif isinstance(value, numbers.Real) and float(value).is_integer():
        iv = int(value)
    else:
        raise ValueError(f"{name}: must be an integer >= {minimum}, got {value!r}")
    if iv < minimum:
        raise ValueError(f"{name}: must be an integer >= {minimum}, got {iv}")
    return sp.Integer(iv)


def value_bytes(value) -> sp.Expr:
    """Bytes per value: a positive number or a positive symbol."""
    if isinstance(value, sp.Basic) and not value.is_number:
        return value
    if isinstance(value, bool) or not isinstance(value, (numbers.Real, sp.Basic)) or float(value) <= 0:
        raise ValueError(f"value_bytes: must be > 0, got {value!r}")
    return nsimplified(value)


def choice(name: str, value: str, allowed) -> str:
    if value not in allowed:
        raise ValueError(f"{name}: unknown {value!r}; allowed: {', '.join(allowed)}")
    return value
