"""Checks of inputs: the value, or a one-line ``ValueError`` that names the field.

Every scenario field, preset field and API argument that must be a number or a count goes through
:func:`number` or :func:`count`, so that the same bad value gets the same message everywhere
(``"parallel.data: must be a positive integer, got 0"``). Booleans are refused (``True`` is an ``int`` in
Python, never a size); numpy scalars are accepted; with ``symbols_ok`` a sympy expression with free symbols
passes unchecked (what-if sweeps put symbols in place of numbers). sympy is not imported here: a sympy value can only
exist once sympy is loaded, so it is looked up in ``sys.modules`` (a command that needs no expression, such as
``cache`` or a cached estimate's checks, never pays sympy's import, issue 41). Integers follow one rule everywhere
(:func:`count`): past :data:`EXACT` they are refused. Input files (scenarios, cluster and device files, Hugging Face
configs) are read by :func:`file_text` and parsed by :func:`json_object`, whose errors name the field and the file
(missing, a directory, unreadable, not UTF-8, not JSON, nested too deeply).
"""
from __future__ import annotations

import difflib
import json
import math
import numbers
import sys
from pathlib import Path


def _sympy_basic(v) -> bool:
    """Whether ``v`` is a sympy value (an instance of ``sympy.Basic``), without importing sympy: none exists before
    sympy is loaded."""
    sp = sys.modules.get("sympy")
    return sp is not None and isinstance(v, sp.Basic)


def _symbolic(v) -> bool:
    return _sympy_basic(v) and not v.is_number


def _range(low: float, low_ok: bool, high: float, high_ok: bool, why: str = "") -> str:
    if why:  # a plausible range: the bound below as without one, then the ceiling and its reason
        return f"{_range(low, low_ok, math.inf, False)}, at most {high:g} ({why})" if high_ok else \
            f"{_range(low, low_ok, math.inf, False)}, below {high:g} ({why})"
    if high == math.inf:
        if low == 0 and not low_ok:
            return "a positive number"
        return f"a number {'>=' if low_ok else '>'} {low:g}"
    return f"a number in {'[' if low_ok else '('}{low:g}, {high:g}{']' if high_ok else ')'}"


