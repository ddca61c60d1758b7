"""One module per CLI command; each has ``register(subparsers)``."""
from __future__ import annotations

import argparse
import math
import re

from ..checks import count, currency
from ..scenario import CURRENCY, read_scenario, with_settings


def int_at_least(minimum: int):
    """An argparse type: an integer >= ``minimum``, and at most 2**53 as every integer field
    (:func:`concurrency_model.checks.count`).

    >>> int_at_least(1)("10000000000000000000000")
    Traceback (most recent call last):
    ...
    argparse.ArgumentTypeError: 1e+22 is past 2**53, where the model's floating point stops counting exactly
    """
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text!r}") from None
        if v < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {v}")
        try:
            return count("", v, low=minimum)
        except ValueError as e:  # past 2**53
            raise argparse.ArgumentTypeError(str(e).removeprefix(": ")) from None
    return parse


UNITS = {"": 1, "b": 1, "kb": 10**3, "mb": 10**6, "gb": 10**9, "tb": 10**12,
         "kib": 2**10, "mib": 2**20, "gib": 2**30, "tib": 2**40}


def byte_count(text: str) -> int:
    """An argparse type: a whole number of bytes, written ``1048576``, ``1e9``, ``256MiB`` or ``1GB`` (decimal
    kB / MB / GB / TB, binary KiB / MiB / GiB / TiB).

    >>> byte_count("1e9"), byte_count("256MiB"), byte_count("4 kB")
    (1000000000, 268435456, 4000)
    """
    m = re.fullmatch(r"\s*([0-9.]+(?:[eE][+-]?[0-9]+)?)\s*([A-Za-z]*)\s*", text)
    unit = m.group(2).lower() if m else None
    if m is None or unit not in UNITS:
        raise argparse.ArgumentTypeError(f"expected a byte count such as 1048576, 1e9, 256MiB or 1GB, got {text!r}")
    value = float(m.group(1)) * UNITS[unit]
    if not math.isfinite(value) or value != int(value):
        raise argparse.ArgumentTypeError(f"must be a whole number of bytes, got {text!r}")
    try:
        return count("", int(value), low=0)  # one rule for every integer: at most 2**53
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e).removeprefix(": ")) from None


positive_int = int_at_least(1)
nonnegative_int = int_at_least(0)


def add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON object")


def add_scenario(p: argparse.ArgumentParser, what: str = "") -> None:
    """``--scenario FILE`` and repeatable ``--set KEY=VALUE`` (:func:`concurrency_model.scenario.with_settings`)."""
    p.add_argument("--scenario", required=True, help=f"scenario file (JSON or TOML) or the name of a shipped example "
                   f"(presets scenarios){what}; every field: docs/scenario.md")
    p.add_argument("--set", action="append", metavar="KEY=VALUE", default=[],
                   help="change one field of the scenario, e.g. --set parallel.tensor=4 --set cluster=dgx-h100 "
                        "(VALUE as JSON, else a string; repeatable)")
    p.add_argument("--currency", metavar="CODE", default=None,
                   help="the three-letter ISO 4217 code the scenario's price_per_gpu_hour is in, printed beside every "
                        "cost (run.currency, inference.currency; default USD)")


def scenario_of(a) -> dict:
    """The scenario a command was given: the file, read once (it may be a pipe), with its ``--set`` settings and
    ``--currency`` (the ``run`` and ``inference`` objects' ``currency``, where the scenario has them)."""
    raw = with_settings(read_scenario(a.scenario), a.set)
    code = getattr(a, "currency", None)
    if code is not None:
        code = currency("--currency", code)
        raw = {**raw, **{k: {**raw[k], "currency": code} for k in ("run", "inference") if isinstance(raw.get(k), dict)}}
    return raw


def currency_of(raw: dict, section: str) -> str:
    """The currency of a scenario's ``run`` or ``inference`` prices (:data:`..scenario.CURRENCY` by default).

    >>> currency_of({"run": {"tokens": 1e9, "currency": "eur"}}, "run"), currency_of({}, "inference")
    ('EUR', 'USD')
    """
    sec = raw.get(section)
    return currency(f"{section}.currency", sec.get("currency", CURRENCY) if isinstance(sec, dict) else CURRENCY)


__all__ = ["int_at_least", "positive_int", "nonnegative_int", "byte_count", "add_json", "add_scenario",
           "scenario_of", "currency_of"]
