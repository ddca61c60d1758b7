"""One module per CLI command; each has ``register(subparsers)``."""
from __future__ import annotations

import argparse

import sympy as sp


def int_at_least(minimum: int):
    """An argparse type: an integer >= ``minimum``."""
    def parse(text: str) -> int:
        try:
            v = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {text!r}") from None
        if v < minimum:
            raise argparse.ArgumentTypeError(f"must be an integer >= {minimum}, got {v}")
        return v
    return parse


positive_int = int_at_least(1)
nonnegative_int = int_at_least(0)


def num(e):
    """A JSON-ready number (or the expression's text when it has symbols)."""
    e = sp.sympify(e)
    if not e.is_number:
        return str(e)
    return int(e) if e.is_Integer else float(e)


def add_json(p: argparse.ArgumentParser) -> None:
    p.add_argument("--json", action="store_true", help="print one JSON object")