def number(field: str, v, *, low: float = 0.0, low_ok: bool = False, high: float = math.inf,
           high_ok: bool = False, none_ok: bool = False, symbols_ok: bool = False, why: str = ""):
    """``v`` as a float if it is a finite real in the interval from ``low`` to ``high`` (each end included
    when its ``_ok`` says so), else ``ValueError`` naming ``field`` (and ``why``, the reason for the range, in
    parentheses). ``None`` passes with ``none_ok``, a sympy expression with free symbols with ``symbols_ok``
    (both returned as they are).

    >>> number("inference.load_rps", 2)
    2.0
    >>> number("price", 0, low_ok=True)
    0.0
    >>> number("efficiency", 1.5, high=1, high_ok=True)
    Traceback (most recent call last):
    ...
    ValueError: efficiency: must be a number in (0, 1], got 1.5
    >>> number("training.straggler_cv", 1e308, low_ok=True, high=1, high_ok=True, why="spread over mean")
    Traceback (most recent call last):
    ...
    ValueError: training.straggler_cv: must be a number >= 0, at most 1 (spread over mean), got 1e+308
    """
    if v is None and none_ok:
        return None
    if symbols_ok and _symbolic(v):
        return v
    # a plausible range (``why``) is spelt out for a value past its ceiling; below the floor, the floor says it all
    what = _range(low, low_ok, high, high_ok) if not why else _range(low, low_ok, math.inf, False)
    if isinstance(v, bool) or not (isinstance(v, numbers.Real) or _sympy_basic(v)):
        raise ValueError(f"{field}: must be {what}, got {v!r}")
    try:
        f = float(v)
    except TypeError:  # a sympy expression that is not a real number
        raise ValueError(f"{field}: must be {what}, got {v!r}") from None
    inside = (low <= f if low_ok else low < f) and (f <= high if high_ok else f < high)
    if why and not (f <= high if high_ok else f < high):
        what = _range(low, low_ok, high, high_ok, why)
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
          symbols_ok: bool = False, why: str = ""):
    """``v`` as an int if it is an integer ``>= low`` (and ``<= high``), else ``ValueError`` naming
    ``field`` (and ``why``, the reason for the range). Floats are refused even when whole (a count written
    ``2.0`` is a typo worth naming); past :data:`EXACT` every integer is refused, whatever ``high`` says.

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
    integral = isinstance(v, numbers.Integral) or (_sympy_basic(v) and v.is_Integer)
    if isinstance(v, bool) or not integral or int(v) < low or (high is not None and int(v) > high):
        what = "a positive integer" if low == 1 else f"an integer >= {low}"
        if high is not None and not why:
            what = f"an integer in [{low}, {high}]"
        elif high is not None and integral and int(v) > high:  # past a plausible range: its ceiling and why
            what = f"{what}, at most {high:,} ({why})"
        raise ValueError(f"{field}: must be {what}, got {v!r}")
    if int(v) > EXACT:
        raise ValueError(f"{field}: {int(v):.3g} is past 2**53, where the model's floating point stops counting "
                         "exactly")
    return int(v)


def currency(field: str, v) -> str:
    """A currency as ISO 4217 writes it, three letters (``"USD"``, ``"EUR"``, ``"JPY"``), in capitals: the unit of
    every cost column (``ValueError`` naming ``field`` otherwise). The code is a label only: prices are in it, no
    rate converts between currencies.

    >>> currency("run.currency", "eur")
    'EUR'
    >>> currency("run.currency", "dollars")
    Traceback (most recent call last):
    ...
    ValueError: run.currency: a three-letter code as ISO 4217 writes them (USD, EUR, JPY, ...), got 'dollars'
    """
    if not (isinstance(v, str) and len(v) == 3 and v.isascii() and v.isalpha()):
        raise ValueError(f"{field}: a three-letter code as ISO 4217 writes them (USD, EUR, JPY, ...), got {v!r}")
    return v.upper()


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


def file_text(field: str, path) -> str:
    """The text of the file at ``path``, or ``ValueError`` naming ``field`` and the file: missing, a directory,
    unreadable, or not UTF-8 (JSON and TOML are UTF-8: RFC 8259 section 8.1, TOML 1.0 "Spec").

    >>> file_text("scenario", "/")
    Traceback (most recent call last):
    ...
    ValueError: scenario: '/' is a directory, not a file
    """
    p = Path(str(path))
    if p.is_dir():
        raise ValueError(f"{field}: {str(path)!r} is a directory, not a file")
    try:
        return p.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise ValueError(f"{field}: no such file {str(path)!r}") from None
    except UnicodeDecodeError as e:
        raise ValueError(f"{field}: {str(path)!r} is not UTF-8 text (byte {e.object[e.start]:#04x} at offset "
                         f"{e.start}); save it as UTF-8") from None
    except OSError as e:  # permission denied, a device that cannot be read, ...
        raise ValueError(f"{field}: cannot read {str(path)!r} ({e.strerror or type(e).__name__})") from None


def json_object(field: str, text: str, name: str):
    """``text`` (the contents of the file ``name``) parsed as JSON, or ``ValueError`` naming ``field`` and the
    file when it is not valid JSON or nests deeper than Python's parser can follow (a ``RecursionError``).

    >>> json_object("cluster", '{"nodes": 2}', "c.json")
    {'nodes': 2}
    >>> json_object("cluster", "[" * 100000, "c.json")
    Traceback (most recent call last):
    ...
    ValueError: cluster: c.json nests too deeply to read (more than about 1,000 levels)
    """
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{field}: {name} is not valid JSON ({e.msg}, line {e.lineno})") from None
    except RecursionError:
        raise ValueError(f"{field}: {name} nests too deeply to read (more than about 1,000 levels)") from None
